/*
 * arrowcert plugin contract, version 1.
 *
 * A plugin is a shared library that exports some of the functions declared
 * below (extern "C", unmangled). The identity functions are required; every
 * other entry point is optional, and the harness only calls what exists.
 * See docs/PLUGIN_ABI.md for the contract in prose.
 *
 * The Arrow definitions are copied from Arrow's abi.h with their canonical
 * include guards kept exactly as-is, so this header can be included beside
 * any other project's copy of them.
 *
 * Licensed under the Apache License, Version 2.0 (the Arrow definitions are
 * from the Apache Arrow project, also Apache License 2.0).
 */

#ifndef ARROWCERT_PLUGIN_H
#define ARROWCERT_PLUGIN_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Arrow C data interface (CDataInterface.rst) ---------------------- */

#ifndef ARROW_C_DATA_INTERFACE
#define ARROW_C_DATA_INTERFACE

#define ARROW_FLAG_DICTIONARY_ORDERED 1
#define ARROW_FLAG_NULLABLE 2
#define ARROW_FLAG_MAP_KEYS_SORTED 4

struct ArrowSchema {
  // Array type description
  const char* format;
  const char* name;
  const char* metadata;
  int64_t flags;
  int64_t n_children;
  struct ArrowSchema** children;
  struct ArrowSchema* dictionary;

  // Release callback
  void (*release)(struct ArrowSchema*);
  // Opaque producer-specific data
  void* private_data;
};

struct ArrowArray {
  // Array data description
  int64_t length;
  int64_t null_count;
  int64_t offset;
  int64_t n_buffers;
  int64_t n_children;
  const void** buffers;
  struct ArrowArray** children;
  struct ArrowArray* dictionary;

  // Release callback
  void (*release)(struct ArrowArray*);
  // Opaque producer-specific data
  void* private_data;
};

#endif  // ARROW_C_DATA_INTERFACE

/* ---- Arrow C device data interface (CDeviceDataInterface.rst) --------- */

#ifndef ARROW_C_DEVICE_DATA_INTERFACE
#define ARROW_C_DEVICE_DATA_INTERFACE

// Spec and Documentation: https://arrow.apache.org/docs/format/CDeviceDataInterface.html

// DeviceType for the allocated memory
typedef int32_t ArrowDeviceType;

// CPU device, same as using ArrowArray directly instead of with ArrowDeviceArray
#define ARROW_DEVICE_CPU 1
// CUDA GPU Device
#define ARROW_DEVICE_CUDA 2
// Pinned CUDA CPU memory by cudaMallocHost
#define ARROW_DEVICE_CUDA_HOST 3
// OpenCL Device
#define ARROW_DEVICE_OPENCL 4
// Vulkan buffer for next-gen graphics
#define ARROW_DEVICE_VULKAN 7
// Metal for Apple GPU
#define ARROW_DEVICE_METAL 8
// Verilog simulator buffer
#define ARROW_DEVICE_VPI 9
// ROCm GPUs for AMD GPUs
#define ARROW_DEVICE_ROCM 10
// Pinned ROCm CPU memory allocated by hipMallocHost
#define ARROW_DEVICE_ROCM_HOST 11
// Reserved for extension
#define ARROW_DEVICE_EXT_DEV 12
// CUDA managed/unified memory allocated by cudaMallocManaged
#define ARROW_DEVICE_CUDA_MANAGED 13
// unified shared memory allocated on a oneAPI non-partitioned device.
#define ARROW_DEVICE_ONEAPI 14
// GPU support for next-gen WebGPU standard.
#define ARROW_DEVICE_WEBGPU 15
// Qualcomm Hexagon DSP
#define ARROW_DEVICE_HEXAGON 16

struct ArrowDeviceArray {
  // the Allocated Array
  //
  // the buffers in the array (along with the buffers of any
  // children) are what is allocated on the device.
  struct ArrowArray array;
  // The device id to identify a specific device
  int64_t device_id;
  // The type of device which can access this memory.
  ArrowDeviceType device_type;
  // An event-like object to synchronize on if needed.
  void* sync_event;
  // Reserved bytes for future expansion.
  int64_t reserved[3];
};

#endif  // ARROW_C_DEVICE_DATA_INTERFACE

/* ---- Arrow C stream interface (CStreamInterface.rst) ------------------ */

#ifndef ARROW_C_STREAM_INTERFACE
#define ARROW_C_STREAM_INTERFACE

struct ArrowArrayStream {
  // Callback to get the stream type
  int (*get_schema)(struct ArrowArrayStream*, struct ArrowSchema* out);

  // Callback to get the next array
  int (*get_next)(struct ArrowArrayStream*, struct ArrowArray* out);

  // Callback to get optional detailed error information.
  const char* (*get_last_error)(struct ArrowArrayStream*);

  // Release callback: release the stream's own resources.
  void (*release)(struct ArrowArrayStream*);

  // Opaque producer-specific data
  void* private_data;
};

#endif  // ARROW_C_STREAM_INTERFACE

/* ---- Arrow C device stream interface ---------------------------------- */

#ifndef ARROW_C_DEVICE_STREAM_INTERFACE
#define ARROW_C_DEVICE_STREAM_INTERFACE

// Equivalent to ArrowArrayStream, but for ArrowDeviceArrays.
struct ArrowDeviceArrayStream {
  // The device that this stream produces data on.
  ArrowDeviceType device_type;

  // Callback to get the stream schema
  int (*get_schema)(struct ArrowDeviceArrayStream* self, struct ArrowSchema* out);

  // Callback to get the next array
  int (*get_next)(struct ArrowDeviceArrayStream* self, struct ArrowDeviceArray* out);

  // Callback to get optional detailed error information.
  const char* (*get_last_error)(struct ArrowDeviceArrayStream* self);

  // Release callback: release the stream's own resources.
  void (*release)(struct ArrowDeviceArrayStream* self);

  // Opaque producer-specific data
  void* private_data;
};

#endif  // ARROW_C_DEVICE_STREAM_INTERFACE

/* ---- Arrow async device stream interface (layout of Arrow's abi.h) ---- */

#ifndef ARROW_C_ASYNC_STREAM_INTERFACE
#define ARROW_C_ASYNC_STREAM_INTERFACE

// EXPERIMENTAL: ArrowAsyncTask represents available data from a producer
// that was passed to an invocation of `on_next_task` on the
// ArrowAsyncDeviceStreamHandler.
struct ArrowAsyncTask {
  // Exactly once: populate `out` (or clean up when `out` is NULL).
  int (*extract_data)(struct ArrowAsyncTask* self, struct ArrowDeviceArray* out);

  void* private_data;
};

// EXPERIMENTAL: ArrowAsyncProducer represents a 1-to-1 relationship between
// an async producer and consumer. It is owned by the producer.
struct ArrowAsyncProducer {
  // The device type this producer will provide data on.
  ArrowDeviceType device_type;

  // Registers n (> 0) more arrays the consumer is ready to receive.
  void (*request)(struct ArrowAsyncProducer* self, int64_t n);

  // Idempotent, thread-safe: the producer must eventually stop.
  void (*cancel)(struct ArrowAsyncProducer* self);

  // NULL or metadata in the ArrowSchema.metadata encoding.
  const char* additional_metadata;

  void* private_data;
};

// EXPERIMENTAL: Similar to ArrowDeviceArrayStream, except designed for an
// asynchronous style of interaction. The consumer allocates and populates it.
struct ArrowAsyncDeviceStreamHandler {
  // consumer-specific handlers
  int (*on_schema)(struct ArrowAsyncDeviceStreamHandler* self,
                   struct ArrowSchema* stream_schema);
  int (*on_next_task)(struct ArrowAsyncDeviceStreamHandler* self,
                      struct ArrowAsyncTask* task, const char* metadata);
  void (*on_error)(struct ArrowAsyncDeviceStreamHandler* self, int code,
                   const char* message, const char* metadata);

  // release callback
  void (*release)(struct ArrowAsyncDeviceStreamHandler* self);

  // must be populated before calling any callbacks
  struct ArrowAsyncProducer* producer;

  // opaque handler-specific data
  void* private_data;
};

#endif  // ARROW_C_ASYNC_STREAM_INTERFACE

/* ---- arrowcert plugin entry points ------------------------------------ */

/* The contract version this header describes. */
#define ARROWCERT_PLUGIN_ABI_VERSION 1

#if defined(_WIN32)
#define ARROWCERT_EXPORT __declspec(dllexport)
#else
#define ARROWCERT_EXPORT __attribute__((visibility("default")))
#endif

/* Identity (required). */
ARROWCERT_EXPORT int32_t arrowcert_plugin_abi_version(void); /* must return 1 */
ARROWCERT_EXPORT const char* arrowcert_plugin_name(void);    /* static UTF-8 */

/* Optional. */
ARROWCERT_EXPORT int32_t arrowcert_plugin_supports_device(int32_t device_type);
ARROWCERT_EXPORT int64_t arrowcert_bytes_allocated(void);
ARROWCERT_EXPORT const char* arrowcert_last_error(void);
ARROWCERT_EXPORT void arrowcert_free(void* ptr);

/* Producer entry points: 0 on success, an errno value otherwise. */
ARROWCERT_EXPORT int arrowcert_produce_schema(const uint8_t* ipc, int64_t ipc_len,
                                              struct ArrowSchema* out);

ARROWCERT_EXPORT int arrowcert_produce_device_array(
    const uint8_t* ipc, int64_t ipc_len, int64_t batch_index, int64_t slice_offset,
    int64_t slice_length, int32_t device_type, int64_t device_id,
    struct ArrowDeviceArray* out);

ARROWCERT_EXPORT int arrowcert_produce_device_stream(const uint8_t* ipc, int64_t ipc_len,
                                                     int32_t device_type,
                                                     int64_t device_id,
                                                     struct ArrowDeviceArrayStream* out);

ARROWCERT_EXPORT int arrowcert_produce_async(const uint8_t* ipc, int64_t ipc_len,
                                             int32_t device_type, int64_t device_id,
                                             struct ArrowAsyncDeviceStreamHandler* handler);

ARROWCERT_EXPORT int arrowcert_produce_array(const uint8_t* ipc, int64_t ipc_len,
                                             int64_t batch_index, int64_t slice_offset,
                                             int64_t slice_length, struct ArrowArray* out);

ARROWCERT_EXPORT int arrowcert_produce_stream(const uint8_t* ipc, int64_t ipc_len,
                                              struct ArrowArrayStream* out);

/* Optional: the schema the library exports together with that batch's
   array (the schema half of a PyCapsule __arrow_c_array__ pair, a C++
   ExportRecordBatch's schema). The harness compares it with the schema
   asked for, as it compares a stream's get_schema; absent, the array path
   reads the batch with arrowcert_produce_schema's schema alone. */
ARROWCERT_EXPORT int arrowcert_produce_array_schema(const uint8_t* ipc, int64_t ipc_len,
                                                    int64_t batch_index, int64_t slice_offset,
                                                    int64_t slice_length,
                                                    struct ArrowSchema* out);

/* Optional, all three or none: one library object holding that batch
   (`*object`, the plugin's handle), exported as many times as the harness
   calls arrowcert_export_object (each call the same object's array export,
   a new structure), released with arrowcert_release_object once every
   export is asked for (the exports themselves are released by their own
   callbacks, before or after). The harness takes one export apart and
   releases it, then judges the others and a fresh one. */
ARROWCERT_EXPORT int arrowcert_produce_object(const uint8_t* ipc, int64_t ipc_len,
                                              int64_t batch_index, int64_t slice_offset,
                                              int64_t slice_length, void** object);
ARROWCERT_EXPORT int arrowcert_export_object(void* object, struct ArrowArray* out);
ARROWCERT_EXPORT void arrowcert_release_object(void* object);

/* Optional: the consumer's own view of what its last consume call on this
   thread read, made without its Arrow exporter (a library's conversion to
   its native values), as JSON text (docs/PLUGIN_ABI.md, "An independent
   view of what was read"); valid until the next call on the thread, NULL
   when there is none. The harness compares it with what it sent. */
ARROWCERT_EXPORT const char* arrowcert_consume_values(void);

/* Optional: slices of the whole stream. Rows [slice_offset, slice_offset +
   slice_length) of the table the stream's batches make, counted across
   batch boundaries as a table's or data frame's slice counts them
   (slice_length == -1: to the end); the same schema; how the rows are cut
   into batches is the producer's choice (empty batches allowed). Zero-copy
   where the library's slice is. Otherwise each is its whole-stream
   counterpart. The harness never asks for rows past the end. Absent: the
   sliced cases are skipped ("not exported"). */
ARROWCERT_EXPORT int arrowcert_produce_sliced_stream(const uint8_t* ipc, int64_t ipc_len,
                                                     int64_t slice_offset,
                                                     int64_t slice_length,
                                                     struct ArrowArrayStream* out);
ARROWCERT_EXPORT int arrowcert_produce_sliced_device_stream(
    const uint8_t* ipc, int64_t ipc_len, int64_t slice_offset, int64_t slice_length,
    int32_t device_type, int64_t device_id, struct ArrowDeviceArrayStream* out);
ARROWCERT_EXPORT int arrowcert_produce_sliced_async(
    const uint8_t* ipc, int64_t ipc_len, int64_t slice_offset, int64_t slice_length,
    int32_t device_type, int64_t device_id, struct ArrowAsyncDeviceStreamHandler* handler);

/* Consumer entry points. */
ARROWCERT_EXPORT int arrowcert_consume_device_array(struct ArrowSchema* schema,
                                                    struct ArrowDeviceArray* array,
                                                    uint8_t** out_ipc, int64_t* out_len);

ARROWCERT_EXPORT int arrowcert_consume_device_stream(struct ArrowDeviceArrayStream* stream,
                                                     uint8_t** out_ipc, int64_t* out_len);

ARROWCERT_EXPORT int arrowcert_consume_array(struct ArrowSchema* schema,
                                             struct ArrowArray* array, uint8_t** out_ipc,
                                             int64_t* out_len);

ARROWCERT_EXPORT int arrowcert_consume_stream(struct ArrowArrayStream* stream,
                                              uint8_t** out_ipc, int64_t* out_len);

ARROWCERT_EXPORT int arrowcert_consume_async_start(
    struct ArrowAsyncDeviceStreamHandler* handler, void** token);

ARROWCERT_EXPORT int arrowcert_consume_async_finish(void* token, int64_t timeout_ms,
                                                    uint8_t** out_ipc, int64_t* out_len);

/* Optional: stop reading the stream of `token` (before its finish returned),
   as a user dropping its reader would: call the producer's cancel, and go on
   handling what still comes (tasks, on_error) until the handler's release.
   0 when cancel was called. */
ARROWCERT_EXPORT int arrowcert_consume_async_cancel(void* token);

/* ---- data as a stream (optional variants) ------------------------------
   For a library with no IPC reader or writer. A producer variant takes the
   scenario as an ArrowArrayStream the harness exports, instead of IPC bytes:
   every record batch (schema, stream), or the one batch to export, already
   sliced (array, device array). The plugin owns `data` from the call on: it
   moves it (bitwise copy, source marked released) or releases it; whatever
   is still live when the call returns, the harness releases. A consumer
   variant hands back what it read as an ArrowArrayStream (exported by its
   library) in `read`, instead of IPC bytes; the harness validates it before
   reading it. The harness calls a variant only when the plugin does not
   export the entry point it stands for. */
ARROWCERT_EXPORT int arrowcert_produce_schema_from_stream(struct ArrowArrayStream* data,
                                                          struct ArrowSchema* out);
ARROWCERT_EXPORT int arrowcert_produce_array_from_stream(struct ArrowArrayStream* data,
                                                         struct ArrowArray* out);
ARROWCERT_EXPORT int arrowcert_produce_array_schema_from_stream(struct ArrowArrayStream* data,
                                                                struct ArrowSchema* out);
ARROWCERT_EXPORT int arrowcert_produce_object_from_stream(struct ArrowArrayStream* data,
                                                          void** object);
ARROWCERT_EXPORT int arrowcert_produce_device_array_from_stream(
    struct ArrowArrayStream* data, int32_t device_type, int64_t device_id,
    struct ArrowDeviceArray* out);
ARROWCERT_EXPORT int arrowcert_produce_stream_from_stream(struct ArrowArrayStream* data,
                                                          struct ArrowArrayStream* out);
ARROWCERT_EXPORT int arrowcert_produce_device_stream_from_stream(
    struct ArrowArrayStream* data, int32_t device_type, int64_t device_id,
    struct ArrowDeviceArrayStream* out);
/* `data` holds every batch, whole: the library slices it itself. */
ARROWCERT_EXPORT int arrowcert_produce_sliced_stream_from_stream(
    struct ArrowArrayStream* data, int64_t slice_offset, int64_t slice_length,
    struct ArrowArrayStream* out);
ARROWCERT_EXPORT int arrowcert_produce_sliced_device_stream_from_stream(
    struct ArrowArrayStream* data, int64_t slice_offset, int64_t slice_length,
    int32_t device_type, int64_t device_id, struct ArrowDeviceArrayStream* out);
ARROWCERT_EXPORT int arrowcert_consume_array_to_stream(struct ArrowSchema* schema,
                                                       struct ArrowArray* array,
                                                       struct ArrowArrayStream* read);
ARROWCERT_EXPORT int arrowcert_consume_device_array_to_stream(struct ArrowSchema* schema,
                                                              struct ArrowDeviceArray* array,
                                                              struct ArrowArrayStream* read);
ARROWCERT_EXPORT int arrowcert_consume_stream_to_stream(struct ArrowArrayStream* stream,
                                                        struct ArrowArrayStream* read);
ARROWCERT_EXPORT int arrowcert_consume_device_stream_to_stream(
    struct ArrowDeviceArrayStream* stream, struct ArrowArrayStream* read);

/* Optional: 1 when the plugin serves `entry_point` (a name of the contract,
   e.g. "arrowcert_produce_array"), 0 when it exports the symbol but does not
   serve it in this configuration (a bridge configured at run time).
   Absent: every exported entry point is served. */
ARROWCERT_EXPORT int32_t arrowcert_plugin_offers(const char* entry_point);

/* Optional: NULL, or why the plugin could not set itself up (its adapter
   does not load, say): the harness reports it as bad input and calls
   nothing else. Asked right after the identity functions. */
ARROWCERT_EXPORT const char* arrowcert_plugin_load_error(void);

#ifdef __cplusplus
}
#endif

#endif  /* ARROWCERT_PLUGIN_H */

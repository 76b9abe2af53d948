/*
 * arrowcert producer plugin for nanoarrow (C library, version in
 * NANOARROW_VERSION; built by scripts/real/build-nanoarrow.sh).
 *
 * Every structure handed to the harness is built and exported by nanoarrow
 * itself: the harness's IPC stream bytes are copied into an ArrowBuffer and
 * read with nanoarrow's IPC reader (ArrowIpcInputStreamInitBuffer +
 * ArrowIpcArrayStreamReaderInit), which writes straight into the harness's
 * `out` structures:
 *
 *   schema         ArrowArrayStream.get_schema of the IPC reader
 *   array          ArrowArrayStream.get_next of the IPC reader (batch
 *                  `batch_index`; the earlier batches are read and released)
 *   stream         the IPC reader's ArrowArrayStream itself
 *   device array   ArrowDeviceArrayInit(ArrowDeviceCpu(), out, batch, NULL)
 *   device stream  ArrowDeviceBasicArrayStreamInit(out, reader, ArrowDeviceCpu())
 *
 * The adapter never initialises, repairs or re-wraps what nanoarrow writes,
 * with one documented exception, the slice:
 *
 * SLICES. nanoarrow has no zero-copy slice of an ArrowArray. A slice
 * (`slice_offset`, `slice_length`) is exported by setting `offset` and
 * `length` of the record batch's root struct array, which is what the C
 * data interface allows for any array ("ArrowArray.offset: the logical
 * offset inside the array (i.e. the number of items from the physical start
 * of the buffers)"); the columns keep their full buffers, lengths and
 * offsets, and the struct's offset applies to them as the columnar format
 * specifies for struct arrays. The root struct of a record batch decoded by
 * nanoarrow has no validity bitmap and null_count 0, which stays true of
 * any slice. This works the same for every type, so no type is refused for
 * slicing.
 *
 * Devices: CPU only (ARROW_DEVICE_CPU with device_id -1, nanoarrow's CPU
 * device). Anything else is ENOSYS.
 *
 * Errors: errno values; nanoarrow's ENOTSUP (types its IPC reader does not
 * decode yet: Utf8View, BinaryView, ListView, LargeListView, RunEndEncoded;
 * dictionary deltas) is reported as ENOSYS (not supported), with nanoarrow's
 * message in arrowcert_last_error().
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* nanoarrow's headers first: they and arrowcert_plugin.h define the Arrow
   structs under the same canonical ARROW_C_* guards. */
#include "nanoarrow/nanoarrow.h"
#include "nanoarrow/nanoarrow_device.h"
#include "nanoarrow/nanoarrow_ipc.h"

#include "arrowcert_plugin.h"

#define PLUGIN_NAME "nanoarrow " NANOARROW_VERSION

/* ---- identity and errors ---------------------------------------------- */

ARROWCERT_EXPORT int32_t arrowcert_plugin_abi_version(void) {
  return ARROWCERT_PLUGIN_ABI_VERSION;
}

ARROWCERT_EXPORT const char* arrowcert_plugin_name(void) { return PLUGIN_NAME; }

ARROWCERT_EXPORT int32_t arrowcert_plugin_supports_device(int32_t device_type) {
  return device_type == ARROW_DEVICE_CPU;
}

static _Thread_local char last_error_buf[1024];
static _Thread_local const char* last_error = NULL;

ARROWCERT_EXPORT const char* arrowcert_last_error(void) { return last_error; }

/* Every entry point starts with this: the message is valid until the next
   call on this thread. */
static void clear_error(void) { last_error = NULL; }

static int fail(int code, const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  vsnprintf(last_error_buf, sizeof(last_error_buf), fmt, args);
  va_end(args);
  last_error = last_error_buf;
  return code;
}

/* nanoarrow says ENOTSUP for what it does not implement; the plugin
   contract says ENOSYS. */
static int errno_of(int code) { return code == ENOTSUP ? ENOSYS : code; }

static const char* stream_error(struct ArrowArrayStream* stream) {
  const char* msg = stream->get_last_error(stream);
  return msg != NULL && msg[0] != '\0' ? msg : "(no message)";
}

/* ---- reading the harness's IPC stream with nanoarrow ------------------ */

/* Initialises `out` as nanoarrow's IPC stream reader over a copy of the
   bytes (the harness's buffer is only valid during the call; the reader
   lives on in streams). */
static int reader_init(const uint8_t* ipc, int64_t ipc_len, struct ArrowArrayStream* out) {
  if (ipc == NULL && ipc_len != 0) return fail(EINVAL, "ipc is NULL");
  if (ipc_len < 0) return fail(EINVAL, "ipc_len is negative (%" PRId64 ")", ipc_len);
  if (out == NULL) return fail(EINVAL, "out is NULL");

  struct ArrowBuffer bytes;
  ArrowBufferInit(&bytes);
  int code = ArrowBufferAppend(&bytes, ipc, ipc_len);
  if (code != NANOARROW_OK) {
    ArrowBufferReset(&bytes);
    return fail(code, "copying %" PRId64 " IPC bytes failed", ipc_len);
  }

  struct ArrowIpcInputStream input;
  code = ArrowIpcInputStreamInitBuffer(&input, &bytes);
  if (code != NANOARROW_OK) {
    ArrowBufferReset(&bytes);
    return fail(code, "ArrowIpcInputStreamInitBuffer failed");
  }

  code = ArrowIpcArrayStreamReaderInit(out, &input, NULL);
  if (code != NANOARROW_OK) {
    input.release(&input);
    return fail(errno_of(code), "ArrowIpcArrayStreamReaderInit failed (%d)", code);
  }
  return 0;
}

/* Reads the schema once, so that a stream whose types nanoarrow's IPC
   reader cannot decode is refused up front (ENOSYS) instead of failing at
   the harness's first get_schema. Releases `stream` on failure. */
static int check_schema(struct ArrowArrayStream* stream) {
  struct ArrowSchema schema;
  int code = stream->get_schema(stream, &schema);
  if (code != 0) {
    fail(errno_of(code), "nanoarrow's IPC reader: %s", stream_error(stream));
    stream->release(stream);
    return errno_of(code);
  }
  schema.release(&schema);
  return 0;
}

/* Reads batch `batch_index` into `out` (nanoarrow's get_next writes it),
   releasing the ones before it, and applies the slice to its root struct
   (see SLICES above). */
static int read_batch(struct ArrowArrayStream* reader, int64_t batch_index,
                      int64_t slice_offset, int64_t slice_length, struct ArrowArray* out) {
  if (batch_index < 0) return fail(EINVAL, "batch_index is negative (%" PRId64 ")", batch_index);
  for (int64_t i = 0; i < batch_index; i++) {
    struct ArrowArray skipped;
    int code = reader->get_next(reader, &skipped);
    if (code != 0) {
      return fail(errno_of(code), "nanoarrow's IPC reader, batch %" PRId64 ": %s", i,
                  stream_error(reader));
    }
    if (skipped.release == NULL) {
      return fail(EINVAL, "batch_index %" PRId64 " is past the stream's %" PRId64 " batches",
                  batch_index, i);
    }
    skipped.release(&skipped);
  }

  int code = reader->get_next(reader, out);
  if (code != 0) {
    return fail(errno_of(code), "nanoarrow's IPC reader, batch %" PRId64 ": %s", batch_index,
                stream_error(reader));
  }
  if (out->release == NULL) {
    return fail(EINVAL, "batch_index %" PRId64 " is past the end of the stream", batch_index);
  }

  if (slice_length == -1 && slice_offset == 0) return 0;
  int64_t length = out->length;
  int64_t want = slice_length == -1 ? length - slice_offset : slice_length;
  if (slice_offset < 0 || want < 0 || slice_offset > length || want > length - slice_offset) {
    out->release(out);
    return fail(EINVAL,
                "slice offset %" PRId64 " length %" PRId64 " is outside batch %" PRId64
                " of length %" PRId64,
                slice_offset, slice_length, batch_index, length);
  }
  /* The one field-level change the adapter makes: nanoarrow has no slice. */
  out->offset += slice_offset;
  out->length = want;
  return 0;
}

/* ---- producer entry points -------------------------------------------- */

ARROWCERT_EXPORT int arrowcert_produce_schema(const uint8_t* ipc, int64_t ipc_len,
                                              struct ArrowSchema* out) {
  clear_error();
  if (out == NULL) return fail(EINVAL, "out is NULL");
  struct ArrowArrayStream reader;
  int code = reader_init(ipc, ipc_len, &reader);
  if (code != 0) return code;
  code = reader.get_schema(&reader, out);
  if (code != 0) {
    fail(errno_of(code), "nanoarrow's IPC reader: %s", stream_error(&reader));
  }
  reader.release(&reader);
  return errno_of(code);
}

ARROWCERT_EXPORT int arrowcert_produce_array(const uint8_t* ipc, int64_t ipc_len,
                                             int64_t batch_index, int64_t slice_offset,
                                             int64_t slice_length, struct ArrowArray* out) {
  clear_error();
  if (out == NULL) return fail(EINVAL, "out is NULL");
  struct ArrowArrayStream reader;
  int code = reader_init(ipc, ipc_len, &reader);
  if (code != 0) return code;
  code = check_schema(&reader);
  if (code != 0) return code;
  code = read_batch(&reader, batch_index, slice_offset, slice_length, out);
  reader.release(&reader);
  return code;
}

ARROWCERT_EXPORT int arrowcert_produce_stream(const uint8_t* ipc, int64_t ipc_len,
                                              struct ArrowArrayStream* out) {
  clear_error();
  if (out == NULL) return fail(EINVAL, "out is NULL");
  int code = reader_init(ipc, ipc_len, out);
  if (code != 0) return code;
  return check_schema(out);
}

static int check_device(int32_t device_type, int64_t device_id) {
  if (device_type != ARROW_DEVICE_CPU) {
    return fail(ENOSYS,
                "this nanoarrow build has the CPU device only (no CUDA/Metal); "
                "device_type %" PRId32 " requested",
                device_type);
  }
  struct ArrowDevice* cpu = ArrowDeviceCpu();
  if (device_id != cpu->device_id) {
    return fail(ENOSYS,
                "nanoarrow's CPU device has device_id %" PRId64 "; device_id %" PRId64
                " requested",
                cpu->device_id, device_id);
  }
  return 0;
}

ARROWCERT_EXPORT int arrowcert_produce_device_array(const uint8_t* ipc, int64_t ipc_len,
                                                    int64_t batch_index,
                                                    int64_t slice_offset,
                                                    int64_t slice_length, int32_t device_type,
                                                    int64_t device_id,
                                                    struct ArrowDeviceArray* out) {
  clear_error();
  if (out == NULL) return fail(EINVAL, "out is NULL");
  int code = check_device(device_type, device_id);
  if (code != 0) return code;
  struct ArrowArrayStream reader;
  code = reader_init(ipc, ipc_len, &reader);
  if (code != 0) return code;
  code = check_schema(&reader);
  if (code != 0) return code;

  struct ArrowArray batch;
  code = read_batch(&reader, batch_index, slice_offset, slice_length, &batch);
  reader.release(&reader);
  if (code != 0) return code;

  /* nanoarrow initialises the whole ArrowDeviceArray (device type and id,
     sync_event NULL, reserved zero) and moves the batch into it. */
  code = ArrowDeviceArrayInit(ArrowDeviceCpu(), out, &batch, NULL);
  if (code != NANOARROW_OK) {
    batch.release(&batch);
    return fail(errno_of(code), "ArrowDeviceArrayInit failed (%d)", code);
  }
  return 0;
}

ARROWCERT_EXPORT int arrowcert_produce_device_stream(const uint8_t* ipc, int64_t ipc_len,
                                                     int32_t device_type, int64_t device_id,
                                                     struct ArrowDeviceArrayStream* out) {
  clear_error();
  if (out == NULL) return fail(EINVAL, "out is NULL");
  int code = check_device(device_type, device_id);
  if (code != 0) return code;
  struct ArrowArrayStream reader;
  code = reader_init(ipc, ipc_len, &reader);
  if (code != 0) return code;
  code = check_schema(&reader);
  if (code != 0) return code;

  /* Takes ownership of the reader on success. */
  code = ArrowDeviceBasicArrayStreamInit(out, &reader, ArrowDeviceCpu());
  if (code != NANOARROW_OK) {
    reader.release(&reader);
    return fail(errno_of(code), "ArrowDeviceBasicArrayStreamInit failed (%d)", code);
  }
  return 0;
}

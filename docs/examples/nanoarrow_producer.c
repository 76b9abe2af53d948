/*
 * A complete arrowcert producer plugin in C over nanoarrow (the C library).
 *
 * Build:   scripts/examples/build-nanoarrow-examples.sh OUTDIR
 * Certify: arrowcert certify --producer OUTDIR/libnanoarrow_producer_example.so
 *
 * It has no IPC reader: it exports the stream variants of the producer entry
 * points (docs/PLUGIN_ABI.md, "Data as a stream"), so the harness hands the
 * scenario over as an ArrowArrayStream instead of IPC bytes. For each call:
 *
 *   import  the harness's stream is read with nanoarrow: ArrowArrayStreamGetSchema
 *           / ArrowArrayStreamGetNext, then ArrowArrayViewInitFromSchema +
 *           ArrowArrayViewSetArray, which validates each batch and works out the
 *           sizes of its buffers;
 *   export  a fresh ArrowArray that nanoarrow owns (nanoarrow_example_copy.h:
 *           ArrowArrayInitFromSchema, buffers appended from the view,
 *           ArrowArrayFinishBuilding), and a nanoarrow ArrowSchema
 *           (ArrowSchemaDeepCopy); a stream is nanoarrow's ArrowBasicArrayStream
 *           over those arrays. The device variants wrap the same for
 *           nanoarrow's CPU device (ArrowDeviceArrayInit,
 *           ArrowDeviceBasicArrayStreamInit).
 *
 * Your library goes in place of the copy: import the view into your own
 * structures, then export them with your own release callbacks. The copy
 * here stands for that round trip, so that what the harness certifies is
 * nanoarrow's exporter, not a pass-through of the harness's own arrays.
 *
 * A type nanoarrow does not know, or a device other than the CPU, is
 * declined with ENOSYS and a message (the contract's "cannot honour"); the
 * harness then skips that case.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

/* nanoarrow first: it and arrowcert_plugin.h define the Arrow structs under
   the same canonical ARROW_C_* include guards, so either copy serves. */
#include "nanoarrow/nanoarrow.h"
#include "nanoarrow/nanoarrow_device.h"

#include "arrowcert_plugin.h"

/* example_copy_array: nanoarrow's own copy of a view (shared with the consumer). */
#include "nanoarrow_example_copy.h"

/* ---- identity and errors (as in minimal_plugin.c) ---------------------- */

int32_t arrowcert_plugin_abi_version(void) { return ARROWCERT_PLUGIN_ABI_VERSION; }

const char* arrowcert_plugin_name(void) {
  return "nanoarrow producer example (nanoarrow " NANOARROW_VERSION ")";
}

/* Host memory only: the device variants serve ARROW_DEVICE_CPU (nanoarrow's
   CPU device) and decline anything else. */
int32_t arrowcert_plugin_supports_device(int32_t device_type) {
  return device_type == ARROW_DEVICE_CPU;
}

/* The message of the last failed call on this thread (the harness asks
   right after a non-zero return). */
static _Thread_local char last_error_buf[1024];
static _Thread_local const char* last_error = NULL;

const char* arrowcert_last_error(void) { return last_error; }

static int fail(int code, const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  vsnprintf(last_error_buf, sizeof(last_error_buf), fmt, args);
  va_end(args);
  last_error = last_error_buf;
  return code;
}

/* Takes `batch` (releases it on every path) and writes nanoarrow's own copy
   of it to `out`. */
static int export_batch(const struct ArrowSchema* schema, struct ArrowArray* batch,
                        struct ArrowArray* out) {
  struct ArrowError error = {{0}};
  struct ArrowArrayView view;
  /* Import: a view of the batch, validated (ArrowArrayViewSetArray checks
     it at NANOARROW_VALIDATION_LEVEL_DEFAULT and works out buffer sizes). */
  int code = ArrowArrayViewInitFromSchema(&view, schema, &error);
  if (code == NANOARROW_OK) {
    code = ArrowArrayViewSetArray(&view, batch, &error);
    if (code != NANOARROW_OK) ArrowArrayViewReset(&view);
  } /* (a failed init has already freed what it allocated) */
  if (code != NANOARROW_OK) {
    ArrowArrayRelease(batch);
    return fail(EINVAL, "nanoarrow cannot read the harness's batch: %s", error.message);
  }

  /* Export: a fresh array, shaped by the schema, filled from the view. */
  code = example_copy_array(schema, &view, out, &error);
  ArrowArrayViewReset(&view);
  ArrowArrayRelease(batch); /* the copy owns its memory: the input can go */
  if (code != NANOARROW_OK) {
    return fail(code, "copying the batch with nanoarrow failed (%d): %s", code,
                error.message);
  }
  return 0;
}

/* ---- import: the scenario stream the harness hands over ---------------- */

/* The stream's schema, as a schema nanoarrow owns in `out` (declined with
   ENOSYS when nanoarrow does not know one of its types). */
static int import_schema(struct ArrowArrayStream* data, struct ArrowSchema* out) {
  struct ArrowError error = {{0}};
  struct ArrowSchema schema;
  int code = ArrowArrayStreamGetSchema(data, &schema, &error);
  if (code != NANOARROW_OK) {
    return fail(code, "the scenario stream's get_schema failed: %s", error.message);
  }
  /* Parsing every field is how nanoarrow says whether it supports it. */
  struct ArrowArrayView check;
  code = ArrowArrayViewInitFromSchema(&check, &schema, &error);
  if (code == NANOARROW_OK) ArrowArrayViewReset(&check);
  if (code != NANOARROW_OK) {
    ArrowSchemaRelease(&schema);
    return fail(ENOSYS, "nanoarrow " NANOARROW_VERSION " does not support this schema: %s",
                error.message);
  }
  code = ArrowSchemaDeepCopy(&schema, out);
  ArrowSchemaRelease(&schema);
  if (code != NANOARROW_OK) return fail(code, "ArrowSchemaDeepCopy failed (%d)", code);
  return 0;
}

/* The next batch of `data` exported by nanoarrow into `out`; `out->release`
   is NULL at the end of the stream. */
static int next_batch(struct ArrowArrayStream* data, const struct ArrowSchema* schema,
                      struct ArrowArray* out) {
  struct ArrowError error = {{0}};
  struct ArrowArray batch;
  int code = ArrowArrayStreamGetNext(data, &batch, &error);
  if (code != NANOARROW_OK) {
    return fail(code, "the scenario stream's get_next failed: %s", error.message);
  }
  if (batch.release == NULL) {
    out->release = NULL;
    return 0;
  }
  return export_batch(schema, &batch, out);
}

/* ---- the producer entry points (stream variants) ----------------------- */

/* In every entry point the plugin owns `data` and releases it before
   returning; `out` is written only on success. */

int arrowcert_produce_schema_from_stream(struct ArrowArrayStream* data,
                                         struct ArrowSchema* out) {
  last_error = NULL;
  struct ArrowSchema schema;
  int code = import_schema(data, &schema);
  ArrowArrayStreamRelease(data);
  if (code == 0) ArrowSchemaMove(&schema, out);
  return code;
}

/* `data` holds exactly the batch (or slice) to export. */
int arrowcert_produce_array_from_stream(struct ArrowArrayStream* data,
                                        struct ArrowArray* out) {
  last_error = NULL;
  struct ArrowSchema schema;
  int code = import_schema(data, &schema);
  if (code != 0) {
    ArrowArrayStreamRelease(data);
    return code;
  }
  struct ArrowArray batch;
  code = next_batch(data, &schema, &batch);
  ArrowArrayStreamRelease(data);
  ArrowSchemaRelease(&schema);
  if (code != 0) return code;
  if (batch.release == NULL) return fail(EINVAL, "the scenario stream has no batch");
  ArrowArrayMove(&batch, out);
  return 0;
}

/* Every batch, copied up front, served by nanoarrow's ArrowBasicArrayStream
   (its get_schema hands out copies of the schema; get_next moves each array
   out once, then reports the end). */
int arrowcert_produce_stream_from_stream(struct ArrowArrayStream* data,
                                         struct ArrowArrayStream* out) {
  last_error = NULL;
  struct ArrowSchema schema;
  int code = import_schema(data, &schema);
  if (code != 0) {
    ArrowArrayStreamRelease(data);
    return code;
  }
  /* nanoarrow's basic stream wants the number of arrays up front: gather
     them in a growing list first. */
  struct ArrowArray* batches = NULL;
  int64_t n = 0;
  for (;;) {
    struct ArrowArray batch;
    code = next_batch(data, &schema, &batch);
    if (code != 0 || batch.release == NULL) break;
    struct ArrowArray* grown = realloc(batches, (size_t)(n + 1) * sizeof(*batches));
    if (grown == NULL) {
      ArrowArrayRelease(&batch);
      code = fail(ENOMEM, "out of memory");
      break;
    }
    batches = grown;
    ArrowArrayMove(&batch, &batches[n++]);
  }
  ArrowArrayStreamRelease(data);

  struct ArrowArrayStream stream;
  if (code == 0) {
    /* Takes the schema on success. */
    code = ArrowBasicArrayStreamInit(&stream, &schema, n);
    if (code != NANOARROW_OK) code = fail(code, "ArrowBasicArrayStreamInit failed (%d)", code);
  }
  if (code != 0) {
    for (int64_t i = 0; i < n; i++) ArrowArrayRelease(&batches[i]);
    free(batches);
    if (schema.release != NULL) ArrowSchemaRelease(&schema);
    return code;
  }
  for (int64_t i = 0; i < n; i++) ArrowBasicArrayStreamSetArray(&stream, i, &batches[i]);
  free(batches); /* the structs were moved; the list itself is ours */
  ArrowArrayStreamMove(&stream, out);
  return 0;
}

/* ---- the same on nanoarrow's CPU device -------------------------------- */

static int check_cpu(struct ArrowArrayStream* data, int32_t device_type, int64_t device_id) {
  if (device_type == ARROW_DEVICE_CPU && device_id == ArrowDeviceCpu()->device_id) return 0;
  ArrowArrayStreamRelease(data);
  return fail(ENOSYS, "this example serves the CPU (device type 1, id -1) only, not %d/%ld",
              (int)device_type, (long)device_id);
}

int arrowcert_produce_device_array_from_stream(struct ArrowArrayStream* data,
                                               int32_t device_type, int64_t device_id,
                                               struct ArrowDeviceArray* out) {
  last_error = NULL;
  int code = check_cpu(data, device_type, device_id);
  if (code != 0) return code;
  struct ArrowArray array;
  code = arrowcert_produce_array_from_stream(data, &array);
  if (code != 0) return code;
  /* Moves the array in and writes every other member (device id and type,
     sync_event NULL, reserved zero). */
  code = ArrowDeviceArrayInit(ArrowDeviceCpu(), out, &array, NULL);
  if (code != NANOARROW_OK) {
    ArrowArrayRelease(&array);
    return fail(code, "ArrowDeviceArrayInit failed (%d)", code);
  }
  return 0;
}

int arrowcert_produce_device_stream_from_stream(struct ArrowArrayStream* data,
                                                int32_t device_type, int64_t device_id,
                                                struct ArrowDeviceArrayStream* out) {
  last_error = NULL;
  int code = check_cpu(data, device_type, device_id);
  if (code != 0) return code;
  struct ArrowArrayStream stream;
  code = arrowcert_produce_stream_from_stream(data, &stream);
  if (code != 0) return code;
  /* Takes the stream on success. */
  code = ArrowDeviceBasicArrayStreamInit(out, &stream, ArrowDeviceCpu());
  if (code != NANOARROW_OK) {
    ArrowArrayStreamRelease(&stream);
    return fail(code, "ArrowDeviceBasicArrayStreamInit failed (%d)", code);
  }
  return 0;
}

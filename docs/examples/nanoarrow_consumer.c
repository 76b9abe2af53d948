/*
 * A complete arrowcert consumer plugin in C over nanoarrow (the C library).
 *
 * Build:   scripts/examples/build-nanoarrow-examples.sh OUTDIR
 * Certify: arrowcert certify --consumer OUTDIR/libnanoarrow_consumer_example.so
 *
 * It has no IPC writer: it exports the stream variants of the consumer entry
 * points (docs/PLUGIN_ABI.md, "Data as a stream"), handing back what it read
 * as an ArrowArrayStream instead of IPC bytes. For each call:
 *
 *   import  nanoarrow takes ownership of what the harness gives (ArrowSchemaMove,
 *           ArrowArrayMove; a stream is read with ArrowArrayStreamGetSchema /
 *           ArrowArrayStreamGetNext and released), views each array with
 *           ArrowArrayViewInitFromSchema + ArrowArrayViewSetArray and reads
 *           all of it with ArrowArrayViewValidate(NANOARROW_VALIDATION_LEVEL_FULL)
 *           (every offset, union type id, run end and UTF-8 string);
 *   export  what it read goes back as nanoarrow's own copy in an
 *           ArrowBasicArrayStream: a fresh ArrowArray built from each
 *           validated view (nanoarrow_example_copy.h) and the schema through
 *           ArrowSchemaDeepCopy; the harness's structures are released once
 *           copied. (Handing back the harness's own buffers would have its
 *           read-back comparison compare them with themselves: a wrong read
 *           could never fail.)
 *
 * Your library goes in place of the view and the copy: convert each view
 * into your own structures, and hand those back (exported by your library).
 *
 * A type nanoarrow cannot view is declined cleanly: everything given is
 * released, the call returns ENOSYS and arrowcert_last_error() says why. The
 * harness counts that as a limitation (the spec: "Consumers MAY decide not to
 * support all data types"), not a failure.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

/* nanoarrow first: it and arrowcert_plugin.h define the Arrow structs under
   the same canonical ARROW_C_* include guards, so either copy serves. */
#include "nanoarrow/nanoarrow.h"

#include "arrowcert_plugin.h"

/* example_copy_array: nanoarrow's own copy of a view (shared with the producer). */
#include "nanoarrow_example_copy.h"

/* ---- identity and errors (as in minimal_plugin.c) ---------------------- */

int32_t arrowcert_plugin_abi_version(void) { return ARROWCERT_PLUGIN_ABI_VERSION; }

const char* arrowcert_plugin_name(void) {
  return "nanoarrow consumer example (nanoarrow " NANOARROW_VERSION ")";
}

/* Host memory only: the device variants are not exported, so the harness
   skips the device paths. */
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

/* ---- reading with nanoarrow -------------------------------------------- */

/* A view for arrays of `schema`; ENOSYS (a clean decline) when nanoarrow
   does not support one of its types. On failure nothing is left to reset. */
static int view_init(struct ArrowArrayView* view, const struct ArrowSchema* schema) {
  struct ArrowError error = {{0}};
  int code = ArrowArrayViewInitFromSchema(view, schema, &error);
  if (code != NANOARROW_OK) { /* nanoarrow has already freed what it allocated */
    return fail(ENOSYS, "nanoarrow " NANOARROW_VERSION " cannot read this type: %s",
                error.message);
  }
  return 0;
}

/* Takes `array` (released on every path): reads every value of it through
   `view` (set up for `schema`) and writes to `out` nanoarrow's copy of what
   it read. */
static int read_array(struct ArrowArrayView* view, const struct ArrowSchema* schema,
                      struct ArrowArray* array, struct ArrowArray* out) {
  struct ArrowError error = {{0}};
  int code = ArrowArrayViewSetArray(view, array, &error);
  if (code == NANOARROW_OK) {
    code = ArrowArrayViewValidate(view, NANOARROW_VALIDATION_LEVEL_FULL, &error);
  }
  if (code != NANOARROW_OK) {
    ArrowArrayRelease(array);
    return fail(EINVAL, "nanoarrow found the array invalid: %s", error.message);
  }
  code = example_copy_array(schema, view, out, &error);
  ArrowArrayRelease(array); /* the copy owns its memory: the input can go */
  if (code != NANOARROW_OK) {
    return fail(code, "copying the array with nanoarrow failed (%d): %s", code,
                error.message);
  }
  return 0;
}

/* Hands back nanoarrow's copy of `schema` and the n `arrays` (all taken, on
   every path) as nanoarrow's ArrowBasicArrayStream in `read`. */
static int hand_back(struct ArrowSchema* schema, struct ArrowArray* arrays, int64_t n,
                     struct ArrowArrayStream* read) {
  struct ArrowSchema copy;
  int code = ArrowSchemaDeepCopy(schema, &copy);
  ArrowSchemaRelease(schema);
  struct ArrowArrayStream stream;
  if (code == NANOARROW_OK) {
    code = ArrowBasicArrayStreamInit(&stream, &copy, n); /* takes copy (even on one failure path) */
    if (code != NANOARROW_OK && copy.release != NULL) ArrowSchemaRelease(&copy);
  }
  if (code != NANOARROW_OK) {
    for (int64_t i = 0; i < n; i++) ArrowArrayRelease(&arrays[i]);
    return fail(code, "handing back nanoarrow's copy failed (%d)", code);
  }
  for (int64_t i = 0; i < n; i++) ArrowBasicArrayStreamSetArray(&stream, i, &arrays[i]);
  ArrowArrayStreamMove(&stream, read);
  return 0;
}

/* ---- the consumer entry points (stream variants) ----------------------- */

int arrowcert_consume_array_to_stream(struct ArrowSchema* schema, struct ArrowArray* array,
                                      struct ArrowArrayStream* read) {
  last_error = NULL;
  /* A released structure is refused, never read; what is still live was
     given to us all the same, and is released. */
  if (schema->release == NULL || array->release == NULL) {
    if (schema->release != NULL) ArrowSchemaRelease(schema);
    if (array->release != NULL) ArrowArrayRelease(array);
    return fail(EINVAL, "given a released %s", schema->release == NULL ? "schema" : "array");
  }
  /* Take ownership: the harness's structures are marked released. */
  struct ArrowSchema s;
  struct ArrowArray a;
  ArrowSchemaMove(schema, &s);
  ArrowArrayMove(array, &a);

  struct ArrowArrayView view;
  int code = view_init(&view, &s);
  if (code != 0) {
    ArrowArrayRelease(&a);
    ArrowSchemaRelease(&s);
    return code;
  }
  struct ArrowArray copy;
  code = read_array(&view, &s, &a, &copy);
  ArrowArrayViewReset(&view);
  if (code != 0) {
    ArrowSchemaRelease(&s);
    return code;
  }
  return hand_back(&s, &copy, 1, read);
}

int arrowcert_consume_stream_to_stream(struct ArrowArrayStream* stream,
                                       struct ArrowArrayStream* read) {
  last_error = NULL;
  if (stream->release == NULL) return fail(EINVAL, "given a released stream");
  struct ArrowError error = {{0}};
  struct ArrowSchema schema;
  int code = ArrowArrayStreamGetSchema(stream, &schema, &error);
  if (code != NANOARROW_OK) {
    /* The producer's failure: its errno, with its message. */
    ArrowArrayStreamRelease(stream);
    return fail(code, "get_schema failed: %s", error.message);
  }
  struct ArrowArrayView view;
  code = view_init(&view, &schema);
  if (code != 0) {
    ArrowSchemaRelease(&schema);
    ArrowArrayStreamRelease(stream);
    return code;
  }

  /* Read to the end, keeping a copy of every array (a growing list). */
  struct ArrowArray* copies = NULL;
  int64_t n = 0;
  for (;;) {
    struct ArrowArray array;
    code = ArrowArrayStreamGetNext(stream, &array, &error);
    if (code != NANOARROW_OK) {
      code = fail(code, "get_next failed: %s", error.message);
      break;
    }
    if (array.release == NULL) break; /* the end of the stream */
    struct ArrowArray copy;
    code = read_array(&view, &schema, &array, &copy);
    if (code != 0) break;
    struct ArrowArray* grown = realloc(copies, (size_t)(n + 1) * sizeof(*copies));
    if (grown == NULL) {
      ArrowArrayRelease(&copy);
      code = fail(ENOMEM, "out of memory");
      break;
    }
    copies = grown;
    ArrowArrayMove(&copy, &copies[n++]);
  }
  ArrowArrayViewReset(&view);
  ArrowArrayStreamRelease(stream); /* read and copied: the input can go */

  if (code != 0) {
    for (int64_t i = 0; i < n; i++) ArrowArrayRelease(&copies[i]);
    free(copies);
    ArrowSchemaRelease(&schema);
    return code;
  }
  code = hand_back(&schema, copies, n, read);
  free(copies); /* the structs were moved; the list itself is ours */
  return code;
}

/*
 * arrowcert consumer plugin for nanoarrow (C library, version in
 * NANOARROW_VERSION; built by scripts/real/build-nanoarrow.sh).
 *
 * Import: nanoarrow takes ownership of what the harness passes
 * (ArrowSchemaMove / ArrowArrayMove / ArrowDeviceArrayMove; streams are
 * used in place and released once), views it with
 * ArrowArrayViewInitFromSchema + ArrowArrayViewSetArray (device arrays:
 * ArrowDeviceArrayViewSetArray, after synchronising on sync_event with the
 * device's synchronize_event) and validates it at
 * NANOARROW_VALIDATION_LEVEL_FULL. Streams are read with get_schema /
 * get_next (nanoarrow's ArrowArrayStreamGetSchema / ArrowArrayStreamGetNext
 * for plain streams, which copy get_last_error's message on failure).
 *
 * Reading: every value is read through the ArrowArrayView accessors
 * (ArrowArrayViewIsNull, ArrowArrayViewGetBytesUnsafe, list/union offsets,
 * ...) and appended to a fresh nanoarrow-built array (ArrowArrayInitFromSchema
 * + ArrowArrayAppend* / ArrowArrayFinishElement + ArrowArrayFinishBuilding),
 * which nanoarrow's IPC writer (ArrowIpcWriter over
 * ArrowIpcOutputStreamInitBuffer) then writes. The copy is needed because
 * nanoarrow's IPC encoder refuses arrays with a non-zero offset anywhere
 * ("Cannot encode arrays with nonzero offset") and writes null_count as
 * given (-1 is legal in the C data interface, not in IPC). The imported
 * structures are released before the IPC bytes are written.
 *
 * Unsupported (ENOSYS, with the reason in arrowcert_last_error()):
 * dictionary-encoded fields (nanoarrow 0.9.0's IPC encoder: "Cannot encode
 * dictionary arrays"), and binary/string views and list views (its IPC
 * encoder has no flatbuffer type for them). Devices: CPU only.
 *
 * Errors: invalid input is EINVAL (nanoarrow's validation message); a
 * producer failure in a stream is returned as the producer's code with its
 * message; nanoarrow's ENOTSUP is reported as ENOSYS.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
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

static _Thread_local char last_error_buf[2048];
static _Thread_local const char* last_error = NULL;

ARROWCERT_EXPORT const char* arrowcert_last_error(void) { return last_error; }

ARROWCERT_EXPORT void arrowcert_free(void* ptr) { free(ptr); }

static void clear_error(void) { last_error = NULL; }

static int fail(int code, const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  vsnprintf(last_error_buf, sizeof(last_error_buf), fmt, args);
  va_end(args);
  last_error = last_error_buf;
  return code;
}

static int errno_of(int code) { return code == ENOTSUP ? ENOSYS : code; }

/* ---- what nanoarrow's IPC writer cannot write ------------------------- */

static int check_supported(const struct ArrowSchema* schema, const char* path,
                           struct ArrowError* error) {
  struct ArrowSchemaView sv;
  int code = ArrowSchemaViewInit(&sv, schema, error);
  if (code != NANOARROW_OK) {
    return fail(EINVAL, "nanoarrow cannot parse the schema at %s: %s", path,
                error->message);
  }
  const char* name = schema->name != NULL ? schema->name : "";
  if (schema->dictionary != NULL) {
    return fail(ENOSYS,
                "field %s%s: dictionary-encoded arrays are not supported by nanoarrow "
                NANOARROW_VERSION "'s IPC writer (ArrowIpcEncoder: \"Cannot encode "
                "dictionary arrays\")",
                path, name);
  }
  switch (sv.type) {
    case NANOARROW_TYPE_STRING_VIEW:
    case NANOARROW_TYPE_BINARY_VIEW:
    case NANOARROW_TYPE_LIST_VIEW:
    case NANOARROW_TYPE_LARGE_LIST_VIEW:
      return fail(ENOSYS,
                  "field %s%s: type %s is not supported by nanoarrow " NANOARROW_VERSION
                  "'s IPC writer (its encoder has no IPC type for views)",
                  path, name, ArrowTypeString(sv.type));
    default:
      break;
  }
  for (int64_t i = 0; i < schema->n_children; i++) {
    char child_path[512];
    snprintf(child_path, sizeof(child_path), "%s%s/", path, name);
    code = check_supported(schema->children[i], child_path, error);
    if (code != 0) return code;
  }
  return 0;
}

/* ---- reading every value into a fresh nanoarrow array ----------------- */

/* ArrowArrayStartAppending() without its refusal of unions whose type ids
   are not the child indices (the copy below writes union buffers itself). */
static int start_appending(struct ArrowArray* dst, const struct ArrowArrayView* view) {
  for (int i = 0; i < NANOARROW_MAX_FIXED_BUFFERS; i++) {
    if (view->layout.buffer_type[i] != NANOARROW_BUFFER_TYPE_DATA_OFFSET) continue;
    if (view->layout.element_size_bits[i] == 64) {
      NANOARROW_RETURN_NOT_OK(ArrowBufferAppendInt64(ArrowArrayBuffer(dst, i), 0));
    } else {
      NANOARROW_RETURN_NOT_OK(ArrowBufferAppendInt32(ArrowArrayBuffer(dst, i), 0));
    }
  }
  for (int64_t i = 0; i < dst->n_children; i++) {
    NANOARROW_RETURN_NOT_OK(start_appending(dst->children[i], view->children[i]));
  }
  return NANOARROW_OK;
}

/* Appends one valid slot's validity bit the way nanoarrow's own appenders
   do (the bitmap is allocated lazily, on the first null). */
static int append_valid_bit(struct ArrowArray* dst) {
  struct ArrowBitmap* bitmap = ArrowArrayValidityBitmap(dst);
  if (bitmap->buffer.data != NULL) {
    NANOARROW_RETURN_NOT_OK(ArrowBitmapAppend(bitmap, 1, 1));
  }
  dst->length++;
  return NANOARROW_OK;
}

/* Appends one null slot's validity bit, allocating the bitmap (all valid so
   far) on the first null, as _ArrowArrayAppendEmptyInternal does, but
   without touching children: nanoarrow's ArrowArrayAppendNull() appends
   "empty" child values, and for a union child it writes type id 0 whether
   or not 0 is one of the union's type ids (nanoarrow's builders assume
   type id == child index). */
static int append_null_bit(struct ArrowArray* dst) {
  struct ArrowBitmap* bitmap = ArrowArrayValidityBitmap(dst);
  if (bitmap->buffer.data == NULL) {
    NANOARROW_RETURN_NOT_OK(ArrowBitmapReserve(bitmap, dst->length + 1));
    ArrowBitmapAppendUnsafe(bitmap, 1, dst->length);
    ArrowBitmapAppendUnsafe(bitmap, 0, 1);
  } else {
    NANOARROW_RETURN_NOT_OK(ArrowBitmapAppend(bitmap, 0, 1));
  }
  dst->length++;
  dst->null_count++;
  return NANOARROW_OK;
}

static int copy_range(struct ArrowArray* dst, const struct ArrowArrayView* v, int64_t start,
                      int64_t n, struct ArrowError* error);

/* One element: logical index i of v (v->offset not included). */
static int copy_one(struct ArrowArray* dst, const struct ArrowArrayView* v, int64_t i,
                    struct ArrowError* error) {
  const int64_t phys = v->offset + i;
  switch (v->storage_type) {
    case NANOARROW_TYPE_SPARSE_UNION:
    case NANOARROW_TYPE_DENSE_UNION: {
      int8_t type_id = ArrowArrayViewUnionTypeId(v, i);
      int8_t child = ArrowArrayViewUnionChildIndex(v, i);
      if (v->storage_type == NANOARROW_TYPE_SPARSE_UNION) {
        /* Every child's slot, not only the selected one's. */
        for (int64_t c = 0; c < v->n_children; c++) {
          NANOARROW_RETURN_NOT_OK(copy_range(dst->children[c], v->children[c], phys, 1, error));
        }
      } else {
        int64_t child_offset = ArrowArrayViewUnionChildOffset(v, i);
        NANOARROW_RETURN_NOT_OK(
            copy_range(dst->children[child], v->children[child], child_offset, 1, error));
        NANOARROW_RETURN_NOT_OK(ArrowBufferAppendInt32(
            ArrowArrayBuffer(dst, 1), (int32_t)(dst->children[child]->length - 1)));
      }
      NANOARROW_RETURN_NOT_OK(ArrowBufferAppendInt8(ArrowArrayBuffer(dst, 0), type_id));
      dst->length++;
      return NANOARROW_OK;
    }
    default:
      break;
  }

  const int is_null = ArrowArrayViewIsNull(v, i);

  /* Struct and fixed-size list slots: the child values are copied whether
     the slot is null or not (they are there, and a union child cannot take
     nanoarrow's "empty" values); then the slot's validity bit. */
  switch (v->storage_type) {
    case NANOARROW_TYPE_FIXED_SIZE_LIST: {
      int64_t size = v->layout.child_size_elements;
      NANOARROW_RETURN_NOT_OK(
          copy_range(dst->children[0], v->children[0], phys * size, size, error));
      return is_null ? append_null_bit(dst) : ArrowArrayFinishElement(dst);
    }
    case NANOARROW_TYPE_STRUCT:
      for (int64_t c = 0; c < v->n_children; c++) {
        NANOARROW_RETURN_NOT_OK(copy_range(dst->children[c], v->children[c], phys, 1, error));
      }
      return is_null ? append_null_bit(dst) : ArrowArrayFinishElement(dst);
    default:
      break;
  }

  if (is_null) return ArrowArrayAppendNull(dst, 1);

  switch (v->storage_type) {
    case NANOARROW_TYPE_BOOL:
      return ArrowArrayAppendInt(
          dst, ArrowBitGet(v->buffer_views[1].data.as_uint8, phys) ? 1 : 0);

    case NANOARROW_TYPE_STRING:
    case NANOARROW_TYPE_LARGE_STRING:
    case NANOARROW_TYPE_BINARY:
    case NANOARROW_TYPE_LARGE_BINARY:
      return ArrowArrayAppendBytes(dst, ArrowArrayViewGetBytesUnsafe(v, i));

    case NANOARROW_TYPE_LIST:
    case NANOARROW_TYPE_LARGE_LIST:
    case NANOARROW_TYPE_MAP: {
      int64_t begin = ArrowArrayViewListChildOffset(v, phys);
      int64_t end = ArrowArrayViewListChildOffset(v, phys + 1);
      NANOARROW_RETURN_NOT_OK(
          copy_range(dst->children[0], v->children[0], begin, end - begin, error));
      return ArrowArrayFinishElement(dst);
    }

    default:
      break;
  }

  /* Fixed-width values (integers, floats, half floats, decimals, temporal
     types, intervals, fixed-size binary): the value's bytes as they are. */
  if (v->layout.buffer_type[1] == NANOARROW_BUFFER_TYPE_DATA &&
      v->layout.element_size_bits[1] > 0 && v->layout.element_size_bits[1] % 8 == 0 &&
      v->layout.buffer_type[2] == NANOARROW_BUFFER_TYPE_NONE) {
    int64_t width = v->layout.element_size_bits[1] / 8;
    NANOARROW_RETURN_NOT_OK(ArrowBufferAppend(
        ArrowArrayBuffer(dst, 1), v->buffer_views[1].data.as_uint8 + phys * width, width));
    return append_valid_bit(dst);
  }

  ArrowErrorSet(error, "the nanoarrow consumer cannot copy values of type %s",
                ArrowTypeString(v->storage_type));
  return ENOTSUP;
}

/* Run-end encoded: the runs covering logical [start, start + n) of v. */
static int copy_ree(struct ArrowArray* dst, const struct ArrowArrayView* v, int64_t start,
                    int64_t n, struct ArrowError* error) {
  if (n == 0) return NANOARROW_OK;
  const struct ArrowArrayView* run_ends = v->children[0];
  const struct ArrowArrayView* values = v->children[1];
  const int64_t lo = v->offset + start, hi = lo + n;
  const int64_t base = dst->length;
  /* First run whose end is past lo (run ends are validated increasing). */
  int64_t a = 0, b = run_ends->length;
  while (a < b) {
    int64_t mid = a + (b - a) / 2;
    if (ArrowArrayViewGetIntUnsafe(run_ends, mid) <= lo) a = mid + 1; else b = mid;
  }
  for (int64_t r = a; r < run_ends->length; r++) {
    int64_t end = ArrowArrayViewGetIntUnsafe(run_ends, r);
    int64_t clipped = (end < hi ? end : hi) - lo;
    NANOARROW_RETURN_NOT_OK(ArrowArrayAppendInt(dst->children[0], base + clipped));
    NANOARROW_RETURN_NOT_OK(copy_range(dst->children[1], values, r, 1, error));
    if (end >= hi) break;
  }
  dst->length += n;
  return NANOARROW_OK;
}

static int copy_range(struct ArrowArray* dst, const struct ArrowArrayView* v, int64_t start,
                      int64_t n, struct ArrowError* error) {
  switch (v->storage_type) {
    case NANOARROW_TYPE_NA:
      return ArrowArrayAppendNull(dst, n);
    case NANOARROW_TYPE_RUN_END_ENCODED:
      return copy_ree(dst, v, start, n, error);
    default:
      for (int64_t k = 0; k < n; k++) {
        int code = copy_one(dst, v, start + k, error);
        if (code != NANOARROW_OK) {
          if (error->message[0] == '\0') {
            ArrowErrorSet(error, "appending a %s value failed (%d)",
                          ArrowTypeString(v->storage_type), code);
          }
          return code;
        }
      }
      return NANOARROW_OK;
  }
}

/* ---- a consume session: IPC writer plus the current schema ------------ */

struct session {
  struct ArrowSchema schema; /* owned (moved from the harness) */
  struct ArrowBuffer bytes;  /* the IPC stream written so far */
  struct ArrowIpcWriter writer;
  int writer_live;
  struct ArrowError error;
};

static void session_init(struct session* s) {
  memset(s, 0, sizeof(*s));
  s->schema.release = NULL;
  ArrowBufferInit(&s->bytes);
}

static void session_reset(struct session* s) {
  if (s->writer_live) ArrowIpcWriterReset(&s->writer);
  s->writer_live = 0;
  if (s->schema.release != NULL) s->schema.release(&s->schema);
  ArrowBufferReset(&s->bytes);
}

static int fill_null_names(struct ArrowSchema* schema) {
  if (schema->name == NULL) NANOARROW_RETURN_NOT_OK(ArrowSchemaSetName(schema, ""));
  for (int64_t i = 0; i < schema->n_children; i++) {
    NANOARROW_RETURN_NOT_OK(fill_null_names(schema->children[i]));
  }
  if (schema->dictionary != NULL) NANOARROW_RETURN_NOT_OK(fill_null_names(schema->dictionary));
  return NANOARROW_OK;
}

/* Takes the schema (already moved into s->schema), checks it and writes
   the IPC schema message. */
static int session_start(struct session* s) {
  int code = check_supported(&s->schema, "", &s->error);
  if (code != 0) return code;

  struct ArrowSchemaView sv;
  code = ArrowSchemaViewInit(&sv, &s->schema, &s->error);
  if (code != NANOARROW_OK) return fail(EINVAL, "invalid schema: %s", s->error.message);
  if (sv.type != NANOARROW_TYPE_STRUCT) {
    return fail(EINVAL, "a record batch must be a struct array, the schema is %s",
                ArrowTypeString(sv.type));
  }

  struct ArrowIpcOutputStream output;
  code = ArrowIpcOutputStreamInitBuffer(&output, &s->bytes);
  if (code != NANOARROW_OK) return fail(code, "ArrowIpcOutputStreamInitBuffer failed");
  code = ArrowIpcWriterInit(&s->writer, &output);
  if (code != NANOARROW_OK) {
    output.release(&output);
    return fail(code, "ArrowIpcWriterInit failed");
  }
  s->writer_live = 1;

  /* nanoarrow 0.9.0's IPC encoder calls strlen() on ArrowSchema.name
     (ArrowIpcEncodeField: Field_name_create_str(builder, schema->name)) and
     crashes on a NULL name, which the C data interface allows ("If omitted,
     MAY be NULL or an empty string"). The writer is given a deep copy whose
     NULL names are "", which is what an omitted name is in IPC. */
  struct ArrowSchema named;
  code = ArrowSchemaDeepCopy(&s->schema, &named);
  if (code != NANOARROW_OK) return fail(code, "ArrowSchemaDeepCopy failed");
  code = fill_null_names(&named);
  if (code == NANOARROW_OK) code = ArrowIpcWriterWriteSchema(&s->writer, &named, &s->error);
  named.release(&named);
  if (code != NANOARROW_OK) {
    return fail(code == ENOTSUP ? ENOSYS : EIO, "nanoarrow's IPC writer, schema: %s",
                s->error.message);
  }
  return 0;
}

/* Views, validates and reads `view` (already set from an imported array)
   into a nanoarrow-built copy, kept in *copy. */
static int read_into_copy(struct session* s, struct ArrowArrayView* view,
                          struct ArrowArray* copy) {
  int code = ArrowArrayViewValidate(view, NANOARROW_VALIDATION_LEVEL_FULL, &s->error);
  if (code != NANOARROW_OK) {
    return fail(EINVAL, "nanoarrow's full validation rejected the array: %s",
                s->error.message);
  }
  code = ArrowArrayInitFromSchema(copy, &s->schema, &s->error);
  if (code != NANOARROW_OK) {
    return fail(errno_of(code), "ArrowArrayInitFromSchema: %s", s->error.message);
  }
  s->error.message[0] = '\0';
  code = start_appending(copy, view);
  if (code == NANOARROW_OK) code = copy_range(copy, view, 0, view->length, &s->error);
  if (code == NANOARROW_OK) {
    code = ArrowArrayFinishBuilding(copy, NANOARROW_VALIDATION_LEVEL_MINIMAL, &s->error);
  }
  if (code != NANOARROW_OK) {
    copy->release(copy);
    return fail(errno_of(code), "reading the values into nanoarrow arrays failed: %s",
                s->error.message);
  }
  return 0;
}

/* Writes the copy as one record batch (and releases it). */
static int write_copy(struct session* s, struct ArrowArray* copy) {
  struct ArrowArrayView view;
  int code = ArrowArrayViewInitFromSchema(&view, &s->schema, &s->error);
  if (code == NANOARROW_OK) {
    code = ArrowArrayViewSetArray(&view, copy, &s->error);
    if (code == NANOARROW_OK) {
      code = ArrowArrayViewValidate(&view, NANOARROW_VALIDATION_LEVEL_FULL, &s->error);
    }
    if (code != NANOARROW_OK) {
      fail(EIO, "the nanoarrow-built copy does not validate: %s", s->error.message);
      code = EIO;
    } else {
      code = ArrowIpcWriterWriteArrayView(&s->writer, &view, &s->error);
      if (code != NANOARROW_OK) {
        fail(code == ENOTSUP ? ENOSYS : EIO, "nanoarrow's IPC writer, record batch: %s",
             s->error.message);
        code = code == ENOTSUP ? ENOSYS : EIO;
      }
    }
    ArrowArrayViewReset(&view);
  } else {
    fail(errno_of(code), "ArrowArrayViewInitFromSchema: %s", s->error.message);
    code = errno_of(code);
  }
  copy->release(copy);
  return code;
}

/* Reads one imported (host) array, owned by the caller. */
static int session_read_array(struct session* s, const struct ArrowArray* array,
                              struct ArrowArray* copy) {
  struct ArrowArrayView view;
  int code = ArrowArrayViewInitFromSchema(&view, &s->schema, &s->error);
  if (code != NANOARROW_OK) {
    return fail(errno_of(code), "ArrowArrayViewInitFromSchema: %s", s->error.message);
  }
  code = ArrowArrayViewSetArray(&view, array, &s->error);
  if (code != NANOARROW_OK) {
    fail(EINVAL, "ArrowArrayViewSetArray rejected the array: %s", s->error.message);
    code = EINVAL;
  } else {
    code = read_into_copy(s, &view, copy);
  }
  ArrowArrayViewReset(&view);
  return code;
}

/* Synchronises on the device array's event (nanoarrow's device callback:
   for the CPU device, sync_event must be NULL) and reads it. */
static int session_read_device_array(struct session* s, struct ArrowDeviceArray* array,
                                     struct ArrowArray* copy) {
  struct ArrowDevice* device = ArrowDeviceResolve(array->device_type, array->device_id);
  if (device == NULL || array->device_type != ARROW_DEVICE_CPU) {
    return fail(ENOSYS,
                "this nanoarrow build reads CPU arrays only (device_type %" PRId32
                ", device_id %" PRId64 ")",
                array->device_type, array->device_id);
  }
  int code = device->synchronize_event(device, array->sync_event, NULL, &s->error);
  if (code != NANOARROW_OK) {
    return fail(EINVAL, "synchronising on sync_event failed: %s", s->error.message);
  }

  struct ArrowDeviceArrayView dview;
  ArrowDeviceArrayViewInit(&dview);
  code = ArrowArrayViewInitFromSchema(&dview.array_view, &s->schema, &s->error);
  if (code != NANOARROW_OK) {
    return fail(errno_of(code), "ArrowArrayViewInitFromSchema: %s", s->error.message);
  }
  code = ArrowDeviceArrayViewSetArray(&dview, array, &s->error);
  if (code != NANOARROW_OK) {
    fail(EINVAL, "ArrowDeviceArrayViewSetArray rejected the array: %s", s->error.message);
    code = EINVAL;
  } else {
    code = read_into_copy(s, &dview.array_view, copy);
  }
  ArrowDeviceArrayViewReset(&dview);
  return code;
}

/* Writes end of stream and hands the bytes out (malloc'd). */
static int session_finish(struct session* s, uint8_t** out_ipc, int64_t* out_len) {
  int code = ArrowIpcWriterWriteArrayView(&s->writer, NULL, &s->error);
  if (code != NANOARROW_OK) {
    return fail(EIO, "nanoarrow's IPC writer, end of stream: %s", s->error.message);
  }
  uint8_t* bytes = (uint8_t*)malloc(s->bytes.size_bytes > 0 ? s->bytes.size_bytes : 1);
  if (bytes == NULL) return fail(ENOMEM, "out of memory for the IPC bytes");
  memcpy(bytes, s->bytes.data, s->bytes.size_bytes);
  *out_ipc = bytes;
  *out_len = s->bytes.size_bytes;
  return 0;
}

static int check_out(uint8_t** out_ipc, int64_t* out_len) {
  if (out_ipc == NULL || out_len == NULL) return fail(EINVAL, "out_ipc or out_len is NULL");
  return 0;
}

/* ---- consumer entry points -------------------------------------------- */

ARROWCERT_EXPORT int arrowcert_consume_array(struct ArrowSchema* schema,
                                             struct ArrowArray* array, uint8_t** out_ipc,
                                             int64_t* out_len) {
  clear_error();
  struct session s;
  session_init(&s);
  struct ArrowArray imported;
  imported.release = NULL;

  /* Take ownership of whatever is live, so it is released on every path. */
  if (schema != NULL && schema->release != NULL) ArrowSchemaMove(schema, &s.schema);
  if (array != NULL && array->release != NULL) ArrowArrayMove(array, &imported);

  int code = check_out(out_ipc, out_len);
  if (code == 0 && s.schema.release == NULL) code = fail(EINVAL, "schema is NULL or released");
  if (code == 0 && imported.release == NULL) code = fail(EINVAL, "array is NULL or released");
  if (code == 0) code = session_start(&s);

  struct ArrowArray copy;
  if (code == 0) code = session_read_array(&s, &imported, &copy);
  if (imported.release != NULL) imported.release(&imported);
  if (code == 0) code = write_copy(&s, &copy);
  if (code == 0) code = session_finish(&s, out_ipc, out_len);
  session_reset(&s);
  return code;
}

ARROWCERT_EXPORT int arrowcert_consume_device_array(struct ArrowSchema* schema,
                                                    struct ArrowDeviceArray* array,
                                                    uint8_t** out_ipc, int64_t* out_len) {
  clear_error();
  struct session s;
  session_init(&s);
  struct ArrowDeviceArray imported;
  memset(&imported, 0, sizeof(imported));
  imported.array.release = NULL;

  if (schema != NULL && schema->release != NULL) ArrowSchemaMove(schema, &s.schema);
  if (array != NULL && array->array.release != NULL) ArrowDeviceArrayMove(array, &imported);

  int code = check_out(out_ipc, out_len);
  if (code == 0 && s.schema.release == NULL) code = fail(EINVAL, "schema is NULL or released");
  if (code == 0 && imported.array.release == NULL) {
    code = fail(EINVAL, "array is NULL or released");
  }
  if (code == 0) code = session_start(&s);

  struct ArrowArray copy;
  if (code == 0) code = session_read_device_array(&s, &imported, &copy);
  if (imported.array.release != NULL) imported.array.release(&imported.array);
  if (code == 0) code = write_copy(&s, &copy);
  if (code == 0) code = session_finish(&s, out_ipc, out_len);
  session_reset(&s);
  return code;
}

ARROWCERT_EXPORT int arrowcert_consume_stream(struct ArrowArrayStream* stream,
                                              uint8_t** out_ipc, int64_t* out_len) {
  clear_error();
  if (stream == NULL || stream->release == NULL) {
    return fail(EINVAL, "stream is NULL or released");
  }
  struct session s;
  session_init(&s);
  int code = check_out(out_ipc, out_len);
  int unsupported = 0; /* the writer refused the schema: only drain the stream */

  if (code == 0) {
    code = ArrowArrayStreamGetSchema(stream, &s.schema, &s.error);
    if (code != NANOARROW_OK) {
      s.schema.release = NULL;
      fail(code, "the stream's get_schema failed (%d): %s", code, s.error.message);
    } else {
      code = session_start(&s);
      unsupported = code == ENOSYS;
    }
  }

  /* A schema nanoarrow's writer cannot write (ENOSYS) still has its chunks
     read to the end, so that a producer failure reaches the caller. */
  while (code == 0 || unsupported) {
    struct ArrowArray imported;
    imported.release = NULL;
    int next = ArrowArrayStreamGetNext(stream, &imported, &s.error);
    if (next != NANOARROW_OK) {
      code = fail(next, "the stream's get_next failed (%d): %s", next, s.error.message);
      break;
    }
    if (imported.release == NULL) break; /* end of stream */
    if (unsupported) {
      imported.release(&imported);
      continue;
    }
    struct ArrowArray copy;
    code = session_read_array(&s, &imported, &copy);
    imported.release(&imported);
    if (code == 0) code = write_copy(&s, &copy);
  }

  stream->release(stream);
  if (code == 0) code = session_finish(&s, out_ipc, out_len);
  session_reset(&s);
  return code;
}

ARROWCERT_EXPORT int arrowcert_consume_device_stream(struct ArrowDeviceArrayStream* stream,
                                                     uint8_t** out_ipc, int64_t* out_len) {
  clear_error();
  if (stream == NULL || stream->release == NULL) {
    return fail(EINVAL, "stream is NULL or released");
  }
  struct session s;
  session_init(&s);
  int code = check_out(out_ipc, out_len);
  int unsupported = 0; /* the writer refused the schema: only drain the stream */

  if (code == 0 && stream->device_type != ARROW_DEVICE_CPU) {
    code = fail(ENOSYS, "this nanoarrow build reads CPU streams only (device_type %" PRId32 ")",
                stream->device_type);
  }
  if (code == 0) {
    code = stream->get_schema(stream, &s.schema);
    if (code != 0) {
      const char* msg = stream->get_last_error(stream);
      s.schema.release = NULL;
      fail(code, "the stream's get_schema failed (%d): %s", code, msg ? msg : "(no message)");
    } else {
      code = session_start(&s);
      unsupported = code == ENOSYS;
    }
  }

  while (code == 0 || unsupported) {
    struct ArrowDeviceArray imported;
    memset(&imported, 0, sizeof(imported));
    imported.array.release = NULL;
    int next = stream->get_next(stream, &imported);
    if (next != 0) {
      const char* msg = stream->get_last_error(stream);
      code = fail(next, "the stream's get_next failed (%d): %s", next,
                  msg ? msg : "(no message)");
      break;
    }
    if (imported.array.release == NULL) break; /* end of stream */
    if (unsupported) {
      imported.array.release(&imported.array);
      continue;
    }
    struct ArrowArray copy;
    code = session_read_device_array(&s, &imported, &copy);
    imported.array.release(&imported.array);
    if (code == 0) code = write_copy(&s, &copy);
  }

  stream->release(stream);
  if (code == 0) code = session_finish(&s, out_ipc, out_len);
  session_reset(&s);
  return code;
}

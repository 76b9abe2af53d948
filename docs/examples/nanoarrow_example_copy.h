/*
 * Shared by docs/examples/nanoarrow_producer.c and nanoarrow_consumer.c: a
 * fresh ArrowArray that nanoarrow owns, copied from a validated view. Each
 * example includes it once (static functions), so each still builds as one
 * cc command.
 *
 * Include it after nanoarrow/nanoarrow.h.
 */
#ifndef ARROWCERT_NANOARROW_EXAMPLE_COPY_H
#define ARROWCERT_NANOARROW_EXAMPLE_COPY_H

static int example_append(struct ArrowBuffer* dst, const void* data, int64_t size) {
  return size > 0 ? ArrowBufferAppend(dst, data, size) : NANOARROW_OK;
}

/* Copies every buffer the view describes (offset kept, so a slice stays a
   slice of the same logical values) into `dst`, which ArrowArrayInitFromSchema
   shaped like the view: children and dictionary included. */
static int example_copy_view(const struct ArrowArrayView* src, struct ArrowArray* dst) {
  dst->length = src->length;
  dst->offset = src->offset;
  dst->null_count = src->null_count; /* -1 (not computed) is legal too */
  int fixed = src->storage_type == NANOARROW_TYPE_STRING_VIEW ||
                      src->storage_type == NANOARROW_TYPE_BINARY_VIEW
                  ? NANOARROW_BINARY_VIEW_FIXED_BUFFERS
                  : NANOARROW_MAX_FIXED_BUFFERS;
  for (int i = 0; i < fixed; i++) {
    enum ArrowBufferType type = src->layout.buffer_type[i];
    if (type == NANOARROW_BUFFER_TYPE_NONE) break;
    const void* data = src->buffer_views[i].data.data;
    int64_t size = src->buffer_views[i].size_bytes;
    int64_t width = src->layout.element_size_bits[i] / 8;
    /* Sizes nanoarrow's view leaves short of what the format asks (and the
       C data interface allows a NULL pointer only for a size that would be
       0): the offsets of an empty array (it says 0 bytes, the format one
       entry), a list view's sizes (it leaves them unknown, -1), and the
       string data of an empty slice (0, though its offsets still point
       offsets[offset] bytes in). */
    if (type == NANOARROW_BUFFER_TYPE_DATA_OFFSET && src->offset + src->length == 0) {
      size = width;
    } else if (type == NANOARROW_BUFFER_TYPE_SIZE && size < 0) {
      size = width * (src->offset + src->length);
    } else if (i == 2 && type == NANOARROW_BUFFER_TYPE_DATA && src->length == 0 &&
               src->buffer_views[1].data.data != NULL) {
      size = src->layout.element_size_bits[1] == 64
                 ? src->buffer_views[1].data.as_int64[src->offset]
                 : src->buffer_views[1].data.as_int32[src->offset];
    }
    struct ArrowBuffer* out = ArrowArrayBuffer(dst, i);
    if (data == NULL && size > 0) { /* only an empty array's offsets */
      NANOARROW_RETURN_NOT_OK(ArrowBufferAppendFill(out, 0, size));
    } else {
      NANOARROW_RETURN_NOT_OK(example_append(out, data, size));
    }
  }
  /* String and binary views: their data buffers; nanoarrow writes the
     variadic sizes buffer itself when the array is finished. */
  if (src->n_variadic_buffers > 0) {
    NANOARROW_RETURN_NOT_OK(ArrowArrayAddVariadicBuffers(dst, src->n_variadic_buffers));
    for (int32_t i = 0; i < src->n_variadic_buffers; i++) {
      NANOARROW_RETURN_NOT_OK(
          example_append(ArrowArrayBuffer(dst, NANOARROW_BINARY_VIEW_FIXED_BUFFERS + i),
                         src->variadic_buffers[i], src->variadic_buffer_sizes[i]));
    }
  }
  for (int64_t i = 0; i < src->n_children; i++) {
    NANOARROW_RETURN_NOT_OK(example_copy_view(src->children[i], dst->children[i]));
  }
  if (src->dictionary != NULL) {
    NANOARROW_RETURN_NOT_OK(example_copy_view(src->dictionary, dst->dictionary));
  }
  return NANOARROW_OK;
}

/* Writes to `out` (only on success) a fresh array nanoarrow owns, byte for
   byte what `view` describes; `view` was set from an array of `schema`.
   Returns a nanoarrow (errno) code, with `error` saying why. */
static int example_copy_array(const struct ArrowSchema* schema, const struct ArrowArrayView* view,
                              struct ArrowArray* out, struct ArrowError* error) {
  struct ArrowArray copy;
  NANOARROW_RETURN_NOT_OK(ArrowArrayInitFromSchema(&copy, schema, error));
  int code = example_copy_view(view, &copy);
  /* The view was validated already: LEVEL_NONE only points copy's buffers
     at the new memory. (Validating again without the schema would misread
     union type ids.) */
  if (code == NANOARROW_OK) {
    code = ArrowArrayFinishBuilding(&copy, NANOARROW_VALIDATION_LEVEL_NONE, error);
  }
  if (code != NANOARROW_OK) {
    ArrowArrayRelease(&copy);
    return code;
  }
  ArrowArrayMove(&copy, out); /* writes every member of out */
  return NANOARROW_OK;
}

#endif /* ARROWCERT_NANOARROW_EXAMPLE_COPY_H */

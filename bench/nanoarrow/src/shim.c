// Thin entry points over nanoarrow for the validation benchmark. Compiled
// only with the `nanoarrow` feature, against nanoarrow's own sources taken
// at build time from its PyPI source distribution (never committed).

#include <stdint.h>
#include <string.h>

#include "nanoarrow/nanoarrow.h"

static void copy_message(const struct ArrowError* error, char* out, int64_t out_len) {
  if (out == NULL || out_len <= 0) return;
  strncpy(out, error->message, (size_t)out_len - 1);
  out[out_len - 1] = '\0';
}

// ArrowArrayViewInitFromSchema + ArrowArrayViewSetArray (which runs the
// DEFAULT level) + ArrowArrayViewValidate(level). Level 1 (MINIMAL) and 0
// (NONE) use ArrowArrayViewSetArrayMinimal instead, which reads no buffer.
// Returns 0 when valid, else an errno with the message in `message`.
int arrowcert_nanoarrow_validate(const struct ArrowSchema* schema,
                                 const struct ArrowArray* array, int32_t level,
                                 char* message, int64_t message_len) {
  struct ArrowError error;
  error.message[0] = '\0';
  struct ArrowArrayView view;
  int rc = ArrowArrayViewInitFromSchema(&view, schema, &error);
  if (rc != NANOARROW_OK) {
    copy_message(&error, message, message_len);
    return rc;
  }
  if (level <= NANOARROW_VALIDATION_LEVEL_MINIMAL) {
    rc = ArrowArrayViewSetArrayMinimal(&view, array, &error);
  } else {
    rc = ArrowArrayViewSetArray(&view, array, &error);
  }
  if (rc == NANOARROW_OK) {
    rc = ArrowArrayViewValidate(&view, (enum ArrowValidationLevel)level, &error);
  }
  if (rc != NANOARROW_OK) copy_message(&error, message, message_len);
  ArrowArrayViewReset(&view);
  return rc;
}

// Nodes whose null_count disagrees with their validity bitmap, counted with
// ArrowBitCountSet over [offset, offset + length): the one check the
// harness's validator makes on these arrays that nanoarrow's FULL level
// does not (it never reads a validity bitmap).
static int64_t null_count_mismatches(const struct ArrowArrayView* view) {
  int64_t bad = 0;
  const uint8_t* bits = view->buffer_views[0].data.as_uint8;
  if (view->layout.buffer_type[0] == NANOARROW_BUFFER_TYPE_VALIDITY && bits != NULL &&
      view->null_count >= 0) {
    int64_t set = ArrowBitCountSet(bits, view->offset, view->length);
    if (view->length - set != view->null_count) bad++;
  }
  for (int64_t i = 0; i < view->n_children; i++) {
    bad += null_count_mismatches(view->children[i]);
  }
  return bad;
}

// Full validation as above, then the null counts: validation doing the same
// work as the harness's on these arrays. Returns -1 when validation failed.
int64_t arrowcert_nanoarrow_validate_full_and_null_counts(
    const struct ArrowSchema* schema, const struct ArrowArray* array) {
  struct ArrowError error;
  struct ArrowArrayView view;
  if (ArrowArrayViewInitFromSchema(&view, schema, &error) != NANOARROW_OK) return -1;
  int64_t out = -1;
  if (ArrowArrayViewSetArray(&view, array, &error) == NANOARROW_OK &&
      ArrowArrayViewValidate(&view, NANOARROW_VALIDATION_LEVEL_FULL, &error) ==
          NANOARROW_OK) {
    out = null_count_mismatches(&view);
  }
  ArrowArrayViewReset(&view);
  return out;
}

const char* arrowcert_nanoarrow_version(void) { return NANOARROW_VERSION; }

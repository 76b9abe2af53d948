/*
 * Mutant producers: a correct producer (the reference plugin, loaded from
 * ARROWCERT_MUTANT_BASE) with exactly one rule broken in what it exports.
 * The mutation is chosen at load time by ARROWCERT_MUTANT; each one is
 * modelled on a way real libraries got the C interfaces wrong. With
 * ARROWCERT_MUTANT=none every call is passed through untouched, so the
 * wrapper itself is shown to break nothing.
 *
 *   cc -shared -fPIC -I harness/include -o libarrowcert_mutant_producer.so \
 *      producers/mutants/mutant_producer.c -ldl
 *
 * Mutations (name: rule broken):
 *   release-keeps-pointer         array.release.marks-released
 *                                 (release frees, but leaves `release` set)
 *   schema-release-keeps-pointer  schema.release.marks-released
 *   reserved-left                 device.reserved.zero (reserved[] left as found)
 *   cpu-device-id-0               device.cpu.id (CPU arrays with device_id 0)
 *   sync-event-on-cpu             device.event.none (a non-NULL event on CPU)
 *   wrong-device-type             device.type.requested (CUDA_HOST for CPU)
 *   null-count-off-by-one         array.null-count (null_count disagrees with
 *                                 the bitmap, on the first column)
 *   union-with-validity           array.layout.n-buffers (a union exported
 *                                 with a validity buffer)
 *   slice-offset-ignored          array.values.roundtrip (a sliced column
 *                                 exported with offset 0)
 *   eos-as-error                  stream.eos.released (end of stream
 *                                 signalled by ENODATA)
 *   last-error-garbage            stream.error.message (a failing get_next
 *                                 whose get_last_error is not UTF-8)
 *   negative-error-code           stream.error.errno (get_next fails with -1)
 *   stream-device-type            device.stream.type (a CPU device stream
 *                                 that says it is CUDA_HOST)
 *   leak-one-child                array.release.frees (the first column's
 *                                 release releases its children, then marks
 *                                 it released and frees nothing of its own:
 *                                 every export leaks that column)
 *   schema-leak                   schema.release.frees (the schema's release
 *                                 frees what the base allocated but not the
 *                                 record the export added)
 *   stream-leak                   stream.release.frees (the stream's release
 *                                 releases the inner stream but never frees
 *                                 its own state)
 *   release-skips-children        array.release.walks-children (the parent's
 *                                 release never calls its children's release
 *                                 callbacks; it frees them itself with the
 *                                 callback it saw at export time)
 *   schema-release-skips-children schema.release.walks-children (the same
 *                                 for a schema)
 *   release-frees-children-twice  array.release.walks-children (the parent's
 *                                 release calls each child's release twice;
 *                                 the children shrug the second call off)
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arrowcert_plugin.h"

enum mutant {
  NONE, RELEASE_KEEPS_POINTER, SCHEMA_RELEASE_KEEPS_POINTER, RESERVED_LEFT,
  CPU_DEVICE_ID_0, SYNC_EVENT_ON_CPU, WRONG_DEVICE_TYPE, NULL_COUNT_OFF_BY_ONE,
  UNION_WITH_VALIDITY, SLICE_OFFSET_IGNORED, EOS_AS_ERROR, LAST_ERROR_GARBAGE,
  NEGATIVE_ERROR_CODE, STREAM_DEVICE_TYPE, LEAK_ONE_CHILD, SCHEMA_LEAK, STREAM_LEAK,
  RELEASE_SKIPS_CHILDREN, SCHEMA_RELEASE_SKIPS_CHILDREN, RELEASE_FREES_CHILDREN_TWICE
};
static const char* const NAMES[] = {
  "none", "release-keeps-pointer", "schema-release-keeps-pointer", "reserved-left",
  "cpu-device-id-0", "sync-event-on-cpu", "wrong-device-type", "null-count-off-by-one",
  "union-with-validity", "slice-offset-ignored", "eos-as-error", "last-error-garbage",
  "negative-error-code", "stream-device-type", "leak-one-child", "schema-leak", "stream-leak",
  "release-skips-children", "schema-release-skips-children", "release-frees-children-twice"
};
static enum mutant M = NONE;
static void* base;

#define BASE(name) ((__typeof__(&name))dlsym(base, #name))

__attribute__((constructor)) static void choose(void) {
  const char* want = getenv("ARROWCERT_MUTANT");
  const char* path = getenv("ARROWCERT_MUTANT_BASE");
  if (!want) want = "none";
  size_t n = sizeof(NAMES) / sizeof(NAMES[0]);
  size_t i = 0;
  while (i < n && strcmp(NAMES[i], want) != 0) i++;
  if (i == n) {
    fprintf(stderr, "mutant producer: unknown ARROWCERT_MUTANT=%s\n", want);
    abort();
  }
  M = (enum mutant)i;
  if (!path || !(base = dlopen(path, RTLD_NOW | RTLD_LOCAL))) {
    fprintf(stderr, "mutant producer: cannot load ARROWCERT_MUTANT_BASE=%s: %s\n",
            path ? path : "(unset)", dlerror());
    abort();
  }
}

int32_t arrowcert_plugin_abi_version(void) { return 1; }
const char* arrowcert_plugin_name(void) {
  static char name[128];
  snprintf(name, sizeof name, "arrowcert mutant producer (%s)", NAMES[M]);
  return name;
}
const char* arrowcert_last_error(void) { return BASE(arrowcert_last_error)(); }
int32_t arrowcert_plugin_supports_device(int32_t t) {
  return BASE(arrowcert_plugin_supports_device)(t);
}
void arrowcert_free(void* p) { BASE(arrowcert_free)(p); }

/* ---- release that leaves the structure looking live ---- */

struct kept_array { void (*release)(struct ArrowArray*); void* private_data; };
static void array_release_keeps_pointer(struct ArrowArray* a) {
  struct kept_array* k = a->private_data;
  a->release = k->release;
  a->private_data = k->private_data;
  free(k);
  a->release(a);                       /* frees everything, sets NULL ... */
  a->release = array_release_keeps_pointer;  /* ... and the bug undoes it */
  a->private_data = NULL;
}
static void keep_array_pointer(struct ArrowArray* a) {
  struct kept_array* k = malloc(sizeof *k);
  k->release = a->release;
  k->private_data = a->private_data;
  a->release = array_release_keeps_pointer;
  a->private_data = k;
}

struct kept_schema { void (*release)(struct ArrowSchema*); void* private_data; };
static void schema_release_keeps_pointer(struct ArrowSchema* s) {
  struct kept_schema* k = s->private_data;
  s->release = k->release;
  s->private_data = k->private_data;
  free(k);
  s->release(s);
  s->release = schema_release_keeps_pointer;
  s->private_data = NULL;
}

/* ---- leaks ---- */

/* A release that walks its children and dictionary as it must, then marks
 * the structure released without freeing anything of its own. */
static void leaky_array_release(struct ArrowArray* a) {
  for (int64_t i = 0; i < a->n_children; i++)
    if (a->children[i]->release) a->children[i]->release(a->children[i]);
  if (a->dictionary && a->dictionary->release) a->dictionary->release(a->dictionary);
  a->release = NULL;
}

/* The schema's release frees what the base allocated, not the record. */
static void schema_release_leaks_record(struct ArrowSchema* s) {
  struct kept_schema* k = s->private_data;
  s->release = k->release;
  s->private_data = k->private_data;
  s->release(s); /* ... and k is never freed */
}

/* ---- releases that do not walk their children properly ---- */

/* The parent remembers its children's release callbacks at export time and
 * calls those on the children instead of their current release members. */
struct skipping_array {
  void (*release)(struct ArrowArray*);
  void* private_data;
  int64_t n;
  void (*children[])(struct ArrowArray*);
};
static void array_release_skips_children(struct ArrowArray* a) {
  struct skipping_array* k = a->private_data;
  for (int64_t i = 0; i < a->n_children && i < k->n; i++) {
    struct ArrowArray* c = a->children[i];
    if (c->release) k->children[i](c); /* not c->release(c) */
  }
  a->release = k->release;
  a->private_data = k->private_data;
  free(k);
  a->release(a);
}
static void skip_array_children(struct ArrowArray* a) {
  struct skipping_array* k =
      malloc(sizeof *k + (size_t)a->n_children * sizeof(k->children[0]));
  k->release = a->release;
  k->private_data = a->private_data;
  k->n = a->n_children;
  for (int64_t i = 0; i < a->n_children; i++) k->children[i] = a->children[i]->release;
  a->release = array_release_skips_children;
  a->private_data = k;
}

struct skipping_schema {
  void (*release)(struct ArrowSchema*);
  void* private_data;
  int64_t n;
  void (*children[])(struct ArrowSchema*);
};
static void schema_release_skips_children(struct ArrowSchema* s) {
  struct skipping_schema* k = s->private_data;
  for (int64_t i = 0; i < s->n_children && i < k->n; i++) {
    struct ArrowSchema* c = s->children[i];
    if (c->release) k->children[i](c);
  }
  s->release = k->release;
  s->private_data = k->private_data;
  free(k);
  s->release(s);
}

/* Children whose release tolerates a second call (a no-op), and a parent
 * whose release calls each child's release twice. */
static void array_release_once(struct ArrowArray* c) {
  struct kept_array* k = c->private_data;
  if (!k) { c->release = NULL; return; }
  c->release = k->release;
  c->private_data = k->private_data;
  free(k);
  c->release(c);
  c->private_data = NULL;
}
static void array_release_children_twice(struct ArrowArray* a) {
  struct kept_array* k = a->private_data;
  for (int64_t i = 0; i < a->n_children; i++) {
    struct ArrowArray* c = a->children[i];
    void (*r)(struct ArrowArray*) = c->release;
    if (!r) continue;
    r(c);
    r(c);
  }
  a->release = k->release;
  a->private_data = k->private_data;
  free(k);
  a->release(a);
}
static void release_children_twice(struct ArrowArray* a) {
  for (int64_t i = 0; i < a->n_children; i++) {
    struct ArrowArray* c = a->children[i];
    struct kept_array* kc = malloc(sizeof *kc);
    kc->release = c->release;
    kc->private_data = c->private_data;
    c->release = array_release_once;
    c->private_data = kc;
  }
  struct kept_array* k = malloc(sizeof *k);
  k->release = a->release;
  k->private_data = a->private_data;
  a->release = array_release_children_twice;
  a->private_data = k;
}

/* ---- array mutations, on the root struct array of a batch ---- */

static struct ArrowArray* first_column(struct ArrowArray* a) {
  return a->n_children > 0 ? a->children[0] : NULL;
}

static void mutate_array(struct ArrowArray* a, int64_t slice_length) {
  struct ArrowArray* col = first_column(a);
  switch (M) {
    case RELEASE_KEEPS_POINTER:
      keep_array_pointer(a);
      break;
    case NULL_COUNT_OFF_BY_ONE:
      if (col && col->n_buffers > 0 && col->buffers[0] && col->null_count > 0)
        col->null_count += 1;
      break;
    case UNION_WITH_VALIDITY:
      if (col && col->n_buffers >= 1 && col->n_children > 0 && col->buffers[0]) {
        /* Only unions have children and a first buffer of type ids among
         * the first columns the scenarios use; add a validity slot. The
         * new buffers array leaks on purpose (the producer's release frees
         * its own copy). */
        const void** bufs = calloc((size_t)col->n_buffers + 1, sizeof(void*));
        memcpy(bufs + 1, col->buffers, (size_t)col->n_buffers * sizeof(void*));
        col->buffers = bufs;
        col->n_buffers += 1;
      }
      break;
    case SLICE_OFFSET_IGNORED:
      if (col && slice_length >= 0 && col->offset > 0) col->offset = 0;
      break;
    case LEAK_ONE_CHILD:
      if (col) col->release = leaky_array_release;
      break;
    case RELEASE_SKIPS_CHILDREN:
      skip_array_children(a);
      break;
    case RELEASE_FREES_CHILDREN_TWICE:
      release_children_twice(a);
      break;
    default:
      break;
  }
}

int arrowcert_produce_schema(const uint8_t* ipc, int64_t len, struct ArrowSchema* out) {
  int rc = BASE(arrowcert_produce_schema)(ipc, len, out);
  if (rc == 0 && (M == SCHEMA_RELEASE_KEEPS_POINTER || M == SCHEMA_LEAK)) {
    struct kept_schema* k = malloc(sizeof *k);
    k->release = out->release;
    k->private_data = out->private_data;
    out->release = M == SCHEMA_LEAK ? schema_release_leaks_record : schema_release_keeps_pointer;
    out->private_data = k;
  }
  if (rc == 0 && M == SCHEMA_RELEASE_SKIPS_CHILDREN) {
    struct skipping_schema* k =
        malloc(sizeof *k + (size_t)out->n_children * sizeof(k->children[0]));
    k->release = out->release;
    k->private_data = out->private_data;
    k->n = out->n_children;
    for (int64_t i = 0; i < out->n_children; i++) k->children[i] = out->children[i]->release;
    out->release = schema_release_skips_children;
    out->private_data = k;
  }
  return rc;
}

int arrowcert_produce_array(const uint8_t* ipc, int64_t len, int64_t batch, int64_t offset,
                            int64_t length, struct ArrowArray* out) {
  int rc = BASE(arrowcert_produce_array)(ipc, len, batch, offset, length, out);
  if (rc == 0) mutate_array(out, length);
  return rc;
}

static void mutate_device(struct ArrowDeviceArray* d, const int64_t before[3]) {
  static int event_storage;
  switch (M) {
    case RESERVED_LEFT: memcpy(d->reserved, before, sizeof d->reserved); break;
    case CPU_DEVICE_ID_0: d->device_id = 0; break;
    case SYNC_EVENT_ON_CPU: d->sync_event = &event_storage; break;
    case WRONG_DEVICE_TYPE: d->device_type = ARROW_DEVICE_CUDA_HOST; break;
    default: break;
  }
}

int arrowcert_produce_device_array(const uint8_t* ipc, int64_t len, int64_t batch,
                                   int64_t offset, int64_t length, int32_t device_type,
                                   int64_t device_id, struct ArrowDeviceArray* out) {
  int64_t before[3];
  memcpy(before, out->reserved, sizeof before);
  int rc = BASE(arrowcert_produce_device_array)(ipc, len, batch, offset, length, device_type,
                                                 device_id, out);
  if (rc == 0) {
    mutate_array(&out->array, length);
    mutate_device(out, before);
  }
  return rc;
}

/* ---- stream mutations: a wrapper stream around the base's stream ---- */

struct wrapped { struct ArrowArrayStream inner; int failed; };

static int w_get_schema(struct ArrowArrayStream* s, struct ArrowSchema* out) {
  struct wrapped* w = s->private_data;
  return w->inner.get_schema(&w->inner, out);
}
static int w_get_next(struct ArrowArrayStream* s, struct ArrowArray* out) {
  struct wrapped* w = s->private_data;
  if (M == LAST_ERROR_GARBAGE || M == NEGATIVE_ERROR_CODE) {
    w->failed = 1;
    return M == LAST_ERROR_GARBAGE ? EIO : -1;
  }
  int rc = w->inner.get_next(&w->inner, out);
  if (rc == 0 && out->release == NULL && M == EOS_AS_ERROR) {
    w->failed = 1;
    return ENODATA;
  }
  return rc;
}
static const char* w_get_last_error(struct ArrowArrayStream* s) {
  struct wrapped* w = s->private_data;
  if (w->failed && M == LAST_ERROR_GARBAGE) return "\xff\xfe not UTF-8 \xc3";
  if (w->failed) return "no more batches";
  return w->inner.get_last_error(&w->inner);
}
static void w_release(struct ArrowArrayStream* s) {
  struct wrapped* w = s->private_data;
  if (w->inner.release) w->inner.release(&w->inner);
  if (M != STREAM_LEAK) free(w);
  s->release = NULL;
}

int arrowcert_produce_stream(const uint8_t* ipc, int64_t len, struct ArrowArrayStream* out) {
  struct ArrowArrayStream inner;
  int rc = BASE(arrowcert_produce_stream)(ipc, len, &inner);
  if (rc != 0) return rc;
  if (M == NONE) { *out = inner; return 0; }
  struct wrapped* w = calloc(1, sizeof *w);
  w->inner = inner;
  out->get_schema = w_get_schema;
  out->get_next = w_get_next;
  out->get_last_error = w_get_last_error;
  out->release = w_release;
  out->private_data = w;
  return 0;
}

int arrowcert_produce_device_stream(const uint8_t* ipc, int64_t len, int32_t device_type,
                                    int64_t device_id, struct ArrowDeviceArrayStream* out) {
  int rc = BASE(arrowcert_produce_device_stream)(ipc, len, device_type, device_id, out);
  if (rc == 0 && M == STREAM_DEVICE_TYPE) out->device_type = ARROW_DEVICE_CUDA_HOST;
  return rc;
}

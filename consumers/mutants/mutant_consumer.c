/*
 * Mutant consumers: a correct consumer (the reference plugin, loaded from
 * ARROWCERT_MUTANT_BASE) with exactly one rule broken in how it treats what
 * the harness hands it. The mutation is chosen by ARROWCERT_MUTANT, read
 * (and the base loaded) on the first call into the library; each one is
 * modelled on a way real libraries got the consumer side of the C
 * interfaces wrong. With ARROWCERT_MUTANT=none every call is passed
 * through untouched, so the wrapper itself is shown to break nothing.
 *
 *   cc -shared -fPIC -I harness/include -o libarrowcert_mutant_consumer.so \
 *      consumers/mutants/mutant_consumer.c -ldl -lpthread
 *
 * An unknown mutation, or a base that cannot be loaded, is bad input, not a
 * crash: every consume entry point then releases what it was given and
 * fails with EINVAL, and arrowcert_last_error() says why (the reason is also
 * written once to stderr).
 *
 * The list of mutations, with the rule each one breaks and the bug it
 * models, is MUTANTS below.
 *
 * Two mutations break no rule: they are *limitations*, consumers that use
 * a permission of the spec to refuse input cleanly (everything released,
 * a non-zero code, a message through arrowcert_last_error):
 *  - refuse-offsets: "Consumers MAY decide not to support non-0-offset
 *    arrays": any array, device array or stream chunk with a non-zero
 *    offset at any node (children and dictionaries included) is refused
 *    with EINVAL, "non-zero offsets are not supported" (a stream chunk:
 *    released by this wrapper, the base told EINVAL by get_next, the
 *    consume call then fails with EINVAL and that message);
 *  - refuse-unions: "Consumers MAY decide not to support all data types":
 *    any schema with a union type anywhere (format "+u...") is refused with
 *    EINVAL, "union types are not supported" (a stream's schema is peeked
 *    with get_schema before the base gets the stream);
 *  - refuse-unaligned: "Consumers MAY decide not to support unaligned
 *    memory": any array, device array or stream chunk with a buffer whose
 *    address is not aligned "according to the type of primitive data that
 *    they contain" (buffer_alignment) is refused with EINVAL, "unaligned
 *    memory is not supported" (a stream chunk as refuse-offsets);
 *  - panic-on-unaligned: refuse-unaligned raised as a Rust panic a binding
 *    caught: ENOTRECOVERABLE with arrow-rs's panic message ("... is not
 *    aligned with the specified scalar type ..."). The spec says nothing
 *    of how a consumer refuses, so where the same data aligned at offset 0
 *    is read it is a limitation too.
 * Certification must report them as limitations, never as failures, and
 * the run must still pass (harness/tests/consumer_mutants.rs).
 *
 * How the mutations work. The base only ever sees structures this wrapper
 * built or passed on:
 *  - a *move*: the harness's structure is bitwise copied and the source
 *    marked released (release = NULL), as a correct consumer does;
 *  - a *clone*: a deep copy of a structure tree (the structures and their
 *    buffers/children pointer arrays, in memory of this wrapper; buffer
 *    contents and strings are the harness's own) on which a mutation can
 *    change members without touching the harness's structures. The clone's
 *    root release frees the clone and, where it "chains", then calls the
 *    harness's release on the moved original; the clone's other nodes have
 *    a release that only marks them released (they are freed with the root);
 *  - a *wrapper stream*: the harness's stream is moved into wrapper storage
 *    and the base is handed a stream whose callbacks forward to it.
 * Memory this wrapper allocates is freed by the release that ends its use,
 * so the only thing wrong is the mutation's rule.
 *
 * read-after-release hands the base buffers the harness has poisoned: with
 * poisoned string/binary offsets, arrow-rs (the reference base) may abort
 * the process instead of reporting poison (a crash after the release is
 * still that rule's failure, but run it in a worker process).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "arrowcert_plugin.h"
#include "arrowcert_mutant.h"

/* name, rule it breaks: the bug it models */
#define MUTANTS(X)                                                                     \
  X(NONE, "none")                                                                      \
  /* consumer.release.once: a zero-copy import that installs its own release */        \
  /* and never calls the producer's (arrays, schemas, and stream chunks) */            \
  X(LEAK, "leak")                                                                      \
  /* consumer.release.not-released: a scope guard and an explicit release both */      \
  /* release the array (through a copy kept with the release still set) */            \
  X(DOUBLE_RELEASE, "double-release")                                                  \
  /* consumer.release.no-children: the first column released on its own, */           \
  /* in place, before the batch */                                                     \
  X(RELEASE_CHILD, "release-child")                                                    \
  /* consumer.read.after-release: the input released as soon as its */                \
  /* structures were copied, while the import still borrows its buffers */            \
  X(READ_AFTER_RELEASE, "read-after-release")                                          \
  /* consumer.move.marks-source: a move implemented as a plain struct copy */          \
  X(COPY_WITHOUT_MARKING, "copy-without-marking")                                      \
  /* consumer.read.values: the offset member ignored (values read from slot 0) */      \
  X(IGNORE_OFFSET, "ignore-offset")                                                    \
  /* consumer.read.precision: month_day_nano intervals kept at microsecond */         \
  /* precision (a library whose own interval type counts microseconds) */              \
  X(INTERVAL_AS_MICROSECONDS, "interval-as-microseconds")                              \
  /* consumer.read.values: the same intervals with the days lost, the control */       \
  /* that other damage to such a column still fails the MUST */                        \
  X(INTERVAL_DAYS_LOST, "interval-days-lost")                                          \
  /* consumer.read.values: a sliced string column's data copied up to */               \
  /* offsets[length] instead of offsets[offset + length] */                            \
  X(STRING_LENGTH_FROM_FIRST_OFFSET, "string-length-from-first-offset")                \
  /* consumer.read.accepts: NULL data/offset buffers of an empty array refused */      \
  /* (no permission covers it: the same data, buffers allocated, is read) */          \
  X(NULL_BUFFERS_OF_EMPTY, "null-buffers-of-empty")                                    \
  /* consumer.read.metadata: metadata dropped on import (the spec lets consumers ignore it: INFO) */ \
  X(DROP_METADATA, "drop-metadata")                                                    \
  /* consumer.read.types: DICTIONARY_ORDERED and MAP_KEYS_SORTED dropped */            \
  X(IGNORE_FLAGS, "ignore-flags")                                                      \
  /* consumer.read.types: every column read as nullable, the values kept */           \
  X(ALL_COLUMNS_NULLABLE, "all-columns-nullable")                                      \
  /* consumer.stream.last-error: the producer's message pointer kept instead */        \
  /* of copied, and read after the stream was released */                             \
  X(KEEP_LAST_ERROR, "keep-last-error")                                                \
  /* consumer.stream.last-error: get_last_error called after every successful */      \
  /* get_next (a logger that asks whether there was a message) */                      \
  X(LAST_ERROR_AFTER_SUCCESS, "last-error-after-success")                              \
  /* consumer.stream.error: a retry that calls get_next again after a */               \
  /* failure and takes the end of stream it then gets for success */                  \
  X(GET_NEXT_AFTER_ERROR, "get-next-after-error")                                      \
  /* consumer.stream.release: the stream treated as borrowed, never released */        \
  X(STREAM_NEVER_RELEASED, "stream-never-released")                                    \
  /* consumer.stream.serial: a helper thread asks for the schema while the */          \
  /* every get_next is running */                                                      \
  X(CONCURRENT_GET_NEXT, "concurrent-get-next")                                        \
  /* consumer.release.checks-released: no check for a NULL release; a */               \
  /* released array is read as an empty result */                                      \
  X(ACCEPTS_RELEASED, "accepts-released")                                              \
  /* consumer.data.immutable: an in-place fix-up of a byte of the producer's */        \
  /* buffers (first column's first data buffer) */                                    \
  X(WRITE_BUFFER, "write-buffer")                                                      \
  /* none (a limitation): input with a non-zero offset at any node refused */          \
  X(REFUSE_OFFSETS, "refuse-offsets")                                                  \
  /* none (a limitation): schemas with a union type anywhere refused */                \
  X(REFUSE_UNIONS, "refuse-unions")                                                    \
  /* none (a limitation): a buffer not aligned to its type refused */                  \
  X(REFUSE_UNALIGNED, "refuse-unaligned")                                              \
  /* none (a limitation): refuse-unaligned raised as a Rust panic a binding */        \
  /* caught (ENOTRECOVERABLE, the panic's words), as arrow-rs's import does */        \
  X(PANIC_ON_UNALIGNED, "panic-on-unaligned")                                          \
  /* none (correct): the input array released 30 ms after the call returned, */        \
  /* from a thread of its own (a pool still finishing the call's tasks) */              \
  X(LATE_RELEASE, "late-release")

#define AS_ENUM(e, s) e,
#define AS_NAME(e, s) s,
enum mutant { MUTANTS(AS_ENUM) N_MUTANTS };
static const char* const NAMES[] = {MUTANTS(AS_NAME)};
static enum mutant M = NONE;
static void* base;

/* ---- lazy set-up: the mutation and the base, on the first call ---- */

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char setup_error[512]; /* empty when set up */
static char plugin_name[160];

static void setup(void) {
  int i = arrowcert_mutant_setup("mutant consumer", NAMES, N_MUTANTS, &base, setup_error,
                                 sizeof setup_error);
  if (i < 0) {
    snprintf(plugin_name, sizeof plugin_name, "arrowcert mutant consumer (unknown: %.80s)",
             arrowcert_mutant_wanted());
  } else {
    M = (enum mutant)i;
    snprintf(plugin_name, sizeof plugin_name, "arrowcert mutant consumer (%s)", NAMES[M]);
  }
  if (setup_error[0]) fprintf(stderr, "%s\n", setup_error);
}

/* 1 when the base is loaded and the mutation known. */
static int ready(void) {
  pthread_once(&once, setup);
  return setup_error[0] == 0;
}


/* ---- this wrapper's own last error ---- */

static __thread const char* my_error;  /* a failure of the wrapper itself */
static __thread int use_kept;          /* keep-last-error: report kept_error */
static const char* volatile kept_error; /* keep-last-error: the producer's pointer */

/* Called at the start of every consume entry point. */
static void begin(void) {
  my_error = NULL;
  use_kept = 0;
}

static int fail(int code, const char* message) {
  my_error = message;
  return code;
}

/* ---- identity and housekeeping ---- */

int32_t arrowcert_plugin_abi_version(void) { return 1; }

const char* arrowcert_plugin_name(void) {
  ready();
  return plugin_name;
}

int32_t arrowcert_plugin_supports_device(int32_t device_type) {
  if (!ready()) return 0;
  __typeof__(&arrowcert_plugin_supports_device) f = BASE(arrowcert_plugin_supports_device);
  return f ? f(device_type) : device_type == ARROW_DEVICE_CPU;
}

const char* arrowcert_last_error(void) {
  if (my_error) return my_error;
  if (use_kept) return kept_error;
  if (!ready()) return setup_error;
  __typeof__(&arrowcert_last_error) f = BASE(arrowcert_last_error);
  return f ? f() : NULL;
}

void arrowcert_free(void* ptr) {
  if (!ready()) return; /* nothing was handed out */
  __typeof__(&arrowcert_free) f = BASE(arrowcert_free);
  if (f) f(ptr);
}

/* ---- small helpers ---- */

static void release_schema(struct ArrowSchema* s) {
  if (s && s->release) s->release(s);
}
static void release_array(struct ArrowArray* a) {
  if (a && a->release) a->release(a);
}

/* Moves a structure: a bitwise copy, the source marked released. */
static struct ArrowArray move_array(struct ArrowArray* src) {
  struct ArrowArray a = *src;
  src->release = NULL;
  return a;
}
static struct ArrowSchema move_schema(struct ArrowSchema* src) {
  struct ArrowSchema s = *src;
  src->release = NULL;
  return s;
}

/* ---- clones: deep copies of structure trees in this wrapper's memory ---- */

/* Everything one clone allocated, and the original its root chains to. */
struct tree {
  void** owned;
  size_t n_owned, cap;
  int chain;                      /* the root's release releases the original */
  struct ArrowArray orig_array;   /* the moved original (array trees) */
  struct ArrowSchema orig_schema; /* the moved original (schema trees) */
};

static struct tree* tree_new(int chain) {
  struct tree* t = calloc(1, sizeof *t);
  if (t) t->chain = chain;
  return t;
}
/* Records `p` as the tree's (NULL stays NULL, and marks the tree failed). */
static void* tree_own(struct tree* t, void* p, int* failed) {
  if (!p) {
    *failed = 1;
    return NULL;
  }
  if (t->n_owned == t->cap) {
    size_t cap = t->cap ? 2 * t->cap : 16;
    void** owned = realloc(t->owned, cap * sizeof *owned);
    if (!owned) {
      free(p);
      *failed = 1;
      return NULL;
    }
    t->owned = owned;
    t->cap = cap;
  }
  t->owned[t->n_owned++] = p;
  return p;
}
static void tree_free(struct tree* t) {
  for (size_t i = 0; i < t->n_owned; i++) free(t->owned[i]);
  free(t->owned);
  free(t);
}

/* A clone's nodes below the root: freed with the root; release only marks. */
static void clone_array_node_release(struct ArrowArray* a) { a->release = NULL; }
static void clone_schema_node_release(struct ArrowSchema* s) { s->release = NULL; }

static void clone_array_root_release(struct ArrowArray* a) {
  struct tree* t = a->private_data;
  if (t->chain && t->orig_array.release) t->orig_array.release(&t->orig_array);
  tree_free(t);
  a->release = NULL;
}
static void clone_schema_root_release(struct ArrowSchema* s) {
  struct tree* t = s->private_data;
  if (t->chain && t->orig_schema.release) t->orig_schema.release(&t->orig_schema);
  tree_free(t);
  s->release = NULL;
}

static void clone_array_into(struct tree* t, const struct ArrowArray* src, struct ArrowArray* dst,
                             int* failed) {
  *dst = *src;
  dst->release = clone_array_node_release;
  dst->private_data = NULL;
  if (src->n_buffers > 0 && src->buffers) {
    size_t n = (size_t)src->n_buffers;
    const void** b = tree_own(t, malloc(n * sizeof *b), failed);
    if (!b) return;
    memcpy(b, src->buffers, n * sizeof *b);
    dst->buffers = b;
  }
  if (src->n_children > 0 && src->children) {
    size_t n = (size_t)src->n_children;
    struct ArrowArray** c = tree_own(t, calloc(n, sizeof *c), failed);
    if (!c) return;
    dst->children = c;
    for (size_t i = 0; i < n; i++) {
      if (!src->children[i]) continue;
      c[i] = tree_own(t, malloc(sizeof *c[i]), failed);
      if (!c[i]) return;
      clone_array_into(t, src->children[i], c[i], failed);
    }
  }
  if (src->dictionary) {
    struct ArrowArray* d = tree_own(t, malloc(sizeof *d), failed);
    if (!d) return;
    dst->dictionary = d;
    clone_array_into(t, src->dictionary, d, failed);
  }
}

static void clone_schema_into(struct tree* t, const struct ArrowSchema* src,
                              struct ArrowSchema* dst, int* failed) {
  *dst = *src;
  dst->release = clone_schema_node_release;
  dst->private_data = NULL;
  if (src->n_children > 0 && src->children) {
    size_t n = (size_t)src->n_children;
    struct ArrowSchema** c = tree_own(t, calloc(n, sizeof *c), failed);
    if (!c) return;
    dst->children = c;
    for (size_t i = 0; i < n; i++) {
      if (!src->children[i]) continue;
      c[i] = tree_own(t, malloc(sizeof *c[i]), failed);
      if (!c[i]) return;
      clone_schema_into(t, src->children[i], c[i], failed);
    }
  }
  if (src->dictionary) {
    struct ArrowSchema* d = tree_own(t, malloc(sizeof *d), failed);
    if (!d) return;
    dst->dictionary = d;
    clone_schema_into(t, src->dictionary, d, failed);
  }
}

/* Clones the live array `src` into `out`. With `chain`, `src` is moved into
 * the clone (the root's release then releases it) and its source marked
 * released; without, `src` is left as it is. 0, or ENOMEM with nothing
 * changed. */
static int clone_array(struct ArrowArray* src, struct ArrowArray* out, int chain) {
  struct tree* t = tree_new(chain);
  if (!t) return ENOMEM;
  int failed = 0;
  struct ArrowArray root;
  clone_array_into(t, src, &root, &failed);
  if (failed) {
    tree_free(t);
    return ENOMEM;
  }
  root.release = clone_array_root_release;
  root.private_data = t;
  if (chain) t->orig_array = move_array(src);
  *out = root;
  return 0;
}

static int clone_schema(struct ArrowSchema* src, struct ArrowSchema* out, int chain) {
  struct tree* t = tree_new(chain);
  if (!t) return ENOMEM;
  int failed = 0;
  struct ArrowSchema root;
  clone_schema_into(t, src, &root, &failed);
  if (failed) {
    tree_free(t);
    return ENOMEM;
  }
  root.release = clone_schema_root_release;
  root.private_data = t;
  if (chain) t->orig_schema = move_schema(src);
  *out = root;
  return 0;
}

/* ---- walks over a clone ---- */

static void zero_offsets(struct ArrowArray* a) {
  if (!a) return;
  a->offset = 0;
  for (int64_t i = 0; i < a->n_children && a->children; i++) zero_offsets(a->children[i]);
  zero_offsets(a->dictionary);
}

static void drop_metadata(struct ArrowSchema* s) {
  if (!s) return;
  s->metadata = NULL;
  for (int64_t i = 0; i < s->n_children && s->children; i++) drop_metadata(s->children[i]);
  drop_metadata(s->dictionary);
}

static void all_columns_nullable(struct ArrowSchema* root) {
  for (int64_t i = 0; i < root->n_children && root->children; i++)
    root->children[i]->flags |= ARROW_FLAG_NULLABLE;
}

static void drop_flags(struct ArrowSchema* s) {
  if (!s) return;
  s->flags &= ~(int64_t)(ARROW_FLAG_DICTIONARY_ORDERED | ARROW_FLAG_MAP_KEYS_SORTED);
  for (int64_t i = 0; i < s->n_children && s->children; i++) drop_flags(s->children[i]);
  drop_flags(s->dictionary);
}

/* For every string/binary node (int32 offsets) of the clone `a` with a
 * non-zero offset: a new data buffer of offsets[offset + length] bytes, of
 * which only the first offsets[length] are copied and the rest is '?'. */
static void shorten_strings(struct tree* t, const struct ArrowSchema* s, struct ArrowArray* a,
                            int* failed) {
  if (!s || !a) return;
  if (s->format && (strcmp(s->format, "u") == 0 || strcmp(s->format, "z") == 0) &&
      a->offset > 0 && a->length >= 0 && a->n_buffers >= 3 && a->buffers && a->buffers[1] &&
      a->buffers[2]) {
    const int32_t* offsets = a->buffers[1];
    int32_t end = offsets[a->offset + a->length];
    int32_t first = offsets[a->length]; /* the bug: the slice's offset left out */
    if (first < 0) first = 0;
    if (end >= 0 && first <= end) {
      unsigned char* data = tree_own(t, malloc((size_t)end + 1), failed);
      if (!data) return;
      memcpy(data, a->buffers[2], (size_t)first);
      memset(data + first, '?', (size_t)(end - first));
      a->buffers[2] = data;
    }
  }
  for (int64_t i = 0; i < s->n_children && i < a->n_children && s->children && a->children; i++)
    shorten_strings(t, s->children[i], a->children[i], failed);
  shorten_strings(t, s->dictionary, a->dictionary, failed);
}

/* interval-as-microseconds / interval-days-lost: every month_day_nano
 * interval ("tin": int32 months, int32 days, int64 nanoseconds) of the
 * tree read from a copy with the nanoseconds cut to microseconds (toward
 * zero), or with the days set to 0. */
static void cut_intervals(struct tree* t, const struct ArrowSchema* s, struct ArrowArray* a,
                          int* failed) {
  if (!s || !a) return;
  if (s->format && strcmp(s->format, "tin") == 0 && a->n_buffers >= 2 && a->buffers &&
      a->buffers[1] && a->offset >= 0 && a->length > 0) {
    size_t n = (size_t)(a->offset + a->length);
    unsigned char* v = tree_own(t, malloc(n * 16), failed);
    if (!v) return;
    memcpy(v, a->buffers[1], n * 16);
    for (size_t i = 0; i < n; i++) {
      if (M == INTERVAL_DAYS_LOST) {
        memset(v + 16 * i + 4, 0, 4);
        continue;
      }
      int64_t ns;
      memcpy(&ns, v + 16 * i + 8, 8);
      ns = ns / 1000 * 1000;
      memcpy(v + 16 * i + 8, &ns, 8);
    }
    a->buffers[1] = v;
  }
  for (int64_t i = 0; i < s->n_children && i < a->n_children && s->children && a->children; i++)
    cut_intervals(t, s->children[i], a->children[i], failed);
  cut_intervals(t, s->dictionary, a->dictionary, failed);
}

/* refuse-offsets: a non-zero offset at any node of the array tree. */
static int nonzero_offset(const struct ArrowArray* a) {
  if (!a) return 0;
  if (a->offset != 0) return 1;
  for (int64_t i = 0; i < a->n_children && a->children; i++)
    if (nonzero_offset(a->children[i])) return 1;
  return nonzero_offset(a->dictionary);
}

/* refuse-unions: a union type (format "+u...") anywhere in the schema. */
static int has_union(const struct ArrowSchema* s) {
  if (!s) return 0;
  if (s->format && strncmp(s->format, "+u", 2) == 0) return 1;
  for (int64_t i = 0; i < s->n_children && s->children; i++)
    if (has_union(s->children[i])) return 1;
  return has_union(s->dictionary);
}

static const char OFFSETS_REFUSED[] = "non-zero offsets are not supported";
static const char UNIONS_REFUSED[] = "union types are not supported";
static const char UNALIGNED_REFUSED[] = "unaligned memory is not supported";
/* What arrow-rs's import panics with on such a buffer (arrow-buffer's
 * ScalarBuffer), as a binding that catches the panic reports it. */
static const char UNALIGNED_PANIC[] =
    "panicked: Memory pointer from external source (e.g, FFI) is not aligned with the "
    "specified scalar type. Before importing buffer through FFI, please make sure the "
    "allocation is aligned.";

/* refuse-unaligned: the alignment that buffer `i` of a node of format `f`
 * needs, "aligned at least according to the type of primitive data that
 * they contain" (CDataInterface.rst); 1 where any address will do
 * (validity bitmaps, union type ids, bytes, unknown formats). */
static uintptr_t buffer_alignment(const char* f, int64_t i, int64_t n_buffers) {
  if (!f || i == 0) return 1;
  switch (f[0]) {
    case 's': case 'S': case 'e': return 2;
    case 'i': case 'I': case 'f': return 4;
    case 'l': case 'L': case 'g': return 8;
    case 'd': { /* "d:P,S[,BITS]": 32-bit decimals are int32s, the rest int64 words */
      const char* bits = strrchr(f, ',');
      return bits && bits != strchr(f, ',') && strcmp(bits, ",32") == 0 ? 4 : 8;
    }
    case 'u': case 'z': return i == 1 ? 4 : 1;
    case 'U': case 'Z': return i == 1 ? 8 : 1;
    case 'v': /* views: int32 fields; the variadic sizes: int64 */
      return i == 1 ? 4 : (i == n_buffers - 1 ? 8 : 1);
    case 't':
      switch (f[1]) {
        case 'd': return f[2] == 'D' ? 4 : 8;
        case 't': return (f[2] == 's' || f[2] == 'm') ? 4 : 8;
        case 'i': return f[2] == 'n' ? 8 : 4;
        default: return 8; /* timestamps, durations */
      }
    case '+':
      if (i != 1) return 1;
      if (strcmp(f, "+l") == 0 || strcmp(f, "+vl") == 0 || strcmp(f, "+m") == 0 ||
          strncmp(f, "+ud", 3) == 0)
        return 4;
      if (strcmp(f, "+L") == 0 || strcmp(f, "+vL") == 0) return 8;
      return 1;
    default: return 1;
  }
}

/* refuse-unaligned: a buffer of the tree not aligned to its type. */
static int unaligned(const struct ArrowSchema* s, const struct ArrowArray* a) {
  if (!s || !a) return 0;
  for (int64_t i = 0; i < a->n_buffers && a->buffers; i++)
    if (a->buffers[i] && (uintptr_t)a->buffers[i] % buffer_alignment(s->format, i, a->n_buffers))
      return 1;
  for (int64_t i = 0; i < a->n_children && i < s->n_children && a->children && s->children; i++)
    if (unaligned(s->children[i], a->children[i])) return 1;
  return unaligned(s->dictionary, a->dictionary);
}

/* What a refusal of refuse-offsets or refuse-unaligned says. */
static const char* refusal_message(void) {
  return M == PANIC_ON_UNALIGNED ? UNALIGNED_PANIC
         : M == REFUSE_UNALIGNED ? UNALIGNED_REFUSED
                                 : OFFSETS_REFUSED;
}
/* The code of such a refusal: a caught panic is ENOTRECOVERABLE. */
static int refusal_code(void) { return M == PANIC_ON_UNALIGNED ? ENOTRECOVERABLE : EINVAL; }

static int null_buffer_in_empty(const struct ArrowArray* a) {
  if (!a) return 0;
  if (a->length == 0)
    for (int64_t i = 1; i < a->n_buffers; i++)
      if (!a->buffers || !a->buffers[i]) return 1;
  for (int64_t i = 0; i < a->n_children && a->children; i++)
    if (null_buffer_in_empty(a->children[i])) return 1;
  return null_buffer_in_empty(a->dictionary);
}

/* ---- wrapped releases on a moved root array ---- */

struct saved_release {
  void (*release)(struct ArrowArray*);
  void* private_data;
};

/* Installs `wrapper` as the release of the moved array `a`. */
static int wrap_release(struct ArrowArray* a, void (*wrapper)(struct ArrowArray*)) {
  struct saved_release* r = malloc(sizeof *r);
  if (!r) return ENOMEM;
  r->release = a->release;
  r->private_data = a->private_data;
  a->release = wrapper;
  a->private_data = r;
  return 0;
}
/* Puts the saved release back on `a` and calls it. */
static void unwrap_and_release(struct ArrowArray* a) {
  struct saved_release* r = a->private_data;
  a->release = r->release;
  a->private_data = r->private_data;
  free(r);
  if (a->release) a->release(a);
}

/* release-child: the first column's release called directly, in place. */
static void release_first_child_first(struct ArrowArray* a) {
  if (a->n_children > 0 && a->children && a->children[0] && a->children[0]->release)
    a->children[0]->release(a->children[0]);
  unwrap_and_release(a);
}

/* write-buffer: one byte of a data buffer changed in place before release. */
static unsigned char* first_data_byte(struct ArrowArray* a) {
  if (!a || !a->buffers) return NULL;
  for (int64_t i = 1; i < a->n_buffers; i++)
    if (a->buffers[i]) return (unsigned char*)a->buffers[i];
  return NULL;
}
static void write_then_release(struct ArrowArray* a) {
  unsigned char* p = NULL;
  for (int64_t i = 0; i < a->n_children && a->children && !p; i++) {
    struct ArrowArray* c = a->children[i];
    if (c && c->length > 0) p = first_data_byte(c);
  }
  if (!p) p = first_data_byte(a);
  if (p) *p += 1;
  unwrap_and_release(a);
}

/* ---- arrays: consume_array and consume_device_array ---- */

/* Passes the caller's structures to the base untouched. */
static int base_batch(struct ArrowSchema* schema, struct ArrowArray* array,
                      struct ArrowDeviceArray* dev, uint8_t** out, int64_t* len) {
  if (dev) {
    __typeof__(&arrowcert_consume_device_array) f = BASE(arrowcert_consume_device_array);
    if (!f) {
      release_schema(schema);
      release_array(&dev->array);
      return fail(ENOSYS, "mutant consumer: the base has no arrowcert_consume_device_array");
    }
    return f(schema, dev, out, len);
  }
  __typeof__(&arrowcert_consume_array) f = BASE(arrowcert_consume_array);
  if (!f) {
    release_schema(schema);
    release_array(array);
    return fail(ENOSYS, "mutant consumer: the base has no arrowcert_consume_array");
  }
  return f(schema, array, out, len);
}

/* late-release: the array `arg` (malloc'd) released 30 ms from now. */
static void* release_later(void* arg) {
  struct ArrowArray* held = arg;
  struct timespec ts = {0, 30 * 1000 * 1000};
  nanosleep(&ts, NULL);
  held->release(held);
  free(held);
  return NULL;
}

/* Hands the base `schema` and the array `a` this wrapper built; for a device
 * array, inside a device array whose other members are the caller's. */
static int hand_batch(struct ArrowSchema* schema, struct ArrowArray* a,
                      struct ArrowDeviceArray* dev, uint8_t** out, int64_t* len) {
  if (dev) {
    struct ArrowDeviceArray d = *dev;
    d.array = *a;
    a->release = NULL; /* moved into d */
    return base_batch(schema, NULL, &d, out, len);
  }
  return base_batch(schema, a, NULL, out, len);
}

static int out_of_memory(struct ArrowSchema* schema, struct ArrowArray* array) {
  release_schema(schema);
  release_array(array);
  return fail(ENOMEM, "mutant consumer: out of memory");
}

/* `array` is the caller's array, or the array embedded in `dev`. */
static int consume_batch(struct ArrowSchema* schema, struct ArrowArray* array,
                         struct ArrowDeviceArray* dev, uint8_t** out, int64_t* len) {
  begin();
  if (!ready()) {
    release_schema(schema);
    release_array(array);
    return fail(EINVAL, setup_error);
  }
  if (M == ACCEPTS_RELEASED && array && !array->release && schema && schema->release &&
      out && len) {
    release_schema(schema);
    *out = NULL;
    *len = 0;
    return 0;
  }
  /* Anything the base must refuse is passed on as it is. */
  if (M == NONE || !schema || !array || !schema->release || !array->release || !out || !len)
    return base_batch(schema, array, dev, out, len);

  struct ArrowArray a;
  struct ArrowSchema s;
  switch (M) {
    case LEAK: {
      /* No-op clones for the base; the originals are marked released and
       * never released. */
      if (clone_array(array, &a, 0) != 0) return out_of_memory(schema, array);
      if (clone_schema(schema, &s, 0) != 0) {
        a.release(&a);
        return out_of_memory(schema, array);
      }
      array->release = NULL;
      schema->release = NULL;
      return hand_batch(&s, &a, dev, out, len);
    }
    case DOUBLE_RELEASE: {
      struct ArrowArray kept = *array;
      int rc = base_batch(schema, array, dev, out, len);
      if (kept.release) kept.release(&kept);
      return rc;
    }
    case RELEASE_CHILD:
    case WRITE_BUFFER: {
      a = *array;
      if (wrap_release(&a, M == RELEASE_CHILD ? release_first_child_first : write_then_release))
        return out_of_memory(schema, array);
      array->release = NULL;
      return hand_batch(schema, &a, dev, out, len);
    }
    case LATE_RELEASE: {
      /* The base reads a no-op clone within the call; the original goes to
         a thread that releases it later. */
      struct ArrowArray* held = malloc(sizeof *held);
      if (held == NULL) return out_of_memory(schema, array);
      if (clone_array(array, &a, 0) != 0) {
        free(held);
        return out_of_memory(schema, array);
      }
      *held = move_array(array);
      int rc = hand_batch(schema, &a, dev, out, len);
      pthread_t t;
      if (pthread_create(&t, NULL, release_later, held) != 0) {
        held->release(held);
        free(held);
      } else {
        pthread_detach(t);
      }
      return rc;
    }
    case READ_AFTER_RELEASE: {
      if (clone_array(array, &a, 0) != 0) return out_of_memory(schema, array);
      struct ArrowArray moved = move_array(array);
      moved.release(&moved); /* the harness poisons the buffers the clone points to */
      return hand_batch(schema, &a, dev, out, len);
    }
    case COPY_WITHOUT_MARKING:
      a = *array; /* the source keeps its release */
      return hand_batch(schema, &a, dev, out, len);
    case IGNORE_OFFSET:
      if (clone_array(array, &a, 1) != 0) return out_of_memory(schema, array);
      zero_offsets(&a);
      return hand_batch(schema, &a, dev, out, len);
    case STRING_LENGTH_FROM_FIRST_OFFSET:
    case INTERVAL_AS_MICROSECONDS:
    case INTERVAL_DAYS_LOST: {
      if (clone_array(array, &a, 1) != 0) return out_of_memory(schema, array);
      int failed = 0;
      if (M == STRING_LENGTH_FROM_FIRST_OFFSET)
        shorten_strings(a.private_data, schema, &a, &failed);
      else
        cut_intervals(a.private_data, schema, &a, &failed);
      if (failed) {
        a.release(&a);
        release_schema(schema);
        return fail(ENOMEM, "mutant consumer: out of memory");
      }
      return hand_batch(schema, &a, dev, out, len);
    }
    case NULL_BUFFERS_OF_EMPTY:
      if (!null_buffer_in_empty(array)) return base_batch(schema, array, dev, out, len);
      release_schema(schema);
      release_array(array);
      return fail(EINVAL, "NULL buffer in an empty array");
    case REFUSE_OFFSETS:
    case REFUSE_UNIONS:
    case REFUSE_UNALIGNED:
    case PANIC_ON_UNALIGNED: {
      int refuse = M == REFUSE_OFFSETS ? nonzero_offset(array)
                   : M == REFUSE_UNIONS ? has_union(schema)
                                        : unaligned(schema, array);
      if (!refuse) return base_batch(schema, array, dev, out, len);
      release_schema(schema);
      release_array(array);
      return fail(M == REFUSE_UNIONS ? EINVAL : refusal_code(),
                  M == REFUSE_UNIONS ? UNIONS_REFUSED : refusal_message());
    }
    case DROP_METADATA:
    case IGNORE_FLAGS:
    case ALL_COLUMNS_NULLABLE:
      if (clone_schema(schema, &s, 1) != 0) return out_of_memory(schema, array);
      if (M == DROP_METADATA)
        drop_metadata(&s);
      else if (M == IGNORE_FLAGS)
        drop_flags(&s);
      else
        all_columns_nullable(&s);
      return base_batch(&s, array, dev, out, len);
    default: /* stream mutations */
      return base_batch(schema, array, dev, out, len);
  }
}

int arrowcert_consume_array(struct ArrowSchema* schema, struct ArrowArray* array,
                            uint8_t** out_ipc, int64_t* out_len) {
  return consume_batch(schema, array, NULL, out_ipc, out_len);
}

int arrowcert_consume_device_array(struct ArrowSchema* schema, struct ArrowDeviceArray* array,
                                   uint8_t** out_ipc, int64_t* out_len) {
  if (!array) {
    begin();
    if (!ready()) {
      release_schema(schema);
      return fail(EINVAL, setup_error);
    }
    __typeof__(&arrowcert_consume_device_array) f = BASE(arrowcert_consume_device_array);
    if (!f) {
      release_schema(schema);
      return fail(ENOSYS, "mutant consumer: the base has no arrowcert_consume_device_array");
    }
    return f(schema, NULL, out_ipc, out_len);
  }
  return consume_batch(schema, &array->array, array, out_ipc, out_len);
}

/* ---- streams: a wrapper stream around the harness's ---- */

struct wstream {
  int device;                           /* which of the two is the original */
  struct ArrowArrayStream inner;        /* the moved original, plain */
  struct ArrowDeviceArrayStream dinner; /* the moved original, device */
  int get_next_calls;
  int refused; /* refuse-offsets: a chunk was refused (get_last_error says why) */
};

/* refuse-offsets: set when the wrapper refused a stream chunk, read by the
 * consume call once the base returned (the wrapper stream is freed by then). */
static volatile int chunk_refused;

static int w_inner_get_schema(struct wstream* w, struct ArrowSchema* out) {
  return w->device ? w->dinner.get_schema(&w->dinner, out) : w->inner.get_schema(&w->inner, out);
}
static int w_inner_get_next(struct wstream* w, void* out) {
  return w->device ? w->dinner.get_next(&w->dinner, out) : w->inner.get_next(&w->inner, out);
}
static const char* w_inner_get_last_error(struct wstream* w) {
  return w->device ? w->dinner.get_last_error(&w->dinner) : w->inner.get_last_error(&w->inner);
}
static void w_inner_release(struct wstream* w) {
  if (w->device) {
    if (w->dinner.release) w->dinner.release(&w->dinner);
  } else {
    if (w->inner.release) w->inner.release(&w->inner);
  }
}

/* concurrent-get-next: a thread that calls get_schema while get_next runs
   (on every get_next). */
struct company {
  struct wstream* w;
  int started;
};
static void* company_thread(void* p) {
  struct company* c = p;
  struct ArrowSchema s;
  memset(&s, 0, sizeof s);
  __atomic_store_n(&c->started, 1, __ATOMIC_SEQ_CST);
  if (w_inner_get_schema(c->w, &s) == 0 && s.release) s.release(&s);
  return NULL;
}
static int get_next_in_company(struct wstream* w, void* out) {
  struct company c = {w, 0};
  pthread_t thread;
  if (pthread_create(&thread, NULL, company_thread, &c) != 0) return w_inner_get_next(w, out);
  while (!__atomic_load_n(&c.started, __ATOMIC_SEQ_CST)) sched_yield();
  int rc = w_inner_get_next(w, out);
  pthread_join(thread, NULL);
  return rc;
}

static int w_get_schema_common(struct wstream* w, struct ArrowSchema* out) {
  int rc = w_inner_get_schema(w, out);
  if (rc == 0 && M == LEAK && out->release) {
    struct ArrowSchema clone;
    if (clone_schema(out, &clone, 0) == 0) *out = clone; /* the original: never released */
  }
  return rc;
}

/* refuse-unaligned: a chunk with a buffer not aligned to its type, judged
 * against the stream's schema (asked for again; one it cannot give refuses
 * nothing). */
static int chunk_unaligned(struct wstream* w, const struct ArrowArray* chunk) {
  struct ArrowSchema s;
  memset(&s, 0, sizeof s);
  if (w_inner_get_schema(w, &s) != 0) return 0;
  int found = unaligned(&s, chunk);
  if (s.release) s.release(&s);
  return found;
}

/* `chunk` is the array `out` holds (itself, or a device array's). */
static int w_get_next_common(struct wstream* w, void* out, struct ArrowArray* chunk) {
  int rc;
  /* Every call, so that one missed overlap (a thread scheduled late)
     leaves others to see. */
  if (M == CONCURRENT_GET_NEXT)
    rc = get_next_in_company(w, out);
  else
    rc = w_inner_get_next(w, out);
  w->get_next_calls++;
  if (rc == 0 && M == LAST_ERROR_AFTER_SUCCESS) (void)w_inner_get_last_error(w);
  if (rc != 0 && M == GET_NEXT_AFTER_ERROR) rc = w_inner_get_next(w, out);
  if (rc == 0 && M == LEAK && chunk->release) {
    struct ArrowArray clone;
    if (clone_array(chunk, &clone, 0) == 0) *chunk = clone; /* the original: never released */
  }
  if (rc == 0 && (M == REFUSE_OFFSETS || M == REFUSE_UNALIGNED || M == PANIC_ON_UNALIGNED) &&
      chunk->release &&
      (M == REFUSE_OFFSETS ? nonzero_offset(chunk) : chunk_unaligned(w, chunk))) {
    chunk->release(chunk); /* refused: the chunk released, the base told EINVAL */
    w->refused = 1;
    chunk_refused = 1;
    return EINVAL;
  }
  return rc;
}

static const char* w_get_last_error_common(struct wstream* w) {
  if (w->refused) return refusal_message();
  const char* message = w_inner_get_last_error(w);
  if (M == KEEP_LAST_ERROR) kept_error = message;
  return message;
}

static void w_release_common(struct wstream* w) {
  if (M != STREAM_NEVER_RELEASED) w_inner_release(w);
  free(w);
}

static int ws_get_schema(struct ArrowArrayStream* s, struct ArrowSchema* out) {
  return w_get_schema_common(s->private_data, out);
}
static int ws_get_next(struct ArrowArrayStream* s, struct ArrowArray* out) {
  return w_get_next_common(s->private_data, out, out);
}
static const char* ws_get_last_error(struct ArrowArrayStream* s) {
  return w_get_last_error_common(s->private_data);
}
static void ws_release(struct ArrowArrayStream* s) {
  w_release_common(s->private_data);
  s->release = NULL;
}

static int wd_get_schema(struct ArrowDeviceArrayStream* s, struct ArrowSchema* out) {
  return w_get_schema_common(s->private_data, out);
}
static int wd_get_next(struct ArrowDeviceArrayStream* s, struct ArrowDeviceArray* out) {
  return w_get_next_common(s->private_data, out, &out->array);
}
static const char* wd_get_last_error(struct ArrowDeviceArrayStream* s) {
  return w_get_last_error_common(s->private_data);
}
static void wd_release(struct ArrowDeviceArrayStream* s) {
  w_release_common(s->private_data);
  s->release = NULL;
}

static int wraps_streams(void) {
  return M == LEAK || M == KEEP_LAST_ERROR || M == GET_NEXT_AFTER_ERROR ||
         M == STREAM_NEVER_RELEASED || M == CONCURRENT_GET_NEXT || M == REFUSE_OFFSETS ||
         M == REFUSE_UNALIGNED || M == PANIC_ON_UNALIGNED ||
         M == LAST_ERROR_AFTER_SUCCESS;
}

/* What the base returned, with the kept message as last error when
 * keep-last-error has one. */
static int stream_result(int rc) {
  if (rc != 0 && M == KEEP_LAST_ERROR && kept_error) use_kept = 1;
  if (chunk_refused) {
    chunk_refused = 0;
    return fail(refusal_code(), refusal_message());
  }
  return rc;
}

/* refuse-unions: peeks at a stream's schema; 1 (the stream released, the
 * refusal set) when it has a union. A schema the stream cannot give is left
 * for the base to report. */
#define PEEK_UNIONS(stream)                                                 \
  do {                                                                      \
    struct ArrowSchema peeked;                                              \
    memset(&peeked, 0, sizeof peeked);                                      \
    if ((stream)->get_schema && (stream)->get_schema((stream), &peeked) == 0) { \
      int u = has_union(&peeked);                                           \
      release_schema(&peeked);                                              \
      if (u) {                                                              \
        (stream)->release(stream);                                          \
        return fail(EINVAL, UNIONS_REFUSED);                                \
      }                                                                     \
    }                                                                       \
  } while (0)

int arrowcert_consume_stream(struct ArrowArrayStream* stream, uint8_t** out_ipc,
                             int64_t* out_len) {
  begin();
  if (!ready()) {
    if (stream && stream->release) stream->release(stream);
    return fail(EINVAL, setup_error);
  }
  __typeof__(&arrowcert_consume_stream) f = BASE(arrowcert_consume_stream);
  if (!f) {
    if (stream && stream->release) stream->release(stream);
    return fail(ENOSYS, "mutant consumer: the base has no arrowcert_consume_stream");
  }
  if (M == REFUSE_UNIONS && stream && stream->release && out_ipc && out_len)
    PEEK_UNIONS(stream);
  if (!wraps_streams() || !stream || !stream->release || !out_ipc || !out_len)
    return f(stream, out_ipc, out_len);
  chunk_refused = 0;
  struct wstream* w = calloc(1, sizeof *w);
  if (!w) {
    stream->release(stream);
    return fail(ENOMEM, "mutant consumer: out of memory");
  }
  kept_error = NULL;
  w->inner = *stream;
  stream->release = NULL; /* moved */
  struct ArrowArrayStream s = {
      .get_schema = w->inner.get_schema ? ws_get_schema : NULL,
      .get_next = w->inner.get_next ? ws_get_next : NULL,
      .get_last_error = w->inner.get_last_error ? ws_get_last_error : NULL,
      .release = ws_release,
      .private_data = w,
  };
  return stream_result(f(&s, out_ipc, out_len));
}

int arrowcert_consume_device_stream(struct ArrowDeviceArrayStream* stream, uint8_t** out_ipc,
                                    int64_t* out_len) {
  begin();
  if (!ready()) {
    if (stream && stream->release) stream->release(stream);
    return fail(EINVAL, setup_error);
  }
  __typeof__(&arrowcert_consume_device_stream) f = BASE(arrowcert_consume_device_stream);
  if (!f) {
    if (stream && stream->release) stream->release(stream);
    return fail(ENOSYS, "mutant consumer: the base has no arrowcert_consume_device_stream");
  }
  if (M == REFUSE_UNIONS && stream && stream->release && out_ipc && out_len)
    PEEK_UNIONS(stream);
  if (!wraps_streams() || !stream || !stream->release || !out_ipc || !out_len)
    return f(stream, out_ipc, out_len);
  chunk_refused = 0;
  struct wstream* w = calloc(1, sizeof *w);
  if (!w) {
    stream->release(stream);
    return fail(ENOMEM, "mutant consumer: out of memory");
  }
  kept_error = NULL;
  w->device = 1;
  w->dinner = *stream;
  stream->release = NULL; /* moved */
  struct ArrowDeviceArrayStream s = {
      .device_type = w->dinner.device_type,
      .get_schema = w->dinner.get_schema ? wd_get_schema : NULL,
      .get_next = w->dinner.get_next ? wd_get_next : NULL,
      .get_last_error = w->dinner.get_last_error ? wd_get_last_error : NULL,
      .release = wd_release,
      .private_data = w,
  };
  return stream_result(f(&s, out_ipc, out_len));
}

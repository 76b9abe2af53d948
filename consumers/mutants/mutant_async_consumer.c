/*
 * Mutant async consumers: a correct async consumer (the reference plugin,
 * loaded from ARROWCERT_MUTANT_BASE) behind a proxy that breaks exactly one
 * consumer.async.* rule in how it treats the async producer (the harness).
 * The mutation is chosen by ARROWCERT_MUTANT, read (and the base loaded) on
 * the first call into the library; each one is modelled on a way a real
 * consumer can get the Async Device Stream Interface wrong. With
 * ARROWCERT_MUTANT=none every callback is passed through untouched, so the
 * proxy itself is shown to break nothing.
 *
 *   cc -shared -fPIC -pthread -Wall -Wextra -Werror -I harness/include \
 *      -o libarrowcert_mutant_async_consumer.so \
 *      consumers/mutants/mutant_async_consumer.c -ldl
 *
 * Exports: arrowcert_plugin_abi_version (1), arrowcert_plugin_name
 * ("mutant-async-consumer:<mutation>"), arrowcert_plugin_supports_device and
 * arrowcert_free (the base's), arrowcert_last_error, and
 * arrowcert_consume_async_start / arrowcert_consume_async_finish /
 * arrowcert_consume_async_cancel (forwarded to the base). It has no
 * other consume entry point (mutant_consumer.c covers those).
 *
 * An unknown mutation, or a base that cannot be loaded (or lacks the async
 * entry points), is bad input, not a crash: start and finish then fail with
 * EINVAL (ENOSYS for a base without async), arrowcert_last_error() says why
 * (the reason is also written once to stderr), and a handler start was
 * given is still initialised, with callbacks that refuse everything (the
 * schema is released, a task extracted with NULL).
 *
 * The list of mutations, with the rule each one breaks and the bug it
 * models, is MUTANTS below.
 *
 * How the proxy works. start() allocates a `struct proxy` holding an
 * *inner* handler, initialised by the base's start, and a *proxy producer*.
 * The harness's (*outer*) handler gets this file's callbacks, which forward
 * to the inner handler:
 *  - on_schema: reads outer->producer (the harness's real producer), copies
 *    its device_type and additional_metadata into the proxy producer, sets
 *    inner.producer to the proxy producer, forwards the schema;
 *  - the proxy producer's request/cancel forward to the real producer (the
 *    base only calls them from inside a callback, so the real producer is
 *    live);
 *  - on_next_task: the task is forwarded as it is, or (extract-twice)
 *    wrapped in a proxy task whose extract_data calls the real one; while
 *    the forwarding on_next_task runs, the real task is called through the
 *    harness's own pointer, afterwards through a copy of its members (as
 *    the spec allows: "it must copy or move its contents to a new
 *    ArrowAsyncTask object");
 *  - (task-outlives-callback, schema-pointer-kept) what the mutation keeps
 *    (the producer's task or schema pointer) is handed to the base at the
 *    next callback, before that callback is forwarded; from on_error and
 *    release the base's request/cancel are then dropped, so that no other
 *    rule is broken;
 *  - on_error: forwards code, message and metadata;
 *  - release: marks the outer handler released (before the inner
 *    release: once that ran, finish may return and the harness free the
 *    outer handler), calls the inner release, drops the handler's
 *    reference to the proxy.
 * finish() calls the base's finish with the base's token and drops the
 * token's reference; the proxy is freed when both references are gone (a
 * release that never comes leaks it, as a finish that timed out must).
 * Memory this wrapper allocates is freed by whatever ends its use, so the
 * only thing wrong is the mutation's rule.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
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
  /* consumer.async.request: the credit to ask for computed as capacity - */           \
  /* outstanding, which is 0 at the start, and request(0) called anyway, */           \
  /* before the real first request */                                                  \
  X(REQUEST_ZERO, "request-zero")                                                      \
  /* consumer.async.request: back-pressure that asks once and then waits */            \
  /* for a wake-up that never comes: every request after the first is */               \
  /* swallowed, and the stream stalls */                                               \
  X(STOPS_REQUESTING, "stops-requesting")                                              \
  /* consumer.async.extract-once: a retry / "drain the task" helper that */            \
  /* calls extract_data a second time after the real extraction */                     \
  X(EXTRACT_TWICE, "extract-twice")                                                    \
  /* consumer.async.on-error: on_error "cleans up" by cancelling the */                \
  /* producer before recording the error */                                            \
  X(CANCEL_FROM_ON_ERROR, "cancel-from-on-error")                                      \
  /* consumer.async.copies: on_error keeps the message pointer instead of a */         \
  /* copy, and finish reports what that pointer reads by then */                       \
  X(KEEPS_MESSAGE_POINTER, "keeps-message-pointer")                                    \
  /* consumer.async.release: the on_schema schema moved into handler */                \
  /* storage and a clone used instead; the handler's release forgets the */            \
  /* moved original (leaked) */                                                        \
  X(RELEASE_KEEPS_SCHEMA, "release-keeps-schema")                                     \
  /* consumer.async.task-scope: a deferred-work queue that stores the */               \
  /* producer's ArrowAsyncTask pointer (not a copy of the structure) and */            \
  /* hands it on at the next callback, after on_next_task returned */                  \
  X(TASK_OUTLIVES_CALLBACK, "task-outlives-callback")                                  \
  /* consumer.async.schema-moved: on_schema stores the ArrowSchema pointer */          \
  /* (asking for the first task itself) and imports the schema only at the */          \
  /* next callback */                                                                  \
  X(SCHEMA_POINTER_KEPT, "schema-pointer-kept")                                        \
  /* consumer.async.release-no-producer: the handler's release "cleans up" */          \
  /* by cancelling the producer */                                                     \
  X(CANCEL_IN_RELEASE, "cancel-in-release")                                            \
  /* consumer.async.producer-lifetime: the reading side asks for the next */           \
  /* batch after taking one without checking that the stream ended, so */             \
  /* its request reaches the producer after the handler's release (Arrow */           \
  /* C++ 26's AsyncRecordBatchIterator); here finish, once the release */              \
  /* ran, calls request(1) */                                                           \
  X(REQUEST_AFTER_RELEASE, "request-after-release")                                    \
  /* consumer.async.errno: a handler that gives up on the first task with -1 */        \
  /* (a C++ "return -1 on failure" convention) instead of an errno value */            \
  X(REFUSES_WITH_MINUS_ONE, "refuses-with-minus-one")                                  \
  /* consumer.async.release-frees: the handler's release releases what the */          \
  /* harness handed over but forgets to drop the handler's own state (its */           \
  /* reference to the proxy), which leaks once per stream */                           \
  X(RELEASE_KEEPS_STATE, "release-keeps-state")                                        \
  /* consumer.async.after-cancel: once it has cancelled, the handler treats */         \
  /* any further task as a protocol error: refuses it (ECANCELED) without */            \
  /* extracting it ("nothing can come after cancel") */                                 \
  X(UNPREPARED_AFTER_CANCEL, "unprepared-after-cancel")                                \
  /* consumer.async.release-frees: every stream keeps 8 bytes it never frees */       \
  X(SMALL_LEAK, "small-leak")                                                          \
  /* array.release.cache (INFO): every stream keeps an entry of a cache */            \
  /* emptied every ARROWCERT_MUTANT_CACHE_PERIOD streams (no leak) */                 \
  X(PERIODIC_CACHE, "periodic-cache")

#define AS_ENUM(e, s) e,
#define AS_NAME(e, s) s,
enum mutant { MUTANTS(AS_ENUM) N_MUTANTS };
static const char* const NAMES[] = {MUTANTS(AS_NAME)};
static enum mutant M = NONE;
static void* base;

typedef int (*start_fn)(struct ArrowAsyncDeviceStreamHandler*, void**);
typedef int (*finish_fn)(void*, int64_t, uint8_t**, int64_t*);
typedef int (*cancel_fn)(void*);
static start_fn base_start;
static finish_fn base_finish;
static cancel_fn base_cancel; /* optional */

/* ---- lazy set-up: the mutation and the base, on the first call ---- */

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char setup_error[512]; /* empty when set up */
static int setup_code = EINVAL;
static char plugin_name[160];

static void setup(void) {
  int i = arrowcert_mutant_setup("mutant async consumer", NAMES, N_MUTANTS, &base, setup_error,
                                 sizeof setup_error);
  if (i < 0) {
    snprintf(plugin_name, sizeof plugin_name, "mutant-async-consumer:%.80s (unknown)",
             arrowcert_mutant_wanted());
  } else {
    M = (enum mutant)i;
    snprintf(plugin_name, sizeof plugin_name, "mutant-async-consumer:%s", NAMES[M]);
    if (!setup_error[0]) {
      base_start = (start_fn)dlsym(base, "arrowcert_consume_async_start");
      base_finish = (finish_fn)dlsym(base, "arrowcert_consume_async_finish");
      base_cancel = (cancel_fn)dlsym(base, "arrowcert_consume_async_cancel");
      if (!base_start || !base_finish) {
        setup_code = ENOSYS;
        snprintf(setup_error, sizeof setup_error,
                 "mutant async consumer: the base %.200s has no arrowcert_consume_async_start "
                 "/ arrowcert_consume_async_finish",
                 getenv("ARROWCERT_MUTANT_BASE"));
      }
    }
  }
  if (setup_error[0]) fprintf(stderr, "%s\n", setup_error);
}

/* 1 when the base is loaded and the mutation known. */
static int ready(void) {
  pthread_once(&once, setup);
  return setup_error[0] == 0;
}


/* ---- this wrapper's own last error ---- */

static __thread const char* my_error; /* a failure of the wrapper itself */
static __thread char* kept_copy;      /* keeps-message-pointer: what finish read */
static __thread int use_kept;         /* keeps-message-pointer: report kept_copy */

/* Called at the start of every entry point that can fail. */
static void begin(void) {
  my_error = NULL;
  use_kept = 0;
  free(kept_copy);
  kept_copy = NULL;
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
  if (use_kept) return kept_copy;
  if (!ready()) return setup_error;
  __typeof__(&arrowcert_last_error) f = BASE(arrowcert_last_error);
  return f ? f() : NULL;
}

void arrowcert_free(void* ptr) {
  if (!ready()) return; /* nothing was handed out */
  __typeof__(&arrowcert_free) f = BASE(arrowcert_free);
  if (f) f(ptr);
}

/* ---- clones of a schema tree in this wrapper's memory (release-keeps-schema) ---- */

/* Everything one clone allocated. The strings are the original's. */
struct tree {
  void** owned;
  size_t n_owned, cap;
};

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

/* The clone's nodes below the root are freed with the root; their release
   only marks them released. */
static void clone_schema_node_release(struct ArrowSchema* s) { s->release = NULL; }

/* The root's release frees the clone, never the original. */
static void clone_schema_root_release(struct ArrowSchema* s) {
  for (int64_t i = 0; i < s->n_children && s->children; i++)
    if (s->children[i] && s->children[i]->release) s->children[i]->release(s->children[i]);
  if (s->dictionary && s->dictionary->release) s->dictionary->release(s->dictionary);
  tree_free(s->private_data);
  s->release = NULL;
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

/* Deep-clones the live schema `src` into `out`, leaving `src` as it is. 0,
   or ENOMEM with nothing changed. */
static int clone_schema(const struct ArrowSchema* src, struct ArrowSchema* out) {
  struct tree* t = calloc(1, sizeof *t);
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
  *out = root;
  return 0;
}

/* ---- the proxy ---- */

typedef struct ArrowAsyncDeviceStreamHandler Handler;

struct proxy {
  Handler inner;                        /* the base's handler */
  struct ArrowAsyncProducer pproducer;  /* what inner.producer points to */
  struct ArrowAsyncProducer* real;      /* the harness's producer (atomic) */
  void* base_token;
  int refs;                             /* the outer handler's and the token's (atomic) */
  int64_t requests;                     /* request calls by the base (atomic) */
  const char* kept_message;             /* keeps-message-pointer (atomic) */
  struct ArrowSchema moved_schema;      /* release-keeps-schema: never released */
  struct ArrowAsyncTask* kept_task;     /* task-outlives-callback: the producer's pointer */
  char* kept_task_metadata;             /* task-outlives-callback: a copy of its metadata */
  struct ArrowSchema* kept_schema;      /* schema-pointer-kept: the producer's pointer */
  int quiet;                            /* the base's request/cancel are dropped (atomic) */
  int cancelled;                        /* the base called cancel (atomic) */
  int released;                         /* px_release ran (atomic) */
};

static void proxy_unref(struct proxy* p) {
  if (__atomic_sub_fetch(&p->refs, 1, __ATOMIC_ACQ_REL) == 0) free(p);
}

static struct ArrowAsyncProducer* real_producer(struct proxy* p) {
  return __atomic_load_n(&p->real, __ATOMIC_ACQUIRE);
}

/* The proxy producer's callbacks, called by the base on inner.producer. */

static void pp_request(struct ArrowAsyncProducer* self, int64_t n) {
  struct proxy* p = self->private_data;
  struct ArrowAsyncProducer* real = real_producer(p);
  if (!real || !real->request) return;
  if (__atomic_load_n(&p->quiet, __ATOMIC_ACQUIRE)) return; /* see deliver_kept */
  int64_t k = __atomic_fetch_add(&p->requests, 1, __ATOMIC_ACQ_REL);
  if (M == REQUEST_ZERO && k == 0) real->request(real, 0);
  if (M == STOPS_REQUESTING && k > 0) return; /* swallowed */
  real->request(real, n);
}

static void pp_cancel(struct ArrowAsyncProducer* self) {
  struct proxy* p = self->private_data;
  struct ArrowAsyncProducer* real = real_producer(p);
  if (__atomic_load_n(&p->quiet, __ATOMIC_ACQUIRE)) return; /* see deliver_kept */
  __atomic_store_n(&p->cancelled, 1, __ATOMIC_RELEASE);
  if (real && real->cancel) real->cancel(real);
}

/* Reads outer->producer and points inner.producer at the proxy producer.
   Called from on_schema (before which "The consumer *CANNOT* assume that
   this is valid"); the producer calls no other callback concurrently. */
static void adopt_producer(struct proxy* p, Handler* outer) {
  struct ArrowAsyncProducer* real = outer->producer;
  if (!real) return; /* the base sees NULL too, and refuses */
  p->pproducer.device_type = real->device_type;
  p->pproducer.additional_metadata = real->additional_metadata;
  p->pproducer.request = pp_request;
  p->pproducer.cancel = pp_cancel;
  p->pproducer.private_data = p;
  __atomic_store_n(&p->real, real, __ATOMIC_RELEASE);
  p->inner.producer = &p->pproducer;
}

/* ---- proxy tasks (extract-twice) ---- */

enum { TASK_IN_CALL, TASK_EXTRACTED, TASK_DETACHED };

struct ptask {
  struct ArrowAsyncTask* orig; /* the harness's task, valid during on_next_task */
  struct ArrowAsyncTask copy;  /* its members, for use after on_next_task */
  int state;                   /* TASK_* (atomic) */
};

/* Ends one side's use of `t`; the second side frees it. */
static void ptask_done(struct ptask* t, int mine) {
  int expected = TASK_IN_CALL;
  if (!__atomic_compare_exchange_n(&t->state, &expected, mine, 0, __ATOMIC_ACQ_REL,
                                   __ATOMIC_ACQUIRE))
    free(t);
}

static int pt_extract(struct ArrowAsyncTask* self, struct ArrowDeviceArray* out) {
  struct ptask* t = self->private_data;
  struct ArrowAsyncTask* real =
      __atomic_load_n(&t->state, __ATOMIC_ACQUIRE) == TASK_IN_CALL ? t->orig : &t->copy;
  int rc = real->extract_data(real, out);
  /* The bug: a second extraction, into scratch (the harness refuses it with
     EINVAL and leaves it alone; should it succeed, the array is released). */
  struct ArrowDeviceArray scratch;
  memset(&scratch, 0, sizeof scratch);
  if (real->extract_data(real, &scratch) == 0 && scratch.array.release)
    scratch.array.release(&scratch.array);
  ptask_done(t, TASK_EXTRACTED);
  return rc;
}

/* ---- deferred callbacks (task-outlives-callback, schema-pointer-kept) ---- */

/* The length of `metadata` in the ArrowSchema.metadata encoding (int32
   count, then per pair an int32 length and the key, an int32 length and
   the value), or -1 when it does not parse. */
static int64_t metadata_length(const char* metadata) {
  int32_t n, len;
  int64_t at = 4;
  memcpy(&n, metadata, 4);
  if (n < 0) return -1;
  for (int64_t i = 0; i < 2 * (int64_t)n; i++) {
    memcpy(&len, metadata + at, 4);
    if (len < 0) return -1;
    at += 4 + (int64_t)len;
  }
  return at;
}

/* A copy of task metadata for a later call: "If not NULL, the lifetime is
   only the scope of the call to this function" (NULL when there is none,
   or it cannot be copied). */
static char* copy_metadata(const char* metadata) {
  if (!metadata) return NULL;
  int64_t len = metadata_length(metadata);
  if (len < 0) return NULL;
  char* copy = malloc((size_t)len);
  if (copy) memcpy(copy, metadata, (size_t)len);
  return copy;
}

/* task-outlives-callback: hands the kept task, if any, to the base, and
   returns what the base's on_next_task returned (0 when none was kept).
   The bug shows here: the base extracts through the producer's task
   structure after the producer's on_next_task call returned. */
static int deliver_kept_task(struct proxy* p) {
  struct ArrowAsyncTask* task = __atomic_exchange_n(&p->kept_task, NULL, __ATOMIC_ACQ_REL);
  char* metadata = p->kept_task_metadata;
  p->kept_task_metadata = NULL;
  int rc = task ? p->inner.on_next_task(&p->inner, task, metadata) : 0;
  free(metadata);
  return rc;
}

/* schema-pointer-kept: hands the kept schema pointer, if any, to the base,
   and returns what the base's on_schema returned (0 when none was kept).
   The bug shows here: the pointer is read after on_schema returned. */
static int deliver_kept_schema(struct proxy* p) {
  struct ArrowSchema* schema = __atomic_exchange_n(&p->kept_schema, NULL, __ATOMIC_ACQ_REL);
  return schema ? p->inner.on_schema(&p->inner, schema) : 0;
}

/* Delivers whatever was kept from within on_error or the handler's release,
   which must call no producer method ("This callback *MUST NOT* call any
   methods of an ``ArrowAsyncProducer`` object"; release likewise): the
   base, which expects to be inside on_schema / on_next_task there, may ask
   for more, so its request/cancel are dropped meanwhile. Only the
   mutation's own rule is broken. */
static void deliver_kept(struct proxy* p) {
  if (M != TASK_OUTLIVES_CALLBACK && M != SCHEMA_POINTER_KEPT) return;
  __atomic_store_n(&p->quiet, 1, __ATOMIC_RELEASE);
  deliver_kept_schema(p);
  deliver_kept_task(p);
  __atomic_store_n(&p->quiet, 0, __ATOMIC_RELEASE);
}

/* ---- the outer handler's callbacks ---- */

/* A handler with no proxy (released, or start failed): refuse everything,
   still taking what the producer hands over. */
static int refuse_schema(struct ArrowSchema* schema) {
  if (schema && schema->release) schema->release(schema);
  return EINVAL;
}
static int refuse_task(struct ArrowAsyncTask* task) {
  if (task && task->extract_data) task->extract_data(task, NULL);
  return EINVAL;
}

static int px_on_schema(Handler* outer, struct ArrowSchema* schema) {
  struct proxy* p = outer ? outer->private_data : NULL;
  if (!p) return refuse_schema(schema);
  adopt_producer(p, outer);
  if (M == RELEASE_KEEPS_SCHEMA && schema && schema->release) {
    struct ArrowSchema clone;
    if (clone_schema(schema, &clone) == 0) {
      p->moved_schema = *schema; /* the move ... */
      schema->release = NULL;
      return p->inner.on_schema(&p->inner, &clone); /* ... and the base gets a clone */
    }
  }
  if (M == SCHEMA_POINTER_KEPT && schema) {
    /* The bug: the pointer stored, the schema neither moved nor released
       ("The ArrowSchema* passed as a parameter to the callback MUST NOT be
       stored and kept"); the base gets it at the next callback. Asking for
       one task here keeps the stream moving until then. */
    __atomic_store_n(&p->kept_schema, schema, __ATOMIC_RELEASE);
    struct ArrowAsyncProducer* real = outer->producer;
    if (real && real->request) real->request(real, 1);
    return 0;
  }
  return p->inner.on_schema(&p->inner, schema);
}

static int px_on_next_task(Handler* outer, struct ArrowAsyncTask* task, const char* metadata) {
  struct proxy* p = outer ? outer->private_data : NULL;
  if (!p) return refuse_task(task);
  if (M == SCHEMA_POINTER_KEPT) {
    int rc = deliver_kept_schema(p);
    /* A base that refused the schema still cleans the task up (extract
       with NULL) and refuses it. */
    int task_rc = p->inner.on_next_task(&p->inner, task, metadata);
    return rc ? rc : task_rc;
  }
  if (M == TASK_OUTLIVES_CALLBACK) {
    int rc = deliver_kept_task(p);
    if (rc != 0) {
      /* The base refused the kept task: this one goes to it now, to be
         cleaned up (extract with NULL), and the refusal stands. */
      int task_rc = p->inner.on_next_task(&p->inner, task, metadata);
      return task_rc ? task_rc : rc;
    }
    if (!task) return p->inner.on_next_task(&p->inner, NULL, metadata);
    /* The bug: the producer's pointer kept, not a copy of its members
       ("If the consumer wants to use the task beyond the scope of this
       method, it must copy or move its contents to a new ArrowAsyncTask
       object"). The metadata is copied (consumer.async.copies holds). */
    p->kept_task_metadata = copy_metadata(metadata);
    __atomic_store_n(&p->kept_task, task, __ATOMIC_RELEASE);
    return 0;
  }
  if (M == UNPREPARED_AFTER_CANCEL && task && __atomic_load_n(&p->cancelled, __ATOMIC_ACQUIRE))
    return ECANCELED; /* the bug: neither extracted nor passed on */
  if (M == REFUSES_WITH_MINUS_ONE && task) {
    /* The base takes the task (extracts it), the refusal is the proxy's. */
    int rc = p->inner.on_next_task(&p->inner, task, metadata);
    return rc != 0 ? rc : -1;
  }
  if (M == EXTRACT_TWICE && task && task->extract_data) {
    struct ptask* t = malloc(sizeof *t);
    if (t) {
      t->orig = task;
      t->copy = *task;
      t->state = TASK_IN_CALL;
      struct ArrowAsyncTask wrapped = {pt_extract, t};
      int rc = p->inner.on_next_task(&p->inner, &wrapped, metadata);
      ptask_done(t, TASK_DETACHED);
      return rc;
    }
  }
  return p->inner.on_next_task(&p->inner, task, metadata);
}

static void px_on_error(Handler* outer, int code, const char* message, const char* metadata) {
  struct proxy* p = outer ? outer->private_data : NULL;
  if (!p) return;
  deliver_kept(p);
  if (M == CANCEL_FROM_ON_ERROR) {
    /* The bug: "This callback *MUST NOT* call any methods of an
       ``ArrowAsyncProducer`` object". */
    struct ArrowAsyncProducer* producer = outer->producer ? outer->producer : real_producer(p);
    if (producer && producer->cancel) producer->cancel(producer);
  }
  if (M == KEEPS_MESSAGE_POINTER) /* the bug: the pointer, not a copy */
    __atomic_store_n(&p->kept_message, message, __ATOMIC_RELEASE);
  p->inner.on_error(&p->inner, code, message, metadata);
}

static void px_release(Handler* outer) {
  if (!outer) return;
  struct proxy* p = outer->private_data;
  if (p && M == CANCEL_IN_RELEASE && outer->producer && outer->producer->cancel) {
    /* The bug: "This must not call any methods of an ArrowAsyncProducer
       object". */
    outer->producer->cancel(outer->producer);
  }
  if (p) deliver_kept(p);
  /* Marked released before the inner release: once that ran, finish may return
     and the harness free `outer`. */
  outer->release = NULL;
  outer->private_data = NULL;
  if (!p) return;
  /* release-keeps-schema: p->moved_schema (the harness's schema) is never
     released; everything else is. */
  if (p->inner.release) p->inner.release(&p->inner);
  __atomic_store_n(&p->released, 1, __ATOMIC_RELEASE);
  if (M == RELEASE_KEEPS_STATE) return; /* the bug: the handler's state stays */
  proxy_unref(p);
}

/* Writes the outer handler; `p` NULL gives a handler that refuses all. */
static void install(Handler* outer, struct proxy* p) {
  outer->on_schema = px_on_schema;
  outer->on_next_task = px_on_next_task;
  outer->on_error = px_on_error;
  outer->release = px_release;
  outer->producer = NULL;
  outer->private_data = p;
}

/* ---- entry points ---- */

int arrowcert_consume_async_start(struct ArrowAsyncDeviceStreamHandler* handler, void** token) {
  begin();
  /* Memory kept per stream (arrowcert_mutant.h). */
  if (M == SMALL_LEAK) arrowcert_mutant_small_leak();
  if (M == PERIODIC_CACHE) arrowcert_mutant_periodic_cache();
  if (token) *token = NULL;
  if (!ready()) {
    if (handler) install(handler, NULL);
    return fail(setup_code, setup_error);
  }
  if (!handler || !token) {
    if (handler) install(handler, NULL);
    return fail(EINVAL, "mutant async consumer: handler or token is NULL");
  }
  struct proxy* p = calloc(1, sizeof *p);
  if (!p) {
    install(handler, NULL);
    return fail(ENOMEM, "mutant async consumer: out of memory");
  }
  int rc = base_start(&p->inner, &p->base_token);
  if (rc != 0) {
    /* The base's last error stands. */
    free(p);
    install(handler, NULL);
    return rc;
  }
  p->refs = 2; /* the outer handler's (until release) and the token's (until finish) */
  install(handler, p);
  *token = p;
  return 0;
}

int arrowcert_consume_async_cancel(void* token) {
  begin();
  if (!ready()) return fail(setup_code, setup_error);
  if (!token) return fail(EINVAL, "mutant async consumer: token is NULL");
  if (!base_cancel) return fail(ENOSYS, "mutant async consumer: the base cannot cancel");
  struct proxy* p = token;
  return base_cancel(p->base_token);
}

int arrowcert_consume_async_finish(void* token, int64_t timeout_ms, uint8_t** out_ipc,
                                   int64_t* out_len) {
  begin();
  if (!ready()) return fail(setup_code, setup_error);
  if (!token) return fail(EINVAL, "mutant async consumer: token is NULL");
  struct proxy* p = token;
  int rc = base_finish(p->base_token, timeout_ms, out_ipc, out_len);
  if (M == REQUEST_AFTER_RELEASE) {
    /* Waits (within the timeout) for the handler's release, then the bug:
       one more request to a producer whose lifetime ended "just before
       calling release on the stream handler object". */
    for (int64_t waited = 0; !__atomic_load_n(&p->released, __ATOMIC_ACQUIRE) &&
                             waited < (timeout_ms > 0 ? timeout_ms : 5000);
         waited++) {
      struct timespec ms = {0, 1000000};
      nanosleep(&ms, NULL);
    }
    struct ArrowAsyncProducer* real = real_producer(p);
    if (__atomic_load_n(&p->released, __ATOMIC_ACQUIRE) && real && real->request)
      real->request(real, 1);
  }
  if (rc != 0 && M == KEEPS_MESSAGE_POINTER) {
    /* The bug shows: the kept pointer read now, after on_error returned. */
    const char* kept = __atomic_load_n(&p->kept_message, __ATOMIC_ACQUIRE);
    if (kept) {
      kept_copy = strdup(kept);
      use_kept = kept_copy != NULL;
    }
  }
  proxy_unref(p);
  return rc;
}

/*
 * Mutant async producer: a self-contained async device stream producer
 * (CDeviceDataInterface.rst, "Async Device Stream Interface") with exactly
 * one rule of that interface broken. Its data comes from a correct plugin,
 * the base (the reference producer, loaded from ARROWCERT_MUTANT_BASE with
 * dlopen): arrowcert_produce_async asks the base for a device stream
 * (arrowcert_produce_device_stream) synchronously, then one detached thread,
 * the driver, turns that stream into handler callbacks. The mutation is
 * chosen at the first call by ARROWCERT_MUTANT (unset: "none"); each one is
 * modelled on a way an async producer can get the protocol wrong. With
 * ARROWCERT_MUTANT=none it is a correct async producer, so the wrapper
 * itself is shown to break nothing. An unknown mutation, or a base that
 * cannot be loaded, makes every entry point fail with EINVAL, and
 * arrowcert_last_error says why.
 *
 *   cc -shared -fPIC -pthread -I harness/include \
 *      -o libarrowcert_mutant_async_producer.so \
 *      producers/mutants/mutant_async_producer.c -ldl
 *
 * (it also builds with -Wall -Wextra -Werror). Run it as a producer with
 * ARROWCERT_MUTANT=<mutation> and ARROWCERT_MUTANT_BASE=<path of
 * libarrowcert_producer_reference.so>.
 *
 * Exports: arrowcert_plugin_abi_version, arrowcert_plugin_name
 * ("mutant-async-producer:<mutation>"), arrowcert_last_error,
 * arrowcert_free and arrowcert_plugin_supports_device (both forwarded to the
 * base), and arrowcert_produce_async.
 *
 * The correct behaviour (what every mutation keeps except its one rule):
 *   - handler->producer is set before on_schema; the ArrowAsyncProducer is
 *     the mutant's (malloc'ed), its device_type is the stream's, its
 *     additional_metadata is {"arrowcert.mutant": <mutation>}, and it is
 *     freed after handler->release.
 *   - on_schema once; a schema the consumer did not move is released by the
 *     driver. A refused schema: only release follows.
 *   - one on_next_task per batch, each waiting for a credit from request(n)
 *     (n > 0 adds n, saturating), with per-task metadata
 *     {"arrowcert.task": <index>} valid during the call; end of stream is
 *     on_next_task(NULL) (it needs no credit), then release. A refused task:
 *     only release follows (the task is the consumer's: it may still call
 *     extract_data later).
 *   - extract_data(task, out) moves the array into *out, or releases it when
 *     out is NULL, frees the task's state and clears task->private_data; a
 *     second call fails with EINVAL. A task does not depend on the stream:
 *     it may be extracted after release.
 *   - request(n <= 0) is recorded; the driver then calls on_error(EINVAL)
 *     and release. cancel() is idempotent and thread-safe and only sets a
 *     flag; the driver then stops delivering and calls release (never
 *     on_error); request after cancel is a NOP. request and cancel never
 *     call a handler callback: they record and wake the driver.
 *   - a base get_schema/get_next failure: on_error(code, base's message)
 *     then release. The next batch is fetched from the base ahead of its
 *     credit; the base stream (and a batch fetched but not delivered) is
 *     released before handler->release.
 *   - every handler callback comes from the driver thread, one at a time,
 *     under a callback lock.
 *
 * Mutations that call callbacks from inside request or cancel still never
 * make callbacks overlap across threads: they take the callback lock, or,
 * on a thread already inside one of this stream's callbacks (a thread-local
 * marks it), call nested on that thread. If the lock cannot be had within a
 * second (a consumer that waits, inside a callback, for the thread calling
 * request/cancel), that call behaves correctly instead of deadlocking.
 *
 * Memory that models "freed by the producer" (frees-producer-early) is
 * cleared at that point and handed back to malloc only at the end, so that
 * reading it afterwards shows the bug deterministically (zeros) without
 * reading memory malloc may have reused.
 *
 * The list of mutations, with the rule each one breaks and the bug it
 * models, is MUTANTS below (harness/tests/async_mutants.rs tests each one
 * and generates docs/ASYNC_MUTANTS.md).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "arrowcert_plugin.h"
#include "arrowcert_mutant.h"

/* rule it breaks: the bug it models */
#define MUTANTS(X)                                                                     \
  X(NONE, "none")                                                                      \
  /* async.request.reentrant: request(n) delivers the next task synchronously */      \
  /* from inside request (once per stream) */                                         \
  X(REENTRANT_REQUEST, "reentrant-request")                                            \
  /* async.backpressure: after the first request, every batch is delivered */         \
  /* without waiting for credits */                                                   \
  X(IGNORES_BACKPRESSURE, "ignores-backpressure")                                      \
  /* async.schema.first: on_schema never called; the first task comes right */        \
  /* after handler->producer is set, then tasks per credits */                        \
  X(SKIPS_ON_SCHEMA, "skips-on-schema")                                                \
  /* async.callbacks.serial: tasks delivered in pairs from two threads, the */        \
  /* second on_next_task while the first has not returned */                         \
  X(CONCURRENT_CALLBACKS, "concurrent-callbacks")                                      \
  /* async.eos.null-task: release after the last batch, no on_next_task(NULL) */      \
  X(RELEASE_BEFORE_EOS, "release-before-eos")                                          \
  /* async.release.last: handler->release called twice at the end */                  \
  X(DOUBLE_RELEASE, "double-release")                                                  \
  /* async.cancel.no-error: a cancel is reported as on_error(ECANCELED) */            \
  X(ERROR_AFTER_CANCEL, "error-after-cancel")                                          \
  /* async.request.invalid: request(n <= 0) silently ignored */                       \
  X(ACCEPTS_REQUEST_ZERO, "accepts-request-zero")                                      \
  /* async.producer.ready: the ArrowAsyncProducer given back (cleared) after */       \
  /* the last data task, before on_next_task(NULL) and release */                     \
  X(FREES_PRODUCER_EARLY, "frees-producer-early")                                      \
  /* async.task.extract-null: extract_data(task, NULL) frees the task's state */      \
  /* but never releases the array */                                                  \
  X(EXTRACT_NULL_LEAKS, "extract-null-leaks")                                          \
  /* async.cancel.idempotent: a second (or concurrent) cancel makes the driver */     \
  /* report on_error(EALREADY) before release */                                      \
  X(CANCEL_NOT_IDEMPOTENT, "cancel-not-idempotent")                                    \
  /* async.cancel.reentrant: cancel() calls handler->release synchronously */         \
  X(CANCEL_RELEASES, "cancel-releases")                                                \
  /* async.cancel.request-nop: request(n) after cancel adds credits, and the */       \
  /* driver delivers tasks for them before release */                                 \
  X(REQUEST_AFTER_CANCEL_DELIVERS, "request-after-cancel-delivers")                    \
  /* async.schema-refused: a refused on_schema ignored: the first task is */          \
  /* delivered anyway, then on_next_task(NULL), then release */                       \
  X(CONTINUES_AFTER_REFUSED_SCHEMA, "continues-after-refused-schema")                  \
  /* async.task-refused: a refused task reported as on_error(EIO) before release */   \
  X(ERROR_AFTER_REFUSED_TASK, "error-after-refused-task")                              \
  /* async.metadata.encoding: additional_metadata with one pair whose key */          \
  /* length is -5 */                                                                  \
  X(BAD_ADDITIONAL_METADATA, "bad-additional-metadata")                                \
  /* async.array.valid: extracted arrays carry null_count length + 1 */                \
  /* (array.null-count, a MUST rule) */                                               \
  X(INVALID_ARRAY, "invalid-array")                                                    \
  /* async.producer.device-type: ArrowAsyncProducer.device_type says CUDA_HOST */      \
  /* while the arrays are on the CPU asked for */                                      \
  X(PRODUCER_DEVICE_TYPE, "producer-device-type")                                      \
  /* async.callbacks.serialized: the first task's extraction fails the stream */      \
  /* and a helper thread reports on_error while on_next_task is still running */      \
  X(ERROR_OVERLAPS_TASK, "error-overlaps-task")                                        \
  /* async.cancel.error-after (INFO): a cancel with tasks still requested is */        \
  /* answered with on_error(EIO) instead of finishing them */                          \
  X(EIO_AFTER_CANCEL, "eio-after-cancel")                                              \
  /* async.producer.ready: handler->producer still NULL when on_schema is called */    \
  X(NULL_PRODUCER, "null-producer")                                                    \
  /* async.error.release-next: after on_error (a failure or a bad request), */         \
  /* on_next_task(NULL) before release */                                              \
  X(EOS_AFTER_ERROR, "eos-after-error")                                                \
  /* async.extract.error-follows: the first task's extract_data fails (EIO, */          \
  /* its array cleaned up) and the driver goes on delivering as if it had not */       \
  X(CONTINUES_AFTER_FAILED_EXTRACT, "continues-after-failed-extract")                  \
  /* schema.name.utf8 (SHOULD): the first field's name passed through in */           \
  /* Latin-1 ("caf\xe9"); arrow-rs cannot import it, so the values are not */          \
  /* judged, and nothing else may fail (issue 39: no MUST on any path) */             \
  X(NAME_LATIN1, "name-latin1")                                                        \
  /* async.task.extract-null: every stream keeps 8 bytes it never frees */            \
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
static const char* init_error; /* NULL when the mutation and base are ready */
static char init_error_buf[1024];
static char plugin_name[160];
static pthread_once_t init_once = PTHREAD_ONCE_INIT;


/* How long a mutation waits for a second cancel or a request after cancel
 * that another thread is about to make, and how long a request/cancel that
 * must call a callback waits for the callback lock. */
#define GRACE_MS 20
#define CALLBACK_LOCK_MS 1000

static void choose(void) {
  snprintf(plugin_name, sizeof plugin_name, "mutant-async-producer:%s",
           arrowcert_mutant_wanted());
  int i = arrowcert_mutant_setup("mutant async producer", NAMES, N_MUTANTS, &base,
                                 init_error_buf, sizeof init_error_buf);
  if (i >= 0) M = (enum mutant)i;
  if (init_error_buf[0]) init_error = init_error_buf;
}

/* ---- last error: per thread ---- */

static __thread char error_buf[1024];
static __thread const char* last_error;

__attribute__((format(printf, 2, 3))) static int fail(int code, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(error_buf, sizeof error_buf, fmt, ap);
  va_end(ap);
  last_error = error_buf;
  return code;
}

static int ready(void) {
  pthread_once(&init_once, choose);
  if (init_error) {
    fail(EINVAL, "%s", init_error);
    return 0;
  }
  return 1;
}

int32_t arrowcert_plugin_abi_version(void) { return 1; }

const char* arrowcert_plugin_name(void) {
  pthread_once(&init_once, choose);
  return plugin_name;
}

const char* arrowcert_last_error(void) { return last_error; }

int32_t arrowcert_plugin_supports_device(int32_t device_type) {
  if (!ready()) return 0;
  int32_t (*f)(int32_t) = BASE(arrowcert_plugin_supports_device);
  return f ? f(device_type) : device_type == ARROW_DEVICE_CPU;
}

void arrowcert_free(void* p) {
  if (!ready()) return;
  void (*f)(void*) = BASE(arrowcert_free);
  if (f) f(p);
}

/* ---- metadata in the ArrowSchema.metadata encoding ---- */

static char* encode_pair(const char* key, const char* value) {
  int32_t n = 1, kl = (int32_t)strlen(key), vl = (int32_t)strlen(value);
  char* buf = malloc(12 + (size_t)kl + (size_t)vl);
  if (!buf) return NULL;
  char* p = buf;
  memcpy(p, &n, 4), p += 4;
  memcpy(p, &kl, 4), p += 4;
  memcpy(p, key, (size_t)kl), p += kl;
  memcpy(p, &vl, 4), p += 4;
  memcpy(p, value, (size_t)vl);
  return buf;
}

/* One pair whose key length is negative, followed by zeros so that a reader
 * that ignores the sign still reads within the buffer. */
static char* encode_bad(void) {
  char* buf = calloc(1, 64);
  if (!buf) return NULL;
  int32_t n = 1, kl = -5;
  memcpy(buf, &n, 4);
  memcpy(buf + 4, &kl, 4);
  return buf;
}

/* ---- tasks: independent of the stream, so they may outlive it ---- */

struct task_state {
  struct ArrowDeviceArray array;
  int64_t index;
};

static void pair_hook(void);
static void overlap_error(void);

static int extract_data(struct ArrowAsyncTask* self, struct ArrowDeviceArray* out) {
  pair_hook();
  if (M == ERROR_OVERLAPS_TASK && out) overlap_error();
  if (!self || !self->private_data) return EINVAL; /* exactly once */
  struct task_state* t = self->private_data;
  self->private_data = NULL;
  if (out && M == CONTINUES_AFTER_FAILED_EXTRACT && t->index == 0) {
    if (t->array.array.release) t->array.array.release(&t->array.array);
    free(t);
    return EIO; /* the bug is what the driver does next: nothing different */
  }
  if (out) {
    *out = t->array; /* a move: the source is marked released */
    t->array.array.release = NULL;
    if (M == INVALID_ARRAY && out->array.release) out->array.null_count = out->array.length + 1;
  } else if (t->array.array.release && M != EXTRACT_NULL_LEAKS) {
    t->array.array.release(&t->array.array);
  }
  free(t);
  return 0;
}

/* ---- one stream ---- */

enum phase { SETUP, IN_SCHEMA, STREAMING, DONE };
enum ending { GO_ON = -1, FINISHED, CANCELLED, REFUSED, FAILED, BAD_REQUEST, REPORTED };

struct stream {
  struct ArrowAsyncDeviceStreamHandler* h;
  struct ArrowDeviceArrayStream base;
  struct ArrowAsyncProducer* producer; /* freed at the end, after release */
  char* metadata;

  pthread_mutex_t mu; /* the flow state below; never held around a callback */
  pthread_cond_t cv;
  uint64_t credits;
  int requested;      /* a request(n > 0) came */
  int cancelled;
  int cancels;        /* cancel calls so far */
  int bad_request;
  char bad_request_msg[160];
  int refused;        /* the consumer refused a task */
  int handler_released;
  int cancel_releasing; /* cancel-releases: a cancel call is about to release */
  int reentered;      /* reentrant-request: the synchronous delivery happened */
  int inflight;       /* request/cancel calls in progress */
  enum phase phase;

  pthread_mutex_t cb; /* held around every callback, and around the base stream */
  struct ArrowDeviceArray pending; /* a batch fetched, not delivered yet */
  int have_pending;
  int eof;
  int fail_rc;
  char fail_msg[512];
  int64_t tasks; /* index of the next task */
  int reported; /* error-overlaps-task: on_error already came from the helper */
};

/* error-overlaps-task: the stream being driven (one at a time), and the
 * helper thread's body. */
static struct stream* volatile overlapping;
static void* overlap_thread(void* arg) {
  struct stream* s = arg;
  s->h->on_error(s->h, EIO, "mutant: the producer failed while a task was being read", NULL);
  return NULL;
}

/* The stream whose callback lock this thread holds. */
static __thread struct stream* inside;

/* Called from extract_data on the thread inside on_next_task: on_error
 * from a helper thread, joined before the task is handed over, so it runs
 * while on_next_task has not returned; then the driver only releases.
 * Only there: a task extracted later on another thread (the extract-thread
 * schedules) may outlive its stream, and an on_error from it could reach a
 * handler already released (a crash of the mutant, not its mistake). */
static void overlap_error(void) {
  struct stream* s = overlapping;
  if (!s || inside != s) return;
  pthread_mutex_lock(&s->mu);
  int first = !s->reported && !s->handler_released;
  s->reported = 1;
  pthread_mutex_unlock(&s->mu);
  if (!first) return;
  pthread_t t;
  if (pthread_create(&t, NULL, overlap_thread, s) == 0) pthread_join(t, NULL);
  pthread_mutex_lock(&s->mu);
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
}


enum entered { NOT_ENTERED, NESTED, LOCKED };

static enum entered cb_enter(struct stream* s, int timed) {
  if (inside == s) return NESTED;
  if (timed) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += CALLBACK_LOCK_MS / 1000;
    if (pthread_mutex_timedlock(&s->cb, &ts) != 0) return NOT_ENTERED;
  } else {
    pthread_mutex_lock(&s->cb);
  }
  inside = s;
  return LOCKED;
}

static void cb_leave(struct stream* s, enum entered how) {
  if (how != LOCKED) return;
  inside = NULL;
  pthread_mutex_unlock(&s->cb);
}

static void deadline(struct timespec* ts, long ms) {
  clock_gettime(CLOCK_REALTIME, ts);
  ts->tv_nsec += ms * 1000000L;
  ts->tv_sec += ts->tv_nsec / 1000000000L;
  ts->tv_nsec %= 1000000000L;
}

/* Is the handler still ours to call? Under the callback lock. */
static int alive(struct stream* s) {
  pthread_mutex_lock(&s->mu);
  int ok = !s->handler_released;
  pthread_mutex_unlock(&s->mu);
  return ok;
}

static void set_phase(struct stream* s, enum phase p) {
  pthread_mutex_lock(&s->mu);
  s->phase = p;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

static void mark_refused(struct stream* s) {
  pthread_mutex_lock(&s->mu);
  s->refused = 1;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

/* Why the driver must stop now, or GO_ON; under mu. */
static enum ending stop_reason(struct stream* s, int at_end) {
  if (s->reported) return REPORTED;
  if (s->refused) return REFUSED;
  if (s->bad_request) return BAD_REQUEST; /* an error of the live stream wins */
  if (s->cancelled) {
    if (M == REQUEST_AFTER_CANCEL_DELIVERS && !at_end && s->credits > 0) return GO_ON;
    return CANCELLED;
  }
  return GO_ON;
}

static int may_deliver(struct stream* s) {
  if (M == IGNORES_BACKPRESSURE) return s->requested;
  return s->credits > 0;
}

static void take_credit(struct stream* s) {
  if (s->credits > 0) s->credits--;
}

/* Fetches the next batch from the base stream; under the callback lock. */
static void fetch(struct stream* s) {
  if (s->have_pending || s->eof || s->fail_rc) return;
  struct ArrowDeviceArray a;
  memset(&a, 0, sizeof a);
  int rc = s->base.get_next(&s->base, &a);
  if (rc != 0) {
    const char* m = s->base.get_last_error ? s->base.get_last_error(&s->base) : NULL;
    if (m)
      snprintf(s->fail_msg, sizeof s->fail_msg, "%s", m);
    else
      snprintf(s->fail_msg, sizeof s->fail_msg, "the base stream's get_next failed with %d", rc);
    s->fail_rc = rc;
  } else if (!a.array.release) {
    s->eof = 1;
  } else {
    s->pending = a;
    s->have_pending = 1;
  }
}

static struct ArrowDeviceArray take_pending(struct stream* s) {
  struct ArrowDeviceArray a = s->pending;
  s->pending.array.release = NULL;
  s->have_pending = 0;
  return a;
}

/* A task for `a` (moved in) and its metadata, ready to pass; 0 or ENOMEM
 * (then the array is released and the failure recorded). */
static int make_task(struct stream* s, struct ArrowDeviceArray* a, struct ArrowAsyncTask* task,
                     char** meta) {
  char index[32];
  int64_t number = s->tasks++;
  snprintf(index, sizeof index, "%lld", (long long)number);
  struct task_state* t = malloc(sizeof *t);
  *meta = encode_pair("arrowcert.task", index);
  if (!t || !*meta) {
    free(t);
    free(*meta);
    if (a->array.release) a->array.release(&a->array);
    s->fail_rc = ENOMEM;
    snprintf(s->fail_msg, sizeof s->fail_msg, "out of memory for a task");
    return ENOMEM;
  }
  t->array = *a;
  t->index = number;
  a->array.release = NULL;
  task->extract_data = extract_data;
  task->private_data = t;
  return 0;
}

/* Delivers one array; under the callback lock (or nested). */
static void deliver(struct stream* s, struct ArrowDeviceArray* a) {
  if (!alive(s)) {
    if (a->array.release) a->array.release(&a->array);
    return;
  }
  struct ArrowAsyncTask task;
  char* meta;
  if (make_task(s, a, &task, &meta) != 0) {
    pthread_mutex_lock(&s->mu);
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return;
  }
  int rc = s->h->on_next_task(s->h, &task, meta);
  free(meta); /* valid only during the call */
  if (rc != 0) mark_refused(s);
}

/* ---- concurrent-callbacks: a pair of tasks from two threads at once ----
 *
 * Thread A (the driver) calls on_next_task for the first task, thread B for
 * the second while A's call has not returned. So that this does not depend
 * on timing, the two meet in the consumer's own calls back into this
 * library (extract_data, request, cancel), which come after the consumer
 * took the callback in: A's first such call waits until B is inside its
 * on_next_task too (B's first call back, or B's return), and B calls
 * on_next_task once A is inside (A's first call back). A consumer that
 * calls nothing back from A's callback gets B's task after A's call
 * returned (and none if it refused A's task). */

struct pair {
  struct stream* s;
  struct ArrowAsyncTask task; /* B's */
  char* meta;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int a_inside, a_returned, a_rc;
  int b_inside, b_returned;
  int rc; /* B's on_next_task result */
};

/* The pair this thread is A or B of, during that on_next_task call. */
static __thread struct pair* pair_a;
static __thread struct pair* pair_b;

/* At the top of every function a consumer calls back into. */
static void pair_hook(void) {
  struct pair* p;
  if ((p = pair_b) != NULL) {
    pthread_mutex_lock(&p->mu);
    p->b_inside = 1;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
  } else if ((p = pair_a) != NULL) {
    struct timespec until;
    deadline(&until, CALLBACK_LOCK_MS);
    pthread_mutex_lock(&p->mu);
    if (!p->a_inside) {
      p->a_inside = 1;
      pthread_cond_broadcast(&p->cv);
      while (!p->b_inside && !p->b_returned &&
             pthread_cond_timedwait(&p->cv, &p->mu, &until) != ETIMEDOUT) {
      }
    }
    pthread_mutex_unlock(&p->mu);
  }
}

static void* second_of_pair(void* arg) {
  struct pair* p = arg;
  struct timespec until;
  deadline(&until, CALLBACK_LOCK_MS);
  pthread_mutex_lock(&p->mu);
  while (!p->a_inside && !p->a_returned &&
         pthread_cond_timedwait(&p->cv, &p->mu, &until) != ETIMEDOUT) {
  }
  int skip = p->a_returned && p->a_rc != 0; /* after a refusal: nothing more */
  pthread_mutex_unlock(&p->mu);
  if (skip) {
    extract_data(&p->task, NULL); /* never handed over */
    p->rc = 0;
  } else {
    pair_b = p;
    p->rc = p->s->h->on_next_task(p->s->h, &p->task, p->meta);
    pair_b = NULL;
  }
  pthread_mutex_lock(&p->mu);
  p->b_returned = 1;
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

/* Delivers a1 on this thread and a2 from another thread at the same time. */
static void deliver_pair(struct stream* s, struct ArrowDeviceArray* a1,
                         struct ArrowDeviceArray* a2) {
  struct ArrowAsyncTask t1;
  char* m1;
  struct pair* p = calloc(1, sizeof *p);
  pthread_t b;
  if (!p || make_task(s, a1, &t1, &m1) != 0) {
    free(p);
    if (a1->array.release) a1->array.release(&a1->array);
    if (a2->array.release) a2->array.release(&a2->array);
    s->fail_rc = ENOMEM;
    snprintf(s->fail_msg, sizeof s->fail_msg, "out of memory for a task");
    return;
  }
  p->s = s;
  if (make_task(s, a2, &p->task, &p->meta) != 0) {
    extract_data(&t1, NULL);
    free(m1);
    free(p);
    return;
  }
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->cv, NULL);
  if (pthread_create(&b, NULL, second_of_pair, p) != 0) {
    /* no second thread: one after the other */
    int rc = s->h->on_next_task(s->h, &t1, m1);
    if (rc != 0) {
      mark_refused(s);
      extract_data(&p->task, NULL); /* never handed over */
    } else if (s->h->on_next_task(s->h, &p->task, p->meta) != 0) {
      mark_refused(s);
    }
  } else {
    pair_a = p;
    int rc = s->h->on_next_task(s->h, &t1, m1);
    pair_a = NULL;
    pthread_mutex_lock(&p->mu);
    p->a_returned = 1;
    p->a_rc = rc;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    pthread_join(b, NULL);
    if (rc != 0 || p->rc != 0) mark_refused(s);
  }
  free(m1);
  free(p->meta);
  pthread_cond_destroy(&p->cv);
  pthread_mutex_destroy(&p->mu);
  free(p);
}

/* One delivery step of the driver; under the callback lock. */
static void deliver_step(struct stream* s) {
  if (!s->have_pending) return;
  pthread_mutex_lock(&s->mu);
  if (stop_reason(s, 0) != GO_ON || !may_deliver(s)) {
    pthread_mutex_unlock(&s->mu);
    return;
  }
  take_credit(s);
  int pair = M == CONCURRENT_CALLBACKS && s->credits > 0;
  pthread_mutex_unlock(&s->mu);
  struct ArrowDeviceArray a1 = take_pending(s);
  if (pair) {
    fetch(s);
    pair = 0;
    if (s->have_pending) {
      pthread_mutex_lock(&s->mu);
      if (stop_reason(s, 0) == GO_ON && s->credits > 0) {
        take_credit(s);
        pair = 1;
      }
      pthread_mutex_unlock(&s->mu);
    }
    if (pair && alive(s)) {
      struct ArrowDeviceArray a2 = take_pending(s);
      deliver_pair(s, &a1, &a2);
      return;
    }
  }
  deliver(s, &a1);
}

/* reentrant-request: the task request() delivers itself. */
static void deliver_from_request(struct stream* s) {
  enum entered how = cb_enter(s, 1);
  if (how == NOT_ENTERED) return;
  pthread_mutex_lock(&s->mu);
  int ok = !s->reentered && !s->handler_released && stop_reason(s, 0) == GO_ON &&
           s->credits > 0 &&
           (s->phase == STREAMING || (s->phase == IN_SCHEMA && how == NESTED));
  pthread_mutex_unlock(&s->mu);
  if (ok) {
    fetch(s);
    if (s->have_pending) {
      pthread_mutex_lock(&s->mu);
      ok = s->credits > 0 && stop_reason(s, 0) == GO_ON;
      if (ok) take_credit(s), s->reentered = 1;
      pthread_mutex_unlock(&s->mu);
      if (ok) {
        struct ArrowDeviceArray a = take_pending(s);
        deliver(s, &a);
      }
    }
  }
  pthread_mutex_lock(&s->mu);
  pthread_cond_broadcast(&s->cv); /* the driver re-reads what changed */
  pthread_mutex_unlock(&s->mu);
  cb_leave(s, how);
}

/* ---- ArrowAsyncProducer callbacks: record and wake, nothing more ---- */

static void p_request(struct ArrowAsyncProducer* self, int64_t n) {
  pair_hook();
  struct stream* s = self->private_data;
  pthread_mutex_lock(&s->mu);
  s->inflight++;
  int live = !s->cancelled || M == REQUEST_AFTER_CANCEL_DELIVERS;
  if (live && n <= 0) {
    /* after cancel a bad request is a NOP too */
    if (!s->cancelled && M != ACCEPTS_REQUEST_ZERO && !s->bad_request) {
      s->bad_request = 1;
      snprintf(s->bad_request_msg, sizeof s->bad_request_msg,
               "ArrowAsyncProducer.request called with n = %lld: it is invalid to call "
               "this function with a value of n that is <= 0",
               (long long)n);
    }
  } else if (live) {
    uint64_t add = (uint64_t)n;
    s->credits = s->credits > UINT64_MAX - add ? UINT64_MAX : s->credits + add;
    s->requested = 1;
  }
  int sync = M == REENTRANT_REQUEST && n > 0 && !s->cancelled && !s->reentered &&
             (s->phase == IN_SCHEMA || s->phase == STREAMING);
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);

  if (sync) deliver_from_request(s);

  pthread_mutex_lock(&s->mu);
  s->inflight--;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

static void p_cancel(struct ArrowAsyncProducer* self) {
  pair_hook();
  struct stream* s = self->private_data;
  pthread_mutex_lock(&s->mu);
  s->inflight++;
  s->cancels++;
  int first = !s->cancelled;
  s->cancelled = 1;
  /* the driver leaves the release to this call (see finish in driver) */
  if (M == CANCEL_RELEASES && first) s->cancel_releasing = 1;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);

  if (M == CANCEL_RELEASES && first) {
    enum entered how = cb_enter(s, 1);
    if (how != NOT_ENTERED) {
      pthread_mutex_lock(&s->mu);
      int ok = !s->handler_released && s->phase != DONE;
      if (ok) s->handler_released = 1;
      pthread_mutex_unlock(&s->mu);
      if (ok) s->h->release(s->h);
      cb_leave(s, how);
    }
    /* released, or the lock could not be had: then the driver releases */
    pthread_mutex_lock(&s->mu);
    s->cancel_releasing = 0;
    pthread_mutex_unlock(&s->mu);
  }

  pthread_mutex_lock(&s->mu);
  s->inflight--;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

/* ---- the driver ---- */

/* The base stream and a batch fetched but not delivered: given back before
 * the handler's release, so that nothing of the data is still held when the
 * consumer sees the stream end. Under the callback lock. */
static void drop_base(struct stream* s) {
  if (s->have_pending) {
    struct ArrowDeviceArray a = take_pending(s);
    if (a.array.release) a.array.release(&a.array);
  }
  if (s->base.release) s->base.release(&s->base);
  s->base.release = NULL;
  s->eof = 1; /* nothing more to fetch */
}


/* name-latin1: the base's first child name swapped for a Latin-1 one until
 * the schema is released. The base frees what its own pointers point to,
 * so the release puts the base's name back first. The schema may have been
 * moved by then: the saved state is found by its private_data, which a
 * move keeps. */
#define LATIN1_SLOTS 64
static struct latin1_slot {
  void* private_data;
  struct ArrowSchema* child;
  const char* name;
  void (*release)(struct ArrowSchema*);
} latin1_slots[LATIN1_SLOTS];
static pthread_mutex_t latin1_mu = PTHREAD_MUTEX_INITIALIZER;

static void latin1_release(struct ArrowSchema* schema) {
  pthread_mutex_lock(&latin1_mu);
  for (int i = 0; i < LATIN1_SLOTS; i++) {
    struct latin1_slot* e = &latin1_slots[i];
    if (e->release && e->private_data == schema->private_data) {
      e->child->name = e->name;
      schema->release = e->release;
      e->release = NULL;
      break;
    }
  }
  pthread_mutex_unlock(&latin1_mu);
  if (schema->release != latin1_release && schema->release) schema->release(schema);
}

static void latin1_first_name(struct ArrowSchema* schema) {
  if (!schema->release || schema->n_children < 1) return;
  pthread_mutex_lock(&latin1_mu);
  for (int i = 0; i < LATIN1_SLOTS; i++) {
    struct latin1_slot* e = &latin1_slots[i];
    if (e->release) continue;
    e->private_data = schema->private_data;
    e->child = schema->children[0];
    e->name = e->child->name;
    e->release = schema->release;
    e->child->name = "caf\xe9";
    schema->release = latin1_release;
    break;
  }
  pthread_mutex_unlock(&latin1_mu);
}

static void* driver(void* arg) {
  struct stream* s = arg;
  struct ArrowAsyncDeviceStreamHandler* h = s->h;
  enum ending ending = FINISHED;
  int may_report = 1; /* on_error is allowed (not after a refusal or the end) */
  int code = 0;
  char msg[512] = "";

  if (M == ERROR_OVERLAPS_TASK) overlapping = s;
  /* "MUST populate the ArrowAsyncProducer member before calling" on_schema */
  h->producer = M == NULL_PRODUCER ? NULL : s->producer;

  enum entered how = cb_enter(s, 0);
  struct ArrowSchema schema;
  memset(&schema, 0, sizeof schema);
  int rc = s->base.get_schema(&s->base, &schema);
  if (rc != 0) {
    const char* m = s->base.get_last_error ? s->base.get_last_error(&s->base) : NULL;
    snprintf(msg, sizeof msg, "%s", m ? m : "the base stream's get_schema failed");
    code = rc;
    ending = FAILED;
    cb_leave(s, how);
    goto finish;
  }
  if (M == SKIPS_ON_SCHEMA) {
    if (schema.release) schema.release(&schema);
    pthread_mutex_lock(&s->mu);
    s->phase = STREAMING;
    pthread_mutex_unlock(&s->mu);
    fetch(s);
    if (s->have_pending) { /* right away, without a request */
      struct ArrowDeviceArray a = take_pending(s);
      deliver(s, &a);
    }
  } else {
    if (M == NAME_LATIN1) latin1_first_name(&schema);
    set_phase(s, IN_SCHEMA);
    rc = alive(s) ? h->on_schema(h, &schema) : ECANCELED;
    /* not moved by the consumer: still ours */
    if (schema.release) schema.release(&schema);
    if (rc != 0) {
      may_report = 0;
      ending = REFUSED;
      if (M == CONTINUES_AFTER_REFUSED_SCHEMA) {
        set_phase(s, STREAMING);
        fetch(s);
        if (s->have_pending) {
          struct ArrowDeviceArray a = take_pending(s);
          deliver(s, &a);
        }
        pthread_mutex_lock(&s->mu);
        int refused = s->refused;
        pthread_mutex_unlock(&s->mu);
        if (!refused && alive(s)) h->on_next_task(h, NULL, NULL);
      }
      cb_leave(s, how);
      goto finish;
    }
    if (M == NULL_PRODUCER) h->producer = s->producer;
    set_phase(s, STREAMING);
  }
  cb_leave(s, how);

  for (;;) {
    how = cb_enter(s, 0);
    fetch(s);
    int eof = s->eof, failed = s->fail_rc;
    if (failed) {
      code = s->fail_rc;
      snprintf(msg, sizeof msg, "%s", s->fail_msg);
    }
    cb_leave(s, how);
    if (failed) {
      ending = FAILED;
      break;
    }

    pthread_mutex_lock(&s->mu);
    enum ending stop = GO_ON;
    struct timespec grace;
    int graced = 0;
    for (;;) {
      stop = stop_reason(s, eof);
      if (stop == CANCELLED && M == REQUEST_AFTER_CANCEL_DELIVERS && !eof) {
        /* a request right after cancel, from another thread, still counts */
        if (!graced) deadline(&grace, GRACE_MS), graced = 1;
        if (pthread_cond_timedwait(&s->cv, &s->mu, &grace) != ETIMEDOUT) continue;
        stop = stop_reason(s, eof);
      }
      if (stop != GO_ON || eof || may_deliver(s)) break;
      pthread_cond_wait(&s->cv, &s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    if (stop != GO_ON) {
      ending = stop;
      break;
    }
    if (eof) {
      /* "The producer signals the end of the stream by passing NULL" */
      if (M == FREES_PRODUCER_EARLY) {
        /* Given back early: cleared as freed memory is, while
         * handler->producer still points at it. The memory itself goes back
         * to malloc at the end, as in the correct order, so that a consumer
         * reading or calling through the dangling pointer sees zeros (NULL
         * request and cancel) instead of whatever malloc reused it for. */
        memset(s->producer, 0, sizeof *s->producer);
      }
      how = cb_enter(s, 0);
      if (M != RELEASE_BEFORE_EOS && alive(s)) h->on_next_task(h, NULL, NULL);
      cb_leave(s, how);
      may_report = 0;
      ending = FINISHED;
      break;
    }
    how = cb_enter(s, 0);
    deliver_step(s);
    int nomem = s->fail_rc;
    cb_leave(s, how);
    if (nomem) continue; /* reported at the top */
  }

finish:
  if (M == CANCEL_RELEASES) {
    /* a cancel call in progress releases the handler itself */
    pthread_mutex_lock(&s->mu);
    while (s->cancel_releasing && !s->handler_released) pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
  }
  how = cb_enter(s, 0);
  if (ending == REFUSED) {
    /* a refused schema never reports; a refused task only in the mutation */
    pthread_mutex_lock(&s->mu);
    int refused_task = s->refused;
    pthread_mutex_unlock(&s->mu);
    may_report = refused_task && M == ERROR_AFTER_REFUSED_TASK;
  }
  if (ending == REPORTED) may_report = 0; /* on_error came already */
  if (alive(s) && may_report) {
    switch (ending) {
      case FAILED:
        h->on_error(h, code, msg, NULL);
        if (M == EOS_AFTER_ERROR) h->on_next_task(h, NULL, NULL);
        break;
      case BAD_REQUEST:
        pthread_mutex_lock(&s->mu);
        snprintf(msg, sizeof msg, "%s", s->bad_request_msg);
        pthread_mutex_unlock(&s->mu);
        h->on_error(h, EINVAL, msg, NULL);
        if (M == EOS_AFTER_ERROR) h->on_next_task(h, NULL, NULL);
        break;
      case CANCELLED:
        if (M == ERROR_AFTER_CANCEL) {
          h->on_error(h, ECANCELED, "cancelled", NULL);
        } else if (M == EIO_AFTER_CANCEL) {
          pthread_mutex_lock(&s->mu);
          int pending = s->credits > 0;
          pthread_mutex_unlock(&s->mu);
          if (pending) h->on_error(h, EIO, "mutant: stopped before the requested tasks", NULL);
        } else if (M == CANCEL_NOT_IDEMPOTENT) {
          struct timespec grace;
          deadline(&grace, GRACE_MS);
          pthread_mutex_lock(&s->mu);
          while (s->cancels < 2 &&
                 pthread_cond_timedwait(&s->cv, &s->mu, &grace) != ETIMEDOUT) {
          }
          int twice = s->cancels >= 2;
          pthread_mutex_unlock(&s->mu);
          if (twice) h->on_error(h, EALREADY, "cancel called twice", NULL);
        }
        break;
      case REFUSED:
        if (M == ERROR_AFTER_REFUSED_TASK)
          h->on_error(h, EIO, "consumer refused a task", NULL);
        break;
      default:
        break;
    }
  }
  drop_base(s);
  pthread_mutex_lock(&s->mu);
  int release = !s->handler_released;
  s->handler_released = 1;
  pthread_mutex_unlock(&s->mu);
  if (release) {
    void (*rel)(struct ArrowAsyncDeviceStreamHandler*) = h->release;
    rel(h);
    if (M == DOUBLE_RELEASE) rel(h);
  }
  cb_leave(s, how);

  /* "must clean it up *after* calling the release callback": once no
   * request/cancel call is still running on it */
  pthread_mutex_lock(&s->mu);
  s->phase = DONE;
  while (s->inflight > 0) pthread_cond_wait(&s->cv, &s->mu);
  pthread_mutex_unlock(&s->mu);
  if (overlapping == s) overlapping = NULL;
  memset(s->producer, 0, sizeof *s->producer);
  free(s->producer);
  free(s->metadata);
  pthread_cond_destroy(&s->cv);
  pthread_mutex_destroy(&s->mu);
  pthread_mutex_destroy(&s->cb);
  free(s);
  return NULL;
}

/* ---- the entry point ---- */

int arrowcert_produce_async(const uint8_t* ipc, int64_t ipc_len, int32_t device_type,
                            int64_t device_id, struct ArrowAsyncDeviceStreamHandler* handler) {
  if (!ready()) return EINVAL;
  /* Memory kept per stream (arrowcert_mutant.h). */
  if (M == SMALL_LEAK) arrowcert_mutant_small_leak();
  if (M == PERIODIC_CACHE) arrowcert_mutant_periodic_cache();
  if (!handler) return fail(EINVAL, "mutant async producer: the handler is NULL");
  if (!handler->on_schema || !handler->on_next_task || !handler->on_error || !handler->release)
    return fail(EINVAL, "mutant async producer: a mandatory handler callback is NULL");
  int (*produce)(const uint8_t*, int64_t, int32_t, int64_t, struct ArrowDeviceArrayStream*) =
      BASE(arrowcert_produce_device_stream);
  if (!produce)
    return fail(ENOSYS, "mutant async producer: the base has no arrowcert_produce_device_stream");

  struct stream* s = calloc(1, sizeof *s);
  if (!s) return fail(ENOMEM, "mutant async producer: out of memory");
  int rc = produce(ipc, ipc_len, device_type, device_id, &s->base);
  if (rc != 0) {
    const char* (*base_error)(void) = BASE(arrowcert_last_error);
    const char* why = base_error ? base_error() : NULL;
    free(s);
    return fail(rc, "%s", why ? why : "the base's arrowcert_produce_device_stream failed");
  }
  s->h = handler;
  s->producer = calloc(1, sizeof *s->producer);
  s->metadata = M == BAD_ADDITIONAL_METADATA ? encode_bad()
                                             : encode_pair("arrowcert.mutant", NAMES[M]);
  if (!s->producer || !s->metadata) {
    free(s->producer);
    free(s->metadata);
    s->base.release(&s->base);
    free(s);
    return fail(ENOMEM, "mutant async producer: out of memory");
  }
  s->producer->device_type =
      M == PRODUCER_DEVICE_TYPE ? ARROW_DEVICE_CUDA_HOST : s->base.device_type;
  s->producer->request = p_request;
  s->producer->cancel = p_cancel;
  s->producer->additional_metadata = s->metadata;
  s->producer->private_data = s;
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->cv, NULL);
  pthread_mutex_init(&s->cb, NULL);

  pthread_attr_t attr;
  pthread_t t;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  rc = pthread_create(&t, &attr, driver, s);
  pthread_attr_destroy(&attr);
  if (rc != 0) {
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    pthread_mutex_destroy(&s->cb);
    free(s->producer);
    free(s->metadata);
    s->base.release(&s->base);
    free(s);
    return fail(rc, "mutant async producer: cannot start the driver thread (error %d)", rc);
  }
  last_error = NULL;
  return 0;
}

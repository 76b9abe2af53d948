/*
 * Fault-injection producer: one fault per build, chosen with -DFAULT_<NAME>.
 * Each build does one thing a broken library does, so that the harness can
 * be shown to survive it and to report it against the right case.
 *
 *   cc -shared -fPIC -I harness/include -DFAULT_SEGV_PRODUCE \
 *      -o libfaulty_segv_produce.so producers/faulty/faulty_producer.c
 *
 * Faults hit arrowcert_produce_array unless said otherwise:
 *   SEGV_PRODUCE   write through NULL
 *   SEGV_FIRST_BATCH  write through NULL for batch 0; other batches are
 *                  valid (empty) struct arrays
 *   ABORT_PRODUCE  abort()
 *   EXIT0_PRODUCE  exit(0) in the middle of the call
 *   KILL_SELF      raise(SIGKILL)
 *   FORK_BOMB      fork until fork fails (children wait), then print why and
 *                  abort(); a safety cap of 3000 forks ends it with an error
 *                  where nothing bounds it
 *   SEGV_RELEASE   export a valid (empty) struct array whose release segfaults
 *   HANG_GET_NEXT  arrowcert_produce_stream: get_next never returns
 *   FLOOD_OUTPUT   write 100 MB to stdout and 100 MB to stderr, then fail
 *   ALLOC_BOMB     allocate and touch memory until allocation fails, then abort
 *   CLOSE_FDS      close every descriptor from 0 up, then fail
 *   FORK           fork a child that lingers, then fail
 *   SIGNALS        ignore SIGSEGV, SIGABRT, SIGTERM and SIGPIPE, then fail
 *   CTOR_CRASH     crash in the library's load-time initializer
 *   ASYNC_NO_RELEASE  arrowcert_produce_async: accept the handler, never call it
 *   FORK_RETURN    fork, and let the child return from the call too (into the
 *                  harness's own code, holding its socket), then fail
 *   SLOW           sleep 50 ms, then fail (long runs for interrupt tests)
 *   SIGBUS_PRODUCE read a mapped file past its end (a real SIGBUS)
 *   EXIT3_PRODUCE  exit(3) in the middle of the call
 *   STACK_OVERFLOW recurse without end
 *   SPIN_PRODUCE   loop forever on the CPU inside the call
 *   SPIN_RELEASE   export a valid (empty) struct array whose release loops
 *                  forever
 *   REDIRECT_FDS   point descriptors 1 and 2 at /dev/null, then fail
 *   SWALLOW_SEGV   install a SIGSEGV handler that does nothing, then fail
 *                  (the next fault of this process would loop forever)
 *   SETRLIMIT      lower the soft RLIMIT_NOFILE to 8, then fail
 *   SETRLIMIT_HARD lower the hard RLIMIT_NOFILE to 64, then fail
 *   ASYNC_SPIN     arrowcert_produce_async: a thread of its own calls
 *                  on_schema, then loops forever (never releases)
 *   LATE_WRITE     export a valid (empty) struct array and keep the address
 *                  of the structure the call filled; a thread of its own
 *                  writes 0xff over the previous call's structure during
 *                  the next call (after that call filled its own), as a
 *                  leftover thread of a real library writes into memory
 *                  the consumer owns by then
 *   CANCEL_DEADLOCK  arrowcert_produce_async: send the schema; cancel() then
 *                  deadlocks (takes a lock it already holds). Pair it with
 *                  the faulty consumer built with -DFAULT_CANCELS.
 *
 * producers/faulty/faulty_panic.rs is a Rust plugin whose produce panics
 * inside an `extern "C"` function.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "arrowcert_plugin.h"

int32_t arrowcert_plugin_abi_version(void) { return 1; }
const char* arrowcert_plugin_name(void) { return "arrowcert faulty producer"; }
const char* arrowcert_last_error(void) { return "injected fault"; }

#ifdef FAULT_CTOR_CRASH
__attribute__((constructor)) static void crash_on_load(void) {
  *(volatile int*)0 = 1;
}
#endif

static void release_schema(struct ArrowSchema* s) { s->release = NULL; }

/* An empty struct: "+s" with no children. */
int arrowcert_produce_schema(const uint8_t* ipc, int64_t len, struct ArrowSchema* out) {
  (void)ipc; (void)len;
  memset(out, 0, sizeof(*out));
  out->format = "+s";
  out->name = "";
  out->release = release_schema;
  return 0;
}

#ifdef FAULT_SEGV_RELEASE
static void release_segv(struct ArrowArray* a) {
  (void)a;
  *(volatile int*)0 = 1;
}
#endif

#ifdef FAULT_SPIN_RELEASE
static void release_spin(struct ArrowArray* a) {
  (void)a;
  for (volatile unsigned long i = 0;; i++) {
  }
}
#endif

#ifdef FAULT_LATE_WRITE
static void release_empty(struct ArrowArray* a) { a->release = NULL; }
static pthread_mutex_t late_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t late_cv = PTHREAD_COND_INITIALIZER;
static struct ArrowArray* late_target; /* what the thread writes over next */
static int late_started;
static void* late_writer(void* arg) {
  (void)arg;
  pthread_mutex_lock(&late_mu);
  for (;;) {
    while (!late_target) pthread_cond_wait(&late_cv, &late_mu);
    memset(late_target, 0xff, sizeof *late_target);
    late_target = NULL;
    pthread_cond_broadcast(&late_cv);
  }
  return NULL;
}
/* Has the thread write over `previous` and waits until it did. */
static void late_write(struct ArrowArray* previous) {
  pthread_mutex_lock(&late_mu);
  if (!late_started) {
    pthread_t t;
    late_started = pthread_create(&t, NULL, late_writer, NULL) == 0;
  }
  if (late_started && previous) {
    late_target = previous;
    pthread_cond_broadcast(&late_cv);
    while (late_target) pthread_cond_wait(&late_cv, &late_mu);
  }
  pthread_mutex_unlock(&late_mu);
}
#endif

#ifdef FAULT_STACK_OVERFLOW
static int recurse(volatile int depth) {
  volatile char frame[4096];
  frame[0] = (char)depth;
  return recurse(depth + 1) + frame[0];
}
#endif

#ifdef FAULT_SWALLOW_SEGV
static void swallow(int sig) { (void)sig; }
#endif

#if defined(FAULT_SEGV_FIRST_BATCH) || defined(FAULT_SEGV_AFTER_FIRST_CALL)
static const void* empty_struct_buffers[1] = {NULL};
static void release_empty_struct(struct ArrowArray* a) { a->release = NULL; }
/* An array of the empty struct, `length` rows: what the calls that do not
 * crash return. */
static int empty_struct_array(int64_t length, struct ArrowArray* out) {
  memset(out, 0, sizeof(*out));
  out->length = length;
  out->n_buffers = 1;
  out->buffers = (const void**)empty_struct_buffers;
  out->release = release_empty_struct;
  return 0;
}
#endif

int arrowcert_produce_array(const uint8_t* ipc, int64_t len, int64_t batch, int64_t offset,
                            int64_t length, struct ArrowArray* out) {
  (void)ipc; (void)len; (void)batch; (void)offset; (void)length; (void)out;
#if defined(FAULT_SEGV_PRODUCE)
  *(volatile int*)0 = 1;
#elif defined(FAULT_SEGV_FIRST_BATCH)
  /* Crashes on batch 0; other batches are arrays of the empty struct. */
  if (batch == 0) *(volatile int*)0 = 1;
  return empty_struct_array(length, out);
#elif defined(FAULT_SEGV_AFTER_FIRST_CALL)
  /* Damage one call leaves for the next: every call after the first in a
   * process crashes; the first returns an array of the empty struct. */
  static int calls = 0;
  if (calls++ > 0) *(volatile int*)0 = 1;
  return empty_struct_array(length, out);
#elif defined(FAULT_ABORT_PRODUCE)
  abort();
#elif defined(FAULT_EXIT0_PRODUCE)
  exit(0);
#elif defined(FAULT_KILL_SELF)
  raise(SIGKILL);
#elif defined(FAULT_FORK_BOMB)
  for (int i = 0; i < 3000; i++) {
    pid_t p = fork();
    if (p == 0) { pause(); _exit(0); }
    if (p < 0) {
      fprintf(stderr, "fork bomb: fork %d failed: %s\n", i, strerror(errno));
      fflush(stderr);
      abort();
    }
  }
  return EAGAIN;
#elif defined(FAULT_SEGV_RELEASE)
  static const void* buffers[1] = {NULL};
  memset(out, 0, sizeof(*out));
  out->n_buffers = 1;
  out->buffers = buffers;
  out->release = release_segv;
  return 0;
#elif defined(FAULT_FLOOD_OUTPUT)
  static char chunk[1 << 16];
  memset(chunk, 'x', sizeof(chunk));
  chunk[sizeof(chunk) - 1] = '\n';
  for (int i = 0; i < (100 << 20) / (int)sizeof(chunk); i++) {
    fwrite(chunk, 1, sizeof(chunk), stdout);
    fwrite(chunk, 1, sizeof(chunk), stderr);
  }
  return EIO;
#elif defined(FAULT_ALLOC_BOMB)
  for (;;) {
    char* p = malloc(64 << 20);
    if (!p) abort();
    memset(p, 1, 64 << 20);
  }
#elif defined(FAULT_CLOSE_FDS)
  for (int fd = 0; fd < 4096; fd++) close(fd);
  return EIO;
#elif defined(FAULT_FORK)
  pid_t pid = fork();
  if (pid == 0) {
    /* The child lingers; the harness must not leave it behind. */
    for (;;) pause();
  }
  /* The parent writes the child's pid before the call returns: the child
   * itself might be killed (with the worker's group) before it wrote it. */
  const char* marker = getenv("ARROWCERT_FAULTY_PID_FILE");
  if (marker && pid > 0) {
    FILE* f = fopen(marker, "w");
    if (f) { fprintf(f, "%d\n", (int)pid); fclose(f); }
  }
  return EIO;
#elif defined(FAULT_FORK_RETURN)
  (void)fork();
  return EIO;
#elif defined(FAULT_SLOW)
  usleep(50 * 1000);
  return EIO;
#elif defined(FAULT_SIGBUS_PRODUCE)
  char path[] = "/tmp/arrowcert-faulty-sigbus-XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) return EIO;
  unlink(path);
  if (ftruncate(fd, 4096) != 0) return EIO;
  volatile char* m = mmap(NULL, 8192, PROT_READ, MAP_SHARED, fd, 0);
  if (m == MAP_FAILED) return EIO;
  if (ftruncate(fd, 0) != 0) return EIO;
  return m[0] + m[4096]; /* past the file's end: SIGBUS */
#elif defined(FAULT_EXIT3_PRODUCE)
  exit(3);
#elif defined(FAULT_STACK_OVERFLOW)
  return recurse(0);
#elif defined(FAULT_SPIN_PRODUCE)
  for (volatile unsigned long i = 0;; i++) {
  }
#elif defined(FAULT_LATE_WRITE)
  static const void* buffers[1] = {NULL};
  static struct ArrowArray* previous;
  memset(out, 0, sizeof(*out));
  out->n_buffers = 1;
  out->buffers = buffers;
  out->release = release_empty;
  late_write(previous);
  previous = out;
  return 0;
#elif defined(FAULT_SPIN_RELEASE)
  static const void* buffers[1] = {NULL};
  memset(out, 0, sizeof(*out));
  out->n_buffers = 1;
  out->buffers = buffers;
  out->release = release_spin;
  return 0;
#elif defined(FAULT_REDIRECT_FDS)
  int null = open("/dev/null", O_WRONLY);
  if (null >= 0) {
    dup2(null, 1);
    dup2(null, 2);
    close(null);
  }
  return EIO;
#elif defined(FAULT_SWALLOW_SEGV)
  signal(SIGSEGV, swallow);
  return EIO;
#elif defined(FAULT_SETRLIMIT)
  struct rlimit lim;
  getrlimit(RLIMIT_NOFILE, &lim);
  lim.rlim_cur = 8;
  setrlimit(RLIMIT_NOFILE, &lim);
  return EIO;
#elif defined(FAULT_SETRLIMIT_HARD)
  struct rlimit lim = {64, 64};
  setrlimit(RLIMIT_NOFILE, &lim);
  return EIO;
#elif defined(FAULT_SIGNALS)
  signal(SIGSEGV, SIG_IGN);
  signal(SIGABRT, SIG_IGN);
  signal(SIGTERM, SIG_IGN);
  signal(SIGPIPE, SIG_IGN);
  return EIO;
#endif
  return ENOSYS;
}

#ifdef FAULT_HANG_GET_NEXT
static int hang_get_schema(struct ArrowArrayStream* s, struct ArrowSchema* out) {
  (void)s;
  return arrowcert_produce_schema(NULL, 0, out);
}
static int hang_get_next(struct ArrowArrayStream* s, struct ArrowArray* out) {
  (void)s; (void)out;
  for (;;) pause();
  return 0;
}
static const char* hang_last_error(struct ArrowArrayStream* s) { (void)s; return NULL; }
static void hang_release(struct ArrowArrayStream* s) { s->release = NULL; }

int arrowcert_produce_stream(const uint8_t* ipc, int64_t len, struct ArrowArrayStream* out) {
  (void)ipc; (void)len;
  out->get_schema = hang_get_schema;
  out->get_next = hang_get_next;
  out->get_last_error = hang_last_error;
  out->release = hang_release;
  out->private_data = NULL;
  return 0;
}
#endif

#ifdef FAULT_ASYNC_SPIN
static void* spin_after_schema(void* arg) {
  struct ArrowAsyncDeviceStreamHandler* handler = arg;
  struct ArrowSchema schema;
  arrowcert_produce_schema(NULL, 0, &schema);
  static struct ArrowAsyncProducer producer = {1, NULL, NULL, NULL, NULL};
  handler->producer = &producer;
  if (handler->on_schema(handler, &schema) != 0 && schema.release) schema.release(&schema);
  for (volatile unsigned long i = 0;; i++) {
  }
  return NULL;
}
int arrowcert_produce_async(const uint8_t* ipc, int64_t len, int32_t device_type,
                            int64_t device_id, struct ArrowAsyncDeviceStreamHandler* handler) {
  (void)ipc; (void)len; (void)device_type; (void)device_id;
  pthread_t t;
  if (pthread_create(&t, NULL, spin_after_schema, handler) != 0) return EAGAIN;
  pthread_detach(t);
  return 0;
}
#endif

#ifdef FAULT_ASYNC_NO_RELEASE
int arrowcert_produce_async(const uint8_t* ipc, int64_t len, int32_t device_type,
                            int64_t device_id, struct ArrowAsyncDeviceStreamHandler* handler) {
  (void)ipc; (void)len; (void)device_type; (void)device_id; (void)handler;
  return 0; /* accepted, and then nothing: no on_schema, no release */
}
#endif

#ifdef FAULT_CANCEL_DEADLOCK
#include <pthread.h>
static pthread_mutex_t cancel_lock = PTHREAD_MUTEX_INITIALIZER;
static void nop_request(struct ArrowAsyncProducer* p, int64_t n) { (void)p; (void)n; }
static void deadlock_cancel(struct ArrowAsyncProducer* p) {
  (void)p;
  /* "Calls to cancel must be idempotent and thread-safe": this one takes a
   * lock it already holds, the way a producer that calls cancel from a
   * callback made under its own lock does. */
  pthread_mutex_lock(&cancel_lock);
  pthread_mutex_lock(&cancel_lock);
}
static struct ArrowAsyncProducer deadlock_producer = {
    1, nop_request, deadlock_cancel, NULL, NULL};
int arrowcert_produce_async(const uint8_t* ipc, int64_t len, int32_t device_type,
                            int64_t device_id, struct ArrowAsyncDeviceStreamHandler* handler) {
  (void)device_type; (void)device_id;
  struct ArrowSchema schema;
  arrowcert_produce_schema(ipc, len, &schema);
  handler->producer = &deadlock_producer;
  return handler->on_schema(handler, &schema) == 0 ? 0 : 0;
}
#endif

/*
 * Fault-injection consumer: one fault per build, chosen with -DFAULT_<NAME>.
 * Faults hit arrowcert_consume_array:
 *   SEGV_CONSUME   write through NULL
 *   HANG_CONSUME   never return
 *   FLAKY_CONSUME  crash in the first process, decline in every later one
 * With -DLOAD_LOG it appends a line to the file $ARROWCERT_TEST_LOAD_LOG each
 * time it is loaded (tests count the workers that loaded it).
 * and, with -DFAULT_CANCELS, the async entry points: a handler that cancels
 * the stream from on_schema (legal: cancel must be thread-safe and
 * idempotent), to drive producers' cancel paths.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "arrowcert_plugin.h"

#ifdef LOAD_LOG
#include <stdio.h>
#include <stdlib.h>
__attribute__((constructor)) static void log_load(void) {
  const char* path = getenv("ARROWCERT_TEST_LOAD_LOG");
  FILE* f = path ? fopen(path, "a") : NULL;
  if (f) {
    fprintf(f, "%d\n", (int)getpid());
    fclose(f);
  }
}
#endif

int32_t arrowcert_plugin_abi_version(void) { return 1; }
const char* arrowcert_plugin_name(void) { return "arrowcert faulty consumer"; }

int arrowcert_consume_array(struct ArrowSchema* schema, struct ArrowArray* array,
                            uint8_t** out, int64_t* out_len) {
  (void)out; (void)out_len;
#if defined(FAULT_SEGV_CONSUME)
  (void)schema; (void)array;
  *(volatile int*)0 = 1;
#elif defined(FAULT_HANG_CONSUME)
  (void)schema; (void)array;
  for (;;) pause();
#elif defined(FAULT_FLAKY_CONSUME)
  /* Crashes in the first process that calls it ($ARROWCERT_TEST_FLAKY_MARK,
   * a file, records that one did); in every later process it declines
   * cleanly (released, ENOSYS): a verdict that changes from run to run. */
  {
    const char* mark = getenv("ARROWCERT_TEST_FLAKY_MARK");
    if (mark && access(mark, F_OK) != 0) {
      FILE* f = fopen(mark, "w");
      if (f) fclose(f);
      *(volatile int*)0 = 1;
    }
    if (array->release) array->release(array);
    if (schema->release) schema->release(schema);
  }
#endif
  return ENOSYS;
}

#ifdef FAULT_CANCELS
#include <stdlib.h>
static int cancel_on_schema(struct ArrowAsyncDeviceStreamHandler* self, struct ArrowSchema* s) {
  if (s->release) s->release(s);
  self->producer->cancel(self->producer);
  return 0;
}
static int drop_task(struct ArrowAsyncDeviceStreamHandler* self, struct ArrowAsyncTask* task,
                     const char* metadata) {
  (void)self; (void)metadata;
  if (task) task->extract_data(task, NULL);
  return 0;
}
static void ignore_error(struct ArrowAsyncDeviceStreamHandler* self, int code,
                         const char* message, const char* metadata) {
  (void)self; (void)code; (void)message; (void)metadata;
}
static volatile int released;
static void release_handler(struct ArrowAsyncDeviceStreamHandler* self) {
  self->release = NULL;
  released = 1;
}
int arrowcert_consume_async_start(struct ArrowAsyncDeviceStreamHandler* handler, void** token) {
  handler->on_schema = cancel_on_schema;
  handler->on_next_task = drop_task;
  handler->on_error = ignore_error;
  handler->release = release_handler;
  handler->producer = NULL;
  handler->private_data = NULL;
  *token = handler;
  released = 0;
  return 0;
}
int arrowcert_consume_async_finish(void* token, int64_t timeout_ms, uint8_t** out, int64_t* len) {
  (void)token; (void)out; (void)len;
  for (int64_t waited = 0; !released && waited < timeout_ms; waited++) usleep(1000);
  return ECANCELED;
}
#endif

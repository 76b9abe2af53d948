/*
 * Mutant consumers on the emulated device (ARROW_DEVICE_EXT_DEV): the
 * reference consumer (loaded from ARROWCERT_MUTANT_BASE) with one device
 * rule broken, chosen by ARROWCERT_MUTANT. The mutation is made by the
 * base itself, through a doctored emulated-device table: its calls to wait
 * on an event return at once without waiting. With ARROWCERT_MUTANT=none
 * everything passes through untouched.
 *
 *   cc -shared -fPIC -I harness/include -o libarrowcert_mutant_emulated_consumer.so \
 *      consumers/mutants/mutant_emulated_consumer.c -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arrowcert_emulated_device.h"
#include "arrowcert_plugin.h"
#include "arrowcert_mutant.h"

/* name, rule it breaks: the bug it models */
#define MUTANTS(X)                                                                     \
  X(NONE, "none")                                                                      \
  /* consumer.sync.waits: reads the buffers without waiting on sync_event */          \
  X(READ_BEFORE_WAIT, "read-before-wait")                                              \
  /* consumer.sync.waits: reads a device array's buffers first and waits on its     \
     sync_event after, before it releases the array and returns (the CUDA mutant    \
     read-before-wait's order: the event is complete whenever anyone asks) */       \
  X(READ_THEN_WAIT, "read-then-wait")                                                  \
  /* device.move: the device array moved by a plain copy, the source left live */     \
  X(MOVE_WITHOUT_MARKING, "move-without-marking")

#define AS_ENUM(e, s) e,
#define AS_NAME(e, s) s,
enum mutant { MUTANTS(AS_ENUM) N_MUTANTS };
static const char* const NAMES[] = {MUTANTS(AS_NAME)};
static enum mutant M = NONE;
static void* base;


__attribute__((constructor)) static void choose(void) {
  M = (enum mutant)arrowcert_mutant_setup_or_abort("mutant emulated consumer", NAMES, N_MUTANTS, &base);
}

int32_t arrowcert_plugin_abi_version(void) { return 1; }
const char* arrowcert_plugin_name(void) {
  static char name[128];
  snprintf(name, sizeof name, "arrowcert mutant emulated consumer (%s)", NAMES[M]);
  return name;
}
const char* arrowcert_last_error(void) { return BASE(arrowcert_last_error)(); }
int32_t arrowcert_plugin_supports_device(int32_t t) {
  return BASE(arrowcert_plugin_supports_device)(t);
}
void arrowcert_free(void* p) { BASE(arrowcert_free)(p); }

static struct ArrowcertEmulatedDevice doctored;

static int no_wait(ArrowcertEmuEvent e) {
  (void)e;
  return 0;
}
static int no_stream_wait(ArrowcertEmuStream s, ArrowcertEmuEvent e) {
  (void)s;
  (void)e;
  return 0;
}

/* read-then-wait: the device as the harness attached it, and whether the
 * base consumer's waits are skipped (only inside a device array's consume
 * call; device streams are consumed correctly). */
static struct ArrowcertEmulatedDevice real;
static int skipping;
static ArrowcertEmuEvent pending;
static void (*real_release)(struct ArrowArray*);

static int maybe_wait(ArrowcertEmuEvent e) { return skipping ? 0 : real.event_synchronize(e); }
static int maybe_query(ArrowcertEmuEvent e) { return skipping ? 0 : real.event_query(e); }
static int maybe_stream_wait(ArrowcertEmuStream s, ArrowcertEmuEvent e) {
  return skipping ? 0 : real.stream_wait_event(s, e);
}

/* The base consumer releases the array once it has read it: wait on the
 * event there, before the harness's release runs (and so before the call
 * returns). */
static void wait_then_release(struct ArrowArray* a) {
  if (pending) real.event_synchronize(pending);
  pending = NULL;
  a->release = real_release;
  a->release(a);
}

int arrowcert_plugin_attach_emulated_device(const struct ArrowcertEmulatedDevice* table) {
  if (!table) return EINVAL;
  doctored = *table;
  real = *table;
  if (M == READ_BEFORE_WAIT) {
    doctored.event_synchronize = no_wait;
    doctored.event_query = no_wait;
    doctored.stream_wait_event = no_stream_wait;
  }
  if (M == READ_THEN_WAIT) {
    doctored.event_synchronize = maybe_wait;
    doctored.event_query = maybe_query;
    doctored.stream_wait_event = maybe_stream_wait;
  }
  return BASE(arrowcert_plugin_attach_emulated_device)(&doctored);
}

int arrowcert_consume_device_array(struct ArrowSchema* schema, struct ArrowDeviceArray* array,
                                   uint8_t** out_ipc, int64_t* out_len) {
  if (M == MOVE_WITHOUT_MARKING && array && array->array.release) {
    /* "moved" into our own copy; the source is never marked released */
    struct ArrowDeviceArray copy = *array;
    return BASE(arrowcert_consume_device_array)(schema, &copy, out_ipc, out_len);
  }
  if (M == READ_THEN_WAIT && array && array->array.release && array->sync_event) {
    pending = *(ArrowcertEmuEvent*)array->sync_event;
    real_release = array->array.release;
    array->array.release = wait_then_release;
    skipping = 1;
    int rc = BASE(arrowcert_consume_device_array)(schema, array, out_ipc, out_len);
    skipping = 0;
    /* Not released by the base (it refused before taking it): wait anyway,
     * as the CUDA mutant does before it returns. */
    if (pending) real.event_synchronize(pending);
    pending = NULL;
    return rc;
  }
  return BASE(arrowcert_consume_device_array)(schema, array, out_ipc, out_len);
}
int arrowcert_consume_device_stream(struct ArrowDeviceArrayStream* stream, uint8_t** out_ipc,
                                    int64_t* out_len) {
  return BASE(arrowcert_consume_device_stream)(stream, out_ipc, out_len);
}

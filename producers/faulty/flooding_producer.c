/*
 * A correct producer that prints a lot: every entry point of the base plugin
 * (ARROWCERT_MUTANT_BASE, the reference producer) is forwarded untouched,
 * and each produce call first writes ARROWCERT_FLOOD_MB megabytes (default
 * 100) to stdout and as much to stderr. Certified, it must get the base's
 * verdicts, case by case, with its output bounded and noted
 * (harness/tests/faults.rs; docs/FAULTS.md).
 *
 *   cc -shared -fPIC -I harness/include -o libflooding_producer.so \
 *      producers/faulty/flooding_producer.c -ldl
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arrowcert_emulated_device.h"
#include "arrowcert_mutant.h"
#include "arrowcert_plugin.h"

static void* base;
static const char* const NAMES[] = {"none"};

__attribute__((constructor)) static void load_base(void) {
  arrowcert_mutant_setup_or_abort("flooding producer", NAMES, 1, &base);
}

/* Writes the flood; write errors (the worker's bounded capture file) are
 * ignored, as a careless library would. */
static void flood(void) {
  static char chunk[1 << 16];
  const char* mb = getenv("ARROWCERT_FLOOD_MB");
  long total = (mb ? atol(mb) : 100) << 20;
  memset(chunk, 'x', sizeof chunk);
  chunk[sizeof chunk - 1] = '\n';
  for (long done = 0; done < total; done += (long)sizeof chunk) {
    fwrite(chunk, 1, sizeof chunk, stdout);
    fwrite(chunk, 1, sizeof chunk, stderr);
  }
  fflush(stdout);
}

int32_t arrowcert_plugin_abi_version(void) { return BASE(arrowcert_plugin_abi_version)(); }
const char* arrowcert_plugin_name(void) { return "flooding producer (the reference, printing)"; }
const char* arrowcert_last_error(void) { return BASE(arrowcert_last_error)(); }
int32_t arrowcert_plugin_supports_device(int32_t t) {
  return BASE(arrowcert_plugin_supports_device)(t);
}
void arrowcert_free(void* p) { BASE(arrowcert_free)(p); }
int arrowcert_plugin_attach_emulated_device(const struct ArrowcertEmulatedDevice* table) {
  return BASE(arrowcert_plugin_attach_emulated_device)(table);
}

int arrowcert_produce_schema(const uint8_t* ipc, int64_t len, struct ArrowSchema* out) {
  flood();
  return BASE(arrowcert_produce_schema)(ipc, len, out);
}
int arrowcert_produce_array(const uint8_t* ipc, int64_t len, int64_t batch, int64_t offset,
                            int64_t length, struct ArrowArray* out) {
  flood();
  return BASE(arrowcert_produce_array)(ipc, len, batch, offset, length, out);
}
int arrowcert_produce_device_array(const uint8_t* ipc, int64_t len, int64_t batch, int64_t offset,
                                   int64_t length, int32_t device_type, int64_t device_id,
                                   struct ArrowDeviceArray* out) {
  flood();
  return BASE(arrowcert_produce_device_array)(ipc, len, batch, offset, length, device_type,
                                              device_id, out);
}
int arrowcert_produce_stream(const uint8_t* ipc, int64_t len, struct ArrowArrayStream* out) {
  flood();
  return BASE(arrowcert_produce_stream)(ipc, len, out);
}
int arrowcert_produce_device_stream(const uint8_t* ipc, int64_t len, int32_t device_type,
                                    int64_t device_id, struct ArrowDeviceArrayStream* out) {
  flood();
  return BASE(arrowcert_produce_device_stream)(ipc, len, device_type, device_id, out);
}
int arrowcert_produce_async(const uint8_t* ipc, int64_t len, int32_t device_type,
                            int64_t device_id, struct ArrowAsyncDeviceStreamHandler* handler) {
  flood();
  return BASE(arrowcert_produce_async)(ipc, len, device_type, device_id, handler);
}
int arrowcert_produce_sliced_stream(const uint8_t* ipc, int64_t len, int64_t offset,
                                    int64_t length, struct ArrowArrayStream* out) {
  flood();
  return BASE(arrowcert_produce_sliced_stream)(ipc, len, offset, length, out);
}
int arrowcert_produce_sliced_device_stream(const uint8_t* ipc, int64_t len, int64_t offset,
                                           int64_t length, int32_t device_type,
                                           int64_t device_id,
                                           struct ArrowDeviceArrayStream* out) {
  flood();
  return BASE(arrowcert_produce_sliced_device_stream)(ipc, len, offset, length, device_type,
                                                      device_id, out);
}
int arrowcert_produce_sliced_async(const uint8_t* ipc, int64_t len, int64_t offset,
                                   int64_t length, int32_t device_type, int64_t device_id,
                                   struct ArrowAsyncDeviceStreamHandler* handler) {
  flood();
  return BASE(arrowcert_produce_sliced_async)(ipc, len, offset, length, device_type, device_id,
                                              handler);
}

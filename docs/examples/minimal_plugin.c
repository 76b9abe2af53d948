/*
 * The smallest valid arrowcert plugin: identity, devices and errors.
 *
 * Build:   cc -shared -fPIC -I harness/include -o libminimal.so docs/examples/minimal_plugin.c
 * Inspect: arrowcert inspect ./libminimal.so
 *
 * A real plugin adds the producer and/or consumer entry points of
 * arrowcert_plugin.h around its library's export or import functions; see
 * producers/reference and consumers/reference for complete ones.
 */
#include <errno.h>
#include <stddef.h>

#include "arrowcert_plugin.h"

int32_t arrowcert_plugin_abi_version(void) { return ARROWCERT_PLUGIN_ABI_VERSION; }

const char* arrowcert_plugin_name(void) { return "minimal example 1.0"; }

/* This plugin works on host memory only. */
int32_t arrowcert_plugin_supports_device(int32_t device_type) {
  return device_type == ARROW_DEVICE_CPU;
}

static _Thread_local const char* last_error = NULL;

const char* arrowcert_last_error(void) { return last_error; }

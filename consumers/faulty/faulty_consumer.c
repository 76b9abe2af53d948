/*
 * Fault-injection consumer: one fault per build, chosen with -DFAULT_<NAME>.
 * Faults hit arrowcert_consume_array:
 *   SEGV_CONSUME   write through NULL
 *   HANG_CONSUME   never return
 */
#include <errno.h>
#include <unistd.h>

#include "arrowcert_plugin.h"

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
#endif
  return ENOSYS;
}

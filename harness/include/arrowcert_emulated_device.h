/*
 * The arrowcert emulated device (ARROW_DEVICE_EXT_DEV, device_id 0).
 *
 * A software device that lets the device interface's synchronisation rules
 * be tested without a GPU. A plugin that wants to produce or consume
 * emulated device arrays exports
 *
 *   int arrowcert_plugin_attach_emulated_device(
 *       const struct ArrowcertEmulatedDevice* device);
 *
 * which the harness calls once, right after loading the plugin, with the
 * process's device (0 = accepted). The table stays valid for the life of
 * the process. A plugin without that entry point does not see the device
 * (and should return 0 from arrowcert_plugin_supports_device(12)).
 *
 * Memory. `alloc` returns zeroed, 64-byte aligned memory that the host can
 * address (like CUDA managed memory). Data buffers of an EXT_DEV array
 * must lie in such allocations; the structures (ArrowArray, buffers and
 * children arrays, strings) must not (they are host memory).
 *
 * Streams. Work is enqueued on a stream (`write_async` copies `len` bytes
 * from `src` at the call and writes them to `dst` later) and runs on the
 * stream's worker thread, in order, but ONLY AS FAR AS SOMEONE WAITS FOR
 * IT: `event_synchronize` or `event_query` on an event recorded on the
 * stream, `stream_synchronize`, or another stream's `stream_wait_event` on
 * such an event. Nothing else makes a stream progress. So a write not
 * covered by the event a consumer waits on has not landed when it reads,
 * every time. Freeing an allocation drops writes still pending into it;
 * destroying a stream first runs all its work.
 *
 * Events. THE EVENT TYPE of ARROW_DEVICE_EXT_DEV arrays produced or
 * consumed with this device is `ArrowcertEmuEvent`, and `sync_event`
 * points to one, exactly as CUDA's `sync_event` is a `cudaEvent_t*`:
 *
 *   ArrowcertEmuEvent* slot = ...;     // host memory owned by the producer
 *   device->event_create(slot);
 *   device->event_record(*slot, stream);   // after the writes
 *   array->sync_event = slot;              // NOT *slot
 *
 * A consumer waits with `device->event_synchronize(*(ArrowcertEmuEvent*)
 * array->sync_event)` (or `stream_wait_event` on its own stream) before it
 * reads. An event never recorded is complete. `event_query` returns 0 when
 * complete, EAGAIN when not yet (and lets the stream go on), EINVAL for a
 * handle that is not a live event.
 *
 * Every function returns 0 or an errno value (EINVAL for a bad handle,
 * pointer or range, ENOMEM).
 */
#ifndef ARROWCERT_EMULATED_DEVICE_H
#define ARROWCERT_EMULATED_DEVICE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ARROWCERT_EMULATED_DEVICE_VERSION 1

typedef void* ArrowcertEmuStream;
typedef void* ArrowcertEmuEvent;

struct ArrowcertEmulatedDevice {
  int64_t abi_version; /* ARROWCERT_EMULATED_DEVICE_VERSION */
  int64_t device_id;   /* 0 */
  int (*alloc)(int64_t size, void** out);
  int (*free)(void* ptr);
  int (*stream_create)(ArrowcertEmuStream* out);
  int (*stream_destroy)(ArrowcertEmuStream stream);
  int (*write_async)(ArrowcertEmuStream stream, void* dst, const void* src, int64_t len);
  int (*stream_synchronize)(ArrowcertEmuStream stream);
  int (*stream_wait_event)(ArrowcertEmuStream stream, ArrowcertEmuEvent event);
  int (*event_create)(ArrowcertEmuEvent* out);
  int (*event_destroy)(ArrowcertEmuEvent event);
  int (*event_record)(ArrowcertEmuEvent event, ArrowcertEmuStream stream);
  int (*event_synchronize)(ArrowcertEmuEvent event);
  int (*event_query)(ArrowcertEmuEvent event);
};

#ifdef __cplusplus
}
#endif

#endif /* ARROWCERT_EMULATED_DEVICE_H */

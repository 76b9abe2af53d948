//! `arrowcert_consume_async_start` and `arrowcert_consume_async_finish`.
//!
//! "The plugin initialises a handler the harness allocated, and an opaque
//! token. The harness then acts as the producer and drives the handler from
//! its own threads. finish() waits (at most timeout_ms) until the handler's
//! release was called, and returns what the consumer received."
//! (PLUGIN_ABI.md)

mod handler;
mod state;

use std::ffi::{c_int, c_void};
use std::sync::Arc;
use std::time::Duration;

use arrowcert_sdk::abi::{ArrowAsyncDeviceStreamHandler, ArrowAsyncProducer};
use arrowcert_sdk::{entry, non_null, PluginError};

use crate::output;
use state::State;

/// `int arrowcert_consume_async_start(struct ArrowAsyncDeviceStreamHandler*
/// handler, void** token);`
///
/// Initialises every member of `handler` and writes a token that
/// [`arrowcert_consume_async_finish`] consumes (call it exactly once per
/// token). "The ``ArrowAsyncDeviceStreamHandler`` object should be able to
/// handle callbacks as soon as it is passed to the producer, any
/// initialization should be performed before it is provided."
///
/// # Safety
/// `handler` and `token` must be NULL or valid for writes; the handler must
/// stay valid until the producer calls its release callback.
#[no_mangle]
pub unsafe extern "C" fn arrowcert_consume_async_start(
    handler: *mut ArrowAsyncDeviceStreamHandler,
    token: *mut *mut c_void,
) -> c_int {
    entry(|| {
        let handler = non_null(handler, "handler")?;
        let token = non_null(token, "token")?;
        let state = Arc::new(State::new());
        // SAFETY: non-NULL and valid for writes by the caller's guarantee.
        unsafe { handler::install(handler, Arc::clone(&state)) };
        // SAFETY: as above, for the token.
        unsafe { token.write(Arc::into_raw(state) as *mut c_void) };
        Ok(())
    })
}

/// `int arrowcert_consume_async_finish(void* token, int64_t timeout_ms,
/// uint8_t** out_ipc, int64_t* out_len);`
///
/// Consumes the token, waits at most `timeout_ms` for the handler's release,
/// then returns: the producer's error code and message if on_error came (or
/// this consumer's error if it refused what it was given), `ETIMEDOUT` if
/// release did not come in time, and otherwise one IPC stream of the schema
/// and every batch received.
///
/// # Safety
/// `token` must be NULL or a token from [`arrowcert_consume_async_start`]
/// not passed to finish before; `out_ipc` and `out_len` must be NULL or
/// valid for writes.
#[no_mangle]
pub unsafe extern "C" fn arrowcert_consume_async_finish(
    token: *mut c_void,
    timeout_ms: i64,
    out_ipc: *mut *mut u8,
    out_len: *mut i64,
) -> c_int {
    entry(|| {
        let token = non_null(token, "token")?;
        // SAFETY: the reference start created with Arc::into_raw, given back
        // once (the caller's guarantee); the handler holds its own.
        let state = unsafe { Arc::from_raw(token as *const State) };
        output::check_out(out_ipc, out_len)?;
        let timeout = u64::try_from(timeout_ms)
            .map(Duration::from_millis)
            .map_err(|_| PluginError::invalid(format!("negative timeout_ms {timeout_ms}")))?;
        let outcome = state.wait_released(timeout)?.take_outcome();
        drop(state);
        let (schema, batches) = outcome?;
        // SAFETY: forwarded from the caller.
        unsafe { output::emit(&schema, batches, out_ipc, out_len) }
    })
}

/// `int arrowcert_consume_async_cancel(void* token);` (optional)
///
/// Stops reading, as a user dropping its reader would: calls the producer's
/// `cancel` ("This function signals to the producer that it must
/// *eventually* stop calling ``on_next_task``"). The handler goes on taking
/// whatever still comes (tasks are extracted and kept, on_error recorded)
/// until its release; finish then returns what was received, or the error.
/// A stream whose handler was already released has nothing to cancel.
///
/// # Safety
/// `token` must be NULL or a token from [`arrowcert_consume_async_start`]
/// whose finish has not returned, and the handler's release must not have
/// begun (the producer, "valid at least until just before calling
/// ``release``", is called).
#[no_mangle]
pub unsafe extern "C" fn arrowcert_consume_async_cancel(token: *mut c_void) -> c_int {
    entry(|| {
        let token = non_null(token, "token")?;
        // SAFETY: a token from start whose finish has not returned (the
        // caller's guarantee): the Arc it holds keeps the state alive.
        let state = unsafe { &*(token as *const State) };
        let producer = {
            let mut received = state.lock();
            if received.released {
                return Ok(());
            }
            received.cancelled = true;
            received.producer as *mut ArrowAsyncProducer
        };
        if producer.is_null() {
            return Err(PluginError::invalid(
                "cancel before on_schema: there is no producer to cancel yet",
            ));
        }
        // SAFETY: the producer on_schema was given, live until just before
        // the handler's release, which has not begun (the caller's
        // guarantee).
        let cancel = unsafe { (*producer).cancel }
            .ok_or_else(|| PluginError::invalid("ArrowAsyncProducer.cancel is NULL"))?;
        // SAFETY: as above; "Calls to ``cancel`` must be idempotent and
        // thread-safe", and this thread is in no handler callback.
        unsafe { cancel(producer) };
        Ok(())
    })
}

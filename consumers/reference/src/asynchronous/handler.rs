//! The `ArrowAsyncDeviceStreamHandler` callbacks.
//!
//! The producer calls them from its own threads, one at a time ("All
//! handler functions on the ``ArrowAsyncDeviceStreamHandler`` should only be
//! called in a serialized manner, but are not guaranteed to be called from
//! the same thread every time"). No panic leaves a callback: every body runs
//! under `catch_unwind`, and a panic becomes `EIO`, recorded as the error
//! finish returns.

use std::ffi::{c_char, c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use arrowcert_sdk::abi::ops::{take, Guard, Owned};
use arrowcert_sdk::abi::{
    device, ArrowAsyncDeviceStreamHandler, ArrowAsyncProducer, ArrowAsyncTask, ArrowDeviceArray,
    ArrowSchema,
};
use arrowcert_sdk::{PluginError, PluginResult};

use super::state::{Seen, State};
use crate::input::take_input;
use crate::read::context;
use crate::strings::copy_c_str;
use crate::{device as devices, read};

type Handler = ArrowAsyncDeviceStreamHandler;

/// How many arrays on_schema asks for; each task received asks for one
/// more, so the window stays at this size.
const INITIAL_REQUEST: i64 = 4;

/// Initialises the handler the harness allocated: every member is written
/// ("The consumer allocated struct provides handler callbacks"), `producer`
/// is NULL until the producer populates it, and `private_data` holds one
/// reference to `state`, given back by [`release`].
///
/// # Safety
/// `handler` must be valid for writes of a handler.
pub unsafe fn install(handler: *mut Handler, state: Arc<State>) {
    let private_data = Arc::into_raw(state) as *mut c_void;
    let value = Handler {
        on_schema: Some(on_schema),
        on_next_task: Some(on_next_task),
        on_error: Some(on_error),
        release: Some(release),
        producer: std::ptr::null_mut(),
        private_data,
    };
    // SAFETY: valid for writes by the caller's guarantee; whatever it held
    // before (poison) is overwritten without being read.
    unsafe { handler.write(value) };
}

/// The state of a live handler, `None` once released (or never installed).
///
/// # Safety
/// `handler` must be NULL or a handler [`install`] initialised; the
/// reference is used only during the callback that passed `handler`.
unsafe fn state_of<'a>(handler: *mut Handler) -> Option<&'a State> {
    if handler.is_null() {
        return None;
    }
    // SAFETY: a handler install initialised, by the caller's guarantee.
    let private_data = unsafe { (*handler).private_data } as *const State;
    // SAFETY: non-NULL private_data is the Arc reference install stored,
    // which release gives back only after clearing private_data; the
    // producer calls no other callback concurrently with release.
    unsafe { private_data.as_ref() }
}

/// Runs a callback body: 0 on success; otherwise the error is recorded for
/// finish and its code returned (never 0, so the producer sees a refusal).
fn guarded(state: &State, body: impl FnOnce() -> PluginResult) -> c_int {
    let error = match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => return 0,
        Ok(Err(e)) => e,
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "panic".into());
            PluginError::io(format!(
                "the consumer panicked in a handler callback: {what}"
            ))
        }
    };
    let code = if error.code == 0 {
        libc::EIO
    } else {
        error.code
    };
    state.lock().fail(error);
    code
}

/// The producer the handler was given, "populated by the producer before
/// calling the ``on_schema`` callback".
///
/// # Safety
/// `handler` is a live handler.
unsafe fn producer_of(handler: *mut Handler) -> PluginResult<*mut ArrowAsyncProducer> {
    // SAFETY: live handler, by the caller's guarantee.
    let producer = unsafe { (*handler).producer };
    if producer.is_null() {
        Err(PluginError::invalid(
            "handler->producer is NULL; the producer must populate it before on_schema",
        ))
    } else {
        Ok(producer)
    }
}

/// Asks the producer for `n` more arrays. Never called with the state locked.
///
/// # Safety
/// `producer` is the live producer of the handler being called.
unsafe fn request(producer: *mut ArrowAsyncProducer, n: i64) -> PluginResult {
    // SAFETY: live producer ("MUST remain valid at least until just before
    // calling ``release`` on the stream handler object").
    let f = unsafe { (*producer).request }
        .ok_or_else(|| PluginError::invalid("ArrowAsyncProducer.request is NULL"))?;
    // SAFETY: "It *MUST* be valid to call this synchronously from within
    // ``on_next_task`` or ``on_schema``", and n > 0.
    unsafe { f(producer, n) };
    Ok(())
}

/// `on_schema`: moves and imports the schema, then starts the flow with
/// `request`.
///
/// # Safety
/// `handler` is the live ArrowAsyncDeviceStreamHandler this callback was installed in,
/// called by a producer as the async device stream interface says (the other arguments as
/// it gives them).
unsafe extern "C" fn on_schema(handler: *mut Handler, schema: *mut ArrowSchema) -> c_int {
    // SAFETY: the producer passes the handler this plugin initialised.
    let Some(state) = (unsafe { state_of(handler) }) else {
        // A released handler: take the schema so it is not leaked.
        // SAFETY: the schema the producer passed, NULL or valid.
        drop(unsafe { take_input(schema, "the schema") });
        return libc::EINVAL;
    };
    // SAFETY: live handler and the producer's schema pointer.
    guarded(state, || unsafe { receive_schema(handler, state, schema) })
}

/// # Safety
/// `handler` is live; `schema` is NULL or a schema the producer hands over.
unsafe fn receive_schema(
    handler: *mut Handler,
    state: &State,
    schema: *mut ArrowSchema,
) -> PluginResult {
    let repeated = {
        let mut received = state.lock();
        received.last_seen = Seen::Schema;
        received.schema.is_some()
    };
    // "The ``ArrowSchema`` passed to the ``on_schema`` callback must be
    // released independently, with the object itself needing to be moved to
    // a consumer owned ``ArrowSchema`` object."
    // SAFETY: forwarded from the caller.
    let mut owned = unsafe { take_input(schema, "the on_schema schema") }?;
    if repeated {
        // "this will always get called exactly once"
        return Err(PluginError::invalid("on_schema called a second time"));
    }
    // SAFETY: live handler.
    let producer = unsafe { producer_of(handler) }?;
    // SAFETY: a live producer, populated before on_schema.
    let device_type = unsafe { (*producer).device_type };
    devices::require_cpu(device_type, "the async producer")?;
    // SAFETY: a live schema that follows the C data interface.
    let imported = unsafe { read::import_schema(take(&mut *owned)) }?;
    {
        let mut received = state.lock();
        received.schema = Some(imported);
        received.producer = producer as usize;
    }
    // "The :c:member:`ArrowAsyncProducer.request` callback must be called to
    // start receiving calls to this handler."
    // SAFETY: the live producer; the state is not locked.
    unsafe { request(producer, INITIAL_REQUEST) }
}

/// `on_next_task`: extracts the task's array (exactly once), imports and
/// validates it, keeps the batch, and asks for one more.
///
/// # Safety
/// `handler` is the live ArrowAsyncDeviceStreamHandler this callback was installed in,
/// called by a producer as the async device stream interface says (the other arguments as
/// it gives them).
unsafe extern "C" fn on_next_task(
    handler: *mut Handler,
    task: *mut ArrowAsyncTask,
    _metadata: *const c_char,
) -> c_int {
    // The metadata is not kept, so never read after the call: "If not
    // ``NULL``, the lifetime is only the scope of the call to this function."
    // SAFETY: the producer passes the handler this plugin initialised.
    let Some(state) = (unsafe { state_of(handler) }) else {
        // A released handler: still let the task clean up.
        // SAFETY: the producer's task, NULL or valid during this call.
        unsafe { discard(task) };
        return libc::EINVAL;
    };
    // SAFETY: live handler; the task is valid during this call.
    guarded(state, || unsafe { receive_task(handler, state, task) })
}

/// Calls `extract_data(task, NULL)`: "If the consumer does not care about
/// the data that is owned by this task, it must still call ``extract_data``
/// so that the producer can perform any required cleanup."
///
/// # Safety
/// `task` is NULL or valid during the current on_next_task call, and its
/// extract_data has not been called.
unsafe fn discard(task: *mut ArrowAsyncTask) {
    if task.is_null() {
        return;
    }
    // SAFETY: valid during this call, by the caller's guarantee.
    if let Some(extract) = unsafe { (*task).extract_data } {
        // SAFETY: the one call to extract_data for this task.
        unsafe { extract(task, std::ptr::null_mut()) };
    }
}

/// # Safety
/// `handler` is live; `task` is NULL or valid during this call.
unsafe fn receive_task(
    handler: *mut Handler,
    state: &State,
    task: *mut ArrowAsyncTask,
) -> PluginResult {
    if task.is_null() {
        // "The producer signals the end of the stream by passing ``NULL``
        // for the ``ArrowAsyncTask`` pointer"
        let mut received = state.lock();
        received.last_seen = Seen::EndOfStream;
        received.end_of_stream = true;
        return Ok(());
    }
    let (index, schema, failed) = {
        let mut received = state.lock();
        received.tasks += 1;
        received.last_seen = Seen::Task(received.tasks);
        (
            received.tasks,
            received.schema.clone(),
            received.failed().cloned(),
        )
    };
    let place = format!("task #{index}");
    let schema = match (schema, failed) {
        (Some(schema), None) => schema,
        // After a refusal the producer should only release; a task that
        // still comes is cleaned up, and refused again.
        (_, Some(earlier)) => {
            // SAFETY: valid during this call; extract_data not yet called.
            unsafe { discard(task) };
            return Err(context(earlier, place));
        }
        (None, None) => {
            // SAFETY: as above.
            unsafe { discard(task) };
            return Err(PluginError::invalid(format!(
                "{place}: on_next_task came before on_schema"
            )));
        }
    };

    // SAFETY: "This task object is only valid during the lifetime of this
    // function call": it is used here and nowhere else.
    let extract = unsafe { (*task).extract_data }
        .ok_or_else(|| PluginError::invalid(format!("{place}: extract_data is NULL")))?;
    let mut out = Guard::<ArrowDeviceArray>::zeroed();
    // SAFETY: "It is only valid to call this method exactly once": this is
    // the one call for this task; `out` is valid for writes, and
    // "Ownership of the Array is given to the pointer passed in".
    let rc = unsafe { extract(task, out.as_mut_ptr()) };
    if rc != 0 {
        // A failed extract hands nothing over. "If a non-zero value is
        // returned from this, it should be followed only by the producer
        // calling the ``on_error`` callback": this callback returns 0 so that
        // on_error can come, and stops asking for more.
        out.mark_released();
        state.lock().fail_provisionally(PluginError::new(
            rc,
            format!("{place}: extract_data failed with error {rc}, and on_error did not follow"),
        ));
        return Ok(());
    }
    if out.is_released() {
        return Err(PluginError::invalid(format!(
            "{place}: extract_data returned 0 but left the array released"
        )));
    }
    // on_schema accepted only a CPU producer: "All ``ArrowDeviceArray``
    // structs that are produced by this producer should have the same device
    // type as is set here." CPU has no event to wait on.
    devices::require_declared(device::CPU, out.device_type, &place)?;
    let array = take(&mut out.array);
    // SAFETY: a live array the producer handed over for this schema.
    let batch = unsafe { read::read_batch(&schema, array) }.map_err(|e| context(e, &place))?;
    let cancelled = {
        let mut received = state.lock();
        received.batches.push(batch);
        received.cancelled
    };
    if cancelled {
        // A task that came after this consumer's cancel ("a consumer *MUST*
        // be prepared to receive one or more calls to ``on_next_task`` ...
        // even after calling ``cancel``"): taken like any other, and no
        // more are asked for.
        return Ok(());
    }
    // Keep the window: one array received, one more requested.
    // SAFETY: live handler; then its live producer, the state not locked.
    unsafe { request(producer_of(handler)?, 1) }
}

/// `on_error`: copies the code and message for finish. "This callback *MUST
/// NOT* call any methods of an ``ArrowAsyncProducer`` object", and it does
/// not.
///
/// # Safety
/// `handler` is the live ArrowAsyncDeviceStreamHandler this callback was installed in,
/// called by a producer as the async device stream interface says (the other arguments as
/// it gives them).
unsafe extern "C" fn on_error(
    handler: *mut Handler,
    code: c_int,
    message: *const c_char,
    _metadata: *const c_char,
) {
    // SAFETY: the producer passes the handler this plugin initialised.
    let Some(state) = (unsafe { state_of(handler) }) else {
        return;
    };
    // Nothing to report a panic to: a panic only loses the message.
    let _ = catch_unwind(AssertUnwindSafe(|| {
        // "If the message and metadata are not ``NULL``, their lifetime is
        // only valid during the scope of this call. A consumer who wants to
        // maintain these values past the return of this function *MUST* copy
        // the values themselves." The metadata is not kept.
        // SAFETY: NULL or a NUL-terminated string valid during this call.
        let message = unsafe { copy_c_str(message) };
        let error = match (code, message) {
            (0, m) => PluginError::io(format!(
                "the producer called on_error with code 0 (not an errno value): {}",
                m.as_deref().unwrap_or("no message")
            )),
            (code, Some(m)) => PluginError::new(code, m),
            (code, None) => PluginError::new(
                code,
                format!("the producer called on_error with error {code} and no message"),
            ),
        };
        let mut received = state.lock();
        received.last_seen = Seen::Error(code);
        received.fail(error);
    }));
}

/// `release`: marks the handler released, wakes finish, and gives back the
/// handler's reference to the state.
///
/// # Safety
/// `handler` is the live ArrowAsyncDeviceStreamHandler this callback was installed in,
/// called by a producer as the async device stream interface says (the other arguments as
/// it gives them).
unsafe extern "C" fn release(handler: *mut Handler) {
    if handler.is_null() {
        return;
    }
    // SAFETY: the handler this plugin initialised, valid during this call.
    let private_data = unsafe { (*handler).private_data } as *const State;
    if private_data.is_null() {
        return;
    }
    // "The release callback MUST mark the structure as released, by setting
    // its ``release`` member to NULL" (the handler's lifetime is "managed
    // using a release callback with similar usage as in C data interface").
    // SAFETY: as above; no callback runs concurrently with release.
    unsafe {
        (*handler).private_data = std::ptr::null_mut();
        (*handler).release = None;
    }
    // SAFETY: private_data is the reference install created with
    // Arc::into_raw, cleared above so it is given back exactly once.
    let state = unsafe { Arc::from_raw(private_data) };
    let _ = catch_unwind(AssertUnwindSafe(move || {
        state.mark_released();
        // If finish already ran, this drops the last reference.
        drop(state);
    }));
}

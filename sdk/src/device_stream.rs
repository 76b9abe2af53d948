//! An `ArrowDeviceArrayStream` (CDeviceDataInterface.rst, "Device Stream
//! Interface") over any source of chunks: the callbacks, the last-error
//! bookkeeping and the release, written once for every plugin that exports
//! device streams (the reference producer's CPU and emulated streams, the
//! CUDA plugins' device streams).
//!
//! Every pointer the structure holds points to the heap (`private_data` is
//! a `Box` owning the source, the callbacks are static functions), never
//! into the structure itself, so the consumer may move it bitwise. What the
//! source hands out must outlive the stream: "The data returned by the
//! get_schema and get_next callbacks must be released independently. Their
//! lifetimes are not tied to that of ArrowDeviceArrayStream."

use std::ffi::{c_char, c_int, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

use super::{non_null, panic_message, PluginError, PluginResult};
use crate::abi::{ArrowDeviceArray, ArrowDeviceArrayStream, ArrowSchema};

/// What a device stream exports: its device type, its schema (any number of
/// times) and its chunks in order.
pub trait DeviceStreamSource: 'static {
    /// The stream's `device_type`: "All ArrowDeviceArrays that are produced
    /// by this stream should have the same device type as is set here."
    fn device_type(&self) -> i32;

    /// A fresh export of the schema, for each `get_schema` call.
    fn schema(&mut self) -> PluginResult<ArrowSchema>;

    /// Writes the next chunk into `out`, or a released (all-zero) device
    /// array once every chunk was handed out, and on every call after that:
    /// "If the embedded ArrowDeviceArray.array is released, then the end of
    /// the stream has been reached."
    ///
    /// # Safety
    /// `out` is non-NULL and valid for writes of one `ArrowDeviceArray`;
    /// nothing there is read or dropped.
    unsafe fn next(&mut self, out: *mut ArrowDeviceArray) -> PluginResult;

    /// Who the source is, for the message of a panic ("the CUDA producer").
    fn name(&self) -> &str;
}

/// What `private_data` owns: the source and the message of the last failed
/// call.
struct State<S> {
    source: S,
    last_error: Option<CString>,
}

/// Initialises `out` as a live stream owning `source`, overwriting the whole
/// structure (padding included) without reading what was there.
///
/// # Safety
/// `out` must be valid for writes of one `ArrowDeviceArrayStream` and aligned.
pub unsafe fn write_device_stream<S: DeviceStreamSource>(
    out: *mut ArrowDeviceArrayStream,
    source: S,
) {
    let device_type = source.device_type();
    let private_data = Box::into_raw(Box::new(State {
        source,
        last_error: None,
    }))
    .cast();
    // SAFETY: `out` is valid for writes (caller); each write targets a member
    // through a raw place, so the poisoned contents are never read or dropped.
    unsafe {
        std::ptr::write_bytes(out, 0, 1);
        (&raw mut (*out).device_type).write(device_type);
        (&raw mut (*out).get_schema).write(Some(get_schema::<S>));
        (&raw mut (*out).get_next).write(Some(get_next::<S>));
        (&raw mut (*out).get_last_error).write(Some(get_last_error::<S>));
        (&raw mut (*out).release).write(Some(release::<S>));
        (&raw mut (*out).private_data).write(private_data);
    }
}

/// The state of a live stream, `None` if `stream` is NULL or released.
///
/// # Safety
/// `stream` must be NULL or point to a stream written by
/// [`write_device_stream`] with the same `S` (possibly moved), not accessed
/// concurrently ("The stream source is not assumed to be thread-safe").
unsafe fn state_of<'a, S>(stream: *mut ArrowDeviceArrayStream) -> Option<&'a mut State<S>> {
    if stream.is_null() {
        return None;
    }
    // SAFETY: non-NULL and valid for reads (caller).
    let private = unsafe { (*stream).private_data }.cast::<State<S>>();
    // SAFETY: a live stream's private_data is the Box written by
    // write_device_stream; the caller guarantees exclusive access.
    (!private.is_null()).then(|| unsafe { &mut *private })
}

/// Runs one callback body against the stream's source: records the error
/// message (or clears it on success, so `get_last_error` returns NULL unless
/// the last call failed) and turns panics into `EIO`.
///
/// # Safety
/// As [`state_of`].
unsafe fn call<S: DeviceStreamSource>(
    stream: *mut ArrowDeviceArrayStream,
    body: impl FnOnce(&mut S) -> PluginResult,
) -> c_int {
    // SAFETY: forwarded from the caller.
    let Some(state) = (unsafe { state_of::<S>(stream) }) else {
        // Calling on a released stream is the consumer's error ("This
        // callback must NOT be called on a released ArrowDeviceArrayStream");
        // there is nowhere to store a message.
        return libc::EINVAL;
    };
    let source = &mut state.source;
    let result = catch_unwind(AssertUnwindSafe(|| body(&mut *source))).unwrap_or_else(|panic| {
        Err(PluginError::io(format!(
            "{} panicked: {}",
            source.name(),
            panic_message(&*panic)
        )))
    });
    match result {
        Ok(()) => {
            state.last_error = None;
            0
        }
        Err(e) => {
            state.last_error = CString::new(e.message.replace('\0', "\\0")).ok();
            if e.code == 0 {
                libc::EIO
            } else {
                e.code
            }
        }
    }
}

/// `get_schema`: may be called any number of times; each call hands out a
/// new schema the consumer releases on its own.
///
/// # Safety
/// `stream` is the live stream this callback was installed in, called as the
/// C stream interface lets a consumer call it, with `out` valid for writes of
/// one ArrowSchema.
unsafe extern "C" fn get_schema<S: DeviceStreamSource>(
    stream: *mut ArrowDeviceArrayStream,
    out: *mut ArrowSchema,
) -> c_int {
    let body = |source: &mut S| {
        let out = non_null(out, "get_schema out")?;
        let schema = source.schema()?;
        // SAFETY: `out` is non-NULL; the consumer passes a structure it owns,
        // valid for writes; nothing is read or dropped there.
        unsafe { out.write(schema) };
        Ok(())
    };
    // SAFETY: the consumer calls this on the stream it was handed.
    unsafe { call::<S>(stream, body) }
}

/// `get_next`: the next chunk, or a released device array at the end.
///
/// # Safety
/// `stream` is the live stream this callback was installed in, called as the
/// C stream interface lets a consumer call it, with `out` valid for writes of
/// one ArrowDeviceArray.
unsafe extern "C" fn get_next<S: DeviceStreamSource>(
    stream: *mut ArrowDeviceArrayStream,
    out: *mut ArrowDeviceArray,
) -> c_int {
    let body = |source: &mut S| {
        let out = non_null(out, "get_next out")?;
        // SAFETY: `out` is non-NULL and valid for writes (consumer).
        unsafe { source.next(out) }
    };
    // SAFETY: the consumer calls this on the stream it was handed.
    unsafe { call::<S>(stream, body) }
}

/// `get_last_error`: the message of the last call if it failed, else NULL.
/// "The returned pointer is only guaranteed to be valid until the next call
/// of one of the stream's callbacks": the next call replaces or clears it.
///
/// # Safety
/// `stream` is the live stream this callback was installed in, called as the
/// C stream interface lets a consumer call it (after a failed call).
unsafe extern "C" fn get_last_error<S: DeviceStreamSource>(
    stream: *mut ArrowDeviceArrayStream,
) -> *const c_char {
    // SAFETY: the consumer calls this on the stream it was handed.
    match unsafe { state_of::<S>(stream) } {
        Some(state) => state
            .last_error
            .as_ref()
            .map_or(std::ptr::null(), |m| m.as_ptr()),
        None => std::ptr::null(),
    }
}

/// `release`: frees the private data and marks the stream released. What
/// the stream handed out earlier stays valid (the source's exports own
/// their memory).
///
/// # Safety
/// `stream` is the live stream this callback was installed in, called as the
/// C stream interface lets a consumer call it.
unsafe extern "C" fn release<S: DeviceStreamSource>(stream: *mut ArrowDeviceArrayStream) {
    if stream.is_null() {
        return;
    }
    // SAFETY: non-NULL; the consumer owns the stream and calls release once,
    // from one thread.
    unsafe {
        let private = (*stream).private_data.cast::<State<S>>();
        if !private.is_null() {
            // Dropping the source should not panic, but a panic must not
            // unwind into the consumer whatever happens.
            let _ = catch_unwind(AssertUnwindSafe(|| drop(Box::from_raw(private))));
        }
        (*stream).private_data = std::ptr::null_mut();
        // CDataInterface.rst ("Released structure"): the release callback
        // "MUST mark the structure as released" by setting release to NULL.
        (*stream).release = None;
    }
}

//! This crate's own `ArrowDeviceArrayStream` (CDeviceDataInterface.rst,
//! "Device Stream Interface"), over the batches of a decoded IPC stream.
//!
//! Every pointer the structure holds points to the heap (`private_data` is a
//! `Box` of [`StreamState`], the callbacks are static functions), never into
//! the structure itself, so the consumer may move it bitwise. The arrays and
//! schemas it hands out are arrow-rs exports that own references to the
//! batches' buffers, so they outlive the stream: "The data returned by the
//! get_schema and get_next callbacks must be released independently. Their
//! lifetimes are not tied to that of ArrowDeviceArrayStream."

use std::ffi::{c_char, c_int, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use arrowcert::abi::arrow_rs::{export_batch, export_schema};
use arrowcert::abi::{device, ArrowDeviceArray, ArrowDeviceArrayStream, ArrowSchema};
use arrowcert::sdk::{self, ipc::Decoded, PluginError, PluginResult};

use crate::device::{target, write_end_of_stream, write_on, Target};
use crate::guard::panic_message;
use crate::input;

/// What `private_data` owns: the batches, the position in them and the
/// message of the last failed call.
pub struct StreamState {
    target: Target,
    schema: SchemaRef,
    batches: Vec<RecordBatch>,
    cursor: usize,
    last_error: Option<CString>,
}

impl StreamState {
    pub fn new(decoded: Decoded, target: Target) -> Self {
        StreamState {
            target,
            schema: decoded.schema,
            batches: decoded.batches,
            cursor: 0,
            last_error: None,
        }
    }

    /// A fresh export of the schema, for each `get_schema` call.
    fn next_schema(&self) -> PluginResult<ArrowSchema> {
        Ok(export_schema(&self.schema)?)
    }

    /// The next batch, `None` once every batch was handed out (and on every
    /// call after that).
    fn next_batch(&mut self) -> Option<&RecordBatch> {
        let batch = self.batches.get(self.cursor)?;
        self.cursor += 1;
        Some(batch)
    }
}

/// Exports every batch of the IPC stream as a CPU device stream.
///
/// # Safety
/// `ipc` must point to `ipc_len` readable bytes (or `ipc_len` be 0); `out`
/// must be NULL or valid for writes of one `ArrowDeviceArrayStream`.
#[no_mangle]
pub unsafe extern "C" fn arrowcert_produce_device_stream(
    ipc: *const u8,
    ipc_len: i64,
    device_type: i32,
    device_id: i64,
    out: *mut ArrowDeviceArrayStream,
) -> c_int {
    sdk::entry(|| {
        let out = sdk::non_null(out, "out")?;
        let target = target(device_type, device_id)?;
        // SAFETY: forwarded from the caller.
        let decoded = unsafe { input::decode(ipc, ipc_len) }?;
        input::check_exportable(&decoded.schema)?;
        // SAFETY: `out` is non-NULL and valid for writes (caller).
        unsafe { write_stream(out, StreamState::new(decoded, target)) };
        Ok(())
    })
}

/// Initialises `out` as a live stream owning `state`, overwriting the whole
/// structure (padding included) without reading what was there.
///
/// # Safety
/// `out` must be valid for writes of one `ArrowDeviceArrayStream` and aligned.
pub unsafe fn write_stream(out: *mut ArrowDeviceArrayStream, state: StreamState) {
    let device_type = match state.target {
        Target::Cpu => device::CPU,
        Target::Emulated => device::EXT_DEV,
    };
    let private_data = Box::into_raw(Box::new(state)).cast();
    // SAFETY: `out` is valid for writes (caller); each write targets a member
    // through a raw place, so the poisoned contents are never read or dropped.
    unsafe {
        std::ptr::write_bytes(out, 0, 1);
        // "All ArrowDeviceArrays that are produced by this stream should have
        // the same device type as is set here."
        (&raw mut (*out).device_type).write(device_type);
        (&raw mut (*out).get_schema).write(Some(get_schema));
        (&raw mut (*out).get_next).write(Some(get_next));
        (&raw mut (*out).get_last_error).write(Some(get_last_error));
        (&raw mut (*out).release).write(Some(release));
        (&raw mut (*out).private_data).write(private_data);
    }
}

/// The state of a live stream, `None` if `stream` is NULL or released.
///
/// # Safety
/// `stream` must be NULL or point to a stream written by [`write_stream`]
/// (possibly moved), not accessed concurrently ("The stream source is not
/// assumed to be thread-safe").
unsafe fn state_of<'a>(stream: *mut ArrowDeviceArrayStream) -> Option<&'a mut StreamState> {
    if stream.is_null() {
        return None;
    }
    // SAFETY: non-NULL and valid for reads (caller).
    let private = unsafe { (*stream).private_data }.cast::<StreamState>();
    // SAFETY: a live stream's private_data is the Box written by
    // write_stream; the caller guarantees exclusive access.
    (!private.is_null()).then(|| unsafe { &mut *private })
}

/// Runs one callback body against the stream's state: records the error
/// message (or clears it on success, so `get_last_error` returns NULL unless
/// the last call failed) and turns panics into `EIO`.
///
/// # Safety
/// As [`state_of`].
unsafe fn call(
    stream: *mut ArrowDeviceArrayStream,
    body: impl FnOnce(&mut StreamState) -> PluginResult,
) -> c_int {
    // SAFETY: forwarded from the caller.
    let Some(state) = (unsafe { state_of(stream) }) else {
        // Calling on a released stream is the consumer's error ("This callback
        // must NOT be called on a released ArrowDeviceArrayStream"); there is
        // nowhere to store a message.
        return libc::EINVAL;
    };
    let result = catch_unwind(AssertUnwindSafe(|| body(&mut *state))).unwrap_or_else(|panic| {
        Err(PluginError::io(format!(
            "reference producer panicked: {}",
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
/// `stream` is the live stream this callback was installed in, called as the C
/// stream interface lets a consumer call it, with `out` valid for writes of one
/// ArrowSchema.
unsafe extern "C" fn get_schema(
    stream: *mut ArrowDeviceArrayStream,
    out: *mut ArrowSchema,
) -> c_int {
    let body = |state: &mut StreamState| {
        let out = sdk::non_null(out, "get_schema out")?;
        let schema = state.next_schema()?;
        // SAFETY: `out` is non-NULL; the consumer passes a structure it owns,
        // valid for writes; nothing is read or dropped there.
        unsafe { out.write(schema) };
        Ok(())
    };
    // SAFETY: the consumer calls this on the stream it was handed.
    unsafe { call(stream, body) }
}

/// `get_next`: the next batch as a CPU device array; at the end a released
/// (all-zero) device array, again on every later call. CDeviceDataInterface.rst:
/// "If the embedded ArrowDeviceArray.array is released, then the end of the
/// stream has been reached."
///
/// # Safety
/// `stream` is the live stream this callback was installed in, called as the C
/// stream interface lets a consumer call it, with `out` valid for writes of one chunk of
/// the stream's kind.
unsafe extern "C" fn get_next(
    stream: *mut ArrowDeviceArrayStream,
    out: *mut ArrowDeviceArray,
) -> c_int {
    let body = |state: &mut StreamState| {
        let out = sdk::non_null(out, "get_next out")?;
        let (target, schema) = (state.target, state.schema.clone());
        match state.next_batch() {
            // SAFETY: `out` is non-NULL and valid for writes (consumer).
            Some(batch) => unsafe { write_on(target, &schema, out, export_batch(batch))? },
            // SAFETY: as above.
            None => unsafe { write_end_of_stream(out) },
        }
        Ok(())
    };
    // SAFETY: the consumer calls this on the stream it was handed.
    unsafe { call(stream, body) }
}

/// `get_last_error`: the message of the last call if it failed, else NULL.
/// "The returned pointer is only guaranteed to be valid until the next call
/// of one of the stream's callbacks": the next call replaces or clears it.
///
/// # Safety
/// `stream` is the live stream this callback was installed in, called as the C
/// stream interface lets a consumer call it (after a failed call).
unsafe extern "C" fn get_last_error(stream: *mut ArrowDeviceArrayStream) -> *const c_char {
    // SAFETY: the consumer calls this on the stream it was handed.
    match unsafe { state_of(stream) } {
        Some(state) => state
            .last_error
            .as_ref()
            .map_or(std::ptr::null(), |m| m.as_ptr()),
        None => std::ptr::null(),
    }
}

/// `release`: frees the private data and marks the stream released. Arrays
/// and schemas handed out earlier stay valid: they hold their own references
/// to the buffers.
///
/// # Safety
/// `stream` is the live stream this callback was installed in, called as the C
/// stream interface lets a consumer call it.
unsafe extern "C" fn release(stream: *mut ArrowDeviceArrayStream) {
    if stream.is_null() {
        return;
    }
    // SAFETY: non-NULL; the consumer owns the stream and calls release once,
    // from one thread.
    unsafe {
        let private = (*stream).private_data.cast::<StreamState>();
        if !private.is_null() {
            // Dropping batches and strings does not panic, but a panic must
            // not unwind into the consumer whatever happens.
            let _ = catch_unwind(AssertUnwindSafe(|| drop(Box::from_raw(private))));
        }
        (*stream).private_data = std::ptr::null_mut();
        // CDataInterface.rst ("Released structure"): the release callback
        // "MUST mark the structure as released" by setting release to NULL.
        (*stream).release = None;
    }
}

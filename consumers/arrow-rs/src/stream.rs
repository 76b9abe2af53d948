//! `arrowcert_consume_stream` (arrow-rs's `RecordBatchStreamReader`, the
//! 60.1.0 name of `ArrowArrayStreamReader`) and
//! `arrowcert_consume_device_stream` (the same reader over the adapter's
//! C stream wrapper of the device stream).

use std::ffi::{c_char, c_int, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

use arrow_array::ffi::FFI_ArrowArray;
use arrow_array::ffi_stream::{FFI_ArrowArrayStream, RecordBatchStreamReader};
use arrow_array::{RecordBatch, RecordBatchReader};
use arrow_schema::ffi::FFI_ArrowSchema;
use arrow_schema::ArrowError;
use arrowcert_sdk::abi::ops::{take, Owned};
use arrowcert_sdk::abi::{
    device, ArrowArrayStream, ArrowDeviceArray, ArrowDeviceArrayStream, Plain,
};
use arrowcert_sdk::{entry, PluginError};

use crate::{check_out, emit, validate};

/// arrow-rs's stream errors carry the producer's errno only in their text
/// ("Cannot get next batch from input stream. Error code: N. Producer
/// error: ..."); the contract wants the code back, so it is parsed out.
fn stream_error(e: ArrowError) -> PluginError {
    let message = e.to_string();
    let code = message
        .split_once("Error code: ")
        .and_then(|(_, rest)| {
            let digits: String = rest
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '-')
                .collect();
            digits.parse::<c_int>().ok()
        })
        .filter(|&code| code != 0)
        .unwrap_or(libc::EINVAL);
    PluginError::new(code, message)
}

/// Reads a stream to the end with arrow-rs's reader (which moved it out of
/// `raw`), validates every batch, drops the reader (arrow-rs's release) and
/// hands back what was read.
///
/// # Safety
/// `raw` is valid for reads and writes and holds a C stream;
/// `out_ipc`/`out_len` are valid for writes.
unsafe fn read_all(
    raw: *mut FFI_ArrowArrayStream,
    out_ipc: *mut *mut u8,
    out_len: *mut i64,
) -> Result<(), PluginError> {
    // SAFETY: forwarded from the caller.
    let reader = unsafe { RecordBatchStreamReader::from_raw(raw) }.map_err(stream_error)?;
    let schema = reader.schema();
    let batches = reader
        .collect::<Result<Vec<RecordBatch>, _>>()
        .map_err(stream_error)?;
    for batch in &batches {
        validate(batch)?;
    }
    // SAFETY: forwarded from the caller.
    unsafe { emit(&schema, batches, out_ipc, out_len) }
}

/// `arrowcert_consume_stream`.
///
/// # Safety
/// `stream` must be NULL or valid for reads and writes and hold a stream
/// that follows the C stream interface; `out_ipc` and `out_len` must be
/// NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn arrowcert_consume_stream(
    stream: *mut ArrowArrayStream,
    out_ipc: *mut *mut u8,
    out_len: *mut i64,
) -> c_int {
    entry(|| {
        if stream.is_null() {
            return Err(PluginError::invalid("stream is NULL"));
        }
        // Moved by arrow-rs before the out-parameters are checked, so the
        // stream is released whatever happens.
        // SAFETY: `struct ArrowArrayStream` is `FFI_ArrowArrayStream`.
        let mut moved = unsafe { FFI_ArrowArrayStream::from_raw(stream.cast()) };
        check_out(out_ipc, out_len)?;
        // SAFETY: `moved` is a local C stream; out-parameters checked.
        unsafe { read_all(&mut moved, out_ipc, out_len) }
    })
}

/// The adapter's C stream wrapper of a device stream.
struct Unwrap {
    device: ArrowDeviceArrayStream,
    /// The wrapper's own error (a refused chunk); `None` forwards
    /// `get_last_error` to the device stream.
    own_error: Option<CString>,
}

/// `arrowcert_consume_device_stream`.
///
/// # Safety
/// As [`arrowcert_consume_stream`], for a device stream.
#[no_mangle]
pub unsafe extern "C" fn arrowcert_consume_device_stream(
    stream: *mut ArrowDeviceArrayStream,
    out_ipc: *mut *mut u8,
    out_len: *mut i64,
) -> c_int {
    entry(|| {
        if stream.is_null() {
            return Err(PluginError::invalid("stream is NULL"));
        }
        // SAFETY: non-NULL, valid for reads and writes (caller).
        let source = unsafe { &mut *stream };
        if source.is_released() {
            return Err(PluginError::invalid(
                "the device stream is already released",
            ));
        }
        // Bitwise move, the source marked released.
        let device = take(source);
        let device_type = device.device_type;
        let state = Box::new(Unwrap {
            device,
            own_error: None,
        });
        // SAFETY: the callbacks implement the C stream interface over the
        // device stream `private_data` owns; `release` frees it once.
        let mut wrapper = unsafe {
            FFI_ArrowArrayStream::new_unchecked(
                Some(get_schema),
                Some(get_next),
                Some(get_last_error),
                Some(release),
                Box::into_raw(state).cast(),
            )
        };
        if device_type != device::CPU {
            drop(wrapper);
            return Err(PluginError::unsupported(format!(
                "device stream on device_type {device_type}: arrow-rs reads CPU memory only"
            )));
        }
        check_out(out_ipc, out_len)?;
        // SAFETY: a live local C stream; out-parameters checked.
        unsafe { read_all(&mut wrapper, out_ipc, out_len) }
    })
}

/// # Safety
/// `stream` is a wrapper made by [`arrowcert_consume_device_stream`].
unsafe fn state<'a>(stream: *mut FFI_ArrowArrayStream) -> Option<&'a mut Unwrap> {
    if stream.is_null() {
        return None;
    }
    // SAFETY: non-NULL (checked), a live wrapper (caller).
    unsafe { (*stream).private_data().cast::<Unwrap>().as_mut() }
}

/// # Safety
/// `stream` is the live stream this callback was installed in, called as the C
/// stream interface lets a consumer call it, with `out` valid for writes of one
/// ArrowSchema.
unsafe extern "C" fn get_schema(
    stream: *mut FFI_ArrowArrayStream,
    out: *mut FFI_ArrowSchema,
) -> c_int {
    catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: arrow-rs calls this on the wrapper.
        let Some(state) = (unsafe { state(stream) }) else {
            return libc::EINVAL;
        };
        state.own_error = None;
        let Some(f) = state.device.get_schema else {
            state.own_error = CString::new("ArrowDeviceArrayStream.get_schema is NULL").ok();
            return libc::EINVAL;
        };
        // SAFETY: the producer's callback on its live stream.
        unsafe { f(&mut state.device, out.cast()) }
    }))
    .unwrap_or(libc::EIO)
}

/// # Safety
/// `stream` is the live stream this callback was installed in, called as the C
/// stream interface lets a consumer call it, with `out` valid for writes of one chunk of
/// the stream's kind.
unsafe extern "C" fn get_next(
    stream: *mut FFI_ArrowArrayStream,
    out: *mut FFI_ArrowArray,
) -> c_int {
    catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: arrow-rs calls this on the wrapper.
        let Some(state) = (unsafe { state(stream) }) else {
            return libc::EINVAL;
        };
        state.own_error = None;
        let Some(f) = state.device.get_next else {
            state.own_error = CString::new("ArrowDeviceArrayStream.get_next is NULL").ok();
            return libc::EINVAL;
        };
        let mut chunk = ArrowDeviceArray::zeroed();
        // SAFETY: the producer's callback on its live stream.
        let rc = unsafe { f(&mut state.device, &mut chunk) };
        if rc != 0 {
            // A failed call hands nothing over.
            return rc;
        }
        if !chunk.is_released() {
            let refuse = if chunk.device_type != state.device.device_type {
                Some(format!(
                    "chunk on device_type {} but the stream declared {}",
                    chunk.device_type, state.device.device_type
                ))
            } else if !chunk.sync_event.is_null() {
                Some("CPU chunk with a non-NULL sync_event".to_string())
            } else {
                None
            };
            if let Some(message) = refuse {
                chunk.release();
                state.own_error = CString::new(message).ok();
                return libc::EINVAL;
            }
        }
        // Move the embedded array (released at end of stream) bitwise.
        let array = take(&mut chunk.array);
        // SAFETY: `out` is arrow-rs's local FFI_ArrowArray, valid for writes;
        // `struct ArrowArray` is `FFI_ArrowArray`.
        unsafe { out.cast::<arrowcert_sdk::abi::ArrowArray>().write(array) };
        0
    }))
    .unwrap_or(libc::EIO)
}

/// # Safety
/// `stream` is the live stream this callback was installed in, called as the C
/// stream interface lets a consumer call it (after a failed call).
unsafe extern "C" fn get_last_error(stream: *mut FFI_ArrowArrayStream) -> *const c_char {
    catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: arrow-rs calls this on the wrapper.
        let Some(state) = (unsafe { state(stream) }) else {
            return std::ptr::null();
        };
        if let Some(own) = &state.own_error {
            return own.as_ptr();
        }
        match state.device.get_last_error {
            // SAFETY: the producer's callback, after its last call failed.
            Some(f) => unsafe { f(&mut state.device) },
            None => std::ptr::null(),
        }
    }))
    .unwrap_or(std::ptr::null())
}

/// # Safety
/// `stream` is the live stream this callback was installed in, called as the C
/// stream interface lets a consumer call it.
unsafe extern "C" fn release(stream: *mut FFI_ArrowArrayStream) {
    if stream.is_null() {
        return;
    }
    let _ = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: arrow-rs releases its wrapper once; private_data is the
        // Box made at construction.
        unsafe {
            let private = (*stream).set_private_data(std::ptr::null_mut());
            if !private.is_null() {
                let mut state = Box::from_raw(private.cast::<Unwrap>());
                state.device.release();
            }
            (*stream).set_release(None);
        }
    }));
}

//! The adapter's `ArrowDeviceArrayStream` around arrow-rs's
//! `FFI_ArrowArrayStream` (arrow-rs has no device stream).
//!
//! The wrapper owns one arrow-rs stream (boxed, so it never moves) and
//! forwards every callback to it: `get_schema` hands out arrow-rs's schema
//! as is; `get_next` zeroes the consumer's `ArrowDeviceArray`, lets arrow-rs
//! write the embedded `array` (a batch, or its released end-of-stream
//! marker) and then sets the CPU device members; error codes and
//! `get_last_error` strings are arrow-rs's. `release` drops the arrow-rs
//! stream (which calls arrow-rs's release) and marks the wrapper released.

use std::ffi::{c_char, c_int};
use std::panic::{catch_unwind, AssertUnwindSafe};

use arrow_array::ffi::FFI_ArrowArray;
use arrow_array::ffi_stream::FFI_ArrowArrayStream;
use arrow_schema::ffi::FFI_ArrowSchema;
use arrowcert_sdk as sdk;
use arrowcert_sdk::abi::{device, ArrowDeviceArray, ArrowDeviceArrayStream, ArrowSchema};

use crate::produce::{export_stream, require_cpu, CPU_DEVICE_ID};

/// `arrowcert_produce_device_stream`: arrow-rs's C stream in the adapter's
/// CPU device stream wrapper.
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
    // SAFETY: forwarded from the caller.
    unsafe { produce(ipc, ipc_len, None, device_type, device_id, out) }
}

/// `arrowcert_produce_sliced_device_stream`: the same over the slice
/// ([`export_stream`]).
///
/// # Safety
/// As [`arrowcert_produce_device_stream`].
#[no_mangle]
pub unsafe extern "C" fn arrowcert_produce_sliced_device_stream(
    ipc: *const u8,
    ipc_len: i64,
    slice_offset: i64,
    slice_length: i64,
    device_type: i32,
    device_id: i64,
    out: *mut ArrowDeviceArrayStream,
) -> c_int {
    let slice = Some((slice_offset, slice_length));
    // SAFETY: forwarded from the caller.
    unsafe { produce(ipc, ipc_len, slice, device_type, device_id, out) }
}

/// The wrapper around arrow-rs's stream of the whole stream or a slice.
///
/// # Safety
/// As [`arrowcert_produce_device_stream`].
unsafe fn produce(
    ipc: *const u8,
    ipc_len: i64,
    slice: Option<(i64, i64)>,
    device_type: i32,
    device_id: i64,
    out: *mut ArrowDeviceArrayStream,
) -> c_int {
    sdk::entry(|| {
        let out = sdk::non_null(out, "out")?;
        require_cpu(device_type, device_id)?;
        // SAFETY: forwarded from the caller.
        let inner = unsafe { export_stream(ipc, ipc_len, slice) }?;
        let private_data = Box::into_raw(Box::new(inner)).cast();
        // SAFETY: `out` is valid for writes (caller); each write targets a
        // member through a raw place, the poisoned bytes are never read.
        unsafe {
            std::ptr::write_bytes(out, 0, 1);
            (&raw mut (*out).device_type).write(device::CPU);
            (&raw mut (*out).get_schema).write(Some(get_schema));
            (&raw mut (*out).get_next).write(Some(get_next));
            (&raw mut (*out).get_last_error).write(Some(get_last_error));
            (&raw mut (*out).release).write(Some(release));
            (&raw mut (*out).private_data).write(private_data);
        }
        Ok(())
    })
}

/// The arrow-rs stream a live wrapper owns, `None` if NULL or released.
///
/// # Safety
/// `stream` is NULL or a wrapper written by
/// [`arrowcert_produce_device_stream`] (possibly moved), not used
/// concurrently.
unsafe fn inner<'a>(stream: *mut ArrowDeviceArrayStream) -> Option<&'a mut FFI_ArrowArrayStream> {
    if stream.is_null() {
        return None;
    }
    // SAFETY: non-NULL and valid for reads (caller).
    let private = unsafe { (*stream).private_data }.cast::<FFI_ArrowArrayStream>();
    // SAFETY: a live wrapper's private_data is the Box written at export.
    unsafe { private.as_mut() }
}

/// # Safety
/// `stream` is the live stream this callback was installed in, called as the C
/// stream interface lets a consumer call it, with `out` valid for writes of one
/// ArrowSchema.
unsafe extern "C" fn get_schema(
    stream: *mut ArrowDeviceArrayStream,
    out: *mut ArrowSchema,
) -> c_int {
    catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the consumer calls this on the stream it was handed.
        let Some(inner) = (unsafe { inner(stream) }) else {
            return libc::EINVAL;
        };
        let Some(f) = inner.get_schema() else {
            return libc::EINVAL;
        };
        // SAFETY: arrow-rs's callback, on its own live stream; `out` is the
        // consumer's structure (`struct ArrowSchema` = `FFI_ArrowSchema`).
        unsafe { f(inner, out.cast::<FFI_ArrowSchema>()) }
    }))
    .unwrap_or(libc::EIO)
}

/// # Safety
/// `stream` is the live stream this callback was installed in, called as the C
/// stream interface lets a consumer call it, with `out` valid for writes of one chunk of
/// the stream's kind.
unsafe extern "C" fn get_next(
    stream: *mut ArrowDeviceArrayStream,
    out: *mut ArrowDeviceArray,
) -> c_int {
    catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the consumer calls this on the stream it was handed.
        let Some(inner) = (unsafe { inner(stream) }) else {
            return libc::EINVAL;
        };
        let Some(f) = inner.get_next() else {
            return libc::EINVAL;
        };
        if out.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: `out` is the consumer's ArrowDeviceArray, valid for writes;
        // arrow-rs writes the embedded array (`struct ArrowArray` =
        // `FFI_ArrowArray`), the adapter the device members around it.
        unsafe {
            std::ptr::write_bytes(out, 0, 1);
            let rc = f(inner, (&raw mut (*out).array).cast::<FFI_ArrowArray>());
            (&raw mut (*out).device_id).write(CPU_DEVICE_ID);
            (&raw mut (*out).device_type).write(device::CPU);
            (&raw mut (*out).sync_event).write(std::ptr::null_mut());
            (&raw mut (*out).reserved).write([0; 3]);
            rc
        }
    }))
    .unwrap_or(libc::EIO)
}

/// # Safety
/// `stream` is the live stream this callback was installed in, called as the C
/// stream interface lets a consumer call it (after a failed call).
unsafe extern "C" fn get_last_error(stream: *mut ArrowDeviceArrayStream) -> *const c_char {
    catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the consumer calls this on the stream it was handed.
        let Some(inner) = (unsafe { inner(stream) }) else {
            return std::ptr::null();
        };
        match inner.get_last_error() {
            // SAFETY: arrow-rs's callback, on its own live stream, after a
            // failure of the forwarded call (the consumer's guarantee).
            Some(f) => unsafe { f(inner) },
            None => std::ptr::null(),
        }
    }))
    .unwrap_or(std::ptr::null())
}

/// # Safety
/// `stream` is the live stream this callback was installed in, called as the C
/// stream interface lets a consumer call it.
unsafe extern "C" fn release(stream: *mut ArrowDeviceArrayStream) {
    if stream.is_null() {
        return;
    }
    // SAFETY: non-NULL; the consumer owns the stream and releases it once.
    unsafe {
        let private = (*stream).private_data.cast::<FFI_ArrowArrayStream>();
        if !private.is_null() {
            // Dropping arrow-rs's stream calls its release callback.
            let _ = catch_unwind(AssertUnwindSafe(|| drop(Box::from_raw(private))));
        }
        (*stream).private_data = std::ptr::null_mut();
        (*stream).release = None;
    }
}

//! The sliced stream entry points (docs/PLUGIN_ABI.md, "Slices of a
//! stream"): rows `slice_offset..slice_offset + slice_length` of the whole
//! stream (`slice_length == -1`: to its end), counted across batches as a
//! table's slice counts them. Each batch keeps the part of it in the range
//! (`RecordBatch::slice`: no copy, the buffers are shared with the decoded
//! stream); the batches outside the range are left out
//! ([`arrowcert_sdk::ipc::slice_table`]). Otherwise each is its whole
//! stream counterpart.

use std::ffi::c_int;

use arrow_array::ffi_stream::FFI_ArrowArrayStream;
use arrow_array::RecordBatchIterator;
use arrowcert_sdk::abi::arrow_rs::stream_from_arrow_rs;
use arrowcert_sdk::abi::{ArrowArrayStream, ArrowAsyncDeviceStreamHandler, ArrowDeviceArrayStream};
use arrowcert_sdk::device_stream::write_device_stream;
use arrowcert_sdk::{self as sdk, ipc::Decoded};

use crate::device::target;
use crate::device_stream::StreamState;
use crate::input;

/// Exports the slice as a plain C stream (CPU), as
/// [`crate::plain::arrowcert_produce_stream`] exports every batch.
///
/// # Safety
/// `ipc` must point to `ipc_len` readable bytes (or `ipc_len` be 0); `out`
/// must be NULL or valid for writes of one `ArrowArrayStream`.
#[no_mangle]
pub unsafe extern "C" fn arrowcert_produce_sliced_stream(
    ipc: *const u8,
    ipc_len: i64,
    slice_offset: i64,
    slice_length: i64,
    out: *mut ArrowArrayStream,
) -> c_int {
    sdk::entry(|| {
        let out = sdk::non_null(out, "out")?;
        // SAFETY: forwarded from the caller.
        let decoded = unsafe { input::decode(ipc, ipc_len) }?;
        let Decoded { schema, batches } = decoded.sliced(slice_offset, slice_length)?;
        input::check_exportable(&schema)?;
        let reader = RecordBatchIterator::new(batches.into_iter().map(Ok), schema);
        let stream = stream_from_arrow_rs(FFI_ArrowArrayStream::new(Box::new(reader)));
        // SAFETY: `out` is non-NULL and valid for writes (caller); `write`
        // neither reads nor drops the poisoned value there.
        unsafe { out.write(stream) };
        Ok(())
    })
}

/// Exports the slice as a device stream, as
/// [`crate::device_stream::arrowcert_produce_device_stream`] exports every
/// batch.
///
/// # Safety
/// `ipc` must point to `ipc_len` readable bytes (or `ipc_len` be 0); `out`
/// must be NULL or valid for writes of one `ArrowDeviceArrayStream`.
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
    sdk::entry(|| {
        let out = sdk::non_null(out, "out")?;
        let target = target(device_type, device_id)?;
        // SAFETY: forwarded from the caller.
        let decoded = unsafe { input::decode(ipc, ipc_len) }?;
        let decoded = decoded.sliced(slice_offset, slice_length)?;
        input::check_exportable(&decoded.schema)?;
        // SAFETY: `out` is non-NULL and valid for writes (caller).
        unsafe { write_device_stream(out, StreamState::new(decoded, target)) };
        Ok(())
    })
}

/// Produces the slice into `handler`, as
/// [`crate::async_producer::arrowcert_produce_async`] produces every batch.
///
/// # Safety
/// As [`crate::async_producer::arrowcert_produce_async`].
#[no_mangle]
pub unsafe extern "C" fn arrowcert_produce_sliced_async(
    ipc: *const u8,
    ipc_len: i64,
    slice_offset: i64,
    slice_length: i64,
    device_type: i32,
    device_id: i64,
    handler: *mut ArrowAsyncDeviceStreamHandler,
) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe {
        crate::async_producer::start(
            ipc,
            ipc_len,
            Some((slice_offset, slice_length)),
            device_type,
            device_id,
            handler,
        )
    }
}

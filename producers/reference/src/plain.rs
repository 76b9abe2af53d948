//! One-shot entry points: a schema, an array (plain or device) and the plain
//! C stream, each exported from the IPC stream the harness describes.
//!
//! PLUGIN_ABI.md: "`batch_index` picks one record batch of the IPC stream;
//! `slice_offset`/`slice_length` ask for a zero-copy slice of it
//! (`slice_length == -1`: the whole batch) ... A record batch is exported as
//! a struct array, as the C data interface specifies." The slice is
//! `ArrayData::slice` (zero-copy: every buffer is kept whole and each
//! column's `ArrowArray.offset` carries the slice; `RecordBatch::slice`
//! would advance buffer pointers instead and leave offsets at 0).

use std::ffi::c_int;

use arrow_array::ffi_stream::FFI_ArrowArrayStream;
use arrow_array::RecordBatchIterator;
use arrowcert_sdk::abi::arrow_rs::{export_batch_slice, export_schema, stream_from_arrow_rs};
use arrowcert_sdk::abi::{ArrowArray, ArrowArrayStream, ArrowDeviceArray, ArrowSchema};
use arrowcert_sdk::{self as sdk, ipc::Decoded};

use crate::device::{target, write_on};
use crate::input;

/// Exports the stream's schema (a struct; schema-level metadata on the root).
///
/// # Safety
/// `ipc` must point to `ipc_len` readable bytes (or `ipc_len` be 0); `out`
/// must be NULL or valid for writes of one `ArrowSchema`.
#[no_mangle]
pub unsafe extern "C" fn arrowcert_produce_schema(
    ipc: *const u8,
    ipc_len: i64,
    out: *mut ArrowSchema,
) -> c_int {
    sdk::entry(|| {
        let out = sdk::non_null(out, "out")?;
        // SAFETY: forwarded from the caller.
        let decoded = unsafe { input::decode(ipc, ipc_len) }?;
        let schema = export_schema(&decoded.schema)?;
        // SAFETY: `out` is non-NULL and valid for writes (caller); `write`
        // neither reads nor drops the poisoned value there.
        unsafe { out.write(schema) };
        Ok(())
    })
}

/// Exports one (sliced) batch as a plain C data struct array.
///
/// # Safety
/// `ipc` must point to `ipc_len` readable bytes (or `ipc_len` be 0); `out`
/// must be NULL or valid for writes of one `ArrowArray`.
#[no_mangle]
pub unsafe extern "C" fn arrowcert_produce_array(
    ipc: *const u8,
    ipc_len: i64,
    batch_index: i64,
    slice_offset: i64,
    slice_length: i64,
    out: *mut ArrowArray,
) -> c_int {
    sdk::entry(|| {
        let out = sdk::non_null(out, "out")?;
        // SAFETY: forwarded from the caller.
        let decoded = unsafe { input::decode(ipc, ipc_len) }?;
        let (batch, offset, length) = decoded.range(batch_index, slice_offset, slice_length)?;
        // SAFETY: `out` is non-NULL and valid for writes (caller); `write`
        // neither reads nor drops the poisoned value there.
        unsafe { out.write(export_batch_slice(batch, offset, length)) };
        Ok(())
    })
}

/// Exports one (sliced) batch as a CPU device array (device_id -1,
/// sync_event NULL, reserved zero).
///
/// # Safety
/// `ipc` must point to `ipc_len` readable bytes (or `ipc_len` be 0); `out`
/// must be NULL or valid for writes of one `ArrowDeviceArray`.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn arrowcert_produce_device_array(
    ipc: *const u8,
    ipc_len: i64,
    batch_index: i64,
    slice_offset: i64,
    slice_length: i64,
    device_type: i32,
    device_id: i64,
    out: *mut ArrowDeviceArray,
) -> c_int {
    sdk::entry(|| {
        let out = sdk::non_null(out, "out")?;
        let target = target(device_type, device_id)?;
        // SAFETY: forwarded from the caller.
        let decoded = unsafe { input::decode(ipc, ipc_len) }?;
        let (batch, offset, length) = decoded.range(batch_index, slice_offset, slice_length)?;
        // SAFETY: `out` is non-NULL and valid for writes (caller).
        unsafe {
            write_on(
                target,
                &decoded.schema,
                out,
                export_batch_slice(batch, offset, length),
            )
        }
    })
}

/// Exports every batch as a plain C stream, through arrow-rs's
/// `FFI_ArrowArrayStream` (CPU only, as the contract says of this entry
/// point).
///
/// # Safety
/// `ipc` must point to `ipc_len` readable bytes (or `ipc_len` be 0); `out`
/// must be NULL or valid for writes of one `ArrowArrayStream`.
#[no_mangle]
pub unsafe extern "C" fn arrowcert_produce_stream(
    ipc: *const u8,
    ipc_len: i64,
    out: *mut ArrowArrayStream,
) -> c_int {
    sdk::entry(|| {
        let out = sdk::non_null(out, "out")?;
        // SAFETY: forwarded from the caller.
        let Decoded { schema, batches } = unsafe { input::decode(ipc, ipc_len) }?;
        input::check_exportable(&schema)?;
        let reader = RecordBatchIterator::new(batches.into_iter().map(Ok), schema);
        let stream = stream_from_arrow_rs(FFI_ArrowArrayStream::new(Box::new(reader)));
        // SAFETY: `out` is non-NULL and valid for writes (caller); `write`
        // neither reads nor drops the poisoned value there.
        unsafe { out.write(stream) };
        Ok(())
    })
}

//! The one-shot entry points: schema, array, device array and the plain C
//! stream, each a verbatim arrow-rs export.

use std::ffi::c_int;

use arrow_array::ffi::FFI_ArrowArray;
use arrow_array::ffi_stream::FFI_ArrowArrayStream;
use arrow_array::{Array, RecordBatchIterator, StructArray};
use arrow_schema::ffi::FFI_ArrowSchema;
use arrowcert_sdk::abi::{device, ArrowArray, ArrowArrayStream, ArrowDeviceArray, ArrowSchema};
use arrowcert_sdk::{self as sdk, ipc, out, PluginError, PluginResult};

/// CDeviceDataInterface.rst: "it is recommended to use a device_id of -1 as
/// a convention" for device types without device identifiers (CPU).
pub const CPU_DEVICE_ID: i64 = -1;

/// Decodes the IPC stream an entry point was given.
///
/// # Safety
/// `ipc` must point to `ipc_len` readable bytes, or `ipc_len` be 0.
pub unsafe fn decode(ipc: *const u8, ipc_len: i64) -> PluginResult<ipc::Decoded> {
    // SAFETY: forwarded from the caller.
    let bytes = unsafe { out::input(ipc, ipc_len) }?;
    ipc::decode(bytes)
}

/// Accepts (CPU, -1) only: arrow-rs has host memory only. Anything else is
/// `ENOSYS` ("A producer that cannot honour them returns ENOSYS").
pub fn require_cpu(device_type: i32, device_id: i64) -> PluginResult {
    if device_type != device::CPU {
        return Err(PluginError::unsupported(format!(
            "device_type {device_type}: arrow-rs exports CPU memory only (ARROW_DEVICE_CPU = {})",
            device::CPU
        )));
    }
    if device_id != CPU_DEVICE_ID {
        return Err(PluginError::unsupported(format!(
            "device_id {device_id}: only the spec's CPU convention -1 is accepted"
        )));
    }
    Ok(())
}

/// arrow-rs's export of one batch, sliced as asked: `RecordBatch::slice`
/// (zero-copy) unless the whole batch is asked for, then
/// `StructArray::from(batch)` and `FFI_ArrowArray::new`, exactly as
/// arrow-rs's own `FFI_ArrowArrayStream::get_next` exports a batch.
///
/// # Safety
/// As [`decode`].
unsafe fn export_array(
    ipc: *const u8,
    ipc_len: i64,
    batch_index: i64,
    slice_offset: i64,
    slice_length: i64,
) -> PluginResult<FFI_ArrowArray> {
    // SAFETY: forwarded from the caller.
    let decoded = unsafe { decode(ipc, ipc_len) }?;
    let (batch, offset, length) = decoded.range(batch_index, slice_offset, slice_length)?;
    let batch = if offset == 0 && length == batch.num_rows() {
        batch.clone()
    } else {
        batch.slice(offset, length)
    };
    let array = StructArray::from(batch);
    Ok(FFI_ArrowArray::new(&array.to_data()))
}

/// `arrowcert_produce_schema`: `FFI_ArrowSchema::try_from(&Schema)`, moved
/// into `out`.
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
        let decoded = unsafe { decode(ipc, ipc_len) }?;
        let schema = FFI_ArrowSchema::try_from(decoded.schema.as_ref())?;
        // SAFETY: `out` is valid for writes of one `struct ArrowSchema`, which
        // `FFI_ArrowSchema` is a repr(C) definition of; `write` neither reads
        // nor drops the poisoned bytes there, and moves arrow-rs's value as is.
        unsafe { out.cast::<FFI_ArrowSchema>().write(schema) };
        Ok(())
    })
}

/// `arrowcert_produce_array`: arrow-rs's `FFI_ArrowArray` of the (sliced)
/// batch, moved into `out`.
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
        let array = unsafe { export_array(ipc, ipc_len, batch_index, slice_offset, slice_length) }?;
        // SAFETY: `out` is valid for writes of one `struct ArrowArray`, which
        // `FFI_ArrowArray` is a repr(C) definition of.
        unsafe { out.cast::<FFI_ArrowArray>().write(array) };
        Ok(())
    })
}

/// Writes a CPU device array around arrow-rs's `array`: the adapter zeroes
/// the whole structure (padding included), moves arrow-rs's array into
/// `out.array` verbatim, and sets `device_id` -1, `device_type` CPU,
/// `sync_event` NULL, `reserved` 0.
///
/// # Safety
/// `out` must be valid for writes of one `ArrowDeviceArray` and aligned.
pub unsafe fn write_cpu_device_array(out: *mut ArrowDeviceArray, array: FFI_ArrowArray) {
    // SAFETY: `out` is valid for writes (caller); every write targets a
    // member through a raw place, nothing is read or dropped.
    unsafe {
        std::ptr::write_bytes(out, 0, 1);
        (&raw mut (*out).array)
            .cast::<FFI_ArrowArray>()
            .write(array);
        (&raw mut (*out).device_id).write(CPU_DEVICE_ID);
        (&raw mut (*out).device_type).write(device::CPU);
        (&raw mut (*out).sync_event).write(std::ptr::null_mut());
        (&raw mut (*out).reserved).write([0; 3]);
    }
}

/// `arrowcert_produce_device_array`: as [`arrowcert_produce_array`], in an
/// adapter-written CPU `ArrowDeviceArray`.
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
        require_cpu(device_type, device_id)?;
        // SAFETY: forwarded from the caller.
        let array = unsafe { export_array(ipc, ipc_len, batch_index, slice_offset, slice_length) }?;
        // SAFETY: `out` is non-NULL and valid for writes (caller).
        unsafe { write_cpu_device_array(out, array) };
        Ok(())
    })
}

/// arrow-rs's C stream over every batch of the IPC stream, or (`slice`:
/// offset, length, -1 to the end) over the rows of that slice of the whole
/// stream, each batch in it cut with `RecordBatch::slice` (zero-copy; the
/// sliced entry points, docs/PLUGIN_ABI.md): `FFI_ArrowArrayStream::new`
/// over a `RecordBatchIterator`.
///
/// # Safety
/// As [`decode`].
pub unsafe fn export_stream(
    ipc: *const u8,
    ipc_len: i64,
    slice: Option<(i64, i64)>,
) -> PluginResult<FFI_ArrowArrayStream> {
    // SAFETY: forwarded from the caller.
    let decoded = unsafe { decode(ipc, ipc_len) }?;
    let decoded = match slice {
        Some((offset, length)) => decoded.sliced(offset, length)?,
        None => decoded,
    };
    let ipc::Decoded { schema, batches } = decoded;
    let reader = RecordBatchIterator::new(batches.into_iter().map(Ok), schema);
    Ok(FFI_ArrowArrayStream::new(Box::new(reader)))
}

/// `arrowcert_produce_stream`: arrow-rs's `FFI_ArrowArrayStream`, moved into
/// `out`.
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
        let stream = unsafe { export_stream(ipc, ipc_len, None) }?;
        // SAFETY: `out` is valid for writes of one `struct ArrowArrayStream`,
        // which `FFI_ArrowArrayStream` is a repr(C) definition of.
        unsafe { out.cast::<FFI_ArrowArrayStream>().write(stream) };
        Ok(())
    })
}

/// `arrowcert_produce_sliced_stream`: arrow-rs's `FFI_ArrowArrayStream`
/// over the slice ([`export_stream`]), moved into `out`.
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
        let stream = unsafe { export_stream(ipc, ipc_len, Some((slice_offset, slice_length))) }?;
        // SAFETY: `out` is valid for writes of one `struct ArrowArrayStream`,
        // which `FFI_ArrowArrayStream` is a repr(C) definition of.
        unsafe { out.cast::<FFI_ArrowArrayStream>().write(stream) };
        Ok(())
    })
}

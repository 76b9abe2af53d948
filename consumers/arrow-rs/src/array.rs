//! `arrowcert_consume_array` and `arrowcert_consume_device_array`.

use std::ffi::c_int;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::ffi::{from_ffi, FFI_ArrowArray};
use arrow_array::{make_array, RecordBatch};
use arrow_schema::ffi::FFI_ArrowSchema;
use arrow_schema::{Schema, SchemaRef};
use arrowcert_sdk::abi::{device, ArrowArray, ArrowDeviceArray, ArrowSchema};
use arrowcert_sdk::{entry, PluginError, PluginResult};

use crate::{check_out, emit};

/// Moves a schema out with arrow-rs's own move (`FFI_ArrowSchema::from_raw`:
/// a bitwise copy, the source replaced by an empty = released schema).
///
/// # Safety
/// `ptr` is NULL or valid for reads and writes of one `ArrowSchema`.
unsafe fn move_schema(ptr: *mut ArrowSchema) -> PluginResult<FFI_ArrowSchema> {
    if ptr.is_null() {
        return Err(PluginError::invalid("schema is NULL"));
    }
    // SAFETY: forwarded from the caller; `struct ArrowSchema` is
    // `FFI_ArrowSchema`.
    Ok(unsafe { FFI_ArrowSchema::from_raw(ptr.cast()) })
}

/// Moves an array out with arrow-rs's own move (`FFI_ArrowArray::from_raw`).
///
/// # Safety
/// `ptr` is NULL or valid for reads and writes of one `ArrowArray`.
unsafe fn move_array(ptr: *mut ArrowArray) -> PluginResult<FFI_ArrowArray> {
    if ptr.is_null() {
        return Err(PluginError::invalid("array is NULL"));
    }
    // SAFETY: forwarded from the caller; `struct ArrowArray` is
    // `FFI_ArrowArray`.
    Ok(unsafe { FFI_ArrowArray::from_raw(ptr.cast()) })
}

/// arrow-rs's import of a record batch: `Schema::try_from`, `from_ffi`,
/// `make_array`, `RecordBatch::from(StructArray)` and `with_schema` (which
/// brings back the schema-level metadata a `StructArray` cannot carry);
/// every value is read by `validate_full` first. Both structures are
/// released (dropped) by the time this returns, except through the buffers
/// the batch keeps.
///
/// # Safety
/// `schema` and `array` follow the C data interface.
unsafe fn import(
    schema: FFI_ArrowSchema,
    array: FFI_ArrowArray,
) -> PluginResult<(SchemaRef, RecordBatch)> {
    let arrow_schema = Arc::new(Schema::try_from(&schema)?);
    // SAFETY: the caller's guarantee.
    let data = unsafe { from_ffi(array, &schema) }?;
    drop(schema);
    data.validate_full()?;
    let array = make_array(data);
    let struct_array = array
        .as_struct_opt()
        .ok_or_else(|| {
            PluginError::invalid(format!(
                "the record batch is a {}, not a struct array",
                array.data_type()
            ))
        })?
        .clone();
    let batch = RecordBatch::from(struct_array).with_schema(arrow_schema.clone())?;
    Ok((arrow_schema, batch))
}

/// `arrowcert_consume_array`.
///
/// # Safety
/// `schema` and `array` must each be NULL or valid for reads and writes and
/// hold a structure that follows the C data interface; `out_ipc` and
/// `out_len` must be NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn arrowcert_consume_array(
    schema: *mut ArrowSchema,
    array: *mut ArrowArray,
    out_ipc: *mut *mut u8,
    out_len: *mut i64,
) -> c_int {
    entry(|| {
        // Both are moved before anything can fail (dropping releases them).
        // SAFETY: forwarded from the caller.
        let schema = unsafe { move_schema(schema) };
        // SAFETY: forwarded from the caller.
        let array = unsafe { move_array(array) };
        let (schema, array) = (schema?, array?);
        check_out(out_ipc, out_len)?;
        // SAFETY: forwarded from the caller.
        let (schema, batch) = unsafe { import(schema, array) }?;
        // SAFETY: checked non-NULL; valid for writes (caller).
        unsafe { emit(&schema, vec![batch], out_ipc, out_len) }
    })
}

/// `arrowcert_consume_device_array`: CPU only, with a NULL `sync_event`
/// (CPU has no event type); the embedded array is moved out by arrow-rs's
/// `FFI_ArrowArray::from_raw`, which also marks the device array released.
///
/// # Safety
/// As [`arrowcert_consume_array`], with `array` a device array.
#[no_mangle]
pub unsafe extern "C" fn arrowcert_consume_device_array(
    schema: *mut ArrowSchema,
    array: *mut ArrowDeviceArray,
    out_ipc: *mut *mut u8,
    out_len: *mut i64,
) -> c_int {
    entry(|| {
        // SAFETY: forwarded from the caller.
        let schema = unsafe { move_schema(schema) };
        let device = if array.is_null() {
            Err(PluginError::invalid("array is NULL"))
        } else {
            // SAFETY: non-NULL, valid for reads and writes (caller).
            unsafe {
                let device_type = (*array).device_type;
                let sync_event = (*array).sync_event;
                let inner = FFI_ArrowArray::from_raw((&raw mut (*array).array).cast());
                Ok((device_type, sync_event, inner))
            }
        };
        let (schema, (device_type, sync_event, array)) = (schema?, device?);
        if device_type != device::CPU {
            return Err(PluginError::unsupported(format!(
                "device array on device_type {device_type}: arrow-rs reads CPU memory only"
            )));
        }
        if !sync_event.is_null() {
            return Err(PluginError::unsupported(
                "CPU device array with a non-NULL sync_event: CPU has no event type to wait on",
            ));
        }
        check_out(out_ipc, out_len)?;
        // SAFETY: forwarded from the caller.
        let (schema, batch) = unsafe { import(schema, array) }?;
        // SAFETY: checked non-NULL; valid for writes (caller).
        unsafe { emit(&schema, vec![batch], out_ipc, out_len) }
    })
}

//! The arrow-rs 60.1.0 consumer adapter of arrowcert: certifies arrow-rs's
//! own importer, not a corrected one.
//!
//! Unlike the reference consumer, this crate checks and works around
//! nothing arrow-rs does: no structural pre-check, no normalisation of
//! imported arrays. Every structure is moved and imported by arrow-rs's own
//! API, every value is then read (`ArrayData::validate_full` on the whole
//! imported tree, then arrow-ipc's `StreamWriter` through
//! `arrowcert_sdk::ipc::encode`), and what was read is handed back as IPC
//! stream bytes (`arrowcert_sdk::out::hand_out`).
//!
//! # Who does what
//!
//! | entry point | done by arrow-rs | done by the adapter |
//! |---|---|---|
//! | `arrowcert_consume_array` | moving both structures (`FFI_ArrowSchema::from_raw`, `FFI_ArrowArray::from_raw`: bitwise copy, source set to arrow-rs's empty = released), `Schema::try_from(&FFI_ArrowSchema)`, `from_ffi`, `make_array`, `RecordBatch::from(StructArray)` + `with_schema`, releasing (drop) | NULL-pointer checks of the arguments; `validate_full`; the IPC bytes |
//! | `arrowcert_consume_stream` | everything on the stream: `RecordBatchStreamReader::from_raw` (the move, `get_schema`, `get_next`, `get_last_error`, import of each chunk), and `release` (drop) | NULL checks; `validate_full` of every batch; the IPC bytes; the errno returned when a stream callback failed, parsed from arrow-rs's message "... Error code: N" (arrow-rs keeps the code only in the text of `ArrowError::CDataInterface`) |
//! | `arrowcert_consume_device_array` | as `arrowcert_consume_array`, for the embedded `array` (moved out by `FFI_ArrowArray::from_raw`, which also marks the device array released) | reading `device_type`/`sync_event` before the move, and refusing anything but CPU with a NULL `sync_event` (`ENOSYS`, after releasing it) |
//! | `arrowcert_consume_device_stream` | as `arrowcert_consume_stream`, over the adapter's C stream wrapper | moving the device stream (bitwise copy, source `release` set to NULL), refusing a non-CPU stream (`ENOSYS`, after releasing it), and the wrapper: an `FFI_ArrowArrayStream` (`new_unchecked`) whose `get_schema` and `get_last_error` forward to the device stream, whose `get_next` calls the device stream's `get_next` into an adapter-owned `ArrowDeviceArray`, refuses a chunk that is not CPU with a NULL `sync_event` (releasing it) and moves the embedded array out bitwise, and whose `release` calls the device stream's release |
//!
//! arrow-rs has no device structures and no async stream: the device
//! unwrapping is the adapter's (the plugin name says so) and there are no
//! async entry points. Panics in the entry points become `EIO`
//! (`arrowcert_sdk::entry`); the wrapper's callbacks catch panics too.

pub mod array;
pub mod stream;

use std::ffi::{c_char, c_void, CStr};

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use arrowcert_sdk::abi::device;
use arrowcert_sdk::{self as sdk, PluginError, PluginResult};

pub use array::{arrowcert_consume_array, arrowcert_consume_device_array};
pub use stream::{arrowcert_consume_device_stream, arrowcert_consume_stream};

/// The plugin's name, as `arrowcert_plugin_name` returns it.
pub const PLUGIN_NAME: &CStr =
    c"arrow-rs 60.1.0 consumer (C data/C stream: arrow-rs; device unwrapping: adapter)";

/// "must return 1" (PLUGIN_ABI.md, Identity).
#[no_mangle]
pub extern "C" fn arrowcert_plugin_abi_version() -> i32 {
    1
}

/// Static UTF-8 name, valid for the life of the library.
#[no_mangle]
pub extern "C" fn arrowcert_plugin_name() -> *const c_char {
    PLUGIN_NAME.as_ptr()
}

/// arrow-rs reads host memory only: CPU.
#[no_mangle]
pub extern "C" fn arrowcert_plugin_supports_device(device_type: i32) -> i32 {
    i32::from(device_type == device::CPU)
}

/// The message of the last failing entry point call on this thread.
#[no_mangle]
pub extern "C" fn arrowcert_last_error() -> *const c_char {
    sdk::last_error_ptr()
}

/// Frees the IPC bytes a consume call handed out.
///
/// # Safety
/// `ptr` must be NULL or memory this plugin handed out, freed once.
#[no_mangle]
pub unsafe extern "C" fn arrowcert_free(ptr: *mut c_void) {
    // SAFETY: forwarded from the caller.
    unsafe { sdk::out::free(ptr) }
}

/// Refuses NULL out-parameters.
pub(crate) fn check_out(out_ipc: *mut *mut u8, out_len: *mut i64) -> PluginResult {
    if out_ipc.is_null() || out_len.is_null() {
        Err(PluginError::invalid("out_ipc or out_len is NULL"))
    } else {
        Ok(())
    }
}

/// Reads every value of `batch`: `validate_full` over the whole tree
/// (offsets, UTF-8, dictionary keys, null counts, children).
pub(crate) fn validate(batch: &RecordBatch) -> PluginResult {
    for (column, field) in batch.columns().iter().zip(batch.schema().fields()) {
        column
            .to_data()
            .validate_full()
            .map_err(|e| PluginError::invalid(format!("column {:?}: {e}", field.name())))?;
    }
    Ok(())
}

/// Encodes what was read as one IPC stream, drops the batches (everything
/// imported is released before the call returns) and hands the bytes out.
///
/// # Safety
/// `out_ipc` and `out_len` must be valid for writes.
pub(crate) unsafe fn emit(
    schema: &SchemaRef,
    batches: Vec<RecordBatch>,
    out_ipc: *mut *mut u8,
    out_len: *mut i64,
) -> PluginResult {
    let bytes = sdk::ipc::encode(schema, &batches)?;
    drop(batches);
    // SAFETY: forwarded from the caller.
    unsafe { sdk::out::hand_out(&bytes, out_ipc, out_len) }
}

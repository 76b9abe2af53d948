//! The arrow-rs 60.1.0 producer adapter of arrowcert: certifies arrow-rs's
//! own exporter, not a corrected one.
//!
//! Unlike the reference producer, this crate works around nothing: every
//! byte of the C data / C stream structures it hands out is what arrow-rs
//! wrote, moved verbatim into the harness's `out` with `std::ptr::write`.
//! Nothing arrow-rs exports is initialised, repaired, normalised or
//! re-wrapped. The data to export comes from the IPC stream the harness
//! passes (decoded by `arrowcert_sdk::ipc`, i.e. arrow-ipc's `StreamReader`).
//!
//! # Who writes which bytes
//!
//! | entry point | written by arrow-rs | written by the adapter |
//! |---|---|---|
//! | `arrowcert_produce_schema` | the whole `ArrowSchema`: `FFI_ArrowSchema::try_from(&Schema)` | nothing (the value is moved into `out`) |
//! | `arrowcert_produce_array` | the whole `ArrowArray`: `FFI_ArrowArray::new(&StructArray::from(batch).to_data())` | nothing |
//! | `arrowcert_produce_stream` | the whole `ArrowArrayStream` (`FFI_ArrowArrayStream::new` over a `RecordBatchIterator`), and everything its callbacks write | nothing |
//! | `arrowcert_produce_device_array` | the embedded `ArrowDeviceArray.array` (as `arrowcert_produce_array`) | `device_id` (-1), `device_type` (`ARROW_DEVICE_CPU`), `sync_event` (NULL), `reserved` (0) and the padding (0): the structure is zeroed, then arrow-rs's `FFI_ArrowArray` is moved into `array` |
//! | `arrowcert_produce_device_stream` | every `ArrowSchema` handed out by `get_schema`, every embedded `ArrowDeviceArray.array` handed out by `get_next` (the end-of-stream marker included), and the error codes and `get_last_error` strings: the wrapper forwards each call to an arrow-rs `FFI_ArrowArrayStream` it owns | the `ArrowDeviceArrayStream` itself (`device_type` CPU, the four callbacks, `private_data`), and in each `ArrowDeviceArray` from `get_next` the device members as in `arrowcert_produce_device_array` |
//!
//! arrow-rs has no device structures and no async stream, so the device
//! wrapper is the adapter's (the plugin name says so) and there is no
//! `arrowcert_produce_async`.
//!
//! A batch is selected with `batch_index`; a slice (`slice_offset` /
//! `slice_length`, anything but the whole batch) is taken zero-copy with
//! `RecordBatch::slice`, then exported as a struct array
//! (`StructArray::from(batch)`), exactly as arrow-rs's own
//! `FFI_ArrowArrayStream` exports its batches.
//!
//! Panics inside the entry points become `EIO` (`arrowcert_sdk::entry`);
//! the device stream wrapper's callbacks catch panics too. arrow-rs's own
//! C stream callbacks (`arrowcert_produce_stream`) are arrow-rs's, unwrapped.

pub mod device_stream;
pub mod produce;

use std::ffi::{c_char, c_void, CStr};

use arrowcert_sdk as sdk;
use arrowcert_sdk::abi::device;

pub use device_stream::{arrowcert_produce_device_stream, arrowcert_produce_sliced_device_stream};
pub use produce::{
    arrowcert_produce_array, arrowcert_produce_device_array, arrowcert_produce_schema,
    arrowcert_produce_sliced_stream, arrowcert_produce_stream,
};

/// The plugin's name, as `arrowcert_plugin_name` returns it.
pub const PLUGIN_NAME: &CStr =
    c"arrow-rs 60.1.0 producer (C data/C stream: arrow-rs; device wrapper: adapter)";

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

/// arrow-rs exports host memory only: CPU.
#[no_mangle]
pub extern "C" fn arrowcert_plugin_supports_device(device_type: i32) -> i32 {
    i32::from(device_type == device::CPU)
}

/// The message of the last failing entry point call on this thread.
#[no_mangle]
pub extern "C" fn arrowcert_last_error() -> *const c_char {
    sdk::last_error_ptr()
}

/// Frees memory this plugin handed out (a producer hands out none).
///
/// # Safety
/// `ptr` must be NULL or memory this plugin handed out, freed once.
#[no_mangle]
pub unsafe extern "C" fn arrowcert_free(ptr: *mut c_void) {
    // SAFETY: forwarded from the caller.
    unsafe { sdk::out::free(ptr) }
}

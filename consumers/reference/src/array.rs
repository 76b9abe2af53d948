//! `arrowcert_consume_array` and `arrowcert_consume_device_array`.

use std::ffi::c_int;

use arrowcert_sdk::abi::ops::{take, Guard};
use arrowcert_sdk::abi::{ArrowArray, ArrowDeviceArray, ArrowSchema};
use arrowcert_sdk::{entry, PluginResult};

use crate::input::take_input;
use crate::{device, output, read};

/// `int arrowcert_consume_array(struct ArrowSchema* schema, struct
/// ArrowArray* array, uint8_t** out_ipc, int64_t* out_len);`
///
/// Moves `schema` and `array` (both are marked released when this returns,
/// on every path), imports and validates the record batch, releases it, and
/// hands back one IPC stream holding that schema and batch.
///
/// # Safety
/// `schema` and `array` must each be NULL or valid for reads and writes and
/// hold a structure that is released or live and follows the C data
/// interface; `out_ipc` and `out_len` must be NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn arrowcert_consume_array(
    schema: *mut ArrowSchema,
    array: *mut ArrowArray,
    out_ipc: *mut *mut u8,
    out_len: *mut i64,
) -> c_int {
    entry(|| {
        // Move both before either can fail, so that both are released
        // whatever happens next.
        // SAFETY: forwarded from the caller.
        let schema = unsafe { take_input(schema, "schema") };
        // SAFETY: forwarded from the caller.
        let array = unsafe { take_input(array, "array") };
        let (schema, array) = (schema?, array?);
        // SAFETY: forwarded from the caller.
        unsafe { consume(schema, array, out_ipc, out_len) }
    })
}

/// `int arrowcert_consume_device_array(struct ArrowSchema* schema, struct
/// ArrowDeviceArray* array, uint8_t** out_ipc, int64_t* out_len);`
///
/// As [`arrowcert_consume_array`], for a device array: "The consumer can
/// *move* the ``ArrowDeviceArray`` structure by bitwise copying [...]. Then
/// it MUST mark the source structure released by setting the ``release``
/// member of the embedded ``ArrowArray`` structure to ``NULL``". Anything
/// but CPU memory is refused with `ENOSYS`, after releasing it.
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
        let schema = unsafe { take_input(schema, "schema") };
        // SAFETY: forwarded from the caller.
        let array = unsafe { take_input(array, "device array") };
        let (schema, mut array) = (schema?, array?);
        // Refused device arrays are released by their guard. A CPU array
        // has no event to wait on; an emulated one is waited on here,
        // before anything reads its buffers. The embedded array is then
        // moved out; the device array is released (marked) and its guard
        // does nothing.
        // SAFETY: a live device array (caller).
        unsafe { device::ready(&array, "the device array") }?;
        let inner = Guard::new(take(&mut array.array));
        // SAFETY: forwarded from the caller.
        unsafe { consume(schema, inner, out_ipc, out_len) }
    })
}

/// Imports, validates and hands back one record batch.
///
/// # Safety
/// The guarded structures follow the C data interface; `out_ipc` and
/// `out_len` are NULL or valid for writes.
unsafe fn consume(
    mut schema: Guard<ArrowSchema>,
    mut array: Guard<ArrowArray>,
    out_ipc: *mut *mut u8,
    out_len: *mut i64,
) -> PluginResult {
    output::check_out(out_ipc, out_len)?;
    // SAFETY: the schema was live when moved in and follows the C data
    // interface (caller's guarantee); import_schema owns it from here.
    let schema = unsafe { read::import_schema(take(&mut *schema)) }?;
    // SAFETY: as above, for the array.
    let batch = unsafe { read::read_batch(&schema, take(&mut *array)) }?;
    // SAFETY: forwarded from the caller.
    unsafe { output::emit(&schema, vec![batch], out_ipc, out_len) }
}

//! Identity symbols (`arrowcert_plugin_abi_version`, `arrowcert_plugin_name`,
//! `arrowcert_plugin_supports_device`) and the shared helpers
//! `arrowcert_last_error` and `arrowcert_free`.

use std::ffi::{c_char, c_void, CStr};

use arrowcert_sdk as sdk;

use crate::device;

/// The plugin's name, as `arrowcert_plugin_name` returns it.
pub const PLUGIN_NAME: &CStr = c"arrowcert reference producer (arrow-rs 60.1.0)";

/// "must return 1" (PLUGIN_ABI.md, Identity).
#[no_mangle]
pub extern "C" fn arrowcert_plugin_abi_version() -> i32 {
    1
}

/// "static UTF-8" (PLUGIN_ABI.md, Identity): a pointer into a `'static`
/// C string literal, valid for the life of the library.
#[no_mangle]
pub extern "C" fn arrowcert_plugin_name() -> *const c_char {
    PLUGIN_NAME.as_ptr()
}

/// "1 if the plugin can produce/consume on this device type, else 0"
/// (PLUGIN_ABI.md): this producer only has CPU memory.
#[no_mangle]
pub extern "C" fn arrowcert_plugin_supports_device(device_type: i32) -> i32 {
    i32::from(device::supports(device_type))
}

/// "Message for the last failing call on this thread; valid until the next
/// call into the plugin on this thread. NULL if none." (PLUGIN_ABI.md)
#[no_mangle]
pub extern "C" fn arrowcert_last_error() -> *const c_char {
    sdk::last_error_ptr()
}

/// "Frees memory the plugin handed out" (PLUGIN_ABI.md). A producer hands
/// out no bytes of its own; this is the SDK's `free`, for symmetry with the
/// consumer plugins.
///
/// # Safety
/// `ptr` must be NULL or memory this plugin handed out, freed once.
#[no_mangle]
pub unsafe extern "C" fn arrowcert_free(ptr: *mut c_void) {
    // SAFETY: forwarded from the caller.
    unsafe { sdk::out::free(ptr) }
}

//! Identity and housekeeping entry points (PLUGIN_ABI.md, "Identity").

use std::ffi::{c_char, c_void, CStr};

use arrowcert_sdk as sdk;
use arrowcert_sdk::abi::ArrowDeviceType;

/// The contract version this plugin implements.
const ABI_VERSION: i32 = 1;

/// The plugin's name, as `arrowcert_plugin_name` returns it.
pub const PLUGIN_NAME: &CStr = c"arrowcert reference consumer (arrow-rs 60.1.0)";

/// `int32_t arrowcert_plugin_abi_version(void);  /* must return 1 */`
#[no_mangle]
pub extern "C" fn arrowcert_plugin_abi_version() -> i32 {
    ABI_VERSION
}

/// `const char* arrowcert_plugin_name(void);`: static, NUL-terminated UTF-8.
#[no_mangle]
pub extern "C" fn arrowcert_plugin_name() -> *const c_char {
    PLUGIN_NAME.as_ptr()
}

/// `int32_t arrowcert_plugin_supports_device(int32_t device_type);`
///
/// "1 if the plugin can produce/consume on this device type, else 0": this
/// consumer reads CPU memory, and the emulated device once attached.
#[no_mangle]
pub extern "C" fn arrowcert_plugin_supports_device(device_type: ArrowDeviceType) -> i32 {
    i32::from(crate::device::supports(device_type))
}

/// `const char* arrowcert_last_error(void);`
///
/// "Message for the last failing call on this thread; valid until the next
/// call into the plugin on this thread. NULL if none."
#[no_mangle]
pub extern "C" fn arrowcert_last_error() -> *const c_char {
    sdk::last_error_ptr()
}

/// `void arrowcert_free(void* ptr);`: frees the IPC bytes a consume call
/// handed out.
///
/// # Safety
/// `ptr` must be NULL or a pointer this plugin handed out through `out_ipc`,
/// not freed before.
#[no_mangle]
pub unsafe extern "C" fn arrowcert_free(ptr: *mut c_void) {
    // SAFETY: forwarded from the caller; the bytes were allocated by
    // sdk::out::hand_out, which sdk::out::free is the counterpart of.
    unsafe { sdk::out::free(ptr) }
}

//! Identity entry points.

use std::ffi::CStr;

use arrowcert_consumer_reference::{
    arrowcert_free, arrowcert_plugin_abi_version, arrowcert_plugin_name,
    arrowcert_plugin_supports_device,
};
use arrowcert_sdk::abi::device;

#[test]
fn abi_version_is_1() {
    assert_eq!(arrowcert_plugin_abi_version(), 1);
}

#[test]
fn name_is_static_utf8() {
    // SAFETY: the plugin returns a static NUL-terminated string.
    let name = unsafe { CStr::from_ptr(arrowcert_plugin_name()) };
    assert_eq!(
        name.to_str().unwrap(),
        "arrowcert reference consumer (arrow-rs 60.1.0)"
    );
    assert_eq!(arrowcert_plugin_name(), arrowcert_plugin_name());
}

#[test]
fn supports_cpu_only() {
    assert_eq!(arrowcert_plugin_supports_device(device::CPU), 1);
    for d in device::ALL.into_iter().filter(|&d| d != device::CPU) {
        assert_eq!(arrowcert_plugin_supports_device(d), 0, "device {d}");
    }
    assert_eq!(arrowcert_plugin_supports_device(0), 0);
    assert_eq!(arrowcert_plugin_supports_device(-1), 0);
}

#[test]
fn free_null_is_a_no_op() {
    // SAFETY: free(NULL) is allowed.
    unsafe { arrowcert_free(std::ptr::null_mut()) };
}

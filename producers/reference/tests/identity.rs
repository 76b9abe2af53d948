//! The identity symbols and the device capability answer.

use std::ffi::CStr;

use arrowcert_producer_reference as plugin;
use arrowcert_sdk::abi::device;

#[test]
fn abi_version_is_one() {
    assert_eq!(plugin::arrowcert_plugin_abi_version(), 1);
}

#[test]
fn name_is_static_and_nul_terminated() {
    let p = plugin::arrowcert_plugin_name();
    assert!(!p.is_null());
    // SAFETY: the plugin returns a pointer to a static C string.
    let name = unsafe { CStr::from_ptr(p) }.to_str().unwrap();
    assert_eq!(name, "arrowcert reference producer (arrow-rs 60.1.0)");
    assert_eq!(plugin::arrowcert_plugin_name(), p, "the same static string");
}

#[test]
fn supports_only_the_cpu() {
    for d in device::ALL {
        assert_eq!(
            plugin::arrowcert_plugin_supports_device(d),
            i32::from(d == device::CPU),
            "device {d}"
        );
    }
    assert_eq!(plugin::arrowcert_plugin_supports_device(0), 0);
    assert_eq!(plugin::arrowcert_plugin_supports_device(-1), 0);
}

#[test]
fn free_null_is_a_no_op() {
    // SAFETY: free(NULL) is allowed.
    unsafe { plugin::arrowcert_free(std::ptr::null_mut()) };
}

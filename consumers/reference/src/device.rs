//! Which device memory this consumer reads: CPU memory, and the emulated
//! device's (ARROW_DEVICE_EXT_DEV) once the harness attached it, after
//! waiting on the array's `sync_event`.

use std::ffi::c_int;

use arrowcert_sdk::abi::{device, ArrowDeviceArray, ArrowDeviceType};
use arrowcert_sdk::device::emulated_ffi::ArrowcertEmulatedDevice;
use arrowcert_sdk::emulated;
use arrowcert_sdk::{PluginError, PluginResult};

/// Takes the emulated device the harness hands over
/// (`harness/include/arrowcert_emulated_device.h`).
///
/// # Safety
/// `table` is NULL or a table valid for the life of the process.
#[no_mangle]
pub unsafe extern "C" fn arrowcert_plugin_attach_emulated_device(
    table: *const ArrowcertEmulatedDevice,
) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe { emulated::attach(table) }
}

/// True for the device types this consumer reads.
pub fn supports(device_type: ArrowDeviceType) -> bool {
    device_type == device::CPU || (device_type == device::EXT_DEV && emulated::attached().is_some())
}

/// Refuses what this consumer cannot read ([`require_readable`]), then
/// makes the buffers safe to read: "If this is non-null then it MUST be
/// used to call the appropriate sync method for the device ... before
/// attempting to access the memory in the buffers." The emulated device's
/// memory is host-addressable, so once the event completed the array is
/// read like a CPU one.
///
/// # Safety
/// `a` is a live device array; its `sync_event`, for EXT_DEV, is NULL or
/// points to an event handle.
pub unsafe fn ready(a: &ArrowDeviceArray, what: &str) -> PluginResult {
    require_readable(a.device_type, what)?;
    if a.device_type == device::EXT_DEV {
        let dev =
            emulated::attached().ok_or_else(|| PluginError::unsupported("no emulated device"))?;
        // SAFETY: forwarded from the caller.
        unsafe { dev.wait_on(a.sync_event) }
            .map_err(|e| PluginError::invalid(format!("{what}: waiting on sync_event: {e}")))?;
    }
    Ok(())
}

/// Refuses data on a device this consumer cannot read, with `ENOSYS` (a
/// limitation, not a producer fault).
pub fn require_readable(device_type: ArrowDeviceType, what: &str) -> PluginResult {
    if supports(device_type) {
        Ok(())
    } else {
        Err(PluginError::unsupported(format!(
            "{what} is on device {}: this consumer reads CPU memory (ARROW_DEVICE_CPU) and the emulated device (ARROW_DEVICE_EXT_DEV) only",
            describe(device_type)
        )))
    }
}

/// A device type by name and number, for messages.
pub fn describe(device_type: ArrowDeviceType) -> String {
    match device::name(device_type) {
        Some(name) => format!("{name} ({device_type})"),
        None => format!("undefined device type {device_type}"),
    }
}

/// Refuses data this consumer cannot read: anything but CPU memory, with
/// `ENOSYS` (a limitation, not a producer fault).
///
/// For CPU there is nothing to synchronise on: the event type of
/// `ARROW_DEVICE_CPU` is "N/A", and "If the ``sync_event`` member is NULL,
/// then it MUST be safe to access the data without any synchronization".
/// A consumer of device memory would have to wait on a non-NULL
/// `sync_event` before reading ("If this is non-null then it MUST be used to
/// call the appropriate sync method for the device").
pub fn require_cpu(device_type: ArrowDeviceType, what: &str) -> PluginResult {
    if device_type == device::CPU {
        Ok(())
    } else {
        Err(PluginError::unsupported(format!(
            "{what} is on device {}: this consumer reads CPU memory (ARROW_DEVICE_CPU) only",
            describe(device_type)
        )))
    }
}

/// Checks that a chunk is on the device its stream declared: "All
/// ``ArrowDeviceArray`` s that are produced by this stream should have the
/// same device type as is set here" and "The next chunk of data MUST be
/// accessible from a device type matching the
/// ``ArrowDeviceArrayStream.device_type``" (`EINVAL`: a producer fault).
pub fn require_declared(
    declared: ArrowDeviceType,
    actual: ArrowDeviceType,
    what: &str,
) -> PluginResult {
    if declared == actual {
        Ok(())
    } else {
        Err(PluginError::invalid(format!(
            "{what} is on device {} but its producer declared {}",
            describe(actual),
            describe(declared)
        )))
    }
}

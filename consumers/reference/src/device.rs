//! Which device memory this consumer reads: CPU only.

use arrowcert::abi::{device, ArrowDeviceType};
use arrowcert::sdk::{PluginError, PluginResult};

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

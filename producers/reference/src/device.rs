//! Devices: this producer's buffers are ordinary CPU memory.
//!
//! PLUGIN_ABI.md: "`device_type`/`device_id` say where the data buffers must
//! live. A producer that cannot honour them returns `ENOSYS`."

use arrowcert::abi::{device, ArrowArray, ArrowDeviceArray, ArrowDeviceType};
use arrowcert::sdk::{PluginError, PluginResult};

/// CDeviceDataInterface.rst: "For device types that do not have an intrinsic
/// notion of a device identifier (e.g., ARROW_DEVICE_CPU), it is recommended
/// to use a device_id of -1 as a convention."
pub const CPU_DEVICE_ID: i64 = -1;

/// True for the one device type this producer can export on.
pub fn supports(device_type: ArrowDeviceType) -> bool {
    device_type == device::CPU
}

/// Accepts exactly (CPU, -1); anything else is `ENOSYS`.
pub fn require_cpu(device_type: ArrowDeviceType, device_id: i64) -> PluginResult {
    if !supports(device_type) {
        return Err(PluginError::unsupported(format!(
            "device_type {device_type} ({}) is not supported: the reference producer \
             exports CPU memory only (ARROW_DEVICE_CPU = {})",
            device::name(device_type).unwrap_or("not a defined device type"),
            device::CPU
        )));
    }
    if device_id != CPU_DEVICE_ID {
        return Err(PluginError::unsupported(format!(
            "device_id {device_id} is not supported for ARROW_DEVICE_CPU: CPU memory has no \
             device identifier, and the reference producer only accepts the spec's \
             convention of -1"
        )));
    }
    Ok(())
}

/// Writes `array` into `out` as a CPU device array, overwriting the whole
/// structure without reading or dropping what was there (the harness fills
/// it with a poison pattern).
///
/// # Safety
/// `out` must be valid for writes of one `ArrowDeviceArray` and aligned.
pub unsafe fn write_cpu(out: *mut ArrowDeviceArray, array: ArrowArray) {
    // SAFETY: `out` is valid for writes (caller); every write below targets a
    // member of `*out` through a raw place, so nothing is read or dropped.
    unsafe {
        // The spec's C producer example starts with
        // "memset(array, 0, sizeof(struct ArrowDeviceArray));": zeroing first
        // also clears the padding after `device_type`, so no poison byte is
        // left anywhere in the structure.
        std::ptr::write_bytes(out, 0, 1);
        (&raw mut (*out).array).write(array);
        (&raw mut (*out).device_id).write(CPU_DEVICE_ID);
        (&raw mut (*out).device_type).write(device::CPU);
        // "If the sync_event member is NULL, then it MUST be safe to access
        // the data without any synchronization": CPU buffers are ready.
        (&raw mut (*out).sync_event).write(std::ptr::null_mut());
        (&raw mut (*out).reserved).write([0; 3]);
    }
}

/// Writes the end-of-stream marker of a device stream: a fully zeroed
/// structure, whose embedded array is therefore released
/// (CDeviceDataInterface.rst: "If the embedded ArrowDeviceArray.array is
/// released, then the end of the stream has been reached").
///
/// # Safety
/// `out` must be valid for writes of one `ArrowDeviceArray` and aligned.
pub unsafe fn write_end_of_stream(out: *mut ArrowDeviceArray) {
    // SAFETY: `out` is valid for writes (caller); all-zero bytes are a valid
    // ArrowDeviceArray (release NULL, reserved 0).
    unsafe { std::ptr::write_bytes(out, 0, 1) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_cpu_minus_one() {
        assert!(require_cpu(device::CPU, -1).is_ok());
        assert_eq!(require_cpu(device::CPU, 0).unwrap_err().code, libc::ENOSYS);
        assert_eq!(require_cpu(device::CUDA, 0).unwrap_err().code, libc::ENOSYS);
        assert_eq!(require_cpu(999, -1).unwrap_err().code, libc::ENOSYS);
        assert!(supports(device::CPU));
        assert!(!supports(device::CUDA_HOST));
    }
}

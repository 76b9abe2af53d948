//! Devices: this producer's buffers are ordinary CPU memory, or, when the
//! harness attached its emulated device (ARROW_DEVICE_EXT_DEV), that
//! device's memory, written by a stream and covered by a recorded event.
//!
//! PLUGIN_ABI.md: "`device_type`/`device_id` say where the data buffers must
//! live. A producer that cannot honour them returns `ENOSYS`."

use std::ffi::c_int;

use arrowcert_sdk::abi::{device, ArrowArray, ArrowDeviceArray, ArrowDeviceType, ArrowSchema};
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

/// Where a device array goes: host memory, or the emulated device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Cpu,
    Emulated,
}

/// The target for (device_type, device_id), or `ENOSYS`.
pub fn target(device_type: ArrowDeviceType, device_id: i64) -> PluginResult<Target> {
    if device_type == device::EXT_DEV {
        return match emulated::attached() {
            Some(dev) if dev.device_id() == device_id => Ok(Target::Emulated),
            Some(dev) => Err(PluginError::unsupported(format!(
                "device_id {device_id} is not the emulated device (its id is {})",
                dev.device_id()
            ))),
            None => Err(PluginError::unsupported(
                "ARROW_DEVICE_EXT_DEV asked for, but no emulated device was attached",
            )),
        };
    }
    require_cpu(device_type, device_id).map(|()| Target::Cpu)
}

/// Writes `array` (exported on the host for `schema`) into `out` on
/// `target`: as is for the CPU, copied onto the emulated device otherwise.
///
/// # Safety
/// `out` must be valid for writes of one `ArrowDeviceArray`; `array` is a
/// live export of `schema`.
pub unsafe fn write_on(
    target: Target,
    schema: &arrow_schema::Schema,
    out: *mut ArrowDeviceArray,
    array: ArrowArray,
) -> PluginResult {
    match target {
        // SAFETY: forwarded.
        Target::Cpu => unsafe { write_cpu(out, array) },
        Target::Emulated => {
            let dev = emulated::attached()
                .ok_or_else(|| PluginError::unsupported("no emulated device"))?;
            let mut c_schema: ArrowSchema = arrowcert_sdk::abi::arrow_rs::export_schema(schema)?;
            // SAFETY: `out` is valid for writes and `array` a live export of
            // this schema (caller).
            let r = unsafe { dev.export(&c_schema, array, out) };
            if let Some(release) = c_schema.release {
                // SAFETY: our own live schema, released once.
                unsafe { release(&mut c_schema) };
            }
            r.map_err(PluginError::io)?;
        }
    }
    Ok(())
}

/// CDeviceDataInterface.rst: "For device types that do not have an intrinsic
/// notion of a device identifier (e.g., ARROW_DEVICE_CPU), it is recommended
/// to use a device_id of -1 as a convention."
pub const CPU_DEVICE_ID: i64 = -1;

/// True for the device types this producer can export on: the CPU, and
/// the emulated device once attached.
pub fn supports(device_type: ArrowDeviceType) -> bool {
    device_type == device::CPU || (device_type == device::EXT_DEV && emulated::attached().is_some())
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

//! Which device types the CUDA plugins serve, and the backend for one.
//!
//! PLUGIN_ABI.md: "`device_type`/`device_id` say where the data buffers must
//! live. A producer that cannot honour them returns `ENOSYS`."

use std::sync::Arc;

use arrowcert_sdk::abi::{device as dt, ArrowDeviceType};
use arrowcert_sdk::device::{self, Device, Kind};
use arrowcert_sdk::{PluginError, PluginResult};

/// The device id the plugins serve: the backend works on device 0.
pub const DEVICE_ID: i64 = 0;

/// The CUDA kind of `device_type`, `None` for anything else (CPU included:
/// these are CUDA-only plugins).
pub fn cuda_kind(device_type: ArrowDeviceType) -> Option<Kind> {
    Kind::from_device_type(device_type).filter(|k| k.is_cuda())
}

/// `arrowcert_plugin_supports_device`: CUDA, CUDA_HOST and CUDA_MANAGED.
pub fn supports(device_type: ArrowDeviceType) -> bool {
    cuda_kind(device_type).is_some()
}

/// A device type by name and number, for messages.
pub fn describe(device_type: ArrowDeviceType) -> String {
    match dt::name(device_type) {
        Some(name) => format!("{name} ({device_type})"),
        None => format!("undefined device type {device_type}"),
    }
}

/// The kind asked for, refused with `ENOSYS` unless it is a CUDA kind.
pub fn require_kind(device_type: ArrowDeviceType, what: &str) -> PluginResult<Kind> {
    cuda_kind(device_type).ok_or_else(|| {
        PluginError::unsupported(format!(
            "{what} is on device {}: this plugin serves CUDA memory only \
             (ARROW_DEVICE_CUDA = {}, ARROW_DEVICE_CUDA_HOST = {}, \
             ARROW_DEVICE_CUDA_MANAGED = {})",
            describe(device_type),
            dt::CUDA,
            dt::CUDA_HOST,
            dt::CUDA_MANAGED
        ))
    })
}

/// The backend serving `kind`, or `ENOSYS` with the reason there is none
/// ("no CUDA driver: ...").
pub fn backend(kind: Kind) -> PluginResult<Arc<dyn Device>> {
    device::backend(kind).map_err(|why| PluginError::unsupported(format!("no CUDA here: {why}")))
}

/// What a producer entry point needs: the kind, device 0, and its backend.
pub fn require_producible(
    device_type: ArrowDeviceType,
    device_id: i64,
) -> PluginResult<(Kind, Arc<dyn Device>)> {
    let kind = require_kind(device_type, "the data asked for")?;
    if device_id != DEVICE_ID {
        return Err(PluginError::unsupported(format!(
            "device_id {device_id} is not supported: this plugin exports on CUDA device \
             {DEVICE_ID} only"
        )));
    }
    Ok((kind, backend(kind)?))
}

/// Device memory this plugin's backend holds (allocated and not freed), for
/// `arrowcert_bytes_allocated`; 0 without CUDA.
pub fn bytes_held() -> i64 {
    device::backend(Kind::Cuda)
        .ok()
        .and_then(|b| b.live_bytes())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serves_the_three_cuda_kinds_only() {
        assert!(supports(dt::CUDA));
        assert!(supports(dt::CUDA_HOST));
        assert!(supports(dt::CUDA_MANAGED));
        assert!(!supports(dt::CPU));
        assert!(!supports(dt::EXT_DEV));
        assert!(!supports(999));
        assert_eq!(require_kind(dt::CPU, "x").unwrap_err().code, libc::ENOSYS);
        assert_eq!(
            require_producible(dt::CUDA, 1).err().map(|e| e.code),
            Some(libc::ENOSYS)
        );
    }

    #[test]
    fn without_cuda_the_refusal_is_enosys_with_the_reason() {
        match require_producible(dt::CUDA, 0) {
            Ok(_) => println!("skipped: this machine has CUDA"),
            Err(e) => {
                assert_eq!(e.code, libc::ENOSYS);
                assert!(e.message.contains("CUDA"), "{}", e.message);
            }
        }
    }
}

//! Devices and their backends: in the plugin SDK (`sdk/src/device/`, with
//! its `cuda` feature on for the harness), which the CUDA plugins share;
//! re-exported here so that `crate::device::...` keeps its meaning.

pub use arrowcert_sdk::device::*;

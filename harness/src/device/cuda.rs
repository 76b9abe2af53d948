//! The CUDA backend (cudarc, the driver loaded at run time). Placeholder
//! until the backend lands: every CUDA case is skipped with this reason.

use std::sync::Arc;

use super::Device;

pub fn backend() -> Result<Arc<dyn Device>, String> {
    Err("the CUDA backend is not built yet".into())
}

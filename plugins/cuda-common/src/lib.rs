//! What arrowcert's CUDA plugins share.
//!
//! Four cdylibs are built on this crate, each a single macro call:
//! `producers/cuda-reference` and `consumers/cuda-reference` (correct by the
//! spec), `producers/cuda-mutants` and `consumers/cuda-mutants` (one
//! deliberate fault each, chosen by `ARROWCERT_MUTANT`). They export and
//! import on ARROW_DEVICE_CUDA, ARROW_DEVICE_CUDA_HOST and
//! ARROW_DEVICE_CUDA_MANAGED only, and every driver call goes through the
//! harness's CUDA backend (`arrowcert_sdk::device::backend`), so no plugin holds
//! CUDA code of its own. Without a CUDA driver every entry point that needs
//! one returns `ENOSYS`, with the backend's reason as the last error.
//!
//! - [`device`]: which device types are served, and the backend for one.
//! - [`mutation`]: the faults the mutant plugins inject.
//! - [`producer`]: device arrays and the device stream, written late on a
//!   producer stream with an event recorded after the writes.
//! - [`consumer`]: moves what it is given, waits on `sync_event`, copies to
//!   the host and reads with arrow-rs.
//! - [`exports`]: the `producer_plugin!` / `consumer_plugin!` macros.
//!
//! The reference plugins' own helpers are compiled in here from their
//! sources (`#[path]`), not copied: the IPC input of the reference
//! producer, and the input, output, import and shape checks of the
//! reference consumer.

/// For the macros: plugin crates need no direct dependency on the SDK.
#[doc(hidden)]
pub use arrowcert_sdk;

pub mod consumer;
pub mod device;
pub mod exports;
pub mod mutation;
pub mod producer;

#[cfg(test)]
mod tests;

/// The reference producer's IPC input helpers (`decode`, `check_exportable`).
#[allow(dead_code)]
#[path = "../../../producers/reference/src/input.rs"]
mod producer_input;

#[allow(dead_code)]
#[path = "../../../consumers/reference/src/beyond.rs"]
mod beyond;
/// The reference consumer's helpers, shared as source: moving inputs
/// (`take_input`), handing back IPC bytes, importing and validating a batch,
/// the structural check it runs first, and copying C strings.
#[allow(dead_code)]
#[path = "../../../consumers/reference/src/input.rs"]
mod consumer_input;
#[allow(dead_code)]
#[path = "../../../consumers/reference/src/output.rs"]
mod output;
#[allow(dead_code)]
#[path = "../../../consumers/reference/src/read.rs"]
mod read;
#[allow(dead_code)]
#[path = "../../../consumers/reference/src/shape.rs"]
mod shape;
#[allow(dead_code)]
#[path = "../../../consumers/reference/src/strings.rs"]
mod strings;

//! The reference producer plugin of arrowcert: exports Arrow data through
//! every producer entry point of the plugin contract (`shared/PLUGIN_ABI.md`,
//! `harness/include/arrowcert_plugin.h`), for the CPU device, with arrow-rs
//! 60.1.0 doing the zero-copy export of schemas and arrays.
//!
//! It is meant to be correct by the spec, so that the harness can check
//! consumers against it. Every module has one job:
//!
//! - [`identity`]: the identity symbols and the error/free helpers.
//! - [`input`]: decoding the IPC bytes an entry point is given.
//! - [`device`]: which devices are accepted and how a CPU device array is
//!   written into a (poisoned) out structure.
//! - [`plain`]: the C data and C stream interface entry points and the device
//!   array entry point.
//! - [`device_stream`]: this crate's own `ArrowDeviceArrayStream`.
//! - [`async_producer`]: the async device stream producer (a thread of its
//!   own that drives a consumer's `ArrowAsyncDeviceStreamHandler`).
//! - [`sliced`]: the sliced stream entry points (rows of the whole stream,
//!   across batches, zero-copy).
//! - [`metadata`]: the `ArrowSchema.metadata` key/value encoding.
//! - [`guard`]: keeping panics from unwinding out of C callbacks.
//!
//! The entry points are `unsafe extern "C"` functions: they take raw
//! pointers from the caller, whose validity is the caller's responsibility
//! (the `# Safety` section of each says what is required).

pub mod async_producer;
pub mod device;
pub mod device_stream;
pub mod guard;
pub mod identity;
pub mod input;
pub mod metadata;
pub mod plain;
pub mod sliced;

pub use async_producer::arrowcert_produce_async;
pub use device_stream::arrowcert_produce_device_stream;
pub use identity::{
    arrowcert_free, arrowcert_last_error, arrowcert_plugin_abi_version, arrowcert_plugin_name,
    arrowcert_plugin_supports_device, PLUGIN_NAME,
};
pub use plain::{
    arrowcert_produce_array, arrowcert_produce_device_array, arrowcert_produce_schema,
    arrowcert_produce_stream,
};
pub use sliced::{
    arrowcert_produce_sliced_async, arrowcert_produce_sliced_device_stream,
    arrowcert_produce_sliced_stream,
};

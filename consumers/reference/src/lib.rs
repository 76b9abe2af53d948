//! The reference consumer plugin of arrowcert: imports with arrow-rs and is
//! correct by the spec.
//!
//! It implements every consumer entry point of the plugin contract
//! (`shared/PLUGIN_ABI.md`, `harness/include/arrowcert_plugin.h`):
//!
//! - [`identity`] holds `arrowcert_plugin_abi_version`,
//!   `arrowcert_plugin_name`, `arrowcert_plugin_supports_device`,
//!   `arrowcert_last_error` and `arrowcert_free`;
//! - [`array`] holds `arrowcert_consume_array` and
//!   `arrowcert_consume_device_array`;
//! - [`stream`] holds `arrowcert_consume_stream` and
//!   `arrowcert_consume_device_stream`;
//! - [`asynchronous`] holds `arrowcert_consume_async_start` and
//!   `arrowcert_consume_async_finish`.
//!
//! Every entry point moves what it is given (bitwise copy, source marked
//! released), imports it with arrow-rs ([`read`]), validates every value
//! (`ArrayData::validate_full`, then what it leaves unchecked: a decimal's
//! precision within its bit width, a dense union's offsets in order;
//! `beyond`), releases everything it imported, and hands back what it read
//! as one Arrow IPC stream ([`output`]).
//!
//! Limitations (refused cleanly with `ENOSYS`, after releasing the input):
//! only CPU memory (`ARROW_DEVICE_CPU`) is read.

#![deny(unsafe_op_in_unsafe_fn)]

pub mod array;
pub mod asynchronous;
mod beyond;
mod device;
pub mod identity;
mod input;
mod output;
mod read;
mod shape;
pub mod stream;
mod strings;

pub use array::{arrowcert_consume_array, arrowcert_consume_device_array};
pub use asynchronous::{arrowcert_consume_async_finish, arrowcert_consume_async_start};
pub use identity::{
    arrowcert_free, arrowcert_last_error, arrowcert_plugin_abi_version, arrowcert_plugin_name,
    arrowcert_plugin_supports_device, PLUGIN_NAME,
};
pub use stream::{arrowcert_consume_device_stream, arrowcert_consume_stream};

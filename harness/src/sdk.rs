//! Helpers for writing arrowcert plugins in Rust: the plugin SDK's
//! (`sdk/`, crate `arrowcert-sdk`), re-exported here under the path the
//! harness's tests and older plugins use (`arrowcert::sdk::...`). A new
//! plugin depends on `arrowcert-sdk` alone.

pub use arrowcert_sdk::{
    device_stream, emulated, entry, ipc, last_error_ptr, non_null, out, panic_message,
    set_last_error, PluginError, PluginResult,
};

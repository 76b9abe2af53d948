//! Running code that may panic on untrusted input with the panic caught:
//! in the plugin SDK (`sdk/src/quiet.rs`), whose IPC decoder uses it;
//! re-exported here so that `crate::quiet::...` keeps its meaning.

pub use arrowcert_sdk::quiet::*;

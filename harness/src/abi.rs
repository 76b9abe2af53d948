//! The Arrow C ABI's raw layouts: they live in the plugin SDK
//! (`sdk/src/abi/`, crate `arrowcert-sdk`), which plugins link without the
//! harness; re-exported here so that `crate::abi::...` keeps its meaning.

pub use arrowcert_sdk::abi::*;

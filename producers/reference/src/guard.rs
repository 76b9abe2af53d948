//! Keeping panics inside the plugin.
//!
//! Entry points go through `arrowcert_sdk::entry`; the callbacks this
//! plugin installs in structures it hands out (`get_next`, `release`,
//! `request`, `extract_data`, ...) are called by foreign code, so a panic
//! must never unwind out of them either.

use std::panic::{catch_unwind, AssertUnwindSafe};

/// Runs a callback body; if it panics, returns `on_panic` instead.
pub fn callback<T>(on_panic: T, body: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or(on_panic)
}

pub use arrowcert_sdk::panic_message;

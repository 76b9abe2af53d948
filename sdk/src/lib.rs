//! arrowcert-sdk: the plugin contract's types and helpers, for Rust (and,
//! through `harness/include/`, C) plugin authors, in a crate of its own so
//! that a plugin does not link the harness (no clap, proptest or
//! libloading; cudarc only with the `cuda` feature, for CUDA plugins).
//!
//! - [`abi`]: the Arrow C ABI's raw layouts (and DLPack's), and the
//!   conversions to and from arrow-rs;
//! - [`device`]: the device backends (CPU, the emulated device, CUDA behind
//!   the `cuda` feature) and [`device::mirror`], which moves an array tree's
//!   buffers between host and device;
//! - [`format`](mod@format): format strings parsed;
//! - the helpers below: an entry point is a thin `extern "C"` function that
//!   calls [`entry`] with a closure returning [`PluginResult`]; `entry`
//!   turns errors and panics into an errno return value and a message for
//!   `arrowcert_last_error`. [`ipc`] decodes what the harness asks for and
//!   encodes what a consumer read; [`out`] hands bytes to the harness in
//!   memory that `arrowcert_free` releases; [`device_stream`] and
//!   [`emulated`] serve the device entry points.
//!
//! The harness re-exports these modules under their old paths
//! (`arrowcert::abi`, `arrowcert::sdk`, ...).

pub mod abi;
pub mod device;
pub mod format;
pub mod quiet;

/// The plugin contract's version (`shared/PLUGIN_ABI.md`, "Versioning"):
/// what `arrowcert_plugin_abi_version()` returns, and the one the harness
/// loads.
pub const PLUGIN_ABI_VERSION: i32 = 1;

pub mod device_stream;
pub mod emulated;
pub mod ipc;
pub mod out;

use std::cell::RefCell;
use std::ffi::{c_char, c_int, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// An error an entry point returns: an errno value and a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginError {
    pub code: c_int,
    pub message: String,
}

impl PluginError {
    pub fn new(code: c_int, message: impl Into<String>) -> Self {
        PluginError {
            code,
            message: message.into(),
        }
    }
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(libc::EINVAL, message)
    }
    pub fn unsupported(message: impl Into<String>) -> Self {
        Self::new(libc::ENOSYS, message)
    }
    pub fn io(message: impl Into<String>) -> Self {
        Self::new(libc::EIO, message)
    }
}

impl From<arrow_schema::ArrowError> for PluginError {
    fn from(e: arrow_schema::ArrowError) -> Self {
        PluginError::invalid(e.to_string())
    }
}

pub type PluginResult<T = ()> = Result<T, PluginError>;

thread_local! {
    static LAST_ERROR: RefCell<Option<CString>> = const { RefCell::new(None) };
}

/// Records `message` as this thread's last error.
pub fn set_last_error(message: &str) {
    let c = CString::new(message.replace('\0', "\\0")).unwrap_or_default();
    LAST_ERROR.with(|e| *e.borrow_mut() = Some(c));
}

/// This thread's last error message, NULL if none. Valid until the next
/// entry point call on this thread.
pub fn last_error_ptr() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ref().map_or(std::ptr::null(), |c| c.as_ptr()))
}

/// Runs an entry point body: clears the last error, returns 0 on success,
/// the errno on failure (with the message recorded), and EIO if the body
/// panicked, so that no panic unwinds across the C boundary.
pub fn entry(body: impl FnOnce() -> PluginResult) -> c_int {
    LAST_ERROR.with(|e| *e.borrow_mut() = None);
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => 0,
        Ok(Err(e)) => {
            set_last_error(&e.message);
            if e.code == 0 {
                libc::EIO
            } else {
                e.code
            }
        }
        Err(panic) => {
            set_last_error(&format!("plugin panicked: {}", panic_message(&*panic)));
            libc::EIO
        }
    }
}

/// The text of a panic's payload (a `&str` or `String` message), or
/// "panic".
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic".into())
}

/// Checks that an out-pointer argument is not NULL.
pub fn non_null<T>(ptr: *mut T, what: &str) -> PluginResult<*mut T> {
    if ptr.is_null() {
        Err(PluginError::invalid(format!("{what} is NULL")))
    } else {
        Ok(ptr)
    }
}

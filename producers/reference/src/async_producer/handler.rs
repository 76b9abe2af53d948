//! The consumer's `ArrowAsyncDeviceStreamHandler`, as the producer thread
//! calls it.
//!
//! Only the one producer thread owns a [`Handler`], so its callbacks never
//! overlap: "A producer should wait for handler callbacks to return before
//! calling the next handler callback, and before calling the release
//! callback." [`Handler::release`] consumes the value, so nothing can be
//! called after it.

use std::ffi::{c_char, c_int, CString};

use arrowcert_sdk::abi::{
    ArrowAsyncDeviceStreamHandler, ArrowAsyncProducer, ArrowAsyncTask, ArrowSchema,
};
use arrowcert_sdk::{PluginError, PluginResult};

/// A handler the producer drives until it releases it.
pub struct Handler(*mut ArrowAsyncDeviceStreamHandler);

// SAFETY: the handler is handed to the producer to be called "from any
// thread of the plugin" (PLUGIN_ABI.md; CDeviceDataInterface.rst: callbacks
// "are not guaranteed to be called from the same thread every time"); only
// the one owner of this value touches it.
unsafe impl Send for Handler {}

impl Handler {
    /// Checks that the mandatory callbacks are set, without calling any.
    ///
    /// # Safety
    /// `ptr` must point to a handler the consumer initialised, that stays
    /// valid and is not touched by the consumer's side until its release
    /// callback is called.
    pub unsafe fn new(ptr: *mut ArrowAsyncDeviceStreamHandler) -> PluginResult<Self> {
        if ptr.is_null() {
            return Err(PluginError::invalid("handler is NULL"));
        }
        // SAFETY: non-NULL and valid for reads (caller).
        let h = unsafe { &*ptr };
        let missing: Vec<&str> = [
            ("on_schema", h.on_schema.is_none()),
            ("on_next_task", h.on_next_task.is_none()),
            ("on_error", h.on_error.is_none()),
            ("release", h.release.is_none()),
        ]
        .into_iter()
        .filter_map(|(name, none)| none.then_some(name))
        .collect();
        if !missing.is_empty() {
            return Err(PluginError::invalid(format!(
                "handler callbacks are NULL: {} (all four are mandatory)",
                missing.join(", ")
            )));
        }
        Ok(Handler(ptr))
    }

    /// "must be populated before calling any callbacks".
    pub fn set_producer(&mut self, producer: *mut ArrowAsyncProducer) {
        // SAFETY: the handler is valid and ours until release (see `new`).
        unsafe { (*self.0).producer = producer };
    }

    pub fn on_schema(&mut self, schema: &mut ArrowSchema) -> c_int {
        // SAFETY: the handler is valid and ours until release (see `new`);
        // the callback was set by the consumer, whose contract is to accept
        // this call with a schema it may move.
        unsafe {
            match (*self.0).on_schema {
                Some(f) => f(self.0, schema),
                None => libc::EINVAL,
            }
        }
    }

    /// `task` None is the end of the stream: "The producer signals the end of
    /// the stream by passing NULL for the ArrowAsyncTask pointer".
    pub fn on_next_task(&mut self, task: Option<&mut ArrowAsyncTask>) -> c_int {
        let task = task.map_or(std::ptr::null_mut(), |t| t as *mut ArrowAsyncTask);
        // SAFETY: as in `on_schema`; the task outlives the call, and NULL
        // metadata is allowed ("If not NULL, the lifetime is only the scope
        // of the call").
        unsafe {
            match (*self.0).on_next_task {
                Some(f) => f(self.0, task, std::ptr::null()),
                None => libc::EINVAL,
            }
        }
    }

    /// Reports an error; "After calling this, the release callback will be
    /// called as the last call on this struct."
    pub fn on_error(&mut self, code: c_int, message: &str) {
        let message = CString::new(message.replace('\0', "\\0")).unwrap_or_default();
        let message: *const c_char = message.as_ptr();
        // SAFETY: as in `on_schema`; the message outlives the call ("their
        // lifetime is only valid during the scope of this call").
        unsafe {
            if let Some(f) = (*self.0).on_error {
                f(self.0, code, message, std::ptr::null());
            }
        }
    }

    /// Calls the handler's release callback; the handler is the consumer's
    /// again afterwards and is never touched by the producer.
    pub fn release(self) {
        // SAFETY: as in `on_schema`; called once, since `self` is consumed.
        unsafe {
            if let Some(f) = (*self.0).release {
                f(self.0);
            }
        }
    }
}

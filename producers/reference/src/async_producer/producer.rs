//! The `ArrowAsyncProducer` this plugin hands to the consumer through
//! `handler->producer`, and its `request` / `cancel` callbacks.
//!
//! "The producer maintains ownership of the ArrowAsyncProducer and must clean
//! it up *after* calling the release callback on the
//! ArrowAsyncDeviceStreamHandler": [`ProducerBox`] is owned by the producer
//! thread and dropped after `handler->release` returned.

use std::ffi::c_void;
use std::sync::Arc;

use arrowcert_sdk::abi::{device, ArrowAsyncProducer};

use super::flow::Flow;
use crate::guard;

/// A heap-allocated `ArrowAsyncProducer`, its flow state (through
/// `private_data`) and the bytes of `additional_metadata`.
pub struct ProducerBox {
    raw: *mut ArrowAsyncProducer,
    /// Owns the bytes `additional_metadata` points to: "If not NULL it MUST
    /// be valid for at least the lifetime of this object." A `Vec`'s heap
    /// buffer does not move when the `Vec` does.
    _metadata: Vec<u8>,
}

impl ProducerBox {
    /// `metadata` must be empty (no additional metadata) or an encoding in the
    /// `ArrowSchema.metadata` format.
    pub fn new(flow: Arc<Flow>, metadata: Vec<u8>) -> Self {
        let additional_metadata = if metadata.is_empty() {
            std::ptr::null()
        } else {
            metadata.as_ptr().cast()
        };
        let raw = Box::into_raw(Box::new(ArrowAsyncProducer {
            device_type: device::CPU,
            request: Some(request),
            cancel: Some(cancel),
            additional_metadata,
            private_data: Arc::into_raw(flow).cast_mut().cast::<c_void>(),
        }));
        ProducerBox {
            raw,
            _metadata: metadata,
        }
    }

    /// The address handed to the consumer (stable until drop).
    pub fn as_ptr(&self) -> *mut ArrowAsyncProducer {
        self.raw
    }
}

impl Drop for ProducerBox {
    fn drop(&mut self) {
        // SAFETY: `raw` came from Box::into_raw in `new` and is freed only
        // here; by the time this runs the handler was released, so the
        // consumer no longer uses it ("MUST remain valid at least until just
        // before calling release on the stream handler object").
        let producer = unsafe { Box::from_raw(self.raw) };
        // SAFETY: private_data is the Arc::into_raw of `new`, reclaimed once.
        drop(unsafe { Arc::from_raw(producer.private_data.cast_const().cast::<Flow>()) });
    }
}

/// The flow state of a producer this module created.
///
/// # Safety
/// `this` must be NULL or a producer created by [`ProducerBox::new`] that was
/// not dropped yet.
unsafe fn flow_of<'a>(this: *mut ArrowAsyncProducer) -> Option<&'a Flow> {
    if this.is_null() {
        return None;
    }
    // SAFETY: non-NULL and live (caller); private_data is an Arc<Flow> the
    // ProducerBox keeps alive, and Flow is Sync.
    unsafe { (*this).private_data.cast_const().cast::<Flow>().as_ref() }
}

/// `request`: records credits (or the error of `n <= 0`) and wakes the
/// producer thread; never calls a handler callback.
///
/// # Safety
/// `this` is the live ArrowAsyncProducer this callback was installed in; the interface
/// keeps it valid until just before the handler's release.
unsafe extern "C" fn request(this: *mut ArrowAsyncProducer, n: i64) {
    guard::callback((), || {
        // SAFETY: the consumer calls this on the producer it was given,
        // while it is live.
        if let Some(flow) = unsafe { flow_of(this) } {
            flow.request(n);
        }
    })
}

/// `cancel`: sets the flag and wakes the producer thread; idempotent and
/// thread-safe. "This MUST NOT call any consumer-side handlers other than
/// on_error": it calls none.
///
/// # Safety
/// `this` is the live ArrowAsyncProducer this callback was installed in; the interface
/// keeps it valid until just before the handler's release.
unsafe extern "C" fn cancel(this: *mut ArrowAsyncProducer) {
    guard::callback((), || {
        // SAFETY: as in `request`.
        if let Some(flow) = unsafe { flow_of(this) } {
            flow.cancel();
        }
    })
}

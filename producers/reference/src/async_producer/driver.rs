//! The producer thread: drives one handler from `on_schema` to `release`.
//!
//! Sequence (CDeviceDataInterface.rst, "Possible Sequence Diagram"):
//! `producer` set, `on_schema`, then one `on_next_task` per batch as the
//! consumer's credits allow, `on_next_task(NULL)` at the end, then `release`;
//! `on_error` before `release` when the consumer misused `request`; only
//! `release` when the consumer refused a callback or cancelled.

use std::ffi::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use arrow_array::ffi::FFI_ArrowSchema;
use arrow_array::RecordBatch;
use arrowcert_sdk::abi::arrow_rs::{export_batch, schema_from_arrow_rs};
use arrowcert_sdk::abi::ops::Owned;

use super::flow::{Flow, Next};
use super::handler::Handler;
use super::producer::ProducerBox;
use super::task::new_task;
use crate::guard::panic_message;

/// Everything the thread needs, prepared (and validated) before it starts.
pub struct Job {
    pub handler: Handler,
    /// Exported before the thread started, so that a schema that cannot be
    /// exported is a synchronous error.
    pub schema: FFI_ArrowSchema,
    pub batches: Vec<RecordBatch>,
    /// Encoded `additional_metadata` (empty: NULL).
    pub metadata: Vec<u8>,
}

/// How delivery ended, i.e. what happens before `release`.
#[derive(Debug)]
enum Ending {
    /// Every batch and the end-of-stream task were delivered.
    Finished,
    /// `cancel` was called: "Successful cancelling MUST NOT result in a
    /// producer calling on_error, instead it should ... eventually just call
    /// release".
    Cancelled,
    /// `on_schema` or `on_next_task` returned non-zero: "the producer should
    /// not call the on_error callback, but instead should eventually call
    /// release".
    Refused,
    /// An error to report: "If the producer encounters an error during
    /// processing, it should call the on_error callback, and then call
    /// release after it returns."
    Failed(c_int, String),
}

/// Runs the job to the end. Never panics out, never leaves the handler
/// unreleased, frees the `ArrowAsyncProducer` only after `release`.
pub fn run(job: Job) {
    let Job {
        mut handler,
        schema,
        batches,
        metadata,
    } = job;
    let flow = Arc::new(Flow::new());
    let producer = ProducerBox::new(flow.clone(), metadata);
    // "the producer *MUST* populate the ArrowAsyncProducer member before
    // calling this function [on_schema]".
    handler.set_producer(producer.as_ptr());

    // on_error is allowed only while the consumer accepted the stream: "A
    // producer that receives a non-zero result here must not subsequently
    // call anything other than the release callback on this object."
    let mut may_report = false;
    let ending = catch_unwind(AssertUnwindSafe(|| {
        deliver(&mut handler, &flow, schema, &batches, &mut may_report)
    }))
    .unwrap_or_else(|panic| {
        Ending::Failed(
            libc::EIO,
            format!("reference producer panicked: {}", panic_message(&*panic)),
        )
    });
    if let Ending::Failed(code, message) = &ending {
        if may_report {
            handler.on_error(*code, message);
        }
    }
    handler.release();
    // "The producer maintains ownership of the ArrowAsyncProducer and must
    // clean it up *after* calling the release callback".
    drop(producer);
}

fn deliver(
    handler: &mut Handler,
    flow: &Flow,
    schema: FFI_ArrowSchema,
    batches: &[RecordBatch],
    may_report: &mut bool,
) -> Ending {
    let mut schema = schema_from_arrow_rs(schema);
    let rc = handler.on_schema(&mut schema);
    // "The ArrowSchema passed to the on_schema callback must be released
    // independently, with the object itself needing to be moved to a consumer
    // owned ArrowSchema object": if the consumer did not move it, it is still
    // ours to release.
    if !schema.is_released() {
        schema.release();
    }
    if rc != 0 {
        return Ending::Refused;
    }
    *may_report = true;

    for batch in batches {
        match flow.wait_for_credit() {
            Next::Deliver => {}
            Next::Cancelled => return Ending::Cancelled,
            Next::Failed(message) => return Ending::Failed(libc::EINVAL, message),
        }
        let mut task = new_task(export_batch(batch));
        if handler.on_next_task(Some(&mut task)) != 0 {
            // The task is the consumer's either way: "If the consumer does
            // not care about the data that is owned by this task, it must
            // still call extract_data so that the producer can perform any
            // required cleanup." Freeing it here could race a copy the
            // consumer kept.
            *may_report = false;
            return Ending::Refused;
        }
    }

    // The end-of-stream task is not an array, so it needs no credit; a
    // cancel or a request error that came in meanwhile still takes effect.
    match flow.poll_stop() {
        Some(Next::Cancelled) => return Ending::Cancelled,
        Some(Next::Failed(message)) => return Ending::Failed(libc::EINVAL, message),
        Some(Next::Deliver) | None => {}
    }
    // Whatever the consumer answers, release is next.
    let _ = handler.on_next_task(None);
    *may_report = false;
    Ending::Finished
}

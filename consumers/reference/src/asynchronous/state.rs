//! What the async handler has received, shared by the handler (producer
//! threads) and the token (the harness thread calling finish).
//!
//! The state lives in an `Arc`: the handler's `private_data` holds one
//! reference until its release callback, the token holds the other until
//! finish, so neither side frees it under the other. The mutex is never held
//! while producer code runs (extract_data, request, array release callbacks),
//! so a slow or misbehaving producer cannot stall finish past its timeout.

use std::ffi::c_int;
use std::fmt;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use arrowcert_sdk::{PluginError, PluginResult};

/// The last callback the handler saw, for the timeout message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    Nothing,
    Schema,
    Task(u64),
    EndOfStream,
    Error(c_int),
}

impl fmt::Display for Seen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Seen::Nothing => write!(f, "no callback at all (on_schema never came)"),
            Seen::Schema => write!(f, "on_schema"),
            Seen::Task(n) => write!(f, "on_next_task with task #{n}"),
            Seen::EndOfStream => write!(f, "on_next_task(NULL), the end of stream"),
            Seen::Error(code) => write!(f, "on_error with error {code}"),
        }
    }
}

/// An error the handler recorded. A provisional one (an `extract_data`
/// failure, which "should be followed only by the producer calling the
/// ``on_error`` callback") is replaced by the error that follows.
#[derive(Debug)]
struct Failure {
    error: PluginError,
    provisional: bool,
}

/// Everything the callbacks recorded.
#[derive(Debug)]
pub struct Received {
    pub schema: Option<SchemaRef>,
    pub batches: Vec<RecordBatch>,
    /// Non-NULL tasks seen.
    pub tasks: u64,
    pub end_of_stream: bool,
    pub released: bool,
    /// The producer on_schema saw (its address), for a cancel.
    pub producer: usize,
    /// This consumer called the producer's cancel.
    pub cancelled: bool,
    pub last_seen: Seen,
    failure: Option<Failure>,
}

impl Received {
    fn new() -> Self {
        Received {
            schema: None,
            batches: Vec::new(),
            tasks: 0,
            end_of_stream: false,
            released: false,
            producer: 0,
            cancelled: false,
            last_seen: Seen::Nothing,
            failure: None,
        }
    }

    /// The error recorded so far, provisional ones excluded.
    pub fn failed(&self) -> Option<&PluginError> {
        self.failure
            .as_ref()
            .filter(|f| !f.provisional)
            .map(|f| &f.error)
    }

    /// Records an error; the first definitive one wins.
    pub fn fail(&mut self, error: PluginError) {
        if self.failed().is_none() {
            self.failure = Some(Failure {
                error,
                provisional: false,
            });
        }
    }

    /// Records an error that a later one replaces.
    pub fn fail_provisionally(&mut self, error: PluginError) {
        if self.failure.is_none() {
            self.failure = Some(Failure {
                error,
                provisional: true,
            });
        }
    }

    /// What finish returns once release came: the producer's (or this
    /// consumer's) error, or the schema and every batch, moved out.
    pub fn take_outcome(&mut self) -> PluginResult<(SchemaRef, Vec<RecordBatch>)> {
        if let Some(failure) = self.failure.take() {
            return Err(failure.error);
        }
        let schema = self.schema.clone().ok_or_else(|| {
            PluginError::io("the handler was released without on_schema or on_error")
        })?;
        // After a cancel the producer "must eventually stop calling
        // on_next_task and then subsequently call release": no end of
        // stream comes, and what was received is what finish returns.
        if !self.end_of_stream && !self.cancelled {
            // "The producer signals the end of the stream by passing ``NULL``
            // for the ``ArrowAsyncTask`` pointer"; without it (and without
            // on_error) the stream was cut short.
            return Err(PluginError::io(format!(
                "the handler was released after {} task(s) without the end of stream \
                 (on_next_task with a NULL task) and without on_error",
                self.tasks
            )));
        }
        Ok((schema, std::mem::take(&mut self.batches)))
    }
}

/// The shared state: what was received, and a condition variable signalled
/// by the handler's release.
#[derive(Debug)]
pub struct State {
    received: Mutex<Received>,
    released: Condvar,
}

impl State {
    pub fn new() -> Self {
        State {
            received: Mutex::new(Received::new()),
            released: Condvar::new(),
        }
    }

    /// Locks the state. A panic caught in a callback may have poisoned the
    /// mutex; the data stays consistent (every update is a single
    /// assignment or push), so the poison is ignored.
    pub fn lock(&self) -> MutexGuard<'_, Received> {
        self.received.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Marks the handler released and wakes finish.
    pub fn mark_released(&self) {
        self.lock().released = true;
        self.released.notify_all();
    }

    /// Waits until the handler was released, at most `timeout`; on timeout,
    /// `ETIMEDOUT` naming the last callback seen (and the batches received
    /// so far are dropped, releasing the producer's arrays).
    pub fn wait_released(&self, timeout: Duration) -> PluginResult<MutexGuard<'_, Received>> {
        let (mut received, _) = self
            .released
            .wait_timeout_while(self.lock(), timeout, |r| !r.released)
            .unwrap_or_else(|e| e.into_inner());
        if received.released {
            return Ok(received);
        }
        let message = format!(
            "the async producer did not call the handler's release within {} ms; \
             last callback seen: {}; {} task(s) received",
            timeout.as_millis(),
            received.last_seen,
            received.tasks
        );
        let dropped = std::mem::take(&mut received.batches);
        drop(received);
        drop(dropped);
        Err(PluginError::new(libc::ETIMEDOUT, message))
    }
}

//! The harness's async device stream producer, for consumers under test.
//!
//! It drives the consumer's handler as a conforming producer would (the
//! handler's `producer` set before on_schema, tasks only against credits,
//! callbacks one at a time, on_next_task(NULL) or on_error, then release),
//! from one producer thread or a new thread per callback, and records what
//! the consumer does with it:
//! - every `request(n)` and `cancel`, with whether it came from inside
//!   on_error or the handler's release (on the thread running it:
//!   `consumer.async.on-error`, `consumer.async.release-no-producer`), or
//!   from any other thread once the handler's release was called
//!   (`consumer.async.producer-lifetime`; the producer structure is never
//!   freed, so a late call is seen rather than a crash); `request(n <= 0)` is
//!   `consumer.async.request-positive` (SHOULD: "It is invalid", no RFC
//!   word) and is otherwise ignored;
//! - a stall: no credit for [`AsyncPlan::stall_after`] while batches remain
//!   and the consumer did not cancel is `consumer.async.request` ("never
//!   needs more tasks than it asked for"); the harness then ends the stream
//!   with on_error(ETIMEDOUT) and release, so the consumer can finish;
//! - `extract_data` calls per task (`consumer.async.extract-once`). As soon
//!   as on_next_task returns, the task structure the harness passed points
//!   at a tombstone: an extraction through it (the consumer kept the
//!   pointer instead of moving the task) is `consumer.async.task-scope`;
//! - the schema passed to on_schema: still live when on_schema returns is
//!   `consumer.async.schema-moved` (the harness then releases it), and the
//!   structure is overwritten with poison (release NULL) either way;
//! - the error message and metadata and the task metadata are overwritten
//!   as soon as their callback returns (`consumer.async.copies` is judged
//!   from what the consumer reports).
//!
//! Arrays and the schema go through the case's [`Ledger`], with release
//! callbacks that judge the release rules; one never released is
//! `consumer.async.release`.

use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use super::encode::{Node, SchemaNode};
use super::raw::Ledger;
use crate::abi::{
    ArrowAsyncDeviceStreamHandler, ArrowAsyncProducer, ArrowAsyncTask, ArrowDeviceArray,
    ArrowSchema, Plain,
};
use crate::asynchronous::schedule::{Delivery, End, Late, MAX_LATE_TASKS};
use crate::plugin::{CallError, Plugin};

type Handler = ArrowAsyncDeviceStreamHandler;

/// What the error message buffer holds once on_error returned.
pub const MESSAGE_OVERWRITTEN: &str =
    "<arrowcert: this on_error message was overwritten when on_error returned>";

/// The message of an injected error.
pub const ERROR_MESSAGE: &str = "arrowcert async producer: injected failure after task";

/// The code of an injected error.
pub const ERROR_CODE: c_int = libc::EIO;

/// What the harness's producer delivers, and how.
#[derive(Debug, Clone)]
pub struct AsyncPlan {
    pub schema: SchemaNode,
    pub chunks: Vec<Node>,
    pub delivery: Delivery,
    /// Waiting this long for a credit (not cancelled) is a stall.
    pub stall_after: Duration,
}

/// What the consumer did, as the producer saw it.
#[derive(Debug, Clone, Default)]
pub struct AsyncReport {
    pub requests: Vec<i64>,
    pub cancelled: bool,
    /// Non-NULL tasks delivered.
    pub delivered: usize,
    /// extract_data calls per delivered task (through its live record).
    pub extracts: Vec<u32>,
    /// Tasks extracted through the structure after on_next_task returned.
    pub out_of_scope: Vec<usize>,
    pub stalled: Option<String>,
    /// The consumer refused on_schema (`None`: not refused) or task k.
    pub refused: Option<String>,
    /// The code it refused with.
    pub refused_code: Option<c_int>,
    /// The error the harness sent, if it did: (code, message).
    pub error_sent: Option<(c_int, String)>,
    /// The handler's release was called.
    pub released: bool,
    /// The driver finished (every callback returned).
    pub finished: bool,
    /// Asked to cancel (`End::Cancel`), the consumer could not be made to:
    /// why.
    pub cancel_problem: Option<String>,
    /// Tasks from this index on were delivered after the consumer's cancel.
    pub late_from: Option<usize>,
    /// How many tasks came after the cancel.
    pub late_tasks: usize,
    /// on_error came after the cancel.
    pub late_error: bool,
}

impl AsyncReport {
    /// The indices of the tasks delivered after the consumer's cancel.
    pub fn late(&self) -> std::ops::Range<usize> {
        self.late_from.map_or(0..0, |f| f..f + self.late_tasks)
    }
}

/// Where a consumer run ended.
pub struct ConsumerRun {
    /// What finish returned; `None`: it did not return in time.
    pub result: Option<Result<Vec<u8>, CallError>>,
    pub report: AsyncReport,
    /// Memory that must outlive the consumer's possible late calls (freed
    /// only when the case ended cleanly).
    keep: Option<Arc<Session>>,
    /// The producer thread, joined when the case ended cleanly (it has
    /// finished then).
    driver: Option<std::thread::JoinHandle<()>>,
}

impl ConsumerRun {
    /// Frees the run's producer-side state when nothing can call into it
    /// any more; leaks it otherwise. A clean end leaves nothing of the run
    /// in malloc'd memory (its producer record lives in [`lasting`]
    /// memory), so repeated runs hold no more bytes than one: what a
    /// consumer's own growth is measured against.
    pub fn end(mut self, clean: bool) {
        if let Some(s) = self.keep.take() {
            if clean {
                forget_session(s.id);
                if let Some(d) = self.driver.take() {
                    let _ = d.join();
                }
                drop(s);
            } else {
                std::mem::forget(s);
            }
        }
    }
}

/// The sessions a harness producer may still be called for, by id. A
/// producer's private_data is its session's id, not a pointer: a call that
/// comes after its case ended finds nothing here and is ignored, instead of
/// reaching freed memory. An entry goes when its case ends cleanly; an
/// unclean case leaves it (and its session) for good.
static SESSIONS: Mutex<Vec<(usize, Weak<Session>)>> = Mutex::new(Vec::new());
static NEXT_SESSION: AtomicUsize = AtomicUsize::new(1);

fn sessions() -> MutexGuard<'static, Vec<(usize, Weak<Session>)>> {
    SESSIONS.lock().unwrap_or_else(|e| e.into_inner())
}

fn forget_session(id: usize) {
    sessions().retain(|(i, _)| *i != id);
}

/// Memory for producer records, which are never freed (a consumer may call
/// one after its case ended, and must reach a live structure): taken from
/// pages mapped for them rather than from malloc, so the allocation
/// tracker, which judges consumers' memory across repeated runs, does not
/// count the harness's records as anyone's growth. Falls back to a leaked
/// box if the mapping fails.
fn lasting(p: ArrowAsyncProducer) -> *mut ArrowAsyncProducer {
    const CHUNK: usize = 64 * 1024;
    static ARENA: Mutex<(usize, usize)> = Mutex::new((0, 0));
    let size = std::mem::size_of::<ArrowAsyncProducer>().next_multiple_of(16);
    let mut a = ARENA.lock().unwrap_or_else(|e| e.into_inner());
    if a.0 + size > a.1 {
        // SAFETY: a fresh anonymous private mapping, no address requested;
        // never unmapped (the records in it must stay valid).
        let m = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                CHUNK,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if m == libc::MAP_FAILED {
            return Box::leak(Box::new(p));
        }
        *a = (m.addr(), m.addr() + CHUNK);
    }
    let at = a.0 as *mut ArrowAsyncProducer;
    a.0 += size;
    // SAFETY: `at` is page-aligned plus a multiple of 16 (enough for the
    // structure's alignment), inside the mapping, and used by nothing else.
    unsafe { at.write(p) };
    at
}

struct St {
    credits: i128,
    report: AsyncReport,
}

struct Session {
    /// Its key in [`SESSIONS`], and its producer's private_data.
    id: usize,
    /// The consumer's cancel entry point, for `End::Cancel`.
    canceller: Option<crate::plugin::Canceller>,
    ledger: Ledger,
    plan: AsyncPlan,
    handler: usize,
    state: Mutex<St>,
    changed: Condvar,
    /// The thread running on_error, while it runs.
    in_on_error: Mutex<Option<ThreadId>>,
    /// The thread running the handler's release, while it runs.
    in_release: Mutex<Option<ThreadId>>,
    /// Set just before the handler's release is called: from then on the
    /// producer need not be valid ("*MUST* remain valid at least until
    /// just before calling ``release`` on the stream handler object").
    release_called: AtomicBool,
}

// SAFETY: the handler address is only used by the driver; all mutable
// state is behind the mutex or atomic; the ledger is Send + Sync.
unsafe impl Send for Session {}
// SAFETY: as above.
unsafe impl Sync for Session {}

/// The record behind a task's private_data.
struct TaskRec {
    session: *const Session,
    index: usize,
    /// The tombstone the passed structure points to after on_next_task.
    tombstone: bool,
}

impl Session {
    fn lock(&self) -> MutexGuard<'_, St> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The state once `done` holds for it, or at `until`, whichever comes
    /// first (the caller looks at the state again to tell which).
    fn wait_for(&self, until: Instant, done: impl Fn(&St) -> bool) -> MutexGuard<'_, St> {
        let mut st = self.lock();
        while !done(&st) && Instant::now() < until {
            st = self
                .changed
                .wait_timeout(st, Duration::from_millis(10))
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0);
        }
        st
    }

    /// Checks the context of a producer call made by the consumer: a call
    /// on the thread that is running on_error or the handler's release is
    /// that callback calling the producer. A call from another thread of
    /// the consumer's while the callback runs is not the callback's (the
    /// producer is still valid until release returns), so it is not
    /// charged: charging it made verdicts depend on thread timing.
    fn producer_call(&self, what: &str) {
        let here = std::thread::current().id();
        let running = |slot: &Mutex<Option<ThreadId>>| {
            *slot.lock().unwrap_or_else(|e| e.into_inner()) == Some(here)
        };
        if running(&self.in_on_error) {
            self.ledger.event_here(
                crate::rule!("consumer.async.on-error"),
                "on_error",
                format!("the consumer called ArrowAsyncProducer.{what} while on_error was running (\"This callback *MUST NOT* call any methods of an ArrowAsyncProducer object\")"),
            );
        }
        if running(&self.in_release) {
            self.ledger.event_here(
                crate::rule!("consumer.async.release-no-producer"),
                "release",
                format!("the consumer called ArrowAsyncProducer.{what} while the handler's release was running (\"This must not call any methods of an ArrowAsyncProducer object\")"),
            );
        } else if self.release_called.load(Ordering::SeqCst) {
            let when = if self.lock().report.released {
                "after the handler's release had returned"
            } else {
                "from another thread while the handler's release was running"
            };
            self.ledger.event_here(
                crate::rule!("consumer.async.producer-lifetime"),
                what,
                format!("the consumer called ArrowAsyncProducer.{what} {when}: the producer \"*MUST* remain valid at least until just before calling ``release`` on the stream handler object\" and is cleaned up \"*after* calling the release callback\", so from then on the call can reach freed memory (the harness keeps its producer alive to see the call)"),
            );
        }
    }

    /// Waits for a credit; `Err` says why none came.
    fn wait_credit(&self) -> Result<(), Stop> {
        let mut st = self.lock();
        let until = Instant::now() + self.plan.stall_after;
        loop {
            if st.report.cancelled {
                return Err(Stop::Cancelled);
            }
            if st.credits > 0 {
                st.credits -= 1;
                return Ok(());
            }
            let now = Instant::now();
            if now >= until {
                let why = format!(
                    "the stream stalled: {} tasks delivered, {} requested in all, batches left, and no request(n) for {} ms",
                    st.report.delivered,
                    st.report.requests.iter().filter(|&&n| n > 0).map(|&n| i128::from(n)).sum::<i128>(),
                    self.plan.stall_after.as_millis()
                );
                st.report.stalled = Some(why.clone());
                return Err(Stop::Stalled(why));
            }
            st = self
                .changed
                .wait_timeout(st, until - now)
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0);
        }
    }

    /// Calls a handler callback, on a fresh thread when the plan says so
    /// (still one at a time: the driver waits for it).
    fn call<R: Send>(&self, f: impl FnOnce(*mut Handler) -> R + Send) -> R {
        let h = HandlerPtr(self.handler as *mut Handler);
        if self.plan.delivery.thread_per_callback {
            std::thread::scope(|scope| {
                scope
                    .spawn(move || {
                        let h = h;
                        f(h.0)
                    })
                    .join()
                    .unwrap_or_else(|p| std::panic::resume_unwind(p))
            })
        } else {
            f(h.0)
        }
    }

    fn gap(&self) {
        let us = self.plan.delivery.gap_us;
        if us > 0 {
            std::thread::sleep(Duration::from_micros(u64::from(us)));
        }
    }
}

#[derive(Clone, Copy)]
struct HandlerPtr(*mut Handler);
// SAFETY: the handler is the consumer's, to be called "from any thread"
// (serialized, which the driver guarantees).
unsafe impl Send for HandlerPtr {}

enum Stop {
    Cancelled,
    Stalled(String),
}

/// The session behind a producer the harness made, while the case that
/// made it has not ended (a later call is ignored: it cannot be judged,
/// and must not reach a freed session).
///
/// # Safety
/// `p` is a producer the harness made: never freed, its private_data its
/// session's id.
unsafe fn session_of(p: *mut ArrowAsyncProducer) -> Option<Arc<Session>> {
    if p.is_null() {
        return None;
    }
    // SAFETY: as the caller guarantees.
    let id = unsafe { (*p).private_data }.addr();
    sessions()
        .iter()
        .find(|(i, _)| *i == id)
        .and_then(|(_, w)| w.upgrade())
}

/// # Safety
/// `p` is the live ArrowAsyncProducer this callback was installed in; the interface keeps
/// it valid until just before the handler's release.
unsafe extern "C" fn producer_request(p: *mut ArrowAsyncProducer, n: i64) {
    // SAFETY: the consumer calls the producer the harness gave it.
    let Some(s) = (unsafe { session_of(p) }) else {
        return;
    };
    s.producer_call("request");
    let mut st = s.lock();
    st.report.requests.push(n);
    if n <= 0 {
        drop(st);
        s.ledger.event_here(
            crate::rule!("consumer.async.request-positive"),
            "request",
            format!("the consumer called request({n}): \"It is invalid to call this function with a value of n that is <= 0\""),
        );
        return;
    }
    if !st.report.cancelled {
        st.credits += i128::from(n);
    }
    drop(st);
    s.changed.notify_all();
}

/// # Safety
/// `p` is the live ArrowAsyncProducer this callback was installed in; the interface keeps
/// it valid until just before the handler's release.
unsafe extern "C" fn producer_cancel(p: *mut ArrowAsyncProducer) {
    // SAFETY: as in producer_request.
    let Some(s) = (unsafe { session_of(p) }) else {
        return;
    };
    s.producer_call("cancel");
    s.lock().report.cancelled = true;
    s.changed.notify_all();
}

/// # Safety
/// `task` is an ArrowAsyncTask this producer handed to on_next_task, and `out` is
/// NULL or valid for writes of one ArrowDeviceArray.
unsafe extern "C" fn extract(task: *mut ArrowAsyncTask, out: *mut ArrowDeviceArray) -> c_int {
    if task.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: a task the harness made, or the consumer's copy of one: its
    // private_data is a TaskRec the ledger keeps for the whole case.
    let rec = unsafe { ((*task).private_data as *const TaskRec).as_ref() };
    let Some(rec) = rec else { return libc::EINVAL };
    // SAFETY: the record's session outlives the records (kept by the run).
    let s = unsafe { &*rec.session };
    if rec.tombstone {
        s.lock().report.out_of_scope.push(rec.index);
        s.ledger.event_here(
            crate::rule!("consumer.async.task-scope"),
            &format!("task {}", rec.index),
            format!("extract_data was called through the ArrowAsyncTask the harness passed to on_next_task, after that call returned (\"If the consumer wants to use the task beyond the scope of this method, it must copy or move its contents to a new ArrowAsyncTask object\"); task {} was not extracted", rec.index),
        );
        return libc::EINVAL;
    }
    let count = {
        let mut st = s.lock();
        let c = &mut st.report.extracts[rec.index];
        *c += 1;
        *c
    };
    if count > 1 {
        s.ledger.event_here(
            crate::rule!("consumer.async.extract-once"),
            &format!("task {}", rec.index),
            format!("extract_data was called {count} times for task {} (\"It is only valid to call this method exactly once\")", rec.index),
        );
        return libc::EINVAL;
    }
    if out.is_null() {
        return 0;
    }
    let what = format!("task {} array", rec.index);
    // SAFETY: out is the consumer's ArrowDeviceArray, valid for writes.
    let root = unsafe {
        s.ledger
            .device_array_into(out, &s.plan.chunks[rec.index], &what)
    };
    s.ledger
        .set_unreleased_rule(root, crate::rule!("consumer.async.release"));
    0
}

/// Writes `text` over a C string the harness handed out (its room is the
/// original length; shorter text is padded with spaces).
///
/// # Safety
/// `p` points to a ledger-owned buffer of at least `room + 1` bytes.
unsafe fn overwrite(p: *mut u8, room: usize, text: &str) {
    let bytes = text.as_bytes();
    for i in 0..room {
        // SAFETY: i < room (caller).
        unsafe { *p.add(i) = *bytes.get(i).unwrap_or(&b' ') };
    }
    // SAFETY: room + 1 bytes (caller).
    unsafe { *p.add(room) = 0 };
}

/// The spec's metadata encoding of `pairs` (non-empty), as the exporter
/// writes it for schemas.
fn metadata(pairs: &[(&str, &str)]) -> Vec<u8> {
    let owned: Vec<(String, String)> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    super::format::metadata(owned.iter().map(|(k, v)| (k, v))).unwrap_or_default()
}

/// The producer thread: from on_schema to release.
fn drive(s: &Arc<Session>) {
    let session_ptr = Arc::as_ptr(s);
    let additional = metadata(&[("arrowcert.batches", &s.plan.chunks.len().to_string())]);
    let md = s.ledger.keep_bytes(&additional, false);
    // The producer structure and what its private_data points to are
    // never freed: a consumer that calls it after the handler's release
    // (consumer.async.producer-lifetime), even after the case ended, must
    // reach a live structure, not crash a later case.
    let producer: *mut ArrowAsyncProducer = lasting(ArrowAsyncProducer {
        device_type: crate::abi::device::CPU,
        request: Some(producer_request),
        cancel: Some(producer_cancel),
        additional_metadata: md as *const c_char,
        private_data: std::ptr::without_provenance_mut::<c_void>(s.id),
    });
    let producer = ProducerPtr(producer);
    // "the producer *MUST* populate the ArrowAsyncProducer member before
    // calling this function [on_schema]".
    s.call(move |h| {
        let producer = producer;
        // SAFETY: h is the consumer's initialised handler, live until its
        // release has been called.
        unsafe { (*h).producer = producer.0 }
    });

    let mut schema = s.ledger.schema(&s.plan.schema, "on_schema schema");
    s.ledger
        .set_unreleased_rule(schema.root, crate::rule!("consumer.async.release"));
    let schema_ptr = SchemaPtr(schema.get());
    let rc = s.call(move |h| {
        let schema_ptr = schema_ptr;
        // SAFETY: h as above; on_schema is checked set.
        match unsafe { (*h).on_schema } {
            // SAFETY: a live handler and a live, ledger-owned schema.
            Some(f) => unsafe { f(h, schema_ptr.0) },
            None => libc::EINVAL,
        }
    });
    // "The ArrowSchema* passed as a parameter to the callback *MUST NOT*
    // be stored and kept."
    {
        let sch = schema.get();
        if !crate::abi::ops::Owned::is_released(&*sch) {
            s.ledger.event_here(
                crate::rule!("consumer.async.schema-moved"),
                "on_schema",
                "on_schema returned without moving (or releasing) the ArrowSchema it was passed (\"the object itself needing to be moved to a consumer owned ArrowSchema object\"); the harness released it".into(),
            );
            crate::abi::ops::Owned::release(&mut *sch);
        }
        let mut poisoned = ArrowSchema::poisoned();
        poisoned.release = None;
        *sch = poisoned;
    }
    if rc != 0 {
        let mut st = s.lock();
        st.report.refused = Some(format!("on_schema returned {rc}"));
        st.report.refused_code = Some(rc);
        drop(st);
        release(s);
        return;
    }
    let n = match s.plan.delivery.end {
        End::Complete => s.plan.chunks.len(),
        End::Empty => 0,
        End::Error(k) | End::Cancel(k, _) => usize::from(k).min(s.plan.chunks.len()),
    };
    for k in 0..n {
        match s.wait_credit() {
            Ok(()) => {}
            Err(Stop::Cancelled) => {
                release(s);
                return;
            }
            Err(Stop::Stalled(why)) => {
                error(s, libc::ETIMEDOUT, &why);
                release(s);
                return;
            }
        }
        if !deliver_task(s, session_ptr, k) {
            return;
        }
    }
    if let End::Cancel(_, late) = s.plan.delivery.end {
        if after_cancel(s, session_ptr, n, late) {
            release(s);
        }
        return;
    }
    if let End::Error(k) = s.plan.delivery.end {
        s.gap();
        error(s, ERROR_CODE, &format!("{ERROR_MESSAGE} {k}"));
        release(s);
        return;
    }
    if s.lock().report.cancelled {
        release(s);
        return;
    }
    s.gap();
    s.call(|h| {
        // SAFETY: h as above.
        if let Some(f) = unsafe { (*h).on_next_task } {
            // SAFETY: end of stream: NULL task, NULL metadata.
            unsafe { f(h, std::ptr::null_mut(), std::ptr::null()) };
        }
    });
    release(s);
}

#[derive(Clone, Copy)]
struct ProducerPtr(*mut ArrowAsyncProducer);
// SAFETY: harness-owned memory handed to the consumer.
unsafe impl Send for ProducerPtr {}
#[derive(Clone, Copy)]
struct SchemaPtr(*mut ArrowSchema);
// SAFETY: as above.
unsafe impl Send for SchemaPtr {}
#[derive(Clone, Copy)]
struct TaskPtr(*mut ArrowAsyncTask);
// SAFETY: as above.
unsafe impl Send for TaskPtr {}
#[derive(Clone, Copy)]
struct SendPtr(*mut u8);
// SAFETY: as above.
unsafe impl Send for SendPtr {}

/// on_error with a message and metadata that are overwritten when it
/// returns.
fn error(s: &Session, code: c_int, message: &str) {
    let msg = s.ledger.keep_bytes(message.as_bytes(), true);
    let md_text = metadata(&[("arrowcert.error", "injected")]);
    let md = s.ledger.keep_bytes(&md_text, false);
    s.lock().report.error_sent = Some((code, message.to_string()));
    let (msg_p, md_p) = (SendPtr(msg), SendPtr(md));
    s.call(move |h| {
        let (msg_p, md_p) = (msg_p, md_p);
        let _running = Running::on(&s.in_on_error);
        // SAFETY: h as in drive.
        if let Some(f) = unsafe { (*h).on_error } {
            // SAFETY: a live handler; NUL-terminated message and metadata
            // owned by the ledger.
            unsafe { f(h, code, msg_p.0 as *const c_char, md_p.0 as *const c_char) };
        }
    });
    // SAFETY: ledger-owned buffers of message.len() + 1 and md_text.len()
    // bytes.
    unsafe {
        overwrite(msg, message.len(), MESSAGE_OVERWRITTEN);
        std::ptr::write_bytes(md, super::RELEASED_BYTE, md_text.len());
    }
}

/// Delivers task `k` (its credit already taken): on_next_task, then the
/// task structure points at its tombstone and the metadata is overwritten.
/// False when the consumer refused it (the handler is then released).
fn deliver_task(s: &Arc<Session>, session_ptr: *const Session, k: usize) -> bool {
    s.gap();
    let rec = s.ledger.keep_box(TaskRec {
        session: session_ptr,
        index: k,
        tombstone: false,
    });
    let tombstone = s.ledger.keep_box(TaskRec {
        session: session_ptr,
        index: k,
        tombstone: true,
    });
    let task = s.ledger.keep_box(ArrowAsyncTask {
        extract_data: Some(extract),
        private_data: rec as *mut c_void,
    });
    {
        let mut st = s.lock();
        st.report.extracts.push(0);
        st.report.delivered += 1;
    }
    let text = metadata(&[("arrowcert.task", &k.to_string())]);
    let md = s.ledger.keep_bytes(&text, false);
    let (task_p, md_p) = (TaskPtr(task), SendPtr(md));
    let rc = s.call(move |h| {
        let (task_p, md_p) = (task_p, md_p);
        // SAFETY: h as above.
        match unsafe { (*h).on_next_task } {
            // SAFETY: a live handler, task and metadata.
            Some(f) => unsafe { f(h, task_p.0, md_p.0 as *const c_char) },
            None => libc::EINVAL,
        }
    });
    // "This task object is only valid during the lifetime of this
    // function call"; the metadata's "lifetime is only the scope of the
    // call to this function".
    // SAFETY: the ledger's own task structure and metadata bytes.
    unsafe {
        (*task).private_data = tombstone as *mut c_void;
        std::ptr::write_bytes(md, super::RELEASED_BYTE, text.len());
    }
    if rc != 0 {
        let mut st = s.lock();
        st.report.refused = Some(format!("on_next_task returned {rc} for task {k}"));
        st.report.refused_code = Some(rc);
        drop(st);
        release(s);
        return false;
    }
    true
}

/// How long the harness waits for the consumer's cancel once it asked.
const CANCEL_WAIT: Duration = Duration::from_secs(2);

/// The message of the error sent after a consumer's cancel.
pub const CANCEL_ERROR_MESSAGE: &str =
    "arrowcert async producer: injected failure while handling cancel";

/// `End::Cancel` once `delivered` tasks are out: asks the consumer to
/// cancel, waits for its cancel, then sends what `late` says. False when
/// the handler was already released (a refused late task).
fn after_cancel(
    s: &Arc<Session>,
    session_ptr: *const Session,
    delivered: usize,
    late: Late,
) -> bool {
    let problem = |s: &Session, why: String| {
        s.lock().report.cancel_problem = Some(why);
    };
    let Some(canceller) = s.canceller else {
        problem(
            s,
            "the consumer does not export arrowcert_consume_async_cancel".into(),
        );
        return true;
    };
    // From the producer thread, between callbacks: the consumer's cancel
    // is not inside any handler callback.
    let rc = canceller.cancel();
    if rc != 0 {
        problem(s, format!("arrowcert_consume_async_cancel returned {rc}"));
        return true;
    }
    let mut st = s.wait_for(Instant::now() + CANCEL_WAIT, |st| st.report.cancelled);
    if !st.report.cancelled {
        drop(st);
        problem(
            s,
            format!("asked to cancel (arrowcert_consume_async_cancel returned 0), the consumer did not call ArrowAsyncProducer.cancel within {} ms", CANCEL_WAIT.as_millis()),
        );
        return true;
    }
    st.report.late_from = Some(delivered);
    match late {
        Late::Tasks => {
            // The arrays still requested: "if there are still requested
            // arrays pending".
            let pending = usize::try_from(st.credits.max(0)).unwrap_or(usize::MAX);
            let m = pending
                .min(MAX_LATE_TASKS)
                .min(s.plan.chunks.len() - delivered);
            st.credits -= m as i128;
            st.report.late_tasks = m;
            drop(st);
            for j in 0..m {
                if !deliver_task(s, session_ptr, delivered + j) {
                    return false;
                }
            }
        }
        Late::Error => {
            st.report.late_error = true;
            drop(st);
            s.gap();
            error(s, ERROR_CODE, CANCEL_ERROR_MESSAGE);
        }
    }
    true
}

/// Marks the current thread as running a handler callback until dropped.
struct Running<'a>(&'a Mutex<Option<ThreadId>>);

impl<'a> Running<'a> {
    fn on(slot: &'a Mutex<Option<ThreadId>>) -> Running<'a> {
        *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(std::thread::current().id());
        Running(slot)
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

fn release(s: &Session) {
    s.release_called.store(true, Ordering::SeqCst);
    s.call(|h| {
        let _running = Running::on(&s.in_release);
        // SAFETY: h as in drive; release is called exactly once, last.
        if let Some(f) = unsafe { (*h).release } {
            // SAFETY: as above.
            unsafe { f(h) };
        }
    });
    s.lock().report.released = true;
    s.changed.notify_all();
}

/// Runs one async stream from the harness into `consumer`: start, the
/// producer thread, finish (given `finish_wait` to return). The handler
/// lives in the ledger.
pub fn run_consumer(
    consumer: &Plugin,
    ledger: &Ledger,
    plan: AsyncPlan,
    finish_timeout: Duration,
) -> Result<ConsumerRun, CallError> {
    let handler = ledger.keep_box(ArrowAsyncDeviceStreamHandler::zeroed());
    // SAFETY: a zeroed handler owned by the ledger, which keeps it at this
    // address until the case ends (or forever, if the case is not clean).
    let token = unsafe { consumer.consume_async_start(handler) }?;
    let session = Arc::new(Session {
        id: NEXT_SESSION.fetch_add(1, Ordering::Relaxed),
        canceller: consumer.async_canceller(token),
        ledger: ledger.share(),
        plan,
        handler: handler as usize,
        state: Mutex::new(St {
            credits: 0,
            report: AsyncReport::default(),
        }),
        changed: Condvar::new(),
        in_on_error: Mutex::new(None),
        in_release: Mutex::new(None),
        release_called: AtomicBool::new(false),
    });
    sessions().push((session.id, Arc::downgrade(&session)));
    let stall = session.plan.stall_after;
    let driver = {
        let s = session.clone();
        std::thread::Builder::new()
            .name("arrowcert-async-producer".into())
            .spawn(move || {
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drive(&s)));
                s.lock().report.finished = true;
                s.changed.notify_all();
            })
    };
    let driver = match driver {
        Ok(d) => d,
        Err(e) => {
            forget_session(session.id);
            return Err(CallError::Failed {
                entry: "harness",
                code: e.raw_os_error().unwrap_or(libc::EAGAIN),
                message: Some(format!("cannot start the harness's producer thread: {e}")),
            });
        }
    };
    let wait = finish_timeout + stall + Duration::from_secs(2);
    let result = consumer.consume_async_finish(token, finish_timeout.as_millis() as i64, wait);
    // The driver ends once the handler is released (or a callback hangs).
    let report = session
        .wait_for(Instant::now() + Duration::from_secs(2), |st| {
            st.report.finished
        })
        .report
        .clone();
    Ok(ConsumerRun {
        result,
        report,
        keep: Some(session),
        driver: Some(driver),
    })
}

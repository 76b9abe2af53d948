//! The instrumented `ArrowAsyncDeviceStreamHandler` the harness hands to a
//! producer under test, and the consumer schedule it plays.
//!
//! Every callback records itself into the trace as it enters (in the order
//! the callbacks entered, whatever thread they came on), with:
//! - whether another callback was running on a *different* thread
//!   (`async.callbacks.serial`: "A producer *MUST NOT* call this
//!   concurrently from multiple threads"); each callback holds briefly so
//!   an overlap is seen;
//! - whether the thread it came on was inside the harness's own call to
//!   `request` or `cancel` (`async.request.reentrant`,
//!   `async.cancel.reentrant`).
//!
//! The harness records `request(n)` and `cancel` in the trace just before
//! calling them, so a task delivered in response is always counted after
//! its request. Calls to the producer from harness threads stop once the
//! handler's release has begun: "[the producer] *MUST* remain valid at
//! least until just before calling release".
//!
//! What a callback sees of the producer (its `ArrowAsyncProducer`, the
//! metadata strings) is checked where it is seen, because it may be gone
//! later; everything else is judged after the run by
//! [`super::model::judge`] and the certification layer.

use std::cell::Cell;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Condvar, Mutex, MutexGuard};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use super::model::{Callback, Entered, Event, Inside};
use super::schedule::{CancelAt, CancelHow, Extract, First, Refill, Schedule};
use crate::abi::ops::{take, Guard, Owned};
use crate::abi::{
    ArrowAsyncDeviceStreamHandler, ArrowAsyncProducer, ArrowAsyncTask, ArrowDeviceArray,
    ArrowDeviceType, ArrowSchema, Plain,
};
use crate::plugin::{CallError, Plugin};

type Handler = ArrowAsyncDeviceStreamHandler;

/// Something a callback saw that breaks a rule on the spot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    pub rule: &'static str,
    pub at: String,
    pub message: String,
}

/// An array a task delivered.
pub struct Extracted {
    /// The task's position among the non-NULL tasks (0-based).
    pub index: usize,
    pub array: Guard<ArrowDeviceArray>,
}

/// How to run one stream.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    pub schedule: Schedule,
    pub device_type: ArrowDeviceType,
    pub device_id: i64,
    /// How long to wait for the handler's release.
    pub deadline: Duration,
    /// How long each callback holds (to make overlaps visible).
    pub hold: Duration,
    /// How long to keep watching after release (for late callbacks).
    pub grace: Duration,
    /// Rows `offset..offset + length` of the stream across batches (`-1`:
    /// to its end), asked of `arrowcert_produce_sliced_async`; `None`: the
    /// whole stream (`arrowcert_produce_async`).
    pub slice: Option<(i64, i64)>,
}

impl Options {
    pub fn new(schedule: Schedule, device_type: ArrowDeviceType, device_id: i64) -> Options {
        Options {
            schedule,
            device_type,
            device_id,
            deadline: Duration::from_secs(5),
            hold: Duration::from_micros(200),
            grace: Duration::from_millis(3),
            slice: None,
        }
    }
}

/// What one stream did.
pub struct Run {
    pub trace: Vec<Event>,
    pub released: bool,
    /// The schema from on_schema, moved out (when the harness accepted it).
    pub schema: Option<Guard<ArrowSchema>>,
    pub arrays: Vec<Extracted>,
    pub notes: Vec<Note>,
    /// on_error's code and message.
    pub error: Option<(i32, Option<String>)>,
    /// A harness thread that called into the producer and did not return
    /// by the deadline.
    pub stuck: Option<String>,
    /// The first extract_data that failed: (task index, code).
    pub extract_failed: Option<(usize, i32)>,
}

#[derive(Default)]
struct State {
    trace: Vec<Event>,
    schema: Option<Guard<ArrowSchema>>,
    arrays: Vec<Extracted>,
    notes: Vec<Note>,
    error: Option<(i32, Option<String>)>,
    extract_failed: Option<(usize, i32)>,
    releases: u32,
    tasks: usize,
    /// Threads currently inside a handler callback (one entry per call).
    in_flight: Vec<ThreadId>,
    /// The producer as on_schema saw it, and its bytes then.
    producer: usize,
    snapshot: Option<[u8; std::mem::size_of::<ArrowAsyncProducer>()]>,
    /// Release has begun: harness threads make no more producer calls.
    closed: bool,
    /// Harness calls into the producer in progress.
    calling: usize,
}

struct Session {
    opts: Options,
    state: Mutex<State>,
    changed: Condvar,
    /// Harness threads started and not finished.
    threads: AtomicUsize,
}

// SAFETY: the raw pointers inside State (guards of structures the producer
// handed over) are owned data, only touched with the mutex held; the
// producer pointer is stored as an address. Nothing is tied to a thread.
unsafe impl Send for Session {}
// SAFETY: as above: all mutable state is behind the mutex.
unsafe impl Sync for Session {}

thread_local! {
    /// The producer method this thread is inside, if any.
    static INSIDE: Cell<Option<Inside>> = const { Cell::new(None) };
}

impl Session {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn note(&self, rule: &'static str, at: &str, message: String) {
        let mut st = self.lock();
        if st.notes.len() < 64 {
            st.notes.push(Note {
                rule,
                at: at.to_string(),
                message,
            });
        }
    }

    /// Records a callback as it enters; returns its trace index.
    fn enter(&self, callback: Callback, answer: i32) -> usize {
        let me = std::thread::current().id();
        let index = {
            let mut st = self.lock();
            let overlapped = st.in_flight.iter().any(|t| *t != me);
            st.in_flight.push(me);
            st.trace.push(Event::Callback(Entered {
                callback,
                overlapped,
                inside: INSIDE.with(Cell::get),
                answer,
            }));
            st.trace.len() - 1
        };
        // Widen the window in which an overlapping callback is seen.
        std::thread::sleep(self.opts.hold);
        index
    }

    fn exit(&self) {
        let me = std::thread::current().id();
        let mut st = self.lock();
        if let Some(i) = st.in_flight.iter().position(|t| *t == me) {
            st.in_flight.remove(i);
        }
        drop(st);
        self.changed.notify_all();
    }

    /// The producer the harness may call, if release has not begun;
    /// counts the call in.
    fn begin_call(&self) -> Option<*mut ArrowAsyncProducer> {
        let mut st = self.lock();
        if st.closed || st.producer == 0 {
            return None;
        }
        st.calling += 1;
        Some(st.producer as *mut ArrowAsyncProducer)
    }

    fn end_call(&self) {
        self.lock().calling -= 1;
        self.changed.notify_all();
    }

    /// `request(n)`, recorded first.
    fn request(&self, n: i64) {
        let Some(p) = self.begin_call() else { return };
        // SAFETY: p is the producer on_schema saw with a callable request
        // (checked there); release has not begun, so it is still valid.
        let f = unsafe { (*p).request };
        if let Some(f) = crate::abi::ops::callable(f) {
            self.lock().trace.push(Event::Request(n));
            INSIDE.with(|c| c.set(Some(Inside::Request)));
            // SAFETY: as above.
            unsafe { f(p, n) };
            INSIDE.with(|c| c.set(None));
        }
        self.end_call();
    }

    /// `cancel()`, recorded first.
    fn cancel(&self) {
        let Some(p) = self.begin_call() else { return };
        // SAFETY: as in request.
        let f = unsafe { (*p).cancel };
        if let Some(f) = crate::abi::ops::callable(f) {
            self.lock().trace.push(Event::Cancel);
            INSIDE.with(|c| c.set(Some(Inside::Cancel)));
            // SAFETY: as in request.
            unsafe { f(p) };
            INSIDE.with(|c| c.set(None));
        }
        self.end_call();
    }

    /// Runs `f` on a new harness thread, counted until it returns.
    fn spawn(self: &Arc<Self>, f: impl FnOnce(&Session) + Send + 'static) {
        self.threads.fetch_add(1, Ordering::SeqCst);
        let s = self.clone();
        let spawned = std::thread::Builder::new()
            .name("arrowcert-async".into())
            .spawn(move || {
                let _ = catch_unwind(AssertUnwindSafe(|| f(&s)));
                s.threads.fetch_sub(1, Ordering::SeqCst);
                s.changed.notify_all();
            });
        if spawned.is_err() {
            self.threads.fetch_sub(1, Ordering::SeqCst);
            self.note(
                crate::rule!("async.release.last"),
                "harness",
                "the harness could not start a thread for its schedule".into(),
            );
        }
    }

    /// Cancels as the schedule says, then requests again if it says so.
    fn cancel_as_scheduled(self: &Arc<Self>) {
        let s = self.opts.schedule;
        let Some(c) = s.cancel else { return };
        let after = s.request_after_cancel;
        match c.how {
            CancelHow::Inline => self.cancel(),
            CancelHow::Twice => {
                self.cancel();
                self.cancel();
            }
            CancelHow::Thread => {
                self.spawn(move |s| {
                    s.cancel();
                    if let Some(n) = after {
                        s.request(n);
                    }
                });
                return;
            }
            CancelHow::Race => {
                let barrier = Arc::new(Barrier::new(3));
                for _ in 0..3 {
                    let b = barrier.clone();
                    self.spawn(move |s| {
                        b.wait();
                        s.cancel();
                    });
                }
            }
        }
        if let Some(n) = after {
            self.request(n);
        }
    }

    /// Checks the producer as on_schema sees it; returns whether it can
    /// be called.
    fn check_producer(&self, handler: *mut Handler) -> bool {
        let o = &self.opts;
        // SAFETY: handler is the harness's own live handler.
        let p = unsafe { (*handler).producer };
        let bits = p as usize;
        if p.is_null() || crate::abi::is_poison_ptr(bits) {
            self.note(
                crate::rule!("async.producer.ready"),
                "on_schema",
                format!(
                    "handler->producer is {} when on_schema is called (\"the producer *MUST* populate the ArrowAsyncProducer member before calling this function\")",
                    if p.is_null() { "NULL" } else { "still the harness's poison (never written)" }
                ),
            );
            return false;
        }
        // SAFETY: a non-NULL, non-poison producer pointer, which the spec
        // says is valid from on_schema until just before release.
        let prod = unsafe { std::ptr::read(p) };
        let mut ok = true;
        let request = prod.request.map(|f| f as usize).unwrap_or(0);
        let cancel = prod.cancel.map(|f| f as usize).unwrap_or(0);
        for (name, f) in [("request", request), ("cancel", cancel)] {
            if f == 0 || crate::abi::is_poison_ptr(f) {
                ok = false;
                self.note(
                    crate::rule!("async.producer.ready"),
                    "on_schema",
                    format!("ArrowAsyncProducer.{name} is NULL or unset in on_schema"),
                );
            }
        }
        if prod.device_type != o.device_type {
            // "All ArrowDeviceArray structs that are produced by this
            // producer should have the same device type as is set here."
            self.note(
                crate::rule!("async.producer.device-type"),
                "on_schema",
                format!(
                    "ArrowAsyncProducer.device_type is {}, asked for {}",
                    prod.device_type, o.device_type
                ),
            );
        }
        let md = prod.additional_metadata;
        if !md.is_null() && !crate::abi::is_poison_ptr(md as usize) {
            // SAFETY: non-NULL metadata "MUST be valid for at least the
            // lifetime of this object"; the reader checks each length.
            let found = unsafe { crate::inspect::validate::metadata_problems(md) };
            if let Some(why) = found.framing {
                self.note(
                    crate::rule!("async.metadata.encoding"),
                    "additional_metadata",
                    format!("ArrowAsyncProducer.additional_metadata: {why}"),
                );
            }
            if let Some(why) = found.not_utf8 {
                self.note(
                    crate::rule!("schema.metadata.utf8"),
                    "additional_metadata",
                    format!("ArrowAsyncProducer.additional_metadata: {why}"),
                );
            }
        }
        let mut snapshot = [0u8; std::mem::size_of::<ArrowAsyncProducer>()];
        // SAFETY: p points to a readable ArrowAsyncProducer (above).
        unsafe {
            std::ptr::copy_nonoverlapping(p.cast::<u8>(), snapshot.as_mut_ptr(), snapshot.len())
        };
        let mut st = self.lock();
        if ok {
            st.producer = bits;
        }
        st.snapshot = Some(snapshot);
        ok
    }

    /// "[The producer] *MUST* remain valid at least until just before
    /// calling release": at every callback after on_schema, handler->producer
    /// must still be the same object with the same members.
    fn producer_still_valid(&self, handler: *mut Handler, at: &str) {
        let (producer, snapshot) = {
            let st = self.lock();
            (st.producer, st.snapshot)
        };
        let Some(snapshot) = snapshot else { return };
        // SAFETY: handler is the harness's own live handler.
        let p = unsafe { (*handler).producer } as usize;
        if producer != 0 && p != producer {
            self.note(
                crate::rule!("async.producer.ready"),
                at,
                format!("handler->producer changed from {producer:#x} to {p:#x} after on_schema"),
            );
            return;
        }
        if producer == 0 {
            return;
        }
        let mut now = [0u8; std::mem::size_of::<ArrowAsyncProducer>()];
        // SAFETY: the producer must still be valid here (the rule being
        // checked); it was readable at on_schema and the harness reads it
        // only before release.
        unsafe {
            std::ptr::copy_nonoverlapping(producer as *const u8, now.as_mut_ptr(), now.len())
        };
        // private_data may legitimately change; the rest may not.
        let fixed = std::mem::offset_of!(ArrowAsyncProducer, private_data);
        if now[..fixed] != snapshot[..fixed] {
            self.note(
                crate::rule!("async.producer.ready"),
                at,
                "the ArrowAsyncProducer changed after on_schema (device_type, request, cancel or \
                 additional_metadata overwritten: freed or reused before the handler's release)"
                    .into(),
            );
        }
    }

    fn metadata(&self, md: *const c_char, at: &str) {
        if md.is_null() {
            return;
        }
        // SAFETY: non-NULL metadata is valid for the callback's scope
        // (spec); the reader checks each count and length.
        let found = unsafe { crate::inspect::validate::metadata_problems(md) };
        if let Some(why) = found.framing {
            self.note(
                crate::rule!("async.metadata.encoding"),
                at,
                format!("{at} metadata: {why}"),
            );
        }
        if let Some(why) = found.not_utf8 {
            self.note(
                crate::rule!("schema.metadata.utf8"),
                at,
                format!("{at} metadata: {why}"),
            );
        }
    }
}

/// The session behind a handler.
///
/// # Safety
/// `handler` is NULL or a handler made by [`run`] that is still live.
unsafe fn session<'a>(handler: *mut Handler) -> Option<&'a Arc<Session>> {
    if handler.is_null() {
        return None;
    }
    // SAFETY: the harness's handler: private_data is the Box<Arc<Session>>
    // made in run, alive while the handler is.
    let p = unsafe { (*handler).private_data } as *const Arc<Session>;
    // SAFETY: as above.
    unsafe { p.as_ref() }
}

fn guarded<T>(default: T, f: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(default)
}

/// # Safety
/// `handler` is the live ArrowAsyncDeviceStreamHandler this callback was installed in,
/// called by a producer as the async device stream interface says (the other arguments as
/// it gives them).
unsafe extern "C" fn on_schema(handler: *mut Handler, schema: *mut ArrowSchema) -> c_int {
    // SAFETY: called by the producer on the harness's handler.
    let Some(s) = (unsafe { session(handler) }) else {
        return libc::EINVAL;
    };
    guarded(libc::EIO, || {
        let ok = s.check_producer(handler);
        let answer = if !ok || s.opts.schedule.first == First::Refuse {
            libc::EINVAL
        } else {
            0
        };
        s.enter(Callback::Schema, answer);
        // "the object itself needing to be moved to a consumer owned
        // ArrowSchema object".
        let moved = if schema.is_null() {
            s.note(
                crate::rule!("async.array.valid"),
                "on_schema",
                "schema.non-null: on_schema was called with a NULL schema".into(),
            );
            None
        } else {
            // SAFETY: the producer passes a schema it owns until moved.
            let src = unsafe { &mut *schema };
            (!src.is_released()).then(|| Guard::new(take(src)))
        };
        if answer == 0 {
            s.lock().schema = moved;
            match s.opts.schedule.first {
                First::Request(n) | First::Invalid(n) => s.request(n),
                First::Refuse => {}
            }
            if matches!(s.opts.schedule.cancel.map(|c| c.at), Some(CancelAt::Schema)) {
                s.cancel_as_scheduled();
            }
        } else {
            drop(moved);
        }
        s.exit();
        answer
    })
}

/// How task `index` is extracted under this schedule.
fn extraction(schedule: &Schedule, index: usize) -> Extract {
    if schedule.refill == Refill::Deferred {
        return Extract::Thread;
    }
    match schedule.extract {
        Extract::Mixed => [Extract::Array, Extract::Null, Extract::Thread][index % 3],
        e => e,
    }
}

/// A task moved into harness memory ("it must copy or move its contents to
/// a new ArrowAsyncTask object").
struct MovedTask(Box<ArrowAsyncTask>);
// SAFETY: the task's contents are the producer's to be used from any
// thread (the spec's point of tasks is "consumer-focused thread control").
unsafe impl Send for MovedTask {}

/// Calls extract_data; stores the array under `index`.
fn extract(s: &Session, task: *mut ArrowAsyncTask, index: usize, want: bool) {
    // SAFETY: task is the producer's live task (or the harness's move of
    // one); extract_data was checked callable by the caller.
    let Some(f) = crate::abi::ops::callable(unsafe { (*task).extract_data }) else {
        s.note(
            crate::rule!("async.array.valid"),
            &format!("task {index}"),
            "ArrowAsyncTask.extract_data is NULL or unset".into(),
        );
        return;
    };
    if s.opts.schedule.slow_us > 0 {
        std::thread::sleep(Duration::from_micros(u64::from(s.opts.schedule.slow_us)));
    }
    let mut out = want.then(Guard::<ArrowDeviceArray>::poisoned);
    let ptr = out
        .as_mut()
        .map(|g| g.as_mut_ptr())
        .unwrap_or(std::ptr::null_mut());
    // SAFETY: as above; out is NULL or a writable device array.
    let rc = unsafe { f(task, ptr) };
    match (rc, out) {
        (0, Some(array)) => s.lock().arrays.push(Extracted { index, array }),
        (0, None) => {}
        (rc, out) => {
            if let Some(mut g) = out {
                g.mark_released();
            }
            // A failure is allowed ("If a non-zero value is returned from
            // this, ..."); what must follow it is the model's to judge, and
            // the case is an error (no data to compare).
            let mut st = s.lock();
            st.trace.push(Event::ExtractFailed(rc));
            st.extract_failed.get_or_insert((index, rc));
        }
    }
}

/// # Safety
/// `handler` is the live ArrowAsyncDeviceStreamHandler this callback was installed in,
/// called by a producer as the async device stream interface says (the other arguments as
/// it gives them).
unsafe extern "C" fn on_next_task(
    handler: *mut Handler,
    task: *mut ArrowAsyncTask,
    metadata: *const c_char,
) -> c_int {
    // SAFETY: called by the producer on the harness's handler.
    let Some(s) = (unsafe { session(handler) }) else {
        return libc::EINVAL;
    };
    guarded(libc::EIO, || {
        let sched = s.opts.schedule;
        if task.is_null() {
            s.enter(Callback::EndOfStream, 0);
            s.producer_still_valid(handler, "on_next_task(NULL)");
            s.metadata(metadata, "on_next_task(NULL)");
            if matches!(sched.cancel.map(|c| c.at), Some(CancelAt::EndOfStream)) {
                s.cancel_as_scheduled();
            }
            s.exit();
            return 0;
        }
        let (index, has_schema) = {
            let mut st = s.lock();
            st.tasks += 1;
            (st.tasks - 1, st.schema.is_some())
        };
        let refused = !has_schema || sched.refuse_task == Some(index as u8);
        let answer = if refused { libc::EINVAL } else { 0 };
        s.enter(Callback::Task, answer);
        s.producer_still_valid(handler, &format!("on_next_task (task {index})"));
        s.metadata(metadata, &format!("on_next_task (task {index})"));
        if refused {
            // "it must still call extract_data so that the producer can
            // perform any required cleanup."
            extract(s, task, index, false);
            s.exit();
            return answer;
        }
        match extraction(&sched, index) {
            Extract::Array | Extract::Mixed => extract(s, task, index, true),
            Extract::Null => extract(s, task, index, false),
            Extract::Thread => {
                // SAFETY: the producer's live task: a bitwise move into the
                // harness's own ArrowAsyncTask, as the spec allows.
                let moved = MovedTask(Box::new(unsafe { std::ptr::read(task) }));
                let deferred = sched.refill == Refill::Deferred;
                s.spawn(move |s| {
                    let mut moved = moved;
                    extract(s, &mut *moved.0, index, true);
                    if deferred {
                        s.request(1);
                    }
                });
            }
        }
        match sched.refill {
            Refill::Each(n) => s.request(i64::from(n)),
            Refill::Burst(k) => {
                for _ in 0..k {
                    s.request(1);
                }
            }
            Refill::Deferred => {}
        }
        if sched.cancel.map(|c| c.at) == Some(CancelAt::Task(index as u8)) {
            s.cancel_as_scheduled();
        }
        s.exit();
        0
    })
}

/// # Safety
/// `handler` is the live ArrowAsyncDeviceStreamHandler this callback was installed in,
/// called by a producer as the async device stream interface says (the other arguments as
/// it gives them).
unsafe extern "C" fn on_error(
    handler: *mut Handler,
    code: c_int,
    message: *const c_char,
    metadata: *const c_char,
) {
    // SAFETY: called by the producer on the harness's handler.
    let Some(s) = (unsafe { session(handler) }) else {
        return;
    };
    guarded((), || {
        s.enter(Callback::Error, code);
        s.producer_still_valid(handler, "on_error");
        let text = (!message.is_null()).then(|| {
            // SAFETY: a non-NULL message is a NUL-terminated string valid
            // for this call (spec).
            unsafe { CStr::from_ptr(message) }
                .to_string_lossy()
                .into_owned()
        });
        s.metadata(metadata, "on_error");
        s.lock().error.get_or_insert((code, text));
        s.exit();
    })
}

/// # Safety
/// `handler` is the live ArrowAsyncDeviceStreamHandler this callback was installed in,
/// called by a producer as the async device stream interface says (the other arguments as
/// it gives them).
unsafe extern "C" fn release(handler: *mut Handler) {
    // SAFETY: called by the producer on the harness's handler.
    let Some(s) = (unsafe { session(handler) }) else {
        return;
    };
    guarded((), || {
        s.enter(Callback::Release, 0);
        let nested = INSIDE.with(Cell::get).is_some();
        let first = {
            let mut st = s.lock();
            st.releases += 1;
            st.closed = true;
            st.releases == 1
        };
        // No harness call may still be inside the producer when release
        // returns (it may free the producer then). A call on this very
        // thread (a producer releasing from inside request or cancel) is
        // not waited for: it is the caller.
        if first && !nested {
            let until = Instant::now() + s.opts.deadline;
            let mut st = s.lock();
            while st.calling > 0 && Instant::now() < until {
                st = s
                    .changed
                    .wait_timeout(st, Duration::from_millis(5))
                    .map(|(g, _)| g)
                    .unwrap_or_else(|e| e.into_inner().0);
            }
        }
        s.exit();
        s.changed.notify_all();
    })
}

/// Runs one async stream from `producer` under `opts.schedule`.
///
/// The handler and its session are freed only when the stream ended
/// cleanly (one release, no harness thread still running); otherwise they
/// are leaked, since the producer may still call them.
pub fn run(producer: &Plugin, ipc: &[u8], opts: Options) -> Result<Run, CallError> {
    let session = Arc::new(Session {
        opts,
        state: Mutex::new(State::default()),
        changed: Condvar::new(),
        threads: AtomicUsize::new(0),
    });
    let private: *mut Arc<Session> = Box::into_raw(Box::new(session.clone()));
    let mut h = Handler::poisoned();
    h.on_schema = Some(on_schema);
    h.on_next_task = Some(on_next_task);
    h.on_error = Some(on_error);
    h.release = Some(release);
    h.private_data = private as *mut c_void;
    // `producer` stays the poison pattern: a producer that never sets it is
    // seen in on_schema.
    let handler: *mut Handler = Box::into_raw(Box::new(h));
    // SAFETY: handler is live and stays at this address until freed below,
    // which happens only after its release was seen (or never).
    let started = unsafe {
        match opts.slice {
            None => producer.produce_async(ipc, opts.device_type, opts.device_id, handler),
            Some((offset, length)) => producer.produce_sliced_async(
                ipc,
                offset,
                length,
                opts.device_type,
                opts.device_id,
                handler,
            ),
        }
    };
    if let Err(e) = started {
        // The producer refused synchronously and never took the handler
        // (callbacks made before refusing stay recorded, but the case ends
        // here). Still the harness's: freed if nothing else holds it.
        let clean = {
            let st = session.lock();
            st.trace.is_empty()
        };
        if clean {
            // SAFETY: made above by Box::into_raw, not shared with anyone.
            drop(unsafe { Box::from_raw(handler) });
            // SAFETY: as above.
            drop(unsafe { Box::from_raw(private) });
        }
        return Err(e);
    }
    // Wait for release, then a grace period for anything after it.
    let until = Instant::now() + opts.deadline;
    let mut released = false;
    {
        let mut st = session.lock();
        loop {
            if st.releases > 0 {
                released = true;
                break;
            }
            let now = Instant::now();
            if now >= until {
                break;
            }
            st = session
                .changed
                .wait_timeout(st, until - now)
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0);
        }
    }
    if released {
        std::thread::sleep(opts.grace);
    }
    // Harness threads (extractions, cancels) must be done too.
    let mut stuck = None;
    let thread_until = Instant::now().max(until);
    while session.threads.load(Ordering::SeqCst) > 0 {
        if Instant::now() >= thread_until {
            stuck = Some(format!(
                "{} harness thread(s) calling the producer (extract_data, request or cancel) did not return within {} ms",
                session.threads.load(Ordering::SeqCst),
                opts.deadline.as_millis()
            ));
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut st = session.lock();
    let clean = released && st.releases == 1 && stuck.is_none() && st.in_flight.is_empty();
    let out = Run {
        trace: std::mem::take(&mut st.trace),
        released,
        schema: st.schema.take(),
        arrays: std::mem::take(&mut st.arrays),
        notes: std::mem::take(&mut st.notes),
        error: st.error.take(),
        stuck,
        extract_failed: st.extract_failed.take(),
    };
    drop(st);
    if !clean {
        // The producer may still be running (its threads, a callback in
        // flight) with the harness's handler in hand: the worker ends after
        // this case, so that none of it reaches the next case.
        crate::abi::breadcrumb::taint(
            "the async producer had not released its handler (or a call into it was still running) when the case ended",
        );
    }
    if clean {
        // SAFETY: the producer released the handler exactly once and
        // nothing of the harness's still runs: nobody uses it any more.
        drop(unsafe { Box::from_raw(handler) });
        // SAFETY: as above, for the session reference it held.
        drop(unsafe { Box::from_raw(private) });
    }
    Ok(out)
}

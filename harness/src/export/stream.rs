//! The harness's instrumented `ArrowArrayStream` and
//! `ArrowDeviceArrayStream`: chunks exported on demand through the ledger,
//! errors injected where a plan says, and every callback judged.
//!
//! - Each callback counts the calls in flight and holds briefly, so that a
//!   consumer calling two at once is seen (`consumer.stream.serial`).
//! - `get_last_error` after a successful call is `consumer.stream.last-error`;
//!   its string is overwritten at the next `get_schema`, `get_next` or
//!   `release` ("The returned pointer is only guaranteed to be valid until
//!   the next call of one of the stream's callbacks"), so a consumer that
//!   kept the pointer reports [`OVERWRITTEN`].
//! - Any callback on a released stream, and a second release, are
//!   `consumer.stream.release`.
//! - After an injected failure the stream says end of stream, so a
//!   consumer that calls `get_next` again and believes it loses the error.

use std::ffi::{c_char, c_int};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use super::encode::{Node, SchemaNode};
use super::raw::{Handed, Ledger};
use crate::abi::{ArrowArray, ArrowArrayStream, ArrowDeviceArray, ArrowDeviceArrayStream, Plain};

/// What the message buffer holds once the next stream call came.
pub const OVERWRITTEN: &str =
    "<arrowcert: this error message was overwritten by the next stream call>";

/// Room for one message (and its NUL).
const MESSAGE_ROOM: usize = 512;

/// Where an injected failure happens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailAt {
    /// `get_schema` fails.
    Schema,
    /// The `get_next` call that would deliver chunk `k` fails.
    Next(usize),
}

/// An injected producer failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub at: FailAt,
    pub code: c_int,
    pub message: String,
}

/// What a stream delivers.
#[derive(Debug, Clone)]
pub struct StreamPlan {
    pub schema: SchemaNode,
    pub chunks: Vec<Node>,
    pub fail: Option<Failure>,
}

#[derive(Default)]
struct State {
    next: usize,
    failed_last: bool,
    errored: bool,
    releases: u32,
}

struct StreamRec {
    ledger: Ledger,
    root: usize,
    plan: StreamPlan,
    state: Mutex<State>,
    in_flight: AtomicUsize,
    message: usize,
}

impl StreamRec {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn event(&self, rule: &'static str, message: String) {
        self.ledger.event_here(rule, "stream", message);
    }

    /// Counts the call in; reports overlap with another callback.
    fn enter(&self, name: &str, hold: bool) -> InFlight<'_> {
        let before = self.in_flight.fetch_add(1, Ordering::SeqCst);
        if before > 0 {
            self.event(
                crate::rule!("consumer.stream.serial"),
                format!("{name} was called while another stream callback was running"),
            );
        }
        if hold {
            // Widen the window in which an overlapping call is seen.
            std::thread::sleep(Duration::from_micros(200));
        }
        InFlight(&self.in_flight)
    }

    /// Refuses a call on a released stream; returns true if released.
    fn released(&self, name: &str) -> bool {
        if self.state().releases > 0 {
            self.event(
                crate::rule!("consumer.stream.release"),
                format!("{name} was called on a released stream (\"This callback must NOT be called on a released ArrowArrayStream\")"),
            );
            return true;
        }
        false
    }

    fn write_message(&self, text: &str) {
        let bytes = text.as_bytes();
        let n = bytes.len().min(MESSAGE_ROOM - 1);
        // SAFETY: `message` is a ledger-owned allocation of at least
        // MESSAGE_ROOM bytes; n + 1 <= MESSAGE_ROOM.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.message as *mut u8, n);
            *(self.message as *mut u8).add(n) = 0;
        }
    }

    /// The previous message, if any, is no longer valid.
    fn invalidate_message(&self, st: &mut State) {
        if st.failed_last {
            self.write_message(OVERWRITTEN);
        }
        st.failed_last = false;
    }
}

struct InFlight<'a>(&'a AtomicUsize);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The two stream structures, for the shared callbacks.
trait Stream: Plain {
    type Chunk;
    fn private(&self) -> *mut std::ffi::c_void;
    fn mark_released(&mut self);
    /// # Safety
    /// `out` is valid for writes.
    unsafe fn export(ledger: &Ledger, out: *mut Self::Chunk, node: &Node, what: &str);
    /// # Safety
    /// `out` is valid for writes.
    unsafe fn end(out: *mut Self::Chunk);
}

impl Stream for ArrowArrayStream {
    type Chunk = ArrowArray;
    fn private(&self) -> *mut std::ffi::c_void {
        self.private_data
    }
    fn mark_released(&mut self) {
        self.release = None;
    }
    unsafe fn export(ledger: &Ledger, out: *mut ArrowArray, node: &Node, what: &str) {
        // SAFETY: forwarded.
        unsafe { ledger.array_into(out, node, what) }
    }
    unsafe fn end(out: *mut ArrowArray) {
        // SAFETY: forwarded; a released array: "release NULL".
        unsafe { std::ptr::write(out, ArrowArray::zeroed()) }
    }
}

impl Stream for ArrowDeviceArrayStream {
    type Chunk = ArrowDeviceArray;
    fn private(&self) -> *mut std::ffi::c_void {
        self.private_data
    }
    fn mark_released(&mut self) {
        self.release = None;
    }
    unsafe fn export(ledger: &Ledger, out: *mut ArrowDeviceArray, node: &Node, what: &str) {
        // SAFETY: forwarded.
        unsafe { ledger.device_array_into(out, node, what) };
    }
    unsafe fn end(out: *mut ArrowDeviceArray) {
        // SAFETY: forwarded.
        unsafe { std::ptr::write(out, ArrowDeviceArray::zeroed()) }
    }
}

/// # Safety
/// `s` is a stream the harness exported (its private_data a StreamRec the
/// ledger keeps).
unsafe fn rec<'a, S: Stream>(s: *mut S) -> &'a StreamRec {
    // SAFETY: caller's contract.
    unsafe { &*((*s).private() as *const StreamRec) }
}

/// # Safety
/// `s` is the live stream this callback was installed in, called as the C stream
/// interface lets a consumer call it, with `out` valid for writes of one ArrowSchema.
unsafe extern "C" fn get_schema<S: Stream>(s: *mut S, out: *mut crate::abi::ArrowSchema) -> c_int {
    crate::abi::breadcrumb::step("harness stream get_schema");
    // SAFETY: called through the pointer the harness installed.
    let rec = unsafe { rec(s) };
    let _in = rec.enter("get_schema", true);
    if rec.released("get_schema") {
        return libc::EINVAL;
    }
    let mut st = rec.state();
    rec.invalidate_message(&mut st);
    if let Some(f) = rec.plan.fail.as_ref().filter(|f| f.at == FailAt::Schema) {
        st.failed_last = true;
        rec.write_message(&f.message);
        return f.code;
    }
    drop(st);
    if out.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: out is the consumer's ArrowSchema, valid for writes.
    unsafe {
        rec.ledger
            .schema_into(out, &rec.plan.schema, "stream schema")
    };
    0
}

/// # Safety
/// `s` is the live stream this callback was installed in, called as the C stream
/// interface lets a consumer call it, with `out` valid for writes of one chunk of the
/// stream's kind.
unsafe extern "C" fn get_next<S: Stream>(s: *mut S, out: *mut S::Chunk) -> c_int {
    crate::abi::breadcrumb::step("harness stream get_next");
    // SAFETY: called through the pointer the harness installed.
    let rec = unsafe { rec(s) };
    let _in = rec.enter("get_next", true);
    if rec.released("get_next") {
        return libc::EINVAL;
    }
    let mut st = rec.state();
    rec.invalidate_message(&mut st);
    if out.is_null() {
        return libc::EINVAL;
    }
    let k = st.next;
    if !st.errored {
        if let Some(f) = rec.plan.fail.as_ref().filter(|f| f.at == FailAt::Next(k)) {
            st.failed_last = true;
            st.errored = true;
            rec.write_message(&f.message);
            return f.code;
        }
    }
    if st.errored || k >= rec.plan.chunks.len() {
        // SAFETY: out is valid for writes (consumer's chunk).
        unsafe { S::end(out) };
        return 0;
    }
    st.next += 1;
    drop(st);
    // SAFETY: out is valid for writes (consumer's chunk).
    unsafe {
        S::export(
            &rec.ledger,
            out,
            &rec.plan.chunks[k],
            &format!("stream chunk {k}"),
        )
    };
    0
}

/// # Safety
/// `s` is the live stream this callback was installed in, called as the C stream
/// interface lets a consumer call it (after a failed call).
unsafe extern "C" fn get_last_error<S: Stream>(s: *mut S) -> *const c_char {
    crate::abi::breadcrumb::step("harness stream get_last_error");
    // SAFETY: called through the pointer the harness installed.
    let rec = unsafe { rec(s) };
    let _in = rec.enter("get_last_error", false);
    if rec.released("get_last_error") {
        return std::ptr::null();
    }
    if !rec.state().failed_last {
        rec.event(
            crate::rule!("consumer.stream.last-error"),
            "get_last_error was called although the last stream call succeeded (\"This callback must ONLY be called if the last operation on the ArrowArrayStream returned an error\")".into(),
        );
        return std::ptr::null();
    }
    rec.message as *const c_char
}

/// # Safety
/// `s` is the live stream this callback was installed in, called as the C stream
/// interface lets a consumer call it.
unsafe extern "C" fn release<S: Stream>(s: *mut S) {
    crate::abi::breadcrumb::step("harness stream release");
    // SAFETY: called through the pointer the harness installed.
    let rec = unsafe { rec(s) };
    let _in = rec.enter("release", false);
    let count = {
        let mut st = rec.state();
        rec.invalidate_message(&mut st);
        st.releases += 1;
        st.releases
    };
    rec.ledger.released_root(rec.root, s as usize);
    if count > 1 {
        rec.event(
            crate::rule!("consumer.stream.release"),
            format!("the stream's release was called again (call {count})"),
        );
    }
    // SAFETY: s is valid for writes (caller).
    unsafe { (*s).mark_released() };
}

impl Ledger {
    fn stream_rec(&self, plan: StreamPlan, root: usize) -> *mut StreamRec {
        let message = self.keep_bytes(&[0u8; MESSAGE_ROOM], true) as usize;
        self.keep_box(StreamRec {
            ledger: self.share(),
            root,
            plan,
            state: Mutex::new(State::default()),
            in_flight: AtomicUsize::new(0),
            message,
        })
    }

    /// Exports a C stream.
    pub fn stream(&self, plan: StreamPlan) -> Handed<ArrowArrayStream> {
        let ptr = self.keep_box(ArrowArrayStream::poisoned());
        let root = self.add_root(
            "stream",
            ptr as usize,
            Some(crate::rule!("consumer.stream.release")),
        );
        let rec = self.stream_rec(plan, root);
        let s = ArrowArrayStream {
            get_schema: Some(get_schema::<ArrowArrayStream>),
            get_next: Some(get_next::<ArrowArrayStream>),
            get_last_error: Some(get_last_error::<ArrowArrayStream>),
            release: Some(release::<ArrowArrayStream>),
            private_data: rec as *mut std::ffi::c_void,
        };
        // SAFETY: ptr is a live, ledger-owned ArrowArrayStream.
        unsafe { std::ptr::write(ptr, s) };
        Handed::new(ptr, root)
    }

    /// Exports a device stream on the ledger's device.
    pub fn device_stream(&self, plan: StreamPlan) -> Handed<ArrowDeviceArrayStream> {
        let ptr = self.keep_box(ArrowDeviceArrayStream::poisoned());
        let root = self.add_root(
            "device stream",
            ptr as usize,
            Some(crate::rule!("consumer.stream.release")),
        );
        let rec = self.stream_rec(plan, root);
        let s = ArrowDeviceArrayStream {
            device_type: self.device_kind().device_type(),
            get_schema: Some(get_schema::<ArrowDeviceArrayStream>),
            get_next: Some(get_next::<ArrowDeviceArrayStream>),
            get_last_error: Some(get_last_error::<ArrowDeviceArrayStream>),
            release: Some(release::<ArrowDeviceArrayStream>),
            private_data: rec as *mut std::ffi::c_void,
        };
        // SAFETY: ptr is a live, ledger-owned ArrowDeviceArrayStream.
        unsafe { std::ptr::write(ptr, s) };
        Handed::new(ptr, root)
    }
}

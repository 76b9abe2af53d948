//! `arrowcert_consume_async_start` / `arrowcert_consume_async_finish`,
//! driven by a producer written here that runs on its own thread.

mod common;

use std::ffi::{c_int, c_void, CString};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::Duration;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use arrowcert_consumer_reference::{arrowcert_consume_async_finish, arrowcert_consume_async_start};
use arrowcert_sdk::abi::ops::Owned;
use arrowcert_sdk::abi::{
    device, ArrowAsyncDeviceStreamHandler, ArrowAsyncProducer, ArrowAsyncTask, ArrowDeviceArray,
    ArrowDeviceType, Plain,
};
use common::*;

type Handler = ArrowAsyncDeviceStreamHandler;

/// How long the test producer waits for the consumer to request more.
const CREDIT_WAIT: Duration = Duration::from_secs(5);
/// How long finish may wait in tests that expect release to come.
const FINISH_MS: i64 = 10_000;

// ---- the test producer -------------------------------------------------

/// What the producer object saw of the consumer.
#[derive(Default)]
struct ProducerLog {
    credit: Mutex<i64>,
    credit_changed: Condvar,
    requests: Mutex<Vec<i64>>,
    cancels: AtomicUsize,
    in_on_error: AtomicBool,
    calls_during_on_error: AtomicUsize,
}

impl ProducerLog {
    /// Takes one unit of credit, waiting for a request at most CREDIT_WAIT.
    fn take_credit(&self) -> bool {
        let credit = self.credit.lock().unwrap();
        let (mut credit, _) = self
            .credit_changed
            .wait_timeout_while(credit, CREDIT_WAIT, |c| *c <= 0)
            .unwrap();
        if *credit > 0 {
            *credit -= 1;
            true
        } else {
            false
        }
    }

    fn requests(&self) -> Vec<i64> {
        self.requests.lock().unwrap().clone()
    }
}

/// # Safety
/// `producer` is a live test producer.
unsafe fn log_of<'a>(producer: *mut ArrowAsyncProducer) -> &'a ProducerLog {
    // SAFETY: the test producer's private data is its ProducerLog, alive
    // for as long as the producer.
    unsafe { &*((*producer).private_data as *const ProducerLog) }
}

/// # Safety
/// `producer` is the live ArrowAsyncProducer this callback was installed in; the
/// interface keeps it valid until just before the handler's release.
unsafe extern "C" fn request(producer: *mut ArrowAsyncProducer, n: i64) {
    // SAFETY: the consumer calls this on the live producer.
    let log = unsafe { log_of(producer) };
    if log.in_on_error.load(Ordering::SeqCst) {
        log.calls_during_on_error.fetch_add(1, Ordering::SeqCst);
    }
    log.requests.lock().unwrap().push(n);
    *log.credit.lock().unwrap() += n;
    log.credit_changed.notify_all();
}

/// # Safety
/// `producer` is the live ArrowAsyncProducer this callback was installed in; the
/// interface keeps it valid until just before the handler's release.
unsafe extern "C" fn cancel(producer: *mut ArrowAsyncProducer) {
    // SAFETY: as in request.
    let log = unsafe { log_of(producer) };
    if log.in_on_error.load(Ordering::SeqCst) {
        log.calls_during_on_error.fetch_add(1, Ordering::SeqCst);
    }
    log.cancels.fetch_add(1, Ordering::SeqCst);
}

/// One task's data, owned by the producer for the duration of on_next_task.
struct TaskData {
    array: Option<ArrowDeviceArray>,
    /// extract_data fails with this code (and cleans up).
    fail: Option<c_int>,
    extracts: usize,
}

/// # Safety
/// `task` is an ArrowAsyncTask this producer handed to on_next_task, and `out` is
/// NULL or valid for writes of one ArrowDeviceArray.
unsafe extern "C" fn extract_data(task: *mut ArrowAsyncTask, out: *mut ArrowDeviceArray) -> c_int {
    // SAFETY: the task is valid during on_next_task, where the consumer
    // calls this; its private data is a TaskData.
    let data = unsafe { &mut *((*task).private_data as *mut TaskData) };
    data.extracts += 1;
    let Some(mut array) = data.array.take() else {
        return libc::EINVAL;
    };
    if let Some(code) = data.fail {
        array.release();
        return code;
    }
    if out.is_null() {
        array.release();
    } else {
        // SAFETY: `out` is valid for writes; ownership passes to it.
        unsafe { out.write(array) };
    }
    0
}

/// Metadata in the ArrowSchema.metadata encoding, one key/value pair.
fn metadata(key: &str, value: &str) -> Vec<u8> {
    let mut m = Vec::new();
    m.extend_from_slice(&1i32.to_ne_bytes());
    for s in [key, value] {
        m.extend_from_slice(&(s.len() as i32).to_ne_bytes());
        m.extend_from_slice(s.as_bytes());
    }
    m
}

/// How the test producer ends the stream.
#[derive(Clone, Copy)]
enum Ending {
    /// Every batch, then the NULL task, then release.
    Normal,
    /// After on_schema: on_error with this code and message, then release.
    Error(c_int, &'static str),
    /// The first task's extract_data fails with this code; then on_error
    /// with the same code and this message, then release.
    ExtractFails(c_int, &'static str),
    /// Every batch, then release without the NULL task.
    Truncated,
}

struct Run {
    schema: SchemaRef,
    batches: Vec<RecordBatch>,
    chunk_device: ArrowDeviceType,
    ending: Ending,
}

/// What the producer observed.
#[derive(Default, Debug)]
struct Report {
    on_schema_rc: c_int,
    schema_moved: bool,
    requests_after_on_schema: usize,
    task_rcs: Vec<c_int>,
    extracts: Vec<usize>,
    stalled: bool,
    eos_rc: Option<c_int>,
    handler_marked_released: bool,
}

struct SendPtr(*mut Handler);
// SAFETY: the handler is used by one thread at a time: the producer thread
// while it runs, the test thread after joining it.
unsafe impl Send for SendPtr {}

/// Plays the producer side on the calling thread.
///
/// # Safety
/// `handler` was initialised by arrowcert_consume_async_start and stays
/// valid until its release.
unsafe fn produce(
    handler: *mut Handler,
    run: Run,
    log: Arc<ProducerLog>,
    schema_rel: Counter,
    array_rel: Counter,
) -> Report {
    let mut report = Report::default();
    let additional = metadata("rows", "unknown");
    let mut producer = ArrowAsyncProducer {
        device_type: device::CPU,
        request: Some(request),
        cancel: Some(cancel),
        additional_metadata: additional.as_ptr().cast(),
        private_data: Arc::as_ptr(&log) as *mut c_void,
    };
    // SAFETY: the live handler, used by this thread only; the producer
    // outlives every callback below (it is dropped after release).
    let h = unsafe { &mut *handler };
    h.producer = &mut producer;
    let (on_schema, on_next_task, on_error, release) = (
        h.on_schema.unwrap(),
        h.on_next_task.unwrap(),
        h.on_error.unwrap(),
        h.release.unwrap(),
    );

    let mut schema = schema_export(&run.schema, &schema_rel);
    // SAFETY: the handler's own callback, with a live schema.
    report.on_schema_rc = unsafe { on_schema(handler, &mut schema) };
    report.schema_moved = schema.is_released();
    report.requests_after_on_schema = log.requests().len();

    if report.on_schema_rc == 0 {
        let (batches, fail_first) = match run.ending {
            Ending::Normal | Ending::Truncated => (run.batches.clone(), None),
            Ending::ExtractFails(code, _) => (run.batches[..1].to_vec(), Some(code)),
            Ending::Error(..) => (vec![], None),
        };
        let mut refused = false;
        for batch in &batches {
            // "A producer should only call the appropriate on_next_task
            // callback up to a maximum of the total sum of calls to this
            // method before propagating back-pressure / waiting."
            if !log.take_credit() {
                report.stalled = true;
                break;
            }
            let mut data = TaskData {
                array: Some(device_export(batch, run.chunk_device, &array_rel)),
                fail: fail_first,
                extracts: 0,
            };
            let mut task = ArrowAsyncTask {
                extract_data: Some(extract_data),
                private_data: &mut data as *mut TaskData as *mut c_void,
            };
            let mut task_metadata = metadata("batch", &report.task_rcs.len().to_string());
            // SAFETY: the handler's own callback; the task and metadata are
            // valid for the duration of the call.
            let rc = unsafe { on_next_task(handler, &mut task, task_metadata.as_ptr().cast()) };
            // The metadata's lifetime "is only the scope of the call".
            task_metadata.fill(0xAA);
            report.task_rcs.push(rc);
            report.extracts.push(data.extracts);
            if let Some(mut left) = data.array.take() {
                left.release();
            }
            if rc != 0 {
                // "A producer that receives a non-zero result here must not
                // subsequently call anything other than the release callback"
                refused = true;
                break;
            }
        }
        match run.ending {
            Ending::Normal if !refused && !report.stalled => {
                // SAFETY: the handler's own callback; NULL ends the stream.
                report.eos_rc =
                    Some(unsafe { on_next_task(handler, std::ptr::null_mut(), std::ptr::null()) });
            }
            Ending::Error(code, message) | Ending::ExtractFails(code, message) if !refused => {
                if matches!(run.ending, Ending::Error(..)) && !log.take_credit() {
                    report.stalled = true;
                }
                let message = CString::new(message).unwrap();
                let error_metadata = metadata("where", "test producer");
                log.in_on_error.store(true, Ordering::SeqCst);
                // SAFETY: the handler's own callback; the strings are valid
                // for the duration of the call.
                unsafe {
                    on_error(
                        handler,
                        code,
                        message.as_ptr(),
                        error_metadata.as_ptr().cast(),
                    )
                };
                log.in_on_error.store(false, Ordering::SeqCst);
                // "their lifetime is only valid during the scope of this call"
                let mut bytes = message.into_bytes();
                bytes.fill(b'#');
            }
            _ => {}
        }
    }
    // SAFETY: the handler's own release, called last and once.
    unsafe { release(handler) };
    // SAFETY: the handler's memory stays valid (the test owns it).
    report.handler_marked_released = unsafe { (*handler).release.is_none() };
    report
}

/// A handler allocated (and poisoned) by the "harness", initialised by
/// start, with its token.
fn start() -> (Box<Handler>, *mut c_void) {
    let mut handler = Box::new(Handler::poisoned());
    let mut token: *mut c_void = std::ptr::null_mut();
    // SAFETY: valid handler and token pointers owned by the test.
    let rc = unsafe { arrowcert_consume_async_start(&mut *handler, &mut token) };
    assert_eq!(rc, 0, "{}", last_error());
    assert!(!token.is_null());
    assert!(handler.producer.is_null(), "producer initialised to NULL");
    (handler, token)
}

fn finish(token: *mut c_void, timeout_ms: i64, out: &mut Out) -> c_int {
    // SAFETY: a token from start, passed to finish once.
    unsafe { arrowcert_consume_async_finish(token, timeout_ms, &mut out.ptr, &mut out.len) }
}

struct Outcome {
    rc: c_int,
    error: String,
    out: Out,
    report: Report,
    log: Arc<ProducerLog>,
    schema_rel: Counter,
    array_rel: Counter,
}

/// Starts the consumer, runs the producer on its own thread, and finishes.
fn drive(run: Run) -> Outcome {
    let (mut handler, token) = start();
    let log = Arc::new(ProducerLog::default());
    let (schema_rel, array_rel) = (counter(), counter());
    let producer = {
        let handler = SendPtr(&mut *handler);
        let (log, schema_rel, array_rel) = (log.clone(), schema_rel.clone(), array_rel.clone());
        thread::spawn(move || {
            let handler = handler;
            // SAFETY: the handler start initialised; the test keeps it alive
            // until this thread is joined.
            unsafe { produce(handler.0, run, log, schema_rel, array_rel) }
        })
    };
    let mut out = Out::new();
    let rc = finish(token, FINISH_MS, &mut out);
    let error = last_error();
    let report = producer.join().expect("producer thread");
    drop(handler);
    Outcome {
        rc,
        error,
        out,
        report,
        log,
        schema_rel,
        array_rel,
    }
}

fn batches(n: usize) -> Vec<RecordBatch> {
    (0..n)
        .map(|i| {
            let b = sample_batch(i as i32, 10 + i);
            if i % 2 == 1 {
                b.slice(1, 5 + i)
            } else {
                b
            }
        })
        .collect()
}

// ---- tests -------------------------------------------------------------

#[test]
fn reads_every_task_with_back_pressure() {
    // More batches than the initial request, so the window must be kept.
    let input = batches(9);
    let o = drive(Run {
        schema: sample_schema(),
        batches: input.clone(),
        chunk_device: device::CPU,
        ending: Ending::Normal,
    });
    assert_eq!(o.rc, 0, "{}", o.error);
    let r = &o.report;
    assert_eq!(r.on_schema_rc, 0);
    assert!(r.schema_moved, "on_schema moves the schema");
    assert!(
        r.requests_after_on_schema >= 1,
        "request called from on_schema"
    );
    assert!(
        !r.stalled,
        "the consumer kept requesting: {:?}",
        o.log.requests()
    );
    assert_eq!(r.task_rcs, vec![0; 9]);
    assert_eq!(r.extracts, vec![1; 9], "extract_data exactly once per task");
    assert_eq!(r.eos_rc, Some(0));
    assert!(
        r.handler_marked_released,
        "release marks the handler released"
    );
    let requests = o.log.requests();
    assert!(requests.iter().all(|&n| n > 0), "{requests:?}");
    assert!(requests.iter().sum::<i64>() >= 9);
    assert_eq!(o.log.cancels.load(Ordering::SeqCst), 0);
    assert_eq!((count(&o.schema_rel), count(&o.array_rel)), (1, 9));
    assert_read(&o.out, &sample_schema(), &input);
}

#[test]
fn reads_an_empty_stream() {
    let o = drive(Run {
        schema: sample_schema(),
        batches: vec![],
        chunk_device: device::CPU,
        ending: Ending::Normal,
    });
    assert_eq!(o.rc, 0, "{}", o.error);
    assert_eq!(count(&o.schema_rel), 1);
    assert_read(&o.out, &sample_schema(), &[]);
}

#[test]
fn on_error_gives_its_code_and_message_back() {
    let o = drive(Run {
        schema: sample_schema(),
        batches: vec![],
        chunk_device: device::CPU,
        ending: Ending::Error(libc::ECONNRESET, "producer exploded"),
    });
    assert_eq!(o.rc, libc::ECONNRESET);
    assert_eq!(o.error, "producer exploded");
    assert!(!o.report.stalled);
    assert_eq!(
        o.log.calls_during_on_error.load(Ordering::SeqCst),
        0,
        "on_error calls no producer method"
    );
    assert_eq!(o.log.cancels.load(Ordering::SeqCst), 0);
    assert!(o.report.handler_marked_released);
    assert!(o.out.ptr.is_null());
}

#[test]
fn extract_failure_then_on_error_gives_the_producer_error() {
    let o = drive(Run {
        schema: sample_schema(),
        batches: batches(3),
        chunk_device: device::CPU,
        ending: Ending::ExtractFails(libc::EIO, "decoding failed"),
    });
    // on_next_task returns 0 so that on_error may follow.
    assert_eq!(o.report.task_rcs, vec![0]);
    assert_eq!(o.report.extracts, vec![1]);
    assert_eq!(o.rc, libc::EIO);
    assert_eq!(o.error, "decoding failed");
    assert_eq!(o.log.calls_during_on_error.load(Ordering::SeqCst), 0);
    assert_eq!(count(&o.array_rel), 1);
}

#[test]
fn a_task_on_another_device_is_refused_and_released() {
    let o = drive(Run {
        schema: sample_schema(),
        batches: batches(3),
        chunk_device: device::CUDA,
        ending: Ending::Normal,
    });
    assert_eq!(
        o.report.task_rcs.len(),
        1,
        "the producer stops after a refusal"
    );
    let refusal = o.report.task_rcs[0];
    assert_ne!(refusal, 0);
    assert_eq!(o.report.extracts, vec![1]);
    assert_eq!(
        o.rc, refusal,
        "finish returns the error on_next_task returned"
    );
    assert!(
        o.error.contains("task #1") && o.error.contains("cuda"),
        "{}",
        o.error
    );
    assert_eq!(count(&o.array_rel), 1, "the refused array was released");
    assert!(o.out.ptr.is_null());
}

#[test]
fn release_without_end_of_stream_is_an_error() {
    let o = drive(Run {
        schema: sample_schema(),
        batches: batches(2),
        chunk_device: device::CPU,
        ending: Ending::Truncated,
    });
    assert_eq!(o.rc, libc::EIO);
    assert!(o.error.contains("end of stream"), "{}", o.error);
    assert_eq!(
        count(&o.array_rel),
        2,
        "received batches released by finish"
    );
}

#[test]
fn finish_times_out_when_release_never_comes() {
    let (mut handler, token) = start();
    let log = Arc::new(ProducerLog::default());
    let mut producer = ArrowAsyncProducer {
        device_type: device::CPU,
        request: Some(request),
        cancel: Some(cancel),
        additional_metadata: std::ptr::null(),
        private_data: Arc::as_ptr(&log) as *mut c_void,
    };
    handler.producer = &mut producer;
    let schema_rel = counter();
    let mut schema = schema_export(&sample_schema(), &schema_rel);
    // SAFETY: the handler's own callback, with a live schema.
    let rc = unsafe { (handler.on_schema.unwrap())(&mut *handler, &mut schema) };
    assert_eq!(rc, 0, "{}", last_error());

    let mut out = Out::new();
    let started = std::time::Instant::now();
    assert_eq!(finish(token, 50, &mut out), libc::ETIMEDOUT);
    assert!(started.elapsed() < Duration::from_secs(5));
    let message = last_error();
    assert!(
        message.contains("on_schema") && message.contains("50 ms"),
        "{message}"
    );
    assert!(out.ptr.is_null());

    // The handler outlives the token: a late release still works.
    // SAFETY: the handler's own release, called once.
    unsafe { (handler.release.unwrap())(&mut *handler) };
    assert!(handler.release.is_none() && handler.private_data.is_null());
}

#[test]
fn finish_times_out_when_nothing_comes() {
    let (mut handler, token) = start();
    let mut out = Out::new();
    assert_eq!(finish(token, 0, &mut out), libc::ETIMEDOUT);
    assert!(last_error().contains("no callback"), "{}", last_error());
    // SAFETY: the handler's own release, called once.
    unsafe { (handler.release.unwrap())(&mut *handler) };
}

#[test]
fn finish_refuses_a_null_token_and_a_negative_timeout() {
    let mut out = Out::new();
    assert_eq!(finish(std::ptr::null_mut(), 10, &mut out), libc::EINVAL);
    let (mut handler, token) = start();
    assert_eq!(finish(token, -1, &mut out), libc::EINVAL);
    // SAFETY: the handler's own release, called once.
    unsafe { (handler.release.unwrap())(&mut *handler) };
}

#[test]
fn start_refuses_null_pointers() {
    let mut token: *mut c_void = std::ptr::null_mut();
    assert_eq!(
        // SAFETY: NULL handler on purpose.
        unsafe { arrowcert_consume_async_start(std::ptr::null_mut(), &mut token) },
        libc::EINVAL
    );
    let mut handler = Handler::poisoned();
    assert_eq!(
        // SAFETY: NULL token on purpose.
        unsafe { arrowcert_consume_async_start(&mut handler, std::ptr::null_mut()) },
        libc::EINVAL
    );
}

#[test]
fn a_non_cpu_producer_is_refused_in_on_schema() {
    let (mut handler, token) = start();
    let log = Arc::new(ProducerLog::default());
    let mut producer = ArrowAsyncProducer {
        device_type: device::CUDA,
        request: Some(request),
        cancel: Some(cancel),
        additional_metadata: std::ptr::null(),
        private_data: Arc::as_ptr(&log) as *mut c_void,
    };
    handler.producer = &mut producer;
    let schema_rel = counter();
    let mut schema = schema_export(&sample_schema(), &schema_rel);
    // SAFETY: the handler's own callback, with a live schema.
    let rc = unsafe { (handler.on_schema.unwrap())(&mut *handler, &mut schema) };
    assert_eq!(rc, libc::ENOSYS);
    assert!(schema.is_released());
    assert_eq!(count(&schema_rel), 1);
    assert!(log.requests().is_empty(), "no request after refusing");
    // "must not subsequently call anything other than the release callback"
    // SAFETY: the handler's own release, called once.
    unsafe { (handler.release.unwrap())(&mut *handler) };
    let mut out = Out::new();
    assert_eq!(finish(token, FINISH_MS, &mut out), libc::ENOSYS);
    assert!(last_error().contains("cuda"), "{}", last_error());
}

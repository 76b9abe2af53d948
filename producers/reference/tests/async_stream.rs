//! The async producer, driven by a test handler written here that records
//! every callback and follows a per-test script.
//!
//! The handler's callbacks run on the producer's thread; they never panic
//! (a panic there would abort), they only record, and every check happens on
//! the test thread. Every wait has a timeout, so no test can hang.

mod common;

use std::ffi::{c_char, c_int, CStr};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arrow_array::RecordBatch;
use arrow_schema::Schema;
use arrowcert_producer_reference as plugin;
use arrowcert_producer_reference::metadata;
use arrowcert_sdk::abi::arrow_rs::{export_schema, import_batch, import_schema};
use arrowcert_sdk::abi::ops::{take, Owned};
use arrowcert_sdk::abi::{
    device, ArrowAsyncDeviceStreamHandler, ArrowAsyncProducer, ArrowAsyncTask, ArrowDeviceArray,
    ArrowSchema, Plain,
};
use common::*;

const TIMEOUT: Duration = Duration::from_secs(10);
/// How long to watch for callbacks that must not come.
const QUIET: Duration = Duration::from_millis(150);

/// What the test handler does in its callbacks.
#[derive(Clone, Default)]
struct Script {
    /// `request(n)` from inside `on_schema`.
    request_on_schema: Option<i64>,
    /// Return value of `on_schema`.
    schema_rc: c_int,
    /// Do not move the schema (the producer must release it itself).
    leave_schema: bool,
    /// `request(n)` from inside each `on_next_task` (for a data task).
    request_per_task: Option<i64>,
    /// Call `cancel` (twice) then `request(1)` inside the k-th task.
    cancel_at_task: Option<usize>,
    /// Return value of `on_next_task` for data tasks.
    task_rc: c_int,
    /// Copy tasks and extract them later, on the test thread.
    defer_extract: bool,
    /// Extract with a NULL out (discard the data).
    discard: bool,
}

#[derive(Debug, Clone, PartialEq)]
enum Event {
    Schema {
        producer_set: bool,
        device_type: i32,
        metadata: Option<Vec<(String, String)>>,
    },
    /// A data task, extracted in the callback (Ok(batch)) or not.
    Task(Result<Option<RecordBatch>, String>),
    /// `on_next_task(NULL)`.
    End,
    Error {
        code: c_int,
        message: String,
        has_metadata: bool,
    },
    Release,
}

/// A bitwise copy of a task, kept past `on_next_task` ("it must copy or move
/// its contents to a new ArrowAsyncTask object").
struct TaskCopy(ArrowAsyncTask);
// SAFETY: the copy is only a function pointer and the producer's private
// pointer; the producer documents that a task may be extracted on any thread.
unsafe impl Send for TaskCopy {}

struct Recorder {
    script: Script,
    events: Mutex<Vec<Event>>,
    schema: Mutex<Option<Schema>>,
    copies: Mutex<Vec<TaskCopy>>,
    released: Mutex<Sender<()>>,
}

impl Recorder {
    fn push(&self, event: Event) {
        self.events.lock().unwrap().push(event);
    }
    fn events(&self) -> Vec<Event> {
        self.events.lock().unwrap().clone()
    }
    fn tasks(&self) -> usize {
        self.events()
            .iter()
            .filter(|e| matches!(e, Event::Task(_)))
            .count()
    }
}

/// The recorder behind a handler.
///
/// # Safety
/// `h` must be a handler built by [`Run::start`], not yet reclaimed.
unsafe fn recorder<'a>(h: *mut ArrowAsyncDeviceStreamHandler) -> &'a Recorder {
    // SAFETY: private_data is the Arc<Recorder> of Run::start, alive until
    // the test reclaims it after release.
    unsafe { &*(*h).private_data.cast::<Recorder>() }
}

/// # Safety
/// `p` must be the live producer handed to the handler.
unsafe fn request(p: *mut ArrowAsyncProducer, n: i64) {
    // SAFETY: a live producer; request is mandatory.
    unsafe { ((*p).request.unwrap())(p, n) }
}

/// # Safety
/// `p` must be the live producer handed to the handler.
unsafe fn cancel(p: *mut ArrowAsyncProducer) {
    // SAFETY: a live producer; cancel is mandatory.
    unsafe { ((*p).cancel.unwrap())(p) }
}

/// Extracts a task into a batch (or discards it with a NULL out).
///
/// # Safety
/// `task` must be a (copy of a) task not extracted yet.
unsafe fn extract(
    task: *mut ArrowAsyncTask,
    schema: &Schema,
    discard: bool,
) -> Result<Option<RecordBatch>, String> {
    // SAFETY: extract_data is mandatory; the out structure is a local.
    unsafe {
        let f = (*task).extract_data.ok_or("extract_data is NULL")?;
        if discard {
            let rc = f(task, std::ptr::null_mut());
            return if rc == 0 {
                Ok(None)
            } else {
                Err(format!("extract(NULL) = {rc}"))
            };
        }
        let mut out = ArrowDeviceArray::poisoned();
        let rc = f(task, &mut out);
        if rc != 0 {
            return Err(format!("extract_data returned {rc}"));
        }
        if out.device_type != device::CPU
            || out.device_id != -1
            || !out.sync_event.is_null()
            || out.reserved != [0; 3]
        {
            out.release();
            return Err("device array members".into());
        }
        let exported = export_schema(schema).map_err(|e| e.to_string())?;
        import_batch(exported, take(&mut out.array))
            .map(Some)
            .map_err(|e| e.to_string())
    }
}

/// # Safety
/// `h` is the live ArrowAsyncDeviceStreamHandler this callback was installed in, called
/// by a producer as the async device stream interface says (the other arguments as it
/// gives them).
unsafe extern "C" fn on_schema(
    h: *mut ArrowAsyncDeviceStreamHandler,
    schema: *mut ArrowSchema,
) -> c_int {
    // SAFETY: called by the producer with our handler and a live schema.
    unsafe {
        let rec = recorder(h);
        let producer = (*h).producer;
        let (device_type, metadata) = if producer.is_null() {
            (0, None)
        } else {
            let md = (*producer).additional_metadata.cast::<u8>();
            let decoded = (!md.is_null()).then(|| {
                let len = metadata::encoded_len(md);
                metadata::decode(std::slice::from_raw_parts(md, len)).unwrap_or_default()
            });
            ((*producer).device_type, decoded)
        };
        if !rec.script.leave_schema {
            // "with the object itself needing to be moved to a consumer owned
            // ArrowSchema object".
            *rec.schema.lock().unwrap() = import_schema(take(&mut *schema)).ok();
        } else {
            *rec.schema.lock().unwrap() = Some((*common::schema()).clone());
        }
        rec.push(Event::Schema {
            producer_set: !producer.is_null(),
            device_type,
            metadata,
        });
        if let (Some(n), false) = (rec.script.request_on_schema, producer.is_null()) {
            request(producer, n);
        }
        rec.script.schema_rc
    }
}

/// # Safety
/// `h` is the live ArrowAsyncDeviceStreamHandler this callback was installed in, called
/// by a producer as the async device stream interface says (the other arguments as it
/// gives them).
unsafe extern "C" fn on_next_task(
    h: *mut ArrowAsyncDeviceStreamHandler,
    task: *mut ArrowAsyncTask,
    _metadata: *const c_char,
) -> c_int {
    // SAFETY: called by the producer with our handler and NULL or a task
    // valid during this call.
    unsafe {
        let rec = recorder(h);
        if task.is_null() {
            rec.push(Event::End);
            return 0;
        }
        let schema = rec
            .schema
            .lock()
            .unwrap()
            .clone()
            .unwrap_or_else(Schema::empty);
        if rec.script.defer_extract {
            rec.copies
                .lock()
                .unwrap()
                .push(TaskCopy(std::ptr::read(task)));
            rec.push(Event::Task(Ok(None)));
        } else {
            rec.push(Event::Task(extract(task, &schema, rec.script.discard)));
        }
        let producer = (*h).producer;
        if rec.script.cancel_at_task == Some(rec.tasks()) {
            cancel(producer);
            cancel(producer);
            // "After cancel is called, additional calls to this function must
            // be a NOP, but allowed."
            request(producer, 1);
            request(producer, 0);
        } else if let Some(n) = rec.script.request_per_task {
            request(producer, n);
        }
        rec.script.task_rc
    }
}

/// # Safety
/// `h` is the live ArrowAsyncDeviceStreamHandler this callback was installed in, called
/// by a producer as the async device stream interface says (the other arguments as it
/// gives them).
unsafe extern "C" fn on_error(
    h: *mut ArrowAsyncDeviceStreamHandler,
    code: c_int,
    message: *const c_char,
    metadata: *const c_char,
) {
    // SAFETY: called by the producer with our handler and NULL or C strings
    // valid during this call.
    unsafe {
        let message = if message.is_null() {
            String::new()
        } else {
            CStr::from_ptr(message).to_string_lossy().into_owned()
        };
        recorder(h).push(Event::Error {
            code,
            message,
            has_metadata: !metadata.is_null(),
        });
    }
}

/// # Safety
/// `h` is the live ArrowAsyncDeviceStreamHandler this callback was installed in, called
/// by a producer as the async device stream interface says (the other arguments as it
/// gives them).
unsafe extern "C" fn release(h: *mut ArrowAsyncDeviceStreamHandler) {
    // SAFETY: called by the producer with our handler.
    unsafe {
        let rec = recorder(h);
        rec.push(Event::Release);
        let _ = rec.released.lock().unwrap().send(());
    }
}

/// One async production run with a test handler.
struct Run {
    rc: c_int,
    handler: Box<ArrowAsyncDeviceStreamHandler>,
    recorder: Arc<Recorder>,
    released: Receiver<()>,
}

impl Run {
    fn start(ipc: &[u8], script: Script) -> Run {
        Self::start_on(ipc, script, CPU, -1, |_| {})
    }

    fn start_on(
        ipc: &[u8],
        script: Script,
        device_type: i32,
        device_id: i64,
        tweak: impl FnOnce(&mut ArrowAsyncDeviceStreamHandler),
    ) -> Run {
        let (tx, rx) = channel();
        let recorder = Arc::new(Recorder {
            script,
            events: Mutex::new(Vec::new()),
            schema: Mutex::new(None),
            copies: Mutex::new(Vec::new()),
            released: Mutex::new(tx),
        });
        let mut handler = Box::new(ArrowAsyncDeviceStreamHandler {
            on_schema: Some(on_schema),
            on_next_task: Some(on_next_task),
            on_error: Some(on_error),
            release: Some(release),
            producer: std::ptr::null_mut(),
            private_data: Arc::as_ptr(&recorder).cast_mut().cast(),
        });
        tweak(&mut handler);
        // SAFETY: `ipc` is a live slice; the handler is boxed (stable address)
        // and outlives the run: it is only dropped after release was seen.
        let rc = unsafe {
            plugin::arrowcert_produce_async(
                ipc.as_ptr(),
                ipc.len() as i64,
                device_type,
                device_id,
                &mut *handler,
            )
        };
        Run {
            rc,
            handler,
            recorder,
            released: rx,
        }
    }

    /// Waits for release, then a little longer to see that nothing follows.
    fn finish(self) -> (Vec<Event>, Arc<Recorder>) {
        assert_eq!(self.rc, 0, "produce_async: {:?}", last_error());
        self.released
            .recv_timeout(TIMEOUT)
            .expect("handler released in time");
        std::thread::sleep(QUIET);
        let events = self.recorder.events();
        drop(self.handler);
        (events, self.recorder)
    }

    /// Waits until `n` events were recorded.
    fn wait_events(&self, n: usize) {
        let deadline = std::time::Instant::now() + TIMEOUT;
        while self.recorder.events().len() < n {
            assert!(
                std::time::Instant::now() < deadline,
                "events: {:?}",
                self.recorder.events()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

fn schema_event() -> Event {
    let rows = decoded()
        .batches
        .iter()
        .map(|b| b.num_rows())
        .sum::<usize>();
    Event::Schema {
        producer_set: true,
        device_type: device::CPU,
        metadata: Some(vec![
            (
                "arrowcert.batches".into(),
                decoded().batches.len().to_string(),
            ),
            ("arrowcert.rows".into(), rows.to_string()),
        ]),
    }
}

fn one_at_a_time() -> Script {
    Script {
        request_on_schema: Some(1),
        request_per_task: Some(1),
        ..Script::default()
    }
}

#[test]
fn delivers_schema_then_each_batch_then_null_then_release() {
    let (events, _) = Run::start(&ipc_bytes(), one_at_a_time()).finish();
    let mut expected = vec![schema_event()];
    expected.extend(
        decoded()
            .batches
            .into_iter()
            .map(|b| Event::Task(Ok(Some(b)))),
    );
    expected.push(Event::End);
    expected.push(Event::Release);
    assert_eq!(events, expected);
}

#[test]
fn tasks_copied_and_extracted_later_on_another_thread() {
    let script = Script {
        defer_extract: true,
        ..one_at_a_time()
    };
    let (events, recorder) = Run::start(&ipc_bytes(), script).finish();
    assert_eq!(events.first(), Some(&schema_event()));
    assert_eq!(events[events.len() - 2..], [Event::End, Event::Release]);
    let copies: Vec<TaskCopy> = std::mem::take(&mut *recorder.copies.lock().unwrap());
    assert_eq!(copies.len(), 3);
    // Extracted after the handler was released, on this thread: the task data
    // does not depend on the producer or the handler.
    let schema = schema();
    for (mut copy, expected) in copies.into_iter().zip(decoded().batches) {
        // SAFETY: each copy is extracted exactly once.
        let got = unsafe { extract(&mut copy.0, &schema, false) };
        assert_eq!(got, Ok(Some(expected)));
        // The same copy cannot be extracted twice.
        // SAFETY: extract_data of this producer checks its own copy.
        let again = unsafe { ((copy.0).extract_data.unwrap())(&mut copy.0, std::ptr::null_mut()) };
        assert_eq!(again, libc::EINVAL);
    }
}

#[test]
fn tasks_can_be_discarded_with_a_null_out() {
    let script = Script {
        discard: true,
        request_on_schema: Some(100),
        ..Script::default()
    };
    let (events, _) = Run::start(&ipc_bytes(), script).finish();
    let mut expected = vec![schema_event()];
    expected.extend((0..3).map(|_| Event::Task(Ok(None))));
    expected.extend([Event::End, Event::Release]);
    assert_eq!(events, expected);
}

#[test]
fn a_schema_left_unmoved_is_released_by_the_producer() {
    let script = Script {
        leave_schema: true,
        ..one_at_a_time()
    };
    let (events, _) = Run::start(&ipc_bytes(), script).finish();
    assert_eq!(events.len(), 6);
    assert_eq!(events[5], Event::Release);
}

#[test]
fn request_zero_leads_to_on_error_then_release() {
    let script = Script {
        request_on_schema: Some(0),
        ..Script::default()
    };
    let (events, _) = Run::start(&ipc_bytes(), script).finish();
    assert_eq!(events.len(), 3, "{events:?}");
    assert_eq!(events[0], schema_event());
    match &events[1] {
        Event::Error { code, message, .. } => {
            assert_eq!(*code, libc::EINVAL);
            assert!(message.contains("n = 0"), "{message}");
        }
        other => panic!("expected on_error, got {other:?}"),
    }
    assert_eq!(events[2], Event::Release);
}

#[test]
fn negative_request_mid_stream_leads_to_on_error_then_release() {
    let script = Script {
        request_on_schema: Some(1),
        request_per_task: Some(-5),
        ..Script::default()
    };
    let (events, _) = Run::start(&ipc_bytes(), script).finish();
    assert_eq!(events.len(), 4, "{events:?}");
    assert!(matches!(events[1], Event::Task(Ok(Some(_)))));
    assert!(matches!(&events[2], Event::Error { code, .. } if *code == libc::EINVAL));
    assert_eq!(events[3], Event::Release);
}

#[test]
fn cancel_mid_stream_releases_without_on_error() {
    let script = Script {
        cancel_at_task: Some(1),
        ..one_at_a_time()
    };
    let (events, _) = Run::start(&ipc_bytes(), script).finish();
    assert_eq!(events.len(), 3, "{events:?}");
    assert_eq!(events[0], schema_event());
    assert!(matches!(events[1], Event::Task(Ok(Some(_)))));
    assert_eq!(
        events[2],
        Event::Release,
        "no on_error, no NULL task after cancel"
    );
}

#[test]
fn cancel_with_credits_left_still_stops() {
    let script = Script {
        request_on_schema: Some(100),
        cancel_at_task: Some(2),
        ..Script::default()
    };
    let (events, _) = Run::start(&ipc_bytes(), script).finish();
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, Event::Task(_)))
            .count(),
        2,
        "{events:?}"
    );
    assert_eq!(events.last(), Some(&Event::Release));
    assert!(!events
        .iter()
        .any(|e| matches!(e, Event::Error { .. } | Event::End)));
}

#[test]
fn waits_for_requests_and_cancel_wakes_it() {
    // Back-pressure: no request, so after on_schema nothing comes.
    let run = Run::start(&ipc_bytes(), Script::default());
    assert_eq!(run.rc, 0);
    run.wait_events(1);
    std::thread::sleep(QUIET);
    assert_eq!(run.recorder.events(), vec![schema_event()]);
    // cancel from another thread than the producer's.
    let producer = run.handler.producer;
    assert!(!producer.is_null());
    // SAFETY: the producer stays valid until the handler is released, which
    // has not happened yet.
    unsafe { cancel(producer) };
    let (events, _) = run.finish();
    assert_eq!(events, vec![schema_event(), Event::Release]);
}

#[test]
fn requests_from_another_thread_resume_delivery() {
    let run = Run::start(&ipc_bytes(), Script::default());
    run.wait_events(1);
    let producer = run.handler.producer;
    // SAFETY: the producer is valid until release; request is thread-safe.
    unsafe { request(producer, 2) };
    run.wait_events(3);
    std::thread::sleep(QUIET);
    assert_eq!(
        run.recorder.events().len(),
        3,
        "only as many tasks as requested"
    );
    // SAFETY: as above (the stream has not ended: one batch is left).
    unsafe { request(producer, 1) };
    let (events, _) = run.finish();
    assert_eq!(events.len(), 6, "{events:?}");
    assert_eq!(events[4..], [Event::End, Event::Release]);
}

#[test]
fn on_schema_failure_means_only_release() {
    let script = Script {
        schema_rc: libc::EINVAL,
        request_on_schema: Some(5),
        ..Script::default()
    };
    let (events, _) = Run::start(&ipc_bytes(), script).finish();
    assert_eq!(events, vec![schema_event(), Event::Release]);
}

#[test]
fn on_next_task_failure_means_only_release() {
    let script = Script {
        task_rc: libc::ECANCELED,
        ..one_at_a_time()
    };
    let (events, _) = Run::start(&ipc_bytes(), script).finish();
    assert_eq!(events.len(), 3, "{events:?}");
    assert!(matches!(events[1], Event::Task(Ok(Some(_)))));
    assert_eq!(events[2], Event::Release);
}

#[test]
fn empty_stream_is_schema_null_task_release() {
    let (events, _) = Run::start(&empty_ipc_bytes(), Script::default()).finish();
    assert_eq!(events.len(), 3, "{events:?}");
    assert!(matches!(
        &events[0],
        Event::Schema {
            producer_set: true,
            ..
        }
    ));
    assert_eq!(events[1..], [Event::End, Event::Release]);
}

/// Synchronous failures: an errno, and no callback at all (the caller keeps
/// the handler).
#[test]
fn invalid_arguments_fail_without_any_callback() {
    let cases: Vec<(&str, Vec<u8>, i32, i64, c_int)> = vec![
        ("garbage IPC", b"garbage".to_vec(), CPU, -1, libc::EINVAL),
        ("empty IPC", Vec::new(), CPU, -1, libc::EINVAL),
        ("CUDA", ipc_bytes(), device::CUDA, 0, libc::ENOSYS),
        ("CPU device 0", ipc_bytes(), CPU, 0, libc::ENOSYS),
    ];
    for (what, ipc, device_type, device_id, code) in cases {
        let run = Run::start_on(&ipc, one_at_a_time(), device_type, device_id, |_| {});
        assert_eq!(run.rc, code, "{what}");
        assert!(last_error().is_some(), "{what}");
        assert!(
            run.released.recv_timeout(QUIET).is_err(),
            "{what}: no release"
        );
        assert!(run.recorder.events().is_empty(), "{what}");
        assert!(run.handler.producer.is_null(), "{what}: handler untouched");
    }
    let run = Run::start_on(&ipc_bytes(), one_at_a_time(), CPU, -1, |h| {
        h.on_error = None
    });
    assert_eq!(run.rc, libc::EINVAL);
    assert!(last_error().unwrap().contains("on_error"));
    assert!(run.released.recv_timeout(QUIET).is_err());
    let ipc = ipc_bytes();
    // SAFETY: a NULL handler is rejected before anything else.
    let rc = unsafe {
        plugin::arrowcert_produce_async(
            ipc.as_ptr(),
            ipc.len() as i64,
            CPU,
            -1,
            std::ptr::null_mut(),
        )
    };
    assert_eq!(rc, libc::EINVAL);
}

#[test]
fn many_concurrent_runs() {
    let runs: Vec<Run> = (0..8)
        .map(|_| Run::start(&ipc_bytes(), one_at_a_time()))
        .collect();
    for run in runs {
        let (events, _) = run.finish();
        assert_eq!(events.len(), 6);
        assert_eq!(events.last(), Some(&Event::Release));
    }
}

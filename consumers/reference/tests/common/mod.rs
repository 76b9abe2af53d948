//! Test-side producers and helpers for the reference consumer's tests.
//!
//! Data is built as arrow-rs RecordBatches and exported with
//! `arrowcert_sdk::abi::arrow_rs`; every exported base structure is wrapped so
//! that its release is counted (a per-structure counter shared with the
//! test), which is how the tests check "released exactly once by the time
//! the call returns".

#![allow(dead_code)]

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::io::Cursor;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use arrow_array::builder::{Int64Builder, ListBuilder};
use arrow_array::types::Int8Type;
use arrow_array::{ArrayRef, DictionaryArray, Int32Array, RecordBatch, StringArray};
use arrow_ipc::reader::StreamReader;
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use arrowcert_consumer_reference::{arrowcert_free, arrowcert_last_error};
use arrowcert_sdk::abi::arrow_rs::{export_batch, export_schema};
use arrowcert_sdk::abi::ops::Owned;
use arrowcert_sdk::abi::{
    device, ArrowArray, ArrowArrayStream, ArrowDeviceArray, ArrowDeviceArrayStream,
    ArrowDeviceType, ArrowSchema, Plain,
};

// ---- data --------------------------------------------------------------

/// ints with nulls, strings with nulls, a list, a dictionary column, and
/// schema-level metadata.
pub fn sample_schema() -> SchemaRef {
    let item = Arc::new(Field::new("item", DataType::Int64, true));
    Arc::new(
        Schema::new(vec![
            Field::new("ints", DataType::Int32, true),
            Field::new("strings", DataType::Utf8, true),
            Field::new("list", DataType::List(item), true),
            Field::new(
                "dict",
                DataType::Dictionary(Box::new(DataType::Int8), Box::new(DataType::Utf8)),
                true,
            ),
        ])
        .with_metadata(HashMap::from([(
            "origin".to_string(),
            "arrowcert consumer tests".to_string(),
        )])),
    )
}

/// A batch of `rows` rows of [`sample_schema`]; `seed` varies the values.
pub fn sample_batch(seed: i32, rows: usize) -> RecordBatch {
    let ints = Int32Array::from_iter((0..rows as i32).map(|i| (i % 3 != 0).then_some(seed + i)));
    let strings = StringArray::from_iter(
        (0..rows).map(|i| (i % 4 != 1).then(|| format!("s{seed}-{i}-{}", "é".repeat(i % 3)))),
    );
    let mut list = ListBuilder::new(Int64Builder::new());
    for i in 0..rows as i64 {
        if i % 5 == 2 {
            list.append_null();
        } else {
            for j in 0..(i % 4) {
                list.values().append_option((j != 1).then_some(i * 10 + j));
            }
            list.append(true);
        }
    }
    let colours = ["red", "green", "blue"];
    let dict: DictionaryArray<Int8Type> = (0..rows)
        .map(|i| (i % 6 != 4).then_some(colours[(i + seed as usize) % 3]))
        .collect();
    let columns: Vec<ArrayRef> = vec![
        Arc::new(ints),
        Arc::new(strings),
        Arc::new(list.finish()),
        Arc::new(dict),
    ];
    RecordBatch::try_new(sample_schema(), columns).expect("sample batch")
}

// ---- counted exports ---------------------------------------------------

/// How many times a wrapped base structure's release was called.
pub type Counter = Arc<AtomicUsize>;

pub fn counter() -> Counter {
    Arc::new(AtomicUsize::new(0))
}

pub fn count(c: &Counter) -> usize {
    c.load(Ordering::SeqCst)
}

struct WrappedArray {
    inner: ArrowArray,
    releases: Counter,
}

/// # Safety
/// `array` is the live structure this release callback was installed in (or moved
/// to), called as the C data interface calls a release callback.
unsafe extern "C" fn release_wrapped_array(array: *mut ArrowArray) {
    // SAFETY: a structure made by counted_array, released once (the counter
    // shows a second call; private_data is NULL after the first).
    unsafe {
        let private = (*array).private_data as *mut WrappedArray;
        assert!(!private.is_null(), "array released twice");
        let mut wrapped = Box::from_raw(private);
        wrapped.inner.release();
        wrapped.releases.fetch_add(1, Ordering::SeqCst);
        (*array).private_data = std::ptr::null_mut();
        (*array).release = None;
    }
}

/// Wraps an exported array so that its release is counted. The members
/// point into the inner export's private data, so the wrapper is as
/// relocatable as the export itself.
pub fn counted_array(inner: ArrowArray, releases: &Counter) -> ArrowArray {
    let outer = ArrowArray {
        length: inner.length,
        null_count: inner.null_count,
        offset: inner.offset,
        n_buffers: inner.n_buffers,
        n_children: inner.n_children,
        buffers: inner.buffers,
        children: inner.children,
        dictionary: inner.dictionary,
        release: Some(release_wrapped_array),
        private_data: std::ptr::null_mut(),
    };
    let private = Box::new(WrappedArray {
        inner,
        releases: releases.clone(),
    });
    ArrowArray {
        private_data: Box::into_raw(private) as *mut c_void,
        ..outer
    }
}

struct WrappedSchema {
    inner: ArrowSchema,
    releases: Counter,
}

/// # Safety
/// `schema` is the live structure this release callback was installed in (or
/// moved to), called as the C data interface calls a release callback.
unsafe extern "C" fn release_wrapped_schema(schema: *mut ArrowSchema) {
    // SAFETY: as in release_wrapped_array.
    unsafe {
        let private = (*schema).private_data as *mut WrappedSchema;
        assert!(!private.is_null(), "schema released twice");
        let mut wrapped = Box::from_raw(private);
        wrapped.inner.release();
        wrapped.releases.fetch_add(1, Ordering::SeqCst);
        (*schema).private_data = std::ptr::null_mut();
        (*schema).release = None;
    }
}

/// Wraps an exported schema so that its release is counted.
pub fn counted_schema(inner: ArrowSchema, releases: &Counter) -> ArrowSchema {
    let outer = ArrowSchema {
        format: inner.format,
        name: inner.name,
        metadata: inner.metadata,
        flags: inner.flags,
        n_children: inner.n_children,
        children: inner.children,
        dictionary: inner.dictionary,
        release: Some(release_wrapped_schema),
        private_data: std::ptr::null_mut(),
    };
    let private = Box::new(WrappedSchema {
        inner,
        releases: releases.clone(),
    });
    ArrowSchema {
        private_data: Box::into_raw(private) as *mut c_void,
        ..outer
    }
}

/// Exports a schema, counted.
pub fn schema_export(schema: &Schema, releases: &Counter) -> ArrowSchema {
    counted_schema(export_schema(schema).expect("export schema"), releases)
}

/// Exports a batch as a struct array, counted.
pub fn batch_export(batch: &RecordBatch, releases: &Counter) -> ArrowArray {
    counted_array(export_batch(batch), releases)
}

/// Exports a batch as a device array on `device_type` (the data stays in
/// CPU memory: a consumer must refuse a non-CPU one without reading it).
pub fn device_export(
    batch: &RecordBatch,
    device_type: ArrowDeviceType,
    releases: &Counter,
) -> ArrowDeviceArray {
    ArrowDeviceArray {
        array: batch_export(batch, releases),
        device_id: if device_type == device::CPU { -1 } else { 0 },
        device_type,
        sync_event: std::ptr::null_mut(),
        reserved: [0; 3],
    }
}

// ---- reading what the consumer handed back -----------------------------

/// An IPC output buffer, freed with `arrowcert_free` when dropped.
pub struct Out {
    pub ptr: *mut u8,
    pub len: i64,
}

impl Out {
    pub fn new() -> Self {
        Out {
            ptr: std::ptr::null_mut(),
            len: -1,
        }
    }

    /// Decodes the IPC stream the consumer handed back.
    pub fn decode(&self) -> (SchemaRef, Vec<RecordBatch>) {
        assert!(!self.ptr.is_null(), "no output was handed back");
        // SAFETY: the consumer handed out `len` bytes at `ptr`.
        let bytes = unsafe { std::slice::from_raw_parts(self.ptr, self.len as usize) };
        let reader = StreamReader::try_new(Cursor::new(bytes), None).expect("IPC stream");
        let schema = reader.schema();
        let batches = reader.collect::<Result<Vec<_>, _>>().expect("IPC batches");
        (schema, batches)
    }
}

impl Drop for Out {
    fn drop(&mut self) {
        // SAFETY: NULL or the pointer the consumer handed out, freed once.
        unsafe { arrowcert_free(self.ptr as *mut c_void) };
    }
}

/// The consumer's last error on this thread, "" if none.
pub fn last_error() -> String {
    let ptr = arrowcert_last_error();
    if ptr.is_null() {
        return String::new();
    }
    // SAFETY: a NUL-terminated string valid until the next call into the
    // plugin on this thread.
    unsafe { CStr::from_ptr(ptr) }
        .to_string_lossy()
        .into_owned()
}

/// Asserts that the consumer handed back exactly `batches` of `schema`.
pub fn assert_read(out: &Out, schema: &SchemaRef, batches: &[RecordBatch]) {
    let (got_schema, got) = out.decode();
    assert_eq!(&got_schema, schema);
    assert_eq!(got.len(), batches.len(), "batch count");
    for (i, (g, want)) in got.iter().zip(batches).enumerate() {
        assert_eq!(g, want, "batch {i}");
    }
}

// ---- a scripted stream producer (plain and device) ----------------------

/// What a test stream produces, and where it fails.
pub struct Script {
    pub schema: SchemaRef,
    pub batches: Vec<RecordBatch>,
    /// get_schema fails with this code and message (NULL if `None`).
    pub schema_error: Option<(c_int, Option<&'static str>)>,
    /// The get_next call with this (0-based) index fails with this code and
    /// message.
    pub next_error: Option<(usize, c_int, Option<&'static str>)>,
    /// The device type of every chunk (device streams only).
    pub chunk_device: ArrowDeviceType,
}

impl Script {
    pub fn new(schema: SchemaRef, batches: Vec<RecordBatch>) -> Self {
        Script {
            schema,
            batches,
            schema_error: None,
            next_error: None,
            chunk_device: device::CPU,
        }
    }
}

/// What a test stream saw.
#[derive(Default)]
pub struct Log {
    pub stream_releases: AtomicUsize,
    pub get_schema_calls: AtomicUsize,
    /// Schemas handed over (successful get_schema calls).
    pub schemas_exported: AtomicUsize,
    pub get_next_calls: AtomicUsize,
    pub last_error_calls: AtomicUsize,
    /// get_last_error called when the last operation had not failed.
    pub last_error_misuse: AtomicUsize,
    pub schema_releases: Counter,
    pub array_releases: Counter,
}

impl Log {
    pub fn get(c: &AtomicUsize) -> usize {
        c.load(Ordering::SeqCst)
    }
}

struct StreamPrivate {
    script: Script,
    next: usize,
    failed: bool,
    message: Option<CString>,
    log: Arc<Log>,
}

impl StreamPrivate {
    fn fail(&mut self, code: c_int, message: Option<&str>) -> c_int {
        self.failed = true;
        self.message = message.map(|m| CString::new(m).expect("message"));
        code
    }
}

/// Access to the test stream's private data for both stream structures.
trait TestStream {
    fn private(&mut self) -> *mut c_void;
    fn mark_released(&mut self);
}

impl TestStream for ArrowArrayStream {
    fn private(&mut self) -> *mut c_void {
        self.private_data
    }
    fn mark_released(&mut self) {
        self.release = None;
        self.private_data = std::ptr::null_mut();
    }
}

impl TestStream for ArrowDeviceArrayStream {
    fn private(&mut self) -> *mut c_void {
        self.private_data
    }
    fn mark_released(&mut self) {
        self.release = None;
        self.private_data = std::ptr::null_mut();
    }
}

/// # Safety
/// `stream` is a live test stream.
unsafe fn private_of<'a, S: TestStream>(stream: *mut S) -> &'a mut StreamPrivate {
    // SAFETY: a live test stream's private data is a StreamPrivate.
    unsafe { &mut *((*stream).private() as *mut StreamPrivate) }
}

/// # Safety
/// `stream` is the live stream this callback was installed in, called as the C
/// stream interface lets a consumer call it, with `out` valid for writes of one
/// ArrowSchema.
unsafe extern "C" fn get_schema<S: TestStream>(stream: *mut S, out: *mut ArrowSchema) -> c_int {
    // SAFETY: the consumer calls this on the live stream.
    let p = unsafe { private_of(stream) };
    p.log.get_schema_calls.fetch_add(1, Ordering::SeqCst);
    p.failed = false;
    if let Some((code, message)) = p.script.schema_error {
        return p.fail(code, message);
    }
    let schema = schema_export(&p.script.schema, &p.log.schema_releases);
    // SAFETY: `out` is valid for writes.
    unsafe { out.write(schema) };
    p.log.schemas_exported.fetch_add(1, Ordering::SeqCst);
    0
}

/// The chunk of the current get_next call, or an error code, or None at
/// the end of stream.
fn next_chunk(p: &mut StreamPrivate) -> Result<Option<RecordBatch>, c_int> {
    let index = p.next;
    p.next += 1;
    p.log.get_next_calls.fetch_add(1, Ordering::SeqCst);
    p.failed = false;
    if let Some((at, code, message)) = p.script.next_error {
        if at == index {
            return Err(p.fail(code, message));
        }
    }
    Ok(p.script.batches.get(index).cloned())
}

/// # Safety
/// `stream` is the live stream this callback was installed in, called as the C
/// stream interface lets a consumer call it, with `out` valid for writes of one
/// ArrowArray.
unsafe extern "C" fn plain_get_next(stream: *mut ArrowArrayStream, out: *mut ArrowArray) -> c_int {
    // SAFETY: the consumer calls this on the live stream.
    let p = unsafe { private_of(stream) };
    let array = match next_chunk(p) {
        Err(code) => return code,
        Ok(Some(batch)) => batch_export(&batch, &p.log.array_releases),
        // End of stream: 0 and a released array.
        Ok(None) => ArrowArray::zeroed(),
    };
    // SAFETY: `out` is valid for writes.
    unsafe { out.write(array) };
    0
}

/// # Safety
/// `stream` is the live stream this callback was installed in, called as the C
/// stream interface lets a consumer call it, with `out` valid for writes of one
/// ArrowDeviceArray.
unsafe extern "C" fn device_get_next(
    stream: *mut ArrowDeviceArrayStream,
    out: *mut ArrowDeviceArray,
) -> c_int {
    // SAFETY: the consumer calls this on the live stream.
    let p = unsafe { private_of(stream) };
    let array = match next_chunk(p) {
        Err(code) => return code,
        Ok(Some(batch)) => device_export(&batch, p.script.chunk_device, &p.log.array_releases),
        Ok(None) => ArrowDeviceArray::zeroed(),
    };
    // SAFETY: `out` is valid for writes.
    unsafe { out.write(array) };
    0
}

/// # Safety
/// `stream` is the live stream this callback was installed in, called as the C
/// stream interface lets a consumer call it (after a failed call).
unsafe extern "C" fn get_last_error<S: TestStream>(stream: *mut S) -> *const c_char {
    // SAFETY: the consumer calls this on the live stream.
    let p = unsafe { private_of(stream) };
    p.log.last_error_calls.fetch_add(1, Ordering::SeqCst);
    if !p.failed {
        p.log.last_error_misuse.fetch_add(1, Ordering::SeqCst);
    }
    p.message.as_ref().map_or(std::ptr::null(), |m| m.as_ptr())
}

/// # Safety
/// `stream` is the live stream this callback was installed in, called as the C
/// stream interface lets a consumer call it.
unsafe extern "C" fn release_stream<S: TestStream>(stream: *mut S) {
    // SAFETY: the consumer releases the live stream once; a second call
    // finds private_data NULL and is counted without touching it.
    unsafe {
        let raw = (*stream).private() as *mut StreamPrivate;
        if raw.is_null() {
            panic!("test stream released twice");
        }
        let mut private = Box::from_raw(raw);
        private.log.stream_releases.fetch_add(1, Ordering::SeqCst);
        // Scribble over the error message in place (into_bytes keeps the
        // allocation), as the harness does, so that a consumer that kept
        // the pointer instead of copying the string reads garbage.
        if let Some(message) = private.message.take() {
            let mut bytes = message.into_bytes();
            bytes.iter_mut().for_each(|b| *b = b'#');
        }
        drop(private);
        (*stream).mark_released();
    }
}

/// A C stream playing `script`; the log records what the consumer did.
pub fn plain_stream(script: Script) -> (ArrowArrayStream, Arc<Log>) {
    let log = Arc::new(Log::default());
    let private = Box::new(StreamPrivate {
        script,
        next: 0,
        failed: false,
        message: None,
        log: log.clone(),
    });
    let stream = ArrowArrayStream {
        get_schema: Some(get_schema::<ArrowArrayStream>),
        get_next: Some(plain_get_next),
        get_last_error: Some(get_last_error::<ArrowArrayStream>),
        release: Some(release_stream::<ArrowArrayStream>),
        private_data: Box::into_raw(private) as *mut c_void,
    };
    (stream, log)
}

/// A C device stream on `device_type` playing `script`.
pub fn device_stream(
    script: Script,
    device_type: ArrowDeviceType,
) -> (ArrowDeviceArrayStream, Arc<Log>) {
    let log = Arc::new(Log::default());
    let private = Box::new(StreamPrivate {
        script,
        next: 0,
        failed: false,
        message: None,
        log: log.clone(),
    });
    let stream = ArrowDeviceArrayStream {
        device_type,
        get_schema: Some(get_schema::<ArrowDeviceArrayStream>),
        get_next: Some(device_get_next),
        get_last_error: Some(get_last_error::<ArrowDeviceArrayStream>),
        release: Some(release_stream::<ArrowDeviceArrayStream>),
        private_data: Box::into_raw(private) as *mut c_void,
    };
    (stream, log)
}

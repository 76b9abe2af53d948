//! Tests of the CUDA plugins' code. The mirror stand-in and the refusals run
//! everywhere; the round trips run only where the CUDA backend is available
//! (and otherwise print "skipped: <reason>").

use std::sync::Arc;

use arrow_array::builder::{
    BooleanBuilder, Int64Builder, ListBuilder, StringBuilder, StringDictionaryBuilder,
};
use arrow_array::types::Int8Type;
use arrow_array::{
    ArrayRef, BinaryArray, FixedSizeBinaryArray, Float64Array, Int32Array, LargeStringArray,
    NullArray, RecordBatch, StringViewArray, StructArray,
};
use arrow_schema::{DataType, Field};
use arrowcert::abi::arrow_rs::{export_batch_slice, export_schema, import_batch};
use arrowcert::abi::ops::{take, Guard, Owned};
use arrowcert::abi::{device as dt, ArrowDeviceArray, ArrowDeviceArrayStream, ArrowSchema, Plain};
use arrowcert::device::{self, cpu, Kind};
use arrowcert::sdk::{ipc, last_error_ptr};

use crate::mirror_standin as mirror;
use crate::mutation::{self, Consumer, Producer};
use crate::{consumer, producer};

/// A batch with one column of most layouts (validity, offsets of both
/// widths, views with variadic buffers, nesting, a dictionary).
fn sample() -> RecordBatch {
    let n = 12;
    let ints: ArrayRef = Arc::new(Int32Array::from_iter(
        (0..n).map(|i| (i % 3 != 0).then_some(i * 10)),
    ));
    let mut bools = BooleanBuilder::new();
    for i in 0..n {
        bools.append_option((i % 4 != 1).then_some(i % 2 == 0));
    }
    let mut strings = StringBuilder::new();
    for i in 0..n {
        if i % 5 == 2 {
            strings.append_null();
        } else {
            strings.append_value("x".repeat(i as usize));
        }
    }
    let large: ArrayRef = Arc::new(LargeStringArray::from_iter_values(
        (0..n).map(|i| format!("large-{i}")),
    ));
    let binary: ArrayRef = Arc::new(BinaryArray::from_iter_values(
        (0..n).map(|i| vec![i as u8; (i % 4) as usize]),
    ));
    let mut lists = ListBuilder::new(Int64Builder::new());
    for i in 0..n {
        if i % 6 == 5 {
            lists.append(false);
        } else {
            for j in 0..(i % 3) {
                lists.values().append_value((i * 100 + j) as i64);
            }
            lists.append(true);
        }
    }
    let inner: ArrayRef = Arc::new(StructArray::from(vec![
        (
            Arc::new(Field::new("f", DataType::Float64, true)),
            Arc::new(Float64Array::from_iter(
                (0..n).map(|i| Some(i as f64 / 2.0)),
            )) as ArrayRef,
        ),
        (
            Arc::new(Field::new("s", DataType::Utf8, false)),
            Arc::new(arrow_array::StringArray::from_iter_values(
                (0..n).map(|i| format!("s{i}")),
            )) as ArrayRef,
        ),
    ]));
    let mut dict = StringDictionaryBuilder::<Int8Type>::new();
    for i in 0..n {
        dict.append_value(["red", "green", "blue"][(i % 3) as usize]);
    }
    let fixed: ArrayRef =
        Arc::new(FixedSizeBinaryArray::try_from_iter((0..n).map(|i| [i as u8, 1, 2])).unwrap());
    let views: ArrayRef =
        Arc::new(StringViewArray::from_iter_values((0..n).map(|i| {
            format!("a view long enough to be out of line, number {i}")
        })));
    let nulls: ArrayRef = Arc::new(NullArray::new(n as usize));
    RecordBatch::try_from_iter(vec![
        ("ints", ints),
        ("bools", Arc::new(bools.finish()) as ArrayRef),
        ("strings", Arc::new(strings.finish()) as ArrayRef),
        ("large", large),
        ("binary", binary),
        ("lists", Arc::new(lists.finish()) as ArrayRef),
        ("inner", inner),
        ("dict", Arc::new(dict.finish()) as ArrayRef),
        ("fixed", fixed),
        ("views", views),
        ("nulls", nulls),
    ])
    .unwrap()
}

/// Rebuilds an export through the mirror stand-in with host reads and host
/// placement, and imports the copy.
fn through_mirror(batch: &RecordBatch, offset: usize, length: usize) -> RecordBatch {
    let cpu = cpu::backend();
    let mut schema = Guard::new(export_schema(batch.schema().as_ref()).unwrap());
    let host = Guard::new(export_batch_slice(batch, offset, length));
    let mut copy = mirror::to_host(&*cpu, &schema, &host).expect("rebuilt");
    assert!(!copy.buffers.is_empty());
    drop(host);
    let array = take(&mut copy.array);
    // SAFETY: both are live exports that follow the C data interface (the
    // schema an arrow-rs export, the array a tree the mirror built).
    unsafe { import_batch(take(&mut *schema), array) }.unwrap()
}

#[test]
fn mirror_standin_copies_every_layout() {
    let batch = sample();
    assert_eq!(through_mirror(&batch, 0, batch.num_rows()), batch);
    for (offset, length) in [(3, 5), (0, 0), (12, 0), (7, 5), (1, 1)] {
        assert_eq!(
            through_mirror(&batch, offset, length),
            batch.slice(offset, length),
            "slice {offset}+{length}"
        );
    }
}

#[test]
fn mirror_standin_frees_what_it_placed() {
    let batch = sample();
    let frees = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let schema = Guard::new(export_schema(batch.schema().as_ref()).unwrap());
    let host = Guard::new(export_batch_slice(&batch, 0, 4));
    let mut placed = 0;
    let counter = frees.clone();
    let rebuilt = mirror::rebuild(
        &schema,
        &host,
        &mut |b: &mirror::BufferRef| {
            arrowcert::device::hostmem::read(b.addr, b.len).ok_or_else(|| "unreadable".to_string())
        },
        &mut |b: &mirror::BufferRef, bytes: Vec<u8>| {
            placed += 1;
            let mut p = mirror::host_place(b, bytes)?;
            let inner = p.free.take().unwrap();
            let counter = counter.clone();
            p.free = Some(Box::new(move || {
                counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                inner()
            }));
            Ok(p)
        },
        None,
    )
    .unwrap();
    assert!(placed > 10);
    assert_eq!(frees.load(std::sync::atomic::Ordering::SeqCst), 0);
    drop(rebuilt);
    assert_eq!(frees.load(std::sync::atomic::Ordering::SeqCst), placed);
}

fn ipc_of(batch: &RecordBatch) -> Vec<u8> {
    ipc::encode(&batch.schema(), std::slice::from_ref(batch)).unwrap()
}

fn last_error() -> String {
    let p = last_error_ptr();
    assert!(!p.is_null());
    // SAFETY: the SDK's last error is a NUL-terminated string valid until
    // the next entry point call on this thread.
    unsafe { std::ffi::CStr::from_ptr(p) }
        .to_string_lossy()
        .into_owned()
}

fn produce_array(
    bytes: &[u8],
    offset: i64,
    length: i64,
    kind: Kind,
    m: producer::Mutation,
) -> (i32, Guard<ArrowDeviceArray>) {
    let mut out = Guard::<ArrowDeviceArray>::poisoned();
    // SAFETY: the IPC bytes and the out structure are live locals.
    let rc = unsafe {
        producer::produce_device_array(
            bytes.as_ptr(),
            bytes.len() as i64,
            0,
            offset,
            length,
            kind.device_type(),
            0,
            out.as_mut_ptr(),
            m,
        )
    };
    if rc != 0 {
        out.mark_released();
    }
    (rc, out)
}

fn schema_for(bytes: &[u8]) -> Guard<ArrowSchema> {
    let mut schema = Guard::<ArrowSchema>::zeroed();
    // SAFETY: live locals.
    let rc = unsafe {
        producer::produce_schema(bytes.as_ptr(), bytes.len() as i64, schema.as_mut_ptr())
    };
    assert_eq!(rc, 0);
    schema
}

/// Consumes a device array; the IPC it handed back, decoded.
fn consume_array(
    mut schema: Guard<ArrowSchema>,
    mut array: Guard<ArrowDeviceArray>,
    m: consumer::Mutation,
) -> Result<Vec<RecordBatch>, (i32, String)> {
    let mut out: *mut u8 = std::ptr::null_mut();
    let mut len = 0i64;
    // SAFETY: live structures the consumer moves; live out-parameters.
    let rc = unsafe {
        consumer::consume_device_array(
            schema.as_mut_ptr(),
            array.as_mut_ptr(),
            &mut out,
            &mut len,
            m,
        )
    };
    assert!(
        schema.is_released() && array.is_released(),
        "the consumer moved both"
    );
    if rc != 0 {
        return Err((rc, last_error()));
    }
    decode_out(out, len)
}

fn decode_out(out: *mut u8, len: i64) -> Result<Vec<RecordBatch>, (i32, String)> {
    // SAFETY: the consumer handed out `len` bytes at `out`.
    let bytes = unsafe { std::slice::from_raw_parts(out, len as usize) }.to_vec();
    // SAFETY: handed out by the consumer, freed once.
    unsafe { arrowcert::sdk::out::free(out.cast()) };
    Ok(ipc::decode(&bytes).unwrap().batches)
}

#[test]
fn without_cuda_producers_and_consumers_refuse_with_enosys() {
    if device::backend(Kind::Cuda).is_ok() {
        println!("skipped: this machine has CUDA");
        return;
    }
    let bytes = ipc_of(&sample());
    for kind in [Kind::Cuda, Kind::CudaHost, Kind::CudaManaged] {
        let (rc, _) = produce_array(&bytes, 0, -1, kind, mutation::reference_producer);
        assert_eq!(rc, libc::ENOSYS, "{kind}");
        let e = last_error();
        assert!(e.contains("no CUDA"), "{e}");
    }
    let (rc, _) = produce_array(&bytes, 0, -1, Kind::Cpu, mutation::reference_producer);
    assert_eq!(rc, libc::ENOSYS);
    assert!(last_error().contains("CUDA memory only"));

    // A consumer handed a (CPU) array it cannot read releases it and says so.
    let batch = sample();
    let mut cpu_array = ArrowDeviceArray::zeroed();
    cpu_array.array = export_batch_slice(&batch, 0, 3);
    cpu_array.device_type = dt::CPU;
    cpu_array.device_id = -1;
    let r = consume_array(
        schema_for(&bytes),
        Guard::new(cpu_array),
        mutation::reference_consumer,
    );
    let (rc, e) = r.unwrap_err();
    assert_eq!(rc, libc::ENOSYS);
    assert!(e.contains("CUDA memory only"), "{e}");
}

#[test]
fn an_unknown_mutant_is_einval() {
    fn bogus() -> arrowcert::sdk::PluginResult<Producer> {
        Err(arrowcert::sdk::PluginError::invalid(
            "ARROWCERT_MUTANT=\"bogus\"",
        ))
    }
    let (rc, _) = produce_array(&ipc_of(&sample()), 0, -1, Kind::Cuda, bogus);
    assert_eq!(rc, libc::EINVAL);
}

/// The CUDA backend, or `None` after printing why the test is skipped.
fn cuda() -> Option<Arc<dyn arrowcert::device::Device>> {
    match device::backend(Kind::Cuda) {
        Ok(b) => Some(b),
        Err(why) => {
            println!("skipped: {why}");
            None
        }
    }
}

const KINDS: [Kind; 3] = [Kind::Cuda, Kind::CudaHost, Kind::CudaManaged];

#[test]
fn gpu_device_arrays_round_trip() {
    let Some(dev) = cuda() else { return };
    let batch = sample();
    let bytes = ipc_of(&batch);
    for kind in KINDS {
        for (offset, length) in [(0, -1), (3, 5)] {
            let before = dev.live_bytes().unwrap();
            let (rc, array) =
                produce_array(&bytes, offset, length, kind, mutation::reference_producer);
            assert_eq!(rc, 0, "{kind}: {}", last_error());
            assert_eq!(array.device_type, kind.device_type());
            assert_eq!(array.device_id, 0);
            assert!(!array.sync_event.is_null());
            assert!(
                dev.live_bytes().unwrap() > before,
                "{kind}: device memory held"
            );
            let got = consume_array(schema_for(&bytes), array, mutation::reference_consumer)
                .unwrap_or_else(|e| panic!("{kind}: {e:?}"));
            let want = if length == -1 {
                batch.clone()
            } else {
                batch.slice(offset as usize, length as usize)
            };
            assert_eq!(got, vec![want], "{kind} {offset}+{length}");
            assert_eq!(
                dev.live_bytes().unwrap(),
                before,
                "{kind}: release freed it all"
            );
        }
    }
}

#[test]
fn gpu_device_stream_round_trips() {
    if cuda().is_none() {
        return;
    }
    let batch = sample();
    let batches = vec![batch.slice(0, 5), batch.slice(5, 7), batch.slice(12, 0)];
    let bytes = ipc::encode(&batch.schema(), &batches).unwrap();
    for kind in KINDS {
        let mut stream = Guard::<ArrowDeviceArrayStream>::poisoned();
        // SAFETY: live locals.
        let rc = unsafe {
            producer::produce_device_stream(
                bytes.as_ptr(),
                bytes.len() as i64,
                kind.device_type(),
                0,
                stream.as_mut_ptr(),
                mutation::reference_producer,
            )
        };
        assert_eq!(rc, 0, "{kind}: {}", last_error());
        assert_eq!(stream.device_type, kind.device_type());
        let mut out: *mut u8 = std::ptr::null_mut();
        let mut len = 0i64;
        // SAFETY: a live stream the consumer moves; live out-parameters.
        let rc = unsafe {
            consumer::consume_device_stream(
                stream.as_mut_ptr(),
                &mut out,
                &mut len,
                mutation::reference_consumer,
            )
        };
        assert_eq!(rc, 0, "{kind}: {}", last_error());
        assert_eq!(decode_out(out, len).unwrap(), batches, "{kind}");
    }
}

/// What the reference consumer reads from a mutant producer's export.
fn read_mutant(kind: Kind, m: producer::Mutation) -> Result<Vec<RecordBatch>, (i32, String)> {
    let bytes = ipc_of(&sample());
    let (rc, array) = produce_array(&bytes, 0, -1, kind, m);
    assert_eq!(rc, 0, "{kind}: {}", last_error());
    consume_array(schema_for(&bytes), array, mutation::reference_consumer)
}

#[test]
fn gpu_producer_mutants_are_observable() {
    if cuda().is_none() {
        return;
    }
    let batch = sample();
    fn no_event() -> arrowcert::sdk::PluginResult<Producer> {
        Ok(Producer::NoEvent)
    }
    fn before() -> arrowcert::sdk::PluginResult<Producer> {
        Ok(Producer::EventBeforeWrite)
    }
    fn by_value() -> arrowcert::sdk::PluginResult<Producer> {
        Ok(Producer::EventByValue)
    }
    for kind in KINDS {
        // Read without a real wait: the data is the poison, not the batch.
        for m in [no_event as producer::Mutation, before] {
            let got = read_mutant(kind, m);
            assert_ne!(got, Ok(vec![batch.clone()]), "{kind}");
        }
        let (rc, e) = read_mutant(kind, by_value).unwrap_err();
        assert_eq!(rc, libc::EINVAL, "{kind}");
        assert!(e.contains("sync_event"), "{e}");
    }
}

#[test]
fn gpu_host_buffers_and_leaks_are_what_they_say() {
    let Some(dev) = cuda() else { return };
    let bytes = ipc_of(&sample());
    fn host() -> arrowcert::sdk::PluginResult<Producer> {
        Ok(Producer::HostBuffers)
    }
    fn leak() -> arrowcert::sdk::PluginResult<Producer> {
        Ok(Producer::LeakDeviceMemory)
    }
    let (rc, mut array) = produce_array(&bytes, 0, -1, Kind::Cuda, host);
    assert_eq!(rc, 0, "{}", last_error());
    // SAFETY: the root's children array holds n_children live pointers.
    let first = unsafe { &**array.array.children };
    // SAFETY: as above, the child's buffers array holds n_buffers pointers.
    let values = unsafe { *first.buffers.add(1) } as usize;
    assert_eq!(dev.memory_kind(values).unwrap(), device::MemoryKind::Host);
    array.release();

    let before = dev.live_bytes().unwrap();
    let (rc, mut array) = produce_array(&bytes, 0, -1, Kind::Cuda, leak);
    assert_eq!(rc, 0, "{}", last_error());
    array.release();
    dev.synchronize().unwrap();
    assert!(
        dev.live_bytes().unwrap() > before,
        "the mutant kept its device memory"
    );
}

#[test]
fn gpu_read_before_wait_reads_the_poison() {
    if cuda().is_none() {
        return;
    }
    let batch = sample();
    let bytes = ipc_of(&batch);
    fn early() -> arrowcert::sdk::PluginResult<Consumer> {
        Ok(Consumer::ReadBeforeWait)
    }
    let (rc, array) = produce_array(&bytes, 0, -1, Kind::Cuda, mutation::reference_producer);
    assert_eq!(rc, 0, "{}", last_error());
    let got = consume_array(schema_for(&bytes), array, early);
    assert_ne!(got, Ok(vec![batch]));
}

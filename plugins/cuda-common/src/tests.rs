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
use arrowcert_sdk::abi::arrow_rs::{export_batch_slice, export_schema, import_batch};
use arrowcert_sdk::abi::ops::{take, Guard, Owned};
use arrowcert_sdk::abi::{
    device as dt, ArrowDeviceArray, ArrowDeviceArrayStream, ArrowSchema, Plain,
};
use arrowcert_sdk::device::{self, cpu, Kind};
use arrowcert_sdk::{ipc, last_error_ptr};

use crate::mutation::{self, Consumer, Producer};
use crate::{consumer, producer};
use arrowcert_sdk::device::mirror;

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
            arrowcert_sdk::device::hostmem::read(b.addr, b.len)
                .ok_or_else(|| "unreadable".to_string())
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
    unsafe { arrowcert_sdk::out::free(out.cast()) };
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
    fn bogus() -> arrowcert_sdk::PluginResult<Producer> {
        Err(arrowcert_sdk::PluginError::invalid(
            "ARROWCERT_MUTANT=\"bogus\"",
        ))
    }
    let (rc, _) = produce_array(&ipc_of(&sample()), 0, -1, Kind::Cuda, bogus);
    assert_eq!(rc, libc::EINVAL);
}

/// Held by every GPU test: the backend's count of live device bytes is
/// the process's, so tests running at once would see each other's
/// allocations (on an H100, `gpu_device_arrays_round_trip` failed so).
static GPU: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The CUDA backend and the GPU tests' lock, or `None` after printing why
/// the test is skipped.
fn cuda() -> Option<(
    std::sync::MutexGuard<'static, ()>,
    Arc<dyn arrowcert_sdk::device::Device>,
)> {
    let gpu = GPU.lock().unwrap_or_else(|e| e.into_inner());
    match device::backend(Kind::Cuda) {
        Ok(b) => Some((gpu, b)),
        Err(why) => {
            println!("skipped: {why}");
            None
        }
    }
}

const KINDS: [Kind; 3] = [Kind::Cuda, Kind::CudaHost, Kind::CudaManaged];

#[test]
fn gpu_device_arrays_round_trip() {
    let Some((_gpu, dev)) = cuda() else { return };
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
    let Some((_gpu, _)) = cuda() else { return };
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
    let Some((_gpu, _)) = cuda() else { return };
    let batch = sample();
    fn no_event() -> arrowcert_sdk::PluginResult<Producer> {
        Ok(Producer::NoEvent)
    }
    fn before() -> arrowcert_sdk::PluginResult<Producer> {
        Ok(Producer::EventBeforeWrite)
    }
    // Not read here: the event passed by value (Producer::EventByValue).
    // Its first bytes are readable driver memory, so the consumer hands
    // them to the driver, which follows them: on an H100 this test's
    // process died there. The fake device's test covers that mutant, and
    // a worker's death there is charged to device.event.type.
    for kind in KINDS {
        // Read without a real wait: the data is the poison, not the batch.
        for m in [no_event as producer::Mutation, before] {
            let got = read_mutant(kind, m);
            assert_ne!(got, Ok(vec![batch.clone()]), "{kind}");
        }
    }
}

#[test]
fn gpu_host_buffers_and_leaks_are_what_they_say() {
    let Some((_gpu, dev)) = cuda() else { return };
    let bytes = ipc_of(&sample());
    fn host() -> arrowcert_sdk::PluginResult<Producer> {
        Ok(Producer::HostBuffers)
    }
    fn leak() -> arrowcert_sdk::PluginResult<Producer> {
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
    let Some((_gpu, _)) = cuda() else { return };
    let batch = sample();
    let bytes = ipc_of(&batch);
    fn early() -> arrowcert_sdk::PluginResult<Consumer> {
        Ok(Consumer::ReadBeforeWait)
    }
    let (rc, array) = produce_array(&bytes, 0, -1, Kind::Cuda, mutation::reference_producer);
    assert_eq!(rc, 0, "{}", last_error());
    let got = consume_array(schema_for(&bytes), array, early);
    assert_ne!(got, Ok(vec![batch]));
}

/// A host-memory stand-in for a device with real late writes: `write_late`
/// queues on its stream and lands only when an event recorded after it is
/// waited on (or on `synchronize`), so the producer's and consumer's
/// ordering of writes, events and waits is tested without a GPU.
mod fake {
    use std::collections::{BTreeMap, HashMap};
    use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
    use std::sync::Mutex;

    use arrowcert_sdk::device::{hostmem, Device, Event, Kind, MemoryKind, Stream};

    #[derive(Default)]
    struct State {
        /// base -> the allocation (its heap buffer never moves).
        allocs: BTreeMap<usize, Vec<u8>>,
        /// stream -> writes queued and not landed.
        queued: HashMap<u64, Vec<(usize, Vec<u8>)>>,
        /// event -> (stream, how many of its queued writes it covers).
        events: HashMap<u64, Option<(u64, usize)>>,
    }

    #[derive(Default)]
    pub struct Fake {
        state: Mutex<State>,
        next: AtomicU64,
        live: AtomicI64,
    }

    impl Fake {
        fn id(&self) -> u64 {
            // Ids that are no plausible address: 1, 2, 3, ...
            self.next.fetch_add(1, Ordering::Relaxed) + 1
        }

        fn land(st: &mut State, stream: u64, n: usize) {
            let writes: Vec<_> = {
                let q = st.queued.entry(stream).or_default();
                q.drain(..n.min(q.len())).collect()
            };
            for (addr, bytes) in writes {
                let (base, buf) = st.allocs.range_mut(..=addr).next_back().expect("allocated");
                let at = addr - base;
                buf[at..at + bytes.len()].copy_from_slice(&bytes);
            }
            // What was landed is no longer counted by the events behind it.
            for e in st.events.values_mut().flatten() {
                if e.0 == stream {
                    e.1 = e.1.saturating_sub(n);
                }
            }
        }

        fn find(st: &State, addr: usize, len: usize) -> Option<(usize, usize)> {
            let (base, buf) = st.allocs.range(..=addr).next_back()?;
            (addr + len <= base + buf.len()).then_some((*base, buf.len()))
        }
    }

    impl Device for Fake {
        fn name(&self) -> &'static str {
            "fake"
        }
        fn alloc(&self, _: Kind, len: usize) -> Result<usize, String> {
            let buf = vec![0u8; len.max(1)];
            let addr = buf.as_ptr() as usize;
            self.live.fetch_add(buf.len() as i64, Ordering::Relaxed);
            self.state.lock().unwrap().allocs.insert(addr, buf);
            Ok(addr)
        }
        fn free(&self, addr: usize) -> Result<(), String> {
            // As the CUDA backend does, late writes land before a free.
            self.synchronize()?;
            let buf = self
                .state
                .lock()
                .unwrap()
                .allocs
                .remove(&addr)
                .ok_or("not ours")?;
            self.live.fetch_sub(buf.len() as i64, Ordering::Relaxed);
            Ok(())
        }
        fn copy_to_host(&self, addr: usize, len: usize) -> Result<Vec<u8>, String> {
            let st = self.state.lock().unwrap();
            match Fake::find(&st, addr, len) {
                Some((base, _)) => Ok(st.allocs[&base][addr - base..addr - base + len].to_vec()),
                None => hostmem::read(addr, len).ok_or_else(|| "unreadable".into()),
            }
        }
        fn copy_from_host(&self, addr: usize, bytes: &[u8]) -> Result<(), String> {
            let mut st = self.state.lock().unwrap();
            let (base, _) = Fake::find(&st, addr, bytes.len()).ok_or("not ours")?;
            let buf = st.allocs.get_mut(&base).unwrap();
            buf[addr - base..addr - base + bytes.len()].copy_from_slice(bytes);
            Ok(())
        }
        fn stream_create(&self) -> Result<Stream, String> {
            Ok(Stream(self.id()))
        }
        fn stream_destroy(&self, _: Stream) -> Result<(), String> {
            Ok(())
        }
        fn write_late(&self, stream: Stream, addr: usize, bytes: &[u8]) -> Result<(), String> {
            let mut st = self.state.lock().unwrap();
            Fake::find(&st, addr, bytes.len()).ok_or("not ours")?;
            st.queued
                .entry(stream.0)
                .or_default()
                .push((addr, bytes.to_vec()));
            Ok(())
        }
        fn event_create(&self) -> Result<Event, String> {
            let e = self.id();
            self.state.lock().unwrap().events.insert(e, None);
            Ok(Event(e))
        }
        fn event_destroy(&self, event: Event) -> Result<(), String> {
            let mut st = self.state.lock().unwrap();
            st.events
                .remove(&event.0)
                .map(|_| ())
                .ok_or_else(|| "no such event".into())
        }
        fn event_record(&self, event: Event, stream: Stream) -> Result<(), String> {
            let mut st = self.state.lock().unwrap();
            let n = st.queued.get(&stream.0).map_or(0, Vec::len);
            let e = st.events.get_mut(&event.0).ok_or("no such event")?;
            *e = Some((stream.0, n));
            Ok(())
        }
        fn event_wait(&self, event: Event) -> Result<(), String> {
            let mut st = self.state.lock().unwrap();
            if let Some((stream, n)) = *st.events.get(&event.0).ok_or("no such event")? {
                Fake::land(&mut st, stream, n);
            }
            Ok(())
        }
        fn event_query(&self, event: Event) -> Result<bool, String> {
            let st = self.state.lock().unwrap();
            Ok(matches!(
                st.events.get(&event.0).ok_or("no such event")?,
                None | Some((_, 0))
            ))
        }
        fn event_behind(&self, sync_event: usize) -> Result<Event, String> {
            let v = hostmem::read_u64(sync_event).ok_or("sync_event is not readable")?;
            if self.state.lock().unwrap().events.contains_key(&v) {
                Ok(Event(v))
            } else {
                Err(format!(
                    "sync_event does not point to a live event ({v:#x})"
                ))
            }
        }
        fn synchronize(&self) -> Result<(), String> {
            let mut st = self.state.lock().unwrap();
            let streams: Vec<u64> = st.queued.keys().copied().collect();
            for s in streams {
                Fake::land(&mut st, s, usize::MAX);
            }
            Ok(())
        }
        fn memory_kind(&self, addr: usize) -> Result<MemoryKind, String> {
            let st = self.state.lock().unwrap();
            Ok(match Fake::find(&st, addr, 1) {
                Some(_) => MemoryKind::Device { ordinal: 0 },
                None => MemoryKind::Host,
            })
        }
        fn allocation_of(&self, addr: usize) -> Option<(usize, usize)> {
            Fake::find(&self.state.lock().unwrap(), addr, 1)
        }
        fn live_bytes(&self) -> Option<i64> {
            Some(self.live.load(Ordering::Relaxed))
        }
    }
}

/// Exports with the fake device and reads back as the consumer does.
fn fake_round_trip(
    dev: &Arc<dyn arrowcert_sdk::device::Device>,
    batch: &RecordBatch,
    offset: usize,
    length: usize,
    pm: Producer,
    cm: Consumer,
) -> Result<RecordBatch, arrowcert_sdk::PluginError> {
    let exported = producer::export_batch(dev, Kind::Cuda, batch, offset, length, pm)?;
    let mut array = Guard::<ArrowDeviceArray>::poisoned();
    // SAFETY: a live local, valid for writes.
    unsafe { exported.write(array.as_mut_ptr()) };
    assert_eq!(array.device_type, dt::CUDA);
    assert_eq!(array.reserved, [0; 3]);
    let c_schema = Guard::new(export_schema(batch.schema().as_ref()).unwrap());
    let schema = consumer::schema_of(&c_schema)?;
    consumer::read_chunk(&**dev, &c_schema, &schema, array, cm, "the array")
}

#[test]
fn fake_device_round_trip_and_release() {
    let dev: Arc<dyn arrowcert_sdk::device::Device> = Arc::new(fake::Fake::default());
    let batch = sample();
    for (offset, length) in [(0, batch.num_rows()), (3, 5), (12, 0)] {
        let got = fake_round_trip(&dev, &batch, offset, length, Producer::None, Consumer::None);
        assert_eq!(got.unwrap(), batch.slice(offset, length));
        assert_eq!(dev.live_bytes(), Some(0), "release freed every buffer");
    }
}

#[test]
fn fake_device_mutants_show() {
    let dev: Arc<dyn arrowcert_sdk::device::Device> = Arc::new(fake::Fake::default());
    let batch = sample();
    let n = batch.num_rows();
    let run = |pm, cm| fake_round_trip(&dev, &batch, 0, n, pm, cm);
    // Writes not covered by the event, or read before the wait: the
    // consumer sees the poison (the complement of every byte).
    for (pm, cm) in [
        (Producer::NoEvent, Consumer::None),
        (Producer::EventBeforeWrite, Consumer::None),
        (Producer::None, Consumer::ReadBeforeWait),
    ] {
        assert_ne!(run(pm, cm).ok(), Some(batch.clone()), "{pm:?} {cm:?}");
        dev.synchronize().unwrap();
    }
    let e = run(Producer::EventByValue, Consumer::None).unwrap_err();
    assert_eq!(e.code, libc::EINVAL);
    assert!(e.message.contains("sync_event"), "{}", e.message);
    dev.synchronize().unwrap();
    // Host buffers hold the data at once, but are no device memory.
    assert_eq!(run(Producer::HostBuffers, Consumer::None).unwrap(), batch);
    let before = dev.live_bytes().unwrap();
    run(Producer::LeakDeviceMemory, Consumer::None).unwrap();
    assert!(dev.live_bytes().unwrap() > before, "the leak shows");
}

#[test]
fn fake_device_short_allocation_is_one_byte_short() {
    let dev: Arc<dyn arrowcert_sdk::device::Device> = Arc::new(fake::Fake::default());
    let batch = sample();
    let exported =
        producer::export_batch(&dev, Kind::Cuda, &batch, 0, 4, Producer::ShortAllocation).unwrap();
    let mut array = Guard::<ArrowDeviceArray>::poisoned();
    // SAFETY: a live local, valid for writes.
    unsafe { exported.write(array.as_mut_ptr()) };
    let c_schema = Guard::new(export_schema(batch.schema().as_ref()).unwrap());
    // The mirror's extents run one byte past the allocations.
    let r = mirror::to_host(&*dev, &c_schema, &array.array);
    assert!(r.is_err(), "an extent past its allocation is refused");
    drop(array);
    assert_eq!(dev.live_bytes(), Some(0));
}

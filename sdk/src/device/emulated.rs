//! The emulated device: a software device of type ARROW_DEVICE_EXT_DEV
//! with its own memory, streams and events, for testing every
//! synchronisation rule on machines without a GPU.
//!
//! Its one defining property: **a stream runs its work only as far as
//! someone waits for it.** Each stream is a worker thread with a queue;
//! writes enqueued on it (`write_async`) land when the worker reaches them,
//! and the worker advances only to the point someone asked for: an
//! `event_synchronize` (or `event_query`, through the C table) on an event
//! recorded on the stream, a `stream_synchronize`, or another stream's wait
//! on such an event. Nothing else moves it. So data an event does not
//! cover (an event recorded before the write, never recorded, or no event
//! at all) has *not* landed when a consumer that waited on that event reads
//! it, and a consumer that does not wait reads memory the writes never
//! reached: wrong values every time, not by luck. Fresh memory reads as
//! zeros (a valid, empty-looking array, so a consumer reading too early
//! gets wrong values rather than crashing).
//!
//! Memory is host-addressable (like CUDA managed memory): after waiting, a
//! consumer may read it with ordinary loads. The harness itself reads it
//! only through [`Device::copy_to_host`], which checks the allocation table.
//!
//! Plugins reach the same device through the C function table of
//! [`super::emulated_ffi`] (`harness/include/arrowcert_emulated_device.h`).

use std::alloc::Layout;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::thread::JoinHandle;

use super::{hostmem, Device, Event, Kind, MemoryKind, Stream};

/// The emulated device's id (`device_id` of its arrays).
pub const DEVICE_ID: i64 = 0;
/// First bytes of every event object: what `*(event*)` reads when a
/// producer passes the event itself as `sync_event`.
const EVENT_MAGIC: u64 = 0x4556_454e_5445_4d55; // "UMETNEVE"

/// An allocation: its layout (for freeing).
struct Alloc {
    layout: Layout,
}

/// Work on a stream.
enum Op {
    /// Copy `data` to `dst` (checked against the allocation table when it
    /// runs; dropped when its allocation was freed first).
    Write { dst: usize, data: Vec<u8> },
    /// Wait for `stream` to finish its work up to `seq`.
    Wait { stream: Arc<StreamInner>, seq: u64 },
    /// Purged work (a write whose allocation was freed).
    Nop,
}

#[derive(Default)]
struct StreamState {
    queue: VecDeque<(u64, Op)>,
    /// Sequence number of the last op enqueued.
    enqueued: u64,
    /// Sequence number of the last op finished.
    done: u64,
    /// Run ops up to this sequence number.
    demand: u64,
    shutdown: bool,
}

#[derive(Default)]
struct StreamInner {
    state: Mutex<StreamState>,
    cv: Condvar,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl StreamInner {
    /// Asks the worker to run up to `seq` and blocks until it has.
    fn run_to(&self, seq: u64) {
        let mut st = lock(&self.state);
        if st.demand < seq {
            st.demand = seq;
            self.cv.notify_all();
        }
        while st.done < seq {
            st = self.cv.wait(st).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Asks the worker to run up to `seq` without waiting.
    fn ask(&self, seq: u64) {
        let mut st = lock(&self.state);
        if st.demand < seq {
            st.demand = seq;
            self.cv.notify_all();
        }
    }

    fn done(&self, seq: u64) -> bool {
        lock(&self.state).done >= seq
    }

    fn work(self: Arc<Self>) {
        loop {
            let (seq, op) = {
                let mut st = lock(&self.state);
                loop {
                    if let Some((seq, _)) = st.queue.front() {
                        if *seq <= st.demand {
                            break;
                        }
                    } else if st.shutdown {
                        return;
                    }
                    st = self.cv.wait(st).unwrap_or_else(|p| p.into_inner());
                }
                st.queue.pop_front().expect("front checked")
            };
            match op {
                Op::Write { dst, data } => {
                    // A write to freed memory is dropped (its allocation
                    // purged the op already, unless the free raced with us).
                    let _ = emulated().write_now(dst, &data);
                }
                Op::Wait { stream, seq } => stream.run_to(seq),
                Op::Nop => {}
            }
            let mut st = lock(&self.state);
            st.done = seq;
            self.cv.notify_all();
        }
    }
}

struct StreamEntry {
    inner: Arc<StreamInner>,
    worker: Option<JoinHandle<()>>,
}

/// Where an event was recorded.
#[derive(Clone, Default)]
struct EventState {
    at: Option<(Arc<StreamInner>, u64)>,
}

/// The device's state, one per process.
pub struct Emulated {
    allocs: Mutex<BTreeMap<usize, Alloc>>,
    live: AtomicI64,
    streams: Mutex<HashMap<u64, StreamEntry>>,
    events: Mutex<HashMap<u64, EventState>>,
    next_stream: AtomicI64,
}

/// The process's emulated device.
pub fn emulated() -> &'static Emulated {
    static DEV: OnceLock<Emulated> = OnceLock::new();
    DEV.get_or_init(|| Emulated {
        allocs: Mutex::new(BTreeMap::new()),
        live: AtomicI64::new(0),
        streams: Mutex::new(HashMap::new()),
        events: Mutex::new(HashMap::new()),
        next_stream: AtomicI64::new(1),
    })
}

/// The emulated device as a [`Device`].
pub fn backend() -> Arc<dyn Device> {
    static B: OnceLock<Arc<dyn Device>> = OnceLock::new();
    B.get_or_init(|| Arc::new(Backend)).clone()
}

impl Emulated {
    /// Allocates `len` bytes (zeroed), 64-byte aligned.
    pub fn alloc(&self, len: usize) -> Result<usize, String> {
        let layout = Layout::from_size_align(len.max(1), 64)
            .map_err(|e| format!("cannot allocate {len} bytes: {e}"))?;
        // SAFETY: the layout has a non-zero size.
        let p = unsafe { std::alloc::alloc_zeroed(layout) };
        if p.is_null() {
            return Err(format!("out of memory allocating {len} bytes"));
        }
        lock(&self.allocs).insert(p as usize, Alloc { layout });
        self.live.fetch_add(layout.size() as i64, Ordering::Relaxed);
        Ok(p as usize)
    }

    /// Frees an allocation; pending writes into it are dropped.
    pub fn free(&self, addr: usize) -> Result<(), String> {
        let alloc = lock(&self.allocs)
            .remove(&addr)
            .ok_or_else(|| format!("{addr:#x} is not an allocation of the emulated device"))?;
        let len = alloc.layout.size();
        for entry in lock(&self.streams).values() {
            let mut st = lock(&entry.inner.state);
            for (_, op) in st.queue.iter_mut() {
                if let Op::Write { dst, .. } = op {
                    if *dst >= addr && *dst < addr + len {
                        *op = Op::Nop;
                    }
                }
            }
        }
        self.live.fetch_sub(len as i64, Ordering::Relaxed);
        // SAFETY: `addr` was allocated by `alloc` with this layout and was
        // in the table (now removed, so it is freed once).
        unsafe { std::alloc::dealloc(addr as *mut u8, alloc.layout) };
        Ok(())
    }

    /// The allocation holding `addr`: (base, length).
    pub fn allocation_of(&self, addr: usize) -> Option<(usize, usize)> {
        let allocs = lock(&self.allocs);
        let (&base, a) = allocs.range(..=addr).next_back()?;
        (addr < base + a.layout.size()).then_some((base, a.layout.size()))
    }

    fn check_range(allocs: &BTreeMap<usize, Alloc>, addr: usize, len: usize) -> Result<(), String> {
        let Some((&base, a)) = allocs.range(..=addr).next_back() else {
            return Err(format!(
                "{addr:#x} is not in an allocation of the emulated device"
            ));
        };
        let size = a.layout.size();
        if addr >= base + size && len > 0 || addr.saturating_add(len) > base + size {
            return Err(format!(
                "{len} bytes at {addr:#x} run past the end of the emulated allocation {base:#x}+{size}"
            ));
        }
        Ok(())
    }

    /// Writes now (what a stream does when it reaches a write).
    fn write_now(&self, dst: usize, data: &[u8]) -> Result<(), String> {
        let allocs = lock(&self.allocs);
        Self::check_range(&allocs, dst, data.len())?;
        // SAFETY: the range lies inside a live allocation (checked under the
        // table's lock, which `free` takes before deallocating).
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), dst as *mut u8, data.len()) };
        Ok(())
    }

    /// Copies `len` bytes out of one allocation.
    pub fn read(&self, addr: usize, len: usize) -> Result<Vec<u8>, String> {
        let allocs = lock(&self.allocs);
        Self::check_range(&allocs, addr, len)?;
        let mut out = vec![0u8; len];
        // SAFETY: as in `write_now`.
        unsafe { std::ptr::copy_nonoverlapping(addr as *const u8, out.as_mut_ptr(), len) };
        Ok(out)
    }

    pub fn stream_create(&self) -> Stream {
        let id = self.next_stream.fetch_add(1, Ordering::Relaxed) as u64;
        let inner = Arc::new(StreamInner::default());
        let worker = {
            let inner = inner.clone();
            std::thread::Builder::new()
                .name(format!("emulated-stream-{id}"))
                .spawn(move || inner.work())
                .ok()
        };
        lock(&self.streams).insert(id, StreamEntry { inner, worker });
        Stream(id)
    }

    fn stream(&self, s: Stream) -> Result<Arc<StreamInner>, String> {
        lock(&self.streams)
            .get(&s.0)
            .map(|e| e.inner.clone())
            .ok_or_else(|| format!("{:#x} is not a stream of the emulated device", s.0))
    }

    /// Runs the stream's remaining work, then ends its worker.
    pub fn stream_destroy(&self, s: Stream) -> Result<(), String> {
        let entry = lock(&self.streams)
            .remove(&s.0)
            .ok_or_else(|| format!("{:#x} is not a stream of the emulated device", s.0))?;
        let end = lock(&entry.inner.state).enqueued;
        entry.inner.run_to(end);
        {
            let mut st = lock(&entry.inner.state);
            st.shutdown = true;
            entry.inner.cv.notify_all();
        }
        if let Some(w) = entry.worker {
            let _ = w.join();
        }
        Ok(())
    }

    fn enqueue(&self, s: Stream, op: Op) -> Result<(), String> {
        let inner = self.stream(s)?;
        let mut st = lock(&inner.state);
        st.enqueued += 1;
        let seq = st.enqueued;
        st.queue.push_back((seq, op));
        Ok(())
    }

    /// Enqueues a write of `data` (copied now) to `dst`.
    pub fn write_async(&self, s: Stream, dst: usize, data: Vec<u8>) -> Result<(), String> {
        Self::check_range(&lock(&self.allocs), dst, data.len())?;
        self.enqueue(s, Op::Write { dst, data })
    }

    /// Blocks until the stream's work so far is done.
    pub fn stream_synchronize(&self, s: Stream) -> Result<(), String> {
        let inner = self.stream(s)?;
        let end = lock(&inner.state).enqueued;
        inner.run_to(end);
        Ok(())
    }

    /// A new event: a heap object whose address is the handle.
    pub fn event_create(&self) -> Event {
        let obj = Box::into_raw(Box::new(EVENT_MAGIC)) as u64;
        lock(&self.events).insert(obj, EventState::default());
        Event(obj)
    }

    pub fn event_destroy(&self, e: Event) -> Result<(), String> {
        lock(&self.events)
            .remove(&e.0)
            .ok_or_else(|| format!("{:#x} is not an event of the emulated device", e.0))?;
        // SAFETY: live events are Box<u64> made by `event_create`; removed
        // from the table above, so freed once.
        drop(unsafe { Box::from_raw(e.0 as *mut u64) });
        Ok(())
    }

    fn event(&self, e: Event) -> Result<EventState, String> {
        lock(&self.events)
            .get(&e.0)
            .cloned()
            .ok_or_else(|| format!("{:#x} is not a live event of the emulated device", e.0))
    }

    /// Marks the point of `s`'s work that `e` completes at.
    pub fn event_record(&self, e: Event, s: Stream) -> Result<(), String> {
        let inner = self.stream(s)?;
        let seq = lock(&inner.state).enqueued;
        let mut events = lock(&self.events);
        let state = events
            .get_mut(&e.0)
            .ok_or_else(|| format!("{:#x} is not a live event of the emulated device", e.0))?;
        state.at = Some((inner, seq));
        Ok(())
    }

    /// Blocks until the event completed (an event never recorded is
    /// complete, as in CUDA).
    pub fn event_synchronize(&self, e: Event) -> Result<(), String> {
        if let Some((s, seq)) = self.event(e)?.at {
            s.run_to(seq);
        }
        Ok(())
    }

    /// Whether the event completed. With `progress`, asks its stream to go
    /// on (what a consumer polling the event gets).
    pub fn event_query(&self, e: Event, progress: bool) -> Result<bool, String> {
        Ok(match self.event(e)?.at {
            None => true,
            Some((s, seq)) => {
                if progress {
                    s.ask(seq);
                }
                s.done(seq)
            }
        })
    }

    /// Makes `s` wait for `e` before its later work.
    pub fn stream_wait_event(&self, s: Stream, e: Event) -> Result<(), String> {
        match self.event(e)?.at {
            None => Ok(()),
            Some((stream, seq)) => self.enqueue(s, Op::Wait { stream, seq }),
        }
    }

    /// Whether `addr` is a live event handle.
    pub fn is_event(&self, addr: u64) -> bool {
        lock(&self.events).contains_key(&addr)
    }

    /// Runs every stream's work to its end.
    pub fn synchronize(&self) {
        let streams: Vec<Arc<StreamInner>> = lock(&self.streams)
            .values()
            .map(|e| e.inner.clone())
            .collect();
        for s in streams {
            let end = lock(&s.state).enqueued;
            s.run_to(end);
        }
    }

    pub fn live_bytes(&self) -> i64 {
        self.live.load(Ordering::Relaxed)
    }
}

/// [`Device`] over the process's emulated device.
struct Backend;

impl Device for Backend {
    fn name(&self) -> &'static str {
        "emulated"
    }
    fn alloc(&self, kind: Kind, len: usize) -> Result<usize, String> {
        if kind != Kind::Emulated {
            return Err(format!("the emulated device cannot allocate {kind} memory"));
        }
        emulated().alloc(len)
    }
    fn free(&self, addr: usize) -> Result<(), String> {
        emulated().free(addr)
    }
    fn copy_to_host(&self, addr: usize, len: usize) -> Result<Vec<u8>, String> {
        emulated().read(addr, len)
    }
    fn copy_from_host(&self, addr: usize, bytes: &[u8]) -> Result<(), String> {
        emulated().write_now(addr, bytes)
    }
    fn stream_create(&self) -> Result<Stream, String> {
        Ok(emulated().stream_create())
    }
    fn stream_destroy(&self, stream: Stream) -> Result<(), String> {
        emulated().stream_destroy(stream)
    }
    fn write_late(&self, stream: Stream, addr: usize, bytes: &[u8]) -> Result<(), String> {
        emulated().write_async(stream, addr, bytes.to_vec())
    }
    fn event_create(&self) -> Result<Event, String> {
        Ok(emulated().event_create())
    }
    fn event_destroy(&self, event: Event) -> Result<(), String> {
        emulated().event_destroy(event)
    }
    fn event_record(&self, event: Event, stream: Stream) -> Result<(), String> {
        emulated().event_record(event, stream)
    }
    fn event_wait(&self, event: Event) -> Result<(), String> {
        emulated().event_synchronize(event)
    }
    fn event_query(&self, event: Event) -> Result<bool, String> {
        emulated().event_query(event, false)
    }
    fn event_behind(&self, sync_event: usize) -> Result<Event, String> {
        let dev = emulated();
        if dev.is_event(sync_event as u64) {
            return Err(format!(
                "sync_event ({sync_event:#x}) is itself an event of the emulated device: the event was passed by value, where the spec wants a pointer to it"
            ));
        }
        let v = hostmem::read_u64(sync_event).ok_or_else(|| {
            format!("sync_event ({sync_event:#x}) does not point to readable host memory")
        })?;
        if dev.is_event(v) {
            Ok(Event(v))
        } else {
            Err(format!(
                "the 8 bytes sync_event ({sync_event:#x}) points to ({v:#x}) are not a live event of the emulated device"
            ))
        }
    }
    fn synchronize(&self) -> Result<(), String> {
        emulated().synchronize();
        Ok(())
    }
    fn memory_kind(&self, addr: usize) -> Result<MemoryKind, String> {
        if emulated().allocation_of(addr).is_some() {
            Ok(MemoryKind::Emulated { id: DEVICE_ID })
        } else if hostmem::readable(addr, 1) {
            Ok(MemoryKind::Host)
        } else {
            Err(format!(
                "{addr:#x} is neither emulated device memory nor readable host memory"
            ))
        }
    }
    fn allocation_of(&self, addr: usize) -> Option<(usize, usize)> {
        emulated().allocation_of(addr)
    }
    fn live_bytes(&self) -> Option<i64> {
        Some(emulated().live_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_land_only_when_someone_waits() {
        let dev = backend();
        let p = dev.alloc(Kind::Emulated, 16).unwrap();
        let s = dev.stream_create().unwrap();
        let e = dev.event_create().unwrap();
        dev.write_late(s, p, &[7u8; 16]).unwrap();
        dev.event_record(e, s).unwrap();
        // However long we look, nothing has landed: nobody waited.
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(dev.copy_to_host(p, 16).unwrap(), vec![0u8; 16]);
        assert!(!dev.event_query(e).unwrap());
        dev.event_wait(e).unwrap();
        assert!(dev.event_query(e).unwrap());
        assert_eq!(dev.copy_to_host(p, 16).unwrap(), vec![7u8; 16]);
        dev.event_destroy(e).unwrap();
        dev.stream_destroy(s).unwrap();
        dev.free(p).unwrap();
    }

    #[test]
    fn an_event_recorded_before_the_write_does_not_cover_it() {
        let dev = backend();
        let p = dev.alloc(Kind::Emulated, 4).unwrap();
        let s = dev.stream_create().unwrap();
        let e = dev.event_create().unwrap();
        dev.event_record(e, s).unwrap();
        dev.write_late(s, p, &[1, 2, 3, 4]).unwrap();
        dev.event_wait(e).unwrap();
        assert_eq!(dev.copy_to_host(p, 4).unwrap(), vec![0; 4]);
        dev.synchronize().unwrap();
        assert_eq!(dev.copy_to_host(p, 4).unwrap(), vec![1, 2, 3, 4]);
        dev.event_destroy(e).unwrap();
        dev.stream_destroy(s).unwrap();
        dev.free(p).unwrap();
    }

    #[test]
    fn bounds_pointer_kinds_and_events_behind_pointers() {
        let dev = backend();
        let p = dev.alloc(Kind::Emulated, 100).unwrap();
        assert_eq!(dev.allocation_of(p + 99), Some((p, 100)));
        assert_eq!(dev.allocation_of(p + 100), None);
        assert!(dev.copy_to_host(p + 90, 11).is_err());
        assert_eq!(
            dev.memory_kind(p + 5).unwrap(),
            MemoryKind::Emulated { id: DEVICE_ID }
        );
        let host = [0u8; 8];
        assert_eq!(
            dev.memory_kind(host.as_ptr() as usize).unwrap(),
            MemoryKind::Host
        );
        let e = dev.event_create().unwrap();
        let slot: u64 = e.0;
        assert_eq!(dev.event_behind(&slot as *const u64 as usize).unwrap(), e);
        let by_value = dev.event_behind(e.0 as usize).unwrap_err();
        assert!(by_value.contains("passed by value"), "{by_value}");
        let junk: u64 = 42;
        assert!(dev.event_behind(&junk as *const u64 as usize).is_err());
        assert!(dev.event_behind(8).is_err());
        dev.event_destroy(e).unwrap();
        let before = dev.live_bytes().unwrap();
        dev.free(p).unwrap();
        assert!(dev.live_bytes().unwrap() < before);
        assert!(dev.free(p).is_err());
    }

    #[test]
    fn freeing_drops_pending_writes_and_streams_drain_when_destroyed() {
        let dev = backend();
        let p = dev.alloc(Kind::Emulated, 8).unwrap();
        let q = dev.alloc(Kind::Emulated, 8).unwrap();
        let s = dev.stream_create().unwrap();
        dev.write_late(s, p, &[9; 8]).unwrap();
        dev.write_late(s, q, &[5; 8]).unwrap();
        dev.free(p).unwrap();
        dev.stream_destroy(s).unwrap();
        assert_eq!(dev.copy_to_host(q, 8).unwrap(), vec![5; 8]);
        dev.free(q).unwrap();
    }
}

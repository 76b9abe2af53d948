//! Materialises [`Node`]s and [`SchemaNode`]s as C structures with
//! instrumented release callbacks, and keeps the book of what a consumer
//! did with them.
//!
//! Every allocation of one case (buffers, structures, pointer arrays,
//! strings, callback records) belongs to its [`Ledger`] and stays mapped
//! until the ledger is finished, so that a consumer that releases twice,
//! reads after release or calls a child's release is observed instead of
//! crashing the harness. A ledger whose exports were not all released
//! cleanly is leaked rather than freed: the consumer may still hold
//! pointers into it.
//!
//! What the release callbacks do ("Release callback semantics -- for
//! producers"): release the children and dictionary still in place, then
//! compare every buffer of the node with the copy taken at export (writes
//! are `consumer.data.immutable`), then overwrite the buffers and strings
//! with [`RELEASED_BYTE`] (reads after release see it), then set `release`
//! to NULL. A second call for the same node is `consumer.release.not-released`;
//! a child released by the consumer in place (not moved out first) is
//! `consumer.release.no-children`.

use std::cell::Cell;
use std::ffi::{c_char, c_void};
use std::sync::{Arc, Mutex};

use super::encode::{Node, SchemaNode};
use crate::abi::{ArrowArray, ArrowDeviceArray, ArrowSchema, Plain};
use crate::device::{Device, Event, Kind, Stream};
use crate::inspect::Violation;

/// How long [`Ledger::finish`] waits for releases from a consumer's other
/// threads before it judges a structure never released.
pub const LATE_RELEASE_GRACE: std::time::Duration = std::time::Duration::from_millis(250);

/// The rule an unreleased array or schema breaks.
const ONCE: Option<&str> = Some(crate::rule!("consumer.release.once"));

/// What released buffers and strings are overwritten with.
pub const RELEASED_BYTE: u8 = 0xDB;

/// Buffers are aligned to this many bytes (the spec recommends 64).
const ALIGN: usize = 64;

/// One base structure handed to the consumer.
#[derive(Debug, Clone)]
pub struct Root {
    /// `array`, `schema`, `stream chunk 2`, ...
    pub what: String,
    /// Where the structure was when handed over.
    pub addr: usize,
    /// Release calls: (address called on, thread).
    pub releases: Vec<(usize, String)>,
    /// The rule an unreleased structure breaks (`None`: none, for the
    /// already released structures the harness hands over on purpose).
    pub unreleased_rule: Option<&'static str>,
    /// For a device array with a sync_event: whether the event had
    /// completed when the consumer first gave the array up: released it,
    /// or returned from the call it was handed to (whichever came first;
    /// never released, when the case ended).
    pub synced: Option<bool>,
}

#[derive(Default)]
struct Book {
    roots: Vec<Root>,
    /// Release calls per node.
    node_releases: Vec<u32>,
    events: Vec<Violation>,
    /// Owned memory, freed (or leaked) when the ledger is finished.
    keep: Vec<Keep>,
    /// Records of the nodes, to check buffers at the end.
    nodes: Vec<SendPtr<NodeRec>>,
    /// The sync_event of each device-array root: (root, event).
    sync_events: Vec<(usize, Event)>,
    /// Late writes were enqueued since the device last settled.
    unsettled: bool,
}

/// Lets the device finish the ledger's late writes, if any are pending, so
/// that its buffers hold their final bytes (for the immutability check and
/// poisoning). Once per batch of writes, not once per released node.
fn settle(book: &Mutex<Book>, dev: &dyn Device) {
    let pending = std::mem::take(&mut book.lock().unwrap_or_else(|e| e.into_inner()).unsettled);
    if pending {
        let _ = dev.synchronize();
    }
}

/// An allocation the ledger owns.
struct Keep {
    ptr: *mut u8,
    layout: std::alloc::Layout,
    drop: Option<unsafe fn(*mut u8)>,
    /// Device memory, freed through its backend.
    device: Option<Arc<dyn Device>>,
}

// SAFETY: a Keep is only an owned allocation; it is freed once, by the
// thread that finishes the ledger, after every callback that could use it
// has returned or the memory was leaked.
unsafe impl Send for Keep {}

impl Drop for Keep {
    fn drop(&mut self) {
        if let Some(dev) = &self.device {
            let _ = dev.free(self.ptr as usize);
            return;
        }
        // SAFETY: `ptr` was allocated with `layout` (or is a Box whose drop
        // function is `drop`) and is freed exactly once, here.
        unsafe {
            match self.drop {
                Some(d) => d(self.ptr),
                None => std::alloc::dealloc(self.ptr, self.layout),
            }
        }
    }
}

struct SendPtr<T>(*mut T);
// SAFETY: the pointee is owned by the ledger and immutable after creation.
unsafe impl<T> Send for SendPtr<T> {}

/// What private_data of an exported array or schema points to.
struct NodeRec {
    book: Arc<Mutex<Book>>,
    id: usize,
    root: usize,
    path: String,
    is_root: bool,
    /// The structure's own address when exported (for children: the slot
    /// in the parent's children array).
    slot: usize,
    children: Vec<usize>,
    dictionary: usize,
    /// (pointer, length) of each non-NULL buffer or string, with its copy.
    buffers: Vec<(usize, usize, Vec<u8>)>,
    poison: bool,
    /// The device the buffers are on (`None`: host memory).
    device: Option<Arc<dyn Device>>,
}

thread_local! {
    /// Set while a release callback releases the children it owns.
    static IN_PARENT_RELEASE: Cell<bool> = const { Cell::new(false) };
}

/// The book of one case: everything exported, and what the consumer did.
pub struct Ledger {
    book: Arc<Mutex<Book>>,
    poison: bool,
    device: Option<OnDevice>,
}

/// Where a device ledger puts buffers: a device other than the CPU, and
/// the harness's stream on it.
#[derive(Clone)]
struct OnDevice {
    kind: Kind,
    dev: Arc<dyn Device>,
    stream: Stream,
    /// The device catches up with the late writes before each device
    /// array is handed over ([`Ledger::settled_before_handover`]).
    settled: bool,
}

/// The harness's stream on each device (one per process and device kind).
fn harness_stream(kind: Kind, dev: &dyn Device) -> Result<Stream, String> {
    static STREAMS: Mutex<Vec<(Kind, Stream)>> = Mutex::new(Vec::new());
    let mut streams = STREAMS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, s)) = streams.iter().find(|(k, _)| *k == kind) {
        return Ok(*s);
    }
    let s = dev.stream_create()?;
    streams.push((kind, s));
    Ok(s)
}

/// A structure the harness hands over, at a fixed address owned by the
/// ledger.
pub struct Handed<T> {
    ptr: *mut T,
    pub root: usize,
}

impl<T> Handed<T> {
    pub(super) fn new(ptr: *mut T, root: usize) -> Handed<T> {
        Handed { ptr, root }
    }

    /// The address the structure was handed over at.
    pub fn addr(&self) -> usize {
        self.ptr as usize
    }

    /// The structure, for a plugin call.
    pub fn get(&mut self) -> &mut T {
        // SAFETY: the ledger allocated it (leaked Box kept in `keep`) and
        // frees it only when finished, which consumes the ledger after every
        // Handed borrowed from it is gone (the Handed does not outlive the
        // case's use of it by construction: see Ledger::finish's callers).
        unsafe { &mut *self.ptr }
    }
}

/// What the consumer did, as judged at the end of a case.
pub struct Findings {
    pub roots: Vec<Root>,
    pub violations: Vec<Violation>,
}

impl Ledger {
    /// `poison`: overwrite buffers and strings when released (off for the
    /// differential rerun that tells reads after release apart).
    pub fn new(poison: bool) -> Ledger {
        Ledger {
            book: Arc::new(Mutex::new(Book::default())),
            poison,
            device: None,
        }
    }

    /// A ledger whose device arrays (and device stream chunks) are on
    /// `kind`: every buffer in that device's memory, written late on the
    /// harness's stream, with a sync_event recorded after the writes, so
    /// that a consumer that does not wait on it reads memory the data has
    /// not reached. The CPU gives a plain ledger.
    pub fn on_device(poison: bool, kind: Kind) -> Result<Ledger, String> {
        let mut ledger = Ledger::new(poison);
        if kind != Kind::Cpu {
            let dev = crate::device::backend(kind)?;
            let stream = harness_stream(kind, &*dev)?;
            ledger.device = Some(OnDevice {
                kind,
                dev,
                stream,
                settled: false,
            });
        }
        Ok(ledger)
    }

    /// This ledger's device arrays (and device stream chunks) are handed
    /// over with their late writes already landed and their sync_event
    /// completed: the differential rerun that tells a consumer that read
    /// before waiting apart (a consumer that waits reads the same bytes
    /// either way). No effect on the CPU.
    pub fn settled_before_handover(mut self) -> Ledger {
        if let Some(d) = &mut self.device {
            d.settled = true;
        }
        self
    }

    /// The device type and id of this ledger's device arrays.
    pub fn device_kind(&self) -> Kind {
        self.device.as_ref().map_or(Kind::Cpu, |d| d.kind)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Book> {
        self.book.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a base structure; returns its root index.
    pub(super) fn add_root(
        &self,
        what: &str,
        addr: usize,
        unreleased_rule: Option<&'static str>,
    ) -> usize {
        let mut b = self.lock();
        b.roots.push(Root {
            what: what.to_string(),
            addr,
            releases: Vec::new(),
            unreleased_rule,
            synced: None,
        });
        b.roots.len() - 1
    }

    fn book(&self) -> Arc<Mutex<Book>> {
        self.book.clone()
    }

    /// Another handle on the same book (for stream callbacks).
    pub(super) fn share(&self) -> Ledger {
        Ledger {
            book: self.book.clone(),
            poison: self.poison,
            device: self.device.clone(),
        }
    }

    pub(super) fn event_here(&self, rule: &'static str, at: &str, message: String) {
        Ledger::event(&self.book, rule, at, message);
    }

    pub(super) fn released_root(&self, root: usize, addr: usize) {
        Ledger::record_release(&mut self.lock(), root, addr);
    }

    /// Records a violation seen by a callback.
    fn event(book: &Mutex<Book>, rule: &'static str, at: &str, message: String) {
        let mut b = book.lock().unwrap_or_else(|e| e.into_inner());
        if b.events.len() < 200 {
            b.events.push(Violation {
                rule,
                at: at.to_string(),
                message,
            });
        }
    }

    fn record_release(book: &mut Book, root: usize, addr: usize) {
        let thread = format!("{:?}", std::thread::current().id());
        if let Some(r) = book.roots.get_mut(root) {
            r.releases.push((addr, thread));
        }
    }

    /// Keeps `value` until the ledger is finished; returns its address.
    pub(super) fn keep_box<T: 'static>(&self, value: T) -> *mut T {
        /// # Safety
        /// `p` was made by `Box::into_raw` of a `Box<T>` and is dropped once.
        unsafe fn drop_box<T>(p: *mut u8) {
            // SAFETY: p came from Box::into_raw::<T> below, dropped once.
            drop(unsafe { Box::from_raw(p as *mut T) });
        }
        let p = Box::into_raw(Box::new(value));
        self.lock().keep.push(Keep {
            ptr: p as *mut u8,
            layout: std::alloc::Layout::new::<u8>(),
            drop: Some(drop_box::<T>),
            device: None,
        });
        p
    }

    /// Copies `bytes` into a fresh 64-byte-aligned allocation.
    pub(super) fn keep_bytes(&self, bytes: &[u8], nul: bool) -> *mut u8 {
        self.keep_bytes_at(bytes, nul, 0)
    }

    /// [`Ledger::keep_bytes`], the copy starting `shift` bytes past an
    /// aligned address (an unaligned buffer when `shift` is not a multiple
    /// of the type's width).
    fn keep_bytes_at(&self, bytes: &[u8], nul: bool, shift: u8) -> *mut u8 {
        let shift = usize::from(shift);
        let size = (shift + bytes.len() + usize::from(nul))
            .max(1)
            .next_multiple_of(ALIGN);
        let layout = std::alloc::Layout::from_size_align(size, ALIGN).expect("layout");
        // SAFETY: layout has non-zero size.
        let p = unsafe { std::alloc::alloc_zeroed(layout) };
        if p.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        // SAFETY: p is valid for `size` >= shift + bytes.len() bytes and
        // does not overlap `bytes`.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), p.add(shift), bytes.len()) };
        self.lock().keep.push(Keep {
            ptr: p,
            layout,
            drop: None,
            device: None,
        });
        // SAFETY: within the allocation (shift < size).
        unsafe { p.add(shift) }
    }

    /// Copies `bytes` into fresh memory of the ledger's device, late (see
    /// [`Ledger::on_device`]).
    fn keep_device_bytes(&self, d: &OnDevice, bytes: &[u8]) -> *mut u8 {
        let len = bytes.len().max(1).next_multiple_of(ALIGN);
        let p = match d.dev.alloc(d.kind, len) {
            Ok(p) => p,
            Err(why) => panic!(
                "cannot allocate {len} bytes on the {} device: {why}",
                d.kind
            ),
        };
        self.lock().keep.push(Keep {
            ptr: p as *mut u8,
            layout: std::alloc::Layout::new::<u8>(),
            drop: None,
            device: Some(d.dev.clone()),
        });
        if let Err(why) = d.dev.write_late(d.stream, p, bytes) {
            panic!("cannot write to the {} device: {why}", d.kind);
        }
        // After the enqueue: a settle that clears the flag first still runs
        // this write.
        self.lock().unsettled = true;
        p as *mut u8
    }

    /// Exports an array tree; the root is registered as `what`.
    pub fn array(&self, node: &Node, what: &str) -> Handed<ArrowArray> {
        let ptr = self.keep_box(ArrowArray::poisoned());
        let root = self.add_root(what, ptr as usize, ONCE);
        // SAFETY: ptr is a live ArrowArray owned by the ledger.
        unsafe { self.fill_array(ptr, node, root, what, true) };
        Handed { ptr, root }
    }

    /// Exports a CPU device array (`device_id` -1, no sync event, reserved
    /// zero) around an array tree.
    pub fn device_array(&self, node: &Node, what: &str) -> Handed<ArrowDeviceArray> {
        let ptr = self.keep_box(ArrowDeviceArray::poisoned());
        let root = self.add_root(what, ptr as usize, ONCE);
        // SAFETY: ptr is a live ArrowDeviceArray owned by the ledger; its
        // first member is the ArrowArray.
        unsafe {
            self.fill_device_array(ptr, node, root, what);
        }
        Handed { ptr, root }
    }

    /// Fills `*out` (consumer memory, for stream chunks) with an array tree.
    ///
    /// # Safety
    /// `out` is valid for writes of an ArrowArray.
    pub(super) unsafe fn array_into(&self, out: *mut ArrowArray, node: &Node, what: &str) {
        let root = self.add_root(what, out as usize, ONCE);
        // SAFETY: forwarded.
        unsafe { self.fill_array(out, node, root, what, true) };
    }

    /// As [`Ledger::array_into`], for a device array.
    ///
    /// # Safety
    /// `out` is valid for writes of an ArrowDeviceArray.
    pub(super) unsafe fn device_array_into(
        &self,
        out: *mut ArrowDeviceArray,
        node: &Node,
        what: &str,
    ) -> usize {
        let root = self.add_root(what, out as usize, ONCE);
        // SAFETY: forwarded.
        unsafe { self.fill_device_array(out, node, root, what) };
        root
    }

    /// The rule a root left unreleased breaks (default
    /// `consumer.release.once`).
    pub(super) fn set_unreleased_rule(&self, root: usize, rule: &'static str) {
        if let Some(r) = self.lock().roots.get_mut(root) {
            r.unreleased_rule = Some(rule);
        }
    }

    /// # Safety
    /// `out` is valid for writes of an ArrowDeviceArray.
    unsafe fn fill_device_array(
        &self,
        out: *mut ArrowDeviceArray,
        node: &Node,
        root: usize,
        what: &str,
    ) {
        // SAFETY: out is valid for writes (caller); the embedded array is
        // its first member.
        unsafe {
            std::ptr::write(out, ArrowDeviceArray::zeroed());
            let kind = self.device_kind();
            (*out).device_type = kind.device_type();
            (*out).device_id = kind.device_id();
            self.fill_array(std::ptr::addr_of_mut!((*out).array), node, root, what, true);
        }
        if let Some(d) = &self.device {
            // The event that covers the late writes: recorded after them,
            // handed over as a pointer to it ("sync_event ... a pointer").
            let recorded = d.dev.event_create().and_then(|e| {
                d.dev.event_record(e, d.stream)?;
                Ok(e)
            });
            let e = match recorded {
                Ok(e) => e,
                Err(why) => panic!("cannot record an event on the {} device: {why}", d.kind),
            };
            if d.settled {
                settle(&self.book, &*d.dev);
            }
            let slot = self.keep_box(e.0);
            self.lock().sync_events.push((root, e));
            // SAFETY: out is valid for writes (caller).
            unsafe { (*out).sync_event = slot.cast() };
        }
    }

    /// Exports a schema tree; the root is registered as `what`.
    pub fn schema(&self, node: &SchemaNode, what: &str) -> Handed<ArrowSchema> {
        let ptr = self.keep_box(ArrowSchema::poisoned());
        let root = self.add_root(what, ptr as usize, ONCE);
        // SAFETY: ptr is a live ArrowSchema owned by the ledger.
        unsafe { self.fill_schema(ptr, node, root, what, true) };
        Handed { ptr, root }
    }

    /// # Safety
    /// `out` is valid for writes of an ArrowSchema.
    pub(super) unsafe fn schema_into(&self, out: *mut ArrowSchema, node: &SchemaNode, what: &str) {
        let root = self.add_root(what, out as usize, ONCE);
        // SAFETY: forwarded.
        unsafe { self.fill_schema(out, node, root, what, true) };
    }

    /// A released ArrowArray: release NULL, every other member poison.
    pub fn released_array(&self, what: &str) -> Handed<ArrowArray> {
        let ptr = self.keep_box(ArrowArray::poisoned());
        // SAFETY: ptr is a live ArrowArray owned by the ledger.
        unsafe { (*ptr).release = None };
        Handed {
            ptr,
            root: self.add_root(what, ptr as usize, None),
        }
    }

    /// A released ArrowSchema, as [`Ledger::released_array`].
    pub fn released_schema(&self, what: &str) -> Handed<ArrowSchema> {
        let ptr = self.keep_box(ArrowSchema::poisoned());
        // SAFETY: ptr is a live ArrowSchema owned by the ledger.
        unsafe { (*ptr).release = None };
        Handed {
            ptr,
            root: self.add_root(what, ptr as usize, None),
        }
    }

    fn new_node_id(&self) -> usize {
        let mut b = self.lock();
        b.node_releases.push(0);
        b.node_releases.len() - 1
    }

    /// Allocates a node's children and dictionary and fills each with
    /// `fill`; returns the children's addresses, the children pointer array
    /// and the dictionary (NULL when there are none).
    fn nested<T: Plain + 'static, N>(
        &self,
        children: &[N],
        dictionary: Option<&N>,
        path: &str,
        fill: impl Fn(*mut T, &N, &str),
    ) -> (Vec<usize>, *mut *mut T, *mut T) {
        let mut ptrs: Vec<*mut T> = Vec::new();
        for (i, c) in children.iter().enumerate() {
            let p = self.keep_box(T::poisoned());
            fill(p, c, &format!("{path}.children[{i}]"));
            ptrs.push(p);
        }
        let addrs = ptrs.iter().map(|p| *p as usize).collect();
        let array = if ptrs.is_empty() {
            std::ptr::null_mut()
        } else {
            // SAFETY: the Vec is kept by the ledger and never resized, so
            // its buffer stays where it is.
            unsafe { (*self.keep_box(ptrs)).as_mut_ptr() }
        };
        let dictionary = match dictionary {
            Some(d) => {
                let p = self.keep_box(T::poisoned());
                fill(p, d, &format!("{path}.dictionary"));
                p
            }
            None => std::ptr::null_mut(),
        };
        (addrs, array, dictionary)
    }

    /// The callback record of one node (its structure's private_data).
    #[allow(clippy::too_many_arguments)]
    fn record(
        &self,
        id: usize,
        root: usize,
        path: &str,
        is_root: bool,
        slot: usize,
        children: Vec<usize>,
        dictionary: usize,
        buffers: Vec<(usize, usize, Vec<u8>)>,
        on_device: bool,
    ) -> *mut NodeRec {
        let rec = self.keep_box(NodeRec {
            book: self.book(),
            id,
            root,
            path: path.to_string(),
            is_root,
            slot,
            children,
            dictionary,
            buffers,
            poison: self.poison,
            device: if on_device {
                self.device.as_ref().map(|d| d.dev.clone())
            } else {
                None
            },
        });
        self.lock().nodes.push(SendPtr(rec));
        rec
    }

    /// # Safety
    /// `out` is valid for writes of an ArrowArray and stays at that address
    /// (or is moved by the consumer) until released.
    unsafe fn fill_array(
        &self,
        out: *mut ArrowArray,
        node: &Node,
        root: usize,
        path: &str,
        is_root: bool,
    ) {
        let id = self.new_node_id();
        let mut buffers = Vec::new();
        let ptrs: Vec<*const c_void> = node
            .buffers
            .iter()
            .map(|b| match b {
                None => std::ptr::null(),
                Some(bytes) => {
                    let p = match &self.device {
                        Some(d) => self.keep_device_bytes(d, bytes),
                        // An odd shift is off every alignment wider than
                        // a byte (Node::empty_shift).
                        None if bytes.is_empty() && node.shift % 2 == 0 => {
                            self.keep_bytes_at(bytes, false, node.shift + node.empty_shift)
                        }
                        None => self.keep_bytes_at(bytes, false, node.shift),
                    };
                    buffers.push((p as usize, bytes.len(), bytes.clone()));
                    p as *const c_void
                }
            })
            .collect();
        let buffers_ptr = if ptrs.is_empty() {
            std::ptr::null_mut()
        } else {
            self.keep_box(ptrs)
        };
        let buffers_arr = if buffers_ptr.is_null() {
            std::ptr::null_mut()
        } else {
            // SAFETY: buffers_ptr is a live Vec kept by the ledger.
            unsafe { (*buffers_ptr).as_mut_ptr() }
        };
        let (children, children_arr, dictionary) = self.nested(
            &node.children,
            node.dictionary.as_deref(),
            path,
            // SAFETY: `p` is a fresh ArrowArray the ledger owns.
            |p: *mut ArrowArray, c, at| unsafe { self.fill_array(p, c, root, at, false) },
        );
        let rec = self.record(
            id,
            root,
            path,
            is_root,
            out as usize,
            children,
            dictionary as usize,
            buffers,
            true,
        );
        let a = ArrowArray {
            length: node.length,
            null_count: node.null_count,
            offset: node.offset,
            n_buffers: node.buffers.len() as i64,
            n_children: node.children.len() as i64,
            buffers: buffers_arr,
            children: children_arr,
            dictionary,
            release: Some(release_node::<ArrowArray>),
            private_data: rec as *mut c_void,
        };
        // SAFETY: out is valid for writes (caller).
        unsafe { std::ptr::write(out, a) };
    }

    /// # Safety
    /// As [`Ledger::fill_array`], for a schema.
    unsafe fn fill_schema(
        &self,
        out: *mut ArrowSchema,
        node: &SchemaNode,
        root: usize,
        path: &str,
        is_root: bool,
    ) {
        let id = self.new_node_id();
        let mut strings = Vec::new();
        let mut string = |s: &[u8]| {
            let p = self.keep_bytes(s, true);
            strings.push((p as usize, s.len(), s.to_vec()));
            p as *const c_char
        };
        let format = string(node.format.as_bytes());
        let name = match &node.name {
            Some(n) => string(n.as_bytes()),
            None => std::ptr::null(),
        };
        let metadata = match &node.metadata {
            Some(m) => string(m),
            None => std::ptr::null(),
        };
        let (children, children_arr, dictionary) = self.nested(
            &node.children,
            node.dictionary.as_deref(),
            path,
            // SAFETY: `p` is a fresh ArrowSchema the ledger owns.
            |p: *mut ArrowSchema, c, at| unsafe { self.fill_schema(p, c, root, at, false) },
        );
        let rec = self.record(
            id,
            root,
            path,
            is_root,
            out as usize,
            children,
            dictionary as usize,
            strings,
            false,
        );
        let s = ArrowSchema {
            format,
            name,
            metadata,
            flags: node.flags,
            n_children: node.children.len() as i64,
            children: children_arr,
            dictionary,
            release: Some(release_node::<ArrowSchema>),
            private_data: rec as *mut c_void,
        };
        // SAFETY: out is valid for writes (caller).
        unsafe { std::ptr::write(out, s) };
    }

    /// Gives a consumer's other threads a moment to release what its call
    /// handed them: the spec asks that the consumer release what it was
    /// given, not that it do so before its call returns, and a library
    /// whose thread pool still runs the call's tasks releases there
    /// (pyarrow's `to_pandas` after one column raised: its other columns'
    /// tasks held the array a few milliseconds longer, so "never released"
    /// came and went between runs of one case). Bounded: a structure still
    /// held after [`LATE_RELEASE_GRACE`] is judged never released.
    fn wait_for_late_releases(&self) {
        let deadline = std::time::Instant::now() + LATE_RELEASE_GRACE;
        loop {
            let pending = self
                .lock()
                .roots
                .iter()
                .any(|r| r.unreleased_rule.is_some() && r.releases.is_empty());
            if !pending || std::time::Instant::now() >= deadline {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }

    /// consumer.sync.waits, asked when the consume call returns: a
    /// consumer that returned what it read had read it by then, so the
    /// sync_event of every device array it was handed and still holds must
    /// have completed. Asked at release only, a consumer that read before
    /// the data landed and let the array go later passed whenever the
    /// device had caught up in between (the `read-before-wait` mutant on
    /// CUDA). A root already released keeps what its release saw (earlier).
    pub fn note_sync_at_return(&self) {
        let Some(d) = &self.device else { return };
        let mut b = self.lock();
        let pending: Vec<(usize, Event)> = b.sync_events.clone();
        for (root, e) in pending {
            if b.roots[root].synced.is_none() {
                b.roots[root].synced = d.dev.event_query(e).ok();
            }
        }
    }

    /// Ends the case: reports unreleased base structures and writes to
    /// buffers never released, adds what the callbacks saw, and frees the
    /// case's memory, or leaks it when the consumer may still hold
    /// pointers into it.
    pub fn finish(self) -> Findings {
        self.wait_for_late_releases();
        // Events of roots never released: judged as of now, then the
        // device settles so that the buffers hold their final bytes.
        self.note_sync_at_return();
        if let Some(d) = &self.device {
            settle(&self.book, &*d.dev);
        }
        let (roots, mut violations) = {
            let b = self.lock();
            let mut violations = b.events.clone();
            for n in &b.nodes {
                // SAFETY: node records live until the ledger is dropped.
                let rec = unsafe { &*n.0 };
                if b.node_releases[rec.id] == 0 {
                    violations.extend(written(rec));
                }
            }
            (b.roots.clone(), violations)
        };
        for r in &roots {
            if let (Some(rule), true) = (r.unreleased_rule, r.releases.is_empty()) {
                violations.push(Violation {
                    rule,
                    at: r.what.clone(),
                    message: format!("the {} handed over was never released", r.what),
                });
            }
        }
        let clean = violations.is_empty()
            && roots
                .iter()
                .all(|r| r.unreleased_rule.is_none() || r.releases.len() == 1);
        let keep = std::mem::take(&mut self.lock().keep);
        let events = std::mem::take(&mut self.lock().sync_events);
        if let Some(d) = &self.device {
            for (_, e) in events {
                let _ = d.dev.event_destroy(e);
            }
        }
        if clean {
            drop(keep);
        } else {
            // The consumer may still hold pointers into this memory (and
            // call a release later): leak it rather than free it under it.
            std::mem::forget(keep);
        }
        Findings { roots, violations }
    }
}

/// A write into a node's buffers since export, if any.
fn written(rec: &NodeRec) -> Option<Violation> {
    for (i, (p, len, copy)) in rec.buffers.iter().enumerate() {
        let on_device;
        let now = match &rec.device {
            Some(dev) => {
                on_device = dev.copy_to_host(*p, *len).ok()?;
                &on_device[..]
            }
            // SAFETY: the buffer is owned by the ledger, `len` bytes long,
            // and not yet poisoned (checked before poisoning, or never
            // released).
            None => unsafe { std::slice::from_raw_parts(*p as *const u8, *len) },
        };
        if let Some(at) = now.iter().zip(copy).position(|(a, b)| a != b) {
            return Some(Violation {
                rule: crate::rule!("consumer.data.immutable"),
                at: rec.path.clone(),
                message: format!(
                    "byte {at} of buffer {i} changed from {:#04x} to {:#04x} while the consumer held it",
                    copy[at], now[at]
                ),
            });
        }
    }
    None
}

/// Shared by both release callbacks: records the call and judges it;
/// returns false when the node must not be released again.
fn on_release(rec: &NodeRec, addr: usize, what: &str) -> bool {
    let by_parent = IN_PARENT_RELEASE.with(|f| f.get());
    let count = {
        let mut b = rec.book.lock().unwrap_or_else(|e| e.into_inner());
        b.node_releases[rec.id] += 1;
        if rec.is_root {
            Ledger::record_release(&mut b, rec.root, addr);
        }
        b.node_releases[rec.id]
    };
    if let Some(dev) = &rec.device {
        if rec.is_root && count == 1 {
            // consumer.sync.waits: had the event completed by the time the
            // consumer let the array go? Asked before anything here makes
            // the device progress.
            let mut b = rec.book.lock().unwrap_or_else(|e| e.into_inner());
            let event = b
                .sync_events
                .iter()
                .find(|(r, _)| *r == rec.root)
                .map(|(_, e)| *e);
            if let Some(e) = event {
                if let Some(r) = b.roots.get_mut(rec.root).filter(|r| r.synced.is_none()) {
                    r.synced = dev.event_query(e).ok();
                }
            }
        }
        settle(&rec.book, &**dev);
    }
    if count > 1 {
        Ledger::event(
            &rec.book,
            crate::rule!("consumer.release.not-released"),
            &rec.path,
            format!("the {what} release callback was called again (call {count}) on a structure already released"),
        );
        return false;
    }
    if !rec.is_root && !by_parent && addr == rec.slot {
        Ledger::event(
            &rec.book,
            crate::rule!("consumer.release.no-children"),
            &rec.path,
            format!(
                "the consumer called this {what}'s release itself, in place inside its parent (a child must be moved out before it is released on its own)"
            ),
        );
    }
    if let Some(v) = written(rec) {
        Ledger::event(&rec.book, v.rule, &v.at, v.message);
    }
    true
}

fn poison(rec: &NodeRec) {
    if !rec.poison {
        return;
    }
    for (p, len, _) in &rec.buffers {
        match &rec.device {
            Some(dev) => {
                let _ = dev.copy_from_host(*p, &vec![RELEASED_BYTE; *len]);
            }
            // SAFETY: the buffer is owned by the ledger and `len` bytes long.
            None => unsafe { std::ptr::write_bytes(*p as *mut u8, RELEASED_BYTE, *len) },
        }
    }
}

/// The two structures the exporter installs release callbacks in.
trait Exported: crate::abi::ops::Owned {
    /// `array` or `schema`, for messages.
    const WHAT: &'static str;
    /// The breadcrumb of its release.
    const STEP: &'static str;
    fn private(&self) -> *mut c_void;
}

impl Exported for ArrowArray {
    const WHAT: &'static str = "array";
    const STEP: &'static str = "harness ArrowArray.release";
    fn private(&self) -> *mut c_void {
        self.private_data
    }
}

impl Exported for ArrowSchema {
    const WHAT: &'static str = "schema";
    const STEP: &'static str = "harness ArrowSchema.release";
    fn private(&self) -> *mut c_void {
        self.private_data
    }
}

/// The release callback of every exported array and schema node.
///
/// # Safety
/// Called by a consumer through the pointer the harness installed, with a
/// structure whose private_data the harness set.
unsafe extern "C" fn release_node<T: Exported>(p: *mut T) {
    crate::abi::breadcrumb::step(T::STEP);
    if p.is_null() {
        return;
    }
    // SAFETY: the harness installed this callback with private_data a
    // NodeRec the ledger keeps alive (caller's contract).
    let rec = unsafe { &*((*p).private() as *const NodeRec) };
    if on_release(rec, p as usize, T::WHAT) {
        for &c in rec.children.iter().chain(std::iter::once(&rec.dictionary)) {
            let c = c as *mut T;
            // SAFETY: children and dictionary are ledger-owned structures
            // of the parent's type.
            if !c.is_null() && unsafe { !(*c).is_released() } {
                IN_PARENT_RELEASE.with(|f| f.set(true));
                // SAFETY: a live child this parent owns.
                unsafe { release_node(c) };
                IN_PARENT_RELEASE.with(|f| f.set(false));
            }
        }
        // Strings keep their terminating NUL so a reader stops.
        poison(rec);
    }
    // SAFETY: p is valid for writes (caller).
    unsafe { (*p).mark_released() };
}

#[cfg(test)]
mod sync_tests {
    use std::sync::Arc;

    use arrow_array::{Int32Array, RecordBatch};

    use super::*;
    use crate::abi::ops::Owned;
    use crate::export::encode::{self, Encoding};

    /// A device array of one int32 column on the emulated device, whose
    /// writes land only when someone waits on its sync_event.
    fn handed(ledger: &Ledger) -> (Handed<ArrowDeviceArray>, Event) {
        let batch = RecordBatch::try_from_iter([(
            "x",
            Arc::new(Int32Array::from(vec![1, 2, 3])) as arrow_array::ArrayRef,
        )])
        .unwrap();
        let node = encode::batch(&batch, Encoding::Plain, 0).unwrap();
        let a = ledger.device_array(&node, "device array");
        let event = ledger.lock().sync_events[0].1;
        (a, event)
    }

    fn synced(findings: &Findings, root: usize) -> Option<bool> {
        findings.roots[root].synced
    }

    /// These tests run one at a time: a ledger's finish lets the device
    /// catch up with every pending write on the harness's stream, which
    /// would land another test's writes under it.
    fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
        static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
        SERIAL.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// consumer.sync.waits is asked when the consume call returns: a
    /// consumer that returned without waiting, and released the array only
    /// after the device had caught up (on CUDA the late write lands by
    /// itself), read before the data was there; asked at release only, it
    /// passed.
    #[test]
    fn the_event_is_judged_when_the_call_returns_not_only_at_release() {
        let _serial = one_at_a_time();
        for note_at_return in [true, false] {
            let ledger = Ledger::on_device(false, Kind::Emulated).unwrap();
            let (mut a, event) = handed(&ledger);
            if note_at_return {
                ledger.note_sync_at_return();
            }
            // The device catches up, then the consumer lets the array go.
            let dev = ledger.device.as_ref().unwrap().dev.clone();
            dev.event_wait(event).unwrap();
            a.get().release();
            let root = a.root;
            let found = ledger.finish();
            assert_eq!(
                synced(&found, root),
                Some(!note_at_return),
                "{note_at_return}"
            );
        }
    }

    /// A settled handover: the writes have landed and the event completed
    /// before the consumer is handed the array, so a consumer that reads
    /// without waiting reads the data.
    #[test]
    fn a_settled_handover_holds_the_data_and_a_completed_event() {
        let _serial = one_at_a_time();
        for settled in [false, true] {
            let mut ledger = Ledger::on_device(false, Kind::Emulated).unwrap();
            if settled {
                ledger = ledger.settled_before_handover();
            }
            let (mut a, event) = handed(&ledger);
            let dev = ledger.device.as_ref().unwrap().dev.clone();
            assert_eq!(dev.event_query(event).unwrap(), settled);
            // SAFETY: a live exported batch: a struct array whose one
            // child is the int32 column, its values buffer (index 1) three
            // int32s in the emulated device's memory, which is host memory.
            let values = unsafe {
                let column = &**a.get().array.children;
                let p = *column.buffers.add(1) as *const i32;
                std::slice::from_raw_parts(p, 3).to_vec()
            };
            assert_eq!(values == [1, 2, 3], settled, "{values:?}");
            ledger.note_sync_at_return();
            a.get().release();
            let root = a.root;
            assert_eq!(synced(&ledger.finish(), root), Some(settled));
        }
    }

    /// A consumer that waited before returning passes; one that released
    /// the array before returning keeps what its release saw.
    #[test]
    fn a_consumer_that_waited_or_released_first_keeps_its_release_state() {
        let _serial = one_at_a_time();
        let wait = |ledger: &Ledger, event| {
            let dev = &ledger.device.as_ref().unwrap().dev;
            dev.event_wait(event).unwrap();
        };
        let ledger = Ledger::on_device(false, Kind::Emulated).unwrap();
        let (mut a, event) = handed(&ledger);
        wait(&ledger, event);
        ledger.note_sync_at_return();
        let root = a.root;
        a.get().release();
        assert_eq!(synced(&ledger.finish(), root), Some(true));

        let ledger = Ledger::on_device(false, Kind::Emulated).unwrap();
        let (mut a, event) = handed(&ledger);
        a.get().release(); // released unread, the event pending
        wait(&ledger, event);
        ledger.note_sync_at_return();
        let root = a.root;
        assert_eq!(synced(&ledger.finish(), root), Some(false));
    }
}

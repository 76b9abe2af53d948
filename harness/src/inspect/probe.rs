//! The raw operations producer certification performs on what a producer
//! exported: validating, moving children out, calling stream callbacks
//! (from other threads too), and importing validated data into arrow-rs.
//!
//! These functions are safe to call on any structure the harness owns: each
//! checks what it can (NULL, poison, counts) before following a pointer,
//! and certification calls them only on structures that passed validation.
//! A producer that writes a pointer that is neither NULL nor poison nor
//! valid can still crash the process; certification runs in worker
//! processes, where that is a `crash` verdict for the case, never a crash
//! of the run.

use std::ffi::c_int;

use arrow_array::ffi::{from_ffi, FFI_ArrowArray, FFI_ArrowSchema};
use arrow_array::{Array, ArrayRef, RecordBatch, StructArray};
use arrow_schema::Schema;

use crate::abi::ops::{callable, Guard, Owned};
use crate::abi::{
    is_poison_ptr, ArrowArray, ArrowArrayStream, ArrowDeviceArray, ArrowDeviceArrayStream,
    ArrowSchema,
};

/// Moves child `i` out of a live array, as "Moving child arrays"
/// (CDataInterface.rst) allows: a bitwise copy into a structure of the
/// harness's own, and the child in the parent marked released.
///
/// Call it on an array that passed [`super::validate_array`].
pub fn take_child_array(array: &mut ArrowArray, i: usize) -> Option<Guard<ArrowArray>> {
    let child = child_ptr(array.children, array.n_children, i)?;
    // SAFETY: `child_ptr` checked the children array and the entry (non-NULL,
    // not poison, i < n_children); validation checked the child structure,
    // which the parent owns and we borrow exclusively through `array`.
    let child: &mut ArrowArray = unsafe { &mut *child };
    if child.is_released() {
        return None;
    }
    Some(Guard::new(crate::abi::ops::take(child)))
}

/// The same for a schema's child.
///
/// Call it on a schema that passed [`super::validate_schema`].
pub fn take_child_schema(schema: &mut ArrowSchema, i: usize) -> Option<Guard<ArrowSchema>> {
    let child = child_ptr(schema.children, schema.n_children, i)?;
    // SAFETY: as for arrays above.
    let child: &mut ArrowSchema = unsafe { &mut *child };
    if child.is_released() {
        return None;
    }
    Some(Guard::new(crate::abi::ops::take(child)))
}

/// Child `i` of a schema that passed [`super::validate_schema`] (for
/// validating a moved child array against it).
/// (In the SDK, where the device mirror needs it too.)
pub use crate::abi::child_schema;

/// Entry `i` of a children array, if the array and the entry are neither
/// NULL nor poison and `i < n`.
fn child_ptr<T>(children: *mut *mut T, n: i64, i: usize) -> Option<*mut T> {
    if children.is_null() || is_poison_ptr(children as usize) || i as i64 >= n || n > 1 << 16 {
        return None;
    }
    // SAFETY: `children` is non-NULL, not poison, and the producer declared
    // n (> i) entries; validation read the same entries.
    let child = unsafe { *children.add(i) };
    (!child.is_null() && !is_poison_ptr(child as usize)).then_some(child)
}

/// Validates a schema (see [`super::validate_schema`]).
pub fn check_schema(schema: &ArrowSchema) -> Vec<super::Violation> {
    // SAFETY: `schema` is a readable ArrowSchema (a reference); the
    // validator checks every nested pointer before following it.
    unsafe { super::validate_schema(schema) }
}

/// Validates an array against a schema that passed [`check_schema`].
pub fn check_array(schema: &ArrowSchema, array: &ArrowArray) -> Vec<super::Violation> {
    // SAFETY: both are readable structures (references); the validator
    // checks every nested pointer before following it.
    unsafe { super::validate_array(schema, array) }
}

/// Pointer members of a schema that point inside the structure itself (see
/// [`super::validate::schema_self_refs`]); call it before moving the
/// structure, since a moved copy no longer points into itself.
pub fn schema_self_refs(schema: &ArrowSchema) -> Vec<String> {
    super::validate::schema_self_refs(schema)
}

/// The same for an array: its pointer members, and its buffer pointers
/// when its layout lets them be read (see
/// [`super::validate::array_self_refs`]). `schema` must have passed
/// [`check_schema`].
pub fn array_self_refs(schema: &ArrowSchema, array: &ArrowArray) -> Vec<String> {
    // SAFETY: readable structures (references); the buffers pointer is
    // checked (NULL, poison, alignment, the format's count) before its
    // entries are read.
    unsafe { super::validate::array_self_refs(schema, array) }
}

/// `array` with aligned copies of the buffers arrow-rs reads through typed
/// pointers ([`crate::abi::realign`]); unchanged when the schema's type
/// cannot be read (arrow-rs's import then fails on its own).
///
/// # Safety
/// As [`crate::abi::realign::for_arrow_rs`], for the type `schema` gives.
unsafe fn realigned(array: ArrowArray, schema: &FFI_ArrowSchema) -> ArrowArray {
    match arrow_schema::DataType::try_from(schema) {
        // SAFETY: forwarded from the caller.
        Ok(dt) => unsafe { crate::abi::realign::for_arrow_rs(array, &dt) },
        Err(_) => array,
    }
}

/// # Safety
/// `a` is the live structure this release callback was installed in (or moved
/// to), called as the C data interface calls a release callback.
unsafe extern "C" fn borrowed_release(a: *mut ArrowArray) {
    // SAFETY: arrow-rs calls this once, on the bitwise copy it owns, which
    // is a valid structure; only its release member is written.
    unsafe { (*a).release = None }
}

/// The buffer pointers of an array that passed [`check_array`] (its own,
/// not its children's).
pub fn buffer_addresses(array: &ArrowArray) -> Vec<usize> {
    if array.buffers.is_null() || array.n_buffers <= 0 {
        return Vec::new();
    }
    // SAFETY: a validated array (caller): `buffers` points to `n_buffers`
    // readable pointers, read here as plain values.
    unsafe { std::slice::from_raw_parts(array.buffers, array.n_buffers as usize) }
        .iter()
        .map(|p| *p as usize)
        .collect()
}

/// Reads a validated array into arrow-rs without taking it: arrow-rs gets a
/// bitwise copy whose release only marks the copy released, so the
/// producer's structure stays live (and is released by its owner later).
/// Drop the result before releasing `array`.
///
/// Call it only on a schema and array that passed validation against each
/// other: arrow-rs trusts what it imports.
pub fn read_array(schema: &ArrowSchema, array: &ArrowArray) -> Result<ArrayRef, String> {
    // SAFETY: same repr(C) layouts (checked at compile time in
    // abi::arrow_rs); the schema is only read during this call.
    let ffi_schema: &FFI_ArrowSchema = unsafe { &*(schema as *const ArrowSchema).cast() };
    // SAFETY: a bitwise copy of a live array (plain repr(C) data); its
    // release is replaced at once, so the producer's callback runs only for
    // the original, by its owner.
    let mut copy: ArrowArray = unsafe { std::ptr::read(array) };
    copy.release = Some(borrowed_release);
    // SAFETY: a validated array (caller); unaligned buffers arrow-rs reads
    // through typed pointers are copied aligned (abi::realign).
    let copy = unsafe { realigned(copy, ffi_schema) };
    // SAFETY: same layout as above; the copy moves into arrow-rs.
    let ffi_array: FFI_ArrowArray = unsafe { std::mem::transmute(copy) };
    // SAFETY: validated against this schema (caller); the buffers stay
    // valid while `array` is live, which the caller keeps it.
    let data = unsafe { from_ffi(ffi_array, ffi_schema) }.map_err(|e| e.to_string())?;
    Ok(arrow_array::make_array(
        crate::abi::arrow_rs::repair_empty_bytes(data),
    ))
}

/// What arrow-rs makes of a schema and array that were NOT validated:
/// `from_ffi` (on a bitwise copy, as [`read_array`]) and then
/// `validate_full`, with any panic caught and reported as a rejection.
///
/// For the validate fuzz oracle only: its inputs are memory-sound by
/// construction (every pointer is live and every buffer holds what the
/// structure's lengths, offsets and sizes claim), so arrow-rs may be handed
/// structures that are wrong in every other way.
pub fn arrow_rs_verdict(schema: &ArrowSchema, array: &ArrowArray) -> Result<(), String> {
    // SAFETY: same repr(C) layouts (checked at compile time in
    // abi::arrow_rs); the schema is only read during this call.
    let ffi_schema: &FFI_ArrowSchema = unsafe { &*(schema as *const ArrowSchema).cast() };
    // SAFETY: a bitwise copy of a live array whose release is replaced at
    // once, so the owner's callback never runs from here.
    let mut copy: ArrowArray = unsafe { std::ptr::read(array) };
    copy.release = Some(borrowed_release);
    crate::quiet::quietly(|| {
        // SAFETY: memory-sound by the caller's construction (every buffer
        // holds what its structure claims), which is all realign reads.
        let copy = unsafe { realigned(copy, ffi_schema) };
        // SAFETY: same layout as above; the copy moves into arrow-rs.
        let ffi_array: FFI_ArrowArray = unsafe { std::mem::transmute(copy) };
        // SAFETY: every pointer of the tree is live and every buffer holds
        // what the structure claims (the caller's construction); what
        // arrow-rs does with structures that are otherwise invalid is what
        // is being checked.
        let data = unsafe { from_ffi(ffi_array, ffi_schema) }.map_err(|e| e.to_string())?;
        data.validate_full().map_err(|e| e.to_string())
    })
    .unwrap_or_else(|p| Err(format!("arrow-rs panicked: {p}")))
}

/// Imports a validated struct array as a record batch without taking the
/// schema (it stays the harness's, to validate more chunks against); the
/// array is moved into arrow-rs, which releases it when the batch drops.
///
/// Call it only on a schema and array that passed validation against each
/// other, with a struct (`+s`) root: arrow-rs trusts what it imports.
pub fn import_batch(
    schema: &ArrowSchema,
    array: &mut Guard<ArrowArray>,
) -> Result<RecordBatch, String> {
    // SAFETY: ArrowSchema and FFI_ArrowSchema are the same repr(C) layout
    // (checked at compile time in abi::arrow_rs); the reference is only
    // read, and lives for this call.
    let ffi_schema: &FFI_ArrowSchema = unsafe { &*(schema as *const ArrowSchema).cast() };
    // arrow-rs panics on a name that is not UTF-8 (which the spec does not
    // forbid: schema.name.utf8 is SHOULD): read the schema first, a panic
    // caught, before the array is handed over.
    let arrow_schema = read_schema(schema)?;
    let moved = crate::abi::ops::take(&mut **array);
    // SAFETY: validated (caller); see read_array.
    let moved = unsafe { realigned(moved, ffi_schema) };
    // SAFETY: same layout as above; ownership of the live array moves into
    // arrow-rs (the guard was marked released by `take`).
    let ffi_array: FFI_ArrowArray = unsafe { std::mem::transmute(moved) };
    // From here arrow-rs owns the array and calls its release when the
    // imported data is dropped.
    crate::abi::breadcrumb::step("ArrowArray.release (by the arrow-rs import that took it over)");
    // SAFETY: the caller validated the array against this schema.
    let data = unsafe { from_ffi(ffi_array, ffi_schema) }.map_err(|e| e.to_string())?;
    let root = StructArray::from(crate::abi::arrow_rs::repair_empty_bytes(data));
    crate::abi::arrow_rs::batch_from_struct(std::sync::Arc::new(arrow_schema), root)
        .map_err(|e| e.to_string())
}

/// A validated schema read into arrow-rs (an owned copy of every string,
/// metadata pair and child); arrow-rs's panic on a name that is not UTF-8
/// comes back as an error.
pub fn read_schema(schema: &ArrowSchema) -> Result<Schema, String> {
    // SAFETY: ArrowSchema and FFI_ArrowSchema are the same repr(C) layout
    // (checked at compile time in abi::arrow_rs); the reference is only
    // read, and lives for this call.
    let ffi_schema: &FFI_ArrowSchema = unsafe { &*(schema as *const ArrowSchema).cast() };
    crate::quiet::quietly(|| Schema::try_from(ffi_schema))
        .map_err(|p| format!("arrow-rs cannot read the schema: {p}"))?
        .map_err(|e| e.to_string())
}

/// A deep copy of an array: new buffers, no reference to producer memory.
pub fn deep_copy_array(c: &ArrayRef) -> ArrayRef {
    let data = c.to_data();
    let mut copy = arrow_data::transform::MutableArrayData::new(vec![&data], false, c.len());
    copy.try_extend(0, 0, c.len())
        .expect("copying an imported array fits");
    arrow_array::make_array(copy.freeze())
}

/// A deep copy of a batch: new buffers, no reference to producer memory.
pub fn deep_copy(batch: &RecordBatch) -> RecordBatch {
    let columns: Vec<ArrayRef> = batch.columns().iter().map(deep_copy_array).collect();
    RecordBatch::try_new_with_options(
        batch.schema(),
        columns,
        &arrow_array::RecordBatchOptions::new().with_row_count(Some(batch.num_rows())),
    )
    .expect("a copy of a valid batch is valid")
}

/// A stream callback's result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    Returned(c_int),
    /// The callback member is NULL or was never written (poison).
    NotSet,
}

/// A stream of either kind, for the calls certification makes.
pub trait StreamCalls: Owned {
    type Chunk: Owned;
    fn get_schema(&mut self, out: &mut ArrowSchema) -> Call;
    fn get_next(&mut self, out: &mut Self::Chunk) -> Call;
    /// Calls get_last_error: `None` when the member is not set, otherwise
    /// the address it returned (0 for NULL), not yet read.
    fn get_last_error_at(&mut self) -> Option<usize>;
}

/// The most bytes of a last-error string the harness reads.
pub const LAST_ERROR_MAX: usize = 64 * 1024;

/// Reads the NUL-terminated string at `addr` without trusting it: through
/// `process_vm_readv` ([`crate::abi::hostmem`]), never past `max` bytes or
/// the end of readable memory. `None` when its first byte is not readable;
/// otherwise the bytes before its NUL (all that could be read when no NUL
/// came first).
pub fn c_string_at(addr: usize, max: usize) -> Option<Vec<u8>> {
    const PIECE: usize = 256;
    const PAGE: usize = 4096;
    let mut out = Vec::new();
    let mut at = addr;
    while out.len() < max {
        // Never cross a page in one read: a page that is not readable ends
        // the string there instead of failing the whole piece.
        let to_page_end = PAGE - at % PAGE;
        let n = PIECE.min(to_page_end).min(max - out.len());
        let Some(piece) = crate::abi::hostmem::read(at, n) else {
            return (at != addr).then_some(out);
        };
        if let Some(nul) = piece.iter().position(|&b| b == 0) {
            out.extend_from_slice(&piece[..nul]);
            return Some(out);
        }
        out.extend_from_slice(&piece);
        at += n;
    }
    Some(out)
}

macro_rules! stream_calls {
    ($stream:ty, $chunk:ty) => {
        impl StreamCalls for $stream {
            type Chunk = $chunk;
            fn get_schema(&mut self, out: &mut ArrowSchema) -> Call {
                crate::abi::breadcrumb::step(concat!(stringify!($stream), ".get_schema"));
                match callable(self.get_schema) {
                    Some(f) => Call::Returned(crate::abi::outslot::call(
                        concat!(stringify!($stream), ".get_schema"),
                        out,
                        // SAFETY: the producer installed this callback on
                        // this live stream; `out` is a valid out-structure
                        // (a slot of the out-structure arena). A broken
                        // producer crashes the worker, which is a verdict.
                        |out| unsafe { f(self, out) },
                    )),
                    None => Call::NotSet,
                }
            }
            fn get_next(&mut self, out: &mut $chunk) -> Call {
                crate::abi::breadcrumb::step(concat!(stringify!($stream), ".get_next"));
                match callable(self.get_next) {
                    Some(f) => Call::Returned(crate::abi::outslot::call(
                        concat!(stringify!($stream), ".get_next"),
                        out,
                        // SAFETY: as above.
                        |out| unsafe { f(self, out) },
                    )),
                    None => Call::NotSet,
                }
            }
            fn get_last_error_at(&mut self) -> Option<usize> {
                crate::abi::breadcrumb::step(concat!(stringify!($stream), ".get_last_error"));
                let f = callable(self.get_last_error)?;
                // SAFETY: as above; the result is only an address here, read
                // (without trusting it) by the caller.
                Some(unsafe { f(self) }.addr())
            }
        }
    };
}

stream_calls!(ArrowArrayStream, ArrowArray);
stream_calls!(ArrowDeviceArrayStream, ArrowDeviceArray);

/// Raw pointers handed to another thread for one call; the calling thread
/// waits for it, so calls stay serialized as the spec requires.
struct SendPtr<T>(*mut T);
// SAFETY: used only by `get_next_on_thread`, which joins the thread before
// returning, so the pointees are never accessed concurrently.
unsafe impl<T> Send for SendPtr<T> {}

/// Calls `get_next` from a fresh thread and waits for it: "serialized
/// calls from different threads" (stream.threads.serial). The thread has
/// made no call before this one and has ended when this returns (a
/// producer that kept per-thread state of the caller finds it gone).
pub fn get_next_on_thread<S: StreamCalls>(stream: &mut S, out: &mut S::Chunk) -> Call {
    let s = SendPtr(stream as *mut S);
    let o = SendPtr(out as *mut S::Chunk);
    let case = crate::abi::outslot::running();
    on_fresh_thread(move || {
        let (s, o) = (s, o);
        crate::abi::outslot::adopt(case);
        // SAFETY: both pointers come from exclusive borrows held by this
        // function until the thread has ended (on_fresh_thread joins it).
        unsafe { (*s.0).get_next(&mut *o.0) }
    })
    .unwrap_or(Call::NotSet)
}

/// Runs `f` on a thread started for it and waits until that thread has
/// ended; `None` when `f` panicked. (Threads started ahead by a background
/// thread were tried: on this 2-core machine a call took 45 us that way
/// against 14 us for a thread started and joined here.)
pub fn on_fresh_thread<R: Send>(f: impl FnOnce() -> R + Send) -> Option<R> {
    std::thread::scope(|scope| scope.spawn(f).join().ok())
}

/// The device fields of a device array, copied out.
pub fn device_fields(a: &ArrowDeviceArray) -> (i32, i64, usize, [i64; 3]) {
    (
        a.device_type,
        a.device_id,
        a.sync_event as usize,
        a.reserved,
    )
}

/// Watching a release walk its children (`schema.release.walks-children`,
/// `array.release.walks-children`).
///
/// Before a parent is released, [`watch_array`] / [`watch_schema`] replace
/// the `release` member of every live descendant (children and
/// dictionaries, at every depth) with a trampoline of the harness that
/// records the call and forwards it to the original callback, once. After
/// the parent's release, [`ReleaseWatch::finish`] says how often each was
/// called: a correct producer calls each exactly once. A second call is
/// recorded and not forwarded (the structure is only marked released), so a
/// producer that releases a child twice gets a verdict, not a double free;
/// a descendant already marked released (a child moved out) is not watched,
/// and its subtree belongs to whoever moved it.
pub mod walk {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Mutex, MutexGuard};

    use super::child_ptr;
    use crate::abi::ops::Owned;
    use crate::abi::{is_poison_ptr, ArrayRelease, ArrowArray, ArrowSchema, SchemaRelease};

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Kind {
        Schema,
        Array,
    }

    /// A watched structure: where it is, the callback it had, the calls.
    struct Watched {
        group: u64,
        kind: Kind,
        addr: usize,
        original: usize,
        calls: u32,
        at: String,
    }

    static WATCHED: Mutex<Vec<Watched>> = Mutex::new(Vec::new());
    static GROUPS: AtomicU64 = AtomicU64::new(1);

    fn registry() -> MutexGuard<'static, Vec<Watched>> {
        // A panic elsewhere while holding the lock leaves consistent data.
        WATCHED.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The structures whose release walks can be watched.
    trait Tree: Owned + Sized {
        const KIND: Kind;
        fn children(&self) -> (*mut *mut Self, i64);
        fn dictionary(&self) -> *mut Self;
        /// The release member's bits; 0 when released.
        fn release_bits(&self) -> usize;
        /// Installs the trampoline.
        fn set_trampoline(&mut self);
        /// Restores `original` as the release member and calls it.
        ///
        /// # Safety
        /// `this` is a live structure whose release was `original`.
        unsafe fn forward(this: *mut Self, original: usize);
    }

    impl Tree for ArrowArray {
        const KIND: Kind = Kind::Array;
        fn children(&self) -> (*mut *mut Self, i64) {
            (self.children, self.n_children)
        }
        fn dictionary(&self) -> *mut Self {
            self.dictionary
        }
        fn release_bits(&self) -> usize {
            self.release.map_or(0, |f| f as usize)
        }
        fn set_trampoline(&mut self) {
            self.release = Some(array_trampoline);
        }
        unsafe fn forward(this: *mut Self, original: usize) {
            // SAFETY: `original` was read from this structure's release
            // member (a non-NULL, non-poison ArrayRelease) when it was
            // watched; the caller guarantees `this` is live.
            unsafe {
                let f: ArrayRelease = std::mem::transmute::<usize, ArrayRelease>(original);
                (*this).release = Some(f);
                f(this);
            }
        }
    }

    impl Tree for ArrowSchema {
        const KIND: Kind = Kind::Schema;
        fn children(&self) -> (*mut *mut Self, i64) {
            (self.children, self.n_children)
        }
        fn dictionary(&self) -> *mut Self {
            self.dictionary
        }
        fn release_bits(&self) -> usize {
            self.release.map_or(0, |f| f as usize)
        }
        fn set_trampoline(&mut self) {
            self.release = Some(schema_trampoline);
        }
        unsafe fn forward(this: *mut Self, original: usize) {
            // SAFETY: as for arrays.
            unsafe {
                let f: SchemaRelease = std::mem::transmute::<usize, SchemaRelease>(original);
                (*this).release = Some(f);
                f(this);
            }
        }
    }

    /// The release member of every watched array: count, then forward the
    /// first call to the original callback.
    ///
    /// # Safety
    /// `a` is the live structure this release callback was installed in (or moved
    /// to), called as the C data interface calls a release callback.
    unsafe extern "C" fn array_trampoline(a: *mut ArrowArray) {
        // SAFETY: called as a release callback, with the structure it was
        // installed in (or, from a broken producer, some other array, which
        // is only looked up by address and marked released).
        unsafe { trampoline(a) }
    }

    /// # Safety
    /// `s` is the live structure this release callback was installed in (or moved
    /// to), called as the C data interface calls a release callback.
    unsafe extern "C" fn schema_trampoline(s: *mut ArrowSchema) {
        // SAFETY: as above.
        unsafe { trampoline(s) }
    }

    /// # Safety
    /// `p` is NULL or points to a structure whose release member is (or
    /// was) the trampoline of its kind.
    unsafe fn trampoline<T: Tree>(p: *mut T) {
        if p.is_null() {
            return;
        }
        let forward = {
            let mut w = registry();
            match w
                .iter_mut()
                .find(|e| e.kind == T::KIND && e.addr == p as usize)
            {
                Some(e) => {
                    e.calls = e.calls.saturating_add(1);
                    (e.calls == 1).then_some(e.original)
                }
                None => None,
            }
        };
        match forward {
            // SAFETY: first call for this structure, which is live (its
            // release is being called); the lock is not held, so nested
            // trampolines (grandchildren) can take it.
            Some(original) => unsafe { T::forward(p, original) },
            // A second call, or a structure no watch knows: never call the
            // original twice; mark it released and let the count speak.
            // SAFETY: `p` is the structure the caller is releasing.
            None => unsafe { (*p).mark_released() },
        }
    }

    /// How often a watched structure's release was called.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Released {
        /// Where: `array.children[1].dictionary`.
        pub at: String,
        pub calls: u32,
    }

    /// The structures one watch installed trampolines in. Dropping it
    /// without [`ReleaseWatch::finish`] (an early return) keeps its entries,
    /// so the trampolines still forward when the structures are released.
    pub struct ReleaseWatch {
        group: u64,
    }

    /// Most structures one watch takes (deeper or wider trees are watched
    /// in part).
    const MAX_WATCHED: usize = 4096;
    const MAX_DEPTH: usize = 64;

    fn collect<T: Tree>(node: *mut T, at: &str, depth: usize, out: &mut Vec<(*mut T, String)>) {
        if depth > MAX_DEPTH || out.len() >= MAX_WATCHED {
            return;
        }
        // SAFETY: `node` is the root the caller borrows, or an entry that
        // `child_ptr` / the dictionary check below found non-NULL and not
        // poison in a validated parent.
        let r: &T = unsafe { &*node };
        let (children, n) = r.children();
        for i in 0..n.clamp(0, MAX_WATCHED as i64) as usize {
            let Some(c) = child_ptr(children, n, i) else {
                continue;
            };
            visit(c, &format!("{at}.children[{i}]"), depth + 1, out);
        }
        let d = r.dictionary();
        if !d.is_null() && !is_poison_ptr(d as usize) {
            visit(d, &format!("{at}.dictionary"), depth + 1, out);
        }
    }

    fn visit<T: Tree>(node: *mut T, at: &str, depth: usize, out: &mut Vec<(*mut T, String)>) {
        // SAFETY: non-NULL, non-poison entry of a validated parent.
        let bits = unsafe { (*node).release_bits() };
        if bits == 0 || is_poison_ptr(bits) {
            // Released (moved out): not the parent's to release, nor its
            // subtree.
            return;
        }
        out.push((node, at.to_string()));
        collect(node, at, depth, out);
    }

    fn watch<T: Tree>(root: &mut T, at: &str) -> ReleaseWatch {
        let group = GROUPS.fetch_add(1, Ordering::Relaxed);
        let mut found = Vec::new();
        collect(root as *mut T, at, 0, &mut found);
        let mut w = registry();
        for (node, at) in found {
            // SAFETY: a live descendant found above; the root is
            // exclusively borrowed, and so is everything it owns.
            let node_ref: &mut T = unsafe { &mut *node };
            let original = node_ref.release_bits();
            let addr = node as usize;
            // A stale entry at a reused address is dropped.
            w.retain(|e| !(e.kind == T::KIND && e.addr == addr));
            w.push(Watched {
                group,
                kind: T::KIND,
                addr,
                original,
                calls: 0,
                at,
            });
            node_ref.set_trampoline();
        }
        ReleaseWatch { group }
    }

    /// Watches the live descendants of an array that passed validation.
    pub fn watch_array(root: &mut ArrowArray, at: &str) -> ReleaseWatch {
        watch(root, at)
    }

    /// Watches the live descendants of a schema that passed validation.
    pub fn watch_schema(root: &mut ArrowSchema, at: &str) -> ReleaseWatch {
        watch(root, at)
    }

    impl ReleaseWatch {
        /// Call after the parent's release returned: the calls each watched
        /// structure got, in the order they were found (depth first).
        /// Their trampolines stay harmless: a later call of one only marks
        /// its structure released.
        pub fn finish(self) -> Vec<Released> {
            let mut w = registry();
            let mine = w
                .iter()
                .filter(|e| e.group == self.group)
                .map(|e| Released {
                    at: e.at.clone(),
                    calls: e.calls,
                })
                .collect();
            w.retain(|e| e.group != self.group);
            mine
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    /// Each call runs on a thread of its own, not the caller's, and that
    /// thread has ended (its thread-locals destroyed) when `call` returns:
    /// what stream.threads.serial needs of a fresh thread.
    #[test]
    fn a_fresh_thread_runs_one_call_and_has_ended_when_it_returns() {
        use std::sync::atomic::AtomicBool;
        use std::sync::Arc;
        struct OnExit(Arc<AtomicBool>);
        impl Drop for OnExit {
            fn drop(&mut self) {
                self.0.store(true, Ordering::SeqCst);
            }
        }
        thread_local! {
            static EXIT: std::cell::RefCell<Option<OnExit>> = const { std::cell::RefCell::new(None) };
        }
        let me = std::thread::current().id();
        let mut seen = Vec::new();
        for _ in 0..4 {
            let ended = Arc::new(AtomicBool::new(false));
            let flag = ended.clone();
            let borrowed = &mut seen; // a borrow of this frame, used on the thread
            let id = super::on_fresh_thread(move || {
                EXIT.with(|e| *e.borrow_mut() = Some(OnExit(flag)));
                let id = std::thread::current().id();
                borrowed.push(id);
                id
            })
            .expect("the call ran");
            assert_ne!(id, me);
            assert!(ended.load(Ordering::SeqCst), "the thread had not ended");
        }
        let mut unique = seen.clone();
        unique.sort_by_key(|t| format!("{t:?}"));
        unique.dedup();
        assert_eq!(
            unique.len(),
            4,
            "each call on a thread of its own: {seen:?}"
        );
        // A panic on the thread is no result, and the next call still runs.
        assert!(super::on_fresh_thread(|| panic!("in the call")).is_none());
        assert_eq!(super::on_fresh_thread(|| 7), Some(7));
    }

    use super::c_string_at;
    use super::walk::{watch_array, Released};
    use crate::abi::ops::Owned;
    use crate::abi::{ArrowArray, Plain};

    /// A child's release: counts into the AtomicU32 its private_data
    /// points to, and marks it released.
    ///
    /// # Safety
    /// `a` is the live structure this release callback was installed in (or moved
    /// to), called as the C data interface calls a release callback.
    unsafe extern "C" fn child_release(a: *mut ArrowArray) {
        // SAFETY: the test builds every child with private_data pointing
        // to a live counter.
        unsafe {
            (*((*a).private_data as *const AtomicU32)).fetch_add(1, Ordering::SeqCst);
            (*a).release = None;
        }
    }

    /// A parent's release; private_data points to its behaviour: 0 walks
    /// the children correctly, 1 skips them, 2 calls each twice.
    ///
    /// # Safety
    /// `a` is the live structure this release callback was installed in (or moved
    /// to), called as the C data interface calls a release callback.
    unsafe extern "C" fn parent_release(a: *mut ArrowArray) {
        // SAFETY: built by the test below: private_data is a live u32,
        // children has n_children live entries.
        unsafe {
            let mode = *((*a).private_data as *const u32);
            for i in 0..(*a).n_children as usize {
                let c = *(*a).children.add(i);
                let Some(r) = (*c).release else { continue };
                match mode {
                    0 => r(c),
                    1 => {}
                    _ => {
                        r(c);
                        r(c);
                    }
                }
            }
            (*a).release = None;
        }
    }

    /// Releases a parent of three children (child 0 already released, as
    /// if moved out) with the walk watched; returns the calls the watch
    /// saw and the calls each child's own callback got.
    fn walk(mode: u32) -> (Vec<Released>, [u32; 3]) {
        let counters = [AtomicU32::new(0), AtomicU32::new(0), AtomicU32::new(0)];
        let mut children: Vec<Box<ArrowArray>> = (0..3)
            .map(|i| {
                let mut c = ArrowArray::zeroed();
                c.release = Some(child_release);
                c.private_data = &counters[i] as *const AtomicU32 as *mut _;
                Box::new(c)
            })
            .collect();
        children[0].mark_released();
        let mut pointers: Vec<*mut ArrowArray> =
            children.iter_mut().map(|c| &mut **c as *mut _).collect();
        let mut mode = mode;
        let mut parent = ArrowArray::zeroed();
        parent.n_children = 3;
        parent.children = pointers.as_mut_ptr();
        parent.release = Some(parent_release);
        parent.private_data = &mut mode as *mut u32 as *mut _;
        let watch = watch_array(&mut parent, "array");
        parent.release();
        let seen = watch.finish();
        // Whatever the parent did, nothing is left to release twice.
        for c in children.iter_mut() {
            c.mark_released();
        }
        (seen, counters.map(|c| c.into_inner()))
    }

    fn calls(seen: &[Released]) -> Vec<(&str, u32)> {
        seen.iter().map(|r| (r.at.as_str(), r.calls)).collect()
    }

    #[test]
    fn a_correct_walk_calls_each_live_child_once_and_skips_the_released_one() {
        let (seen, original) = walk(0);
        assert_eq!(
            calls(&seen),
            [("array.children[1]", 1), ("array.children[2]", 1)]
        );
        assert_eq!(original, [0, 1, 1]);
    }

    #[test]
    fn a_parent_that_skips_its_children_is_seen() {
        let (seen, original) = walk(1);
        assert_eq!(
            calls(&seen),
            [("array.children[1]", 0), ("array.children[2]", 0)]
        );
        assert_eq!(original, [0, 0, 0]);
    }

    #[test]
    fn a_second_release_is_counted_and_never_forwarded() {
        let (seen, original) = walk(2);
        assert_eq!(
            calls(&seen),
            [("array.children[1]", 2), ("array.children[2]", 2)]
        );
        // The children's own callbacks ran once: no double free.
        assert_eq!(original, [0, 1, 1]);
    }

    #[test]
    fn c_string_at_reads_to_the_nul_and_never_past_readable_memory() {
        let s = b"hello\0world";
        assert_eq!(c_string_at(s.as_ptr().addr(), 100), Some(b"hello".to_vec()));
        assert_eq!(c_string_at(s.as_ptr().addr(), 3), Some(b"hel".to_vec()));
        assert_eq!(c_string_at(0, 100), None);
        // A string with no NUL before an unreadable page: what is there.
        let (b, page) = crate::abi::hostmem::page_before_a_hole();
        // SAFETY: 300 bytes at the end of the readable, writable page.
        unsafe { std::ptr::write_bytes((b + page - 300) as *mut u8, b'x', 300) };
        assert_eq!(c_string_at(b + page - 300, 1 << 16), Some(vec![b'x'; 300]));
        assert_eq!(c_string_at(b + page, 10), None);
    }
}

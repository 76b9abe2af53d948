//! Rebuilding an array tree with its buffers somewhere else: device buffers
//! copied to the host (what the harness validates and compares), or host
//! buffers placed on a device (what the emulated and CUDA producers export).
//!
//! The C device interface says where each buffer is but not how long it is:
//! "it is only the data buffers themselves which reside in device memory".
//! [`rebuild`] walks the tree (the structures are host memory; they are read
//! through [`super::hostmem`] so that a structure in device memory is an
//! error, not a crash) and computes each buffer's byte extent from the
//! format, `offset + length`, and, for variable-size data, the offsets or
//! variadic sizes already read: the extent the Columnar format implies, the
//! same one `array.layout.lengths` checks on the host. Every buffer read
//! goes through a caller's closure, which is where the device rules look at
//! each buffer before it is touched.
//!
//! The rebuilt tree is an ordinary exported `ArrowArray`: every node has its
//! own release, which releases its children and dictionary, frees the
//! node's buffers, and marks the node released, so a child moved out and
//! kept past its parent's release stays valid (CDataInterface.rst, "Moving
//! child arrays").

use std::any::Any;
use std::ffi::{c_void, CStr};
use std::mem::size_of;

use super::hostmem;
use crate::abi::{ArrowArray, ArrowSchema};
use crate::format::{self, BufferShape, Format, UnionMode};

/// A buffer placed somewhere by a rebuild, and how to free it.
pub struct Placed {
    pub addr: usize,
    /// Runs when the node holding the buffer is released.
    pub free: Option<Box<dyn FnOnce() + Send>>,
}

/// One buffer of the tree, as the walk found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BufferRef {
    /// Where it is in the tree: `root.children[0] buffers[1] (offsets)`.
    pub at: String,
    /// The address the array holds.
    pub addr: usize,
    /// The byte extent the array implies from `addr` on.
    pub len: usize,
}

/// One host structure of the tree (an `ArrowArray`, a buffers or children
/// array), which must be host memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StructRef {
    pub at: String,
    pub addr: usize,
    pub len: usize,
}

/// A rebuilt tree and what the walk saw.
pub struct Rebuilt {
    /// The new tree; release it (or let [`Rebuilt`] drop, which does).
    pub array: ArrowArray,
    pub buffers: Vec<BufferRef>,
    pub structures: Vec<StructRef>,
}

impl Drop for Rebuilt {
    fn drop(&mut self) {
        if let Some(release) = self.array.release {
            // SAFETY: `array` is a tree this module built, live (release set).
            unsafe { release(&mut self.array) };
        }
    }
}

/// Reads `len` bytes of the buffer `b` (the whole extent, or for offsets
/// and sizes the part the walk needs).
pub type Read<'a> = dyn FnMut(&BufferRef) -> Result<Vec<u8>, String> + 'a;
/// Places the bytes of buffer `b` and says where they went.
pub type Place<'a> = dyn FnMut(&BufferRef, Vec<u8>) -> Result<Placed, String> + 'a;

/// Why a rebuild stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stopped {
    /// The buffer being read or placed, when it was a buffer.
    pub buffer: Option<BufferRef>,
    pub why: String,
}

impl std::fmt::Display for Stopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.buffer {
            Some(b) => write!(f, "{}: {}", b.at, self.why),
            None => f.write_str(&self.why),
        }
    }
}

fn stop(why: impl Into<String>) -> Stopped {
    Stopped {
        buffer: None,
        why: why.into(),
    }
}

/// Nodes deeper than this are not followed (a cycle, or garbage).
const MAX_DEPTH: usize = 64;
/// More buffers or children than this on one node is garbage.
const MAX_FANOUT: i64 = 1 << 16;

/// Rebuilds the tree `array` (described by `schema`, which must have
/// passed schema validation) with every non-NULL buffer read by `read` and
/// placed by `place`. `extra` is kept alive by the new root until its
/// release (an event, say).
pub fn rebuild(
    schema: &ArrowSchema,
    array: &ArrowArray,
    read: &mut Read<'_>,
    place: &mut Place<'_>,
    extra: Option<Box<dyn Any + Send>>,
) -> Result<Rebuilt, Stopped> {
    let mut walk = Walk {
        read,
        place,
        buffers: Vec::new(),
        structures: Vec::new(),
        sizes: None,
    };
    let node = walk.node(schema, array, "root", 0)?;
    let root = node.export(extra);
    Ok(Rebuilt {
        array: root,
        buffers: walk.buffers,
        structures: walk.structures,
    })
}

/// Copies every buffer to the host through `dev` (no checks): what a
/// consumer of device memory does after waiting on the event.
pub fn to_host(
    dev: &dyn super::Device,
    schema: &ArrowSchema,
    array: &ArrowArray,
) -> Result<Rebuilt, Stopped> {
    rebuild(
        schema,
        array,
        &mut |b: &BufferRef| dev.copy_to_host(b.addr, b.len),
        &mut host_place,
        None,
    )
}

/// Places bytes in fresh host memory keeping the source address's offset
/// modulo 64, so alignment checks on the copy judge the original.
pub fn host_place(b: &BufferRef, bytes: Vec<u8>) -> Result<Placed, String> {
    let shift = b.addr % 64;
    let mut block = vec![0u64; (shift + bytes.len()).div_ceil(8) + 8].into_boxed_slice();
    let base = block.as_mut_ptr() as usize;
    let start = base.next_multiple_of(64) + shift;
    let room = block.len() * 8 - (start - base);
    debug_assert!(room >= bytes.len());
    // SAFETY: `block` holds (shift + len)/8 + 8 words, so `start` (at most
    // 63 + shift bytes past its start) plus `len` bytes stays inside it.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), start as *mut u8, bytes.len()) };
    Ok(Placed {
        addr: start,
        free: Some(Box::new(move || drop(block))),
    })
}

struct Walk<'r, 'a, 'b> {
    read: &'r mut Read<'a>,
    place: &'r mut Place<'b>,
    buffers: Vec<BufferRef>,
    structures: Vec<StructRef>,
    /// The variadic buffer sizes of the view node being walked.
    sizes: Option<Vec<i64>>,
}

/// A node of the new tree before it is exported.
struct Node {
    length: i64,
    null_count: i64,
    offset: i64,
    buffers: Vec<Option<Placed>>,
    children: Vec<Node>,
    dictionary: Option<Box<Node>>,
}

/// Reads the host structure `T` at `addr` (a child array), recording it.
fn read_struct<T>(addr: usize) -> Option<T> {
    let bytes = hostmem::read(addr, size_of::<T>())?;
    // SAFETY: `bytes` holds size_of::<T>() bytes; T is a plain repr(C) ABI
    // struct of integers and raw or optional function pointers, for which
    // any non-poison bit pattern is a valid value (the callbacks are never
    // called through this copy).
    Some(unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<T>()) })
}

fn read_ptrs(addr: usize, n: usize) -> Option<Vec<usize>> {
    let bytes = hostmem::read(addr, n * size_of::<usize>())?;
    Some(
        bytes
            .chunks_exact(size_of::<usize>())
            .map(|c| usize::from_ne_bytes(c.try_into().expect("8 bytes")))
            .collect(),
    )
}

fn schema_format(s: &ArrowSchema) -> Result<Format, String> {
    if s.format.is_null() {
        return Err("the schema's format is NULL".into());
    }
    // SAFETY: the schema passed validation (format non-NULL, NUL-terminated).
    let text = unsafe { CStr::from_ptr(s.format) };
    format::parse(text.to_str().map_err(|e| e.to_string())?)
}

fn schema_child(s: &ArrowSchema, i: usize) -> Option<&ArrowSchema> {
    crate::abi::child_schema(s, i)
}

fn bitmap_bytes(bits: usize) -> usize {
    bits.div_ceil(8)
}

fn int_at(bytes: &[u8], i: usize, width: usize) -> Option<i64> {
    let b = bytes.get(i * width..(i + 1) * width)?;
    Some(match width {
        4 => i32::from_ne_bytes(b.try_into().ok()?) as i64,
        _ => i64::from_ne_bytes(b.try_into().ok()?),
    })
}

impl Walk<'_, '_, '_> {
    fn node(
        &mut self,
        schema: &ArrowSchema,
        a: &ArrowArray,
        at: &str,
        depth: usize,
    ) -> Result<Node, Stopped> {
        if depth > MAX_DEPTH {
            return Err(stop(format!("{at}: deeper than {MAX_DEPTH} levels")));
        }
        let fmt = schema_format(schema).map_err(|e| stop(format!("{at}: {e}")))?;
        if a.length < 0 || a.offset < 0 {
            return Err(stop(format!(
                "{at}: length {} and offset {} must be >= 0",
                a.length, a.offset
            )));
        }
        let end = (a.offset as usize)
            .checked_add(a.length as usize)
            .ok_or_else(|| stop(format!("{at}: offset + length overflows")))?;
        let nb = a.n_buffers;
        let expected = match format::n_buffers(&fmt) {
            BufferShape::Fixed(k) => nb == k as i64,
            BufferShape::View => (3..MAX_FANOUT).contains(&nb),
        };
        if !expected {
            return Err(stop(format!(
                "{at}: n_buffers {nb} does not fit format {fmt}"
            )));
        }
        let nb = nb as usize;
        let ptrs = if nb == 0 {
            Vec::new()
        } else {
            let addr = a.buffers as usize;
            self.structures.push(StructRef {
                at: format!("{at} buffers array"),
                addr,
                len: nb * size_of::<usize>(),
            });
            read_ptrs(addr, nb).ok_or_else(|| {
                stop(format!(
                    "{at}: the buffers array ({addr:#x}) is not readable host memory"
                ))
            })?
        };
        let mut placed: Vec<Option<Placed>> = Vec::with_capacity(nb);
        // Bytes read so far, by buffer index: offsets and sizes decide
        // the extents of the buffers after them.
        let mut kept: Vec<Option<Vec<u8>>> = vec![None; nb];
        let buffer_ref = |i: usize, len: usize| BufferRef {
            at: format!("{at} buffers[{i}] ({})", format::buffer_name(&fmt, i, nb)),
            addr: ptrs[i],
            len,
        };
        // A view array's variadic buffers are sized by its last buffer:
        // read that one first.
        self.sizes = None;
        let mut sizes_bytes = None;
        if matches!(format::n_buffers(&fmt), BufferShape::View) {
            let last = nb - 1;
            let b = buffer_ref(last, (nb - 3) * 8);
            if b.addr == 0 && nb > 3 {
                return Err(stop(format!("{at}: the variadic sizes buffer is NULL")));
            }
            if b.addr != 0 {
                let bytes = (self.read)(&b).map_err(|why| Stopped {
                    buffer: Some(b.clone()),
                    why,
                })?;
                self.sizes = Some(
                    bytes
                        .chunks_exact(8)
                        .map(|c| i64::from_ne_bytes(c.try_into().expect("8 bytes")))
                        .collect(),
                );
                sizes_bytes = Some(bytes);
            } else {
                self.sizes = Some(Vec::new());
            }
        }
        for i in 0..nb {
            if ptrs[i] == 0 {
                placed.push(None);
                continue;
            }
            let len = self.extent(&fmt, i, nb, end, &kept, at)?;
            let b = buffer_ref(i, len);
            self.buffers.push(b.clone());
            let read = match (i + 1 == nb, sizes_bytes.take()) {
                (true, Some(bytes)) => Ok(bytes),
                (_, pending) => {
                    sizes_bytes = pending;
                    (self.read)(&b)
                }
            };
            let bytes = read.map_err(|why| Stopped {
                buffer: Some(b.clone()),
                why,
            })?;
            if needed_later(&fmt, i, nb) {
                kept[i] = Some(bytes.clone());
            }
            let p = (self.place)(&b, bytes).map_err(|why| Stopped {
                buffer: Some(b.clone()),
                why,
            })?;
            placed.push(Some(p));
        }
        // Children and dictionary.
        let nc = a.n_children;
        if !(0..MAX_FANOUT).contains(&nc) || nc != schema.n_children {
            return Err(stop(format!(
                "{at}: n_children {nc} does not match the schema's {}",
                schema.n_children
            )));
        }
        let mut children = Vec::with_capacity(nc as usize);
        if nc > 0 {
            let addr = a.children as usize;
            self.structures.push(StructRef {
                at: format!("{at} children array"),
                addr,
                len: nc as usize * size_of::<usize>(),
            });
            let kids = read_ptrs(addr, nc as usize).ok_or_else(|| {
                stop(format!(
                    "{at}: the children array ({addr:#x}) is not readable host memory"
                ))
            })?;
            for (i, &k) in kids.iter().enumerate() {
                let child_at = format!("{at}.children[{i}]");
                let child = self.child_struct(k, &child_at)?;
                let cs = schema_child(schema, i)
                    .ok_or_else(|| stop(format!("{child_at}: no schema child {i}")))?;
                children.push(self.node(cs, &child, &child_at, depth + 1)?);
            }
        }
        let dictionary = match (schema.dictionary.is_null(), a.dictionary.is_null()) {
            (true, true) => None,
            (false, false) => {
                let d_at = format!("{at}.dictionary");
                let d = self.child_struct(a.dictionary as usize, &d_at)?;
                // SAFETY: the schema passed validation: its dictionary
                // pointer leads to a live schema.
                let ds = unsafe { &*schema.dictionary };
                Some(Box::new(self.node(ds, &d, &d_at, depth + 1)?))
            }
            (s, _) => {
                return Err(stop(format!(
                    "{at}: the schema {} a dictionary but the array {}",
                    if s { "has no" } else { "has" },
                    if s { "has one" } else { "has none" }
                )))
            }
        };
        Ok(Node {
            length: a.length,
            null_count: a.null_count,
            offset: a.offset,
            buffers: placed,
            children,
            dictionary,
        })
    }

    fn child_struct(&mut self, addr: usize, at: &str) -> Result<ArrowArray, Stopped> {
        self.structures.push(StructRef {
            at: at.to_string(),
            addr,
            len: size_of::<ArrowArray>(),
        });
        read_struct::<ArrowArray>(addr).ok_or_else(|| {
            stop(format!(
                "{at}: the ArrowArray at {addr:#x} is not readable host memory"
            ))
        })
    }

    /// The byte extent of buffer `i`.
    fn extent(
        &mut self,
        fmt: &Format,
        i: usize,
        nb: usize,
        end: usize,
        kept: &[Option<Vec<u8>>],
        at: &str,
    ) -> Result<usize, Stopped> {
        use Format::*;
        let bad = |what: String| stop(format!("{at}: {what}"));
        let mul = |n: usize, w: usize| {
            n.checked_mul(w)
                .filter(|&b| b <= isize::MAX as usize)
                .ok_or_else(|| bad(format!("{n} items of {w} bytes overflow")))
        };
        if i == 0 && format::validity_buffer(fmt).is_some() {
            return Ok(bitmap_bytes(end));
        }
        Ok(match (fmt, i) {
            (Boolean, 1) => bitmap_bytes(end),
            (Binary | Utf8, 1) | (List | Map, 1) => mul(end + 1, 4)?,
            (LargeBinary | LargeUtf8, 1) | (LargeList, 1) => mul(end + 1, 8)?,
            (Binary | Utf8 | LargeBinary | LargeUtf8, 2) => {
                let w = if matches!(fmt, Binary | Utf8) { 4 } else { 8 };
                match &kept[1] {
                    // The data extent is the last offset in use.
                    Some(offsets) => {
                        let last = int_at(offsets, end, w)
                            .ok_or_else(|| bad("the offsets buffer is too short".into()))?;
                        usize::try_from(last)
                            .map_err(|_| bad(format!("the last offset is {last}")))?
                    }
                    // NULL offsets: nothing is addressed.
                    None => 0,
                }
            }
            (ListView, 1 | 2) => mul(end, 4)?,
            (LargeListView, 1 | 2) => mul(end, 8)?,
            (Union(_, _), 0) => end,
            (Union(UnionMode::Dense, _), 1) => mul(end, 4)?,
            (BinaryView | Utf8View, 1) => mul(end, 16)?,
            (BinaryView | Utf8View, i) if i + 1 == nb => mul(nb - 3, 8)?,
            (BinaryView | Utf8View, i) => {
                // Variadic buffer i - 2: its size is in the last buffer,
                // read first (see `order`).
                let s = self
                    .sizes
                    .as_ref()
                    .and_then(|s| s.get(i - 2).copied())
                    .ok_or_else(|| bad("no size for this variadic buffer".into()))?;
                usize::try_from(s).map_err(|_| bad(format!("variadic buffer size {s}")))?
            }
            (f, 1) => match format::byte_width(f) {
                Some(w) => mul(end, w)?,
                None => return Err(bad(format!("format {f} has no buffer {i}"))),
            },
            (f, _) => return Err(bad(format!("format {f} has no buffer {i}"))),
        })
    }
}

/// Whether buffer `i` is needed to size a later buffer.
fn needed_later(fmt: &Format, i: usize, _nb: usize) -> bool {
    matches!(
        (fmt, i),
        (
            Format::Binary | Format::Utf8 | Format::LargeBinary | Format::LargeUtf8,
            1
        )
    )
}

impl Node {
    fn export(self, extra: Option<Box<dyn Any + Send>>) -> ArrowArray {
        let mut ptrs: Vec<*const c_void> = Vec::with_capacity(self.buffers.len());
        let mut frees = Vec::new();
        for b in self.buffers {
            match b {
                Some(p) => {
                    ptrs.push(p.addr as *const c_void);
                    frees.extend(p.free);
                }
                None => ptrs.push(std::ptr::null()),
            }
        }
        let mut children: Vec<*mut ArrowArray> = self
            .children
            .into_iter()
            .map(|c| Box::into_raw(Box::new(c.export(None))))
            .collect();
        let dictionary = self.dictionary.map_or(std::ptr::null_mut(), |d| {
            Box::into_raw(Box::new(d.export(None)))
        });
        let n_buffers = ptrs.len() as i64;
        let n_children = children.len() as i64;
        let buffers_ptr = if ptrs.is_empty() {
            std::ptr::null_mut()
        } else {
            ptrs.as_mut_ptr()
        };
        let children_ptr = if children.is_empty() {
            std::ptr::null_mut()
        } else {
            children.as_mut_ptr()
        };
        let private = Box::new(Private {
            _buffers: ptrs,
            children,
            dictionary,
            frees,
            _extra: extra,
        });
        ArrowArray {
            length: self.length,
            null_count: self.null_count,
            offset: self.offset,
            n_buffers,
            n_children,
            buffers: buffers_ptr,
            children: children_ptr,
            dictionary,
            release: Some(release_node),
            private_data: Box::into_raw(private).cast(),
        }
    }
}

/// What a rebuilt node owns.
struct Private {
    _buffers: Vec<*const c_void>,
    children: Vec<*mut ArrowArray>,
    dictionary: *mut ArrowArray,
    frees: Vec<Box<dyn FnOnce() + Send>>,
    _extra: Option<Box<dyn Any + Send>>,
}

/// The release callback of every rebuilt node.
///
/// # Safety
/// `a` is the live structure this release callback was installed in (or moved
/// to), called as the C data interface calls a release callback.
unsafe extern "C" fn release_node(a: *mut ArrowArray) {
    if a.is_null() {
        return;
    }
    // SAFETY: `a` is a live node this module exported (its release is this
    // function), so private_data is the Box<Private> made by `export`.
    let private = unsafe { Box::from_raw((*a).private_data.cast::<Private>()) };
    let Private {
        children,
        dictionary,
        frees,
        ..
    } = *private;
    for c in children
        .into_iter()
        .chain((!dictionary.is_null()).then_some(dictionary))
    {
        // SAFETY: each child is a Box this node made; a child moved out by
        // the consumer has release NULL here and is only freed.
        unsafe {
            if let Some(r) = (*c).release {
                r(c);
            }
            drop(Box::from_raw(c));
        }
    }
    for f in frees {
        f();
    }
    // SAFETY: `a` is live and writable (the caller owns it).
    unsafe {
        (*a).release = None;
        (*a).private_data = std::ptr::null_mut();
    }
}

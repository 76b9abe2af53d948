//! TODO-merge: a stand-in for `arrowcert::device::mirror`, which is being
//! written on another branch. Same names and signatures as that module
//! (`Placed`, `BufferRef`, `Rebuilt`, `Stopped`, `Read`, `Place`,
//! `rebuild`, `to_host`, `host_place`), so that at merge time this file is
//! deleted and `use crate::mirror_standin as mirror` becomes
//! `use arrowcert::device::mirror`, with no other change.
//!
//! The walk here takes each node's type from arrow-rs (the schema is
//! converted by reference, not consumed) and computes each buffer's byte
//! extent from `offset + length`, the offsets (variable-size data) and the
//! variadic sizes (views). The real module reads the format strings
//! itself and records every host structure it reads; this one records
//! buffers only.

use std::any::Any;
use std::ffi::c_void;
use std::mem::size_of;
use std::panic::{catch_unwind, AssertUnwindSafe};

use arrow_array::ffi::FFI_ArrowSchema;
use arrow_data::{layout, BufferSpec};
use arrow_schema::DataType;
use arrowcert::abi::ops::Owned;
use arrowcert::abi::{ArrowArray, ArrowSchema, Plain};
use arrowcert::device::{hostmem, Device};

/// A buffer placed somewhere by a rebuild, and how to free it.
pub struct Placed {
    pub addr: usize,
    /// Runs when the node holding the buffer is released.
    pub free: Option<Box<dyn FnOnce() + Send>>,
}

/// One buffer of the tree, as the walk found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BufferRef {
    /// Where it is in the tree: `root.children[0] buffers[1]`.
    pub at: String,
    /// The address the array holds.
    pub addr: usize,
    /// The byte extent the array implies from `addr` on.
    pub len: usize,
}

/// One host structure of the tree (recorded by the real module only).
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
        self.array.release();
    }
}

/// Reads the bytes of buffer `b`.
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

const MAX_DEPTH: usize = 64;
const MAX_FANOUT: i64 = 1 << 16;

/// Rebuilds the tree `array` (described by `schema`) with every non-NULL
/// buffer read by `read` and placed by `place`. `extra` is kept alive by
/// the new root until its release.
pub fn rebuild(
    schema: &ArrowSchema,
    array: &ArrowArray,
    read: &mut Read<'_>,
    place: &mut Place<'_>,
    extra: Option<Box<dyn Any + Send>>,
) -> Result<Rebuilt, Stopped> {
    // SAFETY: FFI_ArrowSchema is arrow-rs's repr(C) definition of the same
    // struct (sizes asserted in arrowcert::abi::arrow_rs); the reference is
    // only read, and nothing is released through it.
    let ffi = unsafe { &*(schema as *const ArrowSchema).cast::<FFI_ArrowSchema>() };
    let data_type = DataType::try_from(ffi).map_err(|e| stop(format!("the schema's type: {e}")))?;
    let mut walk = Walk {
        read,
        place,
        buffers: Vec::new(),
    };
    let node = walk.node(array, &data_type, "root", 0)?;
    Ok(Rebuilt {
        array: node.export(extra),
        buffers: walk.buffers,
        structures: Vec::new(),
    })
}

/// Copies every buffer to the host through `dev`.
pub fn to_host(
    dev: &dyn Device,
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
/// modulo 64.
pub fn host_place(b: &BufferRef, bytes: Vec<u8>) -> Result<Placed, String> {
    let shift = b.addr % 64;
    let mut block = vec![0u64; (shift + bytes.len()).div_ceil(8) + 8].into_boxed_slice();
    let base = block.as_mut_ptr() as usize;
    let start = base.next_multiple_of(64) + shift;
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
}

/// A node of the new tree before it is exported. Dropped unexported (a
/// rebuild that stopped), it frees what it placed.
struct Node {
    length: i64,
    null_count: i64,
    offset: i64,
    buffers: Vec<Option<Placed>>,
    children: Vec<Node>,
    dictionary: Option<Box<Node>>,
}

impl Drop for Node {
    fn drop(&mut self) {
        for p in self.buffers.iter_mut().flatten() {
            if let Some(free) = p.free.take() {
                free();
            }
        }
    }
}

/// Reads the host structure `T` at `addr`.
fn read_struct<T: Plain>(addr: usize) -> Option<T> {
    let bytes = hostmem::read(addr, size_of::<T>())?;
    // SAFETY: `bytes` holds size_of::<T>() bytes; T is a plain repr(C) ABI
    // struct of integers and raw or optional function pointers (the
    // callbacks are never called through this copy).
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

fn int_at(bytes: &[u8], i: usize, width: usize) -> Option<i64> {
    let b = bytes.get(i * width..(i + 1) * width)?;
    Some(match width {
        4 => i32::from_ne_bytes(b.try_into().ok()?) as i64,
        _ => i64::from_ne_bytes(b.try_into().ok()?),
    })
}

/// The types of a node's children, in order.
fn child_types(dt: &DataType) -> Vec<DataType> {
    match dt {
        DataType::Struct(fields) => fields.iter().map(|f| f.data_type().clone()).collect(),
        DataType::List(f)
        | DataType::LargeList(f)
        | DataType::ListView(f)
        | DataType::LargeListView(f)
        | DataType::FixedSizeList(f, _)
        | DataType::Map(f, _) => vec![f.data_type().clone()],
        DataType::Union(fields, _) => fields.iter().map(|(_, f)| f.data_type().clone()).collect(),
        DataType::RunEndEncoded(r, v) => vec![r.data_type().clone(), v.data_type().clone()],
        _ => Vec::new(),
    }
}

/// True when the first buffer after the validity is offsets with
/// `offset + length + 1` entries.
fn has_offsets(dt: &DataType) -> bool {
    matches!(
        dt,
        DataType::Utf8
            | DataType::LargeUtf8
            | DataType::Binary
            | DataType::LargeBinary
            | DataType::List(_)
            | DataType::LargeList(_)
            | DataType::Map(_, _)
    )
}

impl Walk<'_, '_, '_> {
    fn node(
        &mut self,
        a: &ArrowArray,
        dt: &DataType,
        at: &str,
        depth: usize,
    ) -> Result<Node, Stopped> {
        if depth > MAX_DEPTH {
            return Err(stop(format!("{at}: nested deeper than {MAX_DEPTH}")));
        }
        if a.length < 0 || a.offset < 0 {
            return Err(stop(format!(
                "{at}: length {} and offset {} must be >= 0",
                a.length, a.offset
            )));
        }
        if !(0..=MAX_FANOUT).contains(&a.n_buffers) || !(0..=MAX_FANOUT).contains(&a.n_children) {
            return Err(stop(format!(
                "{at}: {} buffers and {} children is garbage",
                a.n_buffers, a.n_children
            )));
        }
        let end = (a.offset + a.length) as usize;
        let n_buffers = a.n_buffers as usize;
        let ptrs = if n_buffers == 0 {
            Vec::new()
        } else {
            read_ptrs(a.buffers as usize, n_buffers)
                .ok_or_else(|| stop(format!("{at}: the buffers array is not host memory")))?
        };

        let spec = layout(dt);
        // The extent of each buffer, by position.
        let mut extents: Vec<usize> = Vec::with_capacity(n_buffers);
        if spec.can_contain_null_mask {
            extents.push(end.div_ceil(8));
        }
        let mut node = Node {
            length: a.length,
            null_count: a.null_count,
            offset: a.offset,
            buffers: Vec::with_capacity(n_buffers),
            children: Vec::new(),
            dictionary: None,
        };
        if spec.variadic {
            // Views: [validity], views, data..., sizes.
            let fixed = extents.len() + 1;
            if n_buffers < fixed + 1 {
                return Err(stop(format!(
                    "{at}: a view array needs at least {} buffers",
                    fixed + 1
                )));
            }
            extents.push(end * 16);
            let n_data = n_buffers - fixed - 1;
            let sizes_ref = BufferRef {
                at: format!("{at} buffers[{}] (variadic sizes)", n_buffers - 1),
                addr: ptrs[n_buffers - 1],
                len: n_data * 8,
            };
            let sizes = if n_data == 0 || sizes_ref.addr == 0 {
                Vec::new()
            } else {
                (self.read)(&sizes_ref).map_err(|why| Stopped {
                    buffer: Some(sizes_ref.clone()),
                    why,
                })?
            };
            for i in 0..n_data {
                let s = int_at(&sizes, i, 8).unwrap_or(0);
                extents.push(usize::try_from(s).map_err(|_| stop(format!("{at}: negative size")))?);
            }
            extents.push(n_data * 8);
        } else {
            for (i, b) in spec.buffers.iter().enumerate() {
                extents.push(match b {
                    BufferSpec::FixedWidth { byte_width, .. } => {
                        let n = if i == 0 && has_offsets(dt) {
                            end + 1
                        } else {
                            end
                        };
                        n * byte_width
                    }
                    BufferSpec::BitMap => end.div_ceil(8),
                    // Filled in once the offsets were read (below).
                    BufferSpec::VariableWidth => 0,
                    BufferSpec::AlwaysNull => 0,
                });
            }
        }
        if extents.len() != n_buffers {
            return Err(stop(format!(
                "{at}: n_buffers is {n_buffers} but the type has {}",
                extents.len()
            )));
        }
        let mut last: Vec<u8> = Vec::new();
        for (i, &addr) in ptrs.iter().enumerate() {
            let mut len = extents[i];
            let variable = !spec.variadic
                && spec.can_contain_null_mask as usize + 1 == i
                && matches!(
                    spec.buffers.get(i - spec.can_contain_null_mask as usize),
                    Some(BufferSpec::VariableWidth)
                );
            if variable {
                let width = match dt {
                    DataType::LargeUtf8 | DataType::LargeBinary => 8,
                    _ => 4,
                };
                len = match int_at(&last, end, width) {
                    Some(v) => usize::try_from(v)
                        .map_err(|_| stop(format!("{at}: a negative offset ({v})")))?,
                    None => 0,
                };
            }
            if addr == 0 {
                node.buffers.push(None);
                last = Vec::new();
                continue;
            }
            let b = BufferRef {
                at: format!("{at} buffers[{i}]"),
                addr,
                len,
            };
            let bytes = (self.read)(&b).map_err(|why| Stopped {
                buffer: Some(b.clone()),
                why,
            })?;
            last = bytes.clone();
            let placed = (self.place)(&b, bytes).map_err(|why| Stopped {
                buffer: Some(b.clone()),
                why,
            })?;
            self.buffers.push(b);
            node.buffers.push(Some(placed));
        }

        let types = child_types(dt);
        if types.len() != a.n_children as usize {
            return Err(stop(format!(
                "{at}: n_children is {} but the type has {}",
                a.n_children,
                types.len()
            )));
        }
        if !types.is_empty() {
            let children = read_ptrs(a.children as usize, types.len())
                .ok_or_else(|| stop(format!("{at}: the children array is not host memory")))?;
            for (i, (ptr, t)) in children.into_iter().zip(types).enumerate() {
                let child_at = format!("{at}.children[{i}]");
                let child: ArrowArray = read_struct(ptr)
                    .ok_or_else(|| stop(format!("{child_at} is not host memory")))?;
                let c = self.node(&child, &t, &child_at, depth + 1)?;
                node.children.push(c);
            }
        }
        if let DataType::Dictionary(_, value) = dt {
            let dict_at = format!("{at}.dictionary");
            let d: ArrowArray = read_struct(a.dictionary as usize)
                .ok_or_else(|| stop(format!("{dict_at} is not host memory")))?;
            node.dictionary = Some(Box::new(self.node(&d, value, &dict_at, depth + 1)?));
        }
        Ok(node)
    }
}

/// What a node of the new tree owns.
struct Private {
    buffers: Vec<*const c_void>,
    children: Vec<*mut ArrowArray>,
    dictionary: *mut ArrowArray,
    frees: Vec<Box<dyn FnOnce() + Send>>,
    extra: Option<Box<dyn Any + Send>>,
}

impl Node {
    fn export(mut self, extra: Option<Box<dyn Any + Send>>) -> ArrowArray {
        let mut frees = Vec::new();
        let buffers: Vec<*const c_void> = self
            .buffers
            .iter_mut()
            .map(|b| match b {
                Some(p) => {
                    frees.extend(p.free.take());
                    p.addr as *const c_void
                }
                None => std::ptr::null(),
            })
            .collect();
        let children: Vec<*mut ArrowArray> = std::mem::take(&mut self.children)
            .into_iter()
            .map(|c| Box::into_raw(Box::new(c.export(None))))
            .collect();
        let dictionary = match self.dictionary.take() {
            Some(d) => Box::into_raw(Box::new(d.export(None))),
            None => std::ptr::null_mut(),
        };
        let mut private = Box::new(Private {
            buffers,
            children,
            dictionary,
            frees,
            extra,
        });
        let mut out = ArrowArray::zeroed();
        out.length = self.length;
        out.null_count = self.null_count;
        out.offset = self.offset;
        out.n_buffers = private.buffers.len() as i64;
        out.n_children = private.children.len() as i64;
        out.buffers = private.buffers.as_mut_ptr();
        out.children = private.children.as_mut_ptr();
        out.dictionary = private.dictionary;
        out.release = Some(release);
        out.private_data = Box::into_raw(private).cast();
        out
    }
}

/// Releases the children and dictionary still owned, frees the node's
/// buffers, drops `extra`, and marks the node released.
unsafe extern "C" fn release(array: *mut ArrowArray) {
    if array.is_null() {
        return;
    }
    // SAFETY: `array` is a node exported above (the only installer of this
    // callback), live, owned by the caller, released once; its private_data
    // is the Box written by export.
    unsafe {
        let private = Box::from_raw((*array).private_data.cast::<Private>());
        let _ = catch_unwind(AssertUnwindSafe(move || {
            let Private {
                children,
                dictionary,
                frees,
                extra,
                ..
            } = *private;
            for c in children
                .into_iter()
                .chain((!dictionary.is_null()).then_some(dictionary))
            {
                // A child moved out is marked released; its Box is ours.
                let mut child = Box::from_raw(c);
                child.release();
            }
            for f in frees {
                f();
            }
            drop(extra);
        }));
        (*array).private_data = std::ptr::null_mut();
        (*array).release = None;
    }
}

//! Aligned copies of the few buffers arrow-rs reads through typed pointers.
//!
//! "Consumers MAY decide not to support unaligned memory"
//! (CDataInterface.rst): unaligned buffers are valid input, which a consumer
//! may refuse but must not misread. arrow-rs 60.1.0's importer realigns
//! every buffer it builds (`align_buffers(true)`), but before that it reads
//! two kinds of buffer through typed pointers that must be aligned
//! (arrow-array `ffi.rs`: "we assume that pointer is aligned for `i32`"):
//! the last offset of a utf8 or binary array (and their large forms), and
//! the variadic buffer sizes of a view array. An unaligned one there is
//! undefined behaviour (a "misaligned pointer dereference" abort under
//! debug assertions).
//!
//! The harness reads with arrow-rs (its probe, the reference consumer, the
//! fuzz oracle), so before it hands arrow-rs an array, [`for_arrow_rs`]
//! puts a thin copy of the structures in front of it in which those
//! buffers, where unaligned, point to aligned copies; every other pointer is
//! the producer's. Releasing the copy releases the producer's array.

use std::ffi::c_void;

use arrow_schema::DataType;

use super::ArrowArray;

/// The buffers of one node arrow-rs reads as `(index, element width)`,
/// given its type and its number of buffers.
fn typed_reads(dt: &DataType, n_buffers: i64) -> Option<(usize, usize)> {
    match dt {
        DataType::Utf8 | DataType::Binary => Some((1, 4)),
        DataType::LargeUtf8 | DataType::LargeBinary => Some((1, 8)),
        DataType::Utf8View | DataType::BinaryView if n_buffers > 3 => {
            Some((n_buffers as usize - 1, 8))
        }
        _ => None,
    }
}

/// The bytes arrow-rs reads from that buffer (0 where it reads none, or
/// where the structure's numbers make no size: arrow-rs's own problem).
fn read_len(dt: &DataType, a: &ArrowArray) -> usize {
    let entries = |width: i64| -> usize {
        a.offset
            .checked_add(a.length)
            .and_then(|n| n.checked_add(1))
            .and_then(|n| n.checked_mul(width))
            .and_then(|n| usize::try_from(n).ok())
            .unwrap_or(0)
    };
    match dt {
        DataType::Utf8 | DataType::Binary if a.length > 0 || a.offset > 0 => entries(4),
        DataType::LargeUtf8 | DataType::LargeBinary if a.length > 0 || a.offset > 0 => entries(8),
        DataType::Utf8View | DataType::BinaryView => {
            usize::try_from(a.n_buffers.saturating_sub(3)).unwrap_or(0) * 8
        }
        _ => 0,
    }
}

/// The types of a node's children, in order.
fn child_types(dt: &DataType) -> Vec<&DataType> {
    match dt {
        DataType::Struct(fields) => fields.iter().map(|f| f.data_type()).collect(),
        DataType::List(f)
        | DataType::LargeList(f)
        | DataType::ListView(f)
        | DataType::LargeListView(f)
        | DataType::FixedSizeList(f, _)
        | DataType::Map(f, _) => vec![f.data_type()],
        DataType::Union(fields, _) => fields.iter().map(|(_, f)| f.data_type()).collect(),
        DataType::RunEndEncoded(r, v) => vec![r.data_type(), v.data_type()],
        _ => Vec::new(),
    }
}

/// The type of a node's dictionary.
fn dictionary_type(dt: &DataType) -> Option<&DataType> {
    match dt {
        DataType::Dictionary(_, v) => Some(v),
        _ => None,
    }
}

/// The buffer of this node arrow-rs reads typed, when it is unaligned:
/// its index and the bytes arrow-rs reads from it.
///
/// # Safety
/// `a` follows the C data interface (its `buffers` has n_buffers entries).
unsafe fn unaligned_typed_read(a: &ArrowArray, dt: &DataType) -> Option<(usize, usize)> {
    let (i, width) = typed_reads(dt, a.n_buffers)?;
    if (i as i64) >= a.n_buffers || a.buffers.is_null() {
        return None;
    }
    // SAFETY: i < n_buffers and `buffers` has n_buffers entries (caller).
    let p = unsafe { *a.buffers.add(i) };
    let len = read_len(dt, a);
    (!p.is_null() && (p as usize) % width != 0 && len > 0).then_some((i, len))
}

/// Whether a buffer of this node that arrow-rs reads typed is unaligned,
/// here or below.
///
/// # Safety
/// `a` follows the C data interface and matches `dt` in its structure
/// (numbers of buffers and children, dictionary present for a dictionary).
unsafe fn needs_copy(a: &ArrowArray, dt: &DataType) -> bool {
    // SAFETY: the caller's guarantee.
    if unsafe { unaligned_typed_read(a, dt) }.is_some() {
        return true;
    }
    let kids = child_types(dt);
    for (i, t) in kids.iter().enumerate() {
        if (i as i64) < a.n_children && !a.children.is_null() {
            // SAFETY: i < n_children; each child pointer is a live array.
            let c = unsafe { &**a.children.add(i) };
            // SAFETY: the child follows the interface (caller).
            if unsafe { needs_copy(c, t) } {
                return true;
            }
        }
    }
    match (dictionary_type(dt), a.dictionary.is_null()) {
        // SAFETY: a live dictionary array (caller).
        (Some(t), false) => unsafe { needs_copy(&*a.dictionary, t) },
        _ => false,
    }
}

/// Everything the copy's structures point to, owned by its root.
struct Arena {
    original: ArrowArray,
    buffer_lists: Vec<Vec<*const c_void>>,
    child_lists: Vec<Vec<*mut ArrowArray>>,
    structs: Vec<*mut ArrowArray>,
    copies: Vec<Vec<u64>>,
}

impl Drop for Arena {
    fn drop(&mut self) {
        for s in self.structs.drain(..) {
            // SAFETY: made by Box::into_raw in `copy_node`, freed once here.
            drop(unsafe { Box::from_raw(s) });
        }
        if let Some(release) = self.original.release {
            // SAFETY: the producer's live array, released once.
            unsafe { release(&mut self.original) };
        }
    }
}

/// The copy's structures of one node; children and dictionary are boxed
/// into the arena.
///
/// # Safety
/// As [`needs_copy`].
unsafe fn copy_node(a: &ArrowArray, dt: &DataType, arena: &mut Arena) -> ArrowArray {
    let mut out = shallow(a);
    if !a.buffers.is_null() && a.n_buffers > 0 {
        // SAFETY: `buffers` has n_buffers entries (caller).
        let mut list: Vec<*const c_void> =
            unsafe { std::slice::from_raw_parts(a.buffers, a.n_buffers as usize) }.to_vec();
        // SAFETY: the caller's guarantee.
        if let Some((i, len)) = unsafe { unaligned_typed_read(a, dt) } {
            let mut words = vec![0u64; len.div_ceil(8)];
            // SAFETY: the buffer holds at least what arrow-rs would read
            // from it (the interface's sizes, caller); `words` holds at
            // least `len` bytes and is a fresh allocation.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    list[i].cast::<u8>(),
                    words.as_mut_ptr().cast::<u8>(),
                    len,
                )
            };
            list[i] = words.as_ptr().cast();
            arena.copies.push(words);
        }
        out.buffers = list.as_mut_ptr();
        arena.buffer_lists.push(list);
    }
    let kids = child_types(dt);
    if !a.children.is_null() && a.n_children > 0 {
        let mut list = Vec::with_capacity(a.n_children as usize);
        for i in 0..a.n_children as usize {
            // SAFETY: i < n_children; each child pointer is a live array.
            let c = unsafe { &**a.children.add(i) };
            let copy = match kids.get(i) {
                // SAFETY: the child follows the interface (caller).
                Some(t) => unsafe { copy_node(c, t, arena) },
                None => shallow(c),
            };
            let p = Box::into_raw(Box::new(copy));
            arena.structs.push(p);
            list.push(p);
        }
        out.children = list.as_mut_ptr();
        arena.child_lists.push(list);
    }
    if !a.dictionary.is_null() {
        // SAFETY: a live dictionary array (caller).
        let d = unsafe { &*a.dictionary };
        let copy = match dictionary_type(dt) {
            // SAFETY: as above.
            Some(t) => unsafe { copy_node(d, t, arena) },
            None => shallow(d),
        };
        let p = Box::into_raw(Box::new(copy));
        arena.structs.push(p);
        out.dictionary = p;
    }
    out
}

/// A node of the copy pointing where `a` points, released with the root.
fn shallow(a: &ArrowArray) -> ArrowArray {
    ArrowArray {
        release: Some(release_child),
        private_data: std::ptr::null_mut(),
        ..*a
    }
}

/// A child of the copy: its memory belongs to the root's arena, so
/// releasing it only marks it released.
///
/// # Safety
/// `a` is the live structure this release callback was installed in (or moved
/// to), called as the C data interface calls a release callback.
unsafe extern "C" fn release_child(a: *mut ArrowArray) {
    if !a.is_null() {
        // SAFETY: the caller passes a live array of the copy.
        unsafe { (*a).release = None };
    }
}

/// The copy's root release: frees the arena and releases the producer's
/// array.
///
/// # Safety
/// `a` is the live structure this release callback was installed in (or moved
/// to), called as the C data interface calls a release callback.
unsafe extern "C" fn release_root(a: *mut ArrowArray) {
    if a.is_null() {
        return;
    }
    // SAFETY: a live root of the copy; its private_data is the arena made
    // by Box::into_raw in `for_arrow_rs`, freed once here.
    unsafe {
        let arena = (*a).private_data.cast::<Arena>();
        (*a).release = None;
        drop(Box::from_raw(arena));
    }
}

/// `array` as arrow-rs can import it: unchanged when none of the buffers
/// arrow-rs reads through typed pointers is unaligned, else the copy
/// described in the module docs. Either way the result owns the array.
///
/// # Safety
/// `array` is a live array that follows the C data interface and matches
/// `dt` in its structure (numbers of buffers and children, a dictionary
/// where `dt` is one), as arrow-rs's import itself requires.
pub unsafe fn for_arrow_rs(array: ArrowArray, dt: &DataType) -> ArrowArray {
    // SAFETY: the caller's guarantee.
    if array.release.is_none() || !unsafe { needs_copy(&array, dt) } {
        return array;
    }
    let mut arena = Box::new(Arena {
        original: ArrowArray {
            release: None,
            ..array
        },
        buffer_lists: Vec::new(),
        child_lists: Vec::new(),
        structs: Vec::new(),
        copies: Vec::new(),
    });
    // SAFETY: the caller's guarantee.
    let mut root = unsafe { copy_node(&array, dt, &mut arena) };
    arena.original.release = array.release;
    root.release = Some(release_root);
    root.private_data = Box::into_raw(arena).cast();
    root
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Counts its calls in the AtomicUsize its private_data points to.
    ///
    /// # Safety
    /// `a` is the live structure this release callback was installed in (or moved
    /// to), called as the C data interface calls a release callback.
    unsafe extern "C" fn count_release(a: *mut ArrowArray) {
        // SAFETY: test arrays whose private_data is a live AtomicUsize.
        unsafe {
            (*(*a).private_data.cast::<AtomicUsize>()).fetch_add(1, Ordering::SeqCst);
            (*a).release = None;
        }
    }

    /// A utf8 array of `length` over three `buffers`, released into
    /// `released`.
    fn utf8(length: i64, buffers: &mut [*const c_void], released: &AtomicUsize) -> ArrowArray {
        ArrowArray {
            length,
            null_count: 0,
            offset: 0,
            n_buffers: 3,
            n_children: 0,
            buffers: buffers.as_mut_ptr(),
            children: std::ptr::null_mut(),
            dictionary: std::ptr::null_mut(),
            release: Some(count_release),
            private_data: (released as *const AtomicUsize).cast_mut().cast(),
        }
    }

    #[test]
    fn unaligned_utf8_offsets_are_copied_aligned_and_the_original_released_once() {
        // offsets [0, 1, 3] at a 1-byte shift; values "abc".
        let mut raw = [0u8; 32];
        for (i, v) in [0i32, 1, 3].iter().enumerate() {
            raw[1 + 4 * i..5 + 4 * i].copy_from_slice(&v.to_ne_bytes());
        }
        let values = b"abc".to_vec();
        let released = AtomicUsize::new(0);
        let mut buffers: Vec<*const c_void> = vec![
            std::ptr::null(),
            // SAFETY: within `raw`.
            unsafe { raw.as_ptr().add(1) }.cast(),
            values.as_ptr().cast(),
        ];
        let array = utf8(2, &mut buffers, &released);
        // SAFETY: a valid utf8 array.
        let mut copy = unsafe { for_arrow_rs(array, &DataType::Utf8) };
        // SAFETY: the copy's buffers list has 3 entries.
        let offsets = unsafe { *copy.buffers.add(1) };
        assert_eq!(offsets as usize % 4, 0, "the offsets are aligned");
        // SAFETY: 3 aligned i32s.
        let read = unsafe { std::slice::from_raw_parts(offsets.cast::<i32>(), 3) };
        assert_eq!(read, &[0, 1, 3]);
        // SAFETY: as above.
        assert_eq!(unsafe { *copy.buffers.add(2) }, values.as_ptr().cast());
        let release = copy.release.expect("live");
        // SAFETY: the copy's root, released once.
        unsafe { release(&mut copy) };
        assert!(copy.release.is_none());
        assert_eq!(released.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn aligned_arrays_pass_through_unchanged() {
        let offsets = [0i32, 0];
        let released = AtomicUsize::new(0);
        let mut buffers: Vec<*const c_void> =
            vec![std::ptr::null(), offsets.as_ptr().cast(), std::ptr::null()];
        let array = utf8(1, &mut buffers, &released);
        // SAFETY: a valid utf8 array of one empty string.
        let mut same = unsafe { for_arrow_rs(array, &DataType::Utf8) };
        assert_eq!(same.buffers, buffers.as_mut_ptr());
        let release = same.release.expect("live");
        // SAFETY: the original array, released once.
        unsafe { release(&mut same) };
        assert_eq!(released.load(Ordering::SeqCst), 1);
    }
}

//! The buffer-access layer every layout check reads through: a node's
//! buffers as byte regions that must hold what the layout requires (a NULL
//! one reported where bytes are required), and what a checked child tells
//! its parent.

use super::*;

/// What a parent needs to know about a checked array child.
pub(super) struct ArrayInfo {
    pub(super) format: Format,
    pub(super) length: usize,
    pub(super) offset: usize,
    pub(super) null_count: i64,
    /// The validity bitmap, when there is one and it may be read for
    /// `offset + length` bits; NULL otherwise.
    pub(super) validity: *const u8,
    /// Buffer 1 of a fixed-width array whose layout checked out: it may be
    /// read for `offset + length` values (NULL when that is zero bytes).
    pub(super) data: Option<*const u8>,
    /// The node's checked children (`None` for one that could not be
    /// followed): what a grandparent needs (a map's keys).
    pub(super) children: Vec<Option<ArrayInfo>>,
}

/// Byte size of `count` items of `width` bytes, if it fits the address space.
pub(super) fn bytes_for(count: usize, width: usize) -> Option<usize> {
    count
        .checked_mul(width)
        .filter(|&b| b <= isize::MAX as usize)
}

pub(super) fn bitmap_bytes(bits: usize) -> usize {
    bits / 8 + usize::from(bits % 8 != 0)
}

/// Read access to one node's buffers, with the reports that go with it.
pub(super) struct Buffers<'a> {
    pub(super) ptrs: &'a [*const c_void],
    pub(super) at: &'a str,
}

impl Buffers<'_> {
    /// Bytes `[start, end)` of buffer `i`, which must hold `required` bytes.
    /// A NULL pointer is allowed (and gives an empty slice) only when
    /// `required` is 0; otherwise it is reported and `None` comes back.
    ///
    /// # Safety
    /// Buffer `i`, when non-NULL, must hold at least `required` bytes, and
    /// `start <= end <= required`.
    pub(super) unsafe fn region(
        &self,
        i: usize,
        what: &str,
        required: usize,
        start: usize,
        end: usize,
        sink: &mut Sink,
    ) -> Option<&[u8]> {
        let p = *self.ptrs.get(i)?;
        if p.is_null() {
            if required > 0 {
                sink.push(
                    ARRAY_NULL_BUFFER,
                    self.at,
                    format!("buffers[{i}] ({what}) is NULL but {required} bytes are required"),
                );
                return None;
            }
            return Some(&[]);
        }
        if end <= start || end > required {
            return Some(&[]);
        }
        // SAFETY: non-NULL (poison pointers were rejected with the buffers
        // array); the caller vouches for `required` bytes, and
        // start < end <= required <= isize::MAX.
        Some(unsafe { std::slice::from_raw_parts(p.cast::<u8>().add(start), end - start) })
    }

    /// Checks that buffer `i` is non-NULL when it must hold `required` bytes.
    pub(super) fn present(&self, i: usize, what: &str, required: usize, sink: &mut Sink) -> bool {
        match self.ptrs.get(i) {
            Some(p) if p.is_null() && required > 0 => {
                sink.push(
                    ARRAY_NULL_BUFFER,
                    self.at,
                    format!("buffers[{i}] ({what}) is NULL but {required} bytes are required"),
                );
                false
            }
            Some(_) => true,
            None => false,
        }
    }
}

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
    /// Per buffer, the largest size whose first and last byte were found
    /// readable (so a buffer read view by view is probed once).
    probed: Vec<std::cell::Cell<usize>>,
}

impl<'a> Buffers<'a> {
    pub(super) fn new(ptrs: &'a [*const c_void], at: &'a str) -> Self {
        Buffers {
            ptrs,
            at,
            probed: vec![std::cell::Cell::new(0); ptrs.len()],
        }
    }

    /// Checks that non-NULL buffer `i` can hold the `required` bytes the
    /// layout needs, as far as this process can tell without reading it:
    /// its first and last byte must be mapped readable memory
    /// ([`hostmem::unreadable_end`]). A buffer that ends, at the end of a
    /// mapping, before the bytes its layout needs is reported under
    /// array.layout.lengths ("The producer MUST ensure that each contiguous
    /// buffer is large enough to represent length + offset values") instead
    /// of crashing the process that reads it, in process as in a worker.
    fn sized(
        &self,
        i: usize,
        p: *const c_void,
        what: &str,
        required: usize,
        sink: &mut Sink,
    ) -> bool {
        let Some(done) = self.probed.get(i) else {
            return false;
        };
        if required <= done.get() {
            return true;
        }
        match crate::abi::hostmem::unreadable_end(p.addr(), required) {
            None => {
                done.set(required);
                true
            }
            Some(bad) => {
                sink.push(
                    ARRAY_LENGTHS,
                    self.at,
                    format!(
                        "buffers[{i}] ({what}) at {:#x} must hold {required} bytes for offset + length, but byte {} of it (address {bad:#x}) is not readable memory: the buffer is smaller than its layout needs",
                        p.addr(),
                        bad - p.addr()
                    ),
                );
                false
            }
        }
    }

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
        if !self.sized(i, p, what, required, sink) {
            return None;
        }
        if end <= start || end > required {
            return Some(&[]);
        }
        // SAFETY: non-NULL (poison pointers were rejected with the buffers
        // array); the caller vouches for `required` bytes, and
        // start < end <= required <= isize::MAX.
        Some(unsafe { std::slice::from_raw_parts(p.cast::<u8>().add(start), end - start) })
    }

    /// Checks that buffer `i` is non-NULL when it must hold `required`
    /// bytes, and that those bytes are there ([`Self::sized`]).
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
            Some(&p) if !p.is_null() && required > 0 => self.sized(i, p, what, required, sink),
            Some(_) => true,
            None => false,
        }
    }
}

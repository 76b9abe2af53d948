//! Variable-size binary and utf8: offsets in bounds and in order.

use super::*;

impl Node<'_> {
    /// Reads offsets `[offset, end]` of buffer `i` and checks them: first
    /// >= 0, non-decreasing. Returns the slice and the last offset.
    ///
    /// # Safety
    /// Buffer `i`, when non-NULL, holds `end + 1` offsets of `T`.
    pub(super) unsafe fn offsets<'b, T: Int>(
        &self,
        bufs: &'b Buffers<'_>,
        i: usize,
        sink: &mut Sink,
    ) -> Option<(&'b [u8], T)> {
        let (offset, end) = (self.offset, self.end);
        // An empty array (offset + length = 0) needs no offsets at all: the
        // producer may pass NULL (as nanoarrow and Arrow C++ accept).
        let required = if end == 0 {
            0
        } else {
            match bytes_for(end + 1, T::SIZE) {
                Some(r) => r,
                None => {
                    sink.push(
                        ARRAY_LENGTHS,
                        self.at,
                        format!("offset + length = {end} implies an offsets buffer larger than the address space"),
                    );
                    return None;
                }
            }
        };
        // SAFETY: forwarded from the caller.
        let bytes =
            unsafe { bufs.region(i, "offsets", required, offset * T::SIZE, required, sink) }?;
        if bytes.is_empty() {
            return Some((bytes, T::ZERO));
        }
        let first: T = value_at(bytes, 0);
        if first < T::ZERO {
            sink.push(
                ARRAY_OFFSETS_VALID,
                self.at,
                format!("offsets[{offset}] is {first}; offsets must be >= 0"),
            );
            return None;
        }
        // The fuzzing job's planted bug (`--features validator-mutant`):
        // without this check the validator accepts decreasing offsets, and
        // the validate fuzz target must find that it disagrees with arrow-rs.
        #[cfg(not(feature = "validator-mutant"))]
        if let Some(k) = first_unordered::<T, false>(bytes) {
            let prev: T = value_at(bytes, k - 1);
            let cur: T = value_at(bytes, k);
            sink.push(
                ARRAY_OFFSETS_VALID,
                self.at,
                format!(
                    "offsets[{}] = {cur} is less than offsets[{}] = {prev}; offsets must be non-decreasing",
                    offset + k,
                    offset + k - 1
                ),
            );
            return None;
        }
        Some((bytes, value_at(bytes, bytes.len() / T::SIZE - 1)))
    }

    /// # Safety
    /// As for [`Node::offsets`]; buffer 2 holds the bytes the offsets reach.
    pub(super) unsafe fn binary<T: Int>(&self, bufs: &Buffers<'_>, sink: &mut Sink) {
        // SAFETY: forwarded from the caller.
        if let Some((_, last)) = unsafe { self.offsets::<T>(bufs, 1, sink) } {
            let required = usize::try_from(last.to_i64()).unwrap_or(usize::MAX);
            bufs.present(2, "data", required, sink);
        }
    }
}

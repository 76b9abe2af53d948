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
        let Some(required) = bytes_for(end + 1, T::SIZE) else {
            sink.push(
                ARRAY_LENGTHS,
                self.at,
                format!("offset + length = {end} implies an offsets buffer larger than the address space"),
            );
            return None;
        };
        // Columnar.rst: "The offsets buffer contains length + 1 signed
        // integers", so even an empty array's is T::SIZE bytes, and "The
        // buffer pointers MAY be null only in two situations" allows no
        // NULL here. Arrow C++ and nanoarrow import it anyway (arrow-rs
        // refuses it): say so, and read nothing.
        if end == 0 && bufs.ptrs.get(i).is_some_and(|p| p.is_null()) {
            sink.push(
                ARRAY_NULL_BUFFER,
                self.at,
                format!(
                    "buffers[{i}] (offsets) is NULL in an empty array, but the offsets buffer holds length + 1 = 1 entry ({} bytes); some importers (Arrow C++, nanoarrow) tolerate it, others (arrow-rs) refuse it",
                    T::SIZE
                ),
            );
            return Some((&[], T::ZERO));
        }
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

    /// Offsets and data; for utf8 (`utf8` is `Some(validity)`), the
    /// non-null values are UTF-8 too.
    ///
    /// # Safety
    /// As for [`Node::offsets`]; buffer 2 holds the bytes the offsets reach.
    pub(super) unsafe fn binary<T: Int>(
        &self,
        bufs: &Buffers<'_>,
        utf8: Option<Option<(&[u8], usize)>>,
        sink: &mut Sink,
    ) {
        // SAFETY: forwarded from the caller.
        let Some((offsets, last)) = (unsafe { self.offsets::<T>(bufs, 1, sink) }) else {
            return;
        };
        // CDataInterface.rst: each buffer "large enough to represent length
        // + offset values": the data buffer reaches the last of them. With
        // no values (offset + length = 0) it represents nothing, wherever
        // the one offset points: a zero-length slice's offsets[0] may name
        // a position in the buffer it was sliced from (Arrow C++'s full
        // validation accepts it).
        let required = if self.end == 0 {
            0
        } else {
            usize::try_from(last.to_i64()).unwrap_or(usize::MAX)
        };
        if !bufs.present(2, "data", required, sink) || offsets.is_empty() {
            return;
        }
        if let Some(validity) = utf8 {
            // SAFETY: buffer 2 holds the `required` bytes the last offset
            // reaches (the caller's guarantee; non-NULL when that is not 0,
            // checked just above).
            if let Some(data) = unsafe { bufs.region(2, "data", required, 0, required, sink) } {
                self.utf8_values::<T>(offsets, data, validity, sink);
            }
        }
    }
}

//! Lists and list views: offsets, sizes and the child they reach into.

use super::*;

impl Node<'_> {
    /// # Safety
    /// As for [`Node::offsets`].
    pub(super) unsafe fn list<T: Int>(
        &self,
        bufs: &Buffers<'_>,
        child: Option<&Option<ArrayInfo>>,
        sink: &mut Sink,
    ) {
        // SAFETY: forwarded from the caller.
        let Some((bytes, last)) = (unsafe { self.offsets::<T>(bufs, 1, sink) }) else {
            return;
        };
        if bytes.is_empty() {
            return;
        }
        if let Some(Some(c)) = child {
            if last.to_i64() > c.length as i64 {
                sink.push(
                    ARRAY_OFFSETS_VALID,
                    self.at,
                    format!(
                        "the last offset (offsets[{}]) is {last}, beyond the child's length {}",
                        self.end, c.length
                    ),
                );
            }
        }
    }

    /// # Safety
    /// Buffers 1 and 2, when non-NULL, hold `end` offsets / sizes of `T`.
    pub(super) unsafe fn list_view<T: Int>(
        &self,
        bufs: &Buffers<'_>,
        child: Option<&Option<ArrayInfo>>,
        sink: &mut Sink,
    ) {
        let Some(required) = bytes_for(self.end, T::SIZE) else {
            sink.push(
                ARRAY_LENGTHS,
                self.at,
                format!(
                    "offset + length = {} implies buffers larger than the address space",
                    self.end
                ),
            );
            return;
        };
        let (start, at) = (self.offset * T::SIZE, self.at);
        // SAFETY: forwarded from the caller.
        let offsets = unsafe { bufs.region(1, "offsets", required, start, required, sink) };
        // SAFETY: forwarded from the caller.
        let sizes = unsafe { bufs.region(2, "sizes", required, start, required, sink) };
        let (Some(offsets), Some(sizes), Some(Some(child))) = (offsets, sizes, child) else {
            return;
        };
        let child_len = child.length as i64;
        let bad = |o: T, s: T| {
            let (o, s) = (o.to_i64(), s.to_i64());
            (o < 0) | (s < 0) | (o.saturating_add(s) > child_len)
        };
        let n = offsets.len().min(sizes.len()) / T::SIZE;
        let mut i = 0;
        while i < n {
            let stop = (i + BLOCK).min(n);
            let o = offsets.get(i * T::SIZE..stop * T::SIZE).unwrap_or(&[]);
            let s = sizes.get(i * T::SIZE..stop * T::SIZE).unwrap_or(&[]);
            let any_bad = o
                .chunks_exact(T::SIZE)
                .zip(s.chunks_exact(T::SIZE))
                .fold(false, |b, (o, s)| b | bad(T::load(o), T::load(s)));
            if any_bad {
                for k in i..stop {
                    let (ov, sv): (T, T) = (value_at(offsets, k), value_at(sizes, k));
                    if bad(ov, sv) {
                        let slot = self.offset + k;
                        sink.push(
                            ARRAY_OFFSETS_VALID,
                            at,
                            format!(
                                "list view slot {slot}: offset {ov}, size {sv}; need offset >= 0, size >= 0 and offset + size <= child length {child_len}"
                            ),
                        );
                        return;
                    }
                }
            }
            i = stop;
        }
    }
}

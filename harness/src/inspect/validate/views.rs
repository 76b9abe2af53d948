//! Binary and utf8 views: lengths, prefixes, inline padding, variadic
//! buffers, and (utf8 views) values that are UTF-8.

use super::*;

impl Node<'_> {
    /// # Safety
    /// Buffer 1 holds `end` views of 16 bytes, the last buffer the int64
    /// sizes of the variadic buffers, each variadic buffer as many bytes.
    pub(super) unsafe fn views(
        &self,
        bufs: &Buffers<'_>,
        validity: Option<(&[u8], usize)>,
        utf8: bool,
        sink: &mut Sink,
    ) {
        let (offset, end, at) = (self.offset, self.end, self.at);
        let nb = bufs.ptrs.len();
        let n_variadic = nb.saturating_sub(3);
        let Some(required) = bytes_for(end, 16) else {
            sink.push(
                ARRAY_LENGTHS,
                at,
                format!(
                    "offset + length = {end} implies a views buffer larger than the address space"
                ),
            );
            return;
        };
        // SAFETY: forwarded from the caller.
        let Some(views) =
            (unsafe { bufs.region(1, "views", required, offset * 16, required, sink) })
        else {
            return;
        };
        // The non-null views, each as (slot, length, buffer index, offset).
        let live = || {
            views
                .chunks_exact(16)
                .enumerate()
                // Null slots may hold anything.
                .filter(move |(k, _)| validity.is_none_or(|(bits, first)| bit_set(bits, first, *k)))
                .map(move |(k, v)| {
                    let word = |r: std::ops::Range<usize>| i32::load(v.get(r).unwrap_or(&[]));
                    (offset + k, word(0..4), word(8..12), word(12..16), v)
                })
        };
        // First the lengths and buffer indices, which need nothing but the
        // views: a producer that left out the sizes buffer (Columnar's
        // buffer list) shows here, before its last data buffer would be
        // read as sizes.
        for (slot, len, idx, _, _) in live() {
            let problem = if len < 0 {
                format!("length {len} is negative")
            } else if len > 12 && (idx < 0 || idx as usize >= n_variadic) {
                format!(
                    "length {len} (not inline) refers to variadic buffer {idx}, but there are {n_variadic} (n_buffers {nb} less the validity, views and sizes buffers)"
                )
            } else {
                continue;
            };
            sink.push(
                ARRAY_VIEW_SIZES,
                at,
                format!("view at slot {slot}: {problem}"),
            );
            return;
        }
        // The sizes buffer holds one int64 per variadic buffer.
        let sizes_required = n_variadic * 8;
        // SAFETY: forwarded from the caller.
        let Some(size_bytes) = (unsafe {
            bufs.region(
                nb.saturating_sub(1),
                "variadic buffer sizes",
                sizes_required,
                0,
                sizes_required,
                sink,
            )
        }) else {
            return;
        };
        let mut sizes: Vec<i64> = Vec::with_capacity(n_variadic);
        let mut sizes_ok = true;
        for k in 0..n_variadic {
            let size: i64 = value_at(size_bytes, k);
            if size < 0 {
                sink.push(
                    ARRAY_VIEW_SIZES,
                    at,
                    format!(
                        "the size of variadic buffer {k} (buffers[{}]) is {size}, negative",
                        k + 2
                    ),
                );
                sizes_ok = false;
            } else if !bufs.present(k + 2, "variadic data", size as usize, sink) {
                sizes_ok = false;
            }
            sizes.push(size);
        }
        if !sizes_ok {
            return;
        }
        for (slot, len, idx, off, _) in live() {
            if len <= 12 {
                continue;
            }
            // Checked above: 0 <= idx < n_variadic.
            let size = sizes.get(idx as usize).copied().unwrap_or(-1);
            if off < 0 || i64::from(off) + i64::from(len) > size {
                sink.push(
                    ARRAY_VIEW_SIZES,
                    at,
                    format!(
                        "view at slot {slot}: bytes [{off}, {}) of variadic buffer {idx} are outside its {size} bytes",
                        i64::from(off) + i64::from(len)
                    ),
                );
                return;
            }
        }
        // Every view is in bounds: what the views hold. "Any remaining
        // bytes after the string itself are padded with 0" (inline), and
        // "A copy of the first four bytes of the string is stored inline in
        // the prefix" (Columnar.rst, Variable-size Binary View Layout). The
        // first of each is reported.
        let (mut padding, mut prefix) = (false, false);
        for (slot, len, idx, off, v) in live() {
            if len <= 12 && !padding {
                let rest = v.get(4 + len as usize..).unwrap_or(&[]);
                if let Some(k) = rest.iter().position(|&b| b != 0) {
                    sink.push(
                        ARRAY_VIEW_INLINE_PADDING,
                        at,
                        format!(
                            "view at slot {slot}: inline value of {len} bytes, but view byte {} after it is {:#04x}, not 0",
                            4 + len as usize + k,
                            rest[k]
                        ),
                    );
                    padding = true;
                }
            } else if len > 12 && !prefix {
                let (b, start) = (idx as usize + 2, off as usize);
                let size = sizes.get(idx as usize).copied().unwrap_or(0) as usize;
                // SAFETY: buffer b holds `size` bytes (the caller's
                // guarantee, and non-NULL: checked with the sizes), and
                // [off, off + 4) lies inside [off, off + len), which the
                // loop above found within those `size` bytes.
                let data = unsafe { bufs.region(b, "variadic data", size, start, start + 4, sink) };
                let want = v.get(4..8).unwrap_or(&[]);
                if let Some(data) = data.filter(|d| *d != want) {
                    sink.push(
                        ARRAY_VIEW_PREFIX,
                        at,
                        format!(
                            "view at slot {slot}: prefix {want:02x?}, but the value's first bytes (variadic buffer {idx}, offset {off}) are {data:02x?}"
                        ),
                    );
                    prefix = true;
                }
            }
            if padding && prefix {
                break;
            }
        }
        if !utf8 {
            return;
        }
        // The values of a utf8 view: inline bytes, or bytes of a variadic
        // buffer (every view was found in bounds above).
        for (slot, len, idx, off, v) in live() {
            let value = if len <= 12 {
                v.get(4..4 + len as usize).unwrap_or(&[])
            } else {
                let (b, start) = (idx as usize + 2, off as usize);
                let size = sizes.get(idx as usize).copied().unwrap_or(0) as usize;
                // SAFETY: as for the prefix above: buffer b holds `size`
                // bytes and [off, off + len) lies within them.
                let data = unsafe {
                    bufs.region(b, "variadic data", size, start, start + len as usize, sink)
                };
                data.unwrap_or(&[])
            };
            if value.is_ascii() {
                continue;
            }
            if let Some(problem) = values::utf8_view_problem(slot, value) {
                sink.push(ARRAY_UTF8_VALID, at, problem);
                return;
            }
        }
    }
}

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
        if !view_indices(live(), n_variadic, nb, at, sink) {
            return;
        }
        // SAFETY: forwarded from the caller.
        let Some(sizes) = (unsafe { variadic_sizes(bufs, n_variadic, at, sink) }) else {
            return;
        };
        if !views_in_bounds(live(), &sizes, at, sink) {
            return;
        }
        // SAFETY: forwarded from the caller; every view was found in bounds.
        unsafe { view_contents(live(), bufs, &sizes, at, sink) };
        if !utf8 {
            return;
        }
        // SAFETY: as above.
        unsafe { utf8_values(live(), bufs, &sizes, at, sink) };
    }
}

/// A non-null view: its slot, length, buffer index, offset, and its 16
/// bytes.
type View<'v> = (usize, i32, i32, i32, &'v [u8]);

/// The lengths and buffer indices of the views, which need nothing but the
/// views (array.view.sizes): a producer that left out the sizes buffer
/// (Columnar's buffer list) shows here, before its last data buffer would
/// be read as sizes. Reports the first problem; `false` when there is one.
fn view_indices<'v>(
    live: impl Iterator<Item = View<'v>>,
    n_variadic: usize,
    nb: usize,
    at: &str,
    sink: &mut Sink,
) -> bool {
    for (slot, len, idx, _, _) in live {
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
        return false;
    }
    true
}

/// The sizes of the variadic buffers, from the last buffer, which holds
/// one int64 per variadic buffer; `None` (reported) when one is negative
/// or its buffer is missing.
///
/// # Safety
/// The last buffer holds the int64 sizes of the `n_variadic` variadic
/// buffers (buffers 2..), each variadic buffer as many bytes.
unsafe fn variadic_sizes(
    bufs: &Buffers<'_>,
    n_variadic: usize,
    at: &str,
    sink: &mut Sink,
) -> Option<Vec<i64>> {
    let nb = bufs.ptrs.len();
    // The sizes buffer holds one int64 per variadic buffer.
    let sizes_required = n_variadic * 8;
    // SAFETY: forwarded from the caller.
    let size_bytes = (unsafe {
        bufs.region(
            nb.saturating_sub(1),
            "variadic buffer sizes",
            sizes_required,
            0,
            sizes_required,
            sink,
        )
    })?;
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
    sizes_ok.then_some(sizes)
}

/// Every view that is not inline lies inside its variadic buffer
/// (array.view.sizes). Reports the first that does not; `false` then.
fn views_in_bounds<'v>(
    live: impl Iterator<Item = View<'v>>,
    sizes: &[i64],
    at: &str,
    sink: &mut Sink,
) -> bool {
    for (slot, len, idx, off, _) in live {
        if len <= 12 {
            continue;
        }
        // Checked by view_indices: 0 <= idx < n_variadic.
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
            return false;
        }
    }
    true
}

/// What the views hold, once every view is in bounds: inline padding
/// (array.view.inline-padding) and prefixes (array.view.prefix).
///
/// # Safety
/// Each variadic buffer (buffers 2..) holds as many bytes as `sizes` says,
/// and every view that is not inline lies within its buffer.
unsafe fn view_contents<'v>(
    live: impl Iterator<Item = View<'v>>,
    bufs: &Buffers<'_>,
    sizes: &[i64],
    at: &str,
    sink: &mut Sink,
) {
    // Every view is in bounds: what the views hold. "Any remaining
    // bytes after the string itself are padded with 0" (inline), and
    // "A copy of the first four bytes of the string is stored inline in
    // the prefix" (Columnar.rst, Variable-size Binary View Layout). The
    // first of each is reported.
    let (mut padding, mut prefix) = (false, false);
    for (slot, len, idx, off, v) in live {
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
}

/// A utf8 view's values are UTF-8 (array.utf8.valid); the first that is
/// not is reported.
///
/// # Safety
/// As for [`view_contents`].
unsafe fn utf8_values<'v>(
    live: impl Iterator<Item = View<'v>>,
    bufs: &Buffers<'_>,
    sizes: &[i64],
    at: &str,
    sink: &mut Sink,
) {
    // The values of a utf8 view: inline bytes, or bytes of a variadic
    // buffer (every view was found in bounds above).
    for (slot, len, idx, off, v) in live {
        let value = if len <= 12 {
            v.get(4..4 + len as usize).unwrap_or(&[])
        } else {
            let (b, start) = (idx as usize + 2, off as usize);
            let size = sizes.get(idx as usize).copied().unwrap_or(0) as usize;
            // SAFETY: as for the prefix above: buffer b holds `size`
            // bytes and [off, off + len) lies within them.
            let data =
                unsafe { bufs.region(b, "variadic data", size, start, start + len as usize, sink) };
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

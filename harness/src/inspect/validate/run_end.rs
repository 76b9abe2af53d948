//! Run-end encoded arrays: run ends positive, increasing, covering the parent.

use super::*;

impl Node<'_> {
    /// # Safety
    /// The run-ends child's data pointer, when set, may be read for its
    /// offset + length values.
    pub(super) unsafe fn run_ends(&self, kids: &[Option<ArrayInfo>], sink: &mut Sink) {
        let Some(Some(r)) = kids.first() else { return };
        let at = self.at;
        let (max, width) = match r.format {
            Format::Int16 => (i64::from(i16::MAX), 2),
            Format::Int32 => (i64::from(i32::MAX), 4),
            Format::Int64 => (i64::MAX, 8),
            _ => return, // schema.ree.run-ends
        };
        if self.end as i64 > max {
            sink.push(
                ARRAY_REE_RUN_ENDS,
                at,
                format!(
                    "offset + length = {} does not fit the run ends' type (max {max})",
                    self.end
                ),
            );
            return;
        }
        let run_ends_at = format!("{at}.children[0]");
        if r.null_count > 0 {
            sink.push(
                ARRAY_REE_RUN_ENDS,
                &run_ends_at,
                format!(
                    "run ends have null_count {}; run ends cannot be null",
                    r.null_count
                ),
            );
            return;
        }
        if r.length == 0 {
            if self.length > 0 {
                sink.push(
                    ARRAY_REE_RUN_ENDS,
                    at,
                    format!("run_ends is empty but the array has length {}", self.length),
                );
            }
            return;
        }
        let Some(data) = r.data else { return };
        // SAFETY: data was set by check_array only when buffer 1 is non-NULL
        // (or the extent is 0 bytes, and then length is 0, handled above)
        // and holds the child's offset + length values; only those are read.
        let bytes =
            unsafe { std::slice::from_raw_parts(data.add(r.offset * width), r.length * width) };
        if r.null_count == -1 && !r.validity.is_null() {
            // SAFETY: the validity bitmap of a checked child holds its
            // offset + length bits.
            let bits = unsafe {
                std::slice::from_raw_parts(
                    r.validity.add(r.offset / 8),
                    bitmap_bytes(r.offset + r.length) - r.offset / 8,
                )
            };
            let zeros = r.length - count_set_bits(bits, r.offset % 8, r.length);
            if zeros > 0 {
                sink.push(
                    ARRAY_REE_RUN_ENDS,
                    &run_ends_at,
                    format!("run ends have {zeros} null slot(s); run ends cannot be null"),
                );
                return;
            }
        }
        // An empty array reads no run, so its offset needs no run end
        // behind it (arrow-rs checks the coverage only for a non-empty
        // array too; the validate fuzz target found the harness stricter).
        let end = if self.length > 0 { self.end } else { 0 };
        let problem = match r.format {
            Format::Int16 => run_end_problem::<i16>(bytes, end),
            Format::Int32 => run_end_problem::<i32>(bytes, end),
            _ => run_end_problem::<i64>(bytes, end),
        };
        if let Some(p) = problem {
            sink.push(ARRAY_REE_RUN_ENDS, &run_ends_at, p);
        }
    }
}

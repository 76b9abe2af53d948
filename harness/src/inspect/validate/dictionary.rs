//! Dictionary-encoded arrays: indices within the dictionary.

use super::*;

impl Node<'_> {
    /// # Safety
    /// Buffer 1 holds `end` indices of `width` bytes (format `f`).
    pub(super) unsafe fn dictionary_indices(
        &self,
        f: &Format,
        bufs: &Buffers<'_>,
        width: usize,
        validity: Option<(&[u8], usize)>,
        dict: &ArrayInfo,
        sink: &mut Sink,
    ) {
        let required = self.end * width;
        // SAFETY: forwarded from the caller.
        let Some(bytes) =
            (unsafe { bufs.region(1, "indices", required, self.offset * width, required, sink) })
        else {
            return;
        };
        let dict_len = dict.length as i64;
        let found = match f {
            Format::Int8 => first_bad_index::<i8>(bytes, validity, dict_len),
            Format::UInt8 => first_bad_index::<u8>(bytes, validity, dict_len),
            Format::Int16 => first_bad_index::<i16>(bytes, validity, dict_len),
            Format::UInt16 => first_bad_index::<u16>(bytes, validity, dict_len),
            Format::Int32 => first_bad_index::<i32>(bytes, validity, dict_len),
            Format::UInt32 => first_bad_index::<u32>(bytes, validity, dict_len),
            Format::Int64 => first_bad_index::<i64>(bytes, validity, dict_len),
            Format::UInt64 => first_bad_index::<u64>(bytes, validity, dict_len),
            _ => None,
        };
        if let Some((k, value, count)) = found {
            sink.push(
                ARRAY_DICTIONARY_INDICES,
                self.at,
                format!(
                    "index {value} at slot {} is outside [0, {dict_len}) (the dictionary's length); {count} non-null slot(s) are out of range",
                    self.offset + k
                ),
            );
        }
    }
}

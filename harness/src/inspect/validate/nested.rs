//! Struct and fixed-size list children: long enough for their parent.

use super::*;

impl Node<'_> {
    pub(super) fn child_lengths(&self, fmt: &Format, kids: &[Option<ArrayInfo>], sink: &mut Sink) {
        let end = self.end;
        match fmt {
            Format::Struct | Format::Union(UnionMode::Sparse, _) => {
                for (i, k) in kids.iter().enumerate() {
                    if let Some(k) = k {
                        if k.length < end {
                            sink.push(
                                ARRAY_LENGTHS,
                                self.at,
                                format!(
                                    "children[{i}] has length {}, less than offset + length = {end}",
                                    k.length
                                ),
                            );
                        }
                    }
                }
            }
            Format::FixedSizeList(n) => {
                if let Some(Some(k)) = kids.first() {
                    match end.checked_mul(*n as usize) {
                        Some(need) if k.length >= need => {}
                        Some(need) => sink.push(
                            ARRAY_LENGTHS,
                            self.at,
                            format!(
                                "the child has length {}, less than (offset + length) * {n} = {need}",
                                k.length
                            ),
                        ),
                        None => sink.push(
                            ARRAY_LENGTHS,
                            self.at,
                            format!("(offset + length) * {n} = {end} * {n} overflows"),
                        ),
                    }
                }
            }
            Format::RunEndEncoded => {
                if let (Some(Some(r)), Some(Some(v))) = (kids.first(), kids.get(1)) {
                    if r.length > v.length {
                        sink.push(
                            ARRAY_LENGTHS,
                            self.at,
                            format!(
                                "run_ends has length {} but values only {}: every run needs a value",
                                r.length, v.length
                            ),
                        );
                    }
                }
            }
            _ => {}
        }
    }
}

impl Node<'_> {
    /// A map's keys hold no null in the entries its non-null slots reach
    /// (Schema.fbs: "Neither the \"entries\" field nor the \"key\" field
    /// may be nullable"; the entries of null slots may hold anything).
    ///
    /// # Safety
    /// Buffer 1 holds `end + 1` int32 offsets (checked by [`Node::list`]);
    /// the entries' and keys' validity pointers, when set, may be read for
    /// their `offset + length` bits (as check_array sets them).
    pub(super) unsafe fn map_keys(
        &self,
        bufs: &Buffers<'_>,
        validity: Option<(&[u8], usize)>,
        entries: Option<&Option<ArrayInfo>>,
        sink: &mut Sink,
    ) {
        let Some(Some(entries)) = entries else {
            return;
        };
        let Some(Some(keys)) = entries.children.first() else {
            return;
        };
        if keys.validity.is_null() || keys.null_count == 0 {
            return;
        }
        let (offset, end) = (self.offset, self.end);
        let Some(required) = bytes_for(end + 1, 4) else {
            return;
        };
        // SAFETY: forwarded from the caller; a NULL buffer was reported by
        // Node::list and reads as empty here.
        let Some(offsets) =
            (unsafe { bufs.region(1, "offsets", required, offset * 4, required, sink) })
        else {
            return;
        };
        if offsets.is_empty() {
            return;
        }
        // Entry e of the map is key slot keys.offset + entries.offset + e.
        let key_bits = keys.offset + keys.length;
        for k in 0..self.length {
            if validity.is_some_and(|(bits, first)| !bit_set(bits, first, k)) {
                continue;
            }
            let (s, e): (i32, i32) = (value_at(offsets, k), value_at(offsets, k + 1));
            for entry in s.max(0) as usize..e.max(0) as usize {
                let bit = keys.offset + entries.offset + entry;
                if bit >= key_bits {
                    // Beyond the keys: reported as a length problem.
                    return;
                }
                // SAFETY: keys.validity may be read for key_bits bits
                // (check_array), and bit < key_bits.
                let set = unsafe { *keys.validity.add(bit / 8) } >> (bit % 8) & 1 == 1;
                if !set {
                    sink.push(
                        ARRAY_MAP_KEYS_NON_NULL,
                        self.at,
                        format!(
                            "slot {}: entry {entry} of the map's entries has a null key (keys slot {})",
                            offset + k,
                            entries.offset + entry
                        ),
                    );
                    return;
                }
            }
        }
    }
}

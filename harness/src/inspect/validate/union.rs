//! Sparse and dense unions: type ids, offsets and child lengths.

use super::*;

impl Node<'_> {
    /// # Safety
    /// Buffer 0 holds `end` int8 type ids; for dense unions buffer 1 holds
    /// `end` int32 offsets.
    pub(super) unsafe fn union(
        &self,
        mode: UnionMode,
        ids: &[i8],
        bufs: &Buffers<'_>,
        kids: &[Option<ArrayInfo>],
        sink: &mut Sink,
    ) {
        let (offset, end, at) = (self.offset, self.end, self.at);
        // Type id -> child index, -1 for undeclared ids.
        let mut map = [-1i16; 256];
        if ids.is_empty() {
            for (i, slot) in map.iter_mut().take(kids.len().min(128)).enumerate() {
                *slot = i as i16;
            }
        } else {
            for (i, &id) in ids.iter().enumerate() {
                map[id as u8 as usize] = i as i16;
            }
        }
        // SAFETY: forwarded from the caller.
        let Some(type_ids) = (unsafe { bufs.region(0, "type ids", end, offset, end, sink) }) else {
            return;
        };
        let any_bad = type_ids
            .chunks(BLOCK)
            .any(|c| c.iter().fold(false, |b, &t| b | (map[t as usize] < 0)));
        if any_bad {
            let count = type_ids.iter().filter(|&&t| map[t as usize] < 0).count();
            if let Some(k) = type_ids.iter().position(|&t| map[t as usize] < 0) {
                let declared: Vec<String> = if ids.is_empty() {
                    (0..kids.len().min(128)).map(|i| i.to_string()).collect()
                } else {
                    ids.iter().map(|i| i.to_string()).collect()
                };
                sink.push(
                    ARRAY_UNION_TYPE_IDS,
                    at,
                    format!(
                        "type id {} at slot {} is not declared (declared: [{}]); {count} slot(s) in [{offset}, {end}) have undeclared ids",
                        type_ids[k] as i8,
                        offset + k,
                        declared.join(",")
                    ),
                );
            }
        }
        if mode == UnionMode::Sparse {
            return;
        }
        let Some(required) = bytes_for(end, 4) else {
            sink.push(
                ARRAY_LENGTHS,
                at,
                format!("offset + length = {end} implies an offsets buffer larger than the address space"),
            );
            return;
        };
        // SAFETY: forwarded from the caller.
        let Some(offsets) =
            (unsafe { bufs.region(1, "offsets", required, offset * 4, required, sink) })
        else {
            return;
        };
        // Child lengths by child index; -1 where unknown (not checked).
        let mut lens = [-1i64; 128];
        for (i, k) in kids.iter().enumerate().take(128) {
            if let Some(k) = k {
                lens[i] = k.length as i64;
            }
        }
        let bad = |t: u8, o: i32| {
            let child = map[t as usize];
            if child < 0 {
                return false; // reported above
            }
            let len = lens[child as usize & 127];
            len >= 0 && (o < 0 || i64::from(o) >= len)
        };
        for (k, (&t, o)) in type_ids.iter().zip(offsets.chunks_exact(4)).enumerate() {
            let o = i32::load(o);
            if bad(t, o) {
                let child = map[t as usize];
                sink.push(
                    ARRAY_OFFSETS_VALID,
                    at,
                    format!(
                        "dense union slot {}: offset {o} into children[{child}] (type id {}) is outside [0, {})",
                        offset + k,
                        t as i8,
                        lens[child as usize & 127]
                    ),
                );
                return;
            }
        }
        // Columnar.rst: "The respective offsets for each child value array
        // must be in order / increasing." Read as non-decreasing: equal
        // offsets (two slots sharing a child value) are not reported.
        let mut last = [i32::MIN; 128];
        let mut previous_slot = [0usize; 128];
        for (k, (&t, o)) in type_ids.iter().zip(offsets.chunks_exact(4)).enumerate() {
            let child = map[t as usize];
            if child < 0 {
                continue;
            }
            let c = child as usize & 127;
            let o = i32::load(o);
            if o < last[c] {
                sink.push(
                    ARRAY_UNION_OFFSETS_ORDERED,
                    at,
                    format!(
                        "dense union slot {}: offset {o} into children[{child}] (type id {}) is less than {} at slot {}, an earlier slot of the same child; each child's offsets must be in order / increasing",
                        offset + k,
                        t as i8,
                        last[c],
                        offset + previous_slot[c]
                    ),
                );
                return;
            }
            last[c] = o;
            previous_slot[c] = k;
        }
    }
}

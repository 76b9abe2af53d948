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

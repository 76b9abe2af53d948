//! Slices of a whole stream (`producer/<stream path>/<scenario>/slice:O+L`):
//! which ones a scenario gets, what the producer is asked, and what it must
//! give back.
//!
//! A slice here is the one a data frame or a table library takes: rows
//! `O..O+L` of the table the stream's batches make, counted across batch
//! boundaries (pyarrow's `Table.slice`, polars' `DataFrame.slice`, SQL's
//! `LIMIT L OFFSET O`), asked of the optional sliced entry points
//! (docs/PLUGIN_ABI.md, "Slices of a stream"). The values are judged as a
//! whole stream's are, against the same rows of the scenario.

#![forbid(unsafe_code)]

use arrow_array::RecordBatch;

use super::{CaseSpec, Path};
use crate::scenario::Scenario;

/// The table slice a case asks for: a stream path's case with a slice and
/// no batch.
pub fn of(spec: &CaseSpec) -> Option<(usize, usize)> {
    let stream_path = matches!(
        spec.path,
        Path::Stream | Path::DeviceStream | Path::Async(_)
    );
    match (stream_path, spec.batch, spec.slice) {
        (true, None, Some(slice)) => Some(slice),
        _ => None,
    }
}

/// The slices every scenario gets on the stream paths, deduplicated, in
/// this order: an empty one (mid-table), one at the start, one in the
/// middle that crosses the first boundary between two non-empty batches
/// (within the table when there is no such boundary), one that runs to the
/// end (asked for with length -1, see [`call_args`]).
pub fn planned(scenario: &Scenario) -> Vec<(usize, usize)> {
    let rows: Vec<usize> = scenario.batches.iter().map(|b| b.num_rows()).collect();
    let total: usize = rows.iter().sum();
    let first = rows.iter().copied().find(|&r| r > 0).unwrap_or(0);
    let mut out = vec![(total / 2, 0), (0, first.div_ceil(2).min(total))];
    out.push(crossing(&rows, total).unwrap_or_else(|| {
        let (o, l) = crate::roundtrip::slice_of(total);
        (o, l.max(1).min(total - o))
    }));
    out.push((total / 2, total - total / 2));
    let mut seen = Vec::new();
    out.retain(|s| {
        let fresh = !seen.contains(s);
        seen.push(*s);
        fresh
    });
    out
}

/// A slice over the first boundary between two non-empty batches: the last
/// third of the one before it and the first third of the one after it (at
/// least a row of each).
fn crossing(rows: &[usize], total: usize) -> Option<(usize, usize)> {
    let mut at = 0;
    let mut left: Option<usize> = None;
    for &r in rows {
        if r == 0 {
            continue;
        }
        if let Some(l) = left {
            let offset = at - (l / 3).max(1);
            let end = (at + (r / 3).max(1)).min(total);
            return Some((offset, end - offset));
        }
        at += r;
        left = Some(r);
    }
    None
}

/// The (offset, length) the producer is called with: a slice that reaches
/// the table's end is asked for with length -1 ("to the end"), as the
/// array entry points' slices are.
pub fn call_args(scenario: &Scenario, (offset, length): (usize, usize)) -> (i64, i64) {
    let total: usize = scenario.batches.iter().map(|b| b.num_rows()).sum();
    let length = if offset + length == total {
        -1
    } else {
        length as i64
    };
    (offset as i64, length)
}

/// The scenario as the sliced stream must hold it: every batch cut to the
/// rows of the slice that lie in it (empty where none do, so that a
/// producer that keeps its batches as they are is read to its end; the
/// comparison ignores batch boundaries). The IPC bytes stay the whole
/// stream's: that is what the producer is given.
pub fn expected(scenario: &Scenario, (offset, length): (usize, usize)) -> Scenario {
    let (start, end) = (offset, offset + length);
    let mut at = 0;
    let batches: Vec<RecordBatch> = scenario
        .batches
        .iter()
        .map(|b| {
            let n = b.num_rows();
            let from = start.clamp(at, at + n);
            let to = end.clamp(from, at + n);
            at += n;
            b.slice(from - (at - n), to - from)
        })
        .collect();
    Scenario {
        batches,
        ..scenario.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(s: &Scenario) -> Vec<usize> {
        s.batches.iter().map(|b| b.num_rows()).collect()
    }

    #[test]
    fn every_built_in_scenario_gets_its_slices_in_range() {
        for s in crate::scenario::builtin() {
            let total: usize = rows(&s).iter().sum();
            let slices = planned(&s);
            assert!(!slices.is_empty(), "{}", s.name);
            for &(o, l) in &slices {
                assert!(o + l <= total, "{}: {o}+{l} of {total}", s.name);
                let e = expected(&s, (o, l));
                assert_eq!(rows(&e).iter().sum::<usize>(), l, "{}", s.name);
                assert_eq!(e.batches.len(), s.batches.len());
            }
            // The last one runs to the end and is asked for with -1.
            let last = *slices.last().unwrap();
            assert_eq!(call_args(&s, last).1, -1, "{}", s.name);
        }
    }

    #[test]
    fn a_slice_crosses_the_first_batch_boundary() {
        assert_eq!(crossing(&[0, 6, 0, 9], 15), Some((4, 5)));
        assert_eq!(crossing(&[1, 1], 2), Some((0, 2)));
        assert_eq!(crossing(&[7], 7), None);
        assert_eq!(crossing(&[], 0), None);
    }
}

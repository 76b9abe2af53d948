//! Shrinking a failing generated scenario: proptest's loop (simplify while
//! the failure reproduces, complicate when it stops), recording the walk so
//! the smallest failing scenario has a name (`gen/<i>@<walk>`) that
//! rebuilds it.

use std::time::{Duration, Instant};

use super::{build, name, tree};
use crate::scenario::Scenario;

/// Bounds on one shrink.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    /// Candidates tried at most.
    pub candidates: usize,
    /// Time spent at most.
    pub time: Duration,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            candidates: 1000,
            time: Duration::from_secs(30),
        }
    }
}

/// Where a shrink ended.
#[derive(Debug, Clone)]
pub struct Shrunk {
    /// The smallest failing scenario's name (the original's when nothing
    /// smaller failed).
    pub name: String,
    /// Candidates tried.
    pub tried: usize,
    /// Candidates that still failed (each one a step down).
    pub steps: usize,
    /// The budget ran out before the walk ended.
    pub exhausted: bool,
}

/// Shrinks generated scenario `index` of a run seeded `seed`. `fails` runs
/// a candidate and says whether the failure being shrunk reproduces on it.
/// Candidates that cannot be built count as not failing.
pub fn shrink(
    seed: u64,
    index: u64,
    budget: Budget,
    mut fails: impl FnMut(&Scenario) -> bool,
) -> Result<Shrunk, String> {
    let start = Instant::now();
    // The bottom of the walk first: a failure that does not depend on the
    // data (an injected error, a rule every scenario breaks) reproduces on
    // the smallest scenario, which the loop below would reach only one
    // step per candidate (hundreds of candidates, each a crash and a
    // worker restart when the failure is a crash).
    let (bottom, bottom_spec) = bottom(seed, index)?;
    if !bottom.is_empty() && budget.candidates > 0 {
        let failed = match build(&name(index, &bottom), &bottom_spec) {
            Ok(candidate) => fails(&candidate),
            Err(_) => false,
        };
        if failed {
            return Ok(Shrunk {
                name: name(index, &bottom),
                tried: 1,
                steps: 1,
                exhausted: false,
            });
        }
    }
    let mut t = tree(seed, index)?;
    let mut walk: Vec<bool> = Vec::new();
    let mut best = 0usize;
    let (mut tried, mut steps) = (usize::from(!bottom.is_empty() && budget.candidates > 0), 0);
    let mut exhausted = false;
    if t.simplify() {
        walk.push(true);
        loop {
            if tried >= budget.candidates || start.elapsed() >= budget.time {
                exhausted = true;
                break;
            }
            tried += 1;
            let failed = match build(&name(index, &walk), &t.current()) {
                Ok(candidate) => fails(&candidate),
                Err(_) => false,
            };
            if failed {
                best = walk.len();
                steps += 1;
                if !t.simplify() {
                    break;
                }
                walk.push(true);
            } else {
                if !t.complicate() {
                    break;
                }
                walk.push(false);
            }
        }
    }
    walk.truncate(best);
    Ok(Shrunk {
        name: name(index, &walk),
        tried,
        steps,
        exhausted,
    })
}

/// Simplify steps at most on the way to the bottom (proptest's trees end
/// well before: a binary search per number, a removal per element).
const BOTTOM_STEPS: usize = 100_000;

/// The walk that only simplifies, until the tree can simplify no further,
/// and the spec it ends at.
fn bottom(seed: u64, index: u64) -> Result<(Vec<bool>, super::Spec), String> {
    let mut t = tree(seed, index)?;
    let mut n = 0;
    while n < BOTTOM_STEPS && t.simplify() {
        n += 1;
    }
    Ok((vec![true; n], t.current()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_schema::DataType;

    fn has_list(s: &Scenario) -> bool {
        s.schema
            .fields()
            .iter()
            .any(|f| matches!(f.data_type(), DataType::List(_)))
    }

    /// A failure that needs a list column shrinks to one column, the list,
    /// with few rows; the shrunk name rebuilds exactly that scenario.
    #[test]
    fn shrinks_to_a_small_scenario_that_still_fails() {
        let seed = 5;
        let index = (0..500)
            .find(|&i| {
                let s = super::super::scenario(seed, &name(i, &[])).unwrap();
                has_list(&s) && s.schema.fields().len() > 1
            })
            .expect("some scenario has a list among other columns");
        let out = shrink(seed, index, Budget::default(), has_list).unwrap();
        assert!(out.steps > 0, "{out:?}");
        let small = super::super::scenario(seed, &out.name).unwrap();
        assert!(has_list(&small), "{}", super::super::describe(&small));
        assert_eq!(
            small.schema.fields().len(),
            1,
            "{}",
            super::super::describe(&small)
        );
        assert!(
            small.batches.iter().all(|b| b.num_rows() <= 1),
            "{out:?} {}",
            super::super::describe(&small)
        );
    }

    /// A failure every scenario has ends at the bottom in one candidate
    /// (the step-by-step walk took hundreds: one per simplify step).
    #[test]
    fn a_failure_of_every_scenario_shrinks_in_one_candidate() {
        let out = shrink(5, 3, Budget::default(), |_| true).unwrap();
        assert_eq!(
            (out.tried, out.steps, out.exhausted),
            (1, 1, false),
            "{out:?}"
        );
        let (_, walk) = super::super::parse_name(&out.name).unwrap();
        assert!(walk.len() > 10 && walk.iter().all(|&s| s), "{out:?}");
        let small = super::super::scenario(5, &out.name).unwrap();
        assert!(
            small.schema.fields().len() <= 1 && small.batches.iter().all(|b| b.num_rows() <= 1),
            "{}",
            super::super::describe(&small)
        );
    }

    #[test]
    fn a_failure_that_never_reproduces_keeps_the_original() {
        let out = shrink(5, 0, Budget::default(), |_| false).unwrap();
        assert_eq!(out.name, "gen/0");
        assert_eq!(out.steps, 0);
    }
}

//! Leak accounting for the `*.release.frees` rules.
//!
//! A leak verdict must never be a false positive: allocators keep caches,
//! libraries initialise statics lazily or keep bounded caches that they
//! empty every so many calls, the harness itself allocates. So the same
//! export-and-release sequence runs [`WARMUP`] times unmeasured, then
//! [`MEASURED`] times with the bytes held read before and after each run,
//! and a leak is suspected only when *every* measured repetition left more
//! bytes held than before it. A clean library pays for this round only.
//!
//! A suspicion is then put to a horizon a cache cannot fake: [`LONG`]
//! rounds of geometrically growing length (16, 32, then 64 more
//! repetitions), the bytes held read at the end of each. A leak keeps
//! growing at its rate: each round must grow by at least half the smallest
//! growth of a short-round repetition times its length ([`linear`]).
//! A cache emptied every P calls adds at most P entries in any round, so
//! its rate over the long rounds falls far below that; a plateau or a drop
//! is a cache, reported at INFO (`array.release.cache`) with the most it
//! held, never a failure. A cache emptied every 109 calls or fewer, from
//! any phase, is never taken for a leak (`a_periodic_cache_is_never_a_leak`;
//! a period of 110 emptied just after the short round can be). Everything the harness
//! allocates inside a repetition is dropped before the repetition ends, so
//! its own share nets to zero.
//!
//! The tracker counts every thread's bytes, so a long round can also see
//! memory of something else freed (a library's background thread, a buffer
//! made before the measurement): a drop larger than everything the
//! measurement's own repetitions had added cannot be this sequence's cache
//! emptying. A long-round verdict spoiled that way is measured again from
//! the start, up to [`RETRIES`] times ([`Measurement::foreign`] keeps the
//! drops); each measurement stands on its own, so the bound above holds
//! for a retry as for the first (`a_foreign_free_does_not_hide_a_leak`).
//! The same free can interrupt the short round: one where some
//! repetitions grew but not all, and either most did or another dropped,
//! is measured again too, within the same [`RETRIES`] (`uneven`).
//!
//! Bytes held are read from the allocation tracker preloaded into worker
//! processes ([`crate::plugin::tracker`]) and from the plugin's optional
//! `arrowcert_bytes_allocated` (a second opinion, and the only one in
//! `--in-process` runs). With neither, the rule is not exercised, with the
//! reason.

use crate::plugin::{tracker, Plugin};

/// Unmeasured repetitions first (caches, lazy statics, allocator warm-up).
pub const WARMUP: usize = 2;
/// Measured repetitions per round; all of them must grow for a leak verdict.
pub const MEASURED: usize = 3;
/// The lengths of the long rounds run when the short one suggests a leak.
pub const LONG: [usize; 3] = [16, 32, 64];
/// Measurements taken again, at most, when one was spoiled by memory of
/// something else ([`Measurement::foreign`], [`Measurement::uneven`]).
pub const RETRIES: usize = 3;
/// Every round of a leak grows by at least this share of the short round's
/// smallest growth per repetition, times its length.
pub const LINEAR_SHARE: f64 = 0.5;

/// Why a frees rule is not measured on a mixed generated scenario or a
/// column split by default ([`measured`]).
pub const NOT_MEASURED: &str = "not measured on this scenario: the release.frees rules are \
     measured on a covering choice of scenarios (every built-in, gold, single-type and shape \
     scenario: each type on each path), not on the mixed generated ones (gen/N) nor on \
     column splits (~col:N, the retries that reach the types a refusal hid, each type measured \
     on its single-type scenario); --all-leaks measures every scenario";

/// Whether the `*.release.frees` rules are measured on `scenario` (its
/// name). Each measurement repeats the export five times or more, which a
/// library whose export runs a query pays for in full: by default they are
/// measured on every scenario but the mixed generated ones (`gen/N`, their
/// shrink candidates) and the column splits (`...~col:N`: one column of a
/// scenario the library refused whole, its type measured on its own
/// single-type scenario `gen/type:...`), which still leaves every type the
/// generator knows measured on every path. The splits of the shapes were
/// half of a DuckDB producer's time: the extension-storage shape alone
/// splits into one scenario per storage type. `all` (`--all-leaks`):
/// every scenario.
pub fn measured(scenario: &str, all: bool) -> bool {
    let mixed = scenario
        .strip_prefix("gen/")
        .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()));
    let split = scenario.contains(crate::generate::COLUMN_MARK);
    all || !(mixed || split)
}

/// Why a frees rule is not exercised when nothing counts bytes.
pub const NO_COUNTER: &str = "nothing counts the bytes this process holds: the allocation \
     tracker is not loaded (worker processes preload it unless ARROWCERT_TRACKER=off; \
     --in-process runs have none) and the producer exports no arrowcert_bytes_allocated";

/// A count of bytes held, read before and after each repetition.
pub struct Counter<'a> {
    /// How evidence names it.
    pub name: &'static str,
    read: Box<dyn Fn() -> Option<i64> + 'a>,
}

impl<'a> Counter<'a> {
    pub fn new(name: &'static str, read: impl Fn() -> Option<i64> + 'a) -> Self {
        Counter {
            name,
            read: Box::new(read),
        }
    }
}

/// The tracker's count of net bytes in malloc'd blocks (every thread).
pub const TRACKER: &str = "the allocation tracker (net bytes malloc'd by every thread)";
/// The plugin's own count.
pub const PLUGIN: &str = "the producer's arrowcert_bytes_allocated";

/// The counters available in this process for `producer`.
pub fn counters(producer: &Plugin) -> Vec<Counter<'_>> {
    let mut out = Vec::new();
    if tracker::present() {
        out.push(Counter::new(TRACKER, tracker::live_bytes));
    }
    if producer.bytes_allocated().is_some() {
        out.push(Counter::new(PLUGIN, move || producer.bytes_allocated()));
    }
    out
}

/// The device backend's count of bytes allocated on the device.
pub const DEVICE: &str = "the device backend's count of device bytes allocated";

/// [`counters`], plus the device's own count when the case runs on a
/// device other than the CPU.
pub fn counters_on(producer: &Plugin, kind: crate::device::Kind) -> Vec<Counter<'_>> {
    let mut out = counters(producer);
    if kind != crate::device::Kind::Cpu {
        if let Ok(dev) = crate::device::backend(kind) {
            if dev.live_bytes().is_some() {
                out.push(Counter::new(DEVICE, move || dev.live_bytes()));
            }
        }
    }
    out
}

/// At most this many counters are read per repetition.
const MAX_COUNTERS: usize = 4;

/// Growth per measured repetition, per counter, and, when that suggested a
/// leak, growth over each of the [`LONG`] rounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Measurement {
    pub series: Vec<(&'static str, Vec<i64>)>,
    pub long: Option<Vec<(&'static str, Vec<i64>)>>,
    /// Drops of earlier measurements of this sequence, each larger than
    /// what their repetitions had added (memory of something else freed),
    /// that had this one taken again.
    pub foreign: Vec<i64>,
    /// Short rounds of earlier measurements where most repetitions grew
    /// but not all (one interrupted by something else's free), that had
    /// this one taken again.
    pub uneven: Vec<Vec<i64>>,
}

/// True when every repetition left more bytes held than before it.
pub fn consistent_growth(growth: &[i64]) -> bool {
    !growth.is_empty() && growth.iter().all(|&g| g > 0)
}

/// True when the long rounds' growth (`long`, one per [`LONG`] round) goes
/// on at the rate of the short round's (`short`, per repetition): every
/// round grew by at least [`LINEAR_SHARE`] of the short round's smallest
/// growth per repetition times its length. A bounded cache cannot: over a
/// round longer than its period it adds at most one period's entries.
pub fn linear(short: &[i64], long: &[i64]) -> bool {
    consistent_growth(short) && long.len() == LONG.len() && steady(short, long)
}

fn suspects(series: &[(&'static str, Vec<i64>)]) -> bool {
    series.iter().any(|(_, g)| consistent_growth(g))
}

/// The first short round a free of something else may have interrupted:
/// not every repetition grew, but some did, and either most of them did
/// (and their sum did), or some repetition dropped (a repetition of this
/// sequence alone nets zero or grows; a drop is memory of something else
/// freed). A leak whose round such a free interrupted looks so
/// (duckdb-adbc's 400 bytes per schema export passed once in 6 runs, and
/// twice in 10 when its background frees were larger than a repetition's
/// growth); a clean sequence hardly ever grows at all.
fn uneven(series: &[(&'static str, Vec<i64>)]) -> Option<Vec<i64>> {
    series
        .iter()
        .find(|(_, g)| {
            let grew = g.iter().filter(|&&d| d > 0).count();
            let dropped = g.iter().any(|&d| d < 0);
            !consistent_growth(g)
                && grew > 0
                && (dropped || (2 * grew > g.len() && g.iter().sum::<i64>() > 0))
        })
        .map(|(_, g)| g.clone())
}

fn list(g: &[i64]) -> String {
    g.iter()
        .map(|b| b.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

impl Measurement {
    /// The first long-round drop, of a counter the short round suspected,
    /// larger than every byte the measured repetitions had added before it
    /// (the short round's growth and the long rounds' before it): memory
    /// that was held before the measurement began, freed by something
    /// else, so it says nothing of this sequence. `None` when the verdict
    /// is a leak or no such drop happened.
    pub fn foreign_drop(&self) -> Option<i64> {
        if self.leaks() {
            return None;
        }
        let long = self.long.as_ref()?;
        self.series
            .iter()
            .zip(long)
            .filter(|((_, a), _)| consistent_growth(a))
            .find_map(|((_, a), (_, b))| {
                let mut added: i64 = a.iter().filter(|&&g| g > 0).sum();
                for &d in b {
                    if d < 0 && -d > added {
                        return Some(d);
                    }
                    added += d.max(0);
                }
                None
            })
    }

    /// True when some counter grew in every measured repetition and went
    /// on growing at that rate over every long round.
    pub fn leaks(&self) -> bool {
        match &self.long {
            None => false,
            Some(long) => self
                .series
                .iter()
                .zip(long)
                .any(|((_, a), (_, b))| linear(a, b)),
        }
    }

    /// When the short round suggested a leak and the long rounds showed a
    /// plateau or a drop: the counter and the most bytes it held above
    /// where the measured repetitions began (the cache's size).
    pub fn cache(&self) -> Option<(&'static str, i64)> {
        if self.leaks() {
            return None;
        }
        let long = self.long.as_ref()?;
        self.series
            .iter()
            .zip(long)
            .filter(|((_, a), _)| consistent_growth(a))
            .map(|((name, a), (_, b))| {
                let mut held: i64 = a.iter().sum();
                let mut most = held;
                for d in b {
                    held += d;
                    most = most.max(held);
                }
                (*name, most)
            })
            .max_by_key(|(_, most)| *most)
    }

    /// The INFO evidence for [`Measurement::cache`].
    pub fn cache_evidence(&self, sequence: &str) -> Option<String> {
        let (name, most) = self.cache()?;
        let (short, long) = self
            .series
            .iter()
            .zip(self.long.as_deref().unwrap_or(&[]))
            .find(|((n, _), _)| *n == name)
            .map(|((_, a), (_, b))| (a.clone(), b.clone()))?;
        Some(format!(
            "{sequence}: {name} grew in every measured repetition ({} bytes), then by {} \
             bytes over {} more: not a leak's steady growth; a cache or pool that held \
             up to {most} bytes{}",
            list(&short),
            list(&long),
            LONG[..long.len()]
                .iter()
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
                .join(", then "),
            self.foreign_note()
        ))
    }

    /// Says which earlier measurements were spoiled, if any.
    fn foreign_note(&self) -> String {
        let mut why = Vec::new();
        if !self.foreign.is_empty() {
            why.push(format!(
                "a long round dropped by {} bytes, more than its repetitions had added, \
                 memory of something else freed",
                list(&self.foreign.iter().map(|d| -d).collect::<Vec<_>>())
            ));
        }
        for g in &self.uneven {
            why.push(format!(
                "a short round grew in some repetitions but not all ({} bytes)",
                list(g)
            ));
        }
        if why.is_empty() {
            return String::new();
        }
        format!(
            " (measured {} time(s) more: {})",
            self.foreign.len() + self.uneven.len(),
            why.join("; ")
        )
    }

    /// The evidence line: bytes held after each measured repetition, per
    /// counter, then the growth over each long round.
    pub fn evidence(&self, sequence: &str) -> String {
        let rounds = self.long.as_deref().unwrap_or(&[]);
        let counts = self
            .series
            .iter()
            .enumerate()
            .map(|(i, (name, g))| match rounds.get(i) {
                Some((_, c)) => format!(
                    "{name}: {} bytes per repetition, then {} bytes over the long rounds",
                    list(g),
                    list(c)
                ),
                None => format!("{name}: {} bytes per repetition", list(g)),
            })
            .collect::<Vec<_>>()
            .join("; ");
        let long: usize = LONG.iter().sum();
        format!(
            "{sequence} repeated {} times: every measured repetition left more bytes held \
             than before it ({MEASURED} after {WARMUP} unmeasured), and the bytes held went on \
             growing at that rate over {long} more ({}) ({counts}){}",
            WARMUP + MEASURED + long,
            LONG.iter()
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
                .join(", then "),
            self.foreign_note()
        )
    }
}

/// Runs `body` [`WARMUP`] + [`MEASURED`] times and returns the growth of
/// every counter over each measured run; when that suggests a leak, runs
/// the [`LONG`] rounds too. `body` must leave nothing of the harness's
/// allocated when it returns (drop everything it made). An `Err` from
/// `body` stops the measurement (nothing is concluded).
pub fn measure(
    counters: &[Counter<'_>],
    mut body: impl FnMut() -> Result<(), String>,
) -> Result<Measurement, String> {
    assert!(
        !counters.is_empty() && counters.len() <= MAX_COUNTERS,
        "1 to {MAX_COUNTERS} counters"
    );
    let mut foreign = Vec::new();
    let mut uneven_rounds = Vec::new();
    loop {
        let series = round(counters, WARMUP, &mut body)?;
        let long = if suspects(&series) {
            Some(long_rounds(counters, &series, &mut body)?)
        } else {
            None
        };
        let m = Measurement {
            series,
            long,
            foreign: foreign.clone(),
            uneven: uneven_rounds.clone(),
        };
        if foreign.len() + uneven_rounds.len() >= RETRIES {
            return Ok(m);
        }
        if let Some(d) = m.foreign_drop() {
            foreign.push(d);
        } else if let Some(g) = m.long.is_none().then(|| uneven(&m.series)).flatten() {
            uneven_rounds.push(g);
        } else {
            return Ok(m);
        }
    }
}

/// Reads every counter into an array on the stack (nothing is allocated
/// between the first read and the last).
fn read_all(counters: &[Counter<'_>]) -> [Option<i64>; MAX_COUNTERS] {
    let mut out = [None; MAX_COUNTERS];
    for (slot, c) in out.iter_mut().zip(counters) {
        *slot = (c.read)();
    }
    out
}

/// `warmup` unmeasured runs of `body`, then [`MEASURED`] measured ones.
fn round(
    counters: &[Counter<'_>],
    warmup: usize,
    body: &mut impl FnMut() -> Result<(), String>,
) -> Result<Vec<(&'static str, Vec<i64>)>, String> {
    for _ in 0..warmup {
        body()?;
    }
    let mut series: Vec<(&'static str, Vec<i64>)> = counters
        .iter()
        .map(|c| (c.name, Vec::with_capacity(MEASURED)))
        .collect();
    for _ in 0..MEASURED {
        let before = read_all(counters);
        body()?;
        let after = read_all(counters);
        push_growth(&mut series, &before, &after)?;
    }
    Ok(series)
}

/// The [`LONG`] rounds: the growth of every counter over each. They stop
/// early once no counter the short round (`short`) suspected can still be
/// a leak: a round that grew less than a leak's rate settles it.
fn long_rounds(
    counters: &[Counter<'_>],
    short: &[(&'static str, Vec<i64>)],
    body: &mut impl FnMut() -> Result<(), String>,
) -> Result<Vec<(&'static str, Vec<i64>)>, String> {
    let mut series: Vec<(&'static str, Vec<i64>)> = counters
        .iter()
        .map(|c| (c.name, Vec::with_capacity(LONG.len())))
        .collect();
    let mut before = read_all(counters);
    for n in LONG {
        for _ in 0..n {
            body()?;
        }
        let after = read_all(counters);
        push_growth(&mut series, &before, &after)?;
        before = after;
        let open = short
            .iter()
            .zip(&series)
            .any(|((_, a), (_, b))| consistent_growth(a) && steady(a, b));
        if !open {
            break;
        }
    }
    Ok(series)
}

/// True when every long round so far (`long`, a prefix of [`LONG`]'s)
/// grew at least at the rate a leak of the short round's smallest growth
/// per repetition (`short`) would. The smallest, not the median: a leak's
/// repetitions sometimes allocate more besides (a block of a pool, the
/// allocator's own), and a short round of 400, 1224, 1224 bytes over a
/// leak of 400 per call held the long rounds to the 1224 (duckdb-adbc, a
/// pass in 1 run of 3).
fn steady(short: &[i64], long: &[i64]) -> bool {
    let Some(&rate) = short.iter().min() else {
        return false;
    };
    long.iter()
        .zip(LONG)
        .all(|(&d, n)| d > 0 && d as f64 >= LINEAR_SHARE * rate as f64 * n as f64)
}

fn push_growth(
    series: &mut [(&'static str, Vec<i64>)],
    before: &[Option<i64>; MAX_COUNTERS],
    after: &[Option<i64>; MAX_COUNTERS],
) -> Result<(), String> {
    for (i, (name, growth)) in series.iter_mut().enumerate() {
        match (before[i], after[i]) {
            (Some(b), Some(a)) => growth.push(a.wrapping_sub(b)),
            _ => return Err(format!("{name} could not be read")),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_scenario_but_the_mixed_generated_ones_and_the_splits_is_measured() {
        for name in [
            "primitive",
            "gold/generated_primitive",
            "gen/type:int32",
            "gen/type:list@s1c2",
            "gen/shape:nested-metadata",
        ] {
            assert!(super::measured(name, false), "{name}");
        }
        for name in [
            "gen/0",
            "gen/17~col:2",
            "gen/3@s1c1",
            "gen/shape:extension-storage~col:9",
            "gold/generated_nested~col:1",
        ] {
            assert!(!super::measured(name, false), "{name}");
            assert!(super::measured(name, true), "{name}");
        }
    }

    use super::*;
    use std::cell::{Cell, RefCell};

    /// A stand-in for the tracker: a counter the test bodies move.
    fn fake(held: &Cell<i64>) -> Vec<Counter<'_>> {
        vec![Counter::new(TRACKER, move || Some(held.get()))]
    }

    #[test]
    fn a_sequence_that_leaks_every_time_is_a_leak() {
        let held = Cell::new(0);
        let m = measure(&fake(&held), || {
            held.set(held.get() + 48);
            Ok(())
        })
        .unwrap();
        assert!(m.leaks());
        assert_eq!(m.cache(), None);
        assert_eq!(m.series[0].1, vec![48; MEASURED]);
        assert_eq!(
            m.long.as_ref().unwrap()[0].1,
            vec![16 * 48, 32 * 48, 64 * 48]
        );
        let e = m.evidence("export and release");
        assert!(e.contains("48, 48, 48 bytes per repetition"), "{e}");
        assert!(e.contains("repeated 117 times"), "{e}");
    }

    #[test]
    fn a_leak_of_a_few_bytes_per_call_is_a_leak() {
        let held = Cell::new(0);
        let m = measure(&fake(&held), || {
            held.set(held.get() + 8);
            Ok(())
        })
        .unwrap();
        assert!(m.leaks(), "{m:?}");
    }

    /// A cache that keeps one entry per call and is emptied every `period`
    /// calls, from any phase.
    fn periodic(period: usize, phase: usize, entry: i64) -> Measurement {
        let held = Cell::new(0);
        let calls = Cell::new(phase);
        let counters = fake(&held);
        let m = measure(&counters, || {
            calls.set(calls.get() + 1);
            if calls.get() % period == 0 {
                held.set(0);
            } else {
                held.set(held.get() + entry);
            }
            Ok(())
        });
        m.unwrap()
    }

    /// The longest cache period the long rounds always tell from a leak.
    const PERIOD_BOUND: usize = 109;

    #[test]
    fn a_periodic_cache_is_never_a_leak() {
        // Every period up to the documented bound, every phase.
        for period in 1..=PERIOD_BOUND {
            for phase in 0..period {
                let m = periodic(period, phase, 96);
                assert!(!m.leaks(), "period {period} phase {phase}: {m:?}");
            }
        }
    }

    #[test]
    fn a_foreign_free_does_not_hide_a_leak() {
        // A leak of 400 bytes per call, while once, in the first long
        // round, another thread frees 600,000 bytes it held from before.
        let held = Cell::new(1_000_000);
        let calls = Cell::new(0);
        let m = measure(&fake(&held), || {
            calls.set(calls.get() + 1);
            held.set(held.get() + 400);
            if calls.get() == WARMUP + MEASURED + 3 {
                held.set(held.get() - 600_000);
            }
            Ok(())
        })
        .unwrap();
        assert!(m.leaks(), "{m:?}");
        assert_eq!(m.foreign, vec![16 * 400 - 600_000]);
        let e = m.evidence("export and release");
        assert!(e.contains("measured 1 time(s) more"), "{e}");
        // A free of something else on every attempt concludes no leak
        // after the retries (never a failure), and says why.
        let calls = Cell::new(0);
        let m = measure(&fake(&held), || {
            calls.set(calls.get() + 1);
            held.set(held.get() + 400);
            if calls.get() % (WARMUP + MEASURED + LONG[0]) == WARMUP + MEASURED + 3 {
                held.set(held.get() - 600_000);
            }
            Ok(())
        })
        .unwrap();
        assert!(!m.leaks(), "{m:?}");
        assert_eq!(m.foreign.len(), RETRIES);
        let e = m.cache_evidence("export and release").unwrap();
        assert!(e.contains("memory of something else freed"), "{e}");
    }

    #[test]
    fn a_leak_whose_short_round_a_free_interrupted_is_a_leak() {
        // 400 bytes per call; something else frees 1,000 bytes during the
        // second measured repetition of the first measurement.
        let held = Cell::new(100_000);
        let calls = Cell::new(0);
        let m = measure(&fake(&held), || {
            calls.set(calls.get() + 1);
            held.set(held.get() + 400);
            if calls.get() == WARMUP + 2 {
                held.set(held.get() - 1_000);
            }
            Ok(())
        })
        .unwrap();
        assert_eq!(m.uneven, vec![vec![400, -600, 400]]);
        assert!(m.leaks(), "{m:?}");
        let e = m.evidence("export and release");
        assert!(
            e.contains("grew in some repetitions but not all (400, -600, 400 bytes)"),
            "{e}"
        );
        // Clean, with one repetition's noise: measured again, no leak.
        let calls = Cell::new(0);
        let m = measure(&fake(&held), || {
            calls.set(calls.get() + 1);
            if calls.get() == WARMUP + 1 || calls.get() == WARMUP + 2 {
                held.set(held.get() + 64);
            }
            Ok(())
        })
        .unwrap();
        assert!(!m.leaks(), "{m:?}");
        assert_eq!(m.uneven.len(), 1);
        assert_eq!(calls.get(), 2 * (WARMUP + MEASURED));
    }

    #[test]
    fn a_leak_whose_short_round_larger_frees_interrupted_is_a_leak() {
        // 400 bytes per call; something else frees 5,000 bytes during the
        // second measured repetition of the first two measurements (larger
        // than the round's growth: duckdb-adbc's background frees).
        let held = Cell::new(100_000);
        let calls = Cell::new(0);
        let m = measure(&fake(&held), || {
            calls.set(calls.get() + 1);
            held.set(held.get() + 400);
            let n = calls.get();
            if n == WARMUP + 2 || n == (WARMUP + MEASURED) + WARMUP + 2 {
                held.set(held.get() - 5_000);
            }
            Ok(())
        })
        .unwrap();
        assert_eq!(m.uneven.len(), 2, "{m:?}");
        assert_eq!(m.uneven[0], vec![400, -4600, 400]);
        assert!(m.leaks(), "{m:?}");
        // Clean, and something else frees now and then: measured again
        // (at most RETRIES times), no leak.
        let calls = Cell::new(0);
        let m = measure(&fake(&held), || {
            calls.set(calls.get() + 1);
            if calls.get() % 4 == 0 {
                held.set(held.get() - 2_000);
            }
            if calls.get() % 3 == 0 {
                held.set(held.get() + 64);
            }
            Ok(())
        })
        .unwrap();
        assert!(!m.leaks(), "{m:?}");
        assert!(m.uneven.len() <= RETRIES);
    }

    #[test]
    fn a_leak_with_a_noisy_short_round_is_a_leak() {
        // 400 bytes per call, and now and then a block of 824 more that
        // stays (two of the three measured repetitions): duckdb-adbc.
        let held = Cell::new(0);
        let calls = Cell::new(0);
        let m = measure(&fake(&held), || {
            calls.set(calls.get() + 1);
            let extra = if [WARMUP + 2, WARMUP + 3].contains(&calls.get()) {
                824
            } else {
                0
            };
            held.set(held.get() + 400 + extra);
            Ok(())
        })
        .unwrap();
        assert_eq!(m.series[0].1, vec![400, 1224, 1224]);
        assert!(m.leaks(), "{m:?}");
    }

    #[test]
    fn a_cache_is_reported_with_its_size() {
        // Emptied every 64 calls, from a phase where the short round sees
        // growth in every repetition.
        let m = periodic(64, 0, 100);
        assert!(m.long.is_some(), "{m:?}");
        assert!(!m.leaks());
        let (_, most) = m.cache().unwrap();
        assert!((100..=6400).contains(&most), "{most}");
        let e = m.cache_evidence("export and release").unwrap();
        assert!(e.contains("a cache or pool that held up to"), "{e}");
    }

    #[test]
    fn a_cache_that_fills_one_entry_per_call_for_a_while_is_not_a_leak() {
        // Grows through the first round, stops during the long ones.
        let held = Cell::new(0);
        let calls = Cell::new(0);
        let m = measure(&fake(&held), || {
            calls.set(calls.get() + 1);
            if calls.get() <= WARMUP + MEASURED + 8 {
                held.set(held.get() + 1000);
            }
            Ok(())
        })
        .unwrap();
        assert_eq!(m.series[0].1, vec![1000; MEASURED]);
        assert!(m.long.is_some());
        assert!(!m.leaks(), "{m:?}");
        assert_eq!(m.cache().unwrap().1, 11_000);
        // The second long round settled it: the third never ran.
        assert_eq!(calls.get(), WARMUP + MEASURED + LONG[0] + LONG[1]);
        assert_eq!(m.long.as_ref().unwrap()[0].1.len(), 2);
    }

    #[test]
    fn a_clean_sequence_pays_for_one_round_only() {
        let held = Cell::new(0);
        let calls = Cell::new(0);
        let m = measure(&fake(&held), || {
            calls.set(calls.get() + 1);
            Ok(())
        })
        .unwrap();
        assert_eq!(calls.get(), WARMUP + MEASURED);
        assert_eq!(m.long, None);
        assert_eq!(m.cache(), None);
        assert!(!m.leaks());
    }

    #[test]
    fn a_lazy_static_and_a_cache_that_fills_during_warm_up_are_not_leaks() {
        let held = Cell::new(0);
        let calls = Cell::new(0);
        let m = measure(&fake(&held), || {
            calls.set(calls.get() + 1);
            if calls.get() == 1 {
                held.set(held.get() + 4096); // the lazy static
            }
            if calls.get() <= WARMUP {
                held.set(held.get() + 64); // a cache filling up
            }
            // Transient allocations that are freed again.
            held.set(held.get() + 1000);
            held.set(held.get() - 1000);
            Ok(())
        })
        .unwrap();
        assert!(!m.leaks(), "{m:?}");
        assert_eq!(m.series[0].1, vec![0; MEASURED]);
    }

    #[test]
    fn growth_that_does_not_repeat_every_time_is_not_a_leak() {
        // An amortised buffer growing on some repetitions only, and memory
        // handed back (negative growth), are not consistent growth.
        for pattern in [[64, 0, 64], [0, 0, 128], [128, -128, 128], [0, 0, 0]] {
            let held = Cell::new(0);
            let step = Cell::new(0);
            let m = measure(&fake(&held), || {
                let i = step.get();
                step.set(i + 1);
                // The pattern once (a retry of an uneven round sees none).
                if let Some(d) = usize::checked_sub(i, WARMUP).and_then(|k| pattern.get(k)) {
                    held.set(held.get() + d);
                }
                Ok(())
            })
            .unwrap();
            assert!(!m.leaks(), "{pattern:?}");
        }
    }

    #[test]
    fn the_plugin_counter_is_a_second_opinion() {
        let tracker = Cell::new(0);
        let plugin = Cell::new(0);
        let counters = vec![
            Counter::new(TRACKER, || Some(tracker.get())),
            Counter::new(PLUGIN, || Some(plugin.get())),
        ];
        // Only the plugin's own count grows (memory outside malloc).
        let m = measure(&counters, || {
            plugin.set(plugin.get() + 10);
            Ok(())
        })
        .unwrap();
        assert!(m.leaks());
        assert!(m.evidence("x").contains(PLUGIN));
    }

    #[test]
    fn a_failing_repetition_concludes_nothing() {
        let held = Cell::new(0);
        let calls = RefCell::new(0);
        let r = measure(&fake(&held), || {
            *calls.borrow_mut() += 1;
            if *calls.borrow() == 3 {
                Err("the producer failed".into())
            } else {
                held.set(held.get() + 1);
                Ok(())
            }
        });
        assert_eq!(r, Err("the producer failed".to_string()));
    }

    #[test]
    fn an_unreadable_counter_concludes_nothing() {
        let counters = vec![Counter::new(TRACKER, || None)];
        assert!(measure(&counters, || Ok(())).is_err());
    }

    #[test]
    fn consistent_growth_needs_every_repetition_to_grow() {
        assert!(consistent_growth(&[1, 1, 1]));
        assert!(!consistent_growth(&[1, 0, 1]));
        assert!(!consistent_growth(&[]));
    }
}

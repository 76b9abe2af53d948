//! Leak accounting for the `*.release.frees` rules.
//!
//! A leak verdict must never be a false positive: allocators keep caches,
//! libraries initialise statics lazily, the harness itself allocates. So
//! the same export-and-release sequence runs [`WARMUP`] times unmeasured,
//! then [`MEASURED`] times with the bytes held read before and after each
//! run, and a leak is suspected only when *every* measured repetition left
//! more bytes held than before it: growth that repeats with the sequence,
//! which a one-off cache or lazy static cannot produce. A suspicion is
//! confirmed by a second round after [`CONFIRM_WARMUP`] more unmeasured
//! repetitions (a cache that fills one entry per call stops growing by
//! then; a leak does not), and only a confirmed one is reported. A clean
//! library pays for the first round only. Everything the harness allocates
//! inside a repetition is dropped before the repetition ends, so its own
//! share nets to zero.
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
/// Unmeasured repetitions before the confirming round.
pub const CONFIRM_WARMUP: usize = 16;

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

/// Growth per measured repetition, per counter: the first round, and the
/// confirming round when the first suggested a leak.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Measurement {
    pub series: Vec<(&'static str, Vec<i64>)>,
    pub confirmation: Option<Vec<(&'static str, Vec<i64>)>>,
}

/// True when every repetition left more bytes held than before it.
pub fn consistent_growth(growth: &[i64]) -> bool {
    !growth.is_empty() && growth.iter().all(|&g| g > 0)
}

fn suspects(series: &[(&'static str, Vec<i64>)]) -> bool {
    series.iter().any(|(_, g)| consistent_growth(g))
}

fn list(g: &[i64]) -> String {
    g.iter()
        .map(|b| b.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

impl Measurement {
    /// True when some counter grew in every measured repetition of both
    /// rounds.
    pub fn leaks(&self) -> bool {
        match &self.confirmation {
            None => false,
            Some(second) => self
                .series
                .iter()
                .zip(second)
                .any(|((_, a), (_, b))| consistent_growth(a) && consistent_growth(b)),
        }
    }

    /// The evidence line: bytes held after each measured repetition, per
    /// counter and round.
    pub fn evidence(&self, sequence: &str) -> String {
        let rounds = self.confirmation.as_deref().unwrap_or(&[]);
        let counts = self
            .series
            .iter()
            .enumerate()
            .map(|(i, (name, g))| match rounds.get(i) {
                Some((_, c)) => format!("{name}: {} then {} bytes", list(g), list(c)),
                None => format!("{name}: {} bytes", list(g)),
            })
            .collect::<Vec<_>>()
            .join("; ");
        format!(
            "{sequence} repeated {} times: every measured repetition left more bytes held \
             than before it, {MEASURED} after {WARMUP} unmeasured and {MEASURED} more after \
             {CONFIRM_WARMUP} more ({counts} held per repetition)",
            WARMUP + CONFIRM_WARMUP + 2 * MEASURED
        )
    }
}

/// Runs `body` [`WARMUP`] + [`MEASURED`] times and returns the growth of
/// every counter over each measured run; when that suggests a leak, runs
/// the confirming round too. `body` must leave nothing of the harness's
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
    let series = round(counters, WARMUP, &mut body)?;
    let confirmation = if suspects(&series) {
        Some(round(counters, CONFIRM_WARMUP, &mut body)?)
    } else {
        None
    };
    Ok(Measurement {
        series,
        confirmation,
    })
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
        // Read into arrays on the stack: nothing is allocated between the
        // first read and the last.
        let mut before = [None; MAX_COUNTERS];
        for (slot, c) in before.iter_mut().zip(counters) {
            *slot = (c.read)();
        }
        body()?;
        let mut after = [None; MAX_COUNTERS];
        for (slot, c) in after.iter_mut().zip(counters).rev() {
            *slot = (c.read)();
        }
        for (i, (name, growth)) in series.iter_mut().enumerate() {
            match (before[i], after[i]) {
                (Some(b), Some(a)) => growth.push(a.wrapping_sub(b)),
                _ => return Err(format!("{name} could not be read")),
            }
        }
    }
    Ok(series)
}

#[cfg(test)]
mod tests {
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
        assert_eq!(m.series[0].1, vec![48; MEASURED]);
        assert_eq!(m.confirmation.as_ref().unwrap()[0].1, vec![48; MEASURED]);
        let e = m.evidence("export and release");
        assert!(e.contains("48, 48, 48 then 48, 48, 48 bytes"), "{e}");
        assert!(e.contains("repeated 24 times"), "{e}");
    }

    #[test]
    fn a_cache_that_fills_one_entry_per_call_for_a_while_is_not_a_leak() {
        // Grows through the first round, stops before the confirming one.
        let held = Cell::new(0);
        let calls = Cell::new(0);
        let m = measure(&fake(&held), || {
            calls.set(calls.get() + 1);
            if calls.get() <= WARMUP + MEASURED + CONFIRM_WARMUP / 2 {
                held.set(held.get() + 1000);
            }
            Ok(())
        })
        .unwrap();
        assert_eq!(m.series[0].1, vec![1000; MEASURED]);
        assert!(m.confirmation.is_some());
        assert!(!m.leaks(), "{m:?}");
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
        assert_eq!(m.confirmation, None);
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
                if i >= WARMUP {
                    held.set(held.get() + pattern[i - WARMUP]);
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

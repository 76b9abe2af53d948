//! A worker's scenario loading: what every worker start pays, and a worker
//! starts again after every crash. It draws the generated and single-type
//! scenarios of a matrix unit (100 generated, seed 20261122, as `just
//! matrix` runs them) with [`Sources::load`], or reads them back from the
//! file the first worker kept in the run's scratch directory
//! ([`Sources::load_cached`]). The ratio drawn/read is what the cache saves
//! each worker start after the first. Run with `cargo bench -p arrowcert
//! --bench scenarios` (or `just bench`).
//!
//! The two are measured in alternating rounds within this one run; the
//! best round of each is reported, with the spread. Figures are printed,
//! never asserted.

use std::time::{Duration, Instant};

use arrowcert::sources::Sources;

#[path = "../tests/support/mod.rs"]
mod support;

fn rounds() -> usize {
    if support::bench_smoke() {
        1
    } else {
        5
    }
}

fn budget() -> Duration {
    Duration::from_millis(if support::bench_smoke() { 5 } else { 1000 })
}

/// Loads per second of `f`, over about [`budget`].
fn rate(mut f: impl FnMut() -> usize) -> (f64, usize) {
    let start = Instant::now();
    let (mut loads, mut scenarios) = (0u64, 0);
    while loads == 0 || start.elapsed() < budget() {
        scenarios = f();
        loads += 1;
    }
    (loads as f64 / start.elapsed().as_secs_f64(), scenarios)
}

fn main() {
    let generated = if support::bench_smoke() { 10 } else { 100 };
    let sources = Sources {
        generated,
        single_types: true,
        seed: 20261122,
        ..Default::default()
    };
    let dir =
        std::env::temp_dir().join(format!("arrowcert-bench-scenarios-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch directory");
    // The first worker's load: drawn, then kept.
    let first = sources.load_cached(Some(&dir)).expect("scenarios").len();
    let (mut drawn, mut read) = (Vec::new(), Vec::new());
    for _ in 0..rounds() {
        let (d, n) = rate(|| sources.load().expect("scenarios").len());
        let (r, m) = rate(|| sources.load_cached(Some(&dir)).expect("scenarios").len());
        assert_eq!((n, m), (first, first), "both loads give every scenario");
        drawn.push(d);
        read.push(r);
    }
    let _ = std::fs::remove_dir_all(&dir);
    let best = |v: &[f64]| v.iter().copied().fold(f64::MIN, f64::max);
    let worst = |v: &[f64]| v.iter().copied().fold(f64::MAX, f64::min);
    println!(
        "scenario loading, {first} scenarios ({generated} generated + single-type + shapes, seed 20261122):"
    );
    println!(
        "  drawn (Sources::load):        {:8.2} ms per load (best of {}; worst {:.2} ms)",
        1000.0 / best(&drawn),
        rounds(),
        1000.0 / worst(&drawn)
    );
    println!(
        "  read back (load_cached):      {:8.2} ms per load (best of {}; worst {:.2} ms)",
        1000.0 / best(&read),
        rounds(),
        1000.0 / worst(&read)
    );
    println!(
        "  ratio drawn/read back:        {:8.2}x",
        best(&read) / best(&drawn)
    );
}

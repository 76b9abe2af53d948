//! Gold round trips per second through the reference producer and consumer,
//! per interface path, beside a baseline: the same batches exported and
//! imported in-process by arrow-rs with no plugin, no IPC and no checks.
//! The ratio is what the harness's plugin calls, IPC and logical
//! comparison cost. Run with `cargo bench -p arrowcert` (or `just bench`).
//!
//! Figures are rates measured in this one run, never asserted.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use arrowcert::abi::arrow_rs::{export_batch, export_schema, import_batch};
use arrowcert::plugin::Plugin;
use arrowcert::roundtrip::{self, Filter, Options, Path};
use arrowcert::scenario;

#[path = "../tests/support/mod.rs"]
mod support;

/// Time per measurement (a few milliseconds in a smoke run:
/// `ARROWCERT_BENCH_SMOKE`).
fn budget() -> Duration {
    Duration::from_millis(if support::bench_smoke() { 5 } else { 1500 })
}

/// Runs `f` repeatedly for about [`budget`]; returns runs per second.
fn rate(mut f: impl FnMut()) -> f64 {
    f(); // warm up
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed() < budget() {
        f();
        n += 1;
    }
    n as f64 / start.elapsed().as_secs_f64()
}

fn main() {
    let gold = support::gold_dir();
    let scenarios = match scenario::gold_dir(&gold) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("roundtrip bench: gold files unavailable ({e}); nothing measured");
            return;
        }
    };
    let (p, c) = support::bundled();
    let producer = Plugin::load(p).expect("reference producer");
    let consumer = Plugin::load(c).expect("reference consumer");
    let opts = Options::default();

    // Baseline: every gold batch, whole, exported and imported in-process.
    let baseline = rate(|| {
        for s in &scenarios {
            for b in &s.batches {
                let schema = export_schema(&s.schema).unwrap();
                let array = export_batch(b);
                // SAFETY: both structures were just exported by arrow-rs.
                let back = unsafe { import_batch(schema, array) }.unwrap();
                assert_eq!(back.num_rows(), b.num_rows());
            }
        }
    });

    println!(
        "gold round trips through the reference pair ({} files)",
        scenarios.len()
    );
    println!(
        "{:<15} {:>14} {:>16} {:>22}",
        "path", "cases/s", "gold sets/s", "baseline/this (x)"
    );
    let mut all_paths_rate = 0.0;
    for path in Path::ALL {
        // Exact IDs: a substring filter "array/" would also pick "device_array/".
        let ids: Vec<String> = roundtrip::plan(&scenarios)
            .into_iter()
            .filter(|c| c.path == path)
            .map(|c| c.id)
            .collect();
        let n_cases = ids.len();
        let filter = Filter {
            patterns: ids,
            exact: true,
            skip: vec![],
        };
        let mut failures = 0;
        let sets = rate(|| {
            let cases = roundtrip::run(&producer, &consumer, &scenarios, &filter, &opts, |_| {});
            failures += cases
                .iter()
                .filter(|c| c.verdict != arrowcert::report::Verdict::Pass)
                .count();
        });
        assert_eq!(
            failures,
            0,
            "{} cases failed while benchmarking",
            path.name()
        );
        all_paths_rate += 1.0 / sets;
        // The baseline covers whole batches only; compare per gold set.
        println!(
            "{:<15} {:>14.0} {:>16.2} {:>22.1}",
            path.name(),
            sets * n_cases as f64,
            sets,
            baseline / sets
        );
    }
    println!(
        "{:<15} {:>14} {:>16.2}   (every path, every gold file, whole and sliced)",
        "all paths",
        "",
        1.0 / all_paths_rate
    );
    println!(
        "{:<15} {:>14} {:>16.2}   (arrow-rs export+import in-process, whole batches)",
        "baseline", "", baseline
    );

    workers_vs_in_process(&scenarios, &producer, &consumer, p, c);
}

/// Cases per second over every gold case, in this process and in worker
/// processes (1 and 2 workers), in one run: the cost of isolation.
fn workers_vs_in_process(
    scenarios: &[scenario::Scenario],
    producer: &Plugin,
    consumer: &Plugin,
    producer_path: &std::path::Path,
    consumer_path: &std::path::Path,
) {
    use arrowcert::run;
    let opts = Options::default();
    let plan = roundtrip::plan(scenarios);
    let n = plan.len();
    let in_process = rate(|| {
        let cases = roundtrip::run(
            producer,
            consumer,
            scenarios,
            &Filter::default(),
            &opts,
            |_| {},
        );
        assert_eq!(cases.len(), n);
    }) * n as f64;
    println!();
    println!("isolation cost over {n} gold cases (every path), cases/s:");
    println!("{:<28} {:>10.0}", "in process", in_process);
    for jobs in [1usize, 2] {
        let args = run::worker::WorkerArgs {
            socket: PathBuf::new(),
            mode: run::worker::Mode::Roundtrip,
            producer: Some(producer_path.to_path_buf()),
            consumer: Some(consumer_path.to_path_buf()),
            sources: arrowcert::sources::Sources::builtin_or_gold(Some(support::gold_dir())),
            options: opts.clone(),
            limits: run::proc::Limits::worker(8192),
            cpu_seconds: Some(121),
            defer_consumer: None,
            plan: None,
            open: None,
            suites: None,
        };
        let cfg = support::isolation::config(
            &args,
            jobs,
            arrowcert::plugin::tracker::enabled(),
            "roundtrip",
        );
        let jobs_list = || -> Vec<run::Job> {
            plan.iter()
                .enumerate()
                .map(|(index, s)| run::Job {
                    index,
                    record: roundtrip::record(&scenarios[s.scenario], s, &opts),
                })
                .collect()
        };
        // Whole runs: starting the workers and loading the plugins and the
        // gold data included, as a real run pays it.
        let whole = rate(|| {
            let cases = support::isolation::whole(&cfg, n, jobs_list());
            assert!(cases
                .iter()
                .all(|c| c.verdict == arrowcert::report::Verdict::Pass));
        }) * n as f64;
        // Steady state over a plan repeated 10 times.
        let repeated: Vec<run::Job> = (0..10).flat_map(|_| jobs_list()).collect();
        let (steady, _) = support::isolation::steady(&cfg, n, repeated);
        support::isolation::print_row(jobs, whole, steady, in_process);
        let _ = std::fs::remove_dir_all(&cfg.scratch);
    }
}

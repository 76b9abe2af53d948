//! Certification overhead: certified cases per second (every check that
//! `arrowcert certify --in-process` makes, through [`certify::run_case`])
//! beside a bare loop over the same plugin and the same cases, which only
//! produces through the same entry point, imports into arrow-rs zero-copy
//! (no validation, no poisoning, no relocation, no comparison) and
//! releases. The ratio bare/certified is what certification costs on top
//! of simply using the producer. Run with `cargo bench -p arrowcert --bench
//! certify` (or `just bench`).
//!
//! The two loops are measured in alternating rounds within this one run;
//! the best round of each is reported (the least disturbed by other work
//! on the machine), with the spread. Figures are printed, never asserted.

use std::time::{Duration, Instant};

use arrowcert::abi::ops::{take, Guard, Owned};
use arrowcert::abi::{ArrowArray, ArrowArrayStream, ArrowDeviceArrayStream, ArrowSchema};
use arrowcert::certify::{self, CaseSpec, Path};
use arrowcert::inspect::probe::{self, Call, StreamCalls};
use arrowcert::plugin::Plugin;
use arrowcert::report::Verdict;
use arrowcert::roundtrip::{call_range, requested};
use arrowcert::scenario::{self, Scenario};

#[path = "../tests/support/mod.rs"]
mod support;

/// Time per measurement and rounds per comparison (one short round in a
/// smoke run: `ARROWCERT_BENCH_SMOKE`).
fn budget() -> Duration {
    Duration::from_millis(if support::bench_smoke() { 5 } else { 500 })
}
fn rounds() -> usize {
    if support::bench_smoke() {
        1
    } else {
        5
    }
}

/// Runs `f` (one pass over `n` cases) repeatedly for about [`budget`];
/// returns cases per second.
fn rate(n: usize, mut f: impl FnMut()) -> f64 {
    let start = Instant::now();
    let mut passes = 0u64;
    while passes == 0 || start.elapsed() < budget() {
        f();
        passes += 1;
    }
    (passes * n as u64) as f64 / start.elapsed().as_secs_f64()
}

/// Best and worst of the rounds.
fn best_worst(v: &[f64]) -> (f64, f64) {
    let best = v.iter().copied().fold(f64::MIN, f64::max);
    let worst = v.iter().copied().fold(f64::MAX, f64::min);
    (best, worst)
}

/// Produces the schema (needed to import anything) without any check.
fn bare_schema(p: &Plugin, s: &Scenario) -> Guard<ArrowSchema> {
    let mut schema = Guard::<ArrowSchema>::zeroed();
    p.produce_schema(&s.ipc, &mut schema).expect("schema");
    schema
}

/// Gets every chunk of a stream, importing each; returns the rows read.
fn bare_stream<S: StreamCalls>(stream: &mut S, chunk: impl Fn(&mut S::Chunk) -> ArrowArray) -> usize
where
    S::Chunk: Owned,
{
    let mut schema = Guard::<ArrowSchema>::zeroed();
    assert_eq!(stream.get_schema(&mut schema), Call::Returned(0));
    let mut rows = 0;
    loop {
        let mut out = Guard::<S::Chunk>::zeroed();
        assert_eq!(stream.get_next(&mut out), Call::Returned(0));
        if out.is_released() {
            break;
        }
        let mut array = Guard::new(chunk(&mut out));
        rows += probe::import_batch(&schema, &mut array)
            .expect("import")
            .num_rows();
    }
    rows
}

/// One bare case: produce through the case's entry point, import
/// zero-copy into arrow-rs, release (by dropping). Returns the rows read.
fn bare_case(p: &Plugin, s: &Scenario, spec: &CaseSpec, o: &certify::Options) -> usize {
    let (batch, offset, length) = call_range(spec.batch, spec.slice);
    match spec.path {
        Path::Consumer(_) | Path::Async(_) | Path::AsyncConsumer(_) => {
            unreachable!("the benchmark plans synchronous producer cases only")
        }
        Path::Schema => {
            let mut schema = bare_schema(p, s);
            // SAFETY: a live schema the reference producer just exported;
            // arrow-rs reads it and releases it.
            let imported = unsafe { arrowcert::abi::arrow_rs::import_schema(take(&mut *schema)) };
            imported.expect("import schema").fields().len()
        }
        Path::Array => {
            let schema = bare_schema(p, s);
            let mut array = Guard::<ArrowArray>::zeroed();
            p.produce_array(&s.ipc, batch, offset, length, &mut array)
                .expect("array");
            probe::import_batch(&schema, &mut array)
                .expect("import")
                .num_rows()
        }
        Path::DeviceArray => {
            let schema = bare_schema(p, s);
            let mut out = Guard::<arrowcert::abi::ArrowDeviceArray>::zeroed();
            p.produce_device_array(
                &s.ipc,
                batch,
                offset,
                length,
                o.device_type,
                o.device_id,
                &mut out,
            )
            .expect("device array");
            let mut array = Guard::new(take(&mut out.array));
            probe::import_batch(&schema, &mut array)
                .expect("import")
                .num_rows()
        }
        Path::Stream => {
            let mut stream = Guard::<ArrowArrayStream>::zeroed();
            p.produce_stream(&s.ipc, &mut stream).expect("stream");
            bare_stream(&mut *stream, take)
        }
        Path::DeviceStream => {
            let mut stream = Guard::<ArrowDeviceArrayStream>::zeroed();
            p.produce_device_stream(&s.ipc, o.device_type, o.device_id, &mut stream)
                .expect("device stream");
            bare_stream(&mut *stream, |c| take(&mut c.array))
        }
    }
}

/// What the bare loop must read for a case (checked once, outside timing).
fn expected_rows(s: &Scenario, spec: &CaseSpec) -> usize {
    match spec.path {
        Path::Schema => s.schema.fields().len(),
        _ => requested(s, spec.batch, spec.slice)
            .iter()
            .map(|b| b.num_rows())
            .sum(),
    }
}

/// Exactly the plugin calls a certified case makes (produce, callbacks,
/// releases), with no check between them: the producer's share of a
/// certified case.
/// With `threaded`, every odd get_next is made from a fresh thread, as
/// certification makes it.
fn plugin_calls(p: &Plugin, s: &Scenario, spec: &CaseSpec, o: &certify::Options, threaded: bool) {
    let (batch, offset, length) = call_range(spec.batch, spec.slice);
    match spec.path {
        Path::Consumer(_) | Path::Async(_) | Path::AsyncConsumer(_) => {
            unreachable!("the benchmark plans synchronous producer cases only")
        }
        Path::Schema => drop(bare_schema(p, s)),
        Path::Array => {
            let _schema = bare_schema(p, s);
            for _ in 0..2 {
                let mut array = Guard::<ArrowArray>::zeroed();
                p.produce_array(&s.ipc, batch, offset, length, &mut array)
                    .expect("array");
            }
        }
        Path::DeviceArray => {
            let _schema = bare_schema(p, s);
            for _ in 0..2 {
                let mut out = Guard::<arrowcert::abi::ArrowDeviceArray>::zeroed();
                p.produce_device_array(
                    &s.ipc,
                    batch,
                    offset,
                    length,
                    o.device_type,
                    o.device_id,
                    &mut out,
                )
                .expect("device array");
            }
        }
        Path::Stream => {
            let mut stream = Guard::<ArrowArrayStream>::zeroed();
            p.produce_stream(&s.ipc, &mut stream).expect("stream");
            stream_calls(&mut *stream, threaded);
        }
        Path::DeviceStream => {
            let mut stream = Guard::<ArrowDeviceArrayStream>::zeroed();
            p.produce_device_stream(&s.ipc, o.device_type, o.device_id, &mut stream)
                .expect("device stream");
            stream_calls(&mut *stream, threaded);
        }
    }
}

/// get_schema twice, get_next to the end and once more, chunks kept until
/// the end, as a certified stream case calls them.
fn stream_calls<S: StreamCalls>(stream: &mut S, threaded: bool)
where
    S::Chunk: Owned,
{
    for _ in 0..2 {
        let mut schema = Guard::<ArrowSchema>::zeroed();
        assert_eq!(stream.get_schema(&mut schema), Call::Returned(0));
    }
    let mut chunks = Vec::new();
    for call in 0.. {
        let mut out = Guard::<S::Chunk>::zeroed();
        let r = if threaded && call % 2 == 1 {
            probe::get_next_on_thread(stream, &mut out)
        } else {
            stream.get_next(&mut out)
        };
        assert_eq!(r, Call::Returned(0));
        if out.is_released() {
            break;
        }
        chunks.push(out);
    }
    let mut out = Guard::<S::Chunk>::zeroed();
    assert_eq!(stream.get_next(&mut out), Call::Returned(0));
}

fn measure(label: &str, scenarios: &[Scenario], producer: &Plugin) {
    let opts = certify::Options::default();
    // Synchronous producer paths only: the async cases' time is mostly the
    // handler's deliberate holds, not a per-case cost to compare.
    let plan: Vec<CaseSpec> = certify::plan(
        scenarios,
        certify::Sides {
            producer: true,
            consumer: false,
        },
        0,
    )
    .into_iter()
    .filter(|s| !matches!(s.path, Path::Async(_)))
    .collect();
    // Device cases this machine cannot run (no CUDA driver, say) are left
    // out of the timing, and the run says so.
    let (plan, left_out): (Vec<CaseSpec>, Vec<CaseSpec>) = plan
        .into_iter()
        .partition(|s| arrowcert::device::available(s.device).is_ok());
    if let Some(first) = left_out.first() {
        println!(
            "{label}: {} device cases left out of the timing: {}",
            left_out.len(),
            arrowcert::device::available(first.device)
                .err()
                .unwrap_or_default()
        );
    }
    let plugins = certify::Plugins {
        producer: Some(producer),
        consumer: None,
    };
    // Every case passes certification and reads what it asked for.
    for spec in &plan {
        let s = &scenarios[spec.scenario];
        let case = certify::run_case(plugins, s, spec, &opts);
        assert_eq!(
            case.verdict,
            Verdict::Pass,
            "{}: {:?}",
            spec.id,
            case.message
        );
        assert_eq!(bare_case(producer, s, spec, &opts), expected_rows(s, spec));
    }
    let n = plan.len();
    println!(
        "\n{label}: {n} cases over {} scenarios, producer {}",
        scenarios.len(),
        producer.name()
    );

    // The whole plan, alternating bare and certified rounds.
    let (mut bare, mut cert) = (Vec::new(), Vec::new());
    let rounds = rounds();
    for _ in 0..rounds {
        bare.push(rate(n, || {
            for spec in &plan {
                std::hint::black_box(bare_case(producer, &scenarios[spec.scenario], spec, &opts));
            }
        }));
        cert.push(rate(n, || {
            for spec in &plan {
                std::hint::black_box(certify::run_case(
                    plugins,
                    &scenarios[spec.scenario],
                    spec,
                    &opts,
                ));
            }
        }));
    }
    let ((bb, bw), (cb, cw)) = (best_worst(&bare), best_worst(&cert));
    println!(
        "{:<15} {:>14} {:>14} {:>12}   (best of {rounds} rounds; worst in brackets)",
        "path", "bare cases/s", "certified/s", "overhead (x)"
    );

    // Per path, the same way (fewer rounds: they are for the breakdown),
    // with the certified time split into the plugin's calls (the same
    // calls, no checks), fresh threads (started and joined empty, times
    // the number of calls certification makes from one) and the rest:
    // the harness's own checks (validation, relocation, import, deep copy,
    // comparison, bookkeeping).
    let mut rows = Vec::new();
    for path in Path::ALL {
        let cases: Vec<&CaseSpec> = plan.iter().filter(|c| c.path == path).collect();
        let (mut b, mut c, mut p, mut t) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for _ in 0..rounds.min(3) {
            b.push(rate(cases.len(), || {
                for spec in &cases {
                    std::hint::black_box(bare_case(
                        producer,
                        &scenarios[spec.scenario],
                        spec,
                        &opts,
                    ));
                }
            }));
            c.push(rate(cases.len(), || {
                for spec in &cases {
                    std::hint::black_box(certify::run_case(
                        plugins,
                        &scenarios[spec.scenario],
                        spec,
                        &opts,
                    ));
                }
            }));
            p.push(rate(cases.len(), || {
                for spec in &cases {
                    plugin_calls(producer, &scenarios[spec.scenario], spec, &opts, false);
                }
            }));
            t.push(rate(cases.len(), || {
                for spec in &cases {
                    plugin_calls(producer, &scenarios[spec.scenario], spec, &opts, true);
                }
            }));
        }
        let (b, _) = best_worst(&b);
        let (c, _) = best_worst(&c);
        let (p, _) = best_worst(&p);
        let (t, _) = best_worst(&t);
        println!(
            "{:<15} {:>14.0} {:>14.0} {:>12.2}   ({} cases)",
            path.name(),
            b,
            c,
            b / c,
            cases.len()
        );
        rows.push((path, b, c, p, t));
    }
    println!(
        "{:<15} {:>14.0} {:>14.0} {:>12.2}   (bare [{bw:.0}], certified [{cw:.0}])",
        "all cases",
        bb,
        cb,
        bb / cb
    );

    println!("\nwhere a certified case's time goes (us per case):");
    println!(
        "{:<15} {:>9} {:>14} {:>16} {:>16} {:>16}",
        "path", "bare", "certified", "plugin calls", "fresh threads", "checks"
    );
    for (path, b, c, p, t) in rows {
        let (b, c, p) = (1e6 / b, 1e6 / c, 1e6 / p);
        let t = (1e6 / t - p).max(0.0);
        println!(
            "{:<15} {:>9.1} {:>14.1} {:>9.1} ({:>3.0}%) {:>9.1} ({:>3.0}%) {:>9.1} ({:>3.0}%)",
            path.name(),
            b,
            c,
            p,
            100.0 * p / c,
            t,
            100.0 * t / c,
            c - p - t,
            100.0 * (c - p - t) / c,
        );
    }
}

/// Certified cases per second over the gold files' synchronous producer
/// cases, in this process and in worker processes (1 and 2), in one run:
/// what isolation costs certification. Without the allocation tracker in
/// the workers (`tracker: false`), so that both sides make the same checks
/// (the tracker adds the `*.release.frees` repetitions, which in-process
/// runs cannot make).
fn workers_vs_in_process(producer: &Plugin, producer_path: &std::path::Path) {
    use arrowcert::run;
    let Ok(scenarios) = scenario::gold_dir(&support::gold_dir()) else {
        println!("\nworkers: gold files unavailable; not measured");
        return;
    };
    let opts = certify::Options::default();
    let sides = certify::Sides {
        producer: true,
        consumer: false,
    };
    // The plan the workers make (every path), and the cases timed: the
    // synchronous producer cases this machine can run.
    let plan = certify::plan(&scenarios, sides, 0);
    let selected: Vec<usize> = (0..plan.len())
        .filter(|&i| !matches!(plan[i].path, Path::Async(_)))
        .filter(|&i| arrowcert::device::available(plan[i].device).is_ok())
        .collect();
    let n = selected.len();
    let plugins = certify::Plugins {
        producer: Some(producer),
        consumer: None,
    };
    let in_process = rate(n, || {
        for &i in &selected {
            let spec = &plan[i];
            std::hint::black_box(certify::run_case(
                plugins,
                &scenarios[spec.scenario],
                spec,
                &opts,
            ));
        }
    });
    println!("\nisolation cost of certification over {n} gold cases, cases/s:");
    println!("{:<28} {:>10.0}", "in process", in_process);
    for jobs in [1usize, 2] {
        let args = run::worker::WorkerArgs {
            socket: std::path::PathBuf::new(),
            mode: run::worker::Mode::Certify,
            producer: Some(producer_path.to_path_buf()),
            consumer: None,
            sources: arrowcert::sources::Sources::builtin_or_gold(Some(support::gold_dir())),
            options: arrowcert::roundtrip::Options::default(),
            limits: run::proc::Limits::worker(8192),
            cpu_seconds: None,
            defer_consumer: None,
            plan: None,
            open: None,
            suites: None,
        };
        let cfg = support::isolation::config(&args, jobs, false, "certify");
        let job_list = || -> Vec<run::Job> {
            selected
                .iter()
                .map(|&index| run::Job {
                    index,
                    record: certify::record(&scenarios[plan[index].scenario], &plan[index], &opts),
                })
                .collect()
        };
        // Steady state over the cases repeated (what a long run converges
        // to), and whole runs, the workers' start-up included.
        let repeats = if support::bench_smoke() { 1 } else { 10 };
        let repeated: Vec<run::Job> = (0..repeats).flat_map(|_| job_list()).collect();
        let (steady, cases) = support::isolation::steady(&cfg, plan.len(), repeated);
        assert!(
            cases.iter().all(|c| c.verdict == Verdict::Pass),
            "every case passes in the workers"
        );
        let whole = rate(n, || {
            assert_eq!(
                support::isolation::whole(&cfg, plan.len(), job_list()).len(),
                n
            );
        });
        support::isolation::print_row(jobs, whole, steady, in_process);
        let _ = std::fs::remove_dir_all(&cfg.scratch);
    }
}

fn main() {
    let (p, _) = support::bundled();
    let producer = Plugin::load(p).expect("reference producer");
    println!(
        "certification overhead: certified cases/s vs a bare produce -> import -> release loop"
    );
    measure("built-in scenarios", &scenario::builtin(), &producer);
    match scenario::gold_dir(&support::gold_dir()) {
        Ok(gold) => measure("gold files", &gold, &producer),
        Err(e) => println!("\ngold files unavailable ({e}); built-in scenarios only"),
    }
    workers_vs_in_process(&producer, p);
}

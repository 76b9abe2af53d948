//! The benchmarks' measure of what worker processes cost against running
//! in-process (`harness/benches/{certify,roundtrip}.rs`).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use arrowcert::report::Case;
use arrowcert::run;

/// The run configuration for `args` with `jobs` workers (scratch directory
/// named by `tag` and this process).
pub fn config(
    args: &run::worker::WorkerArgs,
    jobs: usize,
    tracker: bool,
    tag: &str,
) -> run::Config {
    run::Config {
        exe: PathBuf::from(env!("CARGO_BIN_EXE_arrowcert")),
        worker_args: args.to_args(),
        sources: args.sources.clone(),
        key: args.key(),
        jobs,
        case_timeout: Duration::from_secs(60),
        start_timeout: Duration::from_secs(60),
        output_limit: 64 * 1024,
        scratch: std::env::temp_dir().join(format!("arrowcert-bench-{tag}-{}", std::process::id())),
        tracker,
        max_tasks: Some(run::MAX_TASKS_PER_WORKER * jobs as u64),
        pids_cgroup: None,
        env: Vec::new(),
        wrapper: Vec::new(),
    }
}

/// Cases per second from the first worker's "ready" to the last result
/// (what a long run converges to), and the cases.
pub fn steady(cfg: &run::Config, plan_len: usize, jobs: Vec<run::Job>) -> (f64, Vec<Case>) {
    let total = jobs.len();
    let pool = run::Pool::new(cfg, false).expect("scratch directory");
    let mut ready_at = None;
    let out = run::run(
        cfg,
        &pool,
        plan_len,
        jobs,
        |_| ready_at = Some(Instant::now()),
        |_| {},
    )
    .expect("workers start");
    let rate = total as f64 / ready_at.expect("ready").elapsed().as_secs_f64();
    assert_eq!(out.cases.len(), total);
    (rate, out.cases)
}

/// One whole run (workers started, plugins loaded, sources planned).
pub fn whole(cfg: &run::Config, plan_len: usize, jobs: Vec<run::Job>) -> Vec<Case> {
    let pool = run::Pool::new(cfg, false).expect("scratch directory");
    run::run(cfg, &pool, plan_len, jobs, |_| {}, |_| {})
        .expect("workers start")
        .cases
}

/// The line for `jobs` workers against `in_process` cases/s.
pub fn print_row(jobs: usize, whole: f64, steady: f64, in_process: f64) {
    println!(
        "{:<28} {:>10.0}   ({:.0}% of in-process; steady state {:.0} cases/s = {:.0}%)",
        format!("{jobs} worker process(es)"),
        whole,
        100.0 * whole / in_process,
        steady,
        100.0 * steady / in_process
    );
}

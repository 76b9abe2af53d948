//! `arrowcert roundtrip`: producer -> harness -> consumer on every path.

use std::path::PathBuf;
use std::time::{Instant, SystemTime};

use crate::plugin::Plugin;
use crate::report::{self, Case, PluginIdentity, Report, Summary, Verdict};
use crate::roundtrip::{self, Filter, Options};
use crate::run::{self, worker::identity};
use crate::scenario::{self, Scenario};

use super::{BadInput, EXIT_FAILURES};

pub struct Args {
    pub producer: PathBuf,
    pub consumer: PathBuf,
    pub producer_arg: String,
    pub consumer_arg: String,
    pub gold: Option<PathBuf>,
    pub report: Option<PathBuf>,
    pub filter: Filter,
    pub list: bool,
    pub verbose: bool,
    pub timeout_ms: i64,
    pub invocation: Vec<String>,
    /// Worker processes at once; 0 runs every case inside this process.
    pub jobs: usize,
    /// Deadline of one case in a worker.
    pub case_timeout_ms: u64,
    /// Address-space limit of each worker, in MiB.
    pub max_memory_mb: u64,
}

fn shell_word(s: &str) -> String {
    if s.chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+:=".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// Runs the command; returns the exit code.
pub fn run(args: Args) -> Result<i32, BadInput> {
    let (scenarios, data): (Vec<Scenario>, String) = match &args.gold {
        Some(dir) => (
            scenario::gold_dir(dir).map_err(BadInput)?,
            dir.display().to_string(),
        ),
        None => (scenario::builtin(), "built-in".into()),
    };

    let mut replay = format!(
        "arrowcert roundtrip --producer {} --consumer {}",
        shell_word(&args.producer_arg),
        shell_word(&args.consumer_arg)
    );
    if let Some(dir) = &args.gold {
        replay.push_str(&format!(
            " --gold {}",
            shell_word(&dir.display().to_string())
        ));
    }
    replay.push_str(" --exact");
    let opts = Options {
        async_timeout_ms: args.timeout_ms,
        replay_prefix: replay,
        ..Options::default()
    };
    let plan = roundtrip::plan(&scenarios);

    if args.list {
        for spec in &plan {
            if args.filter.selects(&spec.id) {
                println!("{}: case", spec.id);
            }
        }
        return Ok(0);
    }

    let started = SystemTime::now();
    let clock = Instant::now();
    let verbose = args.verbose;
    let print = |c: &Case| {
        if verbose || c.verdict != Verdict::Pass {
            println!("case {} ... {}", c.id, verdict_word(c));
        }
    };
    let (producer, consumer, cases) = if args.jobs == 0 {
        let producer = Plugin::load(&args.producer).map_err(|e| BadInput(e.to_string()))?;
        let consumer = Plugin::load(&args.consumer).map_err(|e| BadInput(e.to_string()))?;
        header(
            producer.name(),
            consumer.name(),
            scenarios.len(),
            &data,
            "in this process",
        );
        let cases = roundtrip::run(&producer, &consumer, &scenarios, &args.filter, &opts, print);
        (
            identity("producer", &producer),
            identity("consumer", &consumer),
            cases,
        )
    } else {
        let exe = std::env::current_exe()
            .map_err(|e| BadInput(format!("cannot find the arrowcert executable: {e}")))?;
        let worker_args = run::worker::WorkerArgs {
            socket: PathBuf::new(),
            producer: args.producer.clone(),
            consumer: args.consumer.clone(),
            gold: args.gold.clone(),
            options: opts.clone(),
            limits: run::proc::Limits::worker(args.max_memory_mb),
        }
        .to_args();
        let cfg = run::Config {
            exe,
            worker_args,
            jobs: args.jobs,
            case_timeout: std::time::Duration::from_millis(args.case_timeout_ms),
            start_timeout: std::time::Duration::from_secs(60),
            output_limit: 64 * 1024,
            scratch: std::env::temp_dir().join(format!("arrowcert-run-{}", std::process::id())),
        };
        let jobs: Vec<run::Job> = plan
            .iter()
            .enumerate()
            .filter(|(_, s)| args.filter.selects(&s.id))
            .map(|(index, s)| run::Job {
                index,
                record: roundtrip::record(&scenarios[s.scenario], s, &opts),
            })
            .collect();
        // The workers load the plugins, so a plugin that crashes while
        // loading fails a worker, not this process.
        let how = format!("{} worker processes", args.jobs);
        let ready = |p: &PluginIdentity, c: &PluginIdentity| {
            header(&p.name, &c.name, scenarios.len(), &data, &how)
        };
        let outcome = run::run(&cfg, plan.len(), jobs, ready, print);
        let _ = std::fs::remove_dir_all(&cfg.scratch);
        let outcome = outcome
            .map_err(|run::StartError(why)| BadInput(format!("cannot run the plugins: {why}")))?;
        (outcome.producer, outcome.consumer, outcome.cases)
    };
    let summary = Summary::of(&cases);
    let finished = SystemTime::now();
    let report = Report {
        report_version: report::REPORT_VERSION,
        tool: Default::default(),
        command: "roundtrip".into(),
        invocation: args.invocation.clone(),
        started_at: report::time::rfc3339(started),
        finished_at: report::time::rfc3339(finished),
        duration_ms: clock.elapsed().as_millis() as u64,
        complete: true,
        plugins: vec![producer, consumer],
        data,
        devices: vec!["cpu".into()],
        cases,
        summary: summary.clone(),
    };
    print_summary(&report);
    let path = args.report.clone().unwrap_or_else(|| {
        PathBuf::from("reports").join(format!("roundtrip-{}.json", report::time::compact(started)))
    });
    report::write(&report, &path)
        .map_err(|e| BadInput(format!("{}: cannot write report: {e}", path.display())))?;
    println!("report: {}", path.display());
    Ok(if summary.ok() { 0 } else { EXIT_FAILURES })
}

fn header(producer: &str, consumer: &str, scenarios: usize, data: &str, how: &str) {
    println!(
        "arrowcert roundtrip: {producer} -> {consumer} ({scenarios} scenarios from {data}, {how})"
    );
}

fn verdict_word(c: &Case) -> String {
    match c.verdict {
        Verdict::Pass => "ok".into(),
        Verdict::Fail => "FAILED".into(),
        Verdict::Error => "ERROR".into(),
        Verdict::Crash => "CRASHED".into(),
        Verdict::Timeout => "TIMED OUT".into(),
        Verdict::Skip => format!(
            "skipped ({})",
            c.message.as_deref().unwrap_or("no reason given")
        ),
    }
}

fn print_summary(report: &Report) {
    let bad: Vec<&Case> = report
        .cases
        .iter()
        .filter(|c| {
            matches!(
                c.verdict,
                Verdict::Fail | Verdict::Error | Verdict::Crash | Verdict::Timeout
            )
        })
        .collect();
    if !bad.is_empty() {
        println!("\nfailures:");
        for c in &bad {
            println!("\n---- {} ----", c.id);
            if let Some(m) = &c.message {
                println!("  {m}");
            }
            for d in &c.differences {
                println!("  - {d}");
            }
            if let Some(out) = &c.output {
                let lines: Vec<&str> = out.lines().collect();
                println!(
                    "  output ({} lines{}):",
                    lines.len(),
                    if lines.len() > 10 { ", first 10" } else { "" }
                );
                for l in lines.iter().take(10) {
                    println!("    | {}", l.chars().take(200).collect::<String>());
                }
            }
            println!("  replay: {}", c.replay);
        }
        println!();
    }
    let s = &report.summary;
    println!(
        "roundtrip result: {}. {} passed; {} failed; {} errors; {} crashed; {} timed out; {} skipped; finished in {:.2}s",
        if s.ok() { "ok" } else { "FAILED" },
        s.passed,
        s.failed,
        s.errors,
        s.crashed,
        s.timed_out,
        s.skipped,
        report.duration_ms as f64 / 1000.0
    );
}

//! `arrowcert certify --producer LIB`: rule-by-rule verdicts on a
//! producer's export paths, with evidence and a replay for every failure.

use std::cell::RefCell;
use std::path::PathBuf;
use std::time::{Instant, SystemTime};

use super::roundtrip::{shell_word, verdict_word, Checkpoint};
use super::{BadInput, EXIT_FAILURES};
use crate::certify::{self, summary};
use crate::plugin::Plugin;
use crate::report::{self, Case, PluginIdentity, Report, Summary, Verdict};
use crate::roundtrip::Filter;
use crate::run::{self, worker::identity};
use crate::scenario::{self, Scenario};

/// The rule areas producer certification judges (async has its own suite).
pub const AREAS: &[&str] = &["schema", "array", "device", "stream"];

pub struct Args {
    pub producer: PathBuf,
    pub producer_arg: String,
    pub gold: Option<PathBuf>,
    pub report: Option<PathBuf>,
    pub junit: Option<PathBuf>,
    pub filter: Filter,
    pub list: bool,
    pub verbose: bool,
    pub invocation: Vec<String>,
    /// Worker processes; 0 runs in this process.
    pub jobs: usize,
    pub case_timeout_ms: u64,
    pub max_memory_mb: u64,
}

/// Runs the command; returns the exit code (0: every MUST rule holds).
pub fn run(args: Args) -> Result<i32, BadInput> {
    let (scenarios, data): (Vec<Scenario>, String) = match &args.gold {
        Some(dir) => (
            scenario::gold_dir(dir).map_err(BadInput)?,
            dir.display().to_string(),
        ),
        None => (scenario::builtin(), "built-in".into()),
    };
    let mut replay = format!(
        "arrowcert certify --producer {}",
        shell_word(&args.producer_arg)
    );
    if let Some(dir) = &args.gold {
        replay.push_str(&format!(
            " --gold {}",
            shell_word(&dir.display().to_string())
        ));
    }
    replay.push_str(" --in-process --exact");
    let opts = certify::Options {
        replay_prefix: replay,
        ..Default::default()
    };
    let plan = certify::plan(&scenarios);
    if args.list {
        for spec in plan.iter().filter(|s| args.filter.selects(&s.id)) {
            println!("{}: case", spec.id);
        }
        return Ok(0);
    }
    let selected: Vec<usize> = (0..plan.len())
        .filter(|&i| args.filter.selects(&plan[i].id))
        .collect();

    let started = SystemTime::now();
    let clock = Instant::now();
    let path = args.report.clone().unwrap_or_else(|| {
        PathBuf::from("reports").join(format!("certify-{}.json", report::time::compact(started)))
    });
    let checkpoint = RefCell::new(Checkpoint {
        report: Report {
            report_version: report::REPORT_VERSION,
            tool: Default::default(),
            command: "certify".into(),
            invocation: args.invocation.clone(),
            started_at: report::time::rfc3339(started),
            finished_at: report::time::rfc3339(started),
            duration_ms: 0,
            complete: false,
            planned: selected.len() as u64,
            interrupted: None,
            plugins: Vec::new(),
            data: data.clone(),
            devices: vec!["cpu".into()],
            cases: Vec::new(),
            summary: Summary::default(),
            rules: Vec::new(),
        },
        path: path.clone(),
        position: plan
            .iter()
            .enumerate()
            .map(|(i, s)| (s.id.clone(), i))
            .collect(),
        last: Instant::now(),
        error: None,
    });
    run::proc::catch_interrupts();
    let verbose = args.verbose;
    let print = |c: &Case| {
        if verbose || !matches!(c.verdict, Verdict::Pass | Verdict::Skip) {
            println!("case {} ... {}", c.id, verdict_word(c));
        }
        checkpoint.borrow_mut().add(c);
    };
    let header = |name: &str, how: &str| {
        println!(
            "arrowcert certify: producer {name} ({} cases over {} scenarios from {data}, {how})",
            selected.len(),
            scenarios.len()
        )
    };
    let interrupted = if args.jobs == 0 {
        let producer = Plugin::load(&args.producer).map_err(|e| BadInput(e.to_string()))?;
        header(producer.name(), "in this process");
        checkpoint.borrow_mut().report.plugins = vec![identity("producer", &producer)];
        for &i in &selected {
            if run::proc::interrupted().is_some() {
                break;
            }
            let spec = &plan[i];
            print(&certify::run_case(
                &producer,
                &scenarios[spec.scenario],
                spec,
                &opts,
            ));
        }
        run::proc::interrupted()
    } else {
        let worker_args = run::worker::WorkerArgs {
            socket: PathBuf::new(),
            mode: run::worker::Mode::CertifyProducer,
            producer: args.producer.clone(),
            consumer: None,
            gold: args.gold.clone(),
            options: crate::roundtrip::Options {
                replay_prefix: opts.replay_prefix.clone(),
                ..Default::default()
            },
            limits: run::proc::Limits::worker(args.max_memory_mb),
            cpu_seconds: None,
        };
        let cfg = run::Config::for_workers(
            worker_args,
            args.jobs,
            args.case_timeout_ms,
            args.max_memory_mb,
        )
        .map_err(|e| BadInput(format!("cannot find the arrowcert executable: {e}")))?;
        let jobs: Vec<run::Job> = selected
            .iter()
            .map(|&index| run::Job {
                index,
                record: certify::record(&scenarios[plan[index].scenario], &plan[index], &opts),
            })
            .collect();
        let how = format!("{} worker processes", args.jobs);
        let ready = |plugins: &[PluginIdentity]| {
            header(plugins.first().map(|p| p.name.as_str()).unwrap_or(""), &how);
            checkpoint.borrow_mut().report.plugins = plugins.to_vec();
        };
        let outcome = run::run(&cfg, plan.len(), jobs, ready, print);
        let _ = std::fs::remove_dir_all(&cfg.scratch);
        outcome
            .map_err(|run::StartError(why)| BadInput(format!("cannot run the plugin: {why}")))?
            .interrupted
    };
    let report = checkpoint.into_inner().finish(interrupted, clock, |r| {
        r.rules = summary::rule_verdicts(&r.cases, AREAS);
    })?;
    print!("{}", summary::render(&report.rules, &report.cases));
    let s = &report.summary;
    let musts = summary::musts_pass(&report.rules);
    let crashed = s.crashed + s.timed_out;
    println!(
        "\ncertify result: {}. {} cases: {} passed; {} failed; {} errors; {} crashed; {} timed out; {} skipped; finished in {:.2}s",
        if musts && crashed == 0 { "ok" } else { "FAILED" },
        s.total,
        s.passed,
        s.failed,
        s.errors,
        s.crashed,
        s.timed_out,
        s.skipped,
        report.duration_ms as f64 / 1000.0
    );
    if let Some(junit) = &args.junit {
        let xml = summary::junit(
            &report.rules,
            &format!("arrowcert certify {}", args.producer_arg),
        );
        std::fs::write(junit, xml)
            .map_err(|e| BadInput(format!("{}: cannot write JUnit XML: {e}", junit.display())))?;
    }
    println!("report: {}", path.display());
    if let Some(sig) = interrupted {
        println!(
            "interrupted by {}: {} of {} cases ran; the report is marked incomplete",
            run::proc::signal_name(sig),
            report.cases.len(),
            selected.len()
        );
        return Ok(128 + sig);
    }
    // Crashes and hangs are failures too: the case could not be judged.
    Ok(if musts && crashed == 0 {
        0
    } else {
        EXIT_FAILURES
    })
}

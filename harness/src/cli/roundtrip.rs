//! `arrowcert roundtrip`: producer -> harness -> consumer on every path.

use std::path::PathBuf;
use std::time::{Instant, SystemTime};

use crate::plugin::Plugin;
use crate::report::{self, Case, PluginIdentity, Report, Summary, Verdict};
use crate::roundtrip::{self, Filter, Options};
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
}

fn identity(role: &str, p: &Plugin) -> PluginIdentity {
    PluginIdentity {
        role: role.into(),
        name: p.name().into(),
        path: p.path().display().to_string(),
        sha256: report::sha256_file(p.path()).unwrap_or_default(),
        abi_version: p.abi_version(),
        entry_points: p.symbols().iter().map(|s| s.to_string()).collect(),
    }
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
    let producer = Plugin::load(&args.producer).map_err(|e| BadInput(e.to_string()))?;
    let consumer = Plugin::load(&args.consumer).map_err(|e| BadInput(e.to_string()))?;
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

    if args.list {
        for spec in roundtrip::plan(&scenarios) {
            if args.filter.selects(&spec.id) {
                println!("{}: case", spec.id);
            }
        }
        return Ok(0);
    }

    let started = SystemTime::now();
    let clock = Instant::now();
    println!(
        "arrowcert roundtrip: {} -> {} ({} scenarios from {data})",
        producer.name(),
        consumer.name(),
        scenarios.len()
    );
    let verbose = args.verbose;
    let cases = roundtrip::run(&producer, &consumer, &scenarios, &args.filter, &opts, |c| {
        if verbose || c.verdict != Verdict::Pass {
            println!("case {} ... {}", c.id, verdict_word(c));
        }
    });
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
        plugins: vec![
            identity("producer", &producer),
            identity("consumer", &consumer),
        ],
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

fn verdict_word(c: &Case) -> String {
    match c.verdict {
        Verdict::Pass => "ok".into(),
        Verdict::Fail => "FAILED".into(),
        Verdict::Error => "ERROR".into(),
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
        .filter(|c| matches!(c.verdict, Verdict::Fail | Verdict::Error))
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
            println!("  replay: {}", c.replay);
        }
        println!();
    }
    let s = &report.summary;
    println!(
        "roundtrip result: {}. {} passed; {} failed; {} errors; {} skipped; finished in {:.2}s",
        if s.ok() { "ok" } else { "FAILED" },
        s.passed,
        s.failed,
        s.errors,
        s.skipped,
        report.duration_ms as f64 / 1000.0
    );
}

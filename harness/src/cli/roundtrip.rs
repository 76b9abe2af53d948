//! `arrowcert roundtrip`: producer -> harness -> consumer on every path.

use std::path::PathBuf;

use crate::engine;
use crate::report::{self, Case, PluginIdentity, Report, Verdict};
use crate::roundtrip::{self, Filter, Options};
use crate::run;
use crate::scenario::Scenario;

use super::words::{counts, resume_command, shell_word, verdict_word};
use super::{BadInput, EXIT_FAILURES};

pub struct Args {
    pub producer: PathBuf,
    pub consumer: PathBuf,
    pub producer_arg: String,
    pub consumer_arg: String,
    pub gold: Option<PathBuf>,
    /// Generated scenarios to add (0: none), drawn with `seed`.
    pub cases: u64,
    pub seed: u64,
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
    /// Memory limit of each worker, in MiB (`run::proc::Limits::worker`).
    pub max_memory_mb: u64,
    /// A report of an interrupted run to continue.
    pub resume: Option<PathBuf>,
    /// `--expectations FILE`, read: the run passes when its results match.
    pub expectations: Option<(PathBuf, crate::report::expectations::Expectations)>,
}

/// Runs the command; returns the exit code.
pub fn run(args: Args) -> Result<i32, BadInput> {
    // Built-in scenarios, or the gold files in their place; plus any
    // generated ones.
    let sources = crate::sources::Sources {
        generated: args.cases,
        seed: args.seed,
        ..crate::sources::Sources::builtin_or_gold(args.gold.clone())
    };
    let scenarios: Vec<Scenario> = sources.load().map_err(BadInput)?;
    let data = sources.describe();

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
    if args.cases > 0 {
        replay.push_str(&format!(" --cases {} --seed {}", args.cases, args.seed));
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

    let mut printer = Printer {
        verbose: args.verbose,
        scenarios: scenarios.len(),
        data: &data,
        how: if args.jobs == 0 {
            "in this process".to_string()
        } else {
            format!("{} worker processes", args.jobs)
        },
    };
    let ran = engine::roundtrip::run_all(
        engine::roundtrip::Request {
            sources: &sources,
            scenarios: &scenarios,
            plan: &plan,
            filter: &args.filter,
            resume: args.resume.as_deref(),
            report: args.report.clone(),
            invocation: args.invocation.clone(),
            seed: (args.cases > 0).then_some(args.seed),
            expectations: args.expectations.as_ref(),
        },
        engine::roundtrip::Engine {
            jobs: args.jobs,
            producer: args.producer.clone(),
            consumer: args.consumer.clone(),
            case_timeout_ms: args.case_timeout_ms,
            max_memory_mb: args.max_memory_mb,
            opts,
        },
        &mut printer,
    )
    .map_err(BadInput)?;
    let (report, interrupted, selected) = (ran.report, ran.interrupted, ran.selected);
    let path = ran.path.unwrap_or_default();
    print_summary(&report);
    println!("report: {}", path.display());
    if let Some(sig) = interrupted {
        println!(
            "interrupted by {}: {} of {} cases ran; the report is marked incomplete.\nresume with: {} --resume {}",
            run::proc::signal_name(sig),
            report.cases.len(),
            selected,
            resume_command(&args.invocation),
            shell_word(&path.display().to_string())
        );
        return Ok(128 + sig);
    }
    Ok(report
        .outcome
        .as_ref()
        .map_or(EXIT_FAILURES, |j| j.exit_code()))
}

/// What a round trip prints as it goes: the header once the plugins are
/// loaded, and the cases that did not pass (every case when verbose).
struct Printer<'a> {
    verbose: bool,
    scenarios: usize,
    data: &'a str,
    /// Where the cases run.
    how: String,
}

impl crate::engine::session::Events for Printer<'_> {
    fn start(&mut self, _todo: usize, resuming: Option<&str>) {
        if let Some(words) = resuming {
            println!("{words}");
        }
    }

    fn ready(&mut self, plugins: &[PluginIdentity]) {
        let name = |role: &str| {
            plugins
                .iter()
                .find(|p| p.role == role)
                .map(|p| p.name.clone())
                .unwrap_or_default()
        };
        header(
            &name("producer"),
            &name("consumer"),
            self.scenarios,
            self.data,
            &self.how,
        );
    }

    fn case(&mut self, c: &Case, _new: bool) {
        if self.verbose || c.verdict != Verdict::Pass {
            println!("case {} ... {}", c.id, verdict_word(c));
        }
    }

    fn cases_done(&mut self) {}
}

fn header(producer: &str, consumer: &str, scenarios: usize, data: &str, how: &str) {
    println!(
        "arrowcert roundtrip: {producer} -> {consumer} ({scenarios} scenarios from {data}, {how})"
    );
}

fn print_summary(report: &Report) {
    let bad: Vec<&Case> = report
        .cases
        .iter()
        .filter(|c| {
            matches!(
                c.verdict,
                Verdict::Fail
                    | Verdict::Error
                    | Verdict::Crash
                    | Verdict::Timeout
                    | Verdict::HarnessError
            )
        })
        .collect();
    if !bad.is_empty() {
        println!("\nfailures:");
        for c in &bad {
            println!("\n---- {} ----", c.id);
            if let Some(m) = &c.message {
                println!("  {}", report::printable(m));
            }
            for d in &c.differences {
                println!("  - {}", report::printable(d));
            }
            if let Some(out) = &c.output {
                let lines: Vec<&str> = out.lines().collect();
                println!(
                    "  output ({} lines{}):",
                    lines.len(),
                    if lines.len() > 10 { ", first 10" } else { "" }
                );
                for l in lines.iter().take(10) {
                    println!(
                        "    | {}",
                        report::printable(&l.chars().take(200).collect::<String>())
                    );
                }
            }
            println!("  replay: {}", c.replay);
        }
        println!();
    }
    let changed: Vec<&Case> = report
        .cases
        .iter()
        .filter(|c| c.passed_with_changes())
        .collect();
    if !changed.is_empty() {
        println!(
            "\npassed with changes ({} cases: every value arrived, but types, nullability, names or metadata changed; not a failure):",
            changed.len()
        );
        const SHOWN: usize = 10;
        for c in changed.iter().take(SHOWN) {
            println!("  {}: {}", c.id, report::printable(&c.changed[0]));
        }
        if changed.len() > SHOWN {
            println!(
                "  ... and {} more (the report lists each)",
                changed.len() - SHOWN
            );
        }
        println!();
    }
    print_limitations(report);
    let s = &report.summary;
    let judgement = report
        .outcome
        .clone()
        .unwrap_or(report::outcome::Judgement {
            outcome: report::outcome::Outcome::NotCertified,
            reasons: vec!["the run was not judged".into()],
        });
    println!(
        "roundtrip result: {}. {}",
        judgement.outcome.words(),
        counts(s, report.duration_ms)
    );
    for reason in &judgement.reasons {
        println!("  {}", report::printable(reason));
    }
    super::certify::print_unused_expectations(report);
}

/// The limitations a library declared, grouped by its message (a library
/// that does not support a type says so once per case).
pub(super) fn print_limitations(report: &Report) {
    if report.limitations.is_empty() {
        return;
    }
    let mut by_message: Vec<(String, &str, usize)> = Vec::new();
    for l in &report.limitations {
        let key = format!("{}: {}", l.library, l.message);
        match by_message.iter_mut().find(|(k, _, _)| *k == key) {
            Some((_, _, n)) => *n += 1,
            None => by_message.push((key, &l.case, 1)),
        }
    }
    println!(
        "\nlimitations ({} cases the consumer declined cleanly, as the spec permits; not failures):",
        report.limitations.len()
    );
    const SHOWN: usize = 10;
    for (key, first, n) in by_message.iter().take(SHOWN) {
        println!("  {n} x {} (first: {first})", report::printable(key));
    }
    if by_message.len() > SHOWN {
        println!(
            "  ... and {} more messages (the report lists each)",
            by_message.len() - SHOWN
        );
    }
}

/// The flags of `arrowcert roundtrip` (their help is the command's).
#[derive(clap::Args)]
pub struct RoundtripFlags {
    /// Producer plugin: a path, or a bundled name.
    #[arg(long, default_value = "reference")]
    pub producer: String,
    /// Consumer plugin: a path, or a bundled name.
    #[arg(long, default_value = "reference")]
    pub consumer: String,
    /// A directory of Arrow IPC stream files (`*.stream`), e.g. Arrow's
    /// integration gold files; without it, the built-in scenarios.
    #[arg(long)]
    pub gold: Option<PathBuf>,
    /// Generated scenarios to add (drawn with --seed); 0 for none.
    #[arg(long, default_value_t = 0)]
    pub cases: u64,
    /// The seed generated scenarios are drawn with (default: a fresh
    /// one, kept in the report).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Where to write the JSON report (default: reports/roundtrip-<time>.json).
    #[arg(long)]
    pub report: Option<PathBuf>,
    #[command(flatten)]
    pub filter: super::FilterFlags,
    /// List the case IDs and exit.
    #[arg(long)]
    pub list: bool,
    /// Print every case, not only failures.
    #[arg(short, long)]
    pub verbose: bool,
    /// How long an async consumer may wait for the stream to end.
    #[arg(long, default_value_t = 30_000)]
    pub timeout_ms: i64,
    /// Worker processes (default: one per core); 0 runs every case in
    /// this process, where a crashing plugin ends the run.
    /// Disk: each worker's output (a plugin's stdout and stderr) is kept to
    /// 16 MiB (so a run's disk use is at most 16 MiB per worker), a case's
    /// report keeps 64 KiB of it and the whole report 4 MiB (the rest is
    /// counted and discarded), and the scratch directory goes at the end
    /// of the run (or with the workers, if the run is killed).
    #[arg(long, short = 'j')]
    pub jobs: Option<usize>,
    /// Same as `--jobs 0`.
    #[arg(long)]
    pub in_process: bool,
    /// A case with no result after this long is a timeout.
    #[arg(long, default_value_t = 60_000)]
    pub case_timeout_ms: u64,
    /// Memory limit of each worker process, in MiB: its address space
    /// (RLIMIT_AS), or its private data (RLIMIT_DATA) on a machine whose
    /// CUDA driver loads (the driver reserves address space beyond any
    /// such bound).
    #[arg(long, default_value_t = 8192)]
    pub max_memory_mb: u64,
    /// Continue an interrupted run: keep the cases this report already
    /// has, run the rest, and write the merged report (to this file
    /// unless --report says otherwise). The plugins and data must be
    /// the ones the report was made with.
    #[arg(long, value_name = "REPORT")]
    pub resume: Option<PathBuf>,
    /// Known results of this pair (JSON: case-ID patterns -> expected
    /// outcome, reason, link): the run passes when its results match.
    #[arg(long, value_name = "FILE")]
    pub expectations: Option<PathBuf>,
}

/// `arrowcert roundtrip`, from its flags.
pub fn roundtrip_command(f: RoundtripFlags) -> Result<i32, BadInput> {
    let RoundtripFlags {
        producer,
        consumer,
        gold,
        cases,
        seed,
        report,
        filter,
        list,
        verbose,
        timeout_ms,
        jobs,
        in_process,
        case_timeout_ms,
        max_memory_mb,
        resume,
        expectations,
    } = f;
    run(Args {
        expectations: super::read_expectations(expectations)?,
        producer: crate::registry::resolve_plugin(&producer, "producer")?,
        consumer: crate::registry::resolve_plugin(&consumer, "consumer")?,
        producer_arg: producer,
        consumer_arg: consumer,
        gold,
        cases,
        seed: super::seed_for(seed, resume.as_deref())?,
        report,
        filter: filter.filter(),
        list,
        verbose,
        timeout_ms,
        invocation: std::env::args().collect(),
        jobs: super::worker_count(jobs, in_process),
        case_timeout_ms,
        max_memory_mb,
        resume,
    })
}

//! `arrowcert certify --producer LIB`: rule-by-rule verdicts on a
//! producer's export paths, with evidence, the smallest failing generated
//! scenario, and a replay command for every failure. `arrowcert replay`
//! reruns chosen cases of such a run.

use std::cell::RefCell;
use std::path::PathBuf;

use super::progress::Progress;
use super::words::{counts, resume_command, shell_word, verdict_word};
use super::BadInput;
use crate::certify::{self, summary};
use crate::device::Kind as DeviceKind;
use crate::engine::certification;
use crate::generate::shrink;
use crate::report::{self, outcome, Case, PluginIdentity, Report, Verdict};
use crate::roundtrip::Filter;
use crate::run;
use crate::sources::Sources;

/// A plugin under test: where it is, and how the user named it.
#[derive(Debug, Clone)]
pub struct Lib {
    pub path: PathBuf,
    pub arg: String,
}

pub struct Args {
    /// The producer to certify (its side runs when given).
    pub producer: Option<Lib>,
    /// The consumer to certify (its side runs when given).
    pub consumer: Option<Lib>,
    /// Built-in, gold and generated scenarios (`--cases`, `--seed`).
    pub sources: Sources,
    pub report: Option<PathBuf>,
    pub junit: Option<PathBuf>,
    /// `--expectations FILE`, read: the run passes when its results match.
    pub expectations: Option<(PathBuf, crate::report::expectations::Expectations)>,
    pub filter: Filter,
    pub list: bool,
    pub verbose: bool,
    pub invocation: Vec<String>,
    /// Worker processes; 0 runs in this process.
    pub jobs: usize,
    pub case_timeout_ms: u64,
    pub max_memory_mb: u64,
    /// How hard to shrink failures on generated scenarios (0 candidates:
    /// not at all).
    pub shrink: shrink::Budget,
    /// `arrowcert replay`: print every violation in full, no shrinking, no
    /// report file unless `report` names one.
    pub replay: bool,
    /// Continue the interrupted run of this report (same producer file,
    /// same data and seed): its cases are kept, the rest run.
    pub resume: Option<PathBuf>,
    /// The device types the run covers (`--device`); `None`: the CPU and
    /// every other device type this machine has.
    pub devices: Option<Vec<DeviceKind>>,
    /// Device types that must be present (`--require-device`): a missing
    /// one is an error, not skipped cases.
    pub require_devices: Vec<DeviceKind>,
    /// `--all-variations`: every variation of the varied encoding alone on
    /// every consumer data path for every scenario, not the covering choice.
    pub all_variations: bool,
    /// `--all-leaks`: the frees rules measured on every scenario, not the
    /// covering choice.
    pub all_leaks: bool,
    /// `--repeat N`: every case that did not pass runs N more times.
    pub repeat: u32,
    /// `--malformed`: also hand the consumer what each producer mutant
    /// breaks and grade what it does (crate::malformed), apart from the
    /// rules and the outcome.
    pub malformed: bool,
    /// What workers run under (`replay --under valgrind`,
    /// [`crate::run::under`]); empty: nothing.
    pub wrapper: Vec<String>,
}

/// The device types a run covers, and a line on the ones left out.
fn devices_of(args: &Args) -> Result<(Vec<DeviceKind>, Vec<String>), BadInput> {
    let mut devices: Vec<DeviceKind> = match &args.devices {
        Some(d) => d.clone(),
        None => DeviceKind::ALL
            .into_iter()
            .filter(|&k| k == DeviceKind::Cpu || crate::device::available(k).is_ok())
            .collect(),
    };
    for &r in &args.require_devices {
        if let Err(why) = crate::device::available(r) {
            return Err(BadInput(format!(
                "--require-device {r}: this machine has no {r} device: {why}"
            )));
        }
        if !devices.contains(&r) {
            devices.push(r);
        }
    }
    devices.sort();
    devices.dedup();
    let left_out = DeviceKind::ALL
        .into_iter()
        .filter(|k| !devices.contains(k))
        .map(|k| match crate::device::available(k) {
            Ok(()) => format!("{k}: not selected"),
            Err(why) => format!("{k}: {why}"),
        })
        .collect();
    Ok((devices, left_out))
}

/// The command that reruns one case of this run (the case ID follows).
fn replay_prefix(args: &Args) -> String {
    let mut replay = "arrowcert replay".to_string();
    if let Some(p) = &args.producer {
        replay.push_str(&format!(" --producer {}", shell_word(&p.arg)));
    }
    if let Some(c) = &args.consumer {
        replay.push_str(&format!(" --consumer {}", shell_word(&c.arg)));
    }
    if let Some(dir) = &args.sources.gold {
        replay.push_str(&format!(
            " --gold {}",
            shell_word(&dir.display().to_string())
        ));
    }
    replay.push_str(&format!(" --seed {}", args.sources.seed));
    if args.all_leaks {
        replay.push_str(" --all-leaks");
    }
    replay
}

/// Runs the command; returns the exit code (0: every MUST rule holds).
pub fn run(args: Args) -> Result<i32, BadInput> {
    let sources = &args.sources;
    let scenarios = sources.load().map_err(BadInput)?;
    let data = sources.describe();
    let (devices, left_out) = devices_of(&args)?;
    // Before the certification runs: a missing reference producer is bad
    // input, not the end of a long run.
    let malformed_base = match (&args.consumer, args.malformed && !args.list) {
        (Some(_), true) => Some(
            crate::registry::resolve_plugin("reference", "producer").map_err(|why| {
                BadInput(format!(
                    "--malformed wraps the reference producer in the mutants: {why}"
                ))
            })?,
        ),
        _ => None,
    };
    let request = certification::Request {
        sources,
        scenarios: &scenarios,
        sides: args.sides(),
        devices: &devices,
        filter: &args.filter,
        all_variations: args.all_variations,
        replay: args.replay,
        resume: args.resume.as_deref(),
        report: args.report.clone(),
        invocation: args.invocation.clone(),
        producer: args.producer.as_ref().map(|l| l.path.as_path()),
        consumer: args.consumer.as_ref().map(|l| l.path.as_path()),
        jobs: args.jobs,
        case_timeout_ms: args.case_timeout_ms,
        max_memory_mb: args.max_memory_mb,
        wrapper: args.wrapper.clone(),
        opts: certify::Options {
            replay_prefix: replay_prefix(&args),
            all_leaks: args.all_leaks,
            ..Default::default()
        },
        repeat: args.repeat,
        shrink: args.shrink,
        expectations: args.expectations.as_ref(),
    };
    let plan = certification::plan(&request);
    if args.list {
        for i in &plan.selected {
            println!("{}: case", plan.specs[*i].id);
        }
        if args.malformed {
            for spec in crate::malformed::plan()
                .iter()
                .filter(|s| malformed_selects(&args.filter, &s.id))
            {
                println!("{}: malformed case (robustness, not a rule)", spec.id);
            }
        }
        return Ok(0);
    }
    if args.replay && plan.selected.is_empty() {
        return Err(BadInput(format!(
            "no case of {} matches {}",
            data,
            args.filter.patterns.join(" ")
        )));
    }
    let mut printer = Printer {
        args: &args,
        header: format!(
            "({} cases over {} scenarios from {data}, {})",
            plan.selected.len(),
            scenarios.len(),
            if args.jobs == 0 {
                "in this process".to_string()
            } else {
                format!("{} worker processes", args.jobs)
            }
        ),
        devices: format!(
            "devices: {}{}",
            devices
                .iter()
                .map(|d| d.name())
                .collect::<Vec<_>>()
                .join(", "),
            if left_out.is_empty() {
                String::new()
            } else {
                format!(" (not covered: {})", left_out.join("; "))
            }
        ),
        progress: None,
    };
    let ran = certification::run(request, plan, &mut printer, |interrupted| {
        match (&args.consumer, malformed_base) {
            (Some(consumer), Some(base)) if !interrupted => run_malformed(&args, consumer, base)
                .map(Some)
                .map_err(|e| e.0),
            _ => Ok(None),
        }
    })
    .map_err(BadInput)?;
    let report = &ran.report;
    let judgement = report.outcome.clone().expect("finish judged the run");
    print_result(report, &judgement, args.replay);
    if let Some(junit) = &args.junit {
        let suite = format!("arrowcert certify {}", args.subjects());
        let xml = summary::junit(&report.rules, &report.cases, &suite);
        let xml = match &report.robustness {
            Some(r) => crate::malformed::junit_with(&xml, r, &suite),
            None => xml,
        };
        std::fs::write(junit, xml)
            .map_err(|e| BadInput(format!("{}: cannot write JUnit XML: {e}", junit.display())))?;
    }
    if let Some(path) = &ran.path {
        println!("report: {}", path.display());
    }
    if let Some(sig) = ran.interrupted {
        println!(
            "interrupted by {}: {} of {} cases ran; the report is marked incomplete",
            run::proc::signal_name(sig),
            report.cases.len(),
            ran.selected
        );
        if let Some(path) = &ran.path {
            println!(
                "resume with: {} --resume {}",
                resume_command(&args.invocation),
                shell_word(&path.display().to_string())
            );
        }
        return Ok(128 + sig);
    }
    if let Some(code) = required_devices_unused(&args.require_devices, &report.cases) {
        return Ok(code);
    }
    // Crashes, hangs and errors are failures too; nothing exercised is
    // not a pass (report::outcome).
    Ok(judgement.exit_code())
}

/// What `certify` and `replay` print as a run goes: the header once the
/// plugins are loaded, a progress bar, and the cases that did not pass
/// (every case when verbose; with their evidence for a replay).
struct Printer<'a> {
    args: &'a Args,
    /// The header's tail: cases, scenarios, data, where cases run.
    header: String,
    /// The devices line (not for a replay).
    devices: String,
    progress: Option<Progress>,
}

impl Printer<'_> {
    fn progress(&mut self) -> &mut Progress {
        self.progress.get_or_insert_with(|| Progress::new(0))
    }
}

fn failed(c: &Case) -> bool {
    !matches!(
        c.verdict,
        Verdict::Pass | Verdict::Skip | Verdict::Limitation
    )
}

impl crate::engine::session::Events for Printer<'_> {
    fn start(&mut self, todo: usize, resuming: Option<&str>) {
        if let Some(words) = resuming {
            println!("{words}");
        }
        self.progress = Some(Progress::new(todo));
    }

    fn ready(&mut self, plugins: &[PluginIdentity]) {
        let who: Vec<String> = plugins
            .iter()
            .map(|p| format!("{} {}", p.role, p.name))
            .collect();
        println!(
            "arrowcert {}: {} {}",
            if self.args.replay {
                "replay"
            } else {
                "certify"
            },
            who.join(", "),
            self.header
        );
        if !self.args.replay {
            println!("{}", self.devices);
        }
    }

    fn case(&mut self, c: &Case, new: bool) {
        let failed = failed(c);
        if self.args.verbose || self.args.replay || failed {
            self.progress().clear();
            println!("case {} ... {}", c.id, verdict_word(c));
            if self.args.replay {
                print_evidence(c);
            }
        }
        if new {
            self.progress().tick(failed);
        }
    }

    fn cases_done(&mut self) {
        self.progress().clear();
    }

    fn follow_up(&mut self, c: &Case) {
        if self.args.verbose || failed(c) {
            println!("case {} ... {}", c.id, verdict_word(c));
        }
    }

    fn flaky(&mut self, c: &Case) {
        let words: Vec<&str> = c.flaky.iter().map(|v| v.as_str()).collect();
        println!("case {} ... flaky ({})", c.id, words.join(", "));
    }
}

/// Whether the filter selects a malformed case: filters that name no
/// malformed case (`consumer/array`) narrow the certification only, so
/// every malformed case runs; `--skip` applies to both.
fn malformed_selects(filter: &Filter, id: &str) -> bool {
    if filter.patterns.iter().any(|p| p.starts_with("malformed")) {
        filter.selects(id)
    } else {
        Filter {
            patterns: Vec::new(),
            ..filter.clone()
        }
        .selects(id)
    }
}

/// `--malformed`: every malformed case on `consumer`, in workers (always:
/// a crash is what they look for), printed as they end when verbose or
/// when the consumer crashed or hung.
fn run_malformed(
    args: &Args,
    consumer: &Lib,
    base: PathBuf,
) -> Result<crate::report::robustness::Robustness, BadInput> {
    let planned = crate::malformed::plan()
        .iter()
        .filter(|s| malformed_selects(&args.filter, &s.id))
        .count();
    println!(
        "malformed: {planned} cases, each producer mutant's broken structure handed to {} (robustness, apart from the rules)",
        consumer.arg
    );
    let engine = crate::engine::malformed::Engine {
        consumer: consumer.path.clone(),
        base,
        jobs: args.jobs.max(1),
        case_timeout_ms: args.case_timeout_ms,
        max_memory_mb: args.max_memory_mb,
    };
    let progress = RefCell::new(Progress::new(planned));
    let robustness = engine
        .run(&|id| malformed_selects(&args.filter, id), &mut |c| {
            let loud = matches!(c.result.as_str(), "crashed" | "hung");
            if args.verbose || loud {
                progress.borrow_mut().clear();
                println!(
                    "case {} ... {}{}",
                    c.id,
                    c.result,
                    c.detail
                        .as_deref()
                        .filter(|_| loud)
                        .map(|d| format!(": {d}"))
                        .unwrap_or_default()
                );
            }
            progress.borrow_mut().tick(loud);
        })
        .map_err(BadInput)?;
    progress.borrow_mut().clear();
    Ok(robustness)
}

/// `--require-device`: exit 2, after one line, when cases on a required
/// device were skipped as missing anyway (a worker process could not use
/// it; [`crate::device::skipped_though_required`]).
pub(super) fn required_devices_unused(required: &[DeviceKind], cases: &[Case]) -> Option<i32> {
    let skipped = cases
        .iter()
        .filter(|c| c.verdict == Verdict::Skip)
        .filter_map(|c| c.message.as_deref());
    let line = crate::device::skipped_though_required(required, skipped)?;
    eprintln!("arrowcert: {line}");
    Some(2)
}

/// The end of a run: the rule summary, the result line with every count,
/// the reasons for the outcome, expectations that matched nothing, and the
/// seed of generated scenarios.
fn print_result(report: &Report, judgement: &outcome::Judgement, replay: bool) {
    print!(
        "{}",
        summary::render(&report.rules, &report.cases, &report.shrunk)
    );
    print!("{}", crate::engine::coverage::render(&report.coverage));
    if let Some(r) = &report.robustness {
        print!("{}", crate::malformed::render(r));
    }
    let s = &report.summary;
    println!(
        "\n{} result: {}. {} cases: {}",
        if replay { "replay" } else { "certify" },
        judgement.outcome.words(),
        s.total,
        counts(s, report.duration_ms)
    );
    for reason in &judgement.reasons {
        println!("  {}", report::printable(reason));
    }
    let flaky: Vec<&Case> = report
        .cases
        .iter()
        .filter(|c| !c.flaky.is_empty())
        .collect();
    if !flaky.is_empty() {
        println!(
            "  {} case(s) flaky (the verdict changed when run again; the first run's counts):",
            flaky.len()
        );
        for c in flaky.iter().take(10) {
            let seen: Vec<&str> = c.flaky.iter().map(|v| v.as_str()).collect();
            println!("    {} ({})", c.id, seen.join(", "));
        }
        if flaky.len() > 10 {
            println!("    ... {} more in the report", flaky.len() - 10);
        }
    }
    print_unused_expectations(report);
    if let Some(seed) = report.seed {
        println!("seed: {seed} (--seed {seed} draws the same generated scenarios)");
    }
}

/// Every violation of a case, in full (what `arrowcert replay` shows).
fn print_evidence(c: &Case) {
    if let Some(m) = &c.message {
        println!("  {}", report::printable(m));
    }
    for v in &c.violations {
        println!(
            "  {} {} at {}: {}",
            v.level,
            v.rule,
            v.at,
            report::printable(&v.evidence)
        );
    }
}

impl Args {
    /// The sides this run certifies.
    pub fn sides(&self) -> certify::Sides {
        certify::Sides {
            producer: self.producer.is_some(),
            consumer: self.consumer.is_some(),
        }
    }

    /// `--producer X --consumer Y`, as given.
    fn subjects(&self) -> String {
        let mut out = Vec::new();
        if let Some(p) = &self.producer {
            out.push(format!("--producer {}", p.arg));
        }
        if let Some(c) = &self.consumer {
            out.push(format!("--consumer {}", c.arg));
        }
        out.join(" ")
    }
}

/// Expectations that matched nothing in this run (a filter left them out,
/// or the finding is gone and the entry is stale).
pub(super) fn print_unused_expectations(report: &Report) {
    if let Some(c) = report
        .expectations
        .as_ref()
        .filter(|c| !c.unused.is_empty())
    {
        println!(
            "  expectations of {} that matched nothing in this run: {}",
            c.file,
            c.unused.join(", ")
        );
    }
}

/// The flags of `arrowcert certify` (their help is the command's).
#[derive(clap::Args)]
pub struct CertifyFlags {
    /// Producer plugin to certify: a path, or a bundled name.
    #[arg(long)]
    pub producer: Option<String>,
    /// Consumer plugin to certify: a path, or a bundled name.
    #[arg(long)]
    pub consumer: Option<String>,
    /// Also certify over these Arrow IPC stream files (`*.stream`), e.g.
    /// Arrow's integration gold files, as `gold/<stem>`.
    #[arg(long)]
    pub gold: Option<PathBuf>,
    /// Generated scenarios to draw (each is certified on every path);
    /// 0 for none.
    #[arg(long, default_value_t = 100)]
    pub cases: u64,
    /// The seed generated scenarios are drawn with (default: a fresh
    /// one, printed and kept in the report).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Leave out the built-in scenarios.
    #[arg(long)]
    pub no_builtin: bool,
    /// Leave out the single-type scenarios (`gen/type:<family>`, one per
    /// type family the generator knows) that come with generated ones.
    #[arg(long)]
    pub no_single_types: bool,
    /// Candidate scenarios tried when shrinking one failure; 0 turns
    /// shrinking off.
    #[arg(long, default_value_t = 1000)]
    pub shrink_candidates: usize,
    /// Continue an interrupted run: keep the cases this report already
    /// has, run the rest, and write the merged report (to this file
    /// unless --report says otherwise). The producer file, the data and
    /// the seed (taken from the report unless --seed is given) must be
    /// the ones the report was made with.
    #[arg(long, value_name = "REPORT")]
    pub resume: Option<PathBuf>,
    /// Where to write the JSON report (default: reports/certify-<time>.json).
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Also write JUnit XML here: one test case per rule and one per
    /// case (crashes, timeouts and errors as <error>, limitations and
    /// skips as <skipped>).
    #[arg(long)]
    pub junit: Option<PathBuf>,
    /// Known results of this library (JSON: rule or case-ID patterns ->
    /// expected outcome, reason, link; see expectations/README.md):
    /// the run passes when its results match, and an unexpected failure
    /// or an unexpected pass fails it.
    #[arg(long, value_name = "FILE")]
    pub expectations: Option<PathBuf>,
    #[command(flatten)]
    pub filter: super::FilterFlags,
    /// List the case IDs and exit.
    #[arg(long)]
    pub list: bool,
    /// Print every case, not only failures.
    #[arg(short, long)]
    pub verbose: bool,
    /// Worker processes (default: one per core); 0 runs in this process.
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
    /// Device types to cover: cpu, emulated, cuda, cuda-host,
    /// cuda-managed (repeatable). Default: cpu and every other device
    /// type this machine has. A selected device the machine lacks is
    /// reported as skipped cases, with the reason.
    #[arg(long = "device", value_name = "DEVICE")]
    pub devices: Vec<String>,
    /// Fail (exit 2) unless this machine has this device type
    /// (repeatable); implies --device for it.
    #[arg(long = "require-device", value_name = "DEVICE")]
    pub require_devices: Vec<String>,
    /// Certify DLPack exchange instead (the Array API's __dlpack__ /
    /// from_dlpack) of the py: adapter given as --producer and/or
    /// --consumer (docs/DLPACK.md).
    #[arg(long)]
    pub dlpack: bool,
    /// Certify the CUDA Array Interface (__cuda_array_interface__, version
    /// 3) of the py: adapter given as --producer (its cai_object(spec))
    /// and/or --consumer (its cai_consume(obj)); two different adapters
    /// run as a pair: the producer's arrays into the consumer
    /// (docs/CAI.md).
    #[arg(long, conflicts_with = "dlpack")]
    pub cai: bool,
    /// Consumer certification: hand every variation of the varied encoding
    /// alone on every data path for every scenario (the full product),
    /// not the default covering choice (every variation on every path and
    /// with every scenario it can change, once).
    #[arg(long)]
    pub all_variations: bool,
    /// Producer certification: measure the release.frees rules (bytes
    /// held across repeated exports) on every scenario, not the default
    /// covering choice (every built-in, gold, single-type and shape
    /// scenario: each type on each path; the mixed generated ones and
    /// the column splits, `~col:N`, are not measured).
    #[arg(long)]
    pub all_leaks: bool,
    /// Run every case that did not pass (a failure, an error, a crash, a
    /// hang, a limitation) N more times, each round in fresh worker
    /// processes: a case whose verdict changes is reported flaky, with
    /// every verdict seen (its first run's stays its verdict).
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub repeat: u32,
    /// Robustness beyond the spec (docs/MALFORMED.md): also hand the
    /// consumer the structures each producer mutant breaks, in worker
    /// processes, and record per case whether it refused cleanly,
    /// accepted, crashed or hung. Reported apart from the rules, as its own
    /// grade; never a rule verdict, never the outcome or the exit code.
    #[arg(long)]
    pub malformed: bool,
}

/// `arrowcert certify`, from its flags.
pub fn certify_command(f: CertifyFlags) -> Result<i32, BadInput> {
    let CertifyFlags {
        producer,
        consumer,
        gold,
        cases,
        seed,
        no_builtin,
        no_single_types,
        shrink_candidates,
        resume,
        report,
        junit,
        expectations,
        filter,
        list,
        verbose,
        jobs,
        in_process,
        case_timeout_ms,
        max_memory_mb,
        devices,
        require_devices,
        dlpack,
        cai,
        all_variations,
        all_leaks,
        repeat,
        malformed,
    } = f;
    if all_leaks && (dlpack || cai) {
        return Err(BadInput(
            "--all-leaks measures the Arrow C interface's release.frees rules; --dlpack and --cai have their own".into(),
        ));
    }
    if malformed && dlpack {
        return Err(BadInput(
            "--malformed hands consumers broken Arrow C structures; --dlpack certifies DLPack exchange".into(),
        ));
    }
    if malformed && consumer.is_none() && producer.is_some() {
        return Err(BadInput(
            "--malformed grades a consumer: give --consumer too".into(),
        ));
    }
    if cai {
        if malformed {
            return Err(BadInput(
                "--malformed hands consumers broken Arrow C structures; --cai certifies the CUDA Array Interface".into(),
            ));
        }
        return super::cai::certify(super::cai::Args {
            producer,
            consumer,
            report,
            filter: filter.filter(),
            list,
            verbose,
            expectations: super::read_expectations(expectations)?,
            limits: crate::engine::cai::Limits {
                case_timeout_ms,
                max_memory_mb,
            },
        });
    }
    if dlpack {
        let mut kinds = device_kinds(&devices, "--device")?;
        let required = device_kinds(&require_devices, "--require-device")?;
        kinds.extend(required.iter().copied());
        kinds.retain(|k| *k != crate::device::Kind::Cpu);
        kinds.dedup();
        if kinds.len() > 1 {
            return Err(BadInput(
                "--dlpack runs one device besides the CPU at a time (--device)".into(),
            ));
        }
        return super::dlpack::certify(super::dlpack::Args {
            device: kinds.first().copied(),
            require_device: !required.is_empty(),
            producer,
            consumer,
            report,
            filter: filter.filter(),
            list,
            verbose,
            case_timeout_ms,
            max_memory_mb,
            expectations: super::read_expectations(expectations)?,
            cases,
            seed: super::seed_for(seed, resume.as_deref())?,
            shrink_candidates: shrink_candidates.min(60),
            resume,
            junit,
            invocation: std::env::args().collect(),
        });
    }
    run(Args {
        expectations: super::read_expectations(expectations)?,
        devices: if devices.is_empty() {
            None
        } else {
            Some(device_kinds(&devices, "--device")?)
        },
        require_devices: device_kinds(&require_devices, "--require-device")?,
        all_variations,
        all_leaks,
        repeat,
        wrapper: Vec::new(),
        producer: lib(
            producer
                .clone()
                .or_else(|| consumer.is_none().then(|| "reference".into())),
            "producer",
        )?,
        consumer: lib(
            consumer.or_else(|| producer.is_none().then(|| "reference".into())),
            "consumer",
        )?,
        sources: crate::sources::Sources {
            builtin: !no_builtin,
            gold,
            generated: cases,
            single_types: cases > 0 && !no_single_types,
            seed: super::seed_for(seed, resume.as_deref())?,
            only: None,
        },
        report,
        junit,
        filter: filter.filter(),
        list,
        verbose,
        invocation: std::env::args().collect(),
        jobs: super::worker_count(jobs, in_process),
        case_timeout_ms,
        max_memory_mb,
        shrink: crate::generate::shrink::Budget {
            candidates: shrink_candidates,
            ..Default::default()
        },
        replay: false,
        resume,
        malformed,
    })
}

/// The flags of `arrowcert replay` (their help is the command's).
#[derive(clap::Args)]
pub struct ReplayFlags {
    /// Producer plugin (for `producer/...` cases; default: the bundled
    /// reference).
    #[arg(long)]
    pub producer: Option<String>,
    /// Consumer plugin (for `consumer/...` cases; default: the bundled
    /// reference).
    #[arg(long)]
    pub consumer: Option<String>,
    /// The gold directory the case's run used (for `gold/...` cases).
    #[arg(long)]
    pub gold: Option<PathBuf>,
    /// The seed of the run (for `gen/...` cases).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Case IDs, as reports print them (with --fuzz: fuzz inputs).
    #[arg(required = true)]
    pub cases: Vec<String>,
    /// Replay fuzz inputs (crash artifacts, corpus files) through this
    /// fuzz target's oracle: validate, consumer, producer or async.
    #[arg(long, value_name = "TARGET")]
    pub fuzz: Option<String>,
    /// Also write a JSON report here.
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Worker processes (default 0: this process).
    #[arg(long, short = 'j', default_value_t = 0)]
    pub jobs: usize,
    /// A case with no result after this long is a timeout (workers).
    #[arg(long, default_value_t = 60_000)]
    pub case_timeout_ms: u64,
    /// Memory limit of each worker process, in MiB: its address space
    /// (RLIMIT_AS), or its private data (RLIMIT_DATA) on a machine whose
    /// CUDA driver loads (the driver reserves address space beyond any
    /// such bound).
    #[arg(long, default_value_t = 8192)]
    pub max_memory_mb: u64,
    /// Run the case's worker under a checker: `valgrind` (memcheck) prints
    /// the first invalid access with its stack. One worker; the case
    /// deadline is 20 times --case-timeout-ms; leak rules are not exercised
    /// (the checker replaces malloc, so the allocation tracker stays out).
    #[arg(long, value_name = "CHECKER")]
    pub under: Option<String>,
    /// Measure the release.frees rules whatever the scenario (as a
    /// certification run with --all-leaks did); with -j 1 or more, since
    /// bytes are counted in worker processes.
    #[arg(long)]
    pub all_leaks: bool,
}

/// `arrowcert replay`, from its flags.
pub fn replay_command(f: ReplayFlags) -> Result<i32, BadInput> {
    let ReplayFlags {
        producer,
        consumer,
        gold,
        seed,
        cases,
        report,
        jobs,
        case_timeout_ms,
        max_memory_mb,
        fuzz,
        under,
        all_leaks,
    } = f;
    if let Some(target) = fuzz {
        return crate::cli::fuzz::replay(&target, &cases, producer, consumer, report);
    }
    let mut names: Vec<String> = Vec::new();
    for id in &cases {
        let name = crate::certify::scenario_of(id).ok_or_else(|| {
            BadInput(format!(
                "{id}: not a certification case ID (producer/<path>/<scenario>[/batch:<i>[/slice:<o>+<l>]] or consumer/<kind>/<variant>/<scenario>[/batch:<i>])"
            ))
        })?;
        if !names.contains(&name) {
            names.push(name);
        }
    }
    let wants = |side: &str| cases.iter().any(|c| c.starts_with(&format!("{side}/")));
    // `--under CHECKER`: one worker under the checker, its logs in a folder
    // of their own, read back after the run.
    let logs =
        match &under {
            Some(_) => Some(crate::run::under::Logs::new().map_err(|e| {
                BadInput(format!("--under: cannot make a folder for the logs: {e}"))
            })?),
            None => None,
        };
    let wrapper = match (&under, &logs) {
        (Some(checker), Some(dir)) => {
            crate::run::under::wrapper(checker, dir.path()).map_err(BadInput)?
        }
        _ => Vec::new(),
    };
    let (jobs, case_timeout_ms, max_memory_mb) = if wrapper.is_empty() {
        (jobs, case_timeout_ms, max_memory_mb)
    } else {
        (1, case_timeout_ms.saturating_mul(20), 0)
    };
    let code = run(Args {
        producer: lib(
            wants("producer").then(|| producer.unwrap_or_else(|| "reference".into())),
            "producer",
        )?,
        consumer: lib(
            wants("consumer").then(|| consumer.unwrap_or_else(|| "reference".into())),
            "consumer",
        )?,
        sources: crate::sources::Sources {
            builtin: false,
            gold,
            generated: 0,
            single_types: false,
            seed,
            only: Some(names),
        },
        report,
        junit: None,
        expectations: None,
        filter: crate::roundtrip::Filter {
            patterns: cases,
            exact: true,
            skip: Vec::new(),
        },
        list: false,
        verbose: true,
        invocation: std::env::args().collect(),
        jobs,
        case_timeout_ms,
        max_memory_mb,
        shrink: crate::generate::shrink::Budget {
            candidates: 0,
            ..Default::default()
        },
        replay: true,
        resume: None,
        // The case IDs say the device.
        devices: Some(crate::device::Kind::ALL.to_vec()),
        require_devices: Vec::new(),
        all_variations: false,
        all_leaks,
        repeat: 0,
        malformed: false,
        wrapper,
    })?;
    if let (Some(checker), Some(dir)) = (&under, &logs) {
        match crate::run::under::first_error(dir.path()) {
            Some(e) => println!("\n{checker}: the first error it reported:\n{e}"),
            None => println!("\n{checker}: no invalid access reported"),
        }
    }
    Ok(code)
}

/// `--device` values, as device kinds.
fn device_kinds(names: &[String], flag: &str) -> Result<Vec<crate::device::Kind>, BadInput> {
    names
        .iter()
        .map(|n| {
            crate::device::Kind::parse(n).ok_or_else(|| {
                BadInput(format!(
                    "{flag} {n}: not a device type (cpu, emulated, cuda, cuda-host, cuda-managed)"
                ))
            })
        })
        .collect()
}

/// A plugin argument resolved to a library (`None` stays `None`).
fn lib(arg: Option<String>, role: &str) -> Result<Option<Lib>, BadInput> {
    arg.map(|arg| {
        Ok(Lib {
            path: crate::registry::resolve_plugin(&arg, role)?,
            arg,
        })
    })
    .transpose()
}

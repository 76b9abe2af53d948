//! `arrowcert certify --dlpack`: DLPack certification of a Python library
//! through its adapter file (docs/DLPACK.md), its cases run by the one
//! runner (`crate::run`, `worker --mode dlpack`), and `dlpack-matrix`.

use std::cell::RefCell;
use std::path::PathBuf;

use super::progress::Progress;
use super::words::{resume_command, shell_word};
use super::BadInput;
use crate::dlpack::run::{self, RunArgs, Sides};
use crate::registry::dlpack_bundled as bundled;
use crate::report::{self, Report};
use crate::roundtrip::Filter;
use crate::run::checkpoint::{not_yet_run, resumable, Checkpoint};

/// The `command` of a DLPack certification's report (what `--resume`
/// checks) and its `data`.
const COMMAND: &str = "certify --dlpack";
const DATA: &str = "dlpack built-in cases";

/// What `certify --dlpack` was given.
pub struct Args {
    pub producer: Option<String>,
    pub consumer: Option<String>,
    pub report: Option<PathBuf>,
    pub filter: Filter,
    pub list: bool,
    pub verbose: bool,
    pub case_timeout_ms: u64,
    pub max_memory_mb: u64,
    pub expectations: Option<(PathBuf, report::expectations::Expectations)>,
    /// Generated cases of each side certified (proptest) and their seed.
    pub cases: u64,
    pub seed: u64,
    /// Shrink candidates per failure (0: no shrinking).
    pub shrink_candidates: usize,
    /// A device besides the CPU for consumer cases (`--device`).
    pub device: Option<crate::device::Kind>,
    /// `--require-device`: the run fails (exit 2) without it.
    pub require_device: bool,
    /// Continue the interrupted run of this report (`--resume`).
    pub resume: Option<PathBuf>,
    /// Also write JUnit XML here (`--junit`).
    pub junit: Option<PathBuf>,
    /// The command line, for the report and the resume command.
    pub invocation: Vec<String>,
}

/// The value rules: a DLPack case that checked one compared data.
const DATA_RULES: &[&str] = &[
    crate::rule!("dlpack.tensor.describes"),
    crate::rule!("dlpack.consumer.values"),
    crate::rule!("dlpack.consumer.strides"),
    crate::rule!("dlpack.consumer.byte-offset"),
];

/// The adapter both sides name (DLPack certification takes one library).
fn adapter(args: &Args) -> Result<String, BadInput> {
    let spec = match (&args.producer, &args.consumer) {
        (Some(p), Some(c)) if p != c => {
            return Err(BadInput(format!(
                "--dlpack certifies one library: --producer {p} and --consumer {c} differ (run them one at a time)"
            )))
        }
        (Some(p), _) => p.clone(),
        (None, Some(c)) => c.clone(),
        (None, None) => {
            return Err(BadInput(
                "--dlpack needs --producer py:ADAPTER.py and/or --consumer py:ADAPTER.py".into(),
            ))
        }
    };
    match spec.strip_prefix("py:") {
        Some(rest) => Ok(rest.to_string()),
        None => Err(BadInput(format!(
            "--dlpack takes py: adapters (docs/DLPACK.md); {spec} is not one"
        ))),
    }
}

/// `arrowcert certify --dlpack ...`.
pub fn certify(args: Args) -> Result<i32, BadInput> {
    let adapter = adapter(&args)?;
    if let (true, Some(d)) = (args.require_device, args.device) {
        crate::device::available(d)
            .map_err(|why| BadInput(format!("--require-device {d}: {why}")))?;
    }
    let sides = Sides {
        producer: args.producer.is_some(),
        consumer: args.consumer.is_some(),
        device: args.device,
    };
    let gen = run::Generated {
        seed: args.seed,
        count: args.cases,
        extra: args
            .filter
            .patterns
            .iter()
            .filter(|p| crate::dlpack::engine::GenSide::of(p).is_some())
            .cloned()
            .collect(),
    };
    let planned = run::planned(sides, false, &args.filter, &gen);
    if args.list {
        for c in &planned {
            println!("{}", c.id);
        }
        return Ok(0);
    }
    let mut prefix = "arrowcert certify --dlpack".to_string();
    if let Some(p) = &args.producer {
        prefix.push_str(&format!(" --producer {p}"));
    }
    if let Some(c) = &args.consumer {
        prefix.push_str(&format!(" --consumer {c}"));
    }
    let started = std::time::SystemTime::now();
    let path = args
        .report
        .clone()
        .or(args.resume.clone())
        .unwrap_or_else(|| {
            PathBuf::from("reports").join(format!(
                "certify-dlpack-{}.json",
                report::time::compact(started)
            ))
        });
    let previous = match &args.resume {
        Some(p) => {
            let file =
                std::fs::canonicalize(&adapter).map_err(|e| BadInput(format!("{adapter}: {e}")))?;
            Some(resumable(p, COMMAND, DATA, &[("dlpack", file.as_path())]).map_err(BadInput)?)
        }
        None => None,
    };
    crate::run::proc::catch_interrupts();
    let (mut r, interrupted) = certified(
        &adapter,
        sides,
        &args.filter,
        &gen,
        args.case_timeout_ms,
        args.max_memory_mb,
        args.expectations.as_ref(),
        prefix.clone(),
        Kept {
            path: Some(path.clone()),
            previous,
            invocation: args.invocation.clone(),
            seed: (args.cases > 0).then_some(args.seed),
        },
    )?;
    if let Some(sig) = interrupted {
        println!("report: {}", path.display());
        println!(
            "interrupted by {}: {} of {} cases ran; the report is marked incomplete",
            crate::run::proc::signal_name(sig),
            r.cases.len(),
            r.planned
        );
        println!(
            "resume with: {} --resume {}",
            resume_command(&args.invocation),
            shell_word(&path.display().to_string())
        );
        return Ok(128 + sig);
    }
    if args.shrink_candidates > 0 {
        r.shrunk = shrink(
            &adapter,
            &r,
            &gen,
            args.shrink_candidates,
            &prefix,
            args.case_timeout_ms,
            args.max_memory_mb,
        )?;
    }

    let judgement = r.outcome.clone().expect("judged");
    print!(
        "{}",
        crate::certify::summary::render(&r.rules, &r.cases, &r.shrunk)
    );
    if args.verbose {
        for c in r
            .cases
            .iter()
            .filter(|c| !c.violations.is_empty() || c.verdict != report::Verdict::Pass)
        {
            println!(
                "{} {}: {}",
                c.verdict.as_str(),
                c.id,
                c.message.as_deref().unwrap_or("")
            );
        }
    }
    println!(
        "\ncertify --dlpack result: {}. {} cases: {}",
        judgement.outcome.words(),
        r.summary.total,
        super::words::counts(&r.summary, r.duration_ms)
    );
    for reason in &judgement.reasons {
        println!("  {}", report::printable(reason));
    }
    super::certify::print_unused_expectations(&r);
    // Written again: the shrunk failures came after the checkpoint's
    // final write.
    report::write(&r, &path)
        .map_err(|e| BadInput(format!("{}: cannot write the report: {e}", path.display())))?;
    if let Some(junit) = &args.junit {
        let suite = format!("arrowcert {COMMAND} py:{adapter}");
        let xml = crate::certify::summary::junit(&r.rules, &r.cases, &suite);
        std::fs::write(junit, xml)
            .map_err(|e| BadInput(format!("{}: cannot write JUnit XML: {e}", junit.display())))?;
    }
    println!("report: {}", path.display());
    let required: Vec<crate::device::Kind> = args
        .device
        .filter(|_| args.require_device)
        .into_iter()
        .collect();
    if let Some(code) = super::certify::required_devices_unused(&required, &r.cases) {
        return Ok(code);
    }
    Ok(judgement.exit_code())
}

/// What a certification keeps on disk as it goes: its report's path
/// (checkpoints; none: only in memory), the report of the interrupted run
/// it resumes, the command line and the seed the report names.
struct Kept {
    path: Option<PathBuf>,
    previous: Option<Report>,
    invocation: Vec<String>,
    seed: Option<u64>,
}

/// Certifies `adapter` on `sides`: every case in worker processes (those
/// `kept.previous` has not), the report with rule verdicts, judged (with
/// `expectations`), checkpointed to `kept.path` as cases end. Returns the
/// report and the signal that interrupted the run, if any.
#[allow(clippy::too_many_arguments)]
fn certified(
    adapter: &str,
    sides: Sides,
    filter: &Filter,
    gen: &run::Generated,
    case_timeout_ms: u64,
    max_memory_mb: u64,
    expectations: Option<&(PathBuf, report::expectations::Expectations)>,
    replay_prefix: String,
    kept: Kept,
) -> Result<(Report, Option<i32>), BadInput> {
    let planned = run::planned(sides, false, filter, gen);
    let bridge = crate::plugin::python::prepare(adapter).map_err(BadInput)?;
    let started = std::time::SystemTime::now();
    let clock = std::time::Instant::now();
    let all: Vec<usize> = (0..planned.len()).collect();
    let todo = not_yet_run(kept.previous.as_ref(), &all, |i| &planned[i].id);
    let checkpoint = RefCell::new(Checkpoint {
        report: Report {
            planned: planned.len() as u64,
            plugins: vec![identity(&bridge, adapter)],
            devices: std::iter::once("cpu".to_string())
                .chain(
                    sides
                        .device
                        .filter(|d| *d != crate::device::Kind::Cpu)
                        .map(|d| d.name().to_string()),
                )
                .collect(),
            // Kept cases stay; the start and invocation become this run's.
            cases: kept.previous.map(|r| r.cases).unwrap_or_default(),
            seed: kept.seed,
            ..Report::begun(COMMAND, kept.invocation, started, DATA.into())
        },
        path: kept.path.clone().unwrap_or_default(),
        position: planned
            .iter()
            .enumerate()
            .map(|(i, c)| (c.id.clone(), i))
            .collect(),
        last: std::time::Instant::now(),
        error: None,
        disabled: kept.path.is_none(),
        added: Default::default(),
    });
    if todo.len() < planned.len() {
        println!(
            "resuming {}: {} of {} cases already ran",
            checkpoint.borrow().path.display(),
            planned.len() - todo.len(),
            planned.len()
        );
    }
    let progress = RefCell::new(Progress::new(todo.len()));
    let ran = run::run(
        &RunArgs {
            bridge: bridge.clone(),
            pair_consumer: None,
            generated: gen.clone(),
            sides,
            filter: filter.clone(),
            max_memory_mb,
            case_timeout_ms,
            replay_prefix,
        },
        Some(&todo),
        &mut |c| {
            let failed = !matches!(
                c.verdict,
                report::Verdict::Pass | report::Verdict::Skip | report::Verdict::Limitation
            );
            if !checkpoint.borrow().added.contains(&c.id) {
                progress.borrow_mut().tick(failed);
            }
            checkpoint.borrow_mut().add(c);
        },
    )
    .map_err(BadInput)?;
    progress.borrow_mut().clear();
    let r = checkpoint
        .into_inner()
        .finish(ran.interrupted, clock, |r| {
            // The Arrow rules the cases across the protocols judged
            // (to-arrow, from-arrow) join the DLPack ones; those no case
            // touched are not the run's.
            let touched: std::collections::BTreeSet<&str> = r
                .cases
                .iter()
                .flat_map(|c| {
                    c.checked
                        .iter()
                        .map(String::as_str)
                        .chain(c.violations.iter().map(|v| v.rule.as_str()))
                })
                .collect();
            let arrow_rules = crate::rules::RULES
                .iter()
                .filter(|rule| touched.contains(rule.id));
            r.rules = crate::certify::summary::verdicts_of(
                &r.cases,
                crate::rules::dlpack::DLPACK_RULES
                    .iter()
                    .filter(|rule| match rule.side {
                        crate::rules::Side::Producer => sides.producer,
                        crate::rules::Side::Consumer => sides.consumer,
                        crate::rules::Side::Both => true,
                    })
                    .chain(arrow_rules),
            );
            // Declined by the library itself (the adapter's, whichever side).
            let library = r.plugins.first().map(|p| p.name.clone());
            for l in r.limitations.iter_mut() {
                if let Some(name) = &library {
                    l.library.clone_from(name);
                }
            }
            crate::engine::judge(r, DATA_RULES, expectations, filter.narrows());
        })
        .map_err(BadInput)?;
    Ok((r, ran.interrupted))
}

fn identity(bridge: &std::path::Path, adapter: &str) -> report::PluginIdentity {
    let name = crate::dlpack::bridge::Bridge::open(bridge)
        .map(|b| b.name.clone())
        .unwrap_or_else(|e| format!("{adapter} ({e})"));
    report::PluginIdentity {
        role: "dlpack".into(),
        path: format!("py:{adapter}"),
        name,
        sha256: std::fs::canonicalize(adapter)
            .ok()
            .and_then(|p| report::sha256_file(&p).ok())
            .unwrap_or_default(),
        abi_version: 0,
        entry_points: Vec::new(),
    }
}

/// The flags of `arrowcert dlpack-matrix` (their help is the command's).
#[derive(clap::Args)]
pub struct MatrixFlags {
    /// A library, NAME=py:ADAPTER.py (repeatable; default: the bundled
    /// DLPack adapters, adapters/dlpack/*.py: NumPy, pyarrow,
    /// array-api-strict, JAX, nanoarrow).
    #[arg(long = "library", value_name = "NAME=py:FILE")]
    pub libraries: Vec<String>,
    /// Where dlpack-matrix.{json,md} and each library's report
    /// (dlpack/<name>.json) go.
    #[arg(long, default_value = "reports")]
    pub out: PathBuf,
    /// A directory of expectations: dlpack-<name>.json for each library
    /// that has known findings (expectations/README.md).
    #[arg(long)]
    pub expectations: Option<PathBuf>,
    /// A case with no result after this long is a timeout.
    #[arg(long, default_value_t = 60_000)]
    pub case_timeout_ms: u64,
    /// Memory limit of each worker process, in MiB: its address space
    /// (RLIMIT_AS), or its private data (RLIMIT_DATA) on a machine whose
    /// CUDA driver loads (the driver reserves address space beyond any
    /// such bound).
    #[arg(long, default_value_t = 8192)]
    pub max_memory_mb: u64,
    /// Generated cases per library and side (proptest).
    #[arg(long, default_value_t = 50)]
    pub cases: u64,
    /// Their seed (fixed by default: the committed matrix is reproducible).
    #[arg(long, default_value_t = 20261126)]
    pub seed: u64,
}

/// One library's line of the matrix.
#[derive(serde::Serialize)]
struct LibraryRow {
    name: String,
    adapter: String,
    identity: String,
    outcome: String,
    reasons: Vec<String>,
    produces: bool,
    consumes: bool,
    /// Across the protocols: `to Arrow` (DLPack in, Arrow out), `from
    /// Arrow`, both or neither, with the cases that passed of those run.
    across: String,
    passed: u64,
    limitations: u64,
    failed: u64,
    crashed: u64,
    /// Rules that failed, with their level.
    findings: Vec<String>,
    report: String,
}

/// One producer -> consumer pair.
#[derive(serde::Serialize)]
struct PairRow {
    producer: String,
    consumer: String,
    passed: u64,
    limitations: u64,
    failed: u64,
    crashed: u64,
    first_failure: Option<String>,
}

/// `arrowcert dlpack-matrix`: every library certified on its own (both
/// sides it serves), then every producer's arrays into every consumer.
pub fn matrix_command(f: MatrixFlags) -> Result<i32, BadInput> {
    let libraries: Vec<(String, String)> = if f.libraries.is_empty() {
        bundled()?
    } else {
        f.libraries
            .iter()
            .map(|l| {
                l.split_once('=')
                    .map(|(n, a)| (n.to_string(), a.to_string()))
                    .ok_or_else(|| BadInput(format!("--library {l}: expected NAME=py:FILE")))
            })
            .collect::<Result<_, _>>()?
    };
    let dir = f.out.join("dlpack");
    std::fs::create_dir_all(&dir).map_err(|e| BadInput(format!("{}: {e}", dir.display())))?;
    let both = Sides {
        producer: true,
        consumer: true,
        device: None,
    };
    let mut rows = Vec::new();
    let mut failed_run = false;
    for (name, spec) in &libraries {
        let adapter = spec
            .strip_prefix("py:")
            .ok_or_else(|| BadInput(format!("{name}: {spec} is not a py: adapter")))?;
        let expectations = match &f.expectations {
            Some(d) if d.join(format!("dlpack-{name}.json")).is_file() => {
                super::read_expectations(Some(d.join(format!("dlpack-{name}.json"))))?
            }
            _ => None,
        };
        let r = certified(
            adapter,
            both,
            &Filter::default(),
            &run::Generated {
                seed: f.seed,
                count: f.cases,
                extra: Vec::new(),
            },
            f.case_timeout_ms,
            f.max_memory_mb,
            expectations.as_ref(),
            format!("arrowcert certify --dlpack --producer {spec} --consumer {spec}"),
            Kept {
                path: None,
                previous: None,
                invocation: std::env::args().collect(),
                seed: None,
            },
        )?;
        let r = r.0;
        let path = dir.join(format!("{name}.json"));
        report::write(&r, &path).map_err(|e| BadInput(format!("{}: {e}", path.display())))?;
        let j = r.outcome.clone().expect("judged");
        failed_run |= j.exit_code() != 0;
        let served = |p: &str| {
            r.cases
                .iter()
                .any(|c| c.path == p && c.verdict != report::Verdict::Skip)
        };
        rows.push(LibraryRow {
            name: name.clone(),
            adapter: spec.clone(),
            identity: r
                .plugins
                .first()
                .map(|p| p.name.clone())
                .unwrap_or_default(),
            outcome: j.outcome.words().to_string(),
            reasons: j.reasons.clone(),
            produces: served("dlpack_producer"),
            consumes: served("dlpack_consumer"),
            across: across(&r.cases),
            passed: r.summary.passed,
            limitations: r.summary.limitations,
            failed: r.summary.failed,
            crashed: r.summary.crashed,
            findings: r
                .rules
                .iter()
                .filter(|x| x.verdict == report::Verdict::Fail)
                .map(|x| format!("{} {} ({} cases)", x.level, x.rule, x.failed))
                .collect(),
            report: format!("dlpack/{name}.json"),
        });
        println!(
            "{name}: {} ({})",
            j.outcome.words(),
            super::words::counts(&r.summary, r.duration_ms)
        );
    }
    let mut pairs = Vec::new();
    for p in rows.iter().filter(|r| r.produces) {
        for c in rows.iter().filter(|r| r.consumes) {
            let a = crate::plugin::python::prepare(p.adapter.trim_start_matches("py:"))
                .map_err(BadInput)?;
            let b = crate::plugin::python::prepare(c.adapter.trim_start_matches("py:"))
                .map_err(BadInput)?;
            let cases = run::run(
                &RunArgs {
                    bridge: a,
                    pair_consumer: Some(b),
                    generated: run::Generated::default(),
                    sides: both,
                    filter: Filter::default(),
                    max_memory_mb: f.max_memory_mb,
                    case_timeout_ms: f.case_timeout_ms,
                    replay_prefix: format!(
                        "arrowcert dlpack-matrix --library {}={} --library {}={}",
                        p.name, p.adapter, c.name, c.adapter
                    ),
                },
                None,
                &mut |_| {},
            )
            .map_err(BadInput)?
            .cases;
            let s = report::Summary::of(&cases);
            let first_failure = cases
                .iter()
                .find(|x| {
                    matches!(
                        x.verdict,
                        report::Verdict::Fail
                            | report::Verdict::Crash
                            | report::Verdict::Timeout
                            | report::Verdict::Error
                    )
                })
                .map(|x| format!("{}: {}", x.id, x.message.as_deref().unwrap_or("")));
            // A pair's known failures: expectations/dlpack-pair-P-C.json.
            let file = format!("dlpack-pair-{}-{}.json", p.name, c.name);
            let expectations = match &f.expectations {
                Some(d) if d.join(&file).is_file() => {
                    super::read_expectations(Some(d.join(&file)))?
                }
                _ => None,
            };
            let mut r = Report::begun(
                "dlpack-matrix",
                std::env::args().collect(),
                std::time::SystemTime::now(),
                "dlpack pairs".into(),
            );
            r.planned = cases.len() as u64;
            r.complete = true;
            r.summary = s.clone();
            r.cases = cases;
            crate::engine::judge(&mut r, &[], expectations.as_ref(), false);
            let j = r.outcome.clone().expect("judged");
            if j.exit_code() != 0 && j.outcome != report::outcome::Outcome::NotCertified {
                failed_run = true;
                println!("  {} -> {}: {}", p.name, c.name, j.reasons.join("; "));
            }
            let path = dir.join(format!("pair-{}-{}.json", p.name, c.name));
            report::write(&r, &path).map_err(|e| BadInput(format!("{}: {e}", path.display())))?;
            println!("{} -> {}: {}", p.name, c.name, super::words::counts(&s, 0));
            pairs.push(PairRow {
                producer: p.name.clone(),
                consumer: c.name.clone(),
                passed: s.passed,
                limitations: s.limitations,
                failed: s.failed,
                crashed: s.crashed + s.timed_out,
                first_failure,
            });
        }
    }
    // `tool`: the versions `arrowcert --version` prints, as in every report.
    let json =
        serde_json::json!({"tool": report::Tool::default(), "libraries": rows, "pairs": pairs});
    let jpath = f.out.join("dlpack-matrix.json");
    report::write_atomic(
        &jpath,
        &serde_json::to_string_pretty(&json).expect("serialisable"),
    )
    .map_err(|e| BadInput(format!("{}: {e}", jpath.display())))?;
    let mpath = f.out.join("dlpack-matrix.md");
    report::write_atomic(&mpath, &markdown(&rows, &pairs))
        .map_err(|e| BadInput(format!("{}: {e}", mpath.display())))?;
    println!("dlpack matrix: {} and {}", jpath.display(), mpath.display());
    Ok(if failed_run { 1 } else { 0 })
}

/// The matrix's word for a library's cases across the protocols: which
/// directions it serves, each with passed / run (skipped cases not run).
fn across(cases: &[report::Case]) -> String {
    let words: Vec<String> = [
        ("dlpack_to_arrow", "to Arrow"),
        ("dlpack_from_arrow", "from Arrow"),
    ]
    .iter()
    .filter_map(|(path, word)| {
        let run: Vec<&report::Case> = cases
            .iter()
            .filter(|c| c.path == *path && c.verdict != report::Verdict::Skip)
            .collect();
        (!run.is_empty()).then(|| {
            let passed = run
                .iter()
                .filter(|c| c.verdict == report::Verdict::Pass)
                .count();
            format!("{word} {passed}/{}", run.len())
        })
    })
    .collect();
    if words.is_empty() {
        "no".into()
    } else {
        words.join(", ")
    }
}

fn markdown(rows: &[LibraryRow], pairs: &[PairRow]) -> String {
    let mut md = String::from(
        "# DLPack matrix\n\nWritten by `arrowcert dlpack-matrix` (`just dlpack-matrix`); \
         the rules are `arrowcert rules 'dlpack.*'`, the findings are explained in \
         reports/FINDINGS.md. Each library is certified on its own (the harness as \
         consumer of its `__dlpack__` and as producer for its `from_dlpack`), then \
         every producer's arrays go into every consumer's `from_dlpack` and are read \
         back. \"across\" is the library's crossing of the two protocols (docs/DLPACK.md): \
         DLPack in and Arrow out (\"to Arrow\"), Arrow in and DLPack out (\"from \
         Arrow\"), judged by both rule sets, with the cases that passed of those run. \
         \"outcome\" is the run judged against the library's expectations file \
         (expectations/dlpack-<library>.json): ok means every result is the one \
         expected, known failures included; \"rules broken\" lists them.\n\n\
         ## Libraries\n\n| library | outcome | produces | consumes | across | passed | limitations | failed | crashed | rules broken |\n|---|---|---|---|---|---:|---:|---:|---:|---|\n",
    );
    for r in rows {
        md.push_str(&format!(
            "| {} ({}) | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.name,
            r.identity,
            r.outcome,
            if r.produces { "yes" } else { "no" },
            if r.consumes { "yes" } else { "no" },
            r.across,
            r.passed,
            r.limitations,
            r.failed,
            r.crashed,
            if r.findings.is_empty() {
                "none".to_string()
            } else {
                r.findings.join("; ")
            }
        ));
    }
    md.push_str("\n## Pairs (producer -> consumer): cases whose values arrived / declined / wrong / crashed\n\n| producer \\ consumer |");
    let consumers: Vec<&str> = rows
        .iter()
        .filter(|r| r.consumes)
        .map(|r| r.name.as_str())
        .collect();
    for c in &consumers {
        md.push_str(&format!(" {c} |"));
    }
    md.push_str("\n|---|");
    md.push_str(&"---|".repeat(consumers.len()));
    md.push('\n');
    for p in rows.iter().filter(|r| r.produces) {
        md.push_str(&format!("| {} |", p.name));
        for c in &consumers {
            match pairs
                .iter()
                .find(|x| x.producer == p.name && x.consumer == *c)
            {
                Some(x) => md.push_str(&format!(
                    " {} / {} / {} / {} |",
                    x.passed, x.limitations, x.failed, x.crashed
                )),
                None => md.push_str(" - |"),
            }
        }
        md.push('\n');
    }
    let failures: Vec<&PairRow> = pairs.iter().filter(|p| p.first_failure.is_some()).collect();
    if !failures.is_empty() {
        md.push_str("\nFirst failure of each failing pair:\n\n");
        for p in failures {
            md.push_str(&format!(
                "- {} -> {}: {}\n",
                p.producer,
                p.consumer,
                p.first_failure.as_deref().unwrap_or("")
            ));
        }
    }
    md
}

/// Shrinks the first failure of each rule (and of crashes) among the
/// generated cases (of either side): proptest's walk over the case's value tree,
/// each candidate run in a worker like any case, at most `budget` of them.
fn shrink(
    adapter: &str,
    r: &Report,
    gen: &run::Generated,
    budget: usize,
    prefix: &str,
    case_timeout_ms: u64,
    max_memory_mb: u64,
) -> Result<Vec<report::ShrunkFailure>, BadInput> {
    use crate::dlpack::engine;
    let bridge = crate::plugin::python::prepare(adapter).map_err(BadInput)?;
    let index: std::collections::HashMap<String, (u64, engine::GenSide)> =
        [engine::GenSide::Consumer, engine::GenSide::Producer]
            .into_iter()
            .flat_map(|side| {
                engine::generated(gen.seed, gen.count, side)
                    .into_iter()
                    .map(move |(i, c)| (c.id, (i, side)))
            })
            .collect();
    let target_of = |c: &report::Case| -> Option<String> {
        match c.verdict {
            report::Verdict::Crash | report::Verdict::Timeout => Some("crash".into()),
            _ => c.violations.first().map(|v| v.rule.clone()),
        }
    };
    let shows = |c: &report::Case, target: &str| match target {
        "crash" => matches!(c.verdict, report::Verdict::Crash | report::Verdict::Timeout),
        rule => c.violations.iter().any(|v| v.rule == rule),
    };
    let mut done = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    for c in r
        .cases
        .iter()
        .filter(|c| engine::GenSide::of(&c.id).is_some())
    {
        let (Some(target), Some(&(i, side))) = (target_of(c), index.get(&c.id)) else {
            continue;
        };
        if !done.insert(target.clone()) || done.len() > 5 {
            continue;
        }
        let run_one = |id: &str| -> Result<Option<report::Case>, BadInput> {
            let cases = run::run(
                &RunArgs {
                    bridge: bridge.clone(),
                    pair_consumer: None,
                    generated: run::Generated {
                        seed: gen.seed,
                        count: 0,
                        extra: vec![id.to_string()],
                    },
                    sides: Sides {
                        producer: side == engine::GenSide::Producer,
                        consumer: side == engine::GenSide::Consumer,
                        device: None,
                    },
                    filter: Filter {
                        patterns: vec![id.to_string()],
                        exact: true,
                        skip: Vec::new(),
                    },
                    max_memory_mb,
                    case_timeout_ms,
                    replay_prefix: prefix.to_string(),
                },
                None,
                &mut |_| {},
            )
            .map_err(BadInput)?
            .cases;
            Ok(cases.into_iter().next())
        };
        let mut tree = engine::generated_tree(gen.seed, i, side);
        let mut best = c.clone();
        let (mut tried, mut steps) = (0u64, 0u64);
        let mut exhausted = false;
        if tree.simplify() {
            loop {
                // An interrupt ends the search where it is (the report
                // was already written complete).
                if tried as usize >= budget || crate::run::proc::interrupted().is_some() {
                    exhausted = true;
                    break;
                }
                tried += 1;
                let id = tree.current();
                let still = run_one(&id)?.filter(|x| shows(x, &target));
                if let Some(x) = still {
                    best = x;
                    steps += 1;
                    if !tree.simplify() {
                        break;
                    }
                } else if !tree.complicate() {
                    break;
                }
            }
        }
        out.push(report::ShrunkFailure {
            target: target.clone(),
            from_case: c.id.clone(),
            case: best.id.clone(),
            scenario: best.scenario.clone(),
            evidence: best
                .violations
                .iter()
                .find(|v| v.rule == target)
                .map(|v| v.evidence.clone())
                .or(best.message.clone())
                .unwrap_or_default(),
            tried,
            steps,
            exhausted,
            replay: run::replay_of(prefix, &best.id),
        });
    }
    Ok(out)
}

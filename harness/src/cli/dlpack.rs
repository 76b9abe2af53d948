//! `arrowcert certify --dlpack`: DLPack certification of a Python library
//! through its adapter file (docs/DLPACK.md), its cases run by the one
//! runner (`crate::run`, `worker --mode dlpack`), and `dlpack-matrix`.

use std::path::PathBuf;

use super::progress::Progress;
use super::words::{resume_command, shell_word};
use super::BadInput;
use crate::dlpack::run::{self, RunArgs, Sides};
use crate::engine::dlpack as engine;
use crate::registry::dlpack_bundled as bundled;
use crate::report::{self, Report};
use crate::roundtrip::Filter;

/// The progress bar of a DLPack run (and the line a resumed run starts
/// with).
#[derive(Default)]
struct Bar(Option<Progress>);

impl crate::engine::session::Events for Bar {
    fn start(&mut self, todo: usize, resuming: Option<&str>) {
        if let Some(words) = resuming {
            println!("{words}");
        }
        self.0 = Some(Progress::new(todo));
    }

    fn case(&mut self, c: &report::Case, new: bool) {
        let failed = !matches!(
            c.verdict,
            report::Verdict::Pass | report::Verdict::Skip | report::Verdict::Limitation
        );
        if let (Some(p), true) = (&mut self.0, new) {
            p.tick(failed);
        }
    }

    fn cases_done(&mut self) {
        if let Some(p) = &mut self.0 {
            p.clear();
        }
    }
}

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
    let path = args
        .report
        .clone()
        .or(args.resume.clone())
        .unwrap_or_else(|| {
            PathBuf::from("reports").join(format!(
                "certify-dlpack-{}.json",
                report::time::compact(std::time::SystemTime::now())
            ))
        });
    let (r, interrupted) = engine::certify(
        engine::Request {
            adapter: &adapter,
            sides,
            filter: &args.filter,
            generated: gen,
            case_timeout_ms: args.case_timeout_ms,
            max_memory_mb: args.max_memory_mb,
            expectations: args.expectations.as_ref(),
            replay_prefix: prefix,
            report: Some(path.clone()),
            resume: args.resume.as_deref(),
            invocation: args.invocation.clone(),
            seed: (args.cases > 0).then_some(args.seed),
            shrink_candidates: args.shrink_candidates,
        },
        &mut Bar::default(),
    )
    .map_err(BadInput)?;
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
    if let Some(junit) = &args.junit {
        let suite = format!("arrowcert {} py:{adapter}", engine::COMMAND);
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
        let (r, _) = engine::certify(
            engine::Request {
                adapter,
                sides: both,
                filter: &Filter::default(),
                generated: run::Generated {
                    seed: f.seed,
                    count: f.cases,
                    extra: Vec::new(),
                },
                case_timeout_ms: f.case_timeout_ms,
                max_memory_mb: f.max_memory_mb,
                expectations: expectations.as_ref(),
                replay_prefix: format!(
                    "arrowcert certify --dlpack --producer {spec} --consumer {spec}"
                ),
                report: None,
                resume: None,
                invocation: std::env::args().collect(),
                seed: None,
                shrink_candidates: 0,
            },
            &mut Bar::default(),
        )
        .map_err(BadInput)?;
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

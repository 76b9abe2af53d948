//! `arrowcert certify --dlpack`: DLPack certification of a Python library
//! through its adapter file (docs/DLPACK.md), its cases run by the one
//! runner (`crate::run`, `worker --mode dlpack`), and `dlpack-matrix`.

use std::path::PathBuf;

use super::progress::Progress;
use super::words::{resume_command, shell_word};
use super::BadInput;
use crate::dlpack::run::{self, Sides};
use crate::engine::dlpack as engine;
use crate::engine::dlpack_matrix;
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
    let request = dlpack_matrix::Request {
        out: f.out,
        expectations: f.expectations,
        case_timeout_ms: f.case_timeout_ms,
        max_memory_mb: f.max_memory_mb,
        cases: f.cases,
        seed: f.seed,
    };
    let (failed, [json, md]) =
        dlpack_matrix::run(&request, &libraries, &mut MatrixPrinter::default())
            .map_err(BadInput)?;
    println!("dlpack matrix: {} and {}", json.display(), md.display());
    Ok(if failed { 1 } else { 0 })
}

/// What `dlpack-matrix` prints: a line per library and per pair, and each
/// library's progress bar.
#[derive(Default)]
struct MatrixPrinter(Bar);

impl dlpack_matrix::Events for MatrixPrinter {
    fn bar(&mut self) -> &mut dyn crate::engine::session::Events {
        &mut self.0
    }

    fn library(&mut self, name: &str, judged: &report::outcome::Judgement, r: &Report) {
        println!(
            "{name}: {} ({})",
            judged.outcome.words(),
            super::words::counts(&r.summary, r.duration_ms)
        );
    }

    fn pair(&mut self, producer: &str, consumer: &str, summary: &report::Summary) {
        println!(
            "{producer} -> {consumer}: {}",
            super::words::counts(summary, 0)
        );
    }

    fn pair_failed(&mut self, producer: &str, consumer: &str, judged: &report::outcome::Judgement) {
        println!("  {producer} -> {consumer}: {}", judged.reasons.join("; "));
    }
}

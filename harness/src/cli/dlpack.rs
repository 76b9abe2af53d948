//! `arrowcert certify --dlpack`: DLPack certification of a Python library
//! through its adapter file (docs/DLPACK.md), and the hidden
//! `arrowcert dlpack-worker` that runs its cases.

use std::path::PathBuf;

use super::BadInput;
use crate::dlpack::run::{self, RunArgs, Sides, WorkerArgs};
use crate::report::{self, Report};
use crate::roundtrip::Filter;

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
}

/// The value rules: a DLPack case that checked one compared data.
const DATA_RULES: &[&str] = &[
    "dlpack.tensor.describes",
    "dlpack.consumer.values",
    "dlpack.consumer.strides",
    "dlpack.consumer.byte-offset",
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
    let sides = Sides {
        producer: args.producer.is_some(),
        consumer: args.consumer.is_some(),
    };
    let planned = run::planned(sides, &args.filter);
    if args.list {
        for c in &planned {
            println!("{}", c.id);
        }
        return Ok(0);
    }
    let bridge = crate::plugin::python::prepare(&adapter).map_err(BadInput)?;
    let mut prefix = "arrowcert certify --dlpack".to_string();
    if let Some(p) = &args.producer {
        prefix.push_str(&format!(" --producer {p}"));
    }
    if let Some(c) = &args.consumer {
        prefix.push_str(&format!(" --consumer {c}"));
    }
    let started = std::time::SystemTime::now();
    let clock = std::time::Instant::now();
    let cases = run::run(&RunArgs {
        bridge: bridge.clone(),
        sides,
        filter: args.filter.clone(),
        max_memory_mb: args.max_memory_mb,
        case_timeout_ms: args.case_timeout_ms,
        replay_prefix: prefix,
    })
    .map_err(BadInput)?;
    let mut r = Report::begun(
        "certify --dlpack",
        std::env::args().collect(),
        started,
        "dlpack built-in cases".into(),
    );
    r.plugins = vec![identity(&bridge, &adapter)];
    r.devices = vec!["cpu".into()];
    r.planned = planned.len() as u64;
    r.complete = cases.len() == planned.len();
    r.duration_ms = clock.elapsed().as_millis() as u64;
    r.finished_at = report::time::rfc3339(std::time::SystemTime::now());
    r.summary = report::Summary::of(&cases);
    r.rules = crate::certify::summary::verdicts_of(
        &cases,
        crate::rules::dlpack::DLPACK_RULES
            .iter()
            .filter(|rule| match rule.side {
                crate::rules::Side::Producer => sides.producer,
                crate::rules::Side::Consumer => sides.consumer,
                crate::rules::Side::Both => true,
            }),
    );
    r.cases = cases;
    crate::engine::judge(
        &mut r,
        DATA_RULES,
        args.expectations.as_ref(),
        args.filter.narrows(),
    );
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
    if let Some(path) = &args.report {
        report::write(&r, path)
            .map_err(|e| BadInput(format!("{}: cannot write the report: {e}", path.display())))?;
        println!("report: {}", path.display());
    }
    Ok(judgement.exit_code())
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

/// The flags of `arrowcert dlpack-worker` (hidden; the orchestrator's).
#[derive(clap::Args)]
pub struct WorkerFlags {
    #[arg(long)]
    pub bridge: PathBuf,
    #[arg(long)]
    pub results: PathBuf,
    #[arg(long, default_value_t = 0)]
    pub from: usize,
    #[arg(long)]
    pub producer_side: bool,
    #[arg(long)]
    pub consumer_side: bool,
    #[arg(long)]
    pub filter: Vec<String>,
    #[arg(long)]
    pub exact: bool,
    #[arg(long)]
    pub skip: Vec<String>,
    #[arg(long, default_value_t = 8192)]
    pub max_memory_mb: u64,
    #[arg(long, default_value = "")]
    pub replay_prefix: String,
}

/// `arrowcert dlpack-worker`.
pub fn worker_command(f: WorkerFlags) -> Result<i32, BadInput> {
    Ok(run::worker(WorkerArgs {
        bridge: f.bridge,
        results: f.results,
        from: f.from,
        sides: Sides {
            producer: f.producer_side,
            consumer: f.consumer_side,
        },
        filter: Filter {
            patterns: f.filter,
            exact: f.exact,
            skip: f.skip,
        },
        max_memory_mb: f.max_memory_mb,
        replay_prefix: f.replay_prefix,
    }))
}

//! `arrowcert certify --cai`: CUDA Array Interface certification of a
//! Python producer and/or consumer through its adapter file (docs/CAI.md).

use std::path::PathBuf;

use super::BadInput;
use crate::cai::run::Reach;
use crate::engine::cai as engine;
use crate::report;
use crate::roundtrip::Filter;

/// What `certify --cai` was given.
pub struct Args {
    pub producer: Option<String>,
    pub consumer: Option<String>,
    pub report: Option<PathBuf>,
    pub filter: Filter,
    pub list: bool,
    pub verbose: bool,
    pub expectations: Option<(PathBuf, report::expectations::Expectations)>,
    /// `--case-timeout-ms` and `--max-memory-mb`: each case runs in a
    /// worker process under them.
    pub limits: engine::Limits,
}

/// `arrowcert certify --cai ...`.
pub fn certify(args: Args) -> Result<i32, BadInput> {
    let spec = match (&args.producer, &args.consumer) {
        (Some(p), Some(c)) if p != c => return pair(&args, p, c),
        (Some(p), _) => p.clone(),
        (None, Some(c)) => c.clone(),
        (None, None) => {
            return Err(BadInput(
                "--cai needs --producer py:ADAPTER.py and/or --consumer py:ADAPTER.py".into(),
            ))
        }
    };
    let adapter = adapter_of(&spec)?;
    let request = engine::Request {
        spec: &spec,
        adapter,
        produces: args.producer.is_some(),
        consumes: args.consumer.is_some(),
        filter: &args.filter,
        expectations: args.expectations.as_ref(),
        report: args.report.clone(),
        invocation: std::env::args().collect(),
        limits: args.limits,
    };
    let plan = engine::plan(&request);
    if args.list {
        for id in plan.ids() {
            println!("{id}");
        }
        return Ok(0);
    }
    let ran = engine::certify(request, plan, &mut Quiet).map_err(BadInput)?;
    Ok(print(&args, ran))
}

/// The py: adapter file `spec` names.
fn adapter_of(spec: &str) -> Result<&str, BadInput> {
    spec.strip_prefix("py:").ok_or_else(|| {
        BadInput(format!(
            "--cai takes py: adapters (docs/CAI.md); {spec} is not one"
        ))
    })
}

/// `certify --cai --producer py:A.py --consumer py:B.py`: A's arrays
/// into B's consumer.
fn pair(args: &Args, p: &str, c: &str) -> Result<i32, BadInput> {
    let request = engine::PairRequest {
        producer: (p, adapter_of(p)?),
        consumer: (c, adapter_of(c)?),
        filter: &args.filter,
        expectations: args.expectations.as_ref(),
        report: args.report.clone(),
        invocation: std::env::args().collect(),
        limits: args.limits,
    };
    let plan = engine::pair_plan(&args.filter);
    if args.list {
        for c in &plan {
            println!("{}", crate::cai::pair::pair_id(c));
        }
        return Ok(0);
    }
    let ran = engine::certify_pair(request, plan, &mut Quiet).map_err(BadInput)?;
    Ok(print(args, ran))
}

/// Prints a finished run; its exit code.
fn print(args: &Args, ran: engine::Ran) -> i32 {
    let r = &ran.report;
    let judgement = r.outcome.clone().expect("judged");
    if !r.rules.is_empty() {
        print!(
            "{}",
            crate::certify::summary::render(&r.rules, &r.cases, &r.shrunk)
        );
    } else if !args.verbose {
        // A pair's cases are no rule's: its failures, each with its replay
        // (--verbose lists every case that did not pass below).
        for c in r
            .cases
            .iter()
            .filter(|c| c.verdict == report::Verdict::Fail)
        {
            println!(
                "fail {}: {}
  replay: {}",
                c.id,
                report::printable(c.message.as_deref().unwrap_or("")),
                c.replay
            );
        }
    }
    if let Reach::Unreachable(why) = &ran.reach {
        println!("device {}: {why}", ran.device);
    }
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
        "\ncertify --cai result: {}. {} cases: {}",
        judgement.outcome.words(),
        r.summary.total,
        super::words::counts(&r.summary, r.duration_ms)
    );
    for reason in &judgement.reasons {
        println!("  {}", report::printable(reason));
    }
    super::certify::print_unused_expectations(r);
    if let Some(path) = &args.report {
        println!("report: {}", path.display());
    }
    if let Some(sig) = ran.interrupted {
        println!(
            "interrupted by {}: {} of {} cases ran; the report is marked incomplete",
            crate::run::proc::signal_name(sig),
            r.cases.len(),
            r.planned
        );
        return 128 + sig;
    }
    judgement.exit_code()
}

/// A CAI run prints at its end only (its few cases take milliseconds).
struct Quiet;

impl crate::engine::session::Events for Quiet {
    fn start(&mut self, _todo: usize, _resuming: Option<&str>) {}
    fn case(&mut self, _c: &report::Case, _new: bool) {}
    fn cases_done(&mut self) {}
}

//! The DLPack certification engine: a library's DLPack cases (through its
//! adapter, `worker --mode dlpack`) run by the one runner under a session
//! (resume, checkpoints, interrupts), judged on the DLPack rules and the
//! Arrow rules its cases across the protocols touched, then its generated
//! failures shrunk. `arrowcert certify --dlpack` and `dlpack-matrix`
//! (`cli::dlpack`) parse and print.

#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};

use super::session::{Events, Opening, Session};
use crate::dlpack::run::{self, RunArgs, Sides};
use crate::report::{self, Report};
use crate::roundtrip::Filter;

/// The `command` of a DLPack certification's report (what `--resume`
/// checks) and its `data`.
pub const COMMAND: &str = "certify --dlpack";
pub const DATA: &str = "dlpack built-in cases";

/// The value rules: a DLPack case that checked one compared data.
const DATA_RULES: &[&str] = &[
    crate::rule!("dlpack.tensor.describes"),
    crate::rule!("dlpack.consumer.values"),
    crate::rule!("dlpack.consumer.strides"),
    crate::rule!("dlpack.consumer.byte-offset"),
];

/// What to certify, and how.
pub struct Request<'a> {
    /// The adapter file (`py:` without its prefix).
    pub adapter: &'a str,
    pub sides: Sides,
    pub filter: &'a Filter,
    pub generated: run::Generated,
    pub case_timeout_ms: u64,
    pub max_memory_mb: u64,
    pub expectations: Option<&'a (PathBuf, report::expectations::Expectations)>,
    /// The command that reruns one case (the case ID follows).
    pub replay_prefix: String,
    /// The report file, checkpointed as cases end (`None`: in memory
    /// only).
    pub report: Option<PathBuf>,
    /// `--resume`: the report of the interrupted run to continue.
    pub resume: Option<&'a Path>,
    pub invocation: Vec<String>,
    /// The seed the report names (`None`: no generated cases).
    pub seed: Option<u64>,
    /// Shrink candidates per failure (0: no shrinking).
    pub shrink_candidates: usize,
}

/// Certifies `req.adapter` on `req.sides`: every case in worker processes
/// (those a resumed report has not), the report with rule verdicts, judged
/// (with the expectations), checkpointed as cases end; then, unless
/// interrupted, the generated failures shrunk and the report written again.
/// Returns the report and the signal that interrupted the run, if any.
pub fn certify(req: Request, events: &mut dyn Events) -> Result<(Report, Option<i32>), String> {
    let planned = run::planned(req.sides, false, req.filter, &req.generated);
    let bridge = crate::plugin::python::prepare(req.adapter)?;
    let adapter_file = match req.resume {
        Some(_) => {
            Some(std::fs::canonicalize(req.adapter).map_err(|e| format!("{}: {e}", req.adapter))?)
        }
        None => None,
    };
    let run_args = RunArgs {
        bridge: bridge.clone(),
        pair_consumer: None,
        generated: req.generated.clone(),
        sides: req.sides,
        filter: req.filter.clone(),
        max_memory_mb: req.max_memory_mb,
        case_timeout_ms: req.case_timeout_ms,
        replay_prefix: req.replay_prefix.clone(),
    };
    // The adapter is loaded in a worker first: one that aborts or raises on
    // import ends the run with one line here, before this process opens it
    // (for its name) and would die with it.
    run::probe(&run_args).map_err(|e| format!("py:{}: {e}", req.adapter))?;
    let session = Session::open(Opening {
        command: COMMAND,
        invocation: req.invocation.clone(),
        data: DATA.into(),
        plan: planned.iter().map(|c| c.id.clone()).collect(),
        selected: (0..planned.len()).collect(),
        resume: req.resume,
        files: adapter_file
            .as_deref()
            .map(|f| ("dlpack", f))
            .into_iter()
            .collect(),
        report: req.report.clone(),
        default_stem: None,
        devices: std::iter::once("cpu".to_string())
            .chain(
                req.sides
                    .device
                    .filter(|d| *d != crate::device::Kind::Cpu)
                    .map(|d| d.name().to_string()),
            )
            .collect(),
        seed: req.seed,
        plugins: vec![identity(&bridge, req.adapter)],
    })?;
    events.start(session.todo.len(), session.resuming_words().as_deref());
    crate::run::proc::catch_interrupts();
    let ran = run::run(&run_args, Some(&session.todo), &mut |c| {
        session.record(c, events)
    })?;
    events.cases_done();
    let path = session.path.clone();
    let mut r = session.finish(ran.interrupted, |r| judge(r, req.sides, &req))?;
    if ran.interrupted.is_none() && req.shrink_candidates > 0 {
        r.shrunk = shrink(
            req.adapter,
            &r,
            &req.generated,
            req.shrink_candidates,
            &req.replay_prefix,
            req.case_timeout_ms,
            req.max_memory_mb,
        )?;
        // Written again: the shrunk failures came after the session's
        // final write.
        if let Some(path) = &path {
            report::write(&r, path)
                .map_err(|e| format!("{}: cannot write the report: {e}", path.display()))?;
        }
    }
    Ok((r, ran.interrupted))
}

/// The rule verdicts of a finished run, its limitations named after the
/// library, and the outcome.
fn judge(r: &mut Report, sides: Sides, req: &Request) {
    // The Arrow rules the cases across the protocols judged (to-arrow,
    // from-arrow) join the DLPack ones; those no case touched are not the
    // run's.
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
    super::judge(r, DATA_RULES, req.expectations, req.filter.narrows());
}

/// The report's identity of the library behind `adapter`.
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

/// Shrinks the first failure of each rule (and of crashes) among the
/// generated cases (of either side): proptest's walk over the case's value tree,
/// each candidate run in a worker like any case, at most `budget` of them.
pub fn shrink(
    adapter: &str,
    r: &Report,
    gen: &run::Generated,
    budget: usize,
    prefix: &str,
    case_timeout_ms: u64,
    max_memory_mb: u64,
) -> Result<Vec<report::ShrunkFailure>, String> {
    use crate::dlpack::engine;
    let bridge = crate::plugin::python::prepare(adapter)?;
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
        let run_one = |id: &str| -> Result<Option<report::Case>, String> {
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
            )?
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

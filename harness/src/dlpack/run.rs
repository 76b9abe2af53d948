//! DLPack cases on the one runner ([`crate::run`]): the orchestrator plans
//! them, and workers (`arrowcert worker --mode dlpack`) load the adapter
//! once and run them ([`super::suite`]), as every other run's cases. A
//! worker that dies (a library that wrote into a read-only tensor, read an
//! inaccessible one) or hangs costs the case it was running, which is
//! reported as a crash or a timeout (with the rule the case tests, where
//! the case tests one: [`charge`]), and a new worker goes on with the next
//! case. Workers run under the limits of every worker (address space, CPU
//! time, open files, output size, tasks), in process groups of their own
//! that are killed as a whole, and die with the orchestrator.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::report::{Case, RuleViolation, Verdict};
use crate::roundtrip::Filter;
use crate::run::proc;
use crate::run::worker::{Mode, WorkerArgs};
use crate::run::Job;

use super::engine::{self, DlCase, Kind};

/// Which sides to certify.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sides {
    pub producer: bool,
    pub consumer: bool,
    /// A device besides the CPU whose consumer cases join the plan
    /// (`--device`): skipped with the reason where the machine has none.
    pub device: Option<crate::device::Kind>,
}

/// Generated cases (of each side certified): `count` drawn with `seed`, and `extra`
/// generated IDs given as they are (a shrink candidate, a replay).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Generated {
    pub seed: u64,
    pub count: u64,
    pub extra: Vec<String>,
}

/// The plan for `sides` (or the pair plan, `pairs`), with the generated
/// consumer cases, narrowed by `filter`.
pub fn planned(sides: Sides, pairs: bool, filter: &Filter, gen: &Generated) -> Vec<DlCase> {
    let mut plan = if pairs {
        engine::plan_pairs()
    } else {
        engine::plan(sides.producer, sides.consumer)
    };
    if let (true, false, Some(d)) = (sides.consumer, pairs, sides.device) {
        if d != crate::device::Kind::Cpu {
            plan.extend(engine::plan_device(d));
        }
    }
    if sides.consumer && !pairs {
        plan.extend(
            engine::generated(gen.seed, gen.count, engine::GenSide::Consumer)
                .into_iter()
                .map(|(_, c)| c),
        );
    }
    if sides.producer && !pairs {
        plan.extend(
            engine::generated(gen.seed, gen.count, engine::GenSide::Producer)
                .into_iter()
                .map(|(_, c)| c),
        );
    }
    if !pairs {
        for id in &gen.extra {
            let wanted = match engine::GenSide::of(id) {
                Some(engine::GenSide::Consumer) => sides.consumer,
                Some(engine::GenSide::Producer) => sides.producer,
                None => false,
            };
            if let Some(c) = engine::parse_generated(id).filter(|_| wanted) {
                if plan.iter().all(|p| p.id != c.id) {
                    plan.push(c);
                }
            }
        }
    }
    plan.into_iter().filter(|c| filter.selects(&c.id)).collect()
}

/// What a run needs.
#[derive(Debug, Clone)]
pub struct RunArgs {
    /// The prepared bridge copy of the adapter (the producer, for pairs).
    pub bridge: PathBuf,
    /// Pairs: the consumer library's bridge copy.
    pub pair_consumer: Option<PathBuf>,
    pub generated: Generated,
    pub sides: Sides,
    pub filter: Filter,
    pub max_memory_mb: u64,
    /// A case with no result after this long is a timeout.
    pub case_timeout_ms: u64,
    /// The replay command's prefix (`arrowcert certify --dlpack --producer py:X`).
    pub replay_prefix: String,
}

/// What a DLPack worker is given (`worker --mode dlpack --plan JSON`):
/// enough to make the orchestrator's plan again, and the libraries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    pub bridge: PathBuf,
    pub pair_consumer: Option<PathBuf>,
    pub seed: u64,
    pub count: u64,
    pub extra: Vec<String>,
    pub producer: bool,
    pub consumer: bool,
    pub device: Option<String>,
    pub patterns: Vec<String>,
    pub exact: bool,
    pub skip: Vec<String>,
    pub replay_prefix: String,
}

impl Plan {
    fn of(args: &RunArgs) -> Plan {
        Plan {
            bridge: args.bridge.clone(),
            pair_consumer: args.pair_consumer.clone(),
            seed: args.generated.seed,
            count: args.generated.count,
            extra: args.generated.extra.clone(),
            producer: args.sides.producer,
            consumer: args.sides.consumer,
            device: args.sides.device.map(|d| d.name().to_string()),
            patterns: args.filter.patterns.clone(),
            exact: args.filter.exact,
            skip: args.filter.skip.clone(),
            replay_prefix: args.replay_prefix.clone(),
        }
    }

    /// The cases, as the orchestrator planned them.
    pub fn cases(&self) -> Vec<DlCase> {
        let sides = Sides {
            producer: self.producer,
            consumer: self.consumer,
            device: self.device.as_deref().and_then(crate::device::Kind::parse),
        };
        let filter = Filter {
            patterns: self.patterns.clone(),
            exact: self.exact,
            skip: self.skip.clone(),
        };
        let gen = Generated {
            seed: self.seed,
            count: self.count,
            extra: self.extra.clone(),
        };
        planned(sides, self.pair_consumer.is_some(), &filter, &gen)
    }
}

/// How a run ended: the cases that ran (in plan order) and the signal
/// that interrupted it, if one did.
pub struct Ran {
    pub cases: Vec<Case>,
    pub interrupted: Option<i32>,
}

/// The workers' configuration for `plan` (its `cases`, planned).
fn config(args: &RunArgs, plan: &Plan, cases: &[DlCase]) -> Result<crate::run::Config, String> {
    let worker_args = WorkerArgs {
        socket: PathBuf::new(),
        mode: Mode::Dlpack,
        producer: None,
        consumer: None,
        sources: Default::default(),
        options: crate::roundtrip::Options {
            replay_prefix: args.replay_prefix.clone(),
            ..Default::default()
        },
        limits: proc::Limits::worker(args.max_memory_mb),
        cpu_seconds: None,
        defer_consumer: None,
        plan: Some(serde_json::to_string(plan).map_err(|e| e.to_string())?),
        open: None,
        suites: None,
    };
    let cfg =
        crate::run::Config::for_workers(worker_args, 1, args.case_timeout_ms, args.max_memory_mb)
            .map_err(|e| format!("cannot find the arrowcert executable: {e}"))?;
    // The allocation tracker, preloaded into the workers of a plan with a
    // frees case (dlpack.deleter.frees counts the bytes they hold);
    // ARROWCERT_TRACKER=off leaves it out (the rule is then not exercised,
    // with the reason).
    let wants = cases.iter().any(|c| matches!(c.kind, Kind::Frees { .. }));
    let mut env = Vec::new();
    // Python's debug allocator hooks in every worker (unless the caller
    // chose an allocator): freed memory is overwritten with 0xDD, so a
    // deleter that uses its tensor after freeing it reads garbage and
    // crashes, and a Python allocation made without the GIL aborts
    // ("Python memory allocator called without holding the GIL"), the
    // crash dlpack.deleter.without-gil is charged with. It costs about
    // 1.1x on NumPy's certification (docs/DLPACK.md).
    if std::env::var_os("PYTHONMALLOC").is_none() {
        env.push(("PYTHONMALLOC".to_string(), PYTHON_MALLOC.to_string()));
    }
    let cfg = crate::run::Config {
        tracker: cfg.tracker && wants,
        env,
        ..cfg
    };
    Ok(cfg)
}

/// Loads the libraries in a worker and runs nothing: `Err` with one line
/// when the worker dies or fails while loading them (an adapter that
/// aborts or raises on import), so that the orchestrator, which then
/// opens the adapter itself to read its name, never loads one that kills
/// it.
pub fn probe(args: &RunArgs) -> Result<(), String> {
    let plan = Plan::of(args);
    let cases = plan.cases();
    let cfg = config(args, &plan, &cases)?;
    let pool = crate::run::Pool::new(&cfg, false).map_err(|e| e.0)?;
    crate::run::run(&cfg, &pool, cases.len(), Vec::new(), |_| {}, |_| {})
        .map(|_| ())
        .map_err(|e| e.0)
}

/// Runs the planned cases at `todo` (every one when `None`) in worker
/// processes; each case goes to `on_case` as it ends (charged: [`charge`]).
/// SIGINT or SIGTERM, once caught ([`proc::catch_interrupts`]), stops the
/// run with the cases that ended.
pub fn run(
    args: &RunArgs,
    todo: Option<&[usize]>,
    on_case: &mut dyn FnMut(&Case),
) -> Result<Ran, String> {
    let plan = Plan::of(args);
    let cases = plan.cases();
    let cfg = config(args, &plan, &cases)?;
    let pool = crate::run::Pool::new(&cfg, false).map_err(|e| e.0)?;
    let jobs: Vec<Job> = match todo {
        Some(todo) => todo.to_vec(),
        None => (0..cases.len()).collect(),
    }
    .into_iter()
    .filter_map(|index| {
        let case = cases.get(index)?;
        let replay = replay_of(&args.replay_prefix, &case.id);
        // What a case lost with its worker is reported as: nothing was
        // observed, so nothing was checked (but the rule [`charge`] adds).
        let mut record =
            engine::ended_without_verdict(case, &replay, Verdict::Crash, String::new());
        record.checked.clear();
        record.violations.clear();
        record.differences.clear();
        Some(Job { index, record })
    })
    .collect();
    if jobs.is_empty() {
        return Ok(Ran {
            cases: Vec::new(),
            interrupted: proc::interrupted(),
        });
    }
    let by_id: std::collections::HashMap<&str, &DlCase> =
        cases.iter().map(|c| (c.id.as_str(), c)).collect();
    let charged = |c: &Case| match by_id.get(c.id.as_str()) {
        Some(dl) => charge(dl, c.clone()),
        None => c.clone(),
    };
    let outcome = crate::run::run(
        &cfg,
        &pool,
        cases.len(),
        jobs,
        |_| {},
        |c| on_case(&charged(c)),
    )
    .map_err(|e| e.0)?;
    Ok(Ran {
        cases: outcome.cases.iter().map(charged).collect(),
        interrupted: outcome.interrupted,
    })
}

/// The allocator DLPack workers' Python runs with (`PYTHONMALLOC`).
pub const PYTHON_MALLOC: &str = "debug";

/// The step a crashed or hung case died in: the shared runner's message
/// names it ("..., during `STEP`").
fn step_of(case: &Case) -> Option<&str> {
    let m = case.message.as_deref()?;
    let at = m.rfind(", during `")? + ", during `".len();
    m[at..].strip_suffix('`')
}

/// The rule a crash or hang in this case breaks, when the case tests one
/// the only way it can fail is by crashing.
fn crash_rule(case: &DlCase, step: Option<&str>) -> Option<(&'static str, &'static str)> {
    // Only the planned (compact, one-layout) cases are charged: a crash of
    // a generated read-only tensor may come from its layout.
    if engine::GenSide::of(&case.id).is_some() {
        return None;
    }
    match &case.kind {
        Kind::Consumer { spec, .. } | Kind::ToArrow { spec } if spec.read_only => Some((
            crate::rule!("dlpack.consumer.read-only"),
            "the tensor's data lies on read-only pages: the crash is a write into it",
        )),
        // Only a crash (or hang) inside the deleter call itself.
        Kind::DeleterThread { .. } if step == Some(engine::DELETER_THREAD_STEP) => Some((
            crate::rule!("dlpack.deleter.without-gil"),
            "the crash or hang is in the tensor's deleter, called on a native thread that does not hold the GIL",
        )),
        Kind::Consumer { spec, .. } if spec.version.major != 1 => Some((
            crate::rule!("dlpack.consumer.major-version"),
            "the version 2.0 tensor's data lies on an inaccessible page: the crash is a read of it",
        )),
        _ => None,
    }
}

/// A crashed or hung case charged to the rule it tests, where it tests
/// one the only way it can fail is by crashing ([`crash_rule`]); other
/// cases as they are.
pub fn charge(case: &DlCase, mut c: Case) -> Case {
    let timeout = match c.verdict {
        Verdict::Timeout => true,
        Verdict::Crash => false,
        _ => return c,
    };
    // A hang is charged only in the deleter call (a deadlock); a crash
    // wherever the case's rule says.
    let charged = crash_rule(case, step_of(&c))
        .filter(|_| !timeout || matches!(case.kind, Kind::DeleterThread { .. }));
    let Some((rule, why)) = charged else {
        return c;
    };
    if c.violations.iter().any(|v| v.rule == rule) {
        return c;
    }
    let how = c.message.clone().unwrap_or_default();
    let v = RuleViolation {
        rule: rule.into(),
        level: crate::rules::find(rule).map_or("MUST".into(), |r| r.level.to_string()),
        at: match case.kind {
            Kind::DeleterThread { .. } => "the deleter, on a native thread".into(),
            _ => "from_dlpack".into(),
        },
        evidence: format!("{how}; {why}"),
    };
    c.differences.push(format!("{}: {}", v.rule, v.evidence));
    c.checked.push(rule.to_string());
    c.violations.push(v);
    c
}

/// The command that reruns exactly this case.
pub fn replay_of(prefix: &str, id: &str) -> String {
    format!("{prefix} --exact '{id}'")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The planned deleter-thread case and its record, ended as the one
    /// runner ends a case whose worker died or hung in `step`.
    fn lost(verdict: Verdict, step: &str) -> (DlCase, Case) {
        let case = engine::plan(true, false)
            .into_iter()
            .find(|c| matches!(c.kind, Kind::DeleterThread { .. }))
            .expect("a deleter-thread case is planned");
        let mut c = engine::ended_without_verdict(&case, "replay", verdict, String::new());
        c.checked.clear();
        c.violations.clear();
        c.message = Some(format!(
            "the worker killed by SIGSEGV (11) in the middle of the case, during `{step}`"
        ));
        (case, c)
    }

    #[test]
    fn a_crash_or_hang_in_the_deleter_call_breaks_the_gil_rule_and_elsewhere_nothing() {
        let (case, c) = lost(Verdict::Crash, engine::DELETER_THREAD_STEP);
        assert_eq!(step_of(&c), Some(engine::DELETER_THREAD_STEP));
        let charged = charge(&case, c);
        let rules: Vec<&str> = charged.violations.iter().map(|v| v.rule.as_str()).collect();
        assert_eq!(rules, [crate::rule!("dlpack.deleter.without-gil")]);
        assert_eq!(
            charged.checked,
            [crate::rule!("dlpack.deleter.without-gil")]
        );
        assert!(charged.differences[0].contains("during `"), "{charged:?}");
        let (case, c) = lost(Verdict::Timeout, engine::DELETER_THREAD_STEP);
        assert_eq!(charge(&case, c).violations.len(), 1);
        // The same case dying before the deleter is called is no one rule's.
        let (case, c) = lost(Verdict::Crash, "dlpack producer");
        let charged = charge(&case, c);
        assert!(charged.violations.is_empty(), "{charged:?}");
        assert!(charged.checked.is_empty(), "{charged:?}");
    }
}

//! The certification engine: runs planned certification cases, in this
//! process or in worker processes, and shrinks what failed (generated
//! scenarios to the smallest that still fail, async schedules to the
//! shortest). The run's sequence around them is
//! [`super::certification`]'s; `arrowcert certify` and `arrowcert replay`
//! (`cli::certify`) parse arguments and print.
//!
//! Above `run` (it drives workers) and `certify` (what one case checks).

#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::time::Instant;

use crate::certify::{self, summary, CaseSpec};
use crate::generate::{self, shrink};
use crate::plugin::Plugin;
use crate::report::{self, Case, PluginIdentity, Report, ShrunkFailure, Verdict};
use crate::run::{self, worker::identity};
use crate::scenario::Scenario;
use crate::sources::Sources;

/// At most this many failures are shrunk per run (MUST rules first).
pub const MAX_SHRINKS: usize = 8;

/// Runs planned cases, in this process or in workers.
pub struct Engine {
    /// Worker processes at once; 0 runs every case in this process.
    pub jobs: usize,
    /// The plugins' files, for workers to load.
    pub producer_path: Option<PathBuf>,
    pub consumer_path: Option<PathBuf>,
    /// Deadline of one case in a worker.
    pub case_timeout_ms: u64,
    /// Memory limit of each worker, in MiB (`run::proc::Limits::worker`).
    pub max_memory_mb: u64,
    pub opts: certify::Options,
    /// Loaded once when cases run in this process.
    pub producer: Option<Plugin>,
    pub consumer: Option<Plugin>,
    /// Workers kept between this engine's runs (the certification, then
    /// each shrink candidate): made on the first run in workers, dropped
    /// (workers stopped, scratch removed) with the engine.
    pub kept: std::cell::OnceCell<run::Pool>,
    /// What workers run under ([`run::Config::wrapper`]; empty: nothing).
    pub wrapper: Vec<String>,
}

impl Engine {
    /// Runs `selected` cases of `plan` over `scenarios` (as `sources`
    /// loads them); returns the signal that interrupted the run, if any.
    /// `plan[..planned]` is what workers plan themselves; specs after it
    /// are async cases spelled out by their IDs.
    #[allow(clippy::too_many_arguments)]
    pub fn run(
        &self,
        sources: &Sources,
        scenarios: &[Scenario],
        plan: &[CaseSpec],
        planned: usize,
        selected: &[usize],
        ready: &mut dyn FnMut(&[PluginIdentity]),
        on_case: &mut dyn FnMut(&Case),
    ) -> Result<Option<i32>, String> {
        if self.jobs == 0 {
            let mut ids = Vec::new();
            if let Some(p) = &self.producer {
                ids.push(identity("producer", p));
            }
            if let Some(c) = &self.consumer {
                ids.push(identity("consumer", c));
            }
            ready(&ids);
            let plugins = certify::Plugins {
                producer: self.producer.as_ref(),
                consumer: self.consumer.as_ref(),
            };
            return Ok(super::in_process(
                selected,
                |i| {
                    let spec = &plan[i];
                    let scenario = &scenarios[spec.scenario];
                    run::panic::guarded(
                        &spec.id,
                        || certify::record(scenario, spec, &self.opts),
                        || certify::run_case(plugins, scenario, spec, &self.opts),
                    )
                },
                on_case,
            ));
        }
        let worker_args = run::worker::WorkerArgs {
            socket: PathBuf::new(),
            mode: run::worker::Mode::Certify,
            producer: self.producer_path.clone(),
            consumer: self.consumer_path.clone(),
            sources: sources.clone(),
            options: crate::roundtrip::Options {
                replay_prefix: self.opts.replay_prefix.clone(),
                all_leaks: self.opts.all_leaks,
                ..Default::default()
            },
            limits: run::proc::Limits::worker(self.max_memory_mb),
            cpu_seconds: None,
            defer_consumer: None,
            plan: None,
            open: None,
            suites: None,
        };
        let jobs: Vec<run::Job> = selected
            .iter()
            .map(|&index| run::Job {
                index,
                record: certify::record(&scenarios[plan[index].scenario], &plan[index], &self.opts),
            })
            .collect();
        // A crash or hang is charged to the rule its case exercises.
        let specs: std::collections::HashMap<&str, &CaseSpec> = selected
            .iter()
            .map(|&i| (plan[i].id.as_str(), &plan[i]))
            .collect();
        super::Workers {
            args: worker_args,
            count: self.jobs.min(selected.len()).max(1),
            case_timeout_ms: self.case_timeout_ms,
            max_memory_mb: self.max_memory_mb,
            loads: "the plugin",
            env: Vec::new(),
            wrapper: self.wrapper.clone(),
        }
        .run(
            Some(&self.kept),
            planned,
            jobs,
            |p| ready(p),
            |c| match specs.get(c.id.as_str()) {
                Some(spec) if matches!(c.verdict, Verdict::Crash | Verdict::Timeout) => {
                    let mut charged = c.clone();
                    certify::crash::charge(spec, &mut charged);
                    on_case(&charged)
                }
                _ => on_case(c),
            },
        )
    }
}

/// Whether a case ended because a library declined its data: a consumer's
/// limitation, or a producer that could not hold the data (a skip: the
/// library's `load` raised, or its produce call returned ENOSYS).
pub fn declined_data(c: &Case) -> bool {
    match c.verdict {
        Verdict::Limitation => true,
        Verdict::Skip => c.message.as_deref().is_some_and(|m| {
            m.starts_with(certify::PRODUCER_DECLINED) || m.starts_with(certify::CONSUMER_DECLINED)
        }),
        _ => false,
    }
}

/// Whether a case's end can hide what a library does with the other
/// columns of its scenario: it declined the data, or failed inside itself
/// (an error with its words) on one of them, on a path where the data's
/// types are what it was handed: a producer's export, or a consumer's
/// plain array or stream. A varied consumer case's refusal is the
/// encoding's to explain (its variations are run apart), an error-path or
/// async case's is not about the data, and a crash is not split: a crash
/// on a varied case would crash again on every column, and the columns of
/// a crashed plain case are reached through the single-type scenarios.
pub fn hides_columns(c: &Case) -> bool {
    let mut parts = c.id.split('/');
    let data_path = match parts.next() {
        Some("producer") => !c.id.starts_with("producer/async/"),
        Some("consumer") => {
            let mut kind = parts.next();
            if kind.is_some_and(|k| k.starts_with("device:")) {
                kind = parts.next();
            }
            matches!(
                kind,
                Some("array" | "stream" | "device_array" | "device_stream")
            ) && parts.next() == Some("plain")
        }
        _ => false,
    };
    data_path && (declined_data(c) || c.verdict == Verdict::Error)
}

/// The mixed generated scenarios (`gen/<i>`) and shapes, two columns or
/// more, a library refused (or failed on, [`hides_columns`]) on some path, with the IDs of the refused
/// cases.
fn refused_mixed<'a>(
    report: &'a Report,
    scenarios: &'a [Scenario],
) -> Vec<(&'a Scenario, std::collections::BTreeSet<&'a str>)> {
    let mut out: Vec<(&Scenario, std::collections::BTreeSet<&str>)> = Vec::new();
    for c in report.cases.iter().filter(|c| hides_columns(c)) {
        if !generate::splits(&c.scenario) {
            continue;
        }
        let Some(s) = scenarios.iter().find(|s| s.name == c.scenario) else {
            continue;
        };
        if s.schema.fields().len() < 2 {
            continue;
        }
        match out.iter_mut().find(|(x, _)| x.name == s.name) {
            Some((_, ids)) => {
                ids.insert(c.id.as_str());
            }
            None => out.push((s, std::collections::BTreeSet::from([c.id.as_str()]))),
        }
    }
    out
}

/// A case ID of a column subset (`.../gen/3~col:1/...`, on scenario
/// `gen/3~col:1`) as the ID of the same case on the whole scenario
/// (`.../gen/3/...`); `None` for other scenarios.
pub fn parent_case_id(id: &str, scenario: &str) -> Option<String> {
    let (parent, _) = generate::parse_column_name(scenario)?;
    Some(id.replacen(&format!("/{scenario}"), &format!("/{parent}"), 1))
}

/// Sources that load exactly `scenarios` by name (column subsets and
/// shapes included), drawing generated ones from `seed`: what workers
/// need for cases outside the run's own plan.
fn only_these(scenarios: &[Scenario], seed: u64) -> Sources {
    Sources {
        builtin: false,
        gold: None,
        generated: 0,
        single_types: false,
        seed,
        only: Some(scenarios.iter().map(|s| s.name.clone()).collect()),
    }
}

/// One unsupported column hides a whole scenario: a library that refuses
/// one of a mixed scenario's columns refuses the scenario, and what it
/// does with the others is never seen. Each case a library refused, or
/// errored or crashed on ([`hides_columns`]: the column alone also names
/// the type that crashed it), on a mixed generated scenario or a shape
/// runs again on every column of that scenario
/// alone (`gen/3~col:1`: the same values, field and slices), so that every
/// type it does take is exercised and the one it refused is named by its
/// own refusal. Cases already in `report` (a resumed run) are not run
/// again. Each result goes to `on_case`.
pub fn split_refusals(
    engine: &Engine,
    report: &Report,
    scenarios: &[Scenario],
    sources: &Sources,
    sides: certify::Sides,
    on_case: &mut dyn FnMut(&Case),
) -> Result<(), String> {
    let done: std::collections::HashSet<&str> =
        report.cases.iter().map(|c| c.id.as_str()).collect();
    let mut subs = Vec::new();
    let mut wanted = std::collections::HashSet::new();
    for (s, ids) in refused_mixed(report, scenarios) {
        for col in 0..s.schema.fields().len() {
            let name = generate::column_name(&s.name, col);
            subs.push(generate::project(s, &name, col)?);
        }
        wanted.extend(ids.iter().map(|id| id.to_string()));
    }
    if subs.is_empty() || run::proc::interrupted().is_some() {
        return Ok(());
    }
    let plan = certify::plan(&subs, sides, sources.seed);
    let selected: Vec<usize> = (0..plan.len())
        .filter(|&i| {
            let spec = &plan[i];
            !done.contains(spec.id.as_str())
                && parent_case_id(&spec.id, &subs[spec.scenario].name)
                    .is_some_and(|p| wanted.contains(&p))
        })
        .collect();
    if selected.is_empty() {
        return Ok(());
    }
    let only = only_these(&subs, sources.seed);
    engine.run(
        &only,
        &subs,
        &plan,
        plan.len(),
        &selected,
        &mut |_| {},
        on_case,
    )?;
    Ok(())
}

/// The consumer's CPU data paths, in the order a moved pair tries them.
const DATA_PATHS: [&str; 4] = ["stream", "array", "device_stream", "device_array"];

/// The single-variation cases the covering plan put on a data path the
/// consumer does not serve (every plain case of that path skipped unread:
/// not exported, not offered), each as the IDs of the same (variation,
/// scenario) on the first path it does serve (stream, array, device
/// stream, device array), with the ID of the case it stands for. Without
/// this the pair would reach no path at all: the plan is made before any
/// plugin is loaded, so it cannot know which paths a library serves.
/// IDs already in `report` are left out.
pub fn moved_variations(report: &Report, scenarios: &[Scenario]) -> Vec<(String, String)> {
    let served = |p: &str| {
        let prefix = format!("consumer/{p}/plain/");
        report
            .cases
            .iter()
            .any(|c| c.id.starts_with(&prefix) && (super::coverage::ran(c) || declined_data(c)))
    };
    let serving: Vec<&str> = DATA_PATHS.into_iter().filter(|p| served(p)).collect();
    let Some(&to) = serving.first() else {
        return Vec::new();
    };
    let done: std::collections::HashSet<&str> =
        report.cases.iter().map(|c| c.id.as_str()).collect();
    let mut out: Vec<(String, String)> = Vec::new();
    for c in &report.cases {
        let Some(rest) = c.id.strip_prefix("consumer/") else {
            continue;
        };
        let Some((from, tail)) = rest.split_once('/') else {
            continue;
        };
        if !tail.starts_with("varied:") || serving.contains(&from) || !DATA_PATHS.contains(&from) {
            continue;
        }
        let Some((variation, _)) = tail.split_once('/') else {
            continue;
        };
        let Some(s) = scenarios.iter().find(|s| s.name == c.scenario) else {
            continue;
        };
        let base = format!("consumer/{to}/{variation}/{}", s.name);
        let ids: Vec<String> = if to == "array" || to == "device_array" {
            (0..s.batches.len())
                .map(|b| format!("{base}/batch:{b}"))
                .collect()
        } else {
            vec![base]
        };
        for id in ids {
            if !done.contains(id.as_str()) && !out.iter().any(|(x, _)| *x == id) {
                out.push((id, c.id.clone()));
            }
        }
    }
    out
}

/// Runs [`moved_variations`]: each result goes to `on_case` with the ID
/// of the case it stands for.
pub fn move_variations(
    engine: &Engine,
    report: &Report,
    scenarios: &[Scenario],
    sources: &Sources,
    sides: certify::Sides,
    on_case: &mut dyn FnMut(&Case, &str),
) -> Result<(), String> {
    let moved = moved_variations(report, scenarios);
    if moved.is_empty() || run::proc::interrupted().is_some() || !sides.consumer {
        return Ok(());
    }
    let mut plan = certify::plan(scenarios, sides, sources.seed);
    let planned = plan.len();
    let mut stands_for = std::collections::HashMap::new();
    for (id, original) in &moved {
        if let Some(spec) = certify::spec_for(&[], scenarios, id) {
            plan.push(spec);
            stands_for.insert(id.clone(), original.clone());
        }
    }
    let selected: Vec<usize> = (planned..plan.len()).collect();
    engine.run(
        sources,
        scenarios,
        &plan,
        planned,
        &selected,
        &mut |_| {},
        &mut |c: &Case| on_case(c, stands_for.get(&c.id).map_or("", String::as_str)),
    )?;
    Ok(())
}

/// Whether `--repeat` runs a case again: it ran and did not pass (a
/// failure, an error, a crash, a hang, a harness error, or a limitation).
/// Skips and passes are not rerun, nor the cases of a path found to hang
/// (each would hang again).
pub fn unsettled(c: &Case) -> bool {
    !matches!(c.verdict, Verdict::Pass | Verdict::Skip)
        && !c
            .message
            .as_deref()
            .is_some_and(|m| m.starts_with(report::HANGING))
}

/// `--repeat`: runs every [`unsettled`] case of `report` again, `rounds`
/// times, each round in fresh worker processes (the pool of the round
/// before is stopped first; in-process runs rerun in this process), and
/// returns the verdicts each case got, in round order. Cases of column
/// subsets (`gen/3~col:1`) are rebuilt from their parent scenario. A crash
/// already confirmed alone ([`run::crash_confirmed_alone`]) ran again in a
/// fresh worker during the run: that is its first repetition (a crash),
/// and the first round leaves it out (each crash costs a worker start).
#[allow(clippy::too_many_arguments)]
pub fn rerun_unsettled(
    engine: &mut Engine,
    report: &Report,
    scenarios: &[Scenario],
    plan: &[CaseSpec],
    planned: usize,
    sources: &Sources,
    sides: certify::Sides,
    rounds: u32,
) -> Result<std::collections::BTreeMap<String, Vec<Verdict>>, String> {
    let mut seen: std::collections::BTreeMap<String, Vec<Verdict>> = Default::default();
    let ids: Vec<&Case> = report.cases.iter().filter(|c| unsettled(c)).collect();
    if ids.is_empty() || rounds == 0 {
        return Ok(seen);
    }
    let repeated: std::collections::HashSet<&str> = ids
        .iter()
        .filter(|c| run::crash_confirmed_alone(c))
        .map(|c| c.id.as_str())
        .collect();
    for id in &repeated {
        seen.insert(id.to_string(), vec![Verdict::Crash]);
    }
    // Cases of the run's own scenarios: the plan, or found by their IDs.
    let mut whole: Vec<CaseSpec> = plan.to_vec();
    let mut selected = Vec::new();
    // Column subsets: their own scenarios and plan, as split_refusals
    // made them.
    let mut subs: Vec<Scenario> = Vec::new();
    let mut sub_ids = std::collections::HashSet::new();
    for c in &ids {
        if let Some(i) = whole.iter().position(|s| s.id == c.id) {
            selected.push(i);
        } else if let Some(spec) = certify::spec_for(&[], scenarios, &c.id) {
            whole.push(spec);
            selected.push(whole.len() - 1);
        } else if let Some((parent, col)) = generate::parse_column_name(&c.scenario) {
            if !subs.iter().any(|s| s.name == c.scenario) {
                if let Some(p) = scenarios.iter().find(|s| s.name == parent) {
                    subs.push(generate::project(p, &c.scenario, col)?);
                }
            }
            sub_ids.insert(c.id.clone());
        }
    }
    let sub_plan = certify::plan(&subs, sides, sources.seed);
    let sub_selected: Vec<usize> = (0..sub_plan.len())
        .filter(|&i| sub_ids.contains(&sub_plan[i].id))
        .collect();
    let only = only_these(&subs, sources.seed);
    for round in 0..rounds {
        if run::proc::interrupted().is_some() {
            break;
        }
        // The first round leaves out what already ran again alone.
        let first = |ids: &[usize], plan: &[CaseSpec]| -> Vec<usize> {
            ids.iter()
                .copied()
                .filter(|&i| round > 0 || !repeated.contains(plan[i].id.as_str()))
                .collect()
        };
        let selected = first(&selected, &whole);
        let sub_selected = first(&sub_selected, &sub_plan);
        // Fresh workers: the pool of the run (or round) before goes.
        drop(engine.kept.take());
        let mut record = |c: &Case| seen.entry(c.id.clone()).or_default().push(c.verdict);
        if !selected.is_empty() {
            engine.run(
                sources,
                scenarios,
                &whole,
                planned,
                &selected,
                &mut |_| {},
                &mut record,
            )?;
        }
        if !sub_selected.is_empty() {
            engine.run(
                &only,
                &subs,
                &sub_plan,
                sub_plan.len(),
                &sub_selected,
                &mut |_| {},
                &mut record,
            )?;
        }
    }
    Ok(seen)
}

/// The verdicts a case got, its first run's first, when they are not all
/// the same (`Case::flaky`); empty otherwise.
pub fn flaky_outcomes(first: Verdict, reruns: &[Verdict]) -> Vec<Verdict> {
    let mut out = vec![first];
    for &v in reruns {
        if !out.contains(&v) {
            out.push(v);
        }
    }
    if out.len() > 1 {
        out
    } else {
        Vec::new()
    }
}

/// What a shrink is after: a rule broken, or the process dying.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    Rule(String),
    Crash,
}

impl Target {
    fn name(&self) -> &str {
        match self {
            Target::Rule(r) => r,
            Target::Crash => "crash",
        }
    }

    fn shown_by(&self, c: &Case) -> bool {
        match self {
            Target::Rule(r) => c.violations.iter().any(|v| &v.rule == r),
            // A case not run because its path hangs shows nothing.
            Target::Crash => {
                matches!(c.verdict, Verdict::Crash | Verdict::Timeout) && !c.path_hangs()
            }
        }
    }

    fn evidence(&self, c: &Case) -> String {
        match self {
            Target::Rule(r) => c
                .violations
                .iter()
                .find(|v| &v.rule == r)
                .map(|v| format!("{}: {}", v.at, v.evidence))
                .unwrap_or_default(),
            Target::Crash => c.message.clone().unwrap_or_default(),
        }
    }
}

/// The failures worth shrinking: each failing rule (MUST first, INFO
/// never) and crashes, with the first generated case that showed it.
fn targets(report: &Report, sides: certify::Sides) -> Vec<(Target, &Case)> {
    let rules = summary::rule_verdicts(&report.cases, sides);
    let mut failing: Vec<_> = rules
        .iter()
        .filter(|r| r.verdict == Verdict::Fail && r.level != "INFO")
        .collect();
    failing.sort_by_key(|r| r.level != "MUST");
    // Async cases shrink their schedule instead (shrink_schedules).
    let generated = |c: &&Case| {
        !is_async(&c.id)
            && generate::parse_name(&c.scenario).is_some_and(|(_, walk)| walk.is_empty())
    };
    let mut out: Vec<(Target, &Case)> = Vec::new();
    let crash = Target::Crash;
    if let Some(c) = report
        .cases
        .iter()
        .filter(generated)
        .find(|c| crash.shown_by(c))
    {
        out.push((crash, c));
    }
    for r in failing {
        let t = Target::Rule(r.rule.clone());
        if let Some(c) = report
            .cases
            .iter()
            .filter(generated)
            .find(|c| t.shown_by(c))
        {
            out.push((t, c));
        }
    }
    out.truncate(MAX_SHRINKS);
    out
}

/// Shrinks what failed: generated scenarios to the smallest that still
/// fail ([`shrink_failures`]), then async schedules to the shortest
/// ([`shrink_schedules`]).
pub fn shrink_all(
    engine: &Engine,
    report: &Report,
    scenarios: &[Scenario],
    plan: &[CaseSpec],
    sources: &Sources,
    budget: shrink::Budget,
    sides: certify::Sides,
) -> Result<Vec<ShrunkFailure>, String> {
    let mut out = shrink_failures(engine, report, scenarios, plan, sources, budget, sides)?;
    out.extend(shrink_schedules(
        engine, report, scenarios, plan, sources, budget, sides,
    )?);
    Ok(out)
}

/// Shrinks each failure seen on a generated scenario to the smallest
/// scenario (on the same path) that still shows it.
pub fn shrink_failures(
    engine: &Engine,
    report: &Report,
    scenarios: &[Scenario],
    plan: &[CaseSpec],
    sources: &Sources,
    budget: shrink::Budget,
    sides: certify::Sides,
) -> Result<Vec<ShrunkFailure>, String> {
    let mut out = Vec::new();
    for (target, first) in targets(report, sides) {
        let Some((index, _)) = generate::parse_name(&first.scenario) else {
            continue;
        };
        let Some(path) = plan.iter().find(|s| s.id == first.id).map(|s| s.path) else {
            continue;
        };
        if run::proc::interrupted().is_some() {
            break;
        }
        let mut smallest: Option<(Case, String)> = None;
        let mut error = None;
        // Shrinking a hang costs at most one more timeout: once a candidate
        // timed out, no other is run.
        let hang = first.verdict == Verdict::Timeout;
        let mut timed_out = false;
        let result = shrink::shrink(sources.seed, index, budget, |candidate| {
            if error.is_some() || run::proc::interrupted().is_some() || (hang && timed_out) {
                return false;
            }
            let cands = std::slice::from_ref(candidate);
            let cplan = certify::plan(cands, sides, sources.seed);
            let selected: Vec<usize> = (0..cplan.len())
                .filter(|&i| cplan[i].path == path)
                .collect();
            let only = Sources {
                builtin: false,
                gold: None,
                generated: 0,
                single_types: false,
                seed: sources.seed,
                only: Some(vec![candidate.name.clone()]),
            };
            let mut hit: Option<Case> = None;
            let ran = engine.run(
                &only,
                cands,
                &cplan,
                cplan.len(),
                &selected,
                &mut |_| {},
                &mut |c| {
                    timed_out |= c.verdict == Verdict::Timeout;
                    if hit.is_none() && target.shown_by(c) {
                        hit = Some(c.clone());
                    }
                },
            );
            if let Err(e) = ran {
                error = Some(e);
                return false;
            }
            match hit {
                Some(c) => {
                    smallest = Some((c, generate::describe(candidate)));
                    true
                }
                None => false,
            }
        })?;
        if let Some(e) = error {
            return Err(e);
        }
        let (case, scenario) = smallest.unwrap_or_else(|| {
            let s = scenarios.iter().find(|s| s.name == first.scenario);
            (first.clone(), s.map(generate::describe).unwrap_or_default())
        });
        out.push(ShrunkFailure {
            target: target.name().to_string(),
            from_case: first.id.clone(),
            evidence: report::bounded(&target.evidence(&case), 4096),
            replay: case.replay.clone(),
            case: case.id,
            scenario,
            tried: result.tried as u64,
            steps: result.steps as u64,
            exhausted: result.exhausted,
        });
    }
    Ok(out)
}

fn is_async(id: &str) -> bool {
    id.starts_with("producer/async/") || id.starts_with("consumer/async/")
}

/// Shrinks each async rule failure to the shortest schedule (same
/// scenario) that still shows it: one simplification at a time
/// ([`Schedule::simpler`], [`Delivery::simpler`]), keeping each that still
/// fails, until none does.
///
/// [`Schedule::simpler`]: crate::asynchronous::schedule::Schedule::simpler
/// [`Delivery::simpler`]: crate::asynchronous::schedule::Delivery::simpler
pub fn shrink_schedules(
    engine: &Engine,
    report: &Report,
    scenarios: &[Scenario],
    plan: &[CaseSpec],
    sources: &Sources,
    budget: shrink::Budget,
    sides: certify::Sides,
) -> Result<Vec<ShrunkFailure>, String> {
    use crate::certify::Path;
    let rules = summary::rule_verdicts(&report.cases, sides);
    let mut out = Vec::new();
    let started = Instant::now();
    for r in rules.iter().filter(|r| {
        r.verdict == Verdict::Fail
            && r.level != "INFO"
            && (r.rule.starts_with("async.") || r.rule.starts_with("consumer.async."))
    }) {
        if out.len() >= MAX_SHRINKS || run::proc::interrupted().is_some() {
            break;
        }
        let target = Target::Rule(r.rule.clone());
        let Some(first) = report
            .cases
            .iter()
            // A slice of the stream (one fixed schedule) is not shrunk:
            // its schedule is not what it tests.
            .find(|c| is_async(&c.id) && c.slice.is_none() && target.shown_by(c))
        else {
            continue;
        };
        let Some(spec) = certify::spec_for(plan, scenarios, &first.id) else {
            continue;
        };
        let scenario = &scenarios[spec.scenario];
        // The scenario may be a gold one: workers rebuild it from the
        // directory (a regression: `--gold` was lost here, and a gold
        // scenario's async failure ended the run with bad input).
        let only = Sources {
            builtin: false,
            gold: sources.gold.clone(),
            generated: 0,
            single_types: false,
            seed: sources.seed,
            only: Some(vec![scenario.name.clone()]),
        };
        let cands = std::slice::from_ref(scenario);
        let base = certify::plan(cands, sides, sources.seed);
        let (mut best, mut best_case) = (spec.path, first.clone());
        let (mut tried, mut steps, mut exhausted) = (0u64, 0u64, false);
        'walk: loop {
            let next: Vec<Path> = match best {
                Path::Async(s) => s.simpler().into_iter().map(Path::Async).collect(),
                Path::AsyncConsumer(d) => {
                    d.simpler().into_iter().map(Path::AsyncConsumer).collect()
                }
                _ => Vec::new(),
            };
            for cand in next {
                if tried as usize >= budget.candidates || started.elapsed() > budget.time {
                    exhausted = true;
                    break 'walk;
                }
                tried += 1;
                let id = match cand {
                    Path::Async(s) => format!("producer/async/{s}/{}", scenario.name),
                    Path::AsyncConsumer(d) => format!("consumer/async/{d}/{}", scenario.name),
                    _ => unreachable!("async paths only"),
                };
                let mut cplan = base.clone();
                let index = match cplan.iter().position(|s| s.id == id) {
                    Some(i) => i,
                    None => {
                        let Some(spec) = certify::spec_for(&[], cands, &id) else {
                            continue;
                        };
                        cplan.push(spec);
                        cplan.len() - 1
                    }
                };
                let mut hit: Option<Case> = None;
                engine.run(
                    &only,
                    cands,
                    &cplan,
                    base.len(),
                    &[index],
                    &mut |_| {},
                    &mut |c| {
                        if hit.is_none() && target.shown_by(c) {
                            hit = Some(c.clone());
                        }
                    },
                )?;
                if let Some(c) = hit {
                    best = cand;
                    best_case = c;
                    steps += 1;
                    continue 'walk;
                }
            }
            break;
        }
        out.push(ShrunkFailure {
            target: target.name().to_string(),
            from_case: first.id.clone(),
            evidence: report::bounded(&target.evidence(&best_case), 4096),
            replay: best_case.replay.clone(),
            case: best_case.id.clone(),
            scenario: generate::describe(scenario),
            tried,
            steps,
            exhausted,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod split_tests {
    use super::*;

    fn case(scenario: &Scenario, verdict: Verdict, message: &str) -> Case {
        let mut c = crate::roundtrip::not_run(
            &format!("producer/stream/{}", scenario.name),
            "stream",
            scenario,
            None,
            None,
            "arrowcert replay",
        );
        c.verdict = verdict;
        c.message = Some(message.into());
        c
    }

    /// Declines and errors on a mixed scenario or a shape of two columns
    /// or more are split; crashes, passes, failures, skips of a path,
    /// single-column scenarios and varied consumer cases are not.
    #[test]
    fn what_is_split_into_columns() {
        let seed = 3;
        let mixed: Vec<Scenario> = (0..60)
            .map(|i| generate::scenario(seed, &generate::name(i, &[])).unwrap())
            .filter(|s| s.schema.fields().len() >= 2)
            .take(6)
            .collect();
        let single = generate::scenario(seed, "gen/type:int8").unwrap();
        let shape = generate::scenario(seed, "gen/shape:canonical-extensions").unwrap();
        let declined = format!("{}load() cannot hold this data", certify::PRODUCER_DECLINED);
        let cases = vec![
            case(&mixed[0], Verdict::Skip, &declined),
            case(
                &mixed[1],
                Verdict::Error,
                "the library failed inside itself",
            ),
            case(&mixed[2], Verdict::Crash, "the worker killed by SIGABRT"),
            case(&mixed[3], Verdict::Pass, ""),
            case(&mixed[4], Verdict::Fail, "1 rule(s) broken"),
            case(
                &mixed[5],
                Verdict::Skip,
                "arrowcert_produce_stream is not exported by the plugin",
            ),
            case(&single, Verdict::Skip, &declined),
            case(
                &shape,
                Verdict::Limitation,
                "the consumer declined: extension types",
            ),
        ];
        let report = Report {
            cases,
            ..Report::begun(
                "certify",
                Vec::new(),
                std::time::SystemTime::now(),
                String::new(),
            )
        };
        let mut all = mixed.clone();
        all.extend([single, shape.clone()]);
        let split: Vec<&str> = refused_mixed(&report, &all)
            .iter()
            .map(|(s, _)| s.name.as_str())
            .collect();
        assert_eq!(
            split,
            [&mixed[0].name, &mixed[1].name, &shape.name].map(String::as_str)
        );
        // A consumer's decline: split on a plain case, not a varied one.
        let consumer = |enc: &str| {
            let mut c = case(&shape, Verdict::Limitation, "the consumer declined");
            c.id = format!("consumer/stream/{enc}/{}", shape.name);
            c
        };
        assert!(hides_columns(&consumer("plain")));
        assert!(!hides_columns(&consumer("varied")));
        let mut error_path = consumer("plain");
        error_path.id = format!("consumer/stream_error/schema-EINVAL/{}", shape.name);
        assert!(!hides_columns(&error_path));
        let id = format!("producer/stream/{}~col:1/batch:0", mixed[0].name);
        assert_eq!(
            parent_case_id(&id, &format!("{}~col:1", mixed[0].name)),
            Some(format!("producer/stream/{}/batch:0", mixed[0].name))
        );
    }
}

#[cfg(test)]
mod move_tests {
    use super::*;

    fn case(id: &str, s: &Scenario, verdict: Verdict, message: &str) -> Case {
        let mut c = crate::roundtrip::not_run(id, "stream", s, None, None, "arrowcert replay");
        c.verdict = verdict;
        c.message = Some(message.into());
        c
    }

    /// A single-variation case planned on a path the consumer does not
    /// serve moves to the first path it does (per batch on the array
    /// paths); one on a served path, or with no path served, does not.
    #[test]
    fn variations_on_unserved_paths_move_to_a_served_one() {
        let s = generate::scenario(3, "gen/type:int32").unwrap();
        assert!(s.batches.len() >= 2);
        let name = &s.name;
        let missing = "arrowcert_consume_device_array is not exported by the plugin";
        let mut cases = vec![
            case(
                &format!("consumer/array/plain/{name}/batch:0"),
                &s,
                Verdict::Pass,
                "",
            ),
            case(
                &format!("consumer/stream/plain/{name}"),
                &s,
                Verdict::Skip,
                "arrowcert_consume_stream is not exported by the plugin",
            ),
            case(
                &format!("consumer/device_array/plain/{name}/batch:0"),
                &s,
                Verdict::Skip,
                missing,
            ),
            case(
                &format!("consumer/device_array/varied:offset/{name}/batch:0"),
                &s,
                Verdict::Skip,
                missing,
            ),
            case(
                &format!("consumer/device_array/varied:offset/{name}/batch:1"),
                &s,
                Verdict::Skip,
                missing,
            ),
            case(
                &format!("consumer/stream/varied:garbage/{name}"),
                &s,
                Verdict::Skip,
                "arrowcert_consume_stream is not exported by the plugin",
            ),
            case(
                &format!("consumer/array/varied:unaligned/{name}/batch:0"),
                &s,
                Verdict::Pass,
                "",
            ),
        ];
        let report = |cases: Vec<Case>| Report {
            cases,
            ..Report::begun(
                "certify",
                Vec::new(),
                std::time::SystemTime::now(),
                String::new(),
            )
        };
        let moved = moved_variations(&report(cases.clone()), std::slice::from_ref(&s));
        let from_device = format!("consumer/device_array/varied:offset/{name}/batch:0");
        let from_stream = format!("consumer/stream/varied:garbage/{name}");
        let mut want: Vec<(String, String)> = (0..s.batches.len())
            .map(|b| {
                (
                    format!("consumer/array/varied:offset/{name}/batch:{b}"),
                    from_device.clone(),
                )
            })
            .collect();
        want.extend((0..s.batches.len()).map(|b| {
            (
                format!("consumer/array/varied:garbage/{name}/batch:{b}"),
                from_stream.clone(),
            )
        }));
        assert_eq!(moved, want);
        // Each moved ID is a case the worker can find by its ID.
        for (id, _) in &moved {
            assert!(
                certify::spec_for(&[], std::slice::from_ref(&s), id).is_some(),
                "{id}"
            );
        }
        // Already run (a resumed run): not again.
        cases.push(case(&want[0].0, &s, Verdict::Pass, ""));
        let again = moved_variations(&report(cases.clone()), std::slice::from_ref(&s));
        assert_eq!(again.len(), want.len() - 1);
        // No path served: nothing to move to.
        cases.retain(|c| !c.id.contains("/array/"));
        assert!(moved_variations(&report(cases), std::slice::from_ref(&s)).is_empty());
    }
}

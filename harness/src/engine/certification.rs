//! A certification run from plan to judged report, the sequence
//! `arrowcert certify` and `arrowcert replay` share: plan, select, resume,
//! run (in this process or in workers), the follow-up cases (refusals of
//! mixed scenarios split, variations moved), `--repeat`, shrinking, then
//! the report judged and written. The command parses and prints
//! ([`Events`]); this runs.

#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};

use super::certify::{shrink_all, Engine};
use super::session::{Events, Opening, Ran, Session};
use crate::certify::{self, summary, CaseSpec};
use crate::device::Kind as DeviceKind;
use crate::generate::{self, shrink};
use crate::plugin::Plugin;
use crate::report::{expectations::Expectations, outcome, robustness::Robustness, Case};
use crate::roundtrip::Filter;
use crate::scenario::Scenario;
use crate::sources::Sources;

/// What to certify, and how.
pub struct Request<'a> {
    pub sources: &'a Sources,
    pub scenarios: &'a [Scenario],
    pub sides: certify::Sides,
    /// The device types the run covers.
    pub devices: &'a [DeviceKind],
    pub filter: &'a Filter,
    /// `--all-variations`: the full product of the single-variation cases.
    pub all_variations: bool,
    /// `arrowcert replay`: no follow-up cases, no repeats, no shrinking,
    /// no coverage, no report file unless `report` names one.
    pub replay: bool,
    pub resume: Option<&'a Path>,
    pub report: Option<PathBuf>,
    pub invocation: Vec<String>,
    pub producer: Option<&'a Path>,
    pub consumer: Option<&'a Path>,
    /// Worker processes; 0 runs in this process.
    pub jobs: usize,
    pub case_timeout_ms: u64,
    pub max_memory_mb: u64,
    /// What workers run under (`replay --under valgrind`).
    pub wrapper: Vec<String>,
    pub opts: certify::Options,
    /// `--repeat N`: every case that did not pass runs N more times.
    pub repeat: u32,
    pub shrink: shrink::Budget,
    pub expectations: Option<&'a (PathBuf, Expectations)>,
}

/// The cases of a run: every planned one, and the positions selected.
pub struct Plan {
    pub specs: Vec<CaseSpec>,
    /// `specs[..planned]` is what workers plan themselves; specs after it
    /// are spelled out by their IDs (shrunk async schedules, variations).
    pub planned: usize,
    pub selected: Vec<usize>,
}

/// Plans the run: the certification's cases, an async case ID the filter
/// names that is not planned (a shrunk schedule spells out its schedule:
/// it runs as asked), and with `--all-variations` the full product of the
/// single-variation cases; then those on the run's devices the filter
/// selects.
pub fn plan(req: &Request) -> Plan {
    let mut specs = certify::plan(req.scenarios, req.sides, req.sources.seed);
    let planned = specs.len();
    for p in &req.filter.patterns {
        if !specs.iter().any(|s| &s.id == p) {
            if let Some(spec) = certify::spec_for(&[], req.scenarios, p) {
                specs.push(spec);
            }
        }
    }
    if req.all_variations && req.sides.consumer {
        // After the planned ones (workers plan the default, `planned`
        // cases, and find these by their IDs: certify::spec_for).
        let have: std::collections::HashSet<String> = specs.iter().map(|s| s.id.clone()).collect();
        let more: Vec<_> = certify::consumer::variation_plan(req.scenarios, true)
            .into_iter()
            .filter(|s| !have.contains(&s.id))
            .collect();
        specs.extend(more);
    }
    let selected = (0..specs.len())
        .filter(|&i| req.devices.contains(&specs[i].device) && req.filter.selects(&specs[i].id))
        .collect();
    Plan {
        specs,
        planned,
        selected,
    }
}

/// Runs a certification: `after_workers` runs once the certification's
/// workers are gone (the malformed runs make pools of their own in the
/// same scratch directory), told whether the run was interrupted; what it
/// returns is the report's robustness section.
pub fn run(
    req: Request,
    plan: Plan,
    events: &mut dyn Events,
    after_workers: impl FnOnce(bool) -> Result<Option<Robustness>, String>,
) -> Result<Ran, String> {
    let Plan {
        specs,
        planned,
        selected,
    } = plan;
    let mut files: Vec<(&str, &Path)> = Vec::new();
    if let Some(p) = req.producer {
        files.push(("producer", p));
    }
    if let Some(c) = req.consumer {
        files.push(("consumer", c));
    }
    let session = Session::open(Opening {
        command: if req.replay { "replay" } else { "certify" },
        invocation: req.invocation.clone(),
        data: req.sources.describe(),
        plan: specs.iter().map(|s| s.id.clone()).collect(),
        selected,
        resume: req.resume,
        files,
        report: req.report.clone(),
        default_stem: (!req.replay).then_some("certify"),
        devices: req.devices.iter().map(|d| d.name().to_string()).collect(),
        seed: req
            .scenarios
            .iter()
            .any(|s| s.name.starts_with(generate::PREFIX))
            .then_some(req.sources.seed),
        plugins: Vec::new(),
    })?;
    events.start(session.todo.len(), session.resuming_words().as_deref());
    crate::run::proc::catch_interrupts();
    let load = |path: Option<&Path>| -> Result<Option<Plugin>, String> {
        match path {
            Some(p) if req.jobs == 0 => Plugin::load(p).map(Some).map_err(|e| e.to_string()),
            _ => Ok(None),
        }
    };
    let mut engine = Engine {
        jobs: req.jobs,
        producer_path: req.producer.map(Path::to_path_buf),
        consumer_path: req.consumer.map(Path::to_path_buf),
        case_timeout_ms: req.case_timeout_ms,
        max_memory_mb: req.max_memory_mb,
        opts: req.opts.clone(),
        producer: load(req.producer)?,
        consumer: load(req.consumer)?,
        kept: Default::default(),
        wrapper: req.wrapper.clone(),
    };
    // Both callbacks print: one borrow at a time.
    let shared = std::cell::RefCell::new(&mut *events);
    let interrupted = engine.run(
        req.sources,
        req.scenarios,
        &specs,
        planned,
        &session.todo,
        &mut |plugins| {
            session.name_plugins(plugins);
            shared.borrow_mut().ready(plugins);
        },
        &mut |c| session.record(c, *shared.borrow_mut()),
    )?;
    events.cases_done();
    let settled = interrupted.is_none() && !req.replay;
    if settled {
        follow_ups(&req, &engine, &session, events)?;
    }
    if settled && req.repeat > 0 {
        repeat(&req, &mut engine, &session, &specs, planned, events)?;
    }
    // Shrink what failed on generated scenarios.
    let shrunk = if settled && req.shrink.candidates > 0 {
        shrink_all(
            &engine,
            &session.report(),
            req.scenarios,
            &specs,
            req.sources,
            req.shrink,
            req.sides,
        )?
    } else {
        Vec::new()
    };
    drop(engine);
    let robustness = after_workers(interrupted.is_some())?;
    let interrupted = interrupted.or_else(crate::run::proc::interrupted);
    let path = session.path.clone();
    let selected = session.selected;
    let report = session.finish(interrupted, |r| {
        r.robustness = robustness;
        r.rules = summary::rule_verdicts(&r.cases, req.sides);
        r.shrunk = shrunk;
        if !req.replay {
            r.coverage = super::coverage::of(&r.cases, req.scenarios);
        }
        super::judge(
            r,
            outcome::DATA_RULES,
            req.expectations,
            req.filter.narrows(),
        );
    })?;
    Ok(Ran {
        report,
        path,
        interrupted,
        selected,
    })
}

/// The follow-up cases of a finished run, each result placed after the
/// case it follows up: refusals of mixed generated scenarios split (every
/// column again alone), and single-variation pairs planned on a path the
/// consumer does not serve moved to one it does.
fn follow_ups(
    req: &Request,
    engine: &Engine,
    session: &Session,
    events: &mut dyn Events,
) -> Result<(), String> {
    super::certify::split_refusals(
        engine,
        &session.report(),
        req.scenarios,
        req.sources,
        req.sides,
        &mut |c: &Case| {
            events.follow_up(c);
            match super::certify::parent_case_id(&c.id, &c.scenario) {
                Some(parent) => session.add_after(c, &parent),
                None => session.add(c),
            }
        },
    )?;
    super::certify::move_variations(
        engine,
        &session.report(),
        req.scenarios,
        req.sources,
        req.sides,
        &mut |c: &Case, original: &str| {
            events.follow_up(c);
            session.add_after(c, original);
        },
    )
}

/// `--repeat`: what did not pass runs again; a verdict that changes makes
/// the case flaky, with the outcomes seen.
fn repeat(
    req: &Request,
    engine: &mut Engine,
    session: &Session,
    specs: &[CaseSpec],
    planned: usize,
    events: &mut dyn Events,
) -> Result<(), String> {
    let seen = super::certify::rerun_unsettled(
        engine,
        &session.report(),
        req.scenarios,
        specs,
        planned,
        req.sources,
        req.sides,
        req.repeat,
    )?;
    session.amend(|cases| {
        for c in cases.iter_mut() {
            if let Some(reruns) = seen.get(&c.id) {
                c.flaky = super::certify::flaky_outcomes(c.verdict, reruns);
                if !c.flaky.is_empty() {
                    events.flaky(c);
                }
            }
        }
    });
    Ok(())
}

//! The round-trip engine: runs planned producer -> harness -> consumer
//! cases, in this process or in worker processes, under a session (select,
//! resume, checkpoints, judge). `arrowcert roundtrip` (`cli::roundtrip`)
//! parses arguments and prints; this runs.
//!
//! Above `run` (it drives workers) and `roundtrip` (what one case checks).

#![forbid(unsafe_code)]

use std::path::PathBuf;

use crate::plugin::Plugin;
use crate::report::{Case, PluginIdentity};
use crate::roundtrip::{self, CaseSpec, Options};
use crate::run::{self, worker::identity};
use crate::scenario::Scenario;
use crate::sources::Sources;

/// Runs planned round-trip cases, in this process or in workers.
pub struct Engine {
    /// Worker processes at once; 0 runs every case in this process.
    pub jobs: usize,
    /// The plugins' files (loaded here for `jobs == 0`, else by workers).
    pub producer: PathBuf,
    pub consumer: PathBuf,
    /// Deadline of one case in a worker.
    pub case_timeout_ms: u64,
    /// Memory limit of each worker, in MiB (`run::proc::Limits::worker`).
    pub max_memory_mb: u64,
    pub opts: Options,
}

impl Engine {
    /// Runs `selected` cases of `plan` over `scenarios` (as `sources` loads
    /// them): `ready` hears who the plugins are before the first case,
    /// `on_case` each case as it ends. Returns the signal that interrupted
    /// the run, if any; an error when the plugins cannot be run at all.
    pub fn run(
        &self,
        sources: &Sources,
        scenarios: &[Scenario],
        plan: &[CaseSpec],
        selected: &[usize],
        ready: &mut dyn FnMut(&[PluginIdentity]),
        on_case: &mut dyn FnMut(&Case),
    ) -> Result<Option<i32>, String> {
        if self.jobs == 0 {
            let producer = Plugin::load(&self.producer).map_err(|e| e.to_string())?;
            let consumer = Plugin::load(&self.consumer).map_err(|e| e.to_string())?;
            ready(&[
                identity("producer", &producer),
                identity("consumer", &consumer),
            ]);
            return Ok(super::in_process(
                selected,
                |i| {
                    let spec = &plan[i];
                    let scenario = &scenarios[spec.scenario];
                    run::panic::guarded(
                        &spec.id,
                        || roundtrip::record(scenario, spec, &self.opts),
                        || roundtrip::run_case(&producer, &consumer, scenario, spec, &self.opts),
                    )
                },
                on_case,
            ));
        }
        let worker_args = run::worker::WorkerArgs {
            socket: PathBuf::new(),
            mode: run::worker::Mode::Roundtrip,
            producer: Some(self.producer.clone()),
            consumer: Some(self.consumer.clone()),
            sources: sources.clone(),
            options: self.opts.clone(),
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
                record: roundtrip::record(
                    &scenarios[plan[index].scenario],
                    &plan[index],
                    &self.opts,
                ),
            })
            .collect();
        // The workers load the plugins, so a plugin that crashes while
        // loading fails a worker, not this process.
        super::Workers {
            args: worker_args,
            count: self.jobs,
            case_timeout_ms: self.case_timeout_ms,
            max_memory_mb: self.max_memory_mb,
            loads: "the plugins",
            env: Vec::new(),
            wrapper: Vec::new(),
        }
        .run(None, plan.len(), jobs, ready, on_case)
    }
}

/// What to run: the plan over the sources' scenarios, which cases, and
/// the report's particulars.
pub struct Request<'a> {
    pub sources: &'a Sources,
    pub scenarios: &'a [Scenario],
    pub plan: &'a [CaseSpec],
    pub filter: &'a roundtrip::Filter,
    /// `--resume`: the report of the interrupted run to continue.
    pub resume: Option<&'a std::path::Path>,
    pub report: Option<PathBuf>,
    pub invocation: Vec<String>,
    /// The seed of generated scenarios, if the run has any.
    pub seed: Option<u64>,
    pub expectations: Option<&'a (PathBuf, crate::report::expectations::Expectations)>,
}

/// Runs a round trip from plan to judged report: the cases the filter
/// selects (those a resumed report has not), each kept as it ends, then
/// the report judged (every pass compared data: no data rules needed).
pub fn run_all(
    req: Request,
    engine: Engine,
    events: &mut dyn super::session::Events,
) -> Result<super::session::Ran, String> {
    let selected: Vec<usize> = req
        .plan
        .iter()
        .enumerate()
        .filter(|(_, s)| req.filter.selects(&s.id))
        .map(|(i, _)| i)
        .collect();
    let session = super::session::Session::open(super::session::Opening {
        command: "roundtrip",
        invocation: req.invocation.clone(),
        data: req.sources.describe(),
        plan: req.plan.iter().map(|s| s.id.clone()).collect(),
        selected,
        resume: req.resume,
        files: vec![
            ("producer", &engine.producer),
            ("consumer", &engine.consumer),
        ],
        report: req.report.clone(),
        default_stem: Some("roundtrip"),
        devices: vec!["cpu".into()],
        seed: req.seed,
        plugins: Vec::new(),
    })?;
    events.start(session.todo.len(), session.resuming_words().as_deref());
    run::proc::catch_interrupts();
    // Both callbacks print: one borrow at a time.
    let shared = std::cell::RefCell::new(&mut *events);
    let interrupted = engine.run(
        req.sources,
        req.scenarios,
        req.plan,
        &session.todo,
        &mut |plugins| {
            session.name_plugins(plugins);
            shared.borrow_mut().ready(plugins);
        },
        &mut |c| session.record(c, *shared.borrow_mut()),
    )?;
    events.cases_done();
    let path = session.path.clone();
    let selected = session.selected;
    let report = session.finish(interrupted, |r| {
        super::judge(r, &[], req.expectations, req.filter.narrows());
    })?;
    Ok(super::session::Ran {
        report,
        path,
        interrupted,
        selected,
    })
}

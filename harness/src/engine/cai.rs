//! The CUDA Array Interface certification engine: a library's CAI cases
//! (through its adapter, in worker processes: a crash, a hang or a flood
//! costs one case) run under a session (checkpoints, interrupts), judged
//! on the CAI rules; a pair's cases judged by their values. `arrowcert certify
//! --cai` (`cli::cai`) parses and prints.

#![forbid(unsafe_code)]

use std::path::PathBuf;

use super::session::{Events, Opening, Session};
use crate::cai::run::{self, CaseSpec, Reach};
use crate::cai::suite::{Offers, Plan as SuitePlan};
use crate::dlpack::bridge::Bridge;
use crate::report::{self, expectations::Expectations, Report};
use crate::roundtrip::Filter;

/// The `command` of a CAI certification's report, and its `data`.
pub const COMMAND: &str = "certify --cai";
pub const DATA: &str = "cai built-in cases";

/// What to certify, and how.
pub struct Request<'a> {
    /// The library as named (`py:ADAPTER.py`).
    pub spec: &'a str,
    /// Its adapter file (`spec` without `py:`).
    pub adapter: &'a str,
    pub produces: bool,
    pub consumes: bool,
    pub filter: &'a Filter,
    pub expectations: Option<&'a (PathBuf, Expectations)>,
    /// The report file, checkpointed as cases end (`None`: in memory).
    pub report: Option<PathBuf>,
    pub invocation: Vec<String>,
    pub limits: Limits,
}

/// The planned cases: the producer's, then the consumer's.
pub struct Plan {
    pub producer: Vec<&'static CaseSpec>,
    pub consumer: Vec<&'static CaseSpec>,
}

impl Plan {
    /// Every case ID, producer cases first.
    pub fn ids(&self) -> Vec<String> {
        self.producer
            .iter()
            .map(|c| c.id())
            .chain(
                self.consumer
                    .iter()
                    .map(|c| crate::cai::consumer::consumer_id(c)),
            )
            .collect()
    }
}

/// The cases the filter selects on the sides certified.
pub fn plan(req: &Request) -> Plan {
    Plan {
        producer: run::CASES
            .iter()
            .filter(|c| req.produces && req.filter.selects(&c.id()))
            .collect(),
        consumer: run::CASES
            .iter()
            .filter(|c| {
                req.consumes
                    && c.pending
                    && req.filter.selects(&crate::cai::consumer::consumer_id(c))
            })
            .collect(),
    }
}

/// A finished (or interrupted) certification.
pub struct Ran {
    pub report: Report,
    /// The device the adapter's arrays live on, and whether the harness
    /// reaches it.
    pub device: String,
    pub reach: Reach,
    pub interrupted: Option<i32>,
}

/// Certifies the library: its adapter's offers checked (bad input when it
/// lacks what a side needs), every planned case run in a worker, the
/// report judged on the CAI rules.
pub fn certify(req: Request, plan: Plan, events: &mut dyn Events) -> Result<Ran, String> {
    let opened = open(req.spec, req.adapter, req.limits)?;
    if req.produces && !opened.offers.serves("cai_object") {
        return Err(format!(
            "{}: the adapter defines no cai_object(spec) (docs/CAI.md)",
            req.spec
        ));
    }
    if req.consumes && !opened.offers.serves("cai_consume") {
        return Err(format!(
            "{}: the adapter defines no cai_consume(obj) (docs/CAI.md)",
            req.spec
        ));
    }
    let device = opened.offers.device.clone();
    let reach = Reach::of(&device);
    let mut prefix = "arrowcert certify --cai".to_string();
    if req.produces {
        prefix.push_str(&format!(" --producer {}", req.spec));
    }
    if req.consumes {
        prefix.push_str(&format!(" --consumer {}", req.spec));
    }
    let ids = plan.ids();
    let session = Session::open(Opening {
        command: COMMAND,
        invocation: req.invocation.clone(),
        data: DATA.into(),
        selected: (0..ids.len()).collect(),
        plan: ids.clone(),
        resume: None,
        files: Vec::new(),
        report: req.report.clone(),
        default_stem: None,
        devices: vec![device.clone()],
        seed: None,
        plugins: vec![identity("cai", req.spec, req.adapter, &opened.bridge)],
    })?;
    // The workers load the adapter themselves.
    let bridge_path = opened.path.clone();
    drop(opened);
    events.start(session.todo.len(), None);
    let suite = SuitePlan {
        bridge: bridge_path,
        pair_consumer: None,
        ids,
        replay_prefix: prefix,
    };
    let interrupted = in_workers(&suite, &session, req.limits, events)?;
    events.cases_done();
    let (produces, consumes) = (req.produces, req.consumes);
    let report = session.finish(interrupted, |r| {
        r.rules = crate::certify::summary::verdicts_of(
            &r.cases,
            crate::rules::cai::CAI_RULES
                .iter()
                .filter(|r| match r.side {
                    crate::rules::Side::Producer => produces,
                    crate::rules::Side::Consumer => consumes,
                    crate::rules::Side::Both => true,
                }),
        );
        // Declined by the library itself (the adapter's, whichever side).
        let library = r.plugins.first().map(|p| p.name.clone());
        for l in r.limitations.iter_mut() {
            if let Some(name) = &library {
                l.library.clone_from(name);
            }
        }
        super::judge(
            r,
            &[crate::rule!("cai.values")],
            req.expectations,
            req.filter.narrows(),
        );
    })?;
    Ok(Ran {
        report,
        device,
        reach,
        interrupted,
    })
}

/// How long a case may run, and the memory a worker may use.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub case_timeout_ms: u64,
    pub max_memory_mb: u64,
}

/// Runs the session's cases in worker processes (one at a time; a worker
/// that crashes, hangs or floods costs its case, which is charged, and a
/// new worker goes on); each case is recorded as it ends. Returns the
/// signal that interrupted the run, if one did.
fn in_workers(
    suite: &SuitePlan,
    session: &Session,
    limits: Limits,
    events: &mut dyn Events,
) -> Result<Option<i32>, String> {
    crate::run::proc::catch_interrupts();
    let cfg = worker_config(suite, limits)?;
    let jobs: Vec<crate::run::Job> = session
        .todo
        .iter()
        .filter_map(|&index| {
            let id = suite.ids.get(index)?;
            // What a case lost with its worker is reported as: the runner
            // says how it ended (crash, timeout, ...).
            let record = crate::cai::suite::ended_without_verdict(
                id,
                &suite.replay_prefix,
                report::Verdict::Crash,
            )?;
            Some(crate::run::Job { index, record })
        })
        .collect();
    if jobs.is_empty() {
        return Ok(crate::run::proc::interrupted());
    }
    let pool = crate::run::Pool::new(&cfg, false).map_err(|e| e.0)?;
    let outcome = crate::run::run(
        &cfg,
        &pool,
        suite.ids.len(),
        jobs,
        |_| {},
        |c| session.record(c, events),
    )
    .map_err(|e| e.0)?;
    Ok(outcome.interrupted)
}

/// The workers' configuration for `suite`.
fn worker_config(suite: &SuitePlan, limits: Limits) -> Result<crate::run::Config, String> {
    use crate::run::worker::{Mode, WorkerArgs};
    let worker_args = WorkerArgs {
        socket: PathBuf::new(),
        mode: Mode::Cai,
        producer: None,
        consumer: None,
        sources: Default::default(),
        options: crate::roundtrip::Options {
            replay_prefix: suite.replay_prefix.clone(),
            ..Default::default()
        },
        limits: crate::run::proc::Limits::worker(limits.max_memory_mb),
        cpu_seconds: None,
        defer_consumer: None,
        plan: Some(serde_json::to_string(suite).map_err(|e| e.to_string())?),
        open: None,
        suites: None,
    };
    let cfg = crate::run::Config::for_workers(
        worker_args,
        1,
        limits.case_timeout_ms,
        limits.max_memory_mb,
    )
    .map_err(|e| format!("cannot find the arrowcert executable: {e}"))?;
    // No case measures allocations: no tracker preloaded.
    let cfg = crate::run::Config {
        tracker: false,
        ..cfg
    };
    Ok(cfg)
}

/// An adapter's bridge, opened in this process to ask what it serves, its
/// device and its name (the cases run in workers, which open it again).
struct Opened {
    /// The prepared bridge copy the workers load.
    path: PathBuf,
    bridge: Bridge,
    offers: Offers,
}

fn open(spec: &str, adapter: &str, limits: Limits) -> Result<Opened, String> {
    let path = crate::plugin::python::prepare(adapter)?;
    // Loaded in a worker first: an adapter that aborts or raises on import
    // ends the run with one line here, before this process opens it and
    // would die with it.
    let probe = SuitePlan {
        bridge: path.clone(),
        pair_consumer: None,
        ids: Vec::new(),
        replay_prefix: String::new(),
    };
    let cfg = worker_config(&probe, limits)?;
    let pool = crate::run::Pool::new(&cfg, false).map_err(|e| e.0)?;
    crate::run::run(&cfg, &pool, 0, Vec::new(), |_| {}, |_| {})
        .map_err(|e| format!("{spec}: {}", e.0))?;
    let bridge = Bridge::open(&path).map_err(|e| format!("{spec}: {e}"))?;
    let offers = Offers::of(&bridge).map_err(|e| format!("{spec}: {e}"))?;
    Ok(Opened {
        path,
        bridge,
        offers,
    })
}

fn identity(role: &str, spec: &str, adapter: &str, bridge: &Bridge) -> report::PluginIdentity {
    report::PluginIdentity {
        role: role.into(),
        path: spec.to_string(),
        name: bridge.name.clone(),
        sha256: std::fs::canonicalize(adapter)
            .ok()
            .and_then(|p| report::sha256_file(&p).ok())
            .unwrap_or_default(),
        abi_version: 0,
        entry_points: Vec::new(),
    }
}

/// The `data` of a pair's report.
pub const PAIR_DATA: &str = "cai built-in cases, one library's arrays into another's consumer";

/// A pair to run: one library's arrays into another's consumer
/// ([`crate::cai::pair`]).
pub struct PairRequest<'a> {
    /// Each library as named (`py:ADAPTER.py`) and its adapter file.
    pub producer: (&'a str, &'a str),
    pub consumer: (&'a str, &'a str),
    pub filter: &'a Filter,
    pub expectations: Option<&'a (PathBuf, Expectations)>,
    pub report: Option<PathBuf>,
    pub invocation: Vec<String>,
    pub limits: Limits,
}

/// The pair cases the filter selects: one per built-in case.
pub fn pair_plan(filter: &Filter) -> Vec<&'static CaseSpec> {
    run::CASES
        .iter()
        .filter(|c| filter.selects(&crate::cai::pair::pair_id(c)))
        .collect()
}

/// Runs a pair: both adapters opened here to ask what they serve (bad input when the
/// producer defines no cai_object, the consumer no cai_consume, or they
/// are on different devices), every planned case, the report judged on
/// its cases (a pair's cases are no rule's verdicts) and its expectations.
pub fn certify_pair(
    req: PairRequest,
    plan: Vec<&'static CaseSpec>,
    events: &mut dyn Events,
) -> Result<Ran, String> {
    let p = open(req.producer.0, req.producer.1, req.limits)?;
    let c = open(req.consumer.0, req.consumer.1, req.limits)?;
    if !p.offers.serves("cai_object") {
        return Err(format!(
            "{}: the adapter defines no cai_object(spec) (docs/CAI.md)",
            req.producer.0
        ));
    }
    if !c.offers.serves("cai_consume") {
        return Err(format!(
            "{}: the adapter defines no cai_consume(obj) (docs/CAI.md)",
            req.consumer.0
        ));
    }
    let device = p.offers.device.clone();
    if device != c.offers.device {
        return Err(format!(
            "a CAI pair needs both libraries on one device: {} is on {device}, {} on {}",
            req.producer.0, req.consumer.0, c.offers.device
        ));
    }
    let reach = Reach::of(&device);
    let prefix = format!(
        "arrowcert certify --cai --producer {} --consumer {}",
        req.producer.0, req.consumer.0
    );
    let ids: Vec<String> = plan.iter().map(|c| crate::cai::pair::pair_id(c)).collect();
    let session = Session::open(Opening {
        command: COMMAND,
        invocation: req.invocation.clone(),
        data: PAIR_DATA.into(),
        selected: (0..ids.len()).collect(),
        plan: ids.clone(),
        resume: None,
        files: Vec::new(),
        report: req.report.clone(),
        default_stem: None,
        devices: vec![device.clone()],
        seed: None,
        plugins: vec![
            identity("producer", req.producer.0, req.producer.1, &p.bridge),
            identity("consumer", req.consumer.0, req.consumer.1, &c.bridge),
        ],
    })?;
    let suite = SuitePlan {
        bridge: p.path.clone(),
        pair_consumer: Some(c.path.clone()),
        ids,
        replay_prefix: prefix,
    };
    drop((p, c));
    events.start(session.todo.len(), None);
    let interrupted = in_workers(&suite, &session, req.limits, events)?;
    events.cases_done();
    let report = session.finish(interrupted, |r| {
        // A pair's cases are the pair's, judged by their values: no rule
        // verdicts (each library's own certification has those).
        r.rules = Vec::new();
        super::judge(r, &[], req.expectations, req.filter.narrows());
    })?;
    Ok(Ran {
        report,
        device,
        reach,
        interrupted,
    })
}

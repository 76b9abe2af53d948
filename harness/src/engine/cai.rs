//! The CUDA Array Interface certification engine: a library's CAI cases
//! (through its adapter, in this process) run under a session
//! (checkpoints, interrupts), judged on the CAI rules. `arrowcert certify
//! --cai` (`cli::cai`) parses and prints.

#![forbid(unsafe_code)]

use std::path::PathBuf;

use super::session::{Events, Opening, Session};
use crate::cai::consumer::Arrays;
use crate::cai::run::{self, CaseSpec, Reach};
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
/// lacks what a side needs), every planned case run in this process, the
/// report judged on the CAI rules.
pub fn certify(req: Request, plan: Plan, events: &mut dyn Events) -> Result<Ran, String> {
    let Opened {
        bridge,
        served,
        device,
    } = open(req.spec, req.adapter)?;
    let served: Vec<&str> = served.iter().map(String::as_str).collect();
    if req.produces && !served.contains(&"cai_object") {
        return Err(format!(
            "{}: the adapter defines no cai_object(spec) (docs/CAI.md)",
            req.spec
        ));
    }
    if req.consumes && !served.contains(&"cai_consume") {
        return Err(format!(
            "{}: the adapter defines no cai_consume(obj) (docs/CAI.md)",
            req.spec
        ));
    }
    let reach = Reach::of(&device);
    // A consumer's arrays: the adapter's device makes them, else the
    // harness on CUDA, else none can be made here.
    let arrays = match (&reach, served.contains(&"cai_device_array")) {
        (_, true) => Arrays::Adapter,
        (Reach::Cuda, false) => Arrays::Cuda,
        (Reach::Unreachable(why), false) => Arrays::Unavailable(why.clone()),
        (Reach::Software, false) => Arrays::Unavailable(
            "the software device makes a consumer's arrays through the adapter's cai_device_array(spec), which it does not define (docs/CAI.md)".into(),
        ),
    };
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
        plan: ids,
        resume: None,
        files: Vec::new(),
        report: req.report.clone(),
        default_stem: None,
        devices: vec![device.clone()],
        seed: None,
        plugins: vec![identity("cai", req.spec, req.adapter, &bridge)],
    })?;
    events.start(session.todo.len(), None);
    crate::run::proc::catch_interrupts();
    let producer_cases = plan.producer.len();
    for &i in &session.todo {
        if crate::run::proc::interrupted().is_some() {
            break;
        }
        let c = match i.checked_sub(producer_cases) {
            None => run::run_case(&bridge, plan.producer[i], &reach, &prefix),
            Some(j) => {
                crate::cai::consumer::run_consumer_case(&bridge, plan.consumer[j], &arrays, &prefix)
            }
        };
        session.record(&c, events);
    }
    events.cases_done();
    let interrupted = crate::run::proc::interrupted();
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

/// An adapter's bridge, opened, with what it serves and its device.
struct Opened {
    bridge: Bridge,
    served: Vec<String>,
    device: String,
}

fn open(spec: &str, adapter: &str) -> Result<Opened, String> {
    let path = crate::plugin::python::prepare(adapter)?;
    let bridge = Bridge::open(&path).map_err(|e| format!("{spec}: {e}"))?;
    let (_, offers) = bridge
        .call("cai_offers", &[], "")
        .map_err(|e| format!("{spec}: {e}"))?;
    let served = offers["offers"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let device = offers["device"].as_str().unwrap_or("cuda").to_string();
    Ok(Opened {
        bridge,
        served,
        device,
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
}

/// The pair cases the filter selects: one per built-in case.
pub fn pair_plan(filter: &Filter) -> Vec<&'static CaseSpec> {
    run::CASES
        .iter()
        .filter(|c| filter.selects(&crate::cai::pair::pair_id(c)))
        .collect()
}

/// Runs a pair: both adapters opened in this process (bad input when the
/// producer defines no cai_object, the consumer no cai_consume, or they
/// are on different devices), every planned case, the report judged on
/// its cases (a pair's cases are no rule's verdicts) and its expectations.
pub fn certify_pair(
    req: PairRequest,
    plan: Vec<&'static CaseSpec>,
    events: &mut dyn Events,
) -> Result<Ran, String> {
    let p = open(req.producer.0, req.producer.1)?;
    let c = open(req.consumer.0, req.consumer.1)?;
    if !p.served.iter().any(|s| s == "cai_object") {
        return Err(format!(
            "{}: the adapter defines no cai_object(spec) (docs/CAI.md)",
            req.producer.0
        ));
    }
    if !c.served.iter().any(|s| s == "cai_consume") {
        return Err(format!(
            "{}: the adapter defines no cai_consume(obj) (docs/CAI.md)",
            req.consumer.0
        ));
    }
    if p.device != c.device {
        return Err(format!(
            "a CAI pair needs both libraries on one device: {} is on {}, {} on {}",
            req.producer.0, p.device, req.consumer.0, c.device
        ));
    }
    let reach = Reach::of(&p.device);
    let skip = match &reach {
        Reach::Unreachable(why) => Some(why.clone()),
        _ => None,
    };
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
        plan: ids,
        resume: None,
        files: Vec::new(),
        report: req.report.clone(),
        default_stem: None,
        devices: vec![p.device.clone()],
        seed: None,
        plugins: vec![
            identity("producer", req.producer.0, req.producer.1, &p.bridge),
            identity("consumer", req.consumer.0, req.consumer.1, &c.bridge),
        ],
    })?;
    events.start(session.todo.len(), None);
    crate::run::proc::catch_interrupts();
    let pair = crate::cai::pair::Pair {
        producer: &p.bridge,
        consumer: &c.bridge,
    };
    for &i in &session.todo {
        if crate::run::proc::interrupted().is_some() {
            break;
        }
        let case = crate::cai::pair::run_pair_case(&pair, plan[i], skip.as_deref(), &prefix);
        session.record(&case, events);
    }
    events.cases_done();
    let interrupted = crate::run::proc::interrupted();
    let report = session.finish(interrupted, |r| {
        // A pair's cases are the pair's, judged by their values: no rule
        // verdicts (each library's own certification has those).
        r.rules = Vec::new();
        super::judge(r, &[], req.expectations, req.filter.narrows());
    })?;
    Ok(Ran {
        report,
        device: p.device,
        reach,
        interrupted,
    })
}

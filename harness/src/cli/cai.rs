//! `arrowcert certify --cai`: CUDA Array Interface certification of a
//! Python producer and/or consumer through its adapter file (docs/CAI.md).

use std::path::PathBuf;

use super::BadInput;
use crate::cai::run::{self, Reach};
use crate::dlpack::bridge::Bridge;
use crate::report::{self, Report};
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
}

/// `arrowcert certify --cai ...`.
pub fn certify(args: Args) -> Result<i32, BadInput> {
    let spec = match (&args.producer, &args.consumer) {
        (Some(p), Some(c)) if p != c => {
            return Err(BadInput(format!(
                "--cai certifies one library: --producer {p} and --consumer {c} differ (run them one at a time)"
            )))
        }
        (Some(p), _) => p.clone(),
        (None, Some(c)) => c.clone(),
        (None, None) => {
            return Err(BadInput(
                "--cai needs --producer py:ADAPTER.py and/or --consumer py:ADAPTER.py".into(),
            ))
        }
    };
    let Some(adapter) = spec.strip_prefix("py:") else {
        return Err(BadInput(format!(
            "--cai takes py: adapters (docs/CAI.md); {spec} is not one"
        )));
    };
    let producer = spec.clone();
    let (produces, consumes) = (args.producer.is_some(), args.consumer.is_some());
    let planned: Vec<&run::CaseSpec> = run::CASES
        .iter()
        .filter(|c| produces && args.filter.selects(&c.id()))
        .collect();
    let consumer_planned: Vec<&run::CaseSpec> = run::CASES
        .iter()
        .filter(|c| {
            consumes && c.pending && args.filter.selects(&crate::cai::consumer::consumer_id(c))
        })
        .collect();
    if args.list {
        for c in &planned {
            println!("{}", c.id());
        }
        for c in &consumer_planned {
            println!("{}", crate::cai::consumer::consumer_id(c));
        }
        return Ok(0);
    }
    let path = crate::plugin::python::prepare(adapter).map_err(BadInput)?;
    let bridge = Bridge::open(&path).map_err(|e| BadInput(format!("{producer}: {e}")))?;
    let (_, offers) = bridge
        .call("cai_offers", &[], "")
        .map_err(|e| BadInput(format!("{producer}: {e}")))?;
    let served: Vec<&str> = offers["offers"]
        .as_array()
        .map(|a| a.iter().filter_map(|s| s.as_str()).collect())
        .unwrap_or_default();
    if produces && !served.contains(&"cai_object") {
        return Err(BadInput(format!(
            "{producer}: the adapter defines no cai_object(spec) (docs/CAI.md)"
        )));
    }
    if consumes && !served.contains(&"cai_consume") {
        return Err(BadInput(format!(
            "{producer}: the adapter defines no cai_consume(obj) (docs/CAI.md)"
        )));
    }
    let device_arrays = (!served.contains(&"cai_device_array")).then_some(
        "the harness makes a consumer's arrays on the software device only (the adapter's cai_device_array(spec)); CUDA arrays with delayed work are not built yet (SKIPPED: needs a GPU, issue 42 item 5)",
    );
    let device = offers["device"].as_str().unwrap_or("cuda").to_string();
    let reach = Reach::of(&device);
    let mut prefix = "arrowcert certify --cai".to_string();
    if produces {
        prefix.push_str(&format!(" --producer {producer}"));
    }
    if consumes {
        prefix.push_str(&format!(" --consumer {producer}"));
    }
    let started = std::time::SystemTime::now();
    let clock = std::time::Instant::now();
    let cases: Vec<report::Case> =
        planned
            .iter()
            .map(|c| run::run_case(&bridge, c, &reach, &prefix))
            .chain(consumer_planned.iter().map(|c| {
                crate::cai::consumer::run_consumer_case(&bridge, c, device_arrays, &prefix)
            }))
            .collect();
    let mut r = Report::begun(
        "certify --cai",
        std::env::args().collect(),
        started,
        "cai built-in cases".into(),
    );
    r.plugins = vec![report::PluginIdentity {
        role: "cai".into(),
        path: producer.clone(),
        name: bridge.name.clone(),
        sha256: std::fs::canonicalize(adapter)
            .ok()
            .and_then(|p| report::sha256_file(&p).ok())
            .unwrap_or_default(),
        abi_version: 0,
        entry_points: Vec::new(),
    }];
    r.devices = vec![device.clone()];
    r.planned = (planned.len() + consumer_planned.len()) as u64;
    r.complete = cases.len() as u64 == r.planned;
    r.duration_ms = clock.elapsed().as_millis() as u64;
    r.finished_at = report::time::rfc3339(std::time::SystemTime::now());
    r.summary = report::Summary::of(&cases);
    r.rules = crate::certify::summary::verdicts_of(
        &cases,
        crate::rules::cai::CAI_RULES
            .iter()
            .filter(|r| match r.side {
                crate::rules::Side::Producer => produces,
                crate::rules::Side::Consumer => consumes,
                crate::rules::Side::Both => true,
            }),
    );
    r.cases = cases;
    crate::engine::judge(
        &mut r,
        &[crate::rule!("cai.values")],
        args.expectations.as_ref(),
        args.filter.narrows(),
    );
    let judgement = r.outcome.clone().expect("judged");
    print!(
        "{}",
        crate::certify::summary::render(&r.rules, &r.cases, &r.shrunk)
    );
    if let Reach::Unreachable(why) = &reach {
        println!("device {device}: {why}");
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
    super::certify::print_unused_expectations(&r);
    if let Some(path) = &args.report {
        report::write(&r, path)
            .map_err(|e| BadInput(format!("{}: cannot write the report: {e}", path.display())))?;
        println!("report: {}", path.display());
    }
    Ok(judgement.exit_code())
}

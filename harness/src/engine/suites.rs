//! The suites of the modes whose cases run the plugins a worker loaded
//! (certify, roundtrip), made in the worker for each plan
//! ([`run::worker::SuiteMaker`]): `run` knows cases only through
//! [`Suite`]; what a case is lives here and below.

#![forbid(unsafe_code)]

use crate::certify;
use crate::roundtrip::{self, Options};
use crate::run::{
    self,
    suite::{Planned, Suite},
    worker::{Loaded, Mode},
};
use crate::scenario::Scenario;

/// The suite of a mode that lives above `run` (DLPack, CAI), opened in the
/// worker from its `--plan` JSON ([`run::worker::Opener`]).
pub fn open_above(mode: Mode, plan: &str) -> Result<Box<dyn Suite>, String> {
    match mode {
        Mode::Dlpack => crate::dlpack::suite::open(plan),
        Mode::Cai => crate::cai::suite::open(plan),
        _ => Err(format!("a {} worker has no plan to open", mode.name())),
    }
}

/// The suite a worker runs over `scenarios`: its planned case IDs and how
/// to run one (each guarded: a panic of arrowcert's code is that case's
/// harness error). `Err` is the message of a fatal error (a mode without
/// the plugins it needs; DLPack's suite is opened from its plan instead).
pub fn make<'a>(
    mode: Mode,
    scenarios: &'a [Scenario],
    seed: u64,
    loaded: Loaded<'a>,
    options: &'a Options,
) -> Result<Box<dyn Suite + 'a>, String> {
    Ok(match (mode, loaded.consumer_side) {
        (Mode::Dlpack | Mode::Cai, _) => {
            return Err(format!("a {} worker needs --plan", mode.name()))
        }
        (Mode::Roundtrip, Some(consumer)) if loaded.producer.is_some() => {
            let producer = loaded.producer.expect("checked");
            let plan = roundtrip::plan(scenarios);
            let ids = plan.iter().map(|s| s.id.clone()).collect();
            Box::new(Planned {
                ids,
                run: move |i: usize, id: &str| {
                    let spec = plan.get(i).filter(|s| s.id == id)?;
                    let scenario = &scenarios[spec.scenario];
                    Some(run::panic::guarded(
                        id,
                        || roundtrip::record(scenario, spec, options),
                        || roundtrip::run_case(producer, consumer, scenario, spec, options),
                    ))
                },
            })
        }
        (Mode::Roundtrip, _) => {
            return Err("a roundtrip worker needs --producer and --consumer".to_string())
        }
        (Mode::Certify, _) => {
            let sides = certify::Sides {
                producer: loaded.producer.is_some(),
                consumer: loaded.consumer.is_some(),
            };
            let plan = certify::plan(scenarios, sides, seed);
            let ids = plan.iter().map(|s| s.id.clone()).collect();
            let plugins = certify::Plugins {
                producer: loaded.producer,
                consumer: loaded.consumer,
            };
            let certify_opts = certify::Options {
                replay_prefix: options.replay_prefix.clone(),
                all_leaks: options.all_leaks,
                ..Default::default()
            };
            Box::new(Planned {
                ids,
                run: move |i: usize, id: &str| {
                    // An async case outside the plan (a replay of a shrunk
                    // schedule) is spelled out by its ID.
                    let extra;
                    let spec = match plan.get(i).filter(|s| s.id == id) {
                        Some(s) => s,
                        None => {
                            extra = certify::spec_for(&plan, scenarios, id)?;
                            &extra
                        }
                    };
                    let scenario = &scenarios[spec.scenario];
                    Some(run::panic::guarded(
                        id,
                        || certify::record(scenario, spec, &certify_opts),
                        || certify::run_case(plugins, scenario, spec, &certify_opts),
                    ))
                },
            })
        }
    })
}

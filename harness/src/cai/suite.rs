//! The CAI suite a worker runs ([`crate::run::suite::Suite`]): the
//! adapter's bridge (and, for a pair, the consumer's) loaded once in the
//! worker, and each planned case run there, so that an adapter that
//! crashes, hangs or floods is contained as every other library is (the
//! orchestrator's runner charges the case and starts a new worker).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::consumer::{self, Arrays};
use super::pair::{self, Pair};
use super::run::{self, CaseSpec, Reach};
use crate::dlpack::bridge::Bridge;
use crate::report::{Case, Verdict};
use crate::run::suite::Suite;

/// What a CAI worker is given (`worker --mode cai --plan JSON`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    /// The prepared bridge copy of the adapter (a pair's producer).
    pub bridge: PathBuf,
    /// A pair's consumer: its prepared bridge copy.
    pub pair_consumer: Option<PathBuf>,
    /// The planned case IDs, in plan order.
    pub ids: Vec<String>,
    /// The replay command's prefix.
    pub replay_prefix: String,
}

/// What an adapter serves (`cai_offers`) and the device it names.
pub struct Offers {
    pub served: Vec<String>,
    pub device: String,
}

impl Offers {
    pub fn of(bridge: &Bridge) -> Result<Offers, String> {
        let (_, offers) = bridge.call("cai_offers", &[], "")?;
        let served = offers["offers"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        let device = offers["device"].as_str().unwrap_or("cuda").to_string();
        Ok(Offers { served, device })
    }

    pub fn serves(&self, what: &str) -> bool {
        self.served.iter().any(|s| s == what)
    }

    /// Where a consumer's arrays come from: the adapter's device makes
    /// them, else the harness on CUDA, else none can be made here.
    pub fn arrays(&self, reach: &Reach) -> Arrays {
        match (reach, self.serves("cai_device_array")) {
            (_, true) => Arrays::Adapter,
            (Reach::Cuda, false) => Arrays::Cuda,
            (Reach::Unreachable(why), false) => Arrays::Unavailable(why.clone()),
            (Reach::Software, false) => Arrays::Unavailable(
                "the software device makes a consumer's arrays through the adapter's cai_device_array(spec), which it does not define (docs/CAI.md)".into(),
            ),
        }
    }
}

/// A planned case: which side, over which built-in case.
#[derive(Debug, Clone, Copy)]
enum Planned {
    Producer(&'static CaseSpec),
    Consumer(&'static CaseSpec),
    Pair(&'static CaseSpec),
}

impl Planned {
    fn of(id: &str) -> Option<Planned> {
        let find = |name: &str| run::CASES.iter().find(|c| c.name == name);
        if let Some(n) = id.strip_prefix("cai/pair/") {
            return find(n).map(Planned::Pair);
        }
        if let Some(n) = id.strip_prefix("cai/consumer/") {
            return find(n).map(Planned::Consumer);
        }
        id.strip_prefix("cai/producer/")
            .and_then(find)
            .map(Planned::Producer)
    }

    fn spec(self) -> &'static CaseSpec {
        match self {
            Planned::Producer(s) | Planned::Consumer(s) | Planned::Pair(s) => s,
        }
    }
}

/// The record of case `id` that ended without a verdict of its own (its
/// worker died or hung, or arrowcert's code panicked): `None` for an ID
/// that names no CAI case.
pub fn ended_without_verdict(id: &str, replay_prefix: &str, verdict: Verdict) -> Option<Case> {
    let spec = Planned::of(id)?.spec();
    let mut c = run::finished(
        spec,
        std::time::Instant::now(),
        replay_prefix,
        verdict,
        None,
        Default::default(),
    );
    c.replay = c.replay.replace(&spec.id(), id);
    c.id = id.to_string();
    Some(c)
}

/// A worker's CAI suite from its `--plan` JSON
/// ([`crate::run::worker::Opener`]).
pub fn open(plan: &str) -> Result<Box<dyn Suite>, String> {
    let plan: Plan =
        serde_json::from_str(plan).map_err(|e| format!("a cai worker's --plan: {e}"))?;
    Ok(Box::new(CaiSuite::open(&plan)?))
}

struct CaiSuite {
    bridge: Bridge,
    consumer: Option<Bridge>,
    reach: Reach,
    arrays: Arrays,
    ids: Vec<String>,
    replay_prefix: String,
}

impl CaiSuite {
    fn open(plan: &Plan) -> Result<CaiSuite, String> {
        let bridge = Bridge::open(&plan.bridge)?;
        let offers = Offers::of(&bridge)?;
        let consumer = plan
            .pair_consumer
            .as_deref()
            .map(Bridge::open)
            .transpose()?;
        let reach = Reach::of(&offers.device);
        let arrays = offers.arrays(&reach);
        Ok(CaiSuite {
            bridge,
            consumer,
            reach,
            arrays,
            ids: plan.ids.clone(),
            replay_prefix: plan.replay_prefix.clone(),
        })
    }

    fn run_planned(&self, planned: Planned) -> Case {
        let prefix = &self.replay_prefix;
        match planned {
            Planned::Producer(spec) => run::run_case(&self.bridge, spec, &self.reach, prefix),
            Planned::Consumer(spec) => {
                consumer::run_consumer_case(&self.bridge, spec, &self.arrays, prefix)
            }
            Planned::Pair(spec) => {
                let skip = match &self.reach {
                    Reach::Unreachable(why) => Some(why.as_str()),
                    _ => None,
                };
                match &self.consumer {
                    Some(c) => pair::run_pair_case(
                        &Pair {
                            producer: &self.bridge,
                            consumer: c,
                        },
                        spec,
                        skip,
                        prefix,
                    ),
                    None => {
                        let mut c = ended_without_verdict(
                            &pair::pair_id(spec),
                            prefix,
                            Verdict::HarnessError,
                        )
                        .expect("a pair case");
                        c.message = Some("a pair case needs a consumer library".into());
                        c
                    }
                }
            }
        }
    }
}

impl Suite for CaiSuite {
    fn ids(&self) -> Vec<String> {
        self.ids.clone()
    }

    fn run(&self, index: usize, id: &str) -> Option<Case> {
        if self.ids.get(index).map(String::as_str) != Some(id) {
            return None;
        }
        let planned = Planned::of(id)?;
        // arrowcert's own failure is a harness error, never the library's
        // crash.
        Some(crate::run::panic::guarded(
            id,
            || {
                ended_without_verdict(id, &self.replay_prefix, Verdict::HarnessError)
                    .expect("a planned id")
            },
            || self.run_planned(planned),
        ))
    }

    /// Objects a library kept may still point into the bridge: the worker
    /// leaves without unloading it (no Py_Finalize).
    fn quick_exit(&self) -> bool {
        true
    }
}

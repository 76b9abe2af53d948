//! The DLPack suite a worker runs ([`crate::run::suite::Suite`]): the
//! adapter's bridge (and, for pairs, the consumer's) loaded once, the plan
//! made again from what the orchestrator planned ([`super::run::Plan`]),
//! and each case run through the bridge when the adapter serves its path.

use crate::report::{Case, Verdict};
use crate::run::suite::Suite;

use super::bridge::Bridge;
use super::engine::{self, DlCase, Kind};
use super::run::{replay_of, Plan};

/// A worker's DLPack suite from its `--plan` JSON
/// ([`crate::run::worker::Opener`]).
pub fn open(plan: &str) -> Result<Box<dyn Suite>, String> {
    let plan: Plan =
        serde_json::from_str(plan).map_err(|e| format!("a dlpack worker's --plan: {e}"))?;
    Ok(Box::new(DlSuite::open(&plan)?))
}

/// A worker's DLPack run.
pub struct DlSuite {
    bridge: Bridge,
    consumer: Option<Bridge>,
    plan: Vec<DlCase>,
    replay_prefix: String,
}

impl DlSuite {
    /// Loads the bridges and plans; `Err` with one line when a library
    /// cannot be loaded.
    pub fn open(plan: &Plan) -> Result<DlSuite, String> {
        let bridge = Bridge::open(&plan.bridge)?;
        let consumer = plan
            .pair_consumer
            .as_deref()
            .map(Bridge::open)
            .transpose()?;
        Ok(DlSuite {
            bridge,
            consumer,
            plan: plan.cases(),
            replay_prefix: plan.replay_prefix.clone(),
        })
    }

    fn offers(b: &Bridge, what: &str) -> bool {
        b.offers.iter().any(|o| o == what)
    }

    /// Why the adapter cannot run `case`, if it cannot: the entry point
    /// its path needs is not exported.
    fn not_served(&self, case: &DlCase) -> Option<&'static str> {
        let served = match case.kind {
            Kind::Pair { .. } => {
                Self::offers(&self.bridge, "dlpack_load")
                    && self
                        .consumer
                        .as_ref()
                        .is_some_and(|c| Self::offers(c, "dlpack_read"))
            }
            ref k => Self::offers(&self.bridge, k.needs()),
        };
        if served {
            return None;
        }
        Some(match case.kind {
            Kind::Pair { .. } => "dlpack_load or dlpack_read is not exported by the plugin (a pair needs both)",
            Kind::Producer { .. } | Kind::Frees { .. } | Kind::DeleterThread { .. } => "dlpack_load is not exported by the plugin (the adapter does not produce DLPack)",
            Kind::Consumer { .. } | Kind::OnDevice { .. } => "dlpack_read is not exported by the plugin (the adapter does not consume DLPack)",
            Kind::ToArrow { .. } => "dlpack_to_arrow is not exported by the plugin (the adapter does not turn DLPack into Arrow)",
            Kind::FromArrow { .. } => "arrow_to_dlpack is not exported by the plugin (the adapter does not turn Arrow into DLPack)",
        })
    }
}

impl Suite for DlSuite {
    fn ids(&self) -> Vec<String> {
        self.plan.iter().map(|c| c.id.clone()).collect()
    }

    fn run(&self, index: usize, id: &str) -> Option<Case> {
        let case = self.plan.get(index).filter(|c| c.id == id)?;
        let replay = replay_of(&self.replay_prefix, &case.id);
        if let Some(why) = self.not_served(case) {
            return Some(engine::ended_without_verdict(
                case,
                &replay,
                Verdict::Skip,
                why.to_string(),
            ));
        }
        // arrowcert's own failure is a harness error, never the library's
        // crash.
        Some(crate::run::panic::guarded(
            id,
            || engine::ended_without_verdict(case, &replay, Verdict::HarnessError, String::new()),
            || engine::run_case(&self.bridge, self.consumer.as_ref(), case, &replay),
        ))
    }

    /// Capsules a library kept may still point into the bridge: the worker
    /// leaves without unloading it or running the libraries' static
    /// destructors (no Py_Finalize).
    fn quick_exit(&self) -> bool {
        true
    }
}

//! Consumer certification: the harness plays an instrumented producer
//! ([`crate::export`]) and judges, rule by rule, what a consumer does with
//! what it is handed.
//!
//! Per case the harness exports a scenario (a batch as an array or device
//! array, or every batch as a stream or device stream) plainly, in the
//! varied encoding, or with one of its variations alone
//! ([`variation_plan`]), calls the consumer, and then judges:
//! - the release calls the ledger recorded (`consumer.release.*`);
//! - the structures it handed over: each must be released or marked
//!   released by a move (`consumer.move.marks-source`);
//! - writes into exported buffers (`consumer.data.immutable`);
//! - what the consumer read, decoded from the IPC it wrote back, against
//!   the data (`consumer.read.values`, names and metadata apart in
//!   `consumer.read.metadata`). A case that reads wrong is run once more
//!   with release poisoning off: if it then reads right, the consumer read
//!   released memory (`consumer.read.after-release`).
//!
//! Error-path cases hand over streams that fail in `get_schema` or part way
//! through `get_next`; released-input cases hand over a released array or
//! schema.

#![forbid(unsafe_code)]

mod judge;
mod plan;
mod refusal;
mod stream_error;

pub(in crate::certify) use judge::*;
pub use plan::*;
pub(in crate::certify) use refusal::*;
use stream_error::*;

use std::ffi::c_int;

use arrow_array::RecordBatch;
use arrow_schema::Schema;

use super::{call_ended, CaseSpec, Ended, Observations, Path};
use crate::abi::ops::Owned;
use crate::export::{
    self, encode, Encoding, FailAt, Failure, Findings, Ledger, StreamPlan, Variation,
};
use crate::plugin::{errno_name, CallError, Plugin, Refusal};
use crate::scenario::Scenario;
use crate::sdk::ipc;

/// How a consumer case encodes what it hands over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Enc {
    Plain,
    Varied,
    /// One variation of the varied encoding alone ([`Encoding::Only`]).
    Only(Variation),
}

/// Where an error-path stream fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorAt {
    /// `get_schema` fails.
    Schema,
    /// `get_next` fails part way through (after half the batches).
    Middle,
}

/// The consumer case kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Array(Enc),
    DeviceArray(Enc),
    Stream(Enc),
    DeviceStream(Enc),
    /// A stream (device stream if `device`) that fails with `code`.
    StreamError {
        device: bool,
        at: ErrorAt,
        code: c_int,
    },
    /// An already released ArrowArray (`schema`: ArrowSchema).
    Released {
        schema: bool,
    },
}

/// The error-path cases of each scenario.
const ERRORS: [(bool, ErrorAt, c_int); 3] = [
    (false, ErrorAt::Schema, libc::EINVAL),
    (false, ErrorAt::Middle, libc::EIO),
    (true, ErrorAt::Middle, libc::ENOMEM),
];

impl Kind {
    /// The two words after `consumer/` in case IDs.
    pub fn words(self) -> String {
        let enc = |e: Enc| match e {
            Enc::Plain => "plain".to_string(),
            Enc::Varied => "varied".to_string(),
            Enc::Only(v) => format!("varied:{}", v.name()),
        };
        match self {
            Kind::Array(e) => format!("array/{}", enc(e)),
            Kind::DeviceArray(e) => format!("device_array/{}", enc(e)),
            Kind::Stream(e) => format!("stream/{}", enc(e)),
            Kind::DeviceStream(e) => format!("device_stream/{}", enc(e)),
            Kind::StreamError { device, at, code } => format!(
                "{}/{}-{}",
                if device {
                    "device_stream_error"
                } else {
                    "stream_error"
                },
                match at {
                    ErrorAt::Schema => "schema",
                    ErrorAt::Middle => "next",
                },
                errno_name(code)
            ),
            Kind::Released { schema } => {
                format!("released/{}", if schema { "schema" } else { "array" })
            }
        }
    }

    /// The report's `path` of the case.
    pub fn path_name(self) -> &'static str {
        match self {
            Kind::Array(_) | Kind::Released { .. } => "consume_array",
            Kind::DeviceArray(_) => "consume_device_array",
            Kind::Stream(_) | Kind::StreamError { device: false, .. } => "consume_stream",
            Kind::DeviceStream(_) | Kind::StreamError { device: true, .. } => {
                "consume_device_stream"
            }
        }
    }

    fn per_batch(self) -> bool {
        matches!(self, Kind::Array(_) | Kind::DeviceArray(_))
    }
}

/// What one call of the consumer gave.
struct Attempt {
    result: Result<Vec<u8>, CallError>,
    findings: Findings,
    /// Structures handed over that were still live after the call:
    /// (what, root index).
    live: Vec<(String, usize)>,
    /// The consumer's own view of what it read
    /// (`arrowcert_consume_values`), when it read and has one.
    values: Option<String>,
}

/// The rules every consumer case with data exercises.
const HANDOVER_RULES: &[&str] = &[
    crate::rule!("consumer.release.once"),
    crate::rule!("consumer.release.not-released"),
    crate::rule!("consumer.release.no-children"),
    crate::rule!("consumer.move.marks-source"),
    crate::rule!("consumer.data.immutable"),
];

const STREAM_RULES: &[&str] = &[
    crate::rule!("consumer.stream.release"),
    crate::rule!("consumer.stream.serial"),
    crate::rule!("consumer.stream.last-error"),
    crate::rule!("consumer.stream.last-error-copy"),
];

/// Runs one consumer case.
pub fn run(
    consumer: &Plugin,
    scenario: &Scenario,
    spec: &CaseSpec,
    kind: Kind,
    obs: &mut Observations,
) -> Ended {
    match kind {
        Kind::Released { schema } => released(consumer, scenario, schema, obs),
        Kind::StreamError { device, at, code } => {
            stream_error(consumer, scenario, spec, device, at, code, obs)
        }
        _ => data_case(consumer, scenario, spec, kind, obs),
    }
}

/// How the data is handed over: the first handover, and the differential
/// reruns that tell two causes of a wrong read apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Handover {
    /// Released memory poisoned, device writes still pending (the first
    /// handover of every case).
    First,
    /// Released memory left as it was: a consumer that reads right then
    /// read after release.
    Unpoisoned,
    /// Device writes landed and sync_event completed before the handover:
    /// a consumer that reads right then read before waiting.
    Settled,
}

/// Hands the case's data to the consumer once.
fn attempt(
    consumer: &Plugin,
    scenario: &Scenario,
    spec: &CaseSpec,
    kind: Kind,
    enc: Encoding,
    how: Handover,
    fail: Option<Failure>,
) -> Result<Attempt, String> {
    let mut ledger = Ledger::on_device(how != Handover::Unpoisoned, spec.device)?;
    if how == Handover::Settled {
        ledger = ledger.settled_before_handover();
    }
    let mut live = Vec::new();
    let result = match kind {
        Kind::Array(_) | Kind::DeviceArray(_) => {
            let batch = &scenario.batches[spec.batch.unwrap_or(0)];
            let snode = encode::schema(&scenario.schema, enc)?;
            let anode = encode::batch(batch, enc, 0)?;
            let mut s = ledger.schema(&snode, "schema");
            let r = if matches!(kind, Kind::Array(_)) {
                let mut a = ledger.array(&anode, "array");
                let r = consumer.consume_array(s.get(), a.get(), batch);
                take_back(&r, a.get());
                if !a.get().is_released() {
                    live.push(("array".to_string(), a.root));
                }
                r
            } else {
                let mut a = ledger.device_array(&anode, "device array");
                let r = consumer.consume_device_array(s.get(), a.get());
                ledger.note_sync_at_return();
                take_back(&r, a.get());
                if !a.get().is_released() {
                    live.push(("device array".to_string(), a.root));
                }
                r
            };
            take_back(&r, s.get());
            if !s.get().is_released() {
                live.push(("schema".to_string(), s.root));
            }
            r
        }
        _ => {
            let plan = stream_plan(scenario, enc, fail)?;
            if matches!(
                kind,
                Kind::DeviceStream(_) | Kind::StreamError { device: true, .. }
            ) {
                let mut st = ledger.device_stream(plan);
                let r = consumer.consume_device_stream(st.get());
                ledger.note_sync_at_return();
                take_back(&r, st.get());
                if !st.get().is_released() {
                    live.push(("device stream".to_string(), st.root));
                }
                r
            } else {
                let mut st = ledger.stream(plan);
                let r = consumer.consume_stream(st.get());
                take_back(&r, st.get());
                if !st.get().is_released() {
                    live.push(("stream".to_string(), st.root));
                }
                r
            }
        }
    };
    // Asked at once: the view is of this call's read.
    let values = result
        .as_ref()
        .ok()
        .and_then(|_| consumer.consumed_values());
    Ok(Attempt {
        result,
        findings: ledger.finish(),
        live,
        values,
    })
}

/// A consumer that does not export the entry point never took what was
/// meant for it: the harness releases it itself (not the consumer's doing,
/// and the case is skipped before anything is judged).
fn take_back<T: Owned, R>(r: &Result<R, CallError>, handed: &mut T) {
    if matches!(r, Err(CallError::Missing(_))) && !handed.is_released() {
        handed.release();
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    /// The default plan is a covering array of strength 2 over (scenario,
    /// variation, data path): every (scenario, path) pair has a plain case,
    /// every (variation, relevant scenario) pair and every (variation, path)
    /// pair a single-variation case. The full product (`--all-variations`)
    /// has every triple.
    #[test]
    fn the_default_plan_covers_every_pair_and_the_flag_every_triple() {
        let seed = 20261122;
        let mut scenarios = crate::scenario::builtin();
        scenarios.extend(crate::generate::scenarios(seed, 30).unwrap());
        scenarios.extend(crate::generate::type_scenarios(seed).unwrap());
        let ids: BTreeSet<String> = plan(&scenarios).into_iter().map(|c| c.id).collect();
        let paths = ["array", "device_array", "stream", "device_stream"];
        let has = |p: &str, enc: &str, s: &Scenario| {
            let base = format!("consumer/{p}/{enc}/{}", s.name);
            ids.contains(&base) || ids.contains(&format!("{base}/batch:0"))
        };
        let mut triples = 0;
        for s in &scenarios {
            for p in paths {
                if (p == "array" || p == "device_array") && s.batches.is_empty() {
                    continue;
                }
                assert!(has(p, "plain", s), "{p} {}", s.name);
            }
            for v in Variation::ALL {
                let enc = format!("varied:{}", v.name());
                if relevant(v, s) {
                    assert!(paths.iter().any(|p| has(p, &enc, s)), "{enc} {}", s.name);
                }
            }
        }
        for v in Variation::ALL {
            for p in paths {
                let prefix = format!("consumer/{p}/varied:{}/", v.name());
                assert!(ids.iter().any(|id| id.starts_with(&prefix)), "{prefix}");
            }
        }
        let full: BTreeSet<String> = variation_plan(&scenarios, true)
            .into_iter()
            .map(|c| c.id)
            .collect();
        for s in &scenarios {
            for v in Variation::ALL {
                for p in paths {
                    let base = format!("consumer/{p}/varied:{}/{}", v.name(), s.name);
                    let per_batch = p == "array" || p == "device_array";
                    if per_batch && s.batches.is_empty() {
                        continue;
                    }
                    let id = if per_batch {
                        format!("{base}/batch:0")
                    } else {
                        base
                    };
                    assert!(full.contains(&id), "{id}");
                    triples += 1;
                }
            }
        }
        // The covering plan is far smaller than the product it covers.
        let default = ids.iter().filter(|id| id.contains("/varied:")).count();
        assert!(default * 3 < full.len(), "{default} of {}", full.len());
        assert!(triples > 0);
    }
}

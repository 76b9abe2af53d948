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

/// Every consumer case for these scenarios, in a stable order. IDs are
/// `consumer/<kind>/<encoding or error>/<scenario>[/batch:<i>]`.
pub fn plan(scenarios: &[Scenario]) -> Vec<CaseSpec> {
    let mut out = Vec::new();
    let mut kinds = Vec::new();
    for e in [Enc::Plain, Enc::Varied] {
        kinds.extend([
            Kind::Array(e),
            Kind::DeviceArray(e),
            Kind::Stream(e),
            Kind::DeviceStream(e),
        ]);
    }
    kinds.extend(
        ERRORS
            .iter()
            .map(|&(device, at, code)| Kind::StreamError { device, at, code }),
    );
    for (si, s) in scenarios.iter().enumerate() {
        for &kind in &kinds {
            let base = format!("consumer/{}/{}", kind.words(), s.name);
            if kind.per_batch() {
                for bi in 0..s.batches.len() {
                    out.push(CaseSpec {
                        path: Path::Consumer(kind),
                        scenario: si,
                        batch: Some(bi),
                        slice: None,
                        id: format!("{base}/batch:{bi}"),
                        device: crate::device::Kind::Cpu,
                    });
                }
            } else {
                out.push(CaseSpec {
                    path: Path::Consumer(kind),
                    scenario: si,
                    batch: None,
                    slice: None,
                    id: base,
                    device: crate::device::Kind::Cpu,
                });
            }
        }
    }
    out.extend(variation_plan(scenarios, false));
    // Released inputs do not depend on the data: once per run, with the
    // first scenario's schema.
    if let Some(s) = scenarios.first() {
        for schema in [false, true] {
            let kind = Kind::Released { schema };
            out.push(CaseSpec {
                path: Path::Consumer(kind),
                scenario: 0,
                batch: None,
                slice: None,
                id: format!("consumer/{}/{}", kind.words(), s.name),
                device: crate::device::Kind::Cpu,
            });
        }
    }
    out
}

/// The device-array and device-stream consumer cases on `device` (not the
/// CPU): `consumer/device:<kind>/<kind words>/<scenario>[/batch:<i>]`.
pub fn device_plan(scenarios: &[Scenario], device: crate::device::Kind) -> Vec<CaseSpec> {
    let prefix = super::id_prefix("consumer", device);
    let mut out = Vec::new();
    for (si, s) in scenarios.iter().enumerate() {
        for e in [Enc::Plain, Enc::Varied] {
            for kind in [Kind::DeviceArray(e), Kind::DeviceStream(e)] {
                let base = format!("{prefix}{}/{}", kind.words(), s.name);
                let batches: Vec<Option<usize>> = if kind.per_batch() {
                    (0..s.batches.len()).map(Some).collect()
                } else {
                    vec![None]
                };
                for batch in batches {
                    out.push(CaseSpec {
                        path: Path::Consumer(kind),
                        scenario: si,
                        batch,
                        slice: None,
                        id: match batch {
                            Some(bi) => format!("{base}/batch:{bi}"),
                            None => base.clone(),
                        },
                        device,
                    });
                }
            }
        }
    }
    out
}

/// The four data paths single-variation cases run on.
const DATA_PATHS: [fn(Enc) -> Kind; 4] = [
    Kind::Array,
    Kind::DeviceArray,
    Kind::Stream,
    Kind::DeviceStream,
];

/// The single-variation cases (`consumer/<kind>/varied:<variation>/<scenario>[/batch:<i>]`),
/// each judged like the varied case.
///
/// `all`: the full product, every variation on every data path for every
/// scenario (`certify --all-variations`). Otherwise a covering choice, so
/// that the default run stays affordable (issue 38 item 11):
/// - every (variation, scenario) pair where the variation can show itself
///   ([`relevant`]: unused dictionary values need a dictionary, shared
///   union slots a dense union, several variadic buffers a view type, ...)
///   is run once, on the path picked by FNV-1a of the variation's and the
///   scenario's names (a pair gets the same path whatever other scenarios
///   the run has: a replay over one scenario plans it again);
/// - then every (variation, path) pair not yet covered is added, with the
///   relevant scenarios in the run's order (cycling; one with a batch for
///   the array paths), so every variation reaches every path.
///
/// A variation no scenario of the run can show is not planned.
pub fn variation_plan(scenarios: &[Scenario], all: bool) -> Vec<CaseSpec> {
    let mut chosen: Vec<(Variation, usize, usize)> = Vec::new();
    for v in Variation::ALL {
        let rel: Vec<usize> = (0..scenarios.len())
            .filter(|&si| all || relevant(v, &scenarios[si]))
            .collect();
        if rel.is_empty() {
            continue;
        }
        if all {
            for &si in &rel {
                chosen.extend((0..DATA_PATHS.len()).map(|p| (v, si, p)));
            }
            continue;
        }
        let mut covered = [false; 4];
        for &si in &rel {
            let key = format!("{}/{}", v.name(), scenarios[si].name);
            // The high half: FNV-1a's low bits depend only on the low bits of
            // each byte, and similar names would share a path.
            let mut p = ((fnv1a(key.as_bytes()) >> 32) % DATA_PATHS.len() as u64) as usize;
            // With no batch, the array paths have no case: its stream twin.
            if scenarios[si].batches.is_empty() && p < 2 {
                p += 2;
            }
            covered[p] = true;
            chosen.push((v, si, p));
        }
        let with_batches: Vec<usize> = rel
            .iter()
            .copied()
            .filter(|&si| !scenarios[si].batches.is_empty())
            .collect();
        let mut next = 0;
        for (p, &done) in covered.iter().enumerate() {
            let from = if p < 2 { &with_batches } else { &rel };
            if !done && !from.is_empty() {
                chosen.push((v, from[next % from.len()], p));
                next += 1;
            }
        }
    }
    // In scenario order, then path, then variation: like the other cases.
    chosen.sort_by_key(|&(v, si, p)| (si, p, v));
    chosen.dedup();
    let mut out = Vec::new();
    for (v, si, p) in chosen {
        let kind = DATA_PATHS[p](Enc::Only(v));
        out.extend(cases_of(kind, si, &scenarios[si]));
    }
    out
}

/// The consumer case(s) of one kind and scenario on the CPU: one per batch
/// on the array paths, one on the stream paths.
fn cases_of(kind: Kind, si: usize, s: &Scenario) -> Vec<CaseSpec> {
    let base = format!("consumer/{}/{}", kind.words(), s.name);
    let spec = |batch: Option<usize>, id: String| CaseSpec {
        path: Path::Consumer(kind),
        scenario: si,
        batch,
        slice: None,
        id,
        device: crate::device::Kind::Cpu,
    };
    if kind.per_batch() {
        (0..s.batches.len())
            .map(|bi| spec(Some(bi), format!("{base}/batch:{bi}")))
            .collect()
    } else {
        vec![spec(None, base)]
    }
}

/// Whether variation `v` can change what a scenario's data is handed over
/// as. Offsets, children longer than their parent (a batch is a struct),
/// null_count -1 (the batch's struct has a validity bitmap), unaligned
/// buffers and NULL names (the batch's schema has an empty name) reach
/// every scenario with a column; the others need the types or data they
/// vary.
pub fn relevant(v: Variation, s: &Scenario) -> bool {
    use arrow_schema::{DataType::*, UnionMode};
    let mut types = Vec::new();
    for f in s.schema.fields() {
        crate::generate::types::walk_types(f.data_type(), true, &mut |t| types.push(t));
    }
    if types.is_empty() {
        return false;
    }
    let any = |f: &dyn Fn(&arrow_schema::DataType) -> bool| types.iter().any(|t| f(t));
    let variable = |t: &arrow_schema::DataType| {
        matches!(
            t,
            Utf8 | Binary
                | LargeUtf8
                | LargeBinary
                | Utf8View
                | BinaryView
                | List(_)
                | LargeList(_)
                | ListView(_)
                | LargeListView(_)
                | Map(..)
        )
    };
    let nulls = s
        .batches
        .iter()
        .any(|b| b.columns().iter().any(|c| c.logical_null_count() > 0));
    let empty = s.batches.iter().any(|b| b.num_rows() == 0);
    match v {
        Variation::Offset
        | Variation::LongChildren
        | Variation::NullCountUnknown
        | Variation::Unaligned
        | Variation::NullNames => true,
        Variation::NullEmptyBuffers => empty || any(&variable),
        Variation::Garbage => nulls || any(&|t| variable(t) || matches!(t, Boolean)),
        Variation::SpareBits => nulls || any(&|t| matches!(t, Boolean)),
        Variation::VariadicBuffers => any(&|t| matches!(t, Utf8View | BinaryView)),
        Variation::SharedUnionSlots => any(&|t| matches!(t, Union(_, UnionMode::Dense))),
        Variation::UnusedDictionaryValues => any(&|t| matches!(t, Dictionary(..))),
    }
}

/// The single-variation case an ID names, on the CPU, whether or not the
/// plan chose it (a case of `--all-variations` replayed, or asked for by
/// its exact ID).
pub fn spec_from_id(scenarios: &[Scenario], id: &str) -> Option<CaseSpec> {
    let rest = id.strip_prefix("consumer/")?;
    let (kind_word, rest) = rest.split_once('/')?;
    let rest = rest.strip_prefix("varied:")?;
    let (v, rest) = rest.split_once('/')?;
    let v = Variation::from_name(v)?;
    let make = match kind_word {
        "array" => Kind::Array,
        "device_array" => Kind::DeviceArray,
        "stream" => Kind::Stream,
        "device_stream" => Kind::DeviceStream,
        _ => return None,
    };
    let kind = make(Enc::Only(v));
    let (name, batch) = if kind.per_batch() {
        let (name, b) = rest.rsplit_once("/batch:")?;
        (name, Some(b.parse::<usize>().ok()?))
    } else {
        (rest, None)
    };
    let si = scenarios.iter().position(|s| s.name == name)?;
    if batch.is_some_and(|b| b >= scenarios[si].batches.len()) {
        return None;
    }
    cases_of(kind, si, &scenarios[si])
        .into_iter()
        .find(|c| c.id == id)
}

/// A stable seed for a case's varied encoding (FNV-1a of its ID).
pub(crate) fn seed_of(id: &str) -> u64 {
    fnv1a(id.as_bytes())
}

/// FNV-1a of some bytes (case seeds, fuzz input tags).
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .copied()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
        })
}

fn encoding(e: Enc, id: &str) -> Encoding {
    match e {
        Enc::Plain => Encoding::Plain,
        Enc::Varied => Encoding::Varied(seed_of(id)),
        Enc::Only(v) => Encoding::Only(v, seed_of(id)),
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

/// The plan a stream case hands over.
fn stream_plan(
    scenario: &Scenario,
    enc: Encoding,
    fail: Option<Failure>,
) -> Result<StreamPlan, String> {
    Ok(StreamPlan {
        schema: encode::schema(&scenario.schema, enc)?,
        chunks: scenario
            .batches
            .iter()
            .enumerate()
            .map(|(i, b)| encode::batch(b, enc, i as u64 + 1))
            .collect::<Result<_, _>>()?,
        fail,
    })
}

/// Hands the case's data to the consumer once.
fn attempt(
    consumer: &Plugin,
    scenario: &Scenario,
    spec: &CaseSpec,
    kind: Kind,
    enc: Encoding,
    poison: bool,
    fail: Option<Failure>,
) -> Result<Attempt, String> {
    let ledger = Ledger::on_device(poison, spec.device)?;
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

/// Records what the ledger and the handed-over structures show.
fn judge_handover(a: &Attempt, stream: bool, obs: &mut Observations) {
    for r in HANDOVER_RULES {
        obs.check(r, true, "", String::new);
    }
    if stream {
        for r in STREAM_RULES {
            obs.check(r, true, "", String::new);
        }
    }
    for v in &a.findings.violations {
        obs.check(v.rule, false, &v.at, || v.message.clone());
    }
    for (what, root) in &a.live {
        let r = &a.findings.roots[*root];
        // Unreleased and unmoved is a leak, which the ledger reports.
        if let Some((addr, _)) = r.releases.first() {
            obs.check(crate::rule!("consumer.move.marks-source"), false, what, || {
                format!(
                    "the {what} was moved (its release ran on a copy at {addr:#x}) but the source the harness handed over at {:#x} still has a non-NULL release: \"it MUST mark the source structure released\"",
                    r.addr
                )
            });
        }
    }
}

/// device.move, consumer side: a consumer that moved the ArrowDeviceArray
/// it was handed (its release ran on a copy elsewhere) must have marked the
/// source released: "Then it MUST mark the source structure released by
/// setting the release member of the embedded ArrowArray structure to
/// NULL, but without calling that release callback."
fn judge_device_move(a: &Attempt, obs: &mut Observations) {
    let unmarked: Vec<String> = a
        .live
        .iter()
        .filter(|(what, _)| what == "device array")
        .filter_map(|(_, root)| {
            let r = &a.findings.roots[*root];
            r.releases.first().map(|(addr, _)| {
                format!(
                    "the ArrowDeviceArray was moved (its release ran on a copy at {addr:#x}) but the source at {:#x} still has array.release set",
                    r.addr
                )
            })
        })
        .collect();
    obs.check(
        crate::rule!("device.move"),
        unmarked.is_empty(),
        "device array",
        || unmarked.join("; "),
    );
}

/// consumer.sync.waits: a consumer that says it read a device array must
/// have waited on its sync_event first. The harness's writes land only
/// when the event completes (on the emulated device, only when someone
/// waits for it; on CUDA, after a slow kernel), so an array the consumer
/// let go while its event had not completed was read, if at all, before
/// the data was there.
fn judge_sync(a: &Attempt, obs: &mut Observations) {
    for r in &a.findings.roots {
        if let Some(done) = r.synced {
            obs.check(crate::rule!("consumer.sync.waits"), done, &r.what, || {
                format!(
                    "the consumer returned what it read, but when it released the {} its sync_event had not completed: it read the buffers without waiting on the event (\"it MUST be used to call the appropriate sync method for the device ... before attempting to access the memory in the buffers\")",
                    r.what
                )
            });
        }
    }
}

/// What a consumer wrote back, against what it was given, in three tiers
/// ([`crate::compare::Tiers`]): `values` is `consumer.read.values`,
/// `types` `consumer.read.types`, `optional` (names and metadata)
/// `consumer.read.metadata`.
pub(super) type ReadDifferences = crate::compare::Tiers;

impl ReadDifferences {
    /// Records the names-and-metadata and types verdicts; returns the
    /// value differences, which the caller judges (a data case first looks
    /// again with release poisoning off).
    pub(super) fn judge_all_but_values(&self, obs: &mut Observations) -> Option<String> {
        obs.check(
            crate::rule!("consumer.read.metadata"),
            self.optional.is_empty(),
            "output",
            || self.optional.join("; "),
        );
        // Where the values differ, whether the types also do is not judged.
        if self.values.is_empty() {
            obs.check(
                crate::rule!("consumer.read.types"),
                self.types.is_empty(),
                "output",
                || self.types.join("; "),
            );
            obs.check(
                crate::rule!("consumer.read.precision"),
                self.precision.is_empty(),
                "output",
                || self.precision.join("; "),
            );
            return None;
        }
        Some(self.values.join("; "))
    }

    /// Records the three rules' verdicts.
    pub(super) fn judge(&self, obs: &mut Observations) {
        let wrong = self.judge_all_but_values(obs);
        obs.check(
            crate::rule!("consumer.read.values"),
            wrong.is_none(),
            "output",
            || wrong.clone().unwrap_or_default(),
        );
    }
}

/// Decodes what the consumer wrote back and compares it with `expected`
/// in tiers ([`crate::compare::tiers`]).
pub(super) fn differences(
    expected: (&Schema, &[RecordBatch]),
    ipc_bytes: &[u8],
) -> ReadDifferences {
    match ipc::decode(ipc_bytes) {
        Ok(read) => {
            let mut t = crate::compare::tiers(expected.0, expected.1, &read.schema, &read.batches);
            t.split_precision_loss(expected.0, expected.1, &read.schema, &read.batches);
            t
        }
        Err(e) => ReadDifferences {
            values: vec![format!(
                "the consumer's output is not an Arrow IPC stream: {}",
                e.message
            )],
            ..Default::default()
        },
    }
}

fn expected_of<'a>(scenario: &'a Scenario, spec: &CaseSpec) -> (&'a Schema, &'a [RecordBatch]) {
    match spec.batch {
        Some(b) => (&scenario.schema, std::slice::from_ref(&scenario.batches[b])),
        None => (&scenario.schema, &scenario.batches),
    }
}

/// Array, device array, stream and device stream cases with data.
fn data_case(
    consumer: &Plugin,
    scenario: &Scenario,
    spec: &CaseSpec,
    kind: Kind,
    obs: &mut Observations,
) -> Ended {
    let e = match kind {
        Kind::Array(e) | Kind::DeviceArray(e) | Kind::Stream(e) | Kind::DeviceStream(e) => e,
        _ => unreachable!("data_case is called for data kinds"),
    };
    let enc = encoding(e, &spec.id);
    let stream = matches!(kind, Kind::Stream(_) | Kind::DeviceStream(_));
    let first = match attempt(consumer, scenario, spec, kind, enc, true, None) {
        Ok(a) => a,
        Err(why) => return Ended::Error(format!("the harness cannot export this scenario: {why}")),
    };
    // A consumer without this entry point was handed nothing: no handover
    // to judge (judging it anyway blamed the consumer for structures the
    // harness never gave it).
    if let Err(CallError::Missing(_)) = &first.result {
        return call_ended(first.result.unwrap_err());
    }
    judge_handover(&first, stream, obs);
    if matches!(kind, Kind::DeviceArray(_)) {
        judge_device_move(&first, obs);
    }
    if spec.device == crate::device::Kind::Cpu {
        if matches!(kind, Kind::DeviceArray(_) | Kind::DeviceStream(_)) {
            obs.not_exercised(
                crate::rule!("consumer.sync.waits"),
                "CPU device arrays carry no sync event; the cases on a device with its own memory (the emulated device or CUDA) exercise this rule",
            );
        }
    } else if first.result.is_ok() {
        judge_sync(&first, obs);
    }
    let expected = expected_of(scenario, spec);
    if let Ok(bytes) = &first.result {
        keep_output(&spec.id, bytes);
    }
    // Output arrowcert cannot decode cannot be compared: its own outcome
    // (an error of the library's IPC writer, which its adapter uses), never
    // "values differ".
    if let Ok(bytes) = &first.result {
        if let Err(e) = ipc::decode(bytes) {
            obs.not_exercised(
                crate::rule!("consumer.read.values"),
                crate::roundtrip::UNDECODABLE,
            );
            return Ended::Error(format!("{}: {}", crate::roundtrip::UNDECODABLE, e.message));
        }
    }
    let wrong = match &first.result {
        Ok(bytes) => {
            if matches!(enc, Encoding::Varied(_) | Encoding::Only(..)) {
                // It took the encoding variations: the rule held.
                obs.check(crate::rule!("consumer.read.accepts"), true, "", String::new);
            }
            differences(expected, bytes).judge_all_but_values(obs)
        }
        Err(e) => {
            // A refusal that goes away when released memory is left as it
            // was is no refusal: the consumer read the poison it put there
            // by releasing first (an importer that validates what it reads
            // refuses poisoned offsets instead of reading them wrong).
            if reads_right_unpoisoned(consumer, scenario, spec, kind, enc, expected) {
                obs.check(crate::rule!("consumer.read.values"), true, "", String::new);
                obs.check(crate::rule!("consumer.read.after-release"), false, "output", || {
                    format!(
                        "with released buffers overwritten ({:#04x}) the consumer refused the input ({e}); with them left as they were it read right: it read after calling release",
                        export::RELEASED_BYTE
                    )
                });
                return Ended::Ran;
            }
            obs.not_exercised(crate::rule!("consumer.read.values"), e.to_string());
            return refused(consumer, scenario, spec, kind, enc, e, obs);
        }
    };
    let Some(evidence) = wrong else {
        obs.check(crate::rule!("consumer.read.values"), true, "", String::new);
        obs.check(
            crate::rule!("consumer.read.after-release"),
            true,
            "",
            String::new,
        );
        judge_view(first.values.as_deref(), expected, obs);
        return Ended::Ran;
    };
    // Read wrong: again without poisoning released memory. Right then means
    // the first run read memory after releasing it.
    if reads_right_unpoisoned(consumer, scenario, spec, kind, enc, expected) {
        obs.check(crate::rule!("consumer.read.values"), true, "", String::new);
        obs.check(crate::rule!("consumer.read.after-release"), false, "output", || {
            format!(
                "with released buffers overwritten ({:#04x}) the consumer read wrong ({evidence}); with them left as they were it read right: it read after calling release",
                export::RELEASED_BYTE
            )
        });
    } else {
        obs.check(
            crate::rule!("consumer.read.values"),
            false,
            "output",
            || evidence,
        );
    }
    Ended::Ran
}

/// consumer.read.values-view, an independent view: what the consumer
/// read back through its own Arrow exporter was right; its own values
/// (`arrowcert_consume_values`: a py: adapter's `values(obj)`, the
/// library's conversion to its native values, no Arrow exporter in the
/// way) must be the data too. An importer and an exporter that share a
/// misreading (rows reversed on the way in and back on the way out) pass
/// the read-back and not this. The rule's own words: the consumer reads
/// "the number of items from the physical start of the buffers" as given,
/// whatever it later exports. Values the view cannot show comparably are
/// not compared (recorded in the case's `view`), never passed or failed.
fn judge_view(view: Option<&str>, expected: (&Schema, &[RecordBatch]), obs: &mut Observations) {
    let Some(json) = view else { return };
    let c = crate::compare::pyvalues::compare(expected.0, expected.1, json);
    obs.view = Some(c.summary());
    obs.check(
        crate::rule!("consumer.read.values-view"),
        c.disagreements.is_empty(),
        "the consumer's own values view",
        || {
            format!(
                "what the consumer exported back was right, but its own view of what it read (values(obj), made without its Arrow exporter) disagrees with the data: its importer misread what its exporter undid, or its own conversion misreads what it holds: {}",
                c.disagreements.join("; ")
            )
        },
    );
}

/// Hands the case over once more with released memory left as it was
/// (not poisoned): true when the consumer then reads every value right.
fn reads_right_unpoisoned(
    consumer: &Plugin,
    scenario: &Scenario,
    spec: &CaseSpec,
    kind: Kind,
    enc: Encoding,
    expected: (&Schema, &[RecordBatch]),
) -> bool {
    let again = attempt(consumer, scenario, spec, kind, enc, false, None);
    matches!(&again, Ok(a) if matches!(&a.result, Ok(b) if differences(expected, b).values.is_empty()))
}

/// A consumer refused a data case cleanly ([`refusal`]). What it refused
/// decides the verdict. The same data encoded plainly (offsets 0, every
/// buffer allocated) is what a type refusal refuses: "Consumers MAY decide
/// not to support all data types".
///
/// A single-variation case ([`Encoding::Only`]) whose plain twin the
/// consumer reads refused that variation: a limitation for non-zero
/// offsets and unaligned buffers ("Consumers MAY decide not to support
/// non-0-offset arrays", "... unaligned memory"), `consumer.read.accepts`
/// for any other (no permission covers it).
///
/// A varied case whose plain twin the consumer reads is handed over once
/// more, varied the same ways but aligned and with every offset 0: read
/// then, the refusal was of the non-zero offsets or the unaligned buffers,
/// a limitation too; refused again, the consumer refuses an encoding the
/// spec lets producers use (null_count -1, NULL pointers for zero-sized
/// buffers, ...), which no permission covers: `consumer.read.accepts`.
/// Either way it is also handed each variation alone (with the case's
/// seed), and the verdict names the variations it refused alone.
fn refused(
    consumer: &Plugin,
    scenario: &Scenario,
    spec: &CaseSpec,
    kind: Kind,
    enc: Encoding,
    e: &CallError,
    obs: &mut Observations,
) -> Ended {
    let limitation = refusal(e);
    let seed = match enc {
        Encoding::Varied(seed) | Encoding::Only(_, seed) => seed,
        _ => return limitation,
    };
    // A panic a binding caught (ENOTRECOVERABLE) is an error, unless the
    // twins below show it refused only what the spec permits refusing:
    // "Consumers MAY decide not to support unaligned memory" (and
    // "non-0-offset arrays") says nothing of how a consumer refuses.
    let panicked = e.code() == Some(libc::ENOTRECOVERABLE);
    if !matches!(limitation, Ended::Limitation(_)) && !panicked {
        return limitation;
    }
    // The consumer took the data and handed back something broken: no
    // refusal, so no permission to credit (pyogrio's offset dictionaries
    // read as garbage were a limitation when the garbage was not UTF-8).
    if crate::plugin::streamed::read_back_broken(e) {
        return limitation;
    }
    // Off the CPU a refusal can come from reading before the data was
    // there (consumer.sync.waits, judged on what the consumer reads); the
    // twins would tell nothing about the encoding.
    if spec.device != crate::device::Kind::Cpu {
        return limitation;
    }
    // What the consumer answers to the same data in another encoding:
    // Ok(()) read, Err(its words) refused (or could not be handed over).
    let answer = |enc: Encoding| -> Result<(), String> {
        match attempt(consumer, scenario, spec, kind, enc, true, None) {
            Ok(a) => a.result.map(|_| ()).map_err(|e| e.to_string()),
            Err(why) => Err(why),
        }
    };
    if answer(Encoding::Plain).is_err() {
        return limitation;
    }
    let why = match &limitation {
        Ended::Limitation(why) => why.clone(),
        _ => format!("the consumer refused by a panic it caught ({e})"),
    };
    if let Encoding::Only(v, _) = enc {
        if v.refusable() {
            return Ended::Limitation(format!(
                "{why} (refused: {}; the same data encoded plainly was read: {})",
                v.name(),
                permission(v)
            ));
        }
        // A caught panic on a variation no permission covers stays the
        // error it was.
        if panicked {
            return limitation;
        }
        obs.check(crate::rule!("consumer.read.accepts"), false, "input", || {
            format!(
                "the consumer reads this data encoded plainly but refused it with one variation the spec lets producers use and no permission covers (refused: {}): {e}",
                v.name()
            )
        });
        return Ended::Ran;
    }
    // Refusals are rare: each variation alone, to say which it refused.
    let alone: Vec<Variation> = Variation::ALL
        .into_iter()
        .filter(|&v| answer(Encoding::Only(v, seed)).is_err())
        .collect();
    let (permitted, other): (Vec<Variation>, Vec<Variation>) =
        alone.iter().partition(|v| v.refusable());
    let names = |vs: &[Variation]| vs.iter().map(|v| v.name()).collect::<Vec<_>>().join(", ");
    let at_zero = answer(Encoding::VariedAlignedAtZero(seed));
    if at_zero.is_ok() {
        let which = if alone.is_empty() {
            "none alone: only with the other variations".to_string()
        } else {
            names(&alone)
        };
        let quotes: Vec<&str> = permitted.iter().map(|&v| permission(v)).collect();
        return Ended::Limitation(format!(
            "{why} (refused: {which}; non-zero offsets or unaligned memory: the same data, varied the same ways but aligned and at offset 0, was read{}{})",
            if quotes.is_empty() { "" } else { ": " },
            quotes.join(", ")
        ));
    }
    if panicked {
        return limitation;
    }
    let again = at_zero.err().unwrap_or_default();
    obs.check(crate::rule!("consumer.read.accepts"), false, "input", || {
        let which = if other.is_empty() {
            format!(
                "refused alone: {}; each variation no permission covers was read alone, only their combination was refused",
                if alone.is_empty() { "none".to_string() } else { names(&alone) }
            )
        } else {
            format!("refused: {}", names(&other))
        };
        format!(
            "the consumer reads this data encoded plainly but refused it encoded as the spec also lets producers encode it, even aligned and with every offset 0 (so not a refusal of offsets or unaligned memory, which the spec permits) ({which}): {e}; aligned at offset 0: {again}"
        )
    });
    Ended::Ran
}

/// The sentence of CDataInterface.rst that lets consumers refuse `v`.
fn permission(v: Variation) -> &'static str {
    match v {
        Variation::Offset => "\"Consumers MAY decide not to support non-0-offset arrays\"",
        Variation::Unaligned => "\"Consumers MAY decide not to support unaligned memory\"",
        _ => "",
    }
}

/// A consumer's refusal of data the harness exported correctly. The spec
/// lets consumers refuse: "Consumers MAY decide not to support all data
/// types" and the same of "non-0-offset arrays" and "unaligned memory"
/// (CDataInterface.rst); no sentence names the errno to use. A clean
/// refusal, a non-zero code with a message saying why (its structures
/// released, which the handover rules judge apart), is a limitation
/// carrying the consumer's own words, whatever errno it uses; ENOSYS is
/// the plugin contract's "cannot honour" and stands without a message. A
/// refusal with neither is an error: not a pass, not a rule broken.
pub(super) fn refusal(e: &CallError) -> Ended {
    match e.refusal() {
        Refusal::Skip(why) => Ended::Skip(why),
        Refusal::Limitation(why) => Ended::Limitation(why),
        Refusal::Error(why) => Ended::Error(why),
    }
}

/// With `ARROWCERT_KEEP_OUTPUT=DIR`, writes what the consumer wrote back
/// (Arrow IPC stream bytes) to `DIR/<case ID, '/' as '~'>.arrows`, to read
/// with another implementation when a verdict needs a second opinion.
/// Best effort: a failed write is reported on stderr, never a verdict.
fn keep_output(id: &str, bytes: &[u8]) {
    let Some(dir) = std::env::var_os("ARROWCERT_KEEP_OUTPUT") else {
        return;
    };
    let path = std::path::Path::new(&dir).join(format!("{}.arrows", id.replace('/', "~")));
    if let Err(e) = std::fs::write(&path, bytes) {
        eprintln!("ARROWCERT_KEEP_OUTPUT: {}: {e}", path.display());
    }
}

/// A stream that fails; the consumer must return the error and message and
/// still release everything.
fn stream_error(
    consumer: &Plugin,
    scenario: &Scenario,
    spec: &CaseSpec,
    device: bool,
    at: ErrorAt,
    code: c_int,
    obs: &mut Observations,
) -> Ended {
    let k = scenario.batches.len() / 2;
    let message = format!(
        "arrowcert injected failure: {} {}",
        match at {
            ErrorAt::Schema => "get_schema".to_string(),
            ErrorAt::Middle => format!("get_next for chunk {k}"),
        },
        errno_name(code)
    );
    let fail = Failure {
        at: match at {
            ErrorAt::Schema => FailAt::Schema,
            ErrorAt::Middle => FailAt::Next(k),
        },
        code,
        message: message.clone(),
    };
    let kind = Kind::StreamError { device, at, code };
    let a = match attempt(
        consumer,
        scenario,
        spec,
        kind,
        Encoding::Plain,
        true,
        Some(fail),
    ) {
        Ok(a) => a,
        Err(why) => return Ended::Error(format!("the harness cannot export this scenario: {why}")),
    };
    if let Err(CallError::Missing(_)) = &a.result {
        return call_ended(a.result.unwrap_err());
    }
    judge_handover(&a, true, obs);
    match &a.result {
        // ENOSYS: the consumer declined the data (its type, say) before the
        // injected failure could matter; the rule is not exercised, never
        // passed (the plain stream case of the scenario shows the decline).
        Err(CallError::Failed {
            code: libc::ENOSYS,
            message,
            ..
        }) if code != libc::ENOSYS => {
            let why = format!(
                "{}ENOSYS {}",
                super::CONSUMER_DECLINED,
                message.clone().unwrap_or_default()
            );
            obs.not_exercised(crate::rule!("consumer.stream.error"), why.clone());
            return Ended::Skip(why);
        }
        Ok(_) => obs.check(
            crate::rule!("consumer.stream.error"),
            false,
            "result",
            || {
                format!(
                "the stream failed with {} ({code}) \"{message}\", but the consume call succeeded",
                errno_name(code)
            )
            },
        ),
        Err(CallError::Missing(_)) => unreachable!("a missing entry point returned above"),
        Err(CallError::Failed {
            code: got,
            message: m,
            ..
        }) => {
            let m = m.clone().unwrap_or_default();
            if m.contains(export::OVERWRITTEN) {
                obs.check(crate::rule!("consumer.stream.error"), true, "", String::new);
                obs.check(crate::rule!("consumer.stream.last-error-copy"), false, "last error", || {
                    format!("the consumer's last error is the harness's overwritten message buffer ({m:?}): it kept get_last_error's pointer past the next stream call instead of copying the string")
                });
            } else if !(*got == code && m.contains(&message))
                && at == ErrorAt::Middle
                && declines_without_the_failure(consumer, scenario, spec, kind)
            {
                // The consumer declined the data itself (a type it does not
                // support, a chunk's offsets) before the injected get_next
                // failure could matter: the same stream with no failure is
                // refused too. A clean refusal is the limitation the stream
                // case of this scenario shows; the rule is not exercised.
                // (A get_schema failure comes before any data: no excuse.)
                let e = a.result.as_ref().unwrap_err();
                obs.not_exercised(
                    crate::rule!("consumer.stream.error"),
                    format!("the consumer declines this stream before the injected failure, with no failure injected too: {e}"),
                );
                return match refusal(e) {
                    Ended::Limitation(why) => Ended::Limitation(format!(
                        "{why} (it refuses the same stream with no failure injected too, so the injected failure never mattered)"
                    )),
                    other => other,
                };
            } else {
                obs.check(crate::rule!("consumer.stream.error"), *got == code && m.contains(&message), "last error", || {
                    format!(
                        "the stream failed with {} ({code}) \"{message}\"; the consumer returned {} ({got}) with last error {m:?} (the plugin contract asks for the same code, and the message)",
                        errno_name(code),
                        errno_name(*got)
                    )
                });
            }
        }
    }
    Ended::Ran
}

/// True when the consumer refuses the stream of an error case (plainly
/// encoded, as stream-error cases are) even with no failure injected: what
/// it declined was the data, not the failure.
fn declines_without_the_failure(
    consumer: &Plugin,
    scenario: &Scenario,
    spec: &CaseSpec,
    kind: Kind,
) -> bool {
    attempt(consumer, scenario, spec, kind, Encoding::Plain, true, None)
        .is_ok_and(|a| matches!(a.result, Err(CallError::Failed { .. })))
}

/// An already released structure: a consumer should refuse it.
fn released(
    consumer: &Plugin,
    scenario: &Scenario,
    schema_released: bool,
    obs: &mut Observations,
) -> Ended {
    let ledger = Ledger::new(true);
    let snode = match encode::schema(&scenario.schema, Encoding::Plain) {
        Ok(s) => s,
        Err(why) => return Ended::Error(format!("the harness cannot export this scenario: {why}")),
    };
    // What an integration library compares with (a plugin never sees it).
    let sent = scenario
        .batches
        .first()
        .cloned()
        .unwrap_or_else(|| RecordBatch::new_empty(scenario.schema.clone()));
    let result = if schema_released {
        let node = match scenario
            .batches
            .first()
            .map(|b| encode::batch(b, Encoding::Plain, 0))
        {
            Some(Ok(n)) => n,
            _ => return Ended::Skip("the scenario has no batch".into()),
        };
        let mut s = ledger.released_schema("released schema");
        let mut a = ledger.array(&node, "array");
        let r = consumer.consume_array(s.get(), a.get(), &sent);
        take_back(&r, a.get());
        r
    } else {
        let mut s = ledger.schema(&snode, "schema");
        let mut a = ledger.released_array("released array");
        let r = consumer.consume_array(s.get(), a.get(), &sent);
        take_back(&r, s.get());
        r
    };
    let what = if schema_released { "schema" } else { "array" };
    // What it does with the live half is judged by the release rules
    // (only when it was handed over: not when the entry point is missing).
    let findings = ledger.finish();
    if let Err(CallError::Missing(e)) = &result {
        return Ended::Skip(format!("{e} is not exported by the plugin"));
    }
    for v in &findings.violations {
        obs.check(v.rule, false, &v.at, || v.message.clone());
    }
    match result {
        Ok(_) => {
            obs.check(crate::rule!("consumer.release.checks-released"), false, what, || {
                format!("given an ArrowArray{} whose release is NULL (released) and whose other members are poison, the consume call succeeded: \"consumers SHOULD check for a NULL release callback and treat it accordingly (probably by erroring out)\"",
                if schema_released { "Schema" } else { "" })
            });
            Ended::Ran
        }
        Err(_) => {
            obs.check(
                crate::rule!("consumer.release.checks-released"),
                true,
                "",
                String::new,
            );
            Ended::Ran
        }
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

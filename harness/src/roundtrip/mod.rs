//! `arrowcert roundtrip`: each scenario goes from the producer, through the
//! harness, into the consumer, along every interface path; what the consumer
//! read must equal, logically, what the producer was asked to export.
//!
//! The harness sits in the middle as the spec's consumer of the producer and
//! producer of the consumer: it poisons every out-structure before the
//! producer fills it, moves what it received to a new address before handing
//! it on (a relocation, as "Moving an array" in CDataInterface.rst allows),
//! and checks that the consumer released or moved everything it was given.

#![forbid(unsafe_code)]

pub mod filter;

use std::time::Instant;

use arrow_array::RecordBatch;

use crate::abi::ops::{Guard, Owned};
use crate::abi::{
    ArrowArray, ArrowArrayStream, ArrowDeviceArray, ArrowDeviceArrayStream, ArrowDeviceType,
    ArrowSchema,
};
use crate::compare;
use crate::plugin::{CallError, Plugin};
use crate::report::{Case, Slice, Verdict};
use crate::scenario::Scenario;
use crate::sdk::ipc;

pub use filter::Filter;

/// What a case says when the consumer's output is not an IPC stream
/// arrowcert can read: what the library read is written back by its
/// adapter with the library's own IPC writer, so such output is that
/// writer's doing, and what was read cannot be compared.
pub const UNDECODABLE: &str = "the consumer's output (written with the library's own IPC writer) is not an Arrow IPC stream arrowcert can read, so what it read cannot be compared and no rule is judged on it";

/// The interface paths a scenario is sent along.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Path {
    /// `ArrowDeviceArray`, one record batch (whole or sliced).
    DeviceArray,
    /// `ArrowDeviceArrayStream`, every batch.
    DeviceStream,
    /// `ArrowAsyncDeviceStreamHandler` driven by the producer.
    Async,
    /// Plain `ArrowArray`, one record batch (whole or sliced).
    Array,
    /// Plain `ArrowArrayStream`, every batch.
    Stream,
}

impl Path {
    pub const ALL: [Path; 5] = [
        Path::DeviceArray,
        Path::DeviceStream,
        Path::Async,
        Path::Array,
        Path::Stream,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Path::DeviceArray => "device_array",
            Path::DeviceStream => "device_stream",
            Path::Async => "async",
            Path::Array => "array",
            Path::Stream => "stream",
        }
    }

    fn per_batch(self) -> bool {
        matches!(self, Path::DeviceArray | Path::Array)
    }
}

/// One planned case: a path (a roundtrip's [`Path`], or certification's
/// `certify::Path`) over one scenario, batch and slice, with its ID.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaseSpec<P = Path> {
    pub path: P,
    pub scenario: usize,
    pub batch: Option<usize>,
    /// (offset, length) of a zero-copy slice of the batch.
    pub slice: Option<(usize, usize)>,
    pub id: String,
    /// The device the case runs on (the CPU for every roundtrip case and
    /// every certification path but the device paths on other devices).
    pub device: crate::device::Kind,
}

/// The slice taken of a batch of `rows` rows: it starts a third of the way
/// in (so offsets are non-zero and, for 37 rows, not byte-aligned in
/// bitmaps) and stops before the end.
pub fn slice_of(rows: usize) -> (usize, usize) {
    let offset = rows.div_ceil(3);
    (offset, (rows - offset).div_ceil(2))
}

/// The per-batch cases of one scenario: every batch whole and a zero-copy
/// slice of it, as (batch, slice, ID under `base`). Shared by every suite
/// that plans per-batch cases.
pub fn batch_cases<'a>(
    base: &str,
    scenario: &'a Scenario,
) -> impl Iterator<Item = (usize, Option<(usize, usize)>, String)> + 'a {
    let base = base.to_string();
    scenario
        .batches
        .iter()
        .enumerate()
        .flat_map(move |(bi, b)| {
            let base = base.clone();
            let slice = scenario
                .slices
                .as_ref()
                .and_then(|s| s.get(bi).copied())
                .unwrap_or_else(|| slice_of(b.num_rows()));
            [None, Some(slice)].into_iter().map(move |slice| {
                let mut id = format!("{base}/batch:{bi}");
                if let Some((o, l)) = slice {
                    id.push_str(&format!("/slice:{o}+{l}"));
                }
                (bi, slice, id)
            })
        })
}

/// The producer arguments of a per-batch case: batch index, slice offset,
/// slice length (-1: the whole batch).
pub fn call_range(batch: Option<usize>, slice: Option<(usize, usize)>) -> (i64, i64, i64) {
    match (batch, slice) {
        (Some(b), Some((o, l))) => (b as i64, o as i64, l as i64),
        (Some(b), None) => (b as i64, 0, -1),
        _ => (0, 0, -1),
    }
}

/// The batches a case asked for: one (sliced) batch, or all of them.
pub fn requested(
    scenario: &Scenario,
    batch: Option<usize>,
    slice: Option<(usize, usize)>,
) -> Vec<RecordBatch> {
    match batch {
        None => scenario.batches.clone(),
        Some(b) => {
            let batch = &scenario.batches[b];
            vec![match slice {
                Some((o, l)) => batch.slice(o, l),
                None => batch.clone(),
            }]
        }
    }
}

/// Every case for these scenarios, in a stable order.
pub fn plan(scenarios: &[Scenario]) -> Vec<CaseSpec> {
    let mut out = Vec::new();
    for (si, s) in scenarios.iter().enumerate() {
        for path in Path::ALL {
            let base = format!("{}/{}", path.name(), s.name);
            if path.per_batch() {
                out.extend(batch_cases(&base, s).map(|(bi, slice, id)| CaseSpec {
                    path,
                    scenario: si,
                    batch: Some(bi),
                    slice,
                    id,
                    device: crate::device::Kind::Cpu,
                }));
            } else {
                out.push(CaseSpec {
                    path,
                    scenario: si,
                    batch: None,
                    slice: None,
                    id: base,
                    device: crate::device::Kind::Cpu,
                });
            }
        }
    }
    out
}

/// How cases run.
#[derive(Debug, Clone)]
pub struct Options {
    pub device_type: ArrowDeviceType,
    pub device_id: i64,
    /// How long the async consumer's finish() may wait for release.
    pub async_timeout_ms: i64,
    /// The command line that reruns one case when the case ID is appended.
    pub replay_prefix: String,
    /// Certification's `--all-leaks`, passed on to its workers.
    pub all_leaks: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            device_type: crate::abi::device::CPU,
            device_id: -1,
            async_timeout_ms: 30_000,
            replay_prefix: "arrowcert roundtrip --exact".into(),
            all_leaks: false,
        }
    }
}

/// The consumer of a round trip as a case reaches it: what the case checks
/// before any call (entry points, device support), and the plugin itself.
/// A worker restarted after the producer crashed loads its consumer only
/// when a case first calls it (`run::worker`): a producer that crashes on
/// one scenario after another then costs no consumer start-up (a Python
/// library's import) per crash.
pub trait ConsumerSide {
    fn has(&self, symbol: &str) -> bool;
    fn supports_device(&self, device_type: ArrowDeviceType) -> bool;
    /// The loaded plugin; `Err` when it could not be loaded (again).
    fn plugin(&self) -> Result<&Plugin, String>;
}

impl ConsumerSide for Plugin {
    fn has(&self, symbol: &str) -> bool {
        Plugin::has(self, symbol)
    }
    fn supports_device(&self, device_type: ArrowDeviceType) -> bool {
        Plugin::supports_device(self, device_type)
    }
    fn plugin(&self) -> Result<&Plugin, String> {
        Ok(self)
    }
}

/// What a case observed before it is turned into a report entry.
enum Outcome {
    /// The consumer read this; compare it with the expectation.
    Read(Vec<u8>),
    /// A call failed.
    Error(String),
    /// Not runnable with these plugins.
    Skip(String),
    /// The consumer declined the data cleanly, as the spec permits.
    Limitation(String),
}

/// Runs one case.
pub fn run_case(
    producer: &Plugin,
    consumer: &dyn ConsumerSide,
    scenario: &Scenario,
    spec: &CaseSpec,
    opts: &Options,
) -> Case {
    let start = Instant::now();
    let mut differences = Vec::new();
    let outcome = if let Some(reason) = device_skip(producer, consumer, spec.path, opts) {
        Outcome::Skip(reason)
    } else if let Some(e) = missing_entry(producer, consumer, spec.path) {
        Outcome::Skip(e.to_string())
    } else {
        transfer(producer, consumer, scenario, spec, opts, &mut differences)
    };
    let mut changed = Vec::new();
    let (verdict, message) = match outcome {
        Outcome::Skip(reason) => (Verdict::Skip, Some(reason)),
        Outcome::Error(msg) => (Verdict::Error, Some(msg)),
        Outcome::Limitation(msg) => (Verdict::Limitation, Some(msg)),
        Outcome::Read(bytes) => {
            let (schema, batches) = expected(scenario, spec);
            match ipc::decode(&bytes) {
                // Not comparable: its own outcome (an error), never
                // "values differ" (UNDECODABLE).
                Err(e) => {
                    let why = format!("{}: {}", UNDECODABLE, e.message);
                    // A contract violation seen around it (a structure not
                    // released) still fails the case.
                    let verdict = if differences.is_empty() {
                        Verdict::Error
                    } else {
                        Verdict::Fail
                    };
                    differences.push(why.clone());
                    return Case {
                        verdict,
                        message: Some(why),
                        differences,
                        duration_us: start.elapsed().as_micros() as u64,
                        ..record(scenario, spec, opts)
                    };
                }
                Ok(read) => {
                    // Values lost fail the case; types, names and metadata
                    // changed around equal values do not (the same tiers
                    // as consumer.read.values / .types / .metadata).
                    let tiers = compare::tiers(&schema, &batches, &read.schema, &read.batches);
                    differences.extend(tiers.values);
                    changed.extend(tiers.types);
                    changed.extend(tiers.optional);
                }
            }
            if differences.is_empty() {
                (Verdict::Pass, None)
            } else {
                (
                    Verdict::Fail,
                    Some("what the consumer read differs from what was exported".into()),
                )
            }
        }
    };
    // A contract violation observed around a failed call still fails.
    let verdict =
        if matches!(verdict, Verdict::Error | Verdict::Limitation) && !differences.is_empty() {
            Verdict::Fail
        } else {
            verdict
        };
    // A failed case shows everything that differs.
    if verdict == Verdict::Fail {
        differences.append(&mut changed);
    }
    Case {
        verdict,
        message,
        differences,
        changed,
        duration_us: start.elapsed().as_micros() as u64,
        ..record(scenario, spec, opts)
    }
}

/// The report entry of a case before it runs: what a worker that dies
/// running it reports (with the verdict changed to `crash` or `timeout`).
pub fn record(scenario: &Scenario, spec: &CaseSpec, opts: &Options) -> Case {
    not_run(
        &spec.id,
        spec.path.name(),
        scenario,
        spec.batch,
        spec.slice,
        &opts.replay_prefix,
    )
}

/// A planned case's report entry before it runs (verdict `skip`, "not
/// run"), with a replay command of `replay_prefix` and the quoted ID.
pub fn not_run(
    id: &str,
    path: &str,
    scenario: &Scenario,
    batch: Option<usize>,
    slice: Option<(usize, usize)>,
    replay_prefix: &str,
) -> Case {
    Case {
        id: id.to_string(),
        path: path.into(),
        scenario: scenario.name.clone(),
        batch: batch.map(|b| b as u64),
        slice: slice.map(|(o, l)| Slice {
            offset: o as u64,
            length: l as u64,
        }),
        verdict: Verdict::Skip,
        message: Some("not run".into()),
        differences: Vec::new(),
        duration_us: 0,
        replay: format!("{replay_prefix} '{id}'"),
        output: None,
        checked: Vec::new(),
        violations: Vec::new(),
        not_exercised: Vec::new(),
        flaky: Vec::new(),
        view: None,
        changed: Vec::new(),
    }
}

fn device_skip(
    producer: &Plugin,
    consumer: &dyn ConsumerSide,
    path: Path,
    opts: &Options,
) -> Option<String> {
    let device_path = matches!(path, Path::DeviceArray | Path::DeviceStream | Path::Async);
    if !device_path {
        return (opts.device_type != crate::abi::device::CPU)
            .then(|| "plain C data/stream paths are CPU only".to_string());
    }
    let name = crate::abi::device::name(opts.device_type).unwrap_or("unknown");
    if !producer.supports_device(opts.device_type) {
        return Some(format!("the producer does not support device {name}"));
    }
    if !consumer.supports_device(opts.device_type) {
        return Some(format!("the consumer does not support device {name}"));
    }
    None
}

/// The first entry point the path needs that a side does not export, as
/// the call would report it. Checked before any call, so that a path one
/// side lacks costs nothing (a Python library's produce_schema loads the
/// data first, a fifth of a second each time).
fn missing_entry(producer: &Plugin, consumer: &dyn ConsumerSide, path: Path) -> Option<CallError> {
    let (produce, consume): (&[&'static str], &[&'static str]) = match path {
        Path::DeviceArray => (
            &["arrowcert_produce_schema", "arrowcert_produce_device_array"],
            &["arrowcert_consume_device_array"],
        ),
        Path::Array => (
            &["arrowcert_produce_schema", "arrowcert_produce_array"],
            &["arrowcert_consume_array"],
        ),
        Path::DeviceStream => (
            &["arrowcert_produce_device_stream"],
            &["arrowcert_consume_device_stream"],
        ),
        Path::Stream => (&["arrowcert_produce_stream"], &["arrowcert_consume_stream"]),
        Path::Async => (
            &["arrowcert_produce_async"],
            &[
                "arrowcert_consume_async_start",
                "arrowcert_consume_async_finish",
            ],
        ),
    };
    let lacking = |p: &dyn ConsumerSide, entries: &[&'static str]| {
        entries.iter().copied().find(|e| !p.has(e))
    };
    lacking(producer, produce)
        .or_else(|| lacking(consumer, consume))
        .map(CallError::Missing)
}

/// The schema and batches the consumer should have read.
fn expected(scenario: &Scenario, spec: &CaseSpec) -> (arrow_schema::SchemaRef, Vec<RecordBatch>) {
    (
        scenario.schema.clone(),
        requested(scenario, spec.batch, spec.slice),
    )
}

/// A failed call: not exported, or ENOSYS (the plugin declines this data or
/// path, as the contract says it does for what it cannot honour), is a
/// skip, as in certification; any other errno is an error.
fn call_outcome(e: CallError) -> Outcome {
    match e {
        CallError::Missing(_) => Outcome::Skip(e.to_string()),
        _ if e.declined() => Outcome::Skip(format!("not supported: {e}")),
        CallError::Failed { .. } => Outcome::Error(e.to_string()),
    }
}

/// Notes a base structure the consumer returned without releasing or
/// moving: "the consumer ... MUST call a base structure's release callback
/// when it won't be using it anymore" (CDataInterface.rst, "Release
/// callback semantics -- for consumers"); a consume call is the end of use.
fn check_released<T: Owned>(what: &str, s: &Guard<T>, differences: &mut Vec<String>) {
    if !s.is_released() {
        differences.push(format!(
            "the consumer returned without releasing or moving the {what} it was given"
        ));
    }
}

fn transfer(
    producer: &Plugin,
    consumer: &dyn ConsumerSide,
    scenario: &Scenario,
    spec: &CaseSpec,
    opts: &Options,
    differences: &mut Vec<String>,
) -> Outcome {
    let ipc = &scenario.ipc;
    let (batch, offset, length) = call_range(spec.batch, spec.slice);
    let result = match spec.path {
        Path::DeviceArray | Path::Array => {
            let mut schema = Guard::<ArrowSchema>::poisoned();
            if let Err(e) = producer.produce_schema(ipc, &mut schema) {
                return call_outcome(e);
            }
            let mut schema = schema.relocate();
            if spec.path == Path::DeviceArray {
                let mut array = Guard::<ArrowDeviceArray>::poisoned();
                if let Err(e) = producer.produce_device_array(
                    ipc,
                    batch,
                    offset,
                    length,
                    opts.device_type,
                    opts.device_id,
                    &mut array,
                ) {
                    return call_outcome(e);
                }
                let mut array = array.relocate();
                let consumer = match consumer.plugin() {
                    Ok(c) => c,
                    Err(why) => return Outcome::Error(why),
                };
                let r = consumer.consume_device_array(&mut schema, &mut array);
                check_released("schema", &schema, differences);
                check_released("device array", &array, differences);
                r
            } else {
                let mut array = Guard::<ArrowArray>::poisoned();
                if let Err(e) = producer.produce_array(ipc, batch, offset, length, &mut array) {
                    return call_outcome(e);
                }
                let mut array = array.relocate();
                let sent = requested(scenario, spec.batch, spec.slice).remove(0);
                let consumer = match consumer.plugin() {
                    Ok(c) => c,
                    Err(why) => return Outcome::Error(why),
                };
                let r = consumer.consume_array(&mut schema, &mut array, &sent);
                check_released("schema", &schema, differences);
                check_released("array", &array, differences);
                r
            }
        }
        Path::DeviceStream => {
            let mut stream = Guard::<ArrowDeviceArrayStream>::poisoned();
            if let Err(e) =
                producer.produce_device_stream(ipc, opts.device_type, opts.device_id, &mut stream)
            {
                return call_outcome(e);
            }
            let mut stream = stream.relocate();
            let consumer = match consumer.plugin() {
                Ok(c) => c,
                Err(why) => return Outcome::Error(why),
            };
            let r = consumer.consume_device_stream(&mut stream);
            check_released("device stream", &stream, differences);
            r
        }
        Path::Stream => {
            let mut stream = Guard::<ArrowArrayStream>::poisoned();
            if let Err(e) = producer.produce_stream(ipc, &mut stream) {
                return call_outcome(e);
            }
            let mut stream = stream.relocate();
            let consumer = match consumer.plugin() {
                Ok(c) => c,
                Err(why) => return Outcome::Error(why),
            };
            let r = consumer.consume_stream(&mut stream);
            check_released("stream", &stream, differences);
            r
        }
        Path::Async => match consumer.plugin() {
            // The consumer drives the async path: loaded before any call.
            Ok(consumer) => consumer.consume_async_from(
                producer,
                ipc,
                opts.device_type,
                opts.device_id,
                opts.async_timeout_ms,
            ),
            Err(why) => return Outcome::Error(why),
        },
    };
    match result {
        Ok(bytes) => Outcome::Read(bytes),
        // The async path's finish fails for the producer's faults too (a
        // release that never came): not the consumer declining.
        Err(e) if spec.path == Path::Async => call_outcome(e),
        Err(e) => consumer_outcome(e),
    }
}

/// The consumer's failed call, read as certification reads it
/// ([`CallError::refusal`]).
fn consumer_outcome(e: CallError) -> Outcome {
    match e.refusal() {
        crate::plugin::Refusal::Skip(why) => Outcome::Skip(why),
        crate::plugin::Refusal::Limitation(why) => Outcome::Limitation(why),
        crate::plugin::Refusal::Error(why) => Outcome::Error(why),
    }
}

/// Runs every planned case the filter selects, reporting each as it ends.
pub fn run(
    producer: &Plugin,
    consumer: &Plugin,
    scenarios: &[Scenario],
    filter: &Filter,
    opts: &Options,
    mut on_case: impl FnMut(&Case),
) -> Vec<Case> {
    let mut cases = Vec::new();
    for spec in plan(scenarios) {
        if !filter.selects(&spec.id) {
            continue;
        }
        let case = run_case(producer, consumer, &scenarios[spec.scenario], &spec, opts);
        on_case(&case);
        cases.push(case);
    }
    cases
}

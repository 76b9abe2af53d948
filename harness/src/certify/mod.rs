//! Producer certification: the harness plays an instrumented consumer and
//! judges, rule by rule (`arrowcert rules`), what a producer exports.
//!
//! Every case poisons each out-structure before the producer fills it
//! (reserved bytes included), validates the result in full
//! ([`crate::inspect::validate`]), moves structures bitwise to other
//! addresses and poisons the old bytes before releasing them, moves a child
//! out before releasing its parent, checks that every release marks its
//! structure released, calls stream callbacks from other threads, keeps a
//! stream's results past the stream's release, and compares the values
//! with what was asked for.

#![forbid(unsafe_code)]

pub mod asynchronous;
mod case_id;
pub mod checks;
pub mod consumer;
pub mod crash;
pub mod device;
pub mod leaks;
pub mod summary;
pub mod table_slice;

pub use case_id::scenario_of;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use crate::device::Kind as DeviceKind;
use crate::inspect::Violation;
use crate::plugin::{CallError, Plugin};
use crate::report::{Case, RuleViolation, Verdict};
use crate::rules;
use crate::scenario::Scenario;

/// The interface paths a producer is certified on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Path {
    /// `arrowcert_produce_schema` alone.
    Schema,
    /// `ArrowArray`, one record batch (whole or sliced).
    Array,
    /// `ArrowDeviceArray`, one record batch (whole or sliced).
    DeviceArray,
    /// `ArrowArrayStream`, every batch.
    Stream,
    /// `ArrowDeviceArrayStream`, every batch.
    DeviceStream,
    /// A consumer case: the harness exports, the plugin consumes.
    Consumer(consumer::Kind),
    /// An async device stream from the producer, into the harness's
    /// handler playing this schedule.
    Async(crate::asynchronous::schedule::Schedule),
    /// An async device stream from the harness's producer, delivered this
    /// way, into the consumer.
    AsyncConsumer(crate::asynchronous::schedule::Delivery),
}

impl Path {
    pub const ALL: [Path; 5] = [
        Path::Schema,
        Path::Array,
        Path::DeviceArray,
        Path::Stream,
        Path::DeviceStream,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Path::Schema => "schema",
            Path::Array => "array",
            Path::DeviceArray => "device_array",
            Path::Stream => "stream",
            Path::DeviceStream => "device_stream",
            Path::Consumer(k) => k.path_name(),
            Path::Async(_) => "async",
            Path::AsyncConsumer(_) => "consume_async",
        }
    }

    fn per_batch(self) -> bool {
        matches!(self, Path::Array | Path::DeviceArray)
    }
}

/// One planned certification case.
pub type CaseSpec = crate::roundtrip::CaseSpec<Path>;

/// Which sides of the interface a run certifies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sides {
    pub producer: bool,
    pub consumer: bool,
}

/// Every case for these scenarios and sides, in a stable order: producer
/// cases (`producer/<path>/<scenario>[/batch:<i>[/slice:<offset>+<length>]]`;
/// on the stream paths `producer/<path>/<scenario>[/slice:<offset>+<length>]`,
/// a slice of the whole stream: [`table_slice`]),
/// then consumer cases ([`consumer::plan`]).
///
/// Async cases (`producer/async/<schedule>/<scenario>`,
/// `consumer/async/<delivery>/<scenario>`) draw their schedules from
/// `seed` for generated scenarios.
pub fn plan(scenarios: &[Scenario], sides: Sides, seed: u64) -> Vec<CaseSpec> {
    let mut out = if sides.producer {
        producer_plan(scenarios, &Path::ALL, DeviceKind::Cpu)
    } else {
        Vec::new()
    };
    if sides.producer {
        out.extend(asynchronous::producer_plan(scenarios, seed));
    }
    if sides.consumer {
        out.extend(consumer::plan(scenarios));
        out.extend(asynchronous::consumer_plan(scenarios, seed));
    }
    // The device paths again on every other device type, whether or not
    // this machine or the plugin has it: a run selects the devices it
    // covers (`--device`), and a case on a device that is missing is
    // skipped with the reason.
    for kind in DeviceKind::ALL
        .into_iter()
        .filter(|&k| k != DeviceKind::Cpu)
    {
        if sides.producer {
            out.extend(producer_plan(
                scenarios,
                &[Path::DeviceArray, Path::DeviceStream],
                kind,
            ));
        }
        if sides.consumer {
            out.extend(consumer::device_plan(scenarios, kind));
        }
    }
    out
}

/// `producer/` or `consumer/`, then `device:<kind>/` off the CPU.
pub(crate) fn id_prefix(side: &str, device: DeviceKind) -> String {
    match device {
        DeviceKind::Cpu => format!("{side}/"),
        k => format!("{side}/device:{k}/"),
    }
}

/// The case `id` names: from `plan` when it is there, else an async case
/// whose schedule the ID spells out (a replay of a shrunk schedule), else a
/// single-variation consumer case (`certify --all-variations` plans more of
/// them than the default plan a worker makes).
pub fn spec_for(plan: &[CaseSpec], scenarios: &[Scenario], id: &str) -> Option<CaseSpec> {
    plan.iter()
        .find(|s| s.id == id)
        .cloned()
        .or_else(|| asynchronous::spec_from_id(scenarios, id))
        .or_else(|| consumer::spec_from_id(scenarios, id))
}

fn producer_plan(scenarios: &[Scenario], paths: &[Path], device: DeviceKind) -> Vec<CaseSpec> {
    let mut out = Vec::new();
    for (si, s) in scenarios.iter().enumerate() {
        for &path in paths {
            let base = format!(
                "{}{}/{}",
                id_prefix("producer", device),
                path.name(),
                s.name
            );
            if path.per_batch() {
                out.extend(
                    crate::roundtrip::batch_cases(&base, s).map(|(bi, slice, id)| CaseSpec {
                        path,
                        scenario: si,
                        batch: Some(bi),
                        slice,
                        id,
                        device,
                    }),
                );
            } else {
                // The stream paths: the whole stream, then slices of it.
                let slices = match path {
                    Path::Stream | Path::DeviceStream => table_slice::planned(s),
                    _ => Vec::new(),
                };
                out.push(CaseSpec {
                    path,
                    scenario: si,
                    batch: None,
                    slice: None,
                    id: base.clone(),
                    device,
                });
                out.extend(slices.into_iter().map(|(o, l)| CaseSpec {
                    path,
                    scenario: si,
                    batch: None,
                    slice: Some((o, l)),
                    id: format!("{base}/slice:{o}+{l}"),
                    device,
                }));
            }
        }
    }
    out
}

/// How certification cases run.
#[derive(Debug, Clone)]
pub struct Options {
    pub device_type: crate::abi::ArrowDeviceType,
    pub device_id: i64,
    /// The device the case runs on (`device_type` and `device_id` are its).
    pub kind: DeviceKind,
    /// The command line that reruns one case when the case ID is appended.
    pub replay_prefix: String,
    /// The slice of the whole stream a stream path's case asks for, as the
    /// sliced entry points take it (offset, length; -1: to the end);
    /// `None`: the whole stream ([`table_slice`]).
    pub slice: Option<(i64, i64)>,
    /// `--all-leaks`: the `*.release.frees` rules measured on every
    /// scenario, not the covering choice ([`leaks::measured`]).
    pub all_leaks: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            device_type: crate::abi::device::CPU,
            device_id: -1,
            kind: DeviceKind::Cpu,
            replay_prefix: "arrowcert certify --exact".into(),
            slice: None,
            all_leaks: false,
        }
    }
}

impl Options {
    /// These options for a case on `kind`.
    pub fn on(&self, kind: DeviceKind) -> Options {
        Options {
            device_type: kind.device_type(),
            device_id: kind.device_id(),
            kind,
            replay_prefix: self.replay_prefix.clone(),
            slice: self.slice,
            all_leaks: self.all_leaks,
        }
    }
}

/// What a case observed: the rules it exercised and the ones it saw broken.
#[derive(Debug, Default)]
pub struct Observations {
    pub checked: BTreeSet<&'static str>,
    pub violations: Vec<Violation>,
    /// Rules the case could not exercise, with the reason (first one kept).
    pub not_exercised: BTreeMap<&'static str, String>,
    /// What an independent view of what the consumer read showed
    /// (consumer::judge_view), for the report.
    pub view: Option<String>,
}

impl Observations {
    /// Records that `rule` was exercised, and broken unless `ok`.
    pub fn check(
        &mut self,
        rule: &'static str,
        ok: bool,
        at: &str,
        evidence: impl FnOnce() -> String,
    ) {
        debug_assert!(
            rules::find(rule).is_some(),
            "{rule} is not in the catalogue"
        );
        self.checked.insert(rule);
        if !ok {
            self.violations.push(Violation {
                rule,
                at: at.to_string(),
                message: evidence(),
            });
        }
    }

    /// Records that `rule` could not be exercised, and why. It is neither
    /// checked nor passed.
    pub fn not_exercised(&mut self, rule: &'static str, reason: impl Into<String>) {
        debug_assert!(
            rules::find(rule).is_some(),
            "{rule} is not in the catalogue"
        );
        self.not_exercised
            .entry(rule)
            .or_insert_with(|| reason.into());
    }

    /// Records a validation pass: every rule in `exercised` was checked;
    /// `found` are the ones broken.
    pub fn validated(&mut self, exercised: &[&'static str], found: Vec<Violation>, prefix: &str) {
        self.checked.extend(exercised.iter().copied());
        self.violations.extend(found.into_iter().map(|mut v| {
            if !prefix.is_empty() {
                v.at = format!("{prefix} {}", v.at);
            }
            v
        }));
    }

    /// True when a MUST rule is broken (the case fails).
    pub fn any_must(&self) -> bool {
        self.violations.iter().any(|v| rules::is_must(v.rule))
    }

    /// True when nothing at all is broken so far.
    pub fn clean(&self) -> bool {
        self.violations.is_empty()
    }
}

/// How a case ended before its observations are judged.
pub enum Ended {
    /// Every step ran.
    Ran,
    /// The producer declined the entry point (not exported, or ENOSYS).
    Skip(String),
    /// A call failed, so the remaining steps could not run.
    Error(String),
    /// The consumer declined the input cleanly, as the spec permits
    /// ("Consumers MAY decide not to support all data types", non-zero
    /// offsets, unaligned memory): its own words.
    Limitation(String),
}

/// How the message of a case a producer declined (its data: a type it
/// cannot hold) begins: a skip, not a verdict on the library.
pub const PRODUCER_DECLINED: &str = "the producer does not support this: ";

/// How the message of a stream-error case begins when the consumer declined
/// the data (ENOSYS) before the injected failure could matter: a skip, and
/// a refusal in the coverage table.
pub const CONSUMER_DECLINED: &str = "the consumer does not support this: ";

pub(crate) fn call_ended(e: CallError) -> Ended {
    match e {
        CallError::Missing(_) => Ended::Skip(e.to_string()),
        _ if e.declined() => Ended::Skip(format!("{PRODUCER_DECLINED}{e}")),
        CallError::Failed { .. } => Ended::Error(e.to_string()),
    }
}

/// The report entry of a case before it runs (what a crash reports).
pub fn record(scenario: &Scenario, spec: &CaseSpec, opts: &Options) -> Case {
    crate::roundtrip::not_run(
        &spec.id,
        spec.path.name(),
        scenario,
        spec.batch,
        spec.slice,
        &opts.replay_prefix,
    )
}

/// The plugins a run certifies.
#[derive(Clone, Copy)]
pub struct Plugins<'a> {
    pub producer: Option<&'a Plugin>,
    pub consumer: Option<&'a Plugin>,
}

/// Runs one certification case: a producer case against the producer, a
/// consumer case against the consumer.
pub fn run_case(plugins: Plugins, scenario: &Scenario, spec: &CaseSpec, opts: &Options) -> Case {
    let start = Instant::now();
    let mut obs = Observations::default();
    let mut opts = opts.on(spec.device);
    // A slice of the whole stream: the producer is given the whole stream
    // and asked for the slice; what it gives is judged against these rows.
    let sliced = table_slice::of(spec).map(|slice| {
        opts.slice = Some(table_slice::call_args(scenario, slice));
        table_slice::expected(scenario, slice)
    });
    let opts = &opts;
    let ended = match device_missing(plugins, spec) {
        Some(why) => Ended::Skip(why),
        None => run_path(
            plugins,
            sliced.as_ref().unwrap_or(scenario),
            spec,
            opts,
            &mut obs,
        ),
    };
    judged(scenario, spec, opts, obs, ended, start)
}

/// Why a case on a device other than the CPU cannot run here: the machine
/// has no such device, or the plugin does not claim it.
fn device_missing(plugins: Plugins, spec: &CaseSpec) -> Option<String> {
    let kind = spec.device;
    if kind == DeviceKind::Cpu {
        return None;
    }
    if let Err(why) = crate::device::available(kind) {
        return Some(crate::device::missing(kind, &why));
    }
    let (role, plugin) = match spec.path {
        Path::Consumer(_) | Path::AsyncConsumer(_) => ("consumer", plugins.consumer),
        _ => ("producer", plugins.producer),
    };
    let dt = kind.device_type();
    match plugin {
        Some(p) if !p.supports_device(dt) => Some(format!(
            "the {role} does not support {} ({dt}): arrowcert_plugin_supports_device({dt}) is not 1",
            crate::abi::device::name(dt).unwrap_or("?")
        )),
        _ => None,
    }
}

fn run_path(
    plugins: Plugins,
    scenario: &Scenario,
    spec: &CaseSpec,
    opts: &Options,
    obs: &mut Observations,
) -> Ended {
    match (spec.path, plugins.producer, plugins.consumer) {
        (Path::Consumer(kind), _, Some(consumer)) => {
            consumer::run(consumer, scenario, spec, kind, obs)
        }
        (Path::AsyncConsumer(d), _, Some(consumer)) => {
            asynchronous::run_consumer(consumer, scenario, spec, d, obs)
        }
        (Path::Consumer(_) | Path::AsyncConsumer(_), _, None) => {
            Ended::Error("no consumer to run a consumer case".into())
        }
        (Path::Async(sched), Some(producer), _) => {
            asynchronous::run_producer(producer, scenario, spec, sched, opts, obs)
        }
        (_, Some(producer), _) => checks::run(producer, scenario, spec, opts, obs),
        (_, None, _) => Ended::Error("no producer to run a producer case".into()),
    }
}

/// The report entry of a case that ran (or was skipped).
pub(crate) fn judged(
    scenario: &Scenario,
    spec: &CaseSpec,
    opts: &Options,
    obs: Observations,
    ended: Ended,
    start: Instant,
) -> Case {
    let violations: Vec<RuleViolation> = obs
        .violations
        .iter()
        .map(|v| RuleViolation {
            rule: v.rule.to_string(),
            level: rules::find(v.rule)
                .map(|r| r.level.to_string())
                .unwrap_or_else(|| "MUST".into()),
            at: v.at.clone(),
            evidence: crate::report::bounded(&v.message, 4096),
        })
        .collect();
    let (verdict, message) = match ended {
        _ if obs.any_must() => (
            Verdict::Fail,
            Some(format!(
                "{} rule(s) broken: {}",
                violations.len(),
                violations
                    .iter()
                    .map(|v| v.rule.as_str())
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        ),
        // A SHOULD or INFO finding beside a skip, an error or a
        // limitation is recorded (violations) without making the case a
        // pass: nothing was exercised to a verdict.
        Ended::Skip(why) => (Verdict::Skip, Some(why)),
        Ended::Error(why) => (Verdict::Error, Some(why)),
        Ended::Limitation(why) => (Verdict::Limitation, Some(why)),
        Ended::Ran => (Verdict::Pass, None),
    };
    Case {
        verdict,
        message,
        differences: violations
            .iter()
            .take(20)
            .map(|v| format!("{} at {}: {}", v.rule, v.at, v.evidence))
            .collect(),
        duration_us: start.elapsed().as_micros() as u64,
        checked: obs.checked.iter().map(|r| r.to_string()).collect(),
        not_exercised: obs
            .not_exercised
            .iter()
            .filter(|(r, _)| !obs.checked.contains(*r))
            .map(|(r, why)| crate::report::NotExercised {
                rule: r.to_string(),
                reason: why.clone(),
            })
            .collect(),
        view: obs.view.clone(),
        violations,
        ..record(scenario, spec, opts)
    }
}

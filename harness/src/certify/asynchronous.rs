//! Async device stream cases, both sides.
//!
//! Producer side (`producer/async/<schedule>/<scenario>`): the harness
//! hands an instrumented handler ([`crate::asynchronous::handler`]) to the
//! producer and plays the consumer schedule in the ID. The trace is judged
//! by the protocol model ([`crate::asynchronous::model`]); what callbacks
//! saw on the spot (the producer structure, metadata) comes as notes; every
//! extracted array goes through the device and array checks of a produced
//! device array and is compared with the data (`async.array.valid`, the
//! evidence naming the underlying rule).
//!
//! Consumer side (`consumer/async/<delivery>/<scenario>`): the harness is
//! the producer ([`crate::export::asynchronous`]) and judges the
//! `consumer.async.*` rules, the release rules of everything it handed
//! over, and what the consumer read.
//!
//! A case whose stream does not end by the deadline is a verdict with the
//! state it was stuck in, never a hang.

#![forbid(unsafe_code)]

use std::time::Duration;

use super::{CaseSpec, Ended, Observations, Options, Path};
use crate::asynchronous::handler::{self, Run};
use crate::asynchronous::model::{self, Ending, Event};
use crate::asynchronous::schedule::{CancelHow, Delivery, Extract, First, Rng, Schedule};
use crate::asynchronous::schedule::{End, Late};
use crate::inspect::probe;
use crate::plugin::Plugin;
use crate::scenario::Scenario;

/// Generated schedules per generated scenario (built-in and gold scenarios
/// get the fixed ones).
pub const DRAWN_PER_SCENARIO: usize = 2;

/// The fixed schedule whose stream is repeated to measure
/// `async.task.extract-null` (every task extracted with NULL).
pub const LEAK_SCHEDULE: &str = "rmax,extract-null";

/// The consumer-side delivery whose stream is repeated to measure the
/// bytes a consumer keeps per stream (`consumer.async.release-frees`).
pub const LEAK_DELIVERY: &str = "one-thread";

/// How long a stream may take before it is a stuck verdict.
pub const DEADLINE: Duration = Duration::from_secs(3);

/// The scenarios the invalid-request schedules (`r0`, `r-1`) run on. What
/// they check, the producer's answer to `request(n <= 0)` ("If n is <= 0,
/// the producer should error via on_error"), does not depend on the data;
/// a producer that never answers makes each such case wait out
/// [`DEADLINE`], so they run on a few built-in scenarios (one with
/// batches of every common kind, one nested, one with no batches) rather
/// than on every gold file. Generated scenarios still draw them now and
/// then.
pub const INVALID_REQUEST_SCENARIOS: [&str; 3] = ["primitive", "nested", "no_batches"];

fn generated(s: &Scenario) -> bool {
    s.name.starts_with(crate::generate::PREFIX)
}

/// The producer-side async cases: the fixed schedules for built-in and
/// gold scenarios, [`DRAWN_PER_SCENARIO`] drawn ones for generated ones
/// (from `seed` and the scenario's name).
pub fn producer_plan(scenarios: &[Scenario], seed: u64) -> Vec<CaseSpec> {
    let mut out = Vec::new();
    for (si, s) in scenarios.iter().enumerate() {
        let schedules: Vec<Schedule> = if generated(s) {
            let mut rng = Rng::for_case(seed, &s.name);
            (0..DRAWN_PER_SCENARIO)
                .map(|_| Schedule::draw(&mut rng))
                .collect()
        } else {
            let invalid_too = INVALID_REQUEST_SCENARIOS.contains(&s.name.as_str());
            Schedule::fixed()
                .into_iter()
                .filter(|sched| invalid_too || !matches!(sched.first, First::Invalid(_)))
                .collect()
        };
        let mut seen: Vec<Schedule> = Vec::new();
        for sched in schedules {
            // Two draws of the same schedule are the same case (one ID).
            if seen.contains(&sched) {
                continue;
            }
            seen.push(sched);
            out.push(CaseSpec {
                path: Path::Async(sched),
                scenario: si,
                batch: None,
                slice: None,
                id: format!("producer/async/{sched}/{}", s.name),
                device: crate::device::Kind::Cpu,
            });
        }
        // Slices of the whole stream (table_slice), under one plain
        // schedule: what the slice gives is judged, not the schedule again.
        let plain: Schedule = "r4".parse().expect("a fixed schedule parses");
        for (o, l) in super::table_slice::planned(s) {
            out.push(CaseSpec {
                path: Path::Async(plain),
                scenario: si,
                batch: None,
                slice: Some((o, l)),
                id: format!("producer/async/{plain}/{}/slice:{o}+{l}", s.name),
                device: crate::device::Kind::Cpu,
            });
        }
    }
    out
}

/// The consumer-side async cases, planned like the producer side.
pub fn consumer_plan(scenarios: &[Scenario], seed: u64) -> Vec<CaseSpec> {
    let mut out = Vec::new();
    for (si, s) in scenarios.iter().enumerate() {
        let deliveries = if generated(s) {
            let mut rng = Rng::for_case(seed ^ 0x5eed, &s.name);
            (0..DRAWN_PER_SCENARIO)
                .map(|_| Delivery::draw(&mut rng))
                .collect()
        } else {
            Delivery::fixed()
        };
        let mut seen: Vec<Delivery> = Vec::new();
        for d in deliveries {
            // Two draws of the same delivery are the same case (one ID):
            // it runs once.
            if seen.contains(&d) {
                continue;
            }
            seen.push(d);
            out.push(CaseSpec {
                path: Path::AsyncConsumer(d),
                scenario: si,
                batch: None,
                slice: None,
                id: format!("consumer/async/{d}/{}", s.name),
                device: crate::device::Kind::Cpu,
            });
        }
    }
    out
}

/// The case an async ID names (`producer/async/<schedule>/<scenario>` or
/// `consumer/async/<delivery>/<scenario>`), if the scenario is loaded:
/// replays and shrunk schedules need not be in the plan.
pub fn spec_from_id(scenarios: &[Scenario], id: &str) -> Option<CaseSpec> {
    let (producer, rest) = match id.strip_prefix("producer/async/") {
        Some(rest) => (true, rest),
        None => (false, id.strip_prefix("consumer/async/")?),
    };
    let (sched, name) = rest.split_once('/')?;
    let si = scenarios.iter().position(|s| s.name == name)?;
    let path = if producer {
        Path::Async(sched.parse().ok()?)
    } else {
        Path::AsyncConsumer(sched.parse().ok()?)
    };
    Some(CaseSpec {
        path,
        scenario: si,
        batch: None,
        slice: None,
        id: id.to_string(),
        device: crate::device::Kind::Cpu,
    })
}

/// The rules a producer-side case exercises under `s` (the ones it can
/// fail are all of these; the ones it cannot reach are not counted).
fn exercised(s: &Schedule) -> Vec<&'static str> {
    let mut r = vec![
        crate::rule!("async.schema.first"),
        crate::rule!("async.producer.ready"),
        crate::rule!("async.producer.device-type"),
        crate::rule!("async.callbacks.serial"),
        crate::rule!("async.callbacks.serialized"),
        crate::rule!("async.release.last"),
        crate::rule!("async.metadata.encoding"),
    ];
    match s.first {
        First::Refuse => r.push(crate::rule!("async.schema-refused")),
        // An invalid request is answered with on_error (async.request.invalid),
        // after which only release should come.
        First::Invalid(_) => r.extend([
            crate::rule!("async.request.invalid"),
            crate::rule!("async.request.reentrant"),
            crate::rule!("async.error.release-next"),
        ]),
        First::Request(_) => {
            r.extend([
                crate::rule!("async.request.reentrant"),
                crate::rule!("async.backpressure"),
                crate::rule!("async.array.valid"),
            ]);
            if s.cancel.is_none() && s.refuse_task.is_none() {
                r.push(crate::rule!("async.eos.null-task"));
            }
            if s.refuse_task.is_some() {
                r.push(crate::rule!("async.task-refused"));
            }
            if let Some(c) = s.cancel {
                r.extend([
                    crate::rule!("async.cancel.no-error"),
                    crate::rule!("async.cancel.error-after"),
                    crate::rule!("async.cancel.reentrant"),
                ]);
                if matches!(c.how, CancelHow::Twice | CancelHow::Race) {
                    r.push(crate::rule!("async.cancel.idempotent"));
                }
                if s.request_after_cancel.is_some() {
                    r.push(crate::rule!("async.cancel.request-nop"));
                }
            }
        }
    }
    r
}

/// Runs a producer-side async case.
pub fn run_producer(
    producer: &Plugin,
    scenario: &Scenario,
    spec: &CaseSpec,
    sched: Schedule,
    opts: &Options,
    obs: &mut Observations,
) -> Ended {
    let mut run_opts = handler::Options::new(sched, opts.device_type, opts.device_id);
    run_opts.deadline = DEADLINE;
    run_opts.slice = opts.slice;
    let run = match handler::run(producer, &scenario.ipc, run_opts) {
        Ok(r) => r,
        Err(e) => return super::call_ended(e),
    };
    let mut found = Vec::new();
    // Where the second cancel entered the trace: only what broke after it
    // can be the repeated cancel's doing.
    let second_cancel = run
        .trace
        .iter()
        .enumerate()
        .filter(|(_, e)| matches!(e, Event::Cancel))
        .nth(1)
        .map(|(i, _)| i);
    let extract_failed = run.extract_failed.is_some();
    let ended = judge_run(run, scenario, &sched, opts, &mut found);
    let after_second_cancel = second_cancel.is_some_and(|c| {
        found.iter().all(|(_, at, _)| {
            at.strip_prefix('#')
                .and_then(|r| r.split(' ').next())
                .and_then(|i| i.parse::<usize>().ok())
                .is_some_and(|i| i > c)
        })
    });
    // Several cancels broke something: if one cancel does not, the
    // difference is the repeated cancel ("After calling it once,
    // subsequent calls *MUST* be a NOP").
    if !found.is_empty() && after_second_cancel {
        if let Some(single) = sched.with_single_cancel() {
            let mut again = Vec::new();
            let rerun = handler::run(
                producer,
                &scenario.ipc,
                handler::Options {
                    schedule: single,
                    ..run_opts
                },
            );
            if let Ok(r) = rerun {
                let _ = judge_run(r, scenario, &single, opts, &mut again);
                if again.is_empty() {
                    let what = found
                        .iter()
                        .map(|(r, at, m)| format!("{r} at {at}: {m}"))
                        .collect::<Vec<_>>()
                        .join("; ");
                    found = vec![(
                        crate::rule!("async.cancel.idempotent"),
                        "cancel".to_string(),
                        format!(
                            "with cancel called more than once ({}) the stream broke: {what}; with one cancel (`{single}`) it did not",
                            spec.id
                        ),
                    )];
                }
            }
        }
    }
    for rule in exercised(&sched) {
        obs.check(rule, true, "", String::new);
    }
    // Judged only where an extraction failed.
    if extract_failed {
        obs.check(
            crate::rule!("async.extract.error-follows"),
            true,
            "",
            String::new,
        );
    }
    for (rule, at, message) in found {
        obs.check(rule, false, &at, || message);
    }
    if sched.to_string() == LEAK_SCHEDULE {
        extract_null_leaks(producer, scenario, run_opts, obs);
    }
    ended
}

type Found = Vec<(&'static str, String, String)>;

/// Judges one run; returns how the case ended.
fn judge_run(
    run: Run,
    scenario: &Scenario,
    sched: &Schedule,
    opts: &Options,
    found: &mut Found,
) -> Ended {
    let Run {
        trace,
        released,
        schema,
        arrays,
        notes,
        error,
        stuck,
        extract_failed,
    } = run;
    // An on_error after a cancel whose message says it reports the
    // cancellation is the cancel resulting in on_error ("Successful
    // cancelling MUST NOT result in a producer calling on_error"), whatever
    // its code; the model sees codes only.
    let error_text = error
        .as_ref()
        .and_then(|(_, t)| t.clone())
        .unwrap_or_default();
    let says_cancelled = error_text.to_lowercase().contains("cancel");
    for f in model::judge(
        &trace,
        Ending {
            released,
            deadline_ms: DEADLINE.as_millis() as u64,
        },
    ) {
        if f.rule == crate::rule!("async.cancel.error-after") && says_cancelled {
            found.push((
                crate::rule!("async.cancel.no-error"),
                f.at,
                format!(
                    "{}, and its message reports the cancel itself: {error_text:?}",
                    f.message
                ),
            ));
        } else {
            found.push((f.rule, f.at, f.message));
        }
    }
    for n in notes {
        found.push((n.rule, n.at, n.message));
    }
    let mut arrays = arrays;
    arrays.sort_by_key(|a| a.index);
    if let Some(schema) = &schema {
        let bad = probe::check_schema(schema);
        let schema_ok = !bad.iter().any(|v| crate::rules::is_must(v.rule));
        for v in bad {
            found.push(carried(v.rule, format!("schema {}", v.at), v.message));
        }
        // A failed extraction leaves the stream short: nothing to compare.
        if schema_ok && extract_failed.is_none() {
            check_arrays(schema, &mut arrays, scenario, sched, &trace, opts, found);
        }
    }
    // Keep one finding per rule (the first), like the model does.
    let mut seen = std::collections::BTreeSet::new();
    found.retain(|(r, _, _)| seen.insert(*r));
    match (stuck, extract_failed) {
        (Some(why), _) => Ended::Error(why),
        (None, Some((index, rc))) => Ended::Error(format!(
            "extract_data failed with {rc} for task {index}: the producer did not produce the data asked for{}",
            match &error {
                Some((code, text)) => format!(" (on_error {code}: {})", text.as_deref().unwrap_or("")),
                None => String::new(),
            }
        )),
        (None, None) => Ended::Ran,
    }
}

/// Device members, validity and values of every extracted array.
fn check_arrays(
    schema: &crate::abi::ArrowSchema,
    arrays: &mut [handler::Extracted],
    scenario: &Scenario,
    sched: &Schedule,
    trace: &[Event],
    opts: &Options,
    found: &mut Found,
) {
    let mut read = Vec::new();
    let mut contiguous = true;
    // A task arrow-rs could not read for names or metadata that are not
    // UTF-8: the values are not judged (as on every other path).
    let mut unreadable = false;
    for (i, x) in arrays.iter_mut().enumerate() {
        let at = format!("task {}", x.index);
        let mut sub = Observations::default();
        let bad = probe::check_array(schema, &x.array.array);
        // Only a MUST finding keeps the array from being read (a
        // misaligned buffer, SHOULD, does not stop the values check).
        let valid = !bad.iter().any(|v| crate::rules::is_must(v.rule));
        // Async chunks, like a device stream's, "should all be providing
        // data on the same device type (but not necessarily the same
        // device id)": the id is not judged here.
        super::checks::device_members(&x.array, opts, super::checks::DeviceId::Any, &at, &mut sub);
        for v in sub.violations.into_iter().chain(bad) {
            found.push(carried(v.rule, format!("{at} {}", v.at), v.message));
        }
        contiguous &= x.index == i;
        if valid && contiguous {
            let mut array = crate::abi::ops::Guard::new(crate::abi::ops::take(&mut x.array.array));
            crate::abi::ops::Owned::mark_released(&mut *x.array);
            match probe::import_batch(schema, &mut array) {
                Ok(b) => read.push(b),
                // arrow-rs cannot read names or metadata that are not
                // UTF-8 (reported at their own level): values not judged.
                Err(_)
                    if found
                        .iter()
                        .any(|(r, _, _)| crate::inspect::UNREADABLE_BY_ARROW_RS.contains(r)) =>
                {
                    contiguous = false;
                    unreadable = true;
                }
                Err(e) => {
                    found.push((
                        crate::rule!("async.array.valid"),
                        at,
                        format!("{}: {e}", crate::rule!("array.values.roundtrip")),
                    ));
                    contiguous = false;
                }
            }
        }
    }
    if unreadable {
        return;
    }
    // Values: the rows read, in task order, are the scenario's first rows;
    // all of them when the stream ran to its end with every task read.
    let whole = sched.extract == Extract::Array
        && sched.cancel.is_none()
        && sched.refuse_task.is_none()
        && matches!(sched.first, First::Request(_))
        && trace
            .iter()
            .any(|e| matches!(e, Event::Callback(c) if c.callback == model::Callback::EndOfStream));
    let rows: usize = read.iter().map(|b| b.num_rows()).sum();
    let total: usize = scenario.batches.iter().map(|b| b.num_rows()).sum();
    let expect = match prefix(&scenario.batches, if whole { total } else { rows }) {
        Some(e) => e,
        None => {
            found.push((
                crate::rule!("async.array.valid"),
                "values".into(),
                format!(
                    "{}: the tasks delivered {rows} rows, the data has {total}",
                    crate::rule!("array.values.roundtrip")
                ),
            ));
            return;
        }
    };
    // The same tiers as every other path (checks::value_tiers): values
    // lost fail; every value right but names, metadata, nullability or
    // type flavours changed is array.values.types, INFO.
    match super::checks::value_tiers(scenario, &expect, &read) {
        None => {}
        Some((r, shown)) if r == crate::rule!("array.values.types") => {
            found.push((crate::rule!("array.values.types"), "values".into(), shown));
        }
        Some((rule, shown)) => found.push((
            crate::rule!("async.array.valid"),
            "values".into(),
            format!("{rule}: {shown}"),
        )),
    }
}

/// A finding of the array, device or schema checks on an async path, at
/// its own level: a MUST finding is `async.array.valid` ("Mandatory. A
/// callback to populate the provided ArrowDeviceArray with the available
/// data": data that breaks a MUST rule is not that), naming the rule it
/// broke; a SHOULD or INFO finding stays under its own rule, so an async
/// path never judges more strictly than the array path does.
fn carried(rule: &'static str, at: String, message: String) -> (&'static str, String, String) {
    if crate::rules::is_must(rule) {
        (
            crate::rule!("async.array.valid"),
            at,
            format!("{rule}: {message}"),
        )
    } else {
        (rule, at, message)
    }
}

/// The first `rows` rows of `batches`, split as they are.
fn prefix(
    batches: &[arrow_array::RecordBatch],
    rows: usize,
) -> Option<Vec<arrow_array::RecordBatch>> {
    let mut left = rows;
    let mut out = Vec::new();
    for b in batches {
        if left == 0 {
            break;
        }
        let n = b.num_rows().min(left);
        out.push(b.slice(0, n));
        left -= n;
    }
    (left == 0).then_some(out)
}

/// `async.task.extract-null`: the whole stream, every task extracted with
/// NULL, repeated; the bytes held must not grow with the repetitions.
fn extract_null_leaks(
    producer: &Plugin,
    scenario: &Scenario,
    run_opts: handler::Options,
    obs: &mut Observations,
) {
    let rule = crate::rule!("async.task.extract-null");
    if scenario.batches.is_empty() {
        return;
    }
    let counters = super::leaks::counters(producer);
    if counters.is_empty() {
        obs.not_exercised(rule, super::leaks::NO_COUNTER);
        obs.not_exercised(
            crate::rule!("array.release.cache"),
            super::leaks::NO_COUNTER,
        );
        return;
    }
    let body = || -> Result<(), String> {
        let r = handler::run(producer, &scenario.ipc, run_opts).map_err(|e| e.to_string())?;
        // Only a stream that ended by the rules is measured: a broken one
        // leaves the harness's handler leaked on purpose.
        let ok = r.released
            && r.stuck.is_none()
            && r.notes.is_empty()
            && model::judge(
                &r.trace,
                Ending {
                    released: true,
                    deadline_ms: 0,
                },
            )
            .is_empty();
        drop(r);
        settle();
        if ok {
            Ok(())
        } else {
            Err("the stream broke other async rules, which leaves harness memory behind".into())
        }
    };
    match super::leaks::measure(&counters, body) {
        Ok(m) => {
            let sequence = "a stream whose every task is extracted with NULL";
            obs.check(rule, !m.leaks(), "extract_data(task, NULL)", || {
                m.evidence(sequence)
            });
            super::checks::cache_info(
                &m,
                crate::rule!("array.release.cache"),
                "extract_data(task, NULL)",
                sequence,
                obs,
            );
        }
        Err(why) => obs.not_exercised(rule, format!("the repeated stream did not complete: {why}")),
    }
}

/// Waits until the tracker's count stops moving: the other side may free
/// its last bytes on its own thread just after the handler's release.
fn settle() {
    let mut last = crate::plugin::tracker::live_bytes();
    for _ in 0..50 {
        std::thread::sleep(Duration::from_millis(2));
        let now = crate::plugin::tracker::live_bytes();
        if now == last {
            break;
        }
        last = now;
    }
}

/// `consumer.async.release-frees`: the whole stream into the consumer
/// (start, every task, the handler's release, finish), repeated; the bytes
/// held in this process must not grow with the repetitions (the method and
/// the margins of the producers' frees rules: [`super::leaks`]). A clean
/// run of the harness's own producer leaves nothing in malloc'd memory
/// ([`crate::export::asynchronous::ConsumerRun::end`]), so growth is the
/// consumer's: what its handler held and its release did not free, or
/// anything else it keeps per stream.
fn handler_frees(
    consumer: &Plugin,
    plan: &crate::export::asynchronous::AsyncPlan,
    obs: &mut Observations,
) {
    use crate::export::{asynchronous as producer, Ledger};
    let rule = crate::rule!("consumer.async.release-frees");
    if !crate::plugin::tracker::present() {
        let why = "nothing counts the bytes this process holds: the allocation tracker is not loaded (worker processes preload it unless ARROWCERT_TRACKER=off; --in-process runs have none)";
        obs.not_exercised(rule, why);
        obs.not_exercised(crate::rule!("consumer.async.release-cache"), why);
        return;
    }
    let counters = vec![super::leaks::Counter::new(
        super::leaks::TRACKER,
        crate::plugin::tracker::live_bytes,
    )];
    let body = || -> Result<(), String> {
        let ledger = Ledger::new(true);
        let run = producer::run_consumer(consumer, &ledger, plan.clone(), FINISH_TIMEOUT)
            .map_err(|e| e.to_string())?;
        let findings = ledger.finish();
        // Only a stream that ended by the rules is measured: a broken one
        // leaves the harness's memory behind on purpose.
        let ok = findings.violations.is_empty()
            && run.report.released
            && run.report.finished
            && matches!(run.result, Some(Ok(_)));
        run.end(ok);
        drop(findings);
        settle();
        if ok {
            Ok(())
        } else {
            Err("the repeated stream broke another rule or failed, which leaves harness memory behind".into())
        }
    };
    match super::leaks::measure(&counters, body) {
        Ok(m) => {
            let sequence = "a whole async stream into the consumer (its handler started, fed, released, finished)";
            obs.check(rule, !m.leaks(), "handler", || m.evidence(sequence));
            super::checks::cache_info(
                &m,
                crate::rule!("consumer.async.release-cache"),
                "handler",
                sequence,
                obs,
            );
        }
        Err(why) => obs.not_exercised(rule, format!("the repeated stream did not complete: {why}")),
    }
}

/// How long the harness's producer waits for a request before the stream
/// is a stall (the consumer's).
pub const STALL_AFTER: Duration = Duration::from_secs(2);

/// The timeout passed to the consumer's finish.
pub const FINISH_TIMEOUT: Duration = Duration::from_secs(6);

/// The rules every consumer-side async case exercises.
const CONSUMER_RULES: &[&str] = &[
    crate::rule!("consumer.async.request"),
    crate::rule!("consumer.async.request-positive"),
    crate::rule!("consumer.async.extract-once"),
    crate::rule!("consumer.async.task-scope"),
    crate::rule!("consumer.async.schema-moved"),
    crate::rule!("consumer.async.release-no-producer"),
    crate::rule!("consumer.async.producer-lifetime"),
    crate::rule!("consumer.async.release"),
    crate::rule!("consumer.release.not-released"),
    crate::rule!("consumer.release.no-children"),
    crate::rule!("consumer.data.immutable"),
];

/// Runs a consumer-side async case.
pub fn run_consumer(
    consumer: &Plugin,
    scenario: &Scenario,
    spec: &CaseSpec,
    d: Delivery,
    obs: &mut Observations,
) -> Ended {
    use crate::export::{asynchronous as producer, Ledger};
    if !consumer.consumes_async() {
        return Ended::Skip(
            "the consumer does not export arrowcert_consume_async_start and arrowcert_consume_async_finish".into(),
        );
    }
    let cancelling = matches!(d.end, End::Cancel(..));
    if cancelling && !consumer.cancels_async() {
        return Ended::Skip(
            "the consumer does not export the optional arrowcert_consume_async_cancel, through which the harness asks it to cancel".into(),
        );
    }
    let delivered = chunks(&scenario.batches, d.rows);
    let plan = match delivery_plan(scenario, spec, d, &delivered) {
        Ok(p) => p,
        Err(why) => return Ended::Error(format!("the harness cannot export this scenario: {why}")),
    };
    let leak_plan = (d.to_string() == LEAK_DELIVERY).then(|| plan.clone());
    let ledger = Ledger::new(true);
    let run = match producer::run_consumer(consumer, &ledger, plan, FINISH_TIMEOUT) {
        Ok(r) => r,
        Err(e) => return super::call_ended(e),
    };
    let findings = ledger.finish();
    let report = run.report.clone();
    judge_consumer_protocol(d, &findings, &report, obs);
    // Anything the consumer broke in the protocol explains what it then
    // read (or failed to): judge values only without such a finding.
    // (A MUST rule: a SHOULD finding, request(0) say, leaves the values
    // to judge.)
    let protocol_broken = obs
        .violations
        .iter()
        .any(|v| v.rule.starts_with("consumer.async.") && crate::rules::is_must(v.rule));
    if let End::Cancel(_, how) = d.end {
        return judge_after_cancel(how, &report, run, &findings, protocol_broken, obs);
    }
    let result = match &run.result {
        Some(r) => r.clone(),
        None => return finish_timed_out(&report, run),
    };
    let clean = findings.violations.is_empty() && report.released && report.finished;
    run.end(clean && !protocol_broken);
    if protocol_broken || report.refused.is_some() && report.stalled.is_some() {
        return Ended::Ran;
    }
    if let Some((code, message)) = &report.error_sent {
        judge_error_sent(*code, message, &result, obs);
        return Ended::Ran;
    }
    let expected: &[arrow_array::RecordBatch] = match d.end {
        crate::asynchronous::schedule::End::Empty => &[],
        _ => &delivered,
    };
    match result {
        Ok(bytes) => {
            if let Err(e) = crate::sdk::ipc::decode(&bytes) {
                obs.not_exercised(
                    crate::rule!("consumer.read.values"),
                    crate::roundtrip::UNDECODABLE,
                );
                return Ended::Error(format!("{}: {}", crate::roundtrip::UNDECODABLE, e.message));
            }
            super::consumer::differences((&scenario.schema, expected), &bytes).judge(obs);
            if let Some(plan) = leak_plan {
                handler_frees(consumer, &plan, obs);
            }
            Ended::Ran
        }
        Err(e @ crate::plugin::CallError::Missing(_)) => super::call_ended(e),
        // The same permission as on every other path: a clean refusal is
        // a limitation, never consumer.read.values.
        Err(e) => {
            obs.not_exercised(crate::rule!("consumer.read.values"), e.to_string());
            super::consumer::refusal(&e)
        }
    }
}

/// What the harness's async producer delivers to the consumer: the
/// scenario's schema and `delivered` chunks, encoded plainly or (a varied
/// delivery) in the encodings the case's ID seeds.
fn delivery_plan(
    scenario: &Scenario,
    spec: &CaseSpec,
    d: Delivery,
    delivered: &[arrow_array::RecordBatch],
) -> Result<crate::export::asynchronous::AsyncPlan, String> {
    use crate::export::{encode, Encoding};
    let enc = if d.varied {
        Encoding::Varied(super::consumer::seed_of(&spec.id))
    } else {
        Encoding::Plain
    };
    Ok(crate::export::asynchronous::AsyncPlan {
        schema: encode::schema(&scenario.schema, enc)?,
        chunks: delivered
            .iter()
            .enumerate()
            .map(|(i, b)| encode::batch(b, enc, i as u64 + 1))
            .collect::<Result<_, _>>()?,
        delivery: d,
        stall_after: STALL_AFTER,
    })
}

/// Judges the protocol of a consumer-side async run from what the
/// harness's producer saw: every rule the case exercises passes unless
/// the ledger or the run's report shows otherwise (a refusal's code, a
/// stall, a task never extracted).
fn judge_consumer_protocol(
    d: Delivery,
    findings: &crate::export::Findings,
    report: &crate::export::asynchronous::AsyncReport,
    obs: &mut Observations,
) {
    for r in CONSUMER_RULES {
        obs.check(r, true, "", String::new);
    }
    let erroring = matches!(d.end, End::Error(_));
    if erroring {
        obs.check(
            crate::rule!("consumer.async.on-error"),
            true,
            "",
            String::new,
        );
        obs.check(crate::rule!("consumer.async.copies"), true, "", String::new);
    }
    if matches!(d.end, End::Cancel(_, Late::Error)) {
        obs.check(
            crate::rule!("consumer.async.on-error"),
            true,
            "",
            String::new,
        );
    }
    for v in &findings.violations {
        obs.check(v.rule, false, &v.at, || v.message.clone());
    }
    // A consumer whose extraction or schema import failed because it
    // kept the harness's structure stops asking for more: that stall
    // follows from the finding already made.
    let kept_structure = findings.violations.iter().any(|v| {
        [
            crate::rule!("consumer.async.task-scope"),
            crate::rule!("consumer.async.schema-moved"),
        ]
        .contains(&v.rule)
    });
    // "If successful, the function should return 0, otherwise it should
    // return an errno-compatible error code": a refusal's code is a
    // positive errno value.
    if let (Some(code), Some(what)) = (report.refused_code, &report.refused) {
        obs.check(
            crate::rule!("consumer.async.errno"),
            code > 0,
            "handler",
            || format!("{what}: a refusal should be an errno-compatible code (positive)"),
        );
    }
    if let (Some(why), false) = (&report.stalled, kept_structure) {
        obs.check(
            crate::rule!("consumer.async.request"),
            false,
            "stream",
            || why.clone(),
        );
    }
    // Tasks delivered after the consumer's cancel are judged by
    // judge_after_cancel, under consumer.async.after-cancel.
    let late = report.late();
    for (i, &n) in report.extracts.iter().enumerate() {
        if n == 0 && !report.out_of_scope.contains(&i) && !late.contains(&i) {
            obs.check(crate::rule!("consumer.async.extract-once"), false, &format!("task {i}"), || {
                format!("task {i} was never extracted by the time the stream ended (\"it must still call extract_data so that the producer can perform any required cleanup\")")
            });
        }
    }
}

/// The case's end when the consumer's finish did not return in time: an
/// error that says how far the stream got (the run is ended unclean, so
/// its memory outlives the consumer's possible late calls).
fn finish_timed_out(
    report: &crate::export::asynchronous::AsyncReport,
    run: crate::export::asynchronous::ConsumerRun,
) -> Ended {
    let state = format!(
        "the handler {} released; {} tasks delivered{}",
        if report.released { "was" } else { "was not" },
        report.delivered,
        if report.cancelled { ", cancelled" } else { "" }
    );
    run.end(false);
    Ended::Error(format!(
        "arrowcert_consume_async_finish did not return within {} ms ({state})",
        (FINISH_TIMEOUT + STALL_AFTER + Duration::from_secs(2)).as_millis()
    ))
}

/// After the harness's producer failed with `code` and `message`: the
/// consumer's finish must report that error (consumer.stream.error), from
/// its own copy of the message (consumer.async.copies: the harness
/// overwrites the message once on_error returns).
fn judge_error_sent(
    code: std::ffi::c_int,
    message: &str,
    result: &Result<Vec<u8>, crate::plugin::CallError>,
    obs: &mut Observations,
) {
    use crate::export::asynchronous as producer;
    match result {
        Err(crate::plugin::CallError::Failed {
            code: got,
            message: got_message,
            ..
        }) => {
            let text = got_message.clone().unwrap_or_default();
            if text.contains(producer::MESSAGE_OVERWRITTEN.trim_end())
                || text.contains("overwritten")
            {
                obs.check(crate::rule!("consumer.async.copies"), false, "on_error", || {
                    format!("the consumer's error reads `{text}`: it kept on_error's message pointer and read it after on_error returned (the harness overwrote the message then)")
                });
            } else {
                obs.check(
                    crate::rule!("consumer.stream.error"),
                    *got == code && text.contains(message),
                    "finish",
                    || format!("the producer failed with {code} `{message}`; finish returned {got} with last error `{text}`"),
                );
            }
        }
        Err(e) => obs.check(
            crate::rule!("consumer.stream.error"),
            false,
            "finish",
            || format!("the producer failed with {code} `{message}`; finish said: {e}"),
        ),
        Ok(_) => obs.check(
            crate::rule!("consumer.stream.error"),
            false,
            "finish",
            || format!("the producer failed with {code} `{message}`, but finish returned success"),
        ),
    }
}

/// `consumer.async.after-cancel` (MUST: "a consumer *MUST* be prepared to
/// receive one or more calls to ``on_next_task`` or ``on_error`` even after
/// calling ``cancel`` if there are still requested arrays pending"): the
/// consumer, asked to cancel, did; the tasks or the error that came after
/// were taken as any other (every late task extracted), and finish returned
/// once the handler was released. What a consumer keeps of a stream it
/// cancelled is its own choice: values are not judged.
fn judge_after_cancel(
    how: Late,
    report: &crate::export::asynchronous::AsyncReport,
    run: crate::export::asynchronous::ConsumerRun,
    findings: &crate::export::Findings,
    protocol_broken: bool,
    obs: &mut Observations,
) -> Ended {
    const RULE: &str = crate::rule!("consumer.async.after-cancel");
    let returned = run.result.is_some();
    let clean = findings.violations.is_empty() && report.released && report.finished;
    run.end(clean && returned && !protocol_broken);
    obs.not_exercised(
        crate::rule!("consumer.read.values"),
        "the consumer cancelled the stream, as asked: what it keeps of a cancelled stream is its own choice",
    );
    if let Some(why) = &report.cancel_problem {
        obs.not_exercised(RULE, why.clone());
        return Ended::Error(why.clone());
    }
    if how == Late::Tasks && report.late_tasks == 0 {
        obs.not_exercised(
            RULE,
            "no requested arrays were pending when the consumer cancelled, so nothing came after its cancel",
        );
        return Ended::Ran;
    }
    let after = match how {
        Late::Tasks => format!("{} task(s) delivered after its cancel", report.late_tasks),
        Late::Error => "on_error after its cancel".to_string(),
    };
    let not_extracted: Vec<usize> = report
        .late()
        .filter(|&i| report.extracts.get(i) == Some(&0) && !report.out_of_scope.contains(&i))
        .collect();
    obs.check(RULE, not_extracted.is_empty(), "after cancel", || {
        format!("of the {after}, task(s) {not_extracted:?} were never extracted (\"it must still call extract_data so that the producer can perform any required cleanup\")")
    });
    obs.check(RULE, returned, "after cancel", || {
        format!("arrowcert_consume_async_finish did not return after the {after} and the handler's release (the handler {} released)", if report.released { "was" } else { "was not" })
    });
    Ended::Ran
}

/// The batches as the harness's producer delivers them: as they are, or
/// one row per task until [`MAX_ROW_CHUNKS`] tasks, then what is left of
/// each batch as one task.
///
/// [`MAX_ROW_CHUNKS`]: crate::asynchronous::schedule::MAX_ROW_CHUNKS
fn chunks(batches: &[arrow_array::RecordBatch], rows: bool) -> Vec<arrow_array::RecordBatch> {
    if !rows {
        return batches.to_vec();
    }
    let mut out = Vec::new();
    for b in batches {
        let mut at = 0;
        while at < b.num_rows() {
            let n = if out.len() + 1 >= crate::asynchronous::schedule::MAX_ROW_CHUNKS {
                b.num_rows() - at
            } else {
                1
            };
            // A copy, not a slice: the encoder re-cuts offsets itself.
            out.push(probe::deep_copy(&b.slice(at, n)));
            at += n;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_leak_delivery_is_a_fixed_one() {
        assert!(Delivery::fixed()
            .iter()
            .any(|d| d.to_string() == LEAK_DELIVERY));
    }

    #[test]
    fn the_leak_schedule_is_a_fixed_one() {
        assert!(Schedule::fixed()
            .iter()
            .any(|s| s.to_string() == LEAK_SCHEDULE));
    }

    #[test]
    fn invalid_requests_run_on_the_named_builtin_scenarios_only() {
        let builtin = crate::scenario::builtin();
        for name in INVALID_REQUEST_SCENARIOS {
            assert!(builtin.iter().any(|s| s.name == name), "{name} is built in");
        }
        let plan = producer_plan(&builtin, 1);
        let invalid: Vec<&str> = plan
            .iter()
            .filter(|c| c.id.contains("/async/r0/") || c.id.contains("/async/r-1/"))
            .map(|c| c.id.as_str())
            .collect();
        assert_eq!(
            invalid.len(),
            2 * INVALID_REQUEST_SCENARIOS.len(),
            "{invalid:?}"
        );
        // Every other fixed schedule still runs on every built-in scenario
        // (the slices of the stream come on top, under one schedule).
        let fixed = Schedule::fixed().len();
        let sliced = plan.iter().filter(|c| c.slice.is_some()).count();
        let slices: usize = builtin
            .iter()
            .map(|s| super::super::table_slice::planned(s).len())
            .sum();
        assert_eq!(sliced, slices);
        assert_eq!(
            plan.len() - sliced,
            builtin.len() * (fixed - 2) + invalid.len()
        );
    }

    #[test]
    fn drawn_async_cases_have_unique_ids() {
        // Two draws of the same schedule (or delivery) for one scenario used
        // to plan the same case twice under one ID.
        let scenarios = crate::generate::scenarios(11, 150).expect("generated");
        for seed in [5u64, 11] {
            let mut ids: Vec<String> = producer_plan(&scenarios, seed)
                .into_iter()
                .chain(consumer_plan(&scenarios, seed))
                .map(|c| c.id)
                .collect();
            let n = ids.len();
            ids.sort();
            ids.dedup();
            assert_eq!(ids.len(), n, "seed {seed}");
        }
    }

    #[test]
    fn row_chunks_cover_the_data_in_order() {
        let s = crate::scenario::builtin()
            .into_iter()
            .find(|s| s.name == "primitive")
            .unwrap();
        let c = chunks(&s.batches, true);
        assert!(c.len() <= crate::asynchronous::schedule::MAX_ROW_CHUNKS + s.batches.len());
        assert!(c.len() >= crate::asynchronous::schedule::MAX_ROW_CHUNKS - 1);
        let rows = |b: &[arrow_array::RecordBatch]| b.iter().map(|b| b.num_rows()).sum::<usize>();
        assert_eq!(rows(&c), rows(&s.batches));
        assert!(crate::compare::batches(&s.batches, &c).is_empty());
    }
}

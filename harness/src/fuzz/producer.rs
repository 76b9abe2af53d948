//! The producer oracle: fuzz bytes become a scenario and a call schedule.
//!
//! Input layout: a path byte (schema, array, device array, stream, device
//! stream), a batch byte, two slice bytes (offset and length as fractions
//! of the batch), a schedule length byte and that many schedule steps,
//! then the scenario ([`super::input`]).
//!
//! Two things run on each input. First the certification case of the path
//! with that batch and slice (every producer rule the path decides, by the
//! same code as `arrowcert certify`). Then, for stream paths, the schedule:
//! `get_next` calls on this thread or another (serialized), moves of the
//! stream and of chunks to new addresses, chunk releases in any order,
//! before or after the stream's release, `get_schema` again, `get_next`
//! past the end, and chunks read again after the stream is gone. Each step
//! is judged by the rule it exercises (listed in [`Step`]).

#![forbid(unsafe_code)]

use std::time::Instant;

use arbitrary::Unstructured;
use arrow_array::{Array, RecordBatch, StructArray};

use super::{input, Outcome};
use crate::abi::ops::{Guard, Owned};
use crate::abi::{ArrowArray, ArrowArrayStream, ArrowSchema};
use crate::certify::checks::{
    array_rules, release_checked, relocate_poisoning, schema_rules, stream_failure, values,
};
use crate::certify::{self, CaseSpec, Ended, Observations, Path};
use crate::inspect::probe::{self, Call, StreamCalls};
use crate::plugin::Plugin;
use crate::scenario::Scenario;

/// One step of a stream schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// `get_next` on this thread: a valid chunk equal to the next batch
    /// (`stream.chunk.schema`, `array.*`, `array.values.roundtrip`), or the
    /// end of the stream after the last one (`stream.eos.released`), and
    /// again the end after that (`stream.eos.repeat`).
    Next,
    /// `get_next` from another thread (`stream.threads.serial`).
    NextElsewhere,
    /// Chunk `k` (of those still held) moved to a new address, its old
    /// bytes poisoned (`array.release.relocatable`).
    MoveChunk(u8),
    /// Chunk `k` released (`array.release.marks-released`).
    ReleaseChunk(u8),
    /// Chunk `k` validated and read again (`stream.results.outlive` once
    /// the stream is released).
    Reread(u8),
    /// The stream moved to a new address (`stream.release.relocatable`).
    MoveStream,
    /// `get_schema` again (`stream.schema.get`).
    Schema,
    /// The stream released (`stream.release.marks-released`); later
    /// stream steps are skipped.
    ReleaseStream,
}

impl Step {
    fn from_byte(b: u8) -> Step {
        match b % 11 {
            0..=2 => Step::Next,
            3 => Step::NextElsewhere,
            4 => Step::MoveChunk(b >> 4),
            5 | 6 => Step::ReleaseChunk(b >> 4),
            7 => Step::Reread(b >> 4),
            8 => Step::MoveStream,
            9 => Step::Schema,
            _ => Step::ReleaseStream,
        }
    }

    fn word(self) -> String {
        match self {
            Step::Next => "n".into(),
            Step::NextElsewhere => "t".into(),
            Step::MoveChunk(k) => format!("m{k}"),
            Step::ReleaseChunk(k) => format!("r{k}"),
            Step::Reread(k) => format!("v{k}"),
            Step::MoveStream => "ms".into(),
            Step::Schema => "s".into(),
            Step::ReleaseStream => "rs".into(),
        }
    }
}

const PATHS: [Path; 5] = [
    Path::Schema,
    Path::Array,
    Path::DeviceArray,
    Path::Stream,
    Path::DeviceStream,
];

/// Checks one input against `producer`.
pub fn check(producer: &Plugin, data: &[u8]) -> Outcome {
    let tag = input::tag(data);
    let mut u = Unstructured::new(data);
    let byte = |u: &mut Unstructured| u.arbitrary::<u8>().unwrap_or(0);
    let path = PATHS[byte(&mut u) as usize % PATHS.len()];
    let batch_pick = byte(&mut u) as usize;
    let (off_pick, len_pick) = (byte(&mut u) as usize, byte(&mut u) as usize);
    let n_steps = byte(&mut u) as usize % 25;
    let steps: Vec<Step> = (0..n_steps)
        .map(|_| Step::from_byte(byte(&mut u)))
        .collect();
    let scenario = match input::scenario(u, &tag, true) {
        Ok(s) => s,
        Err(why) => return Outcome::Ignored(why),
    };
    let opts = certify::Options {
        replay_prefix: super::cases::replay_prefix(super::Target::Producer),
        ..certify::Options::default()
    };
    let mut id = format!("producer/{}/{}", path.name(), scenario.name);
    let (mut batch, mut slice) = (None, None);
    if matches!(path, Path::Array | Path::DeviceArray) {
        if scenario.batches.is_empty() {
            return Outcome::Ignored("an array case needs a batch".into());
        }
        let b = batch_pick % scenario.batches.len();
        let rows = scenario.batches[b].num_rows();
        id.push_str(&format!("/batch:{b}"));
        batch = Some(b);
        // 255 in the offset byte: the whole batch, unsliced.
        if off_pick != 255 {
            let offset = off_pick * rows / 255;
            let length = len_pick * (rows - offset) / 255;
            id.push_str(&format!("/slice:{offset}+{length}"));
            slice = Some((offset, length));
        }
    }
    let spec = CaseSpec {
        path,
        scenario: 0,
        batch,
        slice,
        id,
        device: crate::device::Kind::Cpu,
    };
    let plugins = certify::Plugins {
        producer: Some(producer),
        consumer: None,
    };
    let case = certify::run_case(plugins, &scenario, &spec, &opts);
    if super::is_finding(&case) || path != Path::Stream || steps.is_empty() {
        return Outcome::Checked(Box::new(case));
    }
    let words: Vec<String> = steps.iter().map(|s| s.word()).collect();
    let spec = CaseSpec {
        id: format!(
            "producer/stream-schedule/{}/{}",
            words.join(","),
            scenario.name
        ),
        ..spec
    };
    let start = Instant::now();
    let mut obs = Observations::default();
    let ended = schedule(producer, &scenario, &steps, &mut obs);
    Outcome::Checked(Box::new(certify::judged(
        &scenario, &spec, &opts, obs, ended, start,
    )))
}

/// A chunk the schedule holds: which batch it should be, and whether it
/// checked out when it arrived (only those are read again).
struct Held {
    chunk: Guard<ArrowArray>,
    batch: usize,
    valid: bool,
}

/// Runs a stream schedule against a fresh stream from `producer`.
pub fn schedule(
    producer: &Plugin,
    scenario: &Scenario,
    steps: &[Step],
    obs: &mut Observations,
) -> Ended {
    let (mut stream, schema) = match open_stream(producer, scenario, obs) {
        Ok(s) => s,
        Err(e) => return e,
    };
    let mut p = Progress {
        held: Vec::new(),
        arrived: 0,
        ended_stream: false,
    };
    let mut stream_live = true;
    let mut ended = Ended::Ran;
    for (i, step) in steps.iter().enumerate() {
        let at = format!("step {i} ({})", step.word());
        match *step {
            Step::Next | Step::NextElsewhere if stream_live => {
                let elsewhere = *step == Step::NextElsewhere;
                if let Some(e) = next(&mut stream, elsewhere, &schema, scenario, &mut p, &at, obs) {
                    ended = e;
                    break;
                }
            }
            Step::MoveStream if stream_live => {
                stream = relocate_poisoning(&mut stream);
            }
            Step::Schema if stream_live => schema_again(&mut stream, &at, obs),
            Step::ReleaseStream if stream_live => {
                release_checked(
                    &mut stream,
                    crate::rule!("stream.release.marks-released"),
                    &at,
                    obs,
                );
                stream_live = false;
            }
            Step::MoveChunk(k) if !p.held.is_empty() => {
                let i = k as usize % p.held.len();
                let h = &mut p.held[i];
                h.chunk = relocate_poisoning(&mut h.chunk);
            }
            Step::ReleaseChunk(k) if !p.held.is_empty() => {
                let mut h = p.held.remove(k as usize % p.held.len());
                release_checked(
                    &mut h.chunk,
                    crate::rule!("array.release.marks-released"),
                    &at,
                    obs,
                );
            }
            Step::Reread(k) if !p.held.is_empty() => {
                let h = &p.held[k as usize % p.held.len()];
                if h.valid {
                    let rule = if stream_live {
                        None
                    } else {
                        Some(crate::rule!("stream.results.outlive"))
                    };
                    reread(&schema, h, scenario, rule, &at, obs);
                }
            }
            _ => {}
        }
    }
    // What is left goes in reverse order: chunks first when the stream is
    // still live, so chunks outliving the stream were covered by the steps.
    while let Some(mut h) = p.held.pop() {
        release_checked(
            &mut h.chunk,
            crate::rule!("array.release.marks-released"),
            "end",
            obs,
        );
    }
    if stream_live {
        release_checked(
            &mut stream,
            crate::rule!("stream.release.marks-released"),
            "end",
            obs,
        );
    }
    ended
}

/// A fresh stream from `producer` and its schema, validated; `Err` ends
/// the case (a call that failed, a released stream, a schema not safe to
/// follow).
fn open_stream(
    producer: &Plugin,
    scenario: &Scenario,
    obs: &mut Observations,
) -> Result<(Guard<ArrowArrayStream>, Guard<ArrowSchema>), Ended> {
    let mut stream = Guard::<ArrowArrayStream>::poisoned();
    if let Err(e) = producer.produce_stream(&scenario.ipc, &mut stream) {
        return Err(certify::call_ended(e));
    }
    if stream.is_released() {
        return Err(Ended::Error("the produced stream is released".into()));
    }
    let mut schema = Guard::<ArrowSchema>::poisoned();
    match stream.get_schema(&mut schema) {
        Call::Returned(0) => {}
        Call::Returned(code) => {
            schema.mark_released();
            let why = stream_failure(&mut *stream, code, "get_schema", obs);
            return Err(Ended::Error(why));
        }
        Call::NotSet => {
            schema.mark_released();
            stream.mark_released();
            return Err(Ended::Error("get_schema is NULL".into()));
        }
    }
    let found = probe::check_schema(&schema);
    let schema_ok = !crate::inspect::any_must(&found);
    obs.validated(&schema_rules(), found, "schema");
    if !schema_ok {
        schema.mark_released();
        return Err(Ended::Ran);
    }
    Ok((stream, schema))
}

/// What a schedule has seen of the stream so far.
struct Progress {
    /// The chunks not yet released, in the order they arrived.
    held: Vec<Held>,
    /// How many live arrays get_next returned before the end of stream.
    arrived: usize,
    /// Whether get_next has signalled the end of the stream.
    ended_stream: bool,
}

/// One get_next (`elsewhere`: on another thread), judged against the
/// batches the scenario holds: the end of the stream where the data ends
/// (stream.eos.*), each chunk validated and compared, and held. `Some`
/// ends the schedule with that outcome (a failed or missing get_next).
fn next(
    stream: &mut Guard<ArrowArrayStream>,
    elsewhere: bool,
    schema: &ArrowSchema,
    scenario: &Scenario,
    p: &mut Progress,
    at: &str,
    obs: &mut Observations,
) -> Option<Ended> {
    let expect = &scenario.batches;
    let mut out = Guard::<ArrowArray>::poisoned();
    let r = if elsewhere {
        obs.checked.insert(crate::rule!("stream.threads.serial"));
        probe::get_next_on_thread(&mut **stream, &mut out)
    } else {
        stream.get_next(&mut out)
    };
    match r {
        Call::Returned(0) if out.is_released() => {
            if p.ended_stream {
                obs.check(crate::rule!("stream.eos.repeat"), true, at, String::new);
            } else {
                obs.check(
                    crate::rule!("array.values.roundtrip"),
                    p.arrived == expect.len(),
                    at,
                    || {
                        format!(
                            "end of stream after {} of {} batches",
                            p.arrived,
                            expect.len()
                        )
                    },
                );
                obs.check(crate::rule!("stream.eos.released"), true, at, String::new);
            }
            p.ended_stream = true;
        }
        Call::Returned(0) => {
            let more = !p.ended_stream && p.arrived < expect.len();
            // After the end, what get_next does is left open
            // (INFO stream.eos.repeat, as certification judges
            // it); before it, a batch more than the data has is
            // an end of stream that never came.
            if p.ended_stream {
                obs.check(crate::rule!("stream.eos.repeat"), false, at, || {
                    "get_next returned a live array after signalling the end of the stream".into()
                });
            } else {
                obs.check(crate::rule!("stream.eos.released"), p.arrived < expect.len(), at, || {
                    format!(
                        "get_next returned a live array after the last of {} batches; the end of the stream is a released array",
                        expect.len()
                    )
                });
            }
            let valid = more && chunk_ok(schema, &out, p.arrived, scenario, at, obs);
            p.held.push(Held {
                chunk: out,
                batch: p.arrived,
                valid,
            });
            p.arrived += 1;
        }
        Call::Returned(code) => {
            out.mark_released();
            let why = stream_failure(&mut **stream, code, "get_next", obs);
            if p.ended_stream {
                obs.check(crate::rule!("stream.eos.repeat"), false, at, || {
                    format!("get_next after the end of the stream failed: {why}")
                });
            } else {
                return Some(Ended::Error(why));
            }
        }
        Call::NotSet => {
            out.mark_released();
            return Some(Ended::Error("get_next is not callable".into()));
        }
    }
    None
}

/// get_schema called again (stream.schema.repeat), its schema validated
/// and released.
fn schema_again(stream: &mut Guard<ArrowArrayStream>, at: &str, obs: &mut Observations) {
    let mut again = Guard::<ArrowSchema>::poisoned();
    let r = stream.get_schema(&mut again);
    obs.check(
        crate::rule!("stream.schema.repeat"),
        r == Call::Returned(0),
        at,
        || format!("get_schema again gave {r:?}; the schema should be queryable more than once"),
    );
    if r == Call::Returned(0) {
        let found = probe::check_schema(&again);
        obs.validated(&schema_rules(), found, at);
        release_checked(
            &mut again,
            crate::rule!("schema.release.marks-released"),
            at,
            obs,
        );
    } else {
        again.mark_released();
    }
}

/// Validates a chunk that just arrived and compares it with batch `index`.
fn chunk_ok(
    schema: &ArrowSchema,
    chunk: &ArrowArray,
    index: usize,
    scenario: &Scenario,
    at: &str,
    obs: &mut Observations,
) -> bool {
    let (columns, fields) = (chunk.n_children, schema.n_children);
    obs.check(
        crate::rule!("stream.chunk.schema"),
        columns == fields,
        at,
        || format!("the chunk has {columns} column(s), the schema {fields} field(s)"),
    );
    if columns != fields {
        return false;
    }
    let found = probe::check_array(schema, chunk);
    let ok = !crate::inspect::any_must(&found);
    obs.validated(&array_rules(), found, at);
    if ok {
        match read(schema, chunk, scenario) {
            Ok(b) => values(
                scenario,
                std::slice::from_ref(&scenario.batches[index]),
                &[b],
                at,
                obs,
            ),
            // arrow-rs cannot read names or metadata that are not UTF-8
            // (reported at their own level): the values are not judged.
            Err(_)
                if obs
                    .violations
                    .iter()
                    .any(|v| crate::inspect::UNREADABLE_BY_ARROW_RS.contains(&v.rule)) => {}
            Err(why) => obs.check(crate::rule!("array.values.roundtrip"), false, at, || why),
        }
    }
    ok
}

/// Reads a held chunk again; `rule` (after the stream's release) is the
/// rule a chunk that no longer reads right breaks.
fn reread(
    schema: &ArrowSchema,
    h: &Held,
    scenario: &Scenario,
    rule: Option<&'static str>,
    at: &str,
    obs: &mut Observations,
) {
    let found = probe::check_array(schema, &h.chunk);
    let read = if !crate::inspect::any_must(&found) {
        read(schema, &h.chunk, scenario)
    } else {
        Err(found
            .iter()
            .map(|v| v.to_string())
            .collect::<Vec<_>>()
            .join("; "))
    };
    let diffs = match &read {
        Ok(b) => crate::compare::batches(
            std::slice::from_ref(&scenario.batches[h.batch]),
            std::slice::from_ref(b),
        ),
        Err(why) => vec![why.clone()],
    };
    let rule = rule.unwrap_or(crate::rule!("array.values.roundtrip"));
    obs.check(rule, diffs.is_empty(), at, || {
        format!(
            "chunk {} read again{}: {}",
            h.batch,
            if rule == crate::rule!("stream.results.outlive") {
                " after the stream's release"
            } else {
                ""
            },
            diffs.join("; ")
        )
    });
}

/// A deep copy of a chunk's data as a batch of the scenario's schema.
fn read(
    schema: &ArrowSchema,
    chunk: &ArrowArray,
    scenario: &Scenario,
) -> Result<RecordBatch, String> {
    let a = probe::read_array(schema, chunk)?;
    let s = a
        .as_any()
        .downcast_ref::<StructArray>()
        .ok_or("the chunk is not a struct array")?
        .clone();
    let b = crate::abi::arrow_rs::batch_from_struct(scenario.schema.clone(), s)
        .map_err(|e| e.to_string())?;
    let copy = probe::deep_copy(&b);
    drop(b);
    drop(a);
    Ok(copy)
}

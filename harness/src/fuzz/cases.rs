//! The consumer and async oracles: fuzz bytes become one certification
//! case (the kind, encoding, error path or async schedule chosen by the
//! bytes, over the scenario they describe), run by the same code as
//! `arrowcert certify`, so every rule that case checks is checked.
//!
//! Input layout (consumer): one byte for the case kind, one for the batch,
//! then the scenario ([`super::input`]). The varied encoding's seed derives
//! from the case ID, which names the input's [`super::input::tag`].
//!
//! Input layout (async): the harness's schedule as consumer of the producer
//! (first request, refill, extraction, slowness, refusal, cancel), the
//! harness's delivery as producer for the consumer (threads, gap, end,
//! encoding, row chunks), then the scenario. The producer side runs when
//! a producer plugin is set, the consumer side when a consumer plugin is.

#![forbid(unsafe_code)]

use arbitrary::Unstructured;

use super::{input, Outcome, Plugins};
use crate::asynchronous::schedule::{
    Cancel, CancelAt, CancelHow, Delivery, End, Extract, First, Refill, Schedule,
};
use crate::certify::consumer::{Enc, ErrorAt, Kind};
use crate::certify::{self, CaseSpec, Options, Path};
use crate::plugin::Plugin;
use crate::report::Verdict;
use crate::scenario::Scenario;

/// The replay command of a fuzz case (its artifact is appended).
pub fn replay_prefix(target: super::Target) -> String {
    format!("arrowcert replay --fuzz {target}")
}

fn options(target: super::Target) -> Options {
    Options {
        replay_prefix: replay_prefix(target),
        ..Options::default()
    }
}

/// The consumer case kinds a byte picks from.
fn consumer_kind(b: u8) -> Kind {
    let enc = if b & 1 == 0 { Enc::Plain } else { Enc::Varied };
    match (b >> 1) % 10 {
        0 | 1 => Kind::Array(enc),
        2 | 3 => Kind::DeviceArray(enc),
        4 | 5 => Kind::Stream(enc),
        6 => Kind::DeviceStream(enc),
        7 => Kind::StreamError {
            device: b & 1 == 1,
            at: ErrorAt::Schema,
            code: libc::EINVAL,
        },
        8 => Kind::StreamError {
            device: b & 1 == 1,
            at: ErrorAt::Middle,
            code: if b & 0x40 == 0 {
                libc::EIO
            } else {
                libc::ENOMEM
            },
        },
        _ => Kind::Released {
            schema: enc == Enc::Varied,
        },
    }
}

/// One consumer case from fuzz bytes.
pub fn consumer(plugin: &Plugin, data: &[u8]) -> Outcome {
    let tag = input::tag(data);
    let mut u = Unstructured::new(data);
    let kind = consumer_kind(u.arbitrary::<u8>().unwrap_or(0));
    let batch_pick = u.arbitrary::<u8>().unwrap_or(0) as usize;
    let scenario = match input::scenario(u, &tag, false) {
        Ok(s) => s,
        Err(why) => return Outcome::Ignored(why),
    };
    let per_batch = matches!(kind, Kind::Array(_) | Kind::DeviceArray(_));
    let batch = if per_batch {
        if scenario.batches.is_empty() {
            return Outcome::Ignored("an array case needs a batch".into());
        }
        Some(batch_pick % scenario.batches.len())
    } else {
        None
    };
    let mut id = format!("consumer/{}/{}", kind.words(), scenario.name);
    if let Some(b) = batch {
        id.push_str(&format!("/batch:{b}"));
    }
    let spec = CaseSpec {
        path: Path::Consumer(kind),
        scenario: 0,
        batch,
        slice: None,
        id,
        device: crate::device::Kind::Cpu,
    };
    let plugins = certify::Plugins {
        producer: None,
        consumer: Some(plugin),
    };
    let case = certify::run_case(plugins, &scenario, &spec, &options(super::Target::Consumer));
    Outcome::Checked(Box::new(case))
}

/// The harness's schedule as consumer of an async producer, from bytes.
pub fn schedule(u: &mut Unstructured) -> Schedule {
    let mut byte = || u.arbitrary::<u8>().unwrap_or(0);
    let b = byte();
    let first = match b % 16 {
        0 => First::Invalid(-((b >> 4) as i64 % 2)),
        1 => First::Refuse,
        2 | 3 => First::Request(i64::MAX),
        _ => First::Request(1 + (b >> 4) as i64 % 6),
    };
    let b = byte();
    let refill = match b % 4 {
        0 => Refill::Burst(2 + (b >> 2) % 3),
        1 => Refill::Deferred,
        2 => Refill::Each(2 + (b >> 2) % 2),
        _ => Refill::Each(1),
    };
    let extract = match byte() % 5 {
        0 => Extract::Null,
        1 => Extract::Thread,
        2 => Extract::Mixed,
        _ => Extract::Array,
    };
    let b = byte();
    let slow_us = if b % 8 == 0 { 50 + (b as u32) * 4 } else { 0 };
    let b = byte();
    let refuse_task = (b % 8 == 0).then_some((b >> 3) % 3);
    let b = byte();
    let cancel = (b % 3 == 0).then(|| Cancel {
        at: match (b >> 2) % 5 {
            0 => CancelAt::Schema,
            1 => CancelAt::EndOfStream,
            k => CancelAt::Task(k - 2),
        },
        how: match (b >> 5) % 4 {
            0 => CancelHow::Thread,
            1 => CancelHow::Twice,
            2 => CancelHow::Race,
            _ => CancelHow::Inline,
        },
    });
    let b = byte();
    let request_after_cancel = (cancel.is_some() && b % 3 == 0).then_some(1 + (b >> 2) as i64 % 8);
    Schedule {
        first,
        refill,
        extract,
        slow_us,
        refuse_task,
        cancel,
        request_after_cancel,
    }
}

/// The harness's delivery as producer for an async consumer, from bytes.
pub fn delivery(u: &mut Unstructured) -> Delivery {
    let b = u.arbitrary::<u8>().unwrap_or(0);
    let e = u.arbitrary::<u8>().unwrap_or(0);
    Delivery {
        thread_per_callback: b & 1 == 1,
        gap_us: if b & 2 == 2 {
            50 * ((b >> 4) as u32 + 1)
        } else {
            0
        },
        end: match e % 6 {
            0 => End::Empty,
            1 => End::Error(e >> 3 & 3),
            _ => End::Complete,
        },
        varied: b & 4 == 4,
        rows: b & 8 == 8,
    }
}

/// Both sides' async rules from one input: the producer plugin (if any)
/// under the drawn schedule, then the consumer plugin (if any) under the
/// drawn delivery. The worse of the two cases is the outcome.
pub fn asynchronous(plugins: &Plugins, data: &[u8]) -> Outcome {
    let tag = input::tag(data);
    let mut u = Unstructured::new(data);
    let sched = schedule(&mut u);
    let deliv = delivery(&mut u);
    let scenario: Scenario = match input::scenario(u, &tag, plugins.producer.is_some()) {
        Ok(s) => s,
        Err(why) => return Outcome::Ignored(why),
    };
    let opts = options(super::Target::Async);
    let mut cases = Vec::new();
    if let Some(p) = &plugins.producer {
        let spec = CaseSpec {
            path: Path::Async(sched),
            scenario: 0,
            batch: None,
            slice: None,
            id: format!("producer/async/{sched}/{}", scenario.name),
            device: crate::device::Kind::Cpu,
        };
        let both = certify::Plugins {
            producer: Some(p),
            consumer: None,
        };
        cases.push(certify::run_case(both, &scenario, &spec, &opts));
    }
    if let Some(c) = &plugins.consumer {
        let spec = CaseSpec {
            path: Path::AsyncConsumer(deliv),
            scenario: 0,
            batch: None,
            slice: None,
            id: format!("consumer/async/{deliv}/{}", scenario.name),
            device: crate::device::Kind::Cpu,
        };
        let both = certify::Plugins {
            producer: None,
            consumer: Some(c),
        };
        cases.push(certify::run_case(both, &scenario, &spec, &opts));
    }
    match cases.iter().position(super::is_finding) {
        Some(i) => Outcome::Checked(Box::new(cases.swap_remove(i))),
        None => match cases.into_iter().find(|c| c.verdict != Verdict::Skip) {
            Some(c) => Outcome::Checked(Box::new(c)),
            None => Outcome::Ignored("no async side ran".into()),
        },
    }
}

//! CAI pairs (`certify --cai --producer py:A.py --consumer py:B.py`): one
//! library's array (A's `cai_object(spec)`, its values still being written
//! by work on its stream where the case says so) handed to another
//! library's `cai_consume(obj)`, seen through its `__cuda_array_interface__`
//! only; the values B read against the case's. A pair's case is no rule's
//! verdict: values that did not arrive are the pair's failure, naming both
//! libraries, and each library's own certification (`cai.producer.sync`,
//! `cai.consumer.sync`, `cai.values`) says which side broke which rule.

use std::time::Instant;

use super::check::Judged;
use super::consumer::first_difference;
use super::run::{finished, CaseSpec};
use crate::dlpack::bridge::{Bridge, PyError};
use crate::report::{Case, Verdict};

/// The ID of the pair case over `spec`.
pub fn pair_id(spec: &CaseSpec) -> String {
    format!("cai/pair/{}", spec.name)
}

/// The two sides of a pair: each library's bridge (its name is the
/// bridge's).
pub struct Pair<'a> {
    pub producer: &'a Bridge,
    pub consumer: &'a Bridge,
}

/// Runs one pair case: the producer's array over `spec` read by the
/// consumer. `skip`: why neither library's device can be reached here
/// (the case is SKIPPED with it).
pub fn run_pair_case(pair: &Pair, spec: &CaseSpec, skip: Option<&str>, replay: &str) -> Case {
    let start = Instant::now();
    let id = pair_id(spec);
    let done = |verdict: Verdict, message: String| {
        let mut c = finished(
            spec,
            start,
            replay,
            verdict,
            Some(message),
            Judged::default(),
        );
        c.replay = c.replay.replace(&spec.id(), &id);
        c.id = id.clone();
        c
    };
    if let Some(why) = skip {
        return done(Verdict::Skip, why.to_string());
    }
    let (p, c) = (&pair.producer.name, &pair.consumer.name);
    let (obj, v) = match pair.producer.call("cai_load", &[], &spec.json()) {
        Ok(x) => x,
        Err(e) => return done(Verdict::Error, e),
    };
    let obj = match (obj, PyError::of(&v)) {
        (Some(o), None) => o,
        (o, e) => {
            if let Some(o) = o {
                pair.producer.drop_handle(o);
            }
            let why = e.map_or("cai_object returned None".to_string(), |e| e.to_string());
            return done(
                Verdict::Limitation,
                format!("the producer ({p}) cannot make this array: cai_object raised {why}"),
            );
        }
    };
    let read = pair.consumer.call("cai_consume_object", &[obj.0], "");
    pair.producer.drop_handle(obj);
    let _ = pair.producer.call("gc", &[], "");
    let v = match read {
        Ok((h, v)) => {
            if let Some(h) = h {
                pair.consumer.drop_handle(h);
            }
            v
        }
        Err(e) => return done(Verdict::Error, e),
    };
    if let Some(e) = PyError::of(&v) {
        return done(
            Verdict::Limitation,
            format!(
                "the consumer ({c}) declined the producer's ({p}) array: cai_consume raised {e}"
            ),
        );
    }
    let got: Vec<f64> = v["values"]
        .as_array()
        .map(|a| a.iter().filter_map(|x| x.as_f64()).collect())
        .unwrap_or_default();
    match first_difference(&got, &spec.expected_values()) {
        None => {
            let mut c = done(Verdict::Pass, String::new());
            c.message = None;
            c
        }
        Some(d) => done(
            Verdict::Fail,
            format!(
                "the values did not arrive: {c} read {p}'s array{}: {d} (each library's own certification says which side broke which rule)",
                if spec.pending {
                    " (its values still being written by work on the exported stream)"
                } else {
                    ""
                }
            ),
        ),
    }
}

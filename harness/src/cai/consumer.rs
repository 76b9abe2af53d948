//! `certify --cai --consumer py:FILE.py`: the harness hands the adapter's
//! `cai_consume(obj)` an array whose values are still being written by work
//! on the exported stream, and compares what the consumer read with the
//! finished values (`cai.consumer.sync`). The arrays come from the software
//! device (the adapter's `cai_device_array(spec)`); on CUDA the harness does
//! not make arrays with delayed work yet, and says so.

use std::time::Instant;

use super::check::{Judged, Violation};
use super::run::{finished, CaseSpec};
use crate::dlpack::bridge::Bridge;
use crate::report::{Case, Verdict};

/// Runs one consumer case: `spec` (with work pending) handed to the
/// adapter's cai_consume, after the same array with nothing pending.
pub fn run_consumer_case(
    bridge: &Bridge,
    spec: &CaseSpec,
    device_arrays: Option<&str>,
    replay: &str,
) -> Case {
    let start = Instant::now();
    let mut j = Judged::default();
    let id = consumer_id(spec);
    let rule = crate::rule!("cai.consumer.sync");
    let done = |j: Judged, verdict: Verdict, message: Option<String>| {
        let mut c = finished(spec, start, replay, verdict, message, j);
        c.replay = c.replay.replace(&spec.id(), &id);
        c.id = id.clone();
        c
    };
    if let Some(why) = device_arrays {
        j.not_exercised.push((rule, why.to_string()));
        return done(j, Verdict::Skip, Some(why.to_string()));
    }
    let want = spec.expected_values();
    let consume = |pending: bool| -> Result<Result<Vec<f64>, String>, String> {
        let text = {
            let mut v: serde_json::Value = serde_json::from_str(&spec.json()).expect("json");
            v["pending"] = serde_json::Value::Bool(pending);
            v.to_string()
        };
        let (h, v) = bridge.call("cai_consume", &[], &text)?;
        if let Some(h) = h {
            bridge.drop_handle(h);
        }
        if let Some(e) = v.get("harness_error") {
            return Err(format!(
                "the device could not make the harness's array: {}",
                e["message"]
            ));
        }
        if let Some(e) = crate::dlpack::bridge::PyError::of(&v) {
            return Ok(Err(e.to_string()));
        }
        Ok(Ok(v["values"]
            .as_array()
            .map(|a| a.iter().filter_map(|x| x.as_f64()).collect())
            .unwrap_or_default()))
    };
    let first_difference = |got: &[f64]| -> Option<String> {
        if got.len() != want.len() {
            return Some(format!("{} values, not {}", got.len(), want.len()));
        }
        got.iter().zip(&want).position(|(g, w)| g != w).map(|i| {
            format!(
                "value {i} (C order) is {}, not {}",
                number(got[i]),
                number(want[i])
            )
        })
    };
    let control = match consume(false) {
        Err(e) => return done(j, Verdict::Error, Some(e)),
        Ok(Err(e)) => {
            return done(
                j,
                Verdict::Limitation,
                Some(format!("cai_consume raised {e}")),
            )
        }
        Ok(Ok(v)) => v,
    };
    if let Some(d) = first_difference(&control) {
        j.not_exercised.push((
            rule,
            format!("with no work pending the consumer already reads wrong values ({d})"),
        ));
        return done(
            j,
            Verdict::Fail,
            Some(format!(
                "the consumer's values are wrong with no work pending: {d}"
            )),
        );
    }
    match consume(true) {
        Err(e) => done(j, Verdict::Error, Some(e)),
        Ok(Err(e)) => done(
            j,
            Verdict::Limitation,
            Some(format!("cai_consume raised {e}")),
        ),
        Ok(Ok(got)) => {
            j.checked.push(rule);
            if let Some(d) = first_difference(&got) {
                j.violations.push(Violation {
                    rule,
                    at: "cai_consume(obj)".into(),
                    evidence: format!("with the values still being written by work on the exported stream, {d} (with nothing pending it reads them right)"),
                });
                done(j, Verdict::Fail, None)
            } else {
                done(j, Verdict::Pass, None)
            }
        }
    }
}

/// The ID of the consumer case over `spec`.
pub fn consumer_id(spec: &CaseSpec) -> String {
    format!("cai/consumer/{}", spec.name)
}

/// A value for evidence: exponent form when it is very large or small.
fn number(v: f64) -> String {
    if v != 0.0 && !(1e-6..1e15).contains(&v.abs()) {
        format!("{v:e}")
    } else {
        v.to_string()
    }
}

//! `certify --cai --consumer py:FILE.py`: the harness hands the adapter's
//! `cai_consume(obj)` an array whose values are still being written by work
//! on the exported stream, and compares what the consumer read with the
//! finished values (`cai.consumer.sync`). The arrays come from the software
//! device (the adapter's `cai_device_array(spec)`), or on CUDA from the
//! harness itself: device memory written late on a stream of its own (a
//! spin kernel, then the copy), that stream in the dict.

use std::sync::Arc;
use std::time::Instant;

use super::check::{Judged, Violation};
use super::run::{finished, kind_and_size, viewed_layout, whole_bytes, CaseSpec};
use crate::device::{Device, Kind, Stream};
use crate::dlpack::bridge::Bridge;
use crate::report::{Case, Verdict};

/// Where the arrays handed to a consumer come from.
#[derive(Debug, Clone, PartialEq)]
pub enum Arrays {
    /// The adapter's device: its `cai_device_array(spec)`.
    Adapter,
    /// The harness's own CUDA memory and stream.
    Cuda,
    /// None can be made here, with the reason (the cases are skipped).
    Unavailable(String),
}

/// A CUDA array the harness made for one consume call: freed (after the
/// device finished its late write) when dropped.
struct CudaArray {
    dev: Arc<dyn Device>,
    ptr: usize,
    stream: Stream,
}

impl Drop for CudaArray {
    fn drop(&mut self) {
        let _ = self.dev.synchronize();
        let _ = self.dev.free(self.ptr);
        let _ = self.dev.stream_destroy(self.stream);
    }
}

/// The stale bytes a pending array holds until its late write lands.
const STALE: u8 = 0xEE;

/// `spec`'s whole array in CUDA memory, its values written late on a new
/// stream when `pending` (stale bytes until then), and the dict the
/// bridge's object exports for its view: shape, typestr, strides, data
/// (0 for a zero-size array), version 3 and that stream.
fn cuda_array(spec: &CaseSpec, pending: bool) -> Result<(CudaArray, serde_json::Value), String> {
    let dev = crate::device::backend(Kind::Cuda)?;
    let (_, size) = kind_and_size(spec.typestr)
        .ok_or_else(|| format!("typestr {} cannot be made", spec.typestr))?;
    let bytes =
        whole_bytes(spec).ok_or_else(|| format!("typestr {} cannot be made", spec.typestr))?;
    let ptr = dev.alloc(Kind::Cuda, bytes.len().max(1))?;
    let stream = match dev.stream_create() {
        Ok(s) => s,
        Err(e) => {
            let _ = dev.free(ptr);
            return Err(e);
        }
    };
    let array = CudaArray { dev, ptr, stream };
    if pending {
        array.dev.copy_from_host(ptr, &vec![STALE; bytes.len()])?;
        array.dev.write_late(stream, ptr, &bytes)?;
    } else {
        array.dev.copy_from_host(ptr, &bytes)?;
    }
    let (shape, strides) = viewed_layout(spec, size);
    let data = if bytes.is_empty() { 0 } else { ptr };
    let dict = serde_json::json!({
        "ptr": data,
        "shape": shape,
        "strides": strides,
        "typestr": spec.typestr,
        "stream": stream.0,
    });
    Ok((array, dict))
}

/// Runs one consumer case: `spec` (with work pending) handed to the
/// adapter's cai_consume, after the same array with nothing pending.
pub fn run_consumer_case(bridge: &Bridge, spec: &CaseSpec, arrays: &Arrays, replay: &str) -> Case {
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
    if let Arrays::Unavailable(why) = arrays {
        j.not_exercised.push((rule, why.to_string()));
        return done(j, Verdict::Skip, Some(why.to_string()));
    }
    let want = spec.expected_values();
    let consume = |pending: bool| -> Result<Result<Vec<f64>, String>, String> {
        let mut v: serde_json::Value = serde_json::from_str(&spec.json()).expect("json");
        v["pending"] = serde_json::Value::Bool(pending);
        // Held until the call returned: the memory outlives the read.
        let _held = match arrays {
            Arrays::Cuda => {
                let (array, dict) = cuda_array(spec, pending)
                    .map_err(|e| format!("the harness could not make its CUDA array: {e}"))?;
                v["cuda_array"] = dict;
                Some(array)
            }
            _ => None,
        };
        let (h, v) = bridge.call("cai_consume", &[], &v.to_string())?;
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
    let first_difference = |got: &[f64]| first_difference(got, &want);
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

/// Where the values a consumer read first differ from `want`, if they do.
pub(super) fn first_difference(got: &[f64], want: &[f64]) -> Option<String> {
    if got.len() != want.len() {
        return Some(format!("{} values, not {}", got.len(), want.len()));
    }
    got.iter().zip(want).position(|(g, w)| g != w).map(|i| {
        format!(
            "value {i} (C order) is {}, not {}",
            number(got[i]),
            number(want[i])
        )
    })
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

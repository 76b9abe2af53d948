//! `certify --cai --producer py:FILE.py`: the harness consumes what the
//! adapter's `cai_object(spec)` exports. Each case asks for one array, reads
//! its `__cuda_array_interface__` through the bridge, judges the dict
//! ([`super::check`]) and then, where it can reach the memory, plays a
//! strict consumer: it synchronizes on the exported stream only, reads the
//! values, synchronizes the whole device, reads again, drops the dict and
//! reads a third time. Last, where the object also exports DLPack or an
//! Arrow device array, it compares their descriptions with the dict's
//! ([`super::exports`], the `cai.agree.*` rules).
//!
//! Memory is reachable on the software device (adapters/cai/softdevice.py:
//! host memory, read through process_vm_readv). CUDA memory needs a driver,
//! and this version does not read it: those rules are not exercised, with
//! the reason.

use std::time::Instant;

use super::check::{self, Judged, Layout, Stream, Violation};
use super::value::Py;
use crate::dlpack::bridge::{Bridge, Handle};
use crate::report::{Case, NotExercised, RuleViolation, Verdict};

/// One array the adapter is asked for.
#[derive(Debug, Clone, Copy)]
pub struct CaseSpec {
    pub name: &'static str,
    pub typestr: &'static str,
    pub dtype: &'static str,
    pub shape: &'static [u64],
    /// "step": every second row of the array (explicit strides).
    pub view: Option<&'static str>,
    /// The values are still being written by work on a stream.
    pub pending: bool,
}

/// The built-in cases, in a fixed order (IDs are stable).
pub const CASES: &[CaseSpec] = &[
    CaseSpec {
        name: "f8-4x3",
        typestr: "<f8",
        dtype: "float64",
        shape: &[4, 3],
        view: None,
        pending: false,
    },
    CaseSpec {
        name: "i4-6x2-step",
        typestr: "<i4",
        dtype: "int32",
        shape: &[6, 2],
        view: Some("step"),
        pending: false,
    },
    CaseSpec {
        name: "u1-5",
        typestr: "|u1",
        dtype: "uint8",
        shape: &[5],
        view: None,
        pending: false,
    },
    CaseSpec {
        name: "b1-4",
        typestr: "|b1",
        dtype: "bool",
        shape: &[4],
        view: None,
        pending: false,
    },
    CaseSpec {
        name: "f4-0x3",
        typestr: "<f4",
        dtype: "float32",
        shape: &[0, 3],
        view: None,
        pending: false,
    },
    CaseSpec {
        name: "f8-8-pending",
        typestr: "<f8",
        dtype: "float64",
        shape: &[8],
        view: None,
        pending: true,
    },
    CaseSpec {
        name: "i8-6-step-pending",
        typestr: "<i8",
        dtype: "int64",
        shape: &[6],
        view: Some("step"),
        pending: true,
    },
];

impl CaseSpec {
    pub fn id(&self) -> String {
        format!("cai/producer/{}", self.name)
    }

    /// The values of the whole (unviewed) array, flat, C order.
    pub(super) fn values(&self) -> Vec<i64> {
        let n: u64 = self.shape.iter().product();
        (0..n as i64)
            .map(|i| {
                if self.dtype == "bool" {
                    (i % 3 != 1) as i64
                } else {
                    (i * 7) % 101 - 3 * (self.dtype.starts_with('i') as i64) * (i % 2)
                }
            })
            .collect()
    }

    /// What the adapter's cai_object is given.
    pub fn json(&self) -> String {
        serde_json::json!({
            "typestr": self.typestr,
            "dtype": self.dtype,
            "shape": self.shape,
            "values": self.values(),
            "view": self.view,
            "pending": self.pending,
        })
        .to_string()
    }

    /// Each element's expected bytes, in C order of the viewed shape.
    fn expected(&self, kind: char, size: usize) -> Vec<Vec<u8>> {
        let values = self.values();
        self.viewed()
            .into_iter()
            .map(|flat| encode(values[flat], kind, size))
            .collect()
    }

    /// Each element's expected value, in C order of the viewed shape.
    pub(super) fn expected_values(&self) -> Vec<f64> {
        let values = self.values();
        self.viewed()
            .into_iter()
            .map(|flat| values[flat] as f64)
            .collect()
    }

    /// The flat index into the whole array of each element of the view.
    fn viewed(&self) -> Vec<usize> {
        let mut shape = self.shape.to_vec();
        let step = self.view == Some("step") && !shape.is_empty();
        if step {
            shape[0] = shape[0].div_ceil(2);
        }
        let inner: u64 = self.shape.iter().skip(1).product();
        let count: u64 = shape.iter().product();
        (0..count)
            .map(|k| {
                let (row, rest) = if inner == 0 {
                    (0, 0)
                } else {
                    (k / inner.max(1), k % inner.max(1))
                };
                (if step { row * 2 * inner + rest } else { k }) as usize
            })
            .collect()
    }
}

/// The element kind and size of a CAI typestr (`<f8`, `|b1`, `<i8`).
pub(super) fn kind_and_size(typestr: &str) -> Option<(char, usize)> {
    let mut c = typestr.get(1..)?.chars();
    let kind = c.next()?;
    let size = c.as_str().parse().ok()?;
    Some((kind, size))
}

/// The whole (unviewed) array's bytes, C order.
pub(super) fn whole_bytes(spec: &CaseSpec) -> Option<Vec<u8>> {
    let (kind, size) = kind_and_size(spec.typestr)?;
    Some(
        spec.values()
            .into_iter()
            .flat_map(|v| encode(v, kind, size))
            .collect(),
    )
}

/// The shape and strides (in bytes; `None`: C-contiguous) of the viewed
/// array over the whole one: "step" takes every second row.
pub(super) fn viewed_layout(spec: &CaseSpec, size: usize) -> (Vec<u64>, Option<Vec<i64>>) {
    let mut shape = spec.shape.to_vec();
    if spec.view != Some("step") || shape.is_empty() {
        return (shape, None);
    }
    let mut strides = vec![size as i64; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * shape[d + 1] as i64;
    }
    strides[0] *= 2;
    shape[0] = shape[0].div_ceil(2);
    (shape, Some(strides))
}

fn encode(v: i64, kind: char, size: usize) -> Vec<u8> {
    match (kind, size) {
        ('f', 4) => (v as f32).to_le_bytes().to_vec(),
        ('f', 8) => (v as f64).to_le_bytes().to_vec(),
        ('b', _) => vec![(v != 0) as u8],
        (_, n) => v.to_le_bytes()[..n].to_vec(),
    }
}

/// Reads every element of `l` (C order of its shape): through
/// process_vm_readv on the software device, or on CUDA by one copy of the
/// extent the strides reach to the host (the driver's cuMemcpy), then
/// indexed there. Err names the first unreadable address.
fn read_elements_on(
    cuda: Option<&dyn crate::device::Device>,
    l: &Layout,
    size: usize,
) -> Result<Vec<Vec<u8>>, String> {
    let Some(dev) = cuda else {
        return read_elements(l, size);
    };
    let Some((lo, nbytes)) = l.extent(size) else {
        return Ok(Vec::new());
    };
    let start = (l.ptr as i64).wrapping_add(lo) as usize;
    let bytes = dev.copy_to_host(start, nbytes as usize)?;
    let mut out = Vec::new();
    for_each_element(l, |offset| {
        let at = (offset - lo) as usize;
        out.push(bytes[at..at + size].to_vec());
    });
    Ok(out)
}

/// Calls `f` with the byte offset (from the data pointer) of every element
/// of `l`, in C order of its shape.
fn for_each_element(l: &Layout, mut f: impl FnMut(i64)) {
    let mut index = vec![0u64; l.shape.len()];
    for _ in 0..l.elements() {
        f(index
            .iter()
            .zip(&l.strides)
            .map(|(i, s)| *i as i64 * s)
            .sum());
        for d in (0..index.len()).rev() {
            index[d] += 1;
            if index[d] < l.shape[d] {
                break;
            }
            index[d] = 0;
        }
    }
}

/// Reads every element of `l` (C order of its shape) through
/// process_vm_readv; Err names the first unreadable address.
fn read_elements(l: &Layout, size: usize) -> Result<Vec<Vec<u8>>, String> {
    let mut out = Vec::with_capacity(l.elements() as usize);
    let mut unreadable = None;
    for_each_element(l, |offset| {
        if unreadable.is_some() {
            return;
        }
        let addr = (l.ptr as i64).wrapping_add(offset) as usize;
        match crate::abi::hostmem::read(addr, size) {
            Some(b) => out.push(b),
            None => unreadable = Some(addr),
        }
    });
    match unreadable {
        Some(addr) => Err(format!("{addr:#x} cannot be read")),
        None => Ok(out),
    }
}

/// The first difference between what was read and what was expected.
fn difference(got: &[Vec<u8>], want: &[Vec<u8>]) -> Option<String> {
    if got.len() != want.len() {
        return Some(format!("{} elements, not {}", got.len(), want.len()));
    }
    got.iter().zip(want).position(|(g, w)| g != w).map(|i| {
        format!(
            "element {i} (C order) is {:02x?}, not {:02x?}",
            got[i], want[i]
        )
    })
}

/// Where the memory can be reached, or why not.
#[derive(Debug, Clone, PartialEq)]
pub enum Reach {
    /// The adapter's software device: host memory, its own sync and tables.
    Software,
    /// A CUDA device, through the driver (the harness's CUDA backend): its
    /// pointer attributes, copies to the host, stream and context
    /// synchronization.
    Cuda,
    /// Nothing reaches it, with the reason.
    Unreachable(String),
}

impl Reach {
    /// From the adapter's CAI_DEVICE and this machine.
    pub fn of(device: &str) -> Reach {
        if device == "software" {
            return Reach::Software;
        }
        if !crate::device::cuda_driver_loads() {
            return Reach::Unreachable("no CUDA driver on this machine: the memory behind a CUDA pointer and its streams cannot be reached (SKIPPED: needs a GPU)".into());
        }
        match crate::device::backend(crate::device::Kind::Cuda) {
            Ok(_) => Reach::Cuda,
            Err(e) => Reach::Unreachable(format!(
                "the CUDA driver loads but the harness's CUDA backend cannot start: {e}"
            )),
        }
    }

    /// The device the memory steps go through: the CUDA backend, or
    /// `None` for the software device (the adapter answers).
    fn cuda(&self) -> Result<Option<std::sync::Arc<dyn crate::device::Device>>, String> {
        match self {
            Reach::Cuda => crate::device::backend(crate::device::Kind::Cuda).map(Some),
            _ => Ok(None),
        }
    }
}

/// The rules only memory access judges.
const MEMORY_RULES: [&str; 4] = [
    crate::rule!("cai.values"),
    crate::rule!("cai.producer.sync"),
    crate::rule!("cai.stream.lifetime"),
    crate::rule!("cai.data.lifetime"),
];

struct Steps<'a> {
    bridge: &'a Bridge,
    j: Judged,
    /// The CUDA backend the memory steps go through (`Reach::Cuda`);
    /// `None`: the software device's adapter answers them.
    cuda: Option<std::sync::Arc<dyn crate::device::Device>>,
}

impl Steps<'_> {
    fn ask(&self, op: &str, args: &[u64], text: &str) -> Result<serde_json::Value, String> {
        let (h, v) = self.bridge.call(op, args, text)?;
        if let Some(h) = h {
            self.bridge.drop_handle(h);
        }
        if let Some(e) = crate::dlpack::bridge::PyError::of(&v) {
            return Err(e.to_string());
        }
        Ok(v["value"].clone())
    }

    fn sync(&self, stream: Option<u64>) -> Result<(), String> {
        if let Some(dev) = &self.cuda {
            return match stream {
                None => dev.synchronize(),
                Some(h) => dev.synchronize_stream_handle(h),
            };
        }
        let text = serde_json::json!({ "stream": stream }).to_string();
        self.ask("cai_sync", &[], &text).map(|_| ())
    }

    fn accessible(&self, ptr: i64, nbytes: u64) -> Result<bool, String> {
        if let Some(dev) = &self.cuda {
            // Device-accessible: in one live CUDA allocation (device,
            // managed or pinned host memory), from ptr to its end.
            let p = ptr as usize;
            if let Ok(crate::device::MemoryKind::Host) = dev.memory_kind(p) {
                return Ok(false);
            }
            return Ok(dev
                .allocation_of(p)
                .is_some_and(|(base, len)| p >= base && p as u64 + nbytes <= (base + len) as u64));
        }
        let text = serde_json::json!({ "ptr": ptr, "nbytes": nbytes }).to_string();
        Ok(self
            .ask("cai_accessible", &[], &text)?
            .as_bool()
            .unwrap_or(false))
    }

    fn stream_alive(&self, h: u64) -> Result<bool, String> {
        if self.cuda.is_some() {
            // cuStreamQuery on a handle its library may have destroyed is
            // undefined behaviour (a freed handle), in this very process.
            return Err(format!("not asked on CUDA: the driver has no safe question for whether stream {h:#x} still exists (cuStreamQuery on a destroyed handle is undefined)"));
        }
        let text = serde_json::json!({ "stream": h }).to_string();
        Ok(self
            .ask("cai_stream_alive", &[], &text)?
            .as_bool()
            .unwrap_or(false))
    }

    fn fail(&mut self, rule: &'static str, at: &str, evidence: String) {
        self.j.checked.push(rule);
        self.j.violations.push(Violation {
            rule,
            at: at.into(),
            evidence,
        });
    }

    fn skip(&mut self, rule: &'static str, why: impl Into<String>) {
        self.j.not_exercised.push((rule, why.into()));
    }
}

/// Runs one case: the adapter's object, its dict judged, its memory read
/// where it can be.
pub fn run_case(bridge: &Bridge, spec: &CaseSpec, reach: &Reach, replay: &str) -> Case {
    let start = Instant::now();
    let (obj, v) = match bridge.call("cai_load", &[], &spec.json()) {
        Ok(x) => x,
        Err(e) => {
            return finished(
                spec,
                start,
                replay,
                Verdict::Error,
                Some(e),
                Judged::default(),
            )
        }
    };
    let obj = match (obj, crate::dlpack::bridge::PyError::of(&v)) {
        (Some(o), None) => o,
        (o, e) => {
            if let Some(o) = o {
                bridge.drop_handle(o);
            }
            let why = e.map_or("cai_object returned None".to_string(), |e| e.to_string());
            // No driver: the library cannot make the array (SKIPPED, with
            // the reason); otherwise it cannot hold this data.
            let (verdict, message) = match reach {
                Reach::Unreachable(r) if !crate::device::cuda_driver_loads() => {
                    (Verdict::Skip, format!("{r}; cai_object raised {why}"))
                }
                _ => (Verdict::Limitation, format!("cai_object raised {why}")),
            };
            return finished(
                spec,
                start,
                replay,
                verdict,
                Some(message),
                Judged::default(),
            );
        }
    };
    let out = judge_object(bridge, obj, spec, reach);
    bridge.drop_handle(obj);
    let _ = bridge.call("gc", &[], "");
    let verdict = if out.violations.is_empty() {
        Verdict::Pass
    } else {
        Verdict::Fail
    };
    finished(spec, start, replay, verdict, None, out)
}

fn judge_object(bridge: &Bridge, obj: Handle, spec: &CaseSpec, reach: &Reach) -> Judged {
    let (dict, v) = match bridge.call("cai_export", &[obj.0], "") {
        Ok(x) => x,
        Err(e) => {
            let mut j = Judged::default();
            j.skip_all(&e);
            return j;
        }
    };
    let top = match crate::dlpack::bridge::PyError::of(&v) {
        Some(e) => Err(format!("reading __cuda_array_interface__ raised {e}")),
        None => Py::from_json(&v["cai"]).map_err(|e| format!("the bridge's description: {e}")),
    };
    let cuda = match reach.cuda() {
        Ok(c) => c,
        Err(e) => {
            let mut j = Judged::default();
            j.skip_all(&format!("the CUDA backend: {e}"));
            return j;
        }
    };
    let mut s = Steps {
        bridge,
        cuda,
        j: match &top {
            Ok(top) => check::check(top),
            Err(e) => {
                let mut j = Judged::default();
                j.checked.push(crate::rule!("cai.dict"));
                j.violations.push(Violation {
                    rule: crate::rule!("cai.dict"),
                    at: "__cuda_array_interface__".into(),
                    evidence: e.clone(),
                });
                j
            }
        },
    };
    let mut dict = dict;
    memory(&mut s, &mut dict, spec, reach);
    if let Some(d) = dict {
        bridge.drop_handle(d);
    }
    // After the memory steps (which judge the dict against the data), so
    // that a CAI entry already known wrong is not reported again.
    super::exports::judge(bridge, obj, &mut s.j);
    s.j
}

impl Judged {
    fn skip_all(&mut self, why: &str) {
        for r in crate::rules::cai::CAI_RULES {
            self.not_exercised.push((r.id, why.to_string()));
        }
    }
}

/// The consumer's part: synchronize, read, read again, drop the dict,
/// read a third time. `dict` is dropped (and taken) here when the lifetime
/// step runs.
fn memory(s: &mut Steps, dict: &mut Option<Handle>, spec: &CaseSpec, reach: &Reach) {
    let Some(l) = s.j.layout.clone() else {
        for r in MEMORY_RULES {
            s.skip(
                r,
                "the dict's shape, data, typestr or strides cannot be read",
            );
        }
        return;
    };
    if let Reach::Unreachable(why) = reach {
        if l.elements() > 0 && l.ptr != 0 {
            s.skip(crate::rule!("cai.data.accessible"), why.clone());
        }
        for r in MEMORY_RULES {
            s.skip(r, why.clone());
        }
        return;
    }
    // cai.stream.lifetime: the exported stream exists while the object does.
    let handle = match &l.stream {
        Stream::Handle(h) => Some(*h),
        _ => None,
    };
    let check_stream = |s: &mut Steps, when: &str| {
        let Some(h) = handle else { return };
        match s.stream_alive(h) {
            Ok(true) => s.j.checked.push(crate::rule!("cai.stream.lifetime")),
            Ok(false) => s.fail(
                crate::rule!("cai.stream.lifetime"),
                "__cuda_array_interface__[\"stream\"]",
                format!("stream {h:#x} does not exist {when}, while the object is alive"),
            ),
            Err(e) => s.skip(
                crate::rule!("cai.stream.lifetime"),
                format!("the device cannot say whether a stream exists: {e}"),
            ),
        }
    };
    match &l.stream {
        Stream::Handle(_) => check_stream(s, "when the dict is read"),
        Stream::None => s.skip(
            crate::rule!("cai.stream.lifetime"),
            "stream is None or absent: no stream was exported",
        ),
        Stream::Default(n) => s.skip(
            crate::rule!("cai.stream.lifetime"),
            format!("stream {n} is a default stream, which always exists"),
        ),
        Stream::Unusable(why) => s.skip(crate::rule!("cai.stream.lifetime"), why.clone()),
    }
    let Some(size) = l.itemsize else {
        skip_reads(s, "typestr cannot be read");
        return;
    };
    let Some((lo, nbytes)) = l.extent(size) else {
        skip_reads(s, "the array has no elements");
        return;
    };
    let at_data = "__cuda_array_interface__[\"data\"]";
    if l.ptr == 0 {
        skip_reads(s, "the data pointer is 0 (cai.data.accessible)");
        return;
    }
    let start = (l.ptr as i64).wrapping_add(lo);
    match s.accessible(start, nbytes) {
        Ok(true) => s.j.checked.push(crate::rule!("cai.data.accessible")),
        Ok(false) => {
            s.fail(
                crate::rule!("cai.data.accessible"),
                at_data,
                format!("[{start:#x}, +{nbytes}) (what shape, strides and typestr reach from pointer {:#x}) is not in a live allocation of the device", l.ptr),
            );
            skip_reads(s, "the data is not device-accessible (cai.data.accessible)");
            return;
        }
        Err(e) => {
            s.skip(
                crate::rule!("cai.data.accessible"),
                format!("the device cannot say: {e}"),
            );
        }
    }
    let Some((kind, size)) = l.element else {
        skip_reads(s, "the harness compares b1, i/u 1-8, f4 and f8 in little-endian or byte-order-free typestrs only");
        return;
    };
    let want = spec.expected(kind, size);
    // A strict consumer: synchronize on the exported stream only.
    let synced = match &l.stream {
        Stream::None => Ok(()),
        Stream::Default(n) => s.sync(Some(u64::from(*n))),
        Stream::Handle(h) => s.sync(Some(*h)),
        Stream::Unusable(why) => Err(why.clone()),
    };
    let cuda = s.cuda.clone();
    let read = |l: &Layout| read_elements_on(cuda.as_deref(), l, size);
    let first = read(&l);
    // Then everything: what the values are once no work is pending.
    let _ = s.sync(None);
    let settled = read(&l);
    match &settled {
        Err(e) => s.fail(
            crate::rule!("cai.values"),
            at_data,
            format!("the data cannot be read: {e}"),
        ),
        Ok(got) => match difference(got, &want) {
            Some(d) => s.fail(crate::rule!("cai.values"), at_data, d),
            None => s.j.checked.push(crate::rule!("cai.values")),
        },
    }
    let settled_ok = settled
        .as_ref()
        .is_ok_and(|g| difference(g, &want).is_none());
    if spec.pending {
        producer_sync(s, &l, &synced, settled_ok, &first, &want);
    }
    // cai.data.lifetime: drop the dict, collect, read again.
    if !settled_ok {
        s.skip(
            crate::rule!("cai.data.lifetime"),
            "the values were wrong before the dict was dropped (cai.values)",
        );
        return;
    }
    if let Some(d) = dict.take() {
        s.bridge.drop_handle(d);
    }
    let _ = s.bridge.call("gc", &[], "");
    check_stream(s, "after the dict was dropped");
    let live = s.accessible(start, nbytes);
    let again = read(&l);
    match (live, again) {
        (Ok(false), _) => s.fail(
            crate::rule!("cai.data.lifetime"),
            at_data,
            format!("[{start:#x}, +{nbytes}) is no longer in a live allocation once the dict is dropped, while the object is alive"),
        ),
        (_, Err(e)) => s.fail(crate::rule!("cai.data.lifetime"), at_data, format!("once the dict is dropped: {e}")),
        (_, Ok(got)) => match difference(&got, &want) {
            Some(d) => s.fail(crate::rule!("cai.data.lifetime"), at_data, format!("once the dict is dropped, while the object is alive: {d}")),
            None => s.j.checked.push(crate::rule!("cai.data.lifetime")),
        },
    }
}

/// Skips the rules that read the data (`cai.values`, `cai.producer.sync`,
/// `cai.data.lifetime`), with why.
fn skip_reads(s: &mut Steps, why: &str) {
    for r in [
        crate::rule!("cai.values"),
        crate::rule!("cai.producer.sync"),
        crate::rule!("cai.data.lifetime"),
    ] {
        s.skip(r, why);
    }
}

/// `cai.producer.sync`: the values read after synchronizing on the
/// exported stream only (`first`) are right, where those read with no work
/// pending (`settled_ok`) are.
fn producer_sync(
    s: &mut Steps,
    l: &Layout,
    synced: &Result<(), String>,
    settled_ok: bool,
    first: &Result<Vec<Vec<u8>>, String>,
    want: &[Vec<u8>],
) {
    let at_data = "__cuda_array_interface__[\"data\"]";
    match (synced, settled_ok, first) {
        (Err(why), _, _) => s.skip(
            crate::rule!("cai.producer.sync"),
            format!("the harness could not synchronize on the exported stream: {why}"),
        ),
        (_, false, _) => s.skip(
            crate::rule!("cai.producer.sync"),
            "the values are wrong even with no work pending (cai.values)",
        ),
        (Ok(()), true, Ok(got)) => match difference(got, want) {
            None => s.j.checked.push(crate::rule!("cai.producer.sync")),
            Some(d) => {
                let how = match &l.stream {
                    Stream::None => {
                        "with stream None the harness synchronized on nothing, and".to_string()
                    }
                    Stream::Default(n) => {
                        format!("after synchronizing on the exported stream {n} only,")
                    }
                    Stream::Handle(h) => {
                        format!("after synchronizing on the exported stream {h:#x} only,")
                    }
                    Stream::Unusable(w) => format!("({w})"),
                };
                s.fail(
                    crate::rule!("cai.producer.sync"),
                    at_data,
                    format!("{how} {d}; after synchronizing the whole device the values are right"),
                )
            }
        },
        (Ok(()), true, Err(e)) => s.fail(
            crate::rule!("cai.producer.sync"),
            at_data,
            format!("before synchronizing the whole device the data could not be read: {e}"),
        ),
    }
}

pub(super) fn finished(
    spec: &CaseSpec,
    start: Instant,
    replay: &str,
    verdict: Verdict,
    message: Option<String>,
    j: Judged,
) -> Case {
    let violations: Vec<RuleViolation> = j
        .violations
        .iter()
        .map(|v| RuleViolation {
            rule: v.rule.into(),
            level: crate::rules::find(v.rule).map_or("MUST".into(), |r| r.level.to_string()),
            at: v.at.clone(),
            evidence: v.evidence.clone(),
        })
        .collect();
    let mut not_exercised: Vec<NotExercised> = Vec::new();
    for (r, why) in &j.not_exercised {
        if !j.checked.contains(r) && !not_exercised.iter().any(|n| n.rule == *r) {
            not_exercised.push(NotExercised {
                rule: r.to_string(),
                reason: why.clone(),
            });
        }
    }
    let mut checked: Vec<String> = Vec::new();
    for r in &j.checked {
        if !checked.iter().any(|c| c == r) {
            checked.push(r.to_string());
        }
    }
    Case {
        id: spec.id(),
        path: "cuda_array_interface".into(),
        scenario: spec.name.into(),
        batch: None,
        slice: None,
        verdict,
        message: message.or_else(|| {
            (!violations.is_empty()).then(|| {
                violations
                    .iter()
                    .map(|v| v.rule.clone())
                    .collect::<Vec<_>>()
                    .join(", ")
            })
        }),
        differences: violations
            .iter()
            .take(20)
            .map(|v| format!("{} at {}: {}", v.rule, v.at, v.evidence))
            .collect(),
        duration_us: start.elapsed().as_micros() as u64,
        replay: format!("{replay} --exact {}", spec.id()),
        output: None,
        changed: Vec::new(),
        view: None,
        checked,
        violations,
        not_exercised,
        flaky: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_view_takes_every_second_row() {
        let spec = CASES.iter().find(|c| c.name == "i4-6x2-step").unwrap();
        assert_eq!(spec.viewed(), vec![0, 1, 4, 5, 8, 9]);
        let zero = CASES.iter().find(|c| c.name == "f4-0x3").unwrap();
        assert!(zero.viewed().is_empty());
        assert_eq!(encode(-3, 'i', 4), vec![0xfd, 0xff, 0xff, 0xff]);
        assert_eq!(encode(2, 'f', 8), 2f64.to_le_bytes().to_vec());
    }

    #[test]
    fn elements_are_read_through_strides_and_unreadable_memory_is_an_error() {
        let data: Vec<i32> = (0..12).collect();
        let l = Layout {
            ptr: data.as_ptr() as u64,
            shape: vec![3, 2],
            strides: vec![16, 4],
            element: Some(('i', 4)),
            itemsize: Some(4),
            typestr: Some(('<', 'i', 4)),
            read_only: Some(false),
            stream: Stream::None,
        };
        let got = read_elements(&l, 4).unwrap();
        let want: Vec<Vec<u8>> = [0, 1, 4, 5, 8, 9]
            .iter()
            .map(|v: &i32| v.to_le_bytes().to_vec())
            .collect();
        assert_eq!(got, want);
        assert!(difference(&got, &want).is_none());
        assert!(difference(&got[..5], &want).unwrap().contains("5 elements"));
        let bad = Layout { ptr: 8, ..l };
        assert!(read_elements(&bad, 4)
            .unwrap_err()
            .contains("cannot be read"));
    }

    /// The harness's own arrays for a consumer on CUDA are the whole
    /// array's bytes ([`whole_bytes`]) under the view's shape and strides
    /// ([`viewed_layout`]): read through them, every case's elements are
    /// the ones it expects.
    #[test]
    fn the_harness_arrays_describe_the_expected_elements() {
        for spec in CASES {
            let (kind, size) = kind_and_size(spec.typestr).unwrap();
            let bytes = whole_bytes(spec).unwrap();
            let (shape, strides) = viewed_layout(spec, size);
            let strides = strides.unwrap_or_else(|| {
                let mut st = vec![size as i64; shape.len()];
                for d in (0..shape.len().saturating_sub(1)).rev() {
                    st[d] = st[d + 1] * shape[d + 1] as i64;
                }
                st
            });
            let l = Layout {
                ptr: bytes.as_ptr() as u64,
                shape,
                strides,
                element: Some((kind, size)),
                itemsize: Some(size),
                typestr: None,
                read_only: Some(false),
                stream: Stream::None,
            };
            let got = if bytes.is_empty() {
                Vec::new()
            } else {
                read_elements(&l, size).unwrap()
            };
            assert_eq!(got, spec.expected(kind, size), "{}", spec.name);
        }
        assert_eq!(kind_and_size("<f8"), Some(('f', 8)));
        assert_eq!(kind_and_size("|b1"), Some(('b', 1)));
        assert_eq!(kind_and_size("<"), None);
    }

    /// Through a device backend (CUDA's path: one copy of the extent the
    /// strides reach, then indexed on the host), here the emulated
    /// device's memory: the same elements as process_vm_readv reads, with
    /// strides that step and go backwards too.
    #[test]
    fn elements_are_read_through_a_device_copy_of_the_extent() {
        let dev = crate::device::backend(crate::device::Kind::Emulated).unwrap();
        let data: Vec<u8> = (0..12i32).flat_map(|v| v.to_le_bytes()).collect();
        let base = dev
            .alloc(crate::device::Kind::Emulated, data.len())
            .unwrap();
        dev.copy_from_host(base, &data).unwrap();
        let layout = |ptr: usize, shape: Vec<u64>, strides: Vec<i64>| Layout {
            ptr: ptr as u64,
            shape,
            strides,
            element: Some(('i', 4)),
            itemsize: Some(4),
            typestr: Some(('<', 'i', 4)),
            read_only: Some(false),
            stream: Stream::None,
        };
        let ints =
            |v: &[i32]| -> Vec<Vec<u8>> { v.iter().map(|v| v.to_le_bytes().to_vec()).collect() };
        // Every second row of a 3x2 view of 4 columns; then the last row
        // first (a negative stride from element 8).
        let step = layout(base, vec![3, 2], vec![16, 4]);
        let back = layout(base + 32, vec![3, 2], vec![-16, 4]);
        for (l, want) in [
            (step, ints(&[0, 1, 4, 5, 8, 9])),
            (back, ints(&[8, 9, 4, 5, 0, 1])),
        ] {
            let got = read_elements_on(Some(&*dev), &l, 4).unwrap();
            assert_eq!(got, want);
            assert_eq!(got, read_elements(&l, 4).unwrap(), "the host path agrees");
        }
        let empty = layout(base, vec![0, 2], vec![8, 4]);
        assert!(read_elements_on(Some(&*dev), &empty, 4).unwrap().is_empty());
        dev.free(base).unwrap();
    }
}

//! The DLPack cases: what the harness asks of a producer's `__dlpack__` and
//! hands to a consumer's `from_dlpack`, and how each is judged under the
//! rules of [`crate::rules::dlpack`].

use std::collections::BTreeSet;
use std::time::Instant;

use crate::abi::dlpack::{DLPackVersion, FLAG_IS_COPIED, KDL_CPU, KDL_CUDA};
use crate::report::{Case, NotExercised, RuleViolation, Verdict};
use crate::rules;

use super::bridge::{Bridge, Handle, PyError};
use super::crossing;
use super::reader::{self, Observed};
use super::tensor::{HarnessTensor, Layout, Spec};
use super::trampoline;
use super::{DType, Logical, View};

/// What the harness asks `__dlpack__` for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Request {
    /// No keywords (a legacy consumer): a `dltensor` capsule.
    Legacy,
    /// `max_version=(1, 3)`.
    V1,
    /// `max_version=(1, 3), copy=True`.
    Copy,
    /// `max_version=(1, 3), dl_device=(kDLCUDA, 0)` of a CPU array.
    Cuda,
    /// `max_version=(1, 0)`: the oldest versioned consumer.
    V10,
    /// `max_version=(1, 99)`: a consumer of a later minor version (the
    /// producer answers with its own; minor versions are ABI-compatible).
    HigherMinor,
    /// `max_version=(2, 0)`: a consumer of a later major version.
    HigherMajor,
    /// `max_version=(1, 3), copy=False`.
    NoCopy,
    /// `max_version=(1, 3), dl_device=(kDLCUDA, 0), copy=False` of a CPU
    /// array: a copy is needed (cross-device), so BufferError.
    CudaNoCopy,
}

impl Request {
    pub fn name(self) -> &'static str {
        match self {
            Request::Legacy => "legacy",
            Request::V1 => "v1",
            Request::Copy => "copy",
            Request::Cuda => "cuda",
            Request::V10 => "v1.0",
            Request::HigherMinor => "v1.99",
            Request::HigherMajor => "v2.0",
            Request::NoCopy => "no-copy",
            Request::CudaNoCopy => "cuda-no-copy",
        }
    }

    /// Every request, in plan order.
    pub const ALL: [Request; 9] = [
        Request::Legacy,
        Request::V1,
        Request::Copy,
        Request::Cuda,
        Request::V10,
        Request::HigherMinor,
        Request::HigherMajor,
        Request::NoCopy,
        Request::CudaNoCopy,
    ];

    pub fn parse(s: &str) -> Option<Request> {
        Request::ALL.into_iter().find(|r| r.name() == s)
    }

    fn kwargs(self) -> &'static str {
        match self {
            Request::Legacy => "{}",
            Request::V1 => r#"{"max_version": [1, 3]}"#,
            Request::Copy => r#"{"max_version": [1, 3], "copy": true}"#,
            Request::Cuda => r#"{"max_version": [1, 3], "dl_device": [2, 0]}"#,
            Request::V10 => r#"{"max_version": [1, 0]}"#,
            Request::HigherMinor => r#"{"max_version": [1, 99]}"#,
            Request::HigherMajor => r#"{"max_version": [2, 0]}"#,
            Request::NoCopy => r#"{"max_version": [1, 3], "copy": false}"#,
            Request::CudaNoCopy => r#"{"max_version": [1, 3], "dl_device": [2, 0], "copy": false}"#,
        }
    }
}

/// One DLPack case.
#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    /// The library exports (`dlpack_load`, then `__dlpack__`).
    Producer {
        dtype: DType,
        shape: Vec<i64>,
        view: View,
        request: Request,
        /// Taken as a consumer takes it (renamed, deleted by the harness),
        /// or dropped untaken (its destructor must delete it).
        consume: bool,
    },
    /// A pair: the producer library's array (`dlpack_load`, a view of it)
    /// handed to the consumer library's `dlpack_read`; the values must
    /// arrive.
    Pair {
        dtype: DType,
        shape: Vec<i64>,
        view: View,
    },
    /// The library imports one of the harness's tensors (`dlpack_read`).
    Consumer {
        spec: Spec,
        /// How the harness's `__dlpack__` answers: `negotiate` (versioned
        /// when max_version allows), `versioned` only, `legacy` only.
        mode: &'static str,
    },
    /// The producer's deleter frees what each export holds
    /// (`dlpack.deleter.frees`): load, export, take, drop, delete, over
    /// and over, the bytes held counted by the allocation tracker.
    Frees { dtype: DType, shape: Vec<i64> },
    /// The producer's deleter called from a native thread that does not
    /// hold the GIL (`dlpack.deleter.without-gil`): export, take, drop
    /// the library's objects, delete on a fresh thread.
    DeleterThread {
        dtype: DType,
        shape: Vec<i64>,
        request: Request,
    },
    /// A consumer case on a device: the harness's tensor with its data in
    /// `device`'s memory (CUDA, or the harness's emulated device), skipped
    /// with the reason where this machine has no such device.
    OnDevice {
        spec: Spec,
        device: crate::device::Kind,
    },
    /// DLPack in, Arrow out: one of the harness's tensors into the
    /// library's `dlpack_to_arrow` (see [`crossing`]).
    ToArrow { spec: Spec },
    /// Arrow in, DLPack out: one of the harness's Arrow arrays into the
    /// library's `arrow_to_dlpack`, its `__dlpack__` then asked with
    /// `request` (see [`crossing`]).
    FromArrow {
        array: crossing::ArrowInput,
        request: Request,
        consume: bool,
    },
}

impl Kind {
    /// The adapter function the case needs.
    pub fn needs(&self) -> &'static str {
        match self {
            Kind::Producer { .. }
            | Kind::Pair { .. }
            | Kind::Frees { .. }
            | Kind::DeleterThread { .. } => "dlpack_load",
            Kind::Consumer { .. } | Kind::OnDevice { .. } => "dlpack_read",
            Kind::ToArrow { .. } => "dlpack_to_arrow",
            Kind::FromArrow { .. } => "arrow_to_dlpack",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct DlCase {
    pub id: String,
    pub kind: Kind,
}

pub(super) fn shape_name(shape: &[i64]) -> String {
    format!(
        "[{}]",
        shape
            .iter()
            .map(|d| d.to_string())
            .collect::<Vec<_>>()
            .join(",")
    )
}

/// The case plan: producer cases when `producer`, consumer cases when
/// `consumer`, in a fixed order (IDs are stable).
pub fn plan(producer: bool, consumer: bool) -> Vec<DlCase> {
    let mut out = Vec::new();
    let shapes: [&[i64]; 5] = [&[], &[0], &[7], &[4, 3], &[2, 3, 2]];
    if producer {
        let mut add = |dtype: DType, shape: &[i64], view: View, request: Request, consume: bool| {
            out.push(DlCase {
                id: format!(
                    "dlpack/producer/{}/{}/{}/{}{}",
                    dtype.name(),
                    shape_name(shape),
                    view.name(),
                    request.name(),
                    if consume { "" } else { "/untaken" }
                ),
                kind: Kind::Producer {
                    dtype,
                    shape: shape.to_vec(),
                    view,
                    request,
                    consume,
                },
            })
        };
        for dtype in DType::ALL {
            for shape in shapes {
                add(dtype, shape, View::Whole, Request::V1, true);
            }
        }
        for dtype in [DType::I32, DType::F64] {
            for shape in [&[7i64][..], &[4, 3], &[2, 3, 2]] {
                for view in [View::Step, View::Offset, View::Transpose] {
                    if view != View::Transpose || shape.len() == 2 {
                        add(dtype, shape, view, Request::V1, true);
                    }
                }
            }
        }
        // The strides dlpack.h's signed int64_t allows and compact exports
        // never show: negative (`x[::-1]`), zero (a broadcast) and gapped
        // along an inner axis (`x[:, ::2]`).
        for dtype in [DType::I32, DType::F64] {
            for shape in [&[7i64][..], &[4, 3], &[2, 3, 2]] {
                for view in [View::Reverse, View::Broadcast, View::ColumnStep] {
                    if view.applies(shape.len()) {
                        add(dtype, shape, view, Request::V1, true);
                    }
                }
            }
        }
        for shape in [&[7i64][..], &[4, 3]] {
            for request in [
                Request::Legacy,
                Request::Copy,
                Request::NoCopy,
                Request::Cuda,
                Request::CudaNoCopy,
                Request::V10,
                Request::HigherMinor,
                Request::HigherMajor,
            ] {
                add(DType::F32, shape, View::Whole, request, true);
            }
            for request in [Request::Legacy, Request::V1] {
                add(DType::F32, shape, View::Whole, request, false);
            }
        }
        out.push(DlCase {
            id: "dlpack/producer/float64/[1024]/whole/v1/frees".into(),
            kind: Kind::Frees {
                dtype: DType::F64,
                shape: vec![1024],
            },
        });
        for request in [Request::V1, Request::Legacy] {
            out.push(DlCase {
                id: format!(
                    "dlpack/producer/float64/[7]/whole/{}/deleter-thread",
                    request.name()
                ),
                kind: Kind::DeleterThread {
                    dtype: DType::F64,
                    shape: vec![7],
                    request,
                },
            });
        }
    }
    if consumer {
        let mut add = |spec: Spec, mode: &'static str, variant: &str| {
            out.push(DlCase {
                id: format!(
                    "dlpack/consumer/{}/{}/{}{}",
                    spec.dtype.name(),
                    shape_name(&spec.shape),
                    spec.layout.name(),
                    variant
                ),
                kind: Kind::Consumer { spec, mode },
            })
        };
        let spec = Spec::plain;
        for dtype in DType::ALL {
            for shape in &shapes[..4] {
                add(spec(dtype, shape, Layout::Contiguous), "negotiate", "");
            }
        }
        for layout in [
            Layout::Gaps,
            Layout::Transposed,
            Layout::Broadcast,
            Layout::ByteOffset,
            Layout::NullStrides,
            Layout::NegativeStrides,
        ] {
            for dtype in [DType::I32, DType::F64] {
                for shape in [&[7i64][..], &[4, 3], &[2, 3, 2]] {
                    if layout == Layout::Transposed && shape.len() < 2 {
                        continue;
                    }
                    add(spec(dtype, shape, layout), "negotiate", "");
                }
            }
        }
        // 0-d tensors as NumPy exports them: NULL shape and strides.
        for dtype in [DType::I32, DType::F64] {
            add(spec(dtype, &[], Layout::NullStrides), "negotiate", "");
        }
        let mut ro = spec(DType::I32, &[4, 3], Layout::Contiguous);
        ro.read_only = true;
        add(ro, "versioned", "/read-only");
        let mut major2 = spec(DType::I32, &[5], Layout::Contiguous);
        major2.version = DLPackVersion { major: 2, minor: 0 };
        major2.inaccessible = true;
        add(major2, "versioned", "/major-2");
        add(
            spec(DType::I32, &[4, 3], Layout::Contiguous),
            "legacy",
            "/legacy",
        );
    }
    if consumer {
        out.extend(plan_to_arrow());
    }
    if producer {
        out.extend(plan_from_arrow());
    }
    out
}

/// DLPack in, Arrow out (`dlpack_to_arrow`): every dtype as a vector, and
/// the layouts, sizes and flags of two.
fn plan_to_arrow() -> Vec<DlCase> {
    let mut out = Vec::new();
    let mut add = |dtype: DType, shape: &[i64], layout: Layout, read_only: bool| {
        let spec = Spec {
            read_only,
            ..Spec::plain(dtype, shape, layout)
        };
        out.push(DlCase {
            id: format!(
                "dlpack/to-arrow/{}/{}/{}{}",
                dtype.name(),
                shape_name(shape),
                layout.name(),
                if read_only { "/read-only" } else { "" }
            ),
            kind: Kind::ToArrow { spec },
        });
    };
    for dtype in DType::ALL {
        add(dtype, &[7], Layout::Contiguous, false);
    }
    for dtype in [DType::I32, DType::F64] {
        add(dtype, &[0], Layout::Contiguous, false);
        add(dtype, &[4, 3], Layout::Contiguous, false);
        add(dtype, &[4, 3], Layout::Transposed, false);
        add(dtype, &[7], Layout::Gaps, false);
        add(dtype, &[7], Layout::ByteOffset, false);
        add(dtype, &[], Layout::NullStrides, false);
    }
    add(DType::I32, &[7], Layout::Contiguous, true);
    out
}

/// Arrow in, DLPack out (`arrow_to_dlpack`): every type Arrow shares with
/// DLPack, then one with an offset, a null, no values, and each request.
fn plan_from_arrow() -> Vec<DlCase> {
    let mut out = Vec::new();
    let mut add = |array: crossing::ArrowInput, request: Request, consume: bool| {
        out.push(DlCase {
            id: format!(
                "dlpack/from-arrow/{}/{}{}",
                array.name(),
                request.name(),
                if consume { "" } else { "/untaken" }
            ),
            kind: Kind::FromArrow {
                array,
                request,
                consume,
            },
        });
    };
    let input = |dtype, length, offset, nulls| crossing::ArrowInput {
        dtype,
        length,
        offset,
        nulls,
    };
    for dtype in DType::ALL {
        if crossing::arrow_format(dtype).is_some() {
            add(input(dtype, 7, 0, false), Request::V1, true);
        }
    }
    add(input(DType::I32, 0, 0, false), Request::V1, true);
    add(input(DType::I32, 7, 2, false), Request::V1, true);
    add(input(DType::I32, 7, 0, true), Request::V1, true);
    add(input(DType::I32, 7, 0, false), Request::V1, false);
    for request in [Request::Legacy, Request::Copy, Request::Cuda] {
        add(input(DType::I32, 7, 0, false), request, true);
    }
    out
}

/// What a case saw.
#[derive(Default)]
pub(super) struct Obs {
    /// A capsule over the harness's tensor may outlive the case unrenamed
    /// (its destructor would still delete the tensor): keep it allocated.
    pub(super) keep_tensor: bool,
    pub(super) checked: BTreeSet<&'static str>,
    pub(super) violations: Vec<(&'static str, String, String)>,
    pub(super) not_exercised: Vec<(&'static str, String)>,
}

impl Obs {
    pub(super) fn check(&mut self, rule: &'static str) {
        self.checked.insert(rule);
    }
    pub(super) fn fail(&mut self, rule: &'static str, at: &str, evidence: impl Into<String>) {
        self.checked.insert(rule);
        self.violations
            .push((rule, at.to_string(), evidence.into()));
    }
    pub(super) fn skip(&mut self, rule: &'static str, why: impl Into<String>) {
        self.not_exercised.push((rule, why.into()));
    }
    fn findings(&mut self, at: &str, f: Vec<reader::Finding>) {
        for x in f {
            self.fail(x.rule, at, x.evidence);
        }
    }
}

pub(super) enum Ended {
    Ran,
    /// A pair's values did not arrive: why.
    Differs(String),
    /// A pair's values arrived with a type change: which.
    Changed(String),
    Limitation(String),
    /// The case cannot run on this machine (no such device): why.
    Skipped(String),
    Error(String),
}

/// The harness's data loaded into a producer library (which copies it),
/// and the view of it the case asks for: the library's objects (the
/// loaded array, the view if any) and the values the view holds.
pub(super) struct Loaded<'a> {
    pub(super) loaded: Held<'a>,
    pub(super) array: Held<'a>,
    pub(super) expected: Logical,
    /// Dropped after the library's objects (see Drop).
    pub(super) source: Option<HarnessTensor>,
}

impl Drop for Loaded<'_> {
    fn drop(&mut self) {
        // The library's objects first: one that did not copy still holds
        // the harness's tensor, deleted when it goes.
        self.array.release();
        self.loaded.release();
        let _ = self.loaded.bridge.call("gc", &[], "");
        if let Some(source) = self.source.take() {
            if source.deleted() == (0, 0) {
                source.leak(); // the library may still hold it
            }
        }
    }
}

impl Loaded<'_> {
    /// The object to export: the view, else the loaded array.
    fn obj(&self) -> u64 {
        if self.array.handle.is_some() {
            self.array.id()
        } else {
            self.loaded.id()
        }
    }
}

/// Loads `dtype` in `shape` into `bridge`'s library and makes `view` of
/// it; `Err(Ended)` when the library cannot (a limitation, `who` says
/// whose).
fn load_view<'a>(
    bridge: &'a Bridge,
    dtype: DType,
    shape: &[i64],
    view: View,
    who: &str,
) -> Result<Result<Loaded<'a>, Ended>, String> {
    let source = HarnessTensor::new(Spec::plain(dtype, shape, Layout::Contiguous))
        .map_err(|e| format!("the harness could not map its tensor: {e}"))?;
    let args = [
        source.versioned_ptr() as u64,
        source.legacy_ptr() as u64,
        KDL_CPU as u64,
        0,
    ];
    let (h, v) = bridge.call("load", &args, r#"{"mode": "negotiate"}"#)?;
    let loaded = Held::new(bridge, h);
    if let Some(e) = PyError::of(&v) {
        return Ok(Err(Ended::Limitation(format!(
            "{who} cannot hold {}{}: {e}",
            dtype.name(),
            shape_name(shape)
        ))));
    }
    let mut expected = source.expected().clone();
    let mut array = Held::new(bridge, None);
    if view != View::Whole {
        let (h, v) = bridge.call("view", &[loaded.id()], view.name())?;
        if let Some(e) = PyError::of(&v) {
            return Ok(Err(Ended::Limitation(format!(
                "{who} cannot make the view {}: {e}",
                view.name()
            ))));
        }
        array = Held::new(bridge, h);
        expected = expected.view(view);
    }
    Ok(Ok(Loaded {
        loaded,
        array,
        expected,
        source: Some(source),
    }))
}

/// A handle released when it goes out of scope.
pub(super) struct Held<'a> {
    pub(super) bridge: &'a Bridge,
    pub(super) handle: Option<Handle>,
}

impl<'a> Held<'a> {
    pub(super) fn new(bridge: &'a Bridge, handle: Option<Handle>) -> Held<'a> {
        Held { bridge, handle }
    }
    pub(super) fn id(&self) -> u64 {
        self.handle.map_or(0, |h| h.0)
    }
    pub(super) fn release(&mut self) {
        if let Some(h) = self.handle.take() {
            self.bridge.drop_handle(h);
        }
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.release();
    }
}

/// Runs one case against the adapter behind `bridge`.
pub fn run_case(bridge: &Bridge, consumer: Option<&Bridge>, case: &DlCase, replay: &str) -> Case {
    let start = Instant::now();
    let mut obs = Obs::default();
    crate::abi::breadcrumb::step(match case.kind {
        Kind::Pair { .. } => "dlpack pair",
        Kind::Producer { .. } => "dlpack producer",
        Kind::Consumer { .. } => "dlpack consumer",
        Kind::OnDevice { .. } => "dlpack consumer on a device",
        Kind::Frees { .. } => "dlpack frees",
        Kind::DeleterThread { .. } => "dlpack deleter thread",
        Kind::ToArrow { .. } => "dlpack to arrow",
        Kind::FromArrow { .. } => "dlpack from arrow",
    });
    let ended = match &case.kind {
        Kind::Producer {
            dtype,
            shape,
            view,
            request,
            consume,
        } => producer_steps(bridge, *dtype, shape, *view, *request, *consume, &mut obs)
            .unwrap_or_else(Ended::Error),
        Kind::Consumer { spec, mode } => consumer_case(bridge, spec, mode, &mut obs),
        Kind::OnDevice { spec, device } => device_consumer_case(bridge, spec, *device, &mut obs),
        Kind::Frees { dtype, shape } => {
            frees_steps(bridge, *dtype, shape, &mut obs).unwrap_or_else(Ended::Error)
        }
        Kind::DeleterThread {
            dtype,
            shape,
            request,
        } => deleter_thread_steps(bridge, *dtype, shape, *request, &mut obs)
            .unwrap_or_else(Ended::Error),
        Kind::ToArrow { spec } => crossing::to_arrow_case(bridge, spec, &mut obs),
        Kind::FromArrow {
            array,
            request,
            consume,
        } => crossing::from_arrow_steps(bridge, array, *request, *consume, &mut obs)
            .unwrap_or_else(Ended::Error),
        Kind::Pair { dtype, shape, view } => match consumer {
            Some(b) => pair_steps(bridge, b, *dtype, shape, *view).unwrap_or_else(Ended::Error),
            None => Ended::Error("a pair case needs a consumer library".into()),
        },
    };
    if !PYTHON_STUCK.load(std::sync::atomic::Ordering::SeqCst) {
        if let Some(b) = consumer {
            let _ = b.call("gc", &[], "");
        }
        let _ = bridge.call("gc", &[], "");
    }
    judged(case, obs, ended, start, replay)
}

fn judged(case: &DlCase, obs: Obs, ended: Ended, start: Instant, replay: &str) -> Case {
    let violations: Vec<RuleViolation> = obs
        .violations
        .iter()
        .map(|(rule, at, evidence)| RuleViolation {
            rule: rule.to_string(),
            level: rules::find(rule).map_or("MUST".into(), |r| r.level.to_string()),
            at: at.clone(),
            evidence: crate::report::bounded(evidence, 4096),
        })
        .collect();
    let must = violations.iter().any(|v| v.level == "MUST");
    let changed = match &ended {
        Ended::Changed(m) => vec![m.clone()],
        _ => Vec::new(),
    };
    let (verdict, message) = match ended {
        _ if must => (
            Verdict::Fail,
            Some(format!(
                "rule(s) broken: {}",
                violations
                    .iter()
                    .map(|v| v.rule.as_str())
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        ),
        Ended::Ran => (Verdict::Pass, None),
        Ended::Differs(m) => (Verdict::Fail, Some(m)),
        Ended::Changed(_) => (Verdict::Pass, None),
        Ended::Limitation(m) => (Verdict::Limitation, Some(m)),
        Ended::Skipped(m) => (Verdict::Skip, Some(m)),
        Ended::Error(m) => (Verdict::Error, Some(m)),
    };
    let (path, scenario) = match &case.kind {
        Kind::Pair { dtype, shape, .. } => (
            "dlpack_pair",
            format!("{}{}", dtype.name(), shape_name(shape)),
        ),
        Kind::Producer { dtype, shape, .. } => (
            "dlpack_producer",
            format!("{}{}", dtype.name(), shape_name(shape)),
        ),
        Kind::Consumer { spec, .. } => (
            "dlpack_consumer",
            format!("{}{}", spec.dtype.name(), shape_name(&spec.shape)),
        ),
        Kind::Frees { dtype, shape } | Kind::DeleterThread { dtype, shape, .. } => (
            "dlpack_producer",
            format!("{}{}", dtype.name(), shape_name(shape)),
        ),
        Kind::OnDevice { spec, device } => (
            "dlpack_consumer",
            format!(
                "{}{} on {}",
                spec.dtype.name(),
                shape_name(&spec.shape),
                device.name()
            ),
        ),
        Kind::ToArrow { spec } => (
            "dlpack_to_arrow",
            format!("{}{}", spec.dtype.name(), shape_name(&spec.shape)),
        ),
        Kind::FromArrow { array, .. } => ("dlpack_from_arrow", array.name()),
    };
    Case {
        id: case.id.clone(),
        path: path.into(),
        scenario,
        batch: None,
        slice: None,
        verdict,
        message,
        differences: violations
            .iter()
            .take(20)
            .map(|v| format!("{} at {}: {}", v.rule, v.at, v.evidence))
            .collect(),
        duration_us: start.elapsed().as_micros() as u64,
        replay: replay.to_string(),
        output: None,
        changed,
        view: None,
        checked: obs.checked.iter().map(|r| r.to_string()).collect(),
        violations,
        not_exercised: obs
            .not_exercised
            .iter()
            .filter(|(r, _)| !obs.checked.contains(r))
            .map(|(r, why)| NotExercised {
                rule: r.to_string(),
                reason: why.clone(),
            })
            .collect(),
        flaky: Vec::new(),
    }
}

fn capsule_of(v: &serde_json::Value) -> (bool, Option<String>, usize) {
    let c = &v["capsule"];
    (
        c["is_capsule"].as_bool().unwrap_or(false),
        c["name"].as_str().map(String::from),
        c["pointer"].as_u64().unwrap_or(0) as usize,
    )
}

/// Exports `obj` with `request`'s keywords and reads what came back:
/// the capsule (held), its name's verdict, the observed tensor.
fn export<'a>(
    bridge: &'a Bridge,
    obj: u64,
    request: Request,
    obs: &mut Obs,
) -> Result<Result<(Held<'a>, bool, Observed), PyError>, String> {
    let (h, v) = bridge.call("export", &[obj], request.kwargs())?;
    let cap = Held::new(bridge, h);
    if let Some(e) = PyError::of(&v) {
        return Ok(Err(e));
    }
    let (is_capsule, name, ptr) = capsule_of(&v);
    let at = format!("__dlpack__({})", request.name());
    let versioned = match name.as_deref() {
        Some("dltensor") if is_capsule => false,
        Some("dltensor_versioned") if is_capsule => true,
        _ => {
            obs.fail(
                crate::rule!("dlpack.capsule.name"),
                &at,
                if is_capsule {
                    format!(
                        "the capsule is named {name:?}, not \"dltensor\" or \"dltensor_versioned\""
                    )
                } else {
                    format!(
                        "__dlpack__ returned a {}, not a capsule",
                        v["capsule"]["type"]
                    )
                },
            );
            return Err("__dlpack__ did not return a DLPack capsule".into());
        }
    };
    obs.check(crate::rule!("dlpack.capsule.name"));
    let (o, findings) = reader::read(ptr, versioned);
    obs.findings(&at, findings);
    let Some(o) = o else {
        return Err("the capsule's tensor could not be read".into());
    };
    if o.version.is_none_or(|v| v.major == 1) {
        obs.check(crate::rule!("dlpack.dtype.code"));
        if versioned {
            obs.check(crate::rule!("dlpack.flags.known"));
        }
        if o.ndim > 0 && o.version.is_some_and(|v| v.minor >= 2) {
            obs.check(crate::rule!("dlpack.strides.not-null"));
        } else {
            obs.skip(
                crate::rule!("dlpack.strides.not-null"),
                "no tensor of DLPack 1.2 or later with ndim > 0 (older versions may have NULL strides)",
            );
        }
    }
    Ok(Ok((cap, versioned, o)))
}

fn producer_steps(
    bridge: &Bridge,
    dtype: DType,
    shape: &[i64],
    view: View,
    request: Request,
    consume: bool,
    obs: &mut Obs,
) -> Result<Ended, String> {
    // The harness's data, loaded into the library (which must copy it).
    let mut l = match load_view(bridge, dtype, shape, view, "the library")? {
        Ok(l) => l,
        Err(ended) => return Ok(ended),
    };
    exported_steps(bridge, &mut l, dtype, request, consume, obs)
}

/// The producer rules on the library's object `l` (an array it made of
/// `dtype` data): `__dlpack__` with `request`'s keywords, the capsule read,
/// then taken (`consume`) or dropped untaken.
pub(super) fn exported_steps(
    bridge: &Bridge,
    l: &mut Loaded<'_>,
    dtype: DType,
    request: Request,
    consume: bool,
    obs: &mut Obs,
) -> Result<Ended, String> {
    let expected = l.expected.clone();
    let obj = l.obj();
    // __dlpack_device__, to compare with the capsule's device.
    let (_, dev) = bridge.call("device", &[obj], "")?;
    let device = dev["device"].as_array().map(|d| {
        (
            d.first().and_then(|x| x.as_i64()).unwrap_or(-1),
            d.get(1).and_then(|x| x.as_i64()).unwrap_or(-1),
        )
    });
    if device.is_none() {
        obs.skip(
            crate::rule!("dlpack.device.agrees"),
            "__dlpack_device__ failed or is missing",
        );
    }
    // A first export, held while the case's own export is made (freed, its
    // buffer's address could be given to the second): copy=True and the
    // cross-device copy=False compare with a copy=None export's data (when
    // that is not itself a copy); copy=False with a first copy=False
    // export's (two exports of one array that copy neither share it).
    let mut first: Option<(Held, bool, reader::Observed)> = None;
    if request == Request::NoCopy {
        match export(bridge, obj, Request::NoCopy, obs)? {
            Ok(f) => first = Some(f),
            Err(e) if e.is_buffer_error() => {
                obs.check(crate::rule!("dlpack.copy.false-no-copy"));
                return Ok(Ended::Limitation(format!(
                    "__dlpack__(copy=False) declined: {e}"
                )));
            }
            Err(e) if e.is_type_error() => {
                obs.skip(
                    crate::rule!("dlpack.copy.false-no-copy"),
                    format!("__dlpack__ does not take copy ({e})"),
                );
                return Ok(Ended::Limitation(format!(
                    "__dlpack__ does not take copy ({e})"
                )));
            }
            Err(e) => {
                obs.fail(
                    crate::rule!("dlpack.copy.false-no-copy"),
                    "__dlpack__(no-copy)",
                    format!("copy=False raised {e}, not BufferError"),
                );
                return Ok(Ended::Ran);
            }
        }
    }
    if matches!(request, Request::Copy | Request::CudaNoCopy) {
        match export(bridge, obj, Request::V1, obs)? {
            Ok(f) => first = Some(f),
            Err(e) => {
                return Ok(Ended::Limitation(format!(
                    "__dlpack__(max_version=(1, 3)) raised {e}"
                )))
            }
        }
    }
    // A copy=None export that copied proves nothing about aliasing.
    let reference = first
        .as_ref()
        .filter(|(_, _, f)| request == Request::NoCopy || f.flags & FLAG_IS_COPIED == 0)
        .map(|(_, _, f)| f.first_byte());
    let at = format!("__dlpack__({})", request.name());
    let (mut cap, versioned, o) = match export(bridge, obj, request, obs)? {
        Ok(x) => x,
        Err(e) => {
            return Ok(match request {
                Request::Cuda | Request::CudaNoCopy if e.is_buffer_error() => {
                    obs.check(crate::rule!("dlpack.device.unsupported-raises"));
                    if request == Request::CudaNoCopy {
                        // Right under both rules: whether it refused the
                        // device or the copy, BufferError is the answer.
                        obs.check(crate::rule!("dlpack.copy.false-no-copy"));
                    }
                    Ended::Ran
                }
                // A producer from before the 2023.12 keywords.
                Request::Cuda | Request::CudaNoCopy if e.is_type_error() => {
                    obs.skip(
                        crate::rule!("dlpack.device.unsupported-raises"),
                        format!("__dlpack__ does not take dl_device ({e})"),
                    );
                    Ended::Limitation(format!("__dlpack__ does not take dl_device ({e})"))
                }
                // Charged to the device rule alone: a producer that cannot
                // handle CUDA at all never got as far as the copy.
                Request::Cuda | Request::CudaNoCopy => {
                    obs.fail(
                        crate::rule!("dlpack.device.unsupported-raises"),
                        &at,
                        format!(
                            "dl_device=(kDLCUDA, 0) of a CPU array raised {e}, not BufferError"
                        ),
                    );
                    Ended::Ran
                }
                Request::Copy => {
                    obs.skip(
                        crate::rule!("dlpack.copy.flag"),
                        format!("copy=True raised {e}"),
                    );
                    Ended::Limitation(format!("__dlpack__(copy=True) raised {e}"))
                }
                _ if e.is_buffer_error() => {
                    obs.check(crate::rule!("dlpack.errors.buffer-error"));
                    Ended::Limitation(format!("__dlpack__ declined: {e}"))
                }
                _ => {
                    // A TypeError may only say that the keywords are unknown
                    // (a producer from before max_version): ask without.
                    let again = if e.is_type_error() && request != Request::Legacy {
                        Some(export(bridge, obj, Request::Legacy, &mut Obs::default())?)
                    } else {
                        None
                    };
                    match again {
                        Some(Ok(_)) => {
                            Ended::Limitation(format!("__dlpack__ does not take max_version ({e})"))
                        }
                        Some(Err(e2)) if e2.is_buffer_error() => {
                            obs.check(crate::rule!("dlpack.errors.buffer-error"));
                            Ended::Limitation(format!("__dlpack__ declined: {e2}"))
                        }
                        _ => {
                            obs.fail(
                                crate::rule!("dlpack.errors.buffer-error"),
                                &at,
                                format!("__dlpack__ refused the array with {e}, not BufferError"),
                            );
                            Ended::Limitation(format!("__dlpack__ raised {e}"))
                        }
                    }
                }
            });
        }
    };
    // The first capsule, read and kept until now: taken and deleted, as a
    // consumer does with what it asked for (dropped untaken, it would judge
    // the destructor again, in a case about copies).
    if let Some((c, v, _)) = first.take() {
        take_and_delete(bridge, c, v)?;
    }
    if let Some(v) = o.version.filter(|v| v.major != 1) {
        return Ok(Ended::Limitation(format!(
            "a version {}.{} tensor (the harness reads major version 1 only)",
            v.major, v.minor
        )));
    }
    match request {
        Request::Cuda | Request::CudaNoCopy => {
            if o.device.device_type == KDL_CUDA {
                obs.check(crate::rule!("dlpack.device.unsupported-raises"));
                // copy=False: a CUDA tensor of a CPU array is a copy unless
                // it is the array's own memory (a device that addresses
                // host memory).
                if let (Request::CudaNoCopy, Some(host)) = (request, reference) {
                    if o.first_byte() == host && o.flags & FLAG_IS_COPIED == 0 {
                        obs.check(crate::rule!("dlpack.copy.false-no-copy"));
                    } else {
                        obs.fail(
                            crate::rule!("dlpack.copy.false-no-copy"),
                            &at,
                            format!(
                                "copy=False with dl_device=(kDLCUDA, 0) returned a CUDA tensor at {:#x} (flags {:#x}); the CPU array's data is at {host:#x}: a copy",
                                o.first_byte(),
                                o.flags
                            ),
                        );
                    }
                }
            } else {
                obs.fail(
                    crate::rule!("dlpack.device.unsupported-raises"),
                    &at,
                    format!(
                        "dl_device=(kDLCUDA, 0) returned a tensor on device ({}, {}) instead of raising BufferError",
                        o.device.device_type, o.device.device_id
                    ),
                );
            }
        }
        Request::Copy if versioned => {
            if o.flags & FLAG_IS_COPIED != 0 {
                obs.check(crate::rule!("dlpack.copy.flag"));
            } else {
                obs.fail(
                    crate::rule!("dlpack.copy.flag"),
                    &at,
                    format!("flags {:#x}: IS_COPIED not set", o.flags),
                );
            }
            if !expected.is_empty() && reference.is_some() {
                if Some(o.first_byte()) == reference {
                    obs.fail(
                        crate::rule!("dlpack.copy.true-copies"),
                        &at,
                        format!(
                            "the data at {:#x} is the copy=None export's",
                            o.first_byte()
                        ),
                    );
                } else {
                    obs.check(crate::rule!("dlpack.copy.true-copies"));
                }
            }
        }
        Request::Copy => obs.skip(
            crate::rule!("dlpack.copy.flag"),
            "copy=True returned a legacy capsule",
        ),
        Request::NoCopy => {
            if versioned && o.flags & FLAG_IS_COPIED != 0 {
                obs.fail(
                    crate::rule!("dlpack.copy.false-no-copy"),
                    &at,
                    format!(
                        "flags {:#x}: copy=False exported a tensor flagged IS_COPIED",
                        o.flags
                    ),
                );
            } else if let (Some(first), false) = (reference, expected.is_empty()) {
                if first != o.first_byte() {
                    obs.fail(
                        crate::rule!("dlpack.copy.false-no-copy"),
                        &at,
                        format!(
                            "two copy=False exports of the array point at different data ({first:#x}, then {:#x}, the first still held): at least one is a copy",
                            o.first_byte()
                        ),
                    );
                } else {
                    obs.check(crate::rule!("dlpack.copy.false-no-copy"));
                }
            } else {
                obs.skip(
                    crate::rule!("dlpack.copy.false-no-copy"),
                    "the array has no elements (no data to compare)",
                );
            }
        }
        _ => {}
    }
    if !matches!(request, Request::Cuda | Request::CudaNoCopy) {
        if let Some((t, i)) = device {
            if (o.device.device_type as i64, o.device.device_id as i64) == (t, i) {
                obs.check(crate::rule!("dlpack.device.agrees"));
            } else {
                obs.fail(
                    crate::rule!("dlpack.device.agrees"),
                    &at,
                    format!(
                        "__dlpack_device__() is ({t}, {i}) but the tensor is on ({}, {})",
                        o.device.device_type, o.device.device_id
                    ),
                );
            }
        }
    }
    // The values.
    if expected.is_empty() {
        obs.check(crate::rule!("dlpack.data.zero-size-null"));
    }
    let on_device = device_backend(&o);
    let values = values_of(&o, on_device.as_deref());
    match &values {
        Some(got) => compare(
            obs,
            crate::rule!("dlpack.tensor.describes"),
            &at,
            &expected,
            got,
        ),
        None if o.device.device_type == KDL_CPU && obs.violations.is_empty() => {
            obs.fail(
                crate::rule!("dlpack.tensor.describes"),
                &at,
                format!("dtype {:?} is not {}", o.dtype, dtype.name()),
            );
        }
        None => {}
    }
    // Lifetime: taken (renamed, the harness deletes it) or left untaken
    // (its destructor deletes it).
    let ptr = capsule_pointer(bridge, cap.id())?;
    let Some(watch) = trampoline::watch(ptr, versioned) else {
        obs.skip(
            crate::rule!("dlpack.capsule.destructor"),
            "the tensor's deleter is NULL",
        );
        return Ok(Ended::Ran);
    };
    if consume {
        let (_, t) = bridge.call("take", &[cap.id()], "")?;
        if t["name"].is_null() {
            return Err("the capsule could not be renamed".into());
        }
        cap.release();
        l.array.release();
        l.loaded.release();
        bridge.call("gc", &[], "")?;
        if watch.calls() == 0 {
            obs.check(crate::rule!("dlpack.capsule.used-untouched"));
        } else {
            obs.fail(
                crate::rule!("dlpack.capsule.used-untouched"),
                &at,
                format!("the deleter ran {} time(s) when the renamed capsule and the array were dropped", watch.calls()),
            );
            return Ok(Ended::Ran); // the tensor is gone: nothing more to read
        }
        // Only a tensor that described the array is read again: the
        // memory a wrong one points into is not the producer's to keep.
        let described = !obs
            .violations
            .iter()
            .any(|v| v.0 == crate::rule!("dlpack.tensor.describes"));
        if !described {
            obs.skip(
                crate::rule!("dlpack.lifetime.until-deleter"),
                "the tensor did not describe the array",
            );
        }
        if let (Some(before), Some(shape), true) =
            (&values, &o.shape, !expected.is_empty() && described)
        {
            let strides = o
                .strides
                .clone()
                .unwrap_or_else(|| super::row_major_strides(shape));
            let after = match &on_device {
                Some(dev) => reader::values_on(&o, &**dev).map(|l| l.values),
                None => reader::gather(o.first_byte(), before.dtype, shape, &strides),
            };
            match after {
                Ok(v) if v == before.values => obs.check(crate::rule!("dlpack.lifetime.until-deleter")),
                Ok(_) => obs.fail(
                    crate::rule!("dlpack.lifetime.until-deleter"),
                    &at,
                    "the tensor's data changed once the library's array and the capsule were dropped, before the deleter ran",
                ),
                Err(e) => obs.fail(
                    crate::rule!("dlpack.lifetime.until-deleter"),
                    &at,
                    format!("once the library's array and the capsule were dropped, before the deleter ran: {e}"),
                ),
            }
        }
        // SAFETY: the harness took the tensor (renamed its capsule) and
        // deletes it once, as a consumer does.
        unsafe { trampoline::delete(ptr, versioned) };
    } else {
        // The library's array, weakly: a destructor may delete the tensor
        // by calling the deleter function itself rather than through the
        // member the trampoline sits in; the tensor's manager_ctx holding
        // the array, the array dies exactly when the tensor is deleted.
        let (w, _) = bridge.call("weakref", &[obj], "")?;
        let weak = Held::new(bridge, w);
        cap.release();
        bridge.call("gc", &[], "")?;
        let calls = watch.calls();
        let array_alive = |bridge: &Bridge| -> Result<Option<bool>, String> {
            if weak.handle.is_none() {
                return Ok(None);
            }
            let (_, v) = bridge.call("alive", &[weak.id()], "")?;
            Ok(v["alive"].as_bool())
        };
        match calls {
            1 => obs.check(crate::rule!("dlpack.capsule.destructor")),
            0 => {
                // Drop the library's own references too: if the array then
                // lives on, only the undeleted tensor can hold it.
                l.array.release();
                l.loaded.release();
                bridge.call("gc", &[], "")?;
                match array_alive(bridge)? {
                    Some(true) => obs.fail(
                        crate::rule!("dlpack.capsule.destructor"),
                        &at,
                        "dropping the untaken capsule did not delete the tensor: its deleter was not called through the member, and the array it holds is still alive once every other reference is gone",
                    ),
                    Some(false) => obs.check(crate::rule!("dlpack.capsule.destructor")),
                    None => obs.skip(
                        crate::rule!("dlpack.capsule.destructor"),
                        "the destructor did not call the deleter member, and the array takes no weak reference to see whether the tensor was deleted otherwise",
                    ),
                }
            }
            n => obs.fail(
                crate::rule!("dlpack.capsule.destructor"),
                &at,
                format!(
                    "dropping the untaken capsule called the tensor's deleter {n} times, not once"
                ),
            ),
        }
    }
    Ok(Ended::Ran)
}

/// How long a deleter called on a native thread may take before the case
/// calls it a deadlock (a deleter frees memory and drops references: far
/// below a second even under the debug allocator).
pub const DELETER_THREAD_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// The deleter-thread case: the library's array exported with `request`,
/// the capsule taken, every Python reference dropped, then the tensor's
/// deleter called from a thread of the harness's that has never run Python
/// and holds no GIL, as a consumer's other threads may call it ("The
/// DLManagedTensor deleter must ensure that sharing beyond Python
/// boundaries is possible, this means that the GIL must be acquired
/// explicitly if it uses Python objects or API"). It must return (a
/// crash of the worker here is charged to the rule by run.rs) and free the
/// array it held.
fn deleter_thread_steps(
    bridge: &Bridge,
    dtype: DType,
    shape: &[i64],
    request: Request,
    obs: &mut Obs,
) -> Result<Ended, String> {
    let rule = crate::rule!("dlpack.deleter.without-gil");
    let mut l = match load_view(bridge, dtype, shape, View::Whole, "the library")? {
        Ok(l) => l,
        Err(ended) => return Ok(ended),
    };
    let obj = l.obj();
    let at = format!(
        "the deleter of __dlpack__({}), on a native thread",
        request.name()
    );
    let (mut cap, versioned, _) = match export(bridge, obj, request, obs)? {
        Ok(x) => x,
        Err(e) => return Ok(Ended::Limitation(format!("__dlpack__ declined: {e}"))),
    };
    let ptr = capsule_pointer(bridge, cap.id())?;
    // Counted, so that a destructor that deletes a renamed capsule's
    // tensor (dlpack.capsule.used-untouched's failure) is not followed by a
    // second call here.
    let Some(watch) = trampoline::watch(ptr, versioned) else {
        obs.skip(rule, "the tensor's deleter is NULL");
        return Ok(Ended::Ran);
    };
    let (w, _) = bridge.call("weakref", &[obj], "")?;
    let weak = Held::new(bridge, w);
    let (_, t) = bridge.call("take", &[cap.id()], "")?;
    if t["name"].is_null() {
        return Err("the capsule could not be renamed".into());
    }
    cap.release();
    l.array.release();
    l.loaded.release();
    bridge.call("gc", &[], "")?;
    if watch.calls() > 0 {
        obs.skip(
            rule,
            "the deleter already ran when the renamed capsule was dropped (dlpack.capsule.used-untouched)",
        );
        return Ok(Ended::Ran);
    }
    // The bridge holds the GIL only inside its calls: between them no
    // thread of this process does, and this one has never run Python.
    crate::abi::breadcrumb::step(DELETER_THREAD_STEP);
    let (tx, rx) = std::sync::mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("dlpack-deleter".into())
        .spawn(move || {
            // SAFETY: the harness took the tensor (renamed its capsule,
            // dropped it) and deletes it this once, on this thread.
            unsafe { trampoline::delete(ptr, versioned) };
            let _ = tx.send(());
        });
    if let Err(e) = spawned {
        return Err(format!("cannot start a thread: {e}"));
    }
    if rx.recv_timeout(DELETER_THREAD_WAIT).is_err() {
        obs.fail(
            rule,
            &at,
            format!(
                "the deleter, called on a native thread that does not hold the GIL, had not returned after {} s (a deadlock)",
                DELETER_THREAD_WAIT.as_secs()
            ),
        );
        // The thread may hold the GIL forever: nothing more is asked of
        // Python in this process (the worker ends after this case).
        crate::abi::breadcrumb::taint("a deleter called on a native thread never returned");
        PYTHON_STUCK.store(true, std::sync::atomic::Ordering::SeqCst);
        std::mem::forget(weak);
        std::mem::forget(l);
        return Ok(Ended::Ran);
    }
    crate::abi::breadcrumb::step("dlpack deleter thread: returned");
    obs.check(rule);
    bridge.call("gc", &[], "")?;
    if weak.handle.is_none() {
        obs.skip(
            crate::rule!("dlpack.deleter.frees"),
            "the library's array takes no weak reference",
        );
        return Ok(Ended::Ran);
    }
    let (_, v) = bridge.call("alive", &[weak.id()], "")?;
    if v["alive"].as_bool() == Some(true) {
        obs.fail(
            crate::rule!("dlpack.deleter.frees"),
            &at,
            "the library's array is still alive after its tensor's deleter returned, every other reference dropped and garbage collected",
        );
    } else {
        obs.check(crate::rule!("dlpack.deleter.frees"));
    }
    Ok(Ended::Ran)
}

/// Set when a thread of the library's may hold the GIL for ever (a deleter
/// that never returned): the case asks Python for nothing more.
static PYTHON_STUCK: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The breadcrumb of the deleter call on a native thread: a crash with it
/// last is that deleter's ([`super::run`] charges it to the rule).
pub const DELETER_THREAD_STEP: &str = "dlpack deleter thread: calling the deleter";

/// The frees case: the export sequence, repeated under the allocation
/// tracker's count (the Arrow `*.release.frees` accounting, no verdict
/// without growth in every measured repetition of two rounds).
fn frees_steps(
    bridge: &Bridge,
    dtype: DType,
    shape: &[i64],
    obs: &mut Obs,
) -> Result<Ended, String> {
    use crate::certify::leaks;
    let rule = crate::rule!("dlpack.deleter.frees");
    if !crate::plugin::tracker::present() {
        obs.skip(rule, leaks::NO_COUNTER);
        return Ok(Ended::Skipped(leaks::NO_COUNTER.into()));
    }
    let counters = [leaks::Counter::new(
        leaks::TRACKER,
        crate::plugin::tracker::live_bytes,
    )];
    // One export, taken and deleted, every object dropped. `Err` stops the
    // measurement: an export that fails is the other rules' to judge.
    let once = || -> Result<(), String> {
        let l = match load_view(bridge, dtype, shape, View::Whole, "the library")? {
            Ok(l) => l,
            Err(_) => return Err("the library cannot hold the array".into()),
        };
        let mut l = l;
        let (cap, versioned, _) = export(bridge, l.obj(), Request::V1, &mut Obs::default())?
            .map_err(|e| format!("__dlpack__ raised {e}"))?;
        l.array.release();
        l.loaded.release();
        bridge.call("gc", &[], "")?;
        // The harness's own tensor, which the library copied from: one it
        // never deleted is kept (leaked) by the harness, which would count
        // as growth here; that is the consumer rules' finding, not this one.
        if l.source.as_ref().is_some_and(|t| t.deleted() == (0, 0)) {
            drop(l);
            return Err("the library never deleted the harness's tensor it loaded".into());
        }
        drop(l);
        take_and_delete(bridge, cap, versioned)?;
        bridge.call("gc", &[], "")?;
        Ok(())
    };
    match leaks::measure(&counters, once) {
        Ok(m) if m.leaks() => obs.fail(
            rule,
            "__dlpack__(v1)",
            m.evidence("load, export, take, drop and delete"),
        ),
        Ok(_) => obs.check(rule),
        Err(e) => {
            obs.skip(rule, format!("the sequence did not run: {e}"));
            return Ok(Ended::Limitation(e));
        }
    }
    Ok(Ended::Ran)
}

/// Whether the library called the harness's tensor's `__dlpack__` during
/// the step whose answer is `v` (handed a capsule or not).
pub(super) fn asked_capsule(v: &serde_json::Value) -> bool {
    v["harness"]["calls"]
        .as_array()
        .is_some_and(|c| !c.is_empty())
}

/// Whether the library asked the harness's tensor for its device
/// (`__dlpack_device__`) during the step whose answer is `v`.
fn asked_device(v: &serde_json::Value) -> bool {
    v["harness"]["device_calls"].as_u64().unwrap_or(0) > 0
}

/// The values of an exported tensor: read on the CPU, or, for a tensor on
/// a device this machine has (a GPU, the emulated device), through that
/// device's backend (`dev`, from [`device_backend`]). `None` when neither
/// can read them.
fn values_of(o: &Observed, dev: Option<&dyn crate::device::Device>) -> Option<Logical> {
    if o.values.is_some() {
        return o.values.clone();
    }
    reader::values_on(o, dev?).ok()
}

/// The backend of the device (not the CPU) an exported tensor is on, where
/// this machine has it.
fn device_backend(o: &Observed) -> Option<std::sync::Arc<dyn crate::device::Device>> {
    crate::device::Kind::from_device_type(o.device.device_type)
        .filter(|k| *k != crate::device::Kind::Cpu)
        .and_then(|k| crate::device::backend(k).ok())
}

/// Takes the capsule `cap` (renames it used_...) and deletes its tensor,
/// as a consumer done with it does.
fn take_and_delete(bridge: &Bridge, mut cap: Held<'_>, versioned: bool) -> Result<(), String> {
    let ptr = capsule_pointer(bridge, cap.id())?;
    let (_, t) = bridge.call("take", &[cap.id()], "")?;
    if t["name"].is_null() || ptr == 0 {
        return Err("the capsule could not be taken".into());
    }
    cap.release();
    // SAFETY: the harness renamed the capsule (it owns the tensor now, and
    // the capsule's destructor leaves it alone) and deletes it this once.
    unsafe { trampoline::delete(ptr, versioned) };
    Ok(())
}

fn capsule_pointer(bridge: &Bridge, cap: u64) -> Result<usize, String> {
    let (_, v) = bridge.call("info", &[cap], "")?;
    Ok(capsule_of(&v).2)
}

pub(super) fn compare(
    obs: &mut Obs,
    rule: &'static str,
    at: &str,
    expected: &Logical,
    got: &Logical,
) {
    if got.shape != expected.shape {
        obs.fail(
            rule,
            at,
            format!(
                "shape {:?} ({} elements), expected {:?} ({} elements)",
                got.shape,
                got.len(),
                expected.shape,
                expected.len()
            ),
        );
    } else if got.dtype != expected.dtype {
        obs.fail(
            rule,
            at,
            format!(
                "dtype {}, expected {}",
                got.dtype.name(),
                expected.dtype.name()
            ),
        );
    } else if let Some(i) = (0..expected.len()).find(|&i| got.element(i) != expected.element(i)) {
        obs.fail(
            rule,
            at,
            format!(
                "element {i} (row-major) is {:02x?}, expected {:02x?}",
                got.element(i),
                expected.element(i)
            ),
        );
    } else {
        obs.check(rule);
    }
}

/// What the harness's tensor saw in a consumer's call `at` (the step's
/// answer `v`): its `__dlpack__` calls judged (`stream`), and the names of
/// the capsules it handed out, as they are now. A capsule still unrenamed
/// may outlive the case, its destructor deleting the tensor: the tensor is
/// then kept.
pub(super) fn harness_side(
    v: &serde_json::Value,
    at: &str,
    device_type: i32,
    obs: &mut Obs,
) -> Vec<Option<String>> {
    let calls = v["harness"]["calls"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let names: Vec<Option<String>> = v["harness"]["capsules"]
        .as_array()
        .map(|a| a.iter().map(|n| n.as_str().map(String::from)).collect())
        .unwrap_or_default();
    if device_type != KDL_CPU && !calls.is_empty() {
        obs.skip(
            crate::rule!("dlpack.consumer.stream-none"),
            format!("the tensor is on device type {device_type}: the rule is the CPU's (a device's streams are its own)"),
        );
    }
    for c in calls.iter().filter(|_| device_type == KDL_CPU) {
        if c["stream"].is_null() {
            obs.check(crate::rule!("dlpack.consumer.stream-none"));
        } else {
            obs.fail(
                crate::rule!("dlpack.consumer.stream-none"),
                at,
                format!(
                    "__dlpack__ of a CPU tensor called with stream={}",
                    c["stream"]
                ),
            );
        }
    }
    obs.keep_tensor |= names
        .iter()
        .any(|n| !n.as_deref().is_some_and(|n| n.starts_with("used_")));
    names
}

/// What a consumer's array `got` must hold of `expected`: the same, or,
/// when the consumer's arrays are one-dimensional (Arrow's) and the tensor
/// is not, the tensor's elements in row-major order.
fn as_read(expected: &Logical, got: &Logical) -> Logical {
    if got.shape.len() == 1 && expected.shape.len() != 1 {
        Logical {
            shape: vec![expected.len() as i64],
            ..expected.clone()
        }
    } else {
        expected.clone()
    }
}

/// A consumer that returned took the tensor: the capsule must be renamed.
pub(super) fn renamed(names: &[Option<String>], at: &str, obs: &mut Obs) {
    match names.first().cloned().flatten() {
        Some(n) if n.starts_with("used_") => obs.check(crate::rule!("dlpack.consumer.rename")),
        Some(n) => obs.fail(
            crate::rule!("dlpack.consumer.rename"),
            at,
            format!("after {at} returned, the capsule is still named {n:?}"),
        ),
        None if !names.is_empty() => obs.fail(
            crate::rule!("dlpack.consumer.rename"),
            at,
            format!("after {at} returned, the capsule has no name"),
        ),
        None => {}
    }
}

/// The device consumer cases (`dlpack/consumer/<device>/...`): vectors of
/// four dtypes, then int32 in the layouts a device tensor may have.
pub fn plan_device(device: crate::device::Kind) -> Vec<DlCase> {
    let mut out = Vec::new();
    let mut add = |dtype: DType, shape: &[i64], layout: Layout| {
        out.push(DlCase {
            id: format!(
                "dlpack/consumer/{}/{}/{}/{}",
                device.name(),
                dtype.name(),
                shape_name(shape),
                layout.name()
            ),
            kind: Kind::OnDevice {
                spec: Spec::plain(dtype, shape, layout),
                device,
            },
        })
    };
    for dtype in [DType::I32, DType::F64, DType::U8, DType::F16] {
        add(dtype, &[7], Layout::Contiguous);
    }
    add(DType::I32, &[0], Layout::Contiguous);
    add(DType::I32, &[4, 3], Layout::Contiguous);
    add(DType::I32, &[4, 3], Layout::Transposed);
    add(DType::I32, &[7], Layout::Gaps);
    add(DType::I32, &[7], Layout::ByteOffset);
    out
}

/// A consumer case whose tensor is on `device`: skipped where this
/// machine has no such device (the reason given), else the consumer
/// steps with the data in device memory.
fn device_consumer_case(
    bridge: &Bridge,
    spec: &Spec,
    device: crate::device::Kind,
    obs: &mut Obs,
) -> Ended {
    let dev = match crate::device::backend(device) {
        Ok(d) => d,
        Err(why) => return Ended::Skipped(crate::device::missing(device, &why)),
    };
    let tensor = HarnessTensor::on_device(spec.clone(), dev, device)
        .map_err(|e| format!("the harness could not place its tensor on {device}: {e}"));
    handed_over(tensor, obs, |t, obs| {
        consumer_steps(bridge, t, "negotiate", obs)
    })
}

fn consumer_case(bridge: &Bridge, spec: &Spec, mode: &str, obs: &mut Obs) -> Ended {
    handed_over(mapped(spec), obs, |t, obs| {
        consumer_steps(bridge, t, mode, obs)
    })
}

/// The harness's tensor of `spec` in host memory, or why not.
pub(super) fn mapped(spec: &Spec) -> Result<HarnessTensor, String> {
    HarnessTensor::new(spec.clone())
        .map_err(|e| format!("the harness could not map its tensor: {e}"))
}

/// Runs `steps` on a tensor the harness hands a library, then keeps the
/// tensor allocated (leaked) when the library may still hold it: never
/// deleted, or a capsule over it left unrenamed.
pub(super) fn handed_over(
    tensor: Result<HarnessTensor, String>,
    obs: &mut Obs,
    steps: impl FnOnce(&HarnessTensor, &mut Obs) -> Result<Ended, String>,
) -> Ended {
    let tensor = match tensor {
        Ok(t) => t,
        Err(e) => return Ended::Error(e),
    };
    let ended = steps(&tensor, obs);
    let (v, l) = tensor.deleted();
    if v + l == 0 || obs.keep_tensor {
        tensor.leak(); // the library may still hold it
    }
    ended.unwrap_or_else(Ended::Error)
}

fn consumer_steps(
    bridge: &Bridge,
    tensor: &HarnessTensor,
    mode: &str,
    obs: &mut Obs,
) -> Result<Ended, String> {
    let spec = &tensor.spec;
    let (device_type, device_id) = tensor.device();
    let args = [
        tensor.versioned_ptr() as u64,
        tensor.legacy_ptr() as u64,
        device_type as u64,
        device_id as u64,
    ];
    let (h, v) = bridge.call("read", &args, &format!(r#"{{"mode": "{mode}"}}"#))?;
    let mut result = Held::new(bridge, h);
    let at = "from_dlpack";
    let names = harness_side(&v, at, device_type, obs);
    let error = PyError::of(&v);
    let handed = !names.is_empty();
    let major2 = spec.version.major != 1;
    if major2 {
        if handed {
            match &error {
                Some(_) => obs.check(crate::rule!("dlpack.consumer.major-version")),
                None => obs.fail(
                    crate::rule!("dlpack.consumer.major-version"),
                    at,
                    format!(
                        "from_dlpack accepted a version {}.{} tensor",
                        spec.version.major, spec.version.minor
                    ),
                ),
            }
        } else {
            obs.skip(
                crate::rule!("dlpack.consumer.major-version"),
                "the consumer did not ask for a versioned capsule",
            );
        }
    }
    let outcome = if let Some(e) = &error {
        if !handed && mode != "negotiate" && asked_capsule(&v) {
            for rule in [
                crate::rule!("dlpack.consumer.read-only"),
                crate::rule!("dlpack.consumer.read-only-array"),
                crate::rule!("dlpack.consumer.major-version"),
            ] {
                obs.skip(
                    rule,
                    "the consumer did not ask for a versioned capsule (max_version)",
                );
            }
            Ended::Limitation(format!(
                "the case needs a {mode} capsule; from_dlpack raised {e}"
            ))
        } else if major2 && handed {
            Ended::Ran
        } else if handed
            && (e.is_buffer_error()
                || e.is_type_error()
                || crate::report::outcome::says_not_exported(&e.message.to_lowercase()))
        {
            Ended::Limitation(format!("from_dlpack declined: {e}"))
        } else if handed {
            Ended::Limitation(format!("from_dlpack raised {e}"))
        } else if asked_device(&v) {
            // The protocol's own way to decline a device: __dlpack_device__
            // is "called from within from_dlpack(), to query what device
            // the array is on" (DLPack's Python specification), and a
            // consumer that cannot use that device need not ask for a
            // capsule (CuPy and CPU tensors, seen on an H100).
            Ended::Limitation(format!(
                "from_dlpack declined the tensor's device (it asked __dlpack_device__, then raised {e} before asking for a capsule)"
            ))
        } else {
            Ended::Error(format!(
                "from_dlpack raised {e} before asking for a capsule"
            ))
        }
    } else {
        renamed(&names, at, obs);
        // Read the library's array back through its own __dlpack__.
        let rule = match spec.layout {
            Layout::ByteOffset => crate::rule!("dlpack.consumer.byte-offset"),
            Layout::Contiguous => crate::rule!("dlpack.consumer.values"),
            _ if spec.shape.is_empty() => crate::rule!("dlpack.consumer.values"),
            _ => crate::rule!("dlpack.consumer.strides"),
        };
        let mut back = export(bridge, result.id(), Request::V1, &mut Obs::default())?;
        if matches!(&back, Err(e) if e.is_type_error()) {
            back = export(bridge, result.id(), Request::Legacy, &mut Obs::default())?;
        }
        // An array on the tensor's device is read there.
        let back = back.map(|(cap, v, mut o)| {
            if let (None, Some(dev)) = (&o.values, tensor.device_backend()) {
                if o.device.device_type == device_type {
                    o.values = reader::values_on(&o, &*dev).ok();
                }
            }
            (cap, v, o)
        });
        match back {
            Ok((cap, _, o)) => {
                match &o.values {
                    Some(got) => compare(
                        obs,
                        rule,
                        "the library's array, read back",
                        &as_read(tensor.expected(), got),
                        got,
                    ),
                    None => obs.skip(rule, "the library's array could not be read back"),
                }
                if spec.read_only {
                    read_only_array(bridge, result.id(), tensor, &o, &names, obs)?;
                }
                drop(cap);
            }
            Err(e) => {
                let why = format!("the library's array could not be read back: {e}");
                if spec.read_only {
                    obs.skip(crate::rule!("dlpack.consumer.read-only-array"), why.clone());
                }
                obs.skip(rule, why)
            }
        }
        if spec.read_only {
            obs.check(crate::rule!("dlpack.consumer.read-only"));
        }
        Ended::Ran
    };
    result.release();
    bridge.call("gc", &[], "")?;
    let (v1, l1) = tensor.deleted();
    if handed {
        match v1 + l1 {
            1 => obs.check(crate::rule!("dlpack.consumer.deleter-once")),
            0 => obs.fail(crate::rule!("dlpack.consumer.deleter-once"), at, "the tensor's deleter was never called (the library's array dropped, garbage collected)"),
            n => obs.fail(crate::rule!("dlpack.consumer.deleter-once"), at, format!("the tensor's deleter was called {n} times")),
        }
    }
    Ok(outcome)
}

/// `dlpack.consumer.read-only-array`: what from_dlpack made of a READ_ONLY
/// tensor (`result`, read back as `back`), when it is a view of the
/// tensor's memory, must be read-only where the library shows a writeable
/// state. The text asks a consumer without read-only arrays to ignore the
/// flag ("A consumer that does not support read-only arrays should ignore
/// this flag"), and a copy cannot modify the tensor: neither is judged.
fn read_only_array(
    bridge: &Bridge,
    result: u64,
    tensor: &HarnessTensor,
    back: &Observed,
    names: &[Option<String>],
    obs: &mut Obs,
) -> Result<(), String> {
    let rule = crate::rule!("dlpack.consumer.read-only-array");
    let versioned = names
        .first()
        .cloned()
        .flatten()
        .is_some_and(|n| n.ends_with("_versioned"));
    if !versioned {
        obs.skip(
            rule,
            "the consumer took a legacy capsule, which cannot carry the READ_ONLY flag",
        );
        return Ok(());
    }
    if tensor.expected().is_empty() || !tensor.data_range().contains(&back.first_byte()) {
        obs.skip(
            rule,
            "the library's array is a copy (its data is not the tensor's): writing it cannot modify the tensor's memory",
        );
        return Ok(());
    }
    let (_, v) = bridge.call("writeable", &[result], "")?;
    let how = v["how"]
        .as_str()
        .unwrap_or("its writeable state")
        .to_string();
    match v["writeable"].as_bool() {
        Some(false) => obs.check(rule),
        Some(true) => obs.fail(
            rule,
            "from_dlpack",
            format!(
                "the array from_dlpack returned for a tensor flagged DLPACK_FLAG_BITMASK_READ_ONLY is a view of the tensor's memory (its data at {:#x}) and writeable ({how} is True)",
                back.first_byte()
            ),
        ),
        None => obs.skip(
            rule,
            match PyError::of(&v) {
                Some(e) => format!("asking the library's array whether it is writeable raised {e}"),
                None => "the library's array shows no writeable state (the adapter has no dlpack_writeable, the array no flags.writeable): a library without read-only arrays ignores the flag".to_string(),
            },
        ),
    }
    Ok(())
}

/// A case that did not run to a verdict of its rules (skipped, or a
/// harness error), with why.
pub fn ended_without_verdict(case: &DlCase, replay: &str, verdict: Verdict, why: String) -> Case {
    let mut c = judged(case, Obs::default(), Ended::Ran, Instant::now(), replay);
    c.verdict = verdict;
    c.message = Some(why);
    c
}

/// The pair plan: every dtype and shape whole, and the views of two dtypes.
pub fn plan_pairs() -> Vec<DlCase> {
    plan(true, false)
        .into_iter()
        .filter_map(|c| match c.kind {
            Kind::Producer {
                dtype,
                shape,
                view,
                request: Request::V1,
                consume: true,
            } => Some(DlCase {
                id: format!(
                    "dlpack/pair/{}/{}/{}",
                    dtype.name(),
                    shape_name(&shape),
                    view.name()
                ),
                kind: Kind::Pair { dtype, shape, view },
            }),
            _ => None,
        })
        .collect()
}

/// A pair case: the harness's data into the producer library, its array
/// (or view) into the consumer library's from_dlpack, and what that made
/// read back and compared.
fn pair_steps(
    a: &Bridge,
    b: &Bridge,
    dtype: DType,
    shape: &[i64],
    view: View,
) -> Result<Ended, String> {
    let l = match load_view(a, dtype, shape, view, "the producer")? {
        Ok(l) => l,
        Err(ended) => return Ok(ended),
    };
    let expected = l.expected.clone();
    let obj = l.obj();
    let (h, v) = b.call("read_object", &[obj], "")?;
    let result = Held::new(b, h);
    if let Some(e) = PyError::of(&v) {
        return Ok(Ended::Limitation(format!("the consumer declined: {e}")));
    }
    let mut scratch = Obs::default();
    let mut back = export(b, result.id(), Request::V1, &mut scratch)?;
    if matches!(&back, Err(e) if e.is_type_error()) {
        back = export(b, result.id(), Request::Legacy, &mut scratch)?;
    }
    // Read while the capsule is held (its tensor stays valid); a tensor
    // in device memory is read through the device's backend.
    let got = match &back {
        Ok((_cap, _, o)) => values_of(o, device_backend(o).as_deref()),
        Err(e) => {
            return Ok(Ended::Limitation(format!(
                "the consumer's array cannot be read back: {e}"
            )))
        }
    };
    drop(back);
    let Some(got) = got else {
        return Ok(Ended::Limitation(
            "the consumer's array cannot be read back".into(),
        ));
    };
    let want = as_read(&expected, &got);
    let mut cmp = Obs::default();
    compare(
        &mut cmp,
        crate::rule!("dlpack.consumer.values"),
        "the consumer's array",
        &want,
        &got,
    );
    drop(result);
    // The same bytes under another dtype of the same width (a library
    // without a byte-wide bool holds DLPack's bool as uint8) arrived, with
    // a type change, as Arrow round trips report it.
    let retyped = got.dtype != want.dtype
        && got.dtype.size() == want.dtype.size()
        && got.shape == want.shape
        && got.values == want.values;
    Ok(match cmp.violations.first() {
        None => Ended::Ran,
        Some(_) if retyped => Ended::Changed(format!(
            "dtype {} arrived as {}",
            want.dtype.name(),
            got.dtype.name()
        )),
        Some((_, _, why)) => Ended::Differs(format!("the values did not arrive: {why}")),
    })
}

// ---- generated cases (proptest): drawn, replayed by ID, shrunk ----

/// The prefix of a generated consumer case's ID; the rest of the ID is the
/// whole tensor (`<dtype>/<shape>/<layout>/v1.<minor>[/read-only]`), so the
/// ID alone reruns it.
pub const GENERATED: &str = "dlpack/consumer/gen/";

/// The ID of a generated consumer case for `spec`.
pub fn generated_id(spec: &Spec) -> String {
    format!(
        "{GENERATED}{}/{}/{}/v{}.{}{}",
        spec.dtype.name(),
        shape_name(&spec.shape),
        spec.layout.name(),
        spec.version.major,
        spec.version.minor,
        if spec.read_only { "/read-only" } else { "" }
    )
}

/// The case a generated ID names (a consumer's or a producer's).
pub fn parse_generated(id: &str) -> Option<DlCase> {
    if id.starts_with(GENERATED_PRODUCER) {
        return parse_generated_producer(id);
    }
    let rest = id.strip_prefix(GENERATED)?;
    let parts: Vec<&str> = rest.split('/').collect();
    let (dtype, shape, layout, version) =
        (parts.first()?, parts.get(1)?, parts.get(2)?, parts.get(3)?);
    let read_only = match parts.get(4) {
        None => false,
        Some(&"read-only") => true,
        _ => return None,
    };
    let shape = parse_shape(shape)?;
    let (major, minor) = version.strip_prefix('v')?.split_once('.')?;
    let spec = Spec {
        dtype: DType::parse(dtype)?,
        shape,
        layout: Layout::parse(layout)?,
        read_only,
        version: DLPackVersion {
            major: major.parse().ok()?,
            minor: minor.parse().ok()?,
        },
        inaccessible: false,
    };
    Some(DlCase {
        id: id.to_string(),
        kind: Kind::Consumer {
            mode: if read_only { "versioned" } else { "negotiate" },
            spec,
        },
    })
}

/// `[4,0]` as a shape.
fn parse_shape(s: &str) -> Option<Vec<i64>> {
    let inner = s.strip_prefix('[')?.strip_suffix(']')?;
    if inner.is_empty() {
        return Some(Vec::new());
    }
    inner.split(',').map(|d| d.parse().ok()).collect()
}

/// The prefix of a generated producer case's ID; the rest is the whole
/// case (`<dtype>/<shape>/<view>/<request>[/untaken]`).
pub const GENERATED_PRODUCER: &str = "dlpack/producer/gen/";

/// The ID of a generated producer case.
pub fn generated_producer_id(
    dtype: DType,
    shape: &[i64],
    view: View,
    request: Request,
    consume: bool,
) -> String {
    format!(
        "{GENERATED_PRODUCER}{}/{}/{}/{}{}",
        dtype.name(),
        shape_name(shape),
        view.name(),
        request.name(),
        if consume { "" } else { "/untaken" }
    )
}

fn parse_generated_producer(id: &str) -> Option<DlCase> {
    let parts: Vec<&str> = id.strip_prefix(GENERATED_PRODUCER)?.split('/').collect();
    let consume = match parts.get(4) {
        None => true,
        Some(&"untaken") => false,
        _ => return None,
    };
    Some(DlCase {
        id: id.to_string(),
        kind: Kind::Producer {
            dtype: DType::parse(parts.first()?)?,
            shape: parse_shape(parts.get(1)?)?,
            view: View::parse(parts.get(2)?)?,
            request: Request::parse(parts.get(3)?)?,
            consume,
        },
    })
}

/// The strategy generated producer cases are drawn from: any dtype, 0 to 3
/// dimensions of 0 to 5, a view the shape allows, every request but the
/// CUDA one (the fixed plan has it) with each `max_version` (none, 1.0,
/// 1.3, a later minor, a later major), `copy=True` and `copy=False`, the
/// capsule taken
/// or not. Shrinks toward int8, fewer and smaller dimensions, the whole
/// array, the legacy request, taken. Values are case IDs.
pub fn producer_strategy() -> impl proptest::strategy::Strategy<Value = String> {
    use proptest::prelude::*;
    let requests = [
        Request::Legacy,
        Request::V10,
        Request::V1,
        Request::HigherMinor,
        Request::HigherMajor,
        Request::Copy,
        Request::NoCopy,
    ];
    (
        0..DType::ALL.len(),
        proptest::collection::vec(0i64..=5, 0..=3),
        0usize..4,
        0..requests.len(),
        any::<bool>(),
    )
        .prop_map(move |(d, shape, v, r, untaken)| {
            let view = match v {
                1 if !shape.is_empty() => View::Step,
                2 if !shape.is_empty() => View::Offset,
                3 if shape.len() >= 2 => View::Transpose,
                _ => View::Whole,
            };
            generated_producer_id(DType::ALL[d], &shape, view, requests[r], !untaken)
        })
}

/// Which side's generated cases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GenSide {
    Consumer,
    Producer,
}

impl GenSide {
    /// The side of a generated ID, if it is one.
    pub fn of(id: &str) -> Option<GenSide> {
        if id.starts_with(GENERATED) {
            Some(GenSide::Consumer)
        } else if id.starts_with(GENERATED_PRODUCER) {
            Some(GenSide::Producer)
        } else {
            None
        }
    }
}

/// The strategy generated consumer tensors are drawn from: any dtype,
/// 0 to 3 dimensions of 0 to 5, any layout the shape allows, read-only or
/// not, version 1.0 to 1.3 (NULL strides only before 1.2). Shrinks toward
/// int8, fewer and smaller dimensions, compact, writable, 1.0.
pub fn spec_strategy() -> impl proptest::strategy::Strategy<Value = Spec> {
    use proptest::prelude::*;
    (
        0..DType::ALL.len(),
        proptest::collection::vec(0i64..=5, 0..=3),
        0..Layout::GENERATED.len(),
        any::<bool>(),
        0u32..=3,
    )
        .prop_map(|(d, shape, l, read_only, minor)| {
            let mut layout = Layout::GENERATED[l];
            if (layout == Layout::Transposed && shape.len() < 2)
                || (matches!(layout, Layout::Gaps | Layout::Broadcast) && shape.is_empty())
            {
                layout = Layout::Contiguous;
            }
            let minor = if layout == Layout::NullStrides {
                minor.min(1)
            } else {
                minor
            };
            Spec {
                dtype: DType::ALL[d],
                shape,
                layout,
                read_only,
                version: DLPackVersion { major: 1, minor },
                inaccessible: false,
            }
        })
}

/// The value tree (of case IDs) of generated case `index` of `side` in a
/// run seeded `seed`.
pub fn generated_tree(
    seed: u64,
    index: u64,
    side: GenSide,
) -> Box<dyn proptest::strategy::ValueTree<Value = String>> {
    use proptest::strategy::Strategy;
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
    let mut bytes = [0u8; 32];
    // The producer side's draws are their own (another stream of seeds).
    let salt = match side {
        GenSide::Consumer => 0,
        GenSide::Producer => 0x5052_4f44_5543_4552, // "PRODUCER"
    };
    let mut x = seed ^ salt ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    for chunk in bytes.chunks_mut(8) {
        // splitmix64
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        chunk.copy_from_slice(&(z ^ (z >> 31)).to_le_bytes());
    }
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &bytes),
    );
    match side {
        GenSide::Consumer => Box::new(
            spec_strategy()
                .prop_map(|s| generated_id(&s))
                .new_tree(&mut runner)
                .expect("the strategy has no filter"),
        ),
        GenSide::Producer => Box::new(
            producer_strategy()
                .new_tree(&mut runner)
                .expect("the strategy has no filter"),
        ),
    }
}

/// `count` generated cases of `side` of `seed` (distinct IDs), each with
/// its index.
pub fn generated(seed: u64, count: u64, side: GenSide) -> Vec<(u64, DlCase)> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for i in 0..count {
        let id = generated_tree(seed, i, side).current();
        if seen.insert(id.clone()) {
            out.push((i, parse_generated(&id).expect("a generated ID parses")));
        }
    }
    out
}

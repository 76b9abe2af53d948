//! The DLPack cases: what the harness asks of a producer's `__dlpack__` and
//! hands to a consumer's `from_dlpack`, and how each is judged under the
//! rules of [`crate::rules::dlpack`].

mod consumer;
mod generated;
mod judge;
mod plan;
mod producer;

pub(in crate::dlpack) use consumer::*;
pub use generated::*;
pub use judge::*;
pub use plan::*;
pub use producer::*;

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

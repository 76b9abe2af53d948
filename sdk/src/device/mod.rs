//! Devices: where the data buffers of an `ArrowDeviceArray` live, and what
//! the harness can ask about that memory.
//!
//! One trait, [`Device`], three backends: [`cpu`] (host memory, nothing to
//! wait on), [`emulated`] (a software device of type ARROW_DEVICE_EXT_DEV
//! with its own allocations, streams and events, for testing every
//! synchronisation rule on a machine without a GPU) and `cuda` (the CUDA
//! driver through cudarc, loaded at run time; only with the `cuda` feature,
//! so that a plugin without CUDA does not link cudarc). The harness's device
//! rules (`arrowcert::certify::device`) are written against the trait only:
//! a rule never knows which backend answers it.
//!
//! Addresses cross the trait as `usize`: they come from plugins and are
//! never dereferenced above this module; a backend checks or asks its driver
//! before it touches one, so every method here is safe to call with any
//! value.

pub mod cpu;
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod emulated;
pub mod emulated_ffi;
pub use crate::abi::hostmem;
pub mod mirror;

/// Built without the `cuda` feature: no CUDA backend, and the reason says
/// so (a CUDA device is then skipped like one on a machine without a
/// driver).
#[cfg(not(feature = "cuda"))]
mod cuda {
    const WHY: &str = "no CUDA backend: arrowcert-sdk was built without its `cuda` feature";

    pub fn backend() -> Result<std::sync::Arc<dyn super::Device>, String> {
        Err(WHY.into())
    }

    pub(super) fn probe_driver() -> Result<(), String> {
        Err(WHY.into())
    }
}

use std::fmt;
use std::sync::Arc;

use crate::abi::{device as dt, ArrowDeviceType};

/// A device type a run can cover (`--device`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// ARROW_DEVICE_CPU.
    Cpu,
    /// ARROW_DEVICE_EXT_DEV: the harness's emulated device.
    Emulated,
    /// ARROW_DEVICE_CUDA: device memory.
    Cuda,
    /// ARROW_DEVICE_CUDA_HOST: pinned host memory.
    CudaHost,
    /// ARROW_DEVICE_CUDA_MANAGED: managed (unified) memory.
    CudaManaged,
}

impl Kind {
    pub const ALL: [Kind; 5] = [
        Kind::Cpu,
        Kind::Emulated,
        Kind::Cuda,
        Kind::CudaHost,
        Kind::CudaManaged,
    ];

    /// The name `--device` takes and case IDs use.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Cpu => "cpu",
            Kind::Emulated => "emulated",
            Kind::Cuda => "cuda",
            Kind::CudaHost => "cuda-host",
            Kind::CudaManaged => "cuda-managed",
        }
    }

    pub fn parse(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == s)
    }

    /// The `ArrowDeviceType` value.
    pub fn device_type(self) -> ArrowDeviceType {
        match self {
            Kind::Cpu => dt::CPU,
            Kind::Emulated => dt::EXT_DEV,
            Kind::Cuda => dt::CUDA,
            Kind::CudaHost => dt::CUDA_HOST,
            Kind::CudaManaged => dt::CUDA_MANAGED,
        }
    }

    pub fn from_device_type(t: ArrowDeviceType) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.device_type() == t)
    }

    /// The device id the harness asks for: -1 for CPU (the spec's
    /// convention), 0 (the first device) otherwise.
    pub fn device_id(self) -> i64 {
        match self {
            Kind::Cpu => -1,
            _ => 0,
        }
    }

    /// True for the CUDA device types.
    pub fn is_cuda(self) -> bool {
        matches!(self, Kind::Cuda | Kind::CudaHost | Kind::CudaManaged)
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What kind of memory an address is, as the backend sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemoryKind {
    /// Ordinary (pageable) host memory, or memory the backend does not know.
    Host,
    /// Page-locked host memory registered with a device (cudaMallocHost).
    PinnedHost,
    /// Device memory of device `ordinal`.
    Device { ordinal: i64 },
    /// Managed (unified) memory, attached to device `ordinal`.
    Managed { ordinal: i64 },
    /// An allocation of the emulated device `id`.
    Emulated { id: i64 },
}

impl fmt::Display for MemoryKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MemoryKind::Host => f.write_str("host memory"),
            MemoryKind::PinnedHost => f.write_str("pinned host memory"),
            MemoryKind::Device { ordinal } => write!(f, "device memory of device {ordinal}"),
            MemoryKind::Managed { ordinal } => write!(f, "managed memory of device {ordinal}"),
            MemoryKind::Emulated { id } => write!(f, "memory of emulated device {id}"),
        }
    }
}

impl MemoryKind {
    /// True for memory the host may read with ordinary loads. Device memory
    /// is the one kind it may not (the spec: "it is only the data buffers
    /// themselves which reside in device memory ... Everything else should
    /// be in CPU memory").
    pub fn is_host(&self) -> bool {
        matches!(self, MemoryKind::Host | MemoryKind::PinnedHost)
    }

    /// Whether data buffers of an array declared on `kind` with `device_id`
    /// may be this memory.
    pub fn fits(&self, kind: Kind, device_id: i64) -> bool {
        match (kind, self) {
            (Kind::Cpu, m) => m.is_host(),
            (Kind::Emulated, MemoryKind::Emulated { id }) => *id == device_id,
            (Kind::Cuda, MemoryKind::Device { ordinal }) => *ordinal == device_id,
            (Kind::CudaHost, MemoryKind::PinnedHost) => true,
            (Kind::CudaManaged, MemoryKind::Managed { ordinal }) => *ordinal == device_id,
            _ => false,
        }
    }

    /// Whether an array declared on `kind` with `device_id` may hold data
    /// buffers of this memory at all: memory "the device which can access
    /// the buffers" can access (device_type is "Mandatory. The type of the
    /// device which can access the buffers in the array."). Wider than
    /// [`MemoryKind::fits`]: the host reads pinned and managed memory, a
    /// CUDA device reads managed and (mapped) pinned host memory.
    pub fn accessible(&self, kind: Kind, device_id: i64) -> bool {
        self.fits(kind, device_id)
            || match (kind, self) {
                (Kind::Cpu, MemoryKind::Managed { .. }) => true,
                (Kind::Cuda, MemoryKind::Managed { .. } | MemoryKind::PinnedHost) => true,
                (Kind::CudaManaged, MemoryKind::Device { ordinal }) => *ordinal == device_id,
                _ => false,
            }
    }

    /// What a data buffer on `kind` should be, for evidence.
    pub fn wanted(kind: Kind, device_id: i64) -> String {
        match kind {
            Kind::Cpu => "host memory".into(),
            Kind::Emulated => format!("memory of emulated device {device_id}"),
            Kind::Cuda => format!("device memory of device {device_id}"),
            Kind::CudaHost => "pinned host memory".into(),
            Kind::CudaManaged => format!("managed memory of device {device_id}"),
        }
    }
}

/// A backend's handle to an event (the value a `sync_event` points to).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Event(pub u64);

/// A backend's handle to a stream (a queue of device work).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Stream(pub u64);

/// A device backend. Every method is safe to call with any address: a
/// backend checks it (against its allocation table, or by asking its
/// driver) before it touches memory.
pub trait Device: Send + Sync {
    /// The backend's name in reports (`"cpu"`, `"emulated"`, `"cuda"`).
    fn name(&self) -> &'static str;

    /// Allocates `len` bytes of the memory `kind` declares (device memory,
    /// pinned host, managed, emulated).
    fn alloc(&self, kind: Kind, len: usize) -> Result<usize, String>;
    /// Frees what [`Device::alloc`] returned.
    fn free(&self, addr: usize) -> Result<(), String>;
    /// Copies `len` bytes at `addr` to the host. Fails, without reading,
    /// when the range is not memory the backend can read.
    fn copy_to_host(&self, addr: usize, len: usize) -> Result<Vec<u8>, String>;
    /// Copies `bytes` to `addr`, synchronously.
    fn copy_from_host(&self, addr: usize, bytes: &[u8]) -> Result<(), String>;

    fn stream_create(&self) -> Result<Stream, String>;
    fn stream_destroy(&self, stream: Stream) -> Result<(), String>;
    /// Enqueues a write of `bytes` to `addr` on `stream` that lands late:
    /// on the emulated device only when someone waits for it, on CUDA after
    /// a slow kernel. Reading `addr` before waiting gives the old contents.
    fn write_late(&self, stream: Stream, addr: usize, bytes: &[u8]) -> Result<(), String>;

    fn event_create(&self) -> Result<Event, String>;
    fn event_destroy(&self, event: Event) -> Result<(), String>;
    fn event_record(&self, event: Event, stream: Stream) -> Result<(), String>;
    /// Blocks the host until the event completed.
    fn event_wait(&self, event: Event) -> Result<(), String>;
    /// True when the event completed; never waits and never makes work
    /// progress.
    fn event_query(&self, event: Event) -> Result<bool, String>;
    /// Reads the event a `sync_event` pointer leads to (`*(Event*)ptr`) and
    /// checks it is a live event of this backend. The error says what the
    /// pointer was instead (for example the event itself, passed by value).
    fn event_behind(&self, sync_event: usize) -> Result<Event, String>;

    /// Blocks until all work on the device finished.
    fn synchronize(&self) -> Result<(), String>;
    /// Blocks until all work on a stream another library made (a raw
    /// handle, as the CUDA Array Interface's `stream` gives it; 1 and 2
    /// are CUDA's legacy and per-thread default streams) finished. Only
    /// backends that take foreign streams answer.
    fn synchronize_stream_handle(&self, handle: u64) -> Result<(), String> {
        Err(format!(
            "the {} device takes no stream handles of other libraries ({handle:#x})",
            self.name()
        ))
    }

    /// What memory `addr` is.
    fn memory_kind(&self, addr: usize) -> Result<MemoryKind, String>;
    /// The allocation holding `addr`: (base, length); `None` when `addr` is
    /// in none the backend knows.
    fn allocation_of(&self, addr: usize) -> Option<(usize, usize)>;
    /// Bytes of device memory allocated and not freed, when the backend
    /// counts them (for leak checks).
    fn live_bytes(&self) -> Option<i64>;
}

/// The backend serving `kind`, or why this machine has none.
pub fn backend(kind: Kind) -> Result<Arc<dyn Device>, String> {
    match kind {
        Kind::Cpu => Ok(cpu::backend()),
        Kind::Emulated => Ok(emulated::backend()),
        Kind::Cuda | Kind::CudaHost | Kind::CudaManaged => cuda::backend(),
    }
}

/// Whether this machine can run `kind`: `Err` carries the reason a case on
/// it is skipped ("no CUDA driver: ...").
pub fn available(kind: Kind) -> Result<(), String> {
    backend(kind).map(|_| ())
}

/// Whether this machine's CUDA driver library loads (nothing is
/// initialised): workers then bound memory by RLIMIT_DATA instead of
/// address space (`run::proc::Limits::worker`). Probed once per process.
pub fn cuda_driver_loads() -> bool {
    static LOADS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *LOADS.get_or_init(|| cuda::probe_driver().is_ok())
}

/// Why a case on `kind` was skipped when this process could not use the
/// device (`why`, from [`backend`]). `--require-device` turns such skips
/// into an error ([`skipped_though_required`]).
pub fn missing(kind: Kind, why: &str) -> String {
    format!("no {kind} device on this machine: {why}")
}

/// `--require-device`: the first of `required` whose cases were skipped
/// as [`missing`] anyway (the orchestrator found the device; a worker
/// process could not use it, as when the CUDA driver failed to start under
/// a memory limit), as one line: how many, and the first reason.
pub fn skipped_though_required<'a>(
    required: &[Kind],
    skipped: impl Iterator<Item = &'a str> + Clone,
) -> Option<String> {
    required.iter().find_map(|&k| {
        let prefix = format!("no {k} device on this machine: ");
        let mut hit = skipped.clone().filter(|m| m.starts_with(&prefix));
        let first = hit.next()?;
        Some(format!(
            "--require-device {k}: {} case(s) on it were skipped in the worker processes ({})",
            1 + hit.count(),
            first
        ))
    })
}

#[cfg(test)]
mod required_tests {
    use super::*;

    #[cfg(not(feature = "cuda"))]
    #[test]
    fn without_the_cuda_feature_cuda_kinds_have_no_backend_and_say_why() {
        for kind in [Kind::Cuda, Kind::CudaHost, Kind::CudaManaged] {
            let why = available(kind).expect_err("no CUDA backend");
            assert!(why.contains("`cuda` feature"), "{why}");
        }
        assert!(!cuda_driver_loads());
        assert!(available(Kind::Cpu).is_ok() && available(Kind::Emulated).is_ok());
    }

    #[test]
    fn a_required_device_skipped_in_the_workers_is_one_line() {
        let oom = missing(
            Kind::Cuda,
            "CUDA driver present but cuInit failed: CUDA_ERROR_OUT_OF_MEMORY",
        );
        let other = "the plugin does not claim cuda";
        let skips = [other, oom.as_str(), oom.as_str()];
        let line = skipped_though_required(&[Kind::Cuda], skips.iter().copied()).unwrap();
        assert!(
            line.starts_with("--require-device cuda: 2 case(s)"),
            "{line}"
        );
        assert!(line.contains("CUDA_ERROR_OUT_OF_MEMORY"), "{line}");
        // Not required, or skipped for another reason: nothing to say.
        assert_eq!(skipped_though_required(&[], skips.iter().copied()), None);
        assert_eq!(
            skipped_though_required(&[Kind::Cuda], [other].iter().copied()),
            None
        );
        assert_eq!(
            skipped_though_required(&[Kind::Emulated], skips.iter().copied()),
            None
        );
    }
}

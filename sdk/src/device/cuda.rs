//! The CUDA backend: the CUDA driver API through cudarc, loaded at run time.
//!
//! Nothing links libcuda at build time (cudarc's `dynamic-loading`), so the
//! harness builds and runs on machines without a GPU: [`backend`] probes for
//! the driver library itself before any cudarc call (cudarc's loaders panic
//! when a library or symbol is missing) and answers `Err` with the reason a
//! CUDA case is skipped. Every cudarc call goes through `raw`, which turns
//! a panic into an error, so no panic escapes this module.
//!
//! The backend works on the primary context of device 0, bound to the
//! calling thread at the start of every method (`Cuda::bind`): any thread
//! of the harness or of a plugin may call it.
//!
//! Late writes ([`Device::write_late`]) are two kernels compiled once with
//! NVRTC (a separate library, libnvrtc: without it `write_late` fails and
//! says so, everything else works): `arrowcert_spin` busy-waits on the GPU's
//! nanosecond timer for [`LATE_BY`], then `arrowcert_put` copies the bytes,
//! which travel as a kernel parameter (at most [`CHUNK`] bytes a launch), so
//! a late write needs no staging allocation: allocating (device or pinned
//! memory) can make the driver wait for running kernels, which would let
//! the writes land before the producer returns.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ffi::{c_void, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use cudarc::driver::sys;

use super::{hostmem, Device, Event, Kind, MemoryKind, Stream};

/// The names the driver library is probed under, in order.
const DRIVER_LIBRARIES: [&str; 2] = ["libcuda.so.1", "libcuda.so"];

/// How long the spin kernel of a late write runs before the bytes land.
pub const LATE_BY: Duration = Duration::from_millis(200);

/// A late write issued while its stream is still spinning for at least this
/// long more does not add a spin of its own: it lands behind the one already
/// queued, at least this long after it was issued.
const STILL_LATE: Duration = Duration::from_millis(100);

/// Bytes one `arrowcert_put` launch carries in its parameter (kernel
/// parameters may take 4096 bytes in all; the pointer and length come too).
pub const CHUNK: usize = 3968;

// The put kernel's parameters fit the 4096 bytes every architecture takes.
const _: () = assert!(8 + 4 + CHUNK <= 4096);

/// Threads of one `arrowcert_put` block.
const PUT_THREADS: u32 = 128;

/// The late-write kernels. The spin is bounded by a round count too, so a
/// timer that does not advance cannot hang the GPU.
const KERNELS: &str = r#"
#define ARROWCERT_CHUNK 3968
struct ArrowcertChunk { unsigned char b[ARROWCERT_CHUNK]; };

extern "C" __global__ void arrowcert_spin(unsigned long long delay_ns) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    for (unsigned long long round = 0; round < delay_ns; ++round) {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
        if (now - start >= delay_ns) break;
    }
}

extern "C" __global__ void arrowcert_put(unsigned char* dst, unsigned int n,
                                         ArrowcertChunk chunk) {
    for (unsigned int i = threadIdx.x; i < n; i += blockDim.x) dst[i] = chunk.b[i];
}
"#;

/// The CUDA backend of this process, or why there is none.
pub fn backend() -> Result<Arc<dyn Device>, String> {
    static CUDA: OnceLock<Result<Arc<dyn Device>, String>> = OnceLock::new();
    CUDA.get_or_init(|| Cuda::open().map(|c| Arc::new(c) as Arc<dyn Device>))
        .clone()
}

/// Runs a cudarc call, turning a panic (a library or symbol cudarc could
/// not load) into an error.
fn guarded<T>(what: &str, f: impl FnOnce() -> T) -> Result<T, String> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|payload| {
        let msg = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "panic".into());
        format!("{what}: the CUDA bindings failed: {msg}")
    })
}

/// Runs a driver call and returns its status (`Err` only if it panicked).
fn raw(what: &str, f: impl FnOnce() -> sys::CUresult) -> Result<sys::CUresult, String> {
    guarded(what, f)
}

/// Runs a driver call; any status but CUDA_SUCCESS is an error.
fn cu(what: &str, f: impl FnOnce() -> sys::CUresult) -> Result<(), String> {
    match raw(what, f)? {
        sys::CUresult::CUDA_SUCCESS => Ok(()),
        r => Err(format!("{what} failed: {}", describe(r))),
    }
}

/// A status by name, with the driver's description when it gives one.
fn describe(r: sys::CUresult) -> String {
    let mut text: *const std::ffi::c_char = std::ptr::null();
    // SAFETY: cuGetErrorString writes one pointer to `text`, a live local;
    // it is only called once the driver library was found.
    let ok = raw("cuGetErrorString", || unsafe {
        sys::cuGetErrorString(r, &mut text)
    });
    let detail = match ok {
        Ok(sys::CUresult::CUDA_SUCCESS) if !text.is_null() => {
            // SAFETY: on success the driver points `text` at a static,
            // NUL-terminated string.
            let s = unsafe { CStr::from_ptr(text) };
            format!(" ({})", s.to_string_lossy())
        }
        _ => String::new(),
    };
    format!("{r:?}{detail}")
}

/// Probes for the driver library with libloading, which reports a missing
/// library as an error where cudarc would panic.
pub(super) fn probe_driver() -> Result<(), String> {
    let mut why = Vec::new();
    for name in DRIVER_LIBRARIES {
        // SAFETY: loading the system's CUDA driver library runs its
        // initialisers, which is what any CUDA program does; the handle is
        // closed again at once (cudarc opens its own).
        match unsafe { libloading::Library::new(name) } {
            Ok(_) => return Ok(()),
            Err(e) => why.push(e.to_string()),
        }
    }
    Err(format!(
        "no CUDA driver: libcuda.so.1 not found ({})",
        why.join("; ")
    ))
}

/// `ptx` with its `.version` directive set to `version`.
fn with_ptx_version(ptx: &str, version: &str) -> String {
    ptx.lines()
        .map(|l| {
            if l.trim_start().starts_with(".version ") {
                format!(".version {version}")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The late-write kernels, loaded into the primary context.
struct Kernels {
    spin: usize,
    put: usize,
}

/// What the backend remembers, under one lock.
#[derive(Default)]
struct State {
    /// Allocations made by [`Device::alloc`]: base -> (kind, length).
    allocs: BTreeMap<usize, (Kind, usize)>,
    /// Events made by [`Device::event_create`] and not destroyed.
    events: HashSet<u64>,
    /// Per allocation of ours written late: an event recorded after the
    /// last write, waited on before the allocation is freed (a late write
    /// into freed memory would corrupt whatever is allocated there next).
    fences: HashMap<usize, u64>,
    /// Per stream: until when its queued late writes are still pending.
    late_until: HashMap<u64, Instant>,
}

/// The CUDA backend: device 0's primary context.
pub struct Cuda {
    /// The `CUcontext`, as an address (handles cross threads as numbers).
    ctx: usize,
    /// The device ordinal the context belongs to.
    ordinal: i64,
    state: Mutex<State>,
    kernels: OnceLock<Result<Kernels, String>>,
    live: AtomicI64,
}

impl Cuda {
    fn open() -> Result<Cuda, String> {
        probe_driver()?;
        // SAFETY: only tries to dlopen cudarc's candidate names.
        let present = guarded("is_culib_present", || unsafe { sys::is_culib_present() })?;
        if !present {
            return Err(
                "no CUDA driver: libcuda.so.1 loads, but under none of the names \
                        cudarc looks for"
                    .into(),
            );
        }
        // SAFETY: cuInit takes flags (must be 0) and nothing else.
        match raw("cuInit", || unsafe { sys::cuInit(0) })? {
            sys::CUresult::CUDA_SUCCESS => {}
            sys::CUresult::CUDA_ERROR_NO_DEVICE => {
                return Err("CUDA driver present but no device: cuInit gave \
                            CUDA_ERROR_NO_DEVICE"
                    .into())
            }
            r => {
                return Err(format!(
                    "CUDA driver present but cuInit failed: {}",
                    describe(r)
                ))
            }
        }
        let mut count = 0;
        // SAFETY: writes one int to a live local.
        cu("cuDeviceGetCount", || unsafe {
            sys::cuDeviceGetCount(&mut count)
        })
        .map_err(|e| format!("CUDA driver present but no device: {e}"))?;
        if count < 1 {
            return Err("CUDA driver present but no device: cuDeviceGetCount gave 0".into());
        }
        let mut dev: sys::CUdevice = 0;
        // SAFETY: writes one CUdevice to a live local; ordinal 0 < count.
        cu("cuDeviceGet", || unsafe { sys::cuDeviceGet(&mut dev, 0) })
            .map_err(|e| format!("CUDA device 0 unusable: {e}"))?;
        let mut ctx: sys::CUcontext = std::ptr::null_mut();
        // SAFETY: writes one CUcontext to a live local; `dev` is a device
        // handle the driver just returned. The primary context is retained
        // for the life of the process (the backend is never dropped).
        cu("cuDevicePrimaryCtxRetain", || unsafe {
            sys::cuDevicePrimaryCtxRetain(&mut ctx, dev)
        })
        .map_err(|e| format!("CUDA device 0 unusable: {e}"))?;
        let cuda = Cuda {
            ctx: ctx as usize,
            ordinal: 0,
            state: Mutex::new(State::default()),
            kernels: OnceLock::new(),
            live: AtomicI64::new(0),
        };
        cuda.bind()
            .map_err(|e| format!("CUDA device 0 unusable: {e}"))?;
        Ok(cuda)
    }

    /// Makes the primary context current on the calling thread.
    fn bind(&self) -> Result<(), String> {
        let ctx = self.ctx as sys::CUcontext;
        // SAFETY: `ctx` is the primary context retained in `open`, alive for
        // the life of the process.
        cu("cuCtxSetCurrent", || unsafe { sys::cuCtxSetCurrent(ctx) })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves plain maps behind: go on.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// One pointer attribute of `addr`, as the driver status and the value
    /// (every attribute read here is at most 8 bytes; the rest stays 0).
    fn attribute(
        &self,
        attr: sys::CUpointer_attribute,
        addr: usize,
    ) -> Result<(sys::CUresult, u64), String> {
        let mut value: u64 = 0;
        // SAFETY: `value` is a live, 8-byte, 8-aligned local, large enough
        // for each attribute asked for here (an int, a bool, an unsigned
        // int, a pointer or a size); the driver only inspects `addr`.
        let r = raw("cuPointerGetAttribute", || unsafe {
            sys::cuPointerGetAttribute(
                (&mut value as *mut u64).cast::<c_void>(),
                attr,
                addr as sys::CUdeviceptr,
            )
        })?;
        Ok((r, value))
    }

    /// Checks that `len` bytes at `addr` lie inside one CUDA allocation.
    fn check_range(&self, addr: usize, len: usize) -> Result<(), String> {
        let Some((base, size)) = self.allocation_of(addr) else {
            return Err(format!("{addr:#x} is in no CUDA allocation"));
        };
        match addr.checked_add(len) {
            Some(end) if end <= base + size => Ok(()),
            _ => Err(format!(
                "{len} bytes at {addr:#x} run past the end of their allocation \
                 ({size} bytes at {base:#x})"
            )),
        }
    }

    /// Compiles and loads the late-write kernels, once.
    fn kernels(&self) -> Result<&Kernels, String> {
        self.kernels
            .get_or_init(|| self.load_kernels())
            .as_ref()
            .map_err(Clone::clone)
    }

    fn load_kernels(&self) -> Result<Kernels, String> {
        // SAFETY: only tries to dlopen cudarc's candidate names for NVRTC.
        let present = guarded("NVRTC probe", || unsafe {
            cudarc::nvrtc::sys::is_culib_present()
        })?;
        if !present {
            return Err(
                "no NVRTC: libnvrtc.so not found; write_late compiles its kernels \
                        with NVRTC (install the CUDA toolkit's NVRTC, or put the lib folder \
                        of the nvidia-cuda-nvrtc-cu12 wheel on LD_LIBRARY_PATH)"
                    .into(),
            );
        }
        let ptx =
            guarded("NVRTC", || cudarc::nvrtc::compile_ptx(KERNELS))?.map_err(|e| match e {
                cudarc::nvrtc::CompileError::CompileError { log, .. } => format!(
                    "NVRTC could not compile the late-write kernels: {}",
                    log.to_string_lossy()
                ),
                other => format!("NVRTC could not compile the late-write kernels: {other:?}"),
            })?;
        let text = guarded("NVRTC", || ptx.to_src())?;
        let text = CString::new(text).map_err(|e| format!("NVRTC gave PTX with a NUL: {e}"))?;
        self.bind()?;
        let load = |text: &CStr| -> Result<sys::CUmodule, sys::CUresult> {
            let mut module: sys::CUmodule = std::ptr::null_mut();
            // SAFETY: `text` is NUL-terminated PTX that outlives the call;
            // `module` is a live local the driver writes one handle to.
            let r = raw("cuModuleLoadData", || unsafe {
                sys::cuModuleLoadData(&mut module, text.as_ptr().cast())
            });
            match r {
                Ok(sys::CUresult::CUDA_SUCCESS) => Ok(module),
                Ok(r) => Err(r),
                Err(_) => Err(sys::CUresult::CUDA_ERROR_UNKNOWN),
            }
        };
        let module = match load(&text) {
            Ok(m) => m,
            // An NVRTC newer than the driver writes a PTX ISA version the
            // driver does not know; the kernels use nothing past ISA 7.0.
            Err(sys::CUresult::CUDA_ERROR_UNSUPPORTED_PTX_VERSION) => {
                let older = CString::new(with_ptx_version(&text.to_string_lossy(), "7.0"))
                    .map_err(|e| format!("PTX with a NUL: {e}"))?;
                load(&older).map_err(|r| format!("cuModuleLoadData failed: {}", describe(r)))?
            }
            Err(r) => return Err(format!("cuModuleLoadData failed: {}", describe(r))),
        };
        let function = |name: &CStr| -> Result<usize, String> {
            let mut f: sys::CUfunction = std::ptr::null_mut();
            // SAFETY: `module` was just loaded; `name` is NUL-terminated;
            // `f` is a live local the driver writes one handle to.
            cu("cuModuleGetFunction", || unsafe {
                sys::cuModuleGetFunction(&mut f, module, name.as_ptr())
            })?;
            Ok(f as usize)
        };
        // The module stays loaded for the life of the process.
        Ok(Kernels {
            spin: function(c"arrowcert_spin")?,
            put: function(c"arrowcert_put")?,
        })
    }

    /// Launches `f` with one block of `threads` threads on `stream`.
    fn launch(
        &self,
        f: usize,
        threads: u32,
        stream: Stream,
        params: &mut [*mut c_void],
    ) -> Result<(), String> {
        // SAFETY: `f` is a kernel of the loaded module; `params` holds one
        // pointer per kernel parameter, each to a live value of the type the
        // kernel declares (the driver copies them before returning);
        // `stream` is a stream of this context (or 0, the legacy stream).
        cu("cuLaunchKernel", || unsafe {
            sys::cuLaunchKernel(
                f as sys::CUfunction,
                1,
                1,
                1,
                threads,
                1,
                1,
                0,
                stream.0 as sys::CUstream,
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        })
    }

    /// The fence event of our allocation holding `addr`, created on demand.
    fn fence_for(&self, addr: usize) -> Result<Option<u64>, String> {
        let base = {
            let st = self.state();
            match st.allocs.range(..=addr).next_back() {
                Some((&base, &(_, len))) if addr < base + len.max(1) => base,
                _ => return Ok(None),
            }
        };
        if let Some(&e) = self.state().fences.get(&base) {
            return Ok(Some(e));
        }
        let e = self.new_event()?;
        self.state().fences.insert(base, e);
        Ok(Some(e))
    }

    fn new_event(&self) -> Result<u64, String> {
        let mut e: sys::CUevent = std::ptr::null_mut();
        let flags = sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32
            | sys::CUevent_flags::CU_EVENT_BLOCKING_SYNC as u32;
        // SAFETY: writes one event handle to a live local.
        cu("cuEventCreate", || unsafe {
            sys::cuEventCreate(&mut e, flags)
        })?;
        Ok(e as u64)
    }

    /// cuEventQuery on a handle: Ok(true) complete, Ok(false) pending.
    fn query(&self, handle: u64) -> Result<Result<bool, sys::CUresult>, String> {
        // SAFETY: the driver validates the handle and answers
        // CUDA_ERROR_INVALID_HANDLE for one that is not a live event.
        let r = raw("cuEventQuery", || unsafe {
            sys::cuEventQuery(handle as usize as sys::CUevent)
        })?;
        Ok(match r {
            sys::CUresult::CUDA_SUCCESS => Ok(true),
            sys::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
            other => Err(other),
        })
    }
}

impl Device for Cuda {
    fn name(&self) -> &'static str {
        "cuda"
    }

    fn alloc(&self, kind: Kind, len: usize) -> Result<usize, String> {
        self.bind()?;
        let n = len.max(1);
        let addr = match kind {
            Kind::Cuda => {
                let mut p: sys::CUdeviceptr = 0;
                // SAFETY: writes one device pointer to a live local.
                cu("cuMemAlloc", || unsafe { sys::cuMemAlloc_v2(&mut p, n) })?;
                p as usize
            }
            Kind::CudaHost => {
                let mut p: *mut c_void = std::ptr::null_mut();
                // SAFETY: writes one host pointer to a live local.
                cu("cuMemAllocHost", || unsafe {
                    sys::cuMemAllocHost_v2(&mut p, n)
                })?;
                p as usize
            }
            Kind::CudaManaged => {
                let mut p: sys::CUdeviceptr = 0;
                let flags = sys::CUmemAttach_flags::CU_MEM_ATTACH_GLOBAL as u32;
                // SAFETY: writes one device pointer to a live local.
                cu("cuMemAllocManaged", || unsafe {
                    sys::cuMemAllocManaged(&mut p, n, flags)
                })?;
                p as usize
            }
            other => return Err(format!("the CUDA backend cannot allocate {other} memory")),
        };
        self.state().allocs.insert(addr, (kind, n));
        self.live.fetch_add(n as i64, Ordering::Relaxed);
        Ok(addr)
    }

    fn free(&self, addr: usize) -> Result<(), String> {
        let (entry, fence) = {
            let mut st = self.state();
            let entry = st.allocs.remove(&addr);
            (entry, st.fences.remove(&addr))
        };
        let Some((kind, len)) = entry else {
            return Err(format!(
                "{addr:#x} is not an allocation of this CUDA backend (or was freed already)"
            ));
        };
        self.bind()?;
        if let Some(fence) = fence {
            // Late writes into this allocation land before it is freed.
            // SAFETY: `fence` is an event this backend created and recorded.
            let waited = cu("cuEventSynchronize", || unsafe {
                sys::cuEventSynchronize(fence as usize as sys::CUevent)
            });
            // SAFETY: as above; destroyed once (it was removed from the map).
            let _ = cu("cuEventDestroy", || unsafe {
                sys::cuEventDestroy_v2(fence as usize as sys::CUevent)
            });
            waited?;
        }
        let freed = match kind {
            // SAFETY: `addr` came from cuMemAllocHost (the table says so) and
            // is freed once (it was removed from the table).
            Kind::CudaHost => cu("cuMemFreeHost", || unsafe {
                sys::cuMemFreeHost(addr as *mut c_void)
            }),
            // SAFETY: `addr` came from cuMemAlloc or cuMemAllocManaged and is
            // freed once.
            _ => cu("cuMemFree", || unsafe {
                sys::cuMemFree_v2(addr as sys::CUdeviceptr)
            }),
        };
        match freed {
            Ok(()) => {
                self.live.fetch_sub(len as i64, Ordering::Relaxed);
                Ok(())
            }
            Err(e) => {
                self.state().allocs.insert(addr, (kind, len));
                Err(e)
            }
        }
    }

    fn copy_to_host(&self, addr: usize, len: usize) -> Result<Vec<u8>, String> {
        if len == 0 {
            return Ok(Vec::new());
        }
        let kind = self.memory_kind(addr)?;
        if kind == MemoryKind::Host {
            return hostmem::read(addr, len).ok_or_else(|| {
                format!("{len} bytes at {addr:#x} are neither CUDA memory nor readable host memory")
            });
        }
        if let Err(e) = self.check_range(addr, len) {
            // Pinned host memory whose bounds the driver does not report
            // (another library's allocation) is still host memory: read what
            // is mapped, refusing anything that is not.
            if kind == MemoryKind::PinnedHost && self.allocation_of(addr).is_none() {
                return hostmem::read(addr, len).ok_or(e);
            }
            return Err(e);
        }
        let mut out = vec![0u8; len];
        // SAFETY: the source range lies inside one CUDA allocation (checked
        // above); the destination is `out`, `len` bytes we own. With unified
        // addressing cuMemcpy infers both directions from the pointers.
        cu("cuMemcpy", || unsafe {
            sys::cuMemcpy(
                out.as_mut_ptr() as sys::CUdeviceptr,
                addr as sys::CUdeviceptr,
                len,
            )
        })?;
        Ok(out)
    }

    fn copy_from_host(&self, addr: usize, bytes: &[u8]) -> Result<(), String> {
        if bytes.is_empty() {
            return Ok(());
        }
        let kind = self.memory_kind(addr)?;
        if kind == MemoryKind::Host {
            return Err(format!("{addr:#x} is {kind}, not CUDA memory"));
        }
        self.check_range(addr, bytes.len())?;
        // SAFETY: the destination range lies inside one CUDA allocation
        // (checked above); the source is `bytes`, borrowed for the call.
        cu("cuMemcpy", || unsafe {
            sys::cuMemcpy(
                addr as sys::CUdeviceptr,
                bytes.as_ptr() as sys::CUdeviceptr,
                bytes.len(),
            )
        })
    }

    fn stream_create(&self) -> Result<Stream, String> {
        self.bind()?;
        let mut s: sys::CUstream = std::ptr::null_mut();
        let flags = sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32;
        // SAFETY: writes one stream handle to a live local.
        cu("cuStreamCreate", || unsafe {
            sys::cuStreamCreate(&mut s, flags)
        })?;
        Ok(Stream(s as u64))
    }

    fn stream_destroy(&self, stream: Stream) -> Result<(), String> {
        self.bind()?;
        self.state().late_until.remove(&stream.0);
        // SAFETY: the caller passes a stream from stream_create; work still
        // queued on it completes after the call (cuStreamDestroy's rule).
        cu("cuStreamDestroy", || unsafe {
            sys::cuStreamDestroy_v2(stream.0 as sys::CUstream)
        })
    }

    fn write_late(&self, stream: Stream, addr: usize, bytes: &[u8]) -> Result<(), String> {
        if bytes.is_empty() {
            return Ok(());
        }
        let kind = self.memory_kind(addr)?;
        if kind == MemoryKind::Host {
            return Err(format!(
                "write_late needs CUDA memory (device, pinned or managed); {addr:#x} is {kind}"
            ));
        }
        self.check_range(addr, bytes.len())?;
        let kernels = self.kernels()?;
        self.bind()?;
        let now = Instant::now();
        let spin = {
            let mut st = self.state();
            match st.late_until.get(&stream.0) {
                Some(&until) if until > now + STILL_LATE => false,
                _ => {
                    st.late_until.insert(stream.0, now + LATE_BY);
                    true
                }
            }
        };
        if spin {
            let mut delay_ns = LATE_BY.as_nanos() as u64;
            let mut params = [(&mut delay_ns as *mut u64).cast::<c_void>()];
            self.launch(kernels.spin, 1, stream, &mut params)?;
        }
        for (i, piece) in bytes.chunks(CHUNK).enumerate() {
            let mut dst = (addr + i * CHUNK) as u64;
            let mut n = piece.len() as u32;
            let mut chunk = [0u8; CHUNK];
            chunk[..piece.len()].copy_from_slice(piece);
            let mut params = [
                (&mut dst as *mut u64).cast::<c_void>(),
                (&mut n as *mut u32).cast::<c_void>(),
                chunk.as_mut_ptr().cast::<c_void>(),
            ];
            self.launch(kernels.put, PUT_THREADS, stream, &mut params)?;
        }
        if let Some(fence) = self.fence_for(addr)? {
            self.event_record(Event(fence), stream)?;
        }
        Ok(())
    }

    fn event_create(&self) -> Result<Event, String> {
        self.bind()?;
        let e = self.new_event()?;
        self.state().events.insert(e);
        Ok(Event(e))
    }

    fn event_destroy(&self, event: Event) -> Result<(), String> {
        self.bind()?;
        self.state().events.remove(&event.0);
        // SAFETY: the caller passes an event from event_create, destroyed
        // once; the driver rejects a handle that is not a live event.
        cu("cuEventDestroy", || unsafe {
            sys::cuEventDestroy_v2(event.0 as usize as sys::CUevent)
        })
    }

    fn event_record(&self, event: Event, stream: Stream) -> Result<(), String> {
        self.bind()?;
        // SAFETY: handles from event_create and stream_create (or 0, the
        // legacy stream); the driver rejects handles that are not live.
        cu("cuEventRecord", || unsafe {
            sys::cuEventRecord(event.0 as usize as sys::CUevent, stream.0 as sys::CUstream)
        })
    }

    fn event_wait(&self, event: Event) -> Result<(), String> {
        self.bind()?;
        // SAFETY: the driver rejects a handle that is not a live event.
        cu("cuEventSynchronize", || unsafe {
            sys::cuEventSynchronize(event.0 as usize as sys::CUevent)
        })
    }

    fn event_query(&self, event: Event) -> Result<bool, String> {
        self.bind()?;
        self.query(event.0)?
            .map_err(|r| format!("cuEventQuery failed: {}", describe(r)))
    }

    fn event_behind(&self, sync_event: usize) -> Result<Event, String> {
        if sync_event == 0 {
            return Err("sync_event is NULL".into());
        }
        let Some(handle) = hostmem::read_u64(sync_event) else {
            return Err(format!(
                "sync_event {sync_event:#x} is not readable host memory: for CUDA it must \
                 point to host memory holding a CUevent (a cudaEvent_t*)"
            ));
        };
        if handle == 0 {
            return Err(format!(
                "sync_event {sync_event:#x} points to a NULL CUevent"
            ));
        }
        if self.state().events.contains(&handle) {
            return Ok(Event(handle));
        }
        // A CUevent is a pointer to the driver's host memory: a value that
        // points to nothing readable is no event, and is not handed to the
        // driver (which might follow it).
        if !hostmem::readable(handle as usize, 8) {
            return Err(format!(
                "sync_event does not point to a live CUevent: the 8 bytes it points to \
                 ({handle:#x}) are not even a pointer to host memory. A producer that \
                 passes the event itself instead of a pointer to it looks like this."
            ));
        }
        self.bind()?;
        match self.query(handle)? {
            Ok(_) => Ok(Event(handle)),
            Err(r) => {
                let itself = match self.query(sync_event as u64) {
                    Ok(Ok(_)) => " sync_event is itself a live CUevent: the producer passed \
                                  the event by value instead of a pointer to it."
                        .to_string(),
                    _ => " A producer that passes the event itself instead of a pointer to \
                          it looks like this."
                        .to_string(),
                };
                Err(format!(
                    "sync_event does not point to a live CUevent: cuEventQuery on the 8 bytes \
                     it points to ({handle:#x}) gave {r:?}.{itself}"
                ))
            }
        }
    }

    fn synchronize(&self) -> Result<(), String> {
        self.bind()?;
        // SAFETY: no arguments; waits for the current (primary) context.
        cu("cuCtxSynchronize", || unsafe { sys::cuCtxSynchronize() })
    }

    fn synchronize_stream_handle(&self, handle: u64) -> Result<(), String> {
        if handle == 0 {
            // The CUDA Array Interface forbids 0 ("ambiguous"); the caller
            // judges that, and never asks for it here.
            return Err(
                "stream 0 is ambiguous (legacy or per-thread default): not synchronized".into(),
            );
        }
        self.bind()?;
        // SAFETY: `handle` is a stream handle a live library object
        // exported (the caller holds the object), or CU_STREAM_LEGACY (1)
        // or CU_STREAM_PER_THREAD (2), which the driver takes as handles.
        cu("cuStreamSynchronize", || unsafe {
            sys::cuStreamSynchronize(handle as sys::CUstream)
        })
    }

    fn memory_kind(&self, addr: usize) -> Result<MemoryKind, String> {
        if addr == 0 {
            return Err("NULL is no memory".into());
        }
        self.bind()?;
        use sys::CUpointer_attribute as A;
        let (r, ty) = self.attribute(A::CU_POINTER_ATTRIBUTE_MEMORY_TYPE, addr)?;
        match r {
            sys::CUresult::CUDA_SUCCESS => {}
            sys::CUresult::CUDA_ERROR_INVALID_VALUE => {
                return if hostmem::readable(addr, 1) {
                    Ok(MemoryKind::Host)
                } else {
                    Err(format!(
                        "{addr:#x} is neither CUDA memory nor readable host memory"
                    ))
                };
            }
            other => {
                return Err(format!(
                    "cuPointerGetAttribute({addr:#x}) failed: {}",
                    describe(other)
                ))
            }
        }
        let managed = matches!(
            self.attribute(A::CU_POINTER_ATTRIBUTE_IS_MANAGED, addr)?,
            (sys::CUresult::CUDA_SUCCESS, v) if v != 0
        );
        let ordinal = match self.attribute(A::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, addr)? {
            (sys::CUresult::CUDA_SUCCESS, v) => v as u32 as i32 as i64,
            _ => self.ordinal,
        };
        if managed {
            return Ok(MemoryKind::Managed { ordinal });
        }
        match ty as u32 {
            t if t == sys::CUmemorytype::CU_MEMORYTYPE_HOST as u32 => Ok(MemoryKind::PinnedHost),
            t if t == sys::CUmemorytype::CU_MEMORYTYPE_DEVICE as u32 => {
                Ok(MemoryKind::Device { ordinal })
            }
            t if t == sys::CUmemorytype::CU_MEMORYTYPE_UNIFIED as u32 => {
                Ok(MemoryKind::Managed { ordinal })
            }
            t => Err(format!(
                "{addr:#x} has CUDA memory type {t}, which is no buffer memory"
            )),
        }
    }

    fn allocation_of(&self, addr: usize) -> Option<(usize, usize)> {
        if addr == 0 || self.bind().is_err() {
            return None;
        }
        let mut base: sys::CUdeviceptr = 0;
        let mut size: usize = 0;
        // SAFETY: writes one pointer and one size to live locals; the driver
        // only looks `addr` up.
        let r = raw("cuMemGetAddressRange", || unsafe {
            sys::cuMemGetAddressRange_v2(&mut base, &mut size, addr as sys::CUdeviceptr)
        });
        if matches!(r, Ok(sys::CUresult::CUDA_SUCCESS)) && size > 0 {
            return Some((base as usize, size));
        }
        use sys::CUpointer_attribute as A;
        if let (Ok((sys::CUresult::CUDA_SUCCESS, b)), Ok((sys::CUresult::CUDA_SUCCESS, s))) = (
            self.attribute(A::CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, addr),
            self.attribute(A::CU_POINTER_ATTRIBUTE_RANGE_SIZE, addr),
        ) {
            if s > 0 {
                return Some((b as usize, s as usize));
            }
        }
        let st = self.state();
        match st.allocs.range(..=addr).next_back() {
            Some((&b, &(_, len))) if addr < b + len => Some((b, len)),
            _ => None,
        }
    }

    fn live_bytes(&self) -> Option<i64> {
        Some(self.live.load(Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Held by every GPU test: the backend's count of live device bytes
    /// is the process's, so tests running at once would see each other's
    /// allocations.
    static GPU: Mutex<()> = Mutex::new(());

    /// The backend and the GPU tests' lock, or `None` after printing why
    /// the test is skipped.
    fn gpu() -> Option<(std::sync::MutexGuard<'static, ()>, Arc<dyn Device>)> {
        let lock = GPU.lock().unwrap_or_else(|e| e.into_inner());
        match backend() {
            Ok(b) => Some((lock, b)),
            Err(why) => {
                println!("skipped: {why}");
                None
            }
        }
    }

    const KINDS: [Kind; 3] = [Kind::Cuda, Kind::CudaHost, Kind::CudaManaged];

    #[test]
    fn backend_answers_without_panicking() {
        // Twice: the answer is cached and stays the same.
        let first = backend().map(|b| b.name());
        let second = backend().map(|b| b.name());
        assert_eq!(first, second);
        match first {
            Ok(name) => assert_eq!(name, "cuda"),
            Err(why) => {
                assert!(why.contains("CUDA"), "skip reason names CUDA: {why}");
                println!("no CUDA here: {why}");
            }
        }
        let lib_here = DRIVER_LIBRARIES.iter().any(|n| {
            // SAFETY: as in probe_driver.
            unsafe { libloading::Library::new(n) }.is_ok()
        });
        if !lib_here {
            let why = backend().err().expect("no driver library, so no backend");
            assert!(
                why.starts_with("no CUDA driver: libcuda.so.1 not found"),
                "{why}"
            );
        }
    }

    #[test]
    fn kernels_compile_with_nvrtc_when_present() {
        // NVRTC needs no GPU: this runs wherever libnvrtc can be loaded.
        // SAFETY: only tries to dlopen cudarc's candidate names for NVRTC.
        let present = guarded("probe", || unsafe {
            cudarc::nvrtc::sys::is_culib_present()
        });
        if present != Ok(true) {
            println!("skipped: no libnvrtc");
            return;
        }
        let ptx = cudarc::nvrtc::compile_ptx(KERNELS).expect("the kernels compile");
        let text = ptx.to_src();
        assert!(text.contains("arrowcert_spin"), "{text}");
        assert!(text.contains("arrowcert_put"), "{text}");
        assert!(text.contains("%globaltimer"), "{text}");
        if std::env::var_os("ARROWCERT_SHOW_PTX").is_some() {
            println!("{text}");
        }
    }

    #[test]
    fn ptx_version_rewrite() {
        let ptx = "//\n.version 8.5\n.target sm_52\n";
        assert_eq!(
            with_ptx_version(ptx, "7.0"),
            "//\n.version 7.0\n.target sm_52"
        );
    }

    #[test]
    fn chunk_constant_matches_the_kernel() {
        assert!(KERNELS.contains(&format!("#define ARROWCERT_CHUNK {CHUNK}")));
    }

    #[test]
    fn gpu_alloc_copy_round_trip_each_kind() {
        let Some((_gpu, dev)) = gpu() else { return };
        for kind in KINDS {
            let before = dev.live_bytes().unwrap();
            let bytes: Vec<u8> = (0..1000u32).map(|i| (i * 7 % 251) as u8).collect();
            let addr = dev.alloc(kind, bytes.len()).unwrap();
            assert_eq!(dev.live_bytes().unwrap(), before + 1000, "{kind}");
            dev.copy_from_host(addr, &bytes).unwrap();
            assert_eq!(
                dev.copy_to_host(addr, bytes.len()).unwrap(),
                bytes,
                "{kind}"
            );
            assert_eq!(
                dev.copy_to_host(addr + 10, 5).unwrap(),
                bytes[10..15],
                "{kind}"
            );
            assert!(
                dev.copy_to_host(addr, 2000).is_err(),
                "{kind}: past the end"
            );
            dev.free(addr).unwrap();
            assert_eq!(dev.live_bytes().unwrap(), before, "{kind}");
            assert!(dev.free(addr).is_err(), "{kind}: double free refused");
        }
    }

    #[test]
    fn gpu_memory_kinds() {
        let Some((_gpu, dev)) = gpu() else { return };
        let d = dev.alloc(Kind::Cuda, 64).unwrap();
        let h = dev.alloc(Kind::CudaHost, 64).unwrap();
        let m = dev.alloc(Kind::CudaManaged, 64).unwrap();
        assert_eq!(
            dev.memory_kind(d).unwrap(),
            MemoryKind::Device { ordinal: 0 }
        );
        assert_eq!(dev.memory_kind(h).unwrap(), MemoryKind::PinnedHost);
        assert_eq!(
            dev.memory_kind(m).unwrap(),
            MemoryKind::Managed { ordinal: 0 }
        );
        assert!(dev.memory_kind(d).unwrap().fits(Kind::Cuda, 0));
        assert!(dev.memory_kind(h).unwrap().fits(Kind::CudaHost, 0));
        assert!(dev.memory_kind(m).unwrap().fits(Kind::CudaManaged, 0));
        let v: Vec<u8> = (0..64).collect();
        assert_eq!(
            dev.memory_kind(v.as_ptr() as usize).unwrap(),
            MemoryKind::Host
        );
        assert!(dev.memory_kind(0).is_err());
        for a in [d, h, m] {
            dev.free(a).unwrap();
        }
    }

    #[test]
    fn gpu_allocation_bounds() {
        let Some((_gpu, dev)) = gpu() else { return };
        for kind in KINDS {
            let a = dev.alloc(kind, 1000).unwrap();
            let (base, len) = dev.allocation_of(a + 10).expect("inside");
            assert_eq!(base, a, "{kind}");
            assert!(len >= 1000, "{kind}: {len}");
            dev.free(a).unwrap();
        }
        let v: Vec<u8> = (0..16).collect();
        assert_eq!(dev.allocation_of(v.as_ptr() as usize), None);
    }

    #[test]
    fn gpu_allocation_sizes_are_exact() {
        // device.buffers.in-allocation (the short-allocation mutant) relies
        // on the driver reporting the size asked for, not a rounded one.
        let Some((_gpu, dev)) = gpu() else { return };
        for kind in KINDS {
            let a = dev.alloc(kind, 1001).unwrap();
            let got = dev.allocation_of(a);
            dev.free(a).unwrap();
            assert_eq!(got, Some((a, 1001)), "{kind}");
        }
    }

    #[test]
    fn gpu_late_write_is_late_until_the_event() {
        let Some((_gpu, dev)) = gpu() else { return };
        if let Err(why) = backend_kernels(&*dev) {
            println!("skipped: {why}");
            return;
        }
        for kind in KINDS {
            let len = 3 * CHUNK + 17; // several launches
            let old = vec![0xEEu8; len];
            let new: Vec<u8> = (0..len).map(|i| (i % 253) as u8).collect();
            let addr = dev.alloc(kind, len).unwrap();
            dev.copy_from_host(addr, &old).unwrap();
            let stream = dev.stream_create().unwrap();
            let event = dev.event_create().unwrap();
            dev.write_late(stream, addr, &new).unwrap();
            dev.event_record(event, stream).unwrap();
            assert!(
                !dev.event_query(event).unwrap(),
                "{kind}: complete right away"
            );
            let early = dev.copy_to_host(addr, len).unwrap();
            assert_ne!(early, new, "{kind}: the data landed before the event");
            dev.event_wait(event).unwrap();
            assert!(dev.event_query(event).unwrap(), "{kind}");
            assert_eq!(dev.copy_to_host(addr, len).unwrap(), new, "{kind}");
            dev.event_destroy(event).unwrap();
            dev.stream_destroy(stream).unwrap();
            dev.free(addr).unwrap();
        }
        dev.synchronize().unwrap();
    }

    /// Whether write_late can work here (NVRTC present and the kernels load).
    fn backend_kernels(dev: &dyn Device) -> Result<(), String> {
        let probe = dev.alloc(Kind::Cuda, 1)?;
        let stream = dev.stream_create()?;
        let r = dev.write_late(stream, probe, &[1]);
        dev.synchronize()?;
        dev.stream_destroy(stream)?;
        dev.free(probe)?;
        r
    }

    #[test]
    fn gpu_event_behind_wants_a_pointer_to_a_live_event() {
        let Some((_gpu, dev)) = gpu() else { return };
        let event = dev.event_create().unwrap();
        let slot: Box<u64> = Box::new(event.0);
        let ptr = &*slot as *const u64 as usize;
        assert_eq!(dev.event_behind(ptr).unwrap(), event);
        // Not asked: the event itself (passed by value). Its first bytes
        // are readable driver memory, so event_behind hands them to the
        // driver, which follows them: on an H100 this test's process died
        // there. A producer doing so is charged to device.event.type
        // through the worker's breadcrumb (certify::crash).
        assert!(dev.event_behind(0).is_err());
        assert!(dev.event_behind(0xA5A5_A5A5_A5A5_A5A5).is_err());
        dev.event_destroy(event).unwrap();
    }

    #[test]
    fn gpu_free_waits_for_pending_late_writes() {
        let Some((_gpu, dev)) = gpu() else { return };
        if let Err(why) = backend_kernels(&*dev) {
            println!("skipped: {why}");
            return;
        }
        let addr = dev.alloc(Kind::Cuda, 64).unwrap();
        let stream = dev.stream_create().unwrap();
        dev.write_late(stream, addr, &[7; 64]).unwrap();
        let t = Instant::now();
        dev.free(addr).unwrap();
        assert!(t.elapsed() >= STILL_LATE, "free waited for the write");
        dev.stream_destroy(stream).unwrap();
    }
}

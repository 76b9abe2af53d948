//! Counting a producer's deleter calls: the harness replaces the `deleter`
//! member of a tensor a library exported with a trampoline of its own that
//! records the call and forwards the first one to the library's deleter (a
//! second call is counted, not forwarded: a double delete becomes a
//! verdict, not a double free in the library).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use crate::abi::dlpack::{
    DLManagedTensor, DLManagedTensorVersioned, LegacyDeleter, VersionedDeleter,
    LEGACY_DELETER_OFFSET, VERSIONED_DELETER_OFFSET,
};
use crate::abi::hostmem;

struct Watched {
    original: usize,
    versioned: bool,
    calls: Arc<AtomicU32>,
}

fn watched() -> std::sync::MutexGuard<'static, HashMap<usize, Watched>> {
    static MAP: std::sync::LazyLock<Mutex<HashMap<usize, Watched>>> =
        std::sync::LazyLock::new(|| Mutex::new(HashMap::new()));
    // A poisoned lock only means a panic elsewhere; the map stays usable.
    MAP.lock().unwrap_or_else(|e| e.into_inner())
}

/// The first call of a watched tensor's deleter: its original, to forward to.
fn record(ptr: usize) -> Option<(usize, bool)> {
    let map = watched();
    let w = map.get(&ptr)?;
    let n = w.calls.fetch_add(1, Ordering::SeqCst);
    (n == 0).then_some((w.original, w.versioned))
}

/// The deleter the harness puts in a watched versioned tensor.
///
/// # Safety
/// Called as the tensor's deleter: `m` is the watched tensor, whose
/// original deleter (recorded by [`watch`]) it may be passed to once.
unsafe extern "C" fn trampoline_versioned(m: *mut DLManagedTensorVersioned) {
    if let Some((original, _)) = record(m as usize) {
        // SAFETY: `original` is the deleter the library put in this tensor
        // (read from it by `watch`), called once with the tensor, as the
        // library expects.
        unsafe {
            let f: VersionedDeleter = std::mem::transmute::<usize, VersionedDeleter>(original);
            f(m)
        }
    }
}

/// The deleter the harness puts in a watched legacy tensor.
///
/// # Safety
/// As [`trampoline_versioned`], for a `DLManagedTensor`.
unsafe extern "C" fn trampoline_legacy(m: *mut DLManagedTensor) {
    if let Some((original, _)) = record(m as usize) {
        // SAFETY: as in trampoline_versioned, for the legacy structure.
        unsafe {
            let f: LegacyDeleter = std::mem::transmute::<usize, LegacyDeleter>(original);
            f(m)
        }
    }
}

/// A watched tensor: how often its deleter was called.
#[derive(Debug, Clone)]
pub struct Watch {
    ptr: usize,
    calls: Arc<AtomicU32>,
}

impl Watch {
    pub fn calls(&self) -> u32 {
        self.calls.load(Ordering::SeqCst)
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        // A tensor already deleted is forgotten (a later tensor may be
        // allocated at its address, and is watched afresh). One not
        // deleted yet keeps its entry: its capsule may still call the
        // trampoline, which must forward to the library's deleter.
        if self.calls() > 0 {
            watched().remove(&self.ptr);
        }
    }
}

/// Puts the counting trampoline in the `deleter` member of the managed
/// tensor at `ptr`. `None` when that member cannot be read or is NULL ("It
/// can be NULL if there is no way for the caller to provide a reasonable
/// destructor"): then there is nothing to count.
///
/// The harness must own the tensor's contents for the write: it holds the
/// capsule, which no one else has seen.
pub fn watch(ptr: usize, versioned: bool) -> Option<Watch> {
    let at = ptr
        + if versioned {
            VERSIONED_DELETER_OFFSET
        } else {
            LEGACY_DELETER_OFFSET
        };
    let original = hostmem::read_u64(at)? as usize;
    if original == 0 {
        return None;
    }
    let calls = Arc::new(AtomicU32::new(0));
    watched().insert(
        ptr,
        Watched {
            original,
            versioned,
            calls: calls.clone(),
        },
    );
    let tramp = if versioned {
        trampoline_versioned as unsafe extern "C" fn(*mut DLManagedTensorVersioned) as usize
    } else {
        trampoline_legacy as unsafe extern "C" fn(*mut DLManagedTensor) as usize
    };
    // SAFETY: `at` is the deleter member of a tensor the harness just read
    // (8 readable bytes, a pointer-aligned member of a structure the library
    // allocated and handed over in the capsule the harness holds).
    unsafe { std::ptr::write_volatile(at as *mut usize, tramp) };
    Some(Watch { ptr, calls })
}

/// Calls the tensor's deleter as a consumer does when done with it
/// (through the member, so a watched tensor's trampoline counts it).
///
/// # Safety
/// `ptr` must be a live managed tensor of the kind `versioned` says, whose
/// ownership the harness took (the capsule renamed), deleted at most once.
pub unsafe fn delete(ptr: usize, versioned: bool) {
    // SAFETY: as the caller guarantees; the member is read at its offset.
    unsafe {
        if versioned {
            let m = ptr as *mut DLManagedTensorVersioned;
            if let Some(f) = (*m).deleter {
                f(m)
            }
        } else {
            let m = ptr as *mut DLManagedTensor;
            if let Some(f) = (*m).deleter {
                f(m)
            }
        }
    }
}

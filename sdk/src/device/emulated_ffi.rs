//! The emulated device's C function table, handed to plugins by
//! `arrowcert_plugin_attach_emulated_device` (see
//! `harness/include/arrowcert_emulated_device.h`, which documents each
//! function). Every entry checks its handles and ranges against the
//! device's tables, so a plugin bug is an error code, not a harness crash.
//!
//! The table's contract, the `# Safety` of each function below: it is
//! called through the table by a plugin; pointer arguments are NULL or
//! what the table's own functions handed out (handles, device memory,
//! host bytes of the given length), and out-pointers are valid for one
//! write.

use std::ffi::{c_int, c_void};

use super::emulated::{emulated, DEVICE_ID};
use super::{Event, Stream};

/// `struct ArrowcertEmulatedDevice` (arrowcert_emulated_device.h).
#[repr(C)]
pub struct ArrowcertEmulatedDevice {
    pub abi_version: i64,
    pub device_id: i64,
    pub alloc: unsafe extern "C" fn(i64, *mut *mut c_void) -> c_int,
    pub free: unsafe extern "C" fn(*mut c_void) -> c_int,
    pub stream_create: unsafe extern "C" fn(*mut *mut c_void) -> c_int,
    pub stream_destroy: unsafe extern "C" fn(*mut c_void) -> c_int,
    pub write_async: unsafe extern "C" fn(*mut c_void, *mut c_void, *const c_void, i64) -> c_int,
    pub stream_synchronize: unsafe extern "C" fn(*mut c_void) -> c_int,
    pub stream_wait_event: unsafe extern "C" fn(*mut c_void, *mut c_void) -> c_int,
    pub event_create: unsafe extern "C" fn(*mut *mut c_void) -> c_int,
    pub event_destroy: unsafe extern "C" fn(*mut c_void) -> c_int,
    pub event_record: unsafe extern "C" fn(*mut c_void, *mut c_void) -> c_int,
    pub event_synchronize: unsafe extern "C" fn(*mut c_void) -> c_int,
    pub event_query: unsafe extern "C" fn(*mut c_void) -> c_int,
}

/// Version of the table's layout.
pub const TABLE_VERSION: i64 = 1;

/// The table every plugin gets.
pub static TABLE: ArrowcertEmulatedDevice = ArrowcertEmulatedDevice {
    abi_version: TABLE_VERSION,
    device_id: DEVICE_ID,
    alloc,
    free,
    stream_create,
    stream_destroy,
    write_async,
    stream_synchronize,
    stream_wait_event,
    event_create,
    event_destroy,
    event_record,
    event_synchronize,
    event_query,
};

fn code(r: Result<(), String>) -> c_int {
    match r {
        Ok(()) => 0,
        Err(_) => libc::EINVAL,
    }
}

/// # Safety
/// The table's contract (module docs).
unsafe extern "C" fn alloc(size: i64, out: *mut *mut c_void) -> c_int {
    if out.is_null() || size < 0 {
        return libc::EINVAL;
    }
    match emulated().alloc(size as usize) {
        Ok(p) => {
            // SAFETY: `out` is non-NULL and, by the table's contract,
            // points to writable storage for one pointer.
            unsafe { *out = p as *mut c_void };
            0
        }
        Err(_) => libc::ENOMEM,
    }
}

/// # Safety
/// The table's contract (module docs).
unsafe extern "C" fn free(ptr: *mut c_void) -> c_int {
    if ptr.is_null() {
        return 0;
    }
    code(emulated().free(ptr as usize))
}

/// # Safety
/// The table's contract (module docs).
unsafe extern "C" fn stream_create(out: *mut *mut c_void) -> c_int {
    if out.is_null() {
        return libc::EINVAL;
    }
    let s = emulated().stream_create();
    // SAFETY: as in `alloc`.
    unsafe { *out = s.0 as usize as *mut c_void };
    0
}

/// # Safety
/// The table's contract (module docs).
unsafe extern "C" fn stream_destroy(s: *mut c_void) -> c_int {
    code(emulated().stream_destroy(Stream(s as usize as u64)))
}

/// # Safety
/// The table's contract (module docs).
unsafe extern "C" fn write_async(
    s: *mut c_void,
    dst: *mut c_void,
    src: *const c_void,
    len: i64,
) -> c_int {
    if len < 0 || (src.is_null() && len > 0) {
        return libc::EINVAL;
    }
    let data = if len == 0 {
        Vec::new()
    } else {
        // SAFETY: by the table's contract `src` points to `len` readable
        // bytes for the duration of the call; they are copied now.
        unsafe { std::slice::from_raw_parts(src.cast::<u8>(), len as usize) }.to_vec()
    };
    code(emulated().write_async(Stream(s as usize as u64), dst as usize, data))
}

/// # Safety
/// The table's contract (module docs).
unsafe extern "C" fn stream_synchronize(s: *mut c_void) -> c_int {
    code(emulated().stream_synchronize(Stream(s as usize as u64)))
}

/// # Safety
/// The table's contract (module docs).
unsafe extern "C" fn stream_wait_event(s: *mut c_void, e: *mut c_void) -> c_int {
    code(emulated().stream_wait_event(Stream(s as usize as u64), Event(e as usize as u64)))
}

/// # Safety
/// The table's contract (module docs).
unsafe extern "C" fn event_create(out: *mut *mut c_void) -> c_int {
    if out.is_null() {
        return libc::EINVAL;
    }
    let e = emulated().event_create();
    // SAFETY: as in `alloc`.
    unsafe { *out = e.0 as usize as *mut c_void };
    0
}

/// # Safety
/// The table's contract (module docs).
unsafe extern "C" fn event_destroy(e: *mut c_void) -> c_int {
    code(emulated().event_destroy(Event(e as usize as u64)))
}

/// # Safety
/// The table's contract (module docs).
unsafe extern "C" fn event_record(e: *mut c_void, s: *mut c_void) -> c_int {
    code(emulated().event_record(Event(e as usize as u64), Stream(s as usize as u64)))
}

/// # Safety
/// The table's contract (module docs).
unsafe extern "C" fn event_synchronize(e: *mut c_void) -> c_int {
    code(emulated().event_synchronize(Event(e as usize as u64)))
}

/// # Safety
/// The table's contract (module docs).
unsafe extern "C" fn event_query(e: *mut c_void) -> c_int {
    match emulated().event_query(Event(e as usize as u64), true) {
        Ok(true) => 0,
        Ok(false) => libc::EAGAIN,
        Err(_) => libc::EINVAL,
    }
}

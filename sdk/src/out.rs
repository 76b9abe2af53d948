//! Raw arguments of entry points: reading the IPC input, handing out bytes.

use super::{PluginError, PluginResult};

/// The IPC bytes an entry point was given.
///
/// # Safety
/// `ptr` must point to `len` readable bytes that stay valid for `'a`
/// (the duration of the entry point call), or `len` must be 0.
pub unsafe fn input<'a>(ptr: *const u8, len: i64) -> PluginResult<&'a [u8]> {
    if len < 0 {
        return Err(PluginError::invalid(format!("negative ipc_len {len}")));
    }
    if len == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(PluginError::invalid("ipc is NULL"));
    }
    // SAFETY: the caller guarantees ptr..ptr+len is readable for 'a.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len as usize) })
}

/// Copies `bytes` into memory from `malloc` and stores pointer and length in
/// the out-parameters; the harness frees it with `arrowcert_free` ([`free`]).
///
/// # Safety
/// `out_ptr` and `out_len` must be valid for writes.
pub unsafe fn hand_out(bytes: &[u8], out_ptr: *mut *mut u8, out_len: *mut i64) -> PluginResult {
    if out_ptr.is_null() || out_len.is_null() {
        return Err(PluginError::invalid("out_ipc or out_len is NULL"));
    }
    // SAFETY: malloc with a non-zero size; checked for NULL below.
    let p = unsafe { libc::malloc(bytes.len().max(1)) } as *mut u8;
    if p.is_null() {
        return Err(PluginError::new(libc::ENOMEM, "malloc failed"));
    }
    // SAFETY: p holds at least bytes.len() bytes and does not overlap bytes;
    // the out pointers are valid for writes by the caller's guarantee.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), p, bytes.len());
        *out_ptr = p;
        *out_len = bytes.len() as i64;
    }
    Ok(())
}

/// `arrowcert_free` for memory handed out by [`hand_out`].
///
/// # Safety
/// `ptr` must be NULL or a pointer returned through [`hand_out`], freed once.
pub unsafe fn free(ptr: *mut std::ffi::c_void) {
    // SAFETY: forwarded from the caller; free(NULL) is a no-op.
    unsafe { libc::free(ptr) }
}

//! Copying C strings a producer lends for the duration of one call.

use std::ffi::{c_char, CStr};

/// Copies a NUL-terminated string into owned memory (invalid UTF-8 is
/// replaced, not refused: the message is for people). NULL gives `None`.
///
/// Producers' strings are only lent: "The returned pointer is only
/// guaranteed to be valid until the next call of one of the stream's
/// callbacks. The character string it points to should be copied to
/// consumer-managed storage if it is intended to survive longer."
///
/// # Safety
/// `ptr` must be NULL or point to a NUL-terminated string valid for reads
/// for the duration of this call.
pub unsafe fn copy_c_str(ptr: *const c_char) -> Option<String> {
    if ptr.is_null() {
        return None;
    }
    // SAFETY: non-NULL and NUL-terminated by the caller's guarantee; the
    // bytes are copied out before returning.
    let s = unsafe { CStr::from_ptr(ptr) };
    Some(s.to_string_lossy().into_owned())
}

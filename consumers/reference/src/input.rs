//! Taking ownership of the base structures an entry point is given.
//!
//! "The consumer can *move* the ``ArrowArray`` structure by bitwise copying
//! or shallow member-wise copying. Then it MUST mark the source structure
//! released [...] but *without* calling the release callback."
//! (CDataInterface.rst, "Moving an array"; the same for device arrays with
//! the embedded array's `release`, CDeviceDataInterface.rst.)
//!
//! Every entry point moves its inputs before anything else can fail, into a
//! [`Guard`] that calls the release callback when dropped: so the structures
//! the caller passed are released (marked) when the call returns, and what
//! was moved out is released exactly once, on every path, panics included.

use arrowcert_sdk::abi::ops::{take, Guard, Owned};
use arrowcert_sdk::{non_null, PluginError, PluginResult};

/// Moves the base structure at `ptr` into a guard and marks the source
/// released.
///
/// Refuses a NULL pointer and an already released structure ("Before reading
/// and interpreting a structure's data, consumers SHOULD check for a NULL
/// release callback and treat it accordingly (probably by erroring out)").
///
/// # Safety
/// `ptr` must be NULL or valid for reads and writes of a `T`, and, when its
/// release marker is set, hold a live structure the caller hands over.
pub unsafe fn take_input<T: Owned>(ptr: *mut T, what: &str) -> PluginResult<Guard<T>> {
    let ptr = non_null(ptr, what)?;
    // SAFETY: non-NULL, and valid for reads and writes by the caller's
    // guarantee; the borrow ends before this function returns.
    let src = unsafe { &mut *ptr };
    if src.is_released() {
        return Err(PluginError::invalid(format!(
            "{what} is already released (its release callback is NULL)"
        )));
    }
    Ok(Guard::new(take(src)))
}

//! `ArrowAsyncTask`s: one per batch, each owning its exported array until
//! `extract_data` hands it over.
//!
//! "This task object is only valid during the lifetime of this function call.
//! If the consumer wants to use the task beyond the scope of this method, it
//! must copy or move its contents to a new ArrowAsyncTask object." So the
//! task struct holds nothing but a pointer to a heap allocation
//! (`TaskData`): any bitwise copy of it works, on any thread, at any time
//! (also after the handler was released), until `extract_data` was called
//! once on one of the copies.

use std::ffi::c_int;

use arrowcert_sdk::abi::ops::Owned;
use arrowcert_sdk::abi::{ArrowArray, ArrowAsyncTask, ArrowDeviceArray};

use crate::device::write_cpu;
use crate::guard;

/// What a task's `private_data` owns: the exported (CPU) array.
struct TaskData {
    array: ArrowArray,
}

/// A task that owns `array` (an arrow-rs export of one batch).
pub fn new_task(array: ArrowArray) -> ArrowAsyncTask {
    ArrowAsyncTask {
        extract_data: Some(extract_data),
        private_data: Box::into_raw(Box::new(TaskData { array })).cast(),
    }
}

/// `extract_data`: "populate the provided ArrowDeviceArray with the available
/// data ... NULL should be passed as the device array pointer to indicate
/// that the consumer doesn't want the actual data, letting the task perform
/// necessary cleanup." "Rather than having a separate release callback, any
/// required cleanup should be performed as part of the invocation of this
/// callback." "It is only valid to call this method exactly once."
///
/// On the copy it was called with, `private_data` is set to NULL, so a second
/// call through the same copy returns `EINVAL` instead of a double free (a
/// second call through another copy is the consumer's error and cannot be
/// detected without keeping the allocation alive forever).
///
/// # Safety
/// `task` is an ArrowAsyncTask this producer handed to on_next_task, and `out` is
/// NULL or valid for writes of one ArrowDeviceArray.
unsafe extern "C" fn extract_data(task: *mut ArrowAsyncTask, out: *mut ArrowDeviceArray) -> c_int {
    guard::callback(libc::EIO, || {
        if task.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: non-NULL; the consumer passes a (copy of a) task it holds.
        let private = unsafe { std::mem::replace(&mut (*task).private_data, std::ptr::null_mut()) };
        if private.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: a non-NULL private_data of a task is the Box of `new_task`,
        // reclaimed exactly once ("exactly once" is the consumer's side).
        let data = unsafe { Box::from_raw(private.cast::<TaskData>()) };
        let mut array = data.array;
        if out.is_null() {
            array.release();
        } else {
            // SAFETY: `out` is a non-NULL device array the consumer owns,
            // valid for writes; ownership of the array passes to it:
            // "Ownership of the Array is given to the pointer passed in".
            unsafe { write_cpu(out, array) };
        }
        0
    })
}

//! Moving and releasing base structures, as the spec defines both.
//!
//! "Moving an array ... is a bitwise copy of the structure, and marking the
//! source structure released" (CDataInterface.rst, "Moving an array"). The
//! same holds for schemas, device arrays (whose `array.release` is the
//! marker, CDeviceDataInterface.rst) and streams.

use super::*;

/// A base structure that can be released and moved.
pub trait Owned: Plain {
    /// The release marker is NULL.
    fn is_released(&self) -> bool;
    /// Sets the release marker to NULL without calling it.
    fn mark_released(&mut self);
    /// Calls the release callback if the structure is live. A poisoned
    /// callback (the producer never set it) is not called.
    fn release(&mut self);
}

/// Moves `src` out by a bitwise copy and marks `src` released.
pub fn take<T: Owned>(src: &mut T) -> T {
    // SAFETY: `src` is a valid, exclusively borrowed value of a plain repr(C)
    // type without Drop; the copy is a bitwise duplicate, and marking the
    // source released right after makes the copy the only owner, exactly as
    // the spec's move is defined.
    let moved = unsafe { std::ptr::read(src) };
    src.mark_released();
    moved
}

/// Moves `src` to a fresh heap address (a relocation) and marks `src` released.
pub fn relocate<T: Owned>(src: &mut T) -> Box<T> {
    Box::new(take(src))
}

/// `f` unless it is unset or still the poison pattern (never written).
pub fn callable<F: Copy>(f: Option<F>) -> Option<F> {
    // A callback whose bits are still the poison pattern was never written by
    // the producer; calling it would jump to garbage.
    let f = f?;
    let bits = std::mem::size_of::<F>() == std::mem::size_of::<usize>() && {
        // SAFETY: F is a function pointer type (size checked just above), so
        // its bits are one usize.
        let raw: usize = unsafe { std::mem::transmute_copy(&f) };
        is_poison_ptr(raw)
    };
    if bits {
        None
    } else {
        Some(f)
    }
}

macro_rules! owned_by_release_field {
    ($ty:ty) => {
        impl Owned for $ty {
            fn is_released(&self) -> bool {
                self.release.is_none()
            }
            fn mark_released(&mut self) {
                self.release = None;
            }
            fn release(&mut self) {
                if let Some(release) = callable(self.release) {
                    crate::abi::breadcrumb::step(concat!(stringify!($ty), ".release"));
                    // SAFETY: the callback was installed by the producer that
                    // filled this structure, which the plugin contract makes
                    // responsible for it; calling release on a live structure
                    // is exactly what the spec asks of its owner. A plugin that
                    // breaks this crashes the worker process running it, which
                    // the orchestrator reports as a verdict.
                    unsafe { release(self) };
                }
            }
        }
    };
}

owned_by_release_field!(ArrowSchema);
owned_by_release_field!(ArrowArray);
owned_by_release_field!(ArrowArrayStream);
owned_by_release_field!(ArrowDeviceArrayStream);
owned_by_release_field!(ArrowAsyncDeviceStreamHandler);

impl Owned for ArrowDeviceArray {
    fn is_released(&self) -> bool {
        self.array.is_released()
    }
    fn mark_released(&mut self) {
        self.array.mark_released()
    }
    fn release(&mut self) {
        self.array.release()
    }
}

/// A heap-pinned structure owned by the harness that is released (if still
/// live) when dropped. Use it for anything a producer filled.
pub struct Guard<T: Owned>(Box<T>);

impl<T: Owned> Guard<T> {
    pub fn new(value: T) -> Self {
        Guard(Box::new(value))
    }
    pub fn poisoned() -> Self {
        Guard(Box::new(T::poisoned()))
    }
    pub fn zeroed() -> Self {
        Guard(Box::new(T::zeroed()))
    }
    pub fn as_mut_ptr(&mut self) -> *mut T {
        &mut *self.0
    }
    /// Moves the structure to a new address, leaving this guard released.
    pub fn relocate(&mut self) -> Guard<T> {
        Guard(relocate(&mut *self.0))
    }
}

impl<T: Owned> std::ops::Deref for Guard<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: Owned> std::ops::DerefMut for Guard<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.0
    }
}

impl<T: Owned> Drop for Guard<T> {
    fn drop(&mut self) {
        if !self.0.is_released() {
            self.0.release();
        }
    }
}

//! The backends a [`Plugin`](super::Plugin) calls through, and the sources
//! that turn a command-line argument into a library to load.
//!
//! Call side ([`Backend`]): one implementation per kind of library, each in
//! a file of its own. [`native::Native`] calls the contract's entry points
//! (PLUGIN_ABI.md) a library exports: Rust and C plugins, and the copies of
//! the Python bridge and the ADBC adapter, which export them too.
//! [`super::integration::Library`] is the built-in adapter for Arrow's C
//! data integration libraries. `Plugin` holds one and never asks which.
//!
//! Preparation side ([`Source`]): `py:` ([`super::python::Python`]),
//! `adbc:` ([`super::adbc::Adbc`]) and a path ([`file::File`]) here; a
//! bundled name needs the registry, which implements the last one
//! (`registry::Named`) and holds the table `resolve_plugin` picks from. The
//! DLPack and CAI suites load their adapters' bridge copies, which `py:`
//! prepares, through `dlpack::bridge` instead of a `Plugin`: that is the
//! bridge's DLPack interface, not the contract.

pub mod file;
pub mod native;

use std::path::PathBuf;

use super::{CallError, Canceller, LibraryObject};
use crate::abi::{
    ArrowArray, ArrowArrayStream, ArrowAsyncDeviceStreamHandler, ArrowDeviceArray,
    ArrowDeviceArrayStream, ArrowDeviceType, ArrowSchema,
};

/// The calls a [`Plugin`](super::Plugin) hands to its library. Each default
/// is what a library that lacks the operation answers: the entry point is
/// `Missing` (the contract's "not exported"), a capability is absent.
/// The entry points' meanings are PLUGIN_ABI.md's; the `Plugin` method of
/// the same name documents each.
pub trait Backend: std::fmt::Debug + Send + Sync {
    /// Whether the library claims `device_type`. Absent: CPU only.
    fn supports_device(&self, device_type: ArrowDeviceType) -> bool {
        device_type == crate::abi::device::CPU
    }

    /// The library's own count of bytes it holds, if it keeps one.
    fn bytes_allocated(&self) -> Option<i64> {
        None
    }

    /// The library's own symbols a built-in adapter calls on the
    /// contract's behalf (`inspect`'s "adapts"): `None` for a library that
    /// exports the contract itself.
    fn adapts(&self) -> Option<Vec<&'static str>> {
        None
    }

    /// False only when the producer entry point `entry` (the contract's
    /// name) is known to answer `Missing` without being called, so that an
    /// array or device array case can be skipped before its schema export
    /// (the default: ask).
    fn may_produce(&self, _entry: &'static str) -> bool {
        true
    }

    fn produce_schema(&self, _ipc: &[u8], _out: &mut ArrowSchema) -> Result<(), CallError> {
        Err(CallError::Missing("arrowcert_produce_schema"))
    }

    #[allow(clippy::too_many_arguments)]
    fn produce_device_array(
        &self,
        _ipc: &[u8],
        _batch_index: i64,
        _slice_offset: i64,
        _slice_length: i64,
        _device_type: ArrowDeviceType,
        _device_id: i64,
        _out: &mut ArrowDeviceArray,
    ) -> Result<(), CallError> {
        Err(CallError::Missing("arrowcert_produce_device_array"))
    }

    fn produce_device_stream(
        &self,
        _ipc: &[u8],
        _device_type: ArrowDeviceType,
        _device_id: i64,
        _out: &mut ArrowDeviceArrayStream,
    ) -> Result<(), CallError> {
        Err(CallError::Missing("arrowcert_produce_device_stream"))
    }

    fn produce_array(
        &self,
        _ipc: &[u8],
        _batch_index: i64,
        _slice_offset: i64,
        _slice_length: i64,
        _out: &mut ArrowArray,
    ) -> Result<(), CallError> {
        Err(CallError::Missing("arrowcert_produce_array"))
    }

    fn produce_array_schema(
        &self,
        _ipc: &[u8],
        _batch_index: i64,
        _slice_offset: i64,
        _slice_length: i64,
        _out: &mut ArrowSchema,
    ) -> Result<(), CallError> {
        Err(CallError::Missing("arrowcert_produce_array_schema"))
    }

    fn produce_object(
        &self,
        _ipc: &[u8],
        _batch_index: i64,
        _slice_offset: i64,
        _slice_length: i64,
    ) -> Result<LibraryObject<'_>, CallError> {
        Err(CallError::Missing("arrowcert_produce_object"))
    }

    fn produce_stream(&self, _ipc: &[u8], _out: &mut ArrowArrayStream) -> Result<(), CallError> {
        Err(CallError::Missing("arrowcert_produce_stream"))
    }

    fn produce_sliced_stream(
        &self,
        _ipc: &[u8],
        _slice_offset: i64,
        _slice_length: i64,
        _out: &mut ArrowArrayStream,
    ) -> Result<(), CallError> {
        Err(CallError::Missing("arrowcert_produce_sliced_stream"))
    }

    fn produce_sliced_device_stream(
        &self,
        _ipc: &[u8],
        _slice_offset: i64,
        _slice_length: i64,
        _device_type: ArrowDeviceType,
        _device_id: i64,
        _out: &mut ArrowDeviceArrayStream,
    ) -> Result<(), CallError> {
        Err(CallError::Missing("arrowcert_produce_sliced_device_stream"))
    }

    /// # Safety
    /// `handler` must point to an initialised handler that stays valid (at
    /// that address) until its release callback has been called.
    unsafe fn produce_async(
        &self,
        _ipc: &[u8],
        _device_type: ArrowDeviceType,
        _device_id: i64,
        _handler: *mut ArrowAsyncDeviceStreamHandler,
    ) -> Result<(), CallError> {
        Err(CallError::Missing("arrowcert_produce_async"))
    }

    /// # Safety
    /// As [`Backend::produce_async`].
    unsafe fn produce_sliced_async(
        &self,
        _ipc: &[u8],
        _slice_offset: i64,
        _slice_length: i64,
        _device_type: ArrowDeviceType,
        _device_id: i64,
        _handler: *mut ArrowAsyncDeviceStreamHandler,
    ) -> Result<(), CallError> {
        Err(CallError::Missing("arrowcert_produce_sliced_async"))
    }

    fn consume_device_array(
        &self,
        _schema: &mut ArrowSchema,
        _array: &mut ArrowDeviceArray,
    ) -> Result<Vec<u8>, CallError> {
        Err(CallError::Missing("arrowcert_consume_device_array"))
    }

    fn consume_device_stream(
        &self,
        _stream: &mut ArrowDeviceArrayStream,
    ) -> Result<Vec<u8>, CallError> {
        Err(CallError::Missing("arrowcert_consume_device_stream"))
    }

    /// `sent` is what the harness handed over, logically: only a backend
    /// that cannot report what it read (the integration adapter) uses it.
    fn consume_array(
        &self,
        _schema: &mut ArrowSchema,
        _array: &mut ArrowArray,
        _sent: &arrow_array::RecordBatch,
    ) -> Result<Vec<u8>, CallError> {
        Err(CallError::Missing("arrowcert_consume_array"))
    }

    fn consume_stream(&self, _stream: &mut ArrowArrayStream) -> Result<Vec<u8>, CallError> {
        Err(CallError::Missing("arrowcert_consume_stream"))
    }

    fn consumed_values(&self) -> Option<String> {
        None
    }

    fn consumes_async(&self) -> bool {
        false
    }

    /// # Safety
    /// `handler` must point to a writable handler that stays valid until
    /// its release callback has been called.
    unsafe fn consume_async_start(
        &self,
        _handler: *mut ArrowAsyncDeviceStreamHandler,
    ) -> Result<usize, CallError> {
        Err(CallError::Missing("arrowcert_consume_async_start"))
    }

    fn cancels_async(&self) -> bool {
        false
    }

    fn async_canceller(&self, _token: usize) -> Option<Canceller> {
        None
    }

    fn consume_async_finish(
        &self,
        _token: usize,
        _timeout_ms: i64,
        _wait: std::time::Duration,
    ) -> Option<Result<Vec<u8>, CallError>> {
        Some(Err(CallError::Missing("arrowcert_consume_async_finish")))
    }
}

/// What turns a plugin argument into a library [`super::Plugin::load`]
/// opens: the argument's prefix picks one (`registry::resolve_plugin`'s
/// table), and it prepares what follows.
pub trait Source: Sync {
    /// The prefix that selects this source (`py:`); empty for a source
    /// that the argument's shape selects ([`Source::claims`]).
    fn prefix(&self) -> &'static str;

    /// Whether `arg` (prefix and all) is this source's.
    fn claims(&self, arg: &str) -> bool {
        !self.prefix().is_empty() && arg.starts_with(self.prefix())
    }

    /// The library for `spec` (the argument without its prefix) in `role`
    /// (`producer` or `consumer`); `Err` is one line saying why not.
    fn prepare(&self, spec: &str, role: &str) -> Result<PathBuf, String>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::Plain;
    use crate::plugin::SYMBOLS;

    /// A backend that overrides nothing: every call is its default.
    #[derive(Debug)]
    struct Bare;
    impl Backend for Bare {}

    /// The entry point a `Missing` names, which must be the contract's.
    fn missing<T>(r: Result<T, CallError>) -> &'static str {
        match r {
            Err(CallError::Missing(e)) => e,
            Err(e) => panic!("not Missing: {e}"),
            Ok(_) => panic!("a default call succeeded"),
        }
    }

    #[test]
    fn a_backend_lacking_an_operation_answers_as_a_plugin_that_does_not_export_it() {
        let b = Bare;
        let ipc: &[u8] = &[];
        let mut schema = ArrowSchema::zeroed();
        let mut array = ArrowArray::zeroed();
        let mut device_array = ArrowDeviceArray::zeroed();
        let mut stream = ArrowArrayStream::zeroed();
        let mut device_stream = ArrowDeviceArrayStream::zeroed();
        let cpu = crate::abi::device::CPU;
        let sent =
            arrow_array::RecordBatch::new_empty(std::sync::Arc::new(arrow_schema::Schema::empty()));
        let handler = std::ptr::null_mut();
        let named = [
            missing(b.produce_schema(ipc, &mut schema)),
            missing(b.produce_device_array(ipc, 0, 0, -1, cpu, 0, &mut device_array)),
            missing(b.produce_device_stream(ipc, cpu, 0, &mut device_stream)),
            missing(b.produce_array(ipc, 0, 0, -1, &mut array)),
            missing(b.produce_array_schema(ipc, 0, 0, -1, &mut schema)),
            missing(b.produce_object(ipc, 0, 0, -1)),
            missing(b.produce_stream(ipc, &mut stream)),
            missing(b.produce_sliced_stream(ipc, 0, -1, &mut stream)),
            missing(b.produce_sliced_device_stream(ipc, 0, -1, cpu, 0, &mut device_stream)),
            // SAFETY: the default never touches the handler.
            missing(unsafe { b.produce_async(ipc, cpu, 0, handler) }),
            // SAFETY: as above.
            missing(unsafe { b.produce_sliced_async(ipc, 0, -1, cpu, 0, handler) }),
            missing(b.consume_device_array(&mut schema, &mut device_array)),
            missing(b.consume_device_stream(&mut device_stream)),
            missing(b.consume_array(&mut schema, &mut array, &sent)),
            missing(b.consume_stream(&mut stream)),
            // SAFETY: as above.
            missing(unsafe { b.consume_async_start(handler) }),
            missing(
                b.consume_async_finish(0, 0, std::time::Duration::ZERO)
                    .expect("answered at once"),
            ),
        ];
        // Each names its own entry point of the contract, as the native
        // backend does when the library does not export it.
        let distinct: std::collections::BTreeSet<_> = named.iter().collect();
        assert_eq!(distinct.len(), named.len(), "{named:?}");
        for e in named {
            assert!(SYMBOLS.iter().any(|(s, _)| *s == e), "{e}");
        }
        assert!(b.supports_device(cpu) && !b.supports_device(crate::abi::device::CUDA));
        assert_eq!(b.bytes_allocated(), None);
        assert_eq!(b.adapts(), None);
        assert_eq!(b.consumed_values(), None);
        assert!(!b.consumes_async() && !b.cancels_async());
        assert!(b.async_canceller(0).is_none());
    }
}

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

//! The native backend: a library that exports the contract's entry points
//! itself (PLUGIN_ABI.md), called through the function pointers
//! [`Entries`] resolved when it was loaded: Rust and C plugins, the Python
//! bridge's and the ADBC adapter's copies. Every call into such a library
//! is here.

use std::ffi::{c_int, c_void, CStr};

use super::Backend;
use crate::abi::{
    ArrowArray, ArrowArrayStream, ArrowAsyncDeviceStreamHandler, ArrowDeviceArray,
    ArrowDeviceArrayStream, ArrowDeviceType, ArrowSchema,
};
use crate::plugin::{
    lookup, release_if_live, streamed, CallError, ConsumeAsyncCancelFn, Entries, ExportObjectFn,
    ReleaseObjectFn,
};

/// A library that exports the contract: the entry points it exports and
/// serves.
pub struct Native {
    entries: Entries,
}

impl std::fmt::Debug for Native {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Native")
    }
}

impl Native {
    /// The entry points `lib` exports, less those it does not serve (not
    /// in `offered`, the symbols [`crate::plugin::Plugin::load`] kept).
    pub(crate) fn resolve(lib: &libloading::Library, offered: &[&str]) -> Native {
        // SAFETY: (each field) F is the declared type of that symbol.
        let entries = unsafe {
            Entries {
                supports_device: lookup(lib, "arrowcert_plugin_supports_device"),
                bytes_allocated: lookup(lib, "arrowcert_bytes_allocated"),
                last_error: lookup(lib, "arrowcert_last_error"),
                free: lookup(lib, "arrowcert_free"),
                produce_schema: lookup(lib, "arrowcert_produce_schema"),
                produce_device_array: lookup(lib, "arrowcert_produce_device_array"),
                produce_device_stream: lookup(lib, "arrowcert_produce_device_stream"),
                produce_async: lookup(lib, "arrowcert_produce_async"),
                produce_array: lookup(lib, "arrowcert_produce_array"),
                produce_stream: lookup(lib, "arrowcert_produce_stream"),
                produce_array_schema: lookup(lib, "arrowcert_produce_array_schema"),
                produce_object: lookup(lib, "arrowcert_produce_object"),
                export_object: lookup(lib, "arrowcert_export_object"),
                release_object: lookup(lib, "arrowcert_release_object"),
                produce_sliced_stream: lookup(lib, "arrowcert_produce_sliced_stream"),
                produce_sliced_device_stream: lookup(lib, "arrowcert_produce_sliced_device_stream"),
                produce_sliced_async: lookup(lib, "arrowcert_produce_sliced_async"),
                consume_device_array: lookup(lib, "arrowcert_consume_device_array"),
                consume_device_stream: lookup(lib, "arrowcert_consume_device_stream"),
                consume_array: lookup(lib, "arrowcert_consume_array"),
                consume_stream: lookup(lib, "arrowcert_consume_stream"),
                consume_async_start: lookup(lib, "arrowcert_consume_async_start"),
                consume_async_finish: lookup(lib, "arrowcert_consume_async_finish"),
                consume_async_cancel: lookup(lib, "arrowcert_consume_async_cancel"),
                consume_values: lookup(lib, "arrowcert_consume_values"),
                produce_schema_s: lookup(lib, "arrowcert_produce_schema_from_stream"),
                produce_array_s: lookup(lib, "arrowcert_produce_array_from_stream"),
                produce_array_schema_s: lookup(lib, "arrowcert_produce_array_schema_from_stream"),
                produce_object_s: lookup(lib, "arrowcert_produce_object_from_stream"),
                produce_device_array_s: lookup(lib, "arrowcert_produce_device_array_from_stream"),
                produce_stream_s: lookup(lib, "arrowcert_produce_stream_from_stream"),
                produce_device_stream_s: lookup(lib, "arrowcert_produce_device_stream_from_stream"),
                produce_sliced_stream_s: lookup(lib, "arrowcert_produce_sliced_stream_from_stream"),
                produce_sliced_device_stream_s: lookup(
                    lib,
                    "arrowcert_produce_sliced_device_stream_from_stream",
                ),
                consume_array_s: lookup(lib, "arrowcert_consume_array_to_stream"),
                consume_device_array_s: lookup(lib, "arrowcert_consume_device_array_to_stream"),
                consume_stream_s: lookup(lib, "arrowcert_consume_stream_to_stream"),
                consume_device_stream_s: lookup(lib, "arrowcert_consume_device_stream_to_stream"),
            }
        };
        let mut entries = entries;
        entries.mask(offered);
        Native { entries }
    }

    fn check(&self, entry: &'static str, code: c_int) -> Result<(), CallError> {
        if code == 0 {
            Ok(())
        } else {
            Err(CallError::Failed {
                entry,
                code,
                message: self.entries.last_error(),
            })
        }
    }

    /// After a consumer's stream variant returned `rc`: what it handed back
    /// in `read`, read (validated) as IPC bytes; on failure whatever it left
    /// there is released.
    fn read_back(
        &self,
        entry: &'static str,
        rc: c_int,
        read: &mut ArrowArrayStream,
    ) -> Result<Vec<u8>, CallError> {
        match self.check(entry, rc) {
            Ok(()) => streamed::read_back(entry, read),
            Err(e) => {
                release_if_live(read);
                Err(e)
            }
        }
    }

    /// Copies the bytes a consumer handed out and frees them with
    /// `arrowcert_free` (left allocated if the plugin does not export it).
    fn take_output(&self, ptr: *mut u8, len: i64) -> Vec<u8> {
        self.entries.take_output(ptr, len)
    }
}

/// A library object a producer made (`arrowcert_produce_object`): each
/// [`export`](Self::export) is one more export of that same object; the
/// object is released (`arrowcert_release_object`) when this is dropped.
pub struct LibraryObject<'a> {
    native: &'a Native,
    handle: *mut c_void,
    export: ExportObjectFn,
    release: ReleaseObjectFn,
}

impl LibraryObject<'_> {
    /// One more array export of the object into `out`.
    pub fn export(&self, out: &mut ArrowArray) -> Result<(), CallError> {
        const E: &str = "arrowcert_export_object";
        crate::abi::breadcrumb::step(E);
        let f = self.export;
        let handle = self.handle;
        // SAFETY: `handle` is what arrowcert_produce_object returned and is
        // not released yet; `out` is a slot of the out-structure arena.
        let rc = crate::abi::outslot::call(E, out, |out| unsafe { f(handle, out) });
        self.native.check(E, rc)
    }
}

impl Drop for LibraryObject<'_> {
    fn drop(&mut self) {
        crate::abi::breadcrumb::step("arrowcert_release_object");
        // SAFETY: the handle arrowcert_produce_object returned, released
        // once, here.
        unsafe { (self.release)(self.handle) };
    }
}

/// Asks an async consumer to stop reading a stream, as a user dropping its
/// reader would: `arrowcert_consume_async_cancel(token)`, where the
/// consumer calls the producer's cancel.
#[derive(Clone, Copy)]
pub struct Canceller {
    f: ConsumeAsyncCancelFn,
    token: usize,
}

impl Canceller {
    /// Calls it (from any thread but a handler callback's); the consumer's
    /// return code.
    pub fn cancel(&self) -> c_int {
        crate::abi::breadcrumb::step("arrowcert_consume_async_cancel");
        // SAFETY: the plugin's own symbol, with the declared signature; the
        // token came from its consume_async_start, and the caller calls this
        // before that token's finish returned (the harness's producer calls
        // it while it still drives the stream).
        unsafe { (self.f)(self.token as *mut c_void) }
    }
}

impl Backend for Native {
    fn supports_device(&self, device_type: ArrowDeviceType) -> bool {
        match self.entries.supports_device {
            // SAFETY: declared type, plain integer argument.
            Some(f) => unsafe { f(device_type) == 1 },
            None => device_type == crate::abi::device::CPU,
        }
    }

    fn may_produce(&self, entry: &'static str) -> bool {
        let e = &self.entries;
        match entry {
            "arrowcert_produce_array" => e.produce_array.is_some() || e.produce_array_s.is_some(),
            "arrowcert_produce_device_array" => {
                e.produce_device_array.is_some() || e.produce_device_array_s.is_some()
            }
            _ => true,
        }
    }

    fn bytes_allocated(&self) -> Option<i64> {
        // SAFETY: declared type, no arguments.
        self.entries.bytes_allocated.map(|f| unsafe { f() })
    }

    fn produce_schema(&self, ipc: &[u8], out: &mut ArrowSchema) -> Result<(), CallError> {
        const E: &str = "arrowcert_produce_schema";
        if let (None, Some(f)) = (self.entries.produce_schema, self.entries.produce_schema_s) {
            const V: &str = "arrowcert_produce_schema_from_stream";
            let mut data = streamed::scenario(V, ipc, None)?;
            crate::abi::breadcrumb::step(V);
            // SAFETY: `data` (which the plugin takes) and `out` (a slot of
            // the out-structure arena) are valid for the whole call.
            let rc = crate::abi::outslot::call(V, out, |out| unsafe { f(&mut data, out) });
            release_if_live(&mut data);
            return self.check(V, rc);
        }
        let f = self.entries.produce_schema.ok_or(CallError::Missing(E))?;
        crate::abi::breadcrumb::step(E);
        // SAFETY: `ipc` and `out` (a slot of the out-structure arena) are
        // valid for the whole call.
        let rc = crate::abi::outslot::call(E, out, |out| unsafe {
            f(ipc.as_ptr(), ipc.len() as i64, out)
        });
        self.check(E, rc)
    }

    #[allow(clippy::too_many_arguments)]
    fn produce_device_array(
        &self,
        ipc: &[u8],
        batch_index: i64,
        slice_offset: i64,
        slice_length: i64,
        device_type: ArrowDeviceType,
        device_id: i64,
        out: &mut ArrowDeviceArray,
    ) -> Result<(), CallError> {
        const E: &str = "arrowcert_produce_device_array";
        if let (None, Some(f)) = (
            self.entries.produce_device_array,
            self.entries.produce_device_array_s,
        ) {
            const V: &str = "arrowcert_produce_device_array_from_stream";
            let mut data =
                streamed::scenario(V, ipc, Some((batch_index, slice_offset, slice_length)))?;
            crate::abi::breadcrumb::step(V);
            // SAFETY: as in produce_schema.
            let rc = crate::abi::outslot::call(V, out, |out| unsafe {
                f(&mut data, device_type, device_id, out)
            });
            release_if_live(&mut data);
            return self.check(V, rc);
        }
        let f = self
            .entries
            .produce_device_array
            .ok_or(CallError::Missing(E))?;
        crate::abi::breadcrumb::step(E);
        // SAFETY: `ipc` and `out` (a slot of the out-structure arena) are
        // valid for the whole call.
        let rc = crate::abi::outslot::call(E, out, |out| unsafe {
            f(
                ipc.as_ptr(),
                ipc.len() as i64,
                batch_index,
                slice_offset,
                slice_length,
                device_type,
                device_id,
                out,
            )
        });
        self.check(E, rc)
    }

    fn produce_device_stream(
        &self,
        ipc: &[u8],
        device_type: ArrowDeviceType,
        device_id: i64,
        out: &mut ArrowDeviceArrayStream,
    ) -> Result<(), CallError> {
        const E: &str = "arrowcert_produce_device_stream";
        if let (None, Some(f)) = (
            self.entries.produce_device_stream,
            self.entries.produce_device_stream_s,
        ) {
            const V: &str = "arrowcert_produce_device_stream_from_stream";
            let mut data = streamed::scenario(V, ipc, None)?;
            crate::abi::breadcrumb::step(V);
            // SAFETY: as in produce_schema.
            let rc = crate::abi::outslot::call(V, out, |out| unsafe {
                f(&mut data, device_type, device_id, out)
            });
            release_if_live(&mut data);
            return self.check(V, rc);
        }
        let f = self
            .entries
            .produce_device_stream
            .ok_or(CallError::Missing(E))?;
        crate::abi::breadcrumb::step(E);
        // SAFETY: `ipc` and `out` (a slot of the out-structure arena) are
        // valid for the whole call.
        let rc = crate::abi::outslot::call(E, out, |out| unsafe {
            f(ipc.as_ptr(), ipc.len() as i64, device_type, device_id, out)
        });
        self.check(E, rc)
    }

    fn produce_array(
        &self,
        ipc: &[u8],
        batch_index: i64,
        slice_offset: i64,
        slice_length: i64,
        out: &mut ArrowArray,
    ) -> Result<(), CallError> {
        const E: &str = "arrowcert_produce_array";
        if let (None, Some(f)) = (self.entries.produce_array, self.entries.produce_array_s) {
            const V: &str = "arrowcert_produce_array_from_stream";
            let mut data =
                streamed::scenario(V, ipc, Some((batch_index, slice_offset, slice_length)))?;
            crate::abi::breadcrumb::step(V);
            // SAFETY: as in produce_schema.
            let rc = crate::abi::outslot::call(V, out, |out| unsafe { f(&mut data, out) });
            release_if_live(&mut data);
            return self.check(V, rc);
        }
        let f = self.entries.produce_array.ok_or(CallError::Missing(E))?;
        crate::abi::breadcrumb::step(E);
        // SAFETY: `ipc` and `out` (a slot of the out-structure arena) are
        // valid for the whole call.
        let rc = crate::abi::outslot::call(E, out, |out| unsafe {
            f(
                ipc.as_ptr(),
                ipc.len() as i64,
                batch_index,
                slice_offset,
                slice_length,
                out,
            )
        });
        self.check(E, rc)
    }

    fn produce_array_schema(
        &self,
        ipc: &[u8],
        batch_index: i64,
        slice_offset: i64,
        slice_length: i64,
        out: &mut ArrowSchema,
    ) -> Result<(), CallError> {
        const E: &str = "arrowcert_produce_array_schema";
        if let (None, Some(f)) = (
            self.entries.produce_array_schema,
            self.entries.produce_array_schema_s,
        ) {
            const V: &str = "arrowcert_produce_array_schema_from_stream";
            let mut data =
                streamed::scenario(V, ipc, Some((batch_index, slice_offset, slice_length)))?;
            crate::abi::breadcrumb::step(V);
            // SAFETY: as in produce_schema.
            let rc = crate::abi::outslot::call(V, out, |out| unsafe { f(&mut data, out) });
            release_if_live(&mut data);
            return self.check(V, rc);
        }
        let f = self
            .entries
            .produce_array_schema
            .ok_or(CallError::Missing(E))?;
        crate::abi::breadcrumb::step(E);
        // SAFETY: `ipc` and `out` (a slot of the out-structure arena) are
        // valid for the whole call.
        let rc = crate::abi::outslot::call(E, out, |out| unsafe {
            f(
                ipc.as_ptr(),
                ipc.len() as i64,
                batch_index,
                slice_offset,
                slice_length,
                out,
            )
        });
        self.check(E, rc)
    }

    fn produce_object(
        &self,
        ipc: &[u8],
        batch_index: i64,
        slice_offset: i64,
        slice_length: i64,
    ) -> Result<LibraryObject<'_>, CallError> {
        const E: &str = "arrowcert_produce_object";
        let (Some(export), Some(release)) =
            (self.entries.export_object, self.entries.release_object)
        else {
            return Err(CallError::Missing(E));
        };
        let mut handle: *mut c_void = std::ptr::null_mut();
        if let (None, Some(f)) = (self.entries.produce_object, self.entries.produce_object_s) {
            const V: &str = "arrowcert_produce_object_from_stream";
            let mut data =
                streamed::scenario(V, ipc, Some((batch_index, slice_offset, slice_length)))?;
            crate::abi::breadcrumb::step(V);
            // SAFETY: `data` (which the plugin takes) and `handle` are valid
            // for the whole call.
            let rc = unsafe { f(&mut data, &mut handle) };
            release_if_live(&mut data);
            self.check(V, rc)?;
        } else {
            let f = self.entries.produce_object.ok_or(CallError::Missing(E))?;
            crate::abi::breadcrumb::step(E);
            // SAFETY: `ipc` and `handle` are valid for the whole call.
            let rc = unsafe {
                f(
                    ipc.as_ptr(),
                    ipc.len() as i64,
                    batch_index,
                    slice_offset,
                    slice_length,
                    &mut handle,
                )
            };
            self.check(E, rc)?;
        }
        Ok(LibraryObject {
            native: self,
            handle,
            export,
            release,
        })
    }

    fn produce_stream(&self, ipc: &[u8], out: &mut ArrowArrayStream) -> Result<(), CallError> {
        const E: &str = "arrowcert_produce_stream";
        if let (None, Some(f)) = (self.entries.produce_stream, self.entries.produce_stream_s) {
            const V: &str = "arrowcert_produce_stream_from_stream";
            let mut data = streamed::scenario(V, ipc, None)?;
            crate::abi::breadcrumb::step(V);
            // SAFETY: as in produce_schema.
            let rc = crate::abi::outslot::call(V, out, |out| unsafe { f(&mut data, out) });
            release_if_live(&mut data);
            return self.check(V, rc);
        }
        let f = self.entries.produce_stream.ok_or(CallError::Missing(E))?;
        crate::abi::breadcrumb::step(E);
        // SAFETY: `ipc` and `out` (a slot of the out-structure arena) are
        // valid for the whole call.
        let rc = crate::abi::outslot::call(E, out, |out| unsafe {
            f(ipc.as_ptr(), ipc.len() as i64, out)
        });
        self.check(E, rc)
    }

    fn produce_sliced_stream(
        &self,
        ipc: &[u8],
        slice_offset: i64,
        slice_length: i64,
        out: &mut ArrowArrayStream,
    ) -> Result<(), CallError> {
        const E: &str = "arrowcert_produce_sliced_stream";
        if let (None, Some(f)) = (
            self.entries.produce_sliced_stream,
            self.entries.produce_sliced_stream_s,
        ) {
            const V: &str = "arrowcert_produce_sliced_stream_from_stream";
            // Every batch: the library slices them itself.
            let mut data = streamed::scenario(V, ipc, None)?;
            crate::abi::breadcrumb::step(V);
            // SAFETY: as in produce_schema.
            let rc = crate::abi::outslot::call(V, out, |out| unsafe {
                f(&mut data, slice_offset, slice_length, out)
            });
            release_if_live(&mut data);
            return self.check(V, rc);
        }
        let f = self
            .entries
            .produce_sliced_stream
            .ok_or(CallError::Missing(E))?;
        crate::abi::breadcrumb::step(E);
        // SAFETY: `ipc` and `out` (a slot of the out-structure arena) are
        // valid for the whole call.
        let rc = crate::abi::outslot::call(E, out, |out| unsafe {
            f(
                ipc.as_ptr(),
                ipc.len() as i64,
                slice_offset,
                slice_length,
                out,
            )
        });
        self.check(E, rc)
    }

    fn produce_sliced_device_stream(
        &self,
        ipc: &[u8],
        slice_offset: i64,
        slice_length: i64,
        device_type: ArrowDeviceType,
        device_id: i64,
        out: &mut ArrowDeviceArrayStream,
    ) -> Result<(), CallError> {
        const E: &str = "arrowcert_produce_sliced_device_stream";
        if let (None, Some(f)) = (
            self.entries.produce_sliced_device_stream,
            self.entries.produce_sliced_device_stream_s,
        ) {
            const V: &str = "arrowcert_produce_sliced_device_stream_from_stream";
            let mut data = streamed::scenario(V, ipc, None)?;
            crate::abi::breadcrumb::step(V);
            // SAFETY: as in produce_schema.
            let rc = crate::abi::outslot::call(V, out, |out| unsafe {
                f(
                    &mut data,
                    slice_offset,
                    slice_length,
                    device_type,
                    device_id,
                    out,
                )
            });
            release_if_live(&mut data);
            return self.check(V, rc);
        }
        let f = self
            .entries
            .produce_sliced_device_stream
            .ok_or(CallError::Missing(E))?;
        crate::abi::breadcrumb::step(E);
        // SAFETY: `ipc` and `out` (a slot of the out-structure arena) are
        // valid for the whole call.
        let rc = crate::abi::outslot::call(E, out, |out| unsafe {
            f(
                ipc.as_ptr(),
                ipc.len() as i64,
                slice_offset,
                slice_length,
                device_type,
                device_id,
                out,
            )
        });
        self.check(E, rc)
    }

    fn consume_device_array(
        &self,
        schema: &mut ArrowSchema,
        array: &mut ArrowDeviceArray,
    ) -> Result<Vec<u8>, CallError> {
        const E: &str = "arrowcert_consume_device_array";
        if let (None, Some(f)) = (
            self.entries.consume_device_array,
            self.entries.consume_device_array_s,
        ) {
            const V: &str = "arrowcert_consume_device_array_to_stream";
            crate::abi::breadcrumb::step(V);
            let mut read = <ArrowArrayStream as crate::abi::Plain>::zeroed();
            // SAFETY: all three pointers are valid for the whole call; the
            // structures were filled by a producer and are live.
            let rc = unsafe { f(schema, array, &mut read) };
            return self.read_back(V, rc, &mut read);
        }
        let f = self
            .entries
            .consume_device_array
            .ok_or(CallError::Missing(E))?;
        crate::abi::breadcrumb::step(E);
        let (mut p, mut n) = (std::ptr::null_mut(), 0i64);
        // SAFETY: all four pointers are valid for the whole call; the
        // structures were filled by a producer and are live.
        let rc = unsafe { f(schema, array, &mut p, &mut n) };
        self.check(E, rc)?;
        Ok(self.take_output(p, n))
    }

    fn consume_device_stream(
        &self,
        stream: &mut ArrowDeviceArrayStream,
    ) -> Result<Vec<u8>, CallError> {
        const E: &str = "arrowcert_consume_device_stream";
        if let (None, Some(f)) = (
            self.entries.consume_device_stream,
            self.entries.consume_device_stream_s,
        ) {
            const V: &str = "arrowcert_consume_device_stream_to_stream";
            crate::abi::breadcrumb::step(V);
            let mut read = <ArrowArrayStream as crate::abi::Plain>::zeroed();
            // SAFETY: both pointers are valid for the whole call.
            let rc = unsafe { f(stream, &mut read) };
            return self.read_back(V, rc, &mut read);
        }
        let f = self
            .entries
            .consume_device_stream
            .ok_or(CallError::Missing(E))?;
        crate::abi::breadcrumb::step(E);
        let (mut p, mut n) = (std::ptr::null_mut(), 0i64);
        // SAFETY: all pointers are valid for the whole call.
        let rc = unsafe { f(stream, &mut p, &mut n) };
        self.check(E, rc)?;
        Ok(self.take_output(p, n))
    }

    fn consume_array(
        &self,
        schema: &mut ArrowSchema,
        array: &mut ArrowArray,
        // A plugin reports what it read; what was sent is not its to see.
        _sent: &arrow_array::RecordBatch,
    ) -> Result<Vec<u8>, CallError> {
        const E: &str = "arrowcert_consume_array";
        if let (None, Some(f)) = (self.entries.consume_array, self.entries.consume_array_s) {
            const V: &str = "arrowcert_consume_array_to_stream";
            crate::abi::breadcrumb::step(V);
            let mut read = <ArrowArrayStream as crate::abi::Plain>::zeroed();
            // SAFETY: all three pointers are valid for the whole call.
            let rc = unsafe { f(schema, array, &mut read) };
            return self.read_back(V, rc, &mut read);
        }
        let f = self.entries.consume_array.ok_or(CallError::Missing(E))?;
        crate::abi::breadcrumb::step(E);
        let (mut p, mut n) = (std::ptr::null_mut(), 0i64);
        // SAFETY: all pointers are valid for the whole call.
        let rc = unsafe { f(schema, array, &mut p, &mut n) };
        self.check(E, rc)?;
        Ok(self.take_output(p, n))
    }

    fn consume_stream(&self, stream: &mut ArrowArrayStream) -> Result<Vec<u8>, CallError> {
        const E: &str = "arrowcert_consume_stream";
        if let (None, Some(f)) = (self.entries.consume_stream, self.entries.consume_stream_s) {
            const V: &str = "arrowcert_consume_stream_to_stream";
            crate::abi::breadcrumb::step(V);
            let mut read = <ArrowArrayStream as crate::abi::Plain>::zeroed();
            // SAFETY: both pointers are valid for the whole call.
            let rc = unsafe { f(stream, &mut read) };
            return self.read_back(V, rc, &mut read);
        }
        let f = self.entries.consume_stream.ok_or(CallError::Missing(E))?;
        crate::abi::breadcrumb::step(E);
        let (mut p, mut n) = (std::ptr::null_mut(), 0i64);
        // SAFETY: all pointers are valid for the whole call.
        let rc = unsafe { f(stream, &mut p, &mut n) };
        self.check(E, rc)?;
        Ok(self.take_output(p, n))
    }

    fn consumed_values(&self) -> Option<String> {
        let f = self.entries.consume_values?;
        // SAFETY: declared type (`const char* (void)`), no arguments; the
        // result is NULL or a NUL-terminated string valid until the next
        // call on this thread, copied at once.
        let p = unsafe { f() };
        if p.is_null() {
            return None;
        }
        // SAFETY: non-NULL and NUL-terminated per the contract.
        Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
    }

    unsafe fn produce_async(
        &self,
        ipc: &[u8],
        device_type: ArrowDeviceType,
        device_id: i64,
        handler: *mut ArrowAsyncDeviceStreamHandler,
    ) -> Result<(), CallError> {
        const E: &str = "arrowcert_produce_async";
        let f = self.entries.produce_async.ok_or(CallError::Missing(E))?;
        crate::abi::breadcrumb::step(E);
        // SAFETY: `ipc` is valid for the call; `handler` as the caller
        // guarantees.
        let rc = unsafe {
            f(
                ipc.as_ptr(),
                ipc.len() as i64,
                device_type,
                device_id,
                handler,
            )
        };
        self.check(E, rc)
    }

    unsafe fn produce_sliced_async(
        &self,
        ipc: &[u8],
        slice_offset: i64,
        slice_length: i64,
        device_type: ArrowDeviceType,
        device_id: i64,
        handler: *mut ArrowAsyncDeviceStreamHandler,
    ) -> Result<(), CallError> {
        const E: &str = "arrowcert_produce_sliced_async";
        let f = self
            .entries
            .produce_sliced_async
            .ok_or(CallError::Missing(E))?;
        crate::abi::breadcrumb::step(E);
        // SAFETY: `ipc` is valid for the call; `handler` as the caller
        // guarantees.
        let rc = unsafe {
            f(
                ipc.as_ptr(),
                ipc.len() as i64,
                slice_offset,
                slice_length,
                device_type,
                device_id,
                handler,
            )
        };
        self.check(E, rc)
    }

    fn consumes_async(&self) -> bool {
        self.entries.consume_async_start.is_some() && self.entries.consume_async_finish.is_some()
    }

    unsafe fn consume_async_start(
        &self,
        handler: *mut ArrowAsyncDeviceStreamHandler,
    ) -> Result<usize, CallError> {
        const E: &str = "arrowcert_consume_async_start";
        let f = self
            .entries
            .consume_async_start
            .ok_or(CallError::Missing(E))?;
        crate::abi::breadcrumb::step(E);
        let mut token: *mut c_void = std::ptr::null_mut();
        // SAFETY: handler as the caller guarantees; token is writable.
        let rc = unsafe { f(handler, &mut token) };
        self.check(E, rc)?;
        Ok(token as usize)
    }

    fn cancels_async(&self) -> bool {
        self.entries.consume_async_cancel.is_some()
    }

    fn async_canceller(&self, token: usize) -> Option<Canceller> {
        self.entries
            .consume_async_cancel
            .map(|f| Canceller { f, token })
    }

    fn consume_async_finish(
        &self,
        token: usize,
        timeout_ms: i64,
        wait: std::time::Duration,
    ) -> Option<Result<Vec<u8>, CallError>> {
        const E: &str = "arrowcert_consume_async_finish";
        let Some(f) = self.entries.consume_async_finish else {
            return Some(Err(CallError::Missing(E)));
        };
        crate::abi::breadcrumb::step(E);
        let entries = self.entries;
        let (tx, rx) = std::sync::mpsc::channel();
        let spawned = std::thread::Builder::new()
            .name("arrowcert-finish".into())
            .spawn(move || {
                let (mut p, mut n) = (std::ptr::null_mut(), 0i64);
                // SAFETY: the token came from start (the plugin checks what
                // it is); the out pointers are writable.
                let rc = unsafe { f(token as *mut c_void, timeout_ms, &mut p, &mut n) };
                let r = if rc == 0 {
                    Ok(entries.take_output(p, n))
                } else {
                    Err(CallError::Failed {
                        entry: E,
                        code: rc,
                        message: entries.last_error(),
                    })
                };
                let _ = tx.send(r);
            });
        if let Err(e) = spawned {
            return Some(Err(CallError::Failed {
                entry: E,
                code: e.raw_os_error().unwrap_or(libc::EAGAIN),
                message: Some(format!("the harness could not start a thread: {e}")),
            }));
        }
        rx.recv_timeout(wait).ok()
    }
}

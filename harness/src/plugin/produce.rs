//! Calling a producer's entry points: schemas, arrays, device arrays,
//! streams and library objects, each from the IPC bytes of the data asked for.

use super::*;

impl Plugin {
    pub fn produce_schema(&self, ipc: &[u8], out: &mut ArrowSchema) -> Result<(), CallError> {
        if let Some(l) = &self.integration {
            return l.produce_schema(ipc, out);
        }
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
    pub fn produce_device_array(
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

    pub fn produce_device_stream(
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

    pub fn produce_array(
        &self,
        ipc: &[u8],
        batch_index: i64,
        slice_offset: i64,
        slice_length: i64,
        out: &mut ArrowArray,
    ) -> Result<(), CallError> {
        if let Some(l) = &self.integration {
            return l.produce_array(ipc, batch_index, slice_offset, slice_length, out);
        }
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

    /// The schema a library exports together with one batch's array (the
    /// schema half of `__arrow_c_array__`'s pair, a C++
    /// `ExportRecordBatch`'s schema): optional; `Missing` when the plugin
    /// has no such entry point.
    pub fn produce_array_schema(
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

    /// One library object holding one batch (`arrowcert_produce_object`),
    /// to export several times ([`LibraryObject::export`]): optional;
    /// `Missing` when the plugin cannot be asked (no such entry points).
    pub fn produce_object(
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
            plugin: self,
            handle,
            export,
            release,
        })
    }

    pub fn produce_stream(&self, ipc: &[u8], out: &mut ArrowArrayStream) -> Result<(), CallError> {
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

    /// `arrowcert_produce_sliced_stream`: rows `slice_offset..slice_offset
    /// + slice_length` of the whole stream (`-1`: to its end), across
    /// batches, as a plain stream (docs/PLUGIN_ABI.md, "Slices of a
    /// stream"). Optional: `Missing` when the plugin does not export it.
    pub fn produce_sliced_stream(
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

    /// `arrowcert_produce_sliced_device_stream`: as
    /// [`Plugin::produce_sliced_stream`], as a device stream.
    pub fn produce_sliced_device_stream(
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
}

//! A producer's calls: schemas, arrays, device arrays, streams and library
//! objects, each from the IPC bytes of the data asked for, handed to the
//! plugin's backend ([`super::backend`]; the native one calls the entry
//! points).

use super::*;

impl Plugin {
    pub fn produce_schema(&self, ipc: &[u8], out: &mut ArrowSchema) -> Result<(), CallError> {
        self.backend.produce_schema(ipc, out)
    }

    /// False when the plugin is known not to export the producer entry
    /// point `entry` (it would answer `Missing`): an array or device array
    /// case skips before any other export.
    pub fn may_produce(&self, entry: &'static str) -> bool {
        self.backend.may_produce(entry)
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
        self.backend.produce_device_array(
            ipc,
            batch_index,
            slice_offset,
            slice_length,
            device_type,
            device_id,
            out,
        )
    }

    pub fn produce_device_stream(
        &self,
        ipc: &[u8],
        device_type: ArrowDeviceType,
        device_id: i64,
        out: &mut ArrowDeviceArrayStream,
    ) -> Result<(), CallError> {
        self.backend
            .produce_device_stream(ipc, device_type, device_id, out)
    }

    pub fn produce_array(
        &self,
        ipc: &[u8],
        batch_index: i64,
        slice_offset: i64,
        slice_length: i64,
        out: &mut ArrowArray,
    ) -> Result<(), CallError> {
        self.backend
            .produce_array(ipc, batch_index, slice_offset, slice_length, out)
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
        self.backend
            .produce_array_schema(ipc, batch_index, slice_offset, slice_length, out)
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
        self.backend
            .produce_object(ipc, batch_index, slice_offset, slice_length)
    }

    pub fn produce_stream(&self, ipc: &[u8], out: &mut ArrowArrayStream) -> Result<(), CallError> {
        self.backend.produce_stream(ipc, out)
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
        self.backend
            .produce_sliced_stream(ipc, slice_offset, slice_length, out)
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
        self.backend.produce_sliced_device_stream(
            ipc,
            slice_offset,
            slice_length,
            device_type,
            device_id,
            out,
        )
    }
}

//! This crate's `ArrowDeviceArrayStream` (CDeviceDataInterface.rst, "Device
//! Stream Interface") over the batches of a decoded IPC stream: the source
//! of chunks; the callbacks are the SDK's ([`sdk::device_stream`]).
//!
//! The arrays and schemas it hands out are arrow-rs exports that own
//! references to the batches' buffers, so they outlive the stream: "The data
//! returned by the get_schema and get_next callbacks must be released
//! independently. Their lifetimes are not tied to that of
//! ArrowDeviceArrayStream."

use std::ffi::c_int;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use arrowcert_sdk::abi::arrow_rs::{export_batch, export_schema};
use arrowcert_sdk::abi::{device, ArrowDeviceArray, ArrowDeviceArrayStream, ArrowSchema};
use arrowcert_sdk::device_stream::{write_device_stream, DeviceStreamSource};
use arrowcert_sdk::{self as sdk, ipc::Decoded, PluginResult};

use crate::device::{target, write_end_of_stream, write_on, Target};
use crate::input;

/// What the stream owns: the batches and the position in them.
pub struct StreamState {
    target: Target,
    schema: SchemaRef,
    batches: Vec<RecordBatch>,
    cursor: usize,
}

impl StreamState {
    pub fn new(decoded: Decoded, target: Target) -> Self {
        StreamState {
            target,
            schema: decoded.schema,
            batches: decoded.batches,
            cursor: 0,
        }
    }
}

impl DeviceStreamSource for StreamState {
    fn device_type(&self) -> i32 {
        match self.target {
            Target::Cpu => device::CPU,
            Target::Emulated => device::EXT_DEV,
        }
    }

    fn schema(&mut self) -> PluginResult<ArrowSchema> {
        Ok(export_schema(&self.schema)?)
    }

    /// The next batch as a device array on the stream's target; at the end
    /// a released (all-zero) device array, again on every later call.
    unsafe fn next(&mut self, out: *mut ArrowDeviceArray) -> PluginResult {
        match self.batches.get(self.cursor) {
            Some(batch) => {
                self.cursor += 1;
                // SAFETY: `out` is non-NULL and valid for writes (trait).
                unsafe { write_on(self.target, &self.schema, out, export_batch(batch)) }
            }
            None => {
                // SAFETY: as above.
                unsafe { write_end_of_stream(out) };
                Ok(())
            }
        }
    }

    fn name(&self) -> &str {
        "reference producer"
    }
}

/// Exports every batch of the IPC stream as a CPU device stream.
///
/// # Safety
/// `ipc` must point to `ipc_len` readable bytes (or `ipc_len` be 0); `out`
/// must be NULL or valid for writes of one `ArrowDeviceArrayStream`.
#[no_mangle]
pub unsafe extern "C" fn arrowcert_produce_device_stream(
    ipc: *const u8,
    ipc_len: i64,
    device_type: i32,
    device_id: i64,
    out: *mut ArrowDeviceArrayStream,
) -> c_int {
    sdk::entry(|| {
        let out = sdk::non_null(out, "out")?;
        let target = target(device_type, device_id)?;
        // SAFETY: forwarded from the caller.
        let decoded = unsafe { input::decode(ipc, ipc_len) }?;
        input::check_exportable(&decoded.schema)?;
        // SAFETY: `out` is non-NULL and valid for writes (caller).
        unsafe { write_device_stream(out, StreamState::new(decoded, target)) };
        Ok(())
    })
}

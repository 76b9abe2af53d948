//! Exporting on CUDA: record batches as device arrays whose data buffers are
//! written late on a producer stream, with an event recorded after the
//! writes and `sync_event` pointing to it.
//!
//! Each export: arrow-rs exports the batch to a host `ArrowArray`; the tree
//! is rebuilt with every buffer in a fresh allocation of the kind asked for
//! (the mirror's `place`), filled with the complement of its bytes; only
//! then are the bytes written, with the
//! backend's `write_late` on a stream of the export's own, and the event
//! recorded on that stream. Allocating first matters: an allocation may
//! make the driver wait for running kernels, which would let the writes
//! land before the producer returns. The event is a heap slot owned by the
//! root's private data (the mirror's `extra`), destroyed by the root's
//! release; each node's release frees its buffers (the backend first waits
//! for late writes still pending there).
//!
//! CDeviceDataInterface.rst: "If an event is provided, then the producer
//! MUST ensure that the exported data is available on the device before the
//! event is triggered."

use std::ffi::{c_int, c_void};
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use arrowcert_sdk::abi::arrow_rs::{export_batch_slice, export_schema};
use arrowcert_sdk::abi::ops::{take, Guard};
use arrowcert_sdk::abi::{ArrowArray, ArrowDeviceArray, ArrowDeviceArrayStream, ArrowSchema};
use arrowcert_sdk::device::{hostmem, Device, Event, Kind, Stream};
use arrowcert_sdk::{self as sdk, ipc::Decoded, PluginError, PluginResult};

use crate::device::{require_producible, DEVICE_ID};
use crate::mutation::Producer;
use crate::producer_input as input;
use arrowcert_sdk::device::mirror;
use arrowcert_sdk::device_stream::{write_device_stream, DeviceStreamSource};

/// Picks the fault of a producer plugin (the reference's never fails).
pub type Mutation = fn() -> PluginResult<Producer>;

/// What the root of an exported array keeps alive until its release: the
/// event and the heap slot `sync_event` points to.
struct EventSlot {
    dev: Arc<dyn Device>,
    event: Event,
    slot: Box<u64>,
}

impl Drop for EventSlot {
    fn drop(&mut self) {
        // "In case hEvent has been recorded but has not yet been completed
        // when cuEventDestroy() is called, the function will return
        // immediately and the resources associated with hEvent will be
        // released automatically once the device has completed hEvent."
        let _ = self.dev.event_destroy(self.event);
    }
}

/// A device array ready to be written into an out structure.
pub struct Exported {
    pub array: ArrowArray,
    pub kind: Kind,
    pub sync_event: *mut c_void,
}

impl Exported {
    /// Writes the device array into `out`, overwriting the whole structure
    /// (padding included) without reading what was there.
    ///
    /// # Safety
    /// `out` must be valid for writes of one `ArrowDeviceArray` and aligned.
    pub unsafe fn write(self, out: *mut ArrowDeviceArray) {
        // SAFETY: `out` is valid for writes (caller); every write targets a
        // member through a raw place, so nothing is read or dropped.
        unsafe {
            std::ptr::write_bytes(out, 0, 1);
            (&raw mut (*out).array).write(self.array);
            (&raw mut (*out).device_id).write(DEVICE_ID);
            (&raw mut (*out).device_type).write(self.kind.device_type());
            (&raw mut (*out).sync_event).write(self.sync_event);
            (&raw mut (*out).reserved).write([0; 3]);
        }
    }
}

fn io(e: String) -> PluginError {
    PluginError::io(e)
}

/// Exports rows `offset..offset + length` of `batch` on `kind`, with the
/// fault `m` (`Producer::None`: correct by the spec).
pub fn export_batch(
    dev: &Arc<dyn Device>,
    kind: Kind,
    batch: &RecordBatch,
    offset: usize,
    length: usize,
    m: Producer,
) -> PluginResult<Exported> {
    let stream = dev.stream_create().map_err(io)?;
    let result = export_on(dev, kind, batch, offset, length, m, stream);
    // Work still queued on the stream completes after this (the event
    // recorded there stays valid).
    let _ = dev.stream_destroy(stream);
    result
}

fn export_on(
    dev: &Arc<dyn Device>,
    kind: Kind,
    batch: &RecordBatch,
    offset: usize,
    length: usize,
    m: Producer,
    stream: Stream,
) -> PluginResult<Exported> {
    let schema = Guard::new(export_schema(batch.schema().as_ref())?);
    let host = Guard::new(export_batch_slice(batch, offset, length));
    let event = dev.event_create().map_err(io)?;
    let holder = EventSlot {
        dev: dev.clone(),
        event,
        slot: Box::new(event.0),
    };
    let slot_addr = &*holder.slot as *const u64 as usize;

    let mut pending: Vec<(usize, Vec<u8>)> = Vec::new();
    let mut rebuilt = {
        let mut read = |b: &mirror::BufferRef| {
            hostmem::read(b.addr, b.len).ok_or_else(|| {
                format!(
                    "{} bytes at {:#x} are not readable host memory",
                    b.len, b.addr
                )
            })
        };
        let mut place =
            |b: &mirror::BufferRef, bytes: Vec<u8>| place_one(dev, kind, m, b, bytes, &mut pending);
        mirror::rebuild(
            &schema,
            &host,
            &mut read,
            &mut place,
            Some(Box::new(holder)),
        )
        .map_err(|s| PluginError::io(format!("placing the buffers in {kind} memory: {s}")))?
    };
    // The bytes were copied out: the host export is released here.
    drop(host);
    drop(schema);

    if m == Producer::EventBeforeWrite {
        dev.event_record(event, stream).map_err(io)?;
    }
    for (addr, bytes) in &pending {
        dev.write_late(stream, *addr, bytes).map_err(io)?;
    }
    if m != Producer::EventBeforeWrite {
        dev.event_record(event, stream).map_err(io)?;
    }
    let sync_event = match m {
        Producer::NoEvent => std::ptr::null_mut(),
        Producer::EventByValue => event.0 as usize as *mut c_void,
        _ => slot_addr as *mut c_void,
    };
    Ok(Exported {
        array: take(&mut rebuilt.array),
        kind,
        sync_event,
    })
}

/// The mirror's `place`: a fresh allocation of `kind` whose bytes are
/// written later (`pending`), freed by the node's release.
fn place_one(
    dev: &Arc<dyn Device>,
    kind: Kind,
    m: Producer,
    b: &mirror::BufferRef,
    mut bytes: Vec<u8>,
    pending: &mut Vec<(usize, Vec<u8>)>,
) -> Result<mirror::Placed, String> {
    if m == Producer::HostBuffers {
        return mirror::host_place(b, bytes);
    }
    if m == Producer::ShortAllocation && bytes.len() >= 2 {
        bytes.truncate(bytes.len() - 1);
    }
    // managed-buffers: managed memory where device memory was asked for.
    let alloc_kind = if m == Producer::ManagedBuffers && kind == Kind::Cuda {
        Kind::CudaManaged
    } else {
        kind
    };
    let addr = dev.alloc(alloc_kind, bytes.len())?;
    // Until the late write lands, the buffer holds the complement of the
    // data, so a consumer that reads without waiting gets a wrong value in
    // every byte, not whatever a fresh allocation happened to hold (a
    // previous export of the same data, say).
    let poison: Vec<u8> = bytes.iter().map(|b| !b).collect();
    if let Err(e) = dev.copy_from_host(addr, &poison) {
        let _ = dev.free(addr);
        return Err(e);
    }
    pending.push((addr, bytes));
    let free: Option<Box<dyn FnOnce() + Send>> = if m == Producer::LeakDeviceMemory {
        None
    } else {
        let dev = dev.clone();
        Some(Box::new(move || {
            let _ = dev.free(addr);
        }))
    };
    Ok(mirror::Placed { addr, free })
}

/// `arrowcert_produce_schema`: the stream's schema (host memory, as every
/// schema is).
///
/// # Safety
/// `ipc` must point to `ipc_len` readable bytes (or `ipc_len` be 0); `out`
/// must be NULL or valid for writes of one `ArrowSchema`.
pub unsafe fn produce_schema(ipc: *const u8, ipc_len: i64, out: *mut ArrowSchema) -> c_int {
    sdk::entry(|| {
        let out = sdk::non_null(out, "out")?;
        // SAFETY: forwarded from the caller.
        let decoded = unsafe { input::decode(ipc, ipc_len) }?;
        let schema = export_schema(&decoded.schema)?;
        // SAFETY: `out` is non-NULL and valid for writes (caller).
        unsafe { out.write(schema) };
        Ok(())
    })
}

/// `arrowcert_produce_device_array` on a CUDA kind.
///
/// # Safety
/// `ipc` must point to `ipc_len` readable bytes (or `ipc_len` be 0); `out`
/// must be NULL or valid for writes of one `ArrowDeviceArray`.
#[allow(clippy::too_many_arguments)]
pub unsafe fn produce_device_array(
    ipc: *const u8,
    ipc_len: i64,
    batch_index: i64,
    slice_offset: i64,
    slice_length: i64,
    device_type: i32,
    device_id: i64,
    out: *mut ArrowDeviceArray,
    mutation: Mutation,
) -> c_int {
    sdk::entry(|| {
        let out = sdk::non_null(out, "out")?;
        let m = mutation()?;
        let (kind, dev) = require_producible(device_type, device_id)?;
        // SAFETY: forwarded from the caller.
        let decoded = unsafe { input::decode(ipc, ipc_len) }?;
        let (batch, offset, length) = decoded.range(batch_index, slice_offset, slice_length)?;
        let exported = export_batch(&dev, kind, batch, offset, length, m)?;
        // SAFETY: `out` is non-NULL and valid for writes (caller).
        unsafe { exported.write(out) };
        Ok(())
    })
}

/// `arrowcert_produce_device_stream` on a CUDA kind.
///
/// # Safety
/// `ipc` must point to `ipc_len` readable bytes (or `ipc_len` be 0); `out`
/// must be NULL or valid for writes of one `ArrowDeviceArrayStream`.
pub unsafe fn produce_device_stream(
    ipc: *const u8,
    ipc_len: i64,
    device_type: i32,
    device_id: i64,
    out: *mut ArrowDeviceArrayStream,
    mutation: Mutation,
) -> c_int {
    sdk::entry(|| {
        let out = sdk::non_null(out, "out")?;
        let m = mutation()?;
        let (kind, dev) = require_producible(device_type, device_id)?;
        // SAFETY: forwarded from the caller.
        let decoded = unsafe { input::decode(ipc, ipc_len) }?;
        input::check_exportable(&decoded.schema)?;
        let state = StreamState::new(dev, kind, m, decoded);
        // SAFETY: `out` is non-NULL and valid for writes (caller).
        unsafe { write_device_stream(out, state) };
        Ok(())
    })
}

/// What a device stream owns: the device, the export's mutation, the batches
/// and the position in them. The callbacks are the SDK's
/// ([`sdk::device_stream`]).
pub struct StreamState {
    dev: Arc<dyn Device>,
    kind: Kind,
    mutation: Producer,
    schema: SchemaRef,
    batches: Vec<RecordBatch>,
    cursor: usize,
}

impl StreamState {
    pub fn new(dev: Arc<dyn Device>, kind: Kind, mutation: Producer, decoded: Decoded) -> Self {
        StreamState {
            dev,
            kind,
            mutation,
            schema: decoded.schema,
            batches: decoded.batches,
            cursor: 0,
        }
    }
}

impl DeviceStreamSource for StreamState {
    fn device_type(&self) -> i32 {
        self.kind.device_type()
    }

    fn schema(&mut self) -> PluginResult<ArrowSchema> {
        Ok(export_schema(&self.schema)?)
    }

    /// The next batch as a device array on the stream's kind; at the end a
    /// released (all-zero) device array, again on every later call.
    unsafe fn next(&mut self, out: *mut ArrowDeviceArray) -> PluginResult {
        match self.batches.get(self.cursor) {
            Some(batch) => {
                let exported = export_batch(
                    &self.dev,
                    self.kind,
                    batch,
                    0,
                    batch.num_rows(),
                    self.mutation,
                )?;
                self.cursor += 1;
                // SAFETY: `out` is non-NULL and valid for writes (trait).
                unsafe { exported.write(out) };
            }
            // SAFETY: as above; all-zero bytes are a released device array.
            None => unsafe { std::ptr::write_bytes(out, 0, 1) },
        }
        Ok(())
    }

    fn name(&self) -> &str {
        "the CUDA producer"
    }
}

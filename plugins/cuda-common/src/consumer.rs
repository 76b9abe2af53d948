//! Consuming CUDA device arrays and streams.
//!
//! Every entry point moves what it is given first (the reference consumer's
//! `take_input`: bitwise copy, source marked released), so what it was given
//! is released exactly once on every path. For each device array: wait on
//! `sync_event` when it is not NULL ("If this is non-null then it MUST be
//! used to call the appropriate sync method for the device"; for CUDA it is
//! a `cudaEvent_t*`, and the backend's `event_behind` reads the event it
//! points to and checks it is live), then copy every buffer to the host
//! (the mirror's `to_host`), release the device array, and import and
//! validate the host copy with arrow-rs (the reference consumer's
//! `read_batch`). What was read goes back as one IPC stream.

use std::ffi::c_int;
use std::sync::Arc;

use arrow_array::ffi::FFI_ArrowSchema;
use arrow_array::RecordBatch;
use arrow_schema::{Schema, SchemaRef};
use arrowcert_sdk::abi::ops::{take, Guard, Owned};
use arrowcert_sdk::abi::{ArrowDeviceArray, ArrowDeviceArrayStream, ArrowSchema};
use arrowcert_sdk::device::{Device, Kind};
use arrowcert_sdk::{entry, PluginError, PluginResult};

use crate::consumer_input::take_input;
use crate::device::{backend, describe, require_kind};
// TODO-merge: `use arrowcert_sdk::device::mirror;`
use crate::mutation::Consumer;
use crate::strings::copy_c_str;
use crate::{output, read};
use arrowcert_sdk::device::mirror;

/// Picks the fault of a consumer plugin (the reference's never fails).
pub type Mutation = fn() -> PluginResult<Consumer>;

/// The arrow-rs schema of a C schema, which is only borrowed (the C schema
/// stays live: the mirror walks each chunk with it).
pub(crate) fn schema_of(schema: &ArrowSchema) -> PluginResult<SchemaRef> {
    if schema.is_released() {
        return Err(PluginError::invalid("the schema is released"));
    }
    // SAFETY: FFI_ArrowSchema is arrow-rs's repr(C) definition of the same
    // struct (sizes asserted in arrowcert_sdk::abi::arrow_rs); the reference is
    // only read, and nothing is released through it.
    let ffi = unsafe { &*(schema as *const ArrowSchema).cast::<FFI_ArrowSchema>() };
    let schema = Schema::try_from(ffi)
        .map_err(|e| PluginError::invalid(format!("importing the schema: {e}")))?;
    Ok(Arc::new(schema))
}

/// Waits on the event `sync_event` points to (NULL: nothing to wait on).
fn wait(dev: &dyn Device, sync_event: usize, what: &str) -> PluginResult {
    if sync_event == 0 {
        return Ok(());
    }
    let event = dev
        .event_behind(sync_event)
        .map_err(|e| PluginError::invalid(format!("{what}: {e}")))?;
    dev.event_wait(event)
        .map_err(|e| PluginError::io(format!("{what}: waiting on sync_event: {e}")))
}

/// Reads one device array: waits on its event, copies its buffers to the
/// host, releases it, imports and validates the copy.
pub(crate) fn read_chunk(
    dev: &dyn Device,
    c_schema: &ArrowSchema,
    schema: &SchemaRef,
    mut chunk: Guard<ArrowDeviceArray>,
    m: Consumer,
    what: &str,
) -> PluginResult<RecordBatch> {
    let sync_event = chunk.sync_event as usize;
    if m != Consumer::ReadBeforeWait {
        wait(dev, sync_event, what)?;
    }
    let mut host = mirror::to_host(dev, c_schema, &chunk.array)
        .map_err(|s| PluginError::invalid(format!("{what}: copying to the host: {s}")))?;
    if m == Consumer::ReadBeforeWait {
        // The mutant still synchronises, after it has read.
        wait(dev, sync_event, what)?;
    }
    // "Consumers MUST call a base structure's release callback when they
    // won't be using it anymore": the host copy is all that is read now.
    // Moved out first, so the guard cannot release it a second time.
    take(&mut *chunk).release();
    drop(chunk);
    let array = take(&mut host.array);
    drop(host);
    // SAFETY: `array` is a live tree the mirror built in host memory, with
    // the chunk's type (its walk followed the schema).
    unsafe { read::read_batch(schema, array) }.map_err(|e| read::context(e, what))
}

/// `arrowcert_consume_device_array` for the CUDA kinds.
///
/// # Safety
/// `schema` and `array` must each be NULL or valid for reads and writes and
/// hold a structure that is released or live and follows the C (device)
/// data interface; `out_ipc` and `out_len` must be NULL or valid for writes.
pub unsafe fn consume_device_array(
    schema: *mut ArrowSchema,
    array: *mut ArrowDeviceArray,
    out_ipc: *mut *mut u8,
    out_len: *mut i64,
    mutation: Mutation,
) -> c_int {
    entry(|| {
        // Move both before either can fail, so both are released whatever
        // happens next.
        // SAFETY: forwarded from the caller.
        let schema = unsafe { take_input(schema, "schema") };
        // SAFETY: forwarded from the caller.
        let array = unsafe { take_input(array, "device array") };
        let (schema, array) = (schema?, array?);
        output::check_out(out_ipc, out_len)?;
        let m = mutation()?;
        let kind: Kind = require_kind(array.device_type, "the device array")?;
        let dev = backend(kind)?;
        let arrow_schema = schema_of(&schema)?;
        let batch = read_chunk(&*dev, &schema, &arrow_schema, array, m, "the device array")?;
        drop(schema);
        // SAFETY: forwarded from the caller.
        unsafe { output::emit(&arrow_schema, vec![batch], out_ipc, out_len) }
    })
}

/// `arrowcert_consume_device_stream` for the CUDA kinds.
///
/// # Safety
/// `stream` must be NULL or valid for reads and writes and hold a released
/// stream or a live one that follows the C device stream interface;
/// `out_ipc` and `out_len` must be NULL or valid for writes.
pub unsafe fn consume_device_stream(
    stream: *mut ArrowDeviceArrayStream,
    out_ipc: *mut *mut u8,
    out_len: *mut i64,
    mutation: Mutation,
) -> c_int {
    entry(|| {
        // SAFETY: forwarded from the caller.
        let mut stream = unsafe { take_input(stream, "ArrowDeviceArrayStream") }?;
        output::check_out(out_ipc, out_len)?;
        let m = mutation()?;
        // SAFETY: the guard holds the live stream the caller handed over.
        let read = unsafe { drain(&mut stream, m) };
        // The chunks read stay valid: "Their lifetimes are not tied to that
        // of ArrowDeviceArrayStream".
        drop(stream);
        let (schema, batches) = read?;
        // SAFETY: forwarded from the caller.
        unsafe { output::emit(&schema, batches, out_ipc, out_len) }
    })
}

/// `get_schema` once, then `get_next` until end of stream, reading every
/// chunk.
///
/// # Safety
/// `stream` is a live stream that follows its interface.
unsafe fn drain(
    stream: &mut ArrowDeviceArrayStream,
    m: Consumer,
) -> PluginResult<(SchemaRef, Vec<RecordBatch>)> {
    let declared = stream.device_type;
    let kind = require_kind(declared, "the device stream")?;
    let dev = backend(kind)?;
    let get_schema = stream
        .get_schema
        .ok_or_else(|| PluginError::invalid("ArrowDeviceArrayStream.get_schema is NULL"))?;
    let get_next = stream
        .get_next
        .ok_or_else(|| PluginError::invalid("ArrowDeviceArrayStream.get_next is NULL"))?;

    let mut c_schema = Guard::<ArrowSchema>::zeroed();
    // SAFETY: the producer installed the callback on this live stream; the
    // guard's structure is valid for writes.
    let rc = unsafe { get_schema(stream, c_schema.as_mut_ptr()) };
    if rc != 0 {
        // A failed call hands nothing over.
        c_schema.mark_released();
        // SAFETY: the last operation on the live stream failed.
        return Err(unsafe { producer_error(stream, rc, "get_schema") });
    }
    let schema = schema_of(&c_schema).map_err(|e| read::context(e, "get_schema"))?;

    let mut batches = Vec::new();
    loop {
        let index = batches.len();
        let mut chunk = Guard::<ArrowDeviceArray>::zeroed();
        // SAFETY: as for get_schema.
        let rc = unsafe { get_next(stream, chunk.as_mut_ptr()) };
        if rc != 0 {
            chunk.mark_released();
            // SAFETY: the last operation on the live stream failed.
            return Err(unsafe { producer_error(stream, rc, "get_next") });
        }
        // "If the embedded ArrowDeviceArray.array is released, then the end
        // of the stream has been reached."
        if chunk.is_released() {
            break;
        }
        let what = format!("chunk {index}");
        if chunk.device_type != declared {
            return Err(PluginError::invalid(format!(
                "{what} is on device {} but its stream declared {}",
                describe(chunk.device_type),
                describe(declared)
            )));
        }
        batches.push(read_chunk(&*dev, &c_schema, &schema, chunk, m, &what)?);
    }
    Ok((schema, batches))
}

/// The producer's failure as this call's error: the same code and the
/// message from `get_last_error`, copied at once.
///
/// # Safety
/// `stream` is live and its last operation returned `rc != 0`.
unsafe fn producer_error(
    stream: &mut ArrowDeviceArrayStream,
    rc: c_int,
    call: &str,
) -> PluginError {
    let message = stream.get_last_error.and_then(|f| {
        // SAFETY: called only after a failure, on a live stream; the string
        // is copied before any other callback.
        unsafe { copy_c_str(f(stream)) }
    });
    PluginError::new(
        rc,
        message.unwrap_or_else(|| {
            format!("ArrowDeviceArrayStream.{call} failed with error {rc}; get_last_error gave no message")
        }),
    )
}

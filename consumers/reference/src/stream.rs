//! `arrowcert_consume_stream` and `arrowcert_consume_device_stream`.
//!
//! The loop over the callbacks is this crate's own (not arrow-rs's stream
//! reader), so that a producer's error code and message reach the harness
//! exactly: "When the data the harness passes carries a producer error (a
//! stream whose `get_next` fails, ...), the consumer returns that error code
//! from the consume call and sets its last error" (PLUGIN_ABI.md).

use std::ffi::{c_char, c_int};

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use arrowcert_sdk::abi::ops::{take, Guard, Owned};
use arrowcert_sdk::abi::{
    ArrowArray, ArrowArrayStream, ArrowDeviceArray, ArrowDeviceArrayStream, ArrowSchema,
};
use arrowcert_sdk::{entry, PluginError, PluginResult};

use crate::input::take_input;
use crate::read::context;
use crate::strings::copy_c_str;
use crate::{device, output, read};

/// `int arrowcert_consume_stream(struct ArrowArrayStream* stream, uint8_t**
/// out_ipc, int64_t* out_len);`
///
/// # Safety
/// `stream` must be NULL or valid for reads and writes and hold a released
/// stream or a live one that follows the C stream interface; `out_ipc` and
/// `out_len` must be NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn arrowcert_consume_stream(
    stream: *mut ArrowArrayStream,
    out_ipc: *mut *mut u8,
    out_len: *mut i64,
) -> c_int {
    // SAFETY: forwarded from the caller.
    entry(|| unsafe { consume(stream, out_ipc, out_len) })
}

/// `int arrowcert_consume_device_stream(struct ArrowDeviceArrayStream*
/// stream, uint8_t** out_ipc, int64_t* out_len);`
///
/// A stream on any device but CPU is refused with `ENOSYS` (after releasing
/// it, without calling any other callback).
///
/// # Safety
/// As [`arrowcert_consume_stream`], for a device stream.
#[no_mangle]
pub unsafe extern "C" fn arrowcert_consume_device_stream(
    stream: *mut ArrowDeviceArrayStream,
    out_ipc: *mut *mut u8,
    out_len: *mut i64,
) -> c_int {
    // SAFETY: forwarded from the caller.
    entry(|| unsafe { consume(stream, out_ipc, out_len) })
}

/// What differs between the C stream and the C device stream.
trait Source: Owned {
    /// What one `get_next` produces.
    type Chunk: Owned;
    /// The structure's name, for messages.
    const NAME: &'static str;
    /// Refuses a stream this consumer cannot read.
    fn check_device(&self) -> PluginResult;
    /// Calls `get_schema`.
    ///
    /// # Safety
    /// `self` is a live stream; `out` is valid for writes.
    unsafe fn get_schema(&mut self, out: *mut ArrowSchema) -> PluginResult<c_int>;
    /// Calls `get_next`.
    ///
    /// # Safety
    /// As [`Source::get_schema`].
    unsafe fn get_next(&mut self, out: *mut Self::Chunk) -> PluginResult<c_int>;
    /// Calls `get_last_error` and copies the message.
    ///
    /// # Safety
    /// `self` is a live stream whose last operation failed.
    unsafe fn last_error(&mut self) -> Option<String>;
    /// Moves the C data array out of a live chunk (refusing it first if it
    /// cannot be read; the chunk is then released by its guard).
    fn chunk_array(&self, chunk: &mut Self::Chunk, index: usize) -> PluginResult<ArrowArray>;
}

/// The three callbacks both stream structures share, by member name.
macro_rules! stream_callbacks {
    () => {
        unsafe fn get_schema(&mut self, out: *mut ArrowSchema) -> PluginResult<c_int> {
            let f = self
                .get_schema
                .ok_or_else(|| missing(Self::NAME, "get_schema"))?;
            // SAFETY: the producer installed the callback on this live stream
            // (caller's guarantee); `out` is valid for writes.
            Ok(unsafe { f(self, out) })
        }

        unsafe fn get_next(&mut self, out: *mut Self::Chunk) -> PluginResult<c_int> {
            let f = self
                .get_next
                .ok_or_else(|| missing(Self::NAME, "get_next"))?;
            // SAFETY: as in get_schema.
            Ok(unsafe { f(self, out) })
        }

        unsafe fn last_error(&mut self) -> Option<String> {
            let f = self.get_last_error?;
            // SAFETY: "This callback must ONLY be called if the last operation
            // on the ``ArrowArrayStream`` returned an error": the caller only
            // calls this after a failure, on a live stream.
            let message: *const c_char = unsafe { f(self) };
            // SAFETY: "a pointer to a NULL-terminated character string
            // (UTF8-encoded). NULL can also be returned", valid until the next
            // callback, and copied before any.
            unsafe { copy_c_str(message) }
        }
    };
}

impl Source for ArrowArrayStream {
    type Chunk = ArrowArray;
    const NAME: &'static str = "ArrowArrayStream";

    fn check_device(&self) -> PluginResult {
        Ok(())
    }

    stream_callbacks!();

    fn chunk_array(&self, chunk: &mut ArrowArray, _index: usize) -> PluginResult<ArrowArray> {
        Ok(take(chunk))
    }
}

impl Source for ArrowDeviceArrayStream {
    type Chunk = ArrowDeviceArray;
    const NAME: &'static str = "ArrowDeviceArrayStream";

    fn check_device(&self) -> PluginResult {
        device::require_readable(self.device_type, "the device stream")
    }

    stream_callbacks!();

    fn chunk_array(&self, chunk: &mut ArrowDeviceArray, index: usize) -> PluginResult<ArrowArray> {
        device::require_declared(
            self.device_type,
            chunk.device_type,
            &format!("chunk {index}"),
        )?;
        // Wait on the chunk's event (emulated) before anything reads it;
        // moving the embedded array out marks the device array released.
        // SAFETY: a live chunk the stream just produced.
        unsafe { device::ready(chunk, &format!("chunk {index}")) }?;
        Ok(take(&mut chunk.array))
    }
}

fn missing(stream: &str, callback: &str) -> PluginError {
    PluginError::invalid(format!("{stream}.{callback} is NULL"))
}

/// Moves the stream, reads it to the end, releases it, and hands back what
/// was read.
///
/// # Safety
/// As [`arrowcert_consume_stream`].
unsafe fn consume<S: Source>(
    src: *mut S,
    out_ipc: *mut *mut u8,
    out_len: *mut i64,
) -> PluginResult {
    // "Lifetime of the C stream is managed using a release callback with
    // similar usage as in the C data interface": the stream is moved into a
    // guard that releases it exactly once, on every path below.
    // SAFETY: forwarded from the caller.
    let mut stream = unsafe { take_input(src, S::NAME) }?;
    output::check_out(out_ipc, out_len)?;
    // SAFETY: the guard holds the live stream the caller handed over.
    let read = unsafe { drain(&mut *stream) };
    // "Consumers MUST call a base structure's release callback when they
    // won't be using it anymore". The chunks and schema read from it stay
    // valid: "Their lifetimes are not tied to that of the ArrowArrayStream".
    drop(stream);
    let (schema, batches) = read?;
    // SAFETY: forwarded from the caller.
    unsafe { output::emit(&schema, batches, out_ipc, out_len) }
}

/// `get_schema` once, then `get_next` until end of stream, importing and
/// validating every chunk.
///
/// # Safety
/// `stream` is a live stream that follows its interface.
unsafe fn drain<S: Source>(stream: &mut S) -> PluginResult<(SchemaRef, Vec<RecordBatch>)> {
    stream.check_device()?;

    let mut raw_schema = Guard::<ArrowSchema>::zeroed();
    // SAFETY: live stream; the guard's structure is valid for writes.
    let rc = unsafe { stream.get_schema(raw_schema.as_mut_ptr()) }?;
    if rc != 0 {
        // A failed call hands nothing over: leave whatever it wrote alone.
        raw_schema.mark_released();
        // SAFETY: the last operation on the live stream failed.
        return Err(unsafe { producer_error(stream, rc, "get_schema") });
    }
    if raw_schema.is_released() {
        return Err(PluginError::invalid(format!(
            "{}.get_schema returned 0 but left the schema released",
            S::NAME
        )));
    }
    // SAFETY: a live schema the producer handed over.
    let schema = unsafe { read::import_schema(take(&mut *raw_schema)) }
        .map_err(|e| context(e, "get_schema"))?;

    let mut batches = Vec::new();
    loop {
        let index = batches.len();
        let mut chunk = Guard::<S::Chunk>::zeroed();
        // SAFETY: live stream; the guard's structure is valid for writes.
        let rc = unsafe { stream.get_next(chunk.as_mut_ptr()) }?;
        if rc != 0 {
            chunk.mark_released();
            // SAFETY: the last operation on the live stream failed.
            return Err(unsafe { producer_error(stream, rc, "get_next") });
        }
        // "On success, the consumer must check whether the ``ArrowArray`` is
        // marked released. If the ``ArrowArray`` is released, then the end of
        // stream has been reached."
        if chunk.is_released() {
            break;
        }
        let array = stream.chunk_array(&mut chunk, index)?;
        // SAFETY: a live array the producer handed over for this schema.
        let batch = unsafe { read::read_batch(&schema, array) }
            .map_err(|e| context(e, format!("chunk {index}")))?;
        batches.push(batch);
    }
    Ok((schema, batches))
}

/// The producer's failure as this call's error: the same code, and the
/// message from `get_last_error`, copied at once ("The returned pointer is
/// only guaranteed to be valid until the next call of one of the stream's
/// callbacks", and the stream is released next).
///
/// # Safety
/// `stream` is live and its last operation returned `rc != 0`.
unsafe fn producer_error<S: Source>(stream: &mut S, rc: c_int, call: &str) -> PluginError {
    // SAFETY: forwarded from the caller.
    let message = unsafe { stream.last_error() }.unwrap_or_else(|| {
        format!(
            "{}.{call} failed with error {rc}; get_last_error gave no message",
            S::NAME
        )
    });
    PluginError::new(rc, message)
}

//! `arrowcert_produce_async`: the async device stream producer
//! (CDeviceDataInterface.rst, "Async Device Stream Interface").
//!
//! The entry point validates synchronously, then starts one thread of its own
//! ([`driver`]) that calls every handler callback, so callbacks never overlap
//! and `request`/`cancel` ([`producer`]) only record flow state ([`flow`]).
//! Each batch travels in an `ArrowAsyncTask` ([`task`]).

pub mod driver;
pub mod flow;
pub mod handler;
pub mod producer;
pub mod task;

use std::ffi::c_int;

use arrow_array::ffi::FFI_ArrowSchema;
use arrowcert_sdk::abi::ArrowAsyncDeviceStreamHandler;
use arrowcert_sdk::{self as sdk, PluginError};

use crate::device::require_cpu;
use crate::{input, metadata};

use driver::Job;
use handler::Handler;

/// Starts producing every batch of the IPC stream into `handler` and returns
/// 0 once the producer thread runs; the stream continues on that thread.
///
/// Errors found before the thread starts (NULL or incomplete handler, a
/// device other than (CPU, -1), bad IPC bytes, a schema that cannot be
/// exported, a thread that cannot be spawned) are returned as an errno
/// WITHOUT calling any handler callback: in that case the caller keeps
/// ownership of the handler and must release it itself (the producer never
/// took it over, so no `release` will come from here).
///
/// # Safety
/// `ipc` must point to `ipc_len` readable bytes (or `ipc_len` be 0) for the
/// duration of the call. `handler` must be NULL or a handler the consumer
/// initialised; on success it must stay valid until its release callback was
/// called.
#[no_mangle]
pub unsafe extern "C" fn arrowcert_produce_async(
    ipc: *const u8,
    ipc_len: i64,
    device_type: i32,
    device_id: i64,
    handler: *mut ArrowAsyncDeviceStreamHandler,
) -> c_int {
    // SAFETY: forwarded from the caller.
    unsafe { start(ipc, ipc_len, None, device_type, device_id, handler) }
}

/// [`arrowcert_produce_async`], of the whole stream or (`slice`: offset,
/// length, -1 to the end) of rows of it across batches
/// ([`crate::sliced::arrowcert_produce_sliced_async`]).
///
/// # Safety
/// As [`arrowcert_produce_async`].
pub(crate) unsafe fn start(
    ipc: *const u8,
    ipc_len: i64,
    slice: Option<(i64, i64)>,
    device_type: i32,
    device_id: i64,
    handler: *mut ArrowAsyncDeviceStreamHandler,
) -> c_int {
    sdk::entry(|| {
        // SAFETY: forwarded from the caller; only reads the callbacks.
        let handler = unsafe { Handler::new(handler) }?;
        require_cpu(device_type, device_id)?;
        // SAFETY: forwarded from the caller.
        let decoded = unsafe { input::decode(ipc, ipc_len) }?;
        let decoded = match slice {
            Some((offset, length)) => decoded.sliced(offset, length)?,
            None => decoded,
        };
        let schema = FFI_ArrowSchema::try_from(decoded.schema.as_ref())?;
        let rows: usize = decoded.batches.iter().map(|b| b.num_rows()).sum();
        // "a producer could utilize this metadata to provide the total
        // number of rows and/or batches in the stream if known."
        let metadata = metadata::encode(&[
            ("arrowcert.batches", &decoded.batches.len().to_string()),
            ("arrowcert.rows", &rows.to_string()),
        ]);
        let job = Job {
            handler,
            schema,
            batches: decoded.batches,
            metadata,
        };
        std::thread::Builder::new()
            .name("arrowcert-ref-async".into())
            .spawn(move || driver::run(job))
            .map_err(|e| {
                PluginError::new(
                    e.raw_os_error().unwrap_or(libc::EAGAIN),
                    format!("cannot start the producer thread: {e}"),
                )
            })?;
        Ok(())
    })
}

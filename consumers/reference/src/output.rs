//! Handing back what was read: one Arrow IPC stream in malloc'd memory.

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use arrowcert_sdk::{ipc, out, PluginError, PluginResult};

/// Refuses NULL out-parameters before any work is done (the inputs are
/// still released by their guards).
pub fn check_out(out_ipc: *mut *mut u8, out_len: *mut i64) -> PluginResult {
    if out_ipc.is_null() || out_len.is_null() {
        Err(PluginError::invalid("out_ipc or out_len is NULL"))
    } else {
        Ok(())
    }
}

/// Encodes `schema` and `batches` as one IPC stream, drops the batches
/// (which releases every imported array: "By the time the call returns,
/// everything it imported has been released", PLUGIN_ABI.md), and hands the
/// bytes out; the harness frees them with `arrowcert_free`.
///
/// # Safety
/// `out_ipc` and `out_len` must be NULL or valid for writes.
pub unsafe fn emit(
    schema: &SchemaRef,
    batches: Vec<RecordBatch>,
    out_ipc: *mut *mut u8,
    out_len: *mut i64,
) -> PluginResult {
    let bytes = ipc::encode(schema, &batches)?;
    drop(batches);
    // SAFETY: forwarded from the caller; hand_out checks for NULL.
    unsafe { out::hand_out(&bytes, out_ipc, out_len) }
}

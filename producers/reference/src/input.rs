//! What an entry point is asked to export: the IPC stream bytes it was given.

use arrow_schema::Schema;
use arrowcert_sdk::abi::arrow_rs::export_schema;
use arrowcert_sdk::abi::ops::Owned;
use arrowcert_sdk::ipc::{self, Decoded};
use arrowcert_sdk::{out, PluginResult};

/// Decodes the IPC stream an entry point was given.
///
/// # Safety
/// `ipc` must point to `ipc_len` readable bytes that stay valid during the
/// call, or `ipc_len` must be 0.
pub unsafe fn decode(ipc: *const u8, ipc_len: i64) -> PluginResult<Decoded> {
    // SAFETY: forwarded from the caller.
    let bytes = unsafe { out::input(ipc, ipc_len) }?;
    ipc::decode(bytes)
}

/// Fails (synchronously, before anything is handed out) if the schema
/// cannot be exported through the C data interface, so that callbacks which
/// export it later (`get_schema`, `on_schema`) cannot fail for that reason.
pub fn check_exportable(schema: &Schema) -> PluginResult {
    let mut probe = export_schema(schema)?;
    probe.release();
    Ok(())
}

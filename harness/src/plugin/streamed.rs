//! The contract's stream variants (docs/PLUGIN_ABI.md, "Data as a stream"):
//! a producer that takes the scenario as an `ArrowArrayStream` the harness
//! exports, instead of IPC bytes, and a consumer that hands back what it
//! read as an `ArrowArrayStream` the harness imports (validated first),
//! instead of IPC bytes. A library with no IPC reader or writer can then be
//! certified through its C data interface alone.
//!
//! The rest of the harness still speaks IPC bytes to plugins: this module
//! turns them into the stream a plugin takes, and what a plugin hands back
//! into them.

use std::sync::Arc;

use arrow_array::{RecordBatch, RecordBatchIterator};

use super::CallError;
use crate::abi::{ArrowArray, ArrowArrayStream, ArrowSchema};
use crate::inspect::probe::{self, Call, StreamCalls};

fn failed(entry: &'static str, code: libc::c_int, message: String) -> CallError {
    CallError::Failed {
        entry,
        code,
        message: Some(message),
    }
}

/// The scenario the IPC bytes hold, as a stream the harness's own exporter
/// (arrow-rs) serves: every batch, or (`pick`: batch index, slice offset,
/// slice length) the one batch a producer's array entry point exports,
/// sliced without a copy.
pub fn scenario(
    entry: &'static str,
    ipc: &[u8],
    pick: Option<(i64, i64, i64)>,
) -> Result<ArrowArrayStream, CallError> {
    let decoded = crate::sdk::ipc::decode(ipc).map_err(|e| {
        failed(
            entry,
            libc::EINVAL,
            format!("the scenario's IPC stream does not decode: {}", e.message),
        )
    })?;
    let batches: Vec<RecordBatch> = match pick {
        None => decoded.batches.clone(),
        Some((batch, offset, length)) => vec![decoded
            .batch(batch, offset, length)
            .map_err(|e| failed(entry, e.code, e.message))?],
    };
    let reader = RecordBatchIterator::new(batches.into_iter().map(Ok), Arc::clone(&decoded.schema));
    let ffi = arrow_array::ffi_stream::FFI_ArrowArrayStream::new(Box::new(reader));
    Ok(crate::abi::arrow_rs::stream_from_arrow_rs(ffi))
}

/// The violations that keep the harness from reading what was handed
/// back: those of MUST rules, and those arrow-rs cannot read past. What the library's exporter does short of
/// them (an unaligned buffer it imported and passed on) is not the consume
/// call's verdict, and the harness's importer copes with it.
fn blocking(mut v: Vec<crate::inspect::Violation>) -> Vec<crate::inspect::Violation> {
    v.retain(|v| {
        crate::rules::is_must(v.rule) || crate::inspect::UNREADABLE_BY_ARROW_RS.contains(&v.rule)
    });
    v
}

/// How every failure of [`read_back`] begins.
const READ_BACK: &str = "what the consumer read, handed back as a stream,";

/// Whether `e` is [`read_back`] finding an invalid schema or chunk: the
/// consumer took the data, said it succeeded, and handed back broken
/// data. That is never a refusal of the data (a permission used). A
/// handed-back stream whose get_schema or get_next fails can be one (a
/// lazy reader refuses there), and is not this.
pub fn read_back_broken(e: &CallError) -> bool {
    matches!(e, CallError::Failed { message: Some(m), .. }
        if m.strip_prefix(READ_BACK).is_some_and(|w| w.starts_with(" has an invalid ")))
}

/// Reads a stream a consumer handed back (what it read), validating the
/// schema and every chunk before importing it, and releases it. Returns
/// the IPC bytes of what it held. A stream that is not valid is the
/// library's failure, not a refusal of the data (ENOTRECOVERABLE).
pub fn read_back(entry: &'static str, stream: &mut ArrowArrayStream) -> Result<Vec<u8>, CallError> {
    let broken = |what: String| failed(entry, libc::ENOTRECOVERABLE, format!("{READ_BACK} {what}"));
    if stream.release.is_none() {
        return Err(broken("is a released stream".into()));
    }
    let mut stream = crate::abi::ops::Guard::new(crate::abi::ops::take(stream));
    let mut schema = crate::abi::ops::Guard::<ArrowSchema>::zeroed();
    match stream.get_schema(&mut schema) {
        Call::Returned(0) => {}
        Call::Returned(rc) => return Err(broken(format!("fails get_schema with {rc}"))),
        Call::NotSet => return Err(broken("has no get_schema".into())),
    }
    let problems = blocking(probe::check_schema(&schema));
    if let Some(v) = problems.first() {
        return Err(broken(format!(
            "has an invalid schema ({} at {}: {})",
            v.rule, v.at, v.message
        )));
    }
    // SAFETY: the schema is live and passed validation.
    let imported =
        unsafe { crate::abi::arrow_rs::import_schema(crate::abi::ops::take(&mut *schema)) }
            .map_err(|e| broken(format!("has a schema the harness cannot read: {e}")))?;
    let imported = Arc::new(imported);
    let mut batches = Vec::new();
    loop {
        let mut chunk = crate::abi::ops::Guard::<ArrowArray>::zeroed();
        match stream.get_next(&mut chunk) {
            Call::Returned(0) => {}
            Call::Returned(rc) => return Err(broken(format!("fails get_next with {rc}"))),
            Call::NotSet => return Err(broken("has no get_next".into())),
        }
        if chunk.release.is_none() {
            break;
        }
        let schema = crate::abi::arrow_rs::export_schema(&imported)
            .map_err(|e| broken(format!("has a schema the harness cannot export again: {e}")))?;
        let schema = crate::abi::ops::Guard::new(schema);
        let problems = blocking(probe::check_array(&schema, &chunk));
        if let Some(v) = problems.first() {
            return Err(broken(format!(
                "has an invalid chunk {} ({} at {}: {})",
                batches.len(),
                v.rule,
                v.at,
                v.message
            )));
        }
        let (mut schema, mut chunk) = (schema, chunk);
        // SAFETY: both are live and the chunk passed validation against
        // the schema.
        let batch = unsafe {
            crate::abi::arrow_rs::import_batch(
                crate::abi::ops::take(&mut *schema),
                crate::abi::ops::take(&mut *chunk),
            )
        }
        .map_err(|e| broken(format!("has a chunk the harness cannot read: {e}")))?;
        batches.push(batch);
    }
    crate::sdk::ipc::encode(&imported, &batches)
        .map_err(|e| broken(format!("cannot be written as IPC: {}", e.message)))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_broken_read_back_is_told_from_a_caught_panic() {
        use crate::abi::Plain;
        let mut released = crate::abi::ArrowArrayStream::zeroed();
        let e = super::read_back("consume", &mut released).unwrap_err();
        // A released stream, a failing get_next: not this.
        assert!(!super::read_back_broken(&e), "{e}");
        let invalid = super::failed(
            "consume",
            libc::ENOTRECOVERABLE,
            format!(
                "{} has an invalid chunk 0 (array.utf8.valid ...)",
                super::READ_BACK
            ),
        );
        assert!(super::read_back_broken(&invalid));
        let panic = super::failed("consume", libc::ENOTRECOVERABLE, "panicked".into());
        assert!(!super::read_back_broken(&panic));
    }

    use super::*;

    #[test]
    fn every_builtin_scenario_exported_as_a_stream_reads_back_unchanged() {
        for s in crate::scenario::builtin() {
            let mut stream = scenario("test", &s.ipc, None).expect("exports");
            let back = read_back("test", &mut stream).expect("reads back");
            assert!(stream.release.is_none(), "read_back takes the stream");
            let decoded = crate::sdk::ipc::decode(&back).expect("decodes");
            assert!(
                crate::compare::batches(&s.batches, &decoded.batches).is_empty(),
                "{}",
                s.name
            );
        }
    }

    #[test]
    fn a_picked_slice_is_the_one_batch_of_the_stream() {
        let s = crate::scenario::builtin()
            .into_iter()
            .find(|s| s.name == "primitive")
            .expect("built in");
        let mut stream = scenario("test", &s.ipc, Some((0, 3, 5))).expect("exports");
        let back = read_back("test", &mut stream).expect("reads back");
        let decoded = crate::sdk::ipc::decode(&back).expect("decodes");
        assert_eq!(decoded.batches.len(), 1);
        assert!(crate::compare::batches(&[s.batches[0].slice(3, 5)], &decoded.batches).is_empty());
        let Err(err) = scenario("test", &s.ipc, Some((99, 0, -1))) else {
            panic!("batch 99 does not exist");
        };
        assert_eq!(err.code(), Some(libc::EINVAL), "{err}");
    }

    #[test]
    fn a_stream_with_an_invalid_chunk_is_the_librarys_failure() {
        // A released stream handed back: not a refusal (ENOTRECOVERABLE).
        let mut released = <ArrowArrayStream as crate::abi::Plain>::zeroed();
        let err = read_back("test", &mut released).unwrap_err();
        assert_eq!(err.code(), Some(libc::ENOTRECOVERABLE), "{err}");
        assert!(matches!(err.refusal(), super::super::Refusal::Error(_)));
    }
}

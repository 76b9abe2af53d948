//! Scenarios: named data (a schema and record batches) handed to producers
//! as Arrow IPC stream bytes. Built-in ones need no files; gold ones are
//! Arrow's integration files (`shared/gold/`), real data no one on this
//! project wrote.

#![forbid(unsafe_code)]

mod builtin;

use std::path::{Path, PathBuf};

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;

use crate::sdk::ipc;

/// One scenario: the IPC bytes a producer is given and what they decode to.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Stable name used in case IDs (`primitive`, `gold/generated_map`, ...).
    pub name: String,
    /// The batches as an Arrow IPC stream (what producer plugins are
    /// given); empty for data built without it (`generate::data`).
    pub ipc: Vec<u8>,
    pub schema: SchemaRef,
    pub batches: Vec<RecordBatch>,
    /// The zero-copy slice (offset, length) asked for per batch; `None`:
    /// the default one (`roundtrip::slice_of`). Generated scenarios pick
    /// their own, so every offset gets exercised.
    pub slices: Option<Vec<(usize, usize)>>,
}

impl Scenario {
    /// Builds a scenario from data, encoding it as IPC.
    pub fn from_batches(
        name: &str,
        schema: SchemaRef,
        batches: Vec<RecordBatch>,
    ) -> Result<Scenario, String> {
        let bytes = ipc::encode(&schema, &batches).map_err(|e| format!("{name}: {}", e.message))?;
        Ok(Scenario {
            name: name.to_string(),
            ipc: bytes,
            schema,
            batches,
            slices: None,
        })
    }

    /// Builds a scenario from IPC stream bytes, kept as they are.
    pub fn from_ipc(name: &str, bytes: Vec<u8>) -> Result<Scenario, String> {
        let decoded = ipc::decode(&bytes).map_err(|e| format!("{name}: {}", e.message))?;
        Ok(Scenario {
            name: name.to_string(),
            ipc: bytes,
            schema: decoded.schema,
            batches: decoded.batches,
            slices: None,
        })
    }
}

/// The built-in scenarios: every layout family the C data interface carries.
pub fn builtin() -> Vec<Scenario> {
    builtin::all()
}

/// Every `*.stream` file in `dir`, sorted by name, as `gold/<stem>`.
pub fn gold_dir(dir: &Path) -> Result<Vec<Scenario>, String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "stream"))
        .collect();
    paths.sort();
    if paths.is_empty() {
        return Err(format!(
            "{}: no Arrow IPC stream files (*.stream) found",
            dir.display()
        ));
    }
    paths
        .iter()
        .map(|p| {
            let stem = p.file_stem().unwrap_or_default().to_string_lossy();
            let bytes = std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()))?;
            Scenario::from_ipc(&format!("gold/{stem}"), bytes)
        })
        .collect()
}

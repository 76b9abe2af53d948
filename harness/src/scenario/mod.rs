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
    /// given); empty for data built without it (`gen::data`).
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

/// Where a run's scenarios come from. Workers rebuild the same list from
/// `to_args`, so plan indexes agree across processes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sources {
    /// The built-in scenarios.
    pub builtin: bool,
    /// Every `*.stream` file of this directory, as `gold/<stem>`.
    pub gold: Option<PathBuf>,
    /// Generated scenarios `gen/0` .. `gen/<generated-1>`.
    pub generated: u64,
    /// The seed generated scenarios are drawn with.
    pub seed: u64,
    /// Only these scenarios, by name (a replay, a shrink candidate), in
    /// this order; `gen/...` names are rebuilt from `seed`, `gold/...`
    /// names need `gold`.
    pub only: Option<Vec<String>>,
}

impl Sources {
    /// The built-in scenarios, or (given a directory) the gold files alone.
    pub fn builtin_or_gold(gold: Option<PathBuf>) -> Sources {
        Sources {
            builtin: gold.is_none(),
            gold,
            ..Default::default()
        }
    }

    /// Loads the scenarios, in a stable order: built-in, gold, generated.
    pub fn load(&self) -> Result<Vec<Scenario>, String> {
        if let Some(names) = &self.only {
            let gold = match &self.gold {
                Some(dir) if names.iter().any(|n| n.starts_with("gold/")) => gold_dir(dir)?,
                _ => Vec::new(),
            };
            return names
                .iter()
                .map(|n| {
                    if n.starts_with(crate::gen::PREFIX) {
                        return crate::gen::scenario(self.seed, n);
                    }
                    let pool: Box<dyn Iterator<Item = Scenario>> = if n.starts_with("gold/") {
                        if self.gold.is_none() {
                            return Err(format!("{n}: a gold scenario needs --gold DIR"));
                        }
                        Box::new(gold.iter().cloned())
                    } else {
                        Box::new(builtin().into_iter())
                    };
                    let mut pool = pool;
                    pool.find(|s| &s.name == n)
                        .ok_or_else(|| format!("{n}: no such scenario"))
                })
                .collect();
        }
        let mut out = Vec::new();
        if self.builtin {
            out.extend(builtin());
        }
        if let Some(dir) = &self.gold {
            out.extend(gold_dir(dir)?);
        }
        if self.generated > 0 {
            out.extend(crate::gen::scenarios(self.seed, self.generated)?);
        }
        Ok(out)
    }

    /// For reports and headers: `built-in + 100 generated (seed 7) + DIR`.
    pub fn describe(&self) -> String {
        if let Some(names) = &self.only {
            return names.join(", ");
        }
        let mut parts = Vec::new();
        if self.builtin {
            parts.push("built-in".to_string());
        }
        if let Some(dir) = &self.gold {
            parts.push(dir.display().to_string());
        }
        if self.generated > 0 {
            parts.push(format!("{} generated (seed {})", self.generated, self.seed));
        }
        parts.join(" + ")
    }

    /// Worker command-line arguments that rebuild these sources.
    pub fn to_args(&self) -> Vec<String> {
        let mut args = Vec::new();
        if !self.builtin {
            args.push("--no-builtin".to_string());
        }
        if let Some(dir) = &self.gold {
            args.push("--gold".into());
            args.push(
                std::fs::canonicalize(dir)
                    .unwrap_or_else(|_| dir.clone())
                    .display()
                    .to_string(),
            );
        }
        args.extend(["--seed".to_string(), self.seed.to_string()]);
        args.extend(["--generated".to_string(), self.generated.to_string()]);
        for n in self.only.iter().flatten() {
            args.push("--scenario".into());
            args.push(n.clone());
        }
        args
    }
}

//! Where a run's scenarios come from: the built-in ones, Arrow's gold
//! files, generated ones, or a list of names. Above both `scenario` (the
//! data and its fixed sources) and `generate` (the generator), which it
//! chooses between, so that neither depends on the other's way back.

#![forbid(unsafe_code)]

use std::path::PathBuf;

use crate::scenario::Scenario;

/// Where a run's scenarios come from. Workers rebuild the same list from
/// `to_args`, so plan indexes agree across processes.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Sources {
    /// The built-in scenarios.
    pub builtin: bool,
    /// Every `*.stream` file of this directory, as `gold/<stem>`.
    pub gold: Option<PathBuf>,
    /// Generated scenarios `gen/0` .. `gen/<generated-1>`.
    pub generated: u64,
    /// With generated scenarios, also one single-type scenario per type
    /// family the generator knows (`gen/type:<family>`): a library that
    /// refuses one column of a mixed scenario refuses the whole scenario,
    /// so the types it does take need scenarios of their own; and the
    /// data shapes draws do not make (`gen/shape:<name>`).
    #[serde(default)]
    pub single_types: bool,
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
                Some(dir) if names.iter().any(|n| n.starts_with("gold/")) => {
                    crate::scenario::gold_dir(dir)?
                }
                _ => Vec::new(),
            };
            return names
                .iter()
                .map(|n| {
                    if n.starts_with(crate::generate::PREFIX) {
                        return crate::generate::scenario(self.seed, n);
                    }
                    let pool: Box<dyn Iterator<Item = Scenario>> = if n.starts_with("gold/") {
                        if self.gold.is_none() {
                            return Err(format!("{n}: a gold scenario needs --gold DIR"));
                        }
                        Box::new(gold.iter().cloned())
                    } else {
                        Box::new(crate::scenario::builtin().into_iter())
                    };
                    let mut pool = pool;
                    pool.find(|s| &s.name == n)
                        .ok_or_else(|| format!("{n}: no such scenario"))
                })
                .collect();
        }
        let mut out = Vec::new();
        if self.builtin {
            out.extend(crate::scenario::builtin());
        }
        if let Some(dir) = &self.gold {
            out.extend(crate::scenario::gold_dir(dir)?);
        }
        if self.generated > 0 {
            out.extend(crate::generate::scenarios(self.seed, self.generated)?);
        }
        if self.single_types {
            out.extend(crate::generate::type_scenarios(self.seed)?);
            out.extend(crate::generate::shapes::scenarios(self.seed)?);
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
        if self.single_types {
            parts.push(format!(
                "{} single-type and {} shapes (seed {})",
                crate::generate::types::family_names().len(),
                crate::generate::shapes::NAMES.len(),
                self.seed
            ));
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
        if self.single_types {
            args.push("--single-types".into());
        }
        for n in self.only.iter().flatten() {
            args.push("--scenario".into());
            args.push(n.clone());
        }
        args
    }
}

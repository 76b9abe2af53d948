//! `arrowcert coverage REPORT`: what a certify report reached, per type
//! family and path. A report written before reports carried `coverage`
//! has it computed from its cases, over its scenarios rebuilt by name
//! (built-in ones, `gen/...` from the report's seed, `gold/...` from
//! `--gold DIR` or the report's own `--gold`); `--recompute` does so for
//! any report.

use std::path::PathBuf;

use super::BadInput;
use crate::sources::Sources;

/// The flags of `arrowcert coverage`.
#[derive(clap::Args)]
pub struct CoverageFlags {
    /// A certify report (JSON).
    pub report: PathBuf,
    /// The gold files' directory, when the report's cases name gold
    /// scenarios and its own `--gold` is not where it was.
    #[arg(long)]
    pub gold: Option<PathBuf>,
    /// Print the table as JSON (one row per family, path and factor).
    #[arg(long)]
    pub json: bool,
    /// Compute the table from the report's cases even when it carries
    /// one (a report an older arrowcert wrote has older statuses).
    #[arg(long)]
    pub recompute: bool,
}

/// `arrowcert coverage`, from its flags.
pub fn coverage_command(f: CoverageFlags) -> Result<i32, BadInput> {
    let report = crate::report::read(&f.report).map_err(BadInput)?;
    let rows = if report.coverage.is_empty() || f.recompute {
        let mut names: Vec<String> = Vec::new();
        for c in &report.cases {
            // Column subsets are found through their parents.
            let name = crate::generate::parse_column_name(&c.scenario)
                .map(|(p, _)| p.to_string())
                .unwrap_or_else(|| c.scenario.clone());
            if !names.contains(&name) {
                names.push(name);
            }
        }
        let gold = f.gold.clone().or_else(|| {
            let inv = &report.invocation;
            inv.iter()
                .position(|a| a == "--gold")
                .and_then(|i| inv.get(i + 1))
                .map(PathBuf::from)
        });
        let sources = Sources {
            builtin: false,
            gold,
            generated: 0,
            single_types: false,
            seed: report.seed.unwrap_or(0),
            only: Some(names),
        };
        let scenarios = sources.load().map_err(|e| {
            BadInput(format!(
                "{}: cannot rebuild its scenarios: {e}",
                f.report.display()
            ))
        })?;
        crate::engine::coverage::of(&report.cases, &scenarios)
    } else {
        report.coverage.clone()
    };
    if f.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&rows).map_err(|e| BadInput(e.to_string()))?
        );
    } else {
        print!("{}", crate::engine::coverage::render(&rows));
    }
    Ok(0)
}

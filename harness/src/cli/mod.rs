//! The `arrowcert` command line. Each subcommand lives in its own module;
//! `main.rs` only parses and dispatches.

#![forbid(unsafe_code)]

pub mod abi_check;
pub mod cai;
pub mod certify;
pub mod coverage;
pub mod dlpack;
pub mod fuzz;
pub mod inspect;
pub mod matrix;
pub mod progress;
pub mod roundtrip;
pub mod rules;
pub mod summary;
pub mod words;
pub mod worker;

use std::path::PathBuf;

/// Exit code for bad input (a path that is not a plugin, a wrong ABI
/// version, an unreadable data directory, a usage error).
pub const EXIT_BAD_INPUT: i32 = crate::report::outcome::EXIT_BAD_INPUT;
/// Exit code when a run found failures.
pub const EXIT_FAILURES: i32 = 1;

/// An error the user must fix; printed as one line.
#[derive(Debug)]
pub struct BadInput(pub String);

impl From<String> for BadInput {
    fn from(why: String) -> Self {
        BadInput(why)
    }
}

impl std::fmt::Display for BadInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Case filters, as `certify` and `roundtrip` take them.
#[derive(clap::Args)]
pub struct FilterFlags {
    /// Run only cases whose ID contains one of these.
    pub filters: Vec<String>,
    /// Filters match whole case IDs.
    #[arg(long)]
    pub exact: bool,
    /// Skip cases whose ID contains this (repeatable).
    #[arg(long)]
    pub skip: Vec<String>,
}

impl FilterFlags {
    pub fn filter(self) -> crate::roundtrip::Filter {
        crate::roundtrip::Filter {
            patterns: self.filters,
            exact: self.exact,
            skip: self.skip,
        }
    }
}

/// The seed of generated scenarios: `--seed` when given, else the one the
/// report being resumed was drawn with (a run that drew its own seed is
/// resumed with the same data), else a fresh one.
pub fn seed_for(seed: Option<u64>, resume: Option<&std::path::Path>) -> Result<u64, BadInput> {
    Ok(match (seed, resume) {
        (Some(s), _) => s,
        (None, Some(r)) => crate::report::read(r).map_err(BadInput)?.seed.unwrap_or(0),
        (None, None) => crate::generate::fresh_seed(),
    })
}

/// Worker processes for `--jobs` / `--in-process`: 0 (this process) with
/// `--in-process`, else as asked, else one per core.
pub fn worker_count(jobs: Option<usize>, in_process: bool) -> usize {
    if in_process {
        0
    } else {
        jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
    }
}

/// `--expectations FILE`, read.
pub fn read_expectations(
    path: Option<PathBuf>,
) -> Result<Option<(PathBuf, crate::report::expectations::Expectations)>, BadInput> {
    path.map(|p| crate::report::expectations::Expectations::read(&p).map(|e| (p, e)))
        .transpose()
        .map_err(BadInput)
}

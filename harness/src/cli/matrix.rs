//! `arrowcert matrix` and `arrowcert merge`: the flags, and what a matrix
//! run prints; the units run in [`crate::engine::matrix`].
//!
//! A `--shard I/N` run writes `matrix-shard-I-of-N.json` only, and
//! `arrowcert merge` combines shard files into the three outputs.

#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};

use crate::engine::matrix::{self as engine, Request};
use crate::matrix::{self, Matrix, Planned, Shard, Status};
use crate::report::{self, Summary};
use crate::run;

use super::{BadInput, EXIT_FAILURES};

pub use crate::engine::matrix::default_libraries;

fn summary_words(s: &Summary) -> String {
    format!(
        "{} cases: {} passed, {} failed, {} errors, {} skipped{}",
        s.total,
        s.passed,
        s.failed,
        s.errors,
        s.skipped,
        if s.crashed + s.timed_out > 0 {
            format!(", {} crashed, {} hung", s.crashed, s.timed_out)
        } else {
            String::new()
        }
    )
}

fn print_table(m: &Matrix) {
    for u in &m.units {
        println!(
            "  {:<60} {:<8} {}",
            u.id,
            u.status.word(),
            u.message
                .as_deref()
                .map(report::printable)
                .unwrap_or_default()
        );
    }
}

/// Runs the matrix (`list`: prints the plan instead).
pub fn run(args: Request, list: bool) -> Result<i32, BadInput> {
    if args.producers.is_empty() && args.consumers.is_empty() {
        return Err(BadInput(
            "no libraries: name --producers and/or --consumers (or build the bundled ones)".into(),
        ));
    }
    let plan = matrix::plan(&args.producers, &args.consumers);
    let shard = args.shard.unwrap_or(Shard { index: 1, count: 1 });
    let mine: Vec<&Planned> = plan
        .iter()
        .enumerate()
        .filter(|(i, _)| shard.owns(*i))
        .map(|(_, u)| u)
        .collect();
    if list {
        for u in &mine {
            println!("{}", u.id);
        }
        return Ok(0);
    }
    let exe = std::env::current_exe()
        .map_err(|e| BadInput(format!("cannot find the arrowcert executable: {e}")))?;
    std::fs::create_dir_all(args.out.join("runs"))
        .map_err(|e| BadInput(format!("{}: {e}", args.out.display())))?;
    println!(
        "arrowcert matrix: {} producers x {} consumers, {} of {} units (shard {shard}), into {}",
        args.producers.len(),
        args.consumers.len(),
        mine.len(),
        plan.len(),
        args.out.display()
    );
    let on_unit = |n: usize, of: usize, unit: &matrix::Unit| {
        println!(
            "[{n}/{of}] {} ... {} ({}, {:.1} s){}",
            unit.id,
            unit.status.word(),
            summary_words(&unit.summary),
            unit.duration_ms as f64 / 1000.0,
            unit.message
                .as_deref()
                .map(|m| format!("\n      {}", report::printable(m)))
                .unwrap_or_default()
        );
    };
    let m = match engine::run_units(&exe, &args, &plan, &mine, shard, &on_unit) {
        Ok(m) => m,
        Err((sig, ran)) => {
            println!(
                "interrupted by {}: {ran} of {} units ran (the last ones stopped part way: their reports in {} are marked incomplete); no matrix was written",
                run::proc::signal_name(sig),
                mine.len(),
                args.out.join("runs").display()
            );
            return Ok(128 + sig);
        }
    };
    let errors = m.units.iter().any(|u| u.status == Status::Error);
    // With expectations, the matrix fails when a unit's results are not
    // the ones its library's file declares.
    let unexpected = m.unexpected_units();
    for u in &unexpected {
        println!(
            "UNEXPECTED in {} ({}): {}",
            u.id,
            u.expectations.as_deref().unwrap_or(""),
            u.unexpected
                .iter()
                .take(5)
                .cloned()
                .collect::<Vec<_>>()
                .join("; ")
        );
    }
    let errors = errors || !unexpected.is_empty();
    if shard.count > 1 {
        let path = args.out.join(format!(
            "matrix-shard-{}-of-{}.json",
            shard.index, shard.count
        ));
        let json = serde_json::to_string_pretty(&m).expect("matrix serialises") + "\n";
        report::write_atomic(&path, &json)
            .map_err(|e| BadInput(format!("{}: cannot write: {e}", path.display())))?;
        println!(
            "shard {shard} written: {} (combine the shards with `arrowcert merge`)",
            path.display()
        );
    } else {
        let files = engine::write_outputs(&m, &args.out).map_err(BadInput)?;
        println!("summary:");
        print_table(&m);
        for f in files {
            println!("wrote {}", f.display());
        }
    }
    println!("took {:.1} s", m.duration_ms as f64 / 1000.0);
    Ok(if errors { EXIT_FAILURES } else { 0 })
}

/// `arrowcert merge`: shard files (or directories holding them) into one
/// matrix in `out`.
pub fn merge(inputs: &[PathBuf], out: &Path) -> Result<i32, BadInput> {
    let (merged, files, written) = engine::merge(inputs, out).map_err(BadInput)?;
    println!(
        "merged {} files ({} shards): {} of {} units",
        files.len(),
        merged.shards.len(),
        merged.units.len(),
        merged.plan.len()
    );
    print_table(&merged);
    for f in written {
        println!("wrote {}", f.display());
    }
    let missing = matrix::missing(&merged);
    if !missing.is_empty() {
        println!(
            "INCOMPLETE: {} units missing (their shards were not given): {}",
            missing.len(),
            missing.join(", ")
        );
        // An incomplete matrix certifies nothing about what is missing:
        // the same outcome as any incomplete run (report::outcome).
        return Ok(crate::report::outcome::EXIT_NOT_CERTIFIED);
    }
    Ok(0)
}

/// The flags of `arrowcert matrix` (their help is the command's).
#[derive(clap::Args)]
pub struct MatrixFlags {
    /// Producers (bundled names or paths, comma-separated or repeated).
    /// Default: every bundled library that is built.
    #[arg(long, value_delimiter = ',')]
    pub producers: Vec<String>,
    /// Consumers, likewise.
    #[arg(long, value_delimiter = ',')]
    pub consumers: Vec<String>,
    /// Also run over these Arrow IPC stream files (certification adds
    /// them to the built-in scenarios; pairs use them instead).
    #[arg(long)]
    pub gold: Option<PathBuf>,
    /// Generated scenarios per unit.
    #[arg(long, default_value_t = 100)]
    pub cases: u64,
    /// The seed of generated scenarios (default: a fresh one). Shards
    /// of one matrix must share it.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Output directory.
    #[arg(long, default_value = "reports")]
    pub out: PathBuf,
    /// Run only shard I of N of the units (round robin); writes
    /// matrix-shard-I-of-N.json for `arrowcert merge`.
    #[arg(long)]
    pub shard: Option<String>,
    /// Worker processes per unit (default: one per core).
    #[arg(long, short = 'j')]
    pub jobs: Option<usize>,
    /// Units run at once, each its own child process (a unit's own
    /// orchestrator and its workers' start-ups leave cores idle that a
    /// second unit fills; `just matrix` runs 3, with `--jobs 1`).
    #[arg(long, default_value_t = 1)]
    pub units_at_once: usize,
    /// A case with no result after this long is a timeout.
    #[arg(long, default_value_t = 60_000)]
    pub case_timeout_ms: u64,
    /// Candidates tried when shrinking a certification failure. The
    /// matrix's verdicts do not depend on it; a smaller case than it finds
    /// is `certify`'s job (1000 by default). Each candidate is a run of its
    /// own, and one that crashes costs a fresh worker: 200 made shrinking
    /// a sixth of the full matrix's time (2,785 candidates).
    #[arg(long, default_value_t = 50)]
    pub shrink_candidates: u64,
    /// Certification units run every case that did not pass N more
    /// times, in fresh workers (`certify --repeat`): a verdict that
    /// changes is reported flaky, in the unit and the matrix.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub repeat: u32,
    /// Print the units this run (or shard) would run, and exit.
    #[arg(long)]
    pub list: bool,
    /// Every unit runs only the cases whose ID contains this (repeatable):
    /// a smoke matrix over part of each plan (CI's), checked against the
    /// same expectations (a rule expected to fail that passes over the
    /// part is not an unexpected pass; cases are held as ever).
    #[arg(long = "filter", value_name = "SUBSTR")]
    pub filters: Vec<String>,
    /// A directory of expectations files: certifying library L runs
    /// with DIR/L.json, the pair P -> C with DIR/pair-P-C.json, where
    /// they exist; a unit whose results are not as expected fails the
    /// matrix (exit 1).
    #[arg(long, value_name = "DIR")]
    pub expectations: Option<PathBuf>,
    /// Consumer certifications also run `certify --malformed` (robustness
    /// beyond the spec, docs/MALFORMED.md): each consumer's grade is a
    /// section of its own in matrix.md/.html/.json, never a cell's status.
    #[arg(long)]
    pub malformed: bool,
}

/// `arrowcert matrix`, from its flags.
pub fn matrix_command(f: MatrixFlags) -> Result<i32, BadInput> {
    let MatrixFlags {
        producers,
        consumers,
        gold,
        cases,
        seed,
        out,
        shard,
        jobs,
        units_at_once,
        case_timeout_ms,
        shrink_candidates,
        repeat,
        list,
        filters,
        expectations,
        malformed,
    } = f;
    let defaulted = producers.is_empty() && consumers.is_empty();
    let (producers, consumers) = if defaulted {
        let (p, p_absent) = default_libraries("producer");
        let (c, c_absent) = default_libraries("consumer");
        let mut absent = p_absent;
        for a in c_absent {
            if !absent.contains(&a) {
                absent.push(a);
            }
        }
        if !absent.is_empty() {
            println!("not built, left out: {}", absent.join(", "));
        }
        (p, c)
    } else {
        (producers, consumers)
    };
    let shard = shard
        .map(|s| crate::matrix::Shard::parse(&s))
        .transpose()
        .map_err(BadInput)?;
    if shard.is_some_and(|s| s.count > 1) && seed.is_none() && cases > 0 {
        return Err(BadInput(
            "--shard with generated cases needs --seed (every shard must draw the same scenarios)"
                .into(),
        ));
    }
    run(
        Request {
            producers,
            consumers,
            gold,
            cases,
            seed: seed.unwrap_or_else(crate::generate::fresh_seed),
            out,
            shard,
            jobs,
            case_timeout_ms,
            shrink_candidates,
            repeat,
            units_at_once,
            filters,
            expectations,
            malformed,
        },
        list,
    )
}

/// The flags of `arrowcert merge` (their help is the command's).
#[derive(clap::Args)]
pub struct MergeFlags {
    /// Shard files or directories.
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
    /// Output directory.
    #[arg(long, default_value = "reports")]
    pub out: PathBuf,
}

/// `arrowcert merge`, from its flags.
pub fn merge_command(f: MergeFlags) -> Result<i32, BadInput> {
    let MergeFlags { inputs, out } = f;
    merge(&inputs, &out)
}

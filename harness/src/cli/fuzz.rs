//! `arrowcert replay --fuzz TARGET ARTIFACT...`, `arrowcert fuzz-report`
//! and `arrowcert fuzz-corpus`: the flags, and what they print; the work
//! is [`crate::engine::fuzz`]'s.

use std::path::{Path, PathBuf};

use super::{BadInput, EXIT_FAILURES};
use crate::engine::fuzz as engine;
use crate::fuzz::{self, Target};

/// `arrowcert replay --fuzz TARGET ARTIFACT...`: replays saved inputs in
/// this process and prints every violation.
pub fn replay(
    target: &str,
    artifacts: &[String],
    producer: Option<String>,
    consumer: Option<String>,
    report_path: Option<PathBuf>,
) -> Result<i32, BadInput> {
    let target = Target::parse(target).ok_or_else(|| {
        BadInput(format!(
            "--fuzz {target}: not a fuzz target (validate, consumer, producer, async)"
        ))
    })?;
    let (_, findings) = engine::replay(
        target,
        artifacts,
        producer,
        consumer,
        report_path,
        &mut |line| println!("{line}"),
    )
    .map_err(BadInput)?;
    Ok(if findings > 0 { EXIT_FAILURES } else { 0 })
}

/// `arrowcert fuzz-report --runs DIR --out FILE`.
pub fn report(runs: &Path, out_path: &Path) -> Result<i32, BadInput> {
    let out = engine::report(runs, out_path).map_err(BadInput)?;
    println!(
        "{:<10} {:<60} {:>8} {:>12} {:>10} findings",
        "target", "plugin", "seconds", "execs", "execs/s"
    );
    for r in &out.fuzz {
        println!(
            "{:<10} {:<60} {:>8.0} {:>12} {:>10.1} {}",
            r.target,
            short(&r.plugin),
            r.seconds,
            r.executions,
            r.executions_per_second,
            r.findings
        );
    }
    for c in out.cases.iter().filter(|c| fuzz::is_finding(c)) {
        println!(
            "FINDING {} ({}): {}",
            c.id,
            c.verdict.as_str(),
            c.message.as_deref().unwrap_or("")
        );
        println!("  replay: {}", c.replay);
    }
    println!("report: {}", out_path.display());
    let bad =
        out.cases.iter().any(fuzz::is_finding) || out.fuzz.iter().any(|r| r.outcome != "clean");
    Ok(if bad { EXIT_FAILURES } else { 0 })
}

fn short(p: &str) -> String {
    p.split(" + ")
        .map(|s| {
            Path::new(s)
                .file_name()
                .map_or(s.to_string(), |n| n.to_string_lossy().into_owned())
        })
        .collect::<Vec<_>>()
        .join(" + ")
}

/// `arrowcert fuzz-corpus`: seed inputs into `out/<target>/`.
pub fn corpus(out: &Path, gold: Option<&Path>, generated: u64) -> Result<i32, BadInput> {
    let seeds = engine::corpus(out, gold, generated).map_err(BadInput)?;
    println!("{seeds} seed inputs under {}", out.display());
    Ok(0)
}

/// The flags of `arrowcert fuzz-corpus` (their help is the command's).
#[derive(clap::Args)]
pub struct FuzzCorpusFlags {
    #[arg(long, default_value = "fuzz/corpus")]
    pub out: PathBuf,
    /// A directory of Arrow IPC gold streams to seed from.
    #[arg(long)]
    pub gold: Option<PathBuf>,
    /// Generated scenarios to seed from.
    #[arg(long, default_value_t = 16)]
    pub generated: u64,
}

/// `arrowcert fuzz-corpus`, from its flags.
pub fn fuzz_corpus_command(f: FuzzCorpusFlags) -> Result<i32, BadInput> {
    let FuzzCorpusFlags {
        out,
        gold,
        generated,
    } = f;
    corpus(&out, gold.as_deref(), generated)
}

/// The flags of `arrowcert fuzz-report` (their help is the command's).
#[derive(clap::Args)]
pub struct FuzzReportFlags {
    /// The directory of runs: one folder per target and plugin, each
    /// with a run.json and a findings/ folder.
    #[arg(long)]
    pub runs: PathBuf,
    /// Where the JSON report goes.
    #[arg(long)]
    pub out: PathBuf,
}

/// `arrowcert fuzz-report`, from its flags.
pub fn fuzz_report_command(f: FuzzReportFlags) -> Result<i32, BadInput> {
    let FuzzReportFlags { runs, out } = f;
    report(&runs, &out)
}

//! The `arrowcert` binary: parses the command line and dispatches to
//! `arrowcert::cli`. Bad input is one line on stderr and exit code 2.

#![forbid(unsafe_code)]

use std::process::ExitCode;

use arrowcert::cli::{self, BadInput, EXIT_BAD_INPUT};
use clap::{CommandFactory, FromArgMatches, Subcommand};

#[derive(clap::Parser)]
#[command(
    name = "arrowcert",
    version,
    about = "Conformance testing for the Apache Arrow C data, stream, device and async interfaces",
    after_help = "Exit codes (certify, replay, roundtrip, matrix, merge):\n  0  pass: every MUST rule exercised held and every exported path ran data to a verdict\n  1  fail: a MUST rule failed, a case crashed or hung, or a call errored (not a declared limitation)\n  2  bad input: not a plugin, missing symbols, a wrong ABI version, a usage error\n  3  not certified: too little exercised (no case selected, every call errored or was declined, the device asked for is missing, an incomplete run or matrix)\n  4  harness error: arrowcert's own code failed; please report it\n  128+N  interrupted by signal N (the report is marked incomplete; resume with --resume)"
)]
struct Cli {
    /// The Python interpreter `py:` adapters run in (its environment's
    /// packages are the ones certified); default: `ARROWCERT_PYTHON` (the
    /// Python wheel's `arrowcert` command sets it to its environment's
    /// interpreter), else in a source checkout the one `just real`
    /// installs (target/real/venv/bin/python), else `python3` on PATH.
    #[arg(long, global = true, value_name = "PATH")]
    python: Option<std::path::PathBuf>,
    /// An option set on every ADBC database an `adbc:` plugin opens
    /// (`uri=postgresql://...`, repeatable).
    #[arg(long = "adbc-option", global = true, value_name = "KEY=VALUE", value_parser = arrowcert::plugin::adbc::parse_option)]
    adbc_options: Vec<(String, String)>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Show a plugin's name, ABI version, entry points and devices.
    Inspect(cli::inspect::InspectFlags),
    /// Send every scenario from a producer through the harness into a
    /// consumer on every interface path, and compare what was read.
    Roundtrip(cli::roundtrip::RoundtripFlags),
    /// Internal: a worker process started by the orchestrator.
    #[command(hide = true)]
    Worker(cli::worker::WorkerFlags),
    /// Print the JSON Schema of reports.
    ReportSchema,
    /// The producer x consumer compatibility matrix: certify every
    /// library on its own, then send the data of every producer through
    /// the harness into every consumer; writes matrix.json, matrix.md and a
    /// self-contained matrix.html (with --shard, a shard file to merge).
    Matrix(cli::matrix::MatrixFlags),
    /// Combine `arrowcert matrix --shard` files (or directories holding
    /// them) into matrix.json, matrix.md and matrix.html.
    Merge(cli::matrix::MergeFlags),
    /// Check a C header's Arrow structs and constants against arrowcert's
    /// (size, alignment and offset of every field), with the C compiler.
    AbiCheck(cli::abi_check::AbiCheckFlags),
    /// Certify a producer, a consumer, or both: judge what a producer
    /// exports and what a consumer does with what the harness exports, rule
    /// by rule (`arrowcert rules`), with evidence and a replay command for
    /// every failure. With neither --producer nor --consumer, the bundled
    /// reference plugins are certified. Ends pass (exit 0: every MUST rule
    /// exercised held, every exported path ran data to a verdict), fail
    /// (1: a MUST rule failed, a crash, a hang, an error), not certified
    /// (3: too little could be exercised) or harness error (4).
    Certify(cli::certify::CertifyFlags),
    /// The DLPack matrix: every library certified through its DLPack
    /// adapter, then every producer's arrays into every consumer
    /// (docs/DLPACK.md); writes dlpack-matrix.{json,md}.
    DlpackMatrix(cli::dlpack::MatrixFlags),
    /// Rerun certification cases exactly (what a certify report's
    /// `replay` commands call): every violation printed in full. Runs in
    /// this process unless -j says otherwise, so a debugger sees the crash.
    Replay(cli::certify::ReplayFlags),
    /// Write seed inputs for the fuzz targets: every built-in scenario,
    /// generated ones and the gold streams, behind a few header choices
    /// each, into OUT/<target>/.
    FuzzCorpus(cli::fuzz::FuzzCorpusFlags),
    /// One report from a nightly fuzzing directory (scripts/fuzz/nightly.sh):
    /// executions per second per target and plugin, and every minimised
    /// finding replayed (in a child process) with its replay commands.
    FuzzReport(cli::fuzz::FuzzReportFlags),
    /// List the rules arrowcert checks (ID, level, side, what it requires).
    Rules(cli::rules::RulesFlags),
    /// Explain a rule: its level, the spec sentence it enforces, and how
    /// arrowcert decides it.
    Explain(cli::rules::ExplainFlags),
    /// What a certify report reached: per type family of the generator
    /// and path, exercised, refused by the library (its words) or not
    /// reached (computed from the cases for reports that predate it).
    Coverage(cli::coverage::CoverageFlags),
    /// A certify report as Markdown, for a CI job summary: the outcome,
    /// the counts, each broken rule with its evidence and replay command,
    /// and the expectations check.
    Summary(cli::summary::SummaryFlags),
}

fn main() -> ExitCode {
    std::panic::set_hook(Box::new(|info| {
        if arrowcert::quiet::panics_expected() {
            return;
        }
        eprintln!("arrowcert: internal error (a bug in arrowcert, please report it): {info}");
    }));
    // `--version` says what a report's `tool` records (`-V`: the version
    // alone); the rule catalogue's version is computed, hence at run time.
    let long_version: &'static str = Box::leak(
        arrowcert::report::Tool::default()
            .version_text()
            .into_boxed_str(),
    );
    let parsed = Cli::command()
        .long_version(long_version)
        .try_get_matches()
        .and_then(|m| Cli::from_arg_matches(&m));
    let cli = match parsed {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() {
                EXIT_BAD_INPUT as u8
            } else {
                0
            });
        }
    };
    match run(cli) {
        Ok(code) => ExitCode::from(code as u8),
        Err(BadInput(msg)) => {
            eprintln!("arrowcert: {msg}");
            ExitCode::from(EXIT_BAD_INPUT as u8)
        }
    }
}

/// Dispatches to the command's module.
fn run(cli: Cli) -> Result<i32, BadInput> {
    if let Some(p) = cli.python {
        arrowcert::plugin::python::set_interpreter(p);
    }
    arrowcert::plugin::adbc::set_options(cli.adbc_options);
    match cli.command {
        Command::Inspect(f) => cli::inspect::inspect_command(f),
        Command::Roundtrip(f) => cli::roundtrip::roundtrip_command(f),
        Command::Worker(f) => cli::worker::worker_command(f),
        Command::ReportSchema => {
            print!("{}", arrowcert::report::json_schema());
            Ok(0)
        }
        Command::Matrix(f) => cli::matrix::matrix_command(f),
        Command::Merge(f) => cli::matrix::merge_command(f),
        Command::AbiCheck(f) => cli::abi_check::abi_check_command(f),
        Command::Certify(f) => cli::certify::certify_command(f),
        Command::DlpackMatrix(f) => cli::dlpack::matrix_command(f),
        Command::Replay(f) => cli::certify::replay_command(f),
        Command::FuzzCorpus(f) => cli::fuzz::fuzz_corpus_command(f),
        Command::FuzzReport(f) => cli::fuzz::fuzz_report_command(f),
        Command::Rules(f) => cli::rules::rules_command(f),
        Command::Explain(f) => cli::rules::explain_command(f),
        Command::Coverage(f) => cli::coverage::coverage_command(f),
        Command::Summary(f) => cli::summary::summary_command(f),
    }
}

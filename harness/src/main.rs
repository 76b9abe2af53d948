//! The `arrowcert` binary: parses the command line and dispatches to
//! `arrowcert::cli`. Bad input is one line on stderr and exit code 2.

#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;

use arrowcert::cli::{self, BadInput, EXIT_BAD_INPUT};
use arrowcert::roundtrip::Filter;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "arrowcert",
    version,
    about = "Conformance testing for the Apache Arrow C data, stream, device and async interfaces",
    after_help = "Exit codes (certify, replay, roundtrip, matrix, merge):\n  0  pass: every MUST rule exercised held and every exported path ran data to a verdict\n  1  fail: a MUST rule failed, a case crashed or hung, or a call errored (not a declared limitation)\n  2  bad input: not a plugin, missing symbols, a wrong ABI version, a usage error\n  3  not certified: too little exercised (no case selected, every call errored or was declined, the device asked for is missing, an incomplete run or matrix)\n  4  harness error: arrowcert's own code failed; please report it\n  128+N  interrupted by signal N (the report is marked incomplete; resume with --resume)"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Show a plugin's name, ABI version, entry points and devices.
    Inspect {
        /// Path to the plugin's shared library (or a bundled name: `reference`).
        lib: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Send every scenario from a producer through the harness into a
    /// consumer on every interface path, and compare what was read.
    Roundtrip {
        /// Producer plugin: a path, or a bundled name.
        #[arg(long, default_value = "reference")]
        producer: String,
        /// Consumer plugin: a path, or a bundled name.
        #[arg(long, default_value = "reference")]
        consumer: String,
        /// A directory of Arrow IPC stream files (`*.stream`), e.g. Arrow's
        /// integration gold files; without it, the built-in scenarios.
        #[arg(long)]
        gold: Option<PathBuf>,
        /// Generated scenarios to add (drawn with --seed); 0 for none.
        #[arg(long, default_value_t = 0)]
        cases: u64,
        /// The seed generated scenarios are drawn with (default: a fresh
        /// one, kept in the report).
        #[arg(long)]
        seed: Option<u64>,
        /// Where to write the JSON report (default: reports/roundtrip-<time>.json).
        #[arg(long)]
        report: Option<PathBuf>,
        /// Run only cases whose ID contains one of these.
        filters: Vec<String>,
        /// Filters match whole case IDs.
        #[arg(long)]
        exact: bool,
        /// Skip cases whose ID contains this (repeatable).
        #[arg(long)]
        skip: Vec<String>,
        /// List the case IDs and exit.
        #[arg(long)]
        list: bool,
        /// Print every case, not only failures.
        #[arg(short, long)]
        verbose: bool,
        /// How long an async consumer may wait for the stream to end.
        #[arg(long, default_value_t = 30_000)]
        timeout_ms: i64,
        /// Worker processes (default: one per core); 0 runs every case in
        /// this process, where a crashing plugin ends the run.
        #[arg(long, short = 'j')]
        jobs: Option<usize>,
        /// Same as `--jobs 0`.
        #[arg(long)]
        in_process: bool,
        /// A case with no result after this long is a timeout.
        #[arg(long, default_value_t = 60_000)]
        case_timeout_ms: u64,
        /// Address-space limit of each worker process, in MiB.
        #[arg(long, default_value_t = 8192)]
        max_memory_mb: u64,
        /// Continue an interrupted run: keep the cases this report already
        /// has, run the rest, and write the merged report (to this file
        /// unless --report says otherwise). The plugins and data must be
        /// the ones the report was made with.
        #[arg(long, value_name = "REPORT")]
        resume: Option<PathBuf>,
        /// Known results of this pair (JSON: case-ID patterns -> expected
        /// outcome, reason, link): the run passes when its results match.
        #[arg(long, value_name = "FILE")]
        expectations: Option<PathBuf>,
    },
    /// Internal: a worker process started by the orchestrator.
    #[command(hide = true)]
    Worker {
        #[arg(long)]
        socket: PathBuf,
        #[arg(long, default_value = "roundtrip")]
        mode: String,
        #[arg(long)]
        producer: Option<PathBuf>,
        #[arg(long)]
        consumer: Option<PathBuf>,
        #[arg(long)]
        gold: Option<PathBuf>,
        #[arg(long)]
        no_builtin: bool,
        #[arg(long, default_value_t = 0)]
        seed: u64,
        #[arg(long, default_value_t = 0)]
        generated: u64,
        #[arg(long)]
        scenario: Vec<String>,
        #[arg(long)]
        timeout_ms: i64,
        #[arg(long)]
        replay_prefix: String,
        #[arg(long)]
        max_memory_mb: u64,
        #[arg(long)]
        case_cpu_seconds: Option<u64>,
    },
    /// Print the JSON Schema of reports.
    ReportSchema,
    /// The producer x consumer compatibility matrix: certify every
    /// library on its own, then send the data of every producer through
    /// the harness into every consumer; writes matrix.json, matrix.md and a
    /// self-contained matrix.html (with --shard, a shard file to merge).
    Matrix {
        /// Producers (bundled names or paths, comma-separated or repeated).
        /// Default: every bundled library that is built.
        #[arg(long, value_delimiter = ',')]
        producers: Vec<String>,
        /// Consumers, likewise.
        #[arg(long, value_delimiter = ',')]
        consumers: Vec<String>,
        /// Also run over these Arrow IPC stream files (certification adds
        /// them to the built-in scenarios; pairs use them instead).
        #[arg(long)]
        gold: Option<PathBuf>,
        /// Generated scenarios per unit.
        #[arg(long, default_value_t = 100)]
        cases: u64,
        /// The seed of generated scenarios (default: a fresh one). Shards
        /// of one matrix must share it.
        #[arg(long)]
        seed: Option<u64>,
        /// Output directory.
        #[arg(long, default_value = "reports")]
        out: PathBuf,
        /// Run only shard I of N of the units (round robin); writes
        /// matrix-shard-I-of-N.json for `arrowcert merge`.
        #[arg(long)]
        shard: Option<String>,
        /// Worker processes per unit (default: one per core).
        #[arg(long, short = 'j')]
        jobs: Option<usize>,
        /// A case with no result after this long is a timeout.
        #[arg(long, default_value_t = 60_000)]
        case_timeout_ms: u64,
        /// Candidates tried when shrinking a certification failure.
        #[arg(long, default_value_t = 200)]
        shrink_candidates: u64,
        /// Print the units this run (or shard) would run, and exit.
        #[arg(long)]
        list: bool,
        /// A directory of expectations files: certifying library L runs
        /// with DIR/L.json, the pair P -> C with DIR/pair-P-C.json, where
        /// they exist; a unit whose results are not as expected fails the
        /// matrix (exit 1).
        #[arg(long, value_name = "DIR")]
        expectations: Option<PathBuf>,
    },
    /// Combine `arrowcert matrix --shard` files (or directories holding
    /// them) into matrix.json, matrix.md and matrix.html.
    Merge {
        /// Shard files or directories.
        #[arg(required = true)]
        inputs: Vec<PathBuf>,
        /// Output directory.
        #[arg(long, default_value = "reports")]
        out: PathBuf,
    },
    /// Check a C header's Arrow structs and constants against arrowcert's
    /// (size, alignment and offset of every field), with the C compiler.
    AbiCheck {
        /// The header (default: the bundled arrowcert_plugin.h).
        header: Option<PathBuf>,
    },
    /// Certify a producer, a consumer, or both: judge what a producer
    /// exports and what a consumer does with what the harness exports, rule
    /// by rule (`arrowcert rules`), with evidence and a replay command for
    /// every failure. With neither --producer nor --consumer, the bundled
    /// reference plugins are certified. Ends pass (exit 0: every MUST rule
    /// exercised held, every exported path ran data to a verdict), fail
    /// (1: a MUST rule failed, a crash, a hang, an error), not certified
    /// (3: too little could be exercised) or harness error (4).
    Certify {
        /// Producer plugin to certify: a path, or a bundled name.
        #[arg(long)]
        producer: Option<String>,
        /// Consumer plugin to certify: a path, or a bundled name.
        #[arg(long)]
        consumer: Option<String>,
        /// Also certify over these Arrow IPC stream files (`*.stream`), e.g.
        /// Arrow's integration gold files, as `gold/<stem>`.
        #[arg(long)]
        gold: Option<PathBuf>,
        /// Generated scenarios to draw (each is certified on every path);
        /// 0 for none.
        #[arg(long, default_value_t = 100)]
        cases: u64,
        /// The seed generated scenarios are drawn with (default: a fresh
        /// one, printed and kept in the report).
        #[arg(long)]
        seed: Option<u64>,
        /// Leave out the built-in scenarios.
        #[arg(long)]
        no_builtin: bool,
        /// Candidate scenarios tried when shrinking one failure; 0 turns
        /// shrinking off.
        #[arg(long, default_value_t = 1000)]
        shrink_candidates: usize,
        /// Continue an interrupted run: keep the cases this report already
        /// has, run the rest, and write the merged report (to this file
        /// unless --report says otherwise). The producer file, the data and
        /// the seed (taken from the report unless --seed is given) must be
        /// the ones the report was made with.
        #[arg(long, value_name = "REPORT")]
        resume: Option<PathBuf>,
        /// Where to write the JSON report (default: reports/certify-<time>.json).
        #[arg(long)]
        report: Option<PathBuf>,
        /// Also write JUnit XML here: one test case per rule and one per
        /// case (crashes, timeouts and errors as <error>, limitations and
        /// skips as <skipped>).
        #[arg(long)]
        junit: Option<PathBuf>,
        /// Known results of this library (JSON: rule or case-ID patterns ->
        /// expected outcome, reason, link; see expectations/README.md):
        /// the run passes when its results match, and an unexpected failure
        /// or an unexpected pass fails it.
        #[arg(long, value_name = "FILE")]
        expectations: Option<PathBuf>,
        /// Run only cases whose ID contains one of these.
        filters: Vec<String>,
        /// Filters match whole case IDs.
        #[arg(long)]
        exact: bool,
        /// Skip cases whose ID contains this (repeatable).
        #[arg(long)]
        skip: Vec<String>,
        /// List the case IDs and exit.
        #[arg(long)]
        list: bool,
        /// Print every case, not only failures.
        #[arg(short, long)]
        verbose: bool,
        /// Worker processes (default: one per core); 0 runs in this process.
        #[arg(long, short = 'j')]
        jobs: Option<usize>,
        /// Same as `--jobs 0`.
        #[arg(long)]
        in_process: bool,
        /// A case with no result after this long is a timeout.
        #[arg(long, default_value_t = 60_000)]
        case_timeout_ms: u64,
        /// Address-space limit of each worker process, in MiB.
        #[arg(long, default_value_t = 8192)]
        max_memory_mb: u64,
        /// Device types to cover: cpu, emulated, cuda, cuda-host,
        /// cuda-managed (repeatable). Default: cpu and every other device
        /// type this machine has. A selected device the machine lacks is
        /// reported as skipped cases, with the reason.
        #[arg(long = "device", value_name = "DEVICE")]
        devices: Vec<String>,
        /// Fail (exit 2) unless this machine has this device type
        /// (repeatable); implies --device for it.
        #[arg(long = "require-device", value_name = "DEVICE")]
        require_devices: Vec<String>,
    },
    /// Rerun certification cases exactly (what a certify report's
    /// `replay` commands call): every violation printed in full. Runs in
    /// this process unless -j says otherwise, so a debugger sees the crash.
    Replay {
        /// Producer plugin (for `producer/...` cases; default: the bundled
        /// reference).
        #[arg(long)]
        producer: Option<String>,
        /// Consumer plugin (for `consumer/...` cases; default: the bundled
        /// reference).
        #[arg(long)]
        consumer: Option<String>,
        /// The gold directory the case's run used (for `gold/...` cases).
        #[arg(long)]
        gold: Option<PathBuf>,
        /// The seed of the run (for `gen/...` cases).
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Case IDs, as reports print them (with --fuzz: fuzz inputs).
        #[arg(required = true)]
        cases: Vec<String>,
        /// Replay fuzz inputs (crash artifacts, corpus files) through this
        /// fuzz target's oracle: validate, consumer, producer or async.
        #[arg(long, value_name = "TARGET")]
        fuzz: Option<String>,
        /// Also write a JSON report here.
        #[arg(long)]
        report: Option<PathBuf>,
        /// Worker processes (default 0: this process).
        #[arg(long, short = 'j', default_value_t = 0)]
        jobs: usize,
        /// A case with no result after this long is a timeout (workers).
        #[arg(long, default_value_t = 60_000)]
        case_timeout_ms: u64,
        /// Address-space limit of each worker process, in MiB.
        #[arg(long, default_value_t = 8192)]
        max_memory_mb: u64,
    },
    /// Write seed inputs for the fuzz targets: every built-in scenario,
    /// generated ones and the gold streams, behind a few header choices
    /// each, into OUT/<target>/.
    FuzzCorpus {
        #[arg(long, default_value = "fuzz/corpus")]
        out: PathBuf,
        /// A directory of Arrow IPC gold streams to seed from.
        #[arg(long)]
        gold: Option<PathBuf>,
        /// Generated scenarios to seed from.
        #[arg(long, default_value_t = 16)]
        generated: u64,
    },
    /// One report from a nightly fuzzing directory (scripts/fuzz/nightly.sh):
    /// executions per second per target and plugin, and every minimised
    /// finding replayed (in a child process) with its replay commands.
    FuzzReport {
        /// The directory of runs: one folder per target and plugin, each
        /// with a run.json and a findings/ folder.
        #[arg(long)]
        runs: PathBuf,
        /// Where the JSON report goes.
        #[arg(long)]
        out: PathBuf,
    },
    /// List the rules arrowcert checks (ID, level, side, what it requires).
    Rules {
        /// Only rules matching these: an ID, or a prefix ending in `*` (`array.*`).
        patterns: Vec<String>,
        /// Print the catalogue as Markdown (as in docs/RULES.md).
        #[arg(long)]
        markdown: bool,
    },
    /// Explain a rule: its level, the spec sentence it enforces, and how
    /// arrowcert decides it.
    Explain {
        /// A rule ID (`array.null-count`) or a pattern (`device.*`).
        rule: String,
    },
}

fn main() -> ExitCode {
    std::panic::set_hook(Box::new(|info| {
        if arrowcert::quiet::panics_expected() {
            return;
        }
        eprintln!("arrowcert: internal error (a bug in arrowcert, please report it): {info}");
    }));
    let cli = match Cli::try_parse() {
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

/// A plugin argument resolved to a library (`None` stays `None`).
/// `--device` values, as device kinds.
fn device_kinds(names: &[String], flag: &str) -> Result<Vec<arrowcert::device::Kind>, BadInput> {
    names
        .iter()
        .map(|n| {
            arrowcert::device::Kind::parse(n).ok_or_else(|| {
                BadInput(format!(
                    "{flag} {n}: not a device type (cpu, emulated, cuda, cuda-host, cuda-managed)"
                ))
            })
        })
        .collect()
}

fn lib(arg: Option<String>, role: &str) -> Result<Option<cli::certify::Lib>, BadInput> {
    arg.map(|arg| {
        Ok(cli::certify::Lib {
            path: cli::resolve_plugin(&arg, role)?,
            arg,
        })
    })
    .transpose()
}

fn run(cli: Cli) -> Result<i32, BadInput> {
    match cli.command {
        Command::Inspect { lib, json } => {
            let path = cli::resolve_plugin(&lib, "producer")
                .or_else(|_| cli::resolve_plugin(&lib, "consumer"))?;
            let plugin =
                arrowcert::plugin::Plugin::load(&path).map_err(|e| BadInput(e.to_string()))?;
            Ok(cli::inspect::run(&plugin, json))
        }
        Command::Roundtrip {
            producer,
            consumer,
            gold,
            cases,
            seed,
            report,
            filters,
            exact,
            skip,
            list,
            verbose,
            timeout_ms,
            jobs,
            in_process,
            case_timeout_ms,
            max_memory_mb,
            resume,
            expectations,
        } => cli::roundtrip::run(cli::roundtrip::Args {
            expectations: expectations
                .map(|p| arrowcert::report::expectations::Expectations::read(&p).map(|e| (p, e)))
                .transpose()
                .map_err(BadInput)?,
            producer: cli::resolve_plugin(&producer, "producer")?,
            consumer: cli::resolve_plugin(&consumer, "consumer")?,
            producer_arg: producer,
            consumer_arg: consumer,
            gold,
            cases,
            seed: seed.unwrap_or_else(arrowcert::generate::fresh_seed),
            report,
            filter: Filter {
                patterns: filters,
                exact,
                skip,
            },
            list,
            verbose,
            timeout_ms,
            invocation: std::env::args().collect(),
            jobs: if in_process {
                0
            } else {
                jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
            },
            case_timeout_ms,
            max_memory_mb,
            resume,
        }),
        Command::Matrix {
            producers,
            consumers,
            gold,
            cases,
            seed,
            out,
            shard,
            jobs,
            case_timeout_ms,
            shrink_candidates,
            list,
            expectations,
        } => {
            let defaulted = producers.is_empty() && consumers.is_empty();
            let (producers, consumers) = if defaulted {
                let (p, p_absent) = cli::matrix::default_libraries("producer");
                let (c, c_absent) = cli::matrix::default_libraries("consumer");
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
                .map(|s| arrowcert::matrix::Shard::parse(&s))
                .transpose()
                .map_err(BadInput)?;
            if shard.is_some_and(|s| s.count > 1) && seed.is_none() && cases > 0 {
                return Err(BadInput(
                    "--shard with generated cases needs --seed (every shard must draw the same scenarios)".into(),
                ));
            }
            cli::matrix::run(cli::matrix::Args {
                producers,
                consumers,
                gold,
                cases,
                seed: seed.unwrap_or_else(arrowcert::generate::fresh_seed),
                out,
                shard,
                jobs,
                case_timeout_ms,
                shrink_candidates,
                list,
                expectations,
            })
        }
        Command::Merge { inputs, out } => cli::matrix::merge(&inputs, &out),
        Command::Worker {
            socket,
            mode,
            producer,
            consumer,
            gold,
            no_builtin,
            seed,
            generated,
            scenario,
            timeout_ms,
            replay_prefix,
            max_memory_mb,
            case_cpu_seconds,
        } => Ok(arrowcert::run::worker::run(
            arrowcert::run::worker::WorkerArgs {
                socket,
                mode: arrowcert::run::worker::Mode::parse(&mode)
                    .ok_or_else(|| BadInput(format!("unknown worker mode {mode}")))?,
                producer,
                consumer,
                sources: arrowcert::sources::Sources {
                    builtin: !no_builtin,
                    gold,
                    generated,
                    seed,
                    only: (!scenario.is_empty()).then_some(scenario),
                },
                options: arrowcert::roundtrip::Options {
                    async_timeout_ms: timeout_ms,
                    replay_prefix,
                    ..Default::default()
                },
                limits: arrowcert::run::proc::Limits {
                    address_space: Some(max_memory_mb.saturating_mul(1024 * 1024)),
                    open_files: Some(1024),
                    cpu_seconds: None,
                },
                cpu_seconds: case_cpu_seconds,
            },
        )),
        Command::Certify {
            producer,
            consumer,
            gold,
            cases,
            seed,
            no_builtin,
            shrink_candidates,
            resume,
            report,
            junit,
            expectations,
            filters,
            exact,
            skip,
            list,
            verbose,
            jobs,
            in_process,
            case_timeout_ms,
            max_memory_mb,
            devices,
            require_devices,
        } => cli::certify::run(cli::certify::Args {
            expectations: expectations
                .map(|p| arrowcert::report::expectations::Expectations::read(&p).map(|e| (p, e)))
                .transpose()
                .map_err(BadInput)?,
            devices: if devices.is_empty() {
                None
            } else {
                Some(device_kinds(&devices, "--device")?)
            },
            require_devices: device_kinds(&require_devices, "--require-device")?,
            producer: lib(
                producer
                    .clone()
                    .or_else(|| consumer.is_none().then(|| "reference".into())),
                "producer",
            )?,
            consumer: lib(
                consumer.or_else(|| producer.is_none().then(|| "reference".into())),
                "consumer",
            )?,
            sources: arrowcert::sources::Sources {
                builtin: !no_builtin,
                gold,
                generated: cases,
                seed: match (seed, &resume) {
                    (Some(s), _) => s,
                    (None, Some(r)) => arrowcert::report::read(r)
                        .map_err(BadInput)?
                        .seed
                        .unwrap_or(0),
                    (None, None) => arrowcert::generate::fresh_seed(),
                },
                only: None,
            },
            report,
            junit,
            filter: Filter {
                patterns: filters,
                exact,
                skip,
            },
            list,
            verbose,
            invocation: std::env::args().collect(),
            jobs: if in_process {
                0
            } else {
                jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
            },
            case_timeout_ms,
            max_memory_mb,
            shrink: arrowcert::generate::shrink::Budget {
                candidates: shrink_candidates,
                ..Default::default()
            },
            replay: false,
            resume,
        }),
        Command::Replay {
            producer,
            consumer,
            gold,
            seed,
            cases,
            report,
            jobs,
            case_timeout_ms,
            max_memory_mb,
            fuzz,
        } => {
            if let Some(target) = fuzz {
                return cli::fuzz::replay(&target, &cases, producer, consumer, report);
            }
            let mut names: Vec<String> = Vec::new();
            for id in &cases {
                let name = arrowcert::certify::scenario_of(id).ok_or_else(|| {
                    BadInput(format!(
                        "{id}: not a certification case ID (producer/<path>/<scenario>[/batch:<i>[/slice:<o>+<l>]] or consumer/<kind>/<variant>/<scenario>[/batch:<i>])"
                    ))
                })?;
                if !names.contains(&name) {
                    names.push(name);
                }
            }
            let wants = |side: &str| cases.iter().any(|c| c.starts_with(&format!("{side}/")));
            cli::certify::run(cli::certify::Args {
                producer: lib(
                    wants("producer").then(|| producer.unwrap_or_else(|| "reference".into())),
                    "producer",
                )?,
                consumer: lib(
                    wants("consumer").then(|| consumer.unwrap_or_else(|| "reference".into())),
                    "consumer",
                )?,
                sources: arrowcert::sources::Sources {
                    builtin: false,
                    gold,
                    generated: 0,
                    seed,
                    only: Some(names),
                },
                report,
                junit: None,
                expectations: None,
                filter: Filter {
                    patterns: cases,
                    exact: true,
                    skip: Vec::new(),
                },
                list: false,
                verbose: true,
                invocation: std::env::args().collect(),
                jobs,
                case_timeout_ms,
                max_memory_mb,
                shrink: arrowcert::generate::shrink::Budget {
                    candidates: 0,
                    ..Default::default()
                },
                replay: true,
                resume: None,
                // The case IDs say the device.
                devices: Some(arrowcert::device::Kind::ALL.to_vec()),
                require_devices: Vec::new(),
            })
        }
        Command::FuzzCorpus {
            out,
            gold,
            generated,
        } => cli::fuzz::corpus(&out, gold.as_deref(), generated),
        Command::FuzzReport { runs, out } => cli::fuzz::report(&runs, &out),
        Command::Rules { patterns, markdown } => {
            if markdown {
                print!("{}", arrowcert::rules::markdown());
                return Ok(0);
            }
            if patterns.is_empty() {
                print!("{}", arrowcert::rules::list());
                return Ok(0);
            }
            let mut any = false;
            for p in &patterns {
                for r in arrowcert::rules::matching(p) {
                    any = true;
                    println!("{:<36} {:<6} {:<8} {}", r.id, r.level, r.side, r.summary);
                }
            }
            if !any {
                return Err(BadInput(format!(
                    "no rule matches {}; `arrowcert rules` lists them",
                    patterns.join(", ")
                )));
            }
            Ok(0)
        }
        Command::Explain { rule } => {
            let found = arrowcert::rules::matching(&rule);
            if found.is_empty() {
                let near: Vec<&str> = arrowcert::rules::RULES
                    .iter()
                    .map(|r| r.id)
                    .filter(|id| {
                        let last = rule.rsplit('.').next().unwrap_or(&rule);
                        !last.is_empty() && id.contains(last)
                    })
                    .take(5)
                    .collect();
                return Err(BadInput(format!(
                    "no rule {rule}{}; `arrowcert rules` lists them",
                    if near.is_empty() {
                        String::new()
                    } else {
                        format!(" (did you mean {}?)", near.join(", "))
                    }
                )));
            }
            let texts: Vec<String> = found.iter().map(|r| arrowcert::rules::explain(r)).collect();
            print!("{}", texts.join("\n"));
            Ok(0)
        }
        Command::ReportSchema => {
            print!("{}", arrowcert::report::json_schema());
            Ok(0)
        }
        Command::AbiCheck { header } => {
            let header = header.unwrap_or_else(|| {
                PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("include/arrowcert_plugin.h")
            });
            let mismatches = arrowcert::abi::layout::check_header(&header).map_err(BadInput)?;
            if mismatches.is_empty() {
                println!(
                    "{}: every Arrow struct, field and constant matches arrowcert's layout",
                    header.display()
                );
                Ok(0)
            } else {
                for m in &mismatches {
                    println!("mismatch: {m}");
                }
                println!("{}: {} mismatches", header.display(), mismatches.len());
                Ok(cli::EXIT_FAILURES)
            }
        }
    }
}

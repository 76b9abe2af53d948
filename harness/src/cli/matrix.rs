//! `arrowcert matrix` and `arrowcert merge`.
//!
//! The matrix runs each unit of [`crate::matrix::plan`] as a child
//! `arrowcert certify` or `arrowcert roundtrip` process (the same binary),
//! with its own JSON report under `OUT/runs/` and its output in a log
//! beside it, so one library's crash or hang is contained like any run's,
//! and every unit can be rerun alone with the command the matrix records.
//! Then it writes `matrix.json`, `matrix.md` and `matrix.html` into OUT;
//! a `--shard I/N` run writes `matrix-shard-I-of-N.json` only, and
//! `arrowcert merge` combines shard files into the three outputs.

#![forbid(unsafe_code)]

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use crate::matrix::{self, render, Data, Library, Matrix, Planned, Shard, Status, Unit, UnitKind};
use crate::report::{self, Summary};
use crate::run;

use super::words::shell_word;
use super::{BadInput, EXIT_FAILURES};
use crate::registry::{Place, BUNDLED};

pub struct Args {
    pub producers: Vec<String>,
    pub consumers: Vec<String>,
    pub gold: Option<PathBuf>,
    pub cases: u64,
    pub seed: u64,
    pub out: PathBuf,
    pub shard: Option<Shard>,
    /// Worker processes per unit (`None`: the children's default).
    pub jobs: Option<usize>,
    pub case_timeout_ms: u64,
    /// Candidates tried when shrinking a certification failure.
    pub shrink_candidates: u64,
    /// Certification units: every case that did not pass runs this many
    /// more times (`certify --repeat`); 0: none.
    pub repeat: u32,
    /// Print the plan and exit.
    pub list: bool,
    /// Units run at once (each a child process with `jobs` workers).
    pub units_at_once: usize,
    /// Every unit runs only cases whose ID contains one of these (a smoke
    /// run); empty: every case.
    pub filters: Vec<String>,
    /// A directory of expectations files (`--expectations DIR`): a unit
    /// certifying library L runs with `DIR/L.json`, a pair P -> C with
    /// `DIR/pair-P-C.json`, where those exist.
    pub expectations: Option<PathBuf>,
    /// `--malformed`: consumer certifications also run `certify
    /// --malformed`; the grades are a section of their own.
    pub malformed: bool,
}

/// The expectations file of a unit, when `--expectations DIR` has one.
fn expectations_of(args: &Args, unit: &Planned) -> Option<PathBuf> {
    let dir = args.expectations.as_ref()?;
    let name = |arg: &str| {
        std::path::Path::new(arg)
            .file_stem()
            .map_or_else(|| arg.to_string(), |s| s.to_string_lossy().into_owned())
    };
    let file = match unit.kind {
        UnitKind::CertifyProducer => format!("{}.json", name(unit.producer.as_deref()?)),
        UnitKind::CertifyConsumer => format!("{}.json", name(unit.consumer.as_deref()?)),
        UnitKind::Pair => format!(
            "pair-{}-{}.json",
            name(unit.producer.as_deref()?),
            name(unit.consumer.as_deref()?)
        ),
    };
    Some(dir.join(file)).filter(|p| p.is_file())
}

/// The libraries a matrix covers by default: every bundled plugin of the
/// role except CUDA-only ones, left out (with a note) when not built.
pub fn default_libraries(role: &str) -> (Vec<String>, Vec<String>) {
    let mut present = Vec::new();
    let mut absent = Vec::new();
    for b in BUNDLED.iter().filter(|b| b.role == role) {
        if b.name.starts_with("cuda-") {
            continue;
        }
        // An adapter file needs the project-local environment too.
        let installed = match b.place {
            Place::Adapter => crate::plugin::python::interpreter().is_ok_and(|p| p.exists()),
            // PostgreSQL's driver needs a server: `just matrix` starts one
            // (scripts/postgres/server.sh) and says where.
            Place::Adbc if b.name == "postgresql-adbc" => {
                std::env::var_os(crate::plugin::adbc::PG_URI_ENV).is_some()
            }
            _ => true,
        };
        if b.exists() && installed {
            present.push(b.name.to_string());
        } else {
            absent.push(format!(
                "{} ({})",
                b.name,
                match b.place {
                    Place::Workspace => "cargo build --workspace",
                    Place::Real | Place::Adapter | Place::Adbc => "just real",
                }
            ));
        }
    }
    (present, absent)
}

fn adapter_note(arg: &str, role: &str) -> String {
    crate::registry::bundled_plugin(arg, role)
        .map(|b| b.adapter.to_string())
        .unwrap_or_default()
}

/// The file a unit's report and log are named after.
fn slug(id: &str) -> String {
    id.chars()
        .map(|c| match c {
            '/' => '~',
            c if c.is_ascii_alphanumeric() || "-_.:+".contains(c) => c,
            _ => '_',
        })
        .collect()
}

/// The child command line of a unit (after the executable).
fn unit_args(args: &Args, unit: &Planned, report: &Path) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    match unit.kind {
        UnitKind::CertifyProducer | UnitKind::CertifyConsumer => {
            v.push("certify".into());
            if let Some(p) = &unit.producer {
                v.extend(["--producer".into(), p.clone()]);
            }
            if let Some(c) = &unit.consumer {
                v.extend(["--consumer".into(), c.clone()]);
            }
            v.extend([
                "--shrink-candidates".into(),
                args.shrink_candidates.to_string(),
            ]);
            if args.repeat > 0 {
                v.extend(["--repeat".into(), args.repeat.to_string()]);
            }
            if args.malformed && unit.kind == UnitKind::CertifyConsumer {
                v.push("--malformed".into());
            }
        }
        UnitKind::Pair => {
            v.push("roundtrip".into());
            v.extend([
                "--producer".into(),
                unit.producer.clone().unwrap_or_default(),
                "--consumer".into(),
                unit.consumer.clone().unwrap_or_default(),
            ]);
        }
    }
    if let Some(g) = &args.gold {
        v.extend(["--gold".into(), g.display().to_string()]);
    }
    v.extend([
        "--cases".into(),
        args.cases.to_string(),
        "--seed".into(),
        args.seed.to_string(),
        "--case-timeout-ms".into(),
        args.case_timeout_ms.to_string(),
    ]);
    if let Some(j) = args.jobs {
        v.extend(["--jobs".into(), j.to_string()]);
    }
    if let Some(e) = expectations_of(args, unit) {
        v.extend(["--expectations".into(), e.display().to_string()]);
    }
    v.extend(["--report".into(), report.display().to_string()]);
    if !args.filters.is_empty() {
        v.push("--".into());
        v.extend(args.filters.iter().cloned());
    }
    v
}

/// The last non-empty line of a log (a child's bad-input message).
fn last_line(log: &Path) -> String {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map(|l| report::bounded(l.trim(), 2000))
        .unwrap_or_else(|| "no output".into())
}

/// Runs one unit as a child `arrowcert certify`/`roundtrip`; its pid is in
/// `live` while it runs (a stop signal is passed on to it).
fn run_unit(exe: &Path, args: &Args, planned: &Planned, live: &Mutex<Vec<u32>>) -> Unit {
    let started = Instant::now();
    let name = slug(&planned.id);
    let report_rel = PathBuf::from("runs").join(format!("{name}.json"));
    let report_path = args.out.join(&report_rel);
    let log = args.out.join("runs").join(format!("{name}.log"));
    let child_args = unit_args(args, planned, &report_path);
    let command = std::iter::once("arrowcert".to_string())
        .chain(child_args.iter().map(|a| shell_word(a)))
        .collect::<Vec<_>>()
        .join(" ");
    let mut unit = Unit {
        id: planned.id.clone(),
        kind: planned.kind,
        producer: planned.producer.clone(),
        consumer: planned.consumer.clone(),
        status: Status::Error,
        message: None,
        summary: Summary::default(),
        paths: Default::default(),
        failing_rules: Vec::new(),
        failing_cases: Vec::new(),
        changed: 0,
        changed_paths: Default::default(),
        changed_cases: Vec::new(),
        limitation_cases: 0,
        flaky_cases: Vec::new(),
        coverage: Default::default(),
        expectations: None,
        unexpected: Vec::new(),
        plugins: Vec::new(),
        report: None,
        command,
        duration_ms: 0,
        robustness: None,
    };
    let _ = std::fs::remove_file(&report_path);
    let outcome = std::fs::File::create(&log).and_then(|f| {
        let err = f.try_clone()?;
        // Its own process group: a terminal's Ctrl-C (sent to the whole
        // foreground group) reaches the matrix alone, which passes it on
        // once; a second SIGINT tells a unit to leave at once.
        let mut child = Command::new(exe)
            .args(&child_args)
            .stdin(Stdio::null())
            .stdout(f)
            .stderr(err)
            .process_group(0)
            .spawn()?;
        live.lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(child.id());
        if let Some(sig) = run::proc::interrupted() {
            // The stop came between this unit's start and its pid's
            // entry in `live`.
            run::proc::forward_signal(child.id(), sig);
        }
        let status = child.wait();
        live.lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|p| *p != child.id());
        status
    });
    unit.duration_ms = started.elapsed().as_millis() as u64;
    let status = match outcome {
        Ok(s) => s,
        Err(e) => {
            unit.message = Some(format!("cannot run arrowcert: {e}"));
            return unit;
        }
    };
    if status.code() == Some(super::EXIT_BAD_INPUT) || !report_path.exists() {
        unit.message = Some(last_line(&log));
        return unit;
    }
    let run = match report::read(&report_path) {
        Ok(r) => r,
        Err(e) => {
            unit.message = Some(e);
            return unit;
        }
    };
    let (status, message, failing_rules) = matrix::judge(planned, &run);
    unit.status = if run.complete { status } else { Status::Error };
    unit.message = if run.complete {
        message
    } else {
        Some(format!(
            "the run did not finish ({}); see {}",
            run.interrupted.as_deref().unwrap_or("incomplete report"),
            log.display()
        ))
    };
    unit.summary = run.summary.clone();
    unit.paths = matrix::per_path(&run);
    unit.failing_rules = failing_rules;
    unit.failing_cases = matrix::failing_cases(&run);
    if unit.kind == UnitKind::Pair {
        (unit.changed, unit.changed_paths, unit.changed_cases) = matrix::changed_cases(&run);
    }
    if let Some(c) = &run.expectations {
        unit.expectations = Some(c.file.clone());
        unit.unexpected = c
            .unexpected
            .iter()
            .map(|m| {
                format!(
                    "{}: {} (expected {}, got {})",
                    m.id, m.kind, m.expected, m.actual
                )
            })
            .collect();
    }
    unit.limitation_cases = run.limitations.len() as u64;
    unit.flaky_cases = run
        .cases
        .iter()
        .filter(|c| !c.flaky.is_empty())
        .map(|c| {
            let seen: Vec<&str> = c.flaky.iter().map(|v| v.as_str()).collect();
            format!("{} ({})", c.id, seen.join(", "))
        })
        .collect();
    unit.coverage = crate::engine::coverage::per_path(&run.coverage)
        .into_iter()
        .filter(|(_, p)| !p.exercised.is_empty() || !p.refused.is_empty())
        .map(|(path, p)| {
            let counts = matrix::CoverageCounts {
                exercised: p.exercised.len() as u64,
                refused: p.refused.len() as u64,
                not_reached: p.not_reached.len() as u64,
            };
            (path, counts)
        })
        .collect();
    unit.plugins = run.plugins.clone();
    unit.robustness = matrix::UnitRobustness::of(&run);
    unit.report = Some(report_rel.display().to_string());
    unit
}

fn libraries(args: &Args) -> Vec<Library> {
    let mut libs = Vec::new();
    for (role, list) in [("producer", &args.producers), ("consumer", &args.consumers)] {
        for arg in list {
            libs.push(Library {
                arg: arg.clone(),
                role: role.into(),
                adapter: adapter_note(arg, role),
            });
        }
    }
    libs
}

/// Writes matrix.json, matrix.md and matrix.html into `out`.
fn write_outputs(m: &Matrix, out: &Path) -> Result<Vec<PathBuf>, BadInput> {
    let json = serde_json::to_string_pretty(m).expect("matrix serialises") + "\n";
    let files = [
        (out.join("matrix.json"), json),
        (out.join("matrix.md"), render::markdown(m)),
        (out.join("matrix.html"), render::page(m)),
    ];
    for (path, text) in &files {
        report::write_atomic(path, text)
            .map_err(|e| BadInput(format!("{}: cannot write: {e}", path.display())))?;
    }
    Ok(files.into_iter().map(|(p, _)| p).collect())
}

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

pub fn run(args: Args) -> Result<i32, BadInput> {
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
    if args.list {
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
    let started = SystemTime::now();
    let clock = Instant::now();
    // Units run `units_at_once` at a time (each its own child process with
    // its own workers): a unit's orchestrator and its workers' start-ups
    // leave a core idle a third of the time, which another unit fills.
    let next = std::sync::atomic::AtomicUsize::new(0);
    let done = Mutex::new(Vec::<(usize, Unit)>::new());
    // SIGINT or SIGTERM: no unit starts after it, and the units running get
    // the same signal (a `kill` of this process alone would otherwise leave
    // them running to the end); each stops between cases and leaves its
    // report marked incomplete. No matrix is written from a part of it.
    run::proc::catch_interrupts();
    let live = Mutex::new(Vec::<u32>::new());
    let running = std::sync::atomic::AtomicUsize::new(0);
    let loops = args.units_at_once.clamp(1, mine.len().max(1));
    running.store(loops, std::sync::atomic::Ordering::SeqCst);
    std::thread::scope(|scope| {
        for _ in 0..loops {
            scope.spawn(|| {
                loop {
                    if run::proc::interrupted().is_some() {
                        break;
                    }
                    let position = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(planned) = mine.get(position) else {
                        break;
                    };
                    let unit = run_unit(&exe, &args, planned, &live);
                    let mut d = done.lock().unwrap_or_else(|e| e.into_inner());
                    println!(
                        "[{}/{}] {} ... {} ({}, {:.1} s){}",
                        d.len() + 1,
                        mine.len(),
                        unit.id,
                        unit.status.word(),
                        summary_words(&unit.summary),
                        unit.duration_ms as f64 / 1000.0,
                        unit.message
                            .as_deref()
                            .map(|m| format!("\n      {}", report::printable(m)))
                            .unwrap_or_default()
                    );
                    d.push((position, unit));
                }
                running.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
            });
        }
        // Passes a stop signal on to the running units, once.
        scope.spawn(|| {
            while running.load(std::sync::atomic::Ordering::SeqCst) > 0 {
                if let Some(sig) = run::proc::interrupted() {
                    for pid in live.lock().unwrap_or_else(|e| e.into_inner()).iter() {
                        run::proc::forward_signal(*pid, sig);
                    }
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        });
    });
    if let Some(sig) = run::proc::interrupted() {
        let ran = done.lock().unwrap_or_else(|e| e.into_inner()).len();
        println!(
            "interrupted by {}: {ran} of {} units ran (the last ones stopped part way: their reports in {} are marked incomplete); no matrix was written",
            run::proc::signal_name(sig),
            mine.len(),
            args.out.join("runs").display()
        );
        return Ok(128 + sig);
    }
    let mut done = done.into_inner().unwrap_or_else(|e| e.into_inner());
    done.sort_by_key(|(position, _)| *position);
    let units: Vec<Unit> = done.into_iter().map(|(_, u)| u).collect();
    let m = Matrix {
        matrix_version: matrix::MATRIX_VERSION,
        tool: Default::default(),
        started_at: report::time::rfc3339(started),
        finished_at: report::time::rfc3339(SystemTime::now()),
        duration_ms: clock.elapsed().as_millis() as u64,
        producers: args.producers.clone(),
        consumers: args.consumers.clone(),
        data: Data {
            gold: args.gold.as_ref().map(|g| g.display().to_string()),
            cases: args.cases,
            seed: args.seed,
            filters: args.filters.clone(),
        },
        plan: plan.iter().map(|u| u.id.clone()).collect(),
        shards: vec![shard],
        libraries: libraries(&args),
        complete: mine.len() == plan.len(),
        units,
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
        let files = write_outputs(&m, &args.out)?;
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
    let mut files = Vec::new();
    for input in inputs {
        if input.is_dir() {
            let mut found: Vec<PathBuf> = std::fs::read_dir(input)
                .map_err(|e| BadInput(format!("{}: {e}", input.display())))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("matrix-shard-") && n.ends_with(".json"))
                })
                .collect();
            found.sort();
            if found.is_empty() {
                return Err(BadInput(format!(
                    "{}: no matrix-shard-*.json files",
                    input.display()
                )));
            }
            files.extend(found);
        } else {
            files.push(input.clone());
        }
    }
    let mut parts = Vec::new();
    for f in &files {
        let mut m = matrix::read(f).map_err(BadInput)?;
        // Unit reports are relative to the shard file; make them relative
        // to the merged output where it contains them, absolute otherwise.
        let dir = f.parent().unwrap_or(Path::new("."));
        for u in &mut m.units {
            if let Some(r) = &u.report {
                u.report = Some(relative_to(&dir.join(r), out));
            }
        }
        parts.push(m);
    }
    let merged = matrix::merge(parts).map_err(|e| BadInput(format!("cannot merge: {e}")))?;
    let written = write_outputs(&merged, out)?;
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

/// `path` relative to `base` when `base` contains it, else absolute.
fn relative_to(path: &Path, base: &Path) -> String {
    let abs = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let (p, b) = (abs(path), abs(base));
    match p.strip_prefix(&b) {
        Ok(rel) => rel.display().to_string(),
        Err(_) => p.display().to_string(),
    }
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
    /// Candidates tried when shrinking a certification failure.
    #[arg(long, default_value_t = 200)]
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
    run(Args {
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
        list,
        units_at_once,
        filters,
        expectations,
        malformed,
    })
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

#[cfg(test)]
mod tests {
    #[test]
    fn slugs_are_flat_file_names() {
        assert_eq!(super::slug("pair/a/b"), "pair~a~b");
        assert_eq!(
            super::slug("certify/producer/:x:y.so"),
            "certify~producer~:x:y.so"
        );
        assert_eq!(super::slug("pair/<s>/c d"), "pair~_s_~c_d");
    }
}

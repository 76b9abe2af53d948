//! The matrix engine: each unit of [`crate::matrix::plan`] run as a child
//! `arrowcert certify` or `arrowcert roundtrip` process (the same binary),
//! with its own JSON report under `OUT/runs/` and its output in a log
//! beside it, so one library's crash or hang is contained like any run's,
//! and every unit can be rerun alone with the command the matrix records;
//! then `matrix.json`, `matrix.md` and `matrix.html`, or a shard's file,
//! and the merge of shard files. `arrowcert matrix` and `arrowcert merge`
//! (`cli::matrix`) parse and print.

#![forbid(unsafe_code)]

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use crate::matrix::{self, render, Data, Library, Matrix, Planned, Shard, Status, Unit, UnitKind};
use crate::registry::{Place, BUNDLED};
use crate::report::{self, shell_word, Summary};
use crate::run;

/// What a matrix run covers, and how.
pub struct Request {
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
fn expectations_of(args: &Request, unit: &Planned) -> Option<PathBuf> {
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
fn unit_args(args: &Request, unit: &Planned, report: &Path) -> Vec<String> {
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
pub fn run_unit(exe: &Path, args: &Request, planned: &Planned, live: &Mutex<Vec<u32>>) -> Unit {
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
    if status.code() == Some(crate::report::outcome::EXIT_BAD_INPUT) || !report_path.exists() {
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

pub fn libraries(args: &Request) -> Vec<Library> {
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
pub fn write_outputs(m: &Matrix, out: &Path) -> Result<Vec<PathBuf>, String> {
    let json = serde_json::to_string_pretty(m).expect("matrix serialises") + "\n";
    let files = [
        (out.join("matrix.json"), json),
        (out.join("matrix.md"), render::markdown(m)),
        (out.join("matrix.html"), render::page(m)),
    ];
    for (path, text) in &files {
        report::write_atomic(path, text)
            .map_err(|e| format!("{}: cannot write: {e}", path.display()))?;
    }
    Ok(files.into_iter().map(|(p, _)| p).collect())
}

/// Runs `mine` (this shard's units of `plan`), `units_at_once` at a time,
/// each a child of `exe`; `on_unit` hears of each as it ends (its place
/// among those ended, of how many). Returns the matrix, or the signal that
/// stopped the run and how many units had ended (no matrix is made from a
/// part of it).
pub fn run_units(
    exe: &Path,
    args: &Request,
    plan: &[Planned],
    mine: &[&Planned],
    shard: Shard,
    on_unit: &(dyn Fn(usize, usize, &Unit) + Sync),
) -> Result<Matrix, (i32, usize)> {
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
                    let unit = run_unit(exe, args, planned, &live);
                    let mut d = done.lock().unwrap_or_else(|e| e.into_inner());
                    on_unit(d.len() + 1, mine.len(), &unit);
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
        return Err((sig, done.lock().unwrap_or_else(|e| e.into_inner()).len()));
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
        libraries: libraries(args),
        complete: mine.len() == plan.len(),
        units,
    };
    Ok(m)
}

/// Shard files (or directories holding them) merged into one matrix,
/// written into `out`: the matrix, the shard files read and the files
/// written.
pub fn merge(
    inputs: &[PathBuf],
    out: &Path,
) -> Result<(Matrix, Vec<PathBuf>, Vec<PathBuf>), String> {
    let mut files = Vec::new();
    for input in inputs {
        if input.is_dir() {
            let mut found: Vec<PathBuf> = std::fs::read_dir(input)
                .map_err(|e| format!("{}: {e}", input.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("matrix-shard-") && n.ends_with(".json"))
                })
                .collect();
            found.sort();
            if found.is_empty() {
                return Err(format!("{}: no matrix-shard-*.json files", input.display()));
            }
            files.extend(found);
        } else {
            files.push(input.clone());
        }
    }
    let mut parts = Vec::new();
    for f in &files {
        let mut m = matrix::read(f)?;
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
    let merged = matrix::merge(parts).map_err(|e| format!("cannot merge: {e}"))?;
    let written = write_outputs(&merged, out)?;
    Ok((merged, files, written))
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

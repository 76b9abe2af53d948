//! The fuzzing engines: saved inputs of a fuzz target replayed through
//! its oracle ([`crate::fuzz`]) in this process; a nightly fuzzing
//! directory (one folder per target and plugin, written by
//! `scripts/fuzz/nightly.sh`) made into one report in the certification
//! format, each minimised finding replayed in a child process so a finding
//! that crashes the plugin becomes a `crash` case instead of ending the
//! report; the seed corpus. `arrowcert replay --fuzz`, `fuzz-report` and
//! `fuzz-corpus` (`cli::fuzz`) parse and print.

#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime};

use crate::fuzz::{self, Outcome, Plugins, Target};
use crate::report::{self, Case, FuzzRun, Report, Summary, Verdict};

/// The plugins a replay of `target` uses: the ones given, else the bundled
/// reference plugins for the roles the target drives.
fn plugins(
    target: Target,
    producer: Option<String>,
    consumer: Option<String>,
) -> Result<(Plugins, Vec<report::PluginIdentity>), String> {
    let pick = |arg: Option<String>, wanted: bool, role: &str| -> Result<Option<PathBuf>, String> {
        match arg {
            Some(a) => Ok(Some(crate::registry::resolve_plugin(&a, role)?)),
            None if wanted => Ok(Some(crate::registry::resolve_plugin("reference", role)?)),
            None => Ok(None),
        }
    };
    let p = pick(producer, target.wants_producer(), "producer")?;
    let c = pick(consumer, target.wants_consumer(), "consumer")?;
    let loaded = Plugins::load(p.as_deref(), c.as_deref())?;
    let mut ids = Vec::new();
    if let Some(p) = &loaded.producer {
        ids.push(crate::run::worker::identity("producer", p));
    }
    if let Some(c) = &loaded.consumer {
        ids.push(crate::run::worker::identity("consumer", c));
    }
    Ok((loaded, ids))
}

fn empty_report(command: &str, started: SystemTime) -> Report {
    Report {
        finished_at: report::time::rfc3339(SystemTime::now()),
        complete: true,
        devices: vec!["cpu".into()],
        ..Report::begun(
            command,
            std::env::args().collect(),
            started,
            "fuzz inputs".into(),
        )
    }
}

/// Replays saved inputs of `target` in this process (a debugger sees a
/// crash): each artifact's line goes to `say`; the report (written to
/// `report_path` when given) and how many inputs were findings.
pub fn replay(
    target: Target,
    artifacts: &[String],
    producer: Option<String>,
    consumer: Option<String>,
    report_path: Option<PathBuf>,
    say: &mut dyn FnMut(String),
) -> Result<(Report, usize), String> {
    let started = SystemTime::now();
    let clock = Instant::now();
    let (loaded, ids) = plugins(target, producer.clone(), consumer.clone())?;
    let mut out = empty_report("replay", started);
    out.plugins = ids;
    let mut findings = 0;
    for a in artifacts {
        let bytes = std::fs::read(a).map_err(|e| format!("{a}: {e}"))?;
        match fuzz::check(target, &bytes, &loaded) {
            Outcome::Ignored(why) => say(format!("{a}: no case ({why})")),
            Outcome::Checked(case) => {
                let mut case = *case;
                case.replay = replay_command(target, a, producer.as_deref(), consumer.as_deref());
                if fuzz::is_finding(&case) {
                    findings += 1;
                    say(format!("{a}: {}", fuzz::describe(target, &case)));
                } else {
                    say(format!("{a}: {} {}", case.id, case.verdict.as_str()));
                }
                out.cases.push(case);
            }
        }
    }
    out.planned = out.cases.len() as u64;
    out.summary = Summary::of(&out.cases);
    out.duration_ms = clock.elapsed().as_millis() as u64;
    out.finished_at = report::time::rfc3339(SystemTime::now());
    if let Some(p) = report_path {
        report::write(&out, &p).map_err(|e| format!("{}: {e}", p.display()))?;
    }
    Ok((out, findings))
}

/// The command that replays one artifact.
fn replay_command(
    target: Target,
    artifact: &str,
    producer: Option<&str>,
    consumer: Option<&str>,
) -> String {
    let mut cmd = format!("arrowcert replay --fuzz {target}");
    if let Some(p) = producer {
        cmd.push_str(&format!(" --producer {p}"));
    }
    if let Some(c) = consumer {
        cmd.push_str(&format!(" --consumer {c}"));
    }
    format!("{cmd} {artifact}")
}

/// What `scripts/fuzz/run.sh` writes beside a run's corpus (`run.json`).
#[derive(Debug, serde::Deserialize)]
struct RunMeta {
    target: String,
    #[serde(default)]
    producer: String,
    #[serde(default)]
    consumer: String,
    seconds: f64,
    executions: u64,
    #[serde(default)]
    corpus: u64,
    exit_code: i32,
    command: String,
}

/// A nightly fuzzing directory (`runs`: one folder per target and plugin)
/// into one report, written to `out_path`: a [`FuzzRun`] per folder, and a
/// case per minimised finding, replayed in a child process.
pub fn report(runs: &Path, out_path: &Path) -> Result<Report, String> {
    let started = SystemTime::now();
    let clock = Instant::now();
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(runs)
        .map_err(|e| format!("{}: {e}", runs.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("run.json").is_file())
        .collect();
    dirs.sort();
    if dirs.is_empty() {
        return Err(format!(
            "{}: no fuzz runs (folders with a run.json)",
            runs.display()
        ));
    }
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let mut out = empty_report("fuzz-report", started);
    for dir in &dirs {
        let meta_path = dir.join("run.json");
        let meta: RunMeta = std::fs::read_to_string(&meta_path)
            .map_err(|e| e.to_string())
            .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
            .map_err(|e| format!("{}: {e}", meta_path.display()))?;
        let target = Target::parse(&meta.target)
            .ok_or_else(|| format!("{}: unknown target {}", meta_path.display(), meta.target))?;
        let mut found: Vec<PathBuf> = std::fs::read_dir(dir.join("findings"))
            .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default();
        found.sort();
        for f in &found {
            out.cases.push(replay_isolated(&exe, target, &meta, f));
        }
        let plugin = [meta.producer.as_str(), meta.consumer.as_str()]
            .into_iter()
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join(" + ");
        out.fuzz.push(FuzzRun {
            target: meta.target.clone(),
            plugin,
            seconds: meta.seconds,
            executions: meta.executions,
            executions_per_second: if meta.seconds > 0.0 {
                (meta.executions as f64 / meta.seconds * 10.0).round() / 10.0
            } else {
                0.0
            },
            corpus: meta.corpus,
            findings: found.len() as u64,
            outcome: if !found.is_empty() {
                "findings".into()
            } else if meta.exit_code == 0 {
                "clean".into()
            } else {
                format!(
                    "the fuzzer exited with {} and left no finding",
                    meta.exit_code
                )
            },
            command: meta.command.clone(),
        });
    }
    out.planned = out.cases.len() as u64;
    out.summary = Summary::of(&out.cases);
    out.duration_ms = clock.elapsed().as_millis() as u64;
    out.finished_at = report::time::rfc3339(SystemTime::now());
    report::write(&out, out_path).map_err(|e| format!("{}: {e}", out_path.display()))?;
    Ok(out)
}

/// Replays one finding in a child `arrowcert replay --fuzz`; a child that
/// dies gives a `crash` case with what it printed.
fn replay_isolated(exe: &Path, target: Target, meta: &RunMeta, artifact: &Path) -> Case {
    let tmp = artifact.with_extension("replay.json");
    let mut cmd = std::process::Command::new(exe);
    cmd.args(["replay", "--fuzz", target.name()]);
    let (p, c) = (
        (!meta.producer.is_empty()).then_some(meta.producer.as_str()),
        (!meta.consumer.is_empty()).then_some(meta.consumer.as_str()),
    );
    if let Some(p) = p {
        cmd.args(["--producer", p]);
    }
    if let Some(c) = c {
        cmd.args(["--consumer", c]);
    }
    cmd.arg("--report").arg(&tmp).arg(artifact);
    let art = artifact.display().to_string();
    let name = artifact
        .file_name()
        .map_or(art.clone(), |n| n.to_string_lossy().into_owned());
    let replay = format!(
        "cargo fuzz run {target} {art}   # or: {}",
        replay_command(target, &art, p, c)
    );
    let ran = cmd.output();
    let from_child = report::read(&tmp)
        .ok()
        .and_then(|r| r.cases.into_iter().next());
    let _ = std::fs::remove_file(&tmp);
    let mut case = match (ran, from_child) {
        (Ok(o), Some(case)) if o.status.code().is_some() => case,
        (Ok(o), _) => {
            let text = String::from_utf8_lossy(&o.stderr).into_owned()
                + &String::from_utf8_lossy(&o.stdout);
            let (verdict, message) = match o.status.code() {
                None => (
                    Verdict::Crash,
                    "the replay died by a signal (the input crashes the plugin or the harness)"
                        .into(),
                ),
                Some(c) => (
                    Verdict::Error,
                    format!("the replay exited with {c} and wrote no case"),
                ),
            };
            Case {
                output: Some(report::bounded(&text, 16 * 1024)),
                ..unreplayed(target, &name, verdict, message)
            }
        }
        (Err(e), _) => unreplayed(
            target,
            &name,
            Verdict::Error,
            format!("cannot run the replay: {e}"),
        ),
    };
    case.id = format!("fuzz/{target}/{name}/{}", case.id);
    case.replay = replay;
    case
}

/// Seed inputs written into `out/<target>/`; how many.
pub fn corpus(out: &Path, gold: Option<&Path>, generated: u64) -> Result<usize, String> {
    let seeds = fuzz::corpus(gold, generated)?;
    for t in Target::ALL {
        let dir = out.join(t.name());
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    for (t, name, bytes) in &seeds {
        let p = out.join(t.name()).join(name);
        std::fs::write(&p, bytes).map_err(|e| format!("{}: {e}", p.display()))?;
    }
    Ok(seeds.len())
}

/// The case of a finding whose replay gave no case of its own.
fn unreplayed(target: Target, name: &str, verdict: Verdict, message: String) -> Case {
    Case {
        id: format!("fuzz/{target}/{name}"),
        path: target.name().into(),
        scenario: String::new(),
        batch: None,
        slice: None,
        verdict,
        message: Some(message),
        differences: Vec::new(),
        duration_us: 0,
        replay: String::new(),
        output: None,
        checked: Vec::new(),
        violations: Vec::new(),
        not_exercised: Vec::new(),
        flaky: Vec::new(),
        view: None,
        changed: Vec::new(),
    }
}

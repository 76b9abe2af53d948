//! `arrowcert certify --producer LIB`: rule-by-rule verdicts on a
//! producer's export paths, with evidence, the smallest failing generated
//! scenario, and a replay command for every failure. `arrowcert replay`
//! reruns chosen cases of such a run.

use std::cell::RefCell;
use std::path::PathBuf;
use std::time::{Instant, SystemTime};

use super::progress::Progress;
use super::words::{resume_command, shell_word, verdict_word};
use super::BadInput;
use crate::certify::{self, summary, CaseSpec};
use crate::device::Kind as DeviceKind;
use crate::gen::{self, shrink};
use crate::plugin::Plugin;
use crate::report::{self, outcome, Case, PluginIdentity, Report, ShrunkFailure, Summary, Verdict};
use crate::roundtrip::Filter;
use crate::run::checkpoint::{not_yet_run, resumable, Checkpoint};
use crate::run::{self, worker::identity};
use crate::scenario::Scenario;
use crate::sources::Sources;

/// At most this many failures are shrunk per run (MUST rules first).
pub const MAX_SHRINKS: usize = 8;

/// A plugin under test: where it is, and how the user named it.
#[derive(Debug, Clone)]
pub struct Lib {
    pub path: PathBuf,
    pub arg: String,
}

pub struct Args {
    /// The producer to certify (its side runs when given).
    pub producer: Option<Lib>,
    /// The consumer to certify (its side runs when given).
    pub consumer: Option<Lib>,
    /// Built-in, gold and generated scenarios (`--cases`, `--seed`).
    pub sources: Sources,
    pub report: Option<PathBuf>,
    pub junit: Option<PathBuf>,
    /// `--expectations FILE`, read: the run passes when its results match.
    pub expectations: Option<(PathBuf, crate::report::expectations::Expectations)>,
    pub filter: Filter,
    pub list: bool,
    pub verbose: bool,
    pub invocation: Vec<String>,
    /// Worker processes; 0 runs in this process.
    pub jobs: usize,
    pub case_timeout_ms: u64,
    pub max_memory_mb: u64,
    /// How hard to shrink failures on generated scenarios (0 candidates:
    /// not at all).
    pub shrink: shrink::Budget,
    /// `arrowcert replay`: print every violation in full, no shrinking, no
    /// report file unless `report` names one.
    pub replay: bool,
    /// Continue the interrupted run of this report (same producer file,
    /// same data and seed): its cases are kept, the rest run.
    pub resume: Option<PathBuf>,
    /// The device types the run covers (`--device`); `None`: the CPU and
    /// every other device type this machine has.
    pub devices: Option<Vec<DeviceKind>>,
    /// Device types that must be present (`--require-device`): a missing
    /// one is an error, not skipped cases.
    pub require_devices: Vec<DeviceKind>,
}

/// The device types a run covers, and a line on the ones left out.
fn devices_of(args: &Args) -> Result<(Vec<DeviceKind>, Vec<String>), BadInput> {
    let mut devices: Vec<DeviceKind> = match &args.devices {
        Some(d) => d.clone(),
        None => DeviceKind::ALL
            .into_iter()
            .filter(|&k| k == DeviceKind::Cpu || crate::device::available(k).is_ok())
            .collect(),
    };
    for &r in &args.require_devices {
        if let Err(why) = crate::device::available(r) {
            return Err(BadInput(format!(
                "--require-device {r}: this machine has no {r} device: {why}"
            )));
        }
        if !devices.contains(&r) {
            devices.push(r);
        }
    }
    devices.sort();
    devices.dedup();
    let left_out = DeviceKind::ALL
        .into_iter()
        .filter(|k| !devices.contains(k))
        .map(|k| match crate::device::available(k) {
            Ok(()) => format!("{k}: not selected"),
            Err(why) => format!("{k}: {why}"),
        })
        .collect();
    Ok((devices, left_out))
}

/// The command that reruns one case of this run (the case ID follows).
fn replay_prefix(args: &Args) -> String {
    let mut replay = "arrowcert replay".to_string();
    if let Some(p) = &args.producer {
        replay.push_str(&format!(" --producer {}", shell_word(&p.arg)));
    }
    if let Some(c) = &args.consumer {
        replay.push_str(&format!(" --consumer {}", shell_word(&c.arg)));
    }
    if let Some(dir) = &args.sources.gold {
        replay.push_str(&format!(
            " --gold {}",
            shell_word(&dir.display().to_string())
        ));
    }
    replay.push_str(&format!(" --seed {}", args.sources.seed));
    replay
}

/// Runs planned cases, in this process or in workers.
struct Engine<'a> {
    args: &'a Args,
    opts: certify::Options,
    /// Loaded once when cases run in this process.
    producer: Option<Plugin>,
    consumer: Option<Plugin>,
}

impl Engine<'_> {
    /// Runs `selected` cases of `plan` over `scenarios` (as `sources`
    /// loads them); returns the signal that interrupted the run, if any.
    /// `plan[..planned]` is what workers plan themselves; specs after it
    /// are async cases spelled out by their IDs.
    #[allow(clippy::too_many_arguments)]
    fn run(
        &self,
        sources: &Sources,
        scenarios: &[Scenario],
        plan: &[CaseSpec],
        planned: usize,
        selected: &[usize],
        ready: &mut dyn FnMut(&[PluginIdentity]),
        on_case: &mut dyn FnMut(&Case),
    ) -> Result<Option<i32>, BadInput> {
        if self.args.jobs == 0 {
            let mut ids = Vec::new();
            if let Some(p) = &self.producer {
                ids.push(identity("producer", p));
            }
            if let Some(c) = &self.consumer {
                ids.push(identity("consumer", c));
            }
            ready(&ids);
            let plugins = certify::Plugins {
                producer: self.producer.as_ref(),
                consumer: self.consumer.as_ref(),
            };
            for &i in selected {
                if run::proc::interrupted().is_some() {
                    break;
                }
                let spec = &plan[i];
                let scenario = &scenarios[spec.scenario];
                on_case(&run::panic::guarded(
                    &spec.id,
                    || certify::record(scenario, spec, &self.opts),
                    || certify::run_case(plugins, scenario, spec, &self.opts),
                ));
            }
            return Ok(run::proc::interrupted());
        }
        let worker_args = run::worker::WorkerArgs {
            socket: PathBuf::new(),
            mode: run::worker::Mode::Certify,
            producer: self.args.producer.as_ref().map(|l| l.path.clone()),
            consumer: self.args.consumer.as_ref().map(|l| l.path.clone()),
            sources: sources.clone(),
            options: crate::roundtrip::Options {
                replay_prefix: self.opts.replay_prefix.clone(),
                ..Default::default()
            },
            limits: run::proc::Limits::worker(self.args.max_memory_mb),
            cpu_seconds: None,
        };
        let cfg = run::Config::for_workers(
            worker_args,
            self.args.jobs.min(selected.len()).max(1),
            self.args.case_timeout_ms,
            self.args.max_memory_mb,
        )
        .map_err(|e| BadInput(format!("cannot find the arrowcert executable: {e}")))?;
        let jobs: Vec<run::Job> = selected
            .iter()
            .map(|&index| run::Job {
                index,
                record: certify::record(&scenarios[plan[index].scenario], &plan[index], &self.opts),
            })
            .collect();
        // A crash or hang is charged to the rule its case exercises.
        let specs: std::collections::HashMap<&str, &CaseSpec> = selected
            .iter()
            .map(|&i| (plan[i].id.as_str(), &plan[i]))
            .collect();
        let outcome = run::run(
            &cfg,
            planned,
            jobs,
            |p| ready(p),
            |c| match specs.get(c.id.as_str()) {
                Some(spec) if matches!(c.verdict, Verdict::Crash | Verdict::Timeout) => {
                    let mut charged = c.clone();
                    certify::crash::charge(spec, &mut charged);
                    on_case(&charged)
                }
                _ => on_case(c),
            },
        );
        let _ = std::fs::remove_dir_all(&cfg.scratch);
        Ok(outcome
            .map_err(|run::StartError(why)| BadInput(format!("cannot run the plugin: {why}")))?
            .interrupted)
    }
}

/// Runs the command; returns the exit code (0: every MUST rule holds).
pub fn run(args: Args) -> Result<i32, BadInput> {
    let sources = &args.sources;
    let scenarios = sources.load().map_err(BadInput)?;
    let data = sources.describe();
    let opts = certify::Options {
        replay_prefix: replay_prefix(&args),
        ..Default::default()
    };
    let sides = args.sides();
    let (devices, left_out) = devices_of(&args)?;
    let mut plan = certify::plan(&scenarios, sides, sources.seed);
    let planned = plan.len();
    // An async case ID that is not planned (a shrunk schedule) spells out
    // its schedule: run it as asked.
    for p in &args.filter.patterns {
        if !plan.iter().any(|s| &s.id == p) {
            if let Some(spec) = certify::spec_for(&[], &scenarios, p) {
                plan.push(spec);
            }
        }
    }
    if args.list {
        for spec in plan
            .iter()
            .filter(|s| devices.contains(&s.device) && args.filter.selects(&s.id))
        {
            println!("{}: case", spec.id);
        }
        return Ok(0);
    }
    let selected: Vec<usize> = (0..plan.len())
        .filter(|&i| devices.contains(&plan[i].device) && args.filter.selects(&plan[i].id))
        .collect();
    let previous = match &args.resume {
        Some(path) => {
            let mut plugins: Vec<(&str, &std::path::Path)> = Vec::new();
            if let Some(p) = &args.producer {
                plugins.push(("producer", &p.path));
            }
            if let Some(c) = &args.consumer {
                plugins.push(("consumer", &c.path));
            }
            Some(resumable(path, "certify", &data, &plugins).map_err(BadInput)?)
        }
        None => None,
    };
    let todo = not_yet_run(previous.as_ref(), &selected, |i| &plan[i].id);
    if args.replay && selected.is_empty() {
        return Err(BadInput(format!(
            "no case of {} matches {}",
            data,
            args.filter.patterns.join(" ")
        )));
    }

    let started = SystemTime::now();
    let clock = Instant::now();
    let path = match (args.report.as_ref().or(args.resume.as_ref()), args.replay) {
        (Some(p), _) => Some(p.clone()),
        (None, true) => None,
        (None, false) => Some(
            PathBuf::from("reports")
                .join(format!("certify-{}.json", report::time::compact(started))),
        ),
    };
    let checkpoint = RefCell::new(Checkpoint {
        report: Report {
            report_version: report::REPORT_VERSION,
            tool: Default::default(),
            command: if args.replay { "replay" } else { "certify" }.into(),
            invocation: args.invocation.clone(),
            started_at: report::time::rfc3339(started),
            finished_at: report::time::rfc3339(started),
            duration_ms: 0,
            complete: false,
            planned: selected.len() as u64,
            interrupted: None,
            plugins: Vec::new(),
            data: data.clone(),
            devices: devices.iter().map(|d| d.name().to_string()).collect(),
            // Kept cases stay; the start and invocation become this run's.
            cases: previous.map(|r| r.cases).unwrap_or_default(),
            summary: Summary::default(),
            rules: Vec::new(),
            seed: scenarios
                .iter()
                .any(|s| s.name.starts_with(gen::PREFIX))
                .then_some(sources.seed),
            shrunk: Vec::new(),
            fuzz: Vec::new(),
            outcome: None,
            limitations: Vec::new(),
            expectations: None,
        },
        path: path.clone().unwrap_or_default(),
        position: plan
            .iter()
            .enumerate()
            .map(|(i, s)| (s.id.clone(), i))
            .collect(),
        last: Instant::now(),
        error: None,
        disabled: path.is_none(),
    });
    if todo.len() < selected.len() {
        println!(
            "resuming {}: {} of {} cases already ran",
            path.as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            selected.len() - todo.len(),
            selected.len()
        );
    }
    run::proc::catch_interrupts();
    let load = |lib: &Option<Lib>| -> Result<Option<Plugin>, BadInput> {
        match lib {
            Some(l) if args.jobs == 0 => Plugin::load(&l.path)
                .map(Some)
                .map_err(|e| BadInput(e.to_string())),
            _ => Ok(None),
        }
    };
    let engine = Engine {
        args: &args,
        opts,
        producer: load(&args.producer)?,
        consumer: load(&args.consumer)?,
    };
    let how = if args.jobs == 0 {
        "in this process".to_string()
    } else {
        format!("{} worker processes", args.jobs)
    };
    let progress = RefCell::new(Progress::new(todo.len()));
    let mut ready = |plugins: &[PluginIdentity]| {
        let who: Vec<String> = plugins
            .iter()
            .map(|p| format!("{} {}", p.role, p.name))
            .collect();
        println!(
            "arrowcert {}: {} ({} cases over {} scenarios from {data}, {how})",
            if args.replay { "replay" } else { "certify" },
            who.join(", "),
            selected.len(),
            scenarios.len()
        );
        if !args.replay {
            println!(
                "devices: {}{}",
                devices
                    .iter()
                    .map(|d| d.name())
                    .collect::<Vec<_>>()
                    .join(", "),
                if left_out.is_empty() {
                    String::new()
                } else {
                    format!(" (not covered: {})", left_out.join("; "))
                }
            );
        }
        checkpoint.borrow_mut().report.plugins = plugins.to_vec();
    };
    let mut on_case = |c: &Case| {
        let failed = !matches!(
            c.verdict,
            Verdict::Pass | Verdict::Skip | Verdict::Limitation
        );
        if args.verbose || args.replay || failed {
            progress.borrow_mut().clear();
            println!("case {} ... {}", c.id, verdict_word(c));
            if args.replay {
                print_evidence(c);
            }
        }
        progress.borrow_mut().tick(failed);
        checkpoint.borrow_mut().add(c);
    };
    let interrupted = engine.run(
        sources,
        &scenarios,
        &plan,
        planned,
        &todo,
        &mut ready,
        &mut on_case,
    )?;
    progress.borrow_mut().clear();

    // Shrink what failed on generated scenarios, then write the report.
    let shrunk = if interrupted.is_none() && !args.replay && args.shrink.candidates > 0 {
        let report = &checkpoint.borrow().report;
        let mut out = shrink_failures(
            &engine,
            report,
            &scenarios,
            &plan,
            sources,
            args.shrink,
            sides,
        )?;
        out.extend(shrink_schedules(
            &engine,
            report,
            &scenarios,
            &plan,
            sources,
            args.shrink,
            sides,
        )?);
        out
    } else {
        Vec::new()
    };
    let interrupted = interrupted.or_else(run::proc::interrupted);
    let report = checkpoint
        .into_inner()
        .finish(interrupted, clock, |r| {
            r.rules = summary::rule_verdicts(&r.cases, sides);
            r.shrunk = shrunk;
            let judged = outcome::judge(&outcome::Run {
                cases: &r.cases,
                rules: &r.rules,
                planned: r.planned,
                complete: r.complete,
                data_rules: outcome::DATA_RULES,
            });
            r.expectations = args.expectations.as_ref().map(|(path, exp)| {
                report::expectations::check(r, exp, &path.display().to_string())
            });
            r.outcome = Some(match &r.expectations {
                Some(checked) => outcome::with_expectations(judged, checked),
                None => judged,
            });
        })
        .map_err(BadInput)?;
    print!(
        "{}",
        summary::render(&report.rules, &report.cases, &report.shrunk)
    );
    let s = &report.summary;
    let judgement = report.outcome.clone().expect("finish judged the run");
    println!(
        "\n{} result: {}. {} cases: {} passed; {} failed; {} errors; {} crashed; {} timed out; {} limitations; {} skipped{}; finished in {:.2}s",
        if args.replay { "replay" } else { "certify" },
        judgement.outcome.words(),
        s.total,
        s.passed,
        s.failed,
        s.errors,
        s.crashed,
        s.timed_out,
        s.limitations,
        s.skipped,
        if s.harness_errors > 0 {
            format!("; {} harness errors", s.harness_errors)
        } else {
            String::new()
        },
        report.duration_ms as f64 / 1000.0
    );
    for reason in &judgement.reasons {
        println!("  {}", report::printable(reason));
    }
    print_unused_expectations(&report);
    if let Some(seed) = report.seed {
        println!("seed: {seed} (--seed {seed} draws the same generated scenarios)");
    }
    if let Some(junit) = &args.junit {
        let xml = summary::junit(
            &report.rules,
            &report.cases,
            &format!("arrowcert certify {}", args.subjects()),
        );
        std::fs::write(junit, xml)
            .map_err(|e| BadInput(format!("{}: cannot write JUnit XML: {e}", junit.display())))?;
    }
    if let Some(path) = &path {
        println!("report: {}", path.display());
    }
    if let Some(sig) = interrupted {
        println!(
            "interrupted by {}: {} of {} cases ran; the report is marked incomplete",
            run::proc::signal_name(sig),
            report.cases.len(),
            selected.len()
        );
        if let Some(path) = &path {
            println!(
                "resume with: {} --resume {}",
                resume_command(&args.invocation),
                shell_word(&path.display().to_string())
            );
        }
        return Ok(128 + sig);
    }
    // Crashes, hangs and errors are failures too; nothing exercised is
    // not a pass (report::outcome).
    Ok(judgement.exit_code())
}

/// Every violation of a case, in full (what `arrowcert replay` shows).
fn print_evidence(c: &Case) {
    if let Some(m) = &c.message {
        println!("  {}", report::printable(m));
    }
    for v in &c.violations {
        println!(
            "  {} {} at {}: {}",
            v.level,
            v.rule,
            v.at,
            report::printable(&v.evidence)
        );
    }
}

/// What a shrink is after: a rule broken, or the process dying.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    Rule(String),
    Crash,
}

impl Target {
    fn name(&self) -> &str {
        match self {
            Target::Rule(r) => r,
            Target::Crash => "crash",
        }
    }

    fn shown_by(&self, c: &Case) -> bool {
        match self {
            Target::Rule(r) => c.violations.iter().any(|v| &v.rule == r),
            Target::Crash => matches!(c.verdict, Verdict::Crash | Verdict::Timeout),
        }
    }

    fn evidence(&self, c: &Case) -> String {
        match self {
            Target::Rule(r) => c
                .violations
                .iter()
                .find(|v| &v.rule == r)
                .map(|v| format!("{}: {}", v.at, v.evidence))
                .unwrap_or_default(),
            Target::Crash => c.message.clone().unwrap_or_default(),
        }
    }
}

/// The failures worth shrinking: each failing rule (MUST first, INFO
/// never) and crashes, with the first generated case that showed it.
fn targets(report: &Report, sides: certify::Sides) -> Vec<(Target, &Case)> {
    let rules = summary::rule_verdicts(&report.cases, sides);
    let mut failing: Vec<_> = rules
        .iter()
        .filter(|r| r.verdict == Verdict::Fail && r.level != "INFO")
        .collect();
    failing.sort_by_key(|r| r.level != "MUST");
    // Async cases shrink their schedule instead (shrink_schedules).
    let generated = |c: &&Case| {
        !is_async(&c.id) && gen::parse_name(&c.scenario).is_some_and(|(_, walk)| walk.is_empty())
    };
    let mut out: Vec<(Target, &Case)> = Vec::new();
    let crash = Target::Crash;
    if let Some(c) = report
        .cases
        .iter()
        .filter(generated)
        .find(|c| crash.shown_by(c))
    {
        out.push((crash, c));
    }
    for r in failing {
        let t = Target::Rule(r.rule.clone());
        if let Some(c) = report
            .cases
            .iter()
            .filter(generated)
            .find(|c| t.shown_by(c))
        {
            out.push((t, c));
        }
    }
    out.truncate(MAX_SHRINKS);
    out
}

/// Shrinks each failure seen on a generated scenario to the smallest
/// scenario (on the same path) that still shows it.
fn shrink_failures(
    engine: &Engine,
    report: &Report,
    scenarios: &[Scenario],
    plan: &[CaseSpec],
    sources: &Sources,
    budget: shrink::Budget,
    sides: certify::Sides,
) -> Result<Vec<ShrunkFailure>, BadInput> {
    let mut out = Vec::new();
    for (target, first) in targets(report, sides) {
        let Some((index, _)) = gen::parse_name(&first.scenario) else {
            continue;
        };
        let Some(path) = plan.iter().find(|s| s.id == first.id).map(|s| s.path) else {
            continue;
        };
        if run::proc::interrupted().is_some() {
            break;
        }
        let mut smallest: Option<(Case, String)> = None;
        let mut error = None;
        let result = shrink::shrink(sources.seed, index, budget, |candidate| {
            if error.is_some() || run::proc::interrupted().is_some() {
                return false;
            }
            let cands = std::slice::from_ref(candidate);
            let cplan = certify::plan(cands, sides, sources.seed);
            let selected: Vec<usize> = (0..cplan.len())
                .filter(|&i| cplan[i].path == path)
                .collect();
            let only = Sources {
                builtin: false,
                gold: None,
                generated: 0,
                seed: sources.seed,
                only: Some(vec![candidate.name.clone()]),
            };
            let mut hit: Option<Case> = None;
            let ran = engine.run(
                &only,
                cands,
                &cplan,
                cplan.len(),
                &selected,
                &mut |_| {},
                &mut |c| {
                    if hit.is_none() && target.shown_by(c) {
                        hit = Some(c.clone());
                    }
                },
            );
            if let Err(e) = ran {
                error = Some(e);
                return false;
            }
            match hit {
                Some(c) => {
                    smallest = Some((c, gen::describe(candidate)));
                    true
                }
                None => false,
            }
        })
        .map_err(BadInput)?;
        if let Some(e) = error {
            return Err(e);
        }
        let (case, scenario) = smallest.unwrap_or_else(|| {
            let s = scenarios.iter().find(|s| s.name == first.scenario);
            (first.clone(), s.map(gen::describe).unwrap_or_default())
        });
        out.push(ShrunkFailure {
            target: target.name().to_string(),
            from_case: first.id.clone(),
            evidence: report::bounded(&target.evidence(&case), 4096),
            replay: case.replay.clone(),
            case: case.id,
            scenario,
            tried: result.tried as u64,
            steps: result.steps as u64,
            exhausted: result.exhausted,
        });
    }
    Ok(out)
}

fn is_async(id: &str) -> bool {
    id.starts_with("producer/async/") || id.starts_with("consumer/async/")
}

/// Shrinks each async rule failure to the shortest schedule (same
/// scenario) that still shows it: one simplification at a time
/// ([`Schedule::simpler`], [`Delivery::simpler`]), keeping each that still
/// fails, until none does.
///
/// [`Schedule::simpler`]: crate::asynchronous::schedule::Schedule::simpler
/// [`Delivery::simpler`]: crate::asynchronous::schedule::Delivery::simpler
fn shrink_schedules(
    engine: &Engine,
    report: &Report,
    scenarios: &[Scenario],
    plan: &[CaseSpec],
    sources: &Sources,
    budget: shrink::Budget,
    sides: certify::Sides,
) -> Result<Vec<ShrunkFailure>, BadInput> {
    use crate::certify::Path;
    let rules = summary::rule_verdicts(&report.cases, sides);
    let mut out = Vec::new();
    let started = Instant::now();
    for r in rules.iter().filter(|r| {
        r.verdict == Verdict::Fail
            && r.level != "INFO"
            && (r.rule.starts_with("async.") || r.rule.starts_with("consumer.async."))
    }) {
        if out.len() >= MAX_SHRINKS || run::proc::interrupted().is_some() {
            break;
        }
        let target = Target::Rule(r.rule.clone());
        let Some(first) = report
            .cases
            .iter()
            .find(|c| is_async(&c.id) && target.shown_by(c))
        else {
            continue;
        };
        let Some(spec) = certify::spec_for(plan, scenarios, &first.id) else {
            continue;
        };
        let scenario = &scenarios[spec.scenario];
        // The scenario may be a gold one: workers rebuild it from the
        // directory (a regression: `--gold` was lost here, and a gold
        // scenario's async failure ended the run with bad input).
        let only = Sources {
            builtin: false,
            gold: sources.gold.clone(),
            generated: 0,
            seed: sources.seed,
            only: Some(vec![scenario.name.clone()]),
        };
        let cands = std::slice::from_ref(scenario);
        let base = certify::plan(cands, sides, sources.seed);
        let (mut best, mut best_case) = (spec.path, first.clone());
        let (mut tried, mut steps, mut exhausted) = (0u64, 0u64, false);
        'walk: loop {
            let next: Vec<Path> = match best {
                Path::Async(s) => s.simpler().into_iter().map(Path::Async).collect(),
                Path::AsyncConsumer(d) => {
                    d.simpler().into_iter().map(Path::AsyncConsumer).collect()
                }
                _ => Vec::new(),
            };
            for cand in next {
                if tried as usize >= budget.candidates || started.elapsed() > budget.time {
                    exhausted = true;
                    break 'walk;
                }
                tried += 1;
                let id = match cand {
                    Path::Async(s) => format!("producer/async/{s}/{}", scenario.name),
                    Path::AsyncConsumer(d) => format!("consumer/async/{d}/{}", scenario.name),
                    _ => unreachable!("async paths only"),
                };
                let mut cplan = base.clone();
                let index = match cplan.iter().position(|s| s.id == id) {
                    Some(i) => i,
                    None => {
                        let Some(spec) = certify::spec_for(&[], cands, &id) else {
                            continue;
                        };
                        cplan.push(spec);
                        cplan.len() - 1
                    }
                };
                let mut hit: Option<Case> = None;
                engine.run(
                    &only,
                    cands,
                    &cplan,
                    base.len(),
                    &[index],
                    &mut |_| {},
                    &mut |c| {
                        if hit.is_none() && target.shown_by(c) {
                            hit = Some(c.clone());
                        }
                    },
                )?;
                if let Some(c) = hit {
                    best = cand;
                    best_case = c;
                    steps += 1;
                    continue 'walk;
                }
            }
            break;
        }
        out.push(ShrunkFailure {
            target: target.name().to_string(),
            from_case: first.id.clone(),
            evidence: report::bounded(&target.evidence(&best_case), 4096),
            replay: best_case.replay.clone(),
            case: best_case.id.clone(),
            scenario: gen::describe(scenario),
            tried,
            steps,
            exhausted,
        });
    }
    Ok(out)
}

impl Args {
    /// The sides this run certifies.
    pub fn sides(&self) -> certify::Sides {
        certify::Sides {
            producer: self.producer.is_some(),
            consumer: self.consumer.is_some(),
        }
    }

    /// `--producer X --consumer Y`, as given.
    fn subjects(&self) -> String {
        let mut out = Vec::new();
        if let Some(p) = &self.producer {
            out.push(format!("--producer {}", p.arg));
        }
        if let Some(c) = &self.consumer {
            out.push(format!("--consumer {}", c.arg));
        }
        out.join(" ")
    }
}

/// The scenario name inside a certification case ID
/// (`producer/<path>/<scenario>[/batch:<i>[/slice:<o>+<l>]]` or
/// `consumer/<kind>/<variant>/<scenario>[/batch:<i>]`).
pub fn scenario_of(case_id: &str) -> Option<String> {
    // producer/device:<kind>/..., consumer/device:<kind>/...: the device
    // segment is not part of the path.
    let without_device;
    let case_id = match case_id.split_once("/device:") {
        Some((side, rest)) if !side.contains('/') => {
            without_device = format!("{side}/{}", rest.split_once('/')?.1);
            without_device.as_str()
        }
        _ => case_id,
    };
    let rest = match case_id.strip_prefix("producer/") {
        // producer/async/<schedule>/<scenario>: skip the schedule.
        Some(rest) if rest.starts_with("async/") => rest.split_once('/')?.1,
        Some(rest) => rest,
        None => {
            let rest = case_id.strip_prefix("consumer/")?;
            rest.split_once('/')?.1
        }
    };
    let (_, rest) = rest.split_once('/')?;
    let name = match rest.find("/batch:") {
        Some(i) => &rest[..i],
        None => rest,
    };
    (!name.is_empty()).then(|| name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenario_names_come_out_of_case_ids() {
        assert_eq!(
            scenario_of("producer/array/gen/17@s3c1/batch:0/slice:1+2").as_deref(),
            Some("gen/17@s3c1")
        );
        assert_eq!(
            scenario_of("producer/stream/gold/generated_map").as_deref(),
            Some("gold/generated_map")
        );
        assert_eq!(
            scenario_of("producer/schema/primitive").as_deref(),
            Some("primitive")
        );
        assert_eq!(scenario_of("roundtrip/x"), None);
        assert_eq!(
            scenario_of("consumer/array/varied/gen/3@s1/batch:0").as_deref(),
            Some("gen/3@s1")
        );
        assert_eq!(
            scenario_of("consumer/stream_error/next-EIO/primitive").as_deref(),
            Some("primitive")
        );
        assert_eq!(scenario_of("producer/array/"), None);
        assert_eq!(
            scenario_of("producer/async/r1,cancel@0:race/gen/4@s1").as_deref(),
            Some("gen/4@s1")
        );
        assert_eq!(
            scenario_of("consumer/async/each-thread,error@1/nested").as_deref(),
            Some("nested")
        );
    }
}

/// Expectations that matched nothing in this run (a filter left them out,
/// or the finding is gone and the entry is stale).
pub(super) fn print_unused_expectations(report: &Report) {
    if let Some(c) = report
        .expectations
        .as_ref()
        .filter(|c| !c.unused.is_empty())
    {
        println!(
            "  expectations of {} that matched nothing in this run: {}",
            c.file,
            c.unused.join(", ")
        );
    }
}

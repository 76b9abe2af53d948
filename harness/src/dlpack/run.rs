//! DLPack cases in worker processes: `arrowcert dlpack-worker` loads the
//! adapter once and runs the plan from a given case on, writing a line to
//! its results file before each case (`begin`) and after it (`done`, the
//! case). The orchestrator waits for it; a worker that dies (a library
//! that wrote into a read-only tensor, read an inaccessible one) or hangs
//! costs the case it had begun, which is reported as a crash or a timeout
//! (with the rule the case tests, where the case tests one), and a new
//! worker goes on from the next case. Each worker runs under the resource
//! limits of every worker (address space, open files, output size), in a
//! process group of its own that is killed as a whole, and dies with the
//! orchestrator.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::report::{Case, RuleViolation, Verdict};
use crate::roundtrip::Filter;
use crate::run::proc;

use super::bridge::Bridge;
use super::engine::{self, DlCase, Kind};

/// Which sides to certify.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sides {
    pub producer: bool,
    pub consumer: bool,
    /// A device besides the CPU whose consumer cases join the plan
    /// (`--device`): skipped with the reason where the machine has none.
    pub device: Option<crate::device::Kind>,
}

/// Generated cases (of each side certified): `count` drawn with `seed`, and `extra`
/// generated IDs given as they are (a shrink candidate, a replay).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Generated {
    pub seed: u64,
    pub count: u64,
    pub extra: Vec<String>,
}

/// The plan for `sides` (or the pair plan, `pairs`), with the generated
/// consumer cases, narrowed by `filter`.
pub fn planned(sides: Sides, pairs: bool, filter: &Filter, gen: &Generated) -> Vec<DlCase> {
    let mut plan = if pairs {
        engine::plan_pairs()
    } else {
        engine::plan(sides.producer, sides.consumer)
    };
    if let (true, false, Some(d)) = (sides.consumer, pairs, sides.device) {
        if d != crate::device::Kind::Cpu {
            plan.extend(engine::plan_device(d));
        }
    }
    if sides.consumer && !pairs {
        plan.extend(
            engine::generated(gen.seed, gen.count, engine::GenSide::Consumer)
                .into_iter()
                .map(|(_, c)| c),
        );
    }
    if sides.producer && !pairs {
        plan.extend(
            engine::generated(gen.seed, gen.count, engine::GenSide::Producer)
                .into_iter()
                .map(|(_, c)| c),
        );
    }
    if !pairs {
        for id in &gen.extra {
            let wanted = match engine::GenSide::of(id) {
                Some(engine::GenSide::Consumer) => sides.consumer,
                Some(engine::GenSide::Producer) => sides.producer,
                None => false,
            };
            if let Some(c) = engine::parse_generated(id).filter(|_| wanted) {
                if plan.iter().all(|p| p.id != c.id) {
                    plan.push(c);
                }
            }
        }
    }
    plan.into_iter().filter(|c| filter.selects(&c.id)).collect()
}

/// What a run needs.
#[derive(Debug, Clone)]
pub struct RunArgs {
    /// The prepared bridge copy of the adapter (the producer, for pairs).
    pub bridge: PathBuf,
    /// Pairs: the consumer library's bridge copy.
    pub pair_consumer: Option<PathBuf>,
    pub generated: Generated,
    pub sides: Sides,
    pub filter: Filter,
    pub max_memory_mb: u64,
    /// A case with no result after this long is a timeout.
    pub case_timeout_ms: u64,
    /// The replay command's prefix (`arrowcert certify --dlpack --producer py:X`).
    pub replay_prefix: String,
}

/// Runs every planned case in worker processes; returns the cases in plan
/// order.
pub fn run(args: &RunArgs) -> Result<Vec<Case>, String> {
    let plan = planned(
        args.sides,
        args.pair_consumer.is_some(),
        &args.filter,
        &args.generated,
    );
    let scratch = std::env::temp_dir().join(format!(
        "{}{}-dlpack",
        proc::SCRATCH_PREFIX,
        std::process::id()
    ));
    std::fs::create_dir_all(&scratch).map_err(|e| format!("{}: {e}", scratch.display()))?;
    // The allocation tracker, preloaded into the workers of a plan with a
    // frees case (dlpack.deleter.frees counts the bytes they hold), as into
    // the Arrow workers; ARROWCERT_TRACKER=off leaves it out (the rule is
    // then not exercised, with the reason).
    let wants = plan.iter().any(|c| matches!(c.kind, Kind::Frees { .. }));
    let tracker = (wants && crate::plugin::tracker::enabled())
        .then(|| crate::plugin::tracker::install(&scratch).ok())
        .flatten();
    let result = run_in(args, &plan, &scratch, tracker.as_deref());
    let _ = std::fs::remove_dir_all(&scratch);
    result
}

fn run_in(
    args: &RunArgs,
    plan: &[DlCase],
    scratch: &Path,
    tracker: Option<&Path>,
) -> Result<Vec<Case>, String> {
    let mut cases: Vec<Case> = Vec::with_capacity(plan.len());
    let mut next = 0usize;
    let mut starts = 0u32;
    while next < plan.len() {
        starts += 1;
        if starts > 200 {
            return Err("200 DLPack workers died; giving up".into());
        }
        let results = scratch.join(format!("results-{starts}"));
        let output = scratch.join(format!("output-{starts}"));
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let mut cmd = Command::new(exe);
        cmd.arg("dlpack-worker")
            .arg("--bridge")
            .arg(&args.bridge)
            .arg("--results")
            .arg(&results)
            .arg("--from")
            .arg(next.to_string())
            .arg("--max-memory-mb")
            .arg(args.max_memory_mb.to_string())
            .arg("--replay-prefix")
            .arg(&args.replay_prefix);
        if let Some(c) = &args.pair_consumer {
            cmd.arg("--pair-consumer").arg(c);
        }
        cmd.arg("--seed")
            .arg(args.generated.seed.to_string())
            .arg("--cases")
            .arg(args.generated.count.to_string());
        for id in &args.generated.extra {
            cmd.arg("--extra").arg(id);
        }
        if args.sides.producer {
            cmd.arg("--producer-side");
        }
        if args.sides.consumer {
            cmd.arg("--consumer-side");
        }
        if let Some(d) = args.sides.device {
            cmd.arg("--device").arg(d.name());
        }
        for p in &args.filter.patterns {
            cmd.arg("--filter").arg(p);
        }
        if args.filter.exact {
            cmd.arg("--exact");
        }
        for s in &args.filter.skip {
            cmd.arg("--skip").arg(s);
        }
        if let Some(t) = tracker {
            cmd.env("LD_PRELOAD", crate::plugin::tracker::preload_value(t));
        }
        // Python's debug allocator hooks in every worker (unless the caller
        // chose an allocator): freed memory is overwritten with 0xDD, so a
        // deleter that uses its tensor after freeing it reads garbage and
        // crashes, and a Python allocation made without the GIL aborts
        // ("Python memory allocator called without holding the GIL"), the
        // crash dlpack.deleter.without-gil is charged with. It costs about
        // 1.1x on NumPy's certification (docs/DLPACK.md).
        if std::env::var_os("PYTHONMALLOC").is_none() {
            cmd.env("PYTHONMALLOC", PYTHON_MALLOC);
        }
        let out =
            std::fs::File::create(&output).map_err(|e| format!("{}: {e}", output.display()))?;
        let err = out.try_clone().map_err(|e| e.to_string())?;
        use std::os::unix::process::CommandExt;
        cmd.stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .process_group(0);
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start a DLPack worker: {e}"))?;
        let pid = child.id();
        let timeout = Duration::from_millis(args.case_timeout_ms);
        let mut last_change = Instant::now();
        let mut last_len = 0u64;
        let status = loop {
            match child.try_wait() {
                Ok(Some(s)) => break Some(s),
                Ok(None) => {}
                Err(e) => return Err(format!("waiting for a DLPack worker: {e}")),
            }
            let len = std::fs::metadata(&results).map(|m| m.len()).unwrap_or(0);
            if len != last_len {
                last_len = len;
                last_change = Instant::now();
            } else if last_change.elapsed() > timeout {
                proc::kill_group(pid);
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        // Whatever the worker left behind in its group goes too.
        proc::kill_group(pid);
        let (done, begun, fatal, step) = read_results(&results);
        let printed = std::fs::read(&output).unwrap_or_default();
        if let Some(msg) = fatal {
            return Err(msg);
        }
        let had = done.len();
        cases.extend(done);
        next += had;
        match (status, begun) {
            // Every case has its result: how the worker ended after the
            // last one (a library's static destructors) changes nothing.
            _ if next >= plan.len() => break,
            (Some(s), _) if s.success() => {
                return Err(format!("a DLPack worker ended early: {}", tail(&printed)));
            }
            // A case left a thread of the library's stuck: the worker
            // recorded it and ended; a fresh one goes on.
            (Some(s), None) if s.code() == Some(RETIRED) && had > 0 => {}
            (_, Some(i)) if i == next && i < plan.len() => {
                let how = match status {
                    None => format!("no result after {} ms: killed", args.case_timeout_ms),
                    Some(s) => match std::os::unix::process::ExitStatusExt::signal(&s) {
                        Some(sig) => format!("the worker died of {}", proc::signal_name(sig)),
                        None => format!(
                            "the worker exited with {} during the case",
                            s.code().unwrap_or(-1)
                        ),
                    },
                };
                cases.push(lost_case(
                    &plan[i],
                    status.is_none(),
                    step.as_deref(),
                    &how,
                    &printed,
                    &args.replay_prefix,
                ));
                next += 1;
            }
            (s, _) => {
                return Err(format!(
                    "a DLPack worker ended before its first case ({}): {}",
                    s.map_or("timeout".to_string(), |s| s.to_string()),
                    tail(&printed)
                ))
            }
        }
    }
    Ok(cases)
}

fn tail(printed: &[u8]) -> String {
    let text = String::from_utf8_lossy(printed);
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(3)..].join(" | ")
}

/// What a worker's results file says: the finished cases, the index of a
/// case begun and not finished, a fatal message, and the last step (a
/// breadcrumb) of the case begun.
type Results = (Vec<Case>, Option<usize>, Option<String>, Option<String>);

/// The exit code of a worker that ends itself after a case left a thread
/// of the library's stuck ([`crate::abi::breadcrumb::taint`]).
const RETIRED: i32 = 75;

/// The allocator DLPack workers' Python runs with (`PYTHONMALLOC`).
pub const PYTHON_MALLOC: &str = "debug";

/// What a worker's results file says (see [`Results`]).
fn read_results(path: &Path) -> Results {
    let mut done = Vec::new();
    let mut begun = None;
    let mut fatal = None;
    let mut step = None;
    let Ok(f) = std::fs::File::open(path) else {
        return (done, begun, fatal, step);
    };
    for line in std::io::BufReader::new(f).lines().map_while(Result::ok) {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        if let Some(i) = v.get("begin").and_then(|i| i.as_u64()) {
            begun = Some(i as usize);
            step = None;
        } else if let Some(s) = v.get("step").and_then(|s| s.as_str()) {
            step = Some(s.to_string());
        } else if let Some(c) = v.get("done") {
            if let Ok(c) = serde_json::from_value::<Case>(c.clone()) {
                done.push(c);
                begun = None;
            }
        } else if let Some(m) = v.get("fatal").and_then(|m| m.as_str()) {
            fatal = Some(m.to_string());
        }
    }
    (done, begun, fatal, step)
}

/// The rule a crash or hang in this case breaks, when the case tests one
/// the only way it can fail is by crashing.
fn crash_rule(case: &DlCase, step: Option<&str>) -> Option<(&'static str, &'static str)> {
    // Only the planned (compact, one-layout) cases are charged: a crash of
    // a generated read-only tensor may come from its layout.
    if engine::GenSide::of(&case.id).is_some() {
        return None;
    }
    match &case.kind {
        Kind::Consumer { spec, .. } | Kind::ToArrow { spec } if spec.read_only => Some((
            "dlpack.consumer.read-only",
            "the tensor's data lies on read-only pages: the crash is a write into it",
        )),
        // Only a crash (or hang) inside the deleter call itself.
        Kind::DeleterThread { .. } if step == Some(engine::DELETER_THREAD_STEP) => Some((
            "dlpack.deleter.without-gil",
            "the crash or hang is in the tensor's deleter, called on a native thread that does not hold the GIL",
        )),
        Kind::Consumer { spec, .. } if spec.version.major != 1 => Some((
            "dlpack.consumer.major-version",
            "the version 2.0 tensor's data lies on an inaccessible page: the crash is a read of it",
        )),
        _ => None,
    }
}

fn lost_case(
    case: &DlCase,
    timeout: bool,
    step: Option<&str>,
    how: &str,
    printed: &[u8],
    prefix: &str,
) -> Case {
    let mut violations = Vec::new();
    let mut checked = Vec::new();
    // A hang is charged only in the deleter call (a deadlock); a crash
    // wherever the case's rule says.
    let charged = crash_rule(case, step)
        .filter(|_| !timeout || matches!(case.kind, Kind::DeleterThread { .. }));
    if let Some((rule, why)) = charged {
        violations.push(RuleViolation {
            rule: rule.into(),
            level: crate::rules::find(rule).map_or("MUST".into(), |r| r.level.to_string()),
            at: match case.kind {
                Kind::DeleterThread { .. } => "the deleter, on a native thread".into(),
                _ => "from_dlpack".into(),
            },
            evidence: format!("{how}; {why}"),
        });
        checked.push(rule.to_string());
    }
    let printed = String::from_utf8_lossy(printed);
    let verdict = if timeout {
        Verdict::Timeout
    } else {
        Verdict::Crash
    };
    let mut c =
        engine::ended_without_verdict(case, &replay_of(prefix, &case.id), verdict, how.to_string());
    c.differences = violations
        .iter()
        .map(|v| format!("{}: {}", v.rule, v.evidence))
        .collect();
    c.output = (!printed.trim().is_empty()).then(|| crate::report::bounded(&printed, 4096));
    c.checked = checked;
    c.violations = violations;
    c
}

/// The command that reruns exactly this case.
pub fn replay_of(prefix: &str, id: &str) -> String {
    format!("{prefix} --exact '{id}'")
}

/// What `arrowcert dlpack-worker` is given.
pub struct WorkerArgs {
    pub bridge: PathBuf,
    pub pair_consumer: Option<PathBuf>,
    pub generated: Generated,
    pub results: PathBuf,
    pub from: usize,
    pub sides: Sides,
    pub filter: Filter,
    pub max_memory_mb: u64,
    pub replay_prefix: String,
}

/// `arrowcert dlpack-worker`: runs the plan from `from` on, a results line
/// before and after each case. Exit 0 when every case ran.
pub fn worker(args: WorkerArgs) -> i32 {
    let Ok(mut results) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&args.results)
    else {
        return 2;
    };
    let mut emit = |v: serde_json::Value| {
        let _ = writeln!(results, "{v}");
        let _ = results.flush();
    };
    let _ = proc::die_with_parent(None);
    // Breadcrumbs into the results file, so that a crash is placed in its
    // step (the deleter-thread case charges only a crash in the deleter).
    if let Ok(f) = std::fs::OpenOptions::new().append(true).open(&args.results) {
        let f = std::sync::Mutex::new(f);
        crate::abi::breadcrumb::install(move |s| {
            let mut f = f.lock().unwrap_or_else(|e| e.into_inner());
            let _ = writeln!(f, "{}", serde_json::json!({ "step": s }));
            let _ = f.flush();
        });
    }
    if let Err(e) = proc::Limits::worker(args.max_memory_mb).apply() {
        emit(serde_json::json!({"fatal": format!("cannot apply the worker's limits: {e}")}));
        return 2;
    }
    let bridge = match Bridge::open(&args.bridge) {
        Ok(b) => b,
        Err(e) => {
            emit(serde_json::json!({"fatal": e}));
            return 2;
        }
    };
    let consumer = match args.pair_consumer.as_deref().map(Bridge::open).transpose() {
        Ok(c) => c,
        Err(e) => {
            emit(serde_json::json!({"fatal": e}));
            return 2;
        }
    };
    let plan = planned(
        args.sides,
        consumer.is_some(),
        &args.filter,
        &args.generated,
    );
    for (i, case) in plan.iter().enumerate().skip(args.from) {
        emit(serde_json::json!({"begin": i}));
        let offers = |b: &Bridge, what: &str| b.offers.iter().any(|o| o == what);
        let served = match case.kind {
            Kind::Pair { .. } => {
                offers(&bridge, "dlpack_load")
                    && consumer.as_ref().is_some_and(|c| offers(c, "dlpack_read"))
            }
            ref k => offers(&bridge, k.needs()),
        };
        let replay = replay_of(&args.replay_prefix, &case.id);
        let c = if served {
            // arrowcert's own failure is a harness error, never the
            // library's crash.
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                engine::run_case(&bridge, consumer.as_ref(), case, &replay)
            }))
            .unwrap_or_else(|p| {
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                engine::ended_without_verdict(
                    case,
                    &replay,
                    Verdict::HarnessError,
                    format!("arrowcert panicked: {msg}"),
                )
            })
        } else {
            let what = match case.kind {
                Kind::Pair { .. } => "dlpack_load or dlpack_read is not exported by the plugin (a pair needs both)",
                Kind::Producer { .. } | Kind::Frees { .. } | Kind::DeleterThread { .. } => "dlpack_load is not exported by the plugin (the adapter does not produce DLPack)",
                Kind::Consumer { .. } | Kind::OnDevice { .. } => "dlpack_read is not exported by the plugin (the adapter does not consume DLPack)",
                Kind::ToArrow { .. } => "dlpack_to_arrow is not exported by the plugin (the adapter does not turn DLPack into Arrow)",
                Kind::FromArrow { .. } => "arrow_to_dlpack is not exported by the plugin (the adapter does not turn Arrow into DLPack)",
            };
            engine::ended_without_verdict(case, &replay, Verdict::Skip, what.to_string())
        };
        emit(serde_json::json!({"done": c}));
        if crate::abi::breadcrumb::take_taint().is_some() {
            // A thread of the library's may hold the GIL for ever.
            proc::exit_now(RETIRED);
        }
    }
    // Leave without unloading the bridge or running the libraries' static
    // destructors (no Py_Finalize): capsules a library kept may still
    // point into the bridge.
    drop(results);
    proc::exit_now(0)
}

//! Worker processes survive every injected fault and report it against the
//! case that caused it, with the right verdict kind; the run goes on.

mod support;

use std::path::PathBuf;
use std::process::Command;

use arrowcert::report::{Case, Report, Verdict};
use support::*;

fn faulty(side: &str, fault: &str) -> PathBuf {
    let src = workspace_dir().join(format!("{side}s/faulty/faulty_{side}.c"));
    let lib = scratch("faulty").join(format!("libfaulty_{side}_{}.so", fault.to_lowercase()));
    cc(
        &["-shared", "-fPIC", &format!("-DFAULT_{fault}")],
        &src,
        &lib,
    );
    lib
}

struct Run {
    code: Option<i32>,
    stderr: String,
    report: Option<Report>,
}

/// Case deadline for faults that must not time out: generous, because the
/// test machine may be busy with every other test at once (a verdict must
/// not depend on load). Hangs use [`HANG_DEADLINE_MS`].
const DEADLINE_MS: &str = "30000";
const HANG_DEADLINE_MS: &str = "2000";

/// Runs `arrowcert roundtrip` in workers over `cases` (exact IDs).
fn roundtrip(producer: &str, consumer: &str, cases: &[&str], extra_env: &[(&str, &str)]) -> Run {
    roundtrip_with(producer, consumer, cases, extra_env, DEADLINE_MS, "1024")
}

fn roundtrip_with(
    producer: &str,
    consumer: &str,
    cases: &[&str],
    extra_env: &[(&str, &str)],
    deadline_ms: &str,
    memory_mb: &str,
) -> Run {
    let report = scratch("fault-reports").join(format!(
        "{}.json",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    let mut cmd = Command::new(arrowcert_exe());
    cmd.args([
        "roundtrip",
        "--producer",
        producer,
        "--consumer",
        consumer,
        "--jobs",
        "2",
        "--case-timeout-ms",
        deadline_ms,
        "--timeout-ms",
        "500",
        "--max-memory-mb",
        memory_mb,
        "--report",
        report.to_str().unwrap(),
        "--exact",
    ])
    .args(cases);
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("arrowcert runs");
    // Whatever the fault did, a report that exists validates against the
    // committed schema (plugin strings included).
    if report.exists() {
        support::schema::assert_valid_report(&report);
    }
    Run {
        code: out.status.code(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        report: arrowcert::report::read(&report).ok(),
    }
}

const WHOLE: &str = "array/primitive/batch:0";
const SLICE: &str = "array/primitive/batch:0/slice:13+12";
const OTHER: &str = "device_array/primitive/batch:0";

fn case<'a>(r: &'a Report, id: &str) -> &'a Case {
    r.cases
        .iter()
        .find(|c| c.id == id)
        .unwrap_or_else(|| panic!("{id} in {:?}", r.cases))
}

/// Two faulty cases and one the faulty producer does not offer: both faulty
/// cases get `verdict` with `needle` in the message, each in its own worker,
/// and the third still runs (skipped for the missing entry point).
fn assert_fault(fault: &str, verdict: Verdict, needle: &str) {
    assert_fault_with(fault, verdict, needle, "1024")
}

fn assert_fault_with(fault: &str, verdict: Verdict, needle: &str, memory_mb: &str) {
    let lib = faulty("producer", fault);
    let (_, consumer) = bundled();
    let run = roundtrip_with(
        lib.to_str().unwrap(),
        consumer.to_str().unwrap(),
        &[WHOLE, SLICE, OTHER],
        &[],
        DEADLINE_MS,
        memory_mb,
    );
    // A crash or a hang fails the run; a library whose every call errors
    // (the rest of the run skipped) is not certified.
    let want = if verdict == Verdict::Error {
        Some(3)
    } else {
        Some(1)
    };
    assert_eq!(run.code, want, "{fault}: {}", run.stderr);
    let r = run.report.expect("a complete report");
    assert!(r.complete);
    assert_eq!(r.cases.len(), 3, "{fault}");
    for id in [WHOLE, SLICE] {
        let c = case(&r, id);
        assert_eq!(c.verdict, verdict, "{fault} {id}: {c:?}");
        let m = c.message.as_deref().unwrap_or("");
        assert!(m.contains(needle), "{fault} {id}: {m:?}");
    }
    assert_eq!(case(&r, OTHER).verdict, Verdict::Skip, "{fault}");
}

#[test]
fn a_panic_inside_an_extern_c_function_is_a_crash_with_its_message() {
    let src = workspace_dir().join("producers/faulty/faulty_panic.rs");
    let lib = scratch("faulty").join("libfaulty_panic.so");
    let status = Command::new(std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into()))
        .args(["--edition", "2021", "--crate-type", "cdylib", "-o"])
        .arg(&lib)
        .arg(&src)
        .status()
        .expect("rustc runs");
    assert!(status.success(), "compiling {}", src.display());
    let (_, consumer) = bundled();
    // A second case on the path the library exports (a path it lacks is
    // skipped before any call).
    const ANOTHER: &str = "array/binary/batch:0";
    // RUST_BACKTRACE=1 in the user's shell does not reach the workers
    // (symbolising costs about 0.35 s per crash).
    let run = roundtrip(
        lib.to_str().unwrap(),
        consumer.to_str().unwrap(),
        &[WHOLE, ANOTHER, OTHER],
        &[("RUST_BACKTRACE", "1")],
    );
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    let r = run.report.expect("a report");
    let c = case(&r, WHOLE);
    assert_eq!(c.verdict, Verdict::Crash, "{c:?}");
    assert!(
        c.message.as_deref().unwrap_or("").contains("SIGABRT"),
        "{c:?}"
    );
    let out = c.output.as_deref().unwrap_or("");
    assert!(
        out.contains("panicked") && out.contains("index out of bounds"),
        "{out:?}"
    );
    // The panic's own backtrace was not asked for (Rust still forces one
    // for the abort that follows a panic that cannot unwind).
    assert!(out.contains("run with `RUST_BACKTRACE=1`"), "{out:?}");
    // ARROWCERT_PLUGIN_BACKTRACE=1 asks for the backtrace.
    let traced = roundtrip(
        lib.to_str().unwrap(),
        consumer.to_str().unwrap(),
        &[WHOLE],
        &[("ARROWCERT_PLUGIN_BACKTRACE", "1")],
    );
    let traced = traced.report.expect("a report");
    let out = case(&traced, WHOLE).output.clone().unwrap_or_default();
    assert!(
        out.contains("stack backtrace") && !out.contains("run with `RUST_BACKTRACE=1`"),
        "{out:?}"
    );
    // The other case panics too, in its own worker: the run went on.
    assert_eq!(case(&r, ANOTHER).verdict, Verdict::Crash);
    // The library has no produce_device_array: skipped, never called.
    let other = case(&r, OTHER);
    assert_eq!(other.verdict, Verdict::Skip, "{other:?}");
    assert!(
        other
            .message
            .as_deref()
            .unwrap_or("")
            .contains("arrowcert_produce_device_array is not exported"),
        "{other:?}"
    );
}

#[test]
fn a_forked_child_returning_into_the_worker_does_not_answer_for_it() {
    // The child comes back from the call into the worker's own code, with
    // the worker's socket. It must leave without a word: the orchestrator
    // sees exactly one answer per case, and every case gets its verdict.
    let lib = faulty("producer", "FORK_RETURN");
    let (_, consumer) = bundled();
    let run = roundtrip(
        lib.to_str().unwrap(),
        consumer.to_str().unwrap(),
        &[WHOLE, SLICE, OTHER],
        &[],
    );
    // Every call errors: not certified.
    assert_eq!(run.code, Some(3), "{}", run.stderr);
    let r = run.report.expect("a report");
    assert!(r.complete);
    assert_eq!(r.cases.len(), 3);
    for id in [WHOLE, SLICE] {
        assert_eq!(case(&r, id).verdict, Verdict::Error, "{:?}", case(&r, id));
    }
    assert_eq!(case(&r, OTHER).verdict, Verdict::Skip);
}

#[test]
fn segfault_in_produce_is_a_crash() {
    assert_fault("SEGV_PRODUCE", Verdict::Crash, "SIGSEGV");
}

#[test]
fn abort_is_a_crash() {
    assert_fault("ABORT_PRODUCE", Verdict::Crash, "SIGABRT");
}

#[test]
fn exit_in_the_middle_of_a_call_is_a_crash() {
    assert_fault("EXIT0_PRODUCE", Verdict::Crash, "exited with code 0");
}

#[test]
fn sigkill_to_itself_is_a_crash() {
    assert_fault("KILL_SELF", Verdict::Crash, "SIGKILL");
}

#[test]
fn segfault_inside_release_is_a_crash() {
    assert_fault("SEGV_RELEASE", Verdict::Crash, "SIGSEGV");
}

#[test]
fn allocation_bomb_is_a_crash_under_the_memory_limit() {
    assert_fault_with("ALLOC_BOMB", Verdict::Crash, "SIGABRT", "512");
}

#[test]
fn closing_every_descriptor_is_a_crash() {
    assert_fault("CLOSE_FDS", Verdict::Crash, "in the middle of the case");
}

#[test]
fn changed_signal_handlers_do_not_stop_the_run() {
    // The plugin ignores SIGSEGV/SIGABRT/SIGTERM/SIGPIPE and fails cleanly:
    // an error verdict, and the next case still runs in the same worker.
    assert_fault("SIGNALS", Verdict::Error, "EIO");
}

#[test]
fn a_hanging_get_next_is_a_timeout() {
    let lib = faulty("producer", "HANG_GET_NEXT");
    let (_, consumer) = bundled();
    let run = roundtrip_with(
        lib.to_str().unwrap(),
        consumer.to_str().unwrap(),
        &["stream/primitive", WHOLE],
        &[],
        HANG_DEADLINE_MS,
        "1024",
    );
    let r = run.report.expect("report");
    let c = case(&r, "stream/primitive");
    assert_eq!(c.verdict, Verdict::Timeout, "{c:?}");
    assert!(
        c.message
            .as_deref()
            .unwrap()
            .contains("no result within 2.0s"),
        "{c:?}"
    );
    // The other case ran in a fresh worker (ENOSYS from produce_array:
    // the plugin declines, a skip with its message).
    let other = case(&r, WHOLE);
    assert_eq!(other.verdict, Verdict::Skip, "{other:?}");
    assert!(
        other.message.as_deref().unwrap().contains("not supported"),
        "{other:?}"
    );
}

#[test]
fn a_deadlock_inside_cancel_is_a_timeout_of_that_case() {
    let producer = faulty("producer", "CANCEL_DEADLOCK");
    let consumer = faulty("consumer", "CANCELS");
    let run = roundtrip_with(
        producer.to_str().unwrap(),
        consumer.to_str().unwrap(),
        &["async/primitive", WHOLE],
        &[],
        HANG_DEADLINE_MS,
        "1024",
    );
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    let r = run.report.expect("report");
    assert!(r.complete);
    let c = case(&r, "async/primitive");
    assert_eq!(c.verdict, Verdict::Timeout, "{c:?}");
    // The next case ran in a fresh worker (ENOSYS: a skip).
    let other = case(&r, WHOLE);
    assert_eq!(other.verdict, Verdict::Skip, "{other:?}");
    assert!(
        other.message.as_deref().unwrap().contains("not supported"),
        "{other:?}"
    );
}

#[test]
fn an_async_producer_that_never_releases_is_an_error_not_a_hang() {
    let lib = faulty("producer", "ASYNC_NO_RELEASE");
    let (_, consumer) = bundled();
    let run = roundtrip(
        lib.to_str().unwrap(),
        consumer.to_str().unwrap(),
        &["async/primitive"],
        &[],
    );
    let r = run.report.expect("report");
    let c = case(&r, "async/primitive");
    assert_eq!(c.verdict, Verdict::Error, "{c:?}");
    assert!(c.message.as_deref().unwrap().contains("ETIMEDOUT"), "{c:?}");
}

#[test]
fn a_100_mb_flood_is_captured_bounded_and_attached_to_its_case() {
    let lib = faulty("producer", "FLOOD_OUTPUT");
    let (_, consumer) = bundled();
    let run = roundtrip(
        lib.to_str().unwrap(),
        consumer.to_str().unwrap(),
        &[WHOLE, SLICE],
        &[],
    );
    let r = run.report.expect("report");
    // The worker's capture file stops at proc::WORKER_OUTPUT_BYTES (16 MiB
    // on disk, not 200 MiB); each case keeps at most 64 KiB of it, and says
    // what it dropped.
    let mut printed = 0;
    for id in [WHOLE, SLICE] {
        let c = case(&r, id);
        assert_eq!(c.verdict, Verdict::Error, "{c:?}");
        let out = c.output.as_deref().expect("captured output");
        assert!(out.len() < 70 * 1024, "bounded: {} bytes", out.len());
        assert!(
            out.contains("reached its limit of 16 MiB"),
            "the discard is said: {}",
            &out[out.len().saturating_sub(200)..]
        );
        if out.starts_with("xxxx") {
            printed += 1;
            assert!(out.contains("more bytes not kept"), "the drop is said");
        }
    }
    assert!(
        printed >= 1,
        "the first case keeps the start of what was printed"
    );
}

#[test]
fn a_forked_child_is_not_left_behind() {
    let lib = faulty("producer", "FORK");
    let (_, consumer) = bundled();
    let pid_file = scratch("fork").join("child.pid");
    let _ = std::fs::remove_file(&pid_file);
    let run = roundtrip(
        lib.to_str().unwrap(),
        consumer.to_str().unwrap(),
        &[WHOLE],
        &[("ARROWCERT_FAULTY_PID_FILE", pid_file.to_str().unwrap())],
    );
    let r = run.report.expect("report");
    assert_eq!(case(&r, WHOLE).verdict, Verdict::Error);
    let pid: u32 = std::fs::read_to_string(&pid_file)
        .expect("the child wrote its pid")
        .trim()
        .parse()
        .unwrap();
    let gone = (0..200).any(|_| {
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok();
        let alive = state.is_some_and(|s| !s.contains(") Z"));
        if alive {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        !alive
    });
    assert!(gone, "the forked child {pid} is still running");
}

#[test]
fn a_crash_while_loading_is_bad_input_not_a_crash_of_arrowcert() {
    let lib = faulty("producer", "CTOR_CRASH");
    let (_, consumer) = bundled();
    let run = roundtrip(
        lib.to_str().unwrap(),
        consumer.to_str().unwrap(),
        &[WHOLE],
        &[],
    );
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert_eq!(run.stderr.trim_end().lines().count(), 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("cannot run the plugins") && run.stderr.contains("SIGSEGV"),
        "{}",
        run.stderr
    );
}

#[test]
fn consumer_faults_are_reported_against_their_cases() {
    let (producer, _) = bundled();
    for (fault, verdict) in [
        ("SEGV_CONSUME", Verdict::Crash),
        ("HANG_CONSUME", Verdict::Timeout),
    ] {
        let lib = faulty("consumer", fault);
        let run = roundtrip_with(
            producer.to_str().unwrap(),
            lib.to_str().unwrap(),
            &[WHOLE, "stream/primitive"],
            &[],
            HANG_DEADLINE_MS,
            "1024",
        );
        let r = run.report.expect("report");
        assert_eq!(case(&r, WHOLE).verdict, verdict, "{fault}");
        // The consumer has no stream entry point: skipped, after the fault.
        assert_eq!(
            case(&r, "stream/primitive").verdict,
            Verdict::Skip,
            "{fault}"
        );
    }
}

#[test]
fn workers_and_in_process_agree_on_the_reference_pair() {
    let (p, c) = bundled();
    let dir = scratch("agree");
    let mut verdicts = Vec::new();
    for mode in [["--jobs", "2"], ["--jobs", "0"]] {
        let report = dir.join(format!("{}.json", mode[1]));
        let out = Command::new(arrowcert_exe())
            .args([
                "roundtrip",
                "--producer",
                p.to_str().unwrap(),
                "--consumer",
                c.to_str().unwrap(),
            ])
            .args(mode)
            .args(["--report", report.to_str().unwrap()])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0));
        let r = arrowcert::report::read(&report).unwrap();
        verdicts.push(
            r.cases
                .iter()
                .map(|c| (c.id.clone(), c.verdict))
                .collect::<Vec<_>>(),
        );
    }
    assert_eq!(
        verdicts[0], verdicts[1],
        "same cases, same order, same verdicts"
    );
}

/// Sends SIGINT to `target` (a pid, or `-PGID` for a process group),
/// waits for `child` and checks it ended as interrupted (exit 130);
/// returns its stdout.
fn sigint_and_wait(child: std::process::Child, target: &str) -> String {
    let status = Command::new("kill")
        .args(["-INT", "--", target])
        .status()
        .unwrap();
    assert!(status.success());
    let done = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&done.stdout).into_owned();
    assert_eq!(done.status.code(), Some(130), "{stdout}");
    stdout
}

/// Polls `path` until it is a report with at least one case.
fn wait_for_checkpoint(path: &std::path::Path) -> Report {
    for _ in 0..600 {
        if let Ok(r) = arrowcert::report::read(path) {
            if !r.cases.is_empty() {
                return r;
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("no checkpoint report at {}", path.display());
}

#[test]
fn sigint_leaves_a_valid_incomplete_report_that_resumes_to_a_complete_one() {
    // 124 gold cases on the array path, 50 ms each in one worker: a run
    // of several seconds, interrupted once its first checkpoint is written.
    let lib = faulty("producer", "SLOW");
    let (_, consumer) = bundled();
    let report = scratch("interrupt").join("run.json");
    let _ = std::fs::remove_file(&report);
    let args = |resume: bool| {
        let mut cmd = Command::new(arrowcert_exe());
        cmd.arg("roundtrip")
            .arg("--producer")
            .arg(&lib)
            .arg("--consumer")
            .arg(consumer)
            .arg("--gold")
            .arg(gold_dir())
            .args(["--jobs", "1", "--case-timeout-ms", DEADLINE_MS, "--report"])
            .arg(&report)
            .stdout(std::process::Stdio::piped());
        if resume {
            cmd.arg("--resume").arg(&report);
        }
        cmd
    };
    let child = args(false).spawn().expect("arrowcert starts");
    let early = wait_for_checkpoint(&report);
    assert!(!early.complete);
    let pid = child.id().to_string();
    let stdout = sigint_and_wait(child, &pid);
    assert!(stdout.contains("--resume"), "{stdout}");

    support::schema::assert_valid_report(&report);
    let first = arrowcert::report::read(&report).expect("a valid report after SIGINT");
    assert!(!first.complete);
    assert_eq!(first.interrupted.as_deref(), Some("SIGINT (2)"));
    assert!(
        first.cases.len() < first.planned as usize,
        "{}",
        first.cases.len()
    );
    assert_eq!(first.summary.total as usize, first.cases.len());
    // The kill that stopped the worker is not the case's fault.
    assert!(first
        .cases
        .iter()
        .all(|c| matches!(c.verdict, Verdict::Error | Verdict::Skip)));

    let out = args(true).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    // The slow producer fails every call: not certified.
    assert_eq!(out.status.code(), Some(3), "{stdout}");
    assert!(stdout.contains("resuming"), "{stdout}");
    let done = arrowcert::report::read(&report).expect("the resumed report");
    assert!(done.complete);
    assert_eq!(done.interrupted, None);
    assert_eq!(done.cases.len() as u64, done.planned);
    let ids: std::collections::HashSet<&str> = done.cases.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids.len(), done.cases.len(), "no case ran twice");
    // What ran before the interrupt was kept, not run again.
    for c in &first.cases {
        let again = case(&done, &c.id);
        assert_eq!(again.duration_us, c.duration_us, "{}", c.id);
    }
    assert!(done
        .cases
        .iter()
        .filter(|c| c.id.starts_with("array/"))
        .all(|c| c.verdict == Verdict::Error));
}

#[test]
fn resume_refuses_a_report_made_with_other_plugins() {
    let (producer, consumer) = bundled();
    let report = scratch("resume-other").join("run.json");
    let run = |p: &std::path::Path, resume: bool| {
        let mut cmd = Command::new(arrowcert_exe());
        cmd.arg("roundtrip")
            .arg("--producer")
            .arg(p)
            .arg("--consumer")
            .arg(consumer)
            .args(["--jobs", "1", "--report"])
            .arg(&report)
            .args(["--exact", WHOLE]);
        if resume {
            cmd.arg("--resume").arg(&report);
        }
        cmd.output().unwrap()
    };
    assert_eq!(run(producer, false).status.code(), Some(0));
    let other = faulty("producer", "SLOW");
    let out = run(&other, true);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("the producer changed"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// A plugin that crashes on generated data: the crash is shrunk like a
/// rule failure, each candidate in a fresh worker, and the run ends with a
/// report (the harness survives every crash while shrinking).
#[test]
fn a_crash_on_generated_data_is_shrunk_in_workers() {
    let lib = faulty("producer", "SEGV_PRODUCE");
    let report = scratch("fault-reports").join("crash-shrink.json");
    let out = Command::new(arrowcert_exe())
        .args(["certify", "--producer"])
        .arg(&lib)
        .args(["--no-builtin", "--cases", "2", "--seed", "5", "--jobs", "1"])
        .args([
            "--shrink-candidates",
            "12",
            "--case-timeout-ms",
            DEADLINE_MS,
        ])
        .arg("--report")
        .arg(&report)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    support::schema::assert_valid_report(&report);
    let r = arrowcert::report::read(&report).unwrap();
    assert!(r.complete);
    let s = r
        .shrunk
        .iter()
        .find(|s| s.target == "crash")
        .unwrap_or_else(|| panic!("no crash shrink: {stdout}"));
    assert!(s.tried > 0 && s.tried <= 12, "{s:?}");
    assert!(s.evidence.contains("SIGSEGV"), "{s:?}");
    // The breadcrumb names the plugin call the process died in.
    assert!(
        s.evidence.contains("during `arrowcert_produce_array`"),
        "{s:?}"
    );
    assert!(stdout.contains("crash (shrunk):"), "{stdout}");
}

/// A crash inside a release callback is attributed to that callback.
#[test]
fn a_crash_names_the_plugin_call_it_happened_in() {
    let lib = faulty("producer", "SEGV_RELEASE");
    let report = scratch("fault-reports").join("crash-crumb.json");
    let out = Command::new(arrowcert_exe())
        .args(["certify", "--producer"])
        .arg(&lib)
        .args([
            "--cases",
            "0",
            "--jobs",
            "1",
            "--case-timeout-ms",
            DEADLINE_MS,
        ])
        .args(["--exact", "producer/array/primitive/batch:0"])
        .arg("--report")
        .arg(&report)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    support::schema::assert_valid_report(&report);
    let r = arrowcert::report::read(&report).unwrap();
    let c = &r.cases[0];
    assert_eq!(c.verdict, Verdict::Crash, "{c:?}");
    let m = c.message.as_deref().unwrap_or("");
    assert!(m.contains("SIGSEGV"), "{m}");
    assert!(m.contains("during `ArrowArray.release"), "{m}");
}

/// A fork bomb meets the run's pids cgroup: fork fails inside the plugin,
/// the case is a crash with the plugin's own account of it, and nothing it
/// forked outlives the run. Where no pids cgroup can be made (not root, no
/// delegation) there is nothing to test: the test says so and stops.
#[test]
fn a_fork_bomb_is_bounded_by_the_pids_cgroup() {
    if arrowcert::run::proc::PidsCgroup::create(16).is_none() {
        eprintln!("skipped: no pids cgroup can be created here (needs root or a delegated cgroup)");
        return;
    }
    let lib = faulty("producer", "FORK_BOMB");
    let report = scratch("fault-reports").join("fork-bomb.json");
    let child = Command::new(arrowcert_exe())
        .args(["certify", "--producer"])
        .arg(&lib)
        .args([
            "--cases",
            "0",
            "--jobs",
            "1",
            "--case-timeout-ms",
            DEADLINE_MS,
        ])
        .args(["--exact", "producer/array/primitive/batch:0", "--report"])
        .arg(&report)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let orchestrator = child.id();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    support::schema::assert_valid_report(&report);
    let r = arrowcert::report::read(&report).unwrap();
    let c = &r.cases[0];
    assert_eq!(c.verdict, Verdict::Crash, "{c:?}");
    let output = c.output.as_deref().unwrap_or("");
    assert!(output.contains("fork bomb: fork "), "{output}");
    assert!(
        output.contains("Resource temporarily unavailable"),
        "{output}"
    );
    // The run's cgroup is gone, and with it every process it held.
    let name = format!("arrowcert-{orchestrator}");
    for root in ["/sys/fs/cgroup/pids", "/sys/fs/cgroup"] {
        let leftover = walk_for(std::path::Path::new(root), &name, 4);
        assert!(leftover.is_none(), "{leftover:?} still exists");
    }
}

fn walk_for(dir: &std::path::Path, name: &str, depth: usize) -> Option<PathBuf> {
    let entries = std::fs::read_dir(dir).ok()?;
    for e in entries.flatten() {
        let p = e.path();
        if !p.is_dir() || p.is_symlink() {
            continue;
        }
        if p.file_name().is_some_and(|n| n == name) {
            return Some(p);
        }
        if depth > 0 {
            if let Some(found) = walk_for(&p, name, depth - 1) {
                return Some(found);
            }
        }
    }
    None
}

/// Processes whose command line mentions `needle` (workers carry their
/// socket path, inside the run's scratch directory).
fn processes_mentioning(needle: &str) -> Vec<i32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline).contains(needle) {
            out.push(pid);
        }
    }
    out
}

#[test]
fn an_orchestrator_killed_with_sigkill_leaves_no_worker_and_no_scratch_directory() {
    // A private temporary directory: the run's scratch directory goes
    // there, and a stale one from an earlier killed run is planted beside
    // it (the pid of a process that has exited).
    let tmp = scratch("sigkill-orchestrator").join(format!("tmp-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).unwrap();
    let mut gone = Command::new("true").spawn().unwrap();
    let dead_pid = gone.id();
    gone.wait().unwrap();
    let stale = tmp.join(format!("arrowcert-run-{dead_pid}"));
    std::fs::create_dir_all(&stale).unwrap();
    std::fs::write(stale.join("worker-0-0.out"), b"left by a killed run").unwrap();

    let lib = faulty("producer", "HANG_GET_NEXT");
    let (_, consumer) = bundled();
    let mut child = Command::new(arrowcert_exe())
        .args(["roundtrip", "--producer"])
        .arg(&lib)
        .arg("--consumer")
        .arg(consumer)
        .args([
            "--jobs",
            "2",
            "--case-timeout-ms",
            "600000",
            "--exact",
            "stream/primitive",
            "stream/binary",
        ])
        .env("TMPDIR", &tmp)
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(tmp.join("stderr.txt")).unwrap())
        .spawn()
        .unwrap();
    let run_dir = tmp.join(format!("arrowcert-run-{}", child.id()));
    // Wait until a worker is inside the hanging get_next (one or two: a
    // slot may take both cases into its pipeline).
    let started = std::time::Instant::now();
    while processes_mentioning(run_dir.to_str().unwrap()).is_empty() {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the run ended before it was killed: {status}");
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "no workers started: {:?}; in {}: {:?}",
            std::fs::read_to_string(tmp.join("stderr.txt")),
            run_dir.display(),
            std::fs::read_dir(&run_dir)
                .map(|d| d.flatten().map(|e| e.file_name()).collect::<Vec<_>>())
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    // The stale directory went when this run started.
    assert!(
        !stale.exists(),
        "the stale scratch directory is still there"
    );
    assert!(run_dir.exists());

    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let killed = std::time::Instant::now();
    let mut left = processes_mentioning(run_dir.to_str().unwrap());
    while (!left.is_empty() || run_dir.exists())
        && killed.elapsed() < std::time::Duration::from_secs(2)
    {
        std::thread::sleep(std::time::Duration::from_millis(20));
        left = processes_mentioning(run_dir.to_str().unwrap());
    }
    assert!(
        left.is_empty(),
        "workers still alive 2 s after the orchestrator's SIGKILL: {left:?}"
    );
    assert!(
        !run_dir.exists(),
        "{} still exists 2 s after the SIGKILL",
        run_dir.display()
    );
    let _ = std::fs::remove_dir_all(&tmp);
}

#[test]
fn a_path_whose_cases_keep_timing_out_hangs_and_its_other_cases_are_not_run() {
    // Every stream case of this producer hangs in get_next. With one
    // worker and a 2 s deadline, three stream cases time out in a row;
    // the other stream cases are then not run (each says why and can be
    // replayed), while the other paths run as usual.
    let lib = faulty("producer", "HANG_GET_NEXT");
    let report = scratch("fault-reports").join("hang-path.json");
    let started = std::time::Instant::now();
    let out = Command::new(arrowcert_exe())
        .args(["certify", "--producer"])
        .arg(&lib)
        .args([
            "--jobs",
            "1",
            "--case-timeout-ms",
            HANG_DEADLINE_MS,
            "--cases",
            "0",
            "--report",
        ])
        .arg(&report)
        .args(["producer/stream/", "producer/array/primitive/"])
        .output()
        .expect("arrowcert runs");
    let took = started.elapsed();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let r = arrowcert::report::read(&report).unwrap();
    // The whole stream's cases (slices of it are another entry point, which
    // this producer does not export: skipped, and kept apart).
    let stream: Vec<&Case> = r
        .cases
        .iter()
        .filter(|c| c.path == "stream" && c.slice.is_none())
        .collect();
    assert!(stream.len() > 5, "{}", stream.len());
    assert!(r
        .cases
        .iter()
        .any(|c| c.path == "stream" && c.slice.is_some()));
    let timed_out = stream
        .iter()
        .filter(|c| {
            c.verdict == Verdict::Timeout
                && !c
                    .message
                    .as_deref()
                    .unwrap_or("")
                    .starts_with(arrowcert::report::HANGING)
        })
        .count();
    let not_run: Vec<&&Case> = stream
        .iter()
        .filter(|c| {
            c.message
                .as_deref()
                .unwrap_or("")
                .starts_with(arrowcert::report::HANGING)
        })
        .collect();
    assert_eq!(timed_out, 3, "{stdout}");
    assert_eq!(not_run.len(), stream.len() - 3, "{stdout}");
    for c in &not_run {
        assert_eq!(c.verdict, Verdict::Timeout);
        assert!(
            c.message
                .as_deref()
                .unwrap()
                .contains("producer/stream path"),
            "{c:?}"
        );
        assert!(c.replay.contains(&c.id), "{c:?}");
    }
    assert!(stdout.contains("NOT RUN (its path hangs)"), "{stdout}");
    assert!(
        stdout.contains("not run because their path hangs (producer/stream)"),
        "{stdout}"
    );
    // The array cases ran.
    assert!(r
        .cases
        .iter()
        .any(|c| c.path == "array" && c.verdict != Verdict::Timeout));
    // Three timeouts, not one per stream case.
    assert!(took < std::time::Duration::from_secs(60), "{took:?}");
}

// -- the rest of the fault catalogue (docs/FAULTS.md) -----------------------

/// [`assert_fault`] with the hang deadline, for faults that never return.
fn assert_hang(fault: &str) {
    let lib = faulty("producer", fault);
    let (_, consumer) = bundled();
    let run = roundtrip_with(
        lib.to_str().unwrap(),
        consumer.to_str().unwrap(),
        &[WHOLE, SLICE, OTHER],
        &[],
        HANG_DEADLINE_MS,
        "1024",
    );
    assert_eq!(run.code, Some(1), "{fault}: {}", run.stderr);
    let r = run.report.expect("a complete report");
    for id in [WHOLE, SLICE] {
        let c = case(&r, id);
        assert_eq!(c.verdict, Verdict::Timeout, "{fault} {id}: {c:?}");
        assert!(
            c.message
                .as_deref()
                .unwrap_or("")
                .contains("no result within"),
            "{c:?}"
        );
    }
    assert_eq!(case(&r, OTHER).verdict, Verdict::Skip, "{fault}");
}

/// A fault that changes the worker's process and then fails cleanly: both
/// cases are errors, each case's output says what was put back (`note`),
/// and the run goes on.
fn assert_restored(fault: &str, notes: &[&str]) {
    let lib = faulty("producer", fault);
    let (_, consumer) = bundled();
    let run = roundtrip(
        lib.to_str().unwrap(),
        consumer.to_str().unwrap(),
        &[WHOLE, SLICE, OTHER],
        &[],
    );
    let r = run.report.expect("a complete report");
    for id in [WHOLE, SLICE] {
        let c = case(&r, id);
        assert_eq!(c.verdict, Verdict::Error, "{fault} {id}: {c:?}");
        let out = c.output.as_deref().unwrap_or("");
        assert!(
            notes.iter().any(|n| out.contains(n)),
            "{fault} {id}: none of {notes:?} in {out:?}"
        );
    }
    assert_eq!(case(&r, OTHER).verdict, Verdict::Skip, "{fault}");
}

#[test]
fn sigbus_is_a_crash() {
    assert_fault("SIGBUS_PRODUCE", Verdict::Crash, "SIGBUS");
}

#[test]
fn exit_3_in_the_middle_of_a_call_is_a_crash() {
    assert_fault("EXIT3_PRODUCE", Verdict::Crash, "exited with code 3");
}

#[test]
fn a_stack_overflow_is_a_crash() {
    assert_fault("STACK_OVERFLOW", Verdict::Crash, "SIG");
}

#[test]
fn a_spin_inside_produce_is_a_timeout() {
    assert_hang("SPIN_PRODUCE");
}

#[test]
fn a_spin_inside_release_is_a_timeout() {
    assert_hang("SPIN_RELEASE");
}

#[test]
fn redirected_standard_descriptors_are_restored_for_the_next_case() {
    assert_restored(
        "REDIRECT_FDS",
        &["descriptor 1 was closed or redirected; restored"],
    );
}

#[test]
fn a_sigsegv_handler_that_swallows_faults_is_removed_for_the_next_case() {
    assert_restored(
        "SWALLOW_SEGV",
        &["the disposition of SIGSEGV (11) was changed; restored"],
    );
}

#[test]
fn a_lowered_soft_limit_is_restored_for_the_next_case() {
    assert_restored("SETRLIMIT", &["RLIMIT_NOFILE was changed; restored"]);
}

#[test]
fn a_lowered_hard_limit_is_restored_or_ends_the_worker() {
    // Restored where the worker may raise a hard limit again (root); a new
    // worker for the next case otherwise.
    assert_restored(
        "SETRLIMIT_HARD",
        &[
            "RLIMIT_NOFILE was changed; restored",
            "cannot be raised again: the worker ends after this case",
        ],
    );
}

#[test]
fn an_async_callback_thread_that_spins_forever_is_an_error_not_a_hang() {
    let lib = faulty("producer", "ASYNC_SPIN");
    let (_, consumer) = bundled();
    let run = roundtrip(
        lib.to_str().unwrap(),
        consumer.to_str().unwrap(),
        &["async/primitive"],
        &[],
    );
    let r = run.report.expect("report");
    let c = case(&r, "async/primitive");
    assert!(
        matches!(c.verdict, Verdict::Error | Verdict::Timeout),
        "{c:?}"
    );
    // Its spinning thread stays in that worker, which ends after the case.
    let out = c.output.as_deref().unwrap_or("");
    assert!(out.contains("the worker ends after this case"), "{out:?}");
}

#[test]
fn a_thread_writing_into_an_earlier_calls_structure_is_charged_to_that_call() {
    // LATE_WRITE's thread writes over the structure call k filled during
    // call k+1 (after call k+1 filled its own). The structure call k filled
    // was a slot of the harness's arena, moved out when the call returned:
    // the write lands there, is found at the end of case k+1, and amends
    // case k's result; the worker ends (the thread still runs) and the
    // next cases run in a new one, where the same happens again.
    let lib = faulty("producer", "LATE_WRITE");
    let (_, consumer) = bundled();
    let report = scratch("fault-reports").join("late-write.json");
    let _ = std::fs::remove_file(&report);
    let ids = [
        WHOLE,
        SLICE,
        "array/nested/batch:0",
        "array/dictionary/batch:0",
    ];
    let out = Command::new(arrowcert_exe())
        .args(["roundtrip", "--producer"])
        .arg(&lib)
        .arg("--consumer")
        .arg(consumer)
        .args(["--jobs", "1", "--case-timeout-ms", DEADLINE_MS, "--report"])
        .arg(&report)
        .arg("--exact")
        .args(ids)
        .output()
        .expect("arrowcert runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    support::schema::assert_valid_report(&report);
    let r = arrowcert::report::read(&report).expect("report");
    assert!(r.complete);
    assert_eq!(r.cases.len(), 4, "one result per case, amended in place");
    let late = |id: &str| {
        case(&r, id)
            .differences
            .iter()
            .any(|d| d.starts_with("array.out.untouched:") && d.contains("arrowcert_produce_array"))
    };
    // Every case ends as a verdict of its own (no crash, no timeout).
    for id in ids {
        let c = case(&r, id);
        assert_eq!(c.verdict, Verdict::Fail, "{id}: {c:?}");
    }
    assert!(late(ids[0]) && late(ids[2]), "{:#?}", r.cases);
    assert!(!late(ids[1]) && !late(ids[3]), "{:#?}", r.cases);
    // The case during which the write was found says the worker ends.
    let out1 = case(&r, ids[1]).output.as_deref().unwrap_or("");
    assert!(out1.contains("the worker ends after this case"), "{out1:?}");
}

#[test]
fn every_fault_in_the_sources_is_in_the_catalogue_and_has_a_test() {
    let doc = std::fs::read_to_string(workspace_dir().join("docs/FAULTS.md")).unwrap();
    let tests = std::fs::read_to_string(workspace_dir().join("harness/tests/faults.rs")).unwrap();
    let mut faults = std::collections::BTreeSet::new();
    for src in [
        "producers/faulty/faulty_producer.c",
        "consumers/faulty/faulty_consumer.c",
    ] {
        let text = std::fs::read_to_string(workspace_dir().join(src)).unwrap();
        for (i, _) in text.match_indices("FAULT_") {
            let name: String = text[i + 6..]
                .chars()
                .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                .collect();
            if !name.is_empty() {
                faults.insert(name);
            }
        }
    }
    assert!(faults.len() >= 25, "{faults:?}");
    for f in &faults {
        assert!(
            doc.contains(&format!("| `{f}`")),
            "{f} is not in docs/FAULTS.md"
        );
        assert!(
            tests.contains(&format!("\"{f}\"")),
            "{f} has no test in faults.rs"
        );
    }
}

#[test]
fn a_correct_producer_that_prints_100_mb_per_call_gets_the_references_verdicts() {
    let lib = support::mutants::build(
        "flooding",
        "producers/faulty/flooding_producer.c",
        "flooding_producer",
    );
    let (reference, _) = bundled();
    let dir = scratch("flooding");
    let run = |plugin: &std::path::Path, name: &str| {
        let report = dir.join(format!("{name}.json"));
        let out = Command::new(arrowcert_exe())
            .args(["certify", "--producer"])
            .arg(plugin)
            .args([
                "--jobs",
                "2",
                "--cases",
                "0",
                "--case-timeout-ms",
                DEADLINE_MS,
                "--report",
            ])
            .arg(&report)
            .arg("/primitive")
            .env("ARROWCERT_MUTANT_BASE", reference)
            .output()
            .expect("arrowcert runs");
        (out.status.code(), arrowcert::report::read(&report).unwrap())
    };
    let (code, flooding) = run(&lib, "flooding");
    let (want, plain) = run(reference, "reference");
    assert_eq!(code, want);
    let verdicts = |r: &Report| {
        r.cases
            .iter()
            .map(|c| {
                let broken: Vec<&str> = c.violations.iter().map(|v| v.rule.as_str()).collect();
                (c.id.clone(), c.verdict, broken.join(","))
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(verdicts(&flooding), verdicts(&plain));
    // Its output is in its cases, bounded, with what was not kept said.
    let outputs: Vec<&str> = flooding
        .cases
        .iter()
        .filter_map(|c| c.output.as_deref())
        .collect();
    assert!(!outputs.is_empty());
    for o in &outputs {
        assert!(o.len() < 80 * 1024, "{}", o.len());
    }
    assert!(outputs
        .iter()
        .any(|o| o.contains("more bytes not kept") || o.contains("reached its limit")));
}

/// A producer that crashes case after case costs no consumer start-up per
/// crash: the worker started after a crash in a producer call loads the
/// consumer only when a case calls it. Here the first two cases crash in
/// the producer and the third reaches the consumer: three workers, two
/// loads of the consumer (the first worker's and the third case's), and
/// the third case runs to the consumer's own answer.
#[test]
fn after_a_producer_crash_the_consumer_is_loaded_only_when_a_case_calls_it() {
    let producer = faulty("producer", "SEGV_FIRST_BATCH");
    let consumer = scratch("faulty").join("libfaulty_consumer_load_log.so");
    cc(
        &["-shared", "-fPIC", "-DLOAD_LOG"],
        &workspace_dir().join("consumers/faulty/faulty_consumer.c"),
        &consumer,
    );
    let dir = scratch("deferred-consumer");
    let log = dir.join("loads.log");
    let _ = std::fs::remove_file(&log);
    let report = dir.join("report.json");
    let third = "array/primitive/batch:1";
    let out = Command::new(arrowcert_exe())
        .args(["roundtrip", "--producer"])
        .arg(&producer)
        .arg("--consumer")
        .arg(&consumer)
        .args(["--jobs", "1", "--case-timeout-ms", DEADLINE_MS, "--report"])
        .arg(&report)
        .args(["--exact", WHOLE, SLICE, third])
        .env("ARROWCERT_TEST_LOAD_LOG", &log)
        .output()
        .expect("arrowcert runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let r = arrowcert::report::read(&report).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    for id in [WHOLE, SLICE] {
        let c = case(&r, id);
        assert_eq!(c.verdict, Verdict::Crash, "{id}: {c:?}");
        assert!(
            c.message
                .as_deref()
                .unwrap_or("")
                .contains("arrowcert_produce_array"),
            "{id}: {c:?}"
        );
    }
    // The consumer was called (it declines arrays: ENOSYS) after being
    // loaded in the middle of the case; nothing crashed or failed to load.
    let c = case(&r, third);
    assert!(
        !matches!(
            c.verdict,
            Verdict::Crash | Verdict::HarnessError | Verdict::Error
        ),
        "{c:?}"
    );
    assert!(
        c.message
            .as_deref()
            .unwrap_or("")
            .contains("arrowcert_consume_array"),
        "{c:?}"
    );
    let loads = std::fs::read_to_string(&log).unwrap_or_default();
    let pids: std::collections::BTreeSet<&str> = loads.lines().collect();
    assert_eq!(
        loads.lines().count(),
        2,
        "consumer loads: {loads:?} {stderr}"
    );
    assert_eq!(pids.len(), 2, "{loads:?}");
}

/// Damage one case leaves for the next (a library's overflow that does not
/// crash where it happens) kills the worker in a later case: that case runs
/// again first thing in a fresh worker, keeps the verdict it gets there,
/// and says what happened. A crash that happens alone too stays a crash.
#[test]
fn a_crash_after_other_cases_is_run_again_alone() {
    let cases = [
        "array/primitive/batch:0",
        "array/primitive/batch:1",
        "array/primitive/batch:2",
    ];
    let run = |fault: &str| {
        let lib = faulty("producer", fault);
        roundtrip(lib.to_str().unwrap(), "reference", &cases, &[])
            .report
            .expect("a report")
    };
    let noted = |c: &Case| {
        c.message
            .as_deref()
            .is_some_and(|m| m.contains(arrowcert::run::NOT_REPRODUCED_ALONE))
    };

    let r = run("SEGV_AFTER_FIRST_CALL");
    for id in cases {
        let c = case(&r, id);
        assert_ne!(c.verdict, Verdict::Crash, "{id}: {c:?}");
    }
    let again: Vec<&Case> = cases
        .iter()
        .map(|id| case(&r, id))
        .filter(|c| noted(c))
        .collect();
    // Every case but the first of each worker (two job slots) crashed in a
    // worker that had run one before it.
    assert!((1..cases.len()).contains(&again.len()), "{:?}", r.cases);
    for c in again {
        let m = c.message.as_deref().unwrap();
        assert!(
            m.contains("SIGSEGV") && m.contains("after 1 other case"),
            "{m}"
        );
    }

    // A crash on every call: each case crashes first thing in its worker,
    // so there is nothing to run again; crashes stay crashes.
    let r = run("SEGV_PRODUCE");
    for id in cases {
        let c = case(&r, id);
        assert_eq!(c.verdict, Verdict::Crash, "{id}: {c:?}");
        assert!(!noted(c), "{c:?}");
    }
}

#[test]
fn a_stop_signal_to_the_matrix_alone_stops_its_running_unit_and_writes_no_matrix() {
    // As `kill PID` or a CI runner's cancel sends it.
    matrix_interrupted(false);
}

#[test]
fn a_ctrl_c_to_the_matrix_stops_its_running_unit_once_and_writes_no_matrix() {
    // As a terminal sends it: to the whole foreground process group. The
    // unit hears it once (from the matrix), so it still stops between
    // cases and marks its report (a second SIGINT means "leave now").
    matrix_interrupted(true);
}

/// A slow producer (50 ms a case): its certification, the first unit,
/// runs for many seconds; SIGINT goes to the matrix process, or to its
/// whole process group.
fn matrix_interrupted(to_group: bool) {
    use std::os::unix::process::CommandExt;
    let lib = faulty("producer", "SLOW");
    bundled();
    let out = scratch(if to_group {
        "matrix-ctrl-c"
    } else {
        "matrix-interrupt"
    });
    let _ = std::fs::remove_dir_all(&out);
    let child = Command::new(arrowcert_exe())
        .arg("matrix")
        .arg("--producers")
        .arg(&lib)
        .args([
            "--consumers",
            "reference",
            "--units-at-once",
            "1",
            "--jobs",
            "1",
        ])
        .arg("--gold")
        .arg(gold_dir())
        .args(["--case-timeout-ms", DEADLINE_MS, "--out"])
        .arg(&out)
        .stdout(std::process::Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("arrowcert starts");
    // The unit's report, once it holds a case: the unit is running.
    let runs = out.join("runs");
    let unit_report = (0..600)
        .find_map(|_| {
            let found = std::fs::read_dir(&runs).ok().and_then(|d| {
                d.flatten()
                    .map(|e| e.path())
                    .find(|p| p.extension().is_some_and(|x| x == "json"))
            });
            match found {
                Some(p) if arrowcert::report::read(&p).is_ok_and(|r| !r.cases.is_empty()) => {
                    Some(p)
                }
                _ => {
                    std::thread::sleep(std::time::Duration::from_millis(50));
                    None
                }
            }
        })
        .expect("the first unit writes its report");
    let target = if to_group {
        format!("-{}", child.id())
    } else {
        child.id().to_string()
    };
    let stdout = sigint_and_wait(child, &target);
    assert!(stdout.contains("interrupted by SIGINT"), "{stdout}");
    assert!(!out.join("matrix.json").exists(), "{stdout}");
    // The unit got the signal: it stopped part way, its report says why.
    let r = arrowcert::report::read(&unit_report).expect("the unit's report stays valid");
    assert!(!r.complete, "{stdout}");
    assert_eq!(r.interrupted.as_deref(), Some("SIGINT (2)"));
    // And nothing of the run is left: no process names its output folder.
    let left: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(out.to_string_lossy().as_ref()))
        .collect();
    assert!(left.is_empty(), "still running: {left:?}");
}

/// `--repeat N`: a case that did not pass runs N more times, each round in
/// fresh workers; one whose verdict changes is flaky, with every verdict
/// seen, in the report, the summary, the result line and the JUnit file.
/// Without `--repeat` nothing is rerun.
#[test]
fn a_verdict_that_changes_when_run_again_is_reported_flaky() {
    let consumer = faulty("consumer", "FLAKY_CONSUME");
    let dir = scratch("flaky");
    let id = "consumer/array/plain/primitive/batch:0";
    let run = |repeat: &str, name: &str| {
        let mark = dir.join(format!("{name}.mark"));
        let _ = std::fs::remove_file(&mark);
        let report = dir.join(format!("{name}.json"));
        let junit = dir.join(format!("{name}.xml"));
        let out = Command::new(arrowcert_exe())
            .args(["certify", "--consumer"])
            .arg(&consumer)
            .args(["--jobs", "1", "--repeat", repeat, "--report"])
            .arg(&report)
            .arg("--junit")
            .arg(&junit)
            .args(["--exact", id])
            .env("ARROWCERT_TEST_FLAKY_MARK", &mark)
            .output()
            .expect("arrowcert runs");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let r = arrowcert::report::read(&report).unwrap();
        let junit = std::fs::read_to_string(&junit).unwrap();
        (r, stdout, junit)
    };
    let (r, stdout, junit) = run("2", "repeat");
    let c = r.cases.iter().find(|c| c.id == id).expect("the case ran");
    assert_eq!(c.verdict, Verdict::Crash, "{stdout}");
    assert_eq!(
        c.flaky,
        vec![Verdict::Crash, Verdict::Limitation],
        "{stdout}"
    );
    assert_eq!(r.summary.flaky, 1, "{stdout}");
    assert!(stdout.contains("1 flaky"), "{stdout}");
    assert!(
        stdout.contains(&format!("{id} (crash, limitation)")),
        "{stdout}"
    );
    assert!(
        junit.contains("flaky: the verdict changed when run again (crash, limitation)"),
        "{junit}"
    );
    let (r, stdout, _) = run("0", "once");
    let c = r.cases.iter().find(|c| c.id == id).expect("the case ran");
    assert_eq!(c.verdict, Verdict::Crash, "{stdout}");
    assert!(c.flaky.is_empty() && r.summary.flaky == 0, "{stdout}");
}

//! A run interrupted (SIGINT or SIGTERM) at a random point resumes with the
//! command it printed, and the resumed report has the verdicts an
//! uninterrupted run of the same seed has: for certify and roundtrip, with
//! no --seed and no --report given (the seed comes from the report, the
//! report from the default path the run chose).

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use arrowcert::report::{Report, Verdict};
use support::*;

type Verdicts = Vec<(String, Verdict, Vec<String>)>;

fn verdicts(r: &Report) -> Verdicts {
    let mut v: Verdicts = r
        .cases
        .iter()
        .map(|c| {
            let mut broken: Vec<String> = c.violations.iter().map(|v| v.rule.clone()).collect();
            broken.sort();
            (c.id.clone(), c.verdict, broken)
        })
        .collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

/// A pseudo-random number below `n` (the clock's nanoseconds: the point
/// of interruption differs from run to run, which is the point).
fn random_below(n: u64) -> u64 {
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    (t ^ (t >> 17)).wrapping_mul(0x9E37_79B9_7F4A_7C15) % n
}

fn base_args(command: &str) -> Vec<String> {
    let mut a: Vec<String> = vec![command.into(), "--producer".into(), "reference".into()];
    a.extend(["--consumer".into(), "reference".into()]);
    a.extend(["--cases".into(), "30".into(), "--jobs".into(), "1".into()]);
    a
}

/// The line of `stdout` that starts with `prefix`, without it.
fn line_after<'a>(stdout: &'a str, prefix: &str) -> Option<&'a str> {
    stdout.lines().find_map(|l| l.strip_prefix(prefix))
}

fn newest_report(dir: &Path) -> Option<PathBuf> {
    std::fs::read_dir(dir.join("reports"))
        .ok()?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "json"))
}

#[test]
fn an_interrupted_run_resumes_as_printed_to_an_uninterrupted_runs_verdicts() {
    bundled();
    let mut interrupted = 0;
    for (command, signal) in [
        ("certify", "INT"),
        ("certify", "TERM"),
        ("roundtrip", "TERM"),
        ("roundtrip", "INT"),
    ] {
        let dir = scratch("resume").join(format!("{command}-{signal}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let child = Command::new(arrowcert_exe())
            .args(base_args(command))
            .current_dir(&dir)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        // Once the first checkpoint is on disk, a random moment later.
        let started = Instant::now();
        while newest_report(&dir).is_none() && started.elapsed() < Duration::from_secs(60) {
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(random_below(1500)));
        Command::new("kill")
            .args([&format!("-{signal}"), &child.id().to_string()])
            .status()
            .unwrap();
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let Some(resume) = line_after(&stdout, "resume with: ") else {
            // It finished before the signal: nothing to resume this time.
            assert_eq!(out.status.code(), Some(0), "{command}: {stdout}");
            continue;
        };
        interrupted += 1;
        let code = if signal == "INT" { 130 } else { 143 };
        assert_eq!(out.status.code(), Some(code), "{command}: {stdout}");
        // The printed command, as a user would paste it.
        let resumed = Command::new("sh")
            .args(["-c", resume])
            .current_dir(&dir)
            .output()
            .unwrap();
        let rstdout = String::from_utf8_lossy(&resumed.stdout);
        assert_eq!(
            resumed.status.code(),
            Some(0),
            "{command} {signal}: `{resume}`\n{rstdout}"
        );
        let path = dir.join(line_after(&rstdout, "report: ").expect("a report line"));
        let done = arrowcert::report::read(&path).unwrap();
        assert!(done.complete, "{command}: {rstdout}");
        // The same seed, uninterrupted.
        let whole = dir.join("uninterrupted.json");
        let mut args = base_args(command);
        let seed = done.seed.expect("the report has the seed the run drew");
        args.extend(["--seed".into(), seed.to_string(), "--report".into()]);
        let out = Command::new(arrowcert_exe())
            .args(&args)
            .arg(&whole)
            .current_dir(&dir)
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
        let reference = arrowcert::report::read(&whole).unwrap();
        assert_eq!(
            verdicts(&done),
            verdicts(&reference),
            "{command} interrupted by SIG{signal} and resumed: verdicts differ from an uninterrupted run"
        );
    }
    assert!(
        interrupted >= 2,
        "only {interrupted} of 4 runs were interrupted before they ended"
    );
}

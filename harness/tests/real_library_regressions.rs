//! Harness mistakes found by certifying real libraries (issue 8), each
//! kept as a regression test: a verdict against a library that was the
//! harness's own error.

mod support;

use std::process::Command;

use arrowcert::report::{Report, Verdict};
use support::*;

fn certify(role: &str, lib: &str, filters: &[&str], name: &str) -> (Option<i32>, Report, String) {
    let report = scratch("regressions").join(format!("{name}.json"));
    let out = Command::new(arrowcert_exe())
        .args([
            "certify",
            &format!("--{role}"),
            lib,
            "--cases",
            "0",
            "--jobs",
            "1",
            "--report",
        ])
        .arg(&report)
        .args(filters)
        .output()
        .expect("arrowcert runs");
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let r = arrowcert::report::read(&report).unwrap_or_else(|e| panic!("{e}\n{text}"));
    (out.status.code(), r, text)
}

/// polars, duckdb and pyarrow export no device-stream consumer: the
/// harness blamed them for never releasing a device stream it never
/// handed over. And a consumer that declines a stream's type (ENOSYS)
/// before the injected get_next failure is not a wrong error code.
#[test]
fn a_consumer_is_judged_only_on_what_it_offers_and_accepts() {
    let lib = scratch("regressions").join("libdeclining_consumer.so");
    cc(
        &["-shared", "-fPIC"],
        &harness_dir().join("tests/fixtures/declining_consumer.c"),
        &lib,
    );
    let (code, r, text) = certify(
        "consumer",
        lib.to_str().unwrap(),
        &["primitive"],
        "declining",
    );
    // It declines every data case: limitations, never failures; with no
    // data read on any path it offers, the run certifies nothing (exit 3).
    assert_eq!(code, Some(3), "{text}");
    assert!(text.contains("NOT CERTIFIED"), "{text}");
    assert!(r.summary.failed == 0 && r.summary.errors == 0, "{text}");
    assert!(r.summary.limitations > 0, "{text}");
    for c in &r.cases {
        assert!(
            matches!(c.verdict, Verdict::Skip | Verdict::Limitation)
                || (c.id.contains("/released/") && c.verdict == Verdict::Pass),
            "{c:?}"
        );
    }
    // Missing entry points are skips saying so...
    let ds = r
        .cases
        .iter()
        .find(|c| c.id.starts_with("consumer/device_stream/"))
        .expect("a device stream case");
    assert!(
        ds.message.as_deref().unwrap().contains("not exported"),
        "{ds:?}"
    );
    // ...and a declined erroring stream is a skip, the rule not exercised.
    let err = r
        .cases
        .iter()
        .find(|c| c.id.contains("stream_error") && !c.id.contains("device"))
        .expect("a stream error case");
    assert!(
        err.message.as_deref().unwrap().contains("does not support"),
        "{err:?}"
    );
    let rule = r
        .rules
        .iter()
        .find(|x| x.rule == "consumer.stream.error")
        .unwrap();
    assert_eq!(rule.verdict, Verdict::Skip, "{rule:?}");
    // The handover of what it was given is still judged, and holds.
    let once = r
        .rules
        .iter()
        .find(|x| x.rule == "consumer.release.once")
        .unwrap();
    assert_eq!(once.verdict, Verdict::Pass, "{once:?}");
}

/// arrow-rs exports a zero-length Utf8 child with a non-zero first offset
/// (valid); the harness's own read of it through arrow-rs's importer
/// panicked in a deep copy and charged the producer with a crash.
#[test]
fn arrow_rs_empty_sliced_strings_are_read_not_a_harness_crash() {
    let exe = arrowcert_exe();
    let profile = exe.parent().unwrap();
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .current_dir(workspace_dir())
        .args(["build", "-q", "-p", "arrowcert-producer-arrow-rs"])
        .env("CARGO_TARGET_DIR", profile.parent().unwrap())
        .args(if profile.ends_with("release") {
            &["--release"][..]
        } else {
            &[][..]
        })
        .status()
        .unwrap();
    assert!(status.success());
    let lib = profile.join("libarrowcert_producer_arrow_rs.so");
    let (code, r, text) = certify(
        "producer",
        lib.to_str().unwrap(),
        &["union/batch:1/slice:1+0", "nested/batch:1/slice:1+0"],
        "arrow-rs-empty",
    );
    assert!(r.summary.total >= 4, "{text}");
    assert_eq!(r.summary.crashed, 0, "{text}");
    assert!(!text.contains("internal error"), "{text}");
    assert_eq!(code, Some(0), "{text}");
}

/// pyarrow and duckdb (whose arrow_scan imports through pyarrow) raise
/// Arrow C++'s refusal of a record batch at a non-zero offset as an
/// ordinary error; the Arrow C++ adapter reports the same refusal as the
/// limitation it is (ENOSYS). The Python adapter bridge classifies it alike,
/// so one library's behaviour gets one verdict whichever binding reaches
/// it. Runs the bridge glue's `describe` in plain python3 (no library
/// needed). A failure of `load` (the library cannot hold the data) is a
/// declared limitation of the producer case, even a panic.
#[test]
fn the_python_bridge_declares_arrow_cpps_offset_limitation_as_enosys() {
    let glue = workspace_dir().join("plugins/python/bridge.py");
    let script = format!(
        r#"
import errno
ns = {{}}
exec(compile(open({glue:?}).read(), "glue.py", "exec"), ns)
d = ns["describe"]
class ArrowInvalid(ValueError):
    pass
cases = [
    (ArrowInvalid("ArrowArray struct has non-zero offset, cannot be imported as RecordBatch"), errno.ENOSYS),
    (RuntimeError("Invalid Input Error: arrow_scan: get_next failed(): Invalid: ArrowArray struct has non-zero offset, cannot be imported as RecordBatch"), errno.ENOSYS),
    (NotImplementedError("x"), errno.ENOSYS),
    (ValueError("Number of rows in column 0 did not match batch"), errno.EINVAL),
    (RuntimeError("boom"), errno.EIO),
    (type("PanicException", (Exception,), {{}})("called `Result::unwrap()` on an `Err` value: not yet implemented"), errno.ENOTRECOVERABLE),
    (RuntimeError("INTERNAL Error: Attempted to access index 3 within vector of size 3"), errno.ENOTRECOVERABLE),
    (ns["CannotLoad"]("load() cannot hold this data: pyo3_runtime.PanicException: boom"), errno.ENOSYS),
]
for e, want in cases:
    got = d(e)[0]
    assert got == want, (e, got, want)
print("ok")
"#,
        glue = glue.display().to_string()
    );
    let out = Command::new("python3")
        .args(["-c", &script])
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).trim() == "ok",
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

//! DLPack certification (`arrowcert certify --dlpack`, docs/DLPACK.md):
//! every DLPack rule has a mutant (harness/tests/fixtures/dlpack/mutants.py)
//! that the harness reports under exactly that rule, the mutants' reference
//! passes every rule, NumPy is certified both ways with its known finding,
//! and bad input is one line and exit 2.
//!
//! They need the adapter test environment (`scripts/python/setup-test-env.sh`:
//! NumPy and pyarrow in target/python-test/venv); CI sets
//! ARROWCERT_REQUIRE_PY_ADAPTERS=1, so there they cannot skip.

mod support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use arrowcert::report::{Report, Verdict};
use support::*;

fn python() -> Option<PathBuf> {
    let py = workspace_dir().join("target/python-test/venv/bin/python");
    let has_numpy = py.exists()
        && Command::new(&py)
            .args(["-c", "import numpy"])
            .status()
            .is_ok_and(|s| s.success());
    if has_numpy {
        return Some(py);
    }
    let why = format!(
        "{} with NumPy is missing: run scripts/python/setup-test-env.sh",
        py.display()
    );
    assert!(
        std::env::var("ARROWCERT_REQUIRE_PY_ADAPTERS").as_deref() != Ok("1"),
        "ARROWCERT_REQUIRE_PY_ADAPTERS=1 but {why}"
    );
    eprintln!("SKIPPED: {why}");
    None
}

fn fixture() -> PathBuf {
    workspace_dir().join("harness/tests/fixtures/dlpack/mutants.py")
}

/// Runs `certify --dlpack` on `adapter` (both sides) with `mutant`; the
/// exit code and the report.
fn certify(py: &Path, adapter: &Path, mutant: &str, tag: &str) -> (Option<i32>, Report, String) {
    let spec = format!("py:{}", adapter.display());
    let args = ["--producer", &spec, "--consumer", &spec, "--cases", "0"];
    certify_with(py, &args, mutant, "dlpack", tag)
}

/// Runs `arrowcert --python PY certify --dlpack ARGS --report R` with
/// `mutant` (the fixture's ARROWCERT_DLPACK_MUTANT); the exit code, the
/// report (R under the scratch directory `dir`, named by `tag`) and stdout
/// with stderr.
fn certify_with(
    py: &Path,
    args: &[&str],
    mutant: &str,
    dir: &str,
    tag: &str,
) -> (Option<i32>, Report, String) {
    let report = scratch(dir).join(format!("{tag}.json"));
    let _ = std::fs::remove_file(&report);
    let out = Command::new(arrowcert_exe())
        .arg("--python")
        .arg(py)
        .args(["certify", "--dlpack"])
        .args(args)
        .arg("--report")
        .arg(&report)
        .env("ARROWCERT_DLPACK_MUTANT", mutant)
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

fn failed_rules(r: &Report) -> BTreeSet<String> {
    r.rules
        .iter()
        .filter(|x| x.verdict == Verdict::Fail)
        .map(|x| x.rule.clone())
        .collect()
}

/// The mutant -> rule table of the fixture (its MUTANTS dict).
fn mutants() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(fixture()).unwrap();
    let start = text.find("MUTANTS = {").expect("the table");
    let end = start + text[start..].find('}').expect("its end");
    text[start..end]
        .lines()
        .filter_map(|l| {
            let parts: Vec<&str> = l.split('"').collect();
            (parts.len() >= 5).then(|| (parts[1].to_string(), parts[3].to_string()))
        })
        .collect()
}

#[test]
fn the_reference_passes_every_dlpack_rule() {
    let Some(py) = python() else { return };
    let (code, r, text) = certify(&py, &fixture(), "", "reference");
    assert_eq!(code, Some(0), "{text}");
    assert!(r.complete);
    assert!(
        failed_rules(&r).is_empty(),
        "{:?}\n{text}",
        failed_rules(&r)
    );
    // It refuses complex numbers with BufferError (so that
    // dlpack.errors.buffer-error is exercised): those cases are
    // limitations, every other one passes.
    assert_eq!(
        r.summary.passed + r.summary.limitations,
        r.summary.total,
        "{text}"
    );
    // Across the protocols it declines what it cannot turn into Arrow
    // without a copy (bool, complex, strided: 8 cases) and pyarrow declines
    // a bool and a null (2 cases).
    assert_eq!(r.summary.limitations, 20, "{text}");
    // Every rule but strides.not-null (NumPy exports DLPack 1.0, where NULL
    // strides are allowed) was exercised.
    let skipped: Vec<&str> = r
        .rules
        .iter()
        .filter(|x| x.verdict == Verdict::Skip)
        .map(|x| x.rule.as_str())
        .collect();
    assert_eq!(skipped, vec!["dlpack.strides.not-null"], "{text}");
    // The DLPack rules, and the Arrow rules the cases across the protocols
    // judged: the exported schema, array and device members, the release
    // of the export, and the import's release of the harness's array.
    let arrow: BTreeSet<&str> = r
        .rules
        .iter()
        .map(|x| x.rule.as_str())
        .filter(|id| !id.starts_with("dlpack."))
        .collect();
    assert_eq!(
        r.rules.len() - arrow.len(),
        arrowcert::rules::dlpack::DLPACK_RULES.len()
    );
    for id in [
        "schema.format.valid",
        "array.layout.n-buffers",
        "device.reserved.zero",
        "array.release.marks-released",
        "consumer.release.once",
    ] {
        assert!(arrow.contains(id), "{id} not judged: {arrow:?}\n{text}");
    }
}

#[test]
fn every_dlpack_rule_has_a_mutant_reported_under_it_alone() {
    let Some(py) = python() else { return };
    let table = mutants();
    let covered: BTreeSet<&str> = table.iter().map(|(_, r)| r.as_str()).collect();
    for rule in arrowcert::rules::dlpack::DLPACK_RULES {
        assert!(covered.contains(rule.id), "no mutant breaks {}", rule.id);
    }
    let mut wrong = Vec::new();
    for (mutant, rule) in &table {
        let (code, r, text) = certify(&py, &fixture(), mutant, mutant);
        let failed = failed_rules(&r);
        if failed != BTreeSet::from([rule.clone()]) {
            wrong.push(format!(
                "{mutant}: expected only {rule} to fail, got {failed:?}\n{text}"
            ));
            continue;
        }
        // A MUST failure (or a crash) fails the run; a SHOULD one alone
        // does not.
        let level = arrowcert::rules::find(rule).unwrap().level;
        let crashed = r.cases.iter().any(|c| c.verdict == Verdict::Crash);
        let expect_fail = level == arrowcert::rules::Level::Must || crashed;
        if expect_fail != (code == Some(1)) {
            wrong.push(format!(
                "{mutant}: exit {code:?} for a {level} rule (crashed: {crashed})"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn a_consumer_that_crashes_costs_one_case_and_names_the_rule() {
    let Some(py) = python() else { return };
    let (code, r, text) = certify(&py, &fixture(), "writes-read-only", "crash");
    assert_eq!(code, Some(1), "{text}");
    assert!(r.complete, "every case ran: {text}");
    let crashed: Vec<_> = r
        .cases
        .iter()
        .filter(|c| c.verdict == Verdict::Crash)
        .collect();
    assert_eq!(crashed.len(), 1, "{text}");
    let c = crashed[0];
    assert!(c.id.ends_with("/read-only"), "{}", c.id);
    assert!(
        c.message.as_deref().unwrap_or("").contains("SIGSEGV"),
        "{:?}",
        c.message
    );
    assert_eq!(c.violations[0].rule, "dlpack.consumer.read-only");
    assert!(c.replay.contains("--exact"), "{}", c.replay);
}

#[test]
fn numpy_is_certified_both_ways_with_its_known_finding() {
    let Some(py) = python() else { return };
    let adapter = workspace_dir().join("adapters/dlpack/numpy.py");
    let (code, r, text) = certify(&py, &adapter, "", "numpy");
    // NumPy exports a size-0 array with a data pointer (the spec's SHOULD:
    // "If the array is of size zero, the data pointer in DLTensor should be
    // set to either NULL or 0"); reproduced outside the harness in
    // FINDINGS.md. Nothing else fails, and the run passes (SHOULD only).
    assert_eq!(code, Some(0), "{text}");
    assert_eq!(
        failed_rules(&r),
        BTreeSet::from(["dlpack.data.zero-size-null".to_string()]),
        "{text}"
    );
    assert!(r.plugins[0].name.contains("NumPy"), "{:?}", r.plugins);
}

#[test]
fn bad_dlpack_input_is_one_line_and_exit_2() {
    let cases: [(&[&str], &str); 3] = [
        (&["certify", "--dlpack"], "--dlpack needs --producer"),
        (
            &["certify", "--dlpack", "--producer", "reference"],
            "takes py: adapters",
        ),
        (
            &[
                "certify",
                "--dlpack",
                "--producer",
                "py:a.py",
                "--consumer",
                "py:b.py",
            ],
            "certifies one library",
        ),
    ];
    for (args, words) in cases {
        let out = Command::new(arrowcert_exe()).args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains(words), "{args:?}: {stderr}");
    }
    let Some(py) = python() else { return };
    // An adapter file that does not exist, one that raises on import, and
    // one that aborts on import (loaded in a worker first: the harness
    // never opens it itself).
    let bad = scratch("dlpack").join("raises.py");
    std::fs::write(&bad, "raise RuntimeError('broken adapter')\n").unwrap();
    let aborts = scratch("dlpack").join("aborts.py");
    std::fs::write(&aborts, "import os\nos.abort()\n").unwrap();
    for (spec, words) in [
        (
            "py:/nonexistent/adapter.py".to_string(),
            "no such adapter file",
        ),
        (format!("py:{}", bad.display()), "broken adapter"),
        (format!("py:{}", aborts.display()), "killed by SIGABRT"),
    ] {
        let out = Command::new(arrowcert_exe())
            .arg("--python")
            .arg(&py)
            .args(["certify", "--dlpack", "--producer", &spec])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{spec}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{spec}: {stderr}");
        assert!(stderr.contains(words), "{spec}: {stderr}");
    }
}

#[test]
fn list_prints_the_plan_without_running() {
    let out = Command::new(arrowcert_exe())
        .args([
            "certify",
            "--dlpack",
            "--producer",
            "py:x.py",
            "--list",
            "consumer",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    // Producer side only: the filter "consumer" matches none of its IDs.
    assert!(String::from_utf8_lossy(&out.stdout).trim().is_empty());
    let out = Command::new(arrowcert_exe())
        .args(["certify", "--dlpack", "--consumer", "py:x.py", "--list"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    // Consumer cases, and DLPack in, Arrow out (the library consumes).
    assert!(
        stdout
            .lines()
            .all(|l| l.starts_with("dlpack/consumer/") || l.starts_with("dlpack/to-arrow/")),
        "{stdout}"
    );
    assert!(stdout.contains("dlpack/to-arrow/int32/[7]/contiguous/read-only"));
    assert!(stdout.contains("dlpack/consumer/int32/[5]/contiguous/major-2"));
}

#[test]
fn the_dlpack_matrix_matches_its_committed_expectations() {
    let Some(py) = python() else { return };
    let out_dir = scratch("dlpack-matrix");
    let out = Command::new(arrowcert_exe())
        .arg("--python")
        .arg(&py)
        .arg("dlpack-matrix")
        .args(
            ["numpy", "pyarrow", "array_api_strict", "nanoarrow"].map(|n| {
                format!(
                    "--library={}=py:{}",
                    n.replace('_', "-"),
                    workspace_dir()
                        .join(format!("adapters/dlpack/{n}.py"))
                        .display()
                )
            }),
        )
        .arg("--out")
        .arg(&out_dir)
        .arg("--expectations")
        .arg(workspace_dir().join("expectations"))
        .output()
        .expect("arrowcert runs");
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(0), "{text}");
    let md = std::fs::read_to_string(out_dir.join("dlpack-matrix.md")).unwrap();
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("dlpack-matrix.json")).unwrap())
            .unwrap();
    assert_eq!(
        json["tool"],
        serde_json::to_value(arrowcert::report::Tool::default()).unwrap()
    );
    assert_eq!(json["libraries"].as_array().unwrap().len(), 4, "{md}");
    // 3 producers x 4 consumers.
    assert_eq!(json["pairs"].as_array().unwrap().len(), 12, "{md}");
    assert!(md.contains("MUST dlpack.consumer.rename"), "{md}");
}

#[test]
fn generated_cases_find_a_mutant_shrink_it_and_replay_by_id() {
    let Some(py) = python() else { return };
    let spec = format!("py:{}", fixture().display());
    let args = [
        "--consumer",
        &spec,
        "--cases",
        "40",
        "--seed",
        "7",
        "--shrink-candidates",
        "30",
    ];
    let (_, r, text) = certify_with(&py, &args, "ignores-strides", "dlpack", "generated");
    assert_eq!(r.seed, Some(7));
    let generated: Vec<_> = r
        .cases
        .iter()
        .filter(|c| c.id.starts_with("dlpack/consumer/gen/"))
        .collect();
    assert!(generated.len() >= 20, "{} generated cases", generated.len());
    assert!(
        generated.iter().any(|c| c
            .violations
            .iter()
            .any(|v| v.rule == "dlpack.consumer.strides")),
        "no generated case caught the mutant:\n{text}"
    );
    let shrunk = r
        .shrunk
        .iter()
        .find(|s| s.target == "dlpack.consumer.strides")
        .unwrap_or_else(|| panic!("not shrunk: {:?}\n{text}", r.shrunk));
    assert!(shrunk.tried > 0, "{shrunk:?}");
    assert!(shrunk.replay.contains(&shrunk.case), "{shrunk:?}");
    // Its replay reruns it by ID alone, and it still fails.
    let replay = Command::new(arrowcert_exe())
        .arg("--python")
        .arg(&py)
        .args([
            "certify",
            "--dlpack",
            "--consumer",
            &spec,
            "--cases",
            "0",
            "--exact",
            &shrunk.case,
        ])
        .env("ARROWCERT_DLPACK_MUTANT", "ignores-strides")
        // Its report goes to the default path, under the directory it runs in.
        .current_dir(scratch("dlpack-replay"))
        .output()
        .unwrap();
    let rtext = String::from_utf8_lossy(&replay.stdout);
    assert!(
        rtext.contains("1 cases:") && rtext.contains("dlpack.consumer.strides"),
        "{rtext}"
    );
    // The same seed draws the same cases.
    let ids = |seed: &str| {
        let out = Command::new(arrowcert_exe())
            .args([
                "certify",
                "--dlpack",
                "--consumer",
                "py:x.py",
                "--cases",
                "40",
                "--seed",
                seed,
                "--list",
                "gen/",
            ])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    assert!(!ids("7").is_empty());
    assert_eq!(ids("7"), ids("7"));
    assert_ne!(ids("7"), ids("8"));
}

/// `--device emulated`: the harness's tensors in the emulated device's
/// memory (DLPack device type kDLExtDev) go through the consumer steps; the
/// reference reads them, a mutant is still caught there, and `--device
/// cuda` on a machine without a driver skips each case with the reason
/// (`--require-device cuda` refuses to run: exit 2).
#[test]
fn device_cases_run_on_the_emulated_device_and_skip_cuda_with_the_reason() {
    let Some(py) = python() else { return };
    let spec = format!("py:{}", fixture().display());
    let run = |mutant: &str, device: &str, tag: &str| {
        let filter = format!("dlpack/consumer/{device}/");
        let args = ["--consumer", &spec, "--device", device, &filter];
        certify_with(&py, &args, mutant, "dlpack-device", tag)
    };
    let (code, r, text) = run("", "emulated", "reference");
    assert_eq!(code, Some(0), "{text}");
    assert_eq!(r.summary.total, 9, "{text}");
    assert_eq!(r.summary.passed, 9, "{text}");
    assert!(failed_rules(&r).is_empty(), "{text}");
    assert_eq!(r.devices, vec!["cpu".to_string(), "emulated".to_string()]);
    let (_, r, text) = run("ignores-byte-offset", "emulated", "mutant");
    assert_eq!(
        failed_rules(&r),
        BTreeSet::from(["dlpack.consumer.byte-offset".to_string()]),
        "{text}"
    );
    if arrowcert::device::available(arrowcert::device::Kind::Cuda).is_err() {
        let (code, r, text) = run("", "cuda", "cuda");
        assert_ne!(code, Some(0), "nothing ran: {text}");
        assert_eq!(r.summary.skipped, r.summary.total, "{text}");
        assert!(r.summary.total > 0);
        for c in &r.cases {
            assert!(
                c.message.as_deref().unwrap_or("").contains("CUDA"),
                "{}: {:?}",
                c.id,
                c.message
            );
        }
        let out = Command::new(arrowcert_exe())
            .arg("--python")
            .arg(&py)
            .args([
                "certify",
                "--dlpack",
                "--consumer",
                &spec,
                "--require-device",
                "cuda",
            ])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
}

/// Generated producer cases: dtypes, shapes (0-d and zero-size too), views
/// and every max_version (none, 1.0, 1.3, a later minor, a later major) and
/// copy=True; a mutant is caught, shrunk and replayed by its ID, and the
/// reference passes them all.
#[test]
fn generated_producer_cases_find_a_mutant_shrink_it_and_replay_by_id() {
    let Some(py) = python() else { return };
    let spec = format!("py:{}", fixture().display());
    let run = |mutant: &str, extra: &[&str], tag: &str| {
        let mut args = vec!["--producer", spec.as_str()];
        args.extend(extra);
        let (_, r, text) = certify_with(&py, &args, mutant, "dlpack-gen-producer", tag);
        (r, text)
    };
    let drawn = ["--cases", "40", "--seed", "11", "dlpack/producer/gen/"];
    let (r, text) = run("", &drawn, "reference");
    assert_eq!(r.summary.total, r.cases.len() as u64);
    assert!(r.cases.len() >= 30, "{text}");
    assert!(failed_rules(&r).is_empty(), "{text}");
    let ids: Vec<&str> = r.cases.iter().map(|c| c.id.as_str()).collect();
    for word in ["/v1.99", "/v2.0", "/legacy", "/copy", "/untaken"] {
        assert!(
            ids.iter().any(|id| id.contains(word)),
            "no {word} case: {ids:?}"
        );
    }
    let mut shrink = drawn.to_vec();
    shrink.extend(["--shrink-candidates", "30"]);
    let (r, text) = run("strides-in-bytes", &shrink, "mutant");
    assert_eq!(
        failed_rules(&r),
        BTreeSet::from(["dlpack.tensor.describes".to_string()]),
        "{text}"
    );
    let shrunk = r
        .shrunk
        .iter()
        .find(|s| s.target == "dlpack.tensor.describes")
        .unwrap_or_else(|| panic!("not shrunk: {:?}\n{text}", r.shrunk));
    assert!(
        shrunk.case.starts_with("dlpack/producer/gen/"),
        "{shrunk:?}"
    );
    assert!(shrunk.tried > 0, "{shrunk:?}");
    // Its ID alone reruns it, and it still fails.
    let (r, text) = run(
        "strides-in-bytes",
        &["--cases", "0", "--exact", &shrunk.case],
        "replay",
    );
    assert_eq!(r.cases.len(), 1, "{text}");
    assert!(
        r.cases[0]
            .violations
            .iter()
            .any(|v| v.rule == "dlpack.tensor.describes"),
        "{text}"
    );
}

/// A `dlpack_to_arrow` whose object hands back a wrongly named capsule
/// broke the Arrow PyCapsule interface: the case is an error (not a
/// refusal, so not a limitation), with the reason.
#[test]
fn a_misnamed_arrow_capsule_across_the_protocols_is_an_error() {
    let Some(py) = python() else { return };
    let spec = py_adapter(
        "dlpack-misnamed",
        "misnamed.py",
        r#"import ctypes
import numpy as np
import pyarrow as pa
NAME = "misnamed capsule"
api = ctypes.pythonapi
api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
WRONG = ctypes.create_string_buffer(b"arrow_sch")
class W:
    def __init__(self, a):
        self.a = a
    def __arrow_c_array__(self, requested_schema=None):
        s, a = self.a.__arrow_c_array__()
        api.PyCapsule_SetName(s, WRONG)
        return s, a
def dlpack_to_arrow(t):
    return W(pa.array(np.from_dlpack(t).copy()))
"#,
    );
    let args = [
        "--consumer",
        &spec,
        "--exact",
        "dlpack/to-arrow/int32/[7]/contiguous",
    ];
    let (code, r, text) = certify_with(&py, &args, "", "dlpack-misnamed", "run");
    assert_ne!(code, Some(0), "{text}");
    assert_eq!(r.cases.len(), 1, "{text}");
    assert_eq!(r.cases[0].verdict, Verdict::Error, "{text}");
    let msg = r.cases[0].message.as_deref().unwrap_or("");
    assert!(
        msg.contains("PyCapsule interface") && msg.contains("arrow_sch"),
        "{msg}"
    );
}

/// An `arrow_to_dlpack` that raises before it asks for the harness's Arrow
/// array declined: a limitation, and the array (never handed over) is the
/// harness's to release, so no Arrow consumer rule is charged.
#[test]
fn an_arrow_array_never_asked_for_is_not_charged_to_the_library() {
    let Some(py) = python() else { return };
    let spec = py_adapter(
        "dlpack-never-asked",
        "refuses.py",
        "NAME = \"refuses\"\n\ndef arrow_to_dlpack(array):\n    raise BufferError(\"not today\")\n",
    );
    let args = ["--producer", &spec, "--cases", "0", "dlpack/from-arrow/"];
    let (_, r, text) = certify_with(&py, &args, "", "dlpack-never-asked", "run");
    let run: Vec<_> = r
        .cases
        .iter()
        .filter(|c| c.verdict != Verdict::Skip)
        .collect();
    assert!(!run.is_empty(), "{text}");
    for c in run {
        assert_eq!(c.verdict, Verdict::Limitation, "{}: {text}", c.id);
        assert!(c.violations.is_empty(), "{}: {:?}", c.id, c.violations);
    }
    assert!(failed_rules(&r).is_empty(), "{text}");
}

/// A consumer that asks `__dlpack_device__` and refuses the device before
/// asking for a capsule (CuPy with CPU tensors, seen on an H100) declines
/// in the protocol's own way: limitations. One that raises without
/// looking at the tensor at all is an error, never a limitation.
#[test]
fn a_consumer_declining_the_device_is_a_limitation_and_a_blind_raise_an_error() {
    let Some(py) = python() else { return };
    let spec = format!("py:{}", fixture().display());
    let args = [
        "--consumer",
        &spec,
        "--cases",
        "0",
        "dlpack/consumer/int32/",
    ];
    let (_, r, text) = certify_with(&py, &args, "declines-cpu", "dlpack-declines", "cpu");
    assert!(r.summary.total > 0, "{text}");
    assert_eq!(r.summary.limitations, r.summary.total, "{text}");
    // (A case that needs one kind of capsule says that instead.)
    assert!(
        r.cases
            .iter()
            .all(|c| c
                .message
                .as_deref()
                .is_some_and(|m| m.contains("declined the tensor's device")
                    || m.contains("the case needs a"))),
        "{text}"
    );
    assert!(
        r.cases.iter().any(|c| c
            .message
            .as_deref()
            .is_some_and(|m| m.contains("declined the tensor's device"))),
        "{text}"
    );
    let (code, r, text) = certify_with(&py, &args, "raises-blind", "dlpack-declines", "blind");
    assert_ne!(code, Some(0), "{text}");
    assert_eq!(r.summary.errors, r.summary.total, "{text}");
    assert!(
        r.cases.iter().all(|c| c
            .message
            .as_deref()
            .is_some_and(|m| m.contains("before asking for a capsule"))),
        "{text}"
    );
}

/// The case IDs of report `r` with a violation of `rule`.
fn cases_breaking(r: &Report, rule: &str) -> BTreeSet<String> {
    r.cases
        .iter()
        .filter(|c| c.violations.iter().any(|v| v.rule == rule))
        .map(|c| c.id.clone())
        .collect()
}

/// The planned IDs (`--list`) of the fixture's producer and consumer that
/// contain `part`.
fn planned_with(part: &str) -> BTreeSet<String> {
    let spec = format!("py:{}", fixture().display());
    let out = Command::new(arrowcert_exe())
        .args([
            "certify",
            "--dlpack",
            "--producer",
            &spec,
            "--consumer",
            &spec,
            "--cases",
            "0",
            "--list",
            part,
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with("dlpack/producer/") || l.starts_with("dlpack/consumer/"))
        .map(String::from)
        .collect()
}

#[test]
fn negative_zero_and_gapped_strides_and_offsets_each_have_a_mutant() {
    let Some(py) = python() else { return };
    let spec = format!("py:{}", fixture().display());
    // Each planned shape, and the mutant that misreads (consumer) or
    // misdescribes (producer) it: every case of that shape breaks the rule.
    let table: [(&str, &str, &[&str]); 5] = [
        // Producer views: x[::-1], broadcast_to (stride 0), x[:, ::2],
        // exported with compact strides.
        (
            "view-strides-compact",
            "dlpack.tensor.describes",
            &["/reverse/", "/broadcast/", "/column-step/"],
        ),
        // x[1:] and x[::-1] exported with the data pointer of the array
        // they were made of.
        (
            "ignores-view-offset",
            "dlpack.tensor.describes",
            &["/offset/", "/reverse/"],
        ),
        // The harness's negative strides read as positive ones.
        (
            "abs-strides",
            "dlpack.consumer.strides",
            &["/negative-strides"],
        ),
        // Strides ignored: zero, negative and gapped ones all misread.
        (
            "ignores-strides",
            "dlpack.consumer.strides",
            &["/negative-strides", "/broadcast", "/gaps"],
        ),
        (
            "ignores-byte-offset",
            "dlpack.consumer.byte-offset",
            &["/byte-offset"],
        ),
    ];
    let mut wrong = Vec::new();
    for (mutant, rule, parts) in table {
        let mut args = vec!["--producer", &spec, "--consumer", &spec, "--cases", "0"];
        args.extend(parts.iter().copied());
        let (_, r, text) = certify_with(&py, &args, mutant, "dlpack-strides", mutant);
        let broken = cases_breaking(&r, rule);
        let side = if rule.starts_with("dlpack.consumer.") {
            "dlpack/consumer/"
        } else {
            "dlpack/producer/"
        };
        for part in parts {
            let want: BTreeSet<String> = planned_with(part)
                .into_iter()
                .filter(|id| id.starts_with(side))
                .collect();
            assert!(!want.is_empty(), "no planned case has {part}");
            let missed: Vec<_> = want.difference(&broken).collect();
            if !missed.is_empty() {
                wrong.push(format!("{mutant}: {rule} not broken in {missed:?}\n{text}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn numpy_exports_and_reads_negative_zero_and_gapped_strides() {
    let Some(py) = python() else { return };
    let spec = format!(
        "py:{}",
        workspace_dir().join("adapters/dlpack/numpy.py").display()
    );
    let args = [
        "--producer",
        &spec,
        "--consumer",
        &spec,
        "--cases",
        "0",
        "/reverse/",
        "/broadcast",
        "/column-step/",
        "/offset/",
        "/negative-strides",
        "/byte-offset",
        "--skip",
        "to-arrow",
    ];
    let (code, r, text) = certify_with(&py, &args, "", "dlpack-strides", "numpy");
    assert_eq!(code, Some(0), "{text}");
    // 16 producer views (x[::-1], broadcast_to, x[:, ::2]) + 6 offsets,
    // 6 + 6 + 6 consumer tensors (negative strides, broadcast, byte offset).
    assert_eq!(r.summary.total, 40, "{text}");
    assert_eq!(r.summary.passed, r.summary.total, "{text}");
    for c in &r.cases {
        let rule = if c.id.starts_with("dlpack/producer/") {
            "dlpack.tensor.describes"
        } else if c.id.ends_with("/byte-offset") {
            "dlpack.consumer.byte-offset"
        } else {
            "dlpack.consumer.strides"
        };
        assert!(c.checked.iter().any(|x| x == rule), "{}: {rule}", c.id);
        assert!(c.violations.is_empty(), "{}: {:?}", c.id, c.violations);
    }
}

#[test]
fn from_dlpack_of_a_read_only_tensor_is_judged_by_its_writeable_flag() {
    let Some(py) = python() else { return };
    let numpy = format!(
        "py:{}",
        workspace_dir().join("adapters/dlpack/numpy.py").display()
    );
    let fixture = format!("py:{}", fixture().display());
    let ro = "dlpack/consumer/int32/[4,3]/contiguous/read-only";
    let rule = "dlpack.consumer.read-only-array";
    // NumPy's from_dlpack returns a view of a READ_ONLY tensor with
    // flags.writeable False; the fixture's reference too, its mutant a
    // writeable one (a SHOULD: the run still passes).
    for (spec, mutant, fails) in [
        (&numpy, "", false),
        (&fixture, "", false),
        (&fixture, "read-only-writeable", true),
    ] {
        let args = ["--consumer", spec.as_str(), "--cases", "0", "--exact", ro];
        let (code, r, text) = certify_with(&py, &args, mutant, "dlpack-read-only", mutant);
        assert_eq!(code, Some(0), "{text}");
        let c = &r.cases[0];
        assert!(c.checked.iter().any(|x| x == rule), "{text}");
        assert_eq!(!cases_breaking(&r, rule).is_empty(), fails, "{text}");
        if fails {
            assert!(
                c.violations[0].evidence.contains("writeable"),
                "{:?}",
                c.violations
            );
        }
    }
    // A library whose arrays show no writeable state is not judged: the
    // text asks it to ignore the flag.
    let plain = scratch("dlpack-read-only").join("no_flags.py");
    std::fs::write(
        &plain,
        "import numpy as np\n\nclass Box:\n    def __init__(self, a):\n        self.a = a\n    def __dlpack__(self, **kw):\n        return self.a.__dlpack__(**kw)\n    def __dlpack_device__(self):\n        return self.a.__dlpack_device__()\n\ndef dlpack_read(t):\n    return Box(np.from_dlpack(t))\n",
    )
    .unwrap();
    let spec = format!("py:{}", plain.display());
    let args = ["--consumer", spec.as_str(), "--cases", "0", "--exact", ro];
    let (code, r, text) = certify_with(&py, &args, "", "dlpack-read-only", "no-flags");
    assert_eq!(code, Some(0), "{text}");
    let why: Vec<_> = r.cases[0]
        .not_exercised
        .iter()
        .filter(|n| n.rule == rule)
        .collect();
    assert_eq!(why.len(), 1, "{text}");
    assert!(why[0].reason.contains("no writeable state"), "{why:?}");
}

#[test]
fn a_deleter_that_deadlocks_or_crashes_off_its_thread_breaks_the_gil_rule() {
    let Some(py) = python() else { return };
    let spec = format!("py:{}", fixture().display());
    let rule = "dlpack.deleter.without-gil";
    // NumPy's deleter (behind the reference's wrapper) takes the GIL
    // itself: both cases pass, and the array it held is freed.
    let args = [
        "--producer",
        spec.as_str(),
        "--cases",
        "0",
        "deleter-thread",
    ];
    let (_, r, text) = certify_with(&py, &args, "", "dlpack-gil", "reference");
    assert_eq!(r.summary.total, 2, "{text}");
    assert_eq!(r.summary.passed, 2, "{text}");
    for c in &r.cases {
        for want in [rule, "dlpack.deleter.frees"] {
            assert!(c.checked.iter().any(|x| x == want), "{}: {want}", c.id);
        }
    }
    // A deadlock: each case fails after the wait, and the worker that
    // holds the stuck thread is replaced (the second case still runs).
    let (code, r, text) = certify_with(
        &py,
        &args,
        "deleter-needs-main-thread",
        "dlpack-gil",
        "deadlock",
    );
    assert_eq!(code, Some(1), "{text}");
    assert!(r.complete, "{text}");
    assert_eq!(cases_breaking(&r, rule).len(), 2, "{text}");
    assert!(r.cases.iter().all(|c| c.verdict == Verdict::Fail), "{text}");
    assert!(
        r.cases[0].violations[0]
            .evidence
            .contains("had not returned"),
        "{:?}",
        r.cases[0].violations
    );
    // A crash inside the deleter call is charged to the rule.
    let (code, r, text) = certify_with(
        &py,
        &args,
        "deleter-crashes-off-thread",
        "dlpack-gil",
        "crash",
    );
    assert_eq!(code, Some(1), "{text}");
    assert!(
        r.cases.iter().all(|c| c.verdict == Verdict::Crash),
        "{text}"
    );
    assert_eq!(cases_breaking(&r, rule).len(), 2, "{text}");
}

#[test]
fn the_debug_allocator_turns_a_deleters_use_after_free_into_a_crash() {
    let Some(py) = python() else { return };
    let spec = format!("py:{}", fixture().display());
    let id = "dlpack/producer/float64/[7]/whole/v1";
    let args = ["--producer", spec.as_str(), "--cases", "0", "--exact", id];
    // The workers run with PYTHONMALLOC=debug unless told otherwise: the
    // freed tensor is 0xDD bytes, and the deleter's read through its
    // shape pointer crashes the case.
    let (_, r, text) = certify_with(
        &py,
        &args,
        "deleter-use-after-free",
        "dlpack-malloc",
        "debug",
    );
    assert_eq!(r.cases.len(), 1, "{text}");
    assert_eq!(r.cases[0].verdict, Verdict::Crash, "{text}");
    // Under pymalloc the freed block still holds what it held: the same
    // bug passes unseen.
    let report = scratch("dlpack-malloc").join("pymalloc.json");
    let out = Command::new(arrowcert_exe())
        .arg("--python")
        .arg(&py)
        .args(["certify", "--dlpack"])
        .args(args)
        .arg("--report")
        .arg(&report)
        .env("ARROWCERT_DLPACK_MUTANT", "deleter-use-after-free")
        .env("PYTHONMALLOC", "pymalloc")
        .output()
        .unwrap();
    let r = arrowcert::report::read(&report).unwrap();
    assert_eq!(
        r.cases[0].verdict,
        Verdict::Pass,
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A DLPack run interrupted with SIGINT (once its first checkpoint is on
/// disk, at a random moment after) prints how to resume; the printed
/// command, run as given, finishes the report with the verdicts of an
/// uninterrupted run (which writes JUnit XML too). The mutant crashes
/// cases (58 of 649), so the run is long enough to interrupt (several
/// seconds, the signal within two) and the resumed part starts workers
/// again.
#[test]
fn a_dlpack_run_interrupted_with_sigint_resumes_as_printed_to_an_uninterrupted_runs_verdicts() {
    use std::process::Stdio;
    use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
    let Some(py) = python() else { return };
    type Verdicts = Vec<(String, Verdict, Vec<String>)>;
    let verdicts = |r: &Report| -> Verdicts {
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
    };
    let spec = format!("py:{}", fixture().display());
    let args: Vec<String> = [
        "--python",
        &py.display().to_string(),
        "certify",
        "--dlpack",
        "--producer",
        &spec,
        "--consumer",
        &spec,
        "--cases",
        "200",
        "--seed",
        "7",
        "--shrink-candidates",
        "0",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let mutant = "destructor-ignores-name";
    let dir = scratch("dlpack-resume");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // No --report: the run picks its default path, which the resume
    // command names.
    let child = Command::new(arrowcert_exe())
        .args(&args)
        .current_dir(&dir)
        .env("ARROWCERT_DLPACK_MUTANT", mutant)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let checkpoint = || {
        std::fs::read_dir(dir.join("reports"))
            .ok()?
            .flatten()
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|e| e == "json"))
    };
    let started = Instant::now();
    while checkpoint().is_none() && started.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(20));
    }
    // A moment later that differs from run to run (the clock's nanoseconds).
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    std::thread::sleep(Duration::from_millis(
        (t ^ (t >> 17)).wrapping_mul(0x9E37_79B9_7F4A_7C15) % 1000,
    ));
    Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let line_after = |text: &str, prefix: &str| -> Option<String> {
        text.lines()
            .find_map(|l| l.strip_prefix(prefix))
            .map(String::from)
    };
    let resume = line_after(&stdout, "resume with: ")
        .unwrap_or_else(|| panic!("the run was not interrupted (too short?):\n{stdout}"));
    assert_eq!(out.status.code(), Some(130), "{stdout}");
    assert!(
        stdout.contains("interrupted by SIGINT"),
        "the run says why it stopped:\n{stdout}"
    );
    let partial =
        arrowcert::report::read(&dir.join(line_after(&stdout, "report: ").unwrap())).unwrap();
    assert!(!partial.complete, "{stdout}");
    assert!(
        partial
            .interrupted
            .as_deref()
            .is_some_and(|s| s.starts_with("SIGINT")),
        "{:?}",
        partial.interrupted
    );
    // The printed command, as a user would paste it.
    let resumed = Command::new("sh")
        .args(["-c", &resume])
        .current_dir(&dir)
        .env("ARROWCERT_DLPACK_MUTANT", mutant)
        .output()
        .unwrap();
    let rstdout = String::from_utf8_lossy(&resumed.stdout);
    assert!(
        rstdout.contains(&format!(
            "{} of {} cases already ran",
            partial.cases.len(),
            partial.planned
        )),
        "`{resume}`\n{rstdout}"
    );
    let done = arrowcert::report::read(
        &dir.join(line_after(&rstdout, "report: ").expect("a report line")),
    )
    .unwrap();
    assert!(done.complete, "`{resume}`\n{rstdout}");
    // The same run, uninterrupted.
    let whole = dir.join("uninterrupted.json");
    let junit = dir.join("uninterrupted.xml");
    let out = Command::new(arrowcert_exe())
        .args(&args)
        .arg("--report")
        .arg(&whole)
        .arg("--junit")
        .arg(&junit)
        .current_dir(&dir)
        .env("ARROWCERT_DLPACK_MUTANT", mutant)
        .output()
        .unwrap();
    assert_eq!(
        resumed.status.code(),
        out.status.code(),
        "{rstdout}\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let reference = arrowcert::report::read(&whole).unwrap();
    assert!(
        reference.cases.iter().any(|c| c.verdict == Verdict::Crash),
        "the mutant crashes cases"
    );
    assert_eq!(
        verdicts(&done),
        verdicts(&reference),
        "interrupted by SIGINT and resumed: verdicts differ from an uninterrupted run"
    );
    // Its JUnit XML, as every certification's: one test case per rule and
    // one per case.
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert_eq!(
        xml.matches("<testcase ").count(),
        reference.rules.len() + reference.cases.len(),
        "{xml}"
    );
}

//! CUDA Array Interface certification (`arrowcert certify --cai`,
//! docs/CAI.md), without a GPU: the software device
//! (adapters/cai/softdevice.py: host memory behind the "device pointer",
//! emulated streams) passes every `cai.*` rule or leaves it not exercised
//! with a reason; each of its mutants (ARROWCERT_CAI_MUTANT, its MUTANTS
//! table) is reported under exactly the rule it breaks; the table is
//! written to docs/CAI_MUTANTS.md (`ARROWCERT_BLESS=1` rewrites it); the
//! bundled GPU adapters skip with the reason where no driver is present;
//! bad input is one line and exit 2. The software device also exports
//! DLPack and an Arrow device array over the same memory, so the
//! cai.agree.* rules are exercised (and each has dlpack-*/arrow-* mutants);
//! an object exporting the CAI only leaves them not exercised, with why.
//!
//! They need a Python with a shared libpython (target/python-test/venv,
//! `scripts/python/setup-test-env.sh`); CI sets
//! ARROWCERT_REQUIRE_PY_ADAPTERS=1, so there they cannot skip.

mod support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use arrowcert::report::{Report, Verdict};
use support::*;

fn python() -> Option<PathBuf> {
    let py = workspace_dir().join("target/python-test/venv/bin/python");
    if py.exists() {
        return Some(py);
    }
    let why = format!(
        "{} is missing: run scripts/python/setup-test-env.sh",
        py.display()
    );
    assert!(
        std::env::var("ARROWCERT_REQUIRE_PY_ADAPTERS").as_deref() != Ok("1"),
        "ARROWCERT_REQUIRE_PY_ADAPTERS=1 but {why}"
    );
    eprintln!("SKIPPED: {why}");
    None
}

fn softdevice() -> PathBuf {
    workspace_dir().join("adapters/cai/softdevice.py")
}

/// `arrowcert --python PY certify --cai --producer py:ADAPTER` (and
/// `--consumer` the same when `consumer`) with `mutant`: the exit code,
/// the report and the output.
fn certify(
    py: &Path,
    adapter: &Path,
    consumer: bool,
    mutant: &str,
    tag: &str,
) -> (Option<i32>, Report, String) {
    run_cai(py, adapter, consumer.then_some(adapter), mutant, "cai", tag)
}

/// `arrowcert --python PY certify --cai --producer py:P [--consumer py:C]`
/// with `mutant`, its report in the scratch directory `dir`: the exit
/// code, the report and the output.
fn run_cai(
    py: &Path,
    producer: &Path,
    consumer: Option<&Path>,
    mutant: &str,
    dir: &str,
    tag: &str,
) -> (Option<i32>, Report, String) {
    let report = scratch(dir).join(format!("{tag}.json"));
    let _ = std::fs::remove_file(&report);
    let out = Command::new(arrowcert_exe())
        .arg("--python")
        .arg(py)
        .args(["certify", "--cai", "--producer"])
        .arg(format!("py:{}", producer.display()))
        .args(consumer.map(|_| "--consumer"))
        .args(consumer.map(|c| format!("py:{}", c.display())))
        .arg("--report")
        .arg(&report)
        .env("ARROWCERT_CAI_MUTANT", mutant)
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

fn with_verdict(r: &Report, v: Verdict) -> BTreeSet<String> {
    r.rules
        .iter()
        .filter(|x| x.verdict == v)
        .map(|x| x.rule.clone())
        .collect()
}

/// The mutant -> rule table of the software device (its MUTANTS dict).
fn mutants() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(softdevice()).unwrap();
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
fn the_software_device_passes_every_cai_rule() {
    let Some(py) = python() else { return };
    let (code, r, text) = certify(&py, &softdevice(), true, "", "reference");
    assert_eq!(code, Some(0), "{text}");
    assert!(r.complete, "{text}");
    assert!(with_verdict(&r, Verdict::Fail).is_empty(), "{text}");
    assert_eq!(r.summary.passed, r.summary.total, "{text}");
    assert_eq!(r.rules.len(), arrowcert::rules::cai::CAI_RULES.len());
    // Every rule is exercised on the software device: none is left out.
    assert!(
        with_verdict(&r, Verdict::Skip).is_empty(),
        "{:?}\n{text}",
        with_verdict(&r, Verdict::Skip)
    );
    // Each case says why a rule it did not judge was not judged.
    for c in &r.cases {
        for n in &c.not_exercised {
            assert!(!n.reason.is_empty(), "{}: {}", c.id, n.rule);
        }
    }
    let pending = r
        .cases
        .iter()
        .filter(|c| c.checked.iter().any(|x| x == "cai.producer.sync"))
        .count();
    assert_eq!(pending, 2, "{text}");
    let consumer: Vec<&str> = r
        .cases
        .iter()
        .filter(|c| c.id.starts_with("cai/consumer/"))
        .map(|c| c.id.as_str())
        .collect();
    assert_eq!(consumer.len(), 2, "{text}");
}

/// An object that exports the CUDA Array Interface only (the software
/// device's arrays behind a wrapper without __dlpack__): nothing to compare
/// the dict with, so every cai.agree rule is not exercised, with why, and
/// never passes.
#[test]
fn one_protocol_only_leaves_the_agree_rules_not_exercised() {
    let Some(py) = python() else { return };
    let dir = scratch("cai-only");
    let adapter = dir.join("cai_only.py");
    std::fs::write(
        &adapter,
        format!(
            "import importlib.util\n\
             _s = importlib.util.spec_from_file_location('softdevice', {:?})\n\
             sd = importlib.util.module_from_spec(_s)\n\
             _s.loader.exec_module(sd)\n\
             NAME = 'CAI only'\n\
             CAI_DEVICE = 'software'\n\
             class Only:\n    \
                 def __init__(self, a):\n        self._a = a\n    \
                 @property\n    \
                 def __cuda_array_interface__(self):\n        \
                     return self._a.__cuda_array_interface__\n\
             def cai_object(spec):\n    return Only(sd.cai_object(spec))\n\
             cai_synchronize = sd.cai_synchronize\n\
             cai_stream_alive = sd.cai_stream_alive\n\
             cai_accessible = sd.cai_accessible\n",
            softdevice().display().to_string()
        ),
    )
    .unwrap();
    let (code, r, text) = certify(&py, &adapter, false, "", "cai-only");
    assert_eq!(code, Some(0), "{text}");
    assert!(with_verdict(&r, Verdict::Fail).is_empty(), "{text}");
    let skipped = with_verdict(&r, Verdict::Skip);
    for rule in arrowcert::cai::agree::AGREE_RULES {
        assert!(skipped.contains(rule), "{rule} is not skipped\n{text}");
    }
    assert_eq!(
        skipped.len(),
        arrowcert::cai::agree::AGREE_RULES.len(),
        "{text}"
    );
    for c in &r.cases {
        for rule in arrowcert::cai::agree::AGREE_RULES {
            assert!(!c.checked.iter().any(|x| x == rule), "{}: {rule}", c.id);
            let n = c.not_exercised.iter().find(|n| n.rule == rule);
            assert!(
                n.is_some_and(|n| n.reason.contains("the CUDA Array Interface only")),
                "{}: {rule}: {n:?}",
                c.id
            );
        }
    }
}

/// Real DLPack and Arrow producers (NumPy's __dlpack__, pyarrow's
/// __arrow_c_device_array__, zero-copy) over the memory a dict built from
/// NumPy's __array_interface__ describes: no false disagreement. Only the
/// device differs (both say CPU, a CAI array is CUDA's), and says so.
#[test]
fn real_dlpack_and_arrow_exports_agree_but_for_their_cpu_device() {
    let Some(py) = python() else { return };
    let adapter = workspace_dir().join("harness/tests/fixtures/cai/numpy_as_cai.py");
    let (code, r, text) = certify(&py, &adapter, false, "", "numpy-as-cai");
    // A SHOULD rule failed: certified with findings, exit 0.
    assert_eq!(code, Some(0), "{text}");
    assert_eq!(
        with_verdict(&r, Verdict::Fail),
        BTreeSet::from(["cai.agree.device".to_string()]),
        "{text}"
    );
    let passed = with_verdict(&r, Verdict::Pass);
    for rule in arrowcert::cai::agree::AGREE_RULES {
        assert!(
            rule == "cai.agree.device" || passed.contains(rule),
            "{rule}\n{text}"
        );
    }
    for c in &r.cases {
        let v = c
            .violations
            .iter()
            .find(|v| v.rule == "cai.agree.device")
            .unwrap_or_else(|| panic!("{}: no device disagreement\n{text}", c.id));
        assert!(v.evidence.contains("(1, 0)"), "{}: {}", c.id, v.evidence);
    }
    // The read-only u1 array: NumPy's versioned tensor sets READ_ONLY, and
    // that was compared, not skipped.
    let u1 = r
        .cases
        .iter()
        .find(|c| c.id == "cai/producer/u1-5")
        .unwrap();
    assert!(
        u1.checked.iter().any(|x| x == "cai.agree.readonly"),
        "{text}"
    );
    // pyarrow's export alone (no __dlpack__): compared where the array is
    // one-dimensional, C-contiguous and not bool; elsewhere not exercised.
    let report = scratch("cai").join("arrow-only.json");
    let out = Command::new(arrowcert_exe())
        .arg("--python")
        .arg(&py)
        .args(["certify", "--cai", "--producer"])
        .arg(format!("py:{}", adapter.display()))
        .arg("--report")
        .arg(&report)
        .env("ARROWCERT_FIXTURE_ARROW_ONLY", "1")
        .env_remove("ARROWCERT_CAI_MUTANT")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let r = arrowcert::report::read(&report).unwrap_or_else(|e| panic!("{e}\n{text}"));
    for c in &r.cases {
        let arrow = ["cai/producer/u1-5", "cai/producer/f8-8-pending"].contains(&c.id.as_str());
        let failed: Vec<&str> = c.violations.iter().map(|v| v.rule.as_str()).collect();
        if arrow {
            assert_eq!(failed, ["cai.agree.device"], "{}\n{text}", c.id);
            assert!(c.violations[0].evidence.contains("ArrowDeviceArray"));
            for rule in [
                "cai.agree.pointer",
                "cai.agree.shape",
                "cai.agree.strides",
                "cai.agree.dtype",
            ] {
                assert!(c.checked.iter().any(|x| x == rule), "{}: {rule}", c.id);
            }
        } else {
            assert!(failed.is_empty(), "{}: {failed:?}\n{text}", c.id);
            assert!(
                c.not_exercised
                    .iter()
                    .any(|n| n.rule == "cai.agree.pointer" && n.reason.contains("no __dlpack__")),
                "{}\n{text}",
                c.id
            );
        }
    }
}

#[test]
fn every_cai_rule_has_a_mutant_reported_under_it_alone() {
    let Some(py) = python() else { return };
    let table = mutants();
    let covered: BTreeSet<&str> = table.iter().map(|(_, r)| r.as_str()).collect();
    for rule in arrowcert::rules::cai::CAI_RULES {
        assert!(covered.contains(rule.id), "no mutant breaks {}", rule.id);
    }
    let mut doc = String::from(
        "# CUDA Array Interface mutants\n\n\
         <!-- Generated by harness/tests/cai.rs; do not edit.\n     \
         Regenerate: ARROWCERT_BLESS=1 cargo test -p arrowcert --test cai -->\n\n\
         Each mutant of the software device (`adapters/cai/softdevice.py`, selected by \
         `ARROWCERT_CAI_MUTANT`) breaks one `cai.*` rule; `certify --cai --producer --consumer` \
         reports that rule failed and no other. No GPU is involved: the device's memory is host memory and \
         its streams are emulated (docs/CAI.md).\n\n\
         | mutant | rule | level | exit | evidence (first failing case) |\n|---|---|---|---|---|\n",
    );
    for (mutant, rule) in &table {
        let (code, r, text) = certify(&py, &softdevice(), true, mutant, mutant);
        let failed = with_verdict(&r, Verdict::Fail);
        assert_eq!(
            failed,
            BTreeSet::from([rule.clone()]),
            "{mutant}: expected only {rule} to fail\n{text}"
        );
        let summary = r.rules.iter().find(|x| &x.rule == rule).unwrap();
        let want = if summary.level == "MUST" { 1 } else { 0 };
        assert_eq!(
            code,
            Some(want),
            "{mutant}: exit for a {} rule\n{text}",
            summary.level
        );
        doc.push_str(&format!(
            "| `{mutant}` | `{rule}` | {} | {} | {} |\n",
            summary.level,
            code.unwrap_or(-1),
            summary
                .evidence
                .as_deref()
                .unwrap_or("")
                .replace('|', "\\|")
                .replace(['\n', '`'], " ")
        ));
    }
    let path = workspace_dir().join("docs/CAI_MUTANTS.md");
    if std::env::var_os("ARROWCERT_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(&path, &doc).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    // Evidence carries addresses: compare the rows' mutant and rule only.
    let rows = |t: &str| -> Vec<String> {
        t.lines()
            .filter(|l| l.starts_with("| `"))
            .map(|l| l.split('|').take(5).collect::<Vec<_>>().join("|"))
            .collect()
    };
    assert_eq!(
        rows(&committed),
        rows(&doc),
        "{} is out of date: ARROWCERT_BLESS=1 cargo test -p arrowcert --test cai",
        path.display()
    );
}

/// A second library on the software device (a module instance of its
/// own over the same device): the other side of a pair.
fn soft_reader() -> PathBuf {
    workspace_dir().join("harness/tests/fixtures/cai/soft_reader.py")
}

/// `certify --cai --producer py:P --consumer py:C` (a pair) with `mutant`.
fn pair(py: &Path, p: &Path, c: &Path, mutant: &str, tag: &str) -> (Option<i32>, Report, String) {
    run_cai(py, p, Some(c), mutant, "cai-pairs", tag)
}

/// The pair cases whose verdict is `v`.
fn cases_with(r: &Report, v: Verdict) -> BTreeSet<String> {
    r.cases
        .iter()
        .filter(|c| c.verdict == v)
        .map(|c| c.id.clone())
        .collect()
}

#[test]
fn a_pair_on_the_software_device_reads_each_others_arrays() {
    let Some(py) = python() else { return };
    for (p, c, tag) in [
        (softdevice(), soft_reader(), "soft-reader"),
        (soft_reader(), softdevice(), "reader-soft"),
    ] {
        let (code, r, text) = pair(&py, &p, &c, "", tag);
        assert_eq!(code, Some(0), "{tag}: {text}");
        assert!(r.complete, "{tag}: {text}");
        assert!(r.summary.total >= 7, "{tag}: {text}");
        assert_eq!(r.summary.passed, r.summary.total, "{tag}: {text}");
        assert!(
            r.cases.iter().all(|x| x.id.starts_with("cai/pair/")),
            "{tag}"
        );
        // The pending cases are among them: the consumer synchronized on
        // the producer's stream.
        assert!(r.cases.iter().any(|x| x.id.ends_with("-pending")), "{tag}");
        // A pair's cases are no rule's verdicts.
        assert!(r.rules.is_empty(), "{tag}: {:?}", r.rules);
        let roles: Vec<&str> = r.plugins.iter().map(|p| p.role.as_str()).collect();
        assert_eq!(roles, ["producer", "consumer"], "{tag}");
    }
}

/// A consumer that does not synchronize on the stream, or a producer whose
/// pending work is on no exported stream: exactly the pending cases' values
/// do not arrive, and the failure names both libraries.
#[test]
fn a_pair_with_a_side_that_does_not_synchronize_fails_its_pending_cases() {
    let Some(py) = python() else { return };
    for mutant in ["consumer-no-sync", "stream-none-pending"] {
        let (code, r, text) = pair(&py, &softdevice(), &soft_reader(), mutant, mutant);
        assert_eq!(code, Some(1), "{mutant}: {text}");
        let pending: BTreeSet<String> = r
            .cases
            .iter()
            .filter(|x| x.id.ends_with("-pending"))
            .map(|x| x.id.clone())
            .collect();
        assert!(!pending.is_empty(), "{mutant}: {text}");
        assert_eq!(cases_with(&r, Verdict::Fail), pending, "{mutant}: {text}");
        for x in r.cases.iter().filter(|x| x.verdict == Verdict::Fail) {
            let m = x.message.as_deref().unwrap_or("");
            assert!(
                m.contains("the values did not arrive")
                    && m.contains("software CAI device")
                    && m.contains("second library"),
                "{mutant}: {m}"
            );
            assert!(x.replay.contains(&x.id), "{}", x.replay);
        }
        assert!(text.contains("replay: "), "{mutant}: {text}");
    }
}

/// Each case runs in a worker: an adapter that aborts in one case and
/// hangs in another costs those two cases (a crash, a timeout), and every
/// other case still runs to its verdict.
#[test]
fn an_adapter_that_crashes_or_hangs_costs_only_its_case() {
    let Some(py) = python() else { return };
    let dir = scratch("cai-hostile");
    let hostile = dir.join("hostile.py");
    std::fs::write(
        &hostile,
        format!(
            r#"import importlib.util, os, time
_SPEC = importlib.util.spec_from_file_location("hostile_base", {path:?})
_BASE = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(_BASE)
NAME = "a hostile adapter (test)"
CAI_DEVICE = "software"
cai_synchronize = _BASE.cai_synchronize
cai_stream_alive = _BASE.cai_stream_alive
cai_accessible = _BASE.cai_accessible
cai_device_array = _BASE.cai_device_array
def cai_object(spec):
    if spec["dtype"] == "uint8":
        os.abort()
    return _BASE.cai_object(spec)
def cai_consume(obj):
    if obj.__cuda_array_interface__["typestr"] == "<i8":
        time.sleep(3600)
    return _BASE.cai_consume(obj)
"#,
            path = softdevice().display().to_string()
        ),
    )
    .unwrap();
    let report = dir.join("hostile.json");
    let _ = std::fs::remove_file(&report);
    let lib = format!("py:{}", hostile.display());
    let out = Command::new(arrowcert_exe())
        .arg("--python")
        .arg(&py)
        .args(["certify", "--cai", "--producer", &lib, "--consumer", &lib])
        .args(["--case-timeout-ms", "3000", "--report"])
        .arg(&report)
        .output()
        .expect("arrowcert runs");
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(1), "{text}");
    let r = arrowcert::report::read(&report).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert!(r.complete, "{text}");
    let crashed = cases_with(&r, Verdict::Crash);
    let hung = cases_with(&r, Verdict::Timeout);
    assert_eq!(
        crashed,
        BTreeSet::from(["cai/producer/u1-5".to_string()]),
        "{text}"
    );
    assert_eq!(
        hung,
        BTreeSet::from(["cai/consumer/i8-6-step-pending".to_string()]),
        "{text}"
    );
    assert_eq!(
        r.summary.passed + 2,
        r.summary.total,
        "every other case ran to a pass: {text}"
    );
}

#[test]
fn gpu_pairs_skip_with_the_reason_without_a_driver() {
    let Some(py) = python() else { return };
    if arrowcert::device::cuda_driver_loads() {
        eprintln!("SKIPPED: this machine has a CUDA driver; this test covers machines without one");
        return;
    }
    let lib = |n: &str| workspace_dir().join(format!("adapters/cai/{n}.py"));
    let (code, r, text) = pair(&py, &lib("cupy"), &lib("torch"), "", "cupy-torch");
    assert_eq!(code, Some(3), "{text}");
    assert_eq!(r.summary.skipped, r.summary.total, "{text}");
    assert!(
        r.cases.iter().all(|c| c
            .message
            .as_deref()
            .is_some_and(|m| m.contains("no CUDA driver"))),
        "{text}"
    );
}

#[test]
fn gpu_adapters_skip_with_the_reason_without_a_driver() {
    let Some(py) = python() else { return };
    if arrowcert::device::cuda_driver_loads() {
        eprintln!("SKIPPED: this machine has a CUDA driver; this test covers machines without one");
        return;
    }
    for name in ["cupy", "numba", "torch"] {
        let adapter = workspace_dir().join(format!("adapters/cai/{name}.py"));
        let (code, r, text) = certify(&py, &adapter, false, "", name);
        // Nothing exercised is not a pass: not certified (exit 3), with why.
        assert_eq!(code, Some(3), "{name}: {text}");
        assert!(
            text.contains("no data case ran to a verdict"),
            "{name}: {text}"
        );
        assert_eq!(r.summary.skipped, r.summary.total, "{name}: {text}");
        assert!(
            r.rules.iter().all(|x| x.verdict == Verdict::Skip),
            "{name}: {text}"
        );
        assert!(
            r.cases.iter().all(|c| c
                .message
                .as_deref()
                .is_some_and(|m| m.contains("no CUDA driver"))),
            "{name}: {text}"
        );
    }
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let out = run_arrowcert(&["certify", "--cai", "--producer", "libfoo.so"]);
    assert_bad_input(&out, "--cai takes py: adapters");
    let out = run_arrowcert(&["certify", "--cai"]);
    assert_bad_input(&out, "--cai needs --producer");
    let out = run_arrowcert(&[
        "certify",
        "--cai",
        "--producer",
        "py:a.py",
        "--consumer",
        "libb.so",
    ]);
    assert_bad_input(&out, "--cai takes py: adapters");
    let Some(py) = python() else { return };
    let dir = scratch("cai-bad");
    let plain = dir.join("plain.py");
    std::fs::write(&plain, "NAME = 'plain'\n").unwrap();
    // Pairs: each side must serve its part, both on one device.
    let on_cuda = dir.join("on_cuda.py");
    std::fs::write(
        &on_cuda,
        "NAME = 'a consumer on CUDA'\nCAI_DEVICE = 'cuda'\ndef cai_consume(obj):\n    return []\n",
    )
    .unwrap();
    let fixture = workspace_dir().join("harness/tests/fixtures/cai/numpy_as_cai.py");
    for (producer, consumer, words) in [
        (&plain, &on_cuda, "defines no cai_object"),
        (&softdevice(), &fixture, "defines no cai_consume"),
        (
            &softdevice(),
            &on_cuda,
            "needs both libraries on one device",
        ),
    ] {
        let out = Command::new(arrowcert_exe())
            .arg("--python")
            .arg(&py)
            .args(["certify", "--cai", "--producer"])
            .arg(format!("py:{}", producer.display()))
            .arg("--consumer")
            .arg(format!("py:{}", consumer.display()))
            .output()
            .unwrap();
        assert_bad_input(&out, words);
    }
    let out = Command::new(arrowcert_exe())
        .arg("--python")
        .arg(&py)
        .args(["certify", "--cai", "--producer"])
        .arg(format!("py:{}", plain.display()))
        .output()
        .unwrap();
    assert_bad_input(&out, "defines no cai_object");
    // An adapter that aborts or raises on import: loaded in a worker first,
    // so the harness never opens it itself.
    for (body, words) in [
        ("import os\nos.abort()\n", "killed by SIGABRT"),
        ("raise RuntimeError('no device here')\n", "no device here"),
    ] {
        let file = dir.join("on_import.py");
        std::fs::write(&file, body).unwrap();
        let lib = format!("py:{}", file.display());
        for args in [
            vec!["certify", "--cai", "--producer", &lib],
            vec![
                "certify",
                "--cai",
                "--producer",
                "py:adapters/cai/softdevice.py",
                "--consumer",
                &lib,
            ],
        ] {
            let out = Command::new(arrowcert_exe())
                .current_dir(workspace_dir())
                .arg("--python")
                .arg(&py)
                .args(&args)
                .output()
                .unwrap();
            assert_bad_input(&out, words);
        }
    }
    let out = Command::new(arrowcert_exe())
        .arg("--python")
        .arg(&py)
        .args(["certify", "--cai", "--producer"])
        .arg(format!("py:{}", softdevice().display()))
        .env("ARROWCERT_CAI_MUTANT", "no-such-mutant")
        .output()
        .unwrap();
    assert_bad_input(&out, "no CAI mutant");
}

#[test]
fn rules_and_explain_list_the_cai_family() {
    let out = run_arrowcert(&["rules", "cai.*"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        text.lines().count(),
        arrowcert::rules::cai::CAI_RULES.len(),
        "{text}"
    );
    let out = run_arrowcert(&["explain", "cai.stream.lifetime"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with("cai.stream.lifetime  MUST  producer"),
        "{text}"
    );
    assert!(text.contains("CudaArrayInterface.rst"), "{text}");
}

//! `py:` adapters (docs/PYTHON_ADAPTERS.md): a library certified from a
//! Python file written only from that page, and bad adapters as bad input.
//!
//! They need a Python with headers and a shared libpython and the pinned
//! nanoarrow package: `scripts/python/setup-test-env.sh` makes
//! `target/python-test/venv` (CI runs it and sets
//! ARROWCERT_REQUIRE_PY_ADAPTERS=1, so there the tests cannot skip).

mod support;

use std::path::PathBuf;
use std::process::Command;

use arrowcert::report::Verdict;
use support::*;

/// The interpreter of the test environment, or `None` (the test says
/// SKIPPED with why) when it is not set up here.
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

/// The first ```python block of docs/PYTHON_ADAPTERS.md, as a file.
fn adapter_from_the_docs() -> PathBuf {
    let page = std::fs::read_to_string(workspace_dir().join("docs/PYTHON_ADAPTERS.md")).unwrap();
    let start = page.find("```python\n").expect("a python block") + "```python\n".len();
    let end = start + page[start..].find("```").expect("its end");
    let file = scratch("py-adapters").join("nanoarrow_adapter.py");
    std::fs::write(&file, &page[start..end]).unwrap();
    file
}

fn arrowcert(python: &PathBuf) -> Command {
    let mut c = Command::new(arrowcert_exe());
    c.arg("--python").arg(python);
    c
}

#[test]
fn the_adapter_on_the_docs_page_certifies_nanoarrow_both_ways() {
    let Some(py) = python() else { return };
    let adapter = adapter_from_the_docs();
    let spec = format!("py:{}", adapter.display());
    let report = scratch("py-adapters").join("docs-adapter.json");
    let _ = std::fs::remove_file(&report);
    let ids = [
        "producer/schema/primitive",
        "producer/array/primitive/batch:0",
        "producer/array/primitive/batch:0/slice:13+12",
        "producer/stream/primitive",
        "consumer/array/plain/primitive/batch:0",
        "consumer/stream/plain/primitive",
        "consumer/stream/varied/primitive",
    ];
    let out = arrowcert(&py)
        .args(["certify", "--producer", &spec, "--consumer", &spec])
        .args(["--cases", "0", "--report"])
        .arg(&report)
        .arg("--exact")
        .args(ids)
        .output()
        .expect("arrowcert runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let r = arrowcert::report::read(&report).expect("a report");
    assert!(r.complete);
    assert_eq!(r.cases.len(), ids.len());
    for c in &r.cases {
        assert_eq!(c.verdict, Verdict::Pass, "{c:?}");
    }
    // The names come from the adapter's NAME, on both sides.
    assert!(
        r.plugins
            .iter()
            .filter(|p| p.name.starts_with("nanoarrow ") && p.name.ends_with("(Python)"))
            .count()
            == 2,
        "{:?}",
        r.plugins
    );
}

#[test]
fn an_adapter_that_does_not_import_is_bad_input_in_one_line() {
    let Some(py) = python() else { return };
    let file = scratch("py-adapters").join("broken_adapter.py");
    std::fs::write(&file, "import a_module_that_is_not_installed_anywhere\n").unwrap();
    let out = arrowcert(&py)
        .args(["certify", "--producer"])
        .arg(format!("py:{}", file.display()))
        .output()
        .expect("arrowcert runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("could not set itself up")
            && stderr.contains("a_module_that_is_not_installed_anywhere"),
        "{stderr}"
    );
}

#[test]
fn a_missing_adapter_file_or_interpreter_is_bad_input() {
    let out = Command::new(arrowcert_exe())
        .args(["certify", "--producer", "py:no/such/adapter.py"])
        .output()
        .expect("arrowcert runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("no such adapter file"), "{stderr}");
    let file = scratch("py-adapters").join("any_adapter.py");
    std::fs::write(&file, "def load(data):\n    return data\n").unwrap();
    let out = Command::new(arrowcert_exe())
        .args(["--python", "/no/such/python3", "certify", "--producer"])
        .arg(format!("py:{}", file.display()))
        .output()
        .expect("arrowcert runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("/no/such/python3"), "{stderr}");
}

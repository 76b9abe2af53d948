//! The Python wheel and its pytest plugin (issue 40, items 2 and 3): the
//! wheel is packed from this build (`scripts/wheel/make_wheel.py`; the
//! binary and the reference plugins, stripped), installed with no index
//! into a fresh venv that holds pinned pyarrow, NumPy and pytest from
//! PyPI, and then run from outside the checkout with PATH holding only
//! that venv's `bin` (no cc, no cargo) and the checkout's development
//! fallbacks off:
//! - `arrowcert certify` certifies the reference pair (pass);
//! - `arrowcert certify --producer py:pyarrow --cases 20` reaches verdicts
//!   with pyarrow from the venv, also with nothing at all on PATH (the
//!   launcher points `py:` at the venv's own interpreter);
//! - a pytest file (`fixtures/wheel/test_plugin.py`) through the plugin:
//!   the correct pyarrow adapter and NumPy's DLPack pass, a mutant whose
//!   stream stops one batch early fails naming `array.values.roundtrip`,
//!   with its replay command, and the reports land under pytest's
//!   `--basetemp` and `--arrowcert-dir`.
//!
//! Needs python3 with venv and PyPI: SKIPPED with the reason without them,
//! unless `ARROWCERT_REQUIRE_WHEEL=1` (.ci/run sets it). Prints the
//! wheel's size and the time from `pip install` of the wheel to the first
//! verdict.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

use support::*;

/// pytest's pinned version (pyarrow's and NumPy's: scripts/real/versions.env).
const PYTEST_VERSION: &str = "9.2.0";

fn text(out: &Output) -> String {
    format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// SKIPPED with `why`, or a failure when CI requires the wheel test.
fn skip(why: &str) {
    assert!(
        std::env::var("ARROWCERT_REQUIRE_WHEEL").as_deref() != Ok("1"),
        "ARROWCERT_REQUIRE_WHEEL=1 but {why}"
    );
    eprintln!("SKIPPED: {why}");
}

/// `NAME=value` from scripts/real/versions.env.
fn pinned(name: &str) -> String {
    let env = std::fs::read_to_string(workspace_dir().join("scripts/real/versions.env")).unwrap();
    env.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}=")))
        .unwrap_or_else(|| panic!("{name} is not in versions.env"))
        .to_string()
}

/// The wheel packed from this build into `dir`.
fn pack(dir: &Path) -> PathBuf {
    let (producer, _) = bundled();
    let bin_dir = producer.parent().unwrap();
    let out = Command::new("python3")
        .arg(workspace_dir().join("scripts/wheel/make_wheel.py"))
        .arg("--bin-dir")
        .arg(bin_dir)
        .arg("--out")
        .arg(dir)
        .args(["--plugins", "reference"])
        .output()
        .expect("python3 runs make_wheel.py");
    assert!(out.status.success(), "{}", text(&out));
    let wheels: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "whl"))
        .collect();
    assert_eq!(wheels.len(), 1, "{wheels:?}");
    wheels[0].clone()
}

/// A command with only `HOME`, `PATH` and the no-source-tree switch set,
/// in `cwd`.
fn clean(program: &Path, home: &Path, path: &str, cwd: &Path) -> Command {
    let mut c = Command::new(program);
    c.current_dir(cwd)
        .env_clear()
        .env("HOME", home)
        .env("PATH", path)
        .env("ARROWCERT_NO_SOURCE_TREE", "1");
    c
}

#[test]
fn the_wheel_installs_into_a_fresh_venv_and_certifies_with_its_pytest_plugin() {
    if !Command::new("python3")
        .args(["-c", "import venv, ensurepip"])
        .output()
        .is_ok_and(|o| o.status.success())
    {
        return skip("python3 with venv and ensurepip is not on PATH");
    }
    let dir = scratch("wheel");
    assert!(!dir.starts_with(workspace_dir()));
    let wheel = pack(&dir.join("dist"));
    let size = std::fs::metadata(&wheel).unwrap().len();

    // The venv, and the libraries a library author's CI would have.
    let venv = dir.join("venv");
    let made = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", text(&made));
    let python = venv.join("bin/python");
    let deps = Command::new(&python)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--only-binary",
            ":all:",
        ])
        .arg(format!("pyarrow=={}", pinned("PYARROW_VERSION")))
        .arg(format!("numpy=={}", pinned("NUMPY_VERSION")))
        .arg(format!("pytest=={PYTEST_VERSION}"))
        .output()
        .unwrap();
    if !deps.status.success() {
        return skip(&format!(
            "pyarrow, numpy and pytest could not be installed from PyPI: {}",
            String::from_utf8_lossy(&deps.stderr)
                .lines()
                .last()
                .unwrap_or("")
        ));
    }

    let bin = venv.join("bin");
    let path = bin.display().to_string();
    for tool in ["cc", "gcc", "clang", "cargo", "rustc"] {
        assert!(!bin.join(tool).exists(), "{tool} is in the venv's bin");
    }
    let home = dir.join("home");
    let work = dir.join("work");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&work).unwrap();

    // The wheel alone, from no index: it needs nothing else.
    let started = Instant::now();
    let install = clean(&python, &home, &path, &work)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-index",
            "--no-deps",
            "--disable-pip-version-check",
        ])
        .arg(&wheel)
        .output()
        .unwrap();
    assert!(install.status.success(), "{}", text(&install));
    let arrowcert = bin.join("arrowcert");
    let reference = clean(&arrowcert, &home, &path, &work)
        .args(["certify", "--cases", "5", "--seed", "1"])
        .output()
        .unwrap();
    let first_verdict = started.elapsed();
    assert_eq!(reference.status.code(), Some(0), "{}", text(&reference));
    assert!(
        String::from_utf8_lossy(&reference.stdout).contains("certify result: ok"),
        "{}",
        text(&reference)
    );
    eprintln!(
        "wheel: {} ({:.1} MB); pip install of the wheel to the first verdict: {:.1} s",
        wheel.file_name().unwrap().to_string_lossy(),
        size as f64 / 1e6,
        first_verdict.as_secs_f64()
    );

    bundled_adapter(&arrowcert, &home, &path, &work, &dir);
    // No python3 on PATH at all: the launcher's interpreter is the venv's.
    let empty = dir.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    bundled_adapter(&arrowcert, &home, &empty.display().to_string(), &work, &dir);

    pytest_plugin(&python, &home, &path, &work, &dir);
    // Kept on failure to look at; a passing run's venv is large.
    let _ = std::fs::remove_dir_all(&dir);
}

/// `py:pyarrow --cases 20`: verdicts on pyarrow from the venv, from the
/// adapter the wheel's binary carries.
fn bundled_adapter(arrowcert: &Path, home: &Path, path: &str, work: &Path, dir: &Path) {
    let report = dir.join("pyarrow.json");
    let out = clean(arrowcert, home, path, work)
        .args(["certify", "--producer", "py:pyarrow", "--cases", "20"])
        .args(["--seed", "1", "--report"])
        .arg(&report)
        .output()
        .unwrap();
    // pyarrow breaks rules (reports/FINDINGS.md): verdicts, pass or fail,
    // with no error of the run's own.
    assert!(matches!(out.status.code(), Some(0 | 1)), "{}", text(&out));
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    let s = &r["summary"];
    assert!(s["passed"].as_u64().unwrap() > 0, "{s}");
    for k in ["errors", "crashed", "harness_errors"] {
        assert_eq!(s[k], 0, "{k}: {s}");
    }
    let name = r["plugins"][0]["name"].as_str().unwrap();
    assert!(name.starts_with("pyarrow 26"), "{name}");
    let plugin_path = r["plugins"][0]["path"].as_str().unwrap();
    assert!(
        plugin_path.starts_with(&home.join(".cache/arrowcert").display().to_string()),
        "{plugin_path}"
    );
}

/// The fixture test file through the plugin: which tests pass and fail,
/// and what the failing one says.
fn pytest_plugin(python: &Path, home: &Path, path: &str, work: &Path, dir: &Path) {
    let test = work.join("test_plugin.py");
    std::fs::copy(
        harness_dir().join("tests/fixtures/wheel/test_plugin.py"),
        &test,
    )
    .unwrap();
    let basetemp = dir.join("basetemp");
    let junit = dir.join("pytest.xml");
    let out = clean(python, home, path, work)
        .args(["-m", "pytest", "-p", "no:cacheprovider", "-rA"])
        .arg(format!("--basetemp={}", basetemp.display()))
        .arg(format!("--junitxml={}", junit.display()))
        .arg(&test)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    for passing in [
        "test_pyarrow_producer_and_consumer",
        "test_metadata_dropped_is_reported",
        "test_bundled_adapter_by_name",
        "test_a_lambda_is_refused_with_the_reason",
        "test_dlpack",
        "test_reports_are_written_for_pytest",
    ] {
        assert!(
            stdout.contains(&format!("PASSED test_plugin.py::{passing}")),
            "{passing}:\n{}",
            text(&out)
        );
    }
    assert!(
        stdout.contains("FAILED test_plugin.py::test_one_batch_short"),
        "{}",
        text(&out)
    );
    // The failure: the rule, its evidence, the first case, the replay.
    let failure = stdout
        .split("test_one_batch_short ___")
        .nth(1)
        .unwrap_or_else(|| panic!("no failure section:\n{stdout}"));
    for needle in [
        "arrowcert: fail (exit 1)",
        "MUST array.values.roundtrip: stream: ",
        "first case: producer/stream/",
        "replay: arrowcert replay --producer py:",
    ] {
        assert!(failure.contains(needle), "{needle}:\n{failure}");
    }
    // Its report and JUnit under pytest's own folder, named in pytest's
    // JUnit.
    let report = basetemp.join("test_one_batch_short0/arrowcert/arrowcert-1.json");
    assert!(report.is_file(), "{}", report.display());
    assert!(report.with_extension("junit.xml").is_file());
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(
        xml.contains(&format!(
            "name=\"arrowcert_report\" value=\"{}\"",
            report.display()
        )),
        "{xml}"
    );

    // --arrowcert-dir: one folder per test there.
    let chosen = dir.join("reports");
    let out = clean(python, home, path, work)
        .args(["-m", "pytest", "-p", "no:cacheprovider", "-q"])
        .arg(format!("--basetemp={}", basetemp.display()))
        .arg(format!("--arrowcert-dir={}", chosen.display()))
        .args(["-k", "reports_are_written"])
        .arg(&test)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let folder = chosen.join("test_plugin.py_test_reports_are_written_for_pytest");
    assert!(folder.join("arrowcert-1.json").is_file(), "{}", text(&out));
}

/// The Python package's own unit tests (python/tests/, standard unittest:
/// no wheel, no pytest, no network).
#[test]
fn the_python_package_unit_tests_pass() {
    if Command::new("python3").arg("-V").output().is_err() {
        return skip("python3 is not on PATH");
    }
    let out = Command::new("python3")
        .args(["-B", "-m", "unittest", "discover", "-s", "python/tests"])
        .current_dir(workspace_dir())
        .env_remove("ARROWCERT_PYTHON")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("\nOK"), "{err}");
}

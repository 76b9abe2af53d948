//! Relocatable (issue 40, item 1): the `arrowcert` binary, copied with the
//! reference plugins into an empty folder outside the checkout
//! (`bin/arrowcert`, `lib/arrowcert/*.so`), certifies the reference pair
//! and a bundled `py:` adapter with no C compiler on PATH, from a working
//! directory outside the checkout, with the source tree's development
//! fallbacks off (`ARROWCERT_NO_SOURCE_TREE=1`) and, where strace can
//! trace, without touching one file of the checkout (the Python
//! environment's own files aside).

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use support::*;

/// An install in a fresh scratch folder: `bin/arrowcert`, with the
/// reference plugins in `lib/arrowcert/` when `plugins`, and an empty
/// `home/`.
fn install(name: &str, plugins: bool) -> PathBuf {
    let dir = scratch(name);
    assert!(
        !dir.starts_with(workspace_dir()),
        "{} must be outside the checkout",
        dir.display()
    );
    std::fs::create_dir_all(dir.join("bin")).unwrap();
    std::fs::create_dir_all(dir.join("home")).unwrap();
    std::fs::copy(arrowcert_exe(), dir.join("bin/arrowcert")).unwrap();
    if plugins {
        let (producer, consumer) = bundled();
        let lib = dir.join("lib/arrowcert");
        std::fs::create_dir_all(&lib).unwrap();
        for p in [producer, consumer] {
            std::fs::copy(p, lib.join(p.file_name().unwrap())).unwrap();
        }
    }
    dir
}

/// Runs the installed binary in `dir` with only HOME, PATH and
/// ARROWCERT_NO_SOURCE_TREE=1 set; under `strace -f` writing `trace` when
/// given.
fn run(dir: &Path, path: &str, args: &[&str], trace: Option<&Path>) -> Output {
    let exe = dir.join("bin/arrowcert");
    let mut cmd = match trace {
        Some(t) => {
            let mut c = Command::new("/usr/bin/strace");
            c.args(["-f", "-qq", "-e", "trace=%file,execve", "-o"])
                .arg(t)
                .arg(&exe);
            c
        }
        None => Command::new(&exe),
    };
    cmd.args(args)
        .current_dir(dir)
        .env_clear()
        .env("HOME", dir.join("home"))
        .env("PATH", path)
        .env("ARROWCERT_NO_SOURCE_TREE", "1");
    output_retrying(&mut cmd).expect("the installed arrowcert runs")
}

/// No C compiler in any directory of `path`.
fn assert_no_compiler(path: &str) {
    for d in std::env::split_paths(path) {
        for cc in ["cc", "gcc", "clang", "c99", "tcc"] {
            assert!(!d.join(cc).exists(), "{} is on PATH", d.join(cc).display());
        }
    }
}

fn text(out: &Output) -> String {
    format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn the_installed_binary_certifies_the_reference_pair_with_nothing_on_path() {
    let dir = install("relocatable-reference", true);
    let empty = dir.join("empty-path");
    std::fs::create_dir_all(&empty).unwrap();
    let out = run(
        &dir,
        &empty.display().to_string(),
        &[
            "certify",
            "--producer",
            "reference",
            "--consumer",
            "reference",
            "--cases",
            "5",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("certify result: ok"),
        "{}",
        text(&out)
    );
}

#[test]
fn a_missing_plugin_says_where_it_was_looked_for() {
    let dir = install("relocatable-no-plugins", false);
    let out = run(
        &dir,
        "/nonexistent",
        &["certify", "--producer", "reference", "--cases", "1"],
        None,
    );
    assert_bad_input(&out, "lib/arrowcert/libarrowcert_producer_reference.so");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            &dir.join("bin/libarrowcert_producer_reference.so")
                .display()
                .to_string()
        ),
        "{err}"
    );
}

/// The project-local Python environment with the real libraries
/// (`just real`), or `None` (SKIPPED with why).
fn real_venv() -> Option<PathBuf> {
    let venv = workspace_dir().join("target/real/venv");
    if venv.join("bin/python").exists() {
        return Some(venv);
    }
    eprintln!(
        "SKIPPED: {} is missing (`just real` installs pyarrow there)",
        venv.display()
    );
    None
}

/// Whether strace can trace here (installed, and ptrace allowed).
fn strace_works() -> bool {
    Command::new("/usr/bin/strace")
        .args(["-f", "-qq", "-o", "/dev/null", "/bin/true"])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The files of a checkout that `trace` touched: any path under the
/// checkout (or under the one that holds the Python environment, when it
/// is another's `target/`) other than the environment's own files and the
/// directories on the way to them.
fn checkout_paths_in(trace: &str, venv: &Path) -> Vec<String> {
    let real_venv = std::fs::canonicalize(venv).unwrap();
    let mut roots = vec![
        workspace_dir(),
        std::fs::canonicalize(workspace_dir()).unwrap(),
    ];
    if let Some((checkout, _)) = real_venv.to_string_lossy().split_once("/target/") {
        roots.push(PathBuf::from(checkout));
    }
    let allowed = |p: &Path| {
        [venv, real_venv.as_path()]
            .iter()
            .any(|v| p.starts_with(v) || v.starts_with(p))
    };
    let mut found = Vec::new();
    for line in trace.lines() {
        for quoted in line.split('"').skip(1).step_by(2) {
            let p = Path::new(quoted);
            if p.is_absolute() && roots.iter().any(|r| p.starts_with(r)) && !allowed(p) {
                found.push(line.to_string());
            }
        }
    }
    found
}

#[test]
fn the_installed_binary_certifies_a_bundled_py_adapter_without_a_compiler() {
    let Some(venv) = real_venv() else { return };
    let python = venv.join("bin/python");
    let dir = install("relocatable-py", false);
    // PATH: the environment's bin only (python3, pip; no compiler).
    let path = venv.join("bin").display().to_string();
    assert_no_compiler(&path);
    let trace = dir.join("trace.txt");
    let traced = strace_works();
    if !traced {
        eprintln!("SKIPPED (the file trace only): strace cannot trace here");
    }
    let report = dir.join("py.json");
    let out = run(
        &dir,
        &path,
        &[
            "certify",
            "--producer",
            "py:pyarrow",
            "--cases",
            "5",
            "--python",
            &python.display().to_string(),
            "--report",
            &report.display().to_string(),
        ],
        traced.then_some(trace.as_path()),
    );
    // pyarrow breaks rules (reports/FINDINGS.md): the run must reach
    // verdicts, passing or failing, with no error of its own.
    assert!(matches!(out.status.code(), Some(0 | 1)), "{}", text(&out));
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    let s = &r["summary"];
    assert!(s["passed"].as_u64().unwrap() > 0, "{s}");
    for k in ["errors", "crashed", "harness_errors"] {
        assert_eq!(s[k], 0, "{k}: {s}");
    }
    let name = r["plugins"][0]["name"].as_str().unwrap();
    assert!(name.starts_with("pyarrow"), "{name}");
    // The bridge and the adapter came from this install's cache, under HOME.
    let plugin_path = r["plugins"][0]["path"].as_str().unwrap();
    assert!(
        plugin_path.starts_with(&dir.join("home/.cache/arrowcert").display().to_string()),
        "{plugin_path}"
    );
    if traced {
        assert_checkout_untouched(&trace, &venv);
    }
}

/// The trace shows programs run and files touched, none of them the
/// checkout's, and no compiler or shell run.
fn assert_checkout_untouched(trace: &Path, venv: &Path) {
    let text = std::fs::read_to_string(trace).unwrap();
    assert!(text.contains("execve("), "the trace is empty");
    let touched = checkout_paths_in(&text, venv);
    assert!(
        touched.is_empty(),
        "the installed binary touched the checkout:\n{}",
        touched[..touched.len().min(20)].join("\n")
    );
    for cc in ["/cc\"", "/gcc\"", "/bash\"", "/sh\""] {
        assert!(
            !text
                .lines()
                .any(|l| l.contains("execve(") && l.contains(cc)),
            "ran {cc}"
        );
    }
}

#[test]
fn the_installed_binary_certifies_an_adbc_driver_without_a_compiler() {
    let Some(venv) = real_venv() else { return };
    let python = venv.join("bin/python");
    if !venv.join("lib").exists()
        || std::fs::read_dir(venv.join("lib"))
            .unwrap()
            .flatten()
            .all(|d| !d.path().join("site-packages/adbc_driver_sqlite").exists())
    {
        eprintln!(
            "SKIPPED: adbc_driver_sqlite is not installed in {}",
            venv.display()
        );
        return;
    }
    let dir = install("relocatable-adbc", false);
    let path = venv.join("bin").display().to_string();
    assert_no_compiler(&path);
    let trace = dir.join("trace.txt");
    let traced = strace_works();
    let report = dir.join("adbc.json");
    let out = run(
        &dir,
        &path,
        &[
            "certify",
            "--producer",
            "sqlite-adbc",
            "--consumer",
            "sqlite-adbc",
            "--cases",
            "2",
            "--python",
            &python.display().to_string(),
            "--report",
            &report.display().to_string(),
        ],
        traced.then_some(trace.as_path()),
    );
    // SQLite holds few Arrow types (docs/ADBC.md): verdicts. An error may
    // only be a call of the driver failing on some generated data (the seed is
    // drawn anew each run: sqlite-adbc hands some binary values back as
    // text that is not UTF-8, FINDINGS), never the installed binary failing
    // to run it.
    assert!(matches!(out.status.code(), Some(0 | 1)), "{}", text(&out));
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    let s = &r["summary"];
    assert!(s["passed"].as_u64().unwrap() > 0, "{s}");
    for k in ["crashed", "harness_errors"] {
        assert_eq!(s[k], 0, "{k}: {s}");
    }
    for c in r["cases"].as_array().unwrap() {
        if c["verdict"] == "error" {
            let m = c["message"].as_str().unwrap_or("");
            // What one of the driver's calls returned, named.
            assert!(m.contains("arrowcert_"), "{}: {m}", c["id"]);
        }
    }
    if traced {
        assert_checkout_untouched(&trace, &venv);
    }
}

#[test]
fn python_defaults_to_python3_on_path() {
    let Some(venv) = real_venv() else { return };
    let dir = install("relocatable-py-default", false);
    let path = venv.join("bin").display().to_string();
    let out = run(
        &dir,
        &path,
        &["certify", "--consumer", "py:pyarrow", "--cases", "2"],
        None,
    );
    assert!(matches!(out.status.code(), Some(0 | 1)), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("certify result:"),
        "{}",
        text(&out)
    );
}

#[test]
fn the_trace_check_finds_a_read_of_the_checkout() {
    let venv = workspace_dir().join("target/real/venv");
    if !venv.exists() {
        eprintln!("SKIPPED: {} is missing", venv.display());
        return;
    }
    let ws = workspace_dir().display().to_string();
    let v = venv.display().to_string();
    let trace = format!(
        "1 openat(AT_FDCWD, \"{v}/lib/x.py\", O_RDONLY) = 3\n\
         1 newfstatat(AT_FDCWD, \"{ws}\", {{}}, 0) = 0\n\
         1 openat(AT_FDCWD, \"/tmp/x\", O_RDONLY) = 3\n"
    );
    assert!(checkout_paths_in(&trace, &venv).is_empty());
    let bad = format!("{trace}1 openat(AT_FDCWD, \"{ws}/adapters/pyarrow.py\", O_RDONLY) = 3\n");
    assert_eq!(checkout_paths_in(&bad, &venv).len(), 1);
}

#[test]
fn no_place_for_the_carried_files_is_bad_input_in_one_line() {
    let dir = install("relocatable-no-home", false);
    let out = output_retrying(
        Command::new(dir.join("bin/arrowcert"))
            .args(["certify", "--producer", "py:pyarrow", "--cases", "1"])
            .current_dir(&dir)
            .env_clear()
            .env("PATH", "/nonexistent"),
    )
    .unwrap();
    assert_bad_input(&out, "no cache directory for arrowcert's bundled files");
}

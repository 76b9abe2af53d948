//! Shared by the integration tests: building C fixture plugins, finding the
//! bundled plugins, running the `arrowcert` binary.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

pub mod isolation;
pub mod mutants;
pub mod schema;

/// `ARROWCERT_BENCH_SMOKE` set: benchmarks run one short round (CI checks
/// that they build and run; no figure means anything then).
pub fn bench_smoke() -> bool {
    std::env::var_os("ARROWCERT_BENCH_SMOKE").is_some()
}

pub fn harness_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn workspace_dir() -> PathBuf {
    harness_dir().parent().unwrap().to_path_buf()
}

/// Arrow's gold files, beside the checkout (`../shared/gold/cpp-21.0.0`).
pub fn gold_dir() -> PathBuf {
    workspace_dir().join("../shared/gold/cpp-21.0.0")
}

pub fn arrowcert_exe() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_arrowcert"))
}

/// A scratch directory unique to this test process and `name`.
pub fn scratch(name: &str) -> PathBuf {
    static SWEEP: std::sync::Once = std::sync::Once::new();
    SWEEP.call_once(sweep_stale_scratch);
    let d = std::env::temp_dir().join(format!("arrowcert-test-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Removes the scratch directories of test processes that have ended: a
/// test binary leaves its own behind (to be looked at after a failure)
/// until the next one starts, so they never pile up (they had reached
/// 13 GB in /tmp). A directory whose process is alive (another run at the
/// same time) is left alone.
fn sweep_stale_scratch() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(rest) = name
            .to_str()
            .and_then(|n| n.strip_prefix("arrowcert-test-"))
        else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// Writes the Python adapter `name` (`source`) into the scratch directory
/// `dir`; its `py:` argument.
#[allow(dead_code)]
pub fn py_adapter(dir: &str, name: &str, source: &str) -> String {
    let path = scratch(dir).join(name);
    std::fs::write(&path, source).unwrap();
    format!("py:{}", path.display())
}

/// Compiles C `source` into a shared library `lib<name>.so`.
pub fn cc_plugin(name: &str, source: &str) -> PathBuf {
    let dir = scratch("cplugins");
    let src = dir.join(format!("{name}.c"));
    let lib = dir.join(format!("lib{name}.so"));
    let tmp = unique_sibling(&src);
    std::fs::write(&tmp, source).unwrap();
    std::fs::rename(&tmp, &src).unwrap();
    cc(&["-shared", "-fPIC"], &src, &lib);
    lib
}

/// A fresh name beside `path`, for writing a file that then replaces
/// `path` in one rename: tests run in parallel and several of them build
/// the same fixture, so writing in place let one test load a library
/// another was still writing ("not a shared library (no ELF header)").
fn unique_sibling(path: &Path) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut name = path.file_name().unwrap().to_os_string();
    name.push(format!(".{n}.tmp"));
    path.with_file_name(name)
}

/// Compiles with the harness's include directory on the path.
pub fn cc(flags: &[&str], src: &Path, out: &Path) {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let tmp = unique_sibling(out);
    let status = Command::new(cc)
        .args(flags)
        .arg("-I")
        .arg(harness_dir().join("include"))
        .arg("-o")
        .arg(&tmp)
        .arg(src)
        .status()
        .expect("the C compiler runs");
    assert!(status.success(), "compiling {}", src.display());
    std::fs::rename(&tmp, out).unwrap();
}

/// The bundled reference plugins, built once per test process with the
/// same profile and target directory as this test's `arrowcert` binary.
pub fn bundled() -> &'static (PathBuf, PathBuf) {
    static BUILT: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    BUILT.get_or_init(|| {
        let exe = arrowcert_exe();
        let profile_dir = exe.parent().unwrap().to_path_buf();
        let target_dir = profile_dir.parent().unwrap().to_path_buf();
        let release = profile_dir.file_name().is_some_and(|n| n == "release");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.current_dir(workspace_dir())
            .args([
                "build",
                "-q",
                "-p",
                "arrowcert-producer-reference",
                "-p",
                "arrowcert-consumer-reference",
            ])
            .env("CARGO_TARGET_DIR", &target_dir);
        if release {
            cmd.arg("--release");
        }
        let status = cmd.status().expect("cargo runs");
        assert!(status.success(), "building the bundled plugins");
        (
            profile_dir.join("libarrowcert_producer_reference.so"),
            profile_dir.join("libarrowcert_consumer_reference.so"),
        )
    })
}

pub fn run_arrowcert(args: &[&str]) -> Output {
    Command::new(arrowcert_exe())
        .args(args)
        .output()
        .expect("arrowcert runs")
}

/// Asserts the bad-input convention: exit code 2, one line on stderr that
/// contains `needle`, no panic, nothing on stdout.
pub fn assert_bad_input(out: &Output, needle: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "exit code; stderr: {stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "one line: {stderr:?}");
    assert!(stderr.contains(needle), "{needle:?} not in {stderr:?}");
    assert!(
        !stderr.contains("panicked") && !stderr.contains("internal error"),
        "{stderr}"
    );
    assert!(
        out.stdout.is_empty(),
        "stdout: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// C source of a plugin with the given identity functions.
pub fn identity_source(abi_version: &str, name_expr: &str) -> String {
    format!(
        "#include <stdint.h>\n#include <stddef.h>\n\
         int32_t arrowcert_plugin_abi_version(void) {{ return {abi_version}; }}\n\
         const char* arrowcert_plugin_name(void) {{ return {name_expr}; }}\n"
    )
}

/// The consumer mutants (`consumers/mutants/mutant_consumer.c`), built
/// once per test binary; `ARROWCERT_MUTANT` picks the mutation and
/// `ARROWCERT_MUTANT_BASE` the consumer it wraps.
pub fn mutant_consumer() -> &'static PathBuf {
    static LIB: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    LIB.get_or_init(|| {
        let src = workspace_dir().join("consumers/mutants/mutant_consumer.c");
        let lib = scratch("support-consumer-mutants").join("libarrowcert_mutant_consumer.so");
        cc(&["-shared", "-fPIC", "-pthread", "-ldl"], &src, &lib);
        lib
    })
}

/// `cmd.output()`, retried while exec fails with ETXTBSY ("Text file
/// busy"): a binary a test just copied can be briefly held open for writing
/// by a child another test thread forked in that moment (the descriptor
/// closes at the child's exec), which a test that copies and runs binaries
/// in parallel with others meets now and then.
pub fn output_retrying(cmd: &mut std::process::Command) -> std::io::Result<std::process::Output> {
    let mut tries = 0;
    loop {
        match cmd.output() {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy && tries < 100 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            r => return r,
        }
    }
}

//! Running mutant plugins (producer or consumer) through `arrowcert certify`.

use std::path::Path;
use std::process::Command;

use arrowcert::report::{Report, Verdict};

/// Certifies `lib` as `role` (`producer` or `consumer`) with mutation
/// `mutant` over `base`, on the built-in cases `filters` select, in one
/// worker process or in-process. Returns the exit code, the report and
/// stdout.
pub fn certify_mutant(
    role: &str,
    lib: &Path,
    base: &Path,
    mutant: &str,
    filters: &[&str],
    workers: bool,
) -> (Option<i32>, Report, String) {
    certify_mutant_with(role, lib, base, mutant, filters, workers, &[])
}

/// [`certify_mutant`] with more environment variables for the mutant
/// (`ARROWCERT_MUTANT_CACHE_PERIOD`, ...).
pub fn certify_mutant_with(
    role: &str,
    lib: &Path,
    base: &Path,
    mutant: &str,
    filters: &[&str],
    workers: bool,
    env: &[(&str, &str)],
) -> (Option<i32>, Report, String) {
    let mode = if workers { "workers" } else { "in-process" };
    let tag: String = env.iter().map(|(_, v)| format!("-{v}")).collect();
    let report = super::scratch(&format!("{role}-mutant-reports"))
        .join(format!("{mutant}{tag}-{mode}.json"));
    let out = Command::new(super::arrowcert_exe())
        .args(["certify", &format!("--{role}")])
        .arg(lib)
        .args(if workers {
            &["--jobs", "1"][..]
        } else {
            &["--in-process"][..]
        })
        .args(["--cases", "0", "--report"])
        .arg(&report)
        .args(filters)
        .env("ARROWCERT_MUTANT", mutant)
        .env("ARROWCERT_MUTANT_BASE", base)
        .envs(env.iter().copied())
        .output()
        .expect("arrowcert runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let r = arrowcert::report::read(&report).unwrap_or_else(|e| {
        panic!(
            "{mutant}: {e}\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code(), r, stdout)
}

/// Compiles the mutant wrapper `src` (relative to the workspace) into
/// `lib<name>.so` in the scratch directory `dir`.
pub fn build(dir: &str, src: &str, name: &str) -> std::path::PathBuf {
    let lib = super::scratch(dir).join(format!("lib{name}.so"));
    super::cc(
        &["-shared", "-fPIC", "-pthread", "-ldl"],
        &super::workspace_dir().join(src),
        &lib,
    );
    lib
}

/// The rules a report says failed.
pub fn failing(r: &Report) -> Vec<String> {
    r.rules
        .iter()
        .filter(|s| s.verdict == Verdict::Fail)
        .map(|s| s.rule.clone())
        .collect()
}

/// The mutation names a C source defines (`X(ENUM, "name")`), relative to
/// the workspace.
pub fn mutations_in(source: &str) -> Vec<String> {
    let src = std::fs::read_to_string(super::workspace_dir().join(source)).unwrap();
    src.lines()
        .filter_map(|l| l.trim().strip_prefix("X("))
        .filter_map(|l| l.split('"').nth(1))
        .map(str::to_string)
        .collect()
}

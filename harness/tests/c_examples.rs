//! The C plugin examples over nanoarrow (docs/PLUGIN_ABI.md, "A C plugin
//! over nanoarrow"): `scripts/examples/build-nanoarrow-examples.sh` builds
//! `docs/examples/nanoarrow_producer.c` and `nanoarrow_consumer.c`, and each
//! certifies clean against Arrow's gold files.
//!
//! The script needs nanoarrow's pinned source distribution (from
//! `NANOARROW_SDIST`, `target/real/`, its cache under `target/examples/`, or
//! PyPI). Without it the tests say SKIPPED with why, unless
//! ARROWCERT_REQUIRE_NANOARROW_EXAMPLES=1, when they fail.

mod support;

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use arrowcert::report::Verdict;
use support::*;

/// The script's exit code when the sdist cannot be had (no network).
const NO_SDIST: i32 = 75;

/// The two plugins (producer, consumer), built once per test process into a
/// scratch folder under the target directory, or `None` (the test says
/// SKIPPED with why) when nanoarrow's sources cannot be fetched here.
fn examples() -> Option<&'static (PathBuf, PathBuf)> {
    static BUILT: OnceLock<Result<(PathBuf, PathBuf), String>> = OnceLock::new();
    let built = BUILT.get_or_init(|| {
        let target = arrowcert_exe()
            .parent()
            .and_then(|p| p.parent())
            .expect("the target directory")
            .to_path_buf();
        // One folder per test process (two `cargo test` runs may overlap);
        // those of processes that have ended are removed first, so the
        // target directory does not collect one per run.
        if let Ok(entries) = std::fs::read_dir(&target) {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                let ended = name
                    .strip_prefix("c-examples-test-")
                    .and_then(|pid| pid.parse::<u32>().ok())
                    .is_some_and(|pid| !std::path::Path::new(&format!("/proc/{pid}")).exists());
                if ended {
                    let _ = std::fs::remove_dir_all(e.path());
                }
            }
        }
        let out = target.join(format!("c-examples-test-{}", std::process::id()));
        let run = Command::new("bash")
            .arg(workspace_dir().join("scripts/examples/build-nanoarrow-examples.sh"))
            .arg(&out)
            .output()
            .expect("bash runs");
        let stderr = String::from_utf8_lossy(&run.stderr);
        match run.status.code() {
            Some(0) => Ok((
                out.join("libnanoarrow_producer_example.so"),
                out.join("libnanoarrow_consumer_example.so"),
            )),
            // The script's own last line says why.
            Some(NO_SDIST) => Err(stderr.trim().lines().last().unwrap_or("").to_string()),
            _ => panic!(
                "building the examples failed ({}):\n{}\n{stderr}",
                run.status,
                String::from_utf8_lossy(&run.stdout)
            ),
        }
    });
    match built {
        Ok(libs) => Some(libs),
        Err(why) => {
            assert!(
                std::env::var("ARROWCERT_REQUIRE_NANOARROW_EXAMPLES").as_deref() != Ok("1"),
                "ARROWCERT_REQUIRE_NANOARROW_EXAMPLES=1 but {why}"
            );
            eprintln!("SKIPPED: {why}");
            None
        }
    }
}

/// Certifies `lib` as `role` (`--producer` or `--consumer`) and checks the
/// run is clean: exit 0, no failed, erroring, crashed or timed-out case,
/// at least `min_passed` passes with some on each of `paths`, and every
/// limitation a clean decline of the example's own (ENOSYS with its
/// message).
fn certifies_clean(role: &str, lib: &PathBuf, min_passed: u64, paths: &[&str]) {
    let report = lib.with_extension(format!("{}.json", role.trim_start_matches('-')));
    let _ = std::fs::remove_file(&report);
    let out = Command::new(arrowcert_exe())
        .args(["certify", role])
        .arg(lib)
        .arg("--gold")
        .arg(gold_dir())
        .args(["--cases", "20", "--seed", "25", "--report"])
        .arg(&report)
        .output()
        .expect("arrowcert runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let r = arrowcert::report::read(&report).expect("a report");
    assert!(r.complete, "{:?}", r.summary);
    let s = &r.summary;
    let not_clean: Vec<_> = r
        .cases
        .iter()
        .filter(|c| {
            !matches!(
                c.verdict,
                Verdict::Pass | Verdict::Skip | Verdict::Limitation
            )
        })
        .map(|c| {
            format!(
                "{} {:?}: {:?} {:?}",
                c.id, c.verdict, c.message, c.violations
            )
        })
        .collect();
    assert!(not_clean.is_empty(), "{not_clean:#?}");
    assert!(
        s.failed == 0
            && s.errors == 0
            && s.crashed == 0
            && s.timed_out == 0
            && s.harness_errors == 0,
        "{s:?}"
    );
    assert!(
        s.passed >= min_passed,
        "only {} cases passed: {s:?}",
        s.passed
    );
    for path in paths {
        assert!(
            r.cases
                .iter()
                .any(|c| c.path == *path && c.verdict == Verdict::Pass),
            "no case of the {path} path passed: {s:?}"
        );
    }
    for c in r.cases.iter().filter(|c| c.verdict == Verdict::Limitation) {
        let m = c.message.as_deref().unwrap_or("");
        assert!(
            m.contains("ENOSYS") && m.contains("nanoarrow"),
            "{}: not a clean decline: {m}",
            c.id
        );
    }
    eprintln!(
        "{role}: {} passed, {} skipped, {} limitations of {}",
        s.passed, s.skipped, s.limitations, s.total
    );
}

#[test]
fn the_nanoarrow_producer_example_certifies_clean() {
    let Some((producer, _)) = examples() else {
        return;
    };
    // Every path it exports: the stream variants of schema, array, stream,
    // device array and device stream (CPU).
    let paths = ["schema", "array", "stream", "device_array", "device_stream"];
    certifies_clean("--producer", producer, 400, &paths);
}

#[test]
fn the_nanoarrow_consumer_example_certifies_clean() {
    let Some((_, consumer)) = examples() else {
        return;
    };
    certifies_clean(
        "--consumer",
        consumer,
        300,
        &["consume_array", "consume_stream"],
    );
}

//! `arrowcert replay --under valgrind` (issue 39 item 4): a case's worker
//! run under memcheck, and the first invalid access printed with its stack.
//! The fixture is a correct producer (the reference behind
//! tests/fixtures/cache_producer.c) that, asked to, reads one byte past a
//! block it allocated: an access that never crashes, which only a checker
//! sees.

mod support;

use std::path::PathBuf;
use std::process::Command;

use support::*;

fn overreading_producer() -> PathBuf {
    let src = harness_dir().join("tests/fixtures/cache_producer.c");
    let lib = scratch("under").join("libcache_producer.so");
    cc(&["-shared", "-fPIC", "-ldl"], &src, &lib);
    lib
}

fn valgrind() -> bool {
    Command::new("valgrind")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn replay(lib: &std::path::Path, overread: bool) -> (Option<i32>, String) {
    let (reference, _) = bundled();
    let out = Command::new(arrowcert_exe())
        .args(["replay", "--under", "valgrind", "--producer"])
        .arg(lib)
        .arg("producer/schema/primitive")
        .env("ARROWCERT_FIXTURE_BASE", reference)
        .env(
            "ARROWCERT_FIXTURE_OVERREAD",
            if overread { "1" } else { "0" },
        )
        .output()
        .unwrap();
    (
        out.status.code(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[test]
fn replay_under_valgrind_prints_the_first_invalid_access() {
    if !valgrind() {
        eprintln!("SKIPPED: valgrind is not installed (Debian: apt-get install valgrind)");
        return;
    }
    let lib = overreading_producer();
    let (code, out) = replay(&lib, true);
    // The over-read breaks no rule: the case passes, and memcheck says
    // where the access was.
    assert_eq!(code, Some(0), "{out}");
    let at = out
        .find("valgrind: the first error it reported:")
        .unwrap_or_else(|| panic!("{out}"));
    let report = &out[at..];
    assert!(report.contains("Invalid read of size 1"), "{report}");
    assert!(report.contains("overread"), "{report}");
    assert!(
        !report.contains("==") || !report.contains("== "),
        "{report}"
    );

    let (code, out) = replay(&lib, false);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("valgrind: no invalid access reported"),
        "{out}"
    );
}

#[test]
fn an_unknown_checker_is_one_clear_line() {
    let out = Command::new(arrowcert_exe())
        .args(["replay", "--under", "asan", "producer/schema/primitive"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown checker"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

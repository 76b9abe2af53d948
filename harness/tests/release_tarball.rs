//! The release tarball (issue 40, items 4-5: scripts/release/tarball.sh),
//! made with a dev-profile build and unpacked into an empty folder outside
//! the checkout, certifies the reference pair, and its C plugin examples
//! build against its own `include/` and certify: the minimal plugin
//! always (inspect), the nanoarrow producer example when nanoarrow's
//! pinned sources can be had (else SKIPPED with why, as tests/c_examples.rs).

#[path = "support/release.rs"]
mod release;
mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use support::*;

/// Runs the unpacked `bin/arrowcert` in `dir` with only HOME, an empty
/// PATH and ARROWCERT_NO_SOURCE_TREE=1: nothing from the checkout.
fn run(dir: &Path, args: &[&str]) -> Output {
    let empty = dir.join("empty-path");
    std::fs::create_dir_all(&empty).unwrap();
    std::fs::create_dir_all(dir.join("home")).unwrap();
    Command::new(dir.join("bin/arrowcert"))
        .args(args)
        .current_dir(dir)
        .env_clear()
        .env("HOME", dir.join("home"))
        .env("PATH", &empty)
        .env("ARROWCERT_NO_SOURCE_TREE", "1")
        .output()
        .expect("the unpacked arrowcert runs")
}

fn text(out: &Output) -> String {
    format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn unpacked(name: &str) -> PathBuf {
    release::unpack(release::tarball(), &scratch(name).join("unpacked"))
}

#[test]
fn the_tarball_holds_the_binary_plugins_headers_docs_and_examples() {
    let tarball = release::tarball();
    let name = format!("arrowcert-{}-x86_64-linux-gnu", env!("CARGO_PKG_VERSION"));
    assert_eq!(
        tarball.file_name().unwrap().to_str().unwrap(),
        format!("{name}.tar.gz")
    );
    let listing = Command::new("tar")
        .arg("-tzf")
        .arg(tarball)
        .output()
        .unwrap();
    let listing = String::from_utf8_lossy(&listing.stdout);
    for l in listing.lines() {
        assert!(
            l.starts_with(&format!("{name}/")),
            "outside the top folder: {l}"
        );
    }
    for f in [
        "bin/arrowcert",
        "lib/arrowcert/libarrowcert_producer_reference.so",
        "lib/arrowcert/libarrowcert_consumer_reference.so",
        "include/arrowcert_plugin.h",
        "include/arrowcert_emulated_device.h",
        "docs/README.md",
        "docs/PLUGIN_ABI.md",
        "docs/RULES.md",
        "docs/PYTHON_ADAPTERS.md",
        "docs/EXPECTATIONS.md",
        "examples/README.md",
        "examples/c/minimal_plugin.c",
        "examples/c/nanoarrow_producer.c",
        "examples/c/nanoarrow_consumer.c",
        "examples/c/nanoarrow_example_copy.h",
        "examples/rust/producer-reference/src/lib.rs",
        "examples/rust/consumer-reference/src/lib.rs",
        "examples/workflows/certify-pycapsule.yml",
    ] {
        assert!(
            listing.lines().any(|l| l == format!("{name}/{f}")),
            "{f} is not in the tarball:\n{listing}"
        );
    }
    // The checksum file names the tarball and its digest.
    let sums = std::fs::read_to_string(format!("{}.sha256", tarball.display())).unwrap();
    let digest = Command::new("sha256sum").arg(tarball).output().unwrap();
    let digest = String::from_utf8_lossy(&digest.stdout);
    assert_eq!(
        sums.split_whitespace().collect::<Vec<_>>(),
        [
            digest.split_whitespace().next().unwrap(),
            &format!("{name}.tar.gz")
        ]
    );
}

#[test]
fn the_unpacked_tarball_certifies_the_reference_pair() {
    let dir = unpacked("tarball-reference");
    let out = run(
        &dir,
        &[
            "certify",
            "--producer",
            "reference",
            "--consumer",
            "reference",
            "--cases",
            "5",
            "--seed",
            "3",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("certify result: ok"),
        "{}",
        text(&out)
    );
}

/// The C compiler, with the unpacked tarball's `include/` the only
/// arrowcert header directory.
fn cc_against(dir: &Path, args: &[&str], extra: &[PathBuf]) {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(cc)
        .arg("-I")
        .arg(dir.join("include"))
        .args(args)
        .args(extra)
        .output()
        .expect("the C compiler runs");
    assert!(out.status.success(), "cc {args:?}: {}", text(&out));
}

#[test]
fn the_minimal_c_example_builds_against_the_tarballs_header() {
    let dir = unpacked("tarball-minimal");
    let lib = dir.join("libminimal.so");
    cc_against(
        &dir,
        &[
            "-shared",
            "-fPIC",
            "-Wall",
            "-Werror",
            "-o",
            lib.to_str().unwrap(),
        ],
        &[dir.join("examples/c/minimal_plugin.c")],
    );
    let out = run(&dir, &["inspect", lib.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("minimal example 1.0"),
        "{}",
        text(&out)
    );
}

/// nanoarrow's C sources and objects, as scripts/examples/build-nanoarrow-examples.sh
/// leaves them under target/examples/nanoarrow/, or `None` (SKIPPED) when
/// its pinned sdist cannot be had here.
fn nanoarrow() -> Option<(PathBuf, Vec<PathBuf>)> {
    let run = Command::new("bash")
        .arg(workspace_dir().join("scripts/examples/build-nanoarrow-examples.sh"))
        .arg(scratch("tarball-nanoarrow-build"))
        .output()
        .expect("bash runs");
    match run.status.code() {
        Some(0) => {}
        Some(75) => {
            let why = String::from_utf8_lossy(&run.stderr);
            let why = why.trim().lines().last().unwrap_or("");
            assert!(
                std::env::var("ARROWCERT_REQUIRE_NANOARROW_EXAMPLES").as_deref() != Ok("1"),
                "ARROWCERT_REQUIRE_NANOARROW_EXAMPLES=1 but {why}"
            );
            eprintln!("SKIPPED: {why}");
            return None;
        }
        _ => panic!("building nanoarrow: {}", text(&run)),
    }
    let env = std::fs::read_to_string(workspace_dir().join("scripts/real/versions.env")).unwrap();
    let v = env
        .lines()
        .find_map(|l| l.strip_prefix("NANOARROW_VERSION="))
        .expect("NANOARROW_VERSION in versions.env")
        .trim_matches('"');
    let cache = workspace_dir().join("target/examples/nanoarrow");
    let objects = ["array", "schema", "utils", "array_stream", "device"]
        .iter()
        .map(|o| cache.join(format!("obj-{v}/{o}.o")))
        .collect::<Vec<_>>();
    Some((cache.join(format!("src-{v}")), objects))
}

#[test]
fn the_nanoarrow_c_example_builds_against_the_tarball_and_certifies() {
    let Some((src, objects)) = nanoarrow() else {
        return;
    };
    let dir = unpacked("tarball-nanoarrow");
    let lib = dir.join("libnanoarrow_producer_example.so");
    let mut extra = vec![dir.join("examples/c/nanoarrow_producer.c")];
    extra.extend(objects);
    cc_against(
        &dir,
        &[
            "-I",
            src.to_str().unwrap(),
            "-std=c11",
            "-O1",
            "-fPIC",
            "-fvisibility=hidden",
            "-DNANOARROW_DLL=",
            "-Wall",
            "-Werror",
            "-shared",
            "-Wl,--no-undefined",
            "-o",
            lib.to_str().unwrap(),
        ],
        &extra,
    );
    let report = dir.join("nanoarrow.json");
    let out = run(
        &dir,
        &[
            "certify",
            "--producer",
            lib.to_str().unwrap(),
            "--cases",
            "5",
            "--seed",
            "25",
            "--report",
            report.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let r = arrowcert::report::read(&report).unwrap();
    assert!(
        r.summary.passed > 0 && r.summary.failed == 0,
        "{:?}",
        r.summary
    );
    assert!(
        r.plugins[0].name.contains("nanoarrow"),
        "{}",
        r.plugins[0].name
    );
}

#[test]
fn the_script_refuses_bad_arguments_in_one_line() {
    for (args, needle) in [
        (
            &["--profile", "fast"][..],
            "--profile must be release or dev, not 'fast'",
        ),
        (&["--bogus"][..], "unknown argument '--bogus'"),
        (
            &["--bin", "/nonexistent/arrowcert"][..],
            "--bin: /nonexistent/arrowcert is not an executable file",
        ),
        (
            &["--plugins", "nope", "--out", "/tmp"][..],
            "no bundled plugin 'nope'",
        ),
    ] {
        let out = Command::new("bash")
            .arg(workspace_dir().join("scripts/release/tarball.sh"))
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

//! Builds the allocation tracker (`harness/tracker/alloc_tracker.c`) into a
//! shared library in OUT_DIR; `plugin::tracker` embeds its bytes in the
//! arrowcert binary, which writes them to a private file at run time and
//! preloads it into its worker processes.
//!
//! It also records the commit the binary is built from
//! (`ARROWCERT_COMMIT`, read by `report::Tool` and `arrowcert --version`).

use std::path::PathBuf;
use std::process::Command;

fn main() {
    commit();
    let src = PathBuf::from("tracker/alloc_tracker.c");
    println!("cargo:rerun-if-changed={}", src.display());
    println!("cargo:rerun-if-changed=build.rs");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"))
        .join("libarrowcert_tracker.so");
    // The cc crate finds the compiler (CC, CFLAGS, the target) the usual
    // way; it builds static archives only, so the link step is ours.
    let compiler = cc::Build::new()
        .opt_level(2)
        .cargo_metadata(false)
        .get_compiler();
    let mut cmd: Command = compiler.to_command();
    cmd.args([
        "-shared",
        "-fPIC",
        "-std=gnu11",
        "-Wall",
        "-Wextra",
        "-Werror",
        // The hooks are the allocator: never let the compiler turn code in
        // them into calls back into it.
        "-fno-builtin",
        "-fvisibility=hidden",
        "-o",
    ])
    .arg(&out)
    .arg(&src);
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("cannot run the C compiler ({cmd:?}): {e}"));
    assert!(
        status.success(),
        "building the allocation tracker failed: {cmd:?}"
    );
    mutant_producer();
}

/// Builds the mutant producer (`producers/mutants/mutant_producer.c`) into
/// OUT_DIR: `certify --malformed` (`malformed::library`) embeds it and hands
/// what each mutation breaks to the consumer under test.
fn mutant_producer() {
    // A symlink to producers/mutants/ in a checkout, which `cargo package`
    // stores as the file itself, so the published crate builds too.
    let src = PathBuf::from("mutants/mutant_producer.c");
    for dep in [
        "mutants/mutant_producer.c",
        "include/arrowcert_plugin.h",
        "include/arrowcert_mutant.h",
    ] {
        println!("cargo:rerun-if-changed={dep}");
    }
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"))
        .join("libarrowcert_mutant_producer.so");
    let compiler = cc::Build::new()
        .opt_level(1)
        .cargo_metadata(false)
        .get_compiler();
    let mut cmd: Command = compiler.to_command();
    // Its own environment variables (malformed::library): a consumer
    // mutant under test reads ARROWCERT_MUTANT for itself.
    cmd.args([
        "-shared",
        "-fPIC",
        "-pthread",
        "-std=gnu11",
        "-Iinclude",
        "-DARROWCERT_MUTANT_ENV=\"ARROWCERT_MALFORMED_MUTANT\"",
        "-DARROWCERT_MUTANT_BASE_ENV=\"ARROWCERT_MALFORMED_BASE\"",
        "-o",
    ])
    .arg(&out)
    .arg(&src)
    .arg("-ldl");
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("cannot run the C compiler ({cmd:?}): {e}"));
    assert!(
        status.success(),
        "building the mutant producer failed: {cmd:?}"
    );
}

/// Sets `ARROWCERT_COMMIT` for the crate: the environment's
/// `ARROWCERT_COMMIT` when set (release builds from a tarball), else `git
/// rev-parse HEAD` of the checkout the crate is built in, else "unknown"
/// (a crates.io download or an unpacked tarball has no checkout; that is
/// no build failure).
fn commit() {
    println!("cargo:rerun-if-env-changed=ARROWCERT_COMMIT");
    let given = std::env::var("ARROWCERT_COMMIT")
        .ok()
        .map(|c| c.trim().to_string())
        .filter(|c| !c.is_empty());
    let source = if given.is_some() { "env" } else { "git" };
    let commit = given.unwrap_or_else(|| {
        let head = git(&["rev-parse", "HEAD"]);
        if head.is_some() {
            // Rebuild when HEAD moves: HEAD itself, the branch it names,
            // and packed refs. Only files that exist: cargo reruns on
            // every build for a path that does not.
            let mut watched = vec!["HEAD".to_string(), "packed-refs".to_string()];
            watched.extend(git(&["symbolic-ref", "-q", "HEAD"]));
            for name in watched {
                if let Some(path) = git(&["rev-parse", "--git-path", &name]) {
                    let path = PathBuf::from(path);
                    if path.is_file() {
                        println!("cargo:rerun-if-changed={}", path.display());
                    }
                }
            }
        }
        head.unwrap_or_else(|| "unknown".to_string())
    });
    // Where it came from, for the tests (tests/version.rs).
    let source = if commit == "unknown" { "none" } else { source };
    println!("cargo:rustc-env=ARROWCERT_COMMIT={commit}");
    println!("cargo:rustc-env=ARROWCERT_COMMIT_SOURCE={source}");
}

/// One line of `git ARGS` output in this crate's directory; `None` when git
/// is missing, fails, or this is no checkout.
fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    let line = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !line.is_empty()).then_some(line)
}

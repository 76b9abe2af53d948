//! Builds the allocation tracker (`harness/tracker/alloc_tracker.c`) into a
//! shared library in OUT_DIR; `plugin::tracker` embeds its bytes in the
//! arrowcert binary, which writes them to a private file at run time and
//! preloads it into its worker processes.

use std::path::PathBuf;
use std::process::Command;

fn main() {
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
    let src = PathBuf::from("../producers/mutants/mutant_producer.c");
    for dep in [
        "../producers/mutants/mutant_producer.c",
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

//! Builds the allocation tracker (`harness/tracker/alloc_tracker.c`) into a
//! shared library in OUT_DIR; `plugin::tracker` embeds its bytes in the
//! arrowcert binary, which writes them to a private file at run time and
//! preloads it into its worker processes. Also builds what `assets` carries
//! (the Python bridge against CPython's stable ABI, the ADBC adapter) and
//! writes the list of files it embeds (`assets.rs`), so that nothing at run
//! time reads the source tree or needs a C compiler.
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
    adbc_adapter();
    python_bridge();
    assets_list();
}

fn out_dir() -> PathBuf {
    PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"))
}

/// Runs `cmd`, panicking with `what` and the command when it fails.
fn run(mut cmd: Command, what: &str) {
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("cannot run the C compiler ({cmd:?}): {e}"));
    assert!(status.success(), "building {what} failed: {cmd:?}");
}

/// The ADBC adapter (`plugins/adbc/adbc_plugin.c`), prebuilt: `adbc:` needs
/// no C compiler at run time. The sources outside the crate are read through
/// `harness/carried/` (symlinks to `adapters/`, `plugins/python/`,
/// `plugins/adbc/`), which `cargo package` stores as files, so the packaged
/// crate builds on its own.
fn adbc_adapter() {
    let src = PathBuf::from("carried/adbc/adbc_plugin.c");
    println!("cargo:rerun-if-changed={}", src.display());
    let compiler = cc::Build::new()
        .opt_level(2)
        .cargo_metadata(false)
        .get_compiler();
    let mut cmd: Command = compiler.to_command();
    cmd.args([
        "-std=gnu11",
        "-g",
        "-Wall",
        "-Wno-format-truncation",
        "-shared",
        "-fPIC",
        "-fvisibility=hidden",
        "-Iinclude",
        "-o",
    ])
    .arg(out_dir().join("libarrowcert_adbc.so"))
    .arg(&src)
    .args(["-ldl", "-lpthread"]);
    run(cmd, "the ADBC adapter");
}

/// The Python adapter bridge (`plugins/python/bridge.c`, `bridge.py`
/// embedded in it) against CPython's stable ABI and no libpython: one build
/// for every CPython >= 3.10, which the harness loads after the chosen
/// interpreter's libpython. Needs Python.h now (`ARROWCERT_BUILD_PYTHON`,
/// else `python3`, says whose); without it the file is left empty and the
/// binary falls back to building the bridge from its checkout at run time.
fn python_bridge() {
    println!("cargo:rerun-if-changed=carried/python/bridge.c");
    println!("cargo:rerun-if-changed=carried/python/bridge.py");
    println!("cargo:rerun-if-env-changed=ARROWCERT_BUILD_PYTHON");
    let out = out_dir().join("libarrowcert_python_bridge.so");
    let python = std::env::var("ARROWCERT_BUILD_PYTHON").unwrap_or_else(|_| "python3".into());
    let include = Command::new(&python)
        .args([
            "-c",
            "import sysconfig; print(sysconfig.get_config_var('INCLUDEPY') or '')",
        ])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
        .filter(|d| d.join("Python.h").is_file());
    let Some(include) = include else {
        println!(
            "cargo:warning=no Python.h (from {python}): the Python bridge is not embedded; py: builds it from the checkout at run time"
        );
        std::fs::write(&out, b"").expect("OUT_DIR is writable");
        return;
    };
    // bridge.py as a C string literal, line by line.
    let glue = std::fs::read_to_string("carried/python/bridge.py").expect("bridge.py");
    let mut header = String::new();
    for line in glue.split_inclusive('\n') {
        let esc = line
            .replace('\\', "\\\\")
            .replace('"', "\\\"")
            .replace('\n', "\\n");
        header.push_str(&format!("\"{esc}\"\n"));
    }
    std::fs::write(out_dir().join("bridge_glue.h"), header).expect("OUT_DIR is writable");
    let compiler = cc::Build::new()
        .opt_level(2)
        .cargo_metadata(false)
        .get_compiler();
    let mut cmd: Command = compiler.to_command();
    cmd.args([
        "-std=gnu11",
        "-g",
        "-Wall",
        "-Wextra",
        "-Wno-unused-parameter",
        "-shared",
        "-fPIC",
        "-fvisibility=hidden",
        "-Iinclude",
        "-DBRIDGE_GLUE_HEADER=\"bridge_glue.h\"",
    ])
    .arg(format!("-I{}", include.display()))
    .arg(format!("-I{}", out_dir().display()))
    .arg("-o")
    .arg(&out)
    .arg("carried/python/bridge.c")
    .args(["-Wl,-z,nodelete", "-ldl", "-lpthread"]);
    run(cmd, "the Python adapter bridge");
}

/// `OUT_DIR/assets.rs`: every file `assets` embeds, as (relative path,
/// bytes), and `KEY`, a hash of them all (the cache directory's name).
fn assets_list() {
    use std::hash::{Hash, Hasher};
    let mut files: Vec<(String, PathBuf)> = Vec::new();
    for dir in [
        "carried/adapters",
        "carried/adapters/dlpack",
        "carried/adapters/cai",
    ] {
        println!("cargo:rerun-if-changed={dir}");
        let mut names: Vec<PathBuf> = std::fs::read_dir(dir)
            .expect("adapters/ is there")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "py"))
            .collect();
        names.sort();
        for p in names {
            println!("cargo:rerun-if-changed={}", p.display());
            let rel = p
                .strip_prefix("carried/")
                .expect("relative")
                .display()
                .to_string();
            files.push((rel, p));
        }
    }
    files.push((
        "include/arrowcert_plugin.h".into(),
        PathBuf::from("include/arrowcert_plugin.h"),
    ));
    for so in ["libarrowcert_python_bridge.so", "libarrowcert_adbc.so"] {
        files.push((format!("lib/{so}"), out_dir().join(so)));
    }
    let mut h = std::collections::hash_map::DefaultHasher::new();
    let mut list = String::from("&[\n");
    for (rel, path) in &files {
        let abs = std::fs::canonicalize(path).expect("asset exists");
        let bytes = std::fs::read(&abs).expect("asset readable");
        rel.hash(&mut h);
        bytes.hash(&mut h);
        list.push_str(&format!(
            "    ({rel:?}, include_bytes!({:?})),\n",
            abs.display().to_string()
        ));
    }
    list.push(']');
    std::fs::write(out_dir().join("assets.rs"), list).expect("OUT_DIR is writable");
    println!("cargo:rustc-env=ARROWCERT_ASSETS_KEY={:016x}", h.finish());
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

//! Without the `nanoarrow` feature: nothing (the crate builds offline).
//!
//! With it: takes nanoarrow's C sources from the `nanoarrow` package's
//! source distribution on PyPI, at a pinned version and SHA-256, and
//! compiles them (with `src/shim.c`) into a static library. The sdist is
//! fetched with `python3 -m pip download` into OUT_DIR, once; set
//! `NANOARROW_SDIST=/path/to/nanoarrow-<version>.tar.gz` to use a copy
//! already on disk instead (it is checked against the same SHA-256).
//! Nothing downloaded is ever written outside OUT_DIR.

/// The pinned release and the SHA-256 of its sdist on PyPI.
#[cfg(feature = "nanoarrow")]
const VERSION: &str = "0.9.0";
#[cfg(feature = "nanoarrow")]
const SHA256: &str = "1ce15bbed8532839347faa78824c5dbd3769bff60661003e34c6fba5dd881bd3";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=src/shim.c");
    println!("cargo:rerun-if-env-changed=NANOARROW_SDIST");
    println!("cargo:rerun-if-env-changed=PYTHON");
    #[cfg(feature = "nanoarrow")]
    nanoarrow::build();
}

#[cfg(feature = "nanoarrow")]
mod nanoarrow {
    use super::{SHA256, VERSION};
    use std::path::{Path, PathBuf};
    use std::process::Command;

    /// Checks the archive's SHA-256 and extracts the C library's sources
    /// (`src/nanoarrow/**.{c,h,in}` of the bundled `arrow-nanoarrow`
    /// subproject) flat under `dest`, with python's tarfile.
    const EXTRACT: &str = r#"
import hashlib, os, sys, tarfile
archive, want, dest, version = sys.argv[1:5]
digest = hashlib.sha256(open(archive, "rb").read()).hexdigest()
if digest != want:
    sys.exit(f"{archive}: SHA-256 is {digest}, expected {want} (nanoarrow {version} sdist)")
prefix = f"nanoarrow-{version}/subprojects/arrow-nanoarrow/src/"
n = 0
with tarfile.open(archive, "r:gz") as tar:
    for m in tar.getmembers():
        if not (m.isfile() and m.name.startswith(prefix + "nanoarrow/")):
            continue
        rel = m.name[len(prefix):]
        if ".." in rel.split("/") or not rel.endswith((".c", ".h", ".in")):
            continue
        out = os.path.join(dest, rel)
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with tar.extractfile(m) as src, open(out, "wb") as dst:
            dst.write(src.read())
        n += 1
if n == 0:
    sys.exit(f"{archive}: no nanoarrow C sources under {prefix}")
"#;

    fn fail(msg: &str) -> ! {
        panic!(
            "\n\narrowcert-bench-nanoarrow: {msg}\n\
             The `nanoarrow` feature (the nanoarrow validation benchmark) needs nanoarrow \
             {VERSION}'s source distribution from PyPI: either network access to PyPI for \
             `python3 -m pip download nanoarrow=={VERSION} --no-binary nanoarrow --no-deps`, \
             or NANOARROW_SDIST=/path/to/nanoarrow-{VERSION}.tar.gz. \
             Nothing else in the workspace needs it.\n\n"
        )
    }

    fn python() -> String {
        std::env::var("PYTHON").unwrap_or_else(|_| "python3".into())
    }

    /// The sdist in OUT_DIR, downloading it on first use.
    fn sdist(out: &Path) -> PathBuf {
        let dir = out.join("sdist");
        let archive = dir.join(format!("nanoarrow-{VERSION}.tar.gz"));
        if archive.is_file() {
            return archive;
        }
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| fail(&format!("{}: {e}", dir.display())));
        if let Some(local) = std::env::var_os("NANOARROW_SDIST") {
            std::fs::copy(&local, &archive).unwrap_or_else(|e| {
                fail(&format!(
                    "cannot copy NANOARROW_SDIST={}: {e}",
                    Path::new(&local).display()
                ))
            });
            return archive;
        }
        // `--no-binary nanoarrow` gets the sdist; pip prepares its metadata
        // (with wheels of its build tools), which takes a minute.
        let status = Command::new(python())
            .args(["-m", "pip", "download", "--disable-pip-version-check"])
            .arg(format!("nanoarrow=={VERSION}"))
            .args(["--no-binary", "nanoarrow", "--no-deps", "-d"])
            .arg(&dir)
            .status();
        match status {
            Ok(s) if s.success() && archive.is_file() => archive,
            Ok(s) if s.success() => fail(&format!(
                "pip succeeded but left no {} (a wheel instead of the sdist?)",
                archive.display()
            )),
            Ok(s) => fail(&format!("`pip download` failed ({s})")),
            Err(e) => fail(&format!("cannot run {}: {e}", python())),
        }
    }

    pub fn build() {
        let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
        let archive = sdist(&out);
        let src = out.join("nanoarrow-src");
        let _ = std::fs::remove_dir_all(&src);
        let status = Command::new(python())
            .args(["-c", EXTRACT])
            .arg(&archive)
            .arg(SHA256)
            .arg(&src)
            .arg(VERSION)
            .status()
            .unwrap_or_else(|e| fail(&format!("cannot run {}: {e}", python())));
        if !status.success() {
            // A bad download must not stick: the next build fetches again.
            let _ = std::fs::remove_file(&archive);
            fail(&format!(
                "checking or extracting {} failed ({status})",
                archive.display()
            ));
        }

        // What meson's configure_file would write.
        let nano = src.join("nanoarrow");
        let template = std::fs::read_to_string(nano.join("nanoarrow_config.h.in"))
            .unwrap_or_else(|e| fail(&format!("nanoarrow_config.h.in: {e}")));
        let mut parts = VERSION.split('.');
        let mut config = template.replace("@NANOARROW_VERSION@", VERSION);
        for key in ["MAJOR", "MINOR", "PATCH"] {
            config = config.replace(
                &format!("@NANOARROW_VERSION_{key}@"),
                parts.next().unwrap_or("0"),
            );
        }
        config = config.replace(
            "@NANOARROW_NAMESPACE_DEFINE@",
            "#define NANOARROW_NAMESPACE ArrowcertBench",
        );
        std::fs::write(nano.join("nanoarrow_config.h"), config)
            .unwrap_or_else(|e| fail(&format!("nanoarrow_config.h: {e}")));

        cc::Build::new()
            .std("c99")
            .include(&src)
            .define("NDEBUG", None)
            .opt_level(3)
            .warnings(false)
            .file(nano.join("common/array.c"))
            .file(nano.join("common/schema.c"))
            .file(nano.join("common/utils.c"))
            .file("src/shim.c")
            .compile("arrowcert_nanoarrow");
    }
}

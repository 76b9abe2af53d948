//! `py:` plugins: a Python adapter file (or module) run by arrowcert's
//! adapter bridge (`plugins/python/bridge.c`, docs/PYTHON_ADAPTERS.md).
//!
//! The bridge is built once, with the binary, against CPython's stable ABI
//! (`harness/build.rs`), and carried in it (`assets`): `py:` needs no C
//! compiler or Python headers at run time, and one build serves every
//! CPython >= 3.10 (`interpreter`). A binary built without Python.h falls
//! back, in its source checkout, to building it per interpreter
//! (`scripts/python/build-bridge.sh`, into `target/python-bridge/`).
//! Each adapter gets a copy of it of its own, next to a `<copy>.adapter`
//! file naming the adapter and the interpreter: two adapters in one process
//! are two libraries with their own state, sharing the one interpreter.
//! Builds and copies are written under temporary names and renamed, so runs
//! at once do not collide.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

static INTERPRETER: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// `--python PATH`: the interpreter `py:` plugins run in, for this process.
pub fn set_interpreter(path: PathBuf) {
    let _ = INTERPRETER.set(path);
}

/// The interpreter `py:` plugins run in: `--python`, else
/// `ARROWCERT_PYTHON`, else (in a source checkout) the project-local one
/// `just real` installs (`target/real/venv/bin/python`), else `python3` on
/// PATH.
pub fn interpreter() -> Result<PathBuf, String> {
    let given = INTERPRETER.get().cloned().or_else(|| {
        std::env::var_os("ARROWCERT_PYTHON")
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
    });
    if let Some(p) = given {
        return if p.exists() || !p.to_string_lossy().contains('/') {
            Ok(p)
        } else {
            Err(format!("--python {}: no such file", p.display()))
        };
    }
    let local = target_dir().join("real/venv/bin/python");
    if crate::assets::source_tree_allowed() && local.exists() {
        return Ok(local);
    }
    super::interpreter::on_path("python3").ok_or_else(|| {
        "no Python for py: adapters: no --python, no ARROWCERT_PYTHON, and no python3 on PATH"
            .into()
    })
}

/// `target/` of the checkout this arrowcert was built in (its executable
/// is in `target/<profile>/`).
pub(super) fn target_dir() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().and_then(Path::parent).map(Path::to_path_buf))
        .unwrap_or_else(|| PathBuf::from("target"))
}

/// The checkout's root (the bridge's sources and build script, for a
/// binary that carries no bridge).
fn source_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

fn cache_dir() -> PathBuf {
    std::env::var_os("ARROWCERT_BRIDGE_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| target_dir().join("python-bridge"))
}

pub(super) fn key(parts: &[&[u8]]) -> String {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for p in parts {
        p.hash(&mut h);
    }
    format!("{:016x}", h.finish())
}

/// The bridge for `python`: the one this binary carries, else (a binary
/// built without Python.h, in its checkout) the one built for `python`.
pub fn bridge(python: &Path) -> Result<PathBuf, String> {
    let carried = "lib/libarrowcert_python_bridge.so";
    if crate::assets::bytes(carried).is_some() {
        return crate::assets::path(carried);
    }
    if !crate::assets::source_tree_allowed() {
        return Err(format!(
            "this arrowcert binary carries no Python bridge (built without Python.h) and {} is set: rebuild it where python3's headers are",
            crate::assets::NO_SOURCE_TREE_ENV
        ));
    }
    built_bridge(python)
}

/// The development fallback: the bridge built for `python` from the
/// checkout (built now when missing or older than its sources).
fn built_bridge(python: &Path) -> Result<PathBuf, String> {
    let src = source_dir();
    let sources = [
        src.join("plugins/python/bridge.c"),
        src.join("plugins/python/bridge.py"),
        src.join("scripts/python/build-bridge.sh"),
        src.join("harness/include/arrowcert_plugin.h"),
    ];
    let mut contents = Vec::new();
    for s in &sources {
        contents.push(std::fs::read(s).map_err(|e| {
            format!(
                "the Python adapter bridge's source {} cannot be read ({e}): this arrowcert carries no bridge, so py: adapters need the checkout it was built from",
                s.display()
            )
        })?);
    }
    // Which interpreter: as given, and where it leads.
    let real = std::fs::canonicalize(python).unwrap_or_else(|_| python.to_path_buf());
    let mut parts: Vec<&[u8]> = contents.iter().map(Vec::as_slice).collect();
    let given = python.to_string_lossy().into_owned();
    let resolved = real.to_string_lossy().into_owned();
    parts.push(given.as_bytes());
    parts.push(resolved.as_bytes());
    let dir = cache_dir().join(format!("bridge-{}", key(&parts)));
    let so = dir.join("libarrowcert_python_bridge.so");
    if so.exists() && so.with_extension("so.site").exists() {
        return Ok(so);
    }
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let out = std::process::Command::new("bash")
        .arg(src.join("scripts/python/build-bridge.sh"))
        .arg(python)
        .arg(&so)
        .output()
        .map_err(|e| format!("cannot run the bridge's build script: {e}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let last = err
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        return Err(format!(
            "building the Python adapter bridge for {} failed: {last}",
            python.display()
        ));
    }
    Ok(so)
}

/// `FILE.py#VARIANT` as (`FILE.py`, `Some(VARIANT)`): one of the
/// adapter's variants (docs/PYTHON_ADAPTERS.md, "Variants").
pub fn split_variant(spec: &str) -> Result<(&str, Option<&str>), String> {
    match spec.rsplit_once('#') {
        None => Ok((spec, None)),
        Some((_, v))
            if v.is_empty()
                || !v
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) =>
        {
            Err(format!(
                "py:{spec}: a variant name is letters, digits, '-', '_' and '.' (py:FILE.py#NAME)"
            ))
        }
        Some((file, v)) => Ok((file, Some(v))),
    }
}

/// `py:`: a Python adapter, run by a copy of the bridge ([`prepare`]).
pub struct Python;

impl super::backend::Source for Python {
    fn prefix(&self) -> &'static str {
        "py:"
    }

    fn prepare(&self, spec: &str, _role: &str) -> Result<PathBuf, String> {
        prepare(spec)
    }
}

/// Prepares the plugin for `spec` (what follows `py:`: a `.py` file or a
/// module name, with `#VARIANT` for one of its variants): a copy of the
/// bridge whose `.adapter` file names it.
pub fn prepare(spec: &str) -> Result<PathBuf, String> {
    if spec.is_empty() {
        return Err("py: needs an adapter file or module (py:adapters/pyarrow.py)".into());
    }
    let full = spec;
    let (spec, variant) = split_variant(full)?;
    let mut file_like = spec.ends_with(".py") || spec.contains('/');
    // A bundled adapter's name (py:pyarrow, py:nanoarrow-python): the file
    // this binary carries, before any module of that name (a library's own
    // module is no adapter: it has no load or read).
    let carried = format!("adapters/{}.py", spec.replace('-', "_"));
    let bundled_file;
    let spec = if !file_like && crate::assets::bytes(&carried).is_some() {
        file_like = true;
        bundled_file = crate::assets::path(&carried)?.display().to_string();
        bundled_file.as_str()
    } else {
        spec
    };
    let target = if file_like {
        let p = Path::new(spec);
        if !p.is_file() {
            return Err(format!("py:{spec}: no such adapter file"));
        }
        format!(
            "adapter={}",
            std::fs::canonicalize(p)
                .map_err(|e| format!("py:{spec}: {e}"))?
                .display()
        )
    } else {
        format!("module={spec}")
    };
    let python = interpreter()?;
    let info = super::interpreter::info(&python)?;
    info.usable(&python)?;
    let bridge = bridge(&python)?;
    let mut config = format!("# written by arrowcert for py:{full}\n{target}\n");
    if let Some(v) = variant {
        config.push_str(&format!("variant={v}\n"));
    }
    config.push_str(&info.sidecar_lines());
    let stem: String = Path::new(spec)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect::<String>()
        + &variant.map(|v| format!("_{v}")).unwrap_or_default();
    let bridge_bytes = std::fs::read(&bridge).map_err(|e| format!("{}: {e}", bridge.display()))?;
    let dir = bridge.parent().unwrap_or(Path::new(".")).join(format!(
        "adapter-{}",
        key(&[config.as_bytes(), &bridge_bytes])
    ));
    let copy = dir.join(format!("libarrowcert_py_{stem}.so"));
    copy_with_sidecar(&bridge, &copy, "adapter", &config)?;
    Ok(copy)
}

/// Copies `lib` to `copy` with `config` in `<copy>.<ext>` beside it, each
/// written under a temporary name and renamed (runs at once do not
/// collide); nothing is written when both are there already.
pub(super) fn copy_with_sidecar(
    lib: &Path,
    copy: &Path,
    ext: &str,
    config: &str,
) -> Result<(), String> {
    let sidecar = PathBuf::from(format!("{}.{ext}", copy.display()));
    if copy.exists() && sidecar.exists() {
        return Ok(());
    }
    if let Some(dir) = copy.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let tmp = |p: &Path| PathBuf::from(format!("{}.tmp.{}", p.display(), std::process::id()));
    std::fs::write(tmp(&sidecar), config)
        .and_then(|_| std::fs::rename(tmp(&sidecar), &sidecar))
        .map_err(|e| format!("{}: {e}", sidecar.display()))?;
    std::fs::copy(lib, tmp(copy))
        .and_then(|_| std::fs::rename(tmp(copy), copy))
        .map_err(|e| format!("{}: {e}", copy.display()))?;
    Ok(())
}

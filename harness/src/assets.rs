//! The files arrowcert carries inside its binary, so that nothing at run
//! time reads the source tree: the bundled `py:` adapters (`adapters/`,
//! `adapters/dlpack/`), the plugin header, the Python adapter bridge (built
//! against CPython's stable ABI) and the ADBC adapter (`harness/build.rs`
//! builds both and lists every file).
//!
//! They are written out on first use into a cache directory of their own
//! per build (`$ARROWCERT_CACHE_DIR`, else `$XDG_CACHE_HOME/arrowcert`,
//! else `~/.cache/arrowcert`; then `<version>-<hash of the files>/`), mode
//! 0700, through a temporary directory renamed into place: a directory
//! that is there is complete, and runs at once do not collide.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// (path relative to the cache directory, bytes).
static FILES: &[(&str, &[u8])] = include!(concat!(env!("OUT_DIR"), "/assets.rs"));

/// Set to anything but empty or `0`: a source checkout's development
/// fallbacks (building the Python bridge from `plugins/python/`) are off,
/// as they are for an installed binary. Tests use it to prove a run needs
/// nothing from the checkout.
pub const NO_SOURCE_TREE_ENV: &str = "ARROWCERT_NO_SOURCE_TREE";

/// The bundled file at `rel` (`adapters/pyarrow.py`, `lib/...`), if this
/// binary carries it. An empty embedded file counts as not carried (the
/// bridge, when its build found no Python.h).
pub fn bytes(rel: &str) -> Option<&'static [u8]> {
    FILES
        .iter()
        .find(|(p, b)| *p == rel && !b.is_empty())
        .map(|(_, b)| *b)
}

/// The relative paths of the bundled files under `prefix` (`adapters/`).
pub fn list(prefix: &str) -> Vec<&'static str> {
    FILES
        .iter()
        .filter(|(p, b)| p.starts_with(prefix) && !b.is_empty())
        .map(|(p, _)| *p)
        .collect()
}

/// Whether the source checkout's development fallbacks are allowed.
pub fn source_tree_allowed() -> bool {
    std::env::var_os(NO_SOURCE_TREE_ENV).is_none_or(|v| v.is_empty() || v == "0")
}

/// The path of the bundled file `rel`, written out (with every other one)
/// on first use; an error names the file or the directory that failed.
pub fn path(rel: &str) -> Result<PathBuf, String> {
    if bytes(rel).is_none() {
        return Err(format!("this arrowcert binary carries no {rel}"));
    }
    Ok(root()?.join(rel))
}

/// The cache directory of this build's files, written out if missing.
pub fn root() -> Result<PathBuf, String> {
    static ROOT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    ROOT.get_or_init(|| {
        let dir = cache_base()?.join(format!(
            "{}-{}",
            env!("CARGO_PKG_VERSION"),
            env!("ARROWCERT_ASSETS_KEY")
        ));
        extract(&dir)?;
        Ok(dir)
    })
    .clone()
}

/// Where cache directories go.
fn cache_base() -> Result<PathBuf, String> {
    let given = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(d) = given("ARROWCERT_CACHE_DIR") {
        return Ok(PathBuf::from(d));
    }
    if let Some(d) = given("XDG_CACHE_HOME") {
        return Ok(PathBuf::from(d).join("arrowcert"));
    }
    if let Some(h) = given("HOME") {
        return Ok(PathBuf::from(h).join(".cache").join("arrowcert"));
    }
    Err("no cache directory for arrowcert's bundled files: set ARROWCERT_CACHE_DIR (or XDG_CACHE_HOME or HOME)".into())
}

/// Whether `dir` holds every bundled file at its size.
fn complete(dir: &Path) -> bool {
    FILES
        .iter()
        .all(|(rel, b)| std::fs::metadata(dir.join(rel)).is_ok_and(|m| m.len() == b.len() as u64))
}

/// Writes every bundled file under `dir` unless a complete copy is there.
fn extract(dir: &Path) -> Result<(), String> {
    if complete(dir) {
        return Ok(());
    }
    let parent = dir.parent().unwrap_or(Path::new("."));
    private_dir_all(parent)?;
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let tmp = parent.join(format!(".tmp-{}-{stamp}", std::process::id()));
    let written = write_all(&tmp);
    if let Err(e) = written {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(e);
    }
    // An incomplete directory (a file removed by hand) is moved aside first;
    // one another run completed meanwhile is kept (below).
    if dir.exists() && !complete(dir) {
        let stale = parent.join(format!(".stale-{}-{stamp}", std::process::id()));
        let _ = std::fs::rename(dir, &stale);
        let _ = std::fs::remove_dir_all(&stale);
    }
    match std::fs::rename(&tmp, dir) {
        Ok(()) => Ok(()),
        // Another run put its complete copy there first: use that one.
        Err(_) if complete(dir) => {
            let _ = std::fs::remove_dir_all(&tmp);
            Ok(())
        }
        Err(e) => {
            let _ = std::fs::remove_dir_all(&tmp);
            Err(format!("{}: {e}", dir.display()))
        }
    }
}

fn write_all(tmp: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    private_dir_all(tmp)?;
    for (rel, b) in FILES {
        let p = tmp.join(rel);
        if let Some(d) = p.parent() {
            private_dir_all(d)?;
        }
        std::fs::write(&p, b).map_err(|e| format!("{}: {e}", p.display()))?;
        let mode = if rel.ends_with(".so") { 0o700 } else { 0o600 };
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode))
            .map_err(|e| format!("{}: {e}", p.display()))?;
    }
    Ok(())
}

/// `create_dir_all`, each directory it makes mode 0700.
fn private_dir_all(dir: &Path) -> Result<(), String> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| format!("cannot create {}: {e}", dir.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn carries_the_adapters_the_header_and_the_adbc_adapter() {
        assert!(bytes("adapters/pyarrow.py").is_some());
        assert!(bytes("adapters/dlpack/numpy.py").is_some());
        assert!(bytes("include/arrowcert_plugin.h").is_some());
        assert!(bytes("lib/libarrowcert_adbc.so").is_some_and(|b| b.starts_with(b"\x7fELF")));
        assert!(bytes("adapters/no-such.py").is_none());
        assert!(list("adapters/dlpack/").contains(&"adapters/dlpack/numpy.py"));
    }

    #[test]
    fn extracts_once_complete_private_and_repairs_a_damaged_copy() {
        use std::os::unix::fs::PermissionsExt;
        let base =
            std::env::temp_dir().join(format!("arrowcert-assets-test-{}", std::process::id()));
        let dir = base.join("v-key");
        extract(&dir).unwrap();
        assert!(complete(&dir));
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        let header = dir.join("include/arrowcert_plugin.h");
        assert_eq!(
            std::fs::read(&header).unwrap(),
            bytes("include/arrowcert_plugin.h").unwrap()
        );
        // A file gone: the next run writes a complete copy again.
        std::fs::remove_file(&header).unwrap();
        assert!(!complete(&dir));
        extract(&dir).unwrap();
        assert!(complete(&dir));
        // No temporary directories left behind.
        let left: Vec<_> = std::fs::read_dir(&base)
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name())
            .collect();
        assert_eq!(left, vec![std::ffi::OsString::from("v-key")]);
        std::fs::remove_dir_all(&base).unwrap();
    }
}

//! The CPython `py:` plugins run in: which one (`--python`, ...), what the
//! bridge needs to know of it (its shared libpython, home, standard library
//! and site-packages, asked of the interpreter once per process), and
//! loading its libpython RTLD_GLOBAL before a bridge copy, which is linked
//! against none (stable ABI: one build for every CPython >= 3.10).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

/// The oldest CPython the bridge's stable-ABI build runs on.
pub const MIN_VERSION: (u32, u32) = (3, 10);

/// What the bridge needs of one interpreter.
#[derive(Debug, Clone)]
pub struct Info {
    pub version: (u32, u32),
    /// Its shared libpython (None: statically linked only).
    pub libpython: Option<PathBuf>,
    /// `sys.base_prefix`: PYTHONHOME for the embedded interpreter.
    pub home: String,
    /// The standard library's `os.py`: checked before Python starts.
    pub stdlib: String,
    /// Its site-packages directories (a venv's own are not found by an
    /// embedded interpreter otherwise).
    pub sites: Vec<String>,
}

const PROBE: &str = r#"
import os, sys, sysconfig, site
v = sysconfig.get_config_var
print(f"{sys.version_info[0]}.{sys.version_info[1]}")
libdir = v("LIBDIR") or ""
names = [v("INSTSONAME"), v("LDLIBRARY")]
cands = [os.path.join(libdir, n) for n in names if n and ".so" in n]
if v("MULTIARCH"):
    cands += [os.path.join(libdir, v("MULTIARCH"), n) for n in names if n and ".so" in n]
print(next((c for c in cands if os.path.exists(c)), ""))
print(sys.base_prefix)
print(os.path.join(sysconfig.get_path("stdlib"), "os.py"))
dirs = [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
try:
    dirs += site.getsitepackages()
except Exception:
    pass
seen = []
for d in dirs:
    if d not in seen:
        seen.append(d)
print("\t".join(seen))
"#;

/// Asks `python` (once per process and interpreter).
pub fn info(python: &Path) -> Result<Info, String> {
    static CACHE: OnceLock<Mutex<HashMap<PathBuf, Info>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(i) = cache.lock().ok().and_then(|c| c.get(python).cloned()) {
        return Ok(i);
    }
    let out = std::process::Command::new(python)
        .args(["-I", "-c", PROBE])
        .output()
        .map_err(|e| format!("--python {}: cannot run it: {e}", python.display()))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let last = err
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        return Err(format!(
            "--python {}: not a CPython arrowcert can use ({last})",
            python.display()
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let info = parse(&text).ok_or_else(|| {
        format!(
            "--python {}: unexpected answer to arrowcert's probe",
            python.display()
        )
    })?;
    if let Ok(mut c) = cache.lock() {
        c.insert(python.to_path_buf(), info.clone());
    }
    Ok(info)
}

fn parse(text: &str) -> Option<Info> {
    let lines: Vec<&str> = text.lines().collect();
    let [version, lib, home, stdlib, sites] = lines.get(..5)? else {
        return None;
    };
    let (major, minor) = version.split_once('.')?;
    Some(Info {
        version: (major.parse().ok()?, minor.parse().ok()?),
        libpython: (!lib.is_empty()).then(|| PathBuf::from(lib)),
        home: home.to_string(),
        stdlib: stdlib.to_string(),
        sites: sites
            .split('\t')
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect(),
    })
}

impl Info {
    /// Whether the stable-ABI bridge can run in it; why not, if not.
    pub fn usable(&self, python: &Path) -> Result<&Path, String> {
        if self.version < MIN_VERSION {
            return Err(format!(
                "--python {}: CPython {}.{} is too old for py: adapters (3.10 or later)",
                python.display(),
                self.version.0,
                self.version.1
            ));
        }
        self.libpython.as_deref().ok_or_else(|| {
            format!(
                "--python {}: has no shared libpython (the bridge embeds it; a statically linked interpreter cannot be used)",
                python.display()
            )
        })
    }

    /// The lines of a bridge copy's sidecar that say how to start it.
    pub fn sidecar_lines(&self) -> String {
        let mut s = String::new();
        if let Some(l) = &self.libpython {
            s.push_str(&format!("libpython={}\n", l.display()));
        }
        s.push_str(&format!("home={}\nstdlib={}\n", self.home, self.stdlib));
        for d in &self.sites {
            s.push_str(&format!("site={d}\n"));
        }
        s
    }
}

/// `python3` on PATH, as a path.
pub fn on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    })
}

/// Loads the libpython that the sidecar of the plugin at `plugin` names
/// (`<plugin>.adapter`, line `libpython=`) RTLD_GLOBAL, so that the bridge
/// copy, which has Python's symbols undefined, loads; nothing for any
/// other plugin. Kept loaded for the life of the process.
pub fn preload_for(plugin: &Path) -> Result<(), String> {
    let sidecar = PathBuf::from(format!("{}.adapter", plugin.display()));
    let Ok(text) = std::fs::read_to_string(&sidecar) else {
        return Ok(());
    };
    let Some(lib) = text.lines().find_map(|l| l.strip_prefix("libpython=")) else {
        return Ok(());
    };
    static LOADED: OnceLock<Mutex<Vec<String>>> = OnceLock::new();
    let loaded = LOADED.get_or_init(Default::default);
    let mut loaded = loaded
        .lock()
        .map_err(|_| "libpython preload lock poisoned")?;
    if loaded.iter().any(|l| l == lib) {
        return Ok(());
    }
    // SAFETY: loading the interpreter's own libpython runs its
    // initialisers, which start nothing (Python starts when the bridge
    // calls Py_InitializeEx); it is never unloaded (forgotten below), so
    // the symbols the bridge binds to stay valid.
    let handle = unsafe {
        libloading::os::unix::Library::open(
            Some(lib),
            libloading::os::unix::RTLD_NOW | libloading::os::unix::RTLD_GLOBAL,
        )
    }
    .map_err(|e| format!("cannot load the Python library {lib}: {e}"))?;
    std::mem::forget(handle);
    loaded.push(lib.to_string());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_probe_and_checks_the_version_and_libpython() {
        let i =
            parse("3.11\n/x/libpython3.11.so.1.0\n/x\n/x/lib/python3.11/os.py\n/a\t/b\n").unwrap();
        assert_eq!(i.version, (3, 11));
        assert_eq!(i.sites, ["/a", "/b"]);
        assert!(i.usable(Path::new("py")).is_ok());
        let lines = i.sidecar_lines();
        assert!(lines.contains("libpython=/x/libpython3.11.so.1.0\n"));
        assert!(lines.contains("home=/x\n") && lines.contains("site=/b\n"));
        let old = parse("3.9\n/x/l.so\n/x\n/x/os.py\n\n").unwrap();
        assert!(old
            .usable(Path::new("py"))
            .unwrap_err()
            .contains("3.9 is too old"));
        let static_only = parse("3.12\n\n/x\n/x/os.py\n\n").unwrap();
        assert!(static_only
            .usable(Path::new("py"))
            .unwrap_err()
            .contains("no shared libpython"));
        assert!(parse("garbage").is_none());
    }

    #[test]
    fn no_sidecar_or_no_libpython_line_preloads_nothing() {
        assert!(preload_for(Path::new("/nonexistent/plugin.so")).is_ok());
    }
}

//! `adbc:` plugins: an ADBC driver certified through arrowcert's ADBC
//! adapter (`plugins/adbc/adbc_plugin.c`): the producer side is the stream
//! the driver returns for a query over a table its bulk ingestion filled
//! with the scenario; the consumer side is that ingestion of the harness's
//! data, read back with a query.
//!
//! The adapter is built with the binary (`harness/build.rs`) and carried in
//! it (`assets`: no C compiler at run time), and copied per driver
//! configuration beside a `<copy>.adbc` file naming the driver, its entry
//! point and the `--adbc-option` values.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use super::python::{copy_with_sidecar, key};

static OPTIONS: OnceLock<Vec<(String, String)>> = OnceLock::new();

/// Where `scripts/postgres/server.sh start` says its server is: a
/// PostgreSQL driver prepared without a `uri` option gets this one.
pub const PG_URI_ENV: &str = "ARROWCERT_PG_URI";

/// The file `pattern` names (a path below the `py:` interpreter's
/// site-packages, `*` for any run of characters in its last part).
pub fn in_site_packages(pattern: &str) -> Option<PathBuf> {
    let py = super::python::interpreter().ok()?;
    let out = std::process::Command::new(py)
        .args([
            "-c",
            "import sysconfig; print(sysconfig.get_paths()['platlib'])",
        ])
        .output()
        .ok()?;
    let site = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let (dir, last) = match pattern.rsplit_once('/') {
        Some((d, l)) => (site.join(d), l),
        None => (site, pattern),
    };
    let (pre, post) = last.split_once('*').unwrap_or((last, ""));
    let mut found: Vec<PathBuf> = std::fs::read_dir(&dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                n.starts_with(pre) && n.ends_with(post) && n.len() >= pre.len() + post.len()
            })
        })
        .collect();
    found.sort();
    found.into_iter().next()
}

/// `--adbc-option K=V` (repeatable): set on every ADBC database this
/// process opens.
pub fn set_options(options: Vec<(String, String)>) {
    let _ = OPTIONS.set(options);
}

/// Parses `K=V`.
pub fn parse_option(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .filter(|(k, _)| !k.is_empty())
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .ok_or_else(|| format!("--adbc-option {s}: expected KEY=VALUE"))
}

/// The ADBC adapter this binary carries, written out.
fn adapter() -> Result<PathBuf, String> {
    crate::assets::path("lib/libarrowcert_adbc.so")
}

/// The libpython a CPython extension module needs loaded before it (DuckDB
/// keeps its ADBC entry point in its Python extension): the one of the
/// `py:` interpreter.
fn libpython() -> Option<String> {
    let py = super::python::interpreter().ok()?;
    let out = std::process::Command::new(py)
        .args([
            "-c",
            "import sysconfig, os; print(os.path.join(sysconfig.get_config_var('LIBDIR'), sysconfig.get_config_var('LDLIBRARY')))",
        ])
        .output()
        .ok()?;
    let p = String::from_utf8_lossy(&out.stdout).trim().to_string();
    Path::new(&p).exists().then_some(p)
}

/// `adbc:`: an ADBC driver behind a copy of the ADBC adapter
/// ([`prepare`]).
pub struct Adbc;

impl super::backend::Source for Adbc {
    fn prefix(&self) -> &'static str {
        "adbc:"
    }

    fn prepare(&self, spec: &str, _role: &str) -> Result<PathBuf, String> {
        prepare(spec)
    }
}

/// Prepares the plugin for `spec` (what follows `adbc:`):
/// `DRIVER.so[:ENTRYPOINT]`.
pub fn prepare(spec: &str) -> Result<PathBuf, String> {
    let (driver, entry) = match spec.rsplit_once(':') {
        Some((d, e)) if !e.contains('/') && !e.is_empty() => (d, e),
        _ => (spec, "AdbcDriverInit"),
    };
    let path = Path::new(driver);
    if !path.is_file() {
        return Err(format!("adbc:{spec}: {driver}: no such driver library"));
    }
    let driver = std::fs::canonicalize(path).map_err(|e| format!("{driver}: {e}"))?;
    let file = driver
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut config = format!(
        "# written by arrowcert for adbc:{spec}\ndriver={}\nentrypoint={entry}\nname=ADBC {file} ({entry})\n",
        driver.display()
    );
    if file.contains(".cpython-") {
        if let Some(lib) = libpython() {
            config.push_str(&format!("preload={lib}\n"));
        }
    }
    let options = OPTIONS.get().map(Vec::as_slice).unwrap_or_default();
    for (k, v) in options {
        config.push_str(&format!("option={k}={v}\n"));
    }
    if file.contains("postgresql") && !options.iter().any(|(k, _)| k == "uri") {
        if let Ok(uri) = std::env::var(PG_URI_ENV) {
            config.push_str(&format!("option=uri={uri}\n"));
        }
    }
    let adapter = adapter()?;
    let bytes = std::fs::read(&adapter).map_err(|e| format!("{}: {e}", adapter.display()))?;
    let stem: String = file
        .split('.')
        .next()
        .unwrap_or("driver")
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let copy = adapter
        .parent()
        .unwrap_or(Path::new("."))
        .join(format!("driver-{}", key(&[config.as_bytes(), &bytes])))
        .join(format!("libarrowcert_adbc_{stem}.so"));
    copy_with_sidecar(&adapter, &copy, "adbc", &config)?;
    Ok(copy)
}

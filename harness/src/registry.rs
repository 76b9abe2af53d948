//! The registry of bundled libraries: the short names (`reference`,
//! `arrow-cpp`, `pyarrow`, ...) usable wherever a plugin path is, where each
//! is built or carried, and what its adapter writes (quoted by the matrix);
//! the DLPack adapters `dlpack-matrix` certifies by default. The command
//! line resolves its plugin arguments here and turns the errors into bad
//! input (exit 2); the tables are data, so adding a library to the matrix is
//! one entry here (CONTRIBUTING.md).

#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};

use crate::plugin::backend::Source;

/// Where a bundled plugin's library is built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// By `cargo build --workspace`, beside the `arrowcert` binary.
    Workspace,
    /// By `just real` (`scripts/real/build.sh`) into `target/real/lib/`:
    /// the adapters over real libraries installed by `scripts/real/setup.sh`.
    Real,
    /// A Python adapter file of the checkout (`adapters/*.py`), run as
    /// `py:FILE` in the project-local environment `just real` installs.
    Adapter,
    /// An ADBC driver library in that environment's site-packages (`file`:
    /// its path there, `*` matching any run of characters, then
    /// `:ENTRYPOINT`), run as `adbc:DRIVER:ENTRYPOINT`.
    Adbc,
}

/// A bundled plugin: a short name usable wherever a plugin path is.
#[derive(Debug, Clone, Copy)]
pub struct Bundled {
    pub name: &'static str,
    pub role: &'static str,
    pub file: &'static str,
    pub place: Place,
    /// What the adapter (not the library) writes or decides, quoted in
    /// matrix reports; empty for the project's own plugins.
    pub adapter: &'static str,
}

const fn bundled(
    name: &'static str,
    role: &'static str,
    file: &'static str,
    place: Place,
    adapter: &'static str,
) -> Bundled {
    Bundled {
        name,
        role,
        file,
        place,
        adapter,
    }
}

const ARROW_RS_ADAPTER: &str = "arrow-rs has no device structures: the adapter writes the \
    ArrowDeviceArray around arrow-rs's ArrowArray (device_type, device_id, sync_event, reserved) \
    and the ArrowDeviceArrayStream around arrow-rs's ArrowArrayStream (its callbacks and \
    private_data); every ArrowSchema, ArrowArray and ArrowArrayStream byte is arrow-rs's";
const PY_ADAPTER: &str = "a py: adapter (adapters/*.py, docs/PYTHON_ADAPTERS.md): the \
    harness's data goes to the library's own importer as a PyCapsule object (load), and the \
    structures are moved out of the library's own __arrow_c_*__ results unchanged; consumer: the \
    harness's structures go to the library's importer in capsules (read), and what it read comes \
    back through its own __arrow_c_stream__ (or __arrow_c_array__), validated; no IPC either side";
const DUCKDB_ADAPTER: &str = "a py: adapter (adapters/duckdb.py): what DuckDB is handed is \
    copied into a table of its own by its own C data interface importer (the adapter closes the \
    pyarrow.dataset route through which duckdb's Python package otherwise reads capsules with \
    pyarrow), and what it exports is its own export of that table; no IPC either side";
const ADBC_ADAPTER: &str = "the ADBC adapter (plugins/adbc, docs/ADBC.md): the scenario goes \
    into a new table through the driver's own bulk ingestion, and the ArrowArrayStream the driver \
    returns for SELECT * from it is certified unchanged; consumer: the harness's data goes to that \
    ingestion (the driver's import) and is read back with a query; a type the database cannot \
    hold is a limitation with the driver's message";
const PANDAS_ADAPTER: &str = "a py: adapter (adapters/pandas.py): pandas converts to and from \
    Arrow with pyarrow, so its verdicts are pandas' conversion plus pyarrow's (Arrow C++'s) export \
    and import";
const PYOGRIO_ADAPTER: &str = "a py: adapter (adapters/pyogrio.py): the data goes into an \
    in-memory GeoPackage through GDAL's own ArrowArrayStream importer (OGRLayer::WriteArrowBatch) \
    and comes out through GDAL's own exporter (OGRLayer::GetArrowStream), pyarrow blocked; OGR's \
    field types are coarser than Arrow's, so a value can come back in a wider type, and the \
    dataset stays open until the next case (GDAL's stream needs it)";
const ARROW_CPP_ADAPTER: &str = "every exported and imported byte is Arrow C++'s \
    (ExportDeviceRecordBatch, ExportAsyncRecordBatchReader, CreateAsyncDeviceStreamHandler, ...); \
    the consumer adapter interposes on the async handler's release member (it calls Arrow C++'s \
    own release first) to learn when the exchange ended, and reports Arrow C++'s refusal of a \
    record batch with a non-zero top-level offset as ENOSYS (a documented limitation)";
const NANOARROW_ADAPTER: &str = "nanoarrow's IPC reader builds and exports the data (device \
    arrays through ArrowDeviceArrayInit, device streams through ArrowDeviceBasicArrayStreamInit); \
    a slice is the adapter setting offset and length on the root struct array nanoarrow exported; \
    the consumer imports with nanoarrow and copies what it read into a fresh array for \
    nanoarrow's IPC writer";

/// The bundled plugins (short name, role, library file, where it is built).
pub const BUNDLED: &[Bundled] = &[
    bundled(
        "reference",
        "producer",
        "libarrowcert_producer_reference.so",
        Place::Workspace,
        "",
    ),
    bundled(
        "reference",
        "consumer",
        "libarrowcert_consumer_reference.so",
        Place::Workspace,
        "",
    ),
    // CUDA only (CUDA, CUDA_HOST, CUDA_MANAGED): `just gpu`.
    bundled(
        "cuda-reference",
        "producer",
        "libarrowcert_producer_cuda_reference.so",
        Place::Workspace,
        "",
    ),
    bundled(
        "cuda-reference",
        "consumer",
        "libarrowcert_consumer_cuda_reference.so",
        Place::Workspace,
        "",
    ),
    // Real libraries (issue 8): the compatibility matrix's rows and columns.
    bundled(
        "arrow-rs",
        "producer",
        "libarrowcert_producer_arrow_rs.so",
        Place::Workspace,
        ARROW_RS_ADAPTER,
    ),
    bundled(
        "arrow-rs",
        "consumer",
        "libarrowcert_consumer_arrow_rs.so",
        Place::Workspace,
        ARROW_RS_ADAPTER,
    ),
    bundled(
        "arrow-cpp",
        "producer",
        "libarrowcert_producer_arrow_cpp.so",
        Place::Real,
        ARROW_CPP_ADAPTER,
    ),
    bundled(
        "arrow-cpp",
        "consumer",
        "libarrowcert_consumer_arrow_cpp.so",
        Place::Real,
        ARROW_CPP_ADAPTER,
    ),
    bundled(
        "nanoarrow",
        "producer",
        "libarrowcert_producer_nanoarrow.so",
        Place::Real,
        NANOARROW_ADAPTER,
    ),
    bundled(
        "nanoarrow",
        "consumer",
        "libarrowcert_consumer_nanoarrow.so",
        Place::Real,
        NANOARROW_ADAPTER,
    ),
    bundled(
        "pyarrow",
        "producer",
        "adapters/pyarrow.py",
        Place::Adapter,
        PY_ADAPTER,
    ),
    bundled(
        "pyarrow",
        "consumer",
        "adapters/pyarrow.py",
        Place::Adapter,
        PY_ADAPTER,
    ),
    bundled(
        "polars",
        "producer",
        "adapters/polars.py",
        Place::Adapter,
        PY_ADAPTER,
    ),
    bundled(
        "polars",
        "consumer",
        "adapters/polars.py",
        Place::Adapter,
        PY_ADAPTER,
    ),
    bundled(
        "duckdb",
        "producer",
        "adapters/duckdb.py",
        Place::Adapter,
        DUCKDB_ADAPTER,
    ),
    bundled(
        "duckdb",
        "consumer",
        "adapters/duckdb.py",
        Place::Adapter,
        DUCKDB_ADAPTER,
    ),
    // Variants (docs/PYTHON_ADAPTERS.md, "Variants"): other objects and
    // settings of the same libraries, each certified on its own (no pairs).
    bundled(
        "pyarrow[array]",
        "producer",
        "adapters/pyarrow.py#array",
        Place::Adapter,
        PY_ADAPTER,
    ),
    bundled(
        "pyarrow[array]",
        "consumer",
        "adapters/pyarrow.py#array",
        Place::Adapter,
        PY_ADAPTER,
    ),
    bundled(
        "pyarrow[reader]",
        "producer",
        "adapters/pyarrow.py#reader",
        Place::Adapter,
        PY_ADAPTER,
    ),
    bundled(
        "pyarrow[reader]",
        "consumer",
        "adapters/pyarrow.py#reader",
        Place::Adapter,
        PY_ADAPTER,
    ),
    bundled(
        "polars[series]",
        "producer",
        "adapters/polars.py#series",
        Place::Adapter,
        PY_ADAPTER,
    ),
    bundled(
        "polars[series]",
        "consumer",
        "adapters/polars.py#series",
        Place::Adapter,
        PY_ADAPTER,
    ),
    bundled(
        "duckdb[string-view]",
        "producer",
        "adapters/duckdb.py#string-view",
        Place::Adapter,
        DUCKDB_ADAPTER,
    ),
    bundled(
        "duckdb[list-view]",
        "producer",
        "adapters/duckdb.py#list-view",
        Place::Adapter,
        DUCKDB_ADAPTER,
    ),
    bundled(
        "duckdb[large-buffers]",
        "producer",
        "adapters/duckdb.py#large-buffers",
        Place::Adapter,
        DUCKDB_ADAPTER,
    ),
    bundled(
        "duckdb[lossless]",
        "producer",
        "adapters/duckdb.py#lossless",
        Place::Adapter,
        DUCKDB_ADAPTER,
    ),
    bundled(
        "nanoarrow-python",
        "producer",
        "adapters/nanoarrow_python.py",
        Place::Adapter,
        PY_ADAPTER,
    ),
    bundled(
        "nanoarrow-python",
        "consumer",
        "adapters/nanoarrow_python.py",
        Place::Adapter,
        PY_ADAPTER,
    ),
    bundled(
        "arro3",
        "producer",
        "adapters/arro3.py",
        Place::Adapter,
        PY_ADAPTER,
    ),
    bundled(
        "arro3",
        "consumer",
        "adapters/arro3.py",
        Place::Adapter,
        PY_ADAPTER,
    ),
    bundled(
        "pandas",
        "producer",
        "adapters/pandas.py",
        Place::Adapter,
        PANDAS_ADAPTER,
    ),
    bundled(
        "pandas",
        "consumer",
        "adapters/pandas.py",
        Place::Adapter,
        PANDAS_ADAPTER,
    ),
    bundled(
        "datafusion",
        "producer",
        "adapters/datafusion.py",
        Place::Adapter,
        PY_ADAPTER,
    ),
    bundled(
        "datafusion",
        "consumer",
        "adapters/datafusion.py",
        Place::Adapter,
        PY_ADAPTER,
    ),
    bundled(
        "pyogrio",
        "producer",
        "adapters/pyogrio.py",
        Place::Adapter,
        PYOGRIO_ADAPTER,
    ),
    bundled(
        "pyogrio",
        "consumer",
        "adapters/pyogrio.py",
        Place::Adapter,
        PYOGRIO_ADAPTER,
    ),
    bundled(
        "sqlite-adbc",
        "producer",
        "adbc_driver_sqlite/libadbc_driver_sqlite.so:AdbcDriverInit",
        Place::Adbc,
        ADBC_ADAPTER,
    ),
    bundled(
        "sqlite-adbc",
        "consumer",
        "adbc_driver_sqlite/libadbc_driver_sqlite.so:AdbcDriverInit",
        Place::Adbc,
        ADBC_ADAPTER,
    ),
    bundled(
        "duckdb-adbc",
        "producer",
        "_duckdb.cpython-*.so:duckdb_adbc_init",
        Place::Adbc,
        ADBC_ADAPTER,
    ),
    bundled(
        "duckdb-adbc",
        "consumer",
        "_duckdb.cpython-*.so:duckdb_adbc_init",
        Place::Adbc,
        ADBC_ADAPTER,
    ),
    bundled(
        "postgresql-adbc",
        "producer",
        "adbc_driver_postgresql/libadbc_driver_postgresql.so:AdbcDriverInit",
        Place::Adbc,
        ADBC_ADAPTER,
    ),
    bundled(
        "postgresql-adbc",
        "consumer",
        "adbc_driver_postgresql/libadbc_driver_postgresql.so:AdbcDriverInit",
        Place::Adbc,
        ADBC_ADAPTER,
    ),
];

/// The bundled plugin called `name` in `role`, if any.
pub fn bundled_plugin(name: &str, role: &str) -> Option<&'static Bundled> {
    BUNDLED.iter().find(|b| b.name == name && b.role == role)
}

impl Bundled {
    /// Whether its library (or adapter file, a variant's `#NAME` aside)
    /// is there.
    pub fn exists(&self) -> bool {
        let path = self.location();
        if self.place == Place::Adapter {
            let text = path.to_string_lossy();
            let file = text.rsplit_once('#').map_or(&*text, |(f, _)| f);
            return Path::new(file).exists();
        }
        path.exists()
    }

    /// Where this plugin's library is expected: the first of
    /// [`Bundled::candidates`] that is there (the first when none is), or
    /// for a `py:` adapter the file this binary carries.
    pub fn location(&self) -> PathBuf {
        let all = self.candidates();
        all.iter()
            .find(|p| p.exists())
            .unwrap_or(&all[0])
            .to_path_buf()
    }

    /// Every place this plugin's library is looked for, in order: beside the
    /// running executable, then `<exe dir>/../lib/arrowcert/` (an install
    /// with its plugins beside it); `target/real/lib/` for real-library
    /// adapters (found from the executable's directory, `target/<profile>/`);
    /// a bundled `py:` adapter is the file this binary carries (`assets`),
    /// `#VARIANT` kept.
    pub fn candidates(&self) -> Vec<PathBuf> {
        let dir = std::env::current_exe()
            .ok()
            .and_then(|p| p.parent().map(Path::to_path_buf))
            .unwrap_or_default();
        match self.place {
            Place::Workspace => vec![
                dir.join(self.file),
                dir.join("..").join("lib").join("arrowcert").join(self.file),
            ],
            Place::Adapter => {
                let (file, variant) = self
                    .file
                    .split_once('#')
                    .map_or((self.file, None), |(f, v)| (f, Some(v)));
                let path = crate::assets::path(file).unwrap_or_else(|_| PathBuf::from(file));
                let text = match variant {
                    Some(v) => format!("{}#{v}", path.display()),
                    None => path.display().to_string(),
                };
                vec![PathBuf::from(text)]
            }
            Place::Adbc => {
                let pattern = self.file.rsplit_once(':').map_or(self.file, |(f, _)| f);
                vec![crate::plugin::adbc::in_site_packages(pattern)
                    .unwrap_or_else(|| PathBuf::from(pattern))]
            }
            Place::Real => {
                let real = std::env::var_os("ARROWCERT_REAL_LIB")
                    .map(PathBuf::from)
                    .unwrap_or_else(|| dir.join("..").join("real").join("lib"));
                vec![real.join(self.file)]
            }
        }
    }
}

/// Where a plugin argument is turned into a library, in the order they are
/// asked: the first that claims the argument prepares it. `py:` and `adbc:`
/// by their prefix (docs/PYTHON_ADAPTERS.md, docs/ADBC.md), a path by its
/// shape, and any other argument is a bundled name.
pub const SOURCES: &[&dyn Source] = &[
    &crate::plugin::python::Python,
    &crate::plugin::adbc::Adbc,
    &crate::plugin::backend::file::File,
    &Named,
];

/// Resolves a plugin argument: `py:`/`adbc:` adapters, a path, or the short
/// name of a bundled plugin (`reference`, `arrow-cpp`, ...) found where it
/// is built ([`SOURCES`]).
pub fn resolve_plugin(arg: &str, role: &str) -> Result<PathBuf, String> {
    let source = SOURCES
        .iter()
        .find(|s| s.claims(arg))
        .copied()
        .unwrap_or(&Named);
    let spec = arg.strip_prefix(source.prefix()).unwrap_or(arg);
    source.prepare(spec, role)
}

/// A bundled plugin's short name: its library where it is built, or the
/// `py:` / `adbc:` copy for the adapter or driver it names.
pub struct Named;

impl Source for Named {
    fn prefix(&self) -> &'static str {
        ""
    }

    fn claims(&self, _arg: &str) -> bool {
        true
    }

    fn prepare(&self, arg: &str, role: &str) -> Result<PathBuf, String> {
        let entry = bundled_plugin(arg, role).ok_or_else(|| {
            let names: Vec<&str> = BUNDLED
                .iter()
                .filter(|b| b.role == role)
                .map(|b| b.name)
                .collect();
            format!(
                "{arg}: no such file, and not a bundled {role} (bundled: {})",
                names.join(", ")
            )
        })?;
        if entry.place == Place::Adapter {
            // The cache the carried adapters are written to must be there: say
            // why not, rather than that the adapter is missing.
            let file = entry.file.split('#').next().unwrap_or(entry.file);
            crate::assets::path(file)?;
        }
        let path = entry.location();
        if !entry.exists() {
            let how = match entry.place {
                Place::Workspace => {
                    "build it with `cargo build --workspace` (same profile as arrowcert)"
                }
                Place::Real | Place::Adapter | Place::Adbc => {
                    "build the real-library adapters with `just real` (scripts/real/build.sh)"
                }
            };
            let looked: Vec<String> = entry
                .candidates()
                .iter()
                .map(|p| p.display().to_string())
                .collect();
            return Err(format!(
                "bundled {role} `{arg}` not found (looked at {}): {how}",
                looked.join(" and ")
            ));
        }
        match entry.place {
            Place::Adapter => crate::plugin::python::Python.prepare(&path.to_string_lossy(), role),
            Place::Adbc => {
                let entrypoint = entry
                    .file
                    .rsplit_once(':')
                    .map_or("AdbcDriverInit", |(_, e)| e);
                let spec = format!("{}:{entrypoint}", path.display());
                crate::plugin::adbc::Adbc.prepare(&spec, role)
            }
            Place::Workspace | Place::Real => Ok(path),
        }
    }
}

/// The bundled DLPack adapters (`adapters/dlpack/<file>.py`), in the order
/// `dlpack-matrix` certifies them; a library's name is its file's stem with
/// `_` written `-`.
pub const DLPACK_BUNDLED: &[&str] = &["numpy", "pyarrow", "array_api_strict", "jax", "nanoarrow"];

/// The bundled DLPack adapters, by name, each as the `py:` argument of the
/// file this binary carries.
pub fn dlpack_bundled() -> Result<Vec<(String, String)>, String> {
    DLPACK_BUNDLED
        .iter()
        .map(|n| {
            let path = crate::assets::path(&format!("adapters/dlpack/{n}.py"))?;
            Ok((n.replace('_', "-"), format!("py:{}", path.display())))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checkout() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
    }

    #[test]
    fn a_name_is_bundled_once_per_role() {
        let mut seen = std::collections::BTreeSet::new();
        for b in BUNDLED {
            assert!(
                seen.insert((b.name, b.role)),
                "{} {} is bundled twice",
                b.role,
                b.name
            );
            assert!(matches!(b.role, "producer" | "consumer"), "{b:?}");
        }
    }

    #[test]
    fn every_bundled_adapter_is_a_file_of_the_checkout() {
        for b in BUNDLED.iter().filter(|b| b.place == Place::Adapter) {
            let file = b.file.split('#').next().unwrap();
            assert!(checkout().join(file).is_file(), "{}: {file}", b.name);
            assert!(!b.adapter.is_empty(), "{}: what its adapter writes", b.name);
        }
        for n in DLPACK_BUNDLED {
            let file = format!("adapters/dlpack/{n}.py");
            assert!(checkout().join(&file).is_file(), "{file}");
        }
    }

    #[test]
    fn a_plugin_argument_goes_to_the_source_its_prefix_or_shape_names() {
        let picked = |arg: &str| {
            SOURCES
                .iter()
                .position(|s| s.claims(arg))
                .expect("the last source claims every argument")
        };
        assert_eq!(picked("py:adapters/pyarrow.py"), 0);
        assert_eq!(picked("adbc:/x/libadbc_driver_sqlite.so"), 1);
        // A path: by its slash, by `.so`; before a bundled name.
        assert_eq!(picked("./libplugin.so"), 2);
        assert_eq!(picked("libplugin.so"), 2);
        assert_eq!(picked("reference"), 3);
        // What follows the prefix is what the source prepares.
        assert_eq!(
            resolve_plugin("py:", "producer").unwrap_err(),
            "py: needs an adapter file or module (py:adapters/pyarrow.py)"
        );
        let why = resolve_plugin("adbc:/no/such/driver.so", "consumer").unwrap_err();
        assert_eq!(
            why,
            "adbc:/no/such/driver.so: /no/such/driver.so: no such driver library"
        );
        assert_eq!(
            resolve_plugin("/no/such/plugin.so", "producer"),
            Ok(PathBuf::from("/no/such/plugin.so"))
        );
    }

    #[test]
    fn an_unknown_name_is_refused_with_the_names_bundled_in_its_role() {
        let why = resolve_plugin("nosuchplugin", "consumer").unwrap_err();
        assert!(
            why.starts_with(
                "nosuchplugin: no such file, and not a bundled consumer (bundled: reference, cuda-reference, arrow-rs,"
            ),
            "{why}"
        );
        assert!(
            !why.contains("duckdb[string-view]"),
            "a producer-only variant: {why}"
        );
    }
}

//! Loading plugins (PLUGIN_ABI.md, contract version 1) and calling them.
//!
//! This module and [`crate::abi`] are the only places that call into plugin
//! code. Every call passes structures the harness owns and keeps alive for
//! the duration of the call; whether the plugin then follows the contract is
//! exactly what arrowcert tests, and a plugin that crashes takes down only
//! the process running it (see ARCHITECTURE.md).

mod asynchronous;
mod consume;
mod entries;
mod produce;

pub use backend::native::{Canceller, LibraryObject};
pub use entries::*;

pub mod adbc;
pub mod backend;
pub mod elf;
pub mod integration;
pub mod interpreter;
pub mod python;
pub mod streamed;
pub mod tracker;

use std::ffi::{c_char, c_int, c_void, CStr};
use std::fmt;
use std::path::{Path, PathBuf};

use crate::abi::{
    ArrowArray, ArrowArrayStream, ArrowAsyncDeviceStreamHandler, ArrowDeviceArray,
    ArrowDeviceArrayStream, ArrowDeviceType, ArrowSchema,
};

/// The contract version this harness implements.
pub const ABI_VERSION: i32 = arrowcert_sdk::PLUGIN_ABI_VERSION;

/// Why a library could not be loaded as a plugin. Each prints as one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadError {
    NotFound(PathBuf),
    NotAFile(PathBuf),
    Unreadable(PathBuf, String),
    Elf(PathBuf, elf::ElfProblem),
    Dlopen(PathBuf, String),
    MissingIdentity(PathBuf, &'static str),
    AbiVersion(PathBuf, i32),
    NameNull(PathBuf),
    NameNotUtf8(PathBuf),
    /// An Arrow C data integration library with half a direction.
    IntegrationIncomplete(PathBuf, integration::Incomplete),
    /// The plugin could not set itself up (`arrowcert_plugin_load_error`):
    /// a Python adapter that does not import, say.
    Setup(PathBuf, String),
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadError::NotFound(p) => write!(f, "{}: no such file", p.display()),
            LoadError::NotAFile(p) => write!(f, "{}: not a file", p.display()),
            LoadError::Unreadable(p, e) => write!(f, "{}: cannot read: {e}", p.display()),
            LoadError::Elf(p, problem) => write!(f, "{}: {problem}", p.display()),
            LoadError::Dlopen(p, e) => write!(f, "{}: cannot load: {e}", p.display()),
            LoadError::MissingIdentity(p, sym) => write!(
                f,
                "{}: not an arrowcert plugin: required symbol `{sym}` is missing",
                p.display()
            ),
            LoadError::AbiVersion(p, v) => write!(
                f,
                "{}: plugin ABI version {v} is not supported (this harness implements version {ABI_VERSION})",
                p.display()
            ),
            LoadError::NameNull(p) => {
                write!(f, "{}: arrowcert_plugin_name() returned NULL", p.display())
            }
            LoadError::NameNotUtf8(p) => write!(
                f,
                "{}: arrowcert_plugin_name() is not valid UTF-8",
                p.display()
            ),
            LoadError::IntegrationIncomplete(p, why) => write!(f, "{}: {why}", p.display()),
            LoadError::Setup(p, why) => write!(
                f,
                "{}: the plugin could not set itself up: {}",
                p.display(),
                crate::report::bounded(why, 2000)
            ),
        }
    }
}

impl std::error::Error for LoadError {}

/// A failed call into a plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallError {
    /// The plugin does not export this entry point.
    Missing(&'static str),
    /// The entry point returned a non-zero errno value.
    Failed {
        entry: &'static str,
        code: c_int,
        message: Option<String>,
    },
}

impl CallError {
    /// True when the plugin declined the call rather than failing it: the
    /// entry point is not exported, or it returned ENOSYS (the contract's
    /// "cannot honour"). Certification and roundtrips skip such cases.
    pub fn declined(&self) -> bool {
        matches!(
            self,
            CallError::Missing(_)
                | CallError::Failed {
                    code: libc::ENOSYS,
                    ..
                }
        )
    }

    /// The errno value, if the call ran and failed.
    pub fn code(&self) -> Option<c_int> {
        match self {
            CallError::Failed { code, .. } => Some(*code),
            CallError::Missing(_) => None,
        }
    }
}

/// What a consumer's failed call means, by the plugin contract and the
/// spec's permissions (PLUGIN_ABI.md): one reading, for certification and
/// roundtrips alike.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The entry point is not exported, or the built-in integration
    /// adapter could not express the data: nothing was handed over.
    Skip(String),
    /// A clean refusal with a message (or the contract's bare ENOSYS):
    /// "Consumers MAY decide not to support ...".
    Limitation(String),
    /// No word of why, or the library failed inside itself
    /// (ENOTRECOVERABLE: a panic a binding caught, an internal error).
    Error(String),
}

impl CallError {
    /// How a consumer's failure reads ([`Refusal`]).
    pub fn refusal(&self) -> Refusal {
        match self {
            CallError::Missing(_) => Refusal::Skip(self.to_string()),
            CallError::Failed {
                message: Some(m), ..
            } if m.starts_with(integration::CANNOT_HAND_OVER) => {
                Refusal::Skip(format!("not handed over: {m}"))
            }
            CallError::Failed {
                code: libc::ENOTRECOVERABLE,
                ..
            } => Refusal::Error(format!(
                "the library failed inside itself (ENOTRECOVERABLE: a panic or an internal error, not a refusal of the data): {self}"
            )),
            CallError::Failed {
                entry,
                code,
                message,
            } => {
                let said = message.as_deref().map(str::trim).filter(|m| !m.is_empty());
                match (said, *code) {
                    (Some(m), code) => Refusal::Limitation(format!(
                        "the consumer declined ({entry} returned {} ({code})): {m}",
                        errno_name(code)
                    )),
                    (None, libc::ENOSYS) => Refusal::Limitation(format!(
                        "the consumer declined ({entry} returned ENOSYS (38)) with no message (the plugin contract's \"cannot honour\")"
                    )),
                    (None, _) => Refusal::Error(format!(
                        "the consumer refused the input with {self} and gave no message; a refusal the spec permits is a limitation when the consumer says why"
                    )),
                }
            }
        }
    }
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallError::Missing(e) => write!(f, "{e} {}", crate::report::outcome::NOT_EXPORTED),
            CallError::Failed {
                entry,
                code,
                message,
            } => {
                write!(f, "{entry} returned {} ({code})", errno_name(*code))?;
                if let Some(m) = message {
                    write!(f, ": {m}")?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for CallError {}

/// The symbolic name of an errno value.
pub fn errno_name(code: c_int) -> &'static str {
    match code {
        libc::EINVAL => "EINVAL",
        libc::ENOMEM => "ENOMEM",
        libc::EIO => "EIO",
        libc::ENOSYS => "ENOSYS",
        libc::ETIMEDOUT => "ETIMEDOUT",
        libc::EAGAIN => "EAGAIN",
        libc::ECANCELED => "ECANCELED",
        libc::ENOENT => "ENOENT",
        libc::EPERM => "EPERM",
        _ => "errno",
    }
}

/// A loaded plugin.
///
/// The library is never unloaded: plugins start threads (async producers)
/// and register thread-local destructors that must not outlive their code,
/// so `dlclose` is never safe to call on a library under test.
pub struct Plugin {
    path: PathBuf,
    name: String,
    abi_version: i32,
    symbols: Vec<&'static str>,
    /// What the calls go to: the library's own entry points, or the
    /// built-in adapter in front of it.
    backend: Box<dyn backend::Backend>,
}

impl fmt::Debug for Plugin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Plugin")
            .field("path", &self.path)
            .field("name", &self.name)
            .field("abi_version", &self.abi_version)
            .field("symbols", &self.symbols)
            .field("backend", &self.backend)
            .finish()
    }
}

/// Looks up `name` and copies the function pointer out.
///
/// # Safety
/// `F` must be the function pointer type the contract declares for `name`.
unsafe fn lookup<F: Copy>(lib: &libloading::Library, name: &str) -> Option<F> {
    let mut sym = name.as_bytes().to_vec();
    sym.push(0);
    // SAFETY: the caller guarantees F is the declared type; the library is
    // leaked (never unloaded), so the copied pointer stays valid.
    unsafe { lib.get::<F>(&sym).ok().map(|s| *s) }
}

impl Plugin {
    /// Loads the library at `path` and checks its identity.
    pub fn load(path: &Path) -> Result<Plugin, LoadError> {
        let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => LoadError::NotFound(path.to_path_buf()),
            _ => LoadError::Unreadable(path.to_path_buf(), e.to_string()),
        })?;
        if !meta.is_file() {
            return Err(LoadError::NotAFile(path.to_path_buf()));
        }
        match elf::check(path) {
            Err(e) => return Err(LoadError::Unreadable(path.to_path_buf(), e.to_string())),
            Ok(Err(problem)) => return Err(LoadError::Elf(path.to_path_buf(), problem)),
            Ok(Ok(())) => {}
        }
        // dlopen needs a path with a slash, or it searches the library path.
        let abs = if path.is_absolute() {
            path.to_path_buf()
        } else {
            std::env::current_dir()
                .map(|d| d.join(path))
                .unwrap_or_else(|_| path.to_path_buf())
        };
        // A Python bridge copy has Python's symbols undefined: its
        // interpreter's libpython first.
        interpreter::preload_for(&abs).map_err(|e| LoadError::Dlopen(path.to_path_buf(), e))?;
        // SAFETY: loading a library runs its initialisers, which is inherent
        // to testing it; RTLD_NOW resolves every symbol up front so that a
        // library with unresolved dependencies fails here, with dlerror's
        // message, instead of at its first call.
        let lib = unsafe {
            libloading::os::unix::Library::open(
                Some(&abs),
                libloading::os::unix::RTLD_NOW | libloading::os::unix::RTLD_LOCAL,
            )
        }
        .map_err(|e| LoadError::Dlopen(path.to_path_buf(), dl_message(&e)))?;
        let lib: libloading::Library = lib.into();

        // A plugin that could not set itself up says why: bad input.
        // SAFETY: the declared type of the optional symbol.
        let setup: Option<NameFn> = unsafe { lookup(&lib, "arrowcert_plugin_load_error") };
        if let Some(setup) = setup {
            // SAFETY: no arguments; NULL or a NUL-terminated string.
            let p = unsafe { setup() };
            if !p.is_null() {
                let bytes =
                    crate::inspect::probe::c_string_at(p as usize, 4096).unwrap_or_default();
                return Err(LoadError::Setup(
                    path.to_path_buf(),
                    String::from_utf8_lossy(&bytes).into_owned(),
                ));
            }
        }
        // A plugin configured at run time (the Python adapter bridge) says
        // which of its entry points it serves; absent, every one it exports.
        // SAFETY: the declared type of the optional symbol.
        let offers_fn: Option<OffersFn> = unsafe { lookup(&lib, "arrowcert_plugin_offers") };
        let offered = |name: &str| -> bool {
            let Some(f) = offers_fn else { return true };
            let Ok(c) = std::ffi::CString::new(name) else {
                return false;
            };
            // SAFETY: a NUL-terminated string valid for the call.
            unsafe { f(c.as_ptr()) != 0 }
        };
        let exported = |name: &str| -> bool {
            // SAFETY: only existence is checked; the pointer is not called.
            unsafe { lookup::<*const c_void>(&lib, name) }.is_some()
        };
        let mut symbols = Vec::new();
        for (name, role) in SYMBOLS {
            // An entry point served through its stream variant counts as
            // offered: the harness calls the variant on its behalf.
            let variant = STREAM_VARIANTS
                .iter()
                .find(|(_, of)| of == name)
                .is_some_and(|(v, _)| exported(v));
            let serves = matches!(role, Role::Producer | Role::Consumer);
            if (exported(name) || variant) && (!serves || offered(name)) {
                symbols.push(*name);
            }
        }
        // SAFETY: (all lookups below) each F is the type PLUGIN_ABI.md
        // declares for that symbol (mirrored in arrowcert_plugin.h).
        let abi_fn: Option<AbiVersionFn> = unsafe { lookup(&lib, "arrowcert_plugin_abi_version") };
        let Some(abi_fn) = abi_fn else {
            // Not a plugin: perhaps one of Arrow's C data integration
            // libraries, which the built-in adapter presents as one.
            return match integration::detect(&lib) {
                Ok(Some(library)) => {
                    // Never unloaded: see the type's documentation.
                    std::mem::forget(lib);
                    Ok(Plugin::adapted(path, library))
                }
                Ok(None) => Err(LoadError::MissingIdentity(
                    path.to_path_buf(),
                    "arrowcert_plugin_abi_version",
                )),
                Err(why) => Err(LoadError::IntegrationIncomplete(path.to_path_buf(), why)),
            };
        };
        // SAFETY: as above.
        let name_fn: NameFn = unsafe { lookup(&lib, "arrowcert_plugin_name") }.ok_or(
            LoadError::MissingIdentity(path.to_path_buf(), "arrowcert_plugin_name"),
        )?;
        // SAFETY: a required identity function of the contract, no arguments.
        let abi_version = unsafe { abi_fn() };
        if abi_version != ABI_VERSION {
            return Err(LoadError::AbiVersion(path.to_path_buf(), abi_version));
        }
        // SAFETY: as above; the contract says it returns a static string.
        let name_ptr = unsafe { name_fn() };
        if name_ptr.is_null() {
            return Err(LoadError::NameNull(path.to_path_buf()));
        }
        // SAFETY: non-NULL, and the contract makes it a static NUL-terminated
        // string.
        let name = unsafe { CStr::from_ptr(name_ptr) }
            .to_str()
            .map_err(|_| LoadError::NameNotUtf8(path.to_path_buf()))?
            .to_string();

        let backend = backend::native::Native::resolve(&lib, &symbols);
        // The emulated device (harness/include/arrowcert_emulated_device.h):
        // a plugin that exports the entry point gets the process's device.
        // SAFETY: the symbol's declared type.
        let attach: Option<AttachEmulatedFn> =
            unsafe { lookup(&lib, "arrowcert_plugin_attach_emulated_device") };
        if let Some(attach) = attach {
            // SAFETY: the table is a static that outlives the plugin; the
            // call takes nothing else.
            let rc = unsafe { attach(&crate::device::emulated_ffi::TABLE) };
            if rc != 0 {
                return Err(LoadError::Dlopen(
                    path.to_path_buf(),
                    format!("arrowcert_plugin_attach_emulated_device returned {rc}"),
                ));
            }
        }
        // Never unloaded: see the type's documentation.
        std::mem::forget(lib);
        Ok(Plugin {
            path: path.to_path_buf(),
            name,
            abi_version,
            symbols,
            backend: Box::new(backend),
        })
    }

    /// An integration library behind the built-in adapter, presented as
    /// the contract's symbols the adapter implements on its behalf
    /// ([`integration::Library::symbols`]).
    fn adapted(path: &Path, library: integration::Library) -> Plugin {
        Plugin {
            path: path.to_path_buf(),
            name: library.name(),
            abi_version: ABI_VERSION,
            symbols: library.symbols(),
            backend: Box::new(library),
        }
    }

    /// The library's own symbols a built-in adapter calls on the
    /// contract's behalf (`None`: the library exports the contract).
    pub fn adapts(&self) -> Option<Vec<&'static str>> {
        self.backend.adapts()
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn abi_version(&self) -> i32 {
        self.abi_version
    }
    /// The contract's symbols this library exports, in contract order.
    pub fn symbols(&self) -> &[&'static str] {
        &self.symbols
    }
    pub fn has(&self, symbol: &str) -> bool {
        self.symbols.contains(&symbol)
    }
    pub fn is_producer(&self) -> bool {
        self.symbols
            .iter()
            .any(|s| SYMBOLS.iter().any(|(n, r)| n == s && *r == Role::Producer))
    }
    pub fn is_consumer(&self) -> bool {
        self.symbols
            .iter()
            .any(|s| SYMBOLS.iter().any(|(n, r)| n == s && *r == Role::Consumer))
    }

    /// Whether the plugin claims `device_type`. Absent symbol: CPU only.
    pub fn supports_device(&self, device_type: ArrowDeviceType) -> bool {
        self.backend.supports_device(device_type)
    }

    /// The plugin's own count of bytes it holds, if it exports one.
    pub fn bytes_allocated(&self) -> Option<i64> {
        self.backend.bytes_allocated()
    }
}

/// Releases a structure the harness handed over or was handed that is
/// still live after the call (the plugin did not take it, or the call
/// failed before it did).
fn release_if_live<T: crate::abi::ops::Owned>(x: &mut T) {
    if !x.is_released() {
        x.release();
    }
}

fn dl_message(e: &libloading::Error) -> String {
    use std::error::Error;
    match e.source() {
        Some(s) => s.to_string(),
        None => e.to_string(),
    }
}

//! Loading plugins (PLUGIN_ABI.md, contract version 1) and calling them.
//!
//! This module and [`crate::abi`] are the only places that call into plugin
//! code. Every call passes structures the harness owns and keeps alive for
//! the duration of the call; whether the plugin then follows the contract is
//! exactly what arrowcert tests, and a plugin that crashes takes down only
//! the process running it (see ARCHITECTURE.md).

pub mod adbc;
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

/// A library object a producer made (`arrowcert_produce_object`): each
/// [`export`](Self::export) is one more export of that same object; the
/// object is released (`arrowcert_release_object`) when this is dropped.
pub struct LibraryObject<'a> {
    plugin: &'a Plugin,
    handle: *mut c_void,
    export: ExportObjectFn,
    release: ReleaseObjectFn,
}

impl LibraryObject<'_> {
    /// One more array export of the object into `out`.
    pub fn export(&self, out: &mut ArrowArray) -> Result<(), CallError> {
        const E: &str = "arrowcert_export_object";
        crate::abi::breadcrumb::step(E);
        let f = self.export;
        let handle = self.handle;
        // SAFETY: `handle` is what arrowcert_produce_object returned and is
        // not released yet; `out` is a slot of the out-structure arena.
        let rc = crate::abi::outslot::call(E, out, |out| unsafe { f(handle, out) });
        self.plugin.check(E, rc)
    }
}

impl Drop for LibraryObject<'_> {
    fn drop(&mut self) {
        crate::abi::breadcrumb::step("arrowcert_release_object");
        // SAFETY: the handle arrowcert_produce_object returned, released
        // once, here.
        unsafe { (self.release)(self.handle) };
    }
}

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

/// Asks an async consumer to stop reading a stream, as a user dropping its
/// reader would: `arrowcert_consume_async_cancel(token)`, where the
/// consumer calls the producer's cancel.
#[derive(Clone, Copy)]
pub struct Canceller {
    f: ConsumeAsyncCancelFn,
    token: usize,
}

impl Canceller {
    /// Calls it (from any thread but a handler callback's); the consumer's
    /// return code.
    pub fn cancel(&self) -> c_int {
        crate::abi::breadcrumb::step("arrowcert_consume_async_cancel");
        // SAFETY: the plugin's own symbol, with the declared signature; the
        // token came from its consume_async_start, and the caller calls this
        // before that token's finish returned (the harness's producer calls
        // it while it still drives the stream).
        unsafe { (self.f)(self.token as *mut c_void) }
    }
}

type AbiVersionFn = unsafe extern "C" fn() -> i32;
type NameFn = unsafe extern "C" fn() -> *const c_char;
type SupportsDeviceFn = unsafe extern "C" fn(i32) -> i32;
type BytesAllocatedFn = unsafe extern "C" fn() -> i64;
type LastErrorFn = unsafe extern "C" fn() -> *const c_char;
type FreeFn = unsafe extern "C" fn(*mut c_void);
type ProduceSchemaFn = unsafe extern "C" fn(*const u8, i64, *mut ArrowSchema) -> c_int;
type ProduceDeviceArrayFn =
    unsafe extern "C" fn(*const u8, i64, i64, i64, i64, i32, i64, *mut ArrowDeviceArray) -> c_int;
type ProduceDeviceStreamFn =
    unsafe extern "C" fn(*const u8, i64, i32, i64, *mut ArrowDeviceArrayStream) -> c_int;
type ProduceAsyncFn =
    unsafe extern "C" fn(*const u8, i64, i32, i64, *mut ArrowAsyncDeviceStreamHandler) -> c_int;
type ProduceArrayFn = unsafe extern "C" fn(*const u8, i64, i64, i64, i64, *mut ArrowArray) -> c_int;
type ProduceStreamFn = unsafe extern "C" fn(*const u8, i64, *mut ArrowArrayStream) -> c_int;
type ProduceSlicedStreamFn =
    unsafe extern "C" fn(*const u8, i64, i64, i64, *mut ArrowArrayStream) -> c_int;
type ProduceSlicedDeviceStreamFn =
    unsafe extern "C" fn(*const u8, i64, i64, i64, i32, i64, *mut ArrowDeviceArrayStream) -> c_int;
type ProduceSlicedAsyncFn = unsafe extern "C" fn(
    *const u8,
    i64,
    i64,
    i64,
    i32,
    i64,
    *mut ArrowAsyncDeviceStreamHandler,
) -> c_int;
type ProduceSlicedStreamS =
    unsafe extern "C" fn(*mut ArrowArrayStream, i64, i64, *mut ArrowArrayStream) -> c_int;
type ProduceSlicedDeviceStreamS = unsafe extern "C" fn(
    *mut ArrowArrayStream,
    i64,
    i64,
    i32,
    i64,
    *mut ArrowDeviceArrayStream,
) -> c_int;
type ProduceObjectFn =
    unsafe extern "C" fn(*const u8, i64, i64, i64, i64, *mut *mut c_void) -> c_int;
type ProduceObjectS = unsafe extern "C" fn(*mut ArrowArrayStream, *mut *mut c_void) -> c_int;
type ExportObjectFn = unsafe extern "C" fn(*mut c_void, *mut ArrowArray) -> c_int;
type ReleaseObjectFn = unsafe extern "C" fn(*mut c_void);
type ProduceArraySchemaFn =
    unsafe extern "C" fn(*const u8, i64, i64, i64, i64, *mut ArrowSchema) -> c_int;
type ConsumeDeviceArrayFn =
    unsafe extern "C" fn(*mut ArrowSchema, *mut ArrowDeviceArray, *mut *mut u8, *mut i64) -> c_int;
type ConsumeDeviceStreamFn =
    unsafe extern "C" fn(*mut ArrowDeviceArrayStream, *mut *mut u8, *mut i64) -> c_int;
type ConsumeArrayFn =
    unsafe extern "C" fn(*mut ArrowSchema, *mut ArrowArray, *mut *mut u8, *mut i64) -> c_int;
type ConsumeStreamFn = unsafe extern "C" fn(*mut ArrowArrayStream, *mut *mut u8, *mut i64) -> c_int;
type ConsumeAsyncStartFn =
    unsafe extern "C" fn(*mut ArrowAsyncDeviceStreamHandler, *mut *mut c_void) -> c_int;
type AttachEmulatedFn =
    unsafe extern "C" fn(*const crate::device::emulated_ffi::ArrowcertEmulatedDevice) -> c_int;
type ConsumeAsyncFinishFn = unsafe extern "C" fn(*mut c_void, i64, *mut *mut u8, *mut i64) -> c_int;
type ConsumeAsyncCancelFn = unsafe extern "C" fn(*mut c_void) -> c_int;
type OffersFn = unsafe extern "C" fn(*const c_char) -> i32;
type ProduceSchemaS = unsafe extern "C" fn(*mut ArrowArrayStream, *mut ArrowSchema) -> c_int;
type ProduceArrayS = unsafe extern "C" fn(*mut ArrowArrayStream, *mut ArrowArray) -> c_int;
type ProduceArraySchemaS = unsafe extern "C" fn(*mut ArrowArrayStream, *mut ArrowSchema) -> c_int;
type ProduceDeviceArrayS =
    unsafe extern "C" fn(*mut ArrowArrayStream, i32, i64, *mut ArrowDeviceArray) -> c_int;
type ProduceStreamS = unsafe extern "C" fn(*mut ArrowArrayStream, *mut ArrowArrayStream) -> c_int;
type ProduceDeviceStreamS =
    unsafe extern "C" fn(*mut ArrowArrayStream, i32, i64, *mut ArrowDeviceArrayStream) -> c_int;
type ConsumeArrayS =
    unsafe extern "C" fn(*mut ArrowSchema, *mut ArrowArray, *mut ArrowArrayStream) -> c_int;
type ConsumeDeviceArrayS =
    unsafe extern "C" fn(*mut ArrowSchema, *mut ArrowDeviceArray, *mut ArrowArrayStream) -> c_int;
type ConsumeStreamS = unsafe extern "C" fn(*mut ArrowArrayStream, *mut ArrowArrayStream) -> c_int;
type ConsumeDeviceStreamS =
    unsafe extern "C" fn(*mut ArrowDeviceArrayStream, *mut ArrowArrayStream) -> c_int;

/// Each stream variant, and the entry point of the contract it serves.
pub const STREAM_VARIANTS: &[(&str, &str)] = &[
    (
        "arrowcert_produce_schema_from_stream",
        "arrowcert_produce_schema",
    ),
    (
        "arrowcert_produce_device_array_from_stream",
        "arrowcert_produce_device_array",
    ),
    (
        "arrowcert_produce_device_stream_from_stream",
        "arrowcert_produce_device_stream",
    ),
    (
        "arrowcert_produce_array_from_stream",
        "arrowcert_produce_array",
    ),
    (
        "arrowcert_produce_stream_from_stream",
        "arrowcert_produce_stream",
    ),
    (
        "arrowcert_produce_array_schema_from_stream",
        "arrowcert_produce_array_schema",
    ),
    (
        "arrowcert_produce_object_from_stream",
        "arrowcert_produce_object",
    ),
    (
        "arrowcert_produce_sliced_stream_from_stream",
        "arrowcert_produce_sliced_stream",
    ),
    (
        "arrowcert_produce_sliced_device_stream_from_stream",
        "arrowcert_produce_sliced_device_stream",
    ),
    (
        "arrowcert_consume_device_array_to_stream",
        "arrowcert_consume_device_array",
    ),
    (
        "arrowcert_consume_device_stream_to_stream",
        "arrowcert_consume_device_stream",
    ),
    (
        "arrowcert_consume_array_to_stream",
        "arrowcert_consume_array",
    ),
    (
        "arrowcert_consume_stream_to_stream",
        "arrowcert_consume_stream",
    ),
];

/// Every symbol of the contract, in the order `inspect` lists them, with the
/// role it belongs to.
pub const SYMBOLS: &[(&str, Role)] = &[
    ("arrowcert_plugin_abi_version", Role::Identity),
    ("arrowcert_plugin_name", Role::Identity),
    ("arrowcert_plugin_supports_device", Role::Optional),
    ("arrowcert_plugin_attach_emulated_device", Role::Optional),
    ("arrowcert_bytes_allocated", Role::Optional),
    ("arrowcert_last_error", Role::Optional),
    ("arrowcert_free", Role::Optional),
    ("arrowcert_produce_schema", Role::Producer),
    ("arrowcert_produce_device_array", Role::Producer),
    ("arrowcert_produce_device_stream", Role::Producer),
    ("arrowcert_produce_async", Role::Producer),
    ("arrowcert_produce_array", Role::Producer),
    ("arrowcert_produce_stream", Role::Producer),
    ("arrowcert_consume_device_array", Role::Consumer),
    ("arrowcert_consume_device_stream", Role::Consumer),
    ("arrowcert_consume_array", Role::Consumer),
    ("arrowcert_consume_stream", Role::Consumer),
    ("arrowcert_consume_async_start", Role::Consumer),
    ("arrowcert_consume_async_finish", Role::Consumer),
    ("arrowcert_consume_async_cancel", Role::Optional),
    ("arrowcert_plugin_offers", Role::Optional),
    ("arrowcert_plugin_load_error", Role::Optional),
    ("arrowcert_produce_array_schema", Role::Optional),
    ("arrowcert_produce_object", Role::Optional),
    ("arrowcert_export_object", Role::Optional),
    ("arrowcert_release_object", Role::Optional),
    ("arrowcert_consume_values", Role::Optional),
    // Optional like the three above, but served (offered) like the paths:
    // the sliced stream cases (docs/PLUGIN_ABI.md, "Slices of a stream").
    ("arrowcert_produce_sliced_stream", Role::Producer),
    ("arrowcert_produce_sliced_device_stream", Role::Producer),
    ("arrowcert_produce_sliced_async", Role::Producer),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Identity,
    Optional,
    Producer,
    Consumer,
}

#[derive(Default, Clone, Copy)]
struct Entries {
    supports_device: Option<SupportsDeviceFn>,
    bytes_allocated: Option<BytesAllocatedFn>,
    last_error: Option<LastErrorFn>,
    free: Option<FreeFn>,
    produce_schema: Option<ProduceSchemaFn>,
    produce_device_array: Option<ProduceDeviceArrayFn>,
    produce_device_stream: Option<ProduceDeviceStreamFn>,
    produce_async: Option<ProduceAsyncFn>,
    produce_array: Option<ProduceArrayFn>,
    produce_stream: Option<ProduceStreamFn>,
    produce_array_schema: Option<ProduceArraySchemaFn>,
    produce_object: Option<ProduceObjectFn>,
    export_object: Option<ExportObjectFn>,
    release_object: Option<ReleaseObjectFn>,
    produce_sliced_stream: Option<ProduceSlicedStreamFn>,
    produce_sliced_device_stream: Option<ProduceSlicedDeviceStreamFn>,
    produce_sliced_async: Option<ProduceSlicedAsyncFn>,
    consume_device_array: Option<ConsumeDeviceArrayFn>,
    consume_device_stream: Option<ConsumeDeviceStreamFn>,
    consume_array: Option<ConsumeArrayFn>,
    consume_stream: Option<ConsumeStreamFn>,
    consume_async_start: Option<ConsumeAsyncStartFn>,
    consume_async_finish: Option<ConsumeAsyncFinishFn>,
    consume_async_cancel: Option<ConsumeAsyncCancelFn>,
    /// An independent view of what the last consume call read (JSON).
    consume_values: Option<LastErrorFn>,
    /// The stream variants ([`streamed`]): data in as a stream, what was
    /// read back as a stream.
    produce_schema_s: Option<ProduceSchemaS>,
    produce_array_s: Option<ProduceArrayS>,
    produce_array_schema_s: Option<ProduceArraySchemaS>,
    produce_object_s: Option<ProduceObjectS>,
    produce_device_array_s: Option<ProduceDeviceArrayS>,
    produce_stream_s: Option<ProduceStreamS>,
    produce_device_stream_s: Option<ProduceDeviceStreamS>,
    produce_sliced_stream_s: Option<ProduceSlicedStreamS>,
    produce_sliced_device_stream_s: Option<ProduceSlicedDeviceStreamS>,
    consume_array_s: Option<ConsumeArrayS>,
    consume_device_array_s: Option<ConsumeDeviceArrayS>,
    consume_stream_s: Option<ConsumeStreamS>,
    consume_device_stream_s: Option<ConsumeDeviceStreamS>,
}

impl Entries {
    /// Drops the entry points (and their stream variants) not in
    /// `offered`: those the plugin said it does not serve.
    fn mask(&mut self, offered: &[&str]) {
        let on = |name: &str| offered.contains(&name);
        macro_rules! keep {
            ($name:literal, $($field:ident),+) => {
                if !on($name) {
                    $(self.$field = None;)+
                }
            };
        }
        keep!("arrowcert_produce_schema", produce_schema, produce_schema_s);
        // The schema that comes with an array export is the array entry
        // point's: served with it.
        keep!(
            "arrowcert_produce_array",
            produce_array,
            produce_array_s,
            produce_array_schema,
            produce_array_schema_s,
            produce_object,
            produce_object_s
        );
        keep!(
            "arrowcert_produce_device_array",
            produce_device_array,
            produce_device_array_s
        );
        keep!("arrowcert_produce_stream", produce_stream, produce_stream_s);
        keep!(
            "arrowcert_produce_device_stream",
            produce_device_stream,
            produce_device_stream_s
        );
        keep!("arrowcert_produce_async", produce_async);
        keep!(
            "arrowcert_produce_sliced_stream",
            produce_sliced_stream,
            produce_sliced_stream_s
        );
        keep!(
            "arrowcert_produce_sliced_device_stream",
            produce_sliced_device_stream,
            produce_sliced_device_stream_s
        );
        keep!("arrowcert_produce_sliced_async", produce_sliced_async);
        keep!("arrowcert_consume_array", consume_array, consume_array_s);
        keep!(
            "arrowcert_consume_device_array",
            consume_device_array,
            consume_device_array_s
        );
        keep!("arrowcert_consume_stream", consume_stream, consume_stream_s);
        keep!(
            "arrowcert_consume_device_stream",
            consume_device_stream,
            consume_device_stream_s
        );
        keep!("arrowcert_consume_async_start", consume_async_start);
        keep!("arrowcert_consume_async_finish", consume_async_finish);
    }

    fn last_error(&self) -> Option<String> {
        let f = self.last_error?;
        // SAFETY: declared type, no arguments; the result is NULL or a
        // NUL-terminated string valid until the next call on this thread.
        let p = unsafe { f() };
        if p.is_null() {
            return None;
        }
        // SAFETY: non-NULL and NUL-terminated per the contract; copied at once.
        Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
    }

    fn take_output(&self, ptr: *mut u8, len: i64) -> Vec<u8> {
        if ptr.is_null() || len <= 0 {
            if !ptr.is_null() {
                if let Some(free) = self.free {
                    // SAFETY: the plugin handed this pointer out; freed once.
                    unsafe { free(ptr as *mut c_void) };
                }
            }
            return Vec::new();
        }
        // SAFETY: the consumer contract hands out `len` readable bytes at
        // `ptr`, owned by the plugin until arrowcert_free; copied here first.
        let bytes = unsafe { std::slice::from_raw_parts(ptr, len as usize) }.to_vec();
        if let Some(free) = self.free {
            // SAFETY: as above; freed exactly once, after the copy.
            unsafe { free(ptr as *mut c_void) };
        }
        bytes
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
    entries: Entries,
    /// Set when the library is an Arrow C data integration library behind
    /// the built-in adapter (`entries` is then empty).
    integration: Option<integration::Library>,
}

impl fmt::Debug for Plugin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Plugin")
            .field("path", &self.path)
            .field("name", &self.name)
            .field("abi_version", &self.abi_version)
            .field("symbols", &self.symbols)
            .field("integration", &self.integration)
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

        // SAFETY: (each field) F is the declared type of that symbol.
        let entries = unsafe {
            Entries {
                supports_device: lookup(&lib, "arrowcert_plugin_supports_device"),
                bytes_allocated: lookup(&lib, "arrowcert_bytes_allocated"),
                last_error: lookup(&lib, "arrowcert_last_error"),
                free: lookup(&lib, "arrowcert_free"),
                produce_schema: lookup(&lib, "arrowcert_produce_schema"),
                produce_device_array: lookup(&lib, "arrowcert_produce_device_array"),
                produce_device_stream: lookup(&lib, "arrowcert_produce_device_stream"),
                produce_async: lookup(&lib, "arrowcert_produce_async"),
                produce_array: lookup(&lib, "arrowcert_produce_array"),
                produce_stream: lookup(&lib, "arrowcert_produce_stream"),
                produce_array_schema: lookup(&lib, "arrowcert_produce_array_schema"),
                produce_object: lookup(&lib, "arrowcert_produce_object"),
                export_object: lookup(&lib, "arrowcert_export_object"),
                release_object: lookup(&lib, "arrowcert_release_object"),
                produce_sliced_stream: lookup(&lib, "arrowcert_produce_sliced_stream"),
                produce_sliced_device_stream: lookup(
                    &lib,
                    "arrowcert_produce_sliced_device_stream",
                ),
                produce_sliced_async: lookup(&lib, "arrowcert_produce_sliced_async"),
                consume_device_array: lookup(&lib, "arrowcert_consume_device_array"),
                consume_device_stream: lookup(&lib, "arrowcert_consume_device_stream"),
                consume_array: lookup(&lib, "arrowcert_consume_array"),
                consume_stream: lookup(&lib, "arrowcert_consume_stream"),
                consume_async_start: lookup(&lib, "arrowcert_consume_async_start"),
                consume_async_finish: lookup(&lib, "arrowcert_consume_async_finish"),
                consume_async_cancel: lookup(&lib, "arrowcert_consume_async_cancel"),
                consume_values: lookup(&lib, "arrowcert_consume_values"),
                produce_schema_s: lookup(&lib, "arrowcert_produce_schema_from_stream"),
                produce_array_s: lookup(&lib, "arrowcert_produce_array_from_stream"),
                produce_array_schema_s: lookup(&lib, "arrowcert_produce_array_schema_from_stream"),
                produce_object_s: lookup(&lib, "arrowcert_produce_object_from_stream"),
                produce_device_array_s: lookup(&lib, "arrowcert_produce_device_array_from_stream"),
                produce_stream_s: lookup(&lib, "arrowcert_produce_stream_from_stream"),
                produce_device_stream_s: lookup(
                    &lib,
                    "arrowcert_produce_device_stream_from_stream",
                ),
                produce_sliced_stream_s: lookup(
                    &lib,
                    "arrowcert_produce_sliced_stream_from_stream",
                ),
                produce_sliced_device_stream_s: lookup(
                    &lib,
                    "arrowcert_produce_sliced_device_stream_from_stream",
                ),
                consume_array_s: lookup(&lib, "arrowcert_consume_array_to_stream"),
                consume_device_array_s: lookup(&lib, "arrowcert_consume_device_array_to_stream"),
                consume_stream_s: lookup(&lib, "arrowcert_consume_stream_to_stream"),
                consume_device_stream_s: lookup(&lib, "arrowcert_consume_device_stream_to_stream"),
            }
        };
        let mut entries = entries;
        entries.mask(&symbols);
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
            entries,
            integration: None,
        })
    }

    /// An integration library behind the built-in adapter. It presents the
    /// contract's symbols the adapter implements on its behalf: identity,
    /// `arrowcert_bytes_allocated` when the library counts its bytes,
    /// `arrowcert_produce_schema` and `arrowcert_produce_array` when it
    /// exports, `arrowcert_consume_array` when it imports.
    fn adapted(path: &Path, library: integration::Library) -> Plugin {
        let mut symbols = vec!["arrowcert_plugin_abi_version", "arrowcert_plugin_name"];
        if library.has_bytes_allocated() {
            symbols.push("arrowcert_bytes_allocated");
        }
        if library.exports() {
            symbols.extend(["arrowcert_produce_schema", "arrowcert_produce_array"]);
        }
        if library.imports() {
            symbols.push("arrowcert_consume_array");
        }
        Plugin {
            path: path.to_path_buf(),
            name: library.name(),
            abi_version: ABI_VERSION,
            symbols,
            entries: Entries::default(),
            integration: Some(library),
        }
    }

    /// The integration library behind the built-in adapter, if this is one.
    pub fn integration(&self) -> Option<&integration::Library> {
        self.integration.as_ref()
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
        match self.entries.supports_device {
            // SAFETY: declared type, plain integer argument.
            Some(f) => unsafe { f(device_type) == 1 },
            None => device_type == crate::abi::device::CPU,
        }
    }

    /// The plugin's own count of bytes it holds, if it exports one.
    pub fn bytes_allocated(&self) -> Option<i64> {
        if let Some(l) = &self.integration {
            return l.bytes_allocated();
        }
        // SAFETY: declared type, no arguments.
        self.entries.bytes_allocated.map(|f| unsafe { f() })
    }

    fn last_error(&self) -> Option<String> {
        self.entries.last_error()
    }

    fn check(&self, entry: &'static str, code: c_int) -> Result<(), CallError> {
        if code == 0 {
            Ok(())
        } else {
            Err(CallError::Failed {
                entry,
                code,
                message: self.last_error(),
            })
        }
    }

    /// After a consumer's stream variant returned `rc`: what it handed back
    /// in `read`, read (validated) as IPC bytes; on failure whatever it left
    /// there is released.
    fn read_back(
        &self,
        entry: &'static str,
        rc: c_int,
        read: &mut ArrowArrayStream,
    ) -> Result<Vec<u8>, CallError> {
        match self.check(entry, rc) {
            Ok(()) => streamed::read_back(entry, read),
            Err(e) => {
                release_if_live(read);
                Err(e)
            }
        }
    }

    /// Copies the bytes a consumer handed out and frees them with
    /// `arrowcert_free` (left allocated if the plugin does not export it).
    fn take_output(&self, ptr: *mut u8, len: i64) -> Vec<u8> {
        self.entries.take_output(ptr, len)
    }

    pub fn produce_schema(&self, ipc: &[u8], out: &mut ArrowSchema) -> Result<(), CallError> {
        if let Some(l) = &self.integration {
            return l.produce_schema(ipc, out);
        }
        const E: &str = "arrowcert_produce_schema";
        if let (None, Some(f)) = (self.entries.produce_schema, self.entries.produce_schema_s) {
            const V: &str = "arrowcert_produce_schema_from_stream";
            let mut data = streamed::scenario(V, ipc, None)?;
            crate::abi::breadcrumb::step(V);
            // SAFETY: `data` (which the plugin takes) and `out` (a slot of
            // the out-structure arena) are valid for the whole call.
            let rc = crate::abi::outslot::call(V, out, |out| unsafe { f(&mut data, out) });
            release_if_live(&mut data);
            return self.check(V, rc);
        }
        let f = self.entries.produce_schema.ok_or(CallError::Missing(E))?;
        crate::abi::breadcrumb::step(E);
        // SAFETY: `ipc` and `out` (a slot of the out-structure arena) are
        // valid for the whole call.
        let rc = crate::abi::outslot::call(E, out, |out| unsafe {
            f(ipc.as_ptr(), ipc.len() as i64, out)
        });
        self.check(E, rc)
    }

    #[allow(clippy::too_many_arguments)]
    pub fn produce_device_array(
        &self,
        ipc: &[u8],
        batch_index: i64,
        slice_offset: i64,
        slice_length: i64,
        device_type: ArrowDeviceType,
        device_id: i64,
        out: &mut ArrowDeviceArray,
    ) -> Result<(), CallError> {
        const E: &str = "arrowcert_produce_device_array";
        if let (None, Some(f)) = (
            self.entries.produce_device_array,
            self.entries.produce_device_array_s,
        ) {
            const V: &str = "arrowcert_produce_device_array_from_stream";
            let mut data =
                streamed::scenario(V, ipc, Some((batch_index, slice_offset, slice_length)))?;
            crate::abi::breadcrumb::step(V);
            // SAFETY: as in produce_schema.
            let rc = crate::abi::outslot::call(V, out, |out| unsafe {
                f(&mut data, device_type, device_id, out)
            });
            release_if_live(&mut data);
            return self.check(V, rc);
        }
        let f = self
            .entries
            .produce_device_array
            .ok_or(CallError::Missing(E))?;
        crate::abi::breadcrumb::step(E);
        // SAFETY: `ipc` and `out` (a slot of the out-structure arena) are
        // valid for the whole call.
        let rc = crate::abi::outslot::call(E, out, |out| unsafe {
            f(
                ipc.as_ptr(),
                ipc.len() as i64,
                batch_index,
                slice_offset,
                slice_length,
                device_type,
                device_id,
                out,
            )
        });
        self.check(E, rc)
    }

    pub fn produce_device_stream(
        &self,
        ipc: &[u8],
        device_type: ArrowDeviceType,
        device_id: i64,
        out: &mut ArrowDeviceArrayStream,
    ) -> Result<(), CallError> {
        const E: &str = "arrowcert_produce_device_stream";
        if let (None, Some(f)) = (
            self.entries.produce_device_stream,
            self.entries.produce_device_stream_s,
        ) {
            const V: &str = "arrowcert_produce_device_stream_from_stream";
            let mut data = streamed::scenario(V, ipc, None)?;
            crate::abi::breadcrumb::step(V);
            // SAFETY: as in produce_schema.
            let rc = crate::abi::outslot::call(V, out, |out| unsafe {
                f(&mut data, device_type, device_id, out)
            });
            release_if_live(&mut data);
            return self.check(V, rc);
        }
        let f = self
            .entries
            .produce_device_stream
            .ok_or(CallError::Missing(E))?;
        crate::abi::breadcrumb::step(E);
        // SAFETY: `ipc` and `out` (a slot of the out-structure arena) are
        // valid for the whole call.
        let rc = crate::abi::outslot::call(E, out, |out| unsafe {
            f(ipc.as_ptr(), ipc.len() as i64, device_type, device_id, out)
        });
        self.check(E, rc)
    }

    pub fn produce_array(
        &self,
        ipc: &[u8],
        batch_index: i64,
        slice_offset: i64,
        slice_length: i64,
        out: &mut ArrowArray,
    ) -> Result<(), CallError> {
        if let Some(l) = &self.integration {
            return l.produce_array(ipc, batch_index, slice_offset, slice_length, out);
        }
        const E: &str = "arrowcert_produce_array";
        if let (None, Some(f)) = (self.entries.produce_array, self.entries.produce_array_s) {
            const V: &str = "arrowcert_produce_array_from_stream";
            let mut data =
                streamed::scenario(V, ipc, Some((batch_index, slice_offset, slice_length)))?;
            crate::abi::breadcrumb::step(V);
            // SAFETY: as in produce_schema.
            let rc = crate::abi::outslot::call(V, out, |out| unsafe { f(&mut data, out) });
            release_if_live(&mut data);
            return self.check(V, rc);
        }
        let f = self.entries.produce_array.ok_or(CallError::Missing(E))?;
        crate::abi::breadcrumb::step(E);
        // SAFETY: `ipc` and `out` (a slot of the out-structure arena) are
        // valid for the whole call.
        let rc = crate::abi::outslot::call(E, out, |out| unsafe {
            f(
                ipc.as_ptr(),
                ipc.len() as i64,
                batch_index,
                slice_offset,
                slice_length,
                out,
            )
        });
        self.check(E, rc)
    }

    /// The schema a library exports together with one batch's array (the
    /// schema half of `__arrow_c_array__`'s pair, a C++
    /// `ExportRecordBatch`'s schema): optional; `Missing` when the plugin
    /// has no such entry point.
    pub fn produce_array_schema(
        &self,
        ipc: &[u8],
        batch_index: i64,
        slice_offset: i64,
        slice_length: i64,
        out: &mut ArrowSchema,
    ) -> Result<(), CallError> {
        const E: &str = "arrowcert_produce_array_schema";
        if let (None, Some(f)) = (
            self.entries.produce_array_schema,
            self.entries.produce_array_schema_s,
        ) {
            const V: &str = "arrowcert_produce_array_schema_from_stream";
            let mut data =
                streamed::scenario(V, ipc, Some((batch_index, slice_offset, slice_length)))?;
            crate::abi::breadcrumb::step(V);
            // SAFETY: as in produce_schema.
            let rc = crate::abi::outslot::call(V, out, |out| unsafe { f(&mut data, out) });
            release_if_live(&mut data);
            return self.check(V, rc);
        }
        let f = self
            .entries
            .produce_array_schema
            .ok_or(CallError::Missing(E))?;
        crate::abi::breadcrumb::step(E);
        // SAFETY: `ipc` and `out` (a slot of the out-structure arena) are
        // valid for the whole call.
        let rc = crate::abi::outslot::call(E, out, |out| unsafe {
            f(
                ipc.as_ptr(),
                ipc.len() as i64,
                batch_index,
                slice_offset,
                slice_length,
                out,
            )
        });
        self.check(E, rc)
    }

    /// One library object holding one batch (`arrowcert_produce_object`),
    /// to export several times ([`LibraryObject::export`]): optional;
    /// `Missing` when the plugin cannot be asked (no such entry points).
    pub fn produce_object(
        &self,
        ipc: &[u8],
        batch_index: i64,
        slice_offset: i64,
        slice_length: i64,
    ) -> Result<LibraryObject<'_>, CallError> {
        const E: &str = "arrowcert_produce_object";
        let (Some(export), Some(release)) =
            (self.entries.export_object, self.entries.release_object)
        else {
            return Err(CallError::Missing(E));
        };
        let mut handle: *mut c_void = std::ptr::null_mut();
        if let (None, Some(f)) = (self.entries.produce_object, self.entries.produce_object_s) {
            const V: &str = "arrowcert_produce_object_from_stream";
            let mut data =
                streamed::scenario(V, ipc, Some((batch_index, slice_offset, slice_length)))?;
            crate::abi::breadcrumb::step(V);
            // SAFETY: `data` (which the plugin takes) and `handle` are valid
            // for the whole call.
            let rc = unsafe { f(&mut data, &mut handle) };
            release_if_live(&mut data);
            self.check(V, rc)?;
        } else {
            let f = self.entries.produce_object.ok_or(CallError::Missing(E))?;
            crate::abi::breadcrumb::step(E);
            // SAFETY: `ipc` and `handle` are valid for the whole call.
            let rc = unsafe {
                f(
                    ipc.as_ptr(),
                    ipc.len() as i64,
                    batch_index,
                    slice_offset,
                    slice_length,
                    &mut handle,
                )
            };
            self.check(E, rc)?;
        }
        Ok(LibraryObject {
            plugin: self,
            handle,
            export,
            release,
        })
    }

    pub fn produce_stream(&self, ipc: &[u8], out: &mut ArrowArrayStream) -> Result<(), CallError> {
        const E: &str = "arrowcert_produce_stream";
        if let (None, Some(f)) = (self.entries.produce_stream, self.entries.produce_stream_s) {
            const V: &str = "arrowcert_produce_stream_from_stream";
            let mut data = streamed::scenario(V, ipc, None)?;
            crate::abi::breadcrumb::step(V);
            // SAFETY: as in produce_schema.
            let rc = crate::abi::outslot::call(V, out, |out| unsafe { f(&mut data, out) });
            release_if_live(&mut data);
            return self.check(V, rc);
        }
        let f = self.entries.produce_stream.ok_or(CallError::Missing(E))?;
        crate::abi::breadcrumb::step(E);
        // SAFETY: `ipc` and `out` (a slot of the out-structure arena) are
        // valid for the whole call.
        let rc = crate::abi::outslot::call(E, out, |out| unsafe {
            f(ipc.as_ptr(), ipc.len() as i64, out)
        });
        self.check(E, rc)
    }

    /// `arrowcert_produce_sliced_stream`: rows `slice_offset..slice_offset
    /// + slice_length` of the whole stream (`-1`: to its end), across
    /// batches, as a plain stream (docs/PLUGIN_ABI.md, "Slices of a
    /// stream"). Optional: `Missing` when the plugin does not export it.
    pub fn produce_sliced_stream(
        &self,
        ipc: &[u8],
        slice_offset: i64,
        slice_length: i64,
        out: &mut ArrowArrayStream,
    ) -> Result<(), CallError> {
        const E: &str = "arrowcert_produce_sliced_stream";
        if let (None, Some(f)) = (
            self.entries.produce_sliced_stream,
            self.entries.produce_sliced_stream_s,
        ) {
            const V: &str = "arrowcert_produce_sliced_stream_from_stream";
            // Every batch: the library slices them itself.
            let mut data = streamed::scenario(V, ipc, None)?;
            crate::abi::breadcrumb::step(V);
            // SAFETY: as in produce_schema.
            let rc = crate::abi::outslot::call(V, out, |out| unsafe {
                f(&mut data, slice_offset, slice_length, out)
            });
            release_if_live(&mut data);
            return self.check(V, rc);
        }
        let f = self
            .entries
            .produce_sliced_stream
            .ok_or(CallError::Missing(E))?;
        crate::abi::breadcrumb::step(E);
        // SAFETY: `ipc` and `out` (a slot of the out-structure arena) are
        // valid for the whole call.
        let rc = crate::abi::outslot::call(E, out, |out| unsafe {
            f(
                ipc.as_ptr(),
                ipc.len() as i64,
                slice_offset,
                slice_length,
                out,
            )
        });
        self.check(E, rc)
    }

    /// `arrowcert_produce_sliced_device_stream`: as
    /// [`Plugin::produce_sliced_stream`], as a device stream.
    pub fn produce_sliced_device_stream(
        &self,
        ipc: &[u8],
        slice_offset: i64,
        slice_length: i64,
        device_type: ArrowDeviceType,
        device_id: i64,
        out: &mut ArrowDeviceArrayStream,
    ) -> Result<(), CallError> {
        const E: &str = "arrowcert_produce_sliced_device_stream";
        if let (None, Some(f)) = (
            self.entries.produce_sliced_device_stream,
            self.entries.produce_sliced_device_stream_s,
        ) {
            const V: &str = "arrowcert_produce_sliced_device_stream_from_stream";
            let mut data = streamed::scenario(V, ipc, None)?;
            crate::abi::breadcrumb::step(V);
            // SAFETY: as in produce_schema.
            let rc = crate::abi::outslot::call(V, out, |out| unsafe {
                f(
                    &mut data,
                    slice_offset,
                    slice_length,
                    device_type,
                    device_id,
                    out,
                )
            });
            release_if_live(&mut data);
            return self.check(V, rc);
        }
        let f = self
            .entries
            .produce_sliced_device_stream
            .ok_or(CallError::Missing(E))?;
        crate::abi::breadcrumb::step(E);
        // SAFETY: `ipc` and `out` (a slot of the out-structure arena) are
        // valid for the whole call.
        let rc = crate::abi::outslot::call(E, out, |out| unsafe {
            f(
                ipc.as_ptr(),
                ipc.len() as i64,
                slice_offset,
                slice_length,
                device_type,
                device_id,
                out,
            )
        });
        self.check(E, rc)
    }

    pub fn consume_device_array(
        &self,
        schema: &mut ArrowSchema,
        array: &mut ArrowDeviceArray,
    ) -> Result<Vec<u8>, CallError> {
        const E: &str = "arrowcert_consume_device_array";
        if let (None, Some(f)) = (
            self.entries.consume_device_array,
            self.entries.consume_device_array_s,
        ) {
            const V: &str = "arrowcert_consume_device_array_to_stream";
            crate::abi::breadcrumb::step(V);
            let mut read = <ArrowArrayStream as crate::abi::Plain>::zeroed();
            // SAFETY: all three pointers are valid for the whole call; the
            // structures were filled by a producer and are live.
            let rc = unsafe { f(schema, array, &mut read) };
            return self.read_back(V, rc, &mut read);
        }
        let f = self
            .entries
            .consume_device_array
            .ok_or(CallError::Missing(E))?;
        crate::abi::breadcrumb::step(E);
        let (mut p, mut n) = (std::ptr::null_mut(), 0i64);
        // SAFETY: all four pointers are valid for the whole call; the
        // structures were filled by a producer and are live.
        let rc = unsafe { f(schema, array, &mut p, &mut n) };
        self.check(E, rc)?;
        Ok(self.take_output(p, n))
    }

    pub fn consume_device_stream(
        &self,
        stream: &mut ArrowDeviceArrayStream,
    ) -> Result<Vec<u8>, CallError> {
        const E: &str = "arrowcert_consume_device_stream";
        if let (None, Some(f)) = (
            self.entries.consume_device_stream,
            self.entries.consume_device_stream_s,
        ) {
            const V: &str = "arrowcert_consume_device_stream_to_stream";
            crate::abi::breadcrumb::step(V);
            let mut read = <ArrowArrayStream as crate::abi::Plain>::zeroed();
            // SAFETY: both pointers are valid for the whole call.
            let rc = unsafe { f(stream, &mut read) };
            return self.read_back(V, rc, &mut read);
        }
        let f = self
            .entries
            .consume_device_stream
            .ok_or(CallError::Missing(E))?;
        crate::abi::breadcrumb::step(E);
        let (mut p, mut n) = (std::ptr::null_mut(), 0i64);
        // SAFETY: all pointers are valid for the whole call.
        let rc = unsafe { f(stream, &mut p, &mut n) };
        self.check(E, rc)?;
        Ok(self.take_output(p, n))
    }

    /// `arrowcert_consume_array`. `sent` is what the harness handed over,
    /// logically: a plugin never sees it; the integration adapter has the
    /// library compare what it imports with it (the libraries' import entry
    /// points judge against a JSON file instead of reporting what they read).
    pub fn consume_array(
        &self,
        schema: &mut ArrowSchema,
        array: &mut ArrowArray,
        sent: &arrow_array::RecordBatch,
    ) -> Result<Vec<u8>, CallError> {
        if let Some(l) = &self.integration {
            return l.consume_array(schema, array, sent);
        }
        const E: &str = "arrowcert_consume_array";
        if let (None, Some(f)) = (self.entries.consume_array, self.entries.consume_array_s) {
            const V: &str = "arrowcert_consume_array_to_stream";
            crate::abi::breadcrumb::step(V);
            let mut read = <ArrowArrayStream as crate::abi::Plain>::zeroed();
            // SAFETY: all three pointers are valid for the whole call.
            let rc = unsafe { f(schema, array, &mut read) };
            return self.read_back(V, rc, &mut read);
        }
        let f = self.entries.consume_array.ok_or(CallError::Missing(E))?;
        crate::abi::breadcrumb::step(E);
        let (mut p, mut n) = (std::ptr::null_mut(), 0i64);
        // SAFETY: all pointers are valid for the whole call.
        let rc = unsafe { f(schema, array, &mut p, &mut n) };
        self.check(E, rc)?;
        Ok(self.take_output(p, n))
    }

    pub fn consume_stream(&self, stream: &mut ArrowArrayStream) -> Result<Vec<u8>, CallError> {
        const E: &str = "arrowcert_consume_stream";
        if let (None, Some(f)) = (self.entries.consume_stream, self.entries.consume_stream_s) {
            const V: &str = "arrowcert_consume_stream_to_stream";
            crate::abi::breadcrumb::step(V);
            let mut read = <ArrowArrayStream as crate::abi::Plain>::zeroed();
            // SAFETY: both pointers are valid for the whole call.
            let rc = unsafe { f(stream, &mut read) };
            return self.read_back(V, rc, &mut read);
        }
        let f = self.entries.consume_stream.ok_or(CallError::Missing(E))?;
        crate::abi::breadcrumb::step(E);
        let (mut p, mut n) = (std::ptr::null_mut(), 0i64);
        // SAFETY: all pointers are valid for the whole call.
        let rc = unsafe { f(stream, &mut p, &mut n) };
        self.check(E, rc)?;
        Ok(self.take_output(p, n))
    }

    /// `arrowcert_produce_async` into `handler`. On success the producer
    /// owns the handler until it calls its release (possibly later, from
    /// its own threads); on failure it never took it.
    ///
    /// # Safety
    /// `handler` must point to an initialised handler that stays valid (at
    /// that address) until its release callback has been called.
    pub unsafe fn produce_async(
        &self,
        ipc: &[u8],
        device_type: ArrowDeviceType,
        device_id: i64,
        handler: *mut ArrowAsyncDeviceStreamHandler,
    ) -> Result<(), CallError> {
        const E: &str = "arrowcert_produce_async";
        let f = self.entries.produce_async.ok_or(CallError::Missing(E))?;
        crate::abi::breadcrumb::step(E);
        // SAFETY: `ipc` is valid for the call; `handler` as the caller
        // guarantees.
        let rc = unsafe {
            f(
                ipc.as_ptr(),
                ipc.len() as i64,
                device_type,
                device_id,
                handler,
            )
        };
        self.check(E, rc)
    }

    /// `arrowcert_consume_values`: the plugin's own view of what its last
    /// consume call on this thread read, as JSON text
    /// ([`crate::compare::pyvalues`]), made without its Arrow exporter;
    /// `None` when it has no such view.
    pub fn consumed_values(&self) -> Option<String> {
        let f = self.entries.consume_values?;
        // SAFETY: declared type (`const char* (void)`), no arguments; the
        // result is NULL or a NUL-terminated string valid until the next
        // call on this thread, copied at once.
        let p = unsafe { f() };
        if p.is_null() {
            return None;
        }
        // SAFETY: non-NULL and NUL-terminated per the contract.
        Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
    }

    /// `arrowcert_produce_sliced_async`: as [`Plugin::produce_async`], the
    /// rows `slice_offset..slice_offset + slice_length` of the stream
    /// (`-1`: to its end) across batches.
    ///
    /// # Safety
    /// As [`Plugin::produce_async`].
    pub unsafe fn produce_sliced_async(
        &self,
        ipc: &[u8],
        slice_offset: i64,
        slice_length: i64,
        device_type: ArrowDeviceType,
        device_id: i64,
        handler: *mut ArrowAsyncDeviceStreamHandler,
    ) -> Result<(), CallError> {
        const E: &str = "arrowcert_produce_sliced_async";
        let f = self
            .entries
            .produce_sliced_async
            .ok_or(CallError::Missing(E))?;
        crate::abi::breadcrumb::step(E);
        // SAFETY: `ipc` is valid for the call; `handler` as the caller
        // guarantees.
        let rc = unsafe {
            f(
                ipc.as_ptr(),
                ipc.len() as i64,
                slice_offset,
                slice_length,
                device_type,
                device_id,
                handler,
            )
        };
        self.check(E, rc)
    }

    /// True when the plugin exports both async consumer entry points.
    pub fn consumes_async(&self) -> bool {
        self.entries.consume_async_start.is_some() && self.entries.consume_async_finish.is_some()
    }

    /// `arrowcert_consume_async_start`: the consumer initialises `handler`
    /// and returns its token.
    ///
    /// # Safety
    /// `handler` must point to a writable handler that stays valid until
    /// its release callback has been called.
    pub unsafe fn consume_async_start(
        &self,
        handler: *mut ArrowAsyncDeviceStreamHandler,
    ) -> Result<usize, CallError> {
        const E: &str = "arrowcert_consume_async_start";
        let f = self
            .entries
            .consume_async_start
            .ok_or(CallError::Missing(E))?;
        crate::abi::breadcrumb::step(E);
        let mut token: *mut c_void = std::ptr::null_mut();
        // SAFETY: handler as the caller guarantees; token is writable.
        let rc = unsafe { f(handler, &mut token) };
        self.check(E, rc)?;
        Ok(token as usize)
    }

    /// True when the consumer exports the optional
    /// `arrowcert_consume_async_cancel`.
    pub fn cancels_async(&self) -> bool {
        self.entries.consume_async_cancel.is_some()
    }

    /// The optional `arrowcert_consume_async_cancel` for a token from
    /// [`Plugin::consume_async_start`] (before its finish): `None` when the
    /// consumer does not export it.
    pub fn async_canceller(&self, token: usize) -> Option<Canceller> {
        self.entries
            .consume_async_cancel
            .map(|f| Canceller { f, token })
    }

    /// `arrowcert_consume_async_finish` on a token from
    /// [`Plugin::consume_async_start`] (each token once): the IPC the
    /// consumer read, or its error. The call runs on a thread of its own
    /// (the plugin's last error is read there too); if it has not returned
    /// after `wait`, `None`: the thread is left behind, blocked in the
    /// plugin, and the case goes on.
    pub fn consume_async_finish(
        &self,
        token: usize,
        timeout_ms: i64,
        wait: std::time::Duration,
    ) -> Option<Result<Vec<u8>, CallError>> {
        const E: &str = "arrowcert_consume_async_finish";
        let Some(f) = self.entries.consume_async_finish else {
            return Some(Err(CallError::Missing(E)));
        };
        crate::abi::breadcrumb::step(E);
        let entries = self.entries;
        let (tx, rx) = std::sync::mpsc::channel();
        let spawned = std::thread::Builder::new()
            .name("arrowcert-finish".into())
            .spawn(move || {
                let (mut p, mut n) = (std::ptr::null_mut(), 0i64);
                // SAFETY: the token came from start (the plugin checks what
                // it is); the out pointers are writable.
                let rc = unsafe { f(token as *mut c_void, timeout_ms, &mut p, &mut n) };
                let r = if rc == 0 {
                    Ok(entries.take_output(p, n))
                } else {
                    Err(CallError::Failed {
                        entry: E,
                        code: rc,
                        message: entries.last_error(),
                    })
                };
                let _ = tx.send(r);
            });
        if let Err(e) = spawned {
            return Some(Err(CallError::Failed {
                entry: E,
                code: e.raw_os_error().unwrap_or(libc::EAGAIN),
                message: Some(format!("the harness could not start a thread: {e}")),
            }));
        }
        rx.recv_timeout(wait).ok()
    }

    /// Runs one async stream from `producer` into this consumer: the
    /// consumer initialises a handler the harness allocated, the producer
    /// drives it from its own threads, and `finish` waits up to `timeout_ms`
    /// for the handler's release. Returns what the consumer received.
    pub fn consume_async_from(
        &self,
        producer: &Plugin,
        ipc: &[u8],
        device_type: ArrowDeviceType,
        device_id: i64,
        timeout_ms: i64,
    ) -> Result<Vec<u8>, CallError> {
        const FINISH: &str = "arrowcert_consume_async_finish";
        if self.entries.consume_async_finish.is_none() {
            return Err(CallError::Missing(FINISH));
        }
        if producer.entries.produce_async.is_none() {
            return Err(CallError::Missing("arrowcert_produce_async"));
        }
        // The handler must stay at one address until its release has been
        // called, possibly from a producer thread after we return: it is
        // freed only once finish() reports that release happened, and leaked
        // otherwise.
        let handler: *mut ArrowAsyncDeviceStreamHandler = Box::into_raw(Box::new(
            <ArrowAsyncDeviceStreamHandler as crate::abi::Plain>::zeroed(),
        ));
        // SAFETY: handler points to a live, zeroed handler kept as above.
        let token = match unsafe { self.consume_async_start(handler) } {
            Ok(t) => t,
            Err(e) => {
                // SAFETY: the consumer failed to start: nobody else holds
                // the handler, so it is freed here (its release was never
                // armed).
                drop(unsafe { Box::from_raw(handler) });
                return Err(e);
            }
        };
        // SAFETY: handler stays allocated (see above) for as long as the
        // producer may use it.
        let produced = unsafe { producer.produce_async(ipc, device_type, device_id, handler) };
        if produced.is_err() {
            // The producer refused synchronously and will not call the
            // handler; the harness, holding it, releases it as the spec's
            // owner would, so the consumer can finish.
            // SAFETY: handler is live and no producer uses it.
            let release = unsafe { (*handler).release };
            if let Some(release) = release {
                // SAFETY: the consumer's own release callback on its handler.
                unsafe { release(handler) };
            }
        }
        let wait = std::time::Duration::from_millis(timeout_ms.max(0) as u64)
            + std::time::Duration::from_secs(5);
        let finished = self.consume_async_finish(token, timeout_ms, wait);
        let released = match &finished {
            Some(Ok(_)) => true,
            Some(Err(e)) => e.code() != Some(libc::ETIMEDOUT),
            None => false,
        };
        if released {
            // SAFETY: finish() returned without timing out, so the
            // handler's release has been called (contract) and the
            // producer no longer touches it.
            drop(unsafe { Box::from_raw(handler) });
        }
        // Otherwise release may still come later from a producer thread:
        // the handler is deliberately leaked rather than freed under it,
        // and the worker ends after this case (the producer's threads may
        // still run in it).
        if !released {
            crate::abi::breadcrumb::taint(
                "the async producer had not released the consumer's handler when the case ended",
            );
        }
        produced?;
        finished.unwrap_or_else(|| {
            Err(CallError::Failed {
                entry: FINISH,
                code: libc::ETIMEDOUT,
                message: Some(format!(
                    "{FINISH} did not return within {} ms of its {timeout_ms} ms timeout",
                    wait.as_millis()
                )),
            })
        })
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

//! The built-in adapter for Arrow's C data integration libraries.
//!
//! Libraries that take part in Arrow's cross-implementation C data tests
//! (archery's `dev/archery/archery/integration/tester_*.py`) export four
//! entry points that talk Arrow integration JSON instead of IPC:
//!
//! ```c
//! const char* P_ExportSchemaFromJson(const char* json_path, struct ArrowSchema* out);
//! const char* P_ExportBatchFromJson(const char* json_path, int num_batch, struct ArrowArray* out);
//! const char* P_ImportSchemaAndCompareToJson(const char* json_path, struct ArrowSchema* schema);
//! const char* P_ImportBatchAndCompareToJson(const char* json_path, int num_batch, struct ArrowArray* batch);
//! ```
//!
//! each returning NULL or an error message. [`crate::plugin::Plugin::load`]
//! wraps a library that has no `arrowcert_plugin_abi_version` but one of the
//! [`FLAVORS`] in a [`Library`], which presents the C data interface
//! capabilities of a plugin:
//!
//! - `produce_schema` / `produce_array`: the scenario (one batch) is written
//!   as integration JSON ([`json`]) into a private scratch directory, and
//!   the export entry point writes straight into the harness's (poisoned)
//!   out structure. The entry points export whole batches, so a slice is
//!   ENOSYS (not supported).
//! - `consume_array`: the schema and array the harness exported go straight
//!   to the two import entry points, with the JSON of what was sent. The
//!   library's verdict stands for what it read: NULL means it read exactly
//!   that (the adapter answers with those IPC bytes); an error message is a
//!   refusal the consumer rules judge, with the library's message as
//!   evidence.
//!
//! Error messages that say a feature is not implemented or supported map to
//! ENOSYS (a declared limitation); every other message to EIO.

pub mod json;

use std::ffi::{c_char, c_int, CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

/// How the adapter's own refusals begin: data Arrow integration JSON cannot
/// express is the harness's limit, not the library's (certification skips
/// such a case; it is never a limitation of the library).
pub const CANNOT_HAND_OVER: &str =
    "the built-in integration adapter cannot hand this scenario over";

use arrow_array::RecordBatch;

use super::backend::Backend;
use super::CallError;
use crate::abi::ops::Owned;
use crate::abi::{ArrowArray, ArrowSchema};

/// One known set of entry-point names (checked against archery's
/// `tester_cpp.py`, `tester_nanoarrow.py`, `tester_go.py`,
/// `tester_rust.py`, `tester_external_library.py` and arrow-rs's
/// `arrow-integration-testing/src/lib.rs`).
#[derive(Debug)]
pub struct Flavor {
    /// The prefix named in the adapter's identity.
    pub prefix: &'static str,
    pub export_schema: &'static str,
    pub export_batch: &'static str,
    pub import_schema: &'static str,
    pub import_batch: &'static str,
    /// `int64_t (void)`: bytes the library holds.
    pub bytes_allocated: Option<&'static str>,
    /// `void (void)`: a garbage collection to run before counting bytes.
    pub run_gc: Option<&'static str>,
    /// `void (char*)`: frees the error messages (otherwise they are static).
    pub free_error: Option<&'static str>,
}

impl Flavor {
    fn entry_points(&self) -> [&'static str; 4] {
        [
            self.export_schema,
            self.export_batch,
            self.import_schema,
            self.import_batch,
        ]
    }
}

/// The known flavours, in the order they are tried.
pub const FLAVORS: &[Flavor] = &[
    Flavor {
        prefix: "ArrowCpp_CDataIntegration",
        export_schema: "ArrowCpp_CDataIntegration_ExportSchemaFromJson",
        export_batch: "ArrowCpp_CDataIntegration_ExportBatchFromJson",
        import_schema: "ArrowCpp_CDataIntegration_ImportSchemaAndCompareToJson",
        import_batch: "ArrowCpp_CDataIntegration_ImportBatchAndCompareToJson",
        bytes_allocated: Some("ArrowCpp_BytesAllocated"),
        run_gc: None,
        free_error: None,
    },
    Flavor {
        prefix: "nanoarrow_CDataIntegration",
        export_schema: "nanoarrow_CDataIntegration_ExportSchemaFromJson",
        export_batch: "nanoarrow_CDataIntegration_ExportBatchFromJson",
        import_schema: "nanoarrow_CDataIntegration_ImportSchemaAndCompareToJson",
        import_batch: "nanoarrow_CDataIntegration_ImportBatchAndCompareToJson",
        bytes_allocated: Some("nanoarrow_BytesAllocated"),
        run_gc: None,
        free_error: None,
    },
    Flavor {
        prefix: "ArrowGo",
        export_schema: "ArrowGo_ExportSchemaFromJson",
        export_batch: "ArrowGo_ExportBatchFromJson",
        import_schema: "ArrowGo_ImportSchemaAndCompareToJson",
        import_batch: "ArrowGo_ImportBatchAndCompareToJson",
        bytes_allocated: Some("ArrowGo_BytesAllocated"),
        run_gc: Some("ArrowGo_RunGC"),
        free_error: Some("ArrowGo_FreeError"),
    },
    Flavor {
        prefix: "arrow_rs_cdata_integration",
        export_schema: "arrow_rs_cdata_integration_export_schema_from_json",
        export_batch: "arrow_rs_cdata_integration_export_batch_from_json",
        import_schema: "arrow_rs_cdata_integration_import_schema_and_compare_to_json",
        import_batch: "arrow_rs_cdata_integration_import_batch_and_compare_to_json",
        bytes_allocated: None,
        run_gc: None,
        free_error: Some("arrow_rs_free_error"),
    },
    Flavor {
        prefix: "external_CDataIntegration",
        export_schema: "external_CDataIntegration_ExportSchemaFromJson",
        export_batch: "external_CDataIntegration_ExportBatchFromJson",
        import_schema: "external_CDataIntegration_ImportSchemaAndCompareToJson",
        import_batch: "external_CDataIntegration_ImportBatchAndCompareToJson",
        bytes_allocated: Some("external_BytesAllocated"),
        run_gc: None,
        free_error: None,
    },
];

// Go declares the structure pointers `uintptr_t`: the same ABI on every
// platform the harness runs on.
type SchemaFn = unsafe extern "C" fn(*const c_char, *mut ArrowSchema) -> *mut c_char;
type BatchFn = unsafe extern "C" fn(*const c_char, c_int, *mut ArrowArray) -> *mut c_char;
type BytesFn = unsafe extern "C" fn() -> i64;
type GcFn = unsafe extern "C" fn();
type FreeErrorFn = unsafe extern "C" fn(*mut c_char);

/// A library exports some but not all entry points of a direction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Incomplete {
    pub prefix: &'static str,
    pub present: &'static str,
    pub missing: &'static str,
}

impl std::fmt::Display for Incomplete {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "an Arrow C data integration library (`{}`) exports `{}` but not `{}`: \
             the built-in adapter needs both the schema and the batch entry point of a direction",
            self.prefix, self.present, self.missing
        )
    }
}

/// A loaded integration library behind the built-in adapter.
pub struct Library {
    flavor: &'static Flavor,
    export: Option<(SchemaFn, BatchFn)>,
    import: Option<(SchemaFn, BatchFn)>,
    bytes_allocated: Option<BytesFn>,
    run_gc: Option<GcFn>,
    free_error: Option<FreeErrorFn>,
}

impl std::fmt::Debug for Library {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Library")
            .field("prefix", &self.flavor.prefix)
            .field("exports", &self.export.is_some())
            .field("imports", &self.import.is_some())
            .finish()
    }
}

/// The flavour `lib` exports, if any: `Ok(None)` when it exports none of
/// the known entry points.
pub fn detect(lib: &libloading::Library) -> Result<Option<Library>, Incomplete> {
    let has = |name: &str| {
        // SAFETY: only existence is checked; the pointer is not called.
        unsafe { super::lookup::<*const std::ffi::c_void>(lib, name) }.is_some()
    };
    let Some(flavor) = FLAVORS
        .iter()
        .find(|f| f.entry_points().iter().any(|e| has(e)))
    else {
        return Ok(None);
    };
    let pair =
        |a: &'static str, b: &'static str| -> Result<Option<(SchemaFn, BatchFn)>, Incomplete> {
            // SAFETY: the types are the ones archery declares for these names.
            let sa: Option<SchemaFn> = unsafe { super::lookup(lib, a) };
            // SAFETY: as above.
            let sb: Option<BatchFn> = unsafe { super::lookup(lib, b) };
            match (sa, sb) {
                (Some(sa), Some(sb)) => Ok(Some((sa, sb))),
                (None, None) => Ok(None),
                (Some(_), None) => Err(Incomplete {
                    prefix: flavor.prefix,
                    present: a,
                    missing: b,
                }),
                (None, Some(_)) => Err(Incomplete {
                    prefix: flavor.prefix,
                    present: b,
                    missing: a,
                }),
            }
        };
    let export = pair(flavor.export_schema, flavor.export_batch)?;
    let import = pair(flavor.import_schema, flavor.import_batch)?;
    Ok(Some(Library {
        flavor,
        export,
        import,
        // SAFETY: F is the type archery declares for this optional name.
        bytes_allocated: flavor
            .bytes_allocated
            .and_then(|n| unsafe { super::lookup(lib, n) }),
        // SAFETY: as above.
        run_gc: flavor.run_gc.and_then(|n| unsafe { super::lookup(lib, n) }),
        // SAFETY: as above.
        free_error: flavor
            .free_error
            .and_then(|n| unsafe { super::lookup(lib, n) }),
    }))
}

/// Messages that declare a limitation rather than a failure.
fn unsupported(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    [
        "not implemented",
        "notimplemented",
        "not yet implemented",
        "unsupported",
        "not supported",
    ]
    .iter()
    .any(|k| m.contains(k))
}

fn failed(entry: &'static str, code: c_int, message: String) -> CallError {
    CallError::Failed {
        entry,
        code,
        message: Some(message),
    }
}

/// A directory of the adapter's own (0700), removed with its files when
/// dropped: one per call, so nothing is left behind but by a crash.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> std::io::Result<Scratch> {
        use std::os::unix::fs::DirBuilderExt;
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let dir = std::env::temp_dir().join(format!(
            "arrowcert-integration-{}-{}-{nanos}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
        Ok(Scratch(dir))
    }

    /// Writes `text` to a file in the directory; its path as a C string.
    fn write(&self, text: &str) -> std::io::Result<CString> {
        let path = self.0.join("scenario.json");
        std::fs::write(&path, text)?;
        CString::new(path.as_os_str().as_bytes()).map_err(std::io::Error::other)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Library {
    pub fn prefix(&self) -> &'static str {
        self.flavor.prefix
    }

    /// The adapter's identity: `<prefix> integration library (built-in adapter)`.
    pub fn name(&self) -> String {
        format!(
            "{} integration library (built-in adapter)",
            self.flavor.prefix
        )
    }

    pub fn exports(&self) -> bool {
        self.export.is_some()
    }

    pub fn imports(&self) -> bool {
        self.import.is_some()
    }

    pub fn has_bytes_allocated(&self) -> bool {
        self.bytes_allocated.is_some()
    }

    /// The library's symbols behind the adapter, in the flavour's order.
    pub fn entry_points(&self) -> Vec<&'static str> {
        let f = self.flavor;
        let mut out = Vec::new();
        if self.export.is_some() {
            out.extend([f.export_schema, f.export_batch]);
        }
        if self.import.is_some() {
            out.extend([f.import_schema, f.import_batch]);
        }
        out.extend(f.bytes_allocated.filter(|_| self.bytes_allocated.is_some()));
        out
    }

    /// Copies the message an entry point returned and frees it if the
    /// flavour says so.
    ///
    /// # Safety
    /// `p` is what an entry point of this library just returned.
    unsafe fn message(&self, p: *mut c_char) -> Option<String> {
        if p.is_null() {
            return None;
        }
        // SAFETY: a non-NULL return is a NUL-terminated message.
        let s = unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned();
        if let Some(free) = self.free_error {
            // SAFETY: the flavour's own free function, once.
            unsafe { free(p) };
        }
        Some(if s.is_empty() {
            "(an empty error message)".into()
        } else {
            s
        })
    }

    fn verdict(&self, entry: &'static str, p: *mut c_char) -> Result<(), CallError> {
        // SAFETY: `p` was just returned by `entry`.
        match unsafe { self.message(p) } {
            None => Ok(()),
            Some(m) => {
                let code = if unsupported(&m) {
                    libc::ENOSYS
                } else {
                    libc::EIO
                };
                Err(failed(entry, code, m))
            }
        }
    }

    /// The JSON of `batches` in a fresh scratch directory.
    fn scenario_file(
        &self,
        entry: &'static str,
        schema: &arrow_schema::Schema,
        batches: &[RecordBatch],
    ) -> Result<(Scratch, CString), CallError> {
        let text = json::to_string(schema, batches)
            .map_err(|u| failed(entry, libc::ENOSYS, format!("{CANNOT_HAND_OVER}: {u}")))?;
        let io = |e: std::io::Error| {
            failed(
                entry,
                libc::EIO,
                format!("the built-in integration adapter cannot write its JSON file: {e}"),
            )
        };
        let scratch = Scratch::new().map_err(io)?;
        let path = scratch.write(&text).map_err(io)?;
        Ok((scratch, path))
    }

    /// The contract's symbols the adapter implements on the library's
    /// behalf: identity, `arrowcert_bytes_allocated` when the library
    /// counts its bytes, `arrowcert_produce_schema` and
    /// `arrowcert_produce_array` when it exports, `arrowcert_consume_array`
    /// when it imports.
    pub fn symbols(&self) -> Vec<&'static str> {
        let mut symbols = vec!["arrowcert_plugin_abi_version", "arrowcert_plugin_name"];
        if self.has_bytes_allocated() {
            symbols.push("arrowcert_bytes_allocated");
        }
        if self.exports() {
            symbols.extend(["arrowcert_produce_schema", "arrowcert_produce_array"]);
        }
        if self.imports() {
            symbols.push("arrowcert_consume_array");
        }
        symbols
    }
}

/// The adapter's half of the contract: the rest is `Missing`, as for a
/// plugin that does not export it.
impl Backend for Library {
    fn bytes_allocated(&self) -> Option<i64> {
        let f = self.bytes_allocated?;
        if let Some(gc) = self.run_gc {
            // SAFETY: declared `void (void)`.
            unsafe { gc() };
        }
        // SAFETY: declared `int64_t (void)`.
        Some(unsafe { f() })
    }

    fn adapts(&self) -> Option<Vec<&'static str>> {
        Some(self.entry_points())
    }

    fn produce_schema(&self, ipc: &[u8], out: &mut ArrowSchema) -> Result<(), CallError> {
        let Some((export_schema, _)) = self.export else {
            return Err(CallError::Missing("arrowcert_produce_schema"));
        };
        let entry = self.flavor.export_schema;
        let decoded = decode(entry, ipc)?;
        let (_scratch, path) = self.scenario_file(entry, &decoded.schema, &[])?;
        crate::abi::breadcrumb::step(entry);
        // SAFETY: `path` is a NUL-terminated path and `out` a writable
        // schema, both valid for the call.
        let r = unsafe { export_schema(path.as_ptr(), out) };
        self.verdict(entry, r)
    }

    fn produce_array(
        &self,
        ipc: &[u8],
        batch_index: i64,
        slice_offset: i64,
        slice_length: i64,
        out: &mut ArrowArray,
    ) -> Result<(), CallError> {
        let Some((_, export_batch)) = self.export else {
            return Err(CallError::Missing("arrowcert_produce_array"));
        };
        let entry = self.flavor.export_batch;
        let decoded = decode(entry, ipc)?;
        let batch = usize::try_from(batch_index)
            .ok()
            .and_then(|i| decoded.batches.get(i))
            .ok_or_else(|| {
                failed(
                    entry,
                    libc::EINVAL,
                    format!(
                        "batch {batch_index} asked for; the scenario has {}",
                        decoded.batches.len()
                    ),
                )
            })?;
        let whole =
            slice_offset == 0 && (slice_length == -1 || slice_length == batch.num_rows() as i64);
        if !whole {
            return Err(failed(
                entry,
                libc::ENOSYS,
                format!(
                    "slice {slice_offset}+{slice_length} asked for: the integration entry points export whole batches only"
                ),
            ));
        }
        let (_scratch, path) =
            self.scenario_file(entry, &decoded.schema, std::slice::from_ref(batch))?;
        crate::abi::breadcrumb::step(entry);
        // SAFETY: as in produce_schema; the file holds one batch, number 0.
        let r = unsafe { export_batch(path.as_ptr(), 0, out) };
        self.verdict(entry, r)
    }

    /// Hands `schema` and `array` to the import entry points, which compare
    /// them with the JSON of `sent`. On a match, what was read is `sent`:
    /// its IPC bytes are returned.
    fn consume_array(
        &self,
        schema: &mut ArrowSchema,
        array: &mut ArrowArray,
        sent: &RecordBatch,
    ) -> Result<Vec<u8>, CallError> {
        let Some((import_schema, import_batch)) = self.import else {
            return Err(CallError::Missing("arrowcert_consume_array"));
        };
        let file = self.scenario_file(
            self.flavor.import_batch,
            &sent.schema(),
            std::slice::from_ref(sent),
        );
        let (_scratch, path) = match file {
            Ok(f) => f,
            Err(e) => {
                // Refused without handing them over: released here, as a
                // consumer that refuses its input must.
                if !schema.is_released() {
                    schema.release();
                }
                if !array.is_released() {
                    array.release();
                }
                return Err(e);
            }
        };
        crate::abi::breadcrumb::step(self.flavor.import_schema);
        // SAFETY: `path` is a NUL-terminated path; `schema` and `array` are
        // the live structures the harness hands over, valid for the calls.
        // Both are handed over even when the first comparison fails, so the
        // library releases both.
        let s = unsafe { import_schema(path.as_ptr(), schema) };
        let s = self.verdict(self.flavor.import_schema, s);
        crate::abi::breadcrumb::step(self.flavor.import_batch);
        // SAFETY: as above.
        let b = unsafe { import_batch(path.as_ptr(), 0, array) };
        let b = self.verdict(self.flavor.import_batch, b);
        s?;
        b?;
        crate::sdk::ipc::encode(&sent.schema(), std::slice::from_ref(sent)).map_err(|e| {
            failed(
                self.flavor.import_batch,
                libc::EIO,
                format!("the harness cannot encode what was sent: {}", e.message),
            )
        })
    }
}

fn decode(entry: &'static str, ipc: &[u8]) -> Result<crate::sdk::ipc::Decoded, CallError> {
    crate::sdk::ipc::decode(ipc).map_err(|e| {
        failed(
            entry,
            libc::EINVAL,
            format!("the scenario's IPC stream does not decode: {}", e.message),
        )
    })
}

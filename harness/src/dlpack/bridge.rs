//! The DLPack side of the Python adapter bridge (`plugins/python/bridge.c`,
//! `arrowcert_dlpack_call`): each step (load an array, export it, rename a
//! capsule, read a tensor into the library, collect garbage) is one call
//! that returns an object handle (an owned Python reference the harness
//! drops when done) and a JSON text. The only `unsafe` of DLPack's plugin
//! calls is here.

use std::ffi::{c_char, c_void, CStr, CString};
use std::path::Path;

type CallFn = unsafe extern "C" fn(
    *const c_char,
    *const u64,
    i32,
    *const c_char,
    *mut u64,
    *mut *mut c_char,
) -> i32;
type DropFn = unsafe extern "C" fn(u64);
type FreeFn = unsafe extern "C" fn(*mut c_void);
type NameFn = unsafe extern "C" fn() -> *const c_char;
type ErrorFn = unsafe extern "C" fn() -> *const c_char;

/// An adapter loaded through the bridge, for DLPack steps.
pub struct Bridge {
    _lib: libloading::Library,
    call: CallFn,
    drop: DropFn,
    free: FreeFn,
    last_error: ErrorFn,
    /// The adapter's NAME.
    pub name: String,
    /// `dlpack_load` / `dlpack_read`, as the adapter defines them.
    pub offers: Vec<String>,
}

/// An object the bridge handed over (an owned Python reference).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Handle(pub u64);

impl Bridge {
    /// Loads the bridge copy at `path` (from [`crate::plugin::python::prepare`])
    /// and its adapter.
    pub fn open(path: &Path) -> Result<Bridge, String> {
        // Linked against no libpython: the interpreter's, first.
        crate::plugin::interpreter::preload_for(path)?;
        // SAFETY: loading runs the library's initialisers: the bridge's own
        // (it starts nothing until called), built from this checkout.
        let lib = unsafe {
            libloading::os::unix::Library::open(
                Some(path),
                libloading::os::unix::RTLD_NOW | libloading::os::unix::RTLD_LOCAL,
            )
        }
        .map_err(|e| format!("{}: {e}", path.display()))?;
        let lib: libloading::Library = lib.into();
        // SAFETY: each symbol is looked up with the type the bridge defines
        // it with (bridge.c).
        let (call, drop, free, name, load_error, last_error) = unsafe {
            let get = |n: &[u8]| -> Result<*const c_void, String> {
                lib.get::<*const c_void>(n).map(|s| *s).map_err(|_| {
                    format!(
                        "{}: not arrowcert's Python bridge (no {})",
                        path.display(),
                        String::from_utf8_lossy(&n[..n.len() - 1])
                    )
                })
            };
            (
                std::mem::transmute::<*const c_void, CallFn>(get(b"arrowcert_dlpack_call\0")?),
                std::mem::transmute::<*const c_void, DropFn>(get(b"arrowcert_dlpack_drop\0")?),
                std::mem::transmute::<*const c_void, FreeFn>(get(b"arrowcert_free\0")?),
                std::mem::transmute::<*const c_void, NameFn>(get(b"arrowcert_plugin_name\0")?),
                std::mem::transmute::<*const c_void, ErrorFn>(get(
                    b"arrowcert_plugin_load_error\0",
                )?),
                std::mem::transmute::<*const c_void, ErrorFn>(get(b"arrowcert_last_error\0")?),
            )
        };
        let text = |p: *const c_char| {
            // SAFETY: NULL or a NUL-terminated string the bridge keeps.
            (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
        };
        // SAFETY: no arguments; loads the adapter on first call.
        let name = text(unsafe { name() }).unwrap_or_default();
        // SAFETY: as above.
        if let Some(err) = text(unsafe { load_error() }) {
            return Err(format!("the adapter could not be loaded: {err}"));
        }
        let mut bridge = Bridge {
            _lib: lib,
            call,
            drop,
            free,
            last_error,
            name,
            offers: Vec::new(),
        };
        let (_, v) = bridge.call("offers", &[], "")?;
        bridge.offers = v["offers"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        Ok(bridge)
    }

    /// One step: `op` over `args` (addresses, or handles' values), with
    /// `text` (JSON). Returns the object it made, if any, and its JSON.
    pub fn call(
        &self,
        op: &str,
        args: &[u64],
        text: &str,
    ) -> Result<(Option<Handle>, serde_json::Value), String> {
        let op_c = CString::new(op).map_err(|e| e.to_string())?;
        let text_c = CString::new(text).map_err(|e| e.to_string())?;
        let mut handle = 0u64;
        let mut out: *mut c_char = std::ptr::null_mut();
        // SAFETY: the strings live across the call; args holds args.len()
        // integers; the out pointers are writable.
        let rc = unsafe {
            (self.call)(
                op_c.as_ptr(),
                args.as_ptr(),
                args.len() as i32,
                text_c.as_ptr(),
                &mut handle,
                &mut out,
            )
        };
        if rc != 0 {
            // SAFETY: NULL or the thread's NUL-terminated last error.
            let p = unsafe { (self.last_error)() };
            let msg = if p.is_null() {
                String::new()
            } else {
                // SAFETY: non-NULL, NUL-terminated, copied at once.
                unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
            };
            return Err(format!("the bridge's {op} step failed ({rc}): {msg}"));
        }
        let json = if out.is_null() {
            serde_json::Value::Null
        } else {
            // SAFETY: a malloc'd NUL-terminated string the bridge handed
            // over; copied, then freed once with its free.
            let s = unsafe { CStr::from_ptr(out) }
                .to_string_lossy()
                .into_owned();
            // SAFETY: as above.
            unsafe { (self.free)(out.cast()) };
            serde_json::from_str(&s).map_err(|e| format!("the bridge's {op} step: {e}: {s}"))?
        };
        Ok(((handle != 0).then_some(Handle(handle)), json))
    }

    /// Releases a handle (once).
    pub fn drop_handle(&self, h: Handle) {
        // SAFETY: a handle this bridge handed over, dropped once.
        unsafe { (self.drop)(h.0) }
    }
}

/// What the library raised, as the bridge describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PyError {
    pub type_name: String,
    pub mro: Vec<String>,
    pub message: String,
}

impl PyError {
    pub fn of(v: &serde_json::Value) -> Option<PyError> {
        let e = v.get("error")?;
        Some(PyError {
            type_name: e["type"].as_str().unwrap_or("").to_string(),
            mro: e["mro"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|s| s.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default(),
            message: e["message"].as_str().unwrap_or("").to_string(),
        })
    }

    /// True for BufferError and its subclasses.
    pub fn is_buffer_error(&self) -> bool {
        self.mro.iter().any(|c| c == "BufferError")
    }

    pub fn is_type_error(&self) -> bool {
        self.mro.iter().any(|c| c == "TypeError")
    }
}

impl std::fmt::Display for PyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.type_name, self.message)
    }
}

//! The contract's entry points (PLUGIN_ABI.md): their C signatures, the
//! symbol table and stream variants, and the entry points a loaded library
//! resolved.

use super::*;

pub(super) type AbiVersionFn = unsafe extern "C" fn() -> i32;
pub(super) type NameFn = unsafe extern "C" fn() -> *const c_char;
pub(super) type SupportsDeviceFn = unsafe extern "C" fn(i32) -> i32;
pub(super) type BytesAllocatedFn = unsafe extern "C" fn() -> i64;
pub(super) type LastErrorFn = unsafe extern "C" fn() -> *const c_char;
pub(super) type FreeFn = unsafe extern "C" fn(*mut c_void);
pub(super) type ProduceSchemaFn = unsafe extern "C" fn(*const u8, i64, *mut ArrowSchema) -> c_int;
pub(super) type ProduceDeviceArrayFn =
    unsafe extern "C" fn(*const u8, i64, i64, i64, i64, i32, i64, *mut ArrowDeviceArray) -> c_int;
pub(super) type ProduceDeviceStreamFn =
    unsafe extern "C" fn(*const u8, i64, i32, i64, *mut ArrowDeviceArrayStream) -> c_int;
pub(super) type ProduceAsyncFn =
    unsafe extern "C" fn(*const u8, i64, i32, i64, *mut ArrowAsyncDeviceStreamHandler) -> c_int;
pub(super) type ProduceArrayFn =
    unsafe extern "C" fn(*const u8, i64, i64, i64, i64, *mut ArrowArray) -> c_int;
pub(super) type ProduceStreamFn =
    unsafe extern "C" fn(*const u8, i64, *mut ArrowArrayStream) -> c_int;
pub(super) type ProduceSlicedStreamFn =
    unsafe extern "C" fn(*const u8, i64, i64, i64, *mut ArrowArrayStream) -> c_int;
pub(super) type ProduceSlicedDeviceStreamFn =
    unsafe extern "C" fn(*const u8, i64, i64, i64, i32, i64, *mut ArrowDeviceArrayStream) -> c_int;
pub(super) type ProduceSlicedAsyncFn = unsafe extern "C" fn(
    *const u8,
    i64,
    i64,
    i64,
    i32,
    i64,
    *mut ArrowAsyncDeviceStreamHandler,
) -> c_int;
pub(super) type ProduceSlicedStreamS =
    unsafe extern "C" fn(*mut ArrowArrayStream, i64, i64, *mut ArrowArrayStream) -> c_int;
pub(super) type ProduceSlicedDeviceStreamS = unsafe extern "C" fn(
    *mut ArrowArrayStream,
    i64,
    i64,
    i32,
    i64,
    *mut ArrowDeviceArrayStream,
) -> c_int;
pub(super) type ProduceObjectFn =
    unsafe extern "C" fn(*const u8, i64, i64, i64, i64, *mut *mut c_void) -> c_int;
pub(super) type ProduceObjectS =
    unsafe extern "C" fn(*mut ArrowArrayStream, *mut *mut c_void) -> c_int;
pub(super) type ExportObjectFn = unsafe extern "C" fn(*mut c_void, *mut ArrowArray) -> c_int;
pub(super) type ReleaseObjectFn = unsafe extern "C" fn(*mut c_void);
pub(super) type ProduceArraySchemaFn =
    unsafe extern "C" fn(*const u8, i64, i64, i64, i64, *mut ArrowSchema) -> c_int;
pub(super) type ConsumeDeviceArrayFn =
    unsafe extern "C" fn(*mut ArrowSchema, *mut ArrowDeviceArray, *mut *mut u8, *mut i64) -> c_int;
pub(super) type ConsumeDeviceStreamFn =
    unsafe extern "C" fn(*mut ArrowDeviceArrayStream, *mut *mut u8, *mut i64) -> c_int;
pub(super) type ConsumeArrayFn =
    unsafe extern "C" fn(*mut ArrowSchema, *mut ArrowArray, *mut *mut u8, *mut i64) -> c_int;
pub(super) type ConsumeStreamFn =
    unsafe extern "C" fn(*mut ArrowArrayStream, *mut *mut u8, *mut i64) -> c_int;
pub(super) type ConsumeAsyncStartFn =
    unsafe extern "C" fn(*mut ArrowAsyncDeviceStreamHandler, *mut *mut c_void) -> c_int;
pub(super) type AttachEmulatedFn =
    unsafe extern "C" fn(*const crate::device::emulated_ffi::ArrowcertEmulatedDevice) -> c_int;
pub(super) type ConsumeAsyncFinishFn =
    unsafe extern "C" fn(*mut c_void, i64, *mut *mut u8, *mut i64) -> c_int;
pub(super) type ConsumeAsyncCancelFn = unsafe extern "C" fn(*mut c_void) -> c_int;
pub(super) type OffersFn = unsafe extern "C" fn(*const c_char) -> i32;
pub(super) type ProduceSchemaS =
    unsafe extern "C" fn(*mut ArrowArrayStream, *mut ArrowSchema) -> c_int;
pub(super) type ProduceArrayS =
    unsafe extern "C" fn(*mut ArrowArrayStream, *mut ArrowArray) -> c_int;
pub(super) type ProduceArraySchemaS =
    unsafe extern "C" fn(*mut ArrowArrayStream, *mut ArrowSchema) -> c_int;
pub(super) type ProduceDeviceArrayS =
    unsafe extern "C" fn(*mut ArrowArrayStream, i32, i64, *mut ArrowDeviceArray) -> c_int;
pub(super) type ProduceStreamS =
    unsafe extern "C" fn(*mut ArrowArrayStream, *mut ArrowArrayStream) -> c_int;
pub(super) type ProduceDeviceStreamS =
    unsafe extern "C" fn(*mut ArrowArrayStream, i32, i64, *mut ArrowDeviceArrayStream) -> c_int;
pub(super) type ConsumeArrayS =
    unsafe extern "C" fn(*mut ArrowSchema, *mut ArrowArray, *mut ArrowArrayStream) -> c_int;
pub(super) type ConsumeDeviceArrayS =
    unsafe extern "C" fn(*mut ArrowSchema, *mut ArrowDeviceArray, *mut ArrowArrayStream) -> c_int;
pub(super) type ConsumeStreamS =
    unsafe extern "C" fn(*mut ArrowArrayStream, *mut ArrowArrayStream) -> c_int;
pub(super) type ConsumeDeviceStreamS =
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
pub(super) struct Entries {
    pub(super) supports_device: Option<SupportsDeviceFn>,
    pub(super) bytes_allocated: Option<BytesAllocatedFn>,
    pub(super) last_error: Option<LastErrorFn>,
    pub(super) free: Option<FreeFn>,
    pub(super) produce_schema: Option<ProduceSchemaFn>,
    pub(super) produce_device_array: Option<ProduceDeviceArrayFn>,
    pub(super) produce_device_stream: Option<ProduceDeviceStreamFn>,
    pub(super) produce_async: Option<ProduceAsyncFn>,
    pub(super) produce_array: Option<ProduceArrayFn>,
    pub(super) produce_stream: Option<ProduceStreamFn>,
    pub(super) produce_array_schema: Option<ProduceArraySchemaFn>,
    pub(super) produce_object: Option<ProduceObjectFn>,
    pub(super) export_object: Option<ExportObjectFn>,
    pub(super) release_object: Option<ReleaseObjectFn>,
    pub(super) produce_sliced_stream: Option<ProduceSlicedStreamFn>,
    pub(super) produce_sliced_device_stream: Option<ProduceSlicedDeviceStreamFn>,
    pub(super) produce_sliced_async: Option<ProduceSlicedAsyncFn>,
    pub(super) consume_device_array: Option<ConsumeDeviceArrayFn>,
    pub(super) consume_device_stream: Option<ConsumeDeviceStreamFn>,
    pub(super) consume_array: Option<ConsumeArrayFn>,
    pub(super) consume_stream: Option<ConsumeStreamFn>,
    pub(super) consume_async_start: Option<ConsumeAsyncStartFn>,
    pub(super) consume_async_finish: Option<ConsumeAsyncFinishFn>,
    pub(super) consume_async_cancel: Option<ConsumeAsyncCancelFn>,
    /// An independent view of what the last consume call read (JSON).
    pub(super) consume_values: Option<LastErrorFn>,
    /// The stream variants ([`streamed`]): data in as a stream, what was
    /// read back as a stream.
    pub(super) produce_schema_s: Option<ProduceSchemaS>,
    pub(super) produce_array_s: Option<ProduceArrayS>,
    pub(super) produce_array_schema_s: Option<ProduceArraySchemaS>,
    pub(super) produce_object_s: Option<ProduceObjectS>,
    pub(super) produce_device_array_s: Option<ProduceDeviceArrayS>,
    pub(super) produce_stream_s: Option<ProduceStreamS>,
    pub(super) produce_device_stream_s: Option<ProduceDeviceStreamS>,
    pub(super) produce_sliced_stream_s: Option<ProduceSlicedStreamS>,
    pub(super) produce_sliced_device_stream_s: Option<ProduceSlicedDeviceStreamS>,
    pub(super) consume_array_s: Option<ConsumeArrayS>,
    pub(super) consume_device_array_s: Option<ConsumeDeviceArrayS>,
    pub(super) consume_stream_s: Option<ConsumeStreamS>,
    pub(super) consume_device_stream_s: Option<ConsumeDeviceStreamS>,
}

impl Entries {
    /// Drops the entry points (and their stream variants) not in
    /// `offered`: those the plugin said it does not serve.
    pub(super) fn mask(&mut self, offered: &[&str]) {
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

    pub(super) fn last_error(&self) -> Option<String> {
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

    pub(super) fn take_output(&self, ptr: *mut u8, len: i64) -> Vec<u8> {
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

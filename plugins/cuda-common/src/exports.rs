//! The macros that emit a CUDA plugin's entry points.
//!
//! Entry points are `#[no_mangle]` symbols, and two cdylibs that took them
//! from one rlib would not link: so this crate defines none, and each plugin
//! crate emits its own with one macro call, naming itself and the function
//! that picks its fault.

/// Emits the identity symbols and the producer entry points of a CUDA
/// producer plugin: `arrowcert_plugin_abi_version`, `arrowcert_plugin_name`,
/// `arrowcert_plugin_supports_device`, `arrowcert_bytes_allocated`,
/// `arrowcert_last_error`, `arrowcert_free`, `arrowcert_produce_schema`,
/// `arrowcert_produce_device_array` and `arrowcert_produce_device_stream`.
///
/// `$name` is a `&'static CStr`; `$mutation` a
/// [`crate::producer::Mutation`].
#[macro_export]
macro_rules! producer_plugin {
    ($name:expr, $mutation:expr) => {
        $crate::identity_symbols!($name);

        /// "Bytes the plugin currently holds for data it exported"
        /// (PLUGIN_ABI.md): the device memory its exports hold.
        #[no_mangle]
        pub extern "C" fn arrowcert_bytes_allocated() -> i64 {
            $crate::device::bytes_held()
        }

        /// The stream's schema.
        ///
        /// # Safety
        /// `ipc` must point to `ipc_len` readable bytes (or `ipc_len` be 0);
        /// `out` must be NULL or valid for writes of one `ArrowSchema`.
        #[no_mangle]
        pub unsafe extern "C" fn arrowcert_produce_schema(
            ipc: *const u8,
            ipc_len: i64,
            out: *mut $crate::arrowcert_sdk::abi::ArrowSchema,
        ) -> ::std::ffi::c_int {
            // SAFETY: forwarded from the caller.
            unsafe { $crate::producer::produce_schema(ipc, ipc_len, out) }
        }

        /// One (sliced) batch as a device array on a CUDA kind.
        ///
        /// # Safety
        /// `ipc` must point to `ipc_len` readable bytes (or `ipc_len` be 0);
        /// `out` must be NULL or valid for writes of one `ArrowDeviceArray`.
        #[no_mangle]
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "C" fn arrowcert_produce_device_array(
            ipc: *const u8,
            ipc_len: i64,
            batch_index: i64,
            slice_offset: i64,
            slice_length: i64,
            device_type: i32,
            device_id: i64,
            out: *mut $crate::arrowcert_sdk::abi::ArrowDeviceArray,
        ) -> ::std::ffi::c_int {
            // SAFETY: forwarded from the caller.
            unsafe {
                $crate::producer::produce_device_array(
                    ipc,
                    ipc_len,
                    batch_index,
                    slice_offset,
                    slice_length,
                    device_type,
                    device_id,
                    out,
                    $mutation,
                )
            }
        }

        /// Every batch as a device stream on a CUDA kind.
        ///
        /// # Safety
        /// `ipc` must point to `ipc_len` readable bytes (or `ipc_len` be 0);
        /// `out` must be NULL or valid for writes of one
        /// `ArrowDeviceArrayStream`.
        #[no_mangle]
        pub unsafe extern "C" fn arrowcert_produce_device_stream(
            ipc: *const u8,
            ipc_len: i64,
            device_type: i32,
            device_id: i64,
            out: *mut $crate::arrowcert_sdk::abi::ArrowDeviceArrayStream,
        ) -> ::std::ffi::c_int {
            // SAFETY: forwarded from the caller.
            unsafe {
                $crate::producer::produce_device_stream(
                    ipc,
                    ipc_len,
                    device_type,
                    device_id,
                    out,
                    $mutation,
                )
            }
        }
    };
}

/// Emits the identity symbols and the consumer entry points of a CUDA
/// consumer plugin: the identity symbols, `arrowcert_consume_device_array`
/// and `arrowcert_consume_device_stream`.
///
/// `$name` is a `&'static CStr`; `$mutation` a
/// [`crate::consumer::Mutation`].
#[macro_export]
macro_rules! consumer_plugin {
    ($name:expr, $mutation:expr) => {
        $crate::identity_symbols!($name);

        /// Moves, waits on `sync_event`, copies to the host, reads, releases,
        /// and hands back one IPC stream.
        ///
        /// # Safety
        /// `schema` and `array` must each be NULL or valid for reads and
        /// writes and hold a released or live structure; `out_ipc` and
        /// `out_len` must be NULL or valid for writes.
        #[no_mangle]
        pub unsafe extern "C" fn arrowcert_consume_device_array(
            schema: *mut $crate::arrowcert_sdk::abi::ArrowSchema,
            array: *mut $crate::arrowcert_sdk::abi::ArrowDeviceArray,
            out_ipc: *mut *mut u8,
            out_len: *mut i64,
        ) -> ::std::ffi::c_int {
            // SAFETY: forwarded from the caller.
            unsafe {
                $crate::consumer::consume_device_array(schema, array, out_ipc, out_len, $mutation)
            }
        }

        /// Reads a device stream to its end, as the device array entry point
        /// reads each chunk.
        ///
        /// # Safety
        /// `stream` must be NULL or valid for reads and writes and hold a
        /// released or live stream; `out_ipc` and `out_len` must be NULL or
        /// valid for writes.
        #[no_mangle]
        pub unsafe extern "C" fn arrowcert_consume_device_stream(
            stream: *mut $crate::arrowcert_sdk::abi::ArrowDeviceArrayStream,
            out_ipc: *mut *mut u8,
            out_len: *mut i64,
        ) -> ::std::ffi::c_int {
            // SAFETY: forwarded from the caller.
            unsafe { $crate::consumer::consume_device_stream(stream, out_ipc, out_len, $mutation) }
        }
    };
}

/// The identity symbols every plugin has (PLUGIN_ABI.md, "Identity"), and
/// `arrowcert_last_error` / `arrowcert_free`.
#[doc(hidden)]
#[macro_export]
macro_rules! identity_symbols {
    ($name:expr) => {
        /// "must return 1" (PLUGIN_ABI.md).
        #[no_mangle]
        pub extern "C" fn arrowcert_plugin_abi_version() -> i32 {
            1
        }

        /// "static UTF-8": a `'static` C string literal.
        #[no_mangle]
        pub extern "C" fn arrowcert_plugin_name() -> *const ::std::ffi::c_char {
            let name: &'static ::std::ffi::CStr = $name;
            name.as_ptr()
        }

        /// 1 for ARROW_DEVICE_CUDA, ARROW_DEVICE_CUDA_HOST and
        /// ARROW_DEVICE_CUDA_MANAGED, 0 for everything else (CPU included).
        #[no_mangle]
        pub extern "C" fn arrowcert_plugin_supports_device(device_type: i32) -> i32 {
            i32::from($crate::device::supports(device_type))
        }

        /// The message of the last failing call on this thread, NULL if none.
        #[no_mangle]
        pub extern "C" fn arrowcert_last_error() -> *const ::std::ffi::c_char {
            $crate::arrowcert_sdk::last_error_ptr()
        }

        /// Frees the IPC bytes a consume call handed out.
        ///
        /// # Safety
        /// `ptr` must be NULL or memory this plugin handed out, freed once.
        #[no_mangle]
        pub unsafe extern "C" fn arrowcert_free(ptr: *mut ::std::ffi::c_void) {
            // SAFETY: forwarded from the caller.
            unsafe { $crate::arrowcert_sdk::out::free(ptr) }
        }
    };
}

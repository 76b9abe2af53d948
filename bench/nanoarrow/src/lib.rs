//! nanoarrow's validation, for the benchmark that compares arrowcert's
//! validator with it (`benches/validate.rs`). Empty unless the `nanoarrow`
//! feature is on; with it, build.rs compiles nanoarrow's C sources, taken
//! from its PyPI source distribution at build time.

#[cfg(feature = "nanoarrow")]
pub mod nanoarrow {
    use std::ffi::{c_char, CStr};

    use arrowcert::abi::{ArrowArray, ArrowSchema};

    /// `enum ArrowValidationLevel`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    #[repr(i32)]
    pub enum Level {
        /// Lengths, offsets and buffer sizes that need no buffer read.
        Minimal = 1,
        /// Minimal, plus the first and last offsets of offset buffers.
        Default = 2,
        /// Default, plus every offset, union type id, run end and
        /// dictionary index.
        Full = 3,
    }

    extern "C" {
        fn arrowcert_nanoarrow_validate(
            schema: *const ArrowSchema,
            array: *const ArrowArray,
            level: i32,
            message: *mut c_char,
            message_len: i64,
        ) -> i32;
        fn arrowcert_nanoarrow_validate_full_and_null_counts(
            schema: *const ArrowSchema,
            array: *const ArrowArray,
        ) -> i64;
        fn arrowcert_nanoarrow_version() -> *const c_char;
    }

    /// The nanoarrow version compiled in.
    pub fn version() -> String {
        // SAFETY: returns a static NUL-terminated string literal.
        unsafe { CStr::from_ptr(arrowcert_nanoarrow_version()) }
            .to_string_lossy()
            .into_owned()
    }

    /// `ArrowArrayViewInitFromSchema`, `ArrowArrayViewSetArray` (or
    /// `SetArrayMinimal` for [`Level::Minimal`]) and
    /// `ArrowArrayViewValidate(level)`; the error message on failure.
    ///
    /// # Safety
    /// `schema` and `array` must be live structures that follow the C data
    /// interface (nanoarrow trusts every pointer in them).
    pub unsafe fn validate(
        schema: &ArrowSchema,
        array: &ArrowArray,
        level: Level,
    ) -> Result<(), String> {
        let mut message = [0 as c_char; 1024];
        // SAFETY: the caller vouches for the structures; `message` is a
        // writable buffer of the length passed.
        let rc = unsafe {
            arrowcert_nanoarrow_validate(
                schema,
                array,
                level as i32,
                message.as_mut_ptr(),
                message.len() as i64,
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            // SAFETY: the shim NUL-terminates within the buffer.
            let text = unsafe { CStr::from_ptr(message.as_ptr()) };
            Err(format!("errno {rc}: {}", text.to_string_lossy()))
        }
    }

    /// Full validation, then every node's null count checked against its
    /// validity bitmap (`ArrowBitCountSet`): the same work as arrowcert's
    /// validator does on plain arrays. `None` when validation failed, else
    /// the number of nodes whose null count is wrong.
    ///
    /// # Safety
    /// As for [`validate`].
    pub unsafe fn validate_full_and_null_counts(
        schema: &ArrowSchema,
        array: &ArrowArray,
    ) -> Option<u64> {
        // SAFETY: forwarded from the caller.
        let n = unsafe { arrowcert_nanoarrow_validate_full_and_null_counts(schema, array) };
        u64::try_from(n).ok()
    }
}

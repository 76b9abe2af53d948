//! Fault-injection producer in Rust: `arrowcert_produce_schema` and
//! `arrowcert_produce_array` panic.
//!
//! A Rust library that exports the C interface through `extern "C"`
//! functions and panics inside one: since Rust 1.81 the panic cannot unwind
//! out of the function and the process aborts, printing the panic message.
//! The harness must report that as a crash of the case, with the message.
//!
//!   rustc --edition 2021 --crate-type cdylib -o libfaulty_panic.so faulty_panic.rs

use std::ffi::{c_char, c_int};

#[no_mangle]
pub extern "C" fn arrowcert_plugin_abi_version() -> i32 {
    1
}

#[no_mangle]
pub extern "C" fn arrowcert_plugin_name() -> *const c_char {
    c"arrowcert faulty producer (Rust panic)".as_ptr()
}

#[no_mangle]
pub extern "C" fn arrowcert_last_error() -> *const c_char {
    c"injected fault".as_ptr()
}

fn batch_count(batch: i64) -> c_int {
    let batches: Vec<i64> = Vec::new();
    // Indexing out of bounds: the classic way a plugin panics.
    batches[batch as usize] as c_int
}

/// # Safety
/// Never touches its arguments: it panics first.
#[no_mangle]
pub unsafe extern "C" fn arrowcert_produce_schema(
    _ipc: *const u8,
    len: i64,
    _out: *mut u8,
) -> c_int {
    batch_count(len)
}

/// # Safety
/// Never touches its arguments: it panics first.
#[no_mangle]
pub unsafe extern "C" fn arrowcert_produce_array(
    _ipc: *const u8,
    _len: i64,
    batch: i64,
    _offset: i64,
    _length: i64,
    _out: *mut u8,
) -> c_int {
    batch_count(batch)
}

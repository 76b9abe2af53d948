//! arrow-rs alone (no arrowcert code): `from_ffi` of a valid utf8 array
//! whose offsets buffer is not 4-byte aligned.
//!
//! CDataInterface.rst: "It is recommended, but not required, that the
//! memory addresses of the buffers be aligned at least according to the
//! type of primitive data that they contain. Consumers MAY decide not to
//! support unaligned memory." arrow-rs 60.1.0 realigns the buffers it
//! builds, but first reads the last offset through a typed `*const i32`
//! (arrow-array `ffi.rs`, `buffer_len`: "we assume that pointer is aligned
//! for `i32`"): undefined behaviour, which a build with debug assertions
//! (cargo's dev profile) stops with "misaligned pointer dereference" and
//! an abort, where a refusal was the permitted answer.
//!
//! Run: `cargo run -p arrowcert-consumer-arrow-rs --example unaligned_offsets`
//! (aborts, exit 134); with `--release` it prints the values.

use std::ffi::c_void;

use arrow_array::ffi::{from_ffi, FFI_ArrowArray, FFI_ArrowSchema};
use arrow_array::{make_array, Array, StringArray};
use arrow_schema::DataType;

/// `struct ArrowArray`, written by hand so that the buffers can be ours.
#[repr(C)]
struct RawArray {
    length: i64,
    null_count: i64,
    offset: i64,
    n_buffers: i64,
    n_children: i64,
    buffers: *mut *const c_void,
    children: *mut *mut RawArray,
    dictionary: *mut RawArray,
    release: Option<unsafe extern "C" fn(*mut RawArray)>,
    private_data: *mut c_void,
}

/// # Safety
/// `a` is the live structure this release callback was installed in (or moved
/// to), called as the C data interface calls a release callback.
unsafe extern "C" fn release(a: *mut RawArray) {
    // SAFETY: arrow-rs passes the array it owns.
    unsafe { (*a).release = None };
}

fn main() {
    // Offsets [0, 2, 5] one byte past an 8-byte boundary; values "abcde".
    let mut storage = vec![0u64; 4];
    let base = storage.as_mut_ptr().cast::<u8>();
    for (i, v) in [0i32, 2, 5].iter().enumerate() {
        // SAFETY: within `storage` (32 bytes).
        unsafe { std::ptr::copy_nonoverlapping(v.to_ne_bytes().as_ptr(), base.add(1 + 4 * i), 4) };
    }
    let values = b"abcde".to_vec();
    let mut buffers: Vec<*const c_void> = vec![
        std::ptr::null(),
        // SAFETY: within `storage`.
        unsafe { base.add(1) }.cast(),
        values.as_ptr().cast(),
    ];
    let mut raw = RawArray {
        length: 2,
        null_count: 0,
        offset: 0,
        n_buffers: 3,
        n_children: 0,
        buffers: buffers.as_mut_ptr(),
        children: std::ptr::null_mut(),
        dictionary: std::ptr::null_mut(),
        release: Some(release),
        private_data: std::ptr::null_mut(),
    };
    let offsets = buffers[1];
    println!(
        "offsets at {offsets:p} (address mod 4 = {})",
        offsets as usize % 4
    );
    let schema = FFI_ArrowSchema::try_from(&DataType::Utf8).expect("schema");
    // SAFETY: `struct ArrowArray` has this layout; the array is valid by the
    // C data interface (aligned buffers are only recommended).
    let array = unsafe { FFI_ArrowArray::from_raw((&mut raw as *mut RawArray).cast()) };
    // SAFETY: a valid array of the schema's type.
    let data = unsafe { from_ffi(array, &schema) }.expect("import");
    let strings = make_array(data);
    let strings = strings
        .as_any()
        .downcast_ref::<StringArray>()
        .expect("utf8");
    println!(
        "read {} values: {:?}",
        strings.len(),
        strings.iter().collect::<Vec<_>>()
    );
}

//! The raw operations producer certification performs on what a producer
//! exported: validating, moving children out, calling stream callbacks
//! (from other threads too), and importing validated data into arrow-rs.
//!
//! These functions are safe to call on any structure the harness owns: each
//! checks what it can (NULL, poison, counts) before following a pointer,
//! and certification calls them only on structures that passed validation.
//! A producer that writes a pointer that is neither NULL nor poison nor
//! valid can still crash the process; certification runs in worker
//! processes, where that is a `crash` verdict for the case, never a crash
//! of the run.

use std::ffi::{c_int, CStr};

use arrow_array::ffi::{from_ffi, FFI_ArrowArray, FFI_ArrowSchema};
use arrow_array::{Array, ArrayRef, RecordBatch, StructArray};
use arrow_schema::Schema;

use crate::abi::ops::{callable, Guard, Owned};
use crate::abi::{
    is_poison_ptr, ArrowArray, ArrowArrayStream, ArrowDeviceArray, ArrowDeviceArrayStream,
    ArrowSchema,
};

/// Moves child `i` out of a live array, as "Moving child arrays"
/// (CDataInterface.rst) allows: a bitwise copy into a structure of the
/// harness's own, and the child in the parent marked released.
///
/// Call it on an array that passed [`super::validate_array`].
pub fn take_child_array(array: &mut ArrowArray, i: usize) -> Option<Guard<ArrowArray>> {
    let child = child_ptr(array.children, array.n_children, i)?;
    // SAFETY: `child_ptr` checked the children array and the entry (non-NULL,
    // not poison, i < n_children); validation checked the child structure,
    // which the parent owns and we borrow exclusively through `array`.
    let child: &mut ArrowArray = unsafe { &mut *child };
    if child.is_released() {
        return None;
    }
    Some(Guard::new(crate::abi::ops::take(child)))
}

/// The same for a schema's child.
///
/// Call it on a schema that passed [`super::validate_schema`].
pub fn take_child_schema(schema: &mut ArrowSchema, i: usize) -> Option<Guard<ArrowSchema>> {
    let child = child_ptr(schema.children, schema.n_children, i)?;
    // SAFETY: as for arrays above.
    let child: &mut ArrowSchema = unsafe { &mut *child };
    if child.is_released() {
        return None;
    }
    Some(Guard::new(crate::abi::ops::take(child)))
}

/// Child `i` of a schema that passed [`super::validate_schema`] (for
/// validating a moved child array against it).
pub fn child_schema(schema: &ArrowSchema, i: usize) -> Option<&ArrowSchema> {
    let child = child_ptr(schema.children, schema.n_children, i)?;
    // SAFETY: checked by `child_ptr`; the child lives as long as the parent
    // it belongs to, which `schema` borrows.
    Some(unsafe { &*child })
}

/// Entry `i` of a children array, if the array and the entry are neither
/// NULL nor poison and `i < n`.
fn child_ptr<T>(children: *mut *mut T, n: i64, i: usize) -> Option<*mut T> {
    if children.is_null() || is_poison_ptr(children as usize) || i as i64 >= n || n > 1 << 16 {
        return None;
    }
    // SAFETY: `children` is non-NULL, not poison, and the producer declared
    // n (> i) entries; validation read the same entries.
    let child = unsafe { *children.add(i) };
    (!child.is_null() && !is_poison_ptr(child as usize)).then_some(child)
}

/// Validates a schema (see [`super::validate_schema`]).
pub fn check_schema(schema: &ArrowSchema) -> Vec<super::Violation> {
    // SAFETY: `schema` is a readable ArrowSchema (a reference); the
    // validator checks every nested pointer before following it.
    unsafe { super::validate_schema(schema) }
}

/// Validates an array against a schema that passed [`check_schema`].
pub fn check_array(schema: &ArrowSchema, array: &ArrowArray) -> Vec<super::Violation> {
    // SAFETY: both are readable structures (references); the validator
    // checks every nested pointer before following it.
    unsafe { super::validate_array(schema, array) }
}

/// Pointer members of a schema that point inside the structure itself (see
/// [`super::validate::schema_self_refs`]); call it before moving the
/// structure, since a moved copy no longer points into itself.
pub fn schema_self_refs(schema: &ArrowSchema) -> Vec<String> {
    super::validate::schema_self_refs(schema)
}

/// The same for an array: its pointer members, and its buffer pointers
/// when its layout lets them be read (see
/// [`super::validate::array_self_refs`]). `schema` must have passed
/// [`check_schema`].
pub fn array_self_refs(schema: &ArrowSchema, array: &ArrowArray) -> Vec<String> {
    // SAFETY: readable structures (references); the buffers pointer is
    // checked (NULL, poison, alignment, the format's count) before its
    // entries are read.
    unsafe { super::validate::array_self_refs(schema, array) }
}

unsafe extern "C" fn borrowed_release(a: *mut ArrowArray) {
    // SAFETY: arrow-rs calls this once, on the bitwise copy it owns, which
    // is a valid structure; only its release member is written.
    unsafe { (*a).release = None }
}

/// Reads a validated array into arrow-rs without taking it: arrow-rs gets a
/// bitwise copy whose release only marks the copy released, so the
/// producer's structure stays live (and is released by its owner later).
/// Drop the result before releasing `array`.
///
/// Call it only on a schema and array that passed validation against each
/// other: arrow-rs trusts what it imports.
pub fn read_array(schema: &ArrowSchema, array: &ArrowArray) -> Result<ArrayRef, String> {
    // SAFETY: same repr(C) layouts (checked at compile time in
    // abi::arrow_rs); the schema is only read during this call.
    let ffi_schema: &FFI_ArrowSchema = unsafe { &*(schema as *const ArrowSchema).cast() };
    // SAFETY: a bitwise copy of a live array (plain repr(C) data); its
    // release is replaced at once, so the producer's callback runs only for
    // the original, by its owner.
    let mut copy: ArrowArray = unsafe { std::ptr::read(array) };
    copy.release = Some(borrowed_release);
    // SAFETY: same layout as above; the copy moves into arrow-rs.
    let ffi_array: FFI_ArrowArray = unsafe { std::mem::transmute(copy) };
    // SAFETY: validated against this schema (caller); the buffers stay
    // valid while `array` is live, which the caller keeps it.
    let data = unsafe { from_ffi(ffi_array, ffi_schema) }.map_err(|e| e.to_string())?;
    Ok(arrow_array::make_array(data))
}

/// Imports a validated struct array as a record batch without taking the
/// schema (it stays the harness's, to validate more chunks against); the
/// array is moved into arrow-rs, which releases it when the batch drops.
///
/// Call it only on a schema and array that passed validation against each
/// other, with a struct (`+s`) root: arrow-rs trusts what it imports.
pub fn import_batch(
    schema: &ArrowSchema,
    array: &mut Guard<ArrowArray>,
) -> Result<RecordBatch, String> {
    // SAFETY: ArrowSchema and FFI_ArrowSchema are the same repr(C) layout
    // (checked at compile time in abi::arrow_rs); the reference is only
    // read, and lives for this call.
    let ffi_schema: &FFI_ArrowSchema = unsafe { &*(schema as *const ArrowSchema).cast() };
    let arrow_schema = Schema::try_from(ffi_schema).map_err(|e| e.to_string())?;
    let moved = crate::abi::ops::take(&mut **array);
    // SAFETY: same layout as above; ownership of the live array moves into
    // arrow-rs (the guard was marked released by `take`).
    let ffi_array: FFI_ArrowArray = unsafe { std::mem::transmute(moved) };
    // SAFETY: the caller validated the array against this schema.
    let data = unsafe { from_ffi(ffi_array, ffi_schema) }.map_err(|e| e.to_string())?;
    let root = StructArray::from(data);
    crate::abi::arrow_rs::batch_from_struct(std::sync::Arc::new(arrow_schema), root)
        .map_err(|e| e.to_string())
}

/// A deep copy of an array: new buffers, no reference to producer memory.
pub fn deep_copy_array(c: &ArrayRef) -> ArrayRef {
    let data = c.to_data();
    let mut copy = arrow_data::transform::MutableArrayData::new(vec![&data], false, c.len());
    copy.try_extend(0, 0, c.len())
        .expect("copying an imported array fits");
    arrow_array::make_array(copy.freeze())
}

/// A deep copy of a batch: new buffers, no reference to producer memory.
pub fn deep_copy(batch: &RecordBatch) -> RecordBatch {
    let columns: Vec<ArrayRef> = batch.columns().iter().map(deep_copy_array).collect();
    RecordBatch::try_new_with_options(
        batch.schema(),
        columns,
        &arrow_array::RecordBatchOptions::new().with_row_count(Some(batch.num_rows())),
    )
    .expect("a copy of a valid batch is valid")
}

/// A stream callback's result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    Returned(c_int),
    /// The callback member is NULL or was never written (poison).
    NotSet,
}

/// What `get_last_error` returned: `None` for NULL, else the bytes (before
/// any UTF-8 check, which is the caller's rule to judge).
pub type LastError = Option<Vec<u8>>;

/// A stream of either kind, for the calls certification makes.
pub trait StreamCalls: Owned {
    type Chunk: Owned;
    fn get_schema(&mut self, out: &mut ArrowSchema) -> Call;
    fn get_next(&mut self, out: &mut Self::Chunk) -> Call;
    fn get_last_error(&mut self) -> Option<LastError>;
}

/// Reads a NUL-terminated string a producer returned, at most 64 KiB.
///
/// # Safety
/// `p` must be NULL or point to a NUL-terminated string.
unsafe fn last_error_bytes(p: *const std::ffi::c_char) -> LastError {
    if p.is_null() {
        return None;
    }
    // SAFETY: non-NULL and NUL-terminated per the caller.
    let bytes = unsafe { CStr::from_ptr(p) }.to_bytes();
    Some(bytes[..bytes.len().min(64 * 1024)].to_vec())
}

macro_rules! stream_calls {
    ($stream:ty, $chunk:ty) => {
        impl StreamCalls for $stream {
            type Chunk = $chunk;
            fn get_schema(&mut self, out: &mut ArrowSchema) -> Call {
                match callable(self.get_schema) {
                    // SAFETY: the producer installed this callback on this
                    // live stream; `out` is a valid out-structure. A broken
                    // producer crashes the worker, which is a verdict.
                    Some(f) => Call::Returned(unsafe { f(self, out) }),
                    None => Call::NotSet,
                }
            }
            fn get_next(&mut self, out: &mut $chunk) -> Call {
                match callable(self.get_next) {
                    // SAFETY: as above.
                    Some(f) => Call::Returned(unsafe { f(self, out) }),
                    None => Call::NotSet,
                }
            }
            fn get_last_error(&mut self) -> Option<LastError> {
                let f = callable(self.get_last_error)?;
                // SAFETY: as above; the result is NULL or a NUL-terminated
                // string valid until the next call on this stream, copied
                // at once.
                Some(unsafe { last_error_bytes(f(self)) })
            }
        }
    };
}

stream_calls!(ArrowArrayStream, ArrowArray);
stream_calls!(ArrowDeviceArrayStream, ArrowDeviceArray);

/// Raw pointers handed to another thread for one call; the calling thread
/// waits for it, so calls stay serialized as the spec requires.
struct SendPtr<T>(*mut T);
// SAFETY: used only by `get_next_on_thread`, which joins the thread before
// returning, so the pointees are never accessed concurrently.
unsafe impl<T> Send for SendPtr<T> {}

/// Calls `get_next` from a fresh thread and waits for it: "serialized
/// calls from different threads" (stream.threads.serial).
pub fn get_next_on_thread<S: StreamCalls>(stream: &mut S, out: &mut S::Chunk) -> Call {
    let s = SendPtr(stream as *mut S);
    let o = SendPtr(out as *mut S::Chunk);
    std::thread::scope(|scope| {
        scope
            .spawn(move || {
                let (s, o) = (s, o);
                // SAFETY: both pointers come from exclusive borrows held by
                // this function until the thread is joined below.
                unsafe { (*s.0).get_next(&mut *o.0) }
            })
            .join()
            .unwrap_or(Call::NotSet)
    })
}

/// The device fields of a device array, copied out.
pub fn device_fields(a: &ArrowDeviceArray) -> (i32, i64, usize, [i64; 3]) {
    (
        a.device_type,
        a.device_id,
        a.sync_event as usize,
        a.reserved,
    )
}

//! Conversions between arrowcert's ABI structs and arrow-rs's FFI structs.
//!
//! arrow-rs's `FFI_ArrowSchema`, `FFI_ArrowArray` and `FFI_ArrowArrayStream`
//! are `#[repr(C)]` definitions of the same C structs; the compile-time
//! assertions below pin their sizes to ours (the C cross-check pins ours to
//! C). Ownership passes with the value: arrow-rs's types release on drop,
//! ours never do.

use std::sync::Arc;

use arrow_array::ffi::{from_ffi, FFI_ArrowArray, FFI_ArrowSchema};
use arrow_array::ffi_stream::FFI_ArrowArrayStream;
use arrow_array::{Array, RecordBatch, StructArray};
use arrow_schema::{ArrowError, Schema};

use super::{ArrowArray, ArrowArrayStream, ArrowSchema};

const _: () = assert!(std::mem::size_of::<FFI_ArrowSchema>() == std::mem::size_of::<ArrowSchema>());
const _: () = assert!(std::mem::size_of::<FFI_ArrowArray>() == std::mem::size_of::<ArrowArray>());
const _: () =
    assert!(std::mem::size_of::<FFI_ArrowArrayStream>() == std::mem::size_of::<ArrowArrayStream>());
const _: () = assert!(std::mem::align_of::<FFI_ArrowArray>() == std::mem::align_of::<ArrowArray>());

pub fn schema_from_arrow_rs(s: FFI_ArrowSchema) -> ArrowSchema {
    // SAFETY: both types are repr(C) definitions of `struct ArrowSchema`
    // (sizes asserted above); transmute moves ownership without running
    // arrow-rs's Drop, so the structure stays live in the result.
    unsafe { std::mem::transmute::<FFI_ArrowSchema, ArrowSchema>(s) }
}

pub fn array_from_arrow_rs(a: FFI_ArrowArray) -> ArrowArray {
    // SAFETY: as in schema_from_arrow_rs, for `struct ArrowArray`.
    unsafe { std::mem::transmute::<FFI_ArrowArray, ArrowArray>(a) }
}

pub fn stream_from_arrow_rs(s: FFI_ArrowArrayStream) -> ArrowArrayStream {
    // SAFETY: as in schema_from_arrow_rs, for `struct ArrowArrayStream`.
    unsafe { std::mem::transmute::<FFI_ArrowArrayStream, ArrowArrayStream>(s) }
}

/// # Safety
/// `s` must be released or a live schema that follows the C data interface;
/// arrow-rs will read it and call its release callback on drop.
pub unsafe fn schema_into_arrow_rs(s: ArrowSchema) -> FFI_ArrowSchema {
    // SAFETY: same layout (asserted above); the caller vouches for validity.
    unsafe { std::mem::transmute::<ArrowSchema, FFI_ArrowSchema>(s) }
}

/// # Safety
/// `a` must be released or a live array that follows the C data interface.
pub unsafe fn array_into_arrow_rs(a: ArrowArray) -> FFI_ArrowArray {
    // SAFETY: same layout (asserted above); the caller vouches for validity.
    unsafe { std::mem::transmute::<ArrowArray, FFI_ArrowArray>(a) }
}

/// # Safety
/// `s` must be released or a live stream that follows the C stream interface.
pub unsafe fn stream_into_arrow_rs(s: ArrowArrayStream) -> FFI_ArrowArrayStream {
    // SAFETY: same layout (asserted above); the caller vouches for validity.
    unsafe { std::mem::transmute::<ArrowArrayStream, FFI_ArrowArrayStream>(s) }
}

/// Exports a schema (a record batch's schema is a struct; its metadata goes
/// on the root, as the C data interface specifies).
pub fn export_schema(schema: &Schema) -> Result<ArrowSchema, ArrowError> {
    Ok(schema_from_arrow_rs(FFI_ArrowSchema::try_from(schema)?))
}

/// Exports a record batch as a struct array, zero-copy.
pub fn export_batch(batch: &RecordBatch) -> ArrowArray {
    let data = StructArray::from(batch.clone()).into_data();
    array_from_arrow_rs(FFI_ArrowArray::new(&data))
}

/// Exports rows `offset..offset + length` of a record batch, zero-copy, with
/// the slice carried in the children's `ArrowArray.offset` members rather
/// than in advanced buffer pointers (which is what `RecordBatch::slice`
/// followed by an export gives): `ArrayData::slice` keeps every buffer whole
/// and moves each child's offset, so non-zero offsets reach the consumer.
pub fn export_batch_slice(batch: &RecordBatch, offset: usize, length: usize) -> ArrowArray {
    let data = StructArray::from(batch.clone())
        .into_data()
        .slice(offset, length);
    array_from_arrow_rs(FFI_ArrowArray::new(&data))
}

/// Imports a schema, taking ownership (the schema is released on return).
///
/// # Safety
/// `schema` must be a live schema that follows the C data interface.
pub unsafe fn import_schema(schema: ArrowSchema) -> Result<Schema, ArrowError> {
    // SAFETY: forwarded from the caller.
    let ffi = unsafe { schema_into_arrow_rs(schema) };
    Schema::try_from(&ffi)
}

/// Imports a struct array as a record batch, taking ownership of both.
///
/// # Safety
/// `schema` and `array` must be live structures that follow the C data
/// interface and describe a struct array.
pub unsafe fn import_batch(
    schema: ArrowSchema,
    array: ArrowArray,
) -> Result<RecordBatch, ArrowError> {
    // SAFETY: forwarded from the caller.
    let ffi_schema = unsafe { schema_into_arrow_rs(schema) };
    // Released on drop if the schema cannot be read.
    let mut array = super::ops::Guard::new(array);
    let arrow_schema = Schema::try_from(&ffi_schema)?;
    let dt = arrow_schema::DataType::Struct(arrow_schema.fields().clone());
    let array = super::ops::take(&mut *array);
    // SAFETY: forwarded from the caller; unaligned buffers arrow-rs would
    // read through typed pointers are copied aligned first.
    let ffi_array = unsafe { array_into_arrow_rs(super::realign::for_arrow_rs(array, &dt)) };
    // SAFETY: the caller vouches that array and schema match and are valid.
    let data = repair_empty_bytes(unsafe { from_ffi(ffi_array, &ffi_schema) }?);
    batch_from_struct(Arc::new(arrow_schema), StructArray::from(data))
}

/// Works around arrow-rs 60.1.0's import of zero-length variable-size
/// binary arrays (Utf8, LargeUtf8, Binary, LargeBinary) at offset 0: its
/// `buffer_len` takes the values buffer as empty ("the single offset ...
/// can be an arbitrary value") but keeps the offsets buffer, whose one
/// offset may be anything ("*Generally* the first slot in the offsets
/// array is 0", Columnar.rst). The imported `ArrayData` then points past
/// its values, and copying or validating it fails or panics. Every such
/// array is replaced by an empty array of its type: the same (no) values,
/// so what the harness reads is what the producer exported. Without this,
/// a producer exporting a valid empty slice would be charged with a
/// harness crash (seen with arrow-rs's own exporter).
pub fn repair_empty_bytes(data: arrow_data::ArrayData) -> arrow_data::ArrayData {
    repaired(&data).unwrap_or(data)
}

fn repaired(data: &arrow_data::ArrayData) -> Option<arrow_data::ArrayData> {
    use arrow_schema::DataType;
    match data.data_type() {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Binary | DataType::LargeBinary => {
            (data.is_empty() && data.offset() == 0)
                .then(|| arrow_data::ArrayData::new_empty(data.data_type()))
        }
        _ => {
            let replaced: Vec<Option<arrow_data::ArrayData>> =
                data.child_data().iter().map(repaired).collect();
            if replaced.iter().all(Option::is_none) {
                return None;
            }
            let children = replaced
                .into_iter()
                .zip(data.child_data())
                .map(|(new, old)| new.unwrap_or_else(|| old.clone()))
                .collect();
            // SAFETY: only zero-length, zero-offset byte arrays were
            // replaced, by arrays of the same type, length (0) and offset
            // (0); nothing the parent's layout depends on changed.
            Some(unsafe {
                data.clone()
                    .into_builder()
                    .child_data(children)
                    .build_unchecked()
            })
        }
    }
}

/// A record batch from a struct array and the schema it was described with
/// (keeps schema-level metadata, which `StructArray` cannot carry).
pub fn batch_from_struct(
    schema: Arc<Schema>,
    array: StructArray,
) -> Result<RecordBatch, ArrowError> {
    if array.null_count() > 0 {
        return Err(ArrowError::InvalidArgumentError(
            "a record batch's root struct array has null entries".into(),
        ));
    }
    let len = array.len();
    let (_, columns, _) = array.into_parts();
    RecordBatch::try_new_with_options(
        schema,
        columns,
        &arrow_array::RecordBatchOptions::new().with_row_count(Some(len)),
    )
}

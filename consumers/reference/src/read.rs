//! Importing with arrow-rs and reading every value.
//!
//! The schema is imported once into an arrow-rs [`SchemaRef`] (and the
//! producer's `ArrowSchema` released right away: "The data returned by the
//! ``get_schema`` and ``get_next`` callbacks must be released
//! independently"); each record batch, "trivially considered as an
//! equivalent struct array", is imported against that schema's struct type.
//! This is what `arrowcert_sdk::abi::arrow_rs::import_batch` does (`from_ffi`,
//! then `batch_from_struct`), split so that one schema serves every chunk of
//! a stream, and with full validation before any typed array is built.

use std::sync::Arc;

use arrow_array::ffi::from_ffi_and_data_type;
use arrow_array::{RecordBatch, StructArray};
use arrow_data::ArrayData;
use arrow_schema::{DataType, SchemaRef};
use arrowcert_sdk::abi::ops::{take, Guard, Owned};
use arrowcert_sdk::abi::{arrow_rs, realign, ArrowArray, ArrowSchema};
use arrowcert_sdk::{PluginError, PluginResult};

use crate::shape;

/// Imports a record batch schema, taking ownership: the schema is released
/// when this returns, on success and on error.
///
/// # Safety
/// `schema` must be released or a live `ArrowSchema` that follows the C data
/// interface.
pub unsafe fn import_schema(schema: ArrowSchema) -> PluginResult<SchemaRef> {
    if schema.is_released() {
        return Err(PluginError::invalid("the schema is released"));
    }
    // SAFETY: live, and follows the C data interface by the caller's
    // guarantee; import_schema takes ownership and releases it on return.
    let schema = unsafe { arrow_rs::import_schema(schema) }
        .map_err(|e| PluginError::invalid(format!("importing the schema: {e}")))?;
    Ok(Arc::new(schema))
}

/// Imports one record batch (a struct array described by `schema`), taking
/// ownership of `array`, and reads every value.
///
/// The structures are first checked against the schema's type
/// ([`shape::check`]), so that arrow-rs never indexes past them. arrow-rs
/// imports without validation, so the whole imported tree is
/// checked with `ArrayData::validate_full` (which recurses into every
/// column, child and dictionary: offsets, UTF-8, dictionary keys, null
/// counts, ...) before anything else looks at it. The returned batch keeps
/// the producer's buffers alive: the array is released when the last of its
/// columns is dropped, or on return if this fails.
///
/// # Safety
/// `array` must be released or a live `ArrowArray` that follows the C data
/// interface.
pub unsafe fn read_batch(schema: &SchemaRef, array: ArrowArray) -> PluginResult<RecordBatch> {
    if array.is_released() {
        return Err(PluginError::invalid("the array is released"));
    }
    // Released on drop if refused below.
    let mut array = Guard::new(array);
    let data_type = DataType::Struct(schema.fields().clone());
    // SAFETY: a live array that follows the C data interface (caller's
    // guarantee); only its structures are read.
    unsafe { shape::check(&array, &data_type, "the record batch") }?;
    // SAFETY: live, and follows the C data interface by the caller's
    // guarantee; from here on arrow-rs owns it and releases it on drop.
    // Unaligned memory is valid input ("Consumers MAY decide not to support
    // unaligned memory"; this one supports it): the buffers arrow-rs reads
    // through typed pointers are copied aligned first (abi::realign).
    let ffi = unsafe {
        arrow_rs::array_into_arrow_rs(realign::for_arrow_rs(take(&mut *array), &data_type))
    };
    // SAFETY: the array follows the C data interface (caller's guarantee)
    // and its structures match the type (shape::check above); its values
    // are what validate_full checks next.
    let data = unsafe { from_ffi_and_data_type(ffi, data_type) }
        .map_err(|e| PluginError::invalid(format!("importing the array: {e}")))?;
    let data = normalize_empty_bytes(data);
    data.validate_full()
        .map_err(|e| PluginError::invalid(format!("invalid array: {e}")))?;
    crate::beyond::check(&data, "the record batch")?;
    arrow_rs::batch_from_struct(schema.clone(), StructArray::from(data))
        .map_err(|e| PluginError::invalid(format!("record batch: {e}")))
}

/// Works around an inconsistency of arrow-rs 60.1.0's importer (its IPC
/// writer's are `arrowcert_sdk::ipc::encode`'s business).
///
/// For a Utf8/Binary (or large) array with length 0 and offset 0, the
/// importer gives the values buffer length 0 whatever the single offset says
/// (arrow-array `ffi.rs`, `buffer_len`: "the single offset present in the
/// offsets buffer can be an arbitrary value from the producer"), and then
/// `validate_full` rejects that offset as past the end of the values. The
/// producer's array is valid (arrow-rs's own exporter writes exactly this for
/// an empty slice: offsets `[k]` and the whole values buffer), and a
/// zero-length array holds no values, so such an array is replaced by the
/// canonical empty array of its type. Nothing else is changed.
fn normalize_empty_bytes(data: ArrayData) -> ArrayData {
    normalized(&data).unwrap_or(data)
}

/// The normalised array, `None` if nothing in it needs replacing.
fn normalized(data: &ArrayData) -> Option<ArrayData> {
    match data.data_type() {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Binary | DataType::LargeBinary => {
            (data.is_empty() && data.offset() == 0).then(|| ArrayData::new_empty(data.data_type()))
        }
        _ => {
            let replaced: Vec<Option<ArrayData>> =
                data.child_data().iter().map(normalized).collect();
            if replaced.iter().all(Option::is_none) {
                return None;
            }
            let children = replaced
                .into_iter()
                .zip(data.child_data())
                .map(|(new, old)| new.unwrap_or_else(|| old.clone()))
                .collect();
            // SAFETY: only zero-length, zero-offset byte arrays were
            // replaced, by valid arrays of the same type, length and offset;
            // nothing the parent's validity depends on changed (and
            // validate_full checks the result anyway).
            Some(unsafe {
                data.clone()
                    .into_builder()
                    .child_data(children)
                    .build_unchecked()
            })
        }
    }
}

/// Prefixes an error's message with where it happened, keeping its code.
pub fn context(e: PluginError, place: impl std::fmt::Display) -> PluginError {
    PluginError::new(e.code, format!("{place}: {}", e.message))
}

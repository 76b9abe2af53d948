//! A structural check of an `ArrowArray` tree against the type its schema
//! declares, before arrow-rs imports it.
//!
//! arrow-rs's importer trusts the structure ("This struct assumes that the
//! incoming data agrees with the C data interface") and asserts on what it
//! indexes, so an array of the wrong shape (a stream chunk that does not
//! match the stream's schema, say) would end in a panic, or in reads past
//! the `buffers`/`children` arrays. These checks turn that into `EINVAL`
//! with the path of the offending node. They read only the structures
//! (counts and pointers), never a buffer; values are checked after the
//! import by `ArrayData::validate_full`.

use arrow_data::layout;
use arrow_schema::DataType;
use arrowcert_sdk::abi::ops::Owned;
use arrowcert_sdk::abi::ArrowArray;
use arrowcert_sdk::{PluginError, PluginResult};

/// Checks `array` (named `path` in messages) and everything below it
/// against `data_type`.
///
/// # Safety
/// `array` is a live `ArrowArray`; every non-NULL `children` and
/// `dictionary` pointer in the tree points to readable memory of the
/// documented type (a pointer array of `n_children` entries, an
/// `ArrowArray`).
pub unsafe fn check(array: &ArrowArray, data_type: &DataType, path: &str) -> PluginResult {
    let fail = |what: String| {
        Err(PluginError::invalid(format!(
            "{path} ({data_type}): {what}"
        )))
    };

    if array.length < 0 || array.offset < 0 || array.null_count < -1 {
        return fail(format!(
            "length {}, offset {} and null_count {} must be >= 0, >= 0 and >= -1",
            array.length, array.offset, array.null_count
        ));
    }

    // "n_buffers: Mandatory. The number of physical buffers backing this
    // array. The number of buffers is a function of the data type".
    let spec = layout(data_type);
    let fixed = spec.buffers.len() + usize::from(spec.can_contain_null_mask);
    let n_buffers = usize::try_from(array.n_buffers).unwrap_or(usize::MAX);
    let buffers_ok = if spec.variadic {
        // views, variadic data buffers, then the buffer of their sizes
        n_buffers != usize::MAX && n_buffers > fixed
    } else {
        n_buffers == fixed
    };
    if !buffers_ok {
        return fail(format!(
            "n_buffers is {} but the type has {}{} buffers",
            array.n_buffers,
            if spec.variadic { "more than " } else { "" },
            fixed
        ));
    }
    if n_buffers > 0 && array.buffers.is_null() {
        return fail(format!("n_buffers is {n_buffers} but buffers is NULL"));
    }

    let children = child_types(data_type);
    if usize::try_from(array.n_children).ok() != Some(children.len()) {
        return fail(format!(
            "n_children is {} but the type has {} children",
            array.n_children,
            children.len()
        ));
    }
    if !children.is_empty() && array.children.is_null() {
        return fail("n_children > 0 but children is NULL".into());
    }
    for (i, (name, child_type)) in children.iter().enumerate() {
        // SAFETY: children is non-NULL and holds n_children pointers
        // (checked equal to children.len() above; caller's guarantee).
        let child = unsafe { *array.children.add(i) };
        let child_path = format!("{path}.{name}");
        // SAFETY: non-NULL child pointers point to an ArrowArray (caller's
        // guarantee).
        let Some(child) = (unsafe { child.as_ref() }) else {
            return fail(format!("child {i} ({child_path}) is NULL"));
        };
        // SAFETY: as above, for the child's own tree.
        unsafe { check_live(child, child_type, &child_path) }?;
    }

    // "dictionary: Mandatory. A pointer to the underlying array of
    // dictionary values. Must be present if the ArrowArray represents a
    // dictionary-encoded type. Must be NULL otherwise."
    match (data_type, array.dictionary.is_null()) {
        (DataType::Dictionary(_, values), false) => {
            // SAFETY: non-NULL, an ArrowArray (caller's guarantee).
            let dictionary = unsafe { &*array.dictionary };
            // SAFETY: as above, for the dictionary's own tree.
            unsafe { check_live(dictionary, values, &format!("{path}.dictionary")) }
        }
        (DataType::Dictionary(..), true) => {
            fail("dictionary-encoded, but dictionary is NULL".into())
        }
        (_, false) => fail("not dictionary-encoded, but dictionary is not NULL".into()),
        (_, true) => Ok(()),
    }
}

/// A child or dictionary must be live: "a live base structure has a
/// non-NULL release; its children and dictionary are live too".
///
/// # Safety
/// As [`check`].
unsafe fn check_live(array: &ArrowArray, data_type: &DataType, path: &str) -> PluginResult {
    if array.is_released() {
        return Err(PluginError::invalid(format!(
            "{path} ({data_type}) is released inside a live parent"
        )));
    }
    // SAFETY: forwarded from the caller.
    unsafe { check(array, data_type, path) }
}

/// The children a type's arrays carry, by name, in order.
fn child_types(data_type: &DataType) -> Vec<(&str, &DataType)> {
    match data_type {
        DataType::Struct(fields) => fields
            .iter()
            .map(|f| (f.name().as_str(), f.data_type()))
            .collect(),
        DataType::List(f)
        | DataType::LargeList(f)
        | DataType::ListView(f)
        | DataType::LargeListView(f)
        | DataType::FixedSizeList(f, _)
        | DataType::Map(f, _) => vec![(f.name().as_str(), f.data_type())],
        DataType::RunEndEncoded(run_ends, values) => vec![
            (run_ends.name().as_str(), run_ends.data_type()),
            (values.name().as_str(), values.data_type()),
        ],
        DataType::Union(fields, _) => fields
            .iter()
            .map(|(_, f)| (f.name().as_str(), f.data_type()))
            .collect(),
        _ => Vec::new(),
    }
}

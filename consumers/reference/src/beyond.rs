//! What the Columnar format requires that arrow-rs's `validate_full` leaves
//! unchecked, checked after it so that the reference consumer refuses such
//! input with `EINVAL` instead of reading it (`certify --malformed`,
//! docs/MALFORMED.md, hands it such structures on purpose).

use arrow_data::ArrayData;
use arrow_schema::{
    DataType, UnionMode, DECIMAL128_MAX_PRECISION, DECIMAL256_MAX_PRECISION,
    DECIMAL32_MAX_PRECISION, DECIMAL64_MAX_PRECISION,
};
use arrowcert_sdk::{PluginError, PluginResult};

/// Checks `data` and everything below it (children, dictionary values).
pub fn check(data: &ArrayData, path: &str) -> PluginResult {
    let fail = |what: String| {
        Err(PluginError::invalid(format!(
            "{path} ({}): {what}",
            data.data_type()
        )))
    };
    // A decimal's precision is bounded by its bit width (Columnar.rst,
    // "Decimal": 128-bit up to 38 digits, 256-bit up to 76); arrow-rs
    // imports `d:40,5` as a Decimal128 of precision 40.
    let max = match data.data_type() {
        DataType::Decimal32(p, _) => Some((*p, DECIMAL32_MAX_PRECISION)),
        DataType::Decimal64(p, _) => Some((*p, DECIMAL64_MAX_PRECISION)),
        DataType::Decimal128(p, _) => Some((*p, DECIMAL128_MAX_PRECISION)),
        DataType::Decimal256(p, _) => Some((*p, DECIMAL256_MAX_PRECISION)),
        _ => None,
    };
    if let Some((p, max)) = max {
        if p == 0 || p > max {
            return fail(format!(
                "precision {p} is not within 1..={max} for this bit width"
            ));
        }
    }
    // "The respective offsets for each child value array must be in order /
    // increasing." (Columnar.rst, "Dense Union"): validate_full checks that
    // each offset is inside its child, not their order.
    if let DataType::Union(_, UnionMode::Dense) = data.data_type() {
        let ids = &data.buffers()[0].as_slice()[data.offset()..];
        let offsets = data.buffers()[1].typed_data::<i32>();
        let offsets = &offsets[data.offset()..];
        let mut last: std::collections::HashMap<i8, i32> = Default::default();
        for slot in 0..data.len() {
            let (id, off) = (ids[slot] as i8, offsets[slot]);
            if let Some(&before) = last.get(&id) {
                if off < before {
                    return fail(format!(
                        "slot {slot}: offset {off} into child of type id {id} comes after offset {before}: a dense union's offsets into each child must be in order"
                    ));
                }
            }
            last.insert(id, off);
        }
    }
    for (i, child) in data.child_data().iter().enumerate() {
        check(child, &format!("{path}.{i}"))?;
    }
    Ok(())
}

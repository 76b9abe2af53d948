//! Format strings and flags of the harness's own exporter, written from the
//! table in CDataInterface.rst ("Data type description -- format strings"),
//! never through arrow-rs's exporter.

#![forbid(unsafe_code)]

use arrow_schema::{DataType, IntervalUnit, TimeUnit, UnionMode};

/// `ARROW_FLAG_DICTIONARY_ORDERED`, `ARROW_FLAG_NULLABLE`,
/// `ARROW_FLAG_MAP_KEYS_SORTED`.
pub const DICTIONARY_ORDERED: i64 = 1;
pub const NULLABLE: i64 = 2;
pub const MAP_KEYS_SORTED: i64 = 4;

fn unit(u: &TimeUnit) -> char {
    match u {
        TimeUnit::Second => 's',
        TimeUnit::Millisecond => 'm',
        TimeUnit::Microsecond => 'u',
        TimeUnit::Nanosecond => 'n',
    }
}

/// The format string of `dt`; a dictionary type has its index type's
/// format ("the format string describes the index type").
pub fn format(dt: &DataType) -> Result<String, String> {
    use DataType::*;
    Ok(match dt {
        Null => "n".into(),
        Boolean => "b".into(),
        Int8 => "c".into(),
        UInt8 => "C".into(),
        Int16 => "s".into(),
        UInt16 => "S".into(),
        Int32 => "i".into(),
        UInt32 => "I".into(),
        Int64 => "l".into(),
        UInt64 => "L".into(),
        Float16 => "e".into(),
        Float32 => "f".into(),
        Float64 => "g".into(),
        Binary => "z".into(),
        LargeBinary => "Z".into(),
        BinaryView => "vz".into(),
        Utf8 => "u".into(),
        LargeUtf8 => "U".into(),
        Utf8View => "vu".into(),
        Decimal32(p, s) => format!("d:{p},{s},32"),
        Decimal64(p, s) => format!("d:{p},{s},64"),
        // 128 is the default width; half the time the exporter could omit
        // it, but writing it is always valid.
        Decimal128(p, s) => format!("d:{p},{s}"),
        Decimal256(p, s) => format!("d:{p},{s},256"),
        FixedSizeBinary(n) => format!("w:{n}"),
        Date32 => "tdD".into(),
        Date64 => "tdm".into(),
        Time32(u) => format!("tt{}", unit(u)),
        Time64(u) => format!("tt{}", unit(u)),
        Timestamp(u, tz) => format!("ts{}:{}", unit(u), tz.as_deref().unwrap_or("")),
        Duration(u) => format!("tD{}", unit(u)),
        Interval(IntervalUnit::YearMonth) => "tiM".into(),
        Interval(IntervalUnit::DayTime) => "tiD".into(),
        Interval(IntervalUnit::MonthDayNano) => "tin".into(),
        List(_) => "+l".into(),
        LargeList(_) => "+L".into(),
        ListView(_) => "+vl".into(),
        LargeListView(_) => "+vL".into(),
        FixedSizeList(_, n) => format!("+w:{n}"),
        Struct(_) => "+s".into(),
        Map(..) => "+m".into(),
        Union(fields, mode) => format!(
            "+u{}:{}",
            match mode {
                UnionMode::Dense => 'd',
                UnionMode::Sparse => 's',
            },
            fields
                .iter()
                .map(|(id, _)| id.to_string())
                .collect::<Vec<_>>()
                .join(",")
        ),
        RunEndEncoded(..) => "+r".into(),
        Dictionary(index, _) => format(index)?,
        #[allow(unreachable_patterns)]
        other => return Err(format!("the exporter has no format for {other}")),
    })
}

/// The binary metadata encoding ("int32: number of key/value pairs ...",
/// native endianness), pairs sorted by key so the bytes are stable; `None`
/// for no metadata ("If omitted, this field MUST be NULL").
pub fn metadata<'a>(pairs: impl IntoIterator<Item = (&'a String, &'a String)>) -> Option<Vec<u8>> {
    let mut pairs: Vec<_> = pairs.into_iter().collect();
    if pairs.is_empty() {
        return None;
    }
    pairs.sort();
    let mut out = Vec::new();
    out.extend_from_slice(&(pairs.len() as i32).to_ne_bytes());
    for (k, v) in pairs {
        out.extend_from_slice(&(k.len() as i32).to_ne_bytes());
        out.extend_from_slice(k.as_bytes());
        out.extend_from_slice(&(v.len() as i32).to_ne_bytes());
        out.extend_from_slice(v.as_bytes());
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inspect::format::parse;
    use std::sync::Arc;

    #[test]
    fn every_format_written_parses() {
        use arrow_schema::Field;
        let item = Arc::new(Field::new("item", DataType::Int32, true));
        let types = [
            DataType::Decimal256(40, -3),
            DataType::Decimal32(9, 2),
            DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into())),
            DataType::Timestamp(TimeUnit::Second, None),
            DataType::FixedSizeList(item.clone(), 3),
            DataType::LargeListView(item),
            DataType::Interval(IntervalUnit::MonthDayNano),
            DataType::Dictionary(Box::new(DataType::UInt16), Box::new(DataType::Utf8)),
        ];
        for t in types {
            let f = format(&t).unwrap();
            parse(&f).unwrap_or_else(|e| panic!("{t}: {f}: {e}"));
        }
    }

    #[test]
    fn metadata_matches_the_spec_example() {
        let k = "key1".to_string();
        let v = "value1".to_string();
        let bytes = metadata([(&k, &v)]).unwrap();
        if cfg!(target_endian = "little") {
            assert_eq!(
                bytes,
                b"\x01\x00\x00\x00\x04\x00\x00\x00key1\x06\x00\x00\x00value1"
            );
        }
        assert_eq!(metadata(std::iter::empty()), None);
    }
}

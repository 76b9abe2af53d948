//! Equality of values across type flavours: what a library that keeps data
//! in its own types (polars: strings as views, lists as large lists; duckdb:
//! dictionaries and run-end encoding decoded; both: every field nullable)
//! still gets right.
//!
//! Each row of each column becomes a [`Value`] in which these differences
//! no longer show:
//! - string flavours (Utf8, LargeUtf8, Utf8View) and binary flavours
//!   (Binary, LargeBinary, BinaryView, FixedSizeBinary);
//! - list flavours (List, LargeList, ListView, LargeListView,
//!   FixedSizeList);
//! - integer widths and signedness, float widths, decimal precision and bit
//!   width (a decimal is its value: `1.50` equals `1.5`);
//! - temporal units (the instant or length in nanoseconds), dates and
//!   wall clock timestamps (a date is its midnight), time zones (an
//!   instant is one instant in any zone);
//! - dictionary and run-end encoding (the decoded value), union mode;
//! - field names, nullability flags and metadata;
//! - canonical extension types exported for the plain type they stand
//!   for: a top-level column of `arrow.bool8` (int8 storage, "false is
//!   denoted by the value 0", any other value true) reads as booleans.
//!
//! - the type flags (dictionary ordered, map keys sorted): they describe the
//!   type, as the ArrowSchema does ("The ArrowSchema structure describes
//!   the type and metadata of an exported array or record batch").
//!
//! Everything else must match: strings are not binaries, integers are not
//! floats, instants are not wall clock times, intervals compare as months,
//! days and nanoseconds, other types exactly.

#![forbid(unsafe_code)]

use arrow_array::cast::AsArray;
use arrow_array::types::*;
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::{DataType, IntervalUnit, Schema, TimeUnit};

/// One logical value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    Null,
    Bool(bool),
    Int(i128),
    /// f16, f32 and f64 widened to f64 (exact), compared by bits.
    Float(u64),
    /// Digits with trailing fractional zeros removed.
    Decimal(String),
    /// What the number counts (`timestamp`: wall clock, dates included;
    /// `instant`: a timestamp with a zone; `time`; `duration`), in
    /// nanoseconds.
    Temporal(String, i128),
    Text(Vec<u8>),
    Bytes(Vec<u8>),
    List(Vec<Value>),
    Struct(Vec<Value>),
    Union(i8, Box<Value>),
    /// Months, days, nanoseconds.
    Interval(i32, i32, i128),
    /// Any other type: the one-element slice, compared exactly (type
    /// included).
    Exact(Exact),
}

/// A one-element slice of a type [`Value`] has no variant for, shown as
/// its type and value.
#[derive(Clone, PartialEq)]
pub(crate) struct Exact(pub(crate) arrow_data::ArrayData);

impl std::fmt::Debug for Exact {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let text = format!("{:?}", arrow_array::make_array(self.0.clone()));
        let one_line: Vec<&str> = text.split_whitespace().collect();
        write!(f, "{}", one_line.join(" "))
    }
}

/// At most this many differing rows are named.
const MAX_SHOWN: usize = 5;

/// Rows of `expected` and `actual` (batch boundaries ignored) that differ
/// once type flavours, names, nullability and metadata are set aside.
pub fn streams(
    expected_schema: &Schema,
    expected: &[RecordBatch],
    actual_schema: &Schema,
    actual: &[RecordBatch],
) -> Vec<String> {
    let (ne, na) = (expected_schema.fields().len(), actual_schema.fields().len());
    if ne != na {
        return vec![format!("{na} columns, expected {ne}")];
    }
    let rows = |b: &[RecordBatch]| b.iter().map(RecordBatch::num_rows).sum::<usize>();
    if rows(expected) != rows(actual) {
        return vec![format!(
            "{} rows, expected {}",
            rows(actual),
            rows(expected)
        )];
    }
    let mut out = Vec::new();
    for col in 0..ne {
        let mut e = column_values(expected, col);
        let mut a = column_values(actual, col);
        // Both sides: a bool exported as bool8 is a flavour, and so is a
        // bool8 that stays bool8 (read as booleans on both sides, its
        // values compare as what they stand for).
        if let Some(read) = canonical_extension(expected_schema.field(col)) {
            e = e.into_iter().map(read).collect();
        }
        if let Some(read) = canonical_extension(actual_schema.field(col)) {
            a = a.into_iter().map(read).collect();
        }
        for (row, (x, y)) in e.iter().zip(&a).enumerate() {
            if x != y && as_length(x) != as_length(y) {
                out.push(format!(
                    "column {col} {:?} row {row}: {y:?}, expected {x:?}",
                    expected_schema.field(col).name()
                ));
                if out.len() == MAX_SHOWN {
                    return out;
                }
            }
        }
    }
    out
}

/// A duration and an interval of no months and no days are one length of
/// time, in nanoseconds: a library that keeps durations as intervals
/// (DuckDB) changed the type, not the value (a flavour, as other temporal
/// units are). Lists, structs and unions compare their members so.
fn as_length(v: &Value) -> Value {
    match v {
        Value::Interval(0, 0, n) => Value::Temporal("duration".into(), *n),
        Value::List(items) => Value::List(items.iter().map(as_length).collect()),
        Value::Struct(items) => Value::Struct(items.iter().map(as_length).collect()),
        Value::Union(id, inner) => Value::Union(*id, Box::new(as_length(inner))),
        other => other.clone(),
    }
}

/// How the values of a field of a canonical extension type read as the
/// plain type it stands for: `arrow.bool8` over int8 is a boolean
/// (CanonicalExtensions.rst: "false is denoted by the value 0", "true can
/// be specified using any non-zero value"). A library may export a bool
/// column so under a setting of its own: a type flavour, not other values.
pub(crate) fn canonical_extension(field: &arrow_schema::Field) -> Option<fn(Value) -> Value> {
    let name = field
        .metadata()
        .get(crate::generate::types::EXTENSION_NAME)?;
    match (name.as_str(), field.data_type()) {
        ("arrow.bool8", DataType::Int8) => Some(|v| match v {
            Value::Int(i) => Value::Bool(i != 0),
            other => other,
        }),
        _ => None,
    }
}

/// The units a consumer's own temporal types may hold, in nanoseconds,
/// finest first, with their names.
const COARSER_UNITS: [(i128, &str); 4] = [
    (1_000, "microseconds"),
    (1_000_000, "milliseconds"),
    (1_000_000_000, "seconds"),
    (86_400_000_000_000, "days"),
];

/// The coarsest unit that `y` is `x` cut to (toward zero or down), at any
/// depth; `Some(1)` when equal; `None` when `y` differs otherwise.
fn cut_to(x: &Value, y: &Value) -> Option<i128> {
    if x == y {
        return Some(1);
    }
    let one = |e: i128, a: i128| -> Option<i128> {
        COARSER_UNITS
            .iter()
            .map(|(u, _)| *u)
            .find(|u| a == e - e % u || a == e.div_euclid(*u) * u)
    };
    let all = |xs: &[Value], ys: &[Value]| -> Option<i128> {
        if xs.len() != ys.len() {
            return None;
        }
        xs.iter()
            .zip(ys)
            .map(|(x, y)| cut_to(x, y))
            .try_fold(1, |u, c| c.map(|c| u.max(c)))
    };
    match (x, y) {
        (Value::Temporal(k, e), Value::Temporal(l, a)) if k == l => one(*e, *a),
        (Value::Interval(m, d, e), Value::Interval(n, f, a)) if m == n && d == f => one(*e, *a),
        (Value::List(xs), Value::List(ys)) | (Value::Struct(xs), Value::Struct(ys)) => all(xs, ys),
        (Value::Union(i, x), Value::Union(j, y)) if i == j => cut_to(x, y),
        _ => None,
    }
}

/// When every value of `actual` that differs from `expected` is a time,
/// timestamp, duration or interval cut to a coarser unit (what a consumer
/// whose own types hold microseconds does to nanoseconds), the evidence:
/// each such column with the unit its values were cut to and a row. `None`
/// when nothing differs or anything else does.
pub fn precision_loss(
    expected_schema: &Schema,
    expected: &[RecordBatch],
    actual_schema: &Schema,
    actual: &[RecordBatch],
) -> Option<Vec<String>> {
    let rows = |b: &[RecordBatch]| b.iter().map(RecordBatch::num_rows).sum::<usize>();
    let n = expected_schema.fields().len();
    if n != actual_schema.fields().len() || rows(expected) != rows(actual) {
        return None;
    }
    let mut out = Vec::new();
    for col in 0..n {
        let e = column_values(expected, col);
        let a = column_values(actual, col);
        let mut unit = 1;
        let mut first = None;
        for (row, (x, y)) in e.iter().zip(&a).enumerate() {
            let u = cut_to(x, y)?;
            if u > 1 && first.is_none() {
                first = Some(format!("row {row}: {y:?}, expected {x:?}"));
            }
            unit = unit.max(u);
        }
        if let Some(first) = first {
            let name = COARSER_UNITS
                .iter()
                .find(|(u, _)| *u == unit)
                .map_or("a coarser unit", |(_, n)| n);
            out.push(format!(
                "column {col} {:?} ({}): values cut to {name}, the finer digits lost ({first})",
                expected_schema.field(col).name(),
                expected_schema.field(col).data_type()
            ));
        }
    }
    (!out.is_empty()).then_some(out)
}

pub(crate) fn column_values(batches: &[RecordBatch], col: usize) -> Vec<Value> {
    batches
        .iter()
        .flat_map(|b| {
            let c = b.column(col);
            (0..c.len()).map(move |i| value(c.as_ref(), i))
        })
        .collect()
}

/// The value at `i`.
fn value(a: &dyn Array, i: usize) -> Value {
    use DataType::*;
    // Encodings first: their own validity is not where their nulls are.
    match a.data_type() {
        Dictionary(..) => {
            let d = a.as_any_dictionary();
            let keys = d.keys();
            if keys.is_null(i) {
                return Value::Null;
            }
            let k = d.normalized_keys()[i];
            return value(d.values().as_ref(), k);
        }
        RunEndEncoded(r, _) => {
            let (values, at) = match r.data_type() {
                Int16 => {
                    let r = a.as_run::<Int16Type>();
                    (r.values(), r.get_physical_index(i))
                }
                Int32 => {
                    let r = a.as_run::<Int32Type>();
                    (r.values(), r.get_physical_index(i))
                }
                _ => {
                    let r = a.as_run::<Int64Type>();
                    (r.values(), r.get_physical_index(i))
                }
            };
            return value(values.as_ref(), at);
        }
        Union(..) => {
            let u = a.as_union();
            let id = u.type_id(i);
            return Value::Union(id, Box::new(value(u.child(id).as_ref(), u.value_offset(i))));
        }
        Null => return Value::Null,
        _ => {}
    }
    if a.is_null(i) {
        return Value::Null;
    }
    let int = |v: i128| Value::Int(v);
    let temporal = |kind: &str, v: i64, unit_ns: i128| {
        Value::Temporal(kind.to_string(), i128::from(v) * unit_ns)
    };
    let ns = |u: &TimeUnit| match u {
        TimeUnit::Second => 1_000_000_000,
        TimeUnit::Millisecond => 1_000_000,
        TimeUnit::Microsecond => 1_000,
        TimeUnit::Nanosecond => 1,
    };
    match a.data_type() {
        Boolean => Value::Bool(a.as_boolean().value(i)),
        Int8 => int(a.as_primitive::<Int8Type>().value(i).into()),
        Int16 => int(a.as_primitive::<Int16Type>().value(i).into()),
        Int32 => int(a.as_primitive::<Int32Type>().value(i).into()),
        Int64 => int(a.as_primitive::<Int64Type>().value(i).into()),
        UInt8 => int(a.as_primitive::<UInt8Type>().value(i).into()),
        UInt16 => int(a.as_primitive::<UInt16Type>().value(i).into()),
        UInt32 => int(a.as_primitive::<UInt32Type>().value(i).into()),
        UInt64 => int(a.as_primitive::<UInt64Type>().value(i).into()),
        Float16 => Value::Float(a.as_primitive::<Float16Type>().value(i).to_f64().to_bits()),
        Float32 => Value::Float(f64::from(a.as_primitive::<Float32Type>().value(i)).to_bits()),
        Float64 => Value::Float(a.as_primitive::<Float64Type>().value(i).to_bits()),
        Decimal32(..) => decimal(a.as_primitive::<Decimal32Type>().value_as_string(i)),
        Decimal64(..) => decimal(a.as_primitive::<Decimal64Type>().value_as_string(i)),
        Decimal128(..) => decimal(a.as_primitive::<Decimal128Type>().value_as_string(i)),
        Decimal256(..) => decimal(a.as_primitive::<Decimal256Type>().value_as_string(i)),
        // A date is the wall clock time of its midnight.
        Date32 => temporal(
            "timestamp",
            a.as_primitive::<Date32Type>().value(i).into(),
            86_400_000_000_000,
        ),
        Date64 => temporal(
            "timestamp",
            a.as_primitive::<Date64Type>().value(i),
            1_000_000,
        ),
        Time32(u) => {
            let v = match u {
                TimeUnit::Second => a.as_primitive::<Time32SecondType>().value(i),
                _ => a.as_primitive::<Time32MillisecondType>().value(i),
            };
            temporal("time", v.into(), ns(u))
        }
        Time64(u) => {
            let v = match u {
                TimeUnit::Microsecond => a.as_primitive::<Time64MicrosecondType>().value(i),
                _ => a.as_primitive::<Time64NanosecondType>().value(i),
            };
            temporal("time", v, ns(u))
        }
        Timestamp(u, tz) => {
            let v = match u {
                TimeUnit::Second => a.as_primitive::<TimestampSecondType>().value(i),
                TimeUnit::Millisecond => a.as_primitive::<TimestampMillisecondType>().value(i),
                TimeUnit::Microsecond => a.as_primitive::<TimestampMicrosecondType>().value(i),
                TimeUnit::Nanosecond => a.as_primitive::<TimestampNanosecondType>().value(i),
            };
            // With a zone the number is an instant (UTC) whatever the zone,
            // which only says how to show it; without one it is a wall
            // clock time.
            let kind = if tz.is_some() { "instant" } else { "timestamp" };
            temporal(kind, v, ns(u))
        }
        Duration(u) => {
            let v = match u {
                TimeUnit::Second => a.as_primitive::<DurationSecondType>().value(i),
                TimeUnit::Millisecond => a.as_primitive::<DurationMillisecondType>().value(i),
                TimeUnit::Microsecond => a.as_primitive::<DurationMicrosecondType>().value(i),
                TimeUnit::Nanosecond => a.as_primitive::<DurationNanosecondType>().value(i),
            };
            temporal("duration", v, ns(u))
        }
        Utf8 => Value::Text(a.as_string::<i32>().value(i).as_bytes().to_vec()),
        LargeUtf8 => Value::Text(a.as_string::<i64>().value(i).as_bytes().to_vec()),
        Utf8View => Value::Text(a.as_string_view().value(i).as_bytes().to_vec()),
        Binary => Value::Bytes(a.as_binary::<i32>().value(i).to_vec()),
        LargeBinary => Value::Bytes(a.as_binary::<i64>().value(i).to_vec()),
        BinaryView => Value::Bytes(a.as_binary_view().value(i).to_vec()),
        FixedSizeBinary(_) => Value::Bytes(a.as_fixed_size_binary().value(i).to_vec()),
        List(_) => list(a.as_list::<i32>().value(i)),
        LargeList(_) => list(a.as_list::<i64>().value(i)),
        ListView(_) => list(a.as_list_view::<i32>().value(i)),
        LargeListView(_) => list(a.as_list_view::<i64>().value(i)),
        FixedSizeList(..) => list(a.as_fixed_size_list().value(i)),
        Map(..) => {
            let entries = a.as_map().value(i);
            Value::List((0..entries.len()).map(|j| value(&entries, j)).collect())
        }
        Struct(_) => Value::Struct(
            a.as_struct()
                .columns()
                .iter()
                .map(|c| value(c.as_ref(), i))
                .collect(),
        ),
        Interval(IntervalUnit::YearMonth) => {
            Value::Interval(a.as_primitive::<IntervalYearMonthType>().value(i), 0, 0)
        }
        Interval(IntervalUnit::DayTime) => {
            let v = a.as_primitive::<IntervalDayTimeType>().value(i);
            Value::Interval(0, v.days, i128::from(v.milliseconds) * 1_000_000)
        }
        Interval(IntervalUnit::MonthDayNano) => {
            let v = a.as_primitive::<IntervalMonthDayNanoType>().value(i);
            Value::Interval(v.months, v.days, i128::from(v.nanoseconds))
        }
        _ => Value::Exact(Exact(a.slice(i, 1).to_data())),
    }
}

fn list(items: ArrayRef) -> Value {
    Value::List((0..items.len()).map(|j| value(items.as_ref(), j)).collect())
}

/// `1.500` and `1.5` are one decimal; so are `-0.0` and `0`.
pub(crate) fn decimal(s: String) -> Value {
    let mut s = s;
    if s.contains('.') {
        while s.ends_with('0') {
            s.pop();
        }
        if s.ends_with('.') {
            s.pop();
        }
    }
    if s == "-0" {
        s = "0".into();
    }
    Value::Decimal(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::builder::{ListBuilder, StringBuilder};
    use arrow_array::{
        DictionaryArray, Int32Array, Int64Array, LargeStringArray, RunArray, StringArray,
        StringViewArray,
    };
    use arrow_schema::Field;
    use std::sync::Arc;

    fn one(name: &str, a: ArrayRef, nullable: bool) -> (Schema, Vec<RecordBatch>) {
        let schema = Schema::new(vec![Field::new(name, a.data_type().clone(), nullable)]);
        let b = RecordBatch::try_new(Arc::new(schema.clone()), vec![a]).unwrap();
        (schema, vec![b])
    }

    fn same(e: (Schema, Vec<RecordBatch>), a: (Schema, Vec<RecordBatch>)) -> Vec<String> {
        streams(&e.0, &e.1, &a.0, &a.1)
    }

    #[test]
    fn flavours_are_the_same_values() {
        let s = StringArray::from(vec![Some("a"), None, Some("a string longer than twelve")]);
        let large =
            LargeStringArray::from(vec![Some("a"), None, Some("a string longer than twelve")]);
        let view =
            StringViewArray::from(vec![Some("a"), None, Some("a string longer than twelve")]);
        let dict: DictionaryArray<Int32Type> =
            vec![Some("a"), None, Some("a string longer than twelve")]
                .into_iter()
                .collect();
        let expected = || one("s", Arc::new(s.clone()), true);
        assert!(same(expected(), one("t", Arc::new(large), true)).is_empty());
        assert!(same(expected(), one("s", Arc::new(view), true)).is_empty());
        assert!(same(expected(), one("s", Arc::new(dict), true)).is_empty());

        let ints = Int32Array::from(vec![7, 7, 7, 9]);
        let ree = RunArray::<Int32Type>::try_new(
            &Int32Array::from(vec![3, 4]),
            &Int64Array::from(vec![7, 9]),
        )
        .unwrap();
        assert!(same(
            one("i", Arc::new(ints), false),
            one("i", Arc::new(ree), true)
        )
        .is_empty());

        let mut l = ListBuilder::new(StringBuilder::new());
        l.append_value([Some("x"), None]);
        l.append_null();
        let list = l.finish();
        let mut ll = arrow_array::builder::LargeListBuilder::new(StringBuilder::new());
        ll.append_value([Some("x"), None]);
        ll.append_null();
        assert!(same(
            one("l", Arc::new(list), true),
            one("l", Arc::new(ll.finish()), true)
        )
        .is_empty());
    }

    #[test]
    fn values_still_differ() {
        let s = || one("s", Arc::new(StringArray::from(vec!["a", "b"])), false);
        let other = one("s", Arc::new(StringViewArray::from(vec!["a", "c"])), true);
        let d = same(s(), other);
        assert_eq!(d.len(), 1);
        assert!(d[0].contains("row 1"), "{d:?}");
        // A string is not its bytes, an integer not a float.
        let bin = one(
            "s",
            Arc::new(arrow_array::BinaryArray::from(vec![&b"a"[..], b"b"])),
            false,
        );
        assert_eq!(same(s(), bin).len(), 2);
        let i = one("x", Arc::new(Int32Array::from(vec![1])), false);
        let f = one(
            "x",
            Arc::new(arrow_array::Float64Array::from(vec![1.0])),
            false,
        );
        assert_eq!(same(i, f).len(), 1);
        // Nulls are values.
        let n = one(
            "s",
            Arc::new(StringArray::from(vec![Some("a"), None])),
            true,
        );
        assert_eq!(same(s(), n).len(), 1);
        // Row counts.
        let short = one("s", Arc::new(StringArray::from(vec!["a"])), false);
        assert!(same(s(), short)[0].contains("1 rows, expected 2"));
    }

    /// A duration read back as an interval of no months and no days is the
    /// same length of time; with a month or a day it is another value.
    #[test]
    fn a_duration_kept_as_an_interval_is_a_flavour() {
        use arrow_array::{DurationNanosecondArray, IntervalMonthDayNanoArray};
        use arrow_buffer::IntervalMonthDayNano;
        let (es, eb) = one(
            "d",
            Arc::new(DurationNanosecondArray::from(vec![Some(-5), None, Some(7)])),
            true,
        );
        let same = IntervalMonthDayNanoArray::from(vec![
            Some(IntervalMonthDayNano::new(0, 0, -5)),
            None,
            Some(IntervalMonthDayNano::new(0, 0, 7)),
        ]);
        let (as_, ab) = one("d", Arc::new(same), true);
        assert!(streams(&es, &eb, &as_, &ab).is_empty());
        let other = IntervalMonthDayNanoArray::from(vec![
            Some(IntervalMonthDayNano::new(0, 1, -5)),
            None,
            Some(IntervalMonthDayNano::new(0, 0, 7)),
        ]);
        let (os, ob) = one("d", Arc::new(other), true);
        assert_eq!(streams(&es, &eb, &os, &ob).len(), 1);
    }

    /// A bool8 column that stays bool8 compares equal (found by the
    /// canonical-extensions shape: pyarrow and Arrow C++ keep bool8, and
    /// reading only the actual side as booleans failed them).
    #[test]
    fn bool8_kept_as_bool8_is_equal() {
        use arrow_array::Int8Array;
        let meta = std::collections::HashMap::from([(
            crate::generate::types::EXTENSION_NAME.to_string(),
            "arrow.bool8".to_string(),
        )]);
        let field = arrow_schema::Field::new("b", DataType::Int8, true).with_metadata(meta);
        let schema = Arc::new(Schema::new(vec![field]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![Arc::new(Int8Array::from(vec![Some(0), None, Some(1)]))],
        )
        .unwrap();
        let one = std::slice::from_ref(&batch);
        assert!(streams(&schema, one, &schema, one).is_empty());
    }

    #[test]
    fn bool8_reads_as_bool_and_plain_int8_does_not() {
        use arrow_array::{BooleanArray, Int8Array};
        let expected = one(
            "b",
            Arc::new(BooleanArray::from(vec![
                Some(true),
                None,
                Some(false),
                Some(true),
            ])),
            true,
        );
        let storage: ArrayRef = Arc::new(Int8Array::from(vec![Some(1), None, Some(0), Some(7)]));
        let field = Field::new("b", DataType::Int8, true).with_metadata([(
            crate::generate::types::EXTENSION_NAME.to_string(),
            "arrow.bool8".to_string(),
        )]);
        let schema = Schema::new(vec![field]);
        let batch = RecordBatch::try_new(Arc::new(schema.clone()), vec![storage.clone()]).unwrap();
        assert!(same(expected.clone(), (schema, vec![batch])).is_empty());
        // The same bytes without the extension type are integers.
        let plain = one("b", storage.clone(), true);
        assert_eq!(same(expected.clone(), plain).len(), 3);
        // bool8 whose values are wrong still differs.
        let wrong: ArrayRef = Arc::new(Int8Array::from(vec![Some(0), None, Some(0), Some(1)]));
        let field = Field::new("b", DataType::Int8, true).with_metadata([(
            crate::generate::types::EXTENSION_NAME.to_string(),
            "arrow.bool8".to_string(),
        )]);
        let schema = Schema::new(vec![field]);
        let batch = RecordBatch::try_new(Arc::new(schema.clone()), vec![wrong]).unwrap();
        let diffs = same(expected, (schema, vec![batch]));
        assert_eq!(diffs.len(), 1, "{diffs:?}");
        assert!(diffs[0].contains("row 0"), "{diffs:?}");
    }

    #[test]
    fn nanoseconds_cut_to_microseconds_are_a_precision_loss() {
        use arrow_array::types::IntervalMonthDayNano;
        use arrow_array::{IntervalMonthDayNanoArray, TimestampNanosecondArray};
        let iv = |ns: &[i64]| -> ArrayRef {
            Arc::new(IntervalMonthDayNanoArray::from(
                ns.iter()
                    .map(|&n| Some(IntervalMonthDayNano::new(1, 2, n)))
                    .collect::<Vec<_>>(),
            ))
        };
        let expected = one("i", iv(&[1_234_567, -1_234_567, 5_000, 0]), true);
        // Cut toward zero to microseconds.
        let cut = one("i", iv(&[1_234_000, -1_234_000, 5_000, 0]), true);
        let loss = precision_loss(&expected.0, &expected.1, &cut.0, &cut.1).expect("a loss");
        assert!(loss[0].contains("microseconds"), "{loss:?}");
        // Nothing lost: no finding.
        assert!(precision_loss(&expected.0, &expected.1, &expected.0, &expected.1).is_none());
        // A value otherwise wrong (the days changed) is no precision loss.
        let wrong: ArrayRef = Arc::new(IntervalMonthDayNanoArray::from(vec![
            Some(IntervalMonthDayNano::new(1, 3, 1_234_000)),
            Some(IntervalMonthDayNano::new(1, 2, -1_234_000)),
            Some(IntervalMonthDayNano::new(1, 2, 5_000)),
            Some(IntervalMonthDayNano::new(1, 2, 0)),
        ]));
        let wrong = one("i", wrong, true);
        assert!(precision_loss(&expected.0, &expected.1, &wrong.0, &wrong.1).is_none());
        // Digits changed, not cut: no precision loss.
        let off = one("i", iv(&[1_234_568, -1_234_567, 5_000, 0]), true);
        assert!(precision_loss(&expected.0, &expected.1, &off.0, &off.1).is_none());
        // Timestamps cut down to milliseconds (floor for negatives).
        let ts = |v: &[i64]| -> ArrayRef { Arc::new(TimestampNanosecondArray::from(v.to_vec())) };
        let e = one("t", ts(&[1_234_567_890, -1_500_000]), false);
        let a = one("t", ts(&[1_234_000_000, -2_000_000]), false);
        let loss = precision_loss(&e.0, &e.1, &a.0, &a.1).expect("a loss");
        assert!(loss[0].contains("milliseconds"), "{loss:?}");
    }

    #[test]
    fn zones_and_dates() {
        use arrow_array::{Date32Array, TimestampMillisecondArray, TimestampSecondArray};
        let eastern = TimestampSecondArray::from(vec![86_400]).with_timezone("US/Eastern");
        let utc = TimestampMillisecondArray::from(vec![86_400_000]).with_timezone("UTC");
        let naive = TimestampSecondArray::from(vec![86_400]);
        let date = Date32Array::from(vec![1]);
        let e = || one("t", Arc::new(eastern.clone()), false);
        assert!(same(e(), one("t", Arc::new(utc), false)).is_empty());
        assert_eq!(same(e(), one("t", Arc::new(naive.clone()), false)).len(), 1);
        assert!(same(
            one("d", Arc::new(date), false),
            one("d", Arc::new(naive), false)
        )
        .is_empty());
    }

    #[test]
    fn decimals_are_their_values() {
        assert_eq!(decimal("1.500".into()), decimal("1.5".into()));
        assert_eq!(decimal("-0.00".into()), decimal("0".into()));
        assert_ne!(decimal("10".into()), decimal("1".into()));
        assert_ne!(decimal("1.05".into()), decimal("1.5".into()));
    }
}

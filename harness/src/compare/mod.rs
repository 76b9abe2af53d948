//! Logical equality of Arrow data: "Equality is logical (values, validity,
//! types, field names, nullability, metadata), never byte-wise"
//! (PLUGIN_ABI.md). Differences come back as readable evidence, the first
//! differing row of each column named, so a report says what changed.

#![forbid(unsafe_code)]

use std::sync::Arc;

use arrow_array::{make_array, Array, ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Fields, Metadata, Schema};

/// At most this many rows are named per differing column.
const MAX_ROWS_SHOWN: usize = 3;

/// Compares two schemas: field names, types, nullability and metadata, at
/// every depth, and the schema's own metadata.
pub fn schemas(expected: &Schema, actual: &Schema) -> Vec<String> {
    // Equal schemas (names, types, nullability and metadata at every depth:
    // arrow-rs's `Field` equality) have nothing to report; the walk below
    // only explains inequality, and formats a label for every field.
    if expected == actual {
        return Vec::new();
    }
    let mut out = Vec::new();
    metadata("schema", expected.metadata(), actual.metadata(), &mut out);
    fields("", expected.fields(), actual.fields(), &mut out);
    out
}

fn metadata(at: &str, expected: &Metadata, actual: &Metadata, out: &mut Vec<String>) {
    if expected == actual {
        return;
    }
    let mut keys: Vec<&String> = expected
        .iter()
        .chain(actual.iter())
        .map(|(k, _)| k)
        .collect();
    keys.sort();
    keys.dedup();
    for k in keys {
        match (expected.get(k), actual.get(k)) {
            (Some(e), Some(a)) if e != a => {
                out.push(format!("{at}: metadata {k:?} is {a:?}, expected {e:?}"))
            }
            (Some(e), None) => out.push(format!("{at}: metadata {k:?} = {e:?} is missing")),
            (None, Some(a)) => out.push(format!("{at}: unexpected metadata {k:?} = {a:?}")),
            _ => {}
        }
    }
}

fn fields(prefix: &str, expected: &Fields, actual: &Fields, out: &mut Vec<String>) {
    if expected.len() != actual.len() {
        out.push(format!(
            "{}: {} fields, expected {}",
            if prefix.is_empty() { "schema" } else { prefix },
            actual.len(),
            expected.len()
        ));
        return;
    }
    for (i, (e, a)) in expected.iter().zip(actual.iter()).enumerate() {
        field(&format!("{prefix}[{i}]"), e, a, out);
    }
}

/// `path` names the field's position: `[0]`, `[0].item`, `[2][1]`, ...
fn field(path: &str, expected: &Field, actual: &Field, out: &mut Vec<String>) {
    let at = format!("field {path} {:?}", expected.name());
    if expected.name() != actual.name() {
        out.push(format!(
            "{at}: name is {:?}, expected {:?}",
            actual.name(),
            expected.name()
        ));
    }
    if expected.is_nullable() != actual.is_nullable() {
        out.push(format!(
            "{at}: nullable is {}, expected {}",
            actual.is_nullable(),
            expected.is_nullable()
        ));
    }
    metadata(&at, expected.metadata(), actual.metadata(), out);
    data_type(path, &at, expected.data_type(), actual.data_type(), out);
}

/// `path` as for [`field`]; `at` is the field's label in messages.
fn data_type(path: &str, at: &str, expected: &DataType, actual: &DataType, out: &mut Vec<String>) {
    use DataType::*;
    let before = out.len();
    match (expected, actual) {
        (List(e), List(a))
        | (LargeList(e), LargeList(a))
        | (ListView(e), ListView(a))
        | (LargeListView(e), LargeListView(a))
        | (Map(e, _), Map(a, _)) => field(&format!("{path}.item"), e, a, out),
        (FixedSizeList(e, n), FixedSizeList(a, m)) if n == m => {
            field(&format!("{path}.item"), e, a, out)
        }
        (Struct(e), Struct(a)) => fields(path, e, a, out),
        (RunEndEncoded(er, ev), RunEndEncoded(ar, av)) => {
            field(&format!("{path}.run_ends"), er, ar, out);
            field(&format!("{path}.values"), ev, av, out);
        }
        (Dictionary(ek, ev), Dictionary(ak, av)) if ek == ak => {
            data_type(path, &format!("{at} dictionary"), ev, av, out)
        }
        _ => {}
    }
    // Anything the recursion did not explain (a different type, a map's
    // keys_sorted flag, union type ids, list sizes, ...) is reported whole.
    if expected != actual && out.len() == before {
        out.push(format!("{at}: type is {actual}, expected {expected}"));
    }
}

/// Compares the data of two sequences of record batches row by row,
/// ignoring how the rows are split into batches.
pub fn batches(expected: &[RecordBatch], actual: &[RecordBatch]) -> Vec<String> {
    let mut out = Vec::new();
    let (Some(e0), Some(a0)) = (expected.first(), actual.first()) else {
        let rows = |b: &[RecordBatch]| b.iter().map(|b| b.num_rows()).sum::<usize>();
        if rows(expected) != rows(actual) {
            out.push(format!(
                "{} rows, expected {}",
                rows(actual),
                rows(expected)
            ));
        }
        return out;
    };
    if equal_batch_by_batch(expected, actual) {
        return out;
    }
    let e = match arrow_select::concat::concat_batches(&e0.schema(), expected) {
        Ok(b) => b,
        Err(err) => return vec![format!("cannot combine the expected batches: {err}")],
    };
    let a = match arrow_select::concat::concat_batches(&a0.schema(), actual) {
        Ok(b) => b,
        Err(err) => return vec![format!("cannot combine the batches read: {err}")],
    };
    batch(&e, &a, &mut out);
    out
}

/// True when both sides are split the same way, each side's batches share
/// one schema, and every pair of columns is equal: then the concatenations
/// that [`batches`] compares are equal too, and nothing would be reported.
/// Spares the concatenation (a copy of every column of a stream) and the
/// labels in the common, passing case; anything else takes the full path.
fn equal_batch_by_batch(expected: &[RecordBatch], actual: &[RecordBatch]) -> bool {
    let same_schema = |b: &[RecordBatch]| {
        let s0 = b[0].schema_ref();
        !s0.fields().is_empty()
            && b[1..]
                .iter()
                .all(|x| Arc::ptr_eq(x.schema_ref(), s0) || x.schema_ref() == s0)
    };
    expected.len() == actual.len()
        && same_schema(expected)
        && same_schema(actual)
        && expected.iter().zip(actual).all(|(e, a)| {
            e.num_rows() == a.num_rows()
                && e.num_columns() == a.num_columns()
                && e.columns().iter().zip(a.columns()).all(|(x, y)| {
                    x.data_type() == y.data_type()
                        && x.len() == y.len()
                        && x.to_data() == y.to_data()
                })
        })
}

/// Compares the data (not the schema) of two record batches.
pub fn batch(expected: &RecordBatch, actual: &RecordBatch, out: &mut Vec<String>) {
    if expected.num_rows() != actual.num_rows() {
        out.push(format!(
            "{} rows, expected {}",
            actual.num_rows(),
            expected.num_rows()
        ));
        return;
    }
    if expected.num_columns() != actual.num_columns() {
        out.push(format!(
            "{} columns, expected {}",
            actual.num_columns(),
            expected.num_columns()
        ));
        return;
    }
    let schema = expected.schema();
    for (i, (e, a)) in expected.columns().iter().zip(actual.columns()).enumerate() {
        column(
            &format!("column {i} {:?}", schema.field(i).name()),
            e,
            a,
            out,
        );
    }
}

/// Compares two arrays logically: types, then values and validity.
pub fn column(at: &str, expected: &ArrayRef, actual: &ArrayRef, out: &mut Vec<String>) {
    if expected.data_type() != actual.data_type() {
        out.push(format!(
            "{at}: type is {}, expected {}",
            actual.data_type(),
            expected.data_type()
        ));
        return;
    }
    if expected.len() != actual.len() {
        out.push(format!(
            "{at}: {} values, expected {}",
            actual.len(),
            expected.len()
        ));
        return;
    }
    if expected.to_data() == actual.to_data() {
        return;
    }
    let mut shown = 0;
    for row in 0..expected.len() {
        let (e, a) = (expected.slice(row, 1), actual.slice(row, 1));
        if e.to_data() != a.to_data() {
            out.push(format!(
                "{at} row {row}: {} , expected {}",
                show(&a),
                show(&e)
            ));
            shown += 1;
            if shown == MAX_ROWS_SHOWN {
                break;
            }
        }
    }
    if shown == 0 {
        // Equal row by row but not as a whole (e.g. a type whose equality
        // depends on more than the rows): report the column.
        out.push(format!("{at}: values differ"));
    }
}

/// One value, compactly: `null` or arrow's debug form on one line.
fn show(one: &ArrayRef) -> String {
    if one.is_null(0) {
        return "null".into();
    }
    let data = one.to_data();
    let text = format!("{:?}", make_array(data));
    let inner: String = text
        .split_once('[')
        .map(|(_, rest)| rest.trim_end().trim_end_matches(']').to_string())
        .unwrap_or(text);
    inner
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .trim_end_matches(',')
        .to_string()
}

/// Everything that differs between two (schema, batches) pairs.
pub fn streams(
    expected_schema: &Schema,
    expected: &[RecordBatch],
    actual_schema: &Schema,
    actual: &[RecordBatch],
) -> Vec<String> {
    let mut out = schemas(expected_schema, actual_schema);
    if out.is_empty() {
        out.extend(batches(expected, actual));
    }
    out
}

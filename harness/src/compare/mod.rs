//! Logical equality of Arrow data: "Equality is logical (values, validity,
//! types, field names, nullability, metadata), never byte-wise"
//! (PLUGIN_ABI.md). Differences come back as readable evidence, the first
//! differing row of each column named, so a report says what changed.

#![forbid(unsafe_code)]

pub mod logical;
pub mod pyvalues;

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
    if expected == actual && same_ordering(expected.fields(), actual.fields()) {
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
    // Nameless fields (the comparison without names strips them) are
    // named by their position alone.
    let at = if expected.name().is_empty() {
        format!("field {path}")
    } else {
        format!("field {path} {:?}", expected.name())
    };
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
    // arrow-rs's Field equality leaves this out; the IPC format and the C
    // data interface (ARROW_FLAG_DICTIONARY_ORDERED) carry it.
    if expected.dict_is_ordered() != actual.dict_is_ordered()
        && matches!(expected.data_type(), DataType::Dictionary(..))
    {
        out.push(format!(
            "{at}: dictionary ordered is {:?}, expected {:?}",
            actual.dict_is_ordered(),
            expected.dict_is_ordered()
        ));
    }
    data_type(path, &at, expected.data_type(), actual.data_type(), out);
}

/// True when the dictionary-ordered flags agree at every depth.
fn same_ordering(expected: &Fields, actual: &Fields) -> bool {
    expected.iter().zip(actual.iter()).all(|(e, a)| {
        let here = !matches!(e.data_type(), DataType::Dictionary(..))
            || e.dict_is_ordered() == a.dict_is_ordered();
        here && same_ordering(&nested_fields(e.data_type()), &nested_fields(a.data_type()))
    })
}

/// The fields directly inside a type (a dictionary's value type is not a
/// field: not included).
pub(crate) fn nested_fields(dt: &DataType) -> Fields {
    use DataType::*;
    match dt {
        List(f)
        | LargeList(f)
        | ListView(f)
        | LargeListView(f)
        | FixedSizeList(f, _)
        | Map(f, _) => Fields::from(vec![f.clone()]),
        Struct(fields) => fields.clone(),
        Union(fields, _) => fields.iter().map(|(_, f)| f.clone()).collect(),
        RunEndEncoded(r, v) => Fields::from(vec![r.clone(), v.clone()]),
        _ => Fields::empty(),
    }
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
        // Same mode and type ids: the children explain the difference.
        (Union(e, em), Union(a, am))
            if em == am && e.iter().map(|(id, _)| id).eq(a.iter().map(|(id, _)| id)) =>
        {
            for ((id, ef), (_, af)) in e.iter().zip(a.iter()) {
                field(&format!("{path}.{id}"), ef, af, out);
            }
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
    // arrow-rs panics where merged dictionaries outgrow their key type
    // (many small batches with Int8 keys): that is a limit of the
    // comparison, reported as such, not a crash.
    let concat = |b: &[RecordBatch], schema: arrow_schema::SchemaRef| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            arrow_select::concat::concat_batches(&schema, b)
        }))
        .unwrap_or_else(|_| {
            Err(arrow_schema::ArrowError::ComputeError(
                "arrow-rs cannot concatenate them (merged dictionary keys overflow)".into(),
            ))
        })
    };
    let e = match concat(expected, e0.schema()) {
        Ok(b) => b,
        Err(err) => return vec![format!("cannot combine the expected batches: {err}")],
    };
    let a = match concat(actual, a0.schema()) {
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

/// What arrived against what was sent, in three tiers, each stricter
/// tier empty unless the looser one is: a consumer (or a pair of
/// libraries) can lose values, change only types, or change only names and
/// metadata.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Tiers {
    /// Values, validity or structure differ (the value differences first,
    /// then the type changes beside them).
    pub values: Vec<String>,
    /// Every value arrived; types, nullability or type flags changed (and
    /// perhaps names and metadata too).
    pub types: Vec<String>,
    /// Only field names and metadata changed.
    pub optional: Vec<String>,
    /// Filled by [`Tiers::split_precision_loss`] only: every differing
    /// value is a time, timestamp, duration or interval cut to a coarser
    /// unit (then `values` is empty).
    pub precision: Vec<String>,
}

impl Tiers {
    /// Moves the value differences to `precision` when each one is a
    /// temporal value cut to a coarser unit ([`logical::precision_loss`]):
    /// a loss that follows from the reader's own types, judged apart from
    /// values that are wrong.
    pub fn split_precision_loss(
        &mut self,
        expected_schema: &Schema,
        expected: &[RecordBatch],
        actual_schema: &Schema,
        actual: &[RecordBatch],
    ) {
        if self.values.is_empty() {
            return;
        }
        if let Some(loss) =
            logical::precision_loss(expected_schema, expected, actual_schema, actual)
        {
            self.precision = loss;
            self.values.clear();
        }
    }

    /// Nothing differs at all.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
            && self.types.is_empty()
            && self.optional.is_empty()
            && self.precision.is_empty()
    }
}

/// Compares in tiers: everything ([`streams`]); if anything differs, the
/// same without names and metadata (what the spec lets a consumer ignore);
/// if that still differs, value by value across type flavours
/// ([`logical::streams`]).
pub fn tiers(
    expected_schema: &Schema,
    expected: &[RecordBatch],
    actual_schema: &Schema,
    actual: &[RecordBatch],
) -> Tiers {
    let all = streams(expected_schema, expected, actual_schema, actual);
    if all.is_empty() {
        return Tiers::default();
    }
    let structural =
        streams_ignoring_names_and_metadata(expected_schema, expected, actual_schema, actual);
    if structural.is_empty() {
        return Tiers {
            optional: all,
            ..Default::default()
        };
    }
    let mut values = logical::streams(expected_schema, expected, actual_schema, actual);
    if values.is_empty() {
        Tiers {
            types: structural,
            ..Default::default()
        }
    } else {
        values.extend(structural);
        Tiers {
            values,
            ..Default::default()
        }
    }
}

/// [`streams`] with every field name and all metadata (schema, field and
/// nested field level) left out on both sides: the differences that are not
/// only in what the spec lets consumers ignore ("consumers MAY decide to
/// ignore" names; "Consumers MAY choose to ignore this information", of
/// metadata).
pub fn streams_ignoring_names_and_metadata(
    expected_schema: &Schema,
    expected: &[RecordBatch],
    actual_schema: &Schema,
    actual: &[RecordBatch],
) -> Vec<String> {
    let strip =
        |schema: &Schema, batches: &[RecordBatch]| -> Result<(Schema, Vec<RecordBatch>), String> {
            let fields: Fields = schema
                .fields()
                .iter()
                .map(|f| Arc::new(bare_field(f)))
                .collect();
            let bare = Schema::new(fields);
            let batches = batches
                .iter()
                .map(|b| {
                    let columns = b
                        .columns()
                        .iter()
                        .map(|c| bare_data(&c.to_data()).map(make_array))
                        .collect::<Result<Vec<_>, _>>()?;
                    RecordBatch::try_new_with_options(
                        Arc::new(bare.clone()),
                        columns,
                        &arrow_array::RecordBatchOptions::new().with_row_count(Some(b.num_rows())),
                    )
                    .map_err(|e| e.to_string())
                })
                .collect::<Result<Vec<_>, _>>()?;
            Ok((bare, batches))
        };
    match (
        strip(expected_schema, expected),
        strip(actual_schema, actual),
    ) {
        (Ok((es, eb)), Ok((as_, ab))) => streams(&es, &eb, &as_, &ab),
        (Err(e), _) | (_, Err(e)) => {
            vec![format!("cannot compare without names and metadata: {e}")]
        }
    }
}

/// `f` with an empty name and no metadata, at every depth.
fn bare_field(f: &Field) -> Field {
    let mut out = Field::new("", bare_type(f.data_type()), f.is_nullable());
    if let Some(o) = f.dict_is_ordered() {
        out = out.with_dict_is_ordered(o);
    }
    out
}

fn bare_type(dt: &DataType) -> DataType {
    use DataType::*;
    let bare = |f: &Arc<Field>| Arc::new(bare_field(f));
    match dt {
        List(f) => List(bare(f)),
        LargeList(f) => LargeList(bare(f)),
        ListView(f) => ListView(bare(f)),
        LargeListView(f) => LargeListView(bare(f)),
        FixedSizeList(f, n) => FixedSizeList(bare(f), *n),
        // Map entries keep their shape; only names and metadata go.
        Map(f, sorted) => Map(bare(f), *sorted),
        Struct(fields) => Struct(fields.iter().map(bare).collect()),
        Union(fields, mode) => Union(
            fields
                .iter()
                .map(|(id, f)| (id, Arc::new(bare_field(f))))
                .collect(),
            *mode,
        ),
        RunEndEncoded(r, v) => RunEndEncoded(bare(r), bare(v)),
        Dictionary(k, v) => Dictionary(k.clone(), Box::new(bare_type(v))),
        other => other.clone(),
    }
}

/// `data` retyped with [`bare_type`], children and dictionary included.
fn bare_data(data: &arrow_data::ArrayData) -> Result<arrow_data::ArrayData, String> {
    let children = data
        .child_data()
        .iter()
        .map(bare_data)
        .collect::<Result<Vec<_>, _>>()?;
    data.clone()
        .into_builder()
        .data_type(bare_type(data.data_type()))
        .child_data(children)
        .build()
        .map_err(|e| e.to_string())
}

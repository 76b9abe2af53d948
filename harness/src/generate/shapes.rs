//! Data shapes the type draws do not make on their own, each a generated
//! scenario of its own (`gen/shape:<name>`), built from the run's seed:
//!
//! - `zero-columns`: batches with rows but no column ("a record batch can
//!   be trivially considered as an equivalent struct array"; a struct
//!   with no child still has a length);
//! - `nested-metadata`: metadata on every nested field (struct children,
//!   list items, map entries, keys and values, union children), which
//!   "ArrowSchema.metadata" carries at every level;
//! - `dictionary-per-batch`: a stream whose dictionary is another in each
//!   batch (the C stream interface hands each batch's dictionary with its
//!   array; IPC replaces it);
//! - `canonical-extensions`: the canonical extension types of Arrow's
//!   CanonicalExtensions.rst over valid storage (`arrow.bool8`,
//!   `arrow.uuid`, `arrow.json`, `arrow.fixed_shape_tensor`,
//!   `arrow.opaque`);
//! - `extension-storage`: a registered (non-canonical) extension type over
//!   one column of every type family the generator knows, view types
//!   included.
//!
//! Shapes are not proptest draws: they do not shrink (a failure on one is
//! split into its columns like any generated scenario, and is small).

#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::{
    ArrayRef, FixedSizeListArray, Float32Array, Int8Array, RecordBatch, RecordBatchOptions,
    StringArray,
};
use arrow_buffer::NullBuffer;
use arrow_schema::{DataType, Field, Fields, Schema, UnionFields, UnionMode};
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

use super::types::{self, EXTENSION_METADATA, EXTENSION_NAME};
use super::values::{self, Nulls, Rng};
use crate::scenario::Scenario;

/// The shapes, by the name their scenarios carry (`gen/shape:<name>`).
pub const NAMES: [&str; 5] = [
    "zero-columns",
    "nested-metadata",
    "dictionary-per-batch",
    "canonical-extensions",
    "extension-storage",
];

/// The scenario name prefix of shapes.
pub const PREFIX: &str = "gen/shape:";

/// Rows of each batch of a shape (a zero-row batch is in the list: an
/// empty batch of each shape is a case of its own).
const ROWS: [usize; 3] = [7, 0, 19];

fn rng(seed: u64, name: &str) -> Rng {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    Rng::new(seed ^ h)
}

fn meta(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// `f` with metadata naming its place (`arrowcert.at`), and its nested
/// fields likewise, all the way down.
fn with_nested_metadata(f: &Field, at: &str) -> Field {
    let dt = nested_type(f.data_type(), at);
    f.clone()
        .with_data_type(dt)
        .with_metadata(meta(&[("arrowcert.at", at), ("", "empty key")]))
}

fn nested_type(dt: &DataType, at: &str) -> DataType {
    use DataType::*;
    let child = |f: &Arc<Field>| Arc::new(with_nested_metadata(f, &format!("{at}.{}", f.name())));
    match dt {
        List(f) => List(child(f)),
        LargeList(f) => LargeList(child(f)),
        ListView(f) => ListView(child(f)),
        LargeListView(f) => LargeListView(child(f)),
        FixedSizeList(f, n) => FixedSizeList(child(f), *n),
        Map(f, sorted) => Map(child(f), *sorted),
        Struct(fs) => Struct(fs.iter().map(child).collect::<Fields>()),
        Union(fs, mode) => Union(
            UnionFields::try_new(
                fs.iter().map(|(id, _)| id),
                fs.iter().map(|(_, f)| child(f).as_ref().clone()),
            )
            .expect("the same ids"),
            *mode,
        ),
        other => other.clone(),
    }
}

/// The fields of the nested-metadata shape: every nested family, each
/// field at every level with metadata of its own.
fn nested_metadata_fields() -> Vec<Field> {
    use DataType::*;
    let item = |t: DataType| Arc::new(Field::new("item", t, true));
    let entries = Struct(Fields::from(vec![
        Field::new("key", Utf8, false),
        Field::new("value", Int64, true),
    ]));
    let fields = [
        Field::new(
            "s",
            Struct(Fields::from(vec![
                Field::new("a", Int32, true),
                Field::new("l", List(item(Utf8)), true),
            ])),
            true,
        ),
        Field::new(
            "l",
            LargeList(item(Struct(Fields::from(vec![Field::new(
                "x", Float64, true,
            )])))),
            true,
        ),
        Field::new("lv", ListView(item(Int16)), true),
        Field::new("fsl", FixedSizeList(item(Boolean), 2), true),
        Field::new(
            "m",
            Map(Arc::new(Field::new("entries", entries, false)), false),
            true,
        ),
        Field::new(
            "u",
            Union(
                UnionFields::try_new(
                    [0, 5],
                    [Field::new("i", Int32, true), Field::new("t", Utf8, true)],
                )
                .expect("distinct ids"),
                UnionMode::Dense,
            ),
            true,
        ),
    ];
    fields
        .iter()
        .map(|f| with_nested_metadata(f, f.name()))
        .collect()
}

/// Extension metadata on a field.
fn extension(f: Field, name: &str, metadata: &str) -> Field {
    f.with_metadata(meta(&[
        (EXTENSION_NAME, name),
        (EXTENSION_METADATA, metadata),
    ]))
}

/// A validity of `len` slots, about one in four null.
fn some_nulls(len: usize, rng: &mut Rng) -> NullBuffer {
    NullBuffer::from_iter((0..len).map(|_| !rng.chance(25)))
}

/// The canonical extension types over valid storage: bool8 (int8 0 or 1),
/// uuid (16 bytes), json (UTF-8 JSON texts), fixed_shape_tensor (2x2
/// float32 tensors), opaque (binary, its type and vendor named).
fn canonical_columns(len: usize, rng: &mut Rng) -> Result<(Vec<Field>, Vec<ArrayRef>), String> {
    let err = |e: arrow_schema::ArrowError| e.to_string();
    let bool8: ArrayRef = Arc::new(Int8Array::new(
        (0..len).map(|_| rng.below(2) as i8).collect(),
        Some(some_nulls(len, rng)),
    ));
    let uuid =
        values::array(&DataType::FixedSizeBinary(16), true, len, Nulls::Some, rng).map_err(err)?;
    let texts = ["{}", "[1,2]", "{\"a\":null}", "\"é\"", "3.5", "true"];
    let json: ArrayRef =
        Arc::new(StringArray::from_iter((0..len).map(|_| {
            (!rng.chance(20)).then(|| texts[rng.below(texts.len() as u64) as usize])
        })));
    let item = Arc::new(Field::new("item", DataType::Float32, false));
    let floats = Float32Array::from_iter_values((0..len * 4).map(|i| i as f32 / 4.0));
    let tensor: ArrayRef = Arc::new(
        FixedSizeListArray::try_new(
            item.clone(),
            4,
            Arc::new(floats),
            Some(some_nulls(len, rng)),
        )
        .map_err(err)?,
    );
    let opaque = values::array(&DataType::Binary, true, len, Nulls::Some, rng).map_err(err)?;
    let fields = vec![
        extension(Field::new("bool8", DataType::Int8, true), "arrow.bool8", ""),
        extension(
            Field::new("uuid", DataType::FixedSizeBinary(16), true),
            "arrow.uuid",
            "",
        ),
        extension(Field::new("json", DataType::Utf8, true), "arrow.json", ""),
        extension(
            Field::new("tensor", DataType::FixedSizeList(item, 4), true),
            "arrow.fixed_shape_tensor",
            "{\"shape\":[2,2]}",
        ),
        extension(
            Field::new("opaque", DataType::Binary, true),
            "arrow.opaque",
            "{\"type_name\":\"geometry\",\"vendor_name\":\"arrowcert\"}",
        ),
    ];
    Ok((fields, vec![bool8, uuid, json, tensor, opaque]))
}

/// One column of each type family, drawn from the family's strategy with
/// this seed, each under a registered extension type.
fn extension_storage_fields(seed: u64) -> Result<Vec<Field>, String> {
    let mut out = Vec::new();
    for (i, family) in types::family_names().into_iter().enumerate() {
        let mut bytes = [0u8; 32];
        let mut r = Rng::new(seed ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        for chunk in bytes.chunks_mut(8) {
            chunk.copy_from_slice(&r.next_u64().to_le_bytes());
        }
        let mut runner = TestRunner::new_with_rng(
            Config::default(),
            TestRng::from_seed(RngAlgorithm::ChaCha, &bytes),
        );
        let strategy = types::family(family, 2).ok_or_else(|| format!("no family {family}"))?;
        let dt = strategy
            .new_tree(&mut runner)
            .map_err(|e| format!("extension-storage: {e}"))?
            .current();
        let nullable = true;
        out.push(types::ordered(extension(
            Field::new(format!("x{i}"), dt, nullable),
            "arrowcert.registered",
            &format!("{{\"storage\":\"{family}\"}}"),
        )));
    }
    Ok(out)
}

/// The data of shape `name` for a run seeded `seed`.
fn data(seed: u64, name: &str) -> Result<(Arc<Schema>, Vec<RecordBatch>), String> {
    let mut rng = rng(seed, name);
    let err = |e: arrow_schema::ArrowError| format!("{PREFIX}{name}: {e}");
    let from_fields = |fields: Vec<Field>, rng: &mut Rng| -> Result<_, String> {
        let schema = Arc::new(Schema::new(fields));
        let batches = ROWS
            .iter()
            .map(|&len| {
                let columns = schema
                    .fields()
                    .iter()
                    .map(|f| values::array(f.data_type(), f.is_nullable(), len, Nulls::Some, rng))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(err)?;
                RecordBatch::try_new(schema.clone(), columns).map_err(err)
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok((schema, batches))
    };
    match name {
        "zero-columns" => {
            let schema = Arc::new(Schema::new(Fields::empty()));
            let batches = ROWS
                .iter()
                .map(|&len| {
                    let options = RecordBatchOptions::new().with_row_count(Some(len));
                    RecordBatch::try_new_with_options(schema.clone(), vec![], &options).map_err(err)
                })
                .collect::<Result<Vec<_>, _>>()?;
            Ok((schema, batches))
        }
        "nested-metadata" => from_fields(nested_metadata_fields(), &mut rng),
        "dictionary-per-batch" => {
            // values.rs draws each batch's dictionary afresh: three batches
            // of a dictionary column hold three dictionaries (checked by
            // the test below), plus a plain column beside it.
            let dict = DataType::Dictionary(Box::new(DataType::Int16), Box::new(DataType::Utf8));
            from_fields(
                vec![
                    types::ordered(Field::new("d", dict, true)),
                    Field::new("b", DataType::Boolean, true),
                ],
                &mut rng,
            )
        }
        "canonical-extensions" => {
            let mut fields = None;
            let mut batches = Vec::new();
            for &len in &ROWS {
                let (f, columns) = canonical_columns(len, &mut rng)?;
                let schema = Arc::new(Schema::new(f.clone()));
                batches.push(RecordBatch::try_new(schema, columns).map_err(err)?);
                fields = Some(f);
            }
            let schema = Arc::new(Schema::new(fields.unwrap_or_default()));
            Ok((schema, batches))
        }
        "extension-storage" => from_fields(extension_storage_fields(seed)?, &mut rng),
        other => Err(format!(
            "{PREFIX}{other}: no such shape (shapes: {})",
            NAMES.join(", ")
        )),
    }
}

/// The scenario of shape `name` (without its prefix) for a run seeded
/// `seed`.
pub fn scenario(seed: u64, name: &str) -> Result<Scenario, String> {
    let (schema, batches) = data(seed, name)?;
    // A batch made against a schema equal to this one.
    let batches = batches
        .into_iter()
        .map(|b| b.with_schema(schema.clone()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{PREFIX}{name}: {e}"))?;
    Scenario::from_batches(&format!("{PREFIX}{name}"), schema, batches)
}

/// Every shape scenario of a run seeded `seed`, in [`NAMES`] order.
pub fn scenarios(seed: u64) -> Result<Vec<Scenario>, String> {
    NAMES.iter().map(|n| scenario(seed, n)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::Array;

    #[test]
    fn every_shape_builds_and_rebuilds_alike() {
        for seed in [1, 2, 20261122] {
            let all = scenarios(seed).unwrap();
            assert_eq!(all.len(), NAMES.len());
            for s in &all {
                let again = scenario(seed, s.name.strip_prefix(PREFIX).unwrap()).unwrap();
                assert_eq!(again.ipc, s.ipc, "{}", s.name);
                // What a producer decodes is the data itself.
                let decoded = Scenario::from_ipc(&s.name, s.ipc.clone()).unwrap();
                assert_eq!(decoded.batches, s.batches, "{}", s.name);
                assert_eq!(decoded.schema, s.schema, "{}", s.name);
            }
        }
        assert!(scenario(1, "nothing").is_err());
    }

    #[test]
    fn zero_columns_have_rows() {
        let s = scenario(1, "zero-columns").unwrap();
        assert!(s.schema.fields().is_empty());
        let rows: Vec<usize> = s.batches.iter().map(RecordBatch::num_rows).collect();
        assert_eq!(rows, ROWS);
    }

    /// Every nested field of the shape carries metadata.
    #[test]
    fn every_nested_field_has_metadata() {
        fn walk(f: &Field, seen: &mut usize) {
            assert!(
                f.metadata().contains_key("arrowcert.at"),
                "{} has none",
                f.name()
            );
            *seen += 1;
            for c in crate::compare::nested_fields(f.data_type()).iter() {
                walk(c, seen);
            }
        }
        let s = scenario(1, "nested-metadata").unwrap();
        let mut seen = 0;
        for f in s.schema.fields() {
            walk(f, &mut seen);
        }
        assert!(seen >= 18, "{seen} fields");
    }

    /// The checks judge each shape: what a producer or consumer gets wrong
    /// of it shows as a difference (the reference pair passes them all:
    /// `certify` with any seed).
    #[test]
    fn the_comparisons_see_each_shape_misread() {
        // Nested metadata dropped two levels down.
        let s = scenario(1, "nested-metadata").unwrap();
        let mut fields: Vec<Field> = s
            .schema
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect();
        let DataType::Struct(children) = fields[0].data_type().clone() else {
            panic!("a struct first")
        };
        let mut children: Vec<Field> = children.iter().map(|f| f.as_ref().clone()).collect();
        children[1] = children[1].clone().with_metadata(HashMap::new());
        fields[0] = fields[0]
            .clone()
            .with_data_type(DataType::Struct(children.into()));
        let stripped = Schema::new(fields);
        assert!(!crate::compare::schemas(&s.schema, &stripped).is_empty());
        // Rows of a batch with no column lost.
        let s = scenario(1, "zero-columns").unwrap();
        let options = RecordBatchOptions::new().with_row_count(Some(0));
        let empty = RecordBatch::try_new_with_options(s.schema.clone(), vec![], &options).unwrap();
        let mut read = s.batches.clone();
        read[0] = empty;
        assert!(!crate::compare::batches(&s.batches, &read).is_empty());
        // A canonical extension's name dropped.
        let s = scenario(1, "canonical-extensions").unwrap();
        let fields: Vec<Field> = s
            .schema
            .fields()
            .iter()
            .map(|f| f.as_ref().clone().with_metadata(HashMap::new()))
            .collect();
        assert!(!crate::compare::schemas(&s.schema, &Schema::new(fields)).is_empty());
    }

    #[test]
    fn the_dictionary_changes_from_batch_to_batch() {
        let s = scenario(1, "dictionary-per-batch").unwrap();
        let dicts: Vec<ArrayRef> = s
            .batches
            .iter()
            .map(|b| {
                b.column(0)
                    .as_any()
                    .downcast_ref::<arrow_array::DictionaryArray<arrow_array::types::Int16Type>>()
                    .unwrap()
                    .values()
                    .clone()
            })
            .collect();
        assert_ne!(dicts[0].to_data(), dicts[2].to_data());
        // Checked: a reader that keeps the first batch's dictionary for the
        // later batches (IPC thinking: "the dictionary was already sent")
        // reads other values, and the comparison every stream path judges
        // with says so.
        use arrow_array::{cast::AsArray, types::Int16Type, DictionaryArray};
        let stale: Vec<RecordBatch> = s
            .batches
            .iter()
            .map(|b| {
                let d = b.column(0).as_dictionary::<Int16Type>();
                let keys = arrow_array::Int16Array::from_iter(
                    d.keys()
                        .iter()
                        .map(|k| k.map(|k| k.min(dicts[0].len() as i16 - 1))),
                );
                let first = DictionaryArray::<Int16Type>::try_new(keys, dicts[0].clone()).unwrap();
                let mut cols = b.columns().to_vec();
                cols[0] = Arc::new(first);
                RecordBatch::try_new(b.schema(), cols).unwrap()
            })
            .collect();
        let diff = crate::compare::streams(&s.schema, &s.batches, &s.schema, &stale);
        assert!(!diff.is_empty(), "a stale dictionary read as the data");
        let same = crate::compare::streams(&s.schema, &s.batches, &s.schema, &s.batches);
        assert!(same.is_empty(), "{same:?}");
    }

    #[test]
    fn canonical_extensions_hold_valid_storage() {
        let s = scenario(1, "canonical-extensions").unwrap();
        let names: Vec<&str> = s
            .schema
            .fields()
            .iter()
            .map(|f| f.metadata()[EXTENSION_NAME].as_str())
            .collect();
        assert_eq!(
            names,
            [
                "arrow.bool8",
                "arrow.uuid",
                "arrow.json",
                "arrow.fixed_shape_tensor",
                "arrow.opaque"
            ]
        );
        for b in &s.batches {
            let bool8 = b.column(0).as_any().downcast_ref::<Int8Array>().unwrap();
            assert!(bool8.iter().flatten().all(|v| v == 0 || v == 1));
        }
    }

    #[test]
    fn extension_storage_covers_every_family() {
        let s = scenario(1, "extension-storage").unwrap();
        let families: Vec<&str> = s
            .schema
            .fields()
            .iter()
            .map(|f| types::family_of(f.data_type()))
            .collect();
        assert_eq!(families, types::family_names());
        assert!(s
            .schema
            .fields()
            .iter()
            .all(|f| f.metadata()[EXTENSION_NAME] == "arrowcert.registered"));
    }
}

//! The logical comparison catches what a consumer could get wrong: a changed
//! value, a changed null, a changed field name, changed metadata; and it
//! ignores what may legitimately differ (batch boundaries, physical layout).

mod support;

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::{Array, ArrayRef, Int32Array, RecordBatch, StringArray};
use arrow_schema::{Field, Schema};
use arrowcert::compare;
use arrowcert::scenario;

fn gold(name: &str) -> scenario::Scenario {
    scenario::gold_dir(&support::gold_dir())
        .expect("gold files")
        .into_iter()
        .find(|s| s.name == format!("gold/{name}"))
        .expect("gold scenario")
}

fn replace_column(batch: &RecordBatch, i: usize, col: ArrayRef) -> RecordBatch {
    let mut cols = batch.columns().to_vec();
    cols[i] = col;
    RecordBatch::try_new(batch.schema(), cols).unwrap()
}

/// The first int32 column of the gold primitive file and its index.
fn int32_column(b: &RecordBatch) -> (usize, Int32Array) {
    let i = b
        .schema()
        .fields()
        .iter()
        .position(|f| f.data_type() == &arrow_schema::DataType::Int32)
        .expect("an int32 column");
    let a = b
        .column(i)
        .as_any()
        .downcast_ref::<Int32Array>()
        .unwrap()
        .clone();
    (i, a)
}

#[test]
fn identical_gold_data_has_no_differences() {
    for s in scenario::gold_dir(&support::gold_dir()).unwrap() {
        let d = compare::streams(&s.schema, &s.batches, &s.schema, &s.batches);
        assert!(d.is_empty(), "{}: {d:?}", s.name);
    }
}

#[test]
fn a_changed_value_is_caught() {
    let s = gold("generated_primitive");
    let b = &s.batches[0];
    let (i, a) = int32_column(b);
    let row = (0..a.len()).find(|&r| a.is_valid(r)).expect("a valid row");
    let changed: Int32Array = (0..a.len())
        .map(|r| {
            a.is_valid(r).then(|| {
                if r == row {
                    a.value(r).wrapping_add(1)
                } else {
                    a.value(r)
                }
            })
        })
        .collect();
    let d = compare::batches(
        std::slice::from_ref(b),
        &[replace_column(b, i, Arc::new(changed))],
    );
    assert_eq!(d.len(), 1, "{d:?}");
    assert!(d[0].contains(&format!("row {row}")), "{d:?}");
}

#[test]
fn a_changed_null_is_caught() {
    let s = gold("generated_primitive");
    let b = &s.batches[0];
    let (i, a) = int32_column(b);
    let row = (0..a.len()).find(|&r| a.is_valid(r)).expect("a valid row");
    // Same values, one more null: only validity differs.
    let changed: Int32Array = (0..a.len())
        .map(|r| (a.is_valid(r) && r != row).then(|| a.value(r)))
        .collect();
    let d = compare::batches(
        std::slice::from_ref(b),
        &[replace_column(b, i, Arc::new(changed))],
    );
    assert_eq!(d.len(), 1, "{d:?}");
    assert!(d[0].contains(&format!("row {row}: null")), "{d:?}");
}

#[test]
fn a_value_under_a_null_is_ignored() {
    // Garbage under a null slot is not data: it must not be reported.
    let e = Int32Array::from(vec![Some(1), None, Some(3)]);
    let a = Int32Array::new(vec![1, 999, 3].into(), e.nulls().cloned());
    let schema = Arc::new(Schema::new(vec![Field::new(
        "x",
        e.data_type().clone(),
        true,
    )]));
    let eb = RecordBatch::try_new(schema.clone(), vec![Arc::new(e)]).unwrap();
    let ab = RecordBatch::try_new(schema, vec![Arc::new(a)]).unwrap();
    assert!(compare::batches(&[eb], &[ab]).is_empty());
}

#[test]
fn a_changed_field_name_is_caught() {
    let s = gold("generated_nested");
    let mut fields: Vec<Field> = s
        .schema
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    let old = fields[0].name().clone();
    fields[0] = fields[0].clone().with_name(format!("{old}_renamed"));
    let renamed = Schema::new_with_metadata(fields, s.schema.metadata().clone());
    let d = compare::schemas(&s.schema, &renamed);
    assert_eq!(d.len(), 1, "{d:?}");
    assert!(
        d[0].contains("name is") && d[0].contains("_renamed"),
        "{d:?}"
    );
}

#[test]
fn a_changed_nested_field_name_is_caught() {
    // Renaming a list's item field (a child, not a column) is caught too.
    let s = gold("generated_nested");
    let (i, f) = s
        .schema
        .fields()
        .iter()
        .enumerate()
        .find(|(_, f)| matches!(f.data_type(), arrow_schema::DataType::List(_)))
        .expect("a list column");
    let arrow_schema::DataType::List(item) = f.data_type() else {
        unreachable!()
    };
    let new_item = Arc::new(item.as_ref().clone().with_name("element_renamed"));
    let mut fields: Vec<Field> = s
        .schema
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    fields[i] = f
        .as_ref()
        .clone()
        .with_data_type(arrow_schema::DataType::List(new_item));
    let d = compare::schemas(&s.schema, &Schema::new(fields));
    assert_eq!(d.len(), 1, "{d:?}");
    assert!(
        d[0].contains(".item") && d[0].contains("element_renamed"),
        "{d:?}"
    );
}

#[test]
fn changed_metadata_is_caught() {
    let s = gold("generated_custom_metadata");
    assert!(
        !s.schema.metadata().is_empty()
            || s.schema.fields().iter().any(|f| !f.metadata().is_empty()),
        "the gold file carries metadata"
    );
    // Schema-level metadata: a value changed.
    let mut md: HashMap<String, String> = s
        .schema
        .metadata()
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    md.insert("arrowcert-extra".into(), "x".into());
    let changed = Schema::new_with_metadata(s.schema.fields().clone(), md);
    let d = compare::schemas(&s.schema, &changed);
    assert_eq!(
        d,
        vec!["schema: unexpected metadata \"arrowcert-extra\" = \"x\"".to_string()]
    );

    // Field-level metadata: dropped.
    let (i, f) = s
        .schema
        .fields()
        .iter()
        .enumerate()
        .find(|(_, f)| !f.metadata().is_empty())
        .expect("a field with metadata");
    let mut fields: Vec<Field> = s
        .schema
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    fields[i] = f.as_ref().clone().with_metadata(HashMap::new());
    let d = compare::schemas(
        &s.schema,
        &Schema::new_with_metadata(fields, s.schema.metadata().clone()),
    );
    assert!(
        !d.is_empty() && d.iter().all(|x| x.contains("is missing")),
        "{d:?}"
    );
}

#[test]
fn a_changed_nullability_is_caught() {
    let s = gold("generated_primitive");
    let mut fields: Vec<Field> = s
        .schema
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    let n = fields[0].is_nullable();
    fields[0] = fields[0].clone().with_nullable(!n);
    let d = compare::schemas(&s.schema, &Schema::new(fields));
    assert_eq!(d.len(), 1, "{d:?}");
    assert!(d[0].contains("nullable"), "{d:?}");
}

/// A difference deep inside a union is named where it is, not as the
/// whole union type (which can run to hundreds of characters).
#[test]
fn a_changed_nullability_inside_a_union_is_named_at_its_child() {
    use arrow_schema::{DataType, UnionFields, UnionMode};
    let union = |values_nullable: bool| {
        let list = DataType::List(Arc::new(Field::new(
            "item",
            DataType::Int32,
            values_nullable,
        )));
        DataType::Union(
            UnionFields::try_new(
                vec![5, 7],
                vec![
                    Field::new("a", DataType::Utf8, true),
                    Field::new("b", list, true),
                ],
            )
            .unwrap(),
            UnionMode::Sparse,
        )
    };
    let schema = |n: bool| Schema::new(vec![Field::new("u", union(n), true)]);
    let d = compare::schemas(&schema(false), &schema(true));
    assert_eq!(
        d,
        ["field [0].7.item \"item\": nullable is true, expected false"],
        "{d:?}"
    );
}

#[test]
fn batch_boundaries_do_not_matter_but_rows_do() {
    let schema = Arc::new(Schema::new(vec![Field::new(
        "s",
        arrow_schema::DataType::Utf8,
        true,
    )]));
    let all = StringArray::from(vec![Some("a"), None, Some("c"), Some("d")]);
    let one = RecordBatch::try_new(schema.clone(), vec![Arc::new(all.clone())]).unwrap();
    let two = vec![one.slice(0, 1), one.slice(1, 3)];
    assert!(compare::batches(std::slice::from_ref(&one), &two).is_empty());
    let d = compare::batches(std::slice::from_ref(&one), &[one.slice(0, 3)]);
    assert_eq!(d, vec!["3 rows, expected 4".to_string()]);
}

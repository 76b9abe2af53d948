//! Strategies for generated schemas: every type of `Columnar.rst`, nested
//! to a bounded depth. proptest shrinks a union toward its first
//! alternative, so each list starts with the simplest choice: a failing
//! `map<utf8, list<dictionary<int8, utf8>>>` shrinks toward `int32`.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_schema::{DataType, Field, IntervalUnit, TimeUnit, UnionFields, UnionMode};
use proptest::prelude::*;
use proptest::strategy::{BoxedStrategy, Union};

/// Field metadata key naming an extension type.
pub const EXTENSION_NAME: &str = "ARROW:extension:name";
/// Field metadata key carrying an extension type's parameters.
pub const EXTENSION_METADATA: &str = "ARROW:extension:metadata";

fn one_of(options: Vec<BoxedStrategy<DataType>>) -> BoxedStrategy<DataType> {
    Union::new(options).boxed()
}

fn just(t: DataType) -> BoxedStrategy<DataType> {
    Just(t).boxed()
}

fn time_unit() -> impl Strategy<Value = TimeUnit> {
    prop_oneof![
        Just(TimeUnit::Second),
        Just(TimeUnit::Millisecond),
        Just(TimeUnit::Microsecond),
        Just(TimeUnit::Nanosecond),
    ]
}

/// Timezones: none, UTC, a fixed offset and a named zone (the spec allows
/// both forms; consumers must carry the string through unchanged).
fn timezone() -> impl Strategy<Value = Option<Arc<str>>> {
    prop_oneof![
        Just(None),
        Just(Some(Arc::from("UTC"))),
        Just(Some(Arc::from("+05:30"))),
        Just(Some(Arc::from("America/New_York"))),
    ]
}

/// The leaf type families, simplest first, each with its strategy and
/// the name single-type scenarios carry (`gen/type:<name>`).
pub fn leaf_families() -> Vec<(&'static str, BoxedStrategy<DataType>)> {
    use DataType::*;
    vec![
        ("int32", just(Int32)),
        ("int64", just(Int64)),
        ("utf8", just(Utf8)),
        ("bool", just(Boolean)),
        ("null", just(Null)),
        ("int8", just(Int8)),
        ("int16", just(Int16)),
        ("uint8", just(UInt8)),
        ("uint16", just(UInt16)),
        ("uint32", just(UInt32)),
        ("uint64", just(UInt64)),
        ("float16", just(Float16)),
        ("float32", just(Float32)),
        ("float64", just(Float64)),
        (
            "decimal32",
            (1u8..=9, -2i8..=4)
                .prop_map(|(p, s)| Decimal32(p, s.min(p as i8)))
                .boxed(),
        ),
        (
            "decimal64",
            (1u8..=18, -2i8..=6)
                .prop_map(|(p, s)| Decimal64(p, s.min(p as i8)))
                .boxed(),
        ),
        (
            "decimal128",
            (1u8..=38, -2i8..=10)
                .prop_map(|(p, s)| Decimal128(p, s.min(p as i8)))
                .boxed(),
        ),
        (
            "decimal256",
            (1u8..=76, -2i8..=20)
                .prop_map(|(p, s)| Decimal256(p, s.min(p as i8)))
                .boxed(),
        ),
        ("binary", just(Binary)),
        ("large-binary", just(LargeBinary)),
        ("binary-view", just(BinaryView)),
        ("large-utf8", just(LargeUtf8)),
        ("utf8-view", just(Utf8View)),
        (
            "fixed-size-binary",
            (1i32..=20).prop_map(FixedSizeBinary).boxed(),
        ),
        ("date32", just(Date32)),
        ("date64", just(Date64)),
        (
            "time32",
            prop_oneof![Just(TimeUnit::Second), Just(TimeUnit::Millisecond)]
                .prop_map(Time32)
                .boxed(),
        ),
        (
            "time64",
            prop_oneof![Just(TimeUnit::Microsecond), Just(TimeUnit::Nanosecond)]
                .prop_map(Time64)
                .boxed(),
        ),
        (
            "timestamp",
            (time_unit(), timezone())
                .prop_map(|(u, tz)| Timestamp(u, tz))
                .boxed(),
        ),
        ("duration", time_unit().prop_map(Duration).boxed()),
        (
            "interval",
            prop_oneof![
                Just(IntervalUnit::YearMonth),
                Just(IntervalUnit::DayTime),
                Just(IntervalUnit::MonthDayNano),
            ]
            .prop_map(Interval)
            .boxed(),
        ),
        ("dictionary", dictionary().boxed()),
    ]
}

/// Fixed-width and variable-width leaf types, simplest first.
pub fn leaf() -> BoxedStrategy<DataType> {
    one_of(leaf_families().into_iter().map(|(_, s)| s).collect())
}

/// Dictionary-encoded leaves, with every index type.
fn dictionary() -> impl Strategy<Value = DataType> {
    use DataType::*;
    let index = prop_oneof![
        Just(Int32),
        Just(Int8),
        Just(Int16),
        Just(Int64),
        Just(UInt8),
        Just(UInt16),
        Just(UInt32),
        Just(UInt64),
    ];
    let values = prop_oneof![
        Just(Utf8),
        Just(Int64),
        Just(LargeUtf8),
        Just(Binary),
        Just(Float64),
        Just(Date32),
        Just(FixedSizeBinary(3)),
        Just(Decimal128(10, 2)),
    ];
    (index, values).prop_map(|(i, v)| Dictionary(Box::new(i), Box::new(v)))
}

/// Whether every value of the type is null whatever the data: the null
/// type, and unions of such types. Fields of these types are nullable.
pub fn always_null(ty: &DataType) -> bool {
    match ty {
        DataType::Null => true,
        DataType::Union(fields, _) => fields.iter().all(|(_, f)| always_null(f.data_type())),
        _ => false,
    }
}

/// Types that can be the element of a nested type.
fn child(name: &'static str, ty: DataType, nullable: bool) -> Arc<Field> {
    let nullable = nullable || always_null(&ty);
    Arc::new(ordered(Field::new(name, ty, nullable)))
}

/// Dictionaries with signed indices are declared ordered
/// (ARROW_FLAG_DICTIONARY_ORDERED), the others not: both kinds show up
/// without another draw.
pub fn ordered(f: Field) -> Field {
    match f.data_type() {
        DataType::Dictionary(index, _) if index.is_signed_integer() => f.with_dict_is_ordered(true),
        _ => f,
    }
}

/// Map keys: non-nullable, sortable, not nested.
fn map_key() -> impl Strategy<Value = DataType> {
    prop_oneof![
        Just(DataType::Utf8),
        Just(DataType::Int32),
        Just(DataType::Int64)
    ]
}

/// Union type ids: distinct, in 0..=127, not necessarily contiguous.
fn type_ids(n: usize) -> impl Strategy<Value = Vec<i8>> {
    prop_oneof![
        Just((0..n as i8).collect::<Vec<_>>()),
        Just((0..n as i8).map(|i| i * 5 + 1).collect::<Vec<_>>()),
        Just((0..n as i8).map(|i| 127 - i).collect::<Vec<_>>()),
    ]
}

/// Run-end encoded values: leaves other than null and dictionaries.
fn ree_values() -> impl Strategy<Value = DataType> {
    use DataType::*;
    prop_oneof![
        Just(Int32),
        Just(Utf8),
        Just(Float64),
        Just(Boolean),
        Just(Int8),
        Just(LargeBinary),
        Just(Utf8View),
        Just(Decimal128(20, 3)),
    ]
}

/// The nested type families over element types drawn from `inner`:
/// list, large list, list view, large list view, fixed-size list, struct,
/// map, union (sparse or dense as `dense` draws) and run-end encoding.
fn nested_families(
    inner: BoxedStrategy<DataType>,
    dense: BoxedStrategy<bool>,
) -> Vec<(&'static str, BoxedStrategy<DataType>)> {
    use DataType::*;
    let elem = (inner, any::<bool>());
    vec![
        (
            "list",
            elem.clone()
                .prop_map(|(t, n)| List(child("item", t, n)))
                .boxed(),
        ),
        (
            "large-list",
            elem.clone()
                .prop_map(|(t, n)| LargeList(child("item", t, n)))
                .boxed(),
        ),
        (
            "list-view",
            elem.clone()
                .prop_map(|(t, n)| ListView(child("item", t, n)))
                .boxed(),
        ),
        (
            "large-list-view",
            elem.clone()
                .prop_map(|(t, n)| LargeListView(child("item", t, n)))
                .boxed(),
        ),
        (
            "fixed-size-list",
            (elem.clone(), 1i32..=4)
                .prop_map(|((t, n), size)| FixedSizeList(child("item", t, n), size))
                .boxed(),
        ),
        (
            "struct",
            prop::collection::vec(elem.clone(), 1..=3)
                .prop_map(|children| {
                    Struct(
                        children
                            .into_iter()
                            .enumerate()
                            .map(|(i, (t, n))| {
                                let nullable = n || always_null(&t);
                                ordered(Field::new(format!("s{i}"), t, nullable))
                            })
                            .collect(),
                    )
                })
                .boxed(),
        ),
        (
            "map",
            (map_key(), elem.clone(), any::<bool>())
                .prop_map(|(k, (v, n), sorted)| {
                    let entries = Struct(
                        vec![
                            Field::new("key", k, false),
                            ordered(Field::new("value", v.clone(), n || always_null(&v))),
                        ]
                        .into(),
                    );
                    // values.rs writes each map's keys in order, so
                    // declaring them sorted is true.
                    Map(Arc::new(Field::new("entries", entries, false)), sorted)
                })
                .boxed(),
        ),
        (
            "union",
            (prop::collection::vec(elem.clone(), 1..=3), dense)
                .prop_flat_map(|(children, dense)| {
                    let n = children.len();
                    (Just(children), Just(dense), type_ids(n))
                })
                .prop_map(|(children, dense, ids)| {
                    let fields = children
                        .into_iter()
                        .enumerate()
                        .map(|(i, (t, n))| {
                            let nullable = n || always_null(&t);
                            ordered(Field::new(format!("u{i}"), t, nullable))
                        })
                        .collect::<Vec<_>>();
                    let mode = if dense {
                        UnionMode::Dense
                    } else {
                        UnionMode::Sparse
                    };
                    Union(
                        UnionFields::try_new(ids, fields).expect("distinct ids"),
                        mode,
                    )
                })
                .boxed(),
        ),
        (
            "run-end-encoded",
            (
                prop_oneof![
                    Just(DataType::Int32),
                    Just(DataType::Int16),
                    Just(DataType::Int64)
                ],
                ree_values(),
                any::<bool>(),
            )
                .prop_map(|(r, v, n)| {
                    RunEndEncoded(
                        Arc::new(Field::new("run_ends", r, false)),
                        Arc::new(Field::new("values", v, n)),
                    )
                })
                .boxed(),
        ),
    ]
}

/// Any type: leaves, then list, large list, list view, large list view,
/// fixed-size list, struct, map, sparse and dense unions and run-end
/// encoding, nested up to `depth` levels.
pub fn data_type(depth: u32) -> BoxedStrategy<DataType> {
    leaf()
        .prop_recursive(depth, 24, 3, |inner| {
            one_of(
                nested_families(inner, any::<bool>().boxed())
                    .into_iter()
                    .map(|(_, s)| s)
                    .collect(),
            )
        })
        .boxed()
}

/// Every type family the generator knows, by the name single-type
/// scenarios carry: the leaves, then the nested families over elements of
/// any type nested up to `depth` levels (unions split by mode, so that
/// each mode is a family of its own).
pub fn family_names() -> Vec<&'static str> {
    let mut out: Vec<&'static str> = leaf_families().into_iter().map(|(n, _)| n).collect();
    out.extend([
        "list",
        "large-list",
        "list-view",
        "large-list-view",
        "fixed-size-list",
        "struct",
        "map",
        "sparse-union",
        "dense-union",
        "run-end-encoded",
    ]);
    out
}

/// The strategy of one family of [`family_names`]: its top-level type is
/// of that family, its elements (for nested families) of any type nested
/// up to `depth - 1` levels.
pub fn family(name: &str, depth: u32) -> Option<BoxedStrategy<DataType>> {
    if let Some((_, s)) = leaf_families().into_iter().find(|(n, _)| *n == name) {
        return Some(s);
    }
    let (wanted, dense) = match name {
        "sparse-union" => ("union", Just(false).boxed()),
        "dense-union" => ("union", Just(true).boxed()),
        "union" => return None,
        other => (other, any::<bool>().boxed()),
    };
    nested_families(data_type(depth.saturating_sub(1)), dense)
        .into_iter()
        .find(|(n, _)| *n == wanted)
        .map(|(_, s)| s)
}

/// The family of [`family_names`] a type belongs to (its top level).
pub fn family_of(dt: &DataType) -> &'static str {
    use DataType::*;
    match dt {
        Null => "null",
        Boolean => "bool",
        Int8 => "int8",
        Int16 => "int16",
        Int32 => "int32",
        Int64 => "int64",
        UInt8 => "uint8",
        UInt16 => "uint16",
        UInt32 => "uint32",
        UInt64 => "uint64",
        Float16 => "float16",
        Float32 => "float32",
        Float64 => "float64",
        Decimal32(..) => "decimal32",
        Decimal64(..) => "decimal64",
        Decimal128(..) => "decimal128",
        Decimal256(..) => "decimal256",
        Binary => "binary",
        LargeBinary => "large-binary",
        BinaryView => "binary-view",
        Utf8 => "utf8",
        LargeUtf8 => "large-utf8",
        Utf8View => "utf8-view",
        FixedSizeBinary(_) => "fixed-size-binary",
        Date32 => "date32",
        Date64 => "date64",
        Time32(_) => "time32",
        Time64(_) => "time64",
        Timestamp(..) => "timestamp",
        Duration(_) => "duration",
        Interval(_) => "interval",
        Dictionary(..) => "dictionary",
        List(_) => "list",
        LargeList(_) => "large-list",
        ListView(_) => "list-view",
        LargeListView(_) => "large-list-view",
        FixedSizeList(..) => "fixed-size-list",
        Struct(_) => "struct",
        Map(..) => "map",
        Union(_, UnionMode::Sparse) => "sparse-union",
        Union(_, UnionMode::Dense) => "dense-union",
        RunEndEncoded(..) => "run-end-encoded",
    }
}

/// Visits a type and every type nested in it (list elements, struct and
/// union children, map entries, run ends and values, dictionary values,
/// and with `dictionary_keys` the dictionary's key type too).
pub fn walk_types<'a>(
    dt: &'a DataType,
    dictionary_keys: bool,
    visit: &mut dyn FnMut(&'a DataType),
) {
    use DataType::*;
    visit(dt);
    match dt {
        List(f)
        | LargeList(f)
        | ListView(f)
        | LargeListView(f)
        | FixedSizeList(f, _)
        | Map(f, _) => walk_types(f.data_type(), dictionary_keys, visit),
        Struct(fs) => fs
            .iter()
            .for_each(|f| walk_types(f.data_type(), dictionary_keys, visit)),
        Union(fs, _) => fs
            .iter()
            .for_each(|(_, f)| walk_types(f.data_type(), dictionary_keys, visit)),
        Dictionary(k, v) => {
            if dictionary_keys {
                walk_types(k, dictionary_keys, visit);
            }
            walk_types(v, dictionary_keys, visit)
        }
        RunEndEncoded(r, v) => {
            walk_types(r.data_type(), dictionary_keys, visit);
            walk_types(v.data_type(), dictionary_keys, visit);
        }
        _ => {}
    }
}

/// Every family a type holds, its own and those of every type nested in
/// it (dictionary values, list elements, struct and union children...).
pub fn families_in(dt: &DataType, out: &mut std::collections::BTreeSet<&'static str>) {
    walk_types(dt, false, &mut |t| {
        out.insert(family_of(t));
    });
}

/// How a top-level field is named: plain, empty, non-ASCII.
fn field_name(i: usize, style: u8) -> String {
    match style {
        0 => format!("f{i}"),
        1 => String::new(),
        2 => format!("ünï {i}"),
        _ => format!("名前_{i}"),
    }
}

/// Field-level metadata: none, an extension type over the storage type,
/// or ordinary pairs including an empty key and an empty value.
fn field_metadata(kind: u8) -> HashMap<String, String> {
    match kind {
        1 => HashMap::from([
            (EXTENSION_NAME.to_string(), "arrowcert.opaque".to_string()),
            (EXTENSION_METADATA.to_string(), "{\"v\":1}".to_string()),
        ]),
        2 => HashMap::from([
            (String::new(), "empty key".to_string()),
            ("empty value".to_string(), String::new()),
        ]),
        _ => HashMap::new(),
    }
}

/// A top-level field: a type, its nullability, a name style and metadata.
pub fn field(depth: u32) -> impl Strategy<Value = (DataType, bool, u8, u8)> {
    (
        data_type(depth),
        any::<bool>(),
        prop_oneof![4 => Just(0u8), 1 => Just(1u8), 1 => Just(2u8), 1 => Just(3u8)],
        prop_oneof![6 => Just(0u8), 1 => Just(1u8), 1 => Just(2u8)],
    )
}

/// A top-level field whose type is of one family of [`family_names`].
pub fn family_field(
    name: &str,
    depth: u32,
) -> Option<impl Strategy<Value = (DataType, bool, u8, u8)>> {
    Some((
        family(name, depth)?,
        any::<bool>(),
        prop_oneof![4 => Just(0u8), 1 => Just(1u8), 1 => Just(2u8), 1 => Just(3u8)],
        prop_oneof![6 => Just(0u8), 1 => Just(1u8), 1 => Just(2u8)],
    ))
}

/// Builds the arrow-rs field a generated tuple describes.
pub fn to_field(i: usize, (ty, nullable, name, meta): &(DataType, bool, u8, u8)) -> Field {
    let nullable = *nullable || always_null(ty);
    ordered(Field::new(field_name(i, *name), ty.clone(), nullable))
        .with_metadata(field_metadata(*meta))
}

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

/// Fixed-width and variable-width leaf types, simplest first.
pub fn leaf() -> BoxedStrategy<DataType> {
    use DataType::*;
    one_of(vec![
        just(Int32),
        just(Int64),
        just(Utf8),
        just(Boolean),
        just(Null),
        just(Int8),
        just(Int16),
        just(UInt8),
        just(UInt16),
        just(UInt32),
        just(UInt64),
        just(Float16),
        just(Float32),
        just(Float64),
        (1u8..=9, -2i8..=4)
            .prop_map(|(p, s)| Decimal32(p, s.min(p as i8)))
            .boxed(),
        (1u8..=18, -2i8..=6)
            .prop_map(|(p, s)| Decimal64(p, s.min(p as i8)))
            .boxed(),
        (1u8..=38, -2i8..=10)
            .prop_map(|(p, s)| Decimal128(p, s.min(p as i8)))
            .boxed(),
        (1u8..=76, -2i8..=20)
            .prop_map(|(p, s)| Decimal256(p, s.min(p as i8)))
            .boxed(),
        just(Binary),
        just(LargeBinary),
        just(BinaryView),
        just(LargeUtf8),
        just(Utf8View),
        (1i32..=20).prop_map(FixedSizeBinary).boxed(),
        just(Date32),
        just(Date64),
        prop_oneof![Just(TimeUnit::Second), Just(TimeUnit::Millisecond)]
            .prop_map(Time32)
            .boxed(),
        prop_oneof![Just(TimeUnit::Microsecond), Just(TimeUnit::Nanosecond)]
            .prop_map(Time64)
            .boxed(),
        (time_unit(), timezone())
            .prop_map(|(u, tz)| Timestamp(u, tz))
            .boxed(),
        time_unit().prop_map(Duration).boxed(),
        prop_oneof![
            Just(IntervalUnit::YearMonth),
            Just(IntervalUnit::DayTime),
            Just(IntervalUnit::MonthDayNano),
        ]
        .prop_map(Interval)
        .boxed(),
        dictionary().boxed(),
    ])
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

/// Any type: leaves, then list, large list, list view, large list view,
/// fixed-size list, struct, map, sparse and dense unions and run-end
/// encoding, nested up to `depth` levels.
pub fn data_type(depth: u32) -> BoxedStrategy<DataType> {
    leaf()
        .prop_recursive(depth, 24, 3, |inner| {
            use DataType::*;
            let elem = (inner.clone(), any::<bool>());
            one_of(vec![
                elem.clone()
                    .prop_map(|(t, n)| List(child("item", t, n)))
                    .boxed(),
                elem.clone()
                    .prop_map(|(t, n)| LargeList(child("item", t, n)))
                    .boxed(),
                elem.clone()
                    .prop_map(|(t, n)| ListView(child("item", t, n)))
                    .boxed(),
                elem.clone()
                    .prop_map(|(t, n)| LargeListView(child("item", t, n)))
                    .boxed(),
                (elem.clone(), 1i32..=4)
                    .prop_map(|((t, n), size)| FixedSizeList(child("item", t, n), size))
                    .boxed(),
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
                (prop::collection::vec(elem.clone(), 1..=3), any::<bool>())
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
            ])
        })
        .boxed()
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

/// Builds the arrow-rs field a generated tuple describes.
pub fn to_field(i: usize, (ty, nullable, name, meta): &(DataType, bool, u8, u8)) -> Field {
    let nullable = *nullable || always_null(ty);
    ordered(Field::new(field_name(i, *name), ty.clone(), nullable))
        .with_metadata(field_metadata(*meta))
}

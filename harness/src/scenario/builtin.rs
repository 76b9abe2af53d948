//! Built-in scenarios, written with arrow-rs builders. Each one exercises a
//! layout family: nulls, offsets, views, nesting, dictionaries, unions, run
//! end encoding, temporal and decimal types, metadata, empty streams.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::builder::{
    BinaryViewBuilder, Int32Builder, ListBuilder, MapBuilder, StringBuilder,
    StringDictionaryBuilder, StringViewBuilder,
};
use arrow_array::types::{Int16Type, Int32Type};
use arrow_array::*;
use arrow_buffer::{i256, IntervalMonthDayNano, OffsetBuffer, ScalarBuffer};
use arrow_schema::{DataType, Field, Fields, Schema, UnionFields};

use super::Scenario;

type Col = (&'static str, ArrayRef, bool);

/// Dictionary columns whose dictionary is declared ordered
/// (ARROW_FLAG_DICTIONARY_ORDERED).
const ORDERED_DICTIONARIES: &[&str] = &["dict_i64"];

fn scenario(name: &str, batches: Vec<Vec<Col>>) -> Scenario {
    let fields: Vec<Field> = batches[0]
        .iter()
        .map(|(n, a, nullable)| {
            let f = Field::new(*n, a.data_type().clone(), *nullable);
            if ORDERED_DICTIONARIES.contains(n) {
                f.with_dict_is_ordered(true)
            } else {
                f
            }
        })
        .collect();
    let schema = Arc::new(Schema::new(fields));
    let batches = batches
        .into_iter()
        .map(|cols| {
            RecordBatch::try_new(
                schema.clone(),
                cols.into_iter().map(|(_, a, _)| a).collect(),
            )
            .expect("built-in scenario batch")
        })
        .collect();
    Scenario::from_batches(name, schema, batches).expect("built-in scenario encodes")
}

fn primitive(seed: i32, n: usize) -> Vec<Col> {
    let n32 = n as i32;
    vec![
        (
            "i8",
            Arc::new(Int8Array::from_iter(
                (0..n32).map(|i| (i % 7 != 3).then_some((i * seed) as i8)),
            )),
            true,
        ),
        (
            "i16",
            Arc::new(Int16Array::from_iter_values(
                (0..n32).map(|i| (i * seed - 50) as i16),
            )),
            false,
        ),
        (
            "i32",
            Arc::new(Int32Array::from_iter(
                (0..n32).map(|i| (i % 3 != 0).then_some(i * seed)),
            )),
            true,
        ),
        (
            "i64",
            Arc::new(Int64Array::from_iter_values(
                (0..n as i64).map(|i| i * i64::from(seed) - (1 << 40)),
            )),
            false,
        ),
        (
            "u8",
            Arc::new(UInt8Array::from_iter_values(
                (0..n32).map(|i| (i * 37) as u8),
            )),
            false,
        ),
        (
            "u16",
            Arc::new(UInt16Array::from_iter(
                (0..n32).map(|i| (i % 5 == 0).then_some(i as u16)),
            )),
            true,
        ),
        (
            "u32",
            Arc::new(UInt32Array::from_iter_values(
                (0..n32).map(|i| u32::MAX - i as u32),
            )),
            false,
        ),
        (
            "u64",
            Arc::new(UInt64Array::from_iter_values(
                (0..n as u64).map(|i| u64::MAX / 3 + i),
            )),
            false,
        ),
        (
            "f32",
            Arc::new(Float32Array::from_iter(
                (0..n32).map(|i| (i % 4 != 1).then_some(i as f32 / 3.0)),
            )),
            true,
        ),
        (
            "f64",
            Arc::new(Float64Array::from_iter_values(
                (0..n32).map(|i| -(i as f64) * 1e100),
            )),
            false,
        ),
        (
            "bool",
            Arc::new(BooleanArray::from_iter(
                (0..n32).map(|i| (i % 11 != 10).then_some(i % 3 == 1)),
            )),
            true,
        ),
    ]
}

fn strings(n: usize) -> Vec<Col> {
    let text = |i: usize| match i % 4 {
        0 => String::new(),
        1 => format!("s{i}"),
        2 => format!("a longer value that does not fit inline, number {i}"),
        _ => "ünïcödé ✓".to_string(),
    };
    let valid = |i: usize| i % 6 != 5;
    let mut view = StringViewBuilder::new().with_fixed_block_size(64);
    let mut bview = BinaryViewBuilder::new().with_fixed_block_size(64);
    for i in 0..n {
        if valid(i) {
            view.append_value(text(i));
            bview.append_value(text(i).as_bytes());
        } else {
            view.append_null();
            bview.append_null();
        }
    }
    vec![
        (
            "utf8",
            Arc::new(StringArray::from_iter(
                (0..n).map(|i| valid(i).then(|| text(i))),
            )),
            true,
        ),
        (
            "large_utf8",
            Arc::new(LargeStringArray::from_iter_values((0..n).map(text))),
            false,
        ),
        (
            "binary",
            Arc::new(BinaryArray::from_iter(
                (0..n).map(|i| valid(i).then(|| text(i).into_bytes())),
            )),
            true,
        ),
        (
            "large_binary",
            Arc::new(LargeBinaryArray::from_iter_values(
                (0..n).map(|i| text(i).into_bytes()),
            )),
            false,
        ),
        (
            "fixed_binary",
            Arc::new(
                FixedSizeBinaryArray::try_from_sparse_iter_with_size(
                    (0..n).map(|i| valid(i).then_some([i as u8, 1, 2])),
                    3,
                )
                .unwrap(),
            ),
            true,
        ),
        ("utf8_view", Arc::new(view.finish()), true),
        ("binary_view", Arc::new(bview.finish()), true),
    ]
}

fn nested(n: usize) -> Vec<Col> {
    let mut list = ListBuilder::new(Int32Builder::new());
    for i in 0..n {
        if i % 5 == 4 {
            list.append_null();
        } else {
            for j in 0..(i % 4) {
                list.values()
                    .append_option((j != 1).then_some((i * 10 + j) as i32));
            }
            list.append(true);
        }
    }
    let item = Arc::new(Field::new("item", DataType::Int64, true));
    let large_lengths: Vec<usize> = (0..n).map(|i| if i % 2 == 0 { 2 } else { 1 }).collect();
    let large_values = Int64Array::from_iter_values(0..large_lengths.iter().sum::<usize>() as i64);
    let large_offsets = OffsetBuffer::<i64>::from_lengths(large_lengths);
    let large = LargeListArray::new(item.clone(), large_offsets, Arc::new(large_values), None);
    let fixed = FixedSizeListArray::new(
        Arc::new(Field::new("item", DataType::Int16, true)),
        2,
        Arc::new(Int16Array::from_iter(
            (0..2 * n as i16).map(|v| (v % 3 != 0).then_some(v)),
        )),
        Some((0..n).map(|i| i % 4 != 3).collect()),
    );
    let st = StructArray::new(
        Fields::from(vec![
            Field::new("x", DataType::Int32, true),
            Field::new("y", DataType::Utf8, false),
        ]),
        vec![
            Arc::new(Int32Array::from_iter(
                (0..n as i32).map(|i| (i % 2 == 0).then_some(i)),
            )),
            Arc::new(StringArray::from_iter_values(
                (0..n).map(|i| format!("y{i}")),
            )),
        ],
        Some((0..n).map(|i| i % 7 != 6).collect()),
    );
    let mut map = MapBuilder::new(None, StringBuilder::new(), Int32Builder::new());
    for i in 0..n {
        for j in 0..(i % 3) {
            map.keys().append_value(format!("k{j}"));
            map.values().append_option((j != 0).then_some(j as i32));
        }
        map.append(i % 8 != 7).unwrap();
    }
    // Keys are written in order within each map: declared sorted
    // (ARROW_FLAG_MAP_KEYS_SORTED).
    let (entries_field, offsets, entries, nulls, _) = map.finish().into_parts();
    let map = MapArray::try_new(entries_field, offsets, entries, nulls, true).expect("sorted map");
    // List view: offsets out of order and overlapping, as the spec allows.
    let lv_values = Int32Array::from_iter_values(0..8);
    let lv_offsets: Vec<i32> = (0..n).map(|i| ((i * 3) % 6) as i32).collect();
    let lv_sizes: Vec<i32> = (0..n).map(|i| (i % 3) as i32).collect();
    let list_view = ListViewArray::new(
        Arc::new(Field::new("item", DataType::Int32, true)),
        ScalarBuffer::from(lv_offsets),
        ScalarBuffer::from(lv_sizes),
        Arc::new(lv_values),
        Some((0..n).map(|i| i % 5 != 2).collect()),
    );
    vec![
        ("list", Arc::new(list.finish()), true),
        ("large_list", Arc::new(large), false),
        ("fixed_list", Arc::new(fixed), true),
        ("struct", Arc::new(st), true),
        ("map", Arc::new(map), true),
        ("list_view", Arc::new(list_view), true),
    ]
}

fn dictionary(n: usize) -> Vec<Col> {
    let mut b = StringDictionaryBuilder::<Int16Type>::new();
    for i in 0..n {
        if i % 4 == 3 {
            b.append_null();
        } else {
            b.append_value(["red", "green", "blue"][i % 3]);
        }
    }
    let keys = Int32Array::from_iter_values((0..n as i32).map(|i| i % 2));
    let dict = DictionaryArray::<Int32Type>::new(keys, Arc::new(Int64Array::from(vec![10, 20])));
    vec![
        ("dict_utf8", Arc::new(b.finish()), true),
        ("dict_i64", Arc::new(dict), false),
    ]
}

fn unions(n: usize) -> Vec<Col> {
    let fields = UnionFields::try_new(
        vec![3, 7],
        vec![
            Field::new("i", DataType::Int32, true),
            Field::new("s", DataType::Utf8, true),
        ],
    )
    .expect("union fields");
    let type_ids: ScalarBuffer<i8> = (0..n).map(|i| if i % 3 == 0 { 7 } else { 3 }).collect();
    let sparse = UnionArray::try_new(
        fields.clone(),
        type_ids.clone(),
        None,
        vec![
            Arc::new(Int32Array::from_iter(
                (0..n as i32).map(|i| (i % 4 != 0).then_some(i)),
            )),
            Arc::new(StringArray::from_iter_values(
                (0..n).map(|i| format!("u{i}")),
            )),
        ],
    )
    .expect("sparse union");
    let n_str = (0..n).filter(|i| i % 3 == 0).count();
    let mut next = [0i32, 0];
    let offsets: ScalarBuffer<i32> = (0..n)
        .map(|i| {
            let slot = usize::from(i % 3 == 0);
            next[slot] += 1;
            next[slot] - 1
        })
        .collect();
    let dense = UnionArray::try_new(
        fields,
        type_ids,
        Some(offsets),
        vec![
            Arc::new(Int32Array::from_iter(
                (0..(n - n_str) as i32).map(|i| (i % 5 != 0).then_some(-i)),
            )),
            Arc::new(StringArray::from_iter(
                (0..n_str).map(|i| (i % 2 == 0).then(|| format!("d{i}"))),
            )),
        ],
    )
    .expect("dense union");
    vec![
        ("sparse_union", Arc::new(sparse), false),
        ("dense_union", Arc::new(dense), false),
    ]
}

fn run_end_encoded(n: usize) -> Vec<Col> {
    let runs = n.div_ceil(3).max(1);
    let ends = Int32Array::from_iter_values((1..=runs as i32).map(|r| (r * 3).min(n as i32)));
    let ends = if n == 0 {
        Int32Array::from(Vec::<i32>::new())
    } else {
        ends
    };
    let values =
        StringArray::from_iter((0..ends.len()).map(|r| (r % 3 != 1).then(|| format!("run{r}"))));
    let ree = RunArray::<Int32Type>::try_new(&ends, &values).expect("run end encoded");
    vec![("ree_utf8", Arc::new(ree), true)]
}

fn temporal_decimal(n: usize) -> Vec<Col> {
    let n64 = n as i64;
    vec![
        (
            "date32",
            Arc::new(Date32Array::from_iter(
                (0..n as i32).map(|i| (i % 3 != 2).then_some(i * 400 - 20000)),
            )),
            true,
        ),
        (
            "date64",
            Arc::new(Date64Array::from_iter_values(
                (0..n64).map(|i| i * 86_400_000),
            )),
            false,
        ),
        (
            "time32_ms",
            Arc::new(Time32MillisecondArray::from_iter_values(
                (0..n as i32).map(|i| i * 1000),
            )),
            false,
        ),
        (
            "time64_ns",
            Arc::new(Time64NanosecondArray::from_iter_values(
                (0..n64).map(|i| i * 1_000_001),
            )),
            false,
        ),
        (
            "ts_us_utc",
            Arc::new(
                TimestampMicrosecondArray::from_iter(
                    (0..n64).map(|i| (i % 4 != 0).then_some(i * 1_000_000_007)),
                )
                .with_timezone("UTC"),
            ),
            true,
        ),
        (
            "ts_s",
            Arc::new(TimestampSecondArray::from_iter_values(
                (0..n64).map(|i| -i * 3600),
            )),
            false,
        ),
        (
            "duration_ms",
            Arc::new(DurationMillisecondArray::from_iter_values(
                (0..n64).map(|i| i * 17),
            )),
            false,
        ),
        (
            "interval_mdn",
            Arc::new(IntervalMonthDayNanoArray::from_iter((0..n as i32).map(
                |i| (i % 2 == 0).then_some(IntervalMonthDayNano::new(i, -i, i64::from(i) * 999)),
            ))),
            true,
        ),
        (
            "interval_ym",
            Arc::new(IntervalYearMonthArray::from_iter_values(
                (0..n as i32).map(|i| i - 5),
            )),
            false,
        ),
        (
            "decimal128",
            Arc::new(
                Decimal128Array::from_iter(
                    (0..n as i128).map(|i| (i % 5 != 4).then_some(i * 12345 - 99999)),
                )
                .with_precision_and_scale(12, 3)
                .unwrap(),
            ),
            true,
        ),
        (
            "decimal256",
            Arc::new(
                Decimal256Array::from_iter_values(
                    (0..n as i128).map(|i| i256::from_i128(i * -7_000_000_000_000)),
                )
                .with_precision_and_scale(40, 5)
                .unwrap(),
            ),
            false,
        ),
        (
            "decimal32",
            Arc::new(
                Decimal32Array::from_iter_values((0..n as i32).map(|i| i * 3))
                    .with_precision_and_scale(7, 2)
                    .unwrap(),
            ),
            false,
        ),
        (
            "decimal64",
            Arc::new(
                Decimal64Array::from_iter((0..n as i64).map(|i| (i % 3 != 0).then_some(i * 1001)))
                    .with_precision_and_scale(15, 0)
                    .unwrap(),
            ),
            true,
        ),
        ("null", Arc::new(NullArray::new(n)), true),
    ]
}

fn with_metadata(s: Scenario) -> Scenario {
    let schema = Schema::new(
        s.schema
            .fields()
            .iter()
            .enumerate()
            .map(|(i, f)| {
                f.as_ref().clone().with_metadata(HashMap::from([
                    (format!("field.{i}"), format!("value {i}")),
                    (String::new(), String::new()),
                ]))
            })
            .collect::<Vec<_>>(),
    )
    .with_metadata(HashMap::from([
        ("arrowcert".to_string(), "built-in ✓".to_string()),
        ("empty".to_string(), String::new()),
    ]));
    let schema = Arc::new(schema);
    let batches = s
        .batches
        .iter()
        .map(|b| b.clone().with_schema(schema.clone()).expect("same fields"))
        .collect();
    Scenario::from_batches("metadata", schema, batches).expect("metadata scenario")
}

/// Every built-in scenario. Most have a batch of 37 rows (odd, not a
/// multiple of 8, so bitmaps end mid-byte), one of 1 row and one empty.
pub fn all() -> Vec<Scenario> {
    let sizes = [37usize, 1, 0];
    let mut out = vec![
        scenario(
            "primitive",
            sizes
                .iter()
                .enumerate()
                .map(|(k, &n)| primitive(k as i32 + 3, n))
                .collect(),
        ),
        scenario("binary", sizes.iter().map(|&n| strings(n)).collect()),
        scenario("nested", sizes.iter().map(|&n| nested(n)).collect()),
        scenario("dictionary", sizes.iter().map(|&n| dictionary(n)).collect()),
        scenario("union", sizes.iter().map(|&n| unions(n)).collect()),
        scenario(
            "run_end_encoded",
            sizes.iter().map(|&n| run_end_encoded(n)).collect(),
        ),
        scenario(
            "temporal_decimal",
            sizes.iter().map(|&n| temporal_decimal(n)).collect(),
        ),
    ];
    out.push(with_metadata(scenario(
        "metadata_base",
        vec![primitive(5, 9)],
    )));
    let schema = out[0].schema.clone();
    out.push(Scenario::from_batches("no_batches", schema, vec![]).expect("empty stream"));
    out
}

//! Arrow integration JSON (the `Integration.rst` test data format) written
//! from arrow-rs data: what the integration adapter hands the libraries'
//! `*FromJson` / `*CompareToJson` entry points.
//!
//! The writer is the harness's own (arrow-integration-test's
//! `ArrowJsonBatch::from_batch` writes only `Int8` columns, and its schema
//! writer has no union modes, dictionary IDs or metadata lists). The tests
//! read what it writes back with arrow-integration-test's reader and compare
//! it with the data, gold files included.
//!
//! Values are written logically: offsets are rebased to start at 0, views
//! are laid out afresh, slices are resolved, and null slots carry a
//! placeholder (0, `""`, `false`). Dictionary IDs are assigned depth first
//! over the schema, the same way for the schema and for every batch, so a
//! file with one batch carries exactly one dictionary per ID.

#![forbid(unsafe_code)]

use std::fmt::Write as _;

use arrow_array::cast::AsArray;
use arrow_array::types::*;
use arrow_array::{Array, ArrayRef, ArrowPrimitiveType, OffsetSizeTrait, RecordBatch};
use arrow_schema::{ArrowError, DataType, Field, IntervalUnit, Schema, TimeUnit, UnionMode};
use serde_json::{json, Map, Value};

/// Why a scenario cannot be written as integration JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsupported(pub String);

impl std::fmt::Display for Unsupported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Arrow integration JSON cannot express this: {}", self.0)
    }
}

impl std::error::Error for Unsupported {}

impl From<ArrowError> for Unsupported {
    fn from(e: ArrowError) -> Self {
        Unsupported(e.to_string())
    }
}

type R<T> = Result<T, Unsupported>;

/// The whole file: `{"schema": ..., "batches": [...], "dictionaries": [...]}`.
pub fn file(schema: &Schema, batches: &[RecordBatch]) -> R<Value> {
    let mut dictionaries = Vec::new();
    let mut out_batches = Vec::new();
    for (i, b) in batches.iter().enumerate() {
        let mut dicts = Vec::new();
        out_batches
            .push(batch(b, &mut dicts).map_err(|e| Unsupported(format!("batch {i}: {}", e.0)))?);
        if i == 0 {
            dictionaries = dicts;
        } else if !dicts.is_empty() {
            // One dictionary per ID in a file: the adapter writes one batch
            // per file, so this only matters to other callers.
            return Err(Unsupported(
                "dictionary-encoded columns in more than one batch of a file (write one batch per file)".into(),
            ));
        }
    }
    let mut v = json!({
        "schema": schema_json(schema),
        "batches": out_batches,
    });
    if !dictionaries.is_empty() {
        v["dictionaries"] = Value::Array(dictionaries);
    }
    Ok(v)
}

/// [`file`] as text.
pub fn to_string(schema: &Schema, batches: &[RecordBatch]) -> R<String> {
    let v = file(schema, batches)?;
    serde_json::to_string(&v).map_err(|e| Unsupported(e.to_string()))
}

// ---- schema -------------------------------------------------------------

/// `{"fields": [...], "metadata": [{"key", "value"}]}`.
pub fn schema_json(schema: &Schema) -> Value {
    let mut ids = 0i64;
    let fields: Vec<Value> = schema
        .fields()
        .iter()
        .map(|f| field_json(f, &mut ids))
        .collect();
    let mut v = json!({ "fields": fields });
    if !schema.metadata().is_empty() {
        v["metadata"] = metadata_json(schema.metadata());
    }
    v
}

fn metadata_json<'a>(m: impl IntoIterator<Item = (&'a String, &'a String)>) -> Value {
    let mut pairs: Vec<(&String, &String)> = m.into_iter().collect();
    pairs.sort();
    Value::Array(
        pairs
            .into_iter()
            .map(|(k, v)| json!({"key": k, "value": v}))
            .collect(),
    )
}

fn field_json(f: &Field, ids: &mut i64) -> Value {
    let (ty, dictionary) = match f.data_type() {
        DataType::Dictionary(key, value) => {
            let id = *ids;
            *ids += 1;
            (
                value.as_ref(),
                Some(json!({
                    "id": id,
                    "indexType": type_json(key),
                    "isOrdered": f.dict_is_ordered().unwrap_or(false),
                })),
            )
        }
        t => (t, None),
    };
    let children: Vec<Value> = child_fields(ty)
        .iter()
        .map(|c| field_json(c, ids))
        .collect();
    let mut v = json!({
        "name": f.name(),
        "nullable": f.is_nullable(),
        "type": type_json(ty),
        "children": children,
    });
    if let Some(d) = dictionary {
        v["dictionary"] = d;
    }
    if !f.metadata().is_empty() {
        v["metadata"] = metadata_json(f.metadata());
    }
    v
}

fn child_fields(t: &DataType) -> Vec<Field> {
    match t {
        DataType::Struct(fs) => fs.iter().map(|f| f.as_ref().clone()).collect(),
        DataType::List(f)
        | DataType::LargeList(f)
        | DataType::ListView(f)
        | DataType::LargeListView(f)
        | DataType::FixedSizeList(f, _)
        | DataType::Map(f, _) => vec![f.as_ref().clone()],
        DataType::Union(fs, _) => fs.iter().map(|(_, f)| f.as_ref().clone()).collect(),
        DataType::RunEndEncoded(r, v) => vec![r.as_ref().clone(), v.as_ref().clone()],
        _ => Vec::new(),
    }
}

fn unit(u: &TimeUnit) -> &'static str {
    match u {
        TimeUnit::Second => "SECOND",
        TimeUnit::Millisecond => "MILLISECOND",
        TimeUnit::Microsecond => "MICROSECOND",
        TimeUnit::Nanosecond => "NANOSECOND",
    }
}

fn int(bits: u8, signed: bool) -> Value {
    json!({"name": "int", "bitWidth": bits, "isSigned": signed})
}

fn type_json(t: &DataType) -> Value {
    match t {
        DataType::Null => json!({"name": "null"}),
        DataType::Boolean => json!({"name": "bool"}),
        DataType::Int8 => int(8, true),
        DataType::Int16 => int(16, true),
        DataType::Int32 => int(32, true),
        DataType::Int64 => int(64, true),
        DataType::UInt8 => int(8, false),
        DataType::UInt16 => int(16, false),
        DataType::UInt32 => int(32, false),
        DataType::UInt64 => int(64, false),
        DataType::Float16 => json!({"name": "floatingpoint", "precision": "HALF"}),
        DataType::Float32 => json!({"name": "floatingpoint", "precision": "SINGLE"}),
        DataType::Float64 => json!({"name": "floatingpoint", "precision": "DOUBLE"}),
        DataType::Utf8 => json!({"name": "utf8"}),
        DataType::LargeUtf8 => json!({"name": "largeutf8"}),
        DataType::Utf8View => json!({"name": "utf8view"}),
        DataType::Binary => json!({"name": "binary"}),
        DataType::LargeBinary => json!({"name": "largebinary"}),
        DataType::BinaryView => json!({"name": "binaryview"}),
        DataType::FixedSizeBinary(w) => json!({"name": "fixedsizebinary", "byteWidth": w}),
        DataType::Decimal32(p, s) => decimal(*p, *s, 32),
        DataType::Decimal64(p, s) => decimal(*p, *s, 64),
        DataType::Decimal128(p, s) => decimal(*p, *s, 128),
        DataType::Decimal256(p, s) => decimal(*p, *s, 256),
        DataType::Date32 => json!({"name": "date", "unit": "DAY"}),
        DataType::Date64 => json!({"name": "date", "unit": "MILLISECOND"}),
        DataType::Time32(u) => json!({"name": "time", "unit": unit(u), "bitWidth": 32}),
        DataType::Time64(u) => json!({"name": "time", "unit": unit(u), "bitWidth": 64}),
        DataType::Timestamp(u, tz) => {
            let mut v = json!({"name": "timestamp", "unit": unit(u)});
            if let Some(tz) = tz {
                v["timezone"] = json!(tz.as_ref());
            }
            v
        }
        DataType::Duration(u) => json!({"name": "duration", "unit": unit(u)}),
        DataType::Interval(u) => json!({"name": "interval", "unit": match u {
            IntervalUnit::YearMonth => "YEAR_MONTH",
            IntervalUnit::DayTime => "DAY_TIME",
            IntervalUnit::MonthDayNano => "MONTH_DAY_NANO",
        }}),
        DataType::Struct(_) => json!({"name": "struct"}),
        DataType::List(_) => json!({"name": "list"}),
        DataType::LargeList(_) => json!({"name": "largelist"}),
        DataType::ListView(_) => json!({"name": "listview"}),
        DataType::LargeListView(_) => json!({"name": "largelistview"}),
        DataType::FixedSizeList(_, n) => json!({"name": "fixedsizelist", "listSize": n}),
        DataType::Map(_, sorted) => json!({"name": "map", "keysSorted": sorted}),
        DataType::Union(fs, mode) => json!({
            "name": "union",
            "mode": match mode { UnionMode::Sparse => "SPARSE", UnionMode::Dense => "DENSE" },
            "typeIds": fs.iter().map(|(id, _)| id).collect::<Vec<i8>>(),
        }),
        DataType::RunEndEncoded(_, _) => json!({"name": "runendencoded"}),
        // Handled by field_json (the value type goes in "type").
        DataType::Dictionary(_, v) => type_json(v),
    }
}

fn decimal(p: u8, s: i8, bits: u16) -> Value {
    json!({"name": "decimal", "precision": p, "scale": s, "bitWidth": bits})
}

// ---- data ---------------------------------------------------------------

/// `{"count": n, "columns": [...]}`; dictionaries found go to `dicts`.
fn batch(b: &RecordBatch, dicts: &mut Vec<Value>) -> R<Value> {
    let mut ids = 0i64;
    let schema = b.schema();
    let columns = schema
        .fields()
        .iter()
        .zip(b.columns())
        .map(|(f, a)| column(f, a, &mut ids, dicts))
        .collect::<R<Vec<_>>>()?;
    Ok(json!({"count": b.num_rows(), "columns": columns}))
}

fn validity(a: &dyn Array) -> Value {
    Value::Array(
        (0..a.len())
            .map(|i| json!(u8::from(a.is_valid(i))))
            .collect(),
    )
}

fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02X}");
    }
    s
}

fn prim<T: ArrowPrimitiveType>(
    a: &dyn Array,
    f: impl Fn(T::Native) -> R<Value>,
    null: Value,
) -> R<Value> {
    let p = a.as_primitive::<T>();
    (0..p.len())
        .map(|i| {
            if p.is_valid(i) {
                f(p.value(i))
            } else {
                Ok(null.clone())
            }
        })
        .collect::<R<Vec<_>>>()
        .map(Value::Array)
}

fn num<T: Into<serde_json::Number>>(v: T) -> R<Value> {
    Ok(Value::Number(v.into()))
}

fn text<T: ToString>(v: T) -> R<Value> {
    Ok(Value::String(v.to_string()))
}

fn float(name: &str) -> impl Fn(f64) -> R<Value> + '_ {
    move |v: f64| {
        serde_json::Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| {
                Unsupported(format!(
                    "column {name:?} holds {v}, which JSON numbers cannot carry"
                ))
            })
    }
}

/// One column: `{"name", "count", "VALIDITY", "DATA", "OFFSET", ...}`.
fn column(f: &Field, a: &ArrayRef, ids: &mut i64, dicts: &mut Vec<Value>) -> R<Value> {
    let mut c = Map::new();
    c.insert("name".into(), json!(f.name()));
    c.insert("count".into(), json!(a.len()));
    let mut put = |k: &str, v: Value| {
        c.insert(k.into(), v);
    };
    match primitive(a, f.name())? {
        Some(values) => data(&mut put, a, values),
        None => match a.data_type() {
            DataType::Null => {}
            DataType::Boolean => boolean_col(&mut put, a)?,
            DataType::Utf8 => bytes_col::<i32>(&mut put, a, true),
            DataType::LargeUtf8 => bytes_col::<i64>(&mut put, a, true),
            DataType::Binary => bytes_col::<i32>(&mut put, a, false),
            DataType::LargeBinary => bytes_col::<i64>(&mut put, a, false),
            DataType::FixedSizeBinary(w) => fixed_binary_col(&mut put, a, w)?,
            DataType::Utf8View | DataType::BinaryView => view_col(&mut put, a)?,
            DataType::Struct(fields) => {
                let s = a.as_struct();
                put("VALIDITY", validity(a));
                let children = fields
                    .iter()
                    .zip(s.columns())
                    .map(|(f, c)| column(f, c, ids, dicts))
                    .collect::<R<Vec<_>>>()?;
                put("children", Value::Array(children));
            }
            DataType::List(child) | DataType::Map(child, _) => {
                let (offsets, values) = match a.data_type() {
                    DataType::List(_) => {
                        let l = a.as_list::<i32>();
                        (l.value_offsets().to_vec(), l.values().clone())
                    }
                    _ => {
                        let m = a.as_map();
                        (
                            m.value_offsets().to_vec(),
                            std::sync::Arc::new(m.entries().clone()) as ArrayRef,
                        )
                    }
                };
                list_like(
                    &mut put,
                    a,
                    child,
                    offsets.iter().map(|&o| o as i64).collect(),
                    values,
                    false,
                    ids,
                    dicts,
                )?;
            }
            DataType::LargeList(child) => {
                let l = a.as_list::<i64>();
                list_like(
                    &mut put,
                    a,
                    child,
                    l.value_offsets().to_vec(),
                    l.values().clone(),
                    true,
                    ids,
                    dicts,
                )?;
            }
            DataType::ListView(child) | DataType::LargeListView(child) => {
                list_view_col(&mut put, a, child, ids, dicts)?
            }
            DataType::FixedSizeList(child, _) => {
                let l = a.as_fixed_size_list();
                put("VALIDITY", validity(a));
                put("children", json!([column(child, l.values(), ids, dicts)?]));
            }
            DataType::Union(fields, mode) => union_col(&mut put, a, fields, mode, ids, dicts)?,
            DataType::RunEndEncoded(run_ends, values) => {
                run_end_col(&mut put, a, run_ends, values, ids, dicts)?
            }
            DataType::Dictionary(_, value_type) => {
                dictionary_col(&mut put, f, a, value_type, ids, dicts)?
            }
            // The primitive types: done above.
            _ => {}
        },
    }
    Ok(Value::Object(c))
}

/// The DATA of a column of a primitive (fixed-width, non-nested) type,
/// or `None` for every other type.
fn primitive(a: &ArrayRef, name: &str) -> R<Option<Value>> {
    Ok(Some(match a.data_type() {
        DataType::Int8 => prim::<Int8Type>(a, num, json!(0))?,
        DataType::Int16 => prim::<Int16Type>(a, num, json!(0))?,
        DataType::Int32 => prim::<Int32Type>(a, num, json!(0))?,
        DataType::Int64 => prim::<Int64Type>(a, text, json!("0"))?,
        DataType::UInt8 => prim::<UInt8Type>(a, num, json!(0))?,
        DataType::UInt16 => prim::<UInt16Type>(a, num, json!(0))?,
        DataType::UInt32 => prim::<UInt32Type>(a, num, json!(0))?,
        DataType::UInt64 => prim::<UInt64Type>(a, text, json!("0"))?,
        DataType::Float16 => {
            let f = float(name);
            prim::<Float16Type>(a, |v| f(v.to_f64()), json!(0.0))?
        }
        DataType::Float32 => {
            let f = float(name);
            prim::<Float32Type>(a, |v| f(f64::from(v)), json!(0.0))?
        }
        DataType::Float64 => prim::<Float64Type>(a, float(name), json!(0.0))?,
        DataType::Decimal32(_, _) => prim::<Decimal32Type>(a, text, json!("0"))?,
        DataType::Decimal64(_, _) => prim::<Decimal64Type>(a, text, json!("0"))?,
        DataType::Decimal128(_, _) => prim::<Decimal128Type>(a, text, json!("0"))?,
        DataType::Decimal256(_, _) => prim::<Decimal256Type>(a, text, json!("0"))?,
        DataType::Date32 => prim::<Date32Type>(a, num, json!(0))?,
        DataType::Date64 => prim::<Date64Type>(a, text, json!("0"))?,
        DataType::Time32(TimeUnit::Second) => prim::<Time32SecondType>(a, num, json!(0))?,
        DataType::Time32(_) => prim::<Time32MillisecondType>(a, num, json!(0))?,
        DataType::Time64(TimeUnit::Microsecond) => {
            prim::<Time64MicrosecondType>(a, text, json!("0"))?
        }
        DataType::Time64(_) => prim::<Time64NanosecondType>(a, text, json!("0"))?,
        DataType::Timestamp(TimeUnit::Second, _) => {
            prim::<TimestampSecondType>(a, text, json!("0"))?
        }
        DataType::Timestamp(TimeUnit::Millisecond, _) => {
            prim::<TimestampMillisecondType>(a, text, json!("0"))?
        }
        DataType::Timestamp(TimeUnit::Microsecond, _) => {
            prim::<TimestampMicrosecondType>(a, text, json!("0"))?
        }
        DataType::Timestamp(TimeUnit::Nanosecond, _) => {
            prim::<TimestampNanosecondType>(a, text, json!("0"))?
        }
        DataType::Duration(TimeUnit::Second) => prim::<DurationSecondType>(a, text, json!("0"))?,
        DataType::Duration(TimeUnit::Millisecond) => {
            prim::<DurationMillisecondType>(a, text, json!("0"))?
        }
        DataType::Duration(TimeUnit::Microsecond) => {
            prim::<DurationMicrosecondType>(a, text, json!("0"))?
        }
        DataType::Duration(TimeUnit::Nanosecond) => {
            prim::<DurationNanosecondType>(a, text, json!("0"))?
        }
        DataType::Interval(IntervalUnit::YearMonth) => {
            prim::<IntervalYearMonthType>(a, num, json!(0))?
        }
        DataType::Interval(IntervalUnit::DayTime) => prim::<IntervalDayTimeType>(
            a,
            |v| Ok(json!({"days": v.days, "milliseconds": v.milliseconds})),
            json!({"days": 0, "milliseconds": 0}),
        )?,
        DataType::Interval(IntervalUnit::MonthDayNano) => prim::<IntervalMonthDayNanoType>(
            a,
            |v| Ok(json!({"months": v.months, "days": v.days, "nanoseconds": v.nanoseconds})),
            json!({"months": 0, "days": 0, "nanoseconds": 0}),
        )?,
        _ => return Ok(None),
    }))
}

/// A boolean column's validity and values.
fn boolean_col(put: &mut impl FnMut(&str, Value), a: &ArrayRef) -> R<()> {
    let b = a.as_boolean();
    put("VALIDITY", validity(a));
    put(
        "DATA",
        Value::Array(
            (0..b.len())
                .map(|i| json!(b.is_valid(i) && b.value(i)))
                .collect(),
        ),
    );
    Ok(())
}

/// A fixed-size binary column of width `w`: null slots as `w` zero bytes.
fn fixed_binary_col(put: &mut impl FnMut(&str, Value), a: &ArrayRef, w: &i32) -> R<()> {
    let b = a.as_fixed_size_binary();
    put("VALIDITY", validity(a));
    let zero = hex(&vec![0u8; (*w).max(0) as usize]);
    put(
        "DATA",
        Value::Array(
            (0..b.len())
                .map(|i| {
                    json!(if b.is_valid(i) {
                        hex(b.value(i))
                    } else {
                        zero.clone()
                    })
                })
                .collect(),
        ),
    );
    Ok(())
}

/// A string or binary view column, its variadic buffer laid out afresh.
fn view_col(put: &mut impl FnMut(&str, Value), a: &ArrayRef) -> R<()> {
    let utf8 = matches!(a.data_type(), DataType::Utf8View);
    let values: Vec<Option<&[u8]>> = if utf8 {
        let v = a.as_string_view();
        (0..v.len())
            .map(|i| v.is_valid(i).then(|| v.value(i).as_bytes()))
            .collect()
    } else {
        let v = a.as_binary_view();
        (0..v.len())
            .map(|i| v.is_valid(i).then(|| v.value(i)))
            .collect()
    };
    put("VALIDITY", validity(a));
    // Laid out afresh: every value longer than 12 bytes in one
    // variadic buffer, in order.
    let mut buffer = Vec::new();
    let mut views = Vec::with_capacity(values.len());
    for v in values {
        let v = v.unwrap_or(&[]);
        if v.len() <= 12 {
            let inlined = if utf8 {
                json!(std::str::from_utf8(v).unwrap_or_default())
            } else {
                json!(hex(v))
            };
            views.push(json!({"SIZE": v.len(), "INLINED": inlined}));
        } else {
            views.push(json!({
                "SIZE": v.len(),
                "PREFIX_HEX": hex(&v[..4]),
                "BUFFER_INDEX": 0,
                "OFFSET": buffer.len(),
            }));
            buffer.extend_from_slice(v);
        }
    }
    put("VIEWS", Value::Array(views));
    put(
        "VARIADIC_DATA_BUFFERS",
        if buffer.is_empty() {
            json!([])
        } else {
            json!([hex(&buffer)])
        },
    );
    Ok(())
}

/// A list view or large list view column: offsets and sizes, null slots 0.
fn list_view_col(
    put: &mut impl FnMut(&str, Value),
    a: &ArrayRef,
    child: &Field,
    ids: &mut i64,
    dicts: &mut Vec<Value>,
) -> R<()> {
    let large = matches!(a.data_type(), DataType::LargeListView(_));
    let (offsets, sizes, values): (Vec<i64>, Vec<i64>, ArrayRef) = if large {
        let l = a.as_list_view::<i64>();
        (
            l.value_offsets().to_vec(),
            l.value_sizes().to_vec(),
            l.values().clone(),
        )
    } else {
        let l = a.as_list_view::<i32>();
        (
            l.value_offsets().iter().map(|&o| o as i64).collect(),
            l.value_sizes().iter().map(|&o| o as i64).collect(),
            l.values().clone(),
        )
    };
    put("VALIDITY", validity(a));
    let n = |v: i64| {
        if large {
            json!(v.to_string())
        } else {
            json!(v)
        }
    };
    let valid = |i: usize| a.is_valid(i);
    put(
        "OFFSET",
        Value::Array(
            (0..a.len())
                .map(|i| n(if valid(i) { offsets[i] } else { 0 }))
                .collect(),
        ),
    );
    put(
        "SIZE",
        Value::Array(
            (0..a.len())
                .map(|i| n(if valid(i) { sizes[i] } else { 0 }))
                .collect(),
        ),
    );
    put("children", json!([column(child, &values, ids, dicts)?]));
    Ok(())
}

/// A sparse or dense union column: type ids, offsets when dense, children.
fn union_col(
    put: &mut impl FnMut(&str, Value),
    a: &ArrayRef,
    fields: &arrow_schema::UnionFields,
    mode: &UnionMode,
    ids: &mut i64,
    dicts: &mut Vec<Value>,
) -> R<()> {
    let u = a.as_union();
    put(
        "TYPE_ID",
        Value::Array(u.type_ids().iter().map(|t| json!(t)).collect()),
    );
    if *mode == UnionMode::Dense {
        let offsets = u.offsets().map(|o| o.to_vec()).unwrap_or_default();
        put(
            "OFFSET",
            Value::Array(offsets.iter().map(|o| json!(o)).collect()),
        );
    }
    let children = fields
        .iter()
        .map(|(id, f)| column(f, u.child(id), ids, dicts))
        .collect::<R<Vec<_>>>()?;
    put("children", Value::Array(children));
    Ok(())
}

/// A run-end encoded column: the run ends and the values as children.
fn run_end_col(
    put: &mut impl FnMut(&str, Value),
    a: &ArrayRef,
    run_ends: &Field,
    values: &Field,
    ids: &mut i64,
    dicts: &mut Vec<Value>,
) -> R<()> {
    let (ends, vals) = match run_ends.data_type() {
        DataType::Int16 => run_end::<Int16Type>(a),
        DataType::Int32 => run_end::<Int32Type>(a),
        _ => run_end::<Int64Type>(a),
    };
    let ends_col = match run_ends.data_type() {
        DataType::Int16 => ends.iter().map(|&e| json!(e)).collect(),
        DataType::Int32 => ends.iter().map(|&e| json!(e)).collect(),
        _ => ends.iter().map(|&e| json!(e.to_string())).collect(),
    };
    let ends_json = json!({
        "name": run_ends.name(),
        "count": ends.len(),
        "VALIDITY": vec![1; ends.len()],
        "DATA": Value::Array(ends_col),
    });
    put(
        "children",
        json!([ends_json, column(values, &vals, ids, dicts)?]),
    );
    Ok(())
}

/// A dictionary column: its keys as data, its values as a new dictionary
/// batch in `dicts` under the next id.
fn dictionary_col(
    put: &mut impl FnMut(&str, Value),
    f: &Field,
    a: &ArrayRef,
    value_type: &DataType,
    ids: &mut i64,
    dicts: &mut Vec<Value>,
) -> R<()> {
    let id = *ids;
    *ids += 1;
    let d = a.as_any_dictionary();
    let keys = d.keys();
    put("VALIDITY", validity(a));
    let key_data = match keys.data_type() {
        DataType::Int8 => prim::<Int8Type>(keys, num, json!(0))?,
        DataType::Int16 => prim::<Int16Type>(keys, num, json!(0))?,
        DataType::Int32 => prim::<Int32Type>(keys, num, json!(0))?,
        DataType::Int64 => prim::<Int64Type>(keys, text, json!("0"))?,
        DataType::UInt8 => prim::<UInt8Type>(keys, num, json!(0))?,
        DataType::UInt16 => prim::<UInt16Type>(keys, num, json!(0))?,
        DataType::UInt32 => prim::<UInt32Type>(keys, num, json!(0))?,
        DataType::UInt64 => prim::<UInt64Type>(keys, text, json!("0"))?,
        t => return Err(Unsupported(format!("dictionary keys of type {t}"))),
    };
    put("DATA", key_data);
    let values = d.values();
    let vf = Field::new(f.name(), value_type.clone(), true);
    let col = column(&vf, values, ids, dicts)?;
    dicts.push(json!({
        "id": id,
        "data": {"count": values.len(), "columns": [col]},
    }));
    Ok(())
}

fn data(put: &mut impl FnMut(&str, Value), a: &dyn Array, values: Value) {
    put("VALIDITY", validity(a));
    put("DATA", values);
}

fn bytes_col<O: OffsetSizeTrait>(put: &mut impl FnMut(&str, Value), a: &dyn Array, utf8: bool) {
    let values: Vec<Option<&[u8]>> = if utf8 {
        let s = a.as_string::<O>();
        (0..s.len())
            .map(|i| s.is_valid(i).then(|| s.value(i).as_bytes()))
            .collect()
    } else {
        let b = a.as_binary::<O>();
        (0..b.len())
            .map(|i| b.is_valid(i).then(|| b.value(i)))
            .collect()
    };
    let large = O::IS_LARGE;
    let mut offsets = vec![0i64];
    let mut data = Vec::with_capacity(values.len());
    for v in &values {
        let v = v.unwrap_or(&[]);
        offsets.push(offsets.last().copied().unwrap_or(0) + v.len() as i64);
        data.push(if utf8 {
            json!(std::str::from_utf8(v).unwrap_or_default())
        } else {
            json!(hex(v))
        });
    }
    put("VALIDITY", validity(a));
    put(
        "OFFSET",
        Value::Array(
            offsets
                .into_iter()
                .map(|o| {
                    if large {
                        json!(o.to_string())
                    } else {
                        json!(o)
                    }
                })
                .collect(),
        ),
    );
    put("DATA", Value::Array(data));
}

#[allow(clippy::too_many_arguments)]
fn list_like(
    put: &mut impl FnMut(&str, Value),
    a: &dyn Array,
    child: &Field,
    offsets: Vec<i64>,
    values: ArrayRef,
    large: bool,
    ids: &mut i64,
    dicts: &mut Vec<Value>,
) -> R<()> {
    let first = offsets.first().copied().unwrap_or(0);
    let last = offsets.last().copied().unwrap_or(0);
    let values = values.slice(first as usize, (last - first) as usize);
    put("VALIDITY", validity(a));
    put(
        "OFFSET",
        Value::Array(
            offsets
                .iter()
                .map(|o| {
                    if large {
                        json!((o - first).to_string())
                    } else {
                        json!(o - first)
                    }
                })
                .collect(),
        ),
    );
    put("children", json!([column(child, &values, ids, dicts)?]));
    Ok(())
}

/// The run ends and values of `a`'s logical window, rebased to start at 0.
fn run_end<T: RunEndIndexType>(a: &dyn Array) -> (Vec<i64>, ArrayRef)
where
    T::Native: Into<i64>,
{
    let r = a.as_run::<T>();
    let ends = r.run_ends();
    let (start, end) = if r.is_empty() {
        (0, 0)
    } else {
        (r.get_start_physical_index(), r.get_end_physical_index() + 1)
    };
    let off = ends.offset() as i64;
    let len = ends.len() as i64;
    let rebased = ends.values()[start..end]
        .iter()
        .map(|&e| (e.into() - off).min(len))
        .collect();
    (rebased, r.values().slice(start, end - start))
}

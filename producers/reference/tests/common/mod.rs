//! Fixtures shared by the integration tests: a small IPC stream with a few
//! types, nulls, strings and lists, and helpers to import what the producer
//! exported.

#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::builder::{ListBuilder, PrimitiveBuilder, StringDictionaryBuilder};
use arrow_array::types::{Int64Type, Int8Type};
use arrow_array::{ArrayRef, BooleanArray, Float64Array, Int32Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use arrowcert_sdk::abi::{device, ArrowArray, ArrowSchema, Plain};
use arrowcert_sdk::ipc;

use arrowcert_producer_reference as plugin;

/// A schema with schema-level metadata and six columns.
pub fn schema() -> SchemaRef {
    let item = Field::new("item", DataType::Int64, true);
    Arc::new(
        Schema::new(vec![
            Field::new("int", DataType::Int32, true),
            Field::new("float", DataType::Float64, false),
            Field::new("text", DataType::Utf8, true),
            Field::new("list", DataType::List(Arc::new(item)), true),
            Field::new("flag", DataType::Boolean, true),
            Field::new(
                "dict",
                DataType::Dictionary(Box::new(DataType::Int8), Box::new(DataType::Utf8)),
                true,
            ),
        ])
        .with_metadata(HashMap::from([(
            "origin".to_string(),
            "reference tests".to_string(),
        )])),
    )
}

/// One batch of `rows` rows starting at value `base`, with nulls at every
/// third row of the nullable columns.
pub fn batch(base: i32, rows: usize) -> RecordBatch {
    let null_at = |i: usize| i % 3 == 1;
    let ints: Int32Array = (0..rows)
        .map(|i| (!null_at(i)).then_some(base + i as i32))
        .collect();
    let floats: Float64Array = (0..rows)
        .map(|i| f64::from(base) + i as f64 / 4.0)
        .collect();
    let texts: StringArray = (0..rows)
        .map(|i| (!null_at(i)).then(|| format!("row {}", base + i as i32)))
        .collect();
    let mut lists = ListBuilder::new(PrimitiveBuilder::<Int64Type>::new());
    for i in 0..rows {
        if null_at(i) {
            lists.append_null();
        } else {
            for j in 0..(i % 4) {
                if j == 2 {
                    lists.values().append_null();
                } else {
                    lists
                        .values()
                        .append_value(i64::from(base) * 100 + j as i64);
                }
            }
            lists.append(true);
        }
    }
    let flags: BooleanArray = (0..rows)
        .map(|i| (!null_at(i)).then_some(i % 2 == 0))
        .collect();
    let mut dict = StringDictionaryBuilder::<Int8Type>::new();
    for i in 0..rows {
        if null_at(i) {
            dict.append_null();
        } else {
            dict.append_value(["red", "green", "blue"][i % 3]);
        }
    }
    let columns: Vec<ArrayRef> = vec![
        Arc::new(ints),
        Arc::new(floats),
        Arc::new(texts),
        Arc::new(lists.finish()),
        Arc::new(flags),
        Arc::new(dict.finish()),
    ];
    RecordBatch::try_new(schema(), columns).expect("fixture batch")
}

/// Three batches: 7 rows, 5 rows, 0 rows.
pub fn batches() -> Vec<RecordBatch> {
    vec![batch(0, 7), batch(100, 5), batch(200, 0)]
}

/// The fixture as IPC stream bytes.
pub fn ipc_bytes() -> Vec<u8> {
    ipc::encode(&schema(), &batches()).expect("encode fixture")
}

/// IPC bytes of a stream with a schema and no batch.
pub fn empty_ipc_bytes() -> Vec<u8> {
    ipc::encode(&schema(), &[]).expect("encode empty fixture")
}

/// The fixture as the producer sees it after decoding.
pub fn decoded() -> ipc::Decoded {
    ipc::decode(&ipc_bytes()).expect("decode fixture")
}

/// Exports the schema through the plugin.
pub fn produce_schema(ipc: &[u8]) -> ArrowSchema {
    let mut out = ArrowSchema::poisoned();
    // SAFETY: `ipc` is a live slice; `out` is a local valid for writes.
    let rc = unsafe { plugin::arrowcert_produce_schema(ipc.as_ptr(), ipc.len() as i64, &mut out) };
    assert_eq!(rc, 0, "produce_schema: {:?}", last_error());
    out
}

/// Imports a struct array with a schema produced by the plugin.
///
/// # Safety
/// `array` must be a live struct array of the fixture's schema.
pub unsafe fn import(array: ArrowArray) -> RecordBatch {
    let schema = produce_schema(&ipc_bytes());
    // SAFETY: forwarded from the caller; the schema is live and matches.
    unsafe { arrowcert_sdk::abi::arrow_rs::import_batch(schema, array) }.expect("import batch")
}

/// This thread's last error of the plugin.
pub fn last_error() -> Option<String> {
    let p = plugin::arrowcert_last_error();
    (!p.is_null()).then(|| {
        // SAFETY: the plugin returns NULL or a NUL-terminated string valid
        // until the next call on this thread.
        unsafe { std::ffi::CStr::from_ptr(p) }
            .to_string_lossy()
            .into_owned()
    })
}

pub const CPU: i32 = device::CPU;

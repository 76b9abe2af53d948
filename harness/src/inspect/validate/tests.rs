//! The validator's tests: every rule it reports, on hand-built trees.

use std::ffi::c_void;
use std::sync::Arc;

use arrow_array::builder::{Int32Builder, MapBuilder, StringBuilder};
use arrow_array::ffi::{FFI_ArrowArray, FFI_ArrowSchema};
use arrow_array::types::{Int32Type, Int64Type};
use arrow_array::*;
use arrow_buffer::{i256, Buffer, IntervalDayTime, IntervalMonthDayNano, NullBuffer};
use arrow_data::ArrayData;
use arrow_schema::{DataType, Field, Fields, Schema, UnionFields};

use super::*;
use crate::abi::arrow_rs::{
    array_from_arrow_rs, export_batch, export_batch_slice, export_schema, schema_from_arrow_rs,
};
use crate::abi::ops::Guard;
use crate::abi::Plain;

const POISON: usize = usize::from_ne_bytes([crate::abi::POISON_BYTE; std::mem::size_of::<usize>()]);

// -- helpers -------------------------------------------------------------

fn schema_of(s: &Guard<ArrowSchema>) -> Vec<Violation> {
    // SAFETY: a live schema owned by the guard.
    unsafe { validate_schema(&**s) }
}

fn array_of(s: &Guard<ArrowSchema>, a: &Guard<ArrowArray>) -> Vec<Violation> {
    // SAFETY: live structures owned by the guards.
    unsafe { validate_array(&**s, &**a) }
}

#[track_caller]
fn assert_clean(v: &[Violation], what: &str) {
    assert!(
        v.is_empty(),
        "{what}: expected no violations, got:\n{}",
        v.iter()
            .map(|v| v.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// `rule` is reported, and nothing but `rule` and `also`.
#[track_caller]
fn assert_rule(v: &[Violation], rule: &str, also: &[&str]) {
    let dump = || {
        v.iter()
            .map(|v| v.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert!(
        v.iter().any(|x| x.rule == rule),
        "expected {rule}, got:\n{}",
        dump()
    );
    for x in v {
        assert!(
            x.rule == rule || also.contains(&x.rule),
            "unexpected {x}\nall:\n{}",
            dump()
        );
    }
}

fn export(batch: &RecordBatch) -> (Guard<ArrowSchema>, Guard<ArrowArray>) {
    (
        Guard::new(export_schema(&batch.schema()).unwrap()),
        Guard::new(export_batch(batch)),
    )
}

/// Exports one `ArrayData` (possibly invalid: built unchecked) as field "a".
fn export_data(data: &ArrayData, nullable: bool) -> (Guard<ArrowSchema>, Guard<ArrowArray>) {
    let field = Field::new("a", data.data_type().clone(), nullable);
    (
        Guard::new(schema_from_arrow_rs(
            FFI_ArrowSchema::try_from(&field).unwrap(),
        )),
        Guard::new(array_from_arrow_rs(FFI_ArrowArray::new(data))),
    )
}

/// # Safety: `a` has at least i + 1 usable children.
unsafe fn child(a: &mut ArrowArray, i: usize) -> &mut ArrowArray {
    // SAFETY: forwarded from the caller.
    unsafe { &mut **a.children.add(i) }
}

/// # Safety: `s` has at least i + 1 usable children.
unsafe fn schild(s: &mut ArrowSchema, i: usize) -> &mut ArrowSchema {
    // SAFETY: forwarded from the caller.
    unsafe { &mut **s.children.add(i) }
}

fn cstr(s: &str) -> *const c_char {
    std::ffi::CString::new(s).unwrap().into_raw()
}

fn leak_bytes(b: &[u8]) -> *const c_char {
    Box::leak(b.to_vec().into_boxed_slice()).as_ptr().cast()
}

fn leak_buf<T: Copy + 'static>(v: Vec<T>) -> *const c_void {
    if v.is_empty() {
        return std::ptr::null();
    }
    Box::leak(v.into_boxed_slice()).as_ptr().cast()
}

extern "C" fn release_schema(s: *mut ArrowSchema) {
    // SAFETY: called on a live test schema.
    unsafe { (*s).release = None }
}

extern "C" fn release_array(a: *mut ArrowArray) {
    // SAFETY: called on a live test array.
    unsafe { (*a).release = None }
}

/// A hand-built, leaked schema node (tests only; release just marks).
fn sch(format: &str, flags: i64, children: Vec<*mut ArrowSchema>) -> *mut ArrowSchema {
    let mut s = ArrowSchema::zeroed();
    s.format = cstr(format);
    s.flags = flags;
    s.n_children = children.len() as i64;
    s.children = if children.is_empty() {
        std::ptr::null_mut()
    } else {
        Box::leak(children.into_boxed_slice()).as_mut_ptr()
    };
    s.release = Some(release_schema);
    Box::into_raw(Box::new(s))
}

/// A hand-built, leaked array node.
fn arr(
    length: i64,
    null_count: i64,
    offset: i64,
    buffers: Vec<*const c_void>,
    children: Vec<*mut ArrowArray>,
) -> *mut ArrowArray {
    let mut a = ArrowArray::zeroed();
    a.length = length;
    a.null_count = null_count;
    a.offset = offset;
    a.n_buffers = buffers.len() as i64;
    a.buffers = if buffers.is_empty() {
        std::ptr::null_mut()
    } else {
        Box::leak(buffers.into_boxed_slice()).as_mut_ptr()
    };
    a.n_children = children.len() as i64;
    a.children = if children.is_empty() {
        std::ptr::null_mut()
    } else {
        Box::leak(children.into_boxed_slice()).as_mut_ptr()
    };
    a.release = Some(release_array);
    Box::into_raw(Box::new(a))
}

fn check_schema_raw(s: *mut ArrowSchema) -> Vec<Violation> {
    // SAFETY: a leaked, live test schema.
    unsafe { validate_schema(s) }
}

fn check_array_raw(s: *mut ArrowSchema, a: *mut ArrowArray) -> Vec<Violation> {
    // SAFETY: leaked, live test structures whose buffers hold what they claim.
    let sv = unsafe { validate_schema(s) };
    assert_clean(&sv, "hand-built schema");
    // SAFETY: as above.
    unsafe { validate_array(s, a) }
}

fn int32_array(values: &[i32]) -> *mut ArrowArray {
    arr(
        values.len() as i64,
        0,
        0,
        vec![std::ptr::null(), leak_buf(values.to_vec())],
        vec![],
    )
}

// -- valid data ----------------------------------------------------------

/// A batch of `n` rows covering every type arrow-rs exports.
fn all_types(n: usize) -> RecordBatch {
    let ni = n as i32;
    let opt = |i: usize| i % 3 != 1;
    let ints: Int32Array = (0..ni).map(|i| opt(i as usize).then_some(i)).collect();
    let mut cols: Vec<(String, ArrayRef, bool)> = Vec::new();
    let mut add = |name: &str, a: ArrayRef| {
        let nullable = a.logical_null_count() > 0 || matches!(a.data_type(), DataType::Null);
        cols.push((name.to_string(), a, nullable));
    };
    add("null", Arc::new(NullArray::new(n)));
    add(
        "bool",
        Arc::new(
            (0..n)
                .map(|i| opt(i).then_some(i % 2 == 0))
                .collect::<BooleanArray>(),
        ),
    );
    add(
        "i8",
        Arc::new((0..n).map(|i| Some(i as i8)).collect::<Int8Array>()),
    );
    add(
        "u8",
        Arc::new(
            (0..n)
                .map(|i| opt(i).then_some(i as u8))
                .collect::<UInt8Array>(),
        ),
    );
    add(
        "i16",
        Arc::new((0..n).map(|i| Some(i as i16)).collect::<Int16Array>()),
    );
    add(
        "u16",
        Arc::new((0..n).map(|i| Some(i as u16)).collect::<UInt16Array>()),
    );
    add("i32", Arc::new(ints.clone()));
    add(
        "u32",
        Arc::new((0..n).map(|i| Some(i as u32)).collect::<UInt32Array>()),
    );
    add(
        "i64",
        Arc::new(
            (0..n)
                .map(|i| opt(i).then_some(i as i64))
                .collect::<Int64Array>(),
        ),
    );
    add(
        "u64",
        Arc::new((0..n).map(|i| Some(i as u64)).collect::<UInt64Array>()),
    );
    let f16 = ArrayData::builder(DataType::Float16)
        .len(n)
        .add_buffer(Buffer::from_vec(vec![0x3c00u16; n]))
        .build()
        .unwrap();
    add("f16", make_array(f16));
    add(
        "f32",
        Arc::new(
            (0..n)
                .map(|i| opt(i).then_some(i as f32))
                .collect::<Float32Array>(),
        ),
    );
    add(
        "f64",
        Arc::new((0..n).map(|i| Some(i as f64)).collect::<Float64Array>()),
    );
    let strs: Vec<Option<String>> = (0..n).map(|i| opt(i).then(|| "x".repeat(i % 20))).collect();
    add(
        "utf8",
        Arc::new(strs.iter().map(|s| s.as_deref()).collect::<StringArray>()),
    );
    add(
        "large_utf8",
        Arc::new(
            strs.iter()
                .map(|s| s.as_deref())
                .collect::<LargeStringArray>(),
        ),
    );
    add(
        "binary",
        Arc::new(
            strs.iter()
                .map(|s| s.as_deref().map(str::as_bytes))
                .collect::<BinaryArray>(),
        ),
    );
    add(
        "large_binary",
        Arc::new(
            strs.iter()
                .map(|s| s.as_deref().map(str::as_bytes))
                .collect::<LargeBinaryArray>(),
        ),
    );
    add(
        "utf8_view",
        Arc::new(
            strs.iter()
                .map(|s| s.as_deref())
                .collect::<StringViewArray>(),
        ),
    );
    add(
        "binary_view",
        Arc::new(
            strs.iter()
                .map(|s| s.as_deref().map(str::as_bytes))
                .collect::<BinaryViewArray>(),
        ),
    );
    add(
        "fixed_binary",
        Arc::new(
            FixedSizeBinaryArray::try_from_sparse_iter_with_size(
                (0..n).map(|i| opt(i).then_some([i as u8; 3])),
                3,
            )
            .unwrap(),
        ),
    );
    add(
        "dec32",
        Arc::new(
            Decimal32Array::from_iter((0..n).map(|i| opt(i).then_some(i as i32)))
                .with_precision_and_scale(9, 2)
                .unwrap(),
        ),
    );
    add(
        "dec64",
        Arc::new(
            Decimal64Array::from_iter((0..n).map(|i| Some(i as i64)))
                .with_precision_and_scale(18, -2)
                .unwrap(),
        ),
    );
    add(
        "dec128",
        Arc::new(
            Decimal128Array::from_iter((0..n).map(|i| opt(i).then_some(i as i128)))
                .with_precision_and_scale(38, 10)
                .unwrap(),
        ),
    );
    add(
        "dec256",
        Arc::new(
            Decimal256Array::from_iter((0..n).map(|i| Some(i256::from(i as i32))))
                .with_precision_and_scale(76, 5)
                .unwrap(),
        ),
    );
    add(
        "date32",
        Arc::new((0..ni).map(Some).collect::<Date32Array>()),
    );
    add(
        "date64",
        Arc::new(
            (0..n)
                .map(|i| opt(i).then_some(i as i64 * 86_400_000))
                .collect::<Date64Array>(),
        ),
    );
    add(
        "time32s",
        Arc::new((0..ni).map(Some).collect::<Time32SecondArray>()),
    );
    add(
        "time32ms",
        Arc::new((0..ni).map(Some).collect::<Time32MillisecondArray>()),
    );
    add(
        "time64us",
        Arc::new(
            (0..n)
                .map(|i| Some(i as i64))
                .collect::<Time64MicrosecondArray>(),
        ),
    );
    add(
        "time64ns",
        Arc::new(
            (0..n)
                .map(|i| Some(i as i64))
                .collect::<Time64NanosecondArray>(),
        ),
    );
    add(
        "ts_s",
        Arc::new(
            (0..n)
                .map(|i| Some(i as i64))
                .collect::<TimestampSecondArray>(),
        ),
    );
    add(
        "ts_ms_tz",
        Arc::new(
            (0..n)
                .map(|i| opt(i).then_some(i as i64))
                .collect::<TimestampMillisecondArray>()
                .with_timezone("Europe/Paris"),
        ),
    );
    add(
        "ts_us_tz",
        Arc::new(
            (0..n)
                .map(|i| Some(i as i64))
                .collect::<TimestampMicrosecondArray>()
                .with_timezone("+01:00"),
        ),
    );
    add(
        "ts_ns",
        Arc::new(
            (0..n)
                .map(|i| Some(i as i64))
                .collect::<TimestampNanosecondArray>(),
        ),
    );
    add(
        "dur_s",
        Arc::new(
            (0..n)
                .map(|i| Some(i as i64))
                .collect::<DurationSecondArray>(),
        ),
    );
    add(
        "dur_ns",
        Arc::new(
            (0..n)
                .map(|i| opt(i).then_some(i as i64))
                .collect::<DurationNanosecondArray>(),
        ),
    );
    add(
        "iv_ym",
        Arc::new((0..ni).map(Some).collect::<IntervalYearMonthArray>()),
    );
    add(
        "iv_dt",
        Arc::new(
            (0..ni)
                .map(|i| Some(IntervalDayTime::new(i, -i)))
                .collect::<IntervalDayTimeArray>(),
        ),
    );
    add(
        "iv_mdn",
        Arc::new(
            (0..ni)
                .map(|i| opt(i as usize).then_some(IntervalMonthDayNano::new(i, i, i as i64)))
                .collect::<IntervalMonthDayNanoArray>(),
        ),
    );
    let lists = (0..n).map(|i| opt(i).then(|| (0..(i % 4) as i32).map(Some).collect::<Vec<_>>()));
    add(
        "list",
        Arc::new(ListArray::from_iter_primitive::<Int32Type, _, _>(
            lists.clone(),
        )),
    );
    add(
        "large_list",
        Arc::new(LargeListArray::from_iter_primitive::<Int32Type, _, _>(
            lists.clone(),
        )),
    );
    add(
        "list_view",
        Arc::new(ListViewArray::from_iter_primitive::<Int32Type, _, _>(
            lists.clone(),
        )),
    );
    add(
        "large_list_view",
        Arc::new(LargeListViewArray::from_iter_primitive::<Int32Type, _, _>(
            lists,
        )),
    );
    add(
        "fixed_list",
        Arc::new(FixedSizeListArray::from_iter_primitive::<Int32Type, _, _>(
            (0..ni).map(|i| opt(i as usize).then(|| vec![Some(i), None, Some(-i)])),
            3,
        )),
    );
    let struct_fields = Fields::from(vec![
        Field::new("x", DataType::Int32, true),
        Field::new("s", DataType::Utf8, true),
    ]);
    add(
        "struct",
        Arc::new(StructArray::new(
            struct_fields,
            vec![
                Arc::new(ints.clone()),
                Arc::new(
                    (0..n)
                        .map(|i| Some(format!("s{i}")))
                        .collect::<StringArray>(),
                ),
            ],
            Some(NullBuffer::from(
                (0..n).map(|i| i % 4 != 2).collect::<Vec<_>>(),
            )),
        )),
    );
    let mut mb = MapBuilder::new(None, StringBuilder::new(), Int32Builder::new());
    for i in 0..n {
        for k in 0..(i % 3) {
            mb.keys().append_value(format!("k{k}"));
            mb.values().append_option((k != 1).then_some(k as i32));
        }
        mb.append(i % 5 != 4).unwrap();
    }
    add("map", Arc::new(mb.finish()));
    let union_fields = UnionFields::try_new(
        vec![3, 7],
        vec![
            Field::new("i", DataType::Int32, true),
            Field::new("s", DataType::Utf8, true),
        ],
    )
    .unwrap();
    let tids: Vec<i8> = (0..n).map(|i| if i % 3 == 0 { 7 } else { 3 }).collect();
    let mut counts = [0i32; 2];
    let offs: Vec<i32> = tids
        .iter()
        .map(|&t| {
            let c = &mut counts[usize::from(t == 7)];
            *c += 1;
            *c - 1
        })
        .collect();
    add(
        "dense_union",
        Arc::new(
            UnionArray::try_new(
                union_fields.clone(),
                tids.clone().into(),
                Some(offs.into()),
                vec![
                    Arc::new((0..counts[0]).map(Some).collect::<Int32Array>()),
                    Arc::new(
                        (0..counts[1])
                            .map(|i| Some(format!("u{i}")))
                            .collect::<StringArray>(),
                    ),
                ],
            )
            .unwrap(),
        ),
    );
    add(
        "sparse_union",
        Arc::new(
            UnionArray::try_new(
                union_fields,
                tids.into(),
                None,
                vec![
                    Arc::new(ints.clone()),
                    Arc::new(
                        (0..n)
                            .map(|i| Some(format!("v{i}")))
                            .collect::<StringArray>(),
                    ),
                ],
            )
            .unwrap(),
        ),
    );
    add(
        "dict",
        Arc::new(
            DictionaryArray::<Int32Type>::try_new(
                (0..ni).map(|i| opt(i as usize).then_some(i % 3)).collect(),
                Arc::new(StringArray::from(vec!["a", "b", "c"])),
            )
            .unwrap(),
        ),
    );
    add(
        "dict_u8",
        Arc::new(
            DictionaryArray::<arrow_array::types::UInt8Type>::try_new(
                (0..n).map(|i| Some((i % 2) as u8)).collect(),
                Arc::new(Int64Array::from(vec![10, 20])),
            )
            .unwrap(),
        ),
    );
    // Runs of length 1, 2, 3, ... covering n.
    let mut ends = Vec::new();
    let (mut e, mut run) = (0i32, 1i32);
    while (e as usize) < n {
        e = (e + run).min(ni);
        ends.push(e);
        run += 1;
    }
    let values: StringArray = (0..ends.len())
        .map(|i| (i % 2 == 0).then(|| format!("r{i}")))
        .collect();
    add(
        "ree",
        Arc::new(RunArray::<Int32Type>::try_new(&Int32Array::from(ends), &values).unwrap()),
    );
    let nested = ListArray::new(
        Arc::new(Field::new_list_field(
            DataType::Struct(Fields::from(vec![Field::new("v", DataType::Int64, true)])),
            true,
        )),
        arrow_buffer::OffsetBuffer::from_lengths((0..n).map(|i| i % 3)),
        Arc::new(StructArray::new(
            Fields::from(vec![Field::new("v", DataType::Int64, true)]),
            vec![Arc::new(
                (0..(0..n).map(|i| i % 3).sum::<usize>() as i64)
                    .map(Some)
                    .collect::<Int64Array>(),
            )],
            None,
        )),
        None,
    );
    add("list_of_struct", Arc::new(nested));

    let fields: Vec<Field> = cols
        .iter()
        .map(|(name, a, nullable)| Field::new(name, a.data_type().clone(), *nullable))
        .collect();
    let schema = Schema::new(fields).with_metadata(std::collections::HashMap::from([(
        "origin".to_string(),
        "arrowcert tests ✓".to_string(),
    )]));
    RecordBatch::try_new(
        Arc::new(schema),
        cols.into_iter().map(|(_, a, _)| a).collect(),
    )
    .unwrap()
}

#[test]
fn valid_exports_pass() {
    for n in [0usize, 1, 10, 37, 1000] {
        let batch = all_types(n);
        let (s, a) = export(&batch);
        assert_clean(&schema_of(&s), &format!("schema, {n} rows"));
        assert_clean(&array_of(&s, &a), &format!("batch of {n} rows"));
    }
}

#[test]
fn valid_slices_pass() {
    let n = 1000;
    let batch = all_types(n);
    let s = Guard::new(export_schema(&batch.schema()).unwrap());
    for (offset, length) in [
        (0, n),
        (1, 999),
        (3, 500),
        (7, 9),
        (8, 64),
        (13, 700),
        (63, 1),
        (999, 1),
        (1000, 0),
        (5, 0),
        (517, 483),
    ] {
        let a = Guard::new(export_batch_slice(&batch, offset, length));
        assert_clean(
            &array_of(&s, &a),
            &format!("slice [{offset}, {})", offset + length),
        );
    }
    // Slices of a small batch (bitmaps shorter than a word).
    let batch = all_types(10);
    for offset in 0..10 {
        for length in 0..=(10 - offset) {
            let a = Guard::new(export_batch_slice(&batch, offset, length));
            assert_clean(
                &array_of(&s, &a),
                &format!("small slice [{offset}, {})", offset + length),
            );
        }
    }
}

#[test]
fn valid_hand_built_edge_cases_pass() {
    // Empty utf8 array with its one offset and NULL data: size 0, so NULL
    // data is fine.
    let s = sch("u", 0, vec![]);
    let a = arr(
        0,
        0,
        0,
        vec![std::ptr::null(), leak_buf(vec![0i32]), std::ptr::null()],
        vec![],
    );
    assert_clean(&check_array_raw(s, a), "empty utf8 with NULL data");
    // Empty utf8 and large binary arrays whose one offset is not 0 ("Generally
    // the first slot in the offsets array is 0"), with NULL data or data
    // at a dangling address (arrow-rs hands 0x80 for an empty buffer): no
    // slot reaches a byte, so no byte is required (regression: Arrow C++,
    // arro3 and DataFusion hand a zero-length garbage-variation column
    // back so, and were failed).
    for (format, offsets, data) in [
        ("u", leak_buf(vec![4i32]), std::ptr::null()),
        ("u", leak_buf(vec![2i32]), 0x80 as *const c_void),
        ("Z", leak_buf(vec![4i64]), 0x80 as *const c_void),
    ] {
        let s = sch(format, 0, vec![]);
        let a = arr(0, 0, 0, vec![std::ptr::null(), offsets, data], vec![]);
        assert_clean(&check_array_raw(s, a), "empty binary, first offset past 0");
    }
    // A slice of no slots at an offset: the same.
    let s = sch("u", 0, vec![]);
    let a = arr(
        0,
        0,
        1,
        vec![
            std::ptr::null(),
            leak_buf(vec![0i32, 3]),
            0x80 as *const c_void,
        ],
        vec![],
    );
    assert_clean(&check_array_raw(s, a), "no slots at offset 1");
    // null_count -1 with a bitmap: not checked against the bits.
    let s = sch("i", 2, vec![]);
    let a = arr(
        3,
        -1,
        0,
        vec![leak_buf(vec![0b101u8]), leak_buf(vec![1i32, 2, 3])],
        vec![],
    );
    assert_clean(&check_array_raw(s, a), "null_count -1");
    // Union with type ids on children declared out of order.
    let s = sch("+us:5,2", 0, vec![sch("i", 2, vec![]), sch("i", 2, vec![])]);
    let a = arr(
        3,
        0,
        0,
        vec![leak_buf(vec![2i8, 5, 2])],
        vec![int32_array(&[1, 2, 3]), int32_array(&[4, 5, 6])],
    );
    assert_clean(&check_array_raw(s, a), "sparse union 5,2");
    // Dictionary with the ordered flag.
    let s = sch("i", 3, vec![]);
    // SAFETY: s is a leaked test schema.
    unsafe { (*s).dictionary = sch("u", 2, vec![]) };
    assert_clean(&check_schema_raw(s), "ordered dictionary");
    // Sorted map keys on a map.
    let entries = sch("+s", 0, vec![sch("u", 0, vec![]), sch("i", 2, vec![])]);
    assert_clean(
        &check_schema_raw(sch("+m", 4 | 2, vec![entries])),
        "sorted map",
    );
    // Well-formed metadata.
    let s = sch("i", 0, vec![]);
    let mut md = Vec::new();
    md.extend_from_slice(&2i32.to_ne_bytes());
    for kv in ["k1", "v1", "key two", ""] {
        md.extend_from_slice(&(kv.len() as i32).to_ne_bytes());
        md.extend_from_slice(kv.as_bytes());
    }
    // SAFETY: s is a leaked test schema.
    unsafe { (*s).metadata = leak_bytes(&md) };
    assert_clean(&check_schema_raw(s), "metadata");
    // View array whose long string sits at the very end of its buffer.
    let data = leak_buf(b"0123456789abcdefXYZ".to_vec());
    let mut view = [0u8; 16];
    view[0..4].copy_from_slice(&16i32.to_ne_bytes());
    view[4..8].copy_from_slice(b"3456");
    view[8..12].copy_from_slice(&0i32.to_ne_bytes());
    view[12..16].copy_from_slice(&3i32.to_ne_bytes());
    let s = sch("vz", 0, vec![]);
    let a = arr(
        1,
        0,
        0,
        vec![
            std::ptr::null(),
            leak_buf(view.to_vec()),
            data,
            leak_buf(vec![19i64]),
        ],
        vec![],
    );
    assert_clean(&check_array_raw(s, a), "view at buffer end");
}

// -- schema rules --------------------------------------------------------

#[test]
fn schema_format_valid() {
    for f in [
        "d:40", "w:-1", "+ud:1,1", "tss", "x", "", "d:40,2", "+w:-1", "tsu", "+us:200",
    ] {
        let v = check_schema_raw(sch(f, 0, vec![]));
        assert_rule(&v, SCHEMA_FORMAT_VALID, &[]);
        assert_eq!(v.len(), 1, "{f}: {v:?}");
    }
    // NULL, non-UTF-8, poison.
    for p in [
        std::ptr::null(),
        leak_bytes(b"\xff\xfei\0"),
        POISON as *const c_char,
    ] {
        let s = sch("i", 0, vec![]);
        // SAFETY: s is a leaked test schema.
        unsafe { (*s).format = p };
        assert_rule(&check_schema_raw(s), SCHEMA_FORMAT_NON_NULL, &[]);
    }
    // In an arrow-rs export, with the path of the column.
    let batch = all_types(4);
    let (mut s, _a) = export(&batch);
    // SAFETY: the exported root has children; the format is restored.
    let saved = unsafe { schild(&mut s, 2) }.format;
    // SAFETY: the export has this child; the field is restored before release.
    unsafe { schild(&mut s, 2) }.format = cstr("w:-2");
    let v = schema_of(&s);
    // SAFETY: the export has this child; the field is restored before release.
    unsafe { schild(&mut s, 2) }.format = saved;
    assert_rule(&v, SCHEMA_FORMAT_VALID, &[]);
    assert_eq!(v[0].at, "root.children[2]");
    assert!(v[0].message.contains("size -2"), "{}", v[0].message);
}

#[test]
fn schema_children_count() {
    let cases: Vec<*mut ArrowSchema> = vec![
        sch("+l", 0, vec![]),
        sch("i", 0, vec![sch("i", 0, vec![])]),
        sch("+ud:0,1", 0, vec![sch("i", 0, vec![])]),
        sch("+r", 0, vec![sch("i", 0, vec![])]),
        sch("+m", 0, vec![]),
    ];
    for s in cases {
        assert_rule(&check_schema_raw(s), SCHEMA_CHILDREN_COUNT, &[]);
    }
    // children NULL with n_children > 0; one child pointer NULL; negative.
    let s = sch("+s", 0, vec![]);
    // SAFETY: s is a leaked test schema.
    unsafe { (*s).n_children = 2 };
    assert_rule(&check_schema_raw(s), SCHEMA_CHILDREN_COUNT, &[]);
    let s = sch("+s", 0, vec![sch("i", 0, vec![]), std::ptr::null_mut()]);
    let v = check_schema_raw(s);
    assert_rule(&v, SCHEMA_CHILDREN_COUNT, &[]);
    assert!(v[0].message.contains("children[1] is NULL"), "{v:?}");
    let s = sch("+s", 0, vec![]);
    // SAFETY: s is a leaked test schema.
    unsafe { (*s).n_children = -1 };
    assert_rule(&check_schema_raw(s), SCHEMA_CHILDREN_COUNT, &[]);
    let s = sch(
        "+s",
        0,
        vec![sch("i", 0, vec![]), POISON as *mut ArrowSchema],
    );
    assert_rule(&check_schema_raw(s), SCHEMA_CHILDREN_COUNT, &[]);
    // Deep nesting and a cycle end with a report, not a stack overflow.
    let mut s = sch("i", 0, vec![]);
    for _ in 0..100 {
        s = sch("+l", 0, vec![s]);
    }
    let v = check_schema_raw(s);
    assert_rule(&v, SCHEMA_CHILDREN_COUNT, &[]);
    assert!(v[0].message.contains("deeper"), "{v:?}");
    let s = sch("+l", 0, vec![std::ptr::null_mut()]);
    // SAFETY: s is a leaked test schema with one child slot.
    unsafe { *(*s).children = s };
    assert_rule(&check_schema_raw(s), SCHEMA_CHILDREN_COUNT, &[]);
}

#[test]
fn schema_map_entries() {
    let map = |entries_flags: i64, key_flags: i64| {
        let entries = sch(
            "+s",
            entries_flags,
            vec![sch("u", key_flags, vec![]), sch("i", 2, vec![])],
        );
        sch("+m", 2, vec![entries])
    };
    assert_clean(&check_schema_raw(map(0, 0)), "good map");
    let v = check_schema_raw(map(0, ARROW_FLAG_NULLABLE));
    assert_rule(&v, SCHEMA_MAP_NON_NULLABLE, &[]);
    assert_eq!(v[0].at, "root.children[0].children[0]");
    assert_rule(
        &check_schema_raw(map(ARROW_FLAG_NULLABLE, 0)),
        SCHEMA_MAP_NON_NULLABLE,
        &[],
    );
    let one_child = sch("+m", 0, vec![sch("+s", 0, vec![sch("u", 0, vec![])])]);
    assert_rule(&check_schema_raw(one_child), SCHEMA_MAP_ENTRIES, &[]);
    let not_struct = sch("+m", 0, vec![sch("+l", 0, vec![sch("u", 0, vec![])])]);
    assert_rule(&check_schema_raw(not_struct), SCHEMA_MAP_ENTRIES, &[]);
    // arrow-rs map export: the key flag set by hand is caught.
    let batch = all_types(3);
    let idx = batch.schema().index_of("map").unwrap();
    let (mut s, _a) = export(&batch);
    // SAFETY: map column -> entries -> key; restored below.
    let key = unsafe { schild(schild(schild(&mut s, idx), 0), 0) };
    let saved = key.flags;
    key.flags |= ARROW_FLAG_NULLABLE;
    let v = schema_of(&s);
    // SAFETY: the export has this child; the field is restored before release.
    unsafe { schild(schild(schild(&mut s, idx), 0), 0) }.flags = saved;
    assert_rule(&v, SCHEMA_MAP_NON_NULLABLE, &[]);
}

#[test]
fn schema_ree_run_ends() {
    let ree = |f: &str, flags: i64| sch("+r", 0, vec![sch(f, flags, vec![]), sch("u", 2, vec![])]);
    assert_clean(&check_schema_raw(ree("s", 0)), "int16 run ends");
    assert_clean(&check_schema_raw(ree("l", 0)), "int64 run ends");
    assert_rule(&check_schema_raw(ree("c", 0)), SCHEMA_REE_RUN_ENDS, &[]);
    assert_rule(&check_schema_raw(ree("I", 0)), SCHEMA_REE_RUN_ENDS, &[]);
    assert_rule(
        &check_schema_raw(ree("i", ARROW_FLAG_NULLABLE)),
        SCHEMA_REE_RUN_ENDS_FLAG,
        &[],
    );
}

#[test]
fn schema_dictionary_shape() {
    for f in ["u", "g", "+l"] {
        let s = if f == "+l" {
            sch(f, 0, vec![sch("i", 0, vec![])])
        } else {
            sch(f, 0, vec![])
        };
        // SAFETY: s is a leaked test schema.
        unsafe { (*s).dictionary = sch("u", 0, vec![]) };
        assert_rule(&check_schema_raw(s), SCHEMA_DICTIONARY_SHAPE, &[]);
    }
    let s = sch("i", 0, vec![]);
    // SAFETY: s is a leaked test schema.
    unsafe { (*s).dictionary = POISON as *mut ArrowSchema };
    assert_rule(&check_schema_raw(s), SCHEMA_DICTIONARY_SHAPE, &[]);
}

#[test]
fn schema_flags_known() {
    assert_rule(
        &check_schema_raw(sch("i", 8, vec![])),
        SCHEMA_FLAGS_KNOWN,
        &[],
    );
    assert_rule(
        &check_schema_raw(sch("i", 1 << 40, vec![])),
        SCHEMA_FLAGS_KNOWN,
        &[],
    );
    assert_rule(
        &check_schema_raw(sch("i", ARROW_FLAG_DICTIONARY_ORDERED, vec![])),
        SCHEMA_FLAGS_PLACEMENT,
        &[],
    );
    let list = sch("+l", ARROW_FLAG_MAP_KEYS_SORTED, vec![sch("i", 0, vec![])]);
    assert_rule(&check_schema_raw(list), SCHEMA_FLAGS_PLACEMENT, &[]);
    // In an export: flags 8 on a column.
    let (mut s, _a) = export(&all_types(2));
    // SAFETY: restored below.
    unsafe { schild(&mut s, 1) }.flags |= 8;
    let v = schema_of(&s);
    // SAFETY: the export has this child; the field is restored before release.
    unsafe { schild(&mut s, 1) }.flags &= !8;
    assert_rule(&v, SCHEMA_FLAGS_KNOWN, &[]);
    assert_eq!(v[0].at, "root.children[1]");
}

#[test]
fn schema_metadata_encoding() {
    let with_md = |md: Vec<u8>| {
        let s = sch("i", 0, vec![]);
        // SAFETY: s is a leaked test schema.
        unsafe { (*s).metadata = leak_bytes(&md) };
        check_schema_raw(s)
    };
    let enc = |count: i32, parts: &[(i32, &[u8])]| {
        let mut md = count.to_ne_bytes().to_vec();
        for (len, bytes) in parts {
            md.extend_from_slice(&len.to_ne_bytes());
            md.extend_from_slice(bytes);
        }
        md
    };
    // "If omitted, this field MUST be NULL (not an empty string)".
    let v = with_md(enc(0, &[]));
    assert_rule(&v, SCHEMA_METADATA_NULL_IF_OMITTED, &[]);
    assert!(v[0].message.contains("count is 0"), "{}", v[0]);
    assert_rule(&with_md(enc(-1, &[])), SCHEMA_METADATA_ENCODING, &[]);
    assert_rule(&with_md(enc(1 << 21, &[])), SCHEMA_METADATA_ENCODING, &[]);
    assert_rule(
        &with_md(enc(1, &[(-4, b"")])),
        SCHEMA_METADATA_ENCODING,
        &[],
    );
    assert_rule(
        &with_md(enc(1, &[(i32::MAX, b"")])),
        SCHEMA_METADATA_ENCODING,
        &[],
    );
    // Lengths running past the end of readable memory: reported, not read
    // (the process would crash otherwise).
    let past = |md: Vec<u8>| {
        let s = sch("i", 0, vec![]);
        // SAFETY: s is a leaked test schema.
        unsafe { (*s).metadata = at_page_end(&md).cast() };
        check_schema_raw(s)
    };
    let v = past(enc(1, &[(1, b"k"), (3000, b"v")]));
    assert_rule(&v, SCHEMA_METADATA_ENCODING, &[]);
    assert!(v[0].message.contains("not readable"), "{v:?}");
    assert_rule(
        &past(enc(2, &[(1, b"k"), (1, b"v")])),
        SCHEMA_METADATA_ENCODING,
        &[],
    );
    assert_rule(&past(vec![1, 0]), SCHEMA_METADATA_ENCODING, &[]);
    assert!(past(enc(1, &[(1, b"k"), (1, b"v")])).is_empty());
    // Keys and values that are not UTF-8: well framed, so not the
    // MUST rule ("a binary string"), but schema.metadata.utf8.
    let v = with_md(enc(1, &[(1, b"k"), (2, b"\xc3\x28")]));
    assert_rule(&v, SCHEMA_METADATA_UTF8, &[]);
    assert!(v[0].message.contains("value"), "{v:?}");
    assert_rule(
        &with_md(enc(1, &[(2, b"\xff\xff"), (0, b"")])),
        SCHEMA_METADATA_UTF8,
        &[],
    );
    // Both at once: each under its rule.
    let v = with_md(enc(2, &[(2, b"\xff\xff"), (0, b""), (-1, b"")]));
    assert!(v.iter().any(|x| x.rule == SCHEMA_METADATA_UTF8), "{v:?}");
    assert!(
        v.iter().any(|x| x.rule == SCHEMA_METADATA_ENCODING),
        "{v:?}"
    );
    let s = sch("i", 0, vec![]);
    // SAFETY: s is a leaked test schema.
    unsafe { (*s).metadata = POISON as *const c_char };
    assert_rule(&check_schema_raw(s), SCHEMA_METADATA_ENCODING, &[]);
}

#[test]
fn schema_name_utf8() {
    let s = sch("i", 0, vec![]);
    // SAFETY: s is a leaked test schema.
    unsafe { (*s).name = leak_bytes(b"ab\xffc\0") };
    assert_rule(&check_schema_raw(s), SCHEMA_NAME_UTF8, &[]);
    let s = sch("i", 0, vec![]);
    // SAFETY: s is a leaked test schema.
    unsafe { (*s).name = POISON as *const c_char };
    assert_rule(&check_schema_raw(s), SCHEMA_NAME_UTF8, &[]);
    let s = sch("i", 0, vec![]);
    // SAFETY: s is a leaked test schema.
    unsafe { (*s).name = cstr("ünïcödé") };
    assert_clean(&check_schema_raw(s), "unicode name");
}

#[test]
fn schema_release_set() {
    let s = sch("i", 0, vec![]);
    // SAFETY: s is a leaked test schema.
    unsafe { (*s).release = None };
    assert_rule(&check_schema_raw(s), SCHEMA_RELEASE_SET, &[]);
    let kid = sch("i", 0, vec![]);
    // SAFETY: kid is a leaked test schema.
    unsafe { (*kid).release = None };
    let v = check_schema_raw(sch("+s", 0, vec![sch("u", 0, vec![]), kid]));
    assert_rule(&v, SCHEMA_RELEASE_SET, &[]);
    assert_eq!(v[0].at, "root.children[1]");
    let s = sch("i", 0, vec![]);
    let d = sch("u", 0, vec![]);
    // SAFETY: leaked test schemas.
    unsafe {
        (*d).release = None;
        (*s).dictionary = d;
    }
    assert_rule(&check_schema_raw(s), SCHEMA_RELEASE_SET, &[]);
    // A release left as the poison pattern.
    let s = sch("i", 0, vec![]);
    // SAFETY: s is a leaked test schema; the poisoned callback is never called.
    unsafe {
        std::ptr::write_bytes(
            std::ptr::addr_of_mut!((*s).release).cast::<u8>(),
            crate::abi::POISON_BYTE,
            8,
        )
    };
    assert_rule(&check_schema_raw(s), SCHEMA_RELEASE_SET, &[]);
    // SAFETY: NULL is allowed.
    assert_rule(
        &unsafe { validate_schema(std::ptr::null()) },
        SCHEMA_RELEASE_SET,
        &[],
    );
}

// -- array rules, on arrow-rs exports ------------------------------------

/// Runs `f` on column `col` of an export of `all_types(n)`, validates, and
/// restores the column's struct before release.
fn corrupt_column(n: usize, col: &str, f: impl FnOnce(&mut ArrowArray)) -> Vec<Violation> {
    let batch = all_types(n);
    let idx = batch.schema().index_of(col).unwrap();
    let (s, mut a) = export(&batch);
    // SAFETY: the root has one usable child per column.
    let c = unsafe { child(&mut a, idx) };
    // SAFETY: ArrowArray is plain data; the copy restores every field.
    let saved = unsafe { std::ptr::read(c) };
    f(c);
    let v = array_of(&s, &a);
    // SAFETY: as above: put the producer's fields back.
    unsafe { std::ptr::write(child(&mut a, idx), saved) };
    v
}

/// Writes buffer pointer `i` of the column through `f`, restoring it.
fn with_buffer(n: usize, col: &str, i: usize, p: *const c_void) -> Vec<Violation> {
    let batch = all_types(n);
    let idx = batch.schema().index_of(col).unwrap();
    let (s, mut a) = export(&batch);
    // SAFETY: the column has more than i buffers; restored below.
    let slot = unsafe { child(&mut a, idx).buffers.add(i) };
    // SAFETY: as above.
    let saved = unsafe { *slot };
    // SAFETY: as above.
    unsafe { *slot = p };
    let v = array_of(&s, &a);
    // SAFETY: as above.
    unsafe { *slot = saved };
    v
}

#[test]
fn array_release_set() {
    let v = corrupt_column(5, "i32", |c| c.release = None);
    assert_rule(&v, ARRAY_RELEASE_SET, &[]);
    assert_eq!(v[0].at, "root.children[6]");
    let batch = all_types(3);
    let (s, mut a) = export(&batch);
    let saved = a.release;
    a.release = None;
    let v = array_of(&s, &a);
    a.release = saved;
    assert_rule(&v, ARRAY_RELEASE_SET, &[]);
    // The dictionary of a live array.
    let batch = all_types(3);
    let idx = batch.schema().index_of("dict").unwrap();
    let (s, mut a) = export(&batch);
    // SAFETY: restored below.
    let d = unsafe { &mut *child(&mut a, idx).dictionary };
    let r = d.release.take();
    let v = array_of(&s, &a);
    // SAFETY: as above.
    unsafe { (*child(&mut a, idx).dictionary).release = r };
    assert_rule(&v, ARRAY_RELEASE_SET, &[]);
    assert_eq!(v[0].at, format!("root.children[{idx}].dictionary"));
}

#[test]
fn array_n_buffers() {
    let v = corrupt_column(5, "i64", |c| c.n_buffers = 3);
    assert_rule(&v, ARRAY_N_BUFFERS, &[]);
    let v = corrupt_column(5, "utf8", |c| c.n_buffers = 2);
    assert_rule(&v, ARRAY_N_BUFFERS, &[]);
    let v = corrupt_column(5, "sparse_union", |c| c.n_buffers = 2);
    assert_rule(&v, ARRAY_N_BUFFERS, &[]);
    let v = corrupt_column(5, "null", |c| c.n_buffers = 1);
    assert_rule(&v, ARRAY_N_BUFFERS, &[]);
}

#[test]
fn array_n_children() {
    let batch = all_types(3);
    let (s, mut a) = export(&batch);
    a.n_children -= 1;
    let v = array_of(&s, &a);
    a.n_children += 1;
    assert_rule(&v, ARRAY_N_CHILDREN, &[]);
    let saved = a.children;
    a.children = std::ptr::null_mut();
    let v = array_of(&s, &a);
    a.children = saved;
    assert_rule(&v, ARRAY_N_CHILDREN, &[]);
    let v = corrupt_column(3, "list", |c| c.n_children = 0);
    assert_rule(&v, ARRAY_N_CHILDREN, &[]);
    // A NULL child pointer.
    let s = sch("+s", 0, vec![sch("i", 2, vec![])]);
    let a = arr(2, 0, 0, vec![std::ptr::null()], vec![std::ptr::null_mut()]);
    assert_rule(&check_array_raw(s, a), ARRAY_N_CHILDREN, &[]);
}

#[test]
fn array_null_buffer() {
    // NULL validity with nulls.
    let v = with_buffer(10, "i64", 0, std::ptr::null());
    assert_rule(&v, ARRAY_NULL_BUFFER, &[]);
    // NULL values.
    let v = with_buffer(10, "i64", 1, std::ptr::null());
    assert_rule(&v, ARRAY_NULL_BUFFER, &[]);
    // NULL offsets, NULL data of a non-empty string column.
    assert_rule(
        &with_buffer(10, "utf8", 1, std::ptr::null()),
        ARRAY_NULL_BUFFER,
        &[],
    );
    assert_rule(
        &with_buffer(10, "utf8", 2, std::ptr::null()),
        ARRAY_NULL_BUFFER,
        &[],
    );
    // Poison buffer pointer: reported, never read.
    for col in ["i64", "utf8", "list", "utf8_view", "dense_union"] {
        assert_rule(
            &with_buffer(10, col, 1, POISON as *const c_void),
            ARRAY_NULL_BUFFER,
            &[],
        );
    }
    // The buffers array itself NULL or poison.
    let v = corrupt_column(5, "i32", |c| c.buffers = std::ptr::null_mut());
    assert_rule(&v, ARRAY_NULL_BUFFER, &[]);
    let v = corrupt_column(5, "i32", |c| c.buffers = POISON as *mut *const c_void);
    assert_rule(&v, ARRAY_NULL_BUFFER, &[]);
    // NULL validity with null_count -1 (the spec allows NULL only for 0).
    let s = sch("i", 2, vec![]);
    let a = arr(
        3,
        -1,
        0,
        vec![std::ptr::null(), leak_buf(vec![1i32, 2, 3])],
        vec![],
    );
    assert_rule(&check_array_raw(s, a), ARRAY_NULL_BUFFER, &[]);
}

#[test]
fn array_lengths() {
    assert_rule(
        &corrupt_column(5, "i32", |c| c.length = -1),
        ARRAY_LENGTHS,
        &[],
    );
    assert_rule(
        &corrupt_column(5, "i32", |c| c.offset = -1),
        ARRAY_LENGTHS,
        &[],
    );
    let v = corrupt_column(5, "i32", |c| {
        c.offset = i64::MAX;
        c.length = 5;
    });
    assert_rule(&v, ARRAY_LENGTHS, &[]);
    // A struct child shorter than the struct.
    let v = corrupt_column(5, "u32", |c| c.length = 4);
    assert_rule(&v, ARRAY_LENGTHS, &[]);
    assert_eq!(v[0].at, "root");
    assert!(v[0].message.contains("children[7] has length 4"), "{v:?}");
    // Fixed-size list child too short.
    let s = sch("+w:3", 0, vec![sch("i", 2, vec![])]);
    let a = arr(
        2,
        0,
        0,
        vec![std::ptr::null()],
        vec![int32_array(&[1, 2, 3, 4, 5])],
    );
    assert_rule(&check_array_raw(s, a), ARRAY_LENGTHS, &[]);
    // Sparse union child too short.
    let s = sch("+us:0,1", 0, vec![sch("i", 2, vec![]), sch("i", 2, vec![])]);
    let a = arr(
        3,
        0,
        0,
        vec![leak_buf(vec![0i8, 1, 0])],
        vec![int32_array(&[1, 2, 3]), int32_array(&[4, 5])],
    );
    assert_rule(&check_array_raw(s, a), ARRAY_LENGTHS, &[]);
    // REE run ends longer than values.
    let s = sch("+r", 0, vec![sch("i", 0, vec![]), sch("i", 2, vec![])]);
    let a = arr(
        5,
        0,
        0,
        vec![],
        vec![int32_array(&[2, 5]), int32_array(&[7])],
    );
    assert_rule(&check_array_raw(s, a), ARRAY_LENGTHS, &[]);
}

/// `bytes` copied to the end of a readable page whose next page is not
/// readable (leaked: the test process ends soon): a buffer exactly as large
/// as `bytes`, with nothing readable after it.
fn at_page_end(bytes: &[u8]) -> *const c_void {
    let (b, page) = crate::abi::hostmem::page_before_a_hole();
    assert!(bytes.len() <= page);
    let start = b + page - bytes.len();
    // SAFETY: [start, start + len) lies in the readable, writable page.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), start as *mut u8, bytes.len()) };
    start as *const c_void
}

#[test]
fn array_buffers_large_enough_where_the_mapping_ends() {
    // Exactly large enough, up to the last readable byte: clean (no false
    // positive at the boundary).
    let values: Vec<u8> = [1i32, 2, 3, 4]
        .iter()
        .flat_map(|v| v.to_ne_bytes())
        .collect();
    let s = sch("i", 0, vec![]);
    let a = arr(
        4,
        0,
        0,
        vec![std::ptr::null(), at_page_end(&values)],
        vec![],
    );
    assert_clean(
        &check_array_raw(s, a),
        "int32 buffer that ends at a page end",
    );
    // Five values claimed, four there: reported, nothing read past the end.
    let s = sch("i", 0, vec![]);
    let a = arr(
        5,
        0,
        0,
        vec![std::ptr::null(), at_page_end(&values)],
        vec![],
    );
    let v = check_array_raw(s, a);
    assert_rule(&v, ARRAY_LENGTHS, &[]);
    assert!(
        v[0].message.contains("buffers[1] (values)") && v[0].message.contains("must hold 20 bytes"),
        "{v:?}"
    );
    // An offset moves the end too.
    let s = sch("i", 0, vec![]);
    let a = arr(
        4,
        0,
        1,
        vec![std::ptr::null(), at_page_end(&values)],
        vec![],
    );
    assert_rule(&check_array_raw(s, a), ARRAY_LENGTHS, &[]);
    // A validity bitmap of 1 byte for 9 slots.
    let s = sch("c", 2, vec![]);
    let a = arr(
        9,
        1,
        0,
        vec![at_page_end(&[0xFE]), leak_buf(vec![0i8; 9])],
        vec![],
    );
    let v = check_array_raw(s, a);
    assert_rule(&v, ARRAY_LENGTHS, &[]);
    assert!(v[0].message.contains("(validity)"), "{v:?}");
    // Offsets one short (3 offsets for 3 strings), and a data buffer
    // shorter than the last offset says.
    let offsets: Vec<u8> = [0i32, 1, 2].iter().flat_map(|v| v.to_ne_bytes()).collect();
    let s = sch("u", 0, vec![]);
    let a = arr(
        3,
        0,
        0,
        vec![
            std::ptr::null(),
            at_page_end(&offsets),
            leak_bytes(b"abc").cast(),
        ],
        vec![],
    );
    assert_rule(&check_array_raw(s, a), ARRAY_LENGTHS, &[]);
    let offsets: Vec<u8> = [0i32, 1, 2, 4]
        .iter()
        .flat_map(|v| v.to_ne_bytes())
        .collect();
    let s = sch("u", 0, vec![]);
    let a = arr(
        3,
        0,
        0,
        vec![
            std::ptr::null(),
            leak_bytes(&offsets).cast(),
            at_page_end(b"abc"),
        ],
        vec![],
    );
    let v = check_array_raw(s, a);
    assert_rule(&v, ARRAY_LENGTHS, &[]);
    assert!(v[0].message.contains("(data)"), "{v:?}");
    // Booleans: 9 bits need 2 bytes.
    let s = sch("b", 0, vec![]);
    let a = arr(
        9,
        0,
        0,
        vec![std::ptr::null(), at_page_end(&[0xFF])],
        vec![],
    );
    assert_rule(&check_array_raw(s, a), ARRAY_LENGTHS, &[]);
}

#[test]
fn array_null_count() {
    let v = corrupt_column(1000, "i64", |c| c.null_count += 1);
    assert_rule(&v, ARRAY_NULL_COUNT, &[]);
    // Out of range: below -1, or above the length.
    assert_rule(
        &corrupt_column(5, "i32", |c| c.null_count = -2),
        ARRAY_NULL_COUNT,
        &[],
    );
    assert_rule(
        &corrupt_column(5, "i32", |c| c.null_count = c.length + 1),
        ARRAY_NULL_COUNT,
        &[],
    );
    assert!(v[0].message.contains("zero bits in [0, 1000)"), "{v:?}");
    // On a slice, with the bit offset of the slice.
    let batch = all_types(100);
    let idx = batch.schema().index_of("i64").unwrap();
    let (s, _a) = export(&batch);
    let mut a = Guard::new(export_batch_slice(&batch, 5, 90));
    // SAFETY: restored below.
    let c = unsafe { child(&mut a, idx) };
    let (off, nc) = (c.offset, c.null_count);
    c.null_count = nc - 1;
    let v = array_of(&s, &a);
    // SAFETY: the export has this child; the field is restored before release.
    unsafe { child(&mut a, idx) }.null_count = nc;
    assert_rule(&v, ARRAY_NULL_COUNT, &[]);
    assert_eq!(
        v[0].message,
        format!(
            "null_count is {} but the validity bitmap has {nc} zero bits in [{off}, {})",
            nc - 1,
            off + 90
        )
    );
    // Null type: null_count must be the length.
    assert_rule(
        &corrupt_column(5, "null", |c| c.null_count = 0),
        ARRAY_NULL_COUNT,
        &[],
    );
    assert_clean(
        &corrupt_column(5, "null", |c| c.null_count = -1),
        "null type, -1",
    );
    // Union and REE have no bitmap: each its own (SHOULD) rule.
    assert_rule(
        &corrupt_column(5, "dense_union", |c| c.null_count = 1),
        ARRAY_UNION_NULL_COUNT,
        &[],
    );
    // REE: its own (SHOULD) rule; -1 is fine.
    assert_rule(
        &corrupt_column(5, "ree", |c| c.null_count = 2),
        ARRAY_REE_NULL_COUNT,
        &[],
    );
    assert_clean(
        &corrupt_column(5, "ree", |c| c.null_count = -1),
        "REE, null_count -1",
    );
    // Struct with nulls.
    assert_rule(
        &corrupt_column(37, "struct", |c| c.null_count = 0),
        ARRAY_NULL_COUNT,
        &[],
    );
}

#[test]
fn bit_counting() {
    let bytes: Vec<u8> = (0..200u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 7) as u8)
        .collect();
    for first in 0..8 {
        for len in [0, 1, 5, 7, 8, 9, 63, 64, 65, 100, 511, 512, 513, 1000, 1500] {
            if first + len > bytes.len() * 8 {
                continue;
            }
            let expected = (first..first + len)
                .filter(|&k| bytes[k / 8] & (1 << (k % 8)) != 0)
                .count();
            assert_eq!(
                count_set_bits(&bytes, first, len),
                expected,
                "first {first} len {len}"
            );
        }
    }
}

#[test]
fn array_offsets_valid() {
    // utf8 with decreasing offsets.
    let bad = |offsets: Vec<i32>, data: &[u8]| {
        // SAFETY: deliberately invalid data, exported as is.
        unsafe {
            ArrayData::builder(DataType::Utf8)
                .len(offsets.len() - 1)
                .add_buffer(Buffer::from_vec(offsets))
                .add_buffer(Buffer::from_slice_ref(data))
                .build_unchecked()
        }
    };
    let (s, a) = export_data(&bad(vec![0, 3, 2, 5], b"hello"), true);
    let v = array_of(&s, &a);
    assert_rule(&v, ARRAY_OFFSETS_VALID, &[]);
    assert!(
        v[0].message
            .contains("offsets[2] = 2 is less than offsets[1] = 3"),
        "{v:?}"
    );
    let (s, a) = export_data(&bad(vec![-1, 3, 4, 5], b"hello"), true);
    assert_rule(&array_of(&s, &a), ARRAY_OFFSETS_VALID, &[]);
    // A decrease only outside the slice is not read.
    let data = bad(vec![0, 3, 2, 4, 5], b"hello").slice(2, 2);
    let (s, a) = export_data(&data, true);
    assert_clean(&array_of(&s, &a), "slice past the bad offset");
    // Large: a decrease deep in a long array, past the first block.
    let mut offsets: Vec<i64> = (0..10_001).collect();
    offsets[9000] = 8000;
    // SAFETY: deliberately invalid data.
    let data = unsafe {
        ArrayData::builder(DataType::LargeBinary)
            .len(10_000)
            .add_buffer(Buffer::from_vec(offsets))
            .add_buffer(Buffer::from_vec(vec![0u8; 10_000]))
            .build_unchecked()
    };
    let (s, a) = export_data(&data, true);
    let v = array_of(&s, &a);
    assert_rule(&v, ARRAY_OFFSETS_VALID, &[]);
    assert!(
        v[0].message
            .contains("offsets[9001] = 9001 is less than offsets[9000] = 8000")
            || v[0]
                .message
                .contains("offsets[9000] = 8000 is less than offsets[8999] = 8999"),
        "{v:?}"
    );
    // List whose last offset is beyond its child.
    let s = sch("+l", 0, vec![sch("i", 2, vec![])]);
    let a = arr(
        2,
        0,
        0,
        vec![std::ptr::null(), leak_buf(vec![0i32, 2, 6])],
        vec![int32_array(&[1, 2, 3, 4, 5])],
    );
    assert_rule(&check_array_raw(s, a), ARRAY_OFFSETS_VALID, &[]);
    // A map whose entries are shorter than its last offset (arrow-rs export).
    let batch = all_types(10);
    let idx = batch.schema().index_of("map").unwrap();
    let (s, mut a) = export(&batch);
    // SAFETY: the map column has its entries child; restored below.
    let entries = unsafe { child(child(&mut a, idx), 0) };
    entries.length -= 1;
    let v = array_of(&s, &a);
    // SAFETY: as above.
    unsafe { child(child(&mut a, idx), 0) }.length += 1;
    assert_rule(&v, ARRAY_OFFSETS_VALID, &[]);
    assert_eq!(v[0].at, format!("root.children[{idx}]"));
    // List view out of bounds.
    let s = sch("+vl", 0, vec![sch("i", 2, vec![])]);
    let a = arr(
        2,
        0,
        0,
        vec![
            std::ptr::null(),
            leak_buf(vec![0i32, 3]),
            leak_buf(vec![2i32, 3]),
        ],
        vec![int32_array(&[1, 2, 3, 4, 5])],
    );
    let v = check_array_raw(s, a);
    assert_rule(&v, ARRAY_OFFSETS_VALID, &[]);
    assert!(v[0].message.contains("slot 1"), "{v:?}");
    let s = sch("+vL", 0, vec![sch("i", 2, vec![])]);
    let a = arr(
        1,
        0,
        0,
        vec![
            std::ptr::null(),
            leak_buf(vec![1i64]),
            leak_buf(vec![-1i64]),
        ],
        vec![int32_array(&[1, 2])],
    );
    assert_rule(&check_array_raw(s, a), ARRAY_OFFSETS_VALID, &[]);
    // Dense union offset beyond its child.
    let s = sch("+ud:0,1", 0, vec![sch("i", 2, vec![]), sch("i", 2, vec![])]);
    let a = arr(
        3,
        0,
        0,
        vec![leak_buf(vec![0i8, 1, 1]), leak_buf(vec![0i32, 0, 1])],
        vec![int32_array(&[1]), int32_array(&[2])],
    );
    let v = check_array_raw(s, a);
    assert_rule(&v, ARRAY_OFFSETS_VALID, &[]);
    assert!(v[0].message.contains("slot 2"), "{v:?}");
}

#[test]
fn array_union_type_ids() {
    let s = sch("+us:0,1", 0, vec![sch("i", 2, vec![]), sch("i", 2, vec![])]);
    let a = arr(
        4,
        0,
        0,
        vec![leak_buf(vec![0i8, 1, 5, 5])],
        vec![int32_array(&[1, 2, 3, 4]), int32_array(&[5, 6, 7, 8])],
    );
    let v = check_array_raw(s, a);
    assert_rule(&v, ARRAY_UNION_TYPE_IDS, &[]);
    assert!(
        v[0].message.contains("type id 5 at slot 2") && v[0].message.contains("2 slot(s)"),
        "{v:?}"
    );
    // Negative ids too; ids of the declared list, not child indices.
    let s = sch("+ud:4,9", 0, vec![sch("i", 2, vec![]), sch("i", 2, vec![])]);
    let a = arr(
        2,
        0,
        0,
        vec![leak_buf(vec![4i8, 1]), leak_buf(vec![0i32, 0])],
        vec![int32_array(&[1]), int32_array(&[2])],
    );
    assert_rule(&check_array_raw(s, a), ARRAY_UNION_TYPE_IDS, &[]);
    // Outside the slice: not read.
    let s = sch("+us:0", 0, vec![sch("i", 2, vec![])]);
    let a = arr(
        2,
        0,
        1,
        vec![leak_buf(vec![-1i8, 0, 0])],
        vec![int32_array(&[1, 2, 3])],
    );
    assert_clean(&check_array_raw(s, a), "bad id before the offset");
}

#[test]
fn array_ree_run_ends() {
    let ree = |length: i64, offset: i64, ends: &[i32]| {
        let s = sch("+r", 0, vec![sch("i", 0, vec![]), sch("i", 2, vec![])]);
        let values: Vec<i32> = (0..ends.len() as i32).collect();
        let a = arr(
            length,
            0,
            offset,
            vec![],
            vec![int32_array(ends), int32_array(&values)],
        );
        check_array_raw(s, a)
    };
    assert_clean(&ree(6, 0, &[2, 5, 6]), "good run ends");
    assert_clean(&ree(3, 3, &[2, 5, 6]), "good run ends, offset");
    assert_rule(&ree(6, 0, &[2, 2, 6]), ARRAY_REE_RUN_ENDS, &[]);
    assert_rule(&ree(6, 0, &[3, 2, 6]), ARRAY_REE_RUN_ENDS, &[]);
    assert_rule(&ree(6, 0, &[0, 2, 6]), ARRAY_REE_RUN_ENDS, &[]);
    let v = ree(4, 3, &[2, 5, 6]);
    assert_rule(&v, ARRAY_REE_RUN_ENDS, &[]);
    assert!(v[0].message.contains("offset + length = 7"), "{v:?}");
    assert_rule(&ree(3, 0, &[]), ARRAY_REE_RUN_ENDS, &[]);
    // Run ends with a null.
    let s = sch("+r", 0, vec![sch("i", 0, vec![]), sch("i", 2, vec![])]);
    let run_ends = arr(
        2,
        1,
        0,
        vec![leak_buf(vec![0b01u8]), leak_buf(vec![2i32, 4])],
        vec![],
    );
    let a = arr(4, 0, 0, vec![], vec![run_ends, int32_array(&[1, 2])]);
    assert_rule(&check_array_raw(s, a), ARRAY_REE_RUN_ENDS, &[]);
    // int16 run ends cannot reach beyond 32767.
    let s = sch("+r", 0, vec![sch("s", 0, vec![]), sch("i", 2, vec![])]);
    let a = arr(
        40_000,
        0,
        0,
        vec![],
        vec![
            arr(
                1,
                0,
                0,
                vec![std::ptr::null(), leak_buf(vec![32_000i16])],
                vec![],
            ),
            int32_array(&[1]),
        ],
    );
    assert_rule(&check_array_raw(s, a), ARRAY_REE_RUN_ENDS, &[]);
}

fn view(len: i32, prefix_or_inline: &[u8], buffer: i32, offset: i32) -> Vec<u8> {
    let mut v = vec![0u8; 16];
    v[0..4].copy_from_slice(&len.to_ne_bytes());
    if len <= 12 {
        v[4..4 + prefix_or_inline.len()].copy_from_slice(prefix_or_inline);
    } else {
        v[4..8].copy_from_slice(&prefix_or_inline[..4]);
        v[8..12].copy_from_slice(&buffer.to_ne_bytes());
        v[12..16].copy_from_slice(&offset.to_ne_bytes());
    }
    v
}

#[test]
fn array_view_sizes() {
    let data = b"the quick brown fox jumps over the lazy dog".to_vec();
    let n = data.len() as i64;
    let check = |views: Vec<Vec<u8>>, sizes: Vec<i64>, validity: Option<u8>| {
        let mut bufs = vec![validity.map_or(std::ptr::null(), |b| leak_buf(vec![b]))];
        let count = views.len() as i64;
        bufs.push(leak_buf(views.concat()));
        for _ in &sizes {
            bufs.push(leak_buf(data.clone()));
        }
        bufs.push(leak_buf(sizes));
        let nulls = validity.map_or(0, |b| count - i64::from(b.count_ones()).min(count));
        check_array_raw(sch("vu", 2, vec![]), arr(count, nulls, 0, bufs, vec![]))
    };
    assert_clean(
        &check(
            vec![
                view(3, b"abc", 0, 0),
                view(20, b"the ", 0, 0),
                view(19, &data[n as usize - 19..], 1, n as i32 - 19),
            ],
            vec![n, n],
            None,
        ),
        "good views",
    );
    // Beyond the buffer, bad buffer index, negative length, negative size.
    assert_rule(
        &check(vec![view(20, b"the ", 0, n as i32 - 19)], vec![n], None),
        ARRAY_VIEW_SIZES,
        &[],
    );
    assert_rule(
        &check(vec![view(20, b"the ", 1, 0)], vec![n], None),
        ARRAY_VIEW_SIZES,
        &[],
    );
    assert_rule(
        &check(vec![view(-1, b"", 0, 0)], vec![n], None),
        ARRAY_VIEW_SIZES,
        &[],
    );
    assert_rule(
        &check(vec![view(3, b"abc", 0, 0)], vec![-5], None),
        ARRAY_VIEW_SIZES,
        &[],
    );
    // A broken view under a null slot is not read.
    assert_clean(
        &check(
            vec![view(3, b"abc", 0, 0), view(20, b"the ", 7, 0)],
            vec![n],
            Some(0b01),
        ),
        "garbage under a null",
    );
    // Missing the sizes buffer: n_buffers 2.
    let a = arr(
        1,
        0,
        0,
        vec![std::ptr::null(), leak_buf(view(3, b"abc", 0, 0))],
        vec![],
    );
    assert_rule(
        &check_array_raw(sch("vz", 2, vec![]), a),
        ARRAY_VIEW_SIZES,
        &[],
    );
    // arrow-rs export with n_buffers cut to 2.
    assert_rule(
        &corrupt_column(10, "utf8_view", |c| c.n_buffers = 2),
        ARRAY_VIEW_SIZES,
        &[],
    );
    // Columnar's buffer list (no sizes buffer) with two variadic data
    // buffers: the view into the last one is reported before that
    // 1-byte buffer could be read as 8 bytes of sizes.
    let bufs = vec![
        std::ptr::null(),
        leak_buf([view(20, b"the ", 0, 0), view(19, b"the ", 1, 0)].concat()),
        leak_buf(data.clone()),
        leak_buf(vec![b'x']),
    ];
    let v = check_array_raw(sch("vu", 2, vec![]), arr(2, 0, 0, bufs, vec![]));
    assert_rule(&v, ARRAY_VIEW_SIZES, &[]);
    assert!(
        v[0].message
            .contains("refers to variadic buffer 1, but there are 1"),
        "{v:?}"
    );
}

/// One utf8 view array over one variadic buffer `data`.
fn views_over(views: Vec<Vec<u8>>, data: &[u8], validity: Option<u8>) -> Vec<Violation> {
    let count = views.len() as i64;
    let bufs = vec![
        validity.map_or(std::ptr::null(), |b| leak_buf(vec![b])),
        leak_buf(views.concat()),
        leak_buf(data.to_vec()),
        leak_buf(vec![data.len() as i64]),
    ];
    let nulls = validity.map_or(0, |b| count - i64::from(b.count_ones()).min(count));
    check_array_raw(sch("vu", 2, vec![]), arr(count, nulls, 0, bufs, vec![]))
}

#[test]
fn array_view_prefix() {
    let data = b"the quick brown fox jumps over the lazy dog";
    assert_clean(
        &views_over(
            vec![view(20, b"the ", 0, 0), view(13, b"k br", 0, 8)],
            data,
            None,
        ),
        "prefixes copied from the data",
    );
    let v = views_over(
        vec![view(20, b"the ", 0, 0), view(13, b"quic", 0, 8)],
        data,
        None,
    );
    assert_rule(&v, ARRAY_VIEW_PREFIX, &[]);
    assert!(v[0].message.contains("slot 1"), "{v:?}");
    // A zeroed prefix (a producer that never filled it in).
    assert_rule(
        &views_over(vec![view(20, &[0; 4], 0, 0)], data, None),
        ARRAY_VIEW_PREFIX,
        &[],
    );
    // Under a null slot, anything goes.
    assert_clean(
        &views_over(
            vec![view(20, b"the ", 0, 0), view(13, b"quic", 0, 8)],
            data,
            Some(0b01),
        ),
        "a wrong prefix under a null",
    );
}

#[test]
fn array_view_inline_padding() {
    let data = b"the quick brown fox jumps over the lazy dog";
    assert_clean(
        &views_over(
            vec![view(0, b"", 0, 0), view(12, b"twelve bytes", 0, 0)],
            data,
            None,
        ),
        "inline values padded with 0 (and one with no room for padding)",
    );
    let mut garbage = view(3, b"abc", 0, 0);
    garbage[15] = 0xab;
    let v = views_over(vec![view(2, b"ok", 0, 0), garbage.clone()], data, None);
    assert_rule(&v, ARRAY_VIEW_INLINE_PADDING, &[]);
    assert!(
        v[0].message.contains("slot 1") && v[0].message.contains("0xab"),
        "{v:?}"
    );
    assert_clean(
        &views_over(vec![view(2, b"ok", 0, 0), garbage], data, Some(0b01)),
        "garbage padding under a null",
    );
}

#[test]
fn array_dictionary_indices() {
    // Index out of range, built unchecked.
    let keys = Int32Array::from(vec![Some(0), None, Some(3), Some(1)]);
    // SAFETY: deliberately invalid data, exported as is.
    let data = unsafe {
        ArrayData::builder(DataType::Dictionary(
            Box::new(DataType::Int32),
            Box::new(DataType::Utf8),
        ))
        .len(4)
        .nulls(keys.nulls().cloned())
        .add_buffer(keys.values().inner().clone())
        .add_child_data(StringArray::from(vec!["a", "b", "c"]).into_data())
        .build_unchecked()
    };
    let (s, a) = export_data(&data, true);
    let v = array_of(&s, &a);
    assert_rule(&v, ARRAY_DICTIONARY_INDICES, &[]);
    assert!(v[0].message.contains("index 3 at slot 2"), "{v:?}");
    // A bad index under a null is fine.
    let keys = Int32Array::from(vec![Some(0), None, Some(2)]);
    // SAFETY: as above, with garbage under the null.
    let data = unsafe {
        ArrayData::builder(DataType::Dictionary(
            Box::new(DataType::Int32),
            Box::new(DataType::Utf8),
        ))
        .len(3)
        .nulls(keys.nulls().cloned())
        .add_buffer(Buffer::from_vec(vec![0i32, -7, 2]))
        .add_child_data(StringArray::from(vec!["a", "b", "c"]).into_data())
        .build_unchecked()
    };
    let (s, a) = export_data(&data, true);
    assert_clean(&array_of(&s, &a), "garbage under a null index");
    // Unsigned 64-bit indices beyond i64.
    let s = sch("L", 0, vec![]);
    // SAFETY: s is a leaked test schema.
    unsafe { (*s).dictionary = sch("i", 2, vec![]) };
    let a = arr(
        1,
        0,
        0,
        vec![std::ptr::null(), leak_buf(vec![u64::MAX])],
        vec![],
    );
    // SAFETY: a is a leaked test array.
    unsafe { (*a).dictionary = int32_array(&[1, 2]) };
    assert_rule(&check_array_raw(s, a), ARRAY_DICTIONARY_INDICES, &[]);
    // Dictionary pointer NULL while the schema has one, and the reverse.
    let v = corrupt_column(5, "dict", |c| c.dictionary = std::ptr::null_mut());
    assert_rule(&v, ARRAY_DICTIONARY_PRESENT, &[]);
    let v = corrupt_column(5, "i32", |c| c.dictionary = int32_array(&[1]));
    assert_rule(&v, ARRAY_DICTIONARY_PRESENT, &[]);
}

#[test]
fn array_buffers_aligned() {
    let batch = all_types(9);
    let (s, mut a) = export(&batch);
    assert_clean(&array_of(&s, &a), "arrow-rs buffers");
    for (col, buffer, align) in [
        ("i64", 1, 8),
        ("i32", 1, 4),
        ("utf8", 1, 4),
        ("large_utf8", 1, 8),
    ] {
        let idx = batch.schema().index_of(col).unwrap();
        // SAFETY: the root has one usable child per column, with at
        // least buffer + 1 buffers; the pointer is restored below.
        let c = unsafe { child(&mut a, idx) };
        // SAFETY: as above.
        let slot = unsafe { &mut *c.buffers.add(buffer) };
        let saved = *slot;
        // One byte further: misaligned, and only read as bytes here
        // (the validator never reads typed values from buffers).
        *slot = leak_buf(vec![0u8; 4096 + align]).wrapping_byte_add(align / 2);
        let v = array_of(&s, &a);
        // SAFETY: as above.
        unsafe { *child(&mut a, idx).buffers.add(buffer) = saved };
        let mine: Vec<&Violation> = v
            .iter()
            .filter(|x| x.rule == ARRAY_BUFFERS_ALIGNED)
            .collect();
        assert_eq!(mine.len(), 1, "{col}: {v:?}");
        assert!(
            mine[0]
                .message
                .contains(&format!("not a multiple of {align}")),
            "{v:?}"
        );
        assert!(mine[0].at.ends_with(&format!("children[{idx}]")), "{v:?}");
    }
    // Bitmaps and bytes need no alignment.
    let s = sch("u", 2, vec![]);
    let data = leak_buf(vec![0u8; 16]).wrapping_byte_add(1);
    let a = arr(
        2,
        0,
        0,
        vec![std::ptr::null(), leak_buf(vec![0i32, 1, 3]), data],
        vec![],
    );
    assert_clean(&check_array_raw(s, a), "unaligned string data");
    assert_eq!(format::buffer_alignment(&Format::Utf8View, 3, 4), 8);
    assert_eq!(format::buffer_alignment(&Format::Utf8View, 2, 4), 1);
    assert_eq!(
        format::buffer_alignment(&Format::FixedSizeBinary(8), 1, 2),
        1
    );
}

#[test]
fn release_relocatable() {
    // A schema whose private_data points into itself.
    let s = sch("i", 0, vec![]);
    // SAFETY: s is a leaked test schema.
    unsafe { (*s).private_data = (&raw mut (*s).flags).cast() };
    let v = check_schema_raw(s);
    assert_rule(&v, SCHEMA_RELEASE_RELOCATABLE, &[]);
    assert!(
        v[0].message.contains("private_data points 24 bytes"),
        "{v:?}"
    );
    // SAFETY: s is a leaked test schema.
    assert_eq!(schema_self_refs(unsafe { &*s }).len(), 1);
    // An array whose buffers array is inside itself: a struct array
    // with its one (NULL) buffer kept in the dictionary member.
    let s = sch("+s", 0, vec![]);
    let a = arr(0, 0, 0, vec![std::ptr::null()], vec![]);
    // SAFETY: a is a leaked test array.
    unsafe { (*a).buffers = (&raw mut (*a).dictionary).cast() };
    let v = check_array_raw(s, a);
    assert_rule(&v, ARRAY_RELEASE_RELOCATABLE, &[]);
    assert!(v[0].message.starts_with("buffers points 56 bytes"), "{v:?}");
    // A buffer pointer into the structure.
    let s = sch("c", 0, vec![]);
    let a = arr(1, 0, 0, vec![std::ptr::null(), std::ptr::null()], vec![]);
    // SAFETY: a is a leaked test array with two buffers.
    unsafe { *(*a).buffers.add(1) = (&raw const (*a).length).cast() };
    let v = check_array_raw(s, a);
    assert_rule(&v, ARRAY_RELEASE_RELOCATABLE, &[]);
    // SAFETY: leaked test structures.
    let (sr, ar) = unsafe { (&*s, &*a) };
    // SAFETY: as above; the buffers array holds two pointers.
    assert_eq!(unsafe { array_self_refs(sr, ar) }.len(), 1);
    // With a wrong buffer count the entries are not read.
    // SAFETY: a is a leaked test array.
    unsafe { (*a).n_buffers = 5 };
    // SAFETY: as above; the count does not match, so nothing is read.
    assert!(unsafe { array_self_refs(sr, ar) }.is_empty());
}

#[test]
fn hostile_values_do_not_crash() {
    let s = sch("+s", 0, vec![sch("i", 2, vec![])]);
    for (field, value) in [
        ("n_buffers", i64::MAX),
        ("n_buffers", i64::MIN),
        ("n_children", i64::MAX),
        ("n_children", -1),
        ("length", i64::MAX),
        ("length", i64::MIN),
        ("offset", i64::MAX),
        ("null_count", i64::MIN),
    ] {
        let a = arr(2, 0, 0, vec![std::ptr::null()], vec![int32_array(&[1, 2])]);
        // SAFETY: a is a leaked test array.
        let r = unsafe { &mut *a };
        match field {
            "n_buffers" => r.n_buffers = value,
            "n_children" => r.n_children = value,
            "length" => r.length = value,
            "offset" => r.offset = value,
            _ => r.null_count = value,
        }
        let v = check_array_raw(s, a);
        assert!(!v.is_empty(), "{field} = {value}");
    }
    // A whole array of poison.
    let a = Box::into_raw(Box::new(ArrowArray::poisoned()));
    let v = check_array_raw(sch("u", 0, vec![]), a);
    assert!(v.iter().any(|x| x.rule == ARRAY_RELEASE_SET), "{v:?}");
    let s = Box::into_raw(Box::new(ArrowSchema::poisoned()));
    let v = check_schema_raw(s);
    assert!(!v.is_empty());
    // A cyclic array (and schema) ends with a depth report.
    let sc = sch("+l", 0, vec![std::ptr::null_mut()]);
    let ac = arr(
        1,
        0,
        0,
        vec![std::ptr::null(), leak_buf(vec![0i32, 1])],
        vec![std::ptr::null_mut()],
    );
    // SAFETY: leaked test structures with one child slot each.
    unsafe {
        *(*sc).children = sc;
        *(*ac).children = ac;
    }
    // SAFETY: as above.
    let v = unsafe { validate_array(sc, ac) };
    assert_rule(&v, ARRAY_N_CHILDREN, &[]);
    assert!(v[0].message.contains("deeper"), "{v:?}");
    // Too many violations are capped.
    let kids: Vec<*mut ArrowSchema> = (0..3000).map(|_| sch("?", 0, vec![])).collect();
    assert_eq!(check_schema_raw(sch("+s", 0, kids)).len(), MAX_VIOLATIONS);
}

#[test]
fn other_arrow_rs_export_paths_pass() {
    let batch = all_types(100);
    let s = Guard::new(export_schema(&batch.schema()).unwrap());
    // RecordBatch::slice slices each array (arrow-rs array-level slicing).
    for (offset, length) in [(0, 100), (1, 98), (3, 50), (9, 0), (63, 37)] {
        let a = Guard::new(export_batch(&batch.slice(offset, length)));
        assert_clean(
            &array_of(&s, &a),
            &format!("RecordBatch::slice({offset}, {length})"),
        );
    }
    // All-null and empty columns of every type.
    for n in [0usize, 1, 9] {
        let cols: Vec<ArrayRef> = batch
            .schema()
            .fields()
            .iter()
            .map(|f| {
                if n == 0 {
                    new_empty_array(f.data_type())
                } else {
                    new_null_array(f.data_type(), n)
                }
            })
            .collect();
        let fields: Vec<Field> = batch
            .schema()
            .fields()
            .iter()
            .map(|f| f.as_ref().clone().with_nullable(true))
            .collect();
        let b = RecordBatch::try_new(Arc::new(Schema::new(fields)), cols).unwrap();
        let (s2, a2) = export(&b);
        let sv = schema_of(&s2);
        let av = array_of(&s2, &a2);
        let all: Vec<String> = sv
            .iter()
            .chain(&av)
            .map(|v| {
                let idx: Option<usize> =
                    v.at.strip_prefix("root.children[")
                        .and_then(|r| r.split(']').next())
                        .and_then(|i| i.parse().ok());
                format!(
                    "{} ({})",
                    v,
                    idx.map_or("?".into(), |i| b.schema().field(i).name().clone())
                )
            })
            .collect();
        assert!(all.is_empty(), "{n} rows: {all:#?}");
    }
}

#[test]
fn int64_large_list_and_views_at_scale() {
    // Bigger arrays than a block, through the public entry points.
    let n = 100_000;
    let batch = RecordBatch::try_from_iter([
        (
            "a",
            Arc::new(
                (0..n)
                    .map(|i| (i % 7 != 3).then_some(i as i64))
                    .collect::<Int64Array>(),
            ) as ArrayRef,
        ),
        (
            "b",
            Arc::new(
                (0..n)
                    .map(|i| (i % 5 != 0).then(|| "y".repeat(i % 30)))
                    .collect::<StringArray>(),
            ) as ArrayRef,
        ),
        (
            "c",
            Arc::new(ListArray::from_iter_primitive::<Int64Type, _, _>(
                (0..n).map(|i| (i % 11 != 0).then(|| vec![Some(i as i64); i % 4])),
            )) as ArrayRef,
        ),
        (
            "d",
            Arc::new(
                (0..n)
                    .map(|i| Some("z".repeat(i % 40)))
                    .collect::<StringViewArray>(),
            ) as ArrayRef,
        ),
    ])
    .unwrap();
    let (s, a) = export(&batch);
    assert_clean(&schema_of(&s), "schema");
    assert_clean(&array_of(&s, &a), "big batch");
    let a = Guard::new(export_batch_slice(&batch, 12_345, 54_321));
    assert_clean(&array_of(&s, &a), "big slice");
}

// -- full validation: values ---------------------------------------------

/// A one-column check of hand-built buffers.
fn one(format: &str, a: *mut ArrowArray) -> Vec<Violation> {
    check_array_raw(sch(format, 2, vec![]), a)
}

#[test]
fn empty_variable_size_arrays_with_null_offsets() {
    // "The offsets buffer contains length + 1 signed integers": 4 or 8
    // bytes even when empty, so NULL is a MUST violation, said with who
    // tolerates it.
    for format in ["u", "z", "U", "Z"] {
        let v = one(format, arr(0, 0, 0, vec![std::ptr::null(); 3], vec![]));
        assert_rule(&v, ARRAY_NULL_BUFFER, &[]);
        assert!(v[0].message.contains("Arrow C++, nanoarrow"), "{}", v[0]);
    }
    let list = sch("+l", 2, vec![sch("i", 2, vec![])]);
    let v = check_array_raw(
        list,
        arr(0, 0, 0, vec![std::ptr::null(); 2], vec![int32_array(&[])]),
    );
    assert_rule(&v, ARRAY_NULL_BUFFER, &[]);
}

#[test]
fn an_empty_variable_size_array_needs_no_data_wherever_its_offset_points() {
    // A zero-length slice whose one offset names byte 300 of the buffer it
    // was cut from, exported with an empty data buffer: no value, nothing
    // to represent (arro3's Table.slice(19, 0) exports this; Arrow C++'s
    // full validation accepts it).
    for format in ["u", "U"] {
        assert_clean(&utf8(format, None, &[300], b""), format);
        // One value: the data buffer must reach its end.
        let v = utf8(format, None, &[300, 301], b"");
        assert_rule(&v, ARRAY_NULL_BUFFER, &[]);
    }
    for format in ["u", "z", "U", "Z"] {
        // The data pointer arrow-rs gives an empty buffer (dangling,
        // aligned, never read).
        let offsets = if format == "U" || format == "Z" {
            leak_buf(vec![300i64])
        } else {
            leak_buf(vec![300i32])
        };
        let dangling = 0x80usize as *const c_void;
        let a = arr(0, 0, 0, vec![std::ptr::null(), offsets, dangling], vec![]);
        assert_clean(&one(format, a), format);
    }
}

/// A utf8 array of `offsets` into `data`, with an optional validity byte.
fn utf8(format: &str, valid: Option<u8>, offsets: &[i64], data: &[u8]) -> Vec<Violation> {
    let n = offsets.len() as i64 - 1;
    let nulls = valid.map_or(0, |b| (0..n).filter(|i| b >> i & 1 == 0).count() as i64);
    let validity = valid.map_or(std::ptr::null(), |b| leak_buf(vec![b]));
    let offsets = if format == "U" {
        leak_buf(offsets.to_vec())
    } else {
        leak_buf(offsets.iter().map(|&o| o as i32).collect::<Vec<_>>())
    };
    one(
        format,
        arr(
            n,
            nulls,
            0,
            vec![validity, offsets, leak_buf(data.to_vec())],
            vec![],
        ),
    )
}

#[test]
fn array_utf8_valid() {
    for format in ["u", "U"] {
        // "a", "é", "\xff": the third is not UTF-8.
        let v = utf8(format, None, &[0, 1, 3, 4], b"a\xc3\xa9\xff");
        assert_rule(&v, ARRAY_UTF8_VALID, &[]);
        assert!(v[0].message.contains("slot 2"), "{}", v[0]);
        // Under a null slot any bytes may stand.
        assert_clean(
            &utf8(format, Some(0b011), &[0, 1, 3, 4], b"a\xc3\xa9\xff"),
            "garbage under a null",
        );
        // Each value alone: "é" split in two is valid as a whole run but
        // not value by value.
        let v = utf8(format, None, &[0, 1, 2], b"\xc3\xa9");
        assert_rule(&v, ARRAY_UTF8_VALID, &[]);
        assert!(v[0].message.contains("slot 0"), "{}", v[0]);
        // A truncated character at the end of the last value.
        assert_rule(
            &utf8(format, None, &[0, 2, 3], b"ab\xe2"),
            ARRAY_UTF8_VALID,
            &[],
        );
        assert_clean(&utf8(format, None, &[0, 2, 5], b"ab\xe2\x9c\x93"), "valid");
    }
    // Binary is not judged.
    assert_clean(&utf8("z", None, &[0, 1], b"\xff"), "binary");
    // Views: an inline and an out-of-line value.
    let inline_bad = {
        let mut v = [0u8; 16];
        v[0] = 2;
        v[4] = b'a';
        v[5] = 0xff;
        v
    };
    let long = b"a fine value, then \xff".to_vec();
    let out_of_line = {
        let mut v = [0u8; 16];
        v[0..4].copy_from_slice(&(long.len() as i32).to_ne_bytes());
        v[4..8].copy_from_slice(&long[0..4]);
        v
    };
    for (views, data) in [(inline_bad, vec![0u8]), (out_of_line, long.clone())] {
        let view_array = || {
            let buffers = vec![
                std::ptr::null(),
                leak_buf(views.to_vec()),
                leak_buf(data.clone()),
                leak_buf(vec![data.len() as i64]),
            ];
            arr(1, 0, 0, buffers, vec![])
        };
        assert_rule(&one("vu", view_array()), ARRAY_UTF8_VALID, &[]);
        assert_clean(&one("vz", view_array()), "binary view");
    }
}

#[test]
fn array_decimal_precision() {
    let v = one(
        "d:3,0,32",
        arr(
            2,
            0,
            0,
            vec![std::ptr::null(), leak_buf(vec![999i32, -1000])],
            vec![],
        ),
    );
    assert_rule(&v, ARRAY_DECIMAL_PRECISION, &[]);
    assert!(
        v[0].message.contains("slot 1") && v[0].message.contains("-1000"),
        "{}",
        v[0]
    );
    let v = one(
        "d:18,2,64",
        arr(
            1,
            0,
            0,
            vec![std::ptr::null(), leak_buf(vec![10i64.pow(18)])],
            vec![],
        ),
    );
    assert_rule(&v, ARRAY_DECIMAL_PRECISION, &[]);
    let v = one(
        "d:5,1",
        arr(
            2,
            0,
            0,
            vec![std::ptr::null(), leak_buf(vec![99_999i128, 100_000])],
            vec![],
        ),
    );
    assert_rule(&v, ARRAY_DECIMAL_PRECISION, &[]);
    // Under a null slot: not judged.
    let a = arr(
        2,
        1,
        0,
        vec![leak_buf(vec![0b01u8]), leak_buf(vec![99_999i128, 100_000])],
        vec![],
    );
    assert_clean(&one("d:5,1", a), "beyond precision under a null");
    // 256 bits: 10^40 - 1 fits precision 40, 10^40 and -10^40 do not.
    let word = |neg: bool, minus_one: bool| {
        let (hi, lo) = super::values::pow10_for_tests(40);
        let (hi, lo) = if minus_one {
            (hi - u128::from(lo == 0), lo.wrapping_sub(1))
        } else {
            (hi, lo)
        };
        let (hi, lo) = if neg {
            let (lo, carry) = (!lo).overflowing_add(1);
            (!hi + u128::from(carry), lo)
        } else {
            (hi, lo)
        };
        let mut b = lo.to_le_bytes().to_vec();
        b.extend_from_slice(&hi.to_le_bytes());
        b
    };
    let values: Vec<u8> = [word(false, true), word(true, true)].concat();
    let a = arr(2, 0, 0, vec![std::ptr::null(), leak_buf(values)], vec![]);
    assert_clean(&one("d:40,0,256", a), "10^40 - 1 at precision 40");
    for neg in [false, true] {
        let values: Vec<u8> = [word(false, true), word(neg, false)].concat();
        let a = arr(2, 0, 0, vec![std::ptr::null(), leak_buf(values)], vec![]);
        let v = one("d:40,0,256", a);
        assert_rule(&v, ARRAY_DECIMAL_PRECISION, &[]);
        assert!(v[0].message.contains("slot 1"), "{}", v[0]);
    }
}

#[test]
fn array_date64_days() {
    let v = one(
        "tdm",
        arr(
            2,
            0,
            0,
            vec![std::ptr::null(), leak_buf(vec![-86_400_000i64, 1])],
            vec![],
        ),
    );
    assert_rule(&v, ARRAY_DATE64_DAYS, &[]);
    assert!(v[0].message.contains("slot 1"), "{}", v[0]);
    let a = arr(
        2,
        1,
        0,
        vec![leak_buf(vec![0b01u8]), leak_buf(vec![0i64, 1])],
        vec![],
    );
    assert_clean(&one("tdm", a), "a partial day under a null");
}

#[test]
fn array_time_range() {
    for (format, day) in [("tts", 86_400i64), ("ttm", 86_400_000)] {
        let ok = arr(
            2,
            0,
            0,
            vec![std::ptr::null(), leak_buf(vec![0i32, (day - 1) as i32])],
            vec![],
        );
        assert_clean(&one(format, ok), "within the day");
        for bad in [day, -1] {
            let a = arr(
                2,
                0,
                0,
                vec![std::ptr::null(), leak_buf(vec![0i32, bad as i32])],
                vec![],
            );
            assert_rule(&one(format, a), ARRAY_TIME_RANGE, &[]);
        }
    }
    for (format, day) in [("ttu", 86_400_000_000i64), ("ttn", 86_400_000_000_000)] {
        let ok = arr(
            2,
            0,
            0,
            vec![std::ptr::null(), leak_buf(vec![0i64, day - 1])],
            vec![],
        );
        assert_clean(&one(format, ok), "within the day");
        let a = arr(
            2,
            0,
            0,
            vec![std::ptr::null(), leak_buf(vec![0i64, day])],
            vec![],
        );
        assert_rule(&one(format, a), ARRAY_TIME_RANGE, &[]);
        let a = arr(
            2,
            1,
            0,
            vec![leak_buf(vec![0b01u8]), leak_buf(vec![0i64, day])],
            vec![],
        );
        assert_clean(&one(format, a), "past midnight under a null");
    }
}

/// A dense union of two int32 children (2 values each) with these type ids
/// and offsets.
fn dense_union(ids: &[i8], offsets: &[i32]) -> Vec<Violation> {
    let s = sch("+ud:0,1", 0, vec![sch("i", 2, vec![]), sch("i", 2, vec![])]);
    let a = arr(
        ids.len() as i64,
        0,
        0,
        vec![leak_buf(ids.to_vec()), leak_buf(offsets.to_vec())],
        vec![int32_array(&[1, 2]), int32_array(&[3, 4])],
    );
    check_array_raw(s, a)
}

#[test]
fn array_union_offsets_ordered() {
    let v = dense_union(&[0, 1, 0], &[1, 0, 0]);
    assert_rule(&v, ARRAY_UNION_OFFSETS_ORDERED, &[]);
    assert!(
        v[0].message.contains("slot 2") && v[0].message.contains("slot 0"),
        "{}",
        v[0]
    );
    // Each child on its own: interleaved but in order per child.
    assert_clean(&dense_union(&[0, 1, 0, 1], &[0, 0, 1, 1]), "in order");
    // Equal offsets ("in order"): not reported.
    assert_clean(&dense_union(&[0, 0], &[1, 1]), "equal offsets");
}

/// A map of int32 keys to int32 values: `offsets` into entries whose keys
/// have validity byte `keys_valid`.
fn map(valid: Option<u8>, offsets: &[i32], keys_valid: u8, n_keys: usize) -> Vec<Violation> {
    let entries_schema = sch("+s", 0, vec![sch("i", 0, vec![]), sch("i", 2, vec![])]);
    let s = sch("+m", 2, vec![entries_schema]);
    let key_nulls = (0..n_keys).filter(|i| keys_valid >> i & 1 == 0).count() as i64;
    let keys = arr(
        n_keys as i64,
        key_nulls,
        0,
        vec![leak_buf(vec![keys_valid]), leak_buf(vec![7i32; n_keys])],
        vec![],
    );
    let entries = arr(
        n_keys as i64,
        0,
        0,
        vec![std::ptr::null()],
        vec![keys, int32_array(&vec![1; n_keys])],
    );
    let n = offsets.len() as i64 - 1;
    let nulls = valid.map_or(0, |b| (0..n).filter(|i| b >> i & 1 == 0).count() as i64);
    let a = arr(
        n,
        nulls,
        0,
        vec![
            valid.map_or(std::ptr::null(), |b| leak_buf(vec![b])),
            leak_buf(offsets.to_vec()),
        ],
        vec![entries],
    );
    check_array_raw(s, a)
}

#[test]
fn array_map_keys_non_null() {
    let v = map(None, &[0, 2, 3], 0b101, 3);
    assert_rule(&v, ARRAY_MAP_KEYS_NON_NULL, &[]);
    assert!(
        v[0].message.contains("slot 0") && v[0].message.contains("entry 1"),
        "{}",
        v[0]
    );
    // The null key in a null map slot's entries: not judged.
    assert_clean(
        &map(Some(0b10), &[0, 2, 3], 0b100, 3),
        "null key under a null slot",
    );
    assert_clean(&map(None, &[0, 2, 3], 0b111, 3), "no null key");
}

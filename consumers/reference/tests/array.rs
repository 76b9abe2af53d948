//! `arrowcert_consume_array` and `arrowcert_consume_device_array`.

mod common;

use std::sync::Arc;

use arrow_array::ffi::FFI_ArrowSchema;
use arrow_array::{make_array, Array, ArrayRef, BinaryArray, Int32Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use arrowcert_consumer_reference::{arrowcert_consume_array, arrowcert_consume_device_array};
use arrowcert_sdk::abi::arrow_rs::schema_from_arrow_rs;
use arrowcert_sdk::abi::ops::Owned;
use arrowcert_sdk::abi::{device, ArrowArray, ArrowDeviceArray, ArrowSchema, Plain};
use common::*;

/// Calls consume_array and returns its result code.
fn consume(schema: &mut ArrowSchema, array: &mut ArrowArray, out: &mut Out) -> i32 {
    // SAFETY: live (or deliberately released) structures and valid out
    // pointers owned by the test.
    unsafe { arrowcert_consume_array(schema, array, &mut out.ptr, &mut out.len) }
}

fn consume_device(schema: &mut ArrowSchema, array: &mut ArrowDeviceArray, out: &mut Out) -> i32 {
    // SAFETY: as in consume.
    unsafe { arrowcert_consume_device_array(schema, array, &mut out.ptr, &mut out.len) }
}

/// Exports `batch`, consumes it, and checks the output and that both base
/// structures were moved and released exactly once.
fn round_trip(batch: &RecordBatch) {
    let (schema_rel, array_rel) = (counter(), counter());
    let mut schema = schema_export(batch.schema().as_ref(), &schema_rel);
    let mut array = batch_export(batch, &array_rel);
    let mut out = Out::new();
    let rc = consume(&mut schema, &mut array, &mut out);
    assert_eq!(rc, 0, "{}", last_error());
    assert!(
        schema.is_released() && array.is_released(),
        "sources marked released"
    );
    assert_eq!(
        (count(&schema_rel), count(&array_rel)),
        (1, 1),
        "released once"
    );
    assert_read(&out, &batch.schema(), std::slice::from_ref(batch));
}

#[test]
fn reads_ints_strings_list_and_dictionary() {
    round_trip(&sample_batch(7, 23));
}

#[test]
fn reads_a_sliced_batch() {
    // Every column exported with a non-zero offset.
    round_trip(&sample_batch(3, 40).slice(5, 17));
}

#[test]
fn reads_an_empty_batch() {
    round_trip(&sample_batch(1, 10).slice(10, 0));
}

/// Regression (matrix seed 20261122, `array/gen/25/batch:1/slice:1+0`):
/// an empty slice past 0 of run-end encoded views, whose one value needs a
/// variadic buffer, once came back as an IPC stream arrow-ipc itself could
/// not read.
#[test]
fn reads_an_empty_slice_of_run_end_encoded_views() {
    use arrow_array::{Int64Array, RunArray, StringViewArray};
    let values = StringViewArray::from(vec![Some("a value longer than twelve bytes")]);
    let ree = RunArray::try_new(&Int64Array::from(vec![1i64]), &values).unwrap();
    let schema = Schema::new(vec![Field::new("f0", ree.data_type().clone(), false)]);
    let batch = RecordBatch::try_new(Arc::new(schema), vec![Arc::new(ree) as ArrayRef]).unwrap();
    round_trip(&batch.slice(1, 0));
}

#[test]
fn reads_a_root_struct_with_an_offset() {
    // The root struct array itself carries the offset.
    let batch = sample_batch(2, 30);
    let (schema_rel, array_rel) = (counter(), counter());
    let mut schema = schema_export(batch.schema().as_ref(), &schema_rel);
    let mut array = batch_export(&batch, &array_rel);
    array.offset = 4;
    array.length = 9;
    let mut out = Out::new();
    assert_eq!(
        consume(&mut schema, &mut array, &mut out),
        0,
        "{}",
        last_error()
    );
    assert_eq!((count(&schema_rel), count(&array_rel)), (1, 1));
    assert_read(&out, &batch.schema(), &[batch.slice(4, 9)]);
}

#[test]
fn reads_null_count_minus_one() {
    // "null_count: ... If unknown, this is -1": the consumer must count.
    let batch = sample_batch(5, 12);
    let (schema_rel, array_rel) = (counter(), counter());
    let mut schema = schema_export(batch.schema().as_ref(), &schema_rel);
    let mut array = batch_export(&batch, &array_rel);
    for i in 0..array.n_children as usize {
        // SAFETY: the export's children array holds n_children live children.
        unsafe { (**array.children.add(i)).null_count = -1 };
    }
    let mut out = Out::new();
    assert_eq!(
        consume(&mut schema, &mut array, &mut out),
        0,
        "{}",
        last_error()
    );
    assert_read(&out, &batch.schema(), &[batch]);
}

#[test]
fn refuses_invalid_utf8_and_releases_both() {
    // Validation reads every value: a string column with invalid UTF-8.
    let binary = BinaryArray::from(vec![b"ok".as_ref(), b"\xff\xfe".as_ref()]).into_data();
    // SAFETY: deliberately invalid data, only ever exported and validated.
    let utf8 = unsafe {
        binary
            .into_builder()
            .data_type(DataType::Utf8)
            .build_unchecked()
    };
    let column: ArrayRef = make_array(utf8);
    let schema = Arc::new(Schema::new(vec![Field::new("s", DataType::Utf8, false)]));
    let batch = RecordBatch::try_new(schema, vec![column]).unwrap();

    let (schema_rel, array_rel) = (counter(), counter());
    let mut schema = schema_export(batch.schema().as_ref(), &schema_rel);
    let mut array = batch_export(&batch, &array_rel);
    let mut out = Out::new();
    assert_eq!(consume(&mut schema, &mut array, &mut out), libc::EINVAL);
    assert!(
        last_error().to_lowercase().contains("utf"),
        "{}",
        last_error()
    );
    assert!(schema.is_released() && array.is_released());
    assert_eq!((count(&schema_rel), count(&array_rel)), (1, 1));
    assert!(out.ptr.is_null());
}

#[test]
fn refuses_a_non_struct_schema_and_releases_both() {
    let (schema_rel, array_rel) = (counter(), counter());
    let ffi = FFI_ArrowSchema::try_from(&DataType::Int32).unwrap();
    let mut schema = counted_schema(schema_from_arrow_rs(ffi), &schema_rel);
    let batch =
        RecordBatch::try_from_iter([("x", Arc::new(Int32Array::from(vec![1, 2])) as ArrayRef)])
            .unwrap();
    let mut array = batch_export(&batch, &array_rel);
    let mut out = Out::new();
    assert_eq!(consume(&mut schema, &mut array, &mut out), libc::EINVAL);
    assert!(schema.is_released() && array.is_released());
    assert_eq!((count(&schema_rel), count(&array_rel)), (1, 1));
}

#[test]
fn refuses_a_released_schema_and_still_releases_the_array() {
    let batch = sample_batch(0, 4);
    let array_rel = counter();
    let mut schema = ArrowSchema::zeroed();
    let mut array = batch_export(&batch, &array_rel);
    let mut out = Out::new();
    assert_eq!(consume(&mut schema, &mut array, &mut out), libc::EINVAL);
    assert!(last_error().contains("released"), "{}", last_error());
    assert!(array.is_released());
    assert_eq!(count(&array_rel), 1);
}

#[test]
fn refuses_null_out_pointers_and_still_releases_both() {
    let batch = sample_batch(0, 4);
    let (schema_rel, array_rel) = (counter(), counter());
    let mut schema = schema_export(batch.schema().as_ref(), &schema_rel);
    let mut array = batch_export(&batch, &array_rel);
    // SAFETY: live structures; NULL out pointers on purpose.
    let rc = unsafe {
        arrowcert_consume_array(
            &mut schema,
            &mut array,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    };
    assert_eq!(rc, libc::EINVAL);
    assert!(schema.is_released() && array.is_released());
    assert_eq!((count(&schema_rel), count(&array_rel)), (1, 1));
}

#[test]
fn refuses_null_structures() {
    let mut out = Out::new();
    // SAFETY: NULL inputs on purpose.
    let rc = unsafe {
        arrowcert_consume_array(
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            &mut out.ptr,
            &mut out.len,
        )
    };
    assert_eq!(rc, libc::EINVAL);
    assert!(!last_error().is_empty());
}

#[test]
fn success_clears_the_last_error() {
    let mut out = Out::new();
    // SAFETY: NULL inputs on purpose.
    unsafe {
        arrowcert_consume_array(
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            &mut out.ptr,
            &mut out.len,
        )
    };
    assert!(!last_error().is_empty());
    round_trip(&sample_batch(1, 3));
    assert_eq!(last_error(), "");
}

#[test]
fn device_array_on_cpu_is_read() {
    let batch = sample_batch(11, 19).slice(3, 11);
    let (schema_rel, array_rel) = (counter(), counter());
    let mut schema = schema_export(batch.schema().as_ref(), &schema_rel);
    let mut array = device_export(&batch, device::CPU, &array_rel);
    let mut out = Out::new();
    assert_eq!(
        consume_device(&mut schema, &mut array, &mut out),
        0,
        "{}",
        last_error()
    );
    // Moving a device array marks the embedded array released.
    assert!(schema.is_released() && array.array.release.is_none());
    assert_eq!((count(&schema_rel), count(&array_rel)), (1, 1));
    assert_read(&out, &batch.schema(), &[batch]);
}

#[test]
fn device_array_on_cuda_is_refused_with_enosys_and_released() {
    let batch = sample_batch(11, 5);
    let (schema_rel, array_rel) = (counter(), counter());
    let mut schema = schema_export(batch.schema().as_ref(), &schema_rel);
    let mut array = device_export(&batch, device::CUDA, &array_rel);
    let mut out = Out::new();
    assert_eq!(
        consume_device(&mut schema, &mut array, &mut out),
        libc::ENOSYS
    );
    assert!(last_error().contains("cuda"), "{}", last_error());
    assert!(schema.is_released() && array.array.release.is_none());
    assert_eq!((count(&schema_rel), count(&array_rel)), (1, 1));
    assert!(out.ptr.is_null());
}

#[test]
fn released_device_array_is_refused_and_schema_released() {
    let batch = sample_batch(0, 2);
    let schema_rel = counter();
    let mut schema = schema_export(batch.schema().as_ref(), &schema_rel);
    let mut array = ArrowDeviceArray::zeroed();
    let mut out = Out::new();
    assert_eq!(
        consume_device(&mut schema, &mut array, &mut out),
        libc::EINVAL
    );
    assert!(schema.is_released());
    assert_eq!(count(&schema_rel), 1);
}

#[test]
fn refuses_an_array_of_the_wrong_shape_and_releases_both() {
    let batch = sample_batch(4, 6);
    type Mutation = fn(&mut ArrowArray);
    let mutations: [(&str, Mutation); 4] = [
        ("n_children", |a| a.n_children = 3),
        ("n_buffers", |a| a.n_buffers = 2),
        ("length", |a| a.length = -1),
        ("dictionary", |a| {
            // SAFETY: the export's children array holds 4 live children;
            // only the dictionary column's pointer is cleared.
            unsafe { (**a.children.add(3)).dictionary = std::ptr::null_mut() }
        }),
    ];
    for (what, mutate) in mutations {
        let (schema_rel, array_rel) = (counter(), counter());
        let mut schema = schema_export(batch.schema().as_ref(), &schema_rel);
        let mut array = batch_export(&batch, &array_rel);
        mutate(&mut array);
        let mut out = Out::new();
        let rc = consume(&mut schema, &mut array, &mut out);
        assert_eq!(rc, libc::EINVAL, "{what}");
        assert!(last_error().contains(what), "{what}: {}", last_error());
        assert!(schema.is_released() && array.is_released(), "{what}");
        // (arrow-rs's release frees children and dictionary through its
        // private data, not the mutated members, so nothing leaks.)
        assert_eq!((count(&schema_rel), count(&array_rel)), (1, 1), "{what}");
    }
}

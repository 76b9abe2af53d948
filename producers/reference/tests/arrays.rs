//! Schema, plain array, device array and plain stream entry points: values,
//! slices, the poisoned out structure, errors, moves.

mod common;

use std::mem::offset_of;

use arrow_array::ffi::{from_ffi, FFI_ArrowSchema};
use arrow_array::ffi_stream::RecordBatchStreamReader;
use arrow_array::{make_array, RecordBatch};
use arrowcert_producer_reference as plugin;
use arrowcert_sdk::abi::arrow_rs::{array_into_arrow_rs, import_schema, stream_into_arrow_rs};
use arrowcert_sdk::abi::ops::{relocate, take, Owned};
use arrowcert_sdk::abi::{
    device, is_poison_ptr, ArrowArray, ArrowArrayStream, ArrowDeviceArray, ArrowSchema, Plain,
    POISON_BYTE,
};
use common::*;

fn expect_err<T>(r: Result<T, (i32, String)>) -> (i32, String) {
    match r {
        Ok(_) => panic!("expected an error"),
        Err(e) => e,
    }
}

fn produce_array(
    ipc: &[u8],
    index: i64,
    offset: i64,
    length: i64,
) -> Result<ArrowArray, (i32, String)> {
    let mut out = ArrowArray::poisoned();
    // SAFETY: `ipc` is a live slice; `out` is a local valid for writes.
    let rc = unsafe {
        plugin::arrowcert_produce_array(
            ipc.as_ptr(),
            ipc.len() as i64,
            index,
            offset,
            length,
            &mut out,
        )
    };
    if rc == 0 {
        Ok(out)
    } else {
        Err((rc, last_error().unwrap_or_default()))
    }
}

fn produce_device_array(
    ipc: &[u8],
    index: i64,
    offset: i64,
    length: i64,
    device_type: i32,
    device_id: i64,
) -> Result<ArrowDeviceArray, (i32, String)> {
    let mut out = ArrowDeviceArray::poisoned();
    // SAFETY: `ipc` is a live slice; `out` is a local valid for writes.
    let rc = unsafe {
        plugin::arrowcert_produce_device_array(
            ipc.as_ptr(),
            ipc.len() as i64,
            index,
            offset,
            length,
            device_type,
            device_id,
            &mut out,
        )
    };
    if rc == 0 {
        Ok(out)
    } else {
        Err((rc, last_error().unwrap_or_default()))
    }
}

/// Every member a CPU device array must have, and no poison left anywhere
/// outside the embedded array (padding included).
fn check_cpu_members(d: &ArrowDeviceArray) {
    assert_eq!(d.device_id, -1);
    assert_eq!(d.device_type, device::CPU);
    assert!(d.sync_event.is_null());
    assert_eq!(d.reserved, [0; 3]);
    let release = d.array.release.expect("release set") as usize;
    assert!(!is_poison_ptr(release), "release left as poison");
    // SAFETY: reading the bytes of a live local struct.
    let bytes: &[u8] = unsafe {
        std::slice::from_raw_parts(
            (d as *const ArrowDeviceArray).cast::<u8>(),
            std::mem::size_of::<ArrowDeviceArray>(),
        )
    };
    let tail = &bytes[offset_of!(ArrowDeviceArray, device_id)..];
    let padding = &bytes
        [offset_of!(ArrowDeviceArray, device_type) + 4..offset_of!(ArrowDeviceArray, sync_event)];
    assert!(padding.iter().all(|&b| b == 0), "padding {padding:?}");
    assert!(
        !tail.windows(4).any(|w| w == [POISON_BYTE; 4]),
        "poison in {tail:?}"
    );
}

#[test]
fn schema_round_trips_with_metadata() {
    let exported = produce_schema(&ipc_bytes());
    assert!(exported.release.is_some());
    assert_eq!(exported.n_children, 6);
    // SAFETY: a live schema the plugin exported.
    let imported = unsafe { import_schema(exported) }.unwrap();
    assert_eq!(&imported, schema().as_ref());
    assert_eq!(imported.metadata()["origin"], "reference tests");
}

#[test]
fn whole_batches_as_plain_arrays() {
    let ipc = ipc_bytes();
    for (i, expected) in batches().iter().enumerate() {
        let array = produce_array(&ipc, i as i64, 0, -1).unwrap();
        assert_eq!(array.n_children, 6);
        // SAFETY: a live struct array of the fixture's schema.
        let got = unsafe { import(array) };
        assert_eq!(&got, expected, "batch {i}");
    }
}

#[test]
fn slices_are_correct_and_zero_copy() {
    let ipc = ipc_bytes();
    let decoded = decoded();
    for (offset, length) in [(0, 7), (1, 3), (2, -1), (6, 1), (7, 0), (3, 0)] {
        let array = produce_array(&ipc, 0, offset, length).unwrap();
        let expect_len = if length == -1 { 7 - offset } else { length };
        assert_eq!(array.length, expect_len);
        // SAFETY: a live struct array of the fixture's schema.
        let got = unsafe { import(array) };
        let want = decoded.batches[0].slice(offset as usize, expect_len as usize);
        assert_eq!(got, want, "slice {offset}+{length}");
    }
    // Zero-copy, with the slice in ArrowArray.offset: every buffer is kept
    // whole and each column's offset is the slice's start, so consumers see
    // non-zero offsets on every type (the root struct carries none).
    let mut array = produce_array(&ipc, 0, 2, 3).unwrap();
    assert_eq!(array.offset, 0);
    assert_eq!(array.length, 3);
    // SAFETY: children of a live struct array.
    let offsets: Vec<i64> = (0..6)
        .map(|i| unsafe { (**array.children.add(i)).offset })
        .collect();
    assert_eq!(offsets, vec![2; 6], "child offsets of slice 2+3");
    array.release();
}

#[test]
fn device_array_members_and_values() {
    let ipc = ipc_bytes();
    let decoded = decoded();
    for (index, offset, length) in [(0, 0, -1), (0, 2, 4), (1, 1, -1), (2, 0, -1)] {
        let mut d = produce_device_array(&ipc, index, offset, length, CPU, -1).unwrap();
        check_cpu_members(&d);
        let batch = &decoded.batches[index as usize];
        let len = if length == -1 {
            batch.num_rows() as i64 - offset
        } else {
            length
        };
        // SAFETY: a live struct array of the fixture's schema, moved out.
        let got = unsafe { import(take(&mut d.array)) };
        assert!(d.is_released());
        assert_eq!(got, batch.slice(offset as usize, len as usize));
    }
}

#[test]
fn device_array_rejects_other_devices() {
    let ipc = ipc_bytes();
    for (device_type, device_id) in [
        (device::CUDA, 0),
        (device::CUDA_HOST, -1),
        (77, -1),
        (CPU, 0),
        (CPU, 3),
    ] {
        let (rc, message) =
            expect_err(produce_device_array(&ipc, 0, 0, -1, device_type, device_id));
        assert_eq!(rc, libc::ENOSYS, "{device_type}/{device_id}");
        assert!(!message.is_empty());
    }
}

#[test]
fn bad_arguments_are_einval_with_a_message() {
    let ipc = ipc_bytes();
    let cases: Vec<(&str, Vec<u8>, i64, i64, i64)> = vec![
        ("garbage IPC", b"not an arrow stream".to_vec(), 0, 0, -1),
        ("empty IPC", Vec::new(), 0, 0, -1),
        ("batch index", ipc.clone(), 3, 0, -1),
        ("negative index", ipc.clone(), -1, 0, -1),
        ("slice past end", ipc.clone(), 0, 5, 3),
        ("negative offset", ipc.clone(), 0, -1, 2),
        ("offset past end", ipc.clone(), 0, 8, -1),
    ];
    for (what, bytes, index, offset, length) in cases {
        let (rc, message) = expect_err(produce_array(&bytes, index, offset, length));
        assert_eq!(rc, libc::EINVAL, "{what}");
        assert!(!message.is_empty(), "{what}");
        let (rc, _) = expect_err(produce_device_array(&bytes, index, offset, length, CPU, -1));
        assert_eq!(rc, libc::EINVAL, "{what} (device)");
    }
    // NULL out pointers.
    // SAFETY: NULL out pointers are rejected before any write.
    unsafe {
        let n = ipc.len() as i64;
        assert_eq!(
            plugin::arrowcert_produce_schema(ipc.as_ptr(), n, std::ptr::null_mut()),
            libc::EINVAL
        );
        assert_eq!(
            plugin::arrowcert_produce_array(ipc.as_ptr(), n, 0, 0, -1, std::ptr::null_mut()),
            libc::EINVAL
        );
        assert_eq!(
            plugin::arrowcert_produce_stream(ipc.as_ptr(), n, std::ptr::null_mut()),
            libc::EINVAL
        );
        assert_eq!(
            plugin::arrowcert_produce_device_array(
                ipc.as_ptr(),
                n,
                0,
                0,
                -1,
                CPU,
                -1,
                std::ptr::null_mut()
            ),
            libc::EINVAL
        );
        // A NULL ipc pointer with a non-zero length.
        let mut out = ArrowSchema::poisoned();
        assert_eq!(
            plugin::arrowcert_produce_schema(std::ptr::null(), 10, &mut out),
            libc::EINVAL
        );
    }
    // A successful call clears the last error.
    produce_schema(&ipc).release();
    assert_eq!(last_error(), None);
}

#[test]
fn relocated_device_array_is_released_at_its_new_address() {
    let ipc = ipc_bytes();
    let mut d = produce_device_array(&ipc, 0, 1, 5, CPU, -1).unwrap();
    let mut moved = relocate(&mut d);
    assert!(d.is_released());
    // Nothing may point into the old location: poison it.
    d = ArrowDeviceArray::poisoned();
    let _ = &d;
    check_cpu_members(&moved);
    moved.release();
    assert!(
        moved.is_released(),
        "release marks the moved structure released"
    );

    // A relocated array still reads correctly.
    let mut d = produce_device_array(&ipc, 0, 1, 5, CPU, -1).unwrap();
    let mut moved = relocate(&mut d);
    d = ArrowDeviceArray::poisoned();
    let _ = &d;
    // SAFETY: a live struct array of the fixture's schema, moved out.
    let got = unsafe { import(take(&mut moved.array)) };
    assert_eq!(got, decoded().batches[0].slice(1, 5));
}

#[test]
fn children_moved_out_outlive_their_parent() {
    let ipc = ipc_bytes();
    let decoded = decoded();
    let expected = decoded.batches[0].slice(1, 6);
    let mut parent = produce_device_array(&ipc, 0, 1, 6, CPU, -1).unwrap().array;
    assert_eq!(parent.n_children, 6);
    // "It is also possible to move one or several child arrays, but the parent
    // ArrowArray structure MUST be released immediately afterwards".
    // SAFETY: children of a live array, each a valid ArrowArray.
    let (mut text, mut list, mut dict) = unsafe {
        (
            take(&mut **parent.children.add(2)),
            take(&mut **parent.children.add(3)),
            take(&mut **parent.children.add(5)),
        )
    };
    parent.release();
    assert!(parent.is_released());
    assert!(!text.is_released() && !list.is_released() && !dict.is_released());

    // The moved children still read correctly after the parent is gone.
    for (child, column) in [(&mut text, 2usize), (&mut list, 3)] {
        let field = expected.schema().field(column).clone();
        let ffi_schema = FFI_ArrowSchema::try_from(&field).unwrap();
        // SAFETY: a live child array moved out of the parent, described by
        // the field it was exported from.
        let data = unsafe { from_ffi(array_into_arrow_rs(take(child)), &ffi_schema) }.unwrap();
        assert_eq!(make_array(data).as_ref(), expected.column(column).as_ref());
    }
    // And one is released on its own, after the parent.
    dict.release();
    assert!(dict.is_released());
}

#[test]
fn plain_stream_yields_every_batch() {
    let ipc = ipc_bytes();
    let mut out = ArrowArrayStream::poisoned();
    // SAFETY: `ipc` is a live slice; `out` is a local valid for writes.
    let rc = unsafe { plugin::arrowcert_produce_stream(ipc.as_ptr(), ipc.len() as i64, &mut out) };
    assert_eq!(rc, 0);
    // SAFETY: a live stream the plugin exported.
    let reader = RecordBatchStreamReader::try_new(unsafe { stream_into_arrow_rs(out) }).unwrap();
    let got: Vec<RecordBatch> = reader.collect::<Result<_, _>>().unwrap();
    assert_eq!(got, decoded().batches);
    assert_eq!(got[0].schema(), common::schema());
}

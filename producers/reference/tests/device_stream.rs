//! The device stream: schema any number of times, every batch, end of stream
//! repeated, errors, relocation, lifetimes of what it handed out.

mod common;

use std::ffi::CStr;

use arrowcert_producer_reference as plugin;
use arrowcert_sdk::abi::arrow_rs::import_schema;
use arrowcert_sdk::abi::ops::{relocate, take, Owned};
use arrowcert_sdk::abi::{device, ArrowDeviceArray, ArrowDeviceArrayStream, ArrowSchema, Plain};
use common::*;

fn produce(
    ipc: &[u8],
    device_type: i32,
    device_id: i64,
) -> Result<Box<ArrowDeviceArrayStream>, i32> {
    let mut out = Box::new(ArrowDeviceArrayStream::poisoned());
    // SAFETY: `ipc` is a live slice; `out` is valid for writes.
    let rc = unsafe {
        plugin::arrowcert_produce_device_stream(
            ipc.as_ptr(),
            ipc.len() as i64,
            device_type,
            device_id,
            &mut *out,
        )
    };
    if rc == 0 {
        Ok(out)
    } else {
        Err(rc)
    }
}

fn get_schema(stream: &mut ArrowDeviceArrayStream) -> ArrowSchema {
    let mut out = ArrowSchema::poisoned();
    // SAFETY: a live stream from the plugin and a local out structure.
    let rc = unsafe { (stream.get_schema.unwrap())(stream, &mut out) };
    assert_eq!(rc, 0);
    out
}

fn get_next(stream: &mut ArrowDeviceArrayStream) -> ArrowDeviceArray {
    let mut out = ArrowDeviceArray::poisoned();
    // SAFETY: a live stream from the plugin and a local out structure.
    let rc = unsafe { (stream.get_next.unwrap())(stream, &mut out) };
    assert_eq!(rc, 0);
    out
}

fn last_stream_error(stream: &mut ArrowDeviceArrayStream) -> Option<String> {
    // SAFETY: a live stream from the plugin.
    let p = unsafe { (stream.get_last_error.unwrap())(stream) };
    // SAFETY: NULL or a C string valid until the next call on the stream.
    (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

fn is_all_zero(d: &ArrowDeviceArray) -> bool {
    // SAFETY: reading the bytes of a live local struct.
    let bytes: &[u8] = unsafe {
        std::slice::from_raw_parts(
            (d as *const ArrowDeviceArray).cast::<u8>(),
            std::mem::size_of::<ArrowDeviceArray>(),
        )
    };
    bytes.iter().all(|&b| b == 0)
}

#[test]
fn every_batch_then_end_of_stream_twice() {
    let mut stream = produce(&ipc_bytes(), CPU, -1).unwrap();
    assert_eq!(stream.device_type, device::CPU);
    assert!(!stream.is_released());

    // get_schema more than once: independent schemas.
    let first = get_schema(&mut stream);
    let mut second = get_schema(&mut stream);
    assert_ne!(
        first.private_data, second.private_data,
        "a fresh export each time"
    );
    second.release();
    // SAFETY: a live schema from the stream.
    assert_eq!(&unsafe { import_schema(first) }.unwrap(), schema().as_ref());
    assert_eq!(last_stream_error(&mut stream), None);

    for expected in decoded().batches {
        let mut d = get_next(&mut stream);
        assert!(!d.is_released());
        assert_eq!(d.device_type, device::CPU);
        assert_eq!(d.device_id, -1);
        assert!(d.sync_event.is_null());
        assert_eq!(d.reserved, [0; 3]);
        // SAFETY: a live struct array of the fixture's schema, moved out.
        assert_eq!(unsafe { import(take(&mut d.array)) }, expected);
    }
    for _ in 0..2 {
        let d = get_next(&mut stream);
        assert!(d.is_released(), "end of stream is a released array");
        assert!(is_all_zero(&d), "and fully zeroed");
    }
    assert_eq!(last_stream_error(&mut stream), None);
    stream.release();
    assert!(stream.is_released());
    assert!(stream.private_data.is_null());
}

#[test]
fn chunks_outlive_the_stream() {
    let mut stream = produce(&ipc_bytes(), CPU, -1).unwrap();
    let schema = get_schema(&mut stream);
    let mut a = get_next(&mut stream);
    let mut b = get_next(&mut stream);
    stream.release();
    assert!(stream.is_released());
    // "Their lifetimes are not tied to that of ArrowDeviceArrayStream."
    let batches = decoded().batches;
    // SAFETY: live arrays and schema handed out by the (released) stream.
    unsafe {
        assert_eq!(import(take(&mut b.array)), batches[1]);
        assert_eq!(import(take(&mut a.array)), batches[0]);
        assert_eq!(&import_schema(schema).unwrap(), common::schema().as_ref());
    }
}

#[test]
fn the_stream_is_relocatable() {
    let mut stream = produce(&ipc_bytes(), CPU, -1).unwrap();
    let mut d = get_next(&mut stream);
    d.release();
    let mut moved = relocate(&mut *stream);
    assert!(stream.is_released());
    // Nothing may point into the old location.
    *stream = ArrowDeviceArrayStream::poisoned();
    let mut d = get_next(&mut moved);
    // SAFETY: a live struct array of the fixture's schema, moved out.
    assert_eq!(unsafe { import(take(&mut d.array)) }, decoded().batches[1]);
    moved.release();
    assert!(moved.is_released());
}

#[test]
fn errors_set_get_last_error_until_the_next_success() {
    let mut stream = produce(&ipc_bytes(), CPU, -1).unwrap();
    // SAFETY: a live stream; NULL out is rejected before any write.
    let rc = unsafe { (stream.get_next.unwrap())(&mut *stream, std::ptr::null_mut()) };
    assert_eq!(rc, libc::EINVAL);
    let message = last_stream_error(&mut stream).expect("a message after a failure");
    assert!(message.contains("NULL"), "{message}");
    // SAFETY: as above.
    let rc = unsafe { (stream.get_schema.unwrap())(&mut *stream, std::ptr::null_mut()) };
    assert_eq!(rc, libc::EINVAL);
    assert!(last_stream_error(&mut stream).is_some());
    // The failed calls consumed nothing.
    let mut d = get_next(&mut stream);
    assert_eq!(
        last_stream_error(&mut stream),
        None,
        "NULL unless the last call failed"
    );
    // SAFETY: a live struct array of the fixture's schema, moved out.
    assert_eq!(unsafe { import(take(&mut d.array)) }, decoded().batches[0]);
    stream.release();
}

#[test]
fn empty_stream_ends_at_once() {
    let mut stream = produce(&empty_ipc_bytes(), CPU, -1).unwrap();
    let mut s = get_schema(&mut stream);
    s.release();
    assert!(get_next(&mut stream).is_released());
    stream.release();
}

#[test]
fn release_with_batches_still_pending() {
    // Release a stream that still has batches pending.
    let mut stream = produce(&ipc_bytes(), CPU, -1).unwrap();
    stream.release();
    assert!(stream.is_released());
}

#[test]
fn entry_point_errors() {
    let ipc = ipc_bytes();
    assert_eq!(produce(&ipc, device::CUDA, 0).err(), Some(libc::ENOSYS));
    assert!(last_error().is_some());
    assert_eq!(produce(&ipc, CPU, 1).err(), Some(libc::ENOSYS));
    assert_eq!(produce(b"garbage", CPU, -1).err(), Some(libc::EINVAL));
    // SAFETY: NULL out is rejected before any write.
    let rc = unsafe {
        plugin::arrowcert_produce_device_stream(
            ipc.as_ptr(),
            ipc.len() as i64,
            CPU,
            -1,
            std::ptr::null_mut(),
        )
    };
    assert_eq!(rc, libc::EINVAL);
}

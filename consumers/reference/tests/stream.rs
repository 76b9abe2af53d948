//! `arrowcert_consume_stream` and `arrowcert_consume_device_stream`.

mod common;

use arrowcert_consumer_reference::{arrowcert_consume_device_stream, arrowcert_consume_stream};
use arrowcert_sdk::abi::ops::Owned;
use arrowcert_sdk::abi::{
    device, ArrowArrayStream, ArrowDeviceArrayStream, ArrowDeviceType, Plain,
};
use common::*;

fn consume(stream: &mut ArrowArrayStream, out: &mut Out) -> i32 {
    // SAFETY: a live (or deliberately released) test stream and valid out
    // pointers owned by the test.
    unsafe { arrowcert_consume_stream(stream, &mut out.ptr, &mut out.len) }
}

fn consume_device(stream: &mut ArrowDeviceArrayStream, out: &mut Out) -> i32 {
    // SAFETY: as in consume.
    unsafe { arrowcert_consume_device_stream(stream, &mut out.ptr, &mut out.len) }
}

/// Three chunks: a full one, a sliced one, and an empty one; the dictionary
/// changes between chunks.
fn three_chunks() -> Script {
    Script::new(
        sample_schema(),
        vec![
            sample_batch(1, 17),
            sample_batch(2, 30).slice(7, 13),
            sample_batch(3, 4).slice(4, 0),
        ],
    )
}

/// The stream was moved (source released), released exactly once, and every
/// chunk and the schema it produced were released too.
fn assert_all_released(log: &Log, chunks: usize) {
    assert_eq!(Log::get(&log.stream_releases), 1, "stream released once");
    assert_eq!(count(&log.schema_releases), Log::get(&log.schemas_exported));
    assert_eq!(count(&log.array_releases), chunks, "every chunk released");
    assert_eq!(
        Log::get(&log.last_error_misuse),
        0,
        "get_last_error only after a failure"
    );
}

#[test]
fn reads_every_chunk() {
    let script = three_chunks();
    let (schema, batches) = (script.schema.clone(), script.batches.clone());
    let (mut stream, log) = plain_stream(script);
    let mut out = Out::new();
    assert_eq!(consume(&mut stream, &mut out), 0, "{}", last_error());
    assert!(stream.is_released(), "source marked released");
    assert_eq!(Log::get(&log.get_schema_calls), 1, "get_schema once");
    assert_eq!(Log::get(&log.get_next_calls), 4, "three chunks and the end");
    assert_eq!(Log::get(&log.last_error_calls), 0);
    assert_all_released(&log, 3);
    assert_read(&out, &schema, &batches);
}

#[test]
fn reads_an_empty_stream() {
    let (mut stream, log) = plain_stream(Script::new(sample_schema(), vec![]));
    let mut out = Out::new();
    assert_eq!(consume(&mut stream, &mut out), 0, "{}", last_error());
    assert_all_released(&log, 0);
    assert_read(&out, &sample_schema(), &[]);
}

#[test]
fn get_next_failure_returns_its_code_and_message() {
    let mut script = three_chunks();
    script.next_error = Some((1, libc::EIO, Some("injected failure: disk on fire")));
    let (mut stream, log) = plain_stream(script);
    let mut out = Out::new();
    assert_eq!(consume(&mut stream, &mut out), libc::EIO);
    assert_eq!(last_error(), "injected failure: disk on fire");
    assert!(stream.is_released());
    assert_eq!(
        Log::get(&log.get_next_calls),
        2,
        "no call after the failure"
    );
    assert_eq!(Log::get(&log.last_error_calls), 1);
    assert_all_released(&log, 1);
    assert!(out.ptr.is_null());
}

#[test]
fn get_schema_failure_without_message_returns_its_code() {
    let mut script = three_chunks();
    script.schema_error = Some((libc::ENOMEM, None));
    let (mut stream, log) = plain_stream(script);
    let mut out = Out::new();
    assert_eq!(consume(&mut stream, &mut out), libc::ENOMEM);
    let message = last_error();
    assert!(
        message.contains("get_schema") && message.contains(&libc::ENOMEM.to_string()),
        "{message}"
    );
    assert_eq!(Log::get(&log.get_next_calls), 0);
    assert_eq!(Log::get(&log.last_error_calls), 1);
    assert_all_released(&log, 0);
}

#[test]
fn an_unusual_error_code_is_passed_through() {
    let mut script = three_chunks();
    script.next_error = Some((0, libc::ECONNRESET, Some("peer went away")));
    let (mut stream, log) = plain_stream(script);
    let mut out = Out::new();
    assert_eq!(consume(&mut stream, &mut out), libc::ECONNRESET);
    assert_eq!(last_error(), "peer went away");
    assert_all_released(&log, 0);
}

#[test]
fn a_released_stream_is_refused_without_calling_it() {
    let mut stream = ArrowArrayStream::zeroed();
    let mut out = Out::new();
    assert_eq!(consume(&mut stream, &mut out), libc::EINVAL);
    assert!(last_error().contains("released"), "{}", last_error());
}

#[test]
fn null_out_pointers_still_release_the_stream() {
    let (mut stream, log) = plain_stream(three_chunks());
    // SAFETY: a live stream; NULL out pointers on purpose.
    let rc = unsafe {
        arrowcert_consume_stream(&mut stream, std::ptr::null_mut(), std::ptr::null_mut())
    };
    assert_eq!(rc, libc::EINVAL);
    assert!(stream.is_released());
    assert_eq!(Log::get(&log.stream_releases), 1);
    assert_eq!(Log::get(&log.get_schema_calls), 0);
}

#[test]
fn a_chunk_that_fails_validation_is_an_einval_and_everything_is_released() {
    // A chunk of a different schema than get_schema announced.
    let mut script = Script::new(sample_schema(), vec![sample_batch(1, 3)]);
    let other = arrow_array::RecordBatch::try_from_iter([(
        "x",
        std::sync::Arc::new(arrow_array::Int32Array::from(vec![1])) as arrow_array::ArrayRef,
    )])
    .unwrap();
    script.batches.push(other);
    let (mut stream, log) = plain_stream(script);
    let mut out = Out::new();
    assert_eq!(consume(&mut stream, &mut out), libc::EINVAL);
    let message = last_error();
    assert!(
        message.contains("chunk 1") && message.contains("n_children"),
        "{message}"
    );
    assert_eq!(Log::get(&log.last_error_calls), 0, "not a producer failure");
    assert_all_released(&log, 2);
}

// ---- device streams ----------------------------------------------------

#[test]
fn device_stream_on_cpu_reads_every_chunk() {
    let script = three_chunks();
    let (schema, batches) = (script.schema.clone(), script.batches.clone());
    let (mut stream, log) = device_stream(script, device::CPU);
    let mut out = Out::new();
    assert_eq!(consume_device(&mut stream, &mut out), 0, "{}", last_error());
    assert!(stream.is_released());
    assert_eq!(Log::get(&log.get_schema_calls), 1);
    assert_all_released(&log, 3);
    assert_read(&out, &schema, &batches);
}

#[test]
fn device_stream_get_next_failure_returns_its_code_and_message() {
    let mut script = three_chunks();
    script.next_error = Some((1, libc::EIO, Some("device fell off the bus")));
    let (mut stream, log) = device_stream(script, device::CPU);
    let mut out = Out::new();
    assert_eq!(consume_device(&mut stream, &mut out), libc::EIO);
    assert_eq!(last_error(), "device fell off the bus");
    assert!(stream.is_released());
    assert_eq!(Log::get(&log.last_error_calls), 1);
    assert_all_released(&log, 1);
}

#[test]
fn device_stream_on_another_device_is_refused_with_enosys() {
    for device_type in [device::CUDA, device::CUDA_HOST, device::EXT_DEV] {
        let (mut stream, log) = device_stream(three_chunks(), device_type);
        let mut out = Out::new();
        assert_eq!(
            consume_device(&mut stream, &mut out),
            libc::ENOSYS,
            "device {device_type}"
        );
        assert!(stream.is_released());
        assert_eq!(Log::get(&log.get_schema_calls), 0, "nothing read");
        assert_all_released(&log, 0);
    }
}

#[test]
fn device_stream_chunk_on_another_device_is_refused_and_released() {
    let mut script = three_chunks();
    script.chunk_device = device::CUDA as ArrowDeviceType;
    let (mut stream, log) = device_stream(script, device::CPU);
    let mut out = Out::new();
    assert_eq!(consume_device(&mut stream, &mut out), libc::EINVAL);
    assert!(last_error().contains("chunk 0"), "{}", last_error());
    assert_eq!(Log::get(&log.get_next_calls), 1);
    assert_all_released(&log, 1);
}

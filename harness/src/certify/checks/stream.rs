//! The stream and device stream paths of a producer case, one named step
//! each: the stream as produced, its schema, its chunks, the chunks after
//! the stream's release, and the stream's memory.

use super::{
    array_rules, device_members, ended_text, frees, not_self_referencing, not_utf8, on_device,
    release_checked, release_quietly, relocate_poisoning, schema_rules, unreadable, values,
    DeviceId,
};
use crate::abi::ops::{callable, Guard, Owned};
use crate::abi::{
    device, ArrowArray, ArrowArrayStream, ArrowDeviceArray, ArrowDeviceArrayStream, ArrowSchema,
    Plain,
};
use crate::certify::{call_ended, Ended, Observations, Options};
use crate::compare;
use crate::device::Kind as DeviceKind;
use crate::inspect::probe::{self, Call, StreamCalls};
use crate::plugin::Plugin;
use crate::scenario::Scenario;

/// Replaces a device chunk by its host copy (see [`on_device`]).
fn chunk_to_host<C: Chunk + Plain>(
    schema: &ArrowSchema,
    out: &mut Guard<C>,
    opts: &Options,
    at: &str,
    obs: &mut Observations,
) -> Result<(), Ended> {
    let Some(device_array) = out.take_device() else {
        return Ok(());
    };
    let mut moved = Guard::new(device_array);
    let mut host = on_device(schema, &mut moved, opts, at, Some(obs))?;
    *out.array() = crate::abi::ops::take(&mut *host);
    Ok(())
}

/// What the stream paths need from a chunk: its plain array, and its
/// device members when it has them.
pub(super) trait Chunk: Owned {
    fn array(&mut self) -> &mut ArrowArray;
    fn device(&self) -> Option<&ArrowDeviceArray>;
    /// Moves a device array out (marking this one released).
    fn take_device(&mut self) -> Option<ArrowDeviceArray>;
}

impl Chunk for ArrowArray {
    fn array(&mut self) -> &mut ArrowArray {
        self
    }
    fn device(&self) -> Option<&ArrowDeviceArray> {
        None
    }
    fn take_device(&mut self) -> Option<ArrowDeviceArray> {
        None
    }
}

impl Chunk for ArrowDeviceArray {
    fn array(&mut self) -> &mut ArrowArray {
        &mut self.array
    }
    fn device(&self) -> Option<&ArrowDeviceArray> {
        Some(self)
    }
    fn take_device(&mut self) -> Option<ArrowDeviceArray> {
        Some(crate::abi::ops::take(self))
    }
}

/// Producing a stream of either kind.
pub(super) trait ProduceStream: StreamCalls + Sized
where
    Self::Chunk: Chunk,
{
    fn produce(p: &Plugin, s: &Scenario, o: &Options, out: &mut Self) -> Result<(), Ended>;
    fn device_type(&self) -> Option<i32>;
    /// The callback members that are NULL or still poison (never written).
    fn unset_callbacks(&self) -> Vec<&'static str>;
    fn private_data(&self) -> *mut std::ffi::c_void;
}

macro_rules! unset_callbacks {
    () => {
        fn unset_callbacks(&self) -> Vec<&'static str> {
            let mut out = Vec::new();
            if callable(self.get_schema).is_none() {
                out.push("get_schema");
            }
            if callable(self.get_next).is_none() {
                out.push("get_next");
            }
            if callable(self.get_last_error).is_none() {
                out.push("get_last_error");
            }
            if callable(self.release).is_none() {
                out.push("release");
            }
            out
        }
        fn private_data(&self) -> *mut std::ffi::c_void {
            self.private_data
        }
    };
}

impl ProduceStream for ArrowArrayStream {
    fn produce(p: &Plugin, s: &Scenario, o: &Options, out: &mut Self) -> Result<(), Ended> {
        match o.slice {
            None => p.produce_stream(&s.ipc, out),
            Some((offset, length)) => p.produce_sliced_stream(&s.ipc, offset, length, out),
        }
        .map_err(call_ended)
    }
    fn device_type(&self) -> Option<i32> {
        None
    }
    unset_callbacks!();
}

impl ProduceStream for ArrowDeviceArrayStream {
    fn produce(p: &Plugin, s: &Scenario, o: &Options, out: &mut Self) -> Result<(), Ended> {
        match o.slice {
            None => p.produce_device_stream(&s.ipc, o.device_type, o.device_id, out),
            Some((offset, length)) => p.produce_sliced_device_stream(
                &s.ipc,
                offset,
                length,
                o.device_type,
                o.device_id,
                out,
            ),
        }
        .map_err(call_ended)
    }
    fn device_type(&self) -> Option<i32> {
        Some(self.device_type)
    }
    unset_callbacks!();
}

/// Judges a failed stream call: a positive errno, and a last error that
/// is NULL or UTF-8.
pub(crate) fn stream_failure<S: StreamCalls>(
    stream: &mut S,
    code: i32,
    what: &str,
    obs: &mut Observations,
) -> String {
    // A non-zero return is what makes the call a failure (MUST: "0 on
    // success, a non-zero error code otherwise"); that the code be an
    // errno value is SHOULD: "Such error codes should be interpreted like
    // errno numbers".
    obs.check(crate::rule!("stream.error.errno"), code > 0, what, || {
        format!("{what} failed with {code}; error codes should be errno values (positive)")
    });
    let message = match stream.get_last_error_at() {
        Some(at) if at != 0 => last_error(at, what, obs),
        _ => String::new(),
    };
    format!("{what} returned {code}: {message}")
}

/// Judges the string get_last_error returned at `at`: that it stays put
/// until the next call on the stream (stream.error.lifetime) and, when it
/// does, what it holds (stream.error.message). Returns it, lossily decoded.
fn last_error(at: usize, what: &str, obs: &mut Observations) -> String {
    let Some(first) = probe::c_string_at(at, probe::LAST_ERROR_MAX) else {
        obs.check(crate::rule!("stream.error.message"), false, what, || {
            format!("get_last_error returned {at:#x}, which is not readable memory")
        });
        return String::new();
    };
    // What the consumer's own code does next, short of calling the stream:
    // allocations of every small size, written and still held while the
    // string is read again. A block the producer freed before returning is
    // one of them.
    let held = fill_small_blocks();
    let again = probe::c_string_at(at, probe::LAST_ERROR_MAX);
    drop(held);
    let kept = again.as_ref() == Some(&first);
    obs.check(crate::rule!("stream.error.lifetime"), kept, what, || {
        let now = match &again {
            Some(b) => format!("{:?}", String::from_utf8_lossy(&b[..b.len().min(40)])),
            None => "unreadable memory".into(),
        };
        format!(
            "the string get_last_error returned at {at:#x} became {now} when the harness allocated memory, before any other call on the stream: it lived in a block the producer had already freed"
        )
    });
    if !kept {
        // What was read is freed memory, not the producer's message.
        return "(a string already freed)".into();
    }
    let text = String::from_utf8(first.clone());
    obs.check(
        crate::rule!("stream.error.message"),
        text.is_ok(),
        what,
        || {
            format!(
                "get_last_error returned {} bytes that are not UTF-8",
                first.len()
            )
        },
    );
    String::from_utf8_lossy(&first).into_owned()
}

/// Allocates a block of every malloc size up to 1 KiB (16-byte steps: each
/// of glibc's per-thread cache bins) and fills it: freed memory of those
/// sizes, most recently freed first, is handed out here and overwritten.
fn fill_small_blocks() -> Vec<Vec<u8>> {
    (1..=64).map(|i| vec![0x5A; i * 16 - 8]).collect()
}

/// Replays calls `0..=last` of a stream case on a fresh stream, every call
/// from this thread: true when the last one succeeds. A failure that the
/// replay does not repeat came from the thread the call was made on.
fn replay_on_one_thread<S: ProduceStream + Plain>(
    producer: &Plugin,
    scenario: &Scenario,
    opts: &Options,
    last: usize,
) -> bool
where
    S::Chunk: Chunk + Plain,
{
    let mut stream = Guard::<S>::poisoned();
    if S::produce(producer, scenario, opts, &mut stream).is_err()
        || !stream.unset_callbacks().is_empty()
    {
        stream.mark_released();
        return false;
    }
    for _ in 0..2 {
        let mut schema = Guard::<ArrowSchema>::poisoned();
        if stream.get_schema(&mut schema) != Call::Returned(0) {
            schema.mark_released();
        }
    }
    let mut ok = false;
    for _ in 0..=last {
        let mut out = Guard::<S::Chunk>::poisoned();
        ok = stream.get_next(&mut out) == Call::Returned(0);
        if !ok {
            out.mark_released();
            break;
        }
    }
    ok
}

/// Stream and device stream paths: the stream as produced, its schema, its
/// chunks until end of stream, the chunks after the stream's release, and
/// the stream's memory over repeated lives.
pub(super) fn stream_case<S: ProduceStream + Plain>(
    producer: &Plugin,
    scenario: &Scenario,
    opts: &Options,
    obs: &mut Observations,
) -> Ended
where
    S::Chunk: Chunk + Plain,
{
    let mut stream = match produced_stream::<S>(producer, scenario, opts, obs) {
        Ok(stream) => stream,
        Err(ended) => return ended,
    };
    let mut schema = match stream_schema(&mut stream, obs) {
        Ok(schema) => schema,
        Err(ended) => return ended,
    };
    let read = read_chunks(producer, scenario, opts, &mut stream, &schema, obs);
    if read.eos {
        get_next_after_eos(&mut stream, obs);
    }
    let complete = read.eos || read.chunks.len() == scenario.batches.len();
    let judge_values = matches!(read.ended, Ended::Ran);
    results_outlive_stream(
        scenario,
        opts,
        stream,
        &schema,
        read.chunks,
        complete,
        judge_values,
        obs,
    );
    release_checked(
        &mut schema,
        crate::rule!("schema.release.marks-released"),
        "schema",
        obs,
    );
    if read.chunks_ok && matches!(read.ended, Ended::Ran) {
        stream_frees::<S>(producer, scenario, opts, obs);
    }
    read.ended
}

/// The produce step: the stream comes back with its callbacks set, nothing
/// in it points into the structure itself, and it is the device type asked
/// for. The stream is returned at a new address (the old one poisoned).
fn produced_stream<S: ProduceStream + Plain>(
    producer: &Plugin,
    scenario: &Scenario,
    opts: &Options,
    obs: &mut Observations,
) -> Result<Guard<S>, Ended>
where
    S::Chunk: Chunk + Plain,
{
    let mut stream = Guard::<S>::poisoned();
    S::produce(producer, scenario, opts, &mut stream)?;
    let unset = stream.unset_callbacks();
    obs.check(
        crate::rule!("stream.release.set"),
        unset.is_empty(),
        "stream",
        || {
            format!(
                "the produced stream's {} {} NULL or never written (all four are mandatory)",
                unset.join(", "),
                if unset.len() == 1 { "is" } else { "are" }
            )
        },
    );
    if stream.is_released() {
        return Err(Ended::Ran);
    }
    // "The release callback MUST not assume that the structure will be
    // located at the same memory location": nothing may point into it.
    let start = (&*stream as *const S).addr();
    let private = stream.private_data().addr();
    let inside = crate::abi::outslot::inside(start, std::mem::size_of::<S>(), private);
    if !not_self_referencing(
        inside
            .map(|d| format!("private_data points {d} bytes into the stream structure itself, which may be moved"))
            .into_iter()
            .collect(),
        crate::rule!("stream.release.relocatable"),
        "stream",
        obs,
    ) {
        // At any other address it reads poisoned memory: not safe to use.
        stream.mark_released();
        return Err(Ended::Ran);
    }
    // Every call after this one is made on the stream at a new address.
    let stream = relocate_poisoning(&mut stream);
    if let Some(dt) = stream.device_type() {
        obs.check(
            crate::rule!("device.stream.type"),
            dt == opts.device_type,
            "stream",
            || {
                format!(
                    "device stream device_type is {dt}, asked for {}",
                    opts.device_type
                )
            },
        );
    }
    Ok(stream)
}

/// The schema step (`stream.schema.get`): get_schema succeeds with a valid
/// schema, and can be called again. Returns the first schema when it is
/// valid; otherwise the stream is released and the case ends.
fn stream_schema<S: ProduceStream + Plain>(
    stream: &mut Guard<S>,
    obs: &mut Observations,
) -> Result<Guard<ArrowSchema>, Ended>
where
    S::Chunk: Chunk + Plain,
{
    let mut schema = Guard::<ArrowSchema>::poisoned();
    match stream.get_schema(&mut schema) {
        Call::Returned(0) => {}
        Call::Returned(code) => {
            // A call may fail ("a non-zero error code otherwise"): like a
            // failing get_next, the case ends in an error, not a rule.
            let why = stream_failure(&mut **stream, code, "get_schema", obs);
            schema.mark_released();
            return Err(Ended::Error(why));
        }
        Call::NotSet => {
            obs.check(crate::rule!("stream.schema.get"), false, "stream", || {
                "get_schema is NULL".into()
            });
            schema.mark_released();
            stream.mark_released();
            return Err(Ended::Ran);
        }
    }
    obs.check(
        crate::rule!("stream.schema.get"),
        true,
        "get_schema",
        String::new,
    );
    let found = probe::check_schema(&schema);
    let schema_ok = !crate::inspect::any_must(&found);
    obs.validated(&schema_rules(), found, "schema");
    let mut again = Guard::<ArrowSchema>::poisoned();
    let second = stream.get_schema(&mut again);
    obs.check(
        crate::rule!("stream.schema.repeat"),
        second == Call::Returned(0),
        "get_schema",
        || {
            let why = match second {
                Call::Returned(code) => format!("returned {code}"),
                Call::NotSet => "is not callable".into(),
            };
            format!("a second get_schema {why}; the schema can be queried more than once")
        },
    );
    if second != Call::Returned(0) {
        again.mark_released();
        if !schema_ok {
            schema.mark_released();
            release_checked(
                stream,
                crate::rule!("stream.release.marks-released"),
                "stream",
                obs,
            );
            return Err(Ended::Ran);
        }
        return Ok(schema);
    }
    let found = probe::check_schema(&again);
    let again_ok = !crate::inspect::any_must(&found);
    obs.validated(&schema_rules(), found, "second schema");
    if !schema_ok {
        // Not safe to follow: leave both (a leak beats a crash).
        schema.mark_released();
        if again_ok {
            release_checked(
                &mut again,
                crate::rule!("schema.release.marks-released"),
                "schema",
                obs,
            );
        } else {
            again.mark_released();
        }
        release_checked(
            stream,
            crate::rule!("stream.release.marks-released"),
            "stream",
            obs,
        );
        return Err(Ended::Ran);
    }
    if !again_ok {
        // The stream goes on with the first, valid, copy.
        again.mark_released();
        return Ok(schema);
    }
    // "The data returned by the get_schema and get_next callbacks must be
    // released independently": release the first copy, then read the
    // second, which must hold what it held before (the stream goes on with
    // it).
    let before = probe::read_schema(&again);
    release_checked(
        &mut schema,
        crate::rule!("schema.release.marks-released"),
        "schema",
        obs,
    );
    let found = probe::check_schema(&again);
    let mut problems: Vec<String> = found
        .iter()
        .filter(|v| crate::inspect::any_must(std::slice::from_ref(v)))
        .map(|v| v.to_string())
        .take(3)
        .collect();
    if problems.is_empty() {
        if let (Ok(before), Ok(after)) = (&before, probe::read_schema(&again)) {
            problems.extend(compare::schemas(before, &after).into_iter().take(3));
        }
    }
    obs.check(crate::rule!("stream.schema.independent"), problems.is_empty(), "second schema", || {
        format!(
            "after the first get_schema result was released, the second no longer holds what it did: {}",
            problems.join("; ")
        )
    });
    if !problems.is_empty() {
        // What the first copy's release left behind may be freed memory.
        again.mark_released();
        release_checked(
            stream,
            crate::rule!("stream.release.marks-released"),
            "stream",
            obs,
        );
        return Err(Ended::Ran);
    }
    Ok(again)
}

/// What the chunks step read.
struct ChunksRead<C: Owned> {
    /// The valid chunks, each moved to a new address.
    chunks: Vec<Guard<C>>,
    /// How the case ends so far (an error from get_next, a device copy that
    /// failed).
    ended: Ended,
    /// False when a chunk did not validate or could not be copied.
    chunks_ok: bool,
    /// True when the stream signalled end of stream.
    eos: bool,
}

/// What one successful get_next gave.
enum ChunkRead<C: Owned> {
    /// A valid chunk, kept.
    Kept(Guard<C>),
    /// The chunk belongs to another schema: reading stops.
    OtherSchema,
    /// The chunk did not validate or could not be copied: reading stops.
    Invalid(Ended),
}

/// The chunks step: get_next until end of stream, odd calls from another
/// thread (`stream.threads.serial`), each chunk judged on its own.
fn read_chunks<S: ProduceStream + Plain>(
    producer: &Plugin,
    scenario: &Scenario,
    opts: &Options,
    stream: &mut Guard<S>,
    schema: &Guard<ArrowSchema>,
    obs: &mut Observations,
) -> ChunksRead<S::Chunk>
where
    S::Chunk: Chunk + Plain,
{
    let expect = scenario.batches.len();
    let mut read = ChunksRead {
        chunks: Vec::new(),
        ended: Ended::Ran,
        chunks_ok: true,
        eos: false,
    };
    for call in 0..expect + 8 {
        let mut out = Guard::<S::Chunk>::poisoned();
        let r = if call % 2 == 1 {
            obs.checked.insert(crate::rule!("stream.threads.serial"));
            probe::get_next_on_thread(&mut **stream, &mut out)
        } else {
            stream.get_next(&mut out)
        };
        match r {
            Call::Returned(0) if out.is_released() => {
                obs.check(
                    crate::rule!("stream.eos.released"),
                    true,
                    "get_next",
                    String::new,
                );
                read.eos = true;
                break;
            }
            Call::Returned(0) => {
                match chunk_read(stream.device_type(), schema, out, opts, call, obs) {
                    ChunkRead::Kept(chunk) => read.chunks.push(chunk),
                    ChunkRead::OtherSchema => break,
                    ChunkRead::Invalid(ended) => {
                        read.ended = ended;
                        read.chunks_ok = false;
                        break;
                    }
                }
            }
            Call::Returned(code) => {
                out.mark_released();
                let why = stream_failure(&mut **stream, code, "get_next", obs);
                if call % 2 == 1 && replay_on_one_thread::<S>(producer, scenario, opts, call) {
                    obs.check(
                        crate::rule!("stream.threads.serial"),
                        false,
                        &format!("chunk {call}"),
                        || {
                            format!(
                                "get_next call {call}, made from another thread than the stream's \
                             creator, failed ({why}); on a fresh stream the same calls made from \
                             one thread succeed"
                            )
                        },
                    );
                    break;
                }
                if read.chunks.len() == expect {
                    obs.check(
                        crate::rule!("stream.eos.released"),
                        false,
                        "get_next",
                        || {
                            format!(
                                "after the last of {expect} batches, end of stream was signalled \
                             by an error instead of 0 and a released array ({why})"
                            )
                        },
                    );
                } else {
                    read.ended = Ended::Error(why);
                }
                break;
            }
            Call::NotSet => {
                out.mark_released();
                obs.check(crate::rule!("stream.release.set"), false, "stream", || {
                    "get_next is NULL".into()
                });
                break;
            }
        }
    }
    read
}

/// Judges one chunk a get_next returned: its device members, its columns
/// against the schema, its layout; a device chunk is replaced by its host
/// copy. A valid chunk comes back at a new address.
fn chunk_read<C: Chunk + Plain>(
    stream_device_type: Option<i32>,
    schema: &ArrowSchema,
    mut out: Guard<C>,
    opts: &Options,
    call: usize,
    obs: &mut Observations,
) -> ChunkRead<C> {
    let at = format!("chunk {call}");
    if let (Some(a), Some(dt)) = (out.device(), stream_device_type) {
        device_members(a, opts, DeviceId::Any, &at, obs);
        let cdt = a.device_type;
        // MUST: "accessible from a device type matching the
        // ArrowDeviceArrayStream.device_type"; SHOULD: "should have the
        // same device type as is set here".
        obs.check(
            crate::rule!("stream.chunk.device"),
            device::accessible_from(cdt, dt),
            &at,
            || {
                format!(
                    "chunk device_type {cdt} ({}): its buffers are not accessible from the stream's device_type {dt} ({})",
                    device::name(cdt).unwrap_or("unknown"),
                    device::name(dt).unwrap_or("unknown")
                )
            },
        );
        obs.check(
            crate::rule!("stream.chunk.device-type"),
            cdt == dt,
            &at,
            || format!("chunk device_type {cdt}, stream device_type {dt}"),
        );
    }
    if opts.kind != DeviceKind::Cpu {
        // Device buffers: judged and copied to the host now; the producer's
        // chunk is released here and the copy takes its place.
        if let Err(e) = chunk_to_host(schema, &mut out, opts, &at, obs) {
            return ChunkRead::Invalid(e);
        }
    }
    // A record batch with another number of columns than the schema has is
    // a chunk of another schema; its layout cannot be judged against this
    // one.
    let (columns, fields) = (out.array().n_children, schema.n_children);
    obs.check(crate::rule!("stream.chunk.schema"), columns == fields, &at, || {
        format!(
            "the chunk is a struct array of {columns} column(s) but the stream's schema has {fields} field(s)"
        )
    });
    if columns != fields {
        out.mark_released();
        return ChunkRead::OtherSchema;
    }
    let found = probe::check_array(schema, out.array());
    // Only a MUST finding stops the stream: a SHOULD one (a misaligned
    // buffer) leaves the values and the rest to judge.
    let ok = !crate::inspect::any_must(&found);
    obs.validated(&array_rules(), found, &at);
    if !ok {
        out.mark_released();
        return ChunkRead::Invalid(Ended::Ran);
    }
    ChunkRead::Kept(relocate_poisoning(&mut out))
}

/// Informational (`stream.eos.repeat`): get_next after end of stream.
fn get_next_after_eos<S: ProduceStream + Plain>(stream: &mut Guard<S>, obs: &mut Observations)
where
    S::Chunk: Chunk + Plain,
{
    let mut out = Guard::<S::Chunk>::poisoned();
    let r = stream.get_next(&mut out);
    let ok = r == Call::Returned(0) && out.is_released();
    if !out.is_released() && r == Call::Returned(0) {
        // A chunk after the end: keep it from being released blindly.
        out.release();
    } else if !out.is_released() {
        out.mark_released();
    }
    obs.check(crate::rule!("stream.eos.repeat"), ok, "get_next", || {
        format!("get_next after end of stream returned {r:?} without a released array")
    });
}

/// The outlive step: every chunk is read into arrow-rs (zero-copy) and
/// deep-copied while the stream is alive; then the stream is released and
/// the zero-copy view compared with the copy: "the produced arrays and
/// schema remain valid after the stream is released"
/// (`stream.results.outlive`). The values are judged from the copy.
#[allow(clippy::too_many_arguments)]
fn results_outlive_stream<S: ProduceStream + Plain>(
    scenario: &Scenario,
    opts: &Options,
    mut stream: Guard<S>,
    schema: &Guard<ArrowSchema>,
    mut chunks: Vec<Guard<S::Chunk>>,
    complete: bool,
    judge_values: bool,
    obs: &mut Observations,
) where
    S::Chunk: Chunk + Plain,
{
    let mut imported = Vec::new();
    for (i, c) in chunks.iter_mut().enumerate() {
        let mut array = Guard::new(crate::abi::ops::take(c.array()));
        c.mark_released();
        let read = if not_utf8(obs) {
            Err("names, metadata or utf8 values not UTF-8".to_string())
        } else {
            probe::import_batch(schema, &mut array).map_err(|e| e.to_string())
        };
        match read {
            Ok(b) => imported.push(b),
            Err(e) => unreadable(&format!("chunk {i}"), &e, obs),
        }
    }
    // A chunk arrow-rs could not read is already reported (unreadable:
    // not exercised when names or metadata are not UTF-8, else a failure);
    // the values of the others alone are not the stream's.
    let all_read = imported.len() == chunks.len();
    let judge = complete && opts.kind == DeviceKind::Cpu;
    // The values are judged now, and the chunks' bytes kept (a copy of
    // each buffer: cheaper than a deep copy through arrow-rs and a logical
    // comparison, and stricter), to be compared after the stream's release.
    // Off the CPU the chunks are the host copies made as they were read
    // (chunk_to_host): their values are judged too (a slice of the stream
    // is its values), their bytes are the harness's, not compared again.
    if complete && judge_values && all_read && (judge || opts.slice.is_some()) {
        values(scenario, &scenario.batches, &imported, "stream", obs);
    }
    let kept: Vec<Vec<Vec<u8>>> = if judge {
        imported.iter().map(super::buffer_bytes).collect()
    } else {
        Vec::new()
    };
    release_checked(
        &mut stream,
        crate::rule!("stream.release.marks-released"),
        "stream",
        obs,
    );
    if !judge {
        return;
    }
    let changed: Vec<String> = imported
        .iter()
        .zip(&kept)
        .enumerate()
        .filter_map(|(chunk, (batch, was))| {
            let now = super::buffer_bytes(batch);
            was.iter().zip(&now).enumerate().find_map(|(i, (was, is))| {
                let at = was.iter().zip(is.iter()).position(|(a, b)| a != b)?;
                Some(format!(
                    "chunk {chunk}, buffer {i} (in tree order), byte {at}: was {:#04x}, now {:#04x}",
                    was[at], is[at]
                ))
            })
        })
        .collect();
    obs.check(
        crate::rule!("stream.results.outlive"),
        changed.is_empty(),
        "stream",
        || {
            format!(
                "chunks changed after the stream was released: {}",
                changed
                    .iter()
                    .take(3)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join("; ")
            )
        },
    );
}

/// The memory step (`stream.release.frees`): whole streams, and streams
/// released after one chunk, each repeated.
fn stream_frees<S: ProduceStream + Plain>(
    producer: &Plugin,
    scenario: &Scenario,
    opts: &Options,
    obs: &mut Observations,
) where
    S::Chunk: Chunk + Plain,
{
    for (sequence, drain) in [
        ("create, drain and release of the stream", true),
        ("create, one get_next and release of the stream", false),
    ] {
        frees(
            producer,
            opts.kind,
            crate::certify::leaks::measured(&scenario.name, opts.all_leaks),
            crate::rule!("stream.release.frees"),
            "stream",
            sequence,
            obs,
            || stream_once::<S>(producer, scenario, opts, drain),
        );
    }
}

/// One stream life for leak accounting: produce, get_schema, get_next until
/// end of stream (`drain`) or once, release the stream, then what it gave.
/// Everything made here is released before it returns.
fn stream_once<S: ProduceStream + Plain>(
    producer: &Plugin,
    scenario: &Scenario,
    opts: &Options,
    drain: bool,
) -> Result<(), String>
where
    S::Chunk: Chunk + Plain,
{
    let mut stream = Guard::<S>::poisoned();
    S::produce(producer, scenario, opts, &mut stream).map_err(ended_text)?;
    if stream.is_released() {
        return Err("the stream was produced released".into());
    }
    let mut stream = stream.relocate();
    let mut schema = Guard::<ArrowSchema>::poisoned();
    let r = stream.get_schema(&mut schema);
    if r != Call::Returned(0) || crate::inspect::any_must(&probe::check_schema(&schema)) {
        schema.mark_released();
        release_quietly(&mut stream);
        return Err(format!("get_schema returned {r:?} or an invalid schema"));
    }
    let mut kept: Option<Guard<S::Chunk>> = None;
    for _ in 0..scenario.batches.len() + 8 {
        let mut out = Guard::<S::Chunk>::poisoned();
        match stream.get_next(&mut out) {
            Call::Returned(0) if out.is_released() => break,
            Call::Returned(0) => {
                // Device buffers are not read here (the case itself judged
                // them); releasing them is what counts.
                if opts.kind == DeviceKind::Cpu
                    && crate::inspect::any_must(&probe::check_array(&schema, out.array()))
                {
                    out.mark_released();
                    schema.mark_released();
                    release_quietly(&mut stream);
                    return Err("a repeated chunk did not validate".into());
                }
                if !drain {
                    // Released after the stream: results outlive it.
                    kept = Some(out);
                    break;
                }
                release_quietly(&mut out);
            }
            // A failure ends the stream as far as leaks go.
            _ => {
                out.mark_released();
                break;
            }
        }
    }
    release_quietly(&mut stream);
    if let Some(mut chunk) = kept {
        release_quietly(&mut chunk);
    }
    release_quietly(&mut schema);
    Ok(())
}

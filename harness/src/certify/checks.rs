//! The steps of a producer certification case, path by path, and the rule
//! each step decides (the catalogue's `observation` text says the same in
//! words; `arrowcert explain ID`).

use arrow_array::RecordBatch;

use super::{call_ended, leaks, CaseSpec, Ended, Observations, Options, Path};
use crate::abi::ops::{Guard, Owned};
use crate::abi::{
    device, ArrowArray, ArrowArrayStream, ArrowDeviceArray, ArrowDeviceArrayStream, ArrowSchema,
};
use crate::compare;
use crate::device::Kind as DeviceKind;
use crate::inspect::probe::{self, walk};
use crate::inspect::validate::rule;
use crate::plugin::{CallError, Plugin};
use crate::roundtrip::{call_range, requested};
use crate::scenario::Scenario;

mod stream;
use stream::stream_case;
pub(crate) use stream::stream_failure;

/// The rules a schema validation decides.
pub(crate) fn schema_rules() -> Vec<&'static str> {
    rule::ALL
        .iter()
        .copied()
        .filter(|r| r.starts_with("schema."))
        .collect()
}

/// The rules an array validation decides.
pub(crate) fn array_rules() -> Vec<&'static str> {
    rule::ALL
        .iter()
        .copied()
        .filter(|r| r.starts_with("array."))
        .collect()
}

/// Moves a structure to a new address and overwrites the old bytes with
/// poison: a structure that points into itself reads poison after a move,
/// as "Moving an array" (CDataInterface.rst) permits any consumer to do.
pub(crate) fn relocate_poisoning<T: Owned>(g: &mut Guard<T>) -> Guard<T> {
    let moved = g.relocate();
    **g = T::poisoned();
    g.mark_released();
    moved
}

/// Releases a live structure and checks that its callback marked it
/// released ("The release callback MUST mark the structure as released",
/// by setting `release` to NULL). If it did not, the harness marks it, so
/// the callback is never called twice. Returns whether the callback ran.
pub(crate) fn release_checked<T: Owned>(
    g: &mut Guard<T>,
    rule: &'static str,
    at: &str,
    obs: &mut Observations,
) -> bool {
    if g.is_released() {
        return false;
    }
    g.release();
    let marked = g.is_released();
    obs.check(rule, marked, at, || {
        "release returned but left the release member non-NULL".into()
    });
    if !marked {
        g.mark_released();
    }
    true
}

/// Releases `g` (validated) with its live descendants watched, and judges
/// the walk: each must have been released exactly once, through its own
/// callback (`*.release.walks-children`). A descendant moved out before is
/// not the parent's (see [`walk`]).
fn release_walked<T: Owned>(
    g: &mut Guard<T>,
    watch: impl FnOnce(&mut T) -> walk::ReleaseWatch,
    marks: &'static str,
    walks: &'static str,
    at: &str,
    obs: &mut Observations,
) {
    if g.is_released() {
        return;
    }
    let watch = watch(&mut **g);
    let called = release_checked(g, marks, at, obs);
    let released = watch.finish();
    if !called || released.is_empty() {
        // Nothing to walk (no live children or dictionary): not exercised.
        return;
    }
    let wrong: Vec<&walk::Released> = released.iter().filter(|r| r.calls != 1).collect();
    obs.check(walks, wrong.is_empty(), at, || {
        let mut listed = wrong
            .iter()
            .take(5)
            .map(|r| format!("{}: {} calls", r.at, r.calls))
            .collect::<Vec<_>>()
            .join(", ");
        if wrong.len() > 5 {
            listed.push_str(&format!(" and {} more", wrong.len() - 5));
        }
        format!(
            "the release of {at} must call the release callback of each of its {} live \
             children and dictionaries exactly once; it made {listed}",
            released.len()
        )
    });
}

/// Runs `body` (an export and its release) repeatedly and judges the bytes
/// held across it ([`leaks`]): `rule` fails only when every measured
/// repetition grew. Without a way to count bytes, `rule` is not exercised.
#[allow(clippy::too_many_arguments)]
fn frees(
    producer: &Plugin,
    device: DeviceKind,
    measured: bool,
    rule: &'static str,
    at: &str,
    sequence: &str,
    obs: &mut Observations,
    body: impl FnMut() -> Result<(), String>,
) {
    if !measured {
        obs.not_exercised(rule, leaks::NOT_MEASURED);
        return;
    }
    let counters = leaks::counters_on(producer, device);
    if counters.is_empty() {
        obs.not_exercised(rule, leaks::NO_COUNTER);
        obs.not_exercised(crate::rule!("array.release.cache"), leaks::NO_COUNTER);
        return;
    }
    match leaks::measure(&counters, body) {
        Ok(m) => {
            obs.check(rule, !m.leaks(), at, || m.evidence(sequence));
            cache_info(&m, crate::rule!("array.release.cache"), at, sequence, obs);
        }
        Err(why) => obs.not_exercised(
            rule,
            format!("the repeated {sequence} did not complete: {why}"),
        ),
    }
}

/// `rule` (INFO: `array.release.cache` for producers,
/// `consumer.async.release-cache` for consumers): a suspected leak the long
/// rounds showed to be a bounded cache, with its size; exercised wherever
/// bytes were measured.
pub(crate) fn cache_info(
    m: &leaks::Measurement,
    rule: &'static str,
    at: &str,
    sequence: &str,
    obs: &mut Observations,
) {
    let info = m.cache_evidence(sequence);
    obs.check(rule, info.is_none(), at, || info.unwrap_or_default());
}

/// Releases a structure made inside a leak repetition: through its
/// callback, and marked released if the callback did not (so that nothing
/// is released twice).
fn release_quietly<T: Owned>(g: &mut Guard<T>) {
    if !g.is_released() {
        g.release();
        if !g.is_released() {
            g.mark_released();
        }
    }
}

fn ended_text(e: Ended) -> String {
    match e {
        Ended::Ran => "ran".into(),
        Ended::Skip(why) | Ended::Error(why) | Ended::Limitation(why) => why,
    }
}

/// The bytes of every buffer of an imported batch, in tree order (each
/// column's validity, buffers, then children): arrow-rs's zero-copy import
/// keeps the producer's memory, so these are the bytes the producer
/// exported.
fn buffer_bytes(batch: &RecordBatch) -> Vec<Vec<u8>> {
    fn walk(data: &arrow_data::ArrayData, out: &mut Vec<Vec<u8>>) {
        if let Some(nulls) = data.nulls() {
            out.push(nulls.buffer().as_slice().to_vec());
        }
        for b in data.buffers() {
            out.push(b.as_slice().to_vec());
        }
        for c in data.child_data() {
            walk(c, out);
        }
    }
    let mut out = Vec::new();
    for column in batch.columns() {
        walk(&column.to_data(), &mut out);
    }
    out
}

/// An export that passed every MUST check but that arrow-rs, which reads
/// the values for the harness, cannot import. When the export also carries
/// names or metadata that are not UTF-8 (reported under
/// schema.name.utf8 / schema.metadata.utf8, which the spec does not make
/// MUST), arrow-rs's refusal is of those bytes: the values cannot be read,
/// and are not judged. Otherwise the export is not the data asked for.
fn unreadable(at: &str, why: &str, obs: &mut Observations) {
    if not_utf8(obs) {
        obs.not_exercised(
            crate::rule!("array.values.roundtrip"),
            format!("arrow-rs, which reads the values, cannot import names, metadata or utf8 values that are not UTF-8 ({why})"),
        );
    } else {
        obs.check(crate::rule!("array.values.roundtrip"), false, at, || {
            format!("arrow-rs cannot import the validated export: {why}")
        });
    }
}

/// True when this case saw a name, metadata or utf8 value that is not
/// UTF-8 (what arrow-rs cannot read: inspect::UNREADABLE_BY_ARROW_RS).
fn not_utf8(obs: &Observations) -> bool {
    obs.violations
        .iter()
        .any(|v| crate::inspect::UNREADABLE_BY_ARROW_RS.contains(&v.rule))
}

/// How what was read compares with what was asked for, in the tiers every
/// path uses: `None` when equal; otherwise the rule and its evidence.
/// Values right in types of the producer's own (every field nullable,
/// strings as views) are `array.values.types` (INFO); values wrong are
/// `array.values.roundtrip`, the value differences first, then the type
/// changes.
pub(crate) fn value_tiers(
    scenario: &Scenario,
    expect: &[RecordBatch],
    read: &[RecordBatch],
) -> Option<(&'static str, String)> {
    let schema = read
        .first()
        .map(|b| b.schema())
        .unwrap_or_else(|| scenario.schema.clone());
    let mut diffs = compare::schemas(&scenario.schema, &schema);
    diffs.extend(compare::batches(expect, read));
    if diffs.is_empty() {
        return None;
    }
    let logical = compare::logical::streams(&scenario.schema, expect, &schema, read);
    let rule = if logical.is_empty() {
        crate::rule!("array.values.types")
    } else {
        crate::rule!("array.values.roundtrip")
    };
    let shown = logical
        .iter()
        .chain(&diffs)
        .take(5)
        .cloned()
        .collect::<Vec<_>>()
        .join("; ");
    Some((rule, shown))
}

/// Compares what was read with what was asked for (array.values.roundtrip).
pub(crate) fn values(
    scenario: &Scenario,
    expect: &[RecordBatch],
    read: &[RecordBatch],
    at: &str,
    obs: &mut Observations,
) {
    match value_tiers(scenario, expect, read) {
        None => {
            obs.check(crate::rule!("array.values.types"), true, at, String::new);
            obs.check(
                crate::rule!("array.values.roundtrip"),
                true,
                at,
                String::new,
            );
        }
        Some((r, shown)) if r == crate::rule!("array.values.types") => {
            obs.check(crate::rule!("array.values.types"), false, at, || shown);
            obs.check(
                crate::rule!("array.values.roundtrip"),
                true,
                at,
                String::new,
            );
        }
        Some((rule, shown)) => obs.check(rule, false, at, || shown),
    }
}

/// Runs the steps of `spec`'s path.
pub fn run(
    producer: &Plugin,
    scenario: &Scenario,
    spec: &CaseSpec,
    opts: &Options,
    obs: &mut Observations,
) -> Ended {
    match spec.path {
        Path::Schema => schema_case(producer, scenario, opts, obs),
        Path::Array | Path::DeviceArray => array_case(producer, scenario, spec, opts, obs),
        Path::Stream => stream_case::<ArrowArrayStream>(producer, scenario, opts, obs),
        Path::DeviceStream => stream_case::<ArrowDeviceArrayStream>(producer, scenario, opts, obs),
        Path::Consumer(_) | Path::AsyncConsumer(_) | Path::Async(_) => {
            Ended::Error("not a synchronous producer case".into())
        }
    }
}

/// Produces and validates the schema; `None` (with the case's end) when
/// the call failed.
fn produced_schema(
    producer: &Plugin,
    scenario: &Scenario,
    obs: &mut Observations,
) -> Result<(Guard<ArrowSchema>, bool), Ended> {
    let mut schema = Guard::<ArrowSchema>::poisoned();
    producer
        .produce_schema(&scenario.ipc, &mut schema)
        .map_err(call_ended)?;
    let found = probe::check_schema(&schema);
    let ok = !crate::inspect::any_must(&found);
    obs.validated(&schema_rules(), found, "schema");
    Ok((relocate_poisoning(&mut schema), ok))
}

/// Schema path: validation, relocation, moving a child out, release with
/// the children's releases watched, then repeated export-and-release for
/// leaks.
fn schema_case(
    producer: &Plugin,
    scenario: &Scenario,
    opts: &Options,
    obs: &mut Observations,
) -> Ended {
    let (mut schema, ok) = match produced_schema(producer, scenario, obs) {
        Ok(s) => s,
        Err(e) => return e,
    };
    if !ok {
        // Nothing more is safe to follow.
        schema.mark_released();
        return Ended::Ran;
    }
    // schema.move.child: "It is possible to move a child array, but the
    // parent array MUST be released immediately afterwards" -- and the
    // moved child must stay valid and be released by its own callback.
    let child = probe::take_child_schema(&mut schema, 0);
    release_walked(
        &mut schema,
        |s| walk::watch_schema(s, "schema"),
        crate::rule!("schema.release.marks-released"),
        crate::rule!("schema.release.walks-children"),
        "schema",
        obs,
    );
    if let Some(mut child) = child {
        let found = probe::check_schema(&child);
        let intact = !crate::inspect::any_must(&found);
        obs.check(
            crate::rule!("schema.move.child"),
            intact,
            "schema.children[0]",
            || {
                format!(
                    "after the parent's release the moved child no longer validates: {}",
                    found
                        .iter()
                        .map(|v| v.to_string())
                        .take(3)
                        .collect::<Vec<_>>()
                        .join("; ")
                )
            },
        );
        if intact {
            release_walked(
                &mut child,
                |s| walk::watch_schema(s, "schema.children[0]"),
                crate::rule!("schema.release.marks-released"),
                crate::rule!("schema.release.walks-children"),
                "schema.children[0]",
                obs,
            );
        } else {
            // What the parent's release left behind may be freed memory:
            // releasing it again could crash; a leak is the lesser harm.
            child.mark_released();
        }
    }
    frees(
        producer,
        DeviceKind::Cpu,
        leaks::measured(&scenario.name, opts.all_leaks),
        crate::rule!("schema.release.frees"),
        "schema",
        "export and release of the schema",
        obs,
        || {
            let mut s = Guard::<ArrowSchema>::poisoned();
            producer
                .produce_schema(&scenario.ipc, &mut s)
                .map_err(|e| e.to_string())?;
            if crate::inspect::any_must(&probe::check_schema(&s)) {
                s.mark_released();
                return Err("a repeated export did not validate".into());
            }
            let mut moved = s.relocate();
            release_quietly(&mut moved);
            Ok(())
        },
    );
    Ended::Ran
}

/// Checks, before a structure is first moved, that none of its pointer
/// members points into the structure itself (`rule`: *.release.relocatable).
fn not_self_referencing(
    problems: Vec<String>,
    rule: &'static str,
    at: &str,
    obs: &mut Observations,
) -> bool {
    let ok = problems.is_empty();
    obs.check(rule, ok, at, || problems.join("; "));
    ok
}

/// Which device id a device array must carry: the one asked for (a single
/// array), or any (a stream chunk or an async array: chunks "should all be
/// providing data on the same device type (but not necessarily the same
/// device id)").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DeviceId {
    Requested,
    Any,
}

/// Checks the device members of a freshly exported device array.
pub(crate) fn device_members(
    a: &ArrowDeviceArray,
    opts: &Options,
    id_rule: DeviceId,
    at: &str,
    obs: &mut Observations,
) {
    let (dt, id, sync, reserved) = probe::device_fields(a);
    obs.check(
        crate::rule!("device.reserved.zero"),
        reserved == [0; 3],
        at,
        || format!("reserved is {reserved:#x?}; it must be zeroed"),
    );
    // INFO: "Backwards-compatible changes are allowed, for example new
    // macro values for ArrowDeviceType": a value the harness does not list
    // may be one added after its list.
    obs.check(crate::rule!("device.type.known"), device::name(dt).is_some(), at, || {
        format!("device_type {dt} is not one of the ArrowDeviceType values this harness knows (the spec allows new ones)")
    });
    obs.check(
        crate::rule!("device.type.requested"),
        dt == opts.device_type
            && (opts.device_type == device::CPU
                || id_rule == DeviceId::Any
                || id == opts.device_id),
        at,
        || {
            format!(
                "asked for device_type {} id {}, got device_type {dt} id {id}",
                opts.device_type, opts.device_id
            )
        },
    );
    if dt == device::CPU {
        obs.check(crate::rule!("device.cpu.id"), id == -1, at, || {
            format!("a CPU array has device_id {id}; it should be -1")
        });
    }
    if matches!(dt, 1 | 9 | 15 | 16) {
        obs.check(crate::rule!("device.event.none"), sync == 0, at, || {
            format!(
                "sync_event is {sync:#x} on a device type with no event type; it should be NULL"
            )
        });
    }
}

/// A device array on a device other than the CPU (moved to `moved`
/// already): the device rules ([`super::device::examine`]), then the
/// release of the producer's structure (checked when `obs` is given), and
/// the host copy to validate and read.
fn on_device(
    schema: &ArrowSchema,
    moved: &mut Guard<ArrowDeviceArray>,
    opts: &Options,
    at: &str,
    obs: Option<&mut Observations>,
) -> Result<Guard<ArrowArray>, Ended> {
    let dev = match crate::device::backend(opts.kind) {
        Ok(d) => d,
        Err(why) => {
            release_quietly(moved);
            return Err(Ended::Skip(why));
        }
    };
    let mut scratch = Observations::default();
    let record = obs.is_some();
    let obs = obs.unwrap_or(&mut scratch);
    let examined = super::device::examine(&*dev, opts.kind, opts.device_id, schema, moved, at, obs);
    if record {
        release_walked(
            moved,
            |a| walk::watch_array(&mut a.array, at),
            crate::rule!("array.release.marks-released"),
            crate::rule!("array.release.walks-children"),
            at,
            obs,
        );
    } else {
        release_quietly(moved);
    }
    match examined {
        super::device::Examined::Copied(mut r) => Ok(Guard::new(super::device::take_array(&mut r))),
        super::device::Examined::Unreadable(why) => Err(Ended::Error(why)),
    }
}

/// The schema a library exports with a batch's array, where the plugin
/// hands it over (`arrowcert_produce_array_schema`: the schema half of
/// `__arrow_c_array__`'s pair). The array path otherwise reads the batch
/// with the library's schema export, so an array export that drops the
/// schema-level metadata, or changes a field, would go unseen. "The
/// ArrowSchema structure describes the type and metadata of an exported
/// array or record batch": it is validated like any schema, then compared
/// with the schema asked for (names, types, nullability, field and
/// schema-level metadata) as the stream paths compare get_schema's, under
/// array.values.types (INFO: the values are read, and judged, with the
/// schema export). Metadata arrow-rs cannot read (not UTF-8, which the
/// spec allows) is not compared, with the reason.
fn array_schema(producer: &Plugin, scenario: &Scenario, spec: &CaseSpec, obs: &mut Observations) {
    const AT: &str = "array's schema";
    if !producer.has("arrowcert_produce_array_schema") {
        return;
    }
    let (batch, offset, length) = call_range(spec.batch, spec.slice);
    let mut schema = Guard::<ArrowSchema>::poisoned();
    if let Err(e) = producer.produce_array_schema(&scenario.ipc, batch, offset, length, &mut schema)
    {
        obs.not_exercised(
            crate::rule!("array.values.types"),
            format!("the schema exported with the array could not be had: {e}"),
        );
        return;
    }
    let found = probe::check_schema(&schema);
    let ok = !crate::inspect::any_must(&found);
    obs.validated(&schema_rules(), found, AT);
    let mut schema = relocate_poisoning(&mut schema);
    if !ok {
        // Not safe to follow or release.
        schema.mark_released();
        return;
    }
    match probe::read_schema(&schema) {
        Ok(read) => {
            let diffs = compare::schemas(&scenario.schema, &read);
            obs.check(crate::rule!("array.values.types"), diffs.is_empty(), AT, || {
                format!(
                    "the schema exported with the array differs from the one asked for: {}",
                    diffs.iter().take(5).cloned().collect::<Vec<_>>().join("; ")
                )
            });
        }
        Err(why) => obs.not_exercised(
            crate::rule!("array.values.types"),
            format!("arrow-rs cannot read the schema exported with the array, so it is not compared ({why})"),
        ),
    }
    release_checked(
        &mut schema,
        crate::rule!("schema.release.marks-released"),
        AT,
        obs,
    );
}

/// How many exports of one object are made before one is taken apart.
const REPEATS: usize = 3;

/// array.exports.independent: one library object exported [`REPEATS`]
/// times (where the plugin can be asked: `arrowcert_produce_object`); the
/// first export taken apart (column 0 moved out, the export released, then
/// the column), then the others and a fresh export of the same object
/// validated and read. Their own layouts are the array rules' (recorded
/// here too: each is an export like any other).
fn repeated_exports(
    producer: &Plugin,
    scenario: &Scenario,
    spec: &CaseSpec,
    schema: &ArrowSchema,
    obs: &mut Observations,
) {
    const RULE: &str = crate::rule!("array.exports.independent");
    let (batch, offset, length) = call_range(spec.batch, spec.slice);
    let object = match producer.produce_object(&scenario.ipc, batch, offset, length) {
        Ok(o) => o,
        Err(crate::plugin::CallError::Missing(_)) => return,
        Err(e) => {
            obs.not_exercised(RULE, format!("the library object could not be made: {e}"));
            return;
        }
    };
    let expect = requested(scenario, spec.batch, spec.slice);
    // One export, moved to a new address and validated (None, with the
    // rules' findings recorded, when it is not safe to follow).
    // `fresh`: made after the first export's release, validated by
    // `judge` (a layout broken then is this rule's).
    let export = |n: usize,
                  fresh: bool,
                  obs: &mut Observations|
     -> Result<Option<Guard<ArrowArray>>, String> {
        let mut out = Guard::<ArrowArray>::poisoned();
        object.export(&mut out).map_err(|e| e.to_string())?;
        if !probe::array_self_refs(schema, &out).is_empty() {
            // array.release.relocatable is the first export's to judge.
            out.mark_released();
            return Ok(None);
        }
        let out = relocate_poisoning(&mut out);
        if fresh {
            return Ok(Some(out));
        }
        let found = probe::check_array(schema, &out);
        let ok = !crate::inspect::any_must(&found);
        obs.validated(
            &array_rules(),
            found,
            &format!("array (export {n} of one object)"),
        );
        if ok {
            Ok(Some(out))
        } else {
            let mut out = out;
            out.mark_released();
            Ok(None)
        }
    };
    let mut kept = Vec::new();
    for n in 1..=REPEATS {
        match export(n, false, obs) {
            Ok(Some(a)) => kept.push(a),
            Ok(None) => return,
            Err(why) => {
                obs.not_exercised(
                    RULE,
                    format!("export {n} of one library object failed: {why}"),
                );
                return;
            }
        }
    }
    let mut first = kept.remove(0);
    let mut child = probe::take_child_array(&mut first, 0);
    release_quietly(&mut first);
    if let Some(c) = child.as_mut() {
        release_quietly(c);
    }
    // What each later export holds now, judged after the first is gone.
    let judge = |mut a: Guard<ArrowArray>, what: &str, obs: &mut Observations| {
        let found = probe::check_array(schema, &a);
        if crate::inspect::any_must(&found) {
            obs.check(RULE, false, what, || {
                format!(
                    "after another export of the same object was taken apart and released, this one no longer validates: {}",
                    found.iter().map(|v| v.to_string()).take(3).collect::<Vec<_>>().join("; ")
                )
            });
            // It may point to freed memory: not released.
            a.mark_released();
            return;
        }
        if not_utf8(obs) {
            release_quietly(&mut a);
            return;
        }
        match probe::import_batch(schema, &mut a) {
            Ok(read) => {
                let wrong = value_tiers(scenario, &expect, std::slice::from_ref(&read))
                    .filter(|(rule, _)| *rule == crate::rule!("array.values.roundtrip"));
                obs.check(RULE, wrong.is_none(), what, || {
                    format!(
                        "after another export of the same object was taken apart and released, this one reads other values: {}",
                        wrong.map(|(_, shown)| shown).unwrap_or_default()
                    )
                });
            }
            Err(e) => obs.check(RULE, false, what, || {
                format!(
                    "after another export of the same object was taken apart and released, arrow-rs can no longer import this one: {e}"
                )
            }),
        }
    };
    for (i, a) in kept.into_iter().enumerate() {
        judge(a, &format!("array (export {} of one object)", i + 2), obs);
    }
    match export(REPEATS + 1, true, obs) {
        Ok(Some(a)) => judge(
            a,
            &format!("array (export {}, made afterwards)", REPEATS + 1),
            obs,
        ),
        Ok(None) => {}
        Err(why) => obs.check(RULE, false, "array (a fresh export)", || {
            format!(
                "after an export of the object was taken apart and released, a fresh export of it failed: {why}"
            )
        }),
    }
    drop(object);
}

/// What an array case asks the producer for, so that every export of it
/// (the one read, the one taken apart, those counted for bytes) is made
/// the same way.
struct ArrayRequest<'a> {
    producer: &'a Plugin,
    scenario: &'a Scenario,
    spec: &'a CaseSpec,
    opts: &'a Options,
}

impl ArrayRequest<'_> {
    /// One export of the case's array, checked for pointers into itself
    /// before its first move (a move inside a device array is one): the
    /// array, and `false` with it when there are some. Repetitions (`obs`
    /// `None`) record nothing.
    fn produce(
        &self,
        schema: &ArrowSchema,
        obs: Option<&mut Observations>,
    ) -> Result<(Guard<ArrowArray>, bool), Ended> {
        if self.spec.path == Path::DeviceArray {
            return self.produce_device(schema, obs);
        }
        let (batch, offset, length) = call_range(self.spec.batch, self.spec.slice);
        let mut out = Guard::<ArrowArray>::poisoned();
        self.producer
            .produce_array(&self.scenario.ipc, batch, offset, length, &mut out)
            .map_err(call_ended)?;
        let still = self_contained(schema, &out, obs);
        Ok((out, still))
    }

    /// [`ArrayRequest::produce`] on the device array path: the device
    /// members are judged, and off the CPU the device rules are judged on
    /// the way to a host copy, which is what is returned.
    fn produce_device(
        &self,
        schema: &ArrowSchema,
        mut obs: Option<&mut Observations>,
    ) -> Result<(Guard<ArrowArray>, bool), Ended> {
        let (batch, offset, length) = call_range(self.spec.batch, self.spec.slice);
        let mut out = Guard::<ArrowDeviceArray>::poisoned();
        self.producer
            .produce_device_array(
                &self.scenario.ipc,
                batch,
                offset,
                length,
                self.opts.device_type,
                self.opts.device_id,
                &mut out,
            )
            .map_err(call_ended)?;
        if let Some(obs) = obs.as_deref_mut() {
            device_members(&out, self.opts, DeviceId::Requested, "device array", obs);
        }
        let still = self_contained(schema, &out.array, obs.as_deref_mut());
        if self.opts.kind != DeviceKind::Cpu && still {
            // Buffers the host may not read: judge the device rules,
            // and go on with a host copy.
            let mut moved = relocate_poisoning(&mut out);
            let copied = on_device(schema, &mut moved, self.opts, "device array", obs);
            return copied.map(|a| (a, true));
        }
        let array = crate::abi::ops::take(&mut out.array);
        Ok((Guard::new(array), still))
    }
}

/// Whether an export holds no pointer into itself, so that a copy of it at
/// another address may be read and released (array.release.relocatable,
/// judged when `obs` is given).
fn self_contained(
    schema: &ArrowSchema,
    array: &ArrowArray,
    obs: Option<&mut Observations>,
) -> bool {
    let refs = probe::array_self_refs(schema, array);
    match obs {
        Some(obs) => not_self_referencing(
            refs,
            crate::rule!("array.release.relocatable"),
            "array",
            obs,
        ),
        None => refs.is_empty(),
    }
}

/// Array and device array paths.
fn array_case(
    producer: &Plugin,
    scenario: &Scenario,
    spec: &CaseSpec,
    opts: &Options,
    obs: &mut Observations,
) -> Ended {
    let entry = if spec.path == Path::DeviceArray {
        "arrowcert_produce_device_array"
    } else {
        "arrowcert_produce_array"
    };
    if !producer.may_produce(entry) {
        // Skipped as the call would be, without the schema export first
        // (a library's schema export can cost a query).
        return call_ended(CallError::Missing(entry));
    }
    let req = ArrayRequest {
        producer,
        scenario,
        spec,
        opts,
    };
    let (mut schema, schema_ok) = match produced_schema(producer, scenario, obs) {
        Ok(s) => s,
        Err(e) => return e,
    };
    // One export to read values from, one to take apart (and, once per
    // scenario, more to count bytes held across).
    let (mut first, still) = match req.produce(&schema, Some(obs)) {
        Ok(a) => a,
        Err(e) => return e,
    };
    if !still {
        // Its copy at any other address points into freed or poisoned
        // memory: nothing is safe to read or release.
        first.mark_released();
        schema.mark_released();
        return Ended::Ran;
    }
    let mut first = relocate_poisoning(&mut first);
    if !schema_ok {
        first.mark_released();
        schema.mark_released();
        return Ended::Ran;
    }
    let found = probe::check_array(&schema, &first);
    let array_ok = !crate::inspect::any_must(&found);
    obs.validated(&array_rules(), found, "array");
    if !array_ok {
        // Not safe to import or take apart; leave it (a leak beats a crash).
        first.mark_released();
        return Ended::Ran;
    }
    let kept = read_first(&req, &schema, &mut first, obs);
    if spec.path == Path::Array && spec.slice.is_none() {
        array_schema(producer, scenario, spec, obs);
    }
    if opts.kind != DeviceKind::Cpu {
        device_rest(&req, &mut schema, obs);
        return Ended::Ran;
    }
    if let Err(e) = take_apart_second(&req, &mut schema, kept, obs) {
        return e;
    }
    if spec.path == Path::Array && spec.batch == Some(0) && spec.slice.is_none() {
        repeated_exports(producer, scenario, spec, &schema, obs);
    }
    // array.release.frees: once per scenario and path (the whole first
    // batch), not per slice.
    if spec.batch == Some(0) && spec.slice.is_none() {
        array_frees(&req, &schema, obs);
    }
    release_checked(
        &mut schema,
        crate::rule!("schema.release.marks-released"),
        "schema",
        obs,
    );
    Ended::Ran
}

/// Imports the validated first export and judges its values against the
/// scenario's (array.values.*). On the CPU it returns the imported batch
/// with a copy of its bytes: the batch stays imported (zero-copy: its
/// buffers are the producer's memory) until the producer has made its
/// second export, so a producer that writes into buffers it already
/// handed out shows as a difference (array.buffers.immutable).
fn read_first(
    req: &ArrayRequest,
    schema: &ArrowSchema,
    first: &mut Guard<ArrowArray>,
    obs: &mut Observations,
) -> Option<(Vec<Vec<u8>>, RecordBatch)> {
    // arrow-rs panics on a name that is not UTF-8 and refuses such
    // metadata: those exports are not read (their values not judged).
    let imported = if not_utf8(obs) {
        Err("names, metadata or utf8 values not UTF-8".to_string())
    } else {
        probe::import_batch(schema, first).map_err(|e| e.to_string())
    };
    match imported {
        Ok(read) => {
            values(
                req.scenario,
                &requested(req.scenario, req.spec.batch, req.spec.slice),
                std::slice::from_ref(&read),
                "array",
                obs,
            );
            if req.opts.kind == DeviceKind::Cpu {
                return Some((buffer_bytes(&read), read));
            }
            None
        }
        Err(e) => {
            unreadable("array", &e, obs);
            None
        }
    }
}

/// The end of a case off the CPU. What remains judges the host copy's
/// tree, not the producer's: the take-apart steps are the CPU cases' (the
/// same code exports both in every producer the harness knows of); the
/// device memory the export held is counted here, once per scenario.
fn device_rest(req: &ArrayRequest, schema: &mut Guard<ArrowSchema>, obs: &mut Observations) {
    if req.spec.batch == Some(0) && req.spec.slice.is_none() {
        frees(
            req.producer,
            req.opts.kind,
            leaks::measured(&req.scenario.name, req.opts.all_leaks),
            crate::rule!("array.release.frees"),
            "device array",
            "export and release of the batch on the device",
            obs,
            || {
                let (mut a, _) = req.produce(schema, None).map_err(ended_text)?;
                release_quietly(&mut a);
                Ok(())
            },
        );
    }
    release_checked(
        schema,
        crate::rule!("schema.release.marks-released"),
        "schema",
        obs,
    );
}

/// Takes the second export apart: moves child 0 out, releases the parent
/// at its new address, then uses and releases the child; then compares the
/// first export's bytes (`kept`) with what they were. `Err` ends the case
/// with that outcome (an export that points into itself or does not
/// validate is left alone).
fn take_apart_second(
    req: &ArrayRequest,
    schema: &mut Guard<ArrowSchema>,
    mut kept: Option<(Vec<Vec<u8>>, RecordBatch)>,
    obs: &mut Observations,
) -> Result<(), Ended> {
    let (mut second, still) = req.produce(schema, Some(obs))?;
    if !still {
        second.mark_released();
        schema.mark_released();
        return Err(Ended::Ran);
    }
    let mut second = relocate_poisoning(&mut second);
    // Validated like the first before anything in it is followed.
    let found = probe::check_array(schema, &second);
    if crate::inspect::any_must(&found) {
        obs.validated(&array_rules(), found, "array (second export)");
        second.mark_released();
        return Err(Ended::Ran);
    }
    let child = probe::take_child_array(&mut second, 0);
    // What the moved column holds before the parent goes: a deep copy (the
    // values themselves were judged on the first export).
    let child_schema = probe::child_schema(schema, 0);
    let before = match (&child, child_schema) {
        (Some(c), Some(cs)) => probe::read_array(cs, c)
            .ok()
            .map(|a| probe::deep_copy_array(&a)),
        _ => None,
    };
    release_walked(
        &mut second,
        |a| walk::watch_array(a, "array"),
        crate::rule!("array.release.marks-released"),
        crate::rule!("array.release.walks-children"),
        "array",
        obs,
    );
    if let Some(child) = child {
        moved_child(child, child_schema, before, obs);
    }
    if let Some((copy, first)) = kept.take() {
        buffers_unchanged(&copy, &first, obs);
    }
    Ok(())
}

/// array.release.frees on the CPU: the bytes the producer holds across
/// repeated exports and releases of the whole first batch, each export
/// checked (self-references, validation) before it is released.
fn array_frees(req: &ArrayRequest, schema: &ArrowSchema, obs: &mut Observations) {
    frees(
        req.producer,
        req.opts.kind,
        leaks::measured(&req.scenario.name, req.opts.all_leaks),
        crate::rule!("array.release.frees"),
        "array",
        "export and release of the batch",
        obs,
        || {
            let (mut a, still) = req.produce(schema, None).map_err(ended_text)?;
            if !still {
                a.mark_released();
                return Err("a repeated export points into itself".into());
            }
            let mut moved = a.relocate();
            if crate::inspect::any_must(&probe::check_array(schema, &moved)) {
                moved.mark_released();
                return Err("a repeated export did not validate".into());
            }
            release_quietly(&mut moved);
            Ok(())
        },
    );
}

/// `array.move.child`: the child moved out of an export (`child`, of
/// `child_schema`) still holds what it held (`before`) once the parent was
/// released; then it is released itself, if intact.
fn moved_child(
    mut child: Guard<ArrowArray>,
    child_schema: Option<&ArrowSchema>,
    before: Option<arrow_array::ArrayRef>,
    obs: &mut Observations,
) {
    let mut intact = true;
    if let Some(child_schema) = child_schema {
        let found = probe::check_array(child_schema, &child);
        // MUST findings only: a SHOULD one (alignment) is no broken move.
        let must = crate::inspect::any_must(&found);
        let mut problems: Vec<String> = found
            .iter()
            .filter(|v| must && crate::inspect::any_must(std::slice::from_ref(v)))
            .map(|v| v.to_string())
            .take(3)
            .collect();
        if let (false, Some(before)) = (must, before) {
            match probe::read_array(child_schema, &child) {
                Ok(after) => {
                    compare::column("column 0", &before, &after, &mut problems);
                    problems.truncate(3);
                }
                Err(e) => problems.push(format!("arrow-rs can no longer read it: {e}")),
            }
        }
        intact = problems.is_empty();
        obs.check(crate::rule!("array.move.child"), intact, "array.children[0]", || {
            format!(
                "after the parent's release the moved child no longer holds what it held before: {}",
                problems.join("; ")
            )
        });
    }
    if intact {
        release_walked(
            &mut child,
            |a| walk::watch_array(a, "array.children[0]"),
            crate::rule!("array.release.marks-released"),
            crate::rule!("array.release.walks-children"),
            "array.children[0]",
            obs,
        );
    } else {
        // What the parent's release left behind may be freed memory.
        child.mark_released();
    }
}

/// `array.buffers.immutable`: the first export (`first`, whose bytes were
/// `copy`) still holds what it held after the producer's second export.
fn buffers_unchanged(copy: &[Vec<u8>], first: &RecordBatch, obs: &mut Observations) {
    // "Both the producer and the consumer SHOULD consider the exported
    // data ... to be immutable": after a second export (taken apart and
    // released), the first still holds what it held.
    let now = buffer_bytes(first);
    let changed = copy
        .iter()
        .zip(&now)
        .enumerate()
        .find_map(|(i, (was, is))| {
            let at = was.iter().zip(is.iter()).position(|(a, b)| a != b)?;
            Some(format!(
                "buffer {i} of the export (in tree order), byte {at}: was {:#04x}, now {:#04x}",
                was[at], is[at]
            ))
        });
    obs.check(
        crate::rule!("array.buffers.immutable"),
        changed.is_none(),
        "array",
        || {
            format!(
                "the first export's bytes changed while the producer made a second export: {}",
                changed.clone().unwrap_or_default()
            )
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{ArrayRef, BooleanArray, Int8Array};
    use arrow_schema::{DataType, Field, Schema};
    use std::sync::Arc;

    fn bools() -> Scenario {
        let schema = Arc::new(Schema::new(vec![Field::new("b", DataType::Boolean, true)]));
        let a: ArrayRef = Arc::new(BooleanArray::from(vec![Some(true), None, Some(false)]));
        let batch = RecordBatch::try_new(schema.clone(), vec![a]).unwrap();
        Scenario::from_batches("bools", schema, vec![batch]).unwrap()
    }

    fn bool8(values: Vec<Option<i8>>) -> RecordBatch {
        let field = Field::new("b", DataType::Int8, true).with_metadata([(
            crate::generate::types::EXTENSION_NAME.to_string(),
            "arrow.bool8".to_string(),
        )]);
        let schema = Arc::new(Schema::new(vec![field]));
        let a: ArrayRef = Arc::new(Int8Array::from(values));
        RecordBatch::try_new(schema, vec![a]).unwrap()
    }

    /// A bool column exported as the canonical extension type arrow.bool8
    /// (a library setting): the values are right in a type of the
    /// producer's own, a flavour at INFO, never array.values.roundtrip.
    #[test]
    fn bool_exported_as_bool8_is_a_flavour() {
        let s = bools();
        let read = bool8(vec![Some(1), None, Some(0)]);
        let (rule, shown) = value_tiers(&s, &s.batches, &[read]).expect("types differ");
        assert_eq!(rule, crate::rule!("array.values.types"), "{shown}");
        assert!(
            shown.contains("arrow.bool8") || shown.contains("Int8"),
            "{shown}"
        );
        // Wrong values under the same type still fail the MUST.
        let wrong = bool8(vec![Some(0), None, Some(0)]);
        let (rule, shown) = value_tiers(&s, &s.batches, &[wrong]).expect("values differ");
        assert_eq!(rule, crate::rule!("array.values.roundtrip"), "{shown}");
    }
}

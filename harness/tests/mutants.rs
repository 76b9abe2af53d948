//! Every mutant producer breaks exactly its rule: certification reports
//! that rule (and only rules that follow from it), while the same wrapper
//! with no mutation, and the reference producer, pass everything. The
//! table of mutant -> rule verdicts is generated into docs/MUTANTS.md.
//!
//! Mutants of the `*.release.frees` rules run in worker processes, where
//! the allocation tracker is preloaded; the others run in-process.

mod support;

use std::path::PathBuf;
use std::process::Command;

use arrowcert::report::{Report, Verdict};
use support::*;

fn mutant_lib() -> PathBuf {
    let src = workspace_dir().join("producers/mutants/mutant_producer.c");
    let lib = scratch("mutants").join("libarrowcert_mutant_producer.so");
    cc(&["-shared", "-fPIC", "-ldl"], &src, &lib);
    lib
}

/// One mutant: its name (`ARROWCERT_MUTANT`), the rule it breaks, the case
/// filters that exercise it, the bug it models, and the rules that cannot
/// hold when it does, with why.
struct Mutant {
    name: &'static str,
    rule: &'static str,
    filters: &'static [&'static str],
    models: &'static str,
    follows: &'static [&'static str],
    why_follows: &'static str,
}

const fn m(
    name: &'static str,
    rule: &'static str,
    filters: &'static [&'static str],
    models: &'static str,
) -> Mutant {
    Mutant {
        name,
        rule,
        filters,
        models,
        follows: &[],
        why_follows: "",
    }
}

const MUTANTS: &[Mutant] = &[
    // -- schema --------------------------------------------------------------
    m(
        "child-format-null",
        "schema.format.non-null",
        &["/primitive"],
        "a field whose type the exporter could not map gets a NULL format instead of an error",
    ),
    m(
        "decimal256-without-bit-width",
        "schema.format.valid",
        &["/temporal_decimal"],
        "a decimal256 exported without its \",256\" (`d:40,5`, a 128-bit decimal of precision 40)",
    ),
    m(
        "list-without-child-type",
        "schema.children.count",
        &["/nested"],
        "a list type exported without its item field (n_children 0)",
    ),
    Mutant {
        name: "map-key-nullable",
        rule: "schema.map.non-nullable",
        filters: &["/nested"],
        models: "map keys marked nullable, as builders with nullable-by-default fields do",
        follows: &["array.values.types"],
        why_follows: "the exported type's nullability then differs from the type asked for (INFO)",
    },
    m(
        "map-entries-one-child",
        "schema.map.entries",
        &["/nested"],
        "a map whose entries struct is declared with the key only (one child)",
    ),
    Mutant {
        name: "ree-run-ends-nullable",
        rule: "schema.ree.run-ends-flag",
        filters: &["/run_end_encoded"],
        models: "the run ends field of a run-end encoded type marked nullable",
        follows: &["array.values.types"],
        why_follows: "the exported type's nullability then differs from the type asked for (INFO)",
    },
    m(
        "dictionary-value-format",
        "schema.dictionary.shape",
        &["/dictionary"],
        "a dictionary-encoded field given its value type's format (`u`) instead of its index type's",
    ),
    m(
        "all-columns-nullable",
        "array.values.types",
        &["/primitive"],
        "every column marked nullable, the values untouched (a library whose columns all are)",
    ),
    m(
        "array-schema-metadata-dropped",
        "array.values.types",
        &["/metadata"],
        "the schema exported with a batch's array (the schema half of `__arrow_c_array__`'s pair) lacks the schema-level metadata the schema export keeps: a batch exporter that forgets the table's metadata",
    ),
    m(
        "exports-share-buffers",
        "array.exports.independent",
        &["/primitive"],
        "every export of one library object reads its first column from the first export's memory, which that export's release recycles (a cache of converted buffers owned by the first export made)",
    ),
    m(
        "keys-sorted-on-non-map",
        "schema.flags.placement",
        &["/primitive"],
        "ARROW_FLAG_MAP_KEYS_SORTED set on a field that is not a map",
    ),
    m(
        "unknown-flag-bits",
        "schema.flags.known",
        &["/primitive"],
        "a flag bit the spec does not define (8) set on a field (INFO: a later spec may define it)",
    ),
    m(
        "metadata-negative-length",
        "schema.metadata.encoding",
        &["/metadata"],
        "metadata whose first key length is negative: the blob cannot be read",
    ),
    m(
        "ree-run-ends-unsigned",
        "schema.ree.run-ends",
        &["/run_end_encoded"],
        "run ends typed uint32 (`I`), which the run-end encoded type does not allow",
    ),
    m(
        "union-null-count",
        "array.union.null-count",
        &["/union"],
        "a union column exported with null_count 1, though a union has no validity bitmap",
    ),
    m(
        "metadata-cut-mid-character",
        "schema.metadata.utf8",
        &["/metadata"],
        "a metadata value cut to a byte limit in the middle of a multi-byte character (lengths consistent)",
    ),
    m(
        "name-latin1",
        "schema.name.utf8",
        &["/primitive"],
        "a field name passed through in Latin-1 (`caf\\xe9`)",
    ),
    m(
        "schema-child-release-null",
        "schema.release.set",
        &["/primitive"],
        "a child schema built field by field that never got its release callback",
    ),
    m(
        "schema-points-into-itself",
        "schema.release.relocatable",
        &["/primitive"],
        "private_data set to the structure itself, the release finding its state through it",
    ),
    m(
        "schema-arena-owned-by-root",
        "schema.move.child",
        &["/primitive"],
        "children's format and name strings in one arena that the root's release recycles",
    ),
    // -- array ---------------------------------------------------------------
    m(
        "release-keeps-pointer",
        "array.release.marks-released",
        &["/primitive/"],
        "release frees everything but leaves the release member set",
    ),
    m(
        "schema-release-keeps-pointer",
        "schema.release.marks-released",
        &["/primitive"],
        "the same for a schema",
    ),
    m(
        "array-child-release-null",
        "array.release.set",
        &["/primitive/"],
        "a child array built field by field that never got its release callback",
    ),
    m(
        "buffers-inside-struct",
        "array.release.relocatable",
        &["/primitive/"],
        "a struct array's one (NULL) buffer pointer kept inside the structure, in its unused dictionary member, to save an allocation",
    ),
    m(
        "array-arena-owned-by-root",
        "array.move.child",
        &["/primitive/"],
        "column buffers in one arena that the root's release recycles, so a moved-out column loses its data",
    ),
    m(
        "list-without-child-array",
        "array.layout.n-children",
        &["/nested/"],
        "a list array exported without its child array",
    ),
    m(
        "union-with-validity",
        "array.layout.n-buffers",
        &["/union/"],
        "a union exported with a validity buffer (pre-1.0 layout)",
    ),
    m(
        "null-array-with-validity",
        "array.layout.n-buffers",
        &["/temporal_decimal/"],
        "a null-type array exported with one (NULL) validity buffer",
    ),
    m(
        "null-data-buffer",
        "array.layout.null-buffer",
        &["/binary/"],
        "a string column's data buffer left NULL although its offsets reach past 0",
    ),
    m(
        "column-one-short",
        "array.layout.lengths",
        &["/primitive/"],
        "a record batch whose first column without nulls is one row short",
    ),
    m(
        "values-buffer-one-short",
        "array.layout.lengths",
        &["/primitive/"],
        "an int64 column's values buffer one value short of offset + length, at the end of a mapping (found in process: the harness probes a buffer's ends before reading it)",
    ),
    m(
        "null-count-off-by-one",
        "array.null-count",
        &["/primitive/"],
        "null_count one more than the zero bits of the bitmap",
    ),
    m(
        "misaligned-values",
        "array.buffers.aligned",
        &["/primitive/"],
        "values copied to an odd address (an int16 buffer one byte off)",
    ),
    m(
        "offsets-as-lengths",
        "array.offsets.valid",
        &["/binary/"],
        "per-slot lengths written where cumulative offsets belong",
    ),
    m(
        "union-child-indices",
        "array.union.type-ids",
        &["/union/"],
        "a union's type ids buffer holding child positions (0, 1) instead of the declared type ids (3, 7)",
    ),
    m(
        "zero-length-run",
        "array.ree.run-ends",
        &["/run_end_encoded/"],
        "a run of length zero: a run end repeated",
    ),
    m(
        "ree-logical-null-count",
        "array.ree.null-count",
        &["/run_end_encoded/"],
        "the values child's null count copied to the run-end encoded parent",
    ),
    m(
        "view-without-sizes",
        "array.view.sizes",
        &["/binary/"],
        "a string view array exported with Columnar's buffers only, without the C interface's variadic sizes buffer",
    ),
    Mutant {
        name: "view-prefix-zeroed",
        rule: "array.view.prefix",
        filters: &["/binary/"],
        models: "an out-of-line string view whose prefix was never filled in (left zero)",
        follows: &["array.values.types"],
        why_follows: "arrow-rs, which reads the values, compares views by their inline bytes too, so equal strings read back as a difference of representation (INFO)",
    },
    Mutant {
        name: "view-inline-garbage",
        rule: "array.view.inline-padding",
        filters: &["/binary/"],
        models: "an inline string view copied as a fixed 12 bytes of its source, the bytes after the value not zeroed",
        follows: &["array.values.types"],
        why_follows: "arrow-rs, which reads the values, compares views by their inline bytes too, so equal strings read back as a difference of representation (INFO)",
    },
    m(
        "dictionary-left-out",
        "array.dictionary.present",
        &["/dictionary/"],
        "the dictionary left out of the array because it was \"already sent\" (IPC thinking)",
    ),
    m(
        "index-past-dictionary",
        "array.dictionary.indices",
        &["/dictionary/"],
        "an index into a larger, global dictionary than the one exported",
    ),
    m(
        "metadata-empty-not-null",
        "schema.metadata.null-if-omitted",
        &["/primitive"],
        "an exporter that always writes the metadata encoding, a zero pair count when a field has none",
    ),
    m(
        "reused-output-buffer",
        "array.buffers.immutable",
        &["/primitive/", "/temporal_decimal/"],
        "an exporter that reuses one output buffer, overwriting the previous export's values while it is still held",
    ),
    m(
        "schema-copies-share-names",
        "stream.schema.independent",
        &["producer/stream/primitive"],
        "get_schema results that share strings: a second copy whose field name is the first copy's, freed with it",
    ),
    m(
        "utf8-not-utf8",
        "array.utf8.valid",
        &["/binary/"],
        "a string value whose first byte is 0xFF (bytes passed through from a Latin-1 source)",
    ),
    Mutant {
        name: "decimal-beyond-precision",
        rule: "array.decimal.precision",
        filters: &["/temporal_decimal/"],
        models: "a decimal value with one digit more than the declared precision",
        follows: &["array.values.roundtrip"],
        why_follows: "the mutation changes a value the scenario holds, so the value read back is not the one asked for",
    },
    Mutant {
        name: "date64-partial-day",
        rule: "array.date64.days",
        filters: &["/temporal_decimal/"],
        models: "a date64 value one millisecond past midnight (a timestamp stored as a date)",
        follows: &["array.values.roundtrip"],
        why_follows: "the mutation changes a value the scenario holds, so the value read back is not the one asked for",
    },
    Mutant {
        name: "time-past-midnight",
        rule: "array.time.range",
        filters: &["/temporal_decimal/"],
        models: "a time32 value of 24:00:00.000, the end of the day written as 86400000 ms",
        follows: &["array.values.roundtrip"],
        why_follows: "the mutation changes a value the scenario holds, so the value read back is not the one asked for",
    },
    m(
        "dense-union-offsets-swapped",
        "array.union.offsets-ordered",
        &["/union/"],
        "two offsets into one dense union child swapped (values gathered out of order)",
    ),
    Mutant {
        name: "map-null-key",
        rule: "array.map.keys-non-null",
        filters: &["/nested/"],
        models: "a map entry whose key is null",
        follows: &["array.values.roundtrip"],
        why_follows: "the mutation changes a value the scenario holds, so the value read back is not the one asked for",
    },
    m(
        "empty-offsets-null",
        "array.layout.null-buffer",
        &["/binary/batch:2"],
        "an empty string column whose offsets buffer is left NULL (no values, so no buffer allocated)",
    ),
    m(
        "slice-offset-ignored",
        "array.values.roundtrip",
        &["/primitive/"],
        "a sliced column exported with offset 0",
    ),
    m(
        "sliced-stream-from-start",
        "array.values.roundtrip",
        &["stream/primitive/slice:", "stream/nested/slice:"],
        "a slice of a stream taken from its start whatever the offset (rows [0, length), the whole stream for \"to the end\"): a slice taken as head(length)",
    ),
    // -- device --------------------------------------------------------------
    m(
        "reserved-left",
        "device.reserved.zero",
        &["device_array/primitive/"],
        "reserved[] left as the caller's memory held it",
    ),
    Mutant {
        name: "undefined-device-type",
        rule: "device.type.known",
        filters: &["device_array/primitive/"],
        models: "a device type the spec does not define (6)",
        follows: &["device.type.requested"],
        why_follows: "an undefined device type can never be the (defined) one asked for",
    },
    m(
        "wrong-device-type",
        "device.type.requested",
        &["device_array/primitive/"],
        "CUDA_HOST where CPU was asked for",
    ),
    m(
        "cpu-device-id-0",
        "device.cpu.id",
        &["device_array/primitive/"],
        "CPU arrays with device_id 0",
    ),
    m(
        "sync-event-on-cpu",
        "device.event.none",
        &["device_array/primitive/"],
        "a non-NULL sync_event on a CPU array",
    ),
    Mutant {
        name: "stream-device-type",
        rule: "device.stream.type",
        filters: &["producer/device_stream/primitive"],
        models: "a CPU device stream that says it is CUDA_HOST",
        follows: &["stream.chunk.device", "stream.chunk.device-type"],
        why_follows: "every chunk (CPU, as asked) then differs from the stream's device type, and pageable host memory is not what a CUDA_HOST stream's device reads",
    },
    // -- stream --------------------------------------------------------------
    Mutant {
        name: "get-schema-null",
        rule: "stream.schema.get",
        filters: &["producer/stream/primitive"],
        models: "a stream whose get_schema callback is NULL (Mandatory)",
        follows: &["stream.release.set"],
        why_follows: "a live stream has all four callbacks set, which stream.release.set checks on every member",
    },
    m(
        "schema-taken-once",
        "stream.schema.repeat",
        &["producer/stream/primitive"],
        "the schema moved out by the first get_schema; the second fails",
    ),
    m(
        "chunk-drops-a-column",
        "stream.chunk.schema",
        &["producer/stream/primitive"],
        "batches projected (one column fewer) while the stream's schema is not",
    ),
    Mutant {
        name: "chunk-on-other-device",
        rule: "stream.chunk.device",
        filters: &["producer/device_stream/primitive"],
        models: "device stream chunks that say CUDA while the stream says CPU",
        follows: &["device.type.requested", "stream.chunk.device-type"],
        why_follows: "the stream's device type is the one asked for, so a chunk on another device is neither on the one asked for nor of the stream's device type",
    },
    Mutant {
        name: "chunk-on-pinned-host",
        rule: "stream.chunk.device-type",
        filters: &["producer/device_stream/primitive"],
        models: "device stream chunks that say CUDA_HOST (host memory, accessible from the CPU) while the stream says CPU",
        follows: &["device.type.requested"],
        why_follows: "a chunk that says CUDA_HOST is not on the CPU asked for",
    },
    m(
        "eos-as-error",
        "stream.eos.released",
        &["producer/stream/primitive"],
        "end of stream signalled by ENODATA",
    ),
    m(
        "error-after-end",
        "stream.eos.repeat",
        &["producer/stream/primitive"],
        "get_next after the end of stream fails (EINVAL) instead of ending again",
    ),
    m(
        "negative-error-code",
        "stream.error.errno",
        &["producer/stream/primitive"],
        "get_next fails with -1",
    ),
    m(
        "last-error-garbage",
        "stream.error.message",
        &["producer/stream/primitive"],
        "a failing get_next whose get_last_error is not UTF-8",
    ),
    m(
        "late-writer",
        "array.out.untouched",
        &["producer/array/primitive"],
        "an export finished by a thread that writes into the structure the call filled after the call returned (when the consumer releases the array)",
    ),
    m(
        "last-error-dangling",
        "stream.error.lifetime",
        &["producer/stream/primitive"],
        "a failing get_next whose get_last_error returns a temporary string it has already freed (a std::string's c_str())",
    ),
    m(
        "chunks-borrow-stream-buffers",
        "stream.results.outlive",
        &["producer/stream/primitive"],
        "chunks whose buffers the stream owns and recycles when it is released",
    ),
    m(
        "no-get-last-error",
        "stream.release.set",
        &["producer/stream/primitive"],
        "get_last_error left NULL, as if it were optional",
    ),
    m(
        "stream-release-keeps-pointer",
        "stream.release.marks-released",
        &["producer/stream/primitive"],
        "the stream's release leaves the release member set",
    ),
    m(
        "stream-points-into-itself",
        "stream.release.relocatable",
        &["producer/stream/primitive"],
        "private_data set to the stream structure itself, the callbacks finding their state through it",
    ),
    m(
        "thread-bound-stream",
        "stream.threads.serial",
        &["producer/stream/primitive"],
        "get_next that works only on the thread that created the stream (EPERM elsewhere)",
    ),
    // -- leaks and release walks (the leak rules run in workers) -------------
    m(
        "leak-one-child",
        "array.release.frees",
        &["/primitive/"],
        "a column's release walks its children but frees nothing of its own: every export leaks it",
    ),
    m(
        "schema-leak",
        "schema.release.frees",
        &["/primitive"],
        "the schema's release frees the base's allocations but not the record the export added",
    ),
    m(
        "stream-leak",
        "stream.release.frees",
        &["producer/stream/primitive"],
        "the stream's release releases what it wraps but never frees its own state",
    ),
    Mutant {
        name: "small-leak",
        rule: "array.release.frees",
        filters: &["/primitive"],
        models: "every export entry point keeps 8 bytes it never frees (a leak of a few bytes per call)",
        follows: &["schema.release.frees", "stream.release.frees"],
        why_follows: "the 8 bytes are kept by every export entry point, so every export's leak rule sees them",
    },
    m(
        "periodic-cache",
        "array.release.cache",
        &["/primitive"],
        "every export keeps a 96-byte entry in a cache emptied every 64 exports: no leak, so no frees rule fails, and the cache is reported (INFO) with its size",
    ),
    m(
        "release-skips-children",
        "array.release.walks-children",
        &["/primitive/"],
        "the parent frees its children with the callbacks it saw at export time, not their current release members",
    ),
    m(
        "schema-release-skips-children",
        "schema.release.walks-children",
        &["/primitive"],
        "the same for a schema's children",
    ),
    m(
        "release-frees-children-twice",
        "array.release.walks-children",
        &["/primitive/"],
        "the parent's release calls each child's release twice (the children tolerate it)",
    ),
];

/// Producer-side rules with no mutant here, and why.
const NO_MUTANT: &[(&str, &str)] = &[
    (
        "device.event.type",
        "CUDA only: a CPU producer has no event type",
    ),
    (
        "device.event.covers-data",
        "CUDA only: needs a device backend to observe unsynchronized writes",
    ),
    (
        "device.buffers.memory-kind",
        "CUDA only: needs pointer attributes from a device backend (the CUDA mutant managed-buffers, scripts/gpu-mutants.sh)",
    ),
    (
        "device.buffers.accessible",
        "off the CPU only: tests/device_mutants.rs (host-buffers on the emulated device) and the CUDA mutant host-buffers",
    ),
    (
        "device.buffers.in-allocation",
        "CUDA only: needs a device backend's allocation table",
    ),
    (
        "device.struct.host",
        "CUDA only: needs pointer attributes to tell device memory from host memory",
    ),
    (
        "device.move",
        "not yet observed on its own: a moved device array is checked through the array rules",
    ),
];

/// Leak verdicts need the allocation tracker, which only worker processes
/// have.
fn needs_workers(rule: &str) -> bool {
    rule.ends_with(".release.frees") || rule == "array.release.cache"
}

fn certify(mutant: &str, filters: &[&str], workers: bool) -> (Option<i32>, Report, String) {
    let (reference, _) = bundled();
    support::mutants::certify_mutant(
        "producer",
        mutant_lib_cached(),
        reference,
        mutant,
        filters,
        workers,
    )
}

fn mutant_lib_cached() -> &'static PathBuf {
    static LIB: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    LIB.get_or_init(mutant_lib)
}

use support::mutants::failing;

#[test]
fn the_wrapper_without_a_mutation_passes_everything() {
    for workers in [false, true] {
        let (code, r, out) = certify("none", &[], workers);
        assert_eq!(code, Some(0), "{out}");
        assert!(failing(&r).is_empty(), "{:?}", failing(&r));
        assert_eq!(r.summary.failed, 0);
    }
}

fn mutations_in_source() -> Vec<String> {
    support::mutants::mutations_in("producers/mutants/mutant_producer.c")
}

#[test]
fn every_mutation_is_tested_and_every_producer_rule_has_a_mutant_or_a_reason() {
    let tested: Vec<&str> = MUTANTS.iter().map(|m| m.name).collect();
    for name in mutations_in_source() {
        assert!(
            name == "none" || tested.contains(&name.as_str()),
            "mutation {name} has no test"
        );
    }
    for m in MUTANTS {
        assert!(
            arrowcert::rules::find(m.rule).is_some(),
            "{}: {} is not a rule",
            m.name,
            m.rule
        );
        assert_eq!(m.follows.is_empty(), m.why_follows.is_empty(), "{}", m.name);
    }
    for r in arrowcert::rules::RULES {
        if matches!(r.side, arrowcert::rules::Side::Consumer)
            || matches!(r.area, "async" | "consumer")
        {
            continue;
        }
        let covered = MUTANTS.iter().any(|m| m.rule == r.id);
        let excused = NO_MUTANT.iter().any(|(id, _)| *id == r.id);
        assert!(
            covered != excused,
            "{}: {}",
            r.id,
            if covered {
                "has a mutant and a reason for having none"
            } else {
                "has no mutant and no reason"
            }
        );
    }
}

#[test]
fn every_mutant_breaks_exactly_its_rule() {
    let mut table = String::from(
        "# Mutants\n\nGenerated by `harness/tests/mutants.rs` (`ARROWCERT_BLESS=1 cargo test -p arrowcert --test mutants` rewrites it).\nEach mutant is the reference producer with one rule broken (`producers/mutants/mutant_producer.c`, chosen with `ARROWCERT_MUTANT`), modelled on a way real producers got the C interfaces wrong. The test certifies each one on the cases its filters select and checks that its rule fails, that no other rule fails except those listed as following from it, and that the exit code is 1 when a MUST rule fails (its own or one that follows from it), 3 (not certified) when the rule shows only on calls that fail (the path then reads no data), and 0 otherwise. Leak mutants run in worker processes, where the allocation tracker is preloaded; the others in-process.\n\n| mutant | rule it breaks | level | run | verdict | failing cases | other rules reported | the bug it models |\n|---|---|---|---|---|---|---|---|\n",
    );
    let mut notes = String::new();
    let mut problems = Vec::new();
    for mutant in MUTANTS {
        let Mutant {
            name,
            rule,
            filters,
            follows,
            ..
        } = mutant;
        let workers = needs_workers(rule);
        let (code, r, out) = certify(name, filters, workers);
        let target = r.rules.iter().find(|s| s.rule == *rule);
        let Some(target) = target else {
            problems.push(format!("{name}: {rule} is not in the report"));
            continue;
        };
        if target.verdict != Verdict::Fail {
            problems.push(format!(
                "{name}: {rule} is {:?}, not fail\n{out}",
                target.verdict
            ));
        }
        let others: Vec<String> = failing(&r).into_iter().filter(|f| f != rule).collect();
        for o in &others {
            if !follows.contains(&o.as_str()) {
                problems.push(format!("{name}: unrelated rule {o} also failed\n{out}"));
            }
        }
        for f in *follows {
            if !others.iter().any(|o| o == f) {
                problems.push(format!(
                    "{name}: {f} is listed as following from it but did not fail"
                ));
            }
        }
        if r.summary.crashed > 0 || r.summary.timed_out > 0 {
            problems.push(format!("{name}: a case crashed or timed out\n{out}"));
        }
        // A MUST rule broken, or one that follows from it, fails the run;
        // a mutant whose rule shows only on failing calls leaves its path
        // with no data case: not certified (exit 3).
        let must = target.level == "MUST"
            || follows.iter().any(|f| {
                arrowcert::rules::find(f).is_some_and(|r| r.level == arrowcert::rules::Level::Must)
            });
        let only_on_failing_calls = r.summary.errors > 0 && r.summary.passed == 0;
        let want = if must {
            Some(1)
        } else if only_on_failing_calls {
            Some(3)
        } else {
            Some(0)
        };
        if code != want {
            problems.push(format!(
                "{name}: exit code {code:?}, want {want:?} for a {} rule",
                target.level
            ));
        }
        if !others.is_empty() {
            notes.push_str(&format!(
                "- `{name}` also breaks {}: {}.\n",
                others
                    .iter()
                    .map(|o| format!("`{o}`"))
                    .collect::<Vec<_>>()
                    .join(", "),
                mutant.why_follows
            ));
        }
        table.push_str(&format!(
            "| `{name}` | `{rule}` | {} | {} | {:?} | {} of {} | {} | {} |\n",
            target.level,
            if workers { "workers" } else { "in-process" },
            target.verdict,
            target.failed,
            target.checked,
            if others.is_empty() {
                "none".to_string()
            } else {
                others.join(", ")
            },
            mutant.models
        ));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    if !notes.is_empty() {
        table.push_str(&format!(
            "\nRules that cannot be broken alone (each listed rule necessarily fails too):\n\n{notes}"
        ));
    }
    table.push_str("\n## Producer rules without a mutant\n\n| rule | why |\n|---|---|\n");
    for (id, why) in NO_MUTANT {
        table.push_str(&format!("| `{id}` | {why} |\n"));
    }
    let doc = workspace_dir().join("docs/MUTANTS.md");
    let table = table.replace("Fail", "fail");
    if std::env::var_os("ARROWCERT_BLESS").is_some() {
        std::fs::write(&doc, &table).unwrap();
    }
    let committed = std::fs::read_to_string(&doc).unwrap_or_default();
    assert_eq!(
        committed, table,
        "docs/MUTANTS.md is stale: rerun with ARROWCERT_BLESS=1"
    );
}

#[test]
fn without_the_tracker_a_leak_is_not_exercised_never_passed() {
    // In-process there is no allocation tracker, and the reference
    // producer exports no arrowcert_bytes_allocated: the frees rule must
    // say why it was not exercised, not pass.
    let (code, r, out) = certify("schema-leak", &["/primitive"], false);
    assert_eq!(code, Some(0), "{out}");
    let frees = r
        .rules
        .iter()
        .find(|s| s.rule == "schema.release.frees")
        .unwrap();
    assert_eq!(frees.verdict, Verdict::Skip, "{out}");
    assert_eq!(frees.checked, 0);
    let reason = frees.reason.as_deref().unwrap_or_default();
    assert!(reason.contains("allocation tracker"), "{reason}");
    assert!(out.contains("not exercised:"), "{out}");
}

#[test]
fn an_unknown_mutation_is_bad_input_not_a_crash_of_arrowcert() {
    let (reference, _) = bundled();
    let out = Command::new(arrowcert_exe())
        .args(["certify", "--producer"])
        .arg(mutant_lib_cached())
        .args(["--jobs", "1", "producer/schema/primitive"])
        .env("ARROWCERT_MUTANT", "no-such-mutation")
        .env("ARROWCERT_MUTANT_BASE", reference)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("unknown ARROWCERT_MUTANT"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// A failure found on generated data is shrunk to a smaller scenario that
/// still shows it, and the report's replay command reproduces exactly that
/// case.
#[test]
fn a_failure_on_generated_data_is_shrunk_and_replays() {
    let (reference, _) = bundled();
    let report = scratch("mutant-reports").join("shrink.json");
    let out = Command::new(arrowcert_exe())
        .args(["certify", "--producer"])
        .arg(mutant_lib_cached())
        .args([
            "--in-process",
            "--no-builtin",
            "--cases",
            "60",
            "--seed",
            "3",
        ])
        .arg("--report")
        .arg(&report)
        .env("ARROWCERT_MUTANT", "slice-offset-ignored")
        .env("ARROWCERT_MUTANT_BASE", reference)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    let r = arrowcert::report::read(&report).unwrap();
    let s = r
        .shrunk
        .iter()
        .find(|s| s.target == "array.values.roundtrip")
        .unwrap_or_else(|| panic!("not shrunk: {stdout}"));
    assert!(s.steps > 0 && s.tried >= s.steps, "{s:?}");
    assert_ne!(s.case, s.from_case);
    assert!(
        stdout.contains(&format!("smallest case: {}", s.case)),
        "{stdout}"
    );
    let name = arrowcert::certify::scenario_of(&s.case).unwrap();
    let from = arrowcert::certify::scenario_of(&s.from_case).unwrap();
    assert!(name.starts_with(&format!("{from}@")), "{name} from {from}");
    let small = arrowcert::generate::scenario(3, &name).unwrap();
    let big = arrowcert::generate::scenario(3, &from).unwrap();
    let size = |sc: &arrowcert::scenario::Scenario| {
        sc.schema.fields().len() * 1000 + sc.batches.iter().map(|b| b.num_rows()).sum::<usize>()
    };
    assert!(
        size(&small) < size(&big),
        "{} vs {}",
        s.scenario,
        arrowcert::generate::describe(&big)
    );
    assert_eq!(small.schema.fields().len(), 1, "{}", s.scenario);
    // The replay command, as printed, reproduces that very case.
    assert!(s.replay.starts_with("arrowcert replay ") && s.replay.contains("--seed 3"));
    let replay = Command::new(arrowcert_exe())
        .args(["replay", "--producer"])
        .arg(mutant_lib_cached())
        .args(["--seed", "3", &s.case])
        .env("ARROWCERT_MUTANT", "slice-offset-ignored")
        .env("ARROWCERT_MUTANT_BASE", reference)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&replay.stdout);
    assert_eq!(replay.status.code(), Some(1), "{text}");
    assert!(
        text.contains(&format!("case {} ... FAIL", s.case)),
        "{text}"
    );
    assert!(text.contains("MUST array.values.roundtrip at "), "{text}");
}

/// Metadata or a name that is not UTF-8 ("A binary string": schema.metadata.utf8
/// is INFO, schema.name.utf8 SHOULD) keeps arrow-rs, which reads the values,
/// from importing the schema. On every path the values are then not judged,
/// with the reason: no MUST rule fails (regression: the stream and device
/// stream paths failed array.values.roundtrip with "0 rows, expected 38").
/// The async path is covered by async_mutants.rs's `name-latin1`.
#[test]
fn names_and_metadata_that_are_not_utf8_fail_no_must_rule_on_any_path() {
    for (mutant, rule, scenario) in [
        (
            "metadata-cut-mid-character",
            "schema.metadata.utf8",
            "metadata",
        ),
        ("name-latin1", "schema.name.utf8", "primitive"),
    ] {
        let filters = [
            format!("producer/schema/{scenario}"),
            format!("producer/array/{scenario}/"),
            format!("producer/device_array/{scenario}/"),
            format!("producer/stream/{scenario}"),
            format!("producer/device_stream/{scenario}"),
        ];
        let filters: Vec<&str> = filters.iter().map(String::as_str).collect();
        let (code, r, out) = certify(mutant, &filters, false);
        assert_eq!(code, Some(0), "{mutant}: {out}");
        assert_eq!(failing(&r), vec![rule.to_string()], "{mutant}: {out}");
        for path in ["array", "device_array", "stream", "device_stream"] {
            let prefix = format!("producer/{path}/{scenario}");
            let cases: Vec<_> = r
                .cases
                .iter()
                // Sliced streams come from another entry point, which
                // these mutations leave alone.
                .filter(|c| {
                    c.id.starts_with(&prefix)
                        && !(path.ends_with("stream") && c.id.contains("/slice:"))
                })
                .collect();
            assert!(!cases.is_empty(), "{mutant}: no {prefix} case: {out}");
            // Each shows the byte problem, and its values are not judged.
            for c in cases {
                assert!(
                    c.violations.iter().any(|v| v.rule == rule),
                    "{mutant} {}: {:?}",
                    c.id,
                    c.violations
                );
                assert!(
                    c.not_exercised
                        .iter()
                        .any(|n| n.rule == "array.values.roundtrip" && n.reason.contains("UTF-8")),
                    "{mutant} {}: {:?}",
                    c.id,
                    c.not_exercised
                );
            }
        }
    }
}

/// Issue 39: a cache emptied every few exports, at several periods up to
/// well past 64, is no leak on any leak rule; the small leak fails them
/// all (its row in the table above).
#[test]
fn caches_emptied_at_several_periods_fail_no_leak_rule() {
    let (reference, _) = bundled();
    for period in ["2", "5", "17", "64", "100"] {
        let (code, r, out) = support::mutants::certify_mutant_with(
            "producer",
            mutant_lib_cached(),
            reference,
            "periodic-cache",
            &["/primitive"],
            true,
            &[("ARROWCERT_MUTANT_CACHE_PERIOD", period)],
        );
        assert_eq!(code, Some(0), "period {period}: {out}");
        for rule in [
            "array.release.frees",
            "schema.release.frees",
            "stream.release.frees",
        ] {
            let s = r.rules.iter().find(|s| s.rule == rule).unwrap();
            assert_eq!(s.verdict, Verdict::Pass, "period {period}: {rule}\n{out}");
            assert!(s.checked > 0, "period {period}: {rule}");
        }
        assert!(
            failing(&r).iter().all(|f| f == "array.release.cache"),
            "period {period}: {:?}",
            failing(&r)
        );
    }
}

/// The frees rules are measured on a covering choice of scenarios: a
/// schema that leaks on every export is caught on a single-type scenario,
/// while on a mixed generated one (gen/N) and on a column split (`~col:N`,
/// here of a shape, replayed: a certification splits only what a library
/// refused) the rule is not exercised, with the reason; `--all-leaks`
/// measures it there too.
#[test]
fn leaks_are_measured_on_mixed_scenarios_and_splits_only_with_all_leaks() {
    let (reference, _) = bundled();
    let ids = ["producer/schema/gen/0", "producer/schema/gen/type:int32"];
    // `command` (certify or replay) of the schema-leak mutant with `args`,
    // with --all-leaks when `all`: its report and stdout.
    let run = |command: &str, args: &[&str], all: bool| {
        let report = scratch("mutant-reports").join(format!("all-leaks-{command}-{all}.json"));
        let _ = std::fs::remove_file(&report);
        let mut cmd = Command::new(arrowcert_exe());
        cmd.args([command, "--producer"])
            .arg(mutant_lib_cached())
            .args(["--jobs", "1", "--seed", "3", "--report"])
            .arg(&report)
            .args(args)
            .env("ARROWCERT_MUTANT", "schema-leak")
            .env("ARROWCERT_MUTANT_BASE", reference);
        if all {
            cmd.arg("--all-leaks");
        }
        let out = cmd.output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let r = arrowcert::report::read(&report).unwrap_or_else(|e| panic!("{e}\n{stdout}"));
        (r, stdout)
    };
    for all in [false, true] {
        let certify_args = ["--no-builtin", "--cases", "1", "--exact", ids[0], ids[1]];
        let (r, stdout) = run("certify", &certify_args, all);
        let case = |id: &str| r.cases.iter().find(|c| c.id == id).expect(id);
        let single = case(ids[1]);
        assert_eq!(single.verdict, Verdict::Fail, "{stdout}");
        assert!(single.checked.iter().any(|c| c == "schema.release.frees"));
        let mixed = case(ids[0]);
        let measured = mixed.checked.iter().any(|c| c == "schema.release.frees");
        assert_eq!(measured, all, "{}: {:?}", ids[0], mixed.checked);
        assert_eq!(
            mixed.verdict,
            if all { Verdict::Fail } else { Verdict::Pass },
            "{stdout}"
        );
        if all {
            assert!(single.replay.contains("--all-leaks"), "{}", single.replay);
        }
        let split = "producer/schema/gen/shape:extension-storage~col:9";
        let (r, stdout) = run("replay", &[split], all);
        let case = r.cases.iter().find(|c| c.id == split).expect(split);
        let measured = case.checked.iter().any(|c| c == "schema.release.frees");
        assert_eq!(measured, all, "{split}: {:?}", case.checked);
        if !all {
            assert!(
                case.not_exercised
                    .iter()
                    .any(|n| n.rule == "schema.release.frees" && n.reason.contains("~col:N")),
                "{split}: {:?}",
                case.not_exercised
            );
        }
        let want = if all { Verdict::Fail } else { Verdict::Pass };
        assert_eq!(case.verdict, want, "{stdout}");
    }
}

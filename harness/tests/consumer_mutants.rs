//! Every mutant consumer breaks exactly its rule: consumer certification
//! reports that rule (and only rules that follow from it), while the same
//! wrapper with no mutation, and the reference consumer, pass everything.
//! The limitation mutants break no rule: they refuse input cleanly under a
//! permission of the spec, and certification reports limitations, never
//! failures. The table of mutant -> rule verdicts is generated into
//! docs/CONSUMER_MUTANTS.md.

mod support;

use arrowcert::report::{Report, Verdict};
use support::*;

/// One mutant: its name (`ARROWCERT_MUTANT`), the rule it breaks, the case
/// filters that exercise it, whether it runs in worker processes, the bug
/// it models, and the rules that cannot hold when it does, with why.
struct Mutant {
    name: &'static str,
    rule: &'static str,
    filters: &'static [&'static str],
    workers: bool,
    models: &'static str,
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
        workers: false,
        models,
    }
}

const MUTANTS: &[Mutant] = &[
    m(
        "leak",
        "consumer.release.once",
        &["consumer/array/plain/primitive", "consumer/stream/plain/primitive"],
        "imports zero-copy views and never calls the producer's release",
    ),
    m(
        "double-release",
        "consumer.release.not-released",
        &["consumer/array/plain/nested"],
        "keeps a copy of the structure and calls its release again at teardown",
    ),
    m(
        "release-child",
        "consumer.release.no-children",
        &["consumer/array/varied/nested"],
        "frees a column by calling its release in place, then releases the parent",
    ),
    Mutant {
        name: "read-after-release",
        rule: "consumer.read.after-release",
        filters: &["consumer/array/plain/primitive"],
        // Reading poisoned offsets can abort the reference reader: a
        // crash must not take the test's harness process down.
        workers: true,
        models: "releases the input, then reads the buffers through a copy of the structures",
    },
    m(
        "copy-without-marking",
        "consumer.move.marks-source",
        &["consumer/array/plain/primitive"],
        "moves a structure by copying it and leaves the source's release set",
    ),
    m(
        "ignore-offset",
        "consumer.read.values",
        &["consumer/array/varied/"],
        "reads every array from physical index 0, ignoring ArrowArray.offset",
    ),
    m(
        "interval-as-microseconds",
        "consumer.read.precision",
        &["consumer/array/plain/temporal_decimal"],
        "keeps month_day_nano intervals at microsecond precision (a library whose own interval type counts microseconds)",
    ),
    m(
        "interval-days-lost",
        "consumer.read.values",
        &["consumer/array/plain/temporal_decimal"],
        "loses the days of month_day_nano intervals (the control: other damage to an interval column still fails the MUST)",
    ),
    m(
        "string-length-from-first-offset",
        "consumer.read.values",
        &["consumer/array/varied/binary"],
        "sizes a sliced string array's data from offsets[length] instead of offsets[offset + length]",
    ),
    m(
        "null-buffers-of-empty",
        "consumer.read.accepts",
        &["batch:2"],
        "refuses the NULL buffer pointers the spec allows for zero-sized buffers of empty arrays (it reads the same data with the buffers allocated: no permission covers the refusal)",
    ),
    m(
        "drop-metadata",
        "consumer.read.metadata",
        &["consumer/array/plain/metadata"],
        "drops schema and field metadata on import (extension types included)",
    ),
    m(
        "all-columns-nullable",
        "consumer.read.types",
        &["consumer/array/plain/primitive"],
        "reads every column as nullable (a library whose columns all are), the values kept",
    ),
    m(
        "ignore-flags",
        "consumer.read.types",
        &["consumer/array/plain/dictionary", "consumer/array/plain/nested"],
        "ignores ARROW_FLAG_DICTIONARY_ORDERED and ARROW_FLAG_MAP_KEYS_SORTED",
    ),
    m(
        "keep-last-error",
        "consumer.stream.last-error-copy",
        // With a data case, so that the run certifies something.
        &["consumer/stream_error/", "consumer/stream/plain/primitive"],
        "keeps get_last_error's pointer and reads it after releasing the stream",
    ),
    m(
        "last-error-after-success",
        "consumer.stream.last-error",
        &["consumer/stream/plain/primitive"],
        "calls get_last_error after every successful get_next",
    ),
    m(
        "get-next-after-error",
        "consumer.stream.error",
        // With one data case (a SHOULD rule's failure does not fail the
        // run, and error cases alone read no data: not certified).
        &["consumer/stream_error/next-EIO/", "consumer/stream/plain/primitive"],
        "retries get_next after a failure and takes the end of stream that follows for success",
    ),
    m(
        "stream-never-released",
        "consumer.stream.release",
        &["consumer/stream/plain/primitive"],
        "drains the stream and forgets to release it",
    ),
    m(
        "concurrent-get-next",
        "consumer.stream.serial",
        &["consumer/stream/plain/"],
        "calls stream callbacks from two threads at once",
    ),
    m(
        "accepts-released",
        "consumer.release.checks-released",
        // With one data case: released inputs alone read no data, and a
        // run that reads none is not certified.
        &["consumer/released/", "consumer/array/plain/primitive/batch:0"],
        "treats a released ArrowArray as an empty one instead of refusing it",
    ),
    m(
        "write-buffer",
        "consumer.data.immutable",
        &["consumer/array/plain/primitive"],
        "writes into an imported buffer (in place) before releasing it",
    ),
];

/// A mutant that breaks no rule: it refuses input cleanly (everything
/// released, EINVAL, a message) under a permission of the spec.
struct Limitation {
    name: &'static str,
    /// What the mutant's arrowcert_last_error says when it refuses.
    message: &'static str,
    /// What it refuses.
    refuses: &'static str,
    /// The sentence of CDataInterface.rst that permits it.
    permission: &'static str,
}

const LIMITATIONS: &[Limitation] = &[
    Limitation {
        name: "refuse-offsets",
        message: "non-zero offsets are not supported",
        refuses: "any array, device array or stream chunk with a non-zero offset at any node",
        permission: "Consumers MAY decide not to support non-0-offset arrays, but they should document this limitation.",
    },
    Limitation {
        name: "refuse-unions",
        message: "union types are not supported",
        refuses: "any schema with a union type anywhere (format `+u...`), streams included",
        permission: "Consumers MAY decide not to support all data types, but they should document this limitation.",
    },
    Limitation {
        name: "refuse-unaligned",
        message: "unaligned memory is not supported",
        refuses: "any array, device array or stream chunk with a buffer not aligned to the type of primitive data it holds",
        permission: "Consumers MAY decide not to support unaligned memory.",
    },
    Limitation {
        name: "panic-on-unaligned",
        message: "is not aligned with the specified scalar type",
        refuses: "as `refuse-unaligned`, raised as a Rust panic a binding caught (ENOTRECOVERABLE with the panic's words, as arrow-rs's import panics): the offset-0 twin read, a limitation",
        permission: "Consumers MAY decide not to support unaligned memory.",
    },
];

/// Wrappers that break no rule although they look unusual, each certified
/// clean by its own test: (name, what it does, why that is allowed).
const CORRECT: &[(&str, &str, &str)] = &[(
    "late-release",
    "releases the input array 30 ms after its call returned, from a thread of its own (a thread pool still finishing the call's tasks, as pyarrow's `to_pandas` after one column raised)",
    "the spec asks that the consumer release what it was given, not that it do so before its call returns: the harness waits up to `LATE_RELEASE_GRACE` (250 ms) before it judges a structure never released",
)];

/// Consumer rules with no mutant here, and why.
const NO_MUTANT: &[(&str, &str)] = &[
    (
        "consumer.read.values-view",
        "judged through a py: adapter's values(obj): its mutant is the Python adapter harness/tests/fixtures/py/shared_misreading.py (rows reversed on import and back on export), in python_adapters.rs",
    ),
    (
        "consumer.sync.waits",
        "needs a device with its own memory and asynchronous work: its mutants (`read-before-wait`, `read-then-wait`) run on the emulated device, in docs/DEVICE_MUTANTS.md",
    ),
    (
        "device.move",
        "judged on device arrays: its mutant (`move-without-marking`) runs on the emulated device, in docs/DEVICE_MUTANTS.md",
    ),
];

fn certify(mutant: &str, filters: &[&str], workers: bool) -> (Option<i32>, Report, String) {
    let (_, reference) = bundled();
    support::mutants::certify_mutant(
        "consumer",
        mutant_consumer(),
        reference,
        mutant,
        filters,
        workers,
    )
}

use support::mutants::failing;

#[test]
fn the_wrapper_without_a_mutation_passes_everything() {
    for workers in [false, true] {
        let (code, r, out) = certify("none", &[], workers);
        assert_eq!(code, Some(0), "{out}");
        assert!(failing(&r).is_empty(), "{:?}", failing(&r));
        assert_eq!(r.summary.failed, 0);
        assert!(r.summary.passed > 100, "{out}");
    }
}

#[test]
fn an_unknown_mutation_is_refused_with_its_name() {
    let (code, r, out) = certify(
        "no-such-mutation",
        &["consumer/array/plain/primitive"],
        false,
    );
    // It refuses every input cleanly (EINVAL and why): nothing read, so
    // nothing certified, and its message names the mutation.
    assert_eq!(code, Some(3), "{out}");
    assert_eq!(
        r.outcome.as_ref().map(|o| o.outcome),
        Some(arrowcert::report::outcome::Outcome::NotCertified),
        "{out}"
    );
    assert!(!r.limitations.is_empty(), "{out}");
    for l in &r.limitations {
        assert!(l.message.contains("no-such-mutation"), "{l:?}");
    }
}

fn mutations_in_source() -> Vec<String> {
    support::mutants::mutations_in("consumers/mutants/mutant_consumer.c")
}

#[test]
fn every_mutation_is_tested_and_every_consumer_rule_has_a_mutant_or_a_reason() {
    let tested: Vec<&str> = MUTANTS
        .iter()
        .map(|m| m.name)
        .chain(LIMITATIONS.iter().map(|l| l.name))
        .chain(CORRECT.iter().map(|c| c.0))
        .collect();
    for name in mutations_in_source() {
        assert!(
            name == "none" || tested.contains(&name.as_str()),
            "mutation {name} has no test"
        );
    }
    let sides = arrowcert::certify::Sides {
        producer: false,
        consumer: true,
    };
    for r in arrowcert::rules::RULES {
        // The async consumer rules have their mutants in async_mutants.rs.
        if !arrowcert::certify::summary::judged(r, sides) || r.id.starts_with("consumer.async.") {
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
        "# Consumer mutants\n\nGenerated by `harness/tests/consumer_mutants.rs` (`ARROWCERT_BLESS=1 cargo test -p arrowcert --test consumer_mutants` rewrites it).\nEach mutant is the reference consumer with one rule broken (`consumers/mutants/mutant_consumer.c`, chosen with `ARROWCERT_MUTANT`), modelled on a way real consumers got the C interfaces wrong. The test certifies each one (`arrowcert certify --consumer`) on the built-in cases its filters select and checks that its rule fails, that no other rule fails, that nothing crashes, and that the exit code is 1 for a MUST rule and 0 otherwise.\n\n| mutant | rule it breaks | level | run | verdict | cases judged | the bug it models |\n|---|---|---|---|---|---|---|\n",
    );
    let mut problems = Vec::new();
    for mutant in MUTANTS {
        let Mutant {
            name,
            rule,
            filters,
            workers,
            models,
        } = mutant;
        let (code, r, out) = certify(name, filters, *workers);
        let Some(target) = r.rules.iter().find(|s| s.rule == *rule) else {
            problems.push(format!("{name}: {rule} is not in the report"));
            continue;
        };
        if target.verdict != Verdict::Fail {
            problems.push(format!(
                "{name}: {rule} is {:?}, not fail\n{out}",
                target.verdict
            ));
        }
        for o in failing(&r).into_iter().filter(|f| f != rule) {
            problems.push(format!("{name}: unrelated rule {o} also failed\n{out}"));
        }
        if r.summary.crashed > 0 || r.summary.timed_out > 0 {
            problems.push(format!("{name}: a case crashed or timed out\n{out}"));
        }
        let want = Some(if target.level == "MUST" { 1 } else { 0 });
        if code != want {
            problems.push(format!(
                "{name}: exit code {code:?}, want {want:?} for a {} rule",
                target.level
            ));
        }
        table.push_str(&format!(
            "| `{name}` | `{rule}` | {} | {} | fail | {} | {models} |\n",
            target.level,
            if *workers { "workers" } else { "in-process" },
            target.checked,
        ));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    table.push_str("\n## Limitations, not failures\n\nThese mutants break no rule: they refuse input cleanly (everything released, EINVAL, a message through `arrowcert_last_error`) under a permission of the spec. `limitation_mutants_are_limitations_and_the_run_passes` certifies each one on every built-in consumer case and checks that no MUST rule fails, that the refused cases are limitations carrying the mutant's message, and that the run passes (every path still reads some data).\n\n| mutant | what it refuses | its message | the spec's permission |\n|---|---|---|---|\n");
    for l in LIMITATIONS {
        table.push_str(&format!(
            "| `{}` | {} | \"{}\" | \"{}\" |\n",
            l.name, l.refuses, l.message, l.permission
        ));
    }
    table.push_str("\n## Correct, though unusual\n\nThese wrappers break no rule; `correct_wrappers_pass` certifies each and checks that nothing fails.\n\n| wrapper | what it does | why that is allowed |\n|---|---|---|\n");
    for (name, does, why) in CORRECT {
        table.push_str(&format!("| `{name}` | {does} | {why} |\n"));
    }
    table.push_str("\n## Consumer rules without a mutant\n\n| rule | why |\n|---|---|\n");
    for (id, why) in NO_MUTANT {
        table.push_str(&format!("| `{id}` | {why} |\n"));
    }
    let doc = workspace_dir().join("docs/CONSUMER_MUTANTS.md");
    if std::env::var_os("ARROWCERT_BLESS").is_some() {
        std::fs::write(&doc, &table).unwrap();
    }
    let committed = std::fs::read_to_string(&doc).unwrap_or_default();
    assert_eq!(
        committed, table,
        "docs/CONSUMER_MUTANTS.md is stale: rerun with ARROWCERT_BLESS=1"
    );
}

/// A consumer whose other thread releases the input after its call
/// returned is not charged `consumer.release.once`: in process and in
/// workers, every case passes and the rule was checked.
#[test]
fn correct_wrappers_pass() {
    for (name, _, _) in CORRECT {
        for workers in [false, true] {
            let (code, r, out) = certify(
                name,
                &[
                    "consumer/array/plain/primitive",
                    "consumer/array/plain/nested",
                ],
                workers,
            );
            assert_eq!(code, Some(0), "{name} (workers: {workers}): {out}");
            assert!(failing(&r).is_empty(), "{name}: {:?}\n{out}", failing(&r));
            assert!(r.summary.passed > 0 && r.summary.failed == 0, "{out}");
            let once = r
                .rules
                .iter()
                .find(|s| s.rule == "consumer.release.once")
                .expect("consumer.release.once in the report");
            assert_eq!(once.verdict, Verdict::Pass, "{name}: {once:?}\n{out}");
        }
    }
}

/// A consumer that refuses what the spec lets it refuse is limited, not
/// broken: on every built-in consumer case, the refusals are limitations
/// with the consumer's own message, no MUST rule fails, and the run passes
/// because every path still reads some data.
#[test]
fn limitation_mutants_are_limitations_and_the_run_passes() {
    let mut problems = Vec::new();
    for l in LIMITATIONS {
        let (code, r, out) = certify(l.name, &[], false);
        let name = l.name;
        let musts: Vec<String> = r
            .rules
            .iter()
            .filter(|s| s.verdict == Verdict::Fail && s.level == "MUST")
            .map(|s| s.rule.clone())
            .collect();
        if !musts.is_empty() {
            problems.push(format!("{name}: MUST rules failed: {musts:?}\n{out}"));
        }
        if r.summary.limitations == 0 {
            problems.push(format!("{name}: no limitation reported\n{out}"));
        }
        if r.limitations.len() as u64 != r.summary.limitations {
            problems.push(format!(
                "{name}: {} limitation entries for {} limitation cases",
                r.limitations.len(),
                r.summary.limitations
            ));
        }
        for e in &r.limitations {
            if !e.message.contains(l.message) {
                problems.push(format!(
                    "{name}: limitation of {} says {:?}",
                    e.case, e.message
                ));
            }
            if !e.library.contains(name) {
                problems.push(format!(
                    "{name}: limitation of {} names {:?}",
                    e.case, e.library
                ));
            }
        }
        for c in r.cases.iter().filter(|c| c.verdict == Verdict::Limitation) {
            if !c.message.as_deref().unwrap_or("").contains(l.message) {
                problems.push(format!(
                    "{name}: {} is a limitation saying {:?}",
                    c.id, c.message
                ));
            }
        }
        // Every data path the wrapper exports refused something and still
        // read data.
        for path in [
            "consume_array",
            "consume_device_array",
            "consume_stream",
            "consume_device_stream",
        ] {
            let limited = r.limitations.iter().any(|e| e.path == path);
            let passed = r
                .cases
                .iter()
                .any(|c| c.path == path && c.verdict == Verdict::Pass);
            if !passed {
                problems.push(format!("{name}: no case passed on {path}"));
            }
            if !limited {
                problems.push(format!("{name}: nothing refused on {path}"));
            }
        }
        if r.summary.failed + r.summary.errors + r.summary.crashed + r.summary.timed_out > 0 {
            problems.push(format!(
                "{name}: a case failed, errored, crashed or hung\n{out}"
            ));
        }
        let outcome = r.outcome.as_ref().map(|o| o.outcome);
        if outcome != Some(arrowcert::report::outcome::Outcome::Pass) || code != Some(0) {
            problems.push(format!(
                "{name}: outcome {outcome:?}, exit code {code:?}\n{out}"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Refusing the NULL buffers the spec allows for zero-sized buffers is no
/// permitted limitation: the consumer reads the same data with the buffers
/// allocated, and refuses it varied even with every offset 0. That breaks
/// `consumer.read.accepts` (SHOULD), not `consumer.read.values`, and the
/// run still passes.
#[test]
fn refusing_null_buffers_of_empty_arrays_fails_accepts_not_values() {
    let (code, r, out) = certify("null-buffers-of-empty", &["batch:2"], false);
    let rule = |id: &str| {
        r.rules
            .iter()
            .find(|s| s.rule == id)
            .unwrap_or_else(|| panic!("{id}\n{out}"))
    };
    let accepts = rule("consumer.read.accepts");
    assert_eq!(accepts.verdict, Verdict::Fail, "{out}");
    assert_eq!(accepts.level, "SHOULD");
    assert_ne!(rule("consumer.read.values").verdict, Verdict::Fail, "{out}");
    assert_eq!(failing(&r), ["consumer.read.accepts"], "{out}");
    assert_eq!(r.summary.limitations, 0, "{:#?}", r.limitations);
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(
        r.outcome.as_ref().map(|o| o.outcome),
        Some(arrowcert::report::outcome::Outcome::Pass),
        "{out}"
    );
}

/// The variation a single-variation case ID names
/// (`consumer/<path>/varied:<variation>/...`), if it is one.
fn variation_of(id: &str) -> Option<&str> {
    id.split('/').find_map(|w| w.strip_prefix("varied:"))
}

/// A consumer that refuses exactly one permitted variation (any non-zero
/// offset) is limited on the combined varied cases and the offset-only
/// cases, each limitation naming `offset`, and passes every other
/// single-variation case: the other variations are shown to it alone.
#[test]
fn a_refused_permitted_variation_is_named_and_the_others_are_read_alone() {
    let (code, r, out) = certify(
        "refuse-offsets",
        &["consumer/array/varied", "consumer/stream/varied"],
        false,
    );
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(r.summary.failed, 0, "{out}");
    let mut offset_limited = 0;
    let mut others_passed = 0;
    for c in &r.cases {
        let message = c.message.as_deref().unwrap_or("");
        match (variation_of(&c.id), c.verdict) {
            (Some("offset"), Verdict::Limitation) => {
                assert!(message.contains("refused: offset;"), "{}: {message}", c.id);
                offset_limited += 1;
            }
            (Some("offset"), v) => assert_eq!(v, Verdict::Pass, "{}", c.id),
            (Some(_), v) => {
                assert_eq!(v, Verdict::Pass, "{}: {message}", c.id);
                others_passed += 1;
            }
            (None, Verdict::Limitation) => {
                assert!(message.contains("refused: offset;"), "{}: {message}", c.id);
            }
            (None, v) => assert_eq!(v, Verdict::Pass, "{}", c.id),
        }
    }
    assert!(offset_limited > 5, "{offset_limited}\n{out}");
    assert!(others_passed > 50, "{others_passed}\n{out}");
    assert!(
        r.cases
            .iter()
            .any(|c| variation_of(&c.id).is_none() && c.verdict == Verdict::Limitation),
        "{out}"
    );
}

/// A consumer that refuses exactly one variation no permission covers
/// (NULL pointers for the zero-sized buffers of empty arrays) fails
/// `consumer.read.accepts` on the combined varied cases and on that
/// variation's own cases, each naming it, and passes every other
/// single-variation case.
#[test]
fn a_refused_variation_without_a_permission_fails_accepts_naming_it() {
    let (code, r, out) = certify(
        "null-buffers-of-empty",
        &["batch:2", "varied:null-empty-buffers/"],
        false,
    );
    assert_eq!(failing(&r), ["consumer.read.accepts"], "{out}");
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(r.summary.limitations, 0, "{:#?}", r.limitations);
    let (mut alone, mut combined) = (0, 0);
    for c in &r.cases {
        let accepts: Vec<&str> = c
            .violations
            .iter()
            .filter(|v| v.rule == "consumer.read.accepts")
            .map(|v| v.evidence.as_str())
            .collect();
        for e in &accepts {
            assert!(e.contains("(refused: null-empty-buffers)"), "{}: {e}", c.id);
        }
        match variation_of(&c.id) {
            Some("null-empty-buffers") => alone += usize::from(!accepts.is_empty()),
            Some(_) => {
                assert!(accepts.is_empty(), "{}", c.id);
                assert_eq!(c.verdict, Verdict::Pass, "{}: {:?}", c.id, c.message);
            }
            None if !accepts.is_empty() => {
                assert!(c.id.contains("/varied/"), "{}", c.id);
                combined += 1;
            }
            None => {}
        }
    }
    assert!(alone > 0 && combined > 0, "{alone} {combined}\n{out}");
}

//! Every device rule has an emulated-device mutant that is caught on a
//! machine without a GPU: each mutant breaks exactly its rule (and the
//! rules listed as following from it), the same wrappers with no mutation
//! pass, and the reference plugins pass over more than 10,000 generated
//! cases on the emulated device. The table of mutant -> rule verdicts is
//! generated into docs/DEVICE_MUTANTS.md (`ARROWCERT_BLESS=1` rewrites it).

mod support;

use std::path::PathBuf;
use std::process::Command;

use arrowcert::report::{Report, Verdict};
use support::mutants::{build, certify_mutant, failing, mutations_in};
use support::*;

const PRODUCER_SRC: &str = "producers/mutants/mutant_emulated_producer.c";
const CONSUMER_SRC: &str = "consumers/mutants/mutant_emulated_consumer.c";

fn producer_lib() -> &'static PathBuf {
    static LIB: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    LIB.get_or_init(|| {
        build(
            "device-mutants",
            PRODUCER_SRC,
            "arrowcert_mutant_emulated_producer",
        )
    })
}

fn consumer_lib() -> &'static PathBuf {
    static LIB: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    LIB.get_or_init(|| {
        build(
            "device-mutants",
            CONSUMER_SRC,
            "arrowcert_mutant_emulated_consumer",
        )
    })
}

struct Mutant {
    name: &'static str,
    rule: &'static str,
    /// Rules that fail because of this one (an unusable event also leaves
    /// the data unsynchronised).
    follows: &'static [&'static str],
    models: &'static str,
}

const PRODUCER_MUTANTS: &[Mutant] = &[
    Mutant {
        name: "event-before-write",
        rule: "device.event.covers-data",
        follows: &[],
        models: "the event recorded where the writes are not (it completes before they land)",
    },
    Mutant {
        name: "event-not-recorded",
        rule: "device.event.covers-data",
        follows: &[],
        models: "the event created and handed over but never recorded",
    },
    Mutant {
        name: "no-sync-event",
        rule: "device.event.covers-data",
        follows: &[],
        models: "sync_event left NULL while the writes are still pending",
    },
    Mutant {
        name: "event-by-value",
        rule: "device.event.type",
        follows: &["device.event.covers-data"],
        models: "the event itself passed as sync_event instead of a pointer to it",
    },
    Mutant {
        name: "host-buffers",
        rule: "device.buffers.accessible",
        follows: &[],
        models: "buffers in ordinary host memory on an array declared ARROW_DEVICE_EXT_DEV",
    },
    Mutant {
        name: "short-allocation",
        rule: "device.buffers.in-allocation",
        follows: &[],
        models: "every device allocation one byte shorter than the buffer it holds",
    },
    Mutant {
        name: "buffers-array-on-device",
        rule: "device.struct.host",
        follows: &[],
        models: "the root's buffers array copied into device memory",
    },
    Mutant {
        name: "leaks-device-memory",
        rule: "array.release.frees",
        follows: &["stream.release.frees"],
        models: "release never frees the device allocations",
    },
];

const CONSUMER_MUTANTS: &[Mutant] = &[
    Mutant {
        name: "read-before-wait",
        rule: "consumer.sync.waits",
        follows: &[],
        models: "reads the buffers without waiting on sync_event",
    },
    Mutant {
        name: "read-then-wait",
        rule: "consumer.sync.waits",
        follows: &[],
        models: "reads a device array's buffers, then waits on sync_event before it releases the array and returns (the event is complete whenever it is asked; the CUDA read-before-wait mutant's order)",
    },
    Mutant {
        name: "move-without-marking",
        rule: "device.move",
        follows: &["consumer.move.marks-source"],
        models:
            "moves the ArrowDeviceArray by a plain copy and leaves the source's array.release set",
    },
];

fn certify(role: &str, mutant: &str) -> (Option<i32>, Report, String) {
    let (producer, consumer) = bundled();
    let (lib, base) = match role {
        "producer" => (producer_lib(), producer),
        _ => (consumer_lib(), consumer),
    };
    certify_mutant(role, lib, base, mutant, &["device:emulated/"], false)
}

#[test]
fn the_wrappers_without_a_mutation_pass_on_the_emulated_device() {
    for role in ["producer", "consumer"] {
        let (code, r, out) = certify(role, "none");
        assert_eq!(code, Some(0), "{out}");
        assert!(failing(&r).is_empty(), "{role}: {:?}\n{out}", failing(&r));
        assert!(r.summary.total > 0, "{out}");
        assert_eq!(r.summary.passed, r.summary.total, "{out}");
    }
}

#[test]
fn every_device_mutation_is_tested_and_every_device_rule_has_a_mutant() {
    for (src, list) in [
        (PRODUCER_SRC, PRODUCER_MUTANTS),
        (CONSUMER_SRC, CONSUMER_MUTANTS),
    ] {
        let names = mutations_in(src);
        for n in &names {
            assert!(
                n == "none" || list.iter().any(|m| m.name == n),
                "{src}: mutation {n} has no test"
            );
        }
        for m in list {
            assert!(
                names.iter().any(|n| n == m.name),
                "{src} has no mutation {}",
                m.name
            );
        }
    }
    // The rules only a device with its own memory can break.
    for rule in [
        "device.event.type",
        "device.event.covers-data",
        // (device.buffers.memory-kind, SHOULD: the emulated device has one
        // kind of memory, so only a CUDA mutant, managed-buffers, breaks it.)
        "device.buffers.accessible",
        "device.buffers.in-allocation",
        "device.struct.host",
        "device.move",
        "consumer.sync.waits",
    ] {
        assert!(
            PRODUCER_MUTANTS
                .iter()
                .chain(CONSUMER_MUTANTS)
                .any(|m| m.rule == rule),
            "{rule} has no emulated-device mutant"
        );
    }
}

#[test]
fn every_device_mutant_breaks_exactly_its_rule() {
    let mut table = String::from(
        "# Device mutants\n\n\
         Generated by `harness/tests/device_mutants.rs` (`ARROWCERT_BLESS=1 cargo test -p arrowcert --test device_mutants` rewrites it).\n\
         Each mutant is the reference producer or consumer on the emulated device (`producers/mutants/mutant_emulated_producer.c`,\n\
         `consumers/mutants/mutant_emulated_consumer.c`) with one mistake, certified on every `device:emulated` case of the\n\
         built-in scenarios, on a machine without a GPU. The rule it breaks must fail, and no other rule may, except those\n\
         listed as following from it.\n\n\
         | side | mutant | rule | level | cases judged | also fails | models |\n\
         |---|---|---|---|---|---|---|\n",
    );
    let mut problems = Vec::new();
    for (role, list) in [
        ("producer", PRODUCER_MUTANTS),
        ("consumer", CONSUMER_MUTANTS),
    ] {
        for Mutant {
            name,
            rule,
            follows,
            models,
        } in list
        {
            let (code, r, out) = certify(role, name);
            let Some(target) = r.rules.iter().find(|s| s.rule == *rule) else {
                problems.push(format!("{name}: {rule} is not in the report"));
                continue;
            };
            if target.verdict != Verdict::Fail {
                problems.push(format!(
                    "{role} {name}: {rule} is {:?}, not fail\n{out}",
                    target.verdict
                ));
            }
            let others: Vec<String> = failing(&r).into_iter().filter(|f| f != rule).collect();
            for o in &others {
                if !follows.contains(&o.as_str()) {
                    problems.push(format!(
                        "{role} {name}: unrelated rule {o} also failed\n{out}"
                    ));
                }
            }
            if r.summary.crashed > 0 || r.summary.timed_out > 0 {
                problems.push(format!("{role} {name}: a case crashed or timed out\n{out}"));
            }
            let want = Some(if target.level == "MUST" { 1 } else { 0 });
            if code != want {
                problems.push(format!(
                    "{role} {name}: exit code {code:?}, want {want:?} for a {} rule",
                    target.level
                ));
            }
            table.push_str(&format!(
                "| {role} | `{name}` | `{rule}` | {} | {} | {} | {models} |\n",
                target.level,
                target.checked,
                if others.is_empty() {
                    "-".to_string()
                } else {
                    others
                        .iter()
                        .map(|o| format!("`{o}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
    let path = workspace_dir().join("docs/DEVICE_MUTANTS.md");
    if std::env::var_os("ARROWCERT_BLESS").is_some() {
        std::fs::write(&path, &table).unwrap();
    } else {
        let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
        assert_eq!(
            on_disk, table,
            "docs/DEVICE_MUTANTS.md is stale: rerun with ARROWCERT_BLESS=1"
        );
    }
}

/// The bar: the reference plugins pass on the emulated device over
/// at least 10,000 generated cases (about 11 per generated scenario; in this process,
/// where it takes well under a minute).
#[test]
fn the_reference_plugins_pass_ten_thousand_emulated_cases() {
    let _ = bundled();
    let report = scratch("device-mutants").join("reference-emulated.json");
    let out = Command::new(arrowcert_exe())
        .args([
            "certify",
            "--device",
            "emulated",
            "--no-builtin",
            "--cases",
            "950",
            "--seed",
            "7",
            "--in-process",
            "--report",
        ])
        .arg(&report)
        .output()
        .expect("arrowcert runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = arrowcert::report::read(&report).unwrap();
    assert!(r.summary.total >= 10_000, "only {} cases", r.summary.total);
    assert_eq!(r.summary.passed, r.summary.total, "{stdout}");
    assert!(r.cases.iter().all(|c| c.id.contains("device:emulated/")));
    for rule in ["device.event.covers-data", "consumer.sync.waits"] {
        let s = r.rules.iter().find(|s| s.rule == rule).unwrap();
        assert_eq!(s.verdict, Verdict::Pass, "{rule}");
    }
}

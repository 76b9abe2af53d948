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

/// (mutant, the rule it breaks, case filters, rules that follow from it).
const MUTANTS: &[(&str, &str, &[&str], &[&str])] = &[
    (
        "release-keeps-pointer",
        "array.release.marks-released",
        &["/primitive/"],
        &[],
    ),
    (
        "schema-release-keeps-pointer",
        "schema.release.marks-released",
        &["/primitive"],
        &[],
    ),
    (
        "reserved-left",
        "device.reserved.zero",
        &["device_array/primitive/"],
        &[],
    ),
    (
        "cpu-device-id-0",
        "device.cpu.id",
        &["device_array/primitive/"],
        &[],
    ),
    (
        "sync-event-on-cpu",
        "device.event.none",
        &["device_array/primitive/"],
        &[],
    ),
    (
        "wrong-device-type",
        "device.type.requested",
        &["device_array/primitive/"],
        &[],
    ),
    (
        "null-count-off-by-one",
        "array.null-count",
        &["/primitive/"],
        &[],
    ),
    (
        "union-with-validity",
        "array.layout.n-buffers",
        &["/union/"],
        &[],
    ),
    (
        "slice-offset-ignored",
        "array.values.roundtrip",
        &["/primitive/"],
        &[],
    ),
    (
        "eos-as-error",
        "stream.eos.released",
        &["producer/stream/primitive"],
        &[],
    ),
    (
        "last-error-garbage",
        "stream.error.message",
        &["producer/stream/primitive"],
        &[],
    ),
    (
        "negative-error-code",
        "stream.error.errno",
        &["producer/stream/primitive"],
        &[],
    ),
    (
        "stream-device-type",
        "device.stream.type",
        &["producer/device_stream/primitive"],
        // Every chunk (CPU) then differs from the stream's device type.
        &["stream.chunk.device"],
    ),
    (
        "leak-one-child",
        "array.release.frees",
        &["/primitive/"],
        &[],
    ),
    ("schema-leak", "schema.release.frees", &["/primitive"], &[]),
    (
        "stream-leak",
        "stream.release.frees",
        &["producer/stream/primitive"],
        &[],
    ),
    (
        "release-skips-children",
        "array.release.walks-children",
        &["/primitive/"],
        &[],
    ),
    (
        "schema-release-skips-children",
        "schema.release.walks-children",
        &["/primitive"],
        &[],
    ),
    (
        "release-frees-children-twice",
        "array.release.walks-children",
        &["/primitive/"],
        &[],
    ),
];

/// Leak verdicts need the allocation tracker, which only worker processes
/// have.
fn needs_workers(rule: &str) -> bool {
    rule.ends_with(".release.frees")
}

fn certify(mutant: &str, filters: &[&str], workers: bool) -> (Option<i32>, Report, String) {
    let (reference, _) = bundled();
    let mode = if workers { "workers" } else { "in-process" };
    let report = scratch("mutant-reports").join(format!("{mutant}-{mode}.json"));
    let out = Command::new(arrowcert_exe())
        .args(["certify", "--producer"])
        .arg(mutant_lib_cached())
        .args(if workers {
            &["--jobs", "1"][..]
        } else {
            &["--in-process"][..]
        })
        .args(["--cases", "0", "--report"])
        .arg(&report)
        .args(filters)
        .env("ARROWCERT_MUTANT", mutant)
        .env("ARROWCERT_MUTANT_BASE", reference)
        .output()
        .expect("arrowcert runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let r = arrowcert::report::read(&report).unwrap_or_else(|e| {
        panic!(
            "{mutant}: {e}\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code(), r, stdout)
}

fn mutant_lib_cached() -> &'static PathBuf {
    static LIB: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    LIB.get_or_init(mutant_lib)
}

fn failing(r: &Report) -> Vec<String> {
    r.rules
        .iter()
        .filter(|s| s.verdict == Verdict::Fail)
        .map(|s| s.rule.clone())
        .collect()
}

#[test]
fn the_wrapper_without_a_mutation_passes_everything() {
    for workers in [false, true] {
        let (code, r, out) = certify("none", &[], workers);
        assert_eq!(code, Some(0), "{out}");
        assert!(failing(&r).is_empty(), "{:?}", failing(&r));
        assert_eq!(r.summary.failed, 0);
    }
}

#[test]
fn every_mutant_breaks_exactly_its_rule() {
    let mut table = String::from(
        "# Mutants\n\nGenerated by `harness/tests/mutants.rs` (`ARROWCERT_BLESS=1 cargo test -p arrowcert --test mutants` rewrites it).\nEach mutant is the reference producer with one rule broken (`producers/mutants/mutant_producer.c`, chosen with `ARROWCERT_MUTANT`).\nLeak mutants run in worker processes, where the allocation tracker is preloaded; the others in-process.\n\n| mutant | rule it breaks | level | run | verdict | failing cases | other rules reported |\n|---|---|---|---|---|---|---|\n",
    );
    let mut problems = Vec::new();
    for (mutant, rule, filters, follows) in MUTANTS {
        let workers = needs_workers(rule);
        let (code, r, out) = certify(mutant, filters, workers);
        let target = r.rules.iter().find(|s| s.rule == *rule);
        let Some(target) = target else {
            problems.push(format!("{mutant}: {rule} is not in the report"));
            continue;
        };
        if target.verdict != Verdict::Fail {
            problems.push(format!(
                "{mutant}: {rule} is {:?}, not fail\n{out}",
                target.verdict
            ));
        }
        let others: Vec<String> = failing(&r).into_iter().filter(|f| f != rule).collect();
        for o in &others {
            if !follows.contains(&o.as_str()) {
                problems.push(format!("{mutant}: unrelated rule {o} also failed\n{out}"));
            }
        }
        let must = target.level == "MUST";
        let want = if must { Some(1) } else { Some(0) };
        if code != want {
            problems.push(format!(
                "{mutant}: exit code {code:?}, want {want:?} for a {} rule",
                target.level
            ));
        }
        table.push_str(&format!(
            "| `{mutant}` | `{rule}` | {} | {} | {:?} | {} of {} | {} |\n",
            target.level,
            if workers { "workers" } else { "in-process" },
            target.verdict,
            target.failed,
            target.checked,
            if others.is_empty() {
                "none".to_string()
            } else {
                others.join(", ")
            }
        ));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
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
    let name = arrowcert::cli::certify::scenario_of(&s.case).unwrap();
    let from = arrowcert::cli::certify::scenario_of(&s.from_case).unwrap();
    assert!(name.starts_with(&format!("{from}@")), "{name} from {from}");
    let small = arrowcert::gen::scenario(3, &name).unwrap();
    let big = arrowcert::gen::scenario(3, &from).unwrap();
    let size = |sc: &arrowcert::scenario::Scenario| {
        sc.schema.fields().len() * 1000 + sc.batches.iter().map(|b| b.num_rows()).sum::<usize>()
    };
    assert!(
        size(&small) < size(&big),
        "{} vs {}",
        s.scenario,
        arrowcert::gen::describe(&big)
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

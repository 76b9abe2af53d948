//! The fuzz oracles outside libFuzzer: every seed of every target passes
//! on the reference plugins (no false positives), the consumer oracle
//! catches a planted bug on the seeds alone, and `fuzz-report` turns a
//! run directory into a report whose finding replays.

mod support;

use std::process::Command;

use support::{arrowcert_exe, bundled, scratch};

fn seeds() -> std::path::PathBuf {
    let dir = scratch("fuzz-seeds");
    let out = Command::new(arrowcert_exe())
        .args(["fuzz-corpus", "--generated", "3", "--out"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    dir
}

fn files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    v
}

/// `arrowcert replay --fuzz TARGET` of `inputs` on the bundled reference
/// plugins: the exit status and standard output.
fn replay_on_reference(
    target: &str,
    inputs: &[std::path::PathBuf],
) -> (std::process::Output, String) {
    let (producer, consumer) = bundled();
    let out = Command::new(arrowcert_exe())
        .args(["replay", "--fuzz", target, "--producer"])
        .arg(producer)
        .arg("--consumer")
        .arg(consumer)
        .args(inputs)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    (out, text)
}

#[test]
fn every_seed_of_every_target_passes_on_the_reference_plugins() {
    let dir = seeds();
    for target in ["validate", "consumer", "producer", "async"] {
        // The built-in scenarios' seeds (the first ones by name) and the
        // generated ones: every layout family, in a test-sized budget.
        let all = files(&dir.join(target));
        assert!(all.len() >= 20, "{target}: {} seeds", all.len());
        let inputs: Vec<_> = all.iter().step_by(3).cloned().collect();
        let (out, text) = replay_on_reference(target, &inputs);
        assert_eq!(out.status.code(), Some(0), "{target}:\n{text}");
        let passed = text.lines().filter(|l| l.ends_with(" pass")).count();
        assert!(
            passed * 2 >= inputs.len(),
            "{target}: only {passed} cases passed:\n{text}"
        );
    }
}

/// Inputs the fuzzers once reported that were the harness's mistakes (an
/// oracle too strict, or a rule the validator lacked)
/// (`tests/fixtures/fuzz/<target>/<what>`): each must now pass.
#[test]
fn past_false_findings_pass() {
    let root = support::harness_dir().join("tests/fixtures/fuzz");
    for dir in files(&root) {
        let target = dir.file_name().unwrap().to_str().unwrap().to_string();
        let inputs = files(&dir);
        assert!(!inputs.is_empty(), "{target}: no fixtures");
        let (out, text) = replay_on_reference(&target, &inputs);
        assert_eq!(out.status.code(), Some(0), "{target}:\n{text}");
        // Each one passes, or is no checkable case (an input the bounds
        // now turn away).
        assert_eq!(
            text.lines()
                .filter(|l| l.ends_with(" pass") || l.contains(": no case ("))
                .count(),
            inputs.len(),
            "{target}:\n{text}"
        );
    }
}

#[test]
fn the_consumer_oracle_catches_a_consumer_that_never_releases() {
    let (_, consumer) = bundled();
    let lib = support::mutants::build(
        "fuzz-mutant",
        "consumers/mutants/mutant_consumer.c",
        "fuzz_mutant_consumer",
    );
    let dir = seeds();
    let out = Command::new(arrowcert_exe())
        .env("ARROWCERT_MUTANT", "leak")
        .env("ARROWCERT_MUTANT_BASE", consumer)
        .args(["replay", "--fuzz", "consumer", "--consumer"])
        .arg(&lib)
        .args(files(&dir.join("consumer")).into_iter().take(6))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("consumer.release.once"), "{text}");
}

#[test]
fn a_fuzz_report_replays_each_finding_with_both_commands() {
    let (_, consumer) = bundled();
    let lib = support::mutants::build(
        "fuzz-report-mutant",
        "consumers/mutants/mutant_consumer.c",
        "fuzz_report_mutant_consumer",
    );
    let dir = seeds();
    let runs = scratch("fuzz-report-runs");
    let run = runs.join("consumer-mutant");
    std::fs::create_dir_all(run.join("findings")).unwrap();
    let seed = files(&dir.join("consumer"))
        .into_iter()
        .find(|p| p.to_string_lossy().contains("builtin-primitive-0"))
        .unwrap();
    std::fs::copy(&seed, run.join("findings/crash-1")).unwrap();
    std::fs::write(
        run.join("run.json"),
        format!(
            r#"{{"target": "consumer", "consumer": "{}", "seconds": 2.0, "executions": 4000,
               "corpus": 10, "exit_code": 1, "command": "scripts/fuzz/run.sh consumer x 2"}}"#,
            lib.display()
        ),
    )
    .unwrap();
    let report = runs.join("nightly.json");
    let out = Command::new(arrowcert_exe())
        .env("ARROWCERT_MUTANT", "leak")
        .env("ARROWCERT_MUTANT_BASE", consumer)
        .args(["fuzz-report", "--runs"])
        .arg(&runs)
        .arg("--out")
        .arg(&report)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    let r = arrowcert::report::read(&report).unwrap();
    assert_eq!(r.fuzz.len(), 1);
    assert_eq!(r.fuzz[0].executions_per_second, 2000.0);
    assert_eq!(r.fuzz[0].findings, 1);
    assert_eq!(r.cases.len(), 1);
    let c = &r.cases[0];
    assert_eq!(c.verdict, arrowcert::report::Verdict::Fail, "{c:?}");
    assert!(
        c.violations
            .iter()
            .any(|v| v.rule == "consumer.release.once"),
        "{c:?}"
    );
    assert!(c.replay.contains("cargo fuzz run consumer"), "{}", c.replay);
    assert!(
        c.replay.contains("arrowcert replay --fuzz consumer"),
        "{}",
        c.replay
    );
}

/// The validate target's mutations reach every rule of full validation:
/// one input per rule (`tests/fixtures/fuzz-reach/validate/<rule>`, found
/// by the fuzzer) on which the harness reports that rule and the oracle
/// agrees with arrow-rs.
#[test]
fn the_validate_fuzzer_reaches_every_full_validation_rule() {
    use arrowcert::fuzz::{validate, Outcome};
    use arrowcert::report::Verdict;
    let dir = support::harness_dir().join("tests/fixtures/fuzz-reach/validate");
    let rules = [
        "array.utf8.valid",
        "array.decimal.precision",
        "array.date64.days",
        "array.time.range",
        "array.union.offsets-ordered",
        "array.map.keys-non-null",
        "array.layout.null-buffer",
        "schema.metadata.null-if-omitted",
    ];
    for rule in rules {
        let path = dir.join(rule);
        let data = std::fs::read(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (one input per rule)", path.display()));
        let Outcome::Checked(case) = validate::check(&data) else {
            panic!("{rule}: the input is no checkable case");
        };
        assert_eq!(
            case.verdict,
            Verdict::Pass,
            "{rule}: the oracle disagrees: {:?}",
            case.violations
        );
        // The NULL-buffer input is the empty-array case this issue made MUST.
        let needs = if rule == "array.layout.null-buffer" {
            "in an empty array"
        } else {
            ""
        };
        assert!(
            case.differences
                .iter()
                .any(|d| d.starts_with(&format!("harness: {rule} at")) && d.contains(needs)),
            "{rule} not reported:\n{}",
            case.differences.join("\n")
        );
    }
}

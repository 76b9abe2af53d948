//! `arrowcert roundtrip` end to end: the reference producer and consumer
//! agree on every gold file and every built-in scenario, along every path,
//! whole and sliced; a consumer that breaks the contract is reported.

mod support;

use std::collections::HashSet;

use arrowcert::plugin::Plugin;
use arrowcert::report::{Case, Verdict};
use arrowcert::roundtrip::{self, Filter, Options, Path};
use arrowcert::scenario;
use support::*;

fn reference() -> (Plugin, Plugin) {
    let (p, c) = bundled();
    (Plugin::load(p).unwrap(), Plugin::load(c).unwrap())
}

/// Cases that did not pass clean: a failure, or a pass with types, names
/// or metadata changed (the reference pair keeps everything).
fn not_passed(cases: &[Case]) -> Vec<String> {
    cases
        .iter()
        .filter(|c| c.verdict != Verdict::Pass || !c.changed.is_empty())
        .map(|c| {
            format!(
                "{} {:?}: {:?} {:?} {:?}",
                c.id, c.verdict, c.message, c.differences, c.changed
            )
        })
        .collect()
}

#[test]
fn every_gold_file_round_trips_on_every_path() {
    let (producer, consumer) = reference();
    let scenarios = scenario::gold_dir(&gold_dir()).expect("gold files beside the checkout");
    assert_eq!(scenarios.len(), 32, "32 gold streams");
    let cases = roundtrip::run(
        &producer,
        &consumer,
        &scenarios,
        &Filter::default(),
        &Options::default(),
        |_| {},
    );
    assert!(not_passed(&cases).is_empty(), "{:#?}", not_passed(&cases));

    // Every path ran for every file; per-batch paths ran whole and sliced
    // for every batch.
    for s in &scenarios {
        for path in Path::ALL {
            let ran: Vec<&Case> = cases
                .iter()
                .filter(|c| c.scenario == s.name && c.path == path.name())
                .collect();
            match path {
                Path::DeviceArray | Path::Array => {
                    assert_eq!(ran.len(), 2 * s.batches.len(), "{} {}", s.name, path.name());
                    assert_eq!(
                        ran.iter().filter(|c| c.slice.is_some()).count(),
                        s.batches.len()
                    );
                }
                _ => assert_eq!(ran.len(), 1, "{} {}", s.name, path.name()),
            }
        }
    }
    // Slices with a non-zero offset were exercised.
    assert!(cases
        .iter()
        .any(|c| c.slice.is_some_and(|s| s.offset > 0 && s.length > 0)));
}

#[test]
fn every_builtin_scenario_round_trips_on_every_path() {
    let (producer, consumer) = reference();
    let scenarios = scenario::builtin();
    let cases = roundtrip::run(
        &producer,
        &consumer,
        &scenarios,
        &Filter::default(),
        &Options::default(),
        |_| {},
    );
    assert!(not_passed(&cases).is_empty(), "{:#?}", not_passed(&cases));
    let paths: HashSet<&str> = cases.iter().map(|c| c.path.as_str()).collect();
    assert_eq!(paths.len(), 5);
}

#[test]
fn case_ids_are_unique_and_stable() {
    let scenarios = scenario::builtin();
    let plan = roundtrip::plan(&scenarios);
    let ids: HashSet<&str> = plan.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids.len(), plan.len());
    assert!(ids.contains("device_array/primitive/batch:0/slice:13+12"));
    assert!(ids.contains("async/nested"));
    assert_eq!(
        plan,
        roundtrip::plan(&scenario::builtin()),
        "same plan twice"
    );
}

/// A consumer that keeps what it is given (never releases or moves it) and
/// hands back bytes that are not IPC.
const LEAKY_CONSUMER: &str = r#"
#include "arrowcert_plugin.h"
int32_t arrowcert_plugin_abi_version(void) { return 1; }
const char* arrowcert_plugin_name(void) { return "leaky consumer"; }
static uint8_t junk[4] = {1, 2, 3, 4};
int arrowcert_consume_array(struct ArrowSchema* s, struct ArrowArray* a, uint8_t** out, int64_t* len) {
  (void)s; (void)a; *out = junk; *len = 4; return 0;
}
"#;

#[test]
fn a_consumer_that_does_not_release_is_reported() {
    let (producer, _) = reference();
    let leaky = Plugin::load(&cc_plugin("leaky_consumer", LEAKY_CONSUMER)).unwrap();
    let scenarios = scenario::builtin();
    let filter = Filter {
        patterns: vec!["array/primitive/batch:0".into()],
        exact: true,
        skip: vec![],
    };
    let cases = roundtrip::run(
        &producer,
        &leaky,
        &scenarios,
        &filter,
        &Options::default(),
        |_| {},
    );
    assert_eq!(cases.len(), 1);
    let c = &cases[0];
    assert_eq!(c.verdict, Verdict::Fail);
    assert!(
        c.differences
            .iter()
            .any(|d| d.contains("without releasing or moving the schema")),
        "{c:?}"
    );
    assert!(
        c.differences
            .iter()
            .any(|d| d.contains("without releasing or moving the array")),
        "{c:?}"
    );
    assert!(
        c.differences
            .iter()
            .any(|d| d.contains("not an Arrow IPC stream")),
        "{c:?}"
    );
}

#[test]
fn missing_entry_points_are_skipped_with_a_reason_never_passed() {
    let (producer, _) = reference();
    let leaky = Plugin::load(&cc_plugin("leaky_consumer2", LEAKY_CONSUMER)).unwrap();
    let scenarios = scenario::builtin();
    let filter = Filter {
        patterns: vec!["stream/primitive".into(), "async/primitive".into()],
        exact: true,
        skip: vec![],
    };
    let cases = roundtrip::run(
        &producer,
        &leaky,
        &scenarios,
        &filter,
        &Options::default(),
        |_| {},
    );
    assert_eq!(cases.len(), 2);
    for c in &cases {
        assert_eq!(c.verdict, Verdict::Skip, "{c:?}");
        assert!(
            c.message
                .as_deref()
                .unwrap()
                .contains("is not exported by the plugin"),
            "{c:?}"
        );
    }
}

#[test]
fn cli_runs_writes_a_report_and_replays_one_case() {
    let (p, c) = bundled();
    let dir = scratch("cli-report");
    let report = dir.join("r.json");
    let out = run_arrowcert(&[
        "roundtrip",
        "--producer",
        p.to_str().unwrap(),
        "--consumer",
        c.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("roundtrip result: ok."), "{text}");
    let r = arrowcert::report::read(&report).expect("the report parses");
    assert!(r.complete);
    assert_eq!(r.summary.total as usize, r.cases.len());
    assert_eq!(r.summary.passed, r.summary.total);
    assert_eq!(r.plugins.len(), 2);
    assert!(r.plugins.iter().all(|p| p.sha256.len() == 64));
    // The versions `arrowcert --version` prints (tests/version.rs).
    assert_eq!(r.tool, arrowcert::report::Tool::default());
    assert_eq!(r.tool.report_version, r.report_version);

    // The replay command of a case runs exactly that case.
    let case = r.cases.iter().find(|c| c.slice.is_some()).unwrap();
    assert!(case.replay.contains("--exact"), "{}", case.replay);
    let report2 = dir.join("r2.json");
    let out = run_arrowcert(&[
        "roundtrip",
        "--producer",
        p.to_str().unwrap(),
        "--consumer",
        c.to_str().unwrap(),
        "--report",
        report2.to_str().unwrap(),
        "--exact",
        &case.id,
    ]);
    assert_eq!(out.status.code(), Some(0));
    let r2 = arrowcert::report::read(&report2).unwrap();
    assert_eq!(r2.cases.len(), 1);
    assert_eq!(r2.cases[0].id, case.id);

    // --list prints the plan without running it.
    let out = run_arrowcert(&[
        "roundtrip",
        "--producer",
        p.to_str().unwrap(),
        "--consumer",
        c.to_str().unwrap(),
        "--list",
        "async/",
    ]);
    let listed = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        listed.lines().count(),
        scenario::builtin().len(),
        "{listed}"
    );
    assert!(listed
        .lines()
        .all(|l| l.starts_with("async/") && l.ends_with(": case")));
}

#[test]
fn cli_exit_code_is_one_when_a_case_fails() {
    let (p, _) = bundled();
    let leaky = cc_plugin("leaky_consumer3", LEAKY_CONSUMER);
    let report = scratch("cli-fail").join("r.json");
    let out = run_arrowcert(&[
        "roundtrip",
        "--producer",
        p.to_str().unwrap(),
        "--consumer",
        leaky.to_str().unwrap(),
        "--report",
        report.to_str().unwrap(),
        "array/primitive/batch:0",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("FAILED") && text.contains("replay: arrowcert roundtrip"),
        "{text}"
    );
    let r = arrowcert::report::read(&report).unwrap();
    assert_eq!(r.summary.failed, 2, "whole and sliced");
}

#[test]
fn committed_json_schema_is_current() {
    let committed = std::fs::read_to_string(workspace_dir().join("reports/report.schema.json"))
        .expect("reports/report.schema.json is committed");
    assert_eq!(
        committed,
        arrowcert::report::json_schema(),
        "regenerate with: cargo run -p arrowcert -- report-schema > reports/report.schema.json"
    );
}

/// `arrowcert roundtrip` from the reference producer into a consumer
/// mutant wrapping the reference consumer.
fn into_consumer_mutant(mutant: &str, report: &std::path::Path) -> std::process::Output {
    let (p, c) = bundled();
    std::process::Command::new(arrowcert_exe())
        .env("ARROWCERT_MUTANT", mutant)
        .env("ARROWCERT_MUTANT_BASE", c)
        .args(["roundtrip", "--producer"])
        .arg(p)
        .arg("--consumer")
        .arg(mutant_consumer())
        .arg("--report")
        .arg(report)
        .output()
        .expect("arrowcert runs")
}

#[test]
fn a_pair_that_changes_only_types_passes_and_says_what_changed() {
    let report = scratch("rt-types-changed").join("r.json");
    let out = into_consumer_mutant("all-columns-nullable", &report);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("passed with changes ("), "{text}");
    let r = arrowcert::report::read(&report).unwrap();
    assert_eq!(r.summary.failed + r.summary.errors, 0, "{text}");
    let changed: Vec<&Case> = r.cases.iter().filter(|c| !c.changed.is_empty()).collect();
    // Only scenarios with a non-nullable field change; every one that
    // changed passed and names the nullability.
    assert!(!changed.is_empty(), "{text}");
    assert!(changed.len() < r.summary.passed as usize, "{text}");
    for c in &changed {
        assert_eq!(c.verdict, Verdict::Pass, "{c:?}");
        assert!(c.differences.is_empty(), "{c:?}");
        assert!(
            c.changed.iter().any(|d| d.contains("nullable is true")),
            "{c:?}"
        );
    }
}

#[test]
fn a_pair_that_loses_values_fails() {
    let report = scratch("rt-values-lost").join("r.json");
    let out = into_consumer_mutant("ignore-offset", &report);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    let r = arrowcert::report::read(&report).unwrap();
    let failed: Vec<&Case> = r
        .cases
        .iter()
        .filter(|c| c.verdict == Verdict::Fail)
        .collect();
    assert!(!failed.is_empty(), "{text}");
    // Only sliced cases (a non-zero offset) can fail this way.
    assert!(failed.iter().all(|c| c.slice.is_some()), "{failed:#?}");
    assert!(failed.iter().all(|c| c.changed.is_empty()), "{failed:#?}");
}

/// A run that drew its own seed resumes with it: `--resume` without
/// `--seed` takes the seed from the report (issue 24: the printed resume
/// command used to draw a fresh seed and be refused as other data).
#[test]
fn roundtrip_resumes_a_run_that_drew_its_own_seed() {
    let (p, c) = bundled();
    let report = scratch("roundtrip-resume").join("r.json");
    let _ = std::fs::remove_file(&report);
    let run = |extra: &[&str]| {
        let mut args = vec![
            "roundtrip",
            "--in-process",
            "--producer",
            p.to_str().unwrap(),
            "--consumer",
            c.to_str().unwrap(),
            "--cases",
            "3",
            "--report",
            report.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        run_arrowcert(&args)
    };
    // A partial run (the stream paths), with a seed of its own drawing.
    // Every generated scenario has a stream case; a generated scenario
    // may have no batch, hence no `array/` case (a seed drawn in CI did).
    let out = run(&["stream/"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let first = arrowcert::report::read(&report).unwrap();
    let seed = first.seed.expect("a drawn seed is kept in the report");
    assert!(first.cases.iter().any(|c| c.id.contains("gen/")));
    // Resumed as the interrupt message says: no --seed.
    let out = run(&["--resume", report.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("resuming"), "{text}");
    let merged = arrowcert::report::read(&report).unwrap();
    assert_eq!(merged.seed, Some(seed));
    assert!(merged.cases.len() > first.cases.len());
}

//! `arrowcert certify`, `rules` and `explain` from the command line: the
//! reference producer gets a clean report on built-in and gold data, every
//! time; reports carry rule verdicts; JUnit XML is written.

mod support;

use std::process::Command;

use arrowcert::report::{Report, Verdict};
use support::*;

/// Runs `arrowcert certify`; without --producer or --consumer, the
/// reference producer alone.
fn certify(args: &[&str], name: &str) -> (Option<i32>, Report, String) {
    let report = scratch("certify").join(format!("{name}.json"));
    let side: &[&str] = if args
        .iter()
        .any(|a| *a == "--producer" || *a == "--consumer")
    {
        &[]
    } else {
        &["--producer", "reference"]
    };
    let out = Command::new(arrowcert_exe())
        .arg("certify")
        .args(side)
        .args(args)
        .arg("--report")
        .arg(&report)
        .output()
        .expect("arrowcert runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let r = arrowcert::report::read(&report).unwrap_or_else(|e| panic!("{e}\n{stdout}"));
    support::schema::assert_valid_report(&report);
    // Every report records what `arrowcert --version` prints.
    assert_eq!(r.tool, arrowcert::report::Tool::default(), "{stdout}");
    (out.status.code(), r, stdout)
}

fn assert_clean(code: Option<i32>, r: &Report, out: &str) {
    assert_eq!(code, Some(0), "{out}");
    assert!(r.complete);
    assert_eq!(r.summary.total, r.planned);
    assert_eq!(r.summary.passed, r.summary.total, "{out}");
    let failing: Vec<&str> = r
        .rules
        .iter()
        .filter(|s| s.verdict == Verdict::Fail)
        .map(|s| s.rule.as_str())
        .collect();
    assert!(failing.is_empty(), "{failing:?}");
    // The run exercised the core of every area.
    for rule in [
        "schema.format.valid",
        "schema.release.marks-released",
        "array.null-count",
        "array.move.child",
        "array.release.walks-children",
        "schema.release.walks-children",
        "array.values.roundtrip",
        "device.reserved.zero",
        "stream.eos.released",
        "stream.results.outlive",
        "stream.threads.serial",
    ] {
        let s = r.rules.iter().find(|s| s.rule == rule).expect(rule);
        assert_eq!(s.verdict, Verdict::Pass, "{rule}: {s:#?}\n{out}");
        assert!(s.checked > 0, "{rule}: {s:#?}");
    }
}

#[test]
fn the_reference_producer_passes_every_rule_on_built_in_data_in_workers() {
    bundled();
    let (code, r, out) = certify(&["--jobs", "2", "--cases", "0"], "builtin");
    assert_clean(code, &r, &out);
    // Workers preload the allocation tracker: the leak rules are judged.
    for rule in [
        "schema.release.frees",
        "array.release.frees",
        "stream.release.frees",
    ] {
        let s = r.rules.iter().find(|s| s.rule == rule).unwrap();
        assert_eq!(s.verdict, Verdict::Pass, "{rule}: {out}");
        assert!(s.checked > 0, "{rule}");
    }
    // Slices of the whole stream (the sliced entry points) on every stream
    // path: each scenario's, every one passed.
    for path in [
        "producer/stream/",
        "producer/device_stream/",
        "producer/async/r4/",
        "producer/device:emulated/device_stream/",
    ] {
        let sliced: Vec<_> = r
            .cases
            .iter()
            .filter(|c| c.id.starts_with(path) && c.batch.is_none() && c.slice.is_some())
            .collect();
        assert!(sliced.len() >= 20, "{path}: {} sliced cases", sliced.len());
        for c in &sliced {
            assert_eq!(c.verdict, Verdict::Pass, "{}: {:?}", c.id, c.message);
            assert!(
                c.checked
                    .iter()
                    .any(|r| r.contains("values") || r == "async.array.valid"),
                "{}",
                c.id
            );
        }
        // An empty slice, and one that crosses a batch boundary (primitive's
        // batches are 37 rows and 1).
        assert!(sliced.iter().any(|c| c.id.ends_with("+0")), "{path}");
        assert!(
            sliced
                .iter()
                .any(|c| c.id.ends_with("/primitive/slice:25+13")),
            "{path}"
        );
    }
}

#[test]
fn in_process_the_leak_rules_are_not_exercised_with_a_reason() {
    bundled();
    // On the CPU only: on the emulated device the device's own count of
    // allocated bytes measures leaks in this process too.
    let (code, r, out) = certify(
        &["--in-process", "--cases", "0", "--device", "cpu"],
        "builtin-in-process",
    );
    assert_clean(code, &r, &out);
    // Rules nothing exercised are `skip`, never counted as passed, and say
    // why when a case knew.
    let frees = r
        .rules
        .iter()
        .find(|s| s.rule == "array.release.frees")
        .unwrap();
    assert_eq!(frees.verdict, Verdict::Skip);
    assert_eq!(frees.checked, 0);
    assert!(
        frees
            .reason
            .as_deref()
            .is_some_and(|r| r.contains("arrowcert_bytes_allocated")),
        "{frees:?}"
    );
    assert!(r.cases.iter().any(|c| c
        .not_exercised
        .iter()
        .any(|n| n.rule == "array.release.frees")));
}

#[test]
fn the_reference_producer_passes_every_rule_on_the_gold_files_twice_alike() {
    bundled();
    let gold = gold_dir();
    let gold = gold.to_str().unwrap();
    let only_gold = ["--no-builtin", "--cases", "0", "--gold", gold];
    let (code, first, out) = certify(&[&["--in-process"][..], &only_gold].concat(), "gold-1");
    assert_clean(code, &first, &out);
    assert!(first.cases.iter().all(|c| c.scenario.starts_with("gold/")));
    let (code, second, out) = certify(&[&["--jobs", "2"][..], &only_gold].concat(), "gold-2");
    assert_clean(code, &second, &out);
    // The same verdicts, and the same rules attempted: what a worker checks
    // with its allocation tracker, an in-process run lists as not
    // exercised.
    let verdicts = |r: &Report| {
        r.cases
            .iter()
            .map(|c| {
                let mut attempted: Vec<String> = c
                    .checked
                    .iter()
                    .cloned()
                    .chain(c.not_exercised.iter().map(|n| n.rule.clone()))
                    .collect();
                attempted.sort();
                (c.id.clone(), c.verdict, attempted)
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(verdicts(&first), verdicts(&second));
    assert_eq!(first.rules.len(), second.rules.len());
}

/// Generated scenarios over every type: clean with several seeds, in this
/// process and in workers alike, and a seed draws the same run twice.
#[test]
fn the_reference_producer_passes_generated_scenarios_with_several_seeds() {
    bundled();
    // Leak accounting needs the tracker preloaded into workers: in this
    // process `*.release.frees` is not exercised, the rest is the same.
    let comparable = |r: &Report| {
        r.cases
            .iter()
            .map(|c| {
                let checked: Vec<String> = c
                    .checked
                    .iter()
                    // ... and the cache a leak suspicion may turn out to be.
                    .filter(|r| {
                        !r.ends_with(".release.frees") && r.as_str() != "array.release.cache"
                    })
                    .cloned()
                    .collect();
                (c.id.clone(), c.verdict, checked)
            })
            .collect::<Vec<_>>()
    };
    for seed in ["1", "77"] {
        let gen = ["--no-builtin", "--cases", "120", "--seed", seed];
        let (code, a, out) = certify(&[&["--jobs", "2"][..], &gen].concat(), "gen-workers");
        assert_clean(code, &a, &out);
        assert_eq!(a.seed, Some(seed.parse().unwrap()));
        assert!(a.cases.len() > 1000, "{}", a.cases.len());
        assert!(a.cases.iter().all(|c| c.scenario.starts_with("gen/")));
        assert!(out.contains(&format!("seed: {seed}")), "{out}");
        let (code, b, out) = certify(&[&["--in-process"][..], &gen].concat(), "gen-in-process");
        assert_clean(code, &b, &out);
        let replay = a.cases[0].replay.clone();
        let (a, b) = (comparable(&a), comparable(&b));
        assert_eq!(a.len(), b.len());
        if let Some((x, y)) = a.iter().zip(&b).find(|(x, y)| x != y) {
            panic!("workers and in-process differ: {x:?} vs {y:?}");
        }
        // Every generated case's replay names the run's seed.
        assert!(replay.contains(&format!("--seed {seed}")), "{}", replay);
        assert!(replay.starts_with("arrowcert replay "));
    }
    // Without --seed, each run draws a fresh one and says which.
    // Three scenarios of a seed nobody chose need not reach every rule
    // (assert_clean's list), so only cleanliness is asserted here.
    let (code, r, out) = certify(
        &["--in-process", "--no-builtin", "--cases", "3"],
        "gen-fresh",
    );
    assert_eq!(code, Some(0), "{out}");
    assert!(r.complete);
    assert_eq!(r.summary.passed, r.summary.total, "{out}");
    assert!(r.rules.iter().all(|s| s.verdict != Verdict::Fail), "{out}");
    let seed = r.seed.expect("a drawn seed is reported");
    assert!(out.contains(&format!("seed: {seed}")), "{out}");
}

/// The consumer rules the reference consumer must pass, and exercise.
const CONSUMER_RULES: &[&str] = &[
    "consumer.release.once",
    "consumer.release.no-children",
    "consumer.release.not-released",
    "consumer.release.checks-released",
    "consumer.move.marks-source",
    "consumer.read.values",
    "consumer.read.metadata",
    "consumer.read.after-release",
    "consumer.data.immutable",
    "consumer.stream.release",
    "consumer.stream.last-error",
    "consumer.stream.serial",
    "consumer.stream.error",
];

/// The consumer rule that needs the allocation tracker: judged in workers,
/// not exercised (with the reason) in process.
const CONSUMER_TRACKER_RULE: &str = "consumer.async.release-frees";

fn assert_consumer_clean(code: Option<i32>, r: &Report, out: &str, workers: bool) {
    assert_eq!(code, Some(0), "{out}");
    assert!(r.complete);
    assert_eq!(r.summary.passed, r.summary.total, "{out}");
    for rule in CONSUMER_RULES {
        let s = r.rules.iter().find(|s| s.rule == *rule).expect(rule);
        assert_eq!(s.verdict, Verdict::Pass, "{rule}: {out}");
        assert!(s.checked > 0, "{rule}");
    }
    // CPU exports carry no sync event; the emulated device's do, and the
    // run covers it by default.
    let sync = r
        .rules
        .iter()
        .find(|s| s.rule == "consumer.sync.waits")
        .unwrap();
    assert_eq!(sync.verdict, Verdict::Pass, "{sync:?}");
    assert!(sync.checked > 0);
    assert!(r
        .cases
        .iter()
        .filter(|c| !c.id.contains("device:"))
        .flat_map(|c| &c.not_exercised)
        .any(|n| n.rule == "consumer.sync.waits" && n.reason.contains("sync event")));
    // The async consumer rules are judged in the same run.
    let async_rules: Vec<_> = r
        .rules
        .iter()
        .filter(|s| s.rule.starts_with("consumer.async."))
        .collect();
    assert_eq!(async_rules.len(), 14);
    for s in async_rules {
        if (s.rule == CONSUMER_TRACKER_RULE || s.rule == "consumer.async.release-cache") && !workers
        {
            assert_eq!(s.verdict, Verdict::Skip, "{}: {out}", s.rule);
            assert!(r
                .cases
                .iter()
                .flat_map(|c| &c.not_exercised)
                .any(|n| n.rule == s.rule && n.reason.contains("tracker")));
            continue;
        }
        // consumer.async.errno judges refusals: a consumer that refuses
        // nothing does not exercise it (not exercised: neither pass nor
        // failure).
        if s.rule == "consumer.async.errno" {
            assert_ne!(s.verdict, Verdict::Fail, "{}: {out}", s.rule);
            continue;
        }
        assert_eq!(s.verdict, Verdict::Pass, "{}: {out}", s.rule);
    }
}

/// The reference consumer passes every consumer rule on generated, built-in
/// and gold data, in both encodings and on the error paths, with the same
/// verdicts in this process and in workers.
#[test]
fn the_reference_consumer_passes_every_consumer_rule_alike_in_process_and_in_workers() {
    bundled();
    let gold = gold_dir();
    let data = [
        "--consumer",
        "reference",
        "--cases",
        "150",
        "--seed",
        "11",
        "--gold",
        gold.to_str().unwrap(),
    ];
    let (code, a, out) = certify(&[&["--jobs", "2"][..], &data].concat(), "consumer-workers");
    assert_consumer_clean(code, &a, &out, true);
    assert!(a.cases.len() > 2000, "{}", a.cases.len());
    for prefix in [
        "consumer/array/plain/",
        "consumer/array/varied/",
        "consumer/device_array/varied/",
        "consumer/stream/varied/",
        "consumer/device_stream/plain/",
        "consumer/stream_error/schema-EINVAL/",
        "consumer/stream_error/next-EIO/",
        "consumer/device_stream_error/next-ENOMEM/",
        "consumer/released/array/",
        "consumer/released/schema/",
    ] {
        assert!(a.cases.iter().any(|c| c.id.starts_with(prefix)), "{prefix}");
    }
    assert!(a.cases.iter().any(|c| c.scenario.starts_with("gold/")));
    assert!(a.plugins.iter().all(|p| p.role == "consumer"));
    let (code, b, out) = certify(
        &[&["--in-process"][..], &data].concat(),
        "consumer-in-process",
    );
    assert_consumer_clean(code, &b, &out, false);
    let verdicts = |r: &Report| {
        r.cases
            .iter()
            .map(|c| {
                let checked: Vec<String> = c
                    .checked
                    .iter()
                    .filter(|r| {
                        *r != CONSUMER_TRACKER_RULE && r.as_str() != "consumer.async.release-cache"
                    })
                    .cloned()
                    .collect();
                (c.id.clone(), c.verdict, checked)
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(verdicts(&a), verdicts(&b));
}

/// `--producer X --consumer X` certifies both sides of one library in one
/// run, with one report of the same shape.
#[test]
fn both_sides_of_a_library_are_certified_in_one_run() {
    bundled();
    let (code, r, out) = certify(
        &[
            "--producer",
            "reference",
            "--consumer",
            "reference",
            "--in-process",
            "--cases",
            "0",
        ],
        "both-sides",
    );
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(r.summary.passed, r.summary.total, "{out}");
    let roles: Vec<&str> = r.plugins.iter().map(|p| p.role.as_str()).collect();
    assert_eq!(roles, ["producer", "consumer"]);
    assert!(r.cases.iter().any(|c| c.id.starts_with("producer/")));
    assert!(r.cases.iter().any(|c| c.id.starts_with("consumer/")));
    for rule in [
        "array.values.roundtrip",
        "stream.eos.released",
        "consumer.read.values",
    ] {
        let s = r.rules.iter().find(|s| s.rule == rule).expect(rule);
        assert_eq!(s.verdict, Verdict::Pass, "{rule}");
    }
    assert!(
        out.contains("producer arrowcert reference producer"),
        "{out}"
    );
    assert!(
        out.contains("consumer arrowcert reference consumer"),
        "{out}"
    );
    // A consumer case replays against the consumer.
    let case = r
        .cases
        .iter()
        .find(|c| c.id.starts_with("consumer/array/varied/"))
        .unwrap();
    assert!(
        case.replay.contains("--consumer reference"),
        "{}",
        case.replay
    );
    let args: Vec<String> = shell_words(&case.replay);
    let out = Command::new(arrowcert_exe())
        .args(&args[1..])
        .output()
        .expect("arrowcert runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains(&format!("case {} ... ok", case.id)),
        "{stdout}"
    );
}

/// Splits a replay command as a shell would (single quotes only).
fn shell_words(cmd: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    for ch in cmd.chars() {
        match ch {
            '\'' => quoted = !quoted,
            ' ' if !quoted => {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
            }
            c => cur.push(c),
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// `arrowcert replay` reruns one case exactly, prints it, and writes no
/// report unless asked; a bad case ID is a usage error.
#[test]
fn replay_reruns_one_case() {
    bundled();
    let run = |args: &[&str]| {
        let out = Command::new(arrowcert_exe()).args(args).output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let listed = Command::new(arrowcert_exe())
        .args([
            "certify",
            "--no-builtin",
            "--cases",
            "6",
            "--seed",
            "9",
            "--list",
        ])
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&listed.stdout).into_owned();
    let case = listed
        .lines()
        .filter_map(|l| l.strip_suffix(": case"))
        .find(|l| l.contains("/slice:"))
        .expect("a sliced generated case")
        .to_string();
    let (code, out, err) = run(&["replay", "--seed", "9", &case]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains(&format!("case {case} ... ok")), "{out}");
    assert!(out.contains("1 cases: 1 passed"), "{out}");
    assert!(!out.contains("report:"), "{out}");
    let (code, _, err) = run(&["replay", "not-a-case-id"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("not a certification case ID"), "{err}");
    let (code, _, err) = run(&["replay", "producer/array/no-such-scenario/batch:0"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("no such scenario"), "{err}");
}

#[test]
fn junit_has_one_test_case_per_rule() {
    bundled();
    let junit = scratch("certify").join("junit.xml");
    let (code, r, out) = certify(
        &[
            "--in-process",
            "--junit",
            junit.to_str().unwrap(),
            "primitive",
        ],
        "junit",
    );
    assert_eq!(code, Some(0), "{out}");
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.starts_with("<?xml"));
    // One test case per rule and one per case (two suites).
    assert_eq!(
        xml.matches("<testcase ").count(),
        r.rules.len() + r.cases.len()
    );
    assert!(xml.contains("name=\"array.null-count\""));
}

#[test]
fn rules_and_explain_print_the_catalogue() {
    let run = |args: &[&str]| {
        let out = Command::new(arrowcert_exe()).args(args).output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, all, _) = run(&["rules"]);
    assert_eq!(code, Some(0));
    let listed = all
        .lines()
        .filter(|l| !l.trim().is_empty() && l.contains('.'))
        .count();
    assert!(listed >= arrowcert::rules::RULES.len(), "{all}");
    let (code, text, _) = run(&["explain", "array.null-count"]);
    assert_eq!(code, Some(0));
    assert!(text.contains("CDataInterface.rst"), "{text}");
    assert!(text.contains("MAY be -1"), "{text}");
    let (code, text, _) = run(&["rules", "device.*"]);
    assert_eq!(code, Some(0));
    assert!(text.lines().all(|l| l.starts_with("device.")), "{text}");
    let (code, _, err) = run(&["explain", "array.no-such-rule"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("no rule array.no-such-rule"), "{err}");
}

/// `--resume` keeps the cases a report already has and runs the rest; the
/// seed comes from the report; other data is refused.
#[test]
fn certify_resumes_a_partial_run_with_its_seed() {
    bundled();
    let report = scratch("certify").join("resume.json");
    let run = |args: &[&str]| {
        let out = Command::new(arrowcert_exe())
            .arg("certify")
            .args(["--in-process", "--no-builtin", "--cases", "5"])
            .args(args)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let path = report.to_str().unwrap();
    let (code, out, _) = run(&["--seed", "2", "--report", path, "producer/schema/"]);
    assert_eq!(code, Some(0), "{out}");
    let first = arrowcert::report::read(&report).unwrap();
    // Five drawn scenarios, the single-type ones and the shapes.
    let generated = 5
        + arrowcert::generate::types::family_names().len()
        + arrowcert::generate::shapes::NAMES.len();
    assert_eq!(first.cases.len(), generated);
    let (code, out, err) = run(&["--resume", path]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(
        out.contains(&format!("resuming {path}: {generated} of ")),
        "{out}"
    );
    let merged = arrowcert::report::read(&report).unwrap();
    assert!(merged.complete);
    assert_eq!(merged.seed, Some(2));
    assert_eq!(merged.cases.len() as u64, merged.planned);
    assert!(merged.cases.len() > generated);
    for c in &first.cases {
        let kept = merged.cases.iter().find(|m| m.id == c.id).unwrap();
        assert_eq!(kept.duration_us, c.duration_us, "{} was rerun", c.id);
    }
    let (code, _, err) = run(&["--resume", path, "--seed", "3"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("made with data from"), "{err}");
}

/// The schema validator the tests use catches what it must: a report that
/// lacks a required member or has a value of the wrong kind fails.
#[test]
fn the_schema_check_rejects_broken_reports() {
    bundled();
    let (code, _, out) = certify(&["--in-process", "--cases", "2", "--seed", "4"], "schema");
    assert_eq!(code, Some(0), "{out}");
    let path = scratch("certify").join("schema.json");
    let good: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let schema = support::schema::report_schema();
    assert!(support::schema::validate(&schema, &good).is_empty());
    let mut missing = good.clone();
    missing.as_object_mut().unwrap().remove("summary");
    let e = support::schema::validate(&schema, &missing);
    assert!(
        e.iter().any(|e| e.contains("missing required summary")),
        "{e:?}"
    );
    let mut wrong = good.clone();
    wrong["cases"][0]["verdict"] = serde_json::json!("bogus");
    wrong["duration_ms"] = serde_json::json!(-5);
    wrong["shrunk"] = serde_json::json!([{"target": 1}]);
    let e = support::schema::validate(&schema, &wrong);
    assert!(
        e.iter().any(|e| e.starts_with("$.cases[0].verdict")),
        "{e:?}"
    );
    assert!(e.iter().any(|e| e.starts_with("$.duration_ms")), "{e:?}");
    assert!(e.iter().any(|e| e.starts_with("$.shrunk[0]")), "{e:?}");
}

/// The async suite, both sides, with the reference plugins: every async
/// rule passes over drawn schedules and deliveries, and three runs with
/// one seed plan the same cases and give the same verdicts and rules
/// checked, although callbacks come from several threads.
#[test]
fn the_async_suite_passes_and_repeats_exactly_for_a_seed() {
    bundled();
    let args = [
        "--producer",
        "reference",
        "--consumer",
        "reference",
        "--cases",
        "60",
        "--seed",
        "5",
        "--jobs",
        "2",
        "async",
    ];
    let mut runs = Vec::new();
    for i in 0..3 {
        let (code, r, out) = certify(&args, &format!("async-repeat-{i}"));
        assert_eq!(code, Some(0), "{out}");
        assert_eq!(r.summary.passed, r.summary.total, "{out}");
        for s in r
            .rules
            .iter()
            .filter(|s| s.rule.starts_with("async.") || s.rule.starts_with("consumer.async."))
        {
            // Rules about refusals and failed extractions, which the
            // reference never makes.
            if s.rule == "consumer.async.errno" || s.rule == "async.extract.error-follows" {
                assert_ne!(s.verdict, Verdict::Fail, "{}: {out}", s.rule);
                continue;
            }
            assert_eq!(s.verdict, Verdict::Pass, "{}: {out}", s.rule);
        }
        let producer = r
            .cases
            .iter()
            .filter(|c| c.id.starts_with("producer/async/"))
            .count();
        let consumer = r
            .cases
            .iter()
            .filter(|c| c.id.starts_with("consumer/async/"))
            .count();
        // Every fixed schedule on each of the 9 built-in scenarios, but the
        // two invalid-request ones on a few of them only.
        let fixed = arrowcert::asynchronous::schedule::Schedule::fixed().len();
        let invalid_on = arrowcert::certify::asynchronous::INVALID_REQUEST_SCENARIOS.len();
        assert!(
            producer >= 120 + 9 * (fixed - 2) + 2 * invalid_on && consumer >= 120 + 9 * 5,
            "{producer} {consumer}"
        );
        let verdicts: Vec<(String, Verdict, Vec<String>)> = r
            .cases
            .iter()
            .map(|c| (c.id.clone(), c.verdict, c.checked.clone()))
            .collect();
        runs.push(verdicts);
    }
    assert_eq!(runs[0], runs[1]);
    assert_eq!(runs[1], runs[2]);
}

/// `ARROWCERT_KEEP_OUTPUT=DIR` keeps what a consumer wrote back, one IPC
/// stream per data case, for a second opinion on a verdict.
#[test]
fn keep_output_writes_what_the_consumer_wrote_back() {
    bundled();
    let dir = scratch("keep-output");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let report = dir.join("r.json");
    let id = "consumer/array/plain/primitive/batch:0";
    let out = Command::new(arrowcert_exe())
        .env("ARROWCERT_KEEP_OUTPUT", &dir)
        .args([
            "certify",
            "--consumer",
            "reference",
            "--jobs",
            "0",
            "--report",
        ])
        .arg(&report)
        .args(["--exact", id])
        .output()
        .expect("arrowcert runs");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let kept = dir.join(format!("{}.arrows", id.replace('/', "~")));
    let bytes = std::fs::read(&kept).unwrap_or_else(|e| panic!("{}: {e}", kept.display()));
    let read = arrowcert::sdk::ipc::decode(&bytes).expect("an Arrow IPC stream");
    let primitive = arrowcert::scenario::builtin()
        .into_iter()
        .find(|s| s.name == "primitive")
        .unwrap();
    assert_eq!(read.batches[0].num_rows(), primitive.batches[0].num_rows());
}

/// `arrowcert coverage REPORT` prints the report's coverage, and computes
/// the same table for a report that predates the field (its scenarios
/// rebuilt by name from the report's seed).
#[test]
fn coverage_of_a_report_with_and_without_the_field() {
    bundled();
    let dir = scratch("certify");
    let report = dir.join("coverage.json");
    let out = Command::new(arrowcert_exe())
        .args([
            "certify",
            "--in-process",
            "--no-builtin",
            "--cases",
            "3",
            "--seed",
            "9",
        ])
        .arg("--report")
        .arg(&report)
        .arg("producer/stream/")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let coverage = |path: &std::path::Path| {
        let out = Command::new(arrowcert_exe())
            .arg("coverage")
            .arg(path)
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let with = coverage(&report);
    let families = arrowcert::generate::types::family_names().len();
    assert!(
        with.lines().any(|l| l.starts_with("  producer/stream ")
            && l.trim_end().ends_with(&format!(" {families} exercised"))),
        "{with}"
    );
    let mut r = arrowcert::report::read(&report).unwrap();
    assert!(!r.coverage.is_empty());
    r.coverage.clear();
    let old = dir.join("coverage-old.json");
    std::fs::write(&old, serde_json::to_string(&r).unwrap()).unwrap();
    assert_eq!(coverage(&old), with);
    // Not a report: one line, exit 2.
    let out = Command::new(arrowcert_exe())
        .args(["coverage", "/nonexistent.json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// Every variation of the varied encoding alone: the default plan covers
/// every (variation, data path) pair and every (variation, scenario) pair
/// the variation can change; `--all-variations` runs the full product;
/// the reference consumer passes every single-variation case; and a case
/// of the full product outside the default plan runs by its exact ID.
#[test]
fn the_reference_consumer_passes_every_variation_alone_on_every_path() {
    use arrowcert::certify::consumer::variation_plan;
    use arrowcert::export::Variation;
    let scenarios = arrowcert::scenario::builtin();
    let default: Vec<String> = variation_plan(&scenarios, false)
        .into_iter()
        .map(|s| s.id)
        .collect();
    let full = variation_plan(&scenarios, true);
    let paths = ["array", "device_array", "stream", "device_stream"];
    for v in Variation::ALL {
        for p in paths {
            let prefix = format!("consumer/{p}/varied:{}/", v.name());
            assert!(
                default.iter().any(|id| id.starts_with(&prefix)),
                "{prefix} not covered"
            );
        }
        // Several type families: every variation that does not need one
        // type of its own (views, dense unions, dictionaries) goes over
        // with several scenarios.
        let scenarios_of_v: std::collections::BTreeSet<&str> = default
            .iter()
            .filter(|id| id.contains(&format!("/varied:{}/", v.name())))
            .map(|id| id.split('/').nth(3).unwrap())
            .collect();
        let own_type = matches!(
            v,
            Variation::VariadicBuffers
                | Variation::SharedUnionSlots
                | Variation::UnusedDictionaryValues
        );
        assert!(
            scenarios_of_v.len() >= if own_type { 1 } else { 4 },
            "{}: {scenarios_of_v:?}",
            v.name()
        );
    }
    // Each scenario's offset and null-names cases are planned (both reach
    // every scenario with a column).
    for s in scenarios.iter().filter(|s| !s.schema.fields().is_empty()) {
        for v in ["offset", "null-names"] {
            assert!(
                default
                    .iter()
                    .any(|id| id.contains(&format!("/varied:{v}/{}", s.name))),
                "{v} {}",
                s.name
            );
        }
    }
    assert!(
        full.len() > 2 * default.len(),
        "{} {}",
        full.len(),
        default.len()
    );
    assert!(full.iter().all(|s| s.id.contains("/varied:")));

    bundled();
    let (code, r, out) = certify(
        &[
            "--consumer",
            "reference",
            "--all-variations",
            "--jobs",
            "2",
            "--no-builtin",
            "--cases",
            "12",
            "--seed",
            "21",
            "/varied",
        ],
        "consumer-all-variations",
    );
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(r.summary.passed, r.summary.total, "{out}");
    for v in Variation::ALL {
        for p in paths {
            let prefix = format!("consumer/{p}/varied:{}/", v.name());
            assert!(
                r.cases.iter().any(|c| c.id.starts_with(&prefix)),
                "{prefix}"
            );
        }
    }
    // One case of the full product that the default plan leaves out runs
    // by its ID alone (the worker and replay find it by parsing the ID).
    let gen: Vec<_> = arrowcert::generate::scenarios(21, 12).expect("generated");
    let planned: std::collections::HashSet<String> = variation_plan(&gen, false)
        .into_iter()
        .map(|s| s.id)
        .collect();
    let extra = r
        .cases
        .iter()
        .find(|c| c.id.contains("/varied:") && !planned.contains(&c.id))
        .expect("the full product has cases the default leaves out");
    let (code, one, out) = certify(
        &[
            "--consumer",
            "reference",
            "--no-builtin",
            "--cases",
            "12",
            "--seed",
            "21",
            "--exact",
            &extra.id,
        ],
        "consumer-one-variation",
    );
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(one.cases.len(), 1, "{out}");
    assert_eq!(one.cases[0].id, extra.id);
    assert_eq!(one.cases[0].verdict, Verdict::Pass, "{out}");
}

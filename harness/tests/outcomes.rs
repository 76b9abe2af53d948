//! How runs end as a whole (`report::outcome`): pass (exit 0), fail (1),
//! not certified (3), harness error (4); every verdict a case can have
//! reaches the JUnit XML, which validates against the published Jenkins
//! JUnit schemas (xmllint, installed by scripts/install-junit-schema.sh).

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use arrowcert::report::outcome::Outcome;
use arrowcert::report::{Case, Report, Verdict};
use support::*;

/// The test-only panic hook (`run::panic`), active in debug builds only.
const PANIC_ENV: &str = "ARROWCERT_TEST_PANIC_IN_CASE";

/// What one `arrowcert` run gave.
struct Run {
    code: Option<i32>,
    report: Report,
    stdout: String,
    took: Duration,
}

/// Runs `arrowcert <args> --report <scratch>/<name>.json` with `env`, and
/// reads the report (which must validate against the committed schema).
fn arrowcert(args: &[&str], env: &[(&str, &str)], name: &str) -> Run {
    let report = scratch("outcomes").join(format!("{name}.json"));
    let _ = std::fs::remove_file(&report);
    let mut cmd = Command::new(arrowcert_exe());
    cmd.args(args).arg("--report").arg(&report);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let started = Instant::now();
    let out = cmd.output().expect("arrowcert runs");
    let took = started.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let r = arrowcert::report::read(&report)
        .unwrap_or_else(|e| panic!("{name}: {e}\n{stdout}\n{stderr}"));
    support::schema::assert_valid_report(&report);
    Run {
        code: out.status.code(),
        report: r,
        stdout,
        took,
    }
}

/// Compiles `harness/tests/fixtures/<name>.c` into a plugin.
fn fixture(name: &str) -> PathBuf {
    let lib = scratch("outcome-fixtures").join(format!("lib{name}.so"));
    cc(
        &["-shared", "-fPIC"],
        &harness_dir().join(format!("tests/fixtures/{name}.c")),
        &lib,
    );
    lib
}

fn case<'a>(r: &'a Report, id: &str) -> &'a Case {
    r.cases.iter().find(|c| c.id == id).unwrap_or_else(|| {
        panic!(
            "no case {id} in {:#?}",
            r.cases.iter().map(|c| &c.id).collect::<Vec<_>>()
        )
    })
}

fn outcome(r: &Report) -> Outcome {
    r.outcome
        .as_ref()
        .expect("the report carries its outcome")
        .outcome
}

/// The planted panic needs a debug build of arrowcert (the binary the test
/// runs is built with the test's profile).
fn panic_hook_available() -> bool {
    if cfg!(debug_assertions) {
        return true;
    }
    println!("SKIPPED: {PANIC_ENV} is honoured only by debug builds of arrowcert");
    false
}

/// The published JUnit XSDs scripts/install-junit-schema.sh puts in
/// target/tools/junit-schema/, and xmllint; `Err` says what is missing.
fn junit_schemas() -> Result<Vec<PathBuf>, String> {
    let xmllint = Command::new("xmllint").arg("--version").output();
    if !xmllint.is_ok_and(|o| o.status.success()) {
        return Err(
            "xmllint is not installed (scripts/install-junit-schema.sh installs it)".into(),
        );
    }
    let dir = workspace_dir().join("target/tools/junit-schema");
    let mut xsds: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|e| {
            format!(
                "{}: {e} (scripts/install-junit-schema.sh fetches the XSDs)",
                dir.display()
            )
        })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("junit-10-") && n.ends_with(".xsd"))
        })
        .collect();
    xsds.sort();
    if xsds.len() < 2 {
        return Err(format!(
            "{} holds {} of the 2 JUnit XSDs (scripts/install-junit-schema.sh fetches them)",
            dir.display(),
            xsds.len()
        ));
    }
    Ok(xsds)
}

/// `xmllint --noout --schema XSD xml`: Err with xmllint's words.
fn xmllint(xsd: &Path, xml: &Path) -> Result<(), String> {
    let out = Command::new("xmllint")
        .arg("--noout")
        .arg("--schema")
        .arg(xsd)
        .arg(xml)
        .output()
        .map_err(|e| format!("xmllint: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{} does not validate against {}:\n{}",
            xml.display(),
            xsd.display(),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// The case the mixed consumer's run plants a harness panic in.
const PLANTED: &str = "consumer/array/plain/nested/batch:0";

#[test]
fn junit_from_a_run_with_every_kind_of_outcome_validates_against_the_published_schema() {
    if !panic_hook_available() {
        return;
    }
    let consumer = fixture("mixed_consumer");
    let junit = scratch("outcomes").join("every-outcome.xml");
    let _ = std::fs::remove_file(&junit);
    // The plain array cases of the built-in scenarios (one batch each of
    // 37, 1 and 0 rows; only run_end_encoded's three hang, each costing
    // the deadline), plus one plain stream case, skipped: the fixture
    // exports no stream entry point.
    let run = arrowcert(
        &[
            "certify",
            "--consumer",
            consumer.to_str().unwrap(),
            "--cases",
            "0",
            "--case-timeout-ms",
            "1500",
            "--jobs",
            "1",
            "--junit",
            junit.to_str().unwrap(),
            "consumer/array/plain/",
            "consumer/stream/plain/primitive",
        ],
        &[(PANIC_ENV, PLANTED)],
        "every-outcome",
    );
    let (r, out) = (&run.report, &run.stdout);
    // A harness error outranks the crashes, the hangs and the errors.
    assert_eq!(run.code, Some(4), "{out}");
    assert_eq!(outcome(r), Outcome::HarnessError, "{out}");
    assert!(out.contains("certify result: HARNESS ERROR"), "{out}");
    assert!(r.complete, "{out}");
    for (id, verdict) in [
        (
            "consumer/array/plain/primitive/batch:0",
            Verdict::Limitation,
        ),
        ("consumer/array/plain/binary/batch:0", Verdict::Limitation),
        ("consumer/array/plain/dictionary/batch:0", Verdict::Crash),
        (
            "consumer/array/plain/run_end_encoded/batch:0",
            Verdict::Timeout,
        ),
        (
            "consumer/array/plain/temporal_decimal/batch:0",
            Verdict::Error,
        ),
        (PLANTED, Verdict::HarnessError),
        ("consumer/stream/plain/primitive", Verdict::Skip),
    ] {
        let c = case(r, id);
        assert_eq!(c.verdict, verdict, "{id}: {c:#?}\n{out}");
    }
    // Every verdict but pass and fail, at least once.
    for verdict in [
        Verdict::Crash,
        Verdict::Timeout,
        Verdict::Error,
        Verdict::Limitation,
        Verdict::Skip,
        Verdict::HarnessError,
    ] {
        assert!(
            r.cases.iter().any(|c| c.verdict == verdict),
            "no {verdict:?} case\n{out}"
        );
    }
    // The consumer's own words for its limitation, in the case and in the
    // report's list of limitations.
    let int8 = case(r, "consumer/array/plain/primitive/batch:0");
    assert!(
        int8.message
            .as_deref()
            .unwrap_or("")
            .contains("this consumer does not support int8 columns"),
        "{int8:#?}"
    );
    assert_eq!(r.summary.limitations as usize, r.limitations.len());
    assert!(r
        .limitations
        .iter()
        .any(|l| l.library == "mixed consumer (test fixture)"
            && l.case == "consumer/array/plain/primitive/batch:0"
            && l.message
                .contains("this consumer does not support int8 columns")));
    // EIO and no message: an error, not a limitation.
    let eio = case(r, "consumer/array/plain/temporal_decimal/batch:0");
    assert!(
        eio.message
            .as_deref()
            .unwrap_or("")
            .contains("gave no message"),
        "{eio:#?}"
    );
    let skip = case(r, "consumer/stream/plain/primitive");
    assert!(
        skip.message
            .as_deref()
            .unwrap_or("")
            .contains("not exported"),
        "{skip:#?}"
    );
    // The filters keep the run short: three hangs of 1.5 s and three
    // crashes, each followed by a fresh worker.
    assert!(r.cases.len() < 40, "{} cases", r.cases.len());
    assert!(run.took < Duration::from_secs(90), "took {:?}", run.took);

    let xml = std::fs::read_to_string(&junit).expect("the JUnit file is written");
    for needle in [
        "<error type=\"crash\"",
        "<error type=\"timeout\"",
        "<error type=\"error\"",
        "<error type=\"harness_error\"",
        "<skipped type=\"limitation\"",
        "<skipped type=\"skip\"",
    ] {
        assert!(xml.contains(needle), "{needle} not in\n{xml}");
    }
    // One test case per rule and one per case.
    assert_eq!(
        xml.matches("<testcase ").count(),
        r.rules.len() + r.cases.len(),
        "{xml}"
    );

    let xsds = match junit_schemas() {
        Ok(x) => x,
        Err(why) if std::env::var("ARROWCERT_REQUIRE_JUNIT_SCHEMA").as_deref() == Ok("1") => {
            panic!("ARROWCERT_REQUIRE_JUNIT_SCHEMA=1 but {why}")
        }
        Err(why) => {
            println!("SKIPPED: {why}");
            return;
        }
    };
    for xsd in &xsds {
        if let Err(e) = xmllint(xsd, &junit) {
            panic!("{e}\n{xml}");
        }
    }
}

#[test]
fn a_producer_whose_every_call_fails_is_not_certified() {
    let producer = fixture("failing_producer");
    let run = arrowcert(
        &[
            "certify",
            "--producer",
            producer.to_str().unwrap(),
            "--cases",
            "0",
        ],
        &[],
        "failing-producer",
    );
    let (r, out) = (&run.report, &run.stdout);
    assert_eq!(run.code, Some(3), "{out}");
    assert!(out.contains("certify result: NOT CERTIFIED"), "{out}");
    assert_eq!(outcome(r), Outcome::NotCertified, "{out}");
    // Nothing failed: every call errored, and no path ran data.
    assert_eq!(r.summary.passed, 0, "{out}");
    assert_eq!(r.summary.failed, 0, "{out}");
    assert!(r.summary.errors > 0, "{out}");
    let reasons = &r.outcome.as_ref().unwrap().reasons;
    for path in ["array", "stream", "schema"] {
        assert!(
            reasons
                .iter()
                .any(|why| why.starts_with(&format!("path {path}:"))),
            "{path} not in {reasons:#?}"
        );
    }
    // The async path it does not export needs no case.
    assert!(
        !reasons.iter().any(|why| why.starts_with("path async:")),
        "{reasons:#?}"
    );
}

#[test]
fn a_filter_that_matches_nothing_is_not_certified() {
    bundled();
    let certify = arrowcert(
        &["certify", "--cases", "0", "no-such-case-id"],
        &[],
        "no-case-certify",
    );
    assert_eq!(certify.code, Some(3), "{}", certify.stdout);
    assert_eq!(outcome(&certify.report), Outcome::NotCertified);
    assert!(
        certify.stdout.contains("NOT CERTIFIED"),
        "{}",
        certify.stdout
    );
    assert!(certify.report.cases.is_empty());
    let roundtrip = arrowcert(
        &["roundtrip", "--cases", "0", "no-such-case-id"],
        &[],
        "no-case-roundtrip",
    );
    assert_eq!(roundtrip.code, Some(3), "{}", roundtrip.stdout);
    assert_eq!(outcome(&roundtrip.report), Outcome::NotCertified);
    assert!(
        roundtrip.stdout.contains("roundtrip result: NOT CERTIFIED"),
        "{}",
        roundtrip.stdout
    );
    for r in [&certify.report, &roundtrip.report] {
        let reasons = &r.outcome.as_ref().unwrap().reasons;
        assert!(
            reasons
                .iter()
                .any(|why| why.contains("no case was selected")),
            "{reasons:#?}"
        );
    }
}

#[test]
fn a_planted_harness_panic_is_a_harness_error_not_a_crash() {
    if !panic_hook_available() {
        return;
    }
    let (producer, _) = bundled();
    const ID: &str = "producer/array/primitive/batch:0";
    for workers in [true, false] {
        let mode = if workers { "workers" } else { "in-process" };
        let mut args = vec![
            "certify",
            "--producer",
            producer.to_str().unwrap(),
            "--cases",
            "0",
        ];
        if !workers {
            args.push("--in-process");
        }
        let run = arrowcert(&args, &[(PANIC_ENV, ID)], &format!("planted-panic-{mode}"));
        let (r, out) = (&run.report, &run.stdout);
        assert_eq!(run.code, Some(4), "{mode}: {out}");
        assert_eq!(outcome(r), Outcome::HarnessError, "{mode}: {out}");
        assert!(out.contains("HARNESS ERROR"), "{mode}: {out}");
        let c = case(r, ID);
        assert_eq!(c.verdict, Verdict::HarnessError, "{mode}: {c:#?}");
        let m = c.message.as_deref().unwrap_or("");
        assert!(m.contains("please report"), "{mode}: {m}");
        assert!(m.contains("panic.rs"), "{mode}: {m}");
        assert!(c.violations.is_empty(), "{mode}: {c:#?}");
        // Charged to no rule, and nothing else went wrong.
        let failed: Vec<&str> = r
            .rules
            .iter()
            .filter(|s| s.verdict == Verdict::Fail)
            .map(|s| s.rule.as_str())
            .collect();
        assert!(failed.is_empty(), "{mode}: {failed:?}\n{out}");
        assert_eq!(r.summary.crashed, 0, "{mode}: {out}");
        assert_eq!(r.summary.failed, 0, "{mode}: {out}");
        // The hook matches by substring: the case and its slices.
        for c in r
            .cases
            .iter()
            .filter(|c| c.verdict == Verdict::HarnessError)
        {
            assert!(
                c.id.contains(ID),
                "{mode}: an unplanted harness error: {c:#?}"
            );
        }
        assert!(r.summary.passed > 100, "{mode}: {out}");
    }
}

#[test]
fn the_reference_pair_passes_with_outcome_pass() {
    bundled();
    let run = arrowcert(
        &["certify", "--cases", "2", "--seed", "1"],
        &[],
        "reference-pair",
    );
    let (r, out) = (&run.report, &run.stdout);
    assert_eq!(run.code, Some(0), "{out}");
    assert_eq!(outcome(r), Outcome::Pass, "{out}");
    assert!(out.contains("certify result: ok"), "{out}");
    assert!(r.outcome.as_ref().unwrap().reasons.is_empty(), "{out}");
    assert!(r.limitations.is_empty(), "{:#?}", r.limitations);
    assert_eq!(r.summary.limitations, 0);
    assert_eq!(r.summary.harness_errors, 0);
    let roles: Vec<&str> = r.plugins.iter().map(|p| p.role.as_str()).collect();
    assert_eq!(roles, ["producer", "consumer"]);
    // The generated scenarios ran too.
    assert!(r.cases.iter().any(|c| c.id.contains("/gen/")), "{out}");
}

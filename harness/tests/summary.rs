//! `arrowcert summary REPORT` (cli/summary.rs), the Markdown the GitHub
//! Action writes to the job summary: what it shows, and that nothing taken
//! from a report (a library's message, a replay command) can break the
//! table, inject HTML or close a code block. The Action's own run of it:
//! tests/action.rs.

mod support;

use std::process::Command;

use arrowcert::cli::summary::markdown;
use arrowcert::report::Report;

/// A failing certify report: one broken MUST rule whose evidence holds
/// markup, a pipe and a newline, and whose case's replay holds backticks.
fn report() -> Report {
    serde_json::from_str(
        r#"{"report_version":1,"tool":{"name":"arrowcert","version":"0"},"command":"certify",
            "invocation":[],"started_at":"","finished_at":"","duration_ms":0,"complete":true,
            "plugins":[{"role":"producer","name":"lib <i>1</i>","path":"/x/lib`a`.so",
                        "sha256":"","abi_version":1,"entry_points":[]}],
            "data":"built-in","devices":[],
            "cases":[{"id":"producer/schema/x","path":"schema","scenario":"x","batch":null,
                      "slice":null,"verdict":"fail","message":null,"differences":[],
                      "duration_us":1,"replay":"arrowcert replay ```x``` --exact 'producer/schema/x'"}],
            "summary":{"total":2,"passed":1,"failed":1,"errors":0,"skipped":0},
            "seed":9,
            "outcome":{"outcome":"fail","reasons":["MUST rule(s) broken: schema.format"]},
            "rules":[{"rule":"schema.format","level":"MUST","verdict":"fail","checked":2,"failed":1,
                      "failing_cases":["producer/schema/x"],
                      "evidence":"format was `<b>|x</b>`\nnext"},
                     {"rule":"schema.name","level":"MUST","verdict":"pass","checked":2,"failed":0}]}"#,
    )
    .expect("the fixture is a report")
}

#[test]
fn a_broken_rule_is_listed_with_its_evidence_escaped_and_its_replay() {
    let m = markdown(&report());
    assert!(m.starts_with("## arrowcert certify: FAILED\n"), "{m}");
    assert!(m.contains("Exit code 1."), "{m}");
    assert!(m.contains("- MUST rule(s) broken: schema.format"), "{m}");
    assert!(
        m.contains("Rules: 1 held, 1 broken, 0 not exercised (of 2)."),
        "{m}"
    );
    assert!(m.contains("Seed 9 (`--seed 9`"), "{m}");
    let row = m
        .lines()
        .find(|l| l.starts_with("| schema.format | MUST | 1 / 2 |"))
        .unwrap_or_else(|| panic!("no row for the rule:\n{m}"));
    // No raw HTML, and neither the pipe nor the newline breaks the row.
    assert!(!m.contains("<b>") && !m.contains("<i>"), "{m}");
    assert!(
        row.contains("&lt;b&gt;\\|x&lt;/b&gt;") && row.ends_with(" next |"),
        "{row}"
    );
    // The replay sits in a fence longer than its own backticks.
    assert!(
        m.contains("````sh\narrowcert replay ```x``` --exact 'producer/schema/x'\n````\n"),
        "{m}"
    );
}

#[test]
fn a_pass_has_no_broken_rules_section() {
    let mut r = report();
    r.outcome = Some(arrowcert::report::outcome::Judgement {
        outcome: arrowcert::report::outcome::Outcome::Pass,
        reasons: vec![],
    });
    r.rules[0].verdict = arrowcert::report::Verdict::Pass;
    let m = markdown(&r);
    assert!(m.starts_with("## arrowcert certify: ok\n"), "{m}");
    assert!(!m.contains("Broken rules"), "{m}");
}

#[test]
fn the_command_prints_it_and_refuses_what_is_not_a_certify_report() {
    let dir = support::scratch("summary-cli");
    let good = dir.join("certify.json");
    std::fs::write(&good, serde_json::to_string(&report()).unwrap()).unwrap();
    let out = Command::new(support::arrowcert_exe())
        .args(["summary"])
        .arg(&good)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stdout), markdown(&report()));
    let mut other = report();
    other.command = "roundtrip".into();
    let bad = dir.join("roundtrip.json");
    std::fs::write(&bad, serde_json::to_string(&other).unwrap()).unwrap();
    let out = Command::new(support::arrowcert_exe())
        .arg("summary")
        .arg(&bad)
        .output()
        .unwrap();
    support::assert_bad_input(&out, "a roundtrip report; summary reads certify reports");
    let out = Command::new(support::arrowcert_exe())
        .args(["summary", "/nonexistent/r.json"])
        .output()
        .unwrap();
    support::assert_bad_input(&out, "/nonexistent/r.json");
}

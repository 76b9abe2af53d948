//! The committed expectations files say exactly what the committed reports
//! show (issue 39, "Exact expectations"):
//!
//! - every entry admits one outcome, or several only as `"flaky": true`
//!   with a reason and a link to a FINDINGS.md anchor that exists;
//! - of each library's cases that ran (not skipped) in its committed
//!   reports (`reports/certify/<role>-<library>*.json.gz`), at most 2% are
//!   flaky (the report saw the case change, or its entry is flaky: another
//!   run did) without a traced cause (an entry whose link is one of the
//!   library's rows in `expectations/causes.json`, a cause reproduced
//!   outside the harness);
//! - every result of those reports is expected by its library's file (the
//!   harness's own `check`), so regenerating the files lost nothing; so is
//!   every result of the other runs kept in `reports/seen/` (filtered
//!   smoke runs, checked as the smoke matrix checks them: as a subset).
//!
//! Bad fixtures (`tests/fixtures/expectations/`) prove each rule fails.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use arrowcert::report::expectations::{check, Expectations};
use arrowcert::report::{Report, Verdict};
use support::{harness_dir, workspace_dir};

/// The largest share of a library's ran cases that may be flaky without a
/// traced cause (the 2%).
const UNTRACED_FLAKY_MAX: f64 = 0.02;

fn expectations_dir() -> PathBuf {
    workspace_dir().join("expectations")
}

fn fixture(name: &str) -> PathBuf {
    harness_dir().join("tests/fixtures/expectations").join(name)
}

/// The anchors FINDINGS.md defines: `<a id="...">` and its headings' slugs
/// (as GitHub makes them: lower case, punctuation dropped, spaces to `-`).
fn findings_anchors() -> BTreeSet<String> {
    let text = std::fs::read_to_string(workspace_dir().join("reports/FINDINGS.md")).unwrap();
    let mut out = BTreeSet::new();
    for part in text.split("<a id=\"").skip(1) {
        if let Some(end) = part.find('"') {
            out.insert(part[..end].to_string());
        }
    }
    for line in text.lines() {
        if let Some(h) = line.strip_prefix('#') {
            let title = h.trim_start_matches('#').trim();
            let slug: String = title
                .to_lowercase()
                .chars()
                .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
                .map(|c| if c == ' ' { '-' } else { c })
                .collect();
            out.insert(slug);
        }
    }
    out
}

/// Causes traced outside the harness, by library: their links.
fn traced_links() -> BTreeMap<String, BTreeSet<String>> {
    let text = std::fs::read_to_string(expectations_dir().join("causes.json")).unwrap();
    let rows: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap();
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for r in rows {
        out.entry(r["library"].as_str().unwrap().to_string())
            .or_default()
            .insert(r["link"].as_str().unwrap().to_string());
    }
    out
}

/// What is wrong with a file's entries: each that admits several outcomes
/// must be flaky with a reason and a link to an anchor FINDINGS.md has.
fn inexact(exp: &Expectations, anchors: &BTreeSet<String>) -> Vec<String> {
    let mut out = Vec::new();
    for x in &exp.expectations {
        let n = x.outcomes().len();
        let what = format!("{} ({})", x.pattern, x.outcome);
        if n > 1 && !x.flaky {
            out.push(format!("{what}: several outcomes without \"flaky\": true"));
        }
        if x.flaky && n < 2 {
            out.push(format!("{what}: flaky with one outcome"));
        }
        if n > 1 && x.reason.trim().is_empty() {
            out.push(format!("{what}: several outcomes without a reason"));
        }
        if n > 1 {
            let anchor = x
                .link
                .as_deref()
                .and_then(|l| l.split_once('#'))
                .map(|(_, a)| a);
            match anchor {
                None => out.push(format!("{what}: several outcomes without a FINDINGS link")),
                Some(a) if !anchors.contains(a) => {
                    out.push(format!("{what}: link #{a} is not in reports/FINDINGS.md"))
                }
                Some(_) => {}
            }
        }
    }
    out
}

/// Of a library's cases that ran, those flaky without a traced cause, and
/// how many ran.
fn untraced_flaky(reports: &[Report], exp: &Expectations, traced: &BTreeSet<String>) -> (u64, u64) {
    let (mut untraced, mut ran) = (0u64, 0u64);
    for r in reports {
        for c in &r.cases {
            if c.verdict == Verdict::Skip && c.flaky.is_empty() {
                continue;
            }
            ran += 1;
            // Flaky: this report saw it change, or another run did (the
            // entry that decides it is flaky).
            let entry = exp.matching(&c.id);
            let flaky_entry = entry.filter(|x| x.flaky);
            if c.flaky.is_empty() && flaky_entry.is_none() {
                continue;
            }
            let has_cause = flaky_entry
                .and_then(|x| x.link.as_ref())
                .is_some_and(|l| traced.contains(l));
            untraced += u64::from(!has_cause);
        }
    }
    (untraced, ran)
}

fn share_ok(untraced: u64, ran: u64) -> bool {
    ran == 0 || (untraced as f64) <= UNTRACED_FLAKY_MAX * ran as f64
}

fn read_report(path: &Path) -> Report {
    let out = Command::new("gzip")
        .arg("-dc")
        .arg(path)
        .output()
        .expect("gzip runs");
    assert!(out.status.success(), "gzip -dc {}", path.display());
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{}: not a report: {e}", path.display()))
}

/// The committed certify reports, by library: `(role, file stem)` pairs.
/// A view of a library (`producer-duckdb_lossless_`) counts for it; only
/// the plain units (`producer-duckdb`) run with its expectations file.
fn committed_reports() -> BTreeMap<String, Vec<(bool, PathBuf)>> {
    let mut out: BTreeMap<String, Vec<(bool, PathBuf)>> = BTreeMap::new();
    let dir = workspace_dir().join("reports/certify");
    for e in std::fs::read_dir(&dir).unwrap() {
        let path = e.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let Some(stem) = name.strip_suffix(".json.gz") else {
            continue;
        };
        let Some((_role, unit)) = stem.split_once('-') else {
            continue;
        };
        let (library, plain) = match unit.split_once('_') {
            Some((lib, _view)) => (lib.to_string(), false),
            None => (unit.to_string(), true),
        };
        out.entry(library).or_default().push((plain, path));
    }
    out
}

/// Other runs kept for what they saw (`reports/seen/`).
fn seen_reports() -> Vec<PathBuf> {
    let Ok(dir) = std::fs::read_dir(workspace_dir().join("reports/seen")) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = dir
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".json.gz"))
        .collect();
    out.sort();
    out
}

/// `consumer-pandas-smoke-1.json.gz` -> the library whose file exists.
fn library_of_seen(name: &str) -> Option<String> {
    let (_role, rest) = name.strip_suffix(".json.gz")?.split_once('-')?;
    // Library names have dashes too: the longest prefix with a file.
    let mut lib = rest;
    while let Some((head, _)) = lib.rsplit_once('-') {
        if expectations_dir().join(format!("{head}.json")).is_file() {
            return Some(head.to_string());
        }
        lib = head;
    }
    None
}

fn library_files() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(expectations_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .filter(|p| {
            let stem = p.file_stem().unwrap().to_string_lossy();
            stem != "causes" && stem != "matrix-smoke"
        })
        .collect();
    out.sort();
    out
}

#[test]
fn every_committed_entry_admits_one_outcome_or_is_flaky_with_a_cause() {
    let anchors = findings_anchors();
    let files = library_files();
    assert!(files.len() > 10, "{files:?}");
    let mut wrong = Vec::new();
    for path in &files {
        let exp = Expectations::read(path).unwrap();
        for w in inexact(&exp, &anchors) {
            wrong.push(format!("{}: {w}", path.display()));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_smoke_baseline_names_one_status_per_unit() {
    let text = std::fs::read_to_string(expectations_dir().join("matrix-smoke.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let units = v["units"].as_object().expect("units");
    assert!(!units.is_empty());
    for (unit, status) in units {
        let s = status.as_str().unwrap_or_default();
        assert!(
            ["pass", "fail", "partial", "error", "n/a"].contains(&s),
            "{unit}: {status}"
        );
    }
}

#[test]
fn committed_reports_are_expected_and_few_flaky_cases_are_untraced() {
    let traced = traced_links();
    let none = BTreeSet::new();
    let mut wrong = Vec::new();
    let mut checked = 0u64;
    for (library, reports) in committed_reports() {
        let path = expectations_dir().join(format!("{library}.json"));
        if !path.is_file() {
            continue;
        }
        let exp = Expectations::read(&path).unwrap();
        let mut all = Vec::new();
        for (plain, report_path) in reports {
            let report = read_report(&report_path);
            if plain {
                let c = check(&report, &exp, &path.display().to_string(), false);
                checked += c.expected;
                for m in &c.unexpected {
                    wrong.push(format!(
                        "{}: {} {}: expected {}, got {}",
                        report_path.display(),
                        m.kind,
                        m.id,
                        m.expected,
                        m.actual
                    ));
                }
            }
            all.push(report);
        }
        let (untraced, ran) = untraced_flaky(&all, &exp, traced.get(&library).unwrap_or(&none));
        println!("{library}: {untraced} flaky without a traced cause of {ran} ran");
        if !share_ok(untraced, ran) {
            wrong.push(format!(
                "{library}: {untraced} of {ran} ran cases are flaky without a traced cause (over {}%)",
                UNTRACED_FLAKY_MAX * 100.0
            ));
        }
    }
    for path in seen_reports() {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let library = library_of_seen(&name)
            .unwrap_or_else(|| panic!("{name}: not <role>-<library>-<run>.json.gz"));
        let file = expectations_dir().join(format!("{library}.json"));
        let exp = Expectations::read(&file).unwrap();
        let c = check(&read_report(&path), &exp, &file.display().to_string(), true);
        checked += c.expected;
        for m in &c.unexpected {
            wrong.push(format!(
                "{name}: {} {}: expected {}, got {}",
                m.kind, m.id, m.expected, m.actual
            ));
        }
    }
    println!("{checked} results expected");
    assert!(checked > 100_000, "{checked}");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn a_file_with_several_outcomes_and_no_flaky_cause_is_refused() {
    let anchors = findings_anchors();
    let exp = Expectations::read(&fixture("several-outcomes.json")).unwrap();
    let got = inexact(&exp, &anchors);
    let want = [
        "consumer/* (crash|pass): several outcomes without \"flaky\": true",
        "consumer/array/x/batch:0 (crash|fail): several outcomes without a FINDINGS link",
        "consumer/array/y/batch:0 (crash|fail): link #no-such-finding is not in reports/FINDINGS.md",
        "consumer/array/z/batch:0 (crash|fail): several outcomes without a reason",
        "consumer/array/w/batch:0 (crash): flaky with one outcome",
    ];
    assert_eq!(got, want);
    // The good entry of the fixture passes alone.
    let good = Expectations {
        library: exp.library.clone(),
        expectations: vec![exp.expectations.last().unwrap().clone()],
    };
    assert!(inexact(&good, &anchors).is_empty());
}

#[test]
fn more_than_two_percent_untraced_flaky_cases_fail() {
    let exp = Expectations::read(&fixture("flaky.json")).unwrap();
    let traced: BTreeSet<String> = ["../reports/FINDINGS.md#traced".to_string()].into();
    let case = |id: &str, verdict: &str, flaky: &[&str]| {
        serde_json::json!({"id": id, "path": "array", "scenario": "s", "verdict": verdict,
            "duration_us": 0, "replay": "", "differences": [], "flaky": flaky})
    };
    let report = |cases: Vec<serde_json::Value>| -> Report {
        serde_json::from_value(serde_json::json!({"report_version":1,"tool":{"name":"arrowcert","version":"0"},
            "command":"certify","invocation":[],"started_at":"","finished_at":"","duration_ms":0,"complete":true,
            "plugins":[],"data":"","devices":[],"cases":cases,
            "summary":{"total":0,"passed":0,"failed":0,"errors":0,"skipped":0}}))
        .unwrap()
    };
    // 100 ran (skips do not count), 3 flaky: 2 untraced, 1 traced.
    let mut cases: Vec<serde_json::Value> = (0..97)
        .map(|i| case(&format!("consumer/array/p{i}/batch:0"), "pass", &[]))
        .collect();
    cases.extend((0..50).map(|i| case(&format!("consumer/array/s{i}/batch:0"), "skip", &[])));
    cases.push(case(
        "consumer/array/untraced/batch:0",
        "crash",
        &["crash", "pass"],
    ));
    cases.push(case(
        "consumer/array/untraced/batch:1",
        "pass",
        &["pass", "crash"],
    ));
    cases.push(case(
        "consumer/array/traced/batch:0",
        "crash",
        &["crash", "fail"],
    ));
    let r = report(cases.clone());
    assert_eq!(untraced_flaky(&[r], &exp, &traced), (2, 100));
    // A case another run saw change counts by its flaky entry alone.
    let mut seen_elsewhere = cases.clone();
    seen_elsewhere[0] = case("consumer/array/untraced/batch:9", "pass", &[]);
    let r = report(seen_elsewhere);
    assert_eq!(untraced_flaky(&[r], &exp, &traced), (3, 100));
    assert!(share_ok(2, 100));
    // A third untraced flaky case among 101 is over 2%.
    cases.push(case(
        "consumer/array/untraced/batch:2",
        "crash",
        &["crash", "pass"],
    ));
    let r = report(cases);
    let (untraced, ran) = untraced_flaky(&[r], &exp, &traced);
    assert_eq!((untraced, ran), (3, 101));
    assert!(!share_ok(untraced, ran));
}

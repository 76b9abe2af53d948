use super::*;
use crate::report::Case;

fn case(verdict: Verdict, message: Option<&str>, differences: &[&str]) -> Case {
    let scenario = crate::scenario::builtin().remove(0);
    let mut c = crate::roundtrip::not_run("array/x/batch:0", "array", &scenario, None, None, "r");
    c.verdict = verdict;
    c.message = message.map(str::to_string);
    c.differences = differences.iter().map(|d| d.to_string()).collect();
    c
}

#[test]
fn every_producer_mutation_is_shown_or_skipped_with_a_reason() {
    let src = include_str!("../../../producers/mutants/mutant_producer.c");
    let names: Vec<&str> = src
        .lines()
        .filter_map(|l| l.trim().strip_prefix("X("))
        .filter_map(|l| l.split('"').nth(1))
        .filter(|n| *n != "none")
        .collect();
    assert!(names.len() > 60, "parsed {} mutations", names.len());
    for n in &names {
        let shown = MUTANTS.iter().any(|m| m.name == *n);
        let skipped = SKIPPED.iter().any(|(m, _)| m == n);
        assert!(shown ^ skipped, "{n}: shown {shown}, skipped {skipped}");
    }
    for m in MUTANTS {
        assert!(names.contains(&m.name), "{} is not a mutation", m.name);
    }
    for (m, _) in SKIPPED {
        assert!(names.contains(m), "{m} is not a mutation");
    }
}

#[test]
fn every_case_rides_a_planned_roundtrip_case() {
    let scenarios = crate::scenario::builtin();
    let planned: Vec<String> = crate::roundtrip::plan(&scenarios)
        .into_iter()
        .map(|s| s.id)
        .collect();
    let plan = plan();
    for s in &plan {
        assert!(planned.contains(&s.roundtrip_id), "{}", s.roundtrip_id);
        assert!(s.id.starts_with("malformed/"));
    }
    let mut ids: Vec<&str> = plan.iter().map(|s| s.id.as_str()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), plan.len(), "IDs are unique");
}

#[test]
fn classifies_each_way_a_case_ends() {
    let c = |v, m: Option<&str>, d: &[&str]| classify(&case(v, m, d)).0;
    assert_eq!(c(Verdict::Crash, Some("SIGSEGV"), &[]), "crashed");
    assert_eq!(c(Verdict::Timeout, None, &[]), "hung");
    assert_eq!(c(Verdict::Pass, None, &[]), "accepted_equal");
    assert_eq!(
        c(Verdict::Fail, Some("differs"), &["column 0 row 3"]),
        "accepted_differs"
    );
    assert_eq!(
        c(
            Verdict::Limitation,
            Some("the consumer declined (arrowcert_consume_array returned EINVAL (22)): bad"),
            &[]
        ),
        "refused"
    );
    assert_eq!(
        c(
            Verdict::Error,
            Some("the consumer refused the input with arrowcert_consume_stream failed"),
            &[]
        ),
        "refused"
    );
    assert_eq!(
        c(
            Verdict::Fail,
            Some("the consumer declined"),
            &["the consumer returned without releasing or moving the array it was given"]
        ),
        "unreleased"
    );
    assert_eq!(
        c(
            Verdict::Error,
            Some("arrowcert_produce_array failed: EIO"),
            &[]
        ),
        "not_run"
    );
    assert_eq!(c(Verdict::Skip, Some("not exported"), &[]), "not_run");
    let undecodable = format!("{}: bad", crate::roundtrip::UNDECODABLE);
    assert_eq!(
        c(Verdict::Error, Some(&undecodable), &[]),
        "accepted_differs"
    );
}

fn entries(results: &[&str]) -> Vec<RobustnessCase> {
    let spec = &plan()[0];
    results
        .iter()
        .map(|r| RobustnessCase {
            result: r.to_string(),
            ..not_run(spec, "")
        })
        .collect()
}

#[test]
fn grades() {
    assert_eq!(
        summarize(entries(&["refused", "accepted_equal"])).grade,
        "A"
    );
    assert_eq!(
        summarize(entries(&["refused", "accepted_differs"])).grade,
        "B"
    );
    assert_eq!(summarize(entries(&["refused", "unreleased"])).grade, "B");
    assert_eq!(summarize(entries(&["hung", "accepted_differs"])).grade, "C");
    assert_eq!(summarize(entries(&["hung", "crashed"])).grade, "F");
    assert_eq!(summarize(entries(&["not_run"])).grade, "-");
    let r = summarize(entries(&["refused", "crashed", "not_run"]));
    assert_eq!(
        (r.counts.refused, r.counts.crashed, r.counts.not_run),
        (1, 1, 1)
    );
    assert!(
        r.summary.starts_with("1 of 2 refused cleanly"),
        "{}",
        r.summary
    );
    assert!(!r.skipped_mutants.is_empty());
}

fn entry_of(mutant: &str, result: &str) -> RobustnessCase {
    let spec = plan()
        .into_iter()
        .find(|s| s.mutant.name == mutant)
        .unwrap();
    RobustnessCase {
        result: result.to_string(),
        ..not_run(&spec, "")
    }
}

#[test]
fn what_no_consumer_can_see_and_what_is_only_odd_are_not_graded() {
    // A buffer shorter than its length says: the C interface carries no
    // buffer sizes, so a crash there does not lower the grade.
    let hidden = entry_of("values-buffer-one-short", "crashed");
    assert!(!hidden.graded);
    let r = summarize(vec![hidden, entry_of("column-one-short", "refused")]);
    assert_eq!(
        (r.grade.as_str(), r.counts.crashed, r.counts.graded),
        ("A", 1, 1)
    );
    assert!(
        render(&r).contains("not graded: no consumer can see"),
        "{}",
        render(&r)
    );
    // A SHOULD breakage read as sent (a decimal beyond its precision) is
    // fine; a MUST one read as other values is garbage accepted.
    let odd = entry_of("decimal-beyond-precision", "accepted_differs");
    assert_eq!(odd.level, "SHOULD");
    assert_eq!(summarize(vec![odd]).grade, "A");
    assert_eq!(
        summarize(vec![entry_of(
            "dense-union-offsets-swapped",
            "accepted_differs"
        )])
        .grade,
        "B"
    );
}

#[test]
fn junit_suite_never_fails() {
    let r = summarize(entries(&["crashed", "refused"]));
    let doc = "<?xml?>\n<testsuites>\n</testsuites>\n";
    let x = junit_with(doc, &r, "s");
    assert!(x.contains("robustness (--malformed)"), "{x}");
    assert!(x.contains("value=\"crashed\""));
    assert!(!x.contains("<failure") && !x.contains("<error"));
    assert!(x.ends_with("</testsuites>\n"));
}

#[test]
fn docs_list_every_mutant_shown_and_left_out() {
    let doc = include_str!("../../../docs/MALFORMED.md");
    for m in MUTANTS {
        assert!(
            doc.contains(&format!("| `{}` | `{}` |", m.name, m.breaks)),
            "{}",
            m.name
        );
    }
    for (m, _) in SKIPPED {
        assert!(doc.contains(&format!("| `{m}` |")), "{m}");
    }
}

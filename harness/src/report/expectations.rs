//! Expectations as data (as WebGPU's conformance suite keeps them): a file
//! that says, for a library, which rules and cases are known to fail and
//! why, with a link to the finding. A run given one (`--expectations
//! FILE`) succeeds when its results match: an unexpected failure and an
//! unexpected pass both make it fail, so a fixed bug is noticed as surely
//! as a new one.
//!
//! The file is JSON:
//!
//! ```json
//! {
//!   "library": "arrow-cpp",
//!   "expectations": [
//!     { "pattern": "consumer.async.producer-lifetime", "outcome": "fail",
//!       "reason": "requests after the handler's release",
//!       "link": "reports/FINDINGS.md#arrow-c-async-consumer" },
//!     { "pattern": "producer/async/r4,cancel@end/nested", "outcome": "crash|fail",
//!       "flaky": true, "reason": "ended crash, fail in repeated runs",
//!       "link": "reports/FINDINGS.md#arrow-cpp" }
//!   ]
//! }
//! ```
//!
//! A pattern without `/` matches rule IDs, one with `/` case IDs; `*`
//! matches any run of characters. `outcome` is one verdict or several
//! joined by `|`. Several are for a case `--repeat` saw change between
//! runs: such an entry says `"flaky": true`. The reader accepts any entry
//! (a user's own file may tolerate what it likes); the committed files are
//! held to one outcome per entry, or `flaky` with a reason and a link, by
//! `harness/tests/expectations_exact.rs`.
//! Without a matching expectation a rule is expected not to fail at MUST
//! level and a case to pass, be skipped or be a limitation; a failed case
//! whose broken MUST rules are all expected to fail is expected too.

#![forbid(unsafe_code)]

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Case, Report, RuleSummary, Verdict};

/// An expectations file.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct Expectations {
    /// The library the file is about (informative).
    #[serde(default)]
    pub library: String,
    pub expectations: Vec<Expectation>,
}

/// One expected result.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct Expectation {
    /// A rule ID or a case ID, `*` matching any run of characters.
    pub pattern: String,
    /// The expected verdict(s), `|`-separated: pass, fail, skip, error,
    /// crash, timeout, limitation, harness_error.
    pub outcome: String,
    /// Why (a sentence).
    pub reason: String,
    /// Where the finding is explained (FINDINGS.md entry, issue).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<String>,
    /// The outcomes are those a repeated run of the same case saw
    /// (`--repeat`): the case is flaky, and `reason` and `link` say why.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub flaky: bool,
}

impl Expectation {
    /// The verdict words `outcome` admits.
    pub fn outcomes(&self) -> Vec<&str> {
        self.outcome.split('|').map(str::trim).collect()
    }
}

/// A result that did not match.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct Mismatch {
    /// The rule or case ID.
    pub id: String,
    /// `unexpected failure` or `unexpected pass` (or `different outcome`).
    pub kind: String,
    pub expected: String,
    pub actual: String,
    /// The expectation's reason, when one matched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// What checking a report against expectations found.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct Checked {
    /// The expectations file.
    pub file: String,
    /// Results an expectation (or the default) accounted for.
    pub expected: u64,
    /// Of those, failures the file declared.
    pub expected_failures: u64,
    pub unexpected: Vec<Mismatch>,
    /// Patterns that matched no rule or case of this run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unused: Vec<String>,
}

impl Expectations {
    /// Reads and checks a file: every pattern non-empty, every outcome a
    /// verdict word.
    pub fn read(path: &std::path::Path) -> Result<Expectations, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("{}: cannot read expectations: {e}", path.display()))?;
        let e: Expectations = serde_json::from_str(&text)
            .map_err(|e| format!("{}: not an expectations file: {e}", path.display()))?;
        for x in &e.expectations {
            if x.pattern.trim().is_empty() {
                return Err(format!(
                    "{}: an expectation with an empty pattern",
                    path.display()
                ));
            }
            for word in x.outcome.split('|') {
                if parse_verdict(word.trim()).is_none() {
                    return Err(format!(
                        "{}: {}: outcome {word:?} is not one of pass, fail, skip, error, crash, timeout, limitation, harness_error",
                        path.display(),
                        x.pattern
                    ));
                }
            }
        }
        Ok(e)
    }

    /// The entry that decides a rule's or a case's expected result: the
    /// first whose pattern matches it (`None`: the default holds).
    pub fn matching(&self, id: &str) -> Option<&Expectation> {
        let rule_id = !id.contains('/');
        self.expectations
            .iter()
            .find(|x| x.pattern.contains('/') != rule_id && glob(&x.pattern, id))
    }
}

fn parse_verdict(word: &str) -> Option<Verdict> {
    Some(match word {
        "pass" => Verdict::Pass,
        "fail" => Verdict::Fail,
        "skip" => Verdict::Skip,
        "error" => Verdict::Error,
        "crash" => Verdict::Crash,
        "timeout" => Verdict::Timeout,
        "limitation" => Verdict::Limitation,
        "harness_error" => Verdict::HarnessError,
        _ => return None,
    })
}

/// `*` matches any run of characters (none included); everything else
/// matches itself.
pub fn glob(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == text;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !text.starts_with(first) || text.len() < first.len() + last.len() || !text.ends_with(last) {
        return false;
    }
    let mut rest = &text[first.len()..text.len() - last.len()];
    for part in &parts[1..parts.len() - 1] {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    true
}

fn allows(x: &Expectation, v: Verdict) -> bool {
    x.outcome
        .split('|')
        .any(|w| parse_verdict(w.trim()) == Some(v))
}

fn is_failure(v: Verdict) -> bool {
    matches!(
        v,
        Verdict::Fail | Verdict::Error | Verdict::Crash | Verdict::Timeout | Verdict::HarnessError
    )
}

/// Checks a run's rules and cases against `exp`.
///
/// `subset`: the run was filtered to part of its plan (a CI smoke run). A
/// rule's verdict sums its cases, so a rule expected to fail that passed
/// over a subset only did not meet the cases that break it: not an
/// unexpected pass. Cases are held to their expectations either way.
pub fn check(report: &Report, exp: &Expectations, file: &str, subset: bool) -> Checked {
    let mut out = Checked {
        file: file.to_string(),
        ..Default::default()
    };
    let mut used = vec![false; exp.expectations.len()];
    let mut note = |x: &Expectation| {
        if let Some(i) = exp.expectations.iter().position(|y| std::ptr::eq(y, x)) {
            used[i] = true;
        }
    };
    let mut mismatch =
        |id: &str, kind: &str, expected: String, actual: Verdict, reason: Option<&str>| {
            out.unexpected.push(Mismatch {
                id: id.to_string(),
                kind: kind.to_string(),
                expected,
                actual: actual.as_str().to_string(),
                reason: reason.map(str::to_string),
            });
        };
    let mut expected = 0u64;
    let mut expected_failures = 0u64;
    let rule_expected_to_fail =
        |rule: &str| exp.matching(rule).is_some_and(|x| allows(x, Verdict::Fail));
    for r in &report.rules {
        match exp.matching(&r.rule) {
            Some(x) => {
                note(x);
                if allows(x, r.verdict) {
                    expected += 1;
                    expected_failures += u64::from(r.verdict == Verdict::Fail);
                } else if r.verdict == Verdict::Skip
                    || (subset && r.verdict == Verdict::Pass && allows(x, Verdict::Fail))
                {
                    // Not exercised in this run (a filter, a device), or
                    // not by the cases that break it: the expectation is
                    // neither met nor broken.
                } else {
                    let kind = if r.verdict == Verdict::Pass {
                        "unexpected pass"
                    } else {
                        "different outcome"
                    };
                    mismatch(&r.rule, kind, x.outcome.clone(), r.verdict, Some(&x.reason));
                }
            }
            None if rule_default_ok(r) => expected += 1,
            None => mismatch(
                &r.rule,
                "unexpected failure",
                "pass".into(),
                r.verdict,
                None,
            ),
        }
    }
    for c in &report.cases {
        match exp.matching(&c.id) {
            Some(x) => {
                note(x);
                if allows(x, c.verdict) {
                    expected += 1;
                    expected_failures += u64::from(is_failure(c.verdict));
                } else {
                    let kind = if is_failure(c.verdict) {
                        "unexpected failure"
                    } else if c.verdict == Verdict::Pass {
                        "unexpected pass"
                    } else {
                        "different outcome"
                    };
                    mismatch(&c.id, kind, x.outcome.clone(), c.verdict, Some(&x.reason));
                }
            }
            None if case_default_ok(c, &rule_expected_to_fail) => {
                expected += 1;
                expected_failures += u64::from(is_failure(c.verdict));
            }
            None => mismatch(&c.id, "unexpected failure", "pass".into(), c.verdict, None),
        }
    }
    out.expected = expected;
    out.expected_failures = expected_failures;
    out.unused = exp
        .expectations
        .iter()
        .zip(&used)
        .filter(|(_, u)| !**u)
        .map(|(x, _)| x.pattern.clone())
        .collect();
    out
}

/// Without an expectation a rule may pass, be skipped, or fail below MUST
/// (which does not fail a run either).
fn rule_default_ok(r: &RuleSummary) -> bool {
    r.verdict != Verdict::Fail || r.level != "MUST"
}

/// Without an expectation a case may pass, be skipped or be a limitation;
/// a failed case is expected when every MUST rule it broke is expected to
/// fail (the rule's expectation covers its cases).
fn case_default_ok(c: &Case, rule_expected_to_fail: &dyn Fn(&str) -> bool) -> bool {
    match c.verdict {
        Verdict::Pass | Verdict::Skip | Verdict::Limitation => true,
        Verdict::Fail => {
            let musts: Vec<&str> = c
                .violations
                .iter()
                .filter(|v| v.level == "MUST")
                .map(|v| v.rule.as_str())
                .collect();
            !musts.is_empty() && musts.iter().all(|r| rule_expected_to_fail(r))
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn x(pattern: &str, outcome: &str) -> Expectation {
        Expectation {
            pattern: pattern.into(),
            outcome: outcome.into(),
            reason: "because".into(),
            link: None,
            flaky: false,
        }
    }

    fn rule(id: &str, level: &str, verdict: Verdict) -> RuleSummary {
        RuleSummary {
            rule: id.into(),
            level: level.into(),
            verdict,
            checked: 1,
            failed: u64::from(verdict == Verdict::Fail),
            failing_cases: Vec::new(),
            evidence: None,
            reason: None,
            timing: None,
        }
    }

    fn case(id: &str, verdict: Verdict, broke: &[&str]) -> Case {
        Case {
            id: id.into(),
            path: "array".into(),
            scenario: "s".into(),
            batch: None,
            slice: None,
            verdict,
            message: None,
            differences: Vec::new(),
            duration_us: 0,
            replay: String::new(),
            output: None,
            changed: Vec::new(),
            checked: Vec::new(),
            violations: broke
                .iter()
                .map(|r| crate::report::RuleViolation {
                    rule: r.to_string(),
                    level: "MUST".into(),
                    at: String::new(),
                    evidence: String::new(),
                })
                .collect(),
            not_exercised: Vec::new(),
            flaky: Vec::new(),
            view: None,
        }
    }

    fn report(rules: Vec<RuleSummary>, cases: Vec<Case>) -> Report {
        let mut r: Report = serde_json::from_str(
            r#"{"report_version":1,"tool":{"name":"arrowcert","version":"0"},"command":"certify","invocation":[],
            "started_at":"","finished_at":"","duration_ms":0,"complete":true,"plugins":[],"data":"","devices":[],
            "cases":[],"summary":{"total":0,"passed":0,"failed":0,"errors":0,"skipped":0}}"#,
        )
        .unwrap();
        r.rules = rules;
        r.cases = cases;
        r
    }

    #[test]
    fn globs() {
        assert!(glob("a.*", "a.b.c"));
        assert!(glob("producer/*/x", "producer/async/r1/x"));
        assert!(glob("*cancel@end*", "producer/async/r1,cancel@end/p"));
        assert!(!glob("a.*", "b.a"));
        assert!(glob("exact", "exact") && !glob("exact", "exactly"));
        assert!(!glob("a*a", "a"));
    }

    #[test]
    fn expected_failures_match_and_their_cases_are_covered() {
        let exp = Expectations {
            library: "lib".into(),
            expectations: vec![
                x(crate::rule!("array.null-count"), "fail"),
                x("producer/array/p/*", "crash"),
            ],
        };
        let r = report(
            vec![rule(
                crate::rule!("array.null-count"),
                "MUST",
                Verdict::Fail,
            )],
            vec![
                case(
                    "producer/array/q/batch:0",
                    Verdict::Fail,
                    &[crate::rule!("array.null-count")],
                ),
                case("producer/array/p/batch:0", Verdict::Crash, &[]),
            ],
        );
        let c = check(&r, &exp, "f", false);
        assert!(c.unexpected.is_empty(), "{c:?}");
        assert_eq!(c.expected_failures, 3);
    }

    #[test]
    fn an_unexpected_failure_and_an_unexpected_pass_are_both_reported() {
        let exp = Expectations {
            library: "lib".into(),
            expectations: vec![
                x(crate::rule!("array.null-count"), "fail"),
                x("stream.*", "fail"),
            ],
        };
        let r = report(
            vec![
                rule(crate::rule!("array.null-count"), "MUST", Verdict::Pass),
                rule(crate::rule!("array.offsets.valid"), "MUST", Verdict::Fail),
                rule(
                    crate::rule!("array.buffers.aligned"),
                    "SHOULD",
                    Verdict::Fail,
                ),
            ],
            vec![case(
                "producer/array/q/batch:0",
                Verdict::Fail,
                &[crate::rule!("array.offsets.valid")],
            )],
        );
        let c = check(&r, &exp, "f", false);
        let kinds: Vec<(&str, &str)> = c
            .unexpected
            .iter()
            .map(|m| (m.id.as_str(), m.kind.as_str()))
            .collect();
        assert!(
            kinds.contains(&(crate::rule!("array.null-count"), "unexpected pass")),
            "{kinds:?}"
        );
        assert!(
            kinds.contains(&(crate::rule!("array.offsets.valid"), "unexpected failure")),
            "{kinds:?}"
        );
        assert!(
            kinds.contains(&("producer/array/q/batch:0", "unexpected failure")),
            "{kinds:?}"
        );
        assert!(
            !kinds
                .iter()
                .any(|(id, _)| *id == crate::rule!("array.buffers.aligned")),
            "SHOULD fails no run"
        );
        assert_eq!(c.unused, vec!["stream.*".to_string()]);
        // Over a filtered subset, the rule expected to fail that passed
        // did not meet the cases that break it; cases are still held.
        let c = check(&r, &exp, "f", true);
        let kinds: Vec<(&str, &str)> = c
            .unexpected
            .iter()
            .map(|m| (m.id.as_str(), m.kind.as_str()))
            .collect();
        assert!(
            !kinds
                .iter()
                .any(|(id, _)| *id == crate::rule!("array.null-count")),
            "{kinds:?}"
        );
        assert!(
            kinds.contains(&("producer/array/q/batch:0", "unexpected failure")),
            "{kinds:?}"
        );
    }

    #[test]
    fn a_flaky_entry_takes_any_outcome_it_lists() {
        let exp: Expectations = serde_json::from_str(
            r#"{"expectations":[{"pattern":"consumer/async/x/s","outcome":"fail|pass",
            "flaky":true,"reason":"r","link":"l"}]}"#,
        )
        .unwrap();
        assert!(exp.expectations[0].flaky);
        assert_eq!(exp.expectations[0].outcomes(), ["fail", "pass"]);
        for v in [Verdict::Pass, Verdict::Fail] {
            let r = report(Vec::new(), vec![case("consumer/async/x/s", v, &[])]);
            assert!(check(&r, &exp, "f", false).unexpected.is_empty());
        }
        let r = report(
            Vec::new(),
            vec![case("consumer/async/x/s", Verdict::Crash, &[])],
        );
        assert_eq!(check(&r, &exp, "f", false).unexpected.len(), 1);
        // An exact entry is written without the field.
        let text = serde_json::to_string(&x("a/b", "fail")).unwrap();
        assert!(!text.contains("flaky"), "{text}");
    }

    #[test]
    fn a_bad_outcome_word_is_refused() {
        let dir = std::env::temp_dir().join(format!("arrowcert-exp-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("e.json");
        std::fs::write(
            &p,
            r#"{"expectations":[{"pattern":"a.b","outcome":"broken","reason":"r"}]}"#,
        )
        .unwrap();
        let e = Expectations::read(&p).unwrap_err();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(e.contains("\"broken\""), "{e}");
    }
}

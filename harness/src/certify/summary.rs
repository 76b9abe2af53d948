//! Rule verdicts over a whole run, and the terminal summary grouped by
//! rule area with MUST failures first.

use std::collections::BTreeMap;

use crate::report::{Case, RuleSummary, ShrunkFailure, Verdict};
use crate::rules::{self, Level, Side};

/// The rule areas producer certification judges.
pub const PRODUCER_AREAS: &[&str] = &["schema", "array", "device", "stream", "async"];

/// True when certification of `sides` judges `rule`: producer-side (and
/// both-sides) rules of [`PRODUCER_AREAS`], the consumer rules, and the
/// both-sides device rule (`device.move`, which consumer device-array
/// cases judge too).
pub fn judged(rule: &rules::Rule, sides: crate::certify::Sides) -> bool {
    (sides.producer
        && matches!(rule.side, Side::Producer | Side::Both)
        && PRODUCER_AREAS.contains(&rule.area))
        || (sides.consumer && rule.area == "consumer")
        || (sides.consumer && rule.side == Side::Both && rule.area == "device")
}

/// One verdict per rule of the catalogue that certification of `sides`
/// judges ([`judged`]): `fail` if any case broke it, `pass` if cases
/// checked it and none broke it, `skip` if no case exercised it (with the
/// first reason a case gave).
pub fn rule_verdicts(cases: &[Case], sides: crate::certify::Sides) -> Vec<RuleSummary> {
    verdicts_of(cases, rules::RULES.iter().filter(|r| judged(r, sides)))
}

/// One verdict per rule of `in_scope` over `cases` (as [`rule_verdicts`]).
pub fn verdicts_of(
    cases: &[Case],
    in_scope: impl Iterator<Item = &'static rules::Rule>,
) -> Vec<RuleSummary> {
    let mut checked: BTreeMap<&str, u64> = BTreeMap::new();
    let mut failed: BTreeMap<&str, Vec<&Case>> = BTreeMap::new();
    let mut reasons: BTreeMap<&str, &str> = BTreeMap::new();
    for c in cases {
        for r in &c.checked {
            *checked.entry(r.as_str()).or_default() += 1;
        }
        for n in &c.not_exercised {
            reasons.entry(n.rule.as_str()).or_insert(n.reason.as_str());
        }
        let mut seen = std::collections::BTreeSet::new();
        for v in &c.violations {
            if seen.insert(v.rule.as_str()) {
                failed.entry(v.rule.as_str()).or_default().push(c);
            }
        }
    }
    in_scope
        .map(|r| {
            let fails = failed.get(r.id).map(Vec::as_slice).unwrap_or(&[]);
            let n = checked
                .get(r.id)
                .copied()
                .unwrap_or(0)
                .max(fails.len() as u64);
            let verdict = if !fails.is_empty() {
                Verdict::Fail
            } else if n > 0 {
                Verdict::Pass
            } else {
                Verdict::Skip
            };
            RuleSummary {
                rule: r.id.into(),
                level: r.level.to_string(),
                verdict,
                checked: n,
                failed: fails.len() as u64,
                failing_cases: fails.iter().take(5).map(|c| c.id.clone()).collect(),
                evidence: fails.first().and_then(|c| {
                    c.violations
                        .iter()
                        .find(|v| v.rule == r.id)
                        .map(|v| format!("{}: {}", v.at, v.evidence))
                }),
                reason: (verdict == Verdict::Skip)
                    .then(|| reasons.get(r.id).map(|s| s.to_string()))
                    .flatten(),
                timing: crate::rules::timing_dependent(r.id).map(str::to_string),
            }
        })
        .collect()
}

/// True when no MUST rule failed.
pub fn musts_pass(rules: &[RuleSummary]) -> bool {
    !rules
        .iter()
        .any(|r| r.verdict == Verdict::Fail && r.level == Level::Must.to_string())
}

/// The terminal summary: failing rules first (MUST before SHOULD/INFO),
/// each with its first failing case, evidence and replay; then a line per
/// area with counts.
pub fn render(rules: &[RuleSummary], cases: &[Case], shrunk: &[ShrunkFailure]) -> String {
    let mut out = String::new();
    let replay = |id: &str| {
        cases
            .iter()
            .find(|c| c.id == id)
            .map(|c| c.replay.clone())
            .unwrap_or_default()
    };
    let mut failing: Vec<&RuleSummary> = rules
        .iter()
        .filter(|r| r.verdict == Verdict::Fail)
        .collect();
    failing.sort_by_key(|r| (r.level != "MUST", r.rule.clone()));
    if !failing.is_empty() {
        out.push_str("\nrules broken:\n");
        for r in &failing {
            out.push_str(&format!(
                "\n  {} {}  ({} of {} cases)\n",
                r.level, r.rule, r.failed, r.checked
            ));
            if let Some(e) = &r.evidence {
                out.push_str(&format!(
                    "    {}\n",
                    crate::report::printable(&e.chars().take(300).collect::<String>())
                ));
            }
            if let Some(first) = r.failing_cases.first() {
                out.push_str(&format!(
                    "    first case: {first}\n    replay: {}\n",
                    replay(first)
                ));
            }
            if let Some(s) = shrunk.iter().find(|s| s.target == r.rule) {
                out.push_str(&shrunk_lines(s));
            }
        }
    }
    for s in shrunk.iter().filter(|s| s.target == "crash") {
        out.push_str("\ncrash (shrunk):\n");
        out.push_str(&shrunk_lines(s));
    }
    let unexercised: Vec<&RuleSummary> = rules
        .iter()
        .filter(|r| r.verdict == Verdict::Skip && r.reason.is_some())
        .collect();
    if !unexercised.is_empty() {
        out.push_str("\nnot exercised:\n");
        for r in unexercised {
            out.push_str(&format!(
                "  {} {}: {}\n",
                r.level,
                r.rule,
                crate::report::printable(r.reason.as_deref().unwrap_or(""))
            ));
        }
    }
    out.push_str("\nby area:\n");
    let mut areas: Vec<&str> = Vec::new();
    for r in rules {
        let area = r.rule.split('.').next().unwrap_or("");
        if !areas.contains(&area) {
            areas.push(area);
        }
    }
    for area in areas {
        let of: Vec<&RuleSummary> = rules
            .iter()
            .filter(|r| r.rule.split('.').next() == Some(area))
            .collect();
        let count = |v| of.iter().filter(|r| r.verdict == v).count();
        out.push_str(&format!(
            "  {:<10} {:>3} rules: {} pass, {} fail, {} not exercised\n",
            area,
            of.len(),
            count(Verdict::Pass),
            count(Verdict::Fail),
            count(Verdict::Skip)
        ));
    }
    out
}

fn shrunk_lines(s: &ShrunkFailure) -> String {
    format!(
        "    smallest case: {}  ({} steps from {}, {} candidates tried{})\n      data: {}\n      replay: {}\n",
        s.case,
        s.steps,
        s.from_case,
        s.tried,
        if s.exhausted { ", budget spent" } else { "" },
        crate::report::printable(&s.scenario.chars().take(300).collect::<String>()),
        s.replay
    )
}

/// JUnit XML for CI dashboards: two suites. `rules` has one test case per
/// rule (what a CI user tracks over time): a broken rule is a
/// `<failure>`, a rule no case exercised is `<skipped>` with the reason.
/// `cases` has one test case per case, so that what is not a rule verdict
/// shows too: a crash, a timeout, an error or a harness error is an
/// `<error>` (its `type` says which), a failed case a `<failure>`, a
/// limitation or a skip `<skipped>` with its message; each carries its
/// replay command. Every string is escaped.
pub fn junit(rules: &[RuleSummary], cases: &[Case], suite: &str) -> String {
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let count = |v: Verdict| cases.iter().filter(|c| c.verdict == v).count();
    let case_errors = count(Verdict::Crash)
        + count(Verdict::Timeout)
        + count(Verdict::Error)
        + count(Verdict::HarnessError);
    let rule_fails = rules.iter().filter(|r| r.verdict == Verdict::Fail).count();
    out.push_str(&format!(
        "<testsuites name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{case_errors}\">\n",
        xml(suite),
        rules.len() + cases.len(),
        rule_fails + count(Verdict::Fail),
    ));
    let skips = rules.iter().filter(|r| r.verdict == Verdict::Skip).count();
    out.push_str(&format!(
        "<testsuite name=\"{} rules\" tests=\"{}\" failures=\"{rule_fails}\" errors=\"0\" skipped=\"{skips}\">\n",
        xml(suite),
        rules.len()
    ));
    for r in rules {
        let area = r.rule.split('.').next().unwrap_or("");
        out.push_str(&format!(
            "  <testcase classname=\"arrowcert.rules.{}\" name=\"{}\">",
            xml(area),
            xml(&r.rule)
        ));
        match r.verdict {
            Verdict::Fail => out.push_str(&format!(
                "<failure type=\"{}\" message=\"{} {} broken in {} of {} cases\">{}</failure>",
                xml(&r.level),
                xml(&r.level),
                xml(&r.rule),
                r.failed,
                r.checked,
                xml(&format!(
                    "{}\ncases: {}",
                    r.evidence.as_deref().unwrap_or(""),
                    r.failing_cases.join(", ")
                ))
            )),
            Verdict::Skip => out.push_str(&format!(
                "<skipped message=\"{}\"/>",
                xml(r.reason.as_deref().unwrap_or("no case exercised this rule"))
            )),
            _ => {}
        }
        out.push_str("</testcase>\n");
    }
    out.push_str("</testsuite>\n");
    out.push_str(&format!(
        "<testsuite name=\"{} cases\" tests=\"{}\" failures=\"{}\" errors=\"{case_errors}\" skipped=\"{}\">\n",
        xml(suite),
        cases.len(),
        count(Verdict::Fail),
        count(Verdict::Skip) + count(Verdict::Limitation)
    ));
    for c in cases {
        out.push_str(&junit_case(c));
    }
    out.push_str("</testsuite>\n</testsuites>\n");
    out
}

/// One case as a JUnit test case: classname is the ID's directories
/// (`arrowcert.cases.producer.array`), name the case ID.
fn junit_case(c: &Case) -> String {
    let class: Vec<&str> = c.id.split('/').take(2).collect();
    let message = c.message.as_deref().unwrap_or("");
    let body = || {
        let mut text = String::new();
        for d in &c.differences {
            text.push_str(d);
            text.push('\n');
        }
        text.push_str(&format!("replay: {}", c.replay));
        xml(&text)
    };
    let inner = match c.verdict {
        Verdict::Pass => String::new(),
        Verdict::Fail => format!(
            "<failure type=\"fail\" message=\"{}\">{}</failure>",
            xml(message),
            body()
        ),
        Verdict::Crash | Verdict::Timeout | Verdict::Error | Verdict::HarnessError => format!(
            "<error type=\"{}\" message=\"{}\">{}</error>",
            c.verdict.as_str(),
            xml(message),
            body()
        ),
        Verdict::Limitation => format!(
            "<skipped type=\"limitation\" message=\"{}\"/>",
            xml(&format!("limitation: {message}"))
        ),
        Verdict::Skip => format!("<skipped type=\"skip\" message=\"{}\"/>", xml(message)),
    };
    // A flaky case says so in its output (JUnit has no flaky state).
    let inner = if c.flaky.is_empty() {
        inner
    } else {
        let seen: Vec<&str> = c.flaky.iter().map(|v| v.as_str()).collect();
        format!(
            "{inner}<system-out>{}</system-out>",
            xml(&format!(
                "flaky: the verdict changed when run again ({})",
                seen.join(", ")
            ))
        )
    };
    format!(
        "  <testcase classname=\"arrowcert.cases.{}\" name=\"{}\" time=\"{:.3}\">{inner}</testcase>\n",
        xml(&class.join(".")),
        xml(&c.id),
        c.duration_us as f64 / 1e6
    )
}

/// Escapes text for XML attributes and content; characters XML 1.0 cannot
/// carry at all (control characters other than tab, newline, CR) become
/// U+FFFD.
pub fn xml(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xml_escapes_markup_and_control_characters() {
        assert_eq!(
            xml("a<b>&\"'\u{1}\n"),
            "a&lt;b&gt;&amp;&quot;&apos;\u{FFFD}\n"
        );
        let plugin_text = "</failure><script>x</script>";
        assert!(!xml(plugin_text).contains('<'));
    }
}

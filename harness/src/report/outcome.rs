//! How a run ends as a whole. Every command that judges libraries
//! (`certify`, `roundtrip`, `matrix`, `merge`) ends in one of four
//! outcomes, each with its own exit code, so that nothing exercised is
//! never read as a pass and an error is never read as a pass:
//!
//! - *pass* (exit 0): every MUST rule exercised held, and every interface
//!   path the plugins export ran at least one data case to a verdict;
//! - *fail* (exit 1): a MUST rule failed, a case crashed or hung, or a
//!   call failed with an error that is not a declared limitation;
//! - *not certified* (exit 3): too little could be exercised to say
//!   anything: no case selected, every call errored or was declined, the
//!   only device asked for is missing, or the run is incomplete;
//! - *harness error* (exit 4): arrowcert's own code failed (a panic): the
//!   verdicts cannot be trusted, please report it.
//!
//! Bad input (exit 2) never gets this far.

#![forbid(unsafe_code)]

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Case, RuleSummary, Verdict};

/// Exit code of a run that passed.
pub const EXIT_PASS: i32 = 0;
/// Exit code of a run that failed.
pub const EXIT_FAIL: i32 = 1;
/// Exit code of bad input (a path that is not a plugin, a wrong ABI
/// version, an unreadable data directory, a usage error).
pub const EXIT_BAD_INPUT: i32 = 2;
/// Exit code of a run that could not certify anything.
pub const EXIT_NOT_CERTIFIED: i32 = 3;
/// Exit code of a run in which arrowcert itself failed.
pub const EXIT_HARNESS_ERROR: i32 = 4;

/// The outcome of a whole run.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Pass,
    Fail,
    NotCertified,
    HarnessError,
}

impl Outcome {
    /// The process exit code of a run that ended so.
    pub fn exit_code(self) -> i32 {
        match self {
            Outcome::Pass => EXIT_PASS,
            Outcome::Fail => EXIT_FAIL,
            Outcome::NotCertified => EXIT_NOT_CERTIFIED,
            Outcome::HarnessError => EXIT_HARNESS_ERROR,
        }
    }

    /// The words summaries print.
    pub fn words(self) -> &'static str {
        match self {
            Outcome::Pass => "ok",
            Outcome::Fail => "FAILED",
            Outcome::NotCertified => "NOT CERTIFIED",
            Outcome::HarnessError => "HARNESS ERROR",
        }
    }
}

/// An outcome with the reasons for it, as reports carry it.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct Judgement {
    pub outcome: Outcome,
    /// Why, one line each (empty for a pass).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
}

impl Judgement {
    pub fn exit_code(&self) -> i32 {
        self.outcome.exit_code()
    }
}

/// The rules whose check means the case compared data: a case that
/// checked one of these (or failed) ran to a verdict on data.
pub const DATA_RULES: &[&str] = &[
    crate::rule!("array.values.roundtrip"),
    crate::rule!("consumer.read.values"),
    crate::rule!("async.array.valid"),
    crate::rule!("schema.format.valid"),
];

/// The words a skip for a missing entry point carries
/// ([`crate::plugin::CallError::Missing`]): such a path is not one the
/// plugin exports, so it needs no case.
pub const NOT_EXPORTED: &str = "is not exported by the plugin";

/// The words of the async consumer path's skip when the consumer lacks
/// its two entry points (`certify::asynchronous::run_consumer`: "the
/// consumer does not export arrowcert_consume_async_start and
/// arrowcert_consume_async_finish"), which say the same as
/// [`NOT_EXPORTED`] in other words.
const DOES_NOT_EXPORT: &str = "does not export arrowcert_";

/// The words of a skip for a device the plugin does not claim
/// (`arrowcert_plugin_supports_device(N) is not 1`): that path on that
/// device is not one it offers.
const DEVICE_NOT_CLAIMED: &str = "arrowcert_plugin_supports_device(";

/// True when a skip's message says the plugin lacks the path's entry
/// point(s), or does not claim the case's device.
pub fn says_not_exported(message: &str) -> bool {
    message.contains(NOT_EXPORTED)
        || message.contains(DOES_NOT_EXPORT)
        || message.contains(DEVICE_NOT_CLAIMED)
}

/// A case's path, with its device when that is not the CPU (`device_array
/// on emulated`): coverage is judged per path and device.
fn path_key(c: &Case) -> String {
    match c
        .id
        .split('/')
        .find_map(|part| part.strip_prefix("device:"))
    {
        Some(device) => format!("{} on {device}", c.path),
        None => c.path.clone(),
    }
}

/// True when a case ran to a verdict on data: it failed, or it passed
/// having compared data (a released-structure case passes without data).
pub fn ran_on_data(c: &Case, data_rules: &[&str]) -> bool {
    match c.verdict {
        Verdict::Fail => true,
        Verdict::Pass => {
            data_rules.is_empty() || c.checked.iter().any(|r| data_rules.contains(&r.as_str()))
        }
        _ => false,
    }
}

/// The paths (the report's `path` of each case) the plugins export: every
/// path with a case that was not skipped for a missing entry point.
fn exported_paths(cases: &[Case]) -> BTreeMap<String, bool> {
    let mut paths: BTreeMap<String, bool> = BTreeMap::new();
    for c in cases {
        let missing =
            c.verdict == Verdict::Skip && c.message.as_deref().is_some_and(says_not_exported);
        let e = paths.entry(path_key(c)).or_insert(false);
        *e |= !missing;
    }
    paths
}

/// What a run needs to be judged.
pub struct Run<'a> {
    pub cases: &'a [Case],
    /// Certification: the rule verdicts (a MUST rule that failed fails the
    /// run); empty for roundtrips, where a failed case is the failure.
    pub rules: &'a [RuleSummary],
    /// Cases the run selected after filters.
    pub planned: u64,
    /// False when the run stopped before every selected case ran.
    pub complete: bool,
    /// The rules that say a case compared data ([`DATA_RULES`] for
    /// certification; empty for roundtrips, where every pass compared).
    pub data_rules: &'a [&'a str],
}

/// Judges a run. The order matters: a harness error makes every other
/// verdict untrustworthy; a MUST failure, a crash or a hang fails the run
/// whatever else happened; then too little exercised is *not certified*
/// (so a library whose every call errors is not "failed" on one path and
/// silent on the rest, but not certified at all); then any remaining
/// error fails it.
pub fn judge(run: &Run) -> Judgement {
    let mut reasons = Vec::new();
    let count = |v: Verdict| run.cases.iter().filter(|c| c.verdict == v).count();
    // " (first: ID: message)" of the first case with this verdict.
    let first_of = |v: Verdict| {
        run.cases
            .iter()
            .find(|c| c.verdict == v)
            .map(|c| format!(" (first: {}: {})", c.id, c.message.as_deref().unwrap_or("")))
            .unwrap_or_default()
    };
    let harness = count(Verdict::HarnessError);
    if harness > 0 {
        let first = first_of(Verdict::HarnessError);
        reasons.push(format!(
            "arrowcert's own code failed in {harness} case(s){first}; these verdicts cannot be trusted: please report this"
        ));
        return Judgement {
            outcome: Outcome::HarnessError,
            reasons,
        };
    }
    let must_failed: Vec<&str> = run
        .rules
        .iter()
        .filter(|r| r.verdict == Verdict::Fail && r.level == "MUST")
        .map(|r| r.rule.as_str())
        .collect();
    if !must_failed.is_empty() {
        reasons.push(format!("MUST rule(s) broken: {}", must_failed.join(", ")));
    }
    if run.rules.is_empty() && count(Verdict::Fail) > 0 {
        reasons.push(format!("{} case(s) failed", count(Verdict::Fail)));
    }
    let (crashed, hung) = (count(Verdict::Crash), count(Verdict::Timeout));
    if crashed > 0 {
        reasons.push(format!("{crashed} case(s) crashed"));
    }
    let mut paths: Vec<String> = run
        .cases
        .iter()
        .filter(|c| c.path_hangs())
        .map(crate::report::path_key)
        .collect();
    let not_run = paths.len();
    if hung > not_run {
        reasons.push(format!("{} case(s) timed out", hung - not_run));
    }
    if not_run > 0 {
        paths.sort();
        paths.dedup();
        reasons.push(format!(
            "{not_run} case(s) not run because their path hangs ({})",
            paths.join(", ")
        ));
    }
    if !reasons.is_empty() {
        return Judgement {
            outcome: Outcome::Fail,
            reasons,
        };
    }
    // Too little exercised.
    if run.planned == 0 || run.cases.is_empty() {
        reasons.push("no case was selected (a filter or --device matched nothing)".into());
    } else if !run.complete {
        reasons.push(format!(
            "the run is incomplete: {} of {} cases ran",
            run.cases.len(),
            run.planned
        ));
    } else {
        let paths = exported_paths(run.cases);
        for (path, &exported) in &paths {
            if !exported {
                continue;
            }
            let on_path = run.cases.iter().filter(|c| &path_key(c) == path);
            if !on_path.clone().any(|c| ran_on_data(c, run.data_rules)) {
                let mut tally: BTreeMap<&str, usize> = BTreeMap::new();
                for c in on_path {
                    *tally.entry(c.verdict.as_str()).or_default() += 1;
                }
                let tally: Vec<String> = tally.iter().map(|(v, n)| format!("{n} {v}")).collect();
                reasons.push(format!(
                    "path {path}: no data case ran to a verdict ({})",
                    tally.join(", ")
                ));
            }
        }
        if paths.values().all(|e| !e) {
            reasons.push("the plugins export none of the paths the run covers".into());
        }
    }
    if !reasons.is_empty() {
        return Judgement {
            outcome: Outcome::NotCertified,
            reasons,
        };
    }
    let errors = count(Verdict::Error);
    if errors > 0 {
        let first = first_of(Verdict::Error);
        reasons.push(format!(
            "{errors} case(s) ended in an error that is not a declared limitation{first}"
        ));
        return Judgement {
            outcome: Outcome::Fail,
            reasons,
        };
    }
    Judgement {
        outcome: Outcome::Pass,
        reasons,
    }
}

/// The outcome of a run given expectations: success means the results
/// match them. A harness error or a run that certified too little keeps
/// its outcome (expectations cannot make up for what did not run); any
/// other run fails exactly when a result was unexpected, failure or pass.
pub fn with_expectations(j: Judgement, checked: &super::expectations::Checked) -> Judgement {
    if matches!(j.outcome, Outcome::HarnessError | Outcome::NotCertified) {
        return j;
    }
    if checked.unexpected.is_empty() {
        return Judgement {
            outcome: Outcome::Pass,
            reasons: vec![format!(
                "every result as {} expects ({} expected failures)",
                checked.file, checked.expected_failures
            )],
        };
    }
    let mut reasons = vec![format!(
        "{} result(s) not as {} expects",
        checked.unexpected.len(),
        checked.file
    )];
    for m in checked.unexpected.iter().take(10) {
        reasons.push(format!(
            "{}: {} (expected {}, got {})",
            m.id, m.kind, m.expected, m.actual
        ));
    }
    Judgement {
        outcome: Outcome::Fail,
        reasons,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(id: &str, path: &str, verdict: Verdict, checked: &[&str], message: &str) -> Case {
        Case {
            id: id.into(),
            path: path.into(),
            scenario: "s".into(),
            batch: None,
            slice: None,
            verdict,
            message: (!message.is_empty()).then(|| message.to_string()),
            differences: Vec::new(),
            duration_us: 0,
            replay: String::new(),
            output: None,
            changed: Vec::new(),
            checked: checked.iter().map(|s| s.to_string()).collect(),
            violations: Vec::new(),
            not_exercised: Vec::new(),
            flaky: Vec::new(),
            view: None,
        }
    }

    fn run<'a>(cases: &'a [Case], rules: &'a [RuleSummary]) -> Run<'a> {
        Run {
            cases,
            rules,
            planned: cases.len() as u64,
            complete: true,
            data_rules: DATA_RULES,
        }
    }

    const VALUES: &[&str] = &[crate::rule!("array.values.roundtrip")];

    #[test]
    fn a_run_whose_every_call_errors_is_not_certified() {
        let cases = [
            case("a", "array", Verdict::Error, &[], "EIO"),
            case("b", "stream", Verdict::Error, &[], "EIO"),
        ];
        let j = judge(&run(&cases, &[]));
        assert_eq!(j.outcome, Outcome::NotCertified, "{j:?}");
        assert_eq!(j.exit_code(), EXIT_NOT_CERTIFIED);
        assert!(j.reasons.iter().any(|r| r.contains("path array")), "{j:?}");
    }

    #[test]
    fn an_empty_selection_is_not_certified() {
        let j = judge(&run(&[], &[]));
        assert_eq!(j.outcome, Outcome::NotCertified);
        assert!(j.reasons[0].contains("no case was selected"));
    }

    #[test]
    fn a_path_the_plugin_does_not_export_needs_no_case() {
        let cases = [
            case("a", "array", Verdict::Pass, VALUES, ""),
            case(
                "b",
                "stream",
                Verdict::Skip,
                &[],
                "arrowcert_produce_stream is not exported by the plugin",
            ),
        ];
        assert_eq!(judge(&run(&cases, &[])).outcome, Outcome::Pass);
    }

    #[test]
    fn an_async_consumer_path_without_its_entry_points_needs_no_case() {
        // The wording certify::asynchronous uses for a consumer that lacks
        // both async entry points.
        let cases = [
            case("a", "consume_array", Verdict::Pass, &[crate::rule!("consumer.read.values")], ""),
            case(
                "b",
                "consume_async",
                Verdict::Skip,
                &[],
                "the consumer does not export arrowcert_consume_async_start and arrowcert_consume_async_finish",
            ),
        ];
        assert_eq!(judge(&run(&cases, &[])).outcome, Outcome::Pass);
    }

    #[test]
    fn a_path_with_only_limitations_is_not_certified() {
        let cases = [
            case(
                "a",
                "consume_array",
                Verdict::Pass,
                &[crate::rule!("consumer.read.values")],
                "",
            ),
            case("b", "consume_stream", Verdict::Limitation, &[], "no int128"),
        ];
        let j = judge(&run(&cases, &[]));
        assert_eq!(j.outcome, Outcome::NotCertified, "{j:?}");
        assert!(j.reasons[0].contains("consume_stream"), "{j:?}");
    }

    #[test]
    fn a_pass_without_data_does_not_cover_a_path() {
        // A released-structure case passes without comparing any data.
        let cases = [case(
            "a",
            "consume_array",
            Verdict::Pass,
            &[crate::rule!("consumer.release.checks-released")],
            "",
        )];
        assert_eq!(judge(&run(&cases, &[])).outcome, Outcome::NotCertified);
    }

    #[test]
    fn an_error_beside_covered_paths_fails() {
        let cases = [
            case("a", "array", Verdict::Pass, VALUES, ""),
            case("b", "array", Verdict::Error, &[], "EIO"),
        ];
        let j = judge(&run(&cases, &[]));
        assert_eq!(j.outcome, Outcome::Fail, "{j:?}");
        assert!(j.reasons[0].contains("not a declared limitation"));
    }

    #[test]
    fn a_limitation_beside_covered_paths_passes() {
        let cases = [
            case(
                "a",
                "consume_array",
                Verdict::Pass,
                &[crate::rule!("consumer.read.values")],
                "",
            ),
            case(
                "b",
                "consume_array",
                Verdict::Limitation,
                &[],
                "offsets unsupported",
            ),
        ];
        assert_eq!(judge(&run(&cases, &[])).outcome, Outcome::Pass);
    }

    #[test]
    fn a_crash_fails_even_when_nothing_else_ran() {
        let cases = [case("a", "array", Verdict::Crash, &[], "SIGSEGV")];
        assert_eq!(judge(&run(&cases, &[])).outcome, Outcome::Fail);
    }

    #[test]
    fn a_harness_error_outranks_everything() {
        let cases = [
            case("a", "array", Verdict::Crash, &[], "SIGSEGV"),
            case(
                "b",
                "array",
                Verdict::HarnessError,
                &[],
                "panicked at x.rs:1:1",
            ),
        ];
        let j = judge(&run(&cases, &[]));
        assert_eq!(j.outcome, Outcome::HarnessError);
        assert_eq!(j.exit_code(), EXIT_HARNESS_ERROR);
        assert!(j.reasons[0].contains("please report"));
    }

    #[test]
    fn a_must_rule_failure_fails_and_a_should_failure_does_not() {
        let cases = [case("a", "array", Verdict::Pass, VALUES, "")];
        let rule = |level: &str| RuleSummary {
            rule: "r".into(),
            level: level.into(),
            verdict: Verdict::Fail,
            checked: 1,
            failed: 1,
            failing_cases: Vec::new(),
            evidence: None,
            reason: None,
            timing: None,
        };
        assert_eq!(judge(&run(&cases, &[rule("MUST")])).outcome, Outcome::Fail);
        assert_eq!(
            judge(&run(&cases, &[rule("SHOULD")])).outcome,
            Outcome::Pass
        );
    }

    #[test]
    fn an_incomplete_run_is_not_certified() {
        let cases = [case("a", "array", Verdict::Pass, VALUES, "")];
        let mut r = run(&cases, &[]);
        r.planned = 2;
        r.complete = false;
        assert_eq!(judge(&r).outcome, Outcome::NotCertified);
    }
}

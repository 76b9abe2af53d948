//! A case whose plugin crashed or hung is charged to the rule the case
//! exists to exercise, so the rules table shows the failure and not just
//! the case list. The worker that ran the case is gone, so nothing else
//! was observed; the charge says so and quotes how it ended.
//!
//! Only consumer cases are charged. Each consumer case kind hands over
//! data whose handling one rule states: valid data must be read
//! (`consumer.read.values`), a failing stream must come back as an error
//! (`consumer.stream.error`), and a released structure should be refused
//! ("consumers SHOULD check for a NULL release callback and treat it
//! accordingly (probably by erroring out)", `consumer.release.checks-released`).
//! A crash in any of them is the consumer not doing what that rule asks.
//! A producer case's crash can come from any of the steps the harness
//! drives (export, moves, releases, reads of what was exported), so it has
//! no one rule; it stays a crash, which fails the run on its own. The one
//! exception is a death while the harness hands the driver the event a
//! device array's sync_event points to: that step is named by its own
//! breadcrumb, and a pointer to a live event cannot kill it, so it is
//! `device.event.type` (MUST).

#![forbid(unsafe_code)]

use super::consumer::Kind;
use super::{CaseSpec, Path};
use crate::report::{Case, RuleViolation, Verdict};
use crate::rules;

/// The rule a crash or hang in this case breaks, if the case has one.
pub fn charged_rule(spec: &CaseSpec) -> Option<&'static str> {
    match spec.path {
        Path::Consumer(Kind::Released { .. }) => {
            Some(crate::rule!("consumer.release.checks-released"))
        }
        Path::Consumer(Kind::StreamError { .. }) => Some(crate::rule!("consumer.stream.error")),
        Path::Consumer(
            Kind::Array(_) | Kind::DeviceArray(_) | Kind::Stream(_) | Kind::DeviceStream(_),
        ) => Some(crate::rule!("consumer.read.values")),
        _ => None,
    }
}

/// Charges a crashed or timed-out `case` to its rule (a no-op for other
/// verdicts and for cases with no rule).
pub fn charge(spec: &CaseSpec, case: &mut Case) {
    if !matches!(case.verdict, Verdict::Crash | Verdict::Timeout) {
        return;
    }
    if case.verdict == Verdict::Crash && died_in_sync_event_wait(case) {
        charge_sync_event(case);
        return;
    }
    let Some(rule) = charged_rule(spec) else {
        return;
    };
    add(case, rule, "consume call", |how| {
        format!("the consumer did not return from the case: {how}")
    });
}

/// Records `rule` as checked and broken at `at` (once), with the evidence
/// `evidence` makes of how the case ended.
fn add(case: &mut Case, rule: &str, at: &str, evidence: impl FnOnce(&str) -> String) {
    if case.violations.iter().any(|v| v.rule == rule) {
        return;
    }
    let how = case.message.clone().unwrap_or_else(|| "it crashed".into());
    if !case.checked.iter().any(|r| r == rule) {
        case.checked.push(rule.to_string());
    }
    case.violations.push(RuleViolation {
        rule: rule.to_string(),
        level: rules::find(rule)
            .map(|r| r.level.to_string())
            .unwrap_or_else(|| "MUST".into()),
        at: at.into(),
        evidence: evidence(&crate::report::bounded(&how, 1024)),
    });
}

/// Whether the worker died while the harness waited on a device array's
/// sync_event (its breadcrumb, [`super::device::SYNC_EVENT_STEP`]).
fn died_in_sync_event_wait(case: &Case) -> bool {
    case.message
        .as_deref()
        .is_some_and(|m| m.contains(&format!("during `{}`", super::device::SYNC_EVENT_STEP)))
}

/// A producer's or a consumer's case alike: what the sync_event pointed
/// to, handed to the driver, killed the process, so it was not "a pointer
/// to a CUevent" (`device.event.type`).
fn charge_sync_event(case: &mut Case) {
    add(
        case,
        crate::rule!("device.event.type"),
        "sync_event",
        |how| {
            format!("the process died when the device's driver was handed the event sync_event points to: it does not point to a live event ({how})")
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::certify::consumer::Enc;
    use crate::device::Kind as DeviceKind;

    fn spec(path: Path) -> CaseSpec {
        CaseSpec {
            path,
            scenario: 0,
            batch: None,
            slice: None,
            id: "x".into(),
            device: DeviceKind::Cpu,
        }
    }

    fn ended(verdict: Verdict) -> Case {
        Case {
            id: "x".into(),
            path: "consume_array".into(),
            scenario: "primitive".into(),
            batch: None,
            slice: None,
            verdict,
            message: Some("the worker was killed by SIGSEGV, during `consume`".into()),
            differences: Vec::new(),
            duration_us: 0,
            replay: "arrowcert replay x".into(),
            output: None,
            checked: Vec::new(),
            violations: Vec::new(),
            not_exercised: Vec::new(),
            flaky: Vec::new(),
            view: None,
            changed: Vec::new(),
        }
    }

    #[test]
    fn a_crash_on_a_released_schema_fails_the_should() {
        let s = spec(Path::Consumer(Kind::Released { schema: true }));
        let mut c = ended(Verdict::Crash);
        charge(&s, &mut c);
        assert_eq!(
            c.checked,
            [crate::rule!("consumer.release.checks-released")]
        );
        assert_eq!(c.violations.len(), 1);
        assert_eq!(c.violations[0].level, "SHOULD");
        assert!(c.violations[0].evidence.contains("SIGSEGV"));
        // Charged once, however often it is called.
        charge(&s, &mut c);
        assert_eq!(c.violations.len(), 1);
    }

    #[test]
    fn hangs_are_charged_and_clean_endings_are_not() {
        let s = spec(Path::Consumer(Kind::Array(Enc::Plain)));
        let mut hung = ended(Verdict::Timeout);
        charge(&s, &mut hung);
        assert_eq!(
            hung.violations[0].rule,
            crate::rule!("consumer.read.values")
        );
        for v in [Verdict::Pass, Verdict::Fail, Verdict::Error, Verdict::Skip] {
            let mut c = ended(v);
            charge(&s, &mut c);
            assert!(c.violations.is_empty() && c.checked.is_empty(), "{v:?}");
        }
    }

    #[test]
    fn a_death_in_the_sync_event_wait_fails_the_event_rule_and_no_other_step_does() {
        for p in Path::ALL {
            let mut c = ended(Verdict::Crash);
            c.message = Some(format!(
                "the worker killed by SIGSEGV (11) in the middle of the case, during `{}`",
                crate::certify::device::SYNC_EVENT_STEP
            ));
            charge(&spec(p), &mut c);
            assert_eq!(c.violations.len(), 1, "{p:?}");
            assert_eq!(c.violations[0].rule, crate::rule!("device.event.type"));
            assert_eq!(c.violations[0].level, "MUST");
            assert_eq!(c.checked, [crate::rule!("device.event.type")]);
            let mut later = ended(Verdict::Crash);
            later.message = Some(format!(
                "the worker killed by SIGSEGV (11), during `{}`",
                crate::certify::device::READ_STEP
            ));
            charge(&spec(p), &mut later);
            assert!(
                later
                    .violations
                    .iter()
                    .all(|v| v.rule != crate::rule!("device.event.type")),
                "{p:?}"
            );
        }
    }

    #[test]
    fn producer_crashes_have_no_one_rule() {
        for p in Path::ALL {
            assert_eq!(charged_rule(&spec(p)), None);
            let mut c = ended(Verdict::Crash);
            charge(&spec(p), &mut c);
            assert!(c.violations.is_empty());
        }
    }
}

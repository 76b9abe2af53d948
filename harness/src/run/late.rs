//! Late writes into the structures a plugin's calls filled
//! ([`crate::abi::outslot`]), charged to the case whose call it was.

use crate::abi::outslot::{Damage, RULE};

/// Counts [`RULE`] as checked by `case` (its `checked` list stays sorted).
pub fn mark_checked(case: &mut crate::report::Case) {
    if let Err(at) = case.checked.binary_search_by(|r| r.as_str().cmp(RULE)) {
        case.checked.insert(at, RULE.to_string());
    }
}

/// Charges `damage` to `case`: a violation of [`RULE`] on a certification
/// case, a difference on others; a case that had passed now fails.
pub fn charge(case: &mut crate::report::Case, damage: &[Damage]) {
    use crate::report::{RuleViolation, Verdict};
    let Some(first) = damage.first() else {
        return;
    };
    let certification = !case.checked.is_empty() || !case.violations.is_empty();
    for d in damage {
        if certification {
            mark_checked(case);
            case.violations.push(RuleViolation {
                rule: RULE.to_string(),
                level: crate::rules::find(RULE)
                    .map(|r| r.level.to_string())
                    .unwrap_or_else(|| "SHOULD".into()),
                at: d.entry.to_string(),
                evidence: d.evidence(),
            });
        } else {
            case.differences.push(format!("{RULE}: {}", d.evidence()));
        }
    }
    if matches!(
        case.verdict,
        Verdict::Pass | Verdict::Limitation | Verdict::Skip
    ) {
        case.verdict = Verdict::Fail;
        case.message = Some(format!(
            "a thread of the library wrote into the structure `{}` had filled, after the call had returned",
            first.entry
        ));
    }
}

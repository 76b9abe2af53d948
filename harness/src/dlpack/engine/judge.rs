//! Judging what a case observed: the verdict of a case from its observations,
//! and the comparisons of the values read with those asked for.

use super::*;

pub(super) fn judged(case: &DlCase, obs: Obs, ended: Ended, start: Instant, replay: &str) -> Case {
    let violations: Vec<RuleViolation> = obs
        .violations
        .iter()
        .map(|(rule, at, evidence)| RuleViolation {
            rule: rule.to_string(),
            level: rules::find(rule).map_or("MUST".into(), |r| r.level.to_string()),
            at: at.clone(),
            evidence: crate::report::bounded(evidence, 4096),
        })
        .collect();
    let must = violations.iter().any(|v| v.level == "MUST");
    let changed = match &ended {
        Ended::Changed(m) => vec![m.clone()],
        _ => Vec::new(),
    };
    let (verdict, message) = match ended {
        _ if must => (
            Verdict::Fail,
            Some(format!(
                "rule(s) broken: {}",
                violations
                    .iter()
                    .map(|v| v.rule.as_str())
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        ),
        Ended::Ran => (Verdict::Pass, None),
        Ended::Differs(m) => (Verdict::Fail, Some(m)),
        Ended::Changed(_) => (Verdict::Pass, None),
        Ended::Limitation(m) => (Verdict::Limitation, Some(m)),
        Ended::Skipped(m) => (Verdict::Skip, Some(m)),
        Ended::Error(m) => (Verdict::Error, Some(m)),
    };
    let (path, scenario) = match &case.kind {
        Kind::Pair { dtype, shape, .. } => (
            "dlpack_pair",
            format!("{}{}", dtype.name(), shape_name(shape)),
        ),
        Kind::Producer { dtype, shape, .. } => (
            "dlpack_producer",
            format!("{}{}", dtype.name(), shape_name(shape)),
        ),
        Kind::Consumer { spec, .. } => (
            "dlpack_consumer",
            format!("{}{}", spec.dtype.name(), shape_name(&spec.shape)),
        ),
        Kind::Frees { dtype, shape } | Kind::DeleterThread { dtype, shape, .. } => (
            "dlpack_producer",
            format!("{}{}", dtype.name(), shape_name(shape)),
        ),
        Kind::OnDevice { spec, device } => (
            "dlpack_consumer",
            format!(
                "{}{} on {}",
                spec.dtype.name(),
                shape_name(&spec.shape),
                device.name()
            ),
        ),
        Kind::ToArrow { spec } => (
            "dlpack_to_arrow",
            format!("{}{}", spec.dtype.name(), shape_name(&spec.shape)),
        ),
        Kind::FromArrow { array, .. } => ("dlpack_from_arrow", array.name()),
    };
    Case {
        id: case.id.clone(),
        path: path.into(),
        scenario,
        batch: None,
        slice: None,
        verdict,
        message,
        differences: violations
            .iter()
            .take(20)
            .map(|v| format!("{} at {}: {}", v.rule, v.at, v.evidence))
            .collect(),
        duration_us: start.elapsed().as_micros() as u64,
        replay: replay.to_string(),
        output: None,
        changed,
        view: None,
        checked: obs.checked.iter().map(|r| r.to_string()).collect(),
        violations,
        not_exercised: obs
            .not_exercised
            .iter()
            .filter(|(r, _)| !obs.checked.contains(r))
            .map(|(r, why)| NotExercised {
                rule: r.to_string(),
                reason: why.clone(),
            })
            .collect(),
        flaky: Vec::new(),
    }
}

pub(super) fn capsule_of(v: &serde_json::Value) -> (bool, Option<String>, usize) {
    let c = &v["capsule"];
    (
        c["is_capsule"].as_bool().unwrap_or(false),
        c["name"].as_str().map(String::from),
        c["pointer"].as_u64().unwrap_or(0) as usize,
    )
}

/// Whether the library called the harness's tensor's `__dlpack__` during
/// the step whose answer is `v` (handed a capsule or not).
pub(in crate::dlpack) fn asked_capsule(v: &serde_json::Value) -> bool {
    v["harness"]["calls"]
        .as_array()
        .is_some_and(|c| !c.is_empty())
}

/// Whether the library asked the harness's tensor for its device
/// (`__dlpack_device__`) during the step whose answer is `v`.
pub(super) fn asked_device(v: &serde_json::Value) -> bool {
    v["harness"]["device_calls"].as_u64().unwrap_or(0) > 0
}

/// The values of an exported tensor: read on the CPU, or, for a tensor on
/// a device this machine has (a GPU, the emulated device), through that
/// device's backend (`dev`, from [`device_backend`]). `None` when neither
/// can read them.
pub(super) fn values_of(o: &Observed, dev: Option<&dyn crate::device::Device>) -> Option<Logical> {
    if o.values.is_some() {
        return o.values.clone();
    }
    reader::values_on(o, dev?).ok()
}

/// The backend of the device (not the CPU) an exported tensor is on, where
/// this machine has it.
pub(super) fn device_backend(o: &Observed) -> Option<std::sync::Arc<dyn crate::device::Device>> {
    crate::device::Kind::from_device_type(o.device.device_type)
        .filter(|k| *k != crate::device::Kind::Cpu)
        .and_then(|k| crate::device::backend(k).ok())
}

pub(in crate::dlpack) fn compare(
    obs: &mut Obs,
    rule: &'static str,
    at: &str,
    expected: &Logical,
    got: &Logical,
) {
    if got.shape != expected.shape {
        obs.fail(
            rule,
            at,
            format!(
                "shape {:?} ({} elements), expected {:?} ({} elements)",
                got.shape,
                got.len(),
                expected.shape,
                expected.len()
            ),
        );
    } else if got.dtype != expected.dtype {
        obs.fail(
            rule,
            at,
            format!(
                "dtype {}, expected {}",
                got.dtype.name(),
                expected.dtype.name()
            ),
        );
    } else if let Some(i) = (0..expected.len()).find(|&i| got.element(i) != expected.element(i)) {
        obs.fail(
            rule,
            at,
            format!(
                "element {i} (row-major) is {:02x?}, expected {:02x?}",
                got.element(i),
                expected.element(i)
            ),
        );
    } else {
        obs.check(rule);
    }
}

/// What the harness's tensor saw in a consumer's call `at` (the step's
/// answer `v`): its `__dlpack__` calls judged (`stream`), and the names of
/// the capsules it handed out, as they are now. A capsule still unrenamed
/// may outlive the case, its destructor deleting the tensor: the tensor is
/// then kept.
pub(in crate::dlpack) fn harness_side(
    v: &serde_json::Value,
    at: &str,
    device_type: i32,
    obs: &mut Obs,
) -> Vec<Option<String>> {
    let calls = v["harness"]["calls"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let names: Vec<Option<String>> = v["harness"]["capsules"]
        .as_array()
        .map(|a| a.iter().map(|n| n.as_str().map(String::from)).collect())
        .unwrap_or_default();
    if device_type != KDL_CPU && !calls.is_empty() {
        obs.skip(
            crate::rule!("dlpack.consumer.stream-none"),
            format!("the tensor is on device type {device_type}: the rule is the CPU's (a device's streams are its own)"),
        );
    }
    for c in calls.iter().filter(|_| device_type == KDL_CPU) {
        if c["stream"].is_null() {
            obs.check(crate::rule!("dlpack.consumer.stream-none"));
        } else {
            obs.fail(
                crate::rule!("dlpack.consumer.stream-none"),
                at,
                format!(
                    "__dlpack__ of a CPU tensor called with stream={}",
                    c["stream"]
                ),
            );
        }
    }
    obs.keep_tensor |= names
        .iter()
        .any(|n| !n.as_deref().is_some_and(|n| n.starts_with("used_")));
    names
}

/// What a consumer's array `got` must hold of `expected`: the same, or,
/// when the consumer's arrays are one-dimensional (Arrow's) and the tensor
/// is not, the tensor's elements in row-major order.
pub(super) fn as_read(expected: &Logical, got: &Logical) -> Logical {
    if got.shape.len() == 1 && expected.shape.len() != 1 {
        Logical {
            shape: vec![expected.len() as i64],
            ..expected.clone()
        }
    } else {
        expected.clone()
    }
}

/// A consumer that returned took the tensor: the capsule must be renamed.
pub(in crate::dlpack) fn renamed(names: &[Option<String>], at: &str, obs: &mut Obs) {
    match names.first().cloned().flatten() {
        Some(n) if n.starts_with("used_") => obs.check(crate::rule!("dlpack.consumer.rename")),
        Some(n) => obs.fail(
            crate::rule!("dlpack.consumer.rename"),
            at,
            format!("after {at} returned, the capsule is still named {n:?}"),
        ),
        None if !names.is_empty() => obs.fail(
            crate::rule!("dlpack.consumer.rename"),
            at,
            format!("after {at} returned, the capsule has no name"),
        ),
        None => {}
    }
}

/// A case that did not run to a verdict of its rules (skipped, or a
/// harness error), with why.
pub fn ended_without_verdict(case: &DlCase, replay: &str, verdict: Verdict, why: String) -> Case {
    let mut c = judged(case, Obs::default(), Ended::Ran, Instant::now(), replay);
    c.verdict = verdict;
    c.message = Some(why);
    c
}

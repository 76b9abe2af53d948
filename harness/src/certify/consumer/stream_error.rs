//! The stream-error cases: a producer's stream that fails part-way, and
//! what the consumer does with the failure and the stream's release.

use super::*;

/// A stream that fails; the consumer must return the error and message and
/// still release everything.
pub(super) fn stream_error(
    consumer: &Plugin,
    scenario: &Scenario,
    spec: &CaseSpec,
    device: bool,
    at: ErrorAt,
    code: c_int,
    obs: &mut Observations,
) -> Ended {
    let k = scenario.batches.len() / 2;
    let message = format!(
        "arrowcert injected failure: {} {}",
        match at {
            ErrorAt::Schema => "get_schema".to_string(),
            ErrorAt::Middle => format!("get_next for chunk {k}"),
        },
        errno_name(code)
    );
    let fail = Failure {
        at: match at {
            ErrorAt::Schema => FailAt::Schema,
            ErrorAt::Middle => FailAt::Next(k),
        },
        code,
        message: message.clone(),
    };
    let kind = Kind::StreamError { device, at, code };
    let a = match attempt(
        consumer,
        scenario,
        spec,
        kind,
        Encoding::Plain,
        Handover::First,
        Some(fail),
    ) {
        Ok(a) => a,
        Err(why) => return Ended::Error(format!("the harness cannot export this scenario: {why}")),
    };
    if let Err(CallError::Missing(_)) = &a.result {
        return call_ended(a.result.unwrap_err());
    }
    judge_handover(&a, true, obs);
    match &a.result {
        // ENOSYS: the consumer declined the data (its type, say) before the
        // injected failure could matter; the rule is not exercised, never
        // passed (the plain stream case of the scenario shows the decline).
        Err(CallError::Failed {
            code: libc::ENOSYS,
            message,
            ..
        }) if code != libc::ENOSYS => {
            let why = format!(
                "{}ENOSYS {}",
                super::super::CONSUMER_DECLINED,
                message.clone().unwrap_or_default()
            );
            obs.not_exercised(crate::rule!("consumer.stream.error"), why.clone());
            return Ended::Skip(why);
        }
        Ok(_) => obs.check(
            crate::rule!("consumer.stream.error"),
            false,
            "result",
            || {
                format!(
                "the stream failed with {} ({code}) \"{message}\", but the consume call succeeded",
                errno_name(code)
            )
            },
        ),
        Err(CallError::Missing(_)) => unreachable!("a missing entry point returned above"),
        Err(CallError::Failed {
            code: got,
            message: m,
            ..
        }) => {
            let m = m.clone().unwrap_or_default();
            if m.contains(export::OVERWRITTEN) {
                obs.check(crate::rule!("consumer.stream.error"), true, "", String::new);
                obs.check(crate::rule!("consumer.stream.last-error-copy"), false, "last error", || {
                    format!("the consumer's last error is the harness's overwritten message buffer ({m:?}): it kept get_last_error's pointer past the next stream call instead of copying the string")
                });
            } else if !(*got == code && m.contains(&message))
                && at == ErrorAt::Middle
                && declines_without_the_failure(consumer, scenario, spec, kind)
            {
                // The consumer declined the data itself (a type it does not
                // support, a chunk's offsets) before the injected get_next
                // failure could matter: the same stream with no failure is
                // refused too. A clean refusal is the limitation the stream
                // case of this scenario shows; the rule is not exercised.
                // (A get_schema failure comes before any data: no excuse.)
                let e = a.result.as_ref().unwrap_err();
                obs.not_exercised(
                    crate::rule!("consumer.stream.error"),
                    format!("the consumer declines this stream before the injected failure, with no failure injected too: {e}"),
                );
                return match refusal(e) {
                    Ended::Limitation(why) => Ended::Limitation(format!(
                        "{why} (it refuses the same stream with no failure injected too, so the injected failure never mattered)"
                    )),
                    other => other,
                };
            } else {
                obs.check(crate::rule!("consumer.stream.error"), *got == code && m.contains(&message), "last error", || {
                    format!(
                        "the stream failed with {} ({code}) \"{message}\"; the consumer returned {} ({got}) with last error {m:?} (the plugin contract asks for the same code, and the message)",
                        errno_name(code),
                        errno_name(*got)
                    )
                });
            }
        }
    }
    Ended::Ran
}

/// True when the consumer refuses the stream of an error case (plainly
/// encoded, as stream-error cases are) even with no failure injected: what
/// it declined was the data, not the failure.
pub(super) fn declines_without_the_failure(
    consumer: &Plugin,
    scenario: &Scenario,
    spec: &CaseSpec,
    kind: Kind,
) -> bool {
    attempt(
        consumer,
        scenario,
        spec,
        kind,
        Encoding::Plain,
        Handover::First,
        None,
    )
    .is_ok_and(|a| matches!(a.result, Err(CallError::Failed { .. })))
}

/// An already released structure: a consumer should refuse it.
pub(super) fn released(
    consumer: &Plugin,
    scenario: &Scenario,
    schema_released: bool,
    obs: &mut Observations,
) -> Ended {
    let ledger = Ledger::new(true);
    let snode = match encode::schema(&scenario.schema, Encoding::Plain) {
        Ok(s) => s,
        Err(why) => return Ended::Error(format!("the harness cannot export this scenario: {why}")),
    };
    // What an integration library compares with (a plugin never sees it).
    let sent = scenario
        .batches
        .first()
        .cloned()
        .unwrap_or_else(|| RecordBatch::new_empty(scenario.schema.clone()));
    let result = if schema_released {
        let node = match scenario
            .batches
            .first()
            .map(|b| encode::batch(b, Encoding::Plain, 0))
        {
            Some(Ok(n)) => n,
            _ => return Ended::Skip("the scenario has no batch".into()),
        };
        let mut s = ledger.released_schema("released schema");
        let mut a = ledger.array(&node, "array");
        let r = consumer.consume_array(s.get(), a.get(), &sent);
        take_back(&r, a.get());
        r
    } else {
        let mut s = ledger.schema(&snode, "schema");
        let mut a = ledger.released_array("released array");
        let r = consumer.consume_array(s.get(), a.get(), &sent);
        take_back(&r, s.get());
        r
    };
    let what = if schema_released { "schema" } else { "array" };
    // What it does with the live half is judged by the release rules
    // (only when it was handed over: not when the entry point is missing).
    let findings = ledger.finish();
    if let Err(CallError::Missing(e)) = &result {
        return Ended::Skip(format!("{e} is not exported by the plugin"));
    }
    for v in &findings.violations {
        obs.check(v.rule, false, &v.at, || v.message.clone());
    }
    match result {
        Ok(_) => {
            obs.check(crate::rule!("consumer.release.checks-released"), false, what, || {
                format!("given an ArrowArray{} whose release is NULL (released) and whose other members are poison, the consume call succeeded: \"consumers SHOULD check for a NULL release callback and treat it accordingly (probably by erroring out)\"",
                if schema_released { "Schema" } else { "" })
            });
            Ended::Ran
        }
        Err(_) => {
            obs.check(
                crate::rule!("consumer.release.checks-released"),
                true,
                "",
                String::new,
            );
            Ended::Ran
        }
    }
}

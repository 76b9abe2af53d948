//! Judging what a consumer did with the data it was handed: the hand-over,
//! a device move, synchronisation, and the values it read.

use super::*;

/// Records what the ledger and the handed-over structures show.
pub(super) fn judge_handover(a: &Attempt, stream: bool, obs: &mut Observations) {
    for r in HANDOVER_RULES {
        obs.check(r, true, "", String::new);
    }
    if stream {
        for r in STREAM_RULES {
            obs.check(r, true, "", String::new);
        }
    }
    for v in &a.findings.violations {
        obs.check(v.rule, false, &v.at, || v.message.clone());
    }
    for (what, root) in &a.live {
        let r = &a.findings.roots[*root];
        // Unreleased and unmoved is a leak, which the ledger reports.
        if let Some((addr, _)) = r.releases.first() {
            obs.check(crate::rule!("consumer.move.marks-source"), false, what, || {
                format!(
                    "the {what} was moved (its release ran on a copy at {addr:#x}) but the source the harness handed over at {:#x} still has a non-NULL release: \"it MUST mark the source structure released\"",
                    r.addr
                )
            });
        }
    }
}

/// device.move, consumer side: a consumer that moved the ArrowDeviceArray
/// it was handed (its release ran on a copy elsewhere) must have marked the
/// source released: "Then it MUST mark the source structure released by
/// setting the release member of the embedded ArrowArray structure to
/// NULL, but without calling that release callback."
pub(super) fn judge_device_move(a: &Attempt, obs: &mut Observations) {
    let unmarked: Vec<String> = a
        .live
        .iter()
        .filter(|(what, _)| what == "device array")
        .filter_map(|(_, root)| {
            let r = &a.findings.roots[*root];
            r.releases.first().map(|(addr, _)| {
                format!(
                    "the ArrowDeviceArray was moved (its release ran on a copy at {addr:#x}) but the source at {:#x} still has array.release set",
                    r.addr
                )
            })
        })
        .collect();
    obs.check(
        crate::rule!("device.move"),
        unmarked.is_empty(),
        "device array",
        || unmarked.join("; "),
    );
}

/// consumer.sync.waits: a consumer that says it read a device array must
/// have waited on its sync_event first. The harness's writes land only
/// when the event completes (on the emulated device, only when someone
/// waits for it; on CUDA, after a slow kernel), so an array whose event
/// had not completed when the consumer returned from the call (or
/// released the array, if before) was read, if at all, before the data
/// was there.
pub(super) fn judge_sync(a: &Attempt, obs: &mut Observations) {
    for r in &a.findings.roots {
        if let Some(done) = r.synced {
            obs.check(crate::rule!("consumer.sync.waits"), done, &r.what, || {
                format!(
                    "the consumer returned what it read, but when it gave the {} up (returned from the call, or released it before) its sync_event had not completed: it read the buffers without waiting on the event (\"it MUST be used to call the appropriate sync method for the device ... before attempting to access the memory in the buffers\")",
                    r.what
                )
            });
        }
    }
}

/// What a consumer wrote back, against what it was given, in three tiers
/// ([`crate::compare::Tiers`]): `values` is `consumer.read.values`,
/// `types` `consumer.read.types`, `optional` (names and metadata)
/// `consumer.read.metadata`.
pub(in crate::certify) type ReadDifferences = crate::compare::Tiers;

impl ReadDifferences {
    /// Records the names-and-metadata and types verdicts; returns the
    /// value differences, which the caller judges (a data case first looks
    /// again with release poisoning off).
    pub(in crate::certify) fn judge_all_but_values(
        &self,
        obs: &mut Observations,
    ) -> Option<String> {
        obs.check(
            crate::rule!("consumer.read.metadata"),
            self.optional.is_empty(),
            "output",
            || self.optional.join("; "),
        );
        // Where the values differ, whether the types also do is not judged.
        if self.values.is_empty() {
            obs.check(
                crate::rule!("consumer.read.types"),
                self.types.is_empty(),
                "output",
                || self.types.join("; "),
            );
            obs.check(
                crate::rule!("consumer.read.precision"),
                self.precision.is_empty(),
                "output",
                || self.precision.join("; "),
            );
            return None;
        }
        Some(self.values.join("; "))
    }

    /// Records the three rules' verdicts.
    pub(in crate::certify) fn judge(&self, obs: &mut Observations) {
        let wrong = self.judge_all_but_values(obs);
        obs.check(
            crate::rule!("consumer.read.values"),
            wrong.is_none(),
            "output",
            || wrong.clone().unwrap_or_default(),
        );
    }
}

/// Decodes what the consumer wrote back and compares it with `expected`
/// in tiers ([`crate::compare::tiers`]).
pub(in crate::certify) fn differences(
    expected: (&Schema, &[RecordBatch]),
    ipc_bytes: &[u8],
) -> ReadDifferences {
    match ipc::decode(ipc_bytes) {
        Ok(read) => {
            let mut t = crate::compare::tiers(expected.0, expected.1, &read.schema, &read.batches);
            t.split_precision_loss(expected.0, expected.1, &read.schema, &read.batches);
            t
        }
        Err(e) => ReadDifferences {
            values: vec![format!(
                "the consumer's output is not an Arrow IPC stream: {}",
                e.message
            )],
            ..Default::default()
        },
    }
}

pub(super) fn expected_of<'a>(
    scenario: &'a Scenario,
    spec: &CaseSpec,
) -> (&'a Schema, &'a [RecordBatch]) {
    match spec.batch {
        Some(b) => (&scenario.schema, std::slice::from_ref(&scenario.batches[b])),
        None => (&scenario.schema, &scenario.batches),
    }
}

/// Array, device array, stream and device stream cases with data.
pub(super) fn data_case(
    consumer: &Plugin,
    scenario: &Scenario,
    spec: &CaseSpec,
    kind: Kind,
    obs: &mut Observations,
) -> Ended {
    let e = match kind {
        Kind::Array(e) | Kind::DeviceArray(e) | Kind::Stream(e) | Kind::DeviceStream(e) => e,
        _ => unreachable!("data_case is called for data kinds"),
    };
    let enc = encoding(e, &spec.id);
    let stream = matches!(kind, Kind::Stream(_) | Kind::DeviceStream(_));
    let first = match attempt(consumer, scenario, spec, kind, enc, Handover::First, None) {
        Ok(a) => a,
        Err(why) => return Ended::Error(format!("the harness cannot export this scenario: {why}")),
    };
    // A consumer without this entry point was handed nothing: no handover
    // to judge (judging it anyway blamed the consumer for structures the
    // harness never gave it).
    if let Err(CallError::Missing(_)) = &first.result {
        return call_ended(first.result.unwrap_err());
    }
    judge_handover(&first, stream, obs);
    if matches!(kind, Kind::DeviceArray(_)) {
        judge_device_move(&first, obs);
    }
    if spec.device == crate::device::Kind::Cpu {
        if matches!(kind, Kind::DeviceArray(_) | Kind::DeviceStream(_)) {
            obs.not_exercised(
                crate::rule!("consumer.sync.waits"),
                "CPU device arrays carry no sync event; the cases on a device with its own memory (the emulated device or CUDA) exercise this rule",
            );
        }
    } else if first.result.is_ok() {
        judge_sync(&first, obs);
    }
    let expected = expected_of(scenario, spec);
    if let Ok(bytes) = &first.result {
        keep_output(&spec.id, bytes);
    }
    // Output arrowcert cannot decode cannot be compared: its own outcome
    // (an error of the library's IPC writer, which its adapter uses), never
    // "values differ".
    if let Ok(bytes) = &first.result {
        if let Err(e) = ipc::decode(bytes) {
            obs.not_exercised(
                crate::rule!("consumer.read.values"),
                crate::roundtrip::UNDECODABLE,
            );
            return Ended::Error(format!("{}: {}", crate::roundtrip::UNDECODABLE, e.message));
        }
    }
    let wrong = match &first.result {
        Ok(bytes) => {
            if matches!(enc, Encoding::Varied(_) | Encoding::Only(..)) {
                // It took the encoding variations: the rule held.
                obs.check(crate::rule!("consumer.read.accepts"), true, "", String::new);
            }
            differences(expected, bytes).judge_all_but_values(obs)
        }
        Err(e) => {
            // A refusal that goes away when released memory is left as it
            // was is no refusal: the consumer read the poison it put there
            // by releasing first (an importer that validates what it reads
            // refuses poisoned offsets instead of reading them wrong).
            // Off the CPU, one that goes away when the device's writes have
            // landed before the handover was the consumer reading too early.
            let first = || format!("refused the input ({e})");
            if read_before_the_data_landed(
                consumer, scenario, spec, kind, enc, expected, first, obs,
            ) {
                return Ended::Ran;
            }
            if reads_right(
                consumer,
                scenario,
                spec,
                kind,
                enc,
                Handover::Unpoisoned,
                expected,
            ) {
                obs.check(crate::rule!("consumer.read.values"), true, "", String::new);
                obs.check(crate::rule!("consumer.read.after-release"), false, "output", || {
                    format!(
                        "with released buffers overwritten ({:#04x}) the consumer refused the input ({e}); with them left as they were it read right: it read after calling release",
                        export::RELEASED_BYTE
                    )
                });
                return Ended::Ran;
            }
            obs.not_exercised(crate::rule!("consumer.read.values"), e.to_string());
            return refused(consumer, scenario, spec, kind, enc, e, obs);
        }
    };
    let Some(evidence) = wrong else {
        obs.check(crate::rule!("consumer.read.values"), true, "", String::new);
        obs.check(
            crate::rule!("consumer.read.after-release"),
            true,
            "",
            String::new,
        );
        judge_view(first.values.as_deref(), expected, obs);
        return Ended::Ran;
    };
    // Read wrong: off the CPU, again with the device's writes landed first
    // (right then: it read before they were there); then again without
    // poisoning released memory (right then: it read memory after
    // releasing it). The settled rerun goes first: on CUDA, where the late
    // write lands by itself, an unpoisoned rerun could read right by the
    // race alone and charge a reader that never waited with reading after
    // release.
    let first = || format!("read wrong ({evidence})");
    if read_before_the_data_landed(consumer, scenario, spec, kind, enc, expected, first, obs) {
        return Ended::Ran;
    }
    if reads_right(
        consumer,
        scenario,
        spec,
        kind,
        enc,
        Handover::Unpoisoned,
        expected,
    ) {
        obs.check(crate::rule!("consumer.read.values"), true, "", String::new);
        obs.check(crate::rule!("consumer.read.after-release"), false, "output", || {
            format!(
                "with released buffers overwritten ({:#04x}) the consumer read wrong ({evidence}); with them left as they were it read right: it read after calling release",
                export::RELEASED_BYTE
            )
        });
    } else {
        obs.check(
            crate::rule!("consumer.read.values"),
            false,
            "output",
            || evidence,
        );
    }
    Ended::Ran
}

/// consumer.read.values-view, an independent view: what the consumer
/// read back through its own Arrow exporter was right; its own values
/// (`arrowcert_consume_values`: a py: adapter's `values(obj)`, the
/// library's conversion to its native values, no Arrow exporter in the
/// way) must be the data too. An importer and an exporter that share a
/// misreading (rows reversed on the way in and back on the way out) pass
/// the read-back and not this. The rule's own words: the consumer reads
/// "the number of items from the physical start of the buffers" as given,
/// whatever it later exports. Values the view cannot show comparably are
/// not compared (recorded in the case's `view`), never passed or failed.
pub(super) fn judge_view(
    view: Option<&str>,
    expected: (&Schema, &[RecordBatch]),
    obs: &mut Observations,
) {
    let Some(json) = view else { return };
    let c = crate::compare::pyvalues::compare(expected.0, expected.1, json);
    obs.view = Some(c.summary());
    obs.check(
        crate::rule!("consumer.read.values-view"),
        c.disagreements.is_empty(),
        "the consumer's own values view",
        || {
            format!(
                "what the consumer exported back was right, but its own view of what it read (values(obj), made without its Arrow exporter) disagrees with the data: its importer misread what its exporter undid, or its own conversion misreads what it holds: {}",
                c.disagreements.join("; ")
            )
        },
    );
}

/// Hands the case over once more, `how` ([`Handover::Unpoisoned`]:
/// released memory left as it was; [`Handover::Settled`]: the device's
/// writes landed first): true when the consumer then reads every value
/// right.
pub(super) fn reads_right(
    consumer: &Plugin,
    scenario: &Scenario,
    spec: &CaseSpec,
    kind: Kind,
    enc: Encoding,
    how: Handover,
    expected: (&Schema, &[RecordBatch]),
) -> bool {
    let again = attempt(consumer, scenario, spec, kind, enc, how, None);
    matches!(&again, Ok(a) if matches!(&a.result, Ok(b) if differences(expected, b).values.is_empty()))
}

/// consumer.sync.waits, by difference. Off the CPU the first handover's
/// writes are still pending (a slow kernel on CUDA, a stream that runs
/// only when waited on in the emulated device); a consumer that refused
/// or read wrong then (`first`: what it did) is handed the same data
/// again with the writes landed and the sync_event completed
/// ([`Handover::Settled`]). Reading every value right then, it had read
/// the buffers before the data was there: the two handovers differ in
/// nothing else, and a consumer that waits on the event sees the same
/// bytes in both. This catches a consumer that waits only after reading
/// (the event is complete by its return and its release, which
/// [`judge_sync`] asks), and keeps the refusals such reads cause from
/// passing as limitations. Returns true when it judged so; the values
/// are then judged read right, as the consumer reads them once the data
/// is there.
#[allow(clippy::too_many_arguments)]
fn read_before_the_data_landed(
    consumer: &Plugin,
    scenario: &Scenario,
    spec: &CaseSpec,
    kind: Kind,
    enc: Encoding,
    expected: (&Schema, &[RecordBatch]),
    first: impl FnOnce() -> String,
    obs: &mut Observations,
) -> bool {
    if spec.device == crate::device::Kind::Cpu
        || !reads_right(
            consumer,
            scenario,
            spec,
            kind,
            enc,
            Handover::Settled,
            expected,
        )
    {
        return false;
    }
    let what = match kind {
        Kind::DeviceStream(_) | Kind::Stream(_) => "device stream's arrays",
        _ => "device array",
    };
    obs.check(crate::rule!("consumer.read.values"), true, "", String::new);
    obs.check(crate::rule!("consumer.sync.waits"), false, "output", || {
        format!(
            "handed the {what} while the device's writes behind its sync_event were still pending, the consumer {}; handed the same data with the writes landed and the event completed, it read every value right: it read the buffers before waiting on sync_event (\"it MUST be used to call the appropriate sync method for the device ... before attempting to access the memory in the buffers\")",
            first()
        )
    });
    true
}

//! `certify --malformed` (docs/MALFORMED.md): robustness beyond the spec.
//! The spec never shows a consumer a malformed structure, yet real
//! importers have crashed whole processes on one. This hands the consumer
//! under test what each producer mutant (`producers/mutants`,
//! docs/MUTANTS.md) breaks, in worker processes, and records per case
//! whether it refused cleanly, accepted (reading the data or not), left a
//! structure unreleased, crashed or hung.
//!
//! Reported apart from the rules ([`crate::report::robustness`]): nothing
//! here is a rule verdict, and nothing changes a run's outcome. A consumer
//! the spec never obliges to validate may accept garbage; the grade says
//! how it fares, not whether it conforms.

#![forbid(unsafe_code)]

pub mod library;

use crate::report::robustness::{Robustness, RobustnessCase, RobustnessCounts, SkippedMutant};
use crate::report::{Case, Verdict};
use crate::roundtrip::Path;

/// One producer mutant a consumer is shown: the built-in scenario and batch
/// its mutation changes, and the paths it changes.
#[derive(Debug, Clone, Copy)]
pub struct Mutant {
    pub name: &'static str,
    /// The rule the mutant breaks (docs/MUTANTS.md).
    pub breaks: &'static str,
    pub scenario: &'static str,
    /// The batch of the per-batch paths (the mutation's first batch).
    pub batch: usize,
    pub paths: &'static [Path],
    /// Whether a consumer can see the breakage in the structures it is
    /// handed. A buffer shorter than its length says (the C interface
    /// carries no buffer sizes), memory recycled under it, a dangling
    /// string: no check could refuse them, so a crash there is listed but
    /// not graded.
    pub detectable: bool,
}

const ARRAYS: &[Path] = &[Path::Array, Path::DeviceArray, Path::Stream];
const DEVICE: &[Path] = &[Path::DeviceArray];
const STREAM: &[Path] = &[Path::Stream];
const DEVICE_STREAM: &[Path] = &[Path::DeviceStream];

const fn m(
    name: &'static str,
    breaks: &'static str,
    scenario: &'static str,
    batch: usize,
    paths: &'static [Path],
) -> Mutant {
    Mutant {
        name,
        breaks,
        scenario,
        batch,
        paths,
        detectable: true,
    }
}

/// A mutant whose breakage no consumer can see ([`Mutant::detectable`]).
const fn hidden(
    name: &'static str,
    breaks: &'static str,
    scenario: &'static str,
    paths: &'static [Path],
) -> Mutant {
    Mutant {
        detectable: false,
        ..m(name, breaks, scenario, 0, paths)
    }
}

/// The mutants a consumer is shown. Schema and array mutations change what
/// `arrowcert_produce_schema` / `_array` / `_device_array` export, and, with
/// [`library::STREAM_CHUNKS_ENV`] set, the stream's schema and every chunk:
/// they go on the array paths and the stream path; stream mutations on the
/// stream path; device ones on theirs.
#[rustfmt::skip]
pub const MUTANTS: &[Mutant] = &[
    // -- schema ------------------------------------------------------------
    m("child-format-null", crate::rule!("schema.format.non-null"), "primitive", 0, ARRAYS),
    m("decimal256-without-bit-width", crate::rule!("schema.format.valid"), "temporal_decimal", 0, ARRAYS),
    m("list-without-child-type", crate::rule!("schema.children.count"), "nested", 0, ARRAYS),
    m("map-key-nullable", crate::rule!("schema.map.non-nullable"), "nested", 0, ARRAYS),
    m("map-entries-one-child", crate::rule!("schema.map.entries"), "nested", 0, ARRAYS),
    m("ree-run-ends-nullable", crate::rule!("schema.ree.run-ends-flag"), "run_end_encoded", 0, ARRAYS),
    m("dictionary-value-format", crate::rule!("schema.dictionary.shape"), "dictionary", 0, ARRAYS),
    m("keys-sorted-on-non-map", crate::rule!("schema.flags.placement"), "primitive", 0, ARRAYS),
    m("unknown-flag-bits", crate::rule!("schema.flags.known"), "primitive", 0, ARRAYS),
    m("metadata-negative-length", crate::rule!("schema.metadata.encoding"), "metadata", 0, ARRAYS),
    m("ree-run-ends-unsigned", crate::rule!("schema.ree.run-ends"), "run_end_encoded", 0, ARRAYS),
    m("metadata-cut-mid-character", crate::rule!("schema.metadata.utf8"), "metadata", 0, ARRAYS),
    m("name-latin1", crate::rule!("schema.name.utf8"), "primitive", 0, ARRAYS),
    m("schema-child-release-null", crate::rule!("schema.release.set"), "primitive", 0, ARRAYS),
    hidden("schema-arena-owned-by-root", crate::rule!("schema.move.child"), "primitive", ARRAYS),
    m("metadata-empty-not-null", crate::rule!("schema.metadata.null-if-omitted"), "primitive", 0, ARRAYS),
    // -- array -------------------------------------------------------------
    m("union-null-count", crate::rule!("array.union.null-count"), "union", 0, ARRAYS),
    m("array-child-release-null", crate::rule!("array.release.set"), "primitive", 0, ARRAYS),
    hidden("array-arena-owned-by-root", crate::rule!("array.move.child"), "primitive", ARRAYS),
    m("list-without-child-array", crate::rule!("array.layout.n-children"), "nested", 0, ARRAYS),
    m("union-with-validity", crate::rule!("array.layout.n-buffers"), "union", 0, ARRAYS),
    m("null-array-with-validity", crate::rule!("array.layout.n-buffers"), "temporal_decimal", 0, ARRAYS),
    m("null-data-buffer", crate::rule!("array.layout.null-buffer"), "binary", 0, ARRAYS),
    m("column-one-short", crate::rule!("array.layout.lengths"), "primitive", 0, ARRAYS),
    hidden("values-buffer-one-short", crate::rule!("array.layout.lengths"), "primitive", ARRAYS),
    m("null-count-off-by-one", crate::rule!("array.null-count"), "primitive", 0, ARRAYS),
    m("misaligned-values", crate::rule!("array.buffers.aligned"), "primitive", 0, ARRAYS),
    m("offsets-as-lengths", crate::rule!("array.offsets.valid"), "binary", 0, ARRAYS),
    m("union-child-indices", crate::rule!("array.union.type-ids"), "union", 0, ARRAYS),
    m("zero-length-run", crate::rule!("array.ree.run-ends"), "run_end_encoded", 0, ARRAYS),
    m("ree-logical-null-count", crate::rule!("array.ree.null-count"), "run_end_encoded", 0, ARRAYS),
    m("view-without-sizes", crate::rule!("array.view.sizes"), "binary", 1, ARRAYS),
    m("view-prefix-zeroed", crate::rule!("array.view.prefix"), "binary", 1, ARRAYS),
    m("view-inline-garbage", crate::rule!("array.view.inline-padding"), "binary", 1, ARRAYS),
    m("dictionary-left-out", crate::rule!("array.dictionary.present"), "dictionary", 0, ARRAYS),
    m("index-past-dictionary", crate::rule!("array.dictionary.indices"), "dictionary", 0, ARRAYS),
    m("utf8-not-utf8", crate::rule!("array.utf8.valid"), "binary", 0, ARRAYS),
    m("decimal-beyond-precision", crate::rule!("array.decimal.precision"), "temporal_decimal", 0, ARRAYS),
    m("date64-partial-day", crate::rule!("array.date64.days"), "temporal_decimal", 0, ARRAYS),
    m("time-past-midnight", crate::rule!("array.time.range"), "temporal_decimal", 0, ARRAYS),
    m("dense-union-offsets-swapped", crate::rule!("array.union.offsets-ordered"), "union", 0, ARRAYS),
    m("map-null-key", crate::rule!("array.map.keys-non-null"), "nested", 0, ARRAYS),
    m("empty-offsets-null", crate::rule!("array.layout.null-buffer"), "binary", 2, ARRAYS),
    // -- device array ------------------------------------------------------
    m("reserved-left", crate::rule!("device.reserved.zero"), "primitive", 0, DEVICE),
    m("undefined-device-type", crate::rule!("device.type.known"), "primitive", 0, DEVICE),
    m("wrong-device-type", crate::rule!("device.type.requested"), "primitive", 0, DEVICE),
    m("cpu-device-id-0", crate::rule!("device.cpu.id"), "primitive", 0, DEVICE),
    m("sync-event-on-cpu", crate::rule!("device.event.none"), "primitive", 0, DEVICE),
    // -- streams -----------------------------------------------------------
    m("get-schema-null", crate::rule!("stream.schema.get"), "primitive", 0, STREAM),
    m("schema-taken-once", crate::rule!("stream.schema.repeat"), "primitive", 0, STREAM),
    m("chunk-drops-a-column", crate::rule!("stream.chunk.schema"), "primitive", 0, STREAM),
    m("eos-as-error", crate::rule!("stream.eos.released"), "primitive", 0, STREAM),
    m("error-after-end", crate::rule!("stream.eos.repeat"), "primitive", 0, STREAM),
    m("negative-error-code", crate::rule!("stream.error.errno"), "primitive", 0, STREAM),
    m("last-error-garbage", crate::rule!("stream.error.message"), "primitive", 0, STREAM),
    hidden("last-error-dangling", crate::rule!("stream.error.lifetime"), "primitive", STREAM),
    hidden("chunks-borrow-stream-buffers", crate::rule!("stream.results.outlive"), "primitive", STREAM),
    m("no-get-last-error", crate::rule!("stream.release.set"), "primitive", 0, STREAM),
    m("thread-bound-stream", crate::rule!("stream.threads.serial"), "primitive", 0, STREAM),
    // -- device streams ----------------------------------------------------
    m("stream-device-type", crate::rule!("device.stream.type"), "primitive", 0, DEVICE_STREAM),
    m("chunk-on-other-device", crate::rule!("stream.chunk.device"), "primitive", 0, DEVICE_STREAM),
    m("chunk-on-pinned-host", crate::rule!("stream.chunk.device-type"), "primitive", 0, DEVICE_STREAM),
];

#[rustfmt::skip]
const WELL_FORMED: &str = "what it exports is well-formed (only the type's nullability or the metadata differ from what was asked): nothing a consumer could refuse";
const TWO_EXPORTS: &str =
    "shows only when two exports of one object are held at once; a consumer is handed one";
const RELOCATED: &str = "breaks what a move does (state found through the structure's own address): the harness moves every structure before the consumer sees it, so what the consumer would read is the harness's freed memory, not the mutant's doing";
const AFTER_USE: &str = "breaks what the producer's release does after the consumer is done (what it frees or leaves set): nothing the consumer reads";

/// The producer mutants no consumer is shown, with why.
#[rustfmt::skip]
pub const SKIPPED: &[(&str, &str)] = &[
    ("all-columns-nullable", WELL_FORMED),
    ("array-schema-metadata-dropped", WELL_FORMED),
    ("exports-share-buffers", TWO_EXPORTS),
    ("reused-output-buffer", TWO_EXPORTS),
    ("schema-copies-share-names", "shows only when a consumer holds two get_schema results at once and releases the first; what a consumer does with one malformed stream is what these cases ask"),
    ("schema-points-into-itself", RELOCATED),
    ("buffers-inside-struct", RELOCATED),
    ("stream-points-into-itself", RELOCATED),
    ("late-writer", "writes into the place the producer's call filled, which the consumer never sees (the harness moves the structure first)"),
    ("slice-offset-ignored", "changes sliced exports only; malformed cases hand whole batches"),
    ("sliced-stream-from-start", "changes sliced streams only (the wrong rows, well-formed); malformed cases hand whole batches"),
    ("small-leak", "keeps memory in the producer's process across exports; what it hands over is well-formed"),
    ("periodic-cache", "keeps and frees memory in the producer's process (a cache, no leak); what it hands over is well-formed"),
    ("release-keeps-pointer", AFTER_USE),
    ("schema-release-keeps-pointer", AFTER_USE),
    ("stream-release-keeps-pointer", AFTER_USE),
    ("leak-one-child", AFTER_USE),
    ("schema-leak", AFTER_USE),
    ("stream-leak", AFTER_USE),
    ("release-skips-children", AFTER_USE),
    ("schema-release-skips-children", AFTER_USE),
    ("release-frees-children-twice", AFTER_USE),
];

/// Left out as a whole, with why (listed with the skipped mutants).
#[rustfmt::skip]
pub const OTHER_SOURCES: &[(&str, &str)] = &[
    ("async producer mutants (producers/mutants/mutant_async_producer.c)", "they break the async protocol's order and timing, which the async consumer cases already judge as rules; the structures they deliver are well-formed"),
    ("CUDA producer mutants (producers/cuda)", "need a CUDA device and break device memory, not a structure a CPU consumer reads"),
];

/// One planned malformed case: a mutant on one path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    pub mutant: &'static Mutant,
    pub path: Path,
    /// `malformed/<path>/<mutant>/<scenario>`.
    pub id: String,
    /// The round-trip case (`roundtrip::plan`) that carries it.
    pub roundtrip_id: String,
}

impl PartialEq for Mutant {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}
impl Eq for Mutant {}

/// Every malformed case, in a stable order (mutant by mutant).
pub fn plan() -> Vec<Spec> {
    let mut out = Vec::new();
    for mutant in MUTANTS {
        for &path in mutant.paths {
            let roundtrip_id = match path {
                Path::Array | Path::DeviceArray => {
                    format!("{}/{}/batch:{}", path.name(), mutant.scenario, mutant.batch)
                }
                _ => format!("{}/{}", path.name(), mutant.scenario),
            };
            out.push(Spec {
                mutant,
                path,
                id: format!(
                    "malformed/{}/{}/{}",
                    path.name(),
                    mutant.name,
                    mutant.scenario
                ),
                roundtrip_id,
            });
        }
    }
    out
}

/// The words the harness's round trip uses for a structure the consumer
/// returned without releasing or moving (`roundtrip::check_released`).
const UNRELEASED: &str = "the consumer returned without releasing or moving";

/// What a round-trip case of the mutant producer and the consumer says
/// about the consumer: the result word and its detail.
pub fn classify(case: &Case) -> (&'static str, Option<String>) {
    let message = case.message.clone();
    let unreleased = case.differences.iter().find(|d| d.contains(UNRELEASED));
    // A failed producer call never reached the consumer.
    let producer_failed = message
        .as_deref()
        .is_some_and(|m| m.contains("arrowcert_produce_"));
    match case.verdict {
        Verdict::Crash => ("crashed", message),
        Verdict::Timeout => ("hung", message),
        _ if unreleased.is_some() => ("unreleased", unreleased.cloned()),
        Verdict::Pass => ("accepted_equal", None),
        Verdict::Fail => (
            "accepted_differs",
            case.differences.first().cloned().or(message),
        ),
        Verdict::Error if producer_failed => ("not_run", message),
        Verdict::Error
            if message
                .as_deref()
                .is_some_and(|m| m.starts_with(crate::roundtrip::UNDECODABLE)) =>
        {
            ("accepted_differs", message)
        }
        Verdict::Error | Verdict::Limitation => ("refused", message),
        Verdict::Skip | Verdict::HarnessError => ("not_run", message),
    }
}

/// One report entry from a spec and the round-trip case that ran it.
pub fn entry(spec: &Spec, case: &Case) -> RobustnessCase {
    let (result, detail) = classify(case);
    RobustnessCase {
        result: result.to_string(),
        detail: detail.map(|d| crate::report::printable(&d)),
        duration_us: case.duration_us,
        ..not_run(spec, "")
    }
}

/// The level of the rule a mutant breaks (`MUST` when the catalogue lacks
/// it: a broken structure is presumed invalid).
fn level_of(rule: &str) -> &'static str {
    crate::rules::find(rule).map_or("MUST", |r| r.level.as_str())
}

/// An entry for a case that could not run (its workers did not start).
pub fn not_run(spec: &Spec, why: &str) -> RobustnessCase {
    RobustnessCase {
        id: spec.id.clone(),
        mutant: spec.mutant.name.to_string(),
        path: spec.path.name().to_string(),
        scenario: spec.mutant.scenario.to_string(),
        breaks: spec.mutant.breaks.to_string(),
        level: level_of(spec.mutant.breaks).to_string(),
        graded: spec.mutant.detectable,
        result: "not_run".into(),
        detail: Some(why.to_string()),
        duration_us: 0,
    }
}

/// Whether a case lowers the grade, and to which letter.
fn demerit(c: &RobustnessCase) -> Option<&'static str> {
    if !c.graded {
        return None;
    }
    match c.result.as_str() {
        "crashed" => Some("F"),
        "hung" => Some("C"),
        "unreleased" => Some("B"),
        "accepted_differs" if c.level == "MUST" => Some("B"),
        _ => None,
    }
}

/// Counts, grade and summary of finished cases.
pub fn summarize(cases: Vec<RobustnessCase>) -> Robustness {
    let mut c = RobustnessCounts {
        cases: cases.len() as u64,
        ..Default::default()
    };
    for case in &cases {
        match case.result.as_str() {
            "refused" => c.refused += 1,
            "accepted_equal" => c.accepted_equal += 1,
            "accepted_differs" => c.accepted_differs += 1,
            "unreleased" => c.unreleased += 1,
            "crashed" => c.crashed += 1,
            "hung" => c.hung += 1,
            _ => c.not_run += 1,
        }
    }
    c.graded = cases
        .iter()
        .filter(|x| x.graded && x.result != "not_run")
        .count() as u64;
    let exercised = c.cases - c.not_run;
    let worst = cases.iter().filter_map(demerit).max_by_key(|g| match *g {
        "F" => 3,
        "C" => 2,
        _ => 1,
    });
    let grade = match (c.graded, worst) {
        (0, _) => "-",
        (_, Some(g)) => g,
        (_, None) => "A",
    };
    let summary = format!(
        "{} of {exercised} refused cleanly, {} accepted reading the data, {} accepted reading something else, {} left a structure unreleased, {} crashed, {} hung ({} not run; graded on {} cases, the rest break what no consumer can see)",
        c.refused,
        c.accepted_equal,
        c.accepted_differs,
        c.unreleased,
        c.crashed,
        c.hung,
        c.not_run,
        c.graded
    );
    let skipped_mutants = SKIPPED
        .iter()
        .chain(OTHER_SOURCES)
        .map(|(m, why)| SkippedMutant {
            mutant: m.to_string(),
            why: why.to_string(),
        })
        .collect();
    Robustness {
        grade: grade.to_string(),
        summary,
        counts: c,
        cases,
        skipped_mutants,
    }
}

/// The terminal block: grade, counts, and each case that crashed, hung,
/// accepted garbage or leaked.
pub fn render(r: &Robustness) -> String {
    let mut out = format!(
        "\nrobustness (--malformed, apart from the rules; never the outcome): grade {}\n  {}\n",
        r.grade, r.summary
    );
    for c in &r.cases {
        if matches!(
            c.result.as_str(),
            "crashed" | "hung" | "accepted_differs" | "unreleased"
        ) {
            let note = match (demerit(c), c.graded) {
                (Some(_), _) => "",
                (None, false) => " (not graded: no consumer can see this breakage)",
                (None, true) => " (not graded: the structure is odd, not invalid)",
            };
            out.push_str(&format!(
                "  {} {} ({} {}){note}: {}\n",
                c.id,
                c.result,
                c.level,
                c.breaks,
                c.detail.as_deref().unwrap_or("")
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests;

/// The robustness cases as a JUnit test suite of their own. Their results
/// are properties and output, never `<failure>` or `<error>`: robustness is
/// not conformance, and a CI gate on failures must not trip on it.
pub fn junit_suite(r: &Robustness, suite: &str) -> String {
    use crate::certify::summary::xml;
    let mut out = format!(
        "<testsuite name=\"{} robustness (--malformed)\" tests=\"{}\" failures=\"0\" errors=\"0\" skipped=\"{}\">\n  <properties><property name=\"grade\" value=\"{}\"/><property name=\"summary\" value=\"{}\"/></properties>\n",
        xml(suite),
        r.cases.len(),
        r.counts.not_run,
        xml(&r.grade),
        xml(&r.summary)
    );
    for c in &r.cases {
        let inner = if c.result == "not_run" {
            format!(
                "<skipped message=\"{}\"/>",
                xml(c.detail.as_deref().unwrap_or("not run"))
            )
        } else {
            format!(
                "<properties><property name=\"result\" value=\"{}\"/></properties><system-out>{}: {}</system-out>",
                xml(&c.result),
                xml(&c.result),
                xml(c.detail.as_deref().unwrap_or(""))
            )
        };
        out.push_str(&format!(
            "  <testcase classname=\"arrowcert.robustness.{}\" name=\"{}\" time=\"{:.3}\">{inner}</testcase>\n",
            xml(&c.path),
            xml(&c.id),
            c.duration_us as f64 / 1e6
        ));
    }
    out.push_str("</testsuite>\n");
    out
}

/// `xml` (a whole JUnit document) with the robustness suite added last.
pub fn junit_with(xml: &str, r: &Robustness, suite: &str) -> String {
    let end = "</testsuites>\n";
    match xml.strip_suffix(end) {
        Some(head) => format!("{head}{}{end}", junit_suite(r, suite)),
        None => xml.to_string(),
    }
}

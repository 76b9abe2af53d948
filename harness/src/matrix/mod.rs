//! The producer x consumer compatibility matrix: the model of
//! `matrix.json`, the plan of work units (each library's single-sided
//! certification, then every producer -> consumer pair), deterministic
//! sharding of that plan, turning a unit's run report into the unit's
//! verdict, and merging shard files.
//!
//! Running the units is `cli::matrix`'s job (each unit is an `arrowcert
//! certify` or `arrowcert roundtrip` child process with its own report);
//! rendering `matrix.md` and `matrix.html` is [`render`]'s.

#![forbid(unsafe_code)]

pub mod render;

use std::collections::{BTreeMap, BTreeSet};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::report::{Case, PluginIdentity, Report, Summary, Tool, Verdict};

/// Bumped when `matrix.json` changes incompatibly.
pub const MATRIX_VERSION: u32 = 1;

/// `matrix.json`: a whole matrix, one shard of it, or shards merged.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct Matrix {
    pub matrix_version: u32,
    pub tool: Tool,
    pub started_at: String,
    pub finished_at: String,
    /// Wall time of the run (merged: the sum over shards).
    pub duration_ms: u64,
    /// Producer arguments (bundled names or paths), in plan order.
    pub producers: Vec<String>,
    /// Consumer arguments, in plan order.
    pub consumers: Vec<String>,
    pub data: Data,
    /// Every unit ID of the whole plan, in order (every shard carries it,
    /// so a merge can tell what is missing).
    pub plan: Vec<String>,
    /// The shards this file holds (`1/1` for an unsharded run).
    pub shards: Vec<Shard>,
    /// What the adapters of bundled libraries write themselves.
    pub libraries: Vec<Library>,
    /// The units this file ran (or merged), in plan order.
    pub units: Vec<Unit>,
    /// True when every unit of the plan is here.
    pub complete: bool,
}

impl Matrix {
    /// The units with cases a consumer declined as a permitted limitation.
    pub fn limited_units(&self) -> Vec<&Unit> {
        self.units
            .iter()
            .filter(|u| u.limitation_cases > 0)
            .collect()
    }

    /// The units whose results are not as their expectations file says.
    pub fn unexpected_units(&self) -> Vec<&Unit> {
        self.units
            .iter()
            .filter(|u| !u.unexpected.is_empty())
            .collect()
    }
}

/// The data every unit runs over.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
pub struct Data {
    /// The gold directory, if any (certification adds it to the built-in
    /// scenarios; pairs run over built-in, gold and generated scenarios).
    pub gold: Option<String>,
    /// Generated scenarios per unit.
    pub cases: u64,
    pub seed: u64,
    /// Case filters every unit ran with (`--filter`): a smoke matrix of
    /// part of each unit's plan. Empty: every case.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub filters: Vec<String>,
}

#[derive(
    Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq, PartialOrd, Ord,
)]
pub struct Shard {
    /// 1-based.
    pub index: u32,
    pub count: u32,
}

impl Shard {
    /// Parses `I/N` (1 <= I <= N).
    pub fn parse(text: &str) -> Result<Shard, String> {
        let bad = || format!("--shard {text}: expected I/N with 1 <= I <= N, e.g. 2/4");
        let (i, n) = text.split_once('/').ok_or_else(bad)?;
        let index: u32 = i.trim().parse().map_err(|_| bad())?;
        let count: u32 = n.trim().parse().map_err(|_| bad())?;
        if index == 0 || count == 0 || index > count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }

    /// Whether the unit at `position` of the plan belongs to this shard:
    /// round robin, so every shard gets a share of each kind of unit.
    pub fn owns(&self, position: usize) -> bool {
        position % self.count as usize == (self.index - 1) as usize
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// A library of the matrix in one role.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
pub struct Library {
    /// The argument it was named by (a bundled name or a path).
    pub arg: String,
    pub role: String,
    /// What the adapter writes or decides rather than the library (empty:
    /// nothing, or not a bundled adapter).
    pub adapter: String,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum UnitKind {
    /// `arrowcert certify --producer P`.
    CertifyProducer,
    /// `arrowcert certify --consumer C`.
    CertifyConsumer,
    /// `arrowcert roundtrip --producer P --consumer C`.
    Pair,
}

/// A unit's overall verdict.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq, Hash)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// Certification: every rule held. Pair: everything both sides
    /// support arrived equal.
    Pass,
    /// Certification: only SHOULD/MAY rules failed. Pair: some calls
    /// failed cleanly (an unsupported type, say), nothing arrived wrong.
    Partial,
    /// Certification: a MUST rule failed, or a case crashed or hung.
    /// Pair: data arrived different, or a case crashed or hung.
    Fail,
    /// The unit could not run (the library did not load, say).
    Error,
    /// A pair with no interface path both sides offer.
    NotApplicable,
}

impl Status {
    pub fn word(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Partial => "partial",
            Status::Fail => "fail",
            Status::Error => "error",
            Status::NotApplicable => "n/a",
        }
    }
}

/// One run of the plan.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct Unit {
    /// `certify/producer/<p>`, `certify/consumer/<c>` or `pair/<p>/<c>`.
    pub id: String,
    pub kind: UnitKind,
    pub producer: Option<String>,
    pub consumer: Option<String>,
    pub status: Status,
    /// Why, in a line (bad input, not applicable, the failing rules).
    pub message: Option<String>,
    /// Case counts over the whole unit.
    pub summary: Summary,
    /// Case counts per interface path (`device_array`, `async`, ...).
    pub paths: BTreeMap<String, Summary>,
    /// Certification: every rule that failed, most severe first.
    pub failing_rules: Vec<FailingRule>,
    /// A few failing cases (not passed, not skipped) with what differed.
    pub failing_cases: Vec<FailingCase>,
    /// Pair: cases that passed with every value equal but the types,
    /// nullability, names or metadata changed on the way (INFO, as
    /// `consumer.read.types` and `consumer.read.metadata` are).
    #[serde(default)]
    pub changed: u64,
    /// Pair: those cases per interface path.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub changed_paths: BTreeMap<String, u64>,
    /// Pair: a few of those cases, with what changed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changed_cases: Vec<FailingCase>,
    /// Cases the consumer declined as a limitation the spec permits.
    #[serde(default)]
    pub limitation_cases: u64,
    /// `--repeat`: the unit's flaky cases, each as `ID (verdicts seen)`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flaky_cases: Vec<String>,
    /// Certification: per path, how many type families of the generator
    /// the unit exercised, the library refused, and nothing reached
    /// (paths the unit reached nothing of are left out).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub coverage: BTreeMap<String, CoverageCounts>,
    /// The expectations file the unit ran with, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expectations: Option<String>,
    /// Results that were not as that file expects (empty: as expected).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unexpected: Vec<String>,
    /// The libraries as the run report identified them.
    pub plugins: Vec<PluginIdentity>,
    /// The unit's own report, relative to the matrix file.
    pub report: Option<String>,
    /// The command that reruns the unit.
    pub command: String,
    pub duration_ms: u64,
    /// `matrix --malformed`: a consumer certification's robustness grade
    /// (`certify --malformed`, docs/MALFORMED.md), apart from its status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub robustness: Option<UnitRobustness>,
}

/// A unit's robustness grade and counts (its report has every case).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct UnitRobustness {
    pub grade: String,
    pub summary: String,
    pub counts: crate::report::robustness::RobustnessCounts,
}

impl UnitRobustness {
    /// The grade of a certification report, when it has one.
    pub fn of(r: &crate::report::Report) -> Option<UnitRobustness> {
        r.robustness.as_ref().map(|r| UnitRobustness {
            grade: r.grade.clone(),
            summary: r.summary.clone(),
            counts: r.counts.clone(),
        })
    }
}

/// Type families of one path of a unit, by what became of them.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
pub struct CoverageCounts {
    pub exercised: u64,
    pub refused: u64,
    pub not_reached: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
pub struct FailingRule {
    pub rule: String,
    pub level: String,
    pub failed: u64,
    pub checked: u64,
    pub evidence: Option<String>,
    pub first_case: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
pub struct FailingCase {
    pub id: String,
    pub verdict: Verdict,
    pub message: Option<String>,
    pub differences: Vec<String>,
    pub replay: String,
}

/// A unit of the plan before it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Planned {
    pub id: String,
    pub kind: UnitKind,
    pub producer: Option<String>,
    pub consumer: Option<String>,
}

/// IDs use the library argument; a path's slashes would split the
/// hierarchy, so they become `:`.
fn id_part(arg: &str) -> String {
    arg.replace('/', ":")
}

/// Whether a library argument names a variant of an adapter
/// (docs/PYTHON_ADAPTERS.md, "Variants"): `pyarrow[array]` (a bundled
/// one) or `py:FILE.py#NAME`. A variant is certified as a unit of its
/// own; pairs are each library's default object's (the pair grid would
/// grow with the square of the variants).
pub fn is_variant(arg: &str) -> bool {
    (arg.ends_with(']') && arg.contains('[')) || (arg.starts_with("py:") && arg.contains('#'))
}

/// The plan: each producer's certification, each consumer's, then every
/// pair (producers outer, consumers inner) of libraries that are not
/// variants ([`is_variant`]). Deterministic in its inputs.
pub fn plan(producers: &[String], consumers: &[String]) -> Vec<Planned> {
    let mut units = Vec::new();
    for p in producers {
        units.push(Planned {
            id: format!("certify/producer/{}", id_part(p)),
            kind: UnitKind::CertifyProducer,
            producer: Some(p.clone()),
            consumer: None,
        });
    }
    for c in consumers {
        units.push(Planned {
            id: format!("certify/consumer/{}", id_part(c)),
            kind: UnitKind::CertifyConsumer,
            producer: None,
            consumer: Some(c.clone()),
        });
    }
    for p in producers.iter().filter(|p| !is_variant(p)) {
        for c in consumers.iter().filter(|c| !is_variant(c)) {
            units.push(Planned {
                id: format!("pair/{}/{}", id_part(p), id_part(c)),
                kind: UnitKind::Pair,
                producer: Some(p.clone()),
                consumer: Some(c.clone()),
            });
        }
    }
    units
}

/// How many failing cases a pair unit keeps (the run report has all).
const FAILING_CASES_KEPT: usize = 5;

/// A unit's verdict from its run report.
pub fn judge(planned: &Planned, report: &Report) -> (Status, Option<String>, Vec<FailingRule>) {
    let s = &report.summary;
    match planned.kind {
        _ if s.harness_errors > 0 => (
            Status::Error,
            Some(format!(
                "arrowcert's own code failed in {} case(s): the unit's verdicts cannot be trusted (please report this)",
                s.harness_errors
            )),
            Vec::new(),
        ),
        UnitKind::Pair => {
            let ran = s.passed + s.failed + s.errors + s.crashed + s.timed_out + s.limitations;
            if ran == 0 {
                return (
                    Status::NotApplicable,
                    Some("no interface path both sides offer (every case skipped)".into()),
                    Vec::new(),
                );
            }
            // A consumer that declines data the spec lets it decline is
            // not failing the pair; one that declines everything leaves
            // nothing compared, which is partial, not a pass.
            let status = if s.failed + s.crashed + s.timed_out > 0 {
                Status::Fail
            } else if s.errors > 0 || s.passed == 0 {
                Status::Partial
            } else {
                Status::Pass
            };
            let limited = (s.limitations > 0).then(|| {
                format!(
                    "{} cases declined by the consumer as a limitation the spec permits",
                    s.limitations
                )
            });
            let message = match status {
                Status::Fail => Some(format!(
                    "{} cases arrived different, {} crashed, {} hung",
                    s.failed, s.crashed, s.timed_out
                )),
                Status::Partial if s.errors > 0 => Some(format!(
                    "{} cases failed cleanly (a call returned an error with no word of a limitation)",
                    s.errors
                )),
                _ => limited,
            };
            (status, message, Vec::new())
        }
        UnitKind::CertifyProducer | UnitKind::CertifyConsumer => {
            let mut failing: Vec<FailingRule> = report
                .rules
                .iter()
                .filter(|r| r.verdict == Verdict::Fail)
                .map(|r| FailingRule {
                    rule: r.rule.clone(),
                    level: r.level.clone(),
                    failed: r.failed,
                    checked: r.checked,
                    evidence: r.evidence.clone(),
                    first_case: r.failing_cases.first().cloned(),
                })
                .collect();
            failing.sort_by_key(|r| (level_rank(&r.level), r.rule.clone()));
            let must = failing.iter().filter(|r| r.level == "MUST").count();
            let hung = s.crashed + s.timed_out;
            let status = if must > 0 || hung > 0 {
                Status::Fail
            } else if !failing.is_empty() || s.errors > 0 {
                Status::Partial
            } else if s.passed == 0 && s.failed == 0 {
                Status::NotApplicable
            } else if report.outcome.as_ref().is_some_and(|j| {
                j.outcome == crate::report::outcome::Outcome::NotCertified
            }) {
                // Some cases passed, but a path the library exports ran
                // no data case to a verdict.
                Status::Partial
            } else {
                Status::Pass
            };
            let message = (!failing.is_empty() || hung > 0 || s.errors > 0).then(|| {
                let mut parts = Vec::new();
                if !failing.is_empty() {
                    let names: Vec<&str> = failing.iter().map(|r| r.rule.as_str()).collect();
                    parts.push(format!(
                        "{} rules failed: {}",
                        failing.len(),
                        names.join(", ")
                    ));
                }
                if hung > 0 {
                    parts.push(format!("{} cases crashed, {} hung", s.crashed, s.timed_out));
                }
                if s.errors > 0 {
                    parts.push(format!(
                        "{} cases failed cleanly (a call returned an error)",
                        s.errors
                    ));
                }
                parts.join("; ")
            });
            let message = match (message, report.outcome.as_ref()) {
                (None, Some(j)) if j.outcome == crate::report::outcome::Outcome::NotCertified => {
                    Some(format!("not certified: {}", j.reasons.join("; ")))
                }
                (m, _) if s.limitations > 0 => Some(
                    m.map_or_else(String::new, |m| format!("{m}; "))
                        + &format!("{} limitations declared", s.limitations),
                ),
                (m, _) => m,
            };
            (status, message, failing)
        }
    }
}

fn level_rank(level: &str) -> u8 {
    match level {
        "MUST" => 0,
        "SHOULD" => 1,
        _ => 2,
    }
}

/// Case counts per interface path.
pub fn per_path(report: &Report) -> BTreeMap<String, Summary> {
    let mut paths: BTreeMap<String, Summary> = BTreeMap::new();
    for c in &report.cases {
        paths.entry(c.path.clone()).or_default().count(c.verdict);
    }
    paths
}

/// A few failing cases of a pair, with what differed.
pub fn failing_cases(report: &Report) -> Vec<FailingCase> {
    report
        .cases
        .iter()
        .filter(|c| {
            !matches!(
                c.verdict,
                Verdict::Pass | Verdict::Skip | Verdict::Limitation
            )
        })
        .take(FAILING_CASES_KEPT)
        .map(|c| kept_case(c, c.message.clone(), &c.differences))
        .collect()
}

/// A case as a unit keeps it: its first few `differences`.
fn kept_case(c: &Case, message: Option<String>, differences: &[String]) -> FailingCase {
    FailingCase {
        id: c.id.clone(),
        verdict: c.verdict,
        message,
        differences: differences.iter().take(5).cloned().collect(),
        replay: c.replay.clone(),
    }
}

/// How many passed cases of a pair arrived with types, names or metadata
/// changed, per path, and a few of them with what changed.
pub fn changed_cases(report: &Report) -> (u64, BTreeMap<String, u64>, Vec<FailingCase>) {
    let changed: Vec<&Case> = report
        .cases
        .iter()
        .filter(|c| c.passed_with_changes())
        .collect();
    let mut per_path: BTreeMap<String, u64> = BTreeMap::new();
    for c in &changed {
        *per_path.entry(c.path.clone()).or_default() += 1;
    }
    let examples = changed
        .iter()
        .take(FAILING_CASES_KEPT)
        .map(|c| kept_case(c, None, &c.changed))
        .collect();
    (changed.len() as u64, per_path, examples)
}

/// Merges shard files of one plan into one matrix. Every file must carry
/// the same plan, producers, consumers and data; a unit present twice is
/// an error (two shards ran it), a unit present nowhere leaves the result
/// incomplete.
pub fn merge(parts: Vec<Matrix>) -> Result<Matrix, String> {
    let mut parts = parts.into_iter();
    let mut merged = parts.next().ok_or("nothing to merge")?;
    for (n, part) in parts.enumerate() {
        let which = n + 2;
        if part.matrix_version != merged.matrix_version {
            return Err(format!(
                "file {which}: matrix version {} (the first has {})",
                part.matrix_version, merged.matrix_version
            ));
        }
        if part.plan != merged.plan
            || part.producers != merged.producers
            || part.consumers != merged.consumers
        {
            return Err(format!(
                "file {which}: a different plan (other producers or consumers) than the first"
            ));
        }
        if part.data != merged.data {
            return Err(format!(
                "file {which}: different data ({:?} vs {:?}); shards must share --gold, --cases and --seed",
                part.data, merged.data
            ));
        }
        for s in &part.shards {
            if merged.shards.contains(s) {
                return Err(format!("file {which}: shard {s} is already merged"));
            }
        }
        let have: BTreeSet<String> = merged.units.iter().map(|u| u.id.clone()).collect();
        if let Some(dup) = part.units.iter().find(|u| have.contains(&u.id)) {
            return Err(format!("file {which}: unit {} is in two files", dup.id));
        }
        merged.shards.extend(part.shards);
        merged.units.extend(part.units);
        merged.duration_ms += part.duration_ms;
        merged.started_at = merged.started_at.clone().min(part.started_at);
        merged.finished_at = merged.finished_at.clone().max(part.finished_at);
        for lib in part.libraries {
            if !merged.libraries.contains(&lib) {
                merged.libraries.push(lib);
            }
        }
    }
    let position: BTreeMap<&String, usize> = merged
        .plan
        .iter()
        .enumerate()
        .map(|(i, id)| (id, i))
        .collect();
    let mut units = std::mem::take(&mut merged.units);
    units.sort_by_key(|u| position.get(&u.id).copied().unwrap_or(usize::MAX));
    merged.units = units;
    merged.shards.sort();
    merged.complete = merged.units.len() == merged.plan.len();
    Ok(merged)
}

/// Unit IDs of the plan that no unit covers.
pub fn missing(matrix: &Matrix) -> Vec<String> {
    let have: BTreeSet<&String> = matrix.units.iter().map(|u| &u.id).collect();
    matrix
        .plan
        .iter()
        .filter(|id| !have.contains(id))
        .cloned()
        .collect()
}

/// Reads a `matrix.json`.
pub fn read(path: &std::path::Path) -> Result<Matrix, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: not a matrix file: {e}", path.display()))
}

/// The JSON Schema of [`Matrix`].
pub fn json_schema() -> String {
    let schema = schemars::schema_for!(Matrix);
    serde_json::to_string_pretty(&schema).expect("schema serialises") + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn plan_lists_certifications_then_every_pair() {
        let ids: Vec<String> = plan(&names(&["a", "b"]), &names(&["x", "/p/y.so"]))
            .into_iter()
            .map(|u| u.id)
            .collect();
        assert_eq!(
            ids,
            [
                "certify/producer/a",
                "certify/producer/b",
                "certify/consumer/x",
                "certify/consumer/:p:y.so",
                "pair/a/x",
                "pair/a/:p:y.so",
                "pair/b/x",
                "pair/b/:p:y.so"
            ]
        );
    }

    #[test]
    fn variants_are_certified_alone_and_left_out_of_pairs() {
        assert!(is_variant("polars[series]") && is_variant("py:adapters/polars.py#series"));
        assert!(!is_variant("polars") && !is_variant("/p/lib#1.so"));
        let ids: Vec<String> = plan(&names(&["a", "a[v]"]), &names(&["x", "py:x.py#w"]))
            .into_iter()
            .map(|u| u.id)
            .collect();
        assert_eq!(
            ids,
            [
                "certify/producer/a",
                "certify/producer/a[v]",
                "certify/consumer/x",
                "certify/consumer/py:x.py#w",
                "pair/a/x",
            ]
        );
    }

    #[test]
    fn shards_partition_the_plan() {
        for count in 1..6u32 {
            for len in 0..20usize {
                let mut owners = vec![0; len];
                for index in 1..=count {
                    let s = Shard { index, count };
                    for (pos, o) in owners.iter_mut().enumerate() {
                        if s.owns(pos) {
                            *o += 1;
                        }
                    }
                }
                assert!(
                    owners.iter().all(|&o| o == 1),
                    "{count} shards, {len} units"
                );
            }
        }
    }

    #[test]
    fn shard_syntax() {
        assert_eq!(Shard::parse("2/4").unwrap(), Shard { index: 2, count: 4 });
        for bad in ["0/4", "5/4", "1/0", "x/2", "3", "1/2/3"] {
            assert!(Shard::parse(bad).is_err(), "{bad}");
        }
    }
}

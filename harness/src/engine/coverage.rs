//! What a certification run reached: per type family of the generator,
//! interface path and encoding factor, whether a case holding that family
//! ran to a verdict on the library (exercised), the library declined it
//! in its own words (refused), or nothing reached it (not reached). "Reach
//! is measured, not assumed": a library that declined a whole scenario for
//! one column has not had the scenario's other types exercised.

#![forbid(unsafe_code)]

use std::collections::{BTreeMap, BTreeSet};

use crate::generate::{self, types};
use crate::report::{Case, CoverageRow, Verdict};
use crate::scenario::Scenario;

/// The families each column of a scenario holds: its top-level family
/// and every family nested in it. Column subsets (`gen/3~col:1`) are found
/// through their parent.
fn columns(
    name: &str,
    scenarios: &[Scenario],
) -> Option<Vec<(&'static str, BTreeSet<&'static str>)>> {
    let of = |s: &Scenario, only: Option<usize>| {
        s.schema
            .fields()
            .iter()
            .enumerate()
            .filter(|(i, _)| only.is_none_or(|k| k == *i))
            .map(|(_, f)| {
                let mut all = BTreeSet::new();
                types::families_in(f.data_type(), &mut all);
                (types::family_of(f.data_type()), all)
            })
            .collect::<Vec<_>>()
    };
    if let Some(s) = scenarios.iter().find(|s| s.name == name) {
        return Some(of(s, None));
    }
    let (parent, col) = generate::parse_column_name(name)?;
    let s = scenarios.iter().find(|s| s.name == parent)?;
    Some(of(s, Some(col)))
}

/// A case's path (`producer/array`, `consumer/device:cuda/device_stream`)
/// and encoding factor (`whole`/`slice` for producers, the encoding or
/// error word for consumers, `schedules`/`deliveries` for async cases),
/// read from its ID.
pub fn path_and_factor(id: &str, scenario: &str) -> Option<(String, String)> {
    let prefix = &id[..id.find(&format!("/{scenario}"))?];
    let mut segs: Vec<&str> = prefix.split('/').collect();
    if segs.len() < 2 {
        return None;
    }
    let side = segs.remove(0);
    let device = if segs[0].starts_with("device:") {
        Some(segs.remove(0))
    } else {
        None
    };
    let kind = *segs.first()?;
    let path = match device {
        Some(d) => format!("{side}/{d}/{kind}"),
        None => format!("{side}/{kind}"),
    };
    let factor = if kind == "async" {
        if side == "producer" {
            "schedules"
        } else {
            "deliveries"
        }
        .to_string()
    } else if segs.len() > 1 {
        segs[1..].join("/")
    } else if id.contains("/slice:") {
        "slice".into()
    } else {
        "whole".into()
    };
    Some((path, factor))
}

/// Whether a case ran to a verdict on the library.
pub(crate) fn ran(c: &Case) -> bool {
    matches!(
        c.verdict,
        Verdict::Pass | Verdict::Fail | Verdict::Crash | Verdict::Timeout
    )
}

/// The coverage table of a run's cases over its scenarios: one row per
/// type family the generator knows, path and factor the run had cases on.
pub fn of(cases: &[Case], scenarios: &[Scenario]) -> Vec<CoverageRow> {
    #[derive(Default)]
    struct Cell {
        ran: u64,
        refused: Option<String>,
        errored: Option<String>,
    }
    #[derive(Default)]
    struct PathCells {
        families: BTreeMap<&'static str, Cell>,
        /// Some case of the path ran.
        reached: bool,
        /// Why the path's first case was skipped.
        skipped: Option<String>,
    }
    let mut cells: BTreeMap<(String, String), PathCells> = BTreeMap::new();
    for c in cases {
        let Some((path, factor)) = path_and_factor(&c.id, &c.scenario) else {
            continue;
        };
        // Released-structure cases hand over a structure already released:
        // what they check is the release protocol, on a few built-in
        // scenarios, whatever the type; they reach no type family.
        if path.ends_with("/released") {
            continue;
        }
        let declined = super::certify::declined_data(c);
        let consumer = path.starts_with("consumer/");
        let cell = cells.entry((path, factor)).or_default();
        // A path is reached when a case of it ran: a library can decline
        // data before the harness finds the path missing (a `py:` adapter
        // loads the data first), so declines alone say nothing of it.
        // A consumer is handed the data only on a path it serves, so its
        // declines and errors reach the path too.
        cell.reached |= ran(c) || (consumer && (declined || c.verdict == Verdict::Error));
        if !ran(c) && !declined && cell.skipped.is_none() {
            cell.skipped = c.message.clone();
        }
        let Some(cols) = columns(&c.scenario, scenarios) else {
            continue;
        };
        if ran(c) {
            for f in cols.iter().flat_map(|(_, all)| all.iter()) {
                cell.families.entry(f).or_default().ran += 1;
            }
        } else if declined && cols.len() == 1 {
            // Declined with one column: that column's family is what the
            // library refused (a family nested in it may be the cause,
            // but nothing shows which, so only the top level is named).
            let e = cell.families.entry(cols[0].0).or_default();
            if e.refused.is_none() {
                e.refused = c.message.clone();
            }
        } else if c.verdict == Verdict::Error && cols.len() == 1 {
            // The library failed inside itself on that column alone.
            let e = cell.families.entry(cols[0].0).or_default();
            if e.errored.is_none() {
                e.errored = c.message.clone();
            }
        }
    }
    let families = types::family_names();
    // Where each (side, factor, family) ran: the pairwise plan runs a
    // (type, variation) pair on one path of a side, not on every path.
    // A pair the library refused or failed on there was handed to it
    // too: this path did not run it because the plan put it there, and
    // the row names what happened on that path.
    let mut ran_on: BTreeMap<(&str, &str, &str), (&str, &str)> = BTreeMap::new();
    for ((path, factor), cell) in &cells {
        let side = path.split('/').next().unwrap_or_default();
        for (family, c) in &cell.families {
            let what = if c.ran > 0 {
                "ran"
            } else if c.refused.is_some() {
                "was refused"
            } else if c.errored.is_some() {
                "failed inside the library"
            } else {
                continue;
            };
            let e = ran_on
                .entry((side, factor.as_str(), family))
                .or_insert((path.as_str(), what));
            // One that ran wins over one refused elsewhere.
            if what == "ran" && e.1 != "ran" {
                *e = (path.as_str(), what);
            }
        }
    }
    let mut out = Vec::new();
    for ((path, factor), cell) in &cells {
        let side = path.split('/').next().unwrap_or_default();
        for family in &families {
            let (status, ran, why) = match cell.families.get(family) {
                Some(c) if c.ran > 0 => ("exercised", c.ran, None),
                _ if !cell.reached => ("path_skipped", 0, cell.skipped.clone()),
                Some(Cell {
                    refused: Some(why), ..
                }) => ("refused", 0, Some(why.clone())),
                Some(Cell {
                    errored: Some(why), ..
                }) => ("errored", 0, Some(why.clone())),
                _ => match unplanned(factor, family, scenarios) {
                    Some(why) => ("not_applicable", 0, Some(why)),
                    None => match ran_on.get(&(side, factor.as_str(), family)) {
                        Some((other, what)) => (
                            "elsewhere",
                            0,
                            Some(format!(
                                "the pairwise plan handed this type with {factor} to {other} \
                                 (it {what} there); --all-variations runs every path"
                            )),
                        ),
                        None => ("not_reached", 0, None),
                    },
                },
            };
            out.push(CoverageRow {
                family: family.to_string(),
                path: path.to_string(),
                factor: factor.clone(),
                status: status.into(),
                cases: ran,
                why: why.map(|w| crate::report::bounded(&w, 300)),
            });
        }
    }
    out
}

/// Why a single-variation factor (`varied:<variation>`) has nothing to
/// run for `family`: the run's single-type scenario of that family gives
/// the variation nothing to change (no view buffers to spread, no dense
/// union, no nulls to put garbage under...). `None` when it does, or when
/// the factor is not a single variation.
fn unplanned(factor: &str, family: &str, scenarios: &[Scenario]) -> Option<String> {
    let v = crate::export::Variation::from_name(factor.strip_prefix("varied:")?)?;
    let name = generate::name(
        generate::TYPE_BASE + types::family_names().iter().position(|f| *f == family)? as u64,
        &[],
    );
    let s = scenarios.iter().find(|s| s.name == name)?;
    (!crate::certify::consumer::relevant(v, s)).then(|| {
        format!(
            "variation {} has nothing to change in this run's {name} data",
            v.name()
        )
    })
}

/// Per path, how many families were exercised, refused and not reached
/// (over every factor: a family exercised in any factor is exercised).
pub fn per_path(rows: &[CoverageRow]) -> BTreeMap<String, PathCoverage> {
    let mut best: BTreeMap<(&str, &str), &str> = BTreeMap::new();
    for r in rows {
        let e = best
            .entry((r.path.as_str(), r.family.as_str()))
            .or_insert("path_skipped");
        let rank = |s: &str| match s {
            "exercised" => 6,
            "refused" => 5,
            "errored" => 4,
            "elsewhere" => 3,
            "not_applicable" => 2,
            "not_reached" => 1,
            _ => 0,
        };
        if rank(&r.status) > rank(e) {
            *e = r.status.as_str();
        }
    }
    let mut out: BTreeMap<String, PathCoverage> = BTreeMap::new();
    for ((path, family), status) in best {
        let e = out.entry(path.to_string()).or_default();
        match status {
            "exercised" => e.exercised.push(family.into()),
            "refused" => e.refused.push(family.into()),
            "errored" => e.errored.push(family.into()),
            "not_reached" => e.not_reached.push(family.into()),
            "elsewhere" => e.elsewhere.push(family.into()),
            "not_applicable" => e.not_applicable.push(family.into()),
            _ => {
                e.skipped = rows
                    .iter()
                    .find(|r| r.path == path && r.status == "path_skipped")
                    .and_then(|r| r.why.clone())
            }
        }
    }
    out
}

/// One path's families, over every factor.
#[derive(Debug, Default, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PathCoverage {
    pub exercised: Vec<String>,
    pub refused: Vec<String>,
    /// Families the library failed on inside itself (an error, not a
    /// decline), each alone.
    pub errored: Vec<String>,
    pub not_reached: Vec<String>,
    /// Families only the pairwise plan's other paths ran (in no factor of
    /// this path): see each row's `why`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub elsewhere: Vec<String>,
    /// Families this path's factors have nothing to vary in (see rows).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_applicable: Vec<String>,
    /// When nothing of the path was reached: why its cases were skipped.
    pub skipped: Option<String>,
}

/// Over every path of the consumer side, the best status of each (type
/// family, single variation) pair: the pairs the covering plan promises
/// (every pair on some path). Sorted by status, then `variation/family`.
pub fn variation_pairs(rows: &[CoverageRow]) -> BTreeMap<String, Vec<String>> {
    let rank = |s: &str| match s {
        "exercised" => 5,
        "refused" => 4,
        "errored" => 3,
        "not_applicable" => 2,
        "not_reached" | "elsewhere" => 1,
        _ => 0,
    };
    let mut best: BTreeMap<String, &str> = BTreeMap::new();
    for r in rows.iter().filter(|r| r.path.starts_with("consumer/")) {
        let Some(v) = r.factor.strip_prefix("varied:") else {
            continue;
        };
        let e = best
            .entry(format!("{v}/{}", r.family))
            .or_insert("path_skipped");
        if rank(&r.status) > rank(e) {
            *e = r.status.as_str();
        }
    }
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (pair, status) in best {
        // A pair only other paths' rows call "elsewhere" ran nowhere.
        let status = if status == "elsewhere" {
            "not_reached"
        } else {
            status
        };
        out.entry(status.to_string()).or_default().push(pair);
    }
    out
}

/// The coverage section of a run's summary: one line per path with the
/// families exercised, refused (named) and not reached (named when few).
pub fn render(rows: &[CoverageRow]) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let names = |v: &[String]| {
        if v.len() <= 8 {
            format!(" ({})", v.join(", "))
        } else {
            String::new()
        }
    };
    let mut out = String::from("\ncoverage (type families of the generator, per path):\n");
    for (path, p) in per_path(rows) {
        if p.exercised.is_empty()
            && p.refused.is_empty()
            && p.errored.is_empty()
            && p.not_reached.is_empty()
            && p.elsewhere.is_empty()
            && p.not_applicable.is_empty()
        {
            let why = p.skipped.as_deref().unwrap_or("skipped");
            out.push_str(&format!(
                "  {path:<40} nothing reached: {}\n",
                crate::report::printable(&crate::report::bounded(why, 120))
            ));
            continue;
        }
        out.push_str(&format!("  {path:<40} {:>2} exercised", p.exercised.len()));
        if !p.refused.is_empty() {
            out.push_str(&format!(
                ", {} refused{}",
                p.refused.len(),
                names(&p.refused)
            ));
        }
        if !p.errored.is_empty() {
            out.push_str(&format!(
                ", {} errored{}",
                p.errored.len(),
                names(&p.errored)
            ));
        }
        if !p.elsewhere.is_empty() {
            out.push_str(&format!(
                ", {} on other paths only{}",
                p.elsewhere.len(),
                names(&p.elsewhere)
            ));
        }
        if !p.not_applicable.is_empty() {
            out.push_str(&format!(
                ", {} not applicable{}",
                p.not_applicable.len(),
                names(&p.not_applicable)
            ));
        }
        if !p.not_reached.is_empty() {
            out.push_str(&format!(
                ", {} not reached{}",
                p.not_reached.len(),
                names(&p.not_reached)
            ));
        }
        out.push('\n');
    }
    let pairs = variation_pairs(rows);
    if !pairs.is_empty() {
        let total: usize = pairs.values().map(Vec::len).sum();
        let mut parts: Vec<String> = Vec::new();
        for (status, list) in &pairs {
            let words = status.replace('_', " ");
            parts.push(if status == "exercised" || status == "not_applicable" {
                format!("{} {words}", list.len())
            } else {
                format!("{} {words}{}", list.len(), names(list))
            });
        }
        out.push_str(&format!(
            "  {:<40} {total} (type, variation) pairs over the consumer paths: {}\n",
            "consumer varied:<variation>",
            parts.join(", ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_factors_come_from_ids() {
        let pf = |id: &str, s: &str| path_and_factor(id, s).unwrap();
        assert_eq!(
            pf("producer/array/gen/3/batch:0", "gen/3"),
            ("producer/array".into(), "whole".into())
        );
        assert_eq!(
            pf("producer/array/gen/3/batch:0/slice:1+2", "gen/3"),
            ("producer/array".into(), "slice".into())
        );
        assert_eq!(
            pf(
                "consumer/array/varied/gen/type:int8/batch:0",
                "gen/type:int8"
            ),
            ("consumer/array".into(), "varied".into())
        );
        assert_eq!(
            pf(
                "consumer/device:cuda/device_stream/plain/primitive",
                "primitive"
            ),
            ("consumer/device:cuda/device_stream".into(), "plain".into())
        );
        assert_eq!(
            pf("producer/async/each-thread,gap300us/gen/1", "gen/1"),
            ("producer/async".into(), "schedules".into())
        );
        assert_eq!(
            pf("producer/stream/gen/3~col:1", "gen/3~col:1"),
            ("producer/stream".into(), "whole".into())
        );
    }

    fn case(id: &str, scenario: &str, verdict: Verdict, message: Option<&str>) -> Case {
        let s = Scenario {
            name: scenario.into(),
            ipc: Vec::new(),
            schema: std::sync::Arc::new(arrow_schema::Schema::empty()),
            batches: Vec::new(),
            slices: None,
        };
        let mut c = crate::roundtrip::not_run(id, "stream", &s, None, None, "arrowcert replay");
        c.verdict = verdict;
        c.message = message.map(str::to_string);
        c
    }

    /// A family is exercised where a case holding it ran, refused where
    /// the library declined it alone, and not reached otherwise; a
    /// declined mixed scenario names no family.
    #[test]
    fn exercised_refused_and_not_reached() {
        let seed = 3;
        let int32 = generate::scenario(seed, "gen/type:int32").unwrap();
        let union = generate::scenario(seed, "gen/type:dense-union").unwrap();
        let mixed = (0..40)
            .map(|i| generate::scenario(seed, &generate::name(i, &[])).unwrap())
            .find(|s| s.schema.fields().len() >= 2)
            .unwrap();
        let llv = generate::scenario(seed, "gen/type:large-list-view").unwrap();
        let scenarios = vec![int32, union, llv, mixed.clone()];
        let declined = "the producer does not support this: unions are not supported";
        let sub = generate::column_name(&mixed.name, 0);
        let cases = vec![
            case(
                "producer/stream/gen/type:int32",
                "gen/type:int32",
                Verdict::Pass,
                None,
            ),
            case(
                "producer/stream/gen/type:dense-union",
                "gen/type:dense-union",
                Verdict::Skip,
                Some(declined),
            ),
            case(
                &format!("producer/stream/{}", mixed.name),
                &mixed.name,
                Verdict::Skip,
                Some(declined),
            ),
            case(&format!("producer/stream/{sub}"), &sub, Verdict::Fail, None),
            case(
                "producer/stream/gen/type:large-list-view",
                "gen/type:large-list-view",
                Verdict::Error,
                Some("the library failed inside itself: a panic"),
            ),
        ];
        let rows = of(&cases, &scenarios);
        let get = |f: &str| {
            rows.iter()
                .find(|r| r.family == f && r.path == "producer/stream")
                .unwrap()
        };
        assert_eq!(get("int32").status, "exercised");
        assert_eq!(get("dense-union").status, "refused");
        assert_eq!(get("dense-union").why.as_deref(), Some(declined));
        let first = types::family_of(mixed.schema.field(0).data_type());
        assert_eq!(get(first).status, "exercised", "the column alone ran");
        assert_eq!(get("large-list-view").status, "errored");
        assert_eq!(get("decimal256").status, "not_reached");
        assert_eq!(rows.len(), types::family_names().len());
        let by_path = per_path(&rows);
        let p = &by_path["producer/stream"];
        assert_eq!(
            p.exercised.len() + p.refused.len() + p.errored.len() + p.not_reached.len(),
            types::family_names().len()
        );
        assert!(p.refused.contains(&"dense-union".to_string()));
        // A path none of whose cases ran: skipped, with the reason.
        let skipped = vec![case(
            "producer/array/gen/type:int32/batch:0",
            "gen/type:int32",
            Verdict::Skip,
            Some("arrowcert_produce_array is not exported by the plugin"),
        )];
        let rows = of(&skipped, &scenarios);
        assert!(rows.iter().all(|r| r.status == "path_skipped"));
        let p = &per_path(&rows)["producer/array"];
        assert!(p.exercised.is_empty() && p.not_reached.is_empty());
        assert!(p.skipped.as_deref().unwrap().contains("not exported"));
        assert!(render(&rows).contains("nothing reached: arrowcert_produce_array is not exported"));
    }

    /// Single-variation factors: a family the plan ran with a variation on
    /// another path of the side is `elsewhere` (naming that path), a family
    /// the variation has nothing to change in is `not_applicable`, and the
    /// released-structure cases reach no family.
    #[test]
    fn pairwise_cells_are_told_from_unreached_ones() {
        let seed = 3;
        let int32 = generate::scenario(seed, "gen/type:int32").unwrap();
        let utf8 = generate::scenario(seed, "gen/type:utf8").unwrap();
        let views = generate::scenario(seed, "gen/type:utf8-view").unwrap();
        let scenarios = vec![int32, utf8, views];
        let cases = vec![
            case(
                "consumer/stream/varied:offset/gen/type:int32",
                "gen/type:int32",
                Verdict::Pass,
                None,
            ),
            case(
                "consumer/array/varied:offset/gen/type:utf8/batch:0",
                "gen/type:utf8",
                Verdict::Pass,
                None,
            ),
            case(
                "consumer/array/varied:variadic-buffers/gen/type:utf8-view/batch:0",
                "gen/type:utf8-view",
                Verdict::Pass,
                None,
            ),
            case(
                "consumer/stream/varied:garbage/gen/type:int32",
                "gen/type:int32",
                Verdict::Limitation,
                Some("garbage not supported"),
            ),
            case(
                "consumer/array/varied:garbage/gen/type:utf8/batch:0",
                "gen/type:utf8",
                Verdict::Pass,
                None,
            ),
            case(
                "consumer/released/array/gen/type:int32",
                "gen/type:int32",
                Verdict::Pass,
                None,
            ),
        ];
        let rows = of(&cases, &scenarios);
        let get = |path: &str, factor: &str, f: &str| {
            rows.iter()
                .find(|r| r.family == f && r.path == path && r.factor == factor)
                .unwrap_or_else(|| panic!("{path} {factor} {f}"))
        };
        assert_eq!(
            get("consumer/stream", "varied:offset", "int32").status,
            "exercised"
        );
        let e = get("consumer/array", "varied:offset", "int32");
        assert_eq!(e.status, "elsewhere");
        assert!(
            e.why.as_deref().unwrap().contains("consumer/stream"),
            "{e:?}"
        );
        // Refused on the path the plan handed it to: the other paths'
        // rows say so, and the pair counts as refused.
        let r = get("consumer/array", "varied:garbage", "int32");
        assert_eq!(r.status, "elsewhere", "{r:?}");
        assert!(r.why.as_deref().unwrap().contains("was refused"), "{r:?}");
        let n = get("consumer/array", "varied:variadic-buffers", "utf8");
        assert_eq!(n.status, "not_applicable", "{n:?}");
        assert_eq!(
            get("consumer/array", "varied:variadic-buffers", "utf8-view").status,
            "exercised"
        );
        // A family with no single-type scenario in the run and no case:
        // not reached.
        assert_eq!(
            get("consumer/array", "varied:offset", "decimal256").status,
            "not_reached"
        );
        assert!(rows.iter().all(|r| !r.path.ends_with("/released")));
        let p = &per_path(&rows)["consumer/array"];
        assert!(p.elsewhere.contains(&"int32".to_string()), "{p:?}");
        assert!(render(&rows).contains("on other paths only"));
        let pairs = variation_pairs(&rows);
        assert!(pairs["exercised"].contains(&"offset/int32".to_string()));
        assert!(pairs["refused"].contains(&"garbage/int32".to_string()));
        assert!(pairs["not_applicable"].contains(&"variadic-buffers/utf8".to_string()));
        assert!(pairs["not_reached"].contains(&"offset/decimal256".to_string()));
    }
}

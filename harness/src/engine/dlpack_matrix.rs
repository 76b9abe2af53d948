//! The DLPack matrix: every library certified on its own
//! ([`super::dlpack::certify`], both sides it serves), then every
//! producer's arrays into every consumer's `from_dlpack`, each pair judged
//! against its expectations; `dlpack-matrix.json` and `dlpack-matrix.md`.
//! `arrowcert dlpack-matrix` (`cli::dlpack`) parses and prints.

#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};

use super::dlpack as engine;
use crate::dlpack::run::{self, RunArgs, Sides};
use crate::report::{self, expectations::Expectations, outcome::Judgement, Report, Summary};
use crate::roundtrip::Filter;

/// How the matrix runs.
pub struct Request {
    /// Where dlpack-matrix.{json,md} and each report (dlpack/) go.
    pub out: PathBuf,
    /// A directory of expectations (dlpack-<name>.json,
    /// dlpack-pair-<p>-<c>.json).
    pub expectations: Option<PathBuf>,
    pub case_timeout_ms: u64,
    pub max_memory_mb: u64,
    /// Generated cases per library and side, and their seed.
    pub cases: u64,
    pub seed: u64,
}

/// What the matrix tells the command as it goes, for it to print.
pub trait Events {
    /// What a library's certification reports its progress to.
    fn bar(&mut self) -> &mut dyn super::session::Events;
    /// A library's certification ended.
    fn library(&mut self, name: &str, judged: &Judgement, report: &Report);
    /// A pair ran.
    fn pair(&mut self, producer: &str, consumer: &str, summary: &Summary);
    /// A pair's results are not its expected ones.
    fn pair_failed(&mut self, producer: &str, consumer: &str, judged: &Judgement);
}

/// An expectations file, read.
fn read_expectations(path: &Path) -> Result<Option<(PathBuf, Expectations)>, String> {
    Expectations::read(path).map(|e| Some((path.to_path_buf(), e)))
}

/// One library's line of the matrix.
#[derive(serde::Serialize)]
pub struct LibraryRow {
    pub name: String,
    pub adapter: String,
    pub identity: String,
    pub outcome: String,
    pub reasons: Vec<String>,
    pub produces: bool,
    pub consumes: bool,
    /// Across the protocols: `to Arrow` (DLPack in, Arrow out), `from
    /// Arrow`, both or neither, with the cases that passed of those run.
    pub across: String,
    pub passed: u64,
    pub limitations: u64,
    pub failed: u64,
    pub crashed: u64,
    /// Rules that failed, with their level.
    pub findings: Vec<String>,
    pub report: String,
}

/// One producer -> consumer pair.
#[derive(serde::Serialize)]
pub struct PairRow {
    pub producer: String,
    pub consumer: String,
    pub passed: u64,
    pub limitations: u64,
    pub failed: u64,
    pub crashed: u64,
    pub first_failure: Option<String>,
}

/// Every library certified on its own (both sides it serves), then every
/// producer's arrays into every consumer; each report under `OUT/dlpack/`,
/// then `dlpack-matrix.json` and `.md` in OUT. Returns whether a run
/// failed, and the files written.
pub fn run(
    f: &Request,
    libraries: &[(String, String)],
    events: &mut dyn Events,
) -> Result<(bool, [PathBuf; 2]), String> {
    let dir = f.out.join("dlpack");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut rows = Vec::new();
    let mut failed_run = false;
    for (name, spec) in libraries {
        let (row, failed) = library_row(f, &dir, name, spec, events)?;
        failed_run |= failed;
        rows.push(row);
    }
    let mut pairs = Vec::new();
    for p in rows.iter().filter(|r| r.produces) {
        for c in rows.iter().filter(|r| r.consumes) {
            let (row, failed) = pair_row(f, &dir, p, c, events)?;
            failed_run |= failed;
            pairs.push(row);
        }
    }
    // `tool`: the versions `arrowcert --version` prints, as in every report.
    let json =
        serde_json::json!({"tool": report::Tool::default(), "libraries": rows, "pairs": pairs});
    let jpath = f.out.join("dlpack-matrix.json");
    report::write_atomic(
        &jpath,
        &serde_json::to_string_pretty(&json).expect("serialisable"),
    )
    .map_err(|e| format!("{}: {e}", jpath.display()))?;
    let mpath = f.out.join("dlpack-matrix.md");
    report::write_atomic(&mpath, &markdown(&rows, &pairs))
        .map_err(|e| format!("{}: {e}", mpath.display()))?;
    Ok((failed_run, [jpath, mpath]))
}

/// Certifies one library (both sides it serves) and writes its report
/// into `dir`: its row, and whether its run failed.
fn library_row(
    f: &Request,
    dir: &Path,
    name: &str,
    spec: &str,
    events: &mut dyn Events,
) -> Result<(LibraryRow, bool), String> {
    let both = Sides {
        producer: true,
        consumer: true,
        device: None,
    };
    let adapter = spec
        .strip_prefix("py:")
        .ok_or_else(|| format!("{name}: {spec} is not a py: adapter"))?;
    let expectations = match &f.expectations {
        Some(d) if d.join(format!("dlpack-{name}.json")).is_file() => {
            read_expectations(&d.join(format!("dlpack-{name}.json")))?
        }
        _ => None,
    };
    let (r, _) = engine::certify(
        engine::Request {
            adapter,
            sides: both,
            filter: &Filter::default(),
            generated: run::Generated {
                seed: f.seed,
                count: f.cases,
                extra: Vec::new(),
            },
            case_timeout_ms: f.case_timeout_ms,
            max_memory_mb: f.max_memory_mb,
            expectations: expectations.as_ref(),
            replay_prefix: format!(
                "arrowcert certify --dlpack --producer {spec} --consumer {spec}"
            ),
            report: None,
            resume: None,
            invocation: std::env::args().collect(),
            seed: None,
            shrink_candidates: 0,
        },
        events.bar(),
    )?;
    let path = dir.join(format!("{name}.json"));
    report::write(&r, &path).map_err(|e| format!("{}: {e}", path.display()))?;
    let j = r.outcome.clone().expect("judged");
    let served = |p: &str| {
        r.cases
            .iter()
            .any(|c| c.path == p && c.verdict != report::Verdict::Skip)
    };
    let row = LibraryRow {
        name: name.to_string(),
        adapter: spec.to_string(),
        identity: r
            .plugins
            .first()
            .map(|p| p.name.clone())
            .unwrap_or_default(),
        outcome: j.outcome.words().to_string(),
        reasons: j.reasons.clone(),
        produces: served("dlpack_producer"),
        consumes: served("dlpack_consumer"),
        across: across(&r.cases),
        passed: r.summary.passed,
        limitations: r.summary.limitations,
        failed: r.summary.failed,
        crashed: r.summary.crashed,
        findings: r
            .rules
            .iter()
            .filter(|x| x.verdict == report::Verdict::Fail)
            .map(|x| format!("{} {} ({} cases)", x.level, x.rule, x.failed))
            .collect(),
        report: format!("dlpack/{name}.json"),
    };
    events.library(name, &j, &r);
    Ok((row, j.exit_code() != 0))
}

/// Every case of producer `p`'s arrays into consumer `c`, judged against
/// the pair's expectations and written into `dir`: its row, and whether
/// the pair failed.
fn pair_row(
    f: &Request,
    dir: &Path,
    p: &LibraryRow,
    c: &LibraryRow,
    events: &mut dyn Events,
) -> Result<(PairRow, bool), String> {
    let both = Sides {
        producer: true,
        consumer: true,
        device: None,
    };
    let a = crate::plugin::python::prepare(p.adapter.trim_start_matches("py:"))?;
    let b = crate::plugin::python::prepare(c.adapter.trim_start_matches("py:"))?;
    let cases = run::run(
        &RunArgs {
            bridge: a,
            pair_consumer: Some(b),
            generated: run::Generated::default(),
            sides: both,
            filter: Filter::default(),
            max_memory_mb: f.max_memory_mb,
            case_timeout_ms: f.case_timeout_ms,
            replay_prefix: format!(
                "arrowcert dlpack-matrix --library {}={} --library {}={}",
                p.name, p.adapter, c.name, c.adapter
            ),
        },
        None,
        &mut |_| {},
    )?
    .cases;
    let s = report::Summary::of(&cases);
    let first_failure = cases
        .iter()
        .find(|x| {
            matches!(
                x.verdict,
                report::Verdict::Fail
                    | report::Verdict::Crash
                    | report::Verdict::Timeout
                    | report::Verdict::Error
            )
        })
        .map(|x| format!("{}: {}", x.id, x.message.as_deref().unwrap_or("")));
    // A pair's known failures: expectations/dlpack-pair-P-C.json.
    let file = format!("dlpack-pair-{}-{}.json", p.name, c.name);
    let expectations = match &f.expectations {
        Some(d) if d.join(&file).is_file() => read_expectations(&d.join(&file))?,
        _ => None,
    };
    let mut r = Report::begun(
        "dlpack-matrix",
        std::env::args().collect(),
        std::time::SystemTime::now(),
        "dlpack pairs".into(),
    );
    r.planned = cases.len() as u64;
    r.complete = true;
    r.summary = s.clone();
    r.cases = cases;
    super::judge(&mut r, &[], expectations.as_ref(), false);
    let j = r.outcome.clone().expect("judged");
    let failed = j.exit_code() != 0 && j.outcome != report::outcome::Outcome::NotCertified;
    if failed {
        events.pair_failed(&p.name, &c.name, &j);
    }
    let path = dir.join(format!("pair-{}-{}.json", p.name, c.name));
    report::write(&r, &path).map_err(|e| format!("{}: {e}", path.display()))?;
    events.pair(&p.name, &c.name, &s);
    let row = PairRow {
        producer: p.name.clone(),
        consumer: c.name.clone(),
        passed: s.passed,
        limitations: s.limitations,
        failed: s.failed,
        crashed: s.crashed + s.timed_out,
        first_failure,
    };
    Ok((row, failed))
}

/// The matrix's word for a library's cases across the protocols: which
/// directions it serves, each with passed / run (skipped cases not run).
fn across(cases: &[report::Case]) -> String {
    let words: Vec<String> = [
        ("dlpack_to_arrow", "to Arrow"),
        ("dlpack_from_arrow", "from Arrow"),
    ]
    .iter()
    .filter_map(|(path, word)| {
        let run: Vec<&report::Case> = cases
            .iter()
            .filter(|c| c.path == *path && c.verdict != report::Verdict::Skip)
            .collect();
        (!run.is_empty()).then(|| {
            let passed = run
                .iter()
                .filter(|c| c.verdict == report::Verdict::Pass)
                .count();
            format!("{word} {passed}/{}", run.len())
        })
    })
    .collect();
    if words.is_empty() {
        "no".into()
    } else {
        words.join(", ")
    }
}

/// The matrix as markdown: a line per library, then the pairs' grid.
fn markdown(rows: &[LibraryRow], pairs: &[PairRow]) -> String {
    let mut md = String::from(
        "# DLPack matrix\n\nWritten by `arrowcert dlpack-matrix` (`just dlpack-matrix`); \
         the rules are `arrowcert rules 'dlpack.*'`, the findings are explained in \
         reports/FINDINGS.md. Each library is certified on its own (the harness as \
         consumer of its `__dlpack__` and as producer for its `from_dlpack`), then \
         every producer's arrays go into every consumer's `from_dlpack` and are read \
         back. \"across\" is the library's crossing of the two protocols (docs/DLPACK.md): \
         DLPack in and Arrow out (\"to Arrow\"), Arrow in and DLPack out (\"from \
         Arrow\"), judged by both rule sets, with the cases that passed of those run. \
         \"outcome\" is the run judged against the library's expectations file \
         (expectations/dlpack-<library>.json): ok means every result is the one \
         expected, known failures included; \"rules broken\" lists them.\n\n\
         ## Libraries\n\n| library | outcome | produces | consumes | across | passed | limitations | failed | crashed | rules broken |\n|---|---|---|---|---|---:|---:|---:|---:|---|\n",
    );
    for r in rows {
        md.push_str(&format!(
            "| {} ({}) | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.name,
            r.identity,
            r.outcome,
            if r.produces { "yes" } else { "no" },
            if r.consumes { "yes" } else { "no" },
            r.across,
            r.passed,
            r.limitations,
            r.failed,
            r.crashed,
            if r.findings.is_empty() {
                "none".to_string()
            } else {
                r.findings.join("; ")
            }
        ));
    }
    md.push_str("\n## Pairs (producer -> consumer): cases whose values arrived / declined / wrong / crashed\n\n| producer \\ consumer |");
    let consumers: Vec<&str> = rows
        .iter()
        .filter(|r| r.consumes)
        .map(|r| r.name.as_str())
        .collect();
    for c in &consumers {
        md.push_str(&format!(" {c} |"));
    }
    md.push_str("\n|---|");
    md.push_str(&"---|".repeat(consumers.len()));
    md.push('\n');
    for p in rows.iter().filter(|r| r.produces) {
        md.push_str(&format!("| {} |", p.name));
        for c in &consumers {
            match pairs
                .iter()
                .find(|x| x.producer == p.name && x.consumer == *c)
            {
                Some(x) => md.push_str(&format!(
                    " {} / {} / {} / {} |",
                    x.passed, x.limitations, x.failed, x.crashed
                )),
                None => md.push_str(" - |"),
            }
        }
        md.push('\n');
    }
    let failures: Vec<&PairRow> = pairs.iter().filter(|p| p.first_failure.is_some()).collect();
    if !failures.is_empty() {
        md.push_str("\nFirst failure of each failing pair:\n\n");
        for p in failures {
            md.push_str(&format!(
                "- {} -> {}: {}\n",
                p.producer,
                p.consumer,
                p.first_failure.as_deref().unwrap_or("")
            ));
        }
    }
    md
}

//! Checkpoints and resumption, for every command that runs a plan of
//! cases (`certify`, `roundtrip`, `replay`): the report of a run in
//! progress, rewritten to disk now and then so that a run killed outright
//! leaves a valid report, and the checks that let `--resume` continue one.

use std::path::PathBuf;
use std::time::{Instant, SystemTime};

use crate::report::{self, Case, Report, Summary};

/// How often the report of a running job is rewritten (atomically), so
/// that a run killed outright still leaves a valid, resumable report.
const CHECKPOINT_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// The report of a run in progress: every finished case, rewritten to disk
/// now and then with `complete: false`.
pub struct Checkpoint {
    pub report: Report,
    pub path: PathBuf,
    /// Plan position of each case ID, to keep `cases` in plan order.
    pub position: std::collections::HashMap<String, usize>,
    pub last: Instant,
    /// The first write error, reported once at the end.
    pub error: Option<String>,
    /// No report file is written (`arrowcert replay` without --report).
    pub disabled: bool,
    /// The IDs of the cases in `report` (filled on first use).
    pub added: std::collections::HashSet<String>,
}

impl Checkpoint {
    /// Adds a finished case; a second result for the same ID (an earlier
    /// case amended after a late write was found) replaces the first.
    pub fn add(&mut self, case: &Case) {
        if self.added.len() < self.report.cases.len() {
            // Cases kept from the run being resumed.
            self.added = self.report.cases.iter().map(|c| c.id.clone()).collect();
        }
        if !self.added.insert(case.id.clone()) {
            if let Some(old) = self.report.cases.iter_mut().find(|c| c.id == case.id) {
                *old = case.clone();
            }
        } else {
            self.report.cases.push(case.clone());
        }
        if self.last.elapsed() >= CHECKPOINT_EVERY {
            self.save(false);
        }
    }

    fn sort(&mut self) {
        let position = &self.position;
        // Ties (cases run after the plan, placed after the case they
        // follow up on, in whatever order workers finished them) are put
        // in ID order, so that a report's order does not vary by run.
        let at = |c: &Case| position.get(&c.id).copied().unwrap_or(usize::MAX);
        self.report
            .cases
            .sort_by(|a, b| at(a).cmp(&at(b)).then_with(|| a.id.cmp(&b.id)));
    }

    /// The end of a run: complete unless interrupted or short of the plan;
    /// `judge` adds what the command derives from every case (with cases
    /// in plan order) before the final write.
    pub fn finish(
        mut self,
        interrupted: Option<i32>,
        clock: Instant,
        judge: impl FnOnce(&mut Report),
    ) -> Result<Report, String> {
        let complete =
            interrupted.is_none() && self.report.cases.len() as u64 >= self.report.planned;
        self.report.duration_ms = clock.elapsed().as_millis() as u64;
        self.report.interrupted = interrupted.map(super::proc::signal_name);
        self.sort();
        self.report.summary = Summary::of(&self.report.cases);
        self.report.complete = complete;
        self.report.limitations = limitations(&self.report);
        judge(&mut self.report);
        self.save(complete);
        match self.error {
            Some(e) => Err(e),
            None => Ok(self.report),
        }
    }

    pub fn save(&mut self, complete: bool) {
        self.last = Instant::now();
        self.sort();
        self.report.summary = Summary::of(&self.report.cases);
        self.report.complete = complete;
        self.report.finished_at = report::time::rfc3339(SystemTime::now());
        if self.disabled {
            return;
        }
        if let Err(e) = report::write(&self.report, &self.path) {
            self.error
                .get_or_insert(format!("{}: cannot write report: {e}", self.path.display()));
        }
    }
}

/// Every limitation a consumer declared in this run, with the library's
/// name (the consumer's: only consumers decline under the spec's
/// permissions).
pub fn limitations(report: &Report) -> Vec<report::LimitationEntry> {
    let library = report
        .plugins
        .iter()
        .find(|p| p.role == "consumer")
        .map_or_else(|| "consumer".to_string(), |p| p.name.clone());
    report
        .cases
        .iter()
        .filter(|c| c.verdict == report::Verdict::Limitation)
        .map(|c| report::LimitationEntry {
            library: library.clone(),
            case: c.id.clone(),
            path: c.path.clone(),
            message: c.message.clone().unwrap_or_default(),
        })
        .collect()
}

/// The selected plan positions whose case IDs the resumed report does not
/// have yet (all of them without a report).
pub fn not_yet_run<'a>(
    previous: Option<&Report>,
    selected: &[usize],
    id: impl Fn(usize) -> &'a str,
) -> Vec<usize> {
    let done: std::collections::HashSet<&str> = previous
        .map(|r| r.cases.iter().map(|c| c.id.as_str()).collect())
        .unwrap_or_default();
    selected
        .iter()
        .copied()
        .filter(|&i| !done.contains(id(i)))
        .collect()
}

/// Reads the report of an interrupted run and checks that it was made by
/// the same command, on the same data, with the same plugin files.
pub fn resumable(
    path: &std::path::Path,
    command: &str,
    data: &str,
    plugins: &[(&str, &std::path::Path)],
) -> Result<Report, String> {
    let old = report::read(path)?;
    if old.command != command {
        return Err(format!(
            "{}: a `{}` report, not a {command} report",
            path.display(),
            old.command
        ));
    }
    if old.data != data {
        return Err(format!(
            "{}: made with data from {}, not {data}",
            path.display(),
            old.data
        ));
    }
    for (role, lib) in plugins {
        let now = report::sha256_file(lib).map_err(|e| format!("{}: {e}", lib.display()))?;
        match old.plugins.iter().find(|p| p.role == *role) {
            Some(p) if p.sha256 == now => {}
            Some(p) => {
                return Err(format!(
                    "{}: the {role} changed since the report was written ({} had sha256 {}, {} has {now})",
                    path.display(),
                    p.path,
                    p.sha256,
                    lib.display()
                ))
            }
            None => {
                return Err(format!(
                    "{}: the report names no {role}",
                    path.display()
                ))
            }
        }
    }
    Ok(old)
}

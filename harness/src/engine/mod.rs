//! Engines that run plans of cases for the commands: certification (runs
//! and shrinking) and round trips. The commands (`cli`) parse, keep reports
//! and print.

#![forbid(unsafe_code)]

use std::path::PathBuf;

use crate::report::{self, expectations::Expectations, Case, PluginIdentity, Report};
use crate::run;

pub mod cai;
pub mod certification;
pub mod certify;
pub mod coverage;
pub mod dlpack;
pub mod dlpack_matrix;
pub mod fuzz;
pub mod malformed;
pub mod matrix;
pub mod roundtrip;
pub mod session;
pub mod suites;

/// Judges a finished run's report: the outcome from its cases and rule
/// verdicts (`data_rules`: the rules a pass must have exercised on data;
/// none for round trips, where every pass compared data), then checked
/// against the expectations file when one was given (`subset`: a filter
/// ran part of the plan, see [`report::expectations::check`]).
pub fn judge(
    r: &mut Report,
    data_rules: &[&str],
    expectations: Option<&(PathBuf, Expectations)>,
    subset: bool,
) {
    let judged = report::outcome::judge(&report::outcome::Run {
        cases: &r.cases,
        rules: &r.rules,
        planned: r.planned,
        complete: r.complete,
        data_rules,
    });
    r.expectations = expectations.map(|(path, exp)| {
        report::expectations::check(r, exp, &path.display().to_string(), subset)
    });
    r.outcome = Some(match &r.expectations {
        Some(checked) => report::outcome::with_expectations(judged, checked),
        None => judged,
    });
}

/// Runs cases in this process, one after another (`case` runs one, guarded
/// so that a panic of arrowcert's own code is that case's harness error),
/// until an interrupt; returns the signal that interrupted the run, if any.
fn in_process(
    selected: &[usize],
    mut case: impl FnMut(usize) -> Case,
    on_case: &mut dyn FnMut(&Case),
) -> Option<i32> {
    // The last cases' results: a late write into a structure one of their
    // calls filled, found at the end of a later case, amends them
    // (abi::outslot).
    let mut recent: std::collections::VecDeque<Case> = std::collections::VecDeque::new();
    for &i in selected {
        if run::proc::interrupted().is_some() {
            break;
        }
        let c = case(i);
        on_case(&c);
        for d in crate::abi::outslot::take_earlier() {
            if let Some(earlier) = recent.iter_mut().find(|e| e.id == d.case) {
                crate::run::late::charge(earlier, std::slice::from_ref(&d));
                on_case(earlier);
            }
        }
        recent.push_back(c);
        if recent.len() > crate::abi::outslot::WINDOW {
            recent.pop_front();
        }
    }
    run::proc::interrupted()
}

/// Where and how worker processes run a plan's cases.
struct Workers {
    args: run::worker::WorkerArgs,
    /// Worker processes at once.
    count: usize,
    case_timeout_ms: u64,
    max_memory_mb: u64,
    /// What the workers load, for the message when they cannot start
    /// ("the plugin", "the plugins").
    loads: &'static str,
    /// Environment variables for the workers ([`run::Config::env`]).
    env: Vec<(String, String)>,
    /// What the workers run under ([`run::Config::wrapper`]).
    wrapper: Vec<String>,
}

impl Workers {
    /// Runs `jobs` (cases of a plan of `plan_len`) in worker processes;
    /// their scratch directory is removed afterwards. Returns the signal
    /// that interrupted the run, if any.
    /// `kept`: the engine's pool of workers kept between its runs (made
    /// here on first use); `None`: workers of this run only.
    fn run(
        self,
        kept: Option<&std::cell::OnceCell<run::Pool>>,
        plan_len: usize,
        jobs: Vec<run::Job>,
        ready: impl FnOnce(&[PluginIdentity]),
        on_case: impl FnMut(&Case),
    ) -> Result<Option<i32>, String> {
        let cfg = run::Config::for_workers(
            self.args,
            self.count,
            self.case_timeout_ms,
            self.max_memory_mb,
        )
        .map_err(|e| format!("cannot find the arrowcert executable: {e}"))?;
        // Under a wrapper (valgrind) the allocation tracker stays out: the
        // wrapper replaces malloc itself. Its workers start and run slower.
        let wrapped = !self.wrapper.is_empty();
        let cfg = run::Config {
            env: self.env,
            tracker: cfg.tracker && !wrapped,
            start_timeout: if wrapped {
                cfg.start_timeout * 10
            } else {
                cfg.start_timeout
            },
            wrapper: self.wrapper,
            ..cfg
        };
        let loads = self.loads;
        let cannot = |run::StartError(why)| format!("cannot run {loads}: {why}");
        let own;
        let pool = match kept {
            Some(cell) => match cell.get() {
                Some(p) => p,
                None => {
                    let p = run::Pool::new(&cfg, true).map_err(cannot)?;
                    cell.get_or_init(|| p)
                }
            },
            None => {
                own = run::Pool::new(&cfg, false).map_err(cannot)?;
                &own
            }
        };
        let outcome = run::run(&cfg, pool, plan_len, jobs, ready, on_case);
        Ok(outcome.map_err(cannot)?.interrupted)
    }
}

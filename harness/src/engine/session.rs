//! The one sequence every command that runs a plan of cases goes through
//! (`certify`, `replay`, `roundtrip`, `certify --dlpack`): select, resume,
//! checkpoint as cases end, finish and judge. A command opens a session
//! on its plan, hands each finished case to it, and finishes it with what
//! it derives from every case; the session keeps the report (on disk as
//! it goes: a run killed outright leaves a valid, resumable report).

#![forbid(unsafe_code)]

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime};

use crate::report::{self, Case, PluginIdentity, Report};
use crate::run::checkpoint::{not_yet_run, resumable, Checkpoint};

/// What a session is opened on.
pub struct Opening<'a> {
    /// The report's command (`certify`, `replay`, `roundtrip`, ...): a
    /// resumed report must name the same.
    pub command: &'a str,
    /// The command line, kept in the report.
    pub invocation: Vec<String>,
    /// Where the scenarios came from (`Sources::describe`): a resumed
    /// report must name the same.
    pub data: String,
    /// Every planned case ID, in plan order (a report keeps its cases in
    /// this order).
    pub plan: Vec<String>,
    /// The plan positions this run selected.
    pub selected: Vec<usize>,
    /// `--resume`: the report of the interrupted run to continue.
    pub resume: Option<&'a Path>,
    /// The files a resumed report must have been made with, by role.
    pub files: Vec<(&'a str, &'a Path)>,
    /// `--report`.
    pub report: Option<PathBuf>,
    /// The default report's name (`reports/STEM-TIME.json`) when neither
    /// `report` nor `resume` names one; `None`: no report file then.
    pub default_stem: Option<&'a str>,
    /// The device types the run covers.
    pub devices: Vec<String>,
    /// The seed of generated scenarios, if the run has any.
    pub seed: Option<u64>,
    /// The plugins, when known before the run starts (otherwise the run
    /// names them: [`Session::name_plugins`]).
    pub plugins: Vec<PluginIdentity>,
}

/// A finished (or interrupted) run.
pub struct Ran {
    /// The judged report, as written.
    pub report: Report,
    /// Where it was written (`None`: kept in memory only).
    pub path: Option<PathBuf>,
    /// The signal that interrupted the run, if any.
    pub interrupted: Option<i32>,
    /// How many cases the run selected.
    pub selected: usize,
}

/// A run in progress.
pub struct Session {
    checkpoint: RefCell<Checkpoint>,
    /// The selected plan positions not yet run (all of them unless
    /// resumed).
    pub todo: Vec<usize>,
    /// How many cases the run selected.
    pub selected: usize,
    /// The report file (`None`: kept in memory only).
    pub path: Option<PathBuf>,
    clock: Instant,
}

impl Session {
    /// Opens a session: reads and checks the report being resumed (same
    /// command, data and files), keeps its cases and plans the rest.
    pub fn open(o: Opening) -> Result<Session, String> {
        let previous = match o.resume {
            Some(path) => Some(resumable(path, o.command, &o.data, &o.files)?),
            None => None,
        };
        let todo = not_yet_run(previous.as_ref(), &o.selected, |i| &o.plan[i]);
        let started = SystemTime::now();
        let path = o
            .report
            .or_else(|| o.resume.map(Path::to_path_buf))
            .or_else(|| {
                o.default_stem.map(|stem| {
                    PathBuf::from("reports")
                        .join(format!("{stem}-{}.json", report::time::compact(started)))
                })
            });
        let checkpoint = Checkpoint {
            report: Report {
                planned: o.selected.len() as u64,
                devices: o.devices,
                plugins: o.plugins,
                // Kept cases stay; the start and invocation become this
                // run's.
                cases: previous.map(|r| r.cases).unwrap_or_default(),
                seed: o.seed,
                ..Report::begun(o.command, o.invocation, started, o.data)
            },
            path: path.clone().unwrap_or_default(),
            position: o
                .plan
                .into_iter()
                .enumerate()
                .map(|(i, id)| (id, i))
                .collect(),
            last: Instant::now(),
            error: None,
            disabled: path.is_none(),
            added: Default::default(),
        };
        Ok(Session {
            checkpoint: RefCell::new(checkpoint),
            todo,
            selected: o.selected.len(),
            path,
            clock: Instant::now(),
        })
    }

    /// How many selected cases the resumed report already had (0 unless
    /// resumed).
    pub fn kept(&self) -> usize {
        self.selected - self.todo.len()
    }

    /// The line a resumed run starts with, if it is one.
    pub fn resuming_words(&self) -> Option<String> {
        (self.kept() > 0).then(|| {
            format!(
                "resuming {}: {} of {} cases already ran",
                self.path
                    .as_ref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default(),
                self.kept(),
                self.selected
            )
        })
    }

    /// The plugins the run's workers (or this process) loaded.
    pub fn name_plugins(&self, plugins: &[PluginIdentity]) {
        self.checkpoint.borrow_mut().report.plugins = plugins.to_vec();
    }

    /// Keeps a case as it ends and tells `events` (a second result for a
    /// case amends the first, a late write found after it ended: it is not
    /// another case done). `added` fills on the first add; a resumed run's
    /// kept cases never come again, so before it nothing is kept twice.
    pub fn record(&self, c: &Case, events: &mut dyn Events) {
        let new = !self.checkpoint.borrow().added.contains(&c.id);
        events.case(c, new);
        self.add(c);
    }

    /// Keeps a finished case (a second result for an ID amends the first).
    pub fn add(&self, c: &Case) {
        self.checkpoint.borrow_mut().add(c);
    }

    /// Keeps a case run after the plan, placed after the planned case
    /// `follows` (the case it splits or moves).
    pub fn add_after(&self, c: &Case, follows: &str) {
        let mut cp = self.checkpoint.borrow_mut();
        if let Some(at) = cp.position.get(follows).copied() {
            cp.position.insert(c.id.clone(), at);
        }
        cp.add(c);
    }

    /// The report so far.
    pub fn report(&self) -> Report {
        self.checkpoint.borrow().report.clone()
    }

    /// Changes kept cases in place (e.g. marks flaky ones).
    pub fn amend(&self, f: impl FnOnce(&mut [Case])) {
        f(&mut self.checkpoint.borrow_mut().report.cases);
    }

    /// Ends the run: complete unless interrupted or short of the plan;
    /// `judge` adds what the command derives from every case (in plan
    /// order) before the final write.
    pub fn finish(
        self,
        interrupted: Option<i32>,
        judge: impl FnOnce(&mut Report),
    ) -> Result<Report, String> {
        self.checkpoint
            .into_inner()
            .finish(interrupted, self.clock, judge)
    }
}

/// What a run tells the command as it goes, for it to print.
pub trait Events {
    /// The run starts with `todo` cases to run (fewer than selected when
    /// resumed: `resuming` is then the line that says so).
    fn start(&mut self, todo: usize, resuming: Option<&str>);
    /// The plugins are loaded (by this process or the first worker).
    fn ready(&mut self, _plugins: &[PluginIdentity]) {}
    /// A planned case ended (`new`: not a second result amending an
    /// earlier one).
    fn case(&mut self, c: &Case, new: bool);
    /// The planned cases are done (or the run was interrupted).
    fn cases_done(&mut self);
    /// A follow-up case ended (a split refusal, a moved variation).
    fn follow_up(&mut self, _c: &Case) {}
    /// `--repeat` found a case flaky.
    fn flaky(&mut self, _c: &Case) {}
}

//! Breadcrumbs: before each step that calls into a plugin, the check says
//! what it is about to do. In a worker the crumb goes to the orchestrator
//! at once (a line on the socket, written before the call), so when the
//! plugin kills the process the crash verdict says which step it was in:
//! "killed by SIGSEGV ... during `release of a child moved out`". In this
//! process nothing is installed and a crumb costs one atomic load.
//!
//! It sits at the bottom of the module graph, beside the structures it
//! annotates, so that every layer that calls into a plugin (`abi::ops`,
//! `plugin`, `inspect::probe`, `export`) can leave a crumb without
//! depending on the worker (`run`), which installs the sink.

use std::sync::OnceLock;

type Sink = Box<dyn Fn(&str) + Send + Sync>;

static SINK: OnceLock<Sink> = OnceLock::new();

/// Installs where crumbs go (once per process; later calls are ignored).
pub fn install(sink: impl Fn(&str) + Send + Sync + 'static) {
    let _ = SINK.set(Box::new(sink));
}

/// Records that the current case is entering `step`.
pub fn step(step: &str) {
    if let Some(sink) = SINK.get() {
        sink(step);
    }
}

/// Why the process running cases should not run another one (a plugin's
/// threads may still be running inside it, holding harness memory): set by
/// the code that finds out, taken by the worker after the case, which then
/// ends itself (a new worker runs the next case). In-process runs ignore
/// it.
static TAINT: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

/// Marks this process as unfit for further cases, with why.
pub fn taint(why: impl Into<String>) {
    let mut t = TAINT.lock().unwrap_or_else(|e| e.into_inner());
    t.get_or_insert_with(|| why.into());
}

/// Takes (and clears) the reason set by [`taint`], if any.
pub fn take_taint() -> Option<String> {
    TAINT.lock().unwrap_or_else(|e| e.into_inner()).take()
}

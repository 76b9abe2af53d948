//! What a worker knows of a kind of run: the IDs of its plan, and how to
//! run one of its cases. Certify, roundtrip and DLPack each make one
//! ([`super::worker`] picks by [`super::worker::Mode`]); the worker loop,
//! the results protocol, panic catching, limits and everything the
//! orchestrator does with the cases (checkpoints, resume, interrupts,
//! progress) are the same for all of them.

use crate::report::Case;

/// A kind of run, as a worker serves it.
pub trait Suite {
    /// The IDs of the planned cases, in plan order (the orchestrator
    /// planned the same: `Ready` carries their number, each request one ID).
    fn ids(&self) -> Vec<String>;
    /// Runs case `index` of the plan, whose ID must be `id` (or a case the
    /// kind spells out by its ID); `None` for a case it does not know.
    /// Guarded: a panic of arrowcert's code is the case's harness error.
    fn run(&self, index: usize, id: &str) -> Option<Case>;
    /// Whether the worker leaves at the end without running its libraries'
    /// exit code (static destructors, interpreter finalisation): objects a
    /// library kept may still point into code that exit would unload.
    fn quick_exit(&self) -> bool {
        false
    }
}

/// A suite given as its plan's IDs and a function that runs one case
/// (certify and roundtrip, whose plans are remade from each run's sources).
pub struct Planned<F> {
    pub ids: Vec<String>,
    pub run: F,
}

impl<F: Fn(usize, &str) -> Option<Case>> Suite for Planned<F> {
    fn ids(&self) -> Vec<String> {
        self.ids.clone()
    }
    fn run(&self, index: usize, id: &str) -> Option<Case> {
        (self.run)(index, id)
    }
}

impl<S: Suite + ?Sized> Suite for &S {
    fn ids(&self) -> Vec<String> {
        (**self).ids()
    }
    fn run(&self, index: usize, id: &str) -> Option<Case> {
        (**self).run(index, id)
    }
    fn quick_exit(&self) -> bool {
        (**self).quick_exit()
    }
}

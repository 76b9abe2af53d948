//! Messages between the orchestrator and a worker: one JSON object per line
//! over a private Unix socket (never stdout or stderr, which belong to the
//! plugins and are captured).

use serde::{Deserialize, Serialize};

use crate::report::{Case, PluginIdentity};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum ToWorker {
    /// Run planned case `index`, whose ID must be `id` (a check that both
    /// sides planned the same cases).
    Case { index: usize, id: String },
    /// Plan again over these sources (a kept worker given the next run of
    /// its engine: a shrink candidate, say); the worker answers `Ready`
    /// with the new plan's length. The plugins stay loaded.
    Plan { sources: crate::sources::Sources },
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum FromWorker {
    /// Plugins loaded; the worker's plan has `cases` cases.
    Ready {
        plugins: Vec<PluginIdentity>,
        cases: usize,
        /// A round trip's consumer, as its cases see it before calling it.
        #[serde(default)]
        consumer_facts: Option<ConsumerFacts>,
    },
    /// A case finished (whatever its verdict). `output_end` is the worker's
    /// position in its capture file once its C stdio was flushed: what the
    /// plugins printed during the case ends there (requests are pipelined,
    /// so the orchestrator cannot tell from the file's length alone).
    Done {
        case: Box<Case>,
        #[serde(default)]
        output_end: Option<u64>,
        /// The worker ends after this case, and why: the plugin changed its
        /// process in a way it cannot undo (a hard limit lowered). The
        /// orchestrator runs the cases it had sent after this one in a new
        /// worker.
        #[serde(default)]
        retire: Option<String>,
        /// Earlier cases of this worker, amended: a thread a plugin left
        /// running wrote into a structure one of their calls had filled,
        /// and it was found at the end of this case (`array.out.untouched`).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        amended: Vec<Case>,
    },
    /// The running case is entering this step (sent before the step's
    /// plugin calls, so a crash is attributed to it).
    Step { step: String },
    /// The worker cannot go on (bad input it discovered); it exits next.
    Fatal { message: String },
    /// arrowcert's own code panicked in the running case ("panicked at
    /// FILE:LINE:COL: MESSAGE"); sent by the panic hook before anything
    /// else, so that a worker that dies of it is a harness error.
    HarnessPanic { message: String },
}

/// What a round trip's cases ask of the consumer before they call it
/// ([`crate::roundtrip::ConsumerSide`]). A worker restarted after the
/// producer crashed is given these and loads the consumer only when a case
/// calls it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumerFacts {
    /// The entry points it exports.
    pub entry_points: Vec<String>,
    /// The run's device type, and whether the consumer supports it.
    pub device_type: i32,
    pub supports_device: bool,
}

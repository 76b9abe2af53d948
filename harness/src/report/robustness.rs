//! The robustness section of a certification report (`certify --malformed`,
//! docs/MALFORMED.md): what a consumer did with structures that break the
//! spec on purpose. Reported apart from the rules: it never yields a rule
//! verdict and never changes a run's outcome or exit code.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What a consumer did with malformed input: every case, the counts, a
/// grade, and the producer mutants left out (with why).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Default)]
pub struct Robustness {
    /// Over the graded cases: `A`: each refused cleanly, or accepted and
    /// either read the data or was only odd (a SHOULD/INFO breakage);
    /// `B`: no crash or hang, but an invalid structure (a MUST breakage)
    /// accepted reading other values, or a structure left unreleased;
    /// `C`: a hang, no crash; `F`: a crash; `-`: nothing graded ran.
    pub grade: String,
    /// "31 of 40 refused cleanly, 6 accepted (read the data), ..." in words.
    pub summary: String,
    pub counts: RobustnessCounts,
    /// One per malformed case, in plan order.
    pub cases: Vec<RobustnessCase>,
    /// Producer mutants whose broken structure no consumer is shown, and why.
    pub skipped_mutants: Vec<SkippedMutant>,
}

/// How many cases ended each way.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Default)]
pub struct RobustnessCounts {
    pub cases: u64,
    /// Non-zero return, every structure released or moved.
    pub refused: u64,
    /// Returned 0 and read exactly what the scenario holds.
    pub accepted_equal: u64,
    /// Returned 0 and read something else (or something unreadable).
    pub accepted_differs: u64,
    /// Returned (0 or not) leaving a structure it was given unreleased.
    pub unreleased: u64,
    /// Died by a signal or an exit in the middle of the call.
    pub crashed: u64,
    /// Missed the case deadline.
    pub hung: u64,
    /// Not exercised: the consumer lacks the path, or the mutant could not
    /// produce (the reason is in the case).
    pub not_run: u64,
    /// Exercised cases that count towards the grade.
    pub graded: u64,
}

/// One malformed case: `malformed/<path>/<mutant>/<scenario>`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct RobustnessCase {
    pub id: String,
    pub mutant: String,
    /// `array`, `device_array`, `stream` or `device_stream`.
    pub path: String,
    pub scenario: String,
    /// What the mutant breaks (the rule the producer mutant fails).
    pub breaks: String,
    /// The level of that rule: `MUST` (the structure is not valid Arrow;
    /// reading other values than the data is accepting garbage) or
    /// `SHOULD`/`INFO` (odd but readable: accepting it is fine either way).
    pub level: String,
    /// Whether the case counts towards the grade: false when no consumer
    /// could see the breakage in the structures (a buffer shorter than its
    /// length says, memory recycled under it), so a crash is listed only.
    pub graded: bool,
    /// `refused`, `accepted_equal`, `accepted_differs`, `unreleased`,
    /// `crashed`, `hung` or `not_run`.
    pub result: String,
    /// The consumer's message, the crash's signal and step, what differed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    pub duration_us: u64,
}

/// A producer mutant left out of `--malformed`, with the reason.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct SkippedMutant {
    pub mutant: String,
    pub why: String,
}

//! Words the commands print: shell-quoted arguments, the command that
//! resumes a run, a case's verdict.

use crate::report::{self, Case, Verdict};

pub use crate::report::shell_word;

/// The invocation without any earlier `--resume`, quoted for a shell.
pub fn resume_command(invocation: &[String]) -> String {
    let mut words = Vec::new();
    let mut skip_next = false;
    for w in invocation {
        if skip_next {
            skip_next = false;
            continue;
        }
        if w == "--resume" {
            skip_next = true;
            continue;
        }
        if w.starts_with("--resume=") {
            continue;
        }
        words.push(shell_word(w));
    }
    words.join(" ")
}

pub fn verdict_word(c: &Case) -> String {
    match c.verdict {
        Verdict::Pass if c.passed_with_changes() => {
            "ok (values equal; types, names or metadata changed)".into()
        }
        Verdict::Pass => "ok".into(),
        Verdict::Fail => "FAILED".into(),
        Verdict::Error => "ERROR".into(),
        Verdict::Crash => "CRASHED".into(),
        Verdict::Timeout if c.path_hangs() => "NOT RUN (its path hangs)".into(),
        Verdict::Timeout => "TIMED OUT".into(),
        // The message says whose fault it is and asks for a report.
        Verdict::HarnessError => format!(
            "HARNESS ERROR ({})",
            report::printable(c.message.as_deref().unwrap_or("no message"))
        ),
        Verdict::Limitation => format!(
            "limitation ({})",
            report::printable(c.message.as_deref().unwrap_or("no message"))
        ),
        Verdict::Skip => format!(
            "skipped ({})",
            report::printable(c.message.as_deref().unwrap_or("no reason given"))
        ),
    }
}

/// A run's counts as the result line prints them: "3 passed; 0 failed;
/// ...; 1 skipped; finished in 0.42s" (harness errors only when there are
/// some).
pub fn counts(s: &report::Summary, duration_ms: u64) -> String {
    format!(
        "{} passed; {} failed; {} errors; {} crashed; {} timed out; {} limitations; {} skipped{}{}; finished in {:.2}s",
        s.passed,
        s.failed,
        s.errors,
        s.crashed,
        s.timed_out,
        s.limitations,
        s.skipped,
        if s.harness_errors > 0 {
            format!("; {} harness errors", s.harness_errors)
        } else {
            String::new()
        },
        if s.flaky > 0 {
            format!("; {} flaky", s.flaky)
        } else {
            String::new()
        },
        duration_ms as f64 / 1000.0
    )
}

//! `arrowcert summary REPORT`: a certify report as Markdown, for a CI job
//! summary (the GitHub Action appends it to `$GITHUB_STEP_SUMMARY`): the
//! outcome and its reasons, the plugins, the case counts, each failing
//! rule with its first evidence and replay command, and the expectations
//! check. Everything taken from the report is escaped, so a library's
//! message cannot break the page or inject HTML.

use std::fmt::Write;
use std::path::PathBuf;

use super::BadInput;
use crate::matrix::render::md;
use crate::report::{Report, Verdict};

/// The flags of `arrowcert summary`.
#[derive(clap::Args)]
pub struct SummaryFlags {
    /// A certify report (JSON), as `certify --report` writes it.
    pub report: PathBuf,
}

/// `arrowcert summary`, from its flags: prints the Markdown, exit 0 (the
/// outcome is the certify run's exit code, not this command's).
pub fn summary_command(f: SummaryFlags) -> Result<i32, BadInput> {
    let report = crate::report::read(&f.report).map_err(BadInput)?;
    if report.command != "certify" {
        return Err(BadInput(format!(
            "{}: a {} report; summary reads certify reports",
            f.report.display(),
            report.command
        )));
    }
    print!("{}", markdown(&report));
    Ok(0)
}

/// Failing rules listed in full; the rest are counted.
const MAX_RULES: usize = 20;

/// The Markdown summary of a certify report.
pub fn markdown(r: &Report) -> String {
    let mut o = String::new();
    let (words, code) = match &r.outcome {
        Some(j) => (j.outcome.words(), Some(j.exit_code())),
        None => ("no outcome recorded", None),
    };
    let _ = writeln!(o, "## arrowcert certify: {}\n", md(words));
    if let Some(code) = code {
        let _ = writeln!(o, "Exit code {code}.\n");
    }
    if !r.complete {
        let _ = writeln!(
            o,
            "The run is incomplete: {} of {} planned cases ran.\n",
            r.cases.len(),
            r.planned
        );
    }
    for reason in r.outcome.iter().flat_map(|j| &j.reasons) {
        let _ = writeln!(o, "- {}", md(reason));
    }
    o.push('\n');
    for p in &r.plugins {
        let _ = writeln!(
            o,
            "- {}: **{}** (`{}`, ABI {})",
            md(&p.role),
            md(&p.name),
            p.path.replace('`', "'"),
            p.abi_version
        );
    }
    let s = &r.summary;
    let _ = writeln!(
        o,
        "\n| cases | passed | failed | errors | crashed | timed out | limitations | skipped |\n\
         |---|---|---|---|---|---|---|---|\n\
         | {} | {} | {} | {} | {} | {} | {} | {} |\n",
        s.total, s.passed, s.failed, s.errors, s.crashed, s.timed_out, s.limitations, s.skipped
    );
    let rules_failed: Vec<_> = r
        .rules
        .iter()
        .filter(|x| x.verdict == Verdict::Fail)
        .collect();
    let rules_passed = r
        .rules
        .iter()
        .filter(|x| x.verdict == Verdict::Pass)
        .count();
    let _ = writeln!(
        o,
        "Rules: {} held, {} broken, {} not exercised (of {}).",
        rules_passed,
        rules_failed.len(),
        r.rules.len() - rules_passed - rules_failed.len(),
        r.rules.len()
    );
    if let Some(seed) = r.seed {
        let _ = writeln!(o, "Seed {seed} (`--seed {seed}` draws the same cases).");
    }
    if !rules_failed.is_empty() {
        o.push_str(
            "\n### Broken rules\n\nA broken MUST rule fails the run; SHOULD and MAY rules are reported.\n\n| rule | level | failed / checked | first failing case | evidence |\n\
             |---|---|---|---|---|\n",
        );
        for x in rules_failed.iter().take(MAX_RULES) {
            let _ = writeln!(
                o,
                "| {} | {} | {} / {} | {} | {} |",
                md(&x.rule),
                md(&x.level),
                x.failed,
                x.checked,
                md(x.failing_cases.first().map_or("", String::as_str)),
                md(&clip(x.evidence.as_deref().unwrap_or(""), 300))
            );
        }
        if rules_failed.len() > MAX_RULES {
            let _ = writeln!(
                o,
                "\n{} more broken rules: see the report.",
                rules_failed.len() - MAX_RULES
            );
        }
        let replays: Vec<&str> = rules_failed
            .iter()
            .take(MAX_RULES)
            .filter_map(|x| x.failing_cases.first())
            .filter_map(|id| r.cases.iter().find(|c| &c.id == id))
            .map(|c| c.replay.as_str())
            .filter(|c| !c.is_empty())
            .collect();
        if !replays.is_empty() {
            o.push_str("\nReplay the first failing case of each:\n\n");
            o.push_str(&code_block(&dedup(replays).join("\n")));
        }
    }
    let others: Vec<_> = r
        .cases
        .iter()
        .filter(|c| {
            matches!(
                c.verdict,
                Verdict::Crash | Verdict::Timeout | Verdict::Error | Verdict::HarnessError
            )
        })
        .collect();
    if !others.is_empty() {
        let _ = writeln!(o, "\n### Crashes, hangs and errors ({})\n", others.len());
        o.push_str("| case | verdict | message |\n|---|---|---|\n");
        for c in others.iter().take(MAX_RULES) {
            let _ = writeln!(
                o,
                "| {} | {} | {} |",
                md(&c.id),
                c.verdict.as_str(),
                md(&clip(c.message.as_deref().unwrap_or(""), 300))
            );
        }
    }
    if let Some(e) = &r.expectations {
        let _ = writeln!(
            o,
            "\n### Expectations ({})\n\n{} results as expected ({} declared failures), {} unexpected.",
            md(&e.file),
            e.expected,
            e.expected_failures,
            e.unexpected.len()
        );
        if !e.unexpected.is_empty() {
            o.push_str("\n| rule or case | what | expected | actual |\n|---|---|---|---|\n");
            for m in e.unexpected.iter().take(MAX_RULES) {
                let _ = writeln!(
                    o,
                    "| {} | {} | {} | {} |",
                    md(&m.id),
                    md(&m.kind),
                    md(&m.expected),
                    md(&m.actual)
                );
            }
        }
    }
    o
}

/// At most `max` characters of `text`, marked when cut.
fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((i, _)) => format!("{}...", &text[..i]),
        None => text.to_string(),
    }
}

fn dedup(items: Vec<&str>) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for i in items {
        if !out.contains(&i) {
            out.push(i);
        }
    }
    out
}

/// A fenced code block whose fence is longer than any run of backticks
/// in `text`, so the text cannot close it.
fn code_block(text: &str) -> String {
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest.max(2) + 1);
    format!("{fence}sh\n{text}\n{fence}\n")
}

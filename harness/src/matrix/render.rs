//! `matrix.md` and `matrix.html` from a [`Matrix`]. The HTML is one
//! self-contained file: inline CSS, no scripts, no fonts, images or links
//! to anything outside it. Every string that can come from a plugin (its
//! name, error messages, evidence, paths) goes through [`html`] or [`md`]
//! escaping, so a plugin called `<script>...` renders as that text.

#![forbid(unsafe_code)]

use std::fmt::Write;

use super::{Matrix, Status, Unit, UnitKind};
use crate::report::Summary;

/// The interface paths, in the order columns show them.
const PATHS: [&str; 5] = ["device_array", "device_stream", "async", "array", "stream"];

/// Escapes text for HTML element content and quoted attribute values.
pub fn html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() && c != '\n' && c != '\t' => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

/// Escapes text for a Markdown table cell: markup characters become HTML
/// entities (Markdown renderers pass raw HTML through), pipes and
/// newlines cannot break the table, backticks and emphasis stay literal.
pub fn md(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '|' => out.push_str("\\|"),
            '`' | '*' | '_' | '[' | ']' | '\\' | '#' => {
                out.push('\\');
                out.push(c);
            }
            '\n' | '\r' => out.push(' '),
            c if c.is_control() => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

fn symbol(status: Status) -> &'static str {
    match status {
        Status::Pass => "✔",
        Status::Partial => "◐",
        Status::Fail => "✘",
        Status::Error => "⚠",
        Status::NotApplicable => "—",
    }
}

/// Marks a cell whose values all arrived but with types, nullability,
/// names or metadata changed on the way (INFO, not a failure).
const CHANGED: &str = "≈";

/// Whether a unit shows [`CHANGED`]: passed cases arrived changed, and it
/// does not fail (a failing cell says only that it fails).
fn shows_changed(u: &Unit) -> bool {
    u.changed > 0 && matches!(u.status, Status::Pass | Status::Partial)
}

/// A unit's symbol: its status, then [`CHANGED`] when [`shows_changed`].
fn unit_symbol(u: &Unit) -> String {
    let base = symbol(u.status);
    if shows_changed(u) {
        format!("{base}{CHANGED}")
    } else {
        base.to_string()
    }
}

/// Cases that ran (not skipped).
fn ran(s: &Summary) -> u64 {
    s.total - s.skipped
}

fn unit<'a>(m: &'a Matrix, kind: UnitKind, p: Option<&str>, c: Option<&str>) -> Option<&'a Unit> {
    m.units
        .iter()
        .find(|u| u.kind == kind && u.producer.as_deref() == p && u.consumer.as_deref() == c)
}

/// The plugin's own name for a library argument, from any unit that ran it.
fn identity(m: &Matrix, role: &str, arg: &str) -> Option<String> {
    m.units.iter().find_map(|u| {
        let named = match role {
            "producer" => u.producer.as_deref() == Some(arg),
            _ => u.consumer.as_deref() == Some(arg),
        };
        if !named {
            return None;
        }
        u.plugins
            .iter()
            .find(|p| p.role == role)
            .map(|p| p.name.clone())
    })
}

fn short_summary(s: &Summary) -> String {
    let mut parts = vec![format!("{} passed of {} run", s.passed, ran(s))];
    for (n, word) in [
        (s.failed, "failed"),
        (s.errors, "errors"),
        (s.crashed, "crashed"),
        (s.timed_out, "hung"),
        (s.skipped, "skipped"),
        (s.flaky, "flaky"),
    ] {
        if n > 0 {
            parts.push(format!("{n} {word}"));
        }
    }
    parts.join(", ")
}

fn header_lines(m: &Matrix) -> Vec<String> {
    let shards: Vec<String> = m.shards.iter().map(|s| s.to_string()).collect();
    let mut lines = vec![
        format!("{} {}", m.tool.name, m.tool.version),
        format!("run {} .. {}", m.started_at, m.finished_at),
        format!(
            "data: built-in scenarios{}, {} generated (seed {})",
            m.data
                .gold
                .as_ref()
                .map(|g| format!(" + gold files {g}"))
                .unwrap_or_default(),
            m.data.cases,
            m.data.seed
        ) + &if m.data.filters.is_empty() {
            String::new()
        } else {
            format!(
                "; only cases whose ID contains {} (a smoke run, not the whole plan)",
                m.data.filters.join(" or ")
            )
        },
        format!(
            "shards: {} ({})",
            shards.join(", "),
            if m.complete {
                "complete".to_string()
            } else {
                format!(
                    "INCOMPLETE: {} of {} units missing",
                    m.plan.len() - m.units.len(),
                    m.plan.len()
                )
            }
        ),
    ];
    lines.push(format!("work time: {:.1} s", m.duration_ms as f64 / 1000.0));
    lines
}

/// `matrix.md`.
pub fn markdown(m: &Matrix) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "# Arrow C interfaces compatibility matrix\n");
    for line in header_lines(m) {
        let _ = writeln!(o, "- {}", md(&line));
    }
    let _ = writeln!(
        o,
        "\nRows produce, columns consume; the harness sits between them with all its \
         checks. ✔ everything arrived equal · ◐ some calls failed cleanly (unsupported \
         data) · ✘ data arrived different, or a crash or hang · ⚠ could not run · — no \
         common interface path · ≈ after a mark: every value arrived, but some cases' \
         types, nullability, names or metadata changed (not a failure; listed below).\n"
    );
    grid_markdown(m, &mut o);
    paths_markdown(m, &mut o);
    single_sided_markdown(m, &mut o);
    notes_markdown(m, &mut o);
    coverage_markdown(m, &mut o);
    limited_markdown(m, &mut o);
    failures_markdown(m, &mut o);
    o
}

/// `matrix.md`'s grid: a cell per pair of libraries (variants aside),
/// with its mark and passed/run cases.
fn grid_markdown(m: &Matrix, o: &mut String) {
    // The grid is of pairs: variants (certified alone) are in the
    // single-sided table.
    let grid_p: Vec<&String> = m
        .producers
        .iter()
        .filter(|p| !super::is_variant(p))
        .collect();
    let grid_c: Vec<&String> = m
        .consumers
        .iter()
        .filter(|c| !super::is_variant(c))
        .collect();
    let _ = write!(o, "| producer \\ consumer |");
    for c in &grid_c {
        let _ = write!(o, " {} |", md(c));
    }
    let _ = write!(o, "\n|---|");
    for _ in &grid_c {
        let _ = write!(o, "---|");
    }
    let _ = writeln!(o);
    for p in &grid_p {
        let _ = write!(o, "| **{}** |", md(p));
        for c in &grid_c {
            let cell = match unit(m, UnitKind::Pair, Some(p), Some(c)) {
                Some(u) => format!(
                    "{} {}/{}",
                    unit_symbol(u),
                    u.summary.passed,
                    ran(&u.summary)
                ),
                None => "not run".into(),
            };
            let _ = write!(o, " {cell} |");
        }
        let _ = writeln!(o);
    }
}

/// `matrix.md`'s "Pairs by interface path": a row per pair, a cell per
/// interface path.
fn paths_markdown(m: &Matrix, o: &mut String) {
    let _ = writeln!(o, "\n## Pairs by interface path\n");
    let _ = write!(o, "| producer | consumer |");
    for p in PATHS {
        let _ = write!(o, " {p} |");
    }
    let _ = writeln!(o, "\n|---|---|---|---|---|---|---|");
    for u in m.units.iter().filter(|u| u.kind == UnitKind::Pair) {
        let _ = write!(
            o,
            "| {} | {} |",
            md(u.producer.as_deref().unwrap_or("")),
            md(u.consumer.as_deref().unwrap_or(""))
        );
        for p in PATHS {
            let _ = write!(o, " {} |", path_cell(u, p));
        }
        let _ = writeln!(o);
    }
}

/// `matrix.md`'s "Single-sided certification": a row per library
/// certified alone, with its failing rules; then the robustness grades.
fn single_sided_markdown(m: &Matrix, o: &mut String) {
    let _ = writeln!(o, "\n## Single-sided certification\n");
    let _ = writeln!(
        o,
        "| library | role | implementation | verdict | cases | failing rules |"
    );
    let _ = writeln!(o, "|---|---|---|---|---|---|");
    for u in m.units.iter().filter(|u| u.kind != UnitKind::Pair) {
        let (role, arg) = role_arg(u);
        let rules: Vec<String> = u
            .failing_rules
            .iter()
            .map(|r| format!("{} ({}, {}/{})", r.rule, r.level, r.failed, r.checked))
            .collect();
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} {} | {} | {} |",
            md(arg),
            role,
            md(&identity(m, role, arg).unwrap_or_default()),
            symbol(u.status),
            u.status.word(),
            md(&short_summary(&u.summary)),
            md(&if u.status == Status::Error {
                u.message.clone().unwrap_or_default()
            } else {
                rules.join("; ")
            })
        );
    }

    robustness_markdown(m, o);
}

/// `matrix.md`'s "What the adapters write", when an adapter says
/// anything, and "Values equal, types changed", when a pair's types
/// changed.
fn notes_markdown(m: &Matrix, o: &mut String) {
    let notes = adapter_notes(m);
    if !notes.is_empty() {
        let _ = writeln!(o, "\n## What the adapters write\n");
        for (arg, adapter) in notes {
            let _ = writeln!(o, "- **{}**: {}", md(arg), md(adapter));
        }
    }

    let changed = changed_units(m);
    if !changed.is_empty() {
        let _ = writeln!(
            o,
            "\n## Values equal, types changed\n\nPairs whose passed cases arrived with every value \
             equal but the types, nullability, names or metadata changed (what the consumer \
             certification reports as `consumer.read.types` and `consumer.read.metadata`, INFO).\n"
        );
        for u in changed {
            let _ = writeln!(
                o,
                "### {} ({} of {} passed cases)\n",
                md(&u.id),
                u.changed,
                u.summary.passed
            );
            for c in &u.changed_cases {
                let _ = writeln!(
                    o,
                    "- case {}: {}",
                    md(&c.id),
                    md(&clip(&c.differences.join("; "), 300))
                );
            }
            let _ = writeln!(o);
        }
    }
}

/// `matrix.md`'s "Coverage", when a unit reached anything.
fn coverage_markdown(m: &Matrix, o: &mut String) {
    let covered: Vec<&Unit> = m.units.iter().filter(|u| !u.coverage.is_empty()).collect();
    if !covered.is_empty() {
        let _ = writeln!(
            o,
            "\n## Coverage\n\nType families of the generator per path, as exercised / refused by the \
             library (its words are in the unit's report) / not reached. A path a unit reached \
             nothing of is left out.\n"
        );
        for u in &covered {
            let paths: Vec<String> = u
                .coverage
                .iter()
                .map(|(p, c)| format!("{} {}/{}/{}", md(p), c.exercised, c.refused, c.not_reached))
                .collect();
            let _ = writeln!(o, "- {}: {}", md(&u.id), paths.join("; "));
        }
    }
}

/// `matrix.md`'s "Limitations", "Flaky" and "Not as expected", each when
/// a unit has some.
fn limited_markdown(m: &Matrix, o: &mut String) {
    let limited = m.limited_units();
    if !limited.is_empty() {
        let _ = writeln!(
            o,
            "\n## Limitations\n\nCases a consumer declined cleanly, as the spec permits (\"Consumers MAY \
             decide not to support all data types\", non-0-offset arrays, unaligned memory): not \
             failures; each unit's report lists them with the library's own message.\n"
        );
        for u in &limited {
            let _ = writeln!(o, "- {}: {} cases", md(&u.id), u.limitation_cases);
        }
    }
    let flaky: Vec<&Unit> = m
        .units
        .iter()
        .filter(|u| !u.flaky_cases.is_empty())
        .collect();
    if !flaky.is_empty() {
        let _ = writeln!(
            o,
            "\n## Flaky\n\nCases whose verdict changed when run again (`--repeat`), with every \
             verdict seen; the first run's counts.\n"
        );
        for u in &flaky {
            let _ = writeln!(
                o,
                "- {}: {}",
                md(&u.id),
                md(&clip(&u.flaky_cases.join("; "), 600))
            );
        }
    }
    let unexpected = m.unexpected_units();
    if !unexpected.is_empty() {
        let _ = writeln!(o, "\n## Not as expected\n");
        for u in &unexpected {
            let _ = writeln!(
                o,
                "- {} ({}): {}",
                md(&u.id),
                md(u.expectations.as_deref().unwrap_or("")),
                md(&clip(&u.unexpected.join("; "), 400))
            );
        }
    }
}

/// `matrix.md`'s "Failures": per failing unit, its rules, its cases and
/// how to rerun it.
fn failures_markdown(m: &Matrix, o: &mut String) {
    let failing = failing_units(m);
    if !failing.is_empty() {
        let _ = writeln!(o, "\n## Failures\n");
        for u in failing {
            let _ = writeln!(o, "### {} ({})\n", md(&u.id), u.status.word());
            if let Some(msg) = &u.message {
                let _ = writeln!(o, "{}\n", md(msg));
            }
            for r in &u.failing_rules {
                let _ = writeln!(
                    o,
                    "- `{}` {} failed in {} of {} cases{}",
                    r.rule.replace('`', "'"),
                    r.level,
                    r.failed,
                    r.checked,
                    r.evidence
                        .as_ref()
                        .map(|e| format!(": {}", md(&clip(e, 300))))
                        .unwrap_or_default()
                );
            }
            for c in &u.failing_cases {
                let _ = writeln!(
                    o,
                    "- case {} ({:?}): {}",
                    md(&c.id),
                    c.verdict,
                    md(&clip(
                        &c.differences
                            .first()
                            .cloned()
                            .or_else(|| c.message.clone())
                            .unwrap_or_default(),
                        300
                    ))
                );
            }
            if let Some(r) = &u.report {
                let _ = writeln!(o, "\nreport: {}; rerun: {}\n", md(r), md(&u.command));
            }
        }
    }
}

/// Each library's adapter note once (a library in both roles has one).
fn adapter_notes(m: &Matrix) -> Vec<(&str, &str)> {
    let mut notes: Vec<(&str, &str)> = Vec::new();
    for l in m.libraries.iter().filter(|l| !l.adapter.is_empty()) {
        let note = (l.arg.as_str(), l.adapter.as_str());
        if !notes.contains(&note) {
            notes.push(note);
        }
    }
    notes
}

/// The pairs the "Values equal, types changed" section lists.
fn changed_units(m: &Matrix) -> Vec<&Unit> {
    m.units.iter().filter(|u| shows_changed(u)).collect()
}

/// The units the Failures section explains.
fn failing_units(m: &Matrix) -> Vec<&Unit> {
    m.units
        .iter()
        .filter(|u| matches!(u.status, Status::Fail | Status::Partial | Status::Error))
        .collect()
}

fn role_arg(u: &Unit) -> (&'static str, &str) {
    match u.kind {
        UnitKind::CertifyProducer => ("producer", u.producer.as_deref().unwrap_or("")),
        _ => ("consumer", u.consumer.as_deref().unwrap_or("")),
    }
}

fn path_cell(u: &Unit, path: &str) -> String {
    match u.paths.get(path) {
        None => "—".into(),
        Some(s) if ran(s) == 0 => "—".into(),
        Some(s) => {
            let mark = if s.failed + s.crashed + s.timed_out > 0 {
                "✘"
            } else if s.errors > 0 {
                "◐"
            } else {
                "✔"
            };
            let changed = if u.changed_paths.get(path).copied().unwrap_or(0) > 0 && mark != "✘" {
                CHANGED
            } else {
                ""
            };
            format!("{mark}{changed} {}/{}", s.passed, ran(s))
        }
    }
}

fn clip(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut cut = max;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}…", &text[..cut])
}

const CSS: &str = "
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; }
table { border-collapse: collapse; margin: .5em 0; }
th, td { border: 1px solid #ccc; padding: .3em .5em; vertical-align: top; text-align: left; }
th { background: #f3f3f3; }
td.cell { min-width: 9em; }
.pass { background: #dff5e1; } .partial { background: #fff4cf; }
.fail { background: #fbdada; } .error { background: #eadcf7; } .na { background: #eee; color: #777; }
.paths { font-size: 11px; color: #444; white-space: nowrap; }
.ev { font-family: ui-monospace, monospace; font-size: 12px; white-space: pre-wrap; }
ul.meta { color: #555; }
";

fn class(status: Status) -> &'static str {
    match status {
        Status::Pass => "pass",
        Status::Partial => "partial",
        Status::Fail => "fail",
        Status::Error => "error",
        Status::NotApplicable => "na",
    }
}

/// `matrix.html`: self-contained (no network resources, no scripts).
pub fn page(m: &Matrix) -> String {
    let mut o = String::new();
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\
         <title>arrowcert compatibility matrix</title><style>{CSS}</style></head><body>\n"
    );
    let _ = writeln!(
        o,
        "<h1>Arrow C interfaces compatibility matrix</h1>\n<ul class=\"meta\">"
    );
    for line in header_lines(m) {
        let _ = writeln!(o, "<li>{}</li>", html(&line));
    }
    let _ = writeln!(
        o,
        "</ul>\n<p>Rows produce, columns consume; the harness sits between them with all its checks. \
         <span class=\"pass\">✔ everything arrived equal</span> · <span class=\"partial\">◐ some calls \
         failed cleanly</span> · <span class=\"fail\">✘ data arrived different, or a crash or hang</span> · \
         <span class=\"error\">⚠ could not run</span> · <span class=\"na\">— no common interface path</span> · \
         ≈ after a mark: every value arrived, but some cases' types, nullability, names or metadata \
         changed (not a failure; listed below). Each cell lists passed/run cases per interface path.</p>"
    );
    grid_html(m, &mut o);
    single_sided_html(m, &mut o);
    notes_html(m, &mut o);
    coverage_html(m, &mut o);
    limited_html(m, &mut o);
    failures_html(m, &mut o);
    let _ = writeln!(o, "</body></html>");
    o
}

/// `matrix.html`'s grid: a cell per pair of libraries (variants aside),
/// with its status, passed/run cases and a line per interface path.
fn grid_html(m: &Matrix, o: &mut String) {
    let _ = writeln!(
        o,
        "<table id=\"matrix\"><thead><tr><th>producer \\ consumer</th>"
    );
    // Variants (certified alone) are in the single-sided table.
    let grid_p: Vec<&String> = m
        .producers
        .iter()
        .filter(|p| !super::is_variant(p))
        .collect();
    let grid_c: Vec<&String> = m
        .consumers
        .iter()
        .filter(|c| !super::is_variant(c))
        .collect();
    for c in &grid_c {
        let _ = write!(o, "<th>{}</th>", html(c));
    }
    let _ = writeln!(o, "</tr></thead><tbody>");
    for p in &grid_p {
        let _ = write!(o, "<tr><th>{}</th>", html(p));
        for c in &grid_c {
            let pair = format!("{p} -> {c}");
            match unit(m, UnitKind::Pair, Some(p), Some(c)) {
                Some(u) => {
                    let _ = write!(
                        o,
                        "<td class=\"cell {}\" data-pair=\"{}\" data-status=\"{}\" title=\"{}\">\
                         <b>{} {}/{}</b><div class=\"paths\">",
                        class(u.status),
                        html(&pair),
                        u.status.word(),
                        html(u.message.as_deref().unwrap_or("")),
                        unit_symbol(u),
                        u.summary.passed,
                        ran(&u.summary)
                    );
                    for path in PATHS {
                        let _ = write!(o, "{} {}<br>", path, html(&path_cell(u, path)));
                    }
                    let _ = write!(o, "</div></td>");
                }
                None => {
                    let _ = write!(
                        o,
                        "<td class=\"cell na\" data-pair=\"{}\" data-status=\"not-run\">not run</td>",
                        html(&pair)
                    );
                }
            }
        }
        let _ = writeln!(o, "</tr>");
    }
    let _ = writeln!(o, "</tbody></table>");
}

/// `matrix.html`'s "Single-sided certification": a row per library
/// certified alone, with its failing rules; then the robustness grades.
fn single_sided_html(m: &Matrix, o: &mut String) {
    let _ = writeln!(
        o,
        "<h2>Single-sided certification</h2>\n<table id=\"certification\"><thead><tr><th>library</th>\
         <th>role</th><th>implementation</th><th>verdict</th><th>cases</th><th>failing rules</th></tr></thead><tbody>"
    );
    for u in m.units.iter().filter(|u| u.kind != UnitKind::Pair) {
        let (role, arg) = role_arg(u);
        let _ = write!(
            o,
            "<tr data-unit=\"{}\"><td>{}</td><td>{}</td><td>{}</td><td class=\"{}\">{} {}</td><td>{}</td><td>",
            html(&u.id),
            html(arg),
            role,
            html(&identity(m, role, arg).unwrap_or_default()),
            class(u.status),
            symbol(u.status),
            u.status.word(),
            html(&short_summary(&u.summary)),
        );
        if u.status == Status::Error {
            let _ = write!(o, "{}", html(u.message.as_deref().unwrap_or("")));
        }
        for r in &u.failing_rules {
            let _ = write!(
                o,
                "<div><code>{}</code> {} ({}/{})</div>",
                html(&r.rule),
                html(&r.level),
                r.failed,
                r.checked
            );
        }
        let _ = writeln!(o, "</td></tr>");
    }
    let _ = writeln!(o, "</tbody></table>");
    robustness_html(m, o);
}

/// `matrix.html`'s "What the adapters write", when an adapter says
/// anything, and "Values equal, types changed", when a pair's types
/// changed.
fn notes_html(m: &Matrix, o: &mut String) {
    let notes = adapter_notes(m);
    if !notes.is_empty() {
        let _ = writeln!(o, "<h2>What the adapters write</h2><ul>");
        for (arg, adapter) in notes {
            let _ = writeln!(o, "<li><b>{}</b>: {}</li>", html(arg), html(adapter));
        }
        let _ = writeln!(o, "</ul>");
    }

    let changed = changed_units(m);
    if !changed.is_empty() {
        let _ = writeln!(
            o,
            "<h2 id=\"changed\">Values equal, types changed</h2>\n<p>Pairs whose passed cases arrived \
             with every value equal but the types, nullability, names or metadata changed (what the \
             consumer certification reports as <code>consumer.read.types</code> and \
             <code>consumer.read.metadata</code>, INFO).</p>"
        );
        for u in changed {
            let _ = writeln!(
                o,
                "<h3 id=\"changed-{}\">{} ({} of {} passed cases)</h3>\n<ul>",
                html(&u.id),
                html(&u.id),
                u.changed,
                u.summary.passed
            );
            for c in &u.changed_cases {
                let _ = writeln!(
                    o,
                    "<li>case <code>{}</code>: <div class=\"ev\">{}</div></li>",
                    html(&c.id),
                    html(&clip(&c.differences.join("\n"), 600))
                );
            }
            let _ = writeln!(o, "</ul>");
        }
    }
}

/// `matrix.html`'s "Coverage", when a unit reached anything.
fn coverage_html(m: &Matrix, o: &mut String) {
    let covered: Vec<&Unit> = m.units.iter().filter(|u| !u.coverage.is_empty()).collect();
    if !covered.is_empty() {
        let _ = writeln!(
            o,
            "<h2 id=\"coverage\">Coverage</h2>\n<p>Type families of the generator per path: \
             exercised / refused / not reached.</p><ul>"
        );
        for u in &covered {
            let paths: Vec<String> = u
                .coverage
                .iter()
                .map(|(p, c)| {
                    format!(
                        "{} {}/{}/{}",
                        html(p),
                        c.exercised,
                        c.refused,
                        c.not_reached
                    )
                })
                .collect();
            let _ = writeln!(o, "<li>{}: {}</li>", html(&u.id), paths.join("; "));
        }
        let _ = writeln!(o, "</ul>");
    }
}

/// `matrix.html`'s "Limitations", "Flaky" and "Not as expected", each
/// when a unit has some.
fn limited_html(m: &Matrix, o: &mut String) {
    let limited = m.limited_units();
    if !limited.is_empty() {
        let _ = writeln!(
            o,
            "<h2 id=\"limitations\">Limitations</h2>\n<p>Cases a consumer declined cleanly, as the spec \
             permits: not failures.</p><ul>"
        );
        for u in &limited {
            let _ = writeln!(o, "<li>{}: {} cases</li>", html(&u.id), u.limitation_cases);
        }
        let _ = writeln!(o, "</ul>");
    }
    let flaky: Vec<&Unit> = m
        .units
        .iter()
        .filter(|u| !u.flaky_cases.is_empty())
        .collect();
    if !flaky.is_empty() {
        let _ = writeln!(
            o,
            "<h2 id=\"flaky\">Flaky</h2>\n<p>Cases whose verdict changed when run again \
             (<code>--repeat</code>), with every verdict seen; the first run's counts.</p><ul>"
        );
        for u in &flaky {
            let _ = writeln!(
                o,
                "<li>{}: {}</li>",
                html(&u.id),
                html(&clip(&u.flaky_cases.join("; "), 600))
            );
        }
        let _ = writeln!(o, "</ul>");
    }
    let unexpected = m.unexpected_units();
    if !unexpected.is_empty() {
        let _ = writeln!(o, "<h2 id=\"unexpected\">Not as expected</h2><ul>");
        for u in &unexpected {
            let _ = writeln!(
                o,
                "<li>{} ({}): {}</li>",
                html(&u.id),
                html(u.expectations.as_deref().unwrap_or("")),
                html(&clip(&u.unexpected.join("; "), 400))
            );
        }
        let _ = writeln!(o, "</ul>");
    }
}

/// `matrix.html`'s "Failures": per failing unit, its rules, its cases
/// and how to rerun it.
fn failures_html(m: &Matrix, o: &mut String) {
    let failing = failing_units(m);
    if !failing.is_empty() {
        let _ = writeln!(o, "<h2>Failures</h2>");
        for u in failing {
            let _ = writeln!(
                o,
                "<h3 id=\"{}\">{} <span class=\"{}\">{}</span></h3>",
                html(&u.id),
                html(&u.id),
                class(u.status),
                u.status.word()
            );
            if let Some(msg) = &u.message {
                let _ = writeln!(o, "<p>{}</p>", html(msg));
            }
            let _ = writeln!(o, "<ul>");
            for r in &u.failing_rules {
                let _ = writeln!(
                    o,
                    "<li><code>{}</code> {}: failed in {} of {} cases{}</li>",
                    html(&r.rule),
                    html(&r.level),
                    r.failed,
                    r.checked,
                    r.evidence
                        .as_ref()
                        .map(|e| format!("<div class=\"ev\">{}</div>", html(&clip(e, 600))))
                        .unwrap_or_default()
                );
            }
            for c in &u.failing_cases {
                let _ = writeln!(
                    o,
                    "<li>case <code>{}</code> ({:?}): <div class=\"ev\">{}</div></li>",
                    html(&c.id),
                    c.verdict,
                    html(&clip(
                        &c.message
                            .iter()
                            .chain(c.differences.iter())
                            .cloned()
                            .collect::<Vec<_>>()
                            .join("\n"),
                        600
                    ))
                );
            }
            let _ = writeln!(o, "</ul>");
            if let Some(r) = &u.report {
                let _ = writeln!(
                    o,
                    "<p>report <code>{}</code>; rerun: <code>{}</code></p>",
                    html(r),
                    html(&u.command)
                );
            }
        }
    }
}

/// Consumers with a robustness grade (`matrix --malformed`).
fn graded(m: &Matrix) -> Vec<(&Unit, &super::UnitRobustness)> {
    m.units
        .iter()
        .filter(|u| u.kind == UnitKind::CertifyConsumer)
        .filter_map(|u| u.robustness.as_ref().map(|r| (u, r)))
        .collect()
}

const ROBUSTNESS_WORDS: &str = "What each consumer did with the structures the producer \
     mutants break (`certify --malformed`, docs/MALFORMED.md): refused cleanly, accepted, left \
     unreleased, crashed or hung. Apart from the rules: never a verdict, never a cell's status. \
     Grade over the cases a consumer can see: A refused or read every one, B accepted an invalid \
     structure as other values or left one unreleased, C hung, F crashed.";

fn robustness_markdown(m: &Matrix, o: &mut String) {
    let rows = graded(m);
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "\n## Robustness (--malformed)\n\n{}\n",
        md(ROBUSTNESS_WORDS)
    );
    let _ = writeln!(
        o,
        "| consumer | grade | refused | accepted (data) | accepted (other) | unreleased | crashed | hung | not run |"
    );
    let _ = writeln!(o, "|---|---|---|---|---|---|---|---|---|");
    for (u, r) in rows {
        let c = &r.counts;
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            md(role_arg(u).1),
            md(&r.grade),
            c.refused,
            c.accepted_equal,
            c.accepted_differs,
            c.unreleased,
            c.crashed,
            c.hung,
            c.not_run
        );
    }
}

fn robustness_html(m: &Matrix, o: &mut String) {
    let rows = graded(m);
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "<h2>Robustness (--malformed)</h2>\n<p>{}</p>\n<table id=\"robustness\"><thead><tr>\
         <th>consumer</th><th>grade</th><th>refused</th><th>accepted (data)</th>\
         <th>accepted (other)</th><th>unreleased</th><th>crashed</th><th>hung</th><th>not run</th>\
         </tr></thead><tbody>",
        html(ROBUSTNESS_WORDS)
    );
    for (u, r) in rows {
        let c = &r.counts;
        let _ = writeln!(
            o,
            "<tr data-unit=\"{}\" title=\"{}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            html(&u.id),
            html(&r.summary),
            html(role_arg(u).1),
            html(&r.grade),
            c.refused,
            c.accepted_equal,
            c.accepted_differs,
            c.unreleased,
            c.crashed,
            c.hung,
            c.not_run
        );
    }
    let _ = writeln!(o, "</tbody></table>");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_escapes_markup_and_quotes() {
        assert_eq!(
            html("<script>alert('x')</script> & \"q\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;"
        );
        assert_eq!(html("bell\u{7}"), "bell\\u{7}");
    }

    fn consumer_unit(robustness: Option<super::super::UnitRobustness>) -> Matrix {
        let unit: Unit = serde_json::from_value(serde_json::json!({
            "id": "certify/consumer/x", "kind": "certify-consumer", "producer": null,
            "consumer": "x", "status": "pass", "message": null,
            "summary": crate::report::Summary::default(), "paths": {},
            "failing_rules": [], "failing_cases": [], "plugins": [], "report": null,
            "command": "arrowcert certify --consumer x", "duration_ms": 1
        }))
        .unwrap();
        Matrix {
            matrix_version: 1,
            tool: Default::default(),
            started_at: String::new(),
            finished_at: String::new(),
            duration_ms: 0,
            producers: Vec::new(),
            consumers: vec!["x".into()],
            data: super::super::Data {
                gold: None,
                cases: 0,
                seed: 0,
                filters: Vec::new(),
            },
            plan: Vec::new(),
            shards: Vec::new(),
            libraries: Vec::new(),
            units: vec![Unit { robustness, ..unit }],
            complete: true,
        }
    }

    #[test]
    fn robustness_is_a_section_of_its_own_only_with_malformed() {
        let plain = consumer_unit(None);
        assert!(!markdown(&plain).contains("Robustness"));
        assert!(!page(&plain).contains("Robustness"));
        let graded = consumer_unit(Some(super::super::UnitRobustness {
            grade: "F".into(),
            summary: "1 of 2 refused cleanly".into(),
            counts: crate::report::robustness::RobustnessCounts {
                cases: 2,
                refused: 1,
                crashed: 1,
                graded: 2,
                ..Default::default()
            },
        }));
        let md = markdown(&graded);
        assert!(md.contains("## Robustness (--malformed)"), "{md}");
        assert!(md.contains("| x | F | 1 | 0 | 0 | 0 | 1 | 0 | 0 |"), "{md}");
        assert!(page(&graded).contains("<table id=\"robustness\">"));
    }

    #[test]
    fn markdown_cells_cannot_break_the_table_or_inject_html() {
        let e = md("a|b\n<img src=x onerror=alert(1)> *x* `y`");
        assert!(!e.contains('<') && !e.contains('\n'));
        assert!(e.contains("a\\|b"));
        assert!(e.contains("\\*x\\*") && e.contains("\\`y\\`"));
    }
}

//! The rule catalogue: every requirement the harness judges, with a stable ID,
//! the spec's own level for it, the side it judges, the spec sentence it
//! comes from (quoted verbatim) and how the harness observes it.
//!
//! `shared/RULES.md` is where the catalogue started; the tests below keep
//! every ID, level and side of it here, every quote a real sentence of the
//! spec texts under its section, and `docs/RULES.md` equal to [`markdown`]
//! (regenerate with `ARROWCERT_BLESS=1 cargo test -p arrowcert --lib rules`).

#![forbid(unsafe_code)]

pub mod cai;
mod catalogue;
pub mod dlpack;

use std::fmt;

pub use catalogue::{LevelChange, EXCEPTIONS, LEVEL_CHANGES, RULES};

/// How strongly the spec requires a rule: its own word for the quoted
/// sentence, never stronger. `Info` is behaviour the spec leaves open.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "UPPERCASE")]
pub enum Level {
    Must,
    Should,
    Info,
}

impl Level {
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Must => "MUST",
            Level::Should => "SHOULD",
            Level::Info => "INFO",
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// The RFC 2119 word of a spec sentence (the spec's "Mandatory." member
/// marker counts as REQUIRED, i.e. MUST): the strongest one it uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Modal {
    /// No RFC 2119 word: the sentence describes; a rule on it is inferred.
    None,
    /// MAY, OPTIONAL: a permission.
    May,
    /// SHOULD, SHOULD NOT, RECOMMENDED.
    Should,
    /// MUST, MUST NOT, REQUIRED, SHALL, "Mandatory."
    Must,
}

impl Modal {
    pub fn as_str(self) -> &'static str {
        match self {
            Modal::None => "none",
            Modal::May => "MAY",
            Modal::Should => "SHOULD",
            Modal::Must => "MUST",
        }
    }

    /// The strongest level a rule resting on a sentence with this word can
    /// have without being inferred.
    pub fn max_level(self) -> Level {
        match self {
            Modal::Must => Level::Must,
            Modal::Should => Level::Should,
            Modal::May | Modal::None => Level::Info,
        }
    }
}

/// The strongest RFC 2119 word of `sentence` (case-insensitive, as the
/// spec writes "must" and "MUST" alike). "not required" (as in "It is
/// recommended, but not required") is no requirement.
pub fn modal(sentence: &str) -> Modal {
    let lower = sentence.to_lowercase().replace("not required", "");
    let words: Vec<&str> = lower
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    let has = |w: &str| words.contains(&w);
    if has("must") || has("required") || has("shall") || has("mandatory") {
        Modal::Must
    } else if has("should") || has("recommended") {
        Modal::Should
    } else if has("may") || has("optional") {
        Modal::May
    } else {
        Modal::None
    }
}

impl Level {
    /// Order of strength: INFO < SHOULD < MUST.
    fn rank(self) -> u8 {
        match self {
            Level::Info => 0,
            Level::Should => 1,
            Level::Must => 2,
        }
    }
}

/// A rule whose level is stronger than its quote's word would give, kept
/// so on purpose: each with the reason, shown by `explain` and RULES.md.
#[derive(Debug, Clone, Copy)]
pub struct Exception {
    pub id: &'static str,
    pub reason: &'static str,
}

/// Why a rule's level is what it is, in one line: the word of its quote,
/// inferred, or a justified exception.
pub fn level_basis(rule: &Rule) -> String {
    let word = modal(rule.quote);
    if let Some(from) = rule.inferred {
        return format!(
            "inferred (no sentence states it; at most SHOULD): {from}; the quote's word is {}",
            word.as_str()
        );
    }
    if let Some(e) = catalogue::EXCEPTIONS.iter().find(|e| e.id == rule.id) {
        return format!(
            "{}, the quote's word being {}: {}",
            rule.level,
            word.as_str(),
            e.reason
        );
    }
    format!("{} (the quote's word: {})", rule.level, word.as_str())
}

/// Whether `rule`'s level is one its quote supports: no stronger than the
/// quote's word, at most SHOULD when inferred, or a listed exception.
pub fn level_supported(rule: &Rule) -> Result<(), String> {
    if rule.inferred.is_some() {
        return if rule.level.rank() <= Level::Should.rank() {
            Ok(())
        } else {
            Err(format!("{}: inferred but {}", rule.id, rule.level))
        };
    }
    if rule.level.rank() <= modal(rule.quote).max_level().rank() {
        return Ok(());
    }
    if catalogue::EXCEPTIONS.iter().any(|e| e.id == rule.id) {
        return Ok(());
    }
    Err(format!(
        "{}: level {} but its quote's word is {} (quote a sentence that says so, mark it inferred, or justify an exception)",
        rule.id,
        rule.level,
        modal(rule.quote).as_str()
    ))
}

/// RST text reduced for comparison: roles (`:c:member:`x``, `:ref:`text
/// <target>``) replaced by their text, backticks and `*` emphasis dropped,
/// whitespace runs collapsed to one space.
pub fn normalise(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut roles_done = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        if chars[i] == ':' {
            let mut j = i + 1;
            while j < chars.len() && (chars[j].is_ascii_lowercase() || chars[j] == ':') {
                j += 1;
            }
            let is_role = j >= i + 3
                && chars[j - 1] == ':'
                && chars.get(j) == Some(&'`')
                && chars.get(j + 1) != Some(&'`');
            if is_role {
                if let Some(len) = chars[j + 1..].iter().position(|&c| c == '`') {
                    let content: String = chars[j + 1..j + 1 + len].iter().collect();
                    let shown = match (content.rfind(" <"), content.ends_with('>')) {
                        (Some(at), true) => &content[..at],
                        _ => &content[..],
                    };
                    roles_done.push_str(shown);
                    i = j + 1 + len + 1;
                    continue;
                }
            }
        }
        roles_done.push(chars[i]);
        i += 1;
    }
    roles_done
        .replace(['`', '*'], "")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// Which side of the interface a rule judges.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    /// P: the library under test exports, the harness consumes.
    Producer,
    /// C: the harness exports, the library under test consumes.
    Consumer,
    /// P/C: judged on both sides.
    Both,
}

impl Side {
    /// The letter(s) RULES.md uses: `P`, `C`, `P/C`.
    pub fn letter(self) -> &'static str {
        match self {
            Side::Producer => "P",
            Side::Consumer => "C",
            Side::Both => "P/C",
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Side::Producer => "producer",
            Side::Consumer => "consumer",
            Side::Both => "both",
        }
    }
}

impl fmt::Display for Side {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// One rule of the catalogue.
#[derive(Debug, Clone, Copy)]
pub struct Rule {
    /// Stable, hierarchical: `area.subject.property`, e.g. `array.null-count`.
    pub id: &'static str,
    pub level: Level,
    pub side: Side,
    /// The first segment of `id`: schema, array, device, stream, async, consumer.
    pub area: &'static str,
    /// One line: what the rule requires.
    pub summary: &'static str,
    /// The spec text the quote comes from, e.g. `CDataInterface.rst`.
    pub spec_file: &'static str,
    /// The heading of the RST section the quote is under.
    pub section: &'static str,
    /// A sentence of `spec_file`, verbatim but for RST markup and line breaks.
    pub quote: &'static str,
    /// How the harness decides it: what it does and what it observes.
    pub observation: &'static str,
    /// `Some(from what)` when the spec implies the requirement but no
    /// sentence states it: such a rule is at most SHOULD, and `explain`
    /// says it is inferred and from what.
    pub inferred: Option<&'static str>,
}

/// Display titles of the areas, in catalogue order.
const AREAS: &[(&str, &str)] = &[
    ("schema", "Schema (ArrowSchema)"),
    ("array", "Array (ArrowArray)"),
    ("device", "Device array and device stream"),
    (
        "stream",
        "Streams (ArrowArrayStream, ArrowDeviceArrayStream)",
    ),
    ("async", "Async device stream"),
    ("consumer", "Consumers (the harness is the producer)"),
];

fn area_title(area: &str) -> &str {
    AREAS
        .iter()
        .find(|(a, _)| *a == area)
        .map_or(area, |(_, t)| t)
}

/// The rule with this exact ID.
/// Rules whose verdict on a library can depend on how its threads happen
/// to be scheduled, with why: reports label them (`timing` in a rule's
/// summary), so that a verdict that differs between two runs of the same
/// seed is read as what it is. Every other verdict is the same for the
/// same seed, run after run (`just determinism`).
pub static TIMING_DEPENDENT: &[(&str, &str)] = &[
    ("async.callbacks.serial", "an overlap is seen only when two callbacks happen to run at the same time (each holds briefly to widen the window)"),
    ("async.callbacks.serialized", "an overlap is seen only when two callbacks happen to run at the same time"),
    ("async.backpressure", "a task delivered ahead of its credit is seen only if the producer's thread runs ahead of the harness's next request"),
    ("async.cancel.no-error", "cancel races with the producer's own thread on the :thread and :race schedules"),
    ("async.cancel.error-after", "cancel races with the producer's own thread on the :thread and :race schedules"),
    ("async.cancel.idempotent", "the two cancels of the :twice and :race schedules race with the producer's thread"),
    ("async.cancel.request-nop", "a request after cancel races with the producer's thread"),
    ("async.release.last", "a release that never comes is judged at the case's deadline"),
    ("async.request.invalid", "the answer to an invalid request is awaited until the case's deadline"),
    ("consumer.async.request", "a stall is judged after 2 s without a credit while batches remain"),
    ("consumer.async.producer-lifetime", "a call after the handler's release is seen only if it comes before the case is judged"),
    ("consumer.async.after-cancel", "the consumer's cancel is awaited for 2 s"),
];

/// Why the verdict of rule `id` may depend on thread timing, if it may.
pub fn timing_dependent(id: &str) -> Option<&'static str> {
    TIMING_DEPENDENT
        .iter()
        .find(|(r, _)| *r == id)
        .map(|(_, why)| *why)
}

/// A rule ID the compiler checked: `crate::rule!("array.release.frees")`
/// is that string, and does not compile when no rule of the catalogue
/// ([`all`]: the Arrow, DLPack and CAI rules) has the ID. Every check site
/// names its rule this way (`tests/rule_ids.rs` fails on a bare rule-ID
/// literal outside `rules/`), so an unknown rule cannot be recorded.
#[macro_export]
macro_rules! rule {
    ($id:literal) => {{
        const _: () = assert!(
            $crate::rules::known($id),
            concat!("no rule `", $id, "` in the catalogue")
        );
        $id
    }};
}

/// Whether some rule of the catalogue has the ID `id` (at compile time:
/// [`rule!`](crate::rule)).
pub const fn known(id: &str) -> bool {
    const fn same(a: &str, b: &str) -> bool {
        let (a, b) = (a.as_bytes(), b.as_bytes());
        if a.len() != b.len() {
            return false;
        }
        let mut i = 0;
        while i < a.len() {
            if a[i] != b[i] {
                return false;
            }
            i += 1;
        }
        true
    }
    const fn any(rules: &[Rule], id: &str) -> bool {
        let mut i = 0;
        while i < rules.len() {
            if same(rules[i].id, id) {
                return true;
            }
            i += 1;
        }
        false
    }
    any(RULES, id) || any(dlpack::DLPACK_RULES, id) || any(cai::CAI_RULES, id)
}

pub fn find(id: &str) -> Option<&'static Rule> {
    all().find(|r| r.id == id)
}

/// Every rule: the Arrow catalogue, then the DLPack rules
/// ([`dlpack::DLPACK_RULES`], `certify --dlpack`), then the CUDA Array
/// Interface's ([`cai::CAI_RULES`], `certify --cai`).
pub fn all() -> impl Iterator<Item = &'static Rule> {
    RULES
        .iter()
        .chain(dlpack::DLPACK_RULES.iter())
        .chain(cai::CAI_RULES.iter())
}

/// The rule catalogue's version, `<count>-<hash>`: how many rules
/// [`all`] has, and the first 12 hex digits of the SHA-256 of their
/// `id level side` lines, sorted. It changes exactly when a rule is added,
/// removed or renamed, or its level or side changes (README,
/// "Stability"); a reworded quote or observation leaves it alone.
pub fn catalogue_version() -> String {
    static VERSION: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    VERSION
        .get_or_init(|| version_of(all().map(|r| (r.id, r.level, r.side))))
        .clone()
}

/// [`catalogue_version`] of any list of rules.
fn version_of<'a>(rules: impl Iterator<Item = (&'a str, Level, Side)>) -> String {
    use sha2::{Digest, Sha256};
    let mut lines: Vec<String> = rules
        .map(|(id, level, side)| format!("{id} {} {}\n", level.as_str(), side.as_str()))
        .collect();
    lines.sort();
    let digest = Sha256::digest(lines.concat().as_bytes());
    let hex: String = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
    format!("{}-{hex}", lines.len())
}

/// True when `id` is a MUST rule of the catalogue.
pub fn is_must(id: &str) -> bool {
    find(id).is_some_and(|r| r.level == Level::Must)
}

/// Rules whose id matches a pattern: exact id, or a prefix ending in `*`
/// ("array.*", "array.release.*", "*").
pub fn matching(pattern: &str) -> Vec<&'static Rule> {
    match pattern.strip_suffix('*') {
        Some(prefix) => all().filter(|r| r.id.starts_with(prefix)).collect(),
        None => all().filter(|r| r.id == pattern).collect(),
    }
}

/// The areas in catalogue order, each with its rules.
fn by_area() -> Vec<(&'static str, Vec<&'static Rule>)> {
    let mut out: Vec<(&'static str, Vec<&'static Rule>)> = Vec::new();
    for rule in RULES {
        match out.iter_mut().find(|(a, _)| *a == rule.area) {
            Some((_, rules)) => rules.push(rule),
            None => out.push((rule.area, vec![rule])),
        }
    }
    out
}

/// Greedy word wrap of `text` to `width` columns, each line prefixed by `indent`.
fn wrap(text: &str, indent: &str, width: usize) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && indent.len() + line.len() + 1 + word.len() > width {
            out.push_str(indent);
            out.push_str(&line);
            out.push('\n');
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        out.push_str(indent);
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// The text `arrowcert explain ID` prints: id, level, side, summary, spec file
/// and section, the quote (indented), the observation.
pub fn explain(rule: &Rule) -> String {
    let mut out = format!("{}  {}  {}\n", rule.id, rule.level, rule.side);
    out.push_str(&wrap(rule.summary, "", 78));
    out.push_str(&format!(
        "\nSpec: {}, section \"{}\":\n",
        rule.spec_file, rule.section
    ));
    out.push_str(&wrap(rule.quote, "    ", 78));
    out.push('\n');
    out.push_str(&wrap(&format!("Level: {}", level_basis(rule)), "", 78));
    out.push_str("How arrowcert decides:\n");
    out.push_str(&wrap(rule.observation, "    ", 78));
    if let Some(change) = LEVEL_CHANGES.iter().find(|c| c.id == rule.id) {
        out.push('\n');
        out.push_str(&wrap(
            &format!(
                "Level: {}, not {} as in the starting list (shared/RULES.md): {}.",
                rule.level, change.rules_md, change.reason
            ),
            "",
            78,
        ));
    }
    out
}

/// The text `arrowcert rules` prints: one line per rule, `ID  LEVEL  SIDE
/// summary`, aligned columns, grouped by area in catalogue order.
pub fn list() -> String {
    let id_width = RULES.iter().map(|r| r.id.len()).max().unwrap_or(0);
    let mut out = String::new();
    for (_, rules) in by_area() {
        for r in rules {
            out.push_str(&format!(
                "{:<id_width$}  {:<6}  {:<3}  {}\n",
                r.id,
                r.level.as_str(),
                r.side.letter(),
                r.summary
            ));
        }
    }
    out
}

/// Markdown prose: `*` escaped so pointer types never start emphasis.
fn md(text: &str) -> String {
    text.replace('*', "\\*")
}

/// A Markdown table cell: pipes and `*` escaped, on one line.
fn cell(text: &str) -> String {
    md(&text.split_whitespace().collect::<Vec<_>>().join(" ")).replace('|', "\\|")
}

/// A Markdown document of the whole catalogue (a table per area, then the
/// quotes and observations), committed as `docs/RULES.md`.
pub fn markdown() -> String {
    let count = |level| RULES.iter().filter(|r| r.level == level).count();
    let mut out = String::new();
    out.push_str("# Rule catalogue\n\n");
    out.push_str(
        "<!-- Generated from harness/src/rules by `arrowcert::rules::markdown()`; do not edit.\n     \
         Regenerate: ARROWCERT_BLESS=1 cargo test -p arrowcert --lib rules -->\n\n",
    );
    out.push_str(&format!(
        "{} rules: {} MUST, {} SHOULD, {} INFO. Side: P judges a producer (the library \
         exports, the harness consumes), C judges a consumer (the harness exports), P/C both. \
         The level is the spec's own word for the quoted sentence (its RFC 2119 word: \
         MUST, SHOULD, MAY; the spec's \"Mandatory.\" counts as MUST), never stronger; a \
         rule the spec implies but never states is marked inferred and is at most SHOULD; \
         the few justified exceptions are listed at the end. INFO is behaviour the spec \
         leaves open. Quotes are verbatim from the spec texts (Apache Arrow \
         `docs/source/format/`), with RST markup and line breaks dropped. \
         `arrowcert explain ID` prints one rule; `arrowcert rules` lists them all.\n\n",
        RULES.len(),
        count(Level::Must),
        count(Level::Should),
        count(Level::Info)
    ));
    let areas = by_area();
    out.push_str("| Area | Rules |\n|---|---|\n");
    for (area, rules) in &areas {
        out.push_str(&format!("| {} | {} |\n", area_title(area), rules.len()));
    }
    out.push('\n');
    for (area, rules) in &areas {
        out.push_str(&format!("## {}\n\n", area_title(area)));
        rule_entries(&mut out, rules.iter().copied());
    }
    cai_markdown(&mut out);
    out.push_str("## Levels above their quote's word\n\n");
    out.push_str(
        "Rules whose quoted sentence carries no RFC 2119 word, kept at their level because \
         the requirement is definitional (without it the structure cannot be read at all):\n\n",
    );
    for e in EXCEPTIONS {
        let level = find(e.id).map_or(Level::Info, |r| r.level);
        out.push_str(&format!("- `{}`: {}: {}.\n", e.id, level, md(e.reason)));
    }
    out.push('\n');
    out.push_str("## Levels that differ from the starting list\n\n");
    out.push_str(
        "`shared/RULES.md` gave these rules a stronger level than the spec's own word for \
         the sentence:\n\n",
    );
    for c in LEVEL_CHANGES {
        let level = find(c.id).map_or(Level::Info, |r| r.level);
        out.push_str(&format!(
            "- `{}`: {} (RULES.md: {}): {}.\n",
            c.id,
            level,
            c.rules_md,
            md(c.reason)
        ));
    }
    out
}

/// A set of rules in `docs/RULES.md`: their table, then each rule's quote,
/// level basis and observation.
fn rule_entries<'a>(out: &mut String, rules: impl Iterator<Item = &'a Rule> + Clone) {
    out.push_str(
        "| ID | Level | Quote's word | Inferred | Side | Requirement | Spec |\n|---|---|---|---|---|---|---|\n",
    );
    for r in rules.clone() {
        out.push_str(&format!(
            "| `{}` | {} | {} | {} | {} | {} | {}: {} |\n",
            r.id,
            r.level,
            modal(r.quote).as_str(),
            if r.inferred.is_some() { "yes" } else { "no" },
            r.side.letter(),
            cell(r.summary),
            r.spec_file,
            cell(r.section)
        ));
    }
    out.push('\n');
    for r in rules {
        out.push_str(&format!("### `{}`\n\n", r.id));
        out.push_str(&format!(
            "{} ({}, {}). {}, \"{}\":\n\n",
            md(r.summary),
            r.level,
            r.side,
            r.spec_file,
            md(r.section)
        ));
        out.push_str(&format!("> {}\n\n", md(r.quote)));
        out.push_str(&format!("Level: {}\n\n", md(&level_basis(r))));
        out.push_str(&format!("How arrowcert decides: {}\n\n", md(r.observation)));
    }
}

/// The CUDA Array Interface's section of `docs/RULES.md`: its table, then
/// each rule's quote and observation.
fn cai_markdown(out: &mut String) {
    let rules = cai::CAI_RULES;
    out.push_str("## CUDA Array Interface (`certify --cai`)\n\n");
    out.push_str(&format!(
        "{} rules of `{}` (version 3, from Numba's documentation; docs/CAI.md). \
         The four required entries rest on \"must contain the following entries\" and \
         the types the list gives them; the rest of the interface is defined without \
         RFC 2119 words, so most rules are inferred and at most SHOULD.\n\n",
        rules.len(),
        cai::CAI_SPEC
    ));
    rule_entries(out, rules.iter());
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_catalogue_version_follows_ids_levels_and_sides_only() {
        let v = catalogue_version();
        let (n, hash) = v.split_once('-').expect("count-hash");
        assert_eq!(n.parse::<usize>().unwrap(), all().count(), "{v}");
        assert_eq!(hash.len(), 12, "{v}");
        assert!(hash.chars().all(|c| c.is_ascii_hexdigit()), "{v}");
        let base = [
            ("a.x", Level::Must, Side::Producer),
            ("b.y", Level::Should, Side::Both),
        ];
        let same = version_of(base.iter().copied());
        // Order does not matter; an ID, a level or a side does.
        assert_eq!(version_of(base.iter().rev().copied()), same);
        let mut level = base;
        level[1].1 = Level::Must;
        let mut side = base;
        side[0].2 = Side::Consumer;
        let mut id = base;
        id[0].0 = "a.z";
        for changed in [level, side, id] {
            assert_ne!(version_of(changed.iter().copied()), same, "{changed:?}");
        }
        assert!(version_of(base[..1].iter().copied()).starts_with("1-"));
    }

    #[test]
    fn timing_dependent_rules_exist() {
        for (id, why) in TIMING_DEPENDENT {
            assert!(find(id).is_some(), "{id}");
            assert!(!why.is_empty());
        }
        assert!(timing_dependent("array.null-count").is_none());
    }

    use super::*;
    use std::collections::HashSet;
    use std::path::PathBuf;

    fn spec_dir() -> PathBuf {
        PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/spec"))
    }

    fn shared_rules_md() -> PathBuf {
        PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../shared/RULES.md"
        ))
    }

    fn docs_rules_md() -> PathBuf {
        PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/RULES.md"))
    }

    fn is_adornment(line: &str) -> bool {
        let mut chars = line.chars();
        match chars.next() {
            Some(c) if "=-~'^\"#*+_:.".contains(c) => line.len() >= 3 && chars.all(|d| d == c),
            _ => false,
        }
    }

    /// The sections of an RST file: (heading, normalised text up to the next
    /// heading of any level).
    fn sections(text: &str) -> Vec<(String, String)> {
        let lines: Vec<&str> = text.lines().collect();
        let heads: Vec<usize> = (0..lines.len().saturating_sub(1))
            .filter(|&i| {
                let (title, under) = (lines[i], lines[i + 1]);
                !title.trim().is_empty()
                    && !title.starts_with(char::is_whitespace)
                    && !is_adornment(title.trim())
                    && is_adornment(under)
                    && under.chars().count() >= title.trim_end().chars().count()
            })
            .collect();
        heads
            .iter()
            .enumerate()
            .map(|(k, &i)| {
                let end = heads.get(k + 1).copied().unwrap_or(lines.len());
                (
                    lines[i].trim().to_string(),
                    normalise(&lines[i + 2..end].join("\n")),
                )
            })
            .collect()
    }

    fn read(path: &PathBuf) -> String {
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    fn well_formed(id: &str) -> bool {
        let segments: Vec<&str> = id.split('.').collect();
        segments.len() >= 2
            && segments.iter().all(|s| {
                !s.is_empty()
                    && s.chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            })
    }

    #[test]
    fn normalise_drops_markup() {
        assert_eq!(
            normalise("There must be :c:member:`ArrowSchema.n_children`\n   pointers."),
            "There must be ArrowSchema.n_children pointers."
        );
        assert_eq!(
            normalise("a non-zero\n :ref:`error code <c-stream-interface-error-codes>` otherwise"),
            "a non-zero error code otherwise"
        );
        assert_eq!(
            normalise("*Mandatory.*  the ``ArrowArray`` is **not** *MUST*"),
            "Mandatory. the ArrowArray is not MUST"
        );
        assert_eq!(normalise("the colon ``:`` must"), "the colon : must");
    }

    #[test]
    fn ids_are_unique_and_well_formed() {
        let mut seen = HashSet::new();
        for r in RULES {
            assert!(seen.insert(r.id), "duplicate id {}", r.id);
            assert!(well_formed(r.id), "malformed id {}", r.id);
            assert_eq!(r.id.split('.').next(), Some(r.area), "area of {}", r.id);
            assert!(
                AREAS.iter().any(|(a, _)| *a == r.area),
                "unknown area {}",
                r.area
            );
            for (what, text) in [
                ("summary", r.summary),
                ("quote", r.quote),
                ("observation", r.observation),
            ] {
                assert!(!text.trim().is_empty(), "{}: empty {what}", r.id);
                assert!(!text.contains('\n'), "{}: {what} spans lines", r.id);
            }
            assert!(!r.quote.contains('`'), "{}: markup in quote", r.id);
            assert!(r.quote.len() >= 40, "{}: quote too short", r.id);
        }
    }

    #[test]
    fn areas_are_contiguous_in_catalogue_order() {
        let order: Vec<&str> = by_area().iter().map(|(a, _)| *a).collect();
        let expected: Vec<&str> = AREAS.iter().map(|(a, _)| *a).collect();
        assert_eq!(order, expected);
        let mut last = "";
        let mut done = HashSet::new();
        for r in RULES {
            if r.area != last {
                assert!(done.insert(r.area), "area {} is split", r.area);
                last = r.area;
            }
        }
    }

    #[test]
    fn quotes_are_verbatim_under_their_sections() {
        let mut failures = Vec::new();
        for r in RULES {
            let text = read(&spec_dir().join(r.spec_file));
            if !text.lines().any(|l| l.trim() == r.section) {
                failures.push(format!(
                    "{}: no heading {:?} in {}",
                    r.id, r.section, r.spec_file
                ));
                continue;
            }
            let quote = normalise(r.quote);
            if !normalise(&text).contains(&quote) {
                failures.push(format!("{}: quote not in {}: {quote}", r.id, r.spec_file));
                continue;
            }
            let under: Vec<String> = sections(&text)
                .into_iter()
                .filter(|(_, body)| body.contains(&quote))
                .map(|(heading, _)| heading)
                .collect();
            if !under.iter().any(|h| h == r.section) {
                failures.push(format!(
                    "{}: quote is under {under:?}, not {:?}",
                    r.id, r.section
                ));
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    /// Rows of RULES.md's tables: (id, level, side letter).
    fn rules_md_rows() -> Vec<(String, String, String)> {
        read(&shared_rules_md())
            .lines()
            .filter(|l| l.starts_with("| "))
            .filter_map(|l| {
                let cells: Vec<&str> = l.trim_matches('|').split('|').map(str::trim).collect();
                let id = cells.first()?;
                if *id == "ID" || cells.len() < 3 {
                    return None;
                }
                Some((id.to_string(), cells[1].to_string(), cells[2].to_string()))
            })
            .collect()
    }

    #[test]
    fn every_rules_md_row_is_in_the_catalogue() {
        let rows = rules_md_rows();
        assert!(
            rows.len() > 50,
            "parsed only {} rows of RULES.md",
            rows.len()
        );
        let mut failures = Vec::new();
        for (id, level, side) in &rows {
            let changed = LEVEL_CHANGES.iter().find(|c| c.id == id);
            if let Some(c) = changed {
                assert_eq!(
                    c.rules_md.as_str(),
                    level,
                    "{id}: LEVEL_CHANGES out of date"
                );
            }
            // "MUST/SHOULD": the row is split into rules at those levels.
            let levels: Vec<&str> = level.split('/').map(str::trim).collect();
            let check = |r: &Rule, failures: &mut Vec<String>| {
                let fits = changed.is_some() || levels.contains(&r.level.as_str());
                if !fits {
                    failures.push(format!(
                        "{}: level {} in RULES.md, {} here",
                        r.id, level, r.level
                    ));
                }
                if r.side.letter() != side {
                    failures.push(format!(
                        "{}: side {} in RULES.md, {} here",
                        r.id,
                        side,
                        r.side.letter()
                    ));
                }
            };
            if let Some(prefix) = id.strip_suffix('*') {
                assert!(well_formed(prefix.trim_end_matches('.')), "{id}");
                let family = matching(id);
                if family.is_empty() {
                    failures.push(format!("{id}: no rule under this family"));
                }
                for r in family {
                    check(r, &mut failures);
                }
            } else {
                assert!(well_formed(id), "unparsed RULES.md row {id}");
                match find(id) {
                    Some(r) => check(r, &mut failures),
                    None => failures.push(format!("{id}: missing from the catalogue")),
                }
            }
        }
        for c in LEVEL_CHANGES {
            let r = find(c.id).unwrap_or_else(|| panic!("{}: unknown id", c.id));
            assert_ne!(r.level, c.rules_md, "{}: not actually changed", c.id);
            assert!(
                rows.iter().any(|(id, _, _)| id == c.id),
                "{}: not in RULES.md",
                c.id
            );
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    #[test]
    fn find_matching_explain_list() {
        let release: Vec<&str> = matching("array.release.*").iter().map(|r| r.id).collect();
        assert_eq!(
            release,
            [
                "array.release.set",
                "array.release.marks-released",
                "array.release.frees",
                "array.release.cache",
                "array.release.relocatable",
                "array.release.walks-children",
            ]
        );
        assert_eq!(
            matching("*").len(),
            RULES.len() + dlpack::DLPACK_RULES.len() + cai::CAI_RULES.len()
        );
        assert_eq!(matching("cai.*").len(), cai::CAI_RULES.len());
        assert!(explain(find("cai.stream.zero").unwrap()).contains("should either use None"));
        assert_eq!(matching("dlpack.*").len(), dlpack::DLPACK_RULES.len());
        assert!(matching("array.*").iter().all(|r| r.area == "array"));
        assert_eq!(matching("array.null-count").len(), 1);
        assert!(matching("array.null").is_empty());
        assert!(matching("nothing.*").is_empty());

        let rule = find("array.null-count").expect("array.null-count");
        assert_eq!(rule.level, Level::Must);
        assert_eq!(rule.side, Side::Producer);
        assert!(find("array.nope").is_none());

        let text = explain(rule);
        assert!(text.starts_with("array.null-count  MUST  producer\n"));
        let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(flat.contains(rule.quote), "{text}");
        assert!(flat.contains(rule.observation), "{text}");
        assert!(text.contains(rule.section) && text.contains(rule.spec_file));
        assert!(text.lines().any(|l| l.starts_with("    Mandatory.")));
        assert!(explain(find("device.event.none").unwrap()).contains("not MUST"));

        let listing = list();
        assert_eq!(listing.lines().count(), RULES.len());
        let first = listing.lines().next().unwrap();
        let level_col = first.find("MUST").unwrap();
        for (line, r) in listing.lines().zip(RULES) {
            assert!(line.starts_with(r.id), "{line}");
            assert_eq!(
                &line[level_col..level_col + r.level.as_str().len()],
                r.level.as_str()
            );
            assert!(line.ends_with(r.summary));
        }
    }

    #[test]
    fn modal_words_are_read_as_rfc_2119_reads_them() {
        assert_eq!(
            modal("The release callback MUST mark the structure"),
            Modal::Must
        );
        assert_eq!(modal("Mandatory. The number of null items."), Modal::Must);
        assert_eq!(
            modal("There must be n pointers. MAY be NULL only if"),
            Modal::Must
        );
        assert_eq!(
            modal("the sync_event member should always be null."),
            Modal::Should
        );
        assert_eq!(
            modal("It is recommended, but not required, that the memory addresses"),
            Modal::Should
        );
        assert_eq!(
            modal("Consumers MAY choose to ignore this information."),
            Modal::May
        );
        assert_eq!(modal("The ArrowArray describes the data."), Modal::None);
        assert_eq!(modal("A run end cannot be null."), Modal::None);
        assert_eq!(modal("the mustard"), Modal::None);
    }

    /// Every rule's level rests on its quote: no stronger than the quote's
    /// RFC 2119 word, at most SHOULD when inferred, or one of the short
    /// list of justified exceptions (each a rule that still needs it).
    #[test]
    fn every_rules_level_rests_on_its_quoted_sentence() {
        let failures: Vec<String> = RULES
            .iter()
            .filter_map(|r| level_supported(r).err())
            .collect();
        assert!(failures.is_empty(), "{}", failures.join("\n"));
        for e in EXCEPTIONS {
            let r = find(e.id).unwrap_or_else(|| panic!("exception {}: no such rule", e.id));
            assert!(
                r.inferred.is_none() && r.level.rank() > modal(r.quote).max_level().rank(),
                "exception {} is not needed: its quote supports its level",
                e.id
            );
            assert!(!e.reason.trim().is_empty());
        }
        assert!(
            EXCEPTIONS.len() <= 12,
            "the exceptions list is meant to be short"
        );
        for r in RULES.iter().filter(|r| r.inferred.is_some()) {
            assert!(explain(r).contains("inferred"), "{}", r.id);
        }
    }

    #[test]
    fn serde_names() {
        assert_eq!(serde_json::to_string(&Level::Should).unwrap(), "\"SHOULD\"");
        assert_eq!(serde_json::to_string(&Side::Both).unwrap(), "\"both\"");
        let level: Level = serde_json::from_str("\"INFO\"").unwrap();
        assert_eq!(level, Level::Info);
    }

    #[test]
    fn docs_rules_md_is_current() {
        let path = docs_rules_md();
        let generated = markdown();
        if std::env::var_os("ARROWCERT_BLESS").is_some_and(|v| v == "1") {
            std::fs::write(&path, &generated).unwrap();
            return;
        }
        let committed = read(&path);
        assert!(
            committed == generated,
            "{} is out of date: run ARROWCERT_BLESS=1 cargo test -p arrowcert --lib rules",
            path.display()
        );
    }
}

//! The report model: one JSON document per run. Its JSON Schema is generated
//! from these types (`arrowcert report-schema`) and committed as
//! `reports/report.schema.json`; a test keeps the two in step.

#![forbid(unsafe_code)]

pub mod expectations;
pub mod outcome;
pub mod robustness;
pub mod time;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Bumped when a field changes meaning or is removed.
pub const REPORT_VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct Report {
    pub report_version: u32,
    pub tool: Tool,
    /// The subcommand that produced the report (`roundtrip`).
    pub command: String,
    /// The full command line, for reproducing the run.
    pub invocation: Vec<String>,
    /// RFC 3339 UTC times.
    pub started_at: String,
    pub finished_at: String,
    pub duration_ms: u64,
    /// False when the run stopped before every planned case ran.
    pub complete: bool,
    /// Cases the run planned (after filters); `cases` has fewer when the
    /// run is incomplete.
    #[serde(default)]
    pub planned: u64,
    /// The signal that stopped an incomplete run (`SIGINT (2)`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<String>,
    pub plugins: Vec<PluginIdentity>,
    /// Where the scenarios came from: `built-in` or a directory.
    pub data: String,
    pub devices: Vec<String>,
    pub cases: Vec<Case>,
    pub summary: Summary,
    /// Certification runs: one verdict per rule of the catalogue in scope.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<RuleSummary>,
    /// The seed of the generated scenarios (`gen/<i>`), when the run had
    /// any: `--seed` with this value draws the same ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Certification runs: each failure found on a generated scenario,
    /// shrunk to the smallest scenario that still shows it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shrunk: Vec<ShrunkFailure>,
    /// Fuzzing runs (`arrowcert fuzz-report`): one per target and plugin,
    /// with its executions per second; each finding is a case whose
    /// `replay` reruns its minimised input.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fuzz: Vec<FuzzRun>,
    /// How the run ended as a whole ([`outcome`]): `pass`, `fail`,
    /// `not_certified` or `harness_error`, with the reasons. Absent in
    /// reports written before outcomes existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<outcome::Judgement>,
    /// Cases a consumer declined under a permission of the spec, by
    /// library: what each declined and its own message.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub limitations: Vec<LimitationEntry>,
    /// With `--expectations FILE`: how the results compare with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expectations: Option<expectations::Checked>,
    /// Certification runs: what the run reached, per type family, path and
    /// encoding factor (exercised, refused with the library's words, or
    /// not reached). Absent in reports written before it existed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub coverage: Vec<CoverageRow>,
    /// `certify --malformed`: what the consumer did with structures that
    /// break the spec on purpose, graded apart from the rules (never a rule
    /// verdict, never the outcome). Absent without the flag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub robustness: Option<robustness::Robustness>,
}

/// What a run reached of one type family on one path, in one encoding
/// factor (`whole` or `slice` exports for producers; `plain`, `varied`...
/// for consumers).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct CoverageRow {
    /// A type family of the generator (`int32`, `dense-union`, `map`...).
    pub family: String,
    /// `producer/array`, `consumer/stream`, `producer/device:cuda/device_array`...
    pub path: String,
    /// `whole`, `slice`, `plain`, `varied`, ...
    pub factor: String,
    /// `exercised` (a case holding the family ran to a verdict on the
    /// library: pass, fail, crash or timeout), `refused` (the library
    /// declined a case whose only column is of this family, and nothing
    /// holding it ran), `errored` (the library failed inside itself on a
    /// case whose only column is of this family: an error, its words in
    /// `why`), `path_skipped` (no case of this path and factor
    /// ran or was declined, whatever its data: the path is not exported,
    /// the device is missing...), `not_applicable` (a single-variation
    /// factor, `varied:<variation>`, that has nothing to change in the
    /// run's data of this family), `elsewhere` (the pairwise plan handed this
    /// family with this factor on another path of the same side, named in
    /// `why`; `--all-variations` runs every path) or `not_reached`.
    pub status: String,
    /// Cases that held the family and ran to a verdict.
    pub cases: u64,
    /// `refused`, `errored`: the library's words, from the first such case;
    /// `path_skipped`: why the path's first case was skipped;
    /// `not_applicable`, `elsewhere`: why nothing ran here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

/// One limitation a library declared: the case, the path and its message.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct LimitationEntry {
    /// The plugin that declined (its `arrowcert_plugin_name`), or its role.
    pub library: String,
    pub case: String,
    pub path: String,
    /// What the library said.
    pub message: String,
}

/// One fuzz target run against one plugin for a time budget.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct FuzzRun {
    /// `validate`, `consumer`, `producer` or `async`.
    pub target: String,
    /// The plugin fuzzed (a path), empty for `validate`.
    pub plugin: String,
    /// Seconds the fuzzer ran.
    pub seconds: f64,
    /// Inputs executed (libFuzzer's count).
    pub executions: u64,
    /// Executions per second over the run.
    pub executions_per_second: f64,
    /// Inputs in the corpus after the run.
    #[serde(default)]
    pub corpus: u64,
    /// Findings (minimised inputs) the run left.
    pub findings: u64,
    /// How the run ended: `clean`, `findings`, or what went wrong.
    pub outcome: String,
    /// The command that runs it again.
    pub command: String,
}

/// A failure shrunk to its smallest scenario.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct ShrunkFailure {
    /// The rule that failed, or `crash` for a case whose process died or
    /// timed out.
    pub target: String,
    /// The first case that showed it.
    pub from_case: String,
    /// The smallest case found that still shows it.
    pub case: String,
    /// What that case's scenario holds (columns and batch lengths).
    pub scenario: String,
    /// What was observed on the smallest case.
    pub evidence: String,
    /// Candidate scenarios tried, and how many of them still failed.
    pub tried: u64,
    pub steps: u64,
    /// The shrink budget ran out before the walk ended (a smaller one may
    /// exist).
    pub exhausted: bool,
    /// Reproduces exactly the smallest case.
    pub replay: String,
}

/// What produced a report: the versions `arrowcert --version` prints
/// (README, "Stability"). Fields after `version` are absent in reports
/// written before they existed (read back as empty / 0).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct Tool {
    pub name: String,
    pub version: String,
    /// The commit the binary was built from (`git rev-parse HEAD` at build
    /// time, or `ARROWCERT_COMMIT`), `unknown` outside a checkout.
    #[serde(default)]
    pub commit: String,
    /// The plugin contract's version (`arrowcert_plugin_abi_version`).
    #[serde(default)]
    pub plugin_abi_version: i32,
    /// The report model's version ([`REPORT_VERSION`]; a matrix file
    /// carries its own `matrix_version` too).
    #[serde(default)]
    pub report_version: u32,
    /// The rule catalogue's version ([`crate::rules::catalogue_version`]):
    /// how many rules, and a hash of their IDs, levels and sides.
    #[serde(default)]
    pub rule_catalogue: String,
}

impl Default for Tool {
    fn default() -> Self {
        Tool {
            name: "arrowcert".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            commit: env!("ARROWCERT_COMMIT").into(),
            plugin_abi_version: arrowcert_sdk::PLUGIN_ABI_VERSION,
            report_version: REPORT_VERSION,
            rule_catalogue: crate::rules::catalogue_version(),
        }
    }
}

impl Tool {
    /// `arrowcert --version` after the name: the version on the first
    /// line, then one `key: value` line per field.
    pub fn version_text(&self) -> String {
        format!(
            "{}\ncommit: {}\nplugin ABI: {}\nreport schema: {}\nrule catalogue: {}",
            self.version,
            self.commit,
            self.plugin_abi_version,
            self.report_version,
            self.rule_catalogue
        )
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct PluginIdentity {
    /// `producer` or `consumer`.
    pub role: String,
    /// What `arrowcert_plugin_name()` returned.
    pub name: String,
    pub path: String,
    pub sha256: String,
    pub abi_version: i32,
    /// The contract's symbols the library exports.
    pub entry_points: Vec<String>,
}

/// How a case that was not run because its path hangs begins its message
/// (its verdict is [`Verdict::Timeout`]: a failure of that path).
pub const HANGING: &str = "not run: the path hangs";

/// The path a case belongs to, for hang accounting: its interface path,
/// with the side (`producer/`, `consumer/`) when its ID names one.
///
/// A slice of a whole stream (no batch, a slice) is another entry point
/// (`arrowcert_produce_sliced_*`) and keeps its own account (`stream
/// slices`): a plugin without it skips those cases, which must neither
/// break the whole stream's streak of timeouts nor be charged with it.
pub fn path_key(c: &Case) -> String {
    let path = match (c.batch, &c.slice) {
        (None, Some(_)) => format!("{} slices", c.path),
        _ => c.path.clone(),
    };
    match c.id.split('/').next() {
        Some(side @ ("producer" | "consumer")) => format!("{side}/{path}"),
        _ => path,
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq, Hash)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Everything checked held.
    Pass,
    /// A check did not hold; `differences` says what was observed.
    Fail,
    /// A plugin call failed (non-zero errno), so nothing could be compared.
    Error,
    /// Not run, for the reason in `message` (never counted as passed).
    Skip,
    /// The process running the case died (a signal, or an exit in the
    /// middle of a call); `message` says how.
    Crash,
    /// The case did not finish within its deadline; its process was killed.
    Timeout,
    /// A consumer declined the input cleanly (a non-zero code with a
    /// message, everything released) under a permission of the spec:
    /// "Consumers MAY decide not to support all data types" (and
    /// non-zero offsets, unaligned memory). `message` carries its words.
    /// Counted apart from passes and failures.
    Limitation,
    /// arrowcert's own code failed (a panic) while running the case: the
    /// harness's fault, never the library's. `message` has the panic
    /// message and location.
    HarnessError,
}

impl Verdict {
    /// The lower-case word reports use.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Fail => "fail",
            Verdict::Error => "error",
            Verdict::Skip => "skip",
            Verdict::Crash => "crash",
            Verdict::Timeout => "timeout",
            Verdict::Limitation => "limitation",
            Verdict::HarnessError => "harness_error",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct Case {
    /// Stable, hierarchical: `<path>/<scenario>/batch:<i>[/slice:<offset>+<length>]`.
    pub id: String,
    /// The interface path: `device_array`, `device_stream`, `async`, `array`, `stream`.
    pub path: String,
    pub scenario: String,
    pub batch: Option<u64>,
    pub slice: Option<Slice>,
    pub verdict: Verdict,
    /// Why it failed, errored or was skipped.
    pub message: Option<String>,
    /// Observed vs expected, one entry per difference.
    pub differences: Vec<String>,
    pub duration_us: u64,
    /// A command that runs exactly this case again.
    pub replay: String,
    /// What the plugins printed to stdout and stderr during the case
    /// (lossy UTF-8, truncated), when anything was printed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// Roundtrip: the case passed (every value arrived) but the data
    /// arrived with these type, nullability, field name or metadata
    /// changes, which the spec does not ask a consumer to keep (the
    /// certification rules `consumer.read.types` and
    /// `consumer.read.metadata`, both INFO).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changed: Vec<String>,
    /// Certification: the rules this case exercised (`arrowcert rules`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checked: Vec<String>,
    /// Certification: every rule the case saw broken, with evidence.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub violations: Vec<RuleViolation>,
    /// Certification: rules this case would have exercised but could not,
    /// each with the reason (never counted as checked or passed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_exercised: Vec<NotExercised>,
    /// `--repeat`: the case did not pass, was run again, and its verdict
    /// changed: every verdict seen, the first run's (`verdict`) first.
    /// Empty when the case was not rerun or held still.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flaky: Vec<Verdict>,
    /// Certification, consumer cases: what the consumer's own view of what
    /// it read (`arrowcert_consume_values`, a py: adapter's `values(obj)`)
    /// showed against the data: how many values agreed, which were not
    /// compared and why. A disagreement is a `consumer.read.values`
    /// violation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub view: Option<String>,
}

impl Case {
    /// Not run because its path hangs (its verdict is a timeout).
    pub fn path_hangs(&self) -> bool {
        self.verdict == Verdict::Timeout
            && self
                .message
                .as_deref()
                .is_some_and(|m| m.starts_with(HANGING))
    }

    /// Passed, with every value equal but types, nullability, names or
    /// metadata changed on the way (roundtrip's `changed`).
    pub fn passed_with_changes(&self) -> bool {
        self.verdict == Verdict::Pass && !self.changed.is_empty()
    }
}

/// A rule a case could not exercise, and why.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct NotExercised {
    pub rule: String,
    pub reason: String,
}

/// One broken rule, seen in one case.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct RuleViolation {
    /// The rule ID (`arrowcert explain ID`).
    pub rule: String,
    /// `MUST`, `SHOULD` or `INFO`.
    pub level: String,
    /// Where in the exported structure: `root.children[1].dictionary`, `chunk 2`, ...
    pub at: String,
    /// What was observed, against what the rule requires.
    pub evidence: String,
}

/// The verdict of one rule over a whole certification run.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct RuleSummary {
    pub rule: String,
    pub level: String,
    /// `pass`: checked and never broken; `fail`: broken at least once;
    /// `skip`: no case of this run exercised it (never counted as passed).
    pub verdict: Verdict,
    /// Cases that exercised the rule.
    pub checked: u64,
    /// Cases that saw it broken.
    pub failed: u64,
    /// The first few failing cases (IDs), with the first one's evidence.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failing_cases: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<String>,
    /// `skip`: why the rule was not exercised, when a case said why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Set when this rule's verdict can depend on the library's thread
    /// timing (two runs of one seed may differ): why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timing: Option<String>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
pub struct Slice {
    pub offset: u64,
    pub length: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
pub struct Summary {
    pub total: u64,
    pub passed: u64,
    pub failed: u64,
    pub errors: u64,
    pub skipped: u64,
    #[serde(default)]
    pub crashed: u64,
    #[serde(default)]
    pub timed_out: u64,
    /// Cases a consumer declined under a permission of the spec.
    #[serde(default)]
    pub limitations: u64,
    /// Cases arrowcert's own code failed (please report these).
    #[serde(default)]
    pub harness_errors: u64,
    /// Of all the cases, those `--repeat` found flaky (their verdict
    /// changed when run again); each is also counted under its first
    /// verdict.
    #[serde(default)]
    pub flaky: u64,
}

impl Summary {
    pub fn of(cases: &[Case]) -> Summary {
        let mut s = Summary::default();
        for c in cases {
            s.count(c.verdict);
            s.flaky += u64::from(!c.flaky.is_empty());
        }
        s
    }

    /// Adds one case with this verdict.
    pub fn count(&mut self, verdict: Verdict) {
        self.total += 1;
        *match verdict {
            Verdict::Pass => &mut self.passed,
            Verdict::Fail => &mut self.failed,
            Verdict::Error => &mut self.errors,
            Verdict::Skip => &mut self.skipped,
            Verdict::Crash => &mut self.crashed,
            Verdict::Timeout => &mut self.timed_out,
            Verdict::Limitation => &mut self.limitations,
            Verdict::HarnessError => &mut self.harness_errors,
        } += 1;
    }
    /// True when nothing failed, errored, crashed or timed out.
    pub fn ok(&self) -> bool {
        self.failed == 0
            && self.errors == 0
            && self.crashed == 0
            && self.timed_out == 0
            && self.harness_errors == 0
    }
}

/// The JSON Schema of [`Report`], pretty-printed, as committed.
pub fn json_schema() -> String {
    let schema = schemars::schema_for!(Report);
    serde_json::to_string_pretty(&schema).expect("schema serialises") + "\n"
}

impl Report {
    /// The report of a run that begins at `started`: no case, no plugin,
    /// no verdict yet, not complete. Commands set what they know (plan,
    /// devices, seed, kept cases) with struct update syntax.
    pub fn begun(
        command: &str,
        invocation: Vec<String>,
        started: std::time::SystemTime,
        data: String,
    ) -> Report {
        Report {
            report_version: REPORT_VERSION,
            tool: Default::default(),
            command: command.into(),
            invocation,
            started_at: time::rfc3339(started),
            finished_at: time::rfc3339(started),
            duration_ms: 0,
            complete: false,
            planned: 0,
            interrupted: None,
            plugins: Vec::new(),
            data,
            devices: Vec::new(),
            cases: Vec::new(),
            summary: Summary::default(),
            rules: Vec::new(),
            seed: None,
            shrunk: Vec::new(),
            fuzz: Vec::new(),
            outcome: None,
            limitations: Vec::new(),
            expectations: None,
            coverage: Vec::new(),
            robustness: None,
        }
    }
}

/// Writes `report` to `path` atomically: a temporary file beside it, then a
/// rename, so a reader never sees half a report.
pub fn write(report: &Report, path: &std::path::Path) -> std::io::Result<()> {
    let json = serde_json::to_string_pretty(report).map_err(std::io::Error::other)?;
    write_atomic(path, &(json + "\n"))
}

/// Writes `text` to `path` atomically (a temporary file beside it, then a
/// rename), creating the directory if needed.
pub fn write_atomic(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)
}

/// Reads a report back (and checks it parses as this version's model).
pub fn read(path: &std::path::Path) -> Result<Report, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: not a report: {e}", path.display()))
}

/// Makes a string that came from a plugin safe to keep in a report: at
/// most `max` bytes (cut on a character boundary, with a note of how much
/// was dropped). Callers convert bytes with `String::from_utf8_lossy` first.
pub fn bounded(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut cut = max;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!(
        "{}\n[... {} more bytes not kept]",
        &text[..cut],
        text.len() - cut
    )
}

/// Makes a string that came from a plugin safe to print on a terminal:
/// control characters (ANSI escape sequences included) other than newline
/// and tab are shown as `\u{..}` escapes instead of being sent raw.
pub fn printable(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() && c != '\n' && c != '\t' {
            out.push_str(&c.escape_unicode().to_string());
        } else {
            out.push(c);
        }
    }
    out
}

/// Lowercase hex SHA-256 of a file. A process hashes each file once: the
/// answer is kept for as long as the file's device, inode, size and
/// modification time stay the same (a debug build of a Rust plugin is
/// 65 MB, tens of milliseconds to hash, and a run names its plugins in
/// every report it writes).
pub fn sha256_file(path: &std::path::Path) -> std::io::Result<String> {
    use sha2::Digest;
    use std::os::unix::fs::MetadataExt;
    type Key = (std::path::PathBuf, u64, u64, u64, i64, i64);
    static KNOWN: std::sync::Mutex<Vec<(Key, String)>> = std::sync::Mutex::new(Vec::new());
    let meta = std::fs::metadata(path)?;
    let key: Key = (
        path.to_path_buf(),
        meta.dev(),
        meta.ino(),
        meta.len(),
        meta.mtime(),
        meta.mtime_nsec(),
    );
    let lock = || KNOWN.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, digest)) = lock().iter().find(|(have, _)| *have == key) {
        return Ok(digest.clone());
    }
    let bytes = std::fs::read(path)?;
    let digest: String = sha2::Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let mut all = lock();
    all.retain(|(have, _)| have.0 != key.0);
    all.push((key, digest.clone()));
    Ok(digest)
}

/// `s` as one shell word: as it is when that is safe, else single-quoted.
pub fn shell_word(s: &str) -> String {
    if s.chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+:=@".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_file_is_hashed_again_once_it_changes() {
        let dir = std::env::temp_dir().join(format!("arrowcert-sha-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("plugin.so");
        std::fs::write(&f, b"abc").unwrap();
        let first = super::sha256_file(&f).unwrap();
        assert_eq!(
            first,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(super::sha256_file(&f).unwrap(), first);
        std::fs::write(&f, b"abcd").unwrap();
        assert_eq!(
            super::sha256_file(&f).unwrap(),
            "88d4266fd4e6338d13b845fcf289579d209c897823b9217da3e161936f031589"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn printable_escapes_terminal_control_sequences() {
        let hostile = "ok\u{1b}[2J\u{7}line\nnext\ttab";
        let shown = super::printable(hostile);
        assert!(!shown.contains('\u{1b}') && !shown.contains('\u{7}'));
        assert!(shown.contains("\\u{1b}[2J"));
        assert!(shown.contains("line\nnext\ttab"));
    }
}

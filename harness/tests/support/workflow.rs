//! Runs a composite GitHub Action's steps as written (harness/tests/action.rs),
//! the way a runner does: each `run:` step through `bash --noprofile
//! --norc -eo pipefail`, with GITHUB_OUTPUT, GITHUB_PATH, GITHUB_ENV,
//! GITHUB_STEP_SUMMARY and RUNNER_TEMP as GitHub sets them, `${{ ... }}`
//! expressions substituted, and `actions/upload-artifact` replaced by a
//! copy into a local folder. Anything this runner does not know (a step
//! key such as `if:`, another `uses:`, an expression) panics, so a test
//! cannot pass on a step it misread.
//!
//! The YAML reader takes the subset the project's workflow files use:
//! block maps and lists, plain and quoted scalars, `|` block scalars,
//! full-line comments. No flow collections, anchors or folded scalars.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A YAML node.
#[derive(Debug, Clone, PartialEq)]
pub enum Y {
    S(String),
    M(Vec<(String, Y)>),
    L(Vec<Y>),
}

impl Y {
    /// The value of `key` in a map.
    pub fn get(&self, key: &str) -> Option<&Y> {
        match self {
            Y::M(m) => m.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn str(&self) -> &str {
        match self {
            Y::S(s) => s,
            other => panic!("not a scalar: {other:?}"),
        }
    }

    pub fn map(&self) -> &[(String, Y)] {
        match self {
            Y::M(m) => m,
            other => panic!("not a map: {other:?}"),
        }
    }

    pub fn list(&self) -> &[Y] {
        match self {
            Y::L(l) => l,
            other => panic!("not a list: {other:?}"),
        }
    }
}

/// As JSON (scalars as strings), to compare with a real YAML parser's
/// reading.
pub fn to_json(y: &Y) -> serde_json::Value {
    match y {
        Y::S(s) => serde_json::Value::String(s.clone()),
        Y::L(l) => serde_json::Value::Array(l.iter().map(to_json).collect()),
        Y::M(m) => {
            serde_json::Value::Object(m.iter().map(|(k, v)| (k.clone(), to_json(v))).collect())
        }
    }
}

/// Parses a YAML document of the subset above.
pub fn parse(text: &str) -> Y {
    let mut p = Parser {
        lines: text.lines().map(str::to_string).collect(),
        i: 0,
    };
    let y = p.node();
    p.skip_blank();
    assert!(
        p.i == p.lines.len(),
        "YAML line {}: not understood: {}",
        p.i + 1,
        p.lines[p.i]
    );
    y
}

struct Parser {
    lines: Vec<String>,
    i: usize,
}

fn indent(l: &str) -> usize {
    l.len() - l.trim_start_matches(' ').len()
}

fn is_item(t: &str) -> bool {
    t == "-" || t.starts_with("- ")
}

impl Parser {
    fn skip_blank(&mut self) {
        while self.i < self.lines.len() {
            let t = self.lines[self.i].trim();
            if t.is_empty() || t.starts_with('#') {
                self.i += 1;
            } else {
                break;
            }
        }
    }

    /// The next non-blank line's indentation and text.
    fn peek(&mut self) -> Option<(usize, String)> {
        self.skip_blank();
        self.lines
            .get(self.i)
            .map(|l| (indent(l), l.trim().to_string()))
    }

    /// A map or list at the next line's indentation.
    fn node(&mut self) -> Y {
        let Some((ind, t)) = self.peek() else {
            return Y::S(String::new());
        };
        if is_item(&t) {
            self.list(ind)
        } else {
            self.map(ind)
        }
    }

    fn map(&mut self, ind: usize) -> Y {
        let mut m = Vec::new();
        while let Some((i, t)) = self.peek() {
            if i != ind || is_item(&t) {
                assert!(i <= ind, "YAML line {}: bad indentation", self.i + 1);
                break;
            }
            let (key, rest) = match t.split_once(": ") {
                Some((k, r)) => (k.to_string(), r.trim().to_string()),
                None => match t.strip_suffix(':') {
                    Some(k) => (k.to_string(), String::new()),
                    None => panic!("YAML line {}: not `key: value`: {t}", self.i + 1),
                },
            };
            self.i += 1;
            let v = self.value(&rest, ind);
            m.push((unquote(&key), v));
        }
        Y::M(m)
    }

    fn list(&mut self, ind: usize) -> Y {
        let mut l = Vec::new();
        while let Some((i, t)) = self.peek() {
            if i != ind || !is_item(&t) {
                break;
            }
            let rest = t[1..].trim_start().to_string();
            if rest.contains(": ") || rest.ends_with(':') {
                // `- key: value`: a map whose first entry is on this line.
                let line = &mut self.lines[self.i];
                *line = format!("{}  {}", " ".repeat(ind), rest);
                l.push(self.map(ind + 2));
            } else {
                self.i += 1;
                l.push(scalar(&rest, self.i));
            }
        }
        Y::L(l)
    }

    /// The value after `key:` at indentation `ind`.
    fn value(&mut self, rest: &str, ind: usize) -> Y {
        match rest {
            "" => match self.peek() {
                Some((i, _)) if i > ind => self.node(),
                Some((i, t)) if i == ind && is_item(&t) => self.list(ind),
                _ => Y::S(String::new()),
            },
            "|" | "|-" => {
                let mut body: Vec<String> = Vec::new();
                while self.i < self.lines.len() {
                    let l = &self.lines[self.i];
                    if !l.trim().is_empty() && indent(l) <= ind {
                        break;
                    }
                    body.push(l.clone());
                    self.i += 1;
                }
                while body.last().is_some_and(|l| l.trim().is_empty()) {
                    body.pop();
                }
                let cut = body
                    .iter()
                    .filter(|l| !l.trim().is_empty())
                    .map(|l| indent(l))
                    .min()
                    .unwrap_or(0);
                let mut s: String = body
                    .iter()
                    .map(|l| l.get(cut..).unwrap_or(""))
                    .collect::<Vec<_>>()
                    .join("\n");
                if rest == "|" {
                    s.push('\n');
                }
                Y::S(s)
            }
            r => scalar(r, self.i),
        }
    }
}

fn scalar(r: &str, line: usize) -> Y {
    assert!(
        !r.starts_with('{') && !r.starts_with('[') && !r.starts_with('>') && !r.starts_with('&'),
        "YAML line {line}: flow collections, folded scalars and anchors are not read here: {r}"
    );
    if r.starts_with('"') || r.starts_with('\'') {
        return Y::S(unquote(r));
    }
    // A comment after a plain scalar.
    let r = r.split_once(" #").map_or(r, |(v, _)| v).trim_end();
    // What YAML refuses in a plain scalar (GitHub would not load the file).
    assert!(
        !r.contains(": ") && !r.starts_with(['*', '!', '%', '@', '`', '|']),
        "YAML line {line}: a plain scalar YAML does not allow (quote it): {r}"
    );
    Y::S(r.to_string())
}

fn unquote(s: &str) -> String {
    let s = s.trim();
    if s.len() >= 2 && s.starts_with('"') && s.ends_with('"') {
        assert!(!s[1..s.len() - 1].contains('\\'), "escapes in {s}");
        s[1..s.len() - 1].to_string()
    } else if s.len() >= 2 && s.starts_with('\'') && s.ends_with('\'') {
        s[1..s.len() - 1].replace("''", "'")
    } else {
        s.to_string()
    }
}

/// What running the action gave.
#[derive(Debug)]
pub struct ActionRun {
    /// The step that failed and its exit code; `None` when all passed.
    pub failed: Option<(String, i32)>,
    /// What the steps appended to GITHUB_STEP_SUMMARY.
    pub summary: String,
    /// The action's outputs (`outputs:` evaluated after the steps).
    pub outputs: BTreeMap<String, String>,
    /// Where upload-artifact steps put their files: `<dir>/<name>/<file>`.
    pub artifacts: PathBuf,
    /// Every step's stdout and stderr.
    pub log: String,
    /// What the steps added to GITHUB_PATH.
    pub path_added: Vec<String>,
}

/// The place a run happens: `dir` gets `workspace/` (the working
/// directory), `runner-temp/`, `home/`, `artifacts/` and the GITHUB_* files.
pub struct Runner<'a> {
    pub action_dir: &'a Path,
    pub dir: &'a Path,
    /// PATH of the steps.
    pub path: &'a str,
    /// More environment for every step (a job's `env:`).
    pub env: &'a [(&'a str, &'a str)],
    /// `github.action_repository` and `github.action_ref`.
    pub repository: &'a str,
    pub reference: &'a str,
}

impl Runner<'_> {
    /// Runs `action.yml` of `action_dir` with these `with:` inputs.
    pub fn run(&self, with: &[(&str, &str)]) -> ActionRun {
        let text = std::fs::read_to_string(self.action_dir.join("action.yml")).unwrap();
        let action = parse(&text);
        assert_eq!(
            action.get("runs").unwrap().get("using").unwrap().str(),
            "composite"
        );
        let declared = action.get("inputs").unwrap().map();
        let mut inputs = BTreeMap::new();
        for (name, spec) in declared {
            let default = spec.get("default").map_or("", Y::str);
            inputs.insert(name.clone(), default.to_string());
        }
        for (k, v) in with {
            assert!(inputs.contains_key(*k), "the action has no input {k}");
            inputs.insert(k.to_string(), v.to_string());
        }
        let ws = self.dir.join("workspace");
        let temp = self.dir.join("runner-temp");
        let artifacts = self.dir.join("artifacts");
        for d in [&ws, &temp, &artifacts, &self.dir.join("home")] {
            std::fs::create_dir_all(d).unwrap();
        }
        let summary_file = self.dir.join("step-summary.md");
        std::fs::write(&summary_file, "").unwrap();
        let mut steps_out: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
        let mut path_added: Vec<String> = Vec::new();
        let mut job_env: Vec<(String, String)> = Vec::new();
        let mut log = String::new();
        let mut failed = None;
        let steps = action.get("runs").unwrap().get("steps").unwrap().list();
        for (n, step) in steps.iter().enumerate() {
            let name = step
                .get("name")
                .map_or(format!("step {n}"), |y| y.str().into());
            for (k, _) in step.map() {
                assert!(
                    ["name", "id", "shell", "env", "run", "uses", "with"].contains(&k.as_str()),
                    "step {name}: `{k}` is not understood by this runner"
                );
            }
            let eval = |s: &str| {
                expand(s, &|e: &str| {
                    let parts: Vec<&str> = e.split('.').collect();
                    match parts.as_slice() {
                        ["inputs", i] => inputs
                            .get(*i)
                            .unwrap_or_else(|| panic!("no input {i}"))
                            .clone(),
                        ["steps", id, "outputs", k] => steps_out
                            .get(*id)
                            .and_then(|o| o.get(*k))
                            .cloned()
                            .unwrap_or_default(),
                        ["github", "action_path"] => self.action_dir.display().to_string(),
                        ["github", "action_repository"] => self.repository.into(),
                        ["github", "action_ref"] => self.reference.into(),
                        ["runner", "temp"] => temp.display().to_string(),
                        _ => panic!("step {name}: the expression `{e}` is not known here"),
                    }
                })
            };
            let mut outputs = BTreeMap::new();
            if let Some(uses) = step.get("uses") {
                let uses = uses.str();
                assert!(
                    uses.starts_with("actions/upload-artifact@"),
                    "step {name}: uses {uses}, which this runner cannot replace"
                );
                let w = step.get("with").unwrap();
                let art = artifacts.join(eval(w.get("name").unwrap().str()));
                std::fs::create_dir_all(&art).unwrap();
                let missing = w.get("if-no-files-found").map_or("warn", Y::str);
                for p in eval(w.get("path").unwrap().str()).lines() {
                    let p = p.trim();
                    if p.is_empty() {
                        continue;
                    }
                    let src = ws.join(p);
                    if src.is_file() {
                        std::fs::copy(&src, art.join(src.file_name().unwrap())).unwrap();
                    } else if missing == "error" {
                        failed = Some((name.clone(), 1));
                    } else {
                        log.push_str(&format!("[{name}] warning: no file {p}\n"));
                    }
                }
                if failed.is_some() {
                    break;
                }
                continue;
            }
            assert_eq!(
                step.get("shell").map(Y::str),
                Some("bash"),
                "step {name}: a run step of a composite action names its shell"
            );
            let script = self.dir.join(format!("step-{n}.sh"));
            std::fs::write(&script, step.get("run").unwrap().str()).unwrap();
            let files = ["output", "path", "env"].map(|f| {
                let p = self.dir.join(format!("step-{n}.{f}"));
                std::fs::write(&p, "").unwrap();
                p
            });
            let mut path = path_added.clone();
            path.reverse();
            path.push(self.path.to_string());
            let mut cmd = Command::new("/bin/bash");
            cmd.args(["--noprofile", "--norc", "-eo", "pipefail"])
                .arg(&script)
                .current_dir(&ws)
                .env_clear()
                .env("HOME", self.dir.join("home"))
                .env("PATH", path.join(":"))
                .env("RUNNER_TEMP", &temp)
                .env("GITHUB_WORKSPACE", &ws)
                .env("GITHUB_ACTIONS", "true")
                .env("GITHUB_OUTPUT", &files[0])
                .env("GITHUB_PATH", &files[1])
                .env("GITHUB_ENV", &files[2])
                .env("GITHUB_STEP_SUMMARY", &summary_file)
                .envs(self.env.iter().copied())
                .envs(job_env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
            if let Some(env) = step.get("env") {
                for (k, v) in env.map() {
                    cmd.env(k, eval(v.str()));
                }
            }
            let out = cmd.output().expect("bash runs");
            log.push_str(&format!(
                "[{name}] exit {:?}\n{}{}",
                out.status.code(),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
            for (k, v) in key_values(&std::fs::read_to_string(&files[0]).unwrap()) {
                outputs.insert(k, v);
            }
            path_added.extend(
                std::fs::read_to_string(&files[1])
                    .unwrap()
                    .lines()
                    .map(String::from),
            );
            job_env.extend(key_values(&std::fs::read_to_string(&files[2]).unwrap()));
            if let Some(id) = step.get("id") {
                steps_out.insert(id.str().to_string(), outputs);
            }
            if !out.status.success() {
                failed = Some((name, out.status.code().unwrap_or(-1)));
                break;
            }
        }
        let mut outputs = BTreeMap::new();
        if let Some(o) = action.get("outputs") {
            for (k, spec) in o.map() {
                let v = expand(spec.get("value").unwrap().str(), &|e: &str| {
                    let parts: Vec<&str> = e.split('.').collect();
                    match parts.as_slice() {
                        ["steps", id, "outputs", k] => steps_out
                            .get(*id)
                            .and_then(|o| o.get(*k))
                            .cloned()
                            .unwrap_or_default(),
                        _ => panic!("output {k}: `{e}` is not known here"),
                    }
                });
                outputs.insert(k.clone(), v);
            }
        }
        ActionRun {
            failed,
            summary: std::fs::read_to_string(&summary_file).unwrap(),
            outputs,
            artifacts,
            log,
            path_added,
        }
    }
}

/// Substitutes every `${{ expr }}` in `s` with `value(expr)`.
pub fn expand(s: &str, value: &dyn Fn(&str) -> String) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(start) = rest.find("${{") {
        out.push_str(&rest[..start]);
        let end = rest[start..]
            .find("}}")
            .unwrap_or_else(|| panic!("an unclosed expression in {s}"));
        out.push_str(&value(rest[start + 3..start + end].trim()));
        rest = &rest[start + end + 2..];
    }
    out.push_str(rest);
    out
}

/// The `key=value` and `key<<DELIM ... DELIM` entries of a GITHUB_OUTPUT
/// or GITHUB_ENV file.
fn key_values(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut lines = text.lines();
    while let Some(l) = lines.next() {
        if let Some((k, delim)) = l.split_once("<<") {
            let mut v = Vec::new();
            for m in lines.by_ref() {
                if m == delim {
                    break;
                }
                v.push(m);
            }
            out.push((k.to_string(), v.join("\n")));
        } else if let Some((k, v)) = l.split_once('=') {
            out.push((k.to_string(), v.to_string()));
        } else if !l.trim().is_empty() {
            panic!("not key=value: {l}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_subset() {
        let y = parse(
            "a: 1\n# c\nb:\n  - name: x\n    run: |\n      echo 1\n\n      # kept\n    env:\n      K: 'v''s'\n  - plain\nc: \"q\" \n",
        );
        let b = y.get("b").unwrap().list();
        assert_eq!(b[0].get("run").unwrap().str(), "echo 1\n\n# kept\n");
        assert_eq!(b[0].get("env").unwrap().get("K").unwrap().str(), "v's");
        assert_eq!(b[1], Y::S("plain".into()));
        assert_eq!(y.get("c").unwrap().str(), "q");
    }

    #[test]
    #[should_panic(expected = "a plain scalar YAML does not allow")]
    fn refuses_a_colon_in_a_plain_scalar() {
        parse("description: a py: adapter\n");
    }
}

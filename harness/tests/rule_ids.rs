//! Every rule a check site names is an ID the compiler checked
//! (`crate::rule!`, issue 41 "Typed rule IDs"): outside `harness/src/rules/`
//! no string literal equal to a rule ID appears bare, so a typo'd or
//! removed rule cannot be recorded. The scanner's own fixtures prove it
//! finds one.

mod support;

use std::path::Path;

use support::harness_dir;

/// `file:line: id` for every bare rule-ID literal of `text` (comments
/// skipped; a literal right after `rule!(` is checked, not bare).
fn bare_ids(file: &str, text: &str, ids: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let code = match line.find("//") {
            // A `//` inside a string is rare in these files; a comment
            // quoting an ID is not a check site.
            Some(at) if !line[..at].contains('"') => &line[..at],
            _ => line,
        };
        let mut rest = code;
        let mut offset = 0;
        while let Some(start) = rest.find('"') {
            let Some(len) = rest[start + 1..].find('"') else {
                break;
            };
            let lit = &rest[start + 1..start + 1 + len];
            let before = &code[..offset + start];
            if ids.contains(&lit) && !before.ends_with("rule!(") {
                out.push(format!("{file}:{}: {lit}", n + 1));
            }
            let next = start + len + 2;
            offset += next;
            rest = &rest[next..];
        }
    }
    out
}

fn walk(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            walk(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn no_bare_rule_id_literal_outside_the_catalogue() {
    let ids: Vec<&str> = arrowcert::rules::all().map(|r| r.id).collect();
    let src = harness_dir().join("src");
    let mut files = Vec::new();
    walk(&src, &mut files);
    let mut bare = Vec::new();
    for f in files {
        let rel = f.strip_prefix(&src).unwrap().display().to_string();
        if rel.starts_with("rules/") {
            continue;
        }
        bare.extend(bare_ids(&rel, &std::fs::read_to_string(&f).unwrap(), &ids));
    }
    assert!(
        bare.is_empty(),
        "rule IDs named without crate::rule!(...):\n{}",
        bare.join("\n")
    );
}

#[test]
fn the_scanner_finds_a_planted_bare_id_and_passes_a_checked_one() {
    let ids = ["array.release.frees"];
    let text = "obs.check(crate::rule!(\"array.release.frees\"), ok, at, f);\n\
                // \"array.release.frees\" in a comment\n\
                obs.check(\"array.release.frees\", ok, at, f);\n";
    assert_eq!(
        bare_ids("planted.rs", text, &ids),
        vec!["planted.rs:3: array.release.frees".to_string()]
    );
}

#[test]
fn known_says_which_ids_the_catalogue_has() {
    // What crate::rule! asserts at compile time, asked at run time.
    let ask = |id: &str| arrowcert::rules::known(std::hint::black_box(id));
    assert!(ask("array.release.frees"));
    assert!(!ask("array.release.freez"));
    assert_eq!(
        arrowcert::rule!("schema.release.frees"),
        "schema.release.frees"
    );
    for r in arrowcert::rules::all() {
        assert!(arrowcert::rules::known(r.id), "{}", r.id);
    }
}

//! Every `unsafe fn` of the workspace's Rust code says in a `# Safety`
//! section what its caller must guarantee, private ones and `extern "C"`
//! callbacks included (clippy's `missing_safety_doc`, which CI denies,
//! reads public ones only). A method of a trait impl is exempt: its
//! contract is the trait's declaration, which must have the section.

use std::path::{Path, PathBuf};

/// Where the workspace's Rust code lives, from the repository root.
const ROOTS: &[&str] = &[
    "harness/src",
    "sdk/src",
    "harness/tests",
    "harness/benches",
    "consumers",
    "producers",
    "plugins",
    "bench",
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() && p.file_name().is_some_and(|n| n != "target") {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

fn indent(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

/// Is this line the start of an `unsafe fn` (not a function pointer type)?
fn is_unsafe_fn(line: &str) -> bool {
    let mut t = line.trim_start();
    if let Some(rest) = t.strip_prefix("pub") {
        t = match rest.strip_prefix('(') {
            Some(r) => r.split_once(')').map_or(r, |(_, after)| after),
            None => rest,
        }
        .trim_start();
    }
    let Some(rest) = t.strip_prefix("unsafe ") else {
        return false;
    };
    let rest = rest.strip_prefix("extern \"C\" ").unwrap_or(rest);
    rest.strip_prefix("fn ")
        .is_some_and(|r| r.starts_with(|c: char| c.is_alphabetic() || c == '_'))
}

/// The unsafe fns of `src` with no `# Safety` section, as `file:line`.
fn undocumented(file: &str, src: &str) -> Vec<String> {
    let lines: Vec<&str> = src.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if !is_unsafe_fn(line) {
            continue;
        }
        // The doc comments and attributes right above it.
        let documented = lines[..i]
            .iter()
            .rev()
            .take_while(|l| {
                let t = l.trim_start();
                t.starts_with("///") || t.starts_with("#[") || t.starts_with("//")
            })
            .any(|l| l.contains("# Safety"));
        if documented {
            continue;
        }
        // Inside a trait impl (or a macro body expanded into one)?
        let own = indent(line);
        let enclosing = lines[..i].iter().rev().find(|l| {
            let t = l.trim_start();
            !t.is_empty() && indent(l) < own && !t.starts_with("//") && !t.starts_with("#[")
        });
        let in_trait_impl = enclosing.is_some_and(|l| {
            let t = l.trim();
            (t.starts_with("impl") && t.contains(" for ")) || t.ends_with("=> {")
        });
        if own > 0 && in_trait_impl {
            continue;
        }
        out.push(format!("{file}:{}", i + 1));
    }
    out
}

#[test]
fn every_unsafe_fn_has_a_safety_section() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut files = Vec::new();
    for r in ROOTS {
        rust_files(&root.join(r), &mut files);
    }
    assert!(files.len() > 100, "{} files", files.len());
    let missing: Vec<String> = files
        .iter()
        .flat_map(|f| {
            let text = std::fs::read_to_string(f).expect("readable source");
            undocumented(&f.strip_prefix(root).unwrap().display().to_string(), &text)
        })
        .collect();
    assert!(
        missing.is_empty(),
        "unsafe fns with no `# Safety` section: {missing:#?}"
    );
}

#[test]
fn the_check_finds_an_undocumented_unsafe_fn() {
    let src = "/// Docs without the section.\nunsafe fn a() {}\n\
               /// # Safety\n/// None needed.\nunsafe extern \"C\" fn b() {}\n\
               type F = unsafe extern \"C\" fn(i32);\n\
               impl T for S {\n    unsafe fn c() {}\n}\n\
               impl S {\n    #[inline]\n    pub(crate) unsafe fn d() {}\n}\n";
    assert_eq!(undocumented("x.rs", src), vec!["x.rs:2", "x.rs:12"]);
}

//! ARCHITECTURE.md is the source of truth for the library's shape, and this
//! test holds the code to it:
//!
//! - its layer table ("## Layers") names every top-level module of
//!   `harness/src`, and no module imports one on its own row or above
//!   (each failure names the file and line of the import);
//! - its unsafe map ("## Where `unsafe` lives") gives the number of
//!   `unsafe` blocks of every module that has any, in the harness and in
//!   the plugin SDK (`sdk/src`), and no other module has one;
//! - the graph has no cycle, nothing imports `cli`, and the SDK's modules
//!   are acyclic with `abi` at their bottom.
//!
//! An edge is a path `crate::<module>` (or `crate::{<module>, ...}`), or a
//! `super::` path that climbs out of the module, in a module's code: comments,
//! string and char literals, `#[cfg(test)]` items and the files a
//! `#[cfg(test)] mod NAME;` names are left out. cargo-modules was tried
//! first (0.27.0, the last for this toolchain): it files the methods of a
//! trait impl under the module of the type (a `Stream` impl for
//! `abi::ArrowArrayStream` written in `certify` became an edge from `abi`
//! to `certify`), which reports cycles the code does not have.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Module -> module it imports -> one place (`file:line`) that does.
type Graph = BTreeMap<String, BTreeMap<String, String>>;

/// One source file: its top-level module, its path relative to the source
/// root, and its code with comments, literals and test items blanked.
struct File {
    module: String,
    rel: String,
    code: String,
}

/// `src` with comments blanked and the contents of string and char literals
/// replaced by spaces; newlines are kept, so line numbers stay true.
fn strip(src: &str) -> String {
    let b: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let keep_lines = |s: &[char], out: &mut String| {
        for c in s {
            out.push(if *c == '\n' { '\n' } else { ' ' });
        }
    };
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut i = 0;
    while i < b.len() {
        let at = |k: usize| b.get(k).copied().unwrap_or('\0');
        if b[i] == '/' && at(i + 1) == '/' {
            let end = (i..b.len()).find(|&k| b[k] == '\n').unwrap_or(b.len());
            keep_lines(&b[i..end], &mut out);
            i = end;
        } else if b[i] == '/' && at(i + 1) == '*' {
            let (mut depth, mut k) = (1, i + 2);
            while k < b.len() && depth > 0 {
                if b[k] == '/' && at(k + 1) == '*' {
                    depth += 1;
                    k += 2;
                } else if b[k] == '*' && at(k + 1) == '/' {
                    depth -= 1;
                    k += 2;
                } else {
                    k += 1;
                }
            }
            keep_lines(&b[i..k], &mut out);
            i = k;
        } else if b[i] == 'r'
            && (at(i + 1) == '"' || at(i + 1) == '#')
            && (i == 0 || !ident(b[i - 1]) || (b[i - 1] == 'b' && (i == 1 || !ident(b[i - 2]))))
        {
            // A raw string: r"..." or r#"..."#.
            let hashes = (i + 1..b.len()).take_while(|&k| b[k] == '#').count();
            let open = i + 1 + hashes;
            if at(open) != '"' {
                out.push(b[i]);
                i += 1;
                continue;
            }
            let mut k = open + 1;
            while k < b.len() && !(b[k] == '"' && (1..=hashes).all(|h| at(k + h) == '#')) {
                k += 1;
            }
            out.push('"');
            keep_lines(&b[open + 1..k.min(b.len())], &mut out);
            out.push('"');
            i = (k + 1 + hashes).min(b.len());
        } else if b[i] == '"' {
            let mut k = i + 1;
            while k < b.len() && b[k] != '"' {
                k += if b[k] == '\\' { 2 } else { 1 };
            }
            out.push('"');
            keep_lines(&b[i + 1..k.min(b.len())], &mut out);
            out.push('"');
            i = (k + 1).min(b.len());
        } else if b[i] == '\'' && (at(i + 2) == '\'' || at(i + 1) == '\\') {
            // A char literal ('{', '\n', '\u{7b}'); a lifetime has no
            // closing quote after one character.
            let from = if at(i + 1) == '\\' { i + 3 } else { i + 2 };
            let end = (from..b.len().min(i + 12))
                .find(|&k| b[k] == '\'')
                .unwrap_or(i + 1);
            out.push('\'');
            keep_lines(&b[i + 1..end], &mut out);
            out.push('\'');
            i = end + 1;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

/// `code` with every `#[cfg(test)]` item blanked (to its matching `}` or
/// its `;`), and the names of the test modules kept in files of their own.
fn without_tests(code: &str) -> (String, Vec<String>) {
    let mut out: Vec<char> = code.chars().collect();
    let mut files = Vec::new();
    let text: String = out.iter().collect();
    for (start, _) in text.match_indices("#[cfg(test)]") {
        let start = text[..start].chars().count();
        if out[start] != '#' {
            continue; // inside an item already blanked
        }
        let mut k = start + "#[cfg(test)]".len();
        let mut depth = 0;
        while k < out.len() {
            match out[k] {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth <= 0 {
                        break;
                    }
                }
                ';' if depth == 0 => break,
                _ => {}
            }
            k += 1;
        }
        let item: String = out[start + "#[cfg(test)]".len()..k.min(out.len())]
            .iter()
            .collect();
        let words: Vec<&str> = item.split_whitespace().collect();
        if let [.., "mod", name] = words.as_slice() {
            files.push(name.to_string());
        }
        let last = k.min(out.len() - 1);
        for c in &mut out[start..=last] {
            if *c != '\n' {
                *c = ' ';
            }
        }
    }
    (out.into_iter().collect(), files)
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("readable source directory") {
        let p = e.expect("entry").path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The source tree under `src` (`lib.rs` and `main.rs` aside), test files
/// left out.
fn read_tree(src: &Path) -> Vec<File> {
    let mut paths = Vec::new();
    rust_files(src, &mut paths);
    paths.sort();
    let mut files = Vec::new();
    let mut tests = BTreeSet::new();
    for p in paths {
        let rel = p.strip_prefix(src).unwrap().display().to_string();
        if rel == "lib.rs" || rel == "main.rs" {
            continue;
        }
        let text = std::fs::read_to_string(&p).expect("readable source");
        let (code, test_mods) = without_tests(&strip(&text));
        // `mod NAME;` in a/mod.rs names a/NAME.rs; in a/b.rs, a/b/NAME.rs.
        let base = match rel.strip_suffix("mod.rs") {
            Some(dir) => dir.to_string(),
            None => format!("{}/", rel.trim_end_matches(".rs")),
        };
        for m in test_mods {
            tests.insert(format!("{base}{m}.rs"));
            tests.insert(format!("{base}{m}/mod.rs"));
        }
        let module = rel
            .split('/')
            .next()
            .unwrap()
            .trim_end_matches(".rs")
            .to_string();
        files.push(File { module, rel, code });
    }
    files.retain(|f| !tests.contains(&f.rel));
    files
}

/// The leading identifier of `s`.
fn ident(s: &str) -> String {
    s.chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect()
}

/// The first segments a path names after `crate::` or `super::`: one
/// identifier, or each item's first at the top level of a `{...}` group.
fn heads(rest: &str) -> Vec<String> {
    let Some(group) = rest.strip_prefix('{') else {
        return vec![ident(rest)];
    };
    let mut out = Vec::new();
    let (mut level, mut item_start) = (0, true);
    for (j, c) in group.char_indices() {
        match c {
            '{' => level += 1,
            '}' if level == 0 => break,
            '}' => level -= 1,
            ',' if level == 0 => item_start = true,
            c if c.is_whitespace() => {}
            _ if item_start && level == 0 => {
                out.push(ident(&group[j..]));
                item_start = false;
            }
            _ => {}
        }
    }
    out
}

/// The top-level modules `file` names, each with the first line naming it.
fn edges_of(file: &File, modules: &BTreeSet<String>, g: &mut Graph) {
    // How deep the file's module is: a/mod.rs is `a` (1), a/b.rs `a::b` (2);
    // that many `super::` climb out of the top-level module.
    let depth = file.rel.trim_end_matches("/mod.rs").split('/').count();
    let code = &file.code;
    let line_of = |i: usize| code[..i].matches('\n').count() + 1;
    let mut named: Vec<(usize, String)> = Vec::new();
    for (i, _) in code.match_indices("crate::") {
        for h in heads(&code[i + "crate::".len()..]) {
            named.push((line_of(i), h));
        }
    }
    let mut from = 0;
    while let Some(i) = code[from..].find("super::") {
        let start = from + i;
        let before = code[..start].chars().last();
        let mut rest = &code[start..];
        let mut climbs = 0;
        while let Some(r) = rest.strip_prefix("super::") {
            climbs += 1;
            rest = r;
        }
        from = code.len() - rest.len();
        // Part of a longer word or path (`self::super::`) is left alone.
        let inside = before.is_some_and(|c| c == ':' || c.is_ascii_alphanumeric() || c == '_');
        if !inside && climbs >= depth {
            for h in heads(rest) {
                named.push((line_of(start), h));
            }
        }
    }
    named.sort();
    for (line, name) in named {
        if name != file.module && modules.contains(&name) {
            g.entry(file.module.clone())
                .or_default()
                .entry(name)
                .or_insert_with(|| format!("{}:{line}", file.rel));
        }
    }
}

/// The top-level modules of a tree.
fn modules_of(files: &[File]) -> BTreeSet<String> {
    files.iter().map(|f| f.module.clone()).collect()
}

/// The module graph of a tree, every edge with one place that makes it.
fn graph_of(files: &[File]) -> Graph {
    let modules = modules_of(files);
    let mut g = Graph::new();
    for m in &modules {
        g.entry(m.clone()).or_default();
    }
    for f in files {
        edges_of(f, &modules, &mut g);
    }
    g
}

/// A cycle of the graph, as its modules in order with the place of each
/// edge; `None` when there is none.
fn cycle(g: &Graph) -> Option<Vec<String>> {
    fn visit(
        g: &Graph,
        m: &str,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(m.to_string(), 1);
        stack.push(m.to_string());
        for (next, at) in g.get(m).into_iter().flatten() {
            match state.get(next.as_str()).copied().unwrap_or(0) {
                1 => {
                    let start = stack.iter().position(|s| s == next).unwrap();
                    let mut c: Vec<String> = stack[start..].to_vec();
                    c.push(format!("{next} (last edge at {at})"));
                    return Some(c);
                }
                0 => {
                    if let Some(c) = visit(g, next, state, stack) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(m.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for m in g.keys() {
        if state.get(m).copied().unwrap_or(0) == 0 {
            if let Some(c) = visit(g, m, &mut state, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

/// The rows of the Markdown table in section `heading` of `doc`, as cells
/// (header and separator rows left out).
fn table(doc: &str, heading: &str) -> Vec<Vec<String>> {
    let section = doc
        .split("\n## ")
        .find(|s| s.starts_with(heading))
        .unwrap_or_else(|| panic!("ARCHITECTURE.md has no section `## {heading}`"));
    section
        .lines()
        .filter(|l| l.starts_with('|'))
        .skip(2)
        .map(|l| {
            l.trim_matches('|')
                .split('|')
                .map(|c| c.trim().to_string())
                .collect()
        })
        .collect()
}

/// The names in backticks in a cell.
fn quoted(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// The layer table: module -> layer (0 at the bottom).
fn layers(doc: &str) -> BTreeMap<String, u32> {
    let mut out = BTreeMap::new();
    for row in table(doc, "Layers") {
        let layer: u32 = row[0]
            .parse()
            .unwrap_or_else(|_| panic!("a layer row's first cell is its number: {row:?}"));
        for m in quoted(&row[1]) {
            assert!(
                out.insert(m.clone(), layer).is_none(),
                "`{m}` is in two rows of the layer table"
            );
        }
    }
    out
}

/// Every way the graph breaks the layer table: modules missing from it or
/// named but absent, and each import of a module on the importer's row or
/// above, with its place.
fn layer_violations(g: &Graph, layers: &BTreeMap<String, u32>) -> Vec<String> {
    let mut out = Vec::new();
    for m in g.keys().filter(|m| !layers.contains_key(*m)) {
        out.push(format!("`{m}` is not in the layer table"));
    }
    for m in layers.keys().filter(|m| !g.contains_key(*m)) {
        out.push(format!("the layer table names `{m}`, which is no module"));
    }
    for (m, to) in g {
        let Some(&from) = layers.get(m) else { continue };
        for (t, at) in to {
            if let Some(&into) = layers.get(t).filter(|&&l| l >= from) {
                out.push(format!(
                    "{at}: `{m}` (layer {from}) imports `{t}` (layer {into}); a module may use only layers below its own"
                ));
            }
        }
    }
    out
}

/// `unsafe` blocks per top-level module of a tree, prefixed with `root`
/// (`harness/src/inspect`), and where the first of each is.
fn unsafe_blocks(files: &[File], root: &str) -> BTreeMap<String, (usize, String)> {
    let mut out: BTreeMap<String, (usize, String)> = BTreeMap::new();
    for f in files {
        for (n, line) in f.code.lines().enumerate() {
            let mut rest = line;
            while let Some(i) = rest.find("unsafe") {
                let before = rest[..i].chars().last();
                let after = rest[i + "unsafe".len()..].trim_start();
                if !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
                    && after.starts_with('{')
                {
                    let e = out
                        .entry(format!("{root}/{}", f.module))
                        .or_insert((0, format!("{root}/{}:{}", f.rel, n + 1)));
                    e.0 += 1;
                }
                rest = &rest[i + "unsafe".len()..];
            }
        }
    }
    out
}

/// The unsafe map: module path -> number of `unsafe` blocks it holds.
fn unsafe_map(doc: &str) -> BTreeMap<String, usize> {
    table(doc, "Where `unsafe` lives")
        .into_iter()
        .map(|row| {
            let module = quoted(&row[0]).into_iter().next().unwrap_or_default();
            let count = row[1]
                .parse()
                .unwrap_or_else(|_| panic!("an unsafe map row's second cell is a count: {row:?}"));
            (module, count)
        })
        .collect()
}

/// Where the counted blocks and the map disagree.
fn unsafe_violations(
    counted: &BTreeMap<String, (usize, String)>,
    map: &BTreeMap<String, usize>,
) -> Vec<String> {
    let mut out = Vec::new();
    for (m, (n, first)) in counted {
        match map.get(m) {
            None => out.push(format!(
                "{first}: `{m}` has {n} unsafe block(s) and is not in the unsafe map"
            )),
            Some(&said) if said != *n => out.push(format!(
                "`{m}` has {n} unsafe block(s); the unsafe map says {said}"
            )),
            Some(_) => {}
        }
    }
    for m in map.keys().filter(|m| !counted.contains_key(*m)) {
        out.push(format!(
            "the unsafe map names `{m}`, which has no unsafe block"
        ));
    }
    out
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn harness() -> Vec<File> {
    read_tree(&root().join("harness/src"))
}

fn sdk() -> Vec<File> {
    read_tree(&root().join("sdk/src"))
}

fn architecture() -> String {
    std::fs::read_to_string(root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md")
}

#[test]
fn the_module_graph_is_acyclic() {
    let g = graph_of(&harness());
    assert!(g.len() > 15, "{:?}", g.keys());
    if let Some(c) = cycle(&g) {
        panic!(
            "the top-level modules depend on each other in a cycle: {}",
            c.join(" -> ")
        );
    }
    let s = graph_of(&sdk());
    assert!(s.len() >= 6, "{:?}", s.keys());
    if let Some(c) = cycle(&s) {
        panic!(
            "the SDK's modules depend on each other in a cycle: {}",
            c.join(" -> ")
        );
    }
}

#[test]
fn abi_is_at_the_bottom_and_cli_at_the_top() {
    let g = graph_of(&harness());
    assert!(g["abi"].is_empty(), "abi depends on {:?}", g["abi"]);
    let s = graph_of(&sdk());
    assert!(
        s["abi"].is_empty(),
        "the SDK's abi depends on {:?}",
        s["abi"]
    );
    let into_cli: Vec<String> = g
        .iter()
        .filter_map(|(m, to)| to.get("cli").map(|at| format!("{m} ({at})")))
        .collect();
    assert!(into_cli.is_empty(), "the library imports cli: {into_cli:?}");
}

#[test]
fn the_code_keeps_the_documented_layers() {
    let layers = layers(&architecture());
    assert_eq!(layers.get("abi"), Some(&0), "{layers:?}");
    let top = layers.values().max().copied();
    assert_eq!(layers.get("cli").copied(), top, "cli is the top layer");
    let bad = layer_violations(&graph_of(&harness()), &layers);
    assert!(
        bad.is_empty(),
        "the code and ARCHITECTURE.md's layer table disagree:\n{}",
        bad.join("\n")
    );
}

#[test]
fn unsafe_lives_where_the_map_says() {
    let mut counted = unsafe_blocks(&harness(), "harness/src");
    counted.extend(unsafe_blocks(&sdk(), "sdk/src"));
    let bad = unsafe_violations(&counted, &unsafe_map(&architecture()));
    assert!(
        bad.is_empty(),
        "the code and ARCHITECTURE.md's unsafe map disagree:\n{}",
        bad.join("\n")
    );
}

fn file(rel: &str, src: &str) -> File {
    let (code, _) = without_tests(&strip(src));
    File {
        module: rel
            .split('/')
            .next()
            .unwrap()
            .trim_end_matches(".rs")
            .into(),
        rel: rel.into(),
        code,
    }
}

#[test]
fn a_cycle_is_found_and_shown_with_its_edges() {
    // The check can fail: a planted cycle, two modules naming each other.
    let mut files = vec![
        file("a.rs", "use crate::b::X;"),
        file("b/mod.rs", "fn f() { crate::c::g() }"),
        file(
            "c.rs",
            "// crate::b in a comment is no edge\nfn g() { let _ = \"crate::a\"; }\n#[cfg(test)]\nmod tests { use crate::a; }",
        ),
    ];
    assert_eq!(cycle(&graph_of(&files)), None);
    files.push(file("c.rs", "\n\nuse crate::a::Y;"));
    let c = cycle(&graph_of(&files)).expect("a -> b -> c -> a");
    assert_eq!(c.len(), 4, "{c:?}");
    assert!(c.last().unwrap().contains("c.rs:3"), "{c:?}");
}

const PLANTED_DOC: &str = "# x\n\n## Layers\n\n| Layer | Modules | What |\n|---|---|---|\n\
    | 1 | `top` | uses the bottom |\n| 0 | `bottom` `side` | uses nothing |\n\n\
    ## Where `unsafe` lives\n\n| Module | Blocks | Why |\n|---|---|---|\n\
    | `src/bottom` | 1 | a raw layout |\n";

#[test]
fn an_import_against_the_layers_is_named_with_its_file_and_line() {
    let layers = layers(PLANTED_DOC);
    assert_eq!(layers.len(), 3, "{layers:?}");
    let clean = vec![
        file(
            "top/mod.rs",
            "use crate::bottom::X;\nuse crate::{side, bottom::Y};",
        ),
        file("bottom.rs", "pub struct X;"),
        file("side/mod.rs", "fn f() {}"),
    ];
    assert_eq!(
        layer_violations(&graph_of(&clean), &layers),
        Vec::<String>::new()
    );

    // Planted: the bottom layer reaching up with `crate::`, a module using
    // one on its own row through a group, and `super::` climbing out.
    for (planted, at) in [
        (
            file("bottom.rs", "pub struct X;\n\nuse crate::top::Z;"),
            "bottom.rs:3",
        ),
        (
            file("bottom.rs", "use crate::{\n  side::S };"),
            "bottom.rs:1",
        ),
        (
            file("side/mod.rs", "\nfn f() { super::top::g() }"),
            "side/mod.rs:2",
        ),
        (
            file("side/deep.rs", "use super::super::bottom::X;"),
            "side/deep.rs:1",
        ),
    ] {
        let mut files = clean
            .iter()
            .map(|f| file(&f.rel, &f.code))
            .collect::<Vec<_>>();
        files.push(planted);
        let bad = layer_violations(&graph_of(&files), &layers);
        assert_eq!(bad.len(), 1, "{bad:?}");
        assert!(bad[0].starts_with(&format!("{at}: ")), "{bad:?}");
    }

    // `super::` inside its own module is no edge; nor is a test module.
    let mut files = clean
        .iter()
        .map(|f| file(&f.rel, &f.code))
        .collect::<Vec<_>>();
    files.push(file(
        "bottom/inner.rs",
        "use super::X;\n#[cfg(test)]\nmod tests { use crate::top; }",
    ));
    assert_eq!(
        layer_violations(&graph_of(&files), &layers),
        Vec::<String>::new()
    );

    // A module the table leaves out is named.
    files.push(file("extra.rs", "fn f() {}"));
    let bad = layer_violations(&graph_of(&files), &layers);
    assert_eq!(bad, vec!["`extra` is not in the layer table".to_string()]);
}

#[test]
fn unsafe_outside_the_map_or_miscounted_is_named() {
    let map = unsafe_map(PLANTED_DOC);
    let blocks = |files: &[File]| unsafe_blocks(files, "src");
    let clean = vec![
        file(
            "bottom.rs",
            "fn f() {\n    // SAFETY: planted\n    unsafe { g() }\n}\nunsafe fn g() {}",
        ),
        file(
            "top.rs",
            "fn f() { let _ = \"unsafe { }\"; }\n#[cfg(test)]\nmod tests { fn t() { unsafe { } } }",
        ),
    ];
    assert_eq!(
        unsafe_violations(&blocks(&clean), &map),
        Vec::<String>::new()
    );

    let mut files = clean
        .iter()
        .map(|f| file(&f.rel, &f.code))
        .collect::<Vec<_>>();
    files.push(file("top/more.rs", "\nfn f() { unsafe { h() } }"));
    assert_eq!(
        unsafe_violations(&blocks(&files), &map),
        vec![
            "src/top/more.rs:2: `src/top` has 1 unsafe block(s) and is not in the unsafe map"
                .to_string()
        ]
    );

    let files = vec![file(
        "bottom.rs",
        "fn f() { unsafe { g() }; unsafe { g() } }",
    )];
    assert_eq!(
        unsafe_violations(&blocks(&files), &map),
        vec!["`src/bottom` has 2 unsafe block(s); the unsafe map says 1".to_string()]
    );
}

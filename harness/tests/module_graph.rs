//! The library's top-level modules form an acyclic graph, from `abi` at the
//! bottom to `cli` at the top, and nothing in the library imports `cli`.
//! The plugin SDK (`sdk/src`, where `abi`, `device` and the plugin helpers
//! live; the harness re-exports them) is held to the same: acyclic, `abi`
//! at its bottom.
//!
//! An edge is a path `crate::<module>` in a module's code (comments and the
//! trailing `#[cfg(test)] mod tests` left out). cargo-modules was tried
//! first (0.27.0, the last for this toolchain): it files the methods of a
//! trait impl under the module of the type (a `Stream` impl for
//! `abi::ArrowArrayStream` written in `certify` became an edge from `abi`
//! to `certify`), which reports cycles the code does not have.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Graph = BTreeMap<String, BTreeMap<String, String>>;

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

/// The top-level modules each line of `src` names, with where.
fn edges_of(module: &str, file: &str, src: &str, modules: &BTreeSet<String>, g: &mut Graph) {
    let lines: Vec<&str> = src.lines().collect();
    for (n, line) in lines.iter().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        if line.trim() == "#[cfg(test)]"
            && lines
                .get(n + 1)
                .is_some_and(|l| l.trim_start().starts_with("mod "))
        {
            break;
        }
        for (i, _) in code.match_indices("crate::") {
            let name: String = code[i + "crate::".len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if name != module && modules.contains(&name) {
                g.entry(module.to_string())
                    .or_default()
                    .entry(name)
                    .or_insert_with(|| format!("{file}:{}", n + 1));
            }
        }
    }
}

/// The library's module graph, every edge with one place that makes it.
fn graph(src: &Path) -> Graph {
    let mut modules = BTreeSet::new();
    for e in std::fs::read_dir(src).expect("harness/src") {
        let p = e.expect("entry").path();
        let stem = p.file_stem().unwrap().to_string_lossy().to_string();
        if p.is_dir() || (stem != "lib" && stem != "main") {
            modules.insert(stem);
        }
    }
    let mut g = Graph::new();
    for m in &modules {
        g.entry(m.clone()).or_default();
        let mut files = Vec::new();
        let dir = src.join(m);
        if dir.is_dir() {
            rust_files(&dir, &mut files);
        } else {
            files.push(src.join(format!("{m}.rs")));
        }
        for f in files {
            let text = std::fs::read_to_string(&f).expect("readable source");
            let shown = f.strip_prefix(src).unwrap().display().to_string();
            edges_of(m, &shown, &text, &modules, &mut g);
        }
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

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn sdk_src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../sdk/src")
}

#[test]
fn the_module_graph_is_acyclic() {
    let g = graph(&src());
    assert!(g.len() > 15, "{:?}", g.keys());
    if let Some(c) = cycle(&g) {
        panic!(
            "the top-level modules depend on each other in a cycle: {}",
            c.join(" -> ")
        );
    }
    let s = graph(&sdk_src());
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
    let g = graph(&src());
    assert!(g["abi"].is_empty(), "abi depends on {:?}", g["abi"]);
    let s = graph(&sdk_src());
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
fn a_cycle_is_found_and_shown_with_its_edges() {
    // The check can fail: a planted cycle, two modules naming each other.
    let modules: BTreeSet<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
    let mut g = Graph::new();
    edges_of("a", "a.rs", "use crate::b::X;", &modules, &mut g);
    edges_of(
        "b",
        "b/mod.rs",
        "fn f() { crate::c::g() }",
        &modules,
        &mut g,
    );
    edges_of(
        "c",
        "c.rs",
        "// crate::b in a comment is no edge\nfn g() {}\n#[cfg(test)]\nmod tests { use crate::a; }",
        &modules,
        &mut g,
    );
    assert_eq!(cycle(&g), None, "{g:?}");
    edges_of("c", "c.rs", "\n\nuse crate::a::Y;", &modules, &mut g);
    let c = cycle(&g).expect("a -> b -> c -> a");
    assert_eq!(c.len(), 4, "{c:?}");
    assert!(c.last().unwrap().contains("c.rs:3"), "{c:?}");
}

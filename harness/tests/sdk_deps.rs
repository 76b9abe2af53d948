//! The plugin SDK (`sdk/`, crate `arrowcert-sdk`) keeps plugins off the
//! harness's dependencies (issue 40, item 5): the normal dependency tree of
//! the SDK and of every bundled Rust plugin has no clap, proptest, cudarc or
//! libloading. The CUDA plugins are the one exception, and only for cudarc
//! and libloading: loading the CUDA driver at run time is their job.
//!
//! The trees come from `cargo tree -p CRATE -e normal` (offline), which
//! resolves features for that crate alone, as building it does; `cargo
//! metadata`'s resolve unifies features across the whole workspace and
//! would charge the SDK with the `cuda` feature the harness turns on.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

/// What no plugin may link.
const FORBIDDEN: &[&str] = &["clap", "proptest", "cudarc", "libloading"];
/// What a CUDA plugin may link of those: the driver, loaded at run time.
const CUDA_ALLOWED: &[&str] = &["cudarc", "libloading"];

fn workspace_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn cargo(args: &[&str]) -> String {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(workspace_dir())
        .args(args)
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "cargo {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

/// The names of the packages in `crate`'s normal dependency tree.
fn normal_tree(krate: &str) -> BTreeSet<String> {
    let text = cargo(&[
        "tree",
        "--offline",
        "-q",
        "-p",
        krate,
        "-e",
        "normal",
        "--prefix",
        "none",
    ]);
    names(&text)
}

/// Package names out of `cargo tree --prefix none` lines (`name vX.Y.Z ...`).
fn names(tree: &str) -> BTreeSet<String> {
    tree.lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

/// The forbidden crates in `tree`, less those `allowed`.
fn forbidden_in(tree: &BTreeSet<String>, allowed: &[&str]) -> Vec<String> {
    FORBIDDEN
        .iter()
        .filter(|f| !allowed.contains(f) && tree.contains(**f))
        .map(|f| f.to_string())
        .collect()
}

/// The workspace's Rust plugins: every member with a cdylib target, and the
/// rlib the CUDA plugins share.
fn bundled_plugins() -> Vec<String> {
    let meta: Value = serde_json::from_str(&cargo(&[
        "metadata",
        "--offline",
        "--no-deps",
        "--format-version",
        "1",
    ]))
    .expect("cargo metadata is JSON");
    let mut out = Vec::new();
    for p in meta["packages"].as_array().expect("packages") {
        let name = p["name"].as_str().unwrap().to_string();
        let cdylib = p["targets"].as_array().unwrap().iter().any(|t| {
            t["crate_types"]
                .as_array()
                .unwrap()
                .iter()
                .any(|c| c == "cdylib")
        });
        if cdylib || name == "arrowcert-cuda-common" {
            out.push(name);
        }
    }
    out
}

#[test]
fn the_sdk_and_the_bundled_plugins_link_none_of_the_harness_dependencies() {
    let plugins = bundled_plugins();
    // The reference pair, the arrow-rs adapters and the four CUDA plugins.
    assert!(
        plugins.contains(&"arrowcert-producer-reference".to_string()) && plugins.len() >= 8,
        "{plugins:?}"
    );
    let mut bad = Vec::new();
    for krate in std::iter::once("arrowcert-sdk".to_string()).chain(plugins) {
        let tree = normal_tree(&krate);
        let allowed = if krate.contains("cuda") {
            CUDA_ALLOWED
        } else {
            &[]
        };
        // Every one of them goes through the SDK, not the harness.
        if krate != "arrowcert-sdk"
            && (!tree.contains("arrowcert-sdk") || tree.contains("arrowcert"))
        {
            bad.push(format!("{krate}: links the harness or not the SDK"));
        }
        let found = forbidden_in(&tree, allowed);
        if !found.is_empty() {
            bad.push(format!("{krate}: {}", found.join(", ")));
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

#[test]
fn the_check_finds_the_harness_dependencies_where_they_are() {
    // The check can fail: the harness itself links all four.
    let tree = normal_tree("arrowcert");
    assert_eq!(forbidden_in(&tree, &[]), FORBIDDEN, "{tree:?}");
    assert_eq!(
        forbidden_in(&tree, CUDA_ALLOWED),
        ["clap", "proptest"],
        "{tree:?}"
    );
    let parsed = names("arrowcert-sdk v0.1.0 (/x/sdk)\nclap v4.5.0\nclap v4.5.0 (*)\n");
    assert_eq!(forbidden_in(&parsed, &[]), ["clap"]);
}

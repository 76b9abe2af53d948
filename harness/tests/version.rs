//! `arrowcert --version` prints the version, the commit, the plugin ABI
//! version, the report schema version and the rule catalogue's version
//! (issue 40, item 6); reports record the same (`tool`, checked in
//! certify.rs, roundtrip.rs and matrix.rs). `-V` stays one line.

mod support;

use std::process::Command;

use arrowcert::report::{Tool, REPORT_VERSION};

fn version_output(flag: &str) -> String {
    let out = Command::new(support::arrowcert_exe())
        .arg(flag)
        .output()
        .expect("arrowcert runs");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8")
}

/// The `key: value` lines after the first.
fn field<'a>(text: &'a str, key: &str) -> &'a str {
    text.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(": "))
        .unwrap_or_else(|| panic!("no `{key}:` line in {text:?}"))
}

#[test]
fn version_prints_every_version_a_report_records() {
    let text = version_output("--version");
    let first = text.lines().next().unwrap();
    assert_eq!(
        first,
        format!("arrowcert {}", env!("CARGO_PKG_VERSION")),
        "{text}"
    );
    let commit = field(&text, "commit");
    // The build script's value, which the tests get too.
    assert_eq!(commit, env!("ARROWCERT_COMMIT"), "{text}");
    assert!(
        commit == "unknown"
            || env!("ARROWCERT_COMMIT_SOURCE") == "env"
            || (commit.len() == 40 && commit.chars().all(|c| c.is_ascii_hexdigit())),
        "{text}"
    );
    assert_eq!(
        field(&text, "plugin ABI"),
        arrowcert::plugin::ABI_VERSION.to_string()
    );
    assert_eq!(field(&text, "plugin ABI"), "1");
    assert_eq!(field(&text, "report schema"), REPORT_VERSION.to_string());
    let catalogue = field(&text, "rule catalogue");
    assert_eq!(catalogue, arrowcert::rules::catalogue_version());
    let (n, _) = catalogue.split_once('-').unwrap();
    assert_eq!(n.parse::<usize>().unwrap(), arrowcert::rules::all().count());

    // The same values a report's `tool` holds.
    let tool = Tool::default();
    assert_eq!(
        text.trim_end(),
        format!("arrowcert {}", tool.version_text()),
        "{text}"
    );
    assert_eq!(tool.commit, commit);
    assert_eq!(tool.report_version, REPORT_VERSION);
    assert_eq!(tool.plugin_abi_version, 1);
}

#[test]
fn short_version_is_one_line() {
    let text = version_output("-V");
    assert_eq!(
        text,
        format!("arrowcert {}\n", env!("CARGO_PKG_VERSION")),
        "{text}"
    );
}

#[test]
fn the_commit_is_the_checkout_s_head_when_read_from_git() {
    // Given by ARROWCERT_COMMIT, or no checkout: nothing to compare with.
    if env!("ARROWCERT_COMMIT_SOURCE") != "git" {
        assert!(env!("ARROWCERT_COMMIT_SOURCE") == "env" || env!("ARROWCERT_COMMIT") == "unknown");
        return;
    }
    let out = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(support::workspace_dir())
        .output()
        .expect("git ran at build time, so it runs now");
    let head = String::from_utf8_lossy(&out.stdout).trim().to_string();
    // The build script watches HEAD and the branch's ref, so a commit made
    // since the last build rebuilds the binary with the new one.
    assert_eq!(env!("ARROWCERT_COMMIT"), head);
}

//! The project's Python scripts' own tests, run where CI runs everything
//! (`cargo test --workspace`): `scripts/test_expectations_from_reports.py`
//! (the expectations draft script: exact entries, `--exact`, `--seen`, traced
//! causes and `--retrace`) and `scripts/metrics/test_shape.py` (the
//! code-shape figures of issue 41: code lines, function lengths, rule-ID
//! literals outside the catalogue).

mod support;

use std::process::Command;

use support::workspace_dir;

/// Runs a Python unittest file of `scripts/`; it must pass.
fn python_tests_pass(rel: &str) {
    let script = workspace_dir().join(rel);
    let out = match Command::new("python3")
        .arg("-W")
        .arg("error")
        .arg(&script)
        .output()
    {
        Ok(out) => out,
        Err(e) => {
            // The brief's fresh machine has python3; say so if this one has not.
            println!("SKIPPED: python3 cannot be run here: {e}");
            return;
        }
    };
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(text.contains("OK"), "{text}");
}

#[test]
fn the_expectations_draft_scripts_tests_pass() {
    python_tests_pass("scripts/test_expectations_from_reports.py");
}

#[test]
fn the_shape_metrics_scripts_tests_pass() {
    python_tests_pass("scripts/metrics/test_shape.py");
}

//! action.yml, the GitHub Action (issue 40, item 4): its composite steps
//! run as written (support/workflow.rs plays the runner, with
//! upload-artifact replaced by a local copy), installing arrowcert from the
//! release tarball (support/release.rs) through the action's own download
//! (a file:// URL) or a local path. A passing run writes the Markdown job
//! summary and uploads the report and JUnit; a mutant producer makes the
//! action fail with certify's exit code, still with summary and upload; an
//! input cannot inject shell; a wrong checksum stops the install. The
//! example workflow passes only inputs the action has.

#[path = "support/release.rs"]
mod release;
mod support;
#[path = "support/workflow.rs"]
mod workflow;

use std::path::{Path, PathBuf};

use support::*;
use workflow::{ActionRun, Runner};

/// PATH for the steps: the system's tools (bash, tar, curl, sha256sum),
/// no arrowcert.
const PATH: &str = "/usr/local/bin:/usr/bin:/bin";

fn run_action(name: &str, with: &[(&str, &str)], env: &[(&str, &str)]) -> (ActionRun, PathBuf) {
    let dir = scratch(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // The installed binary must not fall back on this checkout.
    let mut env = env.to_vec();
    env.push(("ARROWCERT_NO_SOURCE_TREE", "1"));
    let runner = Runner {
        action_dir: &workspace_dir(),
        dir: &dir,
        path: PATH,
        env: &env,
        repository: "example/arrowcert",
        reference: "main",
    };
    (runner.run(with), dir)
}

fn sha256(p: &Path) -> String {
    let out = std::process::Command::new("sha256sum")
        .arg(p)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string()
}

/// The uploaded report and JUnit of a run, checked to be there.
fn uploaded(run: &ActionRun) -> (arrowcert::report::Report, String) {
    let art = run.artifacts.join("arrowcert-report");
    let report = arrowcert::report::read(&art.join("report.json"))
        .unwrap_or_else(|e| panic!("{e}\n{}", run.log));
    let junit = std::fs::read_to_string(art.join("junit.xml")).unwrap();
    assert!(
        junit.starts_with("<?xml") && junit.contains("<testsuite"),
        "{junit:.300}"
    );
    (report, junit)
}

#[test]
fn a_passing_run_writes_the_summary_and_uploads_report_and_junit() {
    let tarball = release::tarball();
    let url = format!("file://{}", tarball.display());
    let sum = sha256(tarball);
    let (run, _) = run_action(
        "action-pass",
        &[
            ("version", "0.0.0-not-used"),
            ("release-url", &url),
            ("sha256", &sum),
            ("producer", "reference"),
            ("consumer", "reference"),
            ("cases", "3"),
            ("seed", "7"),
        ],
        &[],
    );
    assert_eq!(run.failed, None, "{}", run.log);
    assert_eq!(run.outputs["exit-code"], "0");
    assert_eq!(run.outputs["outcome"], "pass");
    assert!(
        run.log.contains(&format!("downloading {url}")),
        "{}",
        run.log
    );
    assert!(
        run.path_added[0].ends_with("runner-temp/arrowcert/bin"),
        "{:?}",
        run.path_added
    );
    assert!(
        run.summary.starts_with("## arrowcert certify: ok\n"),
        "{}",
        run.summary
    );
    assert!(run.summary.contains("Seed 7"), "{}", run.summary);
    assert!(!run.summary.contains("Broken rules"), "{}", run.summary);
    let (report, junit) = uploaded(&run);
    assert_eq!(report.outcome.unwrap().exit_code(), 0);
    assert_eq!(report.seed, Some(7));
    assert_eq!(report.plugins.len(), 2);
    assert!(
        !junit.contains("<failure"),
        "a passing run's JUnit has failures"
    );
}

#[test]
fn a_mutant_producer_fails_the_action_after_summary_and_upload() {
    let tarball = release::tarball();
    // The reference producer it wraps: the tarball's own copy.
    let unpacked = release::unpack(tarball, &scratch("action-mutant-base"));
    let base = unpacked.join("lib/arrowcert/libarrowcert_producer_reference.so");
    let mutant = support::mutants::build(
        "action-mutant",
        "producers/mutants/mutant_producer.c",
        "mutant_producer",
    );
    let (run, _) = run_action(
        "action-fail",
        &[
            ("tarball", tarball.to_str().unwrap()),
            ("producer", mutant.to_str().unwrap()),
            ("cases", "2"),
            ("seed", "1"),
        ],
        &[
            ("ARROWCERT_MUTANT", "release-keeps-pointer"),
            ("ARROWCERT_MUTANT_BASE", base.to_str().unwrap()),
        ],
    );
    // The last step fails, with certify's exit code: every step ran.
    assert_eq!(run.failed, Some(("outcome".to_string(), 1)), "{}", run.log);
    assert_eq!(run.outputs["outcome"], "fail");
    assert!(
        run.log
            .contains("::error::arrowcert certify: fail (exit code 1)"),
        "{}",
        run.log
    );
    assert!(
        run.summary.starts_with("## arrowcert certify: FAILED\n"),
        "{}",
        run.summary
    );
    assert!(
        run.summary
            .lines()
            .any(|l| l.starts_with("| array.release.marks-released | MUST |")),
        "{}",
        run.summary
    );
    assert!(
        run.summary.contains("arrowcert replay --producer"),
        "{}",
        run.summary
    );
    let (report, junit) = uploaded(&run);
    assert_eq!(report.outcome.unwrap().exit_code(), 1);
    assert!(junit.contains("<failure"), "the JUnit has no failure");
    assert!(junit.contains("array.release.marks-released"));
}

#[test]
fn an_input_cannot_inject_shell_and_bad_input_fails_the_action() {
    let tarball = release::tarball();
    let (run, dir) = run_action(
        "action-inject",
        &[
            ("tarball", tarball.to_str().unwrap()),
            ("producer", "reference; touch injected $(touch injected2)"),
            ("cases", "1"),
        ],
        &[],
    );
    assert_eq!(run.failed, Some(("outcome".to_string(), 2)), "{}", run.log);
    assert_eq!(run.outputs["outcome"], "bad_input");
    for f in ["injected", "injected2"] {
        assert!(
            !dir.join("workspace").join(f).exists(),
            "the input ran as shell"
        );
    }
    assert!(
        run.summary.contains("No report was written"),
        "{}",
        run.summary
    );
}

#[test]
fn a_wrong_checksum_stops_the_install() {
    let tarball = release::tarball();
    let (run, _) = run_action(
        "action-checksum",
        &[
            ("tarball", tarball.to_str().unwrap()),
            ("sha256", &"0".repeat(64)),
        ],
        &[],
    );
    assert_eq!(
        run.failed,
        Some(("install arrowcert".to_string(), 2)),
        "{}",
        run.log
    );
    assert!(run.log.contains("SHA-256 is"), "{}", run.log);
    assert!(run.summary.is_empty());
}

#[test]
fn without_a_version_the_install_says_so() {
    let (run, _) = run_action("action-no-version", &[], &[]);
    assert_eq!(
        run.failed,
        Some(("install arrowcert".to_string(), 2)),
        "{}",
        run.log
    );
    assert!(
        run.log
            .contains("no arrowcert version: set the version input"),
        "{}",
        run.log
    );
}

#[test]
fn the_example_workflow_passes_only_the_actions_inputs() {
    let action =
        workflow::parse(&std::fs::read_to_string(workspace_dir().join("action.yml")).unwrap());
    let inputs: Vec<&str> = action
        .get("inputs")
        .unwrap()
        .map()
        .iter()
        .map(|(k, _)| k.as_str())
        .collect();
    let wf = workflow::parse(
        &std::fs::read_to_string(
            workspace_dir().join("docs/examples/workflows/certify-pycapsule.yml"),
        )
        .unwrap(),
    );
    let steps = wf
        .get("jobs")
        .unwrap()
        .get("certify")
        .unwrap()
        .get("steps")
        .unwrap()
        .list();
    let step = steps
        .iter()
        .find(|s| {
            s.get("uses")
                .is_some_and(|u| u.str().contains("/arrowcert@"))
        })
        .expect("a step that uses the action");
    let with = step.get("with").unwrap().map();
    for (k, _) in with {
        assert!(inputs.contains(&k.as_str()), "the action has no input {k}");
    }
    for k in ["producer", "consumer", "python"] {
        assert!(with.iter().any(|(w, _)| w == k), "the example sets no {k}");
    }
    assert!(with
        .iter()
        .any(|(k, v)| k == "producer" && v.str().starts_with("py:")));
}

/// PyYAML's reading of `file`, scalars as strings (`on`, which YAML 1.1
/// reads as true, as GitHub reads it), or `None` (SKIPPED) without it.
fn pyyaml(file: &Path) -> Option<serde_json::Value> {
    const READ: &str = r#"import json, sys, yaml
def s(x):
    if isinstance(x, dict): return {('on' if k is True else str(k)): s(v) for k, v in x.items()}
    if isinstance(x, list): return [s(v) for v in x]
    if isinstance(x, bool): return 'true' if x else 'false'
    return '' if x is None else str(x)
print(json.dumps(s(yaml.safe_load(open(sys.argv[1])))))
"#;
    match std::process::Command::new("python3")
        .args(["-c", READ])
        .arg(file)
        .output()
    {
        Ok(o) if o.status.success() => Some(serde_json::from_slice(&o.stdout).unwrap()),
        Ok(o) if String::from_utf8_lossy(&o.stderr).contains("No module named 'yaml'") => {
            eprintln!("SKIPPED: python3 has no PyYAML to cross-check the YAML reader");
            None
        }
        Ok(o) => panic!(
            "PyYAML cannot read {}: {}",
            file.display(),
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => {
            eprintln!("SKIPPED: no python3 to cross-check the YAML reader: {e}");
            None
        }
    }
}

#[test]
fn a_real_yaml_parser_reads_the_action_and_the_example_as_the_runner_does() {
    for f in [
        "action.yml",
        "docs/examples/workflows/certify-pycapsule.yml",
    ] {
        let path = workspace_dir().join(f);
        let Some(real) = pyyaml(&path) else { return };
        let ours = workflow::to_json(&workflow::parse(&std::fs::read_to_string(&path).unwrap()));
        assert_eq!(ours, real, "{f}");
    }
}

#[test]
fn the_action_certifies_a_pycapsule_library_through_a_bundled_adapter() {
    // The example workflow's route (a py: adapter in the job's Python),
    // with pyarrow from the project-local environment (`just real`).
    let venv = workspace_dir().join("target/real/venv");
    if !venv.join("bin/python").exists() {
        eprintln!(
            "SKIPPED: {} is missing (`just real` installs pyarrow there)",
            venv.display()
        );
        return;
    }
    let tarball = release::tarball();
    let python = venv.join("bin/python");
    let (run, _) = run_action(
        "action-pyarrow",
        &[
            ("tarball", tarball.to_str().unwrap()),
            ("producer", "py:pyarrow"),
            ("consumer", "py:pyarrow"),
            ("python", python.to_str().unwrap()),
            ("cases", "2"),
            ("seed", "5"),
        ],
        &[],
    );
    // pyarrow breaks rules (reports/FINDINGS.md): verdicts, pass or fail,
    // and the action's result is certify's.
    let outcome = run.outputs["outcome"].as_str();
    assert!(matches!(outcome, "pass" | "fail"), "{outcome}\n{}", run.log);
    match outcome {
        "pass" => assert_eq!(run.failed, None, "{}", run.log),
        _ => assert_eq!(run.failed, Some(("outcome".to_string(), 1)), "{}", run.log),
    }
    let (report, _) = uploaded(&run);
    assert!(
        report.plugins.iter().all(|p| p.name.starts_with("pyarrow")),
        "{:?}",
        report.plugins
    );
    assert!(
        report.summary.passed > 0 && report.summary.harness_errors == 0,
        "{:?}",
        report.summary
    );
    assert!(run.summary.contains("**pyarrow"), "{}", run.summary);
}

#[test]
fn the_download_url_comes_from_the_actions_repository_and_tag() {
    // curl is a stub that records its arguments and fails as a 404 does:
    // no network, and the URL is what is checked.
    let dir = scratch("action-url");
    let _ = std::fs::remove_dir_all(&dir);
    let stub = dir.join("stub");
    std::fs::create_dir_all(&stub).unwrap();
    let args = dir.join("curl-args");
    std::fs::write(
        stub.join("curl"),
        format!("#!/bin/bash\necho \"$@\" >{}\nexit 22\n", args.display()),
    )
    .unwrap();
    std::fs::set_permissions(
        stub.join("curl"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let path = format!("{}:{PATH}", stub.display());
    let run = Runner {
        action_dir: &workspace_dir(),
        dir: &dir,
        path: &path,
        env: &[],
        repository: "someone/arrowcert",
        reference: "v1.2.3",
    }
    .run(&[]);
    let url = "https://github.com/someone/arrowcert/releases/download/v1.2.3/arrowcert-1.2.3-x86_64-linux-gnu.tar.gz";
    assert_eq!(
        run.failed,
        Some(("install arrowcert".to_string(), 2)),
        "{}",
        run.log
    );
    assert!(
        run.log.contains(&format!("cannot download {url}")),
        "{}",
        run.log
    );
    assert!(std::fs::read_to_string(&args).unwrap().contains(url));
}

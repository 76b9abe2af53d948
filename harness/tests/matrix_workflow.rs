//! docs/examples/matrix.yml, the GitHub Actions workflow that spreads the
//! matrix over shard jobs and merges them: its shard and merge commands,
//! run here as written (with a small MATRIX_ARGS), give the same matrix as
//! one unsharded run.

mod support;

use std::process::Command;

use arrowcert::matrix;

/// The `run:` command of the step named `name`.
fn step_command(workflow: &str, name: &str) -> String {
    let mut lines = workflow
        .lines()
        .skip_while(|l| l.trim() != format!("- name: {name}"));
    lines
        .next()
        .unwrap_or_else(|| panic!("no step named {name}"));
    for l in lines {
        let t = l.trim();
        if let Some(cmd) = t.strip_prefix("run: ") {
            return cmd.to_string();
        }
        assert!(!t.starts_with("- "), "step {name} has no one-line run");
    }
    panic!("step {name} has no run")
}

/// The shard numbers of the job matrix (`shard: [1, 2, 3]`).
fn shards(workflow: &str) -> Vec<u32> {
    let line = workflow
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("shard: ["))
        .expect("a shard list");
    line["shard: [".len()..line.len() - 1]
        .split(',')
        .map(|s| s.trim().parse().expect("a shard number"))
        .collect()
}

#[test]
fn the_workflows_shard_and_merge_commands_give_the_unsharded_matrix() {
    let workflow =
        std::fs::read_to_string(support::workspace_dir().join("docs/examples/matrix.yml")).unwrap();
    let list = shards(&workflow);
    assert_eq!(list, vec![1, 2, 3]);
    let n = list.len();
    let shard = step_command(&workflow, "shard");
    let merge = step_command(&workflow, "merge");
    assert!(shard.contains(&format!("/{n} ")), "{shard}");
    // The workflow's MATRIX_ARGS is the full matrix; here a small one.
    assert!(workflow.contains("MATRIX_ARGS: --gold"));
    support::bundled();
    // Two producers (the reference and a fixture whose every call fails)
    // into the reference consumer: 5 units over 3 shards. Both are built
    // by the tests themselves (the arrow-rs plugins are not, under
    // `cargo test` alone).
    let markup = support::scratch("matrix-workflow-fixtures").join("libmarkup_producer.so");
    support::cc(
        &["-shared", "-fPIC"],
        &support::harness_dir().join("tests/fixtures/markup_producer.c"),
        &markup,
    );
    let exe = support::arrowcert_exe();
    let exe = exe.to_str().unwrap();
    let args = format!(
        "--producers reference,{} --consumers reference --cases 2 --seed 11 --jobs 1",
        markup.display()
    );
    let args = args.as_str();
    let dir = support::scratch("matrix-workflow");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let run = |cmd: &str| {
        let out = Command::new("bash")
            .args(["-eo", "pipefail", "-c", cmd])
            .current_dir(&dir)
            .env("MATRIX_ARGS", args)
            .output()
            .expect("bash runs");
        assert!(
            out.status.success(),
            "{cmd}\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    };
    for i in &list {
        run(&shard
            .replace("${{ matrix.shard }}", &i.to_string())
            .replace("target/debug/arrowcert", exe));
    }
    run(&merge.replace("target/debug/arrowcert", exe));
    run(&format!("{exe} matrix $MATRIX_ARGS --out whole"));
    let merged = matrix::read(&dir.join("matrix/matrix.json")).unwrap();
    let whole = matrix::read(&dir.join("whole/matrix.json")).unwrap();
    assert!(merged.complete && whole.complete);
    assert_eq!(merged.shards.len(), n);
    let verdicts = |m: &matrix::Matrix| {
        m.units
            .iter()
            .map(|u| (u.id.clone(), u.status, u.summary.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(verdicts(&merged), verdicts(&whole));
    assert!(dir.join("merge.log").exists());
    for f in ["matrix.html", "matrix.json", "matrix.md"] {
        assert!(dir.join("matrix").join(f).exists(), "{f}");
    }
}

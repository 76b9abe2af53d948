//! `certify --malformed` (docs/MALFORMED.md): the robustness grade is
//! reported apart from the rules, never changes the outcome or the exit
//! code, and grades the reference consumer, a consumer that accepts
//! garbage and one that crashes as each deserves.

mod support;

use std::path::PathBuf;
use std::process::{Command, Output};

use arrowcert::report::Report;
use support::*;

/// A consumer that is the reference consumer on every valid input and
/// crashes on every malformed case: it aborts whenever it runs in a
/// malformed worker (whose environment names the producer mutant).
fn crashes_on_malformed() -> PathBuf {
    let mut src = String::from(
        r#"#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
static void* base;
__attribute__((constructor)) static void load(void) {
  base = dlopen(getenv("TEST_MALFORMED_BASE"), RTLD_NOW | RTLD_LOCAL);
  if (!base) abort();
}
static void* fn(const char* name) { return dlsym(base, name); }
static void crash_if_malformed(void) {
  if (getenv("ARROWCERT_MALFORMED_MUTANT")) abort();
}
int32_t arrowcert_plugin_abi_version(void) { return 1; }
const char* arrowcert_plugin_name(void) { return "crashes on malformed input"; }
int32_t arrowcert_plugin_supports_device(int32_t t) {
  return ((int32_t (*)(int32_t))fn("arrowcert_plugin_supports_device"))(t);
}
const char* arrowcert_last_error(void) {
  return ((const char* (*)(void))fn("arrowcert_last_error"))();
}
void arrowcert_free(void* p) { ((void (*)(void*))fn("arrowcert_free"))(p); }
"#,
    );
    for (name, params, args) in [
        (
            "arrowcert_consume_array",
            "void* s, void* a, void* o, void* n",
            "s, a, o, n",
        ),
        (
            "arrowcert_consume_device_array",
            "void* s, void* a, void* o, void* n",
            "s, a, o, n",
        ),
        (
            "arrowcert_consume_stream",
            "void* s, void* o, void* n",
            "s, o, n",
        ),
        (
            "arrowcert_consume_device_stream",
            "void* s, void* o, void* n",
            "s, o, n",
        ),
    ] {
        src.push_str(&format!(
            "int {name}({params}) {{\n  crash_if_malformed();\n  return ((int (*)({params}))fn(\"{name}\"))({args});\n}}\n"
        ));
    }
    let dir = scratch("malformed");
    let c = dir.join("crashes_on_malformed.c");
    let lib = dir.join("libcrashes_on_malformed.so");
    std::fs::write(&c, src).unwrap();
    cc(&["-shared", "-fPIC", "-ldl"], &c, &lib);
    lib
}

fn certify(args: &[&str], report: &str) -> (Output, Report) {
    let path = scratch("malformed").join(report);
    let out = Command::new(arrowcert_exe())
        .arg("certify")
        .args(args)
        .args(["--cases", "0", "-j", "2", "--report"])
        .arg(&path)
        .env("TEST_MALFORMED_BASE", &bundled().1)
        .output()
        .expect("arrowcert runs");
    let r = arrowcert::report::read(&path).unwrap_or_else(|e| {
        panic!(
            "{e}\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out, r)
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn the_reference_consumer_refuses_or_reads_every_graded_case() {
    let (_, consumer) = bundled();
    let (out, r) = certify(
        &["--consumer", consumer.to_str().unwrap(), "--malformed"],
        "reference.json",
    );
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let rob = r.robustness.expect("a robustness section");
    assert_eq!(rob.grade, "A", "{}", rob.summary);
    assert!(rob.counts.graded > 80, "{}", rob.summary);
    assert!(rob.counts.refused > 50, "{}", rob.summary);
    for c in rob.cases.iter().filter(|c| c.graded) {
        let fine = match c.result.as_str() {
            "refused" | "accepted_equal" => true,
            // Odd but valid-shaped input, read as it was sent.
            "accepted_differs" => c.level != "MUST",
            _ => false,
        };
        assert!(fine, "{}: {} ({:?})", c.id, c.result, c.detail);
        assert!(c
            .id
            .starts_with(&format!("malformed/{}/{}/", c.path, c.mutant)));
    }
    // Apart from the rules: no malformed case among the cases or rules.
    assert!(r.cases.iter().all(|c| !c.id.starts_with("malformed/")));
    assert!(stdout(&out).contains("robustness (--malformed"));
    assert!(rob
        .skipped_mutants
        .iter()
        .any(|s| s.mutant == "leak-one-child" && !s.why.is_empty()));
}

#[test]
fn crashing_on_every_malformed_case_is_graded_f_and_never_the_outcome() {
    let lib = crashes_on_malformed();
    let (reference, _) = bundled();
    let args = [
        "--producer",
        reference.to_str().unwrap(),
        "--consumer",
        lib.to_str().unwrap(),
    ];
    let (plain_out, plain) = certify(&args, "crashing-plain.json");
    let mut with = args.to_vec();
    with.push("--malformed");
    let junit = scratch("malformed").join("crashing.xml");
    with.extend(["--junit", junit.to_str().unwrap()]);
    let (out, r) = certify(&with, "crashing.json");
    // The certification passes either way, with the same rule verdicts.
    assert_eq!(plain_out.status.code(), Some(0), "{}", stdout(&plain_out));
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert_eq!(
        r.outcome.as_ref().unwrap().outcome,
        plain.outcome.as_ref().unwrap().outcome
    );
    let verdicts = |r: &Report| -> Vec<(String, String)> {
        r.rules
            .iter()
            .map(|s| (s.rule.clone(), s.verdict.as_str().to_string()))
            .collect()
    };
    assert_eq!(verdicts(&r), verdicts(&plain));
    assert!(plain.robustness.is_none(), "absent without --malformed");
    assert!(!stdout(&plain_out).contains("robustness"));
    // Every exercised malformed case crashed, and says so.
    let rob = r.robustness.expect("a robustness section");
    assert_eq!(rob.grade, "F", "{}", rob.summary);
    assert_eq!(
        rob.counts.crashed,
        rob.counts.cases - rob.counts.not_run,
        "{}",
        rob.summary
    );
    assert!(rob.counts.crashed > 80);
    let crash = rob.cases.iter().find(|c| c.result == "crashed").unwrap();
    assert!(
        crash.detail.as_deref().unwrap_or("").contains("SIGABRT"),
        "{crash:?}"
    );
    // JUnit: a suite of its own, never failures or errors.
    let xml = std::fs::read_to_string(&junit).unwrap();
    let suite = xml
        .split("robustness (--malformed)")
        .nth(1)
        .expect("the suite");
    assert!(suite.contains("value=\"crashed\""));
    assert!(!suite.contains("<failure") && !suite.contains("<error"));
}

#[test]
fn a_consumer_that_accepts_invalid_structures_is_graded_b() {
    // arrow-rs's own importer, with no validation after it: it reads
    // `d:40,5` as a 128-bit decimal of precision 40.
    let exe = arrowcert_exe();
    let lib = exe
        .parent()
        .unwrap()
        .join("libarrowcert_consumer_arrow_rs.so");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .current_dir(workspace_dir())
        .args(["build", "-q", "-p", "arrowcert-consumer-arrow-rs"])
        .env("CARGO_TARGET_DIR", exe.parent().unwrap().parent().unwrap())
        .status()
        .unwrap();
    assert!(status.success());
    let (_, r) = certify(
        &[
            "--consumer",
            lib.to_str().unwrap(),
            "--malformed",
            "--skip",
            "consumer/",
        ],
        "arrow-rs.json",
    );
    let rob = r.robustness.expect("a robustness section");
    assert_eq!(rob.grade, "B", "{}", rob.summary);
    let garbage = rob
        .cases
        .iter()
        .find(|c| c.id == "malformed/array/decimal256-without-bit-width/temporal_decimal")
        .unwrap();
    assert_eq!(garbage.result, "accepted_differs", "{garbage:?}");
}

#[test]
fn malformed_needs_a_consumer() {
    let (producer, _) = bundled();
    let out = run_arrowcert(&[
        "certify",
        "--producer",
        producer.to_str().unwrap(),
        "--malformed",
    ]);
    assert_bad_input(&out, "--malformed grades a consumer");
}

#[test]
fn list_names_the_malformed_cases() {
    let (_, consumer) = bundled();
    let out = run_arrowcert(&[
        "certify",
        "--consumer",
        consumer.to_str().unwrap(),
        "--cases",
        "0",
        "--malformed",
        "--list",
        "malformed/stream",
    ]);
    let text = stdout(&out);
    assert!(
        text.contains("malformed/stream/get-schema-null/primitive: malformed case"),
        "{text}"
    );
    assert!(!text.contains("malformed/array/"), "{text}");
}

#[test]
fn matrix_malformed_adds_a_robustness_section_only_when_asked() {
    let (producer, consumer) = bundled();
    let run = |flag: Option<&str>, out: &str| -> (String, arrowcert::matrix::Matrix) {
        let dir = scratch("malformed").join(out);
        let mut args = vec![
            "matrix",
            "--producers",
            producer.to_str().unwrap(),
            "--consumers",
            consumer.to_str().unwrap(),
            "--cases",
            "0",
            "--filter",
            "/primitive",
            "--out",
            dir.to_str().unwrap(),
        ];
        args.extend(flag);
        let o = run_arrowcert(&args);
        assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
        let md = std::fs::read_to_string(dir.join("matrix.md")).unwrap();
        let json = std::fs::read_to_string(dir.join("matrix.json")).unwrap();
        (md, serde_json::from_str(&json).unwrap())
    };
    let (md, m) = run(Some("--malformed"), "matrix-malformed");
    assert!(md.contains("## Robustness (--malformed)"), "{md}");
    let graded: Vec<_> = m
        .units
        .iter()
        .filter_map(|u| u.robustness.as_ref())
        .collect();
    assert_eq!(graded.len(), 1, "the consumer certification only");
    assert_eq!(graded[0].grade, "A");
    let cell = arrowcert::matrix::render::md(&consumer.display().to_string());
    assert!(md.contains(&format!("| {cell} | A |")), "{md}");
    let (md, m) = run(None, "matrix-plain");
    assert!(!md.contains("Robustness"));
    assert!(m.units.iter().all(|u| u.robustness.is_none()));
}

//! `arrowcert matrix` and `arrowcert merge`: every plugin-supplied string
//! renders as text, shards merge into the unsharded matrix, merge refuses
//! inconsistent input, and the page loads in a real headless browser.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use arrowcert::matrix::{self, Status};

fn markup_producer() -> PathBuf {
    let lib = support::scratch("matrix-fixtures").join("libmarkup_producer.so");
    support::cc(
        &["-shared", "-fPIC"],
        &support::harness_dir().join("tests/fixtures/markup_producer.c"),
        &lib,
    );
    lib
}

fn matrix_run(extra: &[&str], out: &Path) -> Output {
    support::bundled();
    let out = Command::new(support::arrowcert_exe())
        .args([
            "matrix", "--cases", "2", "--seed", "11", "--jobs", "1", "--out",
        ])
        .arg(out)
        .args(extra)
        .output()
        .expect("arrowcert runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    out
}

fn text(out: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The markup fixture as a producer beside the reference, into the
/// reference consumer: 2 producer certifications, 1 consumer, 2 pairs.
fn markup_matrix(out: &Path, extra: &[&str]) -> Output {
    let markup = markup_producer();
    let producers = format!("reference,{}", markup.display());
    let mut args = vec!["--producers", &producers, "--consumers", "reference"];
    args.extend_from_slice(extra);
    matrix_run(&args, out)
}

#[test]
fn plugin_names_and_errors_render_as_text() {
    let out_dir = support::scratch("matrix-markup");
    let out = markup_matrix(&out_dir, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));

    let m = matrix::read(&out_dir.join("matrix.json")).unwrap();
    assert!(m.complete);
    assert_eq!(m.units.len(), 5);
    let status = |id: &str| m.units.iter().find(|u| u.id.ends_with(id)).unwrap().status;
    assert_eq!(status("pair/reference/reference"), Status::Pass);
    assert_eq!(status("certify/producer/reference"), Status::Pass);
    assert_eq!(status("certify/consumer/reference"), Status::Pass);
    // The fixture's every call fails cleanly: partial, never pass.
    assert_eq!(status("libmarkup_producer.so/reference"), Status::Partial);
    assert_eq!(status("libmarkup_producer.so"), Status::Partial);
    // Each certification unit says what it reached: the reference producer
    // every type family of the generator on every path it exports.
    let reference = m
        .units
        .iter()
        .find(|u| u.id.ends_with("certify/producer/reference"))
        .unwrap();
    let families = arrowcert::generate::types::family_names().len() as u64;
    for path in [
        "producer/schema",
        "producer/array",
        "producer/stream",
        "producer/device_stream",
    ] {
        let c = &reference.coverage[path];
        assert_eq!(
            (c.exercised, c.refused, c.not_reached),
            (families, 0, 0),
            "{path}"
        );
    }
    let page = std::fs::read_to_string(out_dir.join("matrix.md")).unwrap();
    assert!(
        page.contains(&format!(
            "- certify/producer/reference: producer/array {families}/0/0"
        )),
        "{page}"
    );

    let html = std::fs::read_to_string(out_dir.join("matrix.html")).unwrap();
    for raw in [
        "<script",
        "<img",
        "<b>bold",
        "</table><h1>",
        "onerror=alert(1)>",
    ] {
        assert!(!html.contains(raw), "raw {raw:?} in matrix.html");
    }
    // ... and the same strings are there as text.
    assert!(html.contains(
        "&lt;script&gt;alert(&#39;name&#39;)&lt;/script&gt;&lt;b&gt;bold&lt;/b&gt; &amp;"
    ));
    assert!(html.contains("&lt;img src=x onerror=alert(1)&gt;"));
    // Self-contained: nothing fetched from anywhere.
    for external in [
        "http://", "https://", "src=\"", "href=\"", "@import", "url(",
    ] {
        assert!(!html.contains(external), "{external:?} in matrix.html");
    }

    let md = std::fs::read_to_string(out_dir.join("matrix.md")).unwrap();
    for raw in ["<script", "<img", "<b>"] {
        assert!(!md.contains(raw), "raw {raw:?} in matrix.md");
    }
    assert!(md.contains("&lt;script&gt;"));
    // Every row of the pair table has the header's column count: a pipe in
    // a plugin string cannot add a column.
    let pair_rows: Vec<&str> = md
        .lines()
        .skip_while(|l| !l.starts_with("## Pairs by interface path"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .collect();
    let cols = |l: &str| l.replace("\\|", "").matches('|').count();
    assert!(pair_rows.len() >= 4);
    assert!(
        pair_rows.iter().all(|l| cols(l) == cols(pair_rows[0])),
        "{pair_rows:#?}"
    );
}

#[test]
fn shards_merge_into_the_whole_matrix() {
    let base = support::scratch("matrix-shards");
    let whole = base.join("whole");
    assert_eq!(markup_matrix(&whole, &[]).status.code(), Some(0));
    let shards = base.join("shards");
    for s in ["1/3", "2/3", "3/3"] {
        let out = markup_matrix(&shards, &["--shard", s]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    }
    let merged = base.join("merged");
    let out = support::run_arrowcert(&[
        "merge",
        "--out",
        merged.to_str().unwrap(),
        shards.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let a = matrix::read(&whole.join("matrix.json")).unwrap();
    let b = matrix::read(&merged.join("matrix.json")).unwrap();
    assert!(b.complete);
    assert_eq!(b.shards.len(), 3);
    let verdicts = |m: &matrix::Matrix| {
        m.units
            .iter()
            .map(|u| (u.id.clone(), u.status, u.summary.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(verdicts(&a), verdicts(&b));
    // Unit reports stay reachable from the merged matrix.
    for u in &b.units {
        let r = u.report.as_ref().expect("a report");
        let path = if Path::new(r).is_absolute() {
            PathBuf::from(r)
        } else {
            merged.join(r)
        };
        assert!(path.exists(), "{}", path.display());
    }
    assert!(merged.join("matrix.html").exists() && merged.join("matrix.md").exists());

    // A missing shard: written, marked incomplete, not certified (exit 3),
    // names what is missing.
    let partial = base.join("partial");
    let out = support::run_arrowcert(&[
        "merge",
        "--out",
        partial.to_str().unwrap(),
        shards.join("matrix-shard-1-of-3.json").to_str().unwrap(),
        shards.join("matrix-shard-3-of-3.json").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(text(&out).contains("INCOMPLETE"));
    let p = matrix::read(&partial.join("matrix.json")).unwrap();
    assert!(!p.complete);
    assert!(std::fs::read_to_string(partial.join("matrix.html"))
        .unwrap()
        .contains("INCOMPLETE"));

    // The same shard twice: bad input.
    let one = shards.join("matrix-shard-2-of-3.json");
    let out = support::run_arrowcert(&[
        "merge",
        "--out",
        base.join("dup").to_str().unwrap(),
        one.to_str().unwrap(),
        one.to_str().unwrap(),
    ]);
    support::assert_bad_input(&out, "already merged");

    // Not a matrix file: bad input.
    let out = support::run_arrowcert(&[
        "merge",
        "--out",
        "/tmp",
        support::harness_dir().join("Cargo.toml").to_str().unwrap(),
    ]);
    support::assert_bad_input(&out, "not a matrix file");
}

#[test]
fn a_sharded_run_with_generated_cases_needs_a_seed() {
    let out = Command::new(support::arrowcert_exe())
        .args([
            "matrix",
            "--producers",
            "reference",
            "--consumers",
            "reference",
            "--shard",
            "1/2",
        ])
        .output()
        .unwrap();
    support::assert_bad_input(&out, "--shard with generated cases needs --seed");
    let out = support::run_arrowcert(&["matrix", "--producers", "reference", "--shard", "3/2"]);
    support::assert_bad_input(&out, "expected I/N");
}

#[test]
fn a_library_that_does_not_load_is_an_error_unit_not_a_crash() {
    let out_dir = support::scratch("matrix-bad");
    let bogus = support::scratch("matrix-fixtures").join("not-a-library.so");
    std::fs::write(&bogus, "hello").unwrap();
    let out = matrix_run(
        &[
            "--producers",
            bogus.to_str().unwrap(),
            "--consumers",
            "reference",
        ],
        &out_dir,
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let m = matrix::read(&out_dir.join("matrix.json")).unwrap();
    // The matrix records what `arrowcert --version` prints.
    assert_eq!(m.tool, arrowcert::report::Tool::default());
    let prod = m
        .units
        .iter()
        .find(|u| u.id.starts_with("certify/producer/"))
        .unwrap();
    assert_eq!(prod.status, Status::Error);
    assert!(
        prod.message.as_deref().unwrap().contains("not"),
        "{:?}",
        prod.message
    );
}

/// Debian's chromium, if installed (`scripts/install-chromium.sh`; CI
/// installs it and sets ARROWCERT_REQUIRE_CHROMIUM=1, so there a missing
/// browser fails this test instead of skipping it).
fn chromium() -> Option<PathBuf> {
    let found = ["chromium", "chromium-browser"]
        .iter()
        .map(|n| PathBuf::from("/usr/bin").join(n))
        .find(|p| p.exists());
    if found.is_none() {
        assert!(
            std::env::var_os("ARROWCERT_REQUIRE_CHROMIUM").is_none(),
            "ARROWCERT_REQUIRE_CHROMIUM is set but /usr/bin/chromium is missing (scripts/install-chromium.sh)"
        );
        eprintln!("SKIPPED: matrix page browser check: no /usr/bin/chromium (install it with scripts/install-chromium.sh)");
    }
    found
}

fn headless(browser: &Path, profile: &Path) -> Command {
    let mut c = Command::new(browser);
    c.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1400,1000",
    ])
    .arg(format!("--user-data-dir={}", profile.display()));
    c
}

#[test]
fn the_page_loads_in_headless_chromium_with_every_pair() {
    let Some(browser) = chromium() else { return };
    let out_dir = support::scratch("matrix-browser");
    let out = markup_matrix(&out_dir, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let page = out_dir.join("matrix.html");
    let url = format!("file://{}", page.display());
    let m = matrix::read(&out_dir.join("matrix.json")).unwrap();

    let dom = headless(&browser, &out_dir.join("profile-dom"))
        .args(["--dump-dom", &url])
        .output()
        .expect("chromium runs");
    let dom_text = String::from_utf8_lossy(&dom.stdout);
    assert!(
        dom.status.success() && dom_text.contains("</html>"),
        "{}",
        text(&dom)
    );
    // The browser parsed every pair cell and the certification rows...
    for p in &m.producers {
        for c in &m.consumers {
            let attr = format!(
                "data-pair=\"{}\"",
                matrix::render::html(&format!("{p} -> {c}"))
            );
            assert!(dom_text.contains(&attr), "{attr} not in the DOM");
        }
    }
    assert_eq!(
        dom_text.matches("data-pair=").count(),
        m.producers.len() * m.consumers.len()
    );
    assert_eq!(dom_text.matches("data-unit=\"certify/").count(), 3);
    // ...and no element came out of a plugin string: the markup is text.
    assert!(!dom_text.contains("<script") && !dom_text.contains("<img"));
    assert!(dom_text.contains("&lt;img src=x onerror=alert(1)&gt;"));

    let shot = out_dir.join("matrix.png");
    let s = headless(&browser, &out_dir.join("profile-shot"))
        .arg(format!("--screenshot={}", shot.display()))
        .arg(&url)
        .output()
        .expect("chromium runs");
    assert!(s.status.success(), "{}", text(&s));
    let png = std::fs::read(&shot).expect("a screenshot");
    assert!(
        png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 10_000,
        "{} bytes",
        png.len()
    );
    // Kept where a person can look at it after the run.
    let keep = support::arrowcert_exe()
        .parent()
        .unwrap()
        .join("matrix-test-screenshot.png");
    let _ = std::fs::copy(&shot, &keep);
    eprintln!("screenshot: {}", keep.display());
}

#[test]
fn a_pair_whose_values_arrive_with_types_changed_is_marked_not_failed() {
    let out_dir = support::scratch("matrix-types-changed");
    let (_, reference_consumer) = support::bundled();
    let mutant = support::mutant_consumer().display().to_string();
    let out = Command::new(support::arrowcert_exe())
        .env("ARROWCERT_MUTANT", "all-columns-nullable")
        .env("ARROWCERT_MUTANT_BASE", reference_consumer)
        .args([
            "matrix",
            "--cases",
            "2",
            "--seed",
            "11",
            "--jobs",
            "1",
            "--producers",
            "reference",
            "--consumers",
            &mutant,
            "--out",
        ])
        .arg(&out_dir)
        .output()
        .expect("arrowcert runs");
    let m = matrix::read(&out_dir.join("matrix.json"))
        .unwrap_or_else(|e| panic!("{e}\n{}", text(&out)));
    let pair = m
        .units
        .iter()
        .find(|u| u.kind == matrix::UnitKind::Pair)
        .unwrap();
    assert_eq!(pair.status, Status::Pass, "{pair:#?}");
    assert!(
        pair.changed > 0 && pair.changed < pair.summary.passed,
        "{pair:#?}"
    );
    assert_eq!(pair.changed, pair.changed_paths.values().sum::<u64>());
    assert!(!pair.changed_cases.is_empty());
    assert!(pair.changed_cases[0]
        .differences
        .iter()
        .any(|d| d.contains("nullable is true")));

    let md = std::fs::read_to_string(out_dir.join("matrix.md")).unwrap();
    assert!(md.contains("| ✔≈ "), "{md}");
    assert!(md.contains("## Values equal, types changed"), "{md}");
    let html = std::fs::read_to_string(out_dir.join("matrix.html")).unwrap();
    assert!(html.contains("<b>✔≈ "), "{html}");
    assert!(html.contains("id=\"changed\""), "{html}");
}

/// Units run two at a time give the matrix one at a time gives: the same
/// units, in plan order, with the same verdicts and counts.
#[test]
fn units_run_at_once_give_the_same_matrix() {
    let base = support::scratch("matrix-at-once");
    let one = base.join("one");
    let two = base.join("two");
    assert_eq!(markup_matrix(&one, &[]).status.code(), Some(0));
    let out = markup_matrix(&two, &["--units-at-once", "2"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let verdicts = |m: &matrix::Matrix| {
        m.units
            .iter()
            .map(|u| (u.id.clone(), u.status, u.summary.clone()))
            .collect::<Vec<_>>()
    };
    let a = matrix::read(&one.join("matrix.json")).unwrap();
    let b = matrix::read(&two.join("matrix.json")).unwrap();
    assert_eq!(verdicts(&a), verdicts(&b));
    assert_eq!(b.units.len(), 5);
}

/// `--filter` runs part of every unit's plan (CI's smoke matrix), and the
/// matrix says so: its data names the filters, and every unit ran only
/// cases whose ID contains one.
#[test]
fn a_filtered_matrix_runs_part_of_every_unit_and_says_so() {
    let out_dir = support::scratch("matrix-filter").join("m");
    let out = matrix_run(
        &[
            "--producers",
            "reference",
            "--consumers",
            "reference",
            "--filter",
            "/primitive",
        ],
        &out_dir,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let m = matrix::read(&out_dir.join("matrix.json")).unwrap();
    assert_eq!(m.data.filters, vec!["/primitive".to_string()]);
    for u in &m.units {
        let r = arrowcert::report::read(&out_dir.join(u.report.as_ref().unwrap())).unwrap();
        assert!(!r.cases.is_empty(), "{}", u.id);
        assert!(
            r.cases.iter().all(|c| c.id.contains("/primitive")),
            "{}",
            u.id
        );
    }
    let page = std::fs::read_to_string(out_dir.join("matrix.md")).unwrap();
    assert!(page.contains("a smoke run"), "{page}");
}

/// CI's smoke check (scripts/matrix/smoke-check.py): a unit whose status
/// moved from the committed baseline, or one missing, fails it; the same
/// statuses pass; blessing writes the baseline.
#[test]
fn the_smoke_check_fails_when_a_verdict_moves() {
    let dir = support::scratch("smoke-check");
    let script = support::workspace_dir().join("scripts/matrix/smoke-check.py");
    let matrix = dir.join("matrix.json");
    std::fs::write(
        &matrix,
        r#"{"data": {"filters": ["/primitive"]}, "units": [
            {"id": "pair/a/b", "status": "pass", "message": null},
            {"id": "pair/a/c", "status": "fail", "message": "1 case arrived different"}]}"#,
    )
    .unwrap();
    let baseline = dir.join("baseline.json");
    let check = |bless: bool| {
        let mut c = Command::new("python3");
        c.arg(&script).arg(&matrix).arg(&baseline);
        if bless {
            c.env("ARROWCERT_BLESS", "1");
        } else {
            c.env_remove("ARROWCERT_BLESS");
        }
        c.output().expect("python3 runs")
    };
    assert_eq!(check(true).status.code(), Some(0));
    assert_eq!(check(false).status.code(), Some(0));
    // A verdict that moves.
    let text = std::fs::read_to_string(&baseline).unwrap();
    std::fs::write(&baseline, text.replace("\"fail\"", "\"pass\"")).unwrap();
    let out = check(false);
    assert_eq!(out.status.code(), Some(1));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("pair/a/c: fail (baseline: pass)"), "{said}");
    // A unit the baseline does not have.
    std::fs::write(
        &baseline,
        r#"{"filters": ["/primitive"], "units": {"pair/a/b": "pass"}}"#,
    )
    .unwrap();
    let out = check(false);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("not in the baseline"));
}

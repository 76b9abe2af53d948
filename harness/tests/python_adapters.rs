//! `py:` adapters (docs/PYTHON_ADAPTERS.md): a library certified from a
//! Python file written only from that page, and bad adapters as bad input.
//!
//! They need a Python with headers and a shared libpython and the pinned
//! nanoarrow package: `scripts/python/setup-test-env.sh` makes
//! `target/python-test/venv` (CI runs it and sets
//! ARROWCERT_REQUIRE_PY_ADAPTERS=1, so there the tests cannot skip).

mod support;

use std::path::PathBuf;
use std::process::Command;

use arrowcert::report::Verdict;
use support::*;

/// The interpreter of the test environment, or `None` (the test says
/// SKIPPED with why) when it is not set up here.
fn python() -> Option<PathBuf> {
    let py = workspace_dir().join("target/python-test/venv/bin/python");
    if py.exists() {
        return Some(py);
    }
    let why = format!(
        "{} is missing: run scripts/python/setup-test-env.sh",
        py.display()
    );
    assert!(
        std::env::var("ARROWCERT_REQUIRE_PY_ADAPTERS").as_deref() != Ok("1"),
        "ARROWCERT_REQUIRE_PY_ADAPTERS=1 but {why}"
    );
    eprintln!("SKIPPED: {why}");
    None
}

/// The first ```python block of docs/PYTHON_ADAPTERS.md, as a file.
fn adapter_from_the_docs() -> PathBuf {
    let page = std::fs::read_to_string(workspace_dir().join("docs/PYTHON_ADAPTERS.md")).unwrap();
    let start = page.find("```python\n").expect("a python block") + "```python\n".len();
    let end = start + page[start..].find("```").expect("its end");
    let file = scratch("py-adapters").join("nanoarrow_adapter.py");
    std::fs::write(&file, &page[start..end]).unwrap();
    file
}

fn arrowcert(python: &PathBuf) -> Command {
    let mut c = Command::new(arrowcert_exe());
    c.arg("--python").arg(python);
    c
}

#[test]
fn the_adapter_on_the_docs_page_certifies_nanoarrow_both_ways() {
    let Some(py) = python() else { return };
    let adapter = adapter_from_the_docs();
    let spec = format!("py:{}", adapter.display());
    let report = scratch("py-adapters").join("docs-adapter.json");
    let _ = std::fs::remove_file(&report);
    let ids = [
        "producer/schema/primitive",
        "producer/array/primitive/batch:0",
        "producer/array/primitive/batch:0/slice:13+12",
        "producer/stream/primitive",
        "consumer/array/plain/primitive/batch:0",
        "consumer/stream/plain/primitive",
        "consumer/stream/varied/primitive",
    ];
    let out = arrowcert(&py)
        .args(["certify", "--producer", &spec, "--consumer", &spec])
        .args(["--cases", "0", "--report"])
        .arg(&report)
        .arg("--exact")
        .args(ids)
        .output()
        .expect("arrowcert runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let r = arrowcert::report::read(&report).expect("a report");
    assert!(r.complete);
    assert_eq!(r.cases.len(), ids.len());
    for c in &r.cases {
        assert_eq!(c.verdict, Verdict::Pass, "{c:?}");
    }
    // The names come from the adapter's NAME, on both sides.
    assert!(
        r.plugins
            .iter()
            .filter(|p| p.name.starts_with("nanoarrow ") && p.name.ends_with("(Python)"))
            .count()
            == 2,
        "{:?}",
        r.plugins
    );
}

#[test]
fn an_adapter_that_does_not_import_is_bad_input_in_one_line() {
    let Some(py) = python() else { return };
    let file = scratch("py-adapters").join("broken_adapter.py");
    std::fs::write(&file, "import a_module_that_is_not_installed_anywhere\n").unwrap();
    let out = arrowcert(&py)
        .args(["certify", "--producer"])
        .arg(format!("py:{}", file.display()))
        .output()
        .expect("arrowcert runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("could not set itself up")
            && stderr.contains("a_module_that_is_not_installed_anywhere"),
        "{stderr}"
    );
}

#[test]
fn a_missing_adapter_file_or_interpreter_is_bad_input() {
    let out = Command::new(arrowcert_exe())
        .args(["certify", "--producer", "py:no/such/adapter.py"])
        .output()
        .expect("arrowcert runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("no such adapter file"), "{stderr}");
    let file = scratch("py-adapters").join("any_adapter.py");
    std::fs::write(&file, "def load(data):\n    return data\n").unwrap();
    let out = Command::new(arrowcert_exe())
        .args(["--python", "/no/such/python3", "certify", "--producer"])
        .arg(format!("py:{}", file.display()))
        .output()
        .expect("arrowcert runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("/no/such/python3"), "{stderr}");
}

/// Shrinking runs each candidate as a run of its own; the workers of the
/// certification serve them with the library still loaded (the adapter's
/// module is imported once per worker process, not once per candidate).
#[test]
fn shrink_candidates_run_in_workers_that_keep_the_library_loaded() {
    let Some(py) = python() else { return };
    let dir = scratch("py-adapters");
    let imports = dir.join("imports.txt");
    let _ = std::fs::remove_file(&imports);
    let adapter = dir.join("wrong_values.py");
    std::fs::write(
        &adapter,
        r#"import os
import nanoarrow as na

with open(os.environ["ARROWCERT_TEST_IMPORTS"], "a") as f:
    f.write("imported\n")

NAME = "wrong values (test adapter)"


def load(data):
    given = na.Array(data)
    if len(given) < 2:
        return given  # right: the smallest scenarios pass, so a shrink walks
    return na.Array([7, 7, 7], na.int64())  # not what it was given
"#,
    )
    .unwrap();
    let report = dir.join("shrink-reuse.json");
    let _ = std::fs::remove_file(&report);
    let out = arrowcert(&py)
        .env("ARROWCERT_TEST_IMPORTS", &imports)
        .args([
            "certify",
            "--producer",
            &format!("py:{}", adapter.display()),
        ])
        .args(["--cases", "3", "--seed", "1", "--shrink-candidates", "20"])
        .args(["--jobs", "2", "--report"])
        .arg(&report)
        .arg("producer/stream/gen/")
        .output()
        .expect("arrowcert runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    let r = arrowcert::report::read(&report).expect("a report");
    let tried: u64 = r.shrunk.iter().map(|s| s.tried).sum();
    let crashed = r.summary.crashed;
    let loads = std::fs::read_to_string(&imports).unwrap().lines().count() as u64;
    // Without kept workers every candidate started one (and imported the
    // module); with them, the two workers of the run serve every candidate.
    assert!(tried >= 10, "{tried} candidates tried: {stdout}");
    assert!(
        loads <= 2 + crashed + 2,
        "{loads} imports for {tried} candidates: {stdout}"
    );
}

/// A library that leaves reference cycles behind (objects only Python's
/// collector frees, dozens of calls later) is not charged for the
/// collector's backlog: the bridge collects the young generations after
/// every call, so the repetitions of export and release see no growth.
#[test]
fn reference_cycles_a_library_leaves_are_not_a_release_leak() {
    let Some(py) = python() else { return };
    let dir = scratch("py-adapters");
    let adapter = dir.join("cycles.py");
    std::fs::write(
        &adapter,
        r#"import nanoarrow as na

NAME = "cycles (test adapter)"


class _Cycle:
    pass


def load(data):
    a = na.Array(data)
    c = _Cycle()
    c.me = c  # garbage only the collector frees, holding the array
    c.array = a
    return a
"#,
    )
    .unwrap();
    let report = dir.join("cycles.json");
    let _ = std::fs::remove_file(&report);
    let out = arrowcert(&py)
        .args([
            "certify",
            "--producer",
            &format!("py:{}", adapter.display()),
        ])
        .args(["--cases", "0", "--report"])
        .arg(&report)
        .args([
            "--exact",
            "producer/schema/primitive",
            "producer/stream/primitive",
        ])
        .output()
        .expect("arrowcert runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    let r = arrowcert::report::read(&report).expect("a report");
    for rule in ["schema.release.frees", "stream.release.frees"] {
        let v = r.rules.iter().find(|x| x.rule == rule).expect(rule);
        assert_eq!(v.verdict, Verdict::Pass, "{rule}: {stdout}");
    }
}

/// A read() that raises leaves what it read to its traceback's frames;
/// when a collection during the call moved them to the oldest generation,
/// only a full collection frees them. The bridge runs one after a call
/// that raised, so the data handed over is released by the time the call
/// returns (pandas' "year out of range" read as "never released" in some
/// runs only, by how many objects the call made).
#[test]
fn what_a_raising_read_held_in_old_cycles_is_released() {
    let Some(py) = python() else { return };
    let dir = scratch("py-adapters");
    let adapter = dir.join("raises_old.py");
    std::fs::write(
        &adapter,
        r#"import gc

import nanoarrow as na

NAME = "raises holding the data in an old cycle (test adapter)"


class _Cycle:
    pass


def read(data):
    a = na.Array(data)
    if a.schema.n_fields == 1 and a.schema.field(0).name == "x":
        return a  # the bridge's probe (one int64 column "x"): served
    c = _Cycle()
    c.me = c  # garbage only the collector frees once this frame goes
    c.array = a
    del a
    gc.collect(0)
    gc.collect(1)  # c survives two collections: the oldest generation
    raise ValueError("year 14302 is out of range")
"#,
    )
    .unwrap();
    let report = dir.join("raises_old.json");
    let _ = std::fs::remove_file(&report);
    let out = arrowcert(&py)
        .args([
            "certify",
            "--consumer",
            &format!("py:{}", adapter.display()),
        ])
        .args(["--cases", "0", "--report"])
        .arg(&report)
        .args(["--exact", "consumer/stream/plain/primitive"])
        .output()
        .expect("arrowcert runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let r = arrowcert::report::read(&report).expect("a report");
    let case = r
        .cases
        .iter()
        .find(|c| c.id == "consumer/stream/plain/primitive")
        .unwrap_or_else(|| panic!("the case ran: {stdout}"));
    assert!(
        !case
            .violations
            .iter()
            .any(|v| v.rule == "consumer.release.once"),
        "{stdout}\n{case:?}"
    );
    assert!(
        matches!(case.verdict, Verdict::Error | Verdict::Limitation),
        "{stdout}\n{case:?}"
    );
}

/// One unsupported column hides a whole scenario no more: a library that
/// declines one column of a mixed generated scenario is shown every
/// column of it alone (`gen/<i>~col:<k>`), and every type family has a
/// single-type scenario of its own (`gen/type:<family>`), so each type it
/// does take is exercised and each it refuses is named by its own words.
#[test]
fn a_declined_column_no_longer_hides_the_others() {
    let Some(py) = python() else { return };
    let dir = scratch("py-adapters");
    let adapter = dir.join("declines_unions.py");
    std::fs::write(
        &adapter,
        r#"import nanoarrow as na

NAME = "declines unions, views and maps (test adapter)"


def formats(schema):
    yield schema.format
    for k in range(schema.n_children):
        yield from formats(schema.child(k))
    if schema.dictionary is not None:
        yield from formats(schema.dictionary)


def load(data):
    stream = na.c_array_stream(data)
    schema = stream.get_schema()
    for i in range(schema.n_children):
        for fmt in formats(schema.child(i)):
            if fmt.startswith("+u"):
                raise NotImplementedError(f"column {i}: unions are not supported")
            if fmt in ("vu", "vz", "+m"):
                raise NotImplementedError(f"column {i}: views and maps are not supported")
    return na.Array(stream)
"#,
    )
    .unwrap();
    let report = dir.join("declined-columns.json");
    let _ = std::fs::remove_file(&report);
    let seed = 3u64;
    let out = arrowcert(&py)
        .args([
            "certify",
            "--producer",
            &format!("py:{}", adapter.display()),
        ])
        .args(["--no-builtin", "--cases", "12", "--seed", "3", "--report"])
        .arg(&report)
        .arg("producer/stream/gen/")
        .output()
        .expect("arrowcert runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    let r = arrowcert::report::read(&report).expect("a report");
    let declined = |c: &arrowcert::report::Case| {
        c.verdict == arrowcert::report::Verdict::Skip
            && c.message
                .as_deref()
                .is_some_and(|m| m.contains("are not supported"))
    };
    // A column is declined when it holds a union, map or view anywhere.
    let refused_union = |dt: &arrow_schema::DataType| {
        let mut all = std::collections::BTreeSet::new();
        arrowcert::generate::types::families_in(dt, &mut all);
        all.iter().any(|f| {
            [
                "sparse-union",
                "dense-union",
                "map",
                "utf8-view",
                "binary-view",
            ]
            .contains(f)
        })
    };
    let mut split = 0;
    // The whole stream's cases (this adapter has no slice: the slices of
    // the stream are skipped, not exported).
    for c in r
        .cases
        .iter()
        .filter(|c| c.id.starts_with("producer/stream/gen/") && c.slice.is_none())
    {
        if c.scenario.contains("~col:") {
            continue;
        }
        let whole = arrowcert::generate::scenario(seed, &c.scenario).unwrap();
        let fields = whole.schema.fields();
        let refuses = fields.iter().any(|f| refused_union(f.data_type()));
        // A scenario is declined exactly when it holds a declined type.
        assert_eq!(declined(c), refuses, "{}: {:?}", c.id, c.message);
        if !refuses || !arrowcert::generate::splits(&c.scenario) || fields.len() < 2 {
            continue;
        }
        split += 1;
        // Every column alone, declined exactly when it is of a declined
        // type, in the library's own words; the others pass.
        for (k, f) in fields.iter().enumerate() {
            let id = format!("producer/stream/{}~col:{k}", c.scenario);
            let sub = r
                .cases
                .iter()
                .find(|x| x.id == id)
                .unwrap_or_else(|| panic!("{id} did not run: {stdout}"));
            if refused_union(f.data_type()) {
                assert!(declined(sub), "{id}: {:?}", sub.message);
                assert!(
                    sub.message
                        .as_deref()
                        .unwrap()
                        .contains(&"column 0: ".to_string()),
                    "{id}: {:?}",
                    sub.message
                );
            } else {
                assert_eq!(
                    sub.verdict,
                    arrowcert::report::Verdict::Pass,
                    "{id}: {:?}",
                    sub.message
                );
            }
        }
    }
    assert!(
        split >= 1,
        "no mixed scenario was declined with seed {seed}: {stdout}"
    );
    // Every type family has its own scenario; the ones not declined pass.
    for family in arrowcert::generate::types::family_names() {
        let id = format!("producer/stream/gen/type:{family}");
        let c = r
            .cases
            .iter()
            .find(|c| c.id == id)
            .unwrap_or_else(|| panic!("no {id}"));
        let whole = arrowcert::generate::scenario(seed, &format!("gen/type:{family}")).unwrap();
        if refused_union(whole.schema.field(0).data_type()) {
            assert!(declined(c), "{id}: {:?}", c.message);
        } else {
            assert_eq!(
                c.verdict,
                arrowcert::report::Verdict::Pass,
                "{id}: {:?}",
                c.message
            );
        }
    }
    // Cases that follow up on another come right after it, in ID order.
    let ids: Vec<&str> = r.cases.iter().map(|c| c.id.as_str()).collect();
    for w in ids.windows(2) {
        if w[1].contains("~col:") {
            assert!(w[0] < w[1], "{} before {}", w[0], w[1]);
        }
    }
}

/// A pyarrow adapter whose batch export (`__arrow_c_array__`) drops the
/// schema-level metadata its schema export keeps, or keeps it (`drop`
/// false).
fn metadata_adapter(drop: bool) -> PathBuf {
    let file = scratch("py-adapters").join(format!("metadata_{drop}.py"));
    std::fs::write(
        &file,
        format!(
            r#"import pyarrow as pa
DROP = {}
NAME = "pyarrow (batch metadata test)"

class OneBatch:
    def __init__(self, data):
        self.batch = pa.record_batch(data)
    def __arrow_c_schema__(self):
        return self.batch.schema.__arrow_c_schema__()
    def __arrow_c_array__(self, requested_schema=None):
        b = self.batch.replace_schema_metadata(None) if DROP else self.batch
        return b.__arrow_c_array__()

class Many:
    def __init__(self, data):
        self.table = pa.table(data)
    def __arrow_c_schema__(self):
        return self.table.schema.__arrow_c_schema__()
    def __arrow_c_stream__(self, requested_schema=None):
        return self.table.__arrow_c_stream__()

def load(data):
    return OneBatch(data) if hasattr(data, "__arrow_c_array__") else Many(data)
"#,
            if drop { "True" } else { "False" }
        ),
    )
    .unwrap();
    file
}

/// The schema that comes with an array export (the schema half of
/// `__arrow_c_array__`'s pair) is compared with the one asked for, as a
/// stream's get_schema is: dropped schema-level metadata is reported
/// (array.values.types, INFO) on the array path; kept, nothing is.
#[test]
fn an_array_export_that_drops_schema_metadata_is_reported() {
    let Some(py) = python() else { return };
    for drop in [true, false] {
        let spec = format!("py:{}", metadata_adapter(drop).display());
        let report = scratch("py-adapters").join(format!("metadata-{drop}.json"));
        let _ = std::fs::remove_file(&report);
        let out = arrowcert(&py)
            .args(["certify", "--producer", &spec])
            .args(["--cases", "0", "--report"])
            .arg(&report)
            .args([
                "--exact",
                "producer/array/metadata/batch:0",
                "producer/stream/metadata",
            ])
            .output()
            .expect("arrowcert runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
        let r = arrowcert::report::read(&report).expect("a report");
        assert_eq!(r.cases.len(), 2, "{stdout}");
        let seen: Vec<_> = r
            .cases
            .iter()
            .flat_map(|c| c.violations.iter().map(move |v| (c.id.clone(), v.clone())))
            .collect();
        if drop {
            assert_eq!(seen.len(), 1, "{seen:?}");
            let (id, v) = &seen[0];
            assert_eq!(id, "producer/array/metadata/batch:0");
            assert_eq!(v.rule, "array.values.types");
            assert_eq!(v.at, "array's schema");
            assert!(v.evidence.contains("\"arrowcert\""), "{}", v.evidence);
        } else {
            assert!(seen.is_empty(), "{seen:?}");
        }
    }
}

/// The bundled pyarrow adapter's one RecordBatch exported several times
/// (its `__arrow_c_array__` called again on the object `load` returned):
/// the exports are independent, so array.exports.independent is checked
/// and holds.
#[test]
fn repeated_exports_of_one_pyarrow_batch_are_independent() {
    let Some(py) = python() else { return };
    let spec = format!(
        "py:{}",
        workspace_dir().join("adapters/pyarrow.py").display()
    );
    let report = scratch("py-adapters").join("repeat.json");
    let _ = std::fs::remove_file(&report);
    let out = arrowcert(&py)
        .args(["certify", "--producer", &spec])
        .args(["--cases", "0", "--report"])
        .arg(&report)
        .args([
            "--exact",
            "producer/array/primitive/batch:0",
            "producer/array/nested/batch:0",
        ])
        .output()
        .expect("arrowcert runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let r = arrowcert::report::read(&report).expect("a report");
    assert_eq!(r.cases.len(), 2, "{stdout}");
    for c in &r.cases {
        assert!(
            c.checked.iter().any(|r| r == "array.exports.independent"),
            "{}: {:?}",
            c.id,
            c.checked
        );
        assert!(
            c.violations
                .iter()
                .all(|v| v.rule != "array.exports.independent"),
            "{:?}",
            c.violations
        );
    }
}

/// Certifies the consumer `spec` on `ids` alone; the report.
fn certify_consumer(
    py: &PathBuf,
    spec: &str,
    ids: &[&str],
    name: &str,
) -> arrowcert::report::Report {
    let report = scratch("py-adapters").join(format!("{name}.json"));
    let _ = std::fs::remove_file(&report);
    let out = arrowcert(py)
        .args(["certify", "--consumer", spec, "--cases", "0", "--report"])
        .arg(&report)
        .arg("--exact")
        .args(ids)
        .output()
        .expect("arrowcert runs");
    let r = arrowcert::report::read(&report).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert!(r.complete);
    assert_eq!(r.cases.len(), ids.len());
    r
}

fn misreading_adapter() -> String {
    format!(
        "py:{}",
        workspace_dir()
            .join("harness/tests/fixtures/py/shared_misreading.py")
            .display()
    )
}

const VIEW_IDS: [&str; 2] = [
    "consumer/array/plain/primitive/batch:0",
    "consumer/stream/plain/primitive",
];

#[test]
fn a_misreading_its_exporter_undoes_passes_the_read_back_and_fails_the_values_view() {
    let Some(py) = python() else { return };
    let spec = misreading_adapter();
    // Today's check alone (the variant without values()): passes.
    let r = certify_consumer(
        &py,
        &format!("{spec}#no-view"),
        &VIEW_IDS,
        "misread-no-view",
    );
    for c in &r.cases {
        assert_eq!(c.verdict, Verdict::Pass, "{c:?}");
        assert!(c.view.is_none(), "{c:?}");
    }
    // With the library's own values: consumer.read.values-view (SHOULD,
    // inferred: a converter's misreading looks the same) is reported,
    // naming the independent view; consumer.read.values (MUST) is not.
    let r = certify_consumer(&py, &spec, &VIEW_IDS, "misread");
    let view_rule = r
        .rules
        .iter()
        .find(|s| s.rule == "consumer.read.values-view")
        .expect("the view rule is judged");
    assert_eq!(view_rule.verdict, Verdict::Fail, "{view_rule:?}");
    assert_eq!(view_rule.level, "SHOULD");
    for c in &r.cases {
        assert!(
            !c.violations
                .iter()
                .any(|v| v.rule == "consumer.read.values"),
            "{c:?}"
        );
        assert!(
            c.violations
                .iter()
                .any(|v| v.rule == "consumer.read.values-view"
                    && v.at == "the consumer's own values view"
                    && v.evidence.contains("values(obj)")
                    && v.evidence.contains("row 1")),
            "{c:?}"
        );
    }
    // The same library reading right passes, its view compared.
    let r = certify_consumer(&py, &format!("{spec}#honest"), &VIEW_IDS, "misread-honest");
    for c in &r.cases {
        assert_eq!(c.verdict, Verdict::Pass, "{c:?}");
        let view = c.view.as_deref().unwrap_or_default();
        assert!(
            view.contains("agreed on") && !view.contains("disagreed"),
            "{c:?}"
        );
    }
}

#[test]
fn the_pyarrow_adapters_values_view_agrees_on_every_builtin_consumer_case() {
    let Some(py) = python() else { return };
    let spec = format!(
        "py:{}",
        workspace_dir().join("adapters/pyarrow.py").display()
    );
    let report = scratch("py-adapters").join("pyarrow-view.json");
    let _ = std::fs::remove_file(&report);
    let out = arrowcert(&py)
        .args(["certify", "--consumer", &spec, "--cases", "0", "--report"])
        .arg(&report)
        .arg("consumer/stream/plain/")
        .output()
        .expect("arrowcert runs");
    let r = arrowcert::report::read(&report).expect("a report");
    let viewed: Vec<_> = r.cases.iter().filter(|c| c.view.is_some()).collect();
    assert!(viewed.len() > 5, "{}", String::from_utf8_lossy(&out.stderr));
    for c in &viewed {
        assert!(
            !c.violations
                .iter()
                .any(|v| v.at == "the consumer's own values view"),
            "{c:?}"
        );
    }
}

#[test]
fn variants_are_named_selected_and_certified_apart() {
    let Some(py) = python() else { return };
    let spec = misreading_adapter();
    let ids = [VIEW_IDS[0]];
    let a = certify_consumer(&py, &format!("{spec}#honest"), &ids, "variant-a");
    let b = certify_consumer(&py, &spec, &ids, "variant-b");
    let name = |r: &arrowcert::report::Report| {
        r.plugins
            .iter()
            .map(|p| p.name.clone())
            .collect::<Vec<_>>()
            .join(",")
    };
    assert_eq!(name(&a), "shared-misreading mutant (pyarrow) [honest]");
    assert_eq!(name(&b), "shared-misreading mutant (pyarrow)");
    // One variant's verdicts are its own: the default breaks
    // consumer.read.values-view, the variant does not, in the same order
    // of runs and the other way round.
    let view_broken = |r: &arrowcert::report::Report| {
        r.cases[0]
            .violations
            .iter()
            .any(|v| v.rule == "consumer.read.values-view")
    };
    assert_eq!(a.cases[0].verdict, Verdict::Pass);
    assert!(!view_broken(&a), "{:?}", a.cases[0]);
    assert!(view_broken(&b), "{:?}", b.cases[0]);
    let a2 = certify_consumer(&py, &format!("{spec}#honest"), &ids, "variant-a2");
    assert_eq!(a2.cases[0].verdict, Verdict::Pass);
    assert!(!view_broken(&a2), "{:?}", a2.cases[0]);
    // An unknown variant: bad input in one line, naming the variants.
    let out = arrowcert(&py)
        .args(["certify", "--consumer"])
        .arg(format!("{spec}#nope"))
        .output()
        .expect("arrowcert runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("no variant 'nope'") && stderr.contains("honest, no-view"),
        "{stderr}"
    );
    // A malformed variant name is refused before anything loads.
    let out = arrowcert(&py)
        .args(["certify", "--consumer"])
        .arg(format!("{spec}#a b"))
        .output()
        .expect("arrowcert runs");
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn the_matrix_certifies_a_variant_alone_and_names_it() {
    let Some(py) = python() else { return };
    let base = format!(
        "py:{}",
        workspace_dir().join("adapters/pyarrow.py").display()
    );
    let variant = format!("{base}#array");
    let out_dir = scratch("py-adapters").join("variant-matrix");
    let _ = std::fs::remove_dir_all(&out_dir);
    let out = Command::new(arrowcert_exe())
        .env("ARROWCERT_PYTHON", &py)
        .args(["matrix", "--cases", "0", "--seed", "3", "--jobs", "1"])
        .args(["--filter", "/primitive", "--out"])
        .arg(&out_dir)
        .arg("--producers")
        .arg(format!("{base},{variant}"))
        .arg("--consumers")
        .arg(format!("{base},{variant}"))
        .output()
        .expect("arrowcert runs");
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let m = arrowcert::matrix::read(&out_dir.join("matrix.json")).expect(&text);
    let ids: Vec<&str> = m.units.iter().map(|u| u.id.as_str()).collect();
    // Two certifications each side, one pair: the variant is certified
    // alone.
    assert_eq!(ids.len(), 5, "{ids:?}");
    assert_eq!(ids.iter().filter(|i| i.starts_with("pair/")).count(), 1);
    assert!(ids
        .iter()
        .any(|i| i.starts_with("certify/producer/") && i.ends_with("#array")));
    let md = std::fs::read_to_string(out_dir.join("matrix.md")).unwrap();
    // The single-sided table names the variant and its identity.
    assert!(
        md.contains("#array |") && md.contains("(PyCapsule) \\[array\\]"),
        "{md}"
    );
    // The pair grid has one row and one column.
    let grid = md.split("## Pairs by interface path").next().unwrap();
    assert!(!grid.contains("#array"), "{grid}");
}

/// Slices of a whole stream through an adapter's `slice(obj, offset,
/// length)` (the sliced stream entry points): the bundled pyarrow
/// adapter's `Table.slice` passes every sliced stream case, the one across
/// primitive's batch boundary (37 rows, then 1) included; an adapter whose
/// slice ignores the offset fails array.values.roundtrip on the slices that
/// do not start at row 0; one without `slice` has them skipped as not
/// exported, never passed.
#[test]
fn slices_of_a_stream_come_from_the_adapters_slice() {
    let Some(py) = python() else { return };
    let bundled = workspace_dir().join("adapters/pyarrow.py");
    let text = std::fs::read_to_string(&bundled).unwrap();
    let right = "return table.slice(offset, length)";
    assert!(text.contains(right), "adapters/pyarrow.py defines slice");
    let from_start = scratch("py-adapters").join("slice_from_start.py");
    std::fs::write(
        &from_start,
        text.replace(right, "return table.slice(0, length)"),
    )
    .unwrap();
    let without = scratch("py-adapters").join("slice_missing.py");
    std::fs::write(&without, text.replace("def slice(", "def _no_slice(")).unwrap();
    let sliced = [
        "producer/stream/primitive/slice:19+0",
        "producer/stream/primitive/slice:0+19",
        "producer/stream/primitive/slice:25+13",
        "producer/stream/primitive/slice:19+19",
    ];
    for (adapter, name) in [
        (&bundled, "right"),
        (&from_start, "from-start"),
        (&without, "none"),
    ] {
        let spec = format!("py:{}", adapter.display());
        let report = scratch("py-adapters").join(format!("slices-{name}.json"));
        let _ = std::fs::remove_file(&report);
        let out = arrowcert(&py)
            .args(["certify", "--producer", &spec])
            .args(["--cases", "0", "--report"])
            .arg(&report)
            .arg("--exact")
            .args(sliced)
            .output()
            .expect("arrowcert runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let r = arrowcert::report::read(&report).expect("a report");
        assert_eq!(r.cases.len(), sliced.len(), "{stdout}");
        let verdict = |id: &str| r.cases.iter().find(|c| c.id == id).unwrap();
        match name {
            "right" => {
                assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
                assert!(
                    r.cases.iter().all(|c| c.verdict == Verdict::Pass),
                    "{stdout}"
                );
            }
            "from-start" => {
                assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
                for id in &sliced[..2] {
                    assert_eq!(verdict(id).verdict, Verdict::Pass, "{id}: {stdout}");
                }
                for id in &sliced[2..] {
                    let c = verdict(id);
                    assert_eq!(c.verdict, Verdict::Fail, "{id}: {stdout}");
                    assert!(
                        c.violations
                            .iter()
                            .any(|v| v.rule == "array.values.roundtrip"),
                        "{id}: {:?}",
                        c.violations
                    );
                }
            }
            _ => {
                for c in &r.cases {
                    assert_eq!(c.verdict, Verdict::Skip, "{}: {stdout}", c.id);
                    let why = c.message.as_deref().unwrap_or_default();
                    assert!(
                        why.contains("arrowcert_produce_sliced_stream is not exported"),
                        "{why}"
                    );
                }
            }
        }
    }
}

/// A producer that exports only streams: its array and device array cases
/// are skipped as not exported before anything else is asked of it (no
/// schema export first, so no schema rule is judged in them), and the
/// stream case still runs.
#[test]
fn array_cases_of_a_stream_only_producer_skip_before_any_export() {
    let Some(py) = python() else { return };
    let spec = py_adapter(
        "py-adapters",
        "stream_only.py",
        r#"import nanoarrow as na

NAME = "streams only (test adapter)"


def load(data):
    return na.c_array_stream(data)
"#,
    );
    let report = scratch("py-adapters").join("stream-only.json");
    let _ = std::fs::remove_file(&report);
    let ids = [
        "producer/array/primitive/batch:0",
        "producer/device_array/primitive/batch:0",
        "producer/stream/primitive",
    ];
    let out = arrowcert(&py)
        .args(["certify", "--producer", &spec])
        .args(["--cases", "0", "--report"])
        .arg(&report)
        .arg("--exact")
        .args(ids)
        .output()
        .expect("arrowcert runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let r = arrowcert::report::read(&report).unwrap_or_else(|e| panic!("{e}\n{stdout}"));
    for (id, entry) in [
        (ids[0], "arrowcert_produce_array"),
        (ids[1], "arrowcert_produce_device_array"),
    ] {
        let c = r.cases.iter().find(|c| c.id == id).expect(id);
        assert_eq!(c.verdict, Verdict::Skip, "{id}: {:?}", c.message);
        assert_eq!(
            c.message.as_deref(),
            Some(format!("{entry} is not exported by the plugin").as_str()),
            "{id}"
        );
        assert!(c.checked.is_empty(), "{id} judged {:?}", c.checked);
    }
    let stream = r.cases.iter().find(|c| c.id == ids[2]).expect("stream");
    assert_ne!(stream.verdict, Verdict::Skip, "{:?}", stream.message);
    assert!(stream.checked.iter().any(|r| r.starts_with("schema.")));
}

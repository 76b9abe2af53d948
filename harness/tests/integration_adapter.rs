//! The built-in adapter for Arrow's C data integration libraries: a small C
//! library of the tests' own (`fixtures/integration_lib.c`, exporting the
//! `external_CDataIntegration_*` entry points) is certified as a producer
//! and as a consumer with no plugin at all; builds that break one rule are
//! reported through the adapter; a half-exported set is a clear load error.
//! The adapter's JSON writer is read back with arrow-integration-test's
//! reader, on the gold files and the built-in scenarios.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, OnceLock};

use arrow_array::{ArrayRef, Float64Array, Int32Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use arrowcert::plugin::integration::json;
use arrowcert::plugin::{LoadError, Plugin};
use arrowcert::report::{Report, Verdict};
use support::*;

const SOURCE: &str = "tests/fixtures/integration_lib.c";

/// The fixture built with `defines`, as `lib<name>.so`.
fn library(name: &str, defines: &[&str]) -> PathBuf {
    let lib = scratch("integration-libs").join(format!("lib{name}.so"));
    let mut flags = vec!["-shared", "-fPIC", "-O1"];
    flags.extend_from_slice(defines);
    cc(&flags, &harness_dir().join(SOURCE), &lib);
    lib
}

fn correct() -> &'static PathBuf {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| library("integration_ok", &[]))
}

/// Scenarios the fixture understands (int32 and utf8 columns: several
/// batches, nulls, an empty batch, a stream with no batches), and float64
/// data whose second batch the JSON cannot carry (a NaN).
fn scenarios() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = scratch("integration-scenarios");
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int32, true),
            Field::new("name", DataType::Utf8, true),
            Field::new("n", DataType::Int32, false),
        ]));
        let batch = |ids: Vec<Option<i32>>, names: Vec<Option<&str>>| {
            let n = ids.len() as i32;
            RecordBatch::try_new(
                schema.clone(),
                vec![
                    Arc::new(Int32Array::from(ids)) as ArrayRef,
                    Arc::new(StringArray::from(names)),
                    Arc::new(Int32Array::from_iter_values(0..n)),
                ],
            )
            .unwrap()
        };
        let batches = vec![
            batch(
                vec![Some(1), None, Some(-3), Some(i32::MAX), Some(5)],
                vec![
                    Some("a"),
                    Some("bé"),
                    None,
                    Some(""),
                    Some("a longer \"quoted\" value"),
                ],
            ),
            batch(vec![], vec![]),
            batch(
                (0..40).map(|i| (i % 4 != 1).then_some(i * 7)).collect(),
                (0..40)
                    .map(|i| (i % 5 != 2).then_some(if i % 3 == 0 { "x" } else { "tab\there" }))
                    .collect(),
            ),
        ];
        let write = |name: &str, schema: &Arc<Schema>, batches: &[RecordBatch]| {
            let bytes = arrowcert::sdk::ipc::encode(schema, batches).unwrap();
            std::fs::write(dir.join(format!("{name}.stream")), bytes).unwrap();
        };
        write("int_utf8", &schema, &batches);
        write("no_batches", &schema, &[]);
        let fschema = Arc::new(Schema::new(vec![Field::new("f", DataType::Float64, true)]));
        let floats = |v: Vec<Option<f64>>| {
            RecordBatch::try_new(
                fschema.clone(),
                vec![Arc::new(Float64Array::from(v)) as ArrayRef],
            )
            .unwrap()
        };
        write(
            "nan",
            &fschema,
            &[
                floats(vec![Some(1.5), None, Some(-0.1), Some(6.02e23)]),
                floats(vec![Some(f64::NAN)]),
            ],
        );
        dir
    })
}

/// `arrowcert certify` on the test scenarios alone, on the CPU.
fn certify(side: &str, lib: &Path, extra: &[&str], name: &str) -> (Option<i32>, Report, String) {
    let report = scratch("integration-reports").join(format!("{name}.json"));
    let out = Command::new(arrowcert_exe())
        .args(["certify", side])
        .arg(lib)
        .args(["--no-builtin", "--cases", "0", "--device", "cpu", "--gold"])
        .arg(scenarios())
        .args(extra)
        .arg("--report")
        .arg(&report)
        .output()
        .expect("arrowcert runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let r = arrowcert::report::read(&report).unwrap_or_else(|e| panic!("{e}\n{text}"));
    (out.status.code(), r, text)
}

fn rule<'a>(r: &'a Report, id: &str) -> &'a arrowcert::report::RuleSummary {
    r.rules
        .iter()
        .find(|s| s.rule == id)
        .unwrap_or_else(|| panic!("{id} not in the report"))
}

/// Exit 0, nothing failed or errored, and `rules` exercised and passed.
fn assert_clean(code: Option<i32>, r: &Report, out: &str, rules: &[&str]) {
    assert_eq!(code, Some(0), "{out}");
    assert!(r.complete, "{out}");
    let bad: Vec<String> = r
        .cases
        .iter()
        .filter(|c| matches!(c.verdict, Verdict::Fail | Verdict::Error | Verdict::Crash))
        .map(|c| {
            format!(
                "{}: {:?} {:?} {:?}",
                c.id, c.verdict, c.message, c.violations
            )
        })
        .collect();
    assert!(bad.is_empty(), "{bad:#?}");
    let failing: Vec<&str> = r
        .rules
        .iter()
        .filter(|s| s.verdict == Verdict::Fail)
        .map(|s| s.rule.as_str())
        .collect();
    assert!(failing.is_empty(), "{failing:?}\n{out}");
    for id in rules {
        let s = rule(r, id);
        assert_eq!(s.verdict, Verdict::Pass, "{id}: {out}");
        assert!(s.checked > 0, "{id}");
    }
    // The identity the adapter presents.
    assert!(
        r.plugins
            .iter()
            .any(|p| p.name == "external_CDataIntegration integration library (built-in adapter)"),
        "{:?}",
        r.plugins
    );
}

/// The reason a case was skipped, for the first case whose ID contains `part`.
fn skipped_because<'a>(r: &'a Report, part: &str) -> &'a str {
    let c = r
        .cases
        .iter()
        .find(|c| c.id.contains(part))
        .unwrap_or_else(|| panic!("no case {part}"));
    assert_eq!(c.verdict, Verdict::Skip, "{c:?}");
    c.message.as_deref().unwrap_or("")
}

#[test]
fn the_library_is_loaded_behind_the_adapter_with_its_capabilities() {
    let p = Plugin::load(correct()).expect("loads without arrowcert symbols");
    assert_eq!(
        p.name(),
        "external_CDataIntegration integration library (built-in adapter)"
    );
    assert!(p.is_producer() && p.is_consumer());
    for s in [
        "arrowcert_produce_schema",
        "arrowcert_produce_array",
        "arrowcert_consume_array",
        "arrowcert_bytes_allocated",
    ] {
        assert!(p.has(s), "{s}");
    }
    assert!(!p.has("arrowcert_produce_stream"));
    // The library's own symbols the adapter calls (the prefix is in the
    // name checked above).
    assert_eq!(
        p.adapts().expect("an adapted library"),
        [
            "external_CDataIntegration_ExportSchemaFromJson",
            "external_CDataIntegration_ExportBatchFromJson",
            "external_CDataIntegration_ImportSchemaAndCompareToJson",
            "external_CDataIntegration_ImportBatchAndCompareToJson",
            "external_BytesAllocated",
        ]
    );
    assert_eq!(p.bytes_allocated(), Some(0));

    let out = run_arrowcert(&["inspect", "--json", correct().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["roles"], serde_json::json!(["producer", "consumer"]));
    assert_eq!(
        v["integration_entry_points"][0],
        "external_CDataIntegration_ExportSchemaFromJson"
    );
    let out = run_arrowcert(&["inspect", correct().to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("adapts:       external_CDataIntegration_ExportSchemaFromJson, "),
        "{text}"
    );
}

#[test]
fn half_a_direction_is_a_clear_load_error() {
    let lib = library("integration_partial", &["-DPARTIAL"]);
    match Plugin::load(&lib) {
        Err(e @ LoadError::IntegrationIncomplete(..)) => {
            let m = e.to_string();
            assert!(
                m.contains("exports `external_CDataIntegration_ExportSchemaFromJson` but not `external_CDataIntegration_ExportBatchFromJson`"),
                "{m}"
            );
        }
        other => panic!("{other:?}"),
    }
    let out = run_arrowcert(&["inspect", lib.to_str().unwrap()]);
    assert_bad_input(
        &out,
        "but not `external_CDataIntegration_ExportBatchFromJson`",
    );
    let out = run_arrowcert(&["certify", "--producer", lib.to_str().unwrap()]);
    assert_bad_input(
        &out,
        "but not `external_CDataIntegration_ExportBatchFromJson`",
    );
}

#[test]
fn the_correct_library_is_certified_clean_as_a_producer() {
    let (code, r, out) = certify("--producer", correct(), &["--jobs", "2"], "producer-ok");
    assert_clean(
        code,
        &r,
        &out,
        &[
            "schema.format.valid",
            "schema.release.marks-released",
            "schema.release.walks-children",
            "array.null-count",
            "array.move.child",
            "array.release.walks-children",
            "array.values.roundtrip",
            // Workers count bytes with the tracker and the library's own
            // external_BytesAllocated.
            "array.release.frees",
        ],
    );
    // Whole batches only: a slice is a declared limitation.
    assert!(
        skipped_because(&r, "producer/array/gold/int_utf8/batch:0/slice:")
            .contains("whole batches only")
    );
    // What the JSON cannot carry is not supported, with the reason.
    assert!(
        skipped_because(&r, "producer/array/gold/nan/batch:1").contains("cannot express"),
        "{out}"
    );
    let finite = r
        .cases
        .iter()
        .find(|c| c.id == "producer/array/gold/nan/batch:0")
        .unwrap();
    assert_eq!(finite.verdict, Verdict::Pass, "{finite:?}");
    // Paths the integration entry points do not have are skipped.
    assert!(skipped_because(&r, "producer/stream/gold/int_utf8").contains("not exported"));
}

#[test]
fn the_correct_library_is_certified_clean_as_a_consumer() {
    let (code, r, out) = certify("--consumer", correct(), &["--in-process"], "consumer-ok");
    assert_clean(
        code,
        &r,
        &out,
        &[
            "consumer.read.values",
            "consumer.read.metadata",
            "consumer.release.once",
            "consumer.release.not-released",
            "consumer.data.immutable",
            "consumer.release.checks-released",
        ],
    );
    // Both encodings, the varied one (offsets everywhere) included.
    for enc in ["plain", "varied"] {
        let id = format!("consumer/array/{enc}/gold/int_utf8/batch:2");
        let c = r.cases.iter().find(|c| c.id == id).expect(&id);
        assert_eq!(c.verdict, Verdict::Pass, "{c:?}");
    }
    assert!(skipped_because(&r, "consumer/array/plain/gold/nan/batch:1").contains("cannot express"));
}

#[test]
fn a_wrong_null_count_is_reported_through_the_adapter() {
    let lib = library("integration_null_count", &["-DBROKEN_NULL_COUNT"]);
    let (code, r, out) = certify("--producer", &lib, &["--in-process"], "producer-null-count");
    assert_eq!(code, Some(1), "{out}");
    let s = rule(&r, "array.null-count");
    assert_eq!(s.verdict, Verdict::Fail, "{out}");
    // The batches with nulls fail; the one without passes.
    assert!(s
        .failing_cases
        .iter()
        .any(|c| c.starts_with("producer/array/gold/int_utf8/batch:0")));
    let empty = r
        .cases
        .iter()
        .find(|c| c.id == "producer/array/gold/int_utf8/batch:1")
        .unwrap();
    assert_eq!(empty.verdict, Verdict::Pass, "{empty:?}");
}

#[test]
fn a_comparison_the_library_fails_on_offsets_is_a_limitation_with_its_message() {
    let lib = library("integration_compare", &["-DBROKEN_COMPARE"]);
    let (code, r, out) = certify("--consumer", &lib, &["--in-process"], "consumer-compare");
    // The library's own comparison fails on the varied encoding's
    // non-zero offsets, which this build ignores; it reads the same data
    // at offset 0 (plainly, and varied the same ways at offset 0): a
    // refusal of non-zero offsets, which "Consumers MAY decide not to
    // support". A limitation carrying the library's words, not a failure.
    assert_eq!(code, Some(0), "{out}");
    let s = rule(&r, "consumer.read.values");
    assert_eq!(s.verdict, Verdict::Pass, "{out}");
    let varied = r
        .cases
        .iter()
        .find(|c| c.id == "consumer/array/varied/gold/int_utf8/batch:2")
        .unwrap();
    assert_eq!(varied.verdict, Verdict::Limitation, "{varied:?}");
    let m = varied.message.as_deref().unwrap_or("");
    assert!(
        m.contains("external_CDataIntegration_ImportBatchAndCompareToJson")
            && m.contains("the JSON says")
            && m.contains("non-zero offsets"),
        "{m}"
    );
    assert!(
        r.limitations.iter().any(|l| l.case == varied.id),
        "{:?}",
        r.limitations
    );
    let plain = r
        .cases
        .iter()
        .find(|c| c.id == "consumer/array/plain/gold/int_utf8/batch:2")
        .unwrap();
    assert_eq!(plain.verdict, Verdict::Pass, "{plain:?}");
}

#[test]
fn roundtrip_from_the_library_into_itself() {
    let report = scratch("integration-reports").join("roundtrip.json");
    let lib = correct().to_str().unwrap();
    let out = Command::new(arrowcert_exe())
        .args([
            "roundtrip",
            "--producer",
            lib,
            "--consumer",
            lib,
            "--in-process",
        ])
        // Slices and NaN are ENOSYS, which a round trip counts as an error.
        .args(["--skip", "slice:", "--skip", "gold/nan/batch:1"])
        .arg("--gold")
        .arg(scenarios())
        .arg("--report")
        .arg(&report)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let r = arrowcert::report::read(&report).unwrap();
    let passed: Vec<&str> = r
        .cases
        .iter()
        .filter(|c| c.verdict == Verdict::Pass)
        .map(|c| c.id.as_str())
        .collect();
    assert!(
        passed.contains(&"array/gold/int_utf8/batch:2"),
        "{passed:?}\n{text}"
    );
}

// ---- the JSON writer -------------------------------------------------------

/// Reads integration JSON with arrow-integration-test: the schema and the
/// batches.
fn read_back(text: &str) -> Result<(Schema, Vec<RecordBatch>), String> {
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let schema =
        arrow_integration_test::schema_from_json(&v["schema"]).map_err(|e| e.to_string())?;
    let file: arrow_integration_test::ArrowJson =
        serde_json::from_value(v).map_err(|e| e.to_string())?;
    let batches = file.get_record_batches().map_err(|e| e.to_string())?;
    Ok((schema, batches))
}

/// Types arrow-integration-test 60.1.0's reader cannot read (its
/// `array_from_json` has no arm for them), whatever wrote the JSON.
fn reader_lacks(schema: &Schema) -> bool {
    fn has(t: &DataType) -> bool {
        match t {
            DataType::Float16 => true,
            DataType::Dictionary(_, v) => has(v),
            DataType::List(f)
            | DataType::LargeList(f)
            | DataType::ListView(f)
            | DataType::LargeListView(f)
            | DataType::FixedSizeList(f, _)
            | DataType::Map(f, _) => has(f.data_type()),
            DataType::Struct(fs) => fs.iter().any(|f| has(f.data_type())),
            DataType::Union(fs, _) => fs.iter().any(|(_, f)| has(f.data_type())),
            DataType::RunEndEncoded(_, v) => has(v.data_type()),
            _ => false,
        }
    }
    schema.fields().iter().any(|f| has(f.data_type()))
}

/// Writes `name`'s data, one batch per file as the adapter does, reads it
/// back and compares. `Err` with the differences.
fn round_trip(schema: &Arc<Schema>, batches: &[RecordBatch]) -> Result<(), String> {
    let (read_schema, _) = read_back(&json::to_string(schema, &[]).map_err(|e| e.to_string())?)?;
    let mut diffs = arrowcert::compare::schemas(schema, &read_schema);
    for (i, b) in batches.iter().enumerate() {
        let text = json::to_string(schema, std::slice::from_ref(b)).map_err(|e| e.to_string())?;
        let (s, read) = read_back(&text).map_err(|e| format!("batch {i}: {e}"))?;
        diffs.extend(
            arrowcert::compare::streams(schema, std::slice::from_ref(b), &s, &read)
                .into_iter()
                .map(|d| format!("batch {i}: {d}")),
        );
    }
    if diffs.is_empty() {
        Ok(())
    } else {
        Err(diffs.join("; "))
    }
}

fn gunzip(path: &Path) -> String {
    let out = Command::new("gzip")
        .arg("-dc")
        .arg(path)
        .output()
        .expect("gzip runs");
    assert!(out.status.success(), "gzip -dc {}", path.display());
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn the_json_writer_round_trips_every_gold_file_through_arrows_reader() {
    let dir = gold_dir();
    let scenarios = arrowcert::scenario::gold_dir(&dir).unwrap();
    assert!(scenarios.len() >= 30, "{}", scenarios.len());
    let mut failures = Vec::new();
    let mut unreadable = Vec::new();
    let mut checked = 0;
    for s in &scenarios {
        let stem = s.name.trim_start_matches("gold/");
        // The gold JSON, read by the same reader, is the same data: the
        // reader is fit to judge this writer on this file.
        let gold_json = dir.join(format!("{stem}.json.gz"));
        let gold_readable = match read_back(&gunzip(&gold_json)) {
            Ok((gs, gb)) => {
                let d = arrowcert::compare::streams(&s.schema, &s.batches, &gs, &gb);
                d.is_empty() || {
                    unreadable.push(format!("{stem}: gold JSON reads differently: {}", d[0]));
                    false
                }
            }
            Err(e) => {
                unreadable.push(format!("{stem}: gold JSON: {e}"));
                false
            }
        };
        match round_trip(&s.schema, &s.batches) {
            Ok(()) => checked += 1,
            Err(e) if !gold_readable || reader_lacks(&s.schema) => {
                unreadable.push(format!("{stem}: ours: {e}"))
            }
            Err(e) => failures.push(format!("{stem}: {e}")),
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
    eprintln!(
        "{checked} of {} gold files round trip; not judged (the reader cannot read them): {unreadable:#?}",
        scenarios.len()
    );
    assert!(checked >= 25, "{checked}: {unreadable:#?}");
}

#[test]
fn the_json_writer_round_trips_the_built_in_scenarios() {
    let mut failures = Vec::new();
    let mut checked = 0;
    for s in arrowcert::scenario::builtin() {
        if reader_lacks(&s.schema) {
            continue;
        }
        match round_trip(&s.schema, &s.batches) {
            Ok(()) => checked += 1,
            Err(e) => failures.push(format!("{}: {e}", s.name)),
        }
        // Slices too: the adapter's consumer writes what was sent, sliced.
        for b in &s.batches {
            if b.num_rows() > 2 {
                let sliced = b.slice(1, b.num_rows() - 2);
                if let Err(e) = round_trip(&s.schema, &[sliced]) {
                    failures.push(format!("{} sliced: {e}", s.name));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
    assert!(checked > 5, "{checked}");
}

#[test]
fn values_json_cannot_carry_are_not_supported_with_a_reason() {
    let schema = Arc::new(Schema::new(vec![Field::new("f", DataType::Float64, true)]));
    let b = RecordBatch::try_new(
        schema.clone(),
        vec![Arc::new(Float64Array::from(vec![f64::INFINITY])) as ArrayRef],
    )
    .unwrap();
    let e = json::to_string(&schema, &[b]).unwrap_err();
    assert!(e.to_string().contains("cannot express"), "{e}");
    assert!(e.to_string().contains("inf"), "{e}");
    // A null slot's value is never looked at.
    let b = RecordBatch::try_new(
        schema.clone(),
        vec![Arc::new(Float64Array::from(vec![None, Some(2.5)])) as ArrayRef],
    )
    .unwrap();
    assert!(json::to_string(&schema, &[b]).is_ok());
}

//! The layout proof: the C compiler's view of `arrowcert_plugin.h` agrees
//! with the Rust definitions on the size, alignment and offset of every
//! field of every struct, and on every constant; a header with one field
//! swapped is rejected.

use std::path::PathBuf;

use arrowcert::abi::layout::{c_probe_source, check_header, compare_with_c};
use arrowcert::abi::{CONSTANTS, STRUCTS};

fn harness_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn header_matches_rust_layouts() {
    let mismatches = check_header(&harness_dir().join("include/arrowcert_plugin.h"))
        .expect("the header compiles with the probe");
    assert!(
        mismatches.is_empty(),
        "layout mismatches:\n{}",
        mismatches
            .iter()
            .map(|m| m.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn every_struct_and_field_is_probed() {
    // The probe is generated from the definitions: eight structs, and every
    // field of each, appear in it.
    let src = c_probe_source("h.h", STRUCTS, CONSTANTS);
    assert_eq!(STRUCTS.len(), 8);
    let fields: usize = STRUCTS.iter().map(|s| s.fields.len()).sum();
    assert_eq!(src.matches("offsetof(").count(), fields);
    for s in STRUCTS {
        for f in s.fields {
            assert!(src.contains(&format!("offsetof(struct {}, {})", s.c_name, f.name)));
        }
    }
    assert_eq!(src.matches("\"C ").count(), CONSTANTS.len());
}

/// The plugin header with ArrowDeviceArray's `device_id` and
/// `device_type` swapped, written from the real header (so it follows every
/// change to it) into a scratch file.
fn swapped_device_fields() -> PathBuf {
    let real = std::fs::read_to_string(harness_dir().join("include/arrowcert_plugin.h"))
        .expect("the plugin header");
    let fields = "  int64_t device_id;\n  // The type of device which can access this memory.\n  ArrowDeviceType device_type;\n";
    assert_eq!(
        real.matches(fields).count(),
        1,
        "the header's ArrowDeviceArray fields moved"
    );
    let swapped = real.replace(
        fields,
        "  ArrowDeviceType device_type;\n  int64_t device_id;\n",
    );
    let dir = std::env::temp_dir().join(format!("arrowcert-abi-fixture-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch directory");
    let path = dir.join("swapped_device_fields.h");
    std::fs::write(&path, swapped).expect("fixture written");
    path
}

#[test]
fn swapped_field_fixture_is_rejected() {
    let fixture = swapped_device_fields();
    let mismatches = check_header(&fixture).expect("the fixture compiles");
    let _ = std::fs::remove_dir_all(fixture.parent().unwrap());
    let items: Vec<(String, &str)> = mismatches
        .iter()
        .map(|m| (m.item.clone(), m.property))
        .collect();
    assert_eq!(
        items,
        vec![
            ("ArrowDeviceArray.device_id".to_string(), "offset"),
            ("ArrowDeviceArray.device_type".to_string(), "offset"),
        ],
        "exactly the two swapped fields are reported"
    );
}

#[test]
fn comparison_reports_missing_and_wrong_facts() {
    // A probe output that lacks a struct and disagrees on a size and a
    // constant: each disagreement is reported, nothing else.
    let mut out = String::new();
    for s in STRUCTS.iter().filter(|s| s.c_name != "ArrowAsyncTask") {
        let size = if s.c_name == "ArrowSchema" {
            s.size + 8
        } else {
            s.size
        };
        out.push_str(&format!("S {} {} {}\n", s.c_name, size, s.align));
        for f in s.fields {
            out.push_str(&format!(
                "F {} {} {} {}\n",
                s.c_name, f.name, f.offset, f.size
            ));
        }
    }
    for c in CONSTANTS {
        let v = if c.c_name == "ARROW_DEVICE_CUDA" {
            99
        } else {
            c.value
        };
        out.push_str(&format!("C {} {}\n", c.c_name, v));
    }
    let m = compare_with_c(STRUCTS, CONSTANTS, &out);
    let items: Vec<String> = m
        .iter()
        .map(|m| format!("{} {}", m.item, m.property))
        .collect();
    assert!(items.contains(&"ArrowSchema size".to_string()), "{items:?}");
    assert!(
        items.contains(&"ArrowAsyncTask missing".to_string()),
        "{items:?}"
    );
    assert!(
        items.contains(&"ArrowAsyncTask.extract_data missing".to_string()),
        "{items:?}"
    );
    assert!(
        items.contains(&"ARROW_DEVICE_CUDA value".to_string()),
        "{items:?}"
    );
    assert_eq!(items.len(), 5, "{items:?}");
}

#[test]
fn a_header_that_does_not_compile_is_an_error() {
    let dir = std::env::temp_dir().join(format!("arrowcert-badheader-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let h = dir.join("bad.h");
    std::fs::write(&h, "struct ArrowSchema { int x; };\n").unwrap();
    let err = check_header(&h).expect_err("a header without the structs cannot pass");
    let _ = std::fs::remove_dir_all(&dir);
    assert!(err.contains("does not compile"), "{err}");
}

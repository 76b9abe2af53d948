//! `arrowcert inspect` and the loader: good plugins are described, bad input
//! is one clear line and exit code 2, never a panic.

mod support;

use support::*;

#[test]
fn minimal_c_example_builds_loads_and_is_described() {
    let lib = scratch("example").join("libminimal.so");
    cc(
        &["-shared", "-fPIC"],
        &workspace_dir().join("docs/examples/minimal_plugin.c"),
        &lib,
    );
    let out = run_arrowcert(&["inspect", lib.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("name:         minimal example 1.0"), "{text}");
    assert!(text.contains("abi version:  1"), "{text}");
    assert!(text.contains("devices:      cpu\n"), "{text}");
    assert!(
        text.contains("arrowcert_plugin_supports_device   yes"),
        "{text}"
    );
    assert!(
        text.contains("arrowcert_last_error               yes"),
        "{text}"
    );
    assert!(
        text.contains("arrowcert_produce_schema           -"),
        "{text}"
    );
    assert!(text.contains("roles:        none"), "{text}");
}

#[test]
fn bundled_plugins_are_described_as_json() {
    let (producer, consumer) = bundled();
    for (lib, role, absent) in [
        (producer, "producer", "arrowcert_consume_array"),
        (consumer, "consumer", "arrowcert_produce_array"),
    ] {
        let out = run_arrowcert(&["inspect", "--json", lib.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(0));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        assert_eq!(v["abi_version"], 1);
        assert_eq!(v["roles"], serde_json::json!([role]));
        // The emulated device is attached at load, so both claim it.
        assert_eq!(v["devices"], serde_json::json!(["cpu", "ext-dev"]));
        assert!(v["name"].as_str().unwrap().contains("reference"));
        assert_eq!(v["sha256"].as_str().unwrap().len(), 64);
        let present = |sym: &str| {
            v["entry_points"]
                .as_array()
                .unwrap()
                .iter()
                .find(|e| e["symbol"] == sym)
                .unwrap()["present"]
                .as_bool()
                .unwrap()
        };
        assert!(!present(absent));
        let all_of_role = arrowcert::plugin::SYMBOLS
            .iter()
            .filter(|(_, r)| format!("{r:?}").to_lowercase() == role);
        for (sym, _) in all_of_role {
            assert!(present(sym), "{role} exports {sym}");
        }
    }
}

#[test]
fn missing_path() {
    let out = run_arrowcert(&["inspect", "/nonexistent/libnothing.so"]);
    assert_bad_input(&out, "no such file");
}

#[test]
fn a_directory() {
    let dir = scratch("a-dir");
    let out = run_arrowcert(&["inspect", dir.to_str().unwrap()]);
    assert_bad_input(&out, "not a file");
}

#[test]
fn not_a_shared_object_text() {
    let f = scratch("text").join("libtext.so");
    std::fs::write(&f, "this is not a library\n").unwrap();
    let out = run_arrowcert(&["inspect", f.to_str().unwrap()]);
    assert_bad_input(&out, "not a shared library (no ELF header)");
}

#[test]
fn not_a_shared_object_object_file() {
    let dir = scratch("objfile");
    let src = dir.join("x.c");
    std::fs::write(&src, identity_source("1", "\"x\"")).unwrap();
    let obj = dir.join("x.o");
    cc(&["-c", "-fPIC"], &src, &obj);
    let out = run_arrowcert(&["inspect", obj.to_str().unwrap()]);
    assert_bad_input(&out, "not a shared library (ELF type REL");
}

#[test]
fn wrong_architecture() {
    // A real plugin with its ELF machine field rewritten to aarch64 (or to
    // x86_64 when this runs on aarch64): dlopen must never see it.
    let lib = cc_plugin("archsrc", &identity_source("1", "\"arch\""));
    let mut bytes = std::fs::read(&lib).unwrap();
    let other: u16 = if cfg!(target_arch = "aarch64") {
        62
    } else {
        183
    };
    bytes[18..20].copy_from_slice(&other.to_le_bytes());
    let patched = scratch("arch").join("libother.so");
    std::fs::write(&patched, bytes).unwrap();
    let out = run_arrowcert(&["inspect", patched.to_str().unwrap()]);
    assert_bad_input(&out, "wrong architecture: built for");
}

#[test]
fn missing_identity_symbols() {
    let lib = cc_plugin(
        "noname",
        "#include <stdint.h>\nint32_t arrowcert_plugin_abi_version(void) { return 1; }\n",
    );
    let out = run_arrowcert(&["inspect", lib.to_str().unwrap()]);
    assert_bad_input(&out, "required symbol `arrowcert_plugin_name` is missing");

    let lib = cc_plugin(
        "noversion",
        "const char* arrowcert_plugin_name(void) { return \"x\"; }\n",
    );
    let out = run_arrowcert(&["inspect", lib.to_str().unwrap()]);
    assert_bad_input(
        &out,
        "required symbol `arrowcert_plugin_abi_version` is missing",
    );
}

#[test]
fn abi_version_other_than_one() {
    for v in ["2", "0", "-1"] {
        let lib = cc_plugin(
            &format!("abi{}", v.replace('-', "m")),
            &identity_source(v, "\"x\""),
        );
        let out = run_arrowcert(&["inspect", lib.to_str().unwrap()]);
        assert_bad_input(&out, &format!("plugin ABI version {v} is not supported"));
    }
}

#[test]
fn name_not_utf8_or_null() {
    let lib = cc_plugin("badname", &identity_source("1", "\"bad \\xff\\xfe name\""));
    let out = run_arrowcert(&["inspect", lib.to_str().unwrap()]);
    assert_bad_input(&out, "arrowcert_plugin_name() is not valid UTF-8");

    let lib = cc_plugin("nullname", &identity_source("1", "NULL"));
    let out = run_arrowcert(&["inspect", lib.to_str().unwrap()]);
    assert_bad_input(&out, "arrowcert_plugin_name() returned NULL");
}

#[test]
fn unresolved_dependency() {
    let src = format!(
        "{}\nextern int arrowcert_no_such_function(void);\nint use_it(void) {{ return arrowcert_no_such_function(); }}\n",
        identity_source("1", "\"x\"")
    );
    let lib = cc_plugin("unresolved", &src);
    let out = run_arrowcert(&["inspect", lib.to_str().unwrap()]);
    assert_bad_input(&out, "cannot load");
}

#[test]
fn roundtrip_with_a_bad_plugin_is_bad_input() {
    let lib = cc_plugin("abi7", &identity_source("7", "\"x\""));
    let out = run_arrowcert(&["roundtrip", "--producer", lib.to_str().unwrap()]);
    assert_bad_input(&out, "plugin ABI version 7");
}

#[test]
fn unknown_bundled_name() {
    let out = run_arrowcert(&["roundtrip", "--producer", "nosuchplugin"]);
    assert_bad_input(&out, "not a bundled producer");
}

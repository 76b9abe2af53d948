//! `adbc:` plugins (docs/ADBC.md): SQLite's ADBC driver certified from its
//! library alone, a type the database cannot hold as a limitation with the
//! driver's message, bad drivers as bad input, and a throwaway PostgreSQL
//! server that leaves nothing behind.
//!
//! SQLite's driver comes from `scripts/python/setup-test-env.sh`
//! (target/python-test, which CI sets up: ARROWCERT_REQUIRE_PY_ADAPTERS=1);
//! the PostgreSQL test needs the server binaries (CI installs them:
//! ARROWCERT_REQUIRE_POSTGRES=1).

mod support;

use std::path::PathBuf;
use std::process::Command;

use arrowcert::report::Verdict;
use support::*;

fn sqlite_driver() -> Option<PathBuf> {
    let lib = workspace_dir().join(
        "target/python-test/venv/lib/python3.11/site-packages/adbc_driver_sqlite/libadbc_driver_sqlite.so",
    );
    let found = std::fs::read_dir(workspace_dir().join("target/python-test/venv/lib"))
        .ok()
        .and_then(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| {
                    e.path()
                        .join("site-packages/adbc_driver_sqlite/libadbc_driver_sqlite.so")
                })
                .find(|p| p.exists())
        })
        .or_else(|| lib.exists().then_some(lib));
    if found.is_none() {
        let why = "SQLite's ADBC driver is not in target/python-test: run scripts/python/setup-test-env.sh";
        assert!(
            std::env::var("ARROWCERT_REQUIRE_PY_ADAPTERS").as_deref() != Ok("1"),
            "ARROWCERT_REQUIRE_PY_ADAPTERS=1 but {why}"
        );
        eprintln!("SKIPPED: {why}");
    }
    found
}

#[test]
fn sqlites_driver_is_certified_both_ways_and_declines_what_sqlite_cannot_hold() {
    let Some(driver) = sqlite_driver() else {
        return;
    };
    let spec = format!("adbc:{}", driver.display());
    let report = scratch("adbc").join("sqlite.json");
    let _ = std::fs::remove_file(&report);
    let ids = [
        "producer/schema/primitive",
        "producer/stream/binary",
        "producer/stream/no_batches",
        "consumer/stream/plain/binary",
        "consumer/stream/plain/nested",
    ];
    let out = Command::new(arrowcert_exe())
        .args(["certify", "--producer", &spec, "--consumer", &spec])
        .args(["--cases", "0", "--report"])
        .arg(&report)
        .arg("--exact")
        .args(ids)
        .output()
        .expect("arrowcert runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(0), "{text}");
    let r = arrowcert::report::read(&report).expect("a report");
    assert!(r.complete);
    let case = |id: &str| r.cases.iter().find(|c| c.id == id).expect(id);
    for id in &ids[..4] {
        assert_eq!(case(id).verdict, Verdict::Pass, "{:?}", case(id));
    }
    // Nested types: SQLite has no column type for them; the driver says
    // so, and that is a limitation with its words.
    let nested = case("consumer/stream/plain/nested");
    assert_eq!(nested.verdict, Verdict::Limitation, "{nested:?}");
    let m = nested.message.as_deref().unwrap_or("");
    assert!(
        m.contains("the database cannot hold this data") && m.contains("unsupported type"),
        "{m}"
    );
    assert!(
        r.plugins
            .iter()
            .all(|p| p.name.contains("libadbc_driver_sqlite")),
        "{:?}",
        r.plugins
    );
}

#[test]
fn a_missing_driver_or_entry_point_is_bad_input_in_one_line() {
    let out = Command::new(arrowcert_exe())
        .args(["certify", "--producer", "adbc:/no/such/libdriver.so"])
        .output()
        .expect("arrowcert runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("no such driver library"), "{stderr}");
    let Some(driver) = sqlite_driver() else {
        return;
    };
    let out = Command::new(arrowcert_exe())
        .args(["certify", "--producer"])
        .arg(format!("adbc:{}:NoSuchInit", driver.display()))
        .output()
        .expect("arrowcert runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("has no entry point NoSuchInit"), "{stderr}");
}

fn postgres_installed() -> bool {
    let found = std::fs::read_dir("/usr/lib/postgresql")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .any(|e| e.path().join("bin/postgres").exists())
        })
        .unwrap_or(false);
    if !found {
        let why =
            "no PostgreSQL server binaries in /usr/lib/postgresql (Debian's postgresql package)";
        assert!(
            std::env::var("ARROWCERT_REQUIRE_POSTGRES").as_deref() != Ok("1"),
            "ARROWCERT_REQUIRE_POSTGRES=1 but {why}"
        );
        eprintln!("SKIPPED: {why}");
    }
    found
}

#[test]
fn the_throwaway_postgresql_server_starts_answers_and_leaves_nothing_behind() {
    if !postgres_installed() {
        return;
    }
    let script = workspace_dir().join("scripts/postgres/server.sh");
    let out = Command::new("bash")
        .arg(&script)
        .arg("start")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let env = String::from_utf8_lossy(&out.stdout).into_owned();
    let get = |k: &str| {
        env.lines()
            .find_map(|l| l.strip_prefix(&format!("export {k}=")))
            .map(|v| v.trim_matches('\'').to_string())
            .unwrap_or_else(|| panic!("{k} in {env}"))
    };
    let (dir, uri) = (get("ARROWCERT_PG_DIR"), get("ARROWCERT_PG_URI"));
    assert!(dir.starts_with("/tmp/arrowcert-pg-"), "{dir}");
    // Bulk ingestion into a real server, and the query stream back. The
    // driver comes from the project-local environment (`just real`) when
    // it is there; otherwise only the server's life is checked.
    let driver = workspace_dir().join(
        "target/real/venv/lib/python3.11/site-packages/adbc_driver_postgresql/libadbc_driver_postgresql.so",
    );
    let ran = driver.exists().then(|| {
        Command::new(arrowcert_exe())
            .args([
                "--adbc-option",
                &format!("uri={uri}"),
                "certify",
                "--producer",
            ])
            .arg(format!("adbc:{}", driver.display()))
            .args(["--cases", "0", "--report"])
            .arg(scratch("adbc").join("pg.json"))
            .args(["--exact", "producer/stream/binary"])
            .output()
            .unwrap()
    });
    let stop = Command::new("bash")
        .arg(&script)
        .args(["stop", &dir])
        .output()
        .unwrap();
    assert!(
        stop.status.success(),
        "{}",
        String::from_utf8_lossy(&stop.stderr)
    );
    assert!(!std::path::Path::new(&dir).exists(), "{dir} removed");
    let left = Command::new("pgrep").args(["-f", &dir]).output().unwrap();
    assert!(left.stdout.is_empty(), "a server of {dir} still runs");
    if let Some(out) = ran {
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

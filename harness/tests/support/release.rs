//! The release tarball (scripts/release/tarball.sh), built once per test
//! process around this test's `arrowcert` binary (`--bin`: the binary
//! under test, not a relink of it), with its profile and the
//! reference plugins only (the default adds arrow-rs: longer to build, and
//! nothing these tests run needs it), and unpacked into empty folders
//! outside the checkout.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::support::{arrowcert_exe, scratch, workspace_dir};

/// The tarball's path (its `.sha256` beside it).
pub fn tarball() -> &'static PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let exe = arrowcert_exe();
        let profile_dir = exe.parent().unwrap();
        let target_dir = profile_dir.parent().unwrap();
        let profile = if profile_dir.ends_with("release") {
            "release"
        } else {
            "dev"
        };
        let out = scratch("release-tarball");
        let run = Command::new("bash")
            .arg(workspace_dir().join("scripts/release/tarball.sh"))
            .args(["--profile", profile, "--plugins", "reference", "--bin"])
            .arg(&exe)
            .arg("--out")
            .arg(&out)
            .env("CARGO_TARGET_DIR", target_dir)
            .output()
            .expect("bash runs");
        assert!(
            run.status.success(),
            "tarball.sh failed:\n{}{}",
            String::from_utf8_lossy(&run.stdout),
            String::from_utf8_lossy(&run.stderr)
        );
        let path = PathBuf::from(
            String::from_utf8_lossy(&run.stdout)
                .trim()
                .lines()
                .last()
                .unwrap(),
        );
        assert!(path.is_file(), "{}", path.display());
        path
    })
}

/// The tarball unpacked into the empty folder `dir` (outside the
/// checkout); the folder it holds.
pub fn unpack(tarball: &Path, dir: &Path) -> PathBuf {
    assert!(!dir.starts_with(workspace_dir()));
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).unwrap();
    let st = Command::new("tar")
        .arg("-xzf")
        .arg(tarball)
        .arg("-C")
        .arg(dir)
        .status()
        .unwrap();
    assert!(st.success());
    let name = tarball.file_name().unwrap().to_str().unwrap();
    dir.join(name.strip_suffix(".tar.gz").unwrap())
}

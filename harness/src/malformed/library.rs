//! The mutant producer (`producers/mutants/mutant_producer.c`), built by
//! `harness/build.rs` and embedded like the allocation tracker, so that
//! `certify --malformed` works from a moved binary. Each worker chooses its
//! mutation at load time from [`MUTANT_ENV`] and wraps the reference
//! producer named by [`BASE_ENV`].

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// The mutant producer library, as built for this binary.
pub static LIBRARY: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/libarrowcert_mutant_producer.so"));

/// The environment variable that names the mutation (`harness/build.rs`
/// builds the library with these names instead of `ARROWCERT_MUTANT` and
/// `ARROWCERT_MUTANT_BASE`, which a consumer mutant under test reads).
pub const MUTANT_ENV: &str = "ARROWCERT_MALFORMED_MUTANT";
/// The environment variable that names the base (reference) producer.
pub const BASE_ENV: &str = "ARROWCERT_MALFORMED_BASE";

/// Set to `1`: the mutant's streams carry its schema and array mutations
/// in their schema and every chunk (unset, they pass the base's through).
pub const STREAM_CHUNKS_ENV: &str = "ARROWCERT_MUTANT_STREAM_CHUNKS";

/// Writes the library into a new private directory under `parent` and
/// returns its path; the caller removes the directory.
pub fn install(parent: &Path) -> std::io::Result<PathBuf> {
    let dir = parent.join(format!("arrowcert-malformed-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
    let path = dir.join("libarrowcert_mutant_producer.so");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o500)
        .open(&path)?;
    f.write_all(LIBRARY)?;
    f.sync_all()?;
    Ok(path)
}

use std::os::unix::fs::DirBuilderExt;

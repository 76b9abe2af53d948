//! The `arrowcert` command line. Each subcommand lives in its own module;
//! `main.rs` only parses and dispatches.

#![forbid(unsafe_code)]

pub mod certify;
pub mod inspect;
pub mod progress;
pub mod roundtrip;

use std::path::{Path, PathBuf};

/// Exit code for bad input (a path that is not a plugin, a wrong ABI
/// version, an unreadable data directory, a usage error).
pub const EXIT_BAD_INPUT: i32 = 2;
/// Exit code when a run found failures.
pub const EXIT_FAILURES: i32 = 1;

/// An error the user must fix; printed as one line.
#[derive(Debug)]
pub struct BadInput(pub String);

impl std::fmt::Display for BadInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The bundled plugins, built by `cargo build --workspace` next to the
/// `arrowcert` binary.
pub const BUNDLED: &[(&str, &str, &str)] = &[
    // (short name, role, library file)
    (
        "reference",
        "producer",
        "libarrowcert_producer_reference.so",
    ),
    (
        "reference",
        "consumer",
        "libarrowcert_consumer_reference.so",
    ),
    // CUDA only (CUDA, CUDA_HOST, CUDA_MANAGED): `just gpu`.
    (
        "cuda-reference",
        "producer",
        "libarrowcert_producer_cuda_reference.so",
    ),
    (
        "cuda-reference",
        "consumer",
        "libarrowcert_consumer_cuda_reference.so",
    ),
];

/// Resolves a plugin argument: a path, or the short name of a bundled
/// plugin (`reference`) found beside the running executable.
pub fn resolve_plugin(arg: &str, role: &str) -> Result<PathBuf, BadInput> {
    let looks_like_path = arg.contains('/') || arg.ends_with(".so") || Path::new(arg).exists();
    if looks_like_path {
        return Ok(PathBuf::from(arg));
    }
    let file = BUNDLED
        .iter()
        .find(|(name, r, _)| *name == arg && *r == role)
        .map(|(_, _, file)| *file)
        .ok_or_else(|| {
            let names: Vec<&str> = BUNDLED
                .iter()
                .filter(|(_, r, _)| *r == role)
                .map(|(n, _, _)| *n)
                .collect();
            BadInput(format!(
                "{arg}: no such file, and not a bundled {role} (bundled: {})",
                names.join(", ")
            ))
        })?;
    let dir = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
        .unwrap_or_default();
    let path = dir.join(file);
    if !path.exists() {
        return Err(BadInput(format!(
            "bundled {role} `{arg}` not found at {}: build it with `cargo build --workspace` (same profile as arrowcert)",
            path.display()
        )));
    }
    Ok(path)
}

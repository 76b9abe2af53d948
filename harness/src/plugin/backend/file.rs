//! A library named by its path: loaded as it is (a plugin, or an Arrow C
//! data integration library behind the built-in adapter).

use std::path::{Path, PathBuf};

use super::Source;

/// An argument that looks like a path: it has a `/`, ends in `.so`, or
/// names a file that is there.
pub struct File;

impl Source for File {
    fn prefix(&self) -> &'static str {
        ""
    }

    fn claims(&self, arg: &str) -> bool {
        arg.contains('/') || arg.ends_with(".so") || Path::new(arg).exists()
    }

    fn prepare(&self, spec: &str, _role: &str) -> Result<PathBuf, String> {
        Ok(PathBuf::from(spec))
    }
}

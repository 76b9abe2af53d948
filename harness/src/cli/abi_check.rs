//! `arrowcert abi-check`: a C header's Arrow structs against arrowcert's.

use std::path::PathBuf;

use super::BadInput;

/// The flags of `arrowcert abi-check` (their help is the command's).
#[derive(clap::Args)]
pub struct AbiCheckFlags {
    /// The header (default: the bundled arrowcert_plugin.h).
    pub header: Option<PathBuf>,
}

/// `arrowcert abi-check`, from its flags.
pub fn abi_check_command(f: AbiCheckFlags) -> Result<i32, BadInput> {
    let AbiCheckFlags { header } = f;
    let header = match header {
        Some(h) => h,
        None => crate::assets::path("include/arrowcert_plugin.h").map_err(BadInput)?,
    };
    let mismatches = crate::abi::layout::check_header(&header).map_err(BadInput)?;
    if mismatches.is_empty() {
        println!(
            "{}: every Arrow struct, field and constant matches arrowcert's layout",
            header.display()
        );
        Ok(0)
    } else {
        for m in &mismatches {
            println!("mismatch: {m}");
        }
        println!("{}: {} mismatches", header.display(), mismatches.len());
        Ok(crate::cli::EXIT_FAILURES)
    }
}

//! Structural inspection of exported C data interface structures.
//!
//! [`format`] parses format strings (safe Rust only); [`validate`] walks an
//! `ArrowSchema` / `ArrowArray` tree and reports every broken rule as a
//! [`Violation`] with the rule ID of `shared/RULES.md`, the path of the node
//! (`root.children[1].dictionary`) and what was observed against what the
//! spec requires. It checks structure and buffer contents (offsets, null
//! counts, union type ids, run ends, views, dictionary indices), never
//! follows a NULL or poison pointer, and bounds depth, counts and sizes.

/// Format strings parsed: in the plugin SDK, which the device mirror needs.
pub use arrowcert_sdk::format;
pub mod probe;
pub mod validate;

pub use validate::{validate_array, validate_schema, Violation};

/// True when one of `found` breaks a MUST rule. Only such a finding keeps
/// the harness from reading on (an array's buffers after its schema, the
/// chunks after a stream's schema): a SHOULD or INFO finding (a name that
/// is not UTF-8, a flag where it does not apply) is reported and the
/// checks go on, so it can never hide a MUST violation behind it.
pub fn any_must(found: &[Violation]) -> bool {
    found.iter().any(|v| crate::rules::is_must(v.rule))
}

/// The rules whose findings arrow-rs, which reads values for the harness,
/// cannot read past: it panics on a name that is not UTF-8, refuses such
/// metadata, and takes utf8 values as Rust strings without checking them
/// (its import does not validate: reading a value that is not UTF-8 as a
/// string is undefined behaviour). An export with one of these is not
/// read, its values not judged (the finding stands at its own level).
pub const UNREADABLE_BY_ARROW_RS: &[&str] = &[
    crate::rule!("schema.name.utf8"),
    crate::rule!("schema.metadata.utf8"),
    crate::rule!("array.utf8.valid"),
];

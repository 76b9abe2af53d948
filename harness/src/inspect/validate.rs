//! Structural validation of exported `ArrowSchema` / `ArrowArray` trees.
//!
//! [`validate_schema`] checks a schema tree against CDataInterface.rst;
//! [`validate_array`] checks an array tree against its (already validated)
//! schema and Columnar.rst, buffer contents included (the equivalent of
//! nanoarrow's `ArrowArrayViewValidate(..., NANOARROW_VALIDATION_LEVEL_FULL)`
//! plus null counts, dictionary indices and view bounds). Every finding is a
//! [`Violation`] naming one rule of `shared/RULES.md`.
//!
//! The validator reads producer memory, so it is careful about what it
//! follows: it never dereferences a NULL, poison ([`is_poison_ptr`]) or
//! misaligned structure pointer, never reads a buffer of a node whose layout
//! (`n_buffers`, lengths) did not check out, reads only the buffer bytes that
//! a node's own `offset` and `length` imply, bounds recursion depth, child
//! counts, buffer counts and metadata sizes, and does all length arithmetic
//! checked. What it cannot check is whether a non-NULL pointer really points
//! to as much memory as the structure claims; a producer that lies there
//! crashes the process running the validator (the harness runs it in a
//! worker for that reason).
//!
//! Performance: bitmaps are counted a 64-bit word at a time (with AVX2 and
//! POPCNT where the CPU has them), and offsets, type ids, indices and views
//! are scanned as byte slices in blocks whose fast path has no branches.

use std::ffi::{c_char, c_void, CStr};
use std::fmt;

use super::format::{self, shown, BufferShape, Format, UnionMode};
use crate::abi::{
    is_poison_ptr, ArrowArray, ArrowSchema, ARROW_FLAG_DICTIONARY_ORDERED,
    ARROW_FLAG_MAP_KEYS_SORTED, ARROW_FLAG_NULLABLE,
};

/// The rule IDs this module reports (see `shared/RULES.md`).
pub mod rule {
    pub const SCHEMA_FORMAT_NON_NULL: &str = "schema.format.non-null";
    pub const SCHEMA_FORMAT_VALID: &str = "schema.format.valid";
    pub const SCHEMA_CHILDREN_COUNT: &str = "schema.children.count";
    pub const SCHEMA_MAP_ENTRIES: &str = "schema.map.entries";
    pub const SCHEMA_MAP_NON_NULLABLE: &str = "schema.map.non-nullable";
    pub const SCHEMA_REE_RUN_ENDS: &str = "schema.ree.run-ends";
    pub const SCHEMA_REE_RUN_ENDS_FLAG: &str = "schema.ree.run-ends-flag";
    pub const SCHEMA_DICTIONARY_SHAPE: &str = "schema.dictionary.shape";
    pub const SCHEMA_FLAGS_KNOWN: &str = "schema.flags.known";
    pub const SCHEMA_FLAGS_PLACEMENT: &str = "schema.flags.placement";
    pub const SCHEMA_METADATA_ENCODING: &str = "schema.metadata.encoding";
    pub const SCHEMA_METADATA_UTF8: &str = "schema.metadata.utf8";
    pub const SCHEMA_NAME_UTF8: &str = "schema.name.utf8";
    pub const SCHEMA_RELEASE_SET: &str = "schema.release.set";
    pub const SCHEMA_RELEASE_RELOCATABLE: &str = "schema.release.relocatable";
    pub const ARRAY_RELEASE_SET: &str = "array.release.set";
    pub const ARRAY_RELEASE_RELOCATABLE: &str = "array.release.relocatable";
    pub const ARRAY_N_BUFFERS: &str = "array.layout.n-buffers";
    pub const ARRAY_N_CHILDREN: &str = "array.layout.n-children";
    pub const ARRAY_NULL_BUFFER: &str = "array.layout.null-buffer";
    pub const ARRAY_LENGTHS: &str = "array.layout.lengths";
    pub const ARRAY_NULL_COUNT: &str = "array.null-count";
    pub const ARRAY_UNION_NULL_COUNT: &str = "array.union.null-count";
    pub const ARRAY_BUFFERS_ALIGNED: &str = "array.buffers.aligned";
    pub const ARRAY_OFFSETS_VALID: &str = "array.offsets.valid";
    pub const ARRAY_UNION_TYPE_IDS: &str = "array.union.type-ids";
    pub const ARRAY_REE_RUN_ENDS: &str = "array.ree.run-ends";
    pub const ARRAY_REE_NULL_COUNT: &str = "array.ree.null-count";
    pub const ARRAY_VIEW_SIZES: &str = "array.view.sizes";
    pub const ARRAY_VIEW_PREFIX: &str = "array.view.prefix";
    pub const ARRAY_VIEW_INLINE_PADDING: &str = "array.view.inline-padding";
    pub const ARRAY_DICTIONARY_PRESENT: &str = "array.dictionary.present";
    pub const ARRAY_DICTIONARY_INDICES: &str = "array.dictionary.indices";

    /// Every rule above.
    pub const ALL: &[&str] = &[
        SCHEMA_FORMAT_NON_NULL,
        SCHEMA_FORMAT_VALID,
        SCHEMA_CHILDREN_COUNT,
        SCHEMA_MAP_ENTRIES,
        SCHEMA_MAP_NON_NULLABLE,
        SCHEMA_REE_RUN_ENDS,
        SCHEMA_REE_RUN_ENDS_FLAG,
        SCHEMA_DICTIONARY_SHAPE,
        SCHEMA_FLAGS_KNOWN,
        SCHEMA_FLAGS_PLACEMENT,
        SCHEMA_METADATA_ENCODING,
        SCHEMA_METADATA_UTF8,
        SCHEMA_NAME_UTF8,
        SCHEMA_RELEASE_SET,
        SCHEMA_RELEASE_RELOCATABLE,
        ARRAY_RELEASE_SET,
        ARRAY_RELEASE_RELOCATABLE,
        ARRAY_N_BUFFERS,
        ARRAY_N_CHILDREN,
        ARRAY_NULL_BUFFER,
        ARRAY_LENGTHS,
        ARRAY_NULL_COUNT,
        ARRAY_UNION_NULL_COUNT,
        ARRAY_BUFFERS_ALIGNED,
        ARRAY_OFFSETS_VALID,
        ARRAY_UNION_TYPE_IDS,
        ARRAY_REE_RUN_ENDS,
        ARRAY_REE_NULL_COUNT,
        ARRAY_VIEW_SIZES,
        ARRAY_VIEW_PREFIX,
        ARRAY_VIEW_INLINE_PADDING,
        ARRAY_DICTIONARY_PRESENT,
        ARRAY_DICTIONARY_INDICES,
    ];
}

use rule::*;

/// Nodes deeper than this (the root is depth 0) are not visited.
pub const MAX_DEPTH: usize = 64;
/// Larger `n_children` values are reported, not followed.
pub const MAX_CHILDREN: i64 = 1 << 16;
/// Larger `n_buffers` values (possible only for view types) are reported.
pub const MAX_BUFFERS: i64 = 1 << 20;
/// Metadata with more key/value pairs is reported, not read.
pub const MAX_METADATA_PAIRS: i64 = 1 << 20;
/// Metadata keys or values longer than this are reported, not read.
pub const MAX_METADATA_LENGTH: i64 = 1 << 30;
/// At most this many violations are returned per call.
pub const MAX_VIOLATIONS: usize = 1000;

/// One broken rule, at one node of the tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Rule ID, one of [`rule::ALL`].
    pub rule: &'static str,
    /// Path of the node: `root`, `root.children[1]`, `root.dictionary`, ...
    pub at: String,
    /// What was observed and what the rule requires.
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at {}: {}", self.rule, self.at, self.message)
    }
}

#[derive(Default)]
struct Sink {
    out: Vec<Violation>,
}

impl Sink {
    fn push(&mut self, rule: &'static str, at: &str, message: impl Into<String>) {
        if self.out.len() < MAX_VIOLATIONS {
            self.out.push(Violation {
                rule,
                at: at.to_string(),
                message: message.into(),
            });
        }
    }
}

/// Why a pointer to a `T` may not be followed, or `None` if it may.
fn unusable<T>(p: *const T) -> Option<&'static str> {
    let addr = p.addr();
    if p.is_null() {
        Some("NULL")
    } else if is_poison_ptr(addr) {
        Some("the poison pattern 0xA5A5... (never written)")
    } else if addr % std::mem::align_of::<T>() != 0 {
        Some("misaligned")
    } else {
        None
    }
}

/// True when a release callback field holds the poison pattern.
fn release_is_poison<F: Copy>(f: Option<F>) -> bool {
    match f {
        Some(f) if std::mem::size_of::<F>() == std::mem::size_of::<usize>() => {
            // SAFETY: F is a function pointer type of pointer size (checked
            // just above); its bits are one usize. Nothing is called.
            let bits: usize = unsafe { std::mem::transmute_copy(&f) };
            is_poison_ptr(bits)
        }
        _ => false,
    }
}

/// The parsed format of a schema node, or the broken rule and why: a
/// missing or non-UTF-8 format string is `schema.format.non-null`, one that
/// is not a format of the spec `schema.format.valid`.
///
/// # Safety
/// `s.format`, unless NULL or the poison pattern, must point to a
/// NUL-terminated string.
unsafe fn schema_format(s: &ArrowSchema) -> Result<Format, (&'static str, String)> {
    let p = s.format;
    if p.is_null() {
        return Err((SCHEMA_FORMAT_NON_NULL, "format is NULL".into()));
    }
    if is_poison_ptr(p.addr()) {
        return Err((
            SCHEMA_FORMAT_NON_NULL,
            "format pointer is the poison pattern (never written)".into(),
        ));
    }
    // SAFETY: non-NULL, not poison; the caller vouches it is a C string.
    let c = unsafe { CStr::from_ptr(p) };
    let text = c.to_str().map_err(|e| {
        (
            SCHEMA_FORMAT_NON_NULL,
            format!(
                "format is not valid UTF-8 (invalid byte at offset {})",
                e.valid_up_to()
            ),
        )
    })?;
    format::parse(text).map_err(|e| (SCHEMA_FORMAT_VALID, e))
}

/// Where `p` lies inside the `size` bytes at `start`, as an offset.
fn inside(start: usize, size: usize, p: usize) -> Option<usize> {
    p.checked_sub(start).filter(|&d| d < size)
}

/// The pointer members of a schema node that point inside the node itself
/// ("pointer members ... MUST not point inside the structure itself"): they
/// dangle as soon as the structure is moved.
pub fn schema_self_refs(s: &ArrowSchema) -> Vec<String> {
    let start = (s as *const ArrowSchema).addr();
    let size = std::mem::size_of::<ArrowSchema>();
    [
        ("format", s.format.addr()),
        ("name", s.name.addr()),
        ("metadata", s.metadata.addr()),
        ("children", s.children.addr()),
        ("dictionary", s.dictionary.addr()),
        ("private_data", s.private_data.addr()),
    ]
    .into_iter()
    .filter_map(|(what, p)| {
        inside(start, size, p).map(|d| {
            format!(
                "{what} points {d} bytes into the ArrowSchema structure itself, which may be moved"
            )
        })
    })
    .collect()
}

/// The same for an array node's pointer members.
pub fn array_member_self_refs(a: &ArrowArray) -> Vec<String> {
    let start = (a as *const ArrowArray).addr();
    let size = std::mem::size_of::<ArrowArray>();
    [
        ("buffers", a.buffers.addr()),
        ("children", a.children.addr()),
        ("dictionary", a.dictionary.addr()),
        ("private_data", a.private_data.addr()),
    ]
    .into_iter()
    .filter_map(|(what, p)| {
        inside(start, size, p).map(|d| {
            format!(
                "{what} points {d} bytes into the ArrowArray structure itself, which may be moved"
            )
        })
    })
    .collect()
}

/// The buffer pointers of an array node that point inside the node.
fn buffer_self_refs(a: &ArrowArray, ptrs: &[*const c_void]) -> Vec<String> {
    let start = (a as *const ArrowArray).addr();
    let size = std::mem::size_of::<ArrowArray>();
    ptrs.iter()
        .enumerate()
        .filter_map(|(i, p)| {
            inside(start, size, p.addr()).map(|d| {
                format!("buffers[{i}] points {d} bytes into the ArrowArray structure itself, which may be moved")
            })
        })
        .collect()
}

/// Pointers of an array node that point inside the node itself: its
/// pointer members, and its buffer pointers when its schema node's format
/// parses and `n_buffers` is the count that format has (as the validator
/// requires before it reads the buffers array).
///
/// # Safety
/// `s` must be a readable schema whose format, when usable, is a C string,
/// and `a.buffers`, when usable, must point to `n_buffers` pointers.
pub unsafe fn array_self_refs(s: &ArrowSchema, a: &ArrowArray) -> Vec<String> {
    let mut out = array_member_self_refs(a);
    // SAFETY: forwarded from the caller.
    let Ok(fmt) = (unsafe { schema_format(s) }) else {
        return out;
    };
    let nb = a.n_buffers;
    let count_ok = match format::n_buffers(&fmt) {
        BufferShape::Fixed(k) => nb == k as i64,
        BufferShape::View => (3..=MAX_BUFFERS).contains(&nb),
    };
    if count_ok && nb > 0 && unusable(a.buffers.cast_const()).is_none() && out.is_empty() {
        // SAFETY: usable pointer to n_buffers (the format's count, bounded)
        // pointers, as the producer guarantees; only pointer values are read.
        let ptrs = unsafe { std::slice::from_raw_parts(a.buffers.cast_const(), nb as usize) };
        out.extend(buffer_self_refs(a, ptrs));
    }
    out
}

/// The children pointers of a schema node, if they may be followed.
///
/// # Safety
/// `s` must be a readable schema whose `children` pointer, when usable, points
/// to `n_children` pointers.
unsafe fn schema_children(s: &ArrowSchema) -> Option<&[*mut ArrowSchema]> {
    let n = s.n_children;
    if !(0..=MAX_CHILDREN).contains(&n) {
        return None;
    }
    if n == 0 {
        return Some(&[]);
    }
    if unusable(s.children.cast_const()).is_some() {
        return None;
    }
    // SAFETY: usable pointer to n (bounded, > 0) child pointers, as the
    // schema's producer guarantees.
    Some(unsafe { std::slice::from_raw_parts(s.children.cast_const(), n as usize) })
}

/// A schema node that may be read, or `None`.
///
/// # Safety
/// `p`, when usable, must point to a readable `ArrowSchema`.
unsafe fn live_schema<'a>(p: *const ArrowSchema) -> Option<&'a ArrowSchema> {
    if unusable(p).is_some() {
        return None;
    }
    // SAFETY: usable pointer; the caller vouches for the memory.
    let s = unsafe { &*p };
    s.release.is_some().then_some(s)
}

// ---------------------------------------------------------------------------
// Schema
// ---------------------------------------------------------------------------

/// Validates a schema tree.
///
/// # Safety
/// `schema` must be NULL or point to a readable `ArrowSchema`. Its nested
/// pointers may be anything: each is checked (NULL, poison, alignment,
/// released) before it is followed. Non-NULL, non-poison pointers are
/// trusted to point to what the C data interface says they point to.
pub unsafe fn validate_schema(schema: *const ArrowSchema) -> Vec<Violation> {
    let mut sink = Sink::default();
    if let Some(why) = unusable(schema) {
        sink.push(
            SCHEMA_RELEASE_SET,
            "root",
            format!("the schema pointer is {why}"),
        );
        return sink.out;
    }
    // SAFETY: usable pointer; the caller vouches for a readable schema.
    let s = unsafe { &*schema };
    if s.release.is_none() {
        sink.push(
            SCHEMA_RELEASE_SET,
            "root",
            "release is NULL: the schema is released, not a live export",
        );
        return sink.out;
    }
    // SAFETY: live, readable schema (above); nested pointers are checked.
    unsafe { check_schema(s, "root", 0, &mut sink) };
    sink.out
}

/// What a parent needs to know about a checked schema child.
struct SchemaNode {
    format: Option<Format>,
    flags: i64,
    n_children: i64,
    children: Vec<Option<SchemaNode>>,
}

/// # Safety
/// `s` is a readable, live schema; the pointers inside it are followed only
/// when usable, and then must point to what the C data interface says.
unsafe fn check_schema(s: &ArrowSchema, at: &str, depth: usize, sink: &mut Sink) -> SchemaNode {
    if release_is_poison(s.release) {
        sink.push(
            SCHEMA_RELEASE_SET,
            at,
            "release is the poison pattern: the producer never set it",
        );
    }

    for problem in schema_self_refs(s) {
        sink.push(SCHEMA_RELEASE_RELOCATABLE, at, problem);
    }

    // SAFETY: readable schema; schema_format checks the pointer.
    let format = match unsafe { schema_format(s) } {
        Ok(f) => Some(f),
        Err((rule, e)) => {
            sink.push(rule, at, e);
            None
        }
    };

    if !s.name.is_null() {
        if is_poison_ptr(s.name.addr()) {
            sink.push(
                SCHEMA_NAME_UTF8,
                at,
                "name pointer is the poison pattern (never written)",
            );
        } else {
            // SAFETY: non-NULL, non-poison name: a C string per the spec.
            let name = unsafe { CStr::from_ptr(s.name) };
            if let Err(e) = name.to_str() {
                sink.push(
                    SCHEMA_NAME_UTF8,
                    at,
                    format!(
                        "name is not valid UTF-8 (invalid byte at offset {} of {})",
                        e.valid_up_to(),
                        name.to_bytes().len()
                    ),
                );
            }
        }
    }

    if !s.metadata.is_null() {
        let found = if is_poison_ptr(s.metadata.addr()) {
            MetadataProblems {
                framing: Some("metadata pointer is the poison pattern (never written)".to_string()),
                not_utf8: None,
            }
        } else {
            // SAFETY: non-NULL, non-poison metadata; the reader is bounded.
            unsafe { metadata_problems(s.metadata) }
        };
        if let Some(p) = found.framing {
            sink.push(SCHEMA_METADATA_ENCODING, at, p);
        }
        if let Some(p) = found.not_utf8 {
            sink.push(SCHEMA_METADATA_UTF8, at, p);
        }
    }

    let flags = s.flags;
    let unknown =
        flags & !(ARROW_FLAG_DICTIONARY_ORDERED | ARROW_FLAG_NULLABLE | ARROW_FLAG_MAP_KEYS_SORTED);
    if unknown != 0 {
        sink.push(
            SCHEMA_FLAGS_KNOWN,
            at,
            format!("flags is {flags:#x}: bits {unknown:#x} are not defined (only 1, 2, 4 are)"),
        );
    }
    if flags & ARROW_FLAG_DICTIONARY_ORDERED != 0 && s.dictionary.is_null() {
        sink.push(
            SCHEMA_FLAGS_PLACEMENT,
            at,
            "ARROW_FLAG_DICTIONARY_ORDERED is set but the type is not dictionary-encoded (dictionary is NULL)",
        );
    }
    if flags & ARROW_FLAG_MAP_KEYS_SORTED != 0 {
        if let Some(f) = format.as_ref().filter(|f| **f != Format::Map) {
            sink.push(
                SCHEMA_FLAGS_PLACEMENT,
                at,
                format!(
                    "ARROW_FLAG_MAP_KEYS_SORTED is set on format {}, not a map (+m)",
                    shown(&f.to_string())
                ),
            );
        }
    }

    // Children.
    let n = s.n_children;
    let mut children = Vec::new();
    if n < 0 {
        sink.push(
            SCHEMA_CHILDREN_COUNT,
            at,
            format!("n_children is {n}, negative"),
        );
    } else if n > MAX_CHILDREN {
        sink.push(
            SCHEMA_CHILDREN_COUNT,
            at,
            format!("n_children is {n}, above the validator's bound of {MAX_CHILDREN}; children not checked"),
        );
    } else if n > 0 {
        if let Some(why) = unusable(s.children.cast_const()) {
            sink.push(
                SCHEMA_CHILDREN_COUNT,
                at,
                format!("n_children is {n} but the children pointer is {why}"),
            );
        } else {
            // SAFETY: usable pointer to n child pointers (the spec's
            // "There must be n_children pointers").
            let ptrs = unsafe { std::slice::from_raw_parts(s.children.cast_const(), n as usize) };
            children.reserve(ptrs.len());
            for (i, &cp) in ptrs.iter().enumerate() {
                let child_at = format!("{at}.children[{i}]");
                // SAFETY: the pointer is checked before it is followed.
                children.push(unsafe { visit_schema(cp, &child_at, "children", i, depth, sink) });
            }
        }
    }
    if let Some(f) = &format {
        if let Some(expected) = format::expected_children(f) {
            if n != expected as i64 {
                sink.push(
                    SCHEMA_CHILDREN_COUNT,
                    at,
                    format!(
                        "format {} has {expected} child type(s) but n_children is {n}",
                        shown(&f.to_string())
                    ),
                );
            }
        }
    }

    // Dictionary.
    if !s.dictionary.is_null() {
        if let Some(f) = format.as_ref().filter(|f| !format::is_integer(f)) {
            sink.push(
                SCHEMA_DICTIONARY_SHAPE,
                at,
                format!(
                    "dictionary is set but format {} is not an integer index type",
                    shown(&f.to_string())
                ),
            );
        }
        if let Some(why) = unusable(s.dictionary.cast_const()) {
            sink.push(
                SCHEMA_DICTIONARY_SHAPE,
                at,
                format!("dictionary pointer is {why}"),
            );
        } else {
            let dict_at = format!("{at}.dictionary");
            // SAFETY: the pointer is checked (again) before it is followed.
            unsafe { visit_schema(s.dictionary, &dict_at, "dictionary", 0, depth, sink) };
        }
    }

    // Type-specific rules on the children.
    match &format {
        Some(Format::Map) => {
            if let Some(Some(entries)) = children.first() {
                check_map_entries(entries, &format!("{at}.children[0]"), sink);
            }
        }
        Some(Format::RunEndEncoded) => {
            if let Some(Some(run_ends)) = children.first() {
                let ree_at = format!("{at}.children[0]");
                if let Some(f) = run_ends
                    .format
                    .as_ref()
                    .filter(|f| !format::is_run_end_type(f))
                {
                    sink.push(
                        SCHEMA_REE_RUN_ENDS,
                        &ree_at,
                        format!(
                            "run ends have format {}; they must be int16 (s), int32 (i) or int64 (l)",
                            shown(&f.to_string())
                        ),
                    );
                }
                if run_ends.flags & ARROW_FLAG_NULLABLE != 0 {
                    sink.push(
                        SCHEMA_REE_RUN_ENDS_FLAG,
                        &ree_at,
                        "run ends field is nullable (ARROW_FLAG_NULLABLE); run ends cannot be null",
                    );
                }
            }
        }
        _ => {}
    }

    SchemaNode {
        format,
        flags,
        n_children: n,
        children,
    }
}

/// Follows one child or dictionary pointer of a live schema.
///
/// # Safety
/// `p`, when usable, must point to a readable `ArrowSchema`.
unsafe fn visit_schema(
    p: *const ArrowSchema,
    at: &str,
    what: &str,
    index: usize,
    depth: usize,
    sink: &mut Sink,
) -> Option<SchemaNode> {
    let parent_at = at.rsplit_once('.').map_or(at, |(p, _)| p);
    let label = if what == "children" {
        format!("children[{index}]")
    } else {
        what.to_string()
    };
    if let Some(why) = unusable(p) {
        // The dictionary pointer's problems are reported by the caller.
        if what == "children" {
            sink.push(
                SCHEMA_CHILDREN_COUNT,
                parent_at,
                format!("{label} is {why}"),
            );
        }
        return None;
    }
    // SAFETY: usable pointer; the caller vouches for the memory.
    let c = unsafe { &*p };
    if c.release.is_none() {
        sink.push(
            SCHEMA_RELEASE_SET,
            at,
            format!("{label} of a live schema is released (release is NULL)"),
        );
        return None;
    }
    if depth + 1 >= MAX_DEPTH {
        sink.push(
            SCHEMA_CHILDREN_COUNT,
            at,
            format!("nesting is deeper than {MAX_DEPTH} levels (a cycle?); not checked further"),
        );
        return None;
    }
    // SAFETY: live, readable schema.
    Some(unsafe { check_schema(c, at, depth + 1, sink) })
}

fn check_map_entries(entries: &SchemaNode, at: &str, sink: &mut Sink) {
    if let Some(f) = entries.format.as_ref().filter(|f| **f != Format::Struct) {
        sink.push(
            SCHEMA_MAP_ENTRIES,
            at,
            format!(
                "a map's child (entries) has format {}; it must be a struct (+s) of key and value",
                shown(&f.to_string())
            ),
        );
        return;
    }
    if entries.flags & ARROW_FLAG_NULLABLE != 0 {
        sink.push(
            SCHEMA_MAP_NON_NULLABLE,
            at,
            "a map's entries struct is nullable (ARROW_FLAG_NULLABLE); it should not be",
        );
    }
    if entries.n_children != 2 {
        sink.push(
            SCHEMA_MAP_ENTRIES,
            at,
            format!(
                "a map's entries struct has {} children; it must have 2 (key, value)",
                entries.n_children
            ),
        );
        return;
    }
    if let Some(Some(key)) = entries.children.first() {
        if key.flags & ARROW_FLAG_NULLABLE != 0 {
            sink.push(
                SCHEMA_MAP_NON_NULLABLE,
                &format!("{at}.children[0]"),
                "a map's key field is nullable (ARROW_FLAG_NULLABLE); keys should not be",
            );
        }
    }
}

/// What is wrong with an encoded metadata string: its framing (counts and
/// lengths that cannot be read), and apart from it, keys or values that
/// are not UTF-8. The spec calls metadata "a binary string" and states no
/// encoding for keys and values, so the two are judged apart
/// (`schema.metadata.encoding`, `schema.metadata.utf8`).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct MetadataProblems {
    pub framing: Option<String>,
    pub not_utf8: Option<String>,
}

/// Reads an encoded metadata string through ([`MetadataProblems`]).
///
/// # Safety
/// `p` is non-NULL and not poison, and points to metadata as the producer
/// encoded it: the reader trusts each count and length it has checked
/// against the bounds to describe memory that is there.
pub unsafe fn metadata_problems(p: *const c_char) -> MetadataProblems {
    let mut out = MetadataProblems::default();
    let base = p.cast::<u8>();
    // SAFETY: the first int32 of a non-NULL metadata string is its count.
    let count = unsafe { std::ptr::read_unaligned(base.cast::<i32>()) };
    if count < 0 {
        out.framing = Some(format!("the pair count is {count}, negative"));
        return out;
    }
    if i64::from(count) > MAX_METADATA_PAIRS {
        out.framing = Some(format!(
            "the pair count is {count}, above the validator's bound of {MAX_METADATA_PAIRS}; not read"
        ));
        return out;
    }
    let mut pos: usize = 4;
    for pair in 0..count {
        for what in ["key", "value"] {
            let Some(next) = pos.checked_add(4).filter(|&e| e <= isize::MAX as usize) else {
                return out;
            };
            // SAFETY: the encoding promises an int32 length at `pos` (every
            // earlier length was within bounds and was skipped over).
            let len = unsafe { std::ptr::read_unaligned(base.add(pos).cast::<i32>()) };
            if len < 0 {
                out.framing = Some(format!("pair {pair}: the {what} length is {len}, negative"));
                return out;
            }
            if i64::from(len) > MAX_METADATA_LENGTH {
                out.framing = Some(format!(
                    "pair {pair}: the {what} length is {len}, above the validator's bound of {MAX_METADATA_LENGTH}; not read"
                ));
                return out;
            }
            let end = match next.checked_add(len as usize) {
                Some(e) if e <= isize::MAX as usize => e,
                _ => {
                    out.framing = Some("the metadata is larger than the address space".into());
                    return out;
                }
            };
            // SAFETY: the encoding promises `len` bytes after the length;
            // `end` is within isize::MAX of the base.
            let bytes = unsafe { std::slice::from_raw_parts(base.add(next), len as usize) };
            if out.not_utf8.is_none() {
                if let Err(e) = std::str::from_utf8(bytes) {
                    out.not_utf8 = Some(format!(
                        "pair {pair}: the {what} ({len} bytes) is not valid UTF-8 (invalid byte at offset {})",
                        e.valid_up_to()
                    ));
                }
            }
            pos = end;
        }
    }
    out
}

// ---------------------------------------------------------------------------
// Array
// ---------------------------------------------------------------------------

/// Validates an array tree against its schema (structure and buffer
/// contents).
///
/// The schema is assumed to have been validated with [`validate_schema`]: a
/// node whose format does not parse is not checked further, and schema
/// pointers that may not be followed end the walk there, without a report.
///
/// # Safety
/// `schema` and `array` must each be NULL or point to a readable structure.
/// Nested pointers are checked (NULL, poison, alignment, released) before
/// they are followed; non-NULL, non-poison pointers are trusted to point to
/// what the C data interface says, buffers included: each buffer must hold
/// at least what the node's offset and length imply for its type.
pub unsafe fn validate_array(
    schema: *const ArrowSchema,
    array: *const ArrowArray,
) -> Vec<Violation> {
    let mut sink = Sink::default();
    // SAFETY: forwarded from the caller; live_schema checks the pointer.
    let Some(s) = (unsafe { live_schema(schema) }) else {
        return sink.out;
    };
    if let Some(why) = unusable(array) {
        sink.push(
            ARRAY_RELEASE_SET,
            "root",
            format!("the array pointer is {why}"),
        );
        return sink.out;
    }
    // SAFETY: usable pointer; the caller vouches for a readable array.
    let a = unsafe { &*array };
    if a.release.is_none() {
        sink.push(
            ARRAY_RELEASE_SET,
            "root",
            "release is NULL: the array is released, not a live export",
        );
        return sink.out;
    }
    // SAFETY: live, readable schema and array; nested pointers are checked.
    unsafe { check_array(s, a, "root", 0, &mut sink) };
    sink.out
}

/// What a parent needs to know about a checked array child.
struct ArrayInfo {
    format: Format,
    length: usize,
    offset: usize,
    null_count: i64,
    /// The validity bitmap, when there is one and it may be read for
    /// `offset + length` bits; NULL otherwise.
    validity: *const u8,
    /// Buffer 1 of a fixed-width array whose layout checked out: it may be
    /// read for `offset + length` values (NULL when that is zero bytes).
    data: Option<*const u8>,
}

/// Byte size of `count` items of `width` bytes, if it fits the address space.
fn bytes_for(count: usize, width: usize) -> Option<usize> {
    count
        .checked_mul(width)
        .filter(|&b| b <= isize::MAX as usize)
}

fn bitmap_bytes(bits: usize) -> usize {
    bits / 8 + usize::from(bits % 8 != 0)
}

/// Read access to one node's buffers, with the reports that go with it.
struct Buffers<'a> {
    ptrs: &'a [*const c_void],
    at: &'a str,
}

impl Buffers<'_> {
    /// Bytes `[start, end)` of buffer `i`, which must hold `required` bytes.
    /// A NULL pointer is allowed (and gives an empty slice) only when
    /// `required` is 0; otherwise it is reported and `None` comes back.
    ///
    /// # Safety
    /// Buffer `i`, when non-NULL, must hold at least `required` bytes, and
    /// `start <= end <= required`.
    unsafe fn region(
        &self,
        i: usize,
        what: &str,
        required: usize,
        start: usize,
        end: usize,
        sink: &mut Sink,
    ) -> Option<&[u8]> {
        let p = *self.ptrs.get(i)?;
        if p.is_null() {
            if required > 0 {
                sink.push(
                    ARRAY_NULL_BUFFER,
                    self.at,
                    format!("buffers[{i}] ({what}) is NULL but {required} bytes are required"),
                );
                return None;
            }
            return Some(&[]);
        }
        if end <= start || end > required {
            return Some(&[]);
        }
        // SAFETY: non-NULL (poison pointers were rejected with the buffers
        // array); the caller vouches for `required` bytes, and
        // start < end <= required <= isize::MAX.
        Some(unsafe { std::slice::from_raw_parts(p.cast::<u8>().add(start), end - start) })
    }

    /// Checks that buffer `i` is non-NULL when it must hold `required` bytes.
    fn present(&self, i: usize, what: &str, required: usize, sink: &mut Sink) -> bool {
        match self.ptrs.get(i) {
            Some(p) if p.is_null() && required > 0 => {
                sink.push(
                    ARRAY_NULL_BUFFER,
                    self.at,
                    format!("buffers[{i}] ({what}) is NULL but {required} bytes are required"),
                );
                false
            }
            Some(_) => true,
            None => false,
        }
    }
}

/// # Safety
/// `s` is a readable, live schema and `a` a readable, live array; nested
/// pointers are followed only when usable, and then must point to what the
/// C data interface says (buffers large enough for the node's offset and
/// length).
unsafe fn check_array(
    s: &ArrowSchema,
    a: &ArrowArray,
    at: &str,
    depth: usize,
    sink: &mut Sink,
) -> Option<ArrayInfo> {
    if release_is_poison(a.release) {
        sink.push(
            ARRAY_RELEASE_SET,
            at,
            "release is the poison pattern: the producer never set it",
        );
    }
    for problem in array_member_self_refs(a) {
        sink.push(ARRAY_RELEASE_RELOCATABLE, at, problem);
    }
    // SAFETY: readable schema; schema_format checks the pointer.
    let fmt = unsafe { schema_format(s) }.ok()?;

    // Lengths.
    let (len, off, nc) = (a.length, a.offset, a.null_count);
    let mut lengths_ok = true;
    if len < 0 {
        sink.push(
            ARRAY_LENGTHS,
            at,
            format!("length is {len}; it must be >= 0"),
        );
        lengths_ok = false;
    }
    if off < 0 {
        sink.push(
            ARRAY_LENGTHS,
            at,
            format!("offset is {off}; it must be >= 0"),
        );
        lengths_ok = false;
    }
    // null_count out of range is a null_count error (array.null-count),
    // not a length error: the length may well be right.
    if nc < -1 {
        sink.push(
            ARRAY_NULL_COUNT,
            at,
            format!("null_count is {nc}; it must be >= 0, or -1 when not computed"),
        );
    } else if len >= 0 && nc > len {
        sink.push(
            ARRAY_NULL_COUNT,
            at,
            format!("null_count is {nc}, more than the length {len}"),
        );
    }
    let mut range = None;
    if lengths_ok {
        match off.checked_add(len) {
            Some(end) => range = Some((off as usize, len as usize, end as usize)),
            None => sink.push(
                ARRAY_LENGTHS,
                at,
                format!("offset + length = {off} + {len} overflows int64"),
            ),
        }
    }

    // Buffers.
    let nb = a.n_buffers;
    let mut buffers_ok = true;
    match format::n_buffers(&fmt) {
        BufferShape::Fixed(k) => {
            if nb != k as i64 {
                sink.push(
                    ARRAY_N_BUFFERS,
                    at,
                    format!(
                        "format {} has {k} buffer(s) but n_buffers is {nb}",
                        shown(&fmt.to_string())
                    ),
                );
                buffers_ok = false;
            }
        }
        BufferShape::View => {
            if nb < 3 {
                sink.push(
                    ARRAY_VIEW_SIZES,
                    at,
                    format!(
                        "n_buffers is {nb}; a view array has at least 3 (validity, views, and the int64 sizes of the variadic buffers last)"
                    ),
                );
                buffers_ok = false;
            } else if nb > MAX_BUFFERS {
                sink.push(
                    ARRAY_N_BUFFERS,
                    at,
                    format!("n_buffers is {nb}, above the validator's bound of {MAX_BUFFERS}"),
                );
                buffers_ok = false;
            }
        }
    }
    let mut ptrs: &[*const c_void] = &[];
    if buffers_ok && nb > 0 {
        match unusable(a.buffers.cast_const()) {
            Some(why) => {
                sink.push(
                    ARRAY_NULL_BUFFER,
                    at,
                    format!("n_buffers is {nb} but the buffers pointer is {why}"),
                );
                buffers_ok = false;
            }
            None => {
                // SAFETY: usable pointer to n_buffers (checked, bounded)
                // buffer pointers, as the producer guarantees.
                ptrs = unsafe { std::slice::from_raw_parts(a.buffers.cast_const(), nb as usize) };
                for (i, p) in ptrs.iter().enumerate() {
                    if is_poison_ptr(p.addr()) {
                        sink.push(
                            ARRAY_NULL_BUFFER,
                            at,
                            format!("buffers[{i}] is the poison pattern 0xA5A5... (never written)"),
                        );
                        buffers_ok = false;
                    }
                }
            }
        }
    }

    // Children.
    // SAFETY: readable schema; schema_children checks the pointer.
    let schema_kids = unsafe { schema_children(s) };
    let sn = s.n_children;
    let an = a.n_children;
    let mut kids: Vec<Option<ArrayInfo>> = Vec::new();
    if an != sn {
        sink.push(
            ARRAY_N_CHILDREN,
            at,
            format!("the schema has {sn} child(ren) but n_children is {an}"),
        );
    }
    if !(0..=MAX_CHILDREN).contains(&an) {
        if an == sn {
            sink.push(
                ARRAY_N_CHILDREN,
                at,
                format!("n_children is {an}, outside 0..={MAX_CHILDREN}"),
            );
        }
    } else if an > 0 {
        match unusable(a.children.cast_const()) {
            Some(why) => sink.push(
                ARRAY_N_CHILDREN,
                at,
                format!("n_children is {an} but the children pointer is {why}"),
            ),
            None => {
                // SAFETY: usable pointer to n_children (bounded) pointers.
                let cps =
                    unsafe { std::slice::from_raw_parts(a.children.cast_const(), an as usize) };
                kids.reserve(cps.len());
                for (i, &cp) in cps.iter().enumerate() {
                    let child_at = format!("{at}.children[{i}]");
                    let sc = schema_kids.and_then(|k| k.get(i).copied());
                    // SAFETY: both pointers are checked before use.
                    let info =
                        unsafe { visit_array(sc, cp, &child_at, "children", i, at, depth, sink) };
                    kids.push(info);
                }
            }
        }
    }

    // Dictionary.
    let mut dict: Option<ArrayInfo> = None;
    let schema_has_dict = !s.dictionary.is_null();
    match (schema_has_dict, a.dictionary.is_null()) {
        (false, true) => {}
        (false, false) => sink.push(
            ARRAY_DICTIONARY_PRESENT,
            at,
            "dictionary is set but the schema has no dictionary",
        ),
        (true, true) => sink.push(
            ARRAY_DICTIONARY_PRESENT,
            at,
            "the schema has a dictionary but the array's dictionary is NULL",
        ),
        (true, false) => {
            if let Some(why) = unusable(a.dictionary.cast_const()) {
                sink.push(
                    ARRAY_DICTIONARY_PRESENT,
                    at,
                    format!("dictionary pointer is {why}"),
                );
            } else {
                let dict_at = format!("{at}.dictionary");
                // SAFETY: both pointers are checked before use.
                dict = unsafe {
                    visit_array(
                        Some(s.dictionary),
                        a.dictionary,
                        &dict_at,
                        "dictionary",
                        0,
                        at,
                        depth,
                        sink,
                    )
                };
            }
        }
    }

    let (offset, length, end) = range?;
    let mut info = ArrayInfo {
        format: fmt.clone(),
        length,
        offset,
        null_count: nc,
        validity: std::ptr::null(),
        data: None,
    };
    let node = Node {
        at,
        offset,
        length,
        end,
    };

    // Null counts of types without a validity bitmap (no buffer reads).
    let no_bitmap = match fmt {
        Format::Null if nc != -1 && nc != len => Some((ARRAY_NULL_COUNT, format!(
            "null_count is {nc}, but every slot of a null-type array is null: it must be the length {len} (or -1)"
        ))),
        Format::Union(..) if nc != 0 && nc != -1 => Some((ARRAY_UNION_NULL_COUNT, format!(
            "null_count is {nc}, but a union has no validity bitmap: it should be 0 (or -1)"
        ))),
        Format::RunEndEncoded if nc != 0 && nc != -1 => Some((ARRAY_REE_NULL_COUNT, format!(
            "null_count is {nc}; a run-end encoded array has no validity bitmap and its null count should be 0 (or -1, not computed)"
        ))),
        _ => None,
    };
    if let Some((rule, message)) = no_bitmap {
        sink.push(rule, at, message);
    }

    // Children length rules that need no buffer.
    node.child_lengths(&fmt, &kids, sink);

    if !buffers_ok {
        return Some(info);
    }
    let bufs = Buffers { ptrs, at };
    for problem in buffer_self_refs(a, ptrs) {
        sink.push(ARRAY_RELEASE_RELOCATABLE, at, problem);
    }

    // Alignment (a recommendation): each non-NULL buffer at a multiple of
    // the alignment of the C type the layout stores in it.
    for (i, p) in ptrs.iter().enumerate() {
        let align = format::buffer_alignment(&fmt, i, ptrs.len());
        if !p.is_null() && p.addr() % align != 0 {
            sink.push(
                ARRAY_BUFFERS_ALIGNED,
                at,
                format!(
                    "buffers[{i}] ({}) is at {:#x}, not a multiple of {align}",
                    format::buffer_name(&fmt, i, ptrs.len()),
                    p.addr()
                ),
            );
        }
    }

    // Validity bitmap.
    let mut validity: Option<(&[u8], usize)> = None;
    if let Some(vi) = format::validity_buffer(&fmt) {
        let required = bitmap_bytes(end);
        match ptrs.get(vi) {
            Some(p) if p.is_null() && nc != 0 && required > 0 => {
                sink.push(
                    ARRAY_NULL_BUFFER,
                    at,
                    format!(
                        "buffers[{vi}] (validity) is NULL but null_count is {nc}; it may be NULL only when null_count is 0"
                    ),
                );
            }
            Some(p) if p.is_null() => {}
            Some(p) => {
                info.validity = p.cast::<u8>();
                // SAFETY: non-NULL validity bitmap, which must hold
                // offset + length bits; only bytes covering [offset, end) are read.
                let bytes =
                    unsafe { bufs.region(vi, "validity", required, offset / 8, required, sink) };
                if let Some(bytes) = bytes {
                    validity = Some((bytes, offset % 8));
                    // A null_count above the length is already reported.
                    if nc >= 0 && nc <= len && length > 0 {
                        let zeros = length - count_set_bits(bytes, offset % 8, length);
                        if zeros as i64 != nc {
                            sink.push(
                                ARRAY_NULL_COUNT,
                                at,
                                format!(
                                    "null_count is {nc} but the validity bitmap has {zeros} zero bits in [{offset}, {end})"
                                ),
                            );
                        }
                    }
                }
            }
            None => {}
        }
    }

    // Every call below reads buffers of this node only: its layout checked
    // out (n_buffers, no poison pointers, lengths non-negative without
    // overflow), so each non-NULL buffer holds what offset + length imply
    // for the format, and the helpers read no more than that.
    match &fmt {
        Format::Null | Format::Struct | Format::RunEndEncoded | Format::FixedSizeList(_) => {}
        Format::Boolean => {
            bufs.present(1, "values", bitmap_bytes(end), sink);
        }
        // SAFETY: see above: buffer 1 holds end + 1 int32 offsets.
        Format::Binary | Format::Utf8 => unsafe { node.binary::<i32>(&bufs, sink) },
        // SAFETY: see above: buffer 1 holds end + 1 int64 offsets.
        Format::LargeBinary | Format::LargeUtf8 => unsafe { node.binary::<i64>(&bufs, sink) },
        // SAFETY: see above: buffer 1 holds end + 1 int32 offsets.
        Format::List | Format::Map => unsafe { node.list::<i32>(&bufs, kids.first(), sink) },
        // SAFETY: see above: buffer 1 holds end + 1 int64 offsets.
        Format::LargeList => unsafe { node.list::<i64>(&bufs, kids.first(), sink) },
        // SAFETY: see above: buffers 1 and 2 hold end int32 offsets / sizes.
        Format::ListView => unsafe { node.list_view::<i32>(&bufs, kids.first(), sink) },
        // SAFETY: see above: buffers 1 and 2 hold end int64 offsets / sizes.
        Format::LargeListView => unsafe { node.list_view::<i64>(&bufs, kids.first(), sink) },
        // SAFETY: see above: type ids (and dense offsets) for end slots.
        Format::Union(mode, ids) => unsafe { node.union(*mode, ids, &bufs, &kids, sink) },
        // SAFETY: see above: end views, the sizes buffer, and variadic
        // buffers as large as it says.
        Format::BinaryView | Format::Utf8View => unsafe { node.views(&bufs, validity, sink) },
        f => {
            if let Some(width) = format::byte_width(f) {
                match bytes_for(end, width) {
                    None => sink.push(
                        ARRAY_LENGTHS,
                        at,
                        format!("offset + length = {end} values of {width} bytes exceed the address space"),
                    ),
                    Some(required) => {
                        if bufs.present(1, "values", required, sink) {
                            info.data = ptrs.get(1).map(|p| p.cast::<u8>());
                            if let Some(d) = &dict {
                                // SAFETY: see above: buffer 1 holds end
                                // indices of `width` bytes (non-NULL unless
                                // that is 0 bytes, checked just above).
                                unsafe { node.dictionary_indices(f, &bufs, width, validity, d, sink) };
                            }
                        }
                    }
                }
            }
        }
    }
    if fmt == Format::RunEndEncoded {
        // SAFETY: the children were checked by check_array, and their data
        // pointers are set only when readable.
        unsafe { node.run_ends(&kids, sink) };
    }
    Some(info)
}

/// Follows one child or dictionary pointer of a live array.
///
/// # Safety
/// Each pointer, when usable, must point to a readable structure.
#[allow(clippy::too_many_arguments)]
unsafe fn visit_array(
    sp: Option<*mut ArrowSchema>,
    ap: *mut ArrowArray,
    at: &str,
    what: &str,
    index: usize,
    parent_at: &str,
    depth: usize,
    sink: &mut Sink,
) -> Option<ArrayInfo> {
    let label = if what == "children" {
        format!("children[{index}]")
    } else {
        what.to_string()
    };
    if let Some(why) = unusable(ap.cast_const()) {
        let rule = if what == "children" {
            ARRAY_N_CHILDREN
        } else {
            ARRAY_DICTIONARY_PRESENT
        };
        sink.push(rule, parent_at, format!("{label} is {why}"));
        return None;
    }
    // SAFETY: usable pointer; the caller vouches for the memory.
    let c = unsafe { &*ap };
    if c.release.is_none() {
        sink.push(
            ARRAY_RELEASE_SET,
            at,
            format!("{label} of a live array is released (release is NULL)"),
        );
        return None;
    }
    // SAFETY: live_schema checks the pointer before reading it.
    let sc = unsafe { live_schema(sp?.cast_const()) }?;
    if depth + 1 >= MAX_DEPTH {
        sink.push(
            ARRAY_N_CHILDREN,
            at,
            format!("nesting is deeper than {MAX_DEPTH} levels (a cycle?); not checked further"),
        );
        return None;
    }
    // SAFETY: live, readable schema and array.
    unsafe { check_array(sc, c, at, depth + 1, sink) }
}

/// One array node whose lengths checked out.
struct Node<'a> {
    at: &'a str,
    offset: usize,
    length: usize,
    end: usize,
}

/// Integer types read from buffers (native endianness, any alignment).
trait Int: Copy + Ord + fmt::Display {
    const SIZE: usize;
    const ZERO: Self;
    fn load(b: &[u8]) -> Self;
    /// The value as i64, saturating (only u64 can exceed it).
    fn to_i64(self) -> i64;
}

macro_rules! int_impl {
    ($($t:ty),*) => {$(
        impl Int for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            const ZERO: Self = 0;
            #[inline(always)]
            fn load(b: &[u8]) -> Self {
                <$t>::from_ne_bytes(b.try_into().unwrap_or_default())
            }
            #[inline(always)]
            fn to_i64(self) -> i64 {
                i64::try_from(self).unwrap_or(i64::MAX)
            }
        }
    )*};
}
int_impl!(i8, u8, i16, u16, i32, u32, i64, u64);

/// Elements per block in the block-wise scans: the fast path of a block has
/// no early exit (so it vectorizes); a failing block is rescanned one element
/// at a time to find the first culprit.
const BLOCK: usize = 4096;

/// Index `i >= 1` of the first element of `bytes` (n values of `T`) with
/// `v[i] < v[i-1]` (or `<=` when `STRICT`), if any.
fn first_unordered<T: Int, const STRICT: bool>(bytes: &[u8]) -> Option<usize> {
    let n = bytes.len() / T::SIZE;
    let ordered = |x: T, y: T| if STRICT { x < y } else { x <= y };
    let mut start = 0;
    while start + 1 < n {
        let stop = (start + BLOCK).min(n - 1);
        let a = bytes.get(start * T::SIZE..stop * T::SIZE).unwrap_or(&[]);
        let b = bytes
            .get((start + 1) * T::SIZE..(stop + 1) * T::SIZE)
            .unwrap_or(&[]);
        let ok = a
            .chunks_exact(T::SIZE)
            .zip(b.chunks_exact(T::SIZE))
            .fold(true, |ok, (x, y)| ok & ordered(T::load(x), T::load(y)));
        if !ok {
            for i in start + 1..=stop {
                let x = T::load(bytes.get((i - 1) * T::SIZE..i * T::SIZE).unwrap_or(&[]));
                let y = T::load(bytes.get(i * T::SIZE..(i + 1) * T::SIZE).unwrap_or(&[]));
                if !ordered(x, y) {
                    return Some(i);
                }
            }
        }
        start = stop;
    }
    None
}

fn value_at<T: Int>(bytes: &[u8], i: usize) -> T {
    T::load(bytes.get(i * T::SIZE..(i + 1) * T::SIZE).unwrap_or(&[]))
}

/// Set bits in bits `[first, first + len)` of `bytes` (LSB numbering).
fn count_set_bits(bytes: &[u8], first: usize, len: usize) -> usize {
    if len == 0 {
        return 0;
    }
    let mut count = 0usize;
    let mut byte = first / 8;
    let bit = first % 8;
    let mut left = len;
    if bit != 0 || len < 8 {
        let hi = (bit + len).min(8);
        let mask = (((1u16 << hi) - 1) as u8) & !(((1u16 << bit) - 1) as u8);
        count += (bytes.get(byte).copied().unwrap_or(0) & mask).count_ones() as usize;
        left -= hi - bit;
        byte += 1;
    }
    let full = left / 8;
    count += popcount(bytes.get(byte..byte + full).unwrap_or(&[]));
    let tail = left % 8;
    if tail > 0 {
        let b = bytes.get(byte + full).copied().unwrap_or(0);
        count += (b & ((1u8 << tail) - 1)).count_ones() as usize;
    }
    count
}

#[inline(always)]
fn popcount_portable(b: &[u8]) -> usize {
    let mut words = b.chunks_exact(8);
    let mut n = 0usize;
    for w in &mut words {
        n += u64::from_le_bytes(w.try_into().unwrap_or_default()).count_ones() as usize;
    }
    n + words
        .remainder()
        .iter()
        .map(|x| x.count_ones() as usize)
        .sum::<usize>()
}

/// # Safety
/// The CPU must support AVX2 and POPCNT.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,popcnt")]
unsafe fn popcount_avx2(b: &[u8]) -> usize {
    popcount_portable(b)
}

/// Set bits in `b`, a 64-bit word at a time.
fn popcount(b: &[u8]) -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        if b.len() >= 64
            && std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("popcnt")
        {
            // SAFETY: the CPU supports AVX2 and POPCNT (checked just above).
            return unsafe { popcount_avx2(b) };
        }
    }
    popcount_portable(b)
}

/// True when bit `i` of a validity bitmap slice (starting at bit `first`) is set.
#[inline(always)]
fn bit_set(bytes: &[u8], first: usize, i: usize) -> bool {
    let k = first + i;
    bytes.get(k / 8).is_some_and(|b| b & (1 << (k % 8)) != 0)
}

impl Node<'_> {
    fn child_lengths(&self, fmt: &Format, kids: &[Option<ArrayInfo>], sink: &mut Sink) {
        let end = self.end;
        match fmt {
            Format::Struct | Format::Union(UnionMode::Sparse, _) => {
                for (i, k) in kids.iter().enumerate() {
                    if let Some(k) = k {
                        if k.length < end {
                            sink.push(
                                ARRAY_LENGTHS,
                                self.at,
                                format!(
                                    "children[{i}] has length {}, less than offset + length = {end}",
                                    k.length
                                ),
                            );
                        }
                    }
                }
            }
            Format::FixedSizeList(n) => {
                if let Some(Some(k)) = kids.first() {
                    match end.checked_mul(*n as usize) {
                        Some(need) if k.length >= need => {}
                        Some(need) => sink.push(
                            ARRAY_LENGTHS,
                            self.at,
                            format!(
                                "the child has length {}, less than (offset + length) * {n} = {need}",
                                k.length
                            ),
                        ),
                        None => sink.push(
                            ARRAY_LENGTHS,
                            self.at,
                            format!("(offset + length) * {n} = {end} * {n} overflows"),
                        ),
                    }
                }
            }
            Format::RunEndEncoded => {
                if let (Some(Some(r)), Some(Some(v))) = (kids.first(), kids.get(1)) {
                    if r.length > v.length {
                        sink.push(
                            ARRAY_LENGTHS,
                            self.at,
                            format!(
                                "run_ends has length {} but values only {}: every run needs a value",
                                r.length, v.length
                            ),
                        );
                    }
                }
            }
            _ => {}
        }
    }

    /// Reads offsets `[offset, end]` of buffer `i` and checks them: first
    /// >= 0, non-decreasing. Returns the slice and the last offset.
    ///
    /// # Safety
    /// Buffer `i`, when non-NULL, holds `end + 1` offsets of `T`.
    unsafe fn offsets<'b, T: Int>(
        &self,
        bufs: &'b Buffers<'_>,
        i: usize,
        sink: &mut Sink,
    ) -> Option<(&'b [u8], T)> {
        let (offset, end) = (self.offset, self.end);
        // An empty array (offset + length = 0) needs no offsets at all: the
        // producer may pass NULL (as nanoarrow and Arrow C++ accept).
        let required = if end == 0 {
            0
        } else {
            match bytes_for(end + 1, T::SIZE) {
                Some(r) => r,
                None => {
                    sink.push(
                        ARRAY_LENGTHS,
                        self.at,
                        format!("offset + length = {end} implies an offsets buffer larger than the address space"),
                    );
                    return None;
                }
            }
        };
        // SAFETY: forwarded from the caller.
        let bytes =
            unsafe { bufs.region(i, "offsets", required, offset * T::SIZE, required, sink) }?;
        if bytes.is_empty() {
            return Some((bytes, T::ZERO));
        }
        let first: T = value_at(bytes, 0);
        if first < T::ZERO {
            sink.push(
                ARRAY_OFFSETS_VALID,
                self.at,
                format!("offsets[{offset}] is {first}; offsets must be >= 0"),
            );
            return None;
        }
        // The fuzzing job's planted bug (`--features validator-mutant`):
        // without this check the validator accepts decreasing offsets, and
        // the validate fuzz target must find that it disagrees with arrow-rs.
        #[cfg(not(feature = "validator-mutant"))]
        if let Some(k) = first_unordered::<T, false>(bytes) {
            let prev: T = value_at(bytes, k - 1);
            let cur: T = value_at(bytes, k);
            sink.push(
                ARRAY_OFFSETS_VALID,
                self.at,
                format!(
                    "offsets[{}] = {cur} is less than offsets[{}] = {prev}; offsets must be non-decreasing",
                    offset + k,
                    offset + k - 1
                ),
            );
            return None;
        }
        Some((bytes, value_at(bytes, bytes.len() / T::SIZE - 1)))
    }

    /// # Safety
    /// As for [`Node::offsets`]; buffer 2 holds the bytes the offsets reach.
    unsafe fn binary<T: Int>(&self, bufs: &Buffers<'_>, sink: &mut Sink) {
        // SAFETY: forwarded from the caller.
        if let Some((_, last)) = unsafe { self.offsets::<T>(bufs, 1, sink) } {
            let required = usize::try_from(last.to_i64()).unwrap_or(usize::MAX);
            bufs.present(2, "data", required, sink);
        }
    }

    /// # Safety
    /// As for [`Node::offsets`].
    unsafe fn list<T: Int>(
        &self,
        bufs: &Buffers<'_>,
        child: Option<&Option<ArrayInfo>>,
        sink: &mut Sink,
    ) {
        // SAFETY: forwarded from the caller.
        let Some((bytes, last)) = (unsafe { self.offsets::<T>(bufs, 1, sink) }) else {
            return;
        };
        if bytes.is_empty() {
            return;
        }
        if let Some(Some(c)) = child {
            if last.to_i64() > c.length as i64 {
                sink.push(
                    ARRAY_OFFSETS_VALID,
                    self.at,
                    format!(
                        "the last offset (offsets[{}]) is {last}, beyond the child's length {}",
                        self.end, c.length
                    ),
                );
            }
        }
    }

    /// # Safety
    /// Buffers 1 and 2, when non-NULL, hold `end` offsets / sizes of `T`.
    unsafe fn list_view<T: Int>(
        &self,
        bufs: &Buffers<'_>,
        child: Option<&Option<ArrayInfo>>,
        sink: &mut Sink,
    ) {
        let Some(required) = bytes_for(self.end, T::SIZE) else {
            sink.push(
                ARRAY_LENGTHS,
                self.at,
                format!(
                    "offset + length = {} implies buffers larger than the address space",
                    self.end
                ),
            );
            return;
        };
        let (start, at) = (self.offset * T::SIZE, self.at);
        // SAFETY: forwarded from the caller.
        let offsets = unsafe { bufs.region(1, "offsets", required, start, required, sink) };
        // SAFETY: forwarded from the caller.
        let sizes = unsafe { bufs.region(2, "sizes", required, start, required, sink) };
        let (Some(offsets), Some(sizes), Some(Some(child))) = (offsets, sizes, child) else {
            return;
        };
        let child_len = child.length as i64;
        let bad = |o: T, s: T| {
            let (o, s) = (o.to_i64(), s.to_i64());
            (o < 0) | (s < 0) | (o.saturating_add(s) > child_len)
        };
        let n = offsets.len().min(sizes.len()) / T::SIZE;
        let mut i = 0;
        while i < n {
            let stop = (i + BLOCK).min(n);
            let o = offsets.get(i * T::SIZE..stop * T::SIZE).unwrap_or(&[]);
            let s = sizes.get(i * T::SIZE..stop * T::SIZE).unwrap_or(&[]);
            let any_bad = o
                .chunks_exact(T::SIZE)
                .zip(s.chunks_exact(T::SIZE))
                .fold(false, |b, (o, s)| b | bad(T::load(o), T::load(s)));
            if any_bad {
                for k in i..stop {
                    let (ov, sv): (T, T) = (value_at(offsets, k), value_at(sizes, k));
                    if bad(ov, sv) {
                        let slot = self.offset + k;
                        sink.push(
                            ARRAY_OFFSETS_VALID,
                            at,
                            format!(
                                "list view slot {slot}: offset {ov}, size {sv}; need offset >= 0, size >= 0 and offset + size <= child length {child_len}"
                            ),
                        );
                        return;
                    }
                }
            }
            i = stop;
        }
    }

    /// # Safety
    /// Buffer 0 holds `end` int8 type ids; for dense unions buffer 1 holds
    /// `end` int32 offsets.
    unsafe fn union(
        &self,
        mode: UnionMode,
        ids: &[i8],
        bufs: &Buffers<'_>,
        kids: &[Option<ArrayInfo>],
        sink: &mut Sink,
    ) {
        let (offset, end, at) = (self.offset, self.end, self.at);
        // Type id -> child index, -1 for undeclared ids.
        let mut map = [-1i16; 256];
        if ids.is_empty() {
            for (i, slot) in map.iter_mut().take(kids.len().min(128)).enumerate() {
                *slot = i as i16;
            }
        } else {
            for (i, &id) in ids.iter().enumerate() {
                map[id as u8 as usize] = i as i16;
            }
        }
        // SAFETY: forwarded from the caller.
        let Some(type_ids) = (unsafe { bufs.region(0, "type ids", end, offset, end, sink) }) else {
            return;
        };
        let any_bad = type_ids
            .chunks(BLOCK)
            .any(|c| c.iter().fold(false, |b, &t| b | (map[t as usize] < 0)));
        if any_bad {
            let count = type_ids.iter().filter(|&&t| map[t as usize] < 0).count();
            if let Some(k) = type_ids.iter().position(|&t| map[t as usize] < 0) {
                let declared: Vec<String> = if ids.is_empty() {
                    (0..kids.len().min(128)).map(|i| i.to_string()).collect()
                } else {
                    ids.iter().map(|i| i.to_string()).collect()
                };
                sink.push(
                    ARRAY_UNION_TYPE_IDS,
                    at,
                    format!(
                        "type id {} at slot {} is not declared (declared: [{}]); {count} slot(s) in [{offset}, {end}) have undeclared ids",
                        type_ids[k] as i8,
                        offset + k,
                        declared.join(",")
                    ),
                );
            }
        }
        if mode == UnionMode::Sparse {
            return;
        }
        let Some(required) = bytes_for(end, 4) else {
            sink.push(
                ARRAY_LENGTHS,
                at,
                format!("offset + length = {end} implies an offsets buffer larger than the address space"),
            );
            return;
        };
        // SAFETY: forwarded from the caller.
        let Some(offsets) =
            (unsafe { bufs.region(1, "offsets", required, offset * 4, required, sink) })
        else {
            return;
        };
        // Child lengths by child index; -1 where unknown (not checked).
        let mut lens = [-1i64; 128];
        for (i, k) in kids.iter().enumerate().take(128) {
            if let Some(k) = k {
                lens[i] = k.length as i64;
            }
        }
        let bad = |t: u8, o: i32| {
            let child = map[t as usize];
            if child < 0 {
                return false; // reported above
            }
            let len = lens[child as usize & 127];
            len >= 0 && (o < 0 || i64::from(o) >= len)
        };
        for (k, (&t, o)) in type_ids.iter().zip(offsets.chunks_exact(4)).enumerate() {
            let o = i32::load(o);
            if bad(t, o) {
                let child = map[t as usize];
                sink.push(
                    ARRAY_OFFSETS_VALID,
                    at,
                    format!(
                        "dense union slot {}: offset {o} into children[{child}] (type id {}) is outside [0, {})",
                        offset + k,
                        t as i8,
                        lens[child as usize & 127]
                    ),
                );
                return;
            }
        }
    }

    /// # Safety
    /// Buffer 1 holds `end` views of 16 bytes, the last buffer the int64
    /// sizes of the variadic buffers, each variadic buffer as many bytes.
    unsafe fn views(&self, bufs: &Buffers<'_>, validity: Option<(&[u8], usize)>, sink: &mut Sink) {
        let (offset, end, at) = (self.offset, self.end, self.at);
        let nb = bufs.ptrs.len();
        let n_variadic = nb.saturating_sub(3);
        let Some(required) = bytes_for(end, 16) else {
            sink.push(
                ARRAY_LENGTHS,
                at,
                format!(
                    "offset + length = {end} implies a views buffer larger than the address space"
                ),
            );
            return;
        };
        // SAFETY: forwarded from the caller.
        let Some(views) =
            (unsafe { bufs.region(1, "views", required, offset * 16, required, sink) })
        else {
            return;
        };
        // The non-null views, each as (slot, length, buffer index, offset).
        let live = || {
            views
                .chunks_exact(16)
                .enumerate()
                // Null slots may hold anything.
                .filter(move |(k, _)| validity.is_none_or(|(bits, first)| bit_set(bits, first, *k)))
                .map(move |(k, v)| {
                    let word = |r: std::ops::Range<usize>| i32::load(v.get(r).unwrap_or(&[]));
                    (offset + k, word(0..4), word(8..12), word(12..16), v)
                })
        };
        // First the lengths and buffer indices, which need nothing but the
        // views: a producer that left out the sizes buffer (Columnar's
        // buffer list) shows here, before its last data buffer would be
        // read as sizes.
        for (slot, len, idx, _, _) in live() {
            let problem = if len < 0 {
                format!("length {len} is negative")
            } else if len > 12 && (idx < 0 || idx as usize >= n_variadic) {
                format!(
                    "length {len} (not inline) refers to variadic buffer {idx}, but there are {n_variadic} (n_buffers {nb} less the validity, views and sizes buffers)"
                )
            } else {
                continue;
            };
            sink.push(
                ARRAY_VIEW_SIZES,
                at,
                format!("view at slot {slot}: {problem}"),
            );
            return;
        }
        // The sizes buffer holds one int64 per variadic buffer.
        let sizes_required = n_variadic * 8;
        // SAFETY: forwarded from the caller.
        let Some(size_bytes) = (unsafe {
            bufs.region(
                nb.saturating_sub(1),
                "variadic buffer sizes",
                sizes_required,
                0,
                sizes_required,
                sink,
            )
        }) else {
            return;
        };
        let mut sizes: Vec<i64> = Vec::with_capacity(n_variadic);
        let mut sizes_ok = true;
        for k in 0..n_variadic {
            let size: i64 = value_at(size_bytes, k);
            if size < 0 {
                sink.push(
                    ARRAY_VIEW_SIZES,
                    at,
                    format!(
                        "the size of variadic buffer {k} (buffers[{}]) is {size}, negative",
                        k + 2
                    ),
                );
                sizes_ok = false;
            } else if !bufs.present(k + 2, "variadic data", size as usize, sink) {
                sizes_ok = false;
            }
            sizes.push(size);
        }
        if !sizes_ok {
            return;
        }
        for (slot, len, idx, off, _) in live() {
            if len <= 12 {
                continue;
            }
            // Checked above: 0 <= idx < n_variadic.
            let size = sizes.get(idx as usize).copied().unwrap_or(-1);
            if off < 0 || i64::from(off) + i64::from(len) > size {
                sink.push(
                    ARRAY_VIEW_SIZES,
                    at,
                    format!(
                        "view at slot {slot}: bytes [{off}, {}) of variadic buffer {idx} are outside its {size} bytes",
                        i64::from(off) + i64::from(len)
                    ),
                );
                return;
            }
        }
        // Every view is in bounds: what the views hold. "Any remaining
        // bytes after the string itself are padded with 0" (inline), and
        // "A copy of the first four bytes of the string is stored inline in
        // the prefix" (Columnar.rst, Variable-size Binary View Layout). The
        // first of each is reported.
        let (mut padding, mut prefix) = (false, false);
        for (slot, len, idx, off, v) in live() {
            if len <= 12 && !padding {
                let rest = v.get(4 + len as usize..).unwrap_or(&[]);
                if let Some(k) = rest.iter().position(|&b| b != 0) {
                    sink.push(
                        ARRAY_VIEW_INLINE_PADDING,
                        at,
                        format!(
                            "view at slot {slot}: inline value of {len} bytes, but view byte {} after it is {:#04x}, not 0",
                            4 + len as usize + k,
                            rest[k]
                        ),
                    );
                    padding = true;
                }
            } else if len > 12 && !prefix {
                let (b, start) = (idx as usize + 2, off as usize);
                let size = sizes.get(idx as usize).copied().unwrap_or(0) as usize;
                // SAFETY: buffer b holds `size` bytes (the caller's
                // guarantee, and non-NULL: checked with the sizes), and
                // [off, off + 4) lies inside [off, off + len), which the
                // loop above found within those `size` bytes.
                let data = unsafe { bufs.region(b, "variadic data", size, start, start + 4, sink) };
                let want = v.get(4..8).unwrap_or(&[]);
                if let Some(data) = data.filter(|d| *d != want) {
                    sink.push(
                        ARRAY_VIEW_PREFIX,
                        at,
                        format!(
                            "view at slot {slot}: prefix {want:02x?}, but the value's first bytes (variadic buffer {idx}, offset {off}) are {data:02x?}"
                        ),
                    );
                    prefix = true;
                }
            }
            if padding && prefix {
                break;
            }
        }
    }

    /// # Safety
    /// Buffer 1 holds `end` indices of `width` bytes (format `f`).
    unsafe fn dictionary_indices(
        &self,
        f: &Format,
        bufs: &Buffers<'_>,
        width: usize,
        validity: Option<(&[u8], usize)>,
        dict: &ArrayInfo,
        sink: &mut Sink,
    ) {
        let required = self.end * width;
        // SAFETY: forwarded from the caller.
        let Some(bytes) =
            (unsafe { bufs.region(1, "indices", required, self.offset * width, required, sink) })
        else {
            return;
        };
        let dict_len = dict.length as i64;
        let found = match f {
            Format::Int8 => first_bad_index::<i8>(bytes, validity, dict_len),
            Format::UInt8 => first_bad_index::<u8>(bytes, validity, dict_len),
            Format::Int16 => first_bad_index::<i16>(bytes, validity, dict_len),
            Format::UInt16 => first_bad_index::<u16>(bytes, validity, dict_len),
            Format::Int32 => first_bad_index::<i32>(bytes, validity, dict_len),
            Format::UInt32 => first_bad_index::<u32>(bytes, validity, dict_len),
            Format::Int64 => first_bad_index::<i64>(bytes, validity, dict_len),
            Format::UInt64 => first_bad_index::<u64>(bytes, validity, dict_len),
            _ => None,
        };
        if let Some((k, value, count)) = found {
            sink.push(
                ARRAY_DICTIONARY_INDICES,
                self.at,
                format!(
                    "index {value} at slot {} is outside [0, {dict_len}) (the dictionary's length); {count} non-null slot(s) are out of range",
                    self.offset + k
                ),
            );
        }
    }

    /// # Safety
    /// The run-ends child's data pointer, when set, may be read for its
    /// offset + length values.
    unsafe fn run_ends(&self, kids: &[Option<ArrayInfo>], sink: &mut Sink) {
        let Some(Some(r)) = kids.first() else { return };
        let at = self.at;
        let (max, width) = match r.format {
            Format::Int16 => (i64::from(i16::MAX), 2),
            Format::Int32 => (i64::from(i32::MAX), 4),
            Format::Int64 => (i64::MAX, 8),
            _ => return, // schema.ree.run-ends
        };
        if self.end as i64 > max {
            sink.push(
                ARRAY_REE_RUN_ENDS,
                at,
                format!(
                    "offset + length = {} does not fit the run ends' type (max {max})",
                    self.end
                ),
            );
            return;
        }
        let run_ends_at = format!("{at}.children[0]");
        if r.null_count > 0 {
            sink.push(
                ARRAY_REE_RUN_ENDS,
                &run_ends_at,
                format!(
                    "run ends have null_count {}; run ends cannot be null",
                    r.null_count
                ),
            );
            return;
        }
        if r.length == 0 {
            if self.length > 0 {
                sink.push(
                    ARRAY_REE_RUN_ENDS,
                    at,
                    format!("run_ends is empty but the array has length {}", self.length),
                );
            }
            return;
        }
        let Some(data) = r.data else { return };
        // SAFETY: data was set by check_array only when buffer 1 is non-NULL
        // (or the extent is 0 bytes, and then length is 0, handled above)
        // and holds the child's offset + length values; only those are read.
        let bytes =
            unsafe { std::slice::from_raw_parts(data.add(r.offset * width), r.length * width) };
        if r.null_count == -1 && !r.validity.is_null() {
            // SAFETY: the validity bitmap of a checked child holds its
            // offset + length bits.
            let bits = unsafe {
                std::slice::from_raw_parts(
                    r.validity.add(r.offset / 8),
                    bitmap_bytes(r.offset + r.length) - r.offset / 8,
                )
            };
            let zeros = r.length - count_set_bits(bits, r.offset % 8, r.length);
            if zeros > 0 {
                sink.push(
                    ARRAY_REE_RUN_ENDS,
                    &run_ends_at,
                    format!("run ends have {zeros} null slot(s); run ends cannot be null"),
                );
                return;
            }
        }
        // An empty array reads no run, so its offset needs no run end
        // behind it (arrow-rs checks the coverage only for a non-empty
        // array too; the validate fuzz target found the harness stricter).
        let end = if self.length > 0 { self.end } else { 0 };
        let problem = match r.format {
            Format::Int16 => run_end_problem::<i16>(bytes, end),
            Format::Int32 => run_end_problem::<i32>(bytes, end),
            _ => run_end_problem::<i64>(bytes, end),
        };
        if let Some(p) = problem {
            sink.push(ARRAY_REE_RUN_ENDS, &run_ends_at, p);
        }
    }
}

/// The first run end problem: not positive, not strictly increasing, or the
/// last below `end` (offset + length of the parent).
fn run_end_problem<T: Int>(bytes: &[u8], end: usize) -> Option<String> {
    let n = bytes.len() / T::SIZE;
    let first: T = value_at(bytes, 0);
    if first.to_i64() <= 0 {
        return Some(format!("run_ends[0] is {first}; run ends must be positive"));
    }
    if let Some(k) = first_unordered::<T, true>(bytes) {
        let prev: T = value_at(bytes, k - 1);
        let cur: T = value_at(bytes, k);
        return Some(format!(
            "run_ends[{k}] = {cur} is not greater than run_ends[{}] = {prev}; run ends must be strictly increasing",
            k - 1
        ));
    }
    let last: T = value_at(bytes, n - 1);
    if last.to_i64() < end as i64 {
        return Some(format!(
            "the last run end is {last}, less than the parent's offset + length = {end}"
        ));
    }
    None
}

/// The first non-null slot whose index is outside `[0, dict_len)`, with its
/// value and the number of such slots.
fn first_bad_index<T: Int>(
    bytes: &[u8],
    validity: Option<(&[u8], usize)>,
    dict_len: i64,
) -> Option<(usize, String, usize)> {
    let bad = |v: T| {
        let v = v.to_i64();
        (v < 0) | (v >= dict_len)
    };
    let any_bad = bytes.chunks(BLOCK * T::SIZE).any(|c| {
        c.chunks_exact(T::SIZE)
            .fold(false, |b, x| b | bad(T::load(x)))
    });
    if !any_bad {
        return None;
    }
    let mut first = None;
    let mut count = 0;
    for (k, x) in bytes.chunks_exact(T::SIZE).enumerate() {
        let v = T::load(x);
        let valid = validity.is_none_or(|(bits, f)| bit_set(bits, f, k));
        if valid && bad(v) {
            count += 1;
            first.get_or_insert((k, v));
        }
    }
    first.map(|(k, v): (usize, T)| (k, v.to_string(), count))
}

#[cfg(test)]
mod tests {
    use std::ffi::c_void;
    use std::sync::Arc;

    use arrow_array::builder::{Int32Builder, MapBuilder, StringBuilder};
    use arrow_array::ffi::{FFI_ArrowArray, FFI_ArrowSchema};
    use arrow_array::types::{Int32Type, Int64Type};
    use arrow_array::*;
    use arrow_buffer::{i256, Buffer, IntervalDayTime, IntervalMonthDayNano, NullBuffer};
    use arrow_data::ArrayData;
    use arrow_schema::{DataType, Field, Fields, Schema, UnionFields};

    use super::*;
    use crate::abi::arrow_rs::{
        array_from_arrow_rs, export_batch, export_batch_slice, export_schema, schema_from_arrow_rs,
    };
    use crate::abi::ops::Guard;
    use crate::abi::Plain;

    const POISON: usize =
        usize::from_ne_bytes([crate::abi::POISON_BYTE; std::mem::size_of::<usize>()]);

    // -- helpers -------------------------------------------------------------

    fn schema_of(s: &Guard<ArrowSchema>) -> Vec<Violation> {
        // SAFETY: a live schema owned by the guard.
        unsafe { validate_schema(&**s) }
    }

    fn array_of(s: &Guard<ArrowSchema>, a: &Guard<ArrowArray>) -> Vec<Violation> {
        // SAFETY: live structures owned by the guards.
        unsafe { validate_array(&**s, &**a) }
    }

    #[track_caller]
    fn assert_clean(v: &[Violation], what: &str) {
        assert!(
            v.is_empty(),
            "{what}: expected no violations, got:\n{}",
            v.iter()
                .map(|v| v.to_string())
                .collect::<Vec<_>>()
                .join("\n")
        );
    }

    /// `rule` is reported, and nothing but `rule` and `also`.
    #[track_caller]
    fn assert_rule(v: &[Violation], rule: &str, also: &[&str]) {
        let dump = || {
            v.iter()
                .map(|v| v.to_string())
                .collect::<Vec<_>>()
                .join("\n")
        };
        assert!(
            v.iter().any(|x| x.rule == rule),
            "expected {rule}, got:\n{}",
            dump()
        );
        for x in v {
            assert!(
                x.rule == rule || also.contains(&x.rule),
                "unexpected {x}\nall:\n{}",
                dump()
            );
        }
    }

    fn export(batch: &RecordBatch) -> (Guard<ArrowSchema>, Guard<ArrowArray>) {
        (
            Guard::new(export_schema(&batch.schema()).unwrap()),
            Guard::new(export_batch(batch)),
        )
    }

    /// Exports one `ArrayData` (possibly invalid: built unchecked) as field "a".
    fn export_data(data: &ArrayData, nullable: bool) -> (Guard<ArrowSchema>, Guard<ArrowArray>) {
        let field = Field::new("a", data.data_type().clone(), nullable);
        (
            Guard::new(schema_from_arrow_rs(
                FFI_ArrowSchema::try_from(&field).unwrap(),
            )),
            Guard::new(array_from_arrow_rs(FFI_ArrowArray::new(data))),
        )
    }

    /// # Safety: `a` has at least i + 1 usable children.
    unsafe fn child(a: &mut ArrowArray, i: usize) -> &mut ArrowArray {
        // SAFETY: forwarded from the caller.
        unsafe { &mut **a.children.add(i) }
    }

    /// # Safety: `s` has at least i + 1 usable children.
    unsafe fn schild(s: &mut ArrowSchema, i: usize) -> &mut ArrowSchema {
        // SAFETY: forwarded from the caller.
        unsafe { &mut **s.children.add(i) }
    }

    fn cstr(s: &str) -> *const c_char {
        std::ffi::CString::new(s).unwrap().into_raw()
    }

    fn leak_bytes(b: &[u8]) -> *const c_char {
        Box::leak(b.to_vec().into_boxed_slice()).as_ptr().cast()
    }

    fn leak_buf<T: Copy + 'static>(v: Vec<T>) -> *const c_void {
        if v.is_empty() {
            return std::ptr::null();
        }
        Box::leak(v.into_boxed_slice()).as_ptr().cast()
    }

    extern "C" fn release_schema(s: *mut ArrowSchema) {
        // SAFETY: called on a live test schema.
        unsafe { (*s).release = None }
    }

    extern "C" fn release_array(a: *mut ArrowArray) {
        // SAFETY: called on a live test array.
        unsafe { (*a).release = None }
    }

    /// A hand-built, leaked schema node (tests only; release just marks).
    fn sch(format: &str, flags: i64, children: Vec<*mut ArrowSchema>) -> *mut ArrowSchema {
        let mut s = ArrowSchema::zeroed();
        s.format = cstr(format);
        s.flags = flags;
        s.n_children = children.len() as i64;
        s.children = if children.is_empty() {
            std::ptr::null_mut()
        } else {
            Box::leak(children.into_boxed_slice()).as_mut_ptr()
        };
        s.release = Some(release_schema);
        Box::into_raw(Box::new(s))
    }

    /// A hand-built, leaked array node.
    fn arr(
        length: i64,
        null_count: i64,
        offset: i64,
        buffers: Vec<*const c_void>,
        children: Vec<*mut ArrowArray>,
    ) -> *mut ArrowArray {
        let mut a = ArrowArray::zeroed();
        a.length = length;
        a.null_count = null_count;
        a.offset = offset;
        a.n_buffers = buffers.len() as i64;
        a.buffers = if buffers.is_empty() {
            std::ptr::null_mut()
        } else {
            Box::leak(buffers.into_boxed_slice()).as_mut_ptr()
        };
        a.n_children = children.len() as i64;
        a.children = if children.is_empty() {
            std::ptr::null_mut()
        } else {
            Box::leak(children.into_boxed_slice()).as_mut_ptr()
        };
        a.release = Some(release_array);
        Box::into_raw(Box::new(a))
    }

    fn check_schema_raw(s: *mut ArrowSchema) -> Vec<Violation> {
        // SAFETY: a leaked, live test schema.
        unsafe { validate_schema(s) }
    }

    fn check_array_raw(s: *mut ArrowSchema, a: *mut ArrowArray) -> Vec<Violation> {
        // SAFETY: leaked, live test structures whose buffers hold what they claim.
        let sv = unsafe { validate_schema(s) };
        assert_clean(&sv, "hand-built schema");
        // SAFETY: as above.
        unsafe { validate_array(s, a) }
    }

    fn int32_array(values: &[i32]) -> *mut ArrowArray {
        arr(
            values.len() as i64,
            0,
            0,
            vec![std::ptr::null(), leak_buf(values.to_vec())],
            vec![],
        )
    }

    // -- valid data ----------------------------------------------------------

    /// A batch of `n` rows covering every type arrow-rs exports.
    fn all_types(n: usize) -> RecordBatch {
        let ni = n as i32;
        let opt = |i: usize| i % 3 != 1;
        let ints: Int32Array = (0..ni).map(|i| opt(i as usize).then_some(i)).collect();
        let mut cols: Vec<(String, ArrayRef, bool)> = Vec::new();
        let mut add = |name: &str, a: ArrayRef| {
            let nullable = a.logical_null_count() > 0 || matches!(a.data_type(), DataType::Null);
            cols.push((name.to_string(), a, nullable));
        };
        add("null", Arc::new(NullArray::new(n)));
        add(
            "bool",
            Arc::new(
                (0..n)
                    .map(|i| opt(i).then_some(i % 2 == 0))
                    .collect::<BooleanArray>(),
            ),
        );
        add(
            "i8",
            Arc::new((0..n).map(|i| Some(i as i8)).collect::<Int8Array>()),
        );
        add(
            "u8",
            Arc::new(
                (0..n)
                    .map(|i| opt(i).then_some(i as u8))
                    .collect::<UInt8Array>(),
            ),
        );
        add(
            "i16",
            Arc::new((0..n).map(|i| Some(i as i16)).collect::<Int16Array>()),
        );
        add(
            "u16",
            Arc::new((0..n).map(|i| Some(i as u16)).collect::<UInt16Array>()),
        );
        add("i32", Arc::new(ints.clone()));
        add(
            "u32",
            Arc::new((0..n).map(|i| Some(i as u32)).collect::<UInt32Array>()),
        );
        add(
            "i64",
            Arc::new(
                (0..n)
                    .map(|i| opt(i).then_some(i as i64))
                    .collect::<Int64Array>(),
            ),
        );
        add(
            "u64",
            Arc::new((0..n).map(|i| Some(i as u64)).collect::<UInt64Array>()),
        );
        let f16 = ArrayData::builder(DataType::Float16)
            .len(n)
            .add_buffer(Buffer::from_vec(vec![0x3c00u16; n]))
            .build()
            .unwrap();
        add("f16", make_array(f16));
        add(
            "f32",
            Arc::new(
                (0..n)
                    .map(|i| opt(i).then_some(i as f32))
                    .collect::<Float32Array>(),
            ),
        );
        add(
            "f64",
            Arc::new((0..n).map(|i| Some(i as f64)).collect::<Float64Array>()),
        );
        let strs: Vec<Option<String>> =
            (0..n).map(|i| opt(i).then(|| "x".repeat(i % 20))).collect();
        add(
            "utf8",
            Arc::new(strs.iter().map(|s| s.as_deref()).collect::<StringArray>()),
        );
        add(
            "large_utf8",
            Arc::new(
                strs.iter()
                    .map(|s| s.as_deref())
                    .collect::<LargeStringArray>(),
            ),
        );
        add(
            "binary",
            Arc::new(
                strs.iter()
                    .map(|s| s.as_deref().map(str::as_bytes))
                    .collect::<BinaryArray>(),
            ),
        );
        add(
            "large_binary",
            Arc::new(
                strs.iter()
                    .map(|s| s.as_deref().map(str::as_bytes))
                    .collect::<LargeBinaryArray>(),
            ),
        );
        add(
            "utf8_view",
            Arc::new(
                strs.iter()
                    .map(|s| s.as_deref())
                    .collect::<StringViewArray>(),
            ),
        );
        add(
            "binary_view",
            Arc::new(
                strs.iter()
                    .map(|s| s.as_deref().map(str::as_bytes))
                    .collect::<BinaryViewArray>(),
            ),
        );
        add(
            "fixed_binary",
            Arc::new(
                FixedSizeBinaryArray::try_from_sparse_iter_with_size(
                    (0..n).map(|i| opt(i).then_some([i as u8; 3])),
                    3,
                )
                .unwrap(),
            ),
        );
        add(
            "dec32",
            Arc::new(
                Decimal32Array::from_iter((0..n).map(|i| opt(i).then_some(i as i32)))
                    .with_precision_and_scale(9, 2)
                    .unwrap(),
            ),
        );
        add(
            "dec64",
            Arc::new(
                Decimal64Array::from_iter((0..n).map(|i| Some(i as i64)))
                    .with_precision_and_scale(18, -2)
                    .unwrap(),
            ),
        );
        add(
            "dec128",
            Arc::new(
                Decimal128Array::from_iter((0..n).map(|i| opt(i).then_some(i as i128)))
                    .with_precision_and_scale(38, 10)
                    .unwrap(),
            ),
        );
        add(
            "dec256",
            Arc::new(
                Decimal256Array::from_iter((0..n).map(|i| Some(i256::from(i as i32))))
                    .with_precision_and_scale(76, 5)
                    .unwrap(),
            ),
        );
        add(
            "date32",
            Arc::new((0..ni).map(Some).collect::<Date32Array>()),
        );
        add(
            "date64",
            Arc::new(
                (0..n)
                    .map(|i| opt(i).then_some(i as i64))
                    .collect::<Date64Array>(),
            ),
        );
        add(
            "time32s",
            Arc::new((0..ni).map(Some).collect::<Time32SecondArray>()),
        );
        add(
            "time32ms",
            Arc::new((0..ni).map(Some).collect::<Time32MillisecondArray>()),
        );
        add(
            "time64us",
            Arc::new(
                (0..n)
                    .map(|i| Some(i as i64))
                    .collect::<Time64MicrosecondArray>(),
            ),
        );
        add(
            "time64ns",
            Arc::new(
                (0..n)
                    .map(|i| Some(i as i64))
                    .collect::<Time64NanosecondArray>(),
            ),
        );
        add(
            "ts_s",
            Arc::new(
                (0..n)
                    .map(|i| Some(i as i64))
                    .collect::<TimestampSecondArray>(),
            ),
        );
        add(
            "ts_ms_tz",
            Arc::new(
                (0..n)
                    .map(|i| opt(i).then_some(i as i64))
                    .collect::<TimestampMillisecondArray>()
                    .with_timezone("Europe/Paris"),
            ),
        );
        add(
            "ts_us_tz",
            Arc::new(
                (0..n)
                    .map(|i| Some(i as i64))
                    .collect::<TimestampMicrosecondArray>()
                    .with_timezone("+01:00"),
            ),
        );
        add(
            "ts_ns",
            Arc::new(
                (0..n)
                    .map(|i| Some(i as i64))
                    .collect::<TimestampNanosecondArray>(),
            ),
        );
        add(
            "dur_s",
            Arc::new(
                (0..n)
                    .map(|i| Some(i as i64))
                    .collect::<DurationSecondArray>(),
            ),
        );
        add(
            "dur_ns",
            Arc::new(
                (0..n)
                    .map(|i| opt(i).then_some(i as i64))
                    .collect::<DurationNanosecondArray>(),
            ),
        );
        add(
            "iv_ym",
            Arc::new((0..ni).map(Some).collect::<IntervalYearMonthArray>()),
        );
        add(
            "iv_dt",
            Arc::new(
                (0..ni)
                    .map(|i| Some(IntervalDayTime::new(i, -i)))
                    .collect::<IntervalDayTimeArray>(),
            ),
        );
        add(
            "iv_mdn",
            Arc::new(
                (0..ni)
                    .map(|i| opt(i as usize).then_some(IntervalMonthDayNano::new(i, i, i as i64)))
                    .collect::<IntervalMonthDayNanoArray>(),
            ),
        );
        let lists =
            (0..n).map(|i| opt(i).then(|| (0..(i % 4) as i32).map(Some).collect::<Vec<_>>()));
        add(
            "list",
            Arc::new(ListArray::from_iter_primitive::<Int32Type, _, _>(
                lists.clone(),
            )),
        );
        add(
            "large_list",
            Arc::new(LargeListArray::from_iter_primitive::<Int32Type, _, _>(
                lists.clone(),
            )),
        );
        add(
            "list_view",
            Arc::new(ListViewArray::from_iter_primitive::<Int32Type, _, _>(
                lists.clone(),
            )),
        );
        add(
            "large_list_view",
            Arc::new(LargeListViewArray::from_iter_primitive::<Int32Type, _, _>(
                lists,
            )),
        );
        add(
            "fixed_list",
            Arc::new(FixedSizeListArray::from_iter_primitive::<Int32Type, _, _>(
                (0..ni).map(|i| opt(i as usize).then(|| vec![Some(i), None, Some(-i)])),
                3,
            )),
        );
        let struct_fields = Fields::from(vec![
            Field::new("x", DataType::Int32, true),
            Field::new("s", DataType::Utf8, true),
        ]);
        add(
            "struct",
            Arc::new(StructArray::new(
                struct_fields,
                vec![
                    Arc::new(ints.clone()),
                    Arc::new(
                        (0..n)
                            .map(|i| Some(format!("s{i}")))
                            .collect::<StringArray>(),
                    ),
                ],
                Some(NullBuffer::from(
                    (0..n).map(|i| i % 4 != 2).collect::<Vec<_>>(),
                )),
            )),
        );
        let mut mb = MapBuilder::new(None, StringBuilder::new(), Int32Builder::new());
        for i in 0..n {
            for k in 0..(i % 3) {
                mb.keys().append_value(format!("k{k}"));
                mb.values().append_option((k != 1).then_some(k as i32));
            }
            mb.append(i % 5 != 4).unwrap();
        }
        add("map", Arc::new(mb.finish()));
        let union_fields = UnionFields::try_new(
            vec![3, 7],
            vec![
                Field::new("i", DataType::Int32, true),
                Field::new("s", DataType::Utf8, true),
            ],
        )
        .unwrap();
        let tids: Vec<i8> = (0..n).map(|i| if i % 3 == 0 { 7 } else { 3 }).collect();
        let mut counts = [0i32; 2];
        let offs: Vec<i32> = tids
            .iter()
            .map(|&t| {
                let c = &mut counts[usize::from(t == 7)];
                *c += 1;
                *c - 1
            })
            .collect();
        add(
            "dense_union",
            Arc::new(
                UnionArray::try_new(
                    union_fields.clone(),
                    tids.clone().into(),
                    Some(offs.into()),
                    vec![
                        Arc::new((0..counts[0]).map(Some).collect::<Int32Array>()),
                        Arc::new(
                            (0..counts[1])
                                .map(|i| Some(format!("u{i}")))
                                .collect::<StringArray>(),
                        ),
                    ],
                )
                .unwrap(),
            ),
        );
        add(
            "sparse_union",
            Arc::new(
                UnionArray::try_new(
                    union_fields,
                    tids.into(),
                    None,
                    vec![
                        Arc::new(ints.clone()),
                        Arc::new(
                            (0..n)
                                .map(|i| Some(format!("v{i}")))
                                .collect::<StringArray>(),
                        ),
                    ],
                )
                .unwrap(),
            ),
        );
        add(
            "dict",
            Arc::new(
                DictionaryArray::<Int32Type>::try_new(
                    (0..ni).map(|i| opt(i as usize).then_some(i % 3)).collect(),
                    Arc::new(StringArray::from(vec!["a", "b", "c"])),
                )
                .unwrap(),
            ),
        );
        add(
            "dict_u8",
            Arc::new(
                DictionaryArray::<arrow_array::types::UInt8Type>::try_new(
                    (0..n).map(|i| Some((i % 2) as u8)).collect(),
                    Arc::new(Int64Array::from(vec![10, 20])),
                )
                .unwrap(),
            ),
        );
        // Runs of length 1, 2, 3, ... covering n.
        let mut ends = Vec::new();
        let (mut e, mut run) = (0i32, 1i32);
        while (e as usize) < n {
            e = (e + run).min(ni);
            ends.push(e);
            run += 1;
        }
        let values: StringArray = (0..ends.len())
            .map(|i| (i % 2 == 0).then(|| format!("r{i}")))
            .collect();
        add(
            "ree",
            Arc::new(RunArray::<Int32Type>::try_new(&Int32Array::from(ends), &values).unwrap()),
        );
        let nested = ListArray::new(
            Arc::new(Field::new_list_field(
                DataType::Struct(Fields::from(vec![Field::new("v", DataType::Int64, true)])),
                true,
            )),
            arrow_buffer::OffsetBuffer::from_lengths((0..n).map(|i| i % 3)),
            Arc::new(StructArray::new(
                Fields::from(vec![Field::new("v", DataType::Int64, true)]),
                vec![Arc::new(
                    (0..(0..n).map(|i| i % 3).sum::<usize>() as i64)
                        .map(Some)
                        .collect::<Int64Array>(),
                )],
                None,
            )),
            None,
        );
        add("list_of_struct", Arc::new(nested));

        let fields: Vec<Field> = cols
            .iter()
            .map(|(name, a, nullable)| Field::new(name, a.data_type().clone(), *nullable))
            .collect();
        let schema = Schema::new(fields).with_metadata(std::collections::HashMap::from([(
            "origin".to_string(),
            "arrowcert tests ✓".to_string(),
        )]));
        RecordBatch::try_new(
            Arc::new(schema),
            cols.into_iter().map(|(_, a, _)| a).collect(),
        )
        .unwrap()
    }

    #[test]
    fn valid_exports_pass() {
        for n in [0usize, 1, 10, 37, 1000] {
            let batch = all_types(n);
            let (s, a) = export(&batch);
            assert_clean(&schema_of(&s), &format!("schema, {n} rows"));
            assert_clean(&array_of(&s, &a), &format!("batch of {n} rows"));
        }
    }

    #[test]
    fn valid_slices_pass() {
        let n = 1000;
        let batch = all_types(n);
        let s = Guard::new(export_schema(&batch.schema()).unwrap());
        for (offset, length) in [
            (0, n),
            (1, 999),
            (3, 500),
            (7, 9),
            (8, 64),
            (13, 700),
            (63, 1),
            (999, 1),
            (1000, 0),
            (5, 0),
            (517, 483),
        ] {
            let a = Guard::new(export_batch_slice(&batch, offset, length));
            assert_clean(
                &array_of(&s, &a),
                &format!("slice [{offset}, {})", offset + length),
            );
        }
        // Slices of a small batch (bitmaps shorter than a word).
        let batch = all_types(10);
        for offset in 0..10 {
            for length in 0..=(10 - offset) {
                let a = Guard::new(export_batch_slice(&batch, offset, length));
                assert_clean(
                    &array_of(&s, &a),
                    &format!("small slice [{offset}, {})", offset + length),
                );
            }
        }
    }

    #[test]
    fn valid_hand_built_edge_cases_pass() {
        // Empty utf8 array with NULL offsets and data: size 0, so NULL is fine.
        let s = sch("u", 0, vec![]);
        let a = arr(0, 0, 0, vec![std::ptr::null(); 3], vec![]);
        assert_clean(&check_array_raw(s, a), "empty utf8 with NULL buffers");
        // null_count -1 with a bitmap: not checked against the bits.
        let s = sch("i", 2, vec![]);
        let a = arr(
            3,
            -1,
            0,
            vec![leak_buf(vec![0b101u8]), leak_buf(vec![1i32, 2, 3])],
            vec![],
        );
        assert_clean(&check_array_raw(s, a), "null_count -1");
        // Union with type ids on children declared out of order.
        let s = sch("+us:5,2", 0, vec![sch("i", 2, vec![]), sch("i", 2, vec![])]);
        let a = arr(
            3,
            0,
            0,
            vec![leak_buf(vec![2i8, 5, 2])],
            vec![int32_array(&[1, 2, 3]), int32_array(&[4, 5, 6])],
        );
        assert_clean(&check_array_raw(s, a), "sparse union 5,2");
        // Dictionary with the ordered flag.
        let s = sch("i", 3, vec![]);
        // SAFETY: s is a leaked test schema.
        unsafe { (*s).dictionary = sch("u", 2, vec![]) };
        assert_clean(&check_schema_raw(s), "ordered dictionary");
        // Sorted map keys on a map.
        let entries = sch("+s", 0, vec![sch("u", 0, vec![]), sch("i", 2, vec![])]);
        assert_clean(
            &check_schema_raw(sch("+m", 4 | 2, vec![entries])),
            "sorted map",
        );
        // Well-formed metadata.
        let s = sch("i", 0, vec![]);
        let mut md = Vec::new();
        md.extend_from_slice(&2i32.to_ne_bytes());
        for kv in ["k1", "v1", "key two", ""] {
            md.extend_from_slice(&(kv.len() as i32).to_ne_bytes());
            md.extend_from_slice(kv.as_bytes());
        }
        // SAFETY: s is a leaked test schema.
        unsafe { (*s).metadata = leak_bytes(&md) };
        assert_clean(&check_schema_raw(s), "metadata");
        // View array whose long string sits at the very end of its buffer.
        let data = leak_buf(b"0123456789abcdefXYZ".to_vec());
        let mut view = [0u8; 16];
        view[0..4].copy_from_slice(&16i32.to_ne_bytes());
        view[4..8].copy_from_slice(b"3456");
        view[8..12].copy_from_slice(&0i32.to_ne_bytes());
        view[12..16].copy_from_slice(&3i32.to_ne_bytes());
        let s = sch("vz", 0, vec![]);
        let a = arr(
            1,
            0,
            0,
            vec![
                std::ptr::null(),
                leak_buf(view.to_vec()),
                data,
                leak_buf(vec![19i64]),
            ],
            vec![],
        );
        assert_clean(&check_array_raw(s, a), "view at buffer end");
    }

    // -- schema rules --------------------------------------------------------

    #[test]
    fn schema_format_valid() {
        for f in [
            "d:40", "w:-1", "+ud:1,1", "tss", "x", "", "d:40,2", "+w:-1", "tsu", "+us:200",
        ] {
            let v = check_schema_raw(sch(f, 0, vec![]));
            assert_rule(&v, SCHEMA_FORMAT_VALID, &[]);
            assert_eq!(v.len(), 1, "{f}: {v:?}");
        }
        // NULL, non-UTF-8, poison.
        for p in [
            std::ptr::null(),
            leak_bytes(b"\xff\xfei\0"),
            POISON as *const c_char,
        ] {
            let s = sch("i", 0, vec![]);
            // SAFETY: s is a leaked test schema.
            unsafe { (*s).format = p };
            assert_rule(&check_schema_raw(s), SCHEMA_FORMAT_NON_NULL, &[]);
        }
        // In an arrow-rs export, with the path of the column.
        let batch = all_types(4);
        let (mut s, _a) = export(&batch);
        // SAFETY: the exported root has children; the format is restored.
        let saved = unsafe { schild(&mut s, 2) }.format;
        // SAFETY: the export has this child; the field is restored before release.
        unsafe { schild(&mut s, 2) }.format = cstr("w:-2");
        let v = schema_of(&s);
        // SAFETY: the export has this child; the field is restored before release.
        unsafe { schild(&mut s, 2) }.format = saved;
        assert_rule(&v, SCHEMA_FORMAT_VALID, &[]);
        assert_eq!(v[0].at, "root.children[2]");
        assert!(v[0].message.contains("size -2"), "{}", v[0].message);
    }

    #[test]
    fn schema_children_count() {
        let cases: Vec<*mut ArrowSchema> = vec![
            sch("+l", 0, vec![]),
            sch("i", 0, vec![sch("i", 0, vec![])]),
            sch("+ud:0,1", 0, vec![sch("i", 0, vec![])]),
            sch("+r", 0, vec![sch("i", 0, vec![])]),
            sch("+m", 0, vec![]),
        ];
        for s in cases {
            assert_rule(&check_schema_raw(s), SCHEMA_CHILDREN_COUNT, &[]);
        }
        // children NULL with n_children > 0; one child pointer NULL; negative.
        let s = sch("+s", 0, vec![]);
        // SAFETY: s is a leaked test schema.
        unsafe { (*s).n_children = 2 };
        assert_rule(&check_schema_raw(s), SCHEMA_CHILDREN_COUNT, &[]);
        let s = sch("+s", 0, vec![sch("i", 0, vec![]), std::ptr::null_mut()]);
        let v = check_schema_raw(s);
        assert_rule(&v, SCHEMA_CHILDREN_COUNT, &[]);
        assert!(v[0].message.contains("children[1] is NULL"), "{v:?}");
        let s = sch("+s", 0, vec![]);
        // SAFETY: s is a leaked test schema.
        unsafe { (*s).n_children = -1 };
        assert_rule(&check_schema_raw(s), SCHEMA_CHILDREN_COUNT, &[]);
        let s = sch(
            "+s",
            0,
            vec![sch("i", 0, vec![]), POISON as *mut ArrowSchema],
        );
        assert_rule(&check_schema_raw(s), SCHEMA_CHILDREN_COUNT, &[]);
        // Deep nesting and a cycle end with a report, not a stack overflow.
        let mut s = sch("i", 0, vec![]);
        for _ in 0..100 {
            s = sch("+l", 0, vec![s]);
        }
        let v = check_schema_raw(s);
        assert_rule(&v, SCHEMA_CHILDREN_COUNT, &[]);
        assert!(v[0].message.contains("deeper"), "{v:?}");
        let s = sch("+l", 0, vec![std::ptr::null_mut()]);
        // SAFETY: s is a leaked test schema with one child slot.
        unsafe { *(*s).children = s };
        assert_rule(&check_schema_raw(s), SCHEMA_CHILDREN_COUNT, &[]);
    }

    #[test]
    fn schema_map_entries() {
        let map = |entries_flags: i64, key_flags: i64| {
            let entries = sch(
                "+s",
                entries_flags,
                vec![sch("u", key_flags, vec![]), sch("i", 2, vec![])],
            );
            sch("+m", 2, vec![entries])
        };
        assert_clean(&check_schema_raw(map(0, 0)), "good map");
        let v = check_schema_raw(map(0, ARROW_FLAG_NULLABLE));
        assert_rule(&v, SCHEMA_MAP_NON_NULLABLE, &[]);
        assert_eq!(v[0].at, "root.children[0].children[0]");
        assert_rule(
            &check_schema_raw(map(ARROW_FLAG_NULLABLE, 0)),
            SCHEMA_MAP_NON_NULLABLE,
            &[],
        );
        let one_child = sch("+m", 0, vec![sch("+s", 0, vec![sch("u", 0, vec![])])]);
        assert_rule(&check_schema_raw(one_child), SCHEMA_MAP_ENTRIES, &[]);
        let not_struct = sch("+m", 0, vec![sch("+l", 0, vec![sch("u", 0, vec![])])]);
        assert_rule(&check_schema_raw(not_struct), SCHEMA_MAP_ENTRIES, &[]);
        // arrow-rs map export: the key flag set by hand is caught.
        let batch = all_types(3);
        let idx = batch.schema().index_of("map").unwrap();
        let (mut s, _a) = export(&batch);
        // SAFETY: map column -> entries -> key; restored below.
        let key = unsafe { schild(schild(schild(&mut s, idx), 0), 0) };
        let saved = key.flags;
        key.flags |= ARROW_FLAG_NULLABLE;
        let v = schema_of(&s);
        // SAFETY: the export has this child; the field is restored before release.
        unsafe { schild(schild(schild(&mut s, idx), 0), 0) }.flags = saved;
        assert_rule(&v, SCHEMA_MAP_NON_NULLABLE, &[]);
    }

    #[test]
    fn schema_ree_run_ends() {
        let ree =
            |f: &str, flags: i64| sch("+r", 0, vec![sch(f, flags, vec![]), sch("u", 2, vec![])]);
        assert_clean(&check_schema_raw(ree("s", 0)), "int16 run ends");
        assert_clean(&check_schema_raw(ree("l", 0)), "int64 run ends");
        assert_rule(&check_schema_raw(ree("c", 0)), SCHEMA_REE_RUN_ENDS, &[]);
        assert_rule(&check_schema_raw(ree("I", 0)), SCHEMA_REE_RUN_ENDS, &[]);
        assert_rule(
            &check_schema_raw(ree("i", ARROW_FLAG_NULLABLE)),
            SCHEMA_REE_RUN_ENDS_FLAG,
            &[],
        );
    }

    #[test]
    fn schema_dictionary_shape() {
        for f in ["u", "g", "+l"] {
            let s = if f == "+l" {
                sch(f, 0, vec![sch("i", 0, vec![])])
            } else {
                sch(f, 0, vec![])
            };
            // SAFETY: s is a leaked test schema.
            unsafe { (*s).dictionary = sch("u", 0, vec![]) };
            assert_rule(&check_schema_raw(s), SCHEMA_DICTIONARY_SHAPE, &[]);
        }
        let s = sch("i", 0, vec![]);
        // SAFETY: s is a leaked test schema.
        unsafe { (*s).dictionary = POISON as *mut ArrowSchema };
        assert_rule(&check_schema_raw(s), SCHEMA_DICTIONARY_SHAPE, &[]);
    }

    #[test]
    fn schema_flags_known() {
        assert_rule(
            &check_schema_raw(sch("i", 8, vec![])),
            SCHEMA_FLAGS_KNOWN,
            &[],
        );
        assert_rule(
            &check_schema_raw(sch("i", 1 << 40, vec![])),
            SCHEMA_FLAGS_KNOWN,
            &[],
        );
        assert_rule(
            &check_schema_raw(sch("i", ARROW_FLAG_DICTIONARY_ORDERED, vec![])),
            SCHEMA_FLAGS_PLACEMENT,
            &[],
        );
        let list = sch("+l", ARROW_FLAG_MAP_KEYS_SORTED, vec![sch("i", 0, vec![])]);
        assert_rule(&check_schema_raw(list), SCHEMA_FLAGS_PLACEMENT, &[]);
        // In an export: flags 8 on a column.
        let (mut s, _a) = export(&all_types(2));
        // SAFETY: restored below.
        unsafe { schild(&mut s, 1) }.flags |= 8;
        let v = schema_of(&s);
        // SAFETY: the export has this child; the field is restored before release.
        unsafe { schild(&mut s, 1) }.flags &= !8;
        assert_rule(&v, SCHEMA_FLAGS_KNOWN, &[]);
        assert_eq!(v[0].at, "root.children[1]");
    }

    #[test]
    fn schema_metadata_encoding() {
        let with_md = |md: Vec<u8>| {
            let s = sch("i", 0, vec![]);
            // SAFETY: s is a leaked test schema.
            unsafe { (*s).metadata = leak_bytes(&md) };
            check_schema_raw(s)
        };
        let enc = |count: i32, parts: &[(i32, &[u8])]| {
            let mut md = count.to_ne_bytes().to_vec();
            for (len, bytes) in parts {
                md.extend_from_slice(&len.to_ne_bytes());
                md.extend_from_slice(bytes);
            }
            md
        };
        assert_clean(&with_md(enc(0, &[])), "empty metadata");
        assert_rule(&with_md(enc(-1, &[])), SCHEMA_METADATA_ENCODING, &[]);
        assert_rule(&with_md(enc(1 << 21, &[])), SCHEMA_METADATA_ENCODING, &[]);
        assert_rule(
            &with_md(enc(1, &[(-4, b"")])),
            SCHEMA_METADATA_ENCODING,
            &[],
        );
        assert_rule(
            &with_md(enc(1, &[(i32::MAX, b"")])),
            SCHEMA_METADATA_ENCODING,
            &[],
        );
        // Keys and values that are not UTF-8: well framed, so not the
        // MUST rule ("a binary string"), but schema.metadata.utf8.
        let v = with_md(enc(1, &[(1, b"k"), (2, b"\xc3\x28")]));
        assert_rule(&v, SCHEMA_METADATA_UTF8, &[]);
        assert!(v[0].message.contains("value"), "{v:?}");
        assert_rule(
            &with_md(enc(1, &[(2, b"\xff\xff"), (0, b"")])),
            SCHEMA_METADATA_UTF8,
            &[],
        );
        // Both at once: each under its rule.
        let v = with_md(enc(2, &[(2, b"\xff\xff"), (0, b""), (-1, b"")]));
        assert!(v.iter().any(|x| x.rule == SCHEMA_METADATA_UTF8), "{v:?}");
        assert!(
            v.iter().any(|x| x.rule == SCHEMA_METADATA_ENCODING),
            "{v:?}"
        );
        let s = sch("i", 0, vec![]);
        // SAFETY: s is a leaked test schema.
        unsafe { (*s).metadata = POISON as *const c_char };
        assert_rule(&check_schema_raw(s), SCHEMA_METADATA_ENCODING, &[]);
    }

    #[test]
    fn schema_name_utf8() {
        let s = sch("i", 0, vec![]);
        // SAFETY: s is a leaked test schema.
        unsafe { (*s).name = leak_bytes(b"ab\xffc\0") };
        assert_rule(&check_schema_raw(s), SCHEMA_NAME_UTF8, &[]);
        let s = sch("i", 0, vec![]);
        // SAFETY: s is a leaked test schema.
        unsafe { (*s).name = POISON as *const c_char };
        assert_rule(&check_schema_raw(s), SCHEMA_NAME_UTF8, &[]);
        let s = sch("i", 0, vec![]);
        // SAFETY: s is a leaked test schema.
        unsafe { (*s).name = cstr("ünïcödé") };
        assert_clean(&check_schema_raw(s), "unicode name");
    }

    #[test]
    fn schema_release_set() {
        let s = sch("i", 0, vec![]);
        // SAFETY: s is a leaked test schema.
        unsafe { (*s).release = None };
        assert_rule(&check_schema_raw(s), SCHEMA_RELEASE_SET, &[]);
        let kid = sch("i", 0, vec![]);
        // SAFETY: kid is a leaked test schema.
        unsafe { (*kid).release = None };
        let v = check_schema_raw(sch("+s", 0, vec![sch("u", 0, vec![]), kid]));
        assert_rule(&v, SCHEMA_RELEASE_SET, &[]);
        assert_eq!(v[0].at, "root.children[1]");
        let s = sch("i", 0, vec![]);
        let d = sch("u", 0, vec![]);
        // SAFETY: leaked test schemas.
        unsafe {
            (*d).release = None;
            (*s).dictionary = d;
        }
        assert_rule(&check_schema_raw(s), SCHEMA_RELEASE_SET, &[]);
        // A release left as the poison pattern.
        let s = sch("i", 0, vec![]);
        // SAFETY: s is a leaked test schema; the poisoned callback is never called.
        unsafe {
            std::ptr::write_bytes(
                std::ptr::addr_of_mut!((*s).release).cast::<u8>(),
                crate::abi::POISON_BYTE,
                8,
            )
        };
        assert_rule(&check_schema_raw(s), SCHEMA_RELEASE_SET, &[]);
        // SAFETY: NULL is allowed.
        assert_rule(
            &unsafe { validate_schema(std::ptr::null()) },
            SCHEMA_RELEASE_SET,
            &[],
        );
    }

    // -- array rules, on arrow-rs exports ------------------------------------

    /// Runs `f` on column `col` of an export of `all_types(n)`, validates, and
    /// restores the column's struct before release.
    fn corrupt_column(n: usize, col: &str, f: impl FnOnce(&mut ArrowArray)) -> Vec<Violation> {
        let batch = all_types(n);
        let idx = batch.schema().index_of(col).unwrap();
        let (s, mut a) = export(&batch);
        // SAFETY: the root has one usable child per column.
        let c = unsafe { child(&mut a, idx) };
        // SAFETY: ArrowArray is plain data; the copy restores every field.
        let saved = unsafe { std::ptr::read(c) };
        f(c);
        let v = array_of(&s, &a);
        // SAFETY: as above: put the producer's fields back.
        unsafe { std::ptr::write(child(&mut a, idx), saved) };
        v
    }

    /// Writes buffer pointer `i` of the column through `f`, restoring it.
    fn with_buffer(n: usize, col: &str, i: usize, p: *const c_void) -> Vec<Violation> {
        let batch = all_types(n);
        let idx = batch.schema().index_of(col).unwrap();
        let (s, mut a) = export(&batch);
        // SAFETY: the column has more than i buffers; restored below.
        let slot = unsafe { child(&mut a, idx).buffers.add(i) };
        // SAFETY: as above.
        let saved = unsafe { *slot };
        // SAFETY: as above.
        unsafe { *slot = p };
        let v = array_of(&s, &a);
        // SAFETY: as above.
        unsafe { *slot = saved };
        v
    }

    #[test]
    fn array_release_set() {
        let v = corrupt_column(5, "i32", |c| c.release = None);
        assert_rule(&v, ARRAY_RELEASE_SET, &[]);
        assert_eq!(v[0].at, "root.children[6]");
        let batch = all_types(3);
        let (s, mut a) = export(&batch);
        let saved = a.release;
        a.release = None;
        let v = array_of(&s, &a);
        a.release = saved;
        assert_rule(&v, ARRAY_RELEASE_SET, &[]);
        // The dictionary of a live array.
        let batch = all_types(3);
        let idx = batch.schema().index_of("dict").unwrap();
        let (s, mut a) = export(&batch);
        // SAFETY: restored below.
        let d = unsafe { &mut *child(&mut a, idx).dictionary };
        let r = d.release.take();
        let v = array_of(&s, &a);
        // SAFETY: as above.
        unsafe { (*child(&mut a, idx).dictionary).release = r };
        assert_rule(&v, ARRAY_RELEASE_SET, &[]);
        assert_eq!(v[0].at, format!("root.children[{idx}].dictionary"));
    }

    #[test]
    fn array_n_buffers() {
        let v = corrupt_column(5, "i64", |c| c.n_buffers = 3);
        assert_rule(&v, ARRAY_N_BUFFERS, &[]);
        let v = corrupt_column(5, "utf8", |c| c.n_buffers = 2);
        assert_rule(&v, ARRAY_N_BUFFERS, &[]);
        let v = corrupt_column(5, "sparse_union", |c| c.n_buffers = 2);
        assert_rule(&v, ARRAY_N_BUFFERS, &[]);
        let v = corrupt_column(5, "null", |c| c.n_buffers = 1);
        assert_rule(&v, ARRAY_N_BUFFERS, &[]);
    }

    #[test]
    fn array_n_children() {
        let batch = all_types(3);
        let (s, mut a) = export(&batch);
        a.n_children -= 1;
        let v = array_of(&s, &a);
        a.n_children += 1;
        assert_rule(&v, ARRAY_N_CHILDREN, &[]);
        let saved = a.children;
        a.children = std::ptr::null_mut();
        let v = array_of(&s, &a);
        a.children = saved;
        assert_rule(&v, ARRAY_N_CHILDREN, &[]);
        let v = corrupt_column(3, "list", |c| c.n_children = 0);
        assert_rule(&v, ARRAY_N_CHILDREN, &[]);
        // A NULL child pointer.
        let s = sch("+s", 0, vec![sch("i", 2, vec![])]);
        let a = arr(2, 0, 0, vec![std::ptr::null()], vec![std::ptr::null_mut()]);
        assert_rule(&check_array_raw(s, a), ARRAY_N_CHILDREN, &[]);
    }

    #[test]
    fn array_null_buffer() {
        // NULL validity with nulls.
        let v = with_buffer(10, "i64", 0, std::ptr::null());
        assert_rule(&v, ARRAY_NULL_BUFFER, &[]);
        // NULL values.
        let v = with_buffer(10, "i64", 1, std::ptr::null());
        assert_rule(&v, ARRAY_NULL_BUFFER, &[]);
        // NULL offsets, NULL data of a non-empty string column.
        assert_rule(
            &with_buffer(10, "utf8", 1, std::ptr::null()),
            ARRAY_NULL_BUFFER,
            &[],
        );
        assert_rule(
            &with_buffer(10, "utf8", 2, std::ptr::null()),
            ARRAY_NULL_BUFFER,
            &[],
        );
        // Poison buffer pointer: reported, never read.
        for col in ["i64", "utf8", "list", "utf8_view", "dense_union"] {
            assert_rule(
                &with_buffer(10, col, 1, POISON as *const c_void),
                ARRAY_NULL_BUFFER,
                &[],
            );
        }
        // The buffers array itself NULL or poison.
        let v = corrupt_column(5, "i32", |c| c.buffers = std::ptr::null_mut());
        assert_rule(&v, ARRAY_NULL_BUFFER, &[]);
        let v = corrupt_column(5, "i32", |c| c.buffers = POISON as *mut *const c_void);
        assert_rule(&v, ARRAY_NULL_BUFFER, &[]);
        // NULL validity with null_count -1 (the spec allows NULL only for 0).
        let s = sch("i", 2, vec![]);
        let a = arr(
            3,
            -1,
            0,
            vec![std::ptr::null(), leak_buf(vec![1i32, 2, 3])],
            vec![],
        );
        assert_rule(&check_array_raw(s, a), ARRAY_NULL_BUFFER, &[]);
    }

    #[test]
    fn array_lengths() {
        assert_rule(
            &corrupt_column(5, "i32", |c| c.length = -1),
            ARRAY_LENGTHS,
            &[],
        );
        assert_rule(
            &corrupt_column(5, "i32", |c| c.offset = -1),
            ARRAY_LENGTHS,
            &[],
        );
        let v = corrupt_column(5, "i32", |c| {
            c.offset = i64::MAX;
            c.length = 5;
        });
        assert_rule(&v, ARRAY_LENGTHS, &[]);
        // A struct child shorter than the struct.
        let v = corrupt_column(5, "u32", |c| c.length = 4);
        assert_rule(&v, ARRAY_LENGTHS, &[]);
        assert_eq!(v[0].at, "root");
        assert!(v[0].message.contains("children[7] has length 4"), "{v:?}");
        // Fixed-size list child too short.
        let s = sch("+w:3", 0, vec![sch("i", 2, vec![])]);
        let a = arr(
            2,
            0,
            0,
            vec![std::ptr::null()],
            vec![int32_array(&[1, 2, 3, 4, 5])],
        );
        assert_rule(&check_array_raw(s, a), ARRAY_LENGTHS, &[]);
        // Sparse union child too short.
        let s = sch("+us:0,1", 0, vec![sch("i", 2, vec![]), sch("i", 2, vec![])]);
        let a = arr(
            3,
            0,
            0,
            vec![leak_buf(vec![0i8, 1, 0])],
            vec![int32_array(&[1, 2, 3]), int32_array(&[4, 5])],
        );
        assert_rule(&check_array_raw(s, a), ARRAY_LENGTHS, &[]);
        // REE run ends longer than values.
        let s = sch("+r", 0, vec![sch("i", 0, vec![]), sch("i", 2, vec![])]);
        let a = arr(
            5,
            0,
            0,
            vec![],
            vec![int32_array(&[2, 5]), int32_array(&[7])],
        );
        assert_rule(&check_array_raw(s, a), ARRAY_LENGTHS, &[]);
    }

    #[test]
    fn array_null_count() {
        let v = corrupt_column(1000, "i64", |c| c.null_count += 1);
        assert_rule(&v, ARRAY_NULL_COUNT, &[]);
        // Out of range: below -1, or above the length.
        assert_rule(
            &corrupt_column(5, "i32", |c| c.null_count = -2),
            ARRAY_NULL_COUNT,
            &[],
        );
        assert_rule(
            &corrupt_column(5, "i32", |c| c.null_count = c.length + 1),
            ARRAY_NULL_COUNT,
            &[],
        );
        assert!(v[0].message.contains("zero bits in [0, 1000)"), "{v:?}");
        // On a slice, with the bit offset of the slice.
        let batch = all_types(100);
        let idx = batch.schema().index_of("i64").unwrap();
        let (s, _a) = export(&batch);
        let mut a = Guard::new(export_batch_slice(&batch, 5, 90));
        // SAFETY: restored below.
        let c = unsafe { child(&mut a, idx) };
        let (off, nc) = (c.offset, c.null_count);
        c.null_count = nc - 1;
        let v = array_of(&s, &a);
        // SAFETY: the export has this child; the field is restored before release.
        unsafe { child(&mut a, idx) }.null_count = nc;
        assert_rule(&v, ARRAY_NULL_COUNT, &[]);
        assert_eq!(
            v[0].message,
            format!(
                "null_count is {} but the validity bitmap has {nc} zero bits in [{off}, {})",
                nc - 1,
                off + 90
            )
        );
        // Null type: null_count must be the length.
        assert_rule(
            &corrupt_column(5, "null", |c| c.null_count = 0),
            ARRAY_NULL_COUNT,
            &[],
        );
        assert_clean(
            &corrupt_column(5, "null", |c| c.null_count = -1),
            "null type, -1",
        );
        // Union and REE have no bitmap: each its own (SHOULD) rule.
        assert_rule(
            &corrupt_column(5, "dense_union", |c| c.null_count = 1),
            ARRAY_UNION_NULL_COUNT,
            &[],
        );
        // REE: its own (SHOULD) rule; -1 is fine.
        assert_rule(
            &corrupt_column(5, "ree", |c| c.null_count = 2),
            ARRAY_REE_NULL_COUNT,
            &[],
        );
        assert_clean(
            &corrupt_column(5, "ree", |c| c.null_count = -1),
            "REE, null_count -1",
        );
        // Struct with nulls.
        assert_rule(
            &corrupt_column(37, "struct", |c| c.null_count = 0),
            ARRAY_NULL_COUNT,
            &[],
        );
    }

    #[test]
    fn bit_counting() {
        let bytes: Vec<u8> = (0..200u32)
            .map(|i| (i.wrapping_mul(2654435761) >> 7) as u8)
            .collect();
        for first in 0..8 {
            for len in [0, 1, 5, 7, 8, 9, 63, 64, 65, 100, 511, 512, 513, 1000, 1500] {
                if first + len > bytes.len() * 8 {
                    continue;
                }
                let expected = (first..first + len)
                    .filter(|&k| bytes[k / 8] & (1 << (k % 8)) != 0)
                    .count();
                assert_eq!(
                    count_set_bits(&bytes, first, len),
                    expected,
                    "first {first} len {len}"
                );
            }
        }
    }

    #[test]
    fn array_offsets_valid() {
        // utf8 with decreasing offsets.
        let bad = |offsets: Vec<i32>, data: &[u8]| {
            // SAFETY: deliberately invalid data, exported as is.
            unsafe {
                ArrayData::builder(DataType::Utf8)
                    .len(offsets.len() - 1)
                    .add_buffer(Buffer::from_vec(offsets))
                    .add_buffer(Buffer::from_slice_ref(data))
                    .build_unchecked()
            }
        };
        let (s, a) = export_data(&bad(vec![0, 3, 2, 5], b"hello"), true);
        let v = array_of(&s, &a);
        assert_rule(&v, ARRAY_OFFSETS_VALID, &[]);
        assert!(
            v[0].message
                .contains("offsets[2] = 2 is less than offsets[1] = 3"),
            "{v:?}"
        );
        let (s, a) = export_data(&bad(vec![-1, 3, 4, 5], b"hello"), true);
        assert_rule(&array_of(&s, &a), ARRAY_OFFSETS_VALID, &[]);
        // A decrease only outside the slice is not read.
        let data = bad(vec![0, 3, 2, 4, 5], b"hello").slice(2, 2);
        let (s, a) = export_data(&data, true);
        assert_clean(&array_of(&s, &a), "slice past the bad offset");
        // Large: a decrease deep in a long array, past the first block.
        let mut offsets: Vec<i64> = (0..10_001).collect();
        offsets[9000] = 8000;
        // SAFETY: deliberately invalid data.
        let data = unsafe {
            ArrayData::builder(DataType::LargeBinary)
                .len(10_000)
                .add_buffer(Buffer::from_vec(offsets))
                .add_buffer(Buffer::from_vec(vec![0u8; 10_000]))
                .build_unchecked()
        };
        let (s, a) = export_data(&data, true);
        let v = array_of(&s, &a);
        assert_rule(&v, ARRAY_OFFSETS_VALID, &[]);
        assert!(
            v[0].message
                .contains("offsets[9001] = 9001 is less than offsets[9000] = 8000")
                || v[0]
                    .message
                    .contains("offsets[9000] = 8000 is less than offsets[8999] = 8999"),
            "{v:?}"
        );
        // List whose last offset is beyond its child.
        let s = sch("+l", 0, vec![sch("i", 2, vec![])]);
        let a = arr(
            2,
            0,
            0,
            vec![std::ptr::null(), leak_buf(vec![0i32, 2, 6])],
            vec![int32_array(&[1, 2, 3, 4, 5])],
        );
        assert_rule(&check_array_raw(s, a), ARRAY_OFFSETS_VALID, &[]);
        // A map whose entries are shorter than its last offset (arrow-rs export).
        let batch = all_types(10);
        let idx = batch.schema().index_of("map").unwrap();
        let (s, mut a) = export(&batch);
        // SAFETY: the map column has its entries child; restored below.
        let entries = unsafe { child(child(&mut a, idx), 0) };
        entries.length -= 1;
        let v = array_of(&s, &a);
        // SAFETY: as above.
        unsafe { child(child(&mut a, idx), 0) }.length += 1;
        assert_rule(&v, ARRAY_OFFSETS_VALID, &[]);
        assert_eq!(v[0].at, format!("root.children[{idx}]"));
        // List view out of bounds.
        let s = sch("+vl", 0, vec![sch("i", 2, vec![])]);
        let a = arr(
            2,
            0,
            0,
            vec![
                std::ptr::null(),
                leak_buf(vec![0i32, 3]),
                leak_buf(vec![2i32, 3]),
            ],
            vec![int32_array(&[1, 2, 3, 4, 5])],
        );
        let v = check_array_raw(s, a);
        assert_rule(&v, ARRAY_OFFSETS_VALID, &[]);
        assert!(v[0].message.contains("slot 1"), "{v:?}");
        let s = sch("+vL", 0, vec![sch("i", 2, vec![])]);
        let a = arr(
            1,
            0,
            0,
            vec![
                std::ptr::null(),
                leak_buf(vec![1i64]),
                leak_buf(vec![-1i64]),
            ],
            vec![int32_array(&[1, 2])],
        );
        assert_rule(&check_array_raw(s, a), ARRAY_OFFSETS_VALID, &[]);
        // Dense union offset beyond its child.
        let s = sch("+ud:0,1", 0, vec![sch("i", 2, vec![]), sch("i", 2, vec![])]);
        let a = arr(
            3,
            0,
            0,
            vec![leak_buf(vec![0i8, 1, 1]), leak_buf(vec![0i32, 0, 1])],
            vec![int32_array(&[1]), int32_array(&[2])],
        );
        let v = check_array_raw(s, a);
        assert_rule(&v, ARRAY_OFFSETS_VALID, &[]);
        assert!(v[0].message.contains("slot 2"), "{v:?}");
    }

    #[test]
    fn array_union_type_ids() {
        let s = sch("+us:0,1", 0, vec![sch("i", 2, vec![]), sch("i", 2, vec![])]);
        let a = arr(
            4,
            0,
            0,
            vec![leak_buf(vec![0i8, 1, 5, 5])],
            vec![int32_array(&[1, 2, 3, 4]), int32_array(&[5, 6, 7, 8])],
        );
        let v = check_array_raw(s, a);
        assert_rule(&v, ARRAY_UNION_TYPE_IDS, &[]);
        assert!(
            v[0].message.contains("type id 5 at slot 2") && v[0].message.contains("2 slot(s)"),
            "{v:?}"
        );
        // Negative ids too; ids of the declared list, not child indices.
        let s = sch("+ud:4,9", 0, vec![sch("i", 2, vec![]), sch("i", 2, vec![])]);
        let a = arr(
            2,
            0,
            0,
            vec![leak_buf(vec![4i8, 1]), leak_buf(vec![0i32, 0])],
            vec![int32_array(&[1]), int32_array(&[2])],
        );
        assert_rule(&check_array_raw(s, a), ARRAY_UNION_TYPE_IDS, &[]);
        // Outside the slice: not read.
        let s = sch("+us:0", 0, vec![sch("i", 2, vec![])]);
        let a = arr(
            2,
            0,
            1,
            vec![leak_buf(vec![-1i8, 0, 0])],
            vec![int32_array(&[1, 2, 3])],
        );
        assert_clean(&check_array_raw(s, a), "bad id before the offset");
    }

    #[test]
    fn array_ree_run_ends() {
        let ree = |length: i64, offset: i64, ends: &[i32]| {
            let s = sch("+r", 0, vec![sch("i", 0, vec![]), sch("i", 2, vec![])]);
            let values: Vec<i32> = (0..ends.len() as i32).collect();
            let a = arr(
                length,
                0,
                offset,
                vec![],
                vec![int32_array(ends), int32_array(&values)],
            );
            check_array_raw(s, a)
        };
        assert_clean(&ree(6, 0, &[2, 5, 6]), "good run ends");
        assert_clean(&ree(3, 3, &[2, 5, 6]), "good run ends, offset");
        assert_rule(&ree(6, 0, &[2, 2, 6]), ARRAY_REE_RUN_ENDS, &[]);
        assert_rule(&ree(6, 0, &[3, 2, 6]), ARRAY_REE_RUN_ENDS, &[]);
        assert_rule(&ree(6, 0, &[0, 2, 6]), ARRAY_REE_RUN_ENDS, &[]);
        let v = ree(4, 3, &[2, 5, 6]);
        assert_rule(&v, ARRAY_REE_RUN_ENDS, &[]);
        assert!(v[0].message.contains("offset + length = 7"), "{v:?}");
        assert_rule(&ree(3, 0, &[]), ARRAY_REE_RUN_ENDS, &[]);
        // Run ends with a null.
        let s = sch("+r", 0, vec![sch("i", 0, vec![]), sch("i", 2, vec![])]);
        let run_ends = arr(
            2,
            1,
            0,
            vec![leak_buf(vec![0b01u8]), leak_buf(vec![2i32, 4])],
            vec![],
        );
        let a = arr(4, 0, 0, vec![], vec![run_ends, int32_array(&[1, 2])]);
        assert_rule(&check_array_raw(s, a), ARRAY_REE_RUN_ENDS, &[]);
        // int16 run ends cannot reach beyond 32767.
        let s = sch("+r", 0, vec![sch("s", 0, vec![]), sch("i", 2, vec![])]);
        let a = arr(
            40_000,
            0,
            0,
            vec![],
            vec![
                arr(
                    1,
                    0,
                    0,
                    vec![std::ptr::null(), leak_buf(vec![32_000i16])],
                    vec![],
                ),
                int32_array(&[1]),
            ],
        );
        assert_rule(&check_array_raw(s, a), ARRAY_REE_RUN_ENDS, &[]);
    }

    fn view(len: i32, prefix_or_inline: &[u8], buffer: i32, offset: i32) -> Vec<u8> {
        let mut v = vec![0u8; 16];
        v[0..4].copy_from_slice(&len.to_ne_bytes());
        if len <= 12 {
            v[4..4 + prefix_or_inline.len()].copy_from_slice(prefix_or_inline);
        } else {
            v[4..8].copy_from_slice(&prefix_or_inline[..4]);
            v[8..12].copy_from_slice(&buffer.to_ne_bytes());
            v[12..16].copy_from_slice(&offset.to_ne_bytes());
        }
        v
    }

    #[test]
    fn array_view_sizes() {
        let data = b"the quick brown fox jumps over the lazy dog".to_vec();
        let n = data.len() as i64;
        let check = |views: Vec<Vec<u8>>, sizes: Vec<i64>, validity: Option<u8>| {
            let mut bufs = vec![validity.map_or(std::ptr::null(), |b| leak_buf(vec![b]))];
            let count = views.len() as i64;
            bufs.push(leak_buf(views.concat()));
            for _ in &sizes {
                bufs.push(leak_buf(data.clone()));
            }
            bufs.push(leak_buf(sizes));
            let nulls = validity.map_or(0, |b| count - i64::from(b.count_ones()).min(count));
            check_array_raw(sch("vu", 2, vec![]), arr(count, nulls, 0, bufs, vec![]))
        };
        assert_clean(
            &check(
                vec![
                    view(3, b"abc", 0, 0),
                    view(20, b"the ", 0, 0),
                    view(19, &data[n as usize - 19..], 1, n as i32 - 19),
                ],
                vec![n, n],
                None,
            ),
            "good views",
        );
        // Beyond the buffer, bad buffer index, negative length, negative size.
        assert_rule(
            &check(vec![view(20, b"the ", 0, n as i32 - 19)], vec![n], None),
            ARRAY_VIEW_SIZES,
            &[],
        );
        assert_rule(
            &check(vec![view(20, b"the ", 1, 0)], vec![n], None),
            ARRAY_VIEW_SIZES,
            &[],
        );
        assert_rule(
            &check(vec![view(-1, b"", 0, 0)], vec![n], None),
            ARRAY_VIEW_SIZES,
            &[],
        );
        assert_rule(
            &check(vec![view(3, b"abc", 0, 0)], vec![-5], None),
            ARRAY_VIEW_SIZES,
            &[],
        );
        // A broken view under a null slot is not read.
        assert_clean(
            &check(
                vec![view(3, b"abc", 0, 0), view(20, b"the ", 7, 0)],
                vec![n],
                Some(0b01),
            ),
            "garbage under a null",
        );
        // Missing the sizes buffer: n_buffers 2.
        let a = arr(
            1,
            0,
            0,
            vec![std::ptr::null(), leak_buf(view(3, b"abc", 0, 0))],
            vec![],
        );
        assert_rule(
            &check_array_raw(sch("vz", 2, vec![]), a),
            ARRAY_VIEW_SIZES,
            &[],
        );
        // arrow-rs export with n_buffers cut to 2.
        assert_rule(
            &corrupt_column(10, "utf8_view", |c| c.n_buffers = 2),
            ARRAY_VIEW_SIZES,
            &[],
        );
        // Columnar's buffer list (no sizes buffer) with two variadic data
        // buffers: the view into the last one is reported before that
        // 1-byte buffer could be read as 8 bytes of sizes.
        let bufs = vec![
            std::ptr::null(),
            leak_buf([view(20, b"the ", 0, 0), view(19, b"the ", 1, 0)].concat()),
            leak_buf(data.clone()),
            leak_buf(vec![b'x']),
        ];
        let v = check_array_raw(sch("vu", 2, vec![]), arr(2, 0, 0, bufs, vec![]));
        assert_rule(&v, ARRAY_VIEW_SIZES, &[]);
        assert!(
            v[0].message
                .contains("refers to variadic buffer 1, but there are 1"),
            "{v:?}"
        );
    }

    /// One utf8 view array over one variadic buffer `data`.
    fn views_over(views: Vec<Vec<u8>>, data: &[u8], validity: Option<u8>) -> Vec<Violation> {
        let count = views.len() as i64;
        let bufs = vec![
            validity.map_or(std::ptr::null(), |b| leak_buf(vec![b])),
            leak_buf(views.concat()),
            leak_buf(data.to_vec()),
            leak_buf(vec![data.len() as i64]),
        ];
        let nulls = validity.map_or(0, |b| count - i64::from(b.count_ones()).min(count));
        check_array_raw(sch("vu", 2, vec![]), arr(count, nulls, 0, bufs, vec![]))
    }

    #[test]
    fn array_view_prefix() {
        let data = b"the quick brown fox jumps over the lazy dog";
        assert_clean(
            &views_over(
                vec![view(20, b"the ", 0, 0), view(13, b"k br", 0, 8)],
                data,
                None,
            ),
            "prefixes copied from the data",
        );
        let v = views_over(
            vec![view(20, b"the ", 0, 0), view(13, b"quic", 0, 8)],
            data,
            None,
        );
        assert_rule(&v, ARRAY_VIEW_PREFIX, &[]);
        assert!(v[0].message.contains("slot 1"), "{v:?}");
        // A zeroed prefix (a producer that never filled it in).
        assert_rule(
            &views_over(vec![view(20, &[0; 4], 0, 0)], data, None),
            ARRAY_VIEW_PREFIX,
            &[],
        );
        // Under a null slot, anything goes.
        assert_clean(
            &views_over(
                vec![view(20, b"the ", 0, 0), view(13, b"quic", 0, 8)],
                data,
                Some(0b01),
            ),
            "a wrong prefix under a null",
        );
    }

    #[test]
    fn array_view_inline_padding() {
        let data = b"the quick brown fox jumps over the lazy dog";
        assert_clean(
            &views_over(
                vec![view(0, b"", 0, 0), view(12, b"twelve bytes", 0, 0)],
                data,
                None,
            ),
            "inline values padded with 0 (and one with no room for padding)",
        );
        let mut garbage = view(3, b"abc", 0, 0);
        garbage[15] = 0xab;
        let v = views_over(vec![view(2, b"ok", 0, 0), garbage.clone()], data, None);
        assert_rule(&v, ARRAY_VIEW_INLINE_PADDING, &[]);
        assert!(
            v[0].message.contains("slot 1") && v[0].message.contains("0xab"),
            "{v:?}"
        );
        assert_clean(
            &views_over(vec![view(2, b"ok", 0, 0), garbage], data, Some(0b01)),
            "garbage padding under a null",
        );
    }

    #[test]
    fn array_dictionary_indices() {
        // Index out of range, built unchecked.
        let keys = Int32Array::from(vec![Some(0), None, Some(3), Some(1)]);
        // SAFETY: deliberately invalid data, exported as is.
        let data = unsafe {
            ArrayData::builder(DataType::Dictionary(
                Box::new(DataType::Int32),
                Box::new(DataType::Utf8),
            ))
            .len(4)
            .nulls(keys.nulls().cloned())
            .add_buffer(keys.values().inner().clone())
            .add_child_data(StringArray::from(vec!["a", "b", "c"]).into_data())
            .build_unchecked()
        };
        let (s, a) = export_data(&data, true);
        let v = array_of(&s, &a);
        assert_rule(&v, ARRAY_DICTIONARY_INDICES, &[]);
        assert!(v[0].message.contains("index 3 at slot 2"), "{v:?}");
        // A bad index under a null is fine.
        let keys = Int32Array::from(vec![Some(0), None, Some(2)]);
        // SAFETY: as above, with garbage under the null.
        let data = unsafe {
            ArrayData::builder(DataType::Dictionary(
                Box::new(DataType::Int32),
                Box::new(DataType::Utf8),
            ))
            .len(3)
            .nulls(keys.nulls().cloned())
            .add_buffer(Buffer::from_vec(vec![0i32, -7, 2]))
            .add_child_data(StringArray::from(vec!["a", "b", "c"]).into_data())
            .build_unchecked()
        };
        let (s, a) = export_data(&data, true);
        assert_clean(&array_of(&s, &a), "garbage under a null index");
        // Unsigned 64-bit indices beyond i64.
        let s = sch("L", 0, vec![]);
        // SAFETY: s is a leaked test schema.
        unsafe { (*s).dictionary = sch("i", 2, vec![]) };
        let a = arr(
            1,
            0,
            0,
            vec![std::ptr::null(), leak_buf(vec![u64::MAX])],
            vec![],
        );
        // SAFETY: a is a leaked test array.
        unsafe { (*a).dictionary = int32_array(&[1, 2]) };
        assert_rule(&check_array_raw(s, a), ARRAY_DICTIONARY_INDICES, &[]);
        // Dictionary pointer NULL while the schema has one, and the reverse.
        let v = corrupt_column(5, "dict", |c| c.dictionary = std::ptr::null_mut());
        assert_rule(&v, ARRAY_DICTIONARY_PRESENT, &[]);
        let v = corrupt_column(5, "i32", |c| c.dictionary = int32_array(&[1]));
        assert_rule(&v, ARRAY_DICTIONARY_PRESENT, &[]);
    }

    #[test]
    fn array_buffers_aligned() {
        let batch = all_types(9);
        let (s, mut a) = export(&batch);
        assert_clean(&array_of(&s, &a), "arrow-rs buffers");
        for (col, buffer, align) in [
            ("i64", 1, 8),
            ("i32", 1, 4),
            ("utf8", 1, 4),
            ("large_utf8", 1, 8),
        ] {
            let idx = batch.schema().index_of(col).unwrap();
            // SAFETY: the root has one usable child per column, with at
            // least buffer + 1 buffers; the pointer is restored below.
            let c = unsafe { child(&mut a, idx) };
            // SAFETY: as above.
            let slot = unsafe { &mut *c.buffers.add(buffer) };
            let saved = *slot;
            // One byte further: misaligned, and only read as bytes here
            // (the validator never reads typed values from buffers).
            *slot = leak_buf(vec![0u8; 4096 + align]).wrapping_byte_add(align / 2);
            let v = array_of(&s, &a);
            // SAFETY: as above.
            unsafe { *child(&mut a, idx).buffers.add(buffer) = saved };
            let mine: Vec<&Violation> = v
                .iter()
                .filter(|x| x.rule == ARRAY_BUFFERS_ALIGNED)
                .collect();
            assert_eq!(mine.len(), 1, "{col}: {v:?}");
            assert!(
                mine[0]
                    .message
                    .contains(&format!("not a multiple of {align}")),
                "{v:?}"
            );
            assert!(mine[0].at.ends_with(&format!("children[{idx}]")), "{v:?}");
        }
        // Bitmaps and bytes need no alignment.
        let s = sch("u", 2, vec![]);
        let data = leak_buf(vec![0u8; 16]).wrapping_byte_add(1);
        let a = arr(
            2,
            0,
            0,
            vec![std::ptr::null(), leak_buf(vec![0i32, 1, 3]), data],
            vec![],
        );
        assert_clean(&check_array_raw(s, a), "unaligned string data");
        assert_eq!(format::buffer_alignment(&Format::Utf8View, 3, 4), 8);
        assert_eq!(format::buffer_alignment(&Format::Utf8View, 2, 4), 1);
        assert_eq!(
            format::buffer_alignment(&Format::FixedSizeBinary(8), 1, 2),
            1
        );
    }

    #[test]
    fn release_relocatable() {
        // A schema whose private_data points into itself.
        let s = sch("i", 0, vec![]);
        // SAFETY: s is a leaked test schema.
        unsafe { (*s).private_data = (&raw mut (*s).flags).cast() };
        let v = check_schema_raw(s);
        assert_rule(&v, SCHEMA_RELEASE_RELOCATABLE, &[]);
        assert!(
            v[0].message.contains("private_data points 24 bytes"),
            "{v:?}"
        );
        // SAFETY: s is a leaked test schema.
        assert_eq!(schema_self_refs(unsafe { &*s }).len(), 1);
        // An array whose buffers array is inside itself: a struct array
        // with its one (NULL) buffer kept in the dictionary member.
        let s = sch("+s", 0, vec![]);
        let a = arr(0, 0, 0, vec![std::ptr::null()], vec![]);
        // SAFETY: a is a leaked test array.
        unsafe { (*a).buffers = (&raw mut (*a).dictionary).cast() };
        let v = check_array_raw(s, a);
        assert_rule(&v, ARRAY_RELEASE_RELOCATABLE, &[]);
        assert!(v[0].message.starts_with("buffers points 56 bytes"), "{v:?}");
        // A buffer pointer into the structure.
        let s = sch("c", 0, vec![]);
        let a = arr(1, 0, 0, vec![std::ptr::null(), std::ptr::null()], vec![]);
        // SAFETY: a is a leaked test array with two buffers.
        unsafe { *(*a).buffers.add(1) = (&raw const (*a).length).cast() };
        let v = check_array_raw(s, a);
        assert_rule(&v, ARRAY_RELEASE_RELOCATABLE, &[]);
        // SAFETY: leaked test structures.
        let (sr, ar) = unsafe { (&*s, &*a) };
        // SAFETY: as above; the buffers array holds two pointers.
        assert_eq!(unsafe { array_self_refs(sr, ar) }.len(), 1);
        // With a wrong buffer count the entries are not read.
        // SAFETY: a is a leaked test array.
        unsafe { (*a).n_buffers = 5 };
        // SAFETY: as above; the count does not match, so nothing is read.
        assert!(unsafe { array_self_refs(sr, ar) }.is_empty());
    }

    #[test]
    fn hostile_values_do_not_crash() {
        let s = sch("+s", 0, vec![sch("i", 2, vec![])]);
        for (field, value) in [
            ("n_buffers", i64::MAX),
            ("n_buffers", i64::MIN),
            ("n_children", i64::MAX),
            ("n_children", -1),
            ("length", i64::MAX),
            ("length", i64::MIN),
            ("offset", i64::MAX),
            ("null_count", i64::MIN),
        ] {
            let a = arr(2, 0, 0, vec![std::ptr::null()], vec![int32_array(&[1, 2])]);
            // SAFETY: a is a leaked test array.
            let r = unsafe { &mut *a };
            match field {
                "n_buffers" => r.n_buffers = value,
                "n_children" => r.n_children = value,
                "length" => r.length = value,
                "offset" => r.offset = value,
                _ => r.null_count = value,
            }
            let v = check_array_raw(s, a);
            assert!(!v.is_empty(), "{field} = {value}");
        }
        // A whole array of poison.
        let a = Box::into_raw(Box::new(ArrowArray::poisoned()));
        let v = check_array_raw(sch("u", 0, vec![]), a);
        assert!(v.iter().any(|x| x.rule == ARRAY_RELEASE_SET), "{v:?}");
        let s = Box::into_raw(Box::new(ArrowSchema::poisoned()));
        let v = check_schema_raw(s);
        assert!(!v.is_empty());
        // A cyclic array (and schema) ends with a depth report.
        let sc = sch("+l", 0, vec![std::ptr::null_mut()]);
        let ac = arr(
            1,
            0,
            0,
            vec![std::ptr::null(), leak_buf(vec![0i32, 1])],
            vec![std::ptr::null_mut()],
        );
        // SAFETY: leaked test structures with one child slot each.
        unsafe {
            *(*sc).children = sc;
            *(*ac).children = ac;
        }
        // SAFETY: as above.
        let v = unsafe { validate_array(sc, ac) };
        assert_rule(&v, ARRAY_N_CHILDREN, &[]);
        assert!(v[0].message.contains("deeper"), "{v:?}");
        // Too many violations are capped.
        let kids: Vec<*mut ArrowSchema> = (0..3000).map(|_| sch("?", 0, vec![])).collect();
        assert_eq!(check_schema_raw(sch("+s", 0, kids)).len(), MAX_VIOLATIONS);
    }

    #[test]
    fn other_arrow_rs_export_paths_pass() {
        let batch = all_types(100);
        let s = Guard::new(export_schema(&batch.schema()).unwrap());
        // RecordBatch::slice slices each array (arrow-rs array-level slicing).
        for (offset, length) in [(0, 100), (1, 98), (3, 50), (9, 0), (63, 37)] {
            let a = Guard::new(export_batch(&batch.slice(offset, length)));
            assert_clean(
                &array_of(&s, &a),
                &format!("RecordBatch::slice({offset}, {length})"),
            );
        }
        // All-null and empty columns of every type.
        for n in [0usize, 1, 9] {
            let cols: Vec<ArrayRef> = batch
                .schema()
                .fields()
                .iter()
                .map(|f| {
                    if n == 0 {
                        new_empty_array(f.data_type())
                    } else {
                        new_null_array(f.data_type(), n)
                    }
                })
                .collect();
            let fields: Vec<Field> = batch
                .schema()
                .fields()
                .iter()
                .map(|f| f.as_ref().clone().with_nullable(true))
                .collect();
            let b = RecordBatch::try_new(Arc::new(Schema::new(fields)), cols).unwrap();
            let (s2, a2) = export(&b);
            let sv = schema_of(&s2);
            let av = array_of(&s2, &a2);
            let all: Vec<String> = sv
                .iter()
                .chain(&av)
                .map(|v| {
                    let idx: Option<usize> =
                        v.at.strip_prefix("root.children[")
                            .and_then(|r| r.split(']').next())
                            .and_then(|i| i.parse().ok());
                    format!(
                        "{} ({})",
                        v,
                        idx.map_or("?".into(), |i| b.schema().field(i).name().clone())
                    )
                })
                .collect();
            assert!(all.is_empty(), "{n} rows: {all:#?}");
        }
    }

    #[test]
    fn int64_large_list_and_views_at_scale() {
        // Bigger arrays than a block, through the public entry points.
        let n = 100_000;
        let batch = RecordBatch::try_from_iter([
            (
                "a",
                Arc::new(
                    (0..n)
                        .map(|i| (i % 7 != 3).then_some(i as i64))
                        .collect::<Int64Array>(),
                ) as ArrayRef,
            ),
            (
                "b",
                Arc::new(
                    (0..n)
                        .map(|i| (i % 5 != 0).then(|| "y".repeat(i % 30)))
                        .collect::<StringArray>(),
                ) as ArrayRef,
            ),
            (
                "c",
                Arc::new(ListArray::from_iter_primitive::<Int64Type, _, _>(
                    (0..n).map(|i| (i % 11 != 0).then(|| vec![Some(i as i64); i % 4])),
                )) as ArrayRef,
            ),
            (
                "d",
                Arc::new(
                    (0..n)
                        .map(|i| Some("z".repeat(i % 40)))
                        .collect::<StringViewArray>(),
                ) as ArrayRef,
            ),
        ])
        .unwrap();
        let (s, a) = export(&batch);
        assert_clean(&schema_of(&s), "schema");
        assert_clean(&array_of(&s, &a), "big batch");
        let a = Guard::new(export_batch_slice(&batch, 12_345, 54_321));
        assert_clean(&array_of(&s, &a), "big slice");
    }
}

//! The schema tree: every node's members, format, flags, metadata and
//! children, the map, union and run-end encoded shapes, and the walk.

use super::*;

/// The children pointers of a schema node, if they may be followed.
///
/// # Safety
/// `s` must be a readable schema whose `children` pointer, when usable, points
/// to `n_children` pointers.
pub(super) unsafe fn schema_children(s: &ArrowSchema) -> Option<&[*mut ArrowSchema]> {
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
pub(super) unsafe fn live_schema<'a>(p: *const ArrowSchema) -> Option<&'a ArrowSchema> {
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
pub(super) struct SchemaNode {
    pub(super) format: Option<Format>,
    pub(super) flags: i64,
    pub(super) n_children: i64,
    pub(super) children: Vec<Option<SchemaNode>>,
}

/// # Safety
/// `s` is a readable, live schema; the pointers inside it are followed only
/// when usable, and then must point to what the C data interface says.
pub(super) unsafe fn check_schema(
    s: &ArrowSchema,
    at: &str,
    depth: usize,
    sink: &mut Sink,
) -> SchemaNode {
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

    // SAFETY: a readable, live schema (this function's contract).
    unsafe { check_name(s, at, sink) };
    // SAFETY: as above.
    unsafe { check_metadata(s, at, sink) };
    check_flags(s, format.as_ref(), at, sink);

    // SAFETY: as above; each child pointer is checked before it is followed.
    let children = unsafe { check_children(s, at, depth, sink) };
    let n = s.n_children;
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

    // SAFETY: as above; the dictionary pointer is checked before it is
    // followed.
    unsafe { check_dictionary(s, format.as_ref(), at, depth, sink) };

    check_child_types(format.as_ref(), &children, at, sink);

    SchemaNode {
        format,
        flags: s.flags,
        n_children: n,
        children,
    }
}

/// The name, when there is one, is valid UTF-8 (schema.name.utf8).
///
/// # Safety
/// `s` is a readable, live schema whose `name`, when neither NULL nor the
/// poison pattern, is a C string (as the spec says it is).
unsafe fn check_name(s: &ArrowSchema, at: &str, sink: &mut Sink) {
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
}

/// The metadata, when there is some, is framed as the spec's encoding
/// says, holds UTF-8 keys and values, and is NULL rather than empty
/// (schema.metadata.*).
///
/// # Safety
/// `s` is a readable, live schema whose `metadata`, when neither NULL nor
/// the poison pattern, points to readable memory (the reader is bounded by
/// the lengths it holds).
unsafe fn check_metadata(s: &ArrowSchema, at: &str, sink: &mut Sink) {
    if !s.metadata.is_null() {
        let found = if is_poison_ptr(s.metadata.addr()) {
            MetadataProblems {
                framing: Some("metadata pointer is the poison pattern (never written)".to_string()),
                ..MetadataProblems::default()
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
        if found.no_pairs {
            sink.push(
                SCHEMA_METADATA_NULL_IF_OMITTED,
                at,
                "metadata is not NULL but holds no key-value pairs (its count is 0): metadata that is omitted must be NULL, not an empty string",
            );
        }
    }
}

/// The flags hold only the bits the spec defines, each on a type it
/// applies to (schema.flags.known, schema.flags.placement).
fn check_flags(s: &ArrowSchema, format: Option<&Format>, at: &str, sink: &mut Sink) {
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
        if let Some(f) = format.filter(|f| **f != Format::Map) {
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
}

/// Checks `n_children` and the children pointer, and follows every usable
/// child: their nodes, in order (empty when the count or the pointer is
/// unusable).
///
/// # Safety
/// `s` is a readable, live schema; its children pointer, when usable, must
/// point to `n_children` child pointers ("There must be n_children
/// pointers"), each followed only when usable.
unsafe fn check_children(
    s: &ArrowSchema,
    at: &str,
    depth: usize,
    sink: &mut Sink,
) -> Vec<Option<SchemaNode>> {
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
    children
}

/// A dictionary, when there is one, sits on an integer index type and is
/// itself checked as a schema (schema.dictionary.shape).
///
/// # Safety
/// `s` is a readable, live schema; its dictionary pointer, when usable,
/// must point to a readable `ArrowSchema`.
unsafe fn check_dictionary(
    s: &ArrowSchema,
    format: Option<&Format>,
    at: &str,
    depth: usize,
    sink: &mut Sink,
) {
    if !s.dictionary.is_null() {
        if let Some(f) = format.filter(|f| !format::is_integer(f)) {
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
}

/// The rules a type sets on its children's types: a map's entries
/// (schema.map.*) and a run-end encoded type's run ends
/// (schema.ree.run-ends, schema.ree.run-ends-flag).
fn check_child_types(
    format: Option<&Format>,
    children: &[Option<SchemaNode>],
    at: &str,
    sink: &mut Sink,
) {
    match format {
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
}

/// Follows one child or dictionary pointer of a live schema.
///
/// # Safety
/// `p`, when usable, must point to a readable `ArrowSchema`.
pub(super) unsafe fn visit_schema(
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

pub(super) fn check_map_entries(entries: &SchemaNode, at: &str, sink: &mut Sink) {
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
    /// The count is 0: metadata that says "none" without being NULL.
    pub no_pairs: bool,
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
    // Each read below is first probed (hostmem::unreadable_end): a length
    // that runs past the producer's memory is a framing problem, not a
    // crash of the process reading it.
    let past_end = |from: usize, len: usize, what: &str| {
        crate::abi::hostmem::unreadable_end(base.addr().wrapping_add(from), len).map(|bad| {
            format!(
                "{what} runs into memory that is not readable (byte {} of the metadata, address {bad:#x}): the metadata is shorter than its counts and lengths say",
                bad.wrapping_sub(base.addr())
            )
        })
    };
    if let Some(e) = past_end(0, 4, "the pair count") {
        out.framing = Some(e);
        return out;
    }
    // SAFETY: the first int32 of a non-NULL metadata string is its count
    // (its 4 bytes were found readable just above).
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
    out.no_pairs = count == 0;
    let mut pos: usize = 4;
    for pair in 0..count {
        for what in ["key", "value"] {
            let Some(next) = pos.checked_add(4).filter(|&e| e <= isize::MAX as usize) else {
                return out;
            };
            if let Some(e) = past_end(pos, 4, &format!("pair {pair}: the {what} length")) {
                out.framing = Some(e);
                return out;
            }
            // SAFETY: the encoding promises an int32 length at `pos` (every
            // earlier length was within bounds and was skipped over), and
            // its 4 bytes were found readable just above.
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
            if let Some(e) = past_end(
                next,
                len as usize,
                &format!("pair {pair}: the {what} ({len} bytes)"),
            ) {
                out.framing = Some(e);
                return out;
            }
            // SAFETY: the encoding promises `len` bytes after the length,
            // whose first and last were found readable just above; `end` is
            // within isize::MAX of the base.
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

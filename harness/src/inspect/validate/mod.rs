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
//! checked. Before reading a buffer it probes the first and last byte the
//! layout needs (`abi::hostmem::unreadable_end`, one system call): a buffer
//! that ends at the end of a mapping before that is reported
//! (array.layout.lengths), not read. What it cannot see is a buffer too
//! short whose next bytes happen to be mapped; reading those is harmless to
//! the reader, and a pointer into nowhere mid-range crashes the process
//! running the validator (the harness runs it in a worker for that reason).
//!
//! Performance: bitmaps are counted a 64-bit word at a time (with AVX2 and
//! POPCNT where the CPU has them), and offsets, type ids, indices and views
//! are scanned as byte slices in blocks whose fast path has no branches.

use std::ffi::{c_char, c_void, CStr};
use std::fmt;

use super::format::{self, shown, BufferShape, Format, TimeUnit, UnionMode};
use crate::abi::{
    is_poison_ptr, ArrowArray, ArrowSchema, ARROW_FLAG_DICTIONARY_ORDERED,
    ARROW_FLAG_MAP_KEYS_SORTED, ARROW_FLAG_NULLABLE,
};

/// The rule IDs this module reports (see `shared/RULES.md`).
pub mod rule {
    pub const SCHEMA_FORMAT_NON_NULL: &str = crate::rule!("schema.format.non-null");
    pub const SCHEMA_FORMAT_VALID: &str = crate::rule!("schema.format.valid");
    pub const SCHEMA_CHILDREN_COUNT: &str = crate::rule!("schema.children.count");
    pub const SCHEMA_MAP_ENTRIES: &str = crate::rule!("schema.map.entries");
    pub const SCHEMA_MAP_NON_NULLABLE: &str = crate::rule!("schema.map.non-nullable");
    pub const SCHEMA_REE_RUN_ENDS: &str = crate::rule!("schema.ree.run-ends");
    pub const SCHEMA_REE_RUN_ENDS_FLAG: &str = crate::rule!("schema.ree.run-ends-flag");
    pub const SCHEMA_DICTIONARY_SHAPE: &str = crate::rule!("schema.dictionary.shape");
    pub const SCHEMA_FLAGS_KNOWN: &str = crate::rule!("schema.flags.known");
    pub const SCHEMA_FLAGS_PLACEMENT: &str = crate::rule!("schema.flags.placement");
    pub const SCHEMA_METADATA_ENCODING: &str = crate::rule!("schema.metadata.encoding");
    pub const SCHEMA_METADATA_UTF8: &str = crate::rule!("schema.metadata.utf8");
    pub const SCHEMA_METADATA_NULL_IF_OMITTED: &str =
        crate::rule!("schema.metadata.null-if-omitted");
    pub const SCHEMA_NAME_UTF8: &str = crate::rule!("schema.name.utf8");
    pub const SCHEMA_RELEASE_SET: &str = crate::rule!("schema.release.set");
    pub const SCHEMA_RELEASE_RELOCATABLE: &str = crate::rule!("schema.release.relocatable");
    pub const ARRAY_RELEASE_SET: &str = crate::rule!("array.release.set");
    pub const ARRAY_RELEASE_RELOCATABLE: &str = crate::rule!("array.release.relocatable");
    pub const ARRAY_N_BUFFERS: &str = crate::rule!("array.layout.n-buffers");
    pub const ARRAY_N_CHILDREN: &str = crate::rule!("array.layout.n-children");
    pub const ARRAY_NULL_BUFFER: &str = crate::rule!("array.layout.null-buffer");
    pub const ARRAY_LENGTHS: &str = crate::rule!("array.layout.lengths");
    pub const ARRAY_NULL_COUNT: &str = crate::rule!("array.null-count");
    pub const ARRAY_UNION_NULL_COUNT: &str = crate::rule!("array.union.null-count");
    pub const ARRAY_BUFFERS_ALIGNED: &str = crate::rule!("array.buffers.aligned");
    pub const ARRAY_OFFSETS_VALID: &str = crate::rule!("array.offsets.valid");
    pub const ARRAY_UNION_TYPE_IDS: &str = crate::rule!("array.union.type-ids");
    pub const ARRAY_REE_RUN_ENDS: &str = crate::rule!("array.ree.run-ends");
    pub const ARRAY_REE_NULL_COUNT: &str = crate::rule!("array.ree.null-count");
    pub const ARRAY_VIEW_SIZES: &str = crate::rule!("array.view.sizes");
    pub const ARRAY_VIEW_PREFIX: &str = crate::rule!("array.view.prefix");
    pub const ARRAY_VIEW_INLINE_PADDING: &str = crate::rule!("array.view.inline-padding");
    pub const ARRAY_DICTIONARY_PRESENT: &str = crate::rule!("array.dictionary.present");
    pub const ARRAY_DICTIONARY_INDICES: &str = crate::rule!("array.dictionary.indices");
    pub const ARRAY_UTF8_VALID: &str = crate::rule!("array.utf8.valid");
    pub const ARRAY_DECIMAL_PRECISION: &str = crate::rule!("array.decimal.precision");
    pub const ARRAY_DATE64_DAYS: &str = crate::rule!("array.date64.days");
    pub const ARRAY_TIME_RANGE: &str = crate::rule!("array.time.range");
    pub const ARRAY_UNION_OFFSETS_ORDERED: &str = crate::rule!("array.union.offsets-ordered");
    pub const ARRAY_MAP_KEYS_NON_NULL: &str = crate::rule!("array.map.keys-non-null");

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
        SCHEMA_METADATA_NULL_IF_OMITTED,
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
        ARRAY_UTF8_VALID,
        ARRAY_DECIMAL_PRECISION,
        ARRAY_DATE64_DAYS,
        ARRAY_TIME_RANGE,
        ARRAY_UNION_OFFSETS_ORDERED,
        ARRAY_MAP_KEYS_NON_NULL,
    ];
}

use rule::*;

mod binary;
mod buffers;
mod dictionary;
mod lists;
mod nested;
mod run_end;
mod scan;
mod schema;
mod union;
mod values;
mod views;
use buffers::*;
use scan::*;
use schema::*;
pub use schema::{metadata_problems, validate_schema, MetadataProblems};

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
    crate::abi::outslot::inside(start, size, p)
}

/// Of `pointers` (what, address), those that point inside the structure
/// of type `T` at `node`, in words ("pointer members ... MUST not point
/// inside the structure itself": they dangle once the structure is moved).
fn pointers_inside<T>(
    node: &T,
    structure: &str,
    pointers: impl IntoIterator<Item = (String, usize)>,
) -> Vec<String> {
    let start = (node as *const T).addr();
    let size = std::mem::size_of::<T>();
    pointers
        .into_iter()
        .filter_map(|(what, p)| {
            inside(start, size, p).map(|d| {
                format!("{what} points {d} bytes into the {structure} structure itself, which may be moved")
            })
        })
        .collect()
}

/// The pointer members of a schema node that point inside the node itself.
pub fn schema_self_refs(s: &ArrowSchema) -> Vec<String> {
    let members = [
        ("format", s.format.addr()),
        ("name", s.name.addr()),
        ("metadata", s.metadata.addr()),
        ("children", s.children.addr()),
        ("dictionary", s.dictionary.addr()),
        ("private_data", s.private_data.addr()),
    ];
    pointers_inside(s, "ArrowSchema", members.map(|(w, p)| (w.to_string(), p)))
}

/// The same for an array node's pointer members.
pub fn array_member_self_refs(a: &ArrowArray) -> Vec<String> {
    let members = [
        ("buffers", a.buffers.addr()),
        ("children", a.children.addr()),
        ("dictionary", a.dictionary.addr()),
        ("private_data", a.private_data.addr()),
    ];
    pointers_inside(a, "ArrowArray", members.map(|(w, p)| (w.to_string(), p)))
}

/// The buffer pointers of an array node that point inside the node.
fn buffer_self_refs(a: &ArrowArray, ptrs: &[*const c_void]) -> Vec<String> {
    let buffers = ptrs
        .iter()
        .enumerate()
        .map(|(i, p)| (format!("buffers[{i}]"), p.addr()));
    pointers_inside(a, "ArrowArray", buffers)
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

/// The lengths step of [`check_array`]: length and offset non-negative,
/// null_count in range, offset + length without overflow. Returns
/// `(offset, length, offset + length)` when the lengths are usable.
fn check_lengths(a: &ArrowArray, at: &str, sink: &mut Sink) -> Option<(usize, usize, usize)> {
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
    range
}

/// The buffers step of [`check_array`]: `n_buffers` as the format has it,
/// and a readable buffers array with no poison pointer. Returns the buffer
/// pointers (empty when they may not be read) and whether the buffers may
/// be read at all.
///
/// # Safety
/// `a` is a readable array whose `buffers`, when usable, points to
/// `n_buffers` pointers.
unsafe fn check_buffer_pointers<'a>(
    a: &'a ArrowArray,
    fmt: &Format,
    at: &str,
    sink: &mut Sink,
) -> (&'a [*const c_void], bool) {
    let nb = a.n_buffers;
    let mut buffers_ok = true;
    match format::n_buffers(fmt) {
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
    (ptrs, buffers_ok)
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
    let range = check_lengths(a, at, sink);
    // SAFETY: a readable array (caller).
    let (ptrs, buffers_ok) = unsafe { check_buffer_pointers(a, &fmt, at, sink) };
    // SAFETY: readable schema and array (caller).
    let kids = unsafe { check_children(s, a, at, depth, sink) };
    // SAFETY: readable schema and array (caller).
    let dict = unsafe { check_dictionary(s, a, at, depth, sink) };

    let (offset, length, end) = range?;
    let mut info = ArrayInfo {
        format: fmt.clone(),
        length,
        offset,
        null_count: a.null_count,
        validity: std::ptr::null(),
        data: None,
        children: Vec::new(),
    };
    let node = Node {
        at,
        offset,
        length,
        end,
    };
    check_null_count_without_bitmap(&fmt, a.length, a.null_count, at, sink);
    // Children length rules that need no buffer.
    node.child_lengths(&fmt, &kids, sink);

    if !buffers_ok {
        info.children = kids;
        return Some(info);
    }
    let bufs = Buffers::new(ptrs, at);
    for problem in buffer_self_refs(a, ptrs) {
        sink.push(ARRAY_RELEASE_RELOCATABLE, at, problem);
    }
    check_alignment(&fmt, ptrs, at, sink);
    // SAFETY: the layout checked out (check_buffer_pointers), so a
    // non-NULL validity bitmap holds offset + length bits.
    let validity = unsafe { node.validity(&fmt, &bufs, a.length, a.null_count, &mut info, sink) };
    // SAFETY: as above: each non-NULL buffer of this node holds what
    // offset + length imply for the format.
    unsafe { node.contents(&fmt, &bufs, &kids, dict.as_ref(), validity, &mut info, sink) };
    info.children = kids;
    Some(info)
}

/// The children step: `n_children` against the schema, and each child
/// checked in turn (`None` for a child that could not be followed).
///
/// # Safety
/// `s` and `a` are readable; their children pointers are followed only
/// when usable, and then must point to readable structures.
unsafe fn check_children(
    s: &ArrowSchema,
    a: &ArrowArray,
    at: &str,
    depth: usize,
    sink: &mut Sink,
) -> Vec<Option<ArrayInfo>> {
    // SAFETY: readable schema; schema_children checks the pointer.
    let schema_kids = unsafe { schema_children(s) };
    let (sn, an) = (s.n_children, a.n_children);
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
        return kids;
    }
    if an == 0 {
        return kids;
    }
    if let Some(why) = unusable(a.children.cast_const()) {
        sink.push(
            ARRAY_N_CHILDREN,
            at,
            format!("n_children is {an} but the children pointer is {why}"),
        );
        return kids;
    }
    // SAFETY: usable pointer to n_children (bounded) pointers.
    let cps = unsafe { std::slice::from_raw_parts(a.children.cast_const(), an as usize) };
    kids.reserve(cps.len());
    for (i, &cp) in cps.iter().enumerate() {
        let child_at = format!("{at}.children[{i}]");
        let sc = schema_kids.and_then(|k| k.get(i).copied());
        // SAFETY: both pointers are checked before use.
        let info = unsafe { visit_array(sc, cp, &child_at, "children", i, at, depth, sink) };
        kids.push(info);
    }
    kids
}

/// The dictionary step: the array has a dictionary exactly when its schema
/// does, and the dictionary is checked against the schema's.
///
/// # Safety
/// `s` and `a` are readable; their dictionary pointers are followed only
/// when usable, and then must point to readable structures.
unsafe fn check_dictionary(
    s: &ArrowSchema,
    a: &ArrowArray,
    at: &str,
    depth: usize,
    sink: &mut Sink,
) -> Option<ArrayInfo> {
    match (!s.dictionary.is_null(), a.dictionary.is_null()) {
        (false, true) => None,
        (false, false) => {
            sink.push(
                ARRAY_DICTIONARY_PRESENT,
                at,
                "dictionary is set but the schema has no dictionary",
            );
            None
        }
        (true, true) => {
            sink.push(
                ARRAY_DICTIONARY_PRESENT,
                at,
                "the schema has a dictionary but the array's dictionary is NULL",
            );
            None
        }
        (true, false) => {
            if let Some(why) = unusable(a.dictionary.cast_const()) {
                sink.push(
                    ARRAY_DICTIONARY_PRESENT,
                    at,
                    format!("dictionary pointer is {why}"),
                );
                return None;
            }
            let dict_at = format!("{at}.dictionary");
            // SAFETY: both pointers are checked before use.
            unsafe {
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
            }
        }
    }
}

/// Null counts of types without a validity bitmap (no buffer reads).
fn check_null_count_without_bitmap(fmt: &Format, len: i64, nc: i64, at: &str, sink: &mut Sink) {
    let found = match fmt {
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
    if let Some((rule, message)) = found {
        sink.push(rule, at, message);
    }
}

/// Alignment (a recommendation): each non-NULL buffer at a multiple of the
/// alignment of the C type the layout stores in it.
fn check_alignment(fmt: &Format, ptrs: &[*const c_void], at: &str, sink: &mut Sink) {
    for (i, p) in ptrs.iter().enumerate() {
        let align = format::buffer_alignment(fmt, i, ptrs.len());
        if !p.is_null() && p.addr() % align != 0 {
            sink.push(
                ARRAY_BUFFERS_ALIGNED,
                at,
                format!(
                    "buffers[{i}] ({}) is at {:#x}, not a multiple of {align}",
                    format::buffer_name(fmt, i, ptrs.len()),
                    p.addr()
                ),
            );
        }
    }
}

impl Node<'_> {
    /// The validity step: a NULL bitmap only when nothing is null, and the
    /// null count against the bitmap's zero bits. Returns the bitmap bytes
    /// covering the node and the bit offset of its first slot.
    ///
    /// # Safety
    /// The node's layout checked out: a non-NULL validity buffer holds
    /// offset + length bits.
    unsafe fn validity<'b>(
        &self,
        fmt: &Format,
        bufs: &'b Buffers<'_>,
        len: i64,
        nc: i64,
        info: &mut ArrayInfo,
        sink: &mut Sink,
    ) -> Option<(&'b [u8], usize)> {
        let vi = format::validity_buffer(fmt)?;
        let (at, offset, length, end) = (self.at, self.offset, self.length, self.end);
        let required = bitmap_bytes(end);
        let p = *bufs.ptrs.get(vi)?;
        if p.is_null() {
            if nc != 0 && required > 0 {
                sink.push(
                    ARRAY_NULL_BUFFER,
                    at,
                    format!(
                        "buffers[{vi}] (validity) is NULL but null_count is {nc}; it may be NULL only when null_count is 0"
                    ),
                );
            }
            return None;
        }
        info.validity = p.cast::<u8>();
        // SAFETY: non-NULL validity bitmap, which must hold offset + length
        // bits; only bytes covering [offset, end) are read.
        let bytes = unsafe { bufs.region(vi, "validity", required, offset / 8, required, sink) }?;
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
        Some((bytes, offset % 8))
    }

    /// The contents step: each layout family's own checks (offsets, views,
    /// type ids, dictionary indices, run ends).
    ///
    /// # Safety
    /// Every call below reads buffers of this node only: its layout checked
    /// out (n_buffers, no poison pointers, lengths non-negative without
    /// overflow), so each non-NULL buffer holds what offset + length imply
    /// for the format, and the helpers read no more than that.
    #[allow(clippy::too_many_arguments)]
    unsafe fn contents(
        &self,
        fmt: &Format,
        bufs: &Buffers<'_>,
        kids: &[Option<ArrayInfo>],
        dict: Option<&ArrayInfo>,
        validity: Option<(&[u8], usize)>,
        info: &mut ArrayInfo,
        sink: &mut Sink,
    ) {
        let end = self.end;
        match fmt {
            Format::Null | Format::Struct | Format::RunEndEncoded | Format::FixedSizeList(_) => {}
            Format::Boolean => {
                bufs.present(1, "values", bitmap_bytes(end), sink);
            }
            // SAFETY: see above: buffer 1 holds end + 1 int32 offsets.
            Format::Binary => unsafe { self.binary::<i32>(bufs, None, sink) },
            // SAFETY: as above.
            Format::Utf8 => unsafe { self.binary::<i32>(bufs, Some(validity), sink) },
            // SAFETY: see above: buffer 1 holds end + 1 int64 offsets.
            Format::LargeBinary => unsafe { self.binary::<i64>(bufs, None, sink) },
            // SAFETY: as above.
            Format::LargeUtf8 => unsafe { self.binary::<i64>(bufs, Some(validity), sink) },
            // SAFETY: see above: buffer 1 holds end + 1 int32 offsets.
            Format::List => unsafe { self.list::<i32>(bufs, kids.first(), sink) },
            // SAFETY: see above: buffer 1 holds end + 1 int32 offsets; the
            // children were checked by check_array.
            Format::Map => unsafe {
                self.list::<i32>(bufs, kids.first(), sink);
                self.map_keys(bufs, validity, kids.first(), sink);
            },
            // SAFETY: see above: buffer 1 holds end + 1 int64 offsets.
            Format::LargeList => unsafe { self.list::<i64>(bufs, kids.first(), sink) },
            // SAFETY: see above: buffers 1 and 2 hold end int32 offsets / sizes.
            Format::ListView => unsafe { self.list_view::<i32>(bufs, kids.first(), sink) },
            // SAFETY: see above: buffers 1 and 2 hold end int64 offsets / sizes.
            Format::LargeListView => unsafe { self.list_view::<i64>(bufs, kids.first(), sink) },
            // SAFETY: see above: type ids (and dense offsets) for end slots.
            Format::Union(mode, ids) => unsafe { self.union(*mode, ids, bufs, kids, sink) },
            // SAFETY: see above: end views, the sizes buffer, and variadic
            // buffers as large as it says.
            Format::BinaryView => unsafe { self.views(bufs, validity, false, sink) },
            // SAFETY: as above.
            Format::Utf8View => unsafe { self.views(bufs, validity, true, sink) },
            f => {
                let Some(width) = format::byte_width(f) else {
                    return;
                };
                let Some(required) = bytes_for(end, width) else {
                    sink.push(
                        ARRAY_LENGTHS,
                        self.at,
                        format!("offset + length = {end} values of {width} bytes exceed the address space"),
                    );
                    return;
                };
                if bufs.present(1, "values", required, sink) {
                    info.data = bufs.ptrs.get(1).map(|p| p.cast::<u8>());
                    match dict {
                        // SAFETY: see above: buffer 1 holds end indices of
                        // `width` bytes (non-NULL unless that is 0 bytes,
                        // checked just above).
                        Some(d) => unsafe {
                            self.dictionary_indices(f, bufs, width, validity, d, sink)
                        },
                        // SAFETY: as above, end values of `width` bytes.
                        None => unsafe { self.fixed_values(f, bufs, width, validity, sink) },
                    }
                }
            }
        }
        if *fmt == Format::RunEndEncoded {
            // SAFETY: the children were checked by check_array, and their
            // data pointers are set only when readable.
            unsafe { self.run_ends(kids, sink) };
        }
    }
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

#[cfg(test)]
mod tests;

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

mod scan;
mod schema;
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

#[cfg(test)]
mod tests;

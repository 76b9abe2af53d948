//! The validate oracle: the harness's validator against arrow-rs.
//!
//! Input layout: a batch byte, an encoding byte (plain, or varied with a
//! seed from the next 8 bytes), a mutation count and that many 8-byte
//! mutations, then the scenario ([`super::input`]).
//!
//! The scenario's batch is encoded the way certification hands data to
//! consumers (`export::encode`: offsets, NULL buffers, garbage under
//! nulls, ...), then mutated: lengths, offsets, null counts, flags, format
//! strings, metadata, buffer bytes and words, NULL buffers, buffer and
//! child counts, dictionaries. The result is made memory-sound
//! ([`sound`]): every pointer is live, and every buffer holds at least
//! what the structure claims for its type, offset and length (the data
//! buffer as far as the offsets reach, each variadic buffer as far as its
//! views and declared size reach). Everything else is arbitrary.
//!
//! The harness's validator (`inspect::validate`) and arrow-rs (`from_ffi`
//! then `ArrayData::validate_full`) must then agree:
//!
//! - the harness finds no MUST violation, but arrow-rs rejects: a finding
//!   (`fuzz.validate.arrow-rs-rejects`), unless arrow-rs's reason is one of
//!   [`ARROW_RS_STRICTER`], the checks arrow-rs makes beyond the C data
//!   interface's rules;
//! - the harness finds a MUST violation of a rule arrow-rs also enforces
//!   ([`ENFORCED_BY_ARROW_RS`]), but arrow-rs accepts: a finding under that
//!   rule's ID.
//!
//! Every exemption is data in this file, with the reason next to it.

#![forbid(unsafe_code)]

use std::time::Instant;

use arbitrary::Unstructured;

use super::{input, Outcome};
use crate::abi::ops::Owned;
use crate::export::{encode, Encoding, Ledger, Node, SchemaNode};
use crate::inspect::format::{self, BufferShape, Format, UnionMode};
use crate::inspect::{probe, Violation};
use crate::report::{RuleViolation, Verdict};
use crate::rules;

/// At most this many elements (offset + length) per node are made sound;
/// longer nodes make the input [`Outcome::Ignored`].
pub const MAX_ELEMENTS: i64 = 1 << 16;
/// At most this many bytes per buffer.
pub const MAX_BYTES: usize = 1 << 22;
/// At most this many mutations per input.
pub const MAX_MUTATIONS: usize = 8;

/// The harness rules whose violations arrow-rs's import and full
/// validation also reject. A MUST violation of any other rule (flags,
/// metadata encoding, null counts, NULL names) is one arrow-rs does not
/// check, so its acceptance there is no disagreement.
pub const ENFORCED_BY_ARROW_RS: &[&str] = &[
    crate::rule!("schema.format.non-null"),
    crate::rule!("schema.format.valid"),
    crate::rule!("schema.children.count"),
    crate::rule!("array.layout.n-buffers"),
    crate::rule!("array.layout.n-children"),
    crate::rule!("array.layout.lengths"),
    crate::rule!("array.offsets.valid"),
    crate::rule!("array.union.type-ids"),
    crate::rule!("array.ree.run-ends"),
    crate::rule!("array.view.sizes"),
    crate::rule!("array.view.prefix"),
    crate::rule!("array.view.inline-padding"),
    crate::rule!("array.dictionary.present"),
    crate::rule!("array.dictionary.indices"),
    crate::rule!("array.utf8.valid"),
];

/// Rules of [`ENFORCED_BY_ARROW_RS`] below MUST whose findings arrow-rs's
/// acceptance still contradicts: arrow-rs's validate_full checks every
/// utf8 value, so a non-null value the harness finds not UTF-8 must make
/// it reject.
pub const ENFORCED_AT_EVERY_LEVEL: &[&str] = &[crate::rule!("array.utf8.valid")];

/// arrow-rs's reasons for rejecting what the C data interface allows (a
/// substring of its error), each with why it is not a disagreement: checks
/// beyond the C data interface's rules, and one known arrow-rs bug.
pub const ARROW_RS_STRICTER: &[(&str, &str)] = &[
    (
        "is larger than values length 0",
        "a known arrow-rs 60.1.0 bug, not a stricter rule: its import sizes the data buffer of \
         an empty (length 0) binary or utf8 array as 0 bytes whatever the offsets say, then \
         rejects a first offset above 0, which a valid empty slice may have (\"*Generally* the \
         first slot in the offsets array is 0\", Columnar.rst); the harness works around it \
         when it imports (abi::arrow_rs::repair_empty_bytes)",
    ),
    (
        "run_ends array length should be the same as values array length",
        "arrow-rs wants a run-end encoded array's values exactly as long as its run ends; \
         Columnar.rst asks for no such thing and Arrow C++'s full validation accepts longer \
         values (it rejects only shorter ones, which the harness reports too)",
    ),
    (
        "non-nullable child",
        "arrow-rs rejects nulls in a struct child whose field is not flagged nullable; \
         ARROW_FLAG_NULLABLE says whether a field is semantically nullable, and neither the C \
         data interface nor Arrow C++'s and nanoarrow's full validation reject data by it",
    ),
    (
        "contains nulls",
        "the same nullability check on other nested types",
    ),
    (
        "The Union type requires an integer type id",
        "arrow-rs cannot import a union with no children: its own export writes such a type \
         as \"+us:\" (the id list empty, as the format's \"+us:I,J,...\" gives for no ids) and \
         its import then fails parsing the empty list",
    ),
    (
        "The nullable should be set to false for the field defining run_ends",
        "arrow-rs refuses a run-end encoded type whose run_ends field is flagged nullable; \
         Columnar.rst says only that \"A run end cannot be null\" (the values), so the harness \
         reports the flag at SHOULD (schema.ree.run-ends-flag, inferred) and reads on: a \
         SHOULD finding is no MUST disagreement (found by CI's fuzz smoke)",
    ),
    (
        "The nullable should be set to false for the map entries field",
        "the same for a map's entries struct: the C data interface states no nullability for \
         it, so the harness reports the flag at SHOULD (schema.map.non-nullable, inferred)",
    ),
    (
        "Map key field must not be nullable",
        "the same for a map's key field (schema.map.non-nullable, SHOULD, inferred from \
         Schema.fbs, which the C data interface does not restate)",
    ),
    (
        "requires an integer scale",
        "arrow-rs holds a decimal's scale in an i8 and refuses any other; Schema.fbs declares \
         the scale an `int` (32 bits) and Arrow C++ takes any int32, so \"d:7,-2032\" is a valid \
         format beyond arrow-rs's data model",
    ),
];

/// Harness violations that arrow-rs tolerates on purpose (a rule and a
/// substring of the harness's message), each with why its acceptance there
/// is no disagreement.
pub const ARROW_RS_LENIENT: &[(&str, &str, &str)] = &[
    (
        crate::rule!("array.layout.n-buffers"),
        "has 1 buffer(s) but n_buffers is 0",
        "arrow-rs reads n_buffers 0 as \"no validity bitmap\" for types whose only buffer is \
     the bitmap (struct, fixed-size list); CDataInterface.rst says n_buffers is a function \
     of the data type, so the harness is right to report it, and arrow-rs's import is \
     lenient there by design",
    ),
    (
        crate::rule!("schema.format.valid"),
        "is outside 1..=",
        "arrow-rs takes a decimal's precision as the format gives it (its Decimal types hold \
         any u8 precision, and validate_full does not check values against it); Schema.fbs \
         bounds the precision by the bit width, which the harness checks",
    ),
    (
        crate::rule!("array.ree.run-ends"),
        "run ends have null_count",
        "the harness judges the exported null_count member, which arrow-rs's import ignores \
         (it counts the validity bitmap instead): a wrong null_count is not something arrow-rs \
         can see",
    ),
];

/// A child count above what the type has, on a type other than struct and
/// union: arrow-rs's import reads the children a type has and never looks
/// at the rest (its struct and union imports do compare the counts), so
/// surplus children there are a harness verdict arrow-rs cannot share.
fn surplus_children(v: &Violation) -> bool {
    if ![
        crate::rule!("schema.children.count"),
        crate::rule!("array.layout.n-children"),
    ]
    .contains(&v.rule)
    {
        return false;
    }
    let numbers: Vec<i64> = v
        .message
        .split(|c: char| !c.is_ascii_digit() && c != '-')
        .filter_map(|w| w.parse().ok())
        .collect();
    let structural = v.message.contains("\"+s\"") || v.message.contains("\"+u");
    matches!(numbers[..], [.., want, got] if got > want) && !structural
}

/// A number in a format string written with a leading `+` (`"w:+2"`,
/// `"d:+5,2"`, `"+ud:+1"`): arrow-rs parses format parameters with Rust's
/// `str::parse`, which takes the sign; Arrow C++'s `ParseValue` does not,
/// so the harness reports it (schema.format.valid) as a string other
/// consumers refuse, and arrow-rs's acceptance is no disagreement.
fn plus_signed_number(v: &Violation) -> bool {
    v.rule == crate::rule!("schema.format.valid")
        && v.message
            .match_indices("\"+")
            .any(|(i, m)| v.message[i + m.len()..].starts_with(|c: char| c.is_ascii_digit()))
}

/// One mutation: an operation and its operands, read as 8 raw bytes.
#[derive(Debug, Clone, Copy)]
struct Mutation {
    op: u8,
    node: u8,
    a: u8,
    b: u8,
    v: i32,
}

/// Checks one input.
pub fn check(data: &[u8]) -> Outcome {
    let tag = input::tag(data);
    let mut u = Unstructured::new(data);
    let batch_pick = u.arbitrary::<u8>().unwrap_or(0) as usize;
    let enc = if u.arbitrary::<u8>().unwrap_or(0) & 1 == 0 {
        Encoding::Plain
    } else {
        Encoding::Varied(u.arbitrary::<u64>().unwrap_or(0))
    };
    let n = u.arbitrary::<u8>().unwrap_or(0) as usize % (MAX_MUTATIONS + 1);
    let mut mutations = Vec::with_capacity(n);
    for _ in 0..n {
        let mut m = [0u8; 8];
        if u.fill_buffer(&mut m).is_err() {
            break;
        }
        mutations.push(Mutation {
            op: m[0],
            node: m[1],
            a: m[2],
            b: m[3],
            v: i32::from_le_bytes([m[4], m[5], m[6], m[7]]),
        });
    }
    let scenario = match input::scenario(u, &tag, false) {
        Ok(s) => s,
        Err(why) => return Outcome::Ignored(why),
    };
    if scenario.batches.is_empty() {
        return Outcome::Ignored("no batch to validate".into());
    }
    let bi = batch_pick % scenario.batches.len();
    let (mut schema, mut array) = match (
        encode::schema(&scenario.schema, enc),
        encode::batch(&scenario.batches[bi], enc, bi as u64 + 1),
    ) {
        (Ok(s), Ok(a)) => (s, a),
        (Err(why), _) | (_, Err(why)) => return Outcome::Ignored(why),
    };
    let mut applied = Vec::new();
    for m in &mutations {
        if let Some(what) = mutate(&mut schema, &mut array, m) {
            applied.push(what);
        }
    }
    if let Err(why) = sound(Some(&schema), &mut array) {
        return Outcome::Ignored(why);
    }
    let start = Instant::now();
    let (harness, arrow_rs) = if negative(&array) || short_views(Some(&schema), &array) {
        // arrow-rs's import sizes its reads by `length` and `offset` before
        // it validates anything (a negative length read as a huge usize
        // sends `NullBuffer::new` counting bits far past the bitmap: seen
        // as a SEGV under ASan), and it takes a view array's variadic
        // buffer count as n_buffers - 3 in unsigned arithmetic (an abort
        // when there are fewer than 3), so such trees are judged by the
        // harness alone, which must reject them.
        let (found, _) = judge_with(&schema, &array, false);
        (found, Err(NEGATIVE.to_string()))
    } else {
        judge(&schema, &array)
    };
    let id = format!(
        "validate/{}/batch:{bi}/{}/{}",
        scenario.name,
        enc.name(),
        if applied.is_empty() {
            "unmutated".to_string()
        } else {
            applied.join(",")
        }
    );
    let mut case = crate::roundtrip::not_run(
        &id,
        "validate",
        &scenario,
        Some(bi),
        None,
        &super::cases::replay_prefix(super::Target::Validate),
    );
    case.duration_us = start.elapsed().as_micros() as u64;
    case.checked = vec!["fuzz.validate.agrees-with-arrow-rs".into()];
    case.differences = harness
        .iter()
        .take(10)
        .map(|v| format!("harness: {v}"))
        .chain(std::iter::once(match &arrow_rs {
            Ok(()) => "arrow-rs: accepted".to_string(),
            Err(e) => format!("arrow-rs: {e}"),
        }))
        .collect();
    let arrow_rs = match arrow_rs {
        Err(e) if empty_offsets(Some(&schema), &array) && e.contains("offset") => {
            Err(format!("{EMPTY_OFFSETS}: {e}"))
        }
        Err(e)
            if (e.contains("non-zero padding")
                || e.contains("embedded prefix")
                || e.contains("Invalid buffer index")
                || e.contains("Invalid buffer slice"))
                && null_view_garbage(Some(&schema), &array) =>
        {
            Err(format!("{NULL_VIEWS}: {e}"))
        }
        Err(e)
            if (e.contains("Invalid UTF8") || e.contains("utf-8") || e.contains("UTF-8"))
                && null_utf8_garbage(Some(&schema), &array) =>
        {
            Err(format!("{NULL_UTF8}: {e}"))
        }
        other => other,
    };
    case.violations = disagreements(&harness, &arrow_rs);
    (case.verdict, case.message) = if case.violations.is_empty() {
        (Verdict::Pass, None)
    } else {
        (
            Verdict::Fail,
            Some("the harness's validator and arrow-rs disagree".into()),
        )
    };
    Outcome::Checked(Box::new(case))
}

/// How an arrow-rs rejection of an empty array's offsets begins: no
/// disagreement ([`empty_offsets`]).
pub const EMPTY_OFFSETS: &str = "arrow-rs read the offsets of an empty array, which the harness \
    does not read";

/// Does the tree hold an empty (offset 0, length 0) offsets-based array
/// (binary, utf8, list, map and their large forms) whose one offset
/// arrow-rs rejects (negative, or past a list's child)?
///
/// The harness reads no offset of such an array: it accepts a NULL
/// offsets buffer there (CDataInterface.rst lets a buffer be NULL "if the
/// size in bytes of the corresponding buffer would be 0", and Arrow C++ and
/// nanoarrow read an empty array's offsets as that case), so a non-NULL
/// one may point at zero bytes and reading its one offset could read past
/// an allocation. arrow-rs reads that offset and rejects a negative one or
/// one past the values; that rejection is arrow-rs's own stricter reading,
/// not a disagreement on a rule the harness can check.
pub fn empty_offsets(schema: Option<&SchemaNode>, n: &Node) -> bool {
    any_node(schema, n, &|s, n| {
        let first = |w| word_at(n, 1, 0, w);
        let child_len = n.children.first().map_or(0, |c| c.length);
        n.length == 0
            && n.offset == 0
            && match format::parse(&s.format) {
                Ok(Format::Binary | Format::Utf8) => first(4).is_some_and(|o| o < 0),
                Ok(Format::LargeBinary | Format::LargeUtf8) => first(8).is_some_and(|o| o < 0),
                Ok(Format::List | Format::Map) => first(4).is_some_and(|o| o < 0 || o > child_len),
                Ok(Format::LargeList) => first(8).is_some_and(|o| o < 0 || o > child_len),
                _ => false,
            }
    })
}

/// How an arrow-rs rejection of a null slot's view begins: no
/// disagreement ([`null_view_garbage`]).
pub const NULL_VIEWS: &str = "arrow-rs checked the view of a null slot, which the harness \
    does not read";

/// Does a view array in the tree hold, under a null slot, a view whose
/// inline padding is not zero, whose buffer index or range is outside the
/// data buffers, or whose prefix is not its value's first bytes? The harness reads no view of a null slot (a null slot's value
/// is unspecified: array.view.prefix and array.view.inline-padding look at
/// non-null slots only), while arrow-rs's validation checks every view.
pub fn null_view_garbage(schema: Option<&SchemaNode>, n: &Node) -> bool {
    any_node(schema, n, &|s, n| {
        let view = matches!(
            format::parse(&s.format),
            Ok(Format::BinaryView | Format::Utf8View)
        );
        view && n.offset >= 0
            && n.length >= 0
            && (n.offset..n.offset + n.length).any(|slot| {
                let slot = slot as usize;
                let null = n
                    .buffers
                    .first()
                    .and_then(Option::as_ref)
                    .is_some_and(|bits| {
                        bits.get(slot / 8).is_some_and(|b| b >> (slot % 8) & 1 == 0)
                    });
                let Some(v) = n
                    .buffers
                    .get(1)
                    .and_then(Option::as_ref)
                    .and_then(|b| b.get(slot * 16..slot * 16 + 16))
                else {
                    return false;
                };
                let len = i32::from_le_bytes([v[0], v[1], v[2], v[3]]);
                let bad = if (0..=12).contains(&len) {
                    v[4 + len as usize..].iter().any(|&b| b != 0)
                } else {
                    // Out of line: the buffer index must name a data
                    // buffer (not the sizes buffer after them), the range
                    // must lie in it, and start with the prefix.
                    let idx = i32::from_le_bytes([v[8], v[9], v[10], v[11]]);
                    let off = i32::from_le_bytes([v[12], v[13], v[14], v[15]]);
                    let data_buffers = n.buffers.len().saturating_sub(3);
                    let data = usize::try_from(idx)
                        .ok()
                        .filter(|&i| i < data_buffers)
                        .and_then(|i| {
                            let start = usize::try_from(off).ok()?;
                            let end = start.checked_add(usize::try_from(len).ok()?)?;
                            n.buffers.get(i + 2)?.as_ref()?.get(start..end)
                        });
                    data.is_none_or(|d| d[..4] != v[4..8])
                };
                null && bad
            })
    })
}

/// How an arrow-rs rejection of a null slot's bytes as UTF-8 begins: no
/// disagreement ([`null_utf8_garbage`]).
pub const NULL_UTF8: &str = "arrow-rs checked the bytes of a null utf8 slot as UTF-8, which the \
    harness does not read";

/// Does a utf8, large utf8 or utf8 view node in the tree hold, under a null
/// slot, bytes that are not UTF-8? Columnar.rst: "Array slots which are null
/// are not required to have a particular value", so the harness judges
/// non-null values only (array.utf8.valid), while arrow-rs's validate_full
/// checks every slot's bytes, null or not.
pub fn null_utf8_garbage(schema: Option<&SchemaNode>, n: &Node) -> bool {
    any_node(schema, n, &|s, n| {
        let width = match format::parse(&s.format) {
            Ok(Format::Utf8) => 4,
            Ok(Format::LargeUtf8) => 8,
            Ok(Format::Utf8View) => 16,
            _ => return false,
        };
        if n.offset < 0 || n.length < 0 {
            return false;
        }
        let bits = n.buffers.first().and_then(Option::as_ref);
        (n.offset..n.offset + n.length).any(|slot| {
            let slot = slot as usize;
            let null =
                bits.is_some_and(|b| b.get(slot / 8).is_some_and(|b| b >> (slot % 8) & 1 == 0));
            if !null {
                return false;
            }
            let value: Option<&[u8]> = if width == 16 {
                let v = n
                    .buffers
                    .get(1)
                    .and_then(Option::as_ref)
                    .and_then(|b| b.get(slot * 16..slot * 16 + 16));
                v.and_then(|v| {
                    let len = usize::try_from(i32::from_le_bytes([v[0], v[1], v[2], v[3]])).ok()?;
                    if len <= 12 {
                        return v.get(4..4 + len);
                    }
                    let idx =
                        usize::try_from(i32::from_le_bytes([v[8], v[9], v[10], v[11]])).ok()?;
                    let off =
                        usize::try_from(i32::from_le_bytes([v[12], v[13], v[14], v[15]])).ok()?;
                    n.buffers
                        .get(idx + 2)?
                        .as_ref()?
                        .get(off..off.checked_add(len)?)
                })
            } else {
                let (s, e) = (word_at(n, 1, slot, width), word_at(n, 1, slot + 1, width));
                match (
                    s.and_then(|s| usize::try_from(s).ok()),
                    e.and_then(|e| usize::try_from(e).ok()),
                ) {
                    (Some(s), Some(e)) if s <= e => n
                        .buffers
                        .get(2)
                        .and_then(Option::as_ref)
                        .and_then(|d| d.get(s..e)),
                    _ => None,
                }
            };
            value.is_some_and(|v| std::str::from_utf8(v).is_err())
        })
    })
}

/// What stands in for arrow-rs's verdict on a tree with a negative length
/// or offset (arrow-rs is not run on those).
pub const NEGATIVE: &str = "not given to arrow-rs: a negative length or offset, or a view array \
     with fewer than 3 buffers, a NULL sizes buffer or a negative size";

/// Is any length or offset in the tree negative?
pub fn negative(n: &Node) -> bool {
    n.length < 0
        || n.offset < 0
        || n.children.iter().any(negative)
        || n.dictionary.as_deref().is_some_and(negative)
}

/// Does a binary or utf8 view node have fewer than the 3 buffers every
/// view array has (validity, views, variadic sizes), or a NULL sizes
/// buffer or a negative size while it has variadic buffers?
pub fn short_views(schema: Option<&SchemaNode>, n: &Node) -> bool {
    any_node(schema, n, &|s, n| {
        let view = matches!(
            format::parse(&s.format),
            Ok(Format::BinaryView | Format::Utf8View)
        );
        let nb = n.buffers.len();
        let short = nb < 3
        // arrow-rs reads the variadic sizes through a slice made from the
        // sizes buffer pointer: NULL there is undefined behaviour (a
        // debug-build abort) before anything is validated.
        || (nb > 3 && n.buffers.last().is_some_and(|b| b.is_none()))
        // It takes a negative size as a huge usize and makes a slice that
        // long over the data buffer (again undefined behaviour, a
        // debug-build abort; a release build then accepts the views).
        || (nb > 3 && (0..nb - 3).any(|k| word_at(n, nb - 1, k, 8).is_some_and(|w| w < 0)));
        view && short
    })
}

/// Does `pred` hold for any node of the tree (each array node with its
/// schema node; a node without one is skipped with everything under it)?
fn any_node(
    schema: Option<&SchemaNode>,
    n: &Node,
    pred: &dyn Fn(&SchemaNode, &Node) -> bool,
) -> bool {
    let Some(s) = schema else { return false };
    pred(s, n)
        || n.children
            .iter()
            .enumerate()
            .any(|(i, c)| any_node(s.children.get(i), c, pred))
        || n.dictionary
            .as_deref()
            .is_some_and(|d| any_node(s.dictionary.as_deref(), d, pred))
}

/// Both verdicts on one schema and array.
pub fn judge(schema: &SchemaNode, array: &Node) -> (Vec<Violation>, Result<(), String>) {
    judge_with(schema, array, true)
}

fn judge_with(
    schema: &SchemaNode,
    array: &Node,
    arrow_rs: bool,
) -> (Vec<Violation>, Result<(), String>) {
    let ledger = Ledger::new(false);
    let mut s = ledger.schema(schema, "schema");
    let mut a = ledger.array(array, "array");
    let mut found = probe::check_schema(s.get());
    if !crate::inspect::any_must(&found) {
        found.extend(probe::check_array(s.get(), a.get()));
    }
    let arrow_rs = if arrow_rs {
        let s: &crate::abi::ArrowSchema = s.get();
        probe::arrow_rs_verdict(s, a.get())
    } else {
        Err(NEGATIVE.to_string())
    };
    // Released through the ledger's own callbacks, so that it frees the
    // memory (it keeps what is still handed out).
    s.get().release();
    a.get().release();
    drop(ledger.finish());
    (found, arrow_rs)
}

fn is_must(v: &Violation) -> bool {
    rules::is_must(v.rule)
}

/// The disagreements between the two verdicts, as report violations.
pub fn disagreements(harness: &[Violation], arrow_rs: &Result<(), String>) -> Vec<RuleViolation> {
    let mut out = Vec::new();
    match arrow_rs {
        Err(e) if e == NEGATIVE && !harness.iter().any(is_must) => out.push(RuleViolation {
            rule: crate::rule!("array.layout.lengths").into(),
            level: "MUST".into(),
            at: "root".into(),
            evidence: "a length or offset in the tree is negative, or a view array has fewer than 3 buffers, a NULL sizes buffer or a negative size, and the harness's validator finds nothing wrong".into(),
        }),
        Err(e)
            if e == NEGATIVE
                || e.starts_with(EMPTY_OFFSETS)
                || e.starts_with(NULL_VIEWS)
                || e.starts_with(NULL_UTF8) => {}
        // A rejection that agrees with a finding of the harness at a level
        // below MUST (a view's prefix, SHOULD since the spec never says
        // "must" of it) is no disagreement either.
        // Nor is a rejection of what arrow-rs cannot read at all (names,
        // metadata or values that are not UTF-8), which the harness
        // reports below MUST (inspect::UNREADABLE_BY_ARROW_RS).
        Err(e)
            if !harness.iter().any(|v| {
                is_must(v)
                    || ENFORCED_BY_ARROW_RS.contains(&v.rule)
                    || crate::inspect::UNREADABLE_BY_ARROW_RS.contains(&v.rule)
            }) =>
        {
            if !ARROW_RS_STRICTER.iter().any(|(s, _)| e.contains(s)) {
                out.push(RuleViolation {
                    rule: "fuzz.validate.arrow-rs-rejects".into(),
                    level: "MUST".into(),
                    at: "root".into(),
                    evidence: format!(
                        "the harness's validator finds no MUST violation, arrow-rs rejects: {e}"
                    ),
                });
            }
        }
        Ok(()) => {
            // Children arrow-rs never reads: what is wrong below them is
            // invisible to it too.
            let unread: Vec<String> = harness
                .iter()
                .filter(|v| surplus_children(v))
                .map(|v| format!("{}.children", v.at))
                .collect();
            for v in harness
                .iter()
                .filter(|v| !unread.iter().any(|u| v.at.starts_with(u.as_str())))
                .filter(|v| {
                    (is_must(v) || ENFORCED_AT_EVERY_LEVEL.contains(&v.rule))
                        && ENFORCED_BY_ARROW_RS.contains(&v.rule)
                })
                .filter(|v| {
                    !ARROW_RS_LENIENT
                        .iter()
                        .any(|(r, m, _)| *r == v.rule && v.message.contains(m))
                        && !surplus_children(v)
                        && !plus_signed_number(v)
                })
            {
                out.push(RuleViolation {
                    rule: v.rule.to_string(),
                    level: if is_must(v) { "MUST" } else { "SHOULD" }.into(),
                    at: v.at.clone(),
                    evidence: format!(
                        "the harness's validator reports this, arrow-rs (from_ffi + validate_full) accepts the array: {}",
                        v.message
                    ),
                });
            }
        }
        Err(_) => {}
    }
    out
}

/// The formats a format mutation picks from.
const FORMATS: &[&str] = &[
    "n",
    "b",
    "c",
    "C",
    "s",
    "S",
    "i",
    "I",
    "l",
    "L",
    "e",
    "f",
    "g",
    "z",
    "Z",
    "u",
    "U",
    "vz",
    "vu",
    "d:10,2",
    "d:40,5,256",
    "d:9,2,32",
    "w:4",
    "w:0",
    "tdD",
    "tdm",
    "tts",
    "ttn",
    "tsu:UTC",
    "tDs",
    "tiM",
    "tin",
    "+l",
    "+L",
    "+w:2",
    "+s",
    "+m",
    "+ud:0,1",
    "+us:0,1",
    "+us:3",
    "+r",
    "+vl",
    "+vL",
    "",
    "x",
    "d:1",
    "+w:",
    "tsz:",
];

/// The `k`-th node pair (depth first, children then dictionary), wrapping.
fn nth<'a>(s: &'a mut SchemaNode, a: &'a mut Node, k: usize) -> (&'a mut SchemaNode, &'a mut Node) {
    let total = count(s, a);
    let mut k = k % total.max(1);
    nth_in(s, a, &mut k).expect("k < count")
}

fn count(s: &SchemaNode, a: &Node) -> usize {
    let mut n = 1;
    for (cs, ca) in s.children.iter().zip(&a.children) {
        n += count(cs, ca);
    }
    if let (Some(ds), Some(da)) = (&s.dictionary, &a.dictionary) {
        n += count(ds, da);
    }
    n
}

fn nth_in<'a>(
    s: &'a mut SchemaNode,
    a: &'a mut Node,
    k: &mut usize,
) -> Option<(&'a mut SchemaNode, &'a mut Node)> {
    if *k == 0 {
        return Some((s, a));
    }
    *k -= 1;
    for (cs, ca) in s.children.iter_mut().zip(a.children.iter_mut()) {
        if let Some(found) = nth_in(cs, ca, k) {
            return Some(found);
        }
    }
    if let (Some(ds), Some(da)) = (s.dictionary.as_deref_mut(), a.dictionary.as_deref_mut()) {
        return nth_in(ds, da, k);
    }
    None
}

/// Applies one mutation; returns its word for the case ID (None: it did
/// not apply).
fn mutate(schema: &mut SchemaNode, array: &mut Node, m: &Mutation) -> Option<String> {
    let k = m.node as usize;
    let (s, a) = nth(schema, array, k);
    match m.op % 16 {
        0..=2 => Some(mutate_counts(a, k, m)),
        3 | 4 | 13 => mutate_bytes(a, k, m),
        5..=9 | 14 => mutate_tree(s, a, k, m),
        _ => mutate_schema(s, k, m),
    }
}

/// Mutations 0 to 2: the array node's length, offset or null count, to
/// a value near the current one or any value at all.
fn mutate_counts(a: &mut Node, k: usize, m: &Mutation) -> String {
    let small = (m.b as i8) as i64;
    match m.op % 16 {
        0 => {
            a.length = if m.a & 1 == 0 {
                a.length + small
            } else {
                m.v as i64
            };
            format!("length@{k}={}", a.length)
        }
        1 => {
            a.offset = if m.a & 1 == 0 {
                a.offset + small
            } else {
                m.v as i64
            };
            format!("offset@{k}={}", a.offset)
        }
        // 2, the only other op mutate sends here.
        _ => {
            a.null_count = match m.a % 4 {
                0 => -1,
                1 => a.null_count + small,
                2 => a.length,
                _ => m.v as i64,
            };
            format!("null_count@{k}={}", a.null_count)
        }
    }
}

/// Mutations 3, 4 and 13: a byte, a 32-bit word or a bit of one of the
/// array node's buffers.
fn mutate_bytes(a: &mut Node, k: usize, m: &Mutation) -> Option<String> {
    let small = (m.b as i8) as i64;
    let n = a.buffers.len();
    if n == 0 {
        return None;
    }
    let i = m.a as usize % n;
    let buf = a.buffers[i].as_mut()?;
    if buf.is_empty() {
        return None;
    }
    Some(match m.op % 16 {
        3 => {
            let p = (m.v as u32 as usize) % buf.len();
            buf[p] ^= m.b.max(1);
            format!("byte@{k}.{i}[{p}]^{}", m.b.max(1))
        }
        13 => {
            let bit = (m.v as u32 as usize) % (buf.len() * 8);
            buf[bit / 8] ^= 1 << (bit % 8);
            format!("bit@{k}.{i}[{bit}]")
        }
        _ => {
            // A 32-bit word: offsets, sizes, type ids (low byte),
            // run ends, view lengths and offsets are all words.
            let words = buf.len() / 4;
            if words == 0 {
                return None;
            }
            let w = (m.v as u32 as usize >> 8) % words;
            let old = i32::from_le_bytes(buf[w * 4..w * 4 + 4].try_into().ok()?);
            let new = old.wrapping_add(small as i32 | 1);
            buf[w * 4..w * 4 + 4].copy_from_slice(&new.to_le_bytes());
            format!("word@{k}.{i}[{w}]={new}")
        }
    })
}

/// Mutations 5 to 9 and 14: the tree's shape: a buffer made NULL,
/// dropped or added; an array child or a schema child dropped, added or
/// swapped; a dictionary (array or value type) dropped.
fn mutate_tree(s: &mut SchemaNode, a: &mut Node, k: usize, m: &Mutation) -> Option<String> {
    match m.op % 16 {
        5 => {
            let n = a.buffers.len();
            if n == 0 {
                return None;
            }
            let i = m.a as usize % n;
            a.buffers[i] = None;
            Some(format!("null-buffer@{k}.{i}"))
        }
        6 => {
            if m.a & 1 == 0 {
                a.buffers.pop()?;
                Some(format!("drop-buffer@{k}"))
            } else {
                a.buffers.push(Some(vec![0; 64]));
                Some(format!("add-buffer@{k}"))
            }
        }
        7 => {
            if m.a & 1 == 0 {
                if a.children.is_empty() {
                    return None;
                }
                let i = m.b as usize % a.children.len();
                a.children.remove(i);
                Some(format!("drop-child@{k}.{i}"))
            } else {
                let c = a.children.first()?.clone();
                a.children.push(c);
                Some(format!("add-child@{k}"))
            }
        }
        8 => {
            if m.a & 1 == 0 {
                if s.children.is_empty() {
                    return None;
                }
                let i = m.b as usize % s.children.len();
                s.children.remove(i);
                Some(format!("drop-field@{k}.{i}"))
            } else {
                let c = s.children.first()?.clone();
                s.children.push(c);
                Some(format!("add-field@{k}"))
            }
        }
        9 => {
            if m.a & 1 == 0 {
                a.dictionary.take()?;
                Some(format!("drop-dictionary@{k}"))
            } else {
                s.dictionary.take()?;
                Some(format!("drop-value-type@{k}"))
            }
        }
        // 14, the only other op mutate sends here.
        _ => {
            if a.children.len() < 2 {
                return None;
            }
            a.children.swap(0, 1);
            Some(format!("swap-children@{k}"))
        }
    }
}

/// Mutations 10 to 12 and 15: the schema node's flags, format, metadata
/// or name.
fn mutate_schema(s: &mut SchemaNode, k: usize, m: &Mutation) -> Option<String> {
    match m.op % 16 {
        10 => {
            s.flags = if m.a & 1 == 0 {
                s.flags ^ (1 << (m.b % 4))
            } else {
                m.v as i64
            };
            Some(format!("flags@{k}={}", s.flags))
        }
        11 => {
            if m.a & 1 == 0 {
                s.format = FORMATS[m.b as usize % FORMATS.len()].to_string();
            } else if !s.format.is_empty() {
                let mut f = s.format.clone().into_bytes();
                let p = m.b as usize % f.len();
                // Printable ASCII: a C string (no NUL) that stays UTF-8.
                f[p] = b'!' + (m.v as u32 % 94) as u8;
                s.format = String::from_utf8(f).ok()?;
            } else {
                return None;
            }
            Some(format!("format@{k}={:?}", s.format))
        }
        12 => {
            s.metadata = Some(metadata(m));
            if m.b % 16 == 15 {
                Some(format!("metadata@{k}:none"))
            } else {
                Some(format!("metadata@{k}:{}", m.a % 4))
            }
        }
        // 15, the only other op mutate sends here.
        _ => {
            s.name = if m.a & 1 == 0 { None } else { Some("x".into()) };
            Some(format!("name@{k}"))
        }
    }
}

/// A metadata blob whose lengths never reach past its bytes (the padding
/// covers one more pair than declared), but is otherwise wrong in one of
/// four ways: fine, one pair more than present, a negative count, or a
/// value that is not UTF-8.
fn metadata(m: &Mutation) -> Vec<u8> {
    let key = b"k";
    let value: &[u8] = if m.a % 4 == 3 { b"\xff\xfe" } else { b"v" };
    let count: i32 = match m.a % 4 {
        // Now and then none at all: "If omitted, this field MUST be NULL
        // (not an empty string)" (schema.metadata.null-if-omitted).
        _ if m.b % 16 == 15 => 0,
        1 => 2,
        2 => -1,
        _ => 1,
    };
    let mut out = Vec::new();
    out.extend_from_slice(&count.to_le_bytes());
    out.extend_from_slice(&(key.len() as i32).to_le_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(&(value.len() as i32).to_le_bytes());
    out.extend_from_slice(value);
    // Room for the undeclared pair's two zero lengths.
    out.extend_from_slice(&[0; 16]);
    out
}

/// Grows buffer `i` (when present) to `bytes`.
fn pad(node: &mut Node, i: usize, bytes: usize) {
    if let Some(Some(b)) = node.buffers.get_mut(i) {
        if b.len() < bytes {
            b.resize(bytes, 0);
        }
    }
}

fn word_at(node: &Node, i: usize, k: usize, width: usize) -> Option<i64> {
    let b = node.buffers.get(i)?.as_ref()?;
    let bytes = b.get(k * width..(k + 1) * width)?;
    Some(if width == 4 {
        i32::from_le_bytes(bytes.try_into().ok()?) as i64
    } else {
        i64::from_le_bytes(bytes.try_into().ok()?)
    })
}

fn within(bytes: Option<usize>) -> Result<usize, String> {
    bytes
        .filter(|&b| b <= MAX_BYTES)
        .ok_or_else(|| format!("a buffer would need more than {MAX_BYTES} bytes"))
}

/// Makes `node` memory-sound for the format `schema` gives it: every
/// buffer it has holds at least what its offset and length claim (see the
/// module docs). Nodes without a schema, with a format that does not parse
/// or with a negative offset or length are left as they are: no reader may
/// go past their structure.
pub fn sound(schema: Option<&SchemaNode>, node: &mut Node) -> Result<(), String> {
    for (i, c) in node.children.iter_mut().enumerate() {
        sound(schema.and_then(|s| s.children.get(i)), c)?;
    }
    if let Some(d) = node.dictionary.as_deref_mut() {
        sound(schema.and_then(|s| s.dictionary.as_deref()), d)?;
    }
    let Some(s) = schema else { return Ok(()) };
    let Ok(f) = format::parse(&s.format) else {
        return Ok(());
    };
    if node.length < 0 || node.offset < 0 {
        return Ok(());
    }
    let e = node
        .length
        .checked_add(node.offset)
        .filter(|&e| e <= MAX_ELEMENTS)
        .ok_or_else(|| format!("offset + length beyond {MAX_ELEMENTS}"))? as usize;
    if format::validity_buffer(&f).is_some() {
        pad(node, 0, e.div_ceil(8));
    }
    use Format::*;
    match &f {
        Boolean => pad(node, 1, e.div_ceil(8)),
        Binary | Utf8 | LargeBinary | LargeUtf8 => {
            let w = if matches!(f, Binary | Utf8) { 4 } else { 8 };
            pad(node, 1, (e + 1) * w);
            let reach = (0..=e)
                .filter_map(|k| word_at(node, 1, k, w))
                .filter(|&o| o > 0)
                .max()
                .unwrap_or(0);
            pad(node, 2, within(usize::try_from(reach).ok())?);
        }
        List | Map => pad(node, 1, (e + 1) * 4),
        LargeList => pad(node, 1, (e + 1) * 8),
        ListView => {
            pad(node, 1, e * 4);
            pad(node, 2, e * 4);
        }
        LargeListView => {
            pad(node, 1, e * 8);
            pad(node, 2, e * 8);
        }
        Union(mode, _) => {
            pad(node, 0, e);
            if *mode == UnionMode::Dense {
                pad(node, 1, e * 4);
            }
        }
        BinaryView | Utf8View => {
            pad(node, 1, e * 16);
            let n = node.buffers.len();
            if n >= 3 {
                let variadic = n - 3;
                pad(node, n - 1, variadic * 8);
                let mut reach = vec![0i64; variadic];
                for (k, r) in reach.iter_mut().enumerate() {
                    *r = word_at(node, n - 1, k, 8).unwrap_or(0).max(0);
                }
                for k in 0..e {
                    let len = word_at(node, 1, k * 4, 4).unwrap_or(0);
                    if len <= 12 {
                        continue;
                    }
                    let buf = word_at(node, 1, k * 4 + 2, 4).unwrap_or(-1);
                    let off = word_at(node, 1, k * 4 + 3, 4).unwrap_or(-1);
                    if let (Ok(b), true) = (usize::try_from(buf), off >= 0) {
                        if let Some(r) = reach.get_mut(b) {
                            *r = (*r).max(off + len);
                        }
                    }
                }
                for (k, r) in reach.into_iter().enumerate() {
                    pad(node, 2 + k, within(usize::try_from(r).ok())?);
                }
            }
        }
        _ => {
            if let (Some(w), BufferShape::Fixed(2)) =
                (format::byte_width(&f), format::n_buffers(&f))
            {
                pad(node, 1, within(e.checked_mul(w))?);
            }
        }
    }
    Ok(())
}

/// The input that checks `scenario`'s batch `batch` unmutated, with the
/// plain (`varied: None`) or varied encoding: a seed for the corpus.
pub fn seed(batch: u8, varied: Option<u64>, scenario: &[u8]) -> Vec<u8> {
    let mut out = vec![batch];
    match varied {
        None => out.push(0),
        Some(seed) => {
            out.push(1);
            out.extend_from_slice(&seed.to_le_bytes());
        }
    }
    out.push(0);
    out.extend_from_slice(scenario);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn format_violation(format: &str) -> Violation {
        let message = format::parse(format).unwrap_err();
        Violation {
            rule: crate::rule!("schema.format.valid"),
            at: "root".into(),
            message,
        }
    }

    #[test]
    fn only_plus_signed_numbers_are_exempt() {
        for f in ["w:+2", "+w:+3", "d:+5,2", "d:5,+2", "+ud:+1"] {
            assert!(plus_signed_number(&format_violation(f)), "{f}");
        }
        for f in ["w:x2", "+w:-1", "d:5,x", "+ud:-1", "+x", "w:2+"] {
            assert!(!plus_signed_number(&format_violation(f)), "{f}");
        }
    }
}

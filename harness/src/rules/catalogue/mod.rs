//! The rules themselves, in catalogue order: grouped by area, areas in the
//! order of `shared/RULES.md` (schema, array, device, stream, async,
//! consumer). Every rule quotes one sentence of the spec verbatim (RST markup
//! dropped); the tests in `rules/mod.rs` check each quote against the spec
//! texts and each ID, level and side against `shared/RULES.md`.
//!
//! Rules not in RULES.md are marked `// Added:` with the reason. Where a
//! level differs from RULES.md, the rule says why above it and
//! [`LEVEL_CHANGES`] records it.

mod array;
mod asynchronous;
mod consumer;
mod device;
mod schema;
mod stream;

use super::{Level, Rule};

const CDATA: &str = "CDataInterface.rst";
const CSTREAM: &str = "CStreamInterface.rst";
const CDEVICE: &str = "CDeviceDataInterface.rst";
const COLUMNAR: &str = "Columnar.rst";

/// A rule whose level differs from the one `shared/RULES.md` gives it.
#[derive(Debug, Clone, Copy)]
pub struct LevelChange {
    pub id: &'static str,
    /// The level RULES.md gives.
    pub rules_md: Level,
    /// Why the catalogue uses another.
    pub reason: &'static str,
}

/// Levels changed from RULES.md: the spec's own word for the quoted sentence
/// is weaker, and a rule is never stronger than the spec's word.
pub static LEVEL_CHANGES: &[LevelChange] = &[
    LevelChange {
        id: "device.event.none",
        rules_md: Level::Must,
        reason: "the spec's sentence says the sync_event member \"should always be null\" for device types without an event type",
    },
    LevelChange {
        id: "schema.flags.known",
        rules_md: Level::Should,
        reason: "a bit the spec does not define yet is allowed (\"Backwards-compatible changes are allowed, for example new ArrowSchema.flags values\"): reported at INFO; flags where they do not apply are schema.flags.placement, at SHOULD",
    },
    LevelChange {
        id: "device.type.known",
        rules_md: Level::Should,
        reason: "the quoted sentence allows new values and carries no RFC 2119 word; a value added after the harness's list is no departure from the spec: reported at INFO",
    },
    LevelChange {
        id: "stream.error.message",
        rules_md: Level::Must,
        reason: "the callback's return value is described without an RFC 2119 word; that the message is UTF-8 is inferred, so at most SHOULD",
    },
    LevelChange {
        id: "async.task.extract-null",
        rules_md: Level::Must,
        reason: "the only sentence about a task's cleanup says \"any required cleanup should be performed as part of the invocation of this callback\"",
    },
    LevelChange {
        id: "consumer.stream.error",
        rules_md: Level::Must,
        reason: "no sentence says what a consumer does with a producer's error; passing it on is the plugin contract's, inferred, so at most SHOULD",
    },
    LevelChange {
        id: "consumer.stream.serial",
        rules_md: Level::Must,
        reason: "the spec says consumers calling get_next from several threads \"should ensure those calls are serialized\"",
    },
];

/// Rules kept above their quote's RFC 2119 word: the quote describes a
/// structure without "must", but without the property the structure
/// cannot be read at all (a consumer that trusts it reads out of bounds).
/// Short on purpose; `rules::tests` checks each one is still needed.
pub static EXCEPTIONS: &[super::Exception] = &[
    super::Exception {
        id: "schema.map.entries",
        reason: "the spec describes a map as a single entries child, a 2-child struct, without \"must\"; a map of any other shape has no keys and values to read",
    },
    super::Exception {
        id: "schema.ree.run-ends",
        reason: "\"can only be a signed integer type\" carries no RFC 2119 word; run ends of another type cannot be decoded at all",
    },
    super::Exception {
        id: "schema.metadata.encoding",
        reason: "the member is optional, but the sentence goes on \"follows a specific format\": metadata whose counts and lengths do not hold cannot be read without reading out of bounds (what its bytes are, UTF-8 or not, is schema.metadata.utf8, INFO)",
    },
    super::Exception {
        id: "array.layout.null-buffer",
        reason: "\"MAY be null only in two situations\" is a restriction worded as a permission: a NULL pointer where bytes are needed cannot be read",
    },
    super::Exception {
        id: "array.union.type-ids",
        reason: "the types buffer is described without \"must\"; a type id the union does not declare selects no child, so the slot cannot be read",
    },
    super::Exception {
        id: "array.dictionary.indices",
        reason: "the indices are described as indexes into the dictionary without \"must\"; an index outside it reads out of bounds",
    },
    super::Exception {
        id: "array.values.roundtrip",
        reason: "the ArrowArray \"describes the data of an exported array\": exported data that is not the data asked for is not an export of it (the plugin contract's whole purpose), whatever the words",
    },
    super::Exception {
        id: "stream.chunk.schema",
        reason: "\"each with the same schema\" has no RFC 2119 word; a chunk of another schema cannot be interpreted by a consumer that knows only the stream's",
    },
    super::Exception {
        id: "async.schema.first",
        reason: "\"will always get called exactly once and will be the first\": a task before the schema cannot be interpreted, and the consumer cannot even request before it (\"The consumer CANNOT assume that this is valid until the on_schema callback is called\")",
    },
    super::Exception {
        id: "async.eos.null-task",
        reason: "a NULL task is the only way the spec gives a producer to signal the end: a stream that ends otherwise, or sends tasks after it, cannot be read to its end",
    },
    super::Exception {
        id: "consumer.async.extract-once",
        reason: "\"It is only valid to call this method exactly once\": a second call frees or moves the task's data twice",
    },
];

/// Every Arrow rule: the areas in the order of `shared/RULES.md` (schema,
/// array, device, stream, async, consumer), each area's rules in its own
/// file, joined at compile time so that [`super::known`] can still read
/// them in a `const fn`.
pub static RULES: &[Rule] = &ALL;

const AREAS: &[&[Rule]] = &[
    schema::RULES,
    array::RULES,
    device::RULES,
    stream::RULES,
    asynchronous::RULES,
    consumer::RULES,
];

static ALL: [Rule; count(AREAS)] = join(AREAS);

/// How many rules the areas hold together.
const fn count(areas: &[&[Rule]]) -> usize {
    let (mut n, mut i) = (0, 0);
    while i < areas.len() {
        n += areas[i].len();
        i += 1;
    }
    n
}

/// The areas' rules in one array, in order (`N` is [`count`] of them).
const fn join<const N: usize>(areas: &[&[Rule]]) -> [Rule; N] {
    let mut out = [areas[0][0]; N];
    let (mut n, mut i) = (0, 0);
    while i < areas.len() {
        let mut j = 0;
        while j < areas[i].len() {
            out[n] = areas[i][j];
            n += 1;
            j += 1;
        }
        i += 1;
    }
    out
}

//! From arrow-rs data to the exact C structures the harness will hand a
//! consumer: every buffer, offset, length and null count chosen here, with
//! the encodings the spec permits and consumers get wrong.
//!
//! The output is a plain description ([`Node`], [`SchemaNode`]); the unsafe
//! materialisation and instrumentation live in [`super::raw`].
//!
//! How one node is laid out: a node holding the `L` values of `data` gets
//! `front` and `back` filler elements inside its logical window (a parent
//! asked for them: a struct's children are longer than the struct, a list's
//! child holds elements no list slot points at), and, with
//! [`Encoding::Varied`], a physical prefix of `m` elements before the window
//! (its `offset`) and a tail after it. Filler elements are valid, non-null
//! values (empty strings and lists, zero numbers, union slots of the first
//! child), so that every element in a window is a value a consumer may
//! validate; only the bytes outside windows and under null slots are
//! garbage.

#![forbid(unsafe_code)]

use arrow_array::RecordBatch;
use arrow_data::ArrayData;
use arrow_schema::{DataType, Field, Schema, UnionMode};

use super::format;
use crate::generate::values::Rng;

/// How the exporter encodes what it hands over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Encoding {
    /// Canonical: offsets 0, exact lengths and null counts, a validity
    /// buffer exactly when there are nulls, every buffer allocated (zero
    /// sized ones too), names and metadata as given.
    Plain,
    /// Every variation the spec permits, chosen per node from this seed:
    /// non-zero offsets at every level (bit offsets not multiples of 8),
    /// children longer than their parent needs, null_count -1, all-valid
    /// bitmaps present or NULL, NULL pointers for zero-sized buffers,
    /// garbage under null slots and outside windows, unused bitmap bits
    /// set, view values inline and out of line over several variadic
    /// buffers (some empty), dense union slots sharing child elements,
    /// unused dictionary values, NULL names for empty names, and buffers
    /// on the CPU that are not aligned to their type ([`Node::shift`]).
    Varied(u64),
    /// [`Encoding::Varied`] with every `offset` member 0 (buffers are
    /// always aligned): the same kinds of variation but none of those the
    /// spec lets consumers refuse ("Consumers MAY decide not to support
    /// non-0-offset arrays", "... unaligned memory"). Certification hands
    /// it over when a consumer refused a varied case, to tell a refusal of
    /// those (a limitation) from a refusal of the rest.
    VariedAlignedAtZero(u64),
    /// Exactly one variation of [`Encoding::Varied`], everything else as
    /// [`Encoding::Plain`]: what a consumer does with each variation alone
    /// (a consumer that refuses one is still shown the others).
    Only(Variation, u64),
}

/// One variation of the varied encoding. [`Encoding::Varied`] turns on all
/// of them, [`Encoding::VariedAlignedAtZero`] all but [`Variation::Offset`]
/// and [`Variation::Unaligned`], [`Encoding::Only`] one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Variation {
    /// Non-zero `offset` members at every level (bit offsets not multiples
    /// of 8), with elements after the window too: "Consumers MAY decide not
    /// to support non-0-offset arrays".
    Offset,
    /// Children longer than their parent needs: struct and sparse union
    /// children with elements past the parent's end, list children with
    /// elements no list slot points at (a non-zero first offset).
    LongChildren,
    /// null_count -1 ("MAY be -1 if not yet computed"), and all-valid
    /// validity bitmaps present (without one, -1 cannot be used).
    NullCountUnknown,
    /// NULL pointers for zero-sized buffers of empty arrays ("a buffer
    /// whose size would be 0").
    NullEmptyBuffers,
    /// Garbage under null slots and outside windows (bitmap bits, values,
    /// string bytes before the first offset, unused variadic bytes).
    Garbage,
    /// The unused bits after the last element of a bitmap set.
    SpareBits,
    /// Buffers not aligned to their type ([`Node::shift`]): "Consumers MAY
    /// decide not to support unaligned memory".
    Unaligned,
    /// View values out of line over several variadic buffers (some empty).
    VariadicBuffers,
    /// Dense union slots sharing one child element.
    SharedUnionSlots,
    /// Dictionaries with values no index uses.
    UnusedDictionaryValues,
    /// NULL names where a name is empty ("If omitted, MAY be NULL or an
    /// empty string").
    NullNames,
}

impl Variation {
    /// Every variation, in case-ID order.
    pub const ALL: [Variation; 11] = [
        Variation::Offset,
        Variation::LongChildren,
        Variation::NullCountUnknown,
        Variation::NullEmptyBuffers,
        Variation::Garbage,
        Variation::SpareBits,
        Variation::Unaligned,
        Variation::VariadicBuffers,
        Variation::SharedUnionSlots,
        Variation::UnusedDictionaryValues,
        Variation::NullNames,
    ];

    /// The stable kebab-case name case IDs use (`varied:<name>`).
    pub fn name(self) -> &'static str {
        match self {
            Variation::Offset => "offset",
            Variation::LongChildren => "long-children",
            Variation::NullCountUnknown => "null-count-unknown",
            Variation::NullEmptyBuffers => "null-empty-buffers",
            Variation::Garbage => "garbage",
            Variation::SpareBits => "spare-bits",
            Variation::Unaligned => "unaligned",
            Variation::VariadicBuffers => "variadic-buffers",
            Variation::SharedUnionSlots => "shared-union-slots",
            Variation::UnusedDictionaryValues => "unused-dictionary-values",
            Variation::NullNames => "null-names",
        }
    }

    /// The variation named `name` ([`Variation::name`]).
    pub fn from_name(name: &str) -> Option<Variation> {
        Variation::ALL.into_iter().find(|v| v.name() == name)
    }

    /// True for the variations the spec lets consumers refuse: "Consumers
    /// MAY decide not to support non-0-offset arrays" and "Consumers MAY
    /// decide not to support unaligned memory" (CDataInterface.rst).
    pub fn refusable(self) -> bool {
        matches!(self, Variation::Offset | Variation::Unaligned)
    }

    fn bit(self) -> u16 {
        1 << self as u16
    }
}

impl Encoding {
    /// The case-ID word: `plain` or `varied`.
    pub fn name(self) -> &'static str {
        match self {
            Encoding::Plain => "plain",
            Encoding::Varied(_) => "varied",
            Encoding::VariedAlignedAtZero(_) => "varied-aligned-at-offset-0",
            Encoding::Only(..) => "varied-one-variation",
        }
    }

    /// Whether `v` is on in this encoding.
    pub fn has(self, v: Variation) -> bool {
        self.variations() & v.bit() != 0
    }

    fn variations(self) -> u16 {
        let all = Variation::ALL.iter().fold(0, |m, v| m | v.bit());
        match self {
            Encoding::Plain => 0,
            Encoding::Varied(_) => all,
            Encoding::VariedAlignedAtZero(_) => {
                all & !Variation::Offset.bit() & !Variation::Unaligned.bit()
            }
            Encoding::Only(v, _) => v.bit(),
        }
    }
}

/// One `ArrowArray` to be: what each member will hold.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub length: i64,
    pub offset: i64,
    pub null_count: i64,
    /// `None` is a NULL buffer pointer.
    pub buffers: Vec<Option<Vec<u8>>>,
    pub children: Vec<Node>,
    pub dictionary: Option<Box<Node>>,
    /// How many bytes past an aligned address each of this node's buffers
    /// starts: 0 is aligned (to 64 bytes). Varied encodings shift some
    /// nodes' buffers so that they are not aligned to their type
    /// ("Consumers MAY decide not to support unaligned memory").
    pub shift: u8,
    /// Added to the shift of this node's zero-length buffers when `shift`
    /// is even (odd: 3): a single unaligned variation
    /// ([`Encoding::Only`] of [`Variation::Unaligned`]) hands every
    /// zero-length buffer over as a non-NULL pointer off every type's
    /// alignment. Nothing is read through it ("Buffers ... MAY be null
    /// only if ... zero-size", CDataInterface.rst; a consumer that reads
    /// one, or assumes it aligned, is the one at fault).
    pub empty_shift: u8,
}

/// One `ArrowSchema` to be.
#[derive(Debug, Clone, PartialEq)]
pub struct SchemaNode {
    pub format: String,
    /// `None` is a NULL name.
    pub name: Option<String>,
    /// Encoded metadata; `None` is NULL.
    pub metadata: Option<Vec<u8>>,
    pub flags: i64,
    pub children: Vec<SchemaNode>,
    pub dictionary: Option<Box<SchemaNode>>,
}

/// The schema of a record batch: a struct with one child per field.
pub fn schema(schema: &Schema, enc: Encoding) -> Result<SchemaNode, String> {
    let mut e = Encoder::new(enc, 0x005c_4e3a);
    let children = schema
        .fields()
        .iter()
        .map(|f| e.field(f))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(SchemaNode {
        format: "+s".into(),
        // "If omitted, MAY be NULL or an empty string."
        name: if e.on(Variation::NullNames) && e.coin() {
            None
        } else {
            Some(String::new())
        },
        metadata: format::metadata(schema.metadata()),
        flags: 0,
        children,
        dictionary: None,
    })
}

/// A record batch as a struct array ("trivially considered as an
/// equivalent struct array"). `salt` varies the choices between batches
/// of one stream.
pub fn batch(batch: &RecordBatch, enc: Encoding, salt: u64) -> Result<Node, String> {
    let data = arrow_array::Array::into_data(arrow_array::StructArray::from(batch.clone()));
    let mut e = Encoder::new(enc, salt);
    e.node(&data, 0, 0, Room::Any)
}

/// Where a node may put elements outside its window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Room {
    /// A prefix (the node's offset) and a tail.
    Any,
    /// Neither: run-end encoded children are exported with offset 0.
    None,
}

struct Encoder {
    rng: Option<Rng>,
    /// Picks the buffer shifts ([`Node::shift`]), apart from `rng` so that
    /// every other choice is the same with and without them; `None` when
    /// buffers stay aligned (plain, and VariedAlignedAtZero).
    shifts: Option<Rng>,
    /// The variations on ([`Encoding::variations`]). Every choice of a
    /// variation is gated on its bit so that with every bit on the draws
    /// from `rng` are the ones the encoder made before the variations were
    /// told apart (the varied encodings' bytes are pinned: existing case
    /// results and the fuzz corpus depend on them). A gate skips its
    /// draws when the variation is off.
    on: u16,
    /// [`Encoding::Only`] of [`Variation::SharedUnionSlots`]: with no
    /// filler to share (filler comes from the other variations), dense
    /// union slots of equal value share one child element instead.
    share_equal: bool,
    /// [`Encoding::Only`] of [`Variation::Unaligned`]: every node's
    /// zero-length buffers are off alignment ([`Node::empty_shift`]).
    empty_unaligned: bool,
    /// Elements laid out so far, over every node of this tree.
    elements: usize,
    /// Bytes of fixed-width values laid out so far.
    bytes: usize,
}

impl Encoder {
    fn new(enc: Encoding, salt: u64) -> Encoder {
        Encoder {
            rng: match enc {
                Encoding::Plain => None,
                Encoding::Varied(seed)
                | Encoding::VariedAlignedAtZero(seed)
                | Encoding::Only(_, seed) => Some(Rng::new(seed ^ salt.wrapping_mul(0x9E37_79B9))),
            },
            shifts: match enc {
                Encoding::Varied(seed) | Encoding::Only(Variation::Unaligned, seed) => Some(
                    Rng::new(seed ^ salt.wrapping_mul(0x9E37_79B9) ^ 0x0a11_9e0d_5eed),
                ),
                _ => None,
            },
            on: enc.variations(),
            share_equal: matches!(enc, Encoding::Only(Variation::SharedUnionSlots, _)),
            empty_unaligned: matches!(enc, Encoding::Only(Variation::Unaligned, _)),
            elements: 0,
            bytes: 0,
        }
    }

    /// Whether variation `v` is on (never when plain).
    fn on(&self, v: Variation) -> bool {
        self.rng.is_some() && self.on & v.bit() != 0
    }

    /// A random value in `0..n` (0 when plain).
    fn below(&mut self, n: u64) -> u64 {
        self.rng.as_mut().map(|r| r.below(n)).unwrap_or(0)
    }

    /// A node's buffer shift: for one node in four of a varied encoding,
    /// 1 to 7 bytes or 12 (unaligned for every type wider than a byte; 12
    /// keeps 4-byte alignment but not 8 or 16), else 0.
    fn shift(&mut self) -> u8 {
        let Some(r) = self.shifts.as_mut() else {
            return 0;
        };
        if r.below(4) == 0 {
            [1, 2, 3, 4, 5, 6, 7, 12][r.below(8) as usize]
        } else {
            0
        }
    }

    /// [`Node::empty_shift`]: 3 bytes (off the alignment of every type
    /// wider than a byte) under a single unaligned variation, else 0; no
    /// draw, so every other choice stays as it was.
    fn empty_shift(&self) -> u8 {
        if self.empty_unaligned {
            3
        } else {
            0
        }
    }

    fn coin(&mut self) -> bool {
        self.below(2) == 1
    }

    /// With probability `percent` when `v` is on; never (and no draw) when
    /// it is off.
    fn chance(&mut self, v: Variation, percent: u64) -> bool {
        self.on(v) && self.below(100) < percent
    }

    /// A random value in `0..n` when `v` is on, else 0 (and no draw).
    fn below_if(&mut self, v: Variation, n: u64) -> u64 {
        if self.on(v) {
            self.below(n)
        } else {
            0
        }
    }

    fn byte(&mut self) -> u8 {
        self.below(256) as u8
    }

    /// A printable ASCII byte: garbage that is still valid UTF-8, since
    /// some validators check the whole values range, null slots included.
    fn ascii(&mut self) -> u8 {
        b'!' + self.below(94) as u8
    }

    fn field(&mut self, f: &Field) -> Result<SchemaNode, String> {
        let mut node = self.type_node(f.data_type())?;
        // "If omitted, MAY be NULL or an empty string."
        node.name = if f.name().is_empty() && self.chance(Variation::NullNames, 50) {
            None
        } else {
            Some(f.name().clone())
        };
        node.metadata = format::metadata(f.metadata());
        if f.is_nullable() {
            node.flags |= format::NULLABLE;
        }
        if f.dict_is_ordered() == Some(true) {
            node.flags |= format::DICTIONARY_ORDERED;
        }
        Ok(node)
    }

    fn type_node(&mut self, dt: &DataType) -> Result<SchemaNode, String> {
        use DataType::*;
        let children = match dt {
            List(f) | LargeList(f) | ListView(f) | LargeListView(f) | FixedSizeList(f, _) => {
                vec![self.field(f)?]
            }
            Map(f, _) => vec![self.field(f)?],
            Struct(fields) => fields
                .iter()
                .map(|f| self.field(f))
                .collect::<Result<_, _>>()?,
            Union(fields, _) => fields
                .iter()
                .map(|(_, f)| self.field(f))
                .collect::<Result<_, _>>()?,
            RunEndEncoded(r, v) => vec![self.field(r)?, self.field(v)?],
            _ => Vec::new(),
        };
        let dictionary = match dt {
            Dictionary(_, values) => {
                let mut d = self.type_node(values)?;
                d.flags |= format::NULLABLE;
                d.name = if self.chance(Variation::NullNames, 50) {
                    None
                } else {
                    Some(String::new())
                };
                Some(Box::new(d))
            }
            _ => None,
        };
        Ok(SchemaNode {
            format: format::format(dt)?,
            name: None,
            metadata: None,
            flags: if matches!(dt, Map(_, true)) {
                format::MAP_KEYS_SORTED
            } else {
                0
            },
            children,
            dictionary,
        })
    }

    /// The most elements (offsets, lengths and filler, summed over every
    /// node) one encoded tree holds: 2^24, a few hundred MiB at the widest
    /// types. Gold files and generated scenarios are far below it; the
    /// bound is for inputs whose lengths need no memory of their own (an
    /// IPC batch of 2^48 rows and no columns) and for filler multiplied
    /// down nested fixed-size lists (a prefix of 13 lists of 2^20 values
    /// each is 13 * 2^20 child elements before any data).
    pub const MAX_ELEMENTS: usize = 1 << 24;

    /// The most bytes of fixed-width values one encoded tree holds
    /// (256 MiB): far above any gold file or generated scenario, and
    /// within what a fuzz target may allocate for one input.
    pub const MAX_BYTES: usize = 1 << 28;

    /// Lays out `data` with `front` and `back` filler elements in its window.
    fn node(
        &mut self,
        data: &ArrayData,
        front: usize,
        back: usize,
        room: Room,
    ) -> Result<Node, String> {
        let l = data.len();
        let (m, tail) = if room == Room::Any && self.on(Variation::Offset) {
            let prefixes: [usize; 7] = [0, 0, 1, 3, 5, 8, 13];
            let tails = [0, 0, 0, 1, 2];
            (
                prefixes[self.below(prefixes.len() as u64) as usize],
                tails[self.below(tails.len() as u64) as usize],
            )
        } else {
            (0, 0)
        };
        let p = m
            .saturating_add(front)
            .saturating_add(l)
            .saturating_add(back)
            .saturating_add(tail);
        self.elements = self.elements.saturating_add(p);
        if self.elements > Self::MAX_ELEMENTS {
            // Buffers are built element by element: an array whose length
            // needs no memory (a struct with no children, null type
            // children) would still take a bitmap of length / 8 bytes.
            return Err(format!(
                "an array of {p} elements ({} in the tree so far) is beyond what the harness encodes ({} in all)",
                self.elements,
                Self::MAX_ELEMENTS
            ));
        }
        let lay = Layout {
            m,
            pre: m + front,
            l,
            p,
            window_end: m + front + l + back,
        };
        let mut node = Node {
            length: (front + l + back) as i64,
            offset: m as i64,
            null_count: 0,
            buffers: Vec::new(),
            children: Vec::new(),
            dictionary: None,
            shift: self.shift(),
            empty_shift: self.empty_shift(),
        };
        let dt = data.data_type();
        use DataType::*;
        match dt {
            Null => {
                node.null_count = node.length;
                return Ok(node);
            }
            Union(..) | RunEndEncoded(..) => {}
            _ => {
                let (bitmap, nulls) = self.validity(data, &lay);
                node.null_count = nulls as i64;
                node.buffers.push(bitmap);
                // "MAY be -1 if not yet computed"; never with a NULL
                // bitmap, which is allowed only when null_count is 0.
                if node.buffers[0].is_some() && self.chance(Variation::NullCountUnknown, 30) {
                    node.null_count = -1;
                }
            }
        }
        match dt {
            Boolean => {
                let mut bits = vec![0u8; lay.p.div_ceil(8)];
                for i in 0..lay.p {
                    let v = match lay.slot(i) {
                        Some(j) if data.is_null(j) && self.chance(Variation::Garbage, 50) => {
                            self.coin()
                        }
                        Some(j) => get_bit(&data.buffers()[0], data.offset() + j),
                        None if !lay.in_window(i) && self.on(Variation::Garbage) => self.coin(),
                        None => false,
                    };
                    set_bit(&mut bits, i, v);
                }
                self.unused_bits(&mut bits, lay.p);
                node.buffers.push(self.sized(bits));
            }
            Utf8 | Binary => self.bytes::<4>(data, &lay, &mut node),
            LargeUtf8 | LargeBinary => self.bytes::<8>(data, &lay, &mut node),
            Utf8View | BinaryView => self.views(data, &lay, &mut node)?,
            List(_) | Map(..) => self.list::<4>(data, &lay, &mut node)?,
            LargeList(_) => self.list::<8>(data, &lay, &mut node)?,
            ListView(_) => self.list_view::<4>(data, &lay, &mut node)?,
            LargeListView(_) => self.list_view::<8>(data, &lay, &mut node)?,
            FixedSizeList(_, n) => {
                let n = *n as usize;
                let child = data.child_data()[0].slice(data.offset() * n, l * n);
                let c = self.node(&child, lay.pre * n, (lay.p - lay.pre - l) * n, Room::Any)?;
                node.children.push(c);
            }
            Struct(_) => {
                for child in data.child_data() {
                    let child = child.slice(data.offset(), l);
                    let extra = if self.chance(Variation::LongChildren, 40) {
                        1 + self.below(3) as usize
                    } else {
                        0
                    };
                    let c = self.node(&child, lay.pre, lay.p - lay.pre - l + extra, Room::Any)?;
                    node.children.push(c);
                }
            }
            Union(fields, mode) => self.union(data, &lay, fields, *mode, &mut node)?,
            RunEndEncoded(..) => self.run_end_encoded(data, &lay, &mut node)?,
            Dictionary(index, _) => {
                let w = index.primitive_width().ok_or("dictionary index width")?;
                let values = &data.child_data()[0];
                let mut dict_back = if self.chance(Variation::UnusedDictionaryValues, 40) {
                    1 + self.below(3) as usize
                } else {
                    0
                };
                // Filler keys are 0: with no values of its own, the
                // dictionary gets an unused one for them to point at (a
                // null filler would put nulls in non-nullable children).
                if values.is_empty() && lay.p > l {
                    dict_back = dict_back.max(1);
                }
                let dict = self.node(values, 0, dict_back, Room::Any)?;
                node.dictionary = Some(Box::new(dict));
                // Filler keys reuse the first dictionary value.
                self.fixed(data, &lay, w, &mut node)?;
            }
            _ => {
                let w =
                    fixed_width(dt).ok_or_else(|| format!("the exporter cannot lay out {dt}"))?;
                self.fixed(data, &lay, w, &mut node)?;
            }
        }
        Ok(node)
    }

    /// The validity bitmap of the physical elements, and the nulls in the
    /// window. Filler is valid.
    fn validity(&mut self, data: &ArrayData, lay: &Layout) -> (Option<Vec<u8>>, usize) {
        let mut bits = vec![0u8; lay.p.div_ceil(8)];
        let mut nulls = 0;
        for i in 0..lay.p {
            let valid = match lay.slot(i) {
                Some(j) => data.is_valid(j),
                None if !lay.in_window(i) && self.on(Variation::Garbage) => self.coin(),
                None => true,
            };
            if !valid && lay.in_window(i) {
                nulls += 1;
            }
            set_bit(&mut bits, i, valid);
        }
        self.unused_bits(&mut bits, lay.p);
        // "The pointer to the null bitmap buffer [...] MAY be NULL only if
        // ArrowArray.null_count is 0."
        if nulls == 0 && !self.chance(Variation::NullCountUnknown, 50) {
            return (None, 0);
        }
        (self.sized(bits), nulls)
    }

    /// Sets the bits after the last element, in the last byte.
    fn unused_bits(&mut self, bits: &mut [u8], p: usize) {
        if p % 8 != 0 && self.chance(Variation::SpareBits, 60) {
            let last = bits.len() - 1;
            bits[last] |= 0xffu8 << (p % 8);
        }
    }

    /// A buffer that may be NULL when it is empty.
    fn sized(&mut self, bytes: Vec<u8>) -> Option<Vec<u8>> {
        if bytes.is_empty() && self.chance(Variation::NullEmptyBuffers, 70) {
            None
        } else {
            Some(bytes)
        }
    }

    /// Fixed-width values (numbers, temporal, decimals, fixed-size binary,
    /// dictionary keys): zero filler, garbage under nulls and outside.
    fn fixed(
        &mut self,
        data: &ArrayData,
        lay: &Layout,
        w: usize,
        node: &mut Node,
    ) -> Result<(), String> {
        // Filler of a wide type needs memory its data did not: no rows
        // of a fixed-size binary 2^30 bytes wide take none, six filler
        // elements take 6 GiB (found by the validate fuzz target).
        let bytes = lay.p.saturating_mul(w);
        self.bytes = self.bytes.saturating_add(bytes);
        if self.bytes > Self::MAX_BYTES {
            return Err(format!(
                "{} elements {w} bytes wide ({} bytes in the tree so far) are beyond what the harness encodes ({} bytes in all)",
                lay.p,
                self.bytes,
                Self::MAX_BYTES
            ));
        }
        let src = &data.buffers()[0];
        let mut out = Vec::with_capacity(bytes);
        for i in 0..lay.p {
            match lay.slot(i) {
                Some(j) if data.is_null(j) && self.chance(Variation::Garbage, 60) => {
                    for _ in 0..w {
                        let b = self.byte();
                        out.push(b);
                    }
                }
                Some(j) => {
                    let at = (data.offset() + j) * w;
                    out.extend_from_slice(&src[at..at + w]);
                }
                None if !lay.in_window(i) && self.on(Variation::Garbage) => {
                    for _ in 0..w {
                        let b = self.byte();
                        out.push(b);
                    }
                }
                None => out.extend(std::iter::repeat_n(0u8, w)),
            }
        }
        node.buffers.push(self.sized(out));
        Ok(())
    }

    /// Utf8/Binary and their large forms: offsets (never NULL: "The offsets
    /// buffer contains length + 1 signed integers"), then the values.
    fn bytes<const W: usize>(&mut self, data: &ArrayData, lay: &Layout, node: &mut Node) {
        let offsets = &data.buffers()[0];
        let values = &data.buffers()[1];
        let mut out_values = Vec::new();
        // The first offset need not be 0.
        for _ in 0..self.below_if(Variation::Garbage, 6) {
            let b = self.ascii();
            out_values.push(b);
        }
        let mut out_offsets = Vec::with_capacity((lay.p + 1) * W);
        push_offset::<W>(&mut out_offsets, out_values.len());
        for i in 0..lay.p {
            match lay.slot(i) {
                Some(j) if data.is_null(j) && self.chance(Variation::Garbage, 50) => {
                    for _ in 0..self.below(4) {
                        let b = self.ascii();
                        out_values.push(b);
                    }
                }
                Some(j) => {
                    let s = read_offset::<W>(offsets, data.offset() + j);
                    let e = read_offset::<W>(offsets, data.offset() + j + 1);
                    out_values.extend_from_slice(&values[s..e]);
                }
                None => {}
            }
            push_offset::<W>(&mut out_offsets, out_values.len());
        }
        node.buffers.push(Some(out_offsets));
        node.buffers.push(self.sized(out_values));
    }

    /// Binary and utf-8 views: values of at most 12 bytes inline, longer
    /// ones in variadic buffers (several, some empty, when varied), then
    /// the int64 sizes of those buffers.
    fn views(&mut self, data: &ArrayData, lay: &Layout, node: &mut Node) -> Result<(), String> {
        let n_bufs = if self.on(Variation::VariadicBuffers) {
            1 + self.below(3) as usize
        } else {
            1
        };
        let mut bufs: Vec<Vec<u8>> = vec![Vec::new(); n_bufs];
        for b in bufs.iter_mut() {
            for _ in 0..self.below_if(Variation::Garbage, 9) {
                b.push(self.ascii());
            }
        }
        let mut views = Vec::with_capacity(lay.p * 16);
        for i in 0..lay.p {
            let value: Vec<u8> = match lay.slot(i) {
                Some(j) if data.is_null(j) && self.chance(Variation::Garbage, 50) => {
                    (0..self.below(13)).map(|_| self.ascii()).collect()
                }
                Some(j) => view_value(data, data.offset() + j)?,
                None => Vec::new(),
            };
            let mut view = [0u8; 16];
            view[..4].copy_from_slice(&(value.len() as i32).to_le_bytes());
            if value.len() <= 12 {
                view[4..4 + value.len()].copy_from_slice(&value);
            } else {
                let k = self.below(n_bufs as u64) as usize;
                view[4..8].copy_from_slice(&value[..4]);
                view[8..12].copy_from_slice(&(k as i32).to_le_bytes());
                view[12..16].copy_from_slice(&(bufs[k].len() as i32).to_le_bytes());
                bufs[k].extend_from_slice(&value);
            }
            views.extend_from_slice(&view);
        }
        // Plain exports no variadic buffer when nothing is out of line.
        if !self.on(Variation::VariadicBuffers) && bufs[0].is_empty() {
            bufs.clear();
        }
        node.buffers.push(self.sized(views));
        let sizes: Vec<u8> = bufs
            .iter()
            .flat_map(|b| (b.len() as i64).to_ne_bytes())
            .collect();
        for b in bufs {
            let b = self.sized(b);
            node.buffers.push(b);
        }
        node.buffers.push(self.sized(sizes));
        Ok(())
    }

    /// List, large list and map: offsets into a child that may hold
    /// elements no slot points at (before and after).
    fn list<const W: usize>(
        &mut self,
        data: &ArrayData,
        lay: &Layout,
        node: &mut Node,
    ) -> Result<(), String> {
        let offsets = &data.buffers()[0];
        let child = &data.child_data()[0];
        let (cf, cb) = if self.chance(Variation::LongChildren, 50) {
            (self.below(3) as usize, self.below(3) as usize)
        } else {
            (0, 0)
        };
        let first = read_offset::<W>(offsets, data.offset());
        let last = read_offset::<W>(offsets, data.offset() + lay.l);
        let mut out = Vec::with_capacity((lay.p + 1) * W);
        push_offset::<W>(&mut out, first + cf);
        for i in 0..lay.p {
            let end = match lay.slot(i) {
                Some(j) => read_offset::<W>(offsets, data.offset() + j + 1),
                None if i < lay.pre => first,
                None => last,
            };
            push_offset::<W>(&mut out, end + cf);
        }
        node.buffers.push(Some(out));
        node.children.push(self.node(child, cf, cb, Room::Any)?);
        Ok(())
    }

    /// List views: offsets and sizes into a child with spare elements.
    fn list_view<const W: usize>(
        &mut self,
        data: &ArrayData,
        lay: &Layout,
        node: &mut Node,
    ) -> Result<(), String> {
        let (offsets, sizes) = (&data.buffers()[0], &data.buffers()[1]);
        let child = &data.child_data()[0];
        let (cf, cb) = if self.chance(Variation::LongChildren, 50) {
            (self.below(3) as usize, self.below(3) as usize)
        } else {
            (0, 0)
        };
        let mut out_offsets = Vec::with_capacity(lay.p * W);
        let mut out_sizes = Vec::with_capacity(lay.p * W);
        for i in 0..lay.p {
            let (o, s) = match lay.slot(i) {
                Some(j) => (
                    read_offset::<W>(offsets, data.offset() + j) + cf,
                    read_offset::<W>(sizes, data.offset() + j),
                ),
                None => (0, 0),
            };
            push_offset::<W>(&mut out_offsets, o);
            push_offset::<W>(&mut out_sizes, s);
        }
        node.buffers.push(self.sized(out_offsets));
        node.buffers.push(self.sized(out_sizes));
        node.children.push(self.node(child, cf, cb, Room::Any)?);
        Ok(())
    }

    fn union(
        &mut self,
        data: &ArrayData,
        lay: &Layout,
        fields: &arrow_schema::UnionFields,
        mode: UnionMode,
        node: &mut Node,
    ) -> Result<(), String> {
        let ids: Vec<i8> = fields.iter().map(|(id, _)| id).collect();
        let type_ids = &data.buffers()[0];
        let mut out_ids = Vec::with_capacity(lay.p);
        for i in 0..lay.p {
            out_ids.push(match lay.slot(i) {
                Some(j) => type_ids[data.offset() + j],
                // A union with no children has no id to give filler; its
                // ids outside the window are never read.
                None => ids.first().map_or(0, |&id| id as u8),
            });
        }
        node.buffers.push(self.sized(out_ids));
        match mode {
            UnionMode::Sparse => {
                for child in data.child_data() {
                    let child = child.slice(data.offset(), lay.l);
                    let extra = usize::from(self.chance(Variation::LongChildren, 40));
                    let c =
                        self.node(&child, lay.pre, lay.p - lay.pre - lay.l + extra, Room::Any)?;
                    node.children.push(c);
                }
            }
            UnionMode::Dense => {
                let offsets = &data.buffers()[1];
                let filler = lay.p > lay.l;
                // Filler slots all point at one element of child 0 when
                // slots may share ("dense union slots may share a child
                // element"); with that variation off, each filler slot
                // gets an element of its own, before and after child 0's
                // data.
                let share = self.on(Variation::SharedUnionSlots);
                let own = !share && filler && !data.child_data().is_empty();
                let (pre_filler, post_filler) = if own {
                    (lay.pre, lay.p - lay.pre - lay.l)
                } else {
                    (0, 0)
                };
                let mut fronts = Vec::new();
                let mut extra0 = 0;
                for (k, child) in data.child_data().iter().enumerate() {
                    let min = usize::from(k == 0 && filler && share);
                    let extra = if self.chance(Variation::LongChildren, 40) {
                        self.below(3) as usize
                    } else {
                        0
                    };
                    let cb = if self.chance(Variation::LongChildren, 40) {
                        self.below(3) as usize
                    } else {
                        0
                    };
                    let (cf, cb) = if k == 0 {
                        extra0 = extra;
                        (min + extra + pre_filler, cb + post_filler)
                    } else {
                        (min + extra, cb)
                    };
                    fronts.push(cf);
                    node.children.push(self.node(child, cf, cb, Room::Any)?);
                }
                let mut out = Vec::with_capacity(lay.p * 4);
                // Filler before the window points at the element before
                // child 0's data, filler after it at the last element child
                // 0's slots reached: "The respective offsets for each child
                // value array must be in order / increasing" holds over the
                // whole node, filler included.
                let mut last0 = fronts.first().map_or(0, |f| f.saturating_sub(1));
                // Alone, the variation has no filler to share: slots of
                // equal value in one child share that child's element
                // (child -> the previous slot's source and exported offset).
                let mut previous: Vec<Option<(usize, usize)>> = vec![None; fronts.len()];
                let len0 = data.child_data().first().map_or(0, |c| c.len());
                for i in 0..lay.p {
                    let o = match lay.slot(i) {
                        Some(j) => {
                            let id = type_ids[data.offset() + j] as i8;
                            let k = ids.iter().position(|&x| x == id).ok_or("union type id")?;
                            let src = read_offset::<4>(offsets, data.offset() + j);
                            let mut o = src + fronts[k];
                            if self.share_equal {
                                if let Some((ps, po)) = previous[k] {
                                    let child = &data.child_data()[k];
                                    if child.slice(ps, 1) == child.slice(src, 1) {
                                        o = po;
                                    }
                                }
                                previous[k] = Some((src, o));
                            }
                            if k == 0 {
                                last0 = o;
                            }
                            o
                        }
                        None if own && i < lay.pre => extra0 + i,
                        None if own => fronts[0] + len0 + (i - lay.pre - lay.l),
                        None => last0,
                    };
                    out.extend_from_slice(&(o as i32).to_ne_bytes());
                }
                node.buffers.push(self.sized(out));
            }
        }
        Ok(())
    }

    /// Run-end encoding over the window: a filler run before and after the
    /// data's runs when there are filler elements, the data's runs cut to
    /// the slice. Children are exported with offset 0.
    fn run_end_encoded(
        &mut self,
        data: &ArrayData,
        lay: &Layout,
        node: &mut Node,
    ) -> Result<(), String> {
        let (run_ends, values) = (&data.child_data()[0], &data.child_data()[1]);
        let w = run_ends
            .data_type()
            .primitive_width()
            .ok_or("run end width")?;
        let re = |r: usize| -> usize {
            let at = (run_ends.offset() + r) * w;
            let b = &run_ends.buffers()[0][at..at + w];
            match w {
                2 => i16::from_ne_bytes([b[0], b[1]]) as usize,
                4 => i32::from_ne_bytes(b.try_into().unwrap()) as usize,
                _ => i64::from_ne_bytes(b.try_into().unwrap()) as usize,
            }
        };
        let (o, l) = (data.offset(), lay.l);
        let mut ends = Vec::new();
        let mut first_run = None;
        let mut last_run = 0;
        if lay.pre > 0 {
            ends.push(lay.pre);
        }
        let mut start = 0;
        for r in 0..run_ends.len() {
            let end = re(r);
            if end > o && start < o + l {
                first_run.get_or_insert(r);
                last_run = r;
                ends.push(lay.pre + end.min(o + l) - o);
            }
            start = end;
            if start >= o + l {
                break;
            }
        }
        if lay.p > lay.pre + l {
            ends.push(lay.p);
        }
        let selected = match first_run {
            Some(f) => values.slice(f, last_run - f + 1),
            None => values.slice(0, 0),
        };
        let mut out = Vec::with_capacity(ends.len() * w);
        for e in &ends {
            match w {
                2 => out.extend_from_slice(&(*e as i16).to_ne_bytes()),
                4 => out.extend_from_slice(&(*e as i32).to_ne_bytes()),
                _ => out.extend_from_slice(&(*e as i64).to_ne_bytes()),
            }
        }
        let n = ends.len() as i64;
        node.children.push(Node {
            length: n,
            offset: 0,
            null_count: 0,
            buffers: vec![None, self.sized(out)],
            children: Vec::new(),
            dictionary: None,
            shift: self.shift(),
            empty_shift: self.empty_shift(),
        });
        let vf = usize::from(lay.pre > 0);
        let vb = usize::from(lay.p > lay.pre + l);
        node.children
            .push(self.node(&selected, vf, vb, Room::None)?);
        Ok(())
    }
}

/// Where the data sits among a node's physical elements.
struct Layout {
    /// The node's offset (elements before the window).
    m: usize,
    /// Physical index of the first data element.
    pre: usize,
    /// Data elements.
    l: usize,
    /// Physical elements in all.
    p: usize,
    /// One past the window's last physical element.
    window_end: usize,
}

impl Layout {
    /// The data element at physical index `i`, if not filler.
    fn slot(&self, i: usize) -> Option<usize> {
        (i >= self.pre && i < self.pre + self.l).then(|| i - self.pre)
    }

    fn in_window(&self, i: usize) -> bool {
        i >= self.m && i < self.window_end
    }
}

fn get_bit(buf: &[u8], i: usize) -> bool {
    buf[i / 8] & (1 << (i % 8)) != 0
}

fn set_bit(buf: &mut [u8], i: usize, v: bool) {
    if v {
        buf[i / 8] |= 1 << (i % 8);
    } else {
        buf[i / 8] &= !(1 << (i % 8));
    }
}

fn read_offset<const W: usize>(buf: &[u8], i: usize) -> usize {
    let b = &buf[i * W..i * W + W];
    if W == 4 {
        i32::from_ne_bytes(b.try_into().unwrap()) as usize
    } else {
        i64::from_ne_bytes(b.try_into().unwrap()) as usize
    }
}

fn push_offset<const W: usize>(out: &mut Vec<u8>, v: usize) {
    if W == 4 {
        out.extend_from_slice(&(v as i32).to_ne_bytes());
    } else {
        out.extend_from_slice(&(v as i64).to_ne_bytes());
    }
}

/// The bytes of view element `i` (physical index).
fn view_value(data: &ArrayData, i: usize) -> Result<Vec<u8>, String> {
    let v = &data.buffers()[0][i * 16..i * 16 + 16];
    let len = i32::from_le_bytes(v[..4].try_into().unwrap()) as usize;
    if len <= 12 {
        return Ok(v[4..4 + len].to_vec());
    }
    let k = i32::from_le_bytes(v[8..12].try_into().unwrap()) as usize;
    let at = i32::from_le_bytes(v[12..16].try_into().unwrap()) as usize;
    let buf = data.buffers().get(1 + k).ok_or("view buffer index")?;
    Ok(buf[at..at + len].to_vec())
}

/// Bytes per element of a fixed-width type.
fn fixed_width(dt: &DataType) -> Option<usize> {
    match dt {
        DataType::FixedSizeBinary(n) => Some(*n as usize),
        DataType::Interval(arrow_schema::IntervalUnit::MonthDayNano) => Some(16),
        DataType::Interval(arrow_schema::IntervalUnit::DayTime) => Some(8),
        DataType::Interval(arrow_schema::IntervalUnit::YearMonth) => Some(4),
        _ => dt.primitive_width(),
    }
}

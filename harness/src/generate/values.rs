//! Deterministic data for a generated type: the same (type, length, null
//! mode, seed) always builds the same array. Values are drawn from a small
//! SplitMix64 generator so a scenario is reproducible from its seed alone;
//! proptest shrinks the lengths, null modes and seeds, not single values.

use std::sync::Arc;

use arrow_array::builder::{BinaryViewBuilder, StringViewBuilder};
use arrow_array::{
    make_array, new_empty_array, ArrayRef, BooleanArray, FixedSizeBinaryArray, FixedSizeListArray,
    GenericListArray, GenericListViewArray, LargeBinaryArray, LargeStringArray, MapArray,
    NullArray, OffsetSizeTrait, StringArray, StructArray, UnionArray,
};
use arrow_array::{Array, BinaryArray};
use arrow_buffer::{BooleanBuffer, Buffer, NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow_data::ArrayData;
use arrow_schema::{
    ArrowError, DataType, FieldRef, IntervalUnit, TimeUnit, UnionFields, UnionMode,
};

/// SplitMix64: tiny, fast, and stable across platforms and versions.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A value in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }

    /// A value in `-bound..=bound`.
    fn signed(&mut self, bound: i128) -> i128 {
        let span = (bound as u128) * 2 + 1;
        let r = ((self.next_u64() as u128) << 64 | self.next_u64() as u128) % span;
        let b = bound as u128;
        if r >= b {
            (r - b) as i128
        } else {
            -((b - r) as i128)
        }
    }

    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// How many nulls an array gets (only where its field is nullable).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nulls {
    /// No validity bitmap at all.
    None,
    /// About a quarter of the slots are null.
    Some,
    /// Every slot is null.
    All,
}

impl Nulls {
    /// What nested children get: an all-null parent still has children
    /// with a mix of values, so their layouts get exercised.
    fn for_children(self) -> Nulls {
        match self {
            Nulls::None => Nulls::None,
            _ => Nulls::Some,
        }
    }
}

fn validity(may_null: bool, len: usize, nulls: Nulls, rng: &mut Rng) -> Option<NullBuffer> {
    if !may_null {
        return None;
    }
    match nulls {
        Nulls::None => None,
        Nulls::All => Some(NullBuffer::new_null(len)),
        Nulls::Some => Some(NullBuffer::from_iter((0..len).map(|_| !rng.chance(25)))),
    }
}

fn is_valid(v: &Option<NullBuffer>, i: usize) -> bool {
    v.as_ref().is_none_or(|n| n.is_valid(i))
}

/// A short string drawn from ASCII, Latin-1, CJK and emoji, sometimes long
/// enough (> 12 bytes) to sit out of line in a view array.
fn text(rng: &mut Rng) -> String {
    const CHARS: [char; 8] = ['a', 'b', 'z', ' ', 'é', '名', '🎉', '0'];
    let n = match rng.below(10) {
        0 => 0,
        1..=5 => 1 + rng.below(5),
        _ => 13 + rng.below(28),
    };
    (0..n).map(|_| CHARS[rng.below(8) as usize]).collect()
}

fn bytes(rng: &mut Rng) -> Vec<u8> {
    let mut v = text(rng).into_bytes();
    if rng.chance(30) {
        v.extend([0u8, 0xff, 0x80]);
    }
    v
}

fn push_le(out: &mut Vec<u8>, v: i128, width: usize) {
    let b = v.to_le_bytes();
    out.extend_from_slice(&b[..width.min(16)]);
    if width > 16 {
        let ext = if v < 0 { 0xffu8 } else { 0 };
        out.extend(std::iter::repeat_n(ext, width - 16));
    }
}

/// The little-endian bytes of one fixed-width value of `dt`, chosen so the
/// value is valid for the type (decimals within precision, times within a
/// day, dates on day boundaries, floats finite).
fn fixed_value(dt: &DataType, rng: &mut Rng, out: &mut Vec<u8>) {
    use DataType::*;
    let pow10 = |p: u8| 10i128.checked_pow(p.min(38) as u32).unwrap_or(i128::MAX) - 1;
    match dt {
        Int8 | UInt8 => out.push(rng.next_u64() as u8),
        Int16 | UInt16 => out.extend((rng.next_u64() as u16).to_le_bytes()),
        Int32 | UInt32 => out.extend((rng.next_u64() as u32).to_le_bytes()),
        Int64 | UInt64 => out.extend(rng.next_u64().to_le_bytes()),
        Float16 => {
            let mut bits = rng.next_u64() as u16;
            if bits & 0x7C00 == 0x7C00 {
                bits &= !0x4000; // an all-ones exponent is Inf/NaN
            }
            out.extend(bits.to_le_bytes())
        }
        Float32 => out.extend(((rng.signed(40_000) as f32) / 4.0).to_le_bytes()),
        Float64 => out.extend(((rng.signed(4_000_000) as f64) / 8.0).to_le_bytes()),
        Decimal32(p, _) => push_le(out, rng.signed(pow10(*p)), 4),
        Decimal64(p, _) => push_le(out, rng.signed(pow10(*p)), 8),
        Decimal128(p, _) => push_le(out, rng.signed(pow10(*p)), 16),
        Decimal256(p, _) => push_le(out, rng.signed(pow10(*p)), 32),
        Date32 => push_le(out, rng.signed(100_000), 4),
        Date64 => push_le(out, rng.signed(100_000) * 86_400_000, 8),
        Time32(TimeUnit::Second) => push_le(out, rng.below(86_400) as i128, 4),
        Time32(_) => push_le(out, rng.below(86_400_000) as i128, 4),
        Time64(TimeUnit::Microsecond) => push_le(out, rng.below(86_400_000_000) as i128, 8),
        Time64(_) => push_le(out, rng.below(86_400_000_000_000) as i128, 8),
        Timestamp(..) | Duration(_) => push_le(out, rng.signed(1 << 50), 8),
        Interval(IntervalUnit::YearMonth) => push_le(out, rng.signed(2_000), 4),
        Interval(IntervalUnit::DayTime) => {
            push_le(out, rng.signed(100_000), 4);
            push_le(out, rng.signed(86_400_000), 4);
        }
        Interval(IntervalUnit::MonthDayNano) => {
            push_le(out, rng.signed(2_000), 4);
            push_le(out, rng.signed(100_000), 4);
            push_le(out, rng.signed(1 << 60), 8);
        }
        FixedSizeBinary(n) => out.extend((0..*n).map(|_| rng.next_u64() as u8)),
        _ => unreachable!("fixed_value on {dt}"),
    }
}

fn is_fixed(dt: &DataType) -> bool {
    use DataType::*;
    dt.is_primitive() || matches!(dt, FixedSizeBinary(_))
}

fn offsets<O: OffsetSizeTrait>(lens: &[usize]) -> OffsetBuffer<O> {
    let mut acc = 0usize;
    let mut v = Vec::with_capacity(lens.len() + 1);
    v.push(O::usize_as(0));
    for l in lens {
        acc += l;
        v.push(O::usize_as(acc));
    }
    OffsetBuffer::new(ScalarBuffer::from(v))
}

/// Element counts of a list-like array: 0 to 3 per slot; a null slot is
/// usually empty but not always (the spec allows either).
fn list_lens(len: usize, valid: &Option<NullBuffer>, rng: &mut Rng) -> Vec<usize> {
    (0..len)
        .map(|i| {
            if !is_valid(valid, i) && !rng.chance(20) {
                0
            } else {
                rng.below(4) as usize
            }
        })
        .collect()
}

fn list<O: OffsetSizeTrait>(
    field: &FieldRef,
    len: usize,
    v: Option<NullBuffer>,
    nulls: Nulls,
    rng: &mut Rng,
) -> Result<ArrayRef, ArrowError> {
    let lens = list_lens(len, &v, rng);
    let total = lens.iter().sum();
    let child = array(
        field.data_type(),
        field.is_nullable(),
        total,
        nulls.for_children(),
        rng,
    )?;
    Ok(Arc::new(GenericListArray::<O>::try_new(
        field.clone(),
        offsets::<O>(&lens),
        child,
        v,
    )?))
}

/// A list view whose slots point at their elements back to front, so
/// offsets are not monotonic (the spec allows any order).
fn list_view<O: OffsetSizeTrait>(
    field: &FieldRef,
    len: usize,
    v: Option<NullBuffer>,
    nulls: Nulls,
    rng: &mut Rng,
) -> Result<ArrayRef, ArrowError> {
    let sizes = list_lens(len, &v, rng);
    let total: usize = sizes.iter().sum();
    let mut offs = vec![0usize; len];
    let mut cursor = total;
    for i in 0..len {
        cursor -= sizes[i];
        offs[i] = cursor;
    }
    let child = array(
        field.data_type(),
        field.is_nullable(),
        total,
        nulls.for_children(),
        rng,
    )?;
    Ok(Arc::new(GenericListViewArray::<O>::try_new(
        field.clone(),
        ScalarBuffer::from(offs.into_iter().map(O::usize_as).collect::<Vec<_>>()),
        ScalarBuffer::from(sizes.into_iter().map(O::usize_as).collect::<Vec<_>>()),
        child,
        v,
    )?))
}

/// One array of `dt` with `len` slots. `may_null`: the field is nullable,
/// so the array may hold (logical) nulls; a non-nullable field never gets
/// any, at any depth that would show through.
pub fn array(
    dt: &DataType,
    may_null: bool,
    len: usize,
    nulls: Nulls,
    rng: &mut Rng,
) -> Result<ArrayRef, ArrowError> {
    use DataType::*;
    let has_validity = !matches!(dt, Null | Union(..) | RunEndEncoded(..));
    let v = if has_validity {
        validity(may_null, len, nulls, rng)
    } else {
        None
    };
    Ok(match dt {
        Null => Arc::new(NullArray::new(len)),
        Boolean => Arc::new(BooleanArray::new(
            BooleanBuffer::from_iter((0..len).map(|_| rng.chance(50))),
            v,
        )),
        _ if is_fixed(dt) => fixed(dt, len, v, rng)?,
        Utf8 | LargeUtf8 | Utf8View => strings(dt, len, v, rng),
        Binary | LargeBinary | BinaryView => binaries(dt, len, v, rng),
        List(f) => list::<i32>(f, len, v, nulls, rng)?,
        LargeList(f) => list::<i64>(f, len, v, nulls, rng)?,
        ListView(f) => list_view::<i32>(f, len, v, nulls, rng)?,
        LargeListView(f) => list_view::<i64>(f, len, v, nulls, rng)?,
        FixedSizeList(f, size) => {
            let child = array(
                f.data_type(),
                f.is_nullable(),
                len * *size as usize,
                nulls.for_children(),
                rng,
            )?;
            Arc::new(FixedSizeListArray::try_new(f.clone(), *size, child, v)?)
        }
        Struct(fields) => {
            let children = fields
                .iter()
                .map(|f| {
                    array(
                        f.data_type(),
                        f.is_nullable(),
                        len,
                        nulls.for_children(),
                        rng,
                    )
                })
                .collect::<Result<Vec<_>, _>>()?;
            Arc::new(StructArray::try_new(fields.clone(), children, v)?)
        }
        Map(entries, sorted) => map(entries, *sorted, len, v, nulls, rng)?,
        Union(fields, mode) => union(fields, *mode, may_null, len, nulls, rng)?,
        Dictionary(_, value) => dictionary(dt, value, may_null, len, v, nulls, rng)?,
        RunEndEncoded(run_ends, values) => {
            run_end_encoded(dt, run_ends, values, may_null, len, nulls, rng)?
        }
        other => new_empty_array(other),
    })
}

/// A fixed-width array (primitives, temporals, decimals, fixed-size
/// binary): `len` values drawn one after another into one buffer.
fn fixed(
    dt: &DataType,
    len: usize,
    v: Option<NullBuffer>,
    rng: &mut Rng,
) -> Result<ArrayRef, ArrowError> {
    let mut buf = Vec::new();
    for _ in 0..len {
        fixed_value(dt, rng, &mut buf);
    }
    if let DataType::FixedSizeBinary(n) = dt {
        Ok(Arc::new(FixedSizeBinaryArray::try_new(
            *n,
            Buffer::from_slice_ref(&buf),
            v,
        )?))
    } else {
        Ok(make_array(
            ArrayData::builder(dt.clone())
                .len(len)
                .add_buffer(Buffer::from_slice_ref(&buf))
                .nulls(v)
                .build()?,
        ))
    }
}

/// A utf8, large utf8 or utf8 view array: a text drawn for every slot
/// (null ones too, so the draws do not depend on the validity).
fn strings(dt: &DataType, len: usize, v: Option<NullBuffer>, rng: &mut Rng) -> ArrayRef {
    use DataType::*;
    let values: Vec<Option<String>> = (0..len)
        .map(|i| {
            let s = text(rng);
            is_valid(&v, i).then_some(s)
        })
        .collect();
    match dt {
        Utf8 => Arc::new(StringArray::from(values)),
        LargeUtf8 => Arc::new(LargeStringArray::from(values)),
        _ => {
            // Small blocks: out-of-line values span several
            // variadic buffers.
            let mut b = StringViewBuilder::new().with_fixed_block_size(64);
            for s in values {
                b.append_option(s);
            }
            Arc::new(b.finish())
        }
    }
}

/// A binary, large binary or binary view array: bytes drawn for every
/// slot (null ones too, so the draws do not depend on the validity).
fn binaries(dt: &DataType, len: usize, v: Option<NullBuffer>, rng: &mut Rng) -> ArrayRef {
    use DataType::*;
    let values: Vec<Option<Vec<u8>>> = (0..len)
        .map(|i| {
            let b = bytes(rng);
            is_valid(&v, i).then_some(b)
        })
        .collect();
    let refs: Vec<Option<&[u8]>> = values.iter().map(|b| b.as_deref()).collect();
    match dt {
        Binary => Arc::new(BinaryArray::from(refs)),
        LargeBinary => Arc::new(LargeBinaryArray::from(refs)),
        _ => {
            let mut b = BinaryViewBuilder::new().with_fixed_block_size(64);
            for s in refs {
                b.append_option(s);
            }
            Arc::new(b.finish())
        }
    }
}

/// A map array: list lengths drawn first, then distinct keys (`k0`,
/// `k1`, ... or numbers) per entry list, then the values.
fn map(
    entries: &FieldRef,
    sorted: bool,
    len: usize,
    v: Option<NullBuffer>,
    nulls: Nulls,
    rng: &mut Rng,
) -> Result<ArrayRef, ArrowError> {
    use DataType::*;
    let Struct(kv) = entries.data_type() else {
        unreachable!("map entries are a struct")
    };
    let lens = list_lens(len, &v, rng);
    let keys: ArrayRef = match kv[0].data_type() {
        Utf8 => Arc::new(StringArray::from_iter_values(
            lens.iter().flat_map(|&n| (0..n).map(|j| format!("k{j}"))),
        )),
        key => {
            let mut buf = Vec::new();
            for j in lens.iter().flat_map(|&n| 0..n) {
                let k = j as i128 * 3 - 4;
                push_le(&mut buf, k, key.primitive_width().unwrap_or(8));
            }
            let total = lens.iter().sum();
            make_array(
                ArrayData::builder(key.clone())
                    .len(total)
                    .add_buffer(Buffer::from_slice_ref(&buf))
                    .build()?,
            )
        }
    };
    let values = array(
        kv[1].data_type(),
        kv[1].is_nullable(),
        keys.len(),
        nulls.for_children(),
        rng,
    )?;
    let entries_array = StructArray::try_new(kv.clone(), vec![keys, values], None)?;
    Ok(Arc::new(MapArray::try_new(
        entries.clone(),
        offsets::<i32>(&lens),
        entries_array,
        v,
        sorted,
    )?))
}

/// A sparse or dense union array: a type ID drawn per slot, then the
/// children (a slot of a non-nullable union never selects an always-null
/// child).
fn union(
    fields: &UnionFields,
    mode: UnionMode,
    may_null: bool,
    len: usize,
    nulls: Nulls,
    rng: &mut Rng,
) -> Result<ArrayRef, ArrowError> {
    let ids: Vec<i8> = fields.iter().map(|(id, _)| id).collect();
    // Never an always-null child on a non-nullable union: the field would
    // otherwise hold nulls.
    let pick: Vec<i8> = fields
        .iter()
        .filter(|(_, f)| may_null || !super::types::always_null(f.data_type()))
        .map(|(id, _)| id)
        .collect();
    let pick = if pick.is_empty() { ids.clone() } else { pick };
    let type_ids: Vec<i8> = (0..len)
        .map(|_| pick[rng.below(pick.len() as u64) as usize])
        .collect();
    let child_may_null = |f: &FieldRef| f.is_nullable() && may_null;
    match mode {
        UnionMode::Sparse => {
            let children = fields
                .iter()
                .map(|(_, f)| array(f.data_type(), child_may_null(f), len, nulls, rng))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Arc::new(UnionArray::try_new(
                fields.clone(),
                ScalarBuffer::from(type_ids),
                None,
                children,
            )?))
        }
        UnionMode::Dense => {
            let mut counts = vec![0i32; ids.len()];
            let offs: Vec<i32> = type_ids
                .iter()
                .map(|t| {
                    let k = ids.iter().position(|i| i == t).unwrap_or(0);
                    counts[k] += 1;
                    counts[k] - 1
                })
                .collect();
            let children = fields
                .iter()
                .zip(&counts)
                .map(|((_, f), &n)| array(f.data_type(), child_may_null(f), n as usize, nulls, rng))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Arc::new(UnionArray::try_new(
                fields.clone(),
                ScalarBuffer::from(type_ids),
                Some(ScalarBuffer::from(offs)),
                children,
            )?))
        }
    }
}

/// A dictionary-encoded array: a small dictionary of `value`s, then an
/// index into it per slot.
fn dictionary(
    dt: &DataType,
    value: &DataType,
    may_null: bool,
    len: usize,
    v: Option<NullBuffer>,
    nulls: Nulls,
    rng: &mut Rng,
) -> Result<ArrayRef, ArrowError> {
    let DataType::Dictionary(index, _) = dt else {
        unreachable!("the caller passes a dictionary type")
    };
    let m = if len == 0 {
        rng.below(2) as usize
    } else {
        1 + rng.below(5) as usize
    };
    let values = array(value, may_null, m, nulls.for_children(), rng)?;
    let width = index.primitive_width().unwrap_or(4);
    let mut buf = Vec::new();
    for _ in 0..len {
        push_le(&mut buf, rng.below(m as u64) as i128, width);
    }
    Ok(make_array(
        ArrayData::builder(dt.clone())
            .len(len)
            .add_buffer(Buffer::from_slice_ref(&buf))
            .nulls(v)
            .child_data(vec![values.to_data()])
            .build()?,
    ))
}

/// A run-end encoded array: runs of 1 to 4 slots, then one value per
/// run.
fn run_end_encoded(
    dt: &DataType,
    run_ends: &FieldRef,
    values: &FieldRef,
    may_null: bool,
    len: usize,
    nulls: Nulls,
    rng: &mut Rng,
) -> Result<ArrayRef, ArrowError> {
    let mut ends = Vec::new();
    let mut at = 0usize;
    while at < len {
        at = (at + 1 + rng.below(4) as usize).min(len);
        ends.push(at);
    }
    let width = run_ends.data_type().primitive_width().unwrap_or(4);
    let mut buf = Vec::new();
    for e in &ends {
        push_le(&mut buf, *e as i128, width);
    }
    let ends_data = ArrayData::builder(run_ends.data_type().clone())
        .len(ends.len())
        .add_buffer(Buffer::from_slice_ref(&buf))
        .build()?;
    let vals = array(
        values.data_type(),
        values.is_nullable() && may_null,
        ends.len(),
        nulls.for_children(),
        rng,
    )?;
    Ok(make_array(
        ArrayData::builder(dt.clone())
            .len(len)
            .add_child_data(ends_data)
            .add_child_data(vals.to_data())
            .build()?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_array() {
        let dt = DataType::Utf8View;
        let a = array(&dt, true, 50, Nulls::Some, &mut Rng::new(7)).unwrap();
        let b = array(&dt, true, 50, Nulls::Some, &mut Rng::new(7)).unwrap();
        let c = array(&dt, true, 50, Nulls::Some, &mut Rng::new(8)).unwrap();
        assert_eq!(a.to_data(), b.to_data());
        assert_ne!(a.to_data(), c.to_data());
    }

    #[test]
    fn non_nullable_fields_get_no_nulls() {
        let dt = DataType::Int64;
        let a = array(&dt, false, 40, Nulls::All, &mut Rng::new(1)).unwrap();
        assert_eq!(a.null_count(), 0);
        let b = array(&dt, true, 40, Nulls::All, &mut Rng::new(1)).unwrap();
        assert_eq!(b.null_count(), 40);
    }

    #[test]
    fn floats_are_finite() {
        use arrow_array::cast::AsArray;
        use arrow_array::types::{Float16Type, Float32Type, Float64Type};
        let mut rng = Rng::new(3);
        let a = array(&DataType::Float16, false, 5000, Nulls::None, &mut rng).unwrap();
        assert!(a
            .as_primitive::<Float16Type>()
            .values()
            .iter()
            .all(|v| v.is_finite()));
        let a = array(&DataType::Float32, false, 5000, Nulls::None, &mut rng).unwrap();
        assert!(a
            .as_primitive::<Float32Type>()
            .values()
            .iter()
            .all(|v| v.is_finite()));
        let a = array(&DataType::Float64, false, 5000, Nulls::None, &mut rng).unwrap();
        assert!(a
            .as_primitive::<Float64Type>()
            .values()
            .iter()
            .all(|v| v.is_finite()));
    }
}

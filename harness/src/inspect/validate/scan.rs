//! Scanning buffer contents at memory bandwidth: integers read in any
//! alignment and native endianness, order checks in blocks, set-bit
//! counts (AVX2 where the CPU has it), run ends and dictionary indices.

use std::fmt;

/// Integer types read from buffers (native endianness, any alignment).
pub(super) trait Int: Copy + Ord + fmt::Display {
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
pub(super) const BLOCK: usize = 4096;

/// Index `i >= 1` of the first element of `bytes` (n values of `T`) with
/// `v[i] < v[i-1]` (or `<=` when `STRICT`), if any.
pub(super) fn first_unordered<T: Int, const STRICT: bool>(bytes: &[u8]) -> Option<usize> {
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

pub(super) fn value_at<T: Int>(bytes: &[u8], i: usize) -> T {
    T::load(bytes.get(i * T::SIZE..(i + 1) * T::SIZE).unwrap_or(&[]))
}

/// Set bits in bits `[first, first + len)` of `bytes` (LSB numbering).
pub(super) fn count_set_bits(bytes: &[u8], first: usize, len: usize) -> usize {
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
pub(super) fn popcount_portable(b: &[u8]) -> usize {
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
pub(super) unsafe fn popcount_avx2(b: &[u8]) -> usize {
    popcount_portable(b)
}

/// Set bits in `b`, a 64-bit word at a time.
pub(super) fn popcount(b: &[u8]) -> usize {
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
pub(super) fn bit_set(bytes: &[u8], first: usize, i: usize) -> bool {
    let k = first + i;
    bytes.get(k / 8).is_some_and(|b| b & (1 << (k % 8)) != 0)
}

/// The first run end problem: not positive, not strictly increasing, or the
/// last below `end` (offset + length of the parent).
pub(super) fn run_end_problem<T: Int>(bytes: &[u8], end: usize) -> Option<String> {
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
pub(super) fn first_bad_index<T: Int>(
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

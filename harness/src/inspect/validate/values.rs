//! What the values of a node hold, beyond its layout: utf8 values are
//! UTF-8, decimals fit their precision, date64 values are whole days, times
//! lie within one day. Null slots may hold anything and are never read as
//! values.
//!
//! Each check scans a block at a time without looking at the validity
//! bitmap (a fast path with no early exit); a block with a suspect value is
//! rescanned slot by slot, skipping null slots, to find the first culprit.

use super::*;

/// The first slot (relative to the node's offset) of `values` (`width`
/// bytes each) that is valid and `bad`, if any.
fn first_bad_slot(
    values: &[u8],
    width: usize,
    validity: Option<(&[u8], usize)>,
    bad: impl Fn(&[u8]) -> bool,
) -> Option<usize> {
    for (b, block) in values.chunks(BLOCK * width).enumerate() {
        let suspect = block.chunks_exact(width).fold(false, |acc, v| acc | bad(v));
        if !suspect {
            continue;
        }
        let found = block.chunks_exact(width).enumerate().position(|(k, v)| {
            let slot = b * BLOCK + k;
            bad(v) && validity.is_none_or(|(bits, first)| bit_set(bits, first, slot))
        });
        if let Some(k) = found {
            return Some(b * BLOCK + k);
        }
    }
    None
}

/// 10^p as a 256-bit magnitude (high, low), for p <= 76.
fn pow10_u256(p: u32) -> (u128, u128) {
    let (mut hi, mut lo) = (0u128, 1u128);
    for _ in 0..p {
        // (hi, lo) * 10, in 64-bit halves of lo to carry into hi.
        let lo_lo = (lo & u128::from(u64::MAX)) * 10;
        let lo_hi = (lo >> 64) * 10 + (lo_lo >> 64);
        lo = (lo_hi << 64) | (lo_lo & u128::from(u64::MAX));
        hi = hi * 10 + (lo_hi >> 64);
    }
    (hi, lo)
}

/// 10^p as (high, low), for the tests of other modules.
#[cfg(test)]
pub(super) fn pow10_for_tests(p: u32) -> (u128, u128) {
    pow10_u256(p)
}

/// The magnitude of a little-endian two's complement 256-bit integer, as
/// (high, low).
fn abs_i256(v: &[u8]) -> (u128, u128) {
    let lo = u128::from_le_bytes(v[0..16].try_into().unwrap_or_default());
    let hi = u128::from_le_bytes(v[16..32].try_into().unwrap_or_default());
    if (hi as i128) >= 0 {
        return (hi, lo);
    }
    // Two's complement negation: invert and add one.
    let (lo, carry) = (!lo).overflowing_add(1);
    (!hi + u128::from(carry), lo)
}

/// The largest precision a decimal of `bit_width` bits can hold.
pub(super) fn max_precision(bit_width: u32) -> u32 {
    match bit_width {
        32 => 9,
        64 => 18,
        128 => 38,
        _ => 76,
    }
}

impl Node<'_> {
    /// The values of a fixed-width node whose values buffer checked out:
    /// decimals within their precision, date64 values whole days, time32 and
    /// time64 values within one day.
    ///
    /// # Safety
    /// Buffer 1 holds `end` values of `width` bytes (non-NULL unless that is
    /// 0 bytes).
    pub(super) unsafe fn fixed_values(
        &self,
        f: &Format,
        bufs: &Buffers<'_>,
        width: usize,
        validity: Option<(&[u8], usize)>,
        sink: &mut Sink,
    ) {
        if !matches!(
            f,
            Format::Decimal { .. } | Format::Date64 | Format::Time32(_) | Format::Time64(_)
        ) {
            return;
        }
        let (offset, end, at) = (self.offset, self.end, self.at);
        let required = end * width;
        // SAFETY: forwarded from the caller: `required` bytes, of which
        // [offset, end) values are read.
        let values = unsafe { bufs.region(1, "values", required, offset * width, required, sink) };
        let Some(values) = values else {
            return;
        };
        match *f {
            Format::Decimal {
                precision,
                bit_width,
                ..
            } if precision >= 1 && precision <= max_precision(bit_width) => {
                if let Some((slot, shown)) = decimal_beyond(values, width, precision, validity) {
                    sink.push(
                        ARRAY_DECIMAL_PRECISION,
                        at,
                        format!(
                            "slot {}: the unscaled value {shown} has more than {precision} digits, the precision the format declares",
                            offset + slot
                        ),
                    );
                }
            }
            Format::Date64 => {
                const DAY_MS: i64 = 86_400_000;
                let bad = first_bad_slot(values, 8, validity, |v| i64::load(v) % DAY_MS != 0);
                if let Some(slot) = bad {
                    let v = i64::load(&values[slot * 8..slot * 8 + 8]);
                    sink.push(
                        ARRAY_DATE64_DAYS,
                        at,
                        format!(
                            "slot {}: date64 value {v} ms is not a whole number of days (a multiple of 86400000): {} ms past midnight",
                            offset + slot,
                            v.rem_euclid(DAY_MS)
                        ),
                    );
                }
            }
            Format::Time32(unit) => {
                let day = day_in(unit);
                let bad = first_bad_slot(values, 4, validity, |v| {
                    let t = i64::from(i32::load(v));
                    t < 0 || t >= day
                });
                if let Some(slot) = bad {
                    let v = i32::load(&values[slot * 4..slot * 4 + 4]);
                    time_outside_day(offset + slot, i64::from(v), unit, at, sink);
                }
            }
            Format::Time64(unit) => {
                let day = day_in(unit);
                let bad = first_bad_slot(values, 8, validity, |v| {
                    let t = i64::load(v);
                    t < 0 || t >= day
                });
                if let Some(slot) = bad {
                    let v = i64::load(&values[slot * 8..slot * 8 + 8]);
                    time_outside_day(offset + slot, v, unit, at, sink);
                }
            }
            _ => {}
        }
    }
}

/// The first valid decimal of `values` whose magnitude has more than
/// `precision` digits, with its value in words.
fn decimal_beyond(
    values: &[u8],
    width: usize,
    precision: u32,
    validity: Option<(&[u8], usize)>,
) -> Option<(usize, String)> {
    let slot = match width {
        4 => {
            let limit = 10u32.pow(precision);
            first_bad_slot(values, 4, validity, |v| {
                i32::load(v).unsigned_abs() >= limit
            })?
        }
        8 => {
            let limit = 10u64.pow(precision);
            first_bad_slot(values, 8, validity, |v| {
                i64::load(v).unsigned_abs() >= limit
            })?
        }
        16 => {
            let limit = 10u128.pow(precision);
            first_bad_slot(values, 16, validity, |v| {
                i128::from_le_bytes(v.try_into().unwrap_or_default()).unsigned_abs() >= limit
            })?
        }
        32 => {
            let limit = pow10_u256(precision);
            first_bad_slot(values, 32, validity, |v| abs_i256(v) >= limit)?
        }
        _ => return None,
    };
    let v = &values[slot * width..(slot + 1) * width];
    let shown = match width {
        4 => i32::load(v).to_string(),
        8 => i64::load(v).to_string(),
        16 => i128::from_le_bytes(v.try_into().unwrap_or_default()).to_string(),
        _ => format!(
            "0x{}",
            v.iter()
                .rev()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        ),
    };
    Some((slot, shown))
}

/// One day in a time unit.
fn day_in(unit: TimeUnit) -> i64 {
    match unit {
        TimeUnit::Second => 86_400,
        TimeUnit::Millisecond => 86_400_000,
        TimeUnit::Microsecond => 86_400_000_000,
        TimeUnit::Nanosecond => 86_400_000_000_000,
    }
}

fn time_outside_day(slot: usize, v: i64, unit: TimeUnit, at: &str, sink: &mut Sink) {
    sink.push(
        ARRAY_TIME_RANGE,
        at,
        format!(
            "slot {slot}: time value {v} ({unit:?}s since midnight) is outside one day, [0, {})",
            day_in(unit)
        ),
    );
}

impl Node<'_> {
    /// UTF-8 validity of a utf8 or large utf8 node's non-null values:
    /// each run of consecutive valid slots is validated as one byte range,
    /// and every offset inside the run must start a character (so each
    /// value on its own is UTF-8); a run that fails is rescanned value by
    /// value to name the first culprit.
    ///
    /// `offsets` holds entries `[offset, end]`, already found
    /// non-decreasing and within `data` (the data buffer from byte 0).
    pub(super) fn utf8_values<T: Int>(
        &self,
        offsets: &[u8],
        data: &[u8],
        validity: Option<(&[u8], usize)>,
        sink: &mut Sink,
    ) {
        let n = self.length;
        let off = |k: usize| value_at::<T>(offsets, k).to_i64() as usize;
        // The fast path, for data that is UTF-8 throughout (garbage under
        // null slots is rare): one pass over every byte the offsets reach,
        // then every inner offset must start a character, null slots' or
        // not. Either failing sends the array down the exact path below.
        // ASCII throughout needs no boundary check: every byte starts a
        // character.
        let (first, last) = (off(0), off(n));
        let range = data.get(first..last).unwrap_or(&[]);
        if range.is_ascii()
            || (simdutf8::basic::from_utf8(range).is_ok()
                && all_offsets_start_characters::<T>(offsets, data, last))
        {
            return;
        }
        let valid = |k: usize| validity.is_none_or(|(bits, first)| bit_set(bits, first, k));
        let mut k = 0;
        while k < n {
            if !valid(k) {
                k += 1;
                continue;
            }
            let start = k;
            while k < n && valid(k) {
                k += 1;
            }
            let (s, e) = (off(start), off(k));
            let run = data.get(s..e).unwrap_or(&[]);
            let whole = simdutf8::basic::from_utf8(run).is_ok()
                && (start + 1..k).all(|j| {
                    // A byte 0x80..=0xBF continues a character.
                    data.get(off(j)).is_none_or(|&b| (b as i8) >= -64)
                });
            if whole {
                continue;
            }
            for j in start..k {
                let value = data.get(off(j)..off(j + 1)).unwrap_or(&[]);
                if let Err(e) = simdutf8::compat::from_utf8(value) {
                    sink.push(
                        ARRAY_UTF8_VALID,
                        self.at,
                        format!(
                            "slot {}: the value's {} bytes are not UTF-8 (bytes {} from byte {}: {:02x?})",
                            self.offset + j,
                            value.len(),
                            e.error_len().unwrap_or(value.len() - e.valid_up_to()),
                            e.valid_up_to(),
                            &value[e.valid_up_to()..value.len().min(e.valid_up_to() + 4)]
                        ),
                    );
                    return;
                }
            }
        }
    }
}

/// Does every inner offset (entries 1..n of `offsets`) below `last` point
/// at a byte that starts a character (not 0x80..=0xBF)? Block-wise, no
/// early exit inside a block.
fn all_offsets_start_characters<T: Int>(offsets: &[u8], data: &[u8], last: usize) -> bool {
    let inner = offsets
        .get(T::SIZE..offsets.len().saturating_sub(T::SIZE))
        .unwrap_or(&[]);
    let data = &data[..last.min(data.len())];
    inner.chunks(BLOCK * T::SIZE).all(|block| {
        !block.chunks_exact(T::SIZE).fold(false, |bad, o| {
            // Offsets at or past `last` (the end) start nothing.
            let o = T::load(o).to_i64() as usize;
            bad | data.get(o).is_some_and(|&b| (b as i8) < -64)
        })
    })
}

/// The first non-UTF-8 value of a utf8 view node, in words.
pub(super) fn utf8_view_problem(slot: usize, value: &[u8]) -> Option<String> {
    let e = simdutf8::compat::from_utf8(value).err()?;
    Some(format!(
        "slot {slot}: the view's value of {} bytes is not UTF-8 (bytes {} from byte {}: {:02x?})",
        value.len(),
        e.error_len().unwrap_or(value.len() - e.valid_up_to()),
        e.valid_up_to(),
        &value[e.valid_up_to()..value.len().min(e.valid_up_to() + 4)]
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pow10_u256_matches_u128_below_39_digits() {
        for p in 0..=38 {
            assert_eq!(pow10_u256(p), (0, 10u128.pow(p)), "10^{p}");
        }
        // 10^39 = 10^38 * 10 overflows u128 into the high half.
        let (hi, lo) = pow10_u256(39);
        assert!(hi > 0);
        let back = (hi as f64) * 2f64.powi(128) + lo as f64;
        assert!((back / 1e39 - 1.0).abs() < 1e-12);
    }

    #[test]
    fn abs_i256_negates_twos_complement() {
        let mut minus_one = [0xffu8; 32];
        assert_eq!(abs_i256(&minus_one), (0, 1));
        minus_one[0] = 0xfe; // -2
        assert_eq!(abs_i256(&minus_one), (0, 2));
        let mut big = [0u8; 32];
        big[16] = 1; // 2^128
        assert_eq!(abs_i256(&big), (1, 0));
    }
}

//! The `dlpack_reader` fuzz target's oracle: bytes become a managed tensor
//! (legacy or versioned) whose members are arbitrary (any ndim, dtype,
//! version, flags, byte_offset, shape and strides values) and whose
//! pointers lead into buffers of the input, to NULL, one past their end,
//! or to unmapped addresses. The harness's capsule reader
//! ([`crate::dlpack::reader`]) must never crash or panic on it, must name
//! only DLPack rules, must read a well-formed tensor, and every element it
//! reads must be the bytes an independent index walk finds in the input.

use std::time::Instant;

use super::Outcome;
use crate::abi::dlpack::{
    DLManagedTensor, DLManagedTensorVersioned, LEGACY_TENSOR_OFFSET, VERSIONED_TENSOR_OFFSET,
};
use crate::dlpack::reader;
use crate::dlpack::{elements, for_each_index, row_major_strides, DType};
use crate::report::{Case, Verdict};

/// An address no process maps (the first page), and one far away.
const WILD: [usize; 2] = [0x10, 0xdead_beef_0000];

struct Input<'a> {
    data: &'a [u8],
    at: usize,
}

impl Input<'_> {
    fn byte(&mut self) -> u8 {
        let b = self.data.get(self.at).copied().unwrap_or(0);
        self.at += 1;
        b
    }
    fn rest(&self) -> &[u8] {
        self.data.get(self.at..).unwrap_or(&[])
    }
}

/// How a pointer member is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ptr {
    Valid,
    Null,
    Wild(usize),
    PastEnd,
}

fn ptr_mode(bits: u8, salt: u8) -> Ptr {
    match bits & 3 {
        0 => Ptr::Valid,
        1 => Ptr::Null,
        2 => Ptr::Wild(WILD[(salt & 1) as usize]),
        _ => Ptr::PastEnd,
    }
}

fn address(mode: Ptr, buf: &[u8]) -> usize {
    match mode {
        Ptr::Valid => buf.as_ptr() as usize,
        Ptr::Null => 0,
        Ptr::Wild(a) => a,
        Ptr::PastEnd => buf.as_ptr() as usize + buf.len(),
    }
}

fn i64_bytes(v: &[i64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_ne_bytes()).collect()
}

/// Checks one input.
pub fn check(bytes: &[u8]) -> Outcome {
    let start = Instant::now();
    let t = decode(bytes);
    let shape_buf = i64_bytes(&t.shape);
    let strides_buf = i64_bytes(&t.strides);
    let managed = managed_bytes(&t, &shape_buf, &strides_buf);
    let (obs, findings) = reader::read(managed.as_ptr() as usize, t.versioned);

    let mut problems = Vec::new();
    for f in &findings {
        if crate::rules::dlpack::DLPACK_RULES
            .iter()
            .all(|r| r.id != f.rule)
        {
            problems.push(format!("the reader names {}, not a DLPack rule", f.rule));
        }
    }
    judge_read(&t, obs.as_ref(), &findings, &mut problems);
    case(bytes, problems, start)
}

/// The tensor one input describes: how each pointer is set, the members'
/// values, and the arena the data pointer points into.
struct Described {
    versioned: bool,
    /// A versioned tensor of major version 2 (a layout the reader must not
    /// follow).
    major2: bool,
    minor: u32,
    shape_mode: Ptr,
    strides_mode: Ptr,
    data_mode: Ptr,
    ndim: i32,
    /// `None`: a dtype code the harness does not know.
    dtype: Option<DType>,
    byte_offset: u64,
    flags: u64,
    shape: Vec<i64>,
    strides: Vec<i64>,
    arena: Vec<u8>,
}

/// Reads the tensor an input describes, byte by byte: a kind byte (the
/// version and the pointer modes), ndim, dtype, minor version, byte
/// offset, flags, the shape and the strides; the rest is the arena.
fn decode(bytes: &[u8]) -> Described {
    let mut input = Input { data: bytes, at: 0 };
    let kind = input.byte();
    let versioned = kind & 1 != 0;
    let (shape_mode, strides_mode, data_mode) = (
        ptr_mode(kind >> 1, kind),
        ptr_mode(kind >> 3, kind >> 1),
        ptr_mode(kind >> 5, kind >> 2),
    );
    let major2 = kind & 0x80 != 0;
    let ndim = (input.byte() % 9) as i32 - 2;
    let dtype_pick = input.byte() % 16;
    let dtype = DType::ALL.get(dtype_pick as usize).copied();
    let minor = (input.byte() % 5) as u32;
    let byte_offset = input.byte() as u64;
    let flags = input.byte() as u64;
    let n = ndim.max(0) as usize;
    let shape: Vec<i64> = (0..n).map(|_| (input.byte() % 8) as i64 - 1).collect();
    // Small strides, and (from the top bytes) extreme ones that overflow
    // any offset arithmetic that is not checked.
    let strides: Vec<i64> = (0..n)
        .map(|_| match input.byte() {
            250..=252 => 1 << 62,
            253..=255 => -(1 << 62),
            b => (b % 9) as i64 - 4,
        })
        .collect();
    let arena = input.rest().to_vec();
    Described {
        versioned,
        major2,
        minor,
        shape_mode,
        strides_mode,
        data_mode,
        ndim,
        dtype,
        byte_offset,
        flags,
        shape,
        strides,
        arena,
    }
}

/// The bytes of the managed tensor (versioned or legacy) that `t`
/// describes, its shape and strides pointers set from `shape_buf` and
/// `strides_buf` as their modes say.
fn managed_bytes(t: &Described, shape_buf: &[u8], strides_buf: &[u8]) -> Vec<u8> {
    let data_addr = address(t.data_mode, &t.arena);
    let dl = t
        .dtype
        .map(DType::dl)
        .unwrap_or(crate::abi::dlpack::DLDataType {
            code: 200,
            bits: 8,
            lanes: 1,
        });
    // The DLTensor's bytes, member by member at their offsets.
    let mut tensor = vec![0u8; std::mem::size_of::<crate::abi::dlpack::DLTensor>()];
    let put = |buf: &mut Vec<u8>, at: usize, b: &[u8]| buf[at..at + b.len()].copy_from_slice(b);
    put(&mut tensor, 0, &data_addr.to_ne_bytes());
    put(&mut tensor, 8, &1i32.to_ne_bytes());
    put(&mut tensor, 12, &0i32.to_ne_bytes());
    put(&mut tensor, 16, &t.ndim.to_ne_bytes());
    put(&mut tensor, 20, &[dl.code, dl.bits]);
    put(&mut tensor, 22, &dl.lanes.to_ne_bytes());
    put(
        &mut tensor,
        24,
        &address(t.shape_mode, shape_buf).to_ne_bytes(),
    );
    put(
        &mut tensor,
        32,
        &address(t.strides_mode, strides_buf).to_ne_bytes(),
    );
    put(&mut tensor, 40, &t.byte_offset.to_ne_bytes());
    if t.versioned {
        let mut m = vec![0u8; std::mem::size_of::<DLManagedTensorVersioned>()];
        put(&mut m, 0, &(if t.major2 { 2u32 } else { 1 }).to_ne_bytes());
        put(&mut m, 4, &t.minor.to_ne_bytes());
        put(&mut m, 24, &t.flags.to_ne_bytes());
        put(&mut m, VERSIONED_TENSOR_OFFSET, &tensor);
        m
    } else {
        let mut m = vec![0u8; std::mem::size_of::<DLManagedTensor>()];
        put(&mut m, LEGACY_TENSOR_OFFSET, &tensor);
        m
    }
}

/// The oracle: what the reader returned (`obs`, `findings`) against what
/// the input holds. Values read must be the input's own bytes, where the
/// reader could follow shape and strides to them; a well-formed tensor
/// must be read. What it finds goes to `problems`.
fn judge_read(
    t: &Described,
    obs: Option<&reader::Observed>,
    findings: &[reader::Finding],
    problems: &mut Vec<String>,
) {
    let strides_eff = match t.strides_mode {
        Ptr::Null => row_major_strides(&t.shape),
        _ => t.strides.clone(),
    };
    let size = t.dtype.map_or(1, DType::size) as i64;
    // Where each element lies in the arena, if it lies there whole.
    let element_at = |idx: &[i64]| -> Option<usize> {
        let mut off = t.byte_offset as i64;
        for (i, s) in idx.iter().zip(&strides_eff) {
            off = off.checked_add(i.checked_mul(*s)?.checked_mul(size)?)?;
        }
        (t.data_mode == Ptr::Valid && off >= 0 && off + size <= t.arena.len() as i64)
            .then_some(off as usize)
    };
    // Shape and strides the reader could follow to the input's own
    // values (a pointer past their end or to a wild address reads
    // whatever lies there, which is not this oracle's to predict).
    let members_known = t.ndim <= 0
        || (t.shape_mode == Ptr::Valid && matches!(t.strides_mode, Ptr::Valid | Ptr::Null));
    match obs.and_then(|o| o.values.as_ref()) {
        Some(_) if !members_known => {}
        Some(v) => {
            let sz = v.dtype.size();
            if v.values.len() != elements(&v.shape) * sz || v.shape != t.shape {
                problems.push(format!(
                    "the reader returned {} bytes for shape {:?} (input shape {:?})",
                    v.values.len(),
                    v.shape,
                    t.shape
                ));
            } else {
                let mut k = 0usize;
                for_each_index(&t.shape, |idx| {
                    if let Some(at) = element_at(idx) {
                        if v.values[k * sz..(k + 1) * sz] != t.arena[at..at + sz]
                            && problems.len() < 3
                        {
                            problems.push(format!(
                                "element {idx:?}: the reader read other bytes than the input holds"
                            ));
                        }
                    }
                    k += 1;
                });
            }
        }
        None => {
            // A well-formed tensor must be read: a version-1 (or legacy)
            // tensor of a known dtype with valid shape and strides (or NULL
            // strides where allowed) whose every element lies in the arena.
            let mut all_inside = true;
            for_each_index(&t.shape, |idx| all_inside &= element_at(idx).is_some());
            let well_formed = t.dtype.is_some()
                && !(t.versioned && t.major2)
                && t.ndim >= 0
                && (t.ndim == 0 || t.shape_mode == Ptr::Valid)
                && (t.ndim == 0
                    || t.strides_mode == Ptr::Valid
                    || (t.strides_mode == Ptr::Null && !(t.versioned && t.minor >= 2)))
                && (elements(&t.shape) == 0 || (all_inside && t.data_mode == Ptr::Valid))
                && t.shape.iter().all(|&d| d >= 0);
            if well_formed {
                problems.push(format!(
                    "a well-formed tensor was not read (findings: {:?})",
                    findings.iter().map(|f| f.rule).collect::<Vec<_>>()
                ));
            }
        }
    }
}

/// The case one input makes: failed when the oracle found problems.
fn case(bytes: &[u8], problems: Vec<String>, start: Instant) -> Outcome {
    let id = format!(
        "dlpack_reader/{}",
        bytes
            .iter()
            .take(12)
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    );
    let verdict = if problems.is_empty() {
        Verdict::Pass
    } else {
        Verdict::Fail
    };
    Outcome::Checked(Box::new(Case {
        id,
        path: "dlpack_reader".into(),
        scenario: String::new(),
        batch: None,
        slice: None,
        verdict,
        message: (!problems.is_empty())
            .then(|| "the DLPack capsule reader misread its input".into()),
        differences: problems,
        duration_us: start.elapsed().as_micros() as u64,
        replay: super::cases::replay_prefix(super::Target::DlpackReader),
        output: None,
        changed: Vec::new(),
        checked: vec!["fuzz.dlpack-reader.reads-what-is-there".into()],
        violations: Vec::new(),
        not_exercised: Vec::new(),
        flaky: Vec::new(),
        view: None,
    }))
}

/// Seeds: every dtype in a few shapes, well-formed and not.
pub fn seeds() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for (d, _) in DType::ALL.iter().enumerate() {
        for (name, kind, ndim, shape, strides) in [
            ("v1-2d", 0b0000_0001u8, 4u8, vec![4u8, 3], vec![7u8, 5]),
            ("legacy-1d", 0b0000_0000, 3, vec![6], vec![5]),
            ("null-strides", 0b0000_1001, 4, vec![3, 2], vec![0, 0]),
            ("0d", 0b0000_0001, 2, vec![], vec![]),
            ("wild-data", 0b0100_0001, 3, vec![5], vec![5]),
        ] {
            let mut b = vec![kind, ndim, d as u8, 3, 0, 0];
            b.extend(shape);
            b.extend(strides);
            b.extend((0..96u8).map(|x| x.wrapping_mul(37)));
            out.push((format!("{name}-{}", DType::ALL[d].name()), b));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_are_read_right_and_arbitrary_bytes_never_crash_the_reader() {
        for (name, s) in seeds() {
            match check(&s) {
                Outcome::Checked(c) => {
                    assert_eq!(c.verdict, Verdict::Pass, "{name}: {:?}", c.differences)
                }
                Outcome::Ignored(why) => panic!("{name}: {why}"),
            }
        }
        // Strides near 2^62 (the reader's offset arithmetic must not
        // overflow on them): read or refused, never a panic.
        for kind in [0u8, 1, 9] {
            let mut b = vec![kind, 6, 4, 3, 0, 0, 3, 3, 3, 3, 250, 251, 252, 250];
            b.extend(0..64u8);
            match check(&b) {
                Outcome::Checked(c) => assert_eq!(c.verdict, Verdict::Pass, "{:?}", c.differences),
                Outcome::Ignored(why) => panic!("{why}"),
            }
        }
        // Every first byte (every pointer mode, both kinds, major 2), over
        // a few bodies.
        for kind in 0..=255u8 {
            for body in [
                &[4u8, 1, 4, 8, 0, 3, 2, 5, 5][..],
                &[8, 9, 1, 255, 3, 7, 7, 7, 7, 0, 1, 2, 3],
            ] {
                let mut b = vec![kind];
                b.extend_from_slice(body);
                b.extend(0..64u8);
                if let Outcome::Checked(c) = check(&b) {
                    assert_eq!(c.verdict, Verdict::Pass, "{b:?}: {:?}", c.differences);
                }
            }
        }
    }
}

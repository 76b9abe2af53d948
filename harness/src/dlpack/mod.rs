//! DLPack certification (`arrowcert certify --dlpack`): the same harness
//! for the Array API's data interchange protocol. The harness plays the
//! consumer against a library's `__dlpack__` (its own capsule reader,
//! [`reader`]) and the producer against a library's `from_dlpack` (its own
//! instrumented tensors, [`tensor`]); [`engine`] plans and judges the cases
//! under the rules of [`crate::rules::dlpack`], [`bridge`] talks to the
//! Python adapter bridge, and [`run`] hands the cases to the one runner's
//! worker processes ([`crate::run`]), where [`suite`] runs them, so a
//! library that crashes costs one case.

pub mod bridge;
pub mod crossing;
pub mod engine;
pub mod reader;
pub mod run;
pub mod suite;
pub mod tensor;
pub mod trampoline;

use crate::abi::dlpack::{DLDataType, KDL_BOOL, KDL_COMPLEX, KDL_FLOAT, KDL_INT, KDL_UINT};

/// The element types the harness exchanges (lanes 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DType {
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
    F16,
    F32,
    F64,
    Bool,
    C64,
    C128,
}

impl DType {
    pub const ALL: [DType; 14] = [
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::U8,
        DType::U16,
        DType::U32,
        DType::U64,
        DType::F16,
        DType::F32,
        DType::F64,
        DType::Bool,
        DType::C64,
        DType::C128,
    ];

    /// The name NumPy and the Array API give it (`int32`, `complex64`).
    pub fn name(self) -> &'static str {
        match self {
            DType::I8 => "int8",
            DType::I16 => "int16",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::U8 => "uint8",
            DType::U16 => "uint16",
            DType::U32 => "uint32",
            DType::U64 => "uint64",
            DType::F16 => "float16",
            DType::F32 => "float32",
            DType::F64 => "float64",
            DType::Bool => "bool",
            DType::C64 => "complex64",
            DType::C128 => "complex128",
        }
    }

    pub fn parse(s: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.name() == s)
    }

    /// `DLDataType` of it: bool is code 6 with 8 bits ("bool: type_code = 6,
    /// bits = 8, lanes = 1").
    pub fn dl(self) -> DLDataType {
        let (code, bits) = match self {
            DType::I8 => (KDL_INT, 8),
            DType::I16 => (KDL_INT, 16),
            DType::I32 => (KDL_INT, 32),
            DType::I64 => (KDL_INT, 64),
            DType::U8 => (KDL_UINT, 8),
            DType::U16 => (KDL_UINT, 16),
            DType::U32 => (KDL_UINT, 32),
            DType::U64 => (KDL_UINT, 64),
            DType::F16 => (KDL_FLOAT, 16),
            DType::F32 => (KDL_FLOAT, 32),
            DType::F64 => (KDL_FLOAT, 64),
            DType::Bool => (KDL_BOOL, 8),
            DType::C64 => (KDL_COMPLEX, 64),
            DType::C128 => (KDL_COMPLEX, 128),
        };
        DLDataType {
            code,
            bits,
            lanes: 1,
        }
    }

    /// The dtype a `DLDataType` describes, when it is one of these.
    pub fn from_dl(t: DLDataType) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.dl() == t)
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        self.dl().bits as usize / 8
    }

    /// The bytes of element `i` of a deterministic pattern: distinct
    /// neighbours, every byte of wide types used, bool 0 or 1, floats that
    /// are finite (NaN compares bitwise, but a library may canonicalise it).
    pub fn pattern(self, i: usize) -> Vec<u8> {
        let n = i as u64;
        match self {
            DType::Bool => vec![(n % 3 == 1) as u8],
            DType::F16 => {
                // Finite halves: sign, exponent 1..=29, any mantissa.
                let exp = 1 + (n % 29) as u16;
                let bits = (((n >> 5) & 1) as u16) << 15 | exp << 10 | ((n * 37) & 0x3ff) as u16;
                bits.to_le_bytes().to_vec()
            }
            DType::F32 => ((n as f32) * 1.5 - 7.25).to_le_bytes().to_vec(),
            DType::F64 => ((n as f64) * -2.5 + 1e10).to_le_bytes().to_vec(),
            DType::C64 => {
                let mut v = ((n as f32) + 0.5).to_le_bytes().to_vec();
                v.extend_from_slice(&(-(n as f32) * 3.0).to_le_bytes());
                v
            }
            DType::C128 => {
                let mut v = ((n as f64) + 0.25).to_le_bytes().to_vec();
                v.extend_from_slice(&((n as f64) * 1e-3).to_le_bytes());
                v
            }
            _ => {
                let x = n.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(n);
                x.to_le_bytes()[..self.size()].to_vec()
            }
        }
    }
}

/// A tensor's values as arrowcert sees them: dtype, shape and every
/// element in row-major order (`values.len() == product(shape) * size`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Logical {
    pub dtype: DType,
    pub shape: Vec<i64>,
    pub values: Vec<u8>,
}

impl Logical {
    /// The pattern of `dtype` in `shape`.
    pub fn pattern(dtype: DType, shape: &[i64]) -> Logical {
        let n = elements(shape);
        let mut values = Vec::with_capacity(n * dtype.size());
        for i in 0..n {
            values.extend(dtype.pattern(i));
        }
        Logical {
            dtype,
            shape: shape.to_vec(),
            values,
        }
    }

    pub fn len(&self) -> usize {
        elements(&self.shape)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Element `flat` (row-major) as bytes.
    pub fn element(&self, flat: usize) -> &[u8] {
        let s = self.dtype.size();
        &self.values[flat * s..(flat + 1) * s]
    }

    /// The view `view` of this tensor, as a library computes it
    /// (`x[::2]`, `x.T`, `x[1:]`): its values in row-major order.
    pub fn view(&self, view: View) -> Logical {
        let strides = row_major_strides(&self.shape);
        let (shape, strides, offset) = view.apply(&self.shape, &strides);
        let mut values = Vec::new();
        for_each_index(&shape, |idx| {
            let flat: i64 = offset + idx.iter().zip(&strides).map(|(i, s)| i * s).sum::<i64>();
            values.extend_from_slice(self.element(flat as usize));
        });
        Logical {
            dtype: self.dtype,
            shape,
            values,
        }
    }
}

/// A view the harness asks a producer library to make of an array before
/// exporting it, so that its capsule has strides and offsets of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum View {
    /// The array as loaded.
    Whole,
    /// `x[::2]`: every other element along the first axis.
    Step,
    /// `x.T` (2-d only): reversed axes.
    Transpose,
    /// `x[1:]`: from the second element along the first axis.
    Offset,
    /// `x[::-1, ...]`: the first axis reversed, a negative stride ("strides of
    /// the tensor (in number of elements, not bytes)" are signed: `int64_t`).
    Reverse,
    /// `broadcast_to(x, (2,) + x.shape)`: a new first axis of stride 0
    /// (both rows are the same memory).
    Broadcast,
    /// `x[:, ::2, ...]` (2-d and more): every other element along the second
    /// axis, a gapped, non-compact layout.
    ColumnStep,
}

impl View {
    pub fn name(self) -> &'static str {
        match self {
            View::Whole => "whole",
            View::Step => "step",
            View::Transpose => "transpose",
            View::Offset => "offset",
            View::Reverse => "reverse",
            View::Broadcast => "broadcast",
            View::ColumnStep => "column-step",
        }
    }

    /// Every view, in plan order.
    pub const ALL: [View; 7] = [
        View::Whole,
        View::Step,
        View::Transpose,
        View::Offset,
        View::Reverse,
        View::Broadcast,
        View::ColumnStep,
    ];

    pub fn parse(s: &str) -> Option<View> {
        View::ALL.into_iter().find(|v| v.name() == s)
    }

    /// Whether the view exists for an array of `ndim` dimensions (`x.T`
    /// is asked of 2-d arrays only, `x[:, ::2]` needs a second axis, the
    /// others a first one).
    pub fn applies(self, ndim: usize) -> bool {
        match self {
            View::Whole => true,
            View::Transpose => ndim == 2,
            View::ColumnStep => ndim >= 2,
            _ => ndim >= 1,
        }
    }

    /// Applies the view to (shape, strides in elements), from element 0;
    /// returns the view's shape, strides and first element.
    pub fn apply(self, shape: &[i64], strides: &[i64]) -> (Vec<i64>, Vec<i64>, i64) {
        match self {
            View::Whole => (shape.to_vec(), strides.to_vec(), 0),
            View::Step => {
                let mut sh = shape.to_vec();
                let mut st = strides.to_vec();
                if let (Some(d), Some(s)) = (sh.first_mut(), st.first_mut()) {
                    *d = (*d + 1) / 2;
                    *s *= 2;
                }
                (sh, st, 0)
            }
            View::Transpose => {
                let sh = shape.iter().rev().copied().collect();
                let st = strides.iter().rev().copied().collect();
                (sh, st, 0)
            }
            View::Offset => {
                let mut sh = shape.to_vec();
                let first = match (sh.first_mut(), strides.first()) {
                    (Some(d), Some(s)) if *d > 0 => {
                        *d -= 1;
                        *s
                    }
                    _ => 0,
                };
                (sh, strides.to_vec(), first)
            }
            View::Reverse => {
                let mut st = strides.to_vec();
                let first = match (shape.first(), st.first_mut()) {
                    (Some(&d), Some(s)) if d > 0 => {
                        let first = (d - 1) * *s;
                        *s = -*s;
                        first
                    }
                    _ => 0,
                };
                (shape.to_vec(), st, first)
            }
            View::Broadcast => {
                let mut sh = vec![2];
                sh.extend_from_slice(shape);
                let mut st = vec![0];
                st.extend_from_slice(strides);
                (sh, st, 0)
            }
            View::ColumnStep => {
                let mut sh = shape.to_vec();
                let mut st = strides.to_vec();
                if let (Some(d), Some(s)) = (sh.get_mut(1), st.get_mut(1)) {
                    *d = (*d + 1) / 2;
                    *s *= 2;
                }
                (sh, st, 0)
            }
        }
    }
}

/// Elements of a shape (1 for 0-d; 0 if any dimension is 0 or negative).
/// Saturates at `usize::MAX` (a shape read from a library may be anything).
pub fn elements(shape: &[i64]) -> usize {
    shape
        .iter()
        .map(|&d| usize::try_from(d).unwrap_or(0))
        .fold(1usize, |a, d| a.saturating_mul(d))
}

/// Compact row-major strides, in elements.
pub fn row_major_strides(shape: &[i64]) -> Vec<i64> {
    let mut strides = vec![0i64; shape.len()];
    let mut acc = 1i64;
    for i in (0..shape.len()).rev() {
        strides[i] = acc;
        acc = acc.saturating_mul(shape[i].max(1));
    }
    strides
}

/// Calls `f` with every index of `shape` in row-major order.
pub fn for_each_index(shape: &[i64], mut f: impl FnMut(&[i64])) {
    if shape.iter().any(|&d| d <= 0) {
        return;
    }
    let mut idx = vec![0i64; shape.len()];
    loop {
        f(&idx);
        let mut dim = shape.len();
        loop {
            if dim == 0 {
                return;
            }
            dim -= 1;
            idx[dim] += 1;
            if idx[dim] < shape[dim] {
                break;
            }
            idx[dim] = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn views_select_the_elements_a_library_would() {
        let t = Logical::pattern(DType::I32, &[3, 2]);
        let el = |l: &Logical, i| l.element(i).to_vec();
        let step = t.view(View::Step);
        assert_eq!(step.shape, vec![2, 2]);
        assert_eq!(el(&step, 2), el(&t, 4));
        let tr = t.view(View::Transpose);
        assert_eq!(tr.shape, vec![2, 3]);
        assert_eq!(el(&tr, 1), el(&t, 2));
        let off = t.view(View::Offset);
        assert_eq!(off.shape, vec![2, 2]);
        assert_eq!(el(&off, 0), el(&t, 2));
        let zero_d = Logical::pattern(DType::F64, &[]);
        assert_eq!(zero_d.len(), 1);
        assert_eq!(zero_d.view(View::Whole), zero_d);
        assert!(Logical::pattern(DType::U8, &[0, 4]).is_empty());
        // x[::-1] of [[0,1],[2,3],[4,5]]: [[4,5],[2,3],[0,1]].
        let rev = t.view(View::Reverse);
        assert_eq!(rev.shape, vec![3, 2]);
        assert_eq!(el(&rev, 0), el(&t, 4));
        assert_eq!(el(&rev, 5), el(&t, 1));
        // broadcast_to(x, (2, 3, 2)): both rows are x.
        let b = t.view(View::Broadcast);
        assert_eq!(b.shape, vec![2, 3, 2]);
        assert_eq!(b.values[..b.values.len() / 2], t.values[..]);
        assert_eq!(b.values[b.values.len() / 2..], t.values[..]);
        // x[:, ::2] of a 3x2: the first column.
        let c = t.view(View::ColumnStep);
        assert_eq!(c.shape, vec![3, 1]);
        assert_eq!(el(&c, 1), el(&t, 2));
        assert!(View::ColumnStep.applies(2) && !View::ColumnStep.applies(1));
        assert!(View::Reverse.applies(1) && !View::Reverse.applies(0));
        for v in View::ALL {
            assert_eq!(View::parse(v.name()), Some(v));
        }
    }

    #[test]
    fn dtypes_round_trip_through_their_dl_codes() {
        for d in DType::ALL {
            assert_eq!(DType::from_dl(d.dl()), Some(d));
            assert_eq!(DType::parse(d.name()), Some(d));
            assert_eq!(d.pattern(3).len(), d.size());
        }
        assert_ne!(DType::I64.pattern(1), DType::I64.pattern(2));
    }
}

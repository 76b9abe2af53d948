//! The harness's own DLPack capsule reader: what a library's `__dlpack__`
//! handed over, read without trusting it. Every read of the library's
//! memory goes through [`crate::abi::hostmem`] (`process_vm_readv`), so a
//! bad pointer becomes a finding, never a crash. The one `unsafe` block
//! turns bytes so copied into a structure value.

use crate::abi::dlpack::{
    DLDataType, DLDevice, DLManagedTensor, DLManagedTensorVersioned, DLPackVersion, DLTensor,
    DLPACK_MAJOR_VERSION, KDL_CPU, KDL_LAST_CODE, KNOWN_FLAGS, LEGACY_TENSOR_OFFSET,
    VERSIONED_TENSOR_OFFSET,
};
use crate::abi::hostmem;

use super::{elements, for_each_index, row_major_strides, DType, Logical};

/// The most dimensions and the largest data span the reader follows: a
/// shape beyond them is read as far as its fields, not its values.
pub const MAX_NDIM: i32 = 64;
pub const MAX_SPAN: usize = 256 << 20;

/// A broken rule seen while reading.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub rule: &'static str,
    pub evidence: String,
}

fn finding(rule: &'static str, evidence: impl Into<String>) -> Finding {
    Finding {
        rule,
        evidence: evidence.into(),
    }
}

/// What a managed tensor says, as read.
#[derive(Debug, Clone, PartialEq)]
pub struct Observed {
    pub versioned: bool,
    pub version: Option<DLPackVersion>,
    pub flags: u64,
    pub deleter: usize,
    pub manager_ctx: usize,
    pub data: usize,
    pub device: DLDevice,
    pub ndim: i32,
    pub dtype: DLDataType,
    pub shape: Option<Vec<i64>>,
    /// `None`: NULL strides.
    pub strides: Option<Vec<i64>>,
    pub byte_offset: u64,
    /// Every element, row-major, when the tensor is on the host, of a dtype
    /// the harness knows, and its memory could be read.
    pub values: Option<Logical>,
}

impl Observed {
    /// The address of the first byte of element 0.
    pub fn first_byte(&self) -> usize {
        self.data.wrapping_add(self.byte_offset as usize)
    }
}

/// Reads the managed tensor at `ptr` (`versioned`: a
/// `DLManagedTensorVersioned`, else a `DLManagedTensor`). A tensor of
/// another major version is read as far as its version, deleter and
/// context (the fields that keep their place), no further.
pub fn read(ptr: usize, versioned: bool) -> (Option<Observed>, Vec<Finding>) {
    let mut findings = Vec::new();
    let m = match managed(ptr, versioned) {
        Ok(m) => m,
        Err(f) => {
            findings.push(f);
            return (None, findings);
        }
    };
    let version = m.version;
    if let Some(v) = version {
        if v.major != DLPACK_MAJOR_VERSION {
            // "It is not safe to access any other fields as the memory
            // layout will have changed."
            return (Some(other_major(versioned, &m)), findings);
        }
        if m.flags & !KNOWN_FLAGS != 0 {
            findings.push(finding(
                crate::rule!("dlpack.flags.known"),
                format!(
                    "flags {:#x} set bits the header does not define ({:#x})",
                    m.flags,
                    m.flags & !KNOWN_FLAGS
                ),
            ));
        }
    }
    let bytes = hostmem::read(m.tensor_at, std::mem::size_of::<DLTensor>())
        .expect("the managed tensor was readable as a whole");
    let t: DLTensor = from_bytes(&bytes);
    let mut obs = Observed {
        versioned,
        version,
        flags: m.flags,
        deleter: m.deleter,
        manager_ctx: m.manager_ctx,
        data: t.data as usize,
        device: t.device,
        ndim: t.ndim,
        dtype: t.dtype,
        shape: None,
        strides: None,
        byte_offset: t.byte_offset,
        values: None,
    };
    if t.dtype.code > KDL_LAST_CODE {
        findings.push(finding(
            crate::rule!("dlpack.dtype.code"),
            format!(
                "dtype.code {} is not a DLDataTypeCode value (0..=17)",
                t.dtype.code
            ),
        ));
    }
    if let Some((shape, strides)) = dimensions(&t, version, &mut obs, &mut findings) {
        values(&t, shape, strides, &mut obs, &mut findings);
    }
    (Some(obs), findings)
}

/// The fields of a managed tensor that come before its `DLTensor`, and
/// where that tensor is.
struct Managed {
    /// `None`: an unversioned `DLManagedTensor`.
    version: Option<DLPackVersion>,
    flags: u64,
    deleter: usize,
    manager_ctx: usize,
    tensor_at: usize,
}

/// Reads the managed tensor's own fields at `ptr`; a finding when its
/// memory is not readable (then the capsule held no managed tensor).
fn managed(ptr: usize, versioned: bool) -> Result<Managed, Finding> {
    if versioned {
        let Some(bytes) = hostmem::read(ptr, std::mem::size_of::<DLManagedTensorVersioned>())
        else {
            return Err(finding(
                crate::rule!("dlpack.capsule.name"),
                format!("the dltensor_versioned capsule's pointer {ptr:#x} is not readable memory"),
            ));
        };
        let m: DLManagedTensorVersioned = from_bytes(&bytes);
        Ok(Managed {
            version: Some(m.version),
            flags: m.flags,
            deleter: m.deleter.map_or(0, |f| f as usize),
            manager_ctx: m.manager_ctx as usize,
            tensor_at: ptr + VERSIONED_TENSOR_OFFSET,
        })
    } else {
        let Some(bytes) = hostmem::read(ptr, std::mem::size_of::<DLManagedTensor>()) else {
            return Err(finding(
                crate::rule!("dlpack.capsule.name"),
                format!("the dltensor capsule's pointer {ptr:#x} is not readable memory"),
            ));
        };
        let m: DLManagedTensor = from_bytes(&bytes);
        Ok(Managed {
            version: None,
            flags: 0,
            deleter: m.deleter.map_or(0, |f| f as usize),
            manager_ctx: m.manager_ctx as usize,
            tensor_at: ptr + LEGACY_TENSOR_OFFSET,
        })
    }
}

/// What is read of a tensor of another major version: its version,
/// deleter and context, every other field zero ("It is not safe to access
/// any other fields as the memory layout will have changed").
fn other_major(versioned: bool, m: &Managed) -> Observed {
    Observed {
        versioned,
        version: m.version,
        flags: 0,
        deleter: m.deleter,
        manager_ctx: m.manager_ctx,
        data: 0,
        device: DLDevice {
            device_type: 0,
            device_id: 0,
        },
        ndim: 0,
        dtype: DLDataType {
            code: 0,
            bits: 0,
            lanes: 0,
        },
        shape: None,
        strides: None,
        byte_offset: 0,
        values: None,
    }
}

/// The tensor's shape and strides (`None`: NULL strides), set on `obs`
/// as far as they could be read; `None` when reading stopped (an `ndim`
/// beyond the reader's bound, memory not readable, a negative
/// dimension).
fn dimensions(
    t: &DLTensor,
    version: Option<DLPackVersion>,
    obs: &mut Observed,
    findings: &mut Vec<Finding>,
) -> Option<(Vec<i64>, Option<Vec<i64>>)> {
    if !(0..=MAX_NDIM).contains(&t.ndim) {
        findings.push(finding(
            crate::rule!("dlpack.tensor.describes"),
            format!("ndim {} (the reader follows 0..={MAX_NDIM})", t.ndim),
        ));
        return None;
    }
    let ndim = t.ndim as usize;
    let shape = if ndim == 0 {
        Vec::new()
    } else {
        match read_i64s(t.shape as usize, ndim) {
            Some(s) => s,
            None => {
                findings.push(finding(
                    crate::rule!("dlpack.tensor.describes"),
                    format!("shape {:#x}: {ndim} int64 not readable", t.shape as usize),
                ));
                return None;
            }
        }
    };
    if let Some(d) = shape.iter().find(|&&d| d < 0) {
        findings.push(finding(
            crate::rule!("dlpack.tensor.describes"),
            format!("shape {shape:?} has a negative dimension {d}"),
        ));
        obs.shape = Some(shape);
        return None;
    }
    obs.shape = Some(shape.clone());
    let strides = if t.strides.is_null() {
        if ndim > 0 && version.is_some_and(|v| v.major == 1 && v.minor >= 2) {
            findings.push(finding(
                crate::rule!("dlpack.strides.not-null"),
                format!(
                    "strides NULL with ndim {ndim} in a version {}.{} tensor",
                    version.map_or(0, |v| v.major),
                    version.map_or(0, |v| v.minor)
                ),
            ));
        }
        None
    } else if ndim == 0 {
        Some(Vec::new())
    } else {
        match read_i64s(t.strides as usize, ndim) {
            Some(s) => Some(s),
            None => {
                findings.push(finding(
                    crate::rule!("dlpack.tensor.describes"),
                    format!(
                        "strides {:#x}: {ndim} int64 not readable",
                        t.strides as usize
                    ),
                ));
                return None;
            }
        }
    };
    obs.strides = strides.clone();
    Some((shape, strides))
}

/// The tensor's values, on the host and of a dtype the harness knows,
/// gathered in row-major order into `obs`; and a tensor with no elements
/// has NULL data (dlpack.data.zero-size-null).
fn values(
    t: &DLTensor,
    shape: Vec<i64>,
    strides: Option<Vec<i64>>,
    obs: &mut Observed,
    findings: &mut Vec<Finding>,
) {
    let n = elements(&shape);
    if n == 0 && !t.data.is_null() {
        findings.push(finding(
            crate::rule!("dlpack.data.zero-size-null"),
            format!(
                "shape {shape:?} has no elements but data is {:#x}",
                t.data as usize
            ),
        ));
    }
    let Some(dtype) = DType::from_dl(t.dtype) else {
        return; // a dtype the harness does not compare
    };
    if t.device.device_type != KDL_CPU {
        return; // not host memory: values are not read here
    }
    let strides = strides.unwrap_or_else(|| row_major_strides(&shape));
    match gather(obs.first_byte(), dtype, &shape, &strides) {
        Ok(values) => {
            obs.values = Some(Logical {
                dtype,
                shape,
                values,
            })
        }
        Err(e) => findings.push(finding(crate::rule!("dlpack.tensor.describes"), e)),
    }
}

/// Every element of a strided tensor whose element 0 is at `first`, in
/// row-major order. One read of the whole span, then a gather.
pub fn gather(
    first: usize,
    dtype: DType,
    shape: &[i64],
    strides: &[i64],
) -> Result<Vec<u8>, String> {
    gather_with(first, dtype, shape, strides, hostmem::read)
}

/// The values of a tensor `o` on a device, read through `dev` (one copy of
/// the span its shape and strides cover, then a gather).
pub fn values_on(o: &Observed, dev: &dyn crate::device::Device) -> Result<Logical, String> {
    let dtype = DType::from_dl(o.dtype).ok_or("a dtype the harness does not compare")?;
    let shape = o.shape.clone().unwrap_or_default();
    let strides = o
        .strides
        .clone()
        .unwrap_or_else(|| row_major_strides(&shape));
    let values = gather_with(o.first_byte(), dtype, &shape, &strides, |at, len| {
        dev.copy_to_host(at, len).ok()
    })?;
    Ok(Logical {
        dtype,
        shape,
        values,
    })
}

/// [`gather`], reading the span with `read` (address, length).
fn gather_with(
    first: usize,
    dtype: DType,
    shape: &[i64],
    strides: &[i64],
    read: impl Fn(usize, usize) -> Option<Vec<u8>>,
) -> Result<Vec<u8>, String> {
    let size = dtype.size() as i64;
    let n = elements(shape);
    if n == 0 {
        return Ok(Vec::new());
    }
    if n.saturating_mul(size as usize) > MAX_SPAN {
        return Err(format!(
            "shape {shape:?} has {n} elements (the reader reads up to {MAX_SPAN} bytes of values)"
        ));
    }
    // The lowest and highest element offsets (in bytes from `first`),
    // every step checked: strides are the library's.
    let overflow = || format!("strides {strides:?} with shape {shape:?} overflow");
    let (mut lo, mut hi) = (0i64, 0i64);
    for (&d, &s) in shape.iter().zip(strides) {
        let far = (d - 1)
            .checked_mul(s)
            .and_then(|x| x.checked_mul(size))
            .ok_or_else(overflow)?;
        if far < 0 {
            lo = lo.checked_add(far).ok_or_else(overflow)?;
        } else {
            hi = hi.checked_add(far).ok_or_else(overflow)?;
        }
    }
    let span = hi
        .checked_sub(lo)
        .and_then(|x| x.checked_add(size))
        .and_then(|x| usize::try_from(x).ok())
        .ok_or_else(overflow)?;
    if span > MAX_SPAN {
        return Err(format!(
            "the tensor spans {span} bytes (the reader reads up to {MAX_SPAN})"
        ));
    }
    let start = (first as i64).checked_add(lo).filter(|&a| a > 0);
    let Some(start) = start else {
        return Err(format!(
            "data {first:#x} with strides {strides:?} starts below address 0"
        ));
    };
    let Some(bytes) = read(start as usize, span) else {
        return Err(format!(
            "data: the {span} bytes at {start:#x} its shape {shape:?} and strides {strides:?} cover are not readable"
        ));
    };
    let mut out = Vec::with_capacity(n * size as usize);
    for_each_index(shape, |idx| {
        let off = idx.iter().zip(strides).map(|(i, s)| i * s).sum::<i64>() * size - lo;
        out.extend_from_slice(&bytes[off as usize..(off + size) as usize]);
    });
    Ok(out)
}

fn read_i64s(addr: usize, n: usize) -> Option<Vec<i64>> {
    let bytes = hostmem::read(addr, n * 8)?;
    Some(
        bytes
            .chunks_exact(8)
            .map(|c| i64::from_ne_bytes(c.try_into().expect("8 bytes")))
            .collect(),
    )
}

/// A plain value from its bytes (a struct of integers, raw pointers and
/// optional function pointers, all of which any bit pattern of the right
/// size is, but for a function pointer: see below).
fn from_bytes<T: Copy>(bytes: &[u8]) -> T {
    assert_eq!(bytes.len(), std::mem::size_of::<T>());
    // SAFETY: `bytes` holds size_of::<T>() bytes (checked); read_unaligned
    // copies them whatever their alignment. Every T read here is a repr(C)
    // struct of integers, raw pointers and Option<extern fn>; a function
    // pointer read from a library is only ever compared or passed back to
    // that library, never called from here.
    unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<T>()) }
}

//! The harness's own DLPack tensors, handed to a library's `from_dlpack`:
//! a versioned and a legacy managed tensor over one mapping of data, laid
//! out as the case asks (gaps, transposes, zero strides, a byte offset,
//! NULL strides), read-only pages for READ_ONLY tensors and an inaccessible
//! page for tensors the consumer must not read. Their deleters count their
//! calls (in `manager_ctx`) and poison the data, so a consumer that calls a
//! deleter twice, never, or while it still reads the data is seen.

use std::ffi::c_void;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use crate::abi::dlpack::{
    DLDevice, DLManagedTensor, DLManagedTensorVersioned, DLPackVersion, DLTensor, FLAG_READ_ONLY,
    KDL_CPU,
};

use super::{elements, for_each_index, row_major_strides, DType, Logical};
use crate::device::{Device, Kind as DeviceKind};

/// The byte a deleted tensor's data is overwritten with.
pub const DELETED_BYTE: u8 = 0xDB;

/// How the harness lays a tensor out in memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Layout {
    /// Row-major, compact, explicit strides.
    Contiguous,
    /// Every other element along the last axis (the others hold other values).
    Gaps,
    /// Column-major: strides of the reversed axes.
    Transposed,
    /// The first axis has stride 0 (every row the same memory).
    Broadcast,
    /// `byte_offset` of three elements (which hold other values).
    ByteOffset,
    /// Compact row-major with NULL strides (legacy and v1.0 capsules only).
    NullStrides,
    /// Every axis reversed: negative strides, `data` at the start of the
    /// allocation and `byte_offset` at the logical first element, the last
    /// one stored ("The `byte_offset` field should be used to point to the
    /// beginning of the data").
    NegativeStrides,
}

impl Layout {
    pub const ALL: [Layout; 7] = [
        Layout::Contiguous,
        Layout::Gaps,
        Layout::Transposed,
        Layout::Broadcast,
        Layout::ByteOffset,
        Layout::NullStrides,
        Layout::NegativeStrides,
    ];

    /// The layouts generated cases draw from: fixed, so that a seed keeps
    /// drawing the cases (and IDs) it drew before a layout was added.
    pub const GENERATED: [Layout; 6] = [
        Layout::Contiguous,
        Layout::Gaps,
        Layout::Transposed,
        Layout::Broadcast,
        Layout::ByteOffset,
        Layout::NullStrides,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Layout::Contiguous => "contiguous",
            Layout::Gaps => "gaps",
            Layout::Transposed => "transposed",
            Layout::Broadcast => "broadcast",
            Layout::ByteOffset => "byte-offset",
            Layout::NullStrides => "null-strides",
            Layout::NegativeStrides => "negative-strides",
        }
    }

    pub fn parse(s: &str) -> Option<Layout> {
        Layout::ALL.into_iter().find(|l| l.name() == s)
    }
}

/// What tensor to make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    pub dtype: DType,
    pub shape: Vec<i64>,
    pub layout: Layout,
    /// READ_ONLY in the versioned tensor's flags, data on read-only pages.
    pub read_only: bool,
    /// The versioned tensor's version.
    pub version: DLPackVersion,
    /// Data on a page that cannot be read (a tensor no consumer may read).
    pub inaccessible: bool,
}

impl Spec {
    /// A writable, accessible tensor of DLPack 1.0.
    pub fn plain(dtype: DType, shape: &[i64], layout: Layout) -> Spec {
        Spec {
            dtype,
            shape: shape.to_vec(),
            layout,
            read_only: false,
            version: DLPackVersion { major: 1, minor: 0 },
            inaccessible: false,
        }
    }
}

/// Deleter calls, per structure; lives in `manager_ctx`.
#[derive(Default)]
struct Counts {
    versioned: AtomicU32,
    legacy: AtomicU32,
    /// The data mapping, to poison on the first deletion.
    data: usize,
    data_len: usize,
    /// Data on a device instead: its backend, address and length.
    device: Option<(Arc<dyn Device>, usize, usize)>,
}

/// A mapping of whole pages.
struct Region {
    ptr: *mut u8,
    len: usize,
}

impl Region {
    fn new(bytes: usize) -> std::io::Result<Region> {
        let page = 4096usize;
        let len = bytes.max(1).div_ceil(page) * page;
        // SAFETY: an anonymous private mapping at an address the kernel
        // picks; nothing is passed by pointer.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Region {
            ptr: ptr.cast(),
            len,
        })
    }

    fn protect(&self, prot: libc::c_int) {
        // SAFETY: our own mapping, whole.
        unsafe { libc::mprotect(self.ptr.cast(), self.len, prot) };
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: our own mapping, unmapped once.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// A tensor the harness hands over: both exchange structures, its data,
/// and what a reader of it must see.
pub struct HarnessTensor {
    pub spec: Spec,
    region: Region,
    shape: *mut [i64],
    strides: *mut [i64],
    versioned: *mut DLManagedTensorVersioned,
    legacy: *mut DLManagedTensor,
    counts: *mut Counts,
    expected: Logical,
    /// The device copy of the data, when the tensor is on a device: freed
    /// with the tensor.
    on_device: Option<(Arc<dyn Device>, DeviceKind, usize, usize)>,
}

/// The deleter of the harness's versioned tensors: counts, poisons once.
///
/// # Safety
/// `m` must be one of the harness's versioned tensors, not yet dropped
/// (its `manager_ctx` is its `Counts`).
unsafe extern "C" fn delete_versioned(m: *mut DLManagedTensorVersioned) {
    // SAFETY: `m` is one of our versioned tensors (the only structures this
    // deleter is put in), alive until the HarnessTensor is dropped;
    // manager_ctx points to its Counts.
    unsafe {
        let counts = &*((*m).manager_ctx as *const Counts);
        if counts.versioned.fetch_add(1, Ordering::SeqCst) == 0 {
            poison(counts);
        }
    }
}

/// The deleter of the harness's legacy tensors.
///
/// # Safety
/// As [`delete_versioned`], for a legacy tensor.
unsafe extern "C" fn delete_legacy(m: *mut DLManagedTensor) {
    // SAFETY: as in delete_versioned, for the legacy structure.
    unsafe {
        let counts = &*((*m).manager_ctx as *const Counts);
        if counts.legacy.fetch_add(1, Ordering::SeqCst) == 0 {
            poison(counts);
        }
    }
}

/// Overwrites the data with [`DELETED_BYTE`]: a consumer still reading it
/// reads that.
///
/// # Safety
/// `c` must be the `Counts` of a live tensor, whose (data, data_len) is
/// its whole mapping.
unsafe fn poison(c: &Counts) {
    if let Some((dev, addr, len)) = &c.device {
        // A deleter may run on any thread; a failed write leaves the data
        // as it was (only the poisoning is lost).
        let _ = dev.copy_from_host(*addr, &vec![DELETED_BYTE; *len]);
        return;
    }
    if c.data == 0 || c.data_len == 0 {
        return;
    }
    // SAFETY: (data, data_len) is the tensor's whole mapping, alive until the
    // HarnessTensor is dropped; made writable first (it may be read-only).
    unsafe {
        libc::mprotect(
            c.data as *mut c_void,
            c_data_len(c),
            libc::PROT_READ | libc::PROT_WRITE,
        );
        std::ptr::write_bytes(c.data as *mut u8, DELETED_BYTE, c.data_len);
    }
}

fn c_data_len(c: &Counts) -> usize {
    c.data_len.div_ceil(4096) * 4096
}

impl HarnessTensor {
    pub fn new(spec: Spec) -> std::io::Result<HarnessTensor> {
        let size = spec.dtype.size();
        let shape = spec.shape.clone();
        let ndim = shape.len();
        let n = elements(&shape);
        // Storage positions (in elements) of each axis, and the element
        // count the storage needs.
        let (strides, first, storage) = match spec.layout {
            Layout::Contiguous | Layout::NullStrides => (row_major_strides(&shape), 0, n),
            Layout::Gaps if ndim > 0 => {
                let mut phys = shape.clone();
                phys[ndim - 1] *= 2;
                let mut st = row_major_strides(&phys);
                st[ndim - 1] = 2;
                (st, 0, elements(&phys))
            }
            Layout::Transposed if ndim > 1 => {
                let rev: Vec<i64> = shape.iter().rev().copied().collect();
                let st: Vec<i64> = row_major_strides(&rev).into_iter().rev().collect();
                (st, 0, n)
            }
            Layout::Broadcast if ndim > 0 => {
                let mut st = row_major_strides(&shape);
                st[0] = 0;
                (st, 0, elements(&shape[1..]))
            }
            Layout::ByteOffset => (row_major_strides(&shape), 3, n + 3),
            Layout::NegativeStrides if n > 0 => {
                let st = row_major_strides(&shape).into_iter().map(|s| -s).collect();
                (st, n as i64 - 1, n)
            }
            _ => (row_major_strides(&shape), 0, n),
        };
        let region = Region::new(storage * size)?;
        // Every storage element gets the pattern of its position: a reader
        // that ignores the layout reads other values than the logical ones.
        for k in 0..storage {
            let bytes = spec.dtype.pattern(k + 1000);
            // SAFETY: k * size + size <= storage * size <= region.len.
            unsafe {
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), region.ptr.add(k * size), size);
            }
        }
        let mut values = Vec::with_capacity(n * size);
        for_each_index(&shape, |idx| {
            let at = first + idx.iter().zip(&strides).map(|(i, s)| i * s).sum::<i64>();
            // SAFETY: `at` is a storage position below `storage` by the
            // construction of the strides above.
            let el =
                unsafe { std::slice::from_raw_parts(region.ptr.add(at as usize * size), size) };
            values.extend_from_slice(el);
        });
        let expected = Logical {
            dtype: spec.dtype,
            shape: shape.clone(),
            values,
        };
        let data_len = storage * size;
        let counts = Box::into_raw(Box::new(Counts {
            data: if n == 0 { 0 } else { region.ptr as usize },
            data_len: if n == 0 { 0 } else { data_len },
            ..Counts::default()
        }));
        // 0-d tensors get real (one-element) shape and strides arrays.
        let shape_box: Box<[i64]> = if ndim == 0 {
            vec![1].into()
        } else {
            shape.clone().into()
        };
        let strides_box: Box<[i64]> = if ndim == 0 {
            vec![1].into()
        } else {
            strides.clone().into()
        };
        let shape_ptr = Box::into_raw(shape_box);
        let strides_ptr = Box::into_raw(strides_box);
        let null_strides = spec.layout == Layout::NullStrides;
        let tensor = DLTensor {
            data: if n == 0 {
                std::ptr::null_mut()
            } else {
                region.ptr.cast()
            },
            device: DLDevice {
                device_type: KDL_CPU,
                device_id: 0,
            },
            ndim: ndim as i32,
            dtype: spec.dtype.dl(),
            // A 0-d tensor with NULL strides has a NULL shape too ("When
            // ndim == 0, shape can be set to NULL").
            shape: if null_strides && ndim == 0 {
                std::ptr::null_mut()
            } else {
                shape_ptr.cast()
            },
            strides: if null_strides {
                std::ptr::null_mut()
            } else {
                strides_ptr.cast()
            },
            byte_offset: (first as usize * size) as u64,
        };
        let versioned = Box::into_raw(Box::new(DLManagedTensorVersioned {
            version: spec.version,
            manager_ctx: counts.cast(),
            deleter: Some(delete_versioned),
            flags: if spec.read_only { FLAG_READ_ONLY } else { 0 },
            dl_tensor: tensor,
        }));
        let legacy = Box::into_raw(Box::new(DLManagedTensor {
            dl_tensor: tensor,
            manager_ctx: counts.cast(),
            deleter: Some(delete_legacy),
        }));
        if spec.inaccessible {
            region.protect(libc::PROT_NONE);
        } else if spec.read_only {
            region.protect(libc::PROT_READ);
        }
        Ok(HarnessTensor {
            spec,
            region,
            shape: shape_ptr,
            strides: strides_ptr,
            versioned,
            legacy,
            counts,
            expected,
            on_device: None,
        })
    }

    /// The tensor of `spec` with its data on the device `kind` of `dev`
    /// (the same layout, copied there): its `device` is `kind`'s (DLPack
    /// numbers its device types as Arrow does: kDLCUDA 2, kDLExtDev 12 for
    /// the harness's emulated device), device id 0; its deleters poison
    /// the device copy.
    pub fn on_device(
        spec: Spec,
        dev: Arc<dyn Device>,
        kind: DeviceKind,
    ) -> Result<HarnessTensor, String> {
        let mut t = HarnessTensor::new(spec).map_err(|e| format!("mmap: {e}"))?;
        // SAFETY: counts was made by Box::into_raw in new() and lives until
        // the tensor is dropped; nobody else holds it yet.
        let counts = unsafe { &mut *t.counts };
        let len = counts.data_len;
        let mut addr = 0;
        if len > 0 {
            addr = dev.alloc(kind, len)?;
            // SAFETY: the host mapping holds `len` initialised bytes (new()
            // wrote the whole storage).
            let host = unsafe { std::slice::from_raw_parts(t.region.ptr, len) };
            if let Err(e) = dev.copy_from_host(addr, host) {
                let _ = dev.free(addr);
                return Err(e);
            }
            counts.device = Some((dev.clone(), addr, len));
            counts.data = 0;
            counts.data_len = 0;
        }
        let device = DLDevice {
            device_type: kind.device_type(),
            device_id: 0,
        };
        // SAFETY: both managed tensors were made by Box::into_raw in new()
        // and are not handed out yet.
        unsafe {
            for tensor in [&mut (*t.versioned).dl_tensor, &mut (*t.legacy).dl_tensor] {
                tensor.device = device;
                if len > 0 {
                    tensor.data = addr as *mut c_void;
                }
            }
        }
        t.on_device = Some((dev, kind, addr, len));
        Ok(t)
    }

    /// The (DLPack) device type and id of the tensor's data.
    pub fn device(&self) -> (i32, i32) {
        match &self.on_device {
            Some((_, kind, _, _)) => (kind.device_type(), 0),
            None => (KDL_CPU, 0),
        }
    }

    /// The device backend the data is on (`None`: host memory).
    pub fn device_backend(&self) -> Option<Arc<dyn Device>> {
        self.on_device.as_ref().map(|d| d.0.clone())
    }

    /// The `DLManagedTensorVersioned` to hand over.
    pub fn versioned_ptr(&self) -> usize {
        self.versioned as usize
    }

    /// The `DLManagedTensor` to hand over.
    pub fn legacy_ptr(&self) -> usize {
        self.legacy as usize
    }

    /// Deleter calls so far: (versioned, legacy).
    pub fn deleted(&self) -> (u32, u32) {
        // SAFETY: counts lives until self is dropped.
        let c = unsafe { &*self.counts };
        (
            c.versioned.load(Ordering::SeqCst),
            c.legacy.load(Ordering::SeqCst),
        )
    }

    /// What a reader of this tensor must see.
    pub fn expected(&self) -> &Logical {
        &self.expected
    }

    /// The data mapping's address.
    pub fn data_addr(&self) -> usize {
        self.region.ptr as usize
    }

    /// The addresses of the data (the whole host mapping, or the device
    /// allocation).
    pub fn data_range(&self) -> std::ops::Range<usize> {
        match &self.on_device {
            Some((_, _, addr, len)) => *addr..*addr + *len,
            None => self.region.ptr as usize..self.region.ptr as usize + self.region.len,
        }
    }

    /// Leaves everything allocated: a consumer that never called a
    /// deleter may still hold the structures and read the data.
    pub fn leak(self) {
        std::mem::forget(self);
    }
}

impl Drop for HarnessTensor {
    fn drop(&mut self) {
        // SAFETY: each was made by Box::into_raw in new() and is freed once,
        // here; nobody is meant to use them after the case (a consumer that
        // might, because it never deleted its tensor, gets leak() instead).
        unsafe {
            drop(Box::from_raw(self.versioned));
            drop(Box::from_raw(self.legacy));
            drop(Box::from_raw(self.shape));
            drop(Box::from_raw(self.strides));
            drop(Box::from_raw(self.counts));
        }
        if let Some((dev, _, addr, len)) = self.on_device.take() {
            if len > 0 {
                let _ = dev.free(addr);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dlpack::reader;

    fn spec(dtype: DType, shape: &[i64], layout: Layout) -> Spec {
        Spec::plain(dtype, shape, layout)
    }

    #[test]
    fn the_reader_reads_every_layout_the_harness_makes() {
        for layout in Layout::ALL {
            for shape in [&[4i64, 3][..], &[5], &[], &[2, 0], &[2, 3, 2]] {
                for dtype in [DType::I16, DType::F64, DType::Bool, DType::C64] {
                    let t = HarnessTensor::new(spec(dtype, shape, layout)).unwrap();
                    for versioned in [true, false] {
                        let ptr = if versioned {
                            t.versioned_ptr()
                        } else {
                            t.legacy_ptr()
                        };
                        let (obs, findings) = reader::read(ptr, versioned);
                        assert!(findings.is_empty(), "{layout:?} {shape:?}: {findings:?}");
                        let obs = obs.unwrap();
                        if t.expected().is_empty() {
                            assert_eq!(obs.data, 0);
                        }
                        assert_eq!(
                            obs.values.as_ref(),
                            Some(t.expected()),
                            "{layout:?} {shape:?} {dtype:?}"
                        );
                    }
                    // A layout other than compact stores other values where
                    // a reader ignoring it would look.
                    let reordered = !(matches!(layout, Layout::Contiguous | Layout::NullStrides)
                        || (layout == Layout::Transposed && shape.len() < 2));
                    if reordered && dtype != DType::Bool && t.expected().len() > 2 {
                        let naive = reader::gather(
                            t.data_addr(),
                            dtype,
                            shape,
                            &crate::dlpack::row_major_strides(shape),
                        );
                        assert_ne!(
                            naive.ok().as_ref(),
                            Some(&t.expected().values),
                            "{layout:?} {shape:?}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn a_tensor_on_the_emulated_device_is_read_there_and_poisoned_there() {
        let kind = DeviceKind::Emulated;
        let dev = crate::device::backend(kind).unwrap();
        for layout in [Layout::Contiguous, Layout::Gaps, Layout::ByteOffset] {
            let t = HarnessTensor::on_device(spec(DType::I32, &[5], layout), dev.clone(), kind)
                .unwrap();
            assert_eq!(t.device(), (12, 0)); // kDLExtDev
            let (obs, findings) = reader::read(t.versioned_ptr(), true);
            assert!(findings.is_empty(), "{findings:?}");
            let obs = obs.unwrap();
            assert_eq!(obs.device.device_type, 12);
            assert!(
                obs.values.is_none(),
                "device memory is not read as host memory"
            );
            assert!(t.data_range().contains(&obs.data));
            let got = reader::values_on(&obs, &*dev).unwrap();
            assert_eq!(&got, t.expected(), "{layout:?}");
            let m = t.versioned_ptr() as *mut DLManagedTensorVersioned;
            // SAFETY: our own tensor; its deleter is ours.
            unsafe { ((*m).deleter.unwrap())(m) };
            let after = reader::values_on(&obs, &*dev).unwrap();
            assert!(
                after.values.iter().all(|&b| b == DELETED_BYTE),
                "{layout:?}"
            );
        }
    }

    #[test]
    fn deleters_count_and_poison() {
        let t = HarnessTensor::new(spec(DType::I32, &[8], Layout::Contiguous)).unwrap();
        let m = t.versioned_ptr() as *mut DLManagedTensorVersioned;
        // SAFETY: our own tensor; its deleter is ours.
        unsafe { ((*m).deleter.unwrap())(m) };
        assert_eq!(t.deleted(), (1, 0));
        let (obs, _) = reader::read(t.versioned_ptr(), true);
        assert!(obs
            .unwrap()
            .values
            .unwrap()
            .values
            .iter()
            .all(|&b| b == DELETED_BYTE));
        // SAFETY: a second call only counts.
        unsafe { ((*m).deleter.unwrap())(m) };
        assert_eq!(t.deleted(), (2, 0));
    }

    #[test]
    fn read_only_and_inaccessible_data_is_protected() {
        let mut s = spec(DType::U8, &[16], Layout::Contiguous);
        s.read_only = true;
        let t = HarnessTensor::new(s.clone()).unwrap();
        let (obs, _) = reader::read(t.versioned_ptr(), true);
        assert_eq!(obs.unwrap().flags, FLAG_READ_ONLY);
        s.read_only = false;
        s.inaccessible = true;
        let t = HarnessTensor::new(s).unwrap();
        let (_, findings) = reader::read(t.versioned_ptr(), true);
        assert_eq!(findings.len(), 1, "{findings:?}");
        assert_eq!(findings[0].rule, crate::rule!("dlpack.tensor.describes"));
    }

    #[test]
    fn reader_findings_for_broken_tensors() {
        let mut s = spec(DType::I64, &[3, 2], Layout::NullStrides);
        s.version = DLPackVersion { major: 1, minor: 3 };
        let t = HarnessTensor::new(s).unwrap();
        let (_, findings) = reader::read(t.versioned_ptr(), true);
        assert_eq!(
            findings.iter().map(|f| f.rule).collect::<Vec<_>>(),
            vec![crate::rule!("dlpack.strides.not-null")]
        );
        let t = HarnessTensor::new(spec(DType::I64, &[3], Layout::Contiguous)).unwrap();
        let m = t.versioned_ptr() as *mut DLManagedTensorVersioned;
        // SAFETY: our own tensor, changed before anyone reads it.
        unsafe {
            (*m).flags |= 1 << 40;
            (*m).dl_tensor.dtype.code = 200;
        }
        let (_, findings) = reader::read(t.versioned_ptr(), true);
        let rules: Vec<_> = findings.iter().map(|f| f.rule).collect();
        assert_eq!(
            rules,
            vec![
                crate::rule!("dlpack.flags.known"),
                crate::rule!("dlpack.dtype.code")
            ]
        );
        let mut s = spec(DType::I8, &[2], Layout::Contiguous);
        s.version = DLPackVersion { major: 2, minor: 0 };
        let t = HarnessTensor::new(s).unwrap();
        let (obs, findings) = reader::read(t.versioned_ptr(), true);
        assert!(findings.is_empty());
        assert!(
            obs.unwrap().values.is_none(),
            "a major-2 tensor is not read past its version"
        );
    }
}

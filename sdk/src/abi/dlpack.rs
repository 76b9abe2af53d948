//! DLPack's C ABI (`dlpack.h`, v1.x): the structures a `__dlpack__`
//! capsule holds, declared from the header's field order and checked
//! against a real copy of it by the layout probe
//! (`harness/tests/dlpack_layout.rs`). The header's prose, which the
//! DLPack rules quote, is in `harness/spec/dlpack/`.
//!
//! As for the Arrow structures, fields are public and reading or writing
//! one is safe; following a pointer in one is not, and arrowcert reads
//! what a library hands over through [`super::hostmem`] only.

use std::ffi::c_void;

use super::layout::{CLayout, ConstValue, FieldLayout, StructLayout};

/// The major version of the ABI these structures follow
/// (`DLPACK_MAJOR_VERSION`): a tensor of another major version has another
/// layout, and only its deleter may be called.
pub const DLPACK_MAJOR_VERSION: u32 = 1;
/// The newest minor version arrowcert knows the enumerations of.
pub const DLPACK_MINOR_VERSION: u32 = 3;

/// `DLPACK_FLAG_BITMASK_READ_ONLY`.
pub const FLAG_READ_ONLY: u64 = 1 << 0;
/// `DLPACK_FLAG_BITMASK_IS_COPIED`.
pub const FLAG_IS_COPIED: u64 = 1 << 1;
/// `DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED`.
pub const FLAG_IS_SUBBYTE_TYPE_PADDED: u64 = 1 << 2;
/// Every flag bit a v1.3 header defines.
pub const KNOWN_FLAGS: u64 = FLAG_READ_ONLY | FLAG_IS_COPIED | FLAG_IS_SUBBYTE_TYPE_PADDED;

/// `DLDeviceType` values (an `int32_t` enum in C).
pub const KDL_CPU: i32 = 1;
pub const KDL_CUDA: i32 = 2;
pub const KDL_CUDA_HOST: i32 = 3;
pub const KDL_CUDA_MANAGED: i32 = 13;
/// The largest device type v1.3 defines (`kDLTrn`).
pub const KDL_LAST_DEVICE: i32 = 18;

/// `DLDataTypeCode` values.
pub const KDL_INT: u8 = 0;
pub const KDL_UINT: u8 = 1;
pub const KDL_FLOAT: u8 = 2;
pub const KDL_OPAQUE_HANDLE: u8 = 3;
pub const KDL_BFLOAT: u8 = 4;
pub const KDL_COMPLEX: u8 = 5;
pub const KDL_BOOL: u8 = 6;
/// The largest type code v1.3 defines (`kDLFloat4_e2m1fn`).
pub const KDL_LAST_CODE: u8 = 17;

/// Every constant above that the C header defines under the same value,
/// by its C name (the layout probe compares them).
pub const CONSTANTS: &[ConstValue] = &[
    ConstValue {
        c_name: "DLPACK_MAJOR_VERSION",
        value: DLPACK_MAJOR_VERSION as i64,
    },
    ConstValue {
        c_name: "DLPACK_FLAG_BITMASK_READ_ONLY",
        value: FLAG_READ_ONLY as i64,
    },
    ConstValue {
        c_name: "DLPACK_FLAG_BITMASK_IS_COPIED",
        value: FLAG_IS_COPIED as i64,
    },
    ConstValue {
        c_name: "DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED",
        value: FLAG_IS_SUBBYTE_TYPE_PADDED as i64,
    },
    ConstValue {
        c_name: "kDLCPU",
        value: KDL_CPU as i64,
    },
    ConstValue {
        c_name: "kDLCUDA",
        value: KDL_CUDA as i64,
    },
    ConstValue {
        c_name: "kDLCUDAHost",
        value: KDL_CUDA_HOST as i64,
    },
    ConstValue {
        c_name: "kDLCUDAManaged",
        value: KDL_CUDA_MANAGED as i64,
    },
    ConstValue {
        c_name: "kDLTrn",
        value: KDL_LAST_DEVICE as i64,
    },
    ConstValue {
        c_name: "kDLInt",
        value: KDL_INT as i64,
    },
    ConstValue {
        c_name: "kDLUInt",
        value: KDL_UINT as i64,
    },
    ConstValue {
        c_name: "kDLFloat",
        value: KDL_FLOAT as i64,
    },
    ConstValue {
        c_name: "kDLOpaqueHandle",
        value: KDL_OPAQUE_HANDLE as i64,
    },
    ConstValue {
        c_name: "kDLBfloat",
        value: KDL_BFLOAT as i64,
    },
    ConstValue {
        c_name: "kDLComplex",
        value: KDL_COMPLEX as i64,
    },
    ConstValue {
        c_name: "kDLBool",
        value: KDL_BOOL as i64,
    },
    ConstValue {
        c_name: "kDLFloat4_e2m1fn",
        value: KDL_LAST_CODE as i64,
    },
];

abi_struct! {
    /// `DLPackVersion`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct DLPackVersion {
        pub major: u32,
        pub minor: u32,
    }
}

abi_struct! {
    /// `DLDevice`: `device_type` is the C enum `DLDeviceType` (an int).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct DLDevice {
        pub device_type: i32,
        pub device_id: i32,
    }
}

abi_struct! {
    /// `DLDataType`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct DLDataType {
        pub code: u8,
        pub bits: u8,
        pub lanes: u16,
    }
}

abi_struct! {
    /// `DLTensor`: `strides` are in elements, not bytes.
    #[derive(Debug, Clone, Copy)]
    pub struct DLTensor {
        pub data: *mut c_void,
        pub device: DLDevice,
        pub ndim: i32,
        pub dtype: DLDataType,
        pub shape: *mut i64,
        pub strides: *mut i64,
        pub byte_offset: u64,
    }
}

/// `void (*deleter)(struct DLManagedTensor*)`.
pub type LegacyDeleter = unsafe extern "C" fn(*mut DLManagedTensor);
/// `void (*deleter)(struct DLManagedTensorVersioned*)`.
pub type VersionedDeleter = unsafe extern "C" fn(*mut DLManagedTensorVersioned);

abi_struct! {
    /// `DLManagedTensor` (the legacy, unversioned exchange structure: the
    /// `dltensor` capsule).
    #[derive(Debug, Clone, Copy)]
    pub struct DLManagedTensor {
        pub dl_tensor: DLTensor,
        pub manager_ctx: *mut c_void,
        pub deleter: Option<LegacyDeleter>,
    }
}

abi_struct! {
    /// `DLManagedTensorVersioned` (the `dltensor_versioned` capsule). Only
    /// `version`, `manager_ctx` and `deleter` keep their place across major
    /// versions ("Future ABI changes should keep everything until this field
    /// stable, to ensure that deleter can be correctly called").
    #[derive(Debug, Clone, Copy)]
    pub struct DLManagedTensorVersioned {
        pub version: DLPackVersion,
        pub manager_ctx: *mut c_void,
        pub deleter: Option<VersionedDeleter>,
        pub flags: u64,
        pub dl_tensor: DLTensor,
    }
}

/// Every DLPack structure, for the layout probe (C names are typedefs, not
/// struct tags: `DLTensor` is an anonymous struct in C).
pub const STRUCTS: &[StructLayout] = &[
    DLPackVersion::LAYOUT,
    DLDevice::LAYOUT,
    DLDataType::LAYOUT,
    DLTensor::LAYOUT,
    DLManagedTensor::LAYOUT,
    DLManagedTensorVersioned::LAYOUT,
];

/// The offset of `dl_tensor` in each exchange structure, where a reader
/// starts once it knows which one a capsule holds.
pub const LEGACY_TENSOR_OFFSET: usize = std::mem::offset_of!(DLManagedTensor, dl_tensor);
pub const VERSIONED_TENSOR_OFFSET: usize =
    std::mem::offset_of!(DLManagedTensorVersioned, dl_tensor);
/// The offset of `deleter` in each.
pub const LEGACY_DELETER_OFFSET: usize = std::mem::offset_of!(DLManagedTensor, deleter);
pub const VERSIONED_DELETER_OFFSET: usize = std::mem::offset_of!(DLManagedTensorVersioned, deleter);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_those_of_the_header_on_64_bit() {
        // dlpack.h on x86_64 (gcc): DLTensor 48, DLManagedTensor 64,
        // DLManagedTensorVersioned 80 bytes.
        assert_eq!(std::mem::size_of::<DLTensor>(), 48);
        assert_eq!(std::mem::size_of::<DLManagedTensor>(), 64);
        assert_eq!(std::mem::size_of::<DLManagedTensorVersioned>(), 80);
        assert_eq!(VERSIONED_TENSOR_OFFSET, 32);
        assert_eq!(LEGACY_DELETER_OFFSET, 56);
        assert_eq!(VERSIONED_DELETER_OFFSET, 16);
    }
}

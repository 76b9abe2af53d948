//! The Arrow C ABI: the only place in arrowcert where raw layouts are defined.
//!
//! The structs follow Arrow's `abi.h` (`cpp/src/arrow/c/abi.h`), which differs
//! from the struct block printed in `CDeviceDataInterface.rst` in three places
//! (see `shared/spec/README.md`): `ArrowAsyncProducer` has no `release`
//! member, `ArrowAsyncTask.extract_data` takes `struct ArrowAsyncTask*`, and
//! `ArrowAsyncProducer.request` takes `int64_t`.
//!
//! Fields are public on purpose: arrowcert is a conformance tool, and must be
//! able to build, poison and inspect structures that are deliberately wrong.
//! Reading or writing a field is safe; dereferencing any pointer in one is
//! not, and only the modules that handle raw layouts and plugin calls do so.
//!
//! Each struct is declared through `abi_struct!`, which also records its
//! layout for the C cross-check in [`layout`] (`harness/tests/abi_layout.rs`).

pub mod arrow_rs;
pub mod breadcrumb;
pub mod hostmem;
pub mod layout;
pub mod ops;
pub mod outslot;
pub mod realign;

use std::ffi::{c_char, c_int, c_void};

use layout::{CLayout, ConstValue, FieldLayout, StructLayout};

macro_rules! abi_struct {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $( $(#[$fmeta:meta])* pub $field:ident : $ty:ty ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[repr(C)]
        pub struct $name {
            $( $(#[$fmeta])* pub $field: $ty ),*
        }

        impl CLayout for $name {
            const LAYOUT: StructLayout = StructLayout {
                c_name: stringify!($name),
                size: ::std::mem::size_of::<$name>(),
                align: ::std::mem::align_of::<$name>(),
                fields: &[
                    $( FieldLayout {
                        name: stringify!($field),
                        offset: ::std::mem::offset_of!($name, $field),
                        size: ::std::mem::size_of::<$ty>(),
                    } ),*
                ],
            };
        }
    };
}

pub mod dlpack;

/// `typedef int32_t ArrowDeviceType;`
pub type ArrowDeviceType = i32;

macro_rules! abi_consts {
    ($ty:ty; $( $(#[$meta:meta])* $name:ident = $value:expr ),* $(,)?) => {
        $( $(#[$meta])* pub const $name: $ty = $value; )*
        /// Every constant above, by its C macro name, for the C cross-check.
        pub const CONSTANTS: &[ConstValue] = &[
            $( ConstValue { c_name: stringify!($name), value: $value as i64 } ),*
        ];
    };
}

abi_consts! { i64;
    /// `ArrowSchema.flags`: dictionary indices are ordered.
    ARROW_FLAG_DICTIONARY_ORDERED = 1,
    /// `ArrowSchema.flags`: the field is nullable.
    ARROW_FLAG_NULLABLE = 2,
    /// `ArrowSchema.flags`: map keys are sorted.
    ARROW_FLAG_MAP_KEYS_SORTED = 4,
    ARROW_DEVICE_CPU = 1,
    ARROW_DEVICE_CUDA = 2,
    ARROW_DEVICE_CUDA_HOST = 3,
    ARROW_DEVICE_OPENCL = 4,
    ARROW_DEVICE_VULKAN = 7,
    ARROW_DEVICE_METAL = 8,
    ARROW_DEVICE_VPI = 9,
    ARROW_DEVICE_ROCM = 10,
    ARROW_DEVICE_ROCM_HOST = 11,
    ARROW_DEVICE_EXT_DEV = 12,
    ARROW_DEVICE_CUDA_MANAGED = 13,
    ARROW_DEVICE_ONEAPI = 14,
    ARROW_DEVICE_WEBGPU = 15,
    ARROW_DEVICE_HEXAGON = 16,
}

/// Device types as `ArrowDeviceType` values (the constants above are `i64`
/// so that one table can carry flags and device types alike).
pub mod device {
    use super::ArrowDeviceType;
    pub const CPU: ArrowDeviceType = super::ARROW_DEVICE_CPU as i32;
    pub const CUDA: ArrowDeviceType = super::ARROW_DEVICE_CUDA as i32;
    pub const CUDA_HOST: ArrowDeviceType = super::ARROW_DEVICE_CUDA_HOST as i32;
    pub const EXT_DEV: ArrowDeviceType = super::ARROW_DEVICE_EXT_DEV as i32;
    pub const CUDA_MANAGED: ArrowDeviceType = super::ARROW_DEVICE_CUDA_MANAGED as i32;

    /// Name of a defined device type (`"cpu"`, `"cuda"`, ...), `None` if the
    /// value is not one the spec defines.
    pub fn name(device_type: ArrowDeviceType) -> Option<&'static str> {
        Some(match device_type {
            1 => "cpu",
            2 => "cuda",
            3 => "cuda-host",
            4 => "opencl",
            7 => "vulkan",
            8 => "metal",
            9 => "vpi",
            10 => "rocm",
            11 => "rocm-host",
            12 => "ext-dev",
            13 => "cuda-managed",
            14 => "oneapi",
            15 => "webgpu",
            16 => "hexagon",
            _ => return None,
        })
    }

    /// Whether buffers a chunk declares on `chunk` are "accessible from a
    /// device type matching" `stream` (CDeviceDataInterface.rst): the same
    /// type; host memory (pinned CUDA or ROCm host memory, CUDA managed
    /// memory) from the CPU; managed memory from CUDA.
    pub fn accessible_from(chunk: ArrowDeviceType, stream: ArrowDeviceType) -> bool {
        const ROCM_HOST: ArrowDeviceType = 11;
        chunk == stream
            || (stream == CPU && matches!(chunk, CUDA_HOST | ROCM_HOST | CUDA_MANAGED))
            || (stream == CUDA && chunk == CUDA_MANAGED)
    }

    /// Every defined device type, in numeric order.
    pub const ALL: [ArrowDeviceType; 14] = [1, 2, 3, 4, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16];
}

pub type SchemaRelease = unsafe extern "C" fn(*mut ArrowSchema);
pub type ArrayRelease = unsafe extern "C" fn(*mut ArrowArray);

abi_struct! {
    /// `struct ArrowSchema` (CDataInterface.rst, "The ArrowSchema structure").
    pub struct ArrowSchema {
        pub format: *const c_char,
        pub name: *const c_char,
        pub metadata: *const c_char,
        pub flags: i64,
        pub n_children: i64,
        pub children: *mut *mut ArrowSchema,
        pub dictionary: *mut ArrowSchema,
        pub release: Option<SchemaRelease>,
        pub private_data: *mut c_void,
    }
}

abi_struct! {
    /// `struct ArrowArray` (CDataInterface.rst, "The ArrowArray structure").
    pub struct ArrowArray {
        pub length: i64,
        pub null_count: i64,
        pub offset: i64,
        pub n_buffers: i64,
        pub n_children: i64,
        pub buffers: *mut *const c_void,
        pub children: *mut *mut ArrowArray,
        pub dictionary: *mut ArrowArray,
        pub release: Option<ArrayRelease>,
        pub private_data: *mut c_void,
    }
}

abi_struct! {
    /// `struct ArrowArrayStream` (CStreamInterface.rst).
    pub struct ArrowArrayStream {
        pub get_schema: Option<unsafe extern "C" fn(*mut ArrowArrayStream, *mut ArrowSchema) -> c_int>,
        pub get_next: Option<unsafe extern "C" fn(*mut ArrowArrayStream, *mut ArrowArray) -> c_int>,
        pub get_last_error: Option<unsafe extern "C" fn(*mut ArrowArrayStream) -> *const c_char>,
        pub release: Option<unsafe extern "C" fn(*mut ArrowArrayStream)>,
        pub private_data: *mut c_void,
    }
}

abi_struct! {
    /// `struct ArrowDeviceArray` (CDeviceDataInterface.rst).
    pub struct ArrowDeviceArray {
        pub array: ArrowArray,
        pub device_id: i64,
        pub device_type: ArrowDeviceType,
        pub sync_event: *mut c_void,
        pub reserved: [i64; 3],
    }
}

abi_struct! {
    /// `struct ArrowDeviceArrayStream` (CDeviceDataInterface.rst, "Device Stream Interface").
    pub struct ArrowDeviceArrayStream {
        pub device_type: ArrowDeviceType,
        pub get_schema: Option<unsafe extern "C" fn(*mut ArrowDeviceArrayStream, *mut ArrowSchema) -> c_int>,
        pub get_next: Option<unsafe extern "C" fn(*mut ArrowDeviceArrayStream, *mut ArrowDeviceArray) -> c_int>,
        pub get_last_error: Option<unsafe extern "C" fn(*mut ArrowDeviceArrayStream) -> *const c_char>,
        pub release: Option<unsafe extern "C" fn(*mut ArrowDeviceArrayStream)>,
        pub private_data: *mut c_void,
    }
}

abi_struct! {
    /// `struct ArrowAsyncTask` (abi.h: `extract_data` takes `struct ArrowAsyncTask*`).
    pub struct ArrowAsyncTask {
        pub extract_data: Option<unsafe extern "C" fn(*mut ArrowAsyncTask, *mut ArrowDeviceArray) -> c_int>,
        pub private_data: *mut c_void,
    }
}

abi_struct! {
    /// `struct ArrowAsyncProducer` (abi.h: no `release` member, `request` takes `int64_t`).
    pub struct ArrowAsyncProducer {
        pub device_type: ArrowDeviceType,
        pub request: Option<unsafe extern "C" fn(*mut ArrowAsyncProducer, i64)>,
        pub cancel: Option<unsafe extern "C" fn(*mut ArrowAsyncProducer)>,
        pub additional_metadata: *const c_char,
        pub private_data: *mut c_void,
    }
}

abi_struct! {
    /// `struct ArrowAsyncDeviceStreamHandler` (CDeviceDataInterface.rst, async section).
    pub struct ArrowAsyncDeviceStreamHandler {
        pub on_schema: Option<unsafe extern "C" fn(*mut ArrowAsyncDeviceStreamHandler, *mut ArrowSchema) -> c_int>,
        pub on_next_task: Option<unsafe extern "C" fn(*mut ArrowAsyncDeviceStreamHandler, *mut ArrowAsyncTask, *const c_char) -> c_int>,
        pub on_error: Option<unsafe extern "C" fn(*mut ArrowAsyncDeviceStreamHandler, c_int, *const c_char, *const c_char)>,
        pub release: Option<unsafe extern "C" fn(*mut ArrowAsyncDeviceStreamHandler)>,
        pub producer: *mut ArrowAsyncProducer,
        pub private_data: *mut c_void,
    }
}

/// Every ABI struct's layout, for the C cross-check.
pub const STRUCTS: &[StructLayout] = &[
    ArrowSchema::LAYOUT,
    ArrowArray::LAYOUT,
    ArrowArrayStream::LAYOUT,
    ArrowDeviceArray::LAYOUT,
    ArrowDeviceArrayStream::LAYOUT,
    ArrowAsyncTask::LAYOUT,
    ArrowAsyncProducer::LAYOUT,
    ArrowAsyncDeviceStreamHandler::LAYOUT,
];

/// The byte every out-structure is filled with before a producer call: a
/// producer that leaves a member unset leaves this pattern behind.
pub const POISON_BYTE: u8 = 0xA5;

/// Zeroed and poisoned values of the ABI structs.
///
/// Every struct here is plain data: integers, raw pointers and `Option`s of
/// function pointers, for which all-zero bytes are valid (`None`/NULL/0).
/// The poisoned value is only ever written to and read as integers and raw
/// pointers by the harness; its function pointers are never called before a
/// producer has overwritten them (a release left as poison is reported, not
/// called).
pub trait Plain: Sized + CLayout {
    /// All members zero or NULL: for a base structure, "released".
    fn zeroed() -> Self {
        // SAFETY: every implementor is a repr(C) struct of integers, raw
        // pointers and Option<fn> (see the list below); all-zero bytes are a
        // valid value of each (0, NULL, None).
        unsafe { std::mem::zeroed() }
    }

    /// Every byte set to [`POISON_BYTE`].
    fn poisoned() -> Self {
        let mut v = Self::zeroed();
        // SAFETY: `v` is a live, exclusively owned value of size
        // size_of::<Self>(); the pattern written is a valid bit pattern for
        // integers and raw pointers, and for Option<fn> it is a non-null
        // (Some) function pointer value that the harness never calls unless
        // a producer overwrote it (see the trait docs).
        unsafe {
            std::ptr::write_bytes(
                &mut v as *mut Self as *mut u8,
                POISON_BYTE,
                std::mem::size_of::<Self>(),
            )
        };
        v
    }
}

impl Plain for ArrowSchema {}
impl Plain for ArrowArray {}
impl Plain for ArrowArrayStream {}
impl Plain for ArrowDeviceArray {}
impl Plain for ArrowDeviceArrayStream {}
impl Plain for ArrowAsyncTask {}
impl Plain for ArrowAsyncProducer {}
impl Plain for ArrowAsyncDeviceStreamHandler {}

/// True when the raw bits of a function pointer field are the poison
/// pattern, i.e. the producer never wrote the member.
pub fn is_poison_ptr(bits: usize) -> bool {
    bits == usize::from_ne_bytes([POISON_BYTE; std::mem::size_of::<usize>()])
}

/// Child `i` of a schema that passed schema validation (for
/// validating a moved child array against it).
pub fn child_schema(schema: &ArrowSchema, i: usize) -> Option<&ArrowSchema> {
    let child = child_ptr(schema.children, schema.n_children, i)?;
    // SAFETY: checked by `child_ptr`; the child lives as long as the parent
    // it belongs to, which `schema` borrows.
    Some(unsafe { &*child })
}

/// Entry `i` of a children array, if the array and the entry are neither
/// NULL nor poison and `i < n` (the harness's probe keeps the same check
/// for its walks over raw trees).
fn child_ptr<T>(children: *mut *mut T, n: i64, i: usize) -> Option<*mut T> {
    if children.is_null() || is_poison_ptr(children as usize) || i as i64 >= n || n > 1 << 16 {
        return None;
    }
    // SAFETY: `children` is non-NULL, not poison, and the producer declared
    // n (> i) entries; validation read the same entries.
    let child = unsafe { *children.add(i) };
    (!child.is_null() && !is_poison_ptr(child as usize)).then_some(child)
}

//! The layout proof for DLPack: the C compiler's view of a real
//! `dlpack.h` (the copy pyarrow's wheel ships, DLPack 1.3) agrees with
//! arrowcert's definitions (`abi::dlpack`) on every size, alignment, field
//! offset and constant; a header with two fields swapped is rejected.

use std::path::PathBuf;

use arrowcert::abi::dlpack::{CONSTANTS, STRUCTS};
use arrowcert::abi::layout::check_header_with;

/// A real dlpack.h: `ARROWCERT_DLPACK_HEADER`, else the one in pyarrow's
/// wheel in the adapter test environment or the matrix's environment.
fn real_header() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("ARROWCERT_DLPACK_HEADER") {
        return Some(PathBuf::from(p));
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    for venv in ["target/python-test/venv", "target/real/venv"] {
        let lib = root.join(venv).join("lib");
        let Ok(dirs) = std::fs::read_dir(&lib) else {
            continue;
        };
        for d in dirs.flatten() {
            let h = d
                .path()
                .join("site-packages/pyarrow/include/arrow/c/dlpack_abi.h");
            if h.is_file() {
                return Some(h);
            }
        }
    }
    None
}

fn required() -> bool {
    std::env::var_os("ARROWCERT_REQUIRE_PY_ADAPTERS").is_some()
}

#[test]
fn real_header_matches_rust_layouts() {
    let Some(header) = real_header() else {
        assert!(!required(), "ARROWCERT_REQUIRE_PY_ADAPTERS is set but no dlpack.h was found (pyarrow in target/python-test/venv)");
        println!("SKIPPED: no dlpack.h (pyarrow's wheel, set up by scripts/python/setup-test-env.sh, or ARROWCERT_DLPACK_HEADER)");
        return;
    };
    let m = check_header_with(&header, STRUCTS, CONSTANTS, false)
        .expect("dlpack.h compiles with the probe");
    assert!(
        m.is_empty(),
        "{}: {}",
        header.display(),
        m.iter()
            .map(|m| m.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn swapped_fields_are_rejected() {
    // A header written from arrowcert's own field order, with DLTensor's
    // ndim and dtype swapped: the probe must name exactly those two.
    let header = r#"
#include <stdint.h>
#define DLPACK_MAJOR_VERSION 1
#define DLPACK_FLAG_BITMASK_READ_ONLY (1UL << 0UL)
#define DLPACK_FLAG_BITMASK_IS_COPIED (1UL << 1UL)
#define DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED (1UL << 2UL)
typedef struct { uint32_t major; uint32_t minor; } DLPackVersion;
typedef enum { kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3, kDLCUDAManaged = 13, kDLTrn = 18 } DLDeviceType;
typedef struct { DLDeviceType device_type; int32_t device_id; } DLDevice;
typedef enum { kDLInt = 0U, kDLUInt = 1U, kDLFloat = 2U, kDLOpaqueHandle = 3U, kDLBfloat = 4U,
  kDLComplex = 5U, kDLBool = 6U, kDLFloat4_e2m1fn = 17U } DLDataTypeCode;
typedef struct { uint8_t code; uint8_t bits; uint16_t lanes; } DLDataType;
typedef struct { void* data; DLDevice device; DLDataType dtype; int32_t ndim; int64_t* shape;
  int64_t* strides; uint64_t byte_offset; } DLTensor;
typedef struct DLManagedTensor { DLTensor dl_tensor; void* manager_ctx;
  void (*deleter)(struct DLManagedTensor*); } DLManagedTensor;
typedef struct DLManagedTensorVersioned { DLPackVersion version; void* manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned*); uint64_t flags; DLTensor dl_tensor; } DLManagedTensorVersioned;
"#;
    let dir = std::env::temp_dir().join(format!("arrowcert-dlpack-fixture-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("swapped.h");
    std::fs::write(&path, header).unwrap();
    let m = check_header_with(&path, STRUCTS, CONSTANTS, false).expect("the fixture compiles");
    let _ = std::fs::remove_dir_all(&dir);
    let items: Vec<String> = m
        .iter()
        .map(|m| format!("{} {}", m.item, m.property))
        .collect();
    assert_eq!(items, vec!["DLTensor.ndim offset", "DLTensor.dtype offset"]);
}

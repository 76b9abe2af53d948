//! The Arrow side of the `cai.agree.*` rules: a CAI producer's
//! `__arrow_c_device_array__()`, moved into the harness's structures
//! through the bridge (as a PyCapsule consumer does), read as a
//! [`Described`] and released. Only the structures and the buffer pointer
//! list are read (host memory, through `process_vm_readv`); the buffers
//! themselves may be CUDA memory and are never read.

use super::agree::Described;
use crate::abi::ops::{Guard, Owned};
use crate::abi::{hostmem, ArrowDeviceArray, ArrowSchema};
use crate::dlpack::bridge::{Bridge, Handle, PyError};
use crate::inspect::probe;

const WHAT: &str = "__arrow_c_device_array__() ArrowDeviceArray";

/// A primitive fixed-width format as a typestr's (kind, size).
pub fn element_of(format: &str) -> Option<(char, usize)> {
    Some(match format {
        "c" => ('i', 1),
        "C" => ('u', 1),
        "s" => ('i', 2),
        "S" => ('u', 2),
        "i" => ('i', 4),
        "I" => ('u', 4),
        "l" => ('i', 8),
        "L" => ('u', 8),
        "e" => ('f', 2),
        "f" => ('f', 4),
        "g" => ('f', 8),
        _ => return None,
    })
}

/// The object's Arrow device array, or why there is none to compare.
/// `ndim`: the CAI array's; an Arrow array is one-dimensional, and the
/// harness does not map other shapes onto it.
pub fn described(bridge: &Bridge, obj: Handle, ndim: usize) -> Result<Described, String> {
    if ndim != 1 {
        return Err(format!(
            "an Arrow array is one-dimensional and this CAI array has {ndim} dimensions: the harness does not map one onto the other"
        ));
    }
    // Released (release NULL) until the library's structures are moved in.
    let mut schema = Guard::<ArrowSchema>::zeroed();
    let mut dev = Guard::<ArrowDeviceArray>::zeroed();
    let args = [obj.0, schema.as_mut_ptr() as u64, dev.as_mut_ptr() as u64];
    let (_, v) = bridge.call("cai_arrow", &args, "")?;
    if let Some(e) = PyError::of(&v) {
        return Err(format!("__arrow_c_device_array__() raised {e}"));
    }
    // A schema that does not validate may hold anything: the harness does
    // not call into it (a leak is the lesser harm), nor into its array.
    let found = probe::check_schema(&schema);
    if crate::inspect::any_must(&found) {
        schema.mark_released();
        dev.mark_released();
        return Err(format!(
            "the ArrowSchema does not validate ({}): not compared",
            found.first().map_or(String::new(), |f| f.rule.to_string())
        ));
    }
    let format = probe::c_string_at(schema.format as usize, 64)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    let a = &dev.array;
    let element = element_of(&format).ok_or_else(|| {
        format!("Arrow format {format:?} is not a primitive fixed-width type the harness maps")
    });
    let buffers: Option<Vec<u64>> = (a.n_buffers == 2 && !a.buffers.is_null())
        .then(|| hostmem::read(a.buffers as usize, 16))
        .flatten()
        .map(|b| {
            b.chunks(8)
                .map(|c| u64::from_ne_bytes(c.try_into().expect("8 bytes")))
                .collect()
        });
    let first = match (&element, buffers) {
        (Err(e), _) => Err(e.clone()),
        (_, None) => Err(format!(
            "the array's {} buffers cannot be read (a primitive array has 2)",
            a.n_buffers
        )),
        (Ok((_, size)), Some(b)) => {
            Ok(b[1].wrapping_add((a.offset as u64).wrapping_mul(*size as u64)))
        }
    };
    let out = Described {
        what: WHAT,
        first,
        shape: u64::try_from(a.length)
            .map(|n| vec![n])
            .map_err(|_| format!("length {} is negative", a.length)),
        // "Fixed-size primitive layout": values are contiguous.
        strides: element.clone().map(|(_, size)| vec![size as i64]),
        element,
        devices: vec![("ArrowDeviceArray", dev.device_type, dev.device_id as i32)],
        read_only: Err("the Arrow C device interface has no read-only flag".into()),
    };
    // The guards release both structures (the library's callbacks).
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn primitive_formats_read_as_typestrs() {
        assert_eq!(element_of("g"), Some(('f', 8)));
        assert_eq!(element_of("C"), Some(('u', 1)));
        assert_eq!(element_of("l"), Some(('i', 8)));
        // Booleans are bits in Arrow, bytes in CAI; strings have offsets.
        assert_eq!(element_of("b"), None);
        assert_eq!(element_of("u"), None);
    }
}

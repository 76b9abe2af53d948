//! Across the two protocols (issue 27, item 3): a library that takes
//! DLPack in and hands Arrow out (nanoarrow's `c_device_array` of a
//! `__dlpack__` object), or takes Arrow in and hands DLPack out (a pyarrow
//! Array's `__dlpack__`), judged by both rule sets at once.
//!
//! - `dlpack/to-arrow/...`: one of the harness's tensors into the adapter's
//!   `dlpack_to_arrow`; the DLPack consumer rules on what it did with the
//!   capsule (renamed, the deleter called once, and not while the Arrow
//!   array it exported still points into the tensor), the Arrow producer
//!   rules on the `ArrowSchema` and `ArrowDeviceArray` it exported (schema,
//!   array and device members validated, the values those of the tensor,
//!   release marks released).
//! - `dlpack/from-arrow/...`: one of the harness's Arrow arrays (exported
//!   through its instrumented ledger, as to any Arrow consumer) into the
//!   adapter's `arrow_to_dlpack`; the DLPack producer rules on the object's
//!   `__dlpack__` (the same steps as a producer case), the Arrow consumer
//!   rules on the harness's array (released exactly once, its buffers never
//!   written; the tensor's data, which is the Arrow buffer's, must stay
//!   until the tensor's deleter runs).

#![forbid(unsafe_code)]

use crate::abi::dlpack::KDL_CPU;
use crate::abi::ops::{Guard, Owned};
use crate::abi::{ArrowDeviceArray, ArrowSchema};
use crate::certify::checks::{
    array_rules, device_members, release_checked, schema_rules, DeviceId,
};
use crate::certify::{Observations, Options};
use crate::export::{Ledger, Node, SchemaNode};
use crate::inspect::probe;

use super::bridge::{Bridge, PyError};
use super::engine::{
    asked_capsule, compare, exported_steps, handed_over, harness_side, mapped, renamed, Ended,
    Held, Loaded, Obs, Request,
};
use super::tensor::{HarnessTensor, Layout, Spec};
use super::{DType, Logical};

/// An Arrow array the harness hands over: `length` values of `dtype` (the
/// dtype pattern, as a tensor of that dtype holds), `offset` elements into
/// its buffers, with one null slot when `nulls`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArrowInput {
    pub dtype: DType,
    pub length: i64,
    pub offset: i64,
    pub nulls: bool,
}

impl ArrowInput {
    /// `int32/7`, `int32/7+2`, `int32/7/nulls`.
    pub fn name(&self) -> String {
        let mut s = format!("{}/{}", self.dtype.name(), self.length);
        if self.offset > 0 {
            s.push_str(&format!("+{}", self.offset));
        }
        if self.nulls {
            s.push_str("/nulls");
        }
        s
    }
}

/// The Arrow format string of a DLPack dtype, where Arrow has the type
/// (`None`: complex numbers).
pub fn arrow_format(dtype: DType) -> Option<&'static str> {
    Some(match dtype {
        DType::I8 => "c",
        DType::I16 => "s",
        DType::I32 => "i",
        DType::I64 => "l",
        DType::U8 => "C",
        DType::U16 => "S",
        DType::U32 => "I",
        DType::U64 => "L",
        DType::F16 => "e",
        DType::F32 => "f",
        DType::F64 => "g",
        DType::Bool => "b",
        DType::C64 | DType::C128 => return None,
    })
}

/// The schema and array of `input`, as the harness's exporter lays them.
fn arrow_nodes(input: &ArrowInput) -> Result<(SchemaNode, Node), String> {
    let format = arrow_format(input.dtype)
        .ok_or_else(|| format!("Arrow has no {} type", input.dtype.name()))?;
    let (n, k) = (input.length as usize, input.offset as usize);
    let values = Logical::pattern(input.dtype, &[input.length]);
    let data = if input.dtype == DType::Bool {
        // Bit-packed, LSB first: the pattern's bytes are 0 or 1.
        let mut bits = vec![0u8; (k + n).div_ceil(8).max(1)];
        for i in 0..n {
            if values.element(i)[0] != 0 {
                bits[(k + i) / 8] |= 1 << ((k + i) % 8);
            }
        }
        bits
    } else {
        // `offset` filler elements (zeros) before the window.
        let mut bytes = vec![0u8; k * input.dtype.size()];
        bytes.extend_from_slice(&values.values);
        bytes
    };
    let validity = input.nulls.then(|| {
        // Every slot valid but the window's fourth (or last).
        let mut bits = vec![0xffu8; (k + n).div_ceil(8).max(1)];
        let null = k + n.saturating_sub(1).min(3);
        bits[null / 8] &= !(1 << (null % 8));
        bits
    });
    let schema = SchemaNode {
        format: format.into(),
        name: Some(String::new()),
        metadata: None,
        flags: 2, // ARROW_FLAG_NULLABLE
        children: Vec::new(),
        dictionary: None,
    };
    let node = Node {
        length: input.length,
        offset: input.offset,
        null_count: i64::from(input.nulls && n > 0),
        buffers: vec![validity, Some(data)],
        children: Vec::new(),
        dictionary: None,
        shift: 0,
        empty_shift: 0,
    };
    Ok((schema, node))
}

/// Records the Arrow rules' observations as the case's.
fn merged(obs: &mut Obs, arrow: Observations) {
    for r in arrow.checked {
        obs.check(r);
    }
    for v in arrow.violations {
        obs.fail(v.rule, &v.at, v.message);
    }
    for (r, why) in arrow.not_exercised {
        obs.skip(r, why);
    }
}

// ---- DLPack in, Arrow out -------------------------------------------------

/// A to-arrow case: `spec`'s tensor into the adapter's `dlpack_to_arrow`.
pub(super) fn to_arrow_case(bridge: &Bridge, spec: &Spec, obs: &mut Obs) -> Ended {
    handed_over(mapped(spec), obs, |t, obs| to_arrow_steps(bridge, t, obs))
}

fn to_arrow_steps(bridge: &Bridge, tensor: &HarnessTensor, obs: &mut Obs) -> Result<Ended, String> {
    // Released (release NULL) until the library's structures are moved in.
    let mut schema = Guard::<ArrowSchema>::zeroed();
    let mut dev = Guard::<ArrowDeviceArray>::zeroed();
    let args = [
        tensor.versioned_ptr() as u64,
        tensor.legacy_ptr() as u64,
        KDL_CPU as u64,
        0,
        schema.as_mut_ptr() as u64,
        dev.as_mut_ptr() as u64,
    ];
    // A READ_ONLY tensor is handed over versioned only: a legacy capsule
    // cannot carry the flag, and a consumer that never saw it cannot be
    // judged for writing.
    let mode = if tensor.spec.read_only {
        "versioned"
    } else {
        "negotiate"
    };
    let (h, v) = bridge.call("to_arrow", &args, &format!(r#"{{"mode": "{mode}"}}"#))?;
    drop(Held::new(bridge, h));
    let at = "dlpack_to_arrow";
    let names = harness_side(&v, at, KDL_CPU, obs);
    let handed = !names.is_empty();
    let asked = asked_capsule(&v);
    let mut ended = Ended::Ran;
    // Whether the harness released the Arrow export (a deleter still owed
    // is then the library's).
    let mut released = true;
    if let Some(e) = PyError::of(&v) {
        ended = if e.type_name == "ArrowcertProtocolError" {
            Ended::Error(format!(
                "dlpack_to_arrow's object broke the Arrow PyCapsule interface: {}",
                e.message
            ))
        } else if handed {
            Ended::Limitation(format!("dlpack_to_arrow declined: {e}"))
        } else if asked {
            obs.skip(
                crate::rule!("dlpack.consumer.read-only"),
                "the consumer did not ask for a versioned capsule (max_version)",
            );
            Ended::Limitation(format!(
                "the case needs a {mode} capsule; dlpack_to_arrow raised {e}"
            ))
        } else {
            Ended::Error(format!(
                "dlpack_to_arrow raised {e} before asking for a capsule"
            ))
        };
    } else {
        renamed(&names, at, obs);
        // A write into a READ_ONLY tensor's pages crashes the case (charged
        // to the rule by the runner); one that returned did not write.
        if tensor.spec.read_only {
            obs.check(crate::rule!("dlpack.consumer.read-only"));
        }
        // The library's Python objects are gone (the step dropped them):
        // what the Arrow structures still point at, they must hold.
        bridge.call("gc", &[], "")?;
        let device_array = v["moved"].as_str() == Some("arrow_device_array");
        let mut arrow = Observations::default();
        let (e, ok) = judge_export(tensor, &schema, &dev, device_array, &mut arrow, obs);
        if let Some(e) = e {
            ended = e;
        }
        if ok {
            release_checked(
                &mut dev,
                crate::rule!("array.release.marks-released"),
                "device_array",
                &mut arrow,
            );
            release_checked(
                &mut schema,
                crate::rule!("schema.release.marks-released"),
                "schema",
                &mut arrow,
            );
        } else {
            // A structure that does not validate may hold anything: the
            // harness does not call into it (a leak is the lesser harm).
            dev.mark_released();
            schema.mark_released();
            released = false;
        }
        merged(obs, arrow);
    }
    bridge.call("gc", &[], "")?;
    if handed {
        let (v1, l1) = tensor.deleted();
        match v1 + l1 {
            1 => obs.check(crate::rule!("dlpack.consumer.deleter-once")),
            0 if !released => obs.skip(
                crate::rule!("dlpack.consumer.deleter-once"),
                "the Arrow export did not validate, so the harness never released it",
            ),
            0 => obs.fail(
                crate::rule!("dlpack.consumer.deleter-once"),
                at,
                "the tensor's deleter was never called (the Arrow export released, the library's objects dropped, garbage collected)",
            ),
            n => obs.fail(
                crate::rule!("dlpack.consumer.deleter-once"),
                at,
                format!("the tensor's deleter was called {n} times"),
            ),
        }
    }
    Ok(ended)
}

/// The Arrow producer rules on what `dlpack_to_arrow` exported (`dev` is
/// the library's whole ArrowDeviceArray when `device_array`, else only its
/// `array` member is), and the tensor's lifetime under it. Returns how the
/// case ended when not plainly (a type change, a failure of the values)
/// and whether the export validated (and may be released).
fn judge_export(
    tensor: &HarnessTensor,
    schema: &ArrowSchema,
    dev: &ArrowDeviceArray,
    device_array: bool,
    arrow: &mut Observations,
    obs: &mut Obs,
) -> (Option<Ended>, bool) {
    let found = probe::check_schema(schema);
    let schema_ok = !crate::inspect::any_must(&found);
    arrow.validated(&schema_rules(), found, "schema");
    if device_array {
        device_members(
            dev,
            &Options::default(),
            DeviceId::Requested,
            "device_array",
            arrow,
        );
    } else {
        arrow.not_exercised(
            crate::rule!("device.reserved.zero"),
            "dlpack_to_arrow's object has __arrow_c_array__ only (no device members)",
        );
    }
    if !schema_ok {
        return (None, false);
    }
    let found = probe::check_array(schema, &dev.array);
    let array_ok = !crate::inspect::any_must(&found);
    arrow.validated(&array_rules(), found, "device_array.array");
    if !array_ok {
        return (None, false);
    }
    // Lifetime: "the consumer ... calls the deleter when it no longer needs
    // the data". An array whose buffers point into the tensor needs it
    // until the array is released.
    let inside = points_into(&dev.array, tensor.data_range());
    if inside && tensor.deleted() != (0, 0) {
        obs.fail(
            crate::rule!("dlpack.consumer.deleter-once"),
            "dlpack_to_arrow",
            "the tensor's deleter ran while the ArrowDeviceArray the library exported still points into the tensor's data (its Python objects dropped, the array not yet released)",
        );
        obs.skip(
            crate::rule!("dlpack.consumer.values"),
            "the tensor under the array was deleted (its data poisoned)",
        );
        return (None, true);
    }
    (values(tensor, schema, dev, obs), true)
}

/// Whether any buffer of `a` (not its children: the bridge's arrays are
/// primitive) points into `range`.
fn points_into(a: &crate::abi::ArrowArray, range: std::ops::Range<usize>) -> bool {
    probe::buffer_addresses(a)
        .into_iter()
        .any(|p| range.contains(&p))
}

/// The Arrow array's values against the tensor's (row-major: Arrow arrays
/// are one-dimensional).
fn values(
    tensor: &HarnessTensor,
    schema: &ArrowSchema,
    dev: &ArrowDeviceArray,
    obs: &mut Obs,
) -> Option<Ended> {
    // What the array holds is the DLPack consumer's reading of the tensor
    // (the Arrow rules judge the structures): the rule of the layout, as
    // for a consumer case.
    let rule = match tensor.spec.layout {
        Layout::ByteOffset => crate::rule!("dlpack.consumer.byte-offset"),
        Layout::Contiguous => crate::rule!("dlpack.consumer.values"),
        _ if tensor.spec.shape.is_empty() => crate::rule!("dlpack.consumer.values"),
        _ => crate::rule!("dlpack.consumer.strides"),
    };
    let at = "device_array.array";
    let array = match probe::read_array(schema, &dev.array) {
        Ok(a) => a,
        Err(e) => {
            obs.skip(rule, format!("arrow-rs cannot read the array: {e}"));
            return None;
        }
    };
    let expected = tensor.expected();
    let want = Logical {
        shape: vec![expected.len() as i64],
        ..expected.clone()
    };
    if array.null_count() > 0 {
        obs.fail(
            rule,
            at,
            format!(
                "{} null slot(s) in an array made of a tensor, which has none",
                array.null_count()
            ),
        );
        return None;
    }
    let Some(got) = logical_of(&array) else {
        // A type Arrow's view of the tensor cannot be compared in: the
        // values are the library's to explain.
        obs.fail(
            rule,
            at,
            format!(
                "the array is of type {}, not one a {} tensor's values can be compared in",
                array.data_type(),
                expected.dtype.name()
            ),
        );
        return None;
    };
    let mut scratch = Obs::default();
    compare(&mut scratch, rule, at, &want, &got);
    let retyped = got.dtype != want.dtype
        && got.dtype.size() == want.dtype.size()
        && got.shape == want.shape
        && got.values == want.values;
    match scratch.violations.into_iter().next() {
        None => {
            obs.check(rule);
            None
        }
        Some(_) if retyped => {
            obs.check(rule);
            Some(Ended::Changed(format!(
                "dtype {} arrived as Arrow {}",
                want.dtype.name(),
                array.data_type()
            )))
        }
        Some((_, _, why)) => {
            obs.fail(rule, at, why);
            None
        }
    }
}

/// The values of a one-dimensional Arrow array as a tensor of the DLPack
/// dtype Arrow's type names (booleans one byte each); `None` for other
/// types.
fn logical_of(array: &arrow_array::ArrayRef) -> Option<Logical> {
    use arrow_array::Array;
    use arrow_schema::DataType as T;
    let dtype = match array.data_type() {
        T::Int8 => DType::I8,
        T::Int16 => DType::I16,
        T::Int32 => DType::I32,
        T::Int64 => DType::I64,
        T::UInt8 => DType::U8,
        T::UInt16 => DType::U16,
        T::UInt32 => DType::U32,
        T::UInt64 => DType::U64,
        T::Float16 => DType::F16,
        T::Float32 => DType::F32,
        T::Float64 => DType::F64,
        T::Boolean => {
            let b = array.as_any().downcast_ref::<arrow_array::BooleanArray>()?;
            return Some(Logical {
                dtype: DType::Bool,
                shape: vec![b.len() as i64],
                values: b.values().iter().map(u8::from).collect(),
            });
        }
        _ => return None,
    };
    let data = array.to_data();
    let size = dtype.size();
    let bytes = data.buffers().first()?.as_slice();
    let from = data.offset() * size;
    let to = from + data.len() * size;
    Some(Logical {
        dtype,
        shape: vec![data.len() as i64],
        values: bytes.get(from..to)?.to_vec(),
    })
}

// ---- Arrow in, DLPack out -------------------------------------------------

/// A from-arrow case: `input` into the adapter's `arrow_to_dlpack`, its
/// object's `__dlpack__` asked with `request`, the capsule taken
/// (`consume`) or dropped untaken.
pub(super) fn from_arrow_steps(
    bridge: &Bridge,
    input: &ArrowInput,
    request: Request,
    consume: bool,
    obs: &mut Obs,
) -> Result<Ended, String> {
    let (snode, node) = arrow_nodes(input)?;
    let ledger = Ledger::new(true);
    // The ledger owns the structures (at fixed addresses) and everything
    // they point to; the library moves them out of capsules over them.
    let mut s = ledger.schema(&snode, "schema");
    let mut a = ledger.array(&node, "array");
    let args = [s.addr() as u64, a.addr() as u64];
    let (h, v) = bridge.call("from_arrow", &args, "")?;
    let obj = Held::new(bridge, h);
    let taken = v["taken"].as_bool() != Some(false);
    if !taken {
        // The library never asked for the capsules: the structures are
        // still the harness's, released here (no consumer rule is judged
        // on what the library never held).
        s.get().release();
        a.get().release();
    }
    let ended = match PyError::of(&v) {
        Some(e) => {
            drop(obj);
            Ended::Limitation(format!("arrow_to_dlpack declined: {e}"))
        }
        None => {
            let mut l = Loaded {
                loaded: obj,
                array: Held::new(bridge, None),
                expected: Logical::pattern(input.dtype, &[input.length]),
                source: None,
            };
            let ended = exported_steps(bridge, &mut l, input.dtype, request, consume, obs);
            drop(l); // the library's objects, then a collection
            ended?
        }
    };
    bridge.call("gc", &[], "")?;
    // The Arrow consumer rules: the library imported the harness's array;
    // with its objects and the tensor gone, it must have released it, once,
    // without writing to it.
    let found = ledger.finish();
    let mut arrow = Observations::default();
    if !taken {
        for rule in [
            crate::rule!("consumer.release.once"),
            crate::rule!("consumer.data.immutable"),
        ] {
            arrow.not_exercised(
                rule,
                "arrow_to_dlpack never asked for the harness's Arrow array (__arrow_c_array__)",
            );
        }
        arrow.violations.extend(found.violations);
        merged(obs, arrow);
        return Ok(ended);
    }
    arrow.check(
        crate::rule!("consumer.data.immutable"),
        true,
        "array",
        String::new,
    );
    // A tensor its producer never deleted (dlpack.capsule.destructor, judged
    // above) still holds the Arrow array it exports: that leak is the one
    // rule's, not a second finding.
    let tensor_leaked = obs
        .violations
        .iter()
        .any(|v| v.0 == crate::rule!("dlpack.capsule.destructor"));
    for v in found.violations {
        if tensor_leaked
            && v.rule == crate::rule!("consumer.release.once")
            && v.message.contains("never released")
        {
            continue;
        }
        arrow.violations.push(v);
    }
    if tensor_leaked {
        arrow.not_exercised(
            crate::rule!("consumer.release.once"),
            "the tensor over the array was never deleted (dlpack.capsule.destructor), so the array could not be released",
        );
    } else {
        arrow.check(
            crate::rule!("consumer.release.once"),
            true,
            "array",
            String::new,
        );
    }
    merged(obs, arrow);
    Ok(ended)
}

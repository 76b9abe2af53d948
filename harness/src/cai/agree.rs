//! The `cai.agree.*` rules (issue 42 item 4): where one object exports
//! the CUDA Array Interface and also DLPack and/or an Arrow device array,
//! each describes the same memory and must say the same of it. Pure: the
//! CAI dict as [`Layout`] read it, each other protocol as a [`Described`]
//! ([`from_dlpack`] here, `super::arrow_side` for Arrow); no device memory
//! is touched (metadata only, so CUDA libraries are judged too).

use super::check::{Judged, Layout, Violation};
use crate::abi::dlpack::{
    FLAG_READ_ONLY, KDL_BOOL, KDL_COMPLEX, KDL_CUDA, KDL_CUDA_HOST, KDL_CUDA_MANAGED, KDL_FLOAT,
    KDL_INT, KDL_UINT,
};
use crate::dlpack::reader::Observed;
use crate::dlpack::row_major_strides;

/// The agreement rules, in catalogue order.
pub const AGREE_RULES: [&str; 6] = [
    crate::rule!("cai.agree.pointer"),
    crate::rule!("cai.agree.shape"),
    crate::rule!("cai.agree.strides"),
    crate::rule!("cai.agree.dtype"),
    crate::rule!("cai.agree.device"),
    crate::rule!("cai.agree.readonly"),
];

/// What another protocol says of the memory, each field in the CAI dict's
/// terms (bytes, typestr kind and size); `Err` says why it says nothing
/// the harness can compare.
#[derive(Debug, Clone, PartialEq)]
pub struct Described {
    /// Where it was read, for the evidence: "__dlpack__() DLTensor".
    pub what: &'static str,
    /// The address of element 0.
    pub first: Result<u64, String>,
    pub shape: Result<Vec<u64>, String>,
    /// Bytes, one per dimension.
    pub strides: Result<Vec<i64>, String>,
    /// (typestr kind, size in bytes).
    pub element: Result<(char, usize), String>,
    /// Every device it names: (where, device type, device id). DLPack and
    /// Arrow number CUDA's device types alike (2, 3, 13).
    pub devices: Vec<(&'static str, i32, i32)>,
    pub read_only: Result<bool, String>,
}

/// One rule against the descriptions: Ok(None) agrees, Ok(Some((at,
/// evidence))) differs, Err(why) cannot be compared.
type Verdict = Result<Option<(String, String)>, String>;

/// The CUDA device types: kDLCUDA / ARROW_DEVICE_CUDA (2),
/// kDLCUDAHost / ARROW_DEVICE_CUDA_HOST (3, pinned host memory CUDA
/// addresses) and kDLCUDAManaged / ARROW_DEVICE_CUDA_MANAGED (13).
const CUDA_TYPES: [i32; 3] = [KDL_CUDA, KDL_CUDA_HOST, KDL_CUDA_MANAGED];

/// The CAI rules that already judge the entry an agreement rule compares:
/// when one failed in the case, the CAI side is known wrong and a
/// disagreement would report the same fault twice.
fn judged_by(rule: &str) -> &'static [&'static str] {
    match rule {
        r if r == crate::rule!("cai.agree.pointer") => &[
            crate::rule!("cai.data.accessible"),
            crate::rule!("cai.data.lifetime"),
        ],
        r if r == crate::rule!("cai.agree.shape") => &[crate::rule!("cai.shape")],
        r if r == crate::rule!("cai.agree.strides") => {
            &[crate::rule!("cai.strides"), crate::rule!("cai.values")]
        }
        r if r == crate::rule!("cai.agree.dtype") => &[
            crate::rule!("cai.typestr"),
            crate::rule!("cai.typestr.format"),
        ],
        r if r == crate::rule!("cai.agree.readonly") => &[crate::rule!("cai.data")],
        _ => &[],
    }
}

const DLPACK: &str = "__dlpack__() DLTensor";

/// A DLPack tensor as the reader read it (`device_call`: what
/// `__dlpack_device__()` returned, when the object has one).
pub fn from_dlpack(o: &Observed, device_call: Option<(i32, i32)>) -> Described {
    let shape = o
        .shape
        .clone()
        .ok_or_else(|| "the DLPack tensor's shape cannot be read".to_string());
    let bits = u64::from(o.dtype.bits) * u64::from(o.dtype.lanes);
    let size = (bits % 8 == 0 && bits > 0)
        .then_some(bits / 8)
        .ok_or_else(|| {
            format!(
                "the DLPack element ({} bits x {} lanes) is not a whole number of bytes",
                o.dtype.bits, o.dtype.lanes
            )
        });
    let strides = match (&shape, &size) {
        (Err(e), _) | (_, Err(e)) => Err(e.clone()),
        // NULL: "can be NULL, indicating tensor is compact and row-majored".
        (Ok(s), Ok(n)) => Ok(o
            .strides
            .clone()
            .unwrap_or_else(|| row_major_strides(s))
            .iter()
            .map(|x| x.wrapping_mul(*n as i64))
            .collect()),
    };
    let kind = match o.dtype.code {
        KDL_INT => Some('i'),
        KDL_UINT => Some('u'),
        KDL_FLOAT => Some('f'),
        KDL_COMPLEX => Some('c'),
        KDL_BOOL if o.dtype.bits == 8 => Some('b'),
        _ => None,
    };
    let element = match (kind, &size, o.dtype.lanes) {
        (Some(k), Ok(n), 1) => Ok((k, *n as usize)),
        _ => Err(format!(
            "DLPack dtype (code {}, bits {}, lanes {}) has no typestr the harness maps",
            o.dtype.code, o.dtype.bits, o.dtype.lanes
        )),
    };
    let mut devices = vec![(DLPACK, o.device.device_type, o.device.device_id)];
    if let Some((t, id)) = device_call {
        devices.push(("__dlpack_device__()", t, id));
    }
    Described {
        what: DLPACK,
        first: Ok(o.first_byte() as u64),
        shape: shape.map(|s| s.iter().map(|n| *n as u64).collect()),
        strides,
        element,
        devices,
        read_only: if o.versioned {
            Ok(o.flags & FLAG_READ_ONLY != 0)
        } else {
            Err("__dlpack__ gave a legacy DLManagedTensor, which has no flags (only DLManagedTensorVersioned carries DLPACK_FLAG_BITMASK_READ_ONLY)".into())
        },
    }
}

/// Judges every agreement rule of one case: `l` is the CAI dict's layout,
/// `others` what the object's other protocols say. Rules `j` already
/// failed keep their CAI side out of it ([`judged_by`]). A rule no
/// description can judge is not exercised, with every reason.
pub fn judge(j: &mut Judged, l: &Layout, others: &[Described]) {
    let mut out: Vec<(&'static str, Verdict)> = Vec::new();
    for rule in AGREE_RULES {
        if let Some(r) = judged_by(rule).iter().find(|r| j.failed(r)) {
            out.push((
                rule,
                Err(format!(
                    "the CAI dict's entry already fails {r} in this case: one fault is reported once"
                )),
            ));
            continue;
        }
        let mut reasons: Vec<String> = Vec::new();
        let mut verdict = None;
        for d in others {
            match one(rule, l, d) {
                Ok(None) => verdict = verdict.or(Some(None)),
                Ok(Some(bad)) => {
                    verdict = Some(Some(bad));
                    break;
                }
                Err(why) => reasons.push(format!("{}: {why}", d.what)),
            }
        }
        if rule == crate::rule!("cai.agree.device") && !matches!(verdict, Some(Some(_))) {
            if let Some(bad) = device_ids(others) {
                verdict = Some(Some(bad));
            }
        }
        out.push((
            rule,
            verdict.ok_or_else(|| {
                if others.is_empty() {
                    "no other protocol's description to compare".to_string()
                } else {
                    reasons.join("; ")
                }
            }),
        ));
    }
    for (rule, verdict) in out {
        match verdict {
            Ok(None) => j.checked.push(rule),
            Ok(Some((at, evidence))) => {
                j.checked.push(rule);
                j.violations.push(Violation { rule, at, evidence });
            }
            Err(why) => j.not_exercised.push((rule, why)),
        }
    }
}

/// Every agreement rule not exercised, with the same reason.
pub fn not_exercised(j: &mut Judged, why: &str) {
    for rule in AGREE_RULES {
        j.not_exercised.push((rule, why.to_string()));
    }
}

/// The CAI dict names no device id; two other protocols that name
/// different ones for the same memory, on the same CUDA device type,
/// disagree with each other. (Ids of other types are not compared: Arrow
/// gives the CPU -1, DLPack 0; and a library may label managed memory
/// either way.)
fn device_ids(others: &[Described]) -> Option<(String, String)> {
    let all: Vec<&(&str, i32, i32)> = others
        .iter()
        .flat_map(|d| &d.devices)
        .filter(|d| CUDA_TYPES.contains(&d.1))
        .collect();
    all.iter().find_map(|a| {
        let b = all.iter().find(|b| b.1 == a.1 && b.2 != a.2)?;
        Some((
            "__cuda_array_interface__".into(),
            format!(
                "the {} says device ({}, {}), the {} device ({}, {}): one memory, two devices",
                a.0, a.1, a.2, b.0, b.1, b.2
            ),
        ))
    })
}

fn typestr_of(e: (char, usize)) -> String {
    format!("{}{}", e.0, e.1)
}

/// One rule against one description.
fn one(rule: &str, l: &Layout, d: &Described) -> Verdict {
    let differs = |entry: &str, evidence: String| {
        Ok(Some((
            format!("__cuda_array_interface__[\"{entry}\"]"),
            evidence,
        )))
    };
    let what = d.what;
    match rule {
        r if r == crate::rule!("cai.agree.pointer") => {
            if l.elements() == 0 {
                return Err("the array has no elements: CAI gives pointer 0, the others any".into());
            }
            let first = d.first.clone()?;
            if first == l.ptr {
                return Ok(None);
            }
            differs(
                "data",
                format!(
                    "pointer {:#x}, but the {what} puts element 0 at {first:#x}",
                    l.ptr
                ),
            )
        }
        r if r == crate::rule!("cai.agree.shape") => {
            let shape = d.shape.clone()?;
            if shape == l.shape {
                return Ok(None);
            }
            differs(
                "shape",
                format!("{:?}, but the {what}'s shape is {shape:?}", l.shape),
            )
        }
        r if r == crate::rule!("cai.agree.strides") => {
            let shape = d.shape.clone()?;
            if shape != l.shape {
                return Err("the shapes differ (cai.agree.shape)".into());
            }
            if l.elements() == 0 {
                return Err("the array has no elements: its strides step over nothing".into());
            }
            let strides = d.strides.clone()?;
            // A dimension of one element steps over nothing: any stride.
            match (0..shape.len()).find(|&k| shape[k] > 1 && strides.get(k) != l.strides.get(k)) {
                None => Ok(None),
                Some(k) => differs(
                    "strides",
                    format!(
                        "{:?} bytes (C-contiguous when not given), but the {what} steps {strides:?} bytes: dimension {k} differs",
                        l.strides
                    ),
                ),
            }
        }
        r if r == crate::rule!("cai.agree.dtype") => {
            let (order, kind, size) = l
                .typestr
                .ok_or("typestr cannot be read (cai.typestr.format)")?;
            let native = if cfg!(target_endian = "little") {
                '<'
            } else {
                '>'
            };
            if order != '|' && order != native {
                return Err(format!("typestr byte order {order:?} is not this machine's: the other protocols describe native data"));
            }
            if !"iufcb".contains(kind) || (kind == 'b' && size != 1) {
                return Err(format!(
                    "typestr kind {kind:?} of {size} bytes has no counterpart the harness maps"
                ));
            }
            let other = d.element.clone()?;
            if other == (kind, size) {
                return Ok(None);
            }
            differs(
                "typestr",
                format!(
                    "{order}{kind}{size}, but the {what}'s type is {}",
                    typestr_of(other)
                ),
            )
        }
        r if r == crate::rule!("cai.agree.device") => match d.devices.iter().find(|x| !CUDA_TYPES.contains(&x.1)) {
            None if d.devices.is_empty() => Err("it names no device".into()),
            None => Ok(None),
            Some((at, t, id)) => Ok(Some((
                "__cuda_array_interface__".into(),
                format!("a CUDA array, but the {at}'s device is ({t}, {id}): not CUDA (2), CUDA host (3) or CUDA managed (13)"),
            ))),
        },
        r if r == crate::rule!("cai.agree.readonly") => {
            let other = d.read_only.clone()?;
            let ro = l
                .read_only
                .ok_or("the read-only flag of data is not a bool (cai.data)")?;
            if ro == other {
                return Ok(None);
            }
            let py = |b: bool| if b { "True" } else { "False" };
            differs(
                "data",
                format!(
                    "read-only flag {}, but the {what} is {}",
                    py(ro),
                    if other { "read-only" } else { "writable" }
                ),
            )
        }
        other => Err(format!("no agreement rule {other}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::dlpack::{DLDataType, DLDevice, DLPackVersion, KDL_CPU};
    use crate::cai::check::Stream;

    fn layout() -> Layout {
        Layout {
            ptr: 0x1000,
            shape: vec![3, 2],
            strides: vec![32, 8],
            element: Some(('f', 8)),
            itemsize: Some(8),
            typestr: Some(('<', 'f', 8)),
            read_only: Some(false),
            stream: Stream::None,
        }
    }

    fn tensor() -> Observed {
        Observed {
            versioned: true,
            version: Some(DLPackVersion { major: 1, minor: 0 }),
            flags: 0,
            deleter: 0,
            manager_ctx: 0,
            data: 0xff8,
            device: DLDevice {
                device_type: KDL_CUDA,
                device_id: 0,
            },
            ndim: 2,
            dtype: DLDataType {
                code: KDL_FLOAT,
                bits: 64,
                lanes: 1,
            },
            shape: Some(vec![3, 2]),
            strides: Some(vec![4, 1]),
            byte_offset: 8,
            values: None,
        }
    }

    fn failed(l: &Layout, others: &[Described]) -> Vec<&'static str> {
        let mut j = Judged::default();
        judge(&mut j, l, others);
        assert_eq!(
            j.checked.len() + j.not_exercised.len(),
            AGREE_RULES.len(),
            "every rule is judged or skipped once"
        );
        j.violations.iter().map(|v| v.rule).collect()
    }

    fn dl(o: &Observed) -> Vec<Described> {
        vec![from_dlpack(o, None)]
    }

    #[test]
    fn one_description_twice_agrees() {
        assert!(failed(&layout(), &[from_dlpack(&tensor(), Some((KDL_CUDA, 0)))]).is_empty());
        // NULL DLPack strides are compact row-major; a dimension of one
        // element may have any stride on either side.
        let mut l = layout();
        l.shape = vec![1, 3];
        l.strides = vec![999, 8];
        let mut o = tensor();
        o.shape = Some(vec![1, 3]);
        o.strides = None;
        assert!(failed(&l, &dl(&o)).is_empty());
    }

    #[test]
    fn each_field_that_differs_fails_its_rule_alone() {
        let mut o = tensor();
        o.byte_offset = 16;
        assert_eq!(
            failed(&layout(), &dl(&o)),
            [crate::rule!("cai.agree.pointer")]
        );
        let mut o = tensor();
        o.shape = Some(vec![2, 3]);
        assert_eq!(
            failed(&layout(), &dl(&o)),
            [crate::rule!("cai.agree.shape")]
        );
        let mut o = tensor();
        o.strides = Some(vec![32, 8]);
        assert_eq!(
            failed(&layout(), &dl(&o)),
            [crate::rule!("cai.agree.strides")]
        );
        let mut o = tensor();
        o.dtype.code = KDL_INT;
        assert_eq!(
            failed(&layout(), &dl(&o)),
            [crate::rule!("cai.agree.dtype")]
        );
        let mut o = tensor();
        o.device.device_type = KDL_CPU;
        assert_eq!(
            failed(&layout(), &dl(&o)),
            [crate::rule!("cai.agree.device")]
        );
        assert_eq!(
            failed(&layout(), &[from_dlpack(&tensor(), Some((KDL_CPU, 0)))]),
            [crate::rule!("cai.agree.device")]
        );
        let mut o = tensor();
        o.flags = FLAG_READ_ONLY;
        assert_eq!(
            failed(&layout(), &dl(&o)),
            [crate::rule!("cai.agree.readonly")]
        );
    }

    #[test]
    fn two_other_protocols_naming_two_devices_disagree() {
        let mut other = from_dlpack(&tensor(), None);
        other.what = "__arrow_c_device_array__() ArrowDeviceArray";
        other.devices = vec![("ArrowDeviceArray", KDL_CUDA, 1)];
        other.read_only = Err("no flag".into());
        let both = [from_dlpack(&tensor(), None), other];
        assert_eq!(failed(&layout(), &both), [crate::rule!("cai.agree.device")]);
        let mut j = Judged::default();
        judge(&mut j, &layout(), &both);
        assert!(j.violations[0].evidence.contains("device (2, 1)"));
        // Ids of the CPU (Arrow -1, DLPack 0) are not compared: the CPU
        // type itself is what fails.
        let mut cpu = tensor();
        cpu.device = DLDevice {
            device_type: KDL_CPU,
            device_id: 0,
        };
        let mut arrow = from_dlpack(&cpu, None);
        arrow.devices = vec![("ArrowDeviceArray", KDL_CPU, -1)];
        let mut j = Judged::default();
        judge(&mut j, &layout(), &[from_dlpack(&cpu, None), arrow]);
        assert_eq!(j.violations.len(), 1);
        assert!(!j.violations[0].evidence.contains("two devices"));
    }

    #[test]
    fn what_cannot_be_compared_is_not_exercised_with_the_reason() {
        let mut j = Judged::default();
        let mut o = tensor();
        o.versioned = false;
        let mut l = layout();
        l.typestr = Some(('>', 'f', 8));
        judge(&mut j, &l, &dl(&o));
        let skipped: Vec<&str> = j.not_exercised.iter().map(|(r, _)| *r).collect();
        assert_eq!(
            skipped,
            [
                crate::rule!("cai.agree.dtype"),
                crate::rule!("cai.agree.readonly")
            ]
        );
        assert!(j.not_exercised[1].1.contains("legacy DLManagedTensor"));
        // A CAI entry already failed: the disagreement is not reported again.
        let mut j = Judged::default();
        j.violations.push(Violation {
            rule: crate::rule!("cai.data.accessible"),
            at: String::new(),
            evidence: String::new(),
        });
        let mut o = tensor();
        o.byte_offset = 0;
        judge(&mut j, &layout(), &dl(&o));
        assert_eq!(j.violations.len(), 1);
        assert!(j.not_exercised[0]
            .1
            .contains(crate::rule!("cai.data.accessible")));
        let mut j = Judged::default();
        judge(&mut j, &layout(), &[]);
        assert_eq!(j.not_exercised.len(), AGREE_RULES.len());
        assert!(j.checked.is_empty());
    }

    #[test]
    fn dlpack_types_read_as_typestrs() {
        let mut o = tensor();
        o.dtype = DLDataType {
            code: KDL_BOOL,
            bits: 8,
            lanes: 1,
        };
        assert_eq!(from_dlpack(&o, None).element, Ok(('b', 1)));
        o.dtype = DLDataType {
            code: KDL_COMPLEX,
            bits: 128,
            lanes: 1,
        };
        assert_eq!(from_dlpack(&o, None).element, Ok(('c', 16)));
        o.dtype.lanes = 2;
        assert!(from_dlpack(&o, None).element.is_err());
    }
}

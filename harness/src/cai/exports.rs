//! The other protocols a CAI producer's object exports (issue 42 item 4):
//! which of `__dlpack__`, `__dlpack_device__` and
//! `__arrow_c_device_array__` it has; its DLPack tensor, fetched through
//! the bridge and read by the harness's capsule reader, and its Arrow
//! device array ([`super::arrow`]), for [`super::agree`] to compare with
//! the CAI dict.

use super::agree::{self, Described};
use super::check::Judged;
use crate::dlpack::bridge::{Bridge, Handle, PyError};
use crate::dlpack::reader;

/// What the object offers besides `__cuda_array_interface__`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Offered {
    pub dlpack: bool,
    pub dlpack_device: bool,
    pub arrow_device_array: bool,
}

fn offered(bridge: &Bridge, obj: Handle) -> Result<Offered, String> {
    let (_, v) = bridge.call("cai_protocols", &[obj.0], "")?;
    let has = |k: &str| v[k].as_bool().unwrap_or(false);
    Ok(Offered {
        dlpack: has("dlpack"),
        dlpack_device: has("dlpack_device"),
        arrow_device_array: has("arrow_device_array"),
    })
}

/// `__dlpack__` as a consumer asks it: a versioned tensor first
/// (max_version=(1, 0)), the call without keywords when the producer
/// refuses the keyword (a DLPack before 1.0 defines none). The capsule's
/// handle, name and pointer.
fn export(bridge: &Bridge, obj: Handle) -> Result<(Handle, String, usize), String> {
    let mut last = String::new();
    for kwargs in [r#"{"max_version": [1, 0]}"#, "{}"] {
        let (cap, v) = bridge.call("export", &[obj.0], kwargs)?;
        if let Some(e) = PyError::of(&v) {
            if let Some(c) = cap {
                bridge.drop_handle(c);
            }
            last = format!("__dlpack__({}) raised {e}", kwargs.trim_matches(['{', '}']));
            if e.is_type_error() {
                continue;
            }
            return Err(last);
        }
        let Some(cap) = cap else {
            return Err("__dlpack__ returned nothing".into());
        };
        let c = &v["capsule"];
        let name = c["name"].as_str().unwrap_or("").to_string();
        let pointer = c["pointer"].as_u64().unwrap_or(0) as usize;
        return Ok((cap, name, pointer));
    }
    Err(last)
}

fn dlpack_device(bridge: &Bridge, obj: Handle) -> Result<(i32, i32), String> {
    let (_, v) = bridge.call("device", &[obj.0], "")?;
    if let Some(e) = PyError::of(&v) {
        return Err(format!("__dlpack_device__() raised {e}"));
    }
    let d = &v["device"];
    match (d[0].as_i64(), d[1].as_i64()) {
        (Some(t), Some(id)) => Ok((t as i32, id as i32)),
        _ => Err(format!("__dlpack_device__() returned {d}")),
    }
}

/// The object's DLPack tensor, read ([`reader::read`], metadata only),
/// or why there is none to compare.
fn dlpack(bridge: &Bridge, obj: Handle, offers: Offered) -> Result<Described, String> {
    if !offers.dlpack {
        return Err("the object has no __dlpack__".into());
    }
    let (cap, name, pointer) = export(bridge, obj)?;
    let versioned = match name.as_str() {
        "dltensor_versioned" => Some(true),
        "dltensor" => Some(false),
        _ => None,
    };
    let read = match versioned {
        None => Err(format!("__dlpack__ returned a capsule named {name:?}, not dltensor or dltensor_versioned (dlpack.capsule.name, judged by certify --dlpack)")),
        Some(_) if pointer == 0 => Err("the capsule's pointer is NULL".to_string()),
        Some(v) => match reader::read(pointer, v) {
            (Some(o), _) if o.version.is_none_or(|v| v.major == 1) => Ok(o),
            (Some(o), _) => Err(format!(
                "the tensor's DLPack major version is {}: its fields cannot be read",
                o.version.map_or(0, |v| v.major)
            )),
            (None, findings) => Err(findings
                .first()
                .map_or("the tensor cannot be read".into(), |f| f.evidence.clone())),
        },
    };
    // A __dlpack_device__ that raises is certify --dlpack's to judge; the
    // tensor itself still says where the data is.
    let device_call = offers
        .dlpack_device
        .then(|| dlpack_device(bridge, obj).ok())
        .flatten();
    // Read (copied) already: the capsule's destructor calls the deleter.
    bridge.drop_handle(cap);
    let _ = bridge.call("gc", &[], "");
    read.map(|o| agree::from_dlpack(&o, device_call))
}

/// Judges the `cai.agree.*` rules of one case against the object's other
/// protocols, or leaves them not exercised with the reason. `j` holds the
/// CAI dict's verdicts (its layout included).
pub fn judge(bridge: &Bridge, obj: Handle, j: &mut Judged) {
    let Some(l) = j.layout.clone() else {
        agree::not_exercised(
            j,
            "the dict's shape, data, typestr or strides cannot be read: nothing to compare",
        );
        return;
    };
    let offers = match offered(bridge, obj) {
        Ok(o) => o,
        Err(e) => return agree::not_exercised(j, &e),
    };
    if !offers.dlpack && !offers.arrow_device_array {
        agree::not_exercised(
            j,
            "the object exports the CUDA Array Interface only (no __dlpack__, no __arrow_c_device_array__): there is no second description to compare",
        );
        return;
    }
    let mut others = Vec::new();
    let mut why = Vec::new();
    let arrow = if offers.arrow_device_array {
        super::arrow::described(bridge, obj, l.shape.len())
    } else {
        Err("the object has no __arrow_c_device_array__".into())
    };
    for got in [dlpack(bridge, obj, offers), arrow] {
        match got {
            Ok(d) => others.push(d),
            Err(e) => why.push(e),
        }
    }
    if others.is_empty() {
        return agree::not_exercised(j, &format!("{}: no description to compare", why.join("; ")));
    }
    agree::judge(j, &l, &others);
}

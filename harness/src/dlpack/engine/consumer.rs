//! The consumer cases: handing the harness's own tensors to a consumer's
//! `from_dlpack` (on the CPU and on a device), and the pair cases of a
//! producer into a consumer.

use super::*;

/// A consumer case whose tensor is on `device`: skipped where this
/// machine has no such device (the reason given), else the consumer
/// steps with the data in device memory.
pub(super) fn device_consumer_case(
    bridge: &Bridge,
    spec: &Spec,
    device: crate::device::Kind,
    obs: &mut Obs,
) -> Ended {
    let dev = match crate::device::backend(device) {
        Ok(d) => d,
        Err(why) => return Ended::Skipped(crate::device::missing(device, &why)),
    };
    let tensor = HarnessTensor::on_device(spec.clone(), dev, device)
        .map_err(|e| format!("the harness could not place its tensor on {device}: {e}"));
    handed_over(tensor, obs, |t, obs| {
        consumer_steps(bridge, t, "negotiate", obs)
    })
}

pub(super) fn consumer_case(bridge: &Bridge, spec: &Spec, mode: &str, obs: &mut Obs) -> Ended {
    handed_over(mapped(spec), obs, |t, obs| {
        consumer_steps(bridge, t, mode, obs)
    })
}

/// The harness's tensor of `spec` in host memory, or why not.
pub(in crate::dlpack) fn mapped(spec: &Spec) -> Result<HarnessTensor, String> {
    HarnessTensor::new(spec.clone())
        .map_err(|e| format!("the harness could not map its tensor: {e}"))
}

/// Runs `steps` on a tensor the harness hands a library, then keeps the
/// tensor allocated (leaked) when the library may still hold it: never
/// deleted, or a capsule over it left unrenamed.
pub(in crate::dlpack) fn handed_over(
    tensor: Result<HarnessTensor, String>,
    obs: &mut Obs,
    steps: impl FnOnce(&HarnessTensor, &mut Obs) -> Result<Ended, String>,
) -> Ended {
    let tensor = match tensor {
        Ok(t) => t,
        Err(e) => return Ended::Error(e),
    };
    let ended = steps(&tensor, obs);
    let (v, l) = tensor.deleted();
    if v + l == 0 || obs.keep_tensor {
        tensor.leak(); // the library may still hold it
    }
    ended.unwrap_or_else(Ended::Error)
}

pub(super) fn consumer_steps(
    bridge: &Bridge,
    tensor: &HarnessTensor,
    mode: &str,
    obs: &mut Obs,
) -> Result<Ended, String> {
    let spec = &tensor.spec;
    let (device_type, device_id) = tensor.device();
    let args = [
        tensor.versioned_ptr() as u64,
        tensor.legacy_ptr() as u64,
        device_type as u64,
        device_id as u64,
    ];
    let (h, v) = bridge.call("read", &args, &format!(r#"{{"mode": "{mode}"}}"#))?;
    let mut result = Held::new(bridge, h);
    let at = "from_dlpack";
    let names = harness_side(&v, at, device_type, obs);
    let error = PyError::of(&v);
    let handed = !names.is_empty();
    let major2 = spec.version.major != 1;
    if major2 {
        if handed {
            match &error {
                Some(_) => obs.check(crate::rule!("dlpack.consumer.major-version")),
                None => obs.fail(
                    crate::rule!("dlpack.consumer.major-version"),
                    at,
                    format!(
                        "from_dlpack accepted a version {}.{} tensor",
                        spec.version.major, spec.version.minor
                    ),
                ),
            }
        } else {
            obs.skip(
                crate::rule!("dlpack.consumer.major-version"),
                "the consumer did not ask for a versioned capsule",
            );
        }
    }
    let outcome = if let Some(e) = &error {
        if !handed && mode != "negotiate" && asked_capsule(&v) {
            for rule in [
                crate::rule!("dlpack.consumer.read-only"),
                crate::rule!("dlpack.consumer.read-only-array"),
                crate::rule!("dlpack.consumer.major-version"),
            ] {
                obs.skip(
                    rule,
                    "the consumer did not ask for a versioned capsule (max_version)",
                );
            }
            Ended::Limitation(format!(
                "the case needs a {mode} capsule; from_dlpack raised {e}"
            ))
        } else if major2 && handed {
            Ended::Ran
        } else if handed
            && (e.is_buffer_error()
                || e.is_type_error()
                || crate::report::outcome::says_not_exported(&e.message.to_lowercase()))
        {
            Ended::Limitation(format!("from_dlpack declined: {e}"))
        } else if handed {
            Ended::Limitation(format!("from_dlpack raised {e}"))
        } else if asked_device(&v) {
            // The protocol's own way to decline a device: __dlpack_device__
            // is "called from within from_dlpack(), to query what device
            // the array is on" (DLPack's Python specification), and a
            // consumer that cannot use that device need not ask for a
            // capsule (CuPy and CPU tensors, seen on an H100).
            Ended::Limitation(format!(
                "from_dlpack declined the tensor's device (it asked __dlpack_device__, then raised {e} before asking for a capsule)"
            ))
        } else {
            Ended::Error(format!(
                "from_dlpack raised {e} before asking for a capsule"
            ))
        }
    } else {
        renamed(&names, at, obs);
        // Read the library's array back through its own __dlpack__.
        let rule = match spec.layout {
            Layout::ByteOffset => crate::rule!("dlpack.consumer.byte-offset"),
            Layout::Contiguous => crate::rule!("dlpack.consumer.values"),
            _ if spec.shape.is_empty() => crate::rule!("dlpack.consumer.values"),
            _ => crate::rule!("dlpack.consumer.strides"),
        };
        let mut back = export(bridge, result.id(), Request::V1, &mut Obs::default())?;
        if matches!(&back, Err(e) if e.is_type_error()) {
            back = export(bridge, result.id(), Request::Legacy, &mut Obs::default())?;
        }
        // An array on the tensor's device is read there.
        let back = back.map(|(cap, v, mut o)| {
            if let (None, Some(dev)) = (&o.values, tensor.device_backend()) {
                if o.device.device_type == device_type {
                    o.values = reader::values_on(&o, &*dev).ok();
                }
            }
            (cap, v, o)
        });
        match back {
            Ok((cap, _, o)) => {
                match &o.values {
                    Some(got) => compare(
                        obs,
                        rule,
                        "the library's array, read back",
                        &as_read(tensor.expected(), got),
                        got,
                    ),
                    None => obs.skip(rule, "the library's array could not be read back"),
                }
                if spec.read_only {
                    read_only_array(bridge, result.id(), tensor, &o, &names, obs)?;
                }
                drop(cap);
            }
            Err(e) => {
                let why = format!("the library's array could not be read back: {e}");
                if spec.read_only {
                    obs.skip(crate::rule!("dlpack.consumer.read-only-array"), why.clone());
                }
                obs.skip(rule, why)
            }
        }
        if spec.read_only {
            obs.check(crate::rule!("dlpack.consumer.read-only"));
        }
        Ended::Ran
    };
    result.release();
    bridge.call("gc", &[], "")?;
    let (v1, l1) = tensor.deleted();
    if handed {
        match v1 + l1 {
            1 => obs.check(crate::rule!("dlpack.consumer.deleter-once")),
            0 => obs.fail(crate::rule!("dlpack.consumer.deleter-once"), at, "the tensor's deleter was never called (the library's array dropped, garbage collected)"),
            n => obs.fail(crate::rule!("dlpack.consumer.deleter-once"), at, format!("the tensor's deleter was called {n} times")),
        }
    }
    Ok(outcome)
}

/// `dlpack.consumer.read-only-array`: what from_dlpack made of a READ_ONLY
/// tensor (`result`, read back as `back`), when it is a view of the
/// tensor's memory, must be read-only where the library shows a writeable
/// state. The text asks a consumer without read-only arrays to ignore the
/// flag ("A consumer that does not support read-only arrays should ignore
/// this flag"), and a copy cannot modify the tensor: neither is judged.
pub(super) fn read_only_array(
    bridge: &Bridge,
    result: u64,
    tensor: &HarnessTensor,
    back: &Observed,
    names: &[Option<String>],
    obs: &mut Obs,
) -> Result<(), String> {
    let rule = crate::rule!("dlpack.consumer.read-only-array");
    let versioned = names
        .first()
        .cloned()
        .flatten()
        .is_some_and(|n| n.ends_with("_versioned"));
    if !versioned {
        obs.skip(
            rule,
            "the consumer took a legacy capsule, which cannot carry the READ_ONLY flag",
        );
        return Ok(());
    }
    if tensor.expected().is_empty() || !tensor.data_range().contains(&back.first_byte()) {
        obs.skip(
            rule,
            "the library's array is a copy (its data is not the tensor's): writing it cannot modify the tensor's memory",
        );
        return Ok(());
    }
    let (_, v) = bridge.call("writeable", &[result], "")?;
    let how = v["how"]
        .as_str()
        .unwrap_or("its writeable state")
        .to_string();
    match v["writeable"].as_bool() {
        Some(false) => obs.check(rule),
        Some(true) => obs.fail(
            rule,
            "from_dlpack",
            format!(
                "the array from_dlpack returned for a tensor flagged DLPACK_FLAG_BITMASK_READ_ONLY is a view of the tensor's memory (its data at {:#x}) and writeable ({how} is True)",
                back.first_byte()
            ),
        ),
        None => obs.skip(
            rule,
            match PyError::of(&v) {
                Some(e) => format!("asking the library's array whether it is writeable raised {e}"),
                None => "the library's array shows no writeable state (the adapter has no dlpack_writeable, the array no flags.writeable): a library without read-only arrays ignores the flag".to_string(),
            },
        ),
    }
    Ok(())
}

/// A pair case: the harness's data into the producer library, its array
/// (or view) into the consumer library's from_dlpack, and what that made
/// read back and compared.
pub(super) fn pair_steps(
    a: &Bridge,
    b: &Bridge,
    dtype: DType,
    shape: &[i64],
    view: View,
) -> Result<Ended, String> {
    let l = match load_view(a, dtype, shape, view, "the producer")? {
        Ok(l) => l,
        Err(ended) => return Ok(ended),
    };
    let expected = l.expected.clone();
    let obj = l.obj();
    let (h, v) = b.call("read_object", &[obj], "")?;
    let result = Held::new(b, h);
    if let Some(e) = PyError::of(&v) {
        return Ok(Ended::Limitation(format!("the consumer declined: {e}")));
    }
    let mut scratch = Obs::default();
    let mut back = export(b, result.id(), Request::V1, &mut scratch)?;
    if matches!(&back, Err(e) if e.is_type_error()) {
        back = export(b, result.id(), Request::Legacy, &mut scratch)?;
    }
    // Read while the capsule is held (its tensor stays valid); a tensor
    // in device memory is read through the device's backend.
    let got = match &back {
        Ok((_cap, _, o)) => values_of(o, device_backend(o).as_deref()),
        Err(e) => {
            return Ok(Ended::Limitation(format!(
                "the consumer's array cannot be read back: {e}"
            )))
        }
    };
    drop(back);
    let Some(got) = got else {
        return Ok(Ended::Limitation(
            "the consumer's array cannot be read back".into(),
        ));
    };
    let want = as_read(&expected, &got);
    let mut cmp = Obs::default();
    compare(
        &mut cmp,
        crate::rule!("dlpack.consumer.values"),
        "the consumer's array",
        &want,
        &got,
    );
    drop(result);
    // The same bytes under another dtype of the same width (a library
    // without a byte-wide bool holds DLPack's bool as uint8) arrived, with
    // a type change, as Arrow round trips report it.
    let retyped = got.dtype != want.dtype
        && got.dtype.size() == want.dtype.size()
        && got.shape == want.shape
        && got.values == want.values;
    Ok(match cmp.violations.first() {
        None => Ended::Ran,
        Some(_) if retyped => Ended::Changed(format!(
            "dtype {} arrived as {}",
            want.dtype.name(),
            got.dtype.name()
        )),
        Some((_, _, why)) => Ended::Differs(format!("the values did not arrive: {why}")),
    })
}

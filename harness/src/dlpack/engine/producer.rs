//! The producer cases: asking `__dlpack__` for a capsule, reading what it
//! exported, and calling its deleter (on the harness's thread, another
//! thread, and repeatedly for the frees rules).

use super::*;

/// Exports `obj` with `request`'s keywords and reads what came back:
/// the capsule (held), its name's verdict, the observed tensor.
pub(super) fn export<'a>(
    bridge: &'a Bridge,
    obj: u64,
    request: Request,
    obs: &mut Obs,
) -> Result<Result<(Held<'a>, bool, Observed), PyError>, String> {
    let (h, v) = bridge.call("export", &[obj], request.kwargs())?;
    let cap = Held::new(bridge, h);
    if let Some(e) = PyError::of(&v) {
        return Ok(Err(e));
    }
    let (is_capsule, name, ptr) = capsule_of(&v);
    let at = format!("__dlpack__({})", request.name());
    let versioned = match name.as_deref() {
        Some("dltensor") if is_capsule => false,
        Some("dltensor_versioned") if is_capsule => true,
        _ => {
            obs.fail(
                crate::rule!("dlpack.capsule.name"),
                &at,
                if is_capsule {
                    format!(
                        "the capsule is named {name:?}, not \"dltensor\" or \"dltensor_versioned\""
                    )
                } else {
                    format!(
                        "__dlpack__ returned a {}, not a capsule",
                        v["capsule"]["type"]
                    )
                },
            );
            return Err("__dlpack__ did not return a DLPack capsule".into());
        }
    };
    obs.check(crate::rule!("dlpack.capsule.name"));
    let (o, findings) = reader::read(ptr, versioned);
    obs.findings(&at, findings);
    let Some(o) = o else {
        return Err("the capsule's tensor could not be read".into());
    };
    if o.version.is_none_or(|v| v.major == 1) {
        obs.check(crate::rule!("dlpack.dtype.code"));
        if versioned {
            obs.check(crate::rule!("dlpack.flags.known"));
        }
        if o.ndim > 0 && o.version.is_some_and(|v| v.minor >= 2) {
            obs.check(crate::rule!("dlpack.strides.not-null"));
        } else {
            obs.skip(
                crate::rule!("dlpack.strides.not-null"),
                "no tensor of DLPack 1.2 or later with ndim > 0 (older versions may have NULL strides)",
            );
        }
    }
    Ok(Ok((cap, versioned, o)))
}

pub(super) fn producer_steps(
    bridge: &Bridge,
    dtype: DType,
    shape: &[i64],
    view: View,
    request: Request,
    consume: bool,
    obs: &mut Obs,
) -> Result<Ended, String> {
    // The harness's data, loaded into the library (which must copy it).
    let mut l = match load_view(bridge, dtype, shape, view, "the library")? {
        Ok(l) => l,
        Err(ended) => return Ok(ended),
    };
    exported_steps(bridge, &mut l, dtype, request, consume, obs)
}

/// The producer rules on the library's object `l` (an array it made of
/// `dtype` data): `__dlpack__` with `request`'s keywords, the capsule read,
/// then taken (`consume`) or dropped untaken.
pub(in crate::dlpack) fn exported_steps(
    bridge: &Bridge,
    l: &mut Loaded<'_>,
    dtype: DType,
    request: Request,
    consume: bool,
    obs: &mut Obs,
) -> Result<Ended, String> {
    let expected = l.expected.clone();
    let obj = l.obj();
    let device = library_device(bridge, obj, obs)?;
    // A first export, held while the case's own export is made (freed, its
    // buffer's address could be given to the second): copy=True and the
    // cross-device copy=False compare with a copy=None export's data (when
    // that is not itself a copy); copy=False with a first copy=False
    // export's (two exports of one array that copy neither share it).
    let mut first = match first_export(bridge, obj, request, obs)? {
        Ok(first) => first,
        Err(ended) => return Ok(ended),
    };
    // A copy=None export that copied proves nothing about aliasing.
    let reference = first
        .as_ref()
        .filter(|(_, _, f)| request == Request::NoCopy || f.flags & FLAG_IS_COPIED == 0)
        .map(|(_, _, f)| f.first_byte());
    let at = format!("__dlpack__({})", request.name());
    let (mut cap, versioned, o) = match export(bridge, obj, request, obs)? {
        Ok(x) => x,
        Err(e) => return export_refused(bridge, obj, request, e, &at, obs),
    };
    // The first capsule, read and kept until now: taken and deleted, as a
    // consumer does with what it asked for (dropped untaken, it would judge
    // the destructor again, in a case about copies).
    if let Some((c, v, _)) = first.take() {
        take_and_delete(bridge, c, v)?;
    }
    if let Some(v) = o.version.filter(|v| v.major != 1) {
        return Ok(Ended::Limitation(format!(
            "a version {}.{} tensor (the harness reads major version 1 only)",
            v.major, v.minor
        )));
    }
    judge_request(request, versioned, &o, reference, &expected, &at, obs);
    if !matches!(request, Request::Cuda | Request::CudaNoCopy) {
        judge_device(device, &o, &at, obs);
    }
    // The values.
    if expected.is_empty() {
        obs.check(crate::rule!("dlpack.data.zero-size-null"));
    }
    let on_device = device_backend(&o);
    let values = values_of(&o, on_device.as_deref());
    judge_values(values.as_ref(), &o, dtype, &expected, &at, obs);
    // Lifetime: taken (renamed, the harness deletes it) or left untaken
    // (its destructor deletes it).
    let ptr = capsule_pointer(bridge, cap.id())?;
    let Some(watch) = trampoline::watch(ptr, versioned) else {
        obs.skip(
            crate::rule!("dlpack.capsule.destructor"),
            "the tensor's deleter is NULL",
        );
        return Ok(Ended::Ran);
    };
    if consume {
        let taken = Taken {
            ptr,
            versioned,
            o: &o,
            values: values.as_ref(),
            on_device: on_device.as_deref(),
            expected: &expected,
        };
        taken_lifetime(bridge, l, &mut cap, &watch, &taken, &at, obs)?;
    } else {
        untaken_lifetime(bridge, l, obj, &mut cap, &watch, &at, obs)?;
    }
    Ok(Ended::Ran)
}

/// `__dlpack_device__` of the library's object, to compare with the
/// capsule's device; `None` (and `dlpack.device.agrees` not exercised)
/// when it failed or is missing.
fn library_device(bridge: &Bridge, obj: u64, obs: &mut Obs) -> Result<Option<(i64, i64)>, String> {
    let (_, dev) = bridge.call("device", &[obj], "")?;
    let device = dev["device"].as_array().map(|d| {
        (
            d.first().and_then(|x| x.as_i64()).unwrap_or(-1),
            d.get(1).and_then(|x| x.as_i64()).unwrap_or(-1),
        )
    });
    if device.is_none() {
        obs.skip(
            crate::rule!("dlpack.device.agrees"),
            "__dlpack_device__ failed or is missing",
        );
    }
    Ok(device)
}

/// What [`first_export`] gives: the first export, if `request` compares
/// with one, or how the case ended when it could not be made.
type First<'a> = Result<Option<(Held<'a>, bool, Observed)>, Ended>;

/// The first export `request`'s case compares with (see
/// [`exported_steps`]): copy=False's own first copy=False export,
/// copy=True's and the cross-device copy=False's copy=None export.
fn first_export<'a>(
    bridge: &'a Bridge,
    obj: u64,
    request: Request,
    obs: &mut Obs,
) -> Result<First<'a>, String> {
    if request == Request::NoCopy {
        match export(bridge, obj, Request::NoCopy, obs)? {
            Ok(f) => return Ok(Ok(Some(f))),
            Err(e) if e.is_buffer_error() => {
                obs.check(crate::rule!("dlpack.copy.false-no-copy"));
                return Ok(Err(Ended::Limitation(format!(
                    "__dlpack__(copy=False) declined: {e}"
                ))));
            }
            Err(e) if e.is_type_error() => {
                obs.skip(
                    crate::rule!("dlpack.copy.false-no-copy"),
                    format!("__dlpack__ does not take copy ({e})"),
                );
                return Ok(Err(Ended::Limitation(format!(
                    "__dlpack__ does not take copy ({e})"
                ))));
            }
            Err(e) => {
                obs.fail(
                    crate::rule!("dlpack.copy.false-no-copy"),
                    "__dlpack__(no-copy)",
                    format!("copy=False raised {e}, not BufferError"),
                );
                return Ok(Err(Ended::Ran));
            }
        }
    }
    if matches!(request, Request::Copy | Request::CudaNoCopy) {
        match export(bridge, obj, Request::V1, obs)? {
            Ok(f) => return Ok(Ok(Some(f))),
            Err(e) => {
                return Ok(Err(Ended::Limitation(format!(
                    "__dlpack__(max_version=(1, 3)) raised {e}"
                ))))
            }
        }
    }
    Ok(Ok(None))
}

/// How the case ends when `__dlpack__` with `request`'s keywords raised
/// `e`: right for a cross-device request that BufferError answers, a
/// limitation of the producer, or a failure of the rule the request tests.
fn export_refused(
    bridge: &Bridge,
    obj: u64,
    request: Request,
    e: PyError,
    at: &str,
    obs: &mut Obs,
) -> Result<Ended, String> {
    Ok(match request {
        Request::Cuda | Request::CudaNoCopy if e.is_buffer_error() => {
            obs.check(crate::rule!("dlpack.device.unsupported-raises"));
            if request == Request::CudaNoCopy {
                // Right under both rules: whether it refused the
                // device or the copy, BufferError is the answer.
                obs.check(crate::rule!("dlpack.copy.false-no-copy"));
            }
            Ended::Ran
        }
        // A producer from before the 2023.12 keywords.
        Request::Cuda | Request::CudaNoCopy if e.is_type_error() => {
            obs.skip(
                crate::rule!("dlpack.device.unsupported-raises"),
                format!("__dlpack__ does not take dl_device ({e})"),
            );
            Ended::Limitation(format!("__dlpack__ does not take dl_device ({e})"))
        }
        // Charged to the device rule alone: a producer that cannot
        // handle CUDA at all never got as far as the copy.
        Request::Cuda | Request::CudaNoCopy => {
            obs.fail(
                crate::rule!("dlpack.device.unsupported-raises"),
                at,
                format!("dl_device=(kDLCUDA, 0) of a CPU array raised {e}, not BufferError"),
            );
            Ended::Ran
        }
        Request::Copy => {
            obs.skip(
                crate::rule!("dlpack.copy.flag"),
                format!("copy=True raised {e}"),
            );
            Ended::Limitation(format!("__dlpack__(copy=True) raised {e}"))
        }
        _ if e.is_buffer_error() => {
            obs.check(crate::rule!("dlpack.errors.buffer-error"));
            Ended::Limitation(format!("__dlpack__ declined: {e}"))
        }
        _ => {
            // A TypeError may only say that the keywords are unknown
            // (a producer from before max_version): ask without.
            let again = if e.is_type_error() && request != Request::Legacy {
                Some(export(bridge, obj, Request::Legacy, &mut Obs::default())?)
            } else {
                None
            };
            match again {
                Some(Ok(_)) => {
                    Ended::Limitation(format!("__dlpack__ does not take max_version ({e})"))
                }
                Some(Err(e2)) if e2.is_buffer_error() => {
                    obs.check(crate::rule!("dlpack.errors.buffer-error"));
                    Ended::Limitation(format!("__dlpack__ declined: {e2}"))
                }
                _ => {
                    obs.fail(
                        crate::rule!("dlpack.errors.buffer-error"),
                        at,
                        format!("__dlpack__ refused the array with {e}, not BufferError"),
                    );
                    Ended::Limitation(format!("__dlpack__ raised {e}"))
                }
            }
        }
    })
}

/// The rules `request`'s keywords test, on the tensor `o` it exported:
/// a cross-device request's device, copy=True's flag and data, copy=False's
/// (`reference` is the first export's data, `expected` the array's values).
fn judge_request(
    request: Request,
    versioned: bool,
    o: &Observed,
    reference: Option<usize>,
    expected: &Logical,
    at: &str,
    obs: &mut Obs,
) {
    match request {
        Request::Cuda | Request::CudaNoCopy => {
            if o.device.device_type == KDL_CUDA {
                obs.check(crate::rule!("dlpack.device.unsupported-raises"));
                // copy=False: a CUDA tensor of a CPU array is a copy unless
                // it is the array's own memory (a device that addresses
                // host memory).
                if let (Request::CudaNoCopy, Some(host)) = (request, reference) {
                    if o.first_byte() == host && o.flags & FLAG_IS_COPIED == 0 {
                        obs.check(crate::rule!("dlpack.copy.false-no-copy"));
                    } else {
                        obs.fail(
                            crate::rule!("dlpack.copy.false-no-copy"),
                            at,
                            format!(
                                "copy=False with dl_device=(kDLCUDA, 0) returned a CUDA tensor at {:#x} (flags {:#x}); the CPU array's data is at {host:#x}: a copy",
                                o.first_byte(),
                                o.flags
                            ),
                        );
                    }
                }
            } else {
                obs.fail(
                    crate::rule!("dlpack.device.unsupported-raises"),
                    at,
                    format!(
                        "dl_device=(kDLCUDA, 0) returned a tensor on device ({}, {}) instead of raising BufferError",
                        o.device.device_type, o.device.device_id
                    ),
                );
            }
        }
        Request::Copy if versioned => {
            if o.flags & FLAG_IS_COPIED != 0 {
                obs.check(crate::rule!("dlpack.copy.flag"));
            } else {
                obs.fail(
                    crate::rule!("dlpack.copy.flag"),
                    at,
                    format!("flags {:#x}: IS_COPIED not set", o.flags),
                );
            }
            if !expected.is_empty() && reference.is_some() {
                if Some(o.first_byte()) == reference {
                    obs.fail(
                        crate::rule!("dlpack.copy.true-copies"),
                        at,
                        format!(
                            "the data at {:#x} is the copy=None export's",
                            o.first_byte()
                        ),
                    );
                } else {
                    obs.check(crate::rule!("dlpack.copy.true-copies"));
                }
            }
        }
        Request::Copy => obs.skip(
            crate::rule!("dlpack.copy.flag"),
            "copy=True returned a legacy capsule",
        ),
        Request::NoCopy => {
            if versioned && o.flags & FLAG_IS_COPIED != 0 {
                obs.fail(
                    crate::rule!("dlpack.copy.false-no-copy"),
                    at,
                    format!(
                        "flags {:#x}: copy=False exported a tensor flagged IS_COPIED",
                        o.flags
                    ),
                );
            } else if let (Some(first), false) = (reference, expected.is_empty()) {
                if first != o.first_byte() {
                    obs.fail(
                        crate::rule!("dlpack.copy.false-no-copy"),
                        at,
                        format!(
                            "two copy=False exports of the array point at different data ({first:#x}, then {:#x}, the first still held): at least one is a copy",
                            o.first_byte()
                        ),
                    );
                } else {
                    obs.check(crate::rule!("dlpack.copy.false-no-copy"));
                }
            } else {
                obs.skip(
                    crate::rule!("dlpack.copy.false-no-copy"),
                    "the array has no elements (no data to compare)",
                );
            }
        }
        _ => {}
    }
}

/// `dlpack.device.agrees`: the tensor's device is `__dlpack_device__`'s.
fn judge_device(device: Option<(i64, i64)>, o: &Observed, at: &str, obs: &mut Obs) {
    if let Some((t, i)) = device {
        if (o.device.device_type as i64, o.device.device_id as i64) == (t, i) {
            obs.check(crate::rule!("dlpack.device.agrees"));
        } else {
            obs.fail(
                crate::rule!("dlpack.device.agrees"),
                at,
                format!(
                    "__dlpack_device__() is ({t}, {i}) but the tensor is on ({}, {})",
                    o.device.device_type, o.device.device_id
                ),
            );
        }
    }
}

/// `dlpack.tensor.describes`: the values read through the tensor are the
/// array's (`values` is `None` where the tensor could not be read).
fn judge_values(
    values: Option<&Logical>,
    o: &Observed,
    dtype: DType,
    expected: &Logical,
    at: &str,
    obs: &mut Obs,
) {
    match values {
        Some(got) => compare(
            obs,
            crate::rule!("dlpack.tensor.describes"),
            at,
            expected,
            got,
        ),
        None if o.device.device_type == KDL_CPU && obs.violations.is_empty() => {
            obs.fail(
                crate::rule!("dlpack.tensor.describes"),
                at,
                format!("dtype {:?} is not {}", o.dtype, dtype.name()),
            );
        }
        None => {}
    }
}

/// What the taken capsule's lifetime is judged on: its tensor (`ptr`,
/// read as `o`), the values read before, and the array's.
struct Taken<'a> {
    ptr: usize,
    versioned: bool,
    o: &'a Observed,
    values: Option<&'a Logical>,
    on_device: Option<&'a dyn crate::device::Device>,
    expected: &'a Logical,
}

/// The capsule taken (renamed, as a consumer does): dropping it and the
/// library's array must not call the deleter, and the data must stay
/// until the harness deletes the tensor, which it then does.
fn taken_lifetime(
    bridge: &Bridge,
    l: &mut Loaded<'_>,
    cap: &mut Held<'_>,
    watch: &trampoline::Watch,
    t: &Taken<'_>,
    at: &str,
    obs: &mut Obs,
) -> Result<(), String> {
    let (o, expected) = (t.o, t.expected);
    let (_, taken) = bridge.call("take", &[cap.id()], "")?;
    if taken["name"].is_null() {
        return Err("the capsule could not be renamed".into());
    }
    cap.release();
    l.array.release();
    l.loaded.release();
    bridge.call("gc", &[], "")?;
    if watch.calls() == 0 {
        obs.check(crate::rule!("dlpack.capsule.used-untouched"));
    } else {
        obs.fail(
            crate::rule!("dlpack.capsule.used-untouched"),
            at,
            format!(
                "the deleter ran {} time(s) when the renamed capsule and the array were dropped",
                watch.calls()
            ),
        );
        return Ok(()); // the tensor is gone: nothing more to read
    }
    // Only a tensor that described the array is read again: the
    // memory a wrong one points into is not the producer's to keep.
    let described = !obs
        .violations
        .iter()
        .any(|v| v.0 == crate::rule!("dlpack.tensor.describes"));
    if !described {
        obs.skip(
            crate::rule!("dlpack.lifetime.until-deleter"),
            "the tensor did not describe the array",
        );
    }
    if let (Some(before), Some(shape), true) =
        (t.values, &o.shape, !expected.is_empty() && described)
    {
        let strides = o
            .strides
            .clone()
            .unwrap_or_else(|| super::super::row_major_strides(shape));
        let after = match t.on_device {
            Some(dev) => reader::values_on(o, dev).map(|l| l.values),
            None => reader::gather(o.first_byte(), before.dtype, shape, &strides),
        };
        match after {
            Ok(v) if v == before.values => obs.check(crate::rule!("dlpack.lifetime.until-deleter")),
            Ok(_) => obs.fail(
                crate::rule!("dlpack.lifetime.until-deleter"),
                at,
                "the tensor's data changed once the library's array and the capsule were dropped, before the deleter ran",
            ),
            Err(e) => obs.fail(
                crate::rule!("dlpack.lifetime.until-deleter"),
                at,
                format!("once the library's array and the capsule were dropped, before the deleter ran: {e}"),
            ),
        }
    }
    // SAFETY: the harness took the tensor (renamed its capsule) and
    // deletes it once, as a consumer does.
    unsafe { trampoline::delete(t.ptr, t.versioned) };
    Ok(())
}

/// The capsule dropped untaken: its destructor must call the tensor's
/// deleter exactly once.
fn untaken_lifetime(
    bridge: &Bridge,
    l: &mut Loaded<'_>,
    obj: u64,
    cap: &mut Held<'_>,
    watch: &trampoline::Watch,
    at: &str,
    obs: &mut Obs,
) -> Result<(), String> {
    // The library's array, weakly: a destructor may delete the tensor
    // by calling the deleter function itself rather than through the
    // member the trampoline sits in; the tensor's manager_ctx holding
    // the array, the array dies exactly when the tensor is deleted.
    let (w, _) = bridge.call("weakref", &[obj], "")?;
    let weak = Held::new(bridge, w);
    cap.release();
    bridge.call("gc", &[], "")?;
    let calls = watch.calls();
    let array_alive = |bridge: &Bridge| -> Result<Option<bool>, String> {
        if weak.handle.is_none() {
            return Ok(None);
        }
        let (_, v) = bridge.call("alive", &[weak.id()], "")?;
        Ok(v["alive"].as_bool())
    };
    match calls {
        1 => obs.check(crate::rule!("dlpack.capsule.destructor")),
        0 => {
            // Drop the library's own references too: if the array then
            // lives on, only the undeleted tensor can hold it.
            l.array.release();
            l.loaded.release();
            bridge.call("gc", &[], "")?;
            match array_alive(bridge)? {
                Some(true) => obs.fail(
                    crate::rule!("dlpack.capsule.destructor"),
                    at,
                    "dropping the untaken capsule did not delete the tensor: its deleter was not called through the member, and the array it holds is still alive once every other reference is gone",
                ),
                Some(false) => obs.check(crate::rule!("dlpack.capsule.destructor")),
                None => obs.skip(
                    crate::rule!("dlpack.capsule.destructor"),
                    "the destructor did not call the deleter member, and the array takes no weak reference to see whether the tensor was deleted otherwise",
                ),
            }
        }
        n => obs.fail(
            crate::rule!("dlpack.capsule.destructor"),
            at,
            format!("dropping the untaken capsule called the tensor's deleter {n} times, not once"),
        ),
    }
    Ok(())
}

/// How long a deleter called on a native thread may take before the case
/// calls it a deadlock (a deleter frees memory and drops references: far
/// below a second even under the debug allocator).
pub const DELETER_THREAD_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// The deleter-thread case: the library's array exported with `request`,
/// the capsule taken, every Python reference dropped, then the tensor's
/// deleter called from a thread of the harness's that has never run Python
/// and holds no GIL, as a consumer's other threads may call it ("The
/// DLManagedTensor deleter must ensure that sharing beyond Python
/// boundaries is possible, this means that the GIL must be acquired
/// explicitly if it uses Python objects or API"). It must return (a
/// crash of the worker here is charged to the rule by run.rs) and free the
/// array it held.
pub(super) fn deleter_thread_steps(
    bridge: &Bridge,
    dtype: DType,
    shape: &[i64],
    request: Request,
    obs: &mut Obs,
) -> Result<Ended, String> {
    let rule = crate::rule!("dlpack.deleter.without-gil");
    let mut l = match load_view(bridge, dtype, shape, View::Whole, "the library")? {
        Ok(l) => l,
        Err(ended) => return Ok(ended),
    };
    let obj = l.obj();
    let at = format!(
        "the deleter of __dlpack__({}), on a native thread",
        request.name()
    );
    let (mut cap, versioned, _) = match export(bridge, obj, request, obs)? {
        Ok(x) => x,
        Err(e) => return Ok(Ended::Limitation(format!("__dlpack__ declined: {e}"))),
    };
    let ptr = capsule_pointer(bridge, cap.id())?;
    // Counted, so that a destructor that deletes a renamed capsule's
    // tensor (dlpack.capsule.used-untouched's failure) is not followed by a
    // second call here.
    let Some(watch) = trampoline::watch(ptr, versioned) else {
        obs.skip(rule, "the tensor's deleter is NULL");
        return Ok(Ended::Ran);
    };
    let (w, _) = bridge.call("weakref", &[obj], "")?;
    let weak = Held::new(bridge, w);
    let (_, t) = bridge.call("take", &[cap.id()], "")?;
    if t["name"].is_null() {
        return Err("the capsule could not be renamed".into());
    }
    cap.release();
    l.array.release();
    l.loaded.release();
    bridge.call("gc", &[], "")?;
    if watch.calls() > 0 {
        obs.skip(
            rule,
            "the deleter already ran when the renamed capsule was dropped (dlpack.capsule.used-untouched)",
        );
        return Ok(Ended::Ran);
    }
    // The bridge holds the GIL only inside its calls: between them no
    // thread of this process does, and this one has never run Python.
    crate::abi::breadcrumb::step(DELETER_THREAD_STEP);
    let (tx, rx) = std::sync::mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("dlpack-deleter".into())
        .spawn(move || {
            // SAFETY: the harness took the tensor (renamed its capsule,
            // dropped it) and deletes it this once, on this thread.
            unsafe { trampoline::delete(ptr, versioned) };
            let _ = tx.send(());
        });
    if let Err(e) = spawned {
        return Err(format!("cannot start a thread: {e}"));
    }
    if rx.recv_timeout(DELETER_THREAD_WAIT).is_err() {
        obs.fail(
            rule,
            &at,
            format!(
                "the deleter, called on a native thread that does not hold the GIL, had not returned after {} s (a deadlock)",
                DELETER_THREAD_WAIT.as_secs()
            ),
        );
        // The thread may hold the GIL forever: nothing more is asked of
        // Python in this process (the worker ends after this case).
        crate::abi::breadcrumb::taint("a deleter called on a native thread never returned");
        PYTHON_STUCK.store(true, std::sync::atomic::Ordering::SeqCst);
        std::mem::forget(weak);
        std::mem::forget(l);
        return Ok(Ended::Ran);
    }
    crate::abi::breadcrumb::step("dlpack deleter thread: returned");
    obs.check(rule);
    bridge.call("gc", &[], "")?;
    if weak.handle.is_none() {
        obs.skip(
            crate::rule!("dlpack.deleter.frees"),
            "the library's array takes no weak reference",
        );
        return Ok(Ended::Ran);
    }
    let (_, v) = bridge.call("alive", &[weak.id()], "")?;
    if v["alive"].as_bool() == Some(true) {
        obs.fail(
            crate::rule!("dlpack.deleter.frees"),
            &at,
            "the library's array is still alive after its tensor's deleter returned, every other reference dropped and garbage collected",
        );
    } else {
        obs.check(crate::rule!("dlpack.deleter.frees"));
    }
    Ok(Ended::Ran)
}

/// Set when a thread of the library's may hold the GIL for ever (a deleter
/// that never returned): the case asks Python for nothing more.
pub(super) static PYTHON_STUCK: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// The breadcrumb of the deleter call on a native thread: a crash with it
/// last is that deleter's ([`super::super::run`] charges it to the rule).
pub const DELETER_THREAD_STEP: &str = "dlpack deleter thread: calling the deleter";

/// The frees case: the export sequence, repeated under the allocation
/// tracker's count (the Arrow `*.release.frees` accounting, no verdict
/// without growth in every measured repetition of two rounds).
pub(super) fn frees_steps(
    bridge: &Bridge,
    dtype: DType,
    shape: &[i64],
    obs: &mut Obs,
) -> Result<Ended, String> {
    use crate::certify::leaks;
    let rule = crate::rule!("dlpack.deleter.frees");
    if !crate::plugin::tracker::present() {
        obs.skip(rule, leaks::NO_COUNTER);
        return Ok(Ended::Skipped(leaks::NO_COUNTER.into()));
    }
    let counters = [leaks::Counter::new(
        leaks::TRACKER,
        crate::plugin::tracker::live_bytes,
    )];
    // One export, taken and deleted, every object dropped. `Err` stops the
    // measurement: an export that fails is the other rules' to judge.
    let once = || -> Result<(), String> {
        let l = match load_view(bridge, dtype, shape, View::Whole, "the library")? {
            Ok(l) => l,
            Err(_) => return Err("the library cannot hold the array".into()),
        };
        let mut l = l;
        let (cap, versioned, _) = export(bridge, l.obj(), Request::V1, &mut Obs::default())?
            .map_err(|e| format!("__dlpack__ raised {e}"))?;
        l.array.release();
        l.loaded.release();
        bridge.call("gc", &[], "")?;
        // The harness's own tensor, which the library copied from: one it
        // never deleted is kept (leaked) by the harness, which would count
        // as growth here; that is the consumer rules' finding, not this one.
        if l.source.as_ref().is_some_and(|t| t.deleted() == (0, 0)) {
            drop(l);
            return Err("the library never deleted the harness's tensor it loaded".into());
        }
        drop(l);
        take_and_delete(bridge, cap, versioned)?;
        bridge.call("gc", &[], "")?;
        Ok(())
    };
    match leaks::measure(&counters, once) {
        Ok(m) if m.leaks() => obs.fail(
            rule,
            "__dlpack__(v1)",
            m.evidence("load, export, take, drop and delete"),
        ),
        Ok(_) => obs.check(rule),
        Err(e) => {
            obs.skip(rule, format!("the sequence did not run: {e}"));
            return Ok(Ended::Limitation(e));
        }
    }
    Ok(Ended::Ran)
}

/// Takes the capsule `cap` (renames it used_...) and deletes its tensor,
/// as a consumer done with it does.
pub(super) fn take_and_delete(
    bridge: &Bridge,
    mut cap: Held<'_>,
    versioned: bool,
) -> Result<(), String> {
    let ptr = capsule_pointer(bridge, cap.id())?;
    let (_, t) = bridge.call("take", &[cap.id()], "")?;
    if t["name"].is_null() || ptr == 0 {
        return Err("the capsule could not be taken".into());
    }
    cap.release();
    // SAFETY: the harness renamed the capsule (it owns the tensor now, and
    // the capsule's destructor leaves it alone) and deletes it this once.
    unsafe { trampoline::delete(ptr, versioned) };
    Ok(())
}

pub(super) fn capsule_pointer(bridge: &Bridge, cap: u64) -> Result<usize, String> {
    let (_, v) = bridge.call("info", &[cap], "")?;
    Ok(capsule_of(&v).2)
}

//! The device rules on a device array whose buffers are not host memory:
//! `device.event.type`, `device.event.covers-data`,
//! `device.buffers.memory-kind`, `device.buffers.in-allocation` and
//! `device.struct.host`.
//!
//! Written against [`crate::device::Device`] only: the same code judges the
//! emulated device and CUDA. The harness plays a careful consumer: it
//! checks the `sync_event` pointer, waits on the event ("If this is non-null
//! then it MUST be used to call the appropriate sync method for the device
//! ... before attempting to access the memory in the buffers"), then copies
//! every buffer to the host, checking each one's memory kind and allocation
//! before it is touched. Then it lets the whole device finish and copies
//! again: data that changed in between was written by work the event did
//! not cover (or, with no event, work that had not finished when the
//! producer handed the array over).

#![forbid(unsafe_code)]

use crate::abi::{ArrowArray, ArrowDeviceArray, ArrowSchema};
use crate::device::mirror::{self, BufferRef, Rebuilt};
use crate::device::{Device, Kind, MemoryKind};

use super::Observations;

/// The breadcrumb while the harness hands the driver the event a device
/// array's sync_event points to, and waits on it: the worker dying there
/// is charged to `device.event.type` ([`super::crash::charge`]). On a real
/// GPU a CUevent passed by value points to readable driver memory, so no
/// check before the call can tell it from a pointer to an event (seen on
/// an H100: the `event-by-value` mutant's cases died in the wait).
pub const SYNC_EVENT_STEP: &str = "the harness waiting on the device array's sync_event";

/// The breadcrumb once the wait is over and the harness reads the array.
pub const READ_STEP: &str = "the harness reading the device array";

/// What [`examine`] leaves: a host copy of the array to validate and read,
/// or why there is none.
pub enum Examined {
    Copied(Rebuilt),
    /// The array could not be copied; the reason is recorded as a
    /// violation when a rule covers it, and given here.
    Unreadable(String),
}

/// Checks the device array `a` (the `kind` the run asked for, with
/// `device_id`) and copies it to the host. `at` names it in evidence.
pub fn examine(
    dev: &dyn Device,
    kind: Kind,
    device_id: i64,
    schema: &ArrowSchema,
    a: &ArrowDeviceArray,
    at: &str,
    obs: &mut Observations,
) -> Examined {
    // device.event.type: a non-NULL sync_event points to a live event.
    // The driver is handed what it points to; a crash there is charged to
    // the rule (crash::charge), so the step is named first.
    let sync = a.sync_event as usize;
    if sync != 0 {
        crate::abi::breadcrumb::step(SYNC_EVENT_STEP);
    }
    let event = if sync == 0 {
        None
    } else {
        match dev.event_behind(sync) {
            Ok(e) => {
                obs.check(crate::rule!("device.event.type"), true, at, String::new);
                Some(e)
            }
            Err(why) => {
                obs.check(crate::rule!("device.event.type"), false, at, || why.clone());
                None
            }
        }
    };
    if let Some(e) = event {
        if let Err(why) = dev.event_wait(e) {
            return Examined::Unreadable(format!("waiting on sync_event failed: {why}"));
        }
    }
    if sync != 0 {
        crate::abi::breadcrumb::step(READ_STEP);
    }

    // First copy: right after the wait, each buffer checked before it is
    // read.
    let mut first: Vec<(BufferRef, Vec<u8>)> = Vec::new();
    let copied = {
        let mut read = |b: &BufferRef| -> Result<Vec<u8>, String> {
            let bytes = checked_read(dev, kind, device_id, b, obs)?;
            first.push((b.clone(), bytes.clone()));
            Ok(bytes)
        };
        mirror::rebuild(schema, &a.array, &mut read, &mut mirror::host_place, None)
    };
    // A structure in device memory is a SHOULD: recorded, and the case
    // goes on with the copy when the walk could read it anyway.
    if let Ok(r) = &copied {
        structures_on_host(dev, r, at, obs);
    }

    // Second copy, after everything on the device finished.
    let settled = dev.synchronize();
    let mut second: Vec<(BufferRef, Vec<u8>)> = Vec::new();
    let again = {
        let mut read = |b: &BufferRef| -> Result<Vec<u8>, String> {
            let bytes = dev.copy_to_host(b.addr, b.len)?;
            second.push((b.clone(), bytes.clone()));
            Ok(bytes)
        };
        mirror::rebuild(schema, &a.array, &mut read, &mut mirror::host_place, None)
    };
    let covered = match (&copied, &again, settled) {
        (_, _, Err(why)) => Err(format!("synchronizing the device failed: {why}")),
        (Ok(_), Ok(_), Ok(())) => Ok(first_difference(&first, &second)),
        (Err(stopped), Ok(_), Ok(())) if stopped.buffer.is_none() => {
            Ok(Some(format!("read right after waiting, the array could not be walked ({stopped}); once the device finished it could")))
        }
        _ => Ok(None),
    };
    match covered {
        Ok(difference) => {
            let waited = if event.is_some() {
                "after waiting on sync_event"
            } else if sync == 0 {
                "with sync_event NULL (the data must be ready)"
            } else {
                "with an unusable sync_event"
            };
            obs.check(crate::rule!("device.event.covers-data"), difference.is_none(), at, || {
                format!(
                    "{waited}, {}: the data was still being written by device work the event does not cover",
                    difference.unwrap_or_default()
                )
            });
        }
        Err(why) => return Examined::Unreadable(why),
    }
    match (copied, again) {
        (_, Ok(r)) => Examined::Copied(r),
        (Err(stopped), Err(_)) => Examined::Unreadable(format!("cannot copy the array to the host: {stopped}")),
        (Ok(_), Err(stopped)) => Examined::Unreadable(format!(
            "the array could be copied right after waiting but not once the device finished: {stopped}"
        )),
    }
}

/// Reads buffer `b` after checking that it is memory of the declared kind
/// and that its extent lies inside one allocation.
fn checked_read(
    dev: &dyn Device,
    kind: Kind,
    device_id: i64,
    b: &BufferRef,
    obs: &mut Observations,
) -> Result<Vec<u8>, String> {
    let memory = dev.memory_kind(b.addr);
    let shown = || match &memory {
        Ok(m) => m.to_string(),
        Err(why) => why.clone(),
    };
    // MUST: memory the declared device can access at all.
    let accessible = matches!(&memory, Ok(m) if m.accessible(kind, device_id));
    obs.check(
        crate::rule!("device.buffers.accessible"),
        accessible,
        &b.at,
        || {
            format!(
                "the buffer at {:#x} is {}, which a {} device cannot access",
                b.addr,
                shown(),
                kind
            )
        },
    );
    if !accessible {
        return Err("not memory the declared device can access".into());
    }
    // SHOULD: "The buffer values should be device pointers": exactly the
    // declared kind (managed or pinned memory in a CUDA array is
    // accessible, not a failure of the MUST above).
    let fits = matches!(&memory, Ok(m) if m.fits(kind, device_id));
    obs.check(
        crate::rule!("device.buffers.memory-kind"),
        fits,
        &b.at,
        || {
            format!(
                "the buffer at {:#x} is {}; an array on {} should hold {}",
                b.addr,
                shown(),
                kind,
                MemoryKind::wanted(kind, device_id)
            )
        },
    );
    // The host has no allocation table (and CPU buffers never get here);
    // the device's table knows only its own kind of allocation.
    if kind != Kind::Cpu && fits {
        let inside = match dev.allocation_of(b.addr) {
            Some((base, len)) => b.addr.checked_add(b.len).is_some_and(|e| e <= base + len),
            None => false,
        };
        obs.check(crate::rule!("device.buffers.in-allocation"), inside, &b.at, || {
            match dev.allocation_of(b.addr) {
                Some((base, len)) => format!(
                    "the array implies {} bytes at {:#x}, but the allocation holding it ({base:#x}, {len} bytes) ends {} bytes earlier",
                    b.len,
                    b.addr,
                    b.addr + b.len - (base + len)
                ),
                None => format!("{:#x} is in no allocation of the device", b.addr),
            }
        });
        if !inside {
            return Err("the buffer's extent is outside its allocation".into());
        }
    }
    dev.copy_to_host(b.addr, b.len)
}

/// device.struct.host: every structure the walk followed is host memory.
fn structures_on_host(dev: &dyn Device, r: &Rebuilt, at: &str, obs: &mut Observations) {
    let wrong: Vec<String> = r
        .structures
        .iter()
        .filter_map(|s| match dev.memory_kind(s.addr) {
            Ok(m) if m.is_host() => None,
            Ok(m) => Some(format!("{} ({:#x}) is {m}", s.at, s.addr)),
            Err(why) => Some(format!("{}: {why}", s.at)),
        })
        .collect();
    obs.check(
        crate::rule!("device.struct.host"),
        wrong.is_empty(),
        at,
        || {
            format!(
                "only the data buffers may be device memory; {}",
                wrong.iter().take(5).cloned().collect::<Vec<_>>().join("; ")
            )
        },
    );
}

/// The first buffer whose bytes differ between two copies, described.
fn first_difference(
    first: &[(BufferRef, Vec<u8>)],
    second: &[(BufferRef, Vec<u8>)],
) -> Option<String> {
    for ((b1, x), (b2, y)) in first.iter().zip(second) {
        if b1 != b2 {
            return Some(format!(
                "{} was {} bytes when read first and {} bytes ({}) later",
                b1.at, b1.len, b2.len, b2.at
            ));
        }
        if let Some(i) = x.iter().zip(y).position(|(p, q)| p != q) {
            return Some(format!(
                "{} read {:#04x} at byte {i} first and {:#04x} once the device had finished",
                b1.at, x[i], y[i]
            ));
        }
    }
    (first.len() != second.len()).then(|| {
        format!(
            "{} buffers were read first and {} once the device had finished",
            first.len(),
            second.len()
        )
    })
}

/// Moves the host copy's root out of `r`, leaving `r` released.
pub fn take_array(r: &mut Rebuilt) -> ArrowArray {
    crate::abi::ops::take(&mut r.array)
}

//! The faults the CUDA mutant plugins inject, one per rule they break.
//!
//! The mutant plugins read `ARROWCERT_MUTANT` once, at the first call; the
//! reference plugins never look at it.

use std::sync::OnceLock;

use arrowcert_sdk::{PluginError, PluginResult};

/// The environment variable that picks a mutant's fault.
pub const VAR: &str = "ARROWCERT_MUTANT";

/// A producer fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Producer {
    /// Correct by the spec.
    None,
    /// `sync_event` NULL while the late writes are pending
    /// (device.event.covers-data).
    NoEvent,
    /// The event is recorded before the writes (device.event.covers-data).
    EventBeforeWrite,
    /// `sync_event` is the CUevent itself, not a pointer to it
    /// (device.event.type).
    EventByValue,
    /// Data buffers in pageable host memory when CUDA memory was asked for
    /// (device.buffers.accessible: the device cannot read them).
    HostBuffers,
    /// Data buffers in managed memory when CUDA device memory was asked
    /// for (device.buffers.memory-kind: accessible, but not "device
    /// pointers").
    ManagedBuffers,
    /// Every buffer of two bytes or more is allocated one byte short of its
    /// extent (device.buffers.in-allocation).
    ShortAllocation,
    /// Release never frees the device buffers (array.release.frees).
    LeakDeviceMemory,
}

impl Producer {
    pub const ALL: [(&'static str, Producer); 8] = [
        ("none", Producer::None),
        ("no-event", Producer::NoEvent),
        ("event-before-write", Producer::EventBeforeWrite),
        ("event-by-value", Producer::EventByValue),
        ("host-buffers", Producer::HostBuffers),
        ("managed-buffers", Producer::ManagedBuffers),
        ("short-allocation", Producer::ShortAllocation),
        ("leak-device-memory", Producer::LeakDeviceMemory),
    ];
}

/// A consumer fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Consumer {
    /// Correct by the spec.
    None,
    /// Copies the buffers before waiting on `sync_event` (consumer.sync.waits).
    ReadBeforeWait,
}

impl Consumer {
    pub const ALL: [(&'static str, Consumer); 2] = [
        ("none", Consumer::None),
        ("read-before-wait", Consumer::ReadBeforeWait),
    ];
}

/// The reference producer: no fault.
pub fn reference_producer() -> PluginResult<Producer> {
    Ok(Producer::None)
}

/// The reference consumer: no fault.
pub fn reference_consumer() -> PluginResult<Consumer> {
    Ok(Consumer::None)
}

/// The value of `ARROWCERT_MUTANT` looked up in `table` (unset: `none`).
fn parse<T: Copy>(value: Option<&str>, table: &[(&str, T)]) -> Result<T, String> {
    let name = value.unwrap_or("none");
    table
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, m)| *m)
        .ok_or_else(|| {
            let known: Vec<&str> = table.iter().map(|(n, _)| *n).collect();
            format!(
                "{VAR}={name:?} is not a mutant of this plugin; known: {}",
                known.join(", ")
            )
        })
}

fn env_value() -> Option<String> {
    std::env::var(VAR).ok()
}

/// The producer fault `ARROWCERT_MUTANT` names, read once.
pub fn producer_from_env() -> PluginResult<Producer> {
    static CHOSEN: OnceLock<Result<Producer, String>> = OnceLock::new();
    CHOSEN
        .get_or_init(|| parse(env_value().as_deref(), &Producer::ALL))
        .clone()
        .map_err(PluginError::invalid)
}

/// The consumer fault `ARROWCERT_MUTANT` names, read once.
pub fn consumer_from_env() -> PluginResult<Consumer> {
    static CHOSEN: OnceLock<Result<Consumer, String>> = OnceLock::new();
    CHOSEN
        .get_or_init(|| parse(env_value().as_deref(), &Consumer::ALL))
        .clone()
        .map_err(PluginError::invalid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse() {
        assert_eq!(parse(None, &Producer::ALL), Ok(Producer::None));
        assert_eq!(
            parse(Some("no-event"), &Producer::ALL),
            Ok(Producer::NoEvent)
        );
        assert_eq!(
            parse(Some("leak-device-memory"), &Producer::ALL),
            Ok(Producer::LeakDeviceMemory)
        );
        assert_eq!(
            parse(Some("read-before-wait"), &Consumer::ALL),
            Ok(Consumer::ReadBeforeWait)
        );
        let e = parse(Some("bogus"), &Producer::ALL).unwrap_err();
        assert!(
            e.contains("ARROWCERT_MUTANT") && e.contains("event-by-value"),
            "{e}"
        );
        assert!(parse(Some("no-event"), &Consumer::ALL).is_err());
    }
}

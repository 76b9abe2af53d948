//! Running code that may panic on untrusted input (arrow-rs's importers
//! and IPC reader on what a plugin produced) with the panic caught and
//! turned into an error, and kept out of the panic hooks' reports.
//!
//! At the bottom of the module graph: the IPC decoder (`sdk`), the probe
//! (`inspect`), the fuzz oracles and the panic hooks (`run`, `main`) all
//! use it.

#![forbid(unsafe_code)]

thread_local! {
    static QUIET: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// True while [`quietly`] runs on this thread: a panic hook should not
/// report a panic then, because it is caught and turned into an error.
pub fn panics_expected() -> bool {
    QUIET.with(|q| q.get())
}

/// Runs `f`, turning a panic into `Err` with its message.
pub fn quietly<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    let before = QUIET.with(|q| q.replace(true));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    QUIET.with(|q| q.set(before));
    r.map_err(|e| {
        e.downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| e.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic".into())
    })
}

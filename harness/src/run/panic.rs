//! Harness faults are not library faults. A panic in arrowcert's own code
//! while it runs a case is caught here, per case, and reported as a
//! `harness_error` verdict with the panic's message and location ("please
//! report this"), never as the library crashing and never charged to a
//! rule.
//!
//! Two ways a panic can surface:
//! - it unwinds to the case boundary: [`guarded`] catches it and the case
//!   gets its harness-error verdict; the run goes on;
//! - it cannot unwind (a panic inside an `extern "C"` callback the plugin
//!   called aborts the process): the hook installed by [`install_hook`]
//!   has already told the orchestrator, so the worker's death is reported
//!   as a harness error too, not a crash.
//!
//! Tests plant a panic with the hook [`test_hook`] reads: in debug builds
//! only, `ARROWCERT_TEST_PANIC_IN_CASE=TEXT` panics inside every case whose
//! ID contains TEXT. Release builds ignore it.

#![forbid(unsafe_code)]

use std::panic::{self, AssertUnwindSafe};
use std::sync::{Mutex, Once};

use crate::report::{Case, Verdict};

/// The environment variable of the test-only panic hook.
pub const TEST_PANIC_ENV: &str = "ARROWCERT_TEST_PANIC_IN_CASE";

thread_local! {
    /// The last panic on this thread, as "panicked at FILE:LINE:COL:
    /// MESSAGE" (per thread: a panic unwinds on the thread that caught it,
    /// and another thread's panic must not be taken for it).
    static LAST: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

type Notify = Box<dyn Fn(&str) + Send + Sync>;

/// Called with the panic's description as soon as it happens (before an
/// abort can end the process): the worker sends it to the orchestrator.
static NOTIFY: Mutex<Option<Notify>> = Mutex::new(None);

static INSTALL: Once = Once::new();

/// Installs the panic hook (once per process): it records where and why
/// the panic happened, tells [`set_notify`]'s callback, then prints as
/// Rust's default hook does.
pub fn install_hook() {
    INSTALL.call_once(|| {
        let default = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            // A panic `quiet::quietly` catches and turns into an error
            // (arrow-rs refusing what it reads) is no harness fault.
            if crate::quiet::panics_expected() {
                default(info);
                return;
            }
            let message = info
                .payload()
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| info.payload().downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic with a non-text payload".into());
            let at = info
                .location()
                .map(|l| format!("{}:{}:{}", l.file(), l.line(), l.column()))
                .unwrap_or_else(|| "an unknown location".into());
            let text = format!("panicked at {at}: {message}");
            let _ = LAST.try_with(|last| {
                if let Ok(mut last) = last.try_borrow_mut() {
                    *last = Some(text.clone());
                }
            });
            if let Ok(notify) = NOTIFY.lock() {
                if let Some(f) = notify.as_ref() {
                    f(&text);
                }
            }
            default(info);
        }));
    });
}

/// Sets the callback the hook calls with each panic's description.
pub fn set_notify(f: impl Fn(&str) + Send + Sync + 'static) {
    if let Ok(mut n) = NOTIFY.lock() {
        *n = Some(Box::new(f));
    }
}

/// The message a harness error carries.
pub fn harness_error_message(panic: &str) -> String {
    format!(
        "arrowcert's own code failed ({panic}); this is a bug in arrowcert, not in the library under test: please report it with this case's replay command"
    )
}

/// Panics when the test-only hook names this case (debug builds only).
pub fn test_hook(case_id: &str) {
    if cfg!(debug_assertions) {
        if let Some(text) = std::env::var_os(TEST_PANIC_ENV) {
            let text = text.to_string_lossy();
            if !text.is_empty() && case_id.contains(text.as_ref()) {
                panic!("test hook {TEST_PANIC_ENV} planted a panic in case {case_id}");
            }
        }
    }
}

/// Runs one case, turning a panic of arrowcert's code into a harness-error
/// verdict on `record` (the case's entry before it ran).
pub fn guarded(case_id: &str, record: impl FnOnce() -> Case, run: impl FnOnce() -> Case) -> Case {
    install_hook();
    let _ = LAST.try_with(|l| l.borrow_mut().take());
    crate::abi::outslot::begin_case(case_id);
    let result = panic::catch_unwind(AssertUnwindSafe(|| {
        test_hook(case_id);
        run()
    }));
    // Late writes into the structures this case's calls filled
    // (abi::outslot): what is found now is this case's; damage to an
    // earlier case's is kept for whoever holds that case's result.
    let exercised = crate::abi::outslot::used();
    let damage = crate::abi::outslot::end_case();
    match result {
        Ok(mut case) => {
            if exercised && !case.checked.is_empty() {
                crate::run::late::mark_checked(&mut case);
            }
            crate::run::late::charge(&mut case, &damage);
            case
        }
        Err(payload) => {
            let text = LAST
                .try_with(|l| l.borrow_mut().take())
                .ok()
                .flatten()
                .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".into());
            let mut case = record();
            case.verdict = Verdict::HarnessError;
            case.message = Some(harness_error_message(&text));
            case
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> Case {
        Case {
            id: "x".into(),
            path: "array".into(),
            scenario: "s".into(),
            batch: None,
            slice: None,
            verdict: Verdict::Skip,
            message: Some("not run".into()),
            differences: Vec::new(),
            duration_us: 0,
            replay: "arrowcert certify --exact x".into(),
            output: None,
            changed: Vec::new(),
            checked: Vec::new(),
            violations: Vec::new(),
            not_exercised: Vec::new(),
            flaky: Vec::new(),
            view: None,
        }
    }

    #[test]
    fn a_panic_becomes_a_harness_error_with_its_location() {
        let case = guarded("x", record, || panic!("boom in the harness"));
        assert_eq!(case.verdict, Verdict::HarnessError);
        let m = case.message.unwrap();
        assert!(m.contains("boom in the harness"), "{m}");
        assert!(m.contains("panic.rs:"), "{m}");
        assert!(m.contains("please report"), "{m}");
        assert!(case.violations.is_empty(), "never charged to a rule");
    }

    #[test]
    fn no_panic_is_no_change() {
        let mut c = record();
        c.verdict = Verdict::Pass;
        let out = guarded("x", record, || c.clone());
        assert_eq!(out, c);
    }
}

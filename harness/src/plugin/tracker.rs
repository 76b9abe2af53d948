//! The allocation tracker (`harness/tracker/alloc_tracker.c`): a small
//! preload library that counts the bytes live in malloc'd blocks across all
//! threads and poisons every block it frees. `harness/build.rs` builds it;
//! its bytes are embedded here, so the arrowcert binary can be moved
//! anywhere and still preload it.
//!
//! The orchestrator writes the library to a private file ([`install`]) and
//! sets `LD_PRELOAD` for the worker processes it starts; a worker finds the
//! tracker's counter with `dlsym(RTLD_DEFAULT, ...)` ([`live_bytes`]). A
//! process without the preload (`--in-process`) has no tracker, and the
//! rules that need one say so instead of passing.

use std::ffi::CStr;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The tracker library, as built for this binary.
pub static LIBRARY: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libarrowcert_tracker.so"));

/// The file name [`install`] gives the library.
pub const FILE_NAME: &str = "libarrowcert_tracker.so";

/// `ARROWCERT_TRACKER=off` starts workers without the tracker (for a
/// library whose own allocator replacement conflicts with it, or to measure
/// its cost); the frees rules are then not exercised.
pub fn enabled() -> bool {
    !matches!(
        std::env::var("ARROWCERT_TRACKER").as_deref(),
        Ok("off" | "0" | "no")
    )
}

/// Writes the library into `dir` (a directory private to this run) as a new
/// file readable only by this user, and returns its path.
pub fn install(dir: &Path) -> std::io::Result<PathBuf> {
    let path = dir.join(FILE_NAME);
    let _ = std::fs::remove_file(&path);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o500)
        .open(&path)?;
    f.write_all(LIBRARY)?;
    f.sync_all()?;
    Ok(path)
}

/// The `LD_PRELOAD` value for a worker: the tracker first (its malloc must
/// be the one that binds), then whatever the caller preloads already.
pub fn preload_value(library: &Path) -> std::ffi::OsString {
    let mut v = library.as_os_str().to_owned();
    if let Some(existing) = std::env::var_os("LD_PRELOAD").filter(|e| !e.is_empty()) {
        v.push(":");
        v.push(existing);
    }
    v
}

type CounterFn = unsafe extern "C" fn() -> i64;

/// The tracker's counter function, if the tracker is loaded in this process.
fn counter() -> Option<CounterFn> {
    static FOUND: OnceLock<Option<usize>> = OnceLock::new();
    let addr = *FOUND.get_or_init(|| {
        const NAME: &CStr = c"arrowcert_tracker_live_bytes";
        // SAFETY: dlsym with RTLD_DEFAULT searches the global scope (the
        // executable, LD_PRELOAD libraries, their dependencies) for a
        // NUL-terminated name; it reads the string and returns an address
        // or NULL, nothing else.
        let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, NAME.as_ptr()) };
        (!p.is_null()).then_some(p as usize)
    });
    // SAFETY: the address is the tracker's `int64_t
    // arrowcert_tracker_live_bytes(void)`, exported under that name with
    // exactly this signature by alloc_tracker.c; a function pointer and a
    // data pointer have the same size and representation on the platforms
    // dlsym serves.
    addr.map(|a| unsafe { std::mem::transmute::<usize, CounterFn>(a) })
}

/// True when the tracker is loaded in this process.
pub fn present() -> bool {
    counter().is_some()
}

/// Net bytes live in malloc'd blocks of this process (all threads), if the
/// tracker is loaded.
pub fn live_bytes() -> Option<i64> {
    // SAFETY: the tracker's counter takes no arguments and only loads an
    // atomic integer.
    counter().map(|f| unsafe { f() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_library_is_embedded_and_is_an_elf_shared_object() {
        assert!(LIBRARY.len() > 1000);
        assert_eq!(&LIBRARY[..4], b"\x7fELF");
    }

    #[test]
    fn install_writes_a_private_copy() {
        use std::os::unix::fs::PermissionsExt;
        let dir =
            std::env::temp_dir().join(format!("arrowcert-tracker-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = install(&dir).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), LIBRARY);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "{mode:o}");
        // Installing again (a second run in the same directory) works.
        install(&dir).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_test_process_has_no_tracker() {
        // Unit tests are not preloaded: the rules that need the tracker
        // must say so rather than pass.
        if std::env::var_os("LD_PRELOAD").is_none() {
            assert!(!present());
            assert_eq!(live_bytes(), None);
        }
    }
}

//! Reading host memory at an address a plugin gave, without trusting it.
//!
//! A `sync_event` that is the event itself rather than a pointer to it, a
//! children array in device memory, a structure already freed: following
//! such a pointer with an ordinary load can crash the harness. These reads
//! go through `process_vm_readv` on this very process, which copies what is
//! mapped and readable and fails with EFAULT for anything else (device
//! memory, unmapped pages), so a bad pointer becomes evidence instead of a
//! crash.

/// This process's ID for `process_vm_readv`, asked of the kernel once:
/// glibc does not cache `getpid`, and a device-array check reads a hundred
/// small structures, two system calls each instead of one. A child of
/// `fork` (a plugin that forks and returns into the harness's code) asks
/// again: the fork handler forgets the cached value.
fn this_pid() -> libc::pid_t {
    use std::sync::atomic::{AtomicI32, Ordering};
    static PID: AtomicI32 = AtomicI32::new(0);
    static FORGET_ON_FORK: std::sync::Once = std::sync::Once::new();
    extern "C" fn forget() {
        PID.store(0, Ordering::Relaxed);
    }
    FORGET_ON_FORK.call_once(|| {
        // SAFETY: registers a child handler that only stores to an atomic
        // (async-signal-safe, as a handler run in a forked child must be).
        unsafe { libc::pthread_atfork(None, None, Some(forget)) };
    });
    match PID.load(Ordering::Relaxed) {
        0 => {
            // SAFETY: getpid has no preconditions.
            let pid = unsafe { libc::getpid() };
            PID.store(pid, Ordering::Relaxed);
            pid
        }
        pid => pid,
    }
}

/// Copies `len` bytes at `addr`, or `None` when any of them is not readable
/// host memory.
pub fn read(addr: usize, len: usize) -> Option<Vec<u8>> {
    if len == 0 {
        return Some(Vec::new());
    }
    if addr == 0 || addr.checked_add(len).is_none() {
        return None;
    }
    let mut out = vec![0u8; len];
    let local = libc::iovec {
        iov_base: out.as_mut_ptr().cast(),
        iov_len: len,
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: len,
    };
    // SAFETY: `local` describes `out`, which we own and which holds `len`
    // bytes; the kernel only writes there. `remote` is only read, by the
    // kernel, which checks it against this process's mappings (EFAULT when
    // any of it is not readable) instead of faulting.
    let n = unsafe { libc::process_vm_readv(this_pid(), &local, 1, &remote, 1, 0) };
    (n == len as isize).then_some(out)
}

/// Reads one `u64` (an event handle, a pointer) at `addr`.
pub fn read_u64(addr: usize) -> Option<u64> {
    let b = read(addr, 8)?;
    Some(u64::from_ne_bytes(b.try_into().ok()?))
}

/// True when `len` bytes at `addr` are readable host memory.
pub fn readable(addr: usize, len: usize) -> bool {
    read(addr, len.max(1)).is_some()
}

/// Whether the first and the last byte of `[addr, addr + len)` are readable
/// host memory: `None` when both are (or `len` is 0), otherwise the address
/// of the first one that is not. One system call whatever `len` is, so a
/// validator can afford it for every buffer; a range whose ends are mapped
/// but whose middle is not (two mappings with a hole between) is not seen.
/// This is how a buffer that ends before the bytes its layout needs, at the
/// end of a mapping, is found without reading it.
pub fn unreadable_end(addr: usize, len: usize) -> Option<usize> {
    if len == 0 {
        return None;
    }
    let Some(last) = addr.checked_add(len - 1) else {
        return Some(addr);
    };
    if addr == 0 {
        return Some(0);
    }
    let mut out = [0u8; 2];
    let local = libc::iovec {
        iov_base: out.as_mut_ptr().cast(),
        iov_len: 2,
    };
    let remote = [
        libc::iovec {
            iov_base: addr as *mut libc::c_void,
            iov_len: 1,
        },
        libc::iovec {
            iov_base: last as *mut libc::c_void,
            iov_len: 1,
        },
    ];
    // SAFETY: `local` describes `out` (2 bytes, ours); the kernel only
    // writes there. The two remote ranges are only read, by the kernel,
    // which checks them against this process's mappings and stops at the
    // first that is not readable instead of faulting.
    let n = unsafe { libc::process_vm_readv(this_pid(), &local, 1, remote.as_ptr(), 2, 0) };
    match n {
        2 => None,
        1 => Some(last),
        _ if probe_works() => Some(addr),
        // The call itself is refused here (a seccomp filter): nothing is
        // known, and nothing is reported.
        _ => None,
    }
}

/// True when `process_vm_readv` on this process works at all (a container's
/// seccomp policy may refuse it): checked once on memory that is certainly
/// readable.
fn probe_works() -> bool {
    static WORKS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *WORKS.get_or_init(|| {
        let v = 1u64;
        read(std::ptr::from_ref(&v) as usize, 8).is_some()
    })
}

/// Tests (here and the harness's validator tests): a fresh readable and
/// writable page followed by a page that is not readable (a private
/// mapping, left mapped: tests are short-lived). Returns the readable
/// page's address and the page size.
#[doc(hidden)]
pub fn page_before_a_hole() -> (usize, usize) {
    // SAFETY: sysconf only reads a configuration value.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap();
    // SAFETY: an anonymous private mapping of two pages, ours alone.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            2 * page,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert_ne!(base, libc::MAP_FAILED);
    let b = base as usize;
    // SAFETY: the second page of the mapping just made.
    let rc = unsafe { libc::mprotect((b + page) as *mut libc::c_void, page, libc::PROT_NONE) };
    assert_eq!(rc, 0);
    (b, page)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_forked_child_reads_with_its_own_pid() {
        // The parent's pid is cached; a child of fork must not read
        // through it (it would read the parent's memory, not its own).
        let v = 1u64;
        let at = std::ptr::from_ref(&v) as usize;
        assert_eq!(read_u64(at), Some(1));
        let parent = this_pid();
        // SAFETY: the child makes no allocation (other test threads may
        // hold the allocator's lock): it compares pids, probes its own
        // stack with the allocation-free `unreadable_end` and leaves with
        // _exit.
        let child = unsafe { libc::fork() };
        assert!(child >= 0);
        if child == 0 {
            // SAFETY: getpid and _exit have no preconditions.
            unsafe {
                let mine = this_pid();
                let ok =
                    mine == libc::getpid() && mine != parent && unreadable_end(at, 8).is_none();
                libc::_exit(if ok { 0 } else { 1 });
            }
        }
        let mut status = 0;
        // SAFETY: waits for the child just forked; `status` is ours.
        assert_eq!(unsafe { libc::waitpid(child, &mut status, 0) }, child);
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
    }

    #[test]
    fn reads_mapped_memory_and_refuses_the_rest() {
        let v: u64 = 0x1122_3344_5566_7788;
        assert_eq!(read_u64(&v as *const u64 as usize), Some(v));
        assert_eq!(read_u64(0), None);
        assert_eq!(read_u64(8), None);
        // A high, non-canonical address: never mapped.
        assert_eq!(read_u64(0xA5A5_A5A5_A5A5_A5A5), None);
        assert!(readable(&v as *const u64 as usize, 8));
    }

    #[test]
    fn unreadable_end_finds_a_range_running_into_a_protected_page() {
        let (b, page) = page_before_a_hole();
        // Exactly to the end of the readable page: readable.
        assert_eq!(unreadable_end(b + page - 16, 16), None);
        assert_eq!(unreadable_end(b, page), None);
        // One byte further: the last byte is not.
        assert_eq!(unreadable_end(b + page - 16, 17), Some(b + page));
        // Starting in the protected page: the first byte is not.
        assert_eq!(unreadable_end(b + page, 1), Some(b + page));
        assert_eq!(unreadable_end(b, 0), None);
        assert_eq!(unreadable_end(0, 4), Some(0));
        assert_eq!(unreadable_end(usize::MAX, 2), Some(usize::MAX));
    }
}

//! Reading host memory at an address a plugin gave, without trusting it.
//!
//! A `sync_event` that is the event itself rather than a pointer to it, a
//! children array in device memory, a structure already freed: following
//! such a pointer with an ordinary load can crash the harness. These reads
//! go through `process_vm_readv` on this very process, which copies what is
//! mapped and readable and fails with EFAULT for anything else (device
//! memory, unmapped pages), so a bad pointer becomes evidence instead of a
//! crash.

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
    let n = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) };
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

#[cfg(test)]
mod tests {
    use super::*;

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
}

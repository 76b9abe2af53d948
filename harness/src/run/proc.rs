//! Process control for workers: the only `unsafe` in `run/`, each a single
//! libc call on plain integers.

use std::io;

/// Kills a worker and everything it started: workers are spawned as leaders
/// of their own process group, so a plugin that forked cannot leave
/// children behind.
pub fn kill_group(pid: u32) {
    let Ok(pid) = i32::try_from(pid) else { return };
    if pid <= 1 {
        return; // never signal init or "every process" by mistake
    }
    // SAFETY: kill(2) with a negative pid signals that process group; no
    // memory is involved. The group is the worker's own (process_group(0)).
    unsafe {
        libc::kill(-pid, libc::SIGKILL);
    }
}

/// Resource limits a worker applies to itself before loading plugins, so
/// that runaway allocation or a CPU spin becomes a verdict instead of
/// exhausting the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// RLIMIT_AS, bytes of address space.
    pub address_space: Option<u64>,
    /// RLIMIT_NOFILE, open file descriptors.
    pub open_files: Option<u64>,
    /// RLIMIT_CPU, seconds of CPU time over the worker's life.
    pub cpu_seconds: Option<u64>,
}

fn set(resource: libc::__rlimit_resource_t, value: u64) -> io::Result<()> {
    let lim = libc::rlimit {
        rlim_cur: value as libc::rlim_t,
        rlim_max: value as libc::rlim_t,
    };
    // SAFETY: setrlimit reads the rlimit struct we pass by reference for the
    // duration of the call only.
    let rc = unsafe { libc::setrlimit(resource, &lim) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

impl Limits {
    /// The limits of a worker process: `max_memory_mb` of address space,
    /// 1024 open files, no CPU-time limit (case deadlines bound hangs).
    pub fn worker(max_memory_mb: u64) -> Limits {
        Limits {
            address_space: Some(max_memory_mb.saturating_mul(1024 * 1024)),
            open_files: Some(1024),
            cpu_seconds: None,
        }
    }

    /// Applies the limits to the calling process.
    pub fn apply(&self) -> io::Result<()> {
        if let Some(v) = self.address_space {
            set(libc::RLIMIT_AS, v)?;
        }
        if let Some(v) = self.open_files {
            set(libc::RLIMIT_NOFILE, v)?;
        }
        if let Some(v) = self.cpu_seconds {
            set(libc::RLIMIT_CPU, v)?;
        }
        Ok(())
    }
}

/// Flushes C stdio buffers, so that what a plugin printed with `printf`
/// reaches the capture file before the case's output is read.
pub fn flush_c_stdio() {
    // SAFETY: fflush(NULL) flushes every open output stream; it takes no
    // pointer we own.
    unsafe {
        libc::fflush(std::ptr::null_mut());
    }
}

/// A readable name for a signal number.
pub fn signal_name(sig: i32) -> String {
    let name = match sig {
        libc::SIGABRT => "SIGABRT",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGILL => "SIGILL",
        libc::SIGKILL => "SIGKILL",
        libc::SIGTERM => "SIGTERM",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGTRAP => "SIGTRAP",
        _ => return format!("signal {sig}"),
    };
    format!("{name} ({sig})")
}

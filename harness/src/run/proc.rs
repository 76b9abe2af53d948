//! Process control for workers: the only `unsafe` in `run/`, each a single
//! libc call on plain integers, and the breadcrumb page ([`CrumbPage`]), a
//! shared mapping read and written through atomics.

use std::io;
use std::path::{Path, PathBuf};

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

/// Passes a stop signal (SIGINT, SIGTERM) on to one child process: the
/// matrix's unit runs, which stop between cases and leave their reports
/// marked incomplete, as they do when the terminal signals them itself.
pub fn forward_signal(pid: u32, sig: i32) {
    let Ok(pid) = i32::try_from(pid) else { return };
    if pid <= 1 || !matches!(sig, libc::SIGINT | libc::SIGTERM) {
        return;
    }
    // SAFETY: kill(2) on one positive pid (our own child); no memory is
    // involved.
    unsafe {
        libc::kill(pid, sig);
    }
}

/// Resource limits a worker applies to itself before loading plugins, so
/// that runaway allocation or a CPU spin becomes a verdict instead of
/// exhausting the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// RLIMIT_AS, bytes of address space.
    pub address_space: Option<u64>,
    /// RLIMIT_DATA, bytes of private writable memory (the heap and
    /// anonymous mappings): the memory bound where a CUDA driver is
    /// present, see [`Limits::worker`].
    pub data: Option<u64>,
    /// RLIMIT_NOFILE, open file descriptors.
    pub open_files: Option<u64>,
    /// RLIMIT_CPU, seconds of CPU time over the worker's life.
    pub cpu_seconds: Option<u64>,
    /// RLIMIT_FSIZE, the largest file the process may write: it bounds
    /// the worker's capture file (its stdout and stderr), whatever a
    /// plugin prints. Writes past it fail (SIGXFSZ is ignored, so the
    /// worker lives on).
    pub file_size: Option<u64>,
    /// RLIMIT_CORE: 0, so that a crashing plugin writes no core file. A
    /// library that crashes in hundreds of cases would otherwise leave a
    /// core of the whole worker (Python and the library with it) for each
    /// in the working directory, where `ulimit -c` allows one.
    pub core_size: Option<u64>,
}

/// Bytes of output (stdout and stderr together) a worker's capture file
/// may hold over the worker's life; what a plugin prints past it is
/// discarded, and the cases say so.
pub const WORKER_OUTPUT_BYTES: u64 = 16 << 20;

fn set(resource: libc::__rlimit_resource_t, value: u64) -> io::Result<()> {
    let mut now = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the rlimit struct we pass by reference for
    // the duration of the call only.
    let known = unsafe { libc::getrlimit(resource, &mut now) } == 0;
    // Never above the hard limit the process already has: raising it needs
    // privileges, and under valgrind the hard limit of open files is
    // valgrind's own, below the usual one. Lowering is what bounds.
    let value = if known && now.rlim_max != libc::RLIM_INFINITY {
        value.min(now.rlim_max)
    } else {
        value
    };
    let lim = libc::rlimit {
        rlim_cur: value as libc::rlim_t,
        rlim_max: value as libc::rlim_t,
    };
    // SAFETY: setrlimit reads the rlimit struct we pass by reference for the
    // duration of the call only.
    let rc = unsafe { libc::setrlimit(resource, &lim) };
    if rc == 0 {
        return Ok(());
    }
    let err = io::Error::last_os_error();
    // Valgrind lets its client lower the soft limit of open files only,
    // the hard limit staying its own: the soft limit alone, then.
    if known && err.raw_os_error() == Some(libc::EPERM) {
        let soft = libc::rlimit {
            rlim_cur: lim.rlim_cur,
            rlim_max: now.rlim_max,
        };
        // SAFETY: as above.
        if unsafe { libc::setrlimit(resource, &soft) } == 0 {
            return Ok(());
        }
    }
    Err(err)
}

impl Limits {
    /// The limits of a worker process: `max_memory_mb` of address space,
    /// 1024 open files, no CPU-time limit (case deadlines bound hangs).
    ///
    /// On a machine whose CUDA driver loads, the memory bound is RLIMIT_DATA
    /// instead: the driver reserves virtual address space for unified
    /// addressing far beyond any sensible bound, and under an 8 GiB
    /// RLIMIT_AS `cuInit` fails with CUDA_ERROR_OUT_OF_MEMORY (seen on an
    /// H100: every CUDA case of `just gpu` was skipped). RLIMIT_DATA still
    /// bounds what a runaway plugin allocates (malloc, private anonymous
    /// mappings) and leaves the driver's reservations (PROT_NONE) alone.
    pub fn worker(max_memory_mb: u64) -> Limits {
        Limits::worker_with(max_memory_mb, crate::device::cuda_driver_loads())
    }

    /// [`Limits::worker`] with the choice of bound made by the caller.
    pub fn worker_with(max_memory_mb: u64, cuda_driver: bool) -> Limits {
        // 0: no memory bound (a worker under valgrind, whose own memory
        // management refuses one).
        let bytes = (max_memory_mb > 0).then(|| max_memory_mb.saturating_mul(1024 * 1024));
        let (address_space, data) = if cuda_driver {
            (None, bytes)
        } else {
            (bytes, None)
        };
        Limits {
            address_space,
            data,
            open_files: Some(1024),
            cpu_seconds: None,
            file_size: Some(WORKER_OUTPUT_BYTES),
            core_size: Some(0),
        }
    }

    /// The memory bound in MiB, whichever limit carries it (u64::MAX
    /// bytes when there is none).
    pub fn memory_mb(&self) -> u64 {
        self.address_space.or(self.data).unwrap_or(u64::MAX) / (1024 * 1024)
    }

    /// Applies the limits to the calling process.
    pub fn apply(&self) -> io::Result<()> {
        if let Some(v) = self.address_space {
            set(libc::RLIMIT_AS, v)?;
        }
        if let Some(v) = self.data {
            set(libc::RLIMIT_DATA, v)?;
        }
        if let Some(v) = self.open_files {
            set(libc::RLIMIT_NOFILE, v)?;
        }
        if let Some(v) = self.cpu_seconds {
            set(libc::RLIMIT_CPU, v)?;
        }
        if let Some(v) = self.core_size {
            set(libc::RLIMIT_CORE, v)?;
        }
        if let Some(v) = self.file_size {
            // SAFETY: installs the SIG_IGN disposition for SIGXFSZ; no
            // handler code of ours runs.
            unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_IGN) };
            set(libc::RLIMIT_FSIZE, v)?;
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
        libc::SIGINT => "SIGINT",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGTRAP => "SIGTRAP",
        _ => return format!("signal {sig}"),
    };
    format!("{name} ({sig})")
}

/// The signal (SIGINT or SIGTERM) that asked the run to stop, 0 if none.
static INTERRUPTED: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

extern "C" fn on_interrupt(sig: libc::c_int) {
    // A second Ctrl-C means "now": leave at once. Workers see their socket
    // close and end on their own; the last incremental report stays valid.
    if INTERRUPTED.swap(sig, std::sync::atomic::Ordering::SeqCst) != 0 {
        // SAFETY: _exit is async-signal-safe and takes no pointers.
        unsafe { libc::_exit(128 + sig) };
    }
}

/// Catches SIGINT and SIGTERM so that a run can stop between cases and
/// leave a valid, resumable report. Blocking reads are restarted
/// (SA_RESTART), so the only effect of a signal is the flag read by
/// [`interrupted`].
pub fn catch_interrupts() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: a zeroed sigaction is a valid "no flags, empty mask"
        // value; we set a plain handler that only touches an atomic (which
        // is async-signal-safe) and pass the struct by reference for the
        // duration of the call.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_interrupt as extern "C" fn(libc::c_int) as usize;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(sig, &action, std::ptr::null_mut());
        }
    }
}

/// The signal that interrupted the run, if one did.
pub fn interrupted() -> Option<i32> {
    match INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst) {
        0 => None,
        sig => Some(sig),
    }
}

/// Gives the calling process `seconds` more CPU time from now (soft
/// RLIMIT_CPU; the hard limit is left alone so the next case can raise it
/// again). A plugin that spins on several threads gets SIGXCPU, which the
/// orchestrator reports as a crash of that case.
pub fn cpu_budget(seconds: u64) -> io::Result<()> {
    // SAFETY: getrusage writes into the zeroed struct we own.
    let used = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        if libc::getrusage(libc::RUSAGE_SELF, &mut usage) != 0 {
            return Err(io::Error::last_os_error());
        }
        (usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) as u64 + 1
    };
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we pass by reference.
    if unsafe { libc::getrlimit(libc::RLIMIT_CPU, &mut lim) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let want = (used + seconds) as libc::rlim_t;
    lim.rlim_cur = if lim.rlim_max == libc::RLIM_INFINITY {
        want
    } else {
        want.min(lim.rlim_max)
    };
    // SAFETY: setrlimit reads the struct for the duration of the call.
    if unsafe { libc::setrlimit(libc::RLIMIT_CPU, &lim) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Ends the calling process at once, without running exit handlers or
/// flushing stdio buffers that a forked child shares with its parent.
pub fn exit_now(code: i32) -> ! {
    // SAFETY: _exit takes no pointers and never returns.
    unsafe { libc::_exit(code) }
}

/// The environment variable naming the pids cgroup a worker joins.
pub const PIDS_CGROUP_ENV: &str = "ARROWCERT_PIDS_CGROUP";

/// A pids cgroup bounding how many tasks (processes and threads) the
/// workers and whatever their plugins fork may hold at once: a fork bomb
/// becomes a failing `fork` (EAGAIN) inside the plugin, then a crash or
/// timeout verdict, instead of a machine out of process IDs. RLIMIT_NPROC
/// cannot do this: it counts every process of the user and does not bind
/// root at all. Created per run when the cgroup file system lets us (root,
/// or a delegated subtree); removed, with anything left in it killed, when
/// dropped.
#[derive(Debug)]
pub struct PidsCgroup {
    dir: PathBuf,
}

impl PidsCgroup {
    /// Creates `arrowcert-<pid>` beside this process's own pids cgroup
    /// (cgroup v2 unified hierarchy, or v1's `pids` controller) with
    /// `pids.max = max`; `None` where that is not possible.
    pub fn create(max: u64) -> Option<PidsCgroup> {
        let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
        let name = format!("arrowcert-{}", std::process::id());
        let mut candidates = Vec::new();
        for line in own.lines() {
            let mut parts = line.splitn(3, ':');
            let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            let path = path.trim_start_matches('/');
            if controllers.split(',').any(|c| c == "pids") {
                candidates.push(PathBuf::from("/sys/fs/cgroup/pids").join(path));
            } else if controllers.is_empty() {
                candidates.push(PathBuf::from("/sys/fs/cgroup").join(path));
            }
        }
        for parent in candidates {
            if !parent.join("cgroup.procs").exists() {
                continue;
            }
            let dir = parent.join(&name);
            if std::fs::create_dir(&dir).is_err() {
                continue;
            }
            let cg = PidsCgroup { dir };
            if std::fs::write(cg.dir.join("pids.max"), max.to_string()).is_ok() {
                return Some(cg);
            }
            // No pids controller here (v2 without it delegated): dropping
            // removes the directory again.
        }
        None
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Tasks in the cgroup now.
    pub fn current(&self) -> Option<u64> {
        std::fs::read_to_string(self.dir.join("pids.current"))
            .ok()?
            .trim()
            .parse()
            .ok()
    }
}

/// Moves the calling process into the pids cgroup at `dir` (a worker does
/// this before it loads any plugin).
pub fn join_pids_cgroup(dir: &Path) -> io::Result<()> {
    std::fs::write(dir.join("cgroup.procs"), std::process::id().to_string())
}

impl Drop for PidsCgroup {
    fn drop(&mut self) {
        // Whatever is still in it (a plugin's stray children) is killed;
        // a cgroup with tasks cannot be removed.
        for _ in 0..50 {
            let procs = std::fs::read_to_string(self.dir.join("cgroup.procs")).unwrap_or_default();
            let pids: Vec<i32> = procs
                .lines()
                .filter_map(|l| l.trim().parse().ok())
                .collect();
            if pids.is_empty() && std::fs::remove_dir(&self.dir).is_ok() {
                return;
            }
            for pid in pids {
                // SAFETY: kill takes plain integers; these are processes of
                // this run's cgroup (workers and what their plugins forked).
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// The write end of the watchdog's wake-up pipe (-1 until it exists), for
/// the PR_SET_PDEATHSIG handler.
static WAKE_FD: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(-1);

extern "C" fn on_parent_death(_sig: libc::c_int) {
    let fd = WAKE_FD.load(std::sync::atomic::Ordering::SeqCst);
    if fd >= 0 {
        let byte = 1u8;
        // SAFETY: write(2) is async-signal-safe; one byte from our stack to
        // the pipe this module made (a full pipe just fails).
        unsafe { libc::write(fd, std::ptr::from_ref(&byte).cast(), 1) };
    }
}

/// How often the watchdog looks at its parent when nothing wakes it.
const WATCH_EVERY_MS: i32 = 50;

/// Makes the calling worker end with its orchestrator, however that dies
/// (SIGKILL included, with this worker stuck inside a plugin call): the
/// kernel sends SIGUSR2 when the parent dies (PR_SET_PDEATHSIG), whose
/// handler wakes a watchdog thread; the thread also looks at the parent
/// every 50 ms, in case a plugin replaced the handler. Once the parent is
/// gone the watchdog removes the run's scratch directory `scratch` (nobody
/// else is left to) and kills this worker's process group: the worker and
/// whatever its plugins forked into it.
pub fn die_with_parent(scratch: Option<PathBuf>) -> io::Result<()> {
    // SAFETY: getppid takes nothing and cannot fail.
    let parent = unsafe { libc::getppid() };
    let mut fds = [-1i32; 2];
    // SAFETY: pipe2 writes two descriptors into the array we own.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
        return Err(io::Error::last_os_error());
    }
    WAKE_FD.store(fds[1], std::sync::atomic::Ordering::SeqCst);
    // SAFETY: a zeroed sigaction is a valid "no flags, empty mask" value;
    // the handler only writes one byte to a pipe (async-signal-safe); the
    // struct is read for the duration of the call.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_parent_death as extern "C" fn(libc::c_int) as usize;
        action.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGUSR2, &action, std::ptr::null_mut());
    }
    // SAFETY: prctl with PR_SET_PDEATHSIG takes a signal number; no memory.
    if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGUSR2 as libc::c_ulong) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let read_fd = fds[0];
    std::thread::Builder::new()
        .name("arrowcert-watchdog".into())
        .spawn(move || loop {
            let mut poll = libc::pollfd {
                fd: read_fd,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one pollfd we own, for the duration of the call.
            unsafe { libc::poll(&mut poll, 1, WATCH_EVERY_MS) };
            let mut drain = [0u8; 16];
            // SAFETY: reads into our buffer from our non-blocking pipe.
            unsafe { libc::read(read_fd, drain.as_mut_ptr().cast(), drain.len()) };
            // SAFETY: as above.
            if unsafe { libc::getppid() } != parent {
                if let Some(dir) = &scratch {
                    let _ = std::fs::remove_dir_all(dir);
                }
                // SAFETY: kill(0, ...) signals this process's own group
                // (the worker leads it): the worker and what its plugins
                // forked. No memory is involved.
                unsafe { libc::kill(0, libc::SIGKILL) };
                exit_now(137);
            }
        })?;
    Ok(())
}

/// The prefix of a run's scratch directory in the temporary directory; the
/// orchestrator's pid follows it.
pub const SCRATCH_PREFIX: &str = "arrowcert-run-";

/// Removes scratch directories that runs killed before they could clean up
/// left in `tmp`: `arrowcert-run-<pid>` owned by this user whose process is
/// gone (or is no longer an arrowcert process: the pid was reused). Returns
/// how many it removed.
pub fn remove_stale_scratch(tmp: &Path) -> usize {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return 0;
    };
    // SAFETY: getuid takes nothing and cannot fail.
    let me = unsafe { libc::getuid() };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(SCRATCH_PREFIX))
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(meta) = std::fs::symlink_metadata(entry.path()) else {
            continue;
        };
        if !meta.is_dir() || meta.uid() != me || pid <= 1 || pid == std::process::id() as i32 {
            continue;
        }
        if !is_arrowcert(pid) && std::fs::remove_dir_all(entry.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// True when process `pid` exists and runs arrowcert (an orchestrator that
/// may still use its scratch directory).
fn is_arrowcert(pid: i32) -> bool {
    // SAFETY: kill with signal 0 only checks that the process exists.
    let alive = unsafe { libc::kill(pid, 0) } == 0
        || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
    if !alive {
        return false;
    }
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok();
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    match exe {
        Some(path) => path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("arrowcert")),
        // Not ours to read: trust the name, and keep the directory.
        None => comm.is_empty() || comm.trim().starts_with("arrowcert"),
    }
}

/// Signals whose disposition a plugin may change and the worker restores
/// after each case: the faults it must go on seeing as crashes, the
/// watchdog's wake-up, and the output-limit signal it ignores.
const GUARDED_SIGNALS: [libc::c_int; 9] = [
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGFPE,
    libc::SIGILL,
    libc::SIGABRT,
    libc::SIGTERM,
    libc::SIGPIPE,
    libc::SIGXFSZ,
    libc::SIGUSR2,
];

/// Limits whose value a plugin may change (RLIMIT_CPU's soft limit is
/// renewed per case by [`cpu_budget`]; its hard limit is compared).
const GUARDED_LIMITS: [(libc::__rlimit_resource_t, &str); 5] = [
    (libc::RLIMIT_AS, "RLIMIT_AS"),
    (libc::RLIMIT_DATA, "RLIMIT_DATA"),
    (libc::RLIMIT_NOFILE, "RLIMIT_NOFILE"),
    (libc::RLIMIT_FSIZE, "RLIMIT_FSIZE"),
    (libc::RLIMIT_CPU, "RLIMIT_CPU"),
];

fn limit_of(resource: libc::__rlimit_resource_t) -> Option<libc::rlimit> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we pass by reference.
    (unsafe { libc::getrlimit(resource, &mut lim) } == 0).then_some(lim)
}

fn file_id(fd: libc::c_int) -> Option<(u64, u64)> {
    // SAFETY: fstat writes into the zeroed struct we own; a closed fd fails.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        (libc::fstat(fd, &mut st) == 0).then_some((st.st_dev, st.st_ino))
    }
}

/// What a worker's process looked like before the first case (descriptors
/// 0-2, signal dispositions, resource limits), so that what a plugin
/// changed in it is put back before the next case runs: a plugin that
/// redirects stdout, swallows SIGSEGV or lowers a limit must not change
/// the verdicts of the cases after its own.
pub struct ProcessState {
    /// (fd, what it refers to, a private duplicate to restore it from).
    fds: Vec<(libc::c_int, (u64, u64), libc::c_int)>,
    signals: Vec<(libc::c_int, libc::sigaction)>,
    limits: Vec<(libc::__rlimit_resource_t, &'static str, libc::rlimit)>,
}

impl Drop for ProcessState {
    fn drop(&mut self) {
        for &(_, _, copy) in &self.fds {
            // SAFETY: `copy` is this snapshot's own duplicate (made in
            // take, never handed out); closing it touches no memory.
            unsafe { libc::close(copy) };
        }
    }
}

/// What [`ProcessState::restore`] found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Restored {
    /// Each change found and undone, in words.
    pub undone: Vec<String>,
    /// A change that could not be undone (a hard limit lowered): the
    /// worker must not run another case.
    pub stuck: Option<String>,
}

impl ProcessState {
    /// Takes the snapshot (after the worker's own limits and handlers are
    /// in place).
    pub fn take() -> ProcessState {
        let mut fds = Vec::new();
        for fd in 0..3 {
            let Some(id) = file_id(fd) else { continue };
            // SAFETY: fcntl F_DUPFD_CLOEXEC duplicates an open descriptor
            // to one >= 100 (out of the way of plugins' low numbers).
            let copy = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 100) };
            if copy >= 0 {
                fds.push((fd, id, copy));
            }
        }
        let mut signals = Vec::new();
        for sig in GUARDED_SIGNALS {
            // SAFETY: a zeroed sigaction is a valid value to be written;
            // sigaction with a NULL new action only reads the current one.
            unsafe {
                let mut old: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(sig, std::ptr::null(), &mut old) == 0 {
                    signals.push((sig, old));
                }
            }
        }
        let limits = GUARDED_LIMITS
            .iter()
            .filter_map(|&(r, name)| limit_of(r).map(|l| (r, name, l)))
            .collect();
        ProcessState {
            fds,
            signals,
            limits,
        }
    }

    /// Puts back whatever differs from the snapshot.
    pub fn restore(&self) -> Restored {
        let mut out = Restored::default();
        for &(fd, id, copy) in &self.fds {
            if file_id(fd) != Some(id) {
                // SAFETY: dup2 of our private duplicate onto the standard
                // descriptor; no memory is involved.
                if unsafe { libc::dup2(copy, fd) } == fd {
                    out.undone.push(format!(
                        "descriptor {fd} was closed or redirected; restored"
                    ));
                } else {
                    out.stuck = Some(format!(
                        "descriptor {fd} was closed or redirected and cannot be restored"
                    ));
                }
            }
        }
        for (sig, saved) in &self.signals {
            // SAFETY: as in take.
            let now = unsafe {
                let mut now: libc::sigaction = std::mem::zeroed();
                libc::sigaction(*sig, std::ptr::null(), &mut now);
                now
            };
            if now.sa_sigaction != saved.sa_sigaction || now.sa_flags != saved.sa_flags {
                // SAFETY: reinstalls the disposition read in take (a
                // handler of this process or SIG_DFL/SIG_IGN).
                unsafe { libc::sigaction(*sig, saved, std::ptr::null_mut()) };
                out.undone.push(format!(
                    "the disposition of {} was changed; restored",
                    signal_name(*sig)
                ));
            }
        }
        for &(resource, name, saved) in &self.limits {
            let Some(now) = limit_of(resource) else {
                continue;
            };
            let soft_differs = resource != libc::RLIMIT_CPU && now.rlim_cur != saved.rlim_cur;
            if now.rlim_max == saved.rlim_max && !soft_differs {
                continue;
            }
            let want = libc::rlimit {
                rlim_cur: if resource == libc::RLIMIT_CPU {
                    now.rlim_cur.min(saved.rlim_max)
                } else {
                    saved.rlim_cur
                },
                rlim_max: saved.rlim_max,
            };
            // SAFETY: setrlimit reads the struct for the duration of the call.
            if unsafe { libc::setrlimit(resource, &want) } == 0 {
                out.undone.push(format!("{name} was changed; restored"));
            } else {
                out.stuck = Some(format!(
                    "{name} was lowered to {} (hard) and cannot be raised again",
                    now.rlim_max
                ));
            }
        }
        out
    }
}

/// The page a worker writes its breadcrumbs into and the orchestrator reads
/// them from: a small file in the run's scratch directory that both map
/// shared. A crumb is a store into memory (no system call, no message per
/// plugin call), and it outlives the worker's death, which is when it is
/// read: the step a crash or a hang happened in.
///
/// Layout: a sequence number (odd while a crumb is being written), the
/// crumb's length, its bytes (at most [`CrumbPage::MAX`]).
pub struct CrumbPage {
    ptr: *mut u8,
}

// SAFETY: the mapping lives as long as the value; every access goes through
// the atomics at its start (sequence, length) or is a byte copy bracketed
// by them, so sharing the pointer between threads is sound (writers are
// serialized by the worker's sink, readers retry a torn read).
unsafe impl Send for CrumbPage {}
// SAFETY: as for Send.
unsafe impl Sync for CrumbPage {}

impl CrumbPage {
    /// The size of the file and mapping.
    pub const SIZE: usize = 4096;
    /// The longest crumb kept (longer ones are cut).
    pub const MAX: usize = Self::SIZE - 8;

    /// Creates the file (zeroed: no crumb yet), for a worker to map.
    pub fn create(path: &Path) -> io::Result<()> {
        let f = std::fs::File::create(path)?;
        f.set_len(Self::SIZE as u64)
    }

    /// Maps the file shared.
    pub fn map(path: &Path) -> io::Result<CrumbPage> {
        use std::os::fd::AsRawFd;
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)?;
        if f.metadata()?.len() < Self::SIZE as u64 {
            return Err(io::Error::other("breadcrumb file too short"));
        }
        // SAFETY: maps SIZE bytes of a file at least that long, shared,
        // read-write; the result is checked before use. The descriptor may
        // be closed afterwards (the mapping keeps the file).
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                Self::SIZE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(CrumbPage { ptr: p.cast() })
    }

    fn seq(&self) -> &std::sync::atomic::AtomicU32 {
        // SAFETY: the mapping is page-aligned and SIZE long; its first 4
        // bytes are only ever accessed as this atomic.
        unsafe { &*(self.ptr as *const std::sync::atomic::AtomicU32) }
    }

    fn len(&self) -> &std::sync::atomic::AtomicU32 {
        // SAFETY: bytes 4..8 of the mapping, 4-aligned, only accessed as
        // this atomic.
        unsafe { &*(self.ptr.add(4) as *const std::sync::atomic::AtomicU32) }
    }

    /// Writes a crumb (the caller serializes writers).
    pub fn write(&self, step: &str) {
        use std::sync::atomic::Ordering;
        let bytes = &step.as_bytes()[..step.len().min(Self::MAX)];
        self.seq().fetch_add(1, Ordering::AcqRel);
        // SAFETY: bytes 8..8+MAX of the mapping belong to the crumb text;
        // `bytes` is at most MAX long and does not overlap the mapping.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.ptr.add(8), bytes.len()) };
        self.len().store(bytes.len() as u32, Ordering::Release);
        self.seq().fetch_add(1, Ordering::Release);
    }

    /// No crumb (a new case starts).
    pub fn clear(&self) {
        use std::sync::atomic::Ordering;
        self.seq().fetch_add(1, Ordering::AcqRel);
        self.len().store(0, Ordering::Release);
        self.seq().fetch_add(1, Ordering::Release);
    }

    /// The last crumb, if any: read again while a writer was at it (a few
    /// tries; a worker that died in the middle of a write leaves what it
    /// had written).
    pub fn read(&self) -> Option<String> {
        use std::sync::atomic::Ordering;
        let mut text = Vec::new();
        for _ in 0..100 {
            let before = self.seq().load(Ordering::Acquire);
            let n = (self.len().load(Ordering::Acquire) as usize).min(Self::MAX);
            text.resize(n, 0);
            // SAFETY: reads n <= MAX bytes of the crumb text into `text`.
            unsafe { std::ptr::copy_nonoverlapping(self.ptr.add(8), text.as_mut_ptr(), n) };
            if before % 2 == 0 && self.seq().load(Ordering::Acquire) == before {
                break;
            }
            std::thread::yield_now();
        }
        (!text.is_empty()).then(|| String::from_utf8_lossy(&text).into_owned())
    }
}

impl Drop for CrumbPage {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `map`, which nothing
        // uses after this value is gone.
        unsafe { libc::munmap(self.ptr.cast(), Self::SIZE) };
    }
}

#[cfg(test)]
mod crumb_tests {
    use super::CrumbPage;

    /// What the worker writes is what the orchestrator reads through its
    /// own mapping, the last crumb only, cut at MAX; a cleared page reads
    /// as no crumb.
    #[test]
    fn a_crumb_written_in_one_mapping_is_read_in_another() {
        let dir = std::env::temp_dir().join(format!("arrowcert-crumbs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("w.crumb");
        CrumbPage::create(&path).unwrap();
        let worker = CrumbPage::map(&path).unwrap();
        let orchestrator = CrumbPage::map(&path).unwrap();
        assert_eq!(orchestrator.read(), None);
        worker.write("arrowcert_produce_array");
        worker.write("ArrowArray.release");
        assert_eq!(orchestrator.read().as_deref(), Some("ArrowArray.release"));
        let long = "x".repeat(CrumbPage::SIZE * 2);
        worker.write(&long);
        assert_eq!(orchestrator.read().map(|s| s.len()), Some(CrumbPage::MAX));
        worker.clear();
        assert_eq!(orchestrator.read(), None);
        drop((worker, orchestrator));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[cfg(test)]
mod limit_tests {
    use super::Limits;
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};

    /// Whether `python3 -c code` exits 0 under `limits`.
    fn runs(code: &str, limits: Option<Limits>) -> bool {
        let mut cmd = Command::new("python3");
        cmd.args(["-c", code])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if let Some(l) = limits {
            // SAFETY: the closure runs in the child between fork and exec
            // and only calls setrlimit and signal (async-signal-safe).
            unsafe {
                cmd.pre_exec(move || l.apply());
            }
        }
        cmd.status().expect("python3 runs").success()
    }

    /// 600 MiB of heap, touched.
    const ALLOCATE: &str = "b = bytearray(600 * 1024 * 1024); b[-1] = 1";
    /// 64 GiB of address space reserved and never touched (PROT_NONE), as
    /// the CUDA driver does for unified addressing.
    const RESERVE: &str = "import ctypes, sys\n\
        libc = ctypes.CDLL(None)\n\
        libc.mmap.restype = ctypes.c_void_p\n\
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]\n\
        p = libc.mmap(None, 64 << 30, 0, 0x22 | 0x4000, -1, 0)\n\
        sys.exit(0 if p not in (None, ctypes.c_void_p(-1).value) else 1)";

    /// Both bounds stop a runaway allocation; only the data bound (the one
    /// used where a CUDA driver loads) lets a reservation like the CUDA
    /// driver's through.
    #[test]
    fn the_data_bound_stops_allocations_and_lets_reservations_through() {
        if !runs("pass", None) {
            println!("SKIPPED: no python3 to run the child process");
            return;
        }
        let data = Limits::worker_with(256, true);
        let address = Limits::worker_with(256, false);
        assert_eq!((data.data, data.address_space), (Some(256 << 20), None));
        assert_eq!(
            (address.address_space, address.data),
            (Some(256 << 20), None)
        );
        assert_eq!((data.memory_mb(), address.memory_mb()), (256, 256));
        assert!(runs(ALLOCATE, None), "the allocation itself works");
        assert!(!runs(ALLOCATE, Some(data)), "RLIMIT_DATA stops it");
        assert!(!runs(ALLOCATE, Some(address)), "RLIMIT_AS stops it");
        assert!(runs(RESERVE, None), "the reservation itself works");
        assert!(runs(RESERVE, Some(data)), "RLIMIT_DATA lets it through");
        assert!(!runs(RESERVE, Some(address)), "RLIMIT_AS stops it");
    }

    /// A worker writes no core file, whatever `ulimit -c` the user has:
    /// its soft and hard RLIMIT_CORE are 0.
    #[test]
    fn a_worker_dumps_no_core() {
        const CORE_IS_ZERO: &str = "import resource, sys\n\
            sys.exit(0 if resource.getrlimit(resource.RLIMIT_CORE) == (0, 0) else 1)";
        if !runs("pass", None) {
            println!("SKIPPED: no python3 to run the child process");
            return;
        }
        let limits = Limits::worker_with(0, false);
        assert_eq!(limits.core_size, Some(0));
        assert!(runs(CORE_IS_ZERO, Some(limits)));
    }
}

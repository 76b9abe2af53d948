//! Running cases in worker processes, so that a library that crashes,
//! hangs, exits or prints never takes the run down.
//!
//! The orchestrator (the `arrowcert` process) plans the cases and hands them
//! one at a time to workers (`arrowcert worker`, the same binary), one per
//! job slot. A worker loads the plugins once and keeps them loaded between
//! cases, and (a [`Pool`] kept by the engine) between the runs of one
//! certification: each shrink candidate is a run of its own, which a kept
//! worker serves after planning again (`ToWorker::Plan`). Workers answer over a private Unix socket; their stdout and stderr
//! go to a capture file (at most 16 MiB: RLIMIT_FSIZE) whose growth during
//! a case is attached to that case. A worker that dies, or misses a case's deadline, is killed with its
//! whole process group, the case in flight gets a `crash` or `timeout`
//! verdict, and a fresh worker takes the remaining cases.

pub mod checkpoint;
pub mod late;
pub mod panic;
pub mod proc;
pub mod protocol;
pub mod suite;
pub mod under;
pub mod worker;

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{mpsc, Mutex};
use std::time::{Duration, Instant};

use crate::report::{self, Case, PluginIdentity, Verdict};
use protocol::{FromWorker, ToWorker};

/// How often a worker that has not answered is checked for having died.
const POLL_EXIT: Duration = Duration::from_millis(100);

/// Tasks (processes and threads) per worker the pids cgroup allows: far
/// more than any plugin's thread pool, far less than a fork bomb.
pub const MAX_TASKS_PER_WORKER: u64 = 1024;

/// How workers are started and supervised.
#[derive(Debug, Clone)]
pub struct Config {
    /// The `arrowcert` executable to run as `arrowcert worker`.
    pub exe: PathBuf,
    /// Arguments after `worker --socket PATH` (plugins, data, options).
    pub worker_args: Vec<String>,
    /// Worker processes at once.
    pub jobs: usize,
    /// A case with no result after this long is a `timeout`.
    pub case_timeout: Duration,
    /// How long a worker may take to load the plugins and report ready.
    pub start_timeout: Duration,
    /// Bytes of captured output kept per case.
    pub output_limit: usize,
    /// Where sockets and capture files live (removed at the end).
    pub scratch: PathBuf,
    /// Preload the allocation tracker ([`crate::plugin::tracker`]) into
    /// every worker: leak accounting, and poison in freed memory.
    pub tracker: bool,
    /// Tasks (processes and threads) the workers may hold at once, through
    /// a pids cgroup where the system allows one (see
    /// [`proc::PidsCgroup`]); `None`: no such bound.
    pub max_tasks: Option<u64>,
    /// The run's pids cgroup, once created (set by [`Pool::new`]).
    pub pids_cgroup: Option<PathBuf>,
    /// Where the scenarios come from (part of `worker_args` too): a kept
    /// worker given another run of its engine plans again over these.
    pub sources: crate::sources::Sources,
    /// `worker_args` without the sources: a kept worker serves a run
    /// whose key is its own.
    pub key: Vec<String>,
    /// Environment variables set for every worker (`certify --malformed`:
    /// the mutation the mutant producer chooses when it loads).
    pub env: Vec<(String, String)>,
    /// A command the worker runs under (`replay --under valgrind`: the
    /// program and its arguments, the worker's command line after them);
    /// empty: the worker runs on its own.
    pub wrapper: Vec<String>,
}

impl Config {
    /// The configuration every command uses: this executable as the
    /// worker, `jobs` workers, a case deadline, and a CPU budget per case of
    /// twice the deadline (so that only several spinning threads hit it
    /// before the deadline does).
    pub fn for_workers(
        mut args: worker::WorkerArgs,
        jobs: usize,
        case_timeout_ms: u64,
        max_memory_mb: u64,
    ) -> std::io::Result<Config> {
        args.limits = proc::Limits::worker(max_memory_mb);
        args.cpu_seconds = Some(case_timeout_ms.div_ceil(1000) * 2 + 1);
        let key = args.key();
        Ok(Config {
            exe: std::env::current_exe()?,
            worker_args: args.to_args(),
            sources: args.sources.clone(),
            key,
            jobs,
            case_timeout: Duration::from_millis(case_timeout_ms),
            start_timeout: Duration::from_secs(60),
            output_limit: 64 * 1024,
            scratch: std::env::temp_dir().join(format!(
                "{}{}",
                proc::SCRATCH_PREFIX,
                std::process::id()
            )),
            tracker: crate::plugin::tracker::enabled(),
            max_tasks: Some(MAX_TASKS_PER_WORKER * jobs.max(1) as u64),
            pids_cgroup: None,
            env: Vec::new(),
            wrapper: Vec::new(),
        })
    }
}

/// What the runs of one engine share: the scratch directory (sockets,
/// capture files, the allocation tracker written into it), the pids
/// cgroup, and the workers kept between runs. A certification runs its
/// cases, then each shrink candidate as a run of its own: a kept worker
/// serves the next run with its plugins still loaded (a Python library is
/// imported once, not once per candidate), planning again over the run's
/// sources. Dropping the pool stops the kept workers and removes the
/// cgroup and the scratch directory.
pub struct Pool {
    scratch: PathBuf,
    pids_cgroup: Option<PathBuf>,
    cgroup: Option<proc::PidsCgroup>,
    /// Whether workers are kept when a run ends (else stopped).
    keep: bool,
    idle: Mutex<Vec<Worker>>,
    /// Workers started, for unique socket and capture file names.
    started: std::sync::atomic::AtomicUsize,
}

impl Pool {
    /// Makes the scratch directory (after removing those of killed runs),
    /// writes the allocation tracker into it and creates the pids cgroup,
    /// as `cfg` says. `keep`: keep workers between runs.
    pub fn new(cfg: &Config, keep: bool) -> Result<Pool, StartError> {
        // Scratch directories of runs that were killed (SIGKILL leaves no
        // one to remove them, unless a worker's watchdog did) go first.
        if let Some(tmp) = cfg.scratch.parent() {
            proc::remove_stale_scratch(tmp);
        }
        {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&cfg.scratch)
                .map_err(|e| StartError(format!("{}: {e}", cfg.scratch.display())))?;
        }
        if cfg.tracker {
            crate::plugin::tracker::install(&cfg.scratch).map_err(|e| {
                StartError(format!(
                    "cannot write the allocation tracker into {}: {e}",
                    cfg.scratch.display()
                ))
            })?;
        }
        // The cgroup lives as long as the pool: workers join it, and
        // dropping it kills whatever they left behind.
        let cgroup = cfg.max_tasks.and_then(proc::PidsCgroup::create);
        Ok(Pool {
            scratch: cfg.scratch.clone(),
            pids_cgroup: cgroup.as_ref().map(|c| c.dir().to_path_buf()),
            cgroup,
            keep,
            idle: Mutex::new(Vec::new()),
            started: Default::default(),
        })
    }

    /// A worker for a run of `cfg` whose plan has `plan_len` cases: a kept
    /// one with the same configuration, planning over the run's sources,
    /// or a new one.
    fn acquire(
        &self,
        cfg: &Config,
        plan_len: usize,
    ) -> Result<(Worker, Vec<PluginIdentity>, usize), StartError> {
        loop {
            let kept = {
                let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
                let at = idle.iter().position(|w| w.key == cfg.key);
                at.map(|i| idle.swap_remove(i))
            };
            let Some(kept) = kept else { break };
            if let Some((w, cases)) = kept.replan(&cfg.sources, cfg.start_timeout) {
                if cases == plan_len {
                    let plugins = w.plugins.clone();
                    return Ok((w, plugins, cases));
                }
                w.stop();
            }
        }
        Worker::start(cfg, &self.next_name(), None)
    }

    /// A name no other worker of this pool has had (its socket, capture
    /// and breadcrumb files are named after it).
    fn next_name(&self) -> String {
        let n = self
            .started
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        format!("worker-{n}")
    }

    /// A new worker for a round trip whose producer crashed in the last
    /// one: its consumer is loaded when a case first calls it, so a producer
    /// that crashes case after case costs no consumer start-up (a Python
    /// library's import, up to half a second) per crash.
    fn start_deferred(
        &self,
        cfg: &Config,
        facts: &protocol::ConsumerFacts,
    ) -> Result<(Worker, Vec<PluginIdentity>, usize), StartError> {
        Worker::start(cfg, &self.next_name(), Some(facts))
    }

    /// A worker whose run ended with it alive: kept for the next run, or
    /// stopped.
    fn release(&self, w: Worker) {
        if self.keep && !w.deferred && proc::interrupted().is_none() {
            self.idle.lock().unwrap_or_else(|e| e.into_inner()).push(w);
        } else {
            w.stop();
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        let idle = std::mem::take(self.idle.get_mut().unwrap_or_else(|e| e.into_inner()));
        for w in idle {
            w.stop();
        }
        drop(self.cgroup.take());
        let _ = std::fs::remove_dir_all(&self.scratch);
    }
}

/// One case to run: its index in the plan, and the record to report if the
/// worker running it dies (ID, path, scenario, replay already filled in).
#[derive(Debug, Clone)]
pub struct Job {
    pub index: usize,
    pub record: Case,
}

/// Why no worker could be started at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartError(pub String);

/// A live worker.
struct Worker {
    child: Child,
    stream: UnixStream,
    reader: BufReader<UnixStream>,
    /// A message line received in part (reads wake up every
    /// [`POLL_EXIT`] to see whether the worker died).
    pending: Vec<u8>,
    capture: PathBuf,
    /// A read handle on `capture`, kept open so that each case costs one
    /// fstat and one read instead of opening the file again.
    capture_file: File,
    /// The plugins it loaded, as it reported them.
    plugins: Vec<PluginIdentity>,
    /// The configuration it was started with ([`Config::key`]) and the
    /// sources it plans over now.
    key: Vec<String>,
    sources: crate::sources::Sources,
    /// Cases in its plan.
    cases: usize,
    /// Its breadcrumb page, and the file behind it.
    crumbs: proc::CrumbPage,
    crumb_file: PathBuf,
    /// A round trip's consumer, as the worker reported it.
    consumer_facts: Option<protocol::ConsumerFacts>,
    /// Started with its consumer deferred: not kept for another run (its
    /// identities are the producer's only).
    deferred: bool,
    /// Cases it answered: a crash after some is confirmed alone
    /// ([`slot_loop`]).
    served: usize,
}

/// `ARROWCERT_PLUGIN_BACKTRACE=1`: workers run with `RUST_BACKTRACE=1`,
/// so a Rust plugin's panic carries a backtrace in the case's output.
pub const PLUGIN_BACKTRACE_ENV: &str = "ARROWCERT_PLUGIN_BACKTRACE";

fn describe_exit(status: ExitStatus) -> String {
    match (status.signal(), status.code()) {
        (Some(sig), _) => format!("killed by {}", proc::signal_name(sig)),
        (None, Some(code)) => format!("exited with code {code}"),
        _ => "ended".into(),
    }
}

/// Reads what was appended to the capture file since `from`, at most
/// `limit` bytes, as lossy UTF-8; `None` if nothing was.
fn output_since(f: &File, from: u64, limit: usize) -> Option<String> {
    output_between(f, from, capture_len(f), limit)
}

/// What the capture file holds in `[from, end)`, at most `limit` bytes, as
/// lossy UTF-8 with a note of how much was dropped; `None` if empty.
fn output_between(mut f: &File, from: u64, end: u64, limit: usize) -> Option<String> {
    if end <= from {
        return None;
    }
    f.seek(SeekFrom::Start(from)).ok()?;
    let mut buf = Vec::with_capacity(limit.min((end - from) as usize));
    f.take((end - from).min(limit as u64))
        .read_to_end(&mut buf)
        .ok()?;
    let mut text = String::from_utf8_lossy(&buf).into_owned();
    let dropped = (end - from).saturating_sub(buf.len() as u64);
    if dropped > 0 {
        text.push_str(&format!("\n[... {dropped} more bytes not kept]"));
    }
    Some(text)
}

/// Bytes of plugin output a whole run keeps in its report (each case keeps
/// at most its `output_limit` of it, first come first kept); past it a
/// case's output is replaced by a note of how much was discarded.
pub const RUN_OUTPUT_BYTES: usize = 4 << 20;

/// `output` if the run's budget still has room for it (`spent` grows by
/// its size), otherwise a note saying how much was discarded.
fn within_run_budget(output: Option<String>, spent: &mut usize, budget: usize) -> Option<String> {
    let text = output?;
    if *spent + text.len() <= budget {
        *spent += text.len();
        return Some(text);
    }
    Some(format!(
        "[{} bytes of output not kept: the run's budget of {} MiB for plugin output in the report is spent]",
        text.len(),
        budget >> 20
    ))
}

fn capture_len(f: &File) -> u64 {
    f.metadata().map(|m| m.len()).unwrap_or(0)
}

/// A case's output, with a note when the worker's capture file is full
/// (proc::WORKER_OUTPUT_BYTES): what the plugin printed past it was
/// discarded, not written to disk.
fn with_limit_note(output: Option<String>, f: &File) -> Option<String> {
    if capture_len(f) < proc::WORKER_OUTPUT_BYTES {
        return output;
    }
    let note = format!(
        "[the worker's output reached its limit of {} MiB: what the plugin printed past it was discarded]",
        proc::WORKER_OUTPUT_BYTES >> 20
    );
    Some(match output {
        Some(text) => format!("{text}\n{note}"),
        None => note,
    })
}

impl Worker {
    /// Starts a worker and waits for it to report ready.
    fn start(
        cfg: &Config,
        name: &str,
        defer: Option<&protocol::ConsumerFacts>,
    ) -> Result<(Worker, Vec<PluginIdentity>, usize), StartError> {
        let socket = cfg.scratch.join(format!("{name}.sock"));
        let capture = cfg.scratch.join(format!("{name}.out"));
        // The worker's breadcrumbs (proc::CrumbPage), read when it dies.
        let crumb_file = worker::crumb_path(&socket);
        let crumbs = proc::CrumbPage::create(&crumb_file)
            .and_then(|_| proc::CrumbPage::map(&crumb_file))
            .map_err(|e| StartError(format!("{}: {e}", crumb_file.display())))?;
        let _ = std::fs::remove_file(&socket);
        let listener = UnixListener::bind(&socket)
            .map_err(|e| StartError(format!("cannot listen on {}: {e}", socket.display())))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| StartError(e.to_string()))?;
        let out = File::create(&capture)
            .map_err(|e| StartError(format!("{}: {e}", capture.display())))?;
        let err = out.try_clone().map_err(|e| StartError(e.to_string()))?;
        let capture_file =
            File::open(&capture).map_err(|e| StartError(format!("{}: {e}", capture.display())))?;
        let mut command = match cfg.wrapper.split_first() {
            Some((program, args)) => {
                let mut c = Command::new(program);
                c.args(args).arg(&cfg.exe);
                c
            }
            None => Command::new(&cfg.exe),
        };
        // A Rust plugin that panics prints its message and location either
        // way; a backtrace on top (RUST_BACKTRACE=1 in the user's shell)
        // costs about 0.35 s of symbolising per crash, which is most of a
        // crash-heavy run's time. Asked for by name only.
        if std::env::var_os(PLUGIN_BACKTRACE_ENV).is_some_and(|v| v == "1") {
            command.env("RUST_BACKTRACE", "1");
        } else {
            command.env("RUST_BACKTRACE", "0");
        }
        if let Some(dir) = &cfg.pids_cgroup {
            command.env(proc::PIDS_CGROUP_ENV, dir);
        }
        command.envs(cfg.env.iter().map(|(k, v)| (k, v)));
        if cfg.tracker {
            // Written by `run` into the private scratch directory.
            let library = cfg.scratch.join(crate::plugin::tracker::FILE_NAME);
            command.env(
                "LD_PRELOAD",
                crate::plugin::tracker::preload_value(&library),
            );
        }
        let mut child = command
            .arg("worker")
            .arg("--socket")
            .arg(&socket)
            .args(&cfg.worker_args)
            .args(defer.map(worker::defer_args).unwrap_or_default())
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .process_group(0)
            .spawn()
            .map_err(|e| StartError(format!("cannot start {}: {e}", cfg.exe.display())))?;

        let deadline = Instant::now() + cfg.start_timeout;
        let died = |child: &mut Child, capture: &File| -> StartError {
            let status = child.wait().map(describe_exit).unwrap_or_default();
            proc::kill_group(child.id());
            let output = output_since(capture, 0, 4096).unwrap_or_default();
            StartError(format!(
                "the worker {status} while loading the plugins{}",
                if output.trim().is_empty() {
                    String::new()
                } else {
                    format!(": {}", output.trim())
                }
            ))
        };
        let stream = loop {
            match listener.accept() {
                Ok((s, _)) => break s,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if let Ok(Some(_)) = child.try_wait() {
                        let _ = std::fs::remove_file(&socket);
                        return Err(died(&mut child, &capture_file));
                    }
                    if Instant::now() > deadline {
                        proc::kill_group(child.id());
                        let _ = child.wait();
                        let _ = std::fs::remove_file(&socket);
                        return Err(StartError("the worker did not connect in time".into()));
                    }
                    std::thread::sleep(Duration::from_millis(2));
                }
                Err(e) => return Err(StartError(format!("accept: {e}"))),
            }
        };
        let _ = std::fs::remove_file(&socket);
        let setup = stream
            .set_nonblocking(false)
            .and_then(|_| stream.set_read_timeout(Some(cfg.start_timeout)))
            .and_then(|_| stream.try_clone());
        let reader = match setup {
            Ok(r) => BufReader::new(r),
            Err(e) => return Err(StartError(e.to_string())),
        };
        let mut worker = Worker {
            child,
            stream,
            reader,
            pending: Vec::new(),
            capture,
            capture_file,
            plugins: Vec::new(),
            key: cfg.key.clone(),
            sources: cfg.sources.clone(),
            cases: 0,
            consumer_facts: None,
            deferred: defer.is_some(),
            served: 0,
            crumbs,
            crumb_file,
        };
        match worker.read_message() {
            Ok(Some(FromWorker::Ready {
                plugins,
                cases,
                consumer_facts,
            })) => {
                worker.plugins = plugins.clone();
                worker.cases = cases;
                worker.consumer_facts = consumer_facts;
                Ok((worker, plugins, cases))
            }
            Ok(Some(FromWorker::Fatal { message })) => {
                worker.stop();
                Err(StartError(message))
            }
            Ok(Some(
                FromWorker::Done { .. } | FromWorker::Step { .. } | FromWorker::HarnessPanic { .. },
            )) => {
                worker.stop();
                Err(StartError(
                    "the worker sent a result before it was ready".into(),
                ))
            }
            Ok(None) | Err(_) => {
                let e = died(&mut worker.child, &worker.capture_file);
                Err(e)
            }
        }
    }

    /// The next message; `Ok(None)` when the worker closed the socket.
    fn read_message(&mut self) -> std::io::Result<Option<FromWorker>> {
        // read_until keeps what it read before a timeout in `pending`, so
        // a line that arrives in parts is never lost.
        self.reader.read_until(b'\n', &mut self.pending)?;
        if self.pending.last() != Some(&b'\n') {
            return Ok(None); // end of stream (mid-line or not)
        }
        let line = std::mem::take(&mut self.pending);
        serde_json::from_slice(&line)
            .map(Some)
            .map_err(std::io::Error::other)
    }

    /// Sends the request for `job` (the worker runs requests in order).
    fn send(&mut self, job: &Job) -> std::io::Result<()> {
        self.request(&ToWorker::Case {
            index: job.index,
            id: job.record.id.clone(),
        })
    }

    fn request(&mut self, request: &ToWorker) -> std::io::Result<()> {
        let mut line = serde_json::to_string(request).map_err(std::io::Error::other)?;
        line.push('\n');
        self.stream.write_all(line.as_bytes())
    }

    /// A kept worker, given a run over `sources`: it plans again (plugins
    /// loaded) and says how many cases its plan has. `None` when it is not
    /// alive and well (it is stopped then; a fresh one takes its place).
    fn replan(
        mut self,
        sources: &crate::sources::Sources,
        timeout: Duration,
    ) -> Option<(Worker, usize)> {
        if !matches!(self.child.try_wait(), Ok(None)) {
            return None;
        }
        if &self.sources == sources {
            // Same plan: the worker already has it. Ask nothing.
            let cases = self.cases;
            return Some((self, cases));
        }
        let asked = self.stream.set_read_timeout(Some(timeout)).and_then(|_| {
            self.request(&ToWorker::Plan {
                sources: sources.clone(),
            })
        });
        if asked.is_err() {
            self.stop();
            return None;
        }
        match self.read_message() {
            Ok(Some(FromWorker::Ready { cases, .. })) => {
                self.sources = sources.clone();
                self.cases = cases;
                Some((self, cases))
            }
            _ => {
                self.stop();
                None
            }
        }
    }

    /// Waits for the answer to the oldest request in flight, `job`, until
    /// `deadline`. `output_from` is where that case's output starts in the
    /// capture file. On `Err` the worker is dead (killed here) and `job` has
    /// its crash or timeout verdict.
    fn answer(
        &mut self,
        job: &Job,
        started: Instant,
        deadline: Instant,
        output_from: u64,
        cfg: &Config,
    ) -> Result<Answer, Failed> {
        // Breadcrumbs come first: the last one names the step a crash or
        // a hang happened in.
        let mut step: Option<String> = None;
        // A panic of arrowcert's code the worker told of: if the worker
        // then dies, that is why (a harness error, not a plugin crash).
        let mut panicked: Option<String> = None;
        let answer = loop {
            let wait = deadline
                .saturating_duration_since(Instant::now())
                .clamp(Duration::from_millis(1), POLL_EXIT);
            match self
                .stream
                .set_read_timeout(Some(wait))
                .and_then(|_| self.read_message())
            {
                Ok(Some(FromWorker::Step { step: s })) => step = Some(s),
                Ok(Some(FromWorker::HarnessPanic { message })) => panicked = Some(message),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    if Instant::now() >= deadline {
                        break Err(e);
                    }
                    // A worker that died while processes it forked still
                    // hold its socket open sends no end of stream: notice
                    // the exit itself.
                    if matches!(self.child.try_wait(), Ok(Some(_))) {
                        break Ok(None);
                    }
                }
                other => break other,
            }
        };
        let step = step.or_else(|| self.crumbs.read());
        let during = step
            .as_deref()
            .map(|s| format!(", during `{}`", crate::report::bounded(s, 200)))
            .unwrap_or_default();
        let limit = cfg.output_limit;
        let mut failed = job.record.clone();
        failed.duration_us = started.elapsed().as_micros() as u64;
        match answer {
            Ok(Some(FromWorker::Done {
                case,
                output_end,
                retire,
                amended,
            })) => {
                let mut case = *case;
                let end = output_end.unwrap_or_else(|| capture_len(&self.capture_file));
                case.output = with_limit_note(
                    output_between(&self.capture_file, output_from, end, limit),
                    &self.capture_file,
                );
                Ok(Answer {
                    case,
                    output_end: end.max(output_from),
                    retire,
                    amended,
                })
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                proc::kill_group(self.child.id());
                let _ = self.child.wait();
                failed.verdict = Verdict::Timeout;
                failed.message = Some(format!(
                    "no result within {:.1}s; the worker was killed{during}",
                    cfg.case_timeout.as_secs_f64()
                ));
                failed.output = with_limit_note(
                    output_since(&self.capture_file, output_from, limit),
                    &self.capture_file,
                );
                Err(Failed {
                    case: Box::new(failed),
                    step,
                })
            }
            other => {
                // EOF, a broken socket, a Fatal message or garbage: the
                // worker is gone or unusable. Give it a moment to exit so
                // that its status says how it died.
                let status = self.wait_briefly();
                proc::kill_group(self.child.id());
                if let Some(text) = panicked {
                    failed.verdict = Verdict::HarnessError;
                    failed.message = Some(format!(
                        "{} (the worker {} after it)",
                        panic::harness_error_message(&text),
                        status
                            .map(describe_exit)
                            .unwrap_or_else(|| "stopped answering".into())
                    ));
                    failed.output = with_limit_note(
                        output_since(&self.capture_file, output_from, limit),
                        &self.capture_file,
                    );
                    return Err(Failed {
                        case: Box::new(failed),
                        step: None,
                    });
                }
                failed.verdict = Verdict::Crash;
                let gave_up = matches!(other, Ok(Some(FromWorker::Fatal { .. })));
                failed.message = Some(match other {
                    Ok(Some(FromWorker::Fatal { message })) => {
                        format!("the worker gave up: {message}")
                    }
                    _ => format!(
                        "the worker {} in the middle of the case{during}",
                        status
                            .map(describe_exit)
                            .unwrap_or_else(|| "stopped answering".into())
                    ),
                });
                failed.output = with_limit_note(
                    output_since(&self.capture_file, output_from, limit),
                    &self.capture_file,
                );
                Err(Failed {
                    case: Box::new(failed),
                    step: step.filter(|_| !gave_up),
                })
            }
        }
    }

    fn wait_briefly(&mut self) -> Option<ExitStatus> {
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            match self.child.try_wait() {
                Ok(Some(s)) => return Some(s),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5))
                }
                _ => {
                    proc::kill_group(self.child.id());
                    return self.child.wait().ok();
                }
            }
        }
    }

    /// Ends a healthy worker: closing the socket ends its loop; anything
    /// left of its process group afterwards is killed.
    fn stop(mut self) {
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
        let _ = self.wait_briefly();
        proc::kill_group(self.child.id());
        let _ = std::fs::remove_file(&self.capture);
    }
}

impl Drop for Worker {
    /// A worker's capture file goes with it, however it ended: a run that
    /// replaces crashed workers keeps one file per live worker.
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.capture);
        let _ = std::fs::remove_file(&self.crumb_file);
    }
}

/// A worker's answer for a case.
struct Answer {
    case: Case,
    /// Where the case's output ends in the capture file.
    output_end: u64,
    /// The worker ends after this case, and why.
    retire: Option<String>,
    /// Earlier cases' results, amended.
    amended: Vec<Case>,
}

/// The result of a run in workers.
#[derive(Debug)]
pub struct Outcome {
    /// The loaded plugins, as the first worker reported them.
    pub plugins: Vec<PluginIdentity>,
    /// In plan order; fewer than the jobs when the run was interrupted.
    pub cases: Vec<Case>,
    /// The signal (SIGINT, SIGTERM) that stopped the run early.
    pub interrupted: Option<i32>,
}

/// Requests a worker has at once: the next case is already waiting in the
/// worker when the previous answer is on its way back, which hides the
/// round trip. On a crash only the oldest request is to blame (requests run
/// in order); the others go back to the queue.
const PIPELINE_DEPTH: usize = 4;

/// After this many cases of one path in a row end in a timeout, over at
/// least [`HANG_SCENARIOS`] scenarios, the path hangs: its remaining cases
/// are not run.
pub const HANG_LIMIT: u32 = 3;

/// Scenarios a streak of timeouts must span: a hang on one kind of data
/// (every batch of one scenario) does not condemn the path's other cases.
pub const HANG_SCENARIOS: usize = 2;

pub use crate::report::{path_key, HANGING};

/// Timeouts in a row per path, shared by the worker slots, and the paths
/// found hanging (with the cases that showed it).
#[derive(Default)]
struct Hangs {
    /// Per path: the streak of timeouts (case IDs and scenarios), and
    /// whether it made the path hang.
    by_path: Mutex<std::collections::HashMap<String, Streak>>,
}

#[derive(Default)]
struct Streak {
    cases: Vec<(String, String)>,
    hangs: bool,
}

impl Hangs {
    /// Notes how a case of `key` ended.
    fn record(&self, key: String, case: &Case) {
        let mut m = self.by_path.lock().unwrap_or_else(|e| e.into_inner());
        let streak = m.entry(key).or_default();
        if streak.hangs {
            return;
        }
        if case.verdict != Verdict::Timeout {
            streak.cases.clear();
            return;
        }
        streak.cases.push((case.id.clone(), case.scenario.clone()));
        let mut scenarios: Vec<&str> = streak.cases.iter().map(|(_, s)| s.as_str()).collect();
        scenarios.sort_unstable();
        scenarios.dedup();
        streak.hangs =
            streak.cases.len() >= HANG_LIMIT as usize && scenarios.len() >= HANG_SCENARIOS;
    }

    /// The case `job` would be, not run, when its path hangs.
    fn not_run(&self, job: &Job) -> Option<Case> {
        let key = path_key(&job.record);
        let m = self.by_path.lock().unwrap_or_else(|e| e.into_inner());
        let streak = m.get(&key).filter(|s| s.hangs)?;
        let shown: Vec<&str> = streak.cases.iter().map(|(id, _)| id.as_str()).collect();
        let mut c = job.record.clone();
        c.verdict = Verdict::Timeout;
        c.message = Some(format!(
            "{HANGING}: {} cases of the {key} path in a row timed out ({}), so its remaining cases were not run; replay this one to run it",
            shown.len(),
            shown.join(", ")
        ));
        Some(c)
    }
}

/// How the breadcrumb of a call to a producer's entry point begins.
const PRODUCER_STEP: &str = "arrowcert_produce_";

/// A case that ended its worker (a crash, a hang, a harness error), and
/// the step it was in when the worker died (its last breadcrumb), if any.
struct Failed {
    case: Box<Case>,
    step: Option<String>,
}

/// A case that crashed its worker after `served` other cases and, run
/// again first thing in a fresh worker, did not crash: its verdict is the
/// one it got alone, and its message says what happened before.
fn not_reproduced_alone(case: &mut Case, crash: &Case, served: usize) {
    let note = format!(
        "{NOT_REPRODUCED_ALONE}: it first ended its worker after {served} other case(s) ({}); alone, in a fresh worker, it ended {}: the damage was left by an earlier case of that worker",
        crash.message.as_deref().unwrap_or("a crash"),
        case.verdict.as_str(),
    );
    case.message = Some(match case.message.take() {
        Some(m) => format!("{m} ({note})"),
        None => note,
    });
}

/// A crash confirmed alone: the case crashed again first thing in a fresh
/// worker.
fn crashed_alone_too(case: &mut Case, served: usize) {
    if let Some(m) = case.message.as_mut() {
        m.push_str(&format!(
            " (it crashed after {served} other case(s) of a worker, {CRASHED_ALONE_TOO})"
        ));
    }
}

/// How the note on a crash confirmed alone ends.
const CRASHED_ALONE_TOO: &str = "and again alone, in a fresh worker";

/// Whether `case` crashed after other cases of a worker and again when run
/// alone in a fresh worker: it has been run twice already, the second time
/// in a fresh worker, as `--repeat` would run it (which counts that run as
/// its first repetition).
pub fn crash_confirmed_alone(case: &Case) -> bool {
    case.verdict == crate::report::Verdict::Crash
        && case
            .message
            .as_deref()
            .and_then(|m| m.strip_suffix(')'))
            .is_some_and(|m| m.ends_with(CRASHED_ALONE_TOO))
}

/// How the note on a case that crashed only after other cases begins.
pub const NOT_REPRODUCED_ALONE: &str = "a crash not reproduced alone";

/// The job slot loop: runs jobs from `queue` in a worker of its own until
/// the queue is empty or the run is interrupted.
#[allow(clippy::too_many_arguments)]
fn slot_loop(
    cfg: &Config,
    pool: &Pool,
    plan_len: usize,
    mut worker: Option<Worker>,
    queue: &Mutex<VecDeque<Job>>,
    live: &Mutex<Vec<u32>>,
    hangs: &Hangs,
    tx: mpsc::Sender<(Case, bool)>,
) {
    struct InFlight {
        job: Job,
        sent: Instant,
        /// Set on a crashed case run again alone: its first crash.
        first_crash: Option<(Box<Case>, usize)>,
    }
    // A case whose worker died of it after serving other cases runs again
    // first thing in a fresh worker: heap damage an earlier case left (a
    // library's overflow that did not crash where it happened) kills the
    // worker in whatever case comes next, and that case is not to blame.
    let mut isolate: Option<(Job, Box<Case>, usize)> = None;
    let mut inflight: VecDeque<InFlight> = VecDeque::new();
    // Facts of the consumer for the next worker to start deferred.
    let mut defer_next: Option<protocol::ConsumerFacts> = None;
    // When the oldest request in flight began running in the worker, and
    // where its output starts in the capture file.
    let mut head_started = Instant::now();
    let mut output_from = 0u64;
    let forget = |w: &Worker| {
        live.lock()
            .expect("live lock")
            .retain(|p| *p != w.child.id())
    };
    loop {
        if proc::interrupted().is_some() {
            break;
        }
        // Fill the pipeline.
        while inflight.len() < PIPELINE_DEPTH {
            let (job, first_crash) = match isolate.take() {
                Some((job, crash, served)) => (job, Some((crash, served))),
                None => {
                    let Some(job) = queue.lock().expect("queue lock").pop_front() else {
                        break;
                    };
                    (job, None)
                }
            };
            if let Some(c) = hangs.not_run(&job) {
                let _ = tx.send((c, false));
                continue;
            }
            if worker.is_none() {
                let started = match (defer_next.take(), &first_crash) {
                    (Some(facts), _) => pool.start_deferred(cfg, &facts),
                    // Alone means a worker that ran nothing yet: not one
                    // the pool kept from another run.
                    (None, Some(_)) => Worker::start(cfg, &pool.next_name(), None),
                    (None, None) => pool.acquire(cfg, plan_len),
                };
                match started {
                    Ok((w, ..)) => {
                        live.lock().expect("live lock").push(w.child.id());
                        output_from = capture_len(&w.capture_file);
                        worker = Some(w);
                    }
                    Err(StartError(why)) => {
                        let mut c = job.record.clone();
                        c.verdict = Verdict::Crash;
                        c.message = Some(format!("no worker could run this case: {why}"));
                        let _ = tx.send((c, false));
                        continue;
                    }
                }
            }
            let w = worker.as_mut().expect("a worker is running");
            if inflight.is_empty() {
                head_started = Instant::now();
            }
            // A failed send means the worker is gone; the read below finds
            // out how, and blames the oldest request.
            let _ = w.send(&job);
            inflight.push_back(InFlight {
                job,
                sent: Instant::now(),
                first_crash,
            });
        }
        let Some(head) = inflight.front() else { break };
        let w = worker.as_mut().expect("requests in flight have a worker");
        let started = head_started.max(head.sent);
        let deadline = started + cfg.case_timeout;
        match w.answer(&head.job, started, deadline, output_from, cfg) {
            Ok(Answer {
                case,
                output_end,
                retire,
                amended,
            }) => {
                let done = inflight.pop_front().expect("the head request");
                head_started = Instant::now();
                output_from = output_end;
                w.served += 1;
                let mut case = case;
                if let Some((crash, served)) = done.first_crash {
                    not_reproduced_alone(&mut case, &crash, served);
                }
                hangs.record(path_key(&case), &case);
                let _ = tx.send((case, false));
                // Earlier cases a late write was found for: their results
                // again, amended (the receiver replaces them by ID).
                for a in amended {
                    let _ = tx.send((a, true));
                }
                if retire.is_some() {
                    // The worker ends itself (a change a plugin made to its
                    // process cannot be undone): what it was sent after this
                    // case runs in a new one.
                    let done = worker.take().expect("the worker that ran the case");
                    forget(&done);
                    done.stop();
                    let mut q = queue.lock().expect("queue lock");
                    for f in inflight.drain(..).rev() {
                        q.push_front(f.job);
                    }
                }
            }
            Err(Failed { mut case, step }) => {
                let dead = worker.take().expect("the worker that ran the case");
                forget(&dead);
                // The producer crashed (or hung) in its own call: the next
                // worker loads the consumer only when a case calls it.
                let in_producer = step.is_some_and(|s| s.starts_with(PRODUCER_STEP));
                defer_next = dead.consumer_facts.clone().filter(|_| in_producer);
                let _ = std::fs::remove_file(&dead.capture);
                let done = inflight.pop_front().expect("the head request");
                if proc::interrupted().is_some() {
                    // Killed because the run is stopping, not the case's fault.
                    break;
                }
                let mut q = queue.lock().expect("queue lock");
                for f in inflight.drain(..).rev() {
                    q.push_front(f.job);
                }
                drop(q);
                match done.first_crash {
                    Some((_, served)) => crashed_alone_too(&mut case, served),
                    None if case.verdict == Verdict::Crash && dead.served > 0 => {
                        isolate = Some((done.job, case, dead.served));
                        continue;
                    }
                    None => {}
                }
                hangs.record(path_key(&case), &case);
                let _ = tx.send((*case, false));
            }
        }
    }
    if let Some(w) = worker {
        forget(&w);
        pool.release(w);
    }
}

/// Runs `jobs` in worker processes. `on_ready` is called once the first
/// worker has loaded the plugins; `on_case` sees each case as it ends
/// (in completion order); the result is in plan order. `Err` when not even
/// the first worker could start (bad plugins, bad data): nothing ran.
///
/// SIGINT or SIGTERM (see [`proc::catch_interrupts`]) stops the run: no new
/// case starts, workers are killed, the cases in flight are dropped (they
/// did not finish), and the outcome says which signal stopped it.
pub fn run(
    cfg: &Config,
    pool: &Pool,
    plan_len: usize,
    jobs: Vec<Job>,
    on_ready: impl FnOnce(&[PluginIdentity]),
    mut on_case: impl FnMut(&Case),
) -> Result<Outcome, StartError> {
    let mut with_cgroup = cfg.clone();
    with_cgroup.pids_cgroup = pool.pids_cgroup.clone();
    let cfg = &with_cgroup;
    let (first, mut plugins, cases) = pool.acquire(cfg, plan_len)?;
    for p in plugins.iter_mut().filter(|p| p.sha256.is_empty()) {
        p.sha256 = crate::report::sha256_file(Path::new(&p.path)).unwrap_or_default();
    }
    if cases != plan_len {
        first.stop();
        return Err(StartError(format!(
            "the worker planned {cases} cases, the orchestrator {plan_len}"
        )));
    }
    on_ready(&plugins);
    let position: std::collections::HashMap<String, usize> = jobs
        .iter()
        .map(|j| (j.record.id.clone(), j.index))
        .collect();
    let queue = Mutex::new(jobs.into_iter().collect::<VecDeque<Job>>());
    let live = Mutex::new(vec![first.child.id()]);
    let hangs = Hangs::default();
    let (tx, rx) = mpsc::channel::<(Case, bool)>();
    let slots = cfg.jobs.max(1);
    let mut results: Vec<Case> = Vec::new();
    let mut output_spent = 0usize;
    std::thread::scope(|scope| {
        let mut first = Some(first);
        for slot in 0..slots {
            let tx = tx.clone();
            let (queue, live, hangs) = (&queue, &live, &hangs);
            let worker = if slot == 0 { first.take() } else { None };
            scope.spawn(move || slot_loop(cfg, pool, plan_len, worker, queue, live, hangs, tx));
        }
        drop(tx);
        let mut killed = false;
        loop {
            match rx.recv_timeout(Duration::from_millis(50)) {
                Ok((case, amended)) => {
                    let mut case = bound_case(case, cfg.output_limit);
                    case.output =
                        within_run_budget(case.output, &mut output_spent, RUN_OUTPUT_BYTES);
                    on_case(&case);
                    // An amendment replaces the latest result of its case
                    // (a plan may run one ID more than once: benchmarks).
                    let earlier = if amended {
                        results.iter_mut().rev().find(|c| c.id == case.id)
                    } else {
                        None
                    };
                    match earlier {
                        Some(old) => *old = case,
                        None => results.push(case),
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
            if !killed && proc::interrupted().is_some() {
                // Wake every slot blocked on its worker: their reads see the
                // socket close, and they stop.
                killed = true;
                for pid in live.lock().expect("live lock").iter() {
                    proc::kill_group(*pid);
                }
            }
        }
    });
    results.sort_by_key(|c| position.get(&c.id).copied().unwrap_or(usize::MAX));
    Ok(Outcome {
        plugins,
        cases: results,
        interrupted: proc::interrupted(),
    })
}

/// Keeps strings that came from plugins (error messages quoted in
/// `message` and `differences`) bounded in reports; captured output is
/// bounded when it is read.
pub fn bound_case(mut case: Case, limit: usize) -> Case {
    case.message = case.message.map(|m| report::bounded(&m, limit));
    case.differences = case
        .differences
        .into_iter()
        .map(|d| report::bounded(&d, limit))
        .collect();
    case
}

#[cfg(test)]
mod budget_tests {
    use super::within_run_budget;

    #[test]
    fn a_run_keeps_output_up_to_its_budget_then_notes_what_it_discarded() {
        let mut spent = 0;
        assert_eq!(within_run_budget(None, &mut spent, 10 << 20), None);
        let kb = "x".repeat(1024);
        for _ in 0..4 {
            assert_eq!(
                within_run_budget(Some(kb.clone()), &mut spent, 4096).as_deref(),
                Some(kb.as_str())
            );
        }
        assert_eq!(spent, 4096);
        let note = within_run_budget(Some(kb.clone()), &mut spent, 4096).unwrap();
        assert!(note.starts_with("[1024 bytes of output not kept"), "{note}");
        assert_eq!(spent, 4096);
    }
}

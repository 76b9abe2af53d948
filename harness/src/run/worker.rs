//! `arrowcert worker`: loads the plugins once, then runs the cases the
//! orchestrator sends over its socket until the socket closes.

use std::cell::{OnceCell, RefCell};
use std::io::{BufRead, BufReader, Seek, Write};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;

use super::proc::{self, flush_c_stdio, Limits};
use super::protocol::{ConsumerFacts, FromWorker, ToWorker};
use super::suite::Suite;
use crate::plugin::Plugin;
use crate::report::{self, Case, PluginIdentity};
use crate::roundtrip::{ConsumerSide, Options};

/// Why a worker ends whose out-structure arena is spent
/// ([`crate::abi::outslot::WORKER_BUDGET`]).
pub const OUTSLOTS_SPENT: &str = "the worker's out-structure arena is spent";

/// The suites a worker can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `arrowcert roundtrip`: producer -> harness -> consumer.
    Roundtrip,
    /// `arrowcert certify`: the harness judges the producer and/or the
    /// consumer it is given.
    Certify,
    /// `arrowcert certify --dlpack` and `dlpack-matrix`: a Python library's
    /// DLPack exchange through its adapter: a suite from above this module
    /// ([`WorkerArgs::plan`], [`WorkerArgs::open`]).
    Dlpack,
    /// `arrowcert certify --cai`: a Python library's CUDA Array Interface
    /// through its adapter (a pair's two): a suite from above, as DLPack.
    Cai,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Roundtrip => "roundtrip",
            Mode::Certify => "certify",
            Mode::Dlpack => "dlpack",
            Mode::Cai => "cai",
        }
    }
    pub fn parse(s: &str) -> Option<Mode> {
        [Mode::Roundtrip, Mode::Certify, Mode::Dlpack, Mode::Cai]
            .into_iter()
            .find(|m| m.name() == s)
    }
}

/// What a worker needs to know; passed on its command line.
#[derive(Debug, Clone)]
pub struct WorkerArgs {
    pub socket: PathBuf,
    /// What the worker runs.
    pub mode: Mode,
    /// The producer (always for roundtrip; certify: when its side runs).
    pub producer: Option<PathBuf>,
    /// The consumer (roundtrip; certify: when its side runs).
    pub consumer: Option<PathBuf>,
    pub sources: crate::sources::Sources,
    pub options: Options,
    pub limits: Limits,
    /// CPU seconds each case may use (soft RLIMIT_CPU, renewed per case).
    pub cpu_seconds: Option<u64>,
    /// A round trip's consumer is loaded when a case first calls it; until
    /// then the cases see these facts of it (a worker restarted after the
    /// producer crashed: the orchestrator passes them).
    pub defer_consumer: Option<ConsumerFacts>,
    /// A suite that lives above this module (DLPack: `Mode::Dlpack`): what
    /// it is given (JSON, its own), passed on as `--plan`.
    pub plan: Option<String>,
    /// How the worker opens that suite from `plan` (set by the `worker`
    /// command; the orchestrator passes only `plan`).
    pub open: Option<Opener>,
    /// How the worker makes the suite of each plan in the modes whose cases
    /// run the plugins it loaded (certify, roundtrip): set by the `worker`
    /// command (`engine::suites`); the orchestrator passes only `mode`.
    /// This module knows those cases only through [`Suite`].
    pub suites: Option<SuiteMaker>,
}

/// Opens a suite that lives above this module from its `--plan` JSON: its
/// libraries loaded, its cases planned. `Err`: one line saying why not.
pub type Opener = fn(Mode, &str) -> Result<Box<dyn Suite>, String>;

/// Makes the suite of a plan over `scenarios` (with their seed) for the
/// plugins a worker loaded, in `mode`, with the run's options. `Err`: the
/// message of the fatal error (a mode without the plugins it needs).
pub type SuiteMaker = for<'a> fn(
    Mode,
    &'a [crate::scenario::Scenario],
    u64,
    Loaded<'a>,
    &'a Options,
) -> Result<Box<dyn Suite + 'a>, String>;

impl WorkerArgs {
    /// The command line after `worker --socket PATH` that recreates these
    /// arguments (the orchestrator passes it to every worker it starts).
    pub fn to_args(&self) -> Vec<String> {
        let abs = |p: &PathBuf| {
            std::fs::canonicalize(p)
                .unwrap_or_else(|_| p.clone())
                .display()
                .to_string()
        };
        let mut args = vec![
            "--mode".to_string(),
            self.mode.name().to_string(),
            "--timeout-ms".to_string(),
            self.options.async_timeout_ms.to_string(),
            "--replay-prefix".to_string(),
            self.options.replay_prefix.clone(),
            "--max-memory-mb".to_string(),
            self.limits.memory_mb().to_string(),
        ];
        if let Some(p) = &self.producer {
            args.push("--producer".into());
            args.push(abs(p));
        }
        if let Some(c) = &self.consumer {
            args.push("--consumer".into());
            args.push(abs(c));
        }
        if self.options.all_leaks {
            args.push("--all-leaks".into());
        }
        if let Some(secs) = self.cpu_seconds {
            args.push("--case-cpu-seconds".into());
            args.push(secs.to_string());
        }
        args.extend(self.sources.to_args());
        if let Some(facts) = &self.defer_consumer {
            args.extend(defer_args(facts));
        }
        if let Some(plan) = &self.plan {
            args.push("--plan".into());
            args.push(plan.clone());
        }
        args
    }

    /// The arguments without the sources: a kept worker serves any run
    /// whose key is its own, planning again over that run's sources
    /// ([`super::Config::key`]).
    pub fn key(&self) -> Vec<String> {
        WorkerArgs {
            sources: Default::default(),
            ..self.clone()
        }
        .to_args()
    }
}

/// The breadcrumb of a deferred consumer's loading: a crash in it is the
/// consumer's start-up, not the producer call before it.
pub const LOADING_CONSUMER: &str = "loading the consumer (deferred after the producer crashed)";

/// A round trip's consumer in a worker restarted after the producer
/// crashed: loaded when a case first calls it. Until then its cases see the
/// facts the first worker reported of it.
struct Deferred<'a> {
    path: PathBuf,
    facts: ConsumerFacts,
    loaded: OnceCell<Plugin>,
    /// The state the worker puts back after each case.
    state: &'a RefCell<proc::ProcessState>,
}

impl ConsumerSide for Deferred<'_> {
    fn has(&self, symbol: &str) -> bool {
        match self.loaded.get() {
            Some(p) => p.has(symbol),
            None => self.facts.entry_points.iter().any(|e| e == symbol),
        }
    }
    fn supports_device(&self, device_type: i32) -> bool {
        match self.loaded.get() {
            Some(p) => p.supports_device(device_type),
            None if device_type == self.facts.device_type => self.facts.supports_device,
            None => self.plugin().is_ok_and(|p| p.supports_device(device_type)),
        }
    }
    fn plugin(&self) -> Result<&Plugin, String> {
        if let Some(p) = self.loaded.get() {
            return Ok(p);
        }
        // What the producer changed in this process during the case is put
        // back now, as it would be after the case; the consumer's own
        // start-up changes are then part of the state later cases start
        // from, as in a worker that loaded it first.
        let restored = self.state.borrow().restore();
        if !restored.undone.is_empty() {
            eprintln!(
                "[arrowcert: before the consumer was loaded: {}]",
                restored.undone.join("; ")
            );
        }
        if let Some(stuck) = restored.stuck {
            crate::abi::breadcrumb::taint(stuck.clone());
            return Err(format!("the consumer could not be loaded: {stuck}"));
        }
        crate::abi::breadcrumb::step(LOADING_CONSUMER);
        let p = Plugin::load(&self.path)
            .map_err(|e| format!("the consumer could not be loaded again: {e}"))?;
        *self.state.borrow_mut() = proc::ProcessState::take();
        Ok(self.loaded.get_or_init(|| p))
    }
}

/// The facts of a round trip's consumer that a deferred one is given.
fn facts(consumer: &dyn ConsumerSide, device_type: i32) -> ConsumerFacts {
    let entry_points = crate::plugin::SYMBOLS
        .iter()
        .map(|(name, _)| *name)
        .filter(|name| consumer.has(name))
        .map(String::from)
        .collect();
    ConsumerFacts {
        entry_points,
        device_type,
        supports_device: consumer.supports_device(device_type),
    }
}

/// The breadcrumb page of the worker listening on `socket`
/// ([`proc::CrumbPage`]): beside it, made by the orchestrator.
pub fn crumb_path(socket: &std::path::Path) -> PathBuf {
    socket.with_extension("crumb")
}

/// The worker arguments that defer loading the consumer.
pub fn defer_args(facts: &ConsumerFacts) -> Vec<String> {
    vec![
        "--defer-consumer".into(),
        serde_json::to_string(facts).unwrap_or_default(),
    ]
}

fn send(stream: &mut UnixStream, msg: &FromWorker) -> std::io::Result<()> {
    let mut line = serde_json::to_string(msg).map_err(std::io::Error::other)?;
    line.push('\n');
    stream.write_all(line.as_bytes())
}

/// The identity of a loaded plugin, as reports carry it.
pub fn identity(role: &str, p: &Plugin) -> PluginIdentity {
    PluginIdentity {
        sha256: report::sha256_file(p.path()).unwrap_or_default(),
        ..unhashed_identity(role, p)
    }
}

/// A worker's report of a plugin it loaded: its identity less the SHA-256,
/// which the orchestrator adds (`run::run`). A worker starts again after
/// every crash, and hashing a 65 MB debug build of a plugin there was two
/// fifths of a crash-heavy round trip's time.
fn unhashed_identity(role: &str, p: &Plugin) -> PluginIdentity {
    PluginIdentity {
        role: role.into(),
        name: report::bounded(p.name(), 256),
        path: p.path().display().to_string(),
        sha256: String::new(),
        abi_version: p.abi_version(),
        entry_points: p.symbols().iter().map(|s| s.to_string()).collect(),
    }
}

/// Tells the orchestrator of a fatal error; the worker's exit code.
fn fatal(stream: &mut UnixStream, message: String) -> i32 {
    let _ = send(stream, &FromWorker::Fatal { message });
    2
}

/// Runs the worker; returns the process exit code.
pub fn run(args: WorkerArgs) -> i32 {
    let mut stream = match UnixStream::connect(&args.socket) {
        Ok(s) => s,
        Err(e) => {
            eprintln!(
                "arrowcert worker: cannot connect to {}: {e}",
                args.socket.display()
            );
            return 2;
        }
    };
    if let Err(message) = set_up_process(&args) {
        return fatal(&mut stream, message);
    }
    let (producer, consumer, deferred) = match load_plugins(&args) {
        Ok(loaded) => loaded,
        Err(message) => return fatal(&mut stream, message),
    };
    let plugins = identities(producer.as_ref(), consumer.as_ref());
    // A handle on our stdout (the capture file): its position, shared with
    // fd 1, tells the orchestrator where each case's output ends.
    let capture = std::io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .ok()
        .map(std::fs::File::from);
    let me = std::process::id();
    // Breadcrumbs go into the page the orchestrator made beside the socket
    // (a store per crumb); a worker started by hand without one sends them
    // as messages.
    let page = proc::CrumbPage::map(&crumb_path(&args.socket))
        .ok()
        .map(std::sync::Arc::new);
    install_breadcrumbs(page.clone(), &stream, me);
    // A panic of arrowcert's code that cannot unwind to the case (one in
    // a callback a plugin called aborts) is told to the orchestrator
    // first, so the worker's death is a harness error, not a crash.
    install_panic_notes(&stream, me);
    let mut reader = match stream.try_clone() {
        Ok(s) => BufReader::new(s),
        Err(_) => return 2,
    };
    // What the plugins may change in this process and the next case must
    // not inherit: taken once the plugins are loaded (their own start-up
    // changes are theirs to keep).
    let state = RefCell::new(proc::ProcessState::take());
    let deferred = deferred.map(|(path, facts)| Deferred {
        path,
        facts,
        loaded: OnceCell::new(),
        state: &state,
    });
    let consumer_side: Option<&dyn ConsumerSide> = match (&consumer, &deferred) {
        (Some(c), _) => Some(c),
        (None, Some(d)) => Some(d),
        (None, None) => None,
    };
    let consumer_facts = match (args.mode, &consumer_side) {
        (Mode::Roundtrip, Some(c)) => Some(facts(*c, args.options.device_type)),
        _ => None,
    };
    let above = match open_above(&args) {
        Ok(above) => above,
        Err(message) => return fatal(&mut stream, message),
    };
    // The results of the last cases, as sent: a late write found later
    // amends them.
    let mut recent: std::collections::VecDeque<Case> = std::collections::VecDeque::new();
    let mut sources = args.sources.clone();
    let mut line = String::new();
    'plan: loop {
        // The scratch directory (the socket's) is this run's alone.
        let scenarios = match sources.load_cached(args.socket.parent()) {
            Ok(s) => s,
            Err(message) => {
                return fatal(&mut stream, message);
            }
        };
        // The suite of this run: a runner answers None for a case it does
        // not know.
        let made = match (&above, args.suites) {
            (Some(above), _) => Ok(Box::new(above.as_ref()) as Box<dyn Suite + '_>),
            (None, Some(make)) => make(
                args.mode,
                &scenarios,
                sources.seed,
                Loaded {
                    producer: producer.as_ref(),
                    consumer: consumer.as_ref(),
                    consumer_side,
                },
                &args.options,
            ),
            (None, None) => Err(format!(
                "a {} worker is given no suites (the worker command sets them)",
                args.mode.name()
            )),
        };
        let suite = match made {
            Ok(s) => s,
            Err(message) => return fatal(&mut stream, message),
        };
        let ids = suite.ids();
        let ready = FromWorker::Ready {
            plugins: plugins.clone(),
            cases: ids.len(),
            consumer_facts: consumer_facts.clone(),
        };
        flush_c_stdio();
        if send(&mut stream, &ready).is_err() {
            return 2;
        }
        // Another plan's cases are not this plan's to amend (a late write
        // found now still retires the worker).
        recent.clear();
        loop {
            let msg = match next_request(&mut reader, &mut line, suite.quick_exit()) {
                Ok(m) => m,
                Err(None) => return 0,
                Err(Some(message)) => return fatal(&mut stream, message),
            };
            let (index, id) = match msg {
                // Another run of the same engine: plan again, plugins loaded.
                ToWorker::Plan { sources: next } => {
                    sources = next;
                    continue 'plan;
                }
                ToWorker::Case { index, id } => (index, id),
            };
            if let Some(secs) = args.cpu_seconds {
                let _ = proc::cpu_budget(secs);
            }
            if let Some(page) = &page {
                page.clear(); // the last case's crumbs are not this one's
            }
            let Some(case) = suite.run(index, &id) else {
                return fatal(
                    &mut stream,
                    format!("case {index} is not {id} in this worker's plan"),
                );
            };
            if std::process::id() != me {
                // A plugin forked and its child came back into our code: it
                // must not answer (or read) on the orchestrator's socket.
                proc::exit_now(0);
            }
            let Settled {
                amended,
                retire,
                output_end,
            } = settle(&state, &mut recent, &case, capture.as_ref());
            if send(
                &mut stream,
                &FromWorker::Done {
                    case: Box::new(case),
                    output_end,
                    retire: retire.clone(),
                    amended,
                },
            )
            .is_err()
                || retire.is_some()
            {
                if suite.quick_exit() {
                    // A thread the library left stuck may hold the GIL:
                    // exit code that waits for it would never return.
                    proc::exit_now(0);
                }
                return 0;
            }
        }
    }
}

/// The loaded plugins' identities, by role (unhashed: the orchestrator
/// hashes the files once).
fn identities(producer: Option<&Plugin>, consumer: Option<&Plugin>) -> Vec<PluginIdentity> {
    let producer = producer.map(|p| unhashed_identity("producer", p));
    let consumer = consumer.map(|c| unhashed_identity("consumer", c));
    producer.into_iter().chain(consumer).collect()
}

/// A suite from above (DLPack), opened once from the worker's `--plan`:
/// its libraries loaded once (its plan does not depend on the run's
/// sources). `None` in the other modes; `Err` is the message of the fatal
/// error.
fn open_above(args: &WorkerArgs) -> Result<Option<Box<dyn Suite>>, String> {
    match (args.mode, &args.plan, args.open) {
        (Mode::Dlpack | Mode::Cai, Some(plan), Some(open)) => open(args.mode, plan).map(Some),
        (Mode::Dlpack | Mode::Cai, _, _) => {
            Err(format!("a {} worker needs --plan", args.mode.name()))
        }
        _ => Ok(None),
    }
}

/// The plugins a worker loads before its first case: the producer, and the
/// consumer unless a round trip's consumer is deferred (loaded by the
/// first case that calls it: its path and the facts its cases see until
/// then). `Err` is the message of the fatal error.
#[allow(clippy::type_complexity)]
fn load_plugins(
    args: &WorkerArgs,
) -> Result<
    (
        Option<Plugin>,
        Option<Plugin>,
        Option<(PathBuf, ConsumerFacts)>,
    ),
    String,
> {
    let load = |p: &Option<PathBuf>| p.as_ref().map(|p| Plugin::load(p)).transpose();
    // A round trip's consumer given as deferred is loaded by the first case
    // that calls it (below).
    let deferred = match (args.mode, &args.defer_consumer, &args.consumer) {
        (Mode::Roundtrip, Some(facts), Some(path)) => Some((path.clone(), facts.clone())),
        _ => None,
    };
    let loaded = load(&args.producer).and_then(|p| {
        if deferred.is_some() {
            Ok((p, None))
        } else {
            load(&args.consumer).map(|c| (p, c))
        }
    });
    let (producer, consumer) = loaded.map_err(|e| e.to_string())?;
    Ok((producer, consumer, deferred))
}

/// The orchestrator's next request. `Err(None)`: the socket closed (the
/// run is over; a suite that must exit at once has exited); `Err(Some)`:
/// a request the worker cannot read, the message of the fatal error.
fn next_request(
    reader: &mut impl BufRead,
    line: &mut String,
    quick_exit: bool,
) -> Result<ToWorker, Option<String>> {
    line.clear();
    match reader.read_line(line) {
        Ok(0) | Err(_) if quick_exit => proc::exit_now(0),
        Ok(0) | Err(_) => return Err(None),
        Ok(_) => {}
    }
    serde_json::from_str(line).map_err(|e| Some(format!("bad request: {e}")))
}

/// What a case left behind, settled before its result is sent.
struct Settled {
    /// Earlier cases that late writes found now amend.
    amended: Vec<Case>,
    /// Why the worker ends after this case, if it does.
    retire: Option<String>,
    /// Where the case's output ends in the capture file.
    output_end: Option<u64>,
}

/// After a case: the process state the plugins changed is put back, late
/// writes into structures earlier cases' calls filled amend those cases
/// (`recent`, which `case` joins), and whether the worker must end (a
/// thread left stuck, a taint, a late write, the out-structure arena
/// spent) is decided; what was undone is said in the case's output.
fn settle(
    state: &RefCell<proc::ProcessState>,
    recent: &mut std::collections::VecDeque<Case>,
    case: &Case,
    capture: Option<&std::fs::File>,
) -> Settled {
    flush_c_stdio();
    let restored = state.borrow().restore();
    // Late writes into structures earlier cases' calls had filled:
    // those cases' results are amended (the plugin's threads still
    // run, so the worker ends after this case).
    let late = crate::abi::outslot::take_earlier();
    let amended = amended(recent, &late);
    let retire = restored
        .stuck
        .clone()
        .or_else(crate::abi::breadcrumb::take_taint)
        .or_else(|| {
            (!late.is_empty()).then(|| {
                "a thread of the plugin wrote into a structure an earlier case's call had filled"
                    .to_string()
            })
        });
    if !restored.undone.is_empty() || retire.is_some() {
        // Into the capture file (descriptor 2 is restored by now): the
        // case's output carries it.
        let mut said = restored.undone;
        said.extend(
            retire
                .iter()
                .map(|r| format!("{r}: the worker ends after this case")),
        );
        eprintln!(
            "[arrowcert: after this case's plugin calls: {}]",
            said.join("; ")
        );
    }
    let output_end = capture.and_then(|mut f| f.stream_position().ok());
    for a in &amended {
        if let Some(r) = recent.iter_mut().find(|c| c.id == a.id) {
            *r = a.clone();
        }
    }
    recent.push_back(case.clone());
    while recent.len() > crate::abi::outslot::WINDOW {
        recent.pop_front();
    }
    // A worker whose out-structure arena is spent ends quietly: the
    // next one starts with an empty arena (slots are never reused).
    let spent = retire.is_none() && crate::abi::outslot::spent();
    let retire = retire.or_else(|| spent.then(|| OUTSLOTS_SPENT.to_string()));
    Settled {
        amended,
        retire,
        output_end,
    }
}

/// The plugins a worker loaded (the consumer side: the consumer, or a
/// round trip's deferred one), for the suite a [`SuiteMaker`] makes.
pub struct Loaded<'a> {
    pub producer: Option<&'a Plugin>,
    pub consumer: Option<&'a Plugin>,
    pub consumer_side: Option<&'a dyn ConsumerSide>,
}

/// Readies the worker process before any plugin code runs: it dies with the
/// orchestrator, joins the run's pids cgroup, and takes the run's resource
/// limits; `Err` is the message of the fatal error.
fn set_up_process(args: &WorkerArgs) -> Result<(), String> {
    // Ends with the orchestrator, however it ends, before any plugin code
    // runs (a plugin may hang this process in a call forever). Only a run's
    // own scratch directory is ever removed (never whatever directory a
    // hand-given --socket happens to be in).
    let scratch = args
        .socket
        .parent()
        .filter(|d| {
            d.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(proc::SCRATCH_PREFIX))
        })
        .map(PathBuf::from);
    if let Err(e) = proc::die_with_parent(scratch) {
        return Err(format!("cannot watch the orchestrator: {e}"));
    }
    // Into the run's pids cgroup before any plugin code runs (where the
    // orchestrator could make one).
    if let Some(dir) = std::env::var_os(proc::PIDS_CGROUP_ENV) {
        if let Err(e) = proc::join_pids_cgroup(std::path::Path::new(&dir)) {
            return Err(format!(
                "cannot join the pids cgroup {}: {e}",
                dir.to_string_lossy()
            ));
        }
    }
    if let Err(e) = args.limits.apply() {
        return Err(format!("cannot set resource limits: {e}"));
    }
    Ok(())
}

/// Where the breadcrumbs of plugin calls go: the orchestrator's page
/// (`page`), or, for a worker started by hand without one, messages on
/// `stream`. A forked child of a plugin reports none (`me` is this process).
fn install_breadcrumbs(
    page: Option<std::sync::Arc<proc::CrumbPage>>,
    stream: &UnixStream,
    me: u32,
) {
    if let Some(page) = page {
        let writer = std::sync::Mutex::new(());
        crate::abi::breadcrumb::install(move |step| {
            if std::process::id() != me {
                return; // a forked child of a plugin: not ours to report
            }
            let _serialized = writer.lock();
            page.write(step);
        });
    } else if let Ok(crumbs) = stream.try_clone() {
        let crumbs = std::sync::Mutex::new(crumbs);
        crate::abi::breadcrumb::install(move |step| {
            if std::process::id() != me {
                return; // a forked child of a plugin: not ours to report
            }
            let msg = FromWorker::Step {
                step: step.to_string(),
            };
            if let Ok(mut s) = crumbs.lock() {
                let _ = send(&mut s, &msg);
            }
        });
    }
}

/// The panic hook, telling the orchestrator of a panic on `stream` (not
/// from a forked child of a plugin: `me` is this process).
fn install_panic_notes(stream: &UnixStream, me: u32) {
    super::panic::install_hook();
    if let Ok(notes) = stream.try_clone() {
        let notes = std::sync::Mutex::new(notes);
        super::panic::set_notify(move |text| {
            if std::process::id() != me {
                return;
            }
            if let Ok(mut s) = notes.lock() {
                let _ = send(
                    &mut s,
                    &FromWorker::HarnessPanic {
                        message: text.to_string(),
                    },
                );
            }
        });
    }
}

/// The earlier cases (of `recent`) that the late writes `late` amend,
/// each charged with its late writes.
fn amended(
    recent: &std::collections::VecDeque<Case>,
    late: &[crate::abi::outslot::Damage],
) -> Vec<Case> {
    let mut amended: Vec<Case> = Vec::new();
    for d in late {
        let Some(earlier) = recent.iter().find(|c| c.id == d.case) else {
            continue;
        };
        let at = match amended.iter().position(|c| c.id == d.case) {
            Some(i) => i,
            None => {
                amended.push(earlier.clone());
                amended.len() - 1
            }
        };
        crate::run::late::charge(&mut amended[at], std::slice::from_ref(d));
    }
    amended
}

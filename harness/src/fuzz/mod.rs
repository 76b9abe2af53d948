//! Fuzzing oracles: what each cargo-fuzz target in `fuzz/` checks.
//!
//! A target is three lines (`fuzz/fuzz_targets/*.rs`): it hands its bytes
//! to [`fuzz`] with its [`Target`]. Everything else lives here, so the same
//! oracle runs under libFuzzer, in `arrowcert replay --fuzz` (one artifact,
//! every violation printed) and in the tests:
//!
//! - [`Target::Validate`]: bytes become a structurally sound but otherwise
//!   arbitrary schema and array ([`validate`]); the harness's validator and
//!   arrow-rs (`from_ffi`, then `validate_full`) must agree on it.
//! - [`Target::Consumer`]: bytes become a scenario and an encoding variation
//!   or error path; the consumer plugin imports it and every consumer rule
//!   is checked (the certification case of that kind, [`cases`]).
//! - [`Target::Producer`]: bytes become a scenario and a call schedule; the
//!   producer plugin is certified on it ([`cases`], [`producer`]).
//! - [`Target::Async`]: bytes become an async schedule and a delivery; both
//!   sides' async rules are checked.
//! - [`Target::DlpackReader`]: bytes become a DLPack managed tensor with
//!   arbitrary members and pointers; the harness's capsule reader must read
//!   exactly what is there, and never crash ([`dlpack`]).
//!
//! Inputs read their choices first and their scenario last ([`input`]), so
//! a seed file can be an IPC stream behind a few header bytes.
//!
//! An input that does not describe anything checkable (an IPC stream that
//! does not decode, a generator draw the layout bounds reject) is
//! [`Outcome::Ignored`]; a checked input gives a report [`Case`], and a case
//! whose verdict is fail, error, crash or timeout is a finding. Under
//! libFuzzer a finding is a panic whose message is the case's evidence, so
//! libFuzzer keeps the input as a crash artifact.

#![forbid(unsafe_code)]

pub mod cases;
pub mod dlpack;
pub mod input;
pub mod producer;
pub mod validate;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::plugin::Plugin;
use crate::report::{Case, Verdict};

/// The fuzz targets (`fuzz/fuzz_targets/<name>.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Target {
    Validate,
    Consumer,
    Producer,
    Async,
    /// DLPack's capsule reader on arbitrary managed tensors ([`dlpack`]).
    DlpackReader,
}

impl Target {
    pub const ALL: [Target; 5] = [
        Target::Validate,
        Target::Consumer,
        Target::Producer,
        Target::Async,
        Target::DlpackReader,
    ];

    /// The target's name (its cargo-fuzz binary).
    pub fn name(self) -> &'static str {
        match self {
            Target::Validate => "validate",
            Target::Consumer => "consumer",
            Target::Producer => "producer",
            Target::Async => "async",
            Target::DlpackReader => "dlpack_reader",
        }
    }

    pub fn parse(s: &str) -> Option<Target> {
        Target::ALL.into_iter().find(|t| t.name() == s)
    }

    /// Does the target drive a producer plugin?
    pub fn wants_producer(self) -> bool {
        matches!(self, Target::Producer | Target::Async)
    }

    /// Does the target drive a consumer plugin?
    pub fn wants_consumer(self) -> bool {
        matches!(self, Target::Consumer | Target::Async)
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The environment variable naming the producer plugin (a path).
pub const PRODUCER_ENV: &str = "ARROWCERT_FUZZ_PRODUCER";
/// The environment variable naming the consumer plugin (a path).
pub const CONSUMER_ENV: &str = "ARROWCERT_FUZZ_CONSUMER";

/// The plugins a target drives.
#[derive(Default)]
pub struct Plugins {
    pub producer: Option<Plugin>,
    pub consumer: Option<Plugin>,
}

impl Plugins {
    /// Loads the plugins at these paths.
    pub fn load(producer: Option<&Path>, consumer: Option<&Path>) -> Result<Plugins, String> {
        let load = |p: Option<&Path>| -> Result<Option<Plugin>, String> {
            p.map(|p| Plugin::load(p).map_err(|e| format!("{}: {e}", p.display())))
                .transpose()
        };
        Ok(Plugins {
            producer: load(producer)?,
            consumer: load(consumer)?,
        })
    }

    /// The plugins [`PRODUCER_ENV`] and [`CONSUMER_ENV`] name, as far as
    /// `target` uses them; one it needs and is not named is an error.
    pub fn from_env(target: Target) -> Result<Plugins, String> {
        // Unset: the reference plugin beside the fuzz binary, if there is
        // one (how the OSS-Fuzz build ships them: fuzz/oss-fuzz/build.sh).
        let beside = |role: &str| -> Option<PathBuf> {
            let exe = std::env::current_exe().ok()?;
            let p = exe
                .parent()?
                .join(format!("libarrowcert_{role}_reference.so"));
            p.is_file().then_some(p)
        };
        let named = |var: &str, wanted: bool| -> Result<Option<PathBuf>, String> {
            let role = if var == PRODUCER_ENV {
                "producer"
            } else {
                "consumer"
            };
            let found = if wanted { beside(role) } else { None };
            match std::env::var_os(var) {
                Some(v) if wanted && !v.is_empty() => Ok(Some(PathBuf::from(v))),
                None if found.is_some() => Ok(found),
                _ if wanted && target != Target::Async => Err(format!(
                    "the {target} fuzz target needs {var} set to the plugin library to fuzz \
                     (`just fuzz {target} PLUGIN` sets it)"
                )),
                _ => Ok(None),
            }
        };
        let producer = named(PRODUCER_ENV, target.wants_producer())?;
        let consumer = named(CONSUMER_ENV, target.wants_consumer())?;
        if target == Target::Async && producer.is_none() && consumer.is_none() {
            return Err(format!(
                "the async fuzz target needs {PRODUCER_ENV} or {CONSUMER_ENV} (or both) set to a plugin library"
            ));
        }
        Plugins::load(producer.as_deref(), consumer.as_deref())
    }
}

/// What one input gave.
#[derive(Debug)]
pub enum Outcome {
    /// The bytes describe nothing checkable (why).
    Ignored(String),
    /// The input was checked; the case says how it went.
    Checked(Box<Case>),
}

/// Runs `target`'s oracle on one input.
pub fn check(target: Target, data: &[u8], plugins: &Plugins) -> Outcome {
    match target {
        Target::Validate => validate::check(data),
        Target::Consumer => match &plugins.consumer {
            Some(c) => cases::consumer(c, data),
            None => Outcome::Ignored("no consumer plugin".into()),
        },
        Target::Producer => match &plugins.producer {
            Some(p) => producer::check(p, data),
            None => Outcome::Ignored("no producer plugin".into()),
        },
        Target::Async => cases::asynchronous(plugins, data),
        Target::DlpackReader => dlpack::check(data),
    }
}

/// Is this case a finding (fail, error, crash or timeout)?
pub fn is_finding(case: &Case) -> bool {
    matches!(
        case.verdict,
        Verdict::Fail | Verdict::Error | Verdict::Crash | Verdict::Timeout
    )
}

/// A finding as text: the case, its verdict and every violation.
pub fn describe(target: Target, case: &Case) -> String {
    let mut out = format!(
        "arrowcert fuzz finding ({target}): {} {}: {}",
        case.id,
        case.verdict.as_str(),
        case.message.as_deref().unwrap_or("")
    );
    for v in &case.violations {
        out.push_str(&format!(
            "\n  {} [{}] at {}: {}",
            v.rule, v.level, v.at, v.evidence
        ));
    }
    for d in case
        .differences
        .iter()
        .filter(|_| case.violations.is_empty())
    {
        out.push_str(&format!("\n  {d}"));
    }
    out
}

/// The whole body of a fuzz target: checks `data` with the plugins the
/// environment names (loaded once) and panics with the evidence on a
/// finding, which libFuzzer records as a crash artifact.
pub fn fuzz(target: Target, data: &[u8]) {
    static PLUGINS: OnceLock<Result<Plugins, String>> = OnceLock::new();
    let plugins = match PLUGINS.get_or_init(|| {
        // libFuzzer's panic hook aborts on every panic, including the
        // ones the harness catches on purpose (arrow-rs and arrow-ipc
        // panicking on malformed input, `quiet::quietly`): those pass.
        let fuzzer_hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !crate::quiet::panics_expected() {
                fuzzer_hook(info)
            }
        }));
        Plugins::from_env(target)
    }) {
        Ok(p) => p,
        Err(why) => {
            eprintln!("arrowcert fuzz: {why}");
            std::process::exit(2);
        }
    };
    if let Outcome::Checked(case) = check(target, data, plugins) {
        if is_finding(&case) {
            panic!("{}", describe(target, &case));
        }
    }
}

/// A seed input of `target` around a scenario part ([`input::encode`]):
/// the target's header bytes for its `variant`-th plain choice, then the
/// scenario. Variants step through the case kinds, paths and schedules.
pub fn seed(target: Target, variant: u8, scenario: &[u8]) -> Vec<u8> {
    let mut out = match target {
        Target::Validate => {
            return validate::seed(0, (variant % 2 == 1).then_some(variant as u64), scenario)
        }
        // Kind byte (array, device array, stream, ... in plain and
        // varied encodings), batch 0.
        Target::Consumer => vec![variant.wrapping_mul(2) % 20 + (variant / 10) % 2, 0],
        // Path, batch 0, whole batch, length byte, then a stream schedule
        // of next-until-past-the-end with a move and a release between.
        Target::Producer => {
            let mut h = vec![variant % 5, 0, 255, 255];
            let steps: &[u8] = &[0, 3, 8, 0, 4, 5, 0, 0, 0, 10, 7];
            h.push(steps.len() as u8);
            h.extend_from_slice(steps);
            h
        }
        // A schedule of first request, refill, extraction, no slowness, no
        // refusal, no cancel; a delivery on one thread.
        Target::Async => vec![4 + variant % 12, 3, 3, 1, 1, 1, 1, variant & 0x0d, 2],
        // No scenario: the seeds of dlpack::seeds, picked by variant.
        Target::DlpackReader => {
            let seeds = dlpack::seeds();
            return seeds[variant as usize % seeds.len()].1.clone();
        }
    };
    out.extend_from_slice(scenario);
    out
}

/// Seed inputs for every target: each built-in scenario, `generated`
/// drawn scenarios, and every gold stream in `gold`, each behind a few
/// header choices. Names are `<source>-<name>-<variant>`.
pub fn corpus(
    gold: Option<&Path>,
    generated: u64,
) -> Result<Vec<(Target, String, Vec<u8>)>, String> {
    let mut parts: Vec<(String, Vec<u8>)> = Vec::new();
    for (i, s) in crate::scenario::builtin().iter().enumerate() {
        parts.push((
            format!("builtin-{}", s.name.replace('/', "_")),
            input::encode(input::Source::Builtin, &[i as u8]),
        ));
    }
    for i in 0..generated {
        parts.push((
            format!("gen-{i}"),
            input::encode(
                input::Source::Generated,
                &input::generated_seed(20261122, i as u16),
            ),
        ));
    }
    if let Some(dir) = gold {
        for s in crate::scenario::gold_dir(dir)? {
            parts.push((
                s.name.replace('/', "-"),
                input::encode(input::Source::Ipc, &s.ipc),
            ));
        }
    }
    let mut out: Vec<(Target, String, Vec<u8>)> = dlpack::seeds()
        .into_iter()
        .map(|(name, bytes)| (Target::DlpackReader, name, bytes))
        .collect();
    for t in Target::ALL
        .into_iter()
        .filter(|&t| t != Target::DlpackReader)
    {
        for (k, (name, part)) in parts.iter().enumerate() {
            for v in 0..2u8 {
                let variant = (k as u8).wrapping_mul(2).wrapping_add(v);
                out.push((t, format!("{name}-{variant}"), seed(t, variant, part)));
            }
        }
    }
    Ok(out)
}

//! `arrowcert worker`: a worker process the orchestrator starts (hidden).

use std::path::PathBuf;

use super::BadInput;

/// The flags of `arrowcert worker` (their help is the command's).
#[derive(clap::Args)]
pub struct WorkerFlags {
    #[arg(long)]
    pub socket: PathBuf,
    #[arg(long, default_value = "roundtrip")]
    pub mode: String,
    #[arg(long)]
    pub producer: Option<PathBuf>,
    #[arg(long)]
    pub consumer: Option<PathBuf>,
    #[arg(long)]
    pub gold: Option<PathBuf>,
    #[arg(long)]
    pub no_builtin: bool,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    #[arg(long, default_value_t = 0)]
    pub generated: u64,
    #[arg(long)]
    pub single_types: bool,
    #[arg(long)]
    pub scenario: Vec<String>,
    #[arg(long)]
    pub timeout_ms: i64,
    #[arg(long)]
    pub replay_prefix: String,
    #[arg(long)]
    pub max_memory_mb: u64,
    #[arg(long)]
    pub case_cpu_seconds: Option<u64>,
    #[arg(long)]
    pub all_leaks: bool,
    /// JSON: the consumer's facts; it is loaded when a case first calls it.
    #[arg(long)]
    pub defer_consumer: Option<String>,
    /// JSON: the plan and libraries of a suite from above `run`
    /// (`--mode dlpack`: a DLPack run's; `--mode cai`: a CAI run's).
    #[arg(long)]
    pub plan: Option<String>,
}

/// `arrowcert worker`, from its flags.
pub fn worker_command(f: WorkerFlags) -> Result<i32, BadInput> {
    let WorkerFlags {
        socket,
        mode,
        producer,
        consumer,
        gold,
        no_builtin,
        seed,
        generated,
        single_types,
        scenario,
        timeout_ms,
        replay_prefix,
        max_memory_mb,
        case_cpu_seconds,
        all_leaks,
        defer_consumer,
        plan,
    } = f;
    let defer_consumer = defer_consumer
        .map(|j| serde_json::from_str(&j))
        .transpose()
        .map_err(|e| BadInput(format!("--defer-consumer: {e}")))?;
    Ok(crate::run::worker::run(crate::run::worker::WorkerArgs {
        socket,
        mode: crate::run::worker::Mode::parse(&mode)
            .ok_or_else(|| BadInput(format!("unknown worker mode {mode}")))?,
        producer,
        consumer,
        sources: crate::sources::Sources {
            builtin: !no_builtin,
            gold,
            generated,
            single_types,
            seed,
            only: (!scenario.is_empty()).then_some(scenario),
        },
        options: crate::roundtrip::Options {
            async_timeout_ms: timeout_ms,
            replay_prefix,
            all_leaks,
            ..Default::default()
        },
        limits: crate::run::proc::Limits::worker(max_memory_mb),
        cpu_seconds: case_cpu_seconds,
        defer_consumer,
        plan,
        open: Some(crate::engine::suites::open_above),
        suites: Some(crate::engine::suites::make),
    }))
}

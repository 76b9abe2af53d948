//! Runs `certify --malformed` (`crate::malformed`): each producer mutant's
//! round-trip cases with the consumer under test, in worker processes whose
//! environment chooses the mutation (the mutant producer reads it when it
//! loads), one mutant after another. Always in workers, whatever `--jobs`
//! says: a crash is what these cases look for.

#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::path::PathBuf;

use crate::malformed::{self, library};
use crate::report::robustness::{Robustness, RobustnessCase};
use crate::report::Case;
use crate::roundtrip::{self, Options};
use crate::run;
use crate::sources::Sources;

/// What a malformed run needs.
pub struct Engine {
    /// The consumer under test.
    pub consumer: PathBuf,
    /// The reference producer the mutants wrap.
    pub base: PathBuf,
    /// Worker processes at once (at least 1).
    pub jobs: usize,
    pub case_timeout_ms: u64,
    pub max_memory_mb: u64,
}

impl Engine {
    /// Runs every malformed case whose ID `selects` (all, by default);
    /// `on_case` hears each entry as it is known. An error when the mutant
    /// producer cannot be written out; a mutant whose workers cannot start
    /// gives its cases `not_run` with the reason.
    pub fn run(
        &self,
        selects: &dyn Fn(&str) -> bool,
        on_case: &mut dyn FnMut(&RobustnessCase),
    ) -> Result<Robustness, String> {
        let lib = library::install(&std::env::temp_dir())
            .map_err(|e| format!("cannot write the mutant producer: {e}"))?;
        let result = self.run_with(&lib, selects, on_case);
        if let Some(dir) = lib.parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
        result
    }

    fn run_with(
        &self,
        lib: &std::path::Path,
        selects: &dyn Fn(&str) -> bool,
        on_case: &mut dyn FnMut(&RobustnessCase),
    ) -> Result<Robustness, String> {
        let sources = Sources::builtin_or_gold(None);
        let scenarios = sources.load()?;
        let plan = roundtrip::plan(&scenarios);
        let index: HashMap<&str, usize> = plan
            .iter()
            .enumerate()
            .map(|(i, s)| (s.id.as_str(), i))
            .collect();
        let specs: Vec<_> = malformed::plan()
            .into_iter()
            .filter(|s| selects(&s.id))
            .collect();
        let mut entries = Vec::new();
        // One mutant at a time: its workers load the mutant producer with
        // that mutation chosen.
        let mut at = 0;
        while at < specs.len() {
            let mutant = specs[at].mutant.name;
            let group: Vec<_> = specs[at..]
                .iter()
                .take_while(|s| s.mutant.name == mutant)
                .collect();
            at += group.len();
            if run::proc::interrupted().is_some() {
                break;
            }
            let selected: Vec<usize> = group
                .iter()
                .map(|s| {
                    index
                        .get(s.roundtrip_id.as_str())
                        .copied()
                        .ok_or_else(|| format!("{}: no round-trip case {}", s.id, s.roundtrip_id))
                })
                .collect::<Result<_, _>>()?;
            let mut got: HashMap<String, Case> = HashMap::new();
            let ran = self.run_mutant(
                lib,
                mutant,
                &sources,
                &scenarios,
                &plan,
                &selected,
                &mut |c| {
                    got.insert(c.id.clone(), c.clone());
                },
            );
            for s in group {
                let entry = match (&ran, got.get(&s.roundtrip_id)) {
                    (_, Some(case)) => malformed::entry(s, case),
                    (Err(why), None) => malformed::not_run(s, why),
                    (Ok(_), None) => malformed::not_run(s, "the run stopped before this case"),
                };
                on_case(&entry);
                entries.push(entry);
            }
        }
        Ok(malformed::summarize(entries))
    }

    #[allow(clippy::too_many_arguments)]
    fn run_mutant(
        &self,
        lib: &std::path::Path,
        mutant: &str,
        sources: &Sources,
        scenarios: &[crate::scenario::Scenario],
        plan: &[roundtrip::CaseSpec],
        selected: &[usize],
        on_case: &mut dyn FnMut(&Case),
    ) -> Result<Option<i32>, String> {
        let opts = Options {
            // The mutant producer built from its source
            // (producers/mutants/mutant_producer.c) reads the usual names.
            replay_prefix: format!(
                "ARROWCERT_MUTANT={mutant} ARROWCERT_MUTANT_BASE={} ARROWCERT_MUTANT_STREAM_CHUNKS=1 arrowcert roundtrip --producer libarrowcert_mutant_producer.so --consumer {} --exact",
                self.base.display(),
                self.consumer.display()
            ),
            ..Default::default()
        };
        let args = run::worker::WorkerArgs {
            socket: PathBuf::new(),
            mode: run::worker::Mode::Roundtrip,
            producer: Some(lib.to_path_buf()),
            consumer: Some(self.consumer.clone()),
            sources: sources.clone(),
            options: opts.clone(),
            limits: run::proc::Limits::worker(self.max_memory_mb),
            cpu_seconds: None,
            defer_consumer: None,
            plan: None,
            open: None,
            suites: None,
        };
        let jobs: Vec<run::Job> = selected
            .iter()
            .map(|&index| run::Job {
                index,
                record: roundtrip::record(&scenarios[plan[index].scenario], &plan[index], &opts),
            })
            .collect();
        super::Workers {
            args,
            count: self.jobs.clamp(1, selected.len().max(1)),
            case_timeout_ms: self.case_timeout_ms,
            max_memory_mb: self.max_memory_mb,
            loads: "the mutant producer and the consumer",
            env: vec![
                (library::MUTANT_ENV.to_string(), mutant.to_string()),
                (
                    library::BASE_ENV.to_string(),
                    self.base.display().to_string(),
                ),
                (library::STREAM_CHUNKS_ENV.to_string(), "1".to_string()),
            ],
            wrapper: Vec::new(),
        }
        .run(None, plan.len(), jobs, |_| {}, on_case)
    }
}

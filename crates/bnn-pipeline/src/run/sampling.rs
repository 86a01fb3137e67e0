//! Running a run's chains from their warm starts, streaming draws and checkpoints; resuming a stopped run.

use crate::cluster::shard::config_hash;
use crate::cluster::shard::ShardManifest;
use crate::config::run_config::Init;
use crate::run::dei_mcmc::DeiMcmc;
use crate::run::early_stop::EarlyStop;
use crate::run::progress::{Progress, ProgressEvent, Stage};
use crate::storage::draw_reader::for_each_stored_draw;
use crate::storage::draw_store::{ChainSampling, Checkpoint, DrawStore};
use crate::storage::run_dir::{write_json, RunDir};
use crate::storage::run_journal::{self, JournalEntry, JournalEvent};
use crate::storage::run_lock::Access;
use anyhow::{anyhow, bail, Context as _, Result};
use bnn_model::{initial_parameters, load_parameters};
use bnn_sampler::{ChainStart, ChainState, LogDensity, RunStatus, Sampler, SamplerSettings};
use serde_json::json;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

/// How a sampling session ended, per chain.
#[derive(Debug, Clone)]
pub struct Sampling {
    /// Every chain ran its draws (or was ended by the early-stopping rule); `false` when the stop
    /// flag ended the session.
    pub finished: bool,
    pub chains: Vec<ChainSampling>,
    /// Wall-clock seconds of this session.
    pub seconds_wall: f64,
    /// `draws_chain_<c>.csv`, one per chain.
    pub draws_files: Vec<PathBuf>,
}

impl DeiMcmc {
    /// Runs the chains from their starts; refuses a directory that already holds draws.
    pub fn sample(&self) -> Result<Sampling> {
        self.claim()?;
        self.run_chains(Session::Start)
    }

    /// Continues a stopped run from its checkpoints, with the settings sampling started with;
    /// refuses a directory where no sampling was started ("nothing to resume").
    pub fn resume(&self) -> Result<Sampling> {
        self.lock(Access::Write)?;
        self.check_resumable()?;
        self.run_chains(Session::Resume)
    }

    /// A shard's session, which may be a requeued task: it continues what it started and starts
    /// the rest.
    pub fn start_or_resume(&self) -> Result<Sampling> {
        self.claim()?;
        let started = run_journal::sampling_started(&self.dir)?.is_some() || self.dir.has_draws();
        match started {
            true => {
                self.check_resumable()?;
                self.run_chains(Session::Resume)
            }
            false => self.run_chains(Session::StartResumable),
        }
    }

    /// What `resume` continues must be what was started: the journal records the settings of
    /// the draws before the first one (directories from before the journal have their draws or
    /// checkpoints to show that sampling started).
    fn check_resumable(&self) -> Result<()> {
        let root = self.dir.root().display();
        let Some(started) = run_journal::sampling_started(&self.dir)? else {
            if self.dir.has_draws() {
                return Ok(());
            }
            let what = if self.dir.has_ensemble() {
                "it holds a trained ensemble, and no sampling was started there"
            } else {
                "no sampling was started there"
            };
            bail!("nothing to resume in {root}: {what}; start it with `bnn sample --out {root}` (with the sampler flags you want)");
        };
        let now = config_hash(&self.config);
        if started.config_sha256 != now {
            bail!(
                "{root}/config.toml no longer holds the settings sampling started with ({} on {}, settings sha256 {}; now {}, sha256 {now}): the directory was changed by hand or by another program, and resuming would mix two runs' draws",
                started.sampler,
                crate::storage::run_lock::utc_text(started.time),
                started.config_sha256,
                self.config.sampler.algorithm.name()
            );
        }
        Ok(())
    }

    /// The starting points of the chains `ids` (and the ensemble's training seconds, 0 when none
    /// was trained).
    fn chain_starts(&self, ids: &[usize]) -> Result<(Vec<ChainStart>, f64)> {
        let seed = self.config.sampler.seed;
        let widen = |p: &[f32]| p.iter().map(|&v| f64::from(v)).collect::<Vec<f64>>();
        Ok(match self.config.sampler.init {
            Init::Cold => (
                ids.iter()
                    .map(|&c| {
                        ChainStart::at(initial_parameters(&self.layout, seed, 1_000 + c as u64))
                    })
                    .collect(),
                0.0,
            ),
            Init::Single => {
                let path = self
                    .config
                    .sampler
                    .init_from
                    .as_ref()
                    .ok_or_else(|| anyhow!("init = single needs init_from"))?;
                let theta = load_parameters(&self.bnn, path)
                    .with_context(|| format!("loading the warm start {}", path.display()))?;
                (vec![ChainStart::at(widen(&theta)); ids.len()], 0.0)
            }
            Init::Ensemble => {
                let ensemble = self.ensemble()?;
                let total = self.config.ensemble.members;
                let member = |c: usize| -> Result<ChainStart> {
                    let slot = ensemble
                        .indices
                        .iter()
                        .position(|&j| j == c % total)
                        .ok_or_else(|| {
                            anyhow!(
                                "chain {c} starts from member {}, which this run directory lacks",
                                c % total
                            )
                        })?;
                    Ok(ChainStart::at(widen(&ensemble.members[slot])))
                };
                (
                    ids.iter().map(|&c| member(c)).collect::<Result<Vec<_>>>()?,
                    ensemble.seconds,
                )
            }
        })
    }

    fn run_chains(&self, session: Session) -> Result<Sampling> {
        let resume = session != Session::Start;
        let config = &self.config;
        let ids = self.chain_ids();
        let chains = ids.len();
        let sampler = config
            .sampler
            .sampler_config(config.runtime.threads)
            .init()?;
        let density = &self.density;
        let root = self.dir.root().display();
        if !resume
            && (self.dir.has_checkpoints(&ids) || ids.iter().any(|&c| self.dir.draws(c).exists()))
        {
            bail!("{root} already holds draws; continue it with `bnn sample --resume {root}` or choose a new run directory");
        }
        let event = match session {
            Session::Resume => JournalEvent::SamplingResumed,
            Session::Start | Session::StartResumable => JournalEvent::SamplingStarted,
        };
        run_journal::append(&self.dir, &JournalEntry::new(event, config))?;
        let (starts, seconds_ensemble) = self.chain_starts(&ids)?;
        self.write_layout()?;
        let mut manifest = self
            .shard
            .map(|shard| ShardManifest::new(shard, config, &self.data));
        if let (Some(manifest), true) =
            (&mut manifest, resume && self.dir.shard_manifest().exists())
        {
            // A requeued shard keeps the time it first started.
            manifest.started = ShardManifest::load(&self.dir.shard_manifest())?.started;
        }
        if let Some(manifest) = &manifest {
            write_json(&self.dir.shard_manifest(), &serde_json::to_value(manifest)?)?;
        }
        let (mut states, resumed) =
            chain_states(&self.dir, &sampler, density, &ids, &starts, resume)?;
        let done: Vec<usize> = states.iter().map(|s| s.iteration).collect();
        let mut store = DrawStore::open(
            &self.dir,
            &self.layout,
            &ids,
            &resumed,
            config.sampler.checkpoint_every,
            config.sampler.thin,
            sampler.config().algorithm.stat_columns(),
        )?;
        if config.sampler.early_stop {
            let test = &self.data.test;
            let posterior = self.posterior();
            let rule = bnn_diagnostics::LppdConvergence::new(
                config.sampler.early_stop_window,
                config.sampler.early_stop_tolerance,
            );
            let pointwise = Box::new(move |theta: &[f64]| -> Result<Vec<f64>> {
                let draw = posterior
                    .predictions(theta, test)
                    .pop()
                    .ok_or_else(|| anyhow!("no prediction"))?;
                Ok(draw
                    .iter()
                    .enumerate()
                    .map(|(i, p)| p.log_likelihood(&test.y[i * test.y_cols..(i + 1) * test.y_cols]))
                    .collect())
            });
            let mut early = EarlyStop::new(rule, test.rows, config.chains(), pointwise);
            for (&c, checkpoint) in ids.iter().zip(&resumed) {
                if let Some(checkpoint) = checkpoint {
                    // Rebuild the chain's LPPD history from its stored draws (what it saw before).
                    let (path, dim) = (self.dir.draws(c), self.layout.dim());
                    for_each_stored_draw(&path, dim, checkpoint.kept_draws, |_, theta| {
                        early.observe(c, theta).map(|_| ())
                    })?;
                }
            }
            store = store.with_early_stop(early);
        }
        let message = format!(
            "sampling {} ({} train / {} test rows, {} parameters): {} chains x ({} + {} draws), {} from {:?} start on {}{}",
            self.data.name,
            self.data.train.rows,
            self.data.test.rows,
            self.layout.dim(),
            chains,
            config.sampler.warmup_text(),
            config.sampler.draws,
            config.sampler.algorithm.name(),
            config.sampler.init,
            self.device_text(),
            if resume { format!(" (resuming at iterations {done:?})") } else { String::new() }
        );
        let message = match self.shard {
            Some(shard) => format!("{message}; shard {shard}: chains {ids:?}"),
            None => message,
        };
        self.progress.report(&ProgressEvent::Started {
            stage: Stage::Sampling,
            message: &message,
        });
        store = store.with_progress(self.progress.as_ref());
        let outcome = run_session(
            &self.dir,
            &sampler,
            density,
            (&mut states, config.sampler.draws),
            &mut store,
            &self.stop,
            self.progress.as_ref(),
        )?;
        if !outcome.finished {
            let stopped = JournalEntry::new(JournalEvent::SamplingStopped, config);
            run_journal::append(&self.dir, &stopped)?;
            self.progress.report(&ProgressEvent::Finished {
                stage: Stage::Sampling,
                message: "interrupted: every chain is checkpointed",
            });
            return Ok(outcome);
        }
        let (busy_warmup, busy_sampling) = store.busy_seconds();
        // Chain busy time (summed over chains, kept across resumes) over the chains run at once:
        // all of them when batched or run as one ensemble (each chain's clock then runs
        // through every round).
        let parallel = if config.sampler.batched || sampler.config().algorithm.tunes_across_chains()
        {
            chains
        } else {
            config.threads().min(chains)
        }
        .max(1) as f64;
        let mut record = json!({
            "status": "finished",
            "chains": chains,
            "finished_early": store.finished_early(),
            "seconds_ensemble": seconds_ensemble,
            "seconds_warmup": busy_warmup / parallel,
            "seconds_sampling": busy_sampling / parallel,
            "seconds_wall_last_session": outcome.seconds_wall,
            "chain_seconds_warmup": busy_warmup,
            "chain_seconds_sampling": busy_sampling,
            "resumed": resume,
            "chain_draws": chain_draws(&outcome.chains),
        });
        if let Some(shard) = self.shard {
            record["shard"] = json!(shard.to_string());
            record["chain_ids"] = json!(ids);
        }
        write_json(&self.dir.sampling(), &record)?;
        let finished = JournalEntry::new(JournalEvent::SamplingFinished, config);
        run_journal::append(&self.dir, &finished)?;
        if let Some(manifest) = &mut manifest {
            manifest.finished = Some(crate::cluster::shard::unix_now());
            write_json(
                &self.dir.shard_manifest(),
                &serde_json::to_value(&*manifest)?,
            )?;
        }
        let message = format!("sampled in {:.1} s; draws in {root}", outcome.seconds_wall);
        self.progress.report(&ProgressEvent::Finished {
            stage: Stage::Sampling,
            message: &message,
        });
        Ok(outcome)
    }
}

/// How a sampling session begins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Session {
    /// Every chain from its start, in a directory without draws.
    Start,
    /// From the checkpoints (chains without one start again).
    Resume,
    /// A shard's first session: every chain from its start, as a resume would continue it.
    StartResumable,
}

/// `sampling.json`'s record of the draws each chain kept, which readers check the draws files
/// against when a checkpoint is missing.
pub(crate) fn chain_draws(chains: &[ChainSampling]) -> serde_json::Value {
    let counts: serde_json::Map<String, serde_json::Value> = chains
        .iter()
        .map(|c| (c.chain.to_string(), json!(c.kept_draws)))
        .collect();
    serde_json::Value::Object(counts)
}

/// The chains `ids` at their starts, each replaced by its checkpoint when resuming (and the
/// checkpoints, which the draw store truncates the files to).
pub(crate) fn chain_states<L: LogDensity + ?Sized>(
    dir: &RunDir,
    sampler: &Sampler,
    density: &L,
    ids: &[usize],
    starts: &[ChainStart],
    resume: bool,
) -> Result<(Vec<ChainState>, Vec<Option<Checkpoint>>)> {
    let mut states = ids
        .iter()
        .zip(starts)
        .map(|(&c, start)| sampler.init_chain(density, c, start))
        .collect::<Result<Vec<_>, _>>()?;
    let mut resumed: Vec<Option<Checkpoint>> = vec![None; ids.len()];
    if resume {
        for ((slot, state), &c) in resumed.iter_mut().zip(&mut states).zip(ids) {
            let path = dir.checkpoint(c);
            if path.exists() {
                let checkpoint = Checkpoint::load(&path)?;
                if checkpoint.chain != c || checkpoint.state.kernel.dim() != density.dim() {
                    bail!("checkpoint {} belongs to another chain or model; the run directory is damaged", path.display());
                }
                *state = checkpoint.state.clone();
                *slot = Some(checkpoint);
            }
        }
        if sampler.config().algorithm.tunes_across_chains() {
            align_ensemble(
                dir,
                sampler,
                density,
                ids,
                starts,
                &mut states,
                &mut resumed,
            )?;
        }
    }
    Ok((states, resumed))
}

/// An ensemble's chains (LAPS) move together, so they resume from one iteration: a run killed
/// while writing one round's checkpoints has chains at that round and chains at the one before;
/// those ahead go back to their previous checkpoint (kept for this), and if some chain has none
/// at all, every chain starts again.
fn align_ensemble<L: LogDensity + ?Sized>(
    dir: &RunDir,
    sampler: &Sampler,
    density: &L,
    ids: &[usize],
    starts: &[ChainStart],
    states: &mut [ChainState],
    resumed: &mut [Option<Checkpoint>],
) -> Result<()> {
    let target = resumed
        .iter()
        .map(|k| k.as_ref().map_or(0, |k| k.state.iteration))
        .min()
        .unwrap_or(0);
    for (k, &c) in ids.iter().enumerate() {
        let Some(iteration) = resumed[k].as_ref().map(|k| k.state.iteration) else {
            continue;
        };
        if iteration == target {
            continue;
        }
        if target == 0 {
            states[k] = sampler.init_chain(density, c, &starts[k])?;
            resumed[k] = None;
            continue;
        }
        let path = dir.previous_checkpoint(c);
        let previous = if path.exists() {
            Some(Checkpoint::load(&path)?)
        } else {
            None
        };
        match previous {
            Some(previous) if previous.state.iteration == target && previous.chain == c => {
                states[k] = previous.state.clone();
                resumed[k] = Some(previous);
            }
            _ => bail!(
                "the ensemble's chains were checkpointed at different iterations (chain {c} at {iteration}, another at {target}) and {} does not hold iteration {target}; the run directory is damaged: start the run again",
                path.display()
            ),
        }
    }
    Ok(())
}

/// Runs the chains (each through its warmup, whose length the warmup policy may grow, then
/// `draws` iterations) into the store until they finish or `stop` is set, then checkpoints every
/// chain: the session's outcome.
pub(crate) fn run_session<L: LogDensity + ?Sized>(
    dir: &RunDir,
    sampler: &Sampler,
    density: &L,
    (states, draws): (&mut [ChainState], usize),
    store: &mut DrawStore<'_>,
    stop: &AtomicBool,
    progress: &dyn Progress,
) -> Result<Sampling> {
    let chains: Vec<usize> = states.iter().map(|s| s.chain).collect();
    let done: Vec<usize> = states.iter().map(|s| s.iteration).collect();
    let warmup: Vec<usize> = states.iter().map(|s| s.warmup.num_warmup()).collect();
    progress.report(&ProgressEvent::ChainsStarted {
        draws,
        warmup: &warmup,
        chains: &chains,
        done: &done,
    });
    let start = Instant::now();
    let status = sampler.run(density, states, store, stop);
    let seconds_wall = start.elapsed().as_secs_f64();
    progress.report(&ProgressEvent::ChainsEnded);
    let status = status?;
    for state in states.iter() {
        store.checkpoint(state)?;
    }
    Ok(Sampling {
        finished: status != RunStatus::Stopped,
        chains: store.chain_sampling(),
        seconds_wall,
        draws_files: states.iter().map(|s| dir.draws(s.chain)).collect(),
    })
}

//! Running many chains: configuration, initialization, parallel or batched execution, cancellation.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use bnn_config_derive::Config;

use crate::adaptation::stan_windows::WarmupConfig;
use crate::adaptation::step_size_search::{find_reasonable_step_size, SearchRule};
use crate::adaptation::TunedParams;
use crate::chain::{chain_rng, ChainStart, ChainState};
use crate::draw_sink::{CollectedDraws, Draw, DrawSink};
use crate::draw_stats::DrawStats;
use crate::error::SamplerError;
pub use crate::kernels::AlgorithmConfig;
use crate::kernels::{BatchChain, BatchKernel, Kernel, KernelState};
use crate::log_density::LogDensity;
use crate::metric::DiagonalMassMatrix;
use crate::sampler_settings::{ChainRunner, SamplerSettings};

/// A full sampler run: kernel, warmup, lengths, seed and execution.
#[derive(Config, Debug)]
pub struct SamplerConfig {
    /// The transition kernel.
    pub algorithm: AlgorithmConfig,
    /// Warmup adaptation settings.
    #[config(default = "WarmupConfig::new()")]
    pub warmup: WarmupConfig,
    /// Warmup iterations per chain (adapting, not kept as draws); planned ones under the
    /// stationary policy (`WarmupConfig::policy`), which may add checks and extensions.
    #[config(default = 1000)]
    pub num_warmup: usize,
    /// Sampling iterations per chain.
    #[config(default = 1000)]
    pub num_draws: usize,
    /// Seed of the run; chain `c` uses stream `c` of this seed.
    #[config(default = 0)]
    pub seed: u64,
    /// Worker threads for running chains in parallel; `None` uses the available parallelism.
    /// The draws do not depend on it.
    pub threads: Option<usize>,
    /// Advance all chains in lockstep on the calling thread, with one `[C, D]` log-density call
    /// per leapfrog step (HMC, NUTS, MCLMC and MAMS; NUTS chains whose tree is complete leave the batch until
    /// the next transition). The GPU-friendly mode: the draws are those of the threaded run.
    #[config(default = false)]
    pub batched: bool,
    /// Step size every chain starts from unless its `ChainStart` gives one; `None` uses the
    /// algorithm's default.
    pub initial_step_size: Option<f64>,
    /// The coordinates each draw records (`Draw::position`); `None` records all of them. A
    /// pseudo-marginal target, say, keeps its parameters and drops its auxiliary variables.
    pub recorded_coordinates: Option<std::ops::Range<usize>>,
}

impl SamplerConfig {
    /// Validates the configuration and builds the runner.
    pub fn init(&self) -> Result<Sampler, SamplerError> {
        self.algorithm.validate()?;
        self.warmup.validate()?;
        if self.threads == Some(0) {
            return Err(SamplerError::InvalidConfig(
                "threads must be at least 1".into(),
            ));
        }
        if self.batched && !self.algorithm.supports_batched() {
            return Err(SamplerError::InvalidConfig(format!(
                "batched execution is not implemented for {} (run its chains threaded)",
                self.algorithm.name().to_uppercase()
            )));
        }
        if let Some(step_size) = self.initial_step_size {
            check_step_size(step_size, SamplerError::InvalidConfig)?;
        }
        Ok(Sampler {
            config: self.clone(),
        })
    }
}

/// A step size must be positive and finite; `invalid` makes the error of whatever set it.
fn check_step_size(
    step_size: f64,
    invalid: impl FnOnce(String) -> SamplerError,
) -> Result<(), SamplerError> {
    if step_size > 0.0 && step_size.is_finite() {
        Ok(())
    } else {
        Err(invalid(format!(
            "step size must be positive and finite, got {step_size}"
        )))
    }
}

/// How a call to `Sampler::run` ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunStatus {
    /// Every chain completed its warmup and draws.
    Finished,
    /// The stop flag was raised; the chain states are consistent and can be resumed.
    Stopped,
}

/// Runs chains of a validated `SamplerConfig`.
#[derive(Clone, Debug)]
pub struct Sampler {
    config: SamplerConfig,
}

impl Sampler {
    pub fn config(&self) -> &SamplerConfig {
        &self.config
    }

    /// The recorded coordinate range, checked against the density's dimension.
    fn recorded_coordinates(&self, dim: usize) -> Result<Range<usize>, SamplerError> {
        match &self.config.recorded_coordinates {
            None => Ok(0..dim),
            Some(range) if range.start < range.end && range.end <= dim => Ok(range.clone()),
            Some(range) => Err(SamplerError::InvalidConfig(format!(
                "recorded_coordinates {range:?} must be a non-empty range within the {dim} coordinates"
            ))),
        }
    }

    /// The rule of the warmup's step-size search, when it runs.
    fn step_size_search(&self) -> Option<SearchRule> {
        let warmup = &self.config.warmup;
        (warmup.adapt_step_size
            && warmup.find_initial_step_size
            && self.config.algorithm.uses_leapfrog())
        .then(|| {
            warmup
                .step_size_search
                .rule(self.config.algorithm.target_accept())
        })
    }

    /// Creates one chain per start: evaluates the start (a non-finite value or a failure is an
    /// error naming the chain), seeds the chain's stream and picks the initial step size.
    pub fn init_chains<L: LogDensity + ?Sized>(
        &self,
        density: &L,
        starts: &[ChainStart],
    ) -> Result<Vec<ChainState>, SamplerError> {
        if starts.is_empty() {
            return Err(SamplerError::InvalidConfig(
                "at least one chain start is needed".into(),
            ));
        }
        starts
            .iter()
            .enumerate()
            .map(|(chain, start)| self.init_chain(density, chain, start))
            .collect()
    }

    /// Creates chain number `chain` (its random stream is `(seed, chain)`), as `init_chains` does
    /// for each of its starts: a subset of a run's chains (one shard of a cluster job) starts
    /// exactly as those chains start in the whole run.
    pub fn init_chain<L: LogDensity + ?Sized>(
        &self,
        density: &L,
        chain: usize,
        start: &ChainStart,
    ) -> Result<ChainState, SamplerError> {
        let dim = density.dim();
        let config = &self.config;
        let kernel =
            KernelState::init(density, start.position.clone()).map_err(|e| e.for_chain(chain))?;
        let invalid = |message: String| SamplerError::InvalidChainStart { chain, message };
        let metric = match &start.inverse_mass_diag {
            Some(diag) if diag.len() != dim => {
                return Err(invalid(format!(
                    "inverse mass diagonal has length {}, expected {dim}",
                    diag.len()
                )))
            }
            Some(diag) => {
                DiagonalMassMatrix::new(diag.clone()).map_err(|e| invalid(e.to_string()))?
            }
            None => DiagonalMassMatrix::identity(dim),
        };
        let min_dim = config.algorithm.min_dim();
        if dim < min_dim {
            return Err(invalid(format!(
                "{}'s dynamics need at least {min_dim} dimensions",
                config.algorithm.name()
            )));
        }
        let step_size = start
            .step_size
            .or(config.initial_step_size)
            .unwrap_or_else(|| config.algorithm.default_step_size(dim));
        check_step_size(step_size, invalid)?;
        let mut rng = chain_rng(config.seed, chain);
        let step_size = match self.step_size_search() {
            Some(rule) if config.num_warmup > 0 => {
                find_reasonable_step_size(density, &mut rng, &kernel, &metric, step_size, rule)
                    .map_err(|cause| SamplerError::Evaluation { chain, cause })?
            }
            _ => step_size,
        };
        let mut params = TunedParams::new(step_size, metric);
        let warmup =
            config
                .algorithm
                .start_warmup(&config.warmup, config.num_warmup, dim, &mut params);
        Ok(ChainState {
            chain,
            iteration: 0,
            kernel,
            params,
            warmup,
            rng,
        })
    }

    /// Advances every chain until it has done its warmup and `num_draws` draws, handing each draw
    /// to `sink` as it is made, or until `stop` is raised (checked between draws). The states
    /// are updated in place, so a stopped run resumes by calling `run` again with them (also
    /// after serializing them). After an error they are not to be resumed: a chain whose
    /// transition failed fatally has lost its state (resume from the sink's last checkpoint).
    pub fn run<L: LogDensity + ?Sized>(
        &self,
        density: &L,
        chains: &mut [ChainState],
        sink: &mut (dyn DrawSink + Send),
        stop: &AtomicBool,
    ) -> Result<RunStatus, SamplerError> {
        let dim = density.dim();
        let recorded = self.check_chains(dim, chains)?;
        self.config.algorithm.run(ChainRunner {
            sampler: self,
            density,
            chains,
            recorded: &recorded,
            sink,
            stop,
        })?;
        Ok(self.status(chains, sink))
    }

    /// Runs chains (from `init_chains`, which reads `algorithm` for the start's step size and the
    /// tuner) with a kernel that `algorithm` does not build: surrogate NUTS, NUTS or HMC on
    /// pseudo-marginal dynamics, a kernel of one's own. Chains run threaded under the
    /// configuration's warmup, as `run` runs them. Settings the kernel cannot run with are errors
    /// before its first transition (`WarmupConfig::check_kernel`, `Kernel::check_params`), and a
    /// metric the warmup adapts is checked before it is used.
    pub fn run_kernel<L, K, F>(
        &self,
        density: &L,
        make_kernel: F,
        chains: &mut [ChainState],
        sink: &mut (dyn DrawSink + Send),
        stop: &AtomicBool,
    ) -> Result<RunStatus, SamplerError>
    where
        L: LogDensity + ?Sized,
        K: Kernel,
        F: Fn() -> Result<K, SamplerError> + Sync,
    {
        let recorded = self.check_chains(density.dim(), chains)?;
        self.run_threaded(density, make_kernel, chains, &recorded, sink, stop)?;
        Ok(self.status(chains, sink))
    }

    /// The recorded coordinates, after checking that every chain has the density's dimension.
    fn check_chains(
        &self,
        dim: usize,
        chains: &[ChainState],
    ) -> Result<Range<usize>, SamplerError> {
        let recorded = self.recorded_coordinates(dim)?;
        for chain in chains {
            for got in [
                chain.kernel.dim(),
                chain.kernel.gradient.len(),
                chain.params.metric.dim(),
            ] {
                if got != dim {
                    return Err(SamplerError::WrongDimension {
                        chain: chain.chain,
                        expected: dim,
                        got,
                    });
                }
            }
        }
        Ok(recorded)
    }

    fn status(&self, chains: &[ChainState], sink: &(dyn DrawSink + Send)) -> RunStatus {
        let total = |chain: &ChainState| chain.warmup.num_warmup() + self.config.num_draws;
        if chains
            .iter()
            .all(|chain| chain.iteration >= total(chain) || sink.chain_finished(chain.chain))
        {
            RunStatus::Finished
        } else {
            RunStatus::Stopped
        }
    }

    /// Initializes chains at `starts`, runs them to the end and keeps the sampling draws in memory.
    pub fn sample<L: LogDensity + ?Sized>(
        &self,
        density: &L,
        starts: &[ChainStart],
    ) -> Result<CollectedDraws, SamplerError> {
        let mut chains = self.init_chains(density, starts)?;
        let recorded = self.recorded_coordinates(density.dim())?;
        let mut draws = CollectedDraws::new(chains.len(), recorded.len());
        self.run(density, &mut chains, &mut draws, &AtomicBool::new(false))?;
        Ok(draws)
    }

    /// Chains on worker threads; each worker owns one kernel (its buffers) and takes whole chains
    /// from a shared queue. A chain's draws depend only on its own stream, not on the schedule.
    pub(crate) fn run_threaded<L, K, F>(
        &self,
        density: &L,
        make_kernel: F,
        chains: &mut [ChainState],
        recorded: &Range<usize>,
        sink: &mut (dyn DrawSink + Send),
        stop: &AtomicBool,
    ) -> Result<(), SamplerError>
    where
        L: LogDensity + ?Sized,
        K: Kernel,
        F: Fn() -> Result<K, SamplerError> + Sync,
    {
        // Refused settings are errors before any chain moves.
        let probe = make_kernel()?;
        for chain in chains.iter() {
            if chain.in_warmup() {
                self.config.warmup.check_kernel(&probe)?;
            }
            probe.check_params(chain.params.step_params())?;
        }
        let threads = self
            .config
            .threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
            .clamp(1, chains.len().max(1));
        let queue = Mutex::new(chains.iter_mut());
        let sink = Mutex::new(sink);
        let abort = AtomicBool::new(false);
        let failure: Mutex<Option<SamplerError>> = Mutex::new(None);
        let search = self.step_size_search();
        let num_draws = self.config.num_draws;
        std::thread::scope(|scope| {
            for _ in 0..threads {
                scope.spawn(|| {
                    let result = make_kernel().and_then(|mut kernel| loop {
                        let next = lock(&queue).next();
                        let Some(chain) = next else { break Ok(()) };
                        advance_chain(
                            &mut kernel,
                            density,
                            chain,
                            num_draws,
                            recorded,
                            search,
                            &sink,
                            stop,
                            &abort,
                        )?;
                    });
                    if let Err(error) = result {
                        abort.store(true, Ordering::Relaxed);
                        lock(&failure).get_or_insert(error);
                    }
                });
            }
        });
        match failure
            .into_inner()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
        {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    /// All chains in lockstep on this thread, one `[C, D]` evaluation per leapfrog step. Each
    /// round is one transition of every chain still running, so the stop flag and the sink's
    /// `chain_finished` are seen between transitions, as in the threaded run.
    pub(crate) fn run_batched<L: LogDensity + ?Sized, K: BatchKernel>(
        &self,
        density: &L,
        mut kernel: K,
        chains: &mut [ChainState],
        recorded: &Range<usize>,
        sink: &mut (dyn DrawSink + Send),
        stop: &AtomicBool,
    ) -> Result<(), SamplerError> {
        let search = self.step_size_search();
        let num_draws = self.config.num_draws;
        let mut stats = Vec::with_capacity(chains.len());
        let mut running = Vec::with_capacity(chains.len());
        while !stop.load(Ordering::Relaxed) {
            running.clear();
            let mut members: Vec<BatchChain<'_, _>> = Vec::with_capacity(chains.len());
            for (i, chain) in chains.iter_mut().enumerate() {
                if chain.iteration < chain.warmup.num_warmup() + num_draws
                    && !sink.chain_finished(chain.chain)
                {
                    running.push(i);
                    let ChainState {
                        rng,
                        kernel: state,
                        params,
                        ..
                    } = chain;
                    members.push(BatchChain {
                        rng,
                        state,
                        params: params.step_params(),
                    });
                }
            }
            if members.is_empty() {
                break;
            }
            kernel
                .step_batch(density, &mut members, &mut stats)
                .map_err(|cause| SamplerError::BatchEvaluation { cause })?;
            drop(members);
            for (&i, draw_stats) in running.iter().zip(&stats) {
                let chain = &mut chains[i];
                let (warmup, index) = finish_transition(density, chain, draw_stats, search)?;
                record_draw(sink, chain, (warmup, index), draw_stats, recorded)?;
            }
        }
        Ok(())
    }
}

/// Hands the chain's transition just made to `sink`: its phase and index within the phase, its
/// statistics and the recorded coordinates of its position.
pub(crate) fn record_draw(
    sink: &mut (dyn DrawSink + Send),
    chain: &ChainState,
    (warmup, index): (bool, usize),
    stats: &DrawStats,
    recorded: &Range<usize>,
) -> Result<(), SamplerError> {
    let draw = Draw {
        chain: chain.chain,
        index,
        warmup,
        position: &chain.kernel.position[recorded.clone()],
        stats,
        state: chain,
    };
    sink.record(&draw).map_err(SamplerError::Sink)
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Runs one chain until it is done or stopped.
#[allow(clippy::too_many_arguments)]
fn advance_chain<L: LogDensity + ?Sized, K: Kernel>(
    kernel: &mut K,
    density: &L,
    chain: &mut ChainState,
    num_draws: usize,
    recorded: &Range<usize>,
    search: Option<SearchRule>,
    sink: &Mutex<&mut (dyn DrawSink + Send)>,
    stop: &AtomicBool,
    abort: &AtomicBool,
) -> Result<(), SamplerError> {
    if lock(sink).chain_finished(chain.chain) {
        return Ok(());
    }
    // The warmup's length may grow while it runs (the stationary policy).
    while chain.iteration < chain.warmup.num_warmup() + num_draws {
        if stop.load(Ordering::Relaxed) || abort.load(Ordering::Relaxed) {
            return Ok(());
        }
        let state = std::mem::take(&mut chain.kernel);
        let (state, stats) = kernel
            .step(density, &mut chain.rng, state, chain.params.step_params())
            .map_err(|cause| SamplerError::Evaluation {
                chain: chain.chain,
                cause,
            })?;
        chain.kernel = state;
        let (warmup, index) = finish_transition(density, chain, &stats, search)?;
        if warmup {
            // The warmup may have adapted a metric the kernel cannot use (a pseudo-marginal u block).
            kernel.check_params(chain.params.step_params())?;
        }
        let mut sink = lock(sink);
        record_draw(&mut **sink, chain, (warmup, index), &stats, recorded)?;
        if sink.chain_finished(chain.chain) {
            return Ok(());
        }
    }
    Ok(())
}

/// Feeds a transition to the chain's warmup (if still warming up) and counts it. Returns the
/// phase and the draw's index within it, or the fatal error of a step-size search.
fn finish_transition<L: LogDensity + ?Sized>(
    density: &L,
    chain: &mut ChainState,
    stats: &DrawStats,
    search: Option<SearchRule>,
) -> Result<(bool, usize), SamplerError> {
    let warmup = chain.in_warmup();
    let index = if warmup {
        chain.iteration
    } else {
        chain.iteration - chain.warmup.num_warmup()
    };
    if warmup {
        let ChainState {
            chain: number,
            kernel,
            rng,
            warmup,
            params,
            ..
        } = chain;
        // The search runs inside the warmup's update; a fatal error there leaves the step size as
        // it was and ends the run right after.
        let mut failure = None;
        warmup.observe(
            &kernel.position,
            &kernel.gradient,
            stats,
            params,
            |metric, step_size| match search {
                Some(rule) => {
                    find_reasonable_step_size(density, rng, kernel, metric, step_size, rule)
                        .unwrap_or_else(|cause| {
                            failure = Some(cause);
                            step_size
                        })
                }
                None => step_size,
            },
        );
        if let Some(cause) = failure {
            return Err(SamplerError::Evaluation {
                chain: *number,
                cause,
            });
        }
    }
    chain.iteration += 1;
    Ok((warmup, index))
}

//! Dhulipala, Che & Shields (2023), "Efficient Bayesian inference with latent Hamiltonian neural
//! networks in No-U-Turn Sampling" (`bnn study lhnn`): per benchmark target, an L-HNN trained on
//! true-gradient leapfrog trajectories drives NUTS leaves, and the true gradients spent per
//! effective sample are compared with NUTS.
//!
//! Samplers per target, all from the same start:
//! - `lhnn-exact`: surrogate leaves weighted by the true H (exact for any surrogate), fixed ε;
//! - `lhnn-adapted`: the same leaves with ε and a diagonal metric from a true-gradient NUTS warmup
//!   (Stan's windows; the paper tunes neither);
//! - `lhnn-monitored`: the paper's online error monitoring (Δ_hnn = 10, Δ_lf = 1000, cool-down
//!   20; approximate), fixed ε;
//! - `nuts-fixed`: the paper's baseline, NUTS with the same fixed ε and no adaptation;
//! - `nuts-adapted`: our NUTS with Stan's warmup (step size and diagonal metric).
//!
//! True gradients are counted at the density (every row of every value-and-gradient call), the
//! L-HNN's training trajectories included in its total; value-only evaluations and surrogate
//! forces are counted apart. Marginals are checked against a long adapted-NUTS reference by a
//! two-sample Kolmogorov–Smirnov test on draws thinned to about one per effective sample.

pub mod bnn;
mod report;
pub mod targets;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context as _, Result};
use bnn_model::UnknownName;
use bnn_sampler::{
    chain_rng, ChainStart, CollectedDraws, DiagonalMassMatrix, DrawStats, Kernel, KernelState,
    LogDensity, LogDensityError, Nuts, NutsConfig, SamplerConfig, StepParams, SurrogateCounts,
    SurrogateNuts, SurrogateNutsConfig, TunedParams,
};
use bnn_surrogate::{
    LatentHnnConfig, LhnnSurrogate, LhnnTrainingConfig, LossRecord, TrajectoryDataConfig,
};

use crate::fixed_step_chains::Progress;
use crate::worker_pool::run_jobs;
pub use targets::{Benchmark, BenchmarkDensity};

/// The samplers of the comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LhnnSampler {
    LhnnExact,
    /// Exact surrogate leaves with ε and the diagonal metric from a true-gradient NUTS warmup
    /// (Stan's windows) in place of the burn-in.
    LhnnAdapted,
    LhnnMonitored,
    NutsFixed,
    NutsAdapted,
}

impl LhnnSampler {
    pub const ALL: [LhnnSampler; 5] = [
        LhnnSampler::LhnnExact,
        LhnnSampler::LhnnAdapted,
        LhnnSampler::LhnnMonitored,
        LhnnSampler::NutsFixed,
        LhnnSampler::NutsAdapted,
    ];

    pub fn name(self) -> &'static str {
        match self {
            LhnnSampler::LhnnExact => "lhnn-exact",
            LhnnSampler::LhnnAdapted => "lhnn-adapted",
            LhnnSampler::LhnnMonitored => "lhnn-monitored",
            LhnnSampler::NutsFixed => "nuts-fixed",
            LhnnSampler::NutsAdapted => "nuts-adapted",
        }
    }

    fn uses_surrogate(self) -> bool {
        matches!(
            self,
            LhnnSampler::LhnnExact | LhnnSampler::LhnnAdapted | LhnnSampler::LhnnMonitored
        )
    }
}

impl std::str::FromStr for LhnnSampler {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, UnknownName> {
        LhnnSampler::ALL
            .into_iter()
            .find(|a| a.name() == s)
            .ok_or_else(|| UnknownName::new("sampler", s, LhnnSampler::ALL.map(LhnnSampler::name)))
    }
}

/// What the study runs.
#[derive(Clone, Debug)]
pub struct LhnnStudyConfig {
    pub benchmarks: Vec<Benchmark>,
    pub samplers: Vec<LhnnSampler>,
    /// The fixed step size of the L-HNN samplers and of the baseline (paper: 0.025).
    pub step_size: f64,
    /// Chains per sampler, each from the benchmark's start with its own stream.
    pub chains: usize,
    /// Transitions discarded per chain (the adapted NUTS's warmup).
    pub burn_in: usize,
    /// Transitions kept per chain.
    pub draws: usize,
    /// Tree depth cap of every NUTS (the paper's baseline had none; 2^depth − 1 leaves at most).
    pub max_tree_depth: u32,
    /// L-HNN training trajectories (paper: 40), their length in time units (paper: 250) and step.
    pub trajectories: usize,
    pub end_time: f64,
    pub training_step_size: f64,
    /// L-HNN shape (paper: 3 hidden sine layers of 100) and Adam steps (batch 1000, lr 5e-4,
    /// weight decay 1e-4).
    pub hidden_width: usize,
    pub hidden_layers: usize,
    pub training_steps: usize,
    pub learning_rate: f64,
    /// Draws per chain of the adapted-NUTS reference the marginals are tested against (4 chains).
    pub reference_draws: usize,
    pub seed: u64,
    /// Chains run at once (default: all cores).
    pub workers: Option<usize>,
    /// The BNN part (deep-ensemble starts, DEI-NUTS against DEI-L-HNN); no problems: skipped.
    pub bnn: bnn::LhnnBnnConfig,
}

impl Default for LhnnStudyConfig {
    fn default() -> Self {
        Self {
            benchmarks: Benchmark::ALL.to_vec(),
            samplers: LhnnSampler::ALL.to_vec(),
            step_size: 0.025,
            chains: 2,
            burn_in: 200,
            draws: 3000,
            max_tree_depth: 12,
            trajectories: 40,
            end_time: 250.0,
            training_step_size: 0.025,
            hidden_width: 100,
            hidden_layers: 3,
            training_steps: 5000,
            learning_rate: 5e-4,
            reference_draws: 10_000,
            seed: 0,
            workers: None,
            bnn: bnn::LhnnBnnConfig {
                problems: Vec::new(),
                ..bnn::LhnnBnnConfig::default()
            },
        }
    }
}

impl LhnnStudyConfig {
    fn validate(&self) -> Result<()> {
        if (self.benchmarks.is_empty() && self.bnn.problems.is_empty())
            || self.samplers.is_empty()
            || self.chains == 0
        {
            bail!("the study needs at least one benchmark (or BNN problem), one sampler and one chain");
        }
        if self.draws < 20 || self.reference_draws < 20 {
            bail!(
                "draws ({}) and reference draws ({}) must be at least 20 per chain",
                self.draws,
                self.reference_draws
            );
        }
        if !(self.step_size > 0.0
            && self.step_size.is_finite()
            && self.training_step_size > 0.0
            && self.end_time > 0.0)
        {
            bail!("step sizes and the trajectories' end time must be positive");
        }
        if self.max_tree_depth == 0 || self.max_tree_depth > 20 {
            bail!(
                "max tree depth must lie in 1..=20, got {}",
                self.max_tree_depth
            );
        }
        if self.trajectories == 0
            || self.training_steps == 0
            || self.hidden_width == 0
            || self.hidden_layers == 0
        {
            bail!("the L-HNN needs trajectories, training steps and hidden units");
        }
        Ok(())
    }
}

/// A density that counts what it evaluates: true gradients (rows of value-and-gradient calls) and
/// true values (rows of value-only calls).
pub(crate) struct Counted<'a, L> {
    inner: &'a L,
    pub(crate) gradients: AtomicU64,
    pub(crate) values: AtomicU64,
}

impl<'a, L: LogDensity> Counted<'a, L> {
    pub(crate) fn new(inner: &'a L) -> Self {
        Self {
            inner,
            gradients: AtomicU64::new(0),
            values: AtomicU64::new(0),
        }
    }
}

impl<L: LogDensity> LogDensity for Counted<'_, L> {
    fn dim(&self) -> usize {
        self.inner.dim()
    }

    fn log_density_and_gradient(
        &self,
        positions: &[f64],
        values: &mut [f64],
        gradients: &mut [f64],
    ) -> Result<(), LogDensityError> {
        self.gradients
            .fetch_add(values.len() as u64, Ordering::Relaxed);
        self.inner
            .log_density_and_gradient(positions, values, gradients)
    }

    fn log_density(&self, positions: &[f64], values: &mut [f64]) -> Result<(), LogDensityError> {
        self.values
            .fetch_add(values.len() as u64, Ordering::Relaxed);
        self.inner.log_density(positions, values)
    }
}

/// The L-HNN of one benchmark and what it cost.
#[derive(Clone, Debug)]
pub struct TrainedSurrogate {
    pub surrogate: Arc<LhnnSurrogate>,
    /// True gradients spent on the training trajectories.
    pub training_gradients: u64,
    pub data_points: usize,
    pub history: Vec<LossRecord>,
    pub initial_loss: f64,
    pub final_loss: f64,
    pub data_seconds: f64,
    pub training_seconds: f64,
}

/// What a sampler spent and how its kept transitions went: one chain's, or several summed.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SamplerCosts {
    /// True gradients and values of burn-in and sampling (the start's one gradient included).
    pub true_gradients: u64,
    pub true_values: u64,
    pub surrogate_gradients: u64,
    /// Leaves of the kept transitions.
    pub leaves: u64,
    pub divergences: usize,
    /// Kept transitions that reached the tree depth cap.
    pub at_depth_cap: usize,
    /// Leaves recomputed with the true gradient (monitored mode).
    pub fallbacks: u64,
}

impl std::ops::AddAssign for SamplerCosts {
    fn add_assign(&mut self, other: Self) {
        self.true_gradients += other.true_gradients;
        self.true_values += other.true_values;
        self.surrogate_gradients += other.surrogate_gradients;
        self.leaves += other.leaves;
        self.divergences += other.divergences;
        self.at_depth_cap += other.at_depth_cap;
        self.fallbacks += other.fallbacks;
    }
}

/// One chain of one sampler on one benchmark.
#[derive(Clone, Debug)]
pub struct ChainRun {
    pub benchmark: Benchmark,
    pub sampler: LhnnSampler,
    pub chain: usize,
    /// Kept draws, one row per draw.
    pub draws: Vec<Vec<f64>>,
    pub costs: SamplerCosts,
    pub mean_accept: f64,
    pub step_size: f64,
    pub seconds: f64,
}

/// Per benchmark and sampler, the chains pooled.
#[derive(Clone, Debug)]
pub struct SamplerSummary {
    pub benchmark: Benchmark,
    pub sampler: LhnnSampler,
    /// Bulk ESS per coordinate (pooled chains).
    pub ess: Vec<f64>,
    /// The chains' costs, summed.
    pub costs: SamplerCosts,
    /// Training trajectories' gradients (L-HNN samplers; 0 otherwise).
    pub training_gradients: u64,
    pub transitions: usize,
    pub mean_accept: f64,
    pub step_size: f64,
    /// Sampling wall time summed over chains, and the surrogate's data and training time.
    pub seconds: f64,
    pub training_seconds: f64,
    /// Per coordinate: the two-sample KS statistic against the reference and its p-value.
    pub ks: Vec<(f64, f64)>,
}

impl SamplerSummary {
    pub fn min_ess(&self) -> f64 {
        self.ess.iter().copied().fold(f64::INFINITY, f64::min)
    }

    pub fn median_ess(&self) -> f64 {
        let mut sorted = self.ess.clone();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        if n % 2 == 1 {
            sorted[n / 2]
        } else {
            0.5 * (sorted[n / 2 - 1] + sorted[n / 2])
        }
    }

    /// Every true gradient the sampler cost: sampling plus, for the L-HNN, its training data.
    pub fn total_gradients(&self) -> u64 {
        self.costs.true_gradients + self.training_gradients
    }
}

/// What `run_lhnn_study` wrote and found.
pub struct LhnnReport {
    pub surrogates: Vec<(Benchmark, TrainedSurrogate)>,
    pub summaries: Vec<SamplerSummary>,
    /// The BNN part's rows (empty when it did not run).
    pub bnn: Vec<bnn::BnnComparison>,
    pub files: Vec<PathBuf>,
}

/// Runs the comparison and writes `summary.csv`, `training.csv`, `lhnn.md` and SVGs into `out`
/// (new or empty).
pub fn run_lhnn_study(
    config: &LhnnStudyConfig,
    out: &Path,
    progress: &dyn Progress,
    stop: &AtomicBool,
) -> Result<LhnnReport> {
    config.validate()?;
    if out.exists()
        && out
            .read_dir()
            .map(|mut d| d.next().is_some())
            .unwrap_or(true)
    {
        bail!(
            "{} is not empty; the study writes into a new or empty folder",
            out.display()
        );
    }
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let mut surrogates = Vec::new();
    let mut summaries = Vec::new();
    let mut references = Vec::new();
    for &benchmark in &config.benchmarks {
        let trained = if config.samplers.iter().any(|s| s.uses_surrogate()) {
            Some(train_surrogate(config, benchmark, progress, stop)?)
        } else {
            None
        };
        let reference = reference_draws(config, benchmark, progress, stop)?;
        let runs = run_chains(config, benchmark, trained.as_ref(), progress, stop)?;
        for &sampler in &config.samplers {
            let chains: Vec<&ChainRun> = runs.iter().filter(|r| r.sampler == sampler).collect();
            summaries.push(summarize(
                benchmark,
                sampler,
                &chains,
                trained.as_ref(),
                &reference,
            ));
        }
        references.push((benchmark, reference, runs));
        if let Some(trained) = trained {
            surrogates.push((benchmark, trained));
        }
    }
    let bnn_rows = if config.bnn.problems.is_empty() {
        Vec::new()
    } else {
        bnn::run_lhnn_bnn(&config.bnn, progress, stop)?
    };
    let mut files = Vec::new();
    if !summaries.is_empty() {
        files.extend(report::write_summary_csv(out, &summaries)?);
        files.extend(report::write_training_csv(out, &surrogates)?);
        files.extend(report::write_marginal_charts(out, &references)?);
        files.extend(report::write_training_charts(out, &surrogates)?);
    }
    if !bnn_rows.is_empty() {
        files.push(bnn::write_bnn_csv(out, &bnn_rows)?);
    }
    files.push(report::write_markdown(
        out,
        config,
        &surrogates,
        &summaries,
        &bnn_rows,
    )?);
    Ok(LhnnReport {
        surrogates,
        summaries,
        bnn: bnn_rows,
        files,
    })
}

/// Generates the training trajectories from the benchmark's start and trains the L-HNN.
pub fn train_surrogate(
    config: &LhnnStudyConfig,
    benchmark: Benchmark,
    progress: &dyn Progress,
    stop: &AtomicBool,
) -> Result<TrainedSurrogate> {
    let density = benchmark.density();
    let data_config = TrajectoryDataConfig::new()
        .with_trajectories(config.trajectories)
        .with_end_time(config.end_time)
        .with_step_size(config.training_step_size)
        .with_seed(config.seed);
    progress.stage(
        &format!("{benchmark}: training trajectories"),
        config.trajectories as u64,
    );
    let started = Instant::now();
    let data = data_config
        .generate_with_progress(&density, &benchmark.start(), |_, _| progress.advance(1))
        .with_context(|| format!("generating {benchmark}'s training trajectories"))?;
    let data_seconds = started.elapsed().as_secs_f64();
    if stop.load(Ordering::Relaxed) {
        bail!("interrupted; nothing written");
    }
    let network = LatentHnnConfig::new(benchmark.dim())
        .with_hidden_width(config.hidden_width)
        .with_hidden_layers(config.hidden_layers);
    let training = LhnnTrainingConfig::new()
        .with_steps(config.training_steps)
        .with_learning_rate(config.learning_rate)
        .with_seed(config.seed);
    progress.stage(
        &format!("{benchmark}: L-HNN training"),
        config.training_steps as u64,
    );
    let device = bnn_model::DeviceName::Flex.device()?;
    let started = Instant::now();
    let mut last_step = 0;
    let trained = training
        .train(&network, &data, &device, |step, _| {
            progress.advance((step - last_step) as u64);
            last_step = step;
        })
        .with_context(|| format!("training {benchmark}'s L-HNN"))?;
    Ok(TrainedSurrogate {
        surrogate: Arc::new(trained.surrogate),
        training_gradients: data.true_gradients,
        data_points: data.len(),
        history: trained.history,
        initial_loss: trained.initial_loss,
        final_loss: trained.final_loss,
        data_seconds,
        training_seconds: started.elapsed().as_secs_f64(),
    })
}

/// A long adapted-NUTS run (4 chains) whose draws the others' marginals are tested against.
fn reference_draws(
    config: &LhnnStudyConfig,
    benchmark: Benchmark,
    progress: &dyn Progress,
    stop: &AtomicBool,
) -> Result<Vec<Vec<Vec<f64>>>> {
    let density = benchmark.density();
    let chains = 4;
    progress.stage(&format!("{benchmark}: reference NUTS"), 1);
    let sampler = SamplerConfig::new(
        NutsConfig::new()
            .with_max_tree_depth(config.max_tree_depth)
            .into(),
    )
    .with_num_warmup(config.burn_in.max(1000))
    .with_num_draws(config.reference_draws)
    .with_seed(config.seed.wrapping_add(1_000_003))
    .init()?;
    let starts: Vec<ChainStart> = (0..chains)
        .map(|_| ChainStart::at(benchmark.start()))
        .collect();
    let draws = sampler
        .sample(&density, &starts)
        .with_context(|| format!("{benchmark}'s reference run"))?;
    progress.advance(1);
    if stop.load(Ordering::Relaxed) {
        bail!("interrupted; nothing written");
    }
    Ok((0..benchmark.dim()).map(|i| draws.coordinate(i)).collect())
}

/// Every sampler's chains on one benchmark, `workers` at a time.
fn run_chains(
    config: &LhnnStudyConfig,
    benchmark: Benchmark,
    trained: Option<&TrainedSurrogate>,
    progress: &dyn Progress,
    stop: &AtomicBool,
) -> Result<Vec<ChainRun>> {
    let jobs: Vec<(LhnnSampler, usize)> = config
        .samplers
        .iter()
        .flat_map(|&s| (0..config.chains).map(move |c| (s, c)))
        .collect();
    progress.stage(
        &format!("{benchmark}: chains' transitions"),
        (jobs.len() * (config.burn_in + config.draws)) as u64,
    );
    let runs = run_jobs(&jobs, config.workers, stop, |&(sampler, chain)| {
        run_chain(config, benchmark, sampler, chain, trained, progress, stop)
    })?;
    Ok(runs)
}

fn run_chain(
    config: &LhnnStudyConfig,
    benchmark: Benchmark,
    sampler: LhnnSampler,
    chain: usize,
    trained: Option<&TrainedSurrogate>,
    progress: &dyn Progress,
    stop: &AtomicBool,
) -> Result<ChainRun> {
    let density = benchmark.density();
    let counted = Counted::new(&density);
    let dim = benchmark.dim();
    let seed = config.seed.wrapping_add(
        1 + LhnnSampler::ALL
            .iter()
            .position(|&s| s == sampler)
            .unwrap_or(0) as u64
            * 7919,
    );
    let started = Instant::now();
    let mut run = ChainRun {
        benchmark,
        sampler,
        chain,
        draws: Vec::with_capacity(config.draws),
        costs: SamplerCosts::default(),
        mean_accept: 0.0,
        step_size: config.step_size,
        seconds: 0.0,
    };
    let mut accept_sum = 0.0;
    let mut record = |run: &mut ChainRun, i: usize, position: &[f64], stats: &DrawStats| {
        progress.advance(1);
        if i >= config.burn_in {
            run.draws.push(position.to_vec());
            run.costs.divergences += usize::from(stats.divergent);
            run.costs.at_depth_cap += usize::from(stats.tree_depth >= config.max_tree_depth);
            run.costs.leaves += u64::from(stats.n_leapfrog);
            accept_sum += stats.accept_stat;
        }
    };
    if sampler == LhnnSampler::NutsAdapted {
        let sampler_config = SamplerConfig::new(
            NutsConfig::new()
                .with_max_tree_depth(config.max_tree_depth)
                .into(),
        )
        .with_num_warmup(config.burn_in)
        .with_num_draws(config.draws)
        .with_seed(seed.wrapping_add(chain as u64 * 104_729))
        .with_threads(Some(1))
        .init()?;
        let draws = sampler_config.sample(&counted, &[ChainStart::at(benchmark.start())])?;
        progress.advance(config.burn_in as u64);
        let coordinates: Vec<Vec<f64>> = (0..dim)
            .map(|d| draws.coordinate(d).swap_remove(0))
            .collect();
        for (i, stats) in draws.stats(0).iter().enumerate() {
            let position: Vec<f64> = coordinates.iter().map(|c| c[i]).collect();
            record(&mut run, config.burn_in + i, &position, stats);
        }
        run.step_size = draws.stats(0).first().map_or(f64::NAN, |s| s.step_size);
    } else {
        let mut rng = chain_rng(seed, chain);
        let mut state = KernelState::init(&counted, benchmark.start())
            .map_err(|e| anyhow::anyhow!("{benchmark}: the start is not usable: {e:?}"))?;
        let mut kernel = match sampler {
            LhnnSampler::NutsFixed => FixedKernel::Nuts(
                NutsConfig::new()
                    .with_max_tree_depth(config.max_tree_depth)
                    .init(dim)?,
            ),
            _ => {
                let surrogate = Arc::clone(
                    &trained
                        .context("the L-HNN samplers need a trained surrogate")?
                        .surrogate,
                );
                FixedKernel::Surrogate(
                    SurrogateNutsConfig::new()
                        .with_nuts(NutsConfig::new().with_max_tree_depth(config.max_tree_depth))
                        .with_adaptive(sampler == LhnnSampler::LhnnMonitored)
                        .init(dim, surrogate)?,
                )
            }
        };
        // The adapted L-HNN sampler takes ε and the diagonal metric from a NUTS warmup with true
        // gradients (Stan's windows, counted in its cost) and samples from where it ended: the
        // metric changes the leapfrog on the surrogate potential, which stays exact under any.
        // (Tuning ε on surrogate transitions instead lets the dual averaging chase the acceptance
        // of a poor surrogate down to tiny steps and the depth cap.)
        let mut tuned = TunedParams::new(config.step_size, DiagonalMassMatrix::identity(dim));
        let mut first = 0;
        if sampler == LhnnSampler::LhnnAdapted {
            let warmup = SamplerConfig::new(
                NutsConfig::new()
                    .with_max_tree_depth(config.max_tree_depth)
                    .into(),
            )
            .with_num_warmup(config.burn_in)
            .with_num_draws(0)
            .with_seed(seed.wrapping_add(chain as u64 * 104_729))
            .with_threads(Some(1))
            .init()?;
            let mut chains = warmup.init_chains(&counted, &[ChainStart::at(benchmark.start())])?;
            warmup.run(
                &counted,
                &mut chains,
                &mut CollectedDraws::new(1, dim),
                stop,
            )?;
            state = chains[0].kernel.clone();
            tuned = chains[0].params.clone();
            first = config.burn_in;
            progress.advance(config.burn_in as u64);
        }
        for i in first..config.burn_in + config.draws {
            if stop.load(Ordering::Relaxed) {
                bail!("interrupted");
            }
            let (next, stats) = kernel.step(
                &counted,
                &mut rng,
                std::mem::take(&mut state),
                tuned.step_params(),
            )?;
            state = next;
            run.costs.surrogate_gradients +=
                u64::from(SurrogateCounts::of(&stats).surrogate_gradients);
            record(&mut run, i, &state.position, &stats);
        }
        run.step_size = tuned.step_size;
        if let FixedKernel::Surrogate(kernel) = &kernel {
            run.costs.fallbacks = kernel.fallbacks();
        }
    }
    run.costs.true_gradients = counted.gradients.load(Ordering::Relaxed);
    run.costs.true_values = counted.values.load(Ordering::Relaxed);
    run.mean_accept = accept_sum / config.draws as f64;
    run.seconds = started.elapsed().as_secs_f64();
    Ok(run)
}

/// The kernels the study steps itself (the adapted NUTS runs through `Sampler`).
// One per worker thread, so the surrogate's size in the enum costs nothing worth a box.
#[allow(clippy::large_enum_variant)]
enum FixedKernel {
    Nuts(Nuts),
    Surrogate(SurrogateNuts<LhnnSurrogate>),
}

impl FixedKernel {
    fn step<L: LogDensity, R: rand::Rng + Send>(
        &mut self,
        density: &L,
        rng: &mut R,
        state: KernelState,
        params: StepParams<'_>,
    ) -> Result<(KernelState, DrawStats), LogDensityError> {
        match self {
            FixedKernel::Nuts(kernel) => kernel.step(density, rng, state, params),
            FixedKernel::Surrogate(kernel) => kernel.step(density, rng, state, params),
        }
    }
}

/// Pools one sampler's chains: ESS per coordinate, costs, KS against the reference.
fn summarize(
    benchmark: Benchmark,
    sampler: LhnnSampler,
    chains: &[&ChainRun],
    trained: Option<&TrainedSurrogate>,
    reference: &[Vec<Vec<f64>>],
) -> SamplerSummary {
    let dim = benchmark.dim();
    let coordinate = |i: usize| -> Vec<Vec<f64>> {
        chains
            .iter()
            .map(|c| c.draws.iter().map(|q| q[i]).collect())
            .collect()
    };
    let ess: Vec<f64> = (0..dim)
        .map(|i| bnn_diagnostics::ess_bulk(&coordinate(i)))
        .collect();
    let ks = (0..dim)
        .map(|i| {
            let ours = coordinate(i);
            let theirs = &reference[i];
            ks_thinned(&ours, ess[i], theirs, bnn_diagnostics::ess_bulk(theirs))
        })
        .collect();
    let mut costs = SamplerCosts::default();
    chains.iter().for_each(|c| costs += c.costs);
    let transitions: usize = chains.iter().map(|c| c.draws.len()).sum();
    SamplerSummary {
        benchmark,
        sampler,
        ess,
        costs,
        training_gradients: if sampler.uses_surrogate() {
            trained.map_or(0, |t| t.training_gradients)
        } else {
            0
        },
        transitions,
        mean_accept: chains.iter().map(|c| c.mean_accept).sum::<f64>() / chains.len().max(1) as f64,
        step_size: chains.first().map_or(f64::NAN, |c| c.step_size),
        seconds: chains.iter().map(|c| c.seconds).sum(),
        training_seconds: if sampler.uses_surrogate() {
            trained.map_or(0.0, |t| t.data_seconds + t.training_seconds)
        } else {
            0.0
        },
        ks,
    }
}

/// Two-sample KS statistic and asymptotic p-value of two sets of chains, each thinned to about
/// one draw per effective sample (so the independence the test assumes roughly holds).
fn ks_thinned(
    ours: &[Vec<f64>],
    ours_ess: f64,
    theirs: &[Vec<f64>],
    theirs_ess: f64,
) -> (f64, f64) {
    let thin = |chains: &[Vec<f64>], ess: f64| -> Vec<f64> {
        let total: usize = chains.iter().map(Vec::len).sum();
        let step = ((total as f64 / ess.max(1.0)).ceil() as usize).max(1);
        chains
            .iter()
            .flat_map(|c| c.iter().step_by(step).copied())
            .collect()
    };
    two_sample_ks(&thin(ours, ours_ess), &thin(theirs, theirs_ess))
}

/// The two-sample Kolmogorov–Smirnov statistic `D` and its asymptotic p-value (Kolmogorov's
/// distribution with Stephens' small-sample correction of the argument).
pub fn two_sample_ks(a: &[f64], b: &[f64]) -> (f64, f64) {
    let sorted = |x: &[f64]| {
        let mut v: Vec<f64> = x.iter().copied().filter(|v| v.is_finite()).collect();
        v.sort_by(f64::total_cmp);
        v
    };
    let (a, b) = (sorted(a), sorted(b));
    if a.is_empty() || b.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    let (n, m) = (a.len() as f64, b.len() as f64);
    let (mut i, mut j, mut d) = (0, 0, 0.0f64);
    while i < a.len() && j < b.len() {
        let x = a[i].min(b[j]);
        while i < a.len() && a[i] <= x {
            i += 1;
        }
        while j < b.len() && b[j] <= x {
            j += 1;
        }
        d = d.max((i as f64 / n - j as f64 / m).abs());
    }
    let effective = (n * m / (n + m)).sqrt();
    let lambda = (effective + 0.12 + 0.11 / effective) * d;
    (d, kolmogorov_survival(lambda))
}

/// `Q(λ) = 2 Σ_{k≥1} (−1)^{k−1} e^{−2k²λ²}`, the Kolmogorov distribution's upper tail.
fn kolmogorov_survival(lambda: f64) -> f64 {
    if lambda < 0.2 {
        return 1.0;
    }
    let mut sum = 0.0;
    for k in 1..=100 {
        let k = k as f64;
        let term = (-2.0 * k * k * lambda * lambda).exp();
        sum += if k as u64 % 2 == 1 { term } else { -term };
        if term < 1e-16 {
            break;
        }
    }
    (2.0 * sum).clamp(0.0, 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ks_separates_shifted_samples_and_accepts_equal_ones() {
        let grid = |shift: f64| -> Vec<f64> {
            (0..400).map(|i| (i as f64 + 0.5) / 400.0 + shift).collect()
        };
        let (d, p) = two_sample_ks(&grid(0.0), &grid(0.0));
        assert!(d < 1e-12 && p > 0.99, "identical samples: D = {d}, p = {p}");
        let (d, p) = two_sample_ks(&grid(0.0), &grid(0.2));
        assert!(
            (d - 0.2).abs() < 0.01 && p < 1e-6,
            "shift 0.2: D = {d}, p = {p}"
        );
        // Q(1.36) ≈ 0.049: the familiar 5% critical value.
        assert!((kolmogorov_survival(1.36) - 0.049).abs() < 0.002);
    }
}

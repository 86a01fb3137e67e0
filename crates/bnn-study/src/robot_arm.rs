//! Zlochin & Baram's comparison of manifold stochastic dynamics (MSD) with HMC on MacKay's robot
//! arm (`bnn study robot-arm`): the generated data (rows 0–199 train, 200–399 test, noise sd
//! 0.05), a 2-H-2 tanh network with the noise precision β = 1/0.05² = 400 fixed and N(0, s²)
//! priors, sampled from the same starts by MSD (exact and frozen-metric), HMC with a long and a
//! short trajectory and NUTS, every sampler's step size tuned in its warmup to the same
//! acceptance rate.
//!
//! Reported per sampler over seeds: test MSE per output (predictions from every `thin`-th draw)
//! beside the noise floor, the autocorrelation of input-to-hidden and hidden-to-output weights
//! and of the training log-likelihood against lag, and the cost per iteration and per effective
//! sample, both as an analytic floating-point operation count (from counted operations) and as
//! measured wall time. The paper's claims (its stored text lost the numbers) stand beside ours in
//! `robot_arm.md`.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use anyhow::{anyhow, bail, Context as _, Result};
use bnn_model::{
    initial_parameters, Activation, AutodiffLogDensity, BnnConfig, EnsembleConfig, HostData,
    Likelihood, MlpPosterior, ParameterKind, Posterior, Prior, PriorSpec, UnknownName,
};
use bnn_plot::{LegendPosition, LineChart, Series};
use bnn_sampler::{
    AlgorithmConfig, ChainStart, CollectedDraws, Draw, DrawSink, HmcConfig, LogDensity,
    LogDensityError, MetricAt, MsdConfig, NutsConfig, RiemannianDensity, SamplerConfig, SinkError,
};
use burn::tensor::DType;

use crate::fixed_step_chains::Progress;
use crate::worker_pool::run_jobs;
use crate::{describe_cpu, MeanSe};

/// The noise sd of the robot arm's generator and of the fixed-σ likelihood (β = 400).
pub const NOISE_SD: f64 = 0.05;

/// The samplers of the comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArmSampler {
    /// MSD with the exact (generalized leapfrog) integrator.
    Msd,
    /// MSD with the metric frozen within the step (the paper's cheap variant; approximate).
    MsdFrozen,
    /// HMC with the long trajectory (`long_steps` leapfrog steps).
    HmcLong,
    /// HMC with the short trajectory (`short_steps`).
    HmcShort,
    Nuts,
}

impl ArmSampler {
    pub const ALL: [ArmSampler; 5] = [
        ArmSampler::Msd,
        ArmSampler::MsdFrozen,
        ArmSampler::HmcLong,
        ArmSampler::HmcShort,
        ArmSampler::Nuts,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ArmSampler::Msd => "msd",
            ArmSampler::MsdFrozen => "msd-frozen",
            ArmSampler::HmcLong => "hmc-long",
            ArmSampler::HmcShort => "hmc-short",
            ArmSampler::Nuts => "nuts",
        }
    }
}

impl FromStr for ArmSampler {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, UnknownName> {
        ArmSampler::ALL
            .into_iter()
            .find(|a| a.name() == s)
            .ok_or_else(|| UnknownName::new("sampler", s, ArmSampler::ALL.map(ArmSampler::name)))
    }
}

/// What the study runs.
#[derive(Clone, Debug)]
pub struct RobotArmConfig {
    pub samplers: Vec<ArmSampler>,
    /// Hidden tanh units.
    pub hidden: usize,
    /// Prior sd of every weight and bias.
    pub prior_scale: f64,
    pub long_steps: usize,
    pub short_steps: usize,
    /// Acceptance rate every sampler's warmup tunes its step size to (the paper kept the
    /// rejection rates equal).
    pub target_accept: f64,
    /// MSD's momentum persistence cos α (HMC resamples its momentum every iteration).
    pub persistence: f64,
    pub seeds: usize,
    /// Warmup iterations (step-size adaptation), discarded.
    pub warmup: usize,
    /// Iterations kept after the warmup.
    pub draws: usize,
    /// Predictions average every `thin`-th kept draw (the paper: every 20th).
    pub thin: usize,
    /// Largest lag of the autocorrelation curves.
    pub max_lag: usize,
    /// Full-batch Adam steps (lr 0.01) from a network initialization to each seed's start; 0
    /// starts the chains at the initialization itself (the paper's setting, whose first samples
    /// it discarded while the chains found the high-probability region).
    pub start_epochs: usize,
    /// Seed of the starts and the chains' streams; the data's generator seed is 0.
    pub seed: u64,
    /// Jobs run at once (default: all cores); each job is one chain on one thread.
    pub workers: Option<usize>,
}

impl Default for RobotArmConfig {
    fn default() -> Self {
        Self {
            samplers: ArmSampler::ALL.to_vec(),
            hidden: 16,
            prior_scale: 1.0,
            long_steps: 100,
            short_steps: 30,
            target_accept: 0.9,
            persistence: 0.95,
            seeds: 3,
            warmup: 300,
            draws: 1000,
            thin: 20,
            max_lag: 100,
            start_epochs: 2000,
            seed: 0,
            workers: None,
        }
    }
}

impl RobotArmConfig {
    fn validate(&self) -> Result<()> {
        if self.samplers.is_empty() || self.seeds == 0 || self.hidden == 0 {
            bail!("the study needs at least one sampler, one seed and one hidden unit");
        }
        if self.draws < 2 * self.thin.max(1) || self.thin == 0 {
            bail!(
                "draws ({}) must hold at least two predictions every {} draws",
                self.draws,
                self.thin
            );
        }
        if self.long_steps == 0
            || self.short_steps == 0
            || !(self.target_accept > 0.0 && self.target_accept < 1.0)
        {
            bail!("trajectory lengths must be positive and the target acceptance in (0, 1)");
        }
        if !(self.prior_scale > 0.0) || !(0.0..1.0).contains(&self.persistence) {
            bail!("the prior scale must be positive and the persistence in [0, 1)");
        }
        if self.max_lag == 0 || self.max_lag >= self.draws {
            bail!("max_lag must lie in 1..draws");
        }
        Ok(())
    }

    fn model(&self) -> BnnConfig {
        BnnConfig::new(2)
            .with_n_targets(2)
            .with_hidden(vec![self.hidden])
            .with_activation(Activation::Tanh)
            .with_likelihood(Likelihood::GaussianFixed { sigma: NOISE_SD })
            .with_prior(PriorSpec::uniform(Prior::Normal {
                scale: self.prior_scale,
            }))
    }
}

/// Operation counts of one chain, for the analytic cost.
#[derive(Default)]
struct Counts {
    gradients: AtomicU64,
    metrics: AtomicU64,
    log_det_gradients: AtomicU64,
    kinetic_gradients: AtomicU64,
    potentials: AtomicU64,
}

/// The MLP's metric, counting what MSD asks of it.
struct CountedMetric<'a> {
    inner: bnn_model::GaussNewtonDensity,
    counts: &'a Counts,
}

impl RiemannianDensity for CountedMetric<'_> {
    fn dim(&self) -> usize {
        self.inner.dim()
    }
    fn evaluate(&self, position: &[f64], gradient: &mut [f64]) -> Result<f64, LogDensityError> {
        self.counts.potentials.fetch_add(1, Ordering::Relaxed);
        self.inner.evaluate(position, gradient)
    }
    fn metric_at(&self, position: &[f64]) -> Result<MetricAt, LogDensityError> {
        self.counts.metrics.fetch_add(1, Ordering::Relaxed);
        self.inner.metric_at(position)
    }
    fn log_det_gradient(&self, point: &MetricAt) -> Result<Vec<f64>, LogDensityError> {
        self.counts
            .log_det_gradients
            .fetch_add(1, Ordering::Relaxed);
        self.inner.log_det_gradient(point)
    }
    fn kinetic_gradient(
        &self,
        point: &MetricAt,
        velocity: &[f64],
    ) -> Result<Vec<f64>, LogDensityError> {
        self.counts
            .kinetic_gradients
            .fetch_add(1, Ordering::Relaxed);
        self.inner.kinetic_gradient(point, velocity)
    }
}

/// The posterior as the sampler sees it, counting gradients, with the metric for MSD.
struct CountedDensity<'a> {
    inner: AutodiffLogDensity<MlpPosterior>,
    metric: Option<CountedMetric<'a>>,
    counts: &'a Counts,
}

impl LogDensity for CountedDensity<'_> {
    fn dim(&self) -> usize {
        self.inner.dim()
    }
    fn log_density_and_gradient(
        &self,
        positions: &[f64],
        log_densities: &mut [f64],
        gradients: &mut [f64],
    ) -> Result<(), LogDensityError> {
        self.counts
            .gradients
            .fetch_add(log_densities.len() as u64, Ordering::Relaxed);
        self.inner
            .log_density_and_gradient(positions, log_densities, gradients)
    }
    fn riemannian(&self) -> Option<&dyn RiemannianDensity> {
        self.metric.as_ref().map(|m| m as &dyn RiemannianDensity)
    }
}

/// Floating-point operations of the counted operations for a net with `w` weights and biases,
/// `n` rows and `k` outputs (multiply-adds count 2; leading terms only).
struct FlopModel {
    gradient: f64,
    metric: f64,
    log_det_gradient: f64,
    kinetic_gradient: f64,
    potential: f64,
}

impl FlopModel {
    fn new(n: usize, k: usize, d: usize) -> Self {
        let (n, k, d) = (n as f64, k as f64, d as f64);
        // Forward 2nd, backward 4nd (weights' and inputs' gradients).
        let gradient = 6.0 * n * d;
        // Jacobian: a forward and k reverse passes per row; G: n·k rank-one updates of d²
        // (multiply-add each); Cholesky d³/3.
        let metric = n * (2.0 * d + k * 2.0 * d) + 2.0 * n * k * d * d + d * d * d / 3.0;
        // n·k triangular solves pairs (2d² each), k² dot products, an R-pass pair (8d) per output.
        let log_det_gradient = n * k * (2.0 * d * d + 2.0 * k * d + 8.0 * d) + 2.0 * n * d;
        // One solve for G⁻¹p, J u, a forward and one weighted R-pass pair per row.
        let kinetic_gradient = 2.0 * d * d + 2.0 * n * k * d + n * 10.0 * d;
        let potential = n * (4.0 * d + 2.0 * k * d);
        Self {
            gradient,
            metric,
            log_det_gradient,
            kinetic_gradient,
            potential,
        }
    }

    fn total(&self, c: &Counts) -> f64 {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed) as f64;
        get(&c.gradients) * self.gradient
            + get(&c.metrics) * self.metric
            + get(&c.log_det_gradients) * self.log_det_gradient
            + get(&c.kinetic_gradients) * self.kinetic_gradient
            + get(&c.potentials) * self.potential
    }
}

/// One chain's results.
#[derive(Clone, Debug)]
pub struct ArmRun {
    pub sampler: ArmSampler,
    pub seed: usize,
    /// Test MSE of each output (original units; the noise floor is 0.05² = 0.0025).
    pub test_mse: [f64; 2],
    pub mean_accept: f64,
    pub step_size: f64,
    pub divergences: usize,
    pub wall_seconds: f64,
    pub iterations: usize,
    /// Analytic floating-point operations of the whole chain (warmup included).
    pub flops: f64,
    pub gradients_per_iteration: f64,
    /// ESS of the training log-likelihood over the kept draws.
    pub ess_train_loglik: f64,
    pub mean_train_loglik: f64,
    /// Autocorrelation at lags 0..=max_lag: input-to-hidden weights (mean over them),
    /// hidden-to-output weights, training log-likelihood.
    pub acf: [Vec<f64>; 3],
}

/// What `run_robot_arm` wrote and found.
pub struct RobotArmReport {
    pub runs: Vec<ArmRun>,
    pub files: Vec<PathBuf>,
    /// MSD's analytic cost per iteration over HMC-long's, and per effective sample (when both ran).
    pub msd_to_hmc_long: Option<(f64, f64)>,
}

/// Runs the comparison and writes `runs.csv`, `autocorrelation.csv`, `robot_arm.md` and SVGs
/// into `out` (new or empty).
pub fn run_robot_arm(
    config: &RobotArmConfig,
    out: &Path,
    progress: &dyn Progress,
    stop: &AtomicBool,
) -> Result<RobotArmReport> {
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
    let (train, test) = bnn_data::robot_arm(0);
    let host = |d: &bnn_data::Dataset| {
        HostData::new(
            d.x.data.clone(),
            d.x.rows,
            d.x.cols,
            d.y.data.clone(),
            d.y.cols,
        )
    };
    let (train, test) = (host(&train), host(&test));
    let starts = chain_starts(config, &train)?;
    let jobs: Vec<(ArmSampler, usize)> = config
        .samplers
        .iter()
        .flat_map(|&s| (0..config.seeds).map(move |seed| (s, seed)))
        .collect();
    progress.stage(
        "robot arm: chains' iterations",
        (jobs.len() * (config.warmup + config.draws)) as u64,
    );
    let runs = run_jobs(&jobs, config.workers, stop, |&(sampler, seed)| {
        run_chain(
            config,
            sampler,
            seed,
            &starts[seed],
            &train,
            &test,
            progress,
            stop,
        )
    })?;
    let mut files = Vec::new();
    files.push(write_runs_csv(out, &runs)?);
    files.push(write_acf_csv(out, config, &runs)?);
    files.extend(write_acf_charts(out, config, &runs)?);
    let msd_to_hmc_long = cost_ratio(&runs, config.draws, ArmSampler::Msd, ArmSampler::HmcLong);
    files.push(write_markdown(
        out,
        config,
        &runs,
        train.rows,
        msd_to_hmc_long,
    )?);
    Ok(RobotArmReport {
        runs,
        files,
        msd_to_hmc_long,
    })
}

/// Collects draws and advances the progress bar.
struct Collect<'a> {
    draws: CollectedDraws,
    progress: &'a dyn Progress,
}

impl DrawSink for Collect<'_> {
    fn record(&mut self, draw: &Draw<'_>) -> Result<(), SinkError> {
        self.progress.advance(1);
        self.draws.record(draw)
    }
}

/// Each seed's start, shared by every sampler: a network initialization, trained with Adam for
/// `start_epochs` full-batch steps when that is positive.
fn chain_starts(config: &RobotArmConfig, train: &HostData) -> Result<Vec<Vec<f64>>> {
    let device = bnn_model::DeviceName::Flex.device()?;
    let layout = MlpPosterior::new(config.model(), train, &device, DType::F32)?
        .layout()
        .clone();
    (0..config.seeds)
        .map(|seed| {
            if config.start_epochs == 0 {
                return Ok(initial_parameters(&layout, config.seed, seed as u64));
            }
            let training = EnsembleConfig::new()
                .with_members(config.seeds)
                .with_epochs(config.start_epochs)
                .with_learning_rate(0.01)
                .with_weight_decay(0.0)
                .with_seed(config.seed);
            let member = training.train_member(&config.model(), train, &device, seed)?;
            Ok(member.parameters.iter().map(|&v| f64::from(v)).collect())
        })
        .collect()
}

#[allow(clippy::too_many_arguments)]
fn run_chain(
    config: &RobotArmConfig,
    sampler: ArmSampler,
    seed: usize,
    start: &[f64],
    train: &HostData,
    test: &HostData,
    progress: &dyn Progress,
    stop: &AtomicBool,
) -> Result<ArmRun> {
    let device = bnn_model::DeviceName::Flex.device()?;
    let posterior = MlpPosterior::new(config.model(), train, &device, DType::F32)?;
    let layout = posterior.layout().clone();
    let counts = Counts::default();
    let metric = match sampler {
        ArmSampler::Msd | ArmSampler::MsdFrozen => Some(CountedMetric {
            inner: posterior.riemannian_density()?,
            counts: &counts,
        }),
        _ => None,
    };
    let density = CountedDensity {
        inner: AutodiffLogDensity::new(posterior),
        metric,
        counts: &counts,
    };
    let algorithm: AlgorithmConfig = match sampler {
        ArmSampler::Msd | ArmSampler::MsdFrozen => MsdConfig::new()
            .with_persistence(config.persistence)
            .with_target_accept(config.target_accept)
            .with_frozen_metric(sampler == ArmSampler::MsdFrozen)
            .into(),
        ArmSampler::HmcLong => HmcConfig::new()
            .with_num_steps(config.long_steps)
            .with_target_accept(config.target_accept)
            .into(),
        ArmSampler::HmcShort => HmcConfig::new()
            .with_num_steps(config.short_steps)
            .with_target_accept(config.target_accept)
            .into(),
        ArmSampler::Nuts => NutsConfig::new()
            .with_target_accept(config.target_accept)
            .into(),
    };
    let runner = SamplerConfig::new(algorithm)
        .with_num_warmup(config.warmup)
        .with_num_draws(config.draws)
        .with_seed(config.seed.wrapping_mul(1_000).wrapping_add(seed as u64))
        .with_threads(Some(1))
        .init()?;
    // Every sampler starts seed `seed` from the same point.
    let start = ChainStart::at(start.to_vec());
    let mut chains = runner.init_chains(&density, std::slice::from_ref(&start))?;
    let mut sink = Collect {
        draws: CollectedDraws::new(1, layout.dim()),
        progress,
    };
    let clock = Instant::now();
    runner.run(&density, &mut chains, &mut sink, stop)?;
    let wall_seconds = clock.elapsed().as_secs_f64();
    let draws = sink.draws;
    if draws.num_draws(0) < config.draws {
        bail!("interrupted");
    }
    let posterior = density.inner.posterior();
    let kept: Vec<f64> = draws.chain(0).positions.clone();
    let dim = layout.dim();
    // Predictions: every thin-th draw.
    let thinned: Vec<f64> = kept
        .chunks_exact(dim)
        .step_by(config.thin)
        .flatten()
        .copied()
        .collect();
    let outputs = posterior.outputs(&thinned, test);
    let mut test_mse = [0.0; 2];
    for (k, mse) in test_mse.iter_mut().enumerate() {
        let mut total = 0.0;
        for n in 0..test.rows {
            let mean = outputs.iter().map(|draw| draw[n][k]).sum::<f64>() / outputs.len() as f64;
            total += (mean - test.y[n * 2 + k]).powi(2);
        }
        *mse = total / test.rows as f64;
    }
    // Training log-likelihood of every kept draw (fixed σ).
    let train_outputs = posterior.outputs(&kept, train);
    let constant =
        -(train.rows as f64 * 2.0) * (NOISE_SD.ln() + 0.5 * (2.0 * std::f64::consts::PI).ln());
    let loglik: Vec<f64> = train_outputs
        .iter()
        .map(|draw| {
            constant
                - 0.5
                    * (0..train.rows)
                        .flat_map(|n| (0..2).map(move |k| (n, k)))
                        .map(|(n, k)| (draw[n][k] - train.y[n * 2 + k]).powi(2))
                        .sum::<f64>()
                    / (NOISE_SD * NOISE_SD)
        })
        .collect();
    let weights_of = |layer: usize| -> Vec<usize> {
        layout
            .entries
            .iter()
            .filter(|e| e.layer == Some(layer) && e.kind == ParameterKind::Weight)
            .flat_map(|e| e.offset..e.offset + e.shape.iter().product::<usize>())
            .collect()
    };
    let coordinate =
        |i: usize| -> Vec<f64> { kept.chunks_exact(dim).map(|theta| theta[i]).collect() };
    let mean_acf = |indices: &[usize]| -> Vec<f64> {
        let curves: Vec<Vec<f64>> = indices
            .iter()
            .map(|&i| autocorrelation(&coordinate(i), config.max_lag))
            .collect();
        (0..=config.max_lag)
            .map(|lag| curves.iter().map(|c| c[lag]).sum::<f64>() / curves.len() as f64)
            .collect()
    };
    let acf = [
        mean_acf(&weights_of(0)),
        mean_acf(&weights_of(1)),
        autocorrelation(&loglik, config.max_lag),
    ];
    let stats = draws.stats(0);
    let iterations = config.warmup + config.draws;
    let flops = FlopModel::new(train.rows, 2, dim).total(&counts);
    Ok(ArmRun {
        sampler,
        seed,
        test_mse,
        mean_accept: stats.iter().map(|s| s.accept_stat).sum::<f64>() / stats.len() as f64,
        step_size: stats[0].step_size,
        divergences: stats.iter().filter(|s| s.divergent).count(),
        wall_seconds,
        iterations,
        flops,
        gradients_per_iteration: counts.gradients.load(Ordering::Relaxed) as f64
            / iterations as f64,
        ess_train_loglik: bnn_diagnostics::ess_bulk(&[&loglik]),
        mean_train_loglik: loglik.iter().sum::<f64>() / loglik.len() as f64,
        acf,
    })
}

/// `ρ(lag)` for lags `0..=max_lag` (1 at lag 0; a constant series is 1 throughout).
fn autocorrelation(series: &[f64], max_lag: usize) -> Vec<f64> {
    let acov = bnn_diagnostics::autocovariance(series);
    (0..=max_lag)
        .map(|lag| {
            if acov[0] > 0.0 {
                acov.get(lag).copied().unwrap_or(0.0) / acov[0]
            } else {
                1.0
            }
        })
        .collect()
}

/// Per sampler: the seeds' runs.
fn by_sampler(runs: &[ArmRun]) -> Vec<(ArmSampler, Vec<&ArmRun>)> {
    let mut groups: Vec<(ArmSampler, Vec<&ArmRun>)> = Vec::new();
    for run in runs {
        match groups.iter_mut().find(|(s, _)| *s == run.sampler) {
            Some((_, group)) => group.push(run),
            None => groups.push((run.sampler, vec![run])),
        }
    }
    groups
}

fn mean(values: impl Iterator<Item = f64>) -> f64 {
    let v: Vec<f64> = values.collect();
    v.iter().sum::<f64>() / v.len() as f64
}

fn sd(values: &[f64]) -> f64 {
    if values.len() < 2 {
        return f64::NAN;
    }
    let m = values.iter().sum::<f64>() / values.len() as f64;
    (values.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (values.len() - 1) as f64).sqrt()
}

/// Analytic flops per kept draw's effective sample of the training log-likelihood.
fn flops_per_effective_sample(run: &ArmRun, draws: usize) -> f64 {
    run.flops / run.iterations as f64 * draws as f64 / run.ess_train_loglik.max(1e-9)
}

/// `a`'s mean analytic cost over `b`'s, per iteration and per effective sample.
fn cost_ratio(runs: &[ArmRun], draws: usize, a: ArmSampler, b: ArmSampler) -> Option<(f64, f64)> {
    let groups = by_sampler(runs);
    let pick = |s: ArmSampler| groups.iter().find(|(x, _)| *x == s).map(|(_, g)| g.clone());
    let (ga, gb) = (pick(a)?, pick(b)?);
    let per_iteration = |g: &[&ArmRun]| mean(g.iter().map(|r| r.flops / r.iterations as f64));
    let per_ess = |g: &[&ArmRun]| mean(g.iter().map(|r| flops_per_effective_sample(r, draws)));
    Some((
        per_iteration(&ga) / per_iteration(&gb),
        per_ess(&ga) / per_ess(&gb),
    ))
}

fn write_runs_csv(out: &Path, runs: &[ArmRun]) -> Result<PathBuf> {
    let path = out.join("runs.csv");
    let mut w = csv::Writer::from_path(&path)?;
    w.write_record([
        "sampler",
        "seed",
        "test_mse_y1",
        "test_mse_y2",
        "mean_accept",
        "step_size",
        "divergences",
        "wall_seconds",
        "iterations",
        "flops",
        "gradients_per_iteration",
        "ess_train_loglik",
        "mean_train_loglik",
    ])?;
    for r in runs {
        w.write_record([
            r.sampler.name().to_string(),
            r.seed.to_string(),
            r.test_mse[0].to_string(),
            r.test_mse[1].to_string(),
            r.mean_accept.to_string(),
            r.step_size.to_string(),
            r.divergences.to_string(),
            r.wall_seconds.to_string(),
            r.iterations.to_string(),
            r.flops.to_string(),
            r.gradients_per_iteration.to_string(),
            r.ess_train_loglik.to_string(),
            r.mean_train_loglik.to_string(),
        ])?;
    }
    w.flush()?;
    Ok(path)
}

const ACF_NAMES: [&str; 3] = [
    "input-to-hidden weights",
    "hidden-to-output weights",
    "training log-likelihood",
];

fn write_acf_csv(out: &Path, config: &RobotArmConfig, runs: &[ArmRun]) -> Result<PathBuf> {
    let path = out.join("autocorrelation.csv");
    let mut w = csv::Writer::from_path(&path)?;
    w.write_record([
        "sampler",
        "lag",
        "input_hidden",
        "hidden_output",
        "train_loglik",
    ])?;
    for (sampler, group) in by_sampler(runs) {
        for lag in 0..=config.max_lag {
            let at = |q: usize| mean(group.iter().map(|r| r.acf[q][lag]));
            w.write_record([
                sampler.name().to_string(),
                lag.to_string(),
                at(0).to_string(),
                at(1).to_string(),
                at(2).to_string(),
            ])?;
        }
    }
    w.flush()?;
    Ok(path)
}

fn write_acf_charts(out: &Path, config: &RobotArmConfig, runs: &[ArmRun]) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for (q, (name, file)) in ACF_NAMES
        .iter()
        .zip([
            "acf_input_hidden.svg",
            "acf_hidden_output.svg",
            "acf_train_loglik.svg",
        ])
        .enumerate()
    {
        let series = by_sampler(runs)
            .into_iter()
            .enumerate()
            .map(|(colour, (sampler, group))| Series {
                label: sampler.name().into(),
                points: (0..=config.max_lag)
                    .map(|lag| (lag as f64, mean(group.iter().map(|r| r.acf[q][lag]))))
                    .collect(),
                errors: None,
                dashed: sampler == ArmSampler::MsdFrozen,
                colour,
                marked: Vec::new(),
            })
            .collect();
        let chart = LineChart {
            title: format!("Robot arm: autocorrelation of the {name} (mean over seeds)"),
            x_label: "lag (iterations)".into(),
            y_label: "autocorrelation".into(),
            log_x: false,
            y_range: Some(-0.3..1.05),
            legend: LegendPosition::MiddleRight,
            series,
        };
        let path = out.join(file);
        chart
            .write_svg(&path)
            .map_err(|e| anyhow!("{}: {e}", path.display()))?;
        files.push(path);
    }
    Ok(files)
}

fn write_markdown(
    out: &Path,
    config: &RobotArmConfig,
    runs: &[ArmRun],
    train_rows: usize,
    ratio: Option<(f64, f64)>,
) -> Result<PathBuf> {
    let mut md = String::new();
    md.push_str(
        "# Manifold stochastic dynamics against HMC on the robot arm (Zlochin & Baram)\n\n",
    );
    md.push_str(&format!(
        "Machine: {}. Data: MacKay's robot arm as generated by bnn-data (seed 0), {train_rows} training and 200 test rows, noise sd {NOISE_SD}. \
         Model: 2-{}-2 tanh, fixed noise precision β = 400, N(0, {}²) priors on every weight and bias. Every sampler: {} warmup iterations \
         (step size by dual averaging to acceptance {}), {} kept iterations, {} seeds (one chain each, the same start per seed: {}); predictions average every {}th kept draw. MSD: persistence cos α = {}; HMC: {} (long) and {} (short) leapfrog \
         steps, momentum resampled each iteration.\n\n",
        describe_cpu(),
        config.hidden,
        config.prior_scale,
        config.warmup,
        config.target_accept,
        config.draws,
        config.seeds,
        if config.start_epochs == 0 { "a network initialization".to_string() } else { format!("a network initialization after {} full-batch Adam steps", config.start_epochs) },
        config.thin,
        config.persistence,
        config.long_steps,
        config.short_steps
    ));
    md.push_str("| sampler | test MSE y1 (sd over seeds) | test MSE y2 (sd) | noise floor | accept | ε | divergences | gradients / iter | MFLOP / iter (analytic) | ms / iter (measured) | ESS train log-lik | MFLOP / ESS | s / ESS |\n");
    md.push_str("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (sampler, group) in by_sampler(runs) {
        let mse = |k: usize| group.iter().map(|r| r.test_mse[k]).collect::<Vec<_>>();
        let (m1, m2) = (mse(0), mse(1));
        let ess = mean(group.iter().map(|r| r.ess_train_loglik));
        md.push_str(&format!(
            "| {} | {:.5} ({:.5}) | {:.5} ({:.5}) | {:.4} | {:.3} | {:.4} | {:.1} | {:.1} | {:.2} | {:.2} | {:.0} | {:.1} | {:.3} |\n",
            sampler.name(),
            MeanSe::of(&m1).mean,
            sd(&m1),
            MeanSe::of(&m2).mean,
            sd(&m2),
            NOISE_SD * NOISE_SD,
            mean(group.iter().map(|r| r.mean_accept)),
            mean(group.iter().map(|r| r.step_size)),
            mean(group.iter().map(|r| r.divergences as f64)),
            mean(group.iter().map(|r| r.gradients_per_iteration)),
            mean(group.iter().map(|r| r.flops / r.iterations as f64)) / 1e6,
            mean(group.iter().map(|r| r.wall_seconds / r.iterations as f64)) * 1e3,
            ess,
            mean(group.iter().map(|r| flops_per_effective_sample(r, config.draws))) / 1e6,
            mean(group.iter().map(|r| r.wall_seconds / r.iterations as f64 * config.draws as f64 / r.ess_train_loglik.max(1e-9))),
        ));
    }
    md.push_str("\nAutocorrelation curves: `acf_input_hidden.svg`, `acf_hidden_output.svg`, `acf_train_loglik.svg` (`autocorrelation.csv`). Per run: `runs.csv`.\n\n");
    md.push_str("## The paper's claims beside ours\n\n| claim (Zlochin & Baram; the stored text lost its numbers) | here |\n|---|---|\n");
    let group = |s: ArmSampler| {
        by_sampler(runs)
            .into_iter()
            .find(|(x, _)| *x == s)
            .map(|(_, g)| g.into_iter().cloned().collect::<Vec<_>>())
    };
    let acf_at = |s: ArmSampler, q: usize, lag: usize| {
        group(s).map(|g| mean(g.iter().map(|r| r.acf[q][lag.min(config.max_lag)])))
    };
    let lag = (config.max_lag / 5).max(1);
    let fmt = |v: Option<f64>| v.map_or("not run".to_string(), |v| format!("{v:.3}"));
    md.push_str(&format!(
        "| MSD's weight autocorrelations fall much faster than HMC's | at lag {lag}: input-to-hidden MSD {} vs HMC-long {} (HMC-short {}); hidden-to-output MSD {} vs HMC-long {} |\n",
        fmt(acf_at(ArmSampler::Msd, 0, lag)),
        fmt(acf_at(ArmSampler::HmcLong, 0, lag)),
        fmt(acf_at(ArmSampler::HmcShort, 0, lag)),
        fmt(acf_at(ArmSampler::Msd, 1, lag)),
        fmt(acf_at(ArmSampler::HmcLong, 1, lag)),
    ));
    md.push_str(&match ratio {
        Some((per_iteration, per_ess)) => format!(
            "| MSD needs about one third of the flops of the better HMC per iteration | MSD : HMC-long = {per_iteration:.2} per iteration (analytic), {per_ess:.2} per effective sample of the training log-likelihood |\n"
        ),
        None => "| MSD needs about one third of the flops of the better HMC per iteration | MSD or HMC-long not run |\n".into(),
    });
    let mse_sd = |s: ArmSampler| {
        group(s).map(|g| {
            sd(&g
                .iter()
                .map(|r| 0.5 * (r.test_mse[0] + r.test_mse[1]))
                .collect::<Vec<_>>())
        })
    };
    let mse_mean = |s: ArmSampler| {
        group(s).map(|g| mean(g.iter().map(|r| 0.5 * (r.test_mse[0] + r.test_mse[1]))))
    };
    md.push_str(&format!(
        "| test errors of MSD and HMC-long comparable, MSD's run-to-run sd about half of HMC's | mean test MSE over outputs: MSD {} (sd {}), HMC-long {} (sd {}) |\n",
        fmt(mse_mean(ArmSampler::Msd)),
        fmt(mse_sd(ArmSampler::Msd)),
        fmt(mse_mean(ArmSampler::HmcLong)),
        fmt(mse_sd(ArmSampler::HmcLong)),
    ));
    md.push_str(&format!(
        "| the short-trajectory HMC fails to reach the high-probability region | HMC-short mean test MSE {}, mean training log-likelihood {} (HMC-long {}) |\n",
        fmt(mse_mean(ArmSampler::HmcShort)),
        fmt(group(ArmSampler::HmcShort).map(|g| mean(g.iter().map(|r| r.mean_train_loglik)))),
        fmt(group(ArmSampler::HmcLong).map(|g| mean(g.iter().map(|r| r.mean_train_loglik)))),
    ));
    md.push_str("\nFlop counts are analytic (leading terms of the counted operations: gradients; MSD's metric factorizations, log-determinant and kinetic gradients, f64 potentials), so they do not depend on the machine; wall times are measured on it, one chain per core.\n");
    let path = out.join("robot_arm.md");
    std::fs::write(&path, md).with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}

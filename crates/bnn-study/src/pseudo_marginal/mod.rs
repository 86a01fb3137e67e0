//! Pseudo-marginal HMC on the HNN report's models (`bnn study pm-glmm`): where the report's
//! λ drift comes from, shown by sampling the GLMM with its likelihood estimator and with the
//! model's own, on data simulated from known parameters, and checking which posterior covers them.
//!
//! `bnn study pm-sv` samples the report's stochastic volatility model (§4.1) the same way
//! ([`sv_study`]).
//!
//! Sampler ([`chain`]): our NUTS over `[θ, u]` with the pseudo-marginal integrator (kick–flow–kick:
//! the `(u, p)` block rotated exactly), step size by dual averaging and θ's diagonal metric from
//! the middle half of the warmup (the `u` block keeps unit mass, as the rotation requires).

pub mod chain;
pub mod glmm;
pub mod hnn;
pub mod sv;
pub mod sv_study;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use anyhow::{bail, Context as _, Result};
use bnn_plot::{LegendPosition, LineChart, Series};
use bnn_sampler::{chain_rng, DiagonalMassMatrix, KernelState, LogDensity};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};

use crate::describe_cpu;
use crate::fixed_step_chains::Progress;
use crate::worker_pool::run_jobs;
pub use chain::{run_pm_chain, summarize_theta, PmChainOutput, PmChainSettings, PmChainStart};
pub use glmm::{theta_names, Glmm, GlmmEstimator, GlmmPrior, GlmmProposal, GlmmTruth};
pub use hnn::{HnnDensity, SubjectHnn, SubjectHnnConfig};
pub use sv::{StochasticVolatility, SvTruth, SV_THETA_NAMES};
pub use sv_study::{run_pm_sv, PmSvConfig, PmSvReport, SvRun};

/// What `bnn study pm-glmm` runs.
#[derive(Clone, Debug)]
pub struct PmGlmmConfig {
    pub estimators: Vec<GlmmEstimator>,
    /// θ's prior (the report's N(0, 10²) everywhere, or weakly informative on log λ and logit w).
    pub prior: GlmmPrior,
    /// The random effects' importance density (the report's fixed N(0, 3²), or θ's components).
    pub proposal: GlmmProposal,
    /// Simulated data sets (each from its own seed, the same truth): numbers `first_dataset ..
    /// first_dataset + datasets`, so a subset of a longer study can be run again alone.
    pub datasets: usize,
    pub first_dataset: usize,
    /// Chains per data set and estimator. Chain 0 starts at θ = 0; the others at θ ~ N(0, I)
    /// with their own u, so that R-hat over them can show a chain stuck apart.
    pub chains: usize,
    pub subjects: usize,
    pub observations: usize,
    /// Importance samples per subject (the report: 128).
    pub samples: usize,
    pub warmup: usize,
    pub draws: usize,
    pub max_tree_depth: u32,
    pub target_accept: f64,
    pub seed: u64,
    pub workers: Option<usize>,
    /// Also sample each per-subject chain with HNN gradients (trained on the states of the
    /// warmup's second half), from the state the warmup ended in, after `hnn_warmup` more
    /// iterations of step-size adaptation on the surrogate.
    pub hnn: Option<SubjectHnnConfig>,
    pub hnn_warmup: usize,
}

impl Default for PmGlmmConfig {
    fn default() -> Self {
        Self {
            estimators: vec![GlmmEstimator::PerSubject, GlmmEstimator::PerObservation],
            prior: GlmmPrior::Report,
            proposal: GlmmProposal::Fixed,
            datasets: 2,
            first_dataset: 0,
            chains: 1,
            subjects: 500,
            observations: 6,
            samples: 128,
            warmup: 300,
            draws: 500,
            max_tree_depth: 8,
            target_accept: 0.8,
            seed: 0,
            workers: None,
            hnn: None,
            hnn_warmup: 50,
        }
    }
}

/// One chain on one data set with one estimator.
#[derive(Clone, Debug)]
pub struct PmRun {
    pub estimator: GlmmEstimator,
    /// `true gradients` or `HNN gradients`.
    pub sampler: &'static str,
    pub dataset: usize,
    pub chain: usize,
    /// Kept θ draws, one row per draw.
    pub theta: Vec<Vec<f64>>,
    pub truth: Vec<f64>,
    /// True gradients in the sampling phase (the HNN chain: none).
    pub gradients: u64,
    /// True log-density values the HNN chain computed in its sampling phase (its leaves).
    pub true_values: u64,
    /// True gradients spent on the HNN's training set (one full gradient per state) and the
    /// training's wall time; the HNN's held-out relative error.
    pub training_gradients: u64,
    pub training_seconds: f64,
    pub hnn_relative_error: Option<f64>,
    pub divergences: usize,
    pub mean_accept: f64,
    pub step_size: f64,
    pub seconds: f64,
}

impl PmRun {
    /// Per θ coordinate: posterior mean, sd, 5% and 95% quantiles.
    pub fn summary(&self) -> Vec<[f64; 4]> {
        self.alone().summary()
    }

    /// This run as a pool of one chain.
    fn alone(&self) -> PooledRuns<'_> {
        PooledRuns { chains: vec![self] }
    }

    /// The smallest bulk ESS over θ's coordinates.
    pub fn min_ess(&self) -> f64 {
        self.alone().min_ess()
    }

    /// True gradients (sampling and the HNN's training set) per effective sample of θ's worst
    /// coordinate; the warmup, the same for both samplers, is not counted.
    pub fn true_gradients_per_ess(&self) -> f64 {
        (self.gradients + self.training_gradients) as f64 / self.min_ess()
    }

    /// Every true evaluation (gradients, the HNN chain's values at its leaves, the training set's
    /// gradients) per effective sample: the HNN chain trades true gradients for true values,
    /// which on this model cost about as much.
    pub fn true_evaluations_per_ess(&self) -> f64 {
        (self.gradients + self.true_values + self.training_gradients) as f64 / self.min_ess()
    }

    /// θ coordinates whose 90% interval holds the truth.
    pub fn covered(&self) -> usize {
        self.alone().covered()
    }
}

pub struct PmGlmmReport {
    pub runs: Vec<PmRun>,
    pub files: Vec<PathBuf>,
}

/// Runs every (estimator, data set) chain and writes `runs.csv`, `pm_glmm.md` and trace SVGs
/// into `out` (new or empty).
pub fn run_pm_glmm(
    config: &PmGlmmConfig,
    out: &Path,
    progress: &dyn Progress,
    stop: &AtomicBool,
) -> Result<PmGlmmReport> {
    if config.estimators.is_empty()
        || config.datasets == 0
        || config.chains == 0
        || config.subjects == 0
        || config.observations == 0
        || config.samples == 0
        || config.draws < 10
    {
        bail!("the study needs an estimator, a data set, a chain, subjects, observations, importance samples and at least 10 draws");
    }
    if config.proposal == GlmmProposal::Mixture && config.samples < 2 {
        bail!("the mixture importance density draws alternate samples from the two components: it needs at least 2 samples per subject");
    }
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
    let jobs: Vec<(GlmmEstimator, usize, usize)> = config
        .estimators
        .iter()
        .flat_map(|&e| {
            (config.first_dataset..config.first_dataset + config.datasets)
                .flat_map(move |d| (0..config.chains).map(move |c| (e, d, c)))
        })
        .collect();
    let hnn_jobs = if config.hnn.is_some() {
        jobs.iter()
            .filter(|(e, _, _)| *e == GlmmEstimator::PerSubject)
            .count()
    } else {
        0
    };
    let transitions =
        jobs.len() * (config.warmup + config.draws) + hnn_jobs * (config.hnn_warmup + config.draws);
    progress.stage("pseudo-marginal GLMM: transitions", transitions as u64);
    let runs: Vec<PmRun> = run_jobs(
        &jobs,
        config.workers,
        stop,
        |&(estimator, dataset, chain)| run_chain(config, estimator, dataset, chain, progress, stop),
    )?
    .into_iter()
    .flatten()
    .collect();
    let mut files = vec![write_runs_csv(out, &runs)?];
    files.extend(write_traces(out, &runs)?);
    files.push(write_markdown(out, config, &runs)?);
    Ok(PmGlmmReport { runs, files })
}

/// One data set's chain (number `chain_index`) with true gradients, and with HNN gradients from
/// the same post-warmup state when the config asks for it.
fn run_chain(
    config: &PmGlmmConfig,
    estimator: GlmmEstimator,
    dataset: usize,
    chain_index: usize,
    progress: &dyn Progress,
    stop: &AtomicBool,
) -> Result<Vec<PmRun>> {
    let truth = GlmmTruth::default();
    let target = Glmm::simulate(
        &truth,
        config.subjects,
        config.observations,
        config.samples,
        estimator,
        config.seed.wrapping_add(dataset as u64 * 7_919),
    )
    .with_prior(config.prior)
    .with_proposal(config.proposal);
    let (k, dim) = (target.theta_dim(), target.dim());
    // Chain 0: θ at the prior's centre (μ₂ = μ₁ + 1, an even mixture); later chains: θ ~ N(0, I).
    // u from its N(0, I). (Chain 0's streams are those of the one-chain study before `chains`.)
    let mut rng = ChaCha8Rng::seed_from_u64(
        config
            .seed
            .wrapping_add(dataset as u64)
            .wrapping_add(1_000_003 * chain_index as u64),
    );
    let mut start: Vec<f64> = (0..k)
        .map(|_| {
            if chain_index == 0 {
                0.0
            } else {
                StandardNormal.sample(&mut rng)
            }
        })
        .collect();
    start.extend((0..dim - k).map(|_| -> f64 { StandardNormal.sample(&mut rng) }));
    let stream = dataset
        + 1000 * usize::from(estimator == GlmmEstimator::PerObservation)
        + 100_000 * chain_index;
    let mut chain = chain_rng(config.seed.wrapping_add(17), stream);
    let hnn = config
        .hnn
        .as_ref()
        .filter(|_| estimator == GlmmEstimator::PerSubject);
    let settings = PmChainSettings {
        warmup: config.warmup,
        draws: config.draws,
        max_tree_depth: config.max_tree_depth,
        target_accept: config.target_accept,
        // The HNN's training states: the warmup's second half, at most 100 of them.
        training_states: if hnn.is_some() { 100 } else { 0 },
    };
    let output = run_pm_chain(
        &target,
        k,
        PmChainStart::Fresh(start),
        settings,
        &mut chain,
        progress,
        stop,
    )
    .with_context(|| estimator.name())?;
    let mut runs = vec![PmRun {
        estimator,
        sampler: "true gradients",
        dataset,
        chain: chain_index,
        theta: output.theta,
        truth: truth.theta(),
        gradients: output.gradients - output.warmup_gradients,
        true_values: 0,
        training_gradients: 0,
        training_seconds: 0.0,
        hnn_relative_error: None,
        divergences: output.divergences,
        mean_accept: output.mean_accept,
        step_size: output.step_size,
        seconds: output.sampling_seconds,
    }];
    if let (Some(hnn_config), Some(state)) = (hnn, output.after_warmup) {
        runs.push(run_hnn_chain(
            config,
            hnn_config,
            &target,
            &output.training_states,
            state,
            output.step_size,
            &output.metric,
            dataset,
            chain_index,
            progress,
            stop,
        )?);
    }
    Ok(runs)
}

/// The HNN chain: train on `training_states`, adapt the step size on the surrogate for
/// `hnn_warmup` iterations from the true warmup's, then sample from the same state.
#[allow(clippy::too_many_arguments)]
fn run_hnn_chain(
    config: &PmGlmmConfig,
    hnn_config: &SubjectHnnConfig,
    target: &Glmm,
    training_states: &[Vec<f64>],
    start: KernelState,
    step_size: f64,
    metric: &DiagonalMassMatrix,
    dataset: usize,
    chain_index: usize,
    progress: &dyn Progress,
    stop: &AtomicBool,
) -> Result<PmRun> {
    let k = target.theta_dim();
    let hnn = SubjectHnn::train(
        target,
        training_states,
        &SubjectHnnConfig {
            seed: hnn_config.seed.wrapping_add(dataset as u64),
            ..hnn_config.clone()
        },
    )?;
    let density = HnnDensity::new(target, &hnn);
    let settings = PmChainSettings {
        warmup: config.hnn_warmup,
        draws: config.draws,
        max_tree_depth: config.max_tree_depth,
        target_accept: config.target_accept,
        training_states: 0,
    };
    let start = PmChainStart::Continue {
        position: start.position,
        step_size,
        metric: metric.clone(),
    };
    let mut chain = chain_rng(
        config.seed.wrapping_add(29),
        dataset + 100_000 * chain_index,
    );
    let output = run_pm_chain(&density, k, start, settings, &mut chain, progress, stop)
        .context("the HNN chain")?;
    Ok(PmRun {
        estimator: GlmmEstimator::PerSubject,
        sampler: "HNN gradients",
        dataset,
        chain: chain_index,
        theta: output.theta,
        truth: GlmmTruth::default().theta(),
        gradients: 0,
        // The surrogate density computes one true value per leaf (and no true gradient).
        true_values: output.gradients - output.warmup_gradients,
        training_gradients: training_states.len() as u64,
        training_seconds: hnn.seconds,
        hnn_relative_error: Some(hnn.relative_error),
        divergences: output.divergences,
        mean_accept: output.mean_accept,
        step_size: output.step_size,
        seconds: output.sampling_seconds,
    })
}

fn write_runs_csv(out: &Path, runs: &[PmRun]) -> Result<PathBuf> {
    let path = out.join("runs.csv");
    let mut w = csv::Writer::from_path(&path)?;
    w.write_record([
        "estimator",
        "sampler",
        "dataset",
        "chain",
        "parameter",
        "truth",
        "mean",
        "sd",
        "q05",
        "q95",
        "covered",
        "rhat",
    ])?;
    let groups = pooled_groups(runs);
    let rows = runs
        .iter()
        .map(|run| {
            (
                run.estimator,
                run.sampler,
                run.dataset,
                run.chain.to_string(),
                run.summary(),
                vec![f64::NAN; run.truth.len()],
                &run.truth,
            )
        })
        .chain(groups.iter().filter(|g| g.chains.len() > 1).map(|g| {
            let first = g.chains[0];
            (
                first.estimator,
                first.sampler,
                first.dataset,
                "pooled".to_string(),
                g.summary(),
                g.rhat(),
                &first.truth,
            )
        }));
    for (estimator, sampler, dataset, chain, summary, rhat, truth) in rows {
        for (((name, s), t), r) in theta_names(truth.len() - 5)
            .iter()
            .zip(summary)
            .zip(truth)
            .zip(rhat)
        {
            w.write_record([
                estimator.name().to_string(),
                sampler.to_string(),
                dataset.to_string(),
                chain.clone(),
                name.clone(),
                format!("{t:.4}"),
                format!("{:.4}", s[0]),
                format!("{:.4}", s[1]),
                format!("{:.4}", s[2]),
                format!("{:.4}", s[3]),
                u8::from(s[2] <= *t && *t <= s[3]).to_string(),
                if r.is_nan() {
                    String::new()
                } else {
                    format!("{r:.3}")
                },
            ])?;
        }
    }
    w.flush()?;
    Ok(path)
}

/// Traces of log λ₁ and log λ₂ per run (where the report saw the drift).
fn write_traces(out: &Path, runs: &[PmRun]) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    let Some(first) = runs.first() else {
        return Ok(files);
    };
    let p = first.truth.len() - 5;
    for (offset, name) in [(2, "log_lambda1"), (3, "log_lambda2")] {
        let series = runs
            .iter()
            .enumerate()
            .map(|(slot, run)| Series {
                label: format!(
                    "{}{} data {} chain {}",
                    run.estimator.name(),
                    if run.hnn_relative_error.is_some() {
                        " HNN"
                    } else {
                        ""
                    },
                    run.dataset,
                    run.chain
                ),
                points: run
                    .theta
                    .iter()
                    .enumerate()
                    .map(|(i, t)| (i as f64, t[p + offset]))
                    .collect(),
                colour: slot,
                dashed: run.estimator == GlmmEstimator::PerObservation,
                ..Series::default()
            })
            .collect();
        files.push(write_trace(
            out,
            &format!(
                "GLMM: {name} after warmup (truth {:.2})",
                first.truth[p + offset]
            ),
            name,
            series,
        )?);
    }
    Ok(files)
}

/// `trace_<name>.svg` in `out`: the draws of one parameter per run, against the draw index.
pub(crate) fn write_trace(
    out: &Path,
    title: &str,
    name: &str,
    series: Vec<Series>,
) -> Result<PathBuf> {
    let chart = LineChart {
        title: title.into(),
        x_label: "draw".into(),
        y_label: name.into(),
        log_x: false,
        y_range: None,
        legend: LegendPosition::UpperRight,
        series,
    };
    let path = out.join(format!("trace_{name}.svg"));
    chart.write_svg(&path)?;
    Ok(path)
}

/// The chains of one (estimator, sampler, data set), in chain order.
struct PooledRuns<'a> {
    chains: Vec<&'a PmRun>,
}

impl PooledRuns<'_> {
    /// Per θ coordinate over every chain's draws: mean, sd, 5% and 95% quantiles.
    fn summary(&self) -> Vec<[f64; 4]> {
        let draws: Vec<Vec<f64>> = self
            .chains
            .iter()
            .flat_map(|r| r.theta.iter().cloned())
            .collect();
        summarize_theta(&draws, self.chains[0].truth.len())
    }

    fn covered(&self) -> usize {
        self.summary()
            .iter()
            .zip(&self.chains[0].truth)
            .filter(|(s, t)| s[2] <= **t && **t <= s[3])
            .count()
    }

    /// Per θ coordinate, R-hat over the chains (NaN for one chain).
    fn rhat(&self) -> Vec<f64> {
        (0..self.chains[0].truth.len())
            .map(|k| {
                if self.chains.len() < 2 {
                    f64::NAN
                } else {
                    bnn_diagnostics::rhat(&self.coordinate(k))
                }
            })
            .collect()
    }

    fn min_ess(&self) -> f64 {
        (0..self.chains[0].truth.len())
            .map(|k| bnn_diagnostics::ess_bulk(&self.coordinate(k)))
            .fold(f64::INFINITY, f64::min)
    }

    fn coordinate(&self, k: usize) -> Vec<Vec<f64>> {
        self.chains
            .iter()
            .map(|r| r.theta.iter().map(|t| t[k]).collect())
            .collect()
    }
}

/// Runs grouped by (estimator, sampler, data set), in the order they first appear.
fn pooled_groups(runs: &[PmRun]) -> Vec<PooledRuns<'_>> {
    let mut groups: Vec<PooledRuns> = Vec::new();
    for run in runs {
        match groups.iter_mut().find(|g| {
            g.chains[0].estimator == run.estimator
                && g.chains[0].sampler == run.sampler
                && g.chains[0].dataset == run.dataset
        }) {
            Some(g) => g.chains.push(run),
            None => groups.push(PooledRuns { chains: vec![run] }),
        }
    }
    groups
}

fn prior_description(prior: GlmmPrior) -> &'static str {
    match prior {
        GlmmPrior::Report => "the report's, N(0, 10²) on every coordinate of θ",
        GlmmPrior::WeaklyInformative => "weakly informative: logit w ~ N(0, 1.5²) (close to uniform on w), log λ₁, log λ₂ ~ N(0, 3²), β, μ₁ and δ ~ N(0, 10²)",
    }
}

fn proposal_description(proposal: GlmmProposal) -> &'static str {
    match proposal {
        GlmmProposal::Fixed => "the report's fixed N(0, 3²) (X = 3u)",
        GlmmProposal::Mixture => "θ's own components (X = μ_k + λ_k^(−½) u, alternate samples per component, weighted against their equal-share mixture)",
    }
}

fn write_markdown(out: &Path, config: &PmGlmmConfig, runs: &[PmRun]) -> Result<PathBuf> {
    let mut md = String::new();
    let truth = GlmmTruth::default();
    let _ = writeln!(
        md,
        "# Pseudo-marginal NUTS on the GLMM of the HNN report: our runs\n"
    );
    let _ = writeln!(md, "Machine: {}. T = {} subjects × n = {} observations, p = {} covariates, N = {} importance samples per subject (u ∈ R^{}) from {}; truth β = {:?}, μ = {:?}, λ = {:?}, w = {} (ours; covariates N(0, 1)). Prior: {}. {} chain(s) per (estimator, data set): {} warmup (dual averaging to {}, θ's diagonal metric from the middle half) + {} draws, tree depth ≤ {}.\n",
        describe_cpu(), config.subjects, config.observations, truth.beta.len(), config.samples, config.subjects * config.samples, proposal_description(config.proposal), truth.beta, truth.mu, truth.lambda, truth.w,
        prior_description(config.prior), config.chains, config.warmup, config.target_accept, config.draws, config.max_tree_depth);
    let _ = writeln!(md, "| estimator | gradients by | data set | chain | θ in 90% interval | log λ₁ mean (sd), truth {:.2} | log λ₂ mean (sd), truth {:.2} | logit w mean (sd), truth {:.2} | min ESS (θ) | true gradients in sampling | true gradients per ESS | true evaluations per ESS | divergent | accept | ε | sampling seconds |", truth.lambda[0].ln(), truth.lambda[1].ln(), (truth.w / (1.0 - truth.w)).ln());
    let _ = writeln!(
        md,
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for run in runs {
        let s = run.summary();
        let p = run.truth.len() - 5;
        let _ = writeln!(md, "| {} | {} | {} | {} | {} / {} | {:.2} ({:.2}) | {:.2} ({:.2}) | {:.2} ({:.2}) | {:.0} | {} | {:.1} | {:.1} | {} | {:.2} | {:.4} | {:.0} |",
            run.estimator.name(), run.sampler, run.dataset, run.chain, run.covered(), run.truth.len(), s[p + 2][0], s[p + 2][1], s[p + 3][0], s[p + 3][1], s[p + 4][0], s[p + 4][1],
            run.min_ess(), run.gradients, run.true_gradients_per_ess(), run.true_evaluations_per_ess(), run.divergences, run.mean_accept, run.step_size, run.seconds);
    }
    let groups = pooled_groups(runs);
    if config.chains > 1 {
        let _ = writeln!(md, "\nPooled over the {} chains of each data set (intervals from all their draws; R-hat: rank-normalized split R-hat, the larger of bulk and tail; ESS: bulk, all chains):\n", config.chains);
        let _ = writeln!(md, "| estimator | gradients by | data set | θ in 90% interval | max R-hat (θ) | min ESS (θ) | log λ₁ mean (sd) | log λ₂ mean (sd) | logit w mean (sd) |");
        let _ = writeln!(md, "|---|---|---|---|---|---|---|---|---|");
        for g in &groups {
            let (s, first) = (g.summary(), g.chains[0]);
            let p = first.truth.len() - 5;
            let _ = writeln!(md, "| {} | {} | {} | {} / {} | {:.2} | {:.0} | {:.2} ({:.2}) | {:.2} ({:.2}) | {:.2} ({:.2}) |",
                first.estimator.name(), first.sampler, first.dataset, g.covered(), first.truth.len(), g.rhat().into_iter().fold(f64::NAN, f64::max), g.min_ess(),
                s[p + 2][0], s[p + 2][1], s[p + 3][0], s[p + 3][1], s[p + 4][0], s[p + 4][1]);
        }
    }
    for estimator in &config.estimators {
        let chosen: Vec<&PooledRuns> = groups
            .iter()
            .filter(|g| {
                g.chains[0].estimator == *estimator && g.chains[0].hnn_relative_error.is_none()
            })
            .collect();
        let (covered, total) = chosen.iter().fold((0, 0), |(c, t), g| {
            (c + g.covered(), t + g.chains[0].truth.len())
        });
        if total > 0 {
            let pooled = if config.chains > 1 {
                format!(" (pooled over {} chains each)", config.chains)
            } else {
                String::new()
            };
            let _ = writeln!(md, "\n{}: {covered} of {total} θ coordinates in their 90% interval ({:.0}%) over {} data sets{pooled}.", estimator.name(), 100.0 * covered as f64 / total as f64, chosen.len());
        }
    }
    let hnn_runs: Vec<&PmRun> = runs
        .iter()
        .filter(|r| r.hnn_relative_error.is_some())
        .collect();
    if !hnn_runs.is_empty() {
        let _ = writeln!(md, "\nHNN gradients (`--hnn`): one sine network (L-HNN style, one output) shared by all subjects reads θ, the subject's u_i and its data and is trained so that its input gradient matches the subject's term of ∇ log p̂ (the estimator is a sum over subjects); the states of the warmup's second half are its training set (one true gradient each, counted above as true gradients). The HNN chain starts where the true-gradient chain's warmup ended, adapts ε for {} more iterations on the surrogate, then samples: NUTS weights every leaf by the true log π (one true value per leaf, no true gradient), so its draws are exact whatever the network's error.\n", config.hnn_warmup);
        let _ = writeln!(md, "| data set | training states | held-out relative error of ∇ | training seconds | true values in sampling |");
        let _ = writeln!(md, "|---|---|---|---|---|");
        for run in hnn_runs {
            let _ = writeln!(
                md,
                "| {} | {} | {:.3} | {:.0} | {} |",
                run.dataset,
                run.training_gradients,
                run.hnn_relative_error.unwrap_or(f64::NAN),
                run.training_seconds,
                run.true_values
            );
        }
    }
    let _ = writeln!(md, "\nThe per-observation estimator is the report's (a separate importance-sampling average for every observation, with the subject's random-effect draws shared across them): it is unbiased for a model where each observation has its own random effect, so the data's only information on the mixture's spread — how a subject's observations agree — never reaches λ. The per-subject estimator is the model's. Files: `runs.csv` (every θ coordinate: mean, sd, 90% interval, covered), `trace_log_lambda*.svg`.");
    let path = out.join("pm_glmm.md");
    std::fs::write(&path, md)?;
    Ok(path)
}

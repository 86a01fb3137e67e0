//! DEI-MCMC called from Rust, two ways:
//!
//! * [`in_memory_run`]: the library's whole pipeline (`bnn_pipeline::DeiMcmc`) on rows a program
//!   holds as plain `Vec<f32>` — deep ensemble, one NUTS chain per member, predictions, metrics
//!   against the ensemble alone and a linear model, diagnostics;
//! * [`user_module_run`]: a user's own Burn module as the posterior (`ModulePosterior`; here
//!   the `ResidualRegressor` of `examples/custom-posterior`, a linear trend plus a tanh
//!   correction), warm started from an ensemble the library trains (`MapEnsembleConfig`),
//!   sampled with the same sampler settings type the pipeline uses.

use anyhow::{anyhow, Result};
use bnn_data::Dataset;
use bnn_model::{flatten, AutodiffLogDensity, ModulePosterior, Posterior, Prior, PriorSpec};
use bnn_pipeline::{
    DeiMcmc, EnsembleSection, MapEnsembleConfig, ModelSection, ProgressEvent, RunConfig,
    RunOutcome, RunSummary, SamplerSection,
};
use bnn_sampler::NutsConfig;
use burn::tensor::{Device, Tensor, TensorData};
use custom_posterior::ResidualRegressor;
use std::path::Path;

/// Sizes of a run: the defaults take seconds; [`Sizes::quick`] is for tests.
#[derive(Debug, Clone, Copy)]
pub struct Sizes {
    pub members: usize,
    pub epochs: usize,
    pub warmup: usize,
    pub draws: usize,
}

impl Sizes {
    pub fn full() -> Self {
        Self {
            members: 4,
            epochs: 1500,
            warmup: 150,
            draws: 150,
        }
    }

    pub fn quick() -> Self {
        Self {
            members: 2,
            epochs: 400,
            warmup: 40,
            draws: 40,
        }
    }
}

/// `n` rows of y = sin(3x) + x/2 + noise on x ∈ [-1.5, 1.5], as a program might hold them:
/// plain `Vec<f32>`, one value per row (deterministic pseudo-noise, uniform with sd ≈ 0.1).
pub fn my_rows(n: usize) -> (Vec<f32>, Vec<f32>) {
    let x: Vec<f32> = (0..n)
        .map(|i| -1.5 + 3.0 * i as f32 / (n - 1) as f32)
        .collect();
    let y = x
        .iter()
        .enumerate()
        .map(|(i, &x)| {
            (3.0 * x).sin()
                + 0.5 * x
                + 0.35 * (((i as f32 * 12.9898).sin() * 43758.547).rem_euclid(1.0) - 0.5)
        })
        .collect();
    (x, y)
}

/// The pipeline on in-memory rows; the run directory is `dir`. Returns the evaluation summary.
pub fn in_memory_run(
    dir: &Path,
    sizes: Sizes,
    report: impl Fn(&str) + Send + Sync + 'static,
) -> Result<RunSummary> {
    let (x, y) = my_rows(120);
    let dataset = Dataset::from_rows("sine-trend", &x, 1, &y, 1)?;
    let config = RunConfig::new()
        .with_model(
            ModelSection::new()
                .with_hidden(vec![16])
                .with_activation("tanh".into()),
        )
        .with_ensemble(
            EnsembleSection::new()
                .with_members(sizes.members)
                .with_epochs(sizes.epochs)
                .with_learning_rate(0.01),
        )
        .with_sampler(
            SamplerSection::new()
                .with_warmup(sizes.warmup)
                .with_draws(sizes.draws)
                .with_algorithm(NutsConfig::new().with_max_tree_depth(6).into())
                .with_seed(3),
        );
    let run = DeiMcmc::with_dataset(config, &dataset, dir)?.with_progress(
        move |event: &ProgressEvent<'_>| {
            if let ProgressEvent::Started { message, .. }
            | ProgressEvent::Finished { message, .. } = event
            {
                report(message);
            }
        },
    );
    // Each step can also be called alone: train_ensemble(), sample(), predict(), evaluate(&predictions).
    match run.run()? {
        RunOutcome::Finished(report) => Ok(report.evaluation.summary),
        RunOutcome::Interrupted(_) => Err(anyhow!("sampling was interrupted")),
        RunOutcome::ShardFinished(_) => Err(anyhow!(
            "this run is one shard; join the shards with bnn_pipeline::merge_shards"
        )),
    }
}

/// What the user-module run produces.
pub struct ModuleRun {
    pub parameters: usize,
    /// Log posterior of each ensemble member before and after training.
    pub initial_log_posterior: Vec<f64>,
    pub trained_log_posterior: Vec<f64>,
    /// Posterior predictive mean of f at `grid`, and the truth sin(3x) + x/2 there.
    pub grid: Vec<f64>,
    pub mean: Vec<f64>,
    pub truth: Vec<f64>,
    /// Split R-hat of f at each grid point (function space).
    pub rhat: Vec<f64>,
    pub divergences: usize,
}

/// DEI-MCMC on [`ResidualRegressor`]: a MAP ensemble from different initializations of the
/// module, then one NUTS chain per member.
pub fn user_module_run(sizes: Sizes) -> Result<ModuleRun> {
    let (width, sigma) = (6, 0.1);
    let device = Device::flex();
    let (x, y) = my_rows(120);
    let n = x.len();
    let column = |v: &[f32]| {
        Tensor::<2>::from_data(
            TensorData::new(v.to_vec(), [n, 1]),
            &device.clone().autodiff(),
        )
    };
    let (xs, ys) = (column(&x), column(&y));
    // The user's likelihood: Gaussian with known σ, in Burn tensor operations.
    let log_likelihood = move |m: &ResidualRegressor| -> Tensor<1> {
        (m.forward(xs.clone()) - ys.clone())
            .div_scalar(sigma)
            .powi_scalar(2)
            .sum()
            .mul_scalar(-0.5)
    };
    let posterior = ModulePosterior::new(
        ResidualRegressor::new(width, &device),
        log_likelihood,
        &PriorSpec::uniform(Prior::Normal { scale: 2.0 }),
        &device,
    )?;
    let density = AutodiffLogDensity::new(posterior);

    // The ensemble: members start at different initializations of the module.
    let starts: Vec<Vec<f64>> = (0..sizes.members)
        .map(|j| {
            device.seed(100 + j as u64);
            flatten(&ResidualRegressor::new(width, &device))
                .into_iter()
                .map(f64::from)
                .collect()
        })
        .collect();
    let ensemble = MapEnsembleConfig::new()
        .with_steps(sizes.epochs)
        .with_learning_rate(0.02)
        .train(&density, starts)?;

    let sampler = SamplerSection::new()
        .with_warmup(sizes.warmup)
        .with_draws(sizes.draws)
        .with_algorithm(NutsConfig::new().with_max_tree_depth(7).into())
        .with_seed(5)
        .sampler_config(None)
        .init()?;
    let draws = sampler.sample(&density, &ensemble.chain_starts(sizes.members))?;

    let grid: Vec<f64> = (0..7).map(|i| -1.2 + 0.4 * i as f64).collect();
    let f = |theta: &[f64], x: f64| ResidualRegressor::value_at(theta, width, x);
    let (mut mean, mut rhat) = (Vec::new(), Vec::new());
    for &g in &grid {
        let per_chain = draws.map(|theta| f(theta, g));
        let all: Vec<f64> = per_chain.concat();
        mean.push(all.iter().sum::<f64>() / all.len() as f64);
        rhat.push(bnn_diagnostics::rhat(&per_chain));
    }
    Ok(ModuleRun {
        parameters: density.posterior().layout().dim(),
        initial_log_posterior: ensemble.initial_log_densities,
        trained_log_posterior: ensemble.log_densities,
        truth: grid.iter().map(|&x| (3.0 * x).sin() + 0.5 * x).collect(),
        grid,
        mean,
        rhat,
        divergences: (0..sizes.members)
            .map(|c| draws.stats(c).iter().filter(|s| s.divergent).count())
            .sum(),
    })
}

//! `bnn study pm-sv`: pseudo-marginal NUTS on the HNN report's stochastic volatility model
//! (§4.1) with a prior-path importance-sampling likelihood estimator, on returns simulated from
//! known parameters: does the posterior cover them, at what cost, and how noisy is `log p̂`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use anyhow::{bail, Context as _, Result};
use bnn_plot::Series;
use bnn_sampler::{chain_rng, LogDensity};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};

use super::chain::{run_pm_chain, summarize_theta, PmChainSettings, PmChainStart};
use super::sv::{StochasticVolatility, SvTruth, SV_THETA_NAMES};
use crate::describe_cpu;
use crate::fixed_step_chains::Progress;
use crate::worker_pool::run_jobs;

/// What `bnn study pm-sv` runs.
#[derive(Clone, Debug)]
pub struct PmSvConfig {
    /// Simulated return series (each from its own seed, the same truth).
    pub datasets: usize,
    /// Length T of each series.
    pub steps: usize,
    /// Importance-sampled paths N (u ∈ R^{N·T}).
    pub particles: usize,
    pub warmup: usize,
    pub draws: usize,
    pub max_tree_depth: u32,
    pub target_accept: f64,
    /// Independent `log p̂` at the truth per data set, for its variance.
    pub variance_replicates: usize,
    pub seed: u64,
    pub workers: Option<usize>,
}

impl Default for PmSvConfig {
    fn default() -> Self {
        Self {
            datasets: 2,
            steps: 100,
            particles: 256,
            warmup: 300,
            draws: 500,
            max_tree_depth: 8,
            target_accept: 0.8,
            variance_replicates: 100,
            seed: 0,
            workers: None,
        }
    }
}

/// One chain on one data set.
#[derive(Clone, Debug)]
pub struct SvRun {
    pub dataset: usize,
    /// Kept θ = (μ, atanh φ, log σ) draws, one row per draw.
    pub theta: Vec<Vec<f64>>,
    pub truth: Vec<f64>,
    /// Sample variance of `log p̂(y | θ_true, u)` over independent u.
    pub log_estimate_variance: f64,
    pub gradients: u64,
    pub divergences: usize,
    pub mean_accept: f64,
    pub step_size: f64,
    pub seconds: f64,
}

impl SvRun {
    /// Per θ coordinate: posterior mean, sd, 5% and 95% quantiles.
    pub fn summary(&self) -> Vec<[f64; 4]> {
        summarize_theta(&self.theta, self.truth.len())
    }

    /// Bulk ESS per θ coordinate (one chain).
    pub fn ess_bulk(&self) -> Vec<f64> {
        (0..self.truth.len())
            .map(|k| {
                bnn_diagnostics::ess_bulk(&[self.theta.iter().map(|t| t[k]).collect::<Vec<f64>>()])
            })
            .collect()
    }

    /// θ coordinates whose 90% interval holds the truth.
    pub fn covered(&self) -> usize {
        self.summary()
            .iter()
            .zip(&self.truth)
            .filter(|(s, t)| s[2] <= **t && **t <= s[3])
            .count()
    }

    /// Draws in natural units `(μ, φ, σ)`.
    fn natural(&self) -> Vec<[f64; 3]> {
        self.theta
            .iter()
            .map(|t| [t[0], t[1].tanh(), t[2].exp()])
            .collect()
    }
}

pub struct PmSvReport {
    pub runs: Vec<SvRun>,
    pub files: Vec<PathBuf>,
}

/// Runs one chain per data set and writes `runs.csv`, `pm_sv.md` and trace SVGs into `out`
/// (new or empty).
pub fn run_pm_sv(
    config: &PmSvConfig,
    out: &Path,
    progress: &dyn Progress,
    stop: &AtomicBool,
) -> Result<PmSvReport> {
    if config.datasets == 0 || config.steps == 0 || config.particles == 0 {
        bail!("the study needs at least one data set, a series length T ≥ 1 (--steps) and N ≥ 1 particles (--particles)");
    }
    if config.draws < 10 || config.variance_replicates < 2 {
        bail!("the study needs at least 10 draws and 2 replicates of log p̂");
    }
    if config
        .steps
        .checked_mul(config.particles)
        .is_none_or(|m| m > 100_000_000)
    {
        bail!(
            "N·T = {} × {} auxiliary variables is more than this study handles (10⁸)",
            config.particles,
            config.steps
        );
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
    let jobs: Vec<usize> = (0..config.datasets).collect();
    progress.stage(
        "pseudo-marginal SV: transitions",
        (jobs.len() * (config.warmup + config.draws)) as u64,
    );
    let runs = run_jobs(&jobs, config.workers, stop, |&dataset| {
        run_chain(config, dataset, progress, stop)
    })?;
    let mut files = vec![write_runs_csv(out, &runs)?];
    files.extend(write_traces(out, &runs)?);
    files.push(write_markdown(out, config, &runs)?);
    Ok(PmSvReport { runs, files })
}

/// Sample variance of `log p̂(y | θ, u)` over `replicates` independent u.
pub fn log_estimate_variance(
    target: &StochasticVolatility,
    theta: &[f64],
    replicates: usize,
    seed: u64,
) -> f64 {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let m = target.dim() - StochasticVolatility::THETA_DIM;
    let mut g = vec![0.0; target.dim()];
    let values: Vec<f64> = (0..replicates)
        .map(|_| {
            let u: Vec<f64> = (0..m).map(|_| StandardNormal.sample(&mut rng)).collect();
            target.log_likelihood_estimate(theta, &u, &mut g)
        })
        .collect();
    let mean = values.iter().sum::<f64>() / replicates as f64;
    values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (replicates - 1) as f64
}

fn run_chain(
    config: &PmSvConfig,
    dataset: usize,
    progress: &dyn Progress,
    stop: &AtomicBool,
) -> Result<SvRun> {
    let truth = SvTruth::default();
    let target = StochasticVolatility::simulate(
        &truth,
        config.steps,
        config.particles,
        config.seed.wrapping_add(dataset as u64 * 7_919),
    );
    let log_estimate_variance = log_estimate_variance(
        &target,
        &truth.theta(),
        config.variance_replicates,
        config.seed.wrapping_add(dataset as u64 * 7_919 + 3),
    );
    let (k, dim) = (StochasticVolatility::THETA_DIM, target.dim());
    // θ starts at μ = log of the mean squared return (E y² = e^{μ + Var h / 2}), φ = 0.9, σ at
    // its prior median e⁻¹; u from its N(0, I).
    let y = target.returns();
    let mean_square = y.iter().map(|v| v * v).sum::<f64>() / y.len() as f64;
    let mut start = vec![mean_square.max(1e-300).ln(), 0.9f64.atanh(), -1.0];
    let mut rng = ChaCha8Rng::seed_from_u64(config.seed.wrapping_add(dataset as u64));
    start.extend((0..dim - k).map(|_| -> f64 { StandardNormal.sample(&mut rng) }));
    let mut chain = chain_rng(config.seed.wrapping_add(17), dataset);
    let settings = PmChainSettings {
        warmup: config.warmup,
        draws: config.draws,
        max_tree_depth: config.max_tree_depth,
        target_accept: config.target_accept,
        training_states: 0,
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
    .with_context(|| format!("data set {dataset}"))?;
    Ok(SvRun {
        dataset,
        theta: output.theta,
        truth: truth.theta(),
        log_estimate_variance,
        gradients: output.gradients,
        divergences: output.divergences,
        mean_accept: output.mean_accept,
        step_size: output.step_size,
        seconds: output.seconds,
    })
}

fn write_runs_csv(out: &Path, runs: &[SvRun]) -> Result<PathBuf> {
    let path = out.join("runs.csv");
    let mut w = csv::Writer::from_path(&path)?;
    w.write_record([
        "dataset",
        "parameter",
        "truth",
        "mean",
        "sd",
        "q05",
        "q95",
        "covered",
        "ess_bulk",
    ])?;
    for run in runs {
        for (((name, s), t), ess) in SV_THETA_NAMES
            .iter()
            .zip(run.summary())
            .zip(&run.truth)
            .zip(run.ess_bulk())
        {
            w.write_record([
                run.dataset.to_string(),
                name.to_string(),
                format!("{t:.4}"),
                format!("{:.4}", s[0]),
                format!("{:.4}", s[1]),
                format!("{:.4}", s[2]),
                format!("{:.4}", s[3]),
                u8::from(s[2] <= *t && *t <= s[3]).to_string(),
                format!("{ess:.1}"),
            ])?;
        }
    }
    w.flush()?;
    Ok(path)
}

/// Traces of μ, φ and σ (natural units) per data set.
fn write_traces(out: &Path, runs: &[SvRun]) -> Result<Vec<PathBuf>> {
    let truth = SvTruth::default();
    let mut files = Vec::new();
    for (k, (name, value)) in [("mu", truth.mu), ("phi", truth.phi), ("sigma", truth.sigma)]
        .into_iter()
        .enumerate()
    {
        let series = runs
            .iter()
            .map(|run| Series {
                label: format!("data {}", run.dataset),
                points: run
                    .natural()
                    .iter()
                    .enumerate()
                    .map(|(i, t)| (i as f64, t[k]))
                    .collect(),
                colour: run.dataset,
                ..Series::default()
            })
            .collect();
        files.push(super::write_trace(
            out,
            &format!("SV: {name} after warmup (truth {value})"),
            name,
            series,
        )?);
    }
    Ok(files)
}

fn write_markdown(out: &Path, config: &PmSvConfig, runs: &[SvRun]) -> Result<PathBuf> {
    let truth = SvTruth::default();
    let mut md = String::new();
    let _ = writeln!(
        md,
        "# Pseudo-marginal NUTS on the stochastic volatility model of the HNN report: our runs\n"
    );
    let _ = writeln!(md, "Machine: {}. T = {} returns, N = {} prior paths in the importance-sampling estimator (u ∈ R^{}); truth μ = {}, φ = {}, σ = {} (ours). Priors: μ ~ N(0, 10²), (φ + 1)/2 ~ Beta(20, 1.5) (Kim, Shephard & Chib 1998), log σ ~ N(−1, 1); θ = (μ, atanh φ, log σ). One chain per data set: {} warmup (dual averaging to {}, θ's diagonal metric from the middle half) + {} draws, tree depth ≤ {}. Var log p̂ is the sample variance of log p̂(y | θ_true, u) over {} independent u.\n",
        describe_cpu(), config.steps, config.particles, config.steps * config.particles, truth.mu, truth.phi, truth.sigma,
        config.warmup, config.target_accept, config.draws, config.max_tree_depth, config.variance_replicates);
    let _ = writeln!(md, "| data set | θ in 90% interval | μ mean (sd), truth {} | φ mean (sd), truth {} | σ mean (sd), truth {} | min bulk ESS | gradients | divergent | accept | ε | Var log p̂ at truth | seconds |", truth.mu, truth.phi, truth.sigma);
    let _ = writeln!(md, "|---|---|---|---|---|---|---|---|---|---|---|---|");
    for run in runs {
        let natural = run.natural();
        let moments: Vec<(f64, f64)> = (0..3)
            .map(|k| {
                let n = natural.len() as f64;
                let mean = natural.iter().map(|t| t[k]).sum::<f64>() / n;
                (
                    mean,
                    (natural.iter().map(|t| (t[k] - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt(),
                )
            })
            .collect();
        let min_ess = run.ess_bulk().into_iter().fold(f64::INFINITY, f64::min);
        let _ = writeln!(md, "| {} | {} / 3 | {:.2} ({:.2}) | {:.3} ({:.3}) | {:.3} ({:.3}) | {:.0} | {} | {} | {:.2} | {:.4} | {:.2} | {:.0} |",
            run.dataset, run.covered(), moments[0].0, moments[0].1, moments[1].0, moments[1].1, moments[2].0, moments[2].1,
            min_ess, run.gradients, run.divergences, run.mean_accept, run.step_size, run.log_estimate_variance, run.seconds);
    }
    let _ = writeln!(md, "\nThe estimator draws whole log-volatility paths from the AR(1) prior, so its log-weights' variance grows with T and N must grow with it: pseudo-marginal chains mix well when Var log p̂ is about 1–2 (Doucet, Pitt, Deligiannidis & Kohn 2015). Coverage is of the 90% equal-tailed intervals of θ = (μ, atanh φ, log σ). Files: `runs.csv` (every θ coordinate: mean, sd, 90% interval, covered, bulk ESS), `trace_{{mu,phi,sigma}}.svg`.");
    let path = out.join("pm_sv.md");
    std::fs::write(&path, md)?;
    Ok(path)
}

//! One pseudo-marginal NUTS chain over `[θ, u]`, shared by the studies: our NUTS with the
//! kick–flow–kick pseudo-marginal integrator (the `(u, p)` block rotated exactly), step size by
//! dual averaging and θ's diagonal metric from the middle half of the warmup (the `u` block keeps
//! unit mass, as the rotation requires).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use anyhow::{bail, Result};
use bnn_sampler::{
    ChainRng, DiagonalMassMatrix, DualAveraging, Kernel, KernelState, LogDensity, NutsConfig,
    PseudoMarginalLeapfrog, PseudoMarginalScheme, StepParams, WelfordVariance,
};

use crate::fixed_step_chains::Progress;

/// Warmup and sampling lengths of one chain.
#[derive(Clone, Copy, Debug)]
pub struct PmChainSettings {
    pub warmup: usize,
    pub draws: usize,
    pub max_tree_depth: u32,
    pub target_accept: f64,
    /// Keep up to this many states of the warmup's second half, evenly spaced, and the state
    /// and metric the warmup ended with (for a surrogate's training and a second chain from
    /// there); 0 keeps none.
    pub training_states: usize,
}

/// Where a chain starts.
#[derive(Clone, Debug)]
pub enum PmChainStart {
    /// A point `[θ, u]`: ε starts at 0.01 and θ's block of the metric is adapted over the
    /// warmup's middle half.
    Fresh(Vec<f64>),
    /// Where another chain's warmup ended (its point, step size and metric): the warmup adapts
    /// only ε, from `step_size`; the metric stays.
    Continue {
        position: Vec<f64>,
        step_size: f64,
        metric: DiagonalMassMatrix,
    },
}

/// What one chain kept.
#[derive(Clone, Debug)]
pub struct PmChainOutput {
    /// Kept θ draws, one row per draw.
    pub theta: Vec<Vec<f64>>,
    /// Gradient evaluations, warmup included.
    pub gradients: u64,
    /// Of those, the warmup's.
    pub warmup_gradients: u64,
    pub divergences: usize,
    pub mean_accept: f64,
    pub step_size: f64,
    /// Wall time of the whole chain, and of its sampling phase alone.
    pub seconds: f64,
    pub sampling_seconds: f64,
    /// The metric after the warmup (θ's block adapted, `u`'s the identity).
    pub metric: DiagonalMassMatrix,
    /// See [`PmChainSettings::training_states`].
    pub training_states: Vec<Vec<f64>>,
    pub after_warmup: Option<KernelState>,
}

/// Runs one chain from `start` (`[θ, u]`, θ the first `theta_dim` coordinates), advancing
/// `progress` by one per transition.
pub fn run_pm_chain<L: LogDensity>(
    target: &L,
    theta_dim: usize,
    start: PmChainStart,
    settings: PmChainSettings,
    chain: &mut ChainRng,
    progress: &dyn Progress,
    stop: &AtomicBool,
) -> Result<PmChainOutput> {
    let (k, dim) = (theta_dim, target.dim());
    let mut inverse_diag = vec![1.0; dim];
    let (position, mut step_size, mut metric, adapt_metric) = match start {
        PmChainStart::Fresh(position) => (
            position,
            0.01,
            DiagonalMassMatrix::new(inverse_diag.clone())?,
            true,
        ),
        PmChainStart::Continue {
            position,
            step_size,
            metric,
        } => (position, step_size, metric, false),
    };
    let mut state = KernelState::init(target, position)
        .map_err(|e| anyhow::anyhow!("the start is not usable: {e:?}"))?;
    let mut kernel = NutsConfig::new()
        .with_max_tree_depth(settings.max_tree_depth)
        .with_target_accept(settings.target_accept)
        .init_with(
            dim,
            PseudoMarginalLeapfrog::new(k, PseudoMarginalScheme::KickFlowKick),
        )?;
    let mut adaptation = DualAveraging::new(settings.target_accept, 0.05, 0.75, 10.0, step_size);
    let mut variances = WelfordVariance::new(k);
    let (window_start, window_end) = (settings.warmup / 4, 3 * settings.warmup / 4);
    let started = Instant::now();
    let (mut theta, mut gradients, mut divergences, mut accept) =
        (Vec::with_capacity(settings.draws), 0u64, 0, 0.0);
    let half = settings.warmup / 2;
    let keep_every = (settings.warmup - half)
        .div_ceil(settings.training_states.max(1))
        .max(1);
    let (mut training_states, mut after_warmup) = (Vec::new(), None);
    let (mut sampling_started, mut warmup_gradients) = (started, 0);
    for i in 0..settings.warmup + settings.draws {
        if stop.load(Ordering::Relaxed) {
            bail!("interrupted");
        }
        let (next, stats) = kernel.step(
            target,
            chain,
            std::mem::take(&mut state),
            StepParams {
                step_size,
                metric: &metric,
                trajectory_length: None,
            },
        )?;
        state = next;
        progress.advance(1);
        gradients += u64::from(stats.n_leapfrog);
        if i < settings.warmup {
            step_size = adaptation.update(stats.accept_stat);
            if adapt_metric && (window_start..window_end).contains(&i) {
                variances.add(&state.position[..k]);
            }
            if adapt_metric && i + 1 == window_end && variances.count() > 2 {
                // θ's block from the window's variances (Stan's regularization); u keeps unit mass.
                let n = variances.count() as f64;
                for (m, v) in inverse_diag[..k].iter_mut().zip(variances.variance()) {
                    *m = (n / (n + 5.0)) * v + 1e-3 * (5.0 / (n + 5.0));
                }
                metric = DiagonalMassMatrix::new(inverse_diag.clone())?;
                adaptation.restart(step_size);
            }
            if settings.training_states > 0 && i >= half && (i - half).is_multiple_of(keep_every) {
                training_states.push(state.position.clone());
            }
            if i + 1 == settings.warmup {
                step_size = adaptation.averaged_step_size();
                if settings.training_states > 0 {
                    after_warmup = Some(state.clone());
                }
                sampling_started = Instant::now();
                warmup_gradients = gradients;
            }
        } else {
            theta.push(state.position[..k].to_vec());
            divergences += usize::from(stats.divergent);
            accept += stats.accept_stat;
        }
    }
    Ok(PmChainOutput {
        theta,
        gradients,
        divergences,
        mean_accept: accept / settings.draws.max(1) as f64,
        step_size,
        seconds: started.elapsed().as_secs_f64(),
        sampling_seconds: sampling_started.elapsed().as_secs_f64(),
        warmup_gradients,
        metric,
        training_states,
        after_warmup,
    })
}

/// Per θ coordinate of `draws`: posterior mean, sd, 5% and 95% quantiles.
pub fn summarize_theta(draws: &[Vec<f64>], theta_dim: usize) -> Vec<[f64; 4]> {
    (0..theta_dim)
        .map(|k| {
            let mut v: Vec<f64> = draws.iter().map(|t| t[k]).collect();
            let mean = v.iter().sum::<f64>() / v.len() as f64;
            let sd = (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>()
                / (v.len() - 1).max(1) as f64)
                .sqrt();
            v.sort_by(f64::total_cmp);
            [
                mean,
                sd,
                bnn_diagnostics::quantile_type7_sorted(&v, 0.05),
                bnn_diagnostics::quantile_type7_sorted(&v, 0.95),
            ]
        })
        .collect()
}

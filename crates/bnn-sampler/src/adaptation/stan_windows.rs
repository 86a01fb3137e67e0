//! Stan's windowed warmup: step-size dual averaging plus diagonal-metric estimation in windows.

use crate::adaptation::step_size_search::StepSizeSearch;
use bnn_config_derive::Config;
use serde::{Deserialize, Serialize};

use crate::adaptation::dual_averaging::DualAveraging;
use crate::adaptation::stationary_warmup::{
    Next, StationarityConfig, StationaryWarmup, WarmupPolicy,
};
use crate::adaptation::welford::WelfordVariance;
use crate::adaptation::window_schedule::WindowSchedule;
use crate::draw_stats::DrawStats;
use crate::dynamics::GradientKind;
use crate::error::SamplerError;
use crate::kernels::Kernel;
use crate::metric::DiagonalMassMatrix;

/// Warmup settings; the defaults are Stan's. The target acceptance belongs to the kernel's
/// config (`NutsConfig::target_accept`, ...), since its good value depends on the kernel.
#[derive(Config, Debug)]
pub struct WarmupConfig {
    /// Adapt the step size by dual averaging; `false` keeps the initial step size throughout.
    #[config(default = true)]
    pub adapt_step_size: bool,
    /// Estimate the diagonal inverse mass matrix; `false` keeps the initial metric throughout.
    #[config(default = true)]
    pub adapt_metric: bool,
    /// Initial fast interval (step size only) in iterations.
    #[config(default = 75)]
    pub init_buffer: usize,
    /// Terminal fast interval (step size only) in iterations.
    #[config(default = 50)]
    pub term_buffer: usize,
    /// Size of the first slow (metric) window; later windows double.
    #[config(default = 25)]
    pub base_window: usize,
    /// Dual-averaging shrinkage γ.
    #[config(default = 0.05)]
    pub gamma: f64,
    /// Dual-averaging decay exponent κ ∈ (0.5, 1].
    #[config(default = 0.75)]
    pub kappa: f64,
    /// Dual-averaging iteration offset t0.
    #[config(default = 10.0)]
    pub t0: f64,
    /// Search for a reasonable step size (Hoffman & Gelman 2014, Alg. 4) before the warmup and
    /// after every metric update (leapfrog kernels only).
    #[config(default = true)]
    pub find_initial_step_size: bool,
    /// How that search decides: Stan's level ½ with one momentum, or NumPyro's level at the
    /// target acceptance with a fresh momentum per try.
    #[config(default = "StepSizeSearch::Stan")]
    pub step_size_search: StepSizeSearch,
    /// How a slow window's draws become the metric: Stan's regularized variance of the
    /// positions, or nutpie's `sqrt(Var[θ] / Var[∇ log p])` from positions and gradients.
    #[config(default = "MetricEstimate::Draws")]
    pub metric_estimate: MetricEstimate,
    /// What ends the warmup: the planned iterations (`Fixed`, Stan's), or a check window at
    /// the final step size and metric that must pass (`Stationary`; needs `adapt_step_size`).
    #[config(default = "WarmupPolicy::Fixed")]
    pub policy: WarmupPolicy,
    /// The stationary policy's check and extensions.
    #[config(default = "StationarityConfig::new()")]
    pub stationarity: StationarityConfig,
}

/// The estimator that turns a slow window's draws into the diagonal inverse mass matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MetricEstimate {
    /// Stan: the positions' sample variance, shrunk toward 10⁻³ while few draws are in
    /// (`n/(n+5) σ² + 10⁻³ · 5/(n+5)`).
    #[default]
    Draws,
    /// nutpie (Seyboldt's nuts-rs): `sqrt(Var[θ_i] / Var[∂_i log p])`, the diagonal that
    /// minimizes the Fisher divergence to a Gaussian. On a Gaussian target it is the exact
    /// variance however little of the posterior the window covered, since the gradient's spread
    /// shrinks with the positions': a short warmup whose chains are still drifting (BNN chains
    /// from ensemble members) gets the local scale instead of the drift's.
    DrawsAndGradients,
}

impl WarmupConfig {
    pub(crate) fn validate(&self) -> Result<(), SamplerError> {
        let invalid = |message: String| Err(SamplerError::InvalidConfig(message));
        if self.base_window == 0 {
            return invalid("warmup base_window must be at least 1".into());
        }
        if !(self.gamma > 0.0 && self.gamma.is_finite()) {
            return invalid(format!("warmup gamma must be positive, got {}", self.gamma));
        }
        if !(self.kappa > 0.5 && self.kappa <= 1.0) {
            return invalid(format!(
                "warmup kappa must lie in (0.5, 1], got {}",
                self.kappa
            ));
        }
        if !(self.t0 >= 0.0 && self.t0.is_finite()) {
            return invalid(format!("warmup t0 must be non-negative, got {}", self.t0));
        }
        if self.policy == WarmupPolicy::Stationary {
            if !self.adapt_step_size {
                return invalid("the stationary warmup policy needs adapt_step_size (its check retunes the step size); use the fixed policy for a fixed step size".into());
            }
            self.stationarity.validate()?;
        }
        Ok(())
    }

    /// Refuses, before a warmup starts, the settings that cannot work with `kernel`'s
    /// transitions: the draws-and-gradients estimate reads `KernelState::gradient` as `∇ log p`,
    /// which some kernels' states do not hold (`Kernel::state_gradient`); and dual averaging on
    /// surrogate leaves collapses ε (see `SurrogateNuts`).
    pub fn check_kernel<K: Kernel + ?Sized>(&self, kernel: &K) -> Result<(), SamplerError> {
        let gradient = kernel.state_gradient();
        if self.adapt_metric
            && self.metric_estimate == MetricEstimate::DrawsAndGradients
            && gradient != GradientKind::LogDensity
        {
            return Err(SamplerError::UnsupportedSetting {
                kernel: gradient.kernel_name(),
                setting: "warmup.metric_estimate = draws-and-gradients",
                reason: format!("it reads the states' gradient as ∇ log p, which this kernel leaves as {gradient:?}; use the draws estimate"),
            });
        }
        if self.adapt_step_size && gradient == GradientKind::Surrogate {
            return Err(SamplerError::UnsupportedSetting {
                kernel: gradient.kernel_name(),
                setting: "warmup.adapt_step_size",
                reason: "the acceptance of surrogate leaves barely depends on ε, so dual averaging drives ε toward zero; tune ε and the metric with a true-gradient NUTS warmup and sample with them (as lhnn-adapted does)".into(),
            });
        }
        Ok(())
    }
}

/// A window's inverse mass matrix. Stan's: the positions' variance shrunk toward 10⁻³ with
/// weight `5/(n+5)`. With gradients (nutpie's): `sqrt(Var[θ_i] / Var[g_i])` where both are
/// positive and finite, Stan's value for a coordinate where they are not (a coordinate the
/// window never moved, or whose gradient never changed).
fn metric_estimate(positions: &WelfordVariance, gradients: Option<&WelfordVariance>) -> Vec<f64> {
    let n = positions.count() as f64;
    let stan = |v: f64| (n / (n + 5.0)) * v + 1e-3 * (5.0 / (n + 5.0));
    let position_variances = positions.variance();
    match gradients {
        None => position_variances.into_iter().map(stan).collect(),
        Some(gradients) => position_variances
            .into_iter()
            .zip(gradients.variance())
            .map(|(v, g)| {
                let ratio = (v / g).sqrt();
                if ratio.is_finite() && ratio > 0.0 {
                    ratio
                } else {
                    stan(v)
                }
            })
            .collect(),
    }
}

/// Everything the warmup of one chain has learned so far; serializable so a checkpointed chain
/// resumes its warmup exactly (window position, Welford sums, dual-averaging iterates).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WarmupState {
    iteration: usize,
    adapt_step_size: bool,
    adapt_metric: bool,
    schedule: WindowSchedule,
    dual_averaging: DualAveraging,
    variances: WelfordVariance,
    /// The window's gradient variances, kept only for `MetricEstimate::DrawsAndGradients`
    /// (absent from checkpoints written before the option existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    gradient_variances: Option<WelfordVariance>,
    /// First iteration of the current adaptation segment: 0, or where the stationary policy's
    /// last extension began (`schedule` counts from there).
    #[serde(default, skip_serializing_if = "is_zero")]
    segment_start: usize,
    /// The stationary policy's check windows and extensions (absent: the fixed policy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// Boxed: most chains (every fixed-policy one) do without it.
    stationary: Option<Box<StationaryWarmup>>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl WarmupState {
    pub fn new(
        config: &WarmupConfig,
        num_warmup: usize,
        dim: usize,
        target_accept: f64,
        initial_step_size: f64,
    ) -> Self {
        Self {
            iteration: 0,
            adapt_step_size: config.adapt_step_size,
            adapt_metric: config.adapt_metric,
            schedule: WindowSchedule::new(
                num_warmup,
                config.init_buffer,
                config.term_buffer,
                config.base_window,
            ),
            dual_averaging: DualAveraging::new(
                target_accept,
                config.gamma,
                config.kappa,
                config.t0,
                initial_step_size,
            ),
            variances: WelfordVariance::new(dim),
            gradient_variances: (config.metric_estimate == MetricEstimate::DrawsAndGradients)
                .then(|| WelfordVariance::new(dim)),
            segment_start: 0,
            stationary: (config.policy == WarmupPolicy::Stationary
                && config.adapt_step_size
                && num_warmup > 0)
                .then(|| {
                    Box::new(StationaryWarmup::new(
                        &config.stationarity,
                        dim,
                        num_warmup,
                        config.term_buffer,
                    ))
                }),
        }
    }

    /// Warmup iterations as planned now: fixed for the fixed policy; the stationary policy's
    /// grow with each failed check, up to its cap.
    pub fn num_warmup(&self) -> usize {
        match &self.stationary {
            None => self.schedule.num_warmup(),
            Some(stationary) => stationary.num_warmup(),
        }
    }

    /// The stationary policy's checks and why the warmup ended (`None`: the fixed policy).
    pub fn stationary(&self) -> Option<&StationaryWarmup> {
        self.stationary.as_deref()
    }

    /// Warmup iterations observed so far.
    pub fn iteration(&self) -> usize {
        self.iteration
    }

    pub fn is_finished(&self) -> bool {
        self.iteration >= self.num_warmup()
    }

    pub fn schedule(&self) -> &WindowSchedule {
        &self.schedule
    }

    pub fn dual_averaging(&self) -> &DualAveraging {
        &self.dual_averaging
    }

    /// Observes one warmup transition (its draw, the log density's gradient there, and its
    /// statistics; a kernel whose states hold another gradient is refused by
    /// `WarmupConfig::check_kernel`, which the runner calls at the start) and updates the step size and the metric for the next one. At the end of a
    /// slow window the metric becomes the window's estimate (`MetricEstimate`); the step size is
    /// then re-chosen by `search(new_metric, ε)` and the dual averaging restarts from it. After
    /// the last warmup iteration the step size becomes the averaged iterate `ε̄`.
    pub fn observe(
        &mut self,
        position: &[f64],
        gradient: &[f64],
        stats: &DrawStats,
        step_size: &mut f64,
        metric: &mut DiagonalMassMatrix,
        search: impl FnOnce(&DiagonalMassMatrix, f64) -> f64,
    ) {
        if self.is_finished() {
            return;
        }
        let iteration = self.iteration;
        self.iteration += 1;
        if let Some(stationary) = &mut self.stationary {
            if stationary.in_check(iteration) {
                // The check runs the chain as it will sample: nothing adapts.
                let target = self.dual_averaging.target();
                if let Next::Extend { slow, target } =
                    stationary.observe_check(iteration, gradient, stats, target)
                {
                    self.segment_start = iteration + 1;
                    self.schedule = WindowSchedule::extension(slow, stationary.term_buffer());
                    self.dual_averaging.retarget(target, *step_size);
                }
                return;
            }
            stationary.observe_segment(iteration, stats.log_density);
        }
        let local = iteration - self.segment_start;
        if self.adapt_step_size {
            *step_size = self.dual_averaging.update(stats.accept_stat);
        }
        if self.adapt_metric && self.schedule.collects(local) {
            self.variances.add(position);
            if let Some(gradients) = &mut self.gradient_variances {
                gradients.add(gradient);
            }
        }
        if self.adapt_metric && self.schedule.ends_window(local) {
            let estimate = metric_estimate(&self.variances, self.gradient_variances.as_ref());
            if let Some(gradients) = &mut self.gradient_variances {
                gradients.reset();
            }
            if let Ok(updated) = DiagonalMassMatrix::new(estimate) {
                *metric = updated;
                if self.adapt_step_size {
                    *step_size = search(metric, *step_size);
                    self.dual_averaging.restart(*step_size);
                }
            }
            self.variances.reset();
        }
        if self.adapt_step_size && local + 1 == self.schedule.num_warmup() {
            *step_size = self.dual_averaging.averaged_step_size();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A window of a chain that barely moves and drifts (the BNN case: 0.1% of the scale around a
    /// point sliding away) on a Gaussian with scales 10⁻²…10²: the positions' variance is the
    /// drift's, the gradients' ratio is each coordinate's variance to rounding.
    #[test]
    fn the_gradient_estimate_recovers_a_gaussians_variances_from_a_drifting_window() {
        let scales = [1e-2, 1.0, 1e2];
        let mut positions = WelfordVariance::new(3);
        let mut gradients = WelfordVariance::new(3);
        for t in 0..40 {
            let wiggle = ((t * 7919) % 13) as f64 / 13.0 - 0.5;
            let x: Vec<f64> = scales
                .iter()
                .map(|s| s * (0.3 + 1e-3 * (wiggle + 0.05 * t as f64)))
                .collect();
            let g: Vec<f64> = x.iter().zip(&scales).map(|(x, s)| -x / (s * s)).collect();
            positions.add(&x);
            gradients.add(&g);
        }
        let with_gradients = metric_estimate(&positions, Some(&gradients));
        let stan = metric_estimate(&positions, None);
        for ((estimate, stan), s) in with_gradients.iter().zip(&stan).zip(&scales) {
            assert!(
                (estimate / (s * s) - 1.0).abs() < 1e-9,
                "{estimate} for scale {s}"
            );
            // Stan's is the drift's (plus its 10⁻³ shrinkage, which dominates the smallest scale).
            if *s >= 1.0 {
                assert!(
                    stan / (s * s) < 1e-3,
                    "Stan's estimate {stan} should be far below {}",
                    s * s
                );
            }
        }
    }

    /// A coordinate whose gradient never changed (or that never moved) falls back to Stan's value.
    #[test]
    fn the_gradient_estimate_falls_back_where_the_ratio_is_undefined() {
        let mut positions = WelfordVariance::new(2);
        let mut gradients = WelfordVariance::new(2);
        for t in 0..10 {
            positions.add(&[t as f64, 1.0]);
            gradients.add(&[-0.5, -(t as f64)]);
        }
        let stan = metric_estimate(&positions, None);
        assert_eq!(metric_estimate(&positions, Some(&gradients)), stan);
    }
}

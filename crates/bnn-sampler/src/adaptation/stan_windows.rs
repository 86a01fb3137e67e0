//! Stan's windowed warmup: step-size dual averaging plus diagonal-metric estimation in windows.

use crate::adaptation::step_size_search::StepSizeSearch;
use burn::config::Config;
use serde::{Deserialize, Serialize};

use crate::adaptation::dual_averaging::DualAveraging;
use crate::adaptation::welford::WelfordVariance;
use crate::adaptation::window_schedule::WindowSchedule;
use crate::draw_stats::DrawStats;
use crate::error::SamplerError;
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
        Ok(())
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
        }
    }

    pub fn num_warmup(&self) -> usize {
        self.schedule.num_warmup()
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

    /// Observes one warmup transition (its draw and its statistics) and updates the step size
    /// and the metric for the next one. At the end of a slow window the metric becomes the
    /// regularized variance estimate (Stan: `n/(n+5) σ² + 10⁻³ · 5/(n+5)`, shrinking toward a
    /// small multiple of the identity while few draws are in); the step size is then re-chosen by
    /// `search(new_metric, ε)` and the dual averaging restarts from it. After the last warmup
    /// iteration the step size becomes the averaged iterate `ε̄`.
    pub fn observe(
        &mut self,
        position: &[f64],
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
        if self.adapt_step_size {
            *step_size = self.dual_averaging.update(stats.accept_stat);
        }
        if self.adapt_metric && self.schedule.collects(iteration) {
            self.variances.add(position);
        }
        if self.adapt_metric && self.schedule.ends_window(iteration) {
            let n = self.variances.count() as f64;
            let regularized = self
                .variances
                .variance()
                .into_iter()
                .map(|v| (n / (n + 5.0)) * v + 1e-3 * (5.0 / (n + 5.0)))
                .collect();
            if let Ok(updated) = DiagonalMassMatrix::new(regularized) {
                *metric = updated;
                if self.adapt_step_size {
                    *step_size = search(metric, *step_size);
                    self.dual_averaging.restart(*step_size);
                }
            }
            self.variances.reset();
        }
        if self.adapt_step_size && self.is_finished() {
            *step_size = self.dual_averaging.averaged_step_size();
        }
    }
}

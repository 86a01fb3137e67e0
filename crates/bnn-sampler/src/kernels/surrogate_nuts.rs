//! Surrogate-gradient NUTS (Dhulipala, Che & Shields 2023): our multinomial NUTS whose leaves move
//! by a surrogate's force and are weighted by the true H, counting true and surrogate evaluations.

use std::sync::Arc;

use bnn_config_derive::Config;
use rand::Rng;

use crate::draw_stats::{DrawStats, KernelStats, StatColumn};
use crate::dynamics::surrogate::{
    EvaluationCounts, MonitorConfig, SurrogateGradient, SurrogateLeapfrog, SurrogateMode,
};
use crate::dynamics::GradientKind;
use crate::error::SamplerError;
use crate::kernels::{Kernel, KernelState, Nuts, NutsConfig, StepParams};
use crate::log_density::{LogDensity, LogDensityError};

/// Configuration of surrogate-gradient NUTS.
#[derive(Config, Debug)]
pub struct SurrogateNutsConfig {
    /// The tree: target acceptance of a step-size adaptation, depth cap, and the energy error
    /// that cuts a trajectory as divergent (the paper's `Δ_lf` = 1000 for true-gradient leaves;
    /// in the exact mode it applies to every leaf).
    #[config(default = "NutsConfig::new()")]
    pub nuts: NutsConfig,
    /// The paper's online error monitoring (approximate: see `dynamics::surrogate`); off, every
    /// leaf uses the surrogate and the sampler is exact for any surrogate.
    #[config(default = false)]
    pub adaptive: bool,
    /// Adaptive mode: `Δ_hnn`, the energy error of a surrogate leaf that makes it fall back to
    /// the true gradient (paper: 10).
    #[config(default = 10.0)]
    pub surrogate_threshold: f64,
    /// Adaptive mode: transitions after a fallback that run on true gradients (paper: 20).
    #[config(default = 20)]
    pub cooldown: u32,
}

impl SurrogateNutsConfig {
    fn mode(&self) -> Result<SurrogateMode, SamplerError> {
        if !self.adaptive {
            return Ok(SurrogateMode::Exact);
        }
        if !(self.surrogate_threshold > 0.0) {
            return Err(SamplerError::InvalidConfig(format!(
                "the surrogate error threshold must be positive, got {}",
                self.surrogate_threshold
            )));
        }
        Ok(SurrogateMode::Adaptive(MonitorConfig {
            surrogate_threshold: self.surrogate_threshold,
            cooldown: self.cooldown,
        }))
    }

    /// Builds the kernel for `dim` coordinates around `surrogate`.
    pub fn init<S: SurrogateGradient + ?Sized>(
        &self,
        dim: usize,
        surrogate: Arc<S>,
    ) -> Result<SurrogateNuts<S>, SamplerError> {
        if surrogate.dim() != dim {
            return Err(SamplerError::InvalidConfig(format!(
                "the surrogate has dimension {}, the target {dim}",
                surrogate.dim()
            )));
        }
        let integrator = SurrogateLeapfrog::new(surrogate, self.mode()?);
        Ok(SurrogateNuts {
            nuts: self.nuts.init_with(dim, integrator)?,
        })
    }
}

/// NUTS with surrogate leaves. The state a transition ends on carries the surrogate's gradient
/// at the draw (surrogate leaves never evaluate the true one, and the next transition's first
/// kick must be the surrogate's): `state_gradient` is `GradientKind::Surrogate`, so the runner
/// refuses the draws-and-gradients metric estimate with it. `DrawStats` reports the true
/// gradients, true values and surrogate forces the transition cost.
///
/// Do not adapt ε on its own transitions. Their acceptance is dominated by the surrogate's
/// error, which a smaller step barely reduces, so dual averaging toward 0.8 drives ε down by
/// orders of magnitude (to about 10⁻⁴, every tree at the depth cap, an ESS of 5–8 in 24,000
/// draws): the runner refuses `warmup.adapt_step_size` with this kernel. Tune ε and the metric
/// with a true-gradient NUTS warmup instead and sample from where it ended with them, as the
/// `lhnn-adapted` sampler of `bnn study lhnn` does; the leaves stay exact under any metric.
#[derive(Clone, Debug)]
pub struct SurrogateNuts<S: ?Sized> {
    nuts: Nuts<SurrogateLeapfrog<S>>,
}

impl<S: SurrogateGradient + ?Sized> SurrogateNuts<S> {
    /// Evaluations since the kernel was built.
    pub fn counts(&self) -> EvaluationCounts {
        self.nuts.integrator().counts()
    }

    /// Leaves recomputed with the true gradient since the kernel was built (adaptive mode).
    pub fn fallbacks(&self) -> u64 {
        self.nuts.integrator().monitor().fallbacks
    }
}

impl<S: SurrogateGradient + ?Sized> Kernel for SurrogateNuts<S> {
    fn uses_leapfrog(&self) -> bool {
        true
    }

    fn state_gradient(&self) -> GradientKind {
        self.nuts.state_gradient()
    }

    fn check_params(&self, params: StepParams<'_>) -> Result<(), SamplerError> {
        self.nuts.check_params(params)
    }

    fn step<L: LogDensity + ?Sized, R: Rng + Send + ?Sized>(
        &mut self,
        density: &L,
        rng: &mut R,
        state: KernelState,
        params: StepParams<'_>,
    ) -> Result<(KernelState, DrawStats), LogDensityError> {
        let before = self.counts();
        let (state, mut stats) = self.nuts.step(density, rng, state, params)?;
        let after = self.counts();
        stats.kernel = SurrogateCounts {
            true_gradients: (after.gradients - before.gradients) as u32,
            true_densities: (after.values - before.values) as u32,
            surrogate_gradients: (after.surrogate - before.surrogate) as u32,
        }
        .into();
        Ok((state, stats))
    }
}

/// The columns surrogate-gradient NUTS adds to the common statistics (`DrawStats::kernel`).
pub const SURROGATE_NUTS_STATS: [StatColumn; 3] = [
    StatColumn::count(
        "true_gradients__",
        "true value-and-gradient evaluations (the monitor's fallback leaves)",
    ),
    StatColumn::count(
        "true_densities__",
        "true value-only evaluations (one per surrogate leaf)",
    ),
    StatColumn::count(
        "surrogate_gradients__",
        "evaluations of the surrogate's force",
    ),
];

/// What one surrogate-NUTS transition evaluated (its `DrawStats::kernel`, by name); the tree's
/// `n_leapfrog` counts leaves, whatever moved them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SurrogateCounts {
    pub true_gradients: u32,
    pub true_densities: u32,
    pub surrogate_gradients: u32,
}

impl SurrogateCounts {
    /// The counts of a surrogate-NUTS transition's statistics.
    pub fn of(stats: &DrawStats) -> Self {
        let count = |i: usize| stats.kernel.get(i) as u32;
        Self {
            true_gradients: count(0),
            true_densities: count(1),
            surrogate_gradients: count(2),
        }
    }
}

impl From<SurrogateCounts> for KernelStats {
    fn from(counts: SurrogateCounts) -> Self {
        KernelStats::new(&[
            f64::from(counts.true_gradients),
            f64::from(counts.true_densities),
            f64::from(counts.surrogate_gradients),
        ])
    }
}

//! Random-walk Metropolis with a Gaussian proposal shaped by the metric and an adapted scale.

use bnn_config_derive::Config;
use rand::Rng;
use rand_distr::{Distribution, StandardNormal};

use crate::draw_stats::DrawStats;
use crate::error::SamplerError;
use crate::kernels::{Kernel, KernelState, StepParams};
use crate::log_density::{recover, LogDensity, LogDensityError};
use crate::sampler_settings::{ChainRunner, SamplerSettings};

/// Configuration of the random-walk Metropolis kernel and of its scale adaptation target.
#[derive(Config, Debug)]
pub struct RandomWalkConfig {
    /// Target acceptance rate for the scale adaptation (0.234: Roberts, Gelman & Gilks 1997;
    /// about 0.44 is better in one dimension).
    #[config(default = 0.234)]
    pub target_accept: f64,
}

impl RandomWalkConfig {
    pub(crate) fn validate(&self) -> Result<(), SamplerError> {
        if !(self.target_accept > 0.0 && self.target_accept < 1.0) {
            return Err(SamplerError::InvalidConfig(format!(
                "random-walk target_accept must lie in (0, 1), got {}",
                self.target_accept
            )));
        }
        Ok(())
    }

    /// Builds the kernel; buffers are sized on first use and reused afterwards.
    pub fn init(&self) -> Result<RandomWalk, SamplerError> {
        self.validate()?;
        Ok(RandomWalk {
            proposal: Vec::new(),
            gradient: Vec::new(),
        })
    }

    /// The usual starting scale `2.38 / sqrt(D)` (Gelman, Roberts & Gilks 1996).
    pub fn default_scale(dim: usize) -> f64 {
        2.38 / (dim.max(1) as f64).sqrt()
    }
}

impl SamplerSettings for RandomWalkConfig {
    const NAME: &'static str = "rwm";

    fn validate(&self) -> Result<(), SamplerError> {
        RandomWalkConfig::validate(self)
    }

    fn target_accept(&self) -> f64 {
        self.target_accept
    }

    fn uses_leapfrog(&self) -> bool {
        false
    }

    fn default_step_size(&self, dim: usize) -> f64 {
        Self::default_scale(dim)
    }

    fn run<L: LogDensity + ?Sized>(&self, chains: ChainRunner<'_, L>) -> Result<(), SamplerError> {
        chains.threaded(|| self.init())
    }
}

/// The random-walk Metropolis kernel: reusable proposal buffers.
///
/// The proposal is `q' = q + s · sqrt(M⁻¹) ⊙ n`, `n ~ N(0, I)`: the per-coordinate posterior
/// standard deviations estimated by the warmup's diagonal metric, times a global scale `s`. The
/// scale plays the role of the step size: the warmup adapts it with the same dual averaging
/// (on `log s`) toward an acceptance rate of 0.234, the optimum for high-dimensional product
/// targets (Roberts, Gelman & Gilks 1997). Dual averaging was chosen over Robbins–Monro because
/// it is already tuned for this job, and its averaged iterate `s̄` is a stable final value.
#[derive(Clone, Debug)]
pub struct RandomWalk {
    proposal: Vec<f64>,
    gradient: Vec<f64>,
}

impl Kernel for RandomWalk {
    fn uses_leapfrog(&self) -> bool {
        false
    }

    /// Random numbers, in order: `D` normals for the proposal, one uniform for the test.
    fn step<L: LogDensity + ?Sized, R: Rng + Send + ?Sized>(
        &mut self,
        density: &L,
        rng: &mut R,
        mut state: KernelState,
        params: StepParams<'_>,
    ) -> Result<(KernelState, DrawStats), LogDensityError> {
        let dim = state.dim();
        self.proposal.resize(dim, 0.0);
        self.gradient.resize(dim, 0.0);
        let scale = params.step_size;
        for ((proposed, q), sd) in self
            .proposal
            .iter_mut()
            .zip(&state.position)
            .zip(params.metric.sqrt_inverse_diag())
        {
            let z: f64 = StandardNormal.sample(rng);
            *proposed = q + scale * sd * z;
        }
        // The gradient is computed by the interface anyway; keeping it keeps the state consistent.
        // A recoverable failure rejects the proposal like a non-finite value.
        let log_density =
            recover(density.evaluate(&self.proposal, &mut self.gradient))?.unwrap_or(f64::NAN);
        let log_ratio = log_density - state.log_density;
        let divergent = !log_density.is_finite();
        let accept_prob = if divergent {
            0.0
        } else {
            log_ratio.exp().min(1.0)
        };
        let u: f64 = rng.random();
        if !divergent && u < accept_prob {
            std::mem::swap(&mut state.position, &mut self.proposal);
            std::mem::swap(&mut state.gradient, &mut self.gradient);
            state.log_density = log_density;
        }
        let stats = DrawStats {
            log_density: state.log_density,
            accept_stat: accept_prob,
            step_size: scale,
            tree_depth: 0,
            n_leapfrog: 0,
            divergent,
            energy: -state.log_density,
            energy_error: -log_ratio,
            ..DrawStats::default()
        };
        Ok((state, stats))
    }
}

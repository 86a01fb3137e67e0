//! SMILE: microcanonical Langevin dynamics driven by minibatch gradients (Sommer et al. 2026,
//! "Can Microcanonical Langevin Dynamics Leverage Mini-Batch Gradient Noise?", arXiv
//! 2602.06500). MCLMC's isokinetic McLachlan step, with every gradient estimated from `B` rows
//! drawn afresh for each transition ([`MinibatchDensity`]): a step costs `3B` row-gradients
//! instead of MCLMC's `2N`.
//!
//! One transition of a chain:
//! 1. draw its `B` rows, uniformly without replacement, from the chain's stream;
//! 2. evaluate the minibatch log density and gradient at the start, so that the whole step and
//!    its energy error belong to one minibatch Hamiltonian (the authors' code reuses the
//!    previous step's gradient for the first kick: `reuse_previous_gradient`, measured slower);
//! 3. one McLachlan step on this minibatch (three gradients of `B` rows per step);
//! 4. MCLMC's partial velocity refresh with the tuned `L` (`refresh`; the paper's SMILE has
//!    none and lets the gradient noise decorrelate the velocity, which measured biased here).
//!
//! The warmup is MCLMC's (ε from the energy-error variance, which here includes the noise of
//! the stale first kick) with the gradient-noise preconditioner of
//! [`crate::adaptation::gradient_noise`]. The chain has no Metropolis test and is biased by
//! both the step size and the batch; `tests/smile.rs` measures that bias on a Bayesian linear
//! regression and checks that it shrinks as `B` grows.
//!
//! The draws' `lp__` is the minibatch estimate at the draw (its own batch), not the full log
//! density: the full one would cost `N / B` times a step.

use bnn_config_derive::Config;
use rand::Rng;
use rand_distr::{Distribution, StandardNormal};

use crate::adaptation::gradient_noise::SmileTuner;
use crate::adaptation::stan_windows::{WarmupConfig, WarmupState};
use crate::adaptation::{TunedParams, Tuner};
use crate::draw_stats::{DrawStats, KernelStats, StatColumn};
use crate::dynamics::isokinetic::refresh_velocity;
use crate::dynamics::isokinetic_path::IsokineticPath;
use crate::error::SamplerError;
use crate::kernels::mclmc::{random_direction, MICROCANONICAL_STATS};
use crate::kernels::MclmcConfig;
use crate::kernels::{
    step_as_batch_of_one, BatchChain, BatchKernel, Kernel, KernelState, StepParams,
};
use crate::log_density::{recover, LogDensity, LogDensityError, MinibatchDensity};
use crate::sampler_settings::{Budget, ChainRunner, SamplerSettings};

/// Configuration of SMILE and of its warmup.
#[derive(Config, Debug)]
pub struct SmileConfig {
    /// Rows per minibatch gradient, `B` (the authors' UCI runs: 256). At most the data's rows.
    #[config(default = 256)]
    pub batch_size: usize,
    /// Step size the warmup starts from.
    #[config(default = 1e-3)]
    pub initial_step_size: f64,
    /// Decoherence length `L` the warmup starts from (used only with `refresh`); `None`:
    /// `max(√d, 15)`.
    pub initial_trajectory_length: Option<f64>,
    /// Target variance of the energy error per dimension, from the start of the warmup ...
    #[config(default = 5e-4)]
    pub energy_variance_start: f64,
    /// ... to the end of its phase 2 (as MCLMC's tuner).
    #[config(default = 1e-4)]
    pub energy_variance_end: f64,
    /// Share of the warmup in the tuner's phase 1; the noise preconditioner is fixed at its end.
    #[config(default = 0.8)]
    pub phase1_fraction: f64,
    /// Share of the warmup in phase 2 (step size for the final preconditioner; positions' spread
    /// for `L`).
    #[config(default = 0.1)]
    pub phase2_fraction: f64,
    /// Effective number of steps the step-size averages remember.
    #[config(default = 100.0)]
    pub effective_samples: f64,
    /// BlackJAX's `trust_in_estimate` for the step-size averages.
    #[config(default = 1.5)]
    pub trust_in_estimate: f64,
    /// Phase 3's `L = factor · ε · mean(steps / ESS)`.
    #[config(default = 0.4)]
    pub trajectory_length_factor: f64,
    /// Precondition with the minibatch gradients' noise scale (the paper's `NOISYSMILE`).
    #[config(default = true)]
    pub noise_preconditioning: bool,
    /// Weight β of the newest gradient in the noise moments (the authors' 0.01).
    #[config(default = 0.01)]
    pub noise_smoothing: f64,
    /// The noise preconditioner's relative scales are clamped to `[1/bound, bound]`.
    #[config(default = 100.0)]
    pub noise_bound: f64,
    /// Refresh the velocity partially after each step with the tuned `L` (MCLMC's noise on top
    /// of the gradient noise). The paper's SMILE leaves it off and lets the noisy forces turn
    /// the velocity; on the regression of `tests/smile.rs` that left the posterior sds 16-48%
    /// off even at full batch (the dynamics is then nearly deterministic), against 1% with it.
    #[config(default = true)]
    pub refresh: bool,
    /// Start each step's first kick from the gradient the previous step ended with (on the
    /// previous batch; the authors' code: two gradients per step) instead of a fresh one on this
    /// step's batch (three). The stale kick's noise then enters the energy error the tuner
    /// controls, and on the regression of `tests/smile.rs` the step size it settles at falls
    /// 60-450× below full-batch MCLMC's (B = 1000..20 of N = 10,000), mixing that much slower.
    #[config(default = false)]
    pub reuse_previous_gradient: bool,
    /// A step whose energy error exceeds this is refused (the chain stays, its velocity is
    /// drawn afresh): a guard against a batch that throws the chain out.
    #[config(default = 1000.0)]
    pub max_energy_error: f64,
}

impl SmileConfig {
    pub(crate) fn validate(&self) -> Result<(), SamplerError> {
        if self.batch_size == 0 {
            return Err(SamplerError::InvalidConfig(
                "SMILE batch_size must be at least 1".into(),
            ));
        }
        if !(self.noise_smoothing > 0.0 && self.noise_smoothing <= 1.0) {
            return Err(SamplerError::InvalidConfig(format!(
                "SMILE noise_smoothing must lie in (0, 1], got {}",
                self.noise_smoothing
            )));
        }
        if !(self.noise_bound >= 1.0 && self.noise_bound.is_finite()) {
            return Err(SamplerError::InvalidConfig(format!(
                "SMILE noise_bound must be at least 1 and finite, got {}",
                self.noise_bound
            )));
        }
        if !(self.max_energy_error > 0.0) {
            return Err(SamplerError::InvalidConfig(format!(
                "SMILE max_energy_error must be positive, got {}",
                self.max_energy_error
            )));
        }
        self.mclmc().validate().map_err(|e| match e {
            SamplerError::InvalidConfig(m) => {
                SamplerError::InvalidConfig(m.replacen("MCLMC", "SMILE", 1))
            }
            other => other,
        })
    }

    /// The MCLMC settings of the step-size tuner underneath.
    pub fn mclmc(&self) -> MclmcConfig {
        MclmcConfig::new()
            .with_initial_step_size(self.initial_step_size)
            .with_initial_trajectory_length(self.initial_trajectory_length)
            .with_energy_variance_start(self.energy_variance_start)
            .with_energy_variance_end(self.energy_variance_end)
            .with_phase1_fraction(self.phase1_fraction)
            .with_phase2_fraction(self.phase2_fraction)
            .with_effective_samples(self.effective_samples)
            .with_trust_in_estimate(self.trust_in_estimate)
            .with_trajectory_length_factor(self.trajectory_length_factor)
            .with_diagonal_preconditioning(false)
    }

    /// Builds the kernel.
    pub fn init(&self) -> Result<Smile, SamplerError> {
        self.validate()?;
        Ok(Smile {
            batch_size: self.batch_size,
            refresh: self.refresh,
            reuse_previous_gradient: self.reuse_previous_gradient,
            max_energy_error: self.max_energy_error,
            ..Smile::default()
        })
    }

    /// Refuses a density SMILE cannot run on: one without row subsets, or fewer rows than a batch.
    fn check_density<L: LogDensity + ?Sized>(&self, density: &L) -> Result<(), SamplerError> {
        let Some(minibatch) = density.minibatch() else {
            return Err(SamplerError::InvalidConfig(
                "SMILE needs a density it can evaluate on subsets of its data rows (LogDensity::minibatch); the built-in MLP posterior offers one, except with the learned-σ likelihood".into(),
            ));
        };
        let rows = minibatch.num_rows();
        if self.batch_size > rows {
            return Err(SamplerError::InvalidConfig(format!(
                "SMILE batch_size {} exceeds the {rows} training rows; use at most {rows} (or MCLMC for full-batch gradients)",
                self.batch_size
            )));
        }
        Ok(())
    }
}

impl SamplerSettings for SmileConfig {
    const NAME: &'static str = "smile";

    fn validate(&self) -> Result<(), SamplerError> {
        SmileConfig::validate(self)
    }

    /// No acceptance test: the tuner aims at an energy-error variance.
    fn target_accept(&self) -> f64 {
        0.5
    }

    fn uses_leapfrog(&self) -> bool {
        false
    }

    fn default_step_size(&self, _dim: usize) -> f64 {
        self.initial_step_size
    }

    /// MILE's budget, as the authors run SMILE: 50,000 tuning and 10,000 sampling steps, every
    /// 10th kept.
    fn default_budget(&self) -> Budget {
        Budget {
            warmup: 50_000,
            draws: 10_000,
            thin: 10,
        }
    }

    fn min_dim(&self) -> usize {
        2
    }

    fn supports_batched(&self) -> bool {
        true
    }

    fn start_warmup(
        &self,
        warmup: &WarmupConfig,
        num_warmup: usize,
        dim: usize,
        params: &mut TunedParams,
    ) -> Tuner {
        let mclmc = self.mclmc();
        params.trajectory_length = Some(mclmc.start_trajectory_length(dim));
        if warmup.adapt_step_size {
            let noise = self
                .noise_preconditioning
                .then_some((self.noise_smoothing, self.noise_bound));
            Tuner::Smile(Box::new(SmileTuner::new(&mclmc, num_warmup, dim, noise)))
        } else {
            Tuner::StanWindows(WarmupState::new(
                warmup,
                num_warmup,
                dim,
                self.target_accept(),
                params.step_size,
            ))
        }
    }

    fn stat_columns(&self) -> &'static [StatColumn] {
        &MICROCANONICAL_STATS
    }

    fn run<L: LogDensity + ?Sized>(&self, chains: ChainRunner<'_, L>) -> Result<(), SamplerError> {
        self.check_density(chains.density())?;
        if chains.batched() {
            chains.lockstep(self.init()?)
        } else {
            chains.threaded(|| self.init())
        }
    }
}

/// The SMILE kernel: scratch buffers for a batch of chains.
#[derive(Clone, Debug, Default)]
pub struct Smile {
    batch_size: usize,
    refresh: bool,
    reuse_previous_gradient: bool,
    max_energy_error: f64,
    paths: Vec<IsokineticPath>,
    /// Each chain's rows for this transition, `[C, B]`.
    rows: Vec<usize>,
    /// The minibatch log density at each chain's start.
    start_values: Vec<f64>,
    /// Gathered positions, values, gradients and rows of the chains evaluated together.
    positions: Vec<f64>,
    values: Vec<f64>,
    gradients: Vec<f64>,
    call_rows: Vec<usize>,
    pending: Vec<usize>,
    noise: Vec<f64>,
}

impl Kernel for Smile {
    fn uses_leapfrog(&self) -> bool {
        false
    }

    fn step<L: LogDensity + ?Sized, R: Rng + Send + ?Sized>(
        &mut self,
        density: &L,
        rng: &mut R,
        state: KernelState,
        params: StepParams<'_>,
    ) -> Result<(KernelState, DrawStats), LogDensityError> {
        step_as_batch_of_one(self, density, rng, state, params)
    }
}

impl Smile {
    /// Evaluates the chains in `self.pending` on their rows, in one call.
    fn evaluate_pending(
        &mut self,
        minibatch: &dyn MinibatchDensity,
        with_gradient: bool,
        dim: usize,
    ) -> Result<bool, LogDensityError> {
        let b = self.batch_size;
        let k = self.pending.len();
        self.positions.clear();
        self.call_rows.clear();
        for &i in &self.pending {
            self.positions.extend_from_slice(&self.paths[i].position);
            self.call_rows
                .extend_from_slice(&self.rows[i * b..(i + 1) * b]);
        }
        self.values.resize(k, 0.0);
        self.gradients.resize(k * dim, 0.0);
        let gradients = with_gradient.then_some(&mut self.gradients[..k * dim]);
        Ok(recover(minibatch.minibatch_log_density(
            &self.call_rows,
            &self.positions,
            &mut self.values[..k],
            gradients,
        ))?
        .is_some())
    }
}

impl BatchKernel for Smile {
    /// Random numbers per chain, in order: `d` normals for the initial direction (first
    /// transition only), the chain's `B` rows, then `d` normals for the refresh (with
    /// `refresh`) or for a new direction after a refused step.
    fn step_batch<L: LogDensity + ?Sized, R: Rng + Send + ?Sized>(
        &mut self,
        density: &L,
        chains: &mut [BatchChain<'_, R>],
        stats: &mut Vec<DrawStats>,
    ) -> Result<(), LogDensityError> {
        let minibatch = density.minibatch().ok_or_else(|| {
            LogDensityError::fatal("SMILE needs a density with minibatch evaluation")
        })?;
        let dim = density.dim();
        let (n, b, c) = (minibatch.num_rows(), self.batch_size, chains.len());
        if b == 0 || b > n {
            return Err(LogDensityError::fatal(format!(
                "SMILE batch of {b} rows from {n}"
            )));
        }
        self.paths.resize_with(c, IsokineticPath::default);
        self.rows.clear();
        for (path, chain) in self.paths.iter_mut().zip(chains.iter_mut()) {
            let state = &mut *chain.state;
            let velocity = match state.momentum.take() {
                Some(u) if u.len() == dim => u,
                _ => random_direction(&mut *chain.rng, dim),
            };
            let mut rows = rand::seq::index::sample(&mut *chain.rng, n, b).into_vec();
            // The set is what is random; ascending rows read the data in memory order.
            rows.sort_unstable();
            self.rows.extend_from_slice(&rows);
            path.start(&state.position, &velocity, &state.gradient, 0.0, 1);
            state.momentum = Some(velocity);
        }
        // The start's log density on this step's rows, and its gradient there unless the step
        // reuses the one the previous step ended with.
        self.pending.clear();
        self.pending.extend(0..c);
        let fresh = !self.reuse_previous_gradient;
        let evaluated = self.evaluate_pending(minibatch, fresh, dim)?;
        self.start_values.clear();
        self.start_values.extend(
            self.values[..c]
                .iter()
                .map(|&v| if evaluated { v } else { f64::NAN }),
        );
        for (i, (path, &value)) in self.paths.iter_mut().zip(&self.start_values).enumerate() {
            path.log_density = value;
            if fresh && evaluated {
                path.gradient
                    .copy_from_slice(&self.gradients[i * dim..(i + 1) * dim]);
            }
        }
        // The McLachlan step: the chains that need a gradient are evaluated together.
        self.pending.clear();
        for (i, (path, chain)) in self.paths.iter_mut().zip(chains.iter()).enumerate() {
            let (step_size, sqrt_cov) = chain.params.path_parameters();
            if path.advance(step_size, sqrt_cov) {
                self.pending.push(i);
            }
        }
        while !self.pending.is_empty() {
            let ok = self.evaluate_pending(minibatch, true, dim)?;
            for (row, &i) in self.pending.iter().enumerate() {
                if ok {
                    let gradient = &self.gradients[row * dim..(row + 1) * dim];
                    self.paths[i].receive(self.values[row], gradient);
                } else {
                    self.paths[i].receive_failure();
                }
            }
            let paths = &mut self.paths;
            self.pending.retain(|&i| {
                let (step_size, sqrt_cov) = chains[i].params.path_parameters();
                paths[i].advance(step_size, sqrt_cov)
            });
        }
        stats.clear();
        self.noise.resize(dim, 0.0);
        for ((path, chain), &start) in self
            .paths
            .iter_mut()
            .zip(chains.iter_mut())
            .zip(&self.start_values)
        {
            let epsilon = chain.params.step_size;
            let length = chain
                .params
                .trajectory_length
                .unwrap_or_else(|| (dim as f64).sqrt());
            let state = &mut *chain.state;
            let energy_change = path.energy_change(start);
            let failed = path.failed
                || !start.is_finite()
                || !energy_change.is_finite()
                || energy_change.abs() > self.max_energy_error;
            let mut velocity = state.momentum.take().unwrap_or_default();
            if failed {
                // The chain stays; a new direction makes the next try differ beyond its batch.
                velocity = random_direction(&mut *chain.rng, dim);
            } else {
                std::mem::swap(&mut state.position, &mut path.position);
                std::mem::swap(&mut state.gradient, &mut path.gradient);
                std::mem::swap(&mut velocity, &mut path.velocity);
                state.log_density = path.log_density;
                if self.refresh {
                    for z in self.noise.iter_mut() {
                        *z = StandardNormal.sample(&mut *chain.rng);
                    }
                    refresh_velocity(&mut velocity, &self.noise, epsilon, length);
                }
            }
            state.momentum = Some(velocity);
            let energy_error = if failed { 0.0 } else { energy_change };
            stats.push(DrawStats {
                log_density: state.log_density,
                accept_stat: if failed { 0.0 } else { 1.0 },
                step_size: epsilon,
                tree_depth: 0,
                n_leapfrog: path.evaluations as u32,
                divergent: failed,
                energy: -state.log_density,
                energy_error,
                kernel: KernelStats::new(&[energy_error, length]),
            });
        }
        Ok(())
    }
}

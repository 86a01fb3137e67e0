//! Metropolis-adjusted microcanonical sampler (MAMS; Robnik, Cohn-Gordon & Seljak 2025): the
//! isokinetic McLachlan dynamics of MCLMC with a Metropolis test, so its draws are exact.
//!
//! A transition draws a fresh uniform velocity, integrates `n` steps with `n` random around
//! `L/ε` (uniform on `1..=⌈2L/ε⌉`, which breaks the periodicities of a fixed length, like HMC's
//! jitter), and accepts the end point with probability `min(1, e^{−ΔE})`, `ΔE` the energy change
//! (kinetic change minus the gain in `log p`). The velocity is refreshed in full every transition,
//! so no flip is needed on rejection. Non-finite values or `ΔE` above `max_energy_error` end the
//! trajectory as a divergence (rejected).

use bnn_config_derive::Config;
use rand::Rng;

use crate::adaptation::mams_tuner::MamsTuner;
use crate::adaptation::stan_windows::{WarmupConfig, WarmupState};
use crate::adaptation::{TunedParams, Tuner};
use crate::draw_stats::DrawStats;
use crate::draw_stats::{KernelStats, StatColumn};
use crate::dynamics::isokinetic_path::{IsokineticPath, PathStepper};
use crate::dynamics::{map_pairs, Lockstep};
use crate::error::SamplerError;
use crate::kernels::mclmc::random_direction;
use crate::kernels::mclmc::MICROCANONICAL_STATS;
use crate::kernels::{
    step_as_batch_of_one, BatchChain, BatchKernel, Kernel, KernelState, StepParams,
};
use crate::log_density::{LogDensity, LogDensityError};
use crate::sampler_settings::{ChainRunner, SamplerSettings};

/// Configuration of MAMS and of its warmup.
#[derive(Config, Debug)]
pub struct MamsConfig {
    /// Acceptance rate the warmup's dual averaging aims for. Ours: 0.9, away from the sharp
    /// drop of unit-speed trajectories on BNN posteriors (BlackJAX leaves it to the caller).
    #[config(default = 0.9)]
    pub target_accept: f64,
    /// Shares of the warmup in its four phases (ε; ε and variances; ε under the new
    /// preconditioner; L from the ESS).
    #[config(default = "vec![0.3, 0.2, 0.3, 0.2]")]
    pub tune_fractions: Vec<f64>,
    /// Precondition with the warmup's variances (BlackJAX's default); `false`: identity.
    #[config(default = true)]
    pub diagonal_preconditioning: bool,
    /// Phase 4 sets `L ← factor · L · mean(transitions / ESS)` (BlackJAX's `Lfactor`).
    #[config(default = 0.4)]
    pub trajectory_length_factor: f64,
    /// The warmup ends with `L ≥ this · ε` (BlackJAX's `target_num_integration_steps`, 2 since
    /// their PR #939): the ESS-based L of phase 4 can fall below ε, and then every proposal is a
    /// single step, MALA rather than MAMS, at about half the ESS per gradient. 0: no floor.
    #[config(default = 2.0)]
    pub min_steps_per_length: f64,
    /// At most this many coordinates (evenly spaced) enter phase 4's ESS estimate.
    #[config(default = 2000)]
    pub max_ess_coordinates: usize,
    /// Upper bound on integration steps per transition.
    #[config(default = 1024)]
    pub max_num_steps: usize,
    /// Energy error above which a trajectory is a divergence.
    #[config(default = 1000.0)]
    pub max_energy_error: f64,
}

impl MamsConfig {
    pub(crate) fn validate(&self) -> Result<(), SamplerError> {
        let invalid = |message: String| Err(SamplerError::InvalidConfig(message));
        if !(self.target_accept > 0.0 && self.target_accept < 1.0) {
            return invalid(format!(
                "MAMS target_accept must lie in (0, 1), got {}",
                self.target_accept
            ));
        }
        let sum: f64 = self.tune_fractions.iter().sum();
        if self.tune_fractions.len() != 4
            || self.tune_fractions.iter().any(|f| !(0.0..=1.0).contains(f))
            || (sum - 1.0).abs() > 1e-9
        {
            return invalid(format!(
                "MAMS tune_fractions must be four shares in [0, 1] summing to 1, got {:?}",
                self.tune_fractions
            ));
        }
        if !(self.trajectory_length_factor > 0.0 && self.trajectory_length_factor.is_finite()) {
            return invalid(format!(
                "MAMS trajectory_length_factor must be positive, got {}",
                self.trajectory_length_factor
            ));
        }
        if !(self.min_steps_per_length >= 0.0 && self.min_steps_per_length.is_finite()) {
            return invalid(format!(
                "MAMS min_steps_per_length must be non-negative and finite, got {}",
                self.min_steps_per_length
            ));
        }
        if self.max_num_steps == 0
            || self.max_ess_coordinates == 0
            || !(self.max_energy_error > 0.0)
        {
            return invalid(
                "MAMS max_num_steps, max_ess_coordinates and max_energy_error must be positive"
                    .into(),
            );
        }
        Ok(())
    }

    /// The step size and decoherence length a chain starts from in dimension `dim` (BlackJAX's:
    /// `L = √d`, `ε = 0.2 √d`, five steps per trajectory).
    pub fn start_parameters(dim: usize) -> (f64, f64) {
        let root = (dim as f64).sqrt();
        (0.2 * root, root)
    }

    pub fn init(&self) -> Result<Mams, SamplerError> {
        self.validate()?;
        Ok(Mams {
            max_num_steps: self.max_num_steps,
            max_energy_error: self.max_energy_error,
            shared_steps: false,
            paths: Vec::new(),
            lockstep: Lockstep::default(),
        })
    }
}

impl SamplerSettings for MamsConfig {
    const NAME: &'static str = "mams";

    fn validate(&self) -> Result<(), SamplerError> {
        MamsConfig::validate(self)
    }

    fn target_accept(&self) -> f64 {
        self.target_accept
    }

    fn uses_leapfrog(&self) -> bool {
        false
    }

    fn default_step_size(&self, dim: usize) -> f64 {
        Self::start_parameters(dim).0
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
        params.trajectory_length = Some(Self::start_parameters(dim).1);
        if warmup.adapt_step_size {
            Tuner::Mams(MamsTuner::new(self, num_warmup, dim, params.step_size))
        } else {
            Tuner::StanWindows(WarmupState::new(
                warmup,
                num_warmup,
                dim,
                self.target_accept,
                params.step_size,
            ))
        }
    }

    fn stat_columns(&self) -> &'static [StatColumn] {
        &MICROCANONICAL_STATS
    }

    fn run<L: LogDensity + ?Sized>(&self, chains: ChainRunner<'_, L>) -> Result<(), SamplerError> {
        if chains.batched() {
            chains.lockstep(self.init()?)
        } else {
            chains.threaded(|| self.init())
        }
    }
}

/// The MAMS kernel: scratch buffers for a batch of chains.
#[derive(Clone, Debug)]
pub struct Mams {
    max_num_steps: usize,
    max_energy_error: f64,
    /// Every chain takes exactly `L / ε` steps (an ensemble that draws the number for all its
    /// chains, LAPS) instead of a number drawn per chain.
    shared_steps: bool,
    paths: Vec<IsokineticPath>,
    lockstep: Lockstep,
}

impl Mams {
    /// MAMS whose chains all take `round(L / ε)` steps (`L` and `ε` from `StepParams`): the
    /// ensemble draws the number once per iteration, so the chains stay in lockstep.
    pub(crate) fn with_shared_steps(max_num_steps: usize, max_energy_error: f64) -> Self {
        Mams {
            max_num_steps,
            max_energy_error,
            shared_steps: true,
            paths: Vec::new(),
            lockstep: Lockstep::default(),
        }
    }
}

impl Kernel for Mams {
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

impl BatchKernel for Mams {
    /// Random numbers per chain, in order: one uniform for the number of steps (not with shared
    /// steps), `d` normals for the velocity, one uniform for the Metropolis test.
    fn step_batch<L: LogDensity + ?Sized, R: Rng + Send + ?Sized>(
        &mut self,
        density: &L,
        chains: &mut [BatchChain<'_, R>],
        stats: &mut Vec<DrawStats>,
    ) -> Result<(), LogDensityError> {
        let dim = density.dim();
        self.paths
            .resize_with(chains.len(), IsokineticPath::default);
        let (shared_steps, max_num_steps, max_energy_error) =
            (self.shared_steps, self.max_num_steps, self.max_energy_error);
        map_pairs(
            dim,
            &mut self.paths,
            chains,
            &mut Vec::new(),
            |path, chain| {
                let mean_steps = chain
                    .params
                    .trajectory_length
                    .unwrap_or((dim as f64).sqrt())
                    / chain.params.step_size;
                let steps = if shared_steps {
                    (mean_steps.round() as usize).clamp(1, max_num_steps)
                } else {
                    let upper = (2.0 * mean_steps).ceil().clamp(1.0, max_num_steps as f64);
                    let u: f64 = chain.rng.random();
                    ((u * upper).ceil() as usize).clamp(1, max_num_steps)
                };
                let velocity = random_direction(&mut *chain.rng, dim);
                let state = &*chain.state;
                path.start(
                    &state.position,
                    &velocity,
                    &state.gradient,
                    state.log_density,
                    steps,
                );
            },
        );
        PathStepper::walk_all(
            &mut self.lockstep,
            density,
            &mut self.paths,
            chains.iter().map(|chain| chain.params.path_parameters()),
        )?;
        map_pairs(dim, &mut self.paths, chains, stats, |path, chain| {
            let state = &mut *chain.state;
            let energy_change = path.energy_change(state.log_density);
            let divergent =
                path.failed || !energy_change.is_finite() || energy_change > max_energy_error;
            let accept_prob = if divergent {
                0.0
            } else {
                (-energy_change).exp().min(1.0)
            };
            let u: f64 = chain.rng.random();
            if !divergent && u < accept_prob {
                std::mem::swap(&mut state.position, &mut path.position);
                std::mem::swap(&mut state.gradient, &mut path.gradient);
                state.log_density = path.log_density;
            }
            let energy_error = if divergent { 0.0 } else { energy_change };
            DrawStats {
                log_density: state.log_density,
                accept_stat: accept_prob,
                step_size: chain.params.step_size,
                tree_depth: 0,
                n_leapfrog: path.evaluations as u32,
                divergent,
                energy: -state.log_density,
                energy_error,
                kernel: KernelStats::new(&[
                    energy_error,
                    chain.params.trajectory_length.unwrap_or(0.0),
                ]),
            }
        });
        Ok(())
    }
}

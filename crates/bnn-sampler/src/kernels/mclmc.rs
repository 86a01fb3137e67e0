//! Microcanonical Langevin Monte Carlo (MCLMC; Robnik, De Luca, Silverstein & Seljak 2023), the
//! kernel of MILE (Sommer et al. 2025): unit-speed dynamics, partial velocity refresh, no
//! Metropolis test.
//!
//! One transition is one step of the isokinetic McLachlan integrator (two gradients) followed by
//! a partial refresh of the velocity with decoherence length `L`. The chain is unadjusted: its
//! bias is controlled through the step size, which the warmup (`adaptation::mclmc_tuner`) sets so
//! that the variance of the energy change per dimension meets a target. A step that reaches a
//! non-finite log density or gradient is rejected (the chain stays put, its velocity is
//! refreshed so the next try differs) and flagged divergent; the tuner then caps the step size
//! at 0.8 of the failed one, as BlackJAX's MCLMC does.

use bnn_config_derive::Config;
use rand::Rng;
use rand_distr::{Distribution, StandardNormal};

use crate::adaptation::mclmc_tuner::MclmcTuner;
use crate::adaptation::stan_windows::{WarmupConfig, WarmupState};
use crate::adaptation::{TunedParams, Tuner};
use crate::draw_stats::DrawStats;
use crate::draw_stats::{KernelStats, StatColumn};
use crate::dynamics::isokinetic::{normalize, refresh_velocity};
use crate::dynamics::isokinetic_path::{IsokineticPath, PathStepper};
use crate::dynamics::map_pairs;
use crate::dynamics::Lockstep;
use crate::error::SamplerError;
use crate::kernels::{
    step_as_batch_of_one, BatchChain, BatchKernel, Kernel, KernelState, StepParams,
};
use crate::log_density::{LogDensity, LogDensityError};
use crate::sampler_settings::{Budget, ChainRunner, SamplerSettings};

/// Configuration of MCLMC and of its warmup (the tuner of Robnik et al. as used by MILE).
#[derive(Config, Debug)]
pub struct MclmcConfig {
    /// Step size the warmup starts from (MILE's code: 0.005; the tuner moves it within a few
    /// steps).
    #[config(default = 5e-3)]
    pub initial_step_size: f64,
    /// Decoherence length `L` the warmup starts from; `None`: `max(√d, 15)`.
    pub initial_trajectory_length: Option<f64>,
    /// Target variance of the energy change per dimension at the start of the warmup; it falls
    /// linearly to `energy_variance_end` over phases 1 and 2. Defaults: MILE's research code,
    /// 5e-4 → 1e-4 (BlackJAX: a constant 5e-4). The `bde` package's 0.5 → 0.1 is a thousand
    /// times looser: on yacht its chains sat 265 nats of log posterior below NUTS's (biased).
    #[config(default = 5e-4)]
    pub energy_variance_start: f64,
    #[config(default = 1e-4)]
    pub energy_variance_end: f64,
    /// Share of the warmup in phase 1 (step size only).
    #[config(default = 0.8)]
    pub phase1_fraction: f64,
    /// Share of the warmup in phase 2 (step size, and the draws' variances that set `L`); the
    /// rest is phase 3 (fixed `L` and `ε`, `L` reset from the ESS at its end).
    #[config(default = 0.1)]
    pub phase2_fraction: f64,
    /// Effective number of steps the step-size averages remember (decay `(n − 1)/(n + 1)`).
    #[config(default = 100.0)]
    pub effective_samples: f64,
    /// How far an energy error may be from its target before its weight in the step-size average
    /// fades (BlackJAX's `trust_in_estimate`).
    #[config(default = 1.5)]
    pub trust_in_estimate: f64,
    /// Phase 3 sets `L = factor · ε · mean(steps / ESS)` (BlackJAX's `Lfactor`).
    #[config(default = 0.4)]
    pub trajectory_length_factor: f64,
    /// At most this many coordinates (evenly spaced) enter phase 3's ESS estimate.
    #[config(default = 2000)]
    pub max_ess_coordinates: usize,
    /// At the end of phase 2, precondition the dynamics with the positions' standard deviations
    /// (BlackJAX's `diagonal_preconditioning`; MILE runs without): `L` becomes `√d` in the
    /// whitened coordinates and the step size is tuned again for a third of phase 2's length,
    /// taken from phase 3. Posteriors whose coordinates differ in scale then move along the wide
    /// ones at the step size the narrow ones allow.
    #[config(default = false)]
    pub diagonal_preconditioning: bool,
}

impl MclmcConfig {
    pub(crate) fn validate(&self) -> Result<(), SamplerError> {
        let positive = [
            ("initial_step_size", self.initial_step_size),
            ("energy_variance_start", self.energy_variance_start),
            ("energy_variance_end", self.energy_variance_end),
            ("trust_in_estimate", self.trust_in_estimate),
            ("trajectory_length_factor", self.trajectory_length_factor),
            (
                "initial_trajectory_length",
                self.initial_trajectory_length.unwrap_or(1.0),
            ),
        ];
        for (name, value) in positive {
            if !(value > 0.0 && value.is_finite()) {
                return Err(SamplerError::InvalidConfig(format!(
                    "MCLMC {name} must be positive and finite, got {value}"
                )));
            }
        }
        let (f1, f2) = (self.phase1_fraction, self.phase2_fraction);
        if !(0.0..=1.0).contains(&f1) || !(0.0..=1.0).contains(&f2) || f1 + f2 > 1.0 + 1e-12 {
            return Err(SamplerError::InvalidConfig(format!(
                "MCLMC phase fractions must lie in [0, 1] and sum to at most 1, got {f1} and {f2}"
            )));
        }
        if !(self.effective_samples > 1.0) || self.max_ess_coordinates == 0 {
            return Err(SamplerError::InvalidConfig(format!(
                "MCLMC effective_samples must exceed 1 and max_ess_coordinates be positive, got {} and {}",
                self.effective_samples, self.max_ess_coordinates
            )));
        }
        Ok(())
    }

    /// The decoherence length a chain starts from in dimension `dim`.
    pub fn start_trajectory_length(&self, dim: usize) -> f64 {
        self.initial_trajectory_length
            .unwrap_or_else(|| (dim as f64).sqrt().max(15.0))
    }

    /// Builds the kernel; buffers are sized on first use.
    pub fn init(&self) -> Result<Mclmc, SamplerError> {
        self.validate()?;
        Ok(Mclmc::default())
    }
}

/// The columns MCLMC and MAMS add to the draws files.
pub(crate) const MICROCANONICAL_STATS: [StatColumn; 2] = [
    StatColumn::real(
        "energy_change__",
        "the transition's energy change (what MCLMC's tuner controls, MAMS's test uses)",
    ),
    StatColumn::real(
        "trajectory_length__",
        "the momentum decoherence length L of the transition",
    ),
];

impl SamplerSettings for MclmcConfig {
    const NAME: &'static str = "mclmc";

    fn validate(&self) -> Result<(), SamplerError> {
        MclmcConfig::validate(self)
    }

    /// MCLMC has no acceptance test: its tuner aims at an energy-error variance, and a
    /// fixed-step run's burn-in ignores this.
    fn target_accept(&self) -> f64 {
        0.5
    }

    fn uses_leapfrog(&self) -> bool {
        false
    }

    fn default_step_size(&self, _dim: usize) -> f64 {
        self.initial_step_size
    }

    /// MILE's budget (Sommer et al. 2025): 50,000 tuning and 10,000 sampling steps, every 10th
    /// kept.
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
        params.trajectory_length = Some(self.start_trajectory_length(dim));
        if warmup.adapt_step_size {
            Tuner::Mclmc(MclmcTuner::new(self, num_warmup, dim))
        } else {
            // Fixed (ε, L): the Stan tuner with nothing to adapt counts the burn-in.
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
        if chains.batched() {
            chains.lockstep(self.init()?)
        } else {
            chains.threaded(|| self.init())
        }
    }
}

/// The MCLMC kernel: scratch buffers for a batch of chains.
#[derive(Clone, Debug, Default)]
pub struct Mclmc {
    paths: Vec<IsokineticPath>,
    lockstep: Lockstep,
    /// A step whose energy error exceeds this fails like a non-finite one (the chain stays put):
    /// a burn-in's guard against a first step that heats the chain by thousands of nats (LAPS);
    /// `None` (MCLMC's own runs) takes every finite step.
    max_energy_error: Option<f64>,
}

impl Mclmc {
    /// MCLMC that refuses steps whose energy error exceeds `max_energy_error`.
    pub(crate) fn with_max_energy_error(max_energy_error: f64) -> Self {
        Mclmc {
            max_energy_error: Some(max_energy_error),
            ..Mclmc::default()
        }
    }
}

impl Kernel for Mclmc {
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

impl BatchKernel for Mclmc {
    /// Random numbers per chain, in order: `d` normals for the initial direction (first
    /// transition only), then `d` normals for the refresh after the step. The metric of
    /// `StepParams` preconditions the dynamics (identity unless a chain starts with another).
    fn step_batch<L: LogDensity + ?Sized, R: Rng + Send + ?Sized>(
        &mut self,
        density: &L,
        chains: &mut [BatchChain<'_, R>],
        stats: &mut Vec<DrawStats>,
    ) -> Result<(), LogDensityError> {
        let dim = density.dim();
        self.paths
            .resize_with(chains.len(), IsokineticPath::default);
        map_pairs(
            dim,
            &mut self.paths,
            chains,
            &mut Vec::new(),
            |path, chain| {
                let state = &mut *chain.state;
                let velocity = match state.momentum.take() {
                    Some(u) if u.len() == dim => u,
                    _ => random_direction(&mut *chain.rng, dim),
                };
                path.start(
                    &state.position,
                    &velocity,
                    &state.gradient,
                    state.log_density,
                    1,
                );
                state.momentum = Some(velocity);
            },
        );
        PathStepper::walk_all(
            &mut self.lockstep,
            density,
            &mut self.paths,
            chains.iter().map(|chain| chain.params.path_parameters()),
        )?;
        let max_energy_error = self.max_energy_error;
        map_pairs(dim, &mut self.paths, chains, stats, |path, chain| {
            let epsilon = chain.params.step_size;
            let length = chain
                .params
                .trajectory_length
                .unwrap_or_else(|| (dim as f64).sqrt());
            let state = &mut *chain.state;
            let energy_change = path.energy_change(state.log_density);
            let failed = path.failed
                || !energy_change.is_finite()
                || max_energy_error.is_some_and(|max| energy_change.abs() > max);
            // A failed step leaves position and velocity as they were (the velocity is still
            // refreshed below, so the next try differs).
            let mut velocity = state.momentum.take().unwrap_or_default();
            if !failed {
                std::mem::swap(&mut state.position, &mut path.position);
                std::mem::swap(&mut state.gradient, &mut path.gradient);
                std::mem::swap(&mut velocity, &mut path.velocity);
                state.log_density = path.log_density;
            }
            // The path's spare vector (its old or rejected velocity) holds the noise.
            let noise = &mut path.velocity;
            noise.resize(dim, 0.0);
            for z in noise.iter_mut() {
                *z = StandardNormal.sample(&mut *chain.rng);
            }
            refresh_velocity(&mut velocity, noise, epsilon, length);
            state.momentum = Some(velocity);
            let energy_error = if failed { 0.0 } else { energy_change };
            DrawStats {
                log_density: state.log_density,
                accept_stat: if failed { 0.0 } else { 1.0 },
                step_size: epsilon,
                tree_depth: 0,
                n_leapfrog: path.evaluations as u32,
                divergent: failed,
                energy: -state.log_density,
                energy_error,
                kernel: KernelStats::new(&[energy_error, length]),
            }
        });
        Ok(())
    }
}

/// A uniformly random unit vector: `d` standard normals, normalized.
pub(crate) fn random_direction<R: Rng + ?Sized>(rng: &mut R, dim: usize) -> Vec<f64> {
    let mut direction: Vec<f64> = (0..dim).map(|_| StandardNormal.sample(&mut *rng)).collect();
    normalize(&mut direction);
    direction
}

//! Manifold stochastic dynamics (Zlochin & Baram): one step of Riemannian Hamiltonian dynamics
//! per transition under a position-dependent metric `G(θ)`, with Horowitz's partial momentum
//! refresh (`p ← cos α · p + sin α · n`, `n ~ N(0, G(θ))`) and a Metropolis test on
//! `H(θ, p) = −log p(θ) + ½ log det G(θ) + ½ pᵀ G(θ)⁻¹ p` (the `½ log det G` term makes the
//! θ-marginal the target; without it the chain samples `p(θ) · det G(θ)^{-½}`).
//!
//! The kernel is composed of parts that live with their kind: the density's metric
//! ([`RiemannianDensity`], beside `LogDensity`), the metric at a point with its refresh and
//! Hamiltonian ([`MetricAt`], in `metric`), and the step, the generalized leapfrog (or Zlochin &
//! Baram's frozen-metric leapfrog) with its Anderson-accelerated fixed-point solver (in
//! `dynamics`). A step whose iterations do not converge, or that reaches a non-finite value or a
//! recoverable evaluation failure, is rejected and counted divergent; a fatal failure ends the
//! transition with the error. A rejection flips the momentum (so the chain's direction
//! persists only through accepted steps, as in Horowitz's generalized HMC).
//!
//! [`try_msd_transition`] is the transition on its own (`(state, params) -> (state, info)`), for
//! densities that supply their metric ([`RiemannianDensity`]), and [`msd_transition`] the same for
//! a density that never fails fatally; [`Msd`] is the same transition as
//! a [`Kernel`] of the sampler (warmup, draws files, checkpoints), reaching the metric through
//! [`LogDensity::riemannian`].

use bnn_config_derive::Config;
use rand::Rng;

use crate::adaptation::stan_windows::{WarmupConfig, WarmupState};
use crate::adaptation::{TunedParams, Tuner};
use crate::draw_stats::{DrawStats, KernelStats, StatColumn};
use crate::dynamics::fixed_point::FixedPointSolver;
use crate::dynamics::generalized_leapfrog::{
    FrozenMetricLeapfrog, GeneralizedLeapfrog, RiemannianPoint,
};
use crate::dynamics::StepFailure;
use crate::error::SamplerError;
use crate::kernels::{Kernel, KernelState, StepParams};
use crate::log_density::{recover, LogDensity, LogDensityError};
use crate::metric::MetricAt;
use crate::riemannian_density::RiemannianDensity;
use crate::sampler_settings::{ChainRunner, SamplerSettings};

/// Step parameters of one MSD transition.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MsdParams {
    pub step_size: f64,
    /// `cos α` of the momentum refresh: 0 draws a fresh momentum, values near 1 keep direction.
    pub persistence: f64,
    /// Fixed-point iterations allowed per implicit equation before the step counts as divergent.
    pub max_fixed_point_iterations: usize,
    /// Convergence: the largest change of an iterate, relative to `1 + |value|`.
    pub fixed_point_tolerance: f64,
    /// Zlochin & Baram's cheap variant: the metric frozen at the step's start, so the step is an
    /// explicit leapfrog with mass matrix `G(θ)` and the Metropolis test sees
    /// `−log p + ½ pᵀG(θ)⁻¹p`. **Approximate**: the refresh at the new point uses `G(θ')`, which
    /// this test does not account for, so the chain is biased (measured on the 2-D toy in the
    /// tests).
    pub frozen_metric: bool,
}

impl Default for MsdParams {
    fn default() -> Self {
        Self {
            step_size: 0.1,
            persistence: 0.0,
            max_fixed_point_iterations: 100,
            fixed_point_tolerance: 1e-10,
            frozen_metric: false,
        }
    }
}

impl MsdParams {
    /// The exact step these parameters configure (whatever `frozen_metric` says).
    pub fn generalized_leapfrog(&self) -> GeneralizedLeapfrog {
        GeneralizedLeapfrog {
            solver: FixedPointSolver {
                max_iterations: self.max_fixed_point_iterations,
                tolerance: self.fixed_point_tolerance,
            },
        }
    }
}

/// A chain's state between transitions: position, the momentum carried over, and `log p`,
/// `∇ log p` there.
pub type MsdState = RiemannianPoint;

/// What one transition did.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MsdInfo {
    pub accepted: bool,
    /// `min(1, e^{−ΔH})` (0 for a divergent step).
    pub accept_probability: f64,
    /// `H(end) − H(start)` (NaN for a divergent step).
    pub energy_change: f64,
    /// Fixed-point iterations of the step's two implicit equations together.
    pub fixed_point_iterations: usize,
    pub divergent: bool,
    /// `H` at the state the transition ends in (after the refresh when it stays put; NaN when
    /// the metric could not be evaluated there).
    pub energy: f64,
}

/// One MSD transition: refresh, one generalized leapfrog step, Metropolis test.
/// Random numbers: the metric's `normals()` standard normals for the refresh (`d` for a dense
/// metric), then one uniform for the test. A recoverable evaluation failure is a divergence; a
/// fatal one is returned.
pub fn try_msd_transition<D: RiemannianDensity + ?Sized, R: Rng + ?Sized>(
    density: &D,
    rng: &mut R,
    state: MsdState,
    params: &MsdParams,
) -> Result<(MsdState, MsdInfo), LogDensityError> {
    msd_transition_reusing(density, rng, state, params, &mut None)
}

/// [`try_msd_transition`] for a density that never fails fatally.
///
/// # Panics
///
/// When the density fails with a fatal error (as `Vec::reserve` panics where `try_reserve`
/// returns the error).
pub fn msd_transition<D: RiemannianDensity + ?Sized, R: Rng + ?Sized>(
    density: &D,
    rng: &mut R,
    state: MsdState,
    params: &MsdParams,
) -> (MsdState, MsdInfo) {
    try_msd_transition(density, rng, state, params)
        .unwrap_or_else(|error| panic!("the MSD transition's density failed: {error}"))
}

/// The metric (and, once computed, its log-determinant gradient) at the position a chain sits
/// at after a transition: the next transition starts there, so it need not evaluate them again.
/// Reuse changes no number; a cache for another position is ignored.
pub struct MetricCache {
    position: Vec<f64>,
    point: MetricAt,
    log_det_gradient: Option<Vec<f64>>,
}

/// [`msd_transition`], taking the start's metric from `cache` when it is for this position and
/// leaving the end's there.
pub fn msd_transition_reusing<D: RiemannianDensity + ?Sized, R: Rng + ?Sized>(
    density: &D,
    rng: &mut R,
    mut state: MsdState,
    params: &MsdParams,
    cache: &mut Option<MetricCache>,
) -> Result<(MsdState, MsdInfo), LogDensityError> {
    let divergent = |iterations, energy| MsdInfo {
        accepted: false,
        accept_probability: 0.0,
        energy_change: f64::NAN,
        fixed_point_iterations: iterations,
        divergent: true,
        energy,
    };
    let (start, start_log_det) = match cache.take() {
        Some(cached) if cached.position == state.position => {
            (cached.point, cached.log_det_gradient)
        }
        _ => match recover(density.metric_at(&state.position))? {
            Some(point) => (point, None),
            None => return Ok((state, divergent(0, f64::NAN))),
        },
    };
    start.refresh_momentum(&mut state.momentum, params.persistence, rng);
    let energy_start = start.hamiltonian(state.log_density, start.kinetic_energy(&state.momentum));
    let (step, start_log_det) = if params.frozen_metric {
        (
            FrozenMetricLeapfrog
                .step(density, &state, &start, params.step_size)
                .map(|end| (end, 0)),
            start_log_det,
        )
    } else {
        let log_det = match start_log_det {
            Some(log_det) => Ok(log_det),
            None => density.log_det_gradient(&start),
        };
        match log_det {
            Ok(log_det) => (
                params.generalized_leapfrog().step(
                    density,
                    &state,
                    &start,
                    &log_det,
                    params.step_size,
                ),
                Some(log_det),
            ),
            Err(error) => (Err(StepFailure::after(error, 0)), None),
        }
    };
    let keep_start = |cache: &mut Option<MetricCache>, position: &[f64]| {
        *cache = Some(MetricCache {
            position: position.to_vec(),
            point: start,
            log_det_gradient: start_log_det,
        });
    };
    match step {
        Ok((end, iterations)) => {
            let energy_change = end.energy - energy_start;
            let accept_probability = if energy_change.is_finite() {
                (-energy_change).exp().min(1.0)
            } else {
                0.0
            };
            let uniform: f64 = rng.random();
            let accepted = uniform < accept_probability;
            let energy = if accepted { end.energy } else { energy_start };
            if accepted {
                if let Some((point, log_det_gradient)) = end.metric {
                    *cache = Some(MetricCache {
                        position: end.point.position.clone(),
                        point,
                        log_det_gradient: Some(log_det_gradient),
                    });
                }
                state = end.point;
            } else {
                keep_start(cache, &state.position);
                state.momentum.iter_mut().for_each(|p| *p = -*p);
            }
            let divergent = !energy_change.is_finite();
            Ok((
                state,
                MsdInfo {
                    accepted,
                    accept_probability,
                    energy_change,
                    fixed_point_iterations: iterations,
                    divergent,
                    energy,
                },
            ))
        }
        Err(StepFailure::Divergent { iterations }) => {
            keep_start(cache, &state.position);
            state.momentum.iter_mut().for_each(|p| *p = -*p);
            Ok((state, divergent(iterations, energy_start)))
        }
        Err(StepFailure::Fatal(error)) => Err(error),
    }
}

/// Configuration of the MSD kernel and its warmup (`bnn sample --sampler msd`).
#[derive(Config, Debug)]
pub struct MsdConfig {
    /// `cos α` of the Horowitz refresh (0: a fresh momentum every transition). Zlochin & Baram
    /// use a small angle; the stored text of the paper lost its value.
    #[config(default = 0.95)]
    pub persistence: f64,
    /// Mean acceptance probability the warmup's dual averaging aims the step size at. A
    /// rejection reverses the momentum, so with persistence a high rate keeps the direction.
    #[config(default = 0.9)]
    pub target_accept: f64,
    /// Step size the warmup starts from. Under the metric, ε = 1 moves about one posterior sd
    /// where the posterior is near Gaussian, so the start is of the right order.
    #[config(default = 0.5)]
    pub initial_step_size: f64,
    /// Fixed-point iterations per implicit equation before the step counts as divergent.
    #[config(default = 100)]
    pub max_fixed_point_iterations: usize,
    /// Convergence tolerance of the fixed-point iterations (largest change relative to
    /// `1 + |value|`).
    #[config(default = 1e-9)]
    pub fixed_point_tolerance: f64,
    /// Zlochin & Baram's cheap variant (metric frozen within the step). **Approximate**: its
    /// chain is biased (see [`MsdParams::frozen_metric`]).
    #[config(default = false)]
    pub frozen_metric: bool,
}

impl MsdConfig {
    pub(crate) fn validate(&self) -> Result<(), SamplerError> {
        let invalid = |m: String| Err(SamplerError::InvalidConfig(m));
        if !(0.0..1.0).contains(&self.persistence) {
            return invalid(format!(
                "MSD persistence (cos α) must lie in [0, 1), got {}",
                self.persistence
            ));
        }
        if !(self.target_accept > 0.0 && self.target_accept < 1.0) {
            return invalid(format!(
                "MSD target_accept must lie in (0, 1), got {}",
                self.target_accept
            ));
        }
        if !(self.initial_step_size > 0.0 && self.initial_step_size.is_finite()) {
            return invalid(format!(
                "MSD initial_step_size must be positive and finite, got {}",
                self.initial_step_size
            ));
        }
        if self.max_fixed_point_iterations == 0
            || !(self.fixed_point_tolerance > 0.0 && self.fixed_point_tolerance.is_finite())
        {
            return invalid(format!(
                "MSD needs at least one fixed-point iteration and a positive tolerance, got {} and {}",
                self.max_fixed_point_iterations, self.fixed_point_tolerance
            ));
        }
        Ok(())
    }

    pub fn init(&self) -> Result<Msd, SamplerError> {
        self.validate()?;
        Ok(Msd {
            config: self.clone(),
            cache: None,
            potential_at: None,
        })
    }
}

/// The columns MSD adds to the draws files.
const MSD_STATS: [StatColumn; 2] = [
    StatColumn::real(
        "energy_change__",
        "the transition's energy change (its Metropolis test's ΔH)",
    ),
    StatColumn::count(
        "fixed_point_iterations__",
        "fixed-point iterations of the generalized leapfrog's two implicit equations",
    ),
];

impl SamplerSettings for MsdConfig {
    const NAME: &'static str = "msd";

    fn validate(&self) -> Result<(), SamplerError> {
        MsdConfig::validate(self)
    }

    fn target_accept(&self) -> f64 {
        self.target_accept
    }

    /// MSD's leapfrog moves under its own metric, not the diagonal one the search would use.
    fn uses_leapfrog(&self) -> bool {
        false
    }

    fn default_step_size(&self, _dim: usize) -> f64 {
        self.initial_step_size
    }

    /// MSD moves by its own metric: only the step size adapts.
    fn start_warmup(
        &self,
        warmup: &WarmupConfig,
        num_warmup: usize,
        dim: usize,
        params: &mut TunedParams,
    ) -> Tuner {
        let warmup = WarmupConfig {
            adapt_metric: false,
            ..warmup.clone()
        };
        Tuner::StanWindows(WarmupState::new(
            &warmup,
            num_warmup,
            dim,
            self.target_accept,
            params.step_size,
        ))
    }

    fn stat_columns(&self) -> &'static [StatColumn] {
        &MSD_STATS
    }

    fn run<L: LogDensity + ?Sized>(&self, chains: ChainRunner<'_, L>) -> Result<(), SamplerError> {
        if chains.density().riemannian().is_none() {
            return Err(SamplerError::InvalidConfig(
                "MSD needs a density with a position-dependent metric (LogDensity::riemannian); the built-in MLP posterior has one".into(),
            ));
        }
        chains.threaded(|| self.init())
    }
}

/// The MSD kernel over a [`LogDensity`] that provides its metric ([`LogDensity::riemannian`]).
///
/// The chain's `KernelState` carries the momentum between transitions and the f64 `log p` of
/// the metric's density with its gradient; a state without momentum (a new chain) draws a full
/// one. What the kernel keeps itself (the metric and `log p` where its chain sits) only saves
/// evaluations and changes no number, so it is not checkpointed.
pub struct Msd {
    config: MsdConfig,
    /// The metric where this worker's chain sits (chains run one after another on a worker;
    /// another chain's position misses it).
    cache: Option<MetricCache>,
    /// The f64 `log p` (the potential's negative) and its gradient at the position the last
    /// transition ended at.
    potential_at: Option<(Vec<f64>, f64, Vec<f64>)>,
}

impl Kernel for Msd {
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
        let stay = |state: KernelState, step_size: f64| {
            let stats = DrawStats {
                log_density: state.log_density,
                step_size,
                n_leapfrog: 1,
                divergent: true,
                energy: f64::NAN,
                energy_error: f64::NAN,
                kernel: KernelStats::new(&[f64::NAN, 0.0]),
                ..DrawStats::default()
            };
            Ok((state, stats))
        };
        let Some(riemannian) = density.riemannian() else {
            return stay(state, params.step_size);
        };
        let fresh = state.momentum.is_none();
        let dim = state.position.len();
        // The f64 log density is a function of the position: where the previous transition ended
        // it is known; anywhere else (a new or resumed chain, whose state holds the f32 value) it
        // is evaluated.
        let (log_density, gradient) = match self.potential_at.take() {
            Some((position, log_density, gradient)) if position == state.position => {
                (log_density, gradient)
            }
            _ => {
                let mut gradient = vec![0.0; dim];
                let Some(log_density) =
                    recover(riemannian.evaluate(&state.position, &mut gradient))?
                else {
                    return stay(state, params.step_size);
                };
                (log_density, gradient)
            }
        };
        let start = MsdState {
            momentum: state.momentum.clone().unwrap_or_else(|| vec![0.0; dim]),
            position: state.position.clone(),
            log_density,
            gradient,
        };
        let msd_params = MsdParams {
            step_size: params.step_size,
            persistence: if fresh { 0.0 } else { self.config.persistence },
            max_fixed_point_iterations: self.config.max_fixed_point_iterations,
            fixed_point_tolerance: self.config.fixed_point_tolerance,
            frozen_metric: self.config.frozen_metric,
        };
        let (end, info) =
            msd_transition_reusing(riemannian, rng, start, &msd_params, &mut self.cache)?;
        let stats = DrawStats {
            log_density: end.log_density,
            accept_stat: info.accept_probability,
            step_size: params.step_size,
            tree_depth: 0,
            n_leapfrog: 1,
            divergent: info.divergent,
            energy: info.energy,
            energy_error: info.energy_change,
            kernel: KernelStats::new(&[info.energy_change, info.fixed_point_iterations as f64]),
        };
        self.potential_at = Some((end.position.clone(), end.log_density, end.gradient.clone()));
        let state = KernelState {
            position: end.position,
            log_density: end.log_density,
            gradient: end.gradient,
            momentum: Some(end.momentum),
        };
        Ok((state, stats))
    }
}

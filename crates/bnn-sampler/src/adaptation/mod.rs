//! The tuner seam: tuned parameters passed to kernels explicitly, and the warmup that learns them.
//!
//! A chain's `TunedParams` (step size, metric, optional trajectory length) are all a transition
//! needs besides its state; `Tuner` is the serializable warmup that updates them after each
//! warmup transition. Stan's windowed warmup (`stan_windows`) is the first tuner; one that tunes
//! from other statistics (MCLMC's energy-variance tuner) is another variant with the same
//! `observe` signature.

pub mod autocorrelation_length;
pub mod dual_averaging;
pub mod ensemble_tuner;
pub mod gradient_noise;
pub mod mams_tuner;
pub mod mclmc_tuner;
pub mod stan_windows;
pub mod stationary_warmup;
pub mod step_size_search;
pub mod welford;
pub mod window_schedule;

use serde::{Deserialize, Serialize};

use crate::draw_stats::DrawStats;
use crate::kernels::StepParams;
use crate::metric::DiagonalMassMatrix;
use ensemble_tuner::EnsembleMember;
use gradient_noise::SmileTuner;
use mams_tuner::MamsTuner;
use mclmc_tuner::MclmcTuner;
use stan_windows::WarmupState;

/// What the warmup tunes, and every kernel reads through `StepParams`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TunedParams {
    /// Step size ε (random-walk Metropolis: the proposal scale multiplier).
    pub step_size: f64,
    /// The adapted constant metric (inverse mass matrix).
    pub metric: DiagonalMassMatrix,
    /// A tuned trajectory length, for kernels that use one (MCLMC's momentum decoherence
    /// length L); `None` for the others.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trajectory_length: Option<f64>,
}

impl TunedParams {
    pub fn new(step_size: f64, metric: DiagonalMassMatrix) -> Self {
        Self {
            step_size,
            metric,
            trajectory_length: None,
        }
    }

    /// The parameters of one transition.
    pub fn step_params(&self) -> StepParams<'_> {
        StepParams {
            step_size: self.step_size,
            metric: &self.metric,
            trajectory_length: self.trajectory_length,
        }
    }
}

/// The warmup of one chain: which tuner, and everything it has learned (checkpointed with the
/// chain, so a resumed warmup continues exactly).
///
/// Serialized untagged: a checkpoint holds the tuner's own state, as before tuners were a seam.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Tuner {
    /// Stan's windowed warmup: dual averaging of the step size, diagonal metric from windows.
    StanWindows(WarmupState),
    /// SMILE: MCLMC's tuner and a preconditioner from the minibatch gradients' noise (before
    /// `Mclmc`, so that an untagged checkpoint of either reads back as itself).
    Smile(Box<SmileTuner>),
    /// MCLMC's three-phase tuner of ε (energy-error variance) and L (variances, then ESS).
    Mclmc(MclmcTuner),
    /// MAMS: dual averaging of ε, preconditioner and L from variances, then L from the ESS.
    Mams(MamsTuner),
    /// LAPS: one chain's copy of the ensemble's shared tuning (the runner updates all chains
    /// together after each step, `ensemble_tuner::Ensemble`).
    Ensemble(Box<EnsembleMember>),
}

impl Tuner {
    /// Warmup transitions this tuner runs.
    pub fn num_warmup(&self) -> usize {
        match self {
            Tuner::StanWindows(state) => state.num_warmup(),
            Tuner::Mclmc(state) => state.num_warmup(),
            Tuner::Smile(state) => state.num_warmup(),
            Tuner::Mams(state) => state.num_warmup(),
            Tuner::Ensemble(state) => state.num_warmup(),
        }
    }

    /// Warmup transitions observed so far.
    pub fn iteration(&self) -> usize {
        match self {
            Tuner::StanWindows(state) => state.iteration(),
            Tuner::Mclmc(state) => state.iteration(),
            Tuner::Smile(state) => state.iteration(),
            Tuner::Mams(state) => state.iteration(),
            Tuner::Ensemble(state) => state.iteration(),
        }
    }

    pub fn is_finished(&self) -> bool {
        self.iteration() >= self.num_warmup()
    }

    /// Observes one warmup transition (its draw, the gradient there, and statistics) and updates
    /// `params` for the next one. `search(metric, ε)` re-chooses a step size for a new metric (the heuristic of
    /// Hoffman & Gelman 2014, Alg. 4, or ε itself where the kernel has no use for it).
    pub fn observe(
        &mut self,
        position: &[f64],
        gradient: &[f64],
        stats: &DrawStats,
        params: &mut TunedParams,
        search: impl FnOnce(&DiagonalMassMatrix, f64) -> f64,
    ) {
        match self {
            Tuner::StanWindows(state) => state.observe(
                position,
                gradient,
                stats,
                &mut params.step_size,
                &mut params.metric,
                search,
            ),
            Tuner::Mclmc(state) => state.observe(position, stats, params),
            Tuner::Smile(state) => state.observe(position, gradient, stats, params),
            Tuner::Mams(state) => state.observe(position, stats, params),
            // The ensemble is tuned by the runner, from all chains at once.
            Tuner::Ensemble(_) => {}
        }
    }

    /// Whether the tuner holds so much (the microcanonical tuners' last-phase positions) that periodic checkpoints
    /// should wait until it lets go of it.
    pub fn holds_positions(&self) -> bool {
        match self {
            Tuner::StanWindows(_) | Tuner::Ensemble(_) => false,
            Tuner::Mclmc(state) => state.holds_positions(),
            Tuner::Smile(state) => state.holds_positions(),
            Tuner::Mams(state) => state.holds_positions(),
        }
    }

    /// The Stan warmup's state, if this is that tuner.
    pub fn stan_windows(&self) -> Option<&WarmupState> {
        match self {
            Tuner::StanWindows(state) => Some(state),
            Tuner::Mclmc(_) | Tuner::Smile(_) | Tuner::Mams(_) | Tuner::Ensemble(_) => None,
        }
    }
}

impl Tuner {
    /// The ensemble's warmup, if this chain belongs to one (LAPS).
    pub fn ensemble(&self) -> Option<&EnsembleMember> {
        match self {
            Tuner::Ensemble(member) => Some(member),
            _ => None,
        }
    }
}

impl From<WarmupState> for Tuner {
    fn from(state: WarmupState) -> Self {
        Tuner::StanWindows(state)
    }
}

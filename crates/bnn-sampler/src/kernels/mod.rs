//! The transition-kernel interface: `init(position) -> state`,
//! `step(rng, state, params) -> (state, info)`.
//!
//! A new sampler goes here as one file: its config (`#[derive(Config)]` with documented defaults
//! and `init`, implementing `SamplerSettings`) and one line in the list below; its kernel
//! implements `Kernel` (and `BatchKernel` for lockstep chains, through `dynamics::Lockstep`),
//! built from the existing parts: an `Integrator` (`dynamics`), a `Metric` (`metric`), the NUTS
//! `Trajectory` where it builds trees, and a `Tuner` (`adaptation`) for its warmup. What a chain carries between transitions is its `KernelState` (position, log density,
//! gradient and, for the kernels that persist it, momentum); what a kernel keeps beside it only
//! saves evaluations (MSD's metric where its chain sits) and changes no number.

mod hmc;
mod laps;
mod mams;
mod mclmc;
mod msd;
mod nuts;
mod nuts_batched;
mod random_walk;
mod smile;
mod surrogate_nuts;

pub use hmc::{Hmc, HmcConfig};
pub use laps::LapsConfig;
pub use mams::{Mams, MamsConfig};
pub use mclmc::{Mclmc, MclmcConfig};
pub use msd::{msd_transition, try_msd_transition, Msd, MsdConfig, MsdInfo, MsdParams, MsdState};
pub use nuts::{Nuts, NutsConfig};
pub use nuts_batched::BatchedNuts;
pub use random_walk::{RandomWalk, RandomWalkConfig};
pub use smile::{Smile, SmileConfig};
pub use surrogate_nuts::{
    SurrogateCounts, SurrogateNuts, SurrogateNutsConfig, SURROGATE_NUTS_STATS,
};

// The samplers `Sampler` runs by name (`AlgorithmConfig`); a new one is one line here.
crate::algorithm_config::registered_samplers! {
    /// The no-U-turn sampler.
    Nuts(NutsConfig),
    /// Static HMC (a fixed number of leapfrog steps).
    Hmc(HmcConfig),
    /// Random-walk Metropolis.
    RandomWalk(RandomWalkConfig),
    /// Unadjusted microcanonical Langevin Monte Carlo.
    Mclmc(MclmcConfig),
    /// Metropolis-adjusted microcanonical sampling.
    Mams(MamsConfig),
    /// Manifold stochastic dynamics: needs a density with a metric ([`LogDensity::riemannian`]).
    Msd(MsdConfig),
    /// Late-adjusted parallel sampling: an ensemble's MCLMC burn-in, then MAMS with shared steps.
    Laps(LapsConfig),
    /// Stochastic-gradient MCLMC: needs a density with minibatch evaluation
    /// ([`LogDensity::minibatch`]).
    Smile(SmileConfig),
}

use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::draw_stats::DrawStats;
use crate::dynamics::GradientKind;
use crate::error::{SamplerError, StartError};
use crate::log_density::{LogDensity, LogDensityError};
use crate::metric::DiagonalMassMatrix;

/// The state a kernel carries from one transition to the next (BlackJAX's `HMCState`): the
/// position with its log density and gradient cached, so no transition re-evaluates its start.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct KernelState {
    pub position: Vec<f64>,
    pub log_density: f64,
    /// `∇ log p(position)` for every kernel an `AlgorithmConfig` names; after the transitions of
    /// some others it is what their next transition needs instead (a surrogate's force, a
    /// pseudo-marginal midpoint's gradient): `Kernel::state_gradient` says which.
    pub gradient: Vec<f64>,
    /// Momentum carried between transitions: HMC with partial momentum refresh, MSD (Horowitz's
    /// persistence) and MCLMC (its unit velocity); `None` means "draw a fresh one".
    pub momentum: Option<Vec<f64>>,
}

impl KernelState {
    /// Evaluates the log density at `position`; the start must have the right length and a finite
    /// log density and gradient.
    pub fn init<L: LogDensity + ?Sized>(
        density: &L,
        position: Vec<f64>,
    ) -> Result<Self, StartError> {
        let dim = density.dim();
        if position.len() != dim {
            return Err(StartError::WrongDimension {
                expected: dim,
                got: position.len(),
            });
        }
        if position.iter().any(|x| !x.is_finite()) {
            return Err(StartError::NonFinite { value: f64::NAN });
        }
        let mut gradient = vec![0.0; dim];
        let log_density = density
            .evaluate(&position, &mut gradient)
            .map_err(StartError::Evaluation)?;
        if !log_density.is_finite() || gradient.iter().any(|g| !g.is_finite()) {
            return Err(StartError::NonFinite { value: log_density });
        }
        Ok(Self {
            position,
            log_density,
            gradient,
            momentum: None,
        })
    }

    pub fn dim(&self) -> usize {
        self.position.len()
    }
}

/// The tuning parameters of one transition, passed explicitly so the same kernel serves warmup
/// (where they change every iteration) and sampling.
#[derive(Clone, Copy, Debug)]
pub struct StepParams<'a> {
    /// Leapfrog step size ε (random-walk Metropolis: the proposal scale multiplier).
    pub step_size: f64,
    /// The adapted constant metric. Kernels whose dynamics use another metric (a
    /// position-dependent one) take that from their own configuration.
    pub metric: &'a DiagonalMassMatrix,
    /// A tuned trajectory length for the kernels that use one (MCLMC's L).
    pub trajectory_length: Option<f64>,
}

impl<'a> StepParams<'a> {
    /// Step size and preconditioner `√diag(M⁻¹)` of an isokinetic path.
    pub(crate) fn path_parameters(&self) -> (f64, &'a [f64]) {
        (self.step_size, self.metric.sqrt_inverse_diag())
    }
}

/// A Markov transition kernel. Implementations own only scratch buffers (allocated once per
/// chain); everything that defines the chain lives in `KernelState` and `StepParams`.
pub trait Kernel {
    /// Whether the kernel integrates Hamiltonian dynamics, so the warmup may pick an initial step
    /// size with the one-leapfrog-step heuristic (Hoffman & Gelman 2014, Alg. 4).
    fn uses_leapfrog(&self) -> bool;

    /// What `KernelState::gradient` holds after this kernel's transitions; whatever reads it as
    /// `∇ log p` (the draws-and-gradients metric estimate) must refuse the other kinds
    /// (`WarmupConfig::check_kernel`).
    fn state_gradient(&self) -> GradientKind {
        GradientKind::LogDensity
    }

    /// Refuses tuned parameters the kernel cannot move with (a metric its integrator cannot use);
    /// the runner checks each chain's before its first transition and after the warmup changes
    /// them.
    fn check_params(&self, params: StepParams<'_>) -> Result<(), SamplerError> {
        let _ = params;
        Ok(())
    }

    /// One transition from `state`. Non-finite log densities and recoverable evaluation failures
    /// count as divergences (the chain stays put); they never panic or abort the run. A fatal
    /// evaluation failure ends the transition with the error (the state is lost with it: the run
    /// stops).
    fn step<L: LogDensity + ?Sized, R: Rng + Send + ?Sized>(
        &mut self,
        density: &L,
        rng: &mut R,
        state: KernelState,
        params: StepParams<'_>,
    ) -> Result<(KernelState, DrawStats), LogDensityError>;
}

/// One chain of a batched transition: its random stream, state and parameters (which differ
/// between chains after adaptation).
pub struct BatchChain<'a, R: ?Sized> {
    pub rng: &'a mut R,
    pub state: &'a mut KernelState,
    pub params: StepParams<'a>,
}

/// A kernel that advances C chains in lockstep, evaluating the log density once per leapfrog
/// step for all of them as a `[C, D]` batch (one GEMM or GPU launch instead of C small ones).
///
/// Chain `c` of a batch makes exactly the moves it would make alone with `Kernel::step` (given a
/// log density that is deterministic per row), drawing from its own stream in the same order.
/// A recoverably failed evaluation of the batch makes every chain in it diverge (the chains stay
/// put); a fatal one ends the transition of all of them with the error.
pub trait BatchKernel {
    /// One transition of every chain in `chains`; `stats` receives one entry per chain.
    fn step_batch<L: LogDensity + ?Sized, R: Rng + Send + ?Sized>(
        &mut self,
        density: &L,
        chains: &mut [BatchChain<'_, R>],
        stats: &mut Vec<DrawStats>,
    ) -> Result<(), LogDensityError>;
}

/// `Kernel::step` for a kernel whose one transition is its batched transition with one chain
/// (MCLMC, MAMS): the same arithmetic alone and in a batch, by construction.
pub(crate) fn step_as_batch_of_one<K, L, R>(
    kernel: &mut K,
    density: &L,
    rng: &mut R,
    mut state: KernelState,
    params: StepParams<'_>,
) -> Result<(KernelState, DrawStats), LogDensityError>
where
    K: BatchKernel,
    L: LogDensity + ?Sized,
    R: Rng + Send + ?Sized,
{
    let mut stats = Vec::with_capacity(1);
    kernel.step_batch(
        density,
        &mut [BatchChain {
            rng,
            state: &mut state,
            params,
        }],
        &mut stats,
    )?;
    Ok((state, stats[0]))
}

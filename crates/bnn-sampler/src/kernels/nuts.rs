//! The No-U-Turn Sampler: multinomial NUTS with the generalized U-turn criterion, iterative.

use bnn_config_derive::Config;
use rand::Rng;

use crate::draw_stats::DrawStats;
use crate::dynamics::{GradientKind, Integrator, Leapfrog, PhasePoint, Stepper};
use crate::error::SamplerError;
use crate::kernels::{Kernel, KernelState, StepParams};
use crate::log_density::{LogDensity, LogDensityError};
use crate::metric::Metric;
use crate::sampler_settings::{ChainRunner, SamplerSettings};
use crate::trajectory::{Extension, Trajectory};

/// Configuration of the NUTS kernel and of its step-size adaptation target.
#[derive(Config, Debug)]
pub struct NutsConfig {
    /// Target mean acceptance statistic δ of the step-size adaptation (Stan's `adapt_delta`).
    /// Raise it (0.9–0.99) for posteriors with strong curvature changes, which gives smaller
    /// steps and fewer divergences. For networks with piecewise-linear activations (ReLU) the
    /// leapfrog local error is Ω(ε) rather than O(ε³) at the kinks (Dinh et al.), so the
    /// acceptance falls off faster with ε and the cost-optimal target is about 0.45 (0.4–0.75)
    /// instead of the smooth-case 0.65–0.8: use `with_target_accept(0.45)` there.
    #[config(default = 0.8)]
    pub target_accept: f64,
    /// Maximum number of doublings; a transition takes at most `2^max_tree_depth - 1` steps.
    #[config(default = 10)]
    pub max_tree_depth: u32,
    /// Energy error `H - H0` above which a trajectory is cut and flagged divergent.
    #[config(default = 1000.0)]
    pub max_energy_error: f64,
}

impl NutsConfig {
    pub(crate) fn validate(&self) -> Result<(), SamplerError> {
        if !(self.target_accept > 0.0 && self.target_accept < 1.0) {
            return Err(SamplerError::InvalidConfig(format!(
                "NUTS target_accept must lie in (0, 1), got {}",
                self.target_accept
            )));
        }
        if self.max_tree_depth == 0 || self.max_tree_depth > 30 {
            return Err(SamplerError::InvalidConfig(format!(
                "NUTS max_tree_depth must lie in 1..=30, got {}",
                self.max_tree_depth
            )));
        }
        if !(self.max_energy_error > 0.0) {
            return Err(SamplerError::InvalidConfig(format!(
                "NUTS max_energy_error must be positive, got {}",
                self.max_energy_error
            )));
        }
        Ok(())
    }

    /// Builds the kernel with buffers for `dim` coordinates, integrating with the leapfrog.
    pub fn init(&self, dim: usize) -> Result<Nuts, SamplerError> {
        self.init_with(dim, Leapfrog)
    }

    /// Builds the kernel with another integrator (each leaf is one step of it).
    pub fn init_with<I: Integrator>(
        &self,
        dim: usize,
        integrator: I,
    ) -> Result<Nuts<I>, SamplerError> {
        self.validate()?;
        Ok(Nuts::new(self, dim, integrator))
    }
}

impl SamplerSettings for NutsConfig {
    const NAME: &'static str = "nuts";

    fn validate(&self) -> Result<(), SamplerError> {
        NutsConfig::validate(self)
    }

    fn target_accept(&self) -> f64 {
        self.target_accept
    }

    fn supports_batched(&self) -> bool {
        true
    }

    fn supports_stationary_warmup(&self) -> bool {
        true
    }

    fn run<L: LogDensity + ?Sized>(&self, chains: ChainRunner<'_, L>) -> Result<(), SamplerError> {
        if chains.batched() {
            chains.lockstep(self.init_batched()?)
        } else {
            let dim = chains.dim();
            chains.threaded(|| self.init(dim))
        }
    }
}

/// The NUTS kernel of one chain: settings plus reusable trajectory buffers.
///
/// Hoffman & Gelman (2014) build a trajectory by repeated doubling in a random direction until it
/// turns back on itself; this follows Betancourt (2017, App. A) as Stan does: proposals are drawn
/// multinomially from the trajectory (weights `exp(-H)`) instead of by slice sampling, with biased
/// progressive sampling across doublings, and termination uses the momentum-sum criterion with the
/// extra checks across subtree seams. The tree itself lives in `trajectory.rs`.
///
/// A transition is a resumable state machine (`begin`, then per leapfrog step `frontier` and
/// `finish_leaf`, then `finish`), so that `BatchedNuts` can hold many chains' transitions in
/// flight and evaluate their frontiers together; `step` drives it for one chain. Between two
/// transitions nothing in here matters: the chain is entirely its `KernelState`.
///
/// Each leaf is one step of the integrator `I` (the leapfrog by default); the tree weights every
/// leaf by its `PhasePoint::hamiltonian`, whatever produced the point.
#[derive(Clone, Debug)]
pub struct Nuts<I = Leapfrog> {
    integrator: I,
    max_tree_depth: u32,
    max_energy_error: f64,
    start: PhasePoint,
    trajectory: Trajectory,
    /// The transition in progress: its step size and completed doublings.
    step_size: f64,
    depth: u32,
}

impl<I: Integrator> Nuts<I> {
    /// A kernel for an already validated configuration.
    pub(crate) fn new(config: &NutsConfig, dim: usize, integrator: I) -> Self {
        Self {
            integrator,
            max_tree_depth: config.max_tree_depth,
            max_energy_error: config.max_energy_error,
            start: PhasePoint::new(dim),
            trajectory: Trajectory::new(dim),
            step_size: 0.0,
            depth: 0,
        }
    }

    /// Starts a transition from `state`: draws the momentum and the first doubling's direction.
    ///
    /// Random numbers, in order: D normals for the momentum, then per doubling one direction
    /// bit, the uniforms of the subtree's merges (post-order) and one for the progressive
    /// sample. The recursive oracle in the tests consumes them in the same order.
    pub(crate) fn begin<R: Rng + ?Sized>(
        &mut self,
        rng: &mut R,
        state: &KernelState,
        params: StepParams<'_>,
    ) {
        let dim = state.dim();
        if self.start.dim() != dim {
            self.start = PhasePoint::new(dim);
            self.trajectory = Trajectory::new(dim);
        }
        let metric: &dyn Metric = params.metric;
        self.start
            .reset_to(&state.position, &state.gradient, state.log_density);
        let mut rng = rng;
        metric.sample_momentum(&mut self.start, &mut rng);
        self.start.refresh_velocity(metric);
        self.integrator.begin_transition(&self.start);
        self.trajectory.reset(&self.start);
        self.step_size = params.step_size;
        self.depth = 0;
        self.begin_doubling(rng);
    }

    fn begin_doubling<R: Rng + ?Sized>(&mut self, rng: &mut R) {
        let forward: bool = rng.random();
        self.trajectory
            .begin_doubling(forward, self.depth, self.step_size);
    }

    /// The integrator, with whatever it counted.
    pub fn integrator(&self) -> &I {
        &self.integrator
    }

    /// The next leaf's integrator step: the point it starts from, its metric and signed step size.
    pub(crate) fn stepper<'a>(&'a mut self, metric: &'a dyn Metric) -> Stepper<'a, I> {
        let (point, step_size) = self.trajectory.frontier();
        Stepper {
            integrator: &mut self.integrator,
            point,
            metric,
            step_size,
        }
    }

    /// Takes in the leapfrog step just made from `frontier`; returns `true` once the transition
    /// is complete (U-turn, divergence or maximum depth), `false` while it needs more steps.
    pub(crate) fn finish_leaf<R: Rng + ?Sized>(&mut self, rng: &mut R) -> bool {
        match self.trajectory.finish_leaf(self.max_energy_error, rng) {
            None => false,
            Some(Extension::Invalid) => true,
            Some(Extension::Turned) => {
                self.depth += 1;
                true
            }
            Some(Extension::Continue) => {
                self.depth += 1;
                if self.depth < self.max_tree_depth {
                    self.begin_doubling(rng);
                    false
                } else {
                    true
                }
            }
        }
    }

    /// Ends a complete transition: moves `state` to the selected point and reports the draw.
    pub(crate) fn finish(&self, state: &mut KernelState) -> DrawStats {
        let trajectory = &self.trajectory;
        let proposal = trajectory.proposal();
        state.position.copy_from_slice(&proposal.position);
        state.gradient.copy_from_slice(&proposal.gradient);
        state.log_density = proposal.log_density;
        DrawStats {
            log_density: proposal.log_density,
            accept_stat: trajectory.sum_accept / f64::from(trajectory.n_leapfrog.max(1)),
            step_size: self.step_size,
            tree_depth: self.depth,
            n_leapfrog: trajectory.n_leapfrog,
            divergent: trajectory.divergent,
            energy: proposal.energy,
            energy_error: proposal.energy - trajectory.initial_energy(),
            ..DrawStats::default()
        }
    }
}

impl<I: Integrator> Kernel for Nuts<I> {
    fn uses_leapfrog(&self) -> bool {
        true
    }

    fn state_gradient(&self) -> GradientKind {
        self.integrator.gradient_kind()
    }

    fn check_params(&self, params: StepParams<'_>) -> Result<(), SamplerError> {
        self.integrator.check_metric(params.metric)
    }

    fn step<L: LogDensity + ?Sized, R: Rng + Send + ?Sized>(
        &mut self,
        density: &L,
        rng: &mut R,
        mut state: KernelState,
        params: StepParams<'_>,
    ) -> Result<(KernelState, DrawStats), LogDensityError> {
        self.begin(rng, &state, params);
        loop {
            let leaf = self.stepper(params.metric);
            leaf.point
                .step(leaf.integrator, density, leaf.metric, leaf.step_size)?;
            if self.finish_leaf(rng) {
                break;
            }
        }
        let stats = self.finish(&mut state);
        Ok((state, stats))
    }
}

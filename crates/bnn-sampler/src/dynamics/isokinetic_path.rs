//! One chain's isokinetic path: McLachlan's two-gradient splitting of the isokinetic kick and
//! drift (`isokinetic`), taken for a given number of steps and resumable between its gradient
//! evaluations, so that `Lockstep` runs the paths of many chains (MCLMC, MAMS) with one batched
//! call per stage.

use crate::dynamics::isokinetic::{update_velocity_scaled, update_velocity_scaled_and_drift};
use crate::dynamics::{Evaluation, Lockstep, Walker};
use crate::log_density::{recover, LogDensity, LogDensityError};

/// McLachlan's minimal-norm coefficient `b₁` (McLachlan 1995; Omelyan et al. 2003): the velocity
/// updates are `b₁ε, (1 − 2b₁)ε, b₁ε` around two half drifts, two gradients per step.
pub const MCLACHLAN_B1: f64 = 0.193_183_327_503_783_6;

/// Where a path is within its current McLachlan step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
enum Stage {
    /// Between steps: the next move is the first `b₁ε` kick with the cached gradient.
    #[default]
    BetweenSteps,
    /// After the first half drift, waiting for the gradient there.
    FirstEvaluation,
    /// After the second half drift, waiting for the gradient there.
    SecondEvaluation,
}

/// One chain's isokinetic McLachlan path, resumable between its gradient evaluations so that
/// many chains can share one batched evaluation per stage (`Lockstep`, through [`PathStepper`]).
///
/// The dynamics run in the preconditioned coordinates `x = √Σ ⊙ y`: the drift is
/// `x += t √Σ ⊙ u` and the force on `u` is `√Σ ⊙ ∇ log p` (BlackJAX's `sqrt_diag_cov`).
#[derive(Clone, Debug, Default)]
pub struct IsokineticPath {
    pub position: Vec<f64>,
    pub velocity: Vec<f64>,
    /// `∇ log p(position)`, unscaled.
    pub gradient: Vec<f64>,
    pub log_density: f64,
    /// Kinetic energy change accumulated along the path.
    pub kinetic_change: f64,
    /// Whole steps still to take.
    pub steps_left: usize,
    /// Gradient evaluations made.
    pub evaluations: usize,
    /// An evaluation failed recoverably or was not finite: the path stopped there.
    pub failed: bool,
    stage: Stage,
}

impl IsokineticPath {
    /// Starts a path of `steps` steps from a point whose log density and gradient are known.
    pub fn start(
        &mut self,
        position: &[f64],
        velocity: &[f64],
        gradient: &[f64],
        log_density: f64,
        steps: usize,
    ) {
        self.position.clear();
        self.position.extend_from_slice(position);
        self.velocity.clear();
        self.velocity.extend_from_slice(velocity);
        self.gradient.clear();
        self.gradient.extend_from_slice(gradient);
        self.log_density = log_density;
        self.kinetic_change = 0.0;
        self.steps_left = steps;
        self.evaluations = 0;
        self.failed = false;
        self.stage = Stage::BetweenSteps;
    }

    fn kick(&mut self, time: f64, sqrt_cov: &[f64]) {
        self.kinetic_change +=
            update_velocity_scaled(&mut self.velocity, &self.gradient, sqrt_cov, time);
    }

    /// A kick for `time`, then half a step's drift, in one pass after the kick's sums.
    fn kick_and_half_drift(&mut self, time: f64, step_size: f64, sqrt_cov: &[f64]) {
        let drift = 0.5 * step_size;
        self.kinetic_change += update_velocity_scaled_and_drift(
            &mut self.velocity,
            &self.gradient,
            sqrt_cov,
            time,
            &mut self.position,
            drift,
        );
    }

    /// Moves as far as possible without a new gradient; `true` when `position` needs one.
    pub fn advance(&mut self, step_size: f64, sqrt_cov: &[f64]) -> bool {
        loop {
            if self.failed {
                return false;
            }
            match self.stage {
                Stage::BetweenSteps if self.steps_left == 0 => return false,
                Stage::BetweenSteps => {
                    self.kick_and_half_drift(MCLACHLAN_B1 * step_size, step_size, sqrt_cov);
                    self.stage = Stage::FirstEvaluation;
                    return true;
                }
                Stage::FirstEvaluation => {
                    self.kick_and_half_drift(
                        (1.0 - 2.0 * MCLACHLAN_B1) * step_size,
                        step_size,
                        sqrt_cov,
                    );
                    self.stage = Stage::SecondEvaluation;
                    return true;
                }
                Stage::SecondEvaluation => {
                    self.kick(MCLACHLAN_B1 * step_size, sqrt_cov);
                    self.steps_left -= 1;
                    self.stage = Stage::BetweenSteps;
                }
            }
        }
    }

    /// Takes the evaluation at `position`; a failure or a non-finite value ends the path.
    pub(crate) fn receive(&mut self, log_density: f64, gradient: &[f64]) {
        self.evaluations += 1;
        // Copy and check in one pass; a failed path's gradient is never read again.
        let mut finite = log_density.is_finite();
        for (mine, &g) in self.gradient.iter_mut().zip(gradient) {
            *mine = g;
            finite &= g.is_finite();
        }
        if !finite {
            self.failed = true;
            return;
        }
        self.log_density = log_density;
    }

    /// The batch call that held this path's evaluation failed recoverably: the path stops.
    pub(crate) fn receive_failure(&mut self) {
        self.evaluations += 1;
        self.failed = true;
    }

    /// [`IsokineticPath::receive`] for an evaluation written into `gradient` itself (when
    /// `evaluated`; else the path fails).
    fn receive_in_place(&mut self, evaluated: bool, log_density: f64) {
        self.evaluations += 1;
        if !(evaluated && log_density.is_finite() && self.gradient.iter().all(|g| g.is_finite())) {
            self.failed = true;
            return;
        }
        self.log_density = log_density;
    }

    /// Whether the path has started and taken no step yet (what a [`PathIntegrator`] takes).
    pub fn is_fresh(&self) -> bool {
        self.stage == Stage::BetweenSteps && self.evaluations == 0 && !self.failed
    }

    /// Ends a path that a [`PathIntegrator`] ran: it has written `position`, `velocity` and
    /// `gradient`; these are the rest of what the path's own steps would have left.
    pub fn end_elsewhere(
        &mut self,
        log_density: f64,
        kinetic_change: f64,
        evaluations: usize,
        failed: bool,
    ) {
        self.log_density = log_density;
        self.kinetic_change = kinetic_change;
        self.evaluations = evaluations;
        self.failed = failed;
        self.steps_left = 0;
        self.stage = Stage::BetweenSteps;
    }

    /// The energy change of the path so far: kinetic change minus the gain in `log p`.
    pub fn energy_change(&self, initial_log_density: f64) -> f64 {
        self.kinetic_change - (self.log_density - initial_log_density)
    }
}

/// A density that runs many chains' isokinetic paths itself, every step in one place: on a GPU
/// the positions, velocities and energy sums stay on the device for a whole trajectory and the
/// host reads back once, where stepping on the host costs a round trip and host passes over
/// `[C, D]` per gradient (issue 48). Reached through `LogDensity::path_integrator`.
pub trait PathIntegrator: Send + Sync {
    /// Runs every path of `paths` (all fresh, [`IsokineticPath::is_fresh`]; their lengths may
    /// differ) to its end, path `i` with the step size and preconditioner `√Σ` of
    /// `parameters[i]`, as [`PathStepper::walk_all`] would, in the integrator's own arithmetic,
    /// then ends each with [`IsokineticPath::end_elsewhere`]. `Ok(false)`: declined (the caller
    /// steps them); a recoverable error fails every path (a divergence), a fatal one ends the run.
    fn integrate(
        &self,
        paths: &mut [IsokineticPath],
        parameters: &[(f64, &[f64])],
    ) -> Result<bool, LogDensityError>;
}

/// A path with the step size and preconditioner `√Σ` its chain moves with: what `Lockstep`
/// runs to its end, gradient evaluation by gradient evaluation.
pub struct PathStepper<'a> {
    pub path: &'a mut IsokineticPath,
    pub step_size: f64,
    pub sqrt_cov: &'a [f64],
}

impl<'a> PathStepper<'a> {
    /// Runs every path to its end in lockstep (one batched gradient call per round), each with
    /// its own chain's `(step size, √Σ)` from `parameters`, in path order; a fatal evaluation
    /// error stops them all and is returned. Where the density integrates paths itself
    /// ([`PathIntegrator`]), it runs them.
    pub fn walk_all<L: LogDensity + ?Sized>(
        lockstep: &mut Lockstep,
        density: &L,
        paths: &'a mut [IsokineticPath],
        parameters: impl Iterator<Item = (f64, &'a [f64])>,
    ) -> Result<(), LogDensityError> {
        let parameters: Vec<(f64, &'a [f64])> = parameters.collect();
        if let Some(integrator) = density.path_integrator() {
            if paths.iter().all(IsokineticPath::is_fresh) {
                match recover(integrator.integrate(paths, &parameters))? {
                    Some(true) => return Ok(()),
                    Some(false) => {}
                    None => {
                        paths.iter_mut().for_each(IsokineticPath::receive_failure);
                        return Ok(());
                    }
                }
            }
        }
        let mut walkers: Vec<PathStepper<'a>> = paths
            .iter_mut()
            .zip(parameters)
            .map(|(path, (step_size, sqrt_cov))| PathStepper {
                path,
                step_size,
                sqrt_cov,
            })
            .collect();
        lockstep.step(density, &mut walkers)
    }
}

impl Walker for PathStepper<'_> {
    fn begin(&mut self) -> Option<Evaluation> {
        self.resume()
    }

    fn resume(&mut self) -> Option<Evaluation> {
        self.path
            .advance(self.step_size, self.sqrt_cov)
            .then_some(Evaluation::ValueAndGradient)
    }

    fn position(&self) -> &[f64] {
        &self.path.position
    }

    fn receive(&mut self, _kind: Evaluation, result: Option<(f64, &[f64])>) {
        match result {
            Some((log_density, gradient)) => self.path.receive(log_density, gradient),
            None => self.path.receive_failure(),
        }
    }

    /// Evaluates at the path's position into its own gradient, without the batch's two copies.
    fn evaluate_alone<L: LogDensity + ?Sized>(
        &mut self,
        density: &L,
        _kind: Evaluation,
    ) -> Result<(), LogDensityError> {
        let path = &mut *self.path;
        let mut value = [0.0];
        let evaluated = recover(density.log_density_and_gradient(
            &path.position,
            &mut value,
            &mut path.gradient,
        ))?
        .is_some();
        path.receive_in_place(evaluated, value[0]);
        Ok(())
    }
}

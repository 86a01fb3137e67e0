//! The integrator seam: phase points, the `Integrator` trait and the requests it makes of a density.
//!
//! An integrator advances one phase point by a signed step `ε` in stages: `begin` moves the point
//! as far as it can without new values and names the evaluation it needs at `point.position`;
//! after the evaluation `resume` continues, and either asks for another one or ends the step.
//! One evaluation per step (the leapfrog, the pseudo-marginal flow–kick–flow) or several all fit,
//! and the same integrator runs alone (`PhasePoint::step`) or batched across chains
//! (`Lockstep`), one density call per round.
//!
//! Integrators that need something besides the density's value and gradient (a surrogate force)
//! own it and answer `Evaluation::Auxiliary` themselves in `evaluate_auxiliary`, batched over
//! every point that asked in the round; the results go into each point's `auxiliary` cache.
//!
//! Beside the seam: the isokinetic (microcanonical) dynamics, whose multi-step paths also run
//! through `Lockstep`, and the generalized leapfrog of manifold stochastic dynamics with its
//! fixed-point solver, which moves under a position-dependent metric one chain at a time (see
//! `generalized_leapfrog` for why it is not an `Integrator`).

pub mod fixed_point;
pub mod generalized_leapfrog;
pub mod isokinetic;
pub mod isokinetic_path;
mod leapfrog;
mod lockstep;
pub mod pseudo_marginal;
pub mod surrogate;

pub use leapfrog::{kick, kick_and_drift, Leapfrog};
pub(crate) use lockstep::{map_pairs, PARALLEL_VALUES};
pub use lockstep::{Lockstep, Stepper, Walker};

use std::fmt;

use crate::error::SamplerError;
use crate::log_density::{recover, LogDensity, LogDensityError};
use crate::metric::Metric;
pub use crate::phase_point::PhasePoint;

/// Why a step of the generalized leapfrog (or one of its fixed-point solutions) ended without a
/// point.
#[derive(Debug)]
pub enum StepFailure {
    /// An implicit equation did not converge, or a value was not finite or failed recoverably:
    /// a divergence, after this many fixed-point iterations.
    Divergent { iterations: usize },
    /// The density failed with a fatal error: the run stops.
    Fatal(LogDensityError),
}

impl StepFailure {
    /// An evaluation's error after `iterations` fixed-point iterations: a divergence when
    /// recoverable.
    pub fn after(error: LogDensityError, iterations: usize) -> Self {
        if error.is_recoverable() {
            StepFailure::Divergent { iterations }
        } else {
            StepFailure::Fatal(error)
        }
    }
}

/// What an integrator needs evaluated at `point.position` before it can continue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Evaluation {
    /// `log p(q)` into `log_density` and `∇ log p(q)` into `gradient`.
    ValueAndGradient,
    /// `log p(q)` into `log_density` only (`gradient` is left as it is).
    Value,
    /// The integrator's own quantity at the point (`Integrator::evaluate_auxiliary`: a
    /// surrogate's force).
    Auxiliary,
}

/// What a point's `gradient` holds after an integrator's step, and so a kernel's state after a
/// transition (`Kernel::state_gradient`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GradientKind {
    /// `∇ log p` at the point's position.
    LogDensity,
    /// `∇ log p` at the midpoint of the last pseudo-marginal flow–kick–flow step: the end's is
    /// never evaluated, since no step reads it.
    PseudoMarginalMidpoint,
    /// A surrogate's force at the position: surrogate leaves never evaluate the true gradient,
    /// and the next transition's first kick must use the surrogate's.
    Surrogate,
}

impl GradientKind {
    /// The kernels that leave this kind of gradient, for error messages.
    pub fn kernel_name(self) -> &'static str {
        match self {
            GradientKind::LogDensity => "a kernel on true gradients",
            GradientKind::PseudoMarginalMidpoint => {
                "NUTS or HMC on the pseudo-marginal flow–kick–flow integrator"
            }
            GradientKind::Surrogate => "surrogate-gradient NUTS",
        }
    }
}

/// A numerical integrator of Hamiltonian dynamics, resumable between density evaluations.
///
/// Implementations hold only the state of the step in progress; between steps the point is
/// everything. After a completed step `velocity` and `kinetic_energy` are fresh, so
/// `PhasePoint::hamiltonian` is the energy the kernels test. A recoverable evaluation failure
/// leaves the log density NaN, which the kernels count as a divergence; a fatal one ends the
/// step with the error, and the run with it.
pub trait Integrator: Clone + fmt::Debug + Send + Sync {
    /// Called by a kernel once per transition, after the start's momentum was drawn: lets an
    /// integrator that watches the energy error along the trajectory (online monitoring of a
    /// surrogate force) learn `H₀`. Nothing to do for the others.
    fn begin_transition(&mut self, start: &PhasePoint) {
        let _ = start;
    }

    /// What the point's `gradient` holds after a step (`∇ log p` unless the integrator says
    /// otherwise).
    fn gradient_kind(&self) -> GradientKind {
        GradientKind::LogDensity
    }

    /// Refuses a metric the integrator cannot move with, so a runner can return the error before
    /// a transition uses it (a step with such a metric fails: a divergence, the chain stays put).
    fn check_metric(&self, metric: &dyn Metric) -> Result<(), SamplerError> {
        let _ = metric;
        Ok(())
    }

    /// Starts a step of signed size `step_size` (negative: backward in time) from `point`.
    fn begin(&mut self, point: &mut PhasePoint, metric: &dyn Metric, step_size: f64) -> Evaluation;

    /// Continues after the requested evaluation was written into `point`: `None` when the step is
    /// complete, else the next evaluation.
    fn resume(
        &mut self,
        point: &mut PhasePoint,
        metric: &dyn Metric,
        step_size: f64,
    ) -> Option<Evaluation>;

    /// Answers `Evaluation::Auxiliary` for a batch of points (each asked for it), writing into
    /// their `auxiliary` caches. Only integrators that make that request implement it; a
    /// recoverable error fails every point of the batch (a divergence), a fatal one the run.
    fn evaluate_auxiliary(&self, points: &mut [&mut PhasePoint]) -> Result<(), LogDensityError> {
        let _ = points;
        Err(LogDensityError::fatal(format!(
            "{self:?} asked for an auxiliary evaluation it does not provide"
        )))
    }
}

impl PhasePoint {
    /// Recomputes velocity and kinetic energy after the momentum was set.
    pub fn refresh_velocity(&mut self, metric: &dyn Metric) {
        metric.update_kinetic_energy(self);
    }

    /// One step of `integrator` of size `step_size` (negative integrates backward in time),
    /// evaluating `density` as often as the integrator asks. A recoverable failure leaves the log
    /// density NaN (a divergence); a fatal one is returned.
    pub fn step<I: Integrator, L: LogDensity + ?Sized>(
        &mut self,
        integrator: &mut I,
        density: &L,
        metric: &dyn Metric,
        step_size: f64,
    ) -> Result<(), LogDensityError> {
        let mut request = integrator.begin(self, metric, step_size);
        loop {
            self.evaluate_for(&*integrator, density, request)?;
            match integrator.resume(self, metric, step_size) {
                Some(next) => request = next,
                None => return Ok(()),
            }
        }
    }

    /// Evaluates what `integrator` asked for at the point, in place; a recoverable failure
    /// leaves the log density NaN, a fatal one is returned.
    pub(crate) fn evaluate_for<I: Integrator, L: LogDensity + ?Sized>(
        &mut self,
        integrator: &I,
        density: &L,
        request: Evaluation,
    ) -> Result<(), LogDensityError> {
        let value = match request {
            Evaluation::ValueAndGradient => {
                recover(density.evaluate(&self.position, &mut self.gradient))?
            }
            Evaluation::Value => recover(density.value(&self.position))?,
            Evaluation::Auxiliary => recover(integrator.evaluate_auxiliary(&mut [&mut *self]))?
                .map(|()| self.log_density),
        };
        self.log_density = value.unwrap_or(f64::NAN);
        Ok(())
    }

    /// One leapfrog step of size `step_size` (negative integrates backward in time).
    pub fn leapfrog<L: LogDensity + ?Sized>(
        &mut self,
        density: &L,
        metric: &dyn Metric,
        step_size: f64,
    ) -> Result<(), LogDensityError> {
        self.step(&mut Leapfrog, density, metric, step_size)
    }
}

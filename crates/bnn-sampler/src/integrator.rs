//! The leapfrog (Störmer–Verlet) integrator for Hamiltonian dynamics with a diagonal metric.

use crate::log_density::LogDensity;
use crate::mass_matrix::DiagonalMassMatrix;
use crate::summation::dot;

/// First half of a leapfrog step (Neal 2011, eqs. 2.28–2.29): a half kick with the current
/// gradient, then a full drift with the new velocity `M⁻¹p`.
///
/// `gradient` is `∇ log p(q)`, so the kick is `p += ε/2 · ∇ log p(q)` (the force is `-∇U`).
///
/// Both halves work on plain slices so that single-chain NUTS and the batched `[C, D]` HMC share
/// one implementation (and therefore produce bit-identical trajectories).
#[inline]
pub fn kick_and_drift(
    step_size: f64,
    inverse_diag: &[f64],
    position: &mut [f64],
    momentum: &mut [f64],
    gradient: &[f64],
) {
    let half = 0.5 * step_size;
    for (((q, p), g), m) in position
        .iter_mut()
        .zip(momentum.iter_mut())
        .zip(gradient)
        .zip(inverse_diag)
    {
        *p += half * g;
        *q += step_size * (m * *p);
    }
}

/// Second half of a leapfrog step (Neal 2011, eq. 2.30): a half kick with the gradient at the new
/// position. Writes the velocity `M⁻¹p` and returns the kinetic energy `½ pᵀM⁻¹p`.
#[inline]
pub fn kick(
    step_size: f64,
    inverse_diag: &[f64],
    momentum: &mut [f64],
    velocity: &mut [f64],
    gradient: &[f64],
) -> f64 {
    let half = 0.5 * step_size;
    for (((p, v), g), m) in momentum
        .iter_mut()
        .zip(velocity.iter_mut())
        .zip(gradient)
        .zip(inverse_diag)
    {
        *p += half * g;
        *v = m * *p;
    }
    0.5 * dot(momentum, velocity)
}

/// A point in phase space with everything the trajectory code needs cached.
#[derive(Clone, Debug, PartialEq)]
pub struct PhasePoint {
    pub position: Vec<f64>,
    pub momentum: Vec<f64>,
    /// `M⁻¹p`, the direction of motion; the generalized U-turn criterion is stated in it.
    pub velocity: Vec<f64>,
    /// `∇ log p(q)`.
    pub gradient: Vec<f64>,
    pub log_density: f64,
    pub kinetic_energy: f64,
}

impl PhasePoint {
    pub fn new(dim: usize) -> Self {
        Self {
            position: vec![0.0; dim],
            momentum: vec![0.0; dim],
            velocity: vec![0.0; dim],
            gradient: vec![0.0; dim],
            log_density: 0.0,
            kinetic_energy: 0.0,
        }
    }

    pub fn dim(&self) -> usize {
        self.position.len()
    }

    /// `H(q, p) = -log p(q) + ½ pᵀM⁻¹p`; NaN when the log density is NaN (callers treat it as +∞).
    #[inline]
    pub fn hamiltonian(&self) -> f64 {
        -self.log_density + self.kinetic_energy
    }

    /// Copies position, momentum and cached values from `other` without reallocating.
    pub fn copy_from(&mut self, other: &PhasePoint) {
        self.position.copy_from_slice(&other.position);
        self.momentum.copy_from_slice(&other.momentum);
        self.velocity.copy_from_slice(&other.velocity);
        self.gradient.copy_from_slice(&other.gradient);
        self.log_density = other.log_density;
        self.kinetic_energy = other.kinetic_energy;
    }

    /// Recomputes velocity and kinetic energy after the momentum was set.
    pub fn refresh_velocity(&mut self, metric: &DiagonalMassMatrix) {
        self.kinetic_energy =
            metric.velocity_and_kinetic_energy(&self.momentum, &mut self.velocity);
    }

    /// One leapfrog step of size `step_size` (negative integrates backward in time).
    ///
    /// A failed evaluation leaves the log density NaN, so the caller sees a non-finite energy
    /// and counts a divergence.
    pub fn leapfrog<L: LogDensity + ?Sized>(
        &mut self,
        density: &L,
        metric: &DiagonalMassMatrix,
        step_size: f64,
    ) {
        self.begin_leapfrog(metric, step_size);
        self.log_density = match density.evaluate(&self.position, &mut self.gradient) {
            Ok(value) => value,
            Err(_) => f64::NAN,
        };
        self.end_leapfrog(metric, step_size);
    }

    /// The part of `leapfrog` before the evaluation; afterwards `position` is the point to
    /// evaluate. Split out so a batched caller can evaluate many points in one call in between.
    #[inline]
    pub fn begin_leapfrog(&mut self, metric: &DiagonalMassMatrix, step_size: f64) {
        kick_and_drift(
            step_size,
            metric.inverse_diag(),
            &mut self.position,
            &mut self.momentum,
            &self.gradient,
        );
    }

    /// The part of `leapfrog` after the evaluation, once `log_density` and `gradient` hold the
    /// values at `position`.
    #[inline]
    pub fn end_leapfrog(&mut self, metric: &DiagonalMassMatrix, step_size: f64) {
        self.kinetic_energy = kick(
            step_size,
            metric.inverse_diag(),
            &mut self.momentum,
            &mut self.velocity,
            &self.gradient,
        );
    }
}

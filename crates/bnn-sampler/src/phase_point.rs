//! A point in phase space: position, momentum and what the integrators cache at it.

/// A point in phase space with everything the trajectory code needs cached.
#[derive(Clone, Debug, PartialEq)]
pub struct PhasePoint {
    pub position: Vec<f64>,
    pub momentum: Vec<f64>,
    /// `G⁻¹p`, the direction of motion; the generalized U-turn criterion is stated in it.
    pub velocity: Vec<f64>,
    /// `∇ log p(q)`.
    pub gradient: Vec<f64>,
    pub log_density: f64,
    pub kinetic_energy: f64,
    /// What an integrator caches at this point (a surrogate force, `Evaluation::Auxiliary`);
    /// empty for the leapfrog.
    pub auxiliary: Vec<f64>,
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
            auxiliary: Vec::new(),
        }
    }

    pub fn dim(&self) -> usize {
        self.position.len()
    }

    /// `H(q, p) = -log p(q) + K(q, p)`; NaN when the log density is NaN (callers treat it as +∞).
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
        self.auxiliary.clone_from(&other.auxiliary);
    }

    /// Sets the point to a chain's state (position, gradient, log density; momentum untouched)
    /// and drops what was cached at the previous position.
    pub fn reset_to(&mut self, position: &[f64], gradient: &[f64], log_density: f64) {
        self.position.copy_from_slice(position);
        self.gradient.copy_from_slice(gradient);
        self.log_density = log_density;
        self.auxiliary.clear();
    }
}

//! The constant diagonal metric (inverse mass matrix) the warmup adapts.

use rand::{Rng, RngCore};
use rand_distr::{Distribution, StandardNormal};
use serde::{Deserialize, Serialize};

use crate::error::SamplerError;
use crate::metric::Metric;
use crate::phase_point::PhasePoint;
use crate::summation::dot;

/// A diagonal Euclidean metric, stored as the inverse mass matrix `M⁻¹ = diag(inverse_diag)`.
///
/// `M⁻¹` estimates the posterior variances, so the kinetic energy `½ pᵀM⁻¹p` makes every
/// coordinate move on the scale of its own posterior standard deviation (Neal 2011, §4.1).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DiagonalMassMatrix {
    inverse_diag: Vec<f64>,
    /// `sqrt(M⁻¹)`, the per-coordinate posterior scale; cached because momentum draws and
    /// random-walk proposals use it on every transition.
    sqrt_inverse_diag: Vec<f64>,
}

impl DiagonalMassMatrix {
    /// The identity metric in `dim` dimensions.
    pub fn identity(dim: usize) -> Self {
        Self {
            inverse_diag: vec![1.0; dim],
            sqrt_inverse_diag: vec![1.0; dim],
        }
    }

    /// A metric from the diagonal of `M⁻¹`; every entry must be positive and finite.
    pub fn new(inverse_diag: Vec<f64>) -> Result<Self, SamplerError> {
        if let Some((i, v)) = inverse_diag
            .iter()
            .enumerate()
            .find(|(_, v)| !(v.is_finite() && **v > 0.0))
        {
            return Err(SamplerError::InvalidConfig(format!(
                "inverse mass matrix entry {i} is {v}; it must be positive and finite"
            )));
        }
        let sqrt_inverse_diag = inverse_diag.iter().map(|v| v.sqrt()).collect();
        Ok(Self {
            inverse_diag,
            sqrt_inverse_diag,
        })
    }

    /// A preconditioner from measured variances (the microcanonical tuners): coordinates that
    /// never moved (variance at most 1e-8 of the mean) keep unit scale rather than a zero one.
    /// `None` when the variances sum to zero or to a non-finite value.
    pub fn from_measured_variances(variances: &[f64]) -> Option<Self> {
        let total: f64 = variances.iter().sum();
        if !(total > 0.0 && total.is_finite()) {
            return None;
        }
        let floor = total / variances.len() as f64 * 1e-8;
        Self::new(
            variances
                .iter()
                .map(|&v| if v > floor { v } else { 1.0 })
                .collect(),
        )
        .ok()
    }

    pub fn dim(&self) -> usize {
        self.inverse_diag.len()
    }

    /// The diagonal of `M⁻¹`.
    pub fn inverse_diag(&self) -> &[f64] {
        &self.inverse_diag
    }

    /// `sqrt(M⁻¹)`: the scale of each coordinate under this metric.
    pub fn sqrt_inverse_diag(&self) -> &[f64] {
        &self.sqrt_inverse_diag
    }

    /// Draws `p ~ N(0, M)` into `momentum`, one standard normal per coordinate in index order.
    pub fn sample_momentum<R: Rng + ?Sized>(&self, rng: &mut R, momentum: &mut [f64]) {
        for (p, s) in momentum.iter_mut().zip(&self.sqrt_inverse_diag) {
            let z: f64 = StandardNormal.sample(rng);
            *p = z / s;
        }
    }

    /// Writes the velocity `M⁻¹p` and returns the kinetic energy `½ pᵀM⁻¹p`.
    pub fn velocity_and_kinetic_energy(&self, momentum: &[f64], velocity: &mut [f64]) -> f64 {
        for ((v, p), m) in velocity.iter_mut().zip(momentum).zip(&self.inverse_diag) {
            *v = m * p;
        }
        0.5 * dot(momentum, velocity)
    }
}

impl Metric for DiagonalMassMatrix {
    fn dim(&self) -> usize {
        self.inverse_diag.len()
    }

    fn sample_momentum(&self, point: &mut PhasePoint, rng: &mut dyn RngCore) {
        DiagonalMassMatrix::sample_momentum(self, rng, &mut point.momentum);
    }

    fn update_kinetic_energy(&self, point: &mut PhasePoint) {
        point.kinetic_energy =
            self.velocity_and_kinetic_energy(&point.momentum, &mut point.velocity);
    }

    fn refresh_momentum(&self, point: &mut PhasePoint, cos: f64, sin: f64, rng: &mut dyn RngCore) {
        for (p, s) in point.momentum.iter_mut().zip(&self.sqrt_inverse_diag) {
            let z: f64 = StandardNormal.sample(rng);
            *p = *p * cos + (z / s) * sin;
        }
    }

    fn constant_inverse_diag(&self) -> Option<&[f64]> {
        Some(&self.inverse_diag)
    }
}

//! Metrics: the `Metric` seam of the explicit integrators (momentum draws, velocity and kinetic
//! energy, partial refresh), the `DiagonalMassMatrix` the warmup adapts, and the
//! position-dependent metric of manifold stochastic dynamics (`riemannian`).
//!
//! A metric defines the kinetic energy of Hamiltonian Monte Carlo, `K(q, p) = ½ pᵀG⁻¹p`. A
//! `Metric` is constant along a trajectory; a `G(q)` that moves with the position is a
//! [`MetricAt`] per point instead, for the reasons its module gives.

mod diagonal;
pub mod riemannian;

pub use diagonal::DiagonalMassMatrix;
pub use riemannian::MetricAt;

use std::fmt;

use rand::RngCore;

use crate::phase_point::PhasePoint;

/// A Gaussian kinetic energy `p ~ N(0, G)` with `G` constant along a trajectory (explicit,
/// separable integrators need that), and what the integrators and kernels need of it.
///
/// Randomness comes in as `&mut dyn RngCore`, so the trait is object-safe: kernels hold a
/// `&dyn Metric` and the metric's own inner loops stay monomorphic.
pub trait Metric: fmt::Debug + Send + Sync {
    /// Dimension of the positions (and momenta) it acts on.
    fn dim(&self) -> usize;

    /// Draws `p ~ N(0, G)` into `point.momentum`.
    fn sample_momentum(&self, point: &mut PhasePoint, rng: &mut dyn RngCore);

    /// Writes `point.velocity = G⁻¹p` and `point.kinetic_energy = ½ pᵀG⁻¹p` from
    /// `point.momentum`.
    fn update_kinetic_energy(&self, point: &mut PhasePoint);

    /// Horowitz's partial refresh `p ← p cos α + n sin α`, `n ~ N(0, G)`, which leaves
    /// `N(0, G)` invariant. Random numbers: those of one `sample_momentum`.
    fn refresh_momentum(&self, point: &mut PhasePoint, cos: f64, sin: f64, rng: &mut dyn RngCore) {
        let previous = std::mem::take(&mut point.momentum);
        point.momentum = vec![0.0; previous.len()];
        self.sample_momentum(point, rng);
        for (p, old) in point.momentum.iter_mut().zip(&previous) {
            *p = old * cos + *p * sin;
        }
    }

    /// `diag(G⁻¹)` when the metric is diagonal and constant: explicit integrators then fuse their
    /// kick and drift into one pass. `None` for every other metric.
    fn constant_inverse_diag(&self) -> Option<&[f64]> {
        None
    }
}

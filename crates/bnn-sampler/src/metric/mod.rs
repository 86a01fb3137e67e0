//! The metric seam: momentum draws, velocity and kinetic energy, partial refresh, all at a point.
//!
//! A metric defines the kinetic energy of Hamiltonian Monte Carlo, `K(q, p) = ½ pᵀG(q)⁻¹p`
//! (plus `½ log det G(q)` when `G` depends on the position, Girolami & Calderhead 2011). Its
//! operations take the phase point, not only the momentum, so a position-dependent metric (the
//! Bayesian metric of manifold stochastic dynamics) fits the same seam as the constant diagonal
//! one the warmup adapts. A position-dependent metric reads what it needs at `q` from the point's
//! `auxiliary` cache, which its integrator fills (see `dynamics`).

mod dense;
mod diagonal;

pub use dense::DenseMetric;
pub use diagonal::DiagonalMassMatrix;

use std::fmt;

use rand::RngCore;

use crate::phase_point::PhasePoint;

/// A Gaussian kinetic energy `p ~ N(0, G(q))` and what the integrators and kernels need of it.
///
/// Randomness comes in as `&mut dyn RngCore`, so the trait is object-safe: kernels hold a
/// `&dyn Metric` and the metric's own inner loops stay monomorphic.
pub trait Metric: fmt::Debug + Send + Sync {
    /// Dimension of the positions (and momenta) it acts on.
    fn dim(&self) -> usize;

    /// Draws `p ~ N(0, G(q))` at `point.position` into `point.momentum`.
    fn sample_momentum(&self, point: &mut PhasePoint, rng: &mut dyn RngCore);

    /// Writes `point.velocity = G(q)⁻¹p` and `point.kinetic_energy` (`½ pᵀG⁻¹p`, plus
    /// `½ log det G(q)` for a position-dependent metric) from `point.momentum`.
    fn update_kinetic_energy(&self, point: &mut PhasePoint);

    /// Horowitz's partial refresh `p ← p cos α + n sin α`, `n ~ N(0, G(q))`, which leaves
    /// `N(0, G(q))` invariant. Random numbers: those of one `sample_momentum`.
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

    /// Whether `G` changes with the position; explicit (separable) integrators need `false`.
    fn depends_on_position(&self) -> bool {
        false
    }
}

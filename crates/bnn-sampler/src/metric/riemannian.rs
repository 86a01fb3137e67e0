//! The position-dependent Gaussian metric of manifold stochastic dynamics: `G(θ)` factored at
//! one point (dense Cholesky or diagonal-plus-low-rank), with the momentum refresh, velocity,
//! kinetic energy and Hamiltonian `H = −log p + ½ log det G + ½ pᵀG⁻¹p` it defines there
//! (Girolami & Calderhead 2011).
//!
//! It is not a [`Metric`](crate::Metric): that seam moves a `PhasePoint` whose per-point cache is
//! a `Vec<f64>` and whose values come from batched [`LogDensity`](crate::LogDensity) calls. A
//! metric here is a factor plus whatever the density keeps at the point for the derivatives it
//! is asked for next (the network's Jacobian, an opaque `Box<dyn Any>`), evaluated one position
//! at a time, and a Horowitz refresh under it draws the factor's own number of normals (`D + r`
//! for the low-rank form, not `D`). Only the generalized leapfrog
//! (`dynamics::generalized_leapfrog`) and the MSD kernel use it.

use std::any::Any;

use bnn_numerics::MetricFactor;
use rand::Rng;
use rand_distr::{Distribution, StandardNormal};

/// The metric at one position, factored, with whatever the density keeps there (its network's
/// Jacobian, say) for the two gradients of `φ` it is asked for next.
pub struct MetricAt {
    pub metric: MetricFactor,
    pub cache: Box<dyn Any + Send + Sync>,
}

impl MetricAt {
    /// `G⁻¹ p`.
    pub fn velocity(&self, momentum: &[f64]) -> Vec<f64> {
        let mut out = vec![0.0; momentum.len()];
        self.metric.solve(momentum, &mut out);
        out
    }

    /// `½ pᵀG⁻¹p`.
    pub fn kinetic_energy(&self, momentum: &[f64]) -> f64 {
        0.5 * dot(momentum, &self.velocity(momentum))
    }

    /// `H = −log p + ½ log det G + K`: the `½ log det G` term makes the θ-marginal of
    /// `e^{−H}` the target.
    pub fn hamiltonian(&self, log_density: f64, kinetic_energy: f64) -> f64 {
        -log_density + 0.5 * self.metric.log_det() + kinetic_energy
    }

    /// Horowitz's partial refresh `p ← cos α · p + sin α · n`, `n = L z ~ N(0, G)`, with
    /// `cos α = persistence`. Random numbers: the factor's `normals()` standard normals.
    pub fn refresh_momentum<R: Rng + ?Sized>(
        &self,
        momentum: &mut [f64],
        persistence: f64,
        rng: &mut R,
    ) {
        let z: Vec<f64> = (0..self.metric.normals())
            .map(|_| StandardNormal.sample(&mut *rng))
            .collect();
        let mut fresh = vec![0.0; momentum.len()];
        self.metric.correlate(&z, &mut fresh);
        let (cos, sin) = (
            persistence,
            (1.0 - persistence * persistence).max(0.0).sqrt(),
        );
        for (p, n) in momentum.iter_mut().zip(&fresh) {
            *p = cos * *p + sin * n;
        }
    }
}

/// `Σ aᵢbᵢ` in index order.
pub(crate) fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(a, b)| a * b).sum()
}

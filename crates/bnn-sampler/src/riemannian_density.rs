//! What a manifold sampler evaluates beside the log density: a position-dependent metric `G(θ)`
//! and the two gradients of `φ(θ, p) = ½ log det G(θ) + ½ pᵀG(θ)⁻¹p`.
//!
//! A [`LogDensity`](crate::LogDensity) offers one through
//! [`LogDensity::riemannian`](crate::LogDensity::riemannian). The sign convention is the
//! log density's (`log p` and `∇ log p`, not the potential `U = −log p`), and failures are
//! [`LogDensityError`]s, as for every other evaluation.

use bnn_numerics::RiemannianTerms;

use crate::log_density::LogDensityError;
use crate::metric::MetricAt;

/// A target with a position-dependent metric: what manifold stochastic dynamics evaluates at a
/// point (one position per call: the generalized leapfrog's implicit equations are solved per
/// chain, so there is no batch to share).
///
/// `φ(θ, p) = ½ log det G(θ) + ½ pᵀG(θ)⁻¹p` has two gradients of different cost: the log
/// determinant's depends on θ alone (for a Gauss–Newton metric, `O(N·K·D²)` like forming `G`),
/// the kinetic term's on θ and p (`O(N·K·D)` given `G⁻¹p`). The implicit momentum step of the
/// generalized leapfrog iterates at a fixed θ, so it pays the first once per step.
pub trait RiemannianDensity {
    fn dim(&self) -> usize;

    /// `log p(θ)` (up to a constant) with `∇ log p(θ)` in `gradient`: the same values as
    /// [`LogDensity::evaluate`](crate::LogDensity::evaluate) of the density it belongs to, in
    /// f64 whatever precision that one computes in.
    fn evaluate(&self, position: &[f64], gradient: &mut [f64]) -> Result<f64, LogDensityError>;

    /// `G(θ)` factored (an error when it is not positive definite).
    fn metric_at(&self, position: &[f64]) -> Result<MetricAt, LogDensityError>;

    /// `∇θ ½ log det G` at `point`.
    fn log_det_gradient(&self, point: &MetricAt) -> Result<Vec<f64>, LogDensityError>;

    /// `∇θ ½ pᵀG⁻¹p` at `point` for a fixed `p`, given `velocity = G⁻¹p`.
    fn kinetic_gradient(
        &self,
        point: &MetricAt,
        velocity: &[f64],
    ) -> Result<Vec<f64>, LogDensityError>;

    /// Everything at `(θ, p)` in one call: `G` factored, `G⁻¹p`, `½pᵀG⁻¹p`, `∇θ φ`.
    fn metric_terms(
        &self,
        position: &[f64],
        momentum: &[f64],
    ) -> Result<RiemannianTerms, LogDensityError> {
        let point = self.metric_at(position)?;
        let velocity = point.velocity(momentum);
        let kinetic_energy = 0.5 * crate::metric::riemannian::dot(momentum, &velocity);
        let mut gradient = self.log_det_gradient(&point)?;
        for (g, k) in gradient
            .iter_mut()
            .zip(self.kinetic_gradient(&point, &velocity)?)
        {
            *g += k;
        }
        Ok(RiemannianTerms {
            metric: point.metric,
            velocity,
            kinetic_energy,
            gradient,
        })
    }
}

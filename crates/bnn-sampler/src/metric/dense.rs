//! A dense metric through its Cholesky factor: momentum draws `p = L z ~ N(0, G)`, velocities
//! `G⁻¹p` by two triangular solves and `log det G`. The building block of the Riemannian
//! samplers (manifold stochastic dynamics evaluates `G(θ)` at each point and factors it), and a
//! constant dense mass matrix for HMC/NUTS on its own.

use bnn_numerics::Cholesky;
use rand::RngCore;
use rand_distr::{Distribution, StandardNormal};

use crate::error::SamplerError;
use crate::metric::Metric;
use crate::phase_point::PhasePoint;

/// `G = L Lᵀ` through [`bnn_numerics::Cholesky`].
#[derive(Clone, Debug, PartialEq)]
pub struct DenseMetric {
    cholesky: Cholesky,
}

impl DenseMetric {
    /// Factors the symmetric matrix `matrix` (`[dim, dim]`, row major; only its lower triangle
    /// is read). An error names the first pivot that is not positive: the matrix is not
    /// positive definite (or not finite) there.
    pub fn from_matrix(matrix: &[f64], dim: usize) -> Result<Self, SamplerError> {
        let cholesky = Cholesky::new(matrix, dim)
            .map_err(|e| SamplerError::InvalidConfig(format!("metric: {e}")))?;
        Ok(Self { cholesky })
    }

    pub fn dim(&self) -> usize {
        self.cholesky.dim()
    }

    /// `log det G`.
    pub fn log_det(&self) -> f64 {
        self.cholesky.log_det()
    }

    /// `L z` for a vector `z`: with `z ~ N(0, I)` a draw from `N(0, G)`.
    pub fn factor_times(&self, z: &[f64], out: &mut [f64]) {
        self.cholesky.factor_times(z, out);
    }

    /// `G⁻¹ b` into `out`.
    pub fn solve(&self, b: &[f64], out: &mut [f64]) {
        self.cholesky.solve(b, out);
    }
}

impl Metric for DenseMetric {
    fn dim(&self) -> usize {
        self.cholesky.dim()
    }

    /// One standard normal per coordinate in index order, then `p = L z`.
    fn sample_momentum(&self, point: &mut PhasePoint, rng: &mut dyn RngCore) {
        let z: Vec<f64> = (0..self.dim())
            .map(|_| StandardNormal.sample(&mut *rng))
            .collect();
        self.factor_times(&z, &mut point.momentum);
    }

    /// A constant metric: `½ pᵀG⁻¹p` (its `½ log det G` is a constant and left out).
    fn update_kinetic_energy(&self, point: &mut PhasePoint) {
        self.solve(&point.momentum, &mut point.velocity);
        point.kinetic_energy = 0.5
            * point
                .momentum
                .iter()
                .zip(&point.velocity)
                .map(|(p, v)| p * v)
                .sum::<f64>();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    /// A symmetric positive definite 4 × 4 matrix with correlations and unequal scales.
    fn spd() -> Vec<f64> {
        let b = [
            [2.0, 0.3, 0.0, 1.0],
            [0.0, 1.0, -0.5, 0.2],
            [0.4, 0.0, 0.5, 0.0],
            [0.0, 0.7, 0.0, 3.0],
        ];
        let mut g = vec![0.0; 16];
        for i in 0..4 {
            for j in 0..4 {
                g[i * 4 + j] =
                    (0..4).map(|k| b[i][k] * b[j][k]).sum::<f64>() + if i == j { 0.1 } else { 0.0 };
            }
        }
        g
    }

    #[test]
    fn the_factor_reproduces_the_matrix_and_solves_with_it() {
        let g = spd();
        let metric = DenseMetric::from_matrix(&g, 4).unwrap();
        let l = metric.cholesky.factor();
        for i in 0..4 {
            for j in 0..4 {
                let product: f64 = (0..4).map(|k| l[i * 4 + k] * l[j * 4 + k]).sum();
                assert!((product - g[i * 4 + j]).abs() < 1e-12, "LLᵀ[{i}, {j}]");
            }
        }
        let b = [1.0, -2.0, 0.5, 3.0];
        let mut x = [0.0; 4];
        metric.solve(&b, &mut x);
        for i in 0..4 {
            let back: f64 = (0..4).map(|j| g[i * 4 + j] * x[j]).sum();
            assert!((back - b[i]).abs() < 1e-12, "G G⁻¹b = b at {i}");
        }
        let pivots: f64 = (0..4).map(|i| l[i * 4 + i].ln()).sum::<f64>() * 2.0;
        assert!((metric.log_det() - pivots).abs() < 1e-12);
    }

    #[test]
    fn momenta_have_the_metric_as_covariance() {
        // Sample covariance of n draws: entry (i, j) has sd sqrt((G_ii G_jj + G_ij²) / n).
        let g = spd();
        let metric = DenseMetric::from_matrix(&g, 4).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let n = 40_000;
        let mut point = PhasePoint::new(4);
        let mut sums = [0.0; 16];
        for _ in 0..n {
            metric.sample_momentum(&mut point, &mut rng);
            for i in 0..4 {
                for j in 0..4 {
                    sums[i * 4 + j] += point.momentum[i] * point.momentum[j];
                }
            }
        }
        for i in 0..4 {
            for j in 0..4 {
                let estimate = sums[i * 4 + j] / n as f64;
                let se = ((g[i * 4 + i] * g[j * 4 + j] + g[i * 4 + j].powi(2)) / n as f64).sqrt();
                assert!(
                    (estimate - g[i * 4 + j]).abs() < 4.0 * se,
                    "Cov[{i}, {j}] = {estimate} vs {} (s.e. {se})",
                    g[i * 4 + j]
                );
            }
        }
        // Kinetic energy ½ pᵀG⁻¹p of the last draw, against the velocity it wrote.
        metric.update_kinetic_energy(&mut point);
        let direct: f64 = 0.5
            * point
                .momentum
                .iter()
                .zip(&point.velocity)
                .map(|(p, v)| p * v)
                .sum::<f64>();
        assert!((point.kinetic_energy - direct).abs() < 1e-12 && point.kinetic_energy > 0.0);
    }

    #[test]
    fn a_matrix_that_is_not_positive_definite_is_named() {
        let indefinite = [1.0, 2.0, 2.0, 1.0];
        let err = DenseMetric::from_matrix(&indefinite, 2)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("not positive definite") && err.contains("pivot 1"),
            "{err}"
        );
        assert!(DenseMetric::from_matrix(&[f64::NAN], 1).is_err());
        assert!(DenseMetric::from_matrix(&[1.0, 0.0, 0.0], 2).is_err());
    }
}

//! Target densities with known (or independently computable) answers.

use bnn_sampler::{for_each_row, LogDensity, LogDensityError};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};

/// Independent zero-mean normals with the given standard deviations.
pub struct IidGaussian {
    pub scales: Vec<f64>,
}

impl IidGaussian {
    /// Standard deviations log-spaced from 1e-2 to 1e2 (a single coordinate gets 1e2).
    pub fn log_spaced(dim: usize) -> Self {
        let scales = if dim == 1 {
            vec![1e2]
        } else {
            (0..dim)
                .map(|i| 10f64.powf(-2.0 + 4.0 * i as f64 / (dim - 1) as f64))
                .collect()
        };
        Self { scales }
    }
}

impl LogDensity for IidGaussian {
    fn dim(&self) -> usize {
        self.scales.len()
    }

    fn log_density_and_gradient(
        &self,
        positions: &[f64],
        values: &mut [f64],
        gradients: &mut [f64],
    ) -> Result<(), LogDensityError> {
        for_each_row(self.dim(), positions, values, gradients, |q, g| {
            let mut sum = 0.0;
            for ((x, g), s) in q.iter().zip(g.iter_mut()).zip(&self.scales) {
                let z = x / s;
                *g = -z / s;
                sum += z * z;
            }
            Ok(-0.5 * sum)
        })
    }
}

/// A bivariate normal with zero means, standard deviations `sd` and correlation `rho`.
pub struct CorrelatedGaussian {
    pub sd: [f64; 2],
    pub rho: f64,
}

impl LogDensity for CorrelatedGaussian {
    fn dim(&self) -> usize {
        2
    }

    fn log_density_and_gradient(
        &self,
        positions: &[f64],
        values: &mut [f64],
        gradients: &mut [f64],
    ) -> Result<(), LogDensityError> {
        let one_minus = 1.0 - self.rho * self.rho;
        for_each_row(2, positions, values, gradients, |q, g| {
            let (a, b) = (q[0] / self.sd[0], q[1] / self.sd[1]);
            g[0] = -(a - self.rho * b) / one_minus / self.sd[0];
            g[1] = -(b - self.rho * a) / one_minus / self.sd[1];
            Ok(-0.5 * (a * a - 2.0 * self.rho * a * b + b * b) / one_minus)
        })
    }
}

/// A one-dimensional mixture of normals.
pub struct GaussianMixture {
    pub weights: Vec<f64>,
    pub means: Vec<f64>,
    pub sds: Vec<f64>,
}

impl LogDensity for GaussianMixture {
    fn dim(&self) -> usize {
        1
    }

    fn log_density_and_gradient(
        &self,
        positions: &[f64],
        values: &mut [f64],
        gradients: &mut [f64],
    ) -> Result<(), LogDensityError> {
        for_each_row(1, positions, values, gradients, |q, g| {
            let x = q[0];
            let terms: Vec<f64> = (0..self.weights.len())
                .map(|k| {
                    let z = (x - self.means[k]) / self.sds[k];
                    self.weights[k].ln() - self.sds[k].ln() - 0.5 * z * z
                })
                .collect();
            let max = terms.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let total: f64 = terms.iter().map(|t| (t - max).exp()).sum();
            let v = max + total.ln();
            g[0] = (0..self.weights.len())
                .map(|k| (terms[k] - v).exp() * -(x - self.means[k]) / (self.sds[k] * self.sds[k]))
                .sum();
            Ok(v)
        })
    }
}

/// Neal's funnel: `v ~ N(0, 3²)`, `x_i | v ~ N(0, e^v)` for the other coordinates, not
/// reparameterized, so the neck needs step sizes far smaller than the mouth.
pub struct Funnel {
    pub dim: usize,
}

impl LogDensity for Funnel {
    fn dim(&self) -> usize {
        self.dim
    }

    fn log_density_and_gradient(
        &self,
        positions: &[f64],
        values: &mut [f64],
        gradients: &mut [f64],
    ) -> Result<(), LogDensityError> {
        let d = self.dim;
        let n = (d - 1) as f64;
        for_each_row(d, positions, values, gradients, |q, g| {
            let v = q[0];
            let inv = (-v).exp();
            let sum_sq: f64 = q[1..].iter().map(|x| x * x).sum();
            g[0] = -v / 9.0 + 0.5 * inv * sum_sq - 0.5 * n;
            for (gi, x) in g[1..].iter_mut().zip(&q[1..]) {
                *gi = -x * inv;
            }
            Ok(-v * v / 18.0 - 0.5 * inv * sum_sq - 0.5 * n * v)
        })
    }
}

/// Bayesian logistic regression with an intercept and `N(0, prior_sd²)` priors, on synthetic data.
pub struct LogisticRegression {
    /// Row-major `[n, k]` design matrix, first column all ones.
    pub x: Vec<f64>,
    pub y: Vec<f64>,
    pub k: usize,
    pub prior_sd: f64,
}

impl LogisticRegression {
    /// `n` observations of `k - 1` standard-normal covariates plus an intercept, labels drawn
    /// from the model with coefficients `beta`.
    pub fn synthetic(n: usize, beta: &[f64], prior_sd: f64, seed: u64) -> Self {
        let k = beta.len();
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut x = Vec::with_capacity(n * k);
        let mut y = Vec::with_capacity(n);
        for _ in 0..n {
            let row: Vec<f64> = (0..k)
                .map(|j| {
                    if j == 0 {
                        1.0
                    } else {
                        StandardNormal.sample(&mut rng)
                    }
                })
                .collect();
            let eta: f64 = row.iter().zip(beta).map(|(a, b)| a * b).sum();
            y.push(if rng.random::<f64>() < 1.0 / (1.0 + (-eta).exp()) {
                1.0
            } else {
                0.0
            });
            x.extend(row);
        }
        Self { x, y, k, prior_sd }
    }
}

impl LogDensity for LogisticRegression {
    fn dim(&self) -> usize {
        self.k
    }

    fn log_density_and_gradient(
        &self,
        positions: &[f64],
        values: &mut [f64],
        gradients: &mut [f64],
    ) -> Result<(), LogDensityError> {
        let k = self.k;
        let precision = 1.0 / (self.prior_sd * self.prior_sd);
        for_each_row(k, positions, values, gradients, |beta, g| {
            let mut lp = 0.0;
            for (gj, b) in g.iter_mut().zip(beta) {
                *gj = -precision * b;
                lp -= 0.5 * precision * b * b;
            }
            for (row, y) in self.x.chunks_exact(k).zip(&self.y) {
                let eta: f64 = row.iter().zip(beta).map(|(a, b)| a * b).sum();
                // log σ(η) = -log(1 + e^{-η}), computed stably for both signs.
                let log1p_exp = if eta > 0.0 {
                    eta + (-eta).exp().ln_1p()
                } else {
                    eta.exp().ln_1p()
                };
                lp += y * eta - log1p_exp;
                let p = 1.0 / (1.0 + (-eta).exp());
                for (gj, a) in g.iter_mut().zip(row) {
                    *gj += (y - p) * a;
                }
            }
            Ok(lp)
        })
    }
}

/// Haario's banana: `x₀ ~ N(0, 1)`, `x₁ = y + b (x₀² − 1)` with `y ~ N(0, 1)`; E[x₁] = 0 and
/// Var[x₁] = 1 + 2b².
pub struct Banana {
    pub b: f64,
}

impl LogDensity for Banana {
    fn dim(&self) -> usize {
        2
    }

    fn log_density_and_gradient(
        &self,
        positions: &[f64],
        values: &mut [f64],
        gradients: &mut [f64],
    ) -> Result<(), LogDensityError> {
        for_each_row(2, positions, values, gradients, |q, g| {
            let y = q[1] - self.b * (q[0] * q[0] - 1.0);
            g[0] = -q[0] + y * 2.0 * self.b * q[0];
            g[1] = -y;
            Ok(-0.5 * q[0] * q[0] - 0.5 * y * y)
        })
    }
}

/// A funnel whose neck NUTS can still reach: `v ~ N(0, 1.5²)`, `x_i | v ~ N(0, e^v)`, so
/// E[x_i²] = E[e^v] = e^{1.5²/2}.
pub struct MildFunnel {
    pub dim: usize,
}

pub const MILD_FUNNEL_SD: f64 = 1.5;

impl LogDensity for MildFunnel {
    fn dim(&self) -> usize {
        self.dim
    }

    fn log_density_and_gradient(
        &self,
        positions: &[f64],
        values: &mut [f64],
        gradients: &mut [f64],
    ) -> Result<(), LogDensityError> {
        let n = (self.dim - 1) as f64;
        let var = MILD_FUNNEL_SD * MILD_FUNNEL_SD;
        for_each_row(self.dim, positions, values, gradients, |q, g| {
            let v = q[0];
            let inv = (-v).exp();
            let sum_sq: f64 = q[1..].iter().map(|x| x * x).sum();
            g[0] = -v / var + 0.5 * inv * sum_sq - 0.5 * n;
            for (gi, x) in g[1..].iter_mut().zip(&q[1..]) {
                *gi = -x * inv;
            }
            Ok(-v * v / (2.0 * var) - 0.5 * inv * sum_sq - 0.5 * n * v)
        })
    }
}

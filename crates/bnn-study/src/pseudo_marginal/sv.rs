//! The stochastic volatility model of the HNN report (§4.1, after Takaishi 2009) as a
//! pseudo-marginal target over `[θ, u]`.
//!
//! `y_t = ε_t exp(h_t / 2)`, `h_{t+1} = μ + φ (h_t − μ) + σ η_{t+1}`, `h_1 ~ N(μ, σ² / (1 − φ²))`,
//! `ε_t, η_t ~ N(0, 1)`, t = 1..T. `θ = (μ, z = atanh φ, s = log σ)` with priors (ours, stated):
//! - `μ ~ N(0, 10²)`;
//! - `(φ + 1) / 2 ~ Beta(20, 1.5)` (Kim, Shephard & Chib 1998, §2.2); with `(φ + 1) / 2 =
//!   σ(2z)` and the Jacobian `2 σ(2z)(1 − σ(2z))`, `log p(z) = 20 log σ(2z) + 1.5 log(1 − σ(2z))`
//!   up to a constant;
//! - `log σ ~ N(−1, 1)` (σ's median 0.37; no Jacobian, the prior is on s itself).
//!
//! The likelihood `p(y | θ)` integrates over the path `h_{1:T}`; it is estimated by importance
//! sampling with N whole paths from the AR(1) prior, `h^(l) = μ + d^(l)`, `d_1 = σ cosh(z) u_{l1}`
//! (`1/√(1 − φ²) = cosh z`), `d_{t+1} = φ d_t + σ u_{l,t+1}`:
//! `p̂ = (1/N) Σ_l Π_t N(y_t; 0, exp(h_t^(l)))`, unbiased for `p(y | θ)` and smooth in θ and u.
//! The weights' variance grows with T (prior paths ignore the data), so N must grow with T to
//! keep `Var log p̂` near 1–2, where pseudo-marginal samplers work best (Doucet et al. 2015).
//! Gradients by hand: one backward pass through the AR recursion per path, O(N·T).

use super::glmm::softplus;
use bnn_sampler::{LogDensity, LogDensityError};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};

/// True parameters the data are simulated from (ours: the report states none).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SvTruth {
    pub mu: f64,
    pub phi: f64,
    pub sigma: f64,
}

impl Default for SvTruth {
    fn default() -> Self {
        Self {
            mu: -1.0,
            phi: 0.95,
            sigma: 0.25,
        }
    }
}

impl SvTruth {
    /// θ in the sampler's coordinates `(μ, atanh φ, log σ)`.
    pub fn theta(&self) -> Vec<f64> {
        vec![self.mu, self.phi.atanh(), self.sigma.ln()]
    }
}

/// Names of θ's coordinates, in order.
pub const SV_THETA_NAMES: [&str; 3] = ["mu", "atanh_phi", "log_sigma"];

const MU_PRIOR_SD: f64 = 10.0;
const PHI_PRIOR: (f64, f64) = (20.0, 1.5);
const LOG_SIGMA_PRIOR: (f64, f64) = (-1.0, 1.0);
const HALF_LOG_2PI: f64 = 0.918_938_533_204_672_8;

/// The SV model as a pseudo-marginal target over `[θ, u]`, `u` of length `N·T` (path-major:
/// `u[l·T + t]`).
#[derive(Clone, Debug)]
pub struct StochasticVolatility {
    /// Importance-sampled paths N.
    pub particles: usize,
    y: Vec<f64>,
}

impl StochasticVolatility {
    pub const THETA_DIM: usize = 3;

    /// Returns of length `steps` simulated from `truth` (h_1 from its stationary law), seeded.
    pub fn simulate(truth: &SvTruth, steps: usize, particles: usize, seed: u64) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut normal = || -> f64 { StandardNormal.sample(&mut rng) };
        let mut h = truth.mu + truth.sigma / (1.0 - truth.phi * truth.phi).sqrt() * normal();
        let mut y = Vec::with_capacity(steps);
        for _ in 0..steps {
            y.push(normal() * (0.5 * h).exp());
            h = truth.mu + truth.phi * (h - truth.mu) + truth.sigma * normal();
        }
        Self { particles, y }
    }

    /// A model of given returns.
    pub fn from_returns(y: Vec<f64>, particles: usize) -> Self {
        Self { particles, y }
    }

    pub fn steps(&self) -> usize {
        self.y.len()
    }

    pub fn returns(&self) -> &[f64] {
        &self.y
    }

    /// `log p(θ)` and its gradient (all three priors, with φ's Jacobian).
    fn log_prior(theta: &[f64], g: &mut [f64]) -> f64 {
        let (mu, z, s) = (theta[0], theta[1], theta[2]);
        let x = 1.0 / (1.0 + (-2.0 * z).exp());
        let (a, b) = PHI_PRIOR;
        let (m, sd) = LOG_SIGMA_PRIOR;
        g[0] = -mu / (MU_PRIOR_SD * MU_PRIOR_SD);
        g[1] = 2.0 * (a * (1.0 - x) - b * x);
        g[2] = -(s - m) / (sd * sd);
        -0.5 * (mu / MU_PRIOR_SD).powi(2)
            - a * softplus(-2.0 * z)
            - b * softplus(2.0 * z)
            - 0.5 * ((s - m) / sd).powi(2)
    }

    /// `log p̂(y | θ, u)` and its gradient into `g` (θ block `g[..3]`, u block `g[3..]`,
    /// both overwritten).
    pub fn log_likelihood_estimate(&self, theta: &[f64], u: &[f64], g: &mut [f64]) -> f64 {
        let (steps, big_n) = (self.steps(), self.particles);
        let (mu, z, s) = (theta[0], theta[1], theta[2]);
        let (phi, sigma) = (z.tanh(), s.exp());
        let first_sd = sigma * z.cosh();
        g.iter_mut().for_each(|v| *v = 0.0);
        let mut log_w = vec![0.0; big_n];
        // Per path: ∂w/∂θ (the softmax weights are known only after all paths).
        let mut d_theta = vec![[0.0; 3]; big_n];
        let mut d = vec![0.0; steps];
        let mut a = vec![0.0; steps];
        for l in 0..big_n {
            let ul = &u[l * steps..(l + 1) * steps];
            let mut w = 0.0;
            for t in 0..steps {
                d[t] = if t == 0 {
                    first_sd * ul[0]
                } else {
                    phi * d[t - 1] + sigma * ul[t]
                };
                let h = mu + d[t];
                let scaled = self.y[t] * self.y[t] * (-h).exp();
                w += -HALF_LOG_2PI - 0.5 * h - 0.5 * scaled;
                a[t] = -0.5 + 0.5 * scaled;
            }
            log_w[l] = w;
            // Backward: b_t = ∂w/∂d_t through every later step, b_t = a_t + φ b_{t+1}.
            let gu = &mut g[Self::THETA_DIM + l * steps..Self::THETA_DIM + (l + 1) * steps];
            let (mut b, mut d_mu, mut d_phi, mut d_s, mut d_z) = (0.0, 0.0, 0.0, 0.0, 0.0);
            for t in (0..steps).rev() {
                b = a[t] + phi * b;
                d_mu += a[t];
                if t == 0 {
                    gu[0] = first_sd * b;
                    d_s += b * d[0];
                    // z also enters d_1 through cosh z: ∂d_1/∂z = σ sinh(z) u_1 = φ d_1.
                    d_z += b * phi * d[0];
                } else {
                    gu[t] = sigma * b;
                    d_s += b * sigma * ul[t];
                    d_phi += b * d[t - 1];
                }
            }
            // dφ/dz = 1 − φ².
            d_theta[l] = [d_mu, (1.0 - phi * phi) * d_phi + d_z, d_s];
        }
        let top = log_w.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let sum: f64 = log_w.iter().map(|w| (w - top).exp()).sum();
        for l in 0..big_n {
            let omega = (log_w[l] - top).exp() / sum;
            for (gk, d) in g[..Self::THETA_DIM].iter_mut().zip(d_theta[l]) {
                *gk += omega * d;
            }
            for gu in &mut g[Self::THETA_DIM + l * steps..Self::THETA_DIM + (l + 1) * steps] {
                *gu *= omega;
            }
        }
        top + (sum / big_n as f64).ln()
    }

    /// `log π(θ, u)` and its gradient at one point.
    fn point(&self, x: &[f64], g: &mut [f64]) -> f64 {
        let (theta, u) = x.split_at(Self::THETA_DIM);
        let estimate = self.log_likelihood_estimate(theta, u, g);
        let mut prior_gradient = [0.0; 3];
        let prior = Self::log_prior(theta, &mut prior_gradient);
        for (gk, p) in g.iter_mut().zip(prior_gradient) {
            *gk += p;
        }
        for (gu, uu) in g[Self::THETA_DIM..].iter_mut().zip(u) {
            *gu -= uu;
        }
        prior + estimate - 0.5 * u.iter().map(|v| v * v).sum::<f64>()
    }
}

impl LogDensity for StochasticVolatility {
    fn dim(&self) -> usize {
        Self::THETA_DIM + self.steps() * self.particles
    }

    fn log_density_and_gradient(
        &self,
        positions: &[f64],
        values: &mut [f64],
        gradients: &mut [f64],
    ) -> Result<(), LogDensityError> {
        bnn_sampler::for_each_row(self.dim(), positions, values, gradients, |x, g| {
            Ok(self.point(x, g))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn normals(rng: &mut ChaCha8Rng, n: usize) -> Vec<f64> {
        (0..n).map(|_| StandardNormal.sample(rng)).collect()
    }

    /// Every θ coordinate and u at the start, middle and end of the first and last paths against
    /// central differences, at random points around the truth.
    #[test]
    fn gradient_matches_finite_differences() {
        let sv = StochasticVolatility::simulate(&SvTruth::default(), 9, 4, 3);
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        for _ in 0..3 {
            let mut x: Vec<f64> = SvTruth::default()
                .theta()
                .iter()
                .zip(normals(&mut rng, 3))
                .map(|(t, e)| t + 0.3 * e)
                .collect();
            x.extend(normals(&mut rng, sv.steps() * sv.particles));
            let mut g = vec![0.0; sv.dim()];
            sv.evaluate(&x, &mut g).unwrap();
            let k = StochasticVolatility::THETA_DIM;
            let last = k + (sv.particles - 1) * sv.steps();
            for i in [
                0,
                1,
                2,
                k,
                k + 1,
                k + 4,
                k + 8,
                last,
                last + 4,
                sv.dim() - 1,
            ] {
                let h = 1e-6;
                let (mut up, mut down) = (x.clone(), x.clone());
                up[i] += h;
                down[i] -= h;
                let numeric = (sv.value(&up).unwrap() - sv.value(&down).unwrap()) / (2.0 * h);
                assert!(
                    (numeric - g[i]).abs() < 1e-5 * (1.0 + numeric.abs()),
                    "coordinate {i}: {} vs {numeric}",
                    g[i]
                );
            }
        }
    }

    /// φ's prior carries the Jacobian of (φ + 1)/2 = x = σ(2z), dx/dz = 2x(1 − x): its
    /// unnormalized density x^20 (1 − x)^1.5 integrates over z to B(20, 1.5) / 2.
    #[test]
    fn phi_prior_has_the_beta_mass() {
        let (lo, hi, cells) = (-3.0, 12.0, 200_000);
        let dz = (hi - lo) / cells as f64;
        let mut g = [0.0; 3];
        // The μ and log σ terms are 0 at μ = 0, log σ = −1.
        let mass: f64 = (0..cells)
            .map(|c| {
                StochasticVolatility::log_prior(&[0.0, lo + (c as f64 + 0.5) * dz, -1.0], &mut g)
                    .exp()
                    * dz
            })
            .sum();
        let half_beta = 0.5 * (ln_gamma(20.0) + ln_gamma(1.5) - ln_gamma(21.5)).exp();
        assert!(
            (mass / half_beta - 1.0).abs() < 1e-6,
            "mass {mass} vs B(20, 1.5) / 2 = {half_beta}"
        );
    }

    /// Stirling series for ln Γ(x), x ≥ 1 (shifted up by 10 for accuracy ~1e-12).
    fn ln_gamma(x: f64) -> f64 {
        let shift: f64 = (0..10).map(|i| (x + i as f64).ln()).sum();
        let z = x + 10.0;
        (z - 0.5) * z.ln() - z + 0.5 * (2.0 * std::f64::consts::PI).ln() + 1.0 / (12.0 * z)
            - 1.0 / (360.0 * z.powi(3))
            + 1.0 / (1260.0 * z.powi(5))
            - shift
    }

    /// `p(y | θ)` by the forward recursion on a fine grid of h (midpoint rule).
    fn likelihood_by_quadrature(y: &[f64], mu: f64, phi: f64, sigma: f64) -> f64 {
        let stationary = sigma / (1.0 - phi * phi).sqrt();
        let cells = 1500;
        let (lo, hi) = (mu - 9.0 * stationary, mu + 9.0 * stationary);
        let dh = (hi - lo) / cells as f64;
        let grid: Vec<f64> = (0..cells).map(|c| lo + (c as f64 + 0.5) * dh).collect();
        let normal =
            |x: f64, m: f64, s: f64| (-0.5 * ((x - m) / s).powi(2) - HALF_LOG_2PI).exp() / s;
        let observe = |h: f64, yt: f64| normal(yt, 0.0, (0.5 * h).exp());
        let mut alpha: Vec<f64> = grid
            .iter()
            .map(|&h| normal(h, mu, stationary) * observe(h, y[0]) * dh)
            .collect();
        for &yt in &y[1..] {
            alpha = grid
                .iter()
                .map(|&next| {
                    grid.iter()
                        .zip(&alpha)
                        .map(|(&h, a)| a * normal(next, mu + phi * (h - mu), sigma))
                        .sum::<f64>()
                        * observe(next, yt)
                        * dh
                })
                .collect();
        }
        alpha.iter().sum()
    }

    /// The estimator is unbiased: over many u, the mean of p̂ (N = 4 paths) on a T = 3 series
    /// matches the quadrature likelihood within 5 Monte Carlo standard errors, at the truth and
    /// at a point away from it. A wrong h_1 law or AR step would bias it by far more.
    #[test]
    fn estimator_is_unbiased() {
        let truth = SvTruth::default();
        let sv = StochasticVolatility::from_returns(vec![0.9, -0.2, 1.4], 4);
        for theta in [truth.theta(), vec![-0.5, 0.5f64.atanh(), 0.6f64.ln()]] {
            let exact =
                likelihood_by_quadrature(sv.returns(), theta[0], theta[1].tanh(), theta[2].exp());
            let mut rng = ChaCha8Rng::seed_from_u64(21);
            let draws = 40_000;
            let mut g = vec![0.0; sv.dim()];
            let estimates: Vec<f64> = (0..draws)
                .map(|_| {
                    sv.log_likelihood_estimate(&theta, &normals(&mut rng, 12), &mut g)
                        .exp()
                })
                .collect();
            let mean = estimates.iter().sum::<f64>() / draws as f64;
            let sd = (estimates.iter().map(|e| (e - mean).powi(2)).sum::<f64>()
                / (draws - 1) as f64)
                .sqrt();
            let se = sd / (draws as f64).sqrt();
            assert!(
                (mean - exact).abs() < 5.0 * se,
                "θ {theta:?}: E[p̂] = {mean} ± {se}, quadrature {exact}"
            );
            assert!(
                se < 0.05 * exact,
                "the test must be able to see a 25% bias: se {se}, p {exact}"
            );
        }
    }

    /// More particles shrink Var log p̂ about in proportion (for a not-too-noisy estimator), and
    /// data simulated from the truth have the stationary scale.
    #[test]
    fn more_particles_reduce_the_variance() {
        let truth = SvTruth::default();
        let y = StochasticVolatility::simulate(&truth, 50, 1, 8)
            .returns()
            .to_vec();
        let few = StochasticVolatility::from_returns(y.clone(), 32);
        let many = StochasticVolatility::from_returns(y, 512);
        let v_few = super::super::sv_study::log_estimate_variance(&few, &truth.theta(), 200, 1);
        let v_many = super::super::sv_study::log_estimate_variance(&many, &truth.theta(), 200, 2);
        assert!(
            v_many < 0.5 * v_few,
            "Var log p̂: N = 32 {v_few}, N = 512 {v_many}"
        );
    }
}

//! The benchmark densities of Dhulipala, Che & Shields (2023), with analytic gradients.

use std::fmt;
use std::str::FromStr;

use bnn_model::UnknownName;
use bnn_sampler::{for_each_row, LogDensity, LogDensityError};

/// One of the paper's targets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Benchmark {
    /// ½ N(−1, 0.35²) + ½ N(1, 0.35²): two separated modes, where an HNN trained on trajectories
    /// that stay in one mode degenerates.
    GaussianMixture1d,
    /// Rosenbrock in 3-D, `U = Σ [100(q_{i+1} − q_i²)² + (1 − q_i)²] / 20`.
    Rosenbrock3d,
    /// Neal's funnel in 2-D, normalized: `q₁ ~ N(0, 3²)`, `q₂ | q₁ ~ N(0, e^{q₁})`.
    Funnel2d,
    /// A 5-D Gaussian with variances 0.01, 0.1, 1, 10, 100.
    Gaussian5d,
    /// Rosenbrock in 10-D (same form as the 3-D one).
    Rosenbrock10d,
    /// The discretized Allen–Cahn field on 25 interior grid points.
    AllenCahn25d,
}

impl Benchmark {
    pub const ALL: [Benchmark; 6] = [
        Benchmark::GaussianMixture1d,
        Benchmark::Rosenbrock3d,
        Benchmark::Funnel2d,
        Benchmark::Gaussian5d,
        Benchmark::Rosenbrock10d,
        Benchmark::AllenCahn25d,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Benchmark::GaussianMixture1d => "mixture-1d",
            Benchmark::Rosenbrock3d => "rosenbrock-3d",
            Benchmark::Funnel2d => "funnel-2d",
            Benchmark::Gaussian5d => "gaussian-5d",
            Benchmark::Rosenbrock10d => "rosenbrock-10d",
            Benchmark::AllenCahn25d => "allen-cahn-25d",
        }
    }

    pub fn dim(self) -> usize {
        match self {
            Benchmark::GaussianMixture1d => 1,
            Benchmark::Rosenbrock3d => 3,
            Benchmark::Funnel2d => 2,
            Benchmark::Gaussian5d => 5,
            Benchmark::Rosenbrock10d => 10,
            Benchmark::AllenCahn25d => ALLEN_CAHN_POINTS,
        }
    }

    /// Where every chain and the training trajectories start.
    pub fn start(self) -> Vec<f64> {
        match self {
            Benchmark::GaussianMixture1d => vec![1.0],
            // The Rosenbrock mode (1, 1, …); the funnel's and the Gaussian's centre.
            Benchmark::Rosenbrock3d | Benchmark::Rosenbrock10d => vec![1.0; self.dim()],
            Benchmark::Funnel2d | Benchmark::Gaussian5d => vec![0.0; self.dim()],
            // One of the two symmetric minima lies near ±1 in the interior: start from 0 exactly
            // between them, so the chain picks its side itself.
            Benchmark::AllenCahn25d => vec![0.0; self.dim()],
        }
    }

    /// The target's log density.
    pub fn density(self) -> BenchmarkDensity {
        BenchmarkDensity { benchmark: self }
    }
}

impl fmt::Display for Benchmark {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Benchmark {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, UnknownName> {
        Benchmark::ALL
            .into_iter()
            .find(|b| b.name() == s)
            .ok_or_else(|| UnknownName::new("benchmark", s, Benchmark::ALL.map(Benchmark::name)))
    }
}

/// Grid points of the Allen–Cahn field (the paper's 25-D case).
pub const ALLEN_CAHN_POINTS: usize = 25;
/// Interface width `a` of the Allen–Cahn energy.
pub const ALLEN_CAHN_WIDTH: f64 = 0.1;
/// Inverse temperature β of the Allen–Cahn energy.
pub const ALLEN_CAHN_BETA: f64 = 1.0;

/// Mixture modes, sd and the Gaussian's variances.
const MIXTURE_MEANS: [f64; 2] = [-1.0, 1.0];
const MIXTURE_SD: f64 = 0.35;
const GAUSSIAN_VARIANCES: [f64; 5] = [0.01, 0.1, 1.0, 10.0, 100.0];
const FUNNEL_SD: f64 = 3.0;

/// A benchmark as a [`LogDensity`] (unnormalized).
#[derive(Clone, Copy, Debug)]
pub struct BenchmarkDensity {
    benchmark: Benchmark,
}

impl BenchmarkDensity {
    /// `log p(q)` and `∇ log p(q)` at one position.
    fn point(&self, q: &[f64], g: &mut [f64]) -> f64 {
        match self.benchmark {
            Benchmark::GaussianMixture1d => {
                // log Σ_k ½ exp(−(q − μ_k)²/2s²), by log-sum-exp.
                let exponents =
                    MIXTURE_MEANS.map(|m| -(q[0] - m).powi(2) / (2.0 * MIXTURE_SD * MIXTURE_SD));
                let top = exponents[0].max(exponents[1]);
                let weights = exponents.map(|e| (e - top).exp());
                let total = weights[0] + weights[1];
                g[0] = MIXTURE_MEANS
                    .iter()
                    .zip(weights)
                    .map(|(m, w)| -w * (q[0] - m) / (MIXTURE_SD * MIXTURE_SD))
                    .sum::<f64>()
                    / total;
                top + (0.5 * total).ln()
            }
            Benchmark::Rosenbrock3d | Benchmark::Rosenbrock10d => {
                g.iter_mut().for_each(|x| *x = 0.0);
                let mut potential = 0.0;
                for i in 0..q.len() - 1 {
                    let ridge = q[i + 1] - q[i] * q[i];
                    let valley = 1.0 - q[i];
                    potential += (100.0 * ridge * ridge + valley * valley) / 20.0;
                    // ∂U/∂q_i and ∂U/∂q_{i+1}; the gradient of log p is their negative.
                    g[i] -= (-400.0 * ridge * q[i] - 2.0 * valley) / 20.0;
                    g[i + 1] -= 200.0 * ridge / 20.0;
                }
                -potential
            }
            Benchmark::Funnel2d => {
                let (level, x) = (q[0], q[1]);
                let precision = (-level).exp();
                g[0] = -level / (FUNNEL_SD * FUNNEL_SD) + 0.5 * x * x * precision - 0.5;
                g[1] = -x * precision;
                -0.5 * level * level / (FUNNEL_SD * FUNNEL_SD)
                    - 0.5 * x * x * precision
                    - 0.5 * level
            }
            Benchmark::Gaussian5d => {
                let mut sum = 0.0;
                for ((x, g), v) in q.iter().zip(g.iter_mut()).zip(GAUSSIAN_VARIANCES) {
                    *g = -x / v;
                    sum += x * x / v;
                }
                -0.5 * sum
            }
            Benchmark::AllenCahn25d => allen_cahn(q, g),
        }
    }
}

/// `log p = −β [ (a/2) Σ_{i=1}^{n+1} ((u_i − u_{i−1})/h)² h + (1/4a) Σ_{i=1}^{n} (1 − u_i²)² h ]`,
/// `u_0 = u_{n+1} = 0`, `h = 1/(n+1)`: a finite-difference Allen–Cahn energy (the Ginzburg–Landau
/// functional of the stochastic Allen–Cahn equation) with a = 0.1 and β = 1. (With β = 20 the
/// all-positive and all-negative fields sit about 48 nats below the barrier between them: no
/// sampler here crosses it, and a marginal test then only says which well a chain fell into.)
fn allen_cahn(u: &[f64], g: &mut [f64]) -> f64 {
    let n = u.len();
    let h = 1.0 / (n + 1) as f64;
    let (a, beta) = (ALLEN_CAHN_WIDTH, ALLEN_CAHN_BETA);
    let at = |i: isize| {
        if i < 0 || i as usize >= n {
            0.0
        } else {
            u[i as usize]
        }
    };
    let mut energy = 0.0;
    for i in 0..=n as isize {
        let slope = (at(i) - at(i - 1)) / h;
        energy += 0.5 * a * slope * slope * h;
    }
    for (i, (&x, g)) in u.iter().zip(g.iter_mut()).enumerate() {
        let well = 1.0 - x * x;
        energy += well * well * h / (4.0 * a);
        let i = i as isize;
        // ∂/∂u_i of the gradient term: a (2u_i − u_{i−1} − u_{i+1}) / h; of the wells: −x(1 − x²) h / a.
        let d_energy = a * (2.0 * x - at(i - 1) - at(i + 1)) / h - x * well * h / a;
        *g = -beta * d_energy;
    }
    -beta * energy
}

impl LogDensity for BenchmarkDensity {
    fn dim(&self) -> usize {
        self.benchmark.dim()
    }

    fn log_density_and_gradient(
        &self,
        positions: &[f64],
        values: &mut [f64],
        gradients: &mut [f64],
    ) -> Result<(), LogDensityError> {
        for_each_row(self.dim(), positions, values, gradients, |q, g| {
            Ok(self.point(q, g))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every analytic gradient against central differences of the log density, at a few points.
    #[test]
    fn gradients_match_finite_differences() {
        for benchmark in Benchmark::ALL {
            let density = benchmark.density();
            let dim = benchmark.dim();
            for shift in [0.0, 0.37, -0.81] {
                let q: Vec<f64> = (0..dim)
                    .map(|i| shift + 0.13 * i as f64 - 0.2 * (i % 3) as f64)
                    .collect();
                let mut g = vec![0.0; dim];
                density.evaluate(&q, &mut g).unwrap();
                for i in 0..dim {
                    let h = 1e-6;
                    let (mut up, mut down) = (q.clone(), q.clone());
                    up[i] += h;
                    down[i] -= h;
                    let numeric =
                        (density.value(&up).unwrap() - density.value(&down).unwrap()) / (2.0 * h);
                    let tolerance = 1e-5 * (1.0 + numeric.abs());
                    assert!(
                        (numeric - g[i]).abs() < tolerance,
                        "{benchmark} at {q:?}, coordinate {i}: {} vs {numeric}",
                        g[i]
                    );
                }
            }
        }
    }

    #[test]
    fn names_round_trip() {
        for benchmark in Benchmark::ALL {
            assert_eq!(benchmark.name().parse::<Benchmark>().unwrap(), benchmark);
        }
        assert!("banana".parse::<Benchmark>().is_err());
    }
}

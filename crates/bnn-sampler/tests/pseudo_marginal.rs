//! Pseudo-marginal NUTS and HMC (Alenlöv, Doucet & Lindsten 2021) on a Gaussian random-effects
//! model whose marginal likelihood is known in closed form: the θ-marginal of the extended target
//! must be the exact posterior (computed here by quadrature), whatever the noise of the
//! importance-sampling estimator; and one step of either scheme is reversible.

mod support;

use bnn_sampler::{
    chain_rng, DiagonalMassMatrix, DualAveraging, HmcConfig, Integrator, Kernel, KernelState,
    LogDensity, LogDensityError, NutsConfig, PhasePoint, PseudoMarginalLeapfrog,
    PseudoMarginalScheme, StepParams,
};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};
use support::{mcse_mean, mcse_multiplier, mcse_sd, pooled_mean, pooled_sd, Checks};

/// `y_i ~ N(x_i, σ²)`, `x_i ~ N(μ, τ²)`, i = 1..T; θ = (μ, log τ) with N(0, 2²) and N(0, 1)
/// priors. The likelihood of subject i is estimated by importance sampling from the random
/// effect's prior, `x_il = μ + τ u_il`, `p̂_i = (1/N) Σ_l N(y_i; x_il, σ²)`, unbiased for the exact
/// `N(y_i; μ, σ² + τ²)`.
struct RandomEffects {
    y: Vec<f64>,
    sigma: f64,
    samples: usize,
}

const PRIOR_SD_MU: f64 = 2.0;

fn normal(rng: &mut ChaCha8Rng) -> f64 {
    StandardNormal.sample(rng)
}

impl RandomEffects {
    fn simulate(subjects: usize, samples: usize, seed: u64) -> Self {
        let (mu, tau, sigma) = (1.0, 1.0, 0.5);
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let y = (0..subjects)
            .map(|_| {
                let x = mu + tau * normal(&mut rng);
                x + sigma * normal(&mut rng)
            })
            .collect();
        Self { y, sigma, samples }
    }

    fn log_prior(mu: f64, log_tau: f64) -> f64 {
        -0.5 * (mu / PRIOR_SD_MU).powi(2) - 0.5 * log_tau * log_tau
    }

    /// The exact log posterior of θ up to a constant (the marginal likelihood in closed form).
    fn exact_log_posterior(&self, mu: f64, log_tau: f64) -> f64 {
        let variance = self.sigma * self.sigma + (2.0 * log_tau).exp();
        Self::log_prior(mu, log_tau)
            - self
                .y
                .iter()
                .map(|y| 0.5 * (y - mu).powi(2) / variance + 0.5 * variance.ln())
                .sum::<f64>()
    }

    /// Posterior means and sds of μ and log τ by quadrature on a fine grid.
    fn exact_moments(&self) -> [(f64, f64); 2] {
        let (n, mu_range, tau_range) = (500, (-3.0, 5.0), (-6.0, 3.0));
        let step = |r: (f64, f64)| (r.1 - r.0) / n as f64;
        let (dm, dt) = (step(mu_range), step(tau_range));
        let mut cells = Vec::with_capacity(n * n);
        for i in 0..n {
            for j in 0..n {
                let (mu, log_tau) = (
                    mu_range.0 + (i as f64 + 0.5) * dm,
                    tau_range.0 + (j as f64 + 0.5) * dt,
                );
                cells.push((mu, log_tau, self.exact_log_posterior(mu, log_tau)));
            }
        }
        let top = cells.iter().map(|c| c.2).fold(f64::NEG_INFINITY, f64::max);
        let weights: Vec<f64> = cells.iter().map(|c| (c.2 - top).exp()).collect();
        let total: f64 = weights.iter().sum();
        let moment = |f: &dyn Fn(&(f64, f64, f64)) -> f64| {
            cells
                .iter()
                .zip(&weights)
                .map(|(c, w)| w * f(c))
                .sum::<f64>()
                / total
        };
        let (m0, m1) = (moment(&|c| c.0), moment(&|c| c.1));
        [
            (m0, (moment(&|c| c.0 * c.0) - m0 * m0).sqrt()),
            (m1, (moment(&|c| c.1 * c.1) - m1 * m1).sqrt()),
        ]
    }
}

impl LogDensity for RandomEffects {
    fn dim(&self) -> usize {
        2 + self.y.len() * self.samples
    }

    fn log_density_and_gradient(
        &self,
        positions: &[f64],
        values: &mut [f64],
        gradients: &mut [f64],
    ) -> Result<(), LogDensityError> {
        let d = self.dim();
        let precision = 1.0 / (self.sigma * self.sigma);
        for ((x, g), value) in positions
            .chunks_exact(d)
            .zip(gradients.chunks_exact_mut(d))
            .zip(values.iter_mut())
        {
            let (mu, log_tau) = (x[0], x[1]);
            let tau = log_tau.exp();
            let mut total = Self::log_prior(mu, log_tau);
            g[0] = -mu / (PRIOR_SD_MU * PRIOR_SD_MU);
            g[1] = -log_tau;
            for (i, &y) in self.y.iter().enumerate() {
                let u = &x[2 + i * self.samples..2 + (i + 1) * self.samples];
                let logs: Vec<f64> = u
                    .iter()
                    .map(|u| -0.5 * precision * (y - mu - tau * u).powi(2))
                    .collect();
                let top = logs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let sum: f64 = logs.iter().map(|l| (l - top).exp()).sum();
                total += top + (sum / self.samples as f64).ln();
                for (l, &uu) in u.iter().enumerate() {
                    let weight = (logs[l] - top).exp() / sum;
                    let residual = precision * (y - mu - tau * uu);
                    g[0] += weight * residual;
                    g[1] += weight * residual * tau * uu;
                    g[2 + i * self.samples + l] = weight * residual * tau - uu;
                }
            }
            *value = total - 0.5 * x[2..].iter().map(|u| u * u).sum::<f64>();
        }
        Ok(())
    }
}

/// The metric: identity on θ and on u (the rotation needs unit mass on u).
fn identity(dim: usize) -> DiagonalMassMatrix {
    DiagonalMassMatrix::identity(dim)
}

/// Chains of `kernel` with a dual-averaging warmup of the step size (target 0.8), then `draws`
/// kept transitions; returns the θ draws (μ, log τ) per chain.
fn run<K: Kernel>(
    mut make: impl FnMut() -> K,
    target: &RandomEffects,
    chains: usize,
    warmup: usize,
    draws: usize,
) -> [Vec<Vec<f64>>; 2] {
    let dim = target.dim();
    let metric = identity(dim);
    let mut mu = Vec::new();
    let mut log_tau = Vec::new();
    for c in 0..chains {
        let mut kernel = make();
        let mut rng = chain_rng(41, c);
        let mut start_rng = ChaCha8Rng::seed_from_u64(100 + c as u64);
        let start: Vec<f64> = (0..dim)
            .map(|i| {
                if i < 2 {
                    0.2 * c as f64
                } else {
                    normal(&mut start_rng)
                }
            })
            .collect();
        let mut state = KernelState::init(target, start).unwrap();
        let mut adaptation = DualAveraging::new(0.8, 0.05, 0.75, 10.0, 0.1);
        let mut step_size = 0.1;
        let (mut m, mut t) = (Vec::with_capacity(draws), Vec::with_capacity(draws));
        for i in 0..warmup + draws {
            let (next, stats) = kernel
                .step(
                    target,
                    &mut rng,
                    state,
                    StepParams {
                        step_size,
                        metric: &metric,
                        trajectory_length: None,
                    },
                )
                .unwrap();
            state = next;
            if i < warmup {
                step_size = adaptation.update(stats.accept_stat);
                if i + 1 == warmup {
                    step_size = adaptation.averaged_step_size();
                }
            } else {
                m.push(state.position[0]);
                t.push(state.position[1]);
            }
        }
        mu.push(m);
        log_tau.push(t);
    }
    [mu, log_tau]
}

fn checks(draws: &[Vec<Vec<f64>>; 2], exact: [(f64, f64); 2]) -> Checks {
    let k = mcse_multiplier(4);
    let mut checks = Checks::default();
    for (name, (chains, (mean, sd))) in ["μ", "log τ"].iter().zip(draws.iter().zip(exact)) {
        checks.within(
            &format!("mean {name}"),
            pooled_mean(chains),
            mean,
            mcse_mean(chains),
            k,
        );
        checks.within(
            &format!("sd {name}"),
            pooled_sd(chains),
            sd,
            mcse_sd(chains),
            k,
        );
    }
    checks
}

fn check(draws: &[Vec<Vec<f64>>; 2], exact: [(f64, f64); 2], context: &str) {
    checks(draws, exact).assert_all(context);
}

/// The extended target with `u` frozen at one draw: θ alone, sampled by plain NUTS. What a
/// sampler that never moved `u` would target: the checks above must reject it.
struct FrozenU<'a> {
    target: &'a RandomEffects,
    u: Vec<f64>,
}

impl LogDensity for FrozenU<'_> {
    fn dim(&self) -> usize {
        2
    }

    fn log_density_and_gradient(
        &self,
        positions: &[f64],
        values: &mut [f64],
        gradients: &mut [f64],
    ) -> Result<(), LogDensityError> {
        let full = self.target.dim();
        let mut g = vec![0.0; full];
        for ((theta, gradient), value) in positions
            .chunks_exact(2)
            .zip(gradients.chunks_exact_mut(2))
            .zip(values.iter_mut())
        {
            let x: Vec<f64> = theta.iter().chain(&self.u).copied().collect();
            *value = self.target.evaluate(&x, &mut g)?;
            gradient.copy_from_slice(&g[..2]);
        }
        Ok(())
    }
}

/// NUTS over the extended target with each scheme: the θ-marginal is the exact posterior though
/// every subject's likelihood is a 4-sample importance-sampling estimate.
#[test]
fn pseudo_marginal_nuts_recovers_the_exact_posterior() {
    let target = RandomEffects::simulate(20, 4, 3);
    let exact = target.exact_moments();
    for scheme in [
        PseudoMarginalScheme::FlowKickFlow,
        PseudoMarginalScheme::KickFlowKick,
    ] {
        let draws = run(
            || {
                NutsConfig::new()
                    .with_max_tree_depth(8)
                    .init_with(target.dim(), PseudoMarginalLeapfrog::new(2, scheme))
                    .unwrap()
            },
            &target,
            4,
            300,
            2000,
        );
        check(&draws, exact, &format!("pseudo-marginal NUTS, {scheme:?}"));
    }

    // With u frozen at one draw (never refreshed) the same checks fail: they see the estimator's noise.
    let mut rng = ChaCha8Rng::seed_from_u64(77);
    let frozen = FrozenU {
        target: &target,
        u: (0..target.dim() - 2).map(|_| normal(&mut rng)).collect(),
    };
    let metric = identity(2);
    let (mut mu, mut log_tau) = (Vec::new(), Vec::new());
    for c in 0..4 {
        let mut kernel = NutsConfig::new().init(2).unwrap();
        let mut chain = chain_rng(43, c);
        let mut state = KernelState::init(&frozen, vec![0.5, 0.0]).unwrap();
        let (mut m, mut t) = (Vec::new(), Vec::new());
        for i in 0..2300 {
            let (next, _) = kernel
                .step(
                    &frozen,
                    &mut chain,
                    state,
                    StepParams {
                        step_size: 0.2,
                        metric: &metric,
                        trajectory_length: None,
                    },
                )
                .unwrap();
            state = next;
            if i >= 300 {
                m.push(state.position[0]);
                t.push(state.position[1]);
            }
        }
        mu.push(m);
        log_tau.push(t);
    }
    assert!(
        !checks(&[mu, log_tau], exact).passed(),
        "a frozen estimator must fail the exact-posterior checks"
    );
}

#[test]
fn pseudo_marginal_hmc_recovers_the_exact_posterior() {
    let target = RandomEffects::simulate(20, 4, 3);
    let exact = target.exact_moments();
    let draws = run(
        || {
            HmcConfig::new()
                .with_num_steps(12)
                .with_jitter(0.5)
                .init_with(PseudoMarginalLeapfrog::new(
                    2,
                    PseudoMarginalScheme::FlowKickFlow,
                ))
                .unwrap()
        },
        &target,
        4,
        300,
        2500,
    );
    check(&draws, exact, "pseudo-marginal HMC, FlowKickFlow");
}

/// Forward, flip both momenta, forward again: back at the start (both schemes), with the energy
/// error of a small step small.
#[test]
fn one_step_is_reversible() {
    let target = RandomEffects::simulate(5, 3, 9);
    let dim = target.dim();
    let metric = DiagonalMassMatrix::new(
        (0..dim)
            .map(|i| if i < 2 { 0.5 + i as f64 } else { 1.0 })
            .collect(),
    )
    .unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let position: Vec<f64> = (0..dim).map(|_| 0.5 * normal(&mut rng)).collect();
    for scheme in [
        PseudoMarginalScheme::FlowKickFlow,
        PseudoMarginalScheme::KickFlowKick,
    ] {
        let mut point = PhasePoint::new(dim);
        let mut gradient = vec![0.0; dim];
        let value = target.evaluate(&position, &mut gradient).unwrap();
        point.reset_to(&position, &gradient, value);
        point
            .momentum
            .iter_mut()
            .for_each(|p| *p = normal(&mut rng));
        point.refresh_velocity(&metric);
        let start = point.clone();
        let mut integrator = PseudoMarginalLeapfrog::new(2, scheme);
        integrator.begin_transition(&point);
        point.step(&mut integrator, &target, &metric, 0.05).unwrap();
        assert!(
            (point.hamiltonian() - start.hamiltonian()).abs() < 0.05,
            "{scheme:?}: ΔH = {}",
            point.hamiltonian() - start.hamiltonian()
        );
        // Reversed momenta; the kick-first scheme reads the end's gradient the step left behind.
        point.momentum.iter_mut().for_each(|p| *p = -*p);
        point.step(&mut integrator, &target, &metric, 0.05).unwrap();
        for (a, b) in point.position.iter().zip(&start.position) {
            assert!((a - b).abs() < 1e-12, "{scheme:?}: position {a} vs {b}");
        }
        for (a, b) in point.momentum.iter().zip(&start.momentum) {
            assert!((a + b).abs() < 1e-12, "{scheme:?}: momentum {a} vs {}", -b);
        }
    }
}

/// The one-step map of phase space preserves volume: the determinant of its Jacobian (central
/// differences, 12-dimensional phase space) is 1 for both schemes.
#[test]
fn one_step_preserves_volume() {
    let target = RandomEffects::simulate(2, 2, 4);
    let dim = target.dim();
    let metric = DiagonalMassMatrix::new(
        (0..dim)
            .map(|i| if i < 2 { 0.7 + i as f64 } else { 1.0 })
            .collect(),
    )
    .unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(8);
    let start: Vec<f64> = (0..2 * dim).map(|_| 0.6 * normal(&mut rng)).collect();
    for scheme in [
        PseudoMarginalScheme::FlowKickFlow,
        PseudoMarginalScheme::KickFlowKick,
    ] {
        let map = |z: &[f64]| -> Vec<f64> {
            let mut point = PhasePoint::new(dim);
            let mut gradient = vec![0.0; dim];
            let value = target.evaluate(&z[..dim], &mut gradient).unwrap();
            point.reset_to(&z[..dim], &gradient, value);
            point.momentum.copy_from_slice(&z[dim..]);
            point.refresh_velocity(&metric);
            let mut integrator = PseudoMarginalLeapfrog::new(2, scheme);
            point.step(&mut integrator, &target, &metric, 0.3).unwrap();
            point
                .position
                .iter()
                .chain(&point.momentum)
                .copied()
                .collect()
        };
        let n = 2 * dim;
        let h = 1e-6;
        let mut jacobian = vec![0.0; n * n];
        for j in 0..n {
            let (mut up, mut down) = (start.clone(), start.clone());
            up[j] += h;
            down[j] -= h;
            let (a, b) = (map(&up), map(&down));
            for i in 0..n {
                jacobian[i * n + j] = (a[i] - b[i]) / (2.0 * h);
            }
        }
        let det = determinant(&mut jacobian, n);
        assert!((det - 1.0).abs() < 1e-6, "{scheme:?}: det = {det}");
    }
}

/// Determinant by Gaussian elimination with partial pivoting (destroys `a`).
fn determinant(a: &mut [f64], n: usize) -> f64 {
    let mut det = 1.0;
    for col in 0..n {
        let pivot = (col..n)
            .max_by(|&i, &j| a[i * n + col].abs().total_cmp(&a[j * n + col].abs()))
            .unwrap();
        if pivot != col {
            for k in 0..n {
                a.swap(pivot * n + k, col * n + k);
            }
            det = -det;
        }
        let p = a[col * n + col];
        det *= p;
        for row in col + 1..n {
            let factor = a[row * n + col] / p;
            for k in col..n {
                a[row * n + k] -= factor * a[col * n + k];
            }
        }
    }
    det
}

//! The whole stack — MLP posterior, Burn autodiff, NUTS (threaded and batched) — against an
//! exact answer: with no hidden layer, an identity head, fixed noise σ and N(0, s²) priors the
//! posterior is Gaussian with known mean and covariance (Bayesian linear regression). The
//! tolerances come from each run's own Monte Carlo standard errors, so a wrong gradient, a
//! mis-indexed batch row or a biased kernel fails. Runs on flex and, where an adapter exists,
//! on wgpu (lavapipe in CI) with batched NUTS.

mod common;

use bnn_model::{
    Activation, AutodiffLogDensity, BnnConfig, HostData, Likelihood, MlpPosterior, Posterior,
    Prior, PriorSpec,
};
use bnn_sampler::{ChainStart, LapsConfig, LogDensity, NutsConfig, SamplerConfig};
use burn::tensor::DType;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const SIGMA: f64 = 0.5;
const PRIOR_SCALE: f64 = 1.0;

fn data() -> HostData {
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let n = 30;
    let mut x = Vec::new();
    let mut y = Vec::new();
    for _ in 0..n {
        let (a, b): (f64, f64) = (rng.random_range(-1.5..1.5), rng.random_range(-1.5..1.5));
        let noise: f64 = rng.random_range(-1.0..1.0) * SIGMA;
        x.extend([a, b]);
        y.push(0.7 * a - 1.2 * b + 0.3 + noise);
    }
    HostData::new(x, n, 2, y, 1)
}

/// Bayesian linear regression as the built-in MLP: no hidden layer, fixed σ, N(0, s²) priors.
fn linear_model() -> BnnConfig {
    BnnConfig::new(2)
        .with_hidden(vec![])
        .with_activation(Activation::Identity)
        .with_likelihood(Likelihood::GaussianFixed { sigma: SIGMA })
        .with_prior(PriorSpec::uniform(Prior::Normal { scale: PRIOR_SCALE }))
}

/// Exact posterior mean and marginal sds in the flat layout (weights `[2, 1]`, then the bias).
fn exact(data: &HostData, layout: &bnn_model::ParameterLayout) -> (Vec<f64>, Vec<f64>) {
    let (a, b) = precision_and_shift(data, layout);
    let inv = invert3(a);
    let mean = (0..3)
        .map(|p| (0..3).map(|q| inv[p][q] * b[q]).sum())
        .collect();
    let sd = (0..3).map(|p| inv[p][p].sqrt()).collect();
    (mean, sd)
}

/// The posterior's precision matrix `A` and `b` with mean `A⁻¹ b`, in the flat layout.
fn precision_and_shift(
    data: &HostData,
    layout: &bnn_model::ParameterLayout,
) -> ([[f64; 3]; 3], [f64; 3]) {
    // Column of the design matrix for each flat coordinate.
    let mut feature_of = [0usize; 3];
    for entry in &layout.entries {
        for (k, d) in entry.range().enumerate() {
            feature_of[d] = if entry.name.ends_with("bias") { 2 } else { k };
        }
    }
    let phi = |i: usize, f: usize| if f == 2 { 1.0 } else { data.x[i * 2 + f] };
    let mut a = [[0.0; 3]; 3];
    let mut b = [0.0; 3];
    for i in 0..data.rows {
        for p in 0..3 {
            for q in 0..3 {
                a[p][q] += phi(i, feature_of[p]) * phi(i, feature_of[q]) / (SIGMA * SIGMA);
            }
            b[p] += phi(i, feature_of[p]) * data.y[i] / (SIGMA * SIGMA);
        }
    }
    for (p, row) in a.iter_mut().enumerate() {
        row[p] += 1.0 / (PRIOR_SCALE * PRIOR_SCALE);
    }
    (a, b)
}

/// Without hidden layers the Bayesian Gauss–Newton metric of manifold stochastic dynamics is the
/// exact posterior precision, the same at every θ (Zlochin & Baram's G_B = β JᵀJ + prior
/// precision, with J the design matrix).
#[test]
fn the_gauss_newton_metric_is_the_linear_models_posterior_precision() {
    let data = data();
    let config = linear_model();
    let device = common::devices().remove(0).1;
    let posterior = MlpPosterior::new(config, &data, &device, DType::F32).unwrap();
    let (a, _) = precision_and_shift(&data, posterior.layout());
    for theta in [[0.0, 0.0, 0.0], [1.5, -2.0, 0.7]] {
        let metric = posterior.gauss_newton_metric(&theta).unwrap();
        for p in 0..3 {
            for q in 0..3 {
                assert!(
                    (metric[p * 3 + q] - a[p][q]).abs() < 1e-9 * a[p][q].abs().max(1.0),
                    "G[{p}, {q}] = {} vs {}",
                    metric[p * 3 + q],
                    a[p][q]
                );
            }
        }
    }
    assert!(
        posterior.gauss_newton_metric(&[0.0; 2]).is_err(),
        "a θ of the wrong length is an error"
    );
}

fn invert3(m: [[f64; 3]; 3]) -> [[f64; 3]; 3] {
    let det = m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1])
        - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
        + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0]);
    let mut inv = [[0.0; 3]; 3];
    for (i, row) in inv.iter_mut().enumerate() {
        for (j, cell) in row.iter_mut().enumerate() {
            let (r0, r1) = (
                [0, 1, 2]
                    .into_iter()
                    .filter(|&r| r != j)
                    .collect::<Vec<_>>(),
                [0, 1, 2]
                    .into_iter()
                    .filter(|&c| c != i)
                    .collect::<Vec<_>>(),
            );
            let minor = m[r0[0]][r1[0]] * m[r0[1]][r1[1]] - m[r0[0]][r1[1]] * m[r0[1]][r1[0]];
            *cell = if (i + j) % 2 == 0 {
                minor / det
            } else {
                -minor / det
            };
        }
    }
    inv
}

/// Manifold stochastic dynamics on the BNN's own Gauss–Newton metric (the f64 potential and
/// metric terms of `MlpPosterior::riemannian_density`) recovers the exact posterior: every mean
/// and sd within 4 MCSE of the closed form after 6000 one-step transitions.
#[test]
fn manifold_stochastic_dynamics_recovers_the_linear_regression_posterior() {
    use bnn_sampler::{msd_transition, MsdParams, MsdState};
    let data = data();
    let device = common::devices().remove(0).1;
    let posterior = MlpPosterior::new(linear_model(), &data, &device, DType::F32).unwrap();
    let (mean, sd) = exact(&data, posterior.layout());
    let density = posterior.riemannian_density().unwrap();
    let params = MsdParams {
        step_size: 0.9,
        persistence: 0.5,
        ..MsdParams::default()
    };
    let mut rng = ChaCha8Rng::seed_from_u64(23);
    let mut state = MsdState::at(&density, vec![0.5, -0.5, 0.0]).unwrap();
    let mut draws = vec![Vec::new(); 3];
    let mut accepted = 0;
    for t in 0..6200 {
        let (next, info) = msd_transition(&density, &mut rng, state, &params);
        assert!(!info.divergent, "transition {t} diverged");
        accepted += usize::from(info.accepted);
        state = next;
        if t >= 200 {
            for (d, x) in draws.iter_mut().zip(&state.position) {
                d.push(*x);
            }
        }
    }
    assert!(accepted > 5000, "a constant metric equal to the posterior precision makes steps cheap to accept: {accepted}");
    for d in 0..3 {
        let x = &draws[d];
        let m = x.iter().sum::<f64>() / x.len() as f64;
        let mcse = bnn_diagnostics::mcse_mean(&[x]);
        assert!(
            (m - mean[d]).abs() < 4.0 * mcse,
            "mean θ{d}: {m} ± {mcse} vs {}",
            mean[d]
        );
        let centered: Vec<f64> = x.iter().map(|v| (v - mean[d]).powi(2)).collect();
        let variance = centered.iter().sum::<f64>() / x.len() as f64;
        let variance_se = bnn_diagnostics::mcse_mean(&[&centered]);
        assert!(
            (variance - sd[d] * sd[d]).abs() < 4.0 * variance_se,
            "var θ{d}: {variance} ± {variance_se} vs {}",
            sd[d] * sd[d]
        );
    }
}

/// The f64 potential that manifold stochastic dynamics moves by is the posterior the other
/// samplers see: `−U` equals the fused kernel's log density (f32, so to its rounding) and `−∇U`
/// its gradient, for every head and prior of the built-in MLP.
#[test]
fn the_riemannian_potential_is_the_posteriors_log_density_for_every_head_and_prior() {
    use bnn_model::{LogSigmaPrior, ScaleLink};
    use bnn_sampler::{LogDensity, RiemannianDensity};
    let data = data();
    let mut labels = data.clone();
    labels.y = data
        .y
        .iter()
        .map(|y| {
            if *y > 0.5 {
                2.0
            } else if *y > -0.5 {
                1.0
            } else {
                0.0
            }
        })
        .collect();
    let device = common::devices().remove(0).1;
    // Two targets (the second a different function of the inputs), for one σ per target.
    let mut two_targets = data.clone();
    two_targets.y = (0..data.rows)
        .flat_map(|i| [data.y[i], 0.5 * data.y[i] - data.x[2 * i]])
        .collect();
    two_targets.y_cols = 2;
    let cases = [
        (
            Likelihood::GaussianFixed { sigma: 0.4 },
            Prior::Normal { scale: 1.0 },
            1,
        ),
        (
            Likelihood::GaussianHeteroscedastic {
                link: ScaleLink::Exp,
            },
            Prior::Laplace { scale: 0.7 },
            1,
        ),
        (
            Likelihood::GaussianHeteroscedastic {
                link: ScaleLink::Softplus,
            },
            Prior::FanInNormal { scale: 1.0 },
            1,
        ),
        (
            Likelihood::GaussianLearnedSigma {
                prior: LogSigmaPrior::default(),
            },
            Prior::Normal { scale: 2.0 },
            1,
        ),
        (
            Likelihood::GaussianLearnedSigma {
                prior: LogSigmaPrior::default(),
            },
            Prior::Normal { scale: 1.0 },
            2,
        ),
        (
            Likelihood::Categorical { classes: 3 },
            Prior::Laplace { scale: 1.0 },
            1,
        ),
    ];
    for (likelihood, prior, targets) in cases {
        let classification = matches!(likelihood, Likelihood::Categorical { .. });
        let config = BnnConfig::new(2)
            .with_hidden(vec![4])
            .with_activation(Activation::Tanh)
            .with_n_targets(targets)
            .with_likelihood(likelihood)
            .with_prior(PriorSpec::uniform(prior));
        let data = if classification {
            &labels
        } else if targets == 2 {
            &two_targets
        } else {
            &data
        };
        let posterior = MlpPosterior::new(config, data, &device, DType::F32).unwrap();
        let dim = posterior.layout().dim();
        let theta: Vec<f64> = (0..dim)
            .map(|i| ((i * 7 % 11) as f64 - 5.0) / 9.0)
            .collect();
        let riemannian = posterior.riemannian_density().unwrap();
        let mut riemannian_gradient = vec![0.0; dim];
        let riemannian_log_density = riemannian
            .evaluate(&theta, &mut riemannian_gradient)
            .unwrap();
        let potential = -riemannian_log_density;
        let potential_gradient: Vec<f64> = riemannian_gradient.iter().map(|g| -g).collect();
        let density = AutodiffLogDensity::new(posterior);
        let mut gradient = vec![0.0; dim];
        let log_density = density.evaluate(&theta, &mut gradient).unwrap();
        assert!(
            (log_density + potential).abs() < 2e-5 * (1.0 + potential.abs()),
            "{likelihood:?} {prior:?}: log density {log_density} vs −U {}",
            -potential
        );
        let scale = gradient.iter().fold(1.0f64, |m, g| m.max(g.abs()));
        for i in 0..dim {
            assert!(
                (gradient[i] + potential_gradient[i]).abs() < 2e-5 * scale,
                "{likelihood:?} {prior:?} ∂θ{i}: {} vs {}",
                gradient[i],
                -potential_gradient[i]
            );
        }
        // The metric is positive definite there (its factorization succeeds).
        assert!(
            riemannian.metric_terms(&theta, &vec![0.0; dim]).is_ok(),
            "{likelihood:?} {prior:?}"
        );
    }
}

#[test]
fn nuts_recovers_the_bayesian_linear_regression_posterior() {
    let data = data();
    let config = linear_model();
    for (name, device) in common::devices() {
        let batched_modes: &[bool] = if name == bnn_model::DeviceName::Wgpu {
            &[true]
        } else {
            &[false, true]
        };
        for &batched in batched_modes {
            let posterior = MlpPosterior::new(config.clone(), &data, &device, DType::F32).unwrap();
            let (mean, sd) = exact(&data, posterior.layout());
            let density = AutodiffLogDensity::new(posterior);
            let sampler = SamplerConfig::new(NutsConfig::new().into())
                .with_num_warmup(300)
                .with_num_draws(600)
                .with_seed(17)
                .with_batched(batched)
                .init()
                .unwrap();
            let starts: Vec<ChainStart> = (0..4)
                .map(|c| ChainStart::at(vec![0.1 * c as f64, -0.2, 0.05 * c as f64]))
                .collect();
            let draws = sampler.sample(&density, &starts).unwrap();
            assert_recovers(&draws, &mean, &sd, &format!("{name} batched={batched}"));
        }
    }
}

/// LAPS, 64 chains batched, recovers the Bayesian linear regression posterior on every device:
/// on wgpu every burn-in step and adjusted trajectory runs on the device
/// (`PathIntegrator`), on the CPU backends on the host. Tolerances as for NUTS above, from each
/// run's MCSE and ESS. With the kinetic energy change dropped from the device's kick on purpose
/// the wgpu run failed (coordinate 0's ESS fell to 129: the Metropolis test saw the potential
/// alone).
#[test]
fn laps_recovers_the_bayesian_linear_regression_posterior_on_every_device() {
    let data = data();
    let config = linear_model();
    for (name, device) in common::devices() {
        let posterior = MlpPosterior::new(config.clone(), &data, &device, DType::F32).unwrap();
        let (mean, sd) = exact(&data, posterior.layout());
        let density = AutodiffLogDensity::new(posterior);
        assert_eq!(
            density.path_integrator().is_some(),
            name == bnn_model::DeviceName::Wgpu,
            "{name}"
        );
        let sampler = SamplerConfig::new(LapsConfig::new().into())
            .with_num_warmup(2000)
            .with_num_draws(100)
            .with_seed(23)
            .with_batched(true)
            .init()
            .unwrap();
        let starts: Vec<ChainStart> = (0..64)
            .map(|c| {
                let t = c as f64 / 64.0;
                ChainStart::at(vec![t - 0.5, 0.3 - t, 0.2 * t])
            })
            .collect();
        let draws = sampler.sample(&density, &starts).unwrap();
        assert_recovers(&draws, &mean, &sd, &format!("{name} LAPS"));
    }
}

/// Every coordinate's pooled mean within 4.5 MCSE (plus f32 rounding) of the exact `mean` and
/// its sd within 5 relative Monte Carlo errors (about 1/√(2 ESS)) of `sd`, with a bulk ESS
/// above 200.
fn assert_recovers(draws: &bnn_sampler::CollectedDraws, mean: &[f64], sd: &[f64], what: &str) {
    for d in 0..mean.len() {
        let chains = draws.coordinate(d);
        let flat: Vec<f64> = chains.iter().flatten().copied().collect();
        let got_mean = flat.iter().sum::<f64>() / flat.len() as f64;
        let got_sd = (flat.iter().map(|v| (v - got_mean).powi(2)).sum::<f64>()
            / (flat.len() - 1) as f64)
            .sqrt();
        let mcse = bnn_diagnostics::mcse_mean(&chains);
        let ess = bnn_diagnostics::ess_bulk(&chains);
        assert!(ess > 200.0, "{what} coordinate {d}: ESS {ess}");
        assert!(
            (got_mean - mean[d]).abs() < 4.5 * mcse + 1e-4,
            "{what} coordinate {d}: mean {got_mean} vs exact {} (mcse {mcse})",
            mean[d]
        );
        let rel = (got_sd / sd[d] - 1.0).abs();
        assert!(
            rel < 5.0 / (2.0 * ess).sqrt(),
            "{what} coordinate {d}: sd {got_sd} vs exact {} (ESS {ess})",
            sd[d]
        );
    }
}

//! Manifold stochastic dynamics on a network with a hidden layer, where the Gauss–Newton metric
//! moves with θ and nothing is in closed form: MSD's draws must agree with a long NUTS run on
//! the same posterior. The statistics compared are invariant under the network's symmetries
//! (hidden-unit permutations, tanh sign flips), so chains in equivalent modes agree: the squared
//! norm of θ, the training log density and the predictive mean at two inputs. Tolerances are
//! four combined Monte Carlo standard errors. Dropping the `½ log det G` term from MSD's
//! Hamiltonian samples `p(θ) det G(θ)^{-½}` instead: that version fails this test (checked by
//! hand: |θ|² 9.13 against NUTS's 7.87, 8.5 combined MCSE).

mod common;

use bnn_model::{
    Activation, AutodiffLogDensity, BnnConfig, HostData, Likelihood, MlpPosterior, Posterior,
    Prior, PriorSpec,
};
use bnn_sampler::{ChainStart, CollectedDraws, MsdConfig, NutsConfig, SamplerConfig};
use burn::tensor::DType;

/// Eight noisy points of a smooth curve: fewer than the ten parameters, so the metric takes its
/// low-rank form (the linear model of `conjugate_posterior.rs` takes the dense one).
fn data() -> HostData {
    let x: Vec<f64> = (0..8).map(|i| -1.5 + i as f64 * 3.0 / 7.0).collect();
    let y: Vec<f64> = x
        .iter()
        .enumerate()
        .map(|(i, x)| (1.3 * x).sin() + 0.15 * ((i * 7 % 5) as f64 - 2.0) / 2.0)
        .collect();
    HostData::new(x, 8, 1, y, 1)
}

/// 1-3-1 tanh, fixed σ = 0.3, N(0, 1) priors: ten parameters.
fn model() -> BnnConfig {
    BnnConfig::new(1)
        .with_hidden(vec![3])
        .with_activation(Activation::Tanh)
        .with_likelihood(Likelihood::GaussianFixed { sigma: 0.3 })
        .with_prior(PriorSpec::uniform(Prior::Normal { scale: 1.0 }))
}

/// The network's output at `x`: layer 0's weight `[1, 3]` and bias, then layer 1's weight
/// `[3, 1]` and bias, in θ's order.
fn forward(theta: &[f64], x: f64) -> f64 {
    (0..3)
        .map(|j| (x * theta[j] + theta[3 + j]).tanh() * theta[6 + j])
        .sum::<f64>()
        + theta[9]
}

/// Per statistic: the pooled mean and its MCSE over the chains.
fn statistics(draws: &CollectedDraws) -> Vec<(f64, f64)> {
    let norm = draws.map(|theta| theta.iter().map(|t| t * t).sum());
    [
        norm,
        draws.map(|theta| forward(theta, -1.0)),
        draws.map(|theta| forward(theta, 0.8)),
    ]
    .iter()
    .map(|chains| {
        let flat: Vec<f64> = chains.iter().flatten().copied().collect();
        (
            flat.iter().sum::<f64>() / flat.len() as f64,
            bnn_diagnostics::mcse_mean(chains),
        )
    })
    .collect()
}

#[test]
fn msd_agrees_with_nuts_on_a_small_tanh_network() {
    let data = data();
    let device = common::devices().remove(0).1;
    let posterior = || MlpPosterior::new(model(), &data, &device, DType::F32).unwrap();
    let dim = posterior().layout().dim();
    assert_eq!(dim, 10);
    let starts: Vec<ChainStart> = (0..4)
        .map(|c| {
            ChainStart::at(
                (0..dim)
                    .map(|i| 0.3 * (((i + 3 * c) * 7 % 11) as f64 - 5.0) / 5.0)
                    .collect(),
            )
        })
        .collect();

    let nuts = SamplerConfig::new(NutsConfig::new().into())
        .with_num_warmup(1000)
        .with_num_draws(6000)
        .with_seed(1)
        .init()
        .unwrap();
    let reference = statistics(
        &nuts
            .sample(&AutodiffLogDensity::new(posterior()), &starts)
            .unwrap(),
    );

    let density = AutodiffLogDensity::new(posterior())
        .with_riemannian(posterior().riemannian_density().unwrap());
    let msd = SamplerConfig::new(MsdConfig::new().into())
        .with_num_warmup(1000)
        .with_num_draws(6000)
        .with_seed(2)
        .init()
        .unwrap();
    let draws = msd.sample(&density, &starts).unwrap();
    let divergent = draws
        .stat(|s| f64::from(u8::from(s.divergent)))
        .iter()
        .flatten()
        .sum::<f64>();
    // Where the metric changes fast along a step the implicit equations may not converge; such
    // steps are rejected. They must stay a minority.
    eprintln!("MSD: {divergent} of 24,000 transitions divergent");
    assert!(
        divergent < 2400.0,
        "{divergent} of 24,000 MSD transitions diverged"
    );
    let got = statistics(&draws);
    for (name, ((want, want_se), (have, have_se))) in ["|θ|²", "E f(−1)", "E f(0.8)"]
        .iter()
        .zip(reference.iter().zip(&got))
    {
        let se = (want_se * want_se + have_se * have_se).sqrt();
        assert!(
            (have - want).abs() < 4.0 * se,
            "{name}: MSD {have} vs NUTS {want} (combined MCSE {se})"
        );
        eprintln!("{name}: MSD {have:.4} ± {have_se:.4}, NUTS {want:.4} ± {want_se:.4}");
    }
}

/// A learned σ per target: a linear 2-input, 2-target model whose targets have noise sd 0.2 and
/// 0.8, so the two log σ's sit far apart, each with its own Fisher block in the metric and its
/// own share of `½ log det G`. MSD's means of both log σ's, of their squares and of the
/// weights' |w|² must agree with a long NUTS run (four combined MCSE). Dropping `½ log det G`
/// fails here too (checked by hand: log σ₁ −1.581 against −1.508, 29 combined MCSE). A wrong
/// but consistent metric would not (any metric leaves θ's marginal exact); the per-output Fisher
/// blocks are checked in `bnn_kernels::gauss_newton`'s tests.
#[test]
fn msd_agrees_with_nuts_with_a_learned_sigma_per_target() {
    let rows = 24;
    let mut x = Vec::new();
    let mut y = Vec::new();
    for i in 0..rows {
        let (a, b) = ((i % 6) as f64 / 2.5 - 1.0, ((i * 5) % 7) as f64 / 3.0 - 1.0);
        let wobble = ((i * 37 % 11) as f64 / 11.0 - 0.5) * 3.4;
        x.extend([a, b]);
        y.extend([
            0.7 * a - 1.2 * b + 0.3 + 0.2 * wobble,
            a + 0.5 * b - 0.8 * wobble,
        ]);
    }
    let data = HostData::new(x, rows, 2, y, 2);
    let config = BnnConfig::new(2)
        .with_hidden(vec![])
        .with_n_targets(2)
        .with_likelihood(Likelihood::GaussianLearnedSigma {
            prior: bnn_model::LogSigmaPrior { mean: 0.0, sd: 1.0 },
        })
        .with_prior(PriorSpec::uniform(Prior::Normal { scale: 2.0 }));
    let device = common::devices().remove(0).1;
    let posterior = || MlpPosterior::new(config.clone(), &data, &device, DType::F32).unwrap();
    let dim = posterior().layout().dim();
    assert_eq!(dim, 2 * 2 + 2 + 2);
    let starts: Vec<ChainStart> = (0..4)
        .map(|c| {
            ChainStart::at(
                (0..dim)
                    .map(|i| 0.2 * (((i + 3 * c) * 7 % 11) as f64 - 5.0) / 5.0)
                    .collect(),
            )
        })
        .collect();
    let summarize = |draws: &CollectedDraws| -> Vec<(f64, f64)> {
        let log_sigma = |k: usize| draws.map(move |theta| theta[6 + k]);
        let squared = |k: usize| draws.map(move |theta| theta[6 + k] * theta[6 + k]);
        [
            log_sigma(0),
            log_sigma(1),
            squared(0),
            squared(1),
            draws.map(|theta| theta[..6].iter().map(|t| t * t).sum()),
        ]
        .iter()
        .map(|chains| {
            let flat: Vec<f64> = chains.iter().flatten().copied().collect();
            (
                flat.iter().sum::<f64>() / flat.len() as f64,
                bnn_diagnostics::mcse_mean(chains),
            )
        })
        .collect()
    };
    let nuts = SamplerConfig::new(NutsConfig::new().into())
        .with_num_warmup(1000)
        .with_num_draws(4000)
        .with_seed(3)
        .init()
        .unwrap();
    let reference = summarize(
        &nuts
            .sample(&AutodiffLogDensity::new(posterior()), &starts)
            .unwrap(),
    );
    let density = AutodiffLogDensity::new(posterior())
        .with_riemannian(posterior().riemannian_density().unwrap());
    let msd = SamplerConfig::new(MsdConfig::new().into())
        .with_num_warmup(1000)
        .with_num_draws(4000)
        .with_seed(4)
        .init()
        .unwrap();
    let got = summarize(&msd.sample(&density, &starts).unwrap());
    // The two noise levels are told apart: σ₁ near 0.2, σ₂ near 0.8.
    assert!(
        reference[1].0 - reference[0].0 > 1.0,
        "NUTS log σ's {} and {}",
        reference[0].0,
        reference[1].0
    );
    for (name, ((want, want_se), (have, have_se))) in
        ["log σ₁", "log σ₂", "log σ₁²", "log σ₂²", "|w|²"]
            .iter()
            .zip(reference.iter().zip(&got))
    {
        let se = (want_se * want_se + have_se * have_se).sqrt();
        eprintln!("{name}: MSD {have:.4} ± {have_se:.4}, NUTS {want:.4} ± {want_se:.4}");
        assert!(
            (have - want).abs() < 4.0 * se,
            "{name}: MSD {have} vs NUTS {want} (combined MCSE {se})"
        );
    }
}

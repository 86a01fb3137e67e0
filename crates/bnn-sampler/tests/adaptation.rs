//! The warmup reaches its targets: acceptance near δ, metric near the posterior variances, and
//! the freeze options leave what they freeze alone.

mod support;

use bnn_sampler::{AlgorithmConfig, ChainStart, HmcConfig, NutsConfig, RandomWalkConfig, SamplerConfig, WarmupConfig};
use support::targets::IidGaussian;
use support::{mean_accept, uniform_starts};

/// Mean accept_stat over the sampling draws after a 1000-iteration warmup, within 0.05 of the
/// target. With 4000 draws the Monte Carlo error of the mean is ~0.005, so 0.05 measures how well
/// the dual averaging's final `ε̄` hits δ, not noise.
fn check_acceptance(name: &str, algorithm: AlgorithmConfig, dim: usize, seed: u64) {
    let target_accept = algorithm.target_accept();
    let target = IidGaussian::log_spaced(dim);
    let sampler = SamplerConfig::new(algorithm).with_num_warmup(1000).with_num_draws(1000).with_seed(seed).init().unwrap();
    let draws = sampler.sample(&target, &uniform_starts(4, dim, 1.0, seed)).unwrap();
    let accept = mean_accept(&draws);
    assert!((accept - target_accept).abs() < 0.05, "{name}: mean accept_stat {accept:.3}, target {target_accept}");
}

#[test]
fn nuts_acceptance_hits_0_8() {
    check_acceptance("NUTS δ=0.8", NutsConfig::new().into(), 100, 701);
}

#[test]
fn nuts_acceptance_hits_0_45() {
    check_acceptance("NUTS δ=0.45", NutsConfig::new().with_target_accept(0.45).into(), 100, 702);
}

#[test]
fn hmc_acceptance_hits_0_8() {
    check_acceptance("HMC δ=0.8", HmcConfig::new().with_trajectory_length(Some(2.0)).with_jitter(0.5).into(), 100, 703);
}

#[test]
fn hmc_acceptance_hits_0_45() {
    let hmc = HmcConfig::new().with_trajectory_length(Some(2.0)).with_jitter(0.5).with_target_accept(0.45);
    check_acceptance("HMC δ=0.45", hmc.into(), 100, 704);
}

#[test]
fn random_walk_acceptance_hits_0_234() {
    check_acceptance("RWM δ=0.234", RandomWalkConfig::new().into(), 10, 705);
}

/// After warmup the diagonal metric estimates the posterior variances. Its last window holds 500
/// draws (ESS of several hundred per coordinate), so the relative error of each variance is
/// ~5-10%; 35% leaves room for the regularization and still fails for an unadapted metric (off
/// by up to 10⁴).
#[test]
fn metric_adapts_to_posterior_variances() {
    let target = IidGaussian::log_spaced(10);
    let sampler = SamplerConfig::new(NutsConfig::new().into()).with_num_warmup(1000).with_num_draws(0).with_seed(801).init().unwrap();
    let mut chains = sampler.init_chains(&target, &uniform_starts(2, 10, 1.0, 801)).unwrap();
    let mut sink = bnn_sampler::CollectedDraws::new(2, 10);
    sampler.run(&target, &mut chains, &mut sink, &Default::default()).unwrap();
    for chain in &chains {
        for (estimate, scale) in chain.metric.inverse_diag().iter().zip(&target.scales) {
            let ratio = estimate / (scale * scale);
            assert!((ratio - 1.0).abs() < 0.35, "chain {}: variance ratio {ratio}", chain.chain);
        }
    }
}

#[test]
fn frozen_step_size_and_metric_stay_fixed() {
    let target = IidGaussian::log_spaced(5);
    let metric: Vec<f64> = target.scales.iter().map(|s| s * s).collect();
    let warmup = WarmupConfig::new().with_adapt_step_size(false).with_adapt_metric(false);
    let sampler = SamplerConfig::new(NutsConfig::new().into()).with_warmup(warmup).with_num_warmup(200).with_num_draws(50).init().unwrap();
    let starts = vec![ChainStart::at(vec![0.0; 5]).with_step_size(0.37).with_inverse_mass_diag(metric.clone())];
    let mut chains = sampler.init_chains(&target, &starts).unwrap();
    let mut draws = bnn_sampler::CollectedDraws::new(1, 5).with_warmup(true);
    sampler.run(&target, &mut chains, &mut draws, &Default::default()).unwrap();
    let chain = draws.chain(0);
    assert!(chain.warmup_stats.iter().chain(&chain.stats).all(|s| s.step_size == 0.37));
    assert_eq!(chains[0].metric.inverse_diag(), &metric[..]);
    assert_eq!(chains[0].step_size, 0.37);
}

#[test]
fn frozen_metric_with_adapted_step_size() {
    let target = IidGaussian::log_spaced(5);
    let warmup = WarmupConfig::new().with_adapt_metric(false);
    let sampler = SamplerConfig::new(NutsConfig::new().into()).with_warmup(warmup).with_num_warmup(300).with_num_draws(10).init().unwrap();
    let mut chains = sampler.init_chains(&target, &[ChainStart::at(vec![0.0; 5])]).unwrap();
    let mut draws = bnn_sampler::CollectedDraws::new(1, 5);
    sampler.run(&target, &mut chains, &mut draws, &Default::default()).unwrap();
    assert_eq!(chains[0].metric.inverse_diag(), &[1.0; 5]);
    // Unit metric on scales down to 1e-2: the step size must have shrunk to that order.
    assert!(chains[0].step_size < 0.05, "step size {}", chains[0].step_size);
}

/// Below 20 warmup iterations only the step size adapts (Stan's rule).
#[test]
fn short_warmup_adapts_step_size_only() {
    let target = IidGaussian { scales: vec![0.1; 3] };
    let sampler = SamplerConfig::new(NutsConfig::new().into()).with_num_warmup(19).with_num_draws(5).init().unwrap();
    let mut chains = sampler.init_chains(&target, &[ChainStart::at(vec![0.0; 3])]).unwrap();
    let initial = chains[0].step_size;
    let mut draws = bnn_sampler::CollectedDraws::new(1, 3).with_warmup(true);
    sampler.run(&target, &mut chains, &mut draws, &Default::default()).unwrap();
    assert_eq!(chains[0].metric.inverse_diag(), &[1.0; 3]);
    assert_ne!(chains[0].step_size, initial);
    let sampling = draws.stats(0);
    assert!(sampling.iter().all(|s| s.step_size == chains[0].step_size));
}

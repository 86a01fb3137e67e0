//! NUTS, HMC and MAMS recover the moments of independent normals with scales from 1e-2 to 1e2.
//!
//! Per coordinate the test checks the mean, the standard deviation and the 95% quantile against
//! the truth, each within `k` Monte Carlo standard errors from bnn-diagnostics (`mcse_mean`,
//! `mcse_sd`, `mcse_quantile`, all ESS-based, so autocorrelation is accounted for). `k` is 4, or
//! the Bonferroni value for the number of coordinates if larger (4.42 for 100), so that a correct
//! sampler fails with probability below 0.1% per family of checks. The scales span four orders
//! of magnitude, so with a unit metric the sampler would not mix in the allotted draws: the
//! checks also exercise the mass-matrix adaptation. Sampling divergences must be zero.
//!
//! Every check runs twice: chains on threads, and chains batched (one `[C, D]` call per
//! leapfrog step).

mod support;

use bnn_sampler::{AlgorithmConfig, HmcConfig, MamsConfig, NutsConfig, SamplerConfig};
use support::targets::IidGaussian;
use support::{
    divergences, mcse_mean, mcse_multiplier, mcse_quantile, mcse_sd, pooled_mean, pooled_quantile,
    pooled_sd, uniform_starts, Checks,
};

const Z95: f64 = 1.644_853_626_951_472_2;

fn check_gaussian(name: &str, algorithm: AlgorithmConfig, dim: usize, seed: u64) {
    for batched in [false, true] {
        let config = SamplerConfig::new(algorithm.clone()).with_batched(batched);
        let mode = if batched { "batched" } else { "threaded" };
        check_gaussian_run(&format!("{name} ({mode})"), config, dim, seed);
    }
}

fn check_gaussian_run(name: &str, config: SamplerConfig, dim: usize, seed: u64) {
    let target = IidGaussian::log_spaced(dim);
    let sampler = config
        .with_num_warmup(1000)
        .with_num_draws(5000)
        .with_seed(seed)
        .init()
        .unwrap();
    let draws = sampler
        .sample(&target, &uniform_starts(4, dim, 1.0, seed))
        .unwrap();
    let k = mcse_multiplier(dim);
    let mut checks = Checks::default();
    for (d, scale) in target.scales.iter().enumerate() {
        let x = draws.coordinate(d);
        checks.within(
            &format!("mean[{d}]"),
            pooled_mean(&x),
            0.0,
            mcse_mean(&x),
            k,
        );
        checks.within(&format!("sd[{d}]"), pooled_sd(&x), *scale, mcse_sd(&x), k);
        checks.within(
            &format!("q95[{d}]"),
            pooled_quantile(&x, 0.95),
            Z95 * scale,
            mcse_quantile(&x, 0.95),
            k,
        );
    }
    let n_divergent = divergences(&draws);
    checks.require(
        "divergences",
        n_divergent == 0,
        format!("{n_divergent} divergent sampling draws"),
    );
    checks.assert_all(&format!("{name}, D = {dim}"));
}

fn nuts() -> AlgorithmConfig {
    NutsConfig::new().into()
}

/// Trajectory length jittered in [1, 3] (in metric-whitened units) so fixed-length HMC does not
/// resonate with the Gaussian's period.
fn hmc() -> AlgorithmConfig {
    HmcConfig::new()
        .with_trajectory_length(Some(2.0))
        .with_jitter(0.5)
        .into()
}

#[test]
fn nuts_gaussian_1d() {
    check_gaussian("NUTS", nuts(), 1, 101);
}

#[test]
fn nuts_gaussian_10d() {
    check_gaussian("NUTS", nuts(), 10, 102);
}

#[test]
fn nuts_gaussian_100d() {
    check_gaussian("NUTS", nuts(), 100, 103);
}

#[test]
fn hmc_gaussian_1d() {
    check_gaussian("HMC", hmc(), 1, 201);
}

#[test]
fn hmc_gaussian_10d() {
    check_gaussian("HMC", hmc(), 10, 202);
}

#[test]
fn hmc_gaussian_100d() {
    check_gaussian("HMC", hmc(), 100, 203);
}

/// MAMS (Metropolis-adjusted microcanonical): its dynamics need at least 2 dimensions, so the
/// suite runs it at 10 and 100.
fn mams() -> AlgorithmConfig {
    MamsConfig::new().into()
}

#[test]
fn mams_gaussian_10d() {
    check_gaussian("MAMS", mams(), 10, 302);
}

#[test]
fn mams_gaussian_100d() {
    check_gaussian("MAMS", mams(), 100, 303);
}

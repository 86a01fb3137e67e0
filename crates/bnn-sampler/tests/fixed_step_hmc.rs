//! Fixed-step HMC (no adaptation, identity metric, burn-in discarded): the acceptance rate on
//! N(0, I_d) against an exact computation, per-chain step sizes inside one lockstep batch, and
//! the step size and trajectory length each draw reports.
//!
//! On a standard normal the leapfrog is a linear map of each coordinate's `(q, p)`, so the energy
//! error of one transition is a closed-form function of the starting point. At stationarity
//! `(q, p) ~ N(0, I_{2d})`, hence the expected acceptance `E[min(1, exp(-ΔH))]` is a plain
//! integral that we evaluate by independent Monte Carlo with its own generator (standard error
//! below 1e-3). The sampler's mean `accept_stat__` must match it within 4 combined standard
//! errors (its own MCSE is ESS-based, from bnn-diagnostics).

mod support;

use bnn_sampler::{ChainStart, HmcConfig, SamplerConfig, WarmupConfig};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};
use support::targets::IidGaussian;
use support::{mcse_mean, pooled_mean};

/// `E[min(1, exp(-ΔH))]` for `num_steps` leapfrog steps of size `step_size` on N(0, I_dim), with
/// `(q, p)` drawn exactly from N(0, I), by `samples` independent draws. Returns (mean, standard error).
fn exact_acceptance(dim: usize, step_size: f64, num_steps: usize, samples: usize) -> (f64, f64) {
    let mut rng = ChaCha8Rng::seed_from_u64(0x5eed);
    let (mut sum, mut sum_sq) = (0.0, 0.0);
    for _ in 0..samples {
        let mut energy_error = 0.0;
        for _ in 0..dim {
            let (mut q, mut p): (f64, f64) = (
                StandardNormal.sample(&mut rng),
                StandardNormal.sample(&mut rng),
            );
            let h0 = 0.5 * (q * q + p * p);
            for _ in 0..num_steps {
                p -= 0.5 * step_size * q;
                q += step_size * p;
                p -= 0.5 * step_size * q;
            }
            energy_error += 0.5 * (q * q + p * p) - h0;
        }
        let a = (-energy_error).exp().min(1.0);
        sum += a;
        sum_sq += a * a;
    }
    let n = samples as f64;
    let mean = sum / n;
    (mean, ((sum_sq / n - mean * mean) / n).sqrt())
}

fn fixed_step(num_steps: usize, burn_in: usize, draws: usize, batched: bool) -> SamplerConfig {
    SamplerConfig::new(HmcConfig::new().with_num_steps(num_steps).into())
        .with_warmup(
            WarmupConfig::new()
                .with_adapt_step_size(false)
                .with_adapt_metric(false),
        )
        .with_num_warmup(burn_in)
        .with_num_draws(draws)
        .with_seed(11)
        .with_batched(batched)
}

/// Starts drawn exactly from N(0, I), so the burn-in only has to forget nothing.
fn gaussian_starts(chains: usize, dim: usize, step_sizes: &[f64]) -> Vec<ChainStart> {
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    (0..chains)
        .map(|c| {
            let position = (0..dim).map(|_| StandardNormal.sample(&mut rng)).collect();
            ChainStart::at(position).with_step_size(step_sizes[c % step_sizes.len()])
        })
        .collect()
}

#[test]
fn fixed_step_acceptance_matches_the_exact_gaussian_value_for_each_chains_step_size() {
    let (dim, num_steps) = (20, 7);
    // Two step sizes in one lockstep batch: chains 0, 2, 4, ... run ε = 0.3 (exact acceptance
    // ≈ 0.97), the others ε = 1.1 (≈ 0.45; acceptance is not monotone in ε here, as the leapfrog
    // on a Gaussian resonates, which the exact value accounts for).
    let step_sizes = [0.3, 1.1];
    let chains = 8;
    let density = IidGaussian {
        scales: vec![1.0; dim],
    };
    let starts = gaussian_starts(chains, dim, &step_sizes);
    let sampler = fixed_step(num_steps, 20, 1500, true).init().unwrap();
    let draws = sampler.sample(&density, &starts).unwrap();

    for (group, &step_size) in step_sizes.iter().enumerate() {
        let members: Vec<usize> = (0..chains).filter(|c| c % 2 == group).collect();
        for &c in &members {
            for s in draws.stats(c) {
                assert_eq!(
                    s.step_size, step_size,
                    "chain {c} kept its own fixed step size"
                );
                assert_eq!(
                    s.n_leapfrog as usize, num_steps,
                    "chain {c} took exactly L steps"
                );
            }
        }
        let accept: Vec<Vec<f64>> = members
            .iter()
            .map(|&c| draws.stats(c).iter().map(|s| s.accept_stat).collect())
            .collect();
        let estimate = pooled_mean(&accept);
        let mcse = mcse_mean(&accept);
        let (exact, exact_se) = exact_acceptance(dim, step_size, num_steps, 200_000);
        let tolerance = 4.0 * (mcse * mcse + exact_se * exact_se).sqrt();
        assert!(
            (estimate - exact).abs() < tolerance,
            "ε = {step_size}, L = {num_steps}, d = {dim}: mean accept_stat {estimate:.4} (MCSE {mcse:.4}) vs exact {exact:.4} (± {exact_se:.4})"
        );
        // The check can fail: the two step sizes' exact values are far apart compared with it,
        // and an adapted step size (target 0.8) would land on neither.
        assert!(
            (exact - 0.8).abs() > 3.0 * tolerance,
            "exact acceptance {exact:.3} too close to the adaptation target"
        );
    }
    let (small, _) = exact_acceptance(dim, step_sizes[0], num_steps, 50_000);
    let (large, _) = exact_acceptance(dim, step_sizes[1], num_steps, 50_000);
    assert!(
        small - large > 0.3,
        "the two step sizes must be told apart: {small:.3} vs {large:.3}"
    );
}

#[test]
fn per_chain_step_sizes_in_a_batch_give_each_chain_its_solo_draws() {
    let (dim, num_steps) = (5, 9);
    let step_sizes = [0.3, 0.45, 0.6];
    let density = IidGaussian {
        scales: vec![1.0; dim],
    };
    let starts = gaussian_starts(3, dim, &step_sizes);
    let batched = fixed_step(num_steps, 5, 40, true)
        .init()
        .unwrap()
        .sample(&density, &starts)
        .unwrap();
    let threaded = fixed_step(num_steps, 5, 40, false)
        .init()
        .unwrap()
        .sample(&density, &starts)
        .unwrap();
    for c in 0..3 {
        assert_eq!(
            batched.chain(c),
            threaded.chain(c),
            "chain {c}: batched and threaded runs differ"
        );
        // Alone (its own run, chain number 0) the chain is a different stream; as chain c of a
        // one-chain run it must be the same.
        let alone = fixed_step(num_steps, 5, 40, true).init().unwrap();
        let mut states = vec![alone.init_chain(&density, c, &starts[c]).unwrap()];
        let mut collected = bnn_sampler::CollectedDraws::new(c + 1, dim);
        alone
            .run(
                &density,
                &mut states,
                &mut collected,
                &std::sync::atomic::AtomicBool::new(false),
            )
            .unwrap();
        assert_eq!(
            collected.chain(c),
            batched.chain(c),
            "chain {c}: inside the batch it must move as alone"
        );
    }
}

//! The stationary warmup policy: NUTS stays exact under it, it adapts for as long as a chain
//! started far out is still arriving, it stops at the first check for a chain started where it
//! will sample, and a run stopped inside an extension resumes bit for bit.

mod support;

use std::sync::atomic::AtomicBool;

use bnn_sampler::{
    ChainStart, ChainState, CheckOutcome, CollectedDraws, NutsConfig, RunStatus, Sampler,
    SamplerConfig, StationarityConfig, WarmupConfig, WarmupEnd, WarmupPolicy,
};
use support::held_out::Suite;
use support::targets::IidGaussian;
use support::{run_to_end, StopAfter};

/// Stan's warmup ended by the stationary policy, capped at `max_warmup` iterations.
fn stationary(max_warmup: usize) -> WarmupConfig {
    WarmupConfig::new()
        .with_policy(WarmupPolicy::Stationary)
        .with_stationarity(StationarityConfig::new().with_max_warmup(max_warmup))
}

fn sampler(warmup: WarmupConfig, num_warmup: usize, draws: usize, seed: u64) -> Sampler {
    sampler_with(NutsConfig::new(), warmup, num_warmup, draws, seed)
}

fn sampler_with(
    nuts: NutsConfig,
    warmup: WarmupConfig,
    num_warmup: usize,
    draws: usize,
    seed: u64,
) -> Sampler {
    SamplerConfig::new(nuts.into())
        .with_warmup(warmup)
        .with_num_warmup(num_warmup)
        .with_num_draws(draws)
        .with_seed(seed)
        .init()
        .unwrap()
}

/// The warmup iterations a chain used, and why its warmup ended.
fn warmup_of(chain: &ChainState) -> (usize, Option<WarmupEnd>, Vec<CheckOutcome>) {
    let stationary = chain
        .warmup
        .stan_windows()
        .and_then(|w| w.stationary())
        .expect("the stationary policy's state");
    (
        chain.warmup.num_warmup(),
        stationary.end(),
        stationary.checks().iter().map(|c| c.outcome).collect(),
    )
}

/// The held-out style targets of the sampler suite (log-spaced Gaussian, correlated Gaussian,
/// banana, funnel) under the stationary policy: every mean, standard deviation and second moment
/// within 4 MCSE of the truth (4 MCSE is past the 0.1% Bonferroni level of the 20 checks).
#[test]
fn nuts_stays_exact_under_the_stationary_warmup() {
    let suite = Suite {
        gaussian_dim: 5,
        chains: 4,
        first_seed: 11,
        k: 4.0,
    };
    suite
        .check(|target, starts, seed| {
            run_to_end(
                &sampler(stationary(1300), 300, 4000, seed),
                target,
                starts,
                false,
            )
            .0
        })
        .assert_all("NUTS under the stationary warmup");
}

/// A Gaussian with a stiff axis (sd 0.01) and a soft one (sd 10), as a BNN's posterior has: ε is
/// bounded by the stiff axis, so a chain started 50 sd out along the soft axis crawls in.
fn stiff_and_soft() -> IidGaussian {
    IidGaussian {
        scales: vec![0.01, 10.0],
    }
}

/// NUTS whose trees stop at depth 3 (7 leapfrog steps), as a BNN's trees stop at depth 10 long
/// before they turn: each transition moves the chain only a little.
fn short_trees() -> NutsConfig {
    NutsConfig::new().with_max_tree_depth(3)
}

/// `log p` of the stiff-and-soft Gaussian at a draw, relative to its mode (−χ²₂/2: mean −1).
fn log_density(q: &[f64]) -> f64 {
    -0.5 * ((q[0] / 0.01).powi(2) + (q[1] / 10.0).powi(2))
}

/// Started 50 sd out, the chain is still far away after the planned 100 iterations (the fixed
/// policy samples from there); the stationary policy keeps adapting, ends because a check
/// passed (not at the cap), and its first draws are in the typical set.
#[test]
fn a_chain_started_50_sd_out_keeps_adapting_until_it_arrives() {
    let target = stiff_and_soft();
    let far = [ChainStart::at(vec![0.0, 500.0])];
    let typical = |draws: &CollectedDraws| {
        let lp: Vec<f64> = (0..50).map(|i| log_density(draws.draw(0, i))).collect();
        lp.iter().sum::<f64>() / lp.len() as f64
    };

    let fixed = sampler_with(short_trees(), WarmupConfig::new(), 100, 200, 21);
    let (draws, _) = run_to_end(&fixed, &target, &far, false);
    let fixed_lp = typical(&draws);
    assert!(
        fixed_lp < -20.0,
        "after a fixed 100-iteration warmup the chain should still be arriving; its first draws' mean log p is {fixed_lp}"
    );

    let (draws, chains) = run_to_end(
        &sampler_with(short_trees(), stationary(5000), 100, 200, 21),
        &target,
        &far,
        false,
    );
    let (length, end, outcomes) = warmup_of(&chains[0]);
    assert_eq!(end, Some(WarmupEnd::Stationary), "checks: {outcomes:?}");
    assert!(
        length > 150 && outcomes.len() > 1,
        "the warmup should have been extended: {length} iterations, checks {outcomes:?}"
    );
    let arrived_lp = typical(&draws);
    // −χ²₂/2 has mean −1 and sd 1: the mean of 50 autocorrelated draws is well above −4.
    assert!(
        arrived_lp > -4.0,
        "the chain should sample the typical set once its warmup ends ({length} iterations, checks {outcomes:?}); mean log p {arrived_lp}"
    );
}

/// Started in the typical set, a chain passes its first check: the warmup is the planned 100
/// iterations plus one 50-iteration check, with nothing added.
#[test]
fn a_chain_started_in_the_typical_set_stops_at_the_first_check() {
    let target = stiff_and_soft();
    let starts = [
        ChainStart::at(vec![0.005, 5.0]),
        ChainStart::at(vec![-0.01, -8.0]),
        ChainStart::at(vec![0.002, 12.0]),
    ];
    let (_, chains) = run_to_end(
        &sampler(stationary(5000), 100, 10, 22),
        &target,
        &starts,
        false,
    );
    for chain in &chains {
        let (length, end, outcomes) = warmup_of(chain);
        assert_eq!(
            (length, end, outcomes.as_slice()),
            (
                150,
                Some(WarmupEnd::Stationary),
                &[CheckOutcome::Stationary][..]
            ),
            "chain {}",
            chain.chain
        );
    }
}

/// Stopped inside an extension (after its first check failed), serialized, deserialized and
/// continued, the far chain makes the uninterrupted run's draws bit for bit, warmup included.
#[test]
fn a_run_stopped_inside_an_extension_resumes_bit_for_bit() {
    let target = stiff_and_soft();
    let starts = [
        ChainStart::at(vec![0.0, 500.0]),
        ChainStart::at(vec![0.0, -300.0]),
    ];
    let sampler = sampler_with(short_trees(), stationary(5000), 100, 50, 23);
    let (whole, whole_chains) = run_to_end(&sampler, &target, &starts, true);
    let (length, _, _) = warmup_of(&whole_chains[0]);
    assert!(
        length > 200,
        "chain 0's warmup should be extended, got {length}"
    );

    for after in [160, 190, length - 10] {
        let stop = AtomicBool::new(false);
        let mut chains = sampler.init_chains(&target, &starts).unwrap();
        let mut first = StopAfter {
            inner: CollectedDraws::new(2, 2).with_warmup(true),
            after,
            seen: 0,
            stop: &stop,
        };
        assert_eq!(
            sampler
                .run(&target, &mut chains, &mut first, &stop)
                .unwrap(),
            RunStatus::Stopped
        );
        assert!(chains[0].in_warmup(), "stopped after {after}");
        let json = serde_json::to_string(&chains).unwrap();
        let mut resumed: Vec<ChainState> = serde_json::from_str(&json).unwrap();
        assert_eq!(resumed, chains, "stopped after {after}");
        let mut rest = first.inner;
        assert_eq!(
            sampler
                .run(&target, &mut resumed, &mut rest, &AtomicBool::new(false))
                .unwrap(),
            RunStatus::Finished
        );
        assert_eq!(rest, whole, "stopped after {after}");
        assert_eq!(resumed, whole_chains, "stopped after {after}");
    }
}

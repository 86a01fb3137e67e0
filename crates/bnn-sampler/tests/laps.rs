//! LAPS, the ensemble sampler: exact after its burn-in on the suite's held-out style targets,
//! a burn-in that ends near the typical set from far-out starts, the same draws whatever the
//! thread count or batching, and a stopped run that resumes bit for bit.

mod support;

use std::sync::atomic::AtomicBool;

use bnn_sampler::{
    BurnInEnd, ChainStart, ChainState, CollectedDraws, LapsConfig, LogDensity, RunStatus, Sampler,
    SamplerConfig,
};
use support::targets::{Banana, CorrelatedGaussian, IidGaussian, MildFunnel, MILD_FUNNEL_SD};
use support::{mcse_mean, mcse_sd, pooled_mean, pooled_sd, uniform_starts, Checks, StopAfter};

fn sampler(laps: LapsConfig, burn_in: usize, draws: usize, seed: u64) -> Sampler {
    SamplerConfig::new(laps.into())
        .with_num_warmup(burn_in)
        .with_num_draws(draws)
        .with_seed(seed)
        .init()
        .unwrap()
}

/// Runs to the end, warmup kept when asked; returns the draws and the final chain states.
fn run<L: LogDensity>(
    sampler: &Sampler,
    target: &L,
    starts: &[ChainStart],
    keep_warmup: bool,
) -> (CollectedDraws, Vec<ChainState>) {
    let mut chains = sampler.init_chains(target, starts).unwrap();
    let mut draws = CollectedDraws::new(starts.len(), target.dim()).with_warmup(keep_warmup);
    let status = sampler
        .run(target, &mut chains, &mut draws, &AtomicBool::new(false))
        .unwrap();
    assert_eq!(status, RunStatus::Finished);
    (draws, chains)
}

/// The burn-in's length and why it ended, as chain 0's ensemble state records them.
fn burn_in(chains: &[ChainState]) -> (usize, Option<BurnInEnd>) {
    let e = &chains[0].warmup.ensemble().unwrap().ensemble;
    (e.burn_in_steps, e.burn_in_end)
}

const CHAINS: usize = 32;

/// The suite's held-out style targets (log-spaced Gaussian with scales 1e-2..1e2, correlated
/// Gaussian, banana, mild funnel), 32 chains from uniform starts: every mean, standard deviation
/// and second moment within the Bonferroni multiple of its MCSE (34 checks), at the default
/// target acceptance and at 0.6, where the Metropolis test rejects more and matters more:
/// with the test removed (every proposal accepted) the funnel's E[v] is 6.8 MCSE off and the
/// Gaussian's E[Σz²] too.
#[test]
fn laps_is_exact_after_its_burn_in() {
    exact_after_burn_in(LapsConfig::new());
    exact_after_burn_in(LapsConfig::new().with_target_accept(0.6));
}

fn exact_after_burn_in(laps: LapsConfig) {
    let context = format!("LAPS at target acceptance {}", laps.target_accept);
    let mut checks = Checks::default();
    let k = support::mcse_multiplier(34);
    let within = |checks: &mut Checks, name: &str, chains: &[Vec<f64>], truth: f64| {
        checks.within(name, pooled_mean(chains), truth, mcse_mean(chains), k)
    };

    let gaussian = IidGaussian::log_spaced(10);
    let (draws, chains) = run(
        &sampler(laps.clone(), 2000, 300, 21),
        &gaussian,
        &uniform_starts(CHAINS, 10, 1.0, 21),
        false,
    );
    checks.require(
        "gaussian burn-in",
        burn_in(&chains).1 == Some(BurnInEnd::Converged),
        format!("{:?}", burn_in(&chains)),
    );
    for (d, scale) in gaussian.scales.iter().enumerate() {
        let x = draws.coordinate(d);
        let z: Vec<Vec<f64>> = x
            .iter()
            .map(|c| c.iter().map(|v| v / scale).collect())
            .collect();
        within(&mut checks, &format!("gaussian mean[{d}]/sd"), &z, 0.0);
        checks.within(
            &format!("gaussian sd[{d}]"),
            pooled_sd(&x),
            *scale,
            mcse_sd(&x),
            k,
        );
    }

    let chi_square = draws.map(|q| {
        q.iter()
            .zip(&gaussian.scales)
            .map(|(x, s)| (x / s).powi(2))
            .sum::<f64>()
    });
    within(&mut checks, "gaussian E[Σz²]", &chi_square, 10.0);

    let correlated = CorrelatedGaussian {
        sd: [1.0, 2.0],
        rho: 0.9,
    };
    let (draws, _) = run(
        &sampler(laps.clone(), 2000, 300, 22),
        &correlated,
        &uniform_starts(CHAINS, 2, 2.0, 22),
        false,
    );
    for d in 0..2 {
        let x = draws.coordinate(d);
        within(&mut checks, &format!("correlated mean[{d}]"), &x, 0.0);
        checks.within(
            &format!("correlated sd[{d}]"),
            pooled_sd(&x),
            correlated.sd[d],
            mcse_sd(&x),
            k,
        );
    }
    let product = draws.map(|q| q[0] * q[1]);
    within(&mut checks, "correlated E[x0 x1]", &product, 0.9 * 2.0);

    let banana = Banana { b: 0.5 };
    let (draws, _) = run(
        &sampler(laps.clone(), 2000, 300, 23),
        &banana,
        &uniform_starts(CHAINS, 2, 1.0, 23),
        false,
    );
    within(&mut checks, "banana E[x0]", &draws.coordinate(0), 0.0);
    within(&mut checks, "banana E[x1]", &draws.coordinate(1), 0.0);
    within(
        &mut checks,
        "banana E[x0^2]",
        &draws.map(|q| q[0] * q[0]),
        1.0,
    );
    within(
        &mut checks,
        "banana E[x1^2]",
        &draws.map(|q| q[1] * q[1]),
        1.0 + 2.0 * 0.25,
    );

    let funnel = MildFunnel { dim: 3 };
    let (draws, _) = run(
        &sampler(laps.clone(), 2000, 300, 24),
        &funnel,
        &uniform_starts(CHAINS, 3, 1.0, 24),
        false,
    );
    let v = draws.coordinate(0);
    within(&mut checks, "funnel E[v]", &v, 0.0);
    checks.within(
        "funnel sd(v)",
        pooled_sd(&v),
        MILD_FUNNEL_SD,
        mcse_sd(&v),
        k,
    );
    within(
        &mut checks,
        "funnel E[x1^2]",
        &draws.map(|q| q[1] * q[1]),
        (MILD_FUNNEL_SD * MILD_FUNNEL_SD / 2.0).exp(),
    );
    checks.assert_all(&context);
}

/// `log p` of the log-spaced Gaussian relative to its mode: `−χ²₁₀/2`, mean −5, sd √5.
fn gaussian_log_density(target: &IidGaussian, q: &[f64]) -> f64 {
    -0.5 * q
        .iter()
        .zip(&target.scales)
        .map(|(x, s)| (x / s).powi(2))
        .sum::<f64>()
}

/// Every chain started 50 sd out on every axis (one point, so the copies are jittered apart):
/// the burn-in ends by its own signal before its cap, and the first draws sit in the typical
/// set. From uniform starts near the mode it ends at its earliest check.
#[test]
fn the_burn_in_ends_near_the_typical_set_from_far_out_starts() {
    let target = IidGaussian::log_spaced(10);
    let far: Vec<ChainStart> = (0..CHAINS)
        .map(|_| ChainStart::at(target.scales.iter().map(|s| 50.0 * s).collect()))
        .collect();
    let start = gaussian_log_density(&target, &far[0].position);
    let (draws, chains) = run(
        &sampler(LapsConfig::new(), 2000, 20, 31),
        &target,
        &far,
        false,
    );
    let (steps, end) = burn_in(&chains);
    assert_eq!(end, Some(BurnInEnd::Converged), "ended after {steps} steps");
    assert!(steps < 2000, "{steps}");
    let first: Vec<f64> = (0..CHAINS)
        .map(|c| gaussian_log_density(&target, &draws.chain(c).positions[..10]))
        .collect();
    let mean = first.iter().sum::<f64>() / CHAINS as f64;
    // −χ²₁₀/2 over 32 chains: mean −5 with sd √5/√32 ≈ 0.4; from log p = {start:.0}.
    assert!(
        (mean + 5.0).abs() < 2.0,
        "first draws' mean log p {mean:.2} (started at {start:.0})"
    );

    let (_, chains) = run(
        &sampler(LapsConfig::new(), 2000, 20, 32),
        &target,
        &uniform_starts(CHAINS, 10, 1.0, 32),
        false,
    );
    let window = LapsConfig::new().ensemble_window(2000);
    let (steps, end) = burn_in(&chains);
    assert_eq!(end, Some(BurnInEnd::Converged));
    assert!(steps <= 2 * window, "{steps} steps, window {window}");
}

/// Every chain takes the same number of steps in each adjusted transition (the ensemble draws
/// it), and that number varies between transitions.
#[test]
fn adjusted_transitions_take_one_number_of_steps_for_every_chain() {
    let target = IidGaussian::log_spaced(10);
    let (draws, _) = run(
        &sampler(LapsConfig::new(), 1000, 50, 41),
        &target,
        &uniform_starts(8, 10, 1.0, 41),
        false,
    );
    let mut seen = std::collections::BTreeSet::new();
    for i in 0..50 {
        let steps: Vec<u32> = (0..8)
            .filter(|&c| !draws.stats(c)[i].divergent)
            .map(|c| draws.stats(c)[i].n_leapfrog)
            .collect();
        assert!(
            steps.windows(2).all(|w| w[0] == w[1]),
            "draw {i}: {steps:?}"
        );
        seen.insert(steps[0]);
    }
    assert!(seen.len() > 5, "{seen:?}");
}

/// The same draws threaded on 1, 2 or 3 threads and batched.
#[test]
fn draws_do_not_depend_on_threads_or_batching() {
    let target = Banana { b: 0.5 };
    let starts = uniform_starts(7, 2, 1.0, 51);
    let draws = |threads: Option<usize>, batched: bool| {
        let sampler = SamplerConfig::new(LapsConfig::new().into())
            .with_num_warmup(300)
            .with_num_draws(40)
            .with_seed(51)
            .with_threads(threads)
            .with_batched(batched)
            .init()
            .unwrap();
        run(&sampler, &target, &starts, true)
    };
    let (reference, chains) = draws(Some(1), false);
    for (threads, batched) in [(Some(2), false), (Some(3), false), (None, true)] {
        let (other, other_chains) = draws(threads, batched);
        assert_eq!(other, reference, "threads {threads:?}, batched {batched}");
        assert_eq!(
            other_chains, chains,
            "threads {threads:?}, batched {batched}"
        );
    }
}

/// Stopped in the burn-in, in the adjusted tuning and in sampling, serialized and resumed: the
/// same draws and final states as an uninterrupted run.
#[test]
fn a_stopped_ensemble_resumes_bit_for_bit() {
    let target = IidGaussian::log_spaced(4);
    let starts = uniform_starts(6, 4, 1.0, 61);
    let sampler = sampler(LapsConfig::new().with_adjusted_tuning(20), 400, 30, 61);
    let (whole, whole_chains) = run(&sampler, &target, &starts, true);
    let burn_in_steps = burn_in(&whole_chains).0;
    for after in [1, 50, burn_in_steps + 5, burn_in_steps + 20 + 10] {
        let stop = AtomicBool::new(false);
        let mut chains = sampler.init_chains(&target, &starts).unwrap();
        let mut first = StopAfter {
            inner: CollectedDraws::new(6, 4).with_warmup(true),
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

/// One chain is no ensemble; chains of another sampler are refused by name.
#[test]
fn an_ensemble_needs_two_chains() {
    let target = IidGaussian::log_spaced(3);
    let sampler = sampler(LapsConfig::new(), 100, 10, 71);
    let mut chains = sampler
        .init_chains(&target, &uniform_starts(1, 3, 1.0, 71))
        .unwrap();
    let error = sampler
        .run(
            &target,
            &mut chains,
            &mut CollectedDraws::new(1, 3),
            &AtomicBool::new(false),
        )
        .unwrap_err();
    assert!(error.to_string().contains("at least 2"), "{error}");
}

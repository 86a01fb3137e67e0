//! LAPS, the ensemble sampler: exact after its burn-in on the suite's held-out style targets,
//! a burn-in that ends near the typical set from far-out starts, the same draws whatever the
//! thread count or batching, and a stopped run that resumes bit for bit.

mod support;

use std::sync::atomic::AtomicBool;

use bnn_sampler::{
    BurnInEnd, ChainStart, ChainState, CollectedDraws, IsokineticPath, LapsConfig, LogDensity,
    LogDensityError, PathIntegrator, Sampler, SamplerConfig,
};
use support::held_out::Suite;
use support::targets::{Banana, IidGaussian};
use support::{
    assert_resumes_bit_for_bit, assert_same_draws_whatever_threads, run_to_end, uniform_starts,
};

fn sampler(laps: LapsConfig, burn_in: usize, draws: usize, seed: u64) -> Sampler {
    SamplerConfig::new(laps.into())
        .with_num_warmup(burn_in)
        .with_num_draws(draws)
        .with_seed(seed)
        .init()
        .unwrap()
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
    let suite = Suite {
        gaussian_dim: 10,
        chains: CHAINS,
        first_seed: 21,
        k: support::mcse_multiplier(34),
    };
    let mut burn_in_ends = Vec::new();
    let mut checks = suite.check(|target, starts, seed| {
        let (draws, chains) = run_to_end(
            &sampler(laps.clone(), 2000, 300, seed),
            target,
            starts,
            false,
        );
        burn_in_ends.push(burn_in(&chains));
        draws
    });
    checks.require(
        "every burn-in ended by its signal",
        burn_in_ends
            .iter()
            .all(|(_, end)| *end == Some(BurnInEnd::Converged)),
        format!("{burn_in_ends:?}"),
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
    let (draws, chains) = run_to_end(
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

    let (_, chains) = run_to_end(
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
    let (draws, _) = run_to_end(
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
    assert_same_draws_whatever_threads(LapsConfig::new().into(), (300, 40, 51), &target, &starts);
}

/// A batch big enough that each round's per-chain work runs on rayon's threads (130 chains of
/// 256 values: above `Lockstep`'s 32,768) gives the draws of groups small enough to stay on one
/// thread (3 threads: 44 chains each), in the burn-in (MCLMC) and in sampling (MAMS).
#[test]
fn a_batch_spread_over_threads_gives_the_same_draws() {
    let target = IidGaussian::log_spaced(256);
    let starts = uniform_starts(130, 256, 1.0, 71);
    let laps = LapsConfig::new().with_adjusted_tuning(10);
    assert_same_draws_whatever_threads(laps.into(), (60, 10, 71), &target, &starts);
}

/// Stopped in the burn-in, in the adjusted tuning and in sampling, serialized and resumed: the
/// same draws and final states as an uninterrupted run.
#[test]
fn a_stopped_ensemble_resumes_bit_for_bit() {
    let target = IidGaussian::log_spaced(4);
    let starts = uniform_starts(6, 4, 1.0, 61);
    let sampler = sampler(LapsConfig::new().with_adjusted_tuning(20), 400, 30, 61);
    let burn_in_steps = burn_in(&run_to_end(&sampler, &target, &starts, true).1).0;
    assert_resumes_bit_for_bit(
        &sampler,
        &target,
        &starts,
        &[1, 50, burn_in_steps + 5, burn_in_steps + 20 + 10],
    );
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

/// A density that runs the isokinetic paths itself (`PathIntegrator`, the GPU's way): here
/// each path alone on the host, with the steps `IsokineticPath::advance` gives, so its draws
/// must be the sampler's own to the last bit. Counts the paths it ran and declines when asked.
struct IntegratesPaths<'a, L> {
    density: &'a L,
    paths_run: std::sync::atomic::AtomicUsize,
    decline: bool,
}

impl<L: LogDensity> LogDensity for IntegratesPaths<'_, L> {
    fn dim(&self) -> usize {
        self.density.dim()
    }
    fn log_density_and_gradient(
        &self,
        positions: &[f64],
        values: &mut [f64],
        gradients: &mut [f64],
    ) -> Result<(), LogDensityError> {
        self.density
            .log_density_and_gradient(positions, values, gradients)
    }
    fn path_integrator(&self) -> Option<&dyn PathIntegrator> {
        Some(self)
    }
}

impl<L: LogDensity> PathIntegrator for IntegratesPaths<'_, L> {
    fn integrate(
        &self,
        paths: &mut [IsokineticPath],
        parameters: &[(f64, &[f64])],
    ) -> Result<bool, LogDensityError> {
        if self.decline {
            return Ok(false);
        }
        for (path, &(step_size, sqrt_cov)) in paths.iter_mut().zip(parameters) {
            assert!(path.is_fresh());
            let mut walked = path.clone();
            while walked.advance(step_size, sqrt_cov) {
                let value = self
                    .density
                    .evaluate(&walked.position, &mut walked.gradient)?;
                walked.evaluations += 1;
                if !(value.is_finite() && walked.gradient.iter().all(|g| g.is_finite())) {
                    walked.failed = true;
                    break;
                }
                walked.log_density = value;
            }
            path.position = walked.position;
            path.velocity = walked.velocity;
            path.gradient = walked.gradient;
            path.end_elsewhere(
                walked.log_density,
                walked.kinetic_change,
                walked.evaluations,
                walked.failed,
            );
        }
        self.paths_run
            .fetch_add(paths.len(), std::sync::atomic::Ordering::Relaxed);
        Ok(true)
    }
}

/// Where the density integrates the paths itself, LAPS hands it every burn-in step and every
/// adjusted trajectory (one call for all chains, batched or not) and gets the draws of its own
/// stepping; a density that declines is stepped by the sampler. With `end_elsewhere` dropping
/// the kinetic energy change on purpose, the draws differed (the Metropolis test used the
/// potential alone).
#[test]
fn a_density_that_integrates_the_paths_gets_every_trajectory() {
    let laps = LapsConfig::new().with_adjusted_tuning(10);
    let (chains, draws, paths_run) = integrated_like_stepped(laps.into());
    let iterations = burn_in(&chains).0 + 10 + draws;
    for (batched, run) in [true, false].into_iter().zip(paths_run) {
        // Every chain's burn-in step and adjusted transition went to the integrator.
        assert_eq!(run, 5 * iterations, "batched {batched}");
    }
}

/// MCLMC and MAMS, whose chains tune their own step sizes and (MAMS) draw their own numbers of
/// steps: the integrator gets paths of several parameters and lengths in one call and gives the
/// sampler's draws.
#[test]
fn paths_of_several_step_sizes_and_lengths_are_integrated_too() {
    for algorithm in [
        bnn_sampler::AlgorithmConfig::from(bnn_sampler::MclmcConfig::new()),
        bnn_sampler::MamsConfig::new().into(),
    ] {
        let (_, _, paths_run) = integrated_like_stepped(algorithm);
        assert!(paths_run.iter().all(|&run| run > 0), "{paths_run:?}");
    }
}

/// Runs `algorithm` (200 warmup, 20 draws, 5 chains) batched and threaded on a plain density
/// and on one that integrates the paths itself (and one that declines): the same draws and
/// chains. Returns the threaded run's chains, the draws per chain, and the paths integrated
/// batched and threaded.
fn integrated_like_stepped(
    algorithm: bnn_sampler::AlgorithmConfig,
) -> (Vec<ChainState>, usize, Vec<usize>) {
    let target = IidGaussian::log_spaced(6);
    let starts = uniform_starts(5, 6, 1.0, 81);
    let (burn_in_cap, draws) = (200, 20);
    let (mut last, mut paths_run) = (Vec::new(), Vec::new());
    for batched in [true, false] {
        let sampler = SamplerConfig::new(algorithm.clone())
            .with_num_warmup(burn_in_cap)
            .with_num_draws(draws)
            .with_seed(81)
            .with_batched(batched)
            .init()
            .unwrap();
        let (reference, reference_chains) = run_to_end(&sampler, &target, &starts, true);
        for decline in [false, true] {
            let integrating = IntegratesPaths {
                density: &target,
                paths_run: Default::default(),
                decline,
            };
            let (got, chains) = run_to_end(&sampler, &integrating, &starts, true);
            let what = format!("{}, batched {batched}, decline {decline}", algorithm.name());
            assert_eq!(got, reference, "{what}");
            assert_eq!(chains, reference_chains, "{what}");
            let run = integrating.paths_run.into_inner();
            if decline {
                assert_eq!(run, 0, "{what}");
            } else {
                paths_run.push(run);
            }
            last = chains;
        }
    }
    (last, draws, paths_run)
}

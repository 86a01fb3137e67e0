//! Reproducibility: thread count, batching, checkpoint/resume and cancellation change nothing.

mod support;

use std::sync::atomic::AtomicBool;

use bnn_sampler::{
    AlgorithmConfig, ChainStart, ChainState, CollectedDraws, Draw, DrawSink, DrawStats, HmcConfig,
    MclmcConfig, NutsConfig, RandomWalkConfig, RunStatus, SamplerConfig, SinkError, WarmupConfig,
};
use support::targets::{CorrelatedGaussian, IidGaussian};
use support::{uniform_starts, StopAfter};

fn collect(config: SamplerConfig, starts: &[ChainStart], dim: usize) -> CollectedDraws {
    let target = IidGaussian::log_spaced(dim);
    let sampler = config.init().unwrap();
    let mut chains = sampler.init_chains(&target, starts).unwrap();
    let mut draws = CollectedDraws::new(starts.len(), dim).with_warmup(true);
    assert_eq!(
        sampler
            .run(&target, &mut chains, &mut draws, &AtomicBool::new(false))
            .unwrap(),
        RunStatus::Finished
    );
    draws
}

#[test]
fn same_seed_same_draws_whatever_the_thread_count() {
    let starts = uniform_starts(5, 6, 1.0, 1);
    for algorithm in [
        AlgorithmConfig::from(NutsConfig::new()),
        HmcConfig::new()
            .with_trajectory_length(Some(1.5))
            .with_jitter(0.3)
            .into(),
        RandomWalkConfig::new().into(),
        MclmcConfig::new().into(),
    ] {
        let config = |threads| {
            SamplerConfig::new(algorithm.clone())
                .with_num_warmup(150)
                .with_num_draws(100)
                .with_seed(9)
                .with_threads(Some(threads))
        };
        let one = collect(config(1), &starts, 6);
        assert_eq!(one, collect(config(2), &starts, 6));
        assert_eq!(one, collect(config(4), &starts, 6));
        // Another seed gives other draws.
        assert_ne!(one, collect(config(2).with_seed(10), &starts, 6));
    }
}

/// C chains advanced in lockstep through `[C, D]` evaluations make exactly the draws of C
/// separately run chains: with adaptation (so per-chain step sizes and metrics differ), jittered
/// per-chain trajectory lengths and partial momentum refresh.
#[test]
fn batched_hmc_equals_unbatched() {
    let mut starts = uniform_starts(4, 6, 1.0, 2);
    starts[1].step_size = Some(0.05);
    starts[3].inverse_mass_diag = Some(vec![2.0; 6]);
    for hmc in [
        HmcConfig::new()
            .with_trajectory_length(Some(1.5))
            .with_jitter(0.5),
        HmcConfig::new()
            .with_num_steps(5)
            .with_refresh_angle(Some(0.3)),
    ] {
        let config = SamplerConfig::new(hmc.into())
            .with_num_warmup(150)
            .with_num_draws(100)
            .with_seed(3);
        let separate = collect(config.clone().with_threads(Some(2)), &starts, 6);
        let batched = collect(config.with_batched(true), &starts, 6);
        assert_eq!(separate, batched);
    }
}

/// Batched NUTS (the chains' trees grown in lockstep, finished trees waiting) makes exactly the
/// draws of separately run chains, warmup included. The chains start from different step sizes
/// and metrics on a target with scales from 1e-2 to 1e2, so trees of different depths are in
/// flight at once; the second configuration has a small maximum depth and no initial step-size
/// search. In both, chains hit the depth limit and diverge (the checks below make sure they do,
/// beside each other in one round).
#[test]
fn batched_nuts_equals_unbatched() {
    let mut starts = uniform_starts(5, 6, 1.0, 8);
    for (start, step_size) in starts.iter_mut().zip([0.003, 0.05, 0.4, 3.0, 40.0]) {
        start.step_size = Some(step_size);
    }
    starts[2].inverse_mass_diag = Some(vec![2.0; 6]);
    starts[4].inverse_mass_diag = Some((1..=6).map(|i| f64::from(i).powi(2)).collect());
    for (nuts, warmup) in [
        (NutsConfig::new(), WarmupConfig::new()),
        (
            NutsConfig::new().with_max_tree_depth(4),
            WarmupConfig::new().with_find_initial_step_size(false),
        ),
    ] {
        let max_tree_depth = nuts.max_tree_depth;
        let config = SamplerConfig::new(nuts.into())
            .with_warmup(warmup)
            .with_num_warmup(150)
            .with_num_draws(100)
            .with_seed(3);
        let separate = collect(config.clone().with_threads(Some(3)), &starts, 6);
        let batched = collect(config.with_batched(true), &starts, 6);
        assert_eq!(separate, batched);

        // Transition i of every chain (one lockstep round): its draws' statistics.
        let rounds: Vec<Vec<DrawStats>> = (0..250)
            .map(|i| {
                (0..starts.len())
                    .map(|c| {
                        let chain = batched.chain(c);
                        chain
                            .warmup_stats
                            .iter()
                            .chain(&chain.stats)
                            .nth(i)
                            .copied()
                            .unwrap()
                    })
                    .collect()
            })
            .collect();
        let mixed_depths = rounds
            .iter()
            .filter(|round| round.iter().any(|s| s.tree_depth != round[0].tree_depth))
            .count();
        assert!(mixed_depths > 10, "{mixed_depths} rounds with mixed depths");
        let limit_beside_divergence = rounds.iter().any(|round| {
            round.iter().any(|s| s.divergent)
                && round.iter().any(|s| s.tree_depth == max_tree_depth)
        });
        assert!(
            limit_beside_divergence,
            "no round with a divergence beside a tree at the maximum depth"
        );
    }
}

/// Stop mid-warmup, serialize every chain to JSON, deserialize, continue: the concatenated draws
/// equal an uninterrupted run bit for bit (RNG, dual averaging, Welford sums and window position
/// all survive the round trip).
#[test]
fn checkpoint_and_resume_continue_bit_for_bit() {
    let target = CorrelatedGaussian {
        sd: [1.0, 3.0],
        rho: 0.5,
    };
    let starts = uniform_starts(3, 2, 1.0, 4);
    for (algorithm, batched) in [
        (AlgorithmConfig::from(NutsConfig::new()), false),
        (NutsConfig::new().into(), true),
        (HmcConfig::new().with_refresh_angle(Some(0.5)).into(), false),
    ] {
        let sampler = SamplerConfig::new(algorithm)
            .with_num_warmup(200)
            .with_num_draws(100)
            .with_seed(5)
            .with_threads(Some(2))
            .with_batched(batched)
            .init()
            .unwrap();

        let mut chains = sampler.init_chains(&target, &starts).unwrap();
        let mut whole = CollectedDraws::new(3, 2).with_warmup(true);
        sampler
            .run(&target, &mut chains, &mut whole, &AtomicBool::new(false))
            .unwrap();

        let stop = AtomicBool::new(false);
        let mut chains = sampler.init_chains(&target, &starts).unwrap();
        let mut first = StopAfter {
            inner: CollectedDraws::new(3, 2).with_warmup(true),
            after: 120,
            seen: 0,
            stop: &stop,
        };
        assert_eq!(
            sampler
                .run(&target, &mut chains, &mut first, &stop)
                .unwrap(),
            RunStatus::Stopped
        );
        assert!(chains[0].iteration >= 120 && chains[0].iteration < 300);

        let json = serde_json::to_string(&chains).unwrap();
        let mut resumed: Vec<ChainState> = serde_json::from_str(&json).unwrap();
        assert_eq!(resumed, chains);
        let mut rest = first.inner;
        assert_eq!(
            sampler
                .run(&target, &mut resumed, &mut rest, &AtomicBool::new(false))
                .unwrap(),
            RunStatus::Finished
        );
        assert_eq!(rest, whole);
    }
}

/// MCLMC batched (one `[C, D]` call per integrator stage) makes the threaded run's draws, and a
/// stop in any of its three warmup phases (phase 3 keeps positions in the tuner) or in sampling
/// resumes bit for bit from the serialized chains.
#[test]
fn mclmc_batched_and_resumed_runs_make_the_same_draws() {
    let target = IidGaussian::log_spaced(6);
    let starts = uniform_starts(3, 6, 1.0, 6);
    let sampler = |batched| {
        SamplerConfig::new(MclmcConfig::new().into())
            .with_num_warmup(200)
            .with_num_draws(100)
            .with_seed(8)
            .with_threads(Some(2))
            .with_batched(batched)
            .init()
            .unwrap()
    };
    let mut whole = CollectedDraws::new(3, 6).with_warmup(true);
    let mut chains = sampler(false).init_chains(&target, &starts).unwrap();
    sampler(false)
        .run(&target, &mut chains, &mut whole, &AtomicBool::new(false))
        .unwrap();
    assert!(chains.iter().all(|c| c
        .params
        .trajectory_length
        .is_some_and(|l| l.is_finite() && l > 0.0)));
    for batched in [false, true] {
        for after in [120, 170, 190, 250] {
            let stop = AtomicBool::new(false);
            let mut chains = sampler(batched).init_chains(&target, &starts).unwrap();
            let mut first = StopAfter {
                inner: CollectedDraws::new(3, 6).with_warmup(true),
                after,
                seen: 0,
                stop: &stop,
            };
            assert_eq!(
                sampler(batched)
                    .run(&target, &mut chains, &mut first, &stop)
                    .unwrap(),
                RunStatus::Stopped
            );
            let json = serde_json::to_string(&chains).unwrap();
            let mut resumed: Vec<ChainState> = serde_json::from_str(&json).unwrap();
            assert_eq!(resumed, chains, "stopped after {after}");
            let mut rest = first.inner;
            sampler(batched)
                .run(&target, &mut resumed, &mut rest, &AtomicBool::new(false))
                .unwrap();
            assert_eq!(rest, whole, "batched {batched}, stopped after {after}");
        }
    }
}

#[test]
fn raised_stop_flag_returns_before_any_draw() {
    let target = IidGaussian {
        scales: vec![1.0; 2],
    };
    let sampler = SamplerConfig::new(NutsConfig::new().into())
        .with_num_warmup(10)
        .with_num_draws(10)
        .init()
        .unwrap();
    let mut chains = sampler
        .init_chains(&target, &uniform_starts(2, 2, 1.0, 6))
        .unwrap();
    let mut draws = CollectedDraws::new(2, 2).with_warmup(true);
    assert_eq!(
        sampler
            .run(&target, &mut chains, &mut draws, &AtomicBool::new(true))
            .unwrap(),
        RunStatus::Stopped
    );
    assert!(chains.iter().all(|c| c.iteration == 0));
    assert_eq!(draws, CollectedDraws::new(2, 2).with_warmup(true));
}

/// The sink sees every draw of every chain, in order per chain, with the warmup flag and indices.
#[test]
fn sink_receives_every_draw_in_order() {
    struct Recorder(Vec<(usize, usize, bool)>);
    impl DrawSink for Recorder {
        fn record(&mut self, draw: &Draw<'_>) -> Result<(), SinkError> {
            self.0.push((draw.chain, draw.index, draw.warmup));
            Ok(())
        }
    }
    let target = IidGaussian {
        scales: vec![1.0; 2],
    };
    let sampler = SamplerConfig::new(NutsConfig::new().into())
        .with_num_warmup(7)
        .with_num_draws(5)
        .with_threads(Some(2))
        .init()
        .unwrap();
    let mut chains = sampler
        .init_chains(&target, &uniform_starts(3, 2, 1.0, 7))
        .unwrap();
    let mut recorder = Recorder(Vec::new());
    sampler
        .run(&target, &mut chains, &mut recorder, &AtomicBool::new(false))
        .unwrap();
    for chain in 0..3 {
        let seen: Vec<(usize, bool)> = recorder
            .0
            .iter()
            .filter(|r| r.0 == chain)
            .map(|r| (r.1, r.2))
            .collect();
        let expected: Vec<(usize, bool)> = (0..7)
            .map(|i| (i, true))
            .chain((0..5).map(|i| (i, false)))
            .collect();
        assert_eq!(seen, expected);
    }
}

/// A sink can end a chain early (e.g. converged LPPD); the run still counts as finished, the
/// other chains run to the end, and every draw carries the chain state a checkpoint needs.
#[test]
fn sink_can_finish_a_chain_early_and_sees_the_state() {
    struct StopChainOne {
        draws: CollectedDraws,
        last_iteration: Vec<usize>,
    }
    impl DrawSink for StopChainOne {
        fn record(&mut self, draw: &Draw<'_>) -> Result<(), SinkError> {
            assert_eq!(draw.state.chain, draw.chain);
            assert_eq!(draw.state.kernel.position.as_slice(), draw.position);
            self.last_iteration[draw.chain] = draw.state.iteration;
            self.draws.record(draw)
        }
        fn chain_finished(&self, chain: usize) -> bool {
            chain == 1 && self.draws.num_draws(1) >= 7
        }
    }
    let target = IidGaussian::log_spaced(3);
    let starts = uniform_starts(3, 3, 1.0, 4);
    for (algorithm, batched) in [
        (AlgorithmConfig::from(NutsConfig::new()), false),
        (HmcConfig::new().into(), true),
        (NutsConfig::new().into(), true),
    ] {
        let sampler = SamplerConfig::new(algorithm)
            .with_num_warmup(20)
            .with_num_draws(30)
            .with_batched(batched)
            .init()
            .unwrap();
        let mut chains = sampler.init_chains(&target, &starts).unwrap();
        let mut sink = StopChainOne {
            draws: CollectedDraws::new(3, 3),
            last_iteration: vec![0; 3],
        };
        let status = sampler
            .run(&target, &mut chains, &mut sink, &AtomicBool::new(false))
            .unwrap();
        assert_eq!(status, RunStatus::Finished);
        assert_eq!(sink.draws.num_draws(0), 30);
        assert_eq!(sink.draws.num_draws(1), 7);
        assert_eq!(sink.draws.num_draws(2), 30);
        // The state handed out is the one after the transition (iteration already counted).
        assert_eq!(sink.last_iteration, vec![50, 27, 50]);
        assert_eq!(chains[1].iteration, 27);
    }
}

/// Recording a coordinate range records exactly those coordinates of the same draws.
#[test]
fn recorded_coordinates_project_the_same_draws() {
    let starts = uniform_starts(3, 5, 1.0, 4);
    for batched in [false, true] {
        let config = SamplerConfig::new(NutsConfig::new().into())
            .with_num_warmup(30)
            .with_num_draws(20)
            .with_seed(5)
            .with_batched(batched);
        let full = collect(config.clone(), &starts, 5);
        let target = IidGaussian::log_spaced(5);
        let projected = config
            .with_recorded_coordinates(Some(1..3))
            .init()
            .unwrap()
            .sample(&target, &starts)
            .unwrap();
        assert_eq!(projected.dim(), 2);
        for c in 0..starts.len() {
            assert_eq!(projected.stats(c), full.stats(c));
            for i in 0..full.num_draws(c) {
                assert_eq!(projected.draw(c, i), &full.draw(c, i)[1..3]);
            }
        }
    }
    let bad = SamplerConfig::new(NutsConfig::new().into())
        .with_recorded_coordinates(Some(3..9))
        .init()
        .unwrap();
    assert!(bad.sample(&IidGaussian::log_spaced(5), &starts).is_err());
}

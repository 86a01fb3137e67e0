//! Bad inputs give clear errors, never panics; bad values and recoverable evaluation failures
//! during sampling are divergences, fatal ones stop the run with their cause.

mod support;

use std::sync::atomic::AtomicBool;

use bnn_sampler::{
    for_each_row, ChainStart, CollectedDraws, Draw, DrawSink, HmcConfig, LogDensity,
    LogDensityError, MamsConfig, MclmcConfig, NutsConfig, RandomWalkConfig, SamplerConfig,
    SamplerError, SinkError, WarmupConfig,
};
use support::{divergences, mcse_mean, mcse_multiplier, pooled_mean, Checks};

/// A standard normal that is `-inf` where `x_0 > 5`, NaN where `x_0 < -5`, and fails to evaluate
/// (recoverably) where `|x_1| > 5`.
struct Patchy;

impl LogDensity for Patchy {
    fn dim(&self) -> usize {
        2
    }
    fn log_density_and_gradient(
        &self,
        positions: &[f64],
        values: &mut [f64],
        gradients: &mut [f64],
    ) -> Result<(), LogDensityError> {
        for_each_row(2, positions, values, gradients, |q, g| {
            if q[1].abs() > 5.0 {
                return Err(LogDensityError::recoverable("model blew up"));
            }
            g[0] = -q[0];
            g[1] = -q[1];
            Ok(if q[0] > 5.0 {
                f64::NEG_INFINITY
            } else if q[0] < -5.0 {
                f64::NAN
            } else {
                -0.5 * (q[0] * q[0] + q[1] * q[1])
            })
        })
    }
}

fn nuts() -> bnn_sampler::Sampler {
    SamplerConfig::new(NutsConfig::new().into())
        .with_num_warmup(20)
        .with_num_draws(20)
        .init()
        .unwrap()
}

#[test]
fn non_finite_start_names_the_chain() {
    let starts = vec![
        ChainStart::at(vec![0.0, 0.0]),
        ChainStart::at(vec![1.0, 1.0]),
        ChainStart::at(vec![6.0, 0.0]),
    ];
    let error = nuts().init_chains(&Patchy, &starts).unwrap_err();
    assert!(
        matches!(error, SamplerError::NonFiniteStart { chain: 2, value } if value == f64::NEG_INFINITY),
        "{error:?}"
    );
    assert!(error.to_string().contains("chain 2"), "{error}");

    let nan_start = vec![
        ChainStart::at(vec![0.0, 0.0]),
        ChainStart::at(vec![-6.0, 0.0]),
    ];
    assert!(matches!(
        nuts().init_chains(&Patchy, &nan_start).unwrap_err(),
        SamplerError::NonFiniteStart { chain: 1, .. }
    ));

    let failing = vec![ChainStart::at(vec![0.0, 9.0])];
    let error = nuts().init_chains(&Patchy, &failing).unwrap_err();
    assert!(
        matches!(error, SamplerError::StartEvaluation { chain: 0, .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("model blew up"));

    let nan_position = vec![ChainStart::at(vec![f64::NAN, 0.0])];
    assert!(matches!(
        nuts().init_chains(&Patchy, &nan_position).unwrap_err(),
        SamplerError::NonFiniteStart { chain: 0, .. }
    ));
}

#[test]
fn wrong_position_length_is_an_error() {
    let starts = vec![
        ChainStart::at(vec![0.0, 0.0]),
        ChainStart::at(vec![0.0, 0.0, 0.0]),
    ];
    let error = nuts().init_chains(&Patchy, &starts).unwrap_err();
    assert!(
        matches!(
            error,
            SamplerError::WrongDimension {
                chain: 1,
                expected: 2,
                got: 3
            }
        ),
        "{error:?}"
    );
    let metric = vec![ChainStart::at(vec![0.0, 0.0]).with_inverse_mass_diag(vec![1.0])];
    assert!(matches!(
        nuts().init_chains(&Patchy, &metric).unwrap_err(),
        SamplerError::InvalidChainStart { chain: 0, .. }
    ));
    assert!(matches!(
        nuts().init_chains(&Patchy, &[]).unwrap_err(),
        SamplerError::InvalidConfig(_)
    ));
}

#[test]
fn bad_step_sizes_and_metrics_are_errors() {
    for step in [0.0, -0.1, f64::NAN, f64::INFINITY] {
        let config =
            SamplerConfig::new(NutsConfig::new().into()).with_initial_step_size(Some(step));
        assert!(
            matches!(config.init().unwrap_err(), SamplerError::InvalidConfig(_)),
            "step {step}"
        );
        let start = vec![ChainStart::at(vec![0.0, 0.0]).with_step_size(step)];
        assert!(matches!(
            nuts().init_chains(&Patchy, &start).unwrap_err(),
            SamplerError::InvalidChainStart { chain: 0, .. }
        ));
    }
    let start = vec![ChainStart::at(vec![0.0, 0.0]).with_inverse_mass_diag(vec![1.0, -2.0])];
    assert!(matches!(
        nuts().init_chains(&Patchy, &start).unwrap_err(),
        SamplerError::InvalidChainStart { chain: 0, .. }
    ));
}

#[test]
fn impossible_configurations_are_errors() {
    let invalid =
        |config: SamplerConfig| matches!(config.init(), Err(SamplerError::InvalidConfig(_)));
    assert!(invalid(SamplerConfig::new(
        NutsConfig::new().with_max_tree_depth(0).into()
    )));
    assert!(invalid(SamplerConfig::new(
        NutsConfig::new().with_target_accept(1.5).into()
    )));
    assert!(invalid(SamplerConfig::new(
        NutsConfig::new().with_target_accept(0.0).into()
    )));
    assert!(invalid(SamplerConfig::new(
        HmcConfig::new().with_num_steps(0).into()
    )));
    assert!(invalid(SamplerConfig::new(
        HmcConfig::new().with_jitter(1.0).into()
    )));
    assert!(invalid(SamplerConfig::new(
        HmcConfig::new().with_trajectory_length(Some(-1.0)).into()
    )));
    assert!(invalid(SamplerConfig::new(
        HmcConfig::new().with_refresh_angle(Some(2.0)).into()
    )));
    assert!(invalid(SamplerConfig::new(
        RandomWalkConfig::new().with_target_accept(-0.2).into()
    )));
    assert!(invalid(
        SamplerConfig::new(NutsConfig::new().into()).with_threads(Some(0))
    ));
    assert!(invalid(
        SamplerConfig::new(RandomWalkConfig::new().into()).with_batched(true)
    ));
    assert!(invalid(
        SamplerConfig::new(NutsConfig::new().into())
            .with_warmup(WarmupConfig::new().with_base_window(0))
    ));
    assert!(invalid(
        SamplerConfig::new(NutsConfig::new().into())
            .with_warmup(WarmupConfig::new().with_kappa(0.4))
    ));
}

/// `-inf`, NaN and recoverable evaluation errors during sampling are divergences: rejected, the
/// chain stays at a finite point, the run completes.
#[test]
fn bad_values_during_sampling_are_divergences() {
    for config in [
        SamplerConfig::new(NutsConfig::new().into()),
        SamplerConfig::new(NutsConfig::new().into()).with_batched(true),
        SamplerConfig::new(HmcConfig::new().with_num_steps(8).into()),
        SamplerConfig::new(HmcConfig::new().with_num_steps(8).into()).with_batched(true),
        SamplerConfig::new(RandomWalkConfig::new().into()),
    ] {
        // A fixed, far too large step makes trajectories leave the finite region constantly.
        let sampler = config
            .with_num_warmup(0)
            .with_num_draws(300)
            .with_initial_step_size(Some(3.0))
            .with_seed(1)
            .init()
            .unwrap();
        let starts = vec![
            ChainStart::at(vec![4.0, 4.0]),
            ChainStart::at(vec![-4.0, -4.0]),
        ];
        let draws = sampler.sample(&Patchy, &starts).unwrap();
        let mut divergent = 0;
        for c in 0..2 {
            for (i, stats) in draws.stats(c).iter().enumerate() {
                divergent += usize::from(stats.divergent);
                assert!(stats.log_density.is_finite());
                let q = draws.draw(c, i);
                assert!(
                    q[0].abs() <= 5.0 && q[1].abs() <= 5.0,
                    "chain moved outside the finite region: {q:?}"
                );
            }
        }
        assert!(divergent > 0, "{:?}", sampler.config().algorithm);
    }
}

/// A standard normal in `dim` dimensions whose density cannot be evaluated where `|x_0| > 2.5`:
/// recoverably (the point is outside the model's range, as for an ODE solver that gives up) or,
/// with `fatal`, as a broken evaluation.
struct FailsBeyond {
    dim: usize,
    fatal: bool,
}

const BOUND: f64 = 2.5;

impl FailsBeyond {
    fn recoverable(dim: usize) -> Self {
        Self { dim, fatal: false }
    }
    fn fatal(dim: usize) -> Self {
        Self { dim, fatal: true }
    }
}

impl LogDensity for FailsBeyond {
    fn dim(&self) -> usize {
        self.dim
    }
    fn log_density_and_gradient(
        &self,
        positions: &[f64],
        values: &mut [f64],
        gradients: &mut [f64],
    ) -> Result<(), LogDensityError> {
        for_each_row(self.dim, positions, values, gradients, |q, g| {
            if q[0].abs() > BOUND {
                let message = format!("x = {} is outside the model's range", q[0]);
                return Err(if self.fatal {
                    LogDensityError::fatal(message)
                } else {
                    LogDensityError::recoverable(message)
                });
            }
            g.iter_mut().zip(q).for_each(|(g, x)| *g = -x);
            Ok(-0.5 * q.iter().map(|x| x * x).sum::<f64>())
        })
    }
}

/// `E[x²]` of the standard normal truncated to `[-a, a]`: `1 − 2aφ(a) / (2Φ(a) − 1)`.
fn truncated_normal_variance(a: f64) -> f64 {
    let density = (-0.5 * a * a).exp() / (2.0 * std::f64::consts::PI).sqrt();
    1.0 - 2.0 * a * density / (2.0 * support::normal_cdf(a) - 1.0)
}

/// A recoverable failure is a divergence where it happens: NUTS reports divergences, finishes,
/// never leaves `|x| ≤ 2.5`, and samples the truncated normal there (the failing region is a
/// wall of `-inf`, on which multinomial NUTS is exact). The moments are checked within
/// `mcse_multiplier(2)` (≥ 4) Monte Carlo standard errors, so a correct sampler fails the pair
/// with probability below 0.001. With 40,000 draws the variance's MCSE is about 0.009, so a
/// bias of 0.04 fails (the untruncated normal's variance, 1 instead of 0.911, is 10 MCSEs
/// away).
#[test]
fn recoverable_failures_are_divergences_and_the_truncated_normal_is_sampled() {
    let draws = SamplerConfig::new(NutsConfig::new().into())
        .with_num_warmup(500)
        .with_num_draws(10_000)
        .with_seed(11)
        .init()
        .unwrap()
        .sample(
            &FailsBeyond::recoverable(1),
            &[-1.0, -0.3, 0.4, 1.2].map(|x| ChainStart::at(vec![x])),
        )
        .unwrap();
    assert!(divergences(&draws) > 0, "no trajectory reached |x| > 2.5");
    let x = draws.coordinate(0);
    assert!(x.iter().flatten().all(|x| x.abs() <= BOUND));
    let squares: Vec<Vec<f64>> = x
        .iter()
        .map(|chain| chain.iter().map(|x| x * x).collect())
        .collect();
    let k = mcse_multiplier(2);
    let mut checks = Checks::default();
    checks.within("mean", pooled_mean(&x), 0.0, mcse_mean(&x), k);
    checks.within(
        "variance",
        pooled_mean(&squares),
        truncated_normal_variance(BOUND),
        mcse_mean(&squares),
        k,
    );
    checks.assert_all("NUTS on a standard normal that fails recoverably beyond |x| = 2.5");
}

/// The microcanonical samplers (threaded and batched) also take a recoverable failure as a
/// divergence: the step is rejected, the chain stays where the density can be evaluated.
#[test]
fn microcanonical_samplers_diverge_on_recoverable_failures() {
    let starts = [-2.0, 2.0].map(|x| ChainStart::at(vec![x, 0.0]));
    for config in [
        SamplerConfig::new(MclmcConfig::new().into()),
        SamplerConfig::new(MclmcConfig::new().into()).with_batched(true),
        SamplerConfig::new(MamsConfig::new().into()),
        SamplerConfig::new(MamsConfig::new().into()).with_batched(true),
    ] {
        let sampler = config
            .with_num_warmup(0)
            .with_num_draws(1000)
            .with_initial_step_size(Some(1.0))
            .with_seed(2)
            .init()
            .unwrap();
        let draws = sampler
            .sample(&FailsBeyond::recoverable(2), &starts)
            .unwrap();
        assert!(divergences(&draws) > 0, "{:?}", sampler.config().algorithm);
        assert!(draws
            .coordinate(0)
            .iter()
            .flatten()
            .all(|x| x.abs() <= BOUND));
    }
}

/// A fatal failure stops the run, threaded or batched, with an error that names the chain (when
/// one chain's call failed) and keeps the density's error, unchanged, as its source.
#[test]
fn fatal_failures_stop_the_run_naming_the_cause() {
    for (config, dim) in [
        (SamplerConfig::new(NutsConfig::new().into()), 1),
        (
            SamplerConfig::new(NutsConfig::new().into()).with_batched(true),
            1,
        ),
        (SamplerConfig::new(HmcConfig::new().into()), 1),
        (SamplerConfig::new(RandomWalkConfig::new().into()), 1),
        (SamplerConfig::new(MclmcConfig::new().into()), 2),
        (
            SamplerConfig::new(MamsConfig::new().into()).with_batched(true),
            2,
        ),
    ] {
        // No warmup, so no step-size search: the failure comes from a transition.
        let sampler = config
            .with_num_warmup(0)
            .with_num_draws(2000)
            .with_initial_step_size(Some(1.0))
            .with_seed(3)
            .init()
            .unwrap();
        let starts = [-2.0, 2.0].map(|x| ChainStart::at([x, 0.0][..dim].to_vec()));
        let error = sampler
            .sample(&FailsBeyond::fatal(dim), &starts)
            .unwrap_err();
        let batched = sampler.config().batched;
        let cause = match &error {
            SamplerError::Evaluation { chain, cause } if !batched && *chain < 2 => cause,
            SamplerError::BatchEvaluation { cause } if batched => cause,
            other => panic!("{:?}: {other:?}", sampler.config().algorithm),
        };
        assert!(!cause.is_recoverable());
        let message = error.to_string();
        assert!(
            message.contains("unrecoverable") && message.contains("outside the model's range"),
            "{message}"
        );
        let source = std::error::Error::source(&error).expect("the density's error is the source");
        assert_eq!(source.to_string(), cause.to_string());
    }
    // The warmup's step-size search stops on a fatal failure too (at the start or after a
    // metric window), naming the chain it searched for.
    let error = SamplerConfig::new(NutsConfig::new().into())
        .with_num_warmup(300)
        .with_seed(3)
        .init()
        .unwrap()
        .sample(&FailsBeyond::fatal(1), &[ChainStart::at(vec![2.4])])
        .unwrap_err();
    assert!(
        matches!(&error, SamplerError::Evaluation { chain: 0, cause } if !cause.is_recoverable()),
        "{error:?}"
    );
    // At the initial point a recoverable failure is as fatal as any other.
    let error = SamplerConfig::new(NutsConfig::new().into())
        .init()
        .unwrap()
        .sample(&FailsBeyond::recoverable(1), &[ChainStart::at(vec![3.0])])
        .unwrap_err();
    assert!(
        matches!(error, SamplerError::StartEvaluation { chain: 0, .. }),
        "{error:?}"
    );
}

#[test]
fn failing_sink_stops_the_run_with_an_error() {
    struct Full;
    impl DrawSink for Full {
        fn record(&mut self, _: &Draw<'_>) -> Result<(), SinkError> {
            Err("disk full".into())
        }
    }
    let target = Patchy;
    let sampler = nuts();
    let mut chains = sampler
        .init_chains(&target, &[ChainStart::at(vec![0.0, 0.0])])
        .unwrap();
    let error = sampler
        .run(&target, &mut chains, &mut Full, &AtomicBool::new(false))
        .unwrap_err();
    assert!(
        matches!(&error, SamplerError::Sink(cause) if cause.to_string().contains("disk full")),
        "{error:?}"
    );
    // The sink's error stays the source, with its own cause (the OS error) behind it.
    #[derive(Debug)]
    struct Writing(std::io::Error);
    impl std::fmt::Display for Writing {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("writing checkpoints/.chain_0.json.tmp")
        }
    }
    impl std::error::Error for Writing {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }
    struct NoSpace;
    impl DrawSink for NoSpace {
        fn record(&mut self, _: &Draw<'_>) -> Result<(), SinkError> {
            Err(Box::new(Writing(std::io::Error::from_raw_os_error(28))))
        }
    }
    let mut chains = sampler
        .init_chains(&target, &[ChainStart::at(vec![0.0, 0.0])])
        .unwrap();
    let error = sampler
        .run(&target, &mut chains, &mut NoSpace, &AtomicBool::new(false))
        .unwrap_err();
    let mut causes = Vec::new();
    let mut next: Option<&dyn std::error::Error> = Some(&error);
    while let Some(cause) = next {
        causes.push(cause.to_string());
        next = cause.source();
    }
    assert_eq!(causes.len(), 3, "{causes:?}");
    assert!(causes[2].contains("No space left on device"), "{causes:?}");
    let _ = CollectedDraws::new(1, 2);
}

//! Bad inputs give clear errors, never panics; bad values during sampling are divergences.

use std::sync::atomic::AtomicBool;

use bnn_sampler::{
    for_each_row, ChainStart, CollectedDraws, Draw, DrawSink, HmcConfig, LogDensity,
    LogDensityError, NutsConfig, RandomWalkConfig, SamplerConfig, SamplerError, SinkError,
    WarmupConfig,
};

/// A standard normal that is `-inf` where `x_0 > 5`, NaN where `x_0 < -5`, and fails to evaluate
/// where `|x_1| > 5`.
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
                return Err(LogDensityError::new("model blew up"));
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

/// `-inf`, NaN and evaluation errors during sampling are divergences: rejected, the chain stays
/// at a finite point, the run completes.
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

//! Settings a kernel cannot run with are typed errors before a transition uses them, never silent
//! dynamics: what `KernelState::gradient` holds after each kernel (and the draws-and-gradients
//! estimate refusing the kernels where it is not `∇ log p`), the pseudo-marginal integrator's
//! identity `u` block in a release build, and surrogate NUTS refusing step-size adaptation.

mod support;

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use bnn_sampler::{
    chain_rng, ChainStart, ChainState, CollectedDraws, DiagonalMassMatrix, GradientKind, HmcConfig,
    Integrator, Kernel, KernelState, LogDensity, LogDensityError, MetricEstimate, NutsConfig,
    PseudoMarginalLeapfrog, PseudoMarginalScheme, RunStatus, Sampler, SamplerConfig, SamplerError,
    StepParams, SurrogateCounts, SurrogateGradient, SurrogateNutsConfig, WarmupConfig,
};
use support::targets::IidGaussian;

/// A surrogate force for N(0, s²I) (isotropic, so wrong for any other target).
#[derive(Debug)]
struct IsotropicSurrogate {
    dim: usize,
    precision: f64,
}

impl SurrogateGradient for IsotropicSurrogate {
    fn dim(&self) -> usize {
        self.dim
    }

    fn gradient(&self, positions: &[f64], gradients: &mut [f64]) -> Result<(), LogDensityError> {
        gradients
            .iter_mut()
            .zip(positions)
            .for_each(|(g, q)| *g = -self.precision * q);
        Ok(())
    }
}

/// `[θ, u]` with θ two coordinates of scales 0.5 and 2 and u two standard normals: the extended
/// target's shape, all the pseudo-marginal integrator needs.
fn extended_target() -> IidGaussian {
    IidGaussian {
        scales: vec![0.5, 2.0, 1.0, 1.0],
    }
}

fn surrogate(dim: usize) -> Arc<IsotropicSurrogate> {
    Arc::new(IsotropicSurrogate {
        dim,
        precision: 0.5,
    })
}

fn sampler(warmup: WarmupConfig) -> Sampler {
    SamplerConfig::new(NutsConfig::new().into())
        .with_warmup(warmup)
        .with_num_warmup(150)
        .with_num_draws(50)
        .with_seed(12)
        .init()
        .unwrap()
}

fn starts(dim: usize) -> Vec<ChainStart> {
    (0..2)
        .map(|c| {
            ChainStart::at(
                (0..dim)
                    .map(|i| 0.3 * (c as f64 + 1.0) - 0.1 * i as f64)
                    .collect(),
            )
        })
        .collect()
}

/// `sampler.run_kernel` from fresh chains; the chains come back to show how far they got.
fn run_kernel<K: Kernel, L: LogDensity>(
    sampler: &Sampler,
    target: &L,
    make: impl Fn() -> K + Sync,
) -> (Result<RunStatus, SamplerError>, Vec<ChainState>) {
    let mut chains = sampler.init_chains(target, &starts(target.dim())).unwrap();
    let mut sink = CollectedDraws::new(chains.len(), target.dim());
    let result = sampler.run_kernel(
        target,
        || Ok(make()),
        &mut chains,
        &mut sink,
        &AtomicBool::new(false),
    );
    (result, chains)
}

/// Steps `kernel` 30 times at step size 0.3 and reports whether the state's gradient was the
/// true `∇ log p` at its position after every transition.
fn gradient_is_always_true<K: Kernel, L: LogDensity>(mut kernel: K, target: &L) -> bool {
    let metric = DiagonalMassMatrix::identity(target.dim());
    let mut rng = chain_rng(5, 0);
    let mut state = KernelState::init(target, starts(target.dim()).remove(1).position).unwrap();
    let mut always = true;
    for _ in 0..30 {
        (state, _) = kernel
            .step(
                target,
                &mut rng,
                state,
                StepParams {
                    step_size: 0.3,
                    metric: &metric,
                    trajectory_length: None,
                },
            )
            .unwrap();
        let mut truth = vec![0.0; target.dim()];
        target.evaluate(&state.position, &mut truth).unwrap();
        always &= truth == state.gradient;
    }
    always
}

fn is_refused(
    result: &Result<RunStatus, SamplerError>,
    wanted_kernel: &str,
    wanted_setting: &str,
) -> bool {
    matches!(result, Err(SamplerError::UnsupportedSetting { kernel, setting, .. }) if *kernel == wanted_kernel && *setting == wanted_setting)
}

/// Each kernel's `state_gradient` is the truth: the states of the kernels that claim `∇ log p`
/// hold it exactly after every transition, and those of flow–kick–flow pseudo-marginal NUTS and
/// HMC and of surrogate NUTS (which claim otherwise) do not.
#[test]
fn every_kernel_says_truly_whether_its_state_holds_the_true_gradient() {
    let target = extended_target();
    let pm = |scheme| PseudoMarginalLeapfrog::new(2, scheme);
    let nuts = || NutsConfig::new().with_max_tree_depth(6);
    let hmc = || HmcConfig::new().with_num_steps(5);
    let cases: Vec<(&str, GradientKind, bool)> = vec![
        (
            "NUTS",
            nuts().init(4).unwrap().state_gradient(),
            gradient_is_always_true(nuts().init(4).unwrap(), &target),
        ),
        (
            "HMC",
            hmc().init().unwrap().state_gradient(),
            gradient_is_always_true(hmc().init().unwrap(), &target),
        ),
        (
            "NUTS, kick–flow–kick",
            nuts()
                .init_with(4, pm(PseudoMarginalScheme::KickFlowKick))
                .unwrap()
                .state_gradient(),
            gradient_is_always_true(
                nuts()
                    .init_with(4, pm(PseudoMarginalScheme::KickFlowKick))
                    .unwrap(),
                &target,
            ),
        ),
        (
            "NUTS, flow–kick–flow",
            nuts()
                .init_with(4, pm(PseudoMarginalScheme::FlowKickFlow))
                .unwrap()
                .state_gradient(),
            gradient_is_always_true(
                nuts()
                    .init_with(4, pm(PseudoMarginalScheme::FlowKickFlow))
                    .unwrap(),
                &target,
            ),
        ),
        (
            "HMC, flow–kick–flow",
            hmc()
                .init_with(pm(PseudoMarginalScheme::FlowKickFlow))
                .unwrap()
                .state_gradient(),
            gradient_is_always_true(
                hmc()
                    .init_with(pm(PseudoMarginalScheme::FlowKickFlow))
                    .unwrap(),
                &target,
            ),
        ),
        (
            "surrogate NUTS",
            SurrogateNutsConfig::new()
                .init(4, surrogate(4))
                .unwrap()
                .state_gradient(),
            gradient_is_always_true(
                SurrogateNutsConfig::new().init(4, surrogate(4)).unwrap(),
                &target,
            ),
        ),
    ];
    let expected = [
        GradientKind::LogDensity,
        GradientKind::LogDensity,
        GradientKind::LogDensity,
        GradientKind::PseudoMarginalMidpoint,
        GradientKind::PseudoMarginalMidpoint,
        GradientKind::Surrogate,
    ];
    for ((name, kind, always_true), expected) in cases.into_iter().zip(expected) {
        assert_eq!(kind, expected, "{name}");
        assert_eq!(
            always_true,
            kind == GradientKind::LogDensity,
            "{name} claims {kind:?}"
        );
    }
}

/// The draws-and-gradients metric estimate would read a surrogate's force or a midpoint's
/// gradient as `∇ log p`: the run is refused before its first transition, naming the kernel and
/// the setting. Kick–flow–kick pseudo-marginal NUTS, whose states hold the true gradient, runs.
#[test]
fn the_draws_and_gradients_estimate_refuses_kernels_whose_state_holds_another_gradient() {
    let target = extended_target();
    let warmup = WarmupConfig::new().with_metric_estimate(MetricEstimate::DrawsAndGradients);
    // The step size stays fixed so that the refusal tested is the estimate's alone.
    let fixed_step = sampler(warmup.clone().with_adapt_step_size(false));
    let (result, chains) = run_kernel(&fixed_step, &target, || {
        SurrogateNutsConfig::new().init(4, surrogate(4)).unwrap()
    });
    assert!(
        is_refused(
            &result,
            "surrogate-gradient NUTS",
            "warmup.metric_estimate = draws-and-gradients"
        ),
        "{result:?}"
    );
    assert!(
        chains.iter().all(|c| c.iteration == 0),
        "refused before the first transition"
    );

    let fkf = || {
        NutsConfig::new()
            .init_with(
                4,
                PseudoMarginalLeapfrog::new(4, PseudoMarginalScheme::FlowKickFlow),
            )
            .unwrap()
    };
    let (result, _) = run_kernel(&fixed_step, &target, fkf);
    let name = "NUTS or HMC on the pseudo-marginal flow–kick–flow integrator";
    assert!(
        is_refused(
            &result,
            name,
            "warmup.metric_estimate = draws-and-gradients"
        ),
        "{result:?}"
    );
    // With Stan's estimate from the positions alone the same kernel runs.
    let (result, _) = run_kernel(
        &sampler(WarmupConfig::new().with_adapt_step_size(false)),
        &target,
        fkf,
    );
    assert_eq!(result.unwrap(), RunStatus::Finished);

    let kfk = || {
        NutsConfig::new()
            .init_with(
                4,
                PseudoMarginalLeapfrog::new(4, PseudoMarginalScheme::KickFlowKick),
            )
            .unwrap()
    };
    assert_eq!(
        run_kernel(&sampler(warmup), &target, kfk).0.unwrap(),
        RunStatus::Finished
    );
}

/// A metric whose `u` block is not the identity is an error in a release build too: the check
/// returns it, the runner returns it when Stan's warmup adapts the `u` block (at the end of its
/// first window, before the metric is used), and a transition stepped with it anyway diverges
/// and stays put instead of integrating one Hamiltonian while testing another.
#[test]
fn an_adapted_u_block_is_an_error_not_silent_dynamics_in_a_release_build() {
    let target = extended_target();
    let adapted = DiagonalMassMatrix::new(vec![0.25, 4.0, 1.0, 1.3]).unwrap();
    let integrator = PseudoMarginalLeapfrog::new(2, PseudoMarginalScheme::KickFlowKick);
    let refusal = integrator.check_metric(&adapted).unwrap_err();
    assert!(
        matches!(&refusal, SamplerError::UnsupportedSetting { setting: "metric", reason, .. } if reason.contains("coordinate 3")),
        "{refusal}"
    );
    assert!(
        integrator
            .check_metric(&DiagonalMassMatrix::new(vec![0.25, 4.0, 1.0, 1.0]).unwrap())
            .is_ok(),
        "θ's block may be adapted"
    );

    for scheme in [
        PseudoMarginalScheme::KickFlowKick,
        PseudoMarginalScheme::FlowKickFlow,
    ] {
        let mut kernel = NutsConfig::new()
            .init_with(4, PseudoMarginalLeapfrog::new(2, scheme))
            .unwrap();
        let params = StepParams {
            step_size: 0.3,
            metric: &adapted,
            trajectory_length: None,
        };
        assert!(kernel.check_params(params).is_err(), "{scheme:?}");
        let mut rng = chain_rng(3, 0);
        let start = KernelState::init(&target, vec![0.1, 0.5, -0.3, 0.8]).unwrap();
        let mut state = start.clone();
        for _ in 0..20 {
            let (next, stats) = kernel.step(&target, &mut rng, state, params).unwrap();
            assert!(
                stats.divergent,
                "{scheme:?}: a refused step is a divergence"
            );
            state = next;
        }
        assert_eq!(
            state.position, start.position,
            "{scheme:?}: the chain must stay put"
        );
    }

    // Stan's windows adapt every coordinate, the u block included.
    let make = || {
        NutsConfig::new()
            .init_with(
                4,
                PseudoMarginalLeapfrog::new(2, PseudoMarginalScheme::KickFlowKick),
            )
            .unwrap()
    };
    let (result, chains) = run_kernel(&sampler(WarmupConfig::new()), &target, make);
    assert!(
        is_refused(&result, "the pseudo-marginal integrator", "metric"),
        "{result:?}"
    );
    let first_window_end = WarmupConfig::new().init_buffer + WarmupConfig::new().base_window;
    assert!(
        chains.iter().any(|c| c.iteration == first_window_end),
        "refused when the first window adapted the metric"
    );
    let (result, _) = run_kernel(
        &sampler(WarmupConfig::new().with_adapt_metric(false)),
        &target,
        make,
    );
    assert_eq!(result.unwrap(), RunStatus::Finished);
}

/// Dual averaging on surrogate leaves drives ε toward zero (their acceptance is the
/// surrogate's error, which barely shrinks with ε), so the runner refuses it before the first
/// transition. The supported recipe runs: a true-gradient NUTS warmup, then surrogate NUTS from
/// where it ended with its ε and metric.
#[test]
fn surrogate_nuts_refuses_step_size_adaptation_and_runs_after_a_true_gradient_warmup() {
    let target = IidGaussian {
        scales: vec![0.5, 1.0, 2.0],
    };
    let make = || SurrogateNutsConfig::new().init(3, surrogate(3)).unwrap();
    for warmup in [
        WarmupConfig::new(),
        WarmupConfig::new().with_adapt_metric(false),
    ] {
        let (result, chains) = run_kernel(&sampler(warmup), &target, make);
        assert!(
            is_refused(&result, "surrogate-gradient NUTS", "warmup.adapt_step_size"),
            "{result:?}"
        );
        assert!(chains.iter().all(|c| c.iteration == 0));
    }

    let warmup = SamplerConfig::new(NutsConfig::new().into())
        .with_num_warmup(150)
        .with_num_draws(0)
        .with_seed(12)
        .init()
        .unwrap();
    let mut chains = warmup.init_chains(&target, &starts(3)).unwrap();
    let mut sink = CollectedDraws::new(chains.len(), 3);
    warmup
        .run(&target, &mut chains, &mut sink, &AtomicBool::new(false))
        .unwrap();
    let tuned: Vec<f64> = chains.iter().map(|c| c.params.step_size).collect();
    let sampling = sampler(WarmupConfig::new());
    let mut sink = CollectedDraws::new(chains.len(), 3);
    let status = sampling
        .run_kernel(
            &target,
            || Ok(make()),
            &mut chains,
            &mut sink,
            &AtomicBool::new(false),
        )
        .unwrap();
    assert_eq!(status, RunStatus::Finished);
    for (c, step_size) in tuned.iter().enumerate() {
        assert_eq!(sink.num_draws(c), 50);
        assert!(sink
            .stats(c)
            .iter()
            .all(|s| s.step_size == *step_size && SurrogateCounts::of(s).true_gradients == 0));
    }
}

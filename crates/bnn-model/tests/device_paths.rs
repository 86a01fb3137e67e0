//! MCLMC's, MAMS's and LAPS's isokinetic paths run on the device (wgpu; lavapipe in CI): the
//! device's kicks and drifts against the sampler's own host steps on the same f32 gradients,
//! a chain that meets a non-finite value stopping where the host's does, and the density
//! offering the device path exactly where it has one.

mod common;

use bnn_model::{
    Activation, AutodiffLogDensity, BnnConfig, GradientPath, Likelihood, MlpPosterior, ScaleLink,
};
use bnn_sampler::dynamics::isokinetic_path::PathStepper;
use bnn_sampler::{IsokineticPath, Lockstep, LogDensity};
use burn::tensor::DType;
use common::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn wgpu_device() -> Option<burn::tensor::Device> {
    bnn_model::wgpu_test_device("the device's isokinetic paths")
}

/// Fresh paths from random positions (chain `c` scaled by `scale`), unit velocities, and the
/// density's own value and gradient there.
fn fresh_paths(
    density: &AutodiffLogDensity<MlpPosterior>,
    chains: usize,
    steps: impl Fn(usize) -> usize,
    seed: u64,
) -> Vec<IsokineticPath> {
    let d = density.dim();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let positions = random_theta(chains * d, 0.5, seed);
    let mut values = vec![0.0; chains];
    let mut gradients = vec![0.0; chains * d];
    density
        .log_density_and_gradient(&positions, &mut values, &mut gradients)
        .unwrap();
    (0..chains)
        .map(|c| {
            let mut velocity: Vec<f64> = (0..d).map(|_| rng.random_range(-1.0..1.0)).collect();
            let norm = velocity.iter().map(|v| v * v).sum::<f64>().sqrt();
            velocity.iter_mut().for_each(|v| *v /= norm);
            let row = c * d..(c + 1) * d;
            let mut path = IsokineticPath::default();
            path.start(
                &positions[row.clone()],
                &velocity,
                &gradients[row],
                values[c],
                steps(c),
            );
            path
        })
        .collect()
}

/// Walks `paths` to their ends, path `i` with step size and `√Σ` `parameters[i]`.
fn walk(
    density: &AutodiffLogDensity<MlpPosterior>,
    paths: &mut [IsokineticPath],
    parameters: &[(f64, Vec<f64>)],
) {
    PathStepper::walk_all(
        &mut Lockstep::default(),
        density,
        paths,
        parameters.iter().map(|(e, s)| (*e, s.as_slice())),
    )
    .unwrap();
}

fn max_difference(a: &[f64], b: &[f64]) -> f64 {
    a.iter()
        .zip(b)
        .fold(0.0f64, |m, (x, y)| m.max((x - y).abs()))
}

/// Paths of 8 McLachlan steps (16 gradients) for 1 and 37 chains with one step size and
/// diagonal preconditioner, and 37 chains each with its own step size, preconditioner and
/// length (3–8 steps), on every gradient program: the device's end points are the host's
/// within f32 rounding (measured on lavapipe for the shared cases: positions within 3.4e-7, `kinetic change −
/// log p` within 2.6e-4 where |log p| ≈ 200), with the same evaluation counts. With the kinetic
/// change dropped from the device's kick on purpose, chain 0's differed by 0.9.
#[test]
fn device_paths_follow_the_host_steps() {
    let Some(device) = wgpu_device() else { return };
    let likelihood = Likelihood::GaussianHeteroscedastic {
        link: ScaleLink::Exp,
    };
    let config = BnnConfig::new(3)
        .with_hidden(vec![8, 8])
        .with_activation(Activation::Tanh)
        .with_likelihood(likelihood);
    let data = random_data(70, 3, 1, &likelihood, 21);
    for path in [GradientPath::Auto, GradientPath::TensorOps] {
        let build = || {
            MlpPosterior::new(config.clone(), &data, &device, DType::F32)
                .unwrap()
                .with_gradient_path(path)
        };
        let on_device = AutodiffLogDensity::new(build());
        let on_host = AutodiffLogDensity::new(build()).through_autodiff();
        assert!(on_device.path_integrator().is_some(), "{path:?}");
        assert!(on_host.path_integrator().is_none(), "{path:?}");
        let d = on_device.dim();
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let mut scale = || -> Vec<f64> { (0..d).map(|_| rng.random_range(0.5..1.5)).collect() };
        let shared = scale();
        let own: Vec<(f64, Vec<f64>)> = (0..37)
            .map(|c| (0.02 + 0.06 * c as f64 / 36.0, scale()))
            .collect();
        let one_length = |_| 8;
        let lengths = |c: usize| 3 + c % 6;
        let cases: [(&str, usize, &dyn Fn(usize) -> usize, Vec<(f64, Vec<f64>)>); 3] = [
            ("shared", 1, &one_length, vec![(0.05, shared.clone())]),
            ("shared", 37, &one_length, vec![(0.05, shared.clone()); 37]),
            ("per chain", 37, &lengths, own.clone()),
        ];
        for (case, chains, steps, parameters) in cases {
            let mut device_paths = fresh_paths(&on_device, chains, steps, 30 + chains as u64);
            let mut host_paths = device_paths.clone();
            walk(&on_device, &mut device_paths, &parameters);
            walk(&on_host, &mut host_paths, &parameters);
            for (c, (got, want)) in device_paths.iter().zip(&host_paths).enumerate() {
                let what = format!("{path:?} {case} C={chains} chain {c}");
                assert!(!want.failed && !got.failed, "{what}");
                assert_eq!(got.evaluations, 2 * steps(c), "{what}");
                assert_eq!(want.evaluations, 2 * steps(c), "{what}");
                assert_eq!(got.steps_left, 0, "{what}");
                let apart = max_difference(&got.position, &want.position);
                assert!(apart < 1e-5, "{what}: positions differ by {apart}");
                assert!(
                    max_difference(&got.velocity, &want.velocity) < 1e-5,
                    "{what}: velocities"
                );
                let (got_energy, want_energy) = (
                    got.kinetic_change - got.log_density,
                    want.kinetic_change - want.log_density,
                );
                assert!(
                    (got_energy - want_energy).abs() < 2e-3,
                    "{what}: energy change {got_energy} against {want_energy}"
                );
                let unit = got.velocity.iter().map(|v| v * v).sum::<f64>();
                assert!((unit - 1.0).abs() < 1e-5, "{what}: |u|² = {unit}");
            }
        }
    }
}

/// A chain whose first drift lands where the density overflows stops at that evaluation on the
/// device as on the host (failed, one evaluation), and the other chains are unaffected.
#[test]
fn a_chain_that_meets_a_non_finite_value_stops_there() {
    let Some(device) = wgpu_device() else { return };
    let config = BnnConfig::new(3)
        .with_hidden(vec![8])
        .with_activation(Activation::Relu)
        .with_likelihood(Likelihood::GaussianFixed { sigma: 0.5 });
    let data = random_data(40, 3, 1, &Likelihood::GaussianFixed { sigma: 0.5 }, 4);
    let build = || MlpPosterior::new(config.clone(), &data, &device, DType::F32).unwrap();
    let on_device = AutodiffLogDensity::new(build());
    let on_host = AutodiffLogDensity::new(build()).through_autodiff();
    let d = on_device.dim();
    let mut device_paths = fresh_paths(&on_device, 4, |_| 3, 9);
    // Chain 2 sits at weights of 1e18 (its start's value and gradient kept from a sane point):
    // the squared residuals overflow f32 at the first evaluation.
    device_paths[2].position.iter_mut().for_each(|x| *x = 1e18);
    let mut host_paths = device_paths.clone();
    let parameters = vec![(0.02, vec![1.0; d]); 4];
    walk(&on_device, &mut device_paths, &parameters);
    walk(&on_host, &mut host_paths, &parameters);
    for (c, (got, want)) in device_paths.iter().zip(&host_paths).enumerate() {
        assert_eq!(got.failed, c == 2, "chain {c}");
        assert_eq!(want.failed, c == 2, "chain {c}");
        assert_eq!(got.evaluations, want.evaluations, "chain {c}");
        if c != 2 {
            assert!(max_difference(&got.position, &want.position) < 1e-4);
        }
    }
    assert_eq!(device_paths[2].evaluations, 1);
}

/// The CPU backends step the paths on the host (their gradient is the host kernel's): no
/// device path is offered there.
#[test]
fn the_cpu_backends_offer_no_device_paths() {
    let config = BnnConfig::new(3).with_hidden(vec![4]);
    let data = random_data(10, 3, 1, &config.likelihood, 2);
    for name in [bnn_model::DeviceName::Flex, bnn_model::DeviceName::Ndarray] {
        let device = name.device().unwrap();
        let density = AutodiffLogDensity::new(
            MlpPosterior::new(config.clone(), &data, &device, DType::F32).unwrap(),
        );
        assert!(density.path_integrator().is_none(), "{name:?}");
    }
}

/// LAPS on the device gives the same draws threaded (each chain's paths alone) and batched (all
/// chains' in one launch per stage): a chain's kicks and gradients do not depend on the others.
#[test]
fn device_paths_give_the_same_draws_threaded_or_batched() {
    let Some(device) = wgpu_device() else { return };
    let likelihood = Likelihood::GaussianHeteroscedastic {
        link: ScaleLink::Exp,
    };
    let config = BnnConfig::new(3)
        .with_hidden(vec![6])
        .with_activation(Activation::Tanh)
        .with_likelihood(likelihood);
    let data = random_data(30, 3, 1, &likelihood, 17);
    let density =
        AutodiffLogDensity::new(MlpPosterior::new(config, &data, &device, DType::F32).unwrap());
    let d = density.dim();
    let starts: Vec<bnn_sampler::ChainStart> = (0..6)
        .map(|c| bnn_sampler::ChainStart::at(random_theta(d, 0.5, 70 + c)))
        .collect();
    let run = |batched: bool| {
        let sampler = bnn_sampler::SamplerConfig::new(
            bnn_sampler::LapsConfig::new()
                .with_adjusted_tuning(10)
                .into(),
        )
        .with_num_warmup(60)
        .with_num_draws(10)
        .with_seed(3)
        .with_threads(Some(2))
        .with_batched(batched)
        .init()
        .unwrap();
        sampler.sample(&density, &starts).unwrap()
    };
    let (batched, threaded) = (run(true), run(false));
    for c in 0..6 {
        assert_eq!(batched.chain(c), threaded.chain(c), "chain {c}");
    }
}

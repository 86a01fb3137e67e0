//! The fused MLP operation (handwritten backward, `bnn_model::fused_mlp`) against Burn's plain
//! tensor graph: value and gradient of the log posterior for every activation, likelihood head
//! and prior family, batched, for both programs — the host kernel on both CPU backends (f32 and
//! f64), the batched tensor-operation program on the CPU backends (f32 and f64) and on wgpu
//! (f32; lavapipe in CI, skipped with a message where no adapter exists).
//!
//! Tolerances: f32 agreement to 1e-5 relative (value: |a − b| / |b|; gradient: the largest
//! coordinate error over the gradient's largest coordinate, so coordinates near zero are judged
//! on the gradient's scale). Both paths round differently in f32 (~1e-7 per operation), so
//! 1e-5 leaves room for rounding but not for a wrong term. In f64 both must agree to 1e-9.
//! θ is drawn away from ReLU-type kinks, where the two paths could pick different one-sided
//! derivatives.

mod common;

use bnn_model::{
    Activation, AutodiffLogDensity, BnnConfig, DeviceName, GradientPath, LayerPrior, MlpPosterior,
    Posterior, Prior, PriorSpec,
};
use bnn_sampler::LogDensity;
use burn::tensor::DType;
use common::*;

fn evaluate(
    density: &AutodiffLogDensity<MlpPosterior>,
    thetas: &[f64],
    chains: usize,
) -> (Vec<f64>, Vec<f64>) {
    let mut values = vec![0.0; chains];
    let mut grads = vec![0.0; thetas.len()];
    density
        .log_density_and_gradient(thetas, &mut values, &mut grads)
        .unwrap();
    (values, grads)
}

fn priors() -> Vec<PriorSpec> {
    vec![
        PriorSpec::default(),
        PriorSpec::uniform(Prior::Laplace { scale: 0.7 }).with_layer(
            1,
            LayerPrior {
                weight: Prior::FanInNormal { scale: 2.0 },
                bias: Prior::Normal { scale: 0.5 },
            },
        ),
    ]
}

/// Every activation × likelihood × prior: `path` on `name` against the plain graph on `name`.
fn check_against_plain(
    name: DeviceName,
    path: GradientPath,
    expected_program: &str,
    precisions: &[(DType, f64)],
) {
    let chains = 3;
    let Some(device) = name.test_device(&format!("{path:?} against the plain graph")) else {
        return;
    };
    for &(dtype, tol) in precisions {
        for (a, activation) in Activation::ALL.into_iter().enumerate() {
            for (l, likelihood) in all_likelihoods().into_iter().enumerate() {
                for (p, prior) in priors().into_iter().enumerate() {
                    let config = BnnConfig::new(3)
                        .with_hidden(vec![5, 4])
                        .with_activation(activation)
                        .with_n_targets(1)
                        .with_likelihood(likelihood)
                        .with_prior(prior);
                    let data = random_data(40, 3, 1, &likelihood, 100 + a as u64);
                    let fused = MlpPosterior::new(config.clone(), &data, &device, dtype)
                        .unwrap()
                        .with_gradient_path(path);
                    // The device kernel leaves the learned-σ head to the tensor program.
                    let learned_sigma = matches!(
                        likelihood,
                        bnn_model::Likelihood::GaussianLearnedSigma { .. }
                    );
                    let expected = if expected_program == "device_kernel" && learned_sigma {
                        "tensor_ops"
                    } else {
                        expected_program
                    };
                    assert_eq!(
                        fused.gradient_program(),
                        expected,
                        "{name} {path:?} {likelihood:?}"
                    );
                    let plain = MlpPosterior::new(config.clone(), &data, &device, dtype)
                        .unwrap()
                        .with_gradient_path(GradientPath::Plain);
                    assert!(!plain.uses_fused_kernel());
                    let (fused, plain) = (
                        AutodiffLogDensity::new(fused),
                        AutodiffLogDensity::new(plain),
                    );
                    let d = fused.dim();
                    let mut thetas = Vec::new();
                    for c in 0..chains as u64 {
                        let theta = (0..1000u64)
                            .map(|s| {
                                random_theta(
                                    d,
                                    0.8,
                                    10_000 * (l as u64 + 10 * p as u64) + 100 * c + s,
                                )
                            })
                            .find(|t| kink_distance(&config, &data, t) > 1e-3)
                            .expect("a point away from kinks");
                        thetas.extend(theta);
                    }
                    let (fv, fg) = evaluate(&fused, &thetas, chains);
                    let (pv, pg) = evaluate(&plain, &thetas, chains);
                    for c in 0..chains {
                        let what = format!("{name} {path:?} {dtype:?} {activation} {likelihood:?} prior {p} chain {c}");
                        let rel = ((fv[c] - pv[c]) / pv[c]).abs();
                        assert!(
                            rel <= tol,
                            "{what}: value {} vs {} (rel {rel:e})",
                            fv[c],
                            pv[c]
                        );
                        let (g, r) = (&fg[c * d..(c + 1) * d], &pg[c * d..(c + 1) * d]);
                        let scale = r.iter().fold(0.0f64, |m, v| m.max(v.abs()));
                        let worst = g
                            .iter()
                            .zip(r)
                            .fold(0.0f64, |m, (a, b)| m.max((a - b).abs()));
                        assert!(
                            worst <= tol * scale,
                            "{what}: gradient error {worst:e} on scale {scale:e}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn host_kernel_matches_the_plain_autodiff_path() {
    for name in [DeviceName::Ndarray, DeviceName::Flex] {
        check_against_plain(
            name,
            GradientPath::Auto,
            "host_kernel",
            &[(DType::F32, 1e-5), (DType::F64, 1e-9)],
        );
    }
}

#[test]
fn tensor_ops_program_matches_the_plain_autodiff_path_on_the_cpu() {
    for name in [DeviceName::Ndarray, DeviceName::Flex] {
        check_against_plain(
            name,
            GradientPath::TensorOps,
            "tensor_ops",
            &[(DType::F32, 1e-5), (DType::F64, 1e-9)],
        );
    }
}

#[test]
fn tensor_ops_program_matches_the_plain_autodiff_path_on_wgpu() {
    // The tensor-operation program on wgpu (its shaders work in f32).
    check_against_plain(
        DeviceName::Wgpu,
        GradientPath::TensorOps,
        "tensor_ops",
        &[(DType::F32, 1e-5)],
    );
}

#[test]
fn device_kernel_matches_the_plain_autodiff_path_on_wgpu() {
    // The default on wgpu: one kernel per call (40 rows: one block with rows past the end).
    check_against_plain(
        DeviceName::Wgpu,
        GradientPath::Auto,
        "device_kernel",
        &[(DType::F32, 1e-5)],
    );
}

/// The wgpu device, or `None` with a printed skip where no adapter exists.
fn wgpu_device() -> Option<burn::tensor::Device> {
    bnn_model::wgpu_test_device("the fused device kernel")
}

/// Largest coordinate difference over the reference's largest coordinate.
fn gradient_error(g: &[f64], reference: &[f64]) -> f64 {
    let scale = reference.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    g.iter()
        .zip(reference)
        .fold(0.0f64, |m, (a, b)| m.max((a - b).abs()))
        / scale
}

#[test]
fn device_kernel_agrees_with_the_tensor_program_over_several_row_blocks() {
    // 150 rows = blocks of 64, 64 and 22; widths 7 and 5 leave partial groups of four units;
    // two targets (four outputs for the heteroscedastic heads). Values alone (no gradient)
    // and the log likelihood without the prior go through the kernel too. A chain's numbers
    // are the same bits alone as in a batch, and on a second call.
    let Some(device) = wgpu_device() else { return };
    for (l, likelihood) in all_likelihoods().into_iter().enumerate() {
        if matches!(
            likelihood,
            bnn_model::Likelihood::GaussianLearnedSigma { .. }
        ) {
            continue;
        }
        for (a, activation) in [Activation::Tanh, Activation::Silu, Activation::LeakyRelu]
            .into_iter()
            .enumerate()
        {
            let config = BnnConfig::new(3)
                .with_hidden(vec![7, 5])
                .with_activation(activation)
                .with_n_targets(2)
                .with_likelihood(likelihood)
                .with_prior(priors()[a % 2].clone());
            let data = random_data(150, 3, 2, &likelihood, 50 + l as u64);
            let build = |path| {
                MlpPosterior::new(config.clone(), &data, &device, DType::F32)
                    .unwrap()
                    .with_gradient_path(path)
            };
            let kernel = build(GradientPath::Auto);
            assert_eq!(kernel.gradient_program(), "device_kernel");
            let (kernel, tensor_ops) = (
                AutodiffLogDensity::new(kernel),
                AutodiffLogDensity::new(build(GradientPath::TensorOps)),
            );
            let (d, chains) = (kernel.dim(), 9);
            let thetas = random_theta(chains * d, 0.7, 300 + 10 * l as u64 + a as u64);
            let (kv, kg) = evaluate(&kernel, &thetas, chains);
            let (tv, tg) = evaluate(&tensor_ops, &thetas, chains);
            let what = format!("{activation} {likelihood:?}");
            for c in 0..chains {
                let rel = ((kv[c] - tv[c]) / tv[c]).abs();
                assert!(
                    rel <= 1e-5,
                    "{what} chain {c}: value {} vs {} (rel {rel:e})",
                    kv[c],
                    tv[c]
                );
                let err = gradient_error(&kg[c * d..(c + 1) * d], &tg[c * d..(c + 1) * d]);
                assert!(err <= 1e-5, "{what} chain {c}: gradient error {err:e}");
            }
            let mut values = vec![0.0; chains];
            kernel.log_density(&thetas, &mut values).unwrap();
            for c in 0..chains {
                assert!(
                    ((values[c] - kv[c]) / kv[c]).abs() <= 1e-6,
                    "{what} chain {c}: value-only {} vs {}",
                    values[c],
                    kv[c]
                );
            }
            let (again_v, again_g) = evaluate(&kernel, &thetas, chains);
            assert_eq!(
                (bits(&again_v), bits(&again_g)),
                (bits(&kv), bits(&kg)),
                "{what}: a second call"
            );
            let (one_v, one_g) = evaluate(&kernel, &thetas[2 * d..3 * d], 1);
            assert_eq!(
                (bits(&one_v), bits(&one_g)),
                (bits(&kv[2..3]), bits(&kg[2 * d..3 * d])),
                "{what}: chain 2 alone"
            );
            // Log likelihood alone (the predictive code's call): the tensor program's numbers.
            let t = burn::tensor::Tensor::<2>::from_data(
                burn::tensor::TensorData::new(thetas.clone(), [chains, d]),
                (&device, DType::F32),
            );
            let posterior = build(GradientPath::Auto);
            let reference = build(GradientPath::TensorOps);
            let a: Vec<f64> = posterior
                .log_likelihood(&t)
                .into_data()
                .iter::<f64>()
                .collect();
            let b: Vec<f64> = reference
                .log_likelihood(&t)
                .into_data()
                .iter::<f64>()
                .collect();
            for (x, y) in a.iter().zip(&b) {
                assert!(
                    ((x - y) / y).abs() <= 1e-5,
                    "{what}: log likelihood {x} vs {y}"
                );
            }
        }
    }
}

#[test]
fn device_kernel_covers_more_chains_than_one_grid_axis() {
    // One cube per chain: 66,000 chains exceed wgpu's 65,535 cubes per axis, so the launch
    // spreads over two axes. Chains on both sides of the boundary must match themselves alone.
    let Some(device) = wgpu_device() else { return };
    let likelihood = bnn_model::Likelihood::GaussianFixed { sigma: 0.3 };
    let config = BnnConfig::new(1)
        .with_hidden(vec![3])
        .with_activation(Activation::Tanh)
        .with_likelihood(likelihood);
    let data = random_data(5, 1, 1, &likelihood, 4);
    let density =
        AutodiffLogDensity::new(MlpPosterior::new(config, &data, &device, DType::F32).unwrap());
    let (d, chains) = (density.dim(), 66_000);
    let thetas = random_theta(chains * d, 0.5, 23);
    let (values, grads) = evaluate(&density, &thetas, chains);
    for c in [0, 65_534, 65_535, 65_536, chains - 1] {
        let (v, g) = evaluate(&density, &thetas[c * d..(c + 1) * d], 1);
        assert_eq!(
            values[c].to_bits(),
            v[0].to_bits(),
            "chain {c}: {} in the batch vs {} alone",
            values[c],
            v[0]
        );
        assert_eq!(g, grads[c * d..(c + 1) * d], "chain {c}: gradient");
    }
}

#[test]
fn device_kernel_gives_a_chain_the_same_bits_however_its_rows_are_split() {
    // 600 rows: 5 segments of two 64-row blocks (4 of 128 rows, one of 88). A lone chain's
    // segments go to 5 cubes, 20 chains' to 4 parts (part 0 takes segments 0 and 4), and
    // 1100 chains' to one cube each: the segment sums are added in the same order in all three.
    let Some(device) = wgpu_device() else { return };
    let likelihood = bnn_model::Likelihood::GaussianHeteroscedastic {
        link: Default::default(),
    };
    let config = BnnConfig::new(2)
        .with_hidden(vec![6, 5])
        .with_activation(Activation::Tanh)
        .with_likelihood(likelihood);
    let data = random_data(600, 2, 1, &likelihood, 8);
    let density =
        AutodiffLogDensity::new(MlpPosterior::new(config, &data, &device, DType::F32).unwrap());
    let d = density.dim();
    let thetas = random_theta(1100 * d, 0.6, 31);
    let (many_v, many_g) = evaluate(&density, &thetas, 1100);
    let (some_v, some_g) = evaluate(&density, &thetas[..20 * d], 20);
    for c in [0, 1, 19] {
        let (v, g) = evaluate(&density, &thetas[c * d..(c + 1) * d], 1);
        assert_eq!(bits(&v), bits(&many_v[c..c + 1]), "chain {c} alone vs 1100");
        assert_eq!(
            bits(&g),
            bits(&many_g[c * d..(c + 1) * d]),
            "chain {c}: gradient"
        );
        assert_eq!(bits(&v), bits(&some_v[c..c + 1]), "chain {c} alone vs 20");
        assert_eq!(
            bits(&g),
            bits(&some_g[c * d..(c + 1) * d]),
            "chain {c}: gradient"
        );
    }
}

#[test]
fn fused_likelihood_alone_matches_too() {
    // `log_likelihood` (no prior) is what the predictive code calls; it goes through the same
    // operation with the prior switched off.
    let device = DeviceName::Flex.device().unwrap();
    for likelihood in all_likelihoods() {
        let config = BnnConfig::new(2)
            .with_hidden(vec![6])
            .with_activation(Activation::Tanh)
            .with_likelihood(likelihood);
        let data = random_data(25, 2, 1, &likelihood, 5);
        let fused = MlpPosterior::new(config.clone(), &data, &device, DType::F64).unwrap();
        let plain = MlpPosterior::new(config, &data, &device, DType::F64)
            .unwrap()
            .with_gradient_path(GradientPath::Plain);
        let d = fused.layout_dim();
        let theta = random_theta(2 * d, 0.8, 9);
        let t = burn::tensor::Tensor::<2>::from_data(
            burn::tensor::TensorData::new(theta, [2, d]),
            (&device, DType::F64),
        );
        let a: Vec<f64> = fused.log_likelihood(&t).into_data().iter::<f64>().collect();
        let b: Vec<f64> = plain.log_likelihood(&t).into_data().iter::<f64>().collect();
        for (x, y) in a.iter().zip(&b) {
            assert!(
                (x - y).abs() <= 1e-9 * y.abs().max(1.0),
                "{likelihood:?}: {x} vs {y}"
            );
        }
    }
}

#[test]
fn host_kernel_results_do_not_depend_on_the_thread_count() {
    // A batched call with enough work is split over Rayon's pool; each chain must come out
    // bit for bit the same with 1 or 3 threads (and the split must cover every chain).
    let device = DeviceName::Flex.device().unwrap();
    let likelihood = bnn_model::Likelihood::GaussianHeteroscedastic {
        link: bnn_model::ScaleLink::Exp,
    };
    let config = BnnConfig::new(4)
        .with_hidden(vec![32, 32])
        .with_activation(Activation::Tanh)
        .with_likelihood(likelihood);
    let data = random_data(400, 4, 1, &likelihood, 21);
    let density =
        AutodiffLogDensity::new(MlpPosterior::new(config, &data, &device, DType::F32).unwrap());
    let (d, chains) = (density.dim(), 7);
    let thetas = random_theta(chains * d, 0.5, 33);
    let run = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| evaluate(&density, &thetas, chains))
    };
    let (v1, g1) = run(1);
    let (v3, g3) = run(3);
    assert!(
        v1.iter().all(|v| v.is_finite() && *v != 0.0),
        "every chain evaluated: {v1:?}"
    );
    assert_eq!(v1, v3);
    assert_eq!(g1, g3);
    // And each chain alone gives the same numbers as inside the batch.
    for c in [0, chains - 1] {
        let (v, g) = evaluate(&density, &thetas[c * d..(c + 1) * d], 1);
        assert_eq!(v[0], v1[c]);
        assert_eq!(g, g1[c * d..(c + 1) * d]);
    }
}

#[test]
fn the_tensor_program_in_blocks_of_chains_gives_the_same_results() {
    // A call whose activations exceed the device's largest buffer runs in blocks of chains
    // (`with_max_tensor_bytes` forces that here): every chain must come out as in one block.
    let likelihood = bnn_model::Likelihood::GaussianHeteroscedastic {
        link: bnn_model::ScaleLink::Exp,
    };
    let config = BnnConfig::new(3)
        .with_hidden(vec![8, 8])
        .with_activation(Activation::Tanh)
        .with_likelihood(likelihood);
    let data = random_data(30, 3, 1, &likelihood, 8);
    // Widest block per chain: 30 rows × 8 columns × 4 bytes; cap at 2 chains → blocks 2,2,2,1.
    let cap = 2 * 30 * 8 * 4;
    for name in [DeviceName::Flex, DeviceName::Wgpu] {
        let Some(device) = name.test_device("blocked tensor programs") else {
            continue;
        };
        let build = || {
            MlpPosterior::new(config.clone(), &data, &device, DType::F32)
                .unwrap()
                .with_gradient_path(GradientPath::TensorOps)
        };
        let whole = AutodiffLogDensity::new(build());
        let blocks = AutodiffLogDensity::new(build().with_max_tensor_bytes(cap));
        let (d, chains) = (whole.dim(), 7);
        let thetas = random_theta(chains * d, 0.5, 41);
        let (wv, wg) = evaluate(&whole, &thetas, chains);
        let (bv, bg) = evaluate(&blocks, &thetas, chains);
        assert!(wv.iter().all(|v| v.is_finite()), "{name}: {wv:?}");
        for c in 0..chains {
            let rel = ((wv[c] - bv[c]) / wv[c]).abs();
            assert!(
                rel <= 1e-6,
                "{name} chain {c}: value {} in blocks vs {} whole",
                bv[c],
                wv[c]
            );
            let (g, r) = (&bg[c * d..(c + 1) * d], &wg[c * d..(c + 1) * d]);
            let scale = r.iter().fold(0.0f64, |m, v| m.max(v.abs()));
            let worst = g
                .iter()
                .zip(r)
                .fold(0.0f64, |m, (a, b)| m.max((a - b).abs()));
            assert!(
                worst <= 1e-6 * scale,
                "{name} chain {c}: gradient differs by {worst:e} on scale {scale:e}"
            );
        }
    }
}

#[test]
fn wgpu_kernels_cover_grids_larger_than_one_launch_axis() {
    // 4400 chains × 80 rows × 50 units = 17.6M units: more than 65,535 cubes of 256 on one axis
    // (wgpu's limit), so the launch spreads over two axes. The first and last chains of the
    // batch must match the same chains evaluated alone.
    let Some(device) = wgpu_device() else { return };
    let likelihood = bnn_model::Likelihood::GaussianFixed { sigma: 0.1 };
    let config = BnnConfig::new(1)
        .with_hidden(vec![50])
        .with_activation(Activation::Sigmoid)
        .with_likelihood(likelihood);
    let data = random_data(80, 1, 1, &likelihood, 3);
    let density =
        AutodiffLogDensity::new(MlpPosterior::new(config, &data, &device, DType::F32).unwrap());
    let (d, chains) = (density.dim(), 4400);
    let thetas = random_theta(chains * d, 0.5, 17);
    let (values, grads) = evaluate(&density, &thetas, chains);
    for c in [0, 1, chains / 2, chains - 1] {
        let (v, g) = evaluate(&density, &thetas[c * d..(c + 1) * d], 1);
        let rel = ((values[c] - v[0]) / v[0]).abs();
        assert!(
            rel <= 1e-6,
            "chain {c}: {} in the batch vs {} alone",
            values[c],
            v[0]
        );
        let scale = g.iter().fold(0.0f64, |m, x| m.max(x.abs()));
        let worst = g
            .iter()
            .zip(&grads[c * d..(c + 1) * d])
            .fold(0.0f64, |m, (a, b)| m.max((a - b).abs()));
        assert!(
            worst <= 1e-6 * scale,
            "chain {c}: gradient differs by {worst:e} on scale {scale:e}"
        );
    }
}

#[test]
fn direct_host_path_equals_the_autodiff_round_trip_to_the_last_bit() {
    // The sampler's density calls the host kernel without tensors; it must return exactly what
    // the Burn operation returns through autodiff, for every activation and head, in f32 and
    // f64, one chain and a batch large enough to be split over threads.
    for name in [DeviceName::Ndarray, DeviceName::Flex] {
        let device = name.device().unwrap();
        for dtype in [DType::F32, DType::F64] {
            for (a, activation) in Activation::ALL.into_iter().enumerate() {
                for (l, likelihood) in all_likelihoods().into_iter().enumerate() {
                    let config = BnnConfig::new(3)
                        .with_hidden(vec![24, 24])
                        .with_activation(activation)
                        .with_likelihood(likelihood);
                    let data = random_data(120, 3, 1, &likelihood, 7 + a as u64);
                    let build =
                        || MlpPosterior::new(config.clone(), &data, &device, dtype).unwrap();
                    let direct = AutodiffLogDensity::new(build());
                    let round_trip = AutodiffLogDensity::new(build()).through_autodiff();
                    let d = direct.dim();
                    for chains in [1, 40] {
                        let thetas = random_theta(chains * d, 0.8, 1000 * l as u64 + chains as u64);
                        let (dv, dg) = evaluate(&direct, &thetas, chains);
                        let (rv, rg) = evaluate(&round_trip, &thetas, chains);
                        let what =
                            format!("{name} {dtype:?} {activation} {likelihood:?} C={chains}");
                        assert_eq!(bits(&dv), bits(&rv), "{what}: values");
                        assert_eq!(bits(&dg), bits(&rg), "{what}: gradients");
                        // The forward-only path (a surrogate leaf's true value) gives the same values.
                        let mut values = vec![0.0; chains];
                        direct.log_density(&thetas, &mut values).unwrap();
                        assert_eq!(bits(&values), bits(&dv), "{what}: value-only path");
                    }
                }
            }
        }
    }
}

#[test]
fn direct_device_path_equals_the_autodiff_round_trip_to_the_last_bit() {
    // On wgpu the sampler's density calls the fused operation without a graph and reads value and
    // gradient back in one transfer; it must return exactly what the autodiff path returns, for
    // the device kernel and the tensor program, every head, one chain and a batch.
    let Some(device) = wgpu_device() else { return };
    for path in [GradientPath::Auto, GradientPath::TensorOps] {
        for (l, likelihood) in all_likelihoods().into_iter().enumerate() {
            let config = BnnConfig::new(3)
                .with_hidden(vec![8, 8])
                .with_activation(Activation::Tanh)
                .with_likelihood(likelihood);
            let data = random_data(70, 3, 1, &likelihood, 11 + l as u64);
            let build = || {
                MlpPosterior::new(config.clone(), &data, &device, DType::F32)
                    .unwrap()
                    .with_gradient_path(path)
            };
            let direct = AutodiffLogDensity::new(build());
            let round_trip = AutodiffLogDensity::new(build()).through_autodiff();
            let d = direct.dim();
            for chains in [1, 40] {
                let thetas = random_theta(chains * d, 0.8, 100 * l as u64 + chains as u64);
                let what = format!("{path:?} {likelihood:?} C={chains}");
                assert!(
                    direct
                        .posterior()
                        .device_log_posterior_and_gradient(&thetas, chains)
                        .is_some(),
                    "{what}: the direct device path is not taken"
                );
                let (dv, dg) = evaluate(&direct, &thetas, chains);
                let (rv, rg) = evaluate(&round_trip, &thetas, chains);
                assert_eq!(bits(&dv), bits(&rv), "{what}: values");
                assert_eq!(bits(&dg), bits(&rg), "{what}: gradients");
                let mut values = vec![0.0; chains];
                direct.log_density(&thetas, &mut values).unwrap();
                assert_eq!(bits(&values), bits(&dv), "{what}: value-only path");
            }
        }
    }
}

#[test]
fn device_kernel_covers_a_32_32_net() {
    // 1,410 parameters: each thread owns several of them (their sums in registers), and the
    // layers' unrolled loops are 8 × 32 and 32 × 32.
    let Some(device) = wgpu_device() else { return };
    let likelihood = bnn_model::Likelihood::GaussianHeteroscedastic {
        link: bnn_model::ScaleLink::Exp,
    };
    let config = BnnConfig::new(8)
        .with_hidden(vec![32, 32])
        .with_activation(Activation::Tanh)
        .with_likelihood(likelihood);
    let data = random_data(100, 8, 1, &likelihood, 13);
    let build = |path| {
        MlpPosterior::new(config.clone(), &data, &device, DType::F32)
            .unwrap()
            .with_gradient_path(path)
    };
    let kernel = build(GradientPath::Auto);
    assert_eq!(kernel.gradient_program(), "device_kernel");
    let (kernel, tensor_ops) = (
        AutodiffLogDensity::new(kernel),
        AutodiffLogDensity::new(build(GradientPath::TensorOps)),
    );
    let (d, chains) = (kernel.dim(), 3);
    assert_eq!(d, 1410);
    let thetas = random_theta(chains * d, 0.3, 78);
    let (kv, kg) = evaluate(&kernel, &thetas, chains);
    let (tv, tg) = evaluate(&tensor_ops, &thetas, chains);
    for c in 0..chains {
        let rel = ((kv[c] - tv[c]) / tv[c]).abs();
        assert!(
            rel <= 1e-5,
            "chain {c}: value {} vs {} (rel {rel:e})",
            kv[c],
            tv[c]
        );
        let err = gradient_error(&kg[c * d..(c + 1) * d], &tg[c * d..(c + 1) * d]);
        assert!(err <= 1e-5, "chain {c}: gradient error {err:e}");
    }
}

#[test]
fn device_kernel_layouts_give_the_same_numbers() {
    // Every layout of the device kernel holds each parameter's sum over the same rows in the same
    // order as the default (one parameter per thread, inputs in shared memory): 2 × 2 tiles, the
    // inputs read from global memory (the first layer's weights then have their own owners and
    // its tiles cover only the bias row), and both. A 4-6-5 net has an odd count of (bias +
    // input) rows in its first two layers, and 5 units leave tiles with one live column: tiles
    // with one, two and four live slots. 150 rows make three row blocks, the last one short;
    // two targets give the heteroscedastic head four outputs. (A large unrolled kernel takes
    // minutes to compile on lavapipe: three nets, not every head.)
    let Some(device) = wgpu_device() else { return };
    use bnn_model::fused_mlp::{GradientTile, InputColumns};
    let heteroscedastic = bnn_model::Likelihood::GaussianHeteroscedastic {
        link: bnn_model::ScaleLink::Exp,
    };
    let fixed = bnn_model::Likelihood::GaussianFixed { sigma: 0.4 };
    // 8-16-16 (concrete's net): 121 tiles, two per thread at 64 rows per block; 128 input
    // weights, two per thread.
    let nets = [
        (4, vec![6, 5], 2, heteroscedastic),
        (3, vec![7], 2, fixed),
        (8, vec![16, 16], 1, heteroscedastic),
    ];
    let layouts = [
        (GradientTile::TwoByTwo, InputColumns::Shared),
        (GradientTile::Single, InputColumns::Global),
        (GradientTile::TwoByTwo, InputColumns::Global),
    ];
    for (n, (inputs, hidden, targets, likelihood)) in nets.into_iter().enumerate() {
        let config = BnnConfig::new(inputs)
            .with_hidden(hidden.clone())
            .with_activation(Activation::Tanh)
            .with_n_targets(targets)
            .with_likelihood(likelihood)
            .with_prior(priors()[n % 2].clone());
        let data = random_data(150, inputs, targets, &likelihood, 70 + n as u64);
        let build = |tile, columns| {
            let posterior = MlpPosterior::new(config.clone(), &data, &device, DType::F32)
                .unwrap()
                .with_gradient_tile(tile)
                .with_input_columns(columns);
            assert_eq!(posterior.gradient_program(), "device_kernel");
            AutodiffLogDensity::new(posterior)
        };
        let default = build(GradientTile::Single, InputColumns::Shared);
        let (d, chains) = (default.dim(), 5);
        let thetas = random_theta(chains * d, 0.5, 400 + n as u64);
        let (sv, sg) = evaluate(&default, &thetas, chains);
        for (tile, columns) in layouts {
            let (tv, tg) = evaluate(&build(tile, columns), &thetas, chains);
            let what = format!(
                "{likelihood:?} {inputs}-{hidden:?}, tile {}, inputs {}",
                tile.name(),
                columns.name()
            );
            for c in 0..chains {
                let rel = ((tv[c] - sv[c]) / sv[c]).abs();
                assert!(
                    rel <= 1e-6,
                    "{what} chain {c}: value {} vs {}",
                    tv[c],
                    sv[c]
                );
                let err = gradient_error(&tg[c * d..(c + 1) * d], &sg[c * d..(c + 1) * d]);
                assert!(err <= 1e-6, "{what} chain {c}: gradient error {err:e}");
            }
            let same = bits(&tg) == bits(&sg) && bits(&tv) == bits(&sv);
            println!("{what}: the same bits as the default layout: {same}");
        }
    }
}

/// The bit patterns of `values`: equality to the last bit, with NaNs compared by payload.
fn bits(values: &[f64]) -> Vec<u64> {
    values.iter().map(|x| x.to_bits()).collect()
}

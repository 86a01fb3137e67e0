//! The batched tensor posterior equals an independent f64 host computation, for every
//! activation, likelihood and prior family, on every device; batches equal single calls.

mod common;

use bnn_model::{
    Activation, AutodiffLogDensity, BnnConfig, LayerPrior, MlpPosterior, Prior, PriorSpec,
};
use bnn_sampler::LogDensity;
use burn::tensor::DType;
use common::*;

fn prior_mix() -> PriorSpec {
    PriorSpec::uniform(Prior::Normal { scale: 1.5 })
        .with_layer(
            0,
            LayerPrior {
                weight: Prior::FanInNormal { scale: 2.0 },
                bias: Prior::Laplace { scale: 0.7 },
            },
        )
        .with_layer(
            2,
            LayerPrior {
                weight: Prior::Laplace { scale: 1.0 },
                bias: Prior::Normal { scale: 0.3 },
            },
        )
}

#[test]
fn value_matches_host_reference_everywhere() {
    for (device_name, device) in devices() {
        let dtype = if has_full_f64(&device) {
            DType::F64
        } else {
            DType::F32
        };
        // f32 accumulates ~1e-7 relative error per op over ~10^3 terms.
        let tol = if dtype == DType::F64 { 1e-9 } else { 2e-4 };
        // Gradients near the σ clip (σ → 1e-6 gives gradients ~1e9) lose more digits in f32.
        let grad_tol = if dtype == DType::F64 { 1e-9 } else { 5e-3 };
        // In f32, weights of scale 1.2 can push σ to the 1e-6 clip, where wgpu's f32 log1p
        // loses ~1e-3 of the softplus link's value; smaller weights keep f32 in its normal range.
        let theta_scale = if dtype == DType::F64 { 1.2 } else { 0.6 };
        for (a, activation) in Activation::ALL.into_iter().enumerate() {
            for (l, likelihood) in all_likelihoods().into_iter().enumerate() {
                let config = BnnConfig::new(3)
                    .with_hidden(vec![5, 4])
                    .with_activation(activation)
                    .with_n_targets(2)
                    .with_likelihood(likelihood)
                    .with_prior(prior_mix());
                let data = random_data(11, 3, 2, &likelihood, (a * 10 + l) as u64);
                let posterior = MlpPosterior::new(config.clone(), &data, &device, dtype).unwrap();
                let density = AutodiffLogDensity::new(posterior);
                let d = density.dim();
                let c = 3;
                let thetas: Vec<f64> = random_theta(c * d, theta_scale, 99 + l as u64);
                let mut values = vec![0.0; c];
                let mut grads = vec![0.0; c * d];
                density
                    .log_density_and_gradient(&thetas, &mut values, &mut grads)
                    .unwrap();
                // Gradients against flex in f64 (itself checked against finite differences).
                let reference = AutodiffLogDensity::new(
                    MlpPosterior::new(
                        config.clone(),
                        &data,
                        &burn::tensor::Device::flex(),
                        DType::F64,
                    )
                    .unwrap(),
                );
                let mut ref_values = vec![0.0; c];
                let mut ref_grads = vec![0.0; c * d];
                reference
                    .log_density_and_gradient(&thetas, &mut ref_values, &mut ref_grads)
                    .unwrap();
                let grad_scale = ref_grads.iter().fold(1.0f64, |m, g| m.max(g.abs()));
                for i in 0..c * d {
                    assert!(
                        (grads[i] - ref_grads[i]).abs() <= grad_tol * grad_scale,
                        "{device_name} {activation} {likelihood:?} gradient {i}: {} vs f64 reference {}",
                        grads[i],
                        ref_grads[i]
                    );
                }
                for chain in 0..c {
                    let theta = &thetas[chain * d..(chain + 1) * d];
                    let expected = reference_log_posterior(&config, &data, theta);
                    let err = (values[chain] - expected).abs() / expected.abs().max(1.0);
                    assert!(
                        err < tol,
                        "{device_name} {activation} {likelihood:?} chain {chain}: {} vs {expected} (rel err {err:e})",
                        values[chain]
                    );
                    // A batch row equals the single evaluation of that row.
                    let mut g1 = vec![0.0; d];
                    let v1 = density.evaluate(theta, &mut g1).unwrap();
                    assert!((v1 - values[chain]).abs() <= tol * v1.abs().max(1.0));
                    for i in 0..d {
                        let gi = grads[chain * d + i];
                        assert!(
                            (g1[i] - gi).abs() <= tol * gi.abs().max(1.0),
                            "{device_name} grad {i}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn bad_inputs_are_errors_not_panics() {
    let device = burn::tensor::Device::flex();
    let config = BnnConfig::new(2).with_hidden(vec![3]);
    let likelihood = config.likelihood;
    // Wrong feature count.
    let data = random_data(5, 3, 1, &likelihood, 1);
    let err = MlpPosterior::new(config.clone(), &data, &device, DType::F32)
        .err()
        .unwrap();
    assert!(
        err.to_string().contains("expects 2 input features"),
        "{err}"
    );
    // NaN in x.
    let mut data = random_data(5, 2, 1, &likelihood, 1);
    data.x[3] = f64::NAN;
    let err = MlpPosterior::new(config.clone(), &data, &device, DType::F32)
        .err()
        .unwrap();
    assert!(err.to_string().contains("row 1, column 1"), "{err}");
    // A hidden width of zero.
    let err = MlpPosterior::new(
        config.clone().with_hidden(vec![0]),
        &random_data(5, 2, 1, &likelihood, 1),
        &device,
        DType::F32,
    )
    .err()
    .unwrap();
    assert!(err.to_string().contains("width 0"), "{err}");
    // A label outside the classes.
    let cat = bnn_model::Likelihood::Categorical { classes: 2 };
    let mut data = random_data(5, 2, 1, &cat, 1);
    data.y[2] = 2.0;
    let err = MlpPosterior::new(
        config.clone().with_likelihood(cat),
        &data,
        &device,
        DType::F32,
    )
    .err()
    .unwrap();
    assert!(err.to_string().contains("label 2"), "{err}");
    // A batch of the wrong size.
    let density = AutodiffLogDensity::new(
        MlpPosterior::new(
            config,
            &random_data(5, 2, 1, &likelihood, 1),
            &device,
            DType::F32,
        )
        .unwrap(),
    );
    let mut v = vec![0.0; 1];
    let mut g = vec![0.0; 3];
    assert!(density
        .log_density_and_gradient(&[0.0; 3], &mut v, &mut g)
        .is_err());
}

#[test]
fn f64_on_wgpu_is_an_error_before_any_shader_is_compiled() {
    // NVIDIA's Vulkan compiler rejects f64 exp/tanh/log shaders and poisons the device; the
    // posterior refuses f64 on wgpu up front (and f32 still works there).
    let Some(device) = bnn_model::wgpu_test_device("f64 on wgpu") else {
        return;
    };
    let config = BnnConfig::new(2).with_hidden(vec![3]);
    let data = random_data(5, 2, 1, &config.likelihood, 1);
    let err = MlpPosterior::new(config.clone(), &data, &device, DType::F64)
        .err()
        .expect("f64 on wgpu must be refused");
    assert!(err.to_string().contains("F32 only"), "{err}");
    assert!(MlpPosterior::new(config, &data, &device, DType::F32).is_ok());
    assert!(bnn_model::check_dtype(&burn::tensor::Device::flex(), DType::F64).is_ok());
}

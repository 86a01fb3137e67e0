//! Burn's autodiff gradient of the posterior against central finite differences, for every
//! activation and likelihood, away from ReLU kinks, on ndarray, flex and wgpu.

mod common;

use bnn_model::{Activation, AutodiffLogDensity, BnnConfig, MlpPosterior};
use bnn_sampler::LogDensity;
use burn::tensor::DType;
use common::*;

#[test]
fn autodiff_matches_finite_differences() {
    for (device_name, device) in devices() {
        // f64 where the backend has it: central differences then have ~1e-10 relative error, so
        // 1e-6 fails any real gradient mistake. Without full f64 (wgpu), f32 with a coarser step:
        // rounding (~1e-7·|f|/h) and truncation (~h²) errors stay near 1e-3, so 1e-2 still fails
        // a wrong factor, sign or missing term.
        let f64_ok = has_full_f64(&device);
        let (dtype, h, tol) = if f64_ok {
            (DType::F64, 1e-5, 1e-6)
        } else {
            (DType::F32, 3e-3, 1e-2)
        };
        if !f64_ok {
            eprintln!("{device_name}: no full-precision f64, checking in f32 with step {h}");
        }
        for (a, activation) in Activation::ALL.into_iter().enumerate() {
            for (l, likelihood) in all_likelihoods().into_iter().enumerate() {
                let config = BnnConfig::new(2)
                    .with_hidden(vec![4, 3])
                    .with_activation(activation)
                    .with_n_targets(1)
                    .with_likelihood(likelihood);
                let data = random_data(7, 2, 1, &likelihood, 7 + a as u64);
                let density = AutodiffLogDensity::new(
                    MlpPosterior::new(config.clone(), &data, &device, dtype).unwrap(),
                );
                let d = density.dim();
                // Draw θ until every hidden pre-activation is far from a kink compared to the
                // finite-difference step (a kink inside [θ-h, θ+h] breaks the FD estimate).
                let theta = (0..1000u64)
                    .map(|s| random_theta(d, 1.0, 1000 * l as u64 + s))
                    .find(|t| kink_distance(&config, &data, t) > 20.0 * h)
                    .expect("a point away from kinks");
                let mut grad = vec![0.0; d];
                let f0 = density.evaluate(&theta, &mut grad).unwrap();
                // In f32 the difference of two values of size |f| carries rounding error of a
                // few ulps of |f|, divided by 2h; allow for it on top of the relative tolerance.
                let rounding = if f64_ok {
                    0.0
                } else {
                    20.0 * f32::EPSILON as f64 * f0.abs() / h
                };
                let mut scratch = vec![0.0; d];
                for i in 0..d {
                    let mut plus = theta.clone();
                    plus[i] += h;
                    let mut minus = theta.clone();
                    minus[i] -= h;
                    let fd = (density.evaluate(&plus, &mut scratch).unwrap()
                        - density.evaluate(&minus, &mut scratch).unwrap())
                        / (2.0 * h);
                    let err = (grad[i] - fd).abs();
                    assert!(
                        err < tol * fd.abs().max(1.0) + rounding,
                        "{device_name} {activation} {likelihood:?} coordinate {i}: autodiff {} vs finite difference {fd}",
                        grad[i]
                    );
                }
            }
        }
    }
}

//! Every hidden activation through every pass of the host kernel, at every SIMD level this CPU
//! has: the fused value and gradient (f32) against Burn's autodiff of the plain tensor graph on
//! shapes that take each pass: one input and one hidden layer (1-50-1 with a partial chunk of
//! 16 units, 1-16-2), narrow layers (concrete's 8-16-16-2 and yacht's 6-16-16-2 nets, a 3-5-4
//! net with partial groups of units; 100 rows leave a partial block of 16), and a 70-unit layer
//! (the general pass through `gemm`).
//!
//! Tolerance as in `fused_gradient.rs`: 1e-5 of the value and of the gradient's largest
//! coordinate, room for f32 rounding in two different orders but not for a wrong term.

mod common;

use bnn_model::{
    Activation, AutodiffLogDensity, BnnConfig, DeviceName, GradientPath, Likelihood, MlpPosterior,
    ScaleLink,
};
use bnn_sampler::LogDensity;
use burn::tensor::DType;
use common::*;

const TEST: &str = "host_kernel_matches_autodiff_for_every_activation_pass_and_instruction_set";

/// (inputs, hidden widths, likelihood, rows), one per pass and layout of the host kernel.
fn shapes() -> Vec<(usize, Vec<usize>, Likelihood, usize)> {
    let hetero = Likelihood::GaussianHeteroscedastic {
        link: ScaleLink::Exp,
    };
    let fixed = Likelihood::GaussianFixed { sigma: 0.1 };
    vec![
        (1, vec![50], fixed, 80),
        (1, vec![16], hetero, 40),
        (8, vec![16, 16], hetero, 100),
        (6, vec![16, 16], hetero, 100),
        (3, vec![5, 4], Likelihood::Categorical { classes: 3 }, 37),
        (3, vec![70], fixed, 30),
    ]
}

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

#[test]
fn host_kernel_matches_autodiff_for_every_activation_pass_and_instruction_set() {
    at_every_instruction_set(TEST, || {
        let device = DeviceName::Flex.device().unwrap();
        let (chains, tol) = (3, 1e-5);
        for (s, (inputs, hidden, likelihood, rows)) in shapes().into_iter().enumerate() {
            for (a, activation) in Activation::ALL.into_iter().enumerate() {
                let config = BnnConfig::new(inputs)
                    .with_hidden(hidden.clone())
                    .with_activation(activation)
                    .with_likelihood(likelihood);
                let data = random_data(rows, inputs, 1, &likelihood, 10 * s as u64 + a as u64);
                let build = |path| {
                    MlpPosterior::new(config.clone(), &data, &device, DType::F32)
                        .unwrap()
                        .with_gradient_path(path)
                };
                let fused = build(GradientPath::Auto);
                assert_eq!(fused.gradient_program(), "host_kernel");
                let (fused, plain) = (
                    AutodiffLogDensity::new(fused),
                    AutodiffLogDensity::new(build(GradientPath::Plain)),
                );
                let d = fused.dim();
                // Weights shrink with the fan-in, so wide layers keep pre-activations of order 1.
                // With thousands of them, none within 1e-3 of a kink is rare; 1e-5 is still far
                // beyond the two paths' f32 rounding of a pre-activation (~1e-7).
                let scale = 1.5 / (hidden[0] as f64).sqrt().max(1.0);
                let mut thetas = Vec::new();
                for c in 0..chains as u64 {
                    let theta = (0..1000u64)
                        .map(|t| random_theta(d, scale, 1000 * s as u64 + 100 * c + t))
                        .find(|t| kink_distance(&config, &data, t) > 1e-5)
                        .expect("a point away from kinks");
                    thetas.extend(theta);
                }
                let (fv, fg) = evaluate(&fused, &thetas, chains);
                let (pv, pg) = evaluate(&plain, &thetas, chains);
                for c in 0..chains {
                    let what = format!("{activation} {inputs}-{hidden:?} {likelihood:?} chain {c}");
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
    });
}

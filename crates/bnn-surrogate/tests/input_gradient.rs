//! The closed-form input gradient of the Burn module against central finite differences of its
//! Hamiltonian.

mod support;

use bnn_surrogate::LatentHnnConfig;
use burn::tensor::{DType, Device};
use support::{host, tensor, uniform};

#[test]
fn closed_form_input_gradient_matches_finite_differences() {
    let device = Device::flex();
    // f64 makes the check sharp: with step 1e-5 the central difference has truncation error
    // ~1e-10·|H'''| and rounding error ~1e-16·|H|/1e-5 ~ 1e-11, so 1e-7 leaves a wide margin
    // while any wrong term in the closed form (a missing cos, a transposed weight) is O(1).
    let (dtype, step, tolerance) = if device.supports_dtype(DType::F64) {
        (DType::F64, 1e-5, 1e-7)
    } else {
        // f32: rounding error ~6e-8·|H|/step ≈ 6e-5 at step 1e-3, truncation ~1e-6.
        (DType::F32, 1e-3, 2e-3)
    };
    for (dim, latent) in [(3, None), (2, Some(5))] {
        let config = LatentHnnConfig::new(dim)
            .with_hidden_width(16)
            .with_hidden_layers(3)
            .with_latent_outputs(latent);
        let network = config.init(&device, dtype, 7);
        let rows = 4;
        let width = 2 * dim;
        let x = uniform(rows * width, 1.5, 11);
        let closed_form = host(network.input_gradient(tensor(&x, rows, width, &device, dtype)));
        for row in 0..rows {
            for col in 0..width {
                let shifted = |delta: f64| {
                    let mut point = x[row * width..(row + 1) * width].to_vec();
                    point[col] += delta;
                    host(network.hamiltonian(tensor(&point, 1, width, &device, dtype)))[0]
                };
                let numeric = (shifted(step) - shifted(-step)) / (2.0 * step);
                let exact = closed_form[row * width + col];
                assert!(
                    (numeric - exact).abs() <= tolerance * (1.0 + exact.abs()),
                    "d={dim} row {row} col {col}: closed form {exact}, finite differences {numeric}"
                );
            }
        }
    }
}

#[test]
fn hamiltonian_is_the_sum_of_latent_outputs() {
    let device = Device::flex();
    let network = LatentHnnConfig::new(2)
        .with_hidden_width(8)
        .with_latent_outputs(Some(3))
        .init(&device, DType::F32, 1);
    let x = uniform(3 * 4, 1.0, 2);
    let latent = host(network.latent(tensor(&x, 3, 4, &device, DType::F32)));
    let hamiltonian = host(network.hamiltonian(tensor(&x, 3, 4, &device, DType::F32)));
    assert_eq!(network.dim(), 2);
    for (row, h) in hamiltonian.iter().enumerate() {
        let sum: f64 = latent[row * 3..row * 3 + 3].iter().sum();
        assert!((sum - h).abs() < 1e-5, "row {row}: sum {sum}, H {h}");
    }
}

#[test]
fn initialization_is_fixed_by_the_seed() {
    let device = Device::flex();
    let config = LatentHnnConfig::new(2).with_hidden_width(8);
    let x = uniform(2 * 4, 1.0, 3);
    let h = |seed| {
        host(config.init(&device, DType::F32, seed).hamiltonian(tensor(
            &x,
            2,
            4,
            &device,
            DType::F32,
        )))
    };
    assert_eq!(h(5), h(5));
    assert_ne!(h(5), h(6));
}

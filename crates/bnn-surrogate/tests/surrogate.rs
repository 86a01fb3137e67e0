//! The f64 surrogate against the Burn module it was copied from, its force, and its JSON form.

mod support;

use bnn_sampler::dynamics::surrogate::SurrogateGradient;
use bnn_surrogate::{LatentHnnConfig, LhnnSurrogate};
use burn::tensor::{DType, Device};
use support::{host, tensor, uniform};

const DIM: usize = 3;

fn config() -> LatentHnnConfig {
    LatentHnnConfig::new(DIM)
        .with_hidden_width(24)
        .with_hidden_layers(3)
}

/// Compares the surrogate's H and ∂H/∂x with the module's at a few phase points.
fn compare_with_module(dtype: DType, tolerance: f64) {
    let device = Device::flex();
    let network = config().init(&device, dtype, 3);
    let surrogate = LhnnSurrogate::from_module(&network);
    assert_eq!(surrogate.dim(), DIM);
    let rows = 5;
    let width = 2 * DIM;
    let x = uniform(rows * width, 2.0, 4);
    let module_h = host(network.hamiltonian(tensor(&x, rows, width, &device, dtype)));
    let module_gradient = host(network.input_gradient(tensor(&x, rows, width, &device, dtype)));
    let mut gradient = vec![0.0; width];
    for row in 0..rows {
        let point = &x[row * width..(row + 1) * width];
        let (q, p) = point.split_at(DIM);
        let h = surrogate.hamiltonian(q, p);
        assert!(
            (h - module_h[row]).abs() <= tolerance * (1.0 + h.abs()),
            "row {row}: H {h} vs module {}",
            module_h[row]
        );
        surrogate.input_gradient(q, p, &mut gradient);
        for (col, (g, m)) in gradient
            .iter()
            .zip(&module_gradient[row * width..])
            .enumerate()
        {
            assert!(
                (g - m).abs() <= tolerance * (1.0 + g.abs()),
                "row {row} col {col}: {g} vs module {m}"
            );
        }
    }
}

#[test]
fn surrogate_agrees_with_the_f32_module_to_f32_rounding() {
    // The weights are the same numbers (f32 values copied exactly into f64); only the module's
    // f32 arithmetic differs: ~6e-8 relative per operation, summed over 24-wide dot products
    // and three layers, stays well under 1e-5.
    compare_with_module(DType::F32, 1e-5);
}

#[test]
fn surrogate_agrees_with_the_f64_module_exactly() {
    let device = Device::flex();
    if !device.supports_dtype(DType::F64) {
        eprintln!("skipping: flex has no f64");
        return;
    }
    // Same arithmetic in a different order: agreement to f64 rounding.
    compare_with_module(DType::F64, 1e-12);
}

#[test]
fn force_is_minus_dh_dq_at_zero_momentum() {
    let network = config().init(&Device::flex(), DType::F32, 5);
    let surrogate = LhnnSurrogate::from_module(&network);
    let chains = 4;
    let positions = uniform(chains * DIM, 2.0, 6);
    let mut forces = vec![0.0; chains * DIM];
    surrogate.gradient(&positions, &mut forces).unwrap();
    let mut gradient = vec![0.0; 2 * DIM];
    for (q, force) in positions.chunks_exact(DIM).zip(forces.chunks_exact(DIM)) {
        surrogate.input_gradient(q, &[0.0; DIM], &mut gradient);
        for (f, dh_dq) in force.iter().zip(&gradient[..DIM]) {
            assert!((f + dh_dq).abs() < 1e-12, "force {f}, ∂H/∂q {dh_dq}");
        }
    }
    assert_eq!(SurrogateGradient::dim(&surrogate), DIM);
    assert!(
        surrogate
            .gradient(&positions[..DIM + 1], &mut forces[..DIM + 1])
            .is_err(),
        "a ragged batch is refused"
    );
    assert!(
        surrogate.gradient(&positions, &mut forces[..DIM]).is_err(),
        "mismatched lengths are refused"
    );
}

#[test]
fn json_round_trip_keeps_the_surrogate() {
    let surrogate = LhnnSurrogate::from_module(&config().init(&Device::flex(), DType::F32, 8));
    let json = serde_json::to_string(&surrogate).unwrap();
    let loaded: LhnnSurrogate = serde_json::from_str(&json).unwrap();
    assert_eq!(loaded, surrogate);
    let q = [0.3, -0.2, 1.1];
    let (mut a, mut b) = (vec![0.0; DIM], vec![0.0; DIM]);
    surrogate.gradient(&q, &mut a).unwrap();
    loaded.gradient(&q, &mut b).unwrap();
    assert_eq!(a, b);

    // Weights that do not fit together are refused on load, not at the first evaluation.
    let mut value: serde_json::Value = serde_json::from_str(&json).unwrap();
    value["hidden"][1]["weight"].as_array_mut().unwrap().pop();
    let error = serde_json::from_value::<LhnnSurrogate>(value).unwrap_err();
    assert!(error.to_string().contains("layer 1"), "{error}");
}

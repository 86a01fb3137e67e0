//! Deep-ensemble training with Burn's Adam: members fit the data, differ from each other, and
//! are reproducible from their seed.

mod common;

use bnn_model::{Activation, BnnConfig, EnsembleConfig, HostData, Likelihood, MlpPosterior, PredictiveAccumulator};
use burn::tensor::{DType, Device};

fn cos2x_data(rows: usize, seed: u64) -> HostData {
    let d = bnn_data_free_cos2x(rows, seed);
    HostData::new(d.0, rows, 1, d.1, 1)
}

/// y = cos(2x) + 0.1 ε on x ∈ [0, 4], written here to keep bnn-model free of the data crate.
fn bnn_data_free_cos2x(rows: usize, seed: u64) -> (Vec<f64>, Vec<f64>) {
    let x = common::random_theta(rows, 1.0, seed).iter().map(|u| 2.0 + 2.0 * u).collect::<Vec<_>>();
    let noise = common::random_theta(rows, 1.0, seed + 1);
    // Uniform noise with sd 0.1: half-width 0.1·sqrt(3).
    let y = x.iter().zip(&noise).map(|(x, e)| (2.0 * x).cos() + 0.1 * 3f64.sqrt() * e).collect();
    (x, y)
}

#[test]
fn adam_members_fit_and_are_reproducible() {
    let device = Device::flex();
    let model = BnnConfig::new(1)
        .with_hidden(vec![16])
        .with_activation(Activation::Tanh)
        .with_likelihood(Likelihood::GaussianFixed { sigma: 0.1 });
    let train = cos2x_data(80, 5);
    let test = cos2x_data(40, 50);
    let config = EnsembleConfig::new().with_members(3).with_epochs(1500).with_learning_rate(1e-2).with_weight_decay(1e-4).with_seed(9);
    let members = config.train(&model, &train, &device, 2).unwrap();
    assert_eq!(members.len(), 3);
    let posterior = MlpPosterior::new(model.clone(), &train, &device, DType::F32).unwrap();
    for m in &members {
        assert!(m.final_loss < 0.2 * m.initial_loss, "member {}: loss {} -> {}", m.index, m.initial_loss, m.final_loss);
        // Test RMSE of a trained member: the noise is 0.1, an untrained net is ~0.7.
        let theta: Vec<f64> = m.parameters.iter().map(|&v| v as f64).collect();
        let mut acc = PredictiveAccumulator::new(&test.y, 1);
        for draw in posterior.predictions(&theta, &test) {
            acc.add_draw(&draw);
        }
        let rmse = acc.finish().rmse;
        assert!(rmse < 0.3, "member {} test RMSE {rmse}", m.index);
    }
    assert_ne!(members[0].parameters, members[1].parameters, "members start from different seeds");
    // Same seed and member index: the same weights, whatever the thread count.
    let again = config.train(&model, &train, &device, 1).unwrap();
    assert_eq!(again[2].parameters, members[2].parameters);
    // Impossible settings are errors.
    assert!(config.clone().with_learning_rate(-1.0).train(&model, &train, &device, 1).is_err());
    assert!(config.clone().with_members(0).train(&model, &train, &device, 1).is_err());
}

//! A user's own module through `ModulePosterior` gives the same posterior as the built-in
//! batched MLP path when the module is the same network.

mod common;

use bnn_model::{
    flatten, Activation, AutodiffLogDensity, BnnConfig, BnnModel, Likelihood, MlpPosterior,
    ModulePosterior, Prior, PriorSpec,
};
use bnn_sampler::LogDensity;
use burn::tensor::{DType, Device, Tensor, TensorData};
use common::*;

#[test]
fn generic_module_path_equals_batched_mlp_path() {
    let device = Device::flex();
    let likelihood = Likelihood::GaussianFixed { sigma: 0.3 };
    let config = BnnConfig::new(2)
        .with_hidden(vec![6])
        .with_activation(Activation::Tanh)
        .with_likelihood(likelihood)
        .with_prior(PriorSpec::uniform(Prior::Laplace { scale: 0.8 }));
    let data = random_data(9, 2, 1, &likelihood, 3);
    let batched = AutodiffLogDensity::new(
        MlpPosterior::new(config.clone(), &data, &device, DType::F32).unwrap(),
    );

    let ad = device.clone().autodiff();
    let x = Tensor::<2>::from_data(
        TensorData::new(data.x.clone(), [9, 2]).convert::<f32>(),
        &ad,
    );
    let y = Tensor::<2>::from_data(
        TensorData::new(data.y.clone(), [9, 1]).convert::<f32>(),
        &ad,
    );
    let sigma = 0.3f64;
    let log_likelihood = move |model: &BnnModel| -> Tensor<1> {
        let r = (model.forward(x.clone()) - y.clone()).div_scalar(sigma);
        let n = 9.0;
        r.powi_scalar(2)
            .sum()
            .mul_scalar(-0.5)
            .sub_scalar(n * (sigma.ln() + 0.5 * (2.0 * std::f64::consts::PI).ln()))
    };
    let generic = AutodiffLogDensity::new(
        ModulePosterior::new(config.init(&device), log_likelihood, &config.prior, &device).unwrap(),
    );
    assert_eq!(generic.dim(), batched.dim());
    assert_eq!(flatten(&config.init(&device)).len(), batched.dim());

    let d = batched.dim();
    let c = 2;
    let theta = random_theta(c * d, 1.0, 5);
    let (mut v1, mut v2) = (vec![0.0; c], vec![0.0; c]);
    let (mut g1, mut g2) = (vec![0.0; c * d], vec![0.0; c * d]);
    batched
        .log_density_and_gradient(&theta, &mut v1, &mut g1)
        .unwrap();
    generic
        .log_density_and_gradient(&theta, &mut v2, &mut g2)
        .unwrap();
    for i in 0..c {
        assert!(
            (v1[i] - v2[i]).abs() < 1e-4 * v1[i].abs().max(1.0),
            "{v1:?} vs {v2:?}"
        );
    }
    for i in 0..c * d {
        assert!(
            (g1[i] - g2[i]).abs() < 1e-4 * g1[i].abs().max(1.0),
            "grad {i}: {} vs {}",
            g1[i],
            g2[i]
        );
    }
}

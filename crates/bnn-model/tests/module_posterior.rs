//! A user's own module through `ModulePosterior` gives the same posterior as the built-in
//! batched MLP path when the module is the same network.

mod common;

use bnn_model::{
    flatten, module_starts, predict_with_draws, Activation, AutodiffLogDensity, BnnConfig,
    BnnModel, HeadError, HeadLikelihood, Likelihood, MlpPosterior, ModulePosterior, Prior,
    PriorSpec,
};
use bnn_sampler::LogDensity;
use burn::tensor::{DType, Device, Tensor, TensorData};
use common::*;

/// The flex device's random generator is process-wide, and every test here initializes modules
/// from it: they take turns, so `module_starts`' seeded draws are not interleaved with another
/// test's initialization.
static DEVICE_GENERATOR: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    DEVICE_GENERATOR
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[test]
fn generic_module_path_equals_batched_mlp_path() {
    let _turn = one_at_a_time();
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

/// The built-in heads applied to a module's output ([`HeadLikelihood`]) give the built-in
/// MLP's posterior, value and gradient, for every head a module can use; the learned-σ head,
/// whose log σ is not a module parameter, is refused by name.
#[test]
fn head_likelihood_on_a_module_equals_the_builtin_mlp_posterior() {
    let _turn = one_at_a_time();
    let device = Device::flex();
    for likelihood in all_likelihoods() {
        let config = BnnConfig::new(2)
            .with_hidden(vec![5])
            .with_activation(Activation::Tanh)
            .with_likelihood(likelihood)
            .with_prior(PriorSpec::uniform(Prior::Normal { scale: 1.3 }));
        let data = random_data(11, 2, 1, &likelihood, 8);
        let x = Tensor::<2>::from_data(TensorData::new(data.x.clone(), [11, 2]), &device);
        let y = Tensor::<2>::from_data(TensorData::new(data.y.clone(), [11, 1]), &device);
        let head = HeadLikelihood::new(likelihood, x, y, |m: &BnnModel, x| m.forward(x));
        if likelihood.has_log_sigma() {
            let error = head.err().expect("the learned-σ head must be refused");
            assert!(matches!(error, HeadError::ExtraParameters(_)), "{error}");
            continue;
        }
        let posterior =
            ModulePosterior::new(config.init(&device), head.unwrap(), &config.prior, &device)
                .unwrap();
        let generic = AutodiffLogDensity::new(posterior);
        let batched = AutodiffLogDensity::new(
            MlpPosterior::new(config.clone(), &data, &device, DType::F32).unwrap(),
        );
        let (c, d) = (2, batched.dim());
        assert_eq!(generic.dim(), d);
        let theta = random_theta(c * d, 1.0, 21);
        let (mut v1, mut v2) = (vec![0.0; c], vec![0.0; c]);
        let (mut g1, mut g2) = (vec![0.0; c * d], vec![0.0; c * d]);
        batched
            .log_density_and_gradient(&theta, &mut v1, &mut g1)
            .unwrap();
        generic
            .log_density_and_gradient(&theta, &mut v2, &mut g2)
            .unwrap();
        let close = |a: f64, b: f64| (a - b).abs() < 1e-4 * a.abs().max(1.0);
        assert!(
            (0..c).all(|i| close(v1[i], v2[i])),
            "{likelihood:?}: {v1:?} vs {v2:?}"
        );
        assert!(
            (0..c * d).all(|i| close(g1[i], g2[i])),
            "{likelihood:?}: gradients differ"
        );

        // Predictions through the module's forward equal the built-in batched outputs.
        let draws: Vec<Vec<f64>> = theta.chunks(d).map(<[f64]>::to_vec).collect();
        let x = Tensor::<2>::from_data(TensorData::new(data.x.clone(), [11, 2]), &device);
        let outputs =
            predict_with_draws(&config.init(&device), &draws, |m| m.forward(x.clone())).unwrap();
        let want = batched.posterior().outputs(&theta, &data);
        let got: Vec<f64> = outputs.into_data().iter::<f64>().collect();
        let k = want[0][0].len();
        for (s, rows) in want.iter().enumerate() {
            for (i, row) in rows.iter().enumerate() {
                for (j, w) in row.iter().enumerate() {
                    let g = got[(s * 11 + i) * k + j];
                    assert!(
                        close(*w, g),
                        "{likelihood:?} output {s},{i},{j}: {w} vs {g}"
                    );
                }
            }
        }
    }
    let empty = predict_with_draws(&BnnConfig::new(2).init(&device), &[vec![0.0; 3]], |m| {
        m.forward(Tensor::zeros([1, 2], &device))
    });
    assert!(empty.is_err(), "a draw of the wrong length must be refused");
}

/// Members built by `module_starts` differ from each other and are reproducible.
#[test]
fn module_starts_are_distinct_and_reproducible() {
    let _turn = one_at_a_time();
    let device = Device::flex();
    let config = BnnConfig::new(1).with_hidden(vec![4]);
    let a = module_starts(3, 5, &device, |d| config.init(d));
    let b = module_starts(3, 5, &device, |d| config.init(d));
    assert_eq!(a, b);
    assert_ne!(a[0], a[1]);
    assert_eq!(a[0].len(), flatten(&config.init(&device)).len());
}

//! Deep-ensemble training with Burn's Adam: members fit the data, differ from each other, and
//! are reproducible from their seed.

mod common;

use bnn_model::{
    Activation, BnnConfig, EnsembleConfig, HostData, Likelihood, MlpPosterior,
    PredictiveAccumulator, WeightInit,
};
use burn::tensor::{DType, Device};

fn cos2x_data(rows: usize, seed: u64) -> HostData {
    let d = bnn_data_free_cos2x(rows, seed);
    HostData::new(d.0, rows, 1, d.1, 1)
}

/// y = cos(2x) + 0.1 ε on x ∈ [0, 4], written here to keep bnn-model free of the data crate.
fn bnn_data_free_cos2x(rows: usize, seed: u64) -> (Vec<f64>, Vec<f64>) {
    let x = common::random_theta(rows, 1.0, seed)
        .iter()
        .map(|u| 2.0 + 2.0 * u)
        .collect::<Vec<_>>();
    let noise = common::random_theta(rows, 1.0, seed + 1);
    // Uniform noise with sd 0.1: half-width 0.1·sqrt(3).
    let y = x
        .iter()
        .zip(&noise)
        .map(|(x, e)| (2.0 * x).cos() + 0.1 * 3f64.sqrt() * e)
        .collect();
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
    let config = EnsembleConfig::new()
        .with_members(3)
        .with_epochs(1500)
        .with_learning_rate(1e-2)
        .with_weight_decay(1e-4)
        .with_seed(9);
    let members = config.train(&model, &train, &device, 2).unwrap();
    assert_eq!(members.len(), 3);
    let posterior = MlpPosterior::new(model.clone(), &train, &device, DType::F32).unwrap();
    for m in &members {
        assert!(
            m.final_loss < 0.2 * m.initial_loss,
            "member {}: loss {} -> {}",
            m.index,
            m.initial_loss,
            m.final_loss
        );
        // Test RMSE of a trained member: the noise is 0.1, an untrained net is ~0.7.
        let theta: Vec<f64> = m.parameters.iter().map(|&v| v as f64).collect();
        let mut acc = PredictiveAccumulator::new(&test.y, 1);
        for draw in posterior.predictions(&theta, &test) {
            acc.add_draw(&draw);
        }
        let rmse = acc.finish().rmse;
        assert!(rmse < 0.3, "member {} test RMSE {rmse}", m.index);
    }
    assert_ne!(
        members[0].parameters, members[1].parameters,
        "members start from different seeds"
    );
    // Same seed and member index: the same weights, whatever the thread count.
    let again = config.train(&model, &train, &device, 1).unwrap();
    assert_eq!(again[2].parameters, members[2].parameters);
    // Impossible settings are errors.
    assert!(config
        .clone()
        .with_learning_rate(-1.0)
        .train(&model, &train, &device, 1)
        .is_err());
    assert!(config
        .clone()
        .with_members(0)
        .train(&model, &train, &device, 1)
        .is_err());
}

fn to_f64(v: &[f32]) -> Vec<f64> {
    v.iter().map(|&x| x as f64).collect()
}

/// The pre-minibatch full-batch loop, written out again with the public API: `batch_size =
/// None` must give exactly these weights and losses.
fn reference_full_batch(
    config: &EnsembleConfig,
    model: &BnnConfig,
    train: &HostData,
    device: &Device,
    index: usize,
) -> (Vec<f32>, f64, f64) {
    use bnn_model::observations::DeviceData;
    use bnn_model::{flatten, initial_parameters, layout_of, unflatten, BnnModel};
    use burn::optim::decay::WeightDecayConfig;
    use burn::optim::{AdamConfig, AdamWConfig, GradientsParams};
    let device = device.clone().autodiff();
    let template = model.init(&device);
    let init: Vec<f32> = initial_parameters(&layout_of(&template), config.seed, index as u64)
        .iter()
        .map(|&v| v as f32)
        .collect();
    let mut network: BnnModel = unflatten(template, &init).unwrap();
    let data = DeviceData::upload(train, &model.likelihood, &device, DType::F32);
    let mut optimizer = if config.decoupled_weight_decay {
        AdamWConfig::new()
            .with_weight_decay(config.weight_decay as f32)
            .init()
    } else {
        let decay =
            (config.weight_decay > 0.0).then(|| WeightDecayConfig::new(config.weight_decay as f32));
        AdamConfig::new().with_weight_decay(decay).init()
    };
    let n = train.rows as f64;
    let (mut initial, mut last) = (f64::NAN, f64::NAN);
    for epoch in 0..config.epochs {
        let outputs = network.forward(data.x.clone()).unsqueeze::<3>();
        let log_sigma = network.log_sigma.as_ref().map(|p| p.val().unsqueeze::<2>());
        let loss = model
            .likelihood
            .log_likelihood(outputs, &data.targets, log_sigma)
            .neg()
            .div_scalar(n);
        let value: f64 = loss.clone().into_data().iter::<f64>().next().unwrap();
        if epoch == 0 {
            initial = value;
        }
        last = value;
        let grads = GradientsParams::from_grads(loss.backward(), &network);
        network = optimizer.step(config.learning_rate, network, grads);
    }
    (flatten(&network), initial, last)
}

#[test]
fn full_batch_training_is_unchanged_by_the_minibatch_path() {
    let device = Device::flex();
    let train = cos2x_data(40, 3);
    for (model, decoupled) in [
        (
            BnnConfig::new(1)
                .with_hidden(vec![8])
                .with_activation(Activation::Tanh),
            false,
        ),
        (
            BnnConfig::new(1).with_hidden(vec![8, 8]).with_likelihood(
                Likelihood::GaussianLearnedSigma {
                    prior: Default::default(),
                },
            ),
            true,
        ),
    ] {
        let config = EnsembleConfig::new()
            .with_members(2)
            .with_epochs(150)
            .with_learning_rate(5e-3)
            .with_decoupled_weight_decay(decoupled)
            .with_seed(4);
        let members = config.train(&model, &train, &device, 2).unwrap();
        for m in &members {
            let (parameters, initial, last) =
                reference_full_batch(&config, &model, &train, &device, m.index);
            assert_eq!(
                m.parameters, parameters,
                "member {} (decoupled: {decoupled})",
                m.index
            );
            assert_eq!(m.initial_loss.to_bits(), initial.to_bits());
            assert_eq!(m.final_loss.to_bits(), last.to_bits());
            assert_eq!(m.epochs_run, 150);
            assert_eq!(m.best_valid_loss, None);
        }
    }
}

#[test]
fn the_mile_recipe() {
    let c = EnsembleConfig::mile();
    assert_eq!(
        (c.members, c.epochs, c.batch_size, c.patience),
        (12, 500, Some(32), Some(10))
    );
    assert_eq!(
        (c.learning_rate, c.weight_decay, c.decoupled_weight_decay),
        (1e-3, 1e-3, true)
    );
}

#[test]
fn minibatch_training_reduces_the_loss() {
    let device = Device::flex();
    let model = BnnConfig::new(1)
        .with_hidden(vec![16])
        .with_activation(Activation::Tanh)
        .with_likelihood(Likelihood::GaussianFixed { sigma: 0.1 });
    let train = cos2x_data(100, 5);
    let config = EnsembleConfig::mile()
        .with_members(2)
        .with_epochs(150)
        .with_learning_rate(1e-2)
        .with_batch_size(Some(16))
        .with_patience(None);
    let members = config.train(&model, &train, &device, 2).unwrap();
    for m in &members {
        // NLL with σ = 0.1: ≈ 50·MSE − 1.38; an untrained net has MSE ≈ 0.5, the fit ≲ 0.02.
        assert!(
            m.final_loss < 0.1 * m.initial_loss,
            "member {}: loss {} -> {}",
            m.index,
            m.initial_loss,
            m.final_loss
        );
        assert_eq!(m.epochs_run, 150);
        assert_eq!(m.best_valid_loss, None);
        // final_loss is the last epoch's mean batch loss; at the returned weights the full-data
        // loss is of the same size.
        let ll = common::reference_log_likelihood(&model, &train, &to_f64(&m.parameters));
        assert!(
            (-ll / 100.0 - m.final_loss).abs() < 0.5,
            "full-data NLL {} vs last epoch {}",
            -ll / 100.0,
            m.final_loss
        );
    }
    assert_ne!(members[0].parameters, members[1].parameters);
    // A batch as large as the data set is one shuffled step per epoch: it trains too.
    let whole = config
        .clone()
        .with_batch_size(Some(1000))
        .with_members(1)
        .with_epochs(300)
        .train(&model, &train, &device, 1)
        .unwrap();
    assert!(whole[0].final_loss < 0.5 * whole[0].initial_loss);
}

/// A big heteroscedastic net on 8 points: the training NLL keeps falling (σ shrinks onto the
/// points) while the validation NLL turns up, so patience must end training early.
fn overfitting_setup() -> (BnnConfig, HostData, HostData, EnsembleConfig) {
    let model = BnnConfig::new(1)
        .with_hidden(vec![64, 64])
        .with_activation(Activation::Tanh);
    let train = cos2x_data(8, 11);
    let valid = cos2x_data(64, 12);
    let config = EnsembleConfig::mile()
        .with_members(3)
        .with_epochs(3000)
        .with_learning_rate(2e-3)
        .with_batch_size(Some(4))
        .with_patience(Some(10))
        .with_seed(2);
    (model, train, valid, config)
}

#[test]
fn early_stopping_returns_the_best_validation_epoch() {
    let device = Device::flex();
    let (model, train, valid, config) = overfitting_setup();
    let members = config
        .train_with_validation(&model, &train, Some(&valid), &device, 2)
        .unwrap();
    for m in &members {
        let patience = config.patience.unwrap();
        assert!(
            m.epochs_run < config.epochs,
            "member {} never stopped",
            m.index
        );
        let best = m.best_valid_loss.expect("a validation set was given");
        // The reported loss is the validation NLL of the returned weights (f32 on the device vs
        // an f64 host reference: agreement to 1e-4 is float32 rounding, while one epoch of
        // training moves this loss by far more).
        let recomputed = -common::reference_log_likelihood(&model, &valid, &to_f64(&m.parameters))
            / valid.rows as f64;
        assert!(
            (recomputed - best).abs() < 1e-4 * best.abs().max(1.0),
            "member {}: reported {best}, recomputed {recomputed}",
            m.index
        );
        // The best epoch is `patience` epochs before the stop: training exactly that long without
        // validation gives the same weights bit for bit (shuffles depend only on the seed)...
        let best_epochs = m.epochs_run - patience;
        let plain = config.clone().with_patience(None).with_epochs(best_epochs);
        let again = plain
            .train_member(&model, &train, &device, m.index)
            .unwrap();
        assert_eq!(again.parameters, m.parameters, "member {}", m.index);
        // ... and training to the stop gives a worse validation loss: it really did rise.
        let to_stop = plain.with_epochs(m.epochs_run).with_members(m.index + 1);
        let last = to_stop
            .train_with_validation(&model, &train, Some(&valid), &device, 1)
            .unwrap()
            .pop()
            .unwrap();
        assert_eq!(last.epochs_run, m.epochs_run);
        assert!(
            last.best_valid_loss.unwrap() >= best,
            "member {}: the final validation loss is below the best",
            m.index
        );
        // Meanwhile the training loss went down.
        assert!(m.final_loss < m.initial_loss);
    }
}

#[test]
fn minibatch_results_do_not_depend_on_threads() {
    let device = Device::flex();
    let (model, train, valid, config) = overfitting_setup();
    let config = config.with_epochs(40).with_patience(Some(3));
    let one = config
        .train_with_validation(&model, &train, Some(&valid), &device, 1)
        .unwrap();
    let three = config
        .train_with_validation(&model, &train, Some(&valid), &device, 3)
        .unwrap();
    for (a, b) in one.iter().zip(&three) {
        assert_eq!(a.index, b.index);
        assert_eq!(a.parameters, b.parameters);
        assert_eq!(a.epochs_run, b.epochs_run);
        assert_eq!(
            a.best_valid_loss.map(f64::to_bits),
            b.best_valid_loss.map(f64::to_bits)
        );
        assert_eq!(a.final_loss.to_bits(), b.final_loss.to_bits());
    }
}

#[test]
fn impossible_minibatch_settings_are_config_errors() {
    use bnn_model::PosteriorError;
    let device = Device::flex();
    let model = BnnConfig::new(1).with_hidden(vec![4]);
    let train = cos2x_data(10, 1);
    let message = |r: Result<Vec<bnn_model::TrainedMember>, PosteriorError>| match r {
        Err(PosteriorError::Config(m)) => m,
        Err(PosteriorError::Ensemble(e)) => e.to_string(),
        other => panic!("expected a config error, got {other:?}"),
    };
    let mile = EnsembleConfig::mile().with_members(1).with_epochs(2);
    let m = message(mile.train(&model, &train, &device, 1));
    assert!(
        m.contains("validation set") && m.contains("patience"),
        "{m}"
    );
    let m = message(mile.clone().with_batch_size(Some(0)).train_with_validation(
        &model,
        &train,
        Some(&train),
        &device,
        1,
    ));
    assert!(m.contains("batch size"), "{m}");
    let m = message(mile.clone().with_patience(Some(0)).train_with_validation(
        &model,
        &train,
        Some(&train),
        &device,
        1,
    ));
    assert!(m.contains("patience"), "{m}");
    // Validation data that do not fit the model are a data error.
    let wrong = HostData::new(vec![0.0; 20], 10, 2, vec![0.0; 10], 1);
    assert!(matches!(
        mile.train_with_validation(&model, &train, Some(&wrong), &device, 1),
        Err(PosteriorError::Data(_))
    ));
}

#[test]
fn early_stopping_works_full_batch_too() {
    let device = Device::flex();
    let (model, train, valid, config) = overfitting_setup();
    let config = config.with_batch_size(None).with_members(1);
    let m = config
        .train_with_validation(&model, &train, Some(&valid), &device, 1)
        .unwrap()
        .pop()
        .unwrap();
    assert!(m.epochs_run < config.epochs, "never stopped");
    let best = m.best_valid_loss.unwrap();
    let recomputed = -common::reference_log_likelihood(&model, &valid, &to_f64(&m.parameters))
        / valid.rows as f64;
    assert!(
        (recomputed - best).abs() < 1e-4 * best.abs().max(1.0),
        "reported {best}, recomputed {recomputed}"
    );
    // Full batch, the best epoch's weights are those of plain training for that many steps.
    let plain = config.with_patience(None).with_epochs(m.epochs_run - 10);
    assert_eq!(
        plain
            .train_member(&model, &train, &device, 0)
            .unwrap()
            .parameters,
        m.parameters
    );
}

/// Table 8's network (nine ReLU layers of eight units, heteroscedastic head): from PyTorch's
/// fan-in uniform weights the signal fades by about 6⁻⁹ before the head and no member moves off
/// the mean; from Glorot-uniform weights and zero biases (the DEI-MCMC reference code's) the
/// members fit.
#[test]
fn deep_relu_members_train_from_glorot_weights_and_not_from_fan_in_ones() {
    let device = Device::flex();
    // Eight standardized features, as energy and concrete have, and a target mostly linear in them.
    let (rows, d) = (200, 8);
    let x = common::random_theta(rows * d, 3f64.sqrt(), 11);
    let noise = common::random_theta(rows, 0.1 * 3f64.sqrt(), 12);
    let y: Vec<f64> = (0..rows)
        .map(|r| {
            let row = &x[r * d..(r + 1) * d];
            (row[0] + row[1] - row[2] + 0.5 * row[3]) / 1.8
                + 0.2 * (row[4] * row[5]).tanh()
                + noise[r]
        })
        .collect();
    let train = HostData::new(x, rows, d, y, 1);
    let model = BnnConfig::new(d)
        .with_hidden(vec![8; 9])
        .with_activation(Activation::Relu)
        .with_likelihood(Likelihood::GaussianHeteroscedastic {
            link: bnn_model::ScaleLink::Exp,
        });
    let config = EnsembleConfig::new()
        .with_members(6)
        .with_epochs(3000)
        .with_learning_rate(1e-2)
        .with_weight_decay(1e-2)
        .with_seed(3);
    let loss_ratios = |init: WeightInit| -> Vec<f64> {
        config
            .clone()
            .with_weight_init(init)
            .train(&model, &train, &device, 2)
            .unwrap()
            .iter()
            .map(|m| m.final_loss / m.initial_loss)
            .collect()
    };
    let fan_in = loss_ratios(WeightInit::FanInUniform);
    let glorot = loss_ratios(WeightInit::GlorotUniform);
    println!("final / initial training NLL: fan-in uniform {fan_in:?}, Glorot {glorot:?}");
    // A member at the mean keeps its NLL; a fitted one at least halves it. With these seeds 3 of
    // the 6 Glorot members fit (on energy 11 of 12 do), and none of the fan-in ones.
    let fitted = |ratios: &[f64]| ratios.iter().filter(|&&r| r < 0.5).count();
    assert_eq!(fitted(&fan_in), 0, "{fan_in:?}");
    assert!(fitted(&glorot) >= 2, "{glorot:?}");

    // The draw itself: zero biases, weights within ±√(6/(fan_in+fan_out)), wider than fan-in's.
    let untrained = config
        .clone()
        .with_members(1)
        .with_epochs(1)
        .with_learning_rate(1e-12)
        .with_weight_decay(0.0)
        .with_weight_init(WeightInit::GlorotUniform)
        .train(&model, &train, &device, 1)
        .unwrap();
    let template = model.init(&device);
    let layout = bnn_model::layout_of(&template);
    let theta = &untrained[0].parameters;
    let mut beyond_fan_in = 0;
    for entry in &layout.entries {
        let values = &theta[entry.offset..entry.offset + entry.len()];
        match entry.kind {
            bnn_model::ParameterKind::Bias => {
                assert!(
                    values.iter().all(|v| v.abs() < 1e-9),
                    "{}: {values:?}",
                    entry.name
                )
            }
            bnn_model::ParameterKind::Weight => {
                let (fan_in, fan_out) = (entry.shape[0] as f32, entry.shape[1] as f32);
                let bound = (6.0 / (fan_in + fan_out)).sqrt();
                assert!(
                    values.iter().all(|v| v.abs() <= bound * 1.0001),
                    "{}",
                    entry.name
                );
                beyond_fan_in += values
                    .iter()
                    .filter(|v| v.abs() > 1.0 / fan_in.sqrt())
                    .count();
            }
            _ => {}
        }
    }
    assert!(
        beyond_fan_in > 100,
        "{beyond_fan_in} weights beyond 1/sqrt(fan_in)"
    );
}

//! Flattening any module to one vector and back is exact, and the layout describes it.

use bnn_model::{
    flatten, layout_of, unflatten, Activation, BnnConfig, Likelihood, LogSigmaPrior, ParameterKind,
};
use burn::tensor::Device;

fn device() -> Device {
    Device::flex()
}

#[test]
fn mlp_round_trip_is_exact_and_layout_is_contiguous() {
    let config = BnnConfig::new(8)
        .with_hidden(vec![16, 16])
        .with_activation(Activation::Tanh);
    let model = config.init(&device());
    let layout = layout_of(&model);
    // 8·16+16 + 16·16+16 + 16·2+2 = 450 for the heteroscedastic head.
    assert_eq!(layout.dim(), 450);
    assert_eq!(layout.dim(), config.num_params());
    let mut expected_offset = 0;
    for entry in &layout.entries {
        assert_eq!(entry.offset, expected_offset, "{}", entry.name);
        expected_offset += entry.len();
    }
    let names: Vec<_> = layout.entries.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "network.layers.0.weight",
            "network.layers.0.bias",
            "network.layers.1.weight",
            "network.layers.1.bias",
            "network.layers.2.weight",
            "network.layers.2.bias"
        ]
    );
    let w1 = layout.entry("network.layers.1.weight").unwrap();
    assert_eq!(
        (w1.layer, w1.kind, w1.shape.clone(), w1.fan_in),
        (Some(1), ParameterKind::Weight, vec![16, 16], 16)
    );
    let b0 = layout.entry("network.layers.0.bias").unwrap();
    assert_eq!(
        (b0.layer, b0.kind, b0.fan_in),
        (Some(0), ParameterKind::Bias, 8)
    );

    let flat = flatten(&model);
    assert_eq!(flat.len(), 450);
    // Write distinct values, read them back bit for bit.
    let values: Vec<f32> = (0..450)
        .map(|i| (i as f32 * 0.37).sin() * 3.0 + i as f32 * 1e-3)
        .collect();
    let model = unflatten(model, &values).unwrap();
    assert_eq!(flatten(&model), values);
    // Row-major [d_in, d_out]: the value at weight[i, j] is the forward pass's W[i][j].
    let w0 = model.network.layers[0]
        .weight
        .val()
        .into_data()
        .try_to_vec::<f32>()
        .unwrap();
    assert_eq!(w0[3 * 16 + 5], values[3 * 16 + 5]);
}

#[test]
fn linear_model_and_learned_sigma_layouts() {
    let config =
        BnnConfig::new(3)
            .with_hidden(vec![])
            .with_likelihood(Likelihood::GaussianLearnedSigma {
                prior: LogSigmaPrior::default(),
            });
    let model = config.init(&device());
    let layout = layout_of(&model);
    assert_eq!(layout.dim(), 3 + 1 + 1);
    let last = layout.entries.last().unwrap();
    assert_eq!(
        (last.name.as_str(), last.kind),
        ("log_sigma", ParameterKind::Likelihood)
    );
    let values = vec![0.5, -1.0, 2.0, 0.25, -0.75];
    let model = unflatten(model, &values).unwrap();
    assert_eq!(flatten(&model), values);
    assert_eq!(layout.coordinate_names()[4], "log_sigma[0]");
    assert_eq!(layout.coordinate_names()[1], "network.layers.0.weight[1,0]");
    // Two targets: one log σ each, last.
    let two = config.with_n_targets(2);
    let layout = layout_of(&two.init(&device()));
    assert_eq!(layout.dim(), two.num_params());
    assert_eq!(layout.dim(), 3 * 2 + 2 + 2);
    let names = layout.coordinate_names();
    assert_eq!(
        names[names.len() - 2..],
        ["log_sigma[0]".to_string(), "log_sigma[1]".to_string()]
    );
}

#[test]
fn wrong_length_is_an_error() {
    let model = BnnConfig::new(2).with_hidden(vec![4]).init(&device());
    let err = unflatten(model, &[0.0; 5]).unwrap_err();
    assert_eq!((err.expected, err.got), (2 * 4 + 4 + 4 * 2 + 2, 5));
}

//! Saving members as safetensors with burn-store: exact round trips, refusals with messages
//! that name the file and the tensor, and a file layout a Python user can read.

mod common;

use bnn_model::{load_parameters, save_parameters, Activation, BnnConfig, Likelihood, StoreError};
use std::path::Path;

fn random_parameters(config: &BnnConfig, seed: u64) -> Vec<f32> {
    common::random_theta(config.num_params(), 2.0, seed)
        .iter()
        .map(|&v| v as f32)
        .collect()
}

fn models() -> Vec<BnnConfig> {
    vec![
        BnnConfig::new(3).with_hidden(vec![5, 4]),
        BnnConfig::new(2)
            .with_hidden(vec![6])
            .with_activation(Activation::Tanh)
            .with_n_targets(2)
            .with_likelihood(Likelihood::GaussianLearnedSigma {
                prior: Default::default(),
            }),
        BnnConfig::new(4)
            .with_hidden(vec![])
            .with_likelihood(Likelihood::Categorical { classes: 3 }),
    ]
}

/// The safetensors header, parsed by hand: 8 bytes little-endian length, then JSON.
fn header(path: &Path) -> (serde_json::Map<String, serde_json::Value>, Vec<u8>) {
    let bytes = std::fs::read(path).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let json: serde_json::Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    (json.as_object().unwrap().clone(), bytes[8 + n..].to_vec())
}

#[test]
fn round_trip_is_exact_and_replaces_files_whole() {
    let dir = tempfile::tempdir().unwrap();
    for (i, config) in models().iter().enumerate() {
        let path = dir.path().join(format!("member-{i}.safetensors"));
        let theta = random_parameters(config, i as u64);
        save_parameters(config, &theta, &path).unwrap();
        assert_eq!(load_parameters(config, &path).unwrap(), theta);
        // Saving again over the file replaces it.
        let other = random_parameters(config, 100 + i as u64);
        save_parameters(config, &other, &path).unwrap();
        assert_eq!(load_parameters(config, &path).unwrap(), other);
    }
    // Nothing but the finished files is left behind (the scratch files were renamed into place).
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "member-0.safetensors",
            "member-1.safetensors",
            "member-2.safetensors"
        ]
    );
    // A vector of the wrong length is refused before anything is written.
    let config = &models()[0];
    let path = dir.path().join("short.safetensors");
    let err = save_parameters(config, &[0.0; 3], &path).unwrap_err();
    assert!(matches!(err, StoreError::Length(_)), "{err}");
    assert!(!path.exists());
}

#[test]
fn the_file_is_plain_safetensors() {
    let dir = tempfile::tempdir().unwrap();
    let config = &models()[1];
    let path = dir.path().join("member.safetensors");
    let theta = random_parameters(config, 7);
    save_parameters(config, &theta, &path).unwrap();
    let (header, data) = header(&path);
    // Every tensor a Python user will see, in the layout order of the flat vector.
    let expected: [(&str, Vec<usize>); 5] = [
        ("network.layers.0.weight", vec![2, 6]),
        ("network.layers.0.bias", vec![6]),
        ("network.layers.1.weight", vec![6, 2]),
        ("network.layers.1.bias", vec![2]),
        ("log_sigma", vec![2]),
    ];
    let tensors: Vec<&String> = header.keys().filter(|k| *k != "__metadata__").collect();
    assert_eq!(
        tensors.len(),
        expected.len(),
        "tensors in the file: {tensors:?}"
    );
    let mut offset = 0;
    for (name, shape) in &expected {
        let entry = header
            .get(*name)
            .unwrap_or_else(|| panic!("no tensor {name}: {header:?}"));
        assert_eq!(entry["dtype"], "F32", "{name}");
        let got: Vec<usize> = entry["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap() as usize)
            .collect();
        assert_eq!(&got, shape, "{name}");
        // The bytes are little-endian f32 in row-major order: the same numbers as the flat vector.
        let range: Vec<usize> = entry["data_offsets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap() as usize)
            .collect();
        let values: Vec<f32> = data[range[0]..range[1]]
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect();
        let len: usize = shape.iter().product();
        assert_eq!(values, theta[offset..offset + len], "{name}");
        offset += len;
    }
    assert_eq!(offset, theta.len());
    // The architecture travels with the weights.
    let metadata = header["__metadata__"].as_object().expect("metadata");
    let saved: serde_json::Value =
        serde_json::from_str(metadata["bnn_config"].as_str().unwrap()).unwrap();
    assert_eq!(saved["d_input"], 2);
    assert_eq!(saved["hidden"], serde_json::json!([6]));
}

#[test]
fn another_architecture_is_refused_naming_the_tensor() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("member.safetensors");
    let saved = BnnConfig::new(3).with_hidden(vec![5, 4]);
    save_parameters(&saved, &random_parameters(&saved, 1), &path).unwrap();
    let cases: [(BnnConfig, &str); 4] = [
        (
            saved.clone().with_hidden(vec![5, 7]),
            "network.layers.1.weight",
        ), // a different width
        (
            saved.clone().with_hidden(vec![5, 4, 4]),
            "network.layers.3.weight",
        ), // a layer more
        (saved.clone().with_hidden(vec![5]), "network.layers.2."), // a layer less
        (
            saved
                .clone()
                .with_likelihood(Likelihood::GaussianLearnedSigma {
                    prior: Default::default(),
                }),
            "log_sigma",
        ),
    ];
    for (config, tensor) in cases {
        let err = load_parameters(&config, &path).unwrap_err();
        let message = err.to_string();
        assert!(
            message.contains(tensor) && message.contains("member.safetensors"),
            "{message}"
        );
        assert!(
            matches!(
                err,
                StoreError::Shape { .. }
                    | StoreError::MissingTensor { .. }
                    | StoreError::UnexpectedTensor { .. }
            ),
            "{err:?}"
        );
    }
    let err = load_parameters(&saved.clone().with_hidden(vec![5, 7]), &path).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "tensor 'network.layers.1.weight' in {} has shape [5, 4], but this model needs [5, 7]; was it saved for another architecture?",
            path.display()
        )
    );
}

#[test]
fn broken_files_are_errors_not_panics() {
    let dir = tempfile::tempdir().unwrap();
    let config = &models()[0];
    let good = dir.path().join("good.safetensors");
    save_parameters(config, &random_parameters(config, 3), &good).unwrap();
    let bytes = std::fs::read(&good).unwrap();
    let header_len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;

    let missing = dir.path().join("missing.safetensors");
    let err = load_parameters(config, &missing).unwrap_err();
    assert!(
        matches!(err, StoreError::Read { .. }) && err.to_string().contains("missing.safetensors"),
        "{err}"
    );

    let mut huge_header = bytes.clone();
    huge_header[..8].copy_from_slice(&u64::MAX.to_le_bytes());
    let mut bad_json = bytes.clone();
    bad_json[8] = b'!';
    let mut garbage = vec![0u8; 256];
    for (i, b) in garbage.iter_mut().enumerate() {
        *b = (i * 37 % 251) as u8;
    }
    let broken: [(&str, Vec<u8>); 6] = [
        ("empty", vec![]),
        ("truncated-data", bytes[..bytes.len() - 5].to_vec()),
        ("truncated-header", bytes[..8 + header_len / 2].to_vec()),
        ("huge-header", huge_header),
        ("bad-json", bad_json),
        ("garbage", garbage),
    ];
    for (name, content) in broken {
        let path = dir.path().join(format!("{name}.safetensors"));
        std::fs::write(&path, content).unwrap();
        let err = load_parameters(config, &path).unwrap_err();
        assert!(matches!(err, StoreError::Corrupt { .. }), "{name}: {err:?}");
        assert!(
            err.to_string().contains(&format!("{name}.safetensors")),
            "{name}: {err}"
        );
    }
}

/// A file written by hand (as NumPy users might): a float64 tensor is refused by name.
#[test]
fn a_float64_tensor_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let config = BnnConfig::new(1).with_hidden(vec![]);
    let header = r#"{"network.layers.0.weight":{"dtype":"F64","shape":[1,2],"data_offsets":[0,16]},"network.layers.0.bias":{"dtype":"F32","shape":[2],"data_offsets":[16,24]}}"#;
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend(header.as_bytes());
    bytes.extend([0u8; 24]);
    let path = dir.path().join("float64.safetensors");
    std::fs::write(&path, bytes).unwrap();
    let err = load_parameters(&config, &path).unwrap_err();
    assert!(
        matches!(err, StoreError::DType { .. })
            && err.to_string().contains("network.layers.0.weight"),
        "{err}"
    );
    // The same file in float32 loads.
    let header = header
        .replace("F64", "F32")
        .replace("[0,16]", "[0,8]")
        .replace("[16,24]", "[8,16]");
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend(header.as_bytes());
    for v in [1.5f32, -2.0, 0.25, 3.0] {
        bytes.extend(v.to_le_bytes());
    }
    std::fs::write(&path, bytes).unwrap();
    assert_eq!(
        load_parameters(&config, &path).unwrap(),
        [1.5, -2.0, 0.25, 3.0]
    );
}

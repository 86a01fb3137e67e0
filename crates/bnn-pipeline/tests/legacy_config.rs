//! Run directories written before the sampler's settings moved to `[sampler.algorithm]`: their
//! `config.toml` (the fixtures are real ones, written by `bnn run` at commit 72a92a6) reads as
//! the sampler those runs built, and is written back in the current shape.

use bnn_pipeline::{RunConfig, RunDir};
use bnn_sampler::{
    AlgorithmConfig, HmcConfig, MamsConfig, MclmcConfig, MsdConfig, NutsConfig, RandomWalkConfig,
};
use std::path::Path;

/// The fixture read as the run directory it came from (`RunDir::load_config`, which restores
/// the defaults of its day for keys it does not record).
fn fixture(name: &str) -> RunConfig {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(format!("legacy-{name}.toml"));
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(&path, dir.path().join("config.toml")).unwrap();
    RunDir::new(dir.path())
        .load_config()
        .unwrap_or_else(|e| panic!("{name}: {e:#}"))
}

#[test]
fn old_flat_sampler_sections_read_as_the_sampler_they_ran() {
    // What the flags of each fixture's run built (`--num-steps 7`; `--tune-fractions
    // 0.6,0.3,0.1 --trajectory-length 2`; `--target-accept 0.85`; `--persistence 0.8`).
    let expected: [(&str, AlgorithmConfig); 6] = [
        ("nuts", NutsConfig::new().with_max_tree_depth(10).into()),
        (
            "hmc",
            HmcConfig::new()
                .with_num_steps(7)
                .with_max_num_steps(1024)
                .into(),
        ),
        (
            "mclmc",
            MclmcConfig::new()
                .with_initial_trajectory_length(Some(2.0))
                .with_phase1_fraction(0.6)
                .with_phase2_fraction(0.3)
                .with_diagonal_preconditioning(true)
                .into(),
        ),
        ("mams", MamsConfig::new().with_target_accept(0.85).into()),
        ("msd", MsdConfig::new().with_persistence(0.8).into()),
        ("rwm", RandomWalkConfig::new().into()),
    ];
    for (name, algorithm) in expected {
        let config = fixture(name);
        config.validate().unwrap();
        assert_eq!(config.sampler.algorithm.name(), name);
        assert_eq!(
            config.sampler.sampler_config(None).algorithm.to_string(),
            algorithm.to_string(),
            "{name}"
        );
        assert_eq!((config.sampler.warmup, config.sampler.draws), (60, 40));
        // Written back in the current shape, it reads as the same config.
        let text = config.to_toml().unwrap();
        assert!(
            text.contains(&format!("[sampler.algorithm]\nname = \"{name}\"")),
            "{text}"
        );
        assert!(!text.contains("max_depth"), "{text}");
        assert_eq!(RunConfig::from_toml_str(&text, "written").unwrap(), config);
    }
}

#[test]
fn old_and_new_shapes_are_not_mixed_and_old_refusals_stand() {
    let mixed = "[sampler]\nmax_depth = 12\n\n[sampler.algorithm]\nname = \"nuts\"\n";
    let message = format!(
        "{:#}",
        RunConfig::from_toml_str(mixed, "run.toml").unwrap_err()
    );
    assert!(
        message.contains("`max_depth` in [sampler] is the old flat form")
            && message.contains("max_tree_depth (nuts)"),
        "{message}"
    );
    for (text, expected) in [
        (
            "[sampler]\nalgorithm = \"mclmc\"\ntarget_accept = 0.8\n",
            "MCLMC has no acceptance target",
        ),
        (
            "[sampler]\nalgorithm = \"nuts\"\npersistence = 0.8\n",
            "MSD's settings",
        ),
        (
            "[sampler]\nalgorithm = \"gibbs\"\nmax_depth = 3\n",
            "unknown sampler `gibbs`",
        ),
    ] {
        let message = format!("{:#}", RunConfig::from_toml_str(text, "f").unwrap_err());
        assert!(message.contains(expected), "{text:?}: {message}");
    }
    // A flat key alone still works (it is read the old way).
    let config = RunConfig::from_toml_str("[sampler]\nmax_depth = 7\n", "f").unwrap();
    assert_eq!(config.sampler.max_tree_depth(), Some(7));
}

#[test]
fn the_nested_table_names_its_errors() {
    let config = RunConfig::from_toml_str(
        "[sampler.algorithm]\nname = \"mclmc\"\nenergy_variance_end = 2e-4\n",
        "run.toml",
    )
    .unwrap();
    match config.sampler.algorithm.0 {
        AlgorithmConfig::Mclmc(c) => {
            assert_eq!(c.energy_variance_end, 2e-4);
            // A BNN run's MCLMC defaults, not the kernel's.
            assert_eq!(c.initial_trajectory_length, Some(1.0));
            assert!(c.diagonal_preconditioning);
        }
        other => panic!("{other:?}"),
    }
    for (text, expected) in [
        (
            "[sampler.algorithm]\nname = \"nuts\"\npersistence = 0.5\n",
            "nuts has no setting `persistence` (msd has it)",
        ),
        ("[sampler.algorithm]\nmax_tree_depth = 5\n", "needs `name`"),
        (
            "[sampler.algorithm]\nname = \"nuts\"\nmax_tree_depth = \"deep\"\n",
            "`max_tree_depth`",
        ),
    ] {
        let message = format!("{:#}", RunConfig::from_toml_str(text, "f").unwrap_err());
        assert!(message.contains(expected), "{text:?}: {message}");
    }
}

/// A shard's `shard.json` written before the settings nested holds the hash of the flat shape's
/// sampling identity; `bnn merge` recognizes it from the shard's (still flat) config.toml.
#[test]
fn a_flat_shards_recorded_config_hash_is_recognized() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/legacy-shard-nuts.toml");
    // `config_hash` in that shard's shard.json, written by `bnn run --shard 0/2` at 72a92a6.
    assert_eq!(
        bnn_pipeline::legacy_config_hash(&path).as_deref(),
        Some("997fea204067f3b56de105f3ee5379d29b186ca86189615c36ce2b6c49d8a4c4")
    );
    let current = RunConfig::from_toml_file(&path).unwrap();
    assert_ne!(
        bnn_pipeline::config_hash(&current),
        "997fea204067f3b56de105f3ee5379d29b186ca86189615c36ce2b6c49d8a4c4"
    );
    // A file in the current shape has no flat hash.
    let text = current.to_toml().unwrap();
    let dir = std::env::temp_dir().join(format!("bnn-legacy-hash-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.toml"), text).unwrap();
    assert_eq!(
        bnn_pipeline::legacy_config_hash(&dir.join("config.toml")),
        None
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A run directory of `bnn run`'s defaults before they became the defaults study's choice (ReLU,
/// target 0.8, stationary warmup; `bnn study defaults`'s relu-0.80 run of yacht split 0 at
/// 6bba735): it reads as the settings it ran, with the hash its journal recorded when sampling
/// began, so it resumes and predicts as it would have.
#[test]
fn a_run_directory_from_before_the_new_defaults_keeps_its_settings_and_hash() {
    let dir = tempfile::tempdir().unwrap();
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/run-6bba735-relu.toml");
    std::fs::copy(&fixture, dir.path().join("config.toml")).unwrap();
    let config = RunDir::new(dir.path()).load_config().unwrap();
    assert_eq!(config.model.activation, "relu");
    assert_eq!(
        config.sampler.algorithm.get("target_accept"),
        Some(toml::Value::Float(0.8))
    );
    // `config_sha256` of the run's `sampling_started` journal line.
    let recorded = "031f2e9ef415656c0dffd4af3f71d1c9b9791c8bbfc8263d0935bdc7d28d8673";
    assert_eq!(bnn_pipeline::config_hash(&config), recorded);
    // Without the two keys (a file that never wrote them) it reads the same: the defaults of
    // its day fill them in, not today's.
    let text = std::fs::read_to_string(&fixture).unwrap();
    let stripped: String = text
        .lines()
        .filter(|l| !l.starts_with("activation =") && !l.starts_with("target_accept ="))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_ne!(stripped, text);
    std::fs::write(dir.path().join("config.toml"), stripped).unwrap();
    let config = RunDir::new(dir.path()).load_config().unwrap();
    assert_eq!(bnn_pipeline::config_hash(&config), recorded);
}

//! The configurations serialize exactly as Burn's `Config` derive wrote them (key order, enum
//! tagging, `None` fields), so run files and configurations written by earlier versions load,
//! and new ones are byte-identical. The expected text was written by the Burn-derived version.

use bnn_sampler::{
    AlgorithmConfig, HmcConfig, MamsConfig, MclmcConfig, MsdConfig, NutsConfig, RandomWalkConfig,
    SamplerConfig, SurrogateNutsConfig, WarmupConfig,
};

fn samplers() -> Vec<SamplerConfig> {
    let algorithms: Vec<AlgorithmConfig> = vec![
        NutsConfig::new().into(),
        HmcConfig::new().with_trajectory_length(Some(1.5)).into(),
        RandomWalkConfig::new().into(),
        MclmcConfig::new()
            .with_initial_trajectory_length(Some(2.0))
            .into(),
        MamsConfig::new().into(),
        MsdConfig::new().with_frozen_metric(true).into(),
    ];
    algorithms
        .into_iter()
        .enumerate()
        .map(|(i, algorithm)| {
            let config = SamplerConfig::new(algorithm).with_seed(i as u64);
            if i % 2 == 1 {
                config
                    .with_threads(Some(2))
                    .with_initial_step_size(Some(0.1))
                    .with_recorded_coordinates(Some(0..3))
                    .with_warmup(WarmupConfig::new().with_adapt_metric(false))
            } else {
                config
            }
        })
        .collect()
}

const SAMPLERS: &str = include_str!("support/sampler_configs.json");

#[test]
fn sampler_configs_serialize_as_burn_wrote_them() {
    let text: String = samplers()
        .iter()
        .map(|c| serde_json::to_string(c).unwrap() + "\n")
        .collect();
    assert_eq!(text, SAMPLERS);
    for line in SAMPLERS.lines() {
        let back: SamplerConfig = serde_json::from_str(line).unwrap();
        assert_eq!(serde_json::to_string(&back).unwrap(), line);
    }
}

/// What the configurations were before the warmup policies (the Burn-derived text): they load,
/// as the fixed policy, and equal today's configurations.
const BEFORE_WARMUP_POLICIES: &str = include_str!("support/sampler_configs_before_policies.json");

#[test]
fn configs_written_before_the_warmup_policies_load_as_the_fixed_policy() {
    for (line, expected) in BEFORE_WARMUP_POLICIES.lines().zip(samplers()) {
        let back: SamplerConfig = serde_json::from_str(line).unwrap();
        assert_eq!(back.warmup.policy, bnn_sampler::WarmupPolicy::Fixed);
        assert_eq!(
            serde_json::to_string(&back).unwrap(),
            serde_json::to_string(&expected).unwrap()
        );
    }
}

#[test]
fn display_is_pretty_json() {
    let config = SurrogateNutsConfig::new().with_adaptive(true);
    let expected = "{\n  \"nuts\": {\n    \"target_accept\": 0.8,\n    \"max_tree_depth\": 10,\n    \"max_energy_error\": 1000.0\n  },\n  \"adaptive\": true,\n  \"surrogate_threshold\": 10.0,\n  \"cooldown\": 20\n}";
    assert_eq!(config.to_string(), expected);
    let algorithm: AlgorithmConfig = RandomWalkConfig::new().into();
    assert_eq!(
        algorithm.to_string(),
        "{\n  \"RandomWalk\": {\n    \"target_accept\": 0.234\n  }\n}"
    );
}

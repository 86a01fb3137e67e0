//! The three settings that decide whether a DEI-NUTS run's chains are samplable: the network's
//! activation, NUTS's target acceptance and what ends the warmup. `bnn run`, `bnn sample` and
//! [`crate::DeiMcmc`] take [`FLAGSHIP`], the candidate `bnn study defaults` measured best on
//! the small UCI sets (`crates/bnn-study/results/defaults/defaults.md`, the book's "Defaults
//! from evidence" page); Sommer et al. 2024's settings ([`SOMMER2024`]) are one preset away
//! (`--preset sommer2024`).

use super::run_config::RunConfig;
use bnn_sampler::{NutsConfig, SamplerSettings, WarmupPolicy};

/// An activation, a NUTS target acceptance and a warmup policy, as one choice.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunDefaults {
    /// The hidden layers' activation (`--activation`).
    pub activation: &'static str,
    /// NUTS's target acceptance (`--target-accept`).
    pub target_accept: f64,
    /// What ends each NUTS chain's warmup (`--warmup-policy`).
    pub warmup_policy: WarmupPolicy,
}

/// What `bnn run` uses unless told otherwise: tanh at target acceptance 0.95 with the
/// stationary warmup, the candidate that met the most of the defaults study's goals.
pub const FLAGSHIP: RunDefaults = RunDefaults {
    activation: "tanh",
    target_accept: 0.95,
    warmup_policy: WarmupPolicy::Stationary,
};

/// Sommer et al. 2024's DEI-MCMC (Table 3): ReLU, target acceptance 0.8, the 100 warmup
/// iterations of Stan's schedule and no more.
pub const SOMMER2024: RunDefaults = RunDefaults {
    activation: "relu",
    target_accept: 0.8,
    warmup_policy: WarmupPolicy::Fixed,
};

/// What a run directory's `config.toml` meant by an activation or NUTS target it does not
/// record: the defaults before [`FLAGSHIP`] (its warmup policy is read as `fixed` on its own
/// grounds, see `RunDir::load_config`).
pub const BEFORE_FLAGSHIP: RunDefaults = RunDefaults {
    activation: "relu",
    target_accept: 0.8,
    warmup_policy: WarmupPolicy::Stationary,
};

/// What `bnn diagnose` adds when a ReLU network's chains diverged: the defaults study's
/// measurements (split 0, the same members and seeds for both rows).
pub const KINKED_NETWORK_NOTE: &str = "ReLU's kinks make NUTS diverge: on yacht, energy and concrete (split 0, same seeds) `bnn study defaults` measured 25.0%, 14.8% and 17.7% divergent draws for ReLU at target 0.8 against 0.0%, 1.8% and 5.0% for tanh at 0.95, the default, which also had the higher test LPPD; see the book's page \"The defaults study\" (reproductions/defaults.html)";

impl RunDefaults {
    /// The name `bnn study defaults` gives this choice: `tanh-0.95`, `relu-fixed-0.80`.
    pub fn candidate_name(&self) -> String {
        let fixed = match self.warmup_policy {
            WarmupPolicy::Fixed => "-fixed",
            WarmupPolicy::Stationary => "",
        };
        format!("{}{fixed}-{:.2}", self.activation, self.target_accept)
    }

    /// `config` with this activation and warmup policy, and this target acceptance when its
    /// sampler is NUTS (another sampler keeps its own settings).
    pub fn apply(&self, mut config: RunConfig) -> RunConfig {
        config.model.activation = self.activation.to_string();
        config.sampler.warmup_policy = self.warmup_policy;
        if config.sampler.algorithm.name() == NutsConfig::NAME {
            config
                .sampler
                .algorithm
                .set("target_accept", toml::Value::Float(self.target_accept))
                .expect("NUTS has a target acceptance");
        }
        config
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_config_is_the_flagship_and_the_preset_is_the_papers() {
        let config = RunConfig::new();
        assert_eq!(config.model.activation, FLAGSHIP.activation);
        assert_eq!(config.sampler.warmup_policy, FLAGSHIP.warmup_policy);
        assert_eq!(
            config.sampler.algorithm.get("target_accept"),
            Some(toml::Value::Float(FLAGSHIP.target_accept))
        );
        let paper = SOMMER2024.apply(RunConfig::new());
        assert_eq!(paper.model.activation, "relu");
        assert_eq!(paper.sampler.warmup_policy, WarmupPolicy::Fixed);
        assert_eq!(
            paper.sampler.algorithm.get("target_accept"),
            Some(toml::Value::Float(0.8))
        );
        assert_eq!(SOMMER2024.candidate_name(), "relu-fixed-0.80");
    }
}

//! `[sampler.algorithm]`: the registered sampler a run uses and that sampler's own settings,
//! nested in the sampler section as Burn nests `WeightDecayConfig` in `AdamConfig`.
//!
//! ```toml
//! [sampler.algorithm]
//! name = "nuts"
//! target_accept = 0.8
//! max_tree_depth = 10
//! ```
//!
//! The keys are the fields of the sampler crate's settings type (`NutsConfig`, `MclmcConfig`,
//! ...): nothing here lists samplers or restates their settings, so a sampler registered in
//! `bnn-sampler` is a sampler of `run.toml` and `--sampler`. `algorithm = "mclmc"` (the name
//! alone) is the same as a table holding only the name.

use bnn_sampler::{AlgorithmConfig, SamplerSettings};
use serde::de::Error as _;
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A registered sampler with its settings; serialized as a table whose `name` key names it.
#[derive(Debug, Clone)]
pub struct KernelSettings(pub AlgorithmConfig);

/// MCLMC's starting decoherence length for BNN posteriors. BlackJAX's and MILE's `max(√D, 15)`
/// (20 on yacht's 418 parameters) keeps the velocity for thousands of warmup steps, so a chain
/// that the first, too large steps heat cools slowly: yacht split 2's chains 3 and 9 fell from
/// log density 238 / 255 to −126 / −174 within 200 steps and ended the 50,000-step warmup near
/// 400 / 320; with `L = 1` (the velocity refreshed every few hundred steps) the same chains were
/// back above 290 after 200 steps and ended near 590 / 610, where NUTS's chains sit. Phase 2
/// replaces it with the measured size anyway (see `crates/bnn-study/results/mile/README.md`).
pub const MCLMC_START_TRAJECTORY_LENGTH: f64 = 1.0;

/// Where a BNN run starts from other settings than the sampler crate's defaults (which follow
/// BlackJAX): MCLMC's first `L` (above, measured) and its preconditioner on, HMC's 32 leapfrog
/// steps: the defaults `bnn run` has had since those samplers landed, kept so that runs repeat;
/// NUTS's target acceptance from the defaults study (`run_defaults::FLAGSHIP`).
fn bnn_defaults(settings: AlgorithmConfig) -> AlgorithmConfig {
    match settings {
        AlgorithmConfig::Nuts(c) => c
            .with_target_accept(super::run_defaults::FLAGSHIP.target_accept)
            .into(),
        AlgorithmConfig::Mclmc(c) => c
            .with_initial_trajectory_length(Some(MCLMC_START_TRAJECTORY_LENGTH))
            .with_diagonal_preconditioning(true)
            .into(),
        AlgorithmConfig::Hmc(c) => c.with_num_steps(32).into(),
        other => other,
    }
}

/// The command-line flags that set a sampler's own settings: `(flag, key in
/// [sampler.algorithm])`. A flag applies to whichever chosen sampler has the key; one flag may
/// feed several keys (`--tune-fractions` is MCLMC's two phase shares or MAMS's four).
pub const SETTING_FLAGS: [(&str, &str); 17] = [
    ("--target-accept", "target_accept"),
    ("--max-depth", "max_tree_depth"),
    ("--num-steps", "num_steps"),
    ("--steps-per-draw", "steps_per_draw"),
    ("--sampler-batch-size", "batch_size"),
    ("--trajectory-length", "initial_trajectory_length"),
    ("--energy-variance-start", "energy_variance_start"),
    ("--energy-variance-end", "energy_variance_end"),
    ("--tune-fractions", "tune_fractions"),
    ("--tune-fractions", "phase1_fraction"),
    ("--tune-fractions", "phase2_fraction"),
    ("--trajectory-length-factor", "trajectory_length_factor"),
    ("--diagonal-preconditioning", "diagonal_preconditioning"),
    ("--persistence", "persistence"),
    ("--frozen-metric", "frozen_metric"),
    ("--fixed-point-tolerance", "fixed_point_tolerance"),
    ("--max-fixed-point-iterations", "max_fixed_point_iterations"),
];

/// How an error names one of the sampler's settings: the flag that sets it (if one does) and
/// its key, `--max-depth (config key `max_tree_depth` in [sampler.algorithm])`.
pub fn kernel_setting_name(key: &str) -> String {
    let place = format!("config key `{key}` in [sampler.algorithm]");
    match SETTING_FLAGS.iter().find(|(_, k)| *k == key) {
        Some((flag, _)) => format!("{flag} ({place})"),
        None => place,
    }
}

/// The registered samplers that have a setting `key` (for an error about one that does not).
pub fn samplers_with(key: &str) -> Vec<&'static str> {
    AlgorithmConfig::NAMES
        .iter()
        .copied()
        .filter(|name| KernelSettings::named(name).is_ok_and(|s| s.has(key)))
        .collect()
}

/// What is wrong with a sampler's settings; each message names the sampler and the key.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SettingsError {
    #[error("unknown sampler `{name}`; the samplers are {}", AlgorithmConfig::NAMES.join(", "))]
    UnknownSampler { name: String },
    #[error("{sampler} has no setting `{key}`{}; its settings are {}", who_has(.holders), .settings.join(", "))]
    NoSuchSetting {
        sampler: &'static str,
        key: String,
        /// The registered samplers that do have it.
        holders: Vec<&'static str>,
        /// The settings this sampler has.
        settings: Vec<String>,
    },
    #[error("`{key}`: {message}")]
    InvalidValue { key: String, message: String },
    #[error("[sampler.algorithm] needs `name`, one of {}", AlgorithmConfig::NAMES.join(", "))]
    MissingName,
    #[error("`name` must be a sampler's name, got {0}")]
    NameNotText(String),
    #[error("{sampler}'s settings cannot be written as TOML: {message}")]
    NotWritable {
        sampler: &'static str,
        message: String,
    },
}

/// ` (msd has it)`: who has a setting, for [`SettingsError::NoSuchSetting`].
fn who_has(samplers: &[&str]) -> String {
    match samplers {
        [] => String::new(),
        [one] => format!(" ({one} has it)"),
        many => format!(" ({} have it)", many.join(", ")),
    }
}

impl KernelSettings {
    /// The sampler called `name` (`nuts`, `mclmc`, ...) with the defaults a BNN run uses; the
    /// error lists the registered names.
    pub fn named(name: &str) -> Result<Self, SettingsError> {
        AlgorithmConfig::named(name)
            .map(|settings| Self(bnn_defaults(settings)))
            .ok_or_else(|| SettingsError::UnknownSampler {
                name: name.to_string(),
            })
    }

    /// The sampler called `name`: these settings if it is this one, else its BNN defaults (a
    /// switch of sampler keeps nothing of the other's settings).
    pub fn switched_to(&self, name: &str) -> Result<Self, SettingsError> {
        if self.name() == name {
            Ok(self.clone())
        } else {
            Self::named(name)
        }
    }

    /// The sampler's name.
    pub fn name(&self) -> &'static str {
        self.0.name()
    }

    /// This sampler's settings as a TOML table (NaN and infinities kept), keyed by field;
    /// empty if they cannot be written as TOML (see [`KernelSettings::try_table`]).
    pub fn table(&self) -> toml::Table {
        self.try_table().unwrap_or_default()
    }

    /// This sampler's settings as a TOML table, or why they cannot be one (an integer setting
    /// beyond TOML's 64-bit range).
    pub fn try_table(&self) -> Result<toml::Table, SettingsError> {
        let sampler = self.name();
        let not_writable = |message: String| SettingsError::NotWritable { sampler, message };
        match toml::Value::try_from(&self.0).map_err(|e| not_writable(e.to_string()))? {
            toml::Value::Table(mut outer) => match outer.remove(self.tag()) {
                Some(toml::Value::Table(inner)) => Ok(inner),
                _ => Err(not_writable("not a table".into())),
            },
            other => Err(not_writable(format!("not a table: {other}"))),
        }
    }

    /// Every key this sampler's settings have, unset optional ones included.
    pub fn keys(&self) -> Vec<String> {
        let mut keys: Vec<String> = match serde_json::to_value(&self.0) {
            Ok(serde_json::Value::Object(outer)) => match outer.get(self.tag()) {
                Some(serde_json::Value::Object(inner)) => inner.keys().cloned().collect(),
                _ => Vec::new(),
            },
            _ => Vec::new(),
        };
        keys.sort();
        keys
    }

    /// A setting's value, if this sampler has one of that name and it is set.
    pub fn get(&self, key: &str) -> Option<toml::Value> {
        self.table().get(key).cloned()
    }

    /// Whether this sampler has a setting `key` (set or not).
    pub fn has(&self, key: &str) -> bool {
        self.keys().iter().any(|k| k == key)
    }

    /// Sets one of this sampler's settings; the error names the key, the sampler and, for an
    /// unknown key, the keys it has.
    pub fn set(&mut self, key: &str, value: toml::Value) -> Result<(), SettingsError> {
        let mut table = self.table();
        if !self.has(key) {
            return Err(SettingsError::NoSuchSetting {
                sampler: self.name(),
                key: key.to_string(),
                holders: samplers_with(key),
                settings: self.keys(),
            });
        }
        // A fixed-step sampler takes exactly `num_steps` steps, however many: its cap follows.
        if let (Some(steps), Some(cap)) = (
            (key == "num_steps").then(|| value.as_integer()).flatten(),
            table.get("max_num_steps").and_then(|v| v.as_integer()),
        ) {
            table.insert("max_num_steps".into(), toml::Value::Integer(cap.max(steps)));
        }
        table.insert(key.to_string(), value);
        self.0 = self
            .with_table(table)
            .map_err(|e| SettingsError::InvalidValue {
                key: key.to_string(),
                message: one_line(e.message()),
            })?;
        Ok(())
    }

    /// This sampler with `table` as its settings (keys left out take serde's view: absent
    /// optional settings are unset, others an error).
    fn with_table(&self, table: toml::Table) -> Result<AlgorithmConfig, toml::de::Error> {
        let mut outer = toml::Table::new();
        outer.insert(self.tag().to_string(), toml::Value::Table(table));
        AlgorithmConfig::deserialize(toml::Value::Table(outer))
    }

    /// The tag serde gives this sampler's variant (`Nuts` for `nuts`).
    fn tag(&self) -> &'static str {
        let name = self.name();
        AlgorithmConfig::TAGS
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, tag)| *tag)
            .unwrap_or(name)
    }

    /// The sampler a `[sampler.algorithm]` table describes: its `name`'s BNN defaults with the
    /// table's other keys put in, one at a time, so that an error names its key.
    fn from_table(mut table: toml::Table) -> Result<Self, SettingsError> {
        let name = match table.remove("name") {
            Some(toml::Value::String(name)) => name,
            Some(other) => return Err(SettingsError::NameNotText(other.to_string())),
            None => return Err(SettingsError::MissingName),
        };
        let mut settings = Self::named(&name)?;
        for (key, value) in table {
            settings.set(&key, value)?;
        }
        Ok(settings)
    }
}

impl Default for KernelSettings {
    fn default() -> Self {
        Self::named(bnn_sampler::NutsConfig::NAME).expect("NUTS is registered")
    }
}

impl PartialEq for KernelSettings {
    fn eq(&self, other: &Self) -> bool {
        self.name() == other.name() && self.table() == other.table()
    }
}

impl Serialize for KernelSettings {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let table = self
            .try_table()
            .map_err(<S::Error as serde::ser::Error>::custom)?;
        let mut map = serializer.serialize_map(Some(table.len() + 1))?;
        map.serialize_entry("name", self.name())?;
        for (key, value) in &table {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for KernelSettings {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match toml::Value::deserialize(deserializer)? {
            toml::Value::String(name) => Self::named(&name).map_err(D::Error::custom),
            toml::Value::Table(table) => Self::from_table(table).map_err(D::Error::custom),
            other => Err(D::Error::custom(format!(
                "the sampler is a name (\"nuts\") or a table with `name`, got {other}"
            ))),
        }
    }
}

impl<T> From<T> for KernelSettings
where
    AlgorithmConfig: From<T>,
{
    fn from(settings: T) -> Self {
        Self(AlgorithmConfig::from(settings))
    }
}

/// A parser's message on one line.
fn one_line(message: &str) -> String {
    message
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_registered_sampler_is_a_name_and_reads_back_from_its_table() {
        for &name in AlgorithmConfig::NAMES {
            let settings = KernelSettings::named(name).unwrap();
            assert_eq!(settings.name(), name);
            let text = toml::to_string(&settings).unwrap();
            assert!(text.starts_with(&format!("name = \"{name}\"")), "{text}");
            let back: KernelSettings = toml::from_str(&text).unwrap();
            assert_eq!(back, settings, "{text}");
            let json = serde_json::to_string(&settings).unwrap();
            let back: KernelSettings = serde_json::from_str(&json).unwrap();
            assert_eq!(back, settings, "{json}");
        }
    }

    #[test]
    fn keys_are_the_samplers_own_and_errors_name_them() {
        let mut nuts = KernelSettings::default();
        nuts.set("max_tree_depth", toml::Value::Integer(12))
            .unwrap();
        match &nuts.0 {
            AlgorithmConfig::Nuts(c) => assert_eq!(c.max_tree_depth, 12),
            other => panic!("{other:?}"),
        }
        let error = nuts
            .set("persistence", toml::Value::Float(0.5))
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("nuts has no setting `persistence` (msd has it); its settings are ")
                && error.contains("max_tree_depth"),
            "{error}"
        );
        let error = nuts
            .set("max_tree_depth", toml::Value::String("deep".into()))
            .unwrap_err()
            .to_string();
        assert!(error.starts_with("`max_tree_depth`: "), "{error}");
        let error = toml::from_str::<toml::Table>("a = { name = \"gibbs\" }")
            .unwrap()
            .remove("a")
            .unwrap()
            .try_into::<KernelSettings>()
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("unknown sampler `gibbs`; the samplers are nuts"),
            "{error}"
        );
        let mclmc: KernelSettings = toml::Value::String("mclmc".into()).try_into().unwrap();
        assert_eq!(
            mclmc.get("initial_trajectory_length"),
            Some(toml::Value::Float(MCLMC_START_TRAJECTORY_LENGTH))
        );
    }
}

//! The files of a run directory, in one place, and atomic writes (temporary file + rename) so a
//! crash or `kill -9` never leaves a half-written config, checkpoint or summary behind.

use crate::config::run_config::RunConfig;
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};

/// A run directory: `config.toml`, `layout.json`, `ensemble/`, draws, checkpoints, predictions,
/// summary, diagnostics and plots.
#[derive(Debug, Clone)]
pub struct RunDir {
    root: PathBuf,
}

impl RunDir {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn create(&self) -> Result<()> {
        std::fs::create_dir_all(self.checkpoint_dir())
            .with_context(|| format!("creating {}", self.root.display()))
    }

    pub fn config(&self) -> PathBuf {
        self.root.join("config.toml")
    }
    pub fn layout(&self) -> PathBuf {
        self.root.join("layout.json")
    }
    pub fn ensemble_dir(&self) -> PathBuf {
        self.root.join("ensemble")
    }
    pub fn member(&self, index: usize) -> PathBuf {
        self.ensemble_dir()
            .join(format!("member_{index:02}.safetensors"))
    }
    pub fn members_json(&self) -> PathBuf {
        self.ensemble_dir().join("members.json")
    }
    /// The members a stopped training saved (gone once `members.json` is written).
    pub fn unfinished_ensemble(&self) -> PathBuf {
        self.ensemble_dir().join("unfinished.json")
    }
    pub fn draws(&self, chain: usize) -> PathBuf {
        self.root.join(format!("draws_chain_{chain}.csv"))
    }
    pub fn adaptation(&self, chain: usize) -> PathBuf {
        self.root.join(format!("adaptation_chain_{chain}.csv"))
    }
    pub fn checkpoint_dir(&self) -> PathBuf {
        self.root.join("checkpoints")
    }
    pub fn checkpoint(&self, chain: usize) -> PathBuf {
        self.checkpoint_dir().join(format!("chain_{chain}.json"))
    }
    /// The checkpoint a chain of an ensemble sampler had before its latest one: a run killed
    /// while its chains were writing one round's checkpoints resumes every chain from the
    /// round they all reached.
    pub fn previous_checkpoint(&self, chain: usize) -> PathBuf {
        self.checkpoint_dir()
            .join(format!("chain_{chain}.previous.json"))
    }
    /// `shard.json`: the manifest of one shard of a cluster run.
    pub fn shard_manifest(&self) -> PathBuf {
        self.root.join("shard.json")
    }
    pub fn sampling(&self) -> PathBuf {
        self.root.join("sampling.json")
    }
    pub fn predictions(&self) -> PathBuf {
        self.root.join("predictions.csv")
    }
    pub fn train_points(&self) -> PathBuf {
        self.root.join("train.csv")
    }
    pub fn cumulative_lppd(&self) -> PathBuf {
        self.root.join("cumulative_lppd.csv")
    }
    pub fn summary(&self) -> PathBuf {
        self.root.join("summary.json")
    }
    pub fn diagnostics(&self) -> PathBuf {
        self.root.join("diagnostics.json")
    }
    /// `journal.jsonl`: what was started here and how it ended, appended only.
    pub fn journal(&self) -> PathBuf {
        self.root.join("journal.jsonl")
    }

    /// The run's resolved config; a clear error when the directory is not a run directory.
    pub fn load_config(&self) -> Result<RunConfig> {
        let path = self.config();
        match std::fs::metadata(&path) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && self.root.is_dir() => {
                bail!("{} is not a run directory (no config.toml): run `bnn train`, `bnn sample` or `bnn run` with --out first", self.root.display())
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => match std::fs::metadata(&self.root) {
                Err(root) if root.kind() != std::io::ErrorKind::NotFound => {
                    return Err(root).with_context(|| format!("reading {}", self.root.display()))
                }
                _ => bail!("{} is not a run directory (it does not exist): run `bnn train`, `bnn sample` or `bnn run` with --out first", self.root.display()),
            },
            Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
        }
        let mut config = RunConfig::from_toml_file(&path)?;
        // Written before the warmup policies existed: its chains warmed up by the fixed schedule.
        let keys = RunConfig::keys_in_toml_file(&path)?;
        if !keys
            .iter()
            .any(|(s, k)| s == "sampler" && k == "warmup_policy")
        {
            config.sampler.warmup_policy = bnn_sampler::WarmupPolicy::Fixed;
        }
        // Written without an activation or NUTS target: the defaults of its day, not today's.
        let before = crate::BEFORE_FLAGSHIP;
        if !keys.iter().any(|(s, k)| s == "model" && k == "activation") {
            config.model.activation = before.activation.to_string();
        }
        let nuts = config.sampler.algorithm.name()
            == <bnn_sampler::NutsConfig as bnn_sampler::SamplerSettings>::NAME;
        if nuts && !records_target_accept(&path)? {
            config
                .sampler
                .algorithm
                .set("target_accept", toml::Value::Float(before.target_accept))
                .expect("NUTS has a target acceptance");
        }
        Ok(config)
    }

    /// Whether any of `chains` has a checkpoint here (a run to continue, not to start).
    pub fn has_checkpoints(&self, chains: &[usize]) -> bool {
        chains.iter().any(|&c| self.checkpoint(c).exists())
    }

    /// Whether the directory holds a complete trained ensemble.
    pub fn has_ensemble(&self) -> bool {
        self.members_json().exists()
    }

    /// Whether any chain has left draws or a checkpoint here.
    pub fn has_draws(&self) -> bool {
        let chain_file = |entry: std::io::Result<std::fs::DirEntry>| {
            entry.is_ok_and(|e| e.file_name().to_string_lossy().starts_with("draws_chain_"))
        };
        std::fs::read_dir(&self.root).is_ok_and(|mut entries| entries.any(chain_file))
            || std::fs::read_dir(self.checkpoint_dir())
                .is_ok_and(|mut entries| entries.next().is_some())
    }

    /// Writes the config unless the directory already holds an equal one; a different one is
    /// refused, so two runs never mix their files. A directory that holds only a trained
    /// ensemble (no draws yet) takes any sampler settings for that same ensemble.
    pub fn claim(&self, config: &RunConfig) -> Result<()> {
        self.create()?;
        if self.config().exists() {
            let existing = self.load_config()?;
            let same_ensemble_not_sampled = existing.ensemble_identity()
                == config.ensemble_identity()
                && self.has_ensemble()
                && !self.has_draws();
            if existing.sampling_identity() != config.sampling_identity()
                && !same_ensemble_not_sampled
            {
                // What does not change the draws is left out of the list.
                let differences: Vec<String> = existing
                    .differences(config)
                    .into_iter()
                    .filter(|d| {
                        !d.starts_with("runtime.") && !d.starts_with("sampler.checkpoint_every")
                    })
                    .collect();
                bail!(
                    "{} already holds a run with another configuration ({}); use a new --out directory (or --resume to continue that run)",
                    self.root.display(),
                    differences.join("; ")
                );
            }
        }
        write_atomic(&self.config(), config.to_toml()?.as_bytes())
    }
}

/// Writes `bytes` to `path` through a temporary file in the same directory and a rename. On a
/// failure (a full disk) the temporary file is removed and the OS error stays the cause.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // Unique per process and call: two processes (or threads) never share a temporary file.
    static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = dir.join(format!(".{name}.{}-{n}.tmp", std::process::id()));
    let written = std::fs::write(&tmp, bytes)
        .with_context(|| format!("writing {}", tmp.display()))
        .and_then(|()| {
            std::fs::rename(&tmp, path)
                .with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))
        });
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Writes a JSON value atomically (pretty-printed).
pub fn write_json(path: &Path, value: &serde_json::Value) -> Result<()> {
    write_atomic(path, serde_json::to_string_pretty(value)?.as_bytes())
}

/// Whether a config file records a target acceptance: in `[sampler.algorithm]`, or in the flat
/// `[sampler]` of older files.
pub fn records_target_accept(path: &Path) -> Result<bool> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let table: toml::Table =
        toml::from_str(&text).with_context(|| format!("config {}", path.display()))?;
    let sampler = table.get("sampler").and_then(toml::Value::as_table);
    let flat = sampler.is_some_and(|s| s.contains_key("target_accept"));
    let nested = sampler
        .and_then(|s| s.get("algorithm"))
        .and_then(toml::Value::as_table)
        .is_some_and(|a| a.contains_key("target_accept"));
    Ok(flat || nested)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run directory written before the warmup policies resumes as it began (fixed); one
    /// written now keeps what it says.
    #[test]
    fn a_config_without_a_warmup_policy_reads_as_the_fixed_policy() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunDir::new(dir.path());
        std::fs::write(
            run.config(),
            "[data]\ndataset = \"cos2x\"\n[sampler]\nwarmup = 100\n",
        )
        .unwrap();
        let old = run.load_config().unwrap();
        assert_eq!(old.sampler.warmup_policy, bnn_sampler::WarmupPolicy::Fixed);
        assert!(!old.sampler.stationary_warmup());
        std::fs::write(
            run.config(),
            "[data]\ndataset = \"cos2x\"\n[sampler]\nwarmup_policy = \"stationary\"\n",
        )
        .unwrap();
        let new = run.load_config().unwrap();
        assert!(new.sampler.stationary_warmup());
        assert_eq!(
            RunConfig::new().sampler.warmup_policy,
            crate::FLAGSHIP.warmup_policy
        );
    }

    #[test]
    fn a_config_without_an_activation_or_target_reads_as_relu_at_0_8() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunDir::new(dir.path());
        let target = |c: &RunConfig| c.sampler.algorithm.get("target_accept");
        for text in [
            "[data]\ndataset = \"cos2x\"\n",
            "[data]\ndataset = \"cos2x\"\n[sampler.algorithm]\nname = \"nuts\"\n",
            "[data]\ndataset = \"cos2x\"\n[sampler]\nalgorithm = \"nuts\"\nmax_depth = 10\n",
        ] {
            std::fs::write(run.config(), text).unwrap();
            let old = run.load_config().unwrap();
            assert_eq!(old.model.activation, "relu", "{text}");
            assert_eq!(target(&old), Some(toml::Value::Float(0.8)), "{text}");
        }
        // A recorded value stands, and a new config takes today's defaults.
        std::fs::write(
            run.config(),
            "[model]\nactivation = \"silu\"\n[sampler.algorithm]\nname = \"nuts\"\ntarget_accept = 0.9\n",
        )
        .unwrap();
        let recorded = run.load_config().unwrap();
        assert_eq!(recorded.model.activation, "silu");
        assert_eq!(target(&recorded), Some(toml::Value::Float(0.9)));
        let today = RunConfig::new();
        assert_eq!(today.model.activation, crate::FLAGSHIP.activation);
        assert_eq!(
            target(&today),
            Some(toml::Value::Float(crate::FLAGSHIP.target_accept))
        );
        // MCLMC has no target to fill in.
        std::fs::write(run.config(), "[sampler.algorithm]\nname = \"mclmc\"\n").unwrap();
        assert_eq!(target(&run.load_config().unwrap()), None);
    }

    #[test]
    fn a_failed_atomic_write_keeps_its_cause_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        // The rename fails: a non-empty directory stands where the file should go.
        let target = dir.path().join("summary.json");
        std::fs::create_dir_all(target.join("occupied")).unwrap();
        let error = write_atomic(&target, b"{}").unwrap_err();
        assert!(error.chain().count() >= 2, "{error:#}");
        assert!(
            error
                .chain()
                .last()
                .unwrap()
                .downcast_ref::<std::io::Error>()
                .is_some(),
            "{error:#}"
        );
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            ["summary.json"],
            "the temporary file was left behind"
        );
        write_atomic(&dir.path().join("other.json"), b"{}").unwrap();
    }
}

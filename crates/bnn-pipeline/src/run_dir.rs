//! The files of a run directory, in one place, and atomic writes (temporary file + rename) so a
//! crash or `kill -9` never leaves a half-written config, checkpoint or summary behind.

use crate::run_config::RunConfig;
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
        std::fs::create_dir_all(self.checkpoint_dir()).with_context(|| format!("creating {}", self.root.display()))
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
        self.ensemble_dir().join(format!("member_{index:02}.safetensors"))
    }
    pub fn members_json(&self) -> PathBuf {
        self.ensemble_dir().join("members.json")
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

    /// The run's resolved config; a clear error when the directory is not a run directory.
    pub fn load_config(&self) -> Result<RunConfig> {
        let path = self.config();
        if !path.exists() {
            bail!("{} is not a run directory (no config.toml): run `bnn train`, `bnn sample` or `bnn run` with --out first", self.root.display());
        }
        RunConfig::from_toml_file(&path)
    }

    /// Whether any of `chains` has a checkpoint here (a run to continue, not to start).
    pub fn has_checkpoints(&self, chains: &[usize]) -> bool {
        chains.iter().any(|&c| self.checkpoint(c).exists())
    }

    /// Whether the directory holds a complete trained ensemble.
    pub fn has_ensemble(&self) -> bool {
        self.members_json().exists()
    }

    /// Writes the config unless the directory already holds an equal one; a different one is
    /// refused, so two runs never mix their files.
    pub fn claim(&self, config: &RunConfig) -> Result<()> {
        self.create()?;
        if self.config().exists() {
            let existing = self.load_config()?;
            if existing.sampling_identity() != config.sampling_identity() {
                bail!(
                    "{} already holds a run with another configuration; use a new --out directory (or --resume to continue that run)",
                    self.root.display()
                );
            }
        }
        write_atomic(&self.config(), config.to_toml()?.as_bytes())
    }
}

/// Writes `bytes` to `path` through a temporary file in the same directory and a rename.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, bytes).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))
}

/// Writes a JSON value atomically (pretty-printed).
pub fn write_json(path: &Path, value: &serde_json::Value) -> Result<()> {
    write_atomic(path, serde_json::to_string_pretty(value)?.as_bytes())
}

//! One shard of a run's chains (a Slurm array task or a Kubernetes indexed-Job pod) and the manifest it leaves.
//!
//! MCMC chains are independent once started, so a cluster runs them as `n` independent jobs:
//! shard `i` of `n` runs the chains `c` with `c mod n = i` (round robin, so shards stay within
//! one chain of each other whatever the chain count). Chain `c` keeps its global number, its
//! random stream `(seed, c)` and its start (ensemble member `c mod M`), so its files are the
//! bytes the whole run writes for it. `bnn merge` checks the manifests and joins the shards.

use crate::config::run_config::RunConfig;
use crate::run::prepared_data::PreparedData;
use anyhow::{bail, Context as _, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fmt;
use std::str::FromStr;

/// Shard `index` of `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
}

impl Shard {
    pub fn new(index: usize, count: usize) -> Result<Self> {
        if count == 0 || index >= count {
            bail!("shard {index}/{count} does not exist: the index must be in 0..{count} and the count at least 1");
        }
        Ok(Self { index, count })
    }

    /// The whole run as one shard.
    pub fn whole() -> Self {
        Self { index: 0, count: 1 }
    }

    /// The global numbers of this shard's chains among `chains`.
    pub fn chains(&self, chains: usize) -> Vec<usize> {
        (self.index..chains).step_by(self.count).collect()
    }

    /// The ensemble members this shard trains: those its chains start from (chain `c` starts at
    /// member `c mod members`) and, round robin, its share of the rest, so the shards together
    /// hold every member (the merged run's deep-ensemble baseline needs them all).
    pub fn members(&self, members: usize, chains: usize) -> Vec<usize> {
        let mut own: Vec<usize> = self
            .chains(chains)
            .iter()
            .map(|c| c % members.max(1))
            .chain((self.index..members).step_by(self.count))
            .collect();
        own.sort_unstable();
        own.dedup();
        own
    }

    /// The shard the scheduler gave this process, if any: a Slurm job array
    /// (`SLURM_ARRAY_TASK_ID` minus `SLURM_ARRAY_TASK_MIN`, of `SLURM_ARRAY_TASK_COUNT`) or a
    /// Kubernetes indexed Job (`JOB_COMPLETION_INDEX`, of `BNN_SHARD_COUNT`, which the Job sets
    /// to its `completions`).
    pub fn from_env() -> Result<Option<Self>> {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// [`Shard::from_env`] over any variable lookup (tests).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Option<Self>> {
        let number = |name: &str| -> Result<Option<usize>> {
            var(name)
                .map(|v| {
                    v.trim()
                        .parse::<usize>()
                        .with_context(|| format!("{name}={v} is not a non-negative integer"))
                })
                .transpose()
        };
        if let Some(id) = number("SLURM_ARRAY_TASK_ID")? {
            let count = number("SLURM_ARRAY_TASK_COUNT")?
                .context("SLURM_ARRAY_TASK_ID is set but SLURM_ARRAY_TASK_COUNT is not")?;
            let min = number("SLURM_ARRAY_TASK_MIN")?.unwrap_or(0);
            let index = id.checked_sub(min).with_context(|| {
                format!("SLURM_ARRAY_TASK_ID {id} is below SLURM_ARRAY_TASK_MIN {min}")
            })?;
            return Self::new(index, count)
                .map(Some)
                .context("the Slurm array must be contiguous (--array=0-N or 1-N, no step or list) so task ids map onto shards");
        }
        if let Some(index) = number("JOB_COMPLETION_INDEX")? {
            let count = number("BNN_SHARD_COUNT")?
                .context("JOB_COMPLETION_INDEX is set (a Kubernetes indexed Job); set BNN_SHARD_COUNT to the Job's completions, or pass --shard i/n")?;
            return Self::new(index, count).map(Some);
        }
        Ok(None)
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl FromStr for Shard {
    type Err = anyhow::Error;

    /// `i/n`, e.g. `0/3`.
    fn from_str(text: &str) -> Result<Self> {
        let (index, count) = text
            .split_once('/')
            .with_context(|| format!("shard `{text}` must be written i/n, e.g. 0/3"))?;
        let parse = |part: &str| {
            part.trim().parse::<usize>().with_context(|| {
                format!("shard `{text}` must be written i/n with non-negative integers")
            })
        };
        Self::new(parse(index)?, parse(count)?)
    }
}

/// What `shard.json` in a shard's directory records, for `bnn merge` to check and for people to
/// find where and when each part ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardManifest {
    pub format: u32,
    pub shard: Shard,
    /// SHA-256 of the settings that decide the draws (data, model, ensemble, sampler, device).
    pub config_hash: String,
    /// SHA-256 of the prepared training and test rows (after splitting and scaling).
    pub data_hash: String,
    pub dataset: String,
    pub split_seed: u64,
    pub seed: u64,
    /// The global chain numbers this shard runs.
    pub chains: Vec<usize>,
    /// The ensemble members this shard holds.
    pub members: Vec<usize>,
    pub bnn_version: String,
    pub host: String,
    /// Unix seconds.
    pub started: u64,
    /// Unix seconds once every chain of the shard has finished; `None` while it runs or after
    /// an interruption.
    pub finished: Option<u64>,
}

pub(crate) const SHARD_FORMAT: u32 = 1;

impl ShardManifest {
    pub(crate) fn new(shard: Shard, config: &RunConfig, data: &PreparedData) -> Self {
        let chains = shard.chains(config.chains());
        let members = shard.members(config.ensemble.members, config.chains());
        Self {
            format: SHARD_FORMAT,
            shard,
            config_hash: config_hash(config),
            data_hash: data_hash(data),
            dataset: config.data.dataset.clone(),
            split_seed: config.data.split_seed,
            seed: config.sampler.seed,
            chains,
            members,
            bnn_version: env!("CARGO_PKG_VERSION").to_string(),
            host: host_name(),
            started: unix_now(),
            finished: None,
        }
    }

    pub fn load(path: &std::path::Path) -> Result<Self> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let manifest: Self = serde_json::from_str(&text)
            .with_context(|| format!("{} is not a shard manifest", path.display()))?;
        if manifest.format != SHARD_FORMAT {
            bail!(
                "{} has shard format {}, this bnn reads {SHARD_FORMAT}",
                path.display(),
                manifest.format
            );
        }
        Ok(manifest)
    }
}

/// SHA-256 (hex) of the settings that decide a run's draws.
pub fn config_hash(config: &RunConfig) -> String {
    hex(&Sha256::digest(
        format!("{:?}", config.sampling_identity()).as_bytes(),
    ))
}

/// SHA-256 (hex) of the prepared rows: shapes, then every value's bits.
pub fn data_hash(data: &PreparedData) -> String {
    let mut hasher = Sha256::new();
    for part in [Some(&data.train), data.valid.as_ref(), Some(&data.test)] {
        match part {
            None => hasher.update(b"none"),
            Some(rows) => {
                for n in [rows.rows, rows.x_cols, rows.y_cols] {
                    hasher.update((n as u64).to_le_bytes());
                }
                for v in rows.x.iter().chain(&rows.y) {
                    hasher.update(v.to_bits().to_le_bytes());
                }
            }
        }
    }
    hex(&hasher.finalize())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub(crate) fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

pub(crate) fn host_name() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|h| h.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_partition_the_chains_and_members() {
        for (members, chains, count) in [(12, 12, 3), (4, 10, 3), (10, 4, 4), (3, 3, 5)] {
            let mut seen_chains = vec![0; chains];
            let mut seen_members = vec![0; members];
            for index in 0..count {
                let shard = Shard::new(index, count).unwrap();
                shard
                    .chains(chains)
                    .iter()
                    .for_each(|&c| seen_chains[c] += 1);
                shard
                    .members(members, chains)
                    .iter()
                    .for_each(|&m| seen_members[m] += 1);
                assert!(shard
                    .chains(chains)
                    .iter()
                    .all(|&c| shard.members(members, chains).contains(&(c % members))));
            }
            assert!(seen_chains.iter().all(|&n| n == 1), "{seen_chains:?}");
            assert!(seen_members.iter().all(|&n| n >= 1), "{seen_members:?}");
        }
    }

    #[test]
    fn shard_flags_and_environment() {
        assert_eq!(
            "1/3".parse::<Shard>().unwrap(),
            Shard { index: 1, count: 3 }
        );
        for bad in ["3/3", "1", "a/3", "0/0", "-1/2"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
        let vars = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert_eq!(Shard::from_vars(vars(&[])).unwrap(), None);
        const SLURM: [(&str, &str); 3] = [
            ("SLURM_ARRAY_TASK_ID", "3"),
            ("SLURM_ARRAY_TASK_COUNT", "3"),
            ("SLURM_ARRAY_TASK_MIN", "1"),
        ];
        assert_eq!(
            Shard::from_vars(vars(&SLURM)).unwrap(),
            Some(Shard { index: 2, count: 3 })
        );
        assert!(Shard::from_vars(vars(&[("SLURM_ARRAY_TASK_ID", "1")])).is_err());
        assert!(Shard::from_vars(vars(&[
            ("SLURM_ARRAY_TASK_ID", "7"),
            ("SLURM_ARRAY_TASK_COUNT", "3")
        ]))
        .is_err());
        const KUBE: [(&str, &str); 2] = [("JOB_COMPLETION_INDEX", "1"), ("BNN_SHARD_COUNT", "2")];
        assert_eq!(
            Shard::from_vars(vars(&KUBE)).unwrap(),
            Some(Shard { index: 1, count: 2 })
        );
        let message = Shard::from_vars(vars(&[("JOB_COMPLETION_INDEX", "1")]))
            .unwrap_err()
            .to_string();
        assert!(message.contains("BNN_SHARD_COUNT"), "{message}");
    }
}

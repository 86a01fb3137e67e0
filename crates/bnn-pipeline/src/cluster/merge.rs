//! `bnn merge`: joins the shard directories of a cluster run into one run directory, after checking they belong together.

use crate::cluster::shard::{config_hash, ShardManifest};
use crate::config::legacy_config::legacy_config_hash;
use crate::run::dei_mcmc::{DeiMcmc, RunReport};
use crate::run::progress::{Progress, ProgressEvent, Silent};
use crate::run::sampling::Sampling;
use crate::storage::draw_store::{ChainSampling, Checkpoint};
use crate::storage::run_dir::{write_atomic, write_json, RunDir};
use crate::storage::run_lock::{Access, RunLock};
use crate::storage::stored_chains::{check_draw_count, count_draw_rows};
use anyhow::{anyhow, bail, Context as _, Result};
use bnn_model::load_parameters;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// The checked shards of one run, ready to be copied into a run directory.
pub struct ShardSet {
    /// `(directory, manifest)`, in shard order.
    pub shards: Vec<(PathBuf, ShardManifest)>,
    pub chains: usize,
    pub members: usize,
    /// Read locks on the shard directories, held while the set is merged: a requeued shard
    /// cannot write beneath the merge.
    _reading: Vec<RunLock>,
}

impl ShardSet {
    /// Reads every directory's `shard.json` and `config.toml` and refuses, naming the culprit,
    /// shards of different configs or data, unfinished shards, and chains missing or present
    /// twice.
    pub fn check(dirs: &[PathBuf]) -> Result<Self> {
        if dirs.is_empty() {
            bail!("name the shard directories to merge");
        }
        let mut shards = Vec::with_capacity(dirs.len());
        let mut reading = Vec::with_capacity(dirs.len());
        for dir in dirs {
            let run_dir = RunDir::new(dir);
            reading.push(RunLock::acquire(dir, Access::Read)?);
            let path = run_dir.shard_manifest();
            if !path.exists() {
                bail!("{} is not a shard directory (no shard.json): run `bnn run --shard i/n --out {}` first", dir.display(), dir.display());
            }
            let mut manifest = ShardManifest::load(&path)?;
            let stored = config_hash(&run_dir.load_config()?);
            // A shard written before the sampler's settings nested recorded the hash of the
            // flat shape; its config.toml is still that shape and reads as the same config.
            let written_flat =
                legacy_config_hash(&run_dir.config()).as_ref() == Some(&manifest.config_hash);
            if written_flat {
                manifest.config_hash = stored.clone();
            }
            if stored != manifest.config_hash {
                bail!("{}: config.toml does not match its shard.json (config hash {stored} vs {}); the directory was edited", dir.display(), manifest.config_hash);
            }
            if manifest.finished.is_none() {
                bail!(
                    "shard {} in {} has not finished its chains; continue it with the same `bnn run --shard {} ...` (it resumes from its checkpoints), then merge",
                    manifest.shard,
                    dir.display(),
                    manifest.shard
                );
            }
            check_shard_files(&run_dir, &manifest)?;
            shards.push((dir.clone(), manifest));
        }
        let (first_dir, first) = &shards[0];
        for (dir, manifest) in &shards[1..] {
            let name = |d: &Path, m: &ShardManifest| format!("{} (shard {})", d.display(), m.shard);
            if manifest.config_hash != first.config_hash {
                bail!("{} and {} were run with different configurations (config hashes {} and {}); merge only the shards of one run", name(first_dir, first), name(dir, manifest), first.config_hash, manifest.config_hash);
            }
            if manifest.data_hash != first.data_hash {
                bail!("{} and {} sampled different data (data hashes {} and {}); merge only the shards of one run", name(first_dir, first), name(dir, manifest), first.data_hash, manifest.data_hash);
            }
            if manifest.shard.count != first.shard.count {
                bail!(
                    "{} and {} split the chains differently ({} and {} shards)",
                    name(first_dir, first),
                    name(dir, manifest),
                    first.shard.count,
                    manifest.shard.count
                );
            }
        }
        let config = RunDir::new(first_dir).load_config()?;
        let chains = config.chains();
        let mut owner: Vec<Option<&Path>> = vec![None; chains];
        for (dir, manifest) in &shards {
            for &c in &manifest.chains {
                let slot = owner.get_mut(c).ok_or_else(|| {
                    anyhow!(
                        "{} holds chain {c}, the run has {chains} chains",
                        dir.display()
                    )
                })?;
                if let Some(other) = slot {
                    bail!("chain {c} is in both {} and {}: a shard was given twice or two shards overlap", other.display(), dir.display());
                }
                *slot = Some(dir);
            }
        }
        let missing: Vec<usize> = owner
            .iter()
            .enumerate()
            .filter(|(_, o)| o.is_none())
            .map(|(c, _)| c)
            .collect();
        if !missing.is_empty() {
            bail!("chains {missing:?} are in none of the given shards (the run has {chains} chains in {} shards); add the missing shard directories", first.shard.count);
        }
        Ok(Self {
            shards,
            chains,
            members: config.ensemble.members,
            _reading: reading,
        })
    }

    /// Joins the shards into the new run directory `out` and predicts, evaluates and diagnoses
    /// the whole run there, all or nothing: everything is written into a temporary sibling of
    /// `out`, which is renamed to `out` only at the end. On any failure the sibling is removed
    /// and `out` is as it was (absent, or empty).
    pub fn merge_into(&self, out: &Path, progress: impl Progress + 'static) -> Result<RunReport> {
        if out.exists()
            && std::fs::read_dir(out)
                .with_context(|| format!("reading {}", out.display()))?
                .next()
                .is_some()
        {
            bail!(
                "{} is not empty; merge into a new directory (nothing was changed)",
                out.display()
            );
        }
        let staging = Staging::beside(out)?;
        self.write(staging.path())?;
        let at_out = |path: &Path| {
            path.strip_prefix(staging.path())
                .map_or_else(|_| path.to_path_buf(), |rest| out.join(rest))
        };
        let mut report = DeiMcmc::open(staging.path())?
            .with_progress(AtFinalPath {
                inner: progress,
                staging: staging.path().display().to_string(),
                out: out.display().to_string(),
            })
            .finish_merged()?;
        let p = &mut report.predictions;
        p.predictions_csv = p.predictions_csv.as_deref().map(at_out);
        p.train_csv = p.train_csv.as_deref().map(at_out);
        let e = &mut report.evaluation;
        e.summary_json = at_out(&e.summary_json);
        e.cumulative_lppd_csv = at_out(&e.cumulative_lppd_csv);
        for file in &mut report.sampling.draws_files {
            *file = at_out(file);
        }
        staging.commit(out)?;
        Ok(report)
    }

    /// Copies config, layout, ensemble, draws, warmup statistics and checkpoints into `out`
    /// (which must be new or empty, so nothing is overwritten), and a `sampling.json` for the
    /// whole run: the wall times are the slowest shard's (shards run side by side).
    pub fn write(&self, out: &Path) -> Result<RunDir> {
        if out.exists()
            && std::fs::read_dir(out)
                .with_context(|| format!("reading {}", out.display()))?
                .next()
                .is_some()
        {
            bail!(
                "{} is not empty; merge into a new directory (nothing was changed)",
                out.display()
            );
        }
        let target = RunDir::new(out);
        target.create()?;
        let first = RunDir::new(&self.shards[0].0);
        std::fs::copy(first.config(), target.config()).context("copying config.toml")?;
        std::fs::copy(first.layout(), target.layout()).context("copying layout.json")?;
        self.copy_ensemble(&target)?;
        let mut finished_early = vec![false; self.chains];
        let mut chain_draws = serde_json::Map::new();
        let (mut warmup, mut sampling, mut ensemble, mut chain_warmup, mut chain_sampling) =
            (0.0f64, 0.0f64, 0.0f64, 0.0, 0.0);
        for (dir, manifest) in &self.shards {
            let shard = RunDir::new(dir);
            for &c in &manifest.chains {
                for (from, to) in [
                    (shard.draws(c), target.draws(c)),
                    (shard.adaptation(c), target.adaptation(c)),
                    (shard.checkpoint(c), target.checkpoint(c)),
                ] {
                    std::fs::copy(&from, &to)
                        .with_context(|| format!("copying {}", from.display()))?;
                }
                let kept = Checkpoint::load(&shard.checkpoint(c))?.kept_draws;
                chain_draws.insert(c.to_string(), json!(kept));
            }
            let record: Value = serde_json::from_str(
                &std::fs::read_to_string(shard.sampling())
                    .with_context(|| format!("reading {}", shard.sampling().display()))?,
            )?;
            let early: Vec<bool> =
                serde_json::from_value(record["finished_early"].clone()).unwrap_or_default();
            for (&c, flag) in manifest.chains.iter().zip(early) {
                finished_early[c] = flag;
            }
            let seconds = |key: &str| record[key].as_f64().unwrap_or(0.0);
            warmup = warmup.max(seconds("seconds_warmup"));
            sampling = sampling.max(seconds("seconds_sampling"));
            ensemble = ensemble.max(seconds("seconds_ensemble"));
            chain_warmup += seconds("chain_seconds_warmup");
            chain_sampling += seconds("chain_seconds_sampling");
        }
        write_json(
            &target.sampling(),
            &json!({
                "status": "finished",
                "chains": self.chains,
                "finished_early": finished_early,
                "seconds_ensemble": ensemble,
                "seconds_warmup": warmup,
                "seconds_sampling": sampling,
                "chain_seconds_warmup": chain_warmup,
                "chain_seconds_sampling": chain_sampling,
                "chain_draws": chain_draws,
                "merged_from": self.shards.iter().map(|(d, m)| json!({ "dir": d.display().to_string(), "shard": m.shard.to_string(), "host": m.host, "chains": m.chains, "started": m.started, "finished": m.finished })).collect::<Vec<_>>(),
            }),
        )?;
        let manifests: Vec<&ShardManifest> = self.shards.iter().map(|(_, m)| m).collect();
        write_atomic(
            &out.join("shards.json"),
            serde_json::to_string_pretty(&manifests)?.as_bytes(),
        )?;
        Ok(target)
    }

    /// Each member once, from the first shard that holds it; a member held by two shards must be
    /// the same network in both.
    fn copy_ensemble(&self, target: &RunDir) -> Result<()> {
        let first = RunDir::new(&self.shards[0].0);
        if !first.has_ensemble() {
            return Ok(()); // chains that did not start from an ensemble
        }
        let model = DeiMcmc::open(&self.shards[0].0)?.model().clone();
        std::fs::create_dir_all(target.ensemble_dir())?;
        // Each member's record and the shard file it was copied from: a damaged file is
        // named there, not by its copy in the staging directory, which is gone afterwards.
        let mut records: Vec<Option<(Value, PathBuf)>> = vec![None; self.members];
        let mut seconds = 0.0f64;
        for (dir, manifest) in &self.shards {
            let shard = RunDir::new(dir);
            let listing: Value = serde_json::from_str(
                &std::fs::read_to_string(shard.members_json()).with_context(|| {
                    format!(
                        "{} lacks its ensemble (ensemble/members.json)",
                        dir.display()
                    )
                })?,
            )?;
            seconds = seconds.max(listing["seconds"].as_f64().unwrap_or(0.0));
            for record in listing["members"].as_array().into_iter().flatten() {
                let j = record["index"]
                    .as_u64()
                    .map(|j| j as usize)
                    .filter(|&j| j < self.members)
                    .ok_or_else(|| {
                        anyhow!(
                            "{}: a member record without a valid index",
                            shard.members_json().display()
                        )
                    })?;
                let member = shard.member(j);
                let loaded = load_parameters(&model, &member)?;
                match &records[j] {
                    None => {
                        std::fs::copy(&member, target.member(j))
                            .with_context(|| format!("copying {}", member.display()))?;
                        records[j] = Some((record.clone(), member));
                    }
                    Some((_, kept)) => {
                        if load_parameters(&model, kept)? != loaded {
                            bail!("member {j} differs between shards ({} and an earlier one, shard {}): they were not trained from the same config", dir.display(), manifest.shard);
                        }
                    }
                }
            }
        }
        let missing: Vec<usize> = records
            .iter()
            .enumerate()
            .filter(|(_, r)| r.is_none())
            .map(|(j, _)| j)
            .collect();
        if !missing.is_empty() {
            bail!("ensemble members {missing:?} are in none of the shards");
        }
        let records: Vec<Value> = records.into_iter().flatten().map(|(r, _)| r).collect();
        write_json(
            &target.members_json(),
            &json!({ "members": records, "seconds": seconds }),
        )
    }
}

/// Checks and joins the shards in `dirs` into the new run directory `out`, then predicts,
/// evaluates and diagnoses the whole run there. With the same seed the result equals one
/// machine's `bnn run`: the same draws files byte for byte and the same metrics.
pub fn merge_shards(dirs: &[PathBuf], out: &Path) -> Result<(DeiMcmc, RunReport)> {
    let report = ShardSet::check(dirs)?.merge_into(out, Silent)?;
    Ok((DeiMcmc::open(out)?, report))
}

/// Every file a shard's chains and members need, before anything is copied: a missing file, a
/// checkpoint that does not load, or a draws file with fewer draws than its checkpoint records
/// (cut by hand or by a copy) is named here, in the shard, not later in the merged copy.
fn check_shard_files(shard: &RunDir, manifest: &ShardManifest) -> Result<()> {
    let root = shard.root().display();
    for path in [shard.layout(), shard.sampling()] {
        if !path.is_file() {
            bail!("{} is missing from shard {} ({root}); the shard is damaged: run it again with the same `bnn run --shard {}`", path.display(), manifest.shard, manifest.shard);
        }
    }
    for &c in &manifest.chains {
        for path in [shard.draws(c), shard.adaptation(c), shard.checkpoint(c)] {
            if !path.is_file() {
                bail!("{} is missing from shard {} ({root}), which lists chain {c}; the shard is damaged", path.display(), manifest.shard);
            }
        }
        let checkpoint = Checkpoint::load(&shard.checkpoint(c))?;
        check_draw_count(shard, c, count_draw_rows(&shard.draws(c))?)?;
        let adaptation = std::fs::metadata(shard.adaptation(c))
            .with_context(|| format!("reading {}", shard.adaptation(c).display()))?
            .len();
        if adaptation < checkpoint.adaptation_bytes {
            bail!(
                "{} has {adaptation} bytes, its checkpoint records {}: the file was cut",
                shard.adaptation(c).display(),
                checkpoint.adaptation_bytes
            );
        }
    }
    if shard.has_ensemble() {
        for &j in &manifest.members {
            if !shard.member(j).is_file() {
                bail!("{} is missing from shard {} ({root}), which lists member {j}; the shard is damaged", shard.member(j).display(), manifest.shard);
            }
        }
    }
    Ok(())
}

/// A temporary sibling directory of a run directory being written, removed on drop unless
/// committed (renamed into place); it also removes the parent folders it had to create.
struct Staging {
    path: PathBuf,
    created: Option<PathBuf>,
    committed: bool,
}

impl Staging {
    fn beside(out: &Path) -> Result<Self> {
        let parent = out
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let created = first_missing_ancestor(parent);
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
        let name = out
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "merged".into());
        let path = parent.join(format!(".{name}.merging-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        let staging = Self {
            path,
            created,
            committed: false,
        };
        std::fs::create_dir(&staging.path)
            .with_context(|| format!("creating {}", staging.path.display()))?;
        Ok(staging)
    }

    fn path(&self) -> &Path {
        &self.path
    }

    /// Renames the staged directory to `out` (an empty `out` is replaced).
    fn commit(mut self, out: &Path) -> Result<()> {
        if out.is_dir() {
            std::fs::remove_dir(out)
                .with_context(|| format!("replacing the empty {}", out.display()))?;
        }
        std::fs::rename(&self.path, out)
            .with_context(|| format!("renaming {} to {}", self.path.display(), out.display()))?;
        self.committed = true;
        Ok(())
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_dir_all(&self.path);
            if let Some(created) = &self.created {
                let _ = std::fs::remove_dir_all(created);
            }
        }
    }
}

/// Reports `inner`'s stage messages with the staging directory's path replaced by the final
/// one: the staging directory is renamed into place at the end, so its path names nothing.
struct AtFinalPath<P> {
    inner: P,
    staging: String,
    out: String,
}

impl<P: Progress> Progress for AtFinalPath<P> {
    fn report(&self, event: &ProgressEvent<'_>) {
        match *event {
            ProgressEvent::Started { stage, message } => {
                let message = message.replace(&self.staging, &self.out);
                self.inner.report(&ProgressEvent::Started {
                    stage,
                    message: &message,
                })
            }
            ProgressEvent::Finished { stage, message } => {
                let message = message.replace(&self.staging, &self.out);
                self.inner.report(&ProgressEvent::Finished {
                    stage,
                    message: &message,
                })
            }
            other => self.inner.report(&other),
        }
    }
}

/// The outermost folder of `path` that does not exist yet (`None` when `path` exists).
fn first_missing_ancestor(path: &Path) -> Option<PathBuf> {
    let mut missing = None;
    for ancestor in path.ancestors().filter(|a| !a.as_os_str().is_empty()) {
        if ancestor.exists() {
            break;
        }
        missing = Some(ancestor.to_path_buf());
    }
    missing
}

impl DeiMcmc {
    /// Prediction, evaluation and diagnostics of a directory whose chains all finished
    /// elsewhere (merged shards).
    pub fn finish_merged(&self) -> Result<RunReport> {
        let ids = self.chain_ids();
        let chains = ids
            .iter()
            .map(|&c| {
                let k = Checkpoint::load(&self.dir.checkpoint(c))?;
                Ok(ChainSampling {
                    chain: c,
                    kept_draws: k.kept_draws,
                    finished_early: k.finished_early,
                    seconds_warmup: k.seconds_warmup,
                    seconds_sampling: k.seconds_sampling,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let sampling = Sampling {
            finished: true,
            chains,
            seconds_wall: 0.0,
            draws_files: ids.iter().map(|&c| self.dir.draws(c)).collect(),
        };
        let predictions = self.predict()?;
        let evaluation = self.evaluate(&predictions)?;
        let diagnostics = self.diagnose()?;
        Ok(RunReport {
            ensemble: None,
            sampling,
            predictions,
            evaluation,
            diagnostics,
        })
    }
}

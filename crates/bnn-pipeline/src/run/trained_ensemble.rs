//! A run's deep ensemble: trained with Burn's Adam and saved as safetensors, or read back.

use crate::run::dei_mcmc::DeiMcmc;
use crate::run::progress::{ProgressEvent, Stage};
use crate::storage::run_dir::write_json;
use anyhow::{bail, Context as _, Result};
use bnn_model::{load_parameters, save_parameters, EnsembleConfig, TrainedMember};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

/// Training was stopped (Ctrl-C, SIGTERM, SIGUSR1) between optimizer steps; the members that
/// had finished are saved and the same command trains only the rest.
#[derive(Debug)]
pub struct TrainingStopped {
    /// Members trained and saved so far (this and earlier sessions).
    pub finished: usize,
    /// Members this run needs.
    pub members: usize,
    pub dir: PathBuf,
}

impl std::fmt::Display for TrainingStopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "training was stopped with {} of {} members trained and saved in {}; the same command (or `bnn sample --resume {}`) trains only the rest",
            self.finished,
            self.members,
            self.dir.join("ensemble").display(),
            self.dir.display()
        )
    }
}

impl std::error::Error for TrainingStopped {}

/// `ensemble/unfinished.json`: the members a stopped training saved, until all are there.
#[derive(Default)]
struct UnfinishedEnsemble {
    records: Vec<Value>,
    seconds: f64,
}

impl UnfinishedEnsemble {
    fn load(path: &Path) -> Result<Self> {
        if !path.exists() {
            return Ok(Self::default());
        }
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let value: Value = serde_json::from_str(&text).with_context(|| {
            format!(
                "{} is corrupt (delete it to train every member again)",
                path.display()
            )
        })?;
        Ok(Self {
            records: value["members"].as_array().cloned().unwrap_or_default(),
            seconds: value["seconds"].as_f64().unwrap_or(0.0),
        })
    }

    fn write(&self, path: &Path) -> Result<()> {
        write_json(
            path,
            &json!({ "members": self.records, "seconds": self.seconds }),
        )
    }
}

fn member_index(record: &Value) -> Option<usize> {
    record["index"].as_u64().map(|j| j as usize)
}

/// The members of a deep ensemble: the chains' starting points in DEI-MCMC.
#[derive(Debug, Clone)]
pub struct TrainedEnsemble {
    /// Flat parameters of each member, in the model's layout.
    pub members: Vec<Vec<f32>>,
    /// The member number of each entry of `members`: `0..M` for a whole run, the shard's
    /// members for one shard of a cluster run.
    pub indices: Vec<usize>,
    /// Training seconds (NaN when a saved ensemble does not record them).
    pub seconds: f64,
    /// `ensemble/member_NN.safetensors`, one per member.
    pub files: Vec<PathBuf>,
}

impl DeiMcmc {
    /// Trains the deep ensemble and saves every member as safetensors plus `members.json`;
    /// refuses a directory that already holds one. Each member is saved as soon as it is
    /// trained (and listed in `ensemble/unfinished.json`), so a stop flag raised during
    /// training ends it between optimizer steps with [`TrainingStopped`], and the next call
    /// trains only the members still missing (the same networks: each has its own stream).
    pub fn train_ensemble(&self) -> Result<TrainedEnsemble> {
        self.claim()?;
        if self.dir.has_ensemble() {
            bail!(
                "{} already holds a trained ensemble; use a new run directory",
                self.dir.root().display()
            );
        }
        let e = &self.config.ensemble;
        let ensemble = EnsembleConfig::new()
            .with_members(e.members)
            .with_epochs(e.epochs)
            .with_learning_rate(e.learning_rate)
            .with_weight_decay(e.weight_decay)
            .with_decoupled_weight_decay(e.decoupled_weight_decay)
            .with_weight_init(e.weight_init)
            .with_batch_size(e.batch_size)
            .with_patience(e.patience)
            .with_seed(self.config.sampler.seed);
        let indices = self.member_indices();
        std::fs::create_dir_all(self.dir.ensemble_dir())
            .with_context(|| format!("creating {}", self.dir.ensemble_dir().display()))?;
        let unfinished = UnfinishedEnsemble::load(&self.dir.unfinished_ensemble())?;
        let kept: Vec<Value> = unfinished
            .records
            .iter()
            .filter(|r| {
                member_index(r)
                    .is_some_and(|j| indices.contains(&j) && self.dir.member(j).is_file())
            })
            .cloned()
            .collect();
        let kept_indices: Vec<usize> = kept.iter().filter_map(member_index).collect();
        let missing: Vec<usize> = indices
            .iter()
            .copied()
            .filter(|j| !kept_indices.contains(j))
            .collect();
        let message = format!(
            "training {} members on {} rows ({} {}, {}) on {}{}",
            if missing.len() == e.members {
                e.members.to_string()
            } else {
                format!("{} of the {} ({:?})", missing.len(), e.members, missing)
            },
            self.data.train.rows,
            e.epochs,
            if e.batch_size.is_some() {
                "epochs at most"
            } else {
                "full-batch Adam steps"
            },
            if e.decoupled_weight_decay {
                "AdamW"
            } else {
                "Adam + L2"
            },
            self.device_text(),
            if kept_indices.is_empty() {
                String::new()
            } else {
                format!("; members {kept_indices:?} were saved by an earlier, stopped training")
            }
        );
        self.progress.report(&ProgressEvent::Started {
            stage: Stage::Ensemble,
            message: &message,
        });
        let start = Instant::now();
        // Each finished member is saved at once; the first saving error is kept for the report.
        let saved = Mutex::new((
            UnfinishedEnsemble {
                records: kept,
                seconds: unfinished.seconds,
            },
            None::<anyhow::Error>,
        ));
        let save = |member: &TrainedMember| {
            let mut guard = saved.lock().unwrap_or_else(|p| p.into_inner());
            if guard.1.is_some() {
                return;
            }
            let result = save_parameters(
                &self.bnn,
                &member.parameters,
                &self.dir.member(member.index),
            )
            .map_err(anyhow::Error::from)
            .and_then(|()| {
                guard.0.records.push(self.member_record(member));
                guard.0.write(&self.dir.unfinished_ensemble())
            });
            if let Err(error) = result {
                guard.1 = Some(error.context(format!("saving member {}", member.index)));
            }
        };
        ensemble.train_members_until(
            &self.bnn,
            &self.data.train,
            self.data.valid.as_ref(),
            &self.device,
            self.config.threads(),
            &missing,
            &self.stop,
            &save,
        )?;
        let (mut progress, failure) = saved.into_inner().unwrap_or_else(|p| p.into_inner());
        if let Some(error) = failure {
            return Err(error);
        }
        progress.seconds += start.elapsed().as_secs_f64();
        let finished: Vec<usize> = progress.records.iter().filter_map(member_index).collect();
        if indices.iter().any(|j| !finished.contains(j)) {
            progress.write(&self.dir.unfinished_ensemble())?;
            return Err(TrainingStopped {
                finished: finished.len(),
                members: indices.len(),
                dir: self.dir.root().to_path_buf(),
            }
            .into());
        }
        progress.records.sort_by_key(member_index);
        let seconds = progress.seconds;
        write_json(
            &self.dir.members_json(),
            &json!({ "members": progress.records, "seconds": seconds }),
        )?;
        let _ = std::fs::remove_file(self.dir.unfinished_ensemble());
        self.write_layout()?;
        let message = format!(
            "trained {} members in {seconds:.1} s; saved to {}",
            indices.len(),
            self.dir.ensemble_dir().display()
        );
        self.progress.report(&ProgressEvent::Finished {
            stage: Stage::Ensemble,
            message: &message,
        });
        let files: Vec<PathBuf> = indices.iter().map(|&j| self.dir.member(j)).collect();
        let members = files
            .iter()
            .map(|file| load_parameters(&self.bnn, file).map_err(anyhow::Error::from))
            .collect::<Result<Vec<_>>>()?;
        Ok(TrainedEnsemble {
            files,
            indices,
            members,
            seconds,
        })
    }

    /// What `members.json` records of a member.
    fn member_record(&self, m: &TrainedMember) -> Value {
        json!({ "index": m.index, "file": self.dir.member(m.index).file_name().map(|n| n.to_string_lossy().into_owned()),
                "seed": m.seed, "init_stream": m.index, "epochs_run": m.epochs_run, "initial_loss": m.initial_loss,
                "final_loss": m.final_loss, "best_valid_loss": m.best_valid_loss })
    }

    /// The ensemble saved in the run directory, if it holds a complete one.
    pub fn saved_ensemble(&self) -> Result<Option<TrainedEnsemble>> {
        let path = self.dir.members_json();
        if !path.exists() {
            return Ok(None);
        }
        let text = std::fs::read_to_string(&path)?;
        let value: serde_json::Value = serde_json::from_str(&text)
            .with_context(|| format!("{} is corrupt", path.display()))?;
        let listed: Vec<usize> = value["members"].as_array().map_or(Vec::new(), |m| {
            m.iter()
                .filter_map(|r| r["index"].as_u64().map(|i| i as usize))
                .collect()
        });
        let wanted = self.member_indices();
        if listed != wanted {
            bail!(
                "{} lists members {listed:?}, this run needs {wanted:?} (ensemble of {}{})",
                path.display(),
                self.config.ensemble.members,
                self.shard
                    .map(|s| format!(", shard {s}"))
                    .unwrap_or_default()
            );
        }
        let files: Vec<PathBuf> = wanted.iter().map(|&j| self.dir.member(j)).collect();
        let members = files
            .iter()
            .map(|file| load_parameters(&self.bnn, file).map_err(anyhow::Error::from))
            .collect::<Result<Vec<_>>>()?;
        Ok(Some(TrainedEnsemble {
            members,
            indices: wanted,
            seconds: value["seconds"].as_f64().unwrap_or(f64::NAN),
            files,
        }))
    }

    /// The saved ensemble, or one trained now (its seconds then include saving it).
    pub fn ensemble(&self) -> Result<TrainedEnsemble> {
        if let Some(found) = self.saved_ensemble()? {
            let message = format!(
                "using the {} saved members in {}",
                found.members.len(),
                self.dir.ensemble_dir().display()
            );
            self.progress.report(&ProgressEvent::Started {
                stage: Stage::Ensemble,
                message: &message,
            });
            return Ok(found);
        }
        let start = Instant::now();
        let trained = self.train_ensemble()?;
        Ok(TrainedEnsemble {
            seconds: start.elapsed().as_secs_f64(),
            ..trained
        })
    }
}

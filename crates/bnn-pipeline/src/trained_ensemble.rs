//! A run's deep ensemble: trained with Burn's Adam and saved as safetensors, or read back.

use crate::dei_mcmc::DeiMcmc;
use crate::progress::{ProgressEvent, Stage};
use crate::run_dir::write_json;
use anyhow::{bail, Context as _, Result};
use bnn_model::{load_parameters, save_parameters, EnsembleConfig};
use serde_json::json;
use std::path::PathBuf;
use std::time::Instant;

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
    /// refuses a directory that already holds one.
    pub fn train_ensemble(&self) -> Result<TrainedEnsemble> {
        self.claim()?;
        if self.dir.has_ensemble() {
            bail!("{} already holds a trained ensemble; use a new run directory", self.dir.root().display());
        }
        let e = &self.config.ensemble;
        let ensemble = EnsembleConfig::new()
            .with_members(e.members)
            .with_epochs(e.epochs)
            .with_learning_rate(e.learning_rate)
            .with_weight_decay(e.weight_decay)
            .with_decoupled_weight_decay(e.decoupled_weight_decay)
            .with_batch_size(e.batch_size)
            .with_patience(e.patience)
            .with_seed(self.config.sampler.seed);
        let indices = self.member_indices();
        let message = format!(
            "training {} members on {} rows ({} {}, {})",
            if indices.len() == e.members { e.members.to_string() } else { format!("{} of the {} ({:?})", indices.len(), e.members, indices) },
            self.data.train.rows,
            e.epochs,
            if e.batch_size.is_some() { "epochs at most" } else { "full-batch Adam steps" },
            if e.decoupled_weight_decay { "AdamW" } else { "Adam + L2" }
        );
        self.progress.report(&ProgressEvent::Started { stage: Stage::Ensemble, message: &message });
        let start = Instant::now();
        let members = ensemble.train_members(&self.bnn, &self.data.train, self.data.valid.as_ref(), &self.device, self.config.threads(), &indices)?;
        let seconds = start.elapsed().as_secs_f64();
        std::fs::create_dir_all(self.dir.ensemble_dir())?;
        for member in &members {
            save_parameters(&self.bnn, &member.parameters, &self.dir.member(member.index))?;
        }
        let records: Vec<_> = members
            .iter()
            .map(|m| {
                json!({ "index": m.index, "file": self.dir.member(m.index).file_name().map(|n| n.to_string_lossy().into_owned()),
                        "seed": m.seed, "init_stream": m.index, "epochs_run": m.epochs_run, "initial_loss": m.initial_loss,
                        "final_loss": m.final_loss, "best_valid_loss": m.best_valid_loss })
            })
            .collect();
        write_json(&self.dir.members_json(), &json!({ "members": records, "seconds": seconds }))?;
        self.write_layout()?;
        let message = format!("trained {} members in {seconds:.1} s; saved to {}", members.len(), self.dir.ensemble_dir().display());
        self.progress.report(&ProgressEvent::Finished { stage: Stage::Ensemble, message: &message });
        Ok(TrainedEnsemble {
            files: members.iter().map(|m| self.dir.member(m.index)).collect(),
            indices: members.iter().map(|m| m.index).collect(),
            members: members.into_iter().map(|m| m.parameters).collect(),
            seconds,
        })
    }

    /// The ensemble saved in the run directory, if it holds a complete one.
    pub fn saved_ensemble(&self) -> Result<Option<TrainedEnsemble>> {
        let path = self.dir.members_json();
        if !path.exists() {
            return Ok(None);
        }
        let text = std::fs::read_to_string(&path)?;
        let value: serde_json::Value = serde_json::from_str(&text).with_context(|| format!("{} is corrupt", path.display()))?;
        let listed: Vec<usize> = value["members"].as_array().map_or(Vec::new(), |m| m.iter().filter_map(|r| r["index"].as_u64().map(|i| i as usize)).collect());
        let wanted = self.member_indices();
        if listed != wanted {
            bail!(
                "{} lists members {listed:?}, this run needs {wanted:?} (ensemble of {}{})",
                path.display(),
                self.config.ensemble.members,
                self.shard.map(|s| format!(", shard {s}")).unwrap_or_default()
            );
        }
        let files: Vec<PathBuf> = wanted.iter().map(|&j| self.dir.member(j)).collect();
        let members = files.iter().map(|file| load_parameters(&self.bnn, file).map_err(anyhow::Error::from)).collect::<Result<Vec<_>>>()?;
        Ok(Some(TrainedEnsemble { members, indices: wanted, seconds: value["seconds"].as_f64().unwrap_or(f64::NAN), files }))
    }

    /// The saved ensemble, or one trained now (its seconds then include saving it).
    pub fn ensemble(&self) -> Result<TrainedEnsemble> {
        if let Some(found) = self.saved_ensemble()? {
            let message = format!("using the {} saved members in {}", found.members.len(), self.dir.ensemble_dir().display());
            self.progress.report(&ProgressEvent::Started { stage: Stage::Ensemble, message: &message });
            return Ok(found);
        }
        let start = Instant::now();
        let trained = self.train_ensemble()?;
        Ok(TrainedEnsemble { seconds: start.elapsed().as_secs_f64(), ..trained })
    }
}

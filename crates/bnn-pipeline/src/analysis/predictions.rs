//! The posterior predictive pass over a run's stored draws, and `predictions.csv` from it.

use crate::analysis::posterior_pass::{
    ensemble_log_scores, run_pass, PosteriorPass, BAND_LEVELS, LEVELS,
};
use crate::config::run_config::Init;
use crate::run::dei_mcmc::DeiMcmc;
use crate::run::progress::{ProgressEvent, Stage};
use crate::storage::run_dir::write_atomic;
use crate::storage::run_lock::Access;
use crate::storage::stored_chains::require_finished;
use anyhow::{anyhow, Result};
use bnn_model::HostData;
use std::path::PathBuf;

/// The predictive pass and the files written from it.
pub struct Predictions {
    pub pass: PosteriorPass,
    /// `None` for a categorical likelihood, which has no predictive intervals.
    pub predictions_csv: Option<PathBuf>,
    /// The training points in original units, for one input and one target only.
    pub train_csv: Option<PathBuf>,
}

impl DeiMcmc {
    /// The predictive pass over the stored draws, writing nothing. A run whose sampling has
    /// not finished is refused: its predictions would pass for the whole run's.
    pub fn posterior_predictive(&self) -> Result<PosteriorPass> {
        let s = &self.config.sampler;
        self.lock(Access::Read)?;
        let chains: Vec<usize> = (0..self.config.chains()).collect();
        require_finished(&self.dir, &chains, s.draws, "predicting from it")?;
        run_pass(
            &self.dir,
            self.posterior(),
            &self.data.test,
            self.config.chains(),
            s.kept_draws(),
            s.max_tree_depth().unwrap_or(0),
            s.seed,
        )
    }

    /// The predictive pass, and `predictions.csv` (and `train.csv`) written from it.
    pub fn predict(&self) -> Result<Predictions> {
        let pass = self.posterior_predictive()?;
        if pass.points.is_empty() {
            let message =
                "no predictive intervals for a categorical likelihood; predictions.csv not written";
            self.progress.report(&ProgressEvent::Finished {
                stage: Stage::Prediction,
                message,
            });
            return Ok(Predictions {
                pass,
                predictions_csv: None,
                train_csv: None,
            });
        }
        let path = self.dir.predictions();
        write_atomic(&path, self.predictions_csv(&pass)?.as_bytes())?;
        let (test, s) = (&self.data.test, &self.data.standardizer);
        let train_csv = if test.x_cols == 1 && test.y_cols == 1 {
            let train = &self.data.train;
            let mut text = String::from("x0,y\n");
            for i in 0..train.rows {
                text += &format!(
                    "{},{}\n",
                    self.original_x(i, train)[0],
                    train.y[i] * s.y_sd[0] + s.y_mean[0]
                );
            }
            write_atomic(&self.dir.train_points(), text.as_bytes())?;
            Some(self.dir.train_points())
        } else {
            None
        };
        let message = format!("wrote {}", path.display());
        self.progress.report(&ProgressEvent::Finished {
            stage: Stage::Prediction,
            message: &message,
        });
        Ok(Predictions {
            pass,
            predictions_csv: Some(path),
            train_csv,
        })
    }

    /// A row's features in original units.
    fn original_x(&self, row: usize, data: &HostData) -> Vec<f64> {
        let s = &self.data.standardizer;
        (0..data.x_cols)
            .map(|j| data.x[row * data.x_cols + j] * s.x_sd[j] + s.x_mean[j])
            .collect()
    }

    fn predictions_csv(&self, pass: &PosteriorPass) -> Result<String> {
        let test = &self.data.test;
        let s = &self.data.standardizer;
        let t = test.y_cols;
        let band_index: Vec<usize> = BAND_LEVELS
            .iter()
            .map(|b| {
                LEVELS
                    .iter()
                    .position(|l| l == b)
                    .ok_or_else(|| anyhow!("band level {b} is not a measured level"))
            })
            .collect::<Result<_>>()?;
        let mut header: Vec<String> = vec!["index".into()];
        if t > 1 {
            header.push("target".into());
        }
        header.extend((0..test.x_cols).map(|j| format!("x{j}")));
        let bands = |suffix: &str| -> Vec<String> {
            let mut v = vec![
                format!("y{suffix}"),
                format!("mean{suffix}"),
                format!("sd{suffix}"),
            ];
            for b in BAND_LEVELS {
                let pct = (b * 100.0).round() as usize;
                v.push(format!("lower_{pct}{suffix}"));
                v.push(format!("upper_{pct}{suffix}"));
            }
            v
        };
        header.extend(bands(""));
        header.extend(bands("_std"));
        // Each row's log predictive density, whose mean is the LPPD; in original units it is
        // the standardized one less log(y_sd). The deep ensemble's beside it for runs that
        // started from one.
        let ensemble_scores = match self.config.sampler.init {
            Init::Ensemble => self
                .saved_ensemble()?
                .map(|e| ensemble_log_scores(self.posterior(), &e.members, test)),
            _ => None,
        };
        header.extend(["log_score".into(), "log_score_std".into()]);
        if ensemble_scores.is_some() {
            header.extend(["ensemble_log_score".into(), "ensemble_log_score_std".into()]);
        }
        let mut out = header.join(",") + "\n";
        for i in 0..test.rows {
            for k in 0..t {
                let p = &pass.points[i * t + k];
                let (ym, ys) = (s.y_mean[k], s.y_sd[k]);
                let mut row: Vec<String> = vec![i.to_string()];
                if t > 1 {
                    row.push(k.to_string());
                }
                row.extend(self.original_x(i, test).iter().map(|v| v.to_string()));
                let y = test.y[i * t + k];
                let mut scaled = vec![y * ys + ym, p.mean * ys + ym, p.sd * ys];
                let mut standard = vec![y, p.mean, p.sd];
                for &b in &band_index {
                    let (lo, hi) = p.intervals[b];
                    scaled.extend([lo * ys + ym, hi * ys + ym]);
                    standard.extend([lo, hi]);
                }
                let score = pass.log_scores[i * t + k];
                let mut scores = vec![score - ys.ln(), score];
                if let Some(ensemble) = &ensemble_scores {
                    let score = ensemble[i * t + k];
                    scores.extend([score - ys.ln(), score]);
                }
                row.extend(
                    scaled
                        .iter()
                        .chain(&standard)
                        .chain(&scores)
                        .map(|v| v.to_string()),
                );
                out += &row.join(",");
                out.push('\n');
            }
        }
        Ok(out)
    }
}

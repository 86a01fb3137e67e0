//! A run's metrics against the deep-ensemble and linear baselines, into `summary.json`.

use crate::analysis::chain_stationarity::{chain_stationarity, ChainStationarity};
use crate::analysis::linear_baseline::LinearBaseline;
use crate::analysis::posterior_pass::{
    calibration_error, coverage_at, ensemble_metrics, member_metrics, PosteriorPass, LEVELS,
};
use crate::analysis::predictions::Predictions;
use crate::config::run_config::Init;
use crate::run::dei_mcmc::DeiMcmc;
use crate::run::progress::{ProgressEvent, Stage};
use crate::storage::run_dir::{write_atomic, write_json};
use anyhow::{anyhow, Result};
use bnn_diagnostics::serialize_non_finite;
use bnn_model::BnnConfig;
use serde::Serialize;
use std::path::PathBuf;

/// One point of the calibration curve.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CalibrationPoint {
    pub nominal: f64,
    pub observed: f64,
}

/// One target of a multi-output regression, in `summary.json`'s `per_target` (the joint values
/// stay at the top level).
#[derive(Debug, Clone, Serialize)]
pub struct TargetSummary {
    /// The target's column name in the data.
    pub target: String,
    pub rmse: f64,
    pub rmse_original_units: f64,
    /// Mean log marginal predictive density of this target.
    pub lppd: f64,
    pub coverage_50: Option<f64>,
    pub coverage_90: Option<f64>,
    pub calibration_error: Option<f64>,
    pub de_rmse: Option<f64>,
    pub de_lppd: Option<f64>,
}

/// What `summary.json` holds. Metrics are on the standardized scale unless named otherwise;
/// `de_*` is the deep ensemble as an equal mixture, `lm_*` the linear model; NaN is `null`.
#[derive(Debug, Clone, Serialize)]
pub struct RunSummary {
    pub dataset: String,
    pub split_seed: u64,
    pub n_train: usize,
    pub n_valid: Option<usize>,
    pub n_test: usize,
    pub n_params: usize,
    /// The registered sampler's name.
    pub sampler: String,
    pub init: Init,
    pub chains: usize,
    pub members: Option<usize>,
    pub warmup: usize,
    pub draws: usize,
    pub thin: usize,
    pub draws_stored: usize,
    pub draws_per_chain: Vec<usize>,
    pub seed: u64,
    pub device: String,
    pub model: BnnConfig,
    /// Over all targets' squared errors (one target: that target's).
    pub rmse: f64,
    /// Each target's error in its own units, pooled as `rmse` is.
    pub rmse_original_units: f64,
    /// Joint over the targets: log of the predictive density of a test row's targets together.
    pub lppd: f64,
    pub nll: f64,
    pub accuracy: f64,
    /// Several targets: each one's metrics (absent for one target and for classification).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub per_target: Vec<TargetSummary>,
    pub coverage_50: Option<f64>,
    pub coverage_75: Option<f64>,
    pub coverage_90: Option<f64>,
    pub coverage_95: Option<f64>,
    /// Root mean square of nominal minus observed coverage over the measured levels.
    pub calibration_error: Option<f64>,
    pub calibration: Vec<CalibrationPoint>,
    pub predictive_samples_per_point: usize,
    pub chain_rmse: Vec<f64>,
    pub chain_lppd: Vec<f64>,
    /// Chains whose RMSE or LPPD is worse than the linear model's (kept in the pool; inspect them).
    pub chains_worse_than_linear: Vec<usize>,
    pub chains_finished_early: Option<Vec<bool>>,
    pub de_rmse: Option<f64>,
    pub de_lppd: Option<f64>,
    pub de_nll: Option<f64>,
    /// Each ensemble member alone (the paper's "single DNN" is their mean); empty without an
    /// ensemble start.
    pub member_rmse: Vec<f64>,
    pub member_lppd: Vec<f64>,
    pub lm_rmse: Option<f64>,
    pub lm_lppd: Option<f64>,
    pub divergences: usize,
    pub mean_accept_stat: f64,
    pub mean_leapfrog_per_draw: f64,
    pub max_tree_depth_hits: usize,
    /// Split R-hat of the per-draw test log likelihood; `"inf"` in JSON for stuck chains.
    #[serde(serialize_with = "serialize_non_finite")]
    pub rhat_test_loglik: f64,
    #[serde(serialize_with = "serialize_non_finite")]
    pub rhat_test_rmse: f64,
    #[serde(serialize_with = "serialize_non_finite")]
    pub pointwise_predictive_rhat_max: f64,
    #[serde(serialize_with = "serialize_non_finite")]
    pub pointwise_predictive_rhat_mean: f64,
    /// Bulk ESS of the per-draw test log likelihood.
    #[serde(serialize_with = "serialize_non_finite")]
    pub ess_test_loglik: f64,
    /// Median bulk ESS of the pointwise predictive means (the first test points).
    #[serde(serialize_with = "serialize_non_finite")]
    pub pointwise_predictive_ess_median: f64,
    /// Gradient evaluations of the sampling phase (warmup excluded): the cost behind those ESS.
    /// Counted on the stored draws and multiplied by `thin` (an estimate when thinning).
    pub sampling_gradients: f64,
    /// Gradient evaluations of the warmup: `n_leapfrog__` summed over every chain's
    /// `adaptation_chain_<c>.csv` (the step-size search's few trial steps not included). `None`
    /// without those files (a run with no warmup, or one whose files are gone).
    pub warmup_gradients: Option<f64>,
    /// Per chain: its warmup's length and how it ended, and whether its draws look stationary
    /// (at most 10% divergent, acceptance of the last tenth within 0.1 of the first tenth's).
    pub chain_stationarity: Vec<ChainStationarity>,
    /// Chains whose verdict is not `stationary`.
    pub chains_not_stationary: Vec<usize>,
    pub seconds_ensemble: Option<f64>,
    pub seconds_warmup: Option<f64>,
    pub seconds_sampling: Option<f64>,
}

/// The summary and where it was written.
pub struct Evaluation {
    pub summary: RunSummary,
    pub summary_json: PathBuf,
    pub cumulative_lppd_csv: PathBuf,
}

impl DeiMcmc {
    /// Metrics of the predictive pass against the baselines, into `summary.json` and
    /// `cumulative_lppd.csv`; needs finished sampling (`sampling.json`).
    pub fn evaluate(&self, predictions: &Predictions) -> Result<Evaluation> {
        self.evaluate_pass(&predictions.pass)
    }

    /// Gradient evaluations of the warmup, from the adaptation files of the chains this
    /// directory holds (see [`RunSummary::warmup_gradients`]).
    fn warmup_gradients(&self) -> Option<f64> {
        let mut total = 0.0;
        let mut found = false;
        for chain in 0..self.config.chains() {
            let Ok(text) = std::fs::read_to_string(self.dir.adaptation(chain)) else {
                continue;
            };
            let mut lines = text.lines();
            let column = lines.next()?.split(',').position(|c| c == "n_leapfrog__")?;
            total += lines
                .filter_map(|l| l.split(',').nth(column)?.parse::<f64>().ok())
                .sum::<f64>();
            found = true;
        }
        found.then_some(total)
    }

    /// [`DeiMcmc::evaluate`] from a pass without predictions written.
    pub fn evaluate_pass(&self, pass: &PosteriorPass) -> Result<Evaluation> {
        self.lock(crate::storage::run_lock::Access::Read)?;
        let config = &self.config;
        let test = &self.data.test;
        let sampling: serde_json::Value = std::fs::read_to_string(self.dir.sampling())
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .ok_or_else(|| anyhow!("{} has no finished sampling (sampling.json missing); run or resume `bnn sample` first", self.dir.root().display()))?;
        let stationarity = chain_stationarity(&self.dir, config.chains())?;
        let members = match config.sampler.init {
            Init::Ensemble => self.saved_ensemble()?.map(|e| e.members),
            _ => None,
        };
        let de = members
            .as_ref()
            .map(|m| ensemble_metrics(self.posterior(), m, test));
        let single = members
            .as_ref()
            .map(|m| member_metrics(self.posterior(), m, test))
            .unwrap_or_default();
        let gaussian = !pass.points.is_empty();
        let lm = gaussian
            .then(|| LinearBaseline::fit(&self.data.train).map(|f| f.evaluate(test)))
            .flatten();
        let y_sd = |k: usize| self.data.standardizer.y_sd.get(k).copied().unwrap_or(1.0);
        let per_target: Vec<TargetSummary> = pass
            .pooled
            .per_target
            .iter()
            .enumerate()
            .map(|(k, m)| {
                let coverage = pass
                    .coverage_per_target
                    .get(k)
                    .map_or(&[][..], Vec::as_slice);
                let de_target = de.as_ref().and_then(|d| d.per_target.get(k));
                TargetSummary {
                    target: self
                        .data
                        .target_names
                        .get(k)
                        .cloned()
                        .unwrap_or_else(|| format!("y{k}")),
                    rmse: m.rmse,
                    rmse_original_units: m.rmse * y_sd(k),
                    lppd: m.lppd,
                    coverage_50: coverage_at(coverage, 0.5),
                    coverage_90: coverage_at(coverage, 0.9),
                    calibration_error: calibration_error(coverage),
                    de_rmse: de_target.map(|d| d.rmse),
                    de_lppd: de_target.map(|d| d.lppd),
                }
            })
            .collect();
        let rmse_original_units = if per_target.is_empty() {
            pass.pooled.rmse * y_sd(0)
        } else {
            (per_target
                .iter()
                .map(|t| t.rmse_original_units.powi(2))
                .sum::<f64>()
                / per_target.len() as f64)
                .sqrt()
        };
        let flagged: Vec<usize> = match &lm {
            Some(lm) => pass
                .per_chain
                .iter()
                .enumerate()
                .filter(|(_, m)| m.rmse > lm.rmse || m.lppd < lm.lppd)
                .map(|(c, _)| c)
                .collect(),
            None => Vec::new(),
        };
        let mut csv = String::from("chain,draw,lppd\n");
        for (c, history) in pass.cumulative_lppd.iter().enumerate() {
            for (s, v) in history.iter().enumerate() {
                csv += &format!("{c},{},{v}\n", s + 1);
            }
        }
        write_atomic(&self.dir.cumulative_lppd(), csv.as_bytes())?;
        let summary = RunSummary {
            dataset: self.data.name.clone(),
            split_seed: config.data.split_seed,
            n_train: self.data.train.rows,
            n_valid: self.data.valid.as_ref().map(|v| v.rows),
            n_test: test.rows,
            n_params: self.layout.dim(),
            sampler: config.sampler.algorithm.name().to_string(),
            init: config.sampler.init,
            chains: config.chains(),
            members: members.as_ref().map(|m| m.len()),
            warmup: config.sampler.warmup,
            draws: config.sampler.draws,
            thin: config.sampler.thin,
            draws_stored: pass.draws_per_chain.iter().sum(),
            draws_per_chain: pass.draws_per_chain.clone(),
            seed: config.sampler.seed,
            device: config.device_name()?.concrete().to_string(),
            model: self.bnn.clone(),
            rmse: pass.pooled.rmse,
            rmse_original_units,
            lppd: pass.pooled.lppd,
            nll: pass.pooled.nll,
            accuracy: pass.pooled.accuracy,
            per_target,
            coverage_50: pass.coverage_at(0.5),
            coverage_75: pass.coverage_at(0.75),
            coverage_90: pass.coverage_at(0.9),
            coverage_95: pass.coverage_at(0.95),
            calibration_error: pass.calibration_error(),
            calibration: LEVELS
                .iter()
                .zip(&pass.coverage)
                .map(|(&nominal, &observed)| CalibrationPoint { nominal, observed })
                .collect(),
            predictive_samples_per_point: pass.predictive_samples_per_point,
            chain_rmse: pass.per_chain.iter().map(|m| m.rmse).collect(),
            chain_lppd: pass.per_chain.iter().map(|m| m.lppd).collect(),
            chains_worse_than_linear: flagged,
            chains_finished_early: serde_json::from_value(sampling["finished_early"].clone()).ok(),
            de_rmse: de.as_ref().map(|m| m.rmse),
            de_lppd: de.as_ref().map(|m| m.lppd),
            de_nll: de.as_ref().map(|m| m.nll),
            member_rmse: single.iter().map(|m| m.rmse).collect(),
            member_lppd: single.iter().map(|m| m.lppd).collect(),
            lm_rmse: lm.as_ref().map(|m| m.rmse),
            lm_lppd: lm.as_ref().map(|m| m.lppd),
            divergences: pass.divergences,
            mean_accept_stat: pass.mean_accept_stat,
            mean_leapfrog_per_draw: pass.mean_leapfrog,
            max_tree_depth_hits: pass.max_tree_depth_hits,
            rhat_test_loglik: pass.rhat_test_loglik,
            rhat_test_rmse: pass.rhat_test_rmse,
            pointwise_predictive_rhat_max: pass.pointwise_rhat_max,
            pointwise_predictive_rhat_mean: pass.pointwise_rhat_mean,
            ess_test_loglik: pass.ess_test_loglik,
            pointwise_predictive_ess_median: pass.pointwise_ess_median,
            sampling_gradients: pass.gradients * self.config.sampler.thin.max(1) as f64,
            warmup_gradients: self.warmup_gradients(),
            chains_not_stationary: stationarity
                .iter()
                .filter(|c| !c.is_stationary())
                .map(|c| c.chain)
                .collect(),
            chain_stationarity: stationarity,
            seconds_ensemble: sampling["seconds_ensemble"].as_f64(),
            seconds_warmup: sampling["seconds_warmup"].as_f64(),
            seconds_sampling: sampling["seconds_sampling"].as_f64(),
        };
        // Through a JSON value: its keys are sorted, as summary.json has always had them.
        write_json(&self.dir.summary(), &serde_json::to_value(&summary)?)?;
        self.progress.report(&ProgressEvent::Finished {
            stage: Stage::Evaluation,
            message: &format!("wrote {}", self.dir.summary().display()),
        });
        Ok(Evaluation {
            summary,
            summary_json: self.dir.summary(),
            cumulative_lppd_csv: self.dir.cumulative_lppd(),
        })
    }
}

//! Which network, target acceptance and warmup `bnn run` should default to, decided by
//! measurement: candidates (an activation, a target acceptance, a warmup policy) each run as
//! Table 3 runs (the paper's model otherwise: 16-16, N(0, 1) priors, heteroscedastic head,
//! 12 members, 12 NUTS chains × (100 + 1000), depth 10) on the small UCI sets and splits, from
//! the same seeds, so two candidates with the same activation start from the same members. The
//! report puts the candidates side by side per dataset and checks each against the goals of
//! the flagship's defaults (LPPD, calibration, coverage, divergences, acceptance drift, cost
//! against the paper's ReLU with the fixed warmup).
//!
//! Runs go to `out/<candidate>/<dataset>-split<s>/`; finished runs are reused and a stopped one
//! continues from its checkpoints, so the study can run over several sessions. The tables are
//! rewritten after every finished run (`out/defaults.md`), so what has finished can be read
//! (and committed) before the rest has run.

mod report;

use crate::dei_runs::{finish_run, write_study_record, ExtraRunFlags, RunEnd, RunsProgress};
use crate::table3::{read_run, Table3Config, Table3Run, TABLE3};
use anyhow::{bail, Context as _, Result};
use bnn_sampler::WarmupPolicy;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

pub use report::{goals_table, DatasetGoals, Goal};

/// One setting of `bnn run`'s defaults under test.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// A hidden activation `--activation` takes.
    pub activation: String,
    /// NUTS's target acceptance.
    pub target_accept: f64,
    pub warmup_policy: WarmupPolicy,
}

impl Candidate {
    /// The paper's: ReLU, target 0.8, the fixed 100-iteration warmup (the reference the cost
    /// goals are measured against).
    pub fn paper() -> Self {
        Self {
            activation: "relu".into(),
            target_accept: 0.8,
            warmup_policy: WarmupPolicy::Fixed,
        }
    }

    /// `relu-fixed-0.80`, `silu-0.95` (the stationary warmup is the unmarked default): the run
    /// folder's name and the tables' label.
    pub fn name(&self) -> String {
        let policy = match self.warmup_policy {
            WarmupPolicy::Fixed => "-fixed",
            _ => "",
        };
        format!("{}{policy}-{:.2}", self.activation, self.target_accept)
    }

    /// Reads [`Candidate::name`]'s form back (`silu-0.9`, `relu-fixed-0.8`).
    pub fn parse(text: &str) -> Result<Self> {
        let parts: Vec<&str> = text.split('-').collect();
        let (activation, policy, target) = match parts.as_slice() {
            [a, "fixed", t] => (*a, WarmupPolicy::Fixed, *t),
            [a, t] => (*a, WarmupPolicy::Stationary, *t),
            _ => bail!("--candidates: '{text}' is not ACTIVATION[-fixed]-TARGET (e.g. silu-0.95, relu-fixed-0.8)"),
        };
        let target_accept: f64 = target
            .parse()
            .ok()
            .filter(|t: &f64| *t > 0.0 && *t < 1.0)
            .with_context(|| {
                format!("--candidates: '{text}': the target acceptance '{target}' is not a number in (0, 1)")
            })?;
        activation
            .parse::<bnn_model::Activation>()
            .map_err(|e| anyhow::anyhow!("--candidates: '{text}': {e}"))?;
        Ok(Self {
            activation: activation.to_string(),
            target_accept,
            warmup_policy: policy,
        })
    }
}

/// What `bnn study defaults` runs.
pub struct DefaultsConfig {
    /// The candidates, the paper's setting ([`Candidate::paper`]) among them.
    pub candidates: Vec<Candidate>,
    /// Datasets (Table 3's) and splits (split seeds = chain seeds `0..splits`); the large sets
    /// (bikesharing) take `large_splits`.
    pub datasets: Vec<String>,
    pub splits: u64,
    pub large_splits: u64,
    /// NUTS budget per chain: warmup, draws, maximum tree depth (the paper's: 100, 1000, 10).
    pub warmup: usize,
    pub draws: usize,
    pub max_depth: usize,
    /// `bnn run` flags for every run, under the candidate's own settings.
    pub extra: Arc<ExtraRunFlags>,
}

impl Default for DefaultsConfig {
    fn default() -> Self {
        let paper = Table3Config::of(TABLE3);
        Self {
            candidates: default_candidates(),
            datasets: ["airfoil", "concrete", "energy", "yacht"]
                .map(String::from)
                .to_vec(),
            splits: paper.splits,
            large_splits: paper.large_splits,
            warmup: paper.warmup,
            draws: paper.draws,
            max_depth: paper.max_depth,
            extra: Arc::new(ExtraRunFlags::default()),
        }
    }
}

/// The grid of the issue: the paper's ReLU (fixed and stationary warmup) and the smooth
/// activations at targets 0.8, 0.9 and 0.95 with the stationary warmup.
pub fn default_candidates() -> Vec<Candidate> {
    let mut candidates = vec![
        Candidate::paper(),
        Candidate {
            warmup_policy: WarmupPolicy::Stationary,
            ..Candidate::paper()
        },
    ];
    for activation in ["relu", "silu", "tanh", "gelu", "softplus"] {
        for target_accept in [0.8, 0.9, 0.95] {
            let candidate = Candidate {
                activation: activation.into(),
                target_accept,
                warmup_policy: WarmupPolicy::Stationary,
            };
            if !candidates.contains(&candidate) {
                candidates.push(candidate);
            }
        }
    }
    candidates
}

impl DefaultsConfig {
    /// One candidate's Table 3 runs: the same datasets, splits and budget, its activation,
    /// target and warmup policy over the extra flags.
    fn candidate_runs(&self, candidate: &Candidate) -> Table3Config {
        let (user, chosen) = (self.extra.clone(), candidate.clone());
        let words = [
            self.extra.words.clone(),
            vec![
                format!("--activation {}", candidate.activation),
                format!("--target-accept {}", candidate.target_accept),
            ],
        ]
        .concat();
        Table3Config {
            datasets: self.datasets.clone(),
            splits: self.splits,
            large_splits: self.large_splits,
            warmup: self.warmup,
            draws: self.draws,
            max_depth: self.max_depth,
            warmup_policy: candidate.warmup_policy,
            extra: ExtraRunFlags {
                base: self.extra.base.clone(),
                apply: Box::new(move |config| with_candidate((user.apply)(config)?, &chosen)),
                target_chosen: self.extra.target_chosen,
                words,
            },
            ..Table3Config::of(TABLE3)
        }
    }

    /// The runs of every candidate, as (dataset, split, folder name): Table 3's plan.
    fn runs(&self) -> Vec<(String, u64, String)> {
        self.candidate_runs(&Candidate::paper()).runs()
    }

    /// Every planned run as (candidate, dataset, split, run directory), candidates innermost
    /// so that each dataset and split is finished for every candidate before the next begins:
    /// a study stopped early has whole comparisons.
    pub fn plan(&self, out: &Path) -> Vec<(usize, String, u64, PathBuf)> {
        let mut plan = Vec::new();
        for (dataset, split, name) in self.runs() {
            for (k, candidate) in self.candidates.iter().enumerate() {
                let dir = out.join(candidate.name()).join(&name);
                plan.push((k, dataset.clone(), split, dir));
            }
        }
        plan
    }

    /// Refuses bad settings, naming the flag, before anything is written.
    pub fn validate(&self) -> Result<()> {
        if self.candidates.is_empty() {
            bail!("--candidates: name at least one candidate");
        }
        if !self.candidates.contains(&Candidate::paper()) {
            bail!(
                "--candidates: the paper's setting ({}) must be among them: the cost goals are measured against it",
                Candidate::paper().name()
            );
        }
        for candidate in &self.candidates {
            self.candidate_runs(candidate).validate()?;
        }
        Ok(())
    }
}

/// `config` with the candidate's activation and NUTS target (its warmup policy is the Table 3
/// runs' own setting). An `--extra` that switched the runs to a sampler without a target
/// acceptance is refused by name.
fn with_candidate(
    mut config: bnn_pipeline::RunConfig,
    candidate: &Candidate,
) -> Result<bnn_pipeline::RunConfig> {
    config.model.activation = candidate.activation.clone();
    let target = toml::Value::Float(candidate.target_accept);
    if let Err(e) = config.sampler.algorithm.set("target_accept", target) {
        bail!(
            "--extra: the defaults study compares NUTS target acceptances, and {} has none: {e}",
            config.sampler.algorithm.name()
        );
    }
    Ok(config)
}

/// What the study wrote.
pub struct DefaultsReport {
    /// `defaults.md`: per dataset a table of the candidates, then the goals.
    pub tables: String,
    /// Every finished run, with its candidate's index.
    pub runs: Vec<(usize, Table3Run)>,
    pub files: Vec<PathBuf>,
}

/// Runs (or reuses) every candidate's runs into `out/<candidate>/<dataset>-split<s>/`,
/// rewriting `out/defaults.md` after each, and writes `out/study.json`.
pub fn run_defaults(
    config: &DefaultsConfig,
    out: &Path,
    progress: &dyn RunsProgress,
    stop: &Arc<AtomicBool>,
) -> Result<DefaultsReport> {
    config.validate()?;
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let plan = config.plan(out);
    let tables_path = out.join("defaults.md");
    let mut runs = Vec::new();
    let mut finished = Vec::new();
    for (index, (k, dataset, split, dir)) in plan.iter().enumerate() {
        let candidate = &config.candidates[*k];
        let table3 = config.candidate_runs(candidate);
        let label = format!("{} on {dataset} split {split}", candidate.name());
        if !dir.join("summary.json").is_file() {
            progress.note(&format!(
                "== {label} (run {} of {}) into {}",
                index + 1,
                plan.len(),
                dir.display()
            ));
        }
        let end = finish_run(
            table3.run_config(dataset, *split)?,
            dir,
            &label,
            progress,
            stop,
        )?;
        if end == RunEnd::Stopped {
            let missing: Vec<String> = plan[index..]
                .iter()
                .map(|p| p.3.display().to_string())
                .collect();
            write_study_record(out, &finished, &missing)?;
        }
        let run =
            read_run(dataset, *split, dir).with_context(|| format!("reading {}", dir.display()))?;
        runs.push((*k, run));
        finished.push(dir.clone());
        let tables = report::tables(config, &runs);
        bnn_pipeline::write_atomic(&tables_path, tables.as_bytes())?;
    }
    write_study_record(out, &finished, &[])?;
    Ok(DefaultsReport {
        tables: report::tables(config, &runs),
        runs,
        files: vec![tables_path, out.join("study.json")],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidate_names_read_back() {
        for candidate in default_candidates() {
            assert_eq!(Candidate::parse(&candidate.name()).unwrap(), candidate);
        }
        assert_eq!(Candidate::paper().name(), "relu-fixed-0.80");
        assert_eq!(Candidate::parse("silu-0.9").unwrap().name(), "silu-0.90");
        for bad in ["silu", "silu-1.2", "swish-0.9", "relu-slow-0.9"] {
            let error = format!("{:#}", Candidate::parse(bad).unwrap_err());
            assert!(error.starts_with("--candidates: "), "{error}");
        }
    }

    #[test]
    fn each_candidate_changes_only_its_activation_target_and_warmup() {
        let config = DefaultsConfig::default();
        let paper = config
            .candidate_runs(&Candidate::paper())
            .run_config("energy", 1)
            .unwrap();
        let gelu = Candidate::parse("gelu-0.95").unwrap();
        let run = config
            .candidate_runs(&gelu)
            .run_config("energy", 1)
            .unwrap();
        assert_eq!(run.model.activation, "gelu");
        assert!(run.sampler.stationary_warmup());
        assert!(!paper.sampler.stationary_warmup());
        let mut same = run.clone();
        same.model.activation = "relu".into();
        same.sampler = paper.sampler.clone();
        assert_eq!(same.to_toml().unwrap(), paper.to_toml().unwrap());
        assert!(run.to_toml().unwrap().contains("target_accept = 0.95"));
        // The same members for two targets of one activation: data, model, ensemble and seed.
        let gelu_08 = config
            .candidate_runs(&Candidate::parse("gelu-0.8").unwrap())
            .run_config("energy", 1)
            .unwrap();
        assert_eq!(run.ensemble_identity(), gelu_08.ensemble_identity());
    }

    #[test]
    fn the_paper_setting_must_be_a_candidate() {
        let config = DefaultsConfig {
            candidates: vec![Candidate::parse("silu-0.9").unwrap()],
            ..DefaultsConfig::default()
        };
        let error = format!("{:#}", config.validate().unwrap_err());
        assert!(error.contains("relu-fixed-0.80"), "{error}");
    }
}

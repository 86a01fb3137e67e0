//! Sommer et al. (ICML 2024), Table 3: DEI-MCMC against the deep ensemble on six UCI sets, one
//! whole run per dataset and split, and a markdown table of ours beside the paper's numbers,
//! with a second table per run (time, gradients, divergences per chain, step sizes, coverage
//! and calibration).
//!
//! The paper's setting (the defaults): ReLU MLP 16-16, N(0, 1) priors on all parameters,
//! heteroscedastic Gaussian head, 12 members (Adam, 5000 full-batch epochs, weight decay 1e-2),
//! 12 NUTS chains, warmup 100, 1000 draws, target 0.8, depth 10, data standardized with
//! full-data statistics as in their code ([`paper_model_config`]). The warmup ends by
//! [`Table3Config::warmup_policy`]: the stationary check of `bnn run` (default) or the paper's
//! fixed 100 iterations. The two large sets
//! (bikesharing, protein) take [`Table3Config::large_splits`] splits (one split of protein at
//! the paper's budget is hours on two cores) and may take a smaller budget; every row of the
//! tables names the budget its runs had. Runs already finished in the output folder are reused,
//! so the study can be stopped and started again; a reused run whose budget differs from the
//! one asked for is named and keeps its own budget in the tables.

mod report;

use crate::dei_runs::{
    check_dataset, finish_run, paper_model_config, write_study_record, ExtraRunFlags, RunEnd,
    RunsProgress,
};
use anyhow::{bail, Context as _, Result};
use bnn_sampler::WarmupPolicy;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

pub use report::{read_run, ChainStats, Table3Run};

/// Sommer et al. 2024, Table 3: (dataset, DEI RMSE, DEI LPPD, DE RMSE, DE LPPD).
pub const PAPER: [(&str, f64, f64, f64, f64); 6] = [
    ("airfoil", 0.21, 0.58, 0.24, 0.19),
    ("bikesharing", 0.25, 0.63, 0.30, 0.42),
    ("concrete", 0.31, 0.23, 0.32, -0.08),
    ("energy", 0.04, 2.06, 0.04, 1.93),
    ("protein", 0.70, -0.75, 0.77, -1.05),
    ("yacht", 0.03, 3.08, 0.03, 2.55),
];

/// The sets with over 10,000 rows: their own number of splits and optionally a smaller budget.
pub const LARGE: [&str; 2] = ["bikesharing", "protein"];

/// What `bnn study table3` runs.
pub struct Table3Config {
    /// Datasets, each one of Table 3's.
    pub datasets: Vec<String>,
    /// Splits (split seeds 0..splits) of the small sets, and of the large ones.
    pub splits: u64,
    pub large_splits: u64,
    /// NUTS budget per chain: warmup, draws, maximum tree depth.
    pub warmup: usize,
    pub draws: usize,
    pub max_depth: usize,
    /// The large sets' draws and depth, where they differ.
    pub large_draws: Option<usize>,
    pub large_max_depth: Option<usize>,
    /// What ends each chain's warmup: `Stationary` (the default of `bnn run`) or `Fixed` (the
    /// paper's 100 iterations exactly).
    pub warmup_policy: WarmupPolicy,
    /// `bnn run` flags for every run.
    pub extra: ExtraRunFlags,
}

impl Default for Table3Config {
    fn default() -> Self {
        Self {
            datasets: PAPER.iter().map(|p| p.0.to_string()).collect(),
            splits: 3,
            large_splits: 1,
            warmup: 100,
            draws: 1000,
            max_depth: 10,
            large_draws: None,
            large_max_depth: None,
            warmup_policy: WarmupPolicy::Stationary,
            extra: ExtraRunFlags::default(),
        }
    }
}

/// The (warmup, draws, maximum depth, warmup policy) of a run: its `config.toml`'s, or one
/// asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    pub warmup: usize,
    pub draws: usize,
    pub max_depth: usize,
    /// What ended the warmup: `warmup` exactly (fixed), or `warmup` and then checks (stationary).
    pub policy: WarmupPolicy,
}

impl std::fmt::Display for Budget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} + {}, depth {}, {} warmup",
            self.warmup,
            self.draws,
            self.max_depth,
            self.policy.name()
        )
    }
}

impl Table3Config {
    pub fn is_large(dataset: &str) -> bool {
        LARGE.contains(&dataset)
    }

    pub fn splits_for(&self, dataset: &str) -> u64 {
        if Self::is_large(dataset) {
            self.large_splits
        } else {
            self.splits
        }
    }

    /// The budget asked for on this dataset.
    pub fn budget_for(&self, dataset: &str) -> Budget {
        let large = Self::is_large(dataset);
        Budget {
            warmup: self.warmup,
            draws: self.large_draws.filter(|_| large).unwrap_or(self.draws),
            max_depth: self
                .large_max_depth
                .filter(|_| large)
                .unwrap_or(self.max_depth),
            policy: self.warmup_policy,
        }
    }

    /// Every planned run as (dataset, split, run directory name), in order.
    pub fn runs(&self) -> Vec<(String, u64, String)> {
        self.datasets
            .iter()
            .flat_map(|d| {
                (0..self.splits_for(d)).map(move |s| (d.clone(), s, format!("{d}-split{s}")))
            })
            .collect()
    }

    /// The run config of one dataset and split: the paper's model, split seed and chain seed
    /// `split`, this budget, then the extra flags.
    pub fn run_config(&self, dataset: &str, split: u64) -> Result<bnn_pipeline::RunConfig> {
        let budget = self.budget_for(dataset);
        paper_model_config(&self.extra, dataset, split, split, |c| {
            c.sampler.warmup = budget.warmup;
            c.sampler.draws = budget.draws;
            c.sampler.warmup_policy = budget.policy;
            c.sampler.algorithm =
                crate::dei_runs::nuts_with_depth(&c.sampler.algorithm, budget.max_depth);
        })
    }

    /// Refuses bad settings, naming the flag, before anything is written.
    pub fn validate(&self) -> Result<()> {
        if let Some(unknown) = self
            .datasets
            .iter()
            .find(|d| !PAPER.iter().any(|p| p.0 == d.as_str()))
        {
            bail!("--datasets: {unknown} is not in Table 3 (airfoil, bikesharing, concrete, energy, protein, yacht)");
        }
        if self.datasets.is_empty() {
            bail!("--datasets: name at least one dataset");
        }
        for (flag, value) in [
            ("--splits", self.splits as usize),
            ("--large-splits", self.large_splits as usize),
            ("--draws", self.draws),
            ("--max-depth", self.max_depth),
        ] {
            if value == 0 {
                bail!("{flag} must be at least 1");
            }
        }
        for (flag, value) in [
            ("--large-draws", self.large_draws),
            ("--large-max-depth", self.large_max_depth),
        ] {
            if value == Some(0) {
                bail!("{flag} must be at least 1");
            }
        }
        for dataset in &self.datasets {
            let config = self.run_config(dataset, 0).with_context(|| {
                format!("the runs on {dataset} (--draws, --warmup, --max-depth, --extra)")
            })?;
            check_dataset(&config)?;
        }
        Ok(())
    }
}

/// What the study wrote.
pub struct Table3Report {
    /// The two tables, as written to `table3.md`.
    pub table: String,
    pub runs: Vec<Table3Run>,
    pub files: Vec<PathBuf>,
}

/// Runs (or reuses) every dataset and split into `out/<dataset>-split<s>/` and writes
/// `out/table3.md` and `out/study.json`.
pub fn run_table3(
    config: &Table3Config,
    out: &Path,
    progress: &dyn RunsProgress,
    stop: &Arc<AtomicBool>,
) -> Result<Table3Report> {
    config.validate()?;
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let planned = config.runs();
    let mut runs = Vec::new();
    let mut finished = Vec::new();
    for (index, (dataset, split, name)) in planned.iter().enumerate() {
        let dir = out.join(name);
        let asked = config.budget_for(dataset);
        let label = format!("{dataset} split {split}");
        if !dir.join("summary.json").is_file() {
            progress.note(&format!(
                "== {label} (run {} of {}): {asked}{} into {}",
                index + 1,
                planned.len(),
                config.extra.footnote(", "),
                dir.display()
            ));
        }
        let end = finish_run(
            config.run_config(dataset, *split)?,
            &dir,
            &label,
            progress,
            stop,
        )?;
        if end == RunEnd::Stopped {
            let missing: Vec<String> = planned[index..].iter().map(|r| r.2.clone()).collect();
            write_study_record(out, &finished, &missing)?;
        }
        let run = read_run(dataset, *split, &dir)
            .with_context(|| format!("reading {}", dir.display()))?;
        if run.budget != asked {
            progress.note(&format!(
                "note: reusing {} with its own budget ({}), not the one asked for ({asked})",
                dir.display(),
                run.budget
            ));
        }
        finished.push(dir);
        runs.push(run);
    }
    let table = format!(
        "{}\n{}",
        report::dataset_table(config, &runs),
        report::run_table(&runs)
    );
    let path = out.join("table3.md");
    std::fs::write(&path, &table).with_context(|| format!("writing {}", path.display()))?;
    write_study_record(out, &finished, &[])?;
    Ok(Table3Report {
        table,
        runs,
        files: vec![path, out.join("study.json")],
    })
}

//! Sommer et al. (ICML 2024), Tables 3 and 8: DEI-MCMC against the deep ensemble on the UCI
//! sets, one whole run per dataset and split, and a markdown table of ours beside the paper's
//! numbers, with a second table per run (time, gradients, divergences per chain, step sizes,
//! coverage and calibration). The two tables differ only in the network ([`PaperTable`]):
//! Table 3's ReLU 16-16 on six sets, Table 8's nine ReLU layers of eight units on four.
//!
//! The paper's setting (the defaults): ReLU MLP 16-16 (Table 8: 9 × 8), N(0, 1) priors on all parameters,
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
use bnn_model::WeightInit;
use bnn_sampler::WarmupPolicy;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

pub use report::{read_run, ChainStats, Table3Run};

/// One dataset's row of a paper table: DEI-MCMC's and the deep ensemble's RMSE (where the table
/// gives it) and LPPD.
#[derive(Debug, Clone, Copy)]
pub struct PaperRow {
    pub dataset: &'static str,
    pub dei_rmse: Option<f64>,
    pub dei_lppd: f64,
    pub de_rmse: Option<f64>,
    pub de_lppd: f64,
}

const fn row(dataset: &'static str, dei: (f64, f64), de: (f64, f64)) -> PaperRow {
    PaperRow {
        dataset,
        dei_rmse: Some(dei.0),
        dei_lppd: dei.1,
        de_rmse: Some(de.0),
        de_lppd: de.1,
    }
}

const fn lppd_row(dataset: &'static str, dei_lppd: f64, de_lppd: f64) -> PaperRow {
    PaperRow {
        dataset,
        dei_rmse: None,
        dei_lppd,
        de_rmse: None,
        de_lppd,
    }
}

/// A table of Sommer et al. 2024 that pits DEI-MCMC against the deep ensemble: the network its
/// runs use and the paper's numbers. The data, priors, head, members and NUTS budget are the
/// same for every such table ([`paper_model_config`]).
#[derive(Debug, Clone, Copy)]
pub struct PaperTable {
    /// "Table 3", as the paper names it.
    pub name: &'static str,
    /// The markdown file the study writes: `<file_stem>.md`.
    pub file_stem: &'static str,
    /// Hidden widths, as `--hidden` takes them.
    pub hidden: &'static str,
    /// The network in words, for the tables' footnote.
    pub network: &'static str,
    /// How the members' weights are drawn before training.
    pub weight_init: WeightInit,
    pub rows: &'static [PaperRow],
}

impl PaperTable {
    pub fn row(&self, dataset: &str) -> Option<&'static PaperRow> {
        self.rows.iter().find(|r| r.dataset == dataset)
    }

    /// The hidden widths as numbers.
    pub fn widths(&self) -> Vec<usize> {
        bnn_pipeline::parse_hidden(self.hidden).expect("a table's widths parse")
    }

    /// The table's datasets, comma separated.
    pub fn dataset_list(&self) -> String {
        self.rows
            .iter()
            .map(|r| r.dataset)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Sommer et al. 2024, Table 3: ReLU 16-16 on six UCI sets (means over the paper's splits).
pub const TABLE3: PaperTable = PaperTable {
    name: "Table 3",
    file_stem: "table3",
    hidden: "16,16",
    network: "ReLU 16-16",
    weight_init: WeightInit::FanInUniform,
    rows: &[
        row("airfoil", (0.21, 0.58), (0.24, 0.19)),
        row("bikesharing", (0.25, 0.63), (0.30, 0.42)),
        row("concrete", (0.31, 0.23), (0.32, -0.08)),
        row("energy", (0.04, 2.06), (0.04, 1.93)),
        row("protein", (0.70, -0.75), (0.77, -1.05)),
        row("yacht", (0.03, 3.08), (0.03, 2.55)),
    ],
};

/// Sommer et al. 2024, Table 8: nine hidden ReLU layers of eight units on four UCI sets; the
/// paper gives LPPD only. The members start from Glorot-uniform weights and zero biases, as the
/// reference code's do: from PyTorch's fan-in uniform default (Table 3's) every member of this
/// network stays at the mean (energy: training NLL 1.4185 → 1.4132 in 5000 steps).
pub const TABLE8: PaperTable = PaperTable {
    name: "Table 8",
    file_stem: "table8",
    hidden: "8,8,8,8,8,8,8,8,8",
    network: "ReLU 9 × 8",
    weight_init: WeightInit::GlorotUniform,
    rows: &[
        lppd_row("airfoil", 0.5272, -0.1677),
        lppd_row("bikesharing", 0.6799, 0.4145),
        lppd_row("concrete", 0.1683, -0.2794),
        lppd_row("energy", 2.1147, 0.8019),
    ],
};

/// The sets with over 10,000 rows: their own number of splits and optionally a smaller budget.
pub const LARGE: [&str; 2] = ["bikesharing", "protein"];

/// What `bnn study table3` (or `table8`) runs.
pub struct Table3Config {
    /// The paper's table: its network and numbers.
    pub table: PaperTable,
    /// Datasets, each one of the table's.
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
        Self::of(TABLE3)
    }
}

impl Table3Config {
    /// The paper's settings for `table`, on all of its datasets.
    pub fn of(table: PaperTable) -> Self {
        Self {
            table,
            datasets: table.rows.iter().map(|r| r.dataset.to_string()).collect(),
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

    /// The run config of one dataset and split: the paper's model with the table's network,
    /// split seed and chain seed `split`, this budget, then the extra flags.
    pub fn run_config(&self, dataset: &str, split: u64) -> Result<bnn_pipeline::RunConfig> {
        let budget = self.budget_for(dataset);
        let hidden = self.table.widths();
        paper_model_config(&self.extra, dataset, split, split, |c| {
            c.model.hidden = hidden;
            c.ensemble.weight_init = self.table.weight_init;
            c.sampler.warmup = budget.warmup;
            c.sampler.draws = budget.draws;
            c.sampler.warmup_policy = budget.policy;
            c.sampler.algorithm =
                crate::dei_runs::nuts_with_depth(&c.sampler.algorithm, budget.max_depth);
        })
    }

    /// Refuses bad settings, naming the flag, before anything is written.
    pub fn validate(&self) -> Result<()> {
        if let Some(unknown) = self.datasets.iter().find(|d| self.table.row(d).is_none()) {
            bail!(
                "--datasets: {unknown} is not in {} ({})",
                self.table.name,
                self.table.dataset_list()
            );
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
    /// The two tables, as written to `<table>.md` (`table3.md`, `table8.md`).
    pub table: String,
    pub runs: Vec<Table3Run>,
    pub files: Vec<PathBuf>,
}

/// Runs (or reuses) every dataset and split into `out/<dataset>-split<s>/` and writes
/// `out/<table>.md` (`table3.md`, `table8.md`) and `out/study.json`. A run directory there whose
/// network is not the table's is refused, naming `--out`, before anything runs.
pub fn run_table3(
    config: &Table3Config,
    out: &Path,
    progress: &dyn RunsProgress,
    stop: &Arc<AtomicBool>,
) -> Result<Table3Report> {
    config.validate()?;
    let planned = config.runs();
    for (dataset, split, name) in &planned {
        check_same_network(config, dataset, *split, &out.join(name))?;
    }
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
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
    let path = out.join(format!("{}.md", config.table.file_stem));
    std::fs::write(&path, &table).with_context(|| format!("writing {}", path.display()))?;
    write_study_record(out, &finished, &[])?;
    Ok(Table3Report {
        table,
        runs,
        files: vec![path, out.join("study.json")],
    })
}

/// Refuses a run directory in `--out` that holds a run of another network or members drawn
/// another way (a Table 3 run where Table 8 is asked for): reusing it would put the wrong
/// network's numbers in the table.
fn check_same_network(config: &Table3Config, dataset: &str, split: u64, dir: &Path) -> Result<()> {
    let run_dir = bnn_pipeline::RunDir::new(dir);
    if !run_dir.config().is_file() {
        return Ok(());
    }
    let found = run_dir
        .load_config()
        .with_context(|| format!("--out: reading {}", run_dir.config().display()))?;
    let asked = config.run_config(dataset, split)?;
    let network = |c: &bnn_pipeline::RunConfig| {
        format!(
            "a {} {:?} network with {} members",
            c.model.activation,
            c.model.hidden,
            c.ensemble.weight_init.name()
        )
    };
    if network(&found) != network(&asked) {
        bail!(
            "--out: {} holds a run of {}, but {} asks for {}; choose another --out (or move that run away)",
            dir.display(),
            network(&found),
            config.table.name,
            network(&asked)
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table8_runs_the_deep_relu_network_on_its_four_sets() {
        let config = Table3Config::of(TABLE8);
        assert_eq!(
            config.datasets,
            ["airfoil", "bikesharing", "concrete", "energy"]
        );
        let run = config.run_config("energy", 2).unwrap();
        assert_eq!(run.model.hidden, vec![8; 9]);
        assert_eq!(run.model.activation, "relu");
        assert_eq!(run.ensemble.weight_init, WeightInit::GlorotUniform);
        assert_eq!((run.data.split_seed, run.sampler.seed), (2, 2));
        let table3 = Table3Config::default().run_config("energy", 2).unwrap();
        assert_eq!(table3.model.hidden, vec![16, 16]);
        // Everything but the network is the same setting.
        let mut same = run.clone();
        same.model.hidden = table3.model.hidden.clone();
        same.ensemble.weight_init = table3.ensemble.weight_init;
        assert_eq!(same.to_toml().unwrap(), table3.to_toml().unwrap());
    }

    #[test]
    fn a_dataset_outside_the_table_is_refused_by_flag() {
        let config = Table3Config {
            datasets: vec!["yacht".into()],
            ..Table3Config::of(TABLE8)
        };
        let error = format!("{:#}", config.validate().unwrap_err());
        assert!(
            error.contains("--datasets: yacht is not in Table 8"),
            "{error}"
        );
    }

    #[test]
    fn a_run_of_another_network_in_out_is_refused_before_anything_runs() {
        let out = tempfile::tempdir().unwrap();
        let dir = out.path().join("energy-split0");
        let table3_run = Table3Config::default().run_config("energy", 0).unwrap();
        bnn_pipeline::RunDir::new(&dir).claim(&table3_run).unwrap();
        let table8 = Table3Config {
            datasets: vec!["energy".into()],
            splits: 1,
            ..Table3Config::of(TABLE8)
        };
        let error = format!(
            "{:#}",
            check_same_network(&table8, "energy", 0, &dir).unwrap_err()
        );
        assert!(error.starts_with("--out: "), "{error}");
        assert!(
            error.contains(
                "holds a run of a relu [16, 16] network with fan_in_uniform members, but Table 8 asks for a relu [8, 8, 8, 8, 8, 8, 8, 8, 8] network with glorot_uniform members"
            ),
            "{error}"
        );
        // The table's own network passes.
        check_same_network(&Table3Config::default(), "energy", 0, &dir).unwrap();
        // So does an empty folder.
        check_same_network(&table8, "energy", 1, &out.path().join("energy-split1")).unwrap();
    }
}

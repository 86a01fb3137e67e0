//! MILE (Sommer et al. 2025) against DEI-NUTS from the same deep-ensemble members: two whole
//! runs per dataset, split and chain seed (the members are trained identically from the same
//! seed, so both samplers start from the same networks), and a markdown table of predictive
//! quality, time and gradients.
//!
//! Both runs use Table 3's model ([`paper_model_config`]: ReLU 16-16, N(0, 1) priors,
//! heteroscedastic head, 12 members, 12 chains, full-data standardization). DEI-NUTS: Sommer et
//! al. 2024's budget, 100 warmup + 1000 draws, depth 10. MILE: MCLMC, 50,000 tuning steps
//! (phases 0.8/0.1/0.1) + 10,000 sampling steps kept every 10th, with `bnn`'s MCLMC defaults
//! (start L = 1, diagonal preconditioner; MILE's own: extra flags `--trajectory-length 20
//! --diagonal-preconditioning false`). Finished runs in the output folder are reused.
//!
//! With [`MileConfig::seeds`] K both samplers run K times per split from the same members, chain
//! seeds `split`, `100 + split`, …, `100·(K−1) + split` (one pooled LPPD moves by about ±0.1
//! between chain seeds on energy, more than the bar): the further runs live in
//! `<dataset>-split<i>/seed<k>/` and copy the first run's `ensemble/`, so no member is trained
//! twice. Time is the sampler's (tuning + sampling, from `sampling.json`), ensemble training
//! excluded.

mod report;

use crate::dei_runs::{
    check_dataset, finish_run, nuts_with_depth, paper_model_config, write_study_record,
    ExtraRunFlags, RunEnd, RunsProgress,
};
use anyhow::{bail, Context as _, Result};
use bnn_pipeline::{RunConfig, RunDir};
use bnn_sampler::{MclmcConfig, SamplerSettings, SmileConfig};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

pub use report::{read_run, MileRow, SamplerRun};

/// The two samplers, by their run directory's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MileSampler {
    /// NUTS at Sommer et al. 2024's budget: 100 warmup + 1000 draws, depth 10.
    DeiNuts,
    /// MCLMC at MILE's budget: 50,000 tuning + 10,000 sampling steps kept every 10th.
    Mile,
    /// SMILE (stochastic-gradient MCLMC, its default batch of 256 rows) at MILE's budget.
    Smile,
}

impl MileSampler {
    pub const BOTH: [MileSampler; 2] = [MileSampler::DeiNuts, MileSampler::Mile];

    pub fn name(self) -> &'static str {
        match self {
            MileSampler::DeiNuts => "dei-nuts",
            MileSampler::Mile => "mile",
            MileSampler::Smile => "smile",
        }
    }

    /// This sampler's settings over the paper's model.
    fn apply(self, config: &mut RunConfig) {
        let s = &mut config.sampler;
        match self {
            MileSampler::DeiNuts => {
                // NUTS's other settings (an `--extra --config` file's) stay.
                s.algorithm = nuts_with_depth(&s.algorithm, 10);
                s.warmup = 100;
                s.draws = 1000;
            }
            MileSampler::Mile | MileSampler::Smile => {
                let name = if self == MileSampler::Mile {
                    MclmcConfig::NAME
                } else {
                    SmileConfig::NAME
                };
                s.algorithm = s.algorithm.switched_to(name).expect("registered");
                s.warmup = 50_000;
                s.draws = 10_000;
                s.thin = 10;
                s.checkpoint_every = 1000;
            }
        }
    }
}

/// What `bnn study mile` runs.
pub struct MileConfig {
    pub datasets: Vec<String>,
    /// Splits (split seeds 0..splits).
    pub splits: u64,
    /// Chain seeds per split, from the same members.
    pub seeds: u64,
    /// `bnn run` flags for every run (by default `--learning-rate 0.01`).
    pub extra: ExtraRunFlags,
    /// Also SMILE from the same members (its members copied from the MILE run).
    pub smile: bool,
}

impl Default for MileConfig {
    fn default() -> Self {
        Self {
            datasets: ["airfoil", "concrete", "energy", "yacht"]
                .map(String::from)
                .to_vec(),
            splits: 3,
            seeds: 1,
            extra: ExtraRunFlags::default(),
            smile: false,
        }
    }
}

impl MileConfig {
    /// The samplers each (dataset, split, seed) runs, in order.
    pub fn samplers(&self) -> Vec<MileSampler> {
        let mut samplers = MileSampler::BOTH.to_vec();
        if self.smile {
            samplers.push(MileSampler::Smile);
        }
        samplers
    }

    /// The run config of one sampler on a dataset, split and chain seed index `k` (chain seed
    /// `100·k + split`).
    pub fn run_config(
        &self,
        sampler: MileSampler,
        dataset: &str,
        split: u64,
        k: u64,
    ) -> Result<RunConfig> {
        paper_model_config(&self.extra, dataset, split, 100 * k + split, |c| {
            sampler.apply(c)
        })
    }

    /// Where a run lives: `<dataset>-split<s>/<sampler>`, or `.../seed<k>/<sampler>` for k > 0.
    pub fn run_dir(out: &Path, sampler: MileSampler, dataset: &str, split: u64, k: u64) -> PathBuf {
        let split_dir = out.join(format!("{dataset}-split{split}"));
        if k == 0 {
            split_dir.join(sampler.name())
        } else {
            split_dir.join(format!("seed{k}")).join(sampler.name())
        }
    }

    /// Refuses bad settings, naming the flag, before anything is written.
    pub fn validate(&self) -> Result<()> {
        if self.datasets.is_empty() {
            bail!("--datasets: name at least one dataset");
        }
        if self.splits == 0 {
            bail!("--splits must be at least 1");
        }
        if self.seeds == 0 {
            bail!("--seeds takes a positive number");
        }
        for dataset in &self.datasets {
            for sampler in self.samplers() {
                let config = self.run_config(sampler, dataset, 0, 0).with_context(|| {
                    format!("the {} runs on {dataset} (--extra)", sampler.name())
                })?;
                check_dataset(&config)?;
            }
        }
        Ok(())
    }
}

/// What the study wrote.
pub struct MileReport {
    /// The table, as written to `mile.md`.
    pub table: String,
    pub rows: Vec<MileRow>,
    pub files: Vec<PathBuf>,
}

/// Runs (or reuses) both samplers on every dataset, split and chain seed and writes
/// `out/mile.md` and `out/study.json`.
pub fn run_mile(
    config: &MileConfig,
    out: &Path,
    progress: &dyn RunsProgress,
    stop: &Arc<AtomicBool>,
) -> Result<MileReport> {
    config.validate()?;
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let samplers = config.samplers();
    let planned: Vec<(String, u64, u64, MileSampler)> = config
        .datasets
        .iter()
        .flat_map(|d| {
            let samplers = &samplers;
            (0..config.splits).flat_map(move |s| {
                (0..config.seeds).flat_map(move |k| {
                    samplers
                        .iter()
                        .map(move |&sampler| (d.clone(), s, k, sampler))
                })
            })
        })
        .collect();
    let mut finished = Vec::new();
    let mut runs = Vec::new();
    for (index, (dataset, split, k, sampler)) in planned.iter().enumerate() {
        let dir = MileConfig::run_dir(out, *sampler, dataset, *split, *k);
        let seed = 100 * k + split;
        let label = format!(
            "{dataset} split {split} chain seed {seed}, {}",
            sampler.name()
        );
        if report::read_run(&dir).is_none() {
            // SMILE samples from the MILE run's members; a further chain seed from the first's.
            let source = match (*k, *sampler) {
                (_, MileSampler::Smile) => Some(MileSampler::Mile),
                (0, _) => None,
                _ => Some(*sampler),
            };
            if let Some(source) = source.filter(|_| !RunDir::new(&dir).has_ensemble()) {
                let source_k = if *sampler == MileSampler::Smile {
                    *k
                } else {
                    0
                };
                let first = MileConfig::run_dir(out, source, dataset, *split, source_k);
                copy_members(
                    &RunDir::new(&first).ensemble_dir(),
                    &RunDir::new(&dir).ensemble_dir(),
                )?;
            }
            progress.note(&format!(
                "== {label} (run {} of {}) into {}",
                index + 1,
                planned.len(),
                dir.display()
            ));
            let end = finish_run(
                config.run_config(*sampler, dataset, *split, *k)?,
                &dir,
                &label,
                progress,
                stop,
            )?;
            if end == RunEnd::Stopped {
                let missing: Vec<String> = planned[index..]
                    .iter()
                    .map(|(d, s, k, sampler)| {
                        MileConfig::run_dir(Path::new(""), *sampler, d, *s, *k)
                            .display()
                            .to_string()
                    })
                    .collect();
                write_study_record(out, &finished, &missing)?;
            }
        }
        runs.push(
            report::read_run(&dir)
                .with_context(|| format!("{}: no summary after a finished run", dir.display()))?,
        );
        finished.push(dir);
    }
    let mut rows = Vec::new();
    let mut pairs = runs.into_iter();
    for (dataset, split, _, _) in planned.iter().step_by(samplers.len()) {
        let (Some(nuts), Some(mile)) = (pairs.next(), pairs.next()) else {
            bail!("two runs per (dataset, split, seed)");
        };
        let smile = if config.smile { pairs.next() } else { None };
        rows.push(MileRow {
            dataset: dataset.clone(),
            split: *split,
            nuts,
            mile,
            smile,
        });
    }
    let table = report::markdown(config, &rows);
    let path = out.join("mile.md");
    std::fs::write(&path, &table).with_context(|| format!("writing {}", path.display()))?;
    write_study_record(out, &finished, &[])?;
    Ok(MileReport {
        table,
        rows,
        files: vec![path, out.join("study.json")],
    })
}

/// Copies the first run's members so that a further chain seed samples from the same networks.
fn copy_members(from: &Path, to: &Path) -> Result<()> {
    let copy = || -> std::io::Result<()> {
        std::fs::create_dir_all(to)?;
        for entry in std::fs::read_dir(from)? {
            let entry = entry?;
            std::fs::copy(entry.path(), to.join(entry.file_name()))?;
        }
        Ok(())
    };
    copy().with_context(|| {
        format!(
            "copying the members from {} to {}",
            from.display(),
            to.display()
        )
    })
}

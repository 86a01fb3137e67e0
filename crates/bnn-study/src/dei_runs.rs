//! Whole DEI-MCMC runs as the steps of a study (`bnn study table3`, `bnn study mile`): each in
//! its own run directory through `bnn-pipeline` (what `bnn run` calls), reused once finished,
//! continued from its checkpoints when it was stopped.

use crate::StudyInterrupted;
use anyhow::{bail, Context as _, Result};
use bnn_pipeline::{
    parse_hidden, prepare, DeiMcmc, KernelSettings, Preparation, Progress, ProgressEvent,
    RunConfig, RunDir, RunOutcome, Standardize,
};
use bnn_sampler::{NutsConfig, SamplerSettings};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Where a study of whole runs reports.
pub trait RunsProgress: Send + Sync {
    /// One line: a run starts, continues, or is reused.
    fn note(&self, line: &str);
    /// The receiver of each run's stages and chain iterations.
    fn run_progress(&self) -> Arc<dyn Progress>;
}

/// Reports nothing.
pub struct QuietRuns;

impl RunsProgress for QuietRuns {
    fn note(&self, _: &str) {}
    fn run_progress(&self) -> Arc<dyn Progress> {
        Arc::new(bnn_pipeline::Silent)
    }
}

/// `bnn run` flags passed to every run of a study (`--extra "..."`), as the command line parsed
/// them: the config the study's settings go on (a `--config` file's, or a recipe's such as
/// `--preset mile`, as `bnn run` applies those first) and the other flags, applied over the
/// study's settings.
pub struct ExtraRunFlags {
    pub base: RunConfig,
    pub apply: Box<dyn Fn(RunConfig) -> Result<RunConfig> + Send + Sync>,
    /// Whether `base` came from a `--config` file that records a target acceptance, which
    /// stands; otherwise NUTS runs at the paper's, not `bnn run`'s default.
    pub target_chosen: bool,
    /// The flags as given, for the tables' footnotes.
    pub words: Vec<String>,
}

impl Default for ExtraRunFlags {
    fn default() -> Self {
        Self {
            base: RunConfig::new(),
            apply: Box::new(|config: RunConfig| -> Result<RunConfig> { Ok(config) }),
            target_chosen: false,
            words: Vec::new(),
        }
    }
}

impl ExtraRunFlags {
    /// ` (extra flags `--epochs 40`)`-style text, empty without flags.
    pub fn footnote(&self, before: &str) -> String {
        if self.words.is_empty() {
            String::new()
        } else {
            format!("{before}extra flags `{}`", self.words.join(" "))
        }
    }
}

/// Sommer et al. 2024's model for Table 3, also MILE's comparison's: ReLU MLP 16-16, N(0, 1)
/// priors on all parameters, heteroscedastic Gaussian head, 12 members, 12 chains, NUTS at
/// target acceptance 0.8, data standardized with full-data statistics (as their code does);
/// split seed `split`, members' and chains' seed `seed`. `extra` goes under and over it as
/// described there.
pub fn paper_model_config(
    extra: &ExtraRunFlags,
    dataset: &str,
    split: u64,
    seed: u64,
    sampler: impl FnOnce(&mut RunConfig),
) -> Result<RunConfig> {
    let mut config = extra.base.clone();
    config.data.dataset = dataset.to_string();
    config.data.split_seed = split;
    config.data.standardize = Standardize::Full;
    config.model.hidden = parse_hidden("16,16")?;
    let paper = bnn_pipeline::SOMMER2024;
    config.model.activation = paper.activation.into();
    config.model.likelihood = "hetero".into();
    config.model.prior = "normal:1".into();
    config.ensemble.members = 12;
    config.sampler.chains = Some(12);
    config.sampler.seed = seed;
    sampler(&mut config);
    // After the study chose its sampler: NUTS switched to from another keeps the paper's target.
    if !extra.target_chosen && config.sampler.algorithm.name() == NutsConfig::NAME {
        config
            .sampler
            .algorithm
            .set("target_accept", toml::Value::Float(paper.target_accept))
            .expect("NUTS has a target acceptance");
    }
    let config = (extra.apply)(config)?;
    config.validate()?;
    let kept = config.sampler.kept_draws();
    if kept < 4 {
        bail!("a run keeps {kept} draws per chain; R-hat and ESS at its end need at least 4");
    }
    Ok(config)
}

/// Refuses, before anything is written, a dataset the runs could not load.
pub fn check_dataset(config: &RunConfig) -> Result<()> {
    prepare(&config.data.dataset, &Preparation::for_run(config))
        .map(|_| ())
        .with_context(|| format!("--datasets: {}", config.data.dataset))
}

/// How [`finish_run`] found or left a run directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunEnd {
    /// The directory held a finished run (`summary.json`); nothing ran.
    Reused,
    /// The run ran, or was continued, to its end.
    Ran,
    /// The stop flag ended sampling; every chain is checkpointed, and the same study
    /// continues it.
    Stopped,
}

/// Runs `config` into `dir` (training, sampling, prediction, evaluation, diagnostics) unless
/// `dir` holds a finished run. A run stopped after sampling began is continued from its
/// checkpoints and then predicted, evaluated and diagnosed; one stopped earlier starts again,
/// reusing the members it saved.
pub fn finish_run(
    config: RunConfig,
    dir: &Path,
    label: &str,
    progress: &dyn RunsProgress,
    stop: &Arc<AtomicBool>,
) -> Result<RunEnd> {
    let run_dir = RunDir::new(dir);
    if run_dir.summary().is_file() {
        return Ok(RunEnd::Reused);
    }
    let events = progress.run_progress();
    let forward = move |event: &ProgressEvent<'_>| events.report(event);
    if run_dir.draws(0).exists() {
        progress.note(&format!(
            "== continuing {label} from its checkpoints in {}",
            dir.display()
        ));
        let run = DeiMcmc::open(dir)?
            .with_progress(forward)
            .with_stop_flag(stop.clone());
        if !run.resume()?.finished {
            return Ok(RunEnd::Stopped);
        }
        let predictions = run.predict()?;
        run.evaluate(&predictions)?;
        run.diagnose()?;
        return Ok(RunEnd::Ran);
    }
    let run = DeiMcmc::new(config, dir)?
        .with_progress(forward)
        .with_stop_flag(stop.clone());
    match run
        .run()
        .with_context(|| format!("the run for {label} in {}", dir.display()))?
    {
        RunOutcome::Finished(_) => Ok(RunEnd::Ran),
        RunOutcome::Interrupted(_) => Ok(RunEnd::Stopped),
        RunOutcome::ShardFinished(_) => bail!("a study's runs are not sharded"),
    }
}

/// `study.json` in `out`: the runs finished and, after a stop, those missing; a stop's
/// [`StudyInterrupted`] error.
pub fn write_study_record(out: &Path, finished: &[PathBuf], missing: &[String]) -> Result<()> {
    let record = json!({
        "status": if missing.is_empty() { "finished" } else { "interrupted" },
        "finished_runs": finished,
        "missing_runs": missing,
        "continue": "run the same command again: finished runs are reused, a stopped one continues from its checkpoints",
    });
    bnn_pipeline::write_json(&out.join("study.json"), &record)?;
    if missing.is_empty() {
        return Ok(());
    }
    Err(StudyInterrupted {
        out_dir: out.to_path_buf(),
        missing: missing.to_vec(),
    }
    .into())
}

/// One number of a run's `summary.json` (NaN where absent or null).
pub fn number(value: &serde_json::Value, key: &str) -> f64 {
    value[key].as_f64().unwrap_or(f64::NAN)
}

/// A JSON file of a run directory, if it is there and parses.
pub fn read_json(path: &Path) -> Option<serde_json::Value> {
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

/// NUTS with tree depth `depth`: `settings` if they are NUTS's (an `--extra --config` file's
/// target acceptance stays), else NUTS's run defaults.
pub fn nuts_with_depth(settings: &KernelSettings, depth: usize) -> KernelSettings {
    let mut nuts = settings
        .switched_to(NutsConfig::NAME)
        .expect("NUTS is registered");
    nuts.set("max_tree_depth", toml::Value::Integer(depth as i64))
        .expect("NUTS has a tree depth");
    nuts
}

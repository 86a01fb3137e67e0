//! DEI-MCMC over any log density with a parameter layout — above all a user's own Burn module as
//! a `bnn_model::ModulePosterior` — into the same run directory as `bnn run`: a MAP ensemble,
//! one chain per member streamed to `draws_chain_<c>.csv`, checkpoints and resume, diagnostics
//! and predictive metrics. `bnn diagnose`, `bnn plot` and ArviZ read the directory.

use crate::analysis::chain_stationarity::chain_stationarity;
use crate::analysis::run_diagnostics::RunDiagnostics;
use crate::config::run_config::{Init, SamplerSection};
use crate::run::map_ensemble::{MapEnsemble, MapEnsembleConfig};
use crate::run::progress::{Progress, ProgressEvent, Silent, Stage};
use crate::run::sampling::{chain_states, run_session, Sampling};
use crate::storage::draw_reader::for_each_stored_draw;
use crate::storage::draw_store::{cmdstan_names, DrawStore};
use crate::storage::run_dir::{write_json, RunDir};
use crate::storage::run_lock::{Access, RunLock};
use crate::storage::stored_chains::{check_draw_count, count_draw_rows};
use anyhow::{anyhow, bail, Context as _, Result};
use bnn_model::{AutodiffLogDensity, Likelihood, ParameterLayout, Posterior, PredictiveMetrics};
use bnn_sampler::{ChainStart, LogDensity, SamplerSettings};
use burn::config::Config;
use burn::tensor::Tensor;
use serde_json::json;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;

/// What a [`ModuleRun`] does: how many members, how they are trained, how the chains sample.
#[derive(Config, Debug)]
pub struct ModuleRunConfig {
    /// Ensemble members, one per start given to [`ModuleRun::train_ensemble`]; chain `c`
    /// starts at member `c mod members` (`sampler.chains`, when set, may ask for more chains).
    #[config(default = 4)]
    pub members: usize,
    #[config(default = "MapEnsembleConfig::new()")]
    pub ensemble: MapEnsembleConfig,
    /// NUTS at the kernel's own target acceptance (0.8): `bnn run`'s 0.95 was chosen for the
    /// built-in MLP on the UCI sets (`crate::FLAGSHIP`), not for any module.
    #[config(
        default = "SamplerSection::new().with_algorithm(bnn_sampler::NutsConfig::new().into())"
    )]
    pub sampler: SamplerSection,
    /// Worker threads for the chains (default: every core); never changes the draws.
    #[config(default = "None")]
    pub threads: Option<usize>,
}

impl ModuleRunConfig {
    pub fn chains(&self) -> usize {
        self.sampler.chains.unwrap_or(self.members)
    }

    fn validate(&self) -> Result<()> {
        if self.members == 0 {
            bail!("members: a module run needs at least one ensemble member");
        }
        if self.sampler.init != Init::Ensemble {
            bail!("sampler.init: a module run starts every chain from its ensemble (init = ensemble); to start at the given points, train for 0 steps");
        }
        if self.sampler.draws == 0 {
            bail!("sampler.draws: a module run needs at least one draw");
        }
        Ok(())
    }
}

/// The ensemble file of a module run (`ensemble/members.json`): members as exact f64 text.
const MEMBERS_FORMAT: u32 = 1;

/// One DEI-MCMC run of a log density (a user's module) in a run directory.
///
/// ```no_run
/// # use bnn_pipeline::{ModuleRun, ModuleRunConfig};
/// # use bnn_sampler::LogDensity;
/// # fn f(density: impl LogDensity, layout: bnn_model::ParameterLayout, starts: Vec<Vec<f64>>) -> anyhow::Result<()> {
/// let run = ModuleRun::new(ModuleRunConfig::new(), density, layout, "runs/my-module")?;
/// let sampling = run.run(starts)?; // trains, samples (or resumes a stopped run), diagnoses
/// let draws = run.draws()?;        // [chain][draw][parameter]
/// # Ok(()) }
/// ```
pub struct ModuleRun<D> {
    config: ModuleRunConfig,
    density: D,
    layout: ParameterLayout,
    dir: RunDir,
    progress: Arc<dyn Progress>,
    stop: Arc<AtomicBool>,
    /// The directory's write lock, taken by the first step that writes (see [`RunLock`]).
    lock: std::sync::OnceLock<RunLock>,
}

impl<P: Posterior> ModuleRun<AutodiffLogDensity<P>> {
    /// A run of a tensor posterior (e.g. `ModulePosterior`), differentiated by Burn's autodiff.
    pub fn of_posterior(
        config: ModuleRunConfig,
        posterior: P,
        dir: impl Into<PathBuf>,
    ) -> Result<Self> {
        let layout = posterior.layout().clone();
        Self::new(config, AutodiffLogDensity::new(posterior), layout, dir)
    }
}

impl<D: LogDensity> ModuleRun<D> {
    /// `layout` names the parameters in the draws files (`ParameterLayout::flat` for a plain
    /// vector); nothing is written until a step runs.
    pub fn new(
        config: ModuleRunConfig,
        density: D,
        layout: ParameterLayout,
        dir: impl Into<PathBuf>,
    ) -> Result<Self> {
        config.validate()?;
        if layout.dim() != density.dim() {
            bail!(
                "the layout has {} parameters but the log density has dimension {}",
                layout.dim(),
                density.dim()
            );
        }
        Ok(Self {
            config,
            density,
            layout,
            dir: RunDir::new(dir),
            progress: Arc::new(Silent),
            stop: Arc::new(AtomicBool::new(false)),
            lock: std::sync::OnceLock::new(),
        })
    }

    /// Reports every stage and chain iteration to `progress`.
    pub fn with_progress(mut self, progress: impl Progress + 'static) -> Self {
        self.progress = Arc::new(progress);
        self
    }

    /// Sampling stops between draws once `stop` is set, checkpointing every chain first.
    pub fn with_stop_flag(mut self, stop: Arc<AtomicBool>) -> Self {
        self.stop = stop;
        self
    }

    pub fn config(&self) -> &ModuleRunConfig {
        &self.config
    }

    pub fn density(&self) -> &D {
        &self.density
    }

    pub fn layout(&self) -> &ParameterLayout {
        &self.layout
    }

    pub fn dir(&self) -> &RunDir {
        &self.dir
    }

    fn config_path(&self) -> PathBuf {
        self.dir.root().join("module_run.json")
    }

    fn config_value(&self) -> Result<serde_json::Value> {
        let mut value = serde_json::to_value(&self.config)?;
        value["dim"] = json!(self.layout.dim());
        Ok(value)
    }

    /// Refuses a directory of another run (a module run of other settings, or a `bnn run`);
    /// `true` when it already holds this run's settings. Writes nothing.
    fn holds_this_run(&self) -> Result<bool> {
        let root = self.dir.root().display();
        if self.dir.config().exists() {
            bail!("{root} holds a `bnn run` directory (config.toml); choose a new directory for a module run");
        }
        let path = self.config_path();
        if !path.exists() {
            return Ok(false);
        }
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        let existing: serde_json::Value = serde_json::from_str(&text)
            .with_context(|| format!("{} is not a module run's settings", path.display()))?;
        if existing != self.config_value()? {
            bail!("{root} already holds a module run with other settings (module_run.json); choose a new directory");
        }
        Ok(true)
    }

    /// Writes `module_run.json` and `layout.json` unless the directory holds the same run;
    /// refuses a directory of another run.
    pub fn claim(&self) -> Result<()> {
        if self.lock.get().is_none() {
            let _ = self
                .lock
                .set(RunLock::acquire(self.dir.root(), Access::Write)?);
        }
        if self.holds_this_run()? {
            return Ok(());
        }
        self.dir.create()?;
        self.write_layout()?;
        write_json(&self.config_path(), &self.config_value()?)
    }

    fn write_layout(&self) -> Result<()> {
        let value = json!({
            "dim": self.layout.dim(),
            "entries": serde_json::to_value(&self.layout.entries)?,
            "columns": cmdstan_names(&self.layout),
        });
        write_json(&self.dir.layout(), &value)
    }

    /// Trains one member from each start (MAP by Adam on the log density) and stores them,
    /// or returns the members the directory already holds.
    pub fn train_ensemble(&self, starts: Vec<Vec<f64>>) -> Result<MapEnsemble> {
        if starts.len() != self.config.members {
            bail!(
                "members: the config asks for {} members but {} starts were given",
                self.config.members,
                starts.len()
            );
        }
        // Nothing is written before the members are trained: a failed training (a non-finite
        // density, say) leaves no settings that would refuse the corrected call.
        if self.holds_this_run()? && self.dir.has_ensemble() {
            return self.ensemble();
        }
        let message = format!(
            "training {} members ({} Adam steps, {} parameters)",
            self.config.members,
            self.config.ensemble.steps,
            self.layout.dim()
        );
        self.progress.report(&ProgressEvent::Started {
            stage: Stage::Ensemble,
            message: &message,
        });
        let start = Instant::now();
        let ensemble = self.config.ensemble.train(&self.density, starts)?;
        let seconds = start.elapsed().as_secs_f64();
        self.claim()?;
        std::fs::create_dir_all(self.dir.ensemble_dir())
            .with_context(|| format!("creating {}", self.dir.ensemble_dir().display()))?;
        write_json(
            &self.dir.members_json(),
            &json!({
                "format": MEMBERS_FORMAT,
                "members": ensemble.members,
                "log_densities": ensemble.log_densities,
                "initial_log_densities": ensemble.initial_log_densities,
                "seconds": seconds,
            }),
        )?;
        let message = format!("trained in {seconds:.1} s");
        self.progress.report(&ProgressEvent::Finished {
            stage: Stage::Ensemble,
            message: &message,
        });
        Ok(ensemble)
    }

    /// The stored ensemble.
    pub fn ensemble(&self) -> Result<MapEnsemble> {
        let path = self.dir.members_json();
        let text = std::fs::read_to_string(&path).with_context(|| {
            format!(
                "reading {} (train the ensemble first: ModuleRun::train_ensemble)",
                path.display()
            )
        })?;
        let value: serde_json::Value = serde_json::from_str(&text)
            .with_context(|| format!("{} is corrupt", path.display()))?;
        if value["format"] != json!(MEMBERS_FORMAT) {
            bail!("{} is not a module run's ensemble", path.display());
        }
        let read = |key: &str| -> Result<serde_json::Value> { Ok(value[key].clone()) };
        let ensemble = MapEnsemble {
            members: serde_json::from_value(read("members")?)?,
            log_densities: serde_json::from_value(read("log_densities")?)?,
            initial_log_densities: serde_json::from_value(read("initial_log_densities")?)?,
        };
        let dim = self.layout.dim();
        if ensemble.members.len() != self.config.members
            || ensemble.members.iter().any(|m| m.len() != dim)
        {
            bail!(
                "{} holds members of another run (expected {} of dimension {dim})",
                path.display(),
                self.config.members
            );
        }
        Ok(ensemble)
    }

    /// Runs every chain from its member; refuses a directory that already holds draws.
    pub fn sample(&self) -> Result<Sampling> {
        // The members first: a refusal for their absence must not leave settings behind.
        self.ensemble()?;
        self.claim()?;
        self.run_chains(false)
    }

    /// Continues a stopped (or killed) run from its checkpoints, to the same bytes an
    /// uninterrupted run writes.
    pub fn resume(&self) -> Result<Sampling> {
        self.ensemble()?;
        self.claim()?;
        self.run_chains(true)
    }

    /// Everything at once: the ensemble (unless stored), sampling (continued where the
    /// directory holds this run's draws or checkpoints), then `diagnostics.json` (when each
    /// chain keeps at least 4 draws, what R-hat and ESS need).
    pub fn run(&self, starts: Vec<Vec<f64>>) -> Result<Sampling> {
        self.train_ensemble(starts)?;
        // Draws or checkpoints here are this run's (claim checked the settings): continue them,
        // also chains killed before their first checkpoint (they start again from the member).
        let sampling = self.run_chains(self.dir.has_draws())?;
        if sampling.finished && self.config.sampler.kept_draws() >= 4 {
            self.diagnose()?;
        }
        Ok(sampling)
    }

    fn run_chains(&self, resume: bool) -> Result<Sampling> {
        let section = &self.config.sampler;
        let ids: Vec<usize> = (0..self.config.chains()).collect();
        let root = self.dir.root().display();
        if !resume && (self.dir.has_checkpoints(&ids) || self.dir.has_draws()) {
            bail!("{root} already holds draws; continue it with ModuleRun::resume or choose a new directory");
        }
        let ensemble = self.ensemble()?;
        let starts: Vec<ChainStart> = ensemble.chain_starts(ids.len());
        let sampler = section.sampler_config(self.config.threads).init()?;
        let density = &self.density;
        let (mut states, resumed) =
            chain_states(&self.dir, &sampler, density, &ids, &starts, resume)?;
        let mut store = DrawStore::open(
            &self.dir,
            &self.layout,
            &ids,
            &resumed,
            section.checkpoint_every,
            section.thin,
            sampler.config().algorithm.stat_columns(),
        )?;
        let done: Vec<usize> = states.iter().map(|s| s.iteration).collect();
        let message = format!(
            "sampling {} parameters: {} chains x ({} + {} draws), {}{}",
            self.layout.dim(),
            ids.len(),
            section.warmup_text(),
            section.draws,
            section.algorithm.name(),
            if resume {
                format!(" (resuming at iterations {done:?})")
            } else {
                String::new()
            }
        );
        self.progress.report(&ProgressEvent::Started {
            stage: Stage::Sampling,
            message: &message,
        });
        store = store.with_progress(self.progress.as_ref());
        let outcome = run_session(
            &self.dir,
            &sampler,
            density,
            (&mut states, section.draws),
            &mut store,
            &self.stop,
            self.progress.as_ref(),
        )?;
        if outcome.finished {
            let (busy_warmup, busy_sampling) = store.busy_seconds();
            write_json(
                &self.dir.sampling(),
                &json!({
                    "status": "finished",
                    "chains": ids.len(),
                    "chain_seconds_warmup": busy_warmup,
                    "chain_seconds_sampling": busy_sampling,
                    "seconds_wall_last_session": outcome.seconds_wall,
                    "resumed": resume,
                    "chain_draws": crate::run::sampling::chain_draws(&outcome.chains),
                }),
            )?;
        }
        let message = if outcome.finished {
            format!("sampled in {:.1} s; draws in {root}", outcome.seconds_wall)
        } else {
            "interrupted: every chain is checkpointed".to_string()
        };
        self.progress.report(&ProgressEvent::Finished {
            stage: Stage::Sampling,
            message: &message,
        });
        Ok(outcome)
    }

    /// The kept draws, `[chain][draw][parameter]`, read back from the draws files (f32 text,
    /// as CmdStan writes them).
    pub fn draws(&self) -> Result<Vec<Vec<Vec<f64>>>> {
        (0..self.config.chains())
            .map(|c| {
                let mut chain = Vec::new();
                let path = self.dir.draws(c);
                let readable = check_draw_count(&self.dir, c, count_draw_rows(&path)?)?;
                for_each_stored_draw(&path, self.layout.dim(), readable, |_, theta| {
                    chain.push(theta.to_vec());
                    Ok(())
                })?;
                Ok(chain)
            })
            .collect()
    }

    /// R-hat, ESS, MCSE and the sampler's warnings of the stored draws, written to
    /// `diagnostics.json` (what `bnn diagnose` prints).
    pub fn diagnose(&self) -> Result<RunDiagnostics> {
        let diagnostics = RunDiagnostics::of_run_dir(self.dir.root())?;
        diagnostics.write_json(&self.dir.diagnostics())?;
        Ok(diagnostics)
    }

    /// Predictive metrics of the run on held-out rows, from the module's outputs under every
    /// kept draw (`[S, N, K]`, chains one after another as [`ModuleRun::draws`] gives them;
    /// `bnn_model::predict_with_draws` computes them with the module's own `forward`), and the
    /// function-space R-hat of the test log likelihood across chains, and each chain's warmup and
    /// stationarity verdict (`chain_stationarity`); written to `summary.json`.
    pub fn evaluate(
        &self,
        head: Likelihood,
        outputs: Tensor<3>,
        y: &[f64],
        y_cols: usize,
    ) -> Result<PredictiveMetrics> {
        let [s, n, _] = outputs.dims();
        let chains = self.config.chains();
        if s % chains != 0 || y.len() != n * y_cols.max(1) {
            bail!(
                "outputs of {s} draws on {n} rows do not fit {chains} chains and {} target values",
                y.len()
            );
        }
        let predictions = head.predictions_of_outputs(outputs);
        let per_draw_loglik: Vec<f64> = predictions
            .iter()
            .map(|draw| {
                draw.iter()
                    .enumerate()
                    .map(|(i, p)| p.log_likelihood(&y[i * y_cols..(i + 1) * y_cols]))
                    .sum()
            })
            .collect();
        let mut accumulator = bnn_model::PredictiveAccumulator::new(y, y_cols);
        for draw in &predictions {
            accumulator.add_draw(draw);
        }
        let metrics = accumulator.finish();
        let per_chain: Vec<&[f64]> = per_draw_loglik.chunks(s / chains).collect();
        let rhat_test_loglik = bnn_diagnostics::rhat(&per_chain);
        let finite = |v: f64| if v.is_finite() { json!(v) } else { json!(null) };
        let stationarity = chain_stationarity(&self.dir, chains)?;
        let not_stationary: Vec<usize> = stationarity
            .iter()
            .filter(|c| !c.is_stationary())
            .map(|c| c.chain)
            .collect();
        write_json(
            &self.dir.summary(),
            &json!({
                "lppd": finite(metrics.lppd),
                "rmse": finite(metrics.rmse),
                "nll": finite(metrics.nll),
                "accuracy": finite(metrics.accuracy),
                "test_rows": n,
                "draws": s,
                "chains": chains,
                "rhat_test_loglik": finite(rhat_test_loglik),
                "chain_stationarity": stationarity,
                "chains_not_stationary": not_stationary,
            }),
        )
        .map_err(|e| anyhow!(e))?;
        Ok(metrics)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bnn_sampler::{FnLogDensity, LogDensityError, NutsConfig};

    /// N(μ, I) in 3 dimensions with μ = (1, −2, 0.5), as a closure.
    fn shifted_normal() -> impl LogDensity {
        const MU: [f64; 3] = [1.0, -2.0, 0.5];
        FnLogDensity::new(3, |q: &[f64], grad: &mut [f64]| {
            let mut value = 0.0;
            for i in 0..3 {
                grad[i] = MU[i] - q[i];
                value -= 0.5 * (q[i] - MU[i]).powi(2);
            }
            Ok::<_, LogDensityError>(value)
        })
    }

    fn config(draws: usize) -> ModuleRunConfig {
        ModuleRunConfig::new()
            .with_members(2)
            .with_ensemble(
                MapEnsembleConfig::new()
                    .with_steps(300)
                    .with_learning_rate(0.05),
            )
            .with_sampler(
                SamplerSection::new()
                    .with_algorithm(NutsConfig::new().into())
                    .with_warmup(200)
                    .with_draws(draws)
                    .with_seed(4),
            )
            .with_threads(Some(1))
    }

    #[test]
    fn a_plain_log_density_runs_into_a_run_directory_and_other_settings_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("run");
        let run = ModuleRun::new(
            config(1000),
            shifted_normal(),
            ParameterLayout::flat(3),
            &root,
        )
        .unwrap();
        let error = run.train_ensemble(vec![vec![0.0; 3]]).unwrap_err();
        assert!(format!("{error}").contains("members"), "{error}");
        let error = run.sample().unwrap_err();
        assert!(
            format!("{error:#}").contains("train the ensemble first"),
            "{error:#}"
        );
        assert!(!root.exists(), "a refused call must write nothing");
        // A training that fails (a density that is NaN everywhere) leaves nothing either.
        let broken = FnLogDensity::new(3, |_: &[f64], _: &mut [f64]| {
            Ok::<_, LogDensityError>(f64::NAN)
        });
        let failing =
            ModuleRun::new(config(1000), broken, ParameterLayout::flat(3), &root).unwrap();
        let error = failing.run(vec![vec![0.0; 3]; 2]).unwrap_err();
        assert!(format!("{error:#}").contains("NaN"), "{error:#}");
        assert!(!root.exists(), "a failed training must write nothing");

        let sampling = run
            .run(vec![vec![5.0, 5.0, 5.0], vec![-5.0, 0.0, 3.0]])
            .unwrap();
        assert!(sampling.finished);
        for file in [
            "module_run.json",
            "layout.json",
            "ensemble/members.json",
            "sampling.json",
        ] {
            assert!(root.join(file).is_file(), "{file} missing");
        }
        assert!(root.join("diagnostics.json").is_file());
        let draws = run.draws().unwrap();
        assert_eq!(
            (draws.len(), draws[0].len(), draws[0][0].len()),
            (2, 1000, 3)
        );
        // The members are at the mode; the pooled draws have the target's moments (2000 draws,
        // ESS well above 500: 5 MCSE of the mean is 0.22 at ESS 500, of the variance 0.32).
        let pooled = draws.concat();
        let n = pooled.len() as f64;
        for (i, mu) in [1.0, -2.0, 0.5].into_iter().enumerate() {
            let mean = pooled.iter().map(|q| q[i]).sum::<f64>() / n;
            let var = pooled.iter().map(|q| (q[i] - mean).powi(2)).sum::<f64>() / n;
            assert!(
                (mean - mu).abs() < 0.22,
                "coordinate {i}: mean {mean}, want {mu}"
            );
            assert!(
                (var - 1.0).abs() < 0.32,
                "coordinate {i}: variance {var}, want 1"
            );
        }

        let before = std::fs::read(root.join("draws_chain_0.csv")).unwrap();
        let other = ModuleRun::new(
            config(500),
            shifted_normal(),
            ParameterLayout::flat(3),
            &root,
        )
        .unwrap();
        let error = other.sample().unwrap_err();
        assert!(format!("{error}").contains("other settings"), "{error}");
        assert_eq!(
            std::fs::read(root.join("draws_chain_0.csv")).unwrap(),
            before
        );
        let error = run.sample().unwrap_err();
        assert!(
            format!("{error}").contains("already holds draws"),
            "{error}"
        );
    }
}

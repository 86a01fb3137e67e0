//! The DEI-MCMC run object: one run's config, data, posterior and directory, and `run()` for all its steps.

use crate::analysis::evaluation::Evaluation;
use crate::analysis::predictions::Predictions;
use crate::analysis::run_diagnostics::RunDiagnostics;
use crate::cluster::shard::Shard;
use crate::config::run_config::{Init, RunConfig};
use crate::run::prepared_data::{prepare, prepare_dataset, Preparation, PreparedData};
use crate::run::progress::{Progress, Silent};
use crate::run::sampling::Sampling;
use crate::run::trained_ensemble::TrainedEnsemble;
use crate::storage::run_dir::{write_json, RunDir};
use crate::storage::run_lock::{Access, RunLock};
use anyhow::{anyhow, bail, Context as _, Result};
use bnn_data::Dataset;
use bnn_model::{AutodiffLogDensity, BnnConfig, MlpPosterior, ParameterLayout, Posterior};
use bnn_sampler::{AlgorithmConfig, LogDensity, MsdConfig, SamplerSettings, SmileConfig};
use burn::tensor::{DType, Device};
use serde_json::json;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

/// One DEI-MCMC run of the built-in MLP (Sommer et al. 2024): its config, its prepared data,
/// the posterior on the training rows and the run directory every stage reads and writes.
///
/// ```no_run
/// use bnn_pipeline::{DeiMcmc, EnsembleSection, RunConfig, RunOutcome, SamplerSection};
/// # fn main() -> anyhow::Result<()> {
/// let config = RunConfig::new()
///     .with_ensemble(EnsembleSection::new().with_members(4).with_epochs(2000).with_learning_rate(0.01))
///     .with_sampler(SamplerSection::new().with_warmup(100).with_draws(200));
/// let run = DeiMcmc::new(config, "runs/cos2x")?;
/// if let RunOutcome::Finished(report) = run.run()? {
///     println!("test LPPD {:.3}, deep ensemble {:?}", report.evaluation.summary.lppd, report.evaluation.summary.de_lppd);
/// }
/// # Ok(()) }
/// ```
pub struct DeiMcmc {
    pub(crate) config: RunConfig,
    pub(crate) dir: RunDir,
    pub(crate) data: PreparedData,
    pub(crate) bnn: BnnConfig,
    /// The posterior on the training data, with gradients through Burn's autodiff.
    pub(crate) density: AutodiffLogDensity<MlpPosterior>,
    pub(crate) layout: ParameterLayout,
    pub(crate) device: Device,
    pub(crate) progress: Arc<dyn Progress>,
    pub(crate) stop: Arc<AtomicBool>,
    /// The part of the chains this process runs (a cluster array task); `None`: all of them.
    pub(crate) shard: Option<Shard>,
    /// The run directory's lock, once a step has read or written it (held until this run is
    /// dropped).
    lock: Mutex<Option<RunLock>>,
}

/// How [`DeiMcmc::run`] ended.
pub enum RunOutcome {
    /// Every stage ran.
    Finished(Box<RunReport>),
    /// The stop flag ended sampling; every chain is checkpointed and [`DeiMcmc::resume`]
    /// continues it.
    Interrupted(Sampling),
    /// A shard ran its chains to the end; `bnn merge` ([`crate::merge_shards`]) joins the
    /// shards and then predicts, evaluates and diagnoses the whole run.
    ShardFinished(Sampling),
}

/// What every stage of a complete run returned.
pub struct RunReport {
    /// The ensemble trained for this run (`None` when the chains did not start from one, or the
    /// directory already held it).
    pub ensemble: Option<TrainedEnsemble>,
    pub sampling: Sampling,
    pub predictions: Predictions,
    pub evaluation: Evaluation,
    pub diagnostics: RunDiagnostics,
}

impl DeiMcmc {
    /// A run of `config` in `dir`, on the dataset its `[data]` section names (a benchmark, a
    /// generator or a CSV file).
    pub fn new(mut config: RunConfig, dir: impl Into<PathBuf>) -> Result<Self> {
        config.validate()?;
        config.data.pin_csv_file()?;
        let data = prepare(&config.data.dataset, &Preparation::for_run(&config))?;
        Self::with_prepared(config, data, RunDir::new(dir))
    }

    /// A run on rows the caller holds ([`Dataset::from_rows`]); `config.data` still decides the
    /// split and the scaling, and its `dataset` becomes the data's name. Later stages run from
    /// this object (a directory of in-memory data cannot be reopened by name).
    pub fn with_dataset(
        mut config: RunConfig,
        dataset: &Dataset,
        dir: impl Into<PathBuf>,
    ) -> Result<Self> {
        config.data.dataset = dataset.name.clone();
        config.validate()?;
        let data = prepare_dataset(dataset, &Preparation::for_run(&config))?;
        Self::with_prepared(config, data, RunDir::new(dir))
    }

    /// The run in an existing run directory, with the config saved there.
    pub fn open(dir: impl Into<PathBuf>) -> Result<Self> {
        let dir = RunDir::new(dir);
        let mut config = dir.load_config()?;
        // A CSV file recorded with its hash must still hold those bytes (older runs have none).
        if config.data.dataset_sha256.is_some() {
            config.data.pin_csv_file()?;
        }
        let data = prepare(&config.data.dataset, &Preparation::for_run(&config))?;
        Self::with_prepared(config, data, dir)
    }

    fn with_prepared(config: RunConfig, data: PreparedData, dir: RunDir) -> Result<Self> {
        let bnn = config
            .model
            .bnn_config(data.train.x_cols, data.train.y_cols)?;
        // The warm start is read before anything is written, so a bad file refuses cleanly.
        if let (Init::Single, Some(path)) = (config.sampler.init, &config.sampler.init_from) {
            bnn_model::load_parameters(&bnn, path).with_context(|| {
                format!("--init-from {} (config key `init_from`)", path.display())
            })?;
        }
        let device = config.device_name()?.device()?;
        if let Some(threads) = config.runtime.threads {
            bnn_model::fused_mlp::set_kernel_threads(threads);
        }
        let posterior = MlpPosterior::new(bnn.clone(), &data.train, &device, DType::F32)?
            .with_gradient_path(config.runtime.gradient);
        let layout = posterior.layout().clone();
        // Only MSD asks the density for its metric.
        let riemannian = match config.sampler.algorithm.name() {
            MsdConfig::NAME => Some(
                posterior
                    .riemannian_density()
                    .map_err(|e| anyhow!("MSD needs the built-in MLP's metric: {e}"))?,
            ),
            _ => None,
        };
        let density = AutodiffLogDensity::new(posterior);
        if let AlgorithmConfig::Smile(smile) = &config.sampler.algorithm.0 {
            check_smile(smile, &density, &config.model.likelihood)?;
        }
        let density = match riemannian {
            Some(riemannian) => density.with_riemannian(riemannian),
            None => density,
        };
        Ok(Self {
            config,
            dir,
            data,
            bnn,
            density,
            layout,
            device,
            progress: Arc::new(Silent),
            stop: Arc::new(AtomicBool::new(false)),
            shard: None,
            lock: Mutex::new(None),
        })
    }

    /// Reports every stage and chain iteration to `progress`.
    pub fn with_progress(mut self, progress: impl Progress + 'static) -> Self {
        self.progress = Arc::new(progress);
        self
    }

    /// Sampling stops between draws once `stop` is set (e.g. by a Ctrl-C handler), checkpointing
    /// every chain first.
    pub fn with_stop_flag(mut self, stop: Arc<AtomicBool>) -> Self {
        self.stop = stop;
        self
    }

    /// Runs only shard `shard` of the chains (`c mod n = i`), each exactly as in the whole run,
    /// and trains only the ensemble members those chains need; the directory gets a
    /// `shard.json` manifest for `bnn merge`.
    pub fn with_shard(mut self, shard: Shard) -> Self {
        self.shard = Some(shard);
        self
    }

    pub fn shard(&self) -> Option<Shard> {
        self.shard
    }

    /// The global numbers of the chains this process runs.
    pub fn chain_ids(&self) -> Vec<usize> {
        self.shard
            .unwrap_or_else(Shard::whole)
            .chains(self.config.chains())
    }

    /// The ensemble members this process trains or reads.
    pub fn member_indices(&self) -> Vec<usize> {
        match self.shard {
            Some(shard) => shard.members(self.config.ensemble.members, self.config.chains()),
            None => (0..self.config.ensemble.members).collect(),
        }
    }

    pub fn config(&self) -> &RunConfig {
        &self.config
    }

    pub fn dir(&self) -> &RunDir {
        &self.dir
    }

    /// The split, standardized data and the map back to original units.
    pub fn data(&self) -> &PreparedData {
        &self.data
    }

    /// The network and likelihood, with the data's input width.
    pub fn model(&self) -> &BnnConfig {
        &self.bnn
    }

    /// The posterior on the training data.
    pub fn posterior(&self) -> &MlpPosterior {
        self.density.posterior()
    }

    /// The flat-parameter layout: names, shapes and offsets of the network's tensors.
    pub fn layout(&self) -> &ParameterLayout {
        &self.layout
    }

    /// Writes the config to the run directory, refusing a directory that holds another run or
    /// that another process is writing.
    pub fn claim(&self) -> Result<()> {
        self.lock(Access::Write)?;
        self.dir.claim(&self.config)
    }

    /// Locks the run directory for `access` (see [`RunLock`]): once for this run, refused at once
    /// when another process writes it (or, for writing, reads it).
    pub fn lock(&self, access: Access) -> Result<()> {
        let mut held = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        if held.as_ref().is_none_or(|lock| lock.access() < access) {
            *held = Some(RunLock::acquire(self.dir.root(), access)?);
        }
        Ok(())
    }

    /// Everything at once: the ensemble (when the chains start from one and the directory lacks
    /// it), sampling, predictions, evaluation and diagnostics.
    pub fn run(&self) -> Result<RunOutcome> {
        // The run ends with R-hat/ESS, which need 4 kept draws per chain: refuse before any work.
        let kept = self.config.sampler.kept_draws();
        if kept < 4 {
            bail!(
                "a full run diagnoses the draws at the end, which needs at least 4 kept draws per chain (draws / thin, rounded up); \
                 this config keeps {kept}. Raise the draws, or only sample (`bnn sample`)"
            );
        }
        if let Some(shard) = self.shard {
            let algorithm = &self.config.sampler.algorithm.0;
            if algorithm.tunes_across_chains() {
                bail!(
                    "--shard {shard}: {} tunes its chains together from the whole ensemble, so a shard would tune from its own chains and sample another chain than the whole run; run it unsharded (batched on one GPU for many chains)",
                    algorithm.name()
                );
            }
        }
        self.claim()?;
        let ensemble = if self.config.sampler.init == Init::Ensemble && !self.dir.has_ensemble() {
            Some(self.train_ensemble()?)
        } else {
            None
        };
        // A shard may be a requeued task: it continues the chains it checkpointed and starts
        // the others afresh (also those killed before their first checkpoint).
        let sampling = if self.shard.is_some() {
            self.start_or_resume()?
        } else {
            self.sample()?
        };
        if !sampling.finished {
            return Ok(RunOutcome::Interrupted(sampling));
        }
        if self.shard.is_some() {
            return Ok(RunOutcome::ShardFinished(sampling));
        }
        let predictions = self.predict()?;
        let evaluation = self.evaluate(&predictions)?;
        let diagnostics = self.diagnose()?;
        Ok(RunOutcome::Finished(Box::new(RunReport {
            ensemble,
            sampling,
            predictions,
            evaluation,
            diagnostics,
        })))
    }

    /// Convergence diagnostics of the stored draws, written to `diagnostics.json`.
    pub fn diagnose(&self) -> Result<RunDiagnostics> {
        let diagnostics = RunDiagnostics::of_run_dir(self.dir.root())?;
        diagnostics.write_json(&self.dir.diagnostics())?;
        Ok(diagnostics)
    }

    /// The device as the start messages name it; on wgpu the adapter, with a warning where it
    /// is a software rasterizer or the GL fallback (a run there takes ~1000× as long as on the CPU).
    pub(crate) fn device_text(&self) -> String {
        let name = self
            .config
            .device_name()
            .map(|d| d.concrete())
            .unwrap_or(bnn_model::DeviceName::FASTEST_CPU);
        if name != bnn_model::DeviceName::Wgpu {
            return name.to_string();
        }
        match bnn_model::wgpu_adapter() {
            Some(adapter) if adapter.is_software() => format!(
                "wgpu adapter {} — warning: not a GPU; expect it to run orders of magnitude slower than --device cpu{}",
                adapter.describe(),
                if adapter.is_gl_fallback() { " (no Vulkan driver: OpenGL ES fallback)" } else { "" }
            ),
            Some(adapter) if adapter.is_gl_fallback() => {
                format!("wgpu adapter {} — warning: OpenGL ES fallback (no Vulkan driver); install the GPU's Vulkan driver", adapter.describe())
            }
            Some(adapter) => format!("wgpu adapter {}", adapter.describe()),
            None => "wgpu (no adapter)".to_string(),
        }
    }

    pub(crate) fn write_layout(&self) -> Result<()> {
        let value = json!({ "dim": self.layout.dim(), "entries": serde_json::to_value(&self.layout.entries)?, "columns": crate::storage::draw_store::cmdstan_names(&self.layout) });
        write_json(&self.dir.layout(), &value)
    }
}

/// SMILE's refusals before anything is written: a likelihood without per-row terms, and a batch
/// larger than the training set (each naming its flag).
fn check_smile(
    smile: &SmileConfig,
    density: &AutodiffLogDensity<MlpPosterior>,
    likelihood: &str,
) -> Result<()> {
    let Some(minibatch) = density.minibatch() else {
        bail!(
            "--sampler smile estimates the log likelihood from minibatches of rows, which --likelihood {likelihood} does not allow (its prior on log σ sits inside the likelihood term); choose another --likelihood, or a full-batch sampler such as --sampler mclmc"
        );
    };
    let rows = minibatch.num_rows();
    if smile.batch_size > rows {
        bail!(
            "--sampler-batch-size {} (config key `batch_size` in [sampler.algorithm]) exceeds the {rows} training rows; use at most {rows}, or --sampler mclmc for full-batch gradients",
            smile.batch_size
        );
    }
    Ok(())
}

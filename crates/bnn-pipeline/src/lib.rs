//! DEI-MCMC as a library (Sommer et al. 2024, "Connecting the Dots: Is Mode-Connectedness the
//! Key to Feasible Sample-Based Inference in Bayesian Neural Networks?"): train a deep ensemble,
//! start one chain per member, stream the draws to a run directory, then the posterior
//! predictive, metrics against the deep-ensemble and linear baselines, and diagnostics.
//! `bnn run` is this crate behind a command line.
//!
//! * [`DeiMcmc`]: a run of the built-in MLP on a named dataset, a CSV file or rows in memory
//!   ([`bnn_data::Dataset::from_rows`]), configured by a [`RunConfig`] (one Burn `Config` per
//!   section of `run.toml`). Its steps [`DeiMcmc::train_ensemble`], [`DeiMcmc::sample`],
//!   [`DeiMcmc::predict`], [`DeiMcmc::evaluate`] and [`DeiMcmc::diagnose`] return typed results;
//!   [`DeiMcmc::run`] calls them in a row. Progress goes to a [`Progress`] callback; a stop flag
//!   ends sampling between draws with every chain checkpointed ([`DeiMcmc::resume`]).
//! * [`MapEnsembleConfig`]: the same warm start for any log density, e.g. a user's own Burn
//!   module as a `bnn_model::ModulePosterior`; sample from its members with
//!   [`SamplerSection::sampler_config`].
//! * [`ModuleRun`]: DEI-MCMC over any log density with a layout (a user's module): the ensemble,
//!   the chains streamed to a run directory with checkpoints and resume, diagnostics and
//!   predictive metrics, as [`DeiMcmc`] does for the built-in MLP.

mod analysis;
mod cluster;
mod config;
mod run;
mod storage;

pub use analysis::chain_stationarity::{chain_stationarity, ChainStationarity};
pub use analysis::evaluation::{CalibrationPoint, Evaluation, RunSummary, TargetSummary};
pub use analysis::linear_baseline::{LinearBaseline, LinearMetrics};
pub use analysis::posterior_pass::{PointSummary, PosteriorPass, BAND_LEVELS, LEVELS};
pub use analysis::predictions::Predictions;
pub use analysis::run_diagnostics::{
    AcceptanceDrift, GroupSummary, RunDiagnostics, SamplerWarnings, CRHAT_WARN, ESS_WARN, RHAT_WARN,
};
pub use cluster::merge::{merge_shards, ShardSet};
pub use cluster::shard::{config_hash, data_hash, Shard, ShardManifest};
pub use config::config_file::SECTIONS;
pub use config::kernel_settings::{
    kernel_setting_name, samplers_with, KernelSettings, SettingsError,
    MCLMC_START_TRAJECTORY_LENGTH, SETTING_FLAGS,
};
pub use config::legacy_config::{check_mclmc_fractions, legacy_config_hash};
pub use config::model_spec::{parse_hidden, parse_layer_prior, parse_likelihood};
pub use config::run_config::{
    DataSection, EnsembleSection, Init, ModelSection, RunConfig, RuntimeSection, SamplerSection,
    SamplingIdentity, Standardize,
};
pub use config::run_defaults::{RunDefaults, BEFORE_FLAGSHIP, FLAGSHIP, SOMMER2024};
pub use config::run_size::{
    available_memory, human_bytes, parameter_count, DataShape, MemoryEstimate,
};
pub use run::dei_mcmc::{DeiMcmc, RunOutcome, RunReport};
pub use run::map_ensemble::{MapEnsemble, MapEnsembleConfig};
pub use run::module_run::{ModuleRun, ModuleRunConfig};
pub use run::prepared_data::{prepare, prepare_dataset, Preparation, PreparedData};
pub use run::progress::{ChainIteration, PrintStages, Progress, ProgressEvent, Silent, Stage};
pub use run::sampling::Sampling;
pub use run::trained_ensemble::{TrainedEnsemble, TrainingStopped};
pub use storage::draw_store::{cmdstan_names, ChainSampling, Checkpoint};
pub use storage::run_dir::{records_target_accept, write_atomic, write_json, RunDir};
pub use storage::run_journal::{JournalEntry, JournalEvent};
pub use storage::run_lock::{read_holder, Access, LockHolder, RunLock, LOCK_FILE};
pub use storage::stored_chains::{
    check_draw_count, count_draw_rows, finished_sampling, stored_checkpoint, FinishedSampling,
};

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

mod config_file;
mod dei_mcmc;
mod draw_reader;
mod draw_store;
mod early_stop;
mod evaluation;
mod linear_baseline;
mod map_ensemble;
mod merge;
mod model_spec;
mod posterior_pass;
mod predictions;
mod prepared_data;
mod progress;
mod run_config;
mod run_diagnostics;
mod run_dir;
mod sampling;
mod shard;
mod stored_chains;
mod trained_ensemble;

pub use config_file::SECTIONS;
pub use dei_mcmc::{DeiMcmc, RunOutcome, RunReport};
pub use draw_store::{cmdstan_names, ChainSampling, Checkpoint};
pub use evaluation::{CalibrationPoint, Evaluation, RunSummary, TargetSummary};
pub use linear_baseline::{LinearBaseline, LinearMetrics};
pub use map_ensemble::{MapEnsemble, MapEnsembleConfig};
pub use merge::{merge_shards, ShardSet};
pub use model_spec::{parse_hidden, parse_layer_prior, parse_likelihood};
pub use posterior_pass::{PointSummary, PosteriorPass, BAND_LEVELS, LEVELS};
pub use predictions::Predictions;
pub use prepared_data::{prepare, prepare_dataset, Preparation, PreparedData};
pub use progress::{ChainIteration, Progress, ProgressEvent, Silent, Stage};
pub use run_config::{
    Algorithm, DataSection, EnsembleSection, Init, ModelSection, RunConfig, RuntimeSection,
    SamplerSection, SamplingIdentity, Standardize,
};
pub use run_diagnostics::{
    AcceptanceDrift, GroupSummary, RunDiagnostics, SamplerWarnings, CRHAT_WARN, ESS_WARN, RHAT_WARN,
};
pub use run_dir::{write_atomic, write_json, RunDir};
pub use sampling::Sampling;
pub use shard::{config_hash, data_hash, Shard, ShardManifest};
pub use stored_chains::{check_draw_count, count_draw_rows, stored_checkpoint};
pub use trained_ensemble::{TrainedEnsemble, TrainingStopped};

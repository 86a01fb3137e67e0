//! What a run's draws are turned into: the posterior predictive, predictions, metrics
//! beside the deep-ensemble and linear baselines, and diagnostics.

pub(crate) mod chain_stationarity;
pub(crate) mod evaluation;
pub(crate) mod linear_baseline;
pub(crate) mod posterior_pass;
pub(crate) mod predictions;
pub(crate) mod run_diagnostics;

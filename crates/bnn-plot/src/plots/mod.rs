//! One module per plot: each reads its inputs, writes its SVG, or says why it was skipped.

mod calibration;
mod cumulative_lppd;
mod log_score_difference;
mod predicted_vs_observed;
mod predictive_bands;
mod trace;
mod warmup_adaptation;

pub(crate) use calibration::plot_calibration;
pub(crate) use cumulative_lppd::plot_cumulative_lppd;
pub(crate) use log_score_difference::plot_log_score_difference;
pub(crate) use predicted_vs_observed::plot_predicted_vs_observed;
pub(crate) use predictive_bands::plot_predictive_bands;
pub(crate) use trace::plot_traces;
pub(crate) use warmup_adaptation::plot_warmup_adaptation;

use std::path::PathBuf;

/// What one plot did: missing inputs are a skip with a reason, not an error.
pub(crate) enum PlotOutcome {
    Written(Vec<PathBuf>),
    Skipped(String),
}

//! What to plot and where: the knobs of [`crate::plot_run`].

use std::path::PathBuf;

/// Options of [`crate::plot_run`]; `PlotOptions::default()` plots everything into `<run>/plots`.
#[derive(Debug, Clone, Default)]
pub struct PlotOptions {
    /// Where the SVGs go; default `<run dir>/plots`.
    pub out_dir: Option<PathBuf>,
    /// Draws-file columns to trace (e.g. `layer0_weight.1.1`, or `lp__`). Empty: the first
    /// weight and first bias of each layer, found through `layout.json`.
    pub parameters: Vec<String>,
    /// Plot at most this many chains (0, 1, …); default all.
    pub max_chains: Option<usize>,
}

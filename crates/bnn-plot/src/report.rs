//! What [`crate::plot_run`] did: the files written and the plots skipped, with reasons.

use std::fmt;
use std::path::PathBuf;

/// The outcome of plotting a run directory.
#[derive(Debug, Clone, Default)]
pub struct PlotReport {
    /// Every SVG written, in plotting order.
    pub written: Vec<PathBuf>,
    /// Plots not drawn because their inputs are absent (or not plottable, like bands of k-D inputs).
    pub skipped: Vec<SkippedPlot>,
}

/// A plot left out, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedPlot {
    /// The plot's name: `trace`, `cumulative_lppd`, `calibration`, `predictive_bands`, `warmup_adaptation`.
    pub plot: &'static str,
    pub reason: String,
}

impl fmt::Display for SkippedPlot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.plot, self.reason)
    }
}

impl fmt::Display for PlotReport {
    /// One line per file written, then one per plot skipped.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for file in &self.written {
            writeln!(f, "wrote {}", file.display())?;
        }
        for skipped in &self.skipped {
            writeln!(f, "skipped {skipped}")?;
        }
        Ok(())
    }
}

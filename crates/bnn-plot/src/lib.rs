//! SVG plots of a `bnn sample` run directory.
//!
//! ```no_run
//! use bnn_plot::{plot_run, PlotOptions};
//! use std::path::Path;
//!
//! let report = plot_run(Path::new("runs/cos2x"), &PlotOptions::default())?;
//! print!("{report}"); // "wrote runs/cos2x/plots/trace_layer0_weight.1.1.svg", "skipped …"
//! # Ok::<(), bnn_plot::PlotError>(())
//! ```
//!
//! | plot | file | input |
//! |---|---|---|
//! | trace per parameter, one line per chain | `trace_<column>.svg` | `draws_chain_<c>.csv`, `layout.json` |
//! | cumulative (expanding-window) test LPPD per chain, pooled and deep-ensemble LPPD as references | `cumulative_lppd.svg` | `cumulative_lppd.csv`, `summary.json` |
//! | calibration: observed vs nominal coverage of central intervals | `calibration.svg` | `summary.json` (`coverage_<level>`) |
//! | predictive mean and 50/90/95% bands against a 1-D input, test and training points | `predictive_bands.svg` | `predictions.csv`, `train.csv` |
//! | regression: predictive mean and 90% interval against the observed value, per target | `predicted_vs_observed.svg` (one target), `predicted_vs_observed_target<k>.svg` (several) | `predictions.csv` |
//! | each test row's log score under the posterior less the deep ensemble's, the largest labelled with their row | `log_score_difference.svg` | `predictions.csv` (`log_score_std`, `ensemble_log_score_std`) |
//! | step size (log axis) and acceptance statistic over warmup per chain | `warmup_adaptation.svg` | `adaptation_chain_<c>.csv` |
//!
//! The SVGs go to `<run>/plots/` unless [`PlotOptions::out_dir`] says otherwise. Without
//! [`PlotOptions::parameters`] the traces show the first weight and first bias of every layer
//! (by `layout.json`; without it, the first column of each `name.` prefix).
//!
//! A plot whose input files are missing is skipped and listed in [`PlotReport::skipped`] with
//! the reason; a malformed input is a [`PlotError`] naming the file and, for CSV, the line.
//!
//! Text is written as SVG `<text>` and laid out by the viewer, so no fonts are needed here
//! (plotters is built without its font-kit/ttf features). `rsvg-convert -o x.png x.svg`
//! (from librsvg) renders a PNG.

mod error;
mod figure;
mod layout;
mod line_chart;
mod log_axis;
mod numeric_csv;
mod options;
mod plots;
mod report;
mod run_dir;
mod summary;
mod trace_parameters;

pub use error::PlotError;
pub use line_chart::{LegendPosition, LineChart, Series};
pub use options::PlotOptions;
pub use report::{PlotReport, SkippedPlot};

use plots::PlotOutcome;
use run_dir::RunDir;
use std::path::Path;

/// Writes every plot whose inputs exist in `dir`, and reports what was written and skipped.
pub fn plot_run(dir: &Path, options: &PlotOptions) -> Result<PlotReport, PlotError> {
    if !dir.is_dir() {
        let cause = std::io::Error::new(std::io::ErrorKind::NotFound, "not a run directory");
        return Err(PlotError::Io {
            file: dir.to_path_buf(),
            cause,
        });
    }
    let out_dir = options.out_dir.clone().unwrap_or_else(|| dir.join("plots"));
    std::fs::create_dir_all(&out_dir).map_err(|cause| PlotError::Io {
        file: out_dir.clone(),
        cause,
    })?;
    let run = RunDir::new(dir, options.max_chains);

    let outcomes = [
        (
            "trace",
            plots::plot_traces(&run, &options.parameters, &out_dir)?,
        ),
        (
            "cumulative_lppd",
            plots::plot_cumulative_lppd(&run, &out_dir)?,
        ),
        ("calibration", plots::plot_calibration(&run, &out_dir)?),
        (
            "predictive_bands",
            plots::plot_predictive_bands(&run, &out_dir)?,
        ),
        (
            "predicted_vs_observed",
            plots::plot_predicted_vs_observed(&run, &out_dir)?,
        ),
        (
            "log_score_difference",
            plots::plot_log_score_difference(&run, &out_dir)?,
        ),
        (
            "warmup_adaptation",
            plots::plot_warmup_adaptation(&run, &out_dir)?,
        ),
    ];
    let mut report = PlotReport::default();
    for (plot, outcome) in outcomes {
        match outcome {
            PlotOutcome::Written(files) => report.written.extend(files),
            PlotOutcome::Skipped(reason) => report.skipped.push(SkippedPlot { plot, reason }),
        }
    }
    Ok(report)
}

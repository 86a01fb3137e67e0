//! `bnn plot <run dir>`: SVG trace plots, cumulative LPPD per chain, calibration curve,
//! predictive bands (1-D inputs) and warmup adaptation, into `<run dir>/plots/`.

use anyhow::Result;
use bnn_plot::{plot_run, PlotOptions};
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct PlotArgs {
    /// A run directory (after `bnn run`, or `bnn sample` + `bnn evaluate` + `bnn predict`).
    pub run_dir: PathBuf,
    /// Parameters to trace (CmdStan column names such as layer0_weight.1.1 or lp__); default:
    /// the first weight and bias of every layer.
    #[arg(long = "parameter")]
    pub parameters: Vec<String>,
    /// Plot at most this many chains.
    #[arg(long)]
    pub max_chains: Option<usize>,
    /// Output directory (default: <run dir>/plots).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

pub fn run(args: PlotArgs) -> Result<()> {
    let options = PlotOptions {
        out_dir: args.out,
        parameters: args.parameters,
        max_chains: args.max_chains,
    };
    let report = plot_run(&args.run_dir, &options)?;
    print!("{report}");
    Ok(())
}

//! `bnn plot <run dir>`: SVG trace plots, cumulative LPPD per chain, calibration curve,
//! predictive bands (1-D inputs) and warmup adaptation, into `<run dir>/plots/`.

use anyhow::Result;
use bnn_pipeline::{check_draw_count, count_draw_rows, finished_sampling, Access, RunDir, RunLock};
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
    // Not beside a writer, and not from draws files that differ from what the run recorded.
    let _reading = RunLock::acquire(&args.run_dir, Access::Read)?;
    let dir = RunDir::new(&args.run_dir);
    if dir.config().is_file() {
        for chain in (0..).take_while(|&c| dir.draws(c).is_file()) {
            check_draw_count(&dir, chain, count_draw_rows(&dir.draws(chain))?)?;
        }
        if finished_sampling(&dir)?.is_none() {
            println!(
                "note: {} has not finished sampling; the plots show the draws written so far",
                args.run_dir.display()
            );
        }
    }
    let options = PlotOptions {
        out_dir: args.out,
        parameters: args.parameters,
        max_chains: args.max_chains,
    };
    let report = plot_run(&args.run_dir, &options)?;
    print!("{report}");
    Ok(())
}

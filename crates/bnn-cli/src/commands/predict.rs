//! `bnn predict <run dir>`: posterior predictive mean, sd and equal-tailed intervals per test
//! point (original units and standardized), and each point's log score beside the deep
//! ensemble's, from the stored draws.

use crate::progress_bars::ProgressBars;
use anyhow::Result;
use bnn_pipeline::DeiMcmc;
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct PredictArgs {
    /// A run directory with finished sampling.
    pub run_dir: PathBuf,
}

pub fn run(args: PredictArgs) -> Result<()> {
    DeiMcmc::open(&args.run_dir)?
        .with_progress(ProgressBars::default())
        .predict()?;
    Ok(())
}

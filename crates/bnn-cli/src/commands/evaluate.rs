//! `bnn evaluate <run dir>`: test metrics of the pooled chains, of each chain, of the deep
//! ensemble and of a linear model; coverage, calibration and function-space R-hat, into
//! `summary.json`.

use crate::pipeline::{evaluate_stage, pass, RunContext};
use crate::run_dir::RunDir;
use anyhow::Result;
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct EvaluateArgs {
    /// A run directory with finished sampling.
    pub run_dir: PathBuf,
}

pub fn run(args: EvaluateArgs) -> Result<()> {
    let dir = RunDir::new(&args.run_dir);
    let ctx = RunContext::new(dir.load_config()?, dir)?;
    let result = pass(&ctx)?;
    evaluate_stage(&ctx, &result)?;
    Ok(())
}

//! `bnn predict <run dir>`: posterior predictive mean, sd and equal-tailed intervals per test
//! point (original units and standardized), from the stored draws.

use crate::pipeline::{pass, predict_stage, RunContext};
use crate::run_dir::RunDir;
use anyhow::Result;
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct PredictArgs {
    /// A run directory with finished sampling.
    pub run_dir: PathBuf,
}

pub fn run(args: PredictArgs) -> Result<()> {
    let dir = RunDir::new(&args.run_dir);
    let ctx = RunContext::new(dir.load_config()?, dir)?;
    let result = pass(&ctx)?;
    predict_stage(&ctx, &result)
}

//! `bnn run`: the whole DEI-MCMC pipeline — train the ensemble, sample, predict, evaluate and
//! diagnose — into one run directory.

use crate::commands::diagnose;
use crate::pipeline::{evaluate_stage, pass, predict_stage, sample_stage, train_stage, RunContext};
use crate::run_config::{Init, RunConfig, RunFlags};
use crate::run_dir::RunDir;
use anyhow::{bail, Result};
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    pub flags: RunFlags,
    /// Run directory for everything the run writes.
    #[arg(long, default_value = "runs/default")]
    pub out: PathBuf,
}

pub fn run(args: RunArgs) -> Result<()> {
    let config = RunConfig::resolve(&args.flags)?;
    // The run ends with R-hat/ESS, which need 4 kept draws per chain: refuse before any work.
    let kept = config.sampler.draws.div_ceil(config.sampler.thin);
    if kept < 4 {
        bail!(
            "bnn run diagnoses the draws at the end, which needs at least 4 kept draws per chain (draws / thin, rounded up); \
             this config keeps {kept}. Raise --draws, or use `bnn sample` alone"
        );
    }
    let dir = RunDir::new(&args.out);
    let ctx = RunContext::new(config, dir.clone())?;
    dir.claim(&ctx.config)?;
    if ctx.config.sampler.init == Init::Ensemble && !dir.members_json().exists() {
        train_stage(&ctx)?;
    }
    if !sample_stage(&ctx, false)?.finished {
        bail!("sampling was interrupted; continue with `bnn sample --resume {0}`, then `bnn predict {0}` and `bnn evaluate {0}`", dir.root().display());
    }
    let result = pass(&ctx)?;
    predict_stage(&ctx, &result)?;
    evaluate_stage(&ctx, &result)?;
    diagnose::write_run_diagnostics(dir.root(), &dir.diagnostics())?;
    println!("wrote {}", dir.root().display());
    Ok(())
}

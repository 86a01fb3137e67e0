//! `bnn train`: train the deep ensemble and save its members (safetensors) into a run directory.

use crate::pipeline::{train_stage, RunContext};
use crate::run_config::{RunConfig, RunFlags};
use crate::run_dir::RunDir;
use anyhow::Result;
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct TrainArgs {
    #[command(flatten)]
    pub flags: RunFlags,
    /// Run directory (created; config.toml and ensemble/ go there).
    #[arg(long, default_value = "runs/default")]
    pub out: PathBuf,
}

pub fn run(args: TrainArgs) -> Result<()> {
    let config = RunConfig::resolve(&args.flags)?;
    let dir = RunDir::new(&args.out);
    let ctx = RunContext::new(config, dir.clone())?;
    dir.claim(&ctx.config)?;
    if dir.members_json().exists() {
        anyhow::bail!("{} already holds a trained ensemble; choose a new --out", dir.root().display());
    }
    train_stage(&ctx)?;
    Ok(())
}

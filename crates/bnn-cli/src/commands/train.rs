//! `bnn train`: train the deep ensemble and save its members (safetensors) into a run directory.

use crate::progress_bars::ProgressBars;
use crate::run_flags::RunFlags;
use anyhow::Result;
use bnn_pipeline::DeiMcmc;
use clap::Args;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

#[derive(Args, Debug)]
pub struct TrainArgs {
    #[command(flatten)]
    pub flags: RunFlags,
    /// Run directory (created; config.toml and ensemble/ go there).
    #[arg(long, default_value = "runs/default")]
    pub out: PathBuf,
}

pub fn run(args: TrainArgs, stop: Arc<AtomicBool>) -> Result<()> {
    DeiMcmc::new(args.flags.resolve()?, &args.out)?
        .with_progress(ProgressBars::default())
        .with_stop_flag(stop)
        .train_ensemble()?;
    Ok(())
}

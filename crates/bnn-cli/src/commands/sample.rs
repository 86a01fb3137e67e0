//! `bnn sample`: NUTS, HMC or random-walk Metropolis on a BNN posterior, from the run
//! directory's ensemble (trained first if missing), one pre-trained network, or cold; draws and
//! checkpoints stream to the run directory. `--resume <dir>` continues an interrupted run.

use crate::progress_bars::ProgressBars;
use crate::commands::Interrupted;
use crate::run_flags::RunFlags;
use crate::shard_flag::ShardFlag;
use anyhow::{bail, Result};
use bnn_pipeline::{DeiMcmc, RunConfig, RunDir};
use clap::Args;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

#[derive(Args, Debug)]
pub struct SampleArgs {
    #[command(flatten)]
    pub flags: RunFlags,
    #[command(flatten)]
    pub shard: ShardFlag,
    /// Run directory for config, ensemble, draws and checkpoints.
    #[arg(long, default_value = "runs/default")]
    pub out: PathBuf,
    /// Continue the interrupted run in this directory (its config.toml holds the settings;
    /// only --threads and --checkpoint-every may be given besides).
    #[arg(long, conflicts_with = "out")]
    pub resume: Option<PathBuf>,
}

/// The config of a resumed run: the stored one, with only settings that do not change the draws
/// taken from the flags; anything else that differs is refused.
fn resumed_config(dir: &RunDir, flags: &RunFlags) -> Result<RunConfig> {
    let stored = dir.load_config()?;
    let wanted = flags.apply(stored.clone())?;
    if wanted.sampling_identity() != stored.sampling_identity() {
        bail!("--resume continues {} with its own config.toml; other flags than --threads and --checkpoint-every would change the draws and are refused", dir.root().display());
    }
    Ok(wanted)
}

pub fn run(args: SampleArgs, stop: Arc<AtomicBool>) -> Result<()> {
    let (config, dir) = match &args.resume {
        Some(path) => (resumed_config(&RunDir::new(path), &args.flags)?, path),
        None => (args.flags.resolve()?, &args.out),
    };
    let mut run = DeiMcmc::new(config, dir)?.with_progress(ProgressBars::default()).with_stop_flag(stop);
    let shard = args.shard.resolve()?;
    if let Some(shard) = shard {
        run = run.with_shard(shard);
    }
    // A shard may be a requeued task: it continues the chains it checkpointed and starts the
    // others afresh.
    let resume = args.resume.is_some() || shard.is_some();
    if shard.is_some() {
        run.claim()?;
    }
    let sampling = if resume { run.resume()? } else { run.sample()? };
    if !sampling.finished {
        let again = match shard {
            Some(shard) => format!("the same command (shard {shard})"),
            None => format!("`bnn sample --resume {}`", dir.display()),
        };
        return Err(Interrupted(format!("sampling was interrupted; continue with {again}")).into());
    }
    Ok(())
}

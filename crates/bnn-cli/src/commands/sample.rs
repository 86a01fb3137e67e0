//! `bnn sample`: NUTS, HMC or random-walk Metropolis on a BNN posterior, from the run
//! directory's ensemble (trained first if missing), one pre-trained network, or cold; draws and
//! checkpoints stream to the run directory. `--resume <dir>` continues an interrupted run.

use crate::pipeline::{sample_stage, RunContext};
use crate::run_config::{RunConfig, RunFlags};
use crate::run_dir::RunDir;
use anyhow::{bail, Result};
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct SampleArgs {
    #[command(flatten)]
    pub flags: RunFlags,
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
pub fn resumed_config(dir: &RunDir, flags: &RunFlags) -> Result<RunConfig> {
    let stored = dir.load_config()?;
    let wanted = stored.clone().with_flags(flags)?;
    if wanted.sampling_identity() != stored.sampling_identity() {
        bail!("--resume continues {} with its own config.toml; other flags than --threads and --checkpoint-every would change the draws and are refused", dir.root().display());
    }
    Ok(wanted)
}

pub fn run(args: SampleArgs) -> Result<()> {
    let (dir, config, resume) = match &args.resume {
        Some(path) => {
            let dir = RunDir::new(path);
            (dir.clone(), resumed_config(&dir, &args.flags)?, true)
        }
        None => (RunDir::new(&args.out), RunConfig::resolve(&args.flags)?, false),
    };
    let ctx = RunContext::new(config, dir.clone())?;
    if !resume {
        dir.claim(&ctx.config)?;
    }
    let outcome = sample_stage(&ctx, resume)?;
    if !outcome.finished {
        bail!("sampling was interrupted");
    }
    Ok(())
}

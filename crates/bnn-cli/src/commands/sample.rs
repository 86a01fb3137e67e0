//! `bnn sample`: NUTS, HMC or random-walk Metropolis on a BNN posterior, from the run
//! directory's ensemble (trained first if missing), one pre-trained network, or cold; draws and
//! checkpoints stream to the run directory. `--resume <dir>` continues an interrupted run.

use crate::commands::Interrupted;
use crate::progress_bars::ProgressBars;
use crate::run_flags::RunFlags;
use crate::shard_flag::ShardFlag;
use anyhow::{bail, Context as _, Result};
use bnn_pipeline::{DeiMcmc, RunConfig, RunDir};
use clap::Args;
use std::path::{Path, PathBuf};
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
    /// Sample from the ensemble trained in this run directory (`bnn train --out DIR`): its
    /// data, model and ensemble settings are used, the ensemble is copied into --out, and
    /// only sampler and runtime flags may be given besides.
    #[arg(long, conflicts_with = "resume")]
    pub from: Option<PathBuf>,
}

/// Copies the trained ensemble of `from` (members, their records, the layout) into `out`, which
/// must be new, empty, or hold that same ensemble with no draws.
fn copy_ensemble(from: &Path, out: &Path) -> Result<()> {
    let (source, target) = (RunDir::new(from), RunDir::new(out));
    if target.has_ensemble() {
        if std::fs::read(source.members_json())? != std::fs::read(target.members_json())? {
            bail!(
                "{} holds another trained ensemble than {}; choose a new --out directory",
                out.display(),
                from.display()
            );
        }
        return Ok(());
    }
    // The lock file this process holds is not another run's.
    let other_file = |e: std::io::Result<std::fs::DirEntry>| {
        e.map_or(true, |e| e.file_name() != bnn_pipeline::LOCK_FILE)
    };
    if out.exists() && std::fs::read_dir(out)?.any(other_file) {
        bail!(
            "{} is not empty; --from copies the ensemble into a new --out directory",
            out.display()
        );
    }
    std::fs::create_dir_all(target.ensemble_dir())
        .with_context(|| format!("creating {}", target.ensemble_dir().display()))?;
    for entry in std::fs::read_dir(source.ensemble_dir())? {
        let entry = entry?;
        let to = target.ensemble_dir().join(entry.file_name());
        std::fs::copy(entry.path(), &to)
            .with_context(|| format!("copying {} to {}", entry.path().display(), to.display()))?;
    }
    if source.layout().is_file() {
        std::fs::copy(source.layout(), target.layout())
            .with_context(|| format!("copying {}", source.layout().display()))?;
    }
    Ok(())
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
    let (config, dir) = match (&args.resume, &args.from) {
        (Some(path), _) => (resumed_config(&RunDir::new(path), &args.flags)?, path),
        (None, Some(from)) => (args.flags.resolve_over_ensemble_in(from)?, &args.out),
        (None, None) => (args.flags.resolve_for(&args.out)?, &args.out),
    };
    let mut run = DeiMcmc::new(config, dir)?
        .with_progress(ProgressBars::default())
        .with_stop_flag(stop);
    if let Some(from) = &args.from {
        // Locked first: two commands copying into one directory would interleave their files.
        run.lock(bnn_pipeline::Access::Write)?;
        copy_ensemble(from, dir)?;
    }
    let shard = args.shard.resolve()?;
    if let Some(shard) = shard {
        run = run.with_shard(shard);
    }
    // A shard may be a requeued task: it continues the chains it checkpointed and starts the
    // others afresh.
    let sampling = match (&args.resume, shard) {
        (Some(_), _) => run.resume()?,
        (None, Some(_)) => run.start_or_resume()?,
        (None, None) => run.sample()?,
    };
    if !sampling.finished {
        let again = match shard {
            Some(shard) => format!("the same command (shard {shard})"),
            None => format!("`bnn sample --resume {}`", dir.display()),
        };
        return Err(Interrupted(format!("sampling was interrupted; continue with {again}")).into());
    }
    Ok(())
}

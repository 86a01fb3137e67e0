//! `bnn run`: the whole DEI-MCMC pipeline — train the ensemble, sample, predict, evaluate and
//! diagnose — into one run directory.

use crate::commands::{diagnose, evaluate, Interrupted};
use crate::progress_bars::ProgressBars;
use crate::run_flags::RunFlags;
use crate::shard_flag::ShardFlag;
use anyhow::Result;
use bnn_pipeline::{DeiMcmc, RunOutcome};
use clap::Args;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

#[derive(Args, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    pub flags: RunFlags,
    #[command(flatten)]
    pub shard: ShardFlag,
    /// Run directory for everything the run writes.
    #[arg(long, default_value = "runs/default")]
    pub out: PathBuf,
}

pub fn run(args: RunArgs, stop: Arc<AtomicBool>) -> Result<()> {
    let mut run = DeiMcmc::new(args.flags.resolve_for(&args.out)?, &args.out)?
        .with_progress(ProgressBars::default())
        .with_stop_flag(stop);
    if let Some(shard) = args.shard.resolve()? {
        run = run.with_shard(shard);
    }
    match run.run()? {
        RunOutcome::Interrupted(_) if run.shard().is_some() => {
            Err(Interrupted(format!("sampling was interrupted; the same command continues shard {} from its checkpoints", run.shard().map(|s| s.to_string()).unwrap_or_default())).into())
        }
        RunOutcome::Interrupted(_) => Err(Interrupted(format!(
            "sampling was interrupted; continue with `bnn sample --resume {0}`, then `bnn predict {0}` and `bnn evaluate {0}`",
            args.out.display()
        ))
        .into()),
        RunOutcome::ShardFinished(sampling) => {
            let kept: usize = sampling.chains.iter().map(|c| c.kept_draws).sum();
            println!("shard {} finished: chains {:?}, {kept} draws; join the shards with `bnn merge --out DIR <shard dirs>`", run.shard().map(|s| s.to_string()).unwrap_or_default(), run.chain_ids());
            println!("wrote {}", args.out.display());
            Ok(())
        }
        RunOutcome::Finished(report) => {
            evaluate::print_report(&report.evaluation.summary);
            diagnose::print(&report.diagnostics, 10);
            println!("wrote {}", args.out.display());
            Ok(())
        }
    }
}

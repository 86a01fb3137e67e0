//! `bnn run`: the whole DEI-MCMC pipeline — train the ensemble, sample, predict, evaluate and
//! diagnose — into one run directory.

use crate::commands::{diagnose, evaluate};
use crate::progress_bars::ProgressBars;
use crate::run_flags::RunFlags;
use anyhow::{bail, Result};
use bnn_pipeline::{DeiMcmc, RunOutcome};
use clap::Args;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

#[derive(Args, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    pub flags: RunFlags,
    /// Run directory for everything the run writes.
    #[arg(long, default_value = "runs/default")]
    pub out: PathBuf,
}

pub fn run(args: RunArgs, stop: Arc<AtomicBool>) -> Result<()> {
    let run = DeiMcmc::new(args.flags.resolve()?, &args.out)?.with_progress(ProgressBars::default()).with_stop_flag(stop);
    match run.run()? {
        RunOutcome::Interrupted(_) => {
            bail!("sampling was interrupted; continue with `bnn sample --resume {0}`, then `bnn predict {0}` and `bnn evaluate {0}`", args.out.display())
        }
        RunOutcome::Finished(report) => {
            evaluate::print_report(&report.evaluation.summary);
            diagnose::print(&report.diagnostics, 10);
            println!("wrote {}", args.out.display());
            Ok(())
        }
    }
}

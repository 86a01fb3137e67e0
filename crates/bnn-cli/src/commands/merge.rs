//! `bnn merge`: check and join the shard directories of a cluster run, then predict, evaluate and diagnose the whole run.

use crate::commands::{diagnose, evaluate};
use crate::progress_bars::ProgressBars;
use anyhow::Result;
use bnn_pipeline::ShardSet;
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct MergeArgs {
    /// The shard directories (`bnn run --shard i/n --out DIR`), every chain exactly once.
    #[arg(required = true)]
    pub shards: Vec<PathBuf>,
    /// The new run directory for the whole run (must not exist or be empty).
    #[arg(long)]
    pub out: PathBuf,
}

pub fn run(args: MergeArgs) -> Result<()> {
    let set = ShardSet::check(&args.shards)?;
    eprintln!(
        "merging {} shards: {} chains, config {}",
        set.shards.len(),
        set.chains,
        &set.shards[0].1.config_hash[..12]
    );
    let report = set.merge_into(&args.out, ProgressBars::default())?;
    evaluate::print_report(&report.evaluation.summary);
    diagnose::print(&report.diagnostics, 10);
    println!("wrote {}", args.out.display());
    Ok(())
}

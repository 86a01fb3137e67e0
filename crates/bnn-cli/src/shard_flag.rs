//! `--shard i/n` of `bnn run` and `bnn sample`, defaulting to the shard a Slurm job array or a Kubernetes indexed Job gives the process.

use anyhow::Result;
use bnn_pipeline::Shard;
use clap::Args;

#[derive(Args, Debug, Clone, Default)]
pub struct ShardFlag {
    /// Run only shard i of n of the chains (those c with c mod n = i), each exactly as in the
    /// whole run; join the shard directories with `bnn merge`. Without the flag: the Slurm array
    /// task (SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN of SLURM_ARRAY_TASK_COUNT) or the
    /// Kubernetes indexed-Job pod (JOB_COMPLETION_INDEX of BNN_SHARD_COUNT), when set.
    #[arg(long, value_name = "I/N")]
    pub shard: Option<Shard>,
    /// Run every chain even inside a Slurm array task or an indexed Job.
    #[arg(long, conflicts_with = "shard")]
    pub no_shard: bool,
}

impl ShardFlag {
    /// The shard to run: the flag, else the scheduler's, else none (the whole run).
    pub fn resolve(&self) -> Result<Option<Shard>> {
        if self.no_shard {
            return Ok(None);
        }
        match self.shard {
            Some(shard) => Ok(Some(shard)),
            None => Shard::from_env(),
        }
    }
}

//! Reproductions of the papers burn-bnn is built on, as library code: `bnn study <name>` parses
//! flags, shows progress and prints; what a study computes and writes lives here.
//!
//! - [`dinh`]: Dinh et al., "Hamiltonian Monte Carlo on ReLU Neural Networks is Inefficient"
//!   (NeurIPS 2024): fixed-step HMC acceptance over step size, trajectory length, activation and
//!   architecture (their Table 2, Figures 1–3), beside the paper's numbers.
//! - [`robot_arm`]: Zlochin & Baram's manifold stochastic dynamics against HMC on MacKay's
//!   robot arm: test error, autocorrelations, cost per iteration and per effective sample.
//! - [`lhnn`]: Dhulipala, Che & Shields' latent Hamiltonian neural networks inside NUTS: true
//!   gradients per effective sample of surrogate NUTS (exact and monitored) against NUTS on the
//!   paper's benchmark targets.
//! - [`pseudo_marginal`]: pseudo-marginal NUTS on the GLMM of the HNN report, with the report's
//!   likelihood estimator and with the model's, on simulated data (why λ drifted).
//! - [`fixed_step_chains`]: the engine under it, many fixed-step HMC chains in lockstep blocks.
//! - [`table3`]: Sommer et al. 2024's Tables 3 and 8, DEI-MCMC against the deep ensemble on
//!   the UCI sets (Table 8: a deep ReLU network), beside the paper's numbers.
//! - [`mile`]: MILE (Sommer et al. 2025's MCLMC) against DEI-NUTS from the same members.
//! - [`defaults`]: which activation, target acceptance and warmup `bnn run` should default to,
//!   measured on the UCI sets against goals (LPPD, calibration, divergences, cost).
//! - [`dei_runs`]: whole DEI-MCMC runs (what `bnn run` does) as a study's steps, reused once
//!   finished.

pub mod defaults;
pub mod dei_runs;
pub mod dinh;
pub mod fixed_step_chains;
pub mod lhnn;
mod machine;
mod mean_se;
pub mod mile;
pub mod pseudo_marginal;
pub mod robot_arm;
pub mod table3;
mod worker_pool;

pub use fixed_step_chains::{
    planned_gradients, run_fixed_step_chains, ChainAcceptance, ChainSettings, FixedStepChain,
    Network, Progress, Quiet, StartPoint,
};
pub use machine::describe_cpu;

/// A study stopped by Ctrl-C, SIGTERM or SIGUSR1: what had finished is written, with a
/// `study.json` that lists what is missing.
#[derive(Debug)]
pub struct StudyInterrupted {
    pub out_dir: std::path::PathBuf,
    /// The parts (or runs) not written.
    pub missing: Vec<String>,
}

impl std::fmt::Display for StudyInterrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the study was interrupted; finished parts are in {} and its study.json lists the missing ones: {}", self.out_dir.display(), self.missing.join(", "))
    }
}

impl std::error::Error for StudyInterrupted {}
pub use mean_se::MeanSe;

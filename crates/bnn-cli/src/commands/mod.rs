//! One module per `bnn` subcommand.

pub mod bench;
pub mod data;
pub mod diagnose;
pub mod evaluate;
pub mod merge;
pub mod model;
pub mod plot;
pub mod predict;
pub mod run;
pub mod sample;
pub mod study;
pub mod train;

/// Sampling stopped by the stop flag with every chain checkpointed: the message says how to
/// continue. `main` gives it the requeue exit code when a scheduler's signal raised the flag.
#[derive(Debug)]
pub struct Interrupted(pub String);

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Interrupted {}

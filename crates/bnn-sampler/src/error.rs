//! Errors a sampler run can report: bad configuration, bad starting points, failed sinks.

use crate::log_density::LogDensityError;

/// Why a chain could not be started at its initial position (before the chain index is known).
#[derive(Debug, Clone, thiserror::Error)]
pub enum StartError {
    /// The position does not have the density's dimension.
    #[error("the initial position has length {got}, the log density has dimension {expected}")]
    WrongDimension { expected: usize, got: usize },
    /// The log density or one of its gradient entries is not finite at the position.
    #[error(
        "the log density or its gradient is not finite at the initial position (log density = {value})"
    )]
    NonFinite { value: f64 },
    /// The log density could not be evaluated at all (recoverable or not: a chain cannot start
    /// from a point it cannot evaluate).
    #[error("the log density failed at the initial position: {0}")]
    Evaluation(#[source] LogDensityError),
}

impl StartError {
    /// Attaches the chain index, giving the error the runner reports.
    pub fn for_chain(self, chain: usize) -> SamplerError {
        match self {
            StartError::WrongDimension { expected, got } => SamplerError::WrongDimension {
                chain,
                expected,
                got,
            },
            StartError::NonFinite { value } => SamplerError::NonFiniteStart { chain, value },
            StartError::Evaluation(cause) => SamplerError::StartEvaluation { chain, cause },
        }
    }
}

/// Everything that stops a run from starting or finishing.
#[derive(Debug, thiserror::Error)]
pub enum SamplerError {
    #[error("invalid sampler configuration: {0}")]
    InvalidConfig(String),
    /// A kernel cannot run with one of the run's settings or tuned parameters: returned before
    /// the first transition that would use it.
    #[error("invalid sampler configuration: {kernel} cannot run with {setting}: {reason}")]
    UnsupportedSetting {
        /// The kernel (or its integrator) that refuses.
        kernel: &'static str,
        /// The setting it refuses, as the configuration names it.
        setting: &'static str,
        reason: String,
    },
    #[error("chain {chain}: initial position has length {got}, the log density has dimension {expected}")]
    WrongDimension {
        chain: usize,
        expected: usize,
        got: usize,
    },
    #[error(
        "chain {chain}: the log density or its gradient is not finite at the initial position (log density = {value})"
    )]
    NonFiniteStart { chain: usize, value: f64 },
    /// The cause is part of the message and also the `source()`, so that what it wraps (an I/O
    /// or device error) stays reachable; the CLI's report skips a cause the message already ends
    /// with.
    #[error("chain {chain}: the log density failed at the initial position: {cause}")]
    StartEvaluation {
        chain: usize,
        #[source]
        cause: LogDensityError,
    },
    /// The log density failed with a fatal error during sampling (a recoverable one is a
    /// divergence instead and never ends up here).
    #[error("chain {chain}: the log density failed with an unrecoverable error: {cause}")]
    Evaluation {
        chain: usize,
        #[source]
        cause: LogDensityError,
    },
    /// As `Evaluation`, in a batched transition: the failed call held several chains.
    #[error("the log density failed with an unrecoverable error in a batched transition: {cause}")]
    BatchEvaluation {
        #[source]
        cause: LogDensityError,
    },
    #[error("chain {chain}: {message}")]
    InvalidChainStart { chain: usize, message: String },
    /// The sink's own error stays the source, so its causes (an `io::Error` such as "No space
    /// left on device") reach whoever reports the error.
    #[error("the draw sink failed: {0}")]
    Sink(#[source] crate::draw_sink::SinkError),
}

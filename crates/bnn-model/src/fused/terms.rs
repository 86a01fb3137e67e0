//! Which terms of the log density the fused MLP operation returns (shared by `fused_mlp` and `ops_gradient`).

/// The log likelihood alone, or likelihood plus prior.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Terms {
    Likelihood,
    Posterior,
}

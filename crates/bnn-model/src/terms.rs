//! Which terms of the log density the fused MLP operation returns: its own module, so that the
//! operation (`fused_mlp`) and its tensor program (`ops_gradient`) both use it without
//! importing each other.

/// The log likelihood alone, or likelihood plus prior.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Terms {
    Likelihood,
    Posterior,
}

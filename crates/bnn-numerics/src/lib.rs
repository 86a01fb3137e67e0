//! The numerics both the host kernels (`bnn-kernels`) and the sampler (`bnn-sampler`) need, in
//! a leaf crate with no dependencies, so that the sampler builds without the kernels' `gemm`
//! or Burn's GPU stack: the Cholesky factorization, a position-dependent metric factored
//! (dense or diagonal plus low rank) and the SIMD dispatch of hot loops (`dispatch!`).

pub mod cholesky;
pub mod metric_factor;
pub mod simd;

pub use cholesky::{Cholesky, CholeskyError};
pub use metric_factor::{LowRankMetric, MetricFactor, RiemannianTerms};

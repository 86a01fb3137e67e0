//! Host kernels for the built-in BNN posterior: one fused pass computes the log likelihood of
//! an MLP and its gradient with respect to the flat parameter vector.
//!
//! Why a hand-written pass: on the CPU, a BNN gradient through a general tensor library is
//! dominated by scalar `tanh`/`exp` calls, per-operation allocation and autodiff graph
//! bookkeeping, not by arithmetic (profile in issue 6: 60% of the concrete gradient in libm's
//! `tanhf`). Here the activations use vectorizable polynomial approximations (relative error
//! below 1e-6 in f32), nets with layers up to 64 units wide run a feature-major pass of our own
//! (`narrow_layers`; one input and one hidden layer: `one_hidden_layer`), wider ones send their
//! matrix products to the `gemm` crate, and all buffers are reused.
//!
//! The kernels know nothing about Burn: `bnn-model` wraps them as a backend-extension operation
//! with a handwritten backward, so the gradient still flows through Burn's autodiff.

// The Cholesky, the metric factor and the SIMD dispatch live in `bnn-numerics` (the sampler
// needs them without the MLP kernels); re-exported here under their old paths.
pub use bnn_numerics::{cholesky, dispatch, metric_factor, simd};

mod activation;
mod base;
pub mod gauss_newton;
mod likelihood;
mod mlp;
mod narrow_layers;
mod one_hidden_layer;
mod prior_terms;
mod real;
mod row_dots;
mod spec;
pub mod vector_math;

pub use bnn_numerics::{Cholesky, CholeskyError, LowRankMetric, MetricFactor, RiemannianTerms};
pub use gauss_newton::{
    gauss_newton_metric, kinetic_gradient, log_det_gradient, output_jacobian, posterior_potential,
    riemannian_terms, DiagonalPrior, OutputJacobian, OutputPoint, PotentialError,
};
pub use mlp::{KernelData, MlpKernel, Workspace};
pub use real::Real;
/// The instruction set the kernels run at in this process (`avx512`, `avx2_fma`, `portable`).
pub fn instruction_set() -> &'static str {
    simd::level().name()
}

pub use spec::{KernelActivation, KernelError, KernelHead, KernelLayer, KernelSpec};

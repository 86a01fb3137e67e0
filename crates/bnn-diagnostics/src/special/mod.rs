//! Special functions the diagnostics need, implemented from their published algorithms.

mod beta_quantile;
mod incomplete_beta;
mod ln_gamma;
mod normal_quantile;

pub use beta_quantile::beta_quantile;
#[allow(unused_imports)]
pub(crate) use incomplete_beta::incomplete_beta_parts;
pub use incomplete_beta::{
    regularized_incomplete_beta, regularized_incomplete_beta_with_complement,
};
pub use ln_gamma::{ln_gamma, ln_gamma_stirling_remainder};
pub use normal_quantile::normal_quantile;

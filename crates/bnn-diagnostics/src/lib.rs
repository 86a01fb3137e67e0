//! MCMC convergence diagnostics for sampled Bayesian neural networks.
//!
//! * R-hat, ESS and MCSE in all the variants of ArviZ 0.23 / Vehtari et al. (2021),
//!   "Rank-normalization, folding, and localization: An improved R̂ for assessing convergence of
//!   MCMC", Bayesian Analysis 16(2). They agree with ArviZ to ~1e-15 on the reference fixtures
//!   (`shared/fixtures/diagnostics`, checked by `tests/arviz_fixtures.rs`).
//! * The BNN-specific diagnostics of Sommer et al. (2024): chain-wise R-hat and the
//!   expanding-window LPPD with its stopping rule ([`CumulativeLppd`], [`LppdConvergence`]).
//!   "cR-hat" in this project means Sommer et al.'s definition, [`chainwise_rhat`] (κ = 4
//!   pieces of one chain, rank-normalized, basic R̂), so that our numbers compare with the
//!   paper's; ArviZ's rank R-hat on the same pieces is [`chainwise_rank_rhat`] / [`crhat4`].
//! * [`summarize`] for a table row per parameter, and [`read_long_draws_csv`] for draws files.
//!
//! Every diagnostic takes the draws of one scalar parameter as one slice per chain
//! (`&[Vec<f64>]`, `&[&[f64]]`, …), all of the same length.

mod autocovariance;
mod chain_matrix;
mod chainwise_rhat;
mod cumulative_lppd;
mod ess;
mod fft;
mod geyer_ess;
mod long_draws_csv;
mod lppd_convergence;
mod mcse;
mod non_finite_json;
mod potential_scale_reduction;
mod quantile_type7;
mod radix_sort;
mod rank_normalize;
mod ranked_draws;
mod rhat;
mod sample_moments;
pub mod special;
mod summary;
#[cfg(test)]
mod test_draws;

pub use autocovariance::autocovariance;
pub use chainwise_rhat::{
    chainwise_rank_rhat, chainwise_rhat, chainwise_rhats, crhat4, crhat4_sommer,
    DEFAULT_CHAINWISE_PIECES,
};
pub use cumulative_lppd::{cumulative_lppd_trace, CumulativeLppd};
pub use ess::{
    ess_bulk, ess_identity, ess_identity_each, ess_mean, ess_quantile, ess_sd, ess_tail,
    TAIL_PROBABILITIES,
};
pub use long_draws_csv::{parse_long_draws_csv, read_long_draws_csv, DrawsCsvError, LongDraws};
pub use lppd_convergence::LppdConvergence;
pub use mcse::{mcse_mean, mcse_quantile, mcse_sd};
pub use non_finite_json::{non_finite_from_json, serialize_non_finite, serialize_non_finite_slice};
pub use quantile_type7::{quantile_type7, quantile_type7_sorted};
pub use rank_normalize::{average_ranks, rank_normalize};
pub use rhat::{rhat, rhat_bulk, rhat_identity, rhat_split, rhat_tail};
pub use special::{beta_quantile, normal_quantile, regularized_incomplete_beta};
pub use summary::{summarize, summarize_all, ParameterSummary};

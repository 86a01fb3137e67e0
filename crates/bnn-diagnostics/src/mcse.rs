//! Monte Carlo standard errors of the mean, the standard deviation and quantiles
//! (Vehtari et al. 2021, Section 4.4; ArviZ 0.23 `az.mcse`).
//!
//! Every function takes the draws of one scalar parameter, one slice per chain, and returns NaN
//! for fewer than 4 draws per chain or any NaN draw.

use crate::chain_matrix::ChainMatrix;
use crate::ess::{quantile_ess_of, sorted_draws};
use crate::geyer_ess::geyer_ess;
use crate::sample_moments::{compensated_sum, mean, mean_and_variance};
use crate::special::beta_quantile;

/// `Φ(−1)` and `Φ(1)` rounded to seven digits, exactly as ArviZ and posterior write them: the
/// quantile MCSE is half the width of a ±1 sd interval of the quantile's Beta distribution.
const ONE_SIGMA_PROBABILITIES: [f64; 2] = [0.158_655_3, 0.841_344_7];

/// `sd(x) / sqrt(ESS_mean)`, with the sd over all draws (ddof 1).
pub fn mcse_mean<C: AsRef<[f64]>>(chains: &[C]) -> f64 {
    let x = ChainMatrix::from_chains(chains);
    if !x.supports_ess() {
        return f64::NAN;
    }
    let (_, variance) = mean_and_variance(x.values(), 1);
    variance.sqrt() / geyer_ess(&x.split_halves()).sqrt()
}

/// MCSE of the standard deviation: with `c = (x − mean)²`, `Var[c] / ESS(c)` is the variance of
/// the variance estimate (Kenney & Keeping 1951), mapped to the sd by the delta method:
/// `sqrt((mean(c²) − mean(c)²) / ESS(c) / mean(c) / 4)`.
pub fn mcse_sd<C: AsRef<[f64]>>(chains: &[C]) -> f64 {
    let x = ChainMatrix::from_chains(chains);
    if !x.supports_ess() {
        return f64::NAN;
    }
    mcse_sd_of(&x, mean(x.values()))
}

/// MCSE of the `p`-quantile: the ESS of the indicator `x ≤ q_p` gives a Beta(ESS·p + 1,
/// ESS·(1 − p) + 1) distribution for the quantile's rank; its ±1 sd probabilities, mapped to
/// order statistics of all draws, bracket the quantile, and the MCSE is half that bracket.
/// NaN for `p` outside [0, 1].
pub fn mcse_quantile<C: AsRef<[f64]>>(chains: &[C], p: f64) -> f64 {
    let x = ChainMatrix::from_chains(chains);
    if !x.supports_ess() || !(0.0..=1.0).contains(&p) {
        return f64::NAN;
    }
    let sorted = sorted_draws(&x);
    let ess = quantile_ess_of(&x, &sorted, p);
    mcse_quantile_of(&sorted, ess, p)
}

pub(crate) fn mcse_sd_of(x: &ChainMatrix, center: f64) -> f64 {
    let squares = x.map(|v| (v - center) * (v - center));
    let ess = geyer_ess(&squares.split_halves());
    let expected_variance = mean(squares.values());
    let fourth_moment =
        compensated_sum(squares.values().iter().map(|c| c * c)) / squares.values().len() as f64;
    let variance_of_variance = (fourth_moment - expected_variance * expected_variance) / ess;
    (variance_of_variance / expected_variance / 4.0).sqrt()
}

/// The order-statistic bracket of [`mcse_quantile`] for ascending `sorted` draws.
///
/// Positions are `b·S − 1` (0-based); the lower one is floored and the upper one ceiled, each
/// clamped into the sample. A NaN ESS makes both positions NaN, and ArviZ's `nanmax`/`nanmin`
/// then pick the extremes, so the result is half the range.
pub(crate) fn mcse_quantile_of(sorted: &[f64], ess: f64, p: f64) -> f64 {
    let size = sorted.len() as f64;
    let a = ess * p + 1.0;
    let b = ess * (1.0 - p) + 1.0;
    let [low_probability, high_probability] = ONE_SIGMA_PROBABILITIES;
    let low_position = beta_quantile(low_probability, a, b) * size - 1.0;
    let high_position = beta_quantile(high_probability, a, b) * size - 1.0;
    let low_index = if low_position.is_nan() {
        0.0
    } else {
        low_position.max(0.0).floor()
    };
    let high_index = if high_position.is_nan() {
        size - 1.0
    } else {
        high_position.min(size - 1.0).ceil()
    };
    (sorted[high_index as usize] - sorted[low_index as usize]) / 2.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_draws_follow_arviz() {
        let chains = vec![vec![1.5; 10]; 3];
        assert_eq!(mcse_mean(&chains), 0.0);
        assert_eq!(mcse_quantile(&chains, 0.05), 0.0);
        assert!(mcse_sd(&chains).is_nan(), "0/0 as in ArviZ");
    }

    #[test]
    fn a_nan_ess_brackets_the_whole_sample() {
        let sorted = [1.0, 2.0, 3.0, 10.0];
        assert_eq!(mcse_quantile_of(&sorted, f64::NAN, 0.5), 4.5);
    }

    #[test]
    fn independent_draws_give_the_textbook_standard_errors() {
        // For S independent U(0, 1) draws: MCSE(q_0.5) → sqrt(p(1−p)/S) / density = 0.5/sqrt(S),
        // MCSE(mean) → sd/sqrt(S) = sqrt(1/12)/sqrt(S). The ESS estimate varies by ~5% at
        // S = 8000 and the order-statistic bracket adds ~3%, so ±20% is a > 3-sd band.
        let mut uniform = crate::test_draws::uniforms(7);
        let chains: Vec<Vec<f64>> = (0..4)
            .map(|_| (0..2000).map(|_| uniform()).collect())
            .collect();
        let root_s = 8000.0_f64.sqrt();
        let median_se = mcse_quantile(&chains, 0.5);
        assert!(
            (median_se * root_s / 0.5 - 1.0).abs() < 0.2,
            "MCSE(median) {median_se}"
        );
        let mean_se = mcse_mean(&chains);
        assert!(
            (mean_se * root_s / (1.0_f64 / 12.0).sqrt() - 1.0).abs() < 0.2,
            "MCSE(mean) {mean_se}"
        );
    }
}

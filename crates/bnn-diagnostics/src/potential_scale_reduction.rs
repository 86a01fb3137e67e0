//! The basic potential scale reduction factor R̂ of Gelman & Rubin (1992), as formulated by
//! Gelman et al. (BDA3, Section 11.4) and used inside every R-hat variant.

use crate::chain_matrix::ChainMatrix;
use crate::sample_moments::{mean, mean_and_variance, variance};

/// `R̂ = sqrt((B/W + N − 1) / N)` for `y` of shape M × N, with `W` the mean within-chain
/// variance (ddof 1) and `B = N · var(chain means)` (ddof 1).
///
/// `W = 0` gives `+∞` when the chains differ and NaN (0/0) when they are all equal, which is what
/// ArviZ reports for such degenerate parameters. The caller guarantees `M ≥ 2`, `N ≥ 2`.
pub(crate) fn potential_scale_reduction(y: &ChainMatrix) -> f64 {
    let n = y.n_draws() as f64;
    let (chain_means, chain_variances): (Vec<f64>, Vec<f64>) =
        y.chains().map(|chain| mean_and_variance(chain, 1)).unzip();
    let within = mean(&chain_variances);
    let between = n * variance(&chain_means, 1);
    ((between / within + n - 1.0) / n).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_a_hand_computation() {
        // Chain means 2.5 and 4.5 → B = 4 · 2 = 8; variances 5/3 each → W = 5/3.
        let y = ChainMatrix::from_chains(&[vec![1.0, 2.0, 3.0, 4.0], vec![3.0, 4.0, 5.0, 6.0]]);
        let expected = ((8.0 / (5.0 / 3.0) + 3.0) / 4.0_f64).sqrt();
        assert!((potential_scale_reduction(&y) - expected).abs() < 1e-15);
    }

    #[test]
    fn degenerate_chains_give_nan_or_infinity() {
        let equal = ChainMatrix::from_chains(&[vec![2.0; 4], vec![2.0; 4]]);
        assert!(potential_scale_reduction(&equal).is_nan());
        let stuck = ChainMatrix::from_chains(&[vec![2.0; 4], vec![3.0; 4]]);
        assert_eq!(potential_scale_reduction(&stuck), f64::INFINITY);
    }
}

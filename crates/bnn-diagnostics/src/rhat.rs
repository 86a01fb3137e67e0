//! R-hat, the potential scale reduction factor, in the variants of Vehtari et al. (2021) and
//! ArviZ 0.23: rank-normalized split R-hat (bulk), its folded version (tail), their maximum, and
//! the classic split and unsplit forms.
//!
//! Every function takes the draws of one scalar parameter, one slice per chain, and returns NaN
//! for fewer than 2 chains, fewer than 4 draws per chain, or any NaN draw.

use crate::chain_matrix::ChainMatrix;
use crate::potential_scale_reduction::potential_scale_reduction;
use crate::rank_normalize::BlomScoreTables;
use crate::ranked_draws::RankedDraws;

/// Rank-normalized split R-hat: `max(bulk, tail)` (`az.rhat(method="rank")`, the default).
/// Values above 1.01 indicate that the chains have not mixed (Vehtari et al. 2021).
///
/// # Panics
/// If the chains have different lengths (for every function taking chains in this crate).
pub fn rhat<C: AsRef<[f64]>>(chains: &[C]) -> f64 {
    let x = ChainMatrix::from_chains(chains);
    if !x.supports_rhat() {
        return f64::NAN;
    }
    let ranked = RankedDraws::new(&x);
    let mut tables = BlomScoreTables::default();
    let bulk = potential_scale_reduction(&ranked.split_scores(&mut tables));
    let tail = potential_scale_reduction(&ranked.folded_split_scores(&mut tables));
    larger_preferring_first(bulk, tail)
}

/// Bulk R-hat: basic R̂ of the rank-normalized split chains (`az.rhat(method="z_scale")`).
/// Detects differences in location between chains.
pub fn rhat_bulk<C: AsRef<[f64]>>(chains: &[C]) -> f64 {
    let x = ChainMatrix::from_chains(chains);
    if !x.supports_rhat() {
        return f64::NAN;
    }
    potential_scale_reduction(&RankedDraws::new(&x).split_scores(&mut BlomScoreTables::default()))
}

/// Tail R-hat: bulk R-hat of the split draws folded about their median, `|s − median(s)|`
/// (`az.rhat(method="folded")`). Detects differences in scale that bulk R-hat misses.
///
/// The median is that of the *split* draws, as in `az.rhat`; `az.summary` and R posterior fold
/// about the median of all draws. The two differ only for odd chain lengths.
pub fn rhat_tail<C: AsRef<[f64]>>(chains: &[C]) -> f64 {
    let x = ChainMatrix::from_chains(chains);
    if !x.supports_rhat() {
        return f64::NAN;
    }
    potential_scale_reduction(
        &RankedDraws::new(&x).folded_split_scores(&mut BlomScoreTables::default()),
    )
}

/// Classic split R-hat on the raw draws, without rank normalization (`az.rhat(method="split")`).
pub fn rhat_split<C: AsRef<[f64]>>(chains: &[C]) -> f64 {
    let x = ChainMatrix::from_chains(chains);
    if !x.supports_rhat() {
        return f64::NAN;
    }
    potential_scale_reduction(&x.split_halves())
}

/// The original R̂ of Gelman & Rubin (1992): no split, no rank normalization
/// (`az.rhat(method="identity")`).
pub fn rhat_identity<C: AsRef<[f64]>>(chains: &[C]) -> f64 {
    let x = ChainMatrix::from_chains(chains);
    if !x.supports_rhat() {
        return f64::NAN;
    }
    potential_scale_reduction(&x)
}

/// `first` unless `second` is strictly greater: Python's `max(first, second)`, which ArviZ
/// uses to combine bulk and tail. A NaN bulk therefore gives NaN, a NaN tail gives the bulk.
pub(crate) fn larger_preferring_first(first: f64, second: f64) -> f64 {
    if second > first {
        second
    } else {
        first
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic standard-normal-like draws (a low-discrepancy sequence through Φ⁻¹).
    fn normal_draws(n: usize, offset: f64) -> Vec<f64> {
        (0..n)
            .map(|i| {
                crate::special::normal_quantile(
                    ((i as f64 + offset) * 0.618_033_988_749_894_9).fract(),
                )
            })
            .collect()
    }

    #[test]
    fn shifted_chains_are_flagged_and_mixed_chains_are_not() {
        let mixed: Vec<Vec<f64>> = (0..4)
            .map(|j| normal_draws(500, 0.1 + j as f64 * 0.37))
            .collect();
        let r = rhat(&mixed);
        assert!(r < 1.01, "well-mixed chains gave R-hat {r}");

        let mut shifted = mixed.clone();
        shifted[3].iter_mut().for_each(|v| *v += 3.0);
        let r = rhat(&shifted);
        // One chain 3 sd away: B/W ≈ N · var(means) ≈ 500 · 1.7, so R-hat ≈ 1.5 or more.
        assert!(r > 1.3, "a chain shifted by 3 sd gave R-hat {r}");
        assert!(
            rhat_bulk(&shifted) > 1.3
                && rhat_split(&shifted) > 1.3
                && rhat_identity(&shifted) > 1.3
        );
    }

    #[test]
    fn a_chain_with_larger_spread_is_caught_by_the_tail_only() {
        let mut chains: Vec<Vec<f64>> = (0..4)
            .map(|j| normal_draws(500, 0.2 + j as f64 * 0.41))
            .collect();
        chains[1].iter_mut().for_each(|v| *v *= 3.0);
        assert!(rhat_bulk(&chains) < 1.01, "bulk {}", rhat_bulk(&chains));
        assert!(rhat_tail(&chains) > 1.05, "tail {}", rhat_tail(&chains));
        assert_eq!(rhat(&chains), rhat_tail(&chains));
    }

    #[test]
    fn invalid_shapes_give_nan() {
        assert!(rhat(&[vec![1.0, 2.0, 3.0, 4.0]]).is_nan());
        assert!(rhat(&[vec![1.0, 2.0, 3.0], vec![1.0, 2.0, 3.0]]).is_nan());
        assert!(rhat_identity(&[vec![1.0, f64::NAN, 3.0, 4.0], vec![1.0, 2.0, 3.0, 4.0]]).is_nan());
    }

    #[test]
    fn python_max_semantics() {
        assert!(larger_preferring_first(f64::NAN, 2.0).is_nan());
        assert_eq!(larger_preferring_first(1.5, f64::NAN), 1.5);
        assert_eq!(larger_preferring_first(1.5, 2.0), 2.0);
    }
}

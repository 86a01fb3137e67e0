//! Effective sample sizes in the variants of Vehtari et al. (2021) and ArviZ 0.23.
//!
//! Every function takes the draws of one scalar parameter, one slice per chain, and returns NaN
//! for fewer than 4 draws per chain or any NaN draw. One chain is enough.

use crate::autocovariance::{fft_size_for, single_chain_lags, PooledAutocovariance};
use crate::chain_matrix::ChainMatrix;
use crate::fft::Radix2Fft;
use crate::geyer_ess::{constant_shortcut, geyer_ess, geyer_ess_from_lags};
use crate::quantile_type7::quantile_type7_sorted;
use crate::rank_normalize::BlomScoreTables;
use crate::ranked_draws::RankedDraws;
use crate::sample_moments::mean;

/// The two quantiles whose indicator ESS defines the tail ESS.
pub const TAIL_PROBABILITIES: (f64, f64) = (0.05, 0.95);

/// Bulk ESS: ESS of the rank-normalized split chains (`az.ess(method="bulk")`). Measures how
/// well the centre of the distribution is explored; ≥ 100 per chain is the usual aim.
pub fn ess_bulk<C: AsRef<[f64]>>(chains: &[C]) -> f64 {
    let x = ChainMatrix::from_chains(chains);
    if !x.supports_ess() {
        return f64::NAN;
    }
    geyer_ess(&RankedDraws::new(&x).split_scores(&mut BlomScoreTables::default()))
}

/// Tail ESS: the smaller of the 5% and 95% quantile ESS (`az.ess(method="tail")`).
pub fn ess_tail<C: AsRef<[f64]>>(chains: &[C]) -> f64 {
    let x = ChainMatrix::from_chains(chains);
    if !x.supports_ess() {
        return f64::NAN;
    }
    tail_ess_of(&x, &sorted_draws(&x))
}

/// ESS of the indicator `x ≤ q_p` of the split chains, with `q_p` the type-7 quantile of all
/// draws (`az.ess(method="quantile", prob=p)`). NaN for `p` outside [0, 1].
pub fn ess_quantile<C: AsRef<[f64]>>(chains: &[C], p: f64) -> f64 {
    let x = ChainMatrix::from_chains(chains);
    if !x.supports_ess() || !(0.0..=1.0).contains(&p) {
        return f64::NAN;
    }
    quantile_ess_of(&x, &sorted_draws(&x), p)
}

/// ESS for the mean: split chains of the raw draws (`az.ess(method="mean")`).
pub fn ess_mean<C: AsRef<[f64]>>(chains: &[C]) -> f64 {
    let x = ChainMatrix::from_chains(chains);
    if !x.supports_ess() {
        return f64::NAN;
    }
    geyer_ess(&x.split_halves())
}

/// ESS for the standard deviation: split chains of `(x − mean)²`, with the mean over all draws
/// (`az.ess(method="sd")`).
pub fn ess_sd<C: AsRef<[f64]>>(chains: &[C]) -> f64 {
    let x = ChainMatrix::from_chains(chains);
    if !x.supports_ess() {
        return f64::NAN;
    }
    let center = mean(x.values());
    geyer_ess(&x.split_halves_with(|v| (v - center) * (v - center)))
}

/// ESS of the raw chains without splitting (`az.ess(method="identity")`).
pub fn ess_identity<C: AsRef<[f64]>>(chains: &[C]) -> f64 {
    let x = ChainMatrix::from_chains(chains);
    if !x.supports_ess() {
        return f64::NAN;
    }
    geyer_ess(&x)
}

/// [`ess_identity`] of each series as a chain of its own, for many series of one length (the
/// coordinates of one chain, say): the values equal `ess_identity(&[series])` to rounding, at
/// about half the cost when the series mix slowly. Lags are taken directly while Geyer's
/// sequence is short; the series that need every lag go through one shared FFT plan in pairs
/// (`single_chain_lags`), instead of two transforms each.
pub fn ess_identity_each<C: AsRef<[f64]>>(series: &[C]) -> Vec<f64> {
    let mut ess = vec![f64::NAN; series.len()];
    // (index, centered draws) of the series whose sequence outran the direct lags.
    let mut slow: Vec<(usize, Vec<f64>)> = Vec::new();
    for (i, one) in series.iter().enumerate() {
        let x = ChainMatrix::from_chains(&[one]);
        if !x.supports_ess() {
            continue;
        }
        if let Some(total_draws) = constant_shortcut(&x) {
            ess[i] = total_draws;
            continue;
        }
        let mut autocovariance = PooledAutocovariance::new(&x);
        match geyer_ess_from_lags(1, x.n_draws(), 0.0, |lag| autocovariance.at_direct(lag)) {
            Some(value) => ess[i] = value,
            None => slow.push((i, autocovariance.centered().to_vec())),
        }
    }
    let Some((_, first)) = slow.first() else {
        return ess;
    };
    let n = first.len();
    let fft = Radix2Fft::new(fft_size_for(n));
    let mut buffer = Vec::new();
    for pair in slow.chunks(2) {
        let (lags_a, lags_b) = single_chain_lags(
            &pair[0].1,
            pair.get(1).map(|(_, b)| b.as_slice()),
            &fft,
            &mut buffer,
        );
        for ((index, _), lags) in pair
            .iter()
            .zip([Some(lags_a), lags_b].into_iter().flatten())
        {
            ess[*index] =
                geyer_ess_from_lags(1, n, 0.0, |lag| lags.get(lag).copied()).unwrap_or(f64::NAN);
        }
    }
    ess
}

/// All draws in ascending order (for quantile thresholds and MCSE order statistics).
pub(crate) fn sorted_draws(x: &ChainMatrix) -> Vec<f64> {
    let mut sorted = x.values().to_vec();
    sorted.sort_unstable_by(f64::total_cmp);
    sorted
}

pub(crate) fn quantile_ess_of(x: &ChainMatrix, sorted: &[f64], p: f64) -> f64 {
    let threshold = quantile_type7_sorted(sorted, p);
    // `<=`, not `<`: with ties at the threshold the two differ, and ArviZ uses `<=`.
    geyer_ess(&x.split_halves_with(|v| if v <= threshold { 1.0 } else { 0.0 }))
}

pub(crate) fn tail_ess_of(x: &ChainMatrix, sorted: &[f64]) -> f64 {
    let (low, high) = TAIL_PROBABILITIES;
    let lower_tail = quantile_ess_of(x, sorted, low);
    let upper_tail = quantile_ess_of(x, sorted, high);
    // Python's `min(lower, upper)`, as in ArviZ: the first unless the second is strictly smaller.
    if upper_tail < lower_tail {
        upper_tail
    } else {
        lower_tail
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_draws::ar1_chain;

    #[test]
    fn ar1_ess_matches_the_theoretical_value() {
        // For AR(1), τ = (1 + φ)/(1 − φ), so ESS ≈ S (1 − φ)/(1 + φ). With S = 4 × 5000 draws
        // the relative standard error of the ESS estimate is about sqrt(2τ/S·…) ≈ 5% for
        // φ = 0.9 (Geyer 1992); 20% is four standard errors.
        for phi in [0.5, 0.9] {
            let chains: Vec<Vec<f64>> = (0..4).map(|j| ar1_chain(phi, 5000, 17 + j)).collect();
            let expected = 20_000.0 * (1.0 - phi) / (1.0 + phi);
            for (name, ess) in [
                ("mean", ess_mean(&chains)),
                ("bulk", ess_bulk(&chains)),
                ("identity", ess_identity(&chains)),
            ] {
                assert!(
                    (ess / expected - 1.0).abs() < 0.2,
                    "φ = {phi}: ess_{name} = {ess:.0}, theory {expected:.0}"
                );
            }
        }
    }

    #[test]
    fn independent_draws_have_ess_near_the_draw_count() {
        let chains: Vec<Vec<f64>> = (0..4).map(|j| ar1_chain(0.0, 1000, 99 + j)).collect();
        for ess in [
            ess_bulk(&chains),
            ess_tail(&chains),
            ess_mean(&chains),
            ess_sd(&chains),
        ] {
            // iid: ESS/S has sd ≈ 0.05–0.1 here; [0.7, 1.3] is a ≥ 3-sd band.
            assert!((2800.0..5200.0).contains(&ess), "iid ESS {ess}");
        }
    }

    #[test]
    fn each_series_gets_its_own_identity_ess() {
        // Fast and slow mixers (direct lags and the paired FFT, an odd number of slow ones), a
        // constant series and one with a NaN.
        let mut series: Vec<Vec<f64>> = [0.0, 0.3, 0.95, 0.99, 0.9, -0.4, 0.97]
            .iter()
            .enumerate()
            .map(|(k, &phi)| ar1_chain(phi, 3000, 40 + k as u64))
            .collect();
        series.push(vec![2.5; 3000]);
        let mut with_nan = ar1_chain(0.5, 3000, 7);
        with_nan[100] = f64::NAN;
        series.push(with_nan);
        let each = ess_identity_each(&series);
        assert_eq!(each.len(), series.len());
        for (k, (one, got)) in series.iter().zip(&each).enumerate() {
            let expected = ess_identity(&[one]);
            if expected.is_nan() {
                assert!(got.is_nan(), "series {k}: {got} for NaN");
            } else {
                assert!(
                    (got / expected - 1.0).abs() < 1e-9,
                    "series {k}: {got} vs {expected}"
                );
            }
        }
        assert!(each[3] < 100.0, "φ = 0.99 must mix slowly: {}", each[3]);
        assert!(ess_identity_each::<Vec<f64>>(&[]).is_empty());
    }

    #[test]
    fn invalid_input_gives_nan() {
        assert!(ess_bulk(&[vec![1.0, 2.0, 3.0]]).is_nan());
        assert!(ess_mean(&[vec![1.0, 2.0, f64::NAN, 4.0]]).is_nan());
        assert!(ess_quantile(&[vec![1.0, 2.0, 3.0, 4.0]], 1.5).is_nan());
    }
}

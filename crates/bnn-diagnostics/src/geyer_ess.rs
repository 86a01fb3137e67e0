//! Effective sample size of a chains × draws matrix by Geyer's (1992) initial monotone
//! sequence estimator, in the multi-chain form of Vehtari et al. (2021, Section 3.2) as Stan and
//! ArviZ compute it.

use crate::autocovariance::PooledAutocovariance;
use crate::chain_matrix::ChainMatrix;
use crate::sample_moments::variance;

/// Inputs whose range is below this are treated as constant and get `ESS = M·N`: ArviZ's
/// `np.finfo(float).resolution`, an *absolute* threshold. (R posterior returns NA instead.)
const CONSTANT_RANGE: f64 = 1e-15;

/// ESS of `y` (shape M × N), with autocorrelations
/// `ρ̂_t = 1 − (W − mean_j γ_j(t)) / var⁺`, `W = mean_j γ_j(0) · N/(N−1)` and
/// `var⁺ = W (N−1)/N + var_j(ȳ_j)`, truncated where the sum of an even–odd lag pair first turns
/// negative, made monotone, and `ESS = M·N / τ̂` with `τ̂ = −1 + 2 Σ_{t ≤ T} ρ̂_t + ρ̂_{T+1}`.
///
/// Two details follow ArviZ 0.23 to the digit:
/// * the pair loop runs over `t = 1, 3, 5, …` while `t < N − 3` (posterior's bound differs by
///   one pair for odd N when the sequence never turns negative);
/// * `τ̂` is capped below at `1 / log10(M·N)`, so the ESS never exceeds `M·N·log10(M·N)`.
///
/// The caller guarantees `N ≥ 2`, `M ≥ 1` and no NaN.
pub(crate) fn geyer_ess(y: &ChainMatrix) -> f64 {
    if let Some(total_draws) = constant_shortcut(y) {
        return total_draws;
    }
    let mut autocovariance = PooledAutocovariance::new(y);
    let between_chain_variance = if y.n_chains() > 1 {
        variance(autocovariance.chain_means(), 1)
    } else {
        0.0
    };
    let lags = |lag: usize| Some(autocovariance.at(lag));
    geyer_ess_from_lags(y.n_chains(), y.n_draws(), between_chain_variance, lags).unwrap_or(f64::NAN)
}

/// `M·N` when every value of `y` lies within [`CONSTANT_RANGE`] (ArviZ's shortcut).
pub(crate) fn constant_shortcut(y: &ChainMatrix) -> Option<f64> {
    let (low, high) = y
        .values()
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &v| {
            (lo.min(v), hi.max(v))
        });
    (high - low < CONSTANT_RANGE).then_some((y.n_chains() * y.n_draws()) as f64)
}

/// The estimator of [`geyer_ess`] from the pooled autocovariance `lag ↦ mean_j γ_j(lag)` and
/// the variance of the chain means; `None` as soon as `autocovariance` has no value for a lag
/// it is asked for (the caller then supplies every lag and asks again).
pub(crate) fn geyer_ess_from_lags(
    m: usize,
    n: usize,
    between_chain_variance: f64,
    mut autocovariance: impl FnMut(usize) -> Option<f64>,
) -> Option<f64> {
    let total_draws = (m * n) as f64;
    let n_f = n as f64;
    let mean_within_variance = autocovariance(0)? * n_f / (n_f - 1.0);
    let pooled_variance = mean_within_variance * (n_f - 1.0) / n_f + between_chain_variance;
    let mut autocorrelation = |lag: usize| {
        autocovariance(lag).map(|at| 1.0 - (mean_within_variance - at) / pooled_variance)
    };
    let mut rho = vec![0.0; n];
    rho[0] = 1.0;
    let mut even = 1.0;
    let mut odd = autocorrelation(1)?;
    rho[1] = odd;

    // Initial positive sequence: keep lag pairs while their sum stays positive.
    let last_index = n as isize;
    let mut t: isize = 1;
    while t < last_index - 3 && even + odd > 0.0 {
        even = autocorrelation((t + 1) as usize)?;
        odd = autocorrelation((t + 2) as usize)?;
        if even + odd >= 0.0 {
            rho[(t + 1) as usize] = even;
            rho[(t + 2) as usize] = odd;
        }
        t += 2;
    }
    let max_t = t - 2;
    if even > 0.0 {
        rho[(max_t + 1) as usize] = even;
    }

    // Initial monotone sequence: no pair may exceed the pair before it.
    let mut t: isize = 1;
    while t <= max_t - 2 {
        let i = t as usize;
        if rho[i + 1] + rho[i + 2] > rho[i - 1] + rho[i] {
            let average = (rho[i - 1] + rho[i]) / 2.0;
            rho[i + 1] = average;
            rho[i + 2] = average;
        }
        t += 2;
    }

    if rho.iter().any(|r| r.is_nan()) {
        return Some(f64::NAN);
    }
    let kept = (max_t + 1) as usize;
    let tau = -1.0 + 2.0 * rho[..kept].iter().sum::<f64>() + rho[kept];
    let tau = tau.max(1.0 / total_draws.log10());
    Some(total_draws / tau)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_input_takes_the_shortcut() {
        let y = ChainMatrix::from_values(vec![1.5; 40], 4, 10);
        assert_eq!(geyer_ess(&y), 40.0);
    }

    #[test]
    fn anticorrelated_draws_hit_the_log10_cap() {
        // Alternating ±1 within each chain: ρ̂_1 ≈ −1, so τ̂ would be ~0 without the cap.
        let chain: Vec<f64> = (0..100)
            .map(|i| if i % 2 == 0 { 1.0 } else { -1.0 })
            .collect();
        let y = ChainMatrix::from_chains(&[chain.clone(), chain]);
        let capped = 200.0 * 200.0_f64.log10();
        assert!((geyer_ess(&y) - capped).abs() < 1e-9 * capped);
    }

    #[test]
    fn chains_stuck_at_different_values_run_the_loop_to_its_bound() {
        // Every ρ̂ is 1 (W = 0): with N = 100, T = 95 and τ̂ = −1 + 2·96 + 1 = 192.
        let y = ChainMatrix::from_values((0..400).map(|i| (i / 100) as f64).collect(), 4, 100);
        assert!((geyer_ess(&y) - 400.0 / 192.0).abs() < 1e-12);
    }
}

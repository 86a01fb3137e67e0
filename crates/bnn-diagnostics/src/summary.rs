//! One table row per parameter: location, spread and every convergence diagnostic at once,
//! sharing one sort of the draws, the split chains and the normal-score tables between them.

use crate::chain_matrix::ChainMatrix;
use crate::chainwise_rhat::{
    chainwise_kept_draws, chainwise_rhat, chainwise_rhat_of_order, DEFAULT_CHAINWISE_PIECES,
};
use crate::ess::tail_ess_of;
use crate::geyer_ess::geyer_ess;
use crate::mcse::mcse_sd_of;
use crate::non_finite_json::{serialize_non_finite, serialize_non_finite_slice};
use crate::potential_scale_reduction::potential_scale_reduction;
use crate::quantile_type7::quantile_type7_sorted;
use crate::rank_normalize::BlomScoreTables;
use crate::ranked_draws::RankedDraws;
use crate::rhat::larger_preferring_first;
use crate::sample_moments::mean_and_variance;
use serde::Serialize;

/// Posterior summary and convergence diagnostics of one scalar parameter. Each field equals the
/// stand-alone function of the same name (`rhat`, `ess_bulk`, `mcse_mean`, …); NaN where that
/// function gives NaN. Serializes with serde: NaN as `null`, ±∞ as `"inf"`/`"-inf"`
/// ([`serialize_non_finite`]: an infinite R-hat, stuck chains, stays visible).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ParameterSummary {
    /// Mean over all draws of all chains.
    #[serde(serialize_with = "serialize_non_finite")]
    pub mean: f64,
    /// Standard deviation over all draws (ddof 1).
    #[serde(serialize_with = "serialize_non_finite")]
    pub sd: f64,
    /// Rank-normalized split R-hat, `max(rhat_bulk, rhat_tail)`.
    #[serde(serialize_with = "serialize_non_finite")]
    pub rhat: f64,
    /// Classic split R-hat of the raw draws.
    #[serde(serialize_with = "serialize_non_finite")]
    pub rhat_split: f64,
    /// Rank-normalized split R-hat (location).
    #[serde(serialize_with = "serialize_non_finite")]
    pub rhat_bulk: f64,
    /// Folded rank-normalized split R-hat (scale).
    #[serde(serialize_with = "serialize_non_finite")]
    pub rhat_tail: f64,
    /// ESS of the rank-normalized split chains.
    #[serde(serialize_with = "serialize_non_finite")]
    pub ess_bulk: f64,
    /// The smaller ESS of the 5% and 95% quantile indicators.
    #[serde(serialize_with = "serialize_non_finite")]
    pub ess_tail: f64,
    /// Monte Carlo standard error of `mean`.
    #[serde(serialize_with = "serialize_non_finite")]
    pub mcse_mean: f64,
    /// Monte Carlo standard error of `sd`.
    #[serde(serialize_with = "serialize_non_finite")]
    pub mcse_sd: f64,
    /// 5% quantile of all draws (type 7).
    #[serde(serialize_with = "serialize_non_finite")]
    pub q05: f64,
    /// Median of all draws (type 7).
    #[serde(serialize_with = "serialize_non_finite")]
    pub q50: f64,
    /// 95% quantile of all draws (type 7).
    #[serde(serialize_with = "serialize_non_finite")]
    pub q95: f64,
    /// Chain-wise R-hat of each chain (Sommer et al. 2024, κ = 4; see [`chainwise_rhat`]).
    #[serde(serialize_with = "serialize_non_finite_slice")]
    pub crhat: Vec<f64>,
}

/// Summarizes the draws of one scalar parameter, one slice per chain.
///
/// # Panics
/// If the chains have different lengths.
pub fn summarize<C: AsRef<[f64]>>(chains: &[C]) -> ParameterSummary {
    summarize_with_tables(chains, &mut BlomScoreTables::default())
}

/// [`summarize`] for many parameters (each given as its chains), spread over the available
/// CPU cores. The order of the result follows the input.
pub fn summarize_all<P, C>(parameters: &[P]) -> Vec<ParameterSummary>
where
    P: AsRef<[C]> + Sync,
    C: AsRef<[f64]> + Sync,
{
    let summarize_block = |block: &[P]| {
        // One cache per worker: the parameters of a run share the few sizes that get scored.
        let mut tables = BlomScoreTables::default();
        block
            .iter()
            .map(|p| summarize_with_tables(p.as_ref(), &mut tables))
            .collect::<Vec<_>>()
    };
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(parameters.len());
    if workers <= 1 {
        return summarize_block(parameters);
    }
    // Contiguous blocks keep the output order without any sorting or locking.
    let block = parameters.len().div_ceil(workers);
    std::thread::scope(|scope| {
        let handles: Vec<_> = parameters
            .chunks(block)
            .map(|chunk| scope.spawn(move || summarize_block(chunk)))
            .collect();
        handles
            .into_iter()
            .flat_map(|handle| handle.join().expect("a summary worker panicked"))
            .collect()
    })
}

fn summarize_with_tables<C: AsRef<[f64]>>(
    chains: &[C],
    tables: &mut BlomScoreTables,
) -> ParameterSummary {
    let x = ChainMatrix::from_chains(chains);
    let nan = f64::NAN;
    let (mean, variance) = mean_and_variance(x.values(), 1);
    let sd = variance.sqrt();
    let mut summary = ParameterSummary {
        mean,
        sd,
        rhat: nan,
        rhat_split: nan,
        rhat_bulk: nan,
        rhat_tail: nan,
        ess_bulk: nan,
        ess_tail: nan,
        mcse_mean: nan,
        mcse_sd: nan,
        q05: nan,
        q50: nan,
        q95: nan,
        crhat: vec![nan; x.n_chains()],
    };
    if x.has_nan() {
        // Every rank-based value is NaN; each chain's cR̂ still stands on its own.
        summary.crhat = x
            .chains()
            .map(|chain| chainwise_rhat(chain, DEFAULT_CHAINWISE_PIECES))
            .collect();
        return summary;
    }
    if x.values().is_empty() {
        return summary;
    }

    let ranked = RankedDraws::new(&x);
    let sorted = ranked.sorted_values();
    summary.q05 = quantile_type7_sorted(&sorted, 0.05);
    summary.q50 = quantile_type7_sorted(&sorted, 0.5);
    summary.q95 = quantile_type7_sorted(&sorted, 0.95);

    if x.supports_ess() {
        let bulk_scores = ranked.split_scores(tables);
        summary.ess_bulk = geyer_ess(&bulk_scores);
        summary.ess_tail = tail_ess_of(&x, &sorted);
        summary.mcse_mean = sd / geyer_ess(&x.split_halves()).sqrt();
        summary.mcse_sd = mcse_sd_of(&x, mean);
        if x.supports_rhat() {
            summary.rhat_bulk = potential_scale_reduction(&bulk_scores);
            summary.rhat_tail = potential_scale_reduction(&ranked.folded_split_scores(tables));
            summary.rhat = larger_preferring_first(summary.rhat_bulk, summary.rhat_tail);
            summary.rhat_split = potential_scale_reduction(&x.split_halves());
        }
    }

    if let Some(kept) = chainwise_kept_draws(x.n_draws(), DEFAULT_CHAINWISE_PIECES) {
        summary.crhat = ranked
            .per_chain_orders(kept)
            .iter()
            .map(|order| chainwise_rhat_of_order(order, DEFAULT_CHAINWISE_PIECES, tables))
            .collect();
    }
    summary
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_draws::ar1_chain;
    use crate::{
        crhat4_sommer, ess_bulk, ess_tail, mcse_mean, mcse_sd, rhat, rhat_bulk, rhat_split,
        rhat_tail,
    };

    #[test]
    fn every_field_equals_its_stand_alone_function() {
        for n in [301, 400] {
            let mut chains: Vec<Vec<f64>> = (0..3).map(|j| ar1_chain(0.6, n, 40 + j)).collect();
            chains[2][7] = chains[0][3]; // a tie
            let summary = summarize(&chains);
            assert_eq!(summary.rhat, rhat(&chains));
            assert_eq!(summary.rhat_split, rhat_split(&chains));
            assert_eq!(summary.rhat_bulk, rhat_bulk(&chains));
            assert_eq!(summary.rhat_tail, rhat_tail(&chains));
            assert_eq!(summary.ess_bulk, ess_bulk(&chains));
            assert_eq!(summary.ess_tail, ess_tail(&chains));
            assert_eq!(summary.mcse_mean, mcse_mean(&chains));
            assert_eq!(summary.mcse_sd, mcse_sd(&chains));
            let crhat: Vec<f64> = chains.iter().map(|c| crhat4_sommer(c)).collect();
            assert_eq!(summary.crhat, crhat);
            assert!(summary.q05 < summary.q50 && summary.q50 < summary.q95);
        }
    }

    #[test]
    fn one_chain_has_ess_but_no_rhat() {
        let summary = summarize(&[ar1_chain(0.3, 400, 1)]);
        assert!(summary.rhat.is_nan() && summary.rhat_split.is_nan());
        assert!(summary.ess_bulk > 100.0 && summary.mcse_mean > 0.0);
        assert!(summary.crhat[0] < 1.05);
    }

    #[test]
    fn nan_draws_leave_only_moments_and_clean_chains() {
        let mut chains: Vec<Vec<f64>> = (0..2).map(|j| ar1_chain(0.3, 40, j)).collect();
        chains[1][5] = f64::NAN;
        let summary = summarize(&chains);
        assert!(
            summary.mean.is_nan()
                && summary.rhat.is_nan()
                && summary.ess_bulk.is_nan()
                && summary.q50.is_nan()
        );
        assert!(summary.crhat[0].is_finite() && summary.crhat[1].is_nan());
        let empty = summarize::<Vec<f64>>(&[]);
        assert!(empty.mean.is_nan() && empty.crhat.is_empty());
    }

    #[test]
    fn parallel_summaries_keep_their_order() {
        let parameters: Vec<Vec<Vec<f64>>> = (0..7)
            .map(|k| (0..2).map(|j| ar1_chain(0.5, 100, 10 * k + j)).collect())
            .collect();
        let together = summarize_all(&parameters);
        assert_eq!(together.len(), 7);
        for (parameter, summary) in parameters.iter().zip(&together) {
            assert_eq!(summary, &summarize(parameter));
        }
        assert!(summarize_all::<Vec<Vec<f64>>, Vec<f64>>(&[]).is_empty());
    }

    #[test]
    fn serializes_to_json() {
        let text = serde_json::to_string(&summarize(&[vec![1.0, 2.0, 3.0, 4.0, 5.0]])).unwrap();
        assert!(
            text.contains("\"ess_bulk\":") && text.contains("\"crhat\":["),
            "{text}"
        );
        // Stuck chains: R-hat +∞ is written as "inf", one chain's undefined R-hat as null.
        let stuck = serde_json::to_value(summarize(&[vec![1.0; 8], vec![2.0; 8]])).unwrap();
        assert_eq!(stuck["rhat"], "inf");
        let single = serde_json::to_value(summarize(&[vec![1.0, 2.0, 3.0, 4.0, 5.0]])).unwrap();
        assert!(single["rhat"].is_null());
    }
}

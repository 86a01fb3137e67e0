//! All draws of a parameter sorted once, with every rank-based quantity derived from that one
//! sort in linear time: the sorted draws (quantiles, MCSE), the normal scores of the split chains
//! (bulk R-hat and ESS), of the folded split chains (tail R-hat), and of each chain on its own
//! (chain-wise R-hat).
//!
//! Why: a summary needs all four, and sorting dominated its cost. Filtering a sorted sequence
//! keeps it sorted, and folding about the median turns it into two sorted runs that merge.

use crate::chain_matrix::ChainMatrix;
use crate::rank_normalize::{ascending_order, normal_scores_in_order, BlomScoreTables};

/// The draws of a NaN-free [`ChainMatrix`] in ascending order.
pub(crate) struct RankedDraws<'a> {
    draws: &'a ChainMatrix,
    /// `(value, index into draws.values())`, ascending.
    order: Vec<(f64, usize)>,
    /// The draws of the split chains, ascending, as `(value, index into the split matrix)`.
    split_order: Vec<(f64, usize)>,
}

impl<'a> RankedDraws<'a> {
    pub(crate) fn new(draws: &'a ChainMatrix) -> Self {
        debug_assert!(!draws.has_nan(), "NaN draws have no ranks");
        let order = ascending_order(draws.values());
        let (m, n) = (draws.n_chains(), draws.n_draws());
        let half = n / 2;
        // Chain j, draw i goes to split row j (first half) or M + j (second half); for odd N the
        // middle draw is dropped (see `ChainMatrix::split_halves`).
        let split_order = order
            .iter()
            .filter_map(|&(value, index)| {
                let (chain, draw) = (index / n, index % n);
                if draw < half {
                    Some((value, chain * half + draw))
                } else if draw >= n - half {
                    Some((value, (m + chain) * half + draw - (n - half)))
                } else {
                    None
                }
            })
            .collect();
        Self {
            draws,
            order,
            split_order,
        }
    }

    /// All draws, ascending.
    pub(crate) fn sorted_values(&self) -> Vec<f64> {
        self.order.iter().map(|&(value, _)| value).collect()
    }

    /// Normal scores of the split chains, ranked jointly (the input of bulk R-hat and ESS).
    pub(crate) fn split_scores(&self, tables: &mut BlomScoreTables) -> ChainMatrix {
        self.scores_of(&self.split_order, tables)
    }

    /// Normal scores of `|s − median(s)|` over the split draws `s` (the input of tail R-hat).
    pub(crate) fn folded_split_scores(&self, tables: &mut BlomScoreTables) -> ChainMatrix {
        let center = median_of_ascending(&self.split_order);
        self.scores_of(&folded_order(&self.split_order, center), tables)
    }

    /// For every chain, its first `kept` draws as ascending `(value, draw index)` pairs.
    pub(crate) fn per_chain_orders(&self, kept: usize) -> Vec<Vec<(f64, usize)>> {
        let n = self.draws.n_draws();
        let mut orders = vec![Vec::with_capacity(kept); self.draws.n_chains()];
        for &(value, index) in &self.order {
            let (chain, draw) = (index / n, index % n);
            if draw < kept {
                orders[chain].push((value, draw));
            }
        }
        orders
    }

    fn scores_of(&self, order: &[(f64, usize)], tables: &mut BlomScoreTables) -> ChainMatrix {
        let rows = 2 * self.draws.n_chains();
        let half = self.draws.n_draws() / 2;
        let mut scores = vec![0.0; rows * half];
        normal_scores_in_order(order, tables, &mut scores);
        ChainMatrix::from_values(scores, rows, half)
    }
}

/// Median of ascending `(value, _)` pairs (the mean of the middle two for an even count, as numpy).
pub(crate) fn median_of_ascending(order: &[(f64, usize)]) -> f64 {
    let middle = order.len() / 2;
    if order.len() % 2 == 1 {
        order[middle].0
    } else {
        (order[middle - 1].0 + order[middle].0) / 2.0
    }
}

/// `(|v − center|, position)` in ascending order, from `(v, position)` in ascending order: the
/// values below the centre, walked backwards, and those above it, walked forwards, are two
/// ascending runs of distances; merging them costs O(S) instead of a sort. Rounding is monotone,
/// so the computed distances are ordered exactly as the merge assumes.
pub(crate) fn folded_order(order: &[(f64, usize)], center: f64) -> Vec<(f64, usize)> {
    let split = order.partition_point(|&(value, _)| value < center);
    let mut below = order[..split]
        .iter()
        .rev()
        .map(|&(v, p)| ((v - center).abs(), p))
        .peekable();
    let mut above = order[split..]
        .iter()
        .map(|&(v, p)| ((v - center).abs(), p))
        .peekable();
    let mut folded = Vec::with_capacity(order.len());
    loop {
        let next = match (below.peek(), above.peek()) {
            (Some(b), Some(a)) => {
                if b.0 <= a.0 {
                    below.next()
                } else {
                    above.next()
                }
            }
            (Some(_), None) => below.next(),
            (None, Some(_)) => above.next(),
            (None, None) => break,
        };
        folded.extend(next);
    }
    folded
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rank_normalize::rank_normalize;
    use crate::test_draws::ar1_chain;

    fn chains(n: usize) -> ChainMatrix {
        let mut chains: Vec<Vec<f64>> = (0..3).map(|j| ar1_chain(0.5, n, 3 + j)).collect();
        chains[1][4] = chains[0][2]; // a tie across chains
        chains[2][0] = chains[2][1]; // a tie within a chain
        ChainMatrix::from_chains(&chains)
    }

    #[test]
    fn split_scores_equal_rank_normalizing_the_split_matrix() {
        for n in [20, 21] {
            let x = chains(n);
            let split = x.split_halves();
            let ranked = RankedDraws::new(&x);
            let mut tables = BlomScoreTables::default();
            assert_eq!(
                ranked.split_scores(&mut tables).values(),
                rank_normalize(split.values()).as_slice()
            );
        }
    }

    #[test]
    fn folded_scores_equal_rank_normalizing_the_folded_draws() {
        for n in [20, 21] {
            let x = chains(n);
            let split = x.split_halves();
            let mut sorted = split.values().to_vec();
            sorted.sort_by(f64::total_cmp);
            let m = sorted.len() / 2;
            let center = if sorted.len() % 2 == 1 {
                sorted[m]
            } else {
                (sorted[m - 1] + sorted[m]) / 2.0
            };
            let folded: Vec<f64> = split.values().iter().map(|v| (v - center).abs()).collect();
            let ranked = RankedDraws::new(&x);
            let mut tables = BlomScoreTables::default();
            assert_eq!(
                ranked.folded_split_scores(&mut tables).values(),
                rank_normalize(&folded).as_slice()
            );
        }
    }

    #[test]
    fn per_chain_orders_are_each_chains_sorted_prefix() {
        let x = chains(21);
        let ranked = RankedDraws::new(&x);
        // Equal values may come in either order; normalize that before comparing.
        let canonical = |order: &[(f64, usize)]| {
            let mut order = order.to_vec();
            order.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            order
        };
        for (j, order) in ranked.per_chain_orders(20).iter().enumerate() {
            assert!(
                order.windows(2).all(|w| w[0].0 <= w[1].0),
                "chain {j} not ascending"
            );
            assert_eq!(
                canonical(order),
                canonical(&ascending_order(&x.chain(j)[..20]))
            );
        }
        assert_eq!(ranked.sorted_values().len(), 63);
    }
}

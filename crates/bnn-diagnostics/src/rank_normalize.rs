//! Rank normalization (Vehtari et al. 2021): replace draws by normal scores of their ranks.
//!
//! R-hat and ESS computed on normal scores are defined even for draws without a finite mean
//! or variance (Cauchy), and are invariant to monotone transformations of the parameter.

use crate::radix_sort::radix_sort_by_high_half;
use crate::special::normal_quantile;

/// Blom's (1958) plotting-position offset: `(r − 3/8) / (S + 1/4)`.
const BLOM_OFFSET: f64 = 3.0 / 8.0;

/// 1-based ranks of `values`; tied values share the mean of the ranks they span
/// (`scipy.stats.rankdata(method="average")`). `-0.0` and `0.0` are ties; NaN, which has no
/// rank, is placed by [`f64::total_cmp`] and ties nothing.
pub fn average_ranks(values: &[f64]) -> Vec<f64> {
    let mut ranks = vec![0.0; values.len()];
    for_each_tie_run(&ascending_order(values), |average_rank, run| {
        for &(_, position) in run {
            ranks[position] = average_rank;
        }
    });
    ranks
}

/// Normal scores `Φ⁻¹((r − 3/8) / (S + 1/4))` of the average ranks `r` among all `S` values.
///
/// To pool over chains, as R-hat and ESS require, pass every chain's draws concatenated.
/// Any NaN makes every score NaN (as `scipy.stats.rankdata` does): a NaN has no rank, and
/// ranking around it would silently change the others' scores.
pub fn rank_normalize(values: &[f64]) -> Vec<f64> {
    if values.iter().any(|v| v.is_nan()) {
        return vec![f64::NAN; values.len()];
    }
    let mut scores = vec![0.0; values.len()];
    normal_scores_in_order(
        &ascending_order(values),
        &mut BlomScoreTables::default(),
        &mut scores,
    );
    scores
}

/// `(value, position)` pairs sorted by value (in [`f64::total_cmp`] order).
///
/// The pairs are sorted as single `u128` integers, the value's order-preserving bit pattern
/// above the position, which allows a radix sort; equal values stay in position order.
pub(crate) fn ascending_order(values: &[f64]) -> Vec<(f64, usize)> {
    let mut keys: Vec<u128> = values
        .iter()
        .zip(0u128..)
        .map(|(&v, i)| (u128::from(sort_key(v)) << 64) | i)
        .collect();
    radix_sort_by_high_half(&mut keys);
    keys.into_iter()
        .map(|key| (from_sort_key((key >> 64) as u64), key as u64 as usize))
        .collect()
}

/// Maps the bits of an f64 to a u64 whose unsigned order is [`f64::total_cmp`]'s order:
/// negative numbers have all bits flipped, others only the sign bit.
fn sort_key(value: f64) -> u64 {
    let bits = value.to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    }
}

fn from_sort_key(key: u64) -> f64 {
    f64::from_bits(if key >> 63 == 1 {
        key & !(1 << 63)
    } else {
        !key
    })
}

/// Writes the normal score of every element of `order` (ascending `(value, position)` pairs,
/// S of them) to `scores[position]`.
pub(crate) fn normal_scores_in_order(
    order: &[(f64, usize)],
    tables: &mut BlomScoreTables,
    scores: &mut [f64],
) {
    let size = order.len();
    let table = tables.for_size(size);
    for_each_tie_run(order, |average_rank, run| {
        // An untied value's average rank is the integer start + 1, so the table entry is bitwise
        // the same number `blom_score` would compute.
        let score = if run.len() == 1 {
            table[average_rank as usize - 1]
        } else {
            blom_score(average_rank, size)
        };
        for &(_, position) in run {
            scores[position] = score;
        }
    });
}

/// `Φ⁻¹((rank − 3/8) / (size + 1/4))`.
fn blom_score(rank: f64, size: usize) -> f64 {
    normal_quantile((rank - BLOM_OFFSET) / (size as f64 + 0.25))
}

/// Scores of the untied ranks `1..=S` for each sample size S met so far.
///
/// A summary of 500 parameters rank-normalizes 1500 arrays of the same few sizes; computing Φ⁻¹
/// once per rank and size instead of once per draw removes most of that cost. Ties are scored
/// directly (their average rank is a half-integer or falls between table entries anyway).
#[derive(Debug, Default)]
pub(crate) struct BlomScoreTables {
    tables: Vec<(usize, Vec<f64>)>,
}

impl BlomScoreTables {
    pub(crate) fn for_size(&mut self, size: usize) -> &[f64] {
        let index = match self.tables.iter().position(|(s, _)| *s == size) {
            Some(index) => index,
            None => {
                let table = (1..=size)
                    .map(|rank| blom_score(rank as f64, size))
                    .collect();
                self.tables.push((size, table));
                self.tables.len() - 1
            }
        };
        &self.tables[index].1
    }
}

/// Calls `visit(average rank, run)` for every run of equal values in ascending `order`.
fn for_each_tie_run(order: &[(f64, usize)], mut visit: impl FnMut(f64, &[(f64, usize)])) {
    let mut start = 0;
    while start < order.len() {
        let mut end = start + 1;
        // `==` rather than the sort order: -0.0 and 0.0 are adjacent and tie, NaN ties nothing.
        while end < order.len() && order[end].0 == order[start].0 {
            end += 1;
        }
        // Ranks start..end (0-based) are start+1..=end (1-based); their mean is exact in f64.
        let average_rank = (start + 1 + end) as f64 / 2.0;
        visit(average_rank, &order[start..end]);
        start = end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ties_share_their_average_rank() {
        let ranks = average_ranks(&[3.0, 1.0, 3.0, 2.0, 3.0, -0.0, 0.0]);
        assert_eq!(ranks, vec![6.0, 3.0, 6.0, 4.0, 6.0, 1.5, 1.5]);
    }

    #[test]
    fn scores_follow_blom_and_are_symmetric() {
        let scores = rank_normalize(&[10.0, -5.0, 0.5]);
        // Ranks 3, 1, 2 of S = 3: p = (r − 0.375) / 3.25.
        let expected = [
            normal_quantile(2.625 / 3.25),
            normal_quantile(0.625 / 3.25),
            0.0,
        ];
        assert_eq!(scores, expected);
        assert!((scores[0] + scores[1]).abs() < 1e-15);
    }

    #[test]
    fn tied_scores_use_the_average_rank() {
        let scores = rank_normalize(&[2.0, 1.0, 2.0, 5.0]);
        let tied = normal_quantile((2.5 - 0.375) / 4.25);
        assert_eq!(
            scores,
            [
                tied,
                normal_quantile(0.625 / 4.25),
                tied,
                normal_quantile(3.625 / 4.25)
            ]
        );
    }

    #[test]
    fn constant_input_gives_exact_zeros() {
        // Every rank is (S + 1)/2, so p = 1/2 exactly and Φ⁻¹ returns exactly 0: this is what
        // makes the R-hat of a constant parameter 0/0 = NaN, as in ArviZ.
        assert!(rank_normalize(&[1.5; 801]).iter().all(|&z| z == 0.0));
    }

    #[test]
    fn any_nan_makes_every_score_nan() {
        assert!(rank_normalize(&[f64::NAN, 1.0, 2.0])
            .iter()
            .all(|z| z.is_nan()));
    }

    #[test]
    fn sort_keys_order_like_total_cmp_and_round_trip() {
        let values = [
            f64::NEG_INFINITY,
            -1e300,
            -1.5,
            -f64::MIN_POSITIVE,
            -0.0,
            0.0,
            5e-324,
            2.0,
            f64::INFINITY,
        ];
        for pair in values.windows(2) {
            assert!(sort_key(pair[0]) < sort_key(pair[1]), "{pair:?}");
        }
        for v in values {
            assert_eq!(from_sort_key(sort_key(v)).to_bits(), v.to_bits());
        }
        let order = ascending_order(&[3.0, -1.0, 2.0, -1.0]);
        assert_eq!(order, [(-1.0, 1), (-1.0, 3), (2.0, 2), (3.0, 0)]);
    }

    #[test]
    fn cached_tables_match_direct_evaluation() {
        let mut tables = BlomScoreTables::default();
        for size in [1, 7, 1000, 7] {
            let table = tables.for_size(size).to_vec();
            assert_eq!(table.len(), size);
            for (r, &score) in table.iter().enumerate() {
                assert_eq!(score, blom_score((r + 1) as f64, size));
            }
        }
        assert_eq!(tables.tables.len(), 3);
    }
}

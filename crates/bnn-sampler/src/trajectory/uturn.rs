//! The generalized no-U-turn termination criterion (Betancourt 2017, App. A.4.2).

use crate::summation::{dot, LaneSum};

/// `true` while the trajectory has not turned: `v_start·ρ > 0` and `v_end·ρ > 0`.
///
/// A trajectory with momentum sum `ρ = Σ p` and velocities `v⁻ = M⁻¹p⁻`, `v⁺ = M⁻¹p⁺` at its two
/// ends may keep growing while both ends still move along `ρ`: `v⁻·ρ > 0` and `v⁺·ρ > 0`. Unlike
/// Hoffman & Gelman's position-difference rule it is invariant to the metric and needs no
/// positions. The criterion is symmetric in the two ends, so a subtree can be described in the
/// order it was built whatever its direction in time.
#[inline]
pub fn no_u_turn(velocity_start: &[f64], velocity_end: &[f64], rho: &[f64]) -> bool {
    dot(velocity_start, rho) > 0.0 && dot(velocity_end, rho) > 0.0
}

/// Momenta and velocities at the two end points of a (sub)trajectory, in build order.
pub struct SpanEnds<'a> {
    pub momentum_first: &'a [f64],
    pub velocity_first: &'a [f64],
    pub momentum_last: &'a [f64],
    pub velocity_last: &'a [f64],
}

/// Merges `right` (built after `left`, adjacent to `left`'s last point) into `left_rho` and checks
/// the merged trajectory: the whole span, and the two extra spans that straddle the seam (left
/// with right's first point, left's last point with right), which catch U-turns a merge of two
/// individually acceptable halves would miss (the checks Stan added in 2.26).
///
/// One fused pass; every dot product is summed in the fixed lane order of `summation`, exactly
/// as `no_u_turn` on the materialized sums would be, so the result is bit-identical to the plain
/// three-call formulation.
#[inline]
pub fn merge_and_check(
    left_rho: &mut [f64],
    left: &SpanEnds<'_>,
    right_rho: &[f64],
    right: &SpanEnds<'_>,
) -> bool {
    let d = left_rho.len();
    let (lv0, lp1, lv1) = (
        &left.velocity_first[..d],
        &left.momentum_last[..d],
        &left.velocity_last[..d],
    );
    let (rr, rp0, rv0, rv1) = (
        &right_rho[..d],
        &right.momentum_first[..d],
        &right.velocity_first[..d],
        &right.velocity_last[..d],
    );
    let mut seam_left_first = LaneSum::default(); // v_left_first · (ρ_left + p_right_first)
    let mut seam_right_first = LaneSum::default(); // v_right_first · (ρ_left + p_right_first)
    let mut seam_left_last = LaneSum::default(); // v_left_last · (p_left_last + ρ_right)
    let mut seam_right_last = LaneSum::default(); // v_right_last · (p_left_last + ρ_right)
    let mut whole_first = LaneSum::default(); // v_left_first · (ρ_left + ρ_right)
    let mut whole_last = LaneSum::default(); // v_right_last · (ρ_left + ρ_right)
    let whole_chunks = d - d % 4;
    let left_chunks = left_rho[..whole_chunks]
        .chunks_exact_mut(4)
        .zip(lv0.chunks_exact(4))
        .zip(lp1.chunks_exact(4))
        .zip(lv1.chunks_exact(4));
    let right_chunks = rr
        .chunks_exact(4)
        .zip(rp0.chunks_exact(4))
        .zip(rv0.chunks_exact(4))
        .zip(rv1.chunks_exact(4));
    for ((((lr, lv0), lp1), lv1), (((rr, rp0), rv0), rv1)) in left_chunks.zip(right_chunks) {
        let with_right_first: [f64; 4] = std::array::from_fn(|j| lr[j] + rp0[j]);
        let with_left_last: [f64; 4] = std::array::from_fn(|j| lp1[j] + rr[j]);
        let merged: [f64; 4] = std::array::from_fn(|j| lr[j] + rr[j]);
        seam_left_first.add_chunk(std::array::from_fn(|j| lv0[j] * with_right_first[j]));
        seam_right_first.add_chunk(std::array::from_fn(|j| rv0[j] * with_right_first[j]));
        seam_left_last.add_chunk(std::array::from_fn(|j| lv1[j] * with_left_last[j]));
        seam_right_last.add_chunk(std::array::from_fn(|j| rv1[j] * with_left_last[j]));
        whole_first.add_chunk(std::array::from_fn(|j| lv0[j] * merged[j]));
        whole_last.add_chunk(std::array::from_fn(|j| rv1[j] * merged[j]));
        lr.copy_from_slice(&merged);
    }
    for i in whole_chunks..d {
        let lr = left_rho[i];
        let with_right_first = lr + rp0[i];
        let with_left_last = lp1[i] + rr[i];
        let merged = lr + rr[i];
        seam_left_first.add(i, lv0[i] * with_right_first);
        seam_right_first.add(i, rv0[i] * with_right_first);
        seam_left_last.add(i, lv1[i] * with_left_last);
        seam_right_last.add(i, rv1[i] * with_left_last);
        whole_first.add(i, lv0[i] * merged);
        whole_last.add(i, rv1[i] * merged);
        left_rho[i] = merged;
    }
    [
        whole_first,
        whole_last,
        seam_left_first,
        seam_right_first,
        seam_left_last,
        seam_right_last,
    ]
    .iter()
    .all(|sum| sum.total() > 0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fused merge is the three plain criteria on materialized sums, bit for bit.
    #[test]
    fn fused_merge_equals_three_plain_checks() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 11) as f64 / (1u64 << 53) as f64 - 0.3
        };
        for d in [1, 3, 4, 7, 33] {
            for _ in 0..200 {
                let v: Vec<Vec<f64>> = (0..8).map(|_| (0..d).map(|_| next()).collect()).collect();
                let (l_rho, l_v0, l_p1, l_v1, r_rho, r_p0, r_v0, r_v1) =
                    (&v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]);
                let add = |a: &[f64], b: &[f64]| {
                    a.iter().zip(b).map(|(x, y)| x + y).collect::<Vec<f64>>()
                };
                let merged = add(l_rho, r_rho);
                let expected = no_u_turn(l_v0, r_v1, &merged)
                    && no_u_turn(l_v0, r_v0, &add(l_rho, r_p0))
                    && no_u_turn(l_v1, r_v1, &add(l_p1, r_rho));
                let mut rho = l_rho.clone();
                let left = SpanEnds {
                    momentum_first: l_p1,
                    velocity_first: l_v0,
                    momentum_last: l_p1,
                    velocity_last: l_v1,
                };
                let right = SpanEnds {
                    momentum_first: r_p0,
                    velocity_first: r_v0,
                    momentum_last: r_p0,
                    velocity_last: r_v1,
                };
                assert_eq!(merge_and_check(&mut rho, &left, r_rho, &right), expected);
                assert_eq!(rho, merged);
            }
        }
    }
}

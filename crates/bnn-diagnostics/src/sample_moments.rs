//! Sums, means and variances with compensated summation.
//!
//! `mean` and `sd` are checked against ArviZ to 1e-12 relative. A plain running sum over 10⁵
//! draws can lose more than that when the mean is small next to the spread, and a
//! sum-of-squares variance loses far more, so we sum with a running compensation term and take
//! variances in two passes about the mean.

/// `Σ values`, compensated: each addition's rounding error is recovered exactly (Knuth's
/// TwoSum) and added back at the end, so the result is as if summed in about twice the
/// precision, then rounded. Four independent lanes keep the loop from waiting on one long
/// dependency chain. Non-finite sums are returned as a plain sum would give them.
pub(crate) fn compensated_sum(values: impl IntoIterator<Item = f64>) -> f64 {
    let mut sums = [0.0_f64; 4];
    let mut errors = [0.0_f64; 4];
    let mut values = values.into_iter();
    'outer: loop {
        for lane in 0..4 {
            let Some(value) = values.next() else {
                break 'outer;
            };
            let (sum, error) = two_sum(sums[lane], value);
            sums[lane] = sum;
            errors[lane] += error;
        }
    }
    let plain = (sums[0] + sums[1]) + (sums[2] + sums[3]);
    if !plain.is_finite() {
        return plain;
    }
    // Combine the lanes with the same care: their sums may cancel.
    let (mut total, mut error) = (0.0, errors.iter().sum::<f64>());
    for lane_sum in sums {
        let (sum, lane_error) = two_sum(total, lane_sum);
        total = sum;
        error += lane_error;
    }
    total + error
}

/// `(a + b, e)` with `a + b = fl(a + b) + e` exactly (Knuth, TAOCP vol. 2, 4.2.2).
fn two_sum(a: f64, b: f64) -> (f64, f64) {
    let sum = a + b;
    let b_virtual = sum - a;
    let a_virtual = sum - b_virtual;
    (sum, (a - a_virtual) + (b - b_virtual))
}

/// `Σ values` of a slice, as [`compensated_sum`] but over fixed blocks of four, which the
/// compiler can keep in registers.
fn slice_sum(values: &[f64]) -> f64 {
    let mut sums = [0.0_f64; 4];
    let mut errors = [0.0_f64; 4];
    let blocks = values.chunks_exact(4);
    let remainder = blocks.remainder();
    for block in blocks {
        for lane in 0..4 {
            let (sum, error) = two_sum(sums[lane], block[lane]);
            sums[lane] = sum;
            errors[lane] += error;
        }
    }
    let total = compensated_sum(sums.into_iter().chain(remainder.iter().copied()));
    if !total.is_finite() {
        // An infinite draw makes the rounding errors NaN; the sum is what a plain sum gives.
        return total;
    }
    total + errors.iter().sum::<f64>()
}

/// Arithmetic mean; NaN for an empty slice.
pub(crate) fn mean(values: &[f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    slice_sum(values) / values.len() as f64
}

/// `(mean, Σ (x − mean)² / (n − ddof))`; the variance is NaN when `n ≤ ddof`.
pub(crate) fn mean_and_variance(values: &[f64], ddof: usize) -> (f64, f64) {
    let center = mean(values);
    if values.len() <= ddof {
        return (center, f64::NAN);
    }
    let squares = compensated_sum(values.iter().map(|&v| (v - center) * (v - center)));
    (center, squares / (values.len() - ddof) as f64)
}

/// Sample variance with `ddof` degrees of freedom removed (numpy's `var(ddof=…)`).
pub(crate) fn variance(values: &[f64], ddof: usize) -> f64 {
    mean_and_variance(values, ddof).1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compensated_sum_recovers_what_a_plain_sum_loses() {
        // 1 + 1e-16 × 10 000 − 1: a plain left-to-right sum returns 0 (each 1e-16 is below half
        // an ulp of 1). The compensation term itself is summed plainly, so 1e-12 relative is
        // what to expect, against 100% lost without it.
        let values = std::iter::once(1.0)
            .chain(std::iter::repeat_n(1e-16, 10_000))
            .chain(std::iter::once(-1.0));
        let sum = compensated_sum(values);
        assert!((sum - 1e-12).abs() < 1e-24, "{sum:e}");
    }

    #[test]
    fn mean_and_variance_match_hand_computed_values() {
        let (center, var) = mean_and_variance(&[1.0, 2.0, 4.0, 7.0], 1);
        assert_eq!(center, 3.5);
        assert_eq!(var, 7.0); // (6.25 + 2.25 + 0.25 + 12.25) / 3
        assert!(mean(&[]).is_nan());
        assert!(variance(&[1.0], 1).is_nan());
        assert_eq!(compensated_sum([1.0, f64::INFINITY]), f64::INFINITY);
    }
}

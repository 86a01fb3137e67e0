//! Sample quantiles by linear interpolation between order statistics: definition 7 of
//! Hyndman & Fan (1996), the default of R and numpy (`"linear"`).
//!
//! ESS-tail thresholds must use exactly this rule: another definition flips the `x ≤ q`
//! indicator of the draws in between and changes the ESS at the 1e-3 to 1e-1 level.

/// Type-7 quantile of `values` (copied and sorted); NaN for an empty slice, `p` outside [0, 1]
/// or any NaN value.
pub fn quantile_type7(values: &[f64], p: f64) -> f64 {
    if values.iter().any(|v| v.is_nan()) {
        return f64::NAN;
    }
    let mut sorted = values.to_vec();
    sorted.sort_unstable_by(f64::total_cmp);
    quantile_type7_sorted(&sorted, p)
}

/// Type-7 quantile of ascending `sorted` values: with `h = (S − 1) p`,
/// `q = x[⌊h⌋] + (h − ⌊h⌋)(x[⌊h⌋ + 1] − x[⌊h⌋])`, 0-based.
pub fn quantile_type7_sorted(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() || !(0.0..=1.0).contains(&p) {
        return f64::NAN;
    }
    let h = (sorted.len() - 1) as f64 * p;
    let below = h.floor() as usize;
    let fraction = h - below as f64;
    match sorted.get(below + 1) {
        Some(&above) if fraction > 0.0 => sorted[below] + fraction * (above - sorted[below]),
        _ => sorted[below],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interpolates_between_order_statistics() {
        let values = [4.0, 1.0, 3.0, 2.0, 5.0];
        assert_eq!(quantile_type7(&values, 0.0), 1.0);
        assert_eq!(quantile_type7(&values, 1.0), 5.0);
        assert_eq!(quantile_type7(&values, 0.5), 3.0);
        // h = 4 × 0.05 = 0.2 → 1 + 0.2 × (2 − 1).
        assert!((quantile_type7(&values, 0.05) - 1.2).abs() < 1e-15);
        // numpy.quantile([1, 2, 3, 4], 0.95, method="linear") = 3.85.
        assert!((quantile_type7(&[1.0, 2.0, 3.0, 4.0], 0.95) - 3.85).abs() < 1e-15);
    }

    #[test]
    fn rejects_empty_nan_and_out_of_range() {
        assert!(quantile_type7(&[], 0.5).is_nan());
        assert!(quantile_type7(&[1.0, f64::NAN], 0.5).is_nan());
        assert!(quantile_type7(&[1.0, 2.0], 1.5).is_nan());
        assert_eq!(quantile_type7(&[7.0], 0.3), 7.0);
    }
}

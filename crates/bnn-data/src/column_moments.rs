//! Mean and population standard deviation of a column, the one definition both the
//! standardizer and `describe` use.

/// Mean and standard deviation with divisor `n` (numpy's default `ddof=0`).
///
/// `ddof=0` matches `numpy.std`, which the DEI-MCMC reference code (Sommer et al., 2024,
/// "Connecting the Dots") used to standardize; a different divisor would change every
/// standardized value by the factor sqrt(n / (n - 1)). Two passes avoid the cancellation
/// of the one-pass sum-of-squares formula.
pub(crate) fn mean_and_sd(values: &[f64]) -> (f64, f64) {
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let variance = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
    (mean, variance.sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uses_divisor_n() {
        // Values 1..=4: mean 2.5, squared deviations sum to 5, so sd = sqrt(5 / 4).
        let (mean, sd) = mean_and_sd(&[1.0, 2.0, 3.0, 4.0]);
        assert_eq!(mean, 2.5);
        assert!((sd - (5.0f64 / 4.0).sqrt()).abs() < 1e-15);
    }

    #[test]
    fn large_offset_does_not_cancel() {
        let (_, sd) = mean_and_sd(&[1e9 + 1.0, 1e9 + 2.0, 1e9 + 3.0]);
        assert!((sd - (2.0f64 / 3.0).sqrt()).abs() < 1e-6);
    }
}

//! The expanding-window log pointwise predictive density of one chain (Sommer et al. 2024,
//! Eq. 8), updated draw by draw.
//!
//! After `s` draws `θ_1..θ_s` of a chain and for test points `(x_i, y_i)`, `i = 1..n`,
//!
//! ```text
//! LPPD_s = (1/n) Σ_i log( (1/s) Σ_{t ≤ s} p(y_i | x_i, θ_t) ).
//! ```
//!
//! The inner average is the chain's posterior predictive density so far. Per test point we keep a
//! running log-sum-exp of `log p(y_i | θ_t)`, so each new draw costs O(n) and nothing underflows
//! even when every likelihood is far below the smallest double.

/// Running `LPPD_s` of one chain.
#[derive(Debug, Clone)]
pub struct CumulativeLppd {
    /// Per test point: the largest log-likelihood seen so far (the log-sum-exp shift).
    shifts: Vec<f64>,
    /// Per test point: `Σ_t exp(log p(y_i | θ_t) − shift_i)`.
    scaled_sums: Vec<f64>,
    n_draws: usize,
}

impl CumulativeLppd {
    /// An empty accumulator for `n_test` test points.
    pub fn new(n_test: usize) -> Self {
        Self {
            shifts: vec![f64::NEG_INFINITY; n_test],
            scaled_sums: vec![0.0; n_test],
            n_draws: 0,
        }
    }

    pub fn n_test(&self) -> usize {
        self.shifts.len()
    }

    /// Draws added so far (`s`).
    pub fn n_draws(&self) -> usize {
        self.n_draws
    }

    /// Adds one draw, given its pointwise log-likelihoods `log p(y_i | x_i, θ_s)` for every test
    /// point, and returns the updated `LPPD_s`. A NaN log-likelihood makes that point's density,
    /// and so the LPPD, NaN from then on; `−∞` (probability 0) is allowed.
    ///
    /// # Panics
    /// If `pointwise_log_likelihood` does not have one entry per test point.
    pub fn push(&mut self, pointwise_log_likelihood: &[f64]) -> f64 {
        assert_eq!(
            pointwise_log_likelihood.len(),
            self.n_test(),
            "one log-likelihood per test point is needed"
        );
        for ((shift, sum), &log_likelihood) in self
            .shifts
            .iter_mut()
            .zip(&mut self.scaled_sums)
            .zip(pointwise_log_likelihood)
        {
            if log_likelihood.is_nan() {
                *sum = f64::NAN;
            } else if log_likelihood > *shift {
                // Rescale the old terms to the new maximum; exp(−∞) = 0 covers the first draw.
                *sum = *sum * (*shift - log_likelihood).exp() + 1.0;
                *shift = log_likelihood;
            } else if log_likelihood > f64::NEG_INFINITY {
                *sum += (log_likelihood - *shift).exp();
            }
        }
        self.n_draws += 1;
        self.lppd()
    }

    /// The current `LPPD_s`; NaN before the first draw or without test points.
    pub fn lppd(&self) -> f64 {
        if self.n_draws == 0 || self.shifts.is_empty() {
            return f64::NAN;
        }
        let log_draws = (self.n_draws as f64).ln();
        let total: f64 = self
            .shifts
            .iter()
            .zip(&self.scaled_sums)
            .map(|(&shift, &sum)| {
                if sum == 0.0 {
                    f64::NEG_INFINITY
                } else {
                    shift + sum.ln() - log_draws
                }
            })
            .sum();
        total / self.shifts.len() as f64
    }
}

/// `LPPD_1, …, LPPD_S` of a chain whose draw `s` has pointwise log-likelihoods
/// `log_likelihood[s]`.
pub fn cumulative_lppd_trace<R: AsRef<[f64]>>(log_likelihood: &[R]) -> Vec<f64> {
    let n_test = log_likelihood.first().map_or(0, |row| row.as_ref().len());
    let mut accumulator = CumulativeLppd::new(n_test);
    log_likelihood
        .iter()
        .map(|row| accumulator.push(row.as_ref()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `LPPD_s` straight from the definition, in linear space (fine for moderate values).
    fn direct(log_likelihood: &[Vec<f64>], s: usize) -> f64 {
        let n = log_likelihood[0].len();
        (0..n)
            .map(|i| {
                (log_likelihood[..s]
                    .iter()
                    .map(|row| row[i].exp())
                    .sum::<f64>()
                    / s as f64)
                    .ln()
            })
            .sum::<f64>()
            / n as f64
    }

    #[test]
    fn matches_the_definition_draw_by_draw() {
        let rows: Vec<Vec<f64>> = (0..50)
            .map(|s| {
                (0..7)
                    .map(|i| -0.5 - ((s * 7 + i) as f64 * 0.77).sin().abs() * 3.0)
                    .collect()
            })
            .collect();
        let trace = cumulative_lppd_trace(&rows);
        for s in 1..=50 {
            assert!((trace[s - 1] - direct(&rows, s)).abs() < 1e-13, "s = {s}");
        }
    }

    #[test]
    fn stays_finite_where_densities_underflow() {
        // exp(−1000) underflows to 0, but the mean of exp(−1000) and exp(−1001) is representable
        // in log space: −1000 + log((1 + e⁻¹)/2).
        let mut accumulator = CumulativeLppd::new(1);
        accumulator.push(&[-1001.0]);
        let lppd = accumulator.push(&[-1000.0]);
        let expected = -1000.0 + ((1.0 + (-1.0_f64).exp()) / 2.0).ln();
        assert!((lppd - expected).abs() < 1e-12, "{lppd}");
    }

    #[test]
    fn zero_probabilities_and_empty_state() {
        let mut accumulator = CumulativeLppd::new(2);
        assert!(accumulator.lppd().is_nan());
        accumulator.push(&[f64::NEG_INFINITY, -1.0]);
        assert_eq!(accumulator.lppd(), f64::NEG_INFINITY);
        let lppd = accumulator.push(&[-2.0, -1.0]);
        let expected = (((-2.0_f64).exp() / 2.0).ln() + -1.0) / 2.0;
        assert!((lppd - expected).abs() < 1e-14);
        assert_eq!(accumulator.n_draws(), 2);
        assert!(accumulator.push(&[f64::NAN, -1.0]).is_nan());
    }
}

//! The LPPD-based stopping rule for one chain (Sommer et al. 2024, Eq. 9).
//!
//! With `LPPD_s` the expanding-window LPPD after `s` draws ([`crate::CumulativeLppd`]), a chain
//! counts as converged at draw `s` once its predictive performance has stopped moving:
//!
//! ```text
//! | (1/ϖ) Σ_{k = s−ϖ+1}^{s} LPPD_k − LPPD_s | < ε,
//! ```
//!
//! i.e. the current value is within ε of the mean of the last ϖ values (the current one included).
//! The rule works in function space, where DEI-MCMC chains agree long before the weights do.

/// The window ϖ and tolerance ε of the rule. Neither has a default: both depend on the scale of
/// the likelihood and on how many draws a chain can afford, so the caller states them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LppdConvergence {
    /// ϖ: how many of the latest cumulative LPPD values are averaged (at least 1).
    pub window: usize,
    /// ε: the largest accepted distance between that average and the latest value.
    pub tolerance: f64,
}

impl LppdConvergence {
    pub fn new(window: usize, tolerance: f64) -> Self {
        Self { window, tolerance }
    }

    /// Whether the rule holds at the end of `history` (`LPPD_1..LPPD_s`). False while fewer
    /// than ϖ values exist, for ϖ = 0, and when any value in the window is NaN or infinite.
    pub fn is_converged(&self, history: &[f64]) -> bool {
        if self.window == 0 || history.len() < self.window {
            return false;
        }
        let recent = &history[history.len() - self.window..];
        if recent.iter().any(|v| !v.is_finite()) {
            return false;
        }
        let window_mean = recent.iter().sum::<f64>() / self.window as f64;
        let current = recent[self.window - 1];
        (window_mean - current).abs() < self.tolerance
    }

    /// The first number of draws `s` at which the rule holds, if any.
    pub fn first_converged_draw(&self, history: &[f64]) -> Option<usize> {
        (1..=history.len()).find(|&s| self.is_converged(&history[..s]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converges_once_the_window_flattens() {
        // LPPD_s = −1 − 1/s approaches −1; over a window of 5 its mean differs from the latest
        // value by about 2/s², which drops below 1e-3 at s = 45.
        let history: Vec<f64> = (1..=200).map(|s| -1.0 - 1.0 / s as f64).collect();
        let rule = LppdConvergence::new(5, 1e-3);
        let first = rule.first_converged_draw(&history).unwrap();
        assert!((40..=50).contains(&first), "converged at {first}");
        assert!(!rule.is_converged(&history[..first - 1]));
        assert!(rule.is_converged(&history));
    }

    #[test]
    fn needs_a_full_finite_window() {
        let rule = LppdConvergence::new(3, 0.1);
        assert!(!rule.is_converged(&[-1.0, -1.0]));
        assert!(rule.is_converged(&[-1.0, -1.0, -1.0]));
        assert!(!rule.is_converged(&[-1.0, f64::NAN, -1.0]));
        assert!(!LppdConvergence::new(0, 0.1).is_converged(&[-1.0]));
        assert!(!LppdConvergence::new(2, 0.1).is_converged(&[0.0, 1.0]));
    }
}

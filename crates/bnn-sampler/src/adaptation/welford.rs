//! Welford's streaming estimator of per-coordinate means and variances.

use serde::{Deserialize, Serialize};

/// Per-coordinate running mean and sum of squared deviations (Welford 1962), numerically stable
/// in one pass; its state is small and serializable, so a warmup can be checkpointed mid-window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WelfordVariance {
    count: u64,
    mean: Vec<f64>,
    sum_sq: Vec<f64>,
}

impl WelfordVariance {
    pub fn new(dim: usize) -> Self {
        Self {
            count: 0,
            mean: vec![0.0; dim],
            sum_sq: vec![0.0; dim],
        }
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    pub fn add(&mut self, x: &[f64]) {
        self.count += 1;
        let n = self.count as f64;
        for ((m, s), x) in self.mean.iter_mut().zip(self.sum_sq.iter_mut()).zip(x) {
            let delta = x - *m;
            *m += delta / n;
            *s += delta * (x - *m);
        }
    }

    /// The running means.
    pub fn mean(&self) -> &[f64] {
        &self.mean
    }

    /// Unbiased sample variances (divisor `n - 1`); zeros with fewer than two samples.
    pub fn variance(&self) -> Vec<f64> {
        if self.count < 2 {
            return vec![0.0; self.mean.len()];
        }
        let denominator = (self.count - 1) as f64;
        self.sum_sq.iter().map(|s| s / denominator).collect()
    }

    pub fn reset(&mut self) {
        self.count = 0;
        self.mean.iter_mut().for_each(|m| *m = 0.0);
        self.sum_sq.iter_mut().for_each(|s| *s = 0.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_two_pass_variance() {
        let xs = [1.0, 4.0, -2.0, 7.5, 3.25];
        let mut w = WelfordVariance::new(1);
        xs.iter().for_each(|x| w.add(&[*x]));
        let mean = xs.iter().sum::<f64>() / 5.0;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / 4.0;
        assert!((w.variance()[0] - var).abs() < 1e-12);
    }
}

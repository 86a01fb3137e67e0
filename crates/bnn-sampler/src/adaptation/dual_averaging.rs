//! Nesterov dual averaging of the log step size toward a target acceptance statistic.

use serde::{Deserialize, Serialize};

/// Dual averaging of `log ε` (Hoffman & Gelman 2014, §3.2.1, eq. 6 and Alg. 5; after
/// Nesterov 2009). After `m` observations of the acceptance statistic `α`:
///
/// ```text
/// H̄_m   = (1 - 1/(m + t0)) H̄_{m-1} + (δ - α_m) / (m + t0)
/// log ε_m = μ - sqrt(m)/γ · H̄_m
/// log ε̄_m = m^{-κ} log ε_m + (1 - m^{-κ}) log ε̄_{m-1}
/// ```
///
/// `ε_m` explores (it is what the warmup uses next); `ε̄_m` converges and is the step size kept
/// for sampling. `μ = log(10 ε₀)` biases the exploration toward larger steps, which are cheaper.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DualAveraging {
    /// Target acceptance statistic δ.
    target: f64,
    /// Shrinkage strength γ toward μ (Stan: 0.05).
    gamma: f64,
    /// Decay exponent κ of the averaging weights (Stan: 0.75).
    kappa: f64,
    /// Iteration offset t0 damping the first updates (Stan: 10).
    t0: f64,
    mu: f64,
    count: u64,
    /// Running average `H̄` of `δ - α`.
    error_average: f64,
    log_step_size: f64,
    log_step_size_average: f64,
}

impl DualAveraging {
    /// Starts at `initial_step_size` with `μ = log(10 ε₀)`.
    pub fn new(target: f64, gamma: f64, kappa: f64, t0: f64, initial_step_size: f64) -> Self {
        let mut averaging = Self {
            target,
            gamma,
            kappa,
            t0,
            mu: 0.0,
            count: 0,
            error_average: 0.0,
            log_step_size: 0.0,
            log_step_size_average: 0.0,
        };
        averaging.restart(initial_step_size);
        averaging
    }

    /// Forgets the history and restarts from `step_size` with `μ = log(10 ε)`; Stan does this
    /// after every metric update, since the old step sizes were tuned for another metric.
    pub fn restart(&mut self, step_size: f64) {
        self.mu = (10.0 * step_size).ln();
        self.count = 0;
        self.error_average = 0.0;
        self.log_step_size = step_size.ln();
        self.log_step_size_average = 0.0;
    }

    /// Aims at a new target acceptance and restarts from `step_size` (the stationary warmup
    /// raises the target after a divergent check).
    pub fn retarget(&mut self, target: f64, step_size: f64) {
        self.target = target;
        self.restart(step_size);
    }

    /// Feeds one acceptance statistic (clamped to `[0, 1]`, NaN as 0) and returns the next `ε`.
    pub fn update(&mut self, accept_stat: f64) -> f64 {
        let accept = if accept_stat.is_nan() {
            0.0
        } else {
            accept_stat.clamp(0.0, 1.0)
        };
        self.count += 1;
        let m = self.count as f64;
        let eta = 1.0 / (m + self.t0);
        self.error_average = (1.0 - eta) * self.error_average + eta * (self.target - accept);
        self.log_step_size = self.mu - m.sqrt() / self.gamma * self.error_average;
        let weight = m.powf(-self.kappa);
        self.log_step_size_average =
            weight * self.log_step_size + (1.0 - weight) * self.log_step_size_average;
        self.log_step_size.exp()
    }

    /// The exploring step size `ε_m`.
    pub fn step_size(&self) -> f64 {
        self.log_step_size.exp()
    }

    /// The averaged step size `ε̄_m` used after warmup (`ε_m` before the first update).
    pub fn averaged_step_size(&self) -> f64 {
        if self.count == 0 {
            self.step_size()
        } else {
            self.log_step_size_average.exp()
        }
    }

    pub fn target(&self) -> f64 {
        self.target
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_update_follows_the_equations() {
        let mut da = DualAveraging::new(0.8, 0.05, 0.75, 10.0, 0.5);
        let eps = da.update(0.3);
        // H̄1 = (0.8 - 0.3)/11, log ε1 = log 5 - H̄1/0.05, log ε̄1 = log ε1 (weight 1^-κ = 1).
        let expected = (5.0f64.ln() - (0.5 / 11.0) / 0.05).exp();
        assert!((eps - expected).abs() < 1e-12);
        assert!((da.averaged_step_size() - expected).abs() < 1e-12);
    }

    #[test]
    fn converges_to_the_step_size_giving_the_target() {
        // Acceptance exp(-ε) reaches 0.8 at ε = -ln 0.8.
        let mut da = DualAveraging::new(0.8, 0.05, 0.75, 10.0, 1.0);
        let mut eps = da.step_size();
        for _ in 0..5000 {
            eps = da.update((-eps).exp());
        }
        assert!(
            (da.averaged_step_size() + 0.8f64.ln()).abs() < 1e-2,
            "{}",
            da.averaged_step_size()
        );
    }
}

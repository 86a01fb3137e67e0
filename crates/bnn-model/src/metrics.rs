//! Predictive metrics of a set of parameter draws on held-out data (one module for CLI and examples).

use crate::predictive::PointPrediction;
use serde::Serialize;

/// Accuracy and calibration of a posterior predictive, on the scale of the targets given.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PredictiveMetrics {
    /// Root mean squared error of the predictive mean (regression; NaN for classification).
    pub rmse: f64,
    /// Log pointwise predictive density: mean over points of log((1/S) Σ_s p(y_i | θ_s)).
    pub lppd: f64,
    /// Expected negative log likelihood: mean over points and draws of −log p(y_i | θ_s).
    pub nll: f64,
    /// Classification accuracy of the averaged probabilities (NaN for regression).
    pub accuracy: f64,
    pub n_points: usize,
    pub n_draws: usize,
    /// Regression with several targets: each target's own RMSE and LPPD (its marginal predictive
    /// density); empty for one target and for classification.
    pub per_target: Vec<TargetMetrics>,
}

/// One target's share of a multi-output regression: `lppd` is the mean over points of
/// log((1/S) Σ_s p(y_ik | θ_s)), so the targets' values need not add up to the joint LPPD
/// (they do when the predictive factorizes over targets).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TargetMetrics {
    pub rmse: f64,
    pub lppd: f64,
}

/// `log Σ exp(v)` without overflow.
pub fn log_sum_exp(values: &[f64]) -> f64 {
    let max = values.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    if !max.is_finite() {
        return max;
    }
    max + values.iter().map(|v| (v - max).exp()).sum::<f64>().ln()
}

/// Streams draws into running sums, so metrics over many draws and test points need memory for
/// one draw's predictions only (`O(N)`, not `O(S·N)`).
#[derive(Debug, Clone)]
pub struct PredictiveAccumulator {
    /// Targets, row-major, `y_cols` per point (labels for classification).
    y: Vec<f64>,
    y_cols: usize,
    draws: usize,
    /// Per point: running max and scaled sum of exp(log-likelihood) for a stable logsumexp.
    log_lik_max: Vec<f64>,
    log_lik_scaled_sum: Vec<f64>,
    /// Σ over draws and points of −log p.
    nll_sum: f64,
    /// Per point and target: Σ over draws of the predictive mean (regression) or class
    /// probability (classification).
    moment_sum: Vec<f64>,
    is_regression: Option<bool>,
    /// Several Gaussian targets: per (point, target), the running logsumexp of the marginal
    /// log-likelihood, as `log_lik_max` / `log_lik_scaled_sum` do for the joint.
    target_log_lik_max: Vec<f64>,
    target_log_lik_scaled_sum: Vec<f64>,
}

impl PredictiveAccumulator {
    pub fn new(y: &[f64], y_cols: usize) -> Self {
        let n = y.len() / y_cols.max(1);
        Self {
            y: y.to_vec(),
            y_cols,
            draws: 0,
            log_lik_max: vec![f64::NEG_INFINITY; n],
            log_lik_scaled_sum: vec![0.0; n],
            nll_sum: 0.0,
            moment_sum: Vec::new(),
            is_regression: None,
            target_log_lik_max: Vec::new(),
            target_log_lik_scaled_sum: Vec::new(),
        }
    }

    /// Adds one draw's predictions for every point.
    pub fn add_draw(&mut self, predictions: &[PointPrediction]) {
        let n = self.log_lik_max.len();
        assert_eq!(predictions.len(), n, "one prediction per test point");
        for (i, prediction) in predictions.iter().enumerate() {
            let yi = &self.y[i * self.y_cols..(i + 1) * self.y_cols];
            let ll = prediction.log_likelihood(yi);
            self.nll_sum -= ll;
            push_log_sum_exp(
                &mut self.log_lik_max[i],
                &mut self.log_lik_scaled_sum[i],
                ll,
            );
            if self.y_cols > 1 && matches!(prediction, PointPrediction::Gaussian { .. }) {
                if self.target_log_lik_max.is_empty() {
                    self.target_log_lik_max = vec![f64::NEG_INFINITY; n * self.y_cols];
                    self.target_log_lik_scaled_sum = vec![0.0; n * self.y_cols];
                }
                for k in 0..self.y_cols {
                    let v = i * self.y_cols + k;
                    let ll_k = prediction.log_likelihood_of_target(yi, k);
                    push_log_sum_exp(
                        &mut self.target_log_lik_max[v],
                        &mut self.target_log_lik_scaled_sum[v],
                        ll_k,
                    );
                }
            }
            let values: &[f64] = match prediction {
                PointPrediction::Gaussian { mean, .. } => mean,
                PointPrediction::Categorical { probabilities } => probabilities,
            };
            if self.moment_sum.is_empty() {
                self.moment_sum = vec![0.0; n * values.len()];
                self.is_regression = Some(matches!(prediction, PointPrediction::Gaussian { .. }));
            }
            let k = values.len();
            self.moment_sum[i * k..(i + 1) * k]
                .iter_mut()
                .zip(values)
                .for_each(|(a, v)| *a += v);
        }
        self.draws += 1;
    }

    /// Each test value's log predictive density, log((1/S) Σ_s p(y | θ_s)): their mean is the
    /// LPPD, so the rows that cost it can be found. One value per point, or with several
    /// Gaussian targets one per (point, target), that target's marginal (their means are the
    /// per-target LPPDs).
    pub fn pointwise_lppd(&self) -> Vec<f64> {
        let log_draws = (self.draws as f64).ln();
        let (max, sum) = if self.target_log_lik_max.is_empty() {
            (&self.log_lik_max, &self.log_lik_scaled_sum)
        } else {
            (&self.target_log_lik_max, &self.target_log_lik_scaled_sum)
        };
        max.iter()
            .zip(sum)
            .map(|(m, s)| m + s.ln() - log_draws)
            .collect()
    }

    pub fn finish(&self) -> PredictiveMetrics {
        let n = self.log_lik_max.len();
        let s = self.draws as f64;
        let nf = n as f64;
        let lppd = (0..n)
            .map(|i| self.log_lik_max[i] + self.log_lik_scaled_sum[i].ln() - s.ln())
            .sum::<f64>()
            / nf;
        let k = self.moment_sum.len().checked_div(n).unwrap_or(0);
        let (mut sq_err, mut correct) = (0.0, 0usize);
        // Squared errors per target column; the joint RMSE pools them.
        let mut sq_per_target = vec![0.0; self.y_cols];
        for i in 0..n {
            let avg = &self.moment_sum[i * k..(i + 1) * k];
            if self.is_regression == Some(true) {
                for (j, a) in avg.iter().enumerate() {
                    let e = (self.y[i * self.y_cols + j] - a / s).powi(2);
                    sq_err += e;
                    sq_per_target[j] += e;
                }
            } else {
                let best = (0..k)
                    .max_by(|&a, &b| avg[a].total_cmp(&avg[b]))
                    .unwrap_or(0);
                correct += usize::from(best == self.y[i * self.y_cols] as usize);
            }
        }
        let regression = self.is_regression == Some(true);
        let per_target = if regression && !self.target_log_lik_max.is_empty() {
            (0..self.y_cols)
                .map(|j| {
                    let lppd = (0..n)
                        .map(|i| i * self.y_cols + j)
                        .map(|v| {
                            self.target_log_lik_max[v] + self.target_log_lik_scaled_sum[v].ln()
                                - s.ln()
                        })
                        .sum::<f64>();
                    TargetMetrics {
                        rmse: (sq_per_target[j] / nf).sqrt(),
                        lppd: lppd / nf,
                    }
                })
                .collect()
        } else {
            Vec::new()
        };
        PredictiveMetrics {
            rmse: if regression {
                (sq_err / (nf * self.y_cols as f64)).sqrt()
            } else {
                f64::NAN
            },
            lppd,
            nll: self.nll_sum / (s * nf),
            accuracy: if regression {
                f64::NAN
            } else {
                correct as f64 / nf
            },
            n_points: n,
            n_draws: self.draws,
            per_target,
        }
    }
}

/// Adds `value` to a running `log Σ exp` kept as (max, Σ exp(v − max)): the sum is rescaled when
/// a new maximum arrives, so no term overflows.
fn push_log_sum_exp(max: &mut f64, scaled_sum: &mut f64, value: f64) {
    if value > *max {
        *scaled_sum = *scaled_sum * (*max - value).exp() + 1.0;
        *max = value;
    } else {
        *scaled_sum += (value - *max).exp();
    }
}

/// Metrics of predictions `[S][N]` (draws × points) against targets `y` (row-major, `y_cols`
/// per point; labels for classification).
pub fn predictive_metrics(
    predictions: &[Vec<PointPrediction>],
    y: &[f64],
    y_cols: usize,
) -> PredictiveMetrics {
    let mut accumulator = PredictiveAccumulator::new(y, y_cols);
    for draw in predictions {
        accumulator.add_draw(draw);
    }
    accumulator.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streaming_lppd_equals_direct_logsumexp() {
        // Two draws, two points, Gaussian predictions: compare with the formula written out.
        let y = [0.3, -1.0];
        let draws = vec![
            vec![
                PointPrediction::Gaussian {
                    mean: vec![0.0],
                    sd: vec![1.0],
                },
                PointPrediction::Gaussian {
                    mean: vec![-2.0],
                    sd: vec![0.5],
                },
            ],
            vec![
                PointPrediction::Gaussian {
                    mean: vec![1.0],
                    sd: vec![0.2],
                },
                PointPrediction::Gaussian {
                    mean: vec![-1.0],
                    sd: vec![2.0],
                },
            ],
        ];
        let m = predictive_metrics(&draws, &y, 1);
        let mut accumulator = PredictiveAccumulator::new(&y, 1);
        draws.iter().for_each(|d| accumulator.add_draw(d));
        let pointwise = accumulator.pointwise_lppd();
        assert_eq!(pointwise.len(), 2);
        let mut lppd = 0.0;
        let mut nll = 0.0;
        for i in 0..2 {
            let lls: Vec<f64> = draws
                .iter()
                .map(|d| d[i].log_likelihood(&y[i..i + 1]))
                .collect();
            let point = log_sum_exp(&lls) - 2f64.ln();
            assert!((pointwise[i] - point).abs() < 1e-12, "point {i}");
            lppd += point;
            nll -= lls.iter().sum::<f64>() / 2.0;
        }
        assert!((m.lppd - lppd / 2.0).abs() < 1e-12);
        assert!((m.nll - nll / 2.0).abs() < 1e-12);
        let rmse = (((0.3 - 0.5f64).powi(2) + (-1.0 - -1.5f64).powi(2)) / 2.0).sqrt();
        assert!((m.rmse - rmse).abs() < 1e-12);
    }

    #[test]
    fn each_target_has_its_own_rmse_and_marginal_lppd() {
        // Two draws, one point, two targets: target 0 predicted exactly by draw 0, target 1 off.
        let y = [0.0, 2.0];
        let draws = vec![
            vec![PointPrediction::Gaussian {
                mean: vec![0.0, 1.0],
                sd: vec![1.0, 0.5],
            }],
            vec![PointPrediction::Gaussian {
                mean: vec![1.0, 3.0],
                sd: vec![2.0, 1.0],
            }],
        ];
        let m = predictive_metrics(&draws, &y, 2);
        assert_eq!(m.per_target.len(), 2);
        let mut accumulator = PredictiveAccumulator::new(&y, 2);
        draws.iter().for_each(|d| accumulator.add_draw(d));
        // One point, two targets: one marginal score per target, not the joint one.
        let pointwise = accumulator.pointwise_lppd();
        assert_eq!(pointwise.len(), 2);
        for (k, target) in m.per_target.iter().enumerate() {
            let lls: Vec<f64> = draws
                .iter()
                .map(|d| d[0].log_likelihood_of_target(&y, k))
                .collect();
            let lppd = log_sum_exp(&lls) - 2f64.ln();
            assert!((pointwise[k] - lppd).abs() < 1e-12, "target {k}");
            assert!(
                (target.lppd - lppd).abs() < 1e-12,
                "target {k}: {} vs {lppd}",
                target.lppd
            );
        }
        assert!((m.per_target[0].rmse - 0.5).abs() < 1e-12);
        assert!((m.per_target[1].rmse - 0.0).abs() < 1e-12);
        // The joint RMSE pools both targets' squared errors.
        assert!((m.rmse - (0.25f64 / 2.0).sqrt()).abs() < 1e-12);
        // One target: no per-target block.
        assert!(predictive_metrics(
            &[vec![PointPrediction::Gaussian {
                mean: vec![0.0],
                sd: vec![1.0]
            }]],
            &[0.0],
            1
        )
        .per_target
        .is_empty());
    }

    #[test]
    fn classification_accuracy_uses_averaged_probabilities() {
        let y = [1.0];
        let draws = vec![
            vec![PointPrediction::Categorical {
                probabilities: vec![0.6, 0.4],
            }],
            vec![PointPrediction::Categorical {
                probabilities: vec![0.1, 0.9],
            }],
        ];
        let m = predictive_metrics(&draws, &y, 1);
        assert_eq!(m.accuracy, 1.0);
        assert!((m.lppd - (0.65f64).ln()).abs() < 1e-12);
    }
}

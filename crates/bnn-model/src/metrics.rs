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
}

/// `log Σ exp(v)` without overflow.
pub fn log_sum_exp(values: &[f64]) -> f64 {
    let max = values.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    if !max.is_finite() {
        return max;
    }
    max + values.iter().map(|v| (v - max).exp()).sum::<f64>().ln()
}

/// Metrics of predictions `[S][N]` (draws × points) against targets `y` (row-major, `y_cols`
/// per point; labels for classification).
pub fn predictive_metrics(predictions: &[Vec<PointPrediction>], y: &[f64], y_cols: usize) -> PredictiveMetrics {
    let s = predictions.len();
    let n = predictions.first().map_or(0, Vec::len);
    let mut sq_err = 0.0;
    let mut lppd = 0.0;
    let mut nll = 0.0;
    let mut correct = 0usize;
    let mut is_regression = true;
    let mut log_liks = vec![0.0; s];
    for i in 0..n {
        let yi = &y[i * y_cols..(i + 1) * y_cols];
        for (draw, preds) in predictions.iter().enumerate() {
            log_liks[draw] = preds[i].log_likelihood(yi);
        }
        lppd += log_sum_exp(&log_liks) - (s as f64).ln();
        nll -= log_liks.iter().sum::<f64>() / s as f64;
        match &predictions[0][i] {
            PointPrediction::Gaussian { mean, .. } => {
                for k in 0..mean.len() {
                    let m = predictions
                        .iter()
                        .map(|p| match &p[i] {
                            PointPrediction::Gaussian { mean, .. } => mean[k],
                            PointPrediction::Categorical { .. } => unreachable!(),
                        })
                        .sum::<f64>()
                        / s as f64;
                    sq_err += (yi[k] - m).powi(2);
                }
            }
            PointPrediction::Categorical { probabilities } => {
                is_regression = false;
                let mut avg = vec![0.0; probabilities.len()];
                for p in predictions {
                    if let PointPrediction::Categorical { probabilities } = &p[i] {
                        avg.iter_mut().zip(probabilities).for_each(|(a, q)| *a += q);
                    }
                }
                let best = (0..avg.len()).max_by(|&a, &b| avg[a].total_cmp(&avg[b])).unwrap_or(0);
                correct += usize::from(best == yi[0] as usize);
            }
        }
    }
    let nf = n as f64;
    PredictiveMetrics {
        rmse: if is_regression { (sq_err / (nf * y_cols as f64)).sqrt() } else { f64::NAN },
        lppd: lppd / nf,
        nll: nll / nf,
        accuracy: if is_regression { f64::NAN } else { correct as f64 / nf },
        n_points: n,
        n_draws: s,
    }
}

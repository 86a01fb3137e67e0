//! Posterior predictive quantities from parameter draws: outputs, pointwise log likelihoods, means.

use crate::likelihood::{Likelihood, ScaleLink, SIGMA_MAX, SIGMA_MIN};
use crate::observations::{tensor_from, HostData};
use crate::posterior::{MlpPosterior, Posterior};
use burn::tensor::DType;
use std::f64::consts::PI;

/// The predictive distribution of one data point under one parameter draw.
#[derive(Debug, Clone, PartialEq)]
pub enum PointPrediction {
    /// Independent normals per target.
    Gaussian { mean: Vec<f64>, sd: Vec<f64> },
    /// Class probabilities.
    Categorical { probabilities: Vec<f64> },
}

impl Likelihood {
    /// Host-side predictive of one point from its network outputs (`log_sigma`, one per
    /// target, for the learned-σ head).
    pub fn point_prediction(&self, outputs: &[f64], log_sigma: Option<&[f64]>) -> PointPrediction {
        match *self {
            Likelihood::GaussianHeteroscedastic { link } => {
                let t = outputs.len() / 2;
                let sd = outputs[t..]
                    .iter()
                    .map(|&o| {
                        let s = match link {
                            ScaleLink::Exp => o.exp(),
                            ScaleLink::Softplus => o.max(0.0) + (-o.abs()).exp().ln_1p(),
                        };
                        s.clamp(SIGMA_MIN, SIGMA_MAX)
                    })
                    .collect();
                PointPrediction::Gaussian {
                    mean: outputs[..t].to_vec(),
                    sd,
                }
            }
            Likelihood::GaussianFixed { sigma } => PointPrediction::Gaussian {
                mean: outputs.to_vec(),
                sd: vec![sigma; outputs.len()],
            },
            Likelihood::GaussianLearnedSigma { .. } => {
                let log_sigma = log_sigma.expect("learned-σ head needs log σ");
                PointPrediction::Gaussian {
                    mean: outputs.to_vec(),
                    sd: log_sigma.iter().map(|s| s.exp()).collect(),
                }
            }
            Likelihood::Categorical { .. } => {
                let max = outputs.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let exp: Vec<f64> = outputs.iter().map(|o| (o - max).exp()).collect();
                let total: f64 = exp.iter().sum();
                PointPrediction::Categorical {
                    probabilities: exp.iter().map(|e| e / total).collect(),
                }
            }
        }
    }
}

impl PointPrediction {
    /// log p(y | this prediction); `y` holds the targets, or the label for a categorical.
    pub fn log_likelihood(&self, y: &[f64]) -> f64 {
        match self {
            PointPrediction::Gaussian { mean, .. } => (0..mean.len())
                .map(|k| self.log_likelihood_of_target(y, k))
                .sum(),
            PointPrediction::Categorical { probabilities } => probabilities[y[0] as usize].ln(),
        }
    }

    /// log p(y_k | this prediction), the marginal of target `k` (the Gaussian head's targets are
    /// independent given the parameters); a categorical prediction has one target, the label.
    pub fn log_likelihood_of_target(&self, y: &[f64], k: usize) -> f64 {
        match self {
            PointPrediction::Gaussian { mean, sd } => {
                let z = (y[k] - mean[k]) / sd[k];
                -0.5 * z * z - sd[k].ln() - 0.5 * (2.0 * PI).ln()
            }
            PointPrediction::Categorical { .. } => self.log_likelihood(y),
        }
    }
}

impl MlpPosterior {
    /// Network outputs for `draws` (row-major `[S, D]`) on the rows of `data.x`, as
    /// `[S][N][K]`, evaluated on the posterior's device without autodiff.
    pub fn outputs(&self, draws: &[f64], data: &HostData) -> Vec<Vec<Vec<f64>>> {
        let d = self.layout_dim();
        let s = draws.len() / d;
        let device = self.device().clone().without_autodiff();
        let dtype = DType::F32;
        let theta = tensor_from(draws, [s, d], &device, dtype);
        let x = tensor_from(&data.x, [data.rows, data.x_cols], &device, dtype);
        let out = self.forward_batch(&theta, &x);
        let [_, n, k] = out.dims();
        let values: Vec<f64> = out.into_data().iter::<f64>().collect();
        (0..s)
            .map(|i| {
                (0..n)
                    .map(|j| values[(i * n + j) * k..(i * n + j + 1) * k].to_vec())
                    .collect()
            })
            .collect()
    }

    /// Per draw and data point: the predictive distribution. `[S][N]`.
    pub fn predictions(&self, draws: &[f64], data: &HostData) -> Vec<Vec<PointPrediction>> {
        let d = self.layout_dim();
        let log_sigma_index = self.log_sigma_index();
        let likelihood = self.config().likelihood;
        let targets = self.config().n_targets;
        self.outputs(draws, data)
            .into_iter()
            .enumerate()
            .map(|(i, rows)| {
                let log_sigma = log_sigma_index.map(|j| &draws[i * d + j..i * d + j + targets]);
                rows.iter()
                    .map(|o| likelihood.point_prediction(o, log_sigma))
                    .collect()
            })
            .collect()
    }
}

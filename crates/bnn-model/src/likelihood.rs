//! Likelihood heads: how network outputs turn into a log probability of the targets.

use burn::tensor::{activation, Tensor};
use serde::{Deserialize, Serialize};
use std::f64::consts::PI;

/// Smallest and largest σ a heteroscedastic head may produce (the DEI-MCMC reference clips
/// σ = exp(o) to this range, which keeps the likelihood finite for any weights).
pub const SIGMA_MIN: f64 = 1e-6;
pub const SIGMA_MAX: f64 = 1e6;

/// How the second output of a heteroscedastic head becomes a standard deviation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScaleLink {
    /// σ = exp(o), the reference setup of Sommer et al. 2024.
    #[default]
    Exp,
    /// σ = log(1 + exp(o)): grows linearly instead of exponentially for large o.
    Softplus,
}

/// Normal prior on a learned log σ.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LogSigmaPrior {
    pub mean: f64,
    pub sd: f64,
}

impl Default for LogSigmaPrior {
    fn default() -> Self {
        LogSigmaPrior { mean: 0.0, sd: 1.0 }
    }
}

/// The observation model. Regression heads take `T` real targets per row; the categorical head
/// takes one integer label per row.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Likelihood {
    /// y ~ N(μ(x), σ(x)²): outputs `[μ_1..μ_T, o_1..o_T]`, σ = link(o) clipped to
    /// [`SIGMA_MIN`, `SIGMA_MAX`]. σ is a standard deviation everywhere (training and sampling).
    GaussianHeteroscedastic {
        #[serde(default)]
        link: ScaleLink,
    },
    /// y ~ N(μ(x), σ²) with a fixed σ (the ReLU-HMC experiments of Dinh et al. use σ = 0.1).
    GaussianFixed { sigma: f64 },
    /// y_t ~ N(μ_t(x), σ_t²) with one log σ per target sampled as extra parameters, each under
    /// the same normal prior.
    GaussianLearnedSigma {
        #[serde(default)]
        prior: LogSigmaPrior,
    },
    /// y ~ Categorical(softmax(f(x))) over `classes` labels `0..classes`.
    Categorical { classes: usize },
}

/// A likelihood whose parameters cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LikelihoodError {
    #[error("fixed σ must be positive and finite, got {0}")]
    FixedSigma(f64),
    #[error("log σ prior needs a finite mean and positive sd, got {0:?}")]
    LogSigmaPrior(LogSigmaPrior),
    #[error("a categorical likelihood needs at least 2 classes, got {0}")]
    Classes(usize),
}

impl Default for Likelihood {
    fn default() -> Self {
        Likelihood::GaussianHeteroscedastic {
            link: ScaleLink::Exp,
        }
    }
}

impl Likelihood {
    /// Network outputs needed for `n_targets` target columns.
    pub fn output_dim(&self, n_targets: usize) -> usize {
        match self {
            Likelihood::GaussianHeteroscedastic { .. } => 2 * n_targets,
            Likelihood::GaussianFixed { .. } | Likelihood::GaussianLearnedSigma { .. } => n_targets,
            Likelihood::Categorical { classes } => *classes,
        }
    }

    /// Whether log σ is an extra sampled parameter.
    pub fn has_log_sigma(&self) -> bool {
        matches!(self, Likelihood::GaussianLearnedSigma { .. })
    }

    /// How many log σ's the head samples for `n_targets` targets (one per target, or none).
    pub fn log_sigma_count(&self, n_targets: usize) -> usize {
        if self.has_log_sigma() {
            n_targets
        } else {
            0
        }
    }

    pub fn is_regression(&self) -> bool {
        !matches!(self, Likelihood::Categorical { .. })
    }

    pub fn validate(&self) -> Result<(), LikelihoodError> {
        match *self {
            Likelihood::GaussianFixed { sigma } if !(sigma.is_finite() && sigma > 0.0) => {
                Err(LikelihoodError::FixedSigma(sigma))
            }
            Likelihood::GaussianLearnedSigma { prior }
                if !(prior.sd.is_finite() && prior.sd > 0.0 && prior.mean.is_finite()) =>
            {
                Err(LikelihoodError::LogSigmaPrior(prior))
            }
            Likelihood::Categorical { classes } if classes < 2 => {
                Err(LikelihoodError::Classes(classes))
            }
            _ => Ok(()),
        }
    }

    /// Log likelihood of the whole data set for each of C parameter vectors.
    ///
    /// `outputs`: `[C, N, K]` network outputs; `targets`: `[N, T]` real targets, or `[N, K]`
    /// one-hot labels for the categorical head; `log_sigma`: `[C, T]`, only for the learned-σ
    /// head.
    /// Returns `[C]`.
    pub fn log_likelihood(
        &self,
        outputs: Tensor<3>,
        targets: &Tensor<2>,
        log_sigma: Option<Tensor<2>>,
    ) -> Tensor<1> {
        self.log_likelihood_of_rows(outputs, targets.clone().unsqueeze::<3>(), log_sigma)
    }

    /// As [`Likelihood::log_likelihood`], with targets `[1, N, K]` shared by the chains or
    /// `[C, N, K]`, each chain its own rows (a minibatch per chain).
    pub fn log_likelihood_of_rows(
        &self,
        outputs: Tensor<3>,
        y: Tensor<3>,
        log_sigma: Option<Tensor<2>>,
    ) -> Tensor<1> {
        let [c, n, k] = outputs.dims();
        let half_log_2pi = 0.5 * (2.0 * PI).ln();
        match *self {
            Likelihood::GaussianHeteroscedastic { link } => {
                let t = k / 2;
                let mean = outputs.clone().slice([0..c, 0..n, 0..t]);
                let raw = outputs.slice([0..c, 0..n, t..k]);
                let log_sd = match link {
                    ScaleLink::Exp => raw.clamp(SIGMA_MIN.ln(), SIGMA_MAX.ln()),
                    ScaleLink::Softplus => activation::softplus(raw, 1.0)
                        .clamp(SIGMA_MIN, SIGMA_MAX)
                        .log(),
                };
                let z = (y - mean) * log_sd.clone().neg().exp();
                let per_point = z.powi_scalar(2).mul_scalar(-0.5) - log_sd;
                sum_chains(per_point).sub_scalar(half_log_2pi * (n * t) as f64)
            }
            Likelihood::GaussianFixed { sigma } => {
                let sq = (y - outputs).powi_scalar(2);
                sum_chains(sq)
                    .mul_scalar(-0.5 / (sigma * sigma))
                    .sub_scalar((sigma.ln() + half_log_2pi) * (n * k) as f64)
            }
            Likelihood::GaussianLearnedSigma { prior } => {
                let log_sd = log_sigma.expect("learned-σ likelihood needs log σ"); // [C, K]
                                                                                   // Σ over rows of each column's squared residuals, [C, K].
                let sq = (y - outputs).powi_scalar(2).sum_dim(1).reshape([c, k]);
                let per_column = sq
                    .mul(log_sd.clone().mul_scalar(-2.0).exp())
                    .mul_scalar(-0.5)
                    - log_sd.clone().mul_scalar(n as f64);
                // The prior on log σ belongs to the posterior; it is added here so that every
                // head's extra parameters are handled in one place.
                let z = log_sd.sub_scalar(prior.mean).div_scalar(prior.sd);
                let per_column = per_column + z.powi_scalar(2).mul_scalar(-0.5);
                per_column
                    .sum_dim(1)
                    .reshape([c])
                    .sub_scalar((half_log_2pi * n as f64 + prior.sd.ln() + half_log_2pi) * k as f64)
            }
            Likelihood::Categorical { .. } => {
                let log_p = activation::log_softmax(outputs, 2);
                sum_chains(log_p * y)
            }
        }
    }
}

/// `[C, N, K] -> [C]` by summing over data points and outputs.
fn sum_chains(x: Tensor<3>) -> Tensor<1> {
    let c = x.dims()[0];
    x.sum_dim(2).sum_dim(1).reshape([c])
}

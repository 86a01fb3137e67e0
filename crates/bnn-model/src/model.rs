//! The built-in BNN: an MLP plus its likelihood head and priors.

use crate::activation::Activation;
use crate::likelihood::{Likelihood, LikelihoodError};
use crate::mlp::{Mlp, MlpConfig};
use crate::prior::{PriorError, PriorSpec};
use burn::config::Config;
use burn::module::{Module, Param};
use burn::tensor::{Device, Tensor};

/// Everything that defines a BNN regression or classification model.
#[derive(Config, Debug)]
pub struct BnnConfig {
    /// Number of input features.
    pub d_input: usize,
    /// Hidden layer widths; empty for a linear model.
    #[config(default = "vec![16, 16]")]
    pub hidden: Vec<usize>,
    /// Hidden-layer nonlinearity.
    #[config(default = "Activation::Relu")]
    pub activation: Activation,
    /// Number of real targets (regression) — ignored by the categorical head.
    #[config(default = 1)]
    pub n_targets: usize,
    /// Observation model.
    #[config(default = "Likelihood::default()")]
    pub likelihood: Likelihood,
    /// Priors on weights and biases.
    #[config(default = "PriorSpec::default()")]
    pub prior: PriorSpec,
}

/// A model config with impossible values.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BnnConfigError {
    #[error("the model needs at least one input feature")]
    NoInputs,
    #[error("hidden layer {layer} has width 0")]
    ZeroWidth { layer: usize },
    #[error("a regression model needs at least one target")]
    NoTargets,
    #[error(transparent)]
    Likelihood(#[from] LikelihoodError),
    #[error(transparent)]
    Prior(#[from] PriorError),
    /// A per-layer prior for a layer past the last (`layers` layers, `0..layers`).
    #[error("prior set for layer {layer}, but the model has only {layers} layers (0..={})", .layers - 1)]
    PriorLayer { layer: usize, layers: usize },
}

impl BnnConfig {
    pub fn mlp(&self) -> MlpConfig {
        MlpConfig::new(self.d_input)
            .with_hidden(self.hidden.clone())
            .with_d_output(self.likelihood.output_dim(self.n_targets))
            .with_activation(self.activation)
    }

    /// Checks the config for impossible values before anything is built.
    pub fn validate(&self) -> Result<(), BnnConfigError> {
        if self.d_input == 0 {
            return Err(BnnConfigError::NoInputs);
        }
        if let Some(layer) = self.hidden.iter().position(|&w| w == 0) {
            return Err(BnnConfigError::ZeroWidth { layer });
        }
        if self.likelihood.is_regression() && self.n_targets == 0 {
            return Err(BnnConfigError::NoTargets);
        }
        self.likelihood.validate()?;
        self.prior.default.validate()?;
        for (layer, lp) in &self.prior.layers {
            if *layer > self.hidden.len() {
                return Err(BnnConfigError::PriorLayer {
                    layer: *layer,
                    layers: self.hidden.len() + 1,
                });
            }
            lp.weight.validate()?;
            lp.bias.validate()?;
        }
        Ok(())
    }

    /// Number of sampled parameters D.
    pub fn num_params(&self) -> usize {
        self.mlp().num_params() + self.likelihood.log_sigma_count(self.n_targets)
    }

    pub fn init(&self, device: &Device) -> BnnModel {
        let log_sigma = self
            .likelihood
            .has_log_sigma()
            .then(|| Param::from_tensor(Tensor::zeros([self.n_targets], device)));
        BnnModel {
            network: self.mlp().init(device),
            log_sigma,
        }
    }
}

/// Network weights plus the likelihood's own sampled parameters (a learned log σ per target).
#[derive(Module, Debug)]
pub struct BnnModel {
    pub network: Mlp,
    pub log_sigma: Option<Param<Tensor<1>>>,
}

impl BnnModel {
    /// `[N, d_input] -> [N, outputs]`.
    pub fn forward(&self, input: Tensor<2>) -> Tensor<2> {
        self.network.forward(input)
    }
}

//! Command-line flags that define a BNN, shared by every subcommand that builds one.

use anyhow::Result;
use bnn_model::{Activation, BnnConfig, Prior};
use bnn_pipeline::{parse_hidden, ModelSection};
use clap::Args;

#[derive(Args, Debug, Clone)]
pub struct ModelArgs {
    /// Hidden layer widths, comma separated; empty ("") for a linear model.
    #[arg(long, default_value = "16,16")]
    pub hidden: String,
    /// tanh, relu, leaky_relu, sigmoid, silu, gelu, softplus, trunc_relu or identity.
    #[arg(long, default_value = "relu")]
    pub activation: Activation,
    /// hetero (σ = exp(o)), hetero-softplus, fixed:<σ>, learned-sigma[:<mean>,<sd>] or categorical:<classes>.
    #[arg(long, default_value = "hetero")]
    pub likelihood: String,
    /// Number of regression targets.
    #[arg(long, default_value_t = 1)]
    pub targets: usize,
    /// Prior of every weight and bias: normal:<s>, laplace:<b> or fan_in_normal:<s>.
    #[arg(long, default_value = "normal:1")]
    pub prior: Prior,
    /// Per-layer prior, repeatable: <layer>=<weight prior>[/<bias prior>], e.g. 0=fan_in_normal:1/normal:1.
    #[arg(long = "layer-prior")]
    pub layer_priors: Vec<String>,
}

impl ModelArgs {
    pub fn config(&self, d_input: usize) -> Result<BnnConfig> {
        ModelSection::new()
            .with_hidden(parse_hidden(&self.hidden)?)
            .with_activation(self.activation.to_string())
            .with_likelihood(self.likelihood.clone())
            .with_targets(Some(self.targets))
            .with_prior(self.prior.to_string())
            .with_layer_priors(self.layer_priors.clone())
            .bnn_config(d_input, self.targets)
    }
}

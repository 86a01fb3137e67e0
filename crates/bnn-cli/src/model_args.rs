//! Command-line flags that define a BNN, shared by every subcommand that builds one.

use anyhow::{anyhow, bail, Result};
use bnn_model::{Activation, BnnConfig, LayerPrior, Likelihood, LogSigmaPrior, Prior, ScaleLink};
use clap::Args;

#[derive(Args, Debug, Clone)]
pub struct ModelArgs {
    /// Hidden layer widths, comma separated; empty ("") for a linear model.
    #[arg(long, default_value = "16,16")]
    pub hidden: String,
    /// tanh, relu, leaky_relu, sigmoid, silu, trunc_relu or identity.
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

pub fn parse_hidden(text: &str) -> Result<Vec<usize>> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<usize>().map_err(|_| anyhow!("hidden width '{s}' is not a positive integer")))
        .collect()
}

pub fn parse_likelihood(text: &str) -> Result<Likelihood> {
    let (kind, arg) = text.split_once(':').map_or((text, None), |(k, a)| (k, Some(a)));
    let number = |a: &str| a.trim().parse::<f64>().map_err(|_| anyhow!("'{a}' is not a number in --likelihood {text}"));
    Ok(match (kind.trim().to_ascii_lowercase().as_str(), arg) {
        ("hetero" | "heteroscedastic", None) => Likelihood::GaussianHeteroscedastic { link: ScaleLink::Exp },
        ("hetero-softplus", None) => Likelihood::GaussianHeteroscedastic { link: ScaleLink::Softplus },
        ("fixed", Some(a)) => Likelihood::GaussianFixed { sigma: number(a)? },
        ("learned-sigma", None) => Likelihood::GaussianLearnedSigma { prior: LogSigmaPrior::default() },
        ("learned-sigma", Some(a)) => {
            let (m, s) = a.split_once(',').ok_or_else(|| anyhow!("learned-sigma takes <mean>,<sd>"))?;
            Likelihood::GaussianLearnedSigma { prior: LogSigmaPrior { mean: number(m)?, sd: number(s)? } }
        }
        ("categorical", Some(a)) => Likelihood::Categorical {
            classes: a.trim().parse().map_err(|_| anyhow!("categorical takes a class count, got '{a}'"))?,
        },
        _ => bail!(
            "unknown likelihood '{text}'; expected hetero, hetero-softplus, fixed:<σ>, learned-sigma[:<mean>,<sd>] or categorical:<classes>"
        ),
    })
}

pub fn parse_layer_prior(text: &str) -> Result<(usize, LayerPrior)> {
    let (layer, priors) = text.split_once('=').ok_or_else(|| anyhow!("--layer-prior '{text}' needs <layer>=<prior>"))?;
    let layer: usize = layer.trim().parse().map_err(|_| anyhow!("layer '{layer}' is not an index"))?;
    let (w, b) = priors.split_once('/').unwrap_or((priors, priors));
    let weight: Prior = w.parse().map_err(|e: String| anyhow!(e))?;
    let bias: Prior = b.parse().map_err(|e: String| anyhow!(e))?;
    Ok((layer, LayerPrior { weight, bias }))
}

impl ModelArgs {
    pub fn config(&self, d_input: usize) -> Result<BnnConfig> {
        let section = crate::run_config::ModelSection {
            hidden: parse_hidden(&self.hidden)?,
            activation: self.activation.to_string(),
            likelihood: self.likelihood.clone(),
            targets: self.targets,
            prior: self.prior.to_string(),
            layer_priors: self.layer_priors.clone(),
        };
        section.bnn_config(d_input)
    }
}

//! The text forms of a model's settings ("16,16", "fixed:0.1", "0=fan_in_normal:1") as configs and flags write them.

use anyhow::{anyhow, bail, Result};
use bnn_model::{LayerPrior, Likelihood, LogSigmaPrior, Prior, PriorError, ScaleLink};

/// Hidden layer widths, comma separated; empty (or blank) for a linear model. An empty entry
/// between commas (`8,,8`) or a width of 0 is refused rather than read as something else.
pub fn parse_hidden(text: &str) -> Result<Vec<usize>> {
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    text.split(',')
        .map(str::trim)
        .map(|s| match s.parse::<usize>() {
            _ if s.is_empty() => Err(anyhow!("--hidden '{text}': an empty width between commas; give every layer's width (e.g. 8,8)")),
            Ok(width) if width > 0 => Ok(width),
            _ => Err(anyhow!("--hidden '{text}': width '{s}' is not a positive integer")),
        })
        .collect()
}

/// `hetero`, `hetero-softplus`, `fixed:<σ>`, `learned-sigma[:<mean>,<sd>]` or `categorical:<classes>`.
pub fn parse_likelihood(text: &str) -> Result<Likelihood> {
    let (kind, arg) = text
        .split_once(':')
        .map_or((text, None), |(k, a)| (k, Some(a)));
    let number = |a: &str| {
        a.trim()
            .parse::<f64>()
            .map_err(|_| anyhow!("'{a}' is not a number in --likelihood {text}"))
    };
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
            "--likelihood (config key `likelihood`): unknown likelihood '{text}'; expected hetero, hetero-softplus, fixed:<σ>, learned-sigma[:<mean>,<sd>] or categorical:<classes>"
        ),
    })
}

/// `<layer>=<weight prior>[/<bias prior>]`, e.g. `0=fan_in_normal:1/normal:1`.
pub fn parse_layer_prior(text: &str) -> Result<(usize, LayerPrior)> {
    let (layer, priors) = text
        .split_once('=')
        .ok_or_else(|| anyhow!("--layer-prior '{text}' needs <layer>=<prior>"))?;
    let layer: usize = layer
        .trim()
        .parse()
        .map_err(|_| anyhow!("--layer-prior '{text}': layer '{layer}' is not an index"))?;
    let (w, b) = priors.split_once('/').unwrap_or((priors, priors));
    let weight: Prior = w
        .parse()
        .map_err(|e: PriorError| anyhow!("--layer-prior '{text}': {e}"))?;
    let bias: Prior = b
        .parse()
        .map_err(|e: PriorError| anyhow!("--layer-prior '{text}': {e}"))?;
    Ok((layer, LayerPrior { weight, bias }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_forms_and_names_bad_ones() {
        assert_eq!(parse_hidden("16, 8").unwrap(), vec![16, 8]);
        assert!(parse_hidden("").unwrap().is_empty());
        assert!(parse_hidden("16,x")
            .unwrap_err()
            .to_string()
            .contains("'x'"));
        for text in ["8,,8", "8,", ",8", "8,0"] {
            let message = parse_hidden(text).unwrap_err().to_string();
            assert!(message.starts_with("--hidden"), "{text}: {message}");
        }
        assert!(
            matches!(parse_likelihood("fixed:0.1").unwrap(), Likelihood::GaussianFixed { sigma } if sigma == 0.1)
        );
        assert!(parse_likelihood("poisson")
            .unwrap_err()
            .to_string()
            .contains("unknown likelihood"));
        let (layer, prior) = parse_layer_prior("1=laplace:0.5").unwrap();
        assert_eq!(layer, 1);
        assert_eq!(prior.weight, prior.bias);
        assert!(parse_layer_prior("laplace:0.5").is_err());
    }
}

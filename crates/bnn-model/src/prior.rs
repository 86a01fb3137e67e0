//! Priors on weights and biases, settable per layer.

use crate::layout::{ParameterKind, ParameterLayout};
use serde::{Deserialize, Serialize};
use std::f64::consts::PI;
use std::fmt;
use std::str::FromStr;

/// A zero-centred prior on each scalar of a weight or bias tensor.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "family", rename_all = "snake_case")]
pub enum Prior {
    /// iid Normal(0, scale).
    Normal { scale: f64 },
    /// iid Laplace(0, scale): heavier tails, sparser weights.
    Laplace { scale: f64 },
    /// Normal(0, scale / sqrt(fan_in)): keeps the prior predictive's scale independent of width.
    FanInNormal { scale: f64 },
}

impl Default for Prior {
    /// N(0, 1) on every parameter: the DEI-MCMC reference setup (Sommer et al. 2024).
    fn default() -> Self {
        Prior::Normal { scale: 1.0 }
    }
}

/// A prior that cannot be used or parsed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PriorError {
    #[error("prior scale must be positive and finite, got {0}")]
    Scale(f64),
    #[error("prior scale '{text}' is not a number")]
    ScaleNotNumber {
        text: String,
        #[source]
        cause: std::num::ParseFloatError,
    },
    #[error("unknown prior '{0}'; expected normal, laplace or fan_in_normal")]
    UnknownFamily(String),
}

impl Prior {
    fn scale(&self) -> f64 {
        match *self {
            Prior::Normal { scale } | Prior::Laplace { scale } | Prior::FanInNormal { scale } => {
                scale
            }
        }
    }

    pub fn validate(&self) -> Result<(), PriorError> {
        let s = self.scale();
        if !(s.is_finite() && s > 0.0) {
            return Err(PriorError::Scale(s));
        }
        Ok(())
    }
}

impl fmt::Display for Prior {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Prior::Normal { scale } => write!(f, "normal:{scale}"),
            Prior::Laplace { scale } => write!(f, "laplace:{scale}"),
            Prior::FanInNormal { scale } => write!(f, "fan_in_normal:{scale}"),
        }
    }
}

impl FromStr for Prior {
    type Err = PriorError;
    /// `normal:1`, `laplace:0.5`, `fan_in_normal:1` (the scale defaults to 1).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (family, scale) = match s.split_once(':') {
            Some((f, v)) => {
                let scale: f64 = v
                    .trim()
                    .parse()
                    .map_err(|cause| PriorError::ScaleNotNumber {
                        text: v.to_string(),
                        cause,
                    })?;
                (f.trim(), scale)
            }
            None => (s.trim(), 1.0),
        };
        let prior = match family.to_ascii_lowercase().replace('-', "_").as_str() {
            "normal" | "gaussian" => Prior::Normal { scale },
            "laplace" => Prior::Laplace { scale },
            "fan_in_normal" | "fanin_normal" | "fan_in" => Prior::FanInNormal { scale },
            other => return Err(PriorError::UnknownFamily(other.to_string())),
        };
        prior.validate()?;
        Ok(prior)
    }
}

/// Priors of one dense layer.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LayerPrior {
    pub weight: Prior,
    pub bias: Prior,
}

/// The prior of every network parameter: a default plus per-layer overrides.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct PriorSpec {
    pub default: Prior,
    /// `(layer index, priors)`; later entries win.
    #[serde(default)]
    pub layers: Vec<(usize, LayerPrior)>,
}

impl PriorSpec {
    pub fn uniform(prior: Prior) -> Self {
        Self {
            default: prior,
            layers: Vec::new(),
        }
    }

    pub fn with_layer(mut self, layer: usize, prior: LayerPrior) -> Self {
        self.layers.push((layer, prior));
        self
    }

    fn prior_for(&self, layer: Option<usize>, kind: ParameterKind) -> Prior {
        let chosen = layer.and_then(|l| self.layers.iter().rev().find(|(i, _)| *i == l));
        match (chosen, kind) {
            (Some((_, lp)), ParameterKind::Bias) => lp.bias,
            (Some((_, lp)), _) => lp.weight,
            (None, _) => self.default,
        }
    }

    /// Per-coordinate coefficients so that `log p(θ) = constant − ½ Σ a_i θ_i² − Σ b_i |θ_i|`,
    /// which evaluates any mix of the families with two tensor reductions.
    pub fn coefficients(&self, layout: &ParameterLayout) -> Result<PriorCoefficients, PriorError> {
        for (_, lp) in &self.layers {
            lp.weight.validate()?;
            lp.bias.validate()?;
        }
        self.default.validate()?;
        let d = layout.dim();
        let mut quadratic = vec![0.0f64; d];
        let mut absolute = vec![0.0f64; d];
        let mut constant = 0.0f64;
        for entry in &layout.entries {
            if !matches!(
                entry.kind,
                ParameterKind::Weight | ParameterKind::Bias | ParameterKind::Other
            ) {
                continue;
            }
            let prior = self.prior_for(entry.layer, entry.kind);
            let n = entry.len() as f64;
            let range = entry.range();
            match prior {
                Prior::Normal { scale } | Prior::FanInNormal { scale } => {
                    let sd = match prior {
                        Prior::FanInNormal { .. } => scale / (entry.fan_in.max(1) as f64).sqrt(),
                        _ => scale,
                    };
                    quadratic[range].fill(1.0 / (sd * sd));
                    constant -= n * (sd.ln() + 0.5 * (2.0 * PI).ln());
                }
                Prior::Laplace { scale } => {
                    absolute[range].fill(1.0 / scale);
                    constant -= n * (2.0 * scale).ln();
                }
            }
        }
        Ok(PriorCoefficients {
            quadratic,
            absolute,
            constant,
        })
    }
}

/// See [`PriorSpec::coefficients`].
#[derive(Debug, Clone, PartialEq)]
pub struct PriorCoefficients {
    pub quadratic: Vec<f64>,
    pub absolute: Vec<f64>,
    pub constant: f64,
}

impl PriorCoefficients {
    pub fn has_laplace(&self) -> bool {
        self.absolute.iter().any(|&b| b != 0.0)
    }

    /// Host-side evaluation for one position (used in tests and checks).
    pub fn log_density(&self, theta: &[f64]) -> f64 {
        let mut lp = self.constant;
        for i in 0..theta.len() {
            lp -= 0.5 * self.quadratic[i] * theta[i] * theta[i];
            lp -= self.absolute[i] * theta[i].abs();
        }
        lp
    }
}

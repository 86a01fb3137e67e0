//! Hidden-layer nonlinearities of the MLP.

use burn::tensor::{activation, Tensor};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

use crate::unknown_name::UnknownName;

/// Slope of `leaky_relu` on the negative side (PyTorch's and Flax's default).
pub const LEAKY_RELU_SLOPE: f64 = 0.01;

/// The activation applied after every hidden layer (never after the output layer).
///
/// Piecewise-linear choices (`relu`, `leaky_relu`, `trunc_relu`) make the leapfrog integrator's
/// local error Ω(ε) rather than O(ε³) (Dinh et al.), so HMC/NUTS on them should target a lower
/// acceptance rate (~0.45); smooth ones (`tanh`, `sigmoid`, `silu`, `gelu`, `softplus`) keep the
/// usual 0.8.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Activation {
    Tanh,
    Relu,
    LeakyRelu,
    Sigmoid,
    Silu,
    /// x·Φ(x), Φ the standard normal CDF: the exact (erf-based) GELU of Hendrycks & Gimpel,
    /// Burn's `activation::gelu`.
    Gelu,
    /// log(1 + eˣ), a smooth ReLU.
    Softplus,
    /// ReLU clipped to [0, 1]: min(max(x, 0), 1).
    TruncRelu,
    Identity,
}

impl Activation {
    pub const ALL: [Activation; 9] = [
        Activation::Tanh,
        Activation::Relu,
        Activation::LeakyRelu,
        Activation::Sigmoid,
        Activation::Silu,
        Activation::Gelu,
        Activation::Softplus,
        Activation::TruncRelu,
        Activation::Identity,
    ];

    pub fn apply<const D: usize>(self, x: Tensor<D>) -> Tensor<D> {
        match self {
            Activation::Tanh => activation::tanh(x),
            Activation::Relu => activation::relu(x),
            Activation::LeakyRelu => activation::leaky_relu(x, LEAKY_RELU_SLOPE),
            Activation::Sigmoid => sigmoid(x),
            Activation::Silu => x.clone() * sigmoid(x),
            Activation::Gelu => x.clone() * normal_cdf(x),
            Activation::Softplus => softplus(x),
            Activation::TruncRelu => x.clamp(0.0, 1.0),
            Activation::Identity => x,
        }
    }

    /// Whether the activation has kinks, i.e. leapfrog error is first order in ε there.
    pub fn is_piecewise_linear(self) -> bool {
        matches!(
            self,
            Activation::Relu | Activation::LeakyRelu | Activation::TruncRelu
        )
    }

    pub fn name(self) -> &'static str {
        match self {
            Activation::Tanh => "tanh",
            Activation::Relu => "relu",
            Activation::LeakyRelu => "leaky_relu",
            Activation::Sigmoid => "sigmoid",
            Activation::Silu => "silu",
            Activation::Gelu => "gelu",
            Activation::Softplus => "softplus",
            Activation::TruncRelu => "trunc_relu",
            Activation::Identity => "identity",
        }
    }
}

/// σ(x) = (1 + tanh(x/2)) / 2: exact in the tensor's own precision and stable for large |x|.
/// (Burn's built-in sigmoid evaluates in f32 whatever the tensor's dtype, which would spoil the
/// f64 gradient checks and any f64 sampling.)
fn sigmoid<const D: usize>(x: Tensor<D>) -> Tensor<D> {
    activation::tanh(x.mul_scalar(0.5))
        .add_scalar(1.0)
        .mul_scalar(0.5)
}

/// Φ(x) = (1 + erf(x/√2)) / 2, from the tensor's own `erf` (Burn's `gelu` is x times this; its
/// backward on some backends is the derivative of the tanh approximation, so GELU is composed
/// here and autodiff differentiates `erf` exactly).
fn normal_cdf<const D: usize>(x: Tensor<D>) -> Tensor<D> {
    x.mul_scalar(std::f64::consts::FRAC_1_SQRT_2)
        .erf()
        .add_scalar(1.0)
        .mul_scalar(0.5)
}

/// softplus(x) = max(x, 0) + log1p(e^{−|x|}), stable in both tails and in the tensor's own
/// precision (Burn's `softplus` returns x above a threshold, 2e-9 off in f64), with −|x| written
/// as min(x, 0) − max(x, 0) from two masks, so that autodiff gives σ(x) at x = 0 too (|x| and
/// max(x, 0) have derivative 0 there, which would give 0 instead of ½).
fn softplus<const D: usize>(x: Tensor<D>) -> Tensor<D> {
    let positive = x.clone().greater_elem(0.0);
    let above = x.clone().mask_fill(positive.clone().bool_not(), 0.0);
    let below = x.mask_fill(positive, 0.0);
    above.clone() + (below - above).exp().log1p()
}

impl fmt::Display for Activation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Activation {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let wanted = s.trim().to_ascii_lowercase().replace('-', "_");
        Activation::ALL
            .into_iter()
            .find(|a| a.name() == wanted)
            .ok_or_else(|| UnknownName::new("activation", s, Activation::ALL.map(Activation::name)))
    }
}

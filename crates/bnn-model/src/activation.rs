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
/// acceptance rate (~0.45); smooth ones (`tanh`, `sigmoid`, `silu`) keep the usual 0.8.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Activation {
    Tanh,
    Relu,
    LeakyRelu,
    Sigmoid,
    Silu,
    /// ReLU clipped to [0, 1]: min(max(x, 0), 1).
    TruncRelu,
    Identity,
}

impl Activation {
    pub const ALL: [Activation; 7] = [
        Activation::Tanh,
        Activation::Relu,
        Activation::LeakyRelu,
        Activation::Sigmoid,
        Activation::Silu,
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

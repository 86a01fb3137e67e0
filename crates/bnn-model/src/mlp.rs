//! The multilayer perceptron: a Burn module built from a config.

use crate::activation::Activation;
use burn::config::Config;
use burn::module::Module;
use burn::nn::{Linear, LinearConfig};
use burn::tensor::{Device, Tensor};

/// Shape and nonlinearity of an MLP. `hidden = []` gives a linear model.
#[derive(Config, Debug)]
pub struct MlpConfig {
    /// Number of input features.
    pub d_input: usize,
    /// Width of each hidden layer, input side first.
    #[config(default = "vec![16, 16]")]
    pub hidden: Vec<usize>,
    /// Number of network outputs (set by the likelihood head: e.g. 2 per target for a
    /// heteroscedastic Gaussian).
    #[config(default = 1)]
    pub d_output: usize,
    /// Nonlinearity after every hidden layer.
    #[config(default = "Activation::Relu")]
    pub activation: Activation,
}

impl MlpConfig {
    /// Layer widths from input to output, e.g. `[8, 16, 16, 2]`.
    pub fn widths(&self) -> Vec<usize> {
        let mut widths = Vec::with_capacity(self.hidden.len() + 2);
        widths.push(self.d_input);
        widths.extend(&self.hidden);
        widths.push(self.d_output);
        widths
    }

    /// Number of weights and biases.
    pub fn num_params(&self) -> usize {
        self.widths().windows(2).map(|w| w[0] * w[1] + w[1]).sum()
    }

    /// Builds the network with Burn's default (Kaiming-uniform) initialization.
    pub fn init(&self, device: &Device) -> Mlp {
        let layers = self
            .widths()
            .windows(2)
            .map(|w| LinearConfig::new(w[0], w[1]).init(device))
            .collect();
        Mlp {
            layers,
            activation: self.activation,
        }
    }
}

/// Dense layers with one activation between them; weights are stored `[d_in, d_out]`.
#[derive(Module, Debug)]
pub struct Mlp {
    pub layers: Vec<Linear>,
    #[module(skip)]
    pub activation: Activation,
}

impl Mlp {
    /// `[N, d_input] -> [N, d_output]`.
    pub fn forward(&self, input: Tensor<2>) -> Tensor<2> {
        let last = self.layers.len() - 1;
        let mut h = input;
        for (i, layer) in self.layers.iter().enumerate() {
            h = layer.forward(h);
            if i < last {
                h = self.activation.apply(h);
            }
        }
        h
    }
}

//! The latent Hamiltonian neural network (L-HNN) as a Burn module: a sine MLP on the phase point
//! `x = (q, p)` whose `m` latent outputs sum to a learned Hamiltonian `H_θ(q, p)`.
//!
//! Training matches `∂H_θ/∂x` to Hamilton's equations, so the loss needs the input gradient
//! inside a graph that is then differentiated with respect to `θ`. Burn has no double backward,
//! so [`LatentHnn::input_gradient`] is written out in closed form as ordinary forward tensor ops;
//! one first-order backward pass over `θ` then trains it.

use burn::config::Config;
use burn::module::{Module, Param};
use burn::nn::Linear;
use burn::tensor::{DType, Device, Tensor, TensorData};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Shape of an L-HNN (Dhulipala, Che & Shields 2023).
#[derive(Config, Debug)]
pub struct LatentHnnConfig {
    /// Position dimension `d`; the network reads the phase point `(q, p)`, `2d` inputs.
    pub dim: usize,
    /// Neurons per hidden layer.
    #[config(default = 100)]
    pub hidden_width: usize,
    /// Number of hidden layers, each `sin(x W + b)`.
    #[config(default = 3)]
    pub hidden_layers: usize,
    /// Number `m` of latent outputs whose sum is `H_θ`; `None` takes `m = d`.
    pub latent_outputs: Option<usize>,
}

/// A network shape [`LatentHnnConfig::validate`] refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LatentHnnConfigError {
    #[error("the L-HNN needs a position dimension of at least 1")]
    NoPosition,
    #[error(
        "the L-HNN needs at least one hidden layer of width at least 1, got {layers} layers of width {width}"
    )]
    NoHiddenLayer { layers: usize, width: usize },
    #[error("the L-HNN needs at least one latent output")]
    NoLatentOutput,
}

impl LatentHnnConfig {
    /// The number `m` of latent outputs.
    pub fn latent_count(&self) -> usize {
        self.latent_outputs.unwrap_or(self.dim)
    }

    /// Refuses shapes that cannot be built.
    pub fn validate(&self) -> Result<(), LatentHnnConfigError> {
        if self.dim == 0 {
            return Err(LatentHnnConfigError::NoPosition);
        }
        if self.hidden_width == 0 || self.hidden_layers == 0 {
            return Err(LatentHnnConfigError::NoHiddenLayer {
                layers: self.hidden_layers,
                width: self.hidden_width,
            });
        }
        if self.latent_count() == 0 {
            return Err(LatentHnnConfigError::NoLatentOutput);
        }
        Ok(())
    }

    /// Builds the network in float type `dtype`. Weights and biases are drawn from
    /// `U(±1/sqrt(fan_in))` (the distribution of Burn's default `Linear` init) by a ChaCha8
    /// generator seeded with `seed`, so the seed alone fixes the network on any device.
    ///
    /// # Panics
    /// When [`LatentHnnConfig::validate`] refuses the config.
    pub fn init(&self, device: &Device, dtype: DType, seed: u64) -> LatentHnn {
        if let Err(error) = self.validate() {
            panic!("invalid L-HNN config: {error}");
        }
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut inputs = 2 * self.dim;
        let mut hidden = Vec::with_capacity(self.hidden_layers);
        for _ in 0..self.hidden_layers {
            hidden.push(uniform_linear(
                inputs,
                self.hidden_width,
                true,
                &mut rng,
                device,
                dtype,
            ));
            inputs = self.hidden_width;
        }
        let output = uniform_linear(inputs, self.latent_count(), false, &mut rng, device, dtype);
        LatentHnn { hidden, output }
    }
}

/// A `Linear` in Burn's row layout (`weight: [inputs, outputs]`, `y = x W + b`) with
/// `U(±1/sqrt(inputs))` entries, weights first, then the bias.
fn uniform_linear(
    inputs: usize,
    outputs: usize,
    bias: bool,
    rng: &mut ChaCha8Rng,
    device: &Device,
    dtype: DType,
) -> Linear {
    let bound = 1.0 / (inputs as f64).sqrt();
    let mut draw =
        |len: usize| -> Vec<f64> { (0..len).map(|_| rng.random_range(-bound..bound)).collect() };
    let weight = tensor_of(draw(inputs * outputs), [inputs, outputs], device, dtype);
    let bias = bias.then(|| Param::from_tensor(tensor_of(draw(outputs), [outputs], device, dtype)));
    Linear {
        weight: Param::from_tensor(weight),
        bias,
    }
}

fn tensor_of<const D: usize>(
    values: Vec<f64>,
    shape: [usize; D],
    device: &Device,
    dtype: DType,
) -> Tensor<D> {
    Tensor::from_data(
        TensorData::new(values, shape).convert_dtype(dtype),
        (device, dtype),
    )
}

/// `H_θ(q, p) = Σ_k out_k`, `out = h_L W_out` (no bias: a constant shift of `H` is invisible to
/// its gradient), `h_l = sin(h_{l−1} W_l + b_l)`, `h_0 = (q, p)`.
#[derive(Module, Debug)]
pub struct LatentHnn {
    /// Sine layers, input side first; weights `[d_in, d_out]`.
    pub hidden: Vec<Linear>,
    /// The bias-free map to the `m` latent outputs, weight `[width, m]`.
    pub output: Linear,
}

impl LatentHnn {
    /// Position dimension `d` (half the input width).
    pub fn dim(&self) -> usize {
        let [inputs, _] = self.hidden[0].weight.shape().dims();
        inputs / 2
    }

    /// The `m` latent outputs, `[N, 2d] -> [N, m]`.
    pub fn latent(&self, x: Tensor<2>) -> Tensor<2> {
        let (_, top) = self.hidden_pass(x);
        self.output.forward(top)
    }

    /// `H_θ` for a batch of phase points, `[N, 2d] -> [N]`.
    pub fn hamiltonian(&self, x: Tensor<2>) -> Tensor<1> {
        let rows = x.dims()[0];
        self.latent(x).sum_dim(1).reshape([rows])
    }

    /// `∂H_θ/∂x`, `[N, 2d] -> [N, 2d]`: columns `0..d` are `∂H/∂q`, columns `d..2d` are `∂H/∂p`.
    ///
    /// Backpropagation by hand, as forward ops: `g = 1ᵀ W_outᵀ` (the row sums of `W_out`, the
    /// same for every row), then from the top layer down `g = (g ⊙ cos z_l) W_lᵀ` with
    /// `z_l = h_{l−1} W_l + b_l` the kept pre-activations.
    pub fn input_gradient(&self, x: Tensor<2>) -> Tensor<2> {
        let (pre_activations, _) = self.hidden_pass(x);
        // [1, width]; the first product broadcasts it over the batch.
        let mut g = self.output.weight.val().sum_dim(1).transpose();
        for (layer, z) in self.hidden.iter().zip(pre_activations).rev() {
            g = (g * z.cos()).matmul(layer.weight.val().transpose());
        }
        g
    }

    /// The pre-activations `z_l` of every hidden layer, and the top hidden output `h_L`.
    fn hidden_pass(&self, x: Tensor<2>) -> (Vec<Tensor<2>>, Tensor<2>) {
        let mut pre_activations = Vec::with_capacity(self.hidden.len());
        let mut h = x;
        for layer in &self.hidden {
            let z = layer.forward(h);
            h = z.clone().sin();
            pre_activations.push(z);
        }
        (pre_activations, h)
    }
}

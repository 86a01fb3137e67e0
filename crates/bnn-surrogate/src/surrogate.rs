//! A trained L-HNN as plain f64 arithmetic: the surrogate force a sampler calls once per leaf,
//! with no tensor or dispatch overhead, and a JSON-serializable form to save it in.

use crate::latent_hnn::LatentHnn;
use bnn_sampler::dynamics::surrogate::SurrogateGradient;
use bnn_sampler::LogDensityError;
use burn::nn::Linear;
use serde::{Deserialize, Serialize};

/// One dense layer, `y = x W + b`, with `W` row-major `[inputs, outputs]` (Burn's layout).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DenseLayer {
    pub inputs: usize,
    pub outputs: usize,
    pub weight: Vec<f64>,
    /// Empty for the bias-free output layer.
    pub bias: Vec<f64>,
}

impl DenseLayer {
    fn from_linear(linear: &Linear) -> Self {
        let [inputs, outputs] = linear.weight.shape().dims();
        let weight = linear.weight.val().into_data().iter::<f64>().collect();
        let bias = linear
            .bias
            .as_ref()
            .map(|b| b.val().into_data().iter::<f64>().collect())
            .unwrap_or_default();
        Self {
            inputs,
            outputs,
            weight,
            bias,
        }
    }

    /// Row `i` of `W`: the weights leaving input `i`.
    fn row(&self, i: usize) -> &[f64] {
        &self.weight[i * self.outputs..(i + 1) * self.outputs]
    }
}

/// The weights as saved: what deserialization checks before it builds an [`LhnnSurrogate`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct SavedWeights {
    dim: usize,
    hidden: Vec<DenseLayer>,
    output: DenseLayer,
}

/// Why saved weights do not make an [`LhnnSurrogate`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SurrogateWeightsError {
    #[error("an L-HNN needs a position dimension and at least one hidden layer")]
    NoLayers,
    #[error(
        "layer {layer} does not fit: {inputs} inputs (expected {expected_inputs}), {outputs} outputs, {weights} weights, {biases} biases (expected {expected_biases})"
    )]
    LayerMismatch {
        layer: usize,
        inputs: usize,
        expected_inputs: usize,
        outputs: usize,
        weights: usize,
        biases: usize,
        expected_biases: usize,
    },
}

impl SavedWeights {
    fn check(&self) -> Result<(), SurrogateWeightsError> {
        if self.dim == 0 || self.hidden.is_empty() {
            return Err(SurrogateWeightsError::NoLayers);
        }
        let mut inputs = 2 * self.dim;
        for (l, layer) in self.hidden.iter().chain([&self.output]).enumerate() {
            let bias = if l < self.hidden.len() {
                layer.outputs
            } else {
                0
            };
            if layer.inputs != inputs
                || layer.weight.len() != layer.inputs * layer.outputs
                || layer.bias.len() != bias
            {
                return Err(SurrogateWeightsError::LayerMismatch {
                    layer: l,
                    inputs: layer.inputs,
                    expected_inputs: inputs,
                    outputs: layer.outputs,
                    weights: layer.weight.len(),
                    biases: layer.bias.len(),
                    expected_biases: bias,
                });
            }
            inputs = layer.outputs;
        }
        Ok(())
    }
}

/// The learned Hamiltonian `H_θ(q, p)` and its gradient, evaluated in f64 from copied weights.
///
/// As a [`SurrogateGradient`] it supplies `∇ log p̃(q) = −∂H_θ/∂q` at `p = 0`: the gradient of
/// the one function `−H_θ(q, 0)` of the position, so the force is conservative, which exact
/// surrogate NUTS relies on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "SavedWeights", into = "SavedWeights")]
pub struct LhnnSurrogate {
    weights: SavedWeights,
    /// `∂H/∂h_L = 1ᵀ W_outᵀ`, the row sums of the output weights: the same at every input.
    top_gradient: Vec<f64>,
}

impl TryFrom<SavedWeights> for LhnnSurrogate {
    type Error = SurrogateWeightsError;
    fn try_from(weights: SavedWeights) -> Result<Self, SurrogateWeightsError> {
        weights.check()?;
        let output = &weights.output;
        let top_gradient = (0..output.inputs)
            .map(|i| output.row(i).iter().sum())
            .collect();
        Ok(Self {
            weights,
            top_gradient,
        })
    }
}

impl From<LhnnSurrogate> for SavedWeights {
    fn from(surrogate: LhnnSurrogate) -> Self {
        surrogate.weights
    }
}

/// Per-evaluation buffers: every hidden layer's `cos z_l` (what the backward pass needs of its
/// pre-activations), and one hidden output.
struct Scratch {
    cosines: Vec<Vec<f64>>,
    hidden: Vec<f64>,
    next: Vec<f64>,
}

impl LhnnSurrogate {
    /// Copies the weights out of a trained module (any float type, any device).
    pub fn from_module(network: &LatentHnn) -> Self {
        let weights = SavedWeights {
            dim: network.dim(),
            hidden: network.hidden.iter().map(DenseLayer::from_linear).collect(),
            output: DenseLayer::from_linear(&network.output),
        };
        Self::try_from(weights).expect("a LatentHnn's layers fit together")
    }

    /// Position dimension `d`.
    pub fn dim(&self) -> usize {
        self.weights.dim
    }

    /// The hidden layers, input side first.
    pub fn hidden_layers(&self) -> &[DenseLayer] {
        &self.weights.hidden
    }

    /// The bias-free output layer to the latent outputs.
    pub fn output_layer(&self) -> &DenseLayer {
        &self.weights.output
    }

    /// `H_θ(q, p)`.
    ///
    /// # Panics
    /// When `q` or `p` does not have `d` entries.
    pub fn hamiltonian(&self, q: &[f64], p: &[f64]) -> f64 {
        let mut scratch = self.scratch();
        self.forward(&self.phase_point(q, p), &mut scratch);
        // Σ_k Σ_i h_i W_ik = Σ_i h_i (row sum i).
        scratch
            .hidden
            .iter()
            .zip(&self.top_gradient)
            .map(|(h, w)| h * w)
            .sum()
    }

    /// Writes `∂H_θ/∂(q, p)` into `gradient` (`2d` entries: `∂H/∂q`, then `∂H/∂p`).
    ///
    /// # Panics
    /// When `q` or `p` does not have `d` entries or `gradient` not `2d`.
    pub fn input_gradient(&self, q: &[f64], p: &[f64], gradient: &mut [f64]) {
        assert_eq!(
            gradient.len(),
            2 * self.dim(),
            "the input gradient has 2d entries"
        );
        let mut scratch = self.scratch();
        self.forward(&self.phase_point(q, p), &mut scratch);
        self.backward(&mut scratch, gradient);
    }

    /// The first `gradient.len()` entries of `∂H_θ/∂x` at the input `x` (at most `2d` values,
    /// the rest taken as zero): for networks that read other inputs than a phase point, such as
    /// the pseudo-marginal study's per-subject potential, whose gradient is wanted only with
    /// respect to its leading inputs.
    ///
    /// # Panics
    /// When `x` or `gradient` has more than `2d` entries.
    pub fn input_gradient_prefix(&self, x: &[f64], gradient: &mut [f64]) {
        assert!(
            x.len() <= 2 * self.dim() && gradient.len() <= 2 * self.dim(),
            "the network reads {} inputs",
            2 * self.dim()
        );
        let mut scratch = self.scratch();
        self.forward(x, &mut scratch);
        self.backward(&mut scratch, gradient);
    }

    fn phase_point(&self, q: &[f64], p: &[f64]) -> Vec<f64> {
        let d = self.dim();
        assert!(
            q.len() == d && p.len() == d,
            "q and p need {d} entries each, got {} and {}",
            q.len(),
            p.len()
        );
        q.iter().chain(p).copied().collect()
    }

    fn scratch(&self) -> Scratch {
        let width = self
            .weights
            .hidden
            .iter()
            .map(|l| l.outputs)
            .max()
            .unwrap_or(0)
            .max(2 * self.dim());
        Scratch {
            cosines: self
                .weights
                .hidden
                .iter()
                .map(|l| vec![0.0; l.outputs])
                .collect(),
            hidden: Vec::with_capacity(width),
            next: Vec::with_capacity(width),
        }
    }

    /// Fills the cosines of the pre-activations and leaves the top hidden output in
    /// `scratch.hidden`. Inputs past `x.len()` count as zero (the force reads `(q, 0)` by
    /// passing `q` alone).
    fn forward(&self, x: &[f64], scratch: &mut Scratch) {
        let Scratch {
            cosines,
            hidden,
            next,
        } = scratch;
        hidden.clear();
        hidden.extend_from_slice(x);
        for (layer, cosine) in self.weights.hidden.iter().zip(cosines) {
            // z = b + Σ_i h_i W_i·, row by row so the inner loop runs over contiguous weights.
            next.clear();
            next.extend_from_slice(&layer.bias);
            for (i, &h) in hidden.iter().enumerate() {
                for (z, w) in next.iter_mut().zip(layer.row(i)) {
                    *z += h * w;
                }
            }
            hidden.clear();
            for (z, cosine) in next.iter().zip(cosine.iter_mut()) {
                let (sin, cos) = z.sin_cos();
                hidden.push(sin);
                *cosine = cos;
            }
        }
    }

    /// The first `gradient.len()` entries of `∂H/∂x`, from the cosines `forward` left.
    fn backward(&self, scratch: &mut Scratch, gradient: &mut [f64]) {
        let Scratch {
            cosines,
            hidden: g,
            next,
        } = scratch;
        g.clear();
        g.extend_from_slice(&self.top_gradient);
        for (l, (layer, cosine)) in self
            .weights
            .hidden
            .iter()
            .zip(cosines.iter())
            .enumerate()
            .rev()
        {
            for (g, cos) in g.iter_mut().zip(cosine) {
                *g *= cos;
            }
            // g_prev_i = Σ_j W_ij g_j: only the inputs asked for in the first layer.
            let wanted = if l == 0 { gradient.len() } else { layer.inputs };
            next.clear();
            next.extend((0..wanted).map(|i| dot(layer.row(i), g)));
            std::mem::swap(g, next);
        }
        gradient.copy_from_slice(g);
    }
}

/// `Σ a_k b_k` in eight independent partial sums, which the compiler can keep in vector
/// registers (one running sum would wait on each addition in turn).
fn dot(a: &[f64], b: &[f64]) -> f64 {
    const LANES: usize = 8;
    let (a_chunks, b_chunks) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let tail: f64 = a_chunks
        .remainder()
        .iter()
        .zip(b_chunks.remainder())
        .map(|(x, y)| x * y)
        .sum();
    let mut sums = [0.0; LANES];
    for (x, y) in a_chunks.zip(b_chunks) {
        for k in 0..LANES {
            sums[k] += x[k] * y[k];
        }
    }
    sums.iter().sum::<f64>() + tail
}

impl SurrogateGradient for LhnnSurrogate {
    fn dim(&self) -> usize {
        self.weights.dim
    }

    /// `∇ log p̃(q) = −∂H_θ/∂q (q, 0)` for each row.
    fn gradient(&self, positions: &[f64], gradients: &mut [f64]) -> Result<(), LogDensityError> {
        let d = self.dim();
        let chains = positions.len() / d;
        if chains * d != positions.len() || gradients.len() != positions.len() {
            return Err(LogDensityError::fatal(format!(
                "surrogate batch shapes disagree: {} position and {} gradient entries for dimension {d}",
                positions.len(),
                gradients.len()
            )));
        }
        let mut scratch = self.scratch();
        for (q, force) in positions.chunks_exact(d).zip(gradients.chunks_exact_mut(d)) {
            self.forward(q, &mut scratch);
            self.backward(&mut scratch, force);
            force.iter_mut().for_each(|f| *f = -*f);
        }
        Ok(())
    }
}

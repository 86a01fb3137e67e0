//! The fused pass: MLP forward, likelihood head, and backpropagation to every coordinate of θ.

use crate::activation;
pub use crate::base::KernelData;
use crate::base::{matmul_accumulate, Layout};
use crate::likelihood::{self, HeadInput};
use crate::narrow_layers;
use crate::one_hidden_layer;
use crate::real::Real;
use crate::spec::{KernelError, KernelHead, KernelLayer, KernelSpec};

/// Reusable buffers for one evaluation (pre- and post-activations of every layer, back-propagated
/// deltas). Keeping one per thread removes all allocation from the hot path.
#[derive(Debug, Default)]
pub struct Workspace<R> {
    pub(crate) pre: Vec<Vec<R>>,
    post: Vec<Vec<R>>,
    pub(crate) delta: Vec<R>,
    delta_below: Vec<R>,
    /// The one-hidden-layer pass's hidden activations (`[rows, padded H]`) and its padded
    /// parameters (hidden weights, biases, output weights by column).
    pub(crate) hidden_post: Vec<R>,
    pub(crate) output_columns: Vec<R>,
    /// The narrow-layer pass's feature-major buffers.
    pub(crate) narrow: narrow_layers::Buffers<R>,
}

impl<R: Real> Workspace<R> {
    fn prepare(&mut self, spec: &KernelSpec, rows: usize) {
        let layers = spec.layers.len();
        self.pre.resize_with(layers, Vec::new);
        self.post.resize_with(layers, Vec::new);
        for (l, layer) in spec.layers.iter().enumerate() {
            self.pre[l].resize(rows * layer.d_out, R::ZERO);
            self.post[l].resize(rows * layer.d_out, R::ZERO);
        }
        let widest = spec
            .layers
            .iter()
            .map(|l| l.d_out.max(l.d_in))
            .max()
            .unwrap_or(0);
        self.delta.resize(rows * widest, R::ZERO);
        self.delta_below.resize(rows * widest, R::ZERO);
        if one_hidden_layer::applies(spec) {
            one_hidden_layer::prepare(self, spec, rows);
        }
    }
}

/// A validated [`KernelSpec`], ready to evaluate.
#[derive(Debug, Clone)]
pub struct MlpKernel {
    spec: KernelSpec,
}

impl MlpKernel {
    pub fn new(spec: KernelSpec) -> Result<Self, KernelError> {
        spec.validate()?;
        Ok(Self { spec })
    }

    pub fn spec(&self) -> &KernelSpec {
        &self.spec
    }

    /// log p(y | x, θ_c) for each of the C vectors in `thetas` (`[C, D]` row major) into
    /// `values`, and, when `gradients` (`[C, D]`) is given, ∇_θ of each.
    ///
    /// Chains are evaluated one after another on the calling thread (deterministic whatever the
    /// thread count); coordinates of θ that the likelihood does not read get a zero gradient.
    pub fn evaluate<R: Real>(
        &self,
        data: KernelData<'_, R>,
        thetas: &[R],
        values: &mut [f64],
        gradients: Option<&mut [R]>,
        workspace: &mut Workspace<R>,
    ) -> Result<(), KernelError> {
        let spec = &self.spec;
        let (d, c) = (spec.dim, values.len());
        let fail = |m: String| Err(KernelError(m));
        if data.x.len() != data.rows * spec.d_input()
            || data.y.len() != data.rows * spec.target_columns
        {
            return fail(format!(
                "data of {} rows need x {} and y {} values, got {} and {}",
                data.rows,
                data.rows * spec.d_input(),
                data.rows * spec.target_columns,
                data.x.len(),
                data.y.len()
            ));
        }
        if thetas.len() != c * d || gradients.as_ref().is_some_and(|g| g.len() != c * d) {
            return fail(format!(
                "{c} chains in dimension {d} need {} values per buffer",
                c * d
            ));
        }
        workspace.prepare(spec, data.rows);
        crate::simd::dispatch!(evaluate_chains(
            spec, data, thetas, values, gradients, workspace
        ));
        Ok(())
    }
}

/// The chains one after another (shapes already checked).
#[inline(always)]
fn evaluate_chains<R: Real>(
    spec: &KernelSpec,
    data: KernelData<'_, R>,
    thetas: &[R],
    values: &mut [f64],
    mut gradients: Option<&mut [R]>,
    workspace: &mut Workspace<R>,
) {
    let d = spec.dim;
    for (chain, value) in values.iter_mut().enumerate() {
        let theta = &thetas[chain * d..(chain + 1) * d];
        let gradient = gradients
            .as_deref_mut()
            .map(|g| &mut g[chain * d..(chain + 1) * d]);
        *value = evaluate_one(spec, data, theta, gradient, workspace);
    }
}

/// One chain: forward, head, backward. Returns the log likelihood.
#[inline(always)]
fn evaluate_one<R: Real>(
    spec: &KernelSpec,
    data: KernelData<'_, R>,
    theta: &[R],
    gradient: Option<&mut [R]>,
    ws: &mut Workspace<R>,
) -> f64 {
    if one_hidden_layer::applies(spec) {
        one_hidden_layer::evaluate_one(spec, data, theta, gradient, ws)
    } else if narrow_layers::applies(spec) {
        narrow_layers::evaluate_one(spec, data, theta, gradient, ws)
    } else {
        evaluate_layers(spec, data, theta, gradient, ws)
    }
}

/// Any MLP, layer after layer: the matrix products go to `gemm` or, for unit dimensions, to
/// direct loops.
#[inline(always)]
fn evaluate_layers<R: Real>(
    spec: &KernelSpec,
    data: KernelData<'_, R>,
    theta: &[R],
    mut gradient: Option<&mut [R]>,
    ws: &mut Workspace<R>,
) -> f64 {
    let n = data.rows;
    let last = spec.layers.len() - 1;
    for (l, layer) in spec.layers.iter().enumerate() {
        let (below, rest) = ws.post.split_at_mut(l);
        let input: &[R] = if l == 0 { data.x } else { &below[l - 1] };
        let pre = &mut ws.pre[l];
        let bias = &theta[layer.bias_offset..layer.bias_offset + layer.d_out];
        let weight = &theta[layer.weight_offset..layer.weight_offset + layer.d_in * layer.d_out];
        if layer.d_in == 1 {
            // One input (the first layer of 1-d regression): pre = x ⊗ w + b in a single pass.
            for (row, &x) in pre.chunks_exact_mut(layer.d_out).zip(input) {
                activation::scaled_row_plus(row, x, weight, bias);
            }
        } else {
            // pre = input · W + b   ([n, d_in] · [d_in, d_out], all row major). The bias is
            // added after the product: copying it into every row first costs a memcpy per row.
            matmul_accumulate(
                pre,
                input,
                weight,
                n,
                layer.d_out,
                layer.d_in,
                Layout::row(layer.d_in),
                Layout::row(layer.d_out),
                false,
            );
            for row in pre.chunks_exact_mut(layer.d_out) {
                activation::add_row(row, bias);
            }
        }
        if l < last {
            activation::forward(spec.activation, pre, &mut rest[0]);
        }
    }
    let log_likelihood = apply_head(spec, data, theta, ws, gradient.as_deref_mut());
    let Some(gradient) = gradient else {
        return log_likelihood;
    };
    for l in (0..=last).rev() {
        let layer = spec.layers[l];
        // Below the output layer, the pass that made this delta (layer l + 1's) already summed
        // the bias gradient, and the weight gradient of a one-input layer.
        let bias_done = l < last;
        let weight_done = bias_done && layer.d_in == 1;
        let input: &[R] = if l == 0 { data.x } else { &ws.post[l - 1] };
        let delta = &ws.delta[..n * layer.d_out];
        if !weight_done {
            // ∂W = inputᵀ · delta   ([d_in, n] · [n, d_out])
            let weight_grad =
                &mut gradient[layer.weight_offset..layer.weight_offset + layer.d_in * layer.d_out];
            matmul_accumulate(
                weight_grad,
                input,
                delta,
                layer.d_in,
                layer.d_out,
                n,
                Layout::transposed(layer.d_in),
                Layout::row(layer.d_out),
                false,
            );
        }
        if !bias_done {
            // ∂b = column sums of delta
            let bias_grad = &mut gradient[layer.bias_offset..layer.bias_offset + layer.d_out];
            for row in delta.chunks_exact(layer.d_out) {
                activation::add_row(bias_grad, row);
            }
        }
        if l > 0 {
            // delta below = (delta · Wᵀ) ⊙ act'(pre below)   ([n, d_out] · [d_out, d_in])
            let weight =
                &theta[layer.weight_offset..layer.weight_offset + layer.d_in * layer.d_out];
            let below = &mut ws.delta_below[..n * layer.d_in];
            matmul_accumulate(
                below,
                delta,
                weight,
                n,
                layer.d_in,
                layer.d_out,
                Layout::row(layer.d_out),
                Layout::transposed(layer.d_out),
                false,
            );
            // The same pass sums the layer below's bias gradient, and its weight gradient when
            // that layer has one input (then ∂W = Σ_rows input_i · delta_i is a row update).
            let under = spec.layers[l - 1];
            let under_input: &[R] = if l == 1 { data.x } else { &ws.post[l - 2] };
            let (weight_grad, bias_grad) = split_weight_bias(gradient, under);
            let weight_grad = (under.d_in == 1).then_some((under_input, weight_grad));
            activation::backward_with_sums(
                spec.activation,
                &ws.pre[l - 1],
                &ws.post[l - 1],
                below,
                layer.d_in,
                bias_grad,
                weight_grad,
            );
            std::mem::swap(&mut ws.delta, &mut ws.delta_below);
        }
    }
    log_likelihood
}

/// The likelihood head on the last layer's outputs (`ws.pre[last]`, `[rows, outputs]`): the log
/// likelihood, and when a gradient buffer is given, the head's δ in `ws.delta` and the gradient
/// zeroed but for a learned log σ's coordinates, for the backward pass to fill.
#[inline(always)]
pub(crate) fn apply_head<R: Real>(
    spec: &KernelSpec,
    data: KernelData<'_, R>,
    theta: &[R],
    ws: &mut Workspace<R>,
    gradient: Option<&mut [R]>,
) -> f64 {
    let (n, k, last) = (data.rows, spec.d_output(), spec.layers.len() - 1);
    let log_sigma = match spec.head {
        KernelHead::LearnedSigma {
            log_sigma_offset, ..
        } => Some(&theta[log_sigma_offset..log_sigma_offset + spec.target_columns]),
        _ => None,
    };
    let head_input = HeadInput {
        outputs: &ws.pre[last][..n * k],
        targets: data.y,
        rows: n,
        outputs_per_row: k,
        target_columns: spec.target_columns,
        log_sigma,
    };
    let Some(gradient) = gradient else {
        return likelihood::evaluate(spec.head, &head_input, None).log_likelihood;
    };
    let head = likelihood::evaluate(spec.head, &head_input, Some(&mut ws.delta[..n * k]));
    gradient.fill(R::ZERO);
    if let KernelHead::LearnedSigma {
        log_sigma_offset, ..
    } = spec.head
    {
        for (g, &d) in gradient[log_sigma_offset..]
            .iter_mut()
            .zip(&head.d_log_sigma)
        {
            *g = R::from_f64(d);
        }
    }
    head.log_likelihood
}

/// The weight and bias gradient slices of `layer` inside one chain's gradient.
fn split_weight_bias<R>(gradient: &mut [R], layer: KernelLayer) -> (&mut [R], &mut [R]) {
    let (w_start, w_len) = (layer.weight_offset, layer.d_in * layer.d_out);
    let (b_start, b_len) = (layer.bias_offset, layer.d_out);
    if w_start < b_start {
        let (low, high) = gradient.split_at_mut(b_start);
        (&mut low[w_start..w_start + w_len], &mut high[..b_len])
    } else {
        let (low, high) = gradient.split_at_mut(w_start);
        (&mut high[..w_len], &mut low[b_start..b_start + b_len])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::KernelActivation;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    const ACTIVATIONS: [KernelActivation; 9] = [
        KernelActivation::Tanh,
        KernelActivation::Relu,
        KernelActivation::LeakyRelu { slope: 0.01 },
        KernelActivation::Sigmoid,
        KernelActivation::Silu,
        KernelActivation::Gelu,
        KernelActivation::Softplus,
        KernelActivation::TruncRelu,
        KernelActivation::Identity,
    ];

    fn heads() -> Vec<KernelHead> {
        vec![
            KernelHead::Heteroscedastic {
                softplus: false,
                sigma_min: 1e-6,
                sigma_max: 1e6,
            },
            KernelHead::Heteroscedastic {
                softplus: true,
                sigma_min: 1e-6,
                sigma_max: 1e6,
            },
            KernelHead::Fixed { sigma: 0.3 },
            KernelHead::LearnedSigma {
                log_sigma_offset: usize::MAX,
                prior_mean: 0.2,
                prior_sd: 0.7,
            },
            KernelHead::Categorical,
        ]
    }

    fn spec(
        widths: &[usize],
        activation: KernelActivation,
        head: KernelHead,
        targets: usize,
    ) -> KernelSpec {
        KernelSpec::dense(widths, activation, head, targets)
    }

    fn spec_for(head: KernelHead, activation: KernelActivation) -> KernelSpec {
        match head {
            KernelHead::Heteroscedastic { .. } => spec(&[3, 5, 4, 4], activation, head, 2),
            KernelHead::Categorical => spec(&[3, 6, 3], activation, head, 3),
            _ => spec(&[3, 5, 4, 2], activation, head, 2),
        }
    }

    /// A straightforward f64 evaluation of the same model, loop by loop.
    fn naive_log_likelihood(
        spec: &KernelSpec,
        x: &[f64],
        y: &[f64],
        rows: usize,
        theta: &[f64],
    ) -> f64 {
        let act = |a: f64| match spec.activation {
            KernelActivation::Tanh => a.tanh(),
            KernelActivation::Relu => a.max(0.0),
            KernelActivation::LeakyRelu { slope } => {
                if a > 0.0 {
                    a
                } else {
                    slope * a
                }
            }
            KernelActivation::Sigmoid => 1.0 / (1.0 + (-a).exp()),
            KernelActivation::Silu => a / (1.0 + (-a).exp()),
            KernelActivation::Gelu => a * 0.5 * libm::erfc(-a / std::f64::consts::SQRT_2),
            KernelActivation::Softplus => (1.0 + a.exp()).ln(),
            KernelActivation::TruncRelu => a.clamp(0.0, 1.0),
            KernelActivation::Identity => a,
        };
        let half_log_2pi = 0.5 * (2.0 * std::f64::consts::PI).ln();
        let mut total = 0.0;
        for i in 0..rows {
            let mut h: Vec<f64> = x[i * spec.d_input()..(i + 1) * spec.d_input()].to_vec();
            for (l, layer) in spec.layers.iter().enumerate() {
                let mut z = vec![0.0; layer.d_out];
                for j in 0..layer.d_out {
                    z[j] = theta[layer.bias_offset + j];
                    for (q, hq) in h.iter().enumerate() {
                        z[j] += hq * theta[layer.weight_offset + q * layer.d_out + j];
                    }
                }
                h = if l + 1 < spec.layers.len() {
                    z.iter().map(|&a| act(a)).collect()
                } else {
                    z
                };
            }
            let t = spec.target_columns;
            let yi = &y[i * t..(i + 1) * t];
            total += match spec.head {
                KernelHead::Heteroscedastic {
                    softplus,
                    sigma_min,
                    sigma_max,
                } => (0..t)
                    .map(|j| {
                        let sd = if softplus {
                            (1.0 + h[t + j].exp()).ln()
                        } else {
                            h[t + j].exp()
                        };
                        let sd = sd.clamp(sigma_min, sigma_max);
                        let z = (yi[j] - h[j]) / sd;
                        -0.5 * z * z - sd.ln() - half_log_2pi
                    })
                    .sum::<f64>(),
                KernelHead::Fixed { sigma } => (0..t)
                    .map(|j| -0.5 * ((yi[j] - h[j]) / sigma).powi(2) - sigma.ln() - half_log_2pi)
                    .sum(),
                KernelHead::LearnedSigma {
                    log_sigma_offset, ..
                } => (0..t)
                    .map(|j| {
                        let s = theta[log_sigma_offset + j];
                        -0.5 * ((yi[j] - h[j]) / s.exp()).powi(2) - s - half_log_2pi
                    })
                    .sum(),
                KernelHead::Categorical => {
                    let lse = h.iter().map(|v| v.exp()).sum::<f64>().ln();
                    (0..t).map(|j| yi[j] * (h[j] - lse)).sum()
                }
            };
        }
        if let KernelHead::LearnedSigma {
            log_sigma_offset,
            prior_mean,
            prior_sd,
        } = spec.head
        {
            for s in &theta[log_sigma_offset..log_sigma_offset + spec.target_columns] {
                let z = (s - prior_mean) / prior_sd;
                total += -0.5 * z * z - prior_sd.ln() - half_log_2pi;
            }
        }
        total
    }

    struct Problem {
        x: Vec<f64>,
        y: Vec<f64>,
        rows: usize,
        thetas: Vec<f64>,
        chains: usize,
    }

    fn problem(spec: &KernelSpec, rows: usize, chains: usize, seed: u64) -> Problem {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let x = (0..rows * spec.d_input())
            .map(|_| rng.random_range(-1.5..1.5))
            .collect();
        let t = spec.target_columns;
        let y = match spec.head {
            KernelHead::Categorical => (0..rows)
                .flat_map(|i| (0..t).map(move |c| if c == i % t { 1.0 } else { 0.0 }))
                .collect(),
            _ => (0..rows * t).map(|_| rng.random_range(-2.0..2.0)).collect(),
        };
        let thetas = (0..chains * spec.dim)
            .map(|_| rng.random_range(-0.9..0.9))
            .collect();
        Problem {
            x,
            y,
            rows,
            thetas,
            chains,
        }
    }

    fn run<R: Real>(spec: &KernelSpec, p: &Problem) -> (Vec<f64>, Vec<f64>) {
        let cast = |v: &[f64]| v.iter().map(|&a| R::from_f64(a)).collect::<Vec<R>>();
        let (x, y, thetas) = (cast(&p.x), cast(&p.y), cast(&p.thetas));
        let kernel = MlpKernel::new(spec.clone()).unwrap();
        let mut values = vec![0.0; p.chains];
        let mut grads = vec![R::ZERO; p.chains * spec.dim];
        let data = KernelData {
            x: &x,
            y: &y,
            rows: p.rows,
        };
        kernel
            .evaluate(
                data,
                &thetas,
                &mut values,
                Some(&mut grads),
                &mut Workspace::default(),
            )
            .unwrap();
        (values, grads.iter().map(|g| g.to_f64()).collect())
    }

    /// The f64 kernel's values against the naive evaluation (1e-10) and its gradients against
    /// central finite differences of it (1e-6), chain by chain.
    fn assert_matches_naive(spec: &KernelSpec, p: &Problem, what: &str) {
        let (values, grads) = run::<f64>(spec, p);
        let naive = |theta: &[f64]| naive_log_likelihood(spec, &p.x, &p.y, p.rows, theta);
        for c in 0..p.chains {
            let theta = &p.thetas[c * spec.dim..(c + 1) * spec.dim];
            let expected = naive(theta);
            assert!(
                (values[c] - expected).abs() <= 1e-10 * expected.abs().max(1.0),
                "{what}: {} vs {expected}",
                values[c]
            );
            for i in 0..spec.dim {
                let h = 1e-6;
                let (mut plus, mut minus) = (theta.to_vec(), theta.to_vec());
                plus[i] += h;
                minus[i] -= h;
                let fd = (naive(&plus) - naive(&minus)) / (2.0 * h);
                let g = grads[c * spec.dim + i];
                assert!(
                    (g - fd).abs() <= 1e-6 * fd.abs().max(1.0),
                    "{what} coordinate {i}: {g} vs {fd}"
                );
            }
        }
    }

    #[test]
    fn f64_kernel_matches_naive_value_and_finite_differences() {
        for head in heads() {
            for activation in ACTIVATIONS {
                let spec = spec_for(head, activation);
                assert_matches_naive(
                    &spec,
                    &problem(&spec, 17, 2, 7),
                    &format!("{head:?} {activation:?}"),
                );
            }
        }
    }

    #[test]
    fn one_input_and_one_unit_layers_match_naive_and_finite_differences() {
        // The fused passes for one-input layers (forward x ⊗ w + b; ∂W summed in the backward
        // pass of the layer above) and a hidden layer of width 1, for every activation.
        for head in heads() {
            let (out, targets) = match head {
                KernelHead::Heteroscedastic { .. } => (2, 1),
                KernelHead::Categorical => (3, 3),
                _ => (1, 1),
            };
            for activation in ACTIVATIONS {
                let spec = spec(&[1, 6, 1, 5, out], activation, head, targets);
                assert_matches_naive(
                    &spec,
                    &problem(&spec, 13, 2, 5),
                    &format!("{head:?} {activation:?} 1-6-1-5"),
                );
            }
        }
    }

    /// The one-hidden-layer pass's shapes: one input, hidden widths with and without a partial
    /// last block of 16, one output (fixed or learned σ) or two (heteroscedastic, two classes).
    fn one_hidden_specs(head: KernelHead, activation: KernelActivation) -> Vec<KernelSpec> {
        let (out, targets) = match head {
            KernelHead::Heteroscedastic { .. } => (2, 1),
            KernelHead::Categorical => (2, 2),
            _ => (1, 1),
        };
        [5, 16, 50]
            .iter()
            .map(|&width| spec(&[1, width, out], activation, head, targets))
            .collect()
    }

    #[test]
    fn one_hidden_layer_pass_matches_naive_and_finite_differences() {
        for head in heads() {
            for activation in ACTIVATIONS {
                for spec in one_hidden_specs(head, activation) {
                    assert!(crate::one_hidden_layer::applies(&spec));
                    let what = format!(
                        "{head:?} {activation:?} 1-{}-{}",
                        spec.layers[0].d_out, spec.layers[1].d_out
                    );
                    // Parameters scaled as 1/√width keep the log likelihood of a wide net near
                    // that of a narrow one (at -4e5 the finite differences' rounding, not the
                    // kernel, would set the error).
                    let mut p = problem(&spec, 19, 2, 9);
                    let scale = (5.0 / spec.layers[0].d_out as f64).sqrt();
                    p.thetas.iter_mut().for_each(|t| *t *= scale);
                    assert_matches_naive(&spec, &p, &what);
                }
            }
        }
    }

    #[test]
    fn one_hidden_layer_pass_agrees_with_the_general_pass_in_f32() {
        // With one output the one-hidden-layer pass sums the same products as the general
        // pass in another order (padded chunks, multiply-adds): equal to f32 rounding, value and
        // gradient, for every activation and hidden width.
        for head in [
            KernelHead::Fixed { sigma: 0.1 },
            KernelHead::LearnedSigma {
                log_sigma_offset: usize::MAX,
                prior_mean: 0.2,
                prior_sd: 0.7,
            },
        ] {
            for activation in ACTIVATIONS {
                for spec in one_hidden_specs(head, activation) {
                    let p = problem(&spec, 80, 3, 21);
                    let cast = |v: &[f64]| v.iter().map(|&a| a as f32).collect::<Vec<f32>>();
                    let (x, y, thetas) = (cast(&p.x), cast(&p.y), cast(&p.thetas));
                    let data = KernelData {
                        x: &x,
                        y: &y,
                        rows: p.rows,
                    };
                    let kernel = MlpKernel::new(spec.clone()).unwrap();
                    let mut fused = vec![0.0; p.chains];
                    let mut g_fused = vec![0.0f32; p.chains * spec.dim];
                    kernel
                        .evaluate(
                            data,
                            &thetas,
                            &mut fused,
                            Some(&mut g_fused),
                            &mut Workspace::default(),
                        )
                        .unwrap();
                    let mut ws = Workspace::default();
                    ws.prepare(&spec, p.rows);
                    let d = spec.dim;
                    for c in 0..p.chains {
                        let mut g = vec![0.0f32; d];
                        let value = evaluate_layers(
                            &spec,
                            data,
                            &thetas[c * d..(c + 1) * d],
                            Some(&mut g),
                            &mut ws,
                        );
                        let what = format!(
                            "{head:?} {activation:?} 1-{}-1 chain {c}",
                            spec.layers[0].d_out
                        );
                        assert!(
                            (value - fused[c]).abs() <= 1e-5 * value.abs().max(1.0),
                            "{what}: value {value} vs {}",
                            fused[c]
                        );
                        let scale = g.iter().fold(1.0f32, |m, v| m.max(v.abs()));
                        for (i, (a, b)) in g.iter().zip(&g_fused[c * d..(c + 1) * d]).enumerate() {
                            assert!(
                                (a - b).abs() <= 2e-5 * scale,
                                "{what} coordinate {i}: {a} vs {b}"
                            );
                        }
                    }
                }
            }
        }
    }

    /// The dispatched pass (`run`, f64) against the general pass called directly: values and
    /// gradients equal to rounding (the general pass sums products in gemm's order), and the
    /// value without a gradient equal to the bit.
    fn assert_general_pass_agrees(spec: &KernelSpec, p: &Problem, what: &str) {
        let (dispatched, g_dispatched) = run::<f64>(spec, p);
        let mut ws = Workspace::default();
        ws.prepare(spec, p.rows);
        let d = spec.dim;
        let data = KernelData {
            x: &p.x,
            y: &p.y,
            rows: p.rows,
        };
        let kernel = MlpKernel::new(spec.clone()).unwrap();
        for c in 0..p.chains {
            let theta = &p.thetas[c * d..(c + 1) * d];
            let mut g = vec![0.0; d];
            let value = evaluate_layers(spec, data, theta, Some(&mut g), &mut ws);
            let what = format!("{what} chain {c}");
            assert!(
                (value - dispatched[c]).abs() <= 1e-12 * value.abs().max(1.0),
                "{what}: {value} vs {}",
                dispatched[c]
            );
            let scale = g.iter().fold(1.0f64, |m, v| m.max(v.abs()));
            for (i, (a, b)) in g.iter().zip(&g_dispatched[c * d..(c + 1) * d]).enumerate() {
                assert!(
                    (a - b).abs() <= 1e-12 * scale,
                    "{what} coordinate {i}: {a} vs {b}"
                );
            }
            let mut value_only = [0.0];
            kernel
                .evaluate(
                    data,
                    theta,
                    &mut value_only,
                    None,
                    &mut Workspace::default(),
                )
                .unwrap();
            assert_eq!(
                value_only[0].to_bits(),
                dispatched[c].to_bits(),
                "{what}: value without gradient"
            );
        }
    }

    #[test]
    fn one_hidden_layer_pass_agrees_with_the_general_pass_with_two_outputs() {
        for head in [
            KernelHead::Heteroscedastic {
                softplus: false,
                sigma_min: 1e-6,
                sigma_max: 1e6,
            },
            KernelHead::Categorical,
        ] {
            for activation in ACTIVATIONS {
                for spec in one_hidden_specs(head, activation) {
                    let what = format!("{head:?} {activation:?} 1-{}-2", spec.layers[0].d_out);
                    assert_general_pass_agrees(&spec, &problem(&spec, 80, 2, 23), &what);
                }
            }
        }
    }

    #[test]
    fn narrow_layer_pass_agrees_with_the_general_pass() {
        // Every net with layers ≤ 64 wide goes to the feature-major pass (checked against the
        // naive evaluation above): widths that leave partial groups of four units, rows that
        // leave a partial block of 16 (or none), one and several target columns.
        for head in heads() {
            for activation in ACTIVATIONS {
                let (out, targets) = match head {
                    KernelHead::Heteroscedastic { .. } => (4, 2),
                    KernelHead::Categorical => (3, 3),
                    _ => (2, 2),
                };
                let mut specs = vec![
                    (spec(&[3, 7, 5, out], activation, head, targets), 37),
                    (spec(&[2, 13, out], activation, head, targets), 5),
                ];
                // Yacht's shape: one target column, which the heteroscedastic head reads in place.
                let (yacht_out, yacht_targets) = if out == 4 { (2, 1) } else { (out, targets) };
                specs.push((
                    spec(&[6, 16, 16, yacht_out], activation, head, yacht_targets),
                    16,
                ));
                for (spec, rows) in specs {
                    assert!(
                        crate::narrow_layers::applies(&spec)
                            && !crate::one_hidden_layer::applies(&spec)
                    );
                    let what = format!("{head:?} {activation:?} {:?} rows {rows}", spec.layers);
                    assert_general_pass_agrees(&spec, &problem(&spec, rows, 2, 31), &what);
                }
            }
        }
    }

    #[test]
    fn wide_nets_take_the_general_pass() {
        let spec = spec(
            &[3, 70, 5, 1],
            KernelActivation::Tanh,
            KernelHead::Fixed { sigma: 0.3 },
            1,
        );
        assert!(!crate::narrow_layers::applies(&spec) && !crate::one_hidden_layer::applies(&spec));
        let mut p = problem(&spec, 9, 1, 4);
        p.thetas.iter_mut().for_each(|t| *t *= 0.3);
        assert_matches_naive(&spec, &p, "3-70-5-1 tanh");
    }

    #[test]
    fn f32_kernel_agrees_with_f64_to_1e5() {
        for head in heads() {
            for activation in ACTIVATIONS {
                let spec = spec_for(head, activation);
                let p = problem(&spec, 200, 3, 11);
                let (v64, g64) = run::<f64>(&spec, &p);
                // The reference sees the same f32-rounded inputs as the f32 kernel.
                let rounded = |v: &[f64]| v.iter().map(|&a| a as f32 as f64).collect::<Vec<_>>();
                let p32 = Problem {
                    x: rounded(&p.x),
                    y: rounded(&p.y),
                    thetas: rounded(&p.thetas),
                    ..p
                };
                let (v64r, g64r) = run::<f64>(&spec, &p32);
                let (v32, g32) = run::<f32>(&spec, &p32);
                assert_eq!(v64.len(), v32.len());
                for c in 0..p32.chains {
                    let rel = ((v32[c] - v64r[c]) / v64r[c]).abs();
                    assert!(rel < 1e-5, "{head:?} {activation:?} value rel err {rel}");
                    let g = &g32[c * spec.dim..(c + 1) * spec.dim];
                    let r = &g64r[c * spec.dim..(c + 1) * spec.dim];
                    let scale = r.iter().fold(0.0f64, |m, v| m.max(v.abs()));
                    let worst = g
                        .iter()
                        .zip(r)
                        .fold(0.0f64, |m, (a, b)| m.max((a - b).abs()));
                    assert!(
                        worst <= 1e-5 * scale,
                        "{head:?} {activation:?} gradient max err {worst} (scale {scale})"
                    );
                }
                let _ = (v64, g64);
            }
        }
    }

    #[test]
    fn every_instruction_set_gives_the_same_bits() {
        // The dispatched kernel (AVX2 + FMA or AVX-512 on x86-64 machines that have them)
        // against the same code compiled for the baseline target, called directly: the fused
        // multiply-adds are explicit, so both must agree to the last bit, activation by
        // activation and head by head, in f32 (the sampling precision).
        for head in heads() {
            for activation in ACTIVATIONS {
                // Widths of 20 and 17 leave vector tails on every level; the one-hidden-layer
                // pass has its own loops.
                let deep = match head {
                    KernelHead::Heteroscedastic { .. } => {
                        spec(&[3, 20, 17, 4], activation, head, 2)
                    }
                    KernelHead::Categorical => spec(&[3, 20, 17, 3], activation, head, 3),
                    _ => spec(&[3, 20, 17, 2], activation, head, 2),
                };
                // 70 units: the general (gemm) pass; 20-17: the narrow-layer pass.
                let wide = match head {
                    KernelHead::Heteroscedastic { .. } => spec(&[3, 70, 4], activation, head, 2),
                    KernelHead::Categorical => spec(&[3, 70, 3], activation, head, 3),
                    _ => spec(&[3, 70, 2], activation, head, 2),
                };
                for spec in [deep, wide]
                    .into_iter()
                    .chain(one_hidden_specs(head, activation))
                {
                    let p = problem(&spec, 61, 3, 11);
                    let cast = |v: &[f64]| v.iter().map(|&a| a as f32).collect::<Vec<f32>>();
                    let (x, y, thetas) = (cast(&p.x), cast(&p.y), cast(&p.thetas));
                    let data = KernelData {
                        x: &x,
                        y: &y,
                        rows: p.rows,
                    };
                    let kernel = MlpKernel::new(spec.clone()).unwrap();
                    let (mut dispatched, mut baseline) = (vec![0.0; p.chains], vec![0.0; p.chains]);
                    let (mut g_dispatched, mut g_baseline) = (
                        vec![0.0f32; p.chains * spec.dim],
                        vec![0.0f32; p.chains * spec.dim],
                    );
                    kernel
                        .evaluate(
                            data,
                            &thetas,
                            &mut dispatched,
                            Some(&mut g_dispatched),
                            &mut Workspace::default(),
                        )
                        .unwrap();
                    let mut ws = Workspace::default();
                    ws.prepare(&spec, p.rows);
                    evaluate_chains(
                        &spec,
                        data,
                        &thetas,
                        &mut baseline,
                        Some(&mut g_baseline),
                        &mut ws,
                    );
                    let what = format!("{activation:?} {head:?} at {}", crate::instruction_set());
                    assert_eq!(
                        dispatched.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                        baseline.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                        "{what}: values"
                    );
                    assert_eq!(
                        g_dispatched.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                        g_baseline.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                        "{what}: gradients"
                    );
                }
            }
        }
    }

    #[test]
    fn value_only_matches_value_with_gradient() {
        for spec in [
            spec_for(KernelHead::Fixed { sigma: 0.1 }, KernelActivation::Sigmoid),
            spec(
                &[1, 50, 1],
                KernelActivation::Sigmoid,
                KernelHead::Fixed { sigma: 0.1 },
                1,
            ),
        ] {
            let p = problem(&spec, 30, 2, 3);
            let kernel = MlpKernel::new(spec.clone()).unwrap();
            let x: Vec<f32> = p.x.iter().map(|&v| v as f32).collect();
            let y: Vec<f32> = p.y.iter().map(|&v| v as f32).collect();
            let th: Vec<f32> = p.thetas.iter().map(|&v| v as f32).collect();
            let data = KernelData {
                x: &x,
                y: &y,
                rows: p.rows,
            };
            let mut ws = Workspace::default();
            let mut a = vec![0.0; 2];
            let mut b = vec![0.0; 2];
            let mut g = vec![0.0f32; 2 * spec.dim];
            kernel.evaluate(data, &th, &mut a, None, &mut ws).unwrap();
            kernel
                .evaluate(data, &th, &mut b, Some(&mut g), &mut ws)
                .unwrap();
            assert_eq!(a, b);
        }
    }

    #[test]
    fn small_shape_products_match_a_naive_product() {
        // Every unit-dimension shape the layers produce, in both operand layouts, accumulating
        // or not, against a plain triple loop in f64.
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        for &(m, n, k) in &[
            (80, 50, 1),
            (80, 1, 50),
            (50, 1, 80),
            (1, 50, 80),
            (1, 1, 37),
            (3, 1, 1),
            (1, 7, 1),
            (33, 1, 40),
        ] {
            for lhs_t in [false, true] {
                for rhs_t in [false, true] {
                    for accumulate in [false, true] {
                        let lhs: Vec<f64> =
                            (0..m * k).map(|_| rng.random_range(-1.0..1.0)).collect();
                        let rhs: Vec<f64> =
                            (0..k * n).map(|_| rng.random_range(-1.0..1.0)).collect();
                        let start: Vec<f64> =
                            (0..m * n).map(|_| rng.random_range(-1.0..1.0)).collect();
                        let (ll, rl) = (
                            if lhs_t {
                                Layout::transposed(m)
                            } else {
                                Layout::row(k)
                            },
                            if rhs_t {
                                Layout::transposed(k)
                            } else {
                                Layout::row(n)
                            },
                        );
                        let get = |v: &[f64], l: Layout, r: usize, c: usize| {
                            v[r * l.row_stride as usize + c * l.col_stride as usize]
                        };
                        let mut got = start.clone();
                        matmul_accumulate(&mut got, &lhs, &rhs, m, n, k, ll, rl, accumulate);
                        for i in 0..m {
                            for j in 0..n {
                                let mut want = if accumulate { start[i * n + j] } else { 0.0 };
                                for p in 0..k {
                                    want += get(&lhs, ll, i, p) * get(&rhs, rl, p, j);
                                }
                                let g = got[i * n + j];
                                assert!((g - want).abs() < 1e-12, "{m}x{n}x{k} lhsᵀ {lhs_t} rhsᵀ {rhs_t} acc {accumulate}: {g} vs {want}");
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn wrong_shapes_are_errors_not_panics() {
        let spec = spec_for(KernelHead::Fixed { sigma: 0.1 }, KernelActivation::Tanh);
        let kernel = MlpKernel::new(spec.clone()).unwrap();
        let x = vec![0.0f32; 6];
        let y = vec![0.0f32; 4];
        let data = KernelData {
            x: &x,
            y: &y,
            rows: 2,
        };
        let mut values = vec![0.0; 1];
        let err = kernel.evaluate(
            data,
            &vec![0.0f32; spec.dim + 1],
            &mut values,
            None,
            &mut Workspace::default(),
        );
        assert!(err.is_err());
        let bad = KernelData {
            x: &x[..5],
            y: &y,
            rows: 2,
        };
        assert!(kernel
            .evaluate(
                bad,
                &vec![0.0f32; spec.dim],
                &mut values,
                None,
                &mut Workspace::default()
            )
            .is_err());
        let mut broken = spec.clone();
        broken.layers[1].d_in += 1;
        assert!(MlpKernel::new(broken).is_err());
    }
}

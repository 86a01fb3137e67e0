//! The network's output Jacobian and the Bayesian Gauss–Newton metric of Zlochin & Baram's
//! manifold stochastic dynamics, `G(θ) = Σ_n J_nᵀ Λ_n J_n + P`, in f64 on the host.
//!
//! `J_n` is the Jacobian of the network outputs at input row `n` with respect to θ, `Λ_n` the
//! Fisher information of the likelihood head with respect to those outputs (for a Gaussian with
//! fixed σ, `1/σ²` per output: the paper's `β JᵀJ`; generalized Gauss–Newton for the other
//! heads), and `P` the prior precision (diagonal). Unlike the Hessian of the log posterior it is
//! positive (semi)definite everywhere, which is what a Riemannian metric must be; for a network
//! without hidden layers and a Gaussian head it *is* that Hessian.
//!
//! The Jacobian comes from one reverse pass per output and row through the same layer shapes
//! and activations as the fused kernel, in f64 with the exact activation functions (the fused
//! kernel's f32 approximations would leave the metric's derivatives noisy). The cost is
//! `N·K` passes of `O(D)` plus `O(N·K·D²)` for the products: for the small networks where a dense
//! metric is affordable (robot arm: D = 82, N·K = 400) it is milliseconds.
//!
//! For the exact (generalized leapfrog) integrator, [`riemannian_terms`] also gives the gradient
//! of `½ log det G + ½ pᵀG⁻¹p`, built from exact Hessian-vector products of the outputs
//! (Pearlmutter's R-operator through the same forward and reverse pass).

use crate::cholesky::Cholesky;
use crate::spec::{KernelActivation, KernelHead, KernelSpec};

/// The network outputs and their Jacobian at every input row.
#[derive(Debug, Clone, PartialEq)]
pub struct OutputJacobian {
    pub rows: usize,
    /// Output units per row (`K`: targets, twice that for a heteroscedastic head, classes).
    pub outputs: usize,
    /// Length of θ.
    pub dim: usize,
    /// `[rows, outputs]`, row major.
    pub values: Vec<f64>,
    /// `[rows, outputs, dim]`: `∂ output_k(x_n) / ∂θ_i` at `(n, k, i)`.
    pub jacobian: Vec<f64>,
}

impl OutputJacobian {
    /// `∂ output_k(x_n) / ∂θ`, a slice of length `dim`.
    pub fn row(&self, n: usize, k: usize) -> &[f64] {
        let start = (n * self.outputs + k) * self.dim;
        &self.jacobian[start..start + self.dim]
    }
}

/// The activation and its first two derivatives, in f64 (the definitions of the fused kernel;
/// at a kink the first derivative is the kernel's: 0 for ReLU at 0, the slope for leaky ReLU;
/// the piecewise linear ones have no curvature).
fn activate(activation: KernelActivation, a: f64) -> (f64, f64, f64) {
    match activation {
        KernelActivation::Tanh => {
            let h = a.tanh();
            let slope = 1.0 - h * h;
            (h, slope, -2.0 * h * slope)
        }
        KernelActivation::Relu => (a.max(0.0), if a > 0.0 { 1.0 } else { 0.0 }, 0.0),
        KernelActivation::LeakyRelu { slope } => {
            if a > 0.0 {
                (a, 1.0, 0.0)
            } else {
                (slope * a, slope, 0.0)
            }
        }
        KernelActivation::Sigmoid => {
            let s = 1.0 / (1.0 + (-a).exp());
            (s, s * (1.0 - s), s * (1.0 - s) * (1.0 - 2.0 * s))
        }
        KernelActivation::Silu => {
            let s = 1.0 / (1.0 + (-a).exp());
            (a * s, s * (1.0 + a * (1.0 - s)), s * (1.0 - s) * (2.0 + a * (1.0 - 2.0 * s)))
        }
        KernelActivation::TruncRelu => (a.clamp(0.0, 1.0), if a > 0.0 && a < 1.0 { 1.0 } else { 0.0 }, 0.0),
        KernelActivation::Identity => (a, 1.0, 0.0),
    }
}

/// One input row through the network: each layer's input and, for hidden layers, the
/// activation's first and second derivative at the pre-activation.
struct RowPass {
    inputs: Vec<Vec<f64>>,
    slopes: Vec<Vec<f64>>,
    curvatures: Vec<Vec<f64>>,
    outputs: Vec<f64>,
}

impl RowPass {
    fn new(spec: &KernelSpec) -> Self {
        Self {
            inputs: spec.layers.iter().map(|l| vec![0.0; l.d_in]).collect(),
            slopes: spec.layers.iter().map(|l| vec![0.0; l.d_out]).collect(),
            curvatures: spec.layers.iter().map(|l| vec![0.0; l.d_out]).collect(),
            outputs: vec![0.0; spec.layers.last().map_or(0, |l| l.d_out)],
        }
    }

    fn forward(&mut self, spec: &KernelSpec, x_row: &[f64], theta: &[f64]) {
        self.inputs[0].copy_from_slice(x_row);
        let depth = spec.layers.len();
        for (l, layer) in spec.layers.iter().enumerate() {
            let mut pre = theta[layer.bias_offset..layer.bias_offset + layer.d_out].to_vec();
            for (i, &input) in self.inputs[l].iter().enumerate() {
                let start = layer.weight_offset + i * layer.d_out;
                for (p, &w) in pre.iter_mut().zip(&theta[start..start + layer.d_out]) {
                    *p += input * w;
                }
            }
            if l + 1 < depth {
                for (j, &a) in pre.iter().enumerate() {
                    let (h, slope, curvature) = activate(spec.activation, a);
                    self.inputs[l + 1][j] = h;
                    self.slopes[l][j] = slope;
                    self.curvatures[l][j] = curvature;
                }
            } else {
                self.outputs.copy_from_slice(&pre);
            }
        }
    }

    /// `∇_θ output_k` into `row` (length D; a learned log σ's entry is left alone).
    fn output_gradient(&self, spec: &KernelSpec, theta: &[f64], k: usize, row: &mut [f64]) {
        let mut delta = vec![0.0; self.outputs.len()];
        delta[k] = 1.0;
        for (l, layer) in spec.layers.iter().enumerate().rev() {
            // ∂/∂W[i, j] = input_i δ_j, ∂/∂b_j = δ_j.
            for (i, &input) in self.inputs[l].iter().enumerate() {
                let start = layer.weight_offset + i * layer.d_out;
                for (g, &d) in row[start..start + layer.d_out].iter_mut().zip(&delta) {
                    *g = input * d;
                }
            }
            row[layer.bias_offset..layer.bias_offset + layer.d_out].copy_from_slice(&delta);
            if l == 0 {
                break;
            }
            delta = (0..layer.d_in)
                .map(|i| {
                    let start = layer.weight_offset + i * layer.d_out;
                    theta[start..start + layer.d_out].iter().zip(&delta).map(|(w, d)| w * d).sum::<f64>() * self.slopes[l - 1][i]
                })
                .collect();
        }
    }

    /// `H_k v`: the Hessian of output `k` (in θ) times `direction`, exactly, by differentiating
    /// the forward and the reverse pass along `direction` (Pearlmutter 1994's R-operator).
    fn output_hessian_times(&self, spec: &KernelSpec, theta: &[f64], k: usize, direction: &[f64]) -> Vec<f64> {
        let depth = spec.layers.len();
        // Forward: R(pre_l) = dW_l·input_l + W_l·R(input_l) + db_l, R(input_{l+1}) = σ'·R(pre_l).
        let mut r_inputs: Vec<Vec<f64>> = spec.layers.iter().map(|l| vec![0.0; l.d_in]).collect();
        let mut r_pre: Vec<Vec<f64>> = Vec::with_capacity(depth);
        for (l, layer) in spec.layers.iter().enumerate() {
            let mut r = direction[layer.bias_offset..layer.bias_offset + layer.d_out].to_vec();
            for i in 0..layer.d_in {
                let start = layer.weight_offset + i * layer.d_out;
                let (input, r_input) = (self.inputs[l][i], r_inputs[l][i]);
                for ((rj, &dw), &w) in r.iter_mut().zip(&direction[start..start + layer.d_out]).zip(&theta[start..start + layer.d_out]) {
                    *rj += dw * input + w * r_input;
                }
            }
            if l + 1 < depth {
                for (j, &rj) in r.iter().enumerate() {
                    r_inputs[l + 1][j] = self.slopes[l][j] * rj;
                }
            }
            r_pre.push(r);
        }
        // Reverse: the gradient's pieces and their R-derivatives, output layer first.
        let mut hv = vec![0.0; theta.len()];
        let mut delta = vec![0.0; self.outputs.len()];
        delta[k] = 1.0;
        let mut r_delta = vec![0.0; self.outputs.len()];
        for (l, layer) in spec.layers.iter().enumerate().rev() {
            for i in 0..layer.d_in {
                let start = layer.weight_offset + i * layer.d_out;
                let (input, r_input) = (self.inputs[l][i], r_inputs[l][i]);
                for ((h, &d), &rd) in hv[start..start + layer.d_out].iter_mut().zip(&delta).zip(&r_delta) {
                    *h = r_input * d + input * rd;
                }
            }
            hv[layer.bias_offset..layer.bias_offset + layer.d_out].copy_from_slice(&r_delta);
            if l == 0 {
                break;
            }
            let mut below = vec![0.0; layer.d_in];
            let mut r_below = vec![0.0; layer.d_in];
            for i in 0..layer.d_in {
                let start = layer.weight_offset + i * layer.d_out;
                let (w, dw) = (&theta[start..start + layer.d_out], &direction[start..start + layer.d_out]);
                let back: f64 = w.iter().zip(&delta).map(|(w, d)| w * d).sum();
                let r_back: f64 = dw.iter().zip(&delta).map(|(dw, d)| dw * d).sum::<f64>()
                    + w.iter().zip(&r_delta).map(|(w, rd)| w * rd).sum::<f64>();
                below[i] = back * self.slopes[l - 1][i];
                r_below[i] = r_back * self.slopes[l - 1][i] + back * self.curvatures[l - 1][i] * r_pre[l - 1][i];
            }
            delta = below;
            r_delta = r_below;
        }
        hv
    }
}

/// Outputs and output Jacobian of the MLP `spec` with parameters `theta` at the rows of `x`
/// (`[rows, d_in]`, row major). A learned log σ in θ gets zero columns (no output depends on it).
///
/// # Panics
/// If `theta` or `x` do not have the lengths `spec` implies.
pub fn output_jacobian(spec: &KernelSpec, x: &[f64], theta: &[f64]) -> OutputJacobian {
    let (rows, d_in, outputs) = check_shapes(spec, x, theta);
    let mut values = vec![0.0; rows * outputs];
    let mut jacobian = vec![0.0; rows * outputs * spec.dim];
    let mut pass = RowPass::new(spec);
    for n in 0..rows {
        pass.forward(spec, &x[n * d_in..(n + 1) * d_in], theta);
        values[n * outputs..(n + 1) * outputs].copy_from_slice(&pass.outputs);
        for k in 0..outputs {
            let row = &mut jacobian[(n * outputs + k) * spec.dim..(n * outputs + k + 1) * spec.dim];
            pass.output_gradient(spec, theta, k, row);
        }
    }
    OutputJacobian { rows, outputs, dim: spec.dim, values, jacobian }
}

/// `(rows, d_in, outputs)` of `x` under `spec`, after checking the lengths.
fn check_shapes(spec: &KernelSpec, x: &[f64], theta: &[f64]) -> (usize, usize, usize) {
    assert_eq!(theta.len(), spec.dim, "θ has {} values, the spec {}", theta.len(), spec.dim);
    let d_in = spec.layers.first().map_or(0, |l| l.d_in);
    let outputs = spec.layers.last().map_or(0, |l| l.d_out);
    assert!(d_in > 0 && x.len() % d_in == 0, "x has {} values, not rows of {d_in}", x.len());
    (x.len() / d_in, d_in, outputs)
}

/// `U(θ) = Σ_{n,k} (y_nk − f_k(x_n))² / 2σ² + ½ Σ_i P_i θ_i²` (the negative log posterior of the
/// fixed-σ Gaussian head under Normal priors, up to its constant) and `∇U`, in f64: the
/// potential that goes with [`riemannian_terms`]. `y` is `[rows, outputs]`.
pub fn gaussian_potential(spec: &KernelSpec, x: &[f64], y: &[f64], theta: &[f64], prior_precision: &[f64]) -> Result<(f64, Vec<f64>), String> {
    let KernelHead::Fixed { sigma } = spec.head else {
        return Err(format!("the f64 potential is implemented for the fixed-σ Gaussian head, not {:?}", spec.head));
    };
    let (rows, d_in, outputs) = check_shapes(spec, x, theta);
    if y.len() != rows * outputs {
        return Err(format!("{} target values for {rows} rows × {outputs} outputs", y.len()));
    }
    let precision = 1.0 / (sigma * sigma);
    let mut potential = 0.0;
    let mut gradient: Vec<f64> = theta.iter().zip(prior_precision).map(|(t, p)| p * t).collect();
    potential += 0.5 * theta.iter().zip(prior_precision).map(|(t, p)| p * t * t).sum::<f64>();
    let mut pass = RowPass::new(spec);
    let mut row_gradient = vec![0.0; spec.dim];
    for n in 0..rows {
        pass.forward(spec, &x[n * d_in..(n + 1) * d_in], theta);
        for k in 0..outputs {
            let residual = y[n * outputs + k] - pass.outputs[k];
            potential += 0.5 * precision * residual * residual;
            pass.output_gradient(spec, theta, k, &mut row_gradient);
            for (g, j) in gradient.iter_mut().zip(&row_gradient) {
                *g -= precision * residual * j;
            }
        }
    }
    Ok((potential, gradient))
}

/// What a Riemannian sampler needs of the position-dependent part of its Hamiltonian,
/// `φ(θ, p) = ½ log det G(θ) + ½ pᵀ G(θ)⁻¹ p`, at one point.
#[derive(Clone, Debug, PartialEq)]
pub struct RiemannianTerms {
    /// `G(θ)` factored.
    pub metric: Cholesky,
    /// `G⁻¹ p`.
    pub velocity: Vec<f64>,
    /// `½ pᵀ G⁻¹ p`.
    pub kinetic_energy: f64,
    /// `∇_θ φ`: `½ tr(G⁻¹ ∂_i G) − ½ uᵀ ∂_i G u` with `u = G⁻¹p`.
    pub gradient: Vec<f64>,
}

/// `G(θ)` and `∇_θ φ` for a Gaussian head with fixed σ, where `G = λ Σ_{n,k} J_nk J_nkᵀ + P`
/// with `λ = 1/σ²` constant: then `∂_i G = λ Σ (H_nk[:, i] J_nkᵀ + J_nk H_nk[i, :])` with `H_nk`
/// the Hessian of output `k` at row `n`, and
/// `∇φ = λ Σ_{n,k} H_nk (G⁻¹ J_nk − (J_nk·u) u)`: one exact Hessian-vector product per row and
/// output, `O(N·K·D²)` in all with the solves. Other heads' Fisher information moves with θ
/// (terms not implemented yet): an error says so, as does a metric that is not positive definite.
pub fn riemannian_terms(
    spec: &KernelSpec,
    x: &[f64],
    theta: &[f64],
    prior_precision: &[f64],
    momentum: &[f64],
) -> Result<RiemannianTerms, String> {
    let KernelHead::Fixed { sigma } = spec.head else {
        return Err(format!("the metric's derivatives are implemented for the fixed-σ Gaussian head, not {:?}", spec.head));
    };
    let lambda = 1.0 / (sigma * sigma);
    let dim = spec.dim;
    let jac = output_jacobian(spec, x, theta);
    let metric = Cholesky::new(&gauss_newton_metric(spec, x, theta, prior_precision), dim).map_err(|e| e.to_string())?;
    let mut velocity = vec![0.0; dim];
    metric.solve(momentum, &mut velocity);
    let kinetic_energy = 0.5 * momentum.iter().zip(&velocity).map(|(p, u)| p * u).sum::<f64>();
    let mut gradient = vec![0.0; dim];
    let (_, d_in, _) = check_shapes(spec, x, theta);
    let mut pass = RowPass::new(spec);
    let mut direction = vec![0.0; dim];
    for n in 0..jac.rows {
        pass.forward(spec, &x[n * d_in..(n + 1) * d_in], theta);
        for k in 0..jac.outputs {
            let j_nk = jac.row(n, k);
            metric.solve(j_nk, &mut direction);
            let along: f64 = j_nk.iter().zip(&velocity).map(|(j, u)| j * u).sum();
            for (d, u) in direction.iter_mut().zip(&velocity) {
                *d -= along * u;
            }
            for (g, h) in gradient.iter_mut().zip(pass.output_hessian_times(spec, theta, k, &direction)) {
                *g += lambda * h;
            }
        }
    }
    Ok(RiemannianTerms { metric, velocity, kinetic_energy, gradient })
}

/// The Fisher information of the likelihood head with respect to one row's outputs, as the
/// weights of `Σ_k w_k J_k J_kᵀ − u uᵀ` with `u = Σ_k c_k J_k` (the categorical head's
/// `diag(p) − p pᵀ`; the Gaussian heads have `c = 0`).
struct OutputFisher {
    diagonal: Vec<f64>,
    rank_one: Option<Vec<f64>>,
}

/// `Λ_n` for row `n` of `values` (`[rows, outputs]`).
fn output_fisher(head: KernelHead, targets: usize, outputs: &[f64], log_sigma: Option<f64>) -> OutputFisher {
    match head {
        KernelHead::Fixed { sigma } => OutputFisher { diagonal: vec![1.0 / (sigma * sigma); outputs.len()], rank_one: None },
        KernelHead::LearnedSigma { .. } => {
            let precision = (-2.0 * log_sigma.unwrap_or(0.0)).exp();
            OutputFisher { diagonal: vec![precision; outputs.len()], rank_one: None }
        }
        KernelHead::Heteroscedastic { softplus, sigma_min, sigma_max } => {
            // y ~ N(μ, σ²): Fisher 1/σ² for μ and 2 for log σ, times (d log σ / d raw)².
            let mut diagonal = vec![0.0; 2 * targets];
            for t in 0..targets {
                let raw = outputs[targets + t];
                let (log_sd, d_log_sd) = if softplus {
                    let softplus_value = raw.max(0.0) + (-raw.abs()).exp().ln_1p();
                    let inside = softplus_value >= sigma_min && softplus_value <= sigma_max;
                    let sd = softplus_value.clamp(sigma_min, sigma_max);
                    (sd.ln(), if inside { 1.0 / (1.0 + (-raw).exp()) / sd } else { 0.0 })
                } else {
                    let (lo, hi) = (sigma_min.ln(), sigma_max.ln());
                    (raw.clamp(lo, hi), if raw >= lo && raw <= hi { 1.0 } else { 0.0 })
                };
                diagonal[t] = (-2.0 * log_sd).exp();
                diagonal[targets + t] = 2.0 * d_log_sd * d_log_sd;
            }
            OutputFisher { diagonal, rank_one: None }
        }
        KernelHead::Categorical => {
            let top = outputs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let exps: Vec<f64> = outputs.iter().map(|o| (o - top).exp()).collect();
            let total: f64 = exps.iter().sum();
            let p: Vec<f64> = exps.iter().map(|e| e / total).collect();
            OutputFisher { diagonal: p.clone(), rank_one: Some(p) }
        }
    }
}

/// The Bayesian Gauss–Newton metric `Σ_n J_nᵀ Λ_n J_n + diag(prior_precision)`, dense
/// `[dim, dim]` row major, at `theta` over the rows of `x`. With a learned σ, its coordinate
/// gets the Fisher information of log σ (2 per observation) plus its prior's precision, and no
/// coupling to the weights (the Fisher information of a Gaussian has none between μ and σ).
///
/// # Panics
/// If `prior_precision` is not of length `dim`, or as [`output_jacobian`].
pub fn gauss_newton_metric(spec: &KernelSpec, x: &[f64], theta: &[f64], prior_precision: &[f64]) -> Vec<f64> {
    assert_eq!(prior_precision.len(), spec.dim, "one prior precision per parameter");
    let jac = output_jacobian(spec, x, theta);
    let dim = spec.dim;
    let log_sigma = match spec.head {
        KernelHead::LearnedSigma { log_sigma_offset, .. } => Some(theta[log_sigma_offset]),
        _ => None,
    };
    let mut metric = vec![0.0; dim * dim];
    let mut combined = vec![0.0; dim];
    for n in 0..jac.rows {
        let outputs = &jac.values[n * jac.outputs..(n + 1) * jac.outputs];
        let fisher = output_fisher(spec.head, spec.target_columns, outputs, log_sigma);
        for (k, &weight) in fisher.diagonal.iter().enumerate() {
            if weight != 0.0 {
                add_outer(&mut metric, jac.row(n, k), jac.row(n, k), weight);
            }
        }
        if let Some(c) = &fisher.rank_one {
            combined.fill(0.0);
            for (k, &ck) in c.iter().enumerate() {
                for (u, &j) in combined.iter_mut().zip(jac.row(n, k)) {
                    *u += ck * j;
                }
            }
            add_outer(&mut metric, &combined, &combined, -1.0);
        }
    }
    if let KernelHead::LearnedSigma { log_sigma_offset, .. } = spec.head {
        metric[log_sigma_offset * dim + log_sigma_offset] += 2.0 * (jac.rows * spec.target_columns) as f64;
    }
    for (i, &p) in prior_precision.iter().enumerate() {
        metric[i * dim + i] += p;
    }
    metric
}

/// `m += weight · a bᵀ` (only the nonzero entries of `a` touch their rows).
fn add_outer(metric: &mut [f64], a: &[f64], b: &[f64], weight: f64) {
    let dim = a.len();
    for (i, &ai) in a.iter().enumerate() {
        if ai == 0.0 {
            continue;
        }
        let scale = weight * ai;
        for (m, &bj) in metric[i * dim..(i + 1) * dim].iter_mut().zip(b) {
            *m += scale * bj;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small_inputs(rows: usize, d_in: usize) -> Vec<f64> {
        (0..rows * d_in).map(|i| ((i * 7 % 13) as f64 - 6.0) / 5.0).collect()
    }

    fn small_theta(dim: usize) -> Vec<f64> {
        (0..dim).map(|i| ((i * 5 % 11) as f64 - 5.0) / 7.0).collect()
    }

    #[test]
    fn the_jacobian_matches_central_differences() {
        let smooth = [
            KernelActivation::Tanh,
            KernelActivation::Sigmoid,
            KernelActivation::Silu,
            KernelActivation::Identity,
            KernelActivation::Relu,
        ];
        for activation in smooth {
            let spec = KernelSpec::dense(&[3, 5, 4, 2], activation, KernelHead::Fixed { sigma: 0.1 }, 2);
            let x = small_inputs(6, 3);
            let theta = small_theta(spec.dim);
            let jac = output_jacobian(&spec, &x, &theta);
            let h = 1e-6;
            for i in 0..spec.dim {
                let (mut up, mut down) = (theta.clone(), theta.clone());
                up[i] += h;
                down[i] -= h;
                let (f_up, f_down) = (output_jacobian(&spec, &x, &up).values, output_jacobian(&spec, &x, &down).values);
                for n in 0..jac.rows {
                    for k in 0..jac.outputs {
                        let numeric = (f_up[n * 2 + k] - f_down[n * 2 + k]) / (2.0 * h);
                        let analytic = jac.row(n, k)[i];
                        assert!(
                            (numeric - analytic).abs() < 1e-7 * (1.0 + analytic.abs()),
                            "{activation:?}: ∂f{k}(x{n})/∂θ{i}: {analytic} vs {numeric}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn hessian_vector_products_match_differences_of_the_gradient() {
        for activation in [KernelActivation::Tanh, KernelActivation::Sigmoid, KernelActivation::Silu, KernelActivation::Identity] {
            let spec = KernelSpec::dense(&[3, 5, 4, 2], activation, KernelHead::Fixed { sigma: 0.1 }, 2);
            let x = small_inputs(1, 3);
            let theta = small_theta(spec.dim);
            let v: Vec<f64> = (0..spec.dim).map(|i| ((i * 3 % 7) as f64 - 3.0) / 4.0).collect();
            let mut pass = RowPass::new(&spec);
            pass.forward(&spec, &x, &theta);
            let h = 1e-5;
            let gradient_at = |t: &[f64], k: usize| {
                let mut p = RowPass::new(&spec);
                p.forward(&spec, &x, t);
                let mut g = vec![0.0; spec.dim];
                p.output_gradient(&spec, t, k, &mut g);
                g
            };
            let up: Vec<f64> = theta.iter().zip(&v).map(|(t, v)| t + h * v).collect();
            let down: Vec<f64> = theta.iter().zip(&v).map(|(t, v)| t - h * v).collect();
            for k in 0..2 {
                let hv = pass.output_hessian_times(&spec, &theta, k, &v);
                let (g_up, g_down) = (gradient_at(&up, k), gradient_at(&down, k));
                for i in 0..spec.dim {
                    let numeric = (g_up[i] - g_down[i]) / (2.0 * h);
                    assert!((hv[i] - numeric).abs() < 1e-7 * (1.0 + numeric.abs()), "{activation:?} (H{k} v)[{i}]: {} vs {numeric}", hv[i]);
                }
            }
        }
    }

    #[test]
    fn the_gradient_of_the_metric_terms_matches_differences_of_them() {
        // φ(θ) = ½ log det G(θ) + ½ pᵀ G(θ)⁻¹ p on a tanh net with two outputs.
        let spec = KernelSpec::dense(&[2, 4, 2], KernelActivation::Tanh, KernelHead::Fixed { sigma: 0.2 }, 2);
        let x = small_inputs(7, 2);
        let theta = small_theta(spec.dim);
        let prior = vec![1.0; spec.dim];
        let p: Vec<f64> = (0..spec.dim).map(|i| ((i * 5 % 9) as f64 - 4.0) / 3.0).collect();
        let phi = |t: &[f64]| {
            let terms = riemannian_terms(&spec, &x, t, &prior, &p).unwrap();
            0.5 * terms.metric.log_det() + terms.kinetic_energy
        };
        let terms = riemannian_terms(&spec, &x, &theta, &prior, &p).unwrap();
        let h = 1e-5;
        for i in 0..spec.dim {
            let (mut up, mut down) = (theta.clone(), theta.clone());
            up[i] += h;
            down[i] -= h;
            let numeric = (phi(&up) - phi(&down)) / (2.0 * h);
            assert!(
                (terms.gradient[i] - numeric).abs() < 1e-6 * (1.0 + numeric.abs()),
                "∂φ/∂θ{i}: {} vs {numeric}",
                terms.gradient[i]
            );
        }
        // The velocity is G⁻¹p: G times it gives p back.
        let g = gauss_newton_metric(&spec, &x, &theta, &prior);
        for i in 0..spec.dim {
            let back: f64 = (0..spec.dim).map(|j| g[i * spec.dim + j] * terms.velocity[j]).sum();
            assert!((back - p[i]).abs() < 1e-9 * (1.0 + p[i].abs()));
        }
        let hetero = KernelSpec::dense(&[2, 4, 2], KernelActivation::Tanh, KernelHead::Heteroscedastic { softplus: false, sigma_min: 1e-3, sigma_max: 1e3 }, 1);
        let err = riemannian_terms(&hetero, &x, &small_theta(hetero.dim), &vec![1.0; hetero.dim], &vec![0.0; hetero.dim]).unwrap_err();
        assert!(err.contains("fixed-σ"), "{err}");
    }

    #[test]
    fn without_hidden_layers_the_metric_is_the_gaussian_posteriors_precision() {
        // f = x W + b with y ~ N(f, σ²) and θ ~ N(0, s²): the log posterior is quadratic with
        // precision (1/σ²) Σ_n φ_n φ_nᵀ ⊗ I_K + I/s², φ = (x, 1), whatever θ is.
        let (sigma, s) = (0.3, 2.0);
        let spec = KernelSpec::dense(&[2, 2], KernelActivation::Tanh, KernelHead::Fixed { sigma }, 2);
        let x = small_inputs(5, 2);
        let prior = vec![1.0 / (s * s); spec.dim];
        let metric = gauss_newton_metric(&spec, &x, &small_theta(spec.dim), &prior);
        let dim = spec.dim; // W[i, k] at 2i + k, b[k] at 4 + k
        let feature = |n: usize, i: usize| if i < 2 { x[n * 2 + i] } else { 1.0 };
        for a in 0..dim {
            for b in 0..dim {
                let (ia, ka) = if a < 4 { (a / 2, a % 2) } else { (2, a - 4) };
                let (ib, kb) = if b < 4 { (b / 2, b % 2) } else { (2, b - 4) };
                let mut expected = if ka == kb { (0..5).map(|n| feature(n, ia) * feature(n, ib)).sum::<f64>() / (sigma * sigma) } else { 0.0 };
                if a == b {
                    expected += 1.0 / (s * s);
                }
                assert!((metric[a * dim + b] - expected).abs() < 1e-10, "G[{a}, {b}] = {} vs {expected}", metric[a * dim + b]);
            }
        }
    }

    #[test]
    fn categorical_and_heteroscedastic_heads_weight_the_outputs_by_their_fisher_information() {
        // For one row, G − P = Jᵀ Λ J; check Λ through the quadratic form v ↦ (Jv)ᵀ Λ (Jv).
        let x = small_inputs(1, 3);
        for (head, outputs, targets) in [
            (KernelHead::Categorical, 3, 3),
            (KernelHead::Heteroscedastic { softplus: false, sigma_min: 1e-3, sigma_max: 1e3 }, 4, 2),
            (KernelHead::Heteroscedastic { softplus: true, sigma_min: 1e-3, sigma_max: 1e3 }, 4, 2),
        ] {
            let spec = KernelSpec::dense(&[3, 4, outputs], KernelActivation::Tanh, head, targets);
            let theta = small_theta(spec.dim);
            let metric = gauss_newton_metric(&spec, &x, &theta, &vec![0.0; spec.dim]);
            let jac = output_jacobian(&spec, &x, &theta);
            let v: Vec<f64> = (0..spec.dim).map(|i| ((i * 3 % 7) as f64 - 3.0) / 4.0).collect();
            let jv: Vec<f64> = (0..outputs).map(|k| jac.row(0, k).iter().zip(&v).map(|(a, b)| a * b).sum()).collect();
            let o = &jac.values;
            let expected = match head {
                KernelHead::Categorical => {
                    let top = o.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                    let z: f64 = o.iter().map(|v| (v - top).exp()).sum();
                    let p: Vec<f64> = o.iter().map(|v| (v - top).exp() / z).collect();
                    let mean: f64 = p.iter().zip(&jv).map(|(p, u)| p * u).sum();
                    p.iter().zip(&jv).map(|(p, u)| p * u * u).sum::<f64>() - mean * mean
                }
                KernelHead::Heteroscedastic { softplus, .. } => (0..2)
                    .map(|t| {
                        let raw = o[2 + t];
                        let (sd, d_log) = if softplus {
                            let sp = (1.0 + raw.exp()).ln();
                            (sp, 1.0 / (1.0 + (-raw).exp()) / sp)
                        } else {
                            (raw.exp(), 1.0)
                        };
                        jv[t] * jv[t] / (sd * sd) + 2.0 * d_log * d_log * jv[2 + t] * jv[2 + t]
                    })
                    .sum(),
                _ => unreachable!(),
            };
            let quadratic: f64 = (0..spec.dim).map(|a| (0..spec.dim).map(|b| v[a] * metric[a * spec.dim + b] * v[b]).sum::<f64>()).sum();
            assert!((quadratic - expected).abs() < 1e-10 * (1.0 + expected.abs()), "{head:?}: {quadratic} vs {expected}");
            assert!(quadratic >= -1e-12, "{head:?}: the metric must be positive semidefinite");
        }
    }

    #[test]
    fn a_learned_sigma_gets_its_own_fisher_block() {
        let spec = KernelSpec::dense(&[2, 3, 1], KernelActivation::Tanh, KernelHead::LearnedSigma { log_sigma_offset: 0, prior_mean: 0.0, prior_sd: 1.0 }, 1);
        let mut theta = small_theta(spec.dim);
        let ls = spec.dim - 1;
        theta[ls] = (0.5f64).ln();
        let x = small_inputs(7, 2);
        let metric = gauss_newton_metric(&spec, &x, &theta, &vec![1.0; spec.dim]);
        assert!((metric[ls * spec.dim + ls] - (2.0 * 7.0 + 1.0)).abs() < 1e-12);
        assert!((0..ls).all(|i| metric[i * spec.dim + ls] == 0.0 && metric[ls * spec.dim + i] == 0.0));
        // The weights' block is (1/σ²) JᵀJ + I with σ = 0.5.
        let fixed = KernelSpec::dense(&[2, 3, 1], KernelActivation::Tanh, KernelHead::Fixed { sigma: 0.5 }, 1);
        let reference = gauss_newton_metric(&fixed, &x, &theta[..ls], &vec![1.0; ls]);
        for a in 0..ls {
            for b in 0..ls {
                assert!((metric[a * spec.dim + b] - reference[a * ls + b]).abs() < 1e-12);
            }
        }
    }
}

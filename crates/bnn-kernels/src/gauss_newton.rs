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

use crate::base::{matmul_accumulate, Layout};
use crate::cholesky::CholeskyError;
use crate::likelihood::{self, HeadInput};
use crate::metric_factor::{MetricFactor, RiemannianTerms};
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
            (
                a * s,
                s * (1.0 + a * (1.0 - s)),
                s * (1.0 - s) * (2.0 + a * (1.0 - 2.0 * s)),
            )
        }
        KernelActivation::Gelu => {
            // (aΦ)' = Φ + aφ, (aΦ)'' = 2φ + aφ' = (2 − a²)φ.
            let cdf = 0.5 * libm::erfc(-a * std::f64::consts::FRAC_1_SQRT_2);
            let density = (-0.5 * a * a).exp() * crate::activation::FRAC_1_SQRT_2PI;
            (a * cdf, cdf + a * density, (2.0 - a * a) * density)
        }
        KernelActivation::Softplus => {
            let s = 1.0 / (1.0 + (-a).exp());
            (a.max(0.0) + (-a.abs()).exp().ln_1p(), s, s * (1.0 - s))
        }
        KernelActivation::TruncRelu => (
            a.clamp(0.0, 1.0),
            if a > 0.0 && a < 1.0 { 1.0 } else { 0.0 },
            0.0,
        ),
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
                    theta[start..start + layer.d_out]
                        .iter()
                        .zip(&delta)
                        .map(|(w, d)| w * d)
                        .sum::<f64>()
                        * self.slopes[l - 1][i]
                })
                .collect();
        }
    }

    /// `H_k v`: the Hessian of output `k` (in θ) times `direction`, exactly, by differentiating
    /// the forward and the reverse pass along `direction` (Pearlmutter 1994's R-operator).
    fn output_hessian_times(
        &self,
        spec: &KernelSpec,
        theta: &[f64],
        k: usize,
        direction: &[f64],
    ) -> Vec<f64> {
        let mut weights = vec![0.0; self.outputs.len()];
        weights[k] = 1.0;
        self.weighted_hessian_times(spec, theta, &weights, direction)
    }

    /// `(Σ_k w_k H_k) v`: the Hessian of the weighted sum of the outputs times `direction`, in
    /// one forward and one reverse R-pass (the weights held constant).
    fn weighted_hessian_times(
        &self,
        spec: &KernelSpec,
        theta: &[f64],
        weights: &[f64],
        direction: &[f64],
    ) -> Vec<f64> {
        let depth = spec.layers.len();
        // Forward: R(pre_l) = dW_l·input_l + W_l·R(input_l) + db_l, R(input_{l+1}) = σ'·R(pre_l).
        let mut r_inputs: Vec<Vec<f64>> = spec.layers.iter().map(|l| vec![0.0; l.d_in]).collect();
        let mut r_pre: Vec<Vec<f64>> = Vec::with_capacity(depth);
        for (l, layer) in spec.layers.iter().enumerate() {
            let mut r = direction[layer.bias_offset..layer.bias_offset + layer.d_out].to_vec();
            for i in 0..layer.d_in {
                let start = layer.weight_offset + i * layer.d_out;
                let (input, r_input) = (self.inputs[l][i], r_inputs[l][i]);
                for ((rj, &dw), &w) in r
                    .iter_mut()
                    .zip(&direction[start..start + layer.d_out])
                    .zip(&theta[start..start + layer.d_out])
                {
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
        let mut delta = weights.to_vec();
        let mut r_delta = vec![0.0; self.outputs.len()];
        for (l, layer) in spec.layers.iter().enumerate().rev() {
            for i in 0..layer.d_in {
                let start = layer.weight_offset + i * layer.d_out;
                let (input, r_input) = (self.inputs[l][i], r_inputs[l][i]);
                for ((h, &d), &rd) in hv[start..start + layer.d_out]
                    .iter_mut()
                    .zip(&delta)
                    .zip(&r_delta)
                {
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
                let (w, dw) = (
                    &theta[start..start + layer.d_out],
                    &direction[start..start + layer.d_out],
                );
                let back: f64 = w.iter().zip(&delta).map(|(w, d)| w * d).sum();
                let r_back: f64 = dw.iter().zip(&delta).map(|(dw, d)| dw * d).sum::<f64>()
                    + w.iter().zip(&r_delta).map(|(w, rd)| w * rd).sum::<f64>();
                below[i] = back * self.slopes[l - 1][i];
                r_below[i] = r_back * self.slopes[l - 1][i]
                    + back * self.curvatures[l - 1][i] * r_pre[l - 1][i];
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
    OutputJacobian {
        rows,
        outputs,
        dim: spec.dim,
        values,
        jacobian,
    }
}

/// `(rows, d_in, outputs)` of `x` under `spec`, after checking the lengths.
fn check_shapes(spec: &KernelSpec, x: &[f64], theta: &[f64]) -> (usize, usize, usize) {
    assert_eq!(
        theta.len(),
        spec.dim,
        "θ has {} values, the spec {}",
        theta.len(),
        spec.dim
    );
    let d_in = spec.layers.first().map_or(0, |l| l.d_in);
    let outputs = spec.layers.last().map_or(0, |l| l.d_out);
    assert!(
        d_in > 0 && x.len().is_multiple_of(d_in),
        "x has {} values, not rows of {d_in}",
        x.len()
    );
    (x.len() / d_in, d_in, outputs)
}

/// A prior that is a product of independent Normal and Laplace factors per coordinate:
/// `log p(θ) = constant − Σ_i (½ quadratic_i θ_i² + absolute_i |θ_i|)` (the fused kernel's
/// prior, `bnn-model`'s `PriorCoefficients`).
#[derive(Clone, Copy, Debug)]
pub struct DiagonalPrior<'a> {
    pub quadratic: &'a [f64],
    pub absolute: &'a [f64],
    pub constant: f64,
}

impl DiagonalPrior<'_> {
    /// The prior's part of the metric: its precision `quadratic_i` plus, for a Laplace factor,
    /// its Fisher information `absolute_i²` (the curvature of `|θ|` is zero away from 0 and
    /// infinite at it; the Fisher information of a Laplace location, 1/scale², is the smooth
    /// stand-in, the way the likelihood's part is a Fisher information too).
    pub fn metric_diagonal(&self) -> Vec<f64> {
        self.quadratic
            .iter()
            .zip(self.absolute)
            .map(|(q, b)| q + b * b)
            .collect()
    }
}

/// Why [`posterior_potential`] has no value: inputs whose lengths do not fit the spec, or a
/// point where the log density is not finite.
#[derive(Clone, Debug, PartialEq)]
pub enum PotentialError {
    /// `y` does not hold `rows × columns` target values.
    Targets {
        values: usize,
        rows: usize,
        columns: usize,
    },
    /// The prior has coefficients for `coefficients` coordinates, θ has `dim`.
    Prior { coefficients: usize, dim: usize },
    /// The log density at θ is not finite (a property of the point, not of the inputs).
    NonFinite { log_density: f64 },
}

impl std::fmt::Display for PotentialError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PotentialError::Targets {
                values,
                rows,
                columns,
            } => write!(
                f,
                "{values} target values for {rows} rows × {columns} columns"
            ),
            PotentialError::Prior { coefficients, dim } => write!(
                f,
                "prior coefficients for {coefficients} coordinates, θ has {dim}"
            ),
            PotentialError::NonFinite { log_density } => {
                write!(f, "the log density is not finite ({log_density})")
            }
        }
    }
}

impl std::error::Error for PotentialError {}

/// `U(θ) = −log p(y | θ) − log p(θ)` for any head and a [`DiagonalPrior`], with `∇U`, in f64
/// with exact activations: the potential that goes with [`riemannian_terms`] (the same
/// likelihood definitions and constants as the fused kernel, whose f32 value it matches to
/// rounding). `y` is the kernel's target layout (`[rows, targets]`; one-hot `[rows, classes]`).
/// A learned log σ's likelihood and prior terms land on its own coordinate.
pub fn posterior_potential(
    spec: &KernelSpec,
    x: &[f64],
    y: &[f64],
    theta: &[f64],
    prior: DiagonalPrior<'_>,
) -> Result<(f64, Vec<f64>), PotentialError> {
    let (rows, d_in, outputs) = check_shapes(spec, x, theta);
    let target_width = if matches!(spec.head, KernelHead::Categorical) {
        outputs
    } else {
        spec.target_columns
    };
    if y.len() != rows * target_width {
        return Err(PotentialError::Targets {
            values: y.len(),
            rows,
            columns: target_width,
        });
    }
    if prior.quadratic.len() != spec.dim || prior.absolute.len() != spec.dim {
        return Err(PotentialError::Prior {
            coefficients: prior.quadratic.len(),
            dim: spec.dim,
        });
    }
    let mut pass = RowPass::new(spec);
    let mut values = vec![0.0; rows * outputs];
    for n in 0..rows {
        pass.forward(spec, &x[n * d_in..(n + 1) * d_in], theta);
        values[n * outputs..(n + 1) * outputs].copy_from_slice(&pass.outputs);
    }
    let log_sigma = learned_log_sigma(spec, theta);
    let input = HeadInput {
        outputs: &values,
        targets: y,
        rows,
        outputs_per_row: outputs,
        target_columns: spec.target_columns,
        log_sigma,
    };
    let mut d_outputs = vec![0.0; rows * outputs];
    let head = likelihood::evaluate(spec.head, &input, Some(&mut d_outputs));
    let mut log_density = head.log_likelihood + prior.constant;
    let mut gradient = vec![0.0; spec.dim];
    let mut row_gradient = vec![0.0; spec.dim];
    for n in 0..rows {
        pass.forward(spec, &x[n * d_in..(n + 1) * d_in], theta);
        for k in 0..outputs {
            let weight = d_outputs[n * outputs + k];
            if weight == 0.0 {
                continue;
            }
            pass.output_gradient(spec, theta, k, &mut row_gradient);
            for (g, j) in gradient.iter_mut().zip(&row_gradient) {
                *g += weight * j;
            }
        }
    }
    if let KernelHead::LearnedSigma {
        log_sigma_offset, ..
    } = spec.head
    {
        for (g, d) in gradient[log_sigma_offset..]
            .iter_mut()
            .zip(&head.d_log_sigma)
        {
            *g += d;
        }
    }
    for (i, &t) in theta.iter().enumerate() {
        let (q, b) = (prior.quadratic[i], prior.absolute[i]);
        log_density -= 0.5 * q * t * t + b * t.abs();
        gradient[i] -= q * t
            + b * if t > 0.0 {
                1.0
            } else if t < 0.0 {
                -1.0
            } else {
                0.0
            };
    }
    if !log_density.is_finite() {
        return Err(PotentialError::NonFinite { log_density });
    }
    gradient.iter_mut().for_each(|g| *g = -*g);
    Ok((-log_density, gradient))
}

/// The network at one θ: outputs and output Jacobian on the training rows, what the metric and
/// both parts of `∇φ` are built from.
#[derive(Clone, Debug, PartialEq)]
pub struct OutputPoint {
    pub theta: Vec<f64>,
    pub jac: OutputJacobian,
}

impl OutputPoint {
    pub fn new(spec: &KernelSpec, x: &[f64], theta: &[f64]) -> Self {
        Self {
            theta: theta.to_vec(),
            jac: output_jacobian(spec, x, theta),
        }
    }

    /// `G = Σ_n J_nᵀ Λ_n J_n + diag(prior_precision)`, factored: densely, or as the diagonal
    /// plus the `r` rows of `Λ^{½} J` when `r < D` (cost `O(min(D, N·K)² · max(D, N·K))`); an
    /// error when it is not positive definite.
    pub fn metric(
        &self,
        spec: &KernelSpec,
        prior_precision: &[f64],
    ) -> Result<MetricFactor, CholeskyError> {
        assert_eq!(
            prior_precision.len(),
            spec.dim,
            "one prior precision per parameter"
        );
        let log_sigma = learned_log_sigma(spec, &self.theta);
        let mut diagonal = prior_precision.to_vec();
        add_log_sigma_fisher(spec, self.jac.rows, &mut diagonal);
        let rows = curvature_rows(spec, &self.jac, log_sigma);
        MetricFactor::choose(&diagonal, rows, |rows| dense_metric(rows, &diagonal))
    }
}

/// `B` with `BᵀB = Σ_n J_nᵀ Λ_n J_n`, `[r, D]`: `√Λ_kk J_nk` for the diagonal heads (rows with
/// zero weight left out), `√p_k (J_nk − Σ_l p_l J_nl)` for the categorical head
/// (`diag(p) − ppᵀ = AᵀA` with `A = diag(√p)(I − 1pᵀ)`).
fn curvature_rows(spec: &KernelSpec, jac: &OutputJacobian, log_sigma: Option<&[f64]>) -> Vec<f64> {
    let dim = spec.dim;
    let mut rows = Vec::new();
    let mut mixed = vec![0.0; dim];
    for n in 0..jac.rows {
        let values = &jac.values[n * jac.outputs..(n + 1) * jac.outputs];
        let fisher = output_fisher(spec.head, spec.target_columns, values, log_sigma);
        if let Some(p) = &fisher.rank_one {
            mixed.fill(0.0);
            for (k, pk) in p.iter().enumerate() {
                for (m, j) in mixed.iter_mut().zip(jac.row(n, k)) {
                    *m += pk * j;
                }
            }
        }
        for (k, &weight) in fisher.diagonal.iter().enumerate() {
            if weight > 0.0 {
                let scale = weight.sqrt();
                let centre = if fisher.rank_one.is_some() {
                    &mixed[..]
                } else {
                    &[][..]
                };
                rows.extend(
                    jac.row(n, k)
                        .iter()
                        .enumerate()
                        .map(|(i, j)| scale * (j - centre.get(i).copied().unwrap_or(0.0))),
                );
            }
        }
    }
    rows
}

/// `G(θ)`, `G⁻¹p`, `½pᵀG⁻¹p` and `∇_θ φ` for any head, `G = Σ_n J_nᵀ Λ_n J_n + P` with `Λ_n`
/// the head's Fisher information at row `n`'s outputs `f_n` and `P = diag(prior_precision)`:
/// [`log_det_gradient`] plus [`kinetic_gradient`] at one [`OutputPoint`]. A metric that is not
/// positive definite is an error.
pub fn riemannian_terms(
    spec: &KernelSpec,
    x: &[f64],
    theta: &[f64],
    prior_precision: &[f64],
    momentum: &[f64],
) -> Result<RiemannianTerms, CholeskyError> {
    let point = OutputPoint::new(spec, x, theta);
    let metric = point.metric(spec, prior_precision)?;
    let mut velocity = vec![0.0; spec.dim];
    metric.solve(momentum, &mut velocity);
    let kinetic_energy = 0.5 * dot(momentum, &velocity);
    let mut gradient = log_det_gradient(spec, x, &point, &metric);
    for (g, k) in gradient
        .iter_mut()
        .zip(kinetic_gradient(spec, x, &point, &velocity))
    {
        *g += k;
    }
    Ok(RiemannianTerms {
        metric,
        velocity,
        kinetic_energy,
        gradient,
    })
}

/// `∇_θ ½ log det G = ½ tr(G⁻¹ ∂_i G)`. Per row, `∂_i G` has the network's curvature,
/// contributing `Σ_k H_nk v_nk` with `v_nk = Σ_l Λ_n,kl G⁻¹ J_nl` (one exact Hessian-vector
/// product per row and output), and the head's, `J_nᵀ (∂Λ_n/∂f_nm) J_n · ∂_i f_nm`, contributing
/// `Σ_m c_nm J_nm` with `c_nm = Σ_kl ∂Λ_n,kl/∂f_nm · M_n,lk`, `M_n = ½ J_n G⁻¹ J_nᵀ` (zero for a
/// fixed σ; the scale outputs of the heteroscedastic head; the logits of the categorical head).
/// A learned log σ_k scales output k's part of the weights' block by `e^{−2s_k}`:
/// `∂_{s_k} = −2 e^{−2s_k} Σ_n (M_n)_kk`.
/// `O(N·K·D²)`: the solves `G⁻¹ J_nk`, like forming `G`.
pub fn log_det_gradient(
    spec: &KernelSpec,
    x: &[f64],
    point: &OutputPoint,
    metric: &MetricFactor,
) -> Vec<f64> {
    let (dim, jac) = (spec.dim, &point.jac);
    let outputs = jac.outputs;
    let log_sigma = learned_log_sigma(spec, &point.theta);
    let full_m = matches!(spec.head, KernelHead::Categorical);
    // G⁻¹ J_nk for every row and output at once (the rows of the Jacobian).
    let mut all_solved = vec![0.0; jac.jacobian.len()];
    metric.solve_many(&jac.jacobian, &mut all_solved);
    let mut m = vec![0.0; outputs * outputs];
    let mut gradient = vec![0.0; dim];
    let mut direction = vec![0.0; dim];
    // Σ_n (M_n)_kk per output k (what a learned log σ_k's derivative needs).
    let mut diagonal_m = vec![0.0; outputs];
    let mut pass = RowPass::new(spec);
    let d_in = spec.d_input();
    for n in 0..jac.rows {
        let values = &jac.values[n * outputs..(n + 1) * outputs];
        let fisher = output_fisher(spec.head, spec.target_columns, values, log_sigma);
        let solved: Vec<&[f64]> = all_solved[n * outputs * dim..(n + 1) * outputs * dim]
            .chunks_exact(dim)
            .collect();
        for k in 0..outputs {
            for l in 0..outputs {
                if k == l || full_m {
                    m[k * outputs + l] = 0.5 * dot(jac.row(n, k), solved[l]);
                }
            }
            diagonal_m[k] += m[k * outputs + k];
        }
        pass.forward(spec, &x[n * d_in..(n + 1) * d_in], &point.theta);
        // v_nk = Σ_l Λ_kl G⁻¹J_nl with Λ = diag(d) − c cᵀ (c = p for the categorical head).
        let mixed: Option<Vec<f64>> = fisher.rank_one.as_ref().map(|c| {
            let mut sum = vec![0.0; dim];
            for (cl, w) in c.iter().zip(&solved) {
                for (s, w) in sum.iter_mut().zip(w.iter()) {
                    *s += cl * w;
                }
            }
            sum
        });
        for k in 0..outputs {
            let weight = fisher.diagonal[k];
            let rank_one = fisher.rank_one.as_ref().map_or(0.0, |c| c[k]);
            if weight == 0.0 && rank_one == 0.0 {
                continue;
            }
            for (i, d) in direction.iter_mut().enumerate() {
                *d = weight * solved[k][i] - mixed.as_ref().map_or(0.0, |s| rank_one * s[i]);
            }
            for (g, h) in gradient.iter_mut().zip(pass.output_hessian_times(
                spec,
                &point.theta,
                k,
                &direction,
            )) {
                *g += h;
            }
        }
        add_head_term(&mut gradient, spec, jac, n, values, &m);
    }
    if let KernelHead::LearnedSigma {
        log_sigma_offset, ..
    } = spec.head
    {
        for (k, m) in diagonal_m.iter().enumerate() {
            gradient[log_sigma_offset + k] +=
                -2.0 * (-2.0 * point.theta[log_sigma_offset + k]).exp() * m;
        }
    }
    gradient
}

/// `∇_θ ½ pᵀG⁻¹p` at fixed `p`, given `velocity = G⁻¹p`: `−½ uᵀ ∂_i G u`. With `a_n = J_n u`,
/// per row that is `−H(w_n·f_n) u` with `w_n = Λ_n a_n` (one Hessian-vector product of a
/// weighted output sum) and the head's term with `M_n = −½ a_n a_nᵀ`; a learned log σ_k gets
/// `e^{−2s_k} Σ_n a_nk²`. `O(N·K·D)`, no solves: what the fixed-point iteration for `p½`
/// re-evaluates at a fixed θ.
pub fn kinetic_gradient(
    spec: &KernelSpec,
    x: &[f64],
    point: &OutputPoint,
    velocity: &[f64],
) -> Vec<f64> {
    let (dim, jac) = (spec.dim, &point.jac);
    let outputs = jac.outputs;
    let log_sigma = learned_log_sigma(spec, &point.theta);
    let mut gradient = vec![0.0; dim];
    let mut along = vec![0.0; outputs];
    let mut weights = vec![0.0; outputs];
    let mut m = vec![0.0; outputs * outputs];
    let mut squares = vec![0.0; outputs];
    let mut pass = RowPass::new(spec);
    let d_in = spec.d_input();
    for n in 0..jac.rows {
        let values = &jac.values[n * outputs..(n + 1) * outputs];
        let fisher = output_fisher(spec.head, spec.target_columns, values, log_sigma);
        for (k, a) in along.iter_mut().enumerate() {
            *a = dot(jac.row(n, k), velocity);
        }
        for (s, a) in squares.iter_mut().zip(&along) {
            *s += a * a;
        }
        let mixed = fisher.rank_one.as_ref().map_or(0.0, |c| dot(c, &along));
        for k in 0..outputs {
            weights[k] = -(fisher.diagonal[k] * along[k]
                - fisher.rank_one.as_ref().map_or(0.0, |c| c[k] * mixed));
            for l in 0..outputs {
                m[k * outputs + l] = -0.5 * along[k] * along[l];
            }
        }
        if weights.iter().any(|&w| w != 0.0) {
            pass.forward(spec, &x[n * d_in..(n + 1) * d_in], &point.theta);
            for (g, h) in gradient.iter_mut().zip(pass.weighted_hessian_times(
                spec,
                &point.theta,
                &weights,
                velocity,
            )) {
                *g += h;
            }
        }
        add_head_term(&mut gradient, spec, jac, n, values, &m);
    }
    if let KernelHead::LearnedSigma {
        log_sigma_offset, ..
    } = spec.head
    {
        for (k, s) in squares.iter().enumerate() {
            gradient[log_sigma_offset + k] += (-2.0 * point.theta[log_sigma_offset + k]).exp() * s;
        }
    }
    gradient
}

/// Adds `Σ_m c_nm J_nm` (the head's Fisher information moving with row `n`'s outputs).
fn add_head_term(
    gradient: &mut [f64],
    spec: &KernelSpec,
    jac: &OutputJacobian,
    n: usize,
    values: &[f64],
    m: &[f64],
) {
    for (k, c) in fisher_derivative_weights(spec.head, spec.target_columns, values, m)
        .into_iter()
        .enumerate()
    {
        if c != 0.0 {
            for (g, j) in gradient.iter_mut().zip(jac.row(n, k)) {
                *g += c * j;
            }
        }
    }
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(a, b)| a * b).sum()
}

/// θ's log σ per target column, for the learned-σ head.
fn learned_log_sigma<'a>(spec: &KernelSpec, theta: &'a [f64]) -> Option<&'a [f64]> {
    match spec.head {
        KernelHead::LearnedSigma {
            log_sigma_offset, ..
        } => Some(&theta[log_sigma_offset..log_sigma_offset + spec.target_columns]),
        _ => None,
    }
}

/// The Fisher information of each learned log σ_t (2 per observation of column t) added to the
/// metric's diagonal; nothing for the other heads.
fn add_log_sigma_fisher(spec: &KernelSpec, rows: usize, diagonal: &mut [f64]) {
    if let KernelHead::LearnedSigma {
        log_sigma_offset, ..
    } = spec.head
    {
        for d in &mut diagonal[log_sigma_offset..log_sigma_offset + spec.target_columns] {
            *d += 2.0 * rows as f64;
        }
    }
}

/// `log σ` of a heteroscedastic scale output `raw` and its first two derivatives in `raw` (zero
/// where the clamp to `[σ_min, σ_max]` is active, as in the kernel's gradient).
fn log_sd_link(softplus: bool, sigma_min: f64, sigma_max: f64, raw: f64) -> (f64, f64, f64) {
    if softplus {
        let value = raw.max(0.0) + (-raw.abs()).exp().ln_1p();
        let sd = value.clamp(sigma_min, sigma_max);
        if value < sigma_min || value > sigma_max {
            return (sd.ln(), 0.0, 0.0);
        }
        let logistic = 1.0 / (1.0 + (-raw).exp());
        let slope = logistic / value;
        (
            value.ln(),
            slope,
            (logistic * (1.0 - logistic) * value - logistic * logistic) / (value * value),
        )
    } else {
        let (lo, hi) = (sigma_min.ln(), sigma_max.ln());
        (
            raw.clamp(lo, hi),
            if raw >= lo && raw <= hi { 1.0 } else { 0.0 },
            0.0,
        )
    }
}

/// `c_m = Σ_kl ∂Λ_kl/∂f_m · M_lk` for one row (`m`: `M = J B Jᵀ`, `[outputs, outputs]`; only its
/// diagonal is read except for the categorical head).
fn fisher_derivative_weights(
    head: KernelHead,
    targets: usize,
    outputs: &[f64],
    m: &[f64],
) -> Vec<f64> {
    let k = outputs.len();
    let mut c = vec![0.0; k];
    match head {
        KernelHead::Fixed { .. } | KernelHead::LearnedSigma { .. } => {}
        KernelHead::Heteroscedastic {
            softplus,
            sigma_min,
            sigma_max,
        } => {
            // Λ_μ = e^{−2ℓ(raw)}, Λ_raw = 2 ℓ'(raw)².
            for t in 0..targets {
                let (log_sd, slope, curvature) =
                    log_sd_link(softplus, sigma_min, sigma_max, outputs[targets + t]);
                let d_mean = -2.0 * slope * (-2.0 * log_sd).exp();
                let d_scale = 4.0 * slope * curvature;
                c[targets + t] =
                    d_mean * m[t * k + t] + d_scale * m[(targets + t) * k + targets + t];
            }
        }
        KernelHead::Categorical => {
            // Λ = diag(p) − ppᵀ, ∂p_j/∂f_m = p_j(δ_jm − p_m): c_m = p_m (a_m − Σ_j p_j a_j) with
            // a_j = M_jj − 2 (M p)_j.
            let p = softmax(outputs);
            let a: Vec<f64> = (0..k)
                .map(|j| m[j * k + j] - 2.0 * (0..k).map(|l| m[j * k + l] * p[l]).sum::<f64>())
                .collect();
            let mean: f64 = p.iter().zip(&a).map(|(p, a)| p * a).sum();
            for j in 0..k {
                c[j] = p[j] * (a[j] - mean);
            }
        }
    }
    c
}

fn softmax(outputs: &[f64]) -> Vec<f64> {
    let top = outputs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let exps: Vec<f64> = outputs.iter().map(|o| (o - top).exp()).collect();
    let total: f64 = exps.iter().sum();
    exps.iter().map(|e| e / total).collect()
}

/// The Fisher information of the likelihood head with respect to one row's outputs, as
/// `Λ = diag(diagonal) − c cᵀ` (the categorical head's `diag(p) − p pᵀ`; the Gaussian heads have
/// no `c`).
struct OutputFisher {
    diagonal: Vec<f64>,
    rank_one: Option<Vec<f64>>,
}

/// `Λ_n` for one row's `outputs`.
fn output_fisher(
    head: KernelHead,
    targets: usize,
    outputs: &[f64],
    log_sigma: Option<&[f64]>,
) -> OutputFisher {
    match head {
        KernelHead::Fixed { sigma } => OutputFisher {
            diagonal: vec![1.0 / (sigma * sigma); outputs.len()],
            rank_one: None,
        },
        KernelHead::LearnedSigma { .. } => {
            let log_sigma = log_sigma.expect("the learned-σ head reads log σ from θ");
            OutputFisher {
                diagonal: log_sigma.iter().map(|s| (-2.0 * s).exp()).collect(),
                rank_one: None,
            }
        }
        KernelHead::Heteroscedastic {
            softplus,
            sigma_min,
            sigma_max,
        } => {
            // y ~ N(μ, σ²): Fisher 1/σ² for μ and 2 for log σ, times (d log σ / d raw)².
            let mut diagonal = vec![0.0; 2 * targets];
            for t in 0..targets {
                let (log_sd, slope, _) =
                    log_sd_link(softplus, sigma_min, sigma_max, outputs[targets + t]);
                diagonal[t] = (-2.0 * log_sd).exp();
                diagonal[targets + t] = 2.0 * slope * slope;
            }
            OutputFisher {
                diagonal,
                rank_one: None,
            }
        }
        KernelHead::Categorical => {
            let p = softmax(outputs);
            OutputFisher {
                diagonal: p.clone(),
                rank_one: Some(p),
            }
        }
    }
}

/// The Bayesian Gauss–Newton metric `Σ_n J_nᵀ Λ_n J_n + diag(prior_precision)`, dense
/// `[dim, dim]` row major, at `theta` over the rows of `x`. With learned σ's, each log σ_t's
/// coordinate gets its Fisher information (2 per observation) plus its prior's precision, and no
/// coupling to the weights (the Fisher information of a Gaussian has none between μ and σ).
///
/// # Panics
/// If `prior_precision` is not of length `dim`, or as [`output_jacobian`].
pub fn gauss_newton_metric(
    spec: &KernelSpec,
    x: &[f64],
    theta: &[f64],
    prior_precision: &[f64],
) -> Vec<f64> {
    assert_eq!(
        prior_precision.len(),
        spec.dim,
        "one prior precision per parameter"
    );
    let jac = output_jacobian(spec, x, theta);
    metric_from_jacobian(spec, &jac, learned_log_sigma(spec, theta), prior_precision)
}

fn metric_from_jacobian(
    spec: &KernelSpec,
    jac: &OutputJacobian,
    log_sigma: Option<&[f64]>,
    prior_precision: &[f64],
) -> Vec<f64> {
    let mut diagonal = prior_precision.to_vec();
    add_log_sigma_fisher(spec, jac.rows, &mut diagonal);
    dense_metric(&curvature_rows(spec, jac, log_sigma), &diagonal)
}

/// `BᵀB + diag(diagonal)`, dense `[D, D]` row major, with `BᵀB` as one matrix product (`gemm`):
/// rank-one updates in scalar loops were a third of an MSD iteration on the robot arm.
fn dense_metric(rows: &[f64], diagonal: &[f64]) -> Vec<f64> {
    let dim = diagonal.len();
    let rank = rows.len() / dim.max(1);
    let mut metric = vec![0.0; dim * dim];
    if rank > 0 {
        matmul_accumulate(
            &mut metric,
            rows,
            rows,
            dim,
            dim,
            rank,
            Layout::transposed(dim),
            Layout::row(dim),
            false,
        );
    }
    for (i, &p) in diagonal.iter().enumerate() {
        metric[i * dim + i] += p;
    }
    metric
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small_inputs(rows: usize, d_in: usize) -> Vec<f64> {
        (0..rows * d_in)
            .map(|i| ((i * 7 % 13) as f64 - 6.0) / 5.0)
            .collect()
    }

    fn small_theta(dim: usize) -> Vec<f64> {
        (0..dim)
            .map(|i| ((i * 5 % 11) as f64 - 5.0) / 7.0)
            .collect()
    }

    #[test]
    fn the_jacobian_matches_central_differences() {
        let smooth = [
            KernelActivation::Tanh,
            KernelActivation::Sigmoid,
            KernelActivation::Silu,
            KernelActivation::Gelu,
            KernelActivation::Softplus,
            KernelActivation::Identity,
            KernelActivation::Relu,
        ];
        for activation in smooth {
            let spec = KernelSpec::dense(
                &[3, 5, 4, 2],
                activation,
                KernelHead::Fixed { sigma: 0.1 },
                2,
            );
            let x = small_inputs(6, 3);
            let theta = small_theta(spec.dim);
            let jac = output_jacobian(&spec, &x, &theta);
            let h = 1e-6;
            for i in 0..spec.dim {
                let (mut up, mut down) = (theta.clone(), theta.clone());
                up[i] += h;
                down[i] -= h;
                let (f_up, f_down) = (
                    output_jacobian(&spec, &x, &up).values,
                    output_jacobian(&spec, &x, &down).values,
                );
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
        for activation in [
            KernelActivation::Tanh,
            KernelActivation::Sigmoid,
            KernelActivation::Silu,
            KernelActivation::Gelu,
            KernelActivation::Softplus,
            KernelActivation::Identity,
        ] {
            let spec = KernelSpec::dense(
                &[3, 5, 4, 2],
                activation,
                KernelHead::Fixed { sigma: 0.1 },
                2,
            );
            let x = small_inputs(1, 3);
            let theta = small_theta(spec.dim);
            let v: Vec<f64> = (0..spec.dim)
                .map(|i| ((i * 3 % 7) as f64 - 3.0) / 4.0)
                .collect();
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
                    assert!(
                        (hv[i] - numeric).abs() < 1e-7 * (1.0 + numeric.abs()),
                        "{activation:?} (H{k} v)[{i}]: {} vs {numeric}",
                        hv[i]
                    );
                }
            }
        }
    }

    /// Every head with its output and target counts: fixed σ, learned σ, heteroscedastic with
    /// either link, categorical.
    fn every_head() -> [(KernelHead, usize, usize); 5] {
        [
            (KernelHead::Fixed { sigma: 0.2 }, 2, 2),
            (
                KernelHead::LearnedSigma {
                    log_sigma_offset: 0,
                    prior_mean: 0.0,
                    prior_sd: 1.0,
                },
                2,
                2,
            ),
            (
                KernelHead::Heteroscedastic {
                    softplus: false,
                    sigma_min: 1e-3,
                    sigma_max: 1e3,
                },
                4,
                2,
            ),
            (
                KernelHead::Heteroscedastic {
                    softplus: true,
                    sigma_min: 1e-3,
                    sigma_max: 1e3,
                },
                4,
                2,
            ),
            (KernelHead::Categorical, 3, 3),
        ]
    }

    /// `φ = ½ log det G + ½ pᵀG⁻¹p` against central differences of itself, for `spec`.
    fn check_metric_gradient(spec: &KernelSpec, rows: usize, theta: &[f64], prior: &[f64]) {
        let x = small_inputs(rows, spec.d_input());
        let p: Vec<f64> = (0..spec.dim)
            .map(|i| ((i * 5 % 9) as f64 - 4.0) / 3.0)
            .collect();
        let phi = |t: &[f64]| {
            let terms = riemannian_terms(spec, &x, t, prior, &p).unwrap();
            0.5 * terms.metric.log_det() + terms.kinetic_energy
        };
        let terms = riemannian_terms(spec, &x, theta, prior, &p).unwrap();
        let h = 1e-5;
        let scale = terms.gradient.iter().fold(1.0f64, |m, g| m.max(g.abs()));
        for i in 0..spec.dim {
            let (mut up, mut down) = (theta.to_vec(), theta.to_vec());
            up[i] += h;
            down[i] -= h;
            let numeric = (phi(&up) - phi(&down)) / (2.0 * h);
            assert!(
                (terms.gradient[i] - numeric).abs() < 1e-6 * scale,
                "{:?}: ∂φ/∂θ{i}: {} vs {numeric}",
                spec.head,
                terms.gradient[i]
            );
        }
        // The velocity is G⁻¹p: G times it gives p back.
        let g = gauss_newton_metric(spec, &x, theta, prior);
        for i in 0..spec.dim {
            let back: f64 = (0..spec.dim)
                .map(|j| g[i * spec.dim + j] * terms.velocity[j])
                .sum();
            assert!((back - p[i]).abs() < 1e-9 * (1.0 + p[i].abs()));
        }
    }

    #[test]
    fn the_gradient_of_the_metric_terms_matches_differences_of_them() {
        // φ(θ) = ½ log det G(θ) + ½ pᵀ G(θ)⁻¹ p on tanh nets, every head: a fixed σ (only the
        // network's curvature moves G), learned σ's (output k's part of G scales with e^{−2s_k}), the
        // heteroscedastic head with either link (Λ moves with the scale outputs) and the
        // categorical head (Λ = diag(p) − ppᵀ moves with all logits).
        for (head, outputs, targets) in every_head() {
            let spec = KernelSpec::dense(&[2, 4, outputs], KernelActivation::Tanh, head, targets);
            let mut theta = small_theta(spec.dim);
            if let KernelHead::LearnedSigma {
                log_sigma_offset, ..
            } = spec.head
            {
                // A different σ per output: each log σ_k scales only its own output's block.
                theta[log_sigma_offset] = -0.7;
                theta[log_sigma_offset + 1] = 0.4;
            }
            let prior: Vec<f64> = (0..spec.dim).map(|i| 0.5 + (i % 3) as f64).collect();
            // 7 rows: fewer curvature rows than parameters, the low-rank form; 20 rows: dense.
            let x7 = small_inputs(7, 2);
            assert!(
                matches!(
                    OutputPoint::new(&spec, &x7, &theta)
                        .metric(&spec, &prior)
                        .unwrap(),
                    MetricFactor::LowRank(_)
                ),
                "{head:?}"
            );
            check_metric_gradient(&spec, 7, &theta, &prior);
            let x20 = small_inputs(20, 2);
            assert!(
                matches!(
                    OutputPoint::new(&spec, &x20, &theta)
                        .metric(&spec, &prior)
                        .unwrap(),
                    MetricFactor::Dense(_)
                ),
                "{head:?}"
            );
            check_metric_gradient(&spec, 20, &theta, &prior);
        }
    }

    #[test]
    fn the_potential_and_its_gradient_agree_for_every_head_and_prior() {
        for (head, outputs, targets) in every_head() {
            let spec = KernelSpec::dense(&[2, 4, outputs], KernelActivation::Tanh, head, targets);
            let x = small_inputs(6, 2);
            let y: Vec<f64> = match head {
                KernelHead::Categorical => (0..6 * 3)
                    .map(|i| if i % 3 == (i / 3) % 3 { 1.0 } else { 0.0 })
                    .collect(),
                _ => (0..6 * targets)
                    .map(|i| ((i * 3 % 5) as f64 - 2.0) / 4.0)
                    .collect(),
            };
            let theta = small_theta(spec.dim);
            // Normal on the even coordinates, Laplace on the odd ones.
            let quadratic: Vec<f64> = (0..spec.dim)
                .map(|i| if i % 2 == 0 { 1.5 } else { 0.0 })
                .collect();
            let absolute: Vec<f64> = (0..spec.dim)
                .map(|i| if i % 2 == 1 { 2.0 } else { 0.0 })
                .collect();
            let prior = DiagonalPrior {
                quadratic: &quadratic,
                absolute: &absolute,
                constant: -3.0,
            };
            let (u, gradient) = posterior_potential(&spec, &x, &y, &theta, prior).unwrap();
            let h = 1e-6;
            for i in 0..spec.dim {
                let (mut up, mut down) = (theta.clone(), theta.clone());
                up[i] += h;
                down[i] -= h;
                let numeric = (posterior_potential(&spec, &x, &y, &up, prior).unwrap().0
                    - posterior_potential(&spec, &x, &y, &down, prior).unwrap().0)
                    / (2.0 * h);
                assert!(
                    (gradient[i] - numeric).abs() < 1e-6 * (1.0 + numeric.abs()),
                    "{head:?} ∂U/∂θ{i}: {} vs {numeric}",
                    gradient[i]
                );
            }
            if let KernelHead::Fixed { sigma } = head {
                // The value itself, from the outputs: Gaussian terms with their constant, the
                // prior's quadratic and absolute terms, minus its constant.
                let f = output_jacobian(&spec, &x, &theta).values;
                let squares: f64 = f.iter().zip(&y).map(|(f, y)| (y - f) * (y - f)).sum();
                let likelihood = 0.5 * squares / (sigma * sigma)
                    + 12.0 * (sigma.ln() + 0.5 * (2.0 * std::f64::consts::PI).ln());
                let penalty: f64 = theta
                    .iter()
                    .enumerate()
                    .map(|(i, t)| 0.5 * quadratic[i] * t * t + absolute[i] * t.abs())
                    .sum();
                let expected = likelihood + penalty + 3.0;
                assert!(
                    (u - expected).abs() < 1e-10 * expected.abs(),
                    "U = {u}, expected {expected}"
                );
            }
        }
        let spec = KernelSpec::dense(
            &[2, 4, 2],
            KernelActivation::Tanh,
            KernelHead::Fixed { sigma: 0.2 },
            2,
        );
        let zeros = vec![0.0; spec.dim];
        let prior = DiagonalPrior {
            quadratic: &zeros,
            absolute: &zeros,
            constant: 0.0,
        };
        let err = posterior_potential(
            &spec,
            &small_inputs(3, 2),
            &[0.0; 5],
            &small_theta(spec.dim),
            prior,
        )
        .unwrap_err();
        assert!(err.to_string().contains("target values"), "{err}");
    }

    #[test]
    fn a_laplace_prior_enters_the_metric_through_its_fisher_information() {
        let (quadratic, absolute) = (vec![1.0, 0.0, 0.25], vec![0.0, 3.0, 0.5]);
        let prior = DiagonalPrior {
            quadratic: &quadratic,
            absolute: &absolute,
            constant: 0.0,
        };
        assert_eq!(prior.metric_diagonal(), vec![1.0, 9.0, 0.5]);
    }

    #[test]
    fn without_hidden_layers_the_metric_is_the_gaussian_posteriors_precision() {
        // f = x W + b with y ~ N(f, σ²) and θ ~ N(0, s²): the log posterior is quadratic with
        // precision (1/σ²) Σ_n φ_n φ_nᵀ ⊗ I_K + I/s², φ = (x, 1), whatever θ is.
        let (sigma, s) = (0.3, 2.0);
        let spec = KernelSpec::dense(
            &[2, 2],
            KernelActivation::Tanh,
            KernelHead::Fixed { sigma },
            2,
        );
        let x = small_inputs(5, 2);
        let prior = vec![1.0 / (s * s); spec.dim];
        let metric = gauss_newton_metric(&spec, &x, &small_theta(spec.dim), &prior);
        let dim = spec.dim; // W[i, k] at 2i + k, b[k] at 4 + k
        let feature = |n: usize, i: usize| if i < 2 { x[n * 2 + i] } else { 1.0 };
        for a in 0..dim {
            for b in 0..dim {
                let (ia, ka) = if a < 4 { (a / 2, a % 2) } else { (2, a - 4) };
                let (ib, kb) = if b < 4 { (b / 2, b % 2) } else { (2, b - 4) };
                let mut expected = if ka == kb {
                    (0..5).map(|n| feature(n, ia) * feature(n, ib)).sum::<f64>() / (sigma * sigma)
                } else {
                    0.0
                };
                if a == b {
                    expected += 1.0 / (s * s);
                }
                assert!(
                    (metric[a * dim + b] - expected).abs() < 1e-10,
                    "G[{a}, {b}] = {} vs {expected}",
                    metric[a * dim + b]
                );
            }
        }
    }

    #[test]
    fn categorical_and_heteroscedastic_heads_weight_the_outputs_by_their_fisher_information() {
        // For one row, G − P = Jᵀ Λ J; check Λ through the quadratic form v ↦ (Jv)ᵀ Λ (Jv).
        let x = small_inputs(1, 3);
        for (head, outputs, targets) in [
            (KernelHead::Categorical, 3, 3),
            (
                KernelHead::Heteroscedastic {
                    softplus: false,
                    sigma_min: 1e-3,
                    sigma_max: 1e3,
                },
                4,
                2,
            ),
            (
                KernelHead::Heteroscedastic {
                    softplus: true,
                    sigma_min: 1e-3,
                    sigma_max: 1e3,
                },
                4,
                2,
            ),
        ] {
            let spec = KernelSpec::dense(&[3, 4, outputs], KernelActivation::Tanh, head, targets);
            let theta = small_theta(spec.dim);
            let metric = gauss_newton_metric(&spec, &x, &theta, &vec![0.0; spec.dim]);
            let jac = output_jacobian(&spec, &x, &theta);
            let v: Vec<f64> = (0..spec.dim)
                .map(|i| ((i * 3 % 7) as f64 - 3.0) / 4.0)
                .collect();
            let jv: Vec<f64> = (0..outputs)
                .map(|k| jac.row(0, k).iter().zip(&v).map(|(a, b)| a * b).sum())
                .collect();
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
            let quadratic: f64 = (0..spec.dim)
                .map(|a| {
                    (0..spec.dim)
                        .map(|b| v[a] * metric[a * spec.dim + b] * v[b])
                        .sum::<f64>()
                })
                .sum();
            assert!(
                (quadratic - expected).abs() < 1e-10 * (1.0 + expected.abs()),
                "{head:?}: {quadratic} vs {expected}"
            );
            assert!(
                quadratic >= -1e-12,
                "{head:?}: the metric must be positive semidefinite"
            );
        }
    }

    #[test]
    fn a_learned_sigma_gets_its_own_fisher_block() {
        let spec = KernelSpec::dense(
            &[2, 3, 1],
            KernelActivation::Tanh,
            KernelHead::LearnedSigma {
                log_sigma_offset: 0,
                prior_mean: 0.0,
                prior_sd: 1.0,
            },
            1,
        );
        let mut theta = small_theta(spec.dim);
        let ls = spec.dim - 1;
        theta[ls] = (0.5f64).ln();
        let x = small_inputs(7, 2);
        let metric = gauss_newton_metric(&spec, &x, &theta, &vec![1.0; spec.dim]);
        assert!((metric[ls * spec.dim + ls] - (2.0 * 7.0 + 1.0)).abs() < 1e-12);
        assert!(
            (0..ls).all(|i| metric[i * spec.dim + ls] == 0.0 && metric[ls * spec.dim + i] == 0.0)
        );
        // The weights' block is (1/σ²) JᵀJ + I with σ = 0.5.
        let fixed = KernelSpec::dense(
            &[2, 3, 1],
            KernelActivation::Tanh,
            KernelHead::Fixed { sigma: 0.5 },
            1,
        );
        let reference = gauss_newton_metric(&fixed, &x, &theta[..ls], &vec![1.0; ls]);
        for a in 0..ls {
            for b in 0..ls {
                assert!((metric[a * spec.dim + b] - reference[a * ls + b]).abs() < 1e-12);
            }
        }
    }

    #[test]
    fn each_learned_sigma_weights_only_its_own_output() {
        // Two targets, σ₁ = 0.5 and σ₂ = 2: G = Σ_n Σ_k σ_k⁻² J_nk J_nkᵀ + I on the weights, and
        // 2N + 1 on each log σ_k with no coupling.
        let spec = KernelSpec::dense(
            &[2, 3, 2],
            KernelActivation::Tanh,
            KernelHead::LearnedSigma {
                log_sigma_offset: 0,
                prior_mean: 0.0,
                prior_sd: 1.0,
            },
            2,
        );
        let KernelHead::LearnedSigma {
            log_sigma_offset: ls,
            ..
        } = spec.head
        else {
            unreachable!()
        };
        assert_eq!(ls + 2, spec.dim);
        let mut theta = small_theta(spec.dim);
        theta[ls] = (0.5f64).ln();
        theta[ls + 1] = (2.0f64).ln();
        let x = small_inputs(7, 2);
        let metric = gauss_newton_metric(&spec, &x, &theta, &vec![1.0; spec.dim]);
        let jac = output_jacobian(&spec, &x, &theta);
        for a in 0..spec.dim {
            for b in 0..spec.dim {
                let expected = if a >= ls || b >= ls {
                    if a == b {
                        2.0 * 7.0 + 1.0
                    } else {
                        0.0
                    }
                } else {
                    let weights = (0..7)
                        .map(|n| {
                            jac.row(n, 0)[a] * jac.row(n, 0)[b] / 0.25
                                + jac.row(n, 1)[a] * jac.row(n, 1)[b] / 4.0
                        })
                        .sum::<f64>();
                    weights + if a == b { 1.0 } else { 0.0 }
                };
                assert!(
                    (metric[a * spec.dim + b] - expected).abs() < 1e-10,
                    "G[{a}, {b}] = {} vs {expected}",
                    metric[a * spec.dim + b]
                );
            }
        }
    }
}

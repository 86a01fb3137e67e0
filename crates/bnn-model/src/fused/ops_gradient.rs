//! The MLP log density and its handwritten gradient as batched tensor operations of any backend.
//!
//! This is the body of the fused operation on devices without the host kernel (wgpu and the
//! other CubeCL runtimes), and an alternative on the CPU backends. Forward and backward run as
//! one program of `[C, N, ·]` batched products and elementwise operations on the backend's own
//! primitives: no autodiff graph is recorded, nothing is read back, and the result enters Burn's
//! autodiff as the single node of [`crate::fused::fused_mlp`].
//!
//! Why: the plain autodiff graph of the same network issues its forward operations, records
//! them, then replays one backward operation per forward one (plus the slicing and reshaping of
//! θ into weights). Here the backward reuses the activation derivatives saved in the forward and
//! slices θ once per layer; every operation is still batched across the C chains.

use crate::fused::terms::Terms;
use crate::prior::PriorCoefficients;
use bnn_kernels::{KernelActivation, KernelHead, KernelSpec};
use burn::backend::tensor::FloatTensor;
use burn::backend::{get_or_init_device_settings, Backend, Scalar, TensorMetadata};
use burn::tensor::{DType, FloatDType, Shape, Slice, TensorData};
use std::f64::consts::PI;

/// Training data and prior coefficients uploaded to one device in one float type.
pub(crate) struct DeviceTensors<B: Backend> {
    pub device: B::Device,
    pub dtype: DType,
    /// Inputs `[1, N, d_in]`.
    x: FloatTensor<B>,
    /// Targets `[1, N, T]` (one-hot rows `[1, N, K]` for the categorical head).
    y: FloatTensor<B>,
    /// Quadratic prior coefficients `[1, D]` (1/s² for a Normal prior).
    prior_quadratic: FloatTensor<B>,
    /// Absolute-value coefficients `[1, D]` (1/b for a Laplace prior), when any is non-zero.
    prior_absolute: Option<FloatTensor<B>>,
}

impl<B: Backend> DeviceTensors<B> {
    /// Training rows N.
    pub(crate) fn rows(&self) -> usize {
        self.x.shape()[1]
    }

    /// Inputs `[1, N, d_in]` and targets `[1, N, T]`.
    pub(crate) fn data_tensors(&self) -> (FloatTensor<B>, FloatTensor<B>) {
        (self.x.clone(), self.y.clone())
    }

    /// The prior's quadratic and (when any is non-zero) absolute-value coefficients, `[1, D]`.
    pub(crate) fn prior_tensors(&self) -> (FloatTensor<B>, Option<FloatTensor<B>>) {
        (self.prior_quadratic.clone(), self.prior_absolute.clone())
    }

    /// Whether any coordinate has a Laplace (|θ|) term.
    pub(crate) fn has_laplace(&self) -> bool {
        self.prior_absolute.is_some()
    }

    /// Uploads host data (`x`: `rows × d_in`, `y`: `rows × columns`, row major).
    pub(crate) fn upload(
        x: &[f64],
        y: &[f64],
        rows: usize,
        spec: &KernelSpec,
        prior: &PriorCoefficients,
        device: &B::Device,
        dtype: DType,
    ) -> Self {
        let upload = |values: &[f64], shape: Shape| {
            B::float_from_data(
                TensorData::new(values.to_vec(), shape).convert_dtype(dtype),
                device,
            )
        };
        let d = spec.dim;
        Self {
            device: device.clone(),
            dtype,
            x: upload(x, Shape::new([1, rows, spec.d_input()])),
            y: upload(y, Shape::new([1, rows, spec.target_columns])),
            prior_quadratic: upload(&prior.quadratic, Shape::new([1, d])),
            prior_absolute: prior
                .has_laplace()
                .then(|| upload(&prior.absolute, Shape::new([1, d]))),
        }
    }
}

fn scalar(value: f64) -> Scalar {
    Scalar::Float(value)
}

/// Columns `range` of a `[C, D]` tensor.
fn columns<B: Backend>(theta: &FloatTensor<B>, start: usize, len: usize) -> FloatTensor<B> {
    let c = theta.shape()[0];
    B::float_slice(
        theta.clone(),
        &[Slice::from(0..c), Slice::from(start..start + len)],
    )
}

/// Last-axis slice `start..start + len` of a `[C, N, K]` tensor.
fn last_axis<B: Backend>(t: &FloatTensor<B>, start: usize, len: usize) -> FloatTensor<B> {
    let s = t.shape();
    B::float_slice(
        t.clone(),
        &[
            Slice::from(0..s[0]),
            Slice::from(0..s[1]),
            Slice::from(start..start + len),
        ],
    )
}

/// Sum over the rows and outputs of `[C, N, K]`, as `[C]`.
fn sum_chains<B: Backend>(t: FloatTensor<B>) -> FloatTensor<B> {
    let c = t.shape()[0];
    B::float_reshape(B::float_sum_dim(B::float_sum_dim(t, 2), 1), Shape::new([c]))
}

/// 1 where `mask` holds, else 0, in float type `dtype`.
fn indicator<B: Backend>(
    mask: burn::backend::tensor::BoolTensor<B>,
    dtype: DType,
) -> FloatTensor<B> {
    B::bool_into_float(mask, FloatDType::from(dtype))
}

/// σ(z) = (tanh(z/2) + 1)/2, the same formula as the plain path's sigmoid.
fn sigmoid<B: Backend>(z: FloatTensor<B>) -> FloatTensor<B> {
    B::float_mul_scalar(
        B::float_add_scalar(
            B::float_tanh(B::float_mul_scalar(z, scalar(0.5))),
            scalar(1.0),
        ),
        scalar(0.5),
    )
}

/// Hidden activation `a = φ(z)` and its derivative `φ'(z)` (`None`: identically 1).
pub(crate) fn activate<B: Backend>(
    z: FloatTensor<B>,
    activation: KernelActivation,
) -> (FloatTensor<B>, Option<FloatTensor<B>>) {
    let dtype = z.dtype();
    let bool_dtype = get_or_init_device_settings::<B>(&z.device()).bool_dtype;
    let positive = |z: &FloatTensor<B>| {
        indicator::<B>(
            B::float_greater_elem(z.clone(), scalar(0.0), bool_dtype),
            dtype,
        )
    };
    match activation {
        KernelActivation::Tanh => {
            let a = B::float_tanh(z);
            let d = B::float_add_scalar(
                B::float_neg(B::float_mul(a.clone(), a.clone())),
                scalar(1.0),
            );
            (a, Some(d))
        }
        KernelActivation::Sigmoid => {
            let a = sigmoid::<B>(z);
            let d = B::float_mul(
                a.clone(),
                B::float_add_scalar(B::float_neg(a.clone()), scalar(1.0)),
            );
            (a, Some(d))
        }
        KernelActivation::Relu => {
            let d = positive(&z);
            (B::float_mul(z, d.clone()), Some(d))
        }
        KernelActivation::LeakyRelu { slope } => {
            // φ'(z) = 1 for z > 0, else the slope; φ(z) = z φ'(z).
            let d = B::float_add_scalar(
                B::float_mul_scalar(positive(&z), scalar(1.0 - slope)),
                scalar(slope),
            );
            (B::float_mul(z, d.clone()), Some(d))
        }
        KernelActivation::Silu => {
            let s = sigmoid::<B>(z.clone());
            let a = B::float_mul(z.clone(), s.clone());
            // φ'(z) = s (1 + z (1 − s)) = s + a (1 − s)
            let one_minus_s = B::float_add_scalar(B::float_neg(s.clone()), scalar(1.0));
            let d = B::float_add(s, B::float_mul(a.clone(), one_minus_s));
            (a, Some(d))
        }
        KernelActivation::Gelu => {
            // φ(z) = z Φ(z), Φ = (1 + erf(z/√2))/2; φ'(z) = Φ(z) + z e^{−z²/2}/√(2π).
            let cdf = B::float_mul_scalar(
                B::float_add_scalar(
                    B::float_erf(B::float_mul_scalar(
                        z.clone(),
                        scalar(std::f64::consts::FRAC_1_SQRT_2),
                    )),
                    scalar(1.0),
                ),
                scalar(0.5),
            );
            let density = B::float_mul_scalar(
                B::float_exp(B::float_mul_scalar(
                    B::float_mul(z.clone(), z.clone()),
                    scalar(-0.5),
                )),
                scalar(1.0 / (2.0 * PI).sqrt()),
            );
            let a = B::float_mul(z.clone(), cdf.clone());
            let d = B::float_add(cdf, B::float_mul(z, density));
            (a, Some(d))
        }
        KernelActivation::Softplus => {
            // φ(z) = max(z, 0) + log1p(e^{−|z|}), φ'(z) = σ(z).
            let a = B::float_add(
                B::float_clamp_min(z.clone(), scalar(0.0)),
                B::float_log1p(B::float_exp(B::float_neg(B::float_abs(z.clone())))),
            );
            (a, Some(sigmoid::<B>(z)))
        }
        KernelActivation::TruncRelu => {
            let below_one = indicator::<B>(
                B::float_lower_elem(z.clone(), scalar(1.0), bool_dtype),
                dtype,
            );
            let d = B::float_mul(positive(&z), below_one);
            (B::float_clamp(z, scalar(0.0), scalar(1.0)), Some(d))
        }
        KernelActivation::Identity => (z, None),
    }
}

/// Log likelihood `[C]` and its gradient with respect to the outputs `[C, N, K]` (and to the
/// learned log σ's, `[C, K]`, for that head).
pub(crate) fn head<B: Backend>(
    spec: &KernelSpec,
    out: FloatTensor<B>,
    y: &FloatTensor<B>,
    theta: &FloatTensor<B>,
) -> (FloatTensor<B>, FloatTensor<B>, Option<FloatTensor<B>>) {
    let shape = out.shape();
    let (c, n, k) = (shape[0], shape[1], shape[2]);
    let half_log_2pi = 0.5 * (2.0 * PI).ln();
    let dtype = out.dtype();
    match spec.head {
        KernelHead::Fixed { sigma } => {
            let r = B::float_sub(y.clone(), out);
            let ll = B::float_add_scalar(
                B::float_mul_scalar(
                    sum_chains::<B>(B::float_mul(r.clone(), r.clone())),
                    scalar(-0.5 / (sigma * sigma)),
                ),
                scalar(-((sigma.ln() + half_log_2pi) * (n * k) as f64)),
            );
            (
                ll,
                B::float_mul_scalar(r, scalar(1.0 / (sigma * sigma))),
                None,
            )
        }
        KernelHead::LearnedSigma {
            log_sigma_offset,
            prior_mean,
            prior_sd,
        } => {
            // One σ per output column.
            let log_sd = columns::<B>(theta, log_sigma_offset, k); // [C, K]
            let precision = B::float_exp(B::float_mul_scalar(log_sd.clone(), scalar(-2.0))); // σ_k⁻²
            let r = B::float_sub(y.clone(), out);
            let sq = B::float_reshape(
                B::float_sum_dim(B::float_mul(r.clone(), r.clone()), 1),
                Shape::new([c, k]),
            );
            let standardized = B::float_div_scalar(
                B::float_sub_scalar(log_sd.clone(), scalar(prior_mean)),
                scalar(prior_sd),
            );
            let scaled_sq = B::float_mul(sq, precision.clone());
            let mut per_column = B::float_mul_scalar(scaled_sq.clone(), scalar(-0.5));
            per_column = B::float_sub(per_column, B::float_mul_scalar(log_sd, scalar(n as f64)));
            per_column = B::float_sub(
                per_column,
                B::float_mul_scalar(
                    B::float_mul(standardized.clone(), standardized.clone()),
                    scalar(0.5),
                ),
            );
            let ll = B::float_reshape(B::float_sum_dim(per_column, 1), Shape::new([c]));
            let ll = B::float_add_scalar(
                ll,
                scalar(-((half_log_2pi * n as f64 + prior_sd.ln() + half_log_2pi) * k as f64)),
            );
            // ∂/∂ log σ_k: Σ_n r_nk²/σ_k² − N − (log σ_k − m)/s²
            let g_log_sd = B::float_sub(
                B::float_add_scalar(scaled_sq, scalar(-(n as f64))),
                B::float_div_scalar(standardized, scalar(prior_sd)),
            );
            let g_out = B::float_mul(r, B::float_reshape(precision, Shape::new([c, 1, k])));
            (ll, g_out, Some(g_log_sd))
        }
        KernelHead::Heteroscedastic {
            softplus,
            sigma_min,
            sigma_max,
        } => {
            let t = k / 2;
            let mean = last_axis::<B>(&out, 0, t);
            let raw = last_axis::<B>(&out, t, t);
            let bool_dtype = get_or_init_device_settings::<B>(&out.device()).bool_dtype;
            // log σ and ∂ log σ / ∂ raw (zero where the clip is active).
            let (log_sd, dlog_sd) = if softplus {
                // softplus(o) = max(o, 0) + log1p(exp(−|o|)); its derivative is σ(o).
                let sp = B::float_add(
                    B::float_clamp_min(raw.clone(), scalar(0.0)),
                    B::float_log1p(B::float_exp(B::float_neg(B::float_abs(raw.clone())))),
                );
                let inside = B::float_mul(
                    indicator::<B>(
                        B::float_greater_equal_elem(sp.clone(), scalar(sigma_min), bool_dtype),
                        dtype,
                    ),
                    indicator::<B>(
                        B::float_lower_equal_elem(sp.clone(), scalar(sigma_max), bool_dtype),
                        dtype,
                    ),
                );
                let sd = B::float_clamp(sp, scalar(sigma_min), scalar(sigma_max));
                let d = B::float_div(B::float_mul(sigmoid::<B>(raw), inside), sd.clone());
                (B::float_log(sd), d)
            } else {
                let (lo, hi) = (sigma_min.ln(), sigma_max.ln());
                let inside = B::float_mul(
                    indicator::<B>(
                        B::float_greater_equal_elem(raw.clone(), scalar(lo), bool_dtype),
                        dtype,
                    ),
                    indicator::<B>(
                        B::float_lower_equal_elem(raw.clone(), scalar(hi), bool_dtype),
                        dtype,
                    ),
                );
                (B::float_clamp(raw, scalar(lo), scalar(hi)), inside)
            };
            let inv_sd = B::float_exp(B::float_neg(log_sd.clone()));
            let z = B::float_mul(B::float_sub(y.clone(), mean), inv_sd.clone());
            let z2 = B::float_mul(z.clone(), z.clone());
            let per_point = B::float_sub(B::float_mul_scalar(z2.clone(), scalar(-0.5)), log_sd);
            let ll = B::float_add_scalar(
                sum_chains::<B>(per_point),
                scalar(-(half_log_2pi * (n * t) as f64)),
            );
            // ∂/∂μ = z/σ; ∂/∂ log σ = z² − 1.
            let g_mean = B::float_mul(z, inv_sd);
            let g_raw = B::float_mul(B::float_add_scalar(z2, scalar(-1.0)), dlog_sd);
            (ll, B::float_cat(vec![g_mean, g_raw], 2), None)
        }
        KernelHead::Categorical => {
            // log softmax with the row maximum subtracted; ∂/∂o = y − softmax(o) Σ_k y_k.
            let shifted = B::float_sub(out.clone(), B::float_max_dim(out, 2));
            let exp = B::float_exp(shifted.clone());
            let total = B::float_sum_dim(exp.clone(), 2);
            let log_p = B::float_sub(shifted, B::float_log(total.clone()));
            let ll = sum_chains::<B>(B::float_mul(log_p, y.clone()));
            let p = B::float_div(exp, total);
            let label_mass = B::float_sum_dim(y.clone(), 2);
            (
                ll,
                B::float_sub(y.clone(), B::float_mul(p, label_mass)),
                None,
            )
        }
    }
}

/// The elementwise stages of the program, which a backend may replace with fused kernels
/// (the CubeCL backend does, see [`crate::fused::cube_kernels`]); the defaults are tensor operations.
pub(crate) trait FusedStages: Backend {
    /// `product` `[C, N, H]` + `bias` `[C, 1, H]` → (φ(z), φ'(z); `None`: identically 1).
    fn bias_activation(
        product: FloatTensor<Self>,
        bias: FloatTensor<Self>,
        activation: KernelActivation,
    ) -> (FloatTensor<Self>, Option<FloatTensor<Self>>) {
        activate::<Self>(Self::float_add(product, bias), activation)
    }

    /// The largest tensor the device can hold in one buffer, if it has such a limit
    /// (`tensor`: any tensor on the device).
    fn max_tensor_bytes(_tensor: &FloatTensor<Self>) -> Option<u64> {
        None
    }

    /// Outputs `[C, N, K]` → (log likelihood `[C]`, `∂/∂out`, `∂/∂ log σ` `[C, 1]` if learned).
    fn head(
        spec: &KernelSpec,
        out: FloatTensor<Self>,
        y: &FloatTensor<Self>,
        theta: &FloatTensor<Self>,
    ) -> (
        FloatTensor<Self>,
        FloatTensor<Self>,
        Option<FloatTensor<Self>>,
    ) {
        head::<Self>(spec, out, y, theta)
    }
}

/// The constant part of the log likelihood that the kernels' per-row sums leave out.
pub(crate) fn head_constant(head: KernelHead, rows: usize, outputs: usize) -> f64 {
    let half_log_2pi = 0.5 * (2.0 * PI).ln();
    match head {
        KernelHead::Fixed { sigma } => -((sigma.ln() + half_log_2pi) * (rows * outputs) as f64),
        KernelHead::Heteroscedastic { .. } => -(half_log_2pi * (rows * outputs / 2) as f64),
        KernelHead::Categorical => 0.0,
        KernelHead::LearnedSigma { .. } => {
            unreachable!("the learned-σ head is computed by tensor operations")
        }
    }
}

/// Log likelihood (or posterior) `[C]` of θ `[C, D]` and, when asked, its gradient `[C, D]`.
pub(crate) fn evaluate<B: FusedStages>(
    spec: &KernelSpec,
    data: &DeviceTensors<B>,
    prior_constant: f64,
    theta: FloatTensor<B>,
    terms: Terms,
    with_gradient: bool,
) -> (FloatTensor<B>, Option<FloatTensor<B>>) {
    let c = theta.shape()[0];
    let last = spec.layers.len() - 1;
    // Forward: keep each layer's input and the activation derivative for the backward pass.
    let mut inputs = Vec::with_capacity(spec.layers.len());
    let mut derivatives = Vec::with_capacity(spec.layers.len());
    let mut weights = Vec::with_capacity(spec.layers.len());
    let mut h = data.x.clone();
    for (i, layer) in spec.layers.iter().enumerate() {
        let w = B::float_reshape(
            columns::<B>(&theta, layer.weight_offset, layer.d_in * layer.d_out),
            Shape::new([c, layer.d_in, layer.d_out]),
        );
        let b = B::float_reshape(
            columns::<B>(&theta, layer.bias_offset, layer.d_out),
            Shape::new([c, 1, layer.d_out]),
        );
        let product = B::float_matmul(h.clone(), w.clone());
        inputs.push(h);
        weights.push(w);
        if i < last {
            let (a, d) = B::bias_activation(product, b, spec.activation);
            derivatives.push(d);
            h = a;
        } else {
            h = B::float_add(product, b);
        }
    }
    let (mut value, g_out, g_log_sd) = B::head(spec, h, &data.y, &theta);
    let mut gradient = None;
    if with_gradient {
        // Backward, last layer first: ∂W = hᵀ g, ∂b = Σ_rows g, g ← (g Wᵀ) ⊙ φ'(z).
        let mut pieces: Vec<(usize, FloatTensor<B>)> =
            Vec::with_capacity(2 * spec.layers.len() + 1);
        let mut g = g_out;
        for i in (0..spec.layers.len()).rev() {
            let layer = spec.layers[i];
            let h_in = inputs.pop().expect("one input per layer");
            let w = weights.pop().expect("one weight per layer");
            let d_w = B::float_matmul(B::float_swap_dims(h_in, 1, 2), g.clone());
            pieces.push((
                layer.weight_offset,
                B::float_reshape(d_w, Shape::new([c, layer.d_in * layer.d_out])),
            ));
            let d_b = B::float_sum_dim(g.clone(), 1);
            pieces.push((
                layer.bias_offset,
                B::float_reshape(d_b, Shape::new([c, layer.d_out])),
            ));
            if i > 0 {
                g = B::float_matmul(g, B::float_swap_dims(w, 1, 2));
                if let Some(d) = derivatives.pop().expect("one derivative per hidden layer") {
                    g = B::float_mul(g, d);
                }
            }
        }
        if let (
            Some(g_log_sd),
            KernelHead::LearnedSigma {
                log_sigma_offset, ..
            },
        ) = (g_log_sd, spec.head)
        {
            pieces.push((log_sigma_offset, g_log_sd));
        }
        // The pieces tile θ (checked when the operation is built); order them by offset.
        pieces.sort_by_key(|(offset, _)| *offset);
        gradient = Some(B::float_cat(
            pieces.into_iter().map(|(_, t)| t).collect(),
            1,
        ));
    }
    if terms == Terms::Posterior {
        // log prior = constant − ½ Σ a θ² − Σ b |θ|; gradient −a θ − b sign θ.
        let q_theta = B::float_mul(theta.clone(), data.prior_quadratic.clone());
        let mut lp = B::float_mul_scalar(
            B::float_sum_dim(B::float_mul(q_theta.clone(), theta.clone()), 1),
            scalar(-0.5),
        );
        let mut g_prior = B::float_neg(q_theta);
        if let Some(absolute) = &data.prior_absolute {
            let b_sign = B::float_mul(B::float_sign(theta.clone()), absolute.clone());
            lp = B::float_sub(
                lp,
                B::float_sum_dim(
                    B::float_mul(B::float_abs(theta.clone()), absolute.clone()),
                    1,
                ),
            );
            g_prior = B::float_sub(g_prior, b_sign);
        }
        value = B::float_add(
            value,
            B::float_add_scalar(
                B::float_reshape(lp, Shape::new([c])),
                scalar(prior_constant),
            ),
        );
        gradient = gradient.map(|g| B::float_add(g, g_prior));
    }
    (value, gradient)
}

/// Bytes per chain of the program's largest intermediate: a `[rows, width]` block of the widest
/// layer input/output (or of the head's outputs and targets).
pub(crate) fn largest_tensor_bytes_per_chain(spec: &KernelSpec, rows: usize, dtype: DType) -> u64 {
    let widest = spec
        .layers
        .iter()
        .map(|l| l.d_in.max(l.d_out))
        .chain([spec.target_columns])
        .max()
        .unwrap_or(1);
    (rows * widest * dtype.size()) as u64
}

/// How many of `chains` one run may take so that its largest tensor stays within `limit` bytes
/// (at least one; all of them without a limit).
pub(crate) fn chains_per_block(chains: usize, bytes_per_chain: u64, limit: Option<u64>) -> usize {
    match limit {
        Some(limit) => ((limit / bytes_per_chain.max(1)) as usize).clamp(1, chains.max(1)),
        None => chains.max(1),
    }
}

/// Whether the layers' weights and biases (and the learned log σ) cover `0..dim` exactly once,
/// so that concatenating the gradient pieces in offset order lays them out as θ.
pub(crate) fn pieces_tile_theta(spec: &KernelSpec) -> bool {
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    for layer in &spec.layers {
        ranges.push((layer.weight_offset, layer.d_in * layer.d_out));
        ranges.push((layer.bias_offset, layer.d_out));
    }
    if let KernelHead::LearnedSigma {
        log_sigma_offset, ..
    } = spec.head
    {
        ranges.push((log_sigma_offset, spec.target_columns));
    }
    ranges.sort();
    let mut next = 0;
    for (start, len) in ranges {
        if start != next {
            return false;
        }
        next = start + len;
    }
    next == spec.dim
}

#[cfg(test)]
mod tests {
    use super::*;
    use bnn_kernels::KernelLayer;

    #[test]
    fn blocks_of_chains_fit_the_limit() {
        // 1-50-1 net on 80 rows in f32: the widest block is 80 × 50 × 4 bytes per chain.
        let layers = vec![
            KernelLayer {
                d_in: 1,
                d_out: 50,
                weight_offset: 0,
                bias_offset: 50,
            },
            KernelLayer {
                d_in: 50,
                d_out: 1,
                weight_offset: 100,
                bias_offset: 150,
            },
        ];
        let spec = KernelSpec {
            layers,
            activation: KernelActivation::Tanh,
            head: KernelHead::Fixed { sigma: 0.1 },
            target_columns: 1,
            dim: 151,
        };
        let per_chain = largest_tensor_bytes_per_chain(&spec, 80, DType::F32);
        assert_eq!(per_chain, 16_000);
        assert_eq!(chains_per_block(4096, per_chain, None), 4096);
        assert_eq!(chains_per_block(4096, per_chain, Some(128 << 20)), 4096);
        assert_eq!(chains_per_block(10_000, per_chain, Some(128 << 20)), 8388);
        assert_eq!(chains_per_block(10, per_chain, Some(47_999)), 2);
        // A limit below one chain still runs one chain at a time (the device reports the error).
        assert_eq!(chains_per_block(10, per_chain, Some(10)), 1);
        assert_eq!(
            largest_tensor_bytes_per_chain(&spec, 80, DType::F64),
            32_000
        );
    }
}

//! CubeCL kernels for the elementwise parts of the fused MLP program on GPU runtimes.
//!
//! [`crate::fused::ops_gradient`] writes the forward and handwritten backward as backend tensor
//! operations; on a GPU each of them is a kernel launch and a trip through memory. Two kernels
//! fuse the elementwise runs of that program:
//! - `bias_activation`: `z = (h W) + b`, `a = φ(z)`, `φ'(z)` in one pass (instead of 4–7 ops);
//! - `regression_head` / `categorical_head`: one unit per (chain, row) computes that row's log
//!   likelihood term and the gradient with respect to the row's outputs (instead of ~20 ops).
//!
//! The matrix products stay Burn's (autotuned) matmul. Tensors other than f32/f64, or not laid
//! out contiguously, fall back to the tensor-operation program.

use bnn_kernels::{KernelActivation, KernelHead, KernelSpec};
use burn::backend::ops::FloatTensorOps;
use burn::backend::Cube;
use burn::tensor::{DType, Shape};
use burn_cubecl::cubecl;
use burn_cubecl::ops::numeric::empty_device_dtype;
use burn_cubecl::tensor::CubeTensor;
use cubecl::prelude::*;

/// Comptime codes of the hidden activations (shared with [`crate::fused::cube_network`]).
pub(crate) const TANH: u32 = 0;
pub(crate) const SIGMOID: u32 = 1;
pub(crate) const RELU: u32 = 2;
pub(crate) const LEAKY_RELU: u32 = 3;
pub(crate) const SILU: u32 = 4;
pub(crate) const TRUNC_RELU: u32 = 5;
pub(crate) const IDENTITY: u32 = 6;
pub(crate) const GELU: u32 = 7;
pub(crate) const SOFTPLUS: u32 = 8;

/// Comptime codes of the regression heads.
pub(crate) const FIXED: u32 = 0;
pub(crate) const HETERO_EXP: u32 = 1;
pub(crate) const HETERO_SOFTPLUS: u32 = 2;

const UNITS_PER_CUBE: u32 = 256;

#[cube]
pub(crate) fn logistic<F: Float>(z: F) -> F {
    // The same formula as the plain path's sigmoid: (tanh(z/2) + 1)/2.
    (F::tanh(z * F::new(0.5)) + F::new(1.0)) * F::new(0.5)
}

/// (φ(z), φ'(z)) of a hidden unit; `slope`: the leaky ReLU's.
#[cube]
pub(crate) fn activate<F: Float>(z: F, slope: F, #[comptime] activation: u32) -> (F, F) {
    let zero = F::new(0.0);
    let one = F::new(1.0);
    let mut a = z;
    let mut d = one;
    if comptime![activation == TANH] {
        a = F::tanh(z);
        d = one - a * a;
    } else if comptime![activation == SIGMOID] {
        a = logistic::<F>(z);
        d = a * (one - a);
    } else if comptime![activation == RELU] {
        d = select(z > zero, one, zero);
        a = z * d;
    } else if comptime![activation == LEAKY_RELU] {
        d = select(z > zero, one, slope);
        a = z * d;
    } else if comptime![activation == SILU] {
        let s = logistic::<F>(z);
        a = z * s;
        d = s + a * (one - s);
    } else if comptime![activation == GELU] {
        // z Φ(z) with Φ = (1 + erf(z/√2))/2, as the plain path; φ' = Φ + z e^{−z²/2}/√(2π)
        // (0.707… = 1/√2, 0.398… = 1/√(2π)).
        let cdf = (F::erf(z * F::new(0.707_106_77)) + one) * F::new(0.5);
        a = z * cdf;
        d = cdf + z * F::exp(z * z * F::new(-0.5)) * F::new(0.398_942_3);
    } else if comptime![activation == SOFTPLUS] {
        a = max(z, zero) + F::log1p(F::exp(-F::abs(z)));
        d = logistic::<F>(z);
    } else if comptime![activation == TRUNC_RELU] {
        d = select(z > zero && z < one, one, zero);
        a = max(min(z, one), zero);
    }
    (a, d)
}

/// The heteroscedastic heads' (log σ, ∂ log σ / ∂ raw output): `lo`, `hi` clip log σ (exp link,
/// `softplus` false) or σ (softplus link); the derivative is zero where the clip holds.
#[cube]
#[allow(unused_assignments)] // both are set in a comptime branch
pub(crate) fn hetero_log_sd<F: Float>(raw: F, lo: F, hi: F, #[comptime] softplus: bool) -> (F, F) {
    let zero = F::new(0.0);
    let one = F::new(1.0);
    let mut log_sd = zero;
    let mut dlog_sd = zero;
    if comptime![softplus] {
        // softplus(o) = max(o, 0) + log1p(exp(−|o|)), derivative σ(o).
        let sp = max(raw, zero) + F::log1p(F::exp(-F::abs(raw)));
        let sd = max(min(sp, hi), lo);
        log_sd = F::ln(sd);
        dlog_sd = select(sp >= lo && sp <= hi, logistic::<F>(raw) / sd, zero);
    } else {
        log_sd = max(min(raw, hi), lo);
        dlog_sd = select(raw >= lo && raw <= hi, one, zero);
    }
    (log_sd, dlog_sd)
}

/// Sums `values[0..units)` into `values[0]` by halving; `units` (a power of two) is the cube's
/// size and every unit must call this, since each halving ends at a barrier; after it
/// `values[0]` is visible to all. Always the same pairing, so the sum is the same bits on every
/// run. (The widths are comptime: a runtime variable started from a comptime value fails
/// CubeCL's IR verification.)
#[cube]
pub(crate) fn sum_over_cube<F: Float>(
    values: &mut Shared<[F]>,
    unit: usize,
    #[comptime] units: u32,
) {
    #[unroll]
    for step in 0..comptime![units.trailing_zeros()] {
        let width = comptime![(units >> (step + 1)) as usize];
        if unit < width {
            values[unit] = values[unit] + values[unit + width];
        }
        sync_cube();
    }
}

/// The comptime code and leaky slope of an activation.
pub(crate) fn activation_code(activation: KernelActivation) -> (u32, f32) {
    match activation {
        KernelActivation::Tanh => (TANH, 0.0),
        KernelActivation::Sigmoid => (SIGMOID, 0.0),
        KernelActivation::Relu => (RELU, 0.0),
        KernelActivation::LeakyRelu { slope } => (LEAKY_RELU, slope as f32),
        KernelActivation::Silu => (SILU, 0.0),
        KernelActivation::Gelu => (GELU, 0.0),
        KernelActivation::Softplus => (SOFTPLUS, 0.0),
        KernelActivation::TruncRelu => (TRUNC_RELU, 0.0),
        KernelActivation::Identity => (IDENTITY, 0.0),
    }
}

/// `product`: `[C, N, H]` (h W), `bias`: `[C, H]` → `activated`, `derivative`: `[C, N, H]`.
#[cube(launch)]
fn bias_activation_kernel<F: Float>(
    product: &[F],
    bias: &[F],
    activated: &mut [F],
    derivative: &mut [F],
    rows_times_width: u32,
    width: u32,
    slope: f32,
    #[comptime] activation: u32,
    #[define(F)] _elem: ElemType,
) {
    let p = ABSOLUTE_POS;
    if p < activated.len() {
        let chain = p / rows_times_width as usize;
        let j = p % width as usize;
        let z = product[p] + bias[chain * width as usize + j];
        let (a, d) = activate::<F>(z, F::cast_from(slope), activation);
        activated[p] = a;
        derivative[p] = d;
    }
}

/// Gaussian heads, one unit per (chain, row): `out` `[C, N, K]`, `y` `[N, T]` → the row's log
/// likelihood without its constant (`row_ll` `[C, N]`) and `∂/∂out` (`grad` `[C, N, K]`).
/// `fixed`: `a` = 1/σ²; heteroscedastic: `a`, `b` = the clip range of log σ (exp link) or of σ
/// (softplus link).
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
fn regression_head_kernel<F: Float>(
    out: &[F],
    y: &[F],
    row_ll: &mut [F],
    grad: &mut [F],
    rows: u32,
    targets: u32,
    a: f32,
    b: f32,
    #[comptime] head: u32,
    #[define(F)] _elem: ElemType,
) {
    let p = ABSOLUTE_POS;
    if p < row_ll.len() {
        let n = p % rows as usize;
        let t_count = targets as usize;
        let zero = F::new(0.0);
        let one = F::new(1.0);
        let half = F::new(0.5);
        let mut acc = zero;
        if comptime![head == FIXED] {
            let precision = F::cast_from(a);
            for t in 0..t_count {
                let r = y[n * t_count + t] - out[p * t_count + t];
                acc += r * r;
                grad[p * t_count + t] = r * precision;
            }
            row_ll[p] = -half * precision * acc;
        } else {
            let lo = F::cast_from(a);
            let hi = F::cast_from(b);
            let k = 2 * t_count;
            for t in 0..t_count {
                let mean = out[p * k + t];
                let raw = out[p * k + t_count + t];
                let (log_sd, dlog_sd) =
                    hetero_log_sd::<F>(raw, lo, hi, comptime![head == HETERO_SOFTPLUS]);
                let inv_sd = F::exp(-log_sd);
                let z = (y[n * t_count + t] - mean) * inv_sd;
                acc += -half * z * z - log_sd;
                grad[p * k + t] = z * inv_sd;
                grad[p * k + t_count + t] = (z * z - one) * dlog_sd;
            }
            row_ll[p] = acc;
        }
    }
}

/// Categorical head, one unit per (chain, row): `Σ_k y_k log softmax(o)_k` and
/// `∂/∂o = y − softmax(o) Σ_k y_k`; `y` `[N, K]` holds one-hot (or soft) labels.
#[cube(launch)]
fn categorical_head_kernel<F: Float>(
    out: &[F],
    y: &[F],
    row_ll: &mut [F],
    grad: &mut [F],
    rows: u32,
    classes: u32,
    #[define(F)] _elem: ElemType,
) {
    let p = ABSOLUTE_POS;
    if p < row_ll.len() {
        let n = p % rows as usize;
        let k = classes as usize;
        let mut m = out[p * k];
        for j in 1..k {
            m = max(m, out[p * k + j]);
        }
        let mut total = F::new(0.0);
        let mut mass = F::new(0.0);
        for j in 0..k {
            total += F::exp(out[p * k + j] - m);
            mass += y[n * k + j];
        }
        let lse = m + F::ln(total);
        let mut acc = F::new(0.0);
        for j in 0..k {
            let log_p = out[p * k + j] - lse;
            let label = y[n * k + j];
            acc += label * log_p;
            grad[p * k + j] = label - F::exp(log_p) * mass;
        }
        row_ll[p] = acc;
    }
}

pub(crate) fn elem_type(dtype: DType) -> Option<ElemType> {
    match dtype {
        DType::F32 => Some(ElemType::Float(cubecl::ir::FloatKind::F32)),
        DType::F64 => Some(ElemType::Float(cubecl::ir::FloatKind::F64)),
        _ => None,
    }
}

/// Cubes for `units` units, one per element: spread over the grid's Y (and Z) axes when one axis
/// would exceed the device's limit (65,535 on wgpu; concrete at 4096 chains needs 131k cubes).
/// The kernels index with `ABSOLUTE_POS`, which counts across all axes.
fn launch_shape(client: &cubecl::client::Client, units: usize) -> (CubeCount, CubeDim) {
    let dim = CubeDim::new_1d(UNITS_PER_CUBE);
    (
        cubecl::calculate_cube_count_elemwise(client, units, dim),
        dim,
    )
}

fn empty_like(t: &CubeTensor, shape: Shape) -> CubeTensor {
    empty_device_dtype(t.client.clone(), t.device.clone(), shape, t.dtype)
}

/// Makes `t` contiguous (a no-op when it already is).
fn contiguous(t: CubeTensor) -> CubeTensor {
    burn_cubecl::kernel::into_contiguous(t)
}

/// `product` `[C, N, H]`, `bias` `[C, 1, H]` → (φ(product + bias), φ'), or `None` when the
/// float type has no kernel here.
pub(crate) fn bias_activation(
    product: CubeTensor,
    bias: CubeTensor,
    activation: KernelActivation,
) -> Option<(CubeTensor, CubeTensor)> {
    let elem = elem_type(product.dtype)?;
    let shape = product.meta.shape().clone();
    let (rows, width) = (shape[1], shape[2]);
    let (product, bias) = (contiguous(product), contiguous(bias));
    let activated = empty_like(&product, shape.clone());
    let derivative = empty_like(&product, shape.clone());
    let (code, slope) = activation_code(activation);
    let (count, dim) = launch_shape(&product.client, shape.num_elements());
    bias_activation_kernel::launch(
        &product.client,
        count,
        dim,
        product.clone().into_buffer_arg(),
        bias.into_buffer_arg(),
        activated.clone().into_buffer_arg(),
        derivative.clone().into_buffer_arg(),
        (rows * width) as u32,
        width as u32,
        slope,
        code,
        elem,
    );
    Some((activated, derivative))
}

/// `out` `[C, N, K]`, `y` `[1, N, T]` → (per-row log likelihood `[C, N]` without constants,
/// `∂/∂out` `[C, N, K]`), for the heads with a kernel here (not the learned-σ head).
pub(crate) fn head(
    out: CubeTensor,
    y: CubeTensor,
    head: KernelHead,
) -> Option<(CubeTensor, CubeTensor)> {
    let elem = elem_type(out.dtype)?;
    let shape = out.meta.shape().clone();
    let (c, n, k) = (shape[0], shape[1], shape[2]);
    let (out, y) = (contiguous(out), contiguous(y));
    let row_ll = empty_like(&out, Shape::new([c, n]));
    let grad = empty_like(&out, shape);
    let (count, dim) = launch_shape(&out.client, c * n);
    let client = out.client.clone();
    // The regression heads share one kernel: (comptime code, targets, a, b) as it documents.
    let regression = match head {
        KernelHead::Fixed { sigma } => Some((FIXED, k, 1.0 / (sigma * sigma), 0.0)),
        KernelHead::Heteroscedastic {
            softplus: false,
            sigma_min,
            sigma_max,
        } => Some((HETERO_EXP, k / 2, sigma_min.ln(), sigma_max.ln())),
        KernelHead::Heteroscedastic {
            softplus: true,
            sigma_min,
            sigma_max,
        } => Some((HETERO_SOFTPLUS, k / 2, sigma_min, sigma_max)),
        KernelHead::Categorical => None,
        KernelHead::LearnedSigma { .. } => return None,
    };
    let (out, y, ll_arg, grad_arg) = (
        out.into_buffer_arg(),
        y.into_buffer_arg(),
        row_ll.clone().into_buffer_arg(),
        grad.clone().into_buffer_arg(),
    );
    match regression {
        Some((code, targets, a, b)) => regression_head_kernel::launch(
            &client,
            count,
            dim,
            out,
            y,
            ll_arg,
            grad_arg,
            n as u32,
            targets as u32,
            a as f32,
            b as f32,
            code,
            elem,
        ),
        None => categorical_head_kernel::launch(
            &client, count, dim, out, y, ll_arg, grad_arg, n as u32, k as u32, elem,
        ),
    }
    Some((row_ll, grad))
}

impl crate::fused::ops_gradient::FusedStages for Cube {
    fn max_tensor_bytes(tensor: &CubeTensor) -> Option<u64> {
        Some(tensor.client.properties().memory.max_page_size)
    }

    fn bias_activation(
        product: CubeTensor,
        bias: CubeTensor,
        activation: KernelActivation,
    ) -> (CubeTensor, Option<CubeTensor>) {
        // Identity needs no kernel (φ' ≡ 1 is `None`); other float types fall back too.
        let fused = (activation != KernelActivation::Identity)
            .then(|| bias_activation(product.clone(), bias.clone(), activation))
            .flatten();
        match fused {
            Some((a, d)) => (a, Some(d)),
            None => crate::fused::ops_gradient::activate::<Cube>(
                Cube::float_add(product, bias),
                activation,
            ),
        }
    }

    fn head(
        spec: &KernelSpec,
        out: CubeTensor,
        y: &CubeTensor,
        theta: &CubeTensor,
    ) -> (CubeTensor, CubeTensor, Option<CubeTensor>) {
        let shape = out.meta.shape().clone();
        let (c, n, k) = (shape[0], shape[1], shape[2]);
        let y_rows = Cube::float_reshape(y.clone(), Shape::new([n, y.meta.shape()[2]]));
        match head(out.clone(), y_rows, spec.head) {
            Some((row_ll, grad)) => {
                let ll = Cube::float_reshape(Cube::float_sum_dim(row_ll, 1), Shape::new([c]));
                let constant = crate::fused::ops_gradient::head_constant(spec.head, n, k);
                (
                    Cube::float_add_scalar(ll, burn::backend::Scalar::Float(constant)),
                    grad,
                    None,
                )
            }
            None => crate::fused::ops_gradient::head::<Cube>(spec, out, y, theta),
        }
    }
}

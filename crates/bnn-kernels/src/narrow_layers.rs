//! The fused pass for narrow MLPs (every layer at most 64 units wide: the 16-16 nets of Table 3,
//! the 2×16 tanh net of the benchmarks), with activations stored feature-major.
//!
//! Why a pass of its own: with 16-unit layers a matrix product has a 16-long inner dimension,
//! and the general pass's eight `gemm` calls per gradient spent most of their time packing
//! operands and in their fixed cost (profiled on yacht's 6-16-16-2 net: 45% in `gemm`). Here
//! every layer's values are `[units, rows]`, so a row is a unit's values over all data rows: the
//! forward and the back-propagated deltas are sums of rows scaled by single weights (16 data rows
//! per vector, no tail whatever the layer widths), and a weight's gradient is a dot product of two
//! rows. The rows are padded to whole blocks of 16; padded entries of every activation are zero
//! and their deltas are zero, so they add exactly nothing to any sum.

use crate::activation;
use crate::likelihood::{self, HeadInput};
use crate::mlp::Workspace;
use crate::real::Real;
use crate::spec::{KernelHead, KernelSpec};
use crate::KernelData;

/// Data rows per block: one AVX-512 vector of f32, two AVX2 ones.
const ROWS: usize = 16;
/// Units computed together: their sums stay in registers while a block of rows goes by.
const UNITS: usize = 4;
/// The widest layer (input or output) this pass takes; wider nets go to `gemm`.
pub(crate) const MAX_WIDTH: usize = 64;

/// Whether every layer of `spec` is at most [`MAX_WIDTH`] wide on both sides.
pub(crate) fn applies(spec: &KernelSpec) -> bool {
    spec.layers
        .iter()
        .all(|l| l.d_in <= MAX_WIDTH && l.d_out <= MAX_WIDTH)
}

/// The buffers of the feature-major pass, in the workspace.
#[derive(Debug, Default)]
pub(crate) struct Buffers<R> {
    /// Layer l's pre- and post-activations, `[d_out, padded rows]`.
    pre: Vec<Vec<R>>,
    post: Vec<Vec<R>>,
    /// The inputs `[d_in, padded rows]` (zero past the last row) and, with several target
    /// columns, the targets `[T, rows]`.
    inputs: Vec<R>,
    targets: Vec<R>,
    /// δ of the layer being back-propagated and of the one below, `[units, padded rows]`.
    delta: Vec<R>,
    delta_below: Vec<R>,
    /// Row-major outputs for the heads that read rows (categorical, several targets), and the
    /// head's scratch: their row-major δ, or the heteroscedastic head's per-row terms.
    head_outputs: Vec<R>,
    head_scratch: Vec<R>,
}

fn padded(rows: usize) -> usize {
    rows.div_ceil(ROWS) * ROWS
}

/// Sizes the buffers for `rows` data rows and copies the inputs (and several target columns) in
/// feature-major order.
fn prepare<R: Real>(b: &mut Buffers<R>, spec: &KernelSpec, data: KernelData<'_, R>) {
    let (n, np) = (data.rows, padded(data.rows));
    let layers = spec.layers.len();
    b.pre.resize_with(layers, Vec::new);
    b.post.resize_with(layers, Vec::new);
    for (l, layer) in spec.layers.iter().enumerate() {
        b.pre[l].resize(layer.d_out * np, R::ZERO);
        b.post[l].resize(layer.d_out * np, R::ZERO);
    }
    let widest = spec
        .layers
        .iter()
        .map(|l| l.d_out.max(l.d_in))
        .max()
        .unwrap_or(0);
    b.delta.resize(widest * np, R::ZERO);
    b.delta_below.resize(widest * np, R::ZERO);
    let d_in = spec.d_input();
    b.inputs.resize(d_in * np, R::ZERO);
    transpose(&data.x[..n * d_in], n, d_in, np, &mut b.inputs);
    let t = spec.target_columns;
    if t > 1 {
        b.targets.resize(t * n, R::ZERO);
        transpose(&data.y[..n * t], n, t, n, &mut b.targets);
    }
}

/// `[rows, cols]` row major into `[cols, stride]` (entries past `rows` in each column zeroed).
fn transpose<R: Real>(src: &[R], rows: usize, cols: usize, stride: usize, dst: &mut [R]) {
    for (c, column) in dst.chunks_exact_mut(stride).take(cols).enumerate() {
        for (r, v) in column[..rows].iter_mut().enumerate() {
            *v = src[r * cols + c];
        }
        column[rows..].fill(R::ZERO);
    }
}

/// One chain: forward, head, backward. Returns the log likelihood.
#[inline(always)]
pub(crate) fn evaluate_one<R: Real>(
    spec: &KernelSpec,
    data: KernelData<'_, R>,
    theta: &[R],
    gradient: Option<&mut [R]>,
    ws: &mut Workspace<R>,
) -> f64 {
    prepare(&mut ws.narrow, spec, data);
    evaluate(spec, data, theta, gradient, &mut ws.narrow)
}

/// Only the two activation loops depend on the activation (the rest is compiled once, not once
/// per activation).
#[inline(always)]
fn evaluate<R: Real>(
    spec: &KernelSpec,
    data: KernelData<'_, R>,
    theta: &[R],
    gradient: Option<&mut [R]>,
    b: &mut Buffers<R>,
) -> f64 {
    let (n, np) = (data.rows, padded(data.rows));
    let last = spec.layers.len() - 1;
    for (l, layer) in spec.layers.iter().enumerate() {
        let (below, rest) = b.post.split_at_mut(l);
        let input: &[R] = if l == 0 { &b.inputs } else { &below[l - 1] };
        let weight = &theta[layer.weight_offset..layer.weight_offset + layer.d_in * layer.d_out];
        let bias = &theta[layer.bias_offset..layer.bias_offset + layer.d_out];
        // pre[j, :] = b_j + Σ_p W[p, j] · input[p, :]
        combine_rows(
            |j, p| weight[p * layer.d_out + j],
            Some(bias),
            layer.d_in,
            layer.d_out,
            input,
            &mut b.pre[l],
            np,
        );
        if l < last {
            let post = &mut rest[0][..layer.d_out * np];
            activation::forward(spec.activation, &b.pre[l], post);
            // act(b) ≠ 0 in the padding: zero it, so that padded rows stay out of every sum.
            for unit in post.chunks_exact_mut(np) {
                unit[n..].fill(R::ZERO);
            }
        }
    }
    let k = spec.d_output();
    let outputs = &b.pre[last][..k * np];
    let delta = &mut b.delta[..k * np];
    let Some(gradient) = gradient else {
        return head(
            spec,
            data,
            theta,
            outputs,
            n,
            np,
            delta,
            false,
            &mut b.head_outputs,
            &mut b.head_scratch,
            &b.targets,
            None,
        );
    };
    gradient.fill(R::ZERO);
    let log_likelihood = head(
        spec,
        data,
        theta,
        outputs,
        n,
        np,
        delta,
        true,
        &mut b.head_outputs,
        &mut b.head_scratch,
        &b.targets,
        Some(&mut *gradient),
    );
    for l in (0..=last).rev() {
        let layer = spec.layers[l];
        let input: &[R] = if l == 0 { &b.inputs } else { &b.post[l - 1] };
        let delta = &b.delta[..layer.d_out * np];
        // ∂W[p, j] = input[p, :] · δ[j, :],  ∂b[j] = Σ δ[j, :]
        let weight_grad =
            &mut gradient[layer.weight_offset..layer.weight_offset + layer.d_in * layer.d_out];
        row_products(input, delta, layer.d_in, layer.d_out, np, weight_grad);
        for (g, unit) in gradient[layer.bias_offset..layer.bias_offset + layer.d_out]
            .iter_mut()
            .zip(delta.chunks_exact(np))
        {
            *g = sum_row(unit);
        }
        if l > 0 {
            // δ below[p, :] = act'(pre below[p, :]) ⊙ Σ_j W[p, j] · δ[j, :]
            let weight =
                &theta[layer.weight_offset..layer.weight_offset + layer.d_in * layer.d_out];
            let below = &mut b.delta_below[..layer.d_in * np];
            combine_rows(
                |p, j| weight[p * layer.d_out + j],
                None,
                layer.d_out,
                layer.d_in,
                delta,
                below,
                np,
            );
            activation::backward(spec.activation, &b.pre[l - 1], &b.post[l - 1], below);
            std::mem::swap(&mut b.delta, &mut b.delta_below);
        }
    }
    log_likelihood
}

/// `out[j, :] = bias_j + Σ_p coefficient(j, p) · input[p, :]` for `outputs` rows of `out` from
/// `inputs` rows of `input` (all rows `np` long), in blocks of [`UNITS`] output rows × [`ROWS`].
#[inline(always)]
fn combine_rows<R: Real>(
    coefficient: impl Fn(usize, usize) -> R,
    bias: Option<&[R]>,
    inputs: usize,
    outputs: usize,
    input: &[R],
    out: &mut [R],
    np: usize,
) {
    let mut first = 0;
    while first < outputs {
        let units = (outputs - first).min(UNITS);
        match units {
            4 => combine_units::<R, 4>(&coefficient, bias, first, inputs, input, out, np),
            3 => combine_units::<R, 3>(&coefficient, bias, first, inputs, input, out, np),
            2 => combine_units::<R, 2>(&coefficient, bias, first, inputs, input, out, np),
            _ => combine_units::<R, 1>(&coefficient, bias, first, inputs, input, out, np),
        }
        first += units;
    }
}

#[inline(always)]
fn combine_units<R: Real, const J: usize>(
    coefficient: &impl Fn(usize, usize) -> R,
    bias: Option<&[R]>,
    first: usize,
    inputs: usize,
    input: &[R],
    out: &mut [R],
    np: usize,
) {
    // The J units' coefficients by input, gathered once (the block loop broadcasts them).
    let mut weights = [[R::ZERO; J]; MAX_WIDTH];
    for (p, w) in weights[..inputs].iter_mut().enumerate() {
        for (j, w) in w.iter_mut().enumerate() {
            *w = coefficient(first + j, p);
        }
    }
    let mut start = [R::ZERO; J];
    if let Some(bias) = bias {
        start.copy_from_slice(&bias[first..first + J]);
    }
    let input = &input[..inputs * np];
    for block in (0..np).step_by(ROWS) {
        let mut sums = [[R::ZERO; ROWS]; J];
        for (j, s) in sums.iter_mut().enumerate() {
            *s = [start[j]; ROWS];
        }
        for (w, row) in weights[..inputs].iter().zip(input.chunks_exact(np)) {
            let x: &[R; ROWS] = row[block..block + ROWS].try_into().unwrap();
            for j in 0..J {
                for r in 0..ROWS {
                    sums[j][r] = w[j].mul_add(x[r], sums[j][r]);
                }
            }
        }
        for (j, s) in sums.iter().enumerate() {
            out[(first + j) * np + block..][..ROWS].copy_from_slice(s);
        }
    }
}

/// `grad[p · outputs + j] = input[p, :] · delta[j, :]` (a weight gradient in θ's `[d_in, d_out]`
/// layout), four dot products at a time sharing the input row's loads (four independent sums
/// also hide the multiply-add latency).
#[inline(always)]
fn row_products<R: Real>(
    input: &[R],
    delta: &[R],
    inputs: usize,
    outputs: usize,
    np: usize,
    grad: &mut [R],
) {
    for p in 0..inputs {
        let x = &input[p * np..(p + 1) * np];
        let out = &mut grad[p * outputs..(p + 1) * outputs];
        let mut j = 0;
        while j + 4 <= outputs {
            let row = |u: usize| &delta[(j + u) * np..(j + u + 1) * np];
            let sums = four_products(x, row(0), row(1), row(2), row(3));
            out[j..j + 4].copy_from_slice(&sums);
            j += 4;
        }
        for (u, o) in out.iter_mut().enumerate().skip(j) {
            *o = padded_dot(x, &delta[u * np..(u + 1) * np]);
        }
    }
}

/// x · a, x · b, x · c, x · e over rows of whole blocks, each in [`ROWS`] lanes.
#[inline(always)]
fn four_products<R: Real>(x: &[R], a: &[R], b: &[R], c: &[R], e: &[R]) -> [R; 4] {
    // Four named sums, not a `[[R; ROWS]; 4]`: the compiler kept the nested array on the stack
    // (a store and a reload per multiply-add, measured).
    let (mut sa, mut sb, mut sc, mut se) = (
        [R::ZERO; ROWS],
        [R::ZERO; ROWS],
        [R::ZERO; ROWS],
        [R::ZERO; ROWS],
    );
    let blocks = x
        .chunks_exact(ROWS)
        .zip(a.chunks_exact(ROWS))
        .zip(b.chunks_exact(ROWS))
        .zip(c.chunks_exact(ROWS))
        .zip(e.chunks_exact(ROWS));
    for ((((x, a), b), c), e) in blocks {
        for r in 0..ROWS {
            sa[r] = x[r].mul_add(a[r], sa[r]);
            sb[r] = x[r].mul_add(b[r], sb[r]);
            sc[r] = x[r].mul_add(c[r], sc[r]);
            se[r] = x[r].mul_add(e[r], se[r]);
        }
    }
    [
        sum_lanes(&sa),
        sum_lanes(&sb),
        sum_lanes(&sc),
        sum_lanes(&se),
    ]
}

/// x · a over rows of whole blocks, in [`ROWS`] lanes.
#[inline(always)]
fn padded_dot<R: Real>(x: &[R], a: &[R]) -> R {
    let mut sums = [R::ZERO; ROWS];
    for (x, a) in x.chunks_exact(ROWS).zip(a.chunks_exact(ROWS)) {
        for r in 0..ROWS {
            sums[r] = x[r].mul_add(a[r], sums[r]);
        }
    }
    sum_lanes(&sums)
}

/// Σ of one padded row, lane-wise over blocks then [`sum_lanes`].
#[inline(always)]
fn sum_row<R: Real>(row: &[R]) -> R {
    let mut sums = [R::ZERO; ROWS];
    for block in row.chunks_exact(ROWS) {
        for r in 0..ROWS {
            sums[r] += block[r];
        }
    }
    sum_lanes(&sums)
}

/// The lanes pairwise (8 + 8, 4 + 4, 2 + 2, 1 + 1): a fixed order on every instruction set.
#[inline(always)]
fn sum_lanes<R: Real>(v: &[R; ROWS]) -> R {
    let mut half = [R::ZERO; 8];
    for l in 0..8 {
        half[l] = v[l] + v[l + 8];
    }
    for l in 0..4 {
        half[l] += half[l + 4];
    }
    for l in 0..2 {
        half[l] += half[l + 2];
    }
    half[0] + half[1]
}

/// The likelihood head on the outputs `[K, np]`: the log likelihood, and (always for the
/// heteroscedastic head, else `with_delta`) its derivative by output into `delta`, same layout,
/// zero in the padding; the learned log σ's gradient into `gradient` (already zeroed).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn head<R: Real>(
    spec: &KernelSpec,
    data: KernelData<'_, R>,
    theta: &[R],
    outputs: &[R],
    n: usize,
    np: usize,
    delta: &mut [R],
    with_delta: bool,
    row_outputs: &mut Vec<R>,
    scratch: &mut Vec<R>,
    column_targets: &[R],
    gradient: Option<&mut [R]>,
) -> f64 {
    let (k, t) = (spec.d_output(), spec.target_columns);
    if let KernelHead::Heteroscedastic {
        softplus: false,
        sigma_min,
        sigma_max,
    } = spec.head
    {
        let targets = if t == 1 { &data.y[..n] } else { column_targets };
        return heteroscedastic(
            outputs,
            targets,
            t,
            n,
            np,
            R::from_f64(sigma_min.ln()),
            R::from_f64(sigma_max.ln()),
            delta,
            scratch,
        );
    }
    // The other heads read rows: with one output per row the layouts coincide; otherwise the
    // outputs go through a row-major copy (a small part of the cost of these rarer heads).
    let rows_in_place = k == 1;
    let outputs_rows: &[R] = if rows_in_place {
        &outputs[..n]
    } else {
        row_outputs.resize(n * k, R::ZERO);
        for (j, unit) in outputs.chunks_exact(np).enumerate() {
            for (i, &v) in unit[..n].iter().enumerate() {
                row_outputs[i * k + j] = v;
            }
        }
        row_outputs
    };
    let log_sigma = match spec.head {
        KernelHead::LearnedSigma {
            log_sigma_offset, ..
        } => Some(&theta[log_sigma_offset..log_sigma_offset + t]),
        _ => None,
    };
    let input = HeadInput {
        outputs: outputs_rows,
        targets: data.y,
        rows: n,
        outputs_per_row: k,
        target_columns: t,
        log_sigma,
    };
    if !with_delta {
        return likelihood::evaluate(spec.head, &input, None).log_likelihood;
    }
    let value = if rows_in_place {
        let value = likelihood::evaluate(spec.head, &input, Some(&mut delta[..n]));
        delta[n..].fill(R::ZERO);
        value
    } else {
        scratch.resize(n * k, R::ZERO);
        let value = likelihood::evaluate(spec.head, &input, Some(scratch));
        for (j, unit) in delta.chunks_exact_mut(np).enumerate() {
            for (i, d) in unit[..n].iter_mut().enumerate() {
                *d = scratch[i * k + j];
            }
            unit[n..].fill(R::ZERO);
        }
        value
    };
    if let (
        KernelHead::LearnedSigma {
            log_sigma_offset, ..
        },
        Some(gradient),
    ) = (spec.head, gradient)
    {
        for (g, &d) in gradient[log_sigma_offset..]
            .iter_mut()
            .zip(&value.d_log_sigma)
        {
            *g = R::from_f64(d);
        }
    }
    value.log_likelihood
}

/// The heteroscedastic head (log σ = clamp(o, ln σ_min, ln σ_max)) on feature-major outputs
/// (`[μ_1..μ_T, o_1..o_T]` by unit, `np` per unit) and targets `[T, n]`, vectorized over rows:
/// the row-major head's element formulas, δ into `delta` (`[K, np]`, zero in the padding), each
/// row's term into `terms` and from there summed in f64.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn heteroscedastic<R: Real>(
    outputs: &[R],
    targets: &[R],
    t: usize,
    n: usize,
    np: usize,
    lo: R,
    hi: R,
    delta: &mut [R],
    terms: &mut Vec<R>,
) -> f64 {
    const HALF_LOG_2PI: f64 = 0.918_938_533_204_672_8;
    terms.resize(np, R::ZERO);
    let mut total = 0.0f64;
    for j in 0..t {
        let (mean, raw, y) = (
            &outputs[j * np..][..n],
            &outputs[(t + j) * np..][..n],
            &targets[j * n..][..n],
        );
        let (low, high) = delta.split_at_mut((t + j) * np);
        let (d_mean, d_raw) = (&mut low[j * np..(j + 1) * np], &mut high[..np]);
        let rows = d_mean[..n]
            .iter_mut()
            .zip(&mut d_raw[..n])
            .zip(&mut terms[..n])
            .zip(mean)
            .zip(raw)
            .zip(y);
        for (((((d_mean, d_raw), term), &mean), &raw), &y) in rows {
            let inside = if raw >= lo && raw <= hi {
                R::ONE
            } else {
                R::ZERO
            };
            let log_sd = raw.max(lo).min(hi);
            let inv_sd = (-log_sd).exp();
            let z = (y - mean) * inv_sd;
            *term = R::from_f64(-0.5) * z * z - log_sd;
            *d_mean = z * inv_sd;
            *d_raw = (z * z - R::ONE) * inside;
        }
        d_mean[n..].fill(R::ZERO);
        d_raw[n..].fill(R::ZERO);
        total += sum_f64(&terms[..n]);
    }
    total - HALF_LOG_2PI * (n * t) as f64
}

/// Σ of f32 (or f64) terms in f64: [`ROWS`] lanes, then pairwise, then the tail.
#[inline(always)]
fn sum_f64<R: Real>(terms: &[R]) -> f64 {
    let mut sums = [0.0f64; ROWS];
    let blocks = terms.chunks_exact(ROWS);
    let tail = blocks.remainder();
    for block in blocks {
        for r in 0..ROWS {
            sums[r] += block[r].to_f64();
        }
    }
    for l in 0..8 {
        sums[l] += sums[l + 8];
    }
    for l in 0..4 {
        sums[l] += sums[l + 4];
    }
    let mut total = (sums[0] + sums[2]) + (sums[1] + sums[3]);
    for v in tail {
        total += v.to_f64();
    }
    total
}

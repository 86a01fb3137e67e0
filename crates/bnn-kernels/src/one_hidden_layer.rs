//! The fused pass for nets with one input and one hidden layer (1-H-K, the 1-d regression nets
//! of the BNN literature: cos(2x) 1-50-1, Dinh et al.'s studies).
//!
//! Why a pass of its own: for these shapes the general pass spends its time on memory, not
//! arithmetic. Its backward goes over the `[rows, H]` block four times (the output weights'
//! gradient as row updates, the outer product δ·W₁ᵀ, the activation's derivative, the hidden
//! sums), each re-loading and re-storing H-wide accumulators once per row. Here the backward runs
//! block by block over 16 hidden units and keeps that block's gradients in registers through all
//! rows, so the block is read once. For one output the arithmetic is the general pass's, in the
//! same order: the two give the same bits (tested).

use crate::activation::{with_activation, Elementwise};
use crate::mlp::{apply_head, dot, Workspace};
use crate::real::Real;
use crate::spec::KernelSpec;
use crate::KernelData;

/// Hidden units per block: one AVX-512 vector of f32, two AVX2 ones.
const LANES: usize = 16;

/// Whether `spec` is a one-input, one-hidden-layer net with one or two outputs per row.
pub(crate) fn applies(spec: &KernelSpec) -> bool {
    spec.layers.len() == 2 && spec.layers[0].d_in == 1 && matches!(spec.layers[1].d_out, 1 | 2)
}

/// Sizes the buffers this pass uses: the hidden pre- and post-activations (`[rows, H]` and one
/// block more) and the output weights by column, padded to whole blocks.
pub(crate) fn prepare<R: Real>(ws: &mut Workspace<R>, spec: &KernelSpec, rows: usize) {
    let (h, k) = (spec.layers[0].d_out, spec.layers[1].d_out);
    // LANES more than the block: the backward reads every row's last block whole (see there).
    ws.hidden_pre.resize(rows * h + LANES, R::ZERO);
    ws.hidden_post.resize(rows * h + LANES, R::ZERO);
    ws.output_columns.resize(k * h.div_ceil(LANES) * LANES, R::ZERO);
}

/// One chain: forward, head, backward. Returns the log likelihood.
#[inline(always)]
pub(crate) fn evaluate_one<R: Real>(spec: &KernelSpec, data: KernelData<'_, R>, theta: &[R], gradient: Option<&mut [R]>, ws: &mut Workspace<R>) -> f64 {
    with_activation!(spec.activation, |act| match spec.layers[1].d_out {
        1 => evaluate::<R, _, 1>(act, spec, data, theta, gradient, ws),
        _ => evaluate::<R, _, 2>(act, spec, data, theta, gradient, ws),
    })
}

#[inline(always)]
fn evaluate<R: Real, A: Elementwise<R>, const K: usize>(
    act: A,
    spec: &KernelSpec,
    data: KernelData<'_, R>,
    theta: &[R],
    mut gradient: Option<&mut [R]>,
    ws: &mut Workspace<R>,
) -> f64 {
    let (hidden, output) = (spec.layers[0], spec.layers[1]);
    let (n, h) = (data.rows, hidden.d_out);
    let padded = h.div_ceil(LANES) * LANES;
    let w0 = &theta[hidden.weight_offset..hidden.weight_offset + h];
    let b0 = &theta[hidden.bias_offset..hidden.bias_offset + h];
    let w1 = &theta[output.weight_offset..output.weight_offset + h * K];
    let b1 = &theta[output.bias_offset..output.bias_offset + K];
    // The output weights by column (`[K, padded]`, zeros past H): each output is a dot product
    // over contiguous memory, and the backward's last block meets zero weights past H.
    let columns = &mut ws.output_columns[..K * padded];
    for (j, column) in columns.chunks_exact_mut(padded).enumerate() {
        for (u, c) in column.iter_mut().enumerate() {
            *c = if u < h { w1[u * K + j] } else { R::ZERO };
        }
    }
    let columns = &ws.output_columns[..K * padded];

    // Forward as the general pass computes it: pre = x·w₀ + b₀ row by row, the activation in
    // one flat loop over the block (no tail per row), each output `dot(post, W₁[:, j]) + b₁[j]`.
    let (pre, post) = (&mut ws.hidden_pre[..n * h], &mut ws.hidden_post[..n * h]);
    for (&x, row) in data.x[..n].iter().zip(pre.chunks_exact_mut(h)) {
        for ((a, &w), &b) in row.iter_mut().zip(w0).zip(b0) {
            *a = x * w + b;
        }
    }
    for (&a, z) in pre.iter().zip(post.iter_mut()) {
        *z = act.value(a);
    }
    let outputs = &mut ws.pre[1][..n * K];
    for (row, out) in post.chunks_exact(h).zip(outputs.chunks_exact_mut(K)) {
        for (j, o) in out.iter_mut().enumerate() {
            *o = dot(row, &columns[j * padded..j * padded + h]) + b1[j];
        }
    }
    let log_likelihood = apply_head(spec, data, theta, ws, gradient.as_deref_mut());
    let Some(gradient) = gradient else { return log_likelihood };
    let (delta, columns) = (&ws.delta[..n * K], &ws.output_columns[..K * padded]);
    // ∂b₁ = column sums of δ, row after row.
    for row in delta.chunks_exact(K) {
        for (g, &d) in gradient[output.bias_offset..output.bias_offset + K].iter_mut().zip(row) {
            *g += d;
        }
    }
    // Block by block over the hidden units, every row: ∂W₁ += post·δ, the hidden gradient
    // g = act'(pre)·(W₁δ), ∂b₀ += g, ∂W₀ += x·g; the block's sums stay in registers.
    for block in 0..padded / LANES {
        let lanes = block * LANES..(block + 1) * LANES;
        let mut weight_out = [[R::ZERO; LANES]; K];
        let mut bias_hidden = [R::ZERO; LANES];
        let mut weight_hidden = [R::ZERO; LANES];
        let column: [[R; LANES]; K] = std::array::from_fn(|j| columns[j * padded..][lanes.clone()].try_into().unwrap());
        let units = block * LANES..((block + 1) * LANES).min(h);
        let width = units.len();
        let (pre_all, post_all) = (&ws.hidden_pre[..n * h + LANES], &ws.hidden_post[..n * h + LANES]);
        for (row, (&x, d)) in data.x[..n].iter().zip(delta.chunks_exact(K)).enumerate() {
            // The block is read whole even where it passes H: its lanes past H hold the next
            // row's values (or the spare block after the last row). Lanes never mix, and those
            // are dropped when the sums are written. (A zero-filled copy of the partial block
            // cost more than the pass saved: a vector load right after scalar stores.)
            let start = row * h + block * LANES;
            let pre: &[R; LANES] = pre_all[start..start + LANES].try_into().unwrap();
            let post: &[R; LANES] = post_all[start..start + LANES].try_into().unwrap();
            for l in 0..LANES {
                let mut back = d[0] * column[0][l];
                for j in 0..K {
                    weight_out[j][l] += d[j] * post[l];
                    if j > 0 {
                        back = back + d[j] * column[j][l];
                    }
                }
                let g = act.scale(back, pre[l], post[l]);
                bias_hidden[l] += g;
                weight_hidden[l] += x * g;
            }
        }
        gradient[hidden.weight_offset + units.start..][..width].copy_from_slice(&weight_hidden[..width]);
        gradient[hidden.bias_offset + units.start..][..width].copy_from_slice(&bias_hidden[..width]);
        for (l, u) in units.enumerate() {
            for j in 0..K {
                gradient[output.weight_offset + u * K + j] = weight_out[j][l];
            }
        }
    }
    log_likelihood
}

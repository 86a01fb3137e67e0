//! The fused pass for nets with one input and one hidden layer (1-H-K, the 1-d regression nets
//! of the BNN literature: cos(2x) 1-50-1, Dinh et al.'s studies).
//!
//! Why a pass of its own: for these shapes the general pass spends its time on memory and on
//! loop tails, not arithmetic. Here every row's hidden units are padded with zero weights to
//! whole chunks of 16 (or a last chunk of 8), so no row straddles a vector and no loop over units
//! has a scalar tail:
//! - forward: the pre-activations `x·w₀ + b₀` row by row, the activation over the whole
//!   `[rows, padded]` buffer in one flat loop, then each output's 16 lane sums of `h·W₁[:, j]`,
//!   folded once per row (`row_dots`, written with intrinsics: LLVM split those lane sums into
//!   8- and 2-wide pieces, a fifth of the gradient);
//! - backward: chunk by chunk over all rows with the chunk's gradient sums in registers; `a` is
//!   recomputed (one multiply-add, the forward's bits) instead of stored and reloaded.
//!
//! Padded units have zero weights: their outputs and gradients are exactly zero and are never
//! written back. Every product is an explicit multiply-add, so every SIMD level (and the portable
//! build) gives the same bits (tested). Measured alternatives that lost: the activation inside
//! the per-row loop (a sigmoid's exponential and division stall on the row's few chunks; the
//! 8-wide chunk compiled to 4-lane and scalar pieces), loops of compile-time width per chunk
//! (LLVM unrolled them into scalar code), and every parameter held as `[[f32; 16]; C]` values
//! (the crate's tests then compiled for over 15 minutes). A feature-major layout (`[H, rows]`,
//! vectorized over rows; prototyped outside the crate) made the forward fold-free but needs
//! three 16-lane folds per hidden unit in the backward, which LLVM compiled to gathers or
//! shuffle chains: ReLU 1.9 µs on the AVX-512 path against 1.4 µs here.

use crate::activation::{with_activation, Elementwise};
use crate::mlp::{apply_head, Workspace};
use crate::real::Real;
use crate::row_dots::row_dots;
use crate::spec::KernelSpec;
use crate::KernelData;

/// Hidden units per chunk: one AVX-512 vector of f32, two AVX2 ones.
const LANES: usize = 16;
/// The last chunk's width when H leaves 8 or fewer units past the whole chunks.
const HALF: usize = LANES / 2;

/// Whether `spec` is a one-input, one-hidden-layer net with one or two outputs per row.
pub(crate) fn applies(spec: &KernelSpec) -> bool {
    spec.layers.len() == 2 && spec.layers[0].d_in == 1 && matches!(spec.layers[1].d_out, 1 | 2)
}

/// H rounded up to whole chunks: to 16, or to 8 when that covers it (50 → 56, not 64; the
/// activation is most of a sigmoid net's cost, so padding lanes are not free).
fn padded_width(h: usize) -> usize {
    let whole = h / LANES * LANES;
    if h - whole == 0 {
        h
    } else if h - whole <= HALF {
        whole + HALF
    } else {
        whole + LANES
    }
}

/// Sizes the buffers this pass uses: the hidden activations (`[rows, padded]`) and the padded
/// parameters (w₀, b₀, then W₁ by output column).
pub(crate) fn prepare<R: Real>(ws: &mut Workspace<R>, spec: &KernelSpec, rows: usize) {
    let (h, k) = (spec.layers[0].d_out, spec.layers[1].d_out);
    let padded = padded_width(h);
    ws.hidden_post.resize(rows * padded, R::ZERO);
    ws.output_columns.resize((2 + k) * padded, R::ZERO);
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
    with_activation!(spec.activation, |act| match spec.layers[1].d_out {
        1 => evaluate::<R, _, 1>(act, spec, data, theta, gradient, ws),
        _ => evaluate::<R, _, 2>(act, spec, data, theta, gradient, ws),
    })
}

/// The padded parameters, each `padded` long: hidden weights, hidden biases, and one output
/// column per output.
struct Padded<'a, R, const K: usize> {
    weight: &'a [R],
    bias: &'a [R],
    columns: [&'a [R]; K],
}

impl<'a, R: Real, const K: usize> Padded<'a, R, K> {
    /// Lanes `start..start + W` of each parameter vector.
    #[inline(always)]
    fn chunk<const W: usize>(&self, start: usize) -> ([R; W], [R; W], [[R; W]; K]) {
        let take = |v: &[R]| -> [R; W] { v[start..start + W].try_into().unwrap() };
        (
            take(self.weight),
            take(self.bias),
            std::array::from_fn(|j| take(self.columns[j])),
        )
    }
}

#[inline(always)]
fn evaluate<R: Real, A: Elementwise<R>, const K: usize>(
    act: A,
    spec: &KernelSpec,
    data: KernelData<'_, R>,
    theta: &[R],
    gradient: Option<&mut [R]>,
    ws: &mut Workspace<R>,
) -> f64 {
    let (hidden, output) = (spec.layers[0], spec.layers[1]);
    let h = hidden.d_out;
    let padded = padded_width(h);
    // w₀ | b₀ | W₁[:, 0] | W₁[:, 1]…, each zero past H (the buffer is lent out of the workspace
    // while the head writes to it, and put back).
    let mut params = std::mem::take(&mut ws.output_columns);
    {
        let w1 = &theta[output.weight_offset..output.weight_offset + h * K];
        let params = &mut params[..(2 + K) * padded];
        params.fill(R::ZERO);
        params[..h].copy_from_slice(&theta[hidden.weight_offset..hidden.weight_offset + h]);
        params[padded..padded + h]
            .copy_from_slice(&theta[hidden.bias_offset..hidden.bias_offset + h]);
        for j in 0..K {
            for (u, c) in params[(2 + j) * padded..][..h].iter_mut().enumerate() {
                *c = w1[u * K + j];
            }
        }
    }
    let log_likelihood = evaluate_with::<R, A, K>(
        act,
        spec,
        data,
        theta,
        gradient,
        ws,
        &params[..(2 + K) * padded],
    );
    ws.output_columns = params;
    log_likelihood
}

/// [`evaluate`] once the padded parameters are laid out.
#[inline(always)]
fn evaluate_with<R: Real, A: Elementwise<R>, const K: usize>(
    act: A,
    spec: &KernelSpec,
    data: KernelData<'_, R>,
    theta: &[R],
    mut gradient: Option<&mut [R]>,
    ws: &mut Workspace<R>,
    params: &[R],
) -> f64 {
    let (hidden, output) = (spec.layers[0], spec.layers[1]);
    let (n, h) = (data.rows, hidden.d_out);
    let padded = padded_width(h);
    let whole = padded / LANES * LANES;
    let b1 = &theta[output.bias_offset..output.bias_offset + K];
    let padded_params = Padded::<R, K> {
        weight: &params[..padded],
        bias: &params[padded..2 * padded],
        columns: std::array::from_fn(|j| &params[(2 + j) * padded..(3 + j) * padded]),
    };

    // Forward in three simple loops (one fused loop was slower, measured): the pre-activations
    // row by row (a 56-wide row compiles to two 16-lane steps and 4-lane steps for the rest,
    // seen in perf; still no scalar tail), the activation over the whole buffer, then each
    // output as 16 lane sums per row, folded in halves (8 + 8, 4 + 4, 2 + 2, 1 + 1).
    let post_all = &mut ws.hidden_post[..n * padded];
    for (&x, row) in data.x[..n].iter().zip(post_all.chunks_exact_mut(padded)) {
        for ((a, &w), &b) in row
            .iter_mut()
            .zip(padded_params.weight)
            .zip(padded_params.bias)
        {
            *a = x.mul_add(w, b);
        }
    }
    for a in post_all.iter_mut() {
        *a = act.value(*a);
    }
    let outputs = &mut ws.pre[1][..n * K];
    for (j, &b) in b1.iter().enumerate() {
        row_dots(
            post_all,
            padded_params.columns[j],
            padded,
            &mut outputs[j..],
            K,
            b,
        );
    }
    let log_likelihood = apply_head(spec, data, theta, ws, gradient.as_deref_mut());
    let Some(gradient) = gradient else {
        return log_likelihood;
    };
    let delta = &ws.delta[..n * K];
    // ∂b₁ = column sums of δ, row after row.
    for row in delta.chunks_exact(K) {
        for (g, &d) in gradient[output.bias_offset..output.bias_offset + K]
            .iter_mut()
            .zip(row)
        {
            *g += d;
        }
    }
    let post_all = &ws.hidden_post[..n * padded];
    let backward = Backward {
        x: &data.x[..n],
        delta,
        post: post_all,
        padded,
    };
    for start in (0..whole).step_by(LANES) {
        let sums = backward.chunk::<A, K, LANES>(act, padded_params.chunk(start), start);
        sums.write(
            gradient,
            hidden.weight_offset,
            hidden.bias_offset,
            output.weight_offset,
            start,
            h,
        );
    }
    if whole < padded {
        let sums = backward.chunk::<A, K, HALF>(act, padded_params.chunk(whole), whole);
        sums.write(
            gradient,
            hidden.weight_offset,
            hidden.bias_offset,
            output.weight_offset,
            whole,
            h,
        );
    }
    log_likelihood
}

/// What the backward reads: inputs, the head's δ (`[rows, K]`) and the stored activations.
struct Backward<'a, R> {
    x: &'a [R],
    delta: &'a [R],
    post: &'a [R],
    padded: usize,
}

/// One chunk's gradient sums over all rows.
struct ChunkSums<R, const K: usize, const W: usize> {
    weight_hidden: [R; W],
    bias_hidden: [R; W],
    weight_out: [[R; W]; K],
}

impl<R: Real> Backward<'_, R> {
    /// Every row through the chunk of W units at `start`: ∂W₁ += h·δ, the hidden gradient
    /// g = act′(a)·(W₁δ), ∂b₀ += g, ∂W₀ += x·g, with the sums in registers.
    #[inline(always)]
    fn chunk<A: Elementwise<R>, const K: usize, const W: usize>(
        &self,
        act: A,
        (weight, bias, columns): ([R; W], [R; W], [[R; W]; K]),
        start: usize,
    ) -> ChunkSums<R, K, W> {
        let mut sums = ChunkSums {
            weight_hidden: [R::ZERO; W],
            bias_hidden: [R::ZERO; W],
            weight_out: [[R::ZERO; W]; K],
        };
        for (row, (&x, d)) in self.x.iter().zip(self.delta.chunks_exact(K)).enumerate() {
            let post: &[R; W] = self.post[row * self.padded + start..][..W]
                .try_into()
                .unwrap();
            for l in 0..W {
                let a = x.mul_add(weight[l], bias[l]);
                let mut back = d[0] * columns[0][l];
                for j in 0..K {
                    sums.weight_out[j][l] = d[j].mul_add(post[l], sums.weight_out[j][l]);
                    if j > 0 {
                        back = d[j].mul_add(columns[j][l], back);
                    }
                }
                let g = act.scale(back, a, post[l]);
                sums.bias_hidden[l] += g;
                sums.weight_hidden[l] = x.mul_add(g, sums.weight_hidden[l]);
            }
        }
        sums
    }
}

impl<R: Real, const K: usize, const W: usize> ChunkSums<R, K, W> {
    /// The sums of the units `start..min(start + W, H)` into their gradient coordinates.
    #[inline(always)]
    fn write(
        &self,
        gradient: &mut [R],
        weight_hidden: usize,
        bias_hidden: usize,
        weight_out: usize,
        start: usize,
        h: usize,
    ) {
        let width = W.min(h - start);
        gradient[weight_hidden + start..][..width].copy_from_slice(&self.weight_hidden[..width]);
        gradient[bias_hidden + start..][..width].copy_from_slice(&self.bias_hidden[..width]);
        for l in 0..width {
            for j in 0..K {
                gradient[weight_out + (start + l) * K + j] = self.weight_out[j][l];
            }
        }
    }
}

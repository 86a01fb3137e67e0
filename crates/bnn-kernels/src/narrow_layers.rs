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
//!
//! With the heteroscedastic head, and the fixed-σ head on one target, the rows go through in
//! chunks of [`CHUNK_ROWS`], forward and back, so that a chunk's activations stay in the core's
//! L2 cache instead of streaming through memory (protein's 36,584 rows need 16 MB per chain
//! unchunked). Every row sum keeps its [`ROWS`] lane accumulators from one chunk to the next and
//! is reduced only after the last (the fixed-σ head's sum of squares runs on in one f64), so a
//! chunked pass adds the same numbers in the same order as one pass over all rows: the bits do
//! not depend on the chunk size.

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
/// Data rows per chunk at most. On protein (9-16-16-2, 36,584 rows) 256 and 384 were fastest, 512
/// and 768 a little slower, all 1.4–1.5× faster than one chunk (2-vCPU AMD EPYC, AVX-512); at
/// 16-unit layers a chunk's buffers take about 200 kB.
const CHUNK_ROWS: usize = 384;

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
    /// Each θ coordinate's [`ROWS`] lane sums of its gradient, carried from chunk to chunk.
    gradient_lanes: Vec<[R; ROWS]>,
    /// The heteroscedastic head's lane sums of its per-row terms, one set per target column.
    term_lanes: Vec<[f64; ROWS]>,
}

fn padded(rows: usize) -> usize {
    rows.div_ceil(ROWS) * ROWS
}

/// Sizes the buffers for `rows` data rows and copies the inputs (and several target columns) in
/// feature-major order.
#[inline(always)]
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

/// `[rows, cols]` row major into `[cols, stride]` (entries past `rows` in each column zeroed), a
/// block of [`ROWS`] rows at a time: every column of the block is one vector store. Inlined into
/// the dispatched pass (as a function of its own it ran as scalar code, 15% of protein's time).
#[inline(always)]
fn transpose<R: Real>(src: &[R], rows: usize, cols: usize, stride: usize, dst: &mut [R]) {
    let whole = rows - rows % ROWS;
    for (block, from) in src[..whole * cols].chunks_exact(ROWS * cols).enumerate() {
        for c in 0..cols {
            let mut column = [R::ZERO; ROWS];
            for (r, v) in column.iter_mut().enumerate() {
                *v = from[r * cols + c];
            }
            dst[c * stride + block * ROWS..][..ROWS].copy_from_slice(&column);
        }
    }
    for (c, column) in dst.chunks_exact_mut(stride).take(cols).enumerate() {
        for (r, v) in column[whole..rows].iter_mut().enumerate() {
            *v = src[(whole + r) * cols + c];
        }
        column[rows..].fill(R::ZERO);
    }
}

/// One chain: forward, head, backward, chunk by chunk. Returns the log likelihood.
#[inline(always)]
pub(crate) fn evaluate_one<R: Real>(
    spec: &KernelSpec,
    data: KernelData<'_, R>,
    theta: &[R],
    gradient: Option<&mut [R]>,
    ws: &mut Workspace<R>,
) -> f64 {
    let chunk_rows = if carries_head_sums(spec) {
        // Chunks of equal size, so that no small last chunk pays a chunk's fixed cost.
        padded(data.rows.div_ceil(data.rows.div_ceil(CHUNK_ROWS).max(1)))
    } else {
        padded(data.rows)
    };
    evaluate(spec, data, theta, gradient, &mut ws.narrow, chunk_rows)
}

/// Whether the head's sums can be carried over chunks: the vectorized heteroscedastic head's
/// lanes can, and so can the fixed-σ head's one running sum of squares on one target; the
/// other heads sum row after row in [`likelihood::evaluate`] and take all rows at once.
fn carries_head_sums(spec: &KernelSpec) -> bool {
    match spec.head {
        KernelHead::Heteroscedastic { softplus, .. } => !softplus,
        KernelHead::Fixed { .. } => spec.d_output() == 1,
        _ => false,
    }
}

/// All rows in chunks of `chunk_rows` (a multiple of [`ROWS`], or all rows in one chunk when the
/// head cannot carry its sums). Only the two activation loops depend on the activation (the
/// rest is compiled once, not once per activation).
#[inline(always)]
fn evaluate<R: Real>(
    spec: &KernelSpec,
    data: KernelData<'_, R>,
    theta: &[R],
    mut gradient: Option<&mut [R]>,
    b: &mut Buffers<R>,
    chunk_rows: usize,
) -> f64 {
    let n = data.rows;
    let (d_in, t) = (spec.d_input(), spec.target_columns);
    let chunks = n.div_ceil(chunk_rows.max(1)).max(1);
    debug_assert!(chunks == 1 || (carries_head_sums(spec) && chunk_rows.is_multiple_of(ROWS)));
    if let Some(g) = gradient.as_deref_mut() {
        g.fill(R::ZERO);
    }
    if gradient.is_some() {
        // Written by the first chunk before any is read (a no-op once sized).
        b.gradient_lanes.resize(spec.dim, [R::ZERO; ROWS]);
    }
    b.term_lanes.clear();
    b.term_lanes.resize(t, [0.0; ROWS]);
    let mut log_likelihood = 0.0;
    for chunk in 0..chunks {
        let first = chunk * chunk_rows;
        let rows = chunk_rows.min(n - first);
        let part = KernelData {
            x: &data.x[first * d_in..(first + rows) * d_in],
            y: &data.y[first * t..(first + rows) * t],
            rows,
        };
        prepare(b, spec, part);
        forward(spec, theta, rows, b);
        let place = Chunk {
            first: chunk == 0,
            last: chunk + 1 == chunks,
        };
        log_likelihood = head(
            spec,
            part,
            theta,
            (n, place),
            gradient.is_some(),
            b,
            gradient.as_deref_mut(),
        );
        if let Some(gradient) = gradient.as_deref_mut() {
            backward(spec, theta, padded(rows), place, b, gradient);
        }
    }
    log_likelihood
}

/// Where a chunk stands, for the lane sums carried over chunks: the first starts them from zero
/// (nothing is read), the last reduces them into the gradient (nothing is stored), so a pass of
/// one chunk never touches the carried lanes.
#[derive(Clone, Copy)]
struct Chunk {
    first: bool,
    last: bool,
}

impl Chunk {
    /// The lanes a sum starts this chunk from.
    #[inline(always)]
    fn start<R: Real>(self, carried: &[R; ROWS]) -> [R; ROWS] {
        if self.first {
            [R::ZERO; ROWS]
        } else {
            *carried
        }
    }

    /// Carries the lanes to the next chunk, or after the last sums them into `out`.
    #[inline(always)]
    fn finish<R: Real>(self, sums: [R; ROWS], carried: &mut [R; ROWS], out: &mut R) {
        if self.last {
            *out = sum_lanes(&sums);
        } else {
            *carried = sums;
        }
    }
}

/// The chunk's pre-activations of every layer, and the hidden layers' activations (zero in the
/// padding past `rows`).
#[inline(always)]
fn forward<R: Real>(spec: &KernelSpec, theta: &[R], rows: usize, b: &mut Buffers<R>) {
    let np = padded(rows);
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
                unit[rows..].fill(R::ZERO);
            }
        }
    }
}

/// Back-propagates the chunk's head δ (in `b.delta`) through the layers, adding each weight's
/// and bias's row products to its lane sums (into `gradient` after the last chunk).
#[inline(always)]
fn backward<R: Real>(
    spec: &KernelSpec,
    theta: &[R],
    np: usize,
    place: Chunk,
    b: &mut Buffers<R>,
    gradient: &mut [R],
) {
    for l in (0..spec.layers.len()).rev() {
        let layer = spec.layers[l];
        let input: &[R] = if l == 0 { &b.inputs } else { &b.post[l - 1] };
        let delta = &b.delta[..layer.d_out * np];
        // ∂W[p, j] = input[p, :] · δ[j, :],  ∂b[j] = Σ δ[j, :]
        let weights = layer.weight_offset..layer.weight_offset + layer.d_in * layer.d_out;
        row_products(
            input,
            delta,
            (layer.d_in, layer.d_out, np),
            place,
            &mut b.gradient_lanes[weights.clone()],
            &mut gradient[weights.clone()],
        );
        let biases = layer.bias_offset..layer.bias_offset + layer.d_out;
        for ((lanes, g), unit) in b.gradient_lanes[biases.clone()]
            .iter_mut()
            .zip(&mut gradient[biases])
            .zip(delta.chunks_exact(np))
        {
            add_row(unit, place, lanes, g);
        }
        if l > 0 {
            // δ below[p, :] = act'(pre below[p, :]) ⊙ Σ_j W[p, j] · δ[j, :]
            let weight = &theta[weights];
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

/// `input[p, :] · delta[j, :]` into the gradient of weight `p · outputs + j` (θ's `[d_in, d_out]`
/// layout), lane by lane and carried over chunks; four dot products at a time share the input
/// row's loads (four independent sums also hide the multiply-add latency).
#[inline(always)]
fn row_products<R: Real>(
    input: &[R],
    delta: &[R],
    (inputs, outputs, np): (usize, usize, usize),
    place: Chunk,
    lanes: &mut [[R; ROWS]],
    grad: &mut [R],
) {
    for p in 0..inputs {
        let x = &input[p * np..(p + 1) * np];
        let lanes = &mut lanes[p * outputs..(p + 1) * outputs];
        let out = &mut grad[p * outputs..(p + 1) * outputs];
        let mut j = 0;
        while j + 4 <= outputs {
            let row = |u: usize| &delta[(j + u) * np..(j + u + 1) * np];
            let [la, lb, lc, le] = &mut lanes[j..j + 4] else {
                unreachable!("four lanes")
            };
            let [ga, gb, gc, ge] = &mut out[j..j + 4] else {
                unreachable!("four outputs")
            };
            let sums = four_products(
                x,
                [row(0), row(1), row(2), row(3)],
                [
                    place.start(la),
                    place.start(lb),
                    place.start(lc),
                    place.start(le),
                ],
            );
            place.finish(sums[0], la, ga);
            place.finish(sums[1], lb, gb);
            place.finish(sums[2], lc, gc);
            place.finish(sums[3], le, ge);
            j += 4;
        }
        for ((l, o), u) in lanes.iter_mut().zip(out.iter_mut()).zip(0..).skip(j) {
            let sums = padded_dot(x, &delta[u * np..(u + 1) * np], place.start(l));
            place.finish(sums, l, o);
        }
    }
}

/// x · a, x · b, x · c, x · e over rows of whole blocks, added to four sets of [`ROWS`] lanes.
#[inline(always)]
fn four_products<R: Real>(x: &[R], rows: [&[R]; 4], start: [[R; ROWS]; 4]) -> [[R; ROWS]; 4] {
    // Four named sums, not a `[[R; ROWS]; 4]`: the compiler kept the nested array on the stack
    // (a store and a reload per multiply-add, measured).
    let [a, b, c, e] = rows;
    let [mut sa, mut sb, mut sc, mut se] = start;
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
    [sa, sb, sc, se]
}

/// x · a over rows of whole blocks, added to [`ROWS`] lanes.
#[inline(always)]
fn padded_dot<R: Real>(x: &[R], a: &[R], mut sums: [R; ROWS]) -> [R; ROWS] {
    for (x, a) in x.chunks_exact(ROWS).zip(a.chunks_exact(ROWS)) {
        for r in 0..ROWS {
            sums[r] = x[r].mul_add(a[r], sums[r]);
        }
    }
    sums
}

/// A padded row's sum into `out`, block by block in [`ROWS`] lanes carried over chunks.
#[inline(always)]
fn add_row<R: Real>(row: &[R], place: Chunk, lanes: &mut [R; ROWS], out: &mut R) {
    let mut sums = place.start(lanes);
    for block in row.chunks_exact(ROWS) {
        for r in 0..ROWS {
            sums[r] += block[r];
        }
    }
    place.finish(sums, lanes, out);
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

/// The likelihood head on the chunk's outputs (`b.pre[last]`, `[K, np]`): the log likelihood
/// of all `total_rows` (returned after the last chunk, `place.last`), and (always for the heteroscedastic head, else
/// `with_delta`) its derivative by output into `b.delta`, same layout, zero in the padding; the
/// learned log σ's gradient into `gradient` (already zeroed).
#[inline(always)]
fn head<R: Real>(
    spec: &KernelSpec,
    data: KernelData<'_, R>,
    theta: &[R],
    (total_rows, place): (usize, Chunk),
    with_delta: bool,
    b: &mut Buffers<R>,
    gradient: Option<&mut [R]>,
) -> f64 {
    let (k, t) = (spec.d_output(), spec.target_columns);
    let (n, np) = (data.rows, padded(data.rows));
    let Buffers {
        pre,
        delta,
        targets: column_targets,
        head_outputs: row_outputs,
        head_scratch: scratch,
        term_lanes,
        ..
    } = b;
    let outputs = &pre[spec.layers.len() - 1][..k * np];
    let delta = &mut delta[..k * np];
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
            (n, total_rows),
            place,
            R::from_f64(sigma_min.ln()),
            R::from_f64(sigma_max.ln()),
            delta,
            scratch,
            term_lanes,
        );
    }
    if let (KernelHead::Fixed { sigma }, 1) = (spec.head, k) {
        // One output per row: the first `n` entries of the output unit are the rows' outputs.
        // The running sum waits in lane 0 of the first target's lanes between chunks.
        let carried = &mut term_lanes[0][0];
        let start = if place.first { 0.0 } else { *carried };
        let precision = R::from_f64(1.0 / (sigma * sigma));
        let (outputs, targets) = (&outputs[..n], &data.y[..n]);
        *carried = if with_delta {
            delta[n..].fill(R::ZERO);
            likelihood::residual_squares(start, outputs, targets, Some(&mut delta[..n]), precision)
        } else {
            likelihood::residual_squares(start, outputs, targets, None, precision)
        };
        return likelihood::fixed_sigma_log_likelihood(*carried, total_rows, sigma);
    }
    debug_assert!(
        place.last && total_rows == n,
        "only these heads take chunks"
    );
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

/// The heteroscedastic head (log σ = clamp(o, ln σ_min, ln σ_max)) on a chunk's feature-major
/// outputs (`[μ_1..μ_T, o_1..o_T]` by unit, `np` per unit) and targets `[T, n]`, vectorized over
/// rows: the row-major head's element formulas, δ into `delta` (`[K, np]`, zero in the padding),
/// each row's term into `terms` and from there into the f64 lane sums of its column, which the
/// last chunk reduces to the log likelihood of all rows (0 before).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn heteroscedastic<R: Real>(
    outputs: &[R],
    targets: &[R],
    t: usize,
    (n, total_rows): (usize, usize),
    place: Chunk,
    lo: R,
    hi: R,
    delta: &mut [R],
    terms: &mut Vec<R>,
    term_lanes: &mut [[f64; ROWS]],
) -> f64 {
    const HALF_LOG_2PI: f64 = 0.918_938_533_204_672_8;
    let np = padded(n);
    terms.resize(np, R::ZERO);
    let mut total = 0.0f64;
    for (j, lanes) in term_lanes.iter_mut().enumerate().take(t) {
        let (mean, raw, y) = (
            &outputs[j * np..][..n],
            &outputs[(t + j) * np..][..n],
            &targets[j * n..][..n],
        );
        let (low, high) = delta.split_at_mut((t + j) * np);
        let (d_mean, d_raw) = (&mut low[j * np..(j + 1) * np], &mut high[..np]);
        let per_row = d_mean[..n]
            .iter_mut()
            .zip(&mut d_raw[..n])
            .zip(&mut terms[..n])
            .zip(mean)
            .zip(raw)
            .zip(y);
        for (((((d_mean, d_raw), term), &mean), &raw), &y) in per_row {
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
        let tail = add_f64_lanes(&terms[..n], lanes);
        debug_assert!(tail.is_empty() || place.last);
        if place.last {
            total += reduce_f64_lanes(lanes, tail);
        }
    }
    total - HALF_LOG_2PI * (total_rows * t) as f64
}

/// Adds f32 (or f64) terms to [`ROWS`] f64 lanes, block by block; returns the terms past the
/// last whole block.
#[inline(always)]
fn add_f64_lanes<'a, R: Real>(terms: &'a [R], sums: &mut [f64; ROWS]) -> &'a [R] {
    let blocks = terms.chunks_exact(ROWS);
    let tail = blocks.remainder();
    for block in blocks {
        for r in 0..ROWS {
            sums[r] += block[r].to_f64();
        }
    }
    tail
}

/// The lanes pairwise, then the tail in order.
#[inline(always)]
fn reduce_f64_lanes<R: Real>(lanes: &[f64; ROWS], tail: &[R]) -> f64 {
    let mut sums = *lanes;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::KernelActivation;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// Value and gradient of one chain with the rows in chunks of `chunk_rows`.
    fn run<R: Real>(
        spec: &KernelSpec,
        x: &[R],
        y: &[R],
        rows: usize,
        theta: &[R],
        chunk_rows: usize,
        with_gradient: bool,
    ) -> (f64, Vec<R>) {
        let mut gradient = vec![R::ZERO; spec.dim];
        let data = KernelData { x, y, rows };
        let value = evaluate(
            spec,
            data,
            theta,
            with_gradient.then_some(&mut gradient[..]),
            &mut Buffers::default(),
            chunk_rows,
        );
        (value, gradient)
    }

    fn check<R: Real + std::fmt::Debug + PartialEq>(
        cast: impl Fn(f64) -> R,
        bits: impl Fn(R) -> u64,
    ) {
        let hetero = KernelHead::Heteroscedastic {
            softplus: false,
            sigma_min: 1e-6,
            sigma_max: 1e6,
        };
        let fixed = KernelHead::Fixed { sigma: 0.7 };
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let nets = [
            (vec![9, 16, 16, 2], 1, hetero),
            (vec![3, 5, 7, 4], 2, hetero),
            (vec![9, 16, 16, 1], 1, fixed),
        ];
        for (widths, targets, head) in nets {
            for activation in [KernelActivation::Relu, KernelActivation::Tanh] {
                let spec = KernelSpec::dense(&widths, activation, head, targets);
                assert!(carries_head_sums(&spec));
                for rows in [1, 15, 16, 17, 100, 517, 1100] {
                    let x: Vec<R> = (0..rows * spec.d_input())
                        .map(|_| cast(rng.random_range(-2.0..2.0)))
                        .collect();
                    let y: Vec<R> = (0..rows * targets)
                        .map(|_| cast(rng.random_range(-2.0..2.0)))
                        .collect();
                    let theta: Vec<R> = (0..spec.dim)
                        .map(|_| cast(rng.random_range(-0.6..0.6)))
                        .collect();
                    let whole = padded(rows);
                    let (value, gradient) = run(&spec, &x, &y, rows, &theta, whole, true);
                    assert!(value.is_finite() && value != 0.0);
                    for chunk_rows in [16, 48, 512] {
                        let what = format!(
                            "{widths:?} {head:?} {activation:?} {rows} rows by {chunk_rows}"
                        );
                        let (v, g) = run(&spec, &x, &y, rows, &theta, chunk_rows, true);
                        assert_eq!(v.to_bits(), value.to_bits(), "{what}: value");
                        for (i, (a, b)) in g.iter().zip(&gradient).enumerate() {
                            assert_eq!(bits(*a), bits(*b), "{what}: coordinate {i}");
                        }
                        let (v, _) = run(&spec, &x, &y, rows, &theta, chunk_rows, false);
                        assert_eq!(v.to_bits(), value.to_bits(), "{what}: value alone");
                    }
                }
            }
        }
    }

    #[test]
    fn chunks_of_rows_give_the_bits_of_one_pass_over_all_rows() {
        check::<f32>(|v| v as f32, |v| v.to_bits() as u64);
        check::<f64>(|v| v, f64::to_bits);
    }
}

//! Activation forward and backward over whole layers, branch-free so that loops vectorize.

use crate::real::Real;
use crate::spec::KernelActivation;

/// `post[i] = act(pre[i])`.
#[inline(always)]
pub(crate) fn forward<R: Real>(activation: KernelActivation, pre: &[R], post: &mut [R]) {
    let pairs = pre.iter().zip(post.iter_mut());
    match activation {
        KernelActivation::Tanh => pairs.for_each(|(a, h)| *h = a.tanh()),
        KernelActivation::Relu => pairs.for_each(|(a, h)| *h = a.max(R::ZERO)),
        KernelActivation::LeakyRelu { slope } => {
            let slope = R::from_f64(slope);
            pairs.for_each(|(&a, h)| *h = if a > R::ZERO { a } else { slope * a })
        }
        KernelActivation::Sigmoid => pairs.for_each(|(a, h)| *h = a.sigmoid()),
        KernelActivation::Silu => pairs.for_each(|(&a, h)| *h = a * a.sigmoid()),
        KernelActivation::TruncRelu => pairs.for_each(|(a, h)| *h = a.max(R::ZERO).min(R::ONE)),
        KernelActivation::Identity => post.copy_from_slice(pre),
    }
}

/// `grad[i, :] *= act'(pre[i, :])` row by row (rows of `width`), adding each finished row to
/// `bias_grad` and, when given `(input, weight_grad)` (a one-input layer: `input[i]` per row),
/// `input[i] · row` to `weight_grad`. One pass instead of three over the `[n, width]` block.
#[inline(always)]
pub(crate) fn backward_with_sums<R: Real>(
    activation: KernelActivation,
    pre: &[R],
    post: &[R],
    grad: &mut [R],
    width: usize,
    bias_grad: &mut [R],
    weight_grad: Option<(&[R], &mut [R])>,
) {
    let zero = R::ZERO;
    let one = R::ONE;
    // `scale(g, pre, post)`: the row's gradient times act'(pre); branch-free per element.
    match activation {
        KernelActivation::Tanh => rows_with_sums(pre, post, grad, width, bias_grad, weight_grad, |g, _, h| g * (one - h * h)),
        // A select between g and 0 compiles to a masked store (microcoded, ~10× a plain store
        // on AMD); a product with a 0/1 step stores every lane.
        KernelActivation::Relu => rows_with_sums(pre, post, grad, width, bias_grad, weight_grad, |g, a, _| g * if a > zero { one } else { zero }),
        KernelActivation::LeakyRelu { slope } => {
            let slope = R::from_f64(slope);
            rows_with_sums(pre, post, grad, width, bias_grad, weight_grad, |g, a, _| g * if a > zero { one } else { slope })
        }
        KernelActivation::Sigmoid => rows_with_sums(pre, post, grad, width, bias_grad, weight_grad, |g, _, s| g * (s * (one - s))),
        KernelActivation::Silu => rows_with_sums(pre, post, grad, width, bias_grad, weight_grad, |g, a, _| {
            let s = a.sigmoid();
            g * (s * (one + a * (one - s)))
        }),
        KernelActivation::TruncRelu => {
            rows_with_sums(pre, post, grad, width, bias_grad, weight_grad, |g, a, _| g * if a > zero && a < one { one } else { zero })
        }
        KernelActivation::Identity => rows_with_sums(pre, post, grad, width, bias_grad, weight_grad, |g, _, _| g),
    }
}

#[inline(always)]
fn rows_with_sums<R: Real>(
    pre: &[R],
    post: &[R],
    grad: &mut [R],
    width: usize,
    bias_grad: &mut [R],
    weight_grad: Option<(&[R], &mut [R])>,
    scale: impl Fn(R, R, R) -> R,
) {
    // The scaling as one flat loop over the block, then the sums row by row: a fused loop over
    // rows of a narrow layer (16 units) left half of each row to scalar code (measured on AVX2).
    for ((g, &a), &h) in grad.iter_mut().zip(pre).zip(post) {
        *g = scale(*g, a, h);
    }
    let bias_grad = &mut bias_grad[..width];
    match weight_grad {
        Some((input, weight_grad)) => {
            let weight_grad = &mut weight_grad[..width];
            for (row, &x) in grad.chunks_exact(width).zip(input) {
                add_row(bias_grad, row);
                add_scaled_row(weight_grad, x, row);
            }
        }
        None => {
            for row in grad.chunks_exact(width) {
                add_row(bias_grad, row);
            }
        }
    }
}

/// Lanes of the fixed blocks the row helpers work in: one AVX2 vector of f32.
const BLOCK: usize = 8;

/// `dst[i] = update(dst[i], src[i])` over one row. The rows of BNN layers are short (16–50
/// units); the vectorizer's own loop is 32 lanes wide and leaves such a row to 4-lane and scalar
/// code, so the row goes in fixed blocks of 8 (each one vector operation) and a scalar tail.
#[inline(always)]
fn update_row<R: Real>(dst: &mut [R], src: &[R], update: impl Fn(R, R) -> R) {
    let (mut d, mut s) = (dst.chunks_exact_mut(BLOCK), src.chunks_exact(BLOCK));
    for (d, s) in (&mut d).zip(&mut s) {
        let (d, s): (&mut [R; BLOCK], &[R; BLOCK]) = (d.try_into().unwrap(), s.try_into().unwrap());
        let (x, y) = (*d, *s);
        *d = std::array::from_fn(|i| update(x[i], y[i]));
    }
    for (d, &s) in d.into_remainder().iter_mut().zip(s.remainder()) {
        *d = update(*d, s);
    }
}

/// `dst += src` over one row.
#[inline(always)]
pub(crate) fn add_row<R: Real>(dst: &mut [R], src: &[R]) {
    update_row(dst, src, |d, s| d + s)
}

/// `dst += a · src` over one row.
#[inline(always)]
pub(crate) fn add_scaled_row<R: Real>(dst: &mut [R], a: R, src: &[R]) {
    update_row(dst, src, |d, s| d + a * s)
}

/// `dst = a · src + b` over one row (a one-input layer's pre-activations), in blocks as
/// [`update_row`].
#[inline(always)]
pub(crate) fn scaled_row_plus<R: Real>(dst: &mut [R], a: R, src: &[R], b: &[R]) {
    let (mut d, mut s, mut c) = (dst.chunks_exact_mut(BLOCK), src.chunks_exact(BLOCK), b.chunks_exact(BLOCK));
    for ((d, s), c) in (&mut d).zip(&mut s).zip(&mut c) {
        let (d, s, c): (&mut [R; BLOCK], &[R; BLOCK], &[R; BLOCK]) = (d.try_into().unwrap(), s.try_into().unwrap(), c.try_into().unwrap());
        let (y, z) = (*s, *c);
        *d = std::array::from_fn(|i| a * y[i] + z[i]);
    }
    for ((d, &s), &c) in d.into_remainder().iter_mut().zip(s.remainder()).zip(c.remainder()) {
        *d = a * s + c;
    }
}

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
        KernelActivation::Relu => rows_with_sums(pre, post, grad, width, bias_grad, weight_grad, |g, a, _| if a > zero { g } else { zero }),
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
            rows_with_sums(pre, post, grad, width, bias_grad, weight_grad, |g, a, _| if a > zero && a < one { g } else { zero })
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
    let rows = grad.chunks_exact_mut(width).zip(pre.chunks_exact(width)).zip(post.chunks_exact(width));
    match weight_grad {
        Some((input, weight_grad)) => {
            for (((g_row, a_row), h_row), &x) in rows.zip(input) {
                for ((((g, &a), &h), b), w) in g_row.iter_mut().zip(a_row).zip(h_row).zip(bias_grad.iter_mut()).zip(weight_grad.iter_mut()) {
                    let v = scale(*g, a, h);
                    *g = v;
                    *b += v;
                    *w += x * v;
                }
            }
        }
        None => {
            for ((g_row, a_row), h_row) in rows {
                for (((g, &a), &h), b) in g_row.iter_mut().zip(a_row).zip(h_row).zip(bias_grad.iter_mut()) {
                    let v = scale(*g, a, h);
                    *g = v;
                    *b += v;
                }
            }
        }
    }
}

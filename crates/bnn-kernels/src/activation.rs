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

/// `grad[i] *= act'(pre[i])`, using the stored outputs where that is cheaper.
#[inline(always)]
pub(crate) fn backward<R: Real>(activation: KernelActivation, pre: &[R], post: &[R], grad: &mut [R]) {
    let zero = R::ZERO;
    let one = R::ONE;
    match activation {
        KernelActivation::Tanh => {
            for (g, &h) in grad.iter_mut().zip(post) {
                *g *= one - h * h;
            }
        }
        KernelActivation::Relu => {
            for (g, &a) in grad.iter_mut().zip(pre) {
                *g = if a > zero { *g } else { zero };
            }
        }
        KernelActivation::LeakyRelu { slope } => {
            let slope = R::from_f64(slope);
            for (g, &a) in grad.iter_mut().zip(pre) {
                *g *= if a > zero { one } else { slope };
            }
        }
        KernelActivation::Sigmoid => {
            for (g, &s) in grad.iter_mut().zip(post) {
                *g *= s * (one - s);
            }
        }
        KernelActivation::Silu => {
            // d/da a·s(a) = s + a·s·(1 − s) = s·(1 + a·(1 − s)).
            for (g, &a) in grad.iter_mut().zip(pre) {
                let s = a.sigmoid();
                *g *= s * (one + a * (one - s));
            }
        }
        KernelActivation::TruncRelu => {
            for (g, &a) in grad.iter_mut().zip(pre) {
                *g = if a > zero && a < one { *g } else { zero };
            }
        }
        KernelActivation::Identity => {}
    }
}

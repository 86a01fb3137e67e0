//! Activation forward and backward over whole layers, branch-free so that loops vectorize.

use crate::real::Real;
use crate::spec::KernelActivation;

/// One activation as a type: its value and the factor its derivative puts on a gradient flowing
/// back through it. `with_activation!` picks the type once, so each loop over a layer is compiled
/// once per activation with the formula inlined (a `match` per element would not vectorize).
pub(crate) trait Elementwise<R: Real>: Copy {
    /// act(a).
    fn value(self, a: R) -> R;
    /// g · act'(a), from the pre-activation `a` or the activation `h = act(a)`, whichever is
    /// cheaper. Branch-free, and no select that keeps g: in a loop that scales g in place, LLVM
    /// turns `g = select(c, g, x)` into a store of x on the lanes where c is false only, a masked
    /// store (`vmaskmovps`, microcoded on AMD: 30% of a 9 × 8 ReLU gradient, `perf` on an AVX2
    /// EPYC). So the steps multiply by a factor selected from 0 and [`Opaque1`], a 1 that the
    /// compiler cannot see, which keeps it from folding g · 1 back into g.
    fn scale(self, g: R, a: R, h: R) -> R;
}

/// The number 1, read through [`std::hint::black_box`] once per layer, so that the compiler
/// cannot fold a multiplication by it (see [`Elementwise::scale`]). x · 1 = x exactly, so the
/// results are those of a select.
#[derive(Clone, Copy)]
pub(crate) struct Opaque1<R>(R);

impl<R: Real> Opaque1<R> {
    #[inline(always)]
    pub(crate) fn new() -> Self {
        Self(std::hint::black_box(R::ONE))
    }

    #[inline(always)]
    pub(crate) fn get(self) -> R {
        self.0
    }
}

/// 1/√(2π), the standard normal density at 0.
pub(crate) const FRAC_1_SQRT_2PI: f64 = 0.398_942_280_401_432_7;

pub(crate) mod kinds {
    use super::{Elementwise, Opaque1, Real, FRAC_1_SQRT_2PI};

    #[derive(Clone, Copy)]
    pub(crate) struct Tanh;
    #[derive(Clone, Copy)]
    pub(crate) struct Relu<R>(pub Opaque1<R>);
    /// The slope for a < 0, and 1.
    #[derive(Clone, Copy)]
    pub(crate) struct LeakyRelu<R>(pub R, pub Opaque1<R>);
    #[derive(Clone, Copy)]
    pub(crate) struct Sigmoid;
    #[derive(Clone, Copy)]
    pub(crate) struct Silu;
    #[derive(Clone, Copy)]
    pub(crate) struct Gelu;
    #[derive(Clone, Copy)]
    pub(crate) struct Softplus;
    #[derive(Clone, Copy)]
    pub(crate) struct TruncRelu<R>(pub Opaque1<R>);
    #[derive(Clone, Copy)]
    pub(crate) struct Identity;

    impl<R: Real> Elementwise<R> for Tanh {
        #[inline(always)]
        fn value(self, a: R) -> R {
            a.tanh()
        }
        #[inline(always)]
        fn scale(self, g: R, _: R, h: R) -> R {
            g * (R::ONE - h * h)
        }
    }
    impl<R: Real> Elementwise<R> for Relu<R> {
        #[inline(always)]
        fn value(self, a: R) -> R {
            a.max(R::ZERO)
        }
        #[inline(always)]
        fn scale(self, g: R, a: R, _: R) -> R {
            g * if a > R::ZERO { self.0.get() } else { R::ZERO }
        }
    }
    impl<R: Real> Elementwise<R> for LeakyRelu<R> {
        #[inline(always)]
        fn value(self, a: R) -> R {
            // A factor, not a select of a: applied in place, that would be a masked store too.
            a * if a > R::ZERO { self.1.get() } else { self.0 }
        }
        #[inline(always)]
        fn scale(self, g: R, a: R, _: R) -> R {
            g * if a > R::ZERO { self.1.get() } else { self.0 }
        }
    }
    impl<R: Real> Elementwise<R> for Sigmoid {
        #[inline(always)]
        fn value(self, a: R) -> R {
            a.sigmoid()
        }
        #[inline(always)]
        fn scale(self, g: R, _: R, s: R) -> R {
            // s(1 − s) as s − s·s: one multiply-add, rounded once.
            g * s.mul_add(-s, s)
        }
    }
    impl<R: Real> Elementwise<R> for Silu {
        #[inline(always)]
        fn value(self, a: R) -> R {
            a * a.sigmoid()
        }
        #[inline(always)]
        fn scale(self, g: R, a: R, _: R) -> R {
            let s = a.sigmoid();
            g * (s * (R::ONE + a * (R::ONE - s)))
        }
    }
    impl<R: Real> Elementwise<R> for Gelu {
        #[inline(always)]
        fn value(self, a: R) -> R {
            a * a.normal_cdf()
        }
        #[inline(always)]
        fn scale(self, g: R, a: R, h: R) -> R {
            // act' = Φ(a) + a·φ(a). Φ(a) = h / a, one division instead of a second Φ (½ at
            // a = 0, where h / a is 0/0); φ(a) = e^{−a²/2} / √(2π).
            let cdf = if a == R::ZERO {
                R::from_f64(0.5)
            } else {
                h / a
            };
            let density = (a * a * R::from_f64(-0.5)).exp() * R::from_f64(FRAC_1_SQRT_2PI);
            g * a.mul_add(density, cdf)
        }
    }
    impl<R: Real> Elementwise<R> for Softplus {
        #[inline(always)]
        fn value(self, a: R) -> R {
            a.softplus()
        }
        #[inline(always)]
        fn scale(self, g: R, a: R, h: R) -> R {
            // softplus' = σ, from h = softplus(a) with one exponential and no division:
            // ln σ(a) = a − h, ln(1 − σ(a)) = −h; the first for a < 0, the second above, so
            // that each side keeps its relative accuracy.
            // (min, not a select of the argument: LLVM pushed that select through the
            // exponential and computed both.)
            let e = (a.min(R::ZERO) - h).exp();
            g * if a < R::ZERO { e } else { R::ONE - e }
        }
    }
    impl<R: Real> Elementwise<R> for TruncRelu<R> {
        #[inline(always)]
        fn value(self, a: R) -> R {
            a.max(R::ZERO).min(R::ONE)
        }
        #[inline(always)]
        fn scale(self, g: R, a: R, _: R) -> R {
            g * if a > R::ZERO && a < R::ONE {
                self.0.get()
            } else {
                R::ZERO
            }
        }
    }
    impl<R: Real> Elementwise<R> for Identity {
        #[inline(always)]
        fn value(self, a: R) -> R {
            a
        }
        #[inline(always)]
        fn scale(self, g: R, _: R, _: R) -> R {
            g
        }
    }
}

/// `with_activation!(activation, |act| body)`: `body` with `act` bound to the [`Elementwise`]
/// type of `activation` (a `KernelActivation`), compiled once per activation.
macro_rules! with_activation {
    ($activation:expr, |$act:ident| $body:expr) => {{
        use $crate::activation::kinds;
        use $crate::spec::KernelActivation as A;
        match $activation {
            A::Tanh => {
                let $act = kinds::Tanh;
                $body
            }
            A::Relu => {
                let $act = kinds::Relu($crate::activation::Opaque1::new());
                $body
            }
            A::LeakyRelu { slope } => {
                let $act = kinds::LeakyRelu(
                    $crate::real::Real::from_f64(slope),
                    $crate::activation::Opaque1::new(),
                );
                $body
            }
            A::Sigmoid => {
                let $act = kinds::Sigmoid;
                $body
            }
            A::Silu => {
                let $act = kinds::Silu;
                $body
            }
            A::Gelu => {
                let $act = kinds::Gelu;
                $body
            }
            A::Softplus => {
                let $act = kinds::Softplus;
                $body
            }
            A::TruncRelu => {
                let $act = kinds::TruncRelu($crate::activation::Opaque1::new());
                $body
            }
            A::Identity => {
                let $act = kinds::Identity;
                $body
            }
        }
    }};
}
pub(crate) use with_activation;

/// `post[i] = act(pre[i])`.
#[inline(always)]
pub(crate) fn forward<R: Real>(activation: KernelActivation, pre: &[R], post: &mut [R]) {
    with_activation!(activation, |act| {
        for (&a, h) in pre.iter().zip(post.iter_mut()) {
            *h = act.value(a);
        }
    })
}

/// `grad[i] = grad[i] · act'(pre[i])` (from `pre` or `post = act(pre)`, whichever is cheaper).
#[inline(always)]
pub(crate) fn backward<R: Real>(
    activation: KernelActivation,
    pre: &[R],
    post: &[R],
    grad: &mut [R],
) {
    // Plain loops, not `for_each`: its `fold` may stay out of line, compiled without the
    // dispatched instruction set (measured: 20× slower tanh, software FMAs).
    with_activation!(activation, |act| {
        for ((g, &a), &h) in grad.iter_mut().zip(pre).zip(post) {
            *g = act.scale(*g, a, h);
        }
    })
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
    with_activation!(activation, |act| rows_with_sums(
        pre,
        post,
        grad,
        width,
        bias_grad,
        weight_grad,
        |g, a, h| act.scale(g, a, h)
    ))
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
    let (mut d, mut s, mut c) = (
        dst.chunks_exact_mut(BLOCK),
        src.chunks_exact(BLOCK),
        b.chunks_exact(BLOCK),
    );
    for ((d, s), c) in (&mut d).zip(&mut s).zip(&mut c) {
        let (d, s, c): (&mut [R; BLOCK], &[R; BLOCK], &[R; BLOCK]) = (
            d.try_into().unwrap(),
            s.try_into().unwrap(),
            c.try_into().unwrap(),
        );
        let (y, z) = (*s, *c);
        *d = std::array::from_fn(|i| a * y[i] + z[i]);
    }
    for ((d, &s), &c) in d
        .into_remainder()
        .iter_mut()
        .zip(s.remainder())
        .zip(c.remainder())
    {
        *d = a * s + c;
    }
}

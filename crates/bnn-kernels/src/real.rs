//! The float types the kernels run in: f32 (sampling) and f64 (reference checks, f64 sampling).

use std::fmt::Debug;
use std::ops::{Add, AddAssign, Div, Mul, MulAssign, Neg, Sub};

/// Arithmetic the kernels need. f32 uses the vectorizable approximations of
/// [`crate::vector_math`]; f64 uses the standard library and `libm`'s erfc (exact to the last
/// bit or two).
pub trait Real:
    Copy
    + Debug
    + Default
    + PartialOrd
    + Send
    + Sync
    + 'static
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
    + AddAssign
    + MulAssign
{
    const ZERO: Self;
    const ONE: Self;
    fn from_f64(value: f64) -> Self;
    fn to_f64(self) -> f64;
    fn exp(self) -> Self;
    fn tanh(self) -> Self;
    fn sigmoid(self) -> Self;
    /// log(1 + e^self), stable in both tails.
    fn softplus(self) -> Self;
    /// Φ(self), the standard normal CDF.
    fn normal_cdf(self) -> Self;
    fn ln(self) -> Self;
    fn max(self, other: Self) -> Self;
    /// self · a + b rounded once (an FMA instruction where the level has one, libm's
    /// correctly rounded software version otherwise: the same bits on every level).
    fn mul_add(self, a: Self, b: Self) -> Self;
    fn min(self, other: Self) -> Self;
}

impl Real for f32 {
    const ZERO: Self = 0.0;
    const ONE: Self = 1.0;
    #[inline(always)]
    fn from_f64(value: f64) -> Self {
        value as f32
    }
    #[inline(always)]
    fn to_f64(self) -> f64 {
        self as f64
    }
    #[inline(always)]
    fn exp(self) -> Self {
        crate::vector_math::exp(self)
    }
    #[inline(always)]
    fn tanh(self) -> Self {
        crate::vector_math::tanh(self)
    }
    #[inline(always)]
    fn sigmoid(self) -> Self {
        crate::vector_math::sigmoid(self)
    }
    #[inline(always)]
    fn softplus(self) -> Self {
        crate::vector_math::softplus(self)
    }
    #[inline(always)]
    fn normal_cdf(self) -> Self {
        crate::vector_math::normal_cdf(self)
    }
    #[inline(always)]
    fn ln(self) -> Self {
        f32::ln(self)
    }
    #[inline(always)]
    fn max(self, other: Self) -> Self {
        f32::max(self, other)
    }
    #[inline(always)]
    fn mul_add(self, a: Self, b: Self) -> Self {
        f32::mul_add(self, a, b)
    }
    #[inline(always)]
    fn min(self, other: Self) -> Self {
        f32::min(self, other)
    }
}

impl Real for f64 {
    const ZERO: Self = 0.0;
    const ONE: Self = 1.0;
    #[inline(always)]
    fn from_f64(value: f64) -> Self {
        value
    }
    #[inline(always)]
    fn to_f64(self) -> f64 {
        self
    }
    #[inline(always)]
    fn exp(self) -> Self {
        f64::exp(self)
    }
    #[inline(always)]
    fn tanh(self) -> Self {
        f64::tanh(self)
    }
    #[inline(always)]
    fn sigmoid(self) -> Self {
        if self >= 0.0 {
            1.0 / (1.0 + (-self).exp())
        } else {
            let e = self.exp();
            e / (1.0 + e)
        }
    }
    #[inline(always)]
    fn softplus(self) -> Self {
        self.max(0.0) + (-self.abs()).exp().ln_1p()
    }
    #[inline(always)]
    fn normal_cdf(self) -> Self {
        // erfc, not 1 + erf: accurate in the lower tail too.
        0.5 * libm::erfc(-self * std::f64::consts::FRAC_1_SQRT_2)
    }
    #[inline(always)]
    fn ln(self) -> Self {
        f64::ln(self)
    }
    #[inline(always)]
    fn max(self, other: Self) -> Self {
        f64::max(self, other)
    }
    #[inline(always)]
    fn mul_add(self, a: Self, b: Self) -> Self {
        f64::mul_add(self, a, b)
    }
    #[inline(always)]
    fn min(self, other: Self) -> Self {
        f64::min(self, other)
    }
}

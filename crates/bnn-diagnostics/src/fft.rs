//! An iterative radix-2 fast Fourier transform (Cooley & Tukey 1965).
//!
//! It exists for one purpose: every autocovariance lag of long chains in O(n log n) instead of
//! O(n²), which is what keeps ESS affordable for 12 chains × 10⁴ draws × hundreds of parameters.

use std::f64::consts::TAU;

/// A complex number, only as much of one as the transform needs.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Complex {
    pub re: f64,
    pub im: f64,
}

impl Complex {
    pub(crate) fn new(re: f64, im: f64) -> Self {
        Self { re, im }
    }

    pub(crate) fn norm_squared(self) -> f64 {
        self.re * self.re + self.im * self.im
    }

    fn mul(self, other: Complex) -> Complex {
        Complex::new(
            self.re * other.re - self.im * other.im,
            self.re * other.im + self.im * other.re,
        )
    }
}

/// A transform of one power-of-two length, with its twiddle factors computed once.
pub(crate) struct Radix2Fft {
    size: usize,
    /// For the stage that combines blocks of `2h` points, `exp(−2πi k / 2h)` for `k < h` sits at
    /// `h − 1 + k`: every stage reads its twiddles contiguously. Each comes from its own
    /// `sin_cos` (no recurrence, so no accumulated rounding).
    twiddles: Vec<Complex>,
}

impl Radix2Fft {
    /// # Panics
    /// If `size` is not a power of two.
    pub(crate) fn new(size: usize) -> Self {
        assert!(
            size.is_power_of_two(),
            "FFT size {size} is not a power of two"
        );
        // The last stage's factors, exp(−2πi k/size) for k < size/2; stage h uses every
        // (size/2h)-th of them.
        let last_stage = last_stage_twiddles(size);
        let mut twiddles = Vec::with_capacity(size.saturating_sub(1));
        let mut half = 1;
        while half < size {
            let stride = size / (2 * half);
            twiddles.extend((0..half).map(|k| last_stage[k * stride]));
            half *= 2;
        }
        Self { size, twiddles }
    }

    /// In place: `X_k = Σ_t x_t exp(−2πi kt / size)`.
    pub(crate) fn forward(&self, data: &mut [Complex]) {
        self.transform(data, false);
    }

    /// In place and unscaled: `x_t = Σ_k X_k exp(+2πi kt / size)`, i.e. `size` × the inverse.
    pub(crate) fn inverse_unscaled(&self, data: &mut [Complex]) {
        self.transform(data, true);
    }

    fn transform(&self, data: &mut [Complex], inverse: bool) {
        let n = self.size;
        assert_eq!(
            data.len(),
            n,
            "FFT buffer length differs from the planned size"
        );
        // Bit-reversal permutation, so that the butterflies can run in place.
        let mut j = 0;
        for i in 1..n {
            let mut bit = n >> 1;
            while j & bit != 0 {
                j ^= bit;
                bit >>= 1;
            }
            j |= bit;
            if i < j {
                data.swap(i, j);
            }
        }
        let conjugate = if inverse { -1.0 } else { 1.0 };
        let mut half = 1;
        while half < n {
            let twiddles = &self.twiddles[half - 1..2 * half - 1];
            for block in data.chunks_exact_mut(2 * half) {
                let (lower, upper) = block.split_at_mut(half);
                for ((a, b), twiddle) in lower.iter_mut().zip(upper.iter_mut()).zip(twiddles) {
                    let product = b.mul(Complex::new(twiddle.re, conjugate * twiddle.im));
                    *b = Complex::new(a.re - product.re, a.im - product.im);
                    *a = Complex::new(a.re + product.re, a.im + product.im);
                }
            }
            half *= 2;
        }
    }
}

/// `exp(−2πi k/size)` for `k < size/2`. Only the first octant is evaluated with `sin_cos`; the
/// rest follow exactly from `cos(π/2 − θ) = sin θ` and `cos(π − θ) = −cos θ`, which makes plans
/// cheap enough to build for every ESS.
fn last_stage_twiddles(size: usize) -> Vec<Complex> {
    let half = size / 2;
    let mut table = vec![Complex::default(); half];
    let angle = |k: usize| TAU * k as f64 / size as f64;
    for (k, slot) in table.iter_mut().enumerate() {
        let (sin, cos) = if 8 * k <= size {
            angle(k).sin_cos()
        } else if 4 * k <= size {
            let (sin, cos) = angle(size / 4 - k).sin_cos();
            (cos, sin)
        } else {
            let (sin, cos) = angle(half - k).sin_cos();
            (sin, -cos)
        };
        *slot = Complex::new(cos, -sin);
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The textbook O(n²) sum, as the reference.
    fn naive_dft(input: &[Complex]) -> Vec<Complex> {
        let n = input.len();
        (0..n)
            .map(|k| {
                input
                    .iter()
                    .enumerate()
                    .fold(Complex::default(), |acc, (t, x)| {
                        let (sin, cos) = (TAU * (k * t % n) as f64 / n as f64).sin_cos();
                        let term = x.mul(Complex::new(cos, -sin));
                        Complex::new(acc.re + term.re, acc.im + term.im)
                    })
            })
            .collect()
    }

    #[test]
    fn matches_the_naive_transform_and_inverts() {
        let input: Vec<Complex> = (0..64)
            .map(|i| Complex::new((i as f64 * 0.37).sin() + 0.1 * i as f64, (i as f64).cos()))
            .collect();
        let mut data = input.clone();
        let fft = Radix2Fft::new(64);
        fft.forward(&mut data);
        for (fast, slow) in data.iter().zip(naive_dft(&input)) {
            assert!((fast.re - slow.re).abs() < 1e-11 && (fast.im - slow.im).abs() < 1e-11);
        }
        fft.inverse_unscaled(&mut data);
        for (back, original) in data.iter().zip(&input) {
            assert!((back.re / 64.0 - original.re).abs() < 1e-13);
            assert!((back.im / 64.0 - original.im).abs() < 1e-13);
        }
    }

    #[test]
    fn twiddles_agree_with_direct_evaluation() {
        for size in [2, 4, 8, 64, 1024] {
            for (k, w) in last_stage_twiddles(size).iter().enumerate() {
                let (sin, cos) = (TAU * k as f64 / size as f64).sin_cos();
                assert!(
                    (w.re - cos).abs() < 4e-16 && (w.im + sin).abs() < 4e-16,
                    "size {size}, k {k}"
                );
            }
        }
    }

    #[test]
    #[should_panic(expected = "not a power of two")]
    fn refuses_other_sizes() {
        Radix2Fft::new(12);
    }
}

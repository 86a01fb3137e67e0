//! Branch-free f32 `exp`, `tanh`, logistic sigmoid, softplus and normal CDF that the compiler
//! vectorizes.
//!
//! libm's scalar `tanhf`/`expf` cost 10–20 ns each and cannot be vectorized; these use
//! Cody–Waite range reduction and a minimax polynomial with only fused multiply-adds, one
//! division and integer bit tricks, so a loop over a slice runs 8 or 16 lanes at a time once
//! `simd::dispatch!` compiles it with AVX2/AVX-512 enabled. A fused multiply-add rounds once on
//! every machine (an FMA instruction where the level has one, libm's `fmaf` otherwise), so every
//! level gives the same bits.
//! Accuracy (checked against f64 in the tests): relative error below 1e-6 for `exp` on
//! [-87, 88], `tanh` everywhere, and `sigmoid` and `softplus` on [-87, ∞) (below −87 they return
//! about e^−87 ≈ 1.6e-38 instead of a smaller number); absolute error below 1.9e-7 for
//! `normal_cdf` (the GELU's Φ) everywhere.
//!
//! Why so few operations: the sigmoid's exponential is most of a sigmoid net's gradient (the
//! 1-50-1 nets of the BNN literature), and that loop is bound by the multiply-add ports. A
//! degree-5 minimax polynomial (5 multiply-adds) replaces the degree-7 Taylor one, 127 is folded
//! into the rounding constant so that 2^n is one shift, and the sigmoid selects its numerator
//! instead of multiplying: 9 multiply-add-port operations per element, down from 12. Measured on
//! the 1-50-1 sigmoid gradient (`cargo bench -p bnn-kernels -- cos2x`, 2-vCPU AMD EPYC; this
//! change alone, before `row_dots`): 3.35 → 2.58 µs on the AVX-512 path, 4.2 → 2.88 µs on AVX2. Replacing the division by a
//! reciprocal from multiply-adds (cubic guess and one third-order Newton step) lost: 3.06 and
//! 3.85 µs.

const LOG2_E: f32 = std::f32::consts::LOG2_E;
/// ln 2 split in a part with few mantissa bits (exact products with small integers) and the rest.
const LN2_HI: f32 = 0.693_359_4;
const LN2_LO: f32 = -2.121_944_4e-4;
/// 1.5·2^23 + 127. Adding it to t (|t| < 2^21) rounds t to the nearest integer n without a
/// rounding instruction (SSE2 has none), and leaves n + 127, the biased exponent of 2^n, in the
/// low mantissa bits: shifting the sum's bits left by 23 gives 2^n.
const ROUND_AND_BIAS: f32 = 12_583_039.0;
/// e^r ≈ 1 + r(D + r(C₀ + C₁r + C₂r² + C₃r³)) on |r| ≤ ln2/2, minimax for the relative error
/// (Lawson's iteration in f64 with the constant term fixed at 1, then rounded to f32). With f32
/// multiply-adds the relative error is below 1.5e-7 on the reduced range (2.5 f32 ulps).
const EXP_D: f32 = 0.999_999_7;
const EXP_C: [f32; 4] = [0.499_991_5, 0.166_676_36, 0.041_897_934, 0.008_290_316];

/// e^x for x in [lowest, highest] ⊆ [-87, 88]; arguments outside are clamped (no infinities,
/// no subnormals), NaN stays NaN.
#[inline(always)]
fn exp_clamped(x: f32, lowest: f32, highest: f32) -> f32 {
    // Written as comparisons so that a NaN passes through (`f32::max` would replace it).
    let x = if x < lowest { lowest } else { x };
    let x = if x > highest { highest } else { x };
    let shifted = x.mul_add(LOG2_E, ROUND_AND_BIAS);
    let n = shifted - ROUND_AND_BIAS;
    let r = (-n).mul_add(LN2_LO, (-n).mul_add(LN2_HI, x));
    let mut p = EXP_C[3];
    for &c in EXP_C[..3].iter().rev() {
        p = p.mul_add(r, c);
    }
    let p = r.mul_add(p, EXP_D).mul_add(r, 1.0);
    // n + 127 lies in [1, 254] here; the shift drops the sum's exponent and leading mantissa bits
    // (a saturating `as i32` would not vectorize).
    p * f32::from_bits(shifted.to_bits() << 23)
}

/// e^x for x in [-87, 88] (arguments outside are clamped: no infinities, no subnormals).
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    exp_clamped(x, -87.0, 88.0)
}

/// Below this |x|, tanh is its odd Taylor polynomial; above, 1 − 2 / (1 + e^{2|x|}).
const TANH_POLYNOMIAL_BELOW: f32 = 0.3;

/// tanh(x), relative error below 1e-6 for every x: one exponential and one division.
#[inline(always)]
pub fn tanh(x: f32) -> f32 {
    let a = x.abs();
    // |x| >= 0.3: no harmful cancellation in 1 − 2 / (1 + e^{2a}) (the result is >= 0.29).
    let large = 1.0 - 2.0 / (1.0 + exp(2.0 * a));
    // |x| < 0.3: a − a³/3 + 2a⁵/15 − 17a⁷/315 + 62a⁹/2835 − 1382a¹¹/155925; the next term
    // is below 6e-10 of the result there.
    const C: [f32; 6] = [
        1.0,
        -1.0 / 3.0,
        2.0 / 15.0,
        -17.0 / 315.0,
        62.0 / 2835.0,
        -1382.0 / 155925.0,
    ];
    let a2 = a * a;
    let mut p = C[5];
    for &c in C[..5].iter().rev() {
        p = p.mul_add(a2, c);
    }
    let small = a * p;
    let t = if a < TANH_POLYNOMIAL_BELOW {
        small
    } else {
        large
    };
    t.copysign(x)
}

/// 1 / (1 + e^{−x}), relative error below 1e-6 for x ≥ −87 (also deep in the lower tail):
/// e = e^{−|x|} ≤ 1, then 1 / (1 + e) for x ≥ 0 and e / (1 + e) below, one division either way.
#[inline(always)]
pub fn sigmoid(x: f32) -> f32 {
    // −|x| ≤ 0 needs no upper clamp; `x > ∞` is false for every x, NaN included, so the
    // compiler drops that comparison.
    let e = exp_clamped(-x.abs(), -87.0, f32::INFINITY);
    let numerator = if x >= 0.0 { 1.0 } else { e };
    numerator / (1.0 + e)
}

/// log(1 + u) ≈ u·P(u) on [0, 1] (softplus's e^{−|x|}), P near-minimax for the relative error
/// (fitted as [`NORMAL_CDF_P`]; 1.9e-7 for the polynomial itself). Relative, so no loss for small
/// u (unlike log of 1 + u); multiply-adds only (2 atanh(u / (2 + u)) needs a division, which cost
/// more than the longer polynomial).
const LOG1P_P: [f32; 8] = [
    0.999_999_8,
    -0.499_974_05,
    0.332_754_8,
    -0.244_954_64,
    0.177_452_45,
    -0.107_681_77,
    0.044_089_67,
    -0.008_539_22,
];

#[inline(always)]
fn log1p_unit(u: f32) -> f32 {
    let mut p = LOG1P_P[7];
    for &c in LOG1P_P[..7].iter().rev() {
        p = p.mul_add(u, c);
    }
    u * p
}

/// softplus(x) = log(1 + e^x) in the stable form max(x, 0) + log1p(e^{−|x|}): one exponential
/// and no division, relative error below 1e-6 for x ≥ −87.
#[inline(always)]
pub fn softplus(x: f32) -> f32 {
    let e = exp_clamped(-x.abs(), -87.0, f32::INFINITY);
    let positive = if x > 0.0 { x } else { 0.0 };
    positive + log1p_unit(e)
}

/// Beyond ±this, Φ(x) is 0 or 1 in f32 (Φ(−4√2) ≈ 7.7e-9, below half an f32 ulp of 1).
const NORMAL_CDF_SATURATES: f32 = 5.656_854;
/// Φ(x) − ½ ≈ x·P(x²)/Q(x²) on |x| ≤ 4√2 (Q's constant term 1): the odd rational form of Eigen's
/// and XLA's f32 `erf`, refitted for Φ here (near-minimax for the absolute error: linearized least
/// squares with Lawson's reweighting in 30-digit `mpmath`, 400 Chebyshev nodes). The rational
/// itself is within 7.6e-10 of Φ − ½ (1.5e-9 as an erf); these are its coefficients rounded to
/// f32.
const NORMAL_CDF_P: [f32; 7] = [
    0.398_942_3,
    0.032_652_49,
    0.004_802_366,
    0.000_169_684_67,
    8.456_35e-6,
    5.281_754e-8,
    -7.549_784_4e-11,
];
const NORMAL_CDF_Q: [f32; 5] = [
    0.248_514_43,
    0.028_456_572,
    0.001_931_688,
    8.184_852e-5,
    2.000_277_4e-6,
];

/// Φ(x), the standard normal CDF (the GELU is x·Φ(x)): absolute error below 1.9e-7 (checked
/// against libm's erfc for every f32 with 1e-4 ≤ |x| ≤ 6: 1.88e-7 at x = 4.75), exactly 0 below
/// −4√2 and 1 above. Nearly all of that is f32 rounding, not the rational's 7.6e-10: two Horner
/// sums, a product and a division, each good to about an ulp of a value near ½, i.e. three f32
/// ulps of Φ near 1. Evaluated in f64 the same rational is within 3.1e-8 (half an ulp), but costs
/// 2.1× as much per element and made the GELU gradient of concrete's net 1.62× ReLU's instead
/// of 1.39× (AVX-512, 2-vCPU AMD EPYC); a two-piece f32 form (a polynomial near 0, e^{poly} in
/// the tails, 6.9e-8) was as slow on AVX2.
#[inline(always)]
pub fn normal_cdf(x: f32) -> f32 {
    let w = x * x;
    let mut p = NORMAL_CDF_P[6];
    for &c in NORMAL_CDF_P[..6].iter().rev() {
        p = p.mul_add(w, c);
    }
    let mut q = NORMAL_CDF_Q[4];
    for &c in NORMAL_CDF_Q[..4].iter().rev() {
        q = q.mul_add(w, c);
    }
    let q = q.mul_add(w, 1.0);
    // Beyond the fitted range the rational is discarded (a NaN fails both comparisons).
    let phi = 0.5 + x * p / q;
    let phi = if x > NORMAL_CDF_SATURATES { 1.0 } else { phi };
    if x < -NORMAL_CDF_SATURATES {
        0.0
    } else {
        phi
    }
}

/// `tanh` over a slice in place, compiled for the best SIMD level of this CPU.
pub fn tanh_in_place(values: &mut [f32]) {
    crate::simd::dispatch!(tanh_slice(values))
}

#[inline(always)]
fn tanh_slice(values: &mut [f32]) {
    for v in values.iter_mut() {
        *v = tanh(*v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn max_relative_error(
        f: impl Fn(f32) -> f32,
        reference: impl Fn(f64) -> f64,
        lo: f64,
        hi: f64,
    ) -> f64 {
        let steps = 200_001;
        let mut worst = 0.0f64;
        for i in 0..steps {
            let x = (lo + (hi - lo) * i as f64 / (steps - 1) as f64) as f32;
            let want = reference(x as f64);
            let got = f(x) as f64;
            let err = if want == 0.0 {
                got.abs()
            } else {
                ((got - want) / want).abs()
            };
            worst = worst.max(err);
        }
        worst
    }

    #[test]
    fn exp_is_accurate_on_its_range() {
        let err = max_relative_error(exp, f64::exp, -87.0, 88.0);
        assert!(err < 1e-6, "exp relative error {err}");
    }

    #[test]
    fn exp_clamps_instead_of_overflowing() {
        assert!(exp(1000.0).is_finite() && exp(1000.0) > 1e38);
        assert!(exp(-1000.0) > 0.0 && exp(-1000.0) < 1e-37);
    }

    #[test]
    fn tanh_is_accurate_near_zero_and_in_the_tails() {
        for (lo, hi) in [(-1e-4, 1e-4), (-1.0, 1.0), (-20.0, 20.0)] {
            let err = max_relative_error(tanh, f64::tanh, lo, hi);
            assert!(err < 1e-6, "tanh relative error {err} on [{lo}, {hi}]");
        }
        assert_eq!(tanh(0.0), 0.0);
        assert_eq!(tanh(100.0), 1.0);
        assert_eq!(tanh(-100.0), -1.0);
    }

    #[test]
    fn sigmoid_is_accurate_in_both_tails() {
        let reference = |x: f64| 1.0 / (1.0 + (-x).exp());
        for (lo, hi) in [(-1.0, 1.0), (-80.0, 80.0)] {
            let err = max_relative_error(sigmoid, reference, lo, hi);
            assert!(err < 1e-6, "sigmoid relative error {err} on [{lo}, {hi}]");
        }
    }

    #[test]
    fn softplus_is_accurate_in_both_tails() {
        let reference = |x: f64| x.max(0.0) + (-x.abs()).exp().ln_1p();
        for (lo, hi) in [(-1.0, 1.0), (-87.0, 87.0), (-1e-6, 1e-6)] {
            let err = max_relative_error(softplus, reference, lo, hi);
            assert!(err < 1e-6, "softplus relative error {err} on [{lo}, {hi}]");
        }
        assert_eq!(softplus(1e30), 1e30);
        assert!(softplus(f32::NAN).is_nan());
    }

    #[test]
    fn normal_cdf_is_within_2e7_everywhere() {
        let reference = |x: f64| 0.5 * libm::erfc(-x / std::f64::consts::SQRT_2);
        let steps = 2_000_001;
        let mut worst = (0.0f64, 0.0f64);
        for i in 0..steps {
            let x = (-9.0 + 18.0 * i as f64 / (steps - 1) as f64) as f32;
            let err = (normal_cdf(x) as f64 - reference(x as f64)).abs();
            if err > worst.0 {
                worst = (err, x as f64);
            }
        }
        // Every f32 with 1e-4 ≤ |x| ≤ 6, checked once: 1.88e-7 at 4.75.
        assert!(
            worst.0 < 1.9e-7,
            "Φ absolute error {:e} at {}",
            worst.0,
            worst.1
        );
        assert_eq!(
            (normal_cdf(0.0), normal_cdf(-100.0), normal_cdf(100.0)),
            (0.5, 0.0, 1.0)
        );
        assert!(normal_cdf(f32::NAN).is_nan());
    }

    #[test]
    fn slice_version_matches_the_scalar_one() {
        let mut v: Vec<f32> = (0..1000).map(|i| (i as f32 - 500.0) * 0.013).collect();
        let expected: Vec<f32> = v.iter().map(|&x| tanh(x)).collect();
        tanh_in_place(&mut v);
        for (a, b) in v.iter().zip(&expected) {
            assert!((a - b).abs() <= 1e-7 * b.abs().max(1e-30), "{a} vs {b}");
        }
    }
}

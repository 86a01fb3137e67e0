//! The standard normal quantile function Φ⁻¹ (Wichura 1988, Algorithm AS 241, `PPND16`).
//!
//! Rank normalization feeds every draw through Φ⁻¹, so its accuracy bounds how closely bulk and
//! tail R-hat and bulk ESS can match a reference: AS 241 is accurate to about 1e-16 relative,
//! while the popular Acklam approximation (1e-9) already moves R-hat in the 11th digit.

// Coefficients are written as published, digit for digit, so they can be checked against the
// source; the digits beyond f64 precision are harmless.
#![allow(clippy::excessive_precision)]

/// Central region `|p − 0.5| ≤ 0.425`: `q · A(r) / B(r)` with `r = 0.180625 − q²`.
const CENTRAL_NUMERATOR: [f64; 8] = [
    3.387_132_872_796_366_608_0,
    1.331_416_678_917_843_774_5e2,
    1.971_590_950_306_551_442_7e3,
    1.373_169_376_550_946_112_5e4,
    4.592_195_393_154_987_145_7e4,
    6.726_577_092_700_870_085_3e4,
    3.343_057_558_358_812_810_5e4,
    2.509_080_928_730_122_672_7e3,
];
const CENTRAL_DENOMINATOR: [f64; 8] = [
    1.0,
    4.231_333_070_160_091_125_2e1,
    6.871_870_074_920_579_083_0e2,
    5.394_196_021_424_751_107_7e3,
    2.121_379_430_158_659_586_7e4,
    3.930_789_580_009_271_061_0e4,
    2.872_908_573_572_194_267_4e4,
    5.226_495_278_852_854_561_0e3,
];

/// Intermediate tail `r = sqrt(−ln min(p, 1 − p)) ≤ 5`, evaluated at `r − 1.6`.
const INTERMEDIATE_NUMERATOR: [f64; 8] = [
    1.423_437_110_749_683_577_34,
    4.630_337_846_156_545_295_90,
    5.769_497_221_460_691_405_50,
    3.647_848_324_763_204_605_04,
    1.270_458_252_452_368_382_58,
    2.417_807_251_774_506_117_70e-1,
    2.272_384_498_926_918_458_33e-2,
    7.745_450_142_783_414_076_40e-4,
];
const INTERMEDIATE_DENOMINATOR: [f64; 8] = [
    1.0,
    2.053_191_626_637_758_821_87,
    1.676_384_830_183_803_849_40,
    6.897_673_349_851_000_045_50e-1,
    1.481_039_764_274_800_745_90e-1,
    1.519_866_656_361_645_719_66e-2,
    5.475_938_084_995_344_946_00e-4,
    1.050_750_071_644_416_843_24e-9,
];

/// Far tail `r > 5` (p below about 1.4e-11), evaluated at `r − 5`.
const FAR_TAIL_NUMERATOR: [f64; 8] = [
    6.657_904_643_501_103_777_20,
    5.463_784_911_164_114_369_90,
    1.784_826_539_917_291_335_80,
    2.965_605_718_285_048_912_30e-1,
    2.653_218_952_657_612_309_30e-2,
    1.242_660_947_388_078_438_60e-3,
    2.711_555_568_743_487_578_15e-5,
    2.010_334_399_292_288_132_65e-7,
];
const FAR_TAIL_DENOMINATOR: [f64; 8] = [
    1.0,
    5.998_322_065_558_879_376_90e-1,
    1.369_298_809_227_358_053_10e-1,
    1.487_536_129_085_061_485_25e-2,
    7.868_691_311_456_132_591_00e-4,
    1.846_318_317_510_054_681_80e-5,
    1.421_511_758_316_445_888_70e-7,
    2.044_263_103_389_939_785_64e-15,
];

/// Φ⁻¹(p): the `x` with `P(Z ≤ x) = p` for `Z ~ N(0, 1)`.
///
/// Returns `−∞` at `p = 0`, `+∞` at `p = 1` and NaN outside `[0, 1]`. `Φ⁻¹(0.5)` is exactly 0,
/// which keeps the rank-normalized draws of a constant parameter exactly 0 (so its R-hat is the
/// 0/0 = NaN that ArviZ reports).
pub fn normal_quantile(p: f64) -> f64 {
    if p.is_nan() || !(0.0..=1.0).contains(&p) {
        return f64::NAN;
    }
    if p == 0.0 {
        return f64::NEG_INFINITY;
    }
    if p == 1.0 {
        return f64::INFINITY;
    }
    let q = p - 0.5;
    if q.abs() <= 0.425 {
        let r = 0.180_625 - q * q;
        return q * rational(&CENTRAL_NUMERATOR, &CENTRAL_DENOMINATOR, r);
    }
    // `1 − p` is exact here (Sterbenz: p ≥ 0.5), so the upper tail keeps full precision.
    let tail_probability = if q < 0.0 { p } else { 1.0 - p };
    let r = (-tail_probability.ln()).sqrt();
    let magnitude = if r <= 5.0 {
        rational(&INTERMEDIATE_NUMERATOR, &INTERMEDIATE_DENOMINATOR, r - 1.6)
    } else {
        rational(&FAR_TAIL_NUMERATOR, &FAR_TAIL_DENOMINATOR, r - 5.0)
    };
    if q < 0.0 {
        -magnitude
    } else {
        magnitude
    }
}

/// `N(r) / D(r)` with both polynomials in Horner form, coefficients in ascending powers.
fn rational(numerator: &[f64; 8], denominator: &[f64; 8], r: f64) -> f64 {
    let horner =
        |coefficients: &[f64; 8]| coefficients.iter().rev().fold(0.0, |acc, &c| acc * r + c);
    horner(numerator) / horner(denominator)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reference values computed with mpmath at 700 digits (`mp.sqrt(2) * mp.erfinv(2p − 1)`).
    const REFERENCE: [(f64, f64); 15] = [
        (0.975, 1.959_963_984_540_053_8),
        (0.5, 0.0),
        (0.841_344_746_068_542_9, 0.999_999_999_999_999_9),
        (0.1, -1.281_551_565_544_600_4),
        (0.3, -0.524_400_512_708_040_8),
        (0.42, -0.201_893_479_141_850_88),
        (0.925, 1.439_531_470_938_456_1),
        (0.075, -1.439_531_470_938_456),
        (0.07, -1.475_791_028_179_170_6),
        (1e-3, -3.090_232_306_167_813_6),
        (0.9999, 3.719_016_485_455_708_4),
        (1e-10, -6.361_340_902_404_057),
        (1.0 - 1e-10, 6.361_340_889_697_422),
        (1e-20, -9.262_340_089_798_407),
        (1e-300, -37.047_096_299_361_2),
    ];

    #[test]
    fn matches_high_precision_reference_values() {
        for (p, expected) in REFERENCE {
            let got = normal_quantile(p);
            let tolerance = 2e-15 * expected.abs().max(1e-300);
            assert!(
                (got - expected).abs() <= tolerance,
                "Φ⁻¹({p}) = {got:e}, expected {expected:e}"
            );
        }
    }

    #[test]
    fn is_antisymmetric_and_handles_the_boundary() {
        // Dyadic p, so that 1 − p is exact and any asymmetry is the function's own.
        for p in [0.007_812_5, 0.1875, 0.40625, 0.4375, 0.498_046_875] {
            let below = normal_quantile(p);
            let above = normal_quantile(1.0 - p);
            assert!((below + above).abs() <= 4e-16 * above.abs(), "p = {p}");
        }
        assert_eq!(normal_quantile(0.0), f64::NEG_INFINITY);
        assert_eq!(normal_quantile(1.0), f64::INFINITY);
        assert!(normal_quantile(-0.1).is_nan());
        assert!(normal_quantile(1.1).is_nan());
        assert!(normal_quantile(f64::NAN).is_nan());
        assert_eq!(normal_quantile(0.5), 0.0);
    }
}

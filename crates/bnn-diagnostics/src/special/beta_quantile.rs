//! The Beta(a, b) quantile function: the `x` with `I_x(a, b) = p`.
//!
//! The MCSE of a quantile (Vehtari et al. 2021) picks two order statistics with `floor`/`ceil`
//! of Beta quantiles, so an error of 1e-4 here shifts an index and the result by a whole gap
//! between draws. We start from the normal-based approximation of Abramowitz & Stegun 26.5.22
//! (or the power-law tails when `a` or `b` is below 1) and polish with Halley steps on
//! `I_x(a, b) − p`, falling back to bisection whenever a step leaves the current bracket.

use super::incomplete_beta::incomplete_beta_parts;
use super::ln_gamma::ln_gamma;
use super::normal_quantile::normal_quantile;

/// Halley converges cubically from the A&S start; the bracket fallback needs at most ~60
/// bisections to pin a double, so this is a safety net, not a working limit.
const MAX_ITERATIONS: usize = 200;

/// Stop once a step changes `x` by less than this many units of `x`.
const RELATIVE_STEP_TOLERANCE: f64 = 4.0 * f64::EPSILON;

/// The `p`-quantile of Beta(a, b), for `0 ≤ p ≤ 1` and `a, b > 0`; NaN outside that domain.
///
/// Accurate to a few ulps of `x` (about 1e-15 relative): the residual is evaluated in the tail
/// where `p` or `1 − p` is the smaller number, so neither side loses precision to `1 − p`.
pub fn beta_quantile(p: f64, a: f64, b: f64) -> f64 {
    if p.is_nan() || a.is_nan() || b.is_nan() || a <= 0.0 || b <= 0.0 || !(0.0..=1.0).contains(&p) {
        return f64::NAN;
    }
    if p == 0.0 {
        return 0.0;
    }
    if p == 1.0 {
        return 1.0;
    }
    let in_lower_tail = p <= 0.5;
    // Exact for p > 0.5 (Sterbenz), so the upper-tail target is the true 1 − p.
    let complement = 1.0 - p;
    // r(x) = I_x(a, b) − p, increasing in x; computed from whichever tail is small.
    let residual = |x: f64| {
        let parts = incomplete_beta_parts(a, b, x);
        let r = if in_lower_tail {
            parts.lower - p
        } else {
            complement - parts.upper
        };
        (r, parts.ln_power_factor)
    };

    let (mut below, mut above) = (0.0_f64, 1.0_f64);
    let mut x = initial_guess(p, a, b);
    if !(x > below && x < above) {
        x = 0.5;
    }
    // Halley steps are accepted only while they stay inside the bracket and at least halve
    // every other step (as in the classic safeguarded Newton); otherwise we bisect, so slow
    // progress far out in a tail cannot stall the search.
    let mut step_before_last = f64::INFINITY;
    let mut last_step = f64::INFINITY;
    for _ in 0..MAX_ITERATIONS {
        let (r, ln_power_factor) = residual(x);
        if r == 0.0 {
            return x;
        }
        if r < 0.0 {
            below = x;
        } else {
            above = x;
        }
        // Beta density f = x^(a−1) (1−x)^(b−1) / B(a, b); f'/f = (a−1)/x − (b−1)/(1−x).
        let density = (ln_power_factor - x.ln() - (-x).ln_1p()).exp();
        let newton = r / density;
        let curvature = (a - 1.0) / x - (b - 1.0) / (1.0 - x);
        let halley_denominator = 1.0 - 0.5 * newton * curvature;
        let step = if halley_denominator.is_finite() && halley_denominator > 0.5 {
            newton / halley_denominator
        } else {
            newton
        };
        if step.abs() <= RELATIVE_STEP_TOLERANCE * x {
            // Below the resolution of x: the root is x up to an ulp or two.
            let polished = x - step;
            return if polished > below && polished < above {
                polished
            } else {
                x
            };
        }
        let candidate = x - step;
        let accept_step = candidate > below
            && candidate < above
            && step.is_finite()
            && step.abs() < 0.5 * step_before_last.abs();
        let next = if accept_step {
            candidate
        } else {
            0.5 * (below + above)
        };
        step_before_last = last_step;
        last_step = x - next;
        x = next;
        if above - below <= RELATIVE_STEP_TOLERANCE * x {
            break;
        }
    }
    x
}

/// A starting point good to a few digits for moderate `a, b`, and inside (0, 1) otherwise.
fn initial_guess(p: f64, a: f64, b: f64) -> f64 {
    if a >= 1.0 && b >= 1.0 {
        // A&S 26.5.22, with y the upper-tail normal deviate: P(Z > y) = p.
        let y = -normal_quantile(p);
        let lambda = (y * y - 3.0) / 6.0;
        let inverse_a = 1.0 / (2.0 * a - 1.0);
        let inverse_b = 1.0 / (2.0 * b - 1.0);
        let h = 2.0 / (inverse_a + inverse_b);
        let w = y * (h + lambda).sqrt() / h
            - (inverse_b - inverse_a) * (lambda + 5.0 / 6.0 - 2.0 / (3.0 * h));
        return a / (a + b * (2.0 * w).exp());
    }
    // Near 0, I_x ≈ x^a / (a B(a, b)); near 1, 1 − I_x ≈ (1 − x)^b / (b B(a, b)).
    let ln_beta = ln_gamma(a) + ln_gamma(b) - ln_gamma(a + b);
    let mean = a / (a + b);
    if incomplete_beta_parts(a, b, mean).lower >= p {
        ((p.ln() + a.ln() + ln_beta) / a).exp()
    } else {
        1.0 - (((1.0 - p).ln() + b.ln() + ln_beta) / b).exp()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::special::regularized_incomplete_beta;

    /// `(p, a, b, x)` from mpmath (bisection to 200 bits on `betainc(a, b, 0, x, regularized=True) − p`,
    /// 60 digits).
    const REFERENCE: [(f64, f64, f64, f64); 6] = [
        (0.158_655_3, 1.0, 1.0, 0.158_655_3),
        (
            0.158_655_3,
            6.855_444_048_893_498,
            130.254_436_928_976_47,
            0.031_791_636_773_722_785,
        ),
        (
            0.841_344_7,
            6.855_444_048_893_498,
            130.254_436_928_976_47,
            0.068_239_306_447_393_36,
        ),
        (0.158_655_3, 0.5, 0.5, 0.060_832_988_616_512_61),
        (0.841_344_7, 0.2, 3.0, 0.130_291_862_096_279_88),
        (0.158_655_3, 2401.0, 45_601.0, 0.049_023_874_435_114_62),
    ];

    #[test]
    fn matches_high_precision_reference() {
        for (p, a, b, expected) in REFERENCE {
            let got = beta_quantile(p, a, b);
            assert!(
                (got - expected).abs() <= 1e-13 * expected,
                "Beta⁻¹({p}; {a}, {b}) = {got:e}, expected {expected:e}"
            );
        }
    }

    #[test]
    fn round_trips_through_the_incomplete_beta() {
        let shapes = [
            (0.3, 0.7),
            (1.0, 3.0),
            (2.5, 2.5),
            (41.0, 761.0),
            (761.0, 41.0),
            (4.0e4, 1.0e3),
        ];
        let probabilities = [
            1e-12,
            1e-4,
            0.05,
            0.158_655_3,
            0.5,
            0.841_344_7,
            0.95,
            1.0 - 1e-6,
        ];
        for (a, b) in shapes {
            for p in probabilities {
                let x = beta_quantile(p, a, b);
                assert!(x > 0.0 && x < 1.0, "Beta⁻¹({p}; {a}, {b}) = {x}");
                let back = regularized_incomplete_beta(a, b, x);
                // I is evaluated to ~1e-14; the tolerance adds the slope times one ulp of x.
                let slope_times_ulp =
                    (back - regularized_incomplete_beta(a, b, x * (1.0 + 1e-15))).abs();
                let tolerance = 1e-12 * p.min(1.0 - p) + 4.0 * slope_times_ulp;
                assert!(
                    (back - p).abs() <= tolerance,
                    "I(Beta⁻¹({p}; {a}, {b})) = {back:e}, off by {:e}",
                    (back - p).abs()
                );
            }
        }
    }

    #[test]
    fn handles_the_ends_and_invalid_input() {
        assert_eq!(beta_quantile(0.0, 2.0, 3.0), 0.0);
        assert_eq!(beta_quantile(1.0, 2.0, 3.0), 1.0);
        assert!(beta_quantile(0.5, 0.0, 3.0).is_nan());
        assert!(beta_quantile(1.5, 2.0, 3.0).is_nan());
        assert!(beta_quantile(f64::NAN, 2.0, 3.0).is_nan());
    }
}

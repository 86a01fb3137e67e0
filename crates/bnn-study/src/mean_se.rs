//! Mean and standard error over replicates, the way the papers' tables report them.

use serde::Serialize;

/// `mean ± s.e.` of replicate values (s.e. = sample sd / √n; NaN for a single replicate).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct MeanSe {
    pub mean: f64,
    pub se: f64,
    pub n: usize,
}

impl MeanSe {
    pub fn of(values: &[f64]) -> Self {
        let n = values.len();
        let mean = values.iter().sum::<f64>() / n as f64;
        let se = if n < 2 {
            f64::NAN
        } else {
            (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64 / n as f64)
                .sqrt()
        };
        Self { mean, se, n }
    }

    /// `0.652 ± 0.019`, or `0.652` without a standard error.
    pub fn display(&self) -> String {
        if self.se.is_finite() {
            format!("{:.3} ± {:.3}", self.mean, self.se)
        } else {
            format!("{:.3}", self.mean)
        }
    }

    /// How many combined standard errors apart two estimates are (`|a - b| / √(se_a² + se_b²)`);
    /// a missing s.e. counts as 0, and two equal means with no spread are 0 apart.
    pub fn z_distance(&self, other: &MeanSe) -> f64 {
        let se = |s: f64| if s.is_finite() { s } else { 0.0 };
        let spread = (se(self.se).powi(2) + se(other.se).powi(2)).sqrt();
        let gap = (self.mean - other.mean).abs();
        if gap == 0.0 {
            0.0
        } else {
            gap / spread
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_error_and_distance() {
        let m = MeanSe::of(&[0.9, 0.92, 0.94, 0.96, 0.98]);
        assert!((m.mean - 0.94).abs() < 1e-12);
        // sd = sqrt(0.001 / 4 * ... ) : values 0.02 apart, sample sd = 0.0316, s.e. = 0.01414
        assert!((m.se - 0.014142135623730963).abs() < 1e-12, "{}", m.se);
        assert_eq!(m.display(), "0.940 ± 0.014");
        let other = MeanSe {
            mean: 0.9,
            se: 0.0,
            n: 5,
        };
        assert!((m.z_distance(&other) - 0.04 / m.se).abs() < 1e-9);
        assert!(MeanSe::of(&[0.5]).se.is_nan());
        assert_eq!(MeanSe::of(&[0.5]).display(), "0.500");
        let zero = MeanSe {
            mean: 0.0,
            se: 0.0,
            n: 5,
        };
        assert_eq!(zero.z_distance(&zero), 0.0);
        assert!(zero
            .z_distance(&MeanSe {
                mean: 0.001,
                se: 0.0,
                n: 5
            })
            .is_infinite());
    }
}

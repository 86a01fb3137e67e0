//! Friedman's first regression problem, at any size: the data for measuring how a sampler scales
//! with the number of rows (the UCI sets stop at protein's 45,730).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::StandardNormal;

use crate::dataset::Dataset;
use crate::error::DataError;
use crate::matrix::Matrix;

/// Rows of `friedman1` when the name gives no size.
pub const FRIEDMAN1_DEFAULT_ROWS: usize = 2_000;
/// Standard deviation of the Gaussian noise on the response (Friedman's choice).
pub const FRIEDMAN1_NOISE_SD: f64 = 1.0;
/// Inputs per row: five that the response reads, five it ignores.
pub const FRIEDMAN1_FEATURES: usize = 10;

/// `n` rows of `x ~ U(0, 1)^10`, `y = 10 sin(π x₁ x₂) + 20 (x₃ − ½)² + 10 x₄ + 5 x₅ + ε`,
/// `ε ~ N(0, 1)`.
///
/// Friedman, "Multivariate adaptive regression splines", Annals of Statistics 19 (1991),
/// §4.3; also scikit-learn's `make_friedman1`. Rows are drawn in order from one ChaCha8
/// stream (ten inputs, then the noise), so a seed gives the same data everywhere and the first
/// rows of a larger set are a smaller one.
pub fn friedman1(n: usize, seed: u64) -> Result<Dataset, DataError> {
    if n == 0 {
        return Err(DataError::InvalidParameter {
            name: "friedman1 rows",
            value: 0.0,
            requirement: "at least 1",
        });
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut x = Vec::with_capacity(n * FRIEDMAN1_FEATURES);
    let mut y = Vec::with_capacity(n);
    for _ in 0..n {
        let row: [f64; FRIEDMAN1_FEATURES] = std::array::from_fn(|_| rng.random_range(0.0..1.0));
        let noise: f64 = rng.sample(StandardNormal);
        x.extend_from_slice(&row);
        y.push(
            10.0 * (std::f64::consts::PI * row[0] * row[1]).sin()
                + 20.0 * (row[2] - 0.5).powi(2)
                + 10.0 * row[3]
                + 5.0 * row[4]
                + FRIEDMAN1_NOISE_SD * noise,
        );
    }
    Ok(Dataset {
        name: "friedman1".into(),
        source: format!("generated:friedman1(n={n},seed={seed})"),
        feature_names: (1..=FRIEDMAN1_FEATURES).map(|i| format!("x{i}")).collect(),
        target_names: vec!["y".into()],
        x: Matrix::new(n, FRIEDMAN1_FEATURES, x),
        y: Matrix::new(n, 1, y),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_gives_the_same_rows_and_a_smaller_set_is_a_prefix() {
        let a = friedman1(500, 7).unwrap();
        let b = friedman1(500, 7).unwrap();
        let small = friedman1(100, 7).unwrap();
        assert_eq!(a.x.data, b.x.data);
        assert_eq!(a.y.data, b.y.data);
        assert_eq!(&a.x.data[..100 * FRIEDMAN1_FEATURES], &small.x.data[..]);
        assert_eq!(&a.y.data[..100], &small.y.data[..]);
        assert_ne!(a.y.data, friedman1(500, 8).unwrap().y.data);
    }

    #[test]
    fn the_response_has_friedmans_mean_and_noise() {
        // E[y] = 10·E[sin(π x₁x₂)] + 20/12 + 5 + 2.5 = 14.413 (E[sin(π x₁x₂)] = 0.5246 by
        // quadrature), and the residual of the noise-free function has sd 1.
        let n = 200_000;
        let d = friedman1(n, 1).unwrap();
        let (x, y) = (&d.x.data, &d.y.data);
        let mean = y.iter().sum::<f64>() / n as f64;
        let sd = (y.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n as f64).sqrt();
        // sd(y) ≈ 5: the mean is within 4 standard errors.
        assert!(
            (mean - 14.413).abs() < 4.0 * sd / (n as f64).sqrt(),
            "mean {mean}"
        );
        let residual: Vec<f64> = (0..n)
            .map(|i| {
                let r = &x[i * FRIEDMAN1_FEATURES..];
                y[i] - (10.0 * (std::f64::consts::PI * r[0] * r[1]).sin()
                    + 20.0 * (r[2] - 0.5).powi(2)
                    + 10.0 * r[3]
                    + 5.0 * r[4])
            })
            .collect();
        let noise_sd = (residual.iter().map(|v| v * v).sum::<f64>() / n as f64).sqrt();
        // sd of a sample sd ≈ 1/√(2n) = 0.0016.
        assert!((noise_sd - 1.0).abs() < 0.01, "noise sd {noise_sd}");
        assert!(x.iter().all(|v| (0.0..1.0).contains(v)));
        assert!(friedman1(0, 1).is_err());
    }
}

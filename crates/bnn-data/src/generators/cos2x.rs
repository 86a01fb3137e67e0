//! The one-dimensional `y = cos(2x) + noise` problem used to study HMC on ReLU networks.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::StandardNormal;

use crate::dataset::Dataset;
use crate::error::DataError;
use crate::matrix::Matrix;

/// Sample size of the synthetic experiment.
pub const COS2X_DEFAULT_ROWS: usize = 100;
/// Standard deviation of the Gaussian observation noise.
pub const COS2X_DEFAULT_NOISE_SD: f64 = 0.1;

/// `n` draws of `x ~ U(0, 4)`, `y ~ N(cos 2x, noise_sd²)`.
///
/// This is the synthetic data set of Dinh, Ho & Nguyen, "Hamiltonian Monte Carlo on ReLU
/// Neural Networks is Inefficient", NeurIPS 2024, whose defaults are 100 rows and noise sd 0.1.
/// Rows are drawn in order from one ChaCha8 stream, so a seed gives the same data everywhere.
pub fn cos2x(n: usize, noise_sd: f64, seed: u64) -> Result<Dataset, DataError> {
    if n == 0 {
        return Err(DataError::InvalidParameter {
            name: "cos2x rows",
            value: 0.0,
            requirement: "at least 1",
        });
    }
    if !(noise_sd.is_finite() && noise_sd >= 0.0) {
        return Err(DataError::InvalidParameter {
            name: "cos2x noise_sd",
            value: noise_sd,
            requirement: "a finite number >= 0",
        });
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut x = Vec::with_capacity(n);
    let mut y = Vec::with_capacity(n);
    for _ in 0..n {
        let xi: f64 = rng.random_range(0.0..4.0);
        let noise: f64 = rng.sample(StandardNormal);
        x.push(xi);
        y.push((2.0 * xi).cos() + noise_sd * noise);
    }
    Ok(Dataset {
        name: "cos2x".into(),
        source: format!("generated:cos2x(n={n},noise_sd={noise_sd},seed={seed})"),
        feature_names: vec!["x".into()],
        target_names: vec!["y".into()],
        x: Matrix::new(n, 1, x),
        y: Matrix::new(n, 1, y),
    })
}

//! Shared test targets and helpers.
#![allow(dead_code)]

use bnn_sampler::{for_each_row, LogDensity, LogDensityError};
use burn::tensor::{DType, Device, Tensor, TensorData};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// `N(0, I_d)`: `log p = −|q|²/2`, `∇ log p = −q`.
pub struct StandardNormal(pub usize);

impl LogDensity for StandardNormal {
    fn dim(&self) -> usize {
        self.0
    }
    fn log_density_and_gradient(
        &self,
        positions: &[f64],
        values: &mut [f64],
        gradients: &mut [f64],
    ) -> Result<(), LogDensityError> {
        for_each_row(self.0, positions, values, gradients, |q, g| {
            for (g, q) in g.iter_mut().zip(q) {
                *g = -q;
            }
            Ok(-0.5 * q.iter().map(|q| q * q).sum::<f64>())
        })
    }
}

/// Uniform values in `±scale`, seeded.
pub fn uniform(len: usize, scale: f64, seed: u64) -> Vec<f64> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..len).map(|_| rng.random_range(-scale..scale)).collect()
}

/// A `[rows, cols]` tensor of `dtype` from host values.
pub fn tensor(
    values: &[f64],
    rows: usize,
    cols: usize,
    device: &Device,
    dtype: DType,
) -> Tensor<2> {
    Tensor::from_data(
        TensorData::new(values.to_vec(), [rows, cols]).convert_dtype(dtype),
        (device, dtype),
    )
}

pub fn host<const D: usize>(t: Tensor<D>) -> Vec<f64> {
    t.into_data().iter::<f64>().collect()
}

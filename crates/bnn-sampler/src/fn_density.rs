//! A log density from a closure: the shortest way to hand a target to the samplers.

use crate::log_density::{for_each_row, LogDensity, LogDensityError};

/// A [`LogDensity`] from `f(q, grad) -> Result<log p(q), _>` over `R^dim`, evaluated row by
/// row (as BlackJAX takes a `logdensity_fn`, and nuts-rs a `logp(x, grad)`).
///
/// The closure writes `∇ log p(q)` into `grad` and returns `log p(q)`. Return a
/// [`LogDensityError::recoverable`]-style error for a point where the density cannot be
/// evaluated (the sampler treats it as a divergence) and a fatal one for a bug.
///
/// ```
/// use bnn_sampler::{FnLogDensity, LogDensity, LogDensityError};
/// // A standard normal in two dimensions.
/// let density = FnLogDensity::new(2, |q: &[f64], grad: &mut [f64]| {
///     for (g, x) in grad.iter_mut().zip(q) {
///         *g = -x;
///     }
///     Ok::<_, LogDensityError>(-0.5 * q.iter().map(|x| x * x).sum::<f64>())
/// });
/// let mut grad = [0.0; 2];
/// assert_eq!(density.evaluate(&[1.0, 2.0], &mut grad).unwrap(), -2.5);
/// assert_eq!(grad, [-1.0, -2.0]);
/// ```
pub struct FnLogDensity<F> {
    dim: usize,
    point: F,
}

impl<F, E> FnLogDensity<F>
where
    F: Fn(&[f64], &mut [f64]) -> Result<f64, E> + Send + Sync,
    E: Into<LogDensityError>,
{
    pub fn new(dim: usize, point: F) -> Self {
        Self { dim, point }
    }
}

impl<F, E> LogDensity for FnLogDensity<F>
where
    F: Fn(&[f64], &mut [f64]) -> Result<f64, E> + Send + Sync,
    E: Into<LogDensityError>,
{
    fn dim(&self) -> usize {
        self.dim
    }

    fn log_density_and_gradient(
        &self,
        positions: &[f64],
        log_densities: &mut [f64],
        gradients: &mut [f64],
    ) -> Result<(), LogDensityError> {
        for_each_row(self.dim, positions, log_densities, gradients, |q, g| {
            (self.point)(q, g).map_err(Into::into)
        })
    }
}

//! The one interface every sampler uses: value and gradient of a log density for a batch of positions.
//!
//! Beside it sit the capabilities some samplers need: value-only evaluation (a surrogate-force
//! leaf needs the true value, not its gradient) is a method with a default here; a
//! position-dependent metric is the sibling trait `RiemannianDensity`, which a density offers
//! through `LogDensity::riemannian`; a surrogate force belongs to the integrator that uses it
//! and reaches the batch through `Integrator::evaluate_auxiliary`.

use std::fmt;

use crate::riemannian_density::RiemannianDensity;

/// Why a log density could not be evaluated (as opposed to evaluating to `-inf` or NaN,
/// which the samplers treat as a divergence).
#[derive(Debug, Clone, PartialEq)]
pub struct LogDensityError {
    pub message: String,
}

impl LogDensityError {
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }
}

impl fmt::Display for LogDensityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for LogDensityError {}

/// A differentiable (unnormalized) log density over `R^D`, evaluated for `C` positions in one call.
///
/// Positions, gradients and values live on the host in `f64`: the sampler's own arithmetic
/// (leapfrog updates, energies, U-turn checks, accumulators) needs the precision, and an
/// implementation backed by Burn tensors copies the `[C, D]` batch to its device once per call.
/// Batching lets one call advance many chains (one GEMM instead of C small ones, or one GPU
/// launch).
pub trait LogDensity: Send + Sync {
    /// Dimension `D` of one position.
    fn dim(&self) -> usize;

    /// Evaluates the log density and its gradient for a row-major `[C, D]` batch.
    ///
    /// `positions.len() == C * D`, `log_densities.len() == C`, `gradients.len() == C * D`.
    /// Non-finite values are allowed in the output (the sampler rejects such points); an `Err`
    /// means the evaluation itself failed.
    fn log_density_and_gradient(
        &self,
        positions: &[f64],
        log_densities: &mut [f64],
        gradients: &mut [f64],
    ) -> Result<(), LogDensityError>;

    /// The log density alone for a row-major `[C, D]` batch. The default calls
    /// `log_density_and_gradient` and drops the gradients; densities with a cheaper value-only
    /// path override it.
    fn log_density(
        &self,
        positions: &[f64],
        log_densities: &mut [f64],
    ) -> Result<(), LogDensityError> {
        let mut gradients = vec![0.0; positions.len()];
        self.log_density_and_gradient(positions, log_densities, &mut gradients)
    }

    /// One position: returns `log p(q)` and writes `∇ log p(q)` into `gradient`.
    fn evaluate(&self, position: &[f64], gradient: &mut [f64]) -> Result<f64, LogDensityError> {
        let mut value = [0.0];
        self.log_density_and_gradient(position, &mut value, gradient)?;
        Ok(value[0])
    }

    /// One position, value only.
    fn value(&self, position: &[f64]) -> Result<f64, LogDensityError> {
        let mut value = [0.0];
        self.log_density(position, &mut value)?;
        Ok(value[0])
    }

    /// The same target with a position-dependent metric, for manifold stochastic dynamics;
    /// `None` (the default) for a density that has none.
    fn riemannian(&self) -> Option<&dyn RiemannianDensity> {
        None
    }
}

impl<T: LogDensity + ?Sized> LogDensity for &T {
    fn dim(&self) -> usize {
        (**self).dim()
    }
    fn log_density_and_gradient(
        &self,
        positions: &[f64],
        log_densities: &mut [f64],
        gradients: &mut [f64],
    ) -> Result<(), LogDensityError> {
        (**self).log_density_and_gradient(positions, log_densities, gradients)
    }
    fn log_density(
        &self,
        positions: &[f64],
        log_densities: &mut [f64],
    ) -> Result<(), LogDensityError> {
        (**self).log_density(positions, log_densities)
    }
    fn riemannian(&self) -> Option<&dyn RiemannianDensity> {
        (**self).riemannian()
    }
}

impl<T: LogDensity + ?Sized> LogDensity for std::sync::Arc<T> {
    fn dim(&self) -> usize {
        (**self).dim()
    }
    fn log_density_and_gradient(
        &self,
        positions: &[f64],
        log_densities: &mut [f64],
        gradients: &mut [f64],
    ) -> Result<(), LogDensityError> {
        (**self).log_density_and_gradient(positions, log_densities, gradients)
    }
    fn log_density(
        &self,
        positions: &[f64],
        log_densities: &mut [f64],
    ) -> Result<(), LogDensityError> {
        (**self).log_density(positions, log_densities)
    }
    fn riemannian(&self) -> Option<&dyn RiemannianDensity> {
        (**self).riemannian()
    }
}

/// Evaluates a batch row by row: `point(q, g)` writes `∇ log p(q)` into `g` and returns
/// `log p(q)`. For densities with no batched form, so that an implementation of
/// [`LogDensity::log_density_and_gradient`] is one call instead of a loop over rows.
pub fn for_each_row(
    dim: usize,
    positions: &[f64],
    log_densities: &mut [f64],
    gradients: &mut [f64],
    mut point: impl FnMut(&[f64], &mut [f64]) -> Result<f64, LogDensityError>,
) -> Result<(), LogDensityError> {
    if positions.len() != log_densities.len() * dim || gradients.len() != positions.len() {
        return Err(LogDensityError::new(format!(
            "batch shapes disagree: {} positions, {} values, {} gradients for dimension {dim}",
            positions.len(),
            log_densities.len(),
            gradients.len()
        )));
    }
    for ((q, g), value) in positions
        .chunks_exact(dim)
        .zip(gradients.chunks_exact_mut(dim))
        .zip(log_densities.iter_mut())
    {
        *value = point(q, g)?;
    }
    Ok(())
}

//! The one interface every sampler uses: value and gradient of a log density for a batch of positions.
//!
//! Beside it sit the capabilities some samplers need: value-only evaluation (a surrogate-force
//! leaf needs the true value, not its gradient) is a method with a default here; a
//! position-dependent metric is the sibling trait `RiemannianDensity`, which a density offers
//! through `LogDensity::riemannian`; a surrogate force belongs to the integrator that uses it
//! and reaches the batch through `Integrator::evaluate_auxiliary`.

use std::error::Error;
use std::sync::Arc;

use crate::dynamics::isokinetic_path::PathIntegrator;
use crate::riemannian_density::RiemannianDensity;

/// Why a log density could not be evaluated (as opposed to evaluating to `-inf` or NaN, which the
/// samplers treat as a divergence), and whether sampling may go on.
///
/// A **recoverable** error is a property of the point (an ODE solver that fails far out in the
/// tails, a likelihood that overflows): inside a trajectory it counts exactly as a non-finite log
/// density there (a divergence, a rejected proposal) and the run goes on. A **fatal** error says
/// the evaluation cannot work anywhere (batch shapes that disagree, a lost device): it stops the
/// run. At a chain's initial point every error stops the run. nuts-rs draws the same line with
/// `LogpError::is_recoverable`.
#[derive(Clone, Debug, thiserror::Error)]
#[error("{message}")]
pub struct LogDensityError {
    kind: LogDensityErrorKind,
    message: String,
    /// What failed underneath (an I/O or device error), kept for whoever reports the error.
    #[source]
    source: Option<Arc<dyn Error + Send + Sync + 'static>>,
}

/// Whether a [`LogDensityError`] ends the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogDensityErrorKind {
    /// The point is unusable, the density is not: a divergence where it happens.
    Recoverable,
    /// The evaluation itself is broken: the run stops with this error.
    Fatal,
}

impl LogDensityError {
    /// A failure at this point only: a divergence inside a trajectory.
    pub fn recoverable(message: impl Into<String>) -> Self {
        Self::of_kind(LogDensityErrorKind::Recoverable, message)
    }

    /// A failure that stops the run (shape mismatches, lost devices, bugs).
    pub fn fatal(message: impl Into<String>) -> Self {
        Self::of_kind(LogDensityErrorKind::Fatal, message)
    }

    /// The same as [`LogDensityError::fatal`]: an error nobody classified stops the run rather
    /// than silently turning into divergences.
    pub fn new(message: impl Into<String>) -> Self {
        Self::fatal(message)
    }

    fn of_kind(kind: LogDensityErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            source: None,
        }
    }

    /// Keeps the error underneath as this one's `source()`.
    pub fn with_source(
        mut self,
        source: impl Into<Box<dyn Error + Send + Sync + 'static>>,
    ) -> Self {
        self.source = Some(Arc::from(source.into()));
        self
    }

    pub fn kind(&self) -> LogDensityErrorKind {
        self.kind
    }

    /// Whether sampling may treat the failure as a divergence and go on.
    pub fn is_recoverable(&self) -> bool {
        self.kind == LogDensityErrorKind::Recoverable
    }

    /// The message, without the source's.
    pub fn message(&self) -> &str {
        &self.message
    }
}

/// An evaluation inside a trajectory: `Ok(Some(value))`, `Ok(None)` for a recoverable failure
/// (the point counts as non-finite: a divergence), `Err` for a fatal one, which ends the run.
pub fn recover<T>(result: Result<T, LogDensityError>) -> Result<Option<T>, LogDensityError> {
    match result {
        Ok(value) => Ok(Some(value)),
        Err(error) if error.is_recoverable() => Ok(None),
        Err(error) => Err(error),
    }
}

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
    /// means the evaluation itself failed: a recoverable one is a divergence, a fatal one ends
    /// the run (see [`LogDensityError`]).
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

    /// The same target as a prior plus a sum over data rows, estimable from a subset of the rows
    /// (stochastic-gradient samplers: SMILE); `None` (the default) for a density that is not.
    fn minibatch(&self) -> Option<&dyn MinibatchDensity> {
        None
    }

    /// Runs many chains' isokinetic paths (MCLMC, MAMS, LAPS) in one piece, where the density
    /// can do so with fewer round trips than one batched call per gradient (the built-in MLP on
    /// a GPU: every step on the device); `None` (the default): the sampler steps them.
    fn path_integrator(&self) -> Option<&dyn PathIntegrator> {
        None
    }
}

/// A log density `log p(θ) = log prior(θ) + Σₙ log p(yₙ | θ)` over `N` data rows that can be
/// estimated from a random subset of them: with `B` rows drawn uniformly without replacement,
/// `log prior(θ) + (N / B) Σ_{n ∈ batch} log p(yₙ | θ)` and its gradient are unbiased for the
/// full ones (the prior enters once, unscaled).
///
/// Each chain of a `[C, D]` call has its own rows, so a batched step gives every chain the
/// noise it would have alone.
pub trait MinibatchDensity: Send + Sync {
    /// The number of data rows `N` the full log likelihood sums over.
    fn num_rows(&self) -> usize;

    /// The minibatch estimate for a row-major `[C, D]` batch: chain `c` uses the row indices
    /// `rows[c·B..(c+1)·B]` (each below [`MinibatchDensity::num_rows`], `B = rows.len() / C`).
    /// Writes the values, and the gradients where `gradients` is given (`C · D` values).
    /// Errors as for [`LogDensity::log_density_and_gradient`].
    fn minibatch_log_density(
        &self,
        rows: &[usize],
        positions: &[f64],
        log_densities: &mut [f64],
        gradients: Option<&mut [f64]>,
    ) -> Result<(), LogDensityError>;
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
    fn minibatch(&self) -> Option<&dyn MinibatchDensity> {
        (**self).minibatch()
    }
    fn path_integrator(&self) -> Option<&dyn PathIntegrator> {
        (**self).path_integrator()
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
    fn minibatch(&self) -> Option<&dyn MinibatchDensity> {
        (**self).minibatch()
    }
    fn path_integrator(&self) -> Option<&dyn PathIntegrator> {
        (**self).path_integrator()
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
        return Err(LogDensityError::fatal(format!(
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

//! Riemannian Hamiltonian dynamics under a position-dependent metric `G(θ)`: the generalized
//! leapfrog (Leimkuhler & Reich; Girolami & Calderhead 2011, eqs. 16–18), reversible and volume
//! preserving for the non-separable `H(θ, p) = −log p(θ) + ½ log det G(θ) + ½ pᵀG(θ)⁻¹p`, and
//! Zlochin & Baram's explicit variant with the metric frozen at the step's start.
//!
//! These are not [`Integrator`](super::Integrator)s: that seam advances a `PhasePoint` by batched
//! `LogDensity` evaluations, with a `Vec<f64>` per-point cache, so that lockstep chains share
//! calls. A step here evaluates a [`RiemannianDensity`] one position at a time, in three kinds of
//! call (the kinetic gradient at the start's fixed metric inside the momentum equation, the
//! metric at each iterate of the position equation, then the value, metric and both gradients
//! at the end), and hands the end's factored metric with its opaque cache (the network's
//! Jacobian) to the next transition. Forcing that through `Integrator` would need an evaluation
//! kind per density method, an opaque cache in every `PhasePoint` and a `Lockstep` that knows the
//! Riemannian density, to batch a kernel the runner never batches.

use crate::dynamics::fixed_point::FixedPointSolver;
use crate::dynamics::StepFailure;
use crate::error::StartError;
use crate::metric::MetricAt;
use crate::riemannian_density::RiemannianDensity;

/// A point of the dynamics: position and momentum, with `log p` and `∇ log p` at the position.
#[derive(Clone, Debug, PartialEq)]
pub struct RiemannianPoint {
    pub position: Vec<f64>,
    pub momentum: Vec<f64>,
    pub log_density: f64,
    pub gradient: Vec<f64>,
}

impl RiemannianPoint {
    /// The point at `position` with a zero momentum (a first refresh then draws a full one).
    pub fn at<D: RiemannianDensity + ?Sized>(
        density: &D,
        position: Vec<f64>,
    ) -> Result<Self, StartError> {
        if position.len() != density.dim() {
            return Err(StartError::WrongDimension {
                expected: density.dim(),
                got: position.len(),
            });
        }
        let mut gradient = vec![0.0; density.dim()];
        let log_density = density
            .evaluate(&position, &mut gradient)
            .map_err(StartError::Evaluation)?;
        if !log_density.is_finite() {
            return Err(StartError::NonFinite { value: log_density });
        }
        Ok(Self {
            momentum: vec![0.0; position.len()],
            position,
            log_density,
            gradient,
        })
    }
}

/// Where a step ends, and `H` there.
pub struct StepEnd {
    pub point: RiemannianPoint,
    pub energy: f64,
    /// The exact step's metric and log-determinant gradient at the end (for the next start);
    /// `None` after a frozen-metric step, which never evaluates the metric there.
    pub metric: Option<(MetricAt, Vec<f64>)>,
}

/// The generalized leapfrog with its implicit equations solved by `solver`:
/// `p½ = p − ε/2 ∇θH(θ, p½)`, `θ' = θ + ε/2 (G(θ)⁻¹ + G(θ')⁻¹) p½`, `p' = p½ − ε/2 ∇θH(θ', p½)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GeneralizedLeapfrog {
    pub solver: FixedPointSolver,
}

impl GeneralizedLeapfrog {
    /// One step of size `step_size` from `from` (`start`: the metric there, `start_log_det`:
    /// `∇θ ½ log det G` there). `Ok` with the fixed-point iterations of both implicit equations;
    /// [`StepFailure::Divergent`] when one does not converge or a value is not finite or fails
    /// recoverably, [`StepFailure::Fatal`] when an evaluation fails fatally.
    pub fn step<D: RiemannianDensity + ?Sized>(
        &self,
        density: &D,
        from: &RiemannianPoint,
        start: &MetricAt,
        start_log_det: &[f64],
        step_size: f64,
    ) -> Result<(StepEnd, usize), StepFailure> {
        let half = 0.5 * step_size;
        let dim = from.position.len();
        let mut iterations = 0;
        // p½ = p − ε/2 (−∇log p(θ) + ∇½log det G(θ) + ∇½p½ᵀG(θ)⁻¹p½): only the last term moves.
        let fixed_force: Vec<f64> = from
            .gradient
            .iter()
            .zip(start_log_det)
            .map(|(g, l)| -g + l)
            .collect();
        let half_momentum =
            self.solver
                .solve(from.momentum.clone(), &mut iterations, |p_half| {
                    let kinetic = density.kinetic_gradient(start, &start.velocity(p_half))?;
                    Ok((0..dim)
                        .map(|i| from.momentum[i] - half * (fixed_force[i] + kinetic[i]))
                        .collect())
                })?;
        // θ' = θ + ε/2 (G(θ)⁻¹ + G(θ')⁻¹) p½: only the metric at θ' moves.
        let velocity_start = start.velocity(&half_momentum);
        let first_guess = (0..dim)
            .map(|i| from.position[i] + step_size * velocity_start[i])
            .collect();
        let position = self
            .solver
            .solve(first_guess, &mut iterations, |theta_end| {
                let velocity_end = density.metric_at(theta_end)?.velocity(&half_momentum);
                Ok((0..dim)
                    .map(|i| from.position[i] + half * (velocity_start[i] + velocity_end[i]))
                    .collect())
            })?;
        // p' = p½ − ε/2 (−∇log p(θ') + ∇φ(θ', p½)), explicit.
        let mut gradient = vec![0.0; dim];
        let failed = |error| StepFailure::after(error, iterations);
        let log_density = density.evaluate(&position, &mut gradient).map_err(failed)?;
        let end = density.metric_at(&position).map_err(failed)?;
        let log_det = density.log_det_gradient(&end).map_err(failed)?;
        let kinetic = density
            .kinetic_gradient(&end, &end.velocity(&half_momentum))
            .map_err(failed)?;
        let momentum: Vec<f64> = (0..dim)
            .map(|i| half_momentum[i] - half * (-gradient[i] + log_det[i] + kinetic[i]))
            .collect();
        let energy = end.hamiltonian(log_density, end.kinetic_energy(&momentum));
        if !energy.is_finite() {
            return Err(StepFailure::Divergent { iterations });
        }
        Ok((
            StepEnd {
                point: RiemannianPoint {
                    position,
                    momentum,
                    log_density,
                    gradient,
                },
                energy,
                metric: Some((end, log_det)),
            },
            iterations,
        ))
    }
}

/// Zlochin & Baram's cheap variant: one explicit leapfrog step with the metric frozen at the
/// start, so the mass matrix is `G(θ)` throughout and the end's energy uses the same `G(θ)`
/// (its `½ log det G` cancels in `ΔH`). **Approximate** as a sampler: the next refresh uses
/// `G(θ')`, which this energy does not account for.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FrozenMetricLeapfrog;

impl FrozenMetricLeapfrog {
    /// One step of size `step_size` from `from` under `metric` (`G(θ)` of the start); a
    /// divergence (no iterations) when the end's value is not finite or fails recoverably.
    pub fn step<D: RiemannianDensity + ?Sized>(
        &self,
        density: &D,
        from: &RiemannianPoint,
        metric: &MetricAt,
        step_size: f64,
    ) -> Result<StepEnd, StepFailure> {
        let half = 0.5 * step_size;
        let dim = from.position.len();
        let half_momentum: Vec<f64> = (0..dim)
            .map(|i| from.momentum[i] - half * -from.gradient[i])
            .collect();
        let velocity = metric.velocity(&half_momentum);
        let position: Vec<f64> = (0..dim)
            .map(|i| from.position[i] + step_size * velocity[i])
            .collect();
        let mut gradient = vec![0.0; dim];
        let log_density = density
            .evaluate(&position, &mut gradient)
            .map_err(|error| StepFailure::after(error, 0))?;
        let momentum: Vec<f64> = (0..dim)
            .map(|i| half_momentum[i] - half * -gradient[i])
            .collect();
        let energy = metric.hamiltonian(log_density, metric.kinetic_energy(&momentum));
        if !energy.is_finite() {
            return Err(StepFailure::Divergent { iterations: 0 });
        }
        Ok(StepEnd {
            point: RiemannianPoint {
                position,
                momentum,
                log_density,
                gradient,
            },
            energy,
            metric: None,
        })
    }
}

//! Integrators for pseudo-marginal Hamiltonian dynamics (Alenlöv, Doucet & Lindsten 2021): the
//! auxiliary variables `u` of a likelihood estimator join the position, and the Gaussian part of
//! their Hamiltonian is integrated exactly by a rotation.
//!
//! The target over `x = (θ, u)` is `log π(θ, u) = log p(θ) + log p̂(y | θ, u) − ½uᵀu`, `u ∈ R^m`
//! standard normal under the estimator, so the θ-marginal of `π` is the posterior whenever
//! `E_u[p̂(y | θ, u)] = p(y | θ)`. With momenta `(ρ, p)`, `H = −log π + ½ρᵀM⁻¹ρ + ½pᵀp` splits into
//! `H₀ = ½ρᵀM⁻¹ρ + ½uᵀu + ½pᵀp`, whose flow is exact (θ drifts, `(u, p)` rotates by the elapsed
//! time), and `U₁ = −log p(θ) − log p̂(y | θ, u)`, whose flow is a kick by `∇U₁`. The density the
//! sampler sees returns `∇ log π`; the kick on `p` adds back `u` (`∇_u log p̂ = ∇_u log π + u`).
//! Positions are `[θ, u]` and momenta `[ρ, p]` in one vector; the metric must be diagonal with
//! an identity `u` block (the rotation assumes unit mass there), so a warmup may adapt the θ block
//! only. Any other metric is an error (`Integrator::check_metric`, which the runner calls before
//! a transition uses a metric), and a step taken with one anyway fails (a
//! divergence) instead of integrating dynamics whose energy the kernel does not test.

use crate::dynamics::{Evaluation, GradientKind, Integrator, PhasePoint};
use crate::error::SamplerError;
use crate::metric::Metric;

/// The integrator's name in errors.
const NAME: &str = "the pseudo-marginal integrator";

/// The order of the two flows within a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PseudoMarginalScheme {
    /// The report's Eq. (4) (Alenlöv et al., App. A): half a flow of `H₀`, a full kick at the
    /// midpoint, half a flow of `H₀`. One gradient at the midpoint and one value at the end (for
    /// the energy) per step.
    FlowKickFlow,
    /// Half kick, a full flow of `H₀`, half kick: one gradient per step (the end's gradient is
    /// the next step's first kick), like the leapfrog.
    KickFlowKick,
}

/// One step of pseudo-marginal Hamiltonian dynamics over `[θ, u]`; both schemes are symplectic
/// and reversible, so NUTS and HMC built on either are exact. After a `FlowKickFlow` step the
/// point's `gradient` is the midpoint's (no step reads it at the end point; see
/// `GradientKind::PseudoMarginalMidpoint`).
#[derive(Clone, Debug)]
pub struct PseudoMarginalLeapfrog {
    theta_dim: usize,
    scheme: PseudoMarginalScheme,
    stage: u8,
}

/// `stage` of a step refused for its metric: it ends invalid at its start.
const REFUSED: u8 = u8::MAX;

impl PseudoMarginalLeapfrog {
    /// `theta_dim`: the number of leading coordinates that are θ; the rest are `u`.
    pub fn new(theta_dim: usize, scheme: PseudoMarginalScheme) -> Self {
        Self {
            theta_dim,
            scheme,
            stage: 0,
        }
    }

    pub fn theta_dim(&self) -> usize {
        self.theta_dim
    }

    /// The exact flow of `H₀` for time `t`: θ += t M⁻¹ρ, and `(u, p)` rotated by the angle `t`.
    fn flow(&self, point: &mut PhasePoint, inverse_diag: &[f64], t: f64) {
        let k = self.theta_dim;
        for ((q, p), m) in point.position[..k]
            .iter_mut()
            .zip(&point.momentum[..k])
            .zip(&inverse_diag[..k])
        {
            *q += t * m * p;
        }
        let (sin, cos) = t.sin_cos();
        for (u, p) in point.position[k..]
            .iter_mut()
            .zip(point.momentum[k..].iter_mut())
        {
            let (u0, p0) = (*u, *p);
            *u = cos * u0 + sin * p0;
            *p = cos * p0 - sin * u0;
        }
    }

    /// A kick of `t` by `−∇U₁` from `point.gradient` (`∇ log π`; the `u` block gets `+u` back).
    fn kick(&self, point: &mut PhasePoint, t: f64) {
        let k = self.theta_dim;
        for (p, g) in point.momentum[..k].iter_mut().zip(&point.gradient[..k]) {
            *p += t * g;
        }
        for ((p, g), u) in point.momentum[k..]
            .iter_mut()
            .zip(&point.gradient[k..])
            .zip(&point.position[k..])
        {
            *p += t * (g + u);
        }
    }

    /// The metric's diagonal, if the dynamics can use it: constant, diagonal, at least `θ`'s
    /// coordinates, unit mass on `u`. Checked in every build (an adapted `u` block in a release
    /// build would otherwise integrate one Hamiltonian and test another).
    fn inverse_diag<'a>(&self, metric: &'a dyn Metric) -> Result<&'a [f64], SamplerError> {
        let refuse = |reason: String| SamplerError::UnsupportedSetting {
            kernel: NAME,
            setting: "metric",
            reason,
        };
        let Some(inverse_diag) = metric.constant_inverse_diag() else {
            return Err(refuse("it needs a constant diagonal metric".into()));
        };
        if self.theta_dim > inverse_diag.len() {
            return Err(refuse(format!(
                "θ has {} coordinates, the metric {}",
                self.theta_dim,
                inverse_diag.len()
            )));
        }
        match inverse_diag[self.theta_dim..].iter().position(|&m| m != 1.0) {
            Some(i) => Err(refuse(format!(
                "the u block must be the identity (the rotation assumes unit mass), but coordinate {} has inverse mass {}; adapt the θ block only",
                self.theta_dim + i,
                inverse_diag[self.theta_dim + i]
            ))),
            None => Ok(inverse_diag),
        }
    }
}

impl Integrator for PseudoMarginalLeapfrog {
    fn gradient_kind(&self) -> GradientKind {
        match self.scheme {
            PseudoMarginalScheme::FlowKickFlow => GradientKind::PseudoMarginalMidpoint,
            PseudoMarginalScheme::KickFlowKick => GradientKind::LogDensity,
        }
    }

    fn check_metric(&self, metric: &dyn Metric) -> Result<(), SamplerError> {
        self.inverse_diag(metric).map(|_| ())
    }

    fn begin(&mut self, point: &mut PhasePoint, metric: &dyn Metric, step_size: f64) -> Evaluation {
        let Ok(inverse_diag) = self.inverse_diag(metric) else {
            // Refused without moving; `resume` ends the step invalid after this evaluation.
            self.stage = REFUSED;
            return Evaluation::Value;
        };
        self.stage = 1;
        match self.scheme {
            PseudoMarginalScheme::FlowKickFlow => {
                self.flow(point, inverse_diag, 0.5 * step_size);
                Evaluation::ValueAndGradient
            }
            PseudoMarginalScheme::KickFlowKick => {
                self.kick(point, 0.5 * step_size);
                self.flow(point, inverse_diag, step_size);
                Evaluation::ValueAndGradient
            }
        }
    }

    fn resume(
        &mut self,
        point: &mut PhasePoint,
        metric: &dyn Metric,
        step_size: f64,
    ) -> Option<Evaluation> {
        if self.stage == REFUSED {
            point.log_density = f64::NAN;
            return None;
        }
        // `begin` checked the metric; the step's stages share it.
        let Some(inverse_diag) = metric.constant_inverse_diag() else {
            point.log_density = f64::NAN;
            return None;
        };
        match (self.scheme, self.stage) {
            (PseudoMarginalScheme::FlowKickFlow, 1) => {
                // A failed midpoint evaluation ends the step invalid before the end's value
                // could overwrite its NaN.
                if point.log_density.is_nan() {
                    return None;
                }
                self.kick(point, step_size);
                self.flow(point, inverse_diag, 0.5 * step_size);
                self.stage = 2;
                // The energy needs log π at the end; the gradient stays the midpoint's (the next
                // step does not use it).
                Some(Evaluation::Value)
            }
            (PseudoMarginalScheme::KickFlowKick, 1) => {
                self.kick(point, 0.5 * step_size);
                metric.update_kinetic_energy(point);
                None
            }
            _ => {
                metric.update_kinetic_energy(point);
                None
            }
        }
    }
}

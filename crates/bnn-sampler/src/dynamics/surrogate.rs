//! Leapfrog leaves driven by a surrogate force (a latent Hamiltonian neural network), with the
//! true log density evaluated once per leaf (value only) so the tree weights leaves by the true H.
//!
//! Dhulipala, Che & Shields (2023) put L-HNN gradients inside NUTS and watch the true energy
//! error of every leaf. Two modes here:
//! - **exact** (default): every leaf is a leapfrog step on one fixed surrogate potential Ũ, which
//!   is symplectic and reversible whatever Ũ is; NUTS weighting the leaves by the *true* H then
//!   leaves the true posterior invariant. A poor surrogate costs acceptance, never correctness.
//! - **adaptive** (the paper's online monitoring, approximate): when a surrogate leaf's error
//!   `H − H₀` exceeds `surrogate_threshold` the leaf is recomputed with the true gradient, and the
//!   rest of the trajectory and the next `cooldown` transitions use true gradients. Which force
//!   moves a leaf then depends on the path, so the scheme is no longer reversible: biased, by an
//!   amount the study measures.

use std::fmt;
use std::sync::Arc;

use crate::dynamics::{kick, kick_and_drift, Evaluation, GradientKind, Integrator, PhasePoint};
use crate::log_density::LogDensityError;
use crate::metric::Metric;

/// A cheap stand-in for `∇ log p`: the force `−∇Ũ` of a fixed surrogate potential, batched.
///
/// Exactness of the exact mode rests on this being the gradient of *one* function of the
/// position alone (a conservative force), e.g. an L-HNN's `−∂H_θ/∂q` at `p = 0`.
pub trait SurrogateGradient: Send + Sync + fmt::Debug {
    /// Dimension `D` of one position.
    fn dim(&self) -> usize;

    /// Writes `∇ log p̃(q) = −∇Ũ(q)` for a row-major `[C, D]` batch of positions.
    fn gradient(&self, positions: &[f64], gradients: &mut [f64]) -> Result<(), LogDensityError>;
}

/// How leaves use the surrogate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SurrogateMode {
    /// Every leaf on the surrogate potential, weighted by the true H: exact for any surrogate.
    Exact,
    /// The paper's online error monitoring (approximate).
    Adaptive(MonitorConfig),
}

/// Thresholds of the online error monitoring (Dhulipala et al. 2023, Alg. 5 and their code).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MonitorConfig {
    /// `Δ_hnn`: a surrogate leaf whose energy error exceeds this is recomputed with the true
    /// gradient (paper: 10).
    pub surrogate_threshold: f64,
    /// Transitions after the one that fell back that start on true gradients (paper: 20).
    pub cooldown: u32,
}

impl Default for MonitorConfig {
    fn default() -> Self {
        Self {
            surrogate_threshold: 10.0,
            cooldown: 20,
        }
    }
}

/// Which force moves the next leaf.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeafForce {
    Surrogate,
    True,
}

/// The online-monitoring state machine, apart from any arithmetic so it can be tested on a
/// scripted error sequence.
///
/// Per transition: `begin_transition` says which force the trajectory starts with; after every
/// surrogate leaf `check_leaf(error)` decides whether to keep it or to recompute it with the
/// true gradient, which switches the rest of the trajectory to true gradients and arms the
/// cool-down: the next `cooldown` transitions start on true gradients too. The looser threshold
/// for true-gradient leaves (`Δ_lf`, paper 1000) is the NUTS divergence threshold.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ErrorMonitor {
    config: Option<MonitorConfig>,
    force: Option<LeafForce>,
    cooldown_left: u32,
    /// Leaves recomputed with the true gradient since the monitor was built.
    pub fallbacks: u64,
}

impl ErrorMonitor {
    /// `None`: the exact mode, which never falls back.
    pub fn new(config: Option<MonitorConfig>) -> Self {
        Self {
            config,
            force: None,
            cooldown_left: 0,
            fallbacks: 0,
        }
    }

    /// Starts a transition; returns the force its first leaf uses.
    pub fn begin_transition(&mut self) -> LeafForce {
        let force = if self.cooldown_left > 0 {
            self.cooldown_left -= 1;
            LeafForce::True
        } else {
            LeafForce::Surrogate
        };
        self.force = Some(force);
        force
    }

    /// The force of the trajectory in progress.
    pub fn force(&self) -> LeafForce {
        self.force.unwrap_or(LeafForce::Surrogate)
    }

    /// After a surrogate leaf with energy error `error` (`H − H₀`; NaN counts as too large):
    /// `true` when it must be recomputed with the true gradient. A fallback switches the rest of
    /// the trajectory to true gradients and restarts the cool-down.
    pub fn check_leaf(&mut self, error: f64) -> bool {
        let Some(config) = self.config else {
            return false;
        };
        if self.force() == LeafForce::True || error <= config.surrogate_threshold {
            return false;
        }
        self.force = Some(LeafForce::True);
        self.cooldown_left = config.cooldown;
        self.fallbacks += 1;
        true
    }

    /// Transitions still to start on true gradients.
    pub fn cooldown_left(&self) -> u32 {
        self.cooldown_left
    }
}

/// Evaluations a surrogate integrator made, for the per-draw statistics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EvaluationCounts {
    /// True value-and-gradient evaluations (fallback leaves).
    pub gradients: u64,
    /// True value-only evaluations (one per surrogate leaf).
    pub values: u64,
    /// Surrogate force evaluations.
    pub surrogate: u64,
}

/// Marker in `PhasePoint::auxiliary` (one element) saying what `gradient` holds at the point.
const GRADIENT_IS_SURROGATE: f64 = 0.0;
const GRADIENT_IS_TRUE: f64 = 1.0;

/// One leaf: a leapfrog step whose force is the surrogate's (or, after a fallback, the true
/// gradient's), ending with the true log density at the new position.
///
/// Between leaves `point.gradient` holds the force the point's next kick uses and
/// `point.auxiliary` one marker saying whose it is; a transition's start (markers cleared)
/// evaluates the force it needs. A trajectory on surrogate leaves asks the density for values
/// only, so the state a transition ends on carries the surrogate's gradient, not the true one.
#[derive(Debug)]
pub struct SurrogateLeapfrog<S: ?Sized> {
    surrogate: Arc<S>,
    monitor: ErrorMonitor,
    initial_energy: f64,
    stage: Stage,
    /// The leaf's start, kept to recompute it after a fallback.
    leaf_start: Option<PhasePoint>,
    counts: EvaluationCounts,
}

// By hand: a derive would ask `S: Clone`, and only the `Arc` is cloned.
impl<S: ?Sized> Clone for SurrogateLeapfrog<S> {
    fn clone(&self) -> Self {
        Self {
            surrogate: Arc::clone(&self.surrogate),
            monitor: self.monitor.clone(),
            initial_energy: self.initial_energy,
            stage: self.stage,
            leaf_start: self.leaf_start.clone(),
            counts: self.counts,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    /// Waiting for the force at the leaf's start.
    StartForce,
    /// Waiting for the surrogate force at the drifted position.
    EndSurrogateForce,
    /// Waiting for the true value at the end of a surrogate leaf.
    EndValue,
    /// Waiting for the true value and gradient at the end of a true leaf.
    EndTrue,
}

impl<S: SurrogateGradient + ?Sized> SurrogateLeapfrog<S> {
    pub fn new(surrogate: Arc<S>, mode: SurrogateMode) -> Self {
        let monitor = ErrorMonitor::new(match mode {
            SurrogateMode::Exact => None,
            SurrogateMode::Adaptive(config) => Some(config),
        });
        Self {
            surrogate,
            monitor,
            initial_energy: f64::NAN,
            stage: Stage::StartForce,
            leaf_start: None,
            counts: EvaluationCounts::default(),
        }
    }

    /// Evaluations since the integrator was built.
    pub fn counts(&self) -> EvaluationCounts {
        self.counts
    }

    pub fn monitor(&self) -> &ErrorMonitor {
        &self.monitor
    }

    fn marker(point: &PhasePoint) -> Option<f64> {
        (point.auxiliary.len() == 1).then(|| point.auxiliary[0])
    }

    fn set_marker(point: &mut PhasePoint, marker: f64) {
        point.auxiliary.clear();
        point.auxiliary.push(marker);
    }

    /// Kick and drift with the force in `point.gradient`, then ask for the end's force.
    fn drift(&mut self, point: &mut PhasePoint, metric: &dyn Metric, step_size: f64) -> Evaluation {
        let inverse_diag = metric
            .constant_inverse_diag()
            .expect("surrogate leaves need a diagonal metric");
        kick_and_drift(
            step_size,
            inverse_diag,
            &mut point.position,
            &mut point.momentum,
            &point.gradient,
        );
        point.auxiliary.clear();
        match self.monitor.force() {
            LeafForce::Surrogate => {
                self.stage = Stage::EndSurrogateForce;
                self.counts.surrogate += 1;
                Evaluation::Auxiliary
            }
            LeafForce::True => {
                self.stage = Stage::EndTrue;
                self.counts.gradients += 1;
                Evaluation::ValueAndGradient
            }
        }
    }

    /// Starts a leaf from `point` with the force the monitor asks for.
    fn start_leaf(
        &mut self,
        point: &mut PhasePoint,
        metric: &dyn Metric,
        step_size: f64,
    ) -> Evaluation {
        let wanted = match self.monitor.force() {
            LeafForce::Surrogate => GRADIENT_IS_SURROGATE,
            LeafForce::True => GRADIENT_IS_TRUE,
        };
        if Self::marker(point) == Some(wanted) {
            return self.drift(point, metric, step_size);
        }
        self.stage = Stage::StartForce;
        match self.monitor.force() {
            LeafForce::Surrogate => {
                self.counts.surrogate += 1;
                Evaluation::Auxiliary
            }
            LeafForce::True => {
                self.counts.gradients += 1;
                Evaluation::ValueAndGradient
            }
        }
    }
}

impl<S: SurrogateGradient + ?Sized> Integrator for SurrogateLeapfrog<S> {
    /// The surrogate's force (a fallback leaf's is the true gradient, but which leaves fall back
    /// depends on the path).
    fn gradient_kind(&self) -> GradientKind {
        GradientKind::Surrogate
    }

    fn begin_transition(&mut self, start: &PhasePoint) {
        self.initial_energy = start.hamiltonian();
        self.monitor.begin_transition();
    }

    fn begin(&mut self, point: &mut PhasePoint, metric: &dyn Metric, step_size: f64) -> Evaluation {
        if self.monitor.config.is_some() {
            match &mut self.leaf_start {
                Some(saved) if saved.dim() == point.dim() => saved.copy_from(point),
                slot => *slot = Some(point.clone()),
            }
        }
        self.start_leaf(point, metric, step_size)
    }

    fn resume(
        &mut self,
        point: &mut PhasePoint,
        metric: &dyn Metric,
        step_size: f64,
    ) -> Option<Evaluation> {
        let inverse_diag = metric
            .constant_inverse_diag()
            .expect("surrogate leaves need a diagonal metric");
        // A force that failed to evaluate left the log density NaN: the leaf ends there, invalid
        // (the tree counts it divergent), before a later value evaluation could overwrite it.
        if matches!(self.stage, Stage::StartForce | Stage::EndSurrogateForce)
            && point.log_density.is_nan()
        {
            return None;
        }
        match self.stage {
            Stage::StartForce => {
                let marker = match self.monitor.force() {
                    LeafForce::Surrogate => GRADIENT_IS_SURROGATE,
                    LeafForce::True => GRADIENT_IS_TRUE,
                };
                Self::set_marker(point, marker);
                Some(self.drift(point, metric, step_size))
            }
            Stage::EndSurrogateForce => {
                point.kinetic_energy = kick(
                    step_size,
                    inverse_diag,
                    &mut point.momentum,
                    &mut point.velocity,
                    &point.gradient,
                );
                Self::set_marker(point, GRADIENT_IS_SURROGATE);
                self.stage = Stage::EndValue;
                self.counts.values += 1;
                Some(Evaluation::Value)
            }
            Stage::EndValue => {
                let error = point.hamiltonian() - self.initial_energy;
                let error = if error.is_nan() { f64::INFINITY } else { error };
                if self.monitor.check_leaf(error) {
                    let saved = self
                        .leaf_start
                        .as_ref()
                        .expect("the adaptive mode keeps each leaf's start");
                    point.copy_from(saved);
                    return Some(self.start_leaf(point, metric, step_size));
                }
                None
            }
            Stage::EndTrue => {
                point.kinetic_energy = kick(
                    step_size,
                    inverse_diag,
                    &mut point.momentum,
                    &mut point.velocity,
                    &point.gradient,
                );
                Self::set_marker(point, GRADIENT_IS_TRUE);
                None
            }
        }
    }

    fn evaluate_auxiliary(&self, points: &mut [&mut PhasePoint]) -> Result<(), LogDensityError> {
        // One chain (every leaf of `Nuts::step`): straight into the point, no gather buffers.
        if let [point] = points {
            let point = &mut **point;
            return self
                .surrogate
                .gradient(&point.position, &mut point.gradient);
        }
        let dim = self.surrogate.dim();
        let positions: Vec<f64> = points
            .iter()
            .flat_map(|p| p.position.iter().copied())
            .collect();
        let mut gradients = vec![0.0; positions.len()];
        self.surrogate.gradient(&positions, &mut gradients)?;
        for (point, gradient) in points.iter_mut().zip(gradients.chunks_exact(dim)) {
            point.gradient.copy_from_slice(gradient);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scripted sequence of leaf errors through the monitor: trigger, the switch to true
    /// gradients for the rest of the trajectory (no more checks), the cool-down's length and
    /// counters, and a fallback re-arming the cool-down.
    #[test]
    fn monitor_follows_a_scripted_error_sequence() {
        let mut monitor = ErrorMonitor::new(Some(MonitorConfig {
            surrogate_threshold: 10.0,
            cooldown: 3,
        }));
        assert_eq!(monitor.begin_transition(), LeafForce::Surrogate);
        assert!(!monitor.check_leaf(2.0));
        assert!(!monitor.check_leaf(10.0), "the threshold itself is kept");
        assert!(monitor.check_leaf(10.5), "above Δ_hnn: recompute");
        assert_eq!(
            (monitor.force(), monitor.fallbacks, monitor.cooldown_left()),
            (LeafForce::True, 1, 3)
        );
        assert!(
            !monitor.check_leaf(500.0),
            "true-gradient leaves are not re-checked (Δ_lf is NUTS's divergence)"
        );
        assert_eq!(monitor.fallbacks, 1);
        // Three cool-down transitions on true gradients, then the surrogate again.
        for left in [2, 1, 0] {
            assert_eq!(monitor.begin_transition(), LeafForce::True);
            assert!(!monitor.check_leaf(f64::INFINITY));
            assert_eq!(monitor.cooldown_left(), left);
        }
        assert_eq!(monitor.begin_transition(), LeafForce::Surrogate);
        assert!(monitor.check_leaf(f64::NAN), "a NaN error falls back");
        assert_eq!((monitor.fallbacks, monitor.cooldown_left()), (2, 3));
        assert_eq!(monitor.begin_transition(), LeafForce::True);
        assert_eq!(monitor.cooldown_left(), 2);

        // The exact mode never falls back.
        let mut exact = ErrorMonitor::new(None);
        for _ in 0..5 {
            assert_eq!(exact.begin_transition(), LeafForce::Surrogate);
            assert!(!exact.check_leaf(f64::INFINITY));
        }
        assert_eq!(exact.fallbacks, 0);
    }
}

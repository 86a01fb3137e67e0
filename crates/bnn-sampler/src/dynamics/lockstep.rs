//! The lockstep driver: one integrator step for many chains, one batched density call per round.

use crate::dynamics::{Evaluation, Integrator, PhasePoint};
use crate::log_density::LogDensity;
use crate::metric::Metric;

/// One chain's part in a lockstep step: its integrator, the point it advances, its metric and its
/// signed step size (chains of one batch may differ in all of them).
pub struct Stepper<'a, I> {
    pub integrator: &'a mut I,
    pub point: &'a mut PhasePoint,
    pub metric: &'a dyn Metric,
    pub step_size: f64,
}

/// Advances a batch of points by one integrator step each, evaluating in rounds: every point
/// that asks for the same kind of evaluation in a round is evaluated in one `[rows, D]` call,
/// and points whose step is complete leave the batch. Static HMC, batched NUTS and MCLMC all
/// step through here, so each chain makes exactly the moves it would make alone (given a
/// density that is deterministic per row).
///
/// A failed batch evaluation gives every point in it a NaN log density (a divergence).
#[derive(Clone, Debug, Default)]
pub struct Lockstep {
    positions: Vec<f64>,
    values: Vec<f64>,
    gradients: Vec<f64>,
    /// The pending request of each stepper; `None` once its step is complete.
    requests: Vec<Option<Evaluation>>,
    rows: Vec<usize>,
}

impl Lockstep {
    /// One step of every stepper.
    pub fn step<L: LogDensity + ?Sized, I: Integrator>(
        &mut self,
        density: &L,
        steppers: &mut [Stepper<'_, I>],
    ) {
        if let [single] = steppers {
            // A batch of one needs no gathering: the same evaluations, in place.
            single
                .point
                .step(single.integrator, density, single.metric, single.step_size);
            return;
        }
        self.requests.clear();
        for s in steppers.iter_mut() {
            self.requests
                .push(Some(s.integrator.begin(s.point, s.metric, s.step_size)));
        }
        loop {
            let pending = |kind| self.requests.contains(&Some(kind));
            let kinds = [
                Evaluation::ValueAndGradient,
                Evaluation::Value,
                Evaluation::Auxiliary,
            ]
            .map(|kind| (kind, pending(kind)));
            if kinds.iter().all(|(_, pending)| !pending) {
                return;
            }
            for (kind, _) in kinds.into_iter().filter(|(_, pending)| *pending) {
                self.rows.clear();
                self.rows.extend(
                    self.requests
                        .iter()
                        .enumerate()
                        .filter(|(_, r)| **r == Some(kind))
                        .map(|(i, _)| i),
                );
                self.evaluate(density, kind, steppers);
            }
            for (s, request) in steppers.iter_mut().zip(&mut self.requests) {
                if request.is_some() {
                    *request = s.integrator.resume(s.point, s.metric, s.step_size);
                }
            }
        }
    }

    /// Evaluates the points of `self.rows` (all asking for `kind`) in one call.
    fn evaluate<L: LogDensity + ?Sized, I: Integrator>(
        &mut self,
        density: &L,
        kind: Evaluation,
        steppers: &mut [Stepper<'_, I>],
    ) {
        let rows = self.rows.len();
        if kind == Evaluation::Auxiliary {
            let mut owner: Option<&I> = None;
            let mut points: Vec<&mut PhasePoint> = Vec::with_capacity(rows);
            for (i, s) in steppers.iter_mut().enumerate() {
                if self.requests[i] == Some(kind) {
                    owner.get_or_insert(&*s.integrator);
                    points.push(&mut *s.point);
                }
            }
            if let Some(integrator) = owner {
                if integrator.evaluate_auxiliary(&mut points).is_err() {
                    points.iter_mut().for_each(|p| p.log_density = f64::NAN);
                }
            }
            return;
        }
        let dim = steppers[self.rows[0]].point.dim();
        self.positions.resize(rows * dim, 0.0);
        self.values.resize(rows, 0.0);
        for (row, &i) in self.rows.iter().enumerate() {
            self.positions[row * dim..(row + 1) * dim].copy_from_slice(&steppers[i].point.position);
        }
        let positions = &self.positions[..rows * dim];
        let values = &mut self.values[..rows];
        let ok = if kind == Evaluation::ValueAndGradient {
            self.gradients.resize(rows * dim, 0.0);
            density
                .log_density_and_gradient(positions, values, &mut self.gradients[..rows * dim])
                .is_ok()
        } else {
            density.log_density(positions, values).is_ok()
        };
        for (row, &i) in self.rows.iter().enumerate() {
            let point = &mut *steppers[i].point;
            point.log_density = if ok { self.values[row] } else { f64::NAN };
            if ok && kind == Evaluation::ValueAndGradient {
                point
                    .gradient
                    .copy_from_slice(&self.gradients[row * dim..(row + 1) * dim]);
            }
        }
    }
}

//! The leapfrog (Störmer–Verlet) integrator for a constant metric: one gradient per step.

use crate::dynamics::{Evaluation, Integrator, PhasePoint};
use crate::metric::Metric;
use crate::summation::dot;

/// First half of a leapfrog step (Neal 2011, eqs. 2.28–2.29): a half kick with the current
/// gradient, then a full drift with the new velocity `M⁻¹p`.
///
/// `gradient` is `∇ log p(q)`, so the kick is `p += ε/2 · ∇ log p(q)` (the force is `-∇U`).
#[inline]
pub fn kick_and_drift(
    step_size: f64,
    inverse_diag: &[f64],
    position: &mut [f64],
    momentum: &mut [f64],
    gradient: &[f64],
) {
    let half = 0.5 * step_size;
    for (((q, p), g), m) in position
        .iter_mut()
        .zip(momentum.iter_mut())
        .zip(gradient)
        .zip(inverse_diag)
    {
        *p += half * g;
        *q += step_size * (m * *p);
    }
}

/// Second half of a leapfrog step (Neal 2011, eq. 2.30): a half kick with the gradient at the new
/// position. Writes the velocity `M⁻¹p` and returns the kinetic energy `½ pᵀM⁻¹p`.
#[inline]
pub fn kick(
    step_size: f64,
    inverse_diag: &[f64],
    momentum: &mut [f64],
    velocity: &mut [f64],
    gradient: &[f64],
) -> f64 {
    let half = 0.5 * step_size;
    for (((p, v), g), m) in momentum
        .iter_mut()
        .zip(velocity.iter_mut())
        .zip(gradient)
        .zip(inverse_diag)
    {
        *p += half * g;
        *v = m * *p;
    }
    0.5 * dot(momentum, velocity)
}

/// Velocity Verlet for `H = -log p(q) + ½ pᵀM⁻¹p` with `M` constant: half kick, drift, one
/// value-and-gradient evaluation, half kick. Symplectic and reversible, local error O(ε³) for
/// smooth densities (Ω(ε) at the kinks of ReLU networks, Dinh et al.).
///
/// With a diagonal metric (the adapted one) kick and drift run fused on slices; any other
/// constant metric goes through `Metric::update_kinetic_energy` for the velocity, which gives
/// the same numbers. Position-dependent metrics need an implicit scheme instead
/// (`generalized_leapfrog`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Leapfrog;

impl Integrator for Leapfrog {
    #[inline]
    fn begin(&mut self, point: &mut PhasePoint, metric: &dyn Metric, step_size: f64) -> Evaluation {
        match metric.constant_inverse_diag() {
            Some(inverse_diag) => kick_and_drift(
                step_size,
                inverse_diag,
                &mut point.position,
                &mut point.momentum,
                &point.gradient,
            ),
            None => {
                let half = 0.5 * step_size;
                point
                    .momentum
                    .iter_mut()
                    .zip(&point.gradient)
                    .for_each(|(p, g)| *p += half * g);
                metric.update_kinetic_energy(point);
                point
                    .position
                    .iter_mut()
                    .zip(&point.velocity)
                    .for_each(|(q, v)| *q += step_size * v);
            }
        }
        Evaluation::ValueAndGradient
    }

    #[inline]
    fn resume(
        &mut self,
        point: &mut PhasePoint,
        metric: &dyn Metric,
        step_size: f64,
    ) -> Option<Evaluation> {
        match metric.constant_inverse_diag() {
            Some(inverse_diag) => {
                point.kinetic_energy = kick(
                    step_size,
                    inverse_diag,
                    &mut point.momentum,
                    &mut point.velocity,
                    &point.gradient,
                );
            }
            None => {
                let half = 0.5 * step_size;
                point
                    .momentum
                    .iter_mut()
                    .zip(&point.gradient)
                    .for_each(|(p, g)| *p += half * g);
                metric.update_kinetic_energy(point);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log_density::{for_each_row, LogDensity, LogDensityError};
    use crate::metric::DiagonalMassMatrix;
    use rand::RngCore;

    /// A diagonal metric that does not reveal its diagonal: the leapfrog's generic path.
    #[derive(Debug)]
    struct Opaque(DiagonalMassMatrix);

    impl Metric for Opaque {
        fn dim(&self) -> usize {
            Metric::dim(&self.0)
        }
        fn sample_momentum(&self, point: &mut PhasePoint, rng: &mut dyn RngCore) {
            Metric::sample_momentum(&self.0, point, rng)
        }
        fn update_kinetic_energy(&self, point: &mut PhasePoint) {
            self.0.update_kinetic_energy(point)
        }
    }

    struct Quartic;

    impl LogDensity for Quartic {
        fn dim(&self) -> usize {
            3
        }
        fn log_density_and_gradient(
            &self,
            q: &[f64],
            v: &mut [f64],
            g: &mut [f64],
        ) -> Result<(), LogDensityError> {
            for_each_row(3, q, v, g, |q, g| {
                g.iter_mut()
                    .zip(q)
                    .for_each(|(g, x)| *g = -x * x * x - 0.3 * x);
                Ok(-q
                    .iter()
                    .map(|x| 0.25 * x.powi(4) + 0.15 * x * x)
                    .sum::<f64>())
            })
        }
    }

    /// The fused diagonal path and the generic metric path give the same trajectory, bit for bit.
    #[test]
    fn generic_metric_path_equals_fused_path() {
        let diagonal = DiagonalMassMatrix::new(vec![0.5, 1.0, 3.0]).unwrap();
        let opaque = Opaque(diagonal.clone());
        let mut fused = PhasePoint::new(3);
        fused.position = vec![0.3, -1.2, 2.0];
        fused.momentum = vec![1.0, 0.4, -0.7];
        fused.log_density = Quartic
            .evaluate(&fused.position, &mut fused.gradient)
            .unwrap();
        fused.refresh_velocity(&diagonal);
        let mut generic = fused.clone();
        for step in [0.1, 0.1, -0.05, 0.2] {
            fused.leapfrog(&Quartic, &diagonal, step).unwrap();
            generic.leapfrog(&Quartic, &opaque, step).unwrap();
            assert_eq!(fused, generic);
        }
    }
}

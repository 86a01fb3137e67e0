//! Fixed-point iteration with Anderson acceleration: the solver of the generalized leapfrog's
//! implicit equations.

use bnn_numerics::Cholesky;

use crate::dynamics::StepFailure;
use crate::log_density::LogDensityError;
use crate::metric::riemannian::dot;

/// Solves `x = g(x)` by iteration, stopping when an iterate moves no coordinate by more than
/// `tolerance` relative to `1 + |x|`. Non-convergence is reported (as a divergence of the step
/// that needed the solution), never silently accepted as Stan's and BlackJAX's solvers do.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FixedPointSolver {
    /// Evaluations of `g` allowed before the equation counts as unsolved.
    pub max_iterations: usize,
    /// The largest change of an iterate, relative to `1 + |value|`, that counts as converged.
    pub tolerance: f64,
}

impl FixedPointSolver {
    /// Solves `x = update(x)` from `start`, counting evaluations in `iterations`; a
    /// [`StepFailure::Divergent`] when it does not converge within the allowed iterations, a
    /// value is not finite, or `update` fails recoverably, [`StepFailure::Fatal`] when `update`
    /// fails fatally. Plain iteration contracts slowly (or not at all) where the
    /// metric changes fast along the step, so the iterates are Anderson-accelerated (Walker & Ni
    /// 2011; the last `ANDERSON_DEPTH` differences): the same fixed point, reached in far fewer
    /// evaluations.
    pub fn solve(
        &self,
        start: Vec<f64>,
        iterations: &mut usize,
        mut update: impl FnMut(&[f64]) -> Result<Vec<f64>, LogDensityError>,
    ) -> Result<Vec<f64>, StepFailure> {
        let mut current = start;
        let mut history = AndersonHistory::default();
        for _ in 0..self.max_iterations {
            *iterations += 1;
            let image = update(&current).map_err(|error| StepFailure::after(error, *iterations))?;
            let change = max_relative_change(&current, &image);
            if !change.is_finite() {
                return Err(StepFailure::Divergent {
                    iterations: *iterations,
                });
            }
            if change < self.tolerance {
                return Ok(image);
            }
            current = history.next_iterate(&current, image);
        }
        Err(StepFailure::Divergent {
            iterations: *iterations,
        })
    }
}

/// How many past steps Anderson acceleration mixes.
const ANDERSON_DEPTH: usize = 5;

/// Differences of the last residuals `f = g(x) − x` and images `g(x)`.
#[derive(Default)]
struct AndersonHistory {
    last: Option<(Vec<f64>, Vec<f64>)>,
    residual_steps: Vec<Vec<f64>>,
    image_steps: Vec<Vec<f64>>,
}

impl AndersonHistory {
    /// The next iterate after `x` with image `g`: `g − ΔG γ`, `γ` minimizing `|f − ΔF γ|`.
    fn next_iterate(&mut self, x: &[f64], g: Vec<f64>) -> Vec<f64> {
        let f: Vec<f64> = g.iter().zip(x).map(|(g, x)| g - x).collect();
        if let Some((last_f, last_g)) = self.last.take() {
            if self.residual_steps.len() == ANDERSON_DEPTH {
                self.residual_steps.remove(0);
                self.image_steps.remove(0);
            }
            self.residual_steps
                .push(f.iter().zip(&last_f).map(|(a, b)| a - b).collect());
            self.image_steps
                .push(g.iter().zip(&last_g).map(|(a, b)| a - b).collect());
        }
        self.last = Some((f.clone(), g.clone()));
        let m = self.residual_steps.len();
        if m == 0 {
            return g;
        }
        // Normal equations (ΔFᵀΔF + λI) γ = ΔFᵀ f, λ a tiny multiple of the trace.
        let mut normal = vec![0.0; m * m];
        let mut rhs = vec![0.0; m];
        for i in 0..m {
            rhs[i] = dot(&self.residual_steps[i], &f);
            for j in 0..m {
                normal[i * m + j] = dot(&self.residual_steps[i], &self.residual_steps[j]);
            }
        }
        let trace: f64 = (0..m).map(|i| normal[i * m + i]).sum();
        for i in 0..m {
            normal[i * m + i] += 1e-12 * trace + f64::MIN_POSITIVE;
        }
        let Ok(factor) = Cholesky::new(&normal, m) else {
            self.residual_steps.clear();
            self.image_steps.clear();
            return g;
        };
        let mut gamma = vec![0.0; m];
        factor.solve(&rhs, &mut gamma);
        let mut next = g;
        for (step, weight) in self.image_steps.iter().zip(&gamma) {
            for (x, d) in next.iter_mut().zip(step) {
                *x -= weight * d;
            }
        }
        next
    }
}

/// `max_i |a_i − b_i| / (1 + |b_i|)`.
fn max_relative_change(a: &[f64], b: &[f64]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs() / (1.0 + y.abs()))
        .fold(0.0, f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anderson_acceleration_solves_a_slowly_contracting_map_in_few_iterations() {
        // x = cos(x) coordinate-wise, slowed down: g(x) = x + 0.05 (cos x − x) contracts by
        // ≈ 0.95 per plain iteration, which needs hundreds of iterations to 1e-12.
        let solver = FixedPointSolver {
            max_iterations: 60,
            tolerance: 1e-12,
        };
        let mut iterations = 0;
        let x = solver
            .solve(vec![0.0, 1.0, -2.0], &mut iterations, |x| {
                Ok(x.iter().map(|v| v + 0.05 * (v.cos() - v)).collect())
            })
            .unwrap();
        for v in &x {
            assert!((v - v.cos()).abs() < 1e-10, "{x:?}");
        }
        assert!(iterations < 60, "{iterations}");
    }

    #[test]
    fn failures_and_non_convergence_report_the_iterations_spent() {
        let solver = FixedPointSolver {
            max_iterations: 5,
            tolerance: 1e-12,
        };
        let mut iterations = 0;
        // x = x + 1 has no solution.
        let unsolved = solver.solve(vec![1.0], &mut iterations, |x| Ok(vec![x[0] + 1.0]));
        assert!(matches!(
            unsolved,
            Err(StepFailure::Divergent { iterations: 5 })
        ));
        let mut iterations = 0;
        let failing = solver.solve(vec![1.0], &mut iterations, |_| {
            Err(LogDensityError::recoverable("no metric here"))
        });
        assert!(matches!(
            failing,
            Err(StepFailure::Divergent { iterations: 1 })
        ));
        let mut iterations = 0;
        let broken = solver.solve(vec![1.0], &mut iterations, |_| {
            Err(LogDensityError::fatal("wrong length"))
        });
        assert!(
            matches!(&broken, Err(StepFailure::Fatal(e)) if e.message() == "wrong length"),
            "{broken:?}"
        );
    }
}

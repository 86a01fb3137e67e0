//! The heuristic initial step size: double or halve ε until one leapfrog step's acceptance crosses ½.

use rand::Rng;

use crate::kernels::KernelState;
use crate::log_density::{LogDensity, LogDensityError};
use crate::metric::DiagonalMassMatrix;
use crate::phase_point::PhasePoint;

/// Most doublings or halvings tried (a factor of 2^50 either way).
const MAX_TRIES: usize = 50;

/// The rule of the step-size search run before the warmup and after every metric update.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepSizeSearch {
    /// Hoffman & Gelman (2014), Alg. 4, as Stan runs it: one momentum draw, crossing at
    /// acceptance ½.
    #[default]
    Stan,
    /// NumPyro's variant: a fresh momentum per try, crossing at the target acceptance δ.
    /// After the last metric window of a short warmup (10 of 100 iterations left) the averaged
    /// step size stays near the search's result, so a level at δ = 0.8 starts it lower: on
    /// yacht (12 ReLU chains from the same members) 3920 / 3412 divergent draws of 12000
    /// instead of 5301 / 5201 (chain seeds 0 / 1), for 15–17% more gradients (README, "End to
    /// end against NumPyro").
    Target,
}

/// What one search does: the acceptance level it crosses and whether every try draws a new
/// momentum.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SearchRule {
    pub level: f64,
    pub fresh_momenta: bool,
}

impl StepSizeSearch {
    /// The rule for a kernel with target acceptance δ.
    pub fn rule(self, target_accept: f64) -> SearchRule {
        match self {
            StepSizeSearch::Stan => SearchRule {
                level: 0.5,
                fresh_momenta: false,
            },
            StepSizeSearch::Target => SearchRule {
                level: target_accept,
                fresh_momenta: true,
            },
        }
    }
}

/// Hoffman & Gelman (2014), Alg. 4: take a single leapfrog step of size ε from `(q, p)`,
/// `p ~ N(0, M)`; if its acceptance ratio `exp(H0 - H)` exceeds the rule's level, keep doubling
/// ε until it falls below, otherwise keep halving until it rises above, and return the last ε.
/// This gives the dual averaging a starting point of the right order of magnitude.
///
/// Random numbers: `D` normals for the momentum, or for every try with `fresh_momenta`. A
/// recoverable evaluation failure counts as a step with acceptance 0; a fatal one is returned.
pub fn find_reasonable_step_size<L: LogDensity + ?Sized, R: Rng + ?Sized>(
    density: &L,
    rng: &mut R,
    state: &KernelState,
    metric: &DiagonalMassMatrix,
    initial_step_size: f64,
    rule: SearchRule,
) -> Result<f64, LogDensityError> {
    let dim = state.dim();
    let mut start = PhasePoint::new(dim);
    start.reset_to(&state.position, &state.gradient, state.log_density);
    let mut draw_momentum = |start: &mut PhasePoint| {
        metric.sample_momentum(rng, &mut start.momentum);
        start.refresh_velocity(metric);
    };
    draw_momentum(&mut start);
    let mut point = start.clone();
    let mut log_ratio = |step_size: f64| {
        if rule.fresh_momenta {
            draw_momentum(&mut start);
        }
        let initial_energy = start.hamiltonian();
        point.copy_from(&start);
        point.leapfrog(density, metric, step_size)?;
        let delta = initial_energy - point.hamiltonian();
        Ok(if delta.is_nan() {
            f64::NEG_INFINITY
        } else {
            delta
        })
    };

    let log_level = rule.level.ln();
    let mut step_size = initial_step_size;
    let grow = log_ratio(step_size)? > log_level;
    for _ in 0..MAX_TRIES {
        let next = if grow {
            2.0 * step_size
        } else {
            0.5 * step_size
        };
        if !(next.is_finite() && next > 0.0) {
            break;
        }
        step_size = next;
        let crossed = if grow {
            log_ratio(step_size)? <= log_level
        } else {
            log_ratio(step_size)? > log_level
        };
        if crossed {
            break;
        }
    }
    Ok(step_size)
}

//! The heuristic initial step size: double or halve ε until one leapfrog step's acceptance crosses ½.

use rand::Rng;

use crate::phase_point::PhasePoint;
use crate::kernels::KernelState;
use crate::log_density::LogDensity;
use crate::metric::DiagonalMassMatrix;

/// Most doublings or halvings tried (a factor of 2^50 either way).
const MAX_TRIES: usize = 50;

/// Hoffman & Gelman (2014), Alg. 4: with one momentum draw `p ~ N(0, M)`, take a single leapfrog
/// step of size ε from `(q, p)`; if its acceptance ratio `exp(H0 - H)` exceeds ½, keep doubling ε
/// until it falls below, otherwise keep halving until it rises above, and return the last ε. This
/// gives the dual averaging a starting point of the right order of magnitude.
///
/// Random numbers: `D` normals for the momentum.
pub fn find_reasonable_step_size<L: LogDensity + ?Sized, R: Rng + ?Sized>(
    density: &L,
    rng: &mut R,
    state: &KernelState,
    metric: &DiagonalMassMatrix,
    initial_step_size: f64,
) -> f64 {
    let dim = state.dim();
    let mut start = PhasePoint::new(dim);
    start.reset_to(&state.position, &state.gradient, state.log_density);
    metric.sample_momentum(rng, &mut start.momentum);
    start.refresh_velocity(metric);
    let initial_energy = start.hamiltonian();
    let mut point = start.clone();
    let mut log_ratio = |step_size: f64| {
        point.copy_from(&start);
        point.leapfrog(density, metric, step_size);
        let delta = initial_energy - point.hamiltonian();
        if delta.is_nan() {
            f64::NEG_INFINITY
        } else {
            delta
        }
    };

    let log_half = -std::f64::consts::LN_2;
    let mut step_size = initial_step_size;
    let grow = log_ratio(step_size) > log_half;
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
            log_ratio(step_size) <= log_half
        } else {
            log_ratio(step_size) > log_half
        };
        if crossed {
            break;
        }
    }
    step_size
}

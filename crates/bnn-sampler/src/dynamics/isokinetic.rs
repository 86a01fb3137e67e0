//! Isokinetic (unit-speed) dynamics for microcanonical samplers: the exact velocity update under a
//! fixed gradient, the position drift, McLachlan's two-gradient splitting and the partial
//! velocity refresh.
//!
//! The velocity `u` lives on the unit sphere. Under a constant force `g = ∇ log p` its motion
//! has a closed form (Ver Steeg & Galstyan 2021; Robnik et al. 2023):
//! with `ĝ = g/|g|`, `δ = ε|g|/(d − 1)` and `ζ = e^{−δ}`,
//! `u' ∝ ĝ(1 − ζ)(1 + ζ + (ĝ·u)(1 − ζ)) + 2ζu`, and the kinetic energy changes by
//! `(d − 1)(δ − ln 2 + ln(1 + ĝ·u + (1 − ĝ·u)ζ²))`. The energy change of a step (kinetic change
//! minus the change of `log p`) is what the MCLMC tuner watches (its variance per dimension
//! measures the integration error) and what MAMS's Metropolis test uses.

use crate::log_density::LogDensity;

/// McLachlan's minimal-norm coefficient `b₁` (McLachlan 1995; Omelyan et al. 2003): the velocity
/// updates are `b₁ε, (1 − 2b₁)ε, b₁ε` around two half drifts, two gradients per step.
pub const MCLACHLAN_B1: f64 = 0.193_183_327_503_783_6;

/// Updates the unit velocity `velocity` under the force `gradient` for a time `time` (the step
/// size times the splitting coefficient) and returns the kinetic energy change.
///
/// A zero gradient leaves the velocity as it is (no direction to turn to).
pub fn update_velocity(velocity: &mut [f64], gradient: &[f64], time: f64) -> f64 {
    kick_velocity::<false>(velocity, gradient, gradient, time)
}

/// [`update_velocity`] under the force `scale ⊙ gradient` (a diagonal preconditioner's
/// `√Σ`), formed on the fly instead of in a buffer: the kick is a few passes over `d` values
/// three times per step, a visible share of a microcanonical step on small networks.
pub fn update_velocity_scaled(velocity: &mut [f64], gradient: &[f64], scale: &[f64], time: f64) -> f64 {
    kick_velocity::<true>(velocity, gradient, scale, time)
}

/// The force is `gradient ⊙ scale` when `SCALED`, else `gradient` (then `scale` is not read).
fn kick_velocity<const SCALED: bool>(velocity: &mut [f64], gradient: &[f64], scale: &[f64], time: f64) -> f64 {
    let dim = velocity.len();
    let force = |g: f64, s: f64| if SCALED { g * s } else { g };
    let mut square = [0.0; LANES];
    let mut dot = [0.0; LANES];
    for ((gs, ss), us) in gradient.chunks(LANES).zip(scale.chunks(LANES)).zip(velocity.chunks(LANES)) {
        for (k, ((&g, &s), &u)) in gs.iter().zip(ss).zip(us).enumerate() {
            let f = force(g, s);
            square[k] += f * f;
            dot[k] += f * u;
        }
    }
    let gradient_norm = square.iter().sum::<f64>().sqrt();
    if gradient_norm == 0.0 || dim < 2 {
        return 0.0;
    }
    let dims_minus_one = (dim - 1) as f64;
    let delta = time * gradient_norm / dims_minus_one;
    let zeta = (-delta).exp();
    let projection = dot.iter().sum::<f64>() / gradient_norm;
    let along = (1.0 - zeta) * (1.0 + zeta + projection * (1.0 - zeta)) / gradient_norm;
    let twice_zeta = 2.0 * zeta;
    let mut partial = [0.0; LANES];
    for ((us, gs), ss) in velocity.chunks_mut(LANES).zip(gradient.chunks(LANES)).zip(scale.chunks(LANES)) {
        for (((u, &g), &s), p) in us.iter_mut().zip(gs).zip(ss).zip(partial.iter_mut()) {
            *u = along * force(g, s) + twice_zeta * *u;
            *p += *u * *u;
        }
    }
    let inverse_norm = 1.0 / partial.iter().sum::<f64>().sqrt();
    velocity.iter_mut().for_each(|u| *u *= inverse_norm);
    dims_minus_one * (delta - std::f64::consts::LN_2 + (1.0 + projection + (1.0 - projection) * zeta * zeta).ln())
}

/// Independent partial sums per lane, so the reductions below vectorize (a single running sum
/// is a chain of dependent additions). The summation order is fixed, so results do not depend
/// on the machine or thread count.
const LANES: usize = 8;

/// Partial velocity refresh (the Langevin part of MCLMC): `u ← normalize(c₁u + c₂ z/√d)` with
/// `c₁ = e^{−ε/L}`, `c₂ = √(1 − c₁²)` and `z` the `d` standard normals in `noise`. `L = ∞`
/// keeps the velocity (pure microcanonical dynamics).
pub fn refresh_velocity(velocity: &mut [f64], noise: &[f64], step_size: f64, trajectory_length: f64) {
    let keep = (-step_size / trajectory_length).exp();
    let fresh = (1.0 - keep * keep).max(0.0).sqrt() / (velocity.len() as f64).sqrt();
    let mut norm_sq = 0.0;
    for (u, z) in velocity.iter_mut().zip(noise) {
        *u = keep * *u + fresh * z;
        norm_sq += *u * *u;
    }
    let norm = norm_sq.sqrt();
    velocity.iter_mut().for_each(|u| *u /= norm);
}

/// Scales `noise` (standard normals) to a unit vector: a uniform direction on the sphere.
pub fn normalize(vector: &mut [f64]) {
    let norm = vector.iter().map(|v| v * v).sum::<f64>().sqrt();
    if norm > 0.0 {
        vector.iter_mut().for_each(|v| *v /= norm);
    }
}

/// Where a path is within its current McLachlan step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
enum Stage {
    /// Between steps: the next move is the first `b₁ε` kick with the cached gradient.
    #[default]
    BetweenSteps,
    /// After the first half drift, waiting for the gradient there.
    FirstEvaluation,
    /// After the second half drift, waiting for the gradient there.
    SecondEvaluation,
}

/// One chain's isokinetic McLachlan path, resumable between its gradient evaluations so that
/// many chains can share one batched evaluation per stage (`integrate_paths`).
///
/// The dynamics run in the preconditioned coordinates `x = √Σ ⊙ y`: the drift is
/// `x += t √Σ ⊙ u` and the force on `u` is `√Σ ⊙ ∇ log p` (BlackJAX's `sqrt_diag_cov`).
#[derive(Clone, Debug, Default)]
pub struct IsokineticPath {
    pub position: Vec<f64>,
    pub velocity: Vec<f64>,
    /// `∇ log p(position)`, unscaled.
    pub gradient: Vec<f64>,
    pub log_density: f64,
    /// Kinetic energy change accumulated along the path.
    pub kinetic_change: f64,
    /// Whole steps still to take.
    pub steps_left: usize,
    /// Gradient evaluations made.
    pub evaluations: usize,
    /// An evaluation failed or was not finite: the path stopped there.
    pub failed: bool,
    stage: Stage,
}

impl IsokineticPath {
    /// Starts a path of `steps` steps from a point whose log density and gradient are known.
    pub fn start(&mut self, position: &[f64], velocity: &[f64], gradient: &[f64], log_density: f64, steps: usize) {
        self.position.clear();
        self.position.extend_from_slice(position);
        self.velocity.clear();
        self.velocity.extend_from_slice(velocity);
        self.gradient.clear();
        self.gradient.extend_from_slice(gradient);
        self.log_density = log_density;
        self.kinetic_change = 0.0;
        self.steps_left = steps;
        self.evaluations = 0;
        self.failed = false;
        self.stage = Stage::BetweenSteps;
    }

    fn kick(&mut self, time: f64, sqrt_cov: &[f64]) {
        self.kinetic_change += update_velocity_scaled(&mut self.velocity, &self.gradient, sqrt_cov, time);
    }

    fn half_drift(&mut self, step_size: f64, sqrt_cov: &[f64]) {
        for ((x, u), s) in self.position.iter_mut().zip(&self.velocity).zip(sqrt_cov) {
            *x += 0.5 * step_size * s * u;
        }
    }

    /// Moves as far as possible without a new gradient; `true` when `position` needs one.
    pub fn advance(&mut self, step_size: f64, sqrt_cov: &[f64]) -> bool {
        loop {
            if self.failed {
                return false;
            }
            match self.stage {
                Stage::BetweenSteps if self.steps_left == 0 => return false,
                Stage::BetweenSteps => {
                    self.kick(MCLACHLAN_B1 * step_size, sqrt_cov);
                    self.half_drift(step_size, sqrt_cov);
                    self.stage = Stage::FirstEvaluation;
                    return true;
                }
                Stage::FirstEvaluation => {
                    self.kick((1.0 - 2.0 * MCLACHLAN_B1) * step_size, sqrt_cov);
                    self.half_drift(step_size, sqrt_cov);
                    self.stage = Stage::SecondEvaluation;
                    return true;
                }
                Stage::SecondEvaluation => {
                    self.kick(MCLACHLAN_B1 * step_size, sqrt_cov);
                    self.steps_left -= 1;
                    self.stage = Stage::BetweenSteps;
                }
            }
        }
    }

    /// Takes the evaluation at `position`; a failure or a non-finite value ends the path.
    fn receive(&mut self, log_density: f64, gradient: &[f64]) {
        self.evaluations += 1;
        if !log_density.is_finite() || gradient.iter().any(|g| !g.is_finite()) {
            self.failed = true;
            return;
        }
        self.log_density = log_density;
        self.gradient.copy_from_slice(gradient);
    }

    /// The energy change of the path so far: kinetic change minus the gain in `log p`.
    pub fn energy_change(&self, initial_log_density: f64) -> f64 {
        self.kinetic_change - (self.log_density - initial_log_density)
    }
}

/// Batch buffers of `integrate_paths`, kept by the kernel between transitions.
#[derive(Clone, Debug, Default)]
pub struct PathBatch {
    waiting: Vec<usize>,
    positions: Vec<f64>,
    values: Vec<f64>,
    gradients: Vec<f64>,
}

/// Runs every path to its end. Each round, all paths that wait for a gradient are evaluated in
/// one `[C, D]` call, so chains with different path lengths share calls while they last. Path
/// `k` uses the step size and preconditioner `params(k)` (read per round, nothing collected).
/// A failed batch call fails every path in it.
pub fn integrate_paths<'a, L: LogDensity + ?Sized>(
    density: &L,
    paths: &mut [IsokineticPath],
    params: impl Fn(usize) -> (f64, &'a [f64]),
    batch: &mut PathBatch,
) {
    let dim = density.dim();
    loop {
        batch.waiting.clear();
        for (k, path) in paths.iter_mut().enumerate() {
            let (step_size, sqrt_cov) = params(k);
            if path.advance(step_size, sqrt_cov) {
                batch.waiting.push(k);
            }
        }
        if batch.waiting.is_empty() {
            return;
        }
        let count = batch.waiting.len();
        batch.positions.clear();
        for &k in &batch.waiting {
            batch.positions.extend_from_slice(&paths[k].position);
        }
        batch.values.resize(count, 0.0);
        batch.gradients.resize(count * dim, 0.0);
        let evaluated = density.log_density_and_gradient(&batch.positions, &mut batch.values, &mut batch.gradients).is_ok();
        for (row, &k) in batch.waiting.iter().enumerate() {
            if evaluated {
                paths[k].receive(batch.values[row], &batch.gradients[row * dim..(row + 1) * dim]);
            } else {
                paths[k].evaluations += 1;
                paths[k].failed = true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn velocity_stays_on_the_sphere_and_turns_toward_the_force() {
        let mut u = vec![0.6, 0.8, 0.0];
        let g = [0.0, 0.0, 5.0];
        let before = u[2];
        let kinetic = update_velocity(&mut u, &g, 0.3);
        let norm: f64 = u.iter().map(|v| v * v).sum();
        assert!((norm - 1.0).abs() < 1e-12);
        assert!(u[2] > before, "velocity turns toward ∇ log p: {u:?}");
        assert!(kinetic > 0.0, "moving uphill in log p gains kinetic energy: {kinetic}");
    }

    #[test]
    fn a_scaled_kick_is_the_kick_under_the_scaled_force_to_the_bit() {
        let dim = 37; // not a multiple of the lanes
        let gradient: Vec<f64> = (0..dim).map(|i| ((i * 7 % 11) as f64 - 5.0) * 0.3).collect();
        let scale: Vec<f64> = (0..dim).map(|i| 0.1 + (i % 5) as f64 * 0.4).collect();
        let start: Vec<f64> = (0..dim).map(|i| ((i * 3 % 7) as f64 - 3.0) / 10.0).collect();
        let (mut a, mut b) = (start.clone(), start.clone());
        normalize(&mut a);
        normalize(&mut b);
        let force: Vec<f64> = gradient.iter().zip(&scale).map(|(g, s)| g * s).collect();
        let kinetic_scaled = update_velocity_scaled(&mut a, &gradient, &scale, 0.7);
        let kinetic = update_velocity(&mut b, &force, 0.7);
        assert_eq!(kinetic_scaled.to_bits(), kinetic.to_bits());
        assert!(a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()));
    }

    #[test]
    fn velocity_updates_compose_like_the_flow() {
        // The closed form is the exact flow of a constant force: two half-time updates equal one
        // full-time update, and their kinetic changes add up.
        let g = [1.0, -2.0, 0.5, 3.0];
        let start = vec![0.5, 0.5, -0.5, 0.5];
        let mut once = start.clone();
        let k_once = update_velocity(&mut once, &g, 0.4);
        let mut twice = start;
        let k_twice = update_velocity(&mut twice, &g, 0.2) + update_velocity(&mut twice, &g, 0.2);
        for (a, b) in once.iter().zip(&twice) {
            assert!((a - b).abs() < 1e-12, "{once:?} vs {twice:?}");
        }
        assert!((k_once - k_twice).abs() < 1e-12, "{k_once} vs {k_twice}");
    }

    #[test]
    fn refresh_keeps_unit_speed_and_infinite_length_keeps_the_velocity() {
        let mut u = vec![1.0, 0.0, 0.0];
        refresh_velocity(&mut u, &[0.3, -1.0, 2.0], 0.1, f64::INFINITY);
        assert_eq!(u, vec![1.0, 0.0, 0.0]);
        refresh_velocity(&mut u, &[0.3, -1.0, 2.0], 0.5, 1.0);
        let norm: f64 = u.iter().map(|v| v * v).sum();
        assert!((norm - 1.0).abs() < 1e-12 && u[1] < 0.0 && u[2] > 0.0);
    }
}

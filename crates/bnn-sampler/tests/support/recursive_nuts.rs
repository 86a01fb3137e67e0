//! A slow, plainly written recursive multinomial NUTS: the oracle for the iterative kernel.
//!
//! This is the textbook `build_tree` (Hoffman & Gelman 2014, Alg. 6) with Betancourt's (2017)
//! multinomial sampling and generalized U-turn criterion, plus the two extra checks across the
//! seam of merged subtrees. The top level is written in time order (backward end, forward end),
//! independently of the build-order bookkeeping of the fast kernel. It shares only the
//! integrator step (any `Integrator`: the leapfrog by default, so each new leaf integrator gets a
//! draw-for-draw check), the momentum draw and the U-turn dot product with the crate, and it draws its random
//! numbers in the documented order: momentum, then per doubling a direction bit, the merge
//! uniforms of the subtree in post-order, and one uniform for the progressive sample.

use bnn_sampler::uturn::no_u_turn;
use bnn_sampler::{
    DiagonalMassMatrix, DrawStats, Integrator, KernelState, Leapfrog, LogDensity, Metric,
    PhasePoint,
};
use rand::Rng;

pub struct RecursiveNuts<I = Leapfrog> {
    pub max_tree_depth: u32,
    pub max_energy_error: f64,
    pub integrator: I,
}

impl RecursiveNuts {
    pub fn new(max_tree_depth: u32, max_energy_error: f64) -> Self {
        Self {
            max_tree_depth,
            max_energy_error,
            integrator: Leapfrog,
        }
    }
}

#[derive(Clone)]
struct Sample {
    position: Vec<f64>,
    gradient: Vec<f64>,
    log_density: f64,
    energy: f64,
}

/// A subtree in the order it was built: `begin` is the point next to the existing trajectory.
struct Tree {
    rho: Vec<f64>,
    momentum_begin: Vec<f64>,
    velocity_begin: Vec<f64>,
    momentum_end: Vec<f64>,
    velocity_end: Vec<f64>,
    log_weight: f64,
    sample: Sample,
}

struct Context<'a, I, L: ?Sized, R: ?Sized> {
    integrator: I,
    density: &'a L,
    metric: &'a dyn Metric,
    step_size: f64,
    initial_energy: f64,
    max_energy_error: f64,
    rng: &'a mut R,
    n_leapfrog: u32,
    sum_accept: f64,
    divergent: bool,
}

fn add(a: &[f64], b: &[f64]) -> Vec<f64> {
    a.iter().zip(b).map(|(x, y)| x + y).collect()
}

fn log_sum_exp(a: f64, b: f64) -> f64 {
    if a == f64::NEG_INFINITY {
        return b;
    }
    if b == f64::NEG_INFINITY {
        return a;
    }
    if a > b {
        a + (b - a).exp().ln_1p()
    } else {
        b + (a - b).exp().ln_1p()
    }
}

/// Builds a subtree of `2^depth` steps from `z` (advanced in place); `None` if it diverged or
/// turned on itself.
fn build_tree<I: Integrator, L: LogDensity + ?Sized, R: Rng + ?Sized>(
    ctx: &mut Context<'_, I, L, R>,
    z: &mut PhasePoint,
    depth: u32,
    direction: f64,
) -> Option<Tree> {
    if depth == 0 {
        z.step(
            &mut ctx.integrator,
            ctx.density,
            ctx.metric,
            direction * ctx.step_size,
        )
        .unwrap();
        ctx.n_leapfrog += 1;
        let energy = z.hamiltonian();
        let energy = if energy.is_finite() {
            energy
        } else {
            f64::INFINITY
        };
        let log_weight = ctx.initial_energy - energy;
        ctx.sum_accept += if log_weight > 0.0 {
            1.0
        } else {
            log_weight.exp()
        };
        if energy - ctx.initial_energy > ctx.max_energy_error {
            ctx.divergent = true;
            return None;
        }
        return Some(Tree {
            rho: z.momentum.clone(),
            momentum_begin: z.momentum.clone(),
            velocity_begin: z.velocity.clone(),
            momentum_end: z.momentum.clone(),
            velocity_end: z.velocity.clone(),
            log_weight,
            sample: Sample {
                position: z.position.clone(),
                gradient: z.gradient.clone(),
                log_density: z.log_density,
                energy,
            },
        });
    }
    let first = build_tree(ctx, z, depth - 1, direction)?;
    let second = build_tree(ctx, z, depth - 1, direction)?;
    let log_weight = log_sum_exp(first.log_weight, second.log_weight);
    let u: f64 = ctx.rng.random();
    let sample = if u < (second.log_weight - log_weight).exp() {
        second.sample
    } else {
        first.sample
    };
    let rho = add(&first.rho, &second.rho);
    let whole = no_u_turn(&first.velocity_begin, &second.velocity_end, &rho);
    let seam_a = no_u_turn(
        &first.velocity_begin,
        &second.velocity_begin,
        &add(&first.rho, &second.momentum_begin),
    );
    let seam_b = no_u_turn(
        &first.velocity_end,
        &second.velocity_end,
        &add(&first.momentum_end, &second.rho),
    );
    if !(whole && seam_a && seam_b) {
        return None;
    }
    Some(Tree {
        rho,
        momentum_begin: first.momentum_begin,
        velocity_begin: first.velocity_begin,
        momentum_end: second.momentum_end,
        velocity_end: second.velocity_end,
        log_weight,
        sample,
    })
}

impl<I: Integrator> RecursiveNuts<I> {
    pub fn step<L: LogDensity + ?Sized, R: Rng + Send + ?Sized>(
        &self,
        density: &L,
        rng: &mut R,
        state: &KernelState,
        step_size: f64,
        metric: &DiagonalMassMatrix,
    ) -> (KernelState, DrawStats) {
        let dim = state.position.len();
        let mut start = PhasePoint::new(dim);
        start.position = state.position.clone();
        start.gradient = state.gradient.clone();
        start.log_density = state.log_density;
        let mut dyn_rng = &mut *rng;
        Metric::sample_momentum(metric, &mut start, &mut dyn_rng);
        start.refresh_velocity(metric);
        let initial_energy = start.hamiltonian();

        let mut backward = start.clone();
        let mut forward = start.clone();
        let mut rho = start.momentum.clone();
        let mut log_weight = 0.0;
        let mut sample = Sample {
            position: start.position.clone(),
            gradient: start.gradient.clone(),
            log_density: start.log_density,
            energy: initial_energy,
        };
        let mut ctx = Context {
            integrator: self.integrator.clone(),
            density,
            metric,
            step_size,
            initial_energy,
            max_energy_error: self.max_energy_error,
            rng,
            n_leapfrog: 0,
            sum_accept: 0.0,
            divergent: false,
        };
        let mut depth = 0;
        while depth < self.max_tree_depth {
            let go_forward: bool = ctx.rng.random();
            // Time-ordered ends of the old trajectory, before the extension moves one of them.
            let (old_back_p, old_back_v) = (backward.momentum.clone(), backward.velocity.clone());
            let (old_fwd_p, old_fwd_v) = (forward.momentum.clone(), forward.velocity.clone());
            let tree = if go_forward {
                build_tree(&mut ctx, &mut forward, depth, 1.0)
            } else {
                build_tree(&mut ctx, &mut backward, depth, -1.0)
            };
            let Some(tree) = tree else { break };
            depth += 1;
            let u: f64 = ctx.rng.random();
            if u < (tree.log_weight - log_weight).exp() {
                sample = tree.sample.clone();
            }
            log_weight = log_sum_exp(log_weight, tree.log_weight);
            // Left (earlier in time) and right spans: rho, and momentum/velocity at both ends.
            let (
                left_rho,
                left_back_v,
                left_fwd_p,
                left_fwd_v,
                right_rho,
                right_back_p,
                right_back_v,
                right_fwd_v,
            ) = if go_forward {
                (
                    rho.clone(),
                    old_back_v,
                    old_fwd_p,
                    old_fwd_v,
                    tree.rho.clone(),
                    tree.momentum_begin.clone(),
                    tree.velocity_begin.clone(),
                    tree.velocity_end.clone(),
                )
            } else {
                // A backward subtree, reversed in time: its end is the earliest point.
                (
                    tree.rho.clone(),
                    tree.velocity_end.clone(),
                    tree.momentum_begin.clone(),
                    tree.velocity_begin.clone(),
                    rho.clone(),
                    old_back_p,
                    old_back_v,
                    old_fwd_v,
                )
            };
            rho = add(&left_rho, &right_rho);
            let whole = no_u_turn(&left_back_v, &right_fwd_v, &rho);
            let seam_a = no_u_turn(&left_back_v, &right_back_v, &add(&left_rho, &right_back_p));
            let seam_b = no_u_turn(&left_fwd_v, &right_fwd_v, &add(&left_fwd_p, &right_rho));
            if !(whole && seam_a && seam_b) {
                break;
            }
        }
        let stats = DrawStats {
            log_density: sample.log_density,
            accept_stat: ctx.sum_accept / f64::from(ctx.n_leapfrog.max(1)),
            step_size,
            tree_depth: depth,
            n_leapfrog: ctx.n_leapfrog,
            divergent: ctx.divergent,
            energy: sample.energy,
            energy_error: sample.energy - initial_energy,
            ..DrawStats::default()
        };
        let next = KernelState {
            position: sample.position,
            log_density: sample.log_density,
            gradient: sample.gradient,
            ..KernelState::default()
        };
        (next, stats)
    }
}

//! The NUTS trajectory built iteratively: doubling, multinomial proposals and U-turn checkpoints.

use std::mem::swap;

use rand::Rng;

pub mod uturn;

use crate::phase_point::PhasePoint;
use uturn::{merge_and_check, SpanEnds};

/// `log(exp(a) + exp(b))` without overflow.
#[inline]
pub(crate) fn log_sum_exp(a: f64, b: f64) -> f64 {
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

/// The point a (sub)trajectory currently proposes.
#[derive(Clone, Debug)]
pub(crate) struct Proposal {
    pub position: Vec<f64>,
    pub gradient: Vec<f64>,
    pub log_density: f64,
    /// Hamiltonian at the point (with its momentum on the trajectory).
    pub energy: f64,
}

impl Proposal {
    fn new(dim: usize) -> Self {
        Self {
            position: vec![0.0; dim],
            gradient: vec![0.0; dim],
            log_density: 0.0,
            energy: 0.0,
        }
    }

    fn set(&mut self, point: &PhasePoint, energy: f64) {
        self.position.copy_from_slice(&point.position);
        self.gradient.copy_from_slice(&point.gradient);
        self.log_density = point.log_density;
        self.energy = energy;
    }
}

/// A finished subtree, described in build order (`first` is the point adjacent to the tree it
/// extends, `last` the farthest).
#[derive(Clone, Debug)]
struct Subtree {
    /// Sum of the momenta of its points.
    rho: Vec<f64>,
    momentum_first: Vec<f64>,
    velocity_first: Vec<f64>,
    momentum_last: Vec<f64>,
    velocity_last: Vec<f64>,
    /// `log Σ exp(H0 - H)` over its points: its multinomial weight.
    log_weight: f64,
    proposal: Proposal,
}

impl Subtree {
    fn new(dim: usize) -> Self {
        Self {
            rho: vec![0.0; dim],
            momentum_first: vec![0.0; dim],
            velocity_first: vec![0.0; dim],
            momentum_last: vec![0.0; dim],
            velocity_last: vec![0.0; dim],
            log_weight: 0.0,
            proposal: Proposal::new(dim),
        }
    }

    fn set_leaf(&mut self, point: &PhasePoint, energy: f64, log_weight: f64) {
        self.rho.copy_from_slice(&point.momentum);
        self.momentum_first.copy_from_slice(&point.momentum);
        self.momentum_last.copy_from_slice(&point.momentum);
        self.velocity_first.copy_from_slice(&point.velocity);
        self.velocity_last.copy_from_slice(&point.velocity);
        self.log_weight = log_weight;
        self.proposal.set(point, energy);
    }

    /// Merges `right` (built right after `self`) into `self`: the merged proposal is `right`'s
    /// with probability `w_right / (w_left + w_right)` (uniform progressive sampling, which makes
    /// the subtree's proposal a multinomial draw over its points; Betancourt 2017, App. A.3.2).
    /// Returns `false` when the merged subtree makes a U-turn.
    fn absorb<R: Rng + ?Sized>(&mut self, right: &mut Subtree, rng: &mut R) -> bool {
        let log_weight = log_sum_exp(self.log_weight, right.log_weight);
        let u: f64 = rng.random();
        if u < (right.log_weight - log_weight).exp() {
            swap(&mut self.proposal, &mut right.proposal);
        }
        self.log_weight = log_weight;
        let left_ends = SpanEnds {
            momentum_first: &self.momentum_first,
            velocity_first: &self.velocity_first,
            momentum_last: &self.momentum_last,
            velocity_last: &self.velocity_last,
        };
        let right_ends = SpanEnds {
            momentum_first: &right.momentum_first,
            velocity_first: &right.velocity_first,
            momentum_last: &right.momentum_last,
            velocity_last: &right.velocity_last,
        };
        let ok = merge_and_check(&mut self.rho, &left_ends, &right.rho, &right_ends);
        swap(&mut self.momentum_last, &mut right.momentum_last);
        swap(&mut self.velocity_last, &mut right.velocity_last);
        ok
    }
}

/// How an attempt to double the trajectory ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Extension {
    /// The new subtree diverged or turned on itself; it is discarded (Stan does the same).
    Invalid,
    /// The subtree was added and the extended trajectory made a U-turn: stop.
    Turned,
    /// The subtree was added and the trajectory may grow further.
    Continue,
}

/// The NUTS trajectory workspace of one chain. Created once; every transition reuses its buffers.
///
/// The textbook `build_tree` recursion (Hoffman & Gelman 2014, Alg. 3/6) visits leaves left to
/// right and merges sibling subtrees in post-order. Here the same post-order is produced leaf by
/// leaf: after leaf `k` of a new subtree, the number of merges equals the number of trailing one
/// bits of `k` (a binary counter), and each level of the counter keeps one pending left sibling.
/// So the random numbers are drawn in the same order as the recursion and the two agree draw for
/// draw, while every buffer is allocated once per chain and merges swap buffers instead of
/// copying them.
///
/// A doubling is resumable between leaves (`begin_doubling`, then per leaf one leapfrog step of
/// `frontier` and `finish_leaf`), so the single-chain kernel and the batched one, which
/// evaluates the frontiers of many chains in one call, share this code and make the same moves.
#[derive(Clone, Debug)]
pub(crate) struct Trajectory {
    /// The two end points, `[backward, forward]` in time; the next subtree is integrated from one.
    ends: [PhasePoint; 2],
    rho: Vec<f64>,
    log_weight: f64,
    proposal: Proposal,
    /// The end point a doubling starts from, saved because its integration overwrites it.
    seam_momentum: Vec<f64>,
    seam_velocity: Vec<f64>,
    /// Pending left siblings, one per level of the leaf counter (grown on demand, never shrunk).
    pending: Vec<Subtree>,
    current: Subtree,
    initial_energy: f64,
    /// The doubling in progress: the end it grows (index into `ends`), its signed step size, the
    /// next leaf and the number of leaves.
    end: usize,
    signed_step: f64,
    leaf: usize,
    leaves: usize,
    /// Statistics of the current transition.
    pub n_leapfrog: u32,
    pub sum_accept: f64,
    pub divergent: bool,
}

impl Trajectory {
    pub fn new(dim: usize) -> Self {
        Self {
            ends: [PhasePoint::new(dim), PhasePoint::new(dim)],
            rho: vec![0.0; dim],
            log_weight: 0.0,
            proposal: Proposal::new(dim),
            seam_momentum: vec![0.0; dim],
            seam_velocity: vec![0.0; dim],
            pending: Vec::new(),
            current: Subtree::new(dim),
            initial_energy: 0.0,
            end: 1,
            signed_step: 0.0,
            leaf: 0,
            leaves: 0,
            n_leapfrog: 0,
            sum_accept: 0.0,
            divergent: false,
        }
    }

    pub fn dim(&self) -> usize {
        self.rho.len()
    }

    /// Starts a trajectory at `start` (momentum already set, velocity and kinetic energy fresh).
    pub fn reset(&mut self, start: &PhasePoint) {
        self.ends[0].copy_from(start);
        self.ends[1].copy_from(start);
        self.rho.copy_from_slice(&start.momentum);
        self.initial_energy = start.hamiltonian();
        // Weights are relative to the start: w = exp(H0 - H), so the start has log weight 0.
        self.log_weight = 0.0;
        self.proposal.set(start, self.initial_energy);
        self.n_leapfrog = 0;
        self.sum_accept = 0.0;
        self.divergent = false;
    }

    pub fn initial_energy(&self) -> f64 {
        self.initial_energy
    }

    /// The selected point: position, gradient, log density, energy.
    pub fn proposal(&self) -> &Proposal {
        &self.proposal
    }

    /// Starts doubling the trajectory: a new subtree of `2^depth` leapfrog steps in direction
    /// `forward`, integrated leaf by leaf from the end on that side.
    pub fn begin_doubling(&mut self, forward: bool, depth: u32, step_size: f64) {
        let dim = self.dim();
        while self.pending.len() < depth as usize {
            self.pending.push(Subtree::new(dim));
        }
        self.end = usize::from(forward);
        self.signed_step = if forward { step_size } else { -step_size };
        self.leaf = 0;
        self.leaves = 1usize << depth;
        self.seam_momentum
            .copy_from_slice(&self.ends[self.end].momentum);
        self.seam_velocity
            .copy_from_slice(&self.ends[self.end].velocity);
    }

    /// The point the next leaf is integrated from, and the signed step size to integrate it
    /// with. The caller takes one leapfrog step of it and then calls `finish_leaf`.
    pub fn frontier(&mut self) -> (&mut PhasePoint, f64) {
        (&mut self.ends[self.end], self.signed_step)
    }

    /// Adds the leaf the frontier has just reached: checks it for divergence and does the merges
    /// it completes. Returns `None` while the doubling needs more leaves, and how it ended once
    /// the subtree is finished or abandoned (divergence or an internal U-turn).
    pub fn finish_leaf<R: Rng + ?Sized>(
        &mut self,
        max_energy_error: f64,
        rng: &mut R,
    ) -> Option<Extension> {
        let h0 = self.initial_energy;
        let point = &self.ends[self.end];
        self.n_leapfrog += 1;
        let energy = point.hamiltonian();
        let energy = if energy.is_finite() {
            energy
        } else {
            f64::INFINITY
        };
        let log_weight = h0 - energy;
        self.sum_accept += if log_weight > 0.0 {
            1.0
        } else {
            log_weight.exp()
        };
        // Divergence: the energy error exceeds the threshold (Stan: 1000) or is not finite.
        if energy - h0 > max_energy_error {
            self.divergent = true;
            return Some(Extension::Invalid);
        }
        self.current.set_leaf(point, energy, log_weight);
        let k = self.leaf;
        let mut level = 0;
        while (k >> level) & 1 == 1 {
            let left = &mut self.pending[level];
            if !left.absorb(&mut self.current, rng) {
                return Some(Extension::Invalid);
            }
            swap(left, &mut self.current);
            level += 1;
        }
        self.leaf += 1;
        if self.leaf < self.leaves {
            swap(&mut self.pending[level], &mut self.current);
            return None;
        }
        Some(self.merge_subtree(rng))
    }

    /// Merges the finished subtree in `current` into the trajectory with biased progressive
    /// sampling (Betancourt 2017, App. A.3.2: the new subtree's proposal replaces the current one
    /// with probability `min(1, w_new / w_old)`, which favours points far from the start) and
    /// checks the extended trajectory for a U-turn.
    fn merge_subtree<R: Rng + ?Sized>(&mut self, rng: &mut R) -> Extension {
        let new = &mut self.current;
        let u: f64 = rng.random();
        if u < (new.log_weight - self.log_weight).exp() {
            swap(&mut self.proposal, &mut new.proposal);
        }
        self.log_weight = log_sum_exp(self.log_weight, new.log_weight);
        // The old trajectory is the left span (first = its far end, last = the seam end).
        let far_end = &self.ends[1 - self.end];
        let left_ends = SpanEnds {
            momentum_first: &far_end.momentum,
            velocity_first: &far_end.velocity,
            momentum_last: &self.seam_momentum,
            velocity_last: &self.seam_velocity,
        };
        let right_ends = SpanEnds {
            momentum_first: &new.momentum_first,
            velocity_first: &new.velocity_first,
            momentum_last: &new.momentum_last,
            velocity_last: &new.velocity_last,
        };
        if merge_and_check(&mut self.rho, &left_ends, &new.rho, &right_ends) {
            Extension::Continue
        } else {
            Extension::Turned
        }
    }
}

//! The ensemble warmup of LAPS (late-adjusted parallel sampling; Robnik & Seljak 2026, BlackJAX
//! `adaptation/laps.py`): all chains share one step size, one decoherence length and one
//! preconditioner, tuned from the statistics of the whole ensemble after every step.
//!
//! Two phases, then sampling:
//! 1. **Burn-in**: unadjusted MCLMC (one McLachlan step a transition). After each step the
//!    ensemble sets `ε` from the variance over chains of the energy change per dimension
//!    (averaged over about 10 steps), aimed at `min(C · b^{3/8}, ξ_max)`: `ξ_max` = 5e-4 is
//!    BlackJAX's MCLMC target (an unadjusted burn-in is biased), and `b` is the equipartition
//!    loss `mean_i (1 − E_c[−(x_i − m_i) ∂_i log p])²` (zero at stationarity, by integration by
//!    parts; `m` is each chain's own recent mean, which BlackJAX's LAPS takes as 0). The step
//!    changes by a factor in `[0.3, 3]` a step, and is halved
//!    after a failed step (non-finite, or an energy error above a limit: the chain stays put).
//!    `L = α √d · √mean_i(var_i / M_i)` from the chains' own spread (BlackJAX: the spread
//!    between chains, which for chains in different modes of a BNN is the distance between the
//!    modes, and a long `L` keeps a chain heated by its first steps hot).
//!    The preconditioner is `M⁻¹_i = √(var(x_i) / var(∂_i log p))` (nutpie's estimate; for a
//!    Gaussian it is the variance itself wherever the chains are, also while they travel, where
//!    the variance of `x` alone would freeze a coordinate that has not started moving), from
//!    within-chain variances pooled over the chains (exponentially weighted over `W` steps, so a
//!    chain in its own mode of a multimodal posterior contributes its local scale, not the
//!    distance between modes), refreshed at `W/4, W/2, W, 2W, …` and at the end of the burn-in.
//!    The burn-in ends when the ensemble has stopped moving, checked at the end of each block of
//!    `W/2` steps from step `W` on:
//!    - the ensemble mean of `x_i²`, averaged over the block, changed from the previous block by
//!      a relative amount `δ_i` with `mean_i δ_i² < 3 r_end + 1/C` (BlackJAX's window
//!      fluctuation `r < r_end` allows a linear drift of `√(12 r_end)` over the window, which
//!      is this `δ`; `1/C` allows for the Monte Carlo noise of `C` chains), and
//!    - the chains are not climbing: their mean rise in block-averaged `log p` is within two
//!      standard errors of zero (a few chains still climbing hardly move the mean of `x²`);
//!
//!    or at the cap.
//! 2. **Adjusted tuning**: MAMS with the burn-in's preconditioner, every chain taking the same
//!    number of steps (`n` drawn once per iteration from the ensemble's own stream, uniform on
//!    `1..2n̄`), `ε` by dual averaging of the ensemble's mean acceptance.
//!
//! Then sampling: MAMS at the averaged `ε`, fixed, so every chain is exact.
//!
//! Every chain carries an identical copy of the shared state (so a checkpoint of any chain
//! resumes the ensemble) plus its own exponentially weighted mean and variance.

use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::ops::Range;

use crate::adaptation::dual_averaging::DualAveraging;
use crate::adaptation::TunedParams;
use crate::draw_stats::DrawStats;
use crate::dynamics::PARALLEL_VALUES;
use crate::metric::DiagonalMassMatrix;

/// The ensemble's settings, fixed for the run (from `LapsConfig`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EnsembleSettings {
    /// `α` of `L = α √d σ̄` in the burn-in (BlackJAX: 1.9).
    pub length_factor: f64,
    /// `C` of the burn-in's energy-variance target `C · b^{3/8}` (BlackJAX: 0.1).
    pub energy_variance_scale: f64,
    /// The most that target may be.
    pub max_energy_variance: f64,
    /// `r_end`: the burn-in ends when the ensemble's block-to-block change is below
    /// `3 r_end + 1/C`.
    pub stop_fluctuation: f64,
    /// `W`: the steps the fluctuation and the within-chain variances remember.
    pub window: usize,
    /// Burn-in steps at most.
    pub burn_in_cap: usize,
    /// Iterations of the adjusted phase that tune `ε`.
    pub adjusted_tuning: usize,
    /// Mean integration steps per adjusted iteration (`n̄`).
    pub steps_per_draw: usize,
    /// Acceptance the adjusted phase's dual averaging aims for.
    pub target_accept: f64,
}

/// Where the ensemble is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EnsemblePhase {
    /// Not yet started: starts to separate, velocities to point.
    Start,
    BurnIn,
    Adjusted,
    Sampling,
}

/// Why the burn-in ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BurnInEnd {
    /// The ensemble's fluctuation fell below its threshold.
    Converged,
    /// The cap was reached first.
    Cap,
}

/// The state every chain of the ensemble shares (one identical copy per chain).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EnsembleTuner {
    pub settings: EnsembleSettings,
    pub phase: EnsemblePhase,
    pub burn_in_steps: usize,
    pub adjusted_steps: usize,
    pub burn_in_end: Option<BurnInEnd>,
    /// The shared step size and decoherence length of the next transition.
    pub step_size: f64,
    pub trajectory_length: f64,
    /// The shared preconditioner (diagonal of `M⁻¹`).
    pub inverse_metric: Vec<f64>,
    /// Burn-in step at which the preconditioner is next refreshed.
    next_metric_refresh: usize,
    /// Sum over the current block of the ensemble mean of `x_i²`, the steps in it, and the
    /// previous block's mean (empty before the first block ends).
    block_sum: Vec<f64>,
    block_steps: usize,
    previous_block: Vec<f64>,
    /// The last burn-in step's diagnostics.
    pub fluctuation: f64,
    /// `t` statistic of the chains' mean rise in `log p` between the last two blocks.
    pub log_density_rise: f64,
    pub equipartition_loss: f64,
    pub energy_variance: f64,
    /// Running average of the energy variance per dimension over `ε⁶`.
    energy_ratio_average: Option<f64>,
    dual_averaging: Option<DualAveraging>,
    /// The run's seed and how many shared numbers of steps have been drawn: the next is a hash
    /// of both (a checkpoint holds two integers, not a generator).
    steps_seed: u64,
    steps_drawn: u64,
    /// Integration steps of the next adjusted transition (every chain the same).
    pub steps: usize,
}

/// Which of the shared state's `D`-vectors a tuning step changed. A copy to every chain takes
/// the scalars and these only: the burn-in changes its block sum every step but the
/// preconditioner and the previous block rarely, and the adjusted phase and sampling none (at
/// 1024 chains each vector copied is a pass over 1024 × D values a step).
#[derive(Clone, Copy, Debug)]
struct SharedVectors {
    inverse_metric: bool,
    block_sum: bool,
    previous_block: bool,
}

impl SharedVectors {
    const ALL: Self = Self {
        inverse_metric: true,
        block_sum: true,
        previous_block: true,
    };
    const NONE: Self = Self {
        inverse_metric: false,
        block_sum: false,
        previous_block: false,
    };
}

impl EnsembleTuner {
    /// Makes `self` equal to `shared`, copying of the vectors only those `changed` says differ.
    /// Every field is named, so a field added to the state cannot be left out of the copy.
    fn copy_from(&mut self, shared: &Self, changed: SharedVectors) {
        let Self {
            settings,
            phase,
            burn_in_steps,
            adjusted_steps,
            burn_in_end,
            step_size,
            trajectory_length,
            inverse_metric,
            next_metric_refresh,
            block_sum,
            block_steps,
            previous_block,
            fluctuation,
            log_density_rise,
            equipartition_loss,
            energy_variance,
            energy_ratio_average,
            dual_averaging,
            steps_seed,
            steps_drawn,
            steps,
        } = shared;
        self.settings.clone_from(settings);
        self.phase = *phase;
        self.burn_in_steps = *burn_in_steps;
        self.adjusted_steps = *adjusted_steps;
        self.burn_in_end = *burn_in_end;
        self.step_size = *step_size;
        self.trajectory_length = *trajectory_length;
        if changed.inverse_metric {
            self.inverse_metric.clone_from(inverse_metric);
        }
        self.next_metric_refresh = *next_metric_refresh;
        if changed.block_sum {
            self.block_sum.clone_from(block_sum);
        }
        self.block_steps = *block_steps;
        if changed.previous_block {
            self.previous_block.clone_from(previous_block);
        }
        self.fluctuation = *fluctuation;
        self.log_density_rise = *log_density_rise;
        self.equipartition_loss = *equipartition_loss;
        self.energy_variance = *energy_variance;
        self.energy_ratio_average = *energy_ratio_average;
        self.dual_averaging.clone_from(dual_averaging);
        self.steps_seed = *steps_seed;
        self.steps_drawn = *steps_drawn;
        self.steps = *steps;
    }
}

/// One chain's warmup under the ensemble tuner: the shared state and the chain's own moments.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EnsembleMember {
    pub ensemble: EnsembleTuner,
    /// Exponentially weighted mean and variance of this chain's position and gradient.
    own_mean: Vec<f64>,
    own_variance: Vec<f64>,
    own_gradient_mean: Vec<f64>,
    own_gradient_variance: Vec<f64>,
    /// This chain's `log p` summed over the current block, and the previous block's mean.
    block_log_density: f64,
    previous_block_log_density: Option<f64>,
}

/// What the ensemble update reads of one chain after a transition.
pub struct MemberView<'a> {
    pub position: &'a [f64],
    pub gradient: &'a [f64],
    pub stats: &'a DrawStats,
}

impl EnsembleMember {
    pub fn new(settings: EnsembleSettings, dim: usize, step_size: f64) -> Self {
        let trajectory_length = (dim as f64).sqrt();
        Self {
            ensemble: EnsembleTuner {
                next_metric_refresh: (settings.window / 4).max(1),
                settings,
                phase: EnsemblePhase::Start,
                burn_in_steps: 0,
                adjusted_steps: 0,
                burn_in_end: None,
                step_size,
                trajectory_length,
                inverse_metric: vec![1.0; dim],
                block_sum: Vec::new(),
                block_steps: 0,
                previous_block: Vec::new(),
                fluctuation: f64::MAX,
                log_density_rise: f64::MAX,
                equipartition_loss: 0.0,
                energy_variance: 0.0,
                energy_ratio_average: None,
                dual_averaging: None,
                steps_seed: 0,
                steps_drawn: 0,
                steps: 1,
            },
            own_mean: Vec::new(),
            own_variance: Vec::new(),
            own_gradient_mean: Vec::new(),
            own_gradient_variance: Vec::new(),
            block_log_density: 0.0,
            previous_block_log_density: None,
        }
    }

    /// Warmup transitions: the burn-in (its cap while it runs) and the adjusted tuning.
    pub fn num_warmup(&self) -> usize {
        let e = &self.ensemble;
        let burn_in = match e.phase {
            EnsemblePhase::Start | EnsemblePhase::BurnIn => e.settings.burn_in_cap,
            EnsemblePhase::Adjusted | EnsemblePhase::Sampling => e.burn_in_steps,
        };
        burn_in + e.settings.adjusted_tuning
    }

    pub fn iteration(&self) -> usize {
        self.ensemble.burn_in_steps + self.ensemble.adjusted_steps
    }
}

/// `chains` chains' warmups before the ensemble starts, and their parameters: identical, at
/// step size `step_size` and the identity metric (for driving [`Ensemble`] without a sampler).
pub(crate) fn fresh_ensemble(
    settings: &EnsembleSettings,
    chains: usize,
    dim: usize,
    step_size: f64,
) -> (Vec<EnsembleMember>, Vec<TunedParams>) {
    let members = (0..chains)
        .map(|_| EnsembleMember::new(settings.clone(), dim, step_size))
        .collect();
    let params = (0..chains)
        .map(|_| TunedParams::new(step_size, DiagonalMassMatrix::identity(dim)))
        .collect();
    (members, params)
}

/// The tuned parameters every chain moves with in the ensemble's current phase.
fn shared_params(ensemble: &EnsembleTuner) -> TunedParams {
    let metric = DiagonalMassMatrix::new(ensemble.inverse_metric.clone())
        .unwrap_or_else(|_| DiagonalMassMatrix::identity(ensemble.inverse_metric.len()));
    let mut params = TunedParams::new(ensemble.step_size, metric);
    params.trajectory_length = Some(shared_trajectory_length(ensemble));
    params
}

/// The trajectory length of [`shared_params`].
fn shared_trajectory_length(ensemble: &EnsembleTuner) -> f64 {
    match ensemble.phase {
        // The adjusted kernel reads its shared number of steps as `L / ε`.
        EnsemblePhase::Adjusted | EnsemblePhase::Sampling => {
            ensemble.steps as f64 * ensemble.step_size
        }
        EnsemblePhase::Start | EnsemblePhase::BurnIn => ensemble.trajectory_length,
    }
}

/// Mean over chains of `f(chain)` per coordinate, summed in chain order.
fn ensemble_mean(
    dim: usize,
    chains: usize,
    f: impl Fn(usize, Range<usize>, &mut [f64]) + Sync,
) -> Vec<f64> {
    mean_over_chains(chains * dim >= PARALLEL_VALUES, dim, chains, f)
}

/// [`ensemble_mean`], its coordinates in chunks on rayon's threads when `parallel`.
fn mean_over_chains(
    parallel: bool,
    dim: usize,
    chains: usize,
    f: impl Fn(usize, Range<usize>, &mut [f64]) + Sync,
) -> Vec<f64> {
    let mut sum = vec![0.0; dim];
    // Coordinates `range` of every chain's row (`f(c, range, row)` fills them), summed in chain
    // order: the same additions however the coordinates are split.
    let sum_range = |start: usize, sum: &mut [f64]| {
        let range = start..start + sum.len();
        let mut row = vec![0.0; sum.len()];
        for c in 0..chains {
            f(c, range.clone(), &mut row);
            sum.iter_mut().zip(&row).for_each(|(s, r)| *s += r);
        }
        sum.iter_mut().for_each(|s| *s /= chains as f64);
    };
    if parallel {
        sum.par_chunks_mut(MEAN_CHUNK)
            .enumerate()
            .for_each(|(i, chunk)| sum_range(i * MEAN_CHUNK, chunk));
    } else {
        sum_range(0, &mut sum);
    }
    sum
}

// From `PARALLEL_VALUES` chains × coordinates, the tuner's passes over the ensemble (its means,
// each chain's moments, the copies of the shared state) run on rayon's threads, like the
// lockstep's: at 1024 chains they cost as much as a GPU's gradient on one thread.
/// Coordinates per task of a parallel [`ensemble_mean`].
const MEAN_CHUNK: usize = 64;

/// Mean over coordinates of `(1 − E_c[−x_i g_i])²`.
fn equipartition_loss(views: &[MemberView<'_>], centers: &[&[f64]]) -> f64 {
    let dim = views[0].position.len();
    let e = ensemble_mean(dim, views.len(), |c, range, row| {
        for (((r, x), g), m) in row
            .iter_mut()
            .zip(&views[c].position[range.clone()])
            .zip(&views[c].gradient[range.clone()])
            .zip(&centers[c][range])
        {
            *r = -(x - m) * g;
        }
    });
    e.iter().map(|e| (1.0 - e) * (1.0 - e)).sum::<f64>() / dim as f64
}

/// Between-chain variance per coordinate.
fn between_chain_variance(positions: &[&[f64]]) -> Vec<f64> {
    let dim = positions[0].len();
    let mean = ensemble_mean(dim, positions.len(), |c, range, row| {
        row.copy_from_slice(&positions[c][range])
    });
    ensemble_mean(dim, positions.len(), |c, range, row| {
        for ((r, x), m) in row
            .iter_mut()
            .zip(&positions[c][range.clone()])
            .zip(&mean[range])
        {
            *r = (x - m) * (x - m);
        }
    })
}

/// The burn-in's first velocities (BlackJAX's LAPS): along each chain's gradient, coordinate
/// `i` flipped where the ensemble's equipartition `E_c[−x_i ∂_i log p]` is below 1 (the chains
/// are too concentrated there, so they move apart), in the preconditioned coordinates, unit norm.
pub fn initial_velocities(positions: &[&[f64]], gradients: &[&[f64]]) -> Vec<Vec<f64>> {
    let dim = positions[0].len();
    let equipartition = ensemble_mean(dim, positions.len(), |c, range, row| {
        for ((r, x), g) in row
            .iter_mut()
            .zip(&positions[c][range.clone()])
            .zip(&gradients[c][range])
        {
            *r = -x * g;
        }
    });
    gradients
        .iter()
        .map(|g| {
            let mut u: Vec<f64> = g
                .iter()
                .zip(&equipartition)
                .map(|(g, e)| if *e < 1.0 { -g } else { *g })
                .collect();
            let norm = u.iter().map(|v| v * v).sum::<f64>().sqrt();
            if norm > 0.0 && norm.is_finite() {
                u.iter_mut().for_each(|v| *v /= norm);
            } else {
                u = vec![0.0; dim];
                u[0] = 1.0;
            }
            u
        })
        .collect()
}

/// Operations on the whole ensemble: `members[c]` is chain `c`'s warmup, `params[c]` its tuned
/// parameters. All of them hold the same shared state before and after each call.
pub struct Ensemble<'a> {
    pub members: Vec<&'a mut EnsembleMember>,
    pub params: Vec<&'a mut TunedParams>,
}

impl Ensemble<'_> {
    fn shared(&self) -> &EnsembleTuner {
        &self.members[0].ensemble
    }

    /// Copies chain 0's shared state and its parameters to every chain, of the vectors only
    /// those `changed` (the others are equal already).
    fn broadcast(&mut self, changed: SharedVectors) {
        let (first, rest) = self
            .members
            .split_first_mut()
            .expect("an ensemble has chains");
        let shared = &first.ensemble;
        let vectors = [
            changed.inverse_metric,
            changed.block_sum,
            changed.previous_block,
        ];
        let copy = |member: &mut &mut EnsembleMember| member.ensemble.copy_from(shared, changed);
        if vectors.contains(&true) && rest.len() * shared.inverse_metric.len() >= PARALLEL_VALUES {
            rest.par_iter_mut().for_each(copy);
        } else {
            rest.iter_mut().for_each(copy);
        }
        if changed.inverse_metric {
            let params = shared_params(shared);
            if self.params.len() * shared.inverse_metric.len() >= PARALLEL_VALUES {
                self.params
                    .par_iter_mut()
                    .for_each(|p| p.clone_from(&params));
            } else {
                self.params.iter_mut().for_each(|p| p.clone_from(&params));
            }
        } else {
            // The preconditioner is the one the last full copy gave every chain.
            let step_size = shared.step_size;
            let trajectory_length = Some(shared_trajectory_length(shared));
            for p in self.params.iter_mut() {
                p.step_size = step_size;
                p.trajectory_length = trajectory_length;
            }
        }
    }

    /// Starts the burn-in: `L` from the starts' spread, the ensemble's step stream, the chains'
    /// own moments at their starts.
    pub fn start(&mut self, seed: u64, positions: &[&[f64]], gradients: &[&[f64]]) {
        let dim = positions[0].len();
        for ((member, x), g) in self.members.iter_mut().zip(positions).zip(gradients) {
            member.own_mean = x.to_vec();
            member.own_variance = vec![0.0; dim];
            member.own_gradient_mean = g.to_vec();
            member.own_gradient_variance = vec![0.0; dim];
        }
        let spread = between_chain_variance(positions);
        let e = &mut self.members[0].ensemble;
        e.trajectory_length = burn_in_length(&e.settings, &spread, &e.inverse_metric, e.step_size);
        e.block_sum = vec![0.0; dim];
        e.steps_seed = seed;
        e.phase = EnsemblePhase::BurnIn;
        self.broadcast(SharedVectors::ALL);
    }

    /// Feeds one transition of every chain (in chain order) and sets the parameters of the next.
    pub fn observe(&mut self, views: &[MemberView<'_>]) {
        match self.shared().phase {
            EnsemblePhase::Start => unreachable!("the ensemble starts before its first step"),
            EnsemblePhase::BurnIn => self.observe_burn_in(views),
            EnsemblePhase::Adjusted => self.observe_adjusted(views),
            EnsemblePhase::Sampling => {
                Self::draw_steps(&mut self.members[0].ensemble);
                self.broadcast(SharedVectors::NONE);
            }
        }
    }

    fn observe_burn_in(&mut self, views: &[MemberView<'_>]) {
        let dim = views[0].position.len();
        let chains = views.len();
        let weight = 2.0 / (self.shared().settings.window as f64 + 1.0);
        // Centred on each chain's own recent mean (before this step): the estimate's noise is
        // then that of a chain's spread, not of its distance from the origin (BNN weights sit
        // far from 0 relative to their posterior width, so `E_c[−x_i ∂_i log p]` over a dozen
        // chains was noise in the thousands on yacht).
        let centers: Vec<&[f64]> = self.members.iter().map(|m| &m.own_mean[..]).collect();
        let equipartition = equipartition_loss(views, &centers);
        drop(centers);
        let update = |(member, view): (&mut &mut EnsembleMember, &MemberView<'_>)| {
            member.block_log_density += view.stats.log_density;
            weighted_update(
                &mut member.own_mean,
                &mut member.own_variance,
                view.position,
                weight,
            );
            weighted_update(
                &mut member.own_gradient_mean,
                &mut member.own_gradient_variance,
                view.gradient,
                weight,
            );
        };
        if chains * dim >= PARALLEL_VALUES {
            self.members.par_iter_mut().zip(views).for_each(update);
        } else {
            self.members.iter_mut().zip(views).for_each(update);
        }
        let pooled_variance = ensemble_mean(dim, chains, |c, range, row| {
            row.copy_from_slice(&self.members[c].own_variance[range])
        });
        let pooled_gradient_variance = ensemble_mean(dim, chains, |c, range, row| {
            row.copy_from_slice(&self.members[c].own_gradient_variance[range])
        });
        let scales: Vec<f64> = pooled_variance
            .iter()
            .zip(&pooled_gradient_variance)
            .map(|(vx, vg)| if *vg > 0.0 { (vx / vg).sqrt() } else { 0.0 })
            .collect();
        let squares = ensemble_mean(dim, chains, |c, range, row| {
            for (r, x) in row.iter_mut().zip(&views[c].position[range]) {
                *r = x * x;
            }
        });
        let failed = views.iter().any(|v| v.stats.divergent);
        let changes: Vec<f64> = views
            .iter()
            .filter(|v| !v.stats.divergent)
            .map(|v| v.stats.energy_error)
            .collect();
        let energy_variance = if changes.len() >= 2 {
            let n = changes.len() as f64;
            let mean = changes.iter().sum::<f64>() / n;
            changes.iter().map(|e| (e - mean) * (e - mean)).sum::<f64>() / n / dim as f64
        } else {
            0.0
        };

        let e = &mut self.members[0].ensemble;
        e.burn_in_steps += 1;
        let t = e.burn_in_steps;
        // The ensemble's change between consecutive blocks of W/2 steps.
        e.block_sum
            .iter_mut()
            .zip(&squares)
            .for_each(|(b, m)| *b += m);
        e.block_steps += 1;
        let mut changed = SharedVectors {
            block_sum: true,
            ..SharedVectors::NONE
        };
        let mut block_ended = false;
        if e.block_steps >= (e.settings.window / 2).max(1) {
            changed.previous_block = true;
            let n = e.block_steps as f64;
            let block: Vec<f64> = e.block_sum.iter().map(|b| b / n).collect();
            if !e.previous_block.is_empty() {
                e.fluctuation = block
                    .iter()
                    .zip(&e.previous_block)
                    .map(|(b, p)| {
                        let average = 0.5 * (b + p);
                        if average > 0.0 {
                            ((b - p) / average).powi(2)
                        } else {
                            0.0
                        }
                    })
                    .sum::<f64>()
                    / dim as f64;
                block_ended = true;
            }
            e.previous_block = block;
            e.block_sum.iter_mut().for_each(|b| *b = 0.0);
            e.block_steps = 0;
        }
        let fluctuation = e.fluctuation;
        if e.block_steps == 0 {
            let n = ((e.settings.window / 2).max(1)) as f64;
            let rises: Vec<f64> = self
                .members
                .iter_mut()
                .filter_map(|m| {
                    let mean = m.block_log_density / n;
                    m.block_log_density = 0.0;
                    m.previous_block_log_density.replace(mean).map(|p| mean - p)
                })
                .collect();
            if rises.len() == chains {
                self.members[0].ensemble.log_density_rise = rise_statistic(&rises);
            }
        }
        let e = &mut self.members[0].ensemble;
        e.equipartition_loss = equipartition;
        e.energy_variance = energy_variance;

        // ε from the energy error.
        let wanted = (e.settings.energy_variance_scale * equipartition.max(1e-12).powf(3.0 / 8.0))
            .min(e.settings.max_energy_variance);
        // The variance over a dozen chains is a noisy estimate (on yacht it spanned 1e-5..0.06
        // between neighbouring steps), so the ratio `ξ/ε⁶` (the energy variance of a step of
        // size ε scales as ε⁶) is averaged over about 10 steps, as MCLMC's own tuner averages.
        let factor = if failed {
            0.5
        } else if energy_variance > 0.0 {
            let ratio = energy_variance / e.step_size.powi(6);
            let average = match e.energy_ratio_average {
                Some(average) => average + ENERGY_RATIO_WEIGHT * (ratio - average),
                None => ratio,
            };
            e.energy_ratio_average = Some(average);
            ((wanted / average).powf(1.0 / 6.0) / e.step_size).clamp(0.3, 3.0)
        } else {
            1.0
        };
        e.step_size *= factor;

        // The preconditioner, at W/4, W/2, W, ...: ε keeps its size in the new coordinates.
        if t >= e.next_metric_refresh {
            // ε is measured in new units from here: its energy average starts again.
            e.energy_ratio_average = None;
            if let Some(metric) = DiagonalMassMatrix::from_measured_variances(&scales) {
                let mean_old = e.inverse_metric.iter().sum::<f64>() / dim as f64;
                let mean_new = metric.inverse_diag().iter().sum::<f64>() / dim as f64;
                e.step_size *= (mean_old / mean_new).sqrt();
                e.inverse_metric = metric.inverse_diag().to_vec();
                changed.inverse_metric = true;
            }
            e.next_metric_refresh = 2 * t;
        }
        // L from the chains' own spread (not the distance between chains in different modes):
        // short while the chains have not moved, so a chain heated by its first steps cools.
        e.trajectory_length = burn_in_length(
            &e.settings,
            &pooled_variance,
            &e.inverse_metric,
            e.step_size,
        );

        let threshold = 3.0 * e.settings.stop_fluctuation + 1.0 / chains as f64;
        // Not still climbing: the chains' mean rise in log p within two standard errors of 0.
        let level = e.log_density_rise <= 2.0;
        let end = if block_ended && t >= e.settings.window && fluctuation < threshold && level {
            Some(BurnInEnd::Converged)
        } else if t >= e.settings.burn_in_cap {
            Some(BurnInEnd::Cap)
        } else {
            None
        };
        if let Some(end) = end {
            e.burn_in_end = Some(end);
            Self::start_adjusted(e, &scales);
            changed = SharedVectors::ALL;
        }
        self.broadcast(changed);
    }

    /// Ends the burn-in: the adjusted phase's preconditioner from the pooled within-chain
    /// scales, `ε` rescaled to it, the dual averaging started there.
    fn start_adjusted(e: &mut EnsembleTuner, scales: &[f64]) {
        let dim = e.inverse_metric.len() as f64;
        if let Some(metric) = DiagonalMassMatrix::from_measured_variances(scales) {
            let mean_old = e.inverse_metric.iter().sum::<f64>() / dim;
            let mean_new = metric.inverse_diag().iter().sum::<f64>() / dim;
            e.step_size *= (mean_old / mean_new).sqrt();
            e.inverse_metric = metric.inverse_diag().to_vec();
        }
        e.dual_averaging = Some(DualAveraging::new(
            e.settings.target_accept,
            0.05,
            0.75,
            10.0,
            e.step_size,
        ));
        e.block_sum = Vec::new();
        e.previous_block = Vec::new();
        e.phase = if e.settings.adjusted_tuning > 0 {
            EnsemblePhase::Adjusted
        } else {
            EnsemblePhase::Sampling
        };
        Self::draw_steps(e);
    }

    /// The shared number of steps of the next adjusted transition: uniform on `1..2n̄`, mean n̄
    /// (jittered like MAMS's, but once for the whole ensemble so every chain takes as many).
    fn draw_steps(e: &mut EnsembleTuner) {
        let upper = (2 * e.settings.steps_per_draw).saturating_sub(1).max(1) as u64;
        let word = split_mix(split_mix(e.steps_seed) ^ e.steps_drawn);
        e.steps_drawn += 1;
        // Uniform on 1..=upper up to a bias of upper / 2⁶⁴.
        e.steps = 1 + (word % upper) as usize;
    }

    fn observe_adjusted(&mut self, views: &[MemberView<'_>]) {
        let accept = views.iter().map(|v| v.stats.accept_stat).sum::<f64>() / views.len() as f64;
        let e = &mut self.members[0].ensemble;
        e.adjusted_steps += 1;
        let averaging = e
            .dual_averaging
            .as_mut()
            .expect("the adjusted phase starts its dual averaging");
        e.step_size = averaging.update(accept);
        if e.adjusted_steps >= e.settings.adjusted_tuning {
            e.step_size = averaging.averaged_step_size();
            e.phase = EnsemblePhase::Sampling;
        }
        Self::draw_steps(e);
        self.broadcast(SharedVectors::NONE);
    }
}

/// Weight of the newest step in the energy ratio's running average (about 10 steps).
const ENERGY_RATIO_WEIGHT: f64 = 0.1;

/// `t` statistic of the mean of `rises` (`mean / (sd / √n)`); `+∞`-like when they all agree.
fn rise_statistic(rises: &[f64]) -> f64 {
    let n = rises.len() as f64;
    let mean = rises.iter().sum::<f64>() / n;
    let variance = rises.iter().map(|r| (r - mean).powi(2)).sum::<f64>() / (n - 1.0).max(1.0);
    let standard_error = (variance / n).sqrt();
    if standard_error > 0.0 {
        (mean / standard_error).clamp(-1e12, 1e12)
    } else if mean > 0.0 {
        1e12
    } else {
        0.0
    }
}

/// SplitMix64's finalizer (Steele, Lea & Flood 2014): a well-mixed 64-bit word from any input.
fn split_mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// One exponentially weighted step of a mean and variance (West 1979) toward `x`.
fn weighted_update(mean: &mut [f64], variance: &mut [f64], x: &[f64], weight: f64) {
    for ((m, v), x) in mean.iter_mut().zip(variance.iter_mut()).zip(x) {
        let delta = x - *m;
        *m += weight * delta;
        *v = (1.0 - weight) * (*v + weight * delta * delta);
    }
}

/// `L = α √d √mean_i(var_i / M_i)`, at least one step.
fn burn_in_length(
    settings: &EnsembleSettings,
    variance: &[f64],
    inverse_metric: &[f64],
    step_size: f64,
) -> f64 {
    let dim = variance.len() as f64;
    let scaled = variance
        .iter()
        .zip(inverse_metric)
        .map(|(v, m)| v / m)
        .sum::<f64>()
        / dim;
    let length = settings.length_factor * dim.sqrt() * scaled.sqrt();
    if length.is_finite() {
        length.max(step_size)
    } else {
        step_size
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// After every tuning step, through the burn-in (its block ends and preconditioner
    /// refreshes), the adjusted tuning and sampling, every chain holds chain 0's shared state and
    /// the parameters a full copy would give it, although most steps copy only what changed. A
    /// chain's checkpoint resumes the ensemble only if this holds. Both sizes: one thread's copy
    /// (4 × 20 values) and rayon's (200 × 200, above `PARALLEL_VALUES`).
    #[test]
    fn every_chain_carries_chain_0s_state_after_every_step() {
        for (chains, dim) in [(4, 20), (200, 200)] {
            let mut settings = crate::LapsConfig::new().ensemble_settings(60);
            settings.window = 8;
            settings.adjusted_tuning = 10;
            let (mut members, mut params) = fresh_ensemble(&settings, chains, dim, 0.1);
            // Positions that spread and move step by step, and a Gaussian's gradients (scale
            // 1..7 by coordinate), so that the preconditioner moves off the identity.
            let point = |c: usize, t: usize, gradient: bool| -> Vec<f64> {
                (0..dim)
                    .map(|i| {
                        let scale = 1.0 + (i % 7) as f64;
                        let x = scale * ((c * 31 + i * 17 + t * 7) as f64 * 0.618).sin();
                        if gradient {
                            -x / (scale * scale)
                        } else {
                            x
                        }
                    })
                    .collect()
            };
            let positions: Vec<Vec<f64>> = (0..chains).map(|c| point(c, 0, false)).collect();
            let gradients: Vec<Vec<f64>> = (0..chains).map(|c| point(c, 0, true)).collect();
            let p: Vec<&[f64]> = positions.iter().map(|x| &x[..]).collect();
            let g: Vec<&[f64]> = gradients.iter().map(|x| &x[..]).collect();
            Ensemble {
                members: members.iter_mut().collect(),
                params: params.iter_mut().collect(),
            }
            .start(7, &p, &g);
            let mut phases = Vec::new();
            for t in 1..=120 {
                let positions: Vec<Vec<f64>> = (0..chains).map(|c| point(c, t, false)).collect();
                let gradients: Vec<Vec<f64>> = (0..chains).map(|c| point(c, t, true)).collect();
                let stats: Vec<DrawStats> = (0..chains)
                    .map(|c| DrawStats {
                        log_density: -(((c + t) % 5) as f64),
                        accept_stat: 0.5 + 0.4 * ((c * t) as f64).sin().abs(),
                        energy_error: 0.01 * ((c + 3 * t) as f64).cos(),
                        ..DrawStats::default()
                    })
                    .collect();
                let views: Vec<MemberView<'_>> = (0..chains)
                    .map(|c| MemberView {
                        position: &positions[c],
                        gradient: &gradients[c],
                        stats: &stats[c],
                    })
                    .collect();
                Ensemble {
                    members: members.iter_mut().collect(),
                    params: params.iter_mut().collect(),
                }
                .observe(&views);
                let shared = &members[0].ensemble;
                let full = shared_params(shared);
                for c in 0..chains {
                    assert_eq!(
                        members[c].ensemble, *shared,
                        "{chains} chains: chain {c}'s shared state after step {t}"
                    );
                    assert_eq!(
                        params[c], full,
                        "{chains} chains: chain {c}'s parameters after step {t}"
                    );
                }
                phases.push(shared.phase);
            }
            // The run went through every phase, and refreshed its preconditioner on the way.
            for phase in [
                EnsemblePhase::BurnIn,
                EnsemblePhase::Adjusted,
                EnsemblePhase::Sampling,
            ] {
                assert!(
                    phases.contains(&phase),
                    "{chains} chains never reached {phase:?}"
                );
            }
            assert!(
                members[0].ensemble.inverse_metric.iter().any(|m| *m != 1.0),
                "the preconditioner was never refreshed"
            );
        }
    }

    /// The ensemble's means in coordinate chunks on rayon's threads equal the one-thread pass
    /// to the last bit (each coordinate is summed over the chains in the same order).
    #[test]
    fn means_over_chains_do_not_depend_on_the_split() {
        let (chains, dim) = (300, 517);
        let rows: Vec<Vec<f64>> = (0..chains)
            .map(|c| {
                (0..dim)
                    .map(|i| ((c * 7919 + i * 104_729) as f64 * 0.618).sin() * 1e3)
                    .collect()
            })
            .collect();
        let fill = |c: usize, range: Range<usize>, row: &mut [f64]| {
            row.copy_from_slice(&rows[c][range]);
        };
        let one = mean_over_chains(false, dim, chains, fill);
        let split = mean_over_chains(true, dim, chains, fill);
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&one), bits(&split));
        // And the serial pass is the plain per-coordinate mean.
        let mean0 = rows.iter().map(|r| r[0]).fold(0.0, |s, x| s + x) / chains as f64;
        assert_eq!(one[0].to_bits(), mean0.to_bits());
    }
}

//! The MAMS warmup (Robnik, Cohn-Gordon & Seljak 2025; BlackJAX's
//! `adjusted_mclmc_find_L_and_step_size`): dual averaging of ε toward an acceptance rate, a
//! diagonal preconditioner and `L` from the positions' variances, then `L` from the ESS.
//!
//! Four phases over the warmup's `n` transitions (shares `fractions`):
//! 1. dual averaging of ε with `L` fixed (ε kept below `L/1.1`, so a trajectory averages at least
//!    about one step);
//! 2. as 1, and the positions' variances are accumulated; at its end `L` and ε are scaled by
//!    `√Σ Var / L` (at most 2), the preconditioner becomes the variances' square roots with
//!    `L = √d` in the whitened coordinates, and dual averaging restarts;
//! 3. dual averaging again under the new preconditioner; ε is then fixed at its averaged value;
//! 4. fixed ε and `L`; at its end `L ← factor · L · mean(transitions / ESS)`, kept at least
//!    `min_steps_per_length · ε` (so a proposal averages more than one step: phases 1–3 tuned ε
//!    for trajectories of about two steps, and one step per proposal is MALA).

use serde::{Deserialize, Serialize};

use crate::adaptation::autocorrelation_length::KeptPositions;
use crate::adaptation::dual_averaging::DualAveraging;
use crate::adaptation::welford::WelfordVariance;
use crate::adaptation::TunedParams;
use crate::draw_stats::DrawStats;
use crate::kernels::MamsConfig;
use crate::metric::DiagonalMassMatrix;

/// The serializable state of one chain's MAMS warmup.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MamsTuner {
    num_warmup: usize,
    /// Last iteration (exclusive) of phases 1, 2 and 3.
    phase_ends: [usize; 3],
    iteration: usize,
    dim: usize,
    precondition: bool,
    length_factor: f64,
    /// `MamsConfig::min_steps_per_length` (absent from checkpoints written before it existed,
    /// which ran without the floor).
    #[serde(default)]
    min_steps_per_length: f64,
    dual_averaging: DualAveraging,
    variances: WelfordVariance,
    kept: KeptPositions,
}

impl MamsTuner {
    pub fn new(config: &MamsConfig, num_warmup: usize, dim: usize, step_size: f64) -> Self {
        let mut ends = [0usize; 3];
        let mut total = 0.0;
        for (end, share) in ends.iter_mut().zip(&config.tune_fractions) {
            total += share;
            *end = ((total * num_warmup as f64).round() as usize).min(num_warmup);
        }
        Self {
            num_warmup,
            phase_ends: ends,
            iteration: 0,
            dim,
            precondition: config.diagonal_preconditioning,
            length_factor: config.trajectory_length_factor,
            min_steps_per_length: config.min_steps_per_length,
            dual_averaging: DualAveraging::new(config.target_accept, 0.05, 0.75, 10.0, step_size),
            variances: WelfordVariance::new(dim),
            kept: KeptPositions::new(dim, config.max_ess_coordinates),
        }
    }

    pub fn num_warmup(&self) -> usize {
        self.num_warmup
    }

    pub fn iteration(&self) -> usize {
        self.iteration
    }

    /// Phase 4 keeps positions (see `MclmcTuner::holds_positions`).
    pub fn holds_positions(&self) -> bool {
        !self.kept.is_empty()
    }

    /// Observes one warmup transition and sets the parameters of the next.
    pub fn observe(&mut self, position: &[f64], stats: &DrawStats, params: &mut TunedParams) {
        let i = self.iteration;
        self.iteration += 1;
        let [end1, end2, end3] = self.phase_ends;
        let length = params.trajectory_length.unwrap_or((self.dim as f64).sqrt());
        if i < end3 {
            let accept = if stats.accept_stat.is_finite() {
                stats.accept_stat
            } else {
                0.0
            };
            let step_size = self.dual_averaging.update(accept).clamp(1e-8, length / 1.1);
            params.step_size = step_size;
            if i >= end1 && i < end2 {
                self.variances.add(position);
            }
            if i + 1 == end2 && self.variances.count() >= 2 {
                self.set_preconditioner(params, length);
            }
            if i + 1 == end3 {
                params.step_size = self.dual_averaging.averaged_step_size().min(length / 1.1);
            }
        } else {
            self.kept.push(position);
            if self.iteration == self.num_warmup {
                if let Some(tau) = self.kept.take_transitions_per_effective_sample() {
                    let floor = self.min_steps_per_length * params.step_size;
                    params.trajectory_length = Some((self.length_factor * length * tau).max(floor));
                }
            }
        }
    }

    /// End of phase 2: preconditioner (or L) from the variances, ε rescaled like L, dual
    /// averaging restarted.
    fn set_preconditioner(&mut self, params: &mut TunedParams, length: f64) {
        let variances = self.variances.variance();
        let total: f64 = variances.iter().sum();
        if !(total > 0.0 && total.is_finite()) {
            return;
        }
        // L follows the posterior's size (the factor bounded by 2, as BlackJAX), ε with it.
        let change = (total.sqrt() / length).min(2.0);
        params.step_size *= change;
        params.trajectory_length = Some(length * change);
        if self.precondition {
            if let Some(metric) = DiagonalMassMatrix::from_measured_variances(&variances) {
                params.metric = metric;
                params.trajectory_length = Some((self.dim as f64).sqrt());
            }
        }
        self.dual_averaging.restart(params.step_size);
    }
}

//! The MCLMC warmup (Robnik et al. 2023, §2.3 and Appendix; BlackJAX's
//! `mclmc_find_L_and_step_size`, with MILE's decaying energy-variance target).
//!
//! Three phases over the warmup's `n` transitions:
//! 1. (`phase1_fraction · n` steps) the step size follows the energy error: each step's
//!    `ξ = ΔE² / (d · target)` enters decayed, weighted averages of `ξ / ε⁶`, and
//!    `ε = (average)^(−1/6)`, since the energy-error variance grows as `ε⁶` for a second-order
//!    integrator. The weight `exp(−½ (ln ξ / (6 · trust))²)` discounts steps far from the target.
//!    The target falls linearly from `energy_variance_start` to `energy_variance_end`.
//! 2. (`phase2_fraction · n`) as phase 1, and the positions' step-size-weighted variances are
//!    accumulated; at its end `L = √(Σ Var[x_i])`.
//!    With `diagonal_preconditioning` the variances become the preconditioner instead, `L = √d`,
//!    and phase 1's step-size rule runs again (fresh averages) for a third of phase 2's length.
//! 3. (the rest) `ε` and `L` fixed; the positions of up to `max_ess_coordinates` coordinates are
//!    kept, and at the end `L = factor · ε · mean_i(steps / ESS_i)`: a decoherence length matched
//!    to the chain's measured autocorrelation time.

use serde::{Deserialize, Serialize};

use crate::adaptation::autocorrelation_length::KeptPositions;
use crate::adaptation::TunedParams;
use crate::draw_stats::DrawStats;
use crate::kernels::MclmcConfig;

/// The serializable state of one chain's MCLMC warmup.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MclmcTuner {
    num_warmup: usize,
    phase1: usize,
    phase2: usize,
    iteration: usize,
    dim: usize,
    energy_variance_start: f64,
    energy_variance_end: f64,
    decay: f64,
    trust_in_estimate: f64,
    length_factor: f64,
    /// Decayed sum of weights (BlackJAX's `time`).
    weight_sum: f64,
    /// Decayed weighted sum of `ξ / ε⁶` (BlackJAX's `x_average`).
    weighted_xi: f64,
    /// Upper bound on ε after a failed step (none before the first).
    step_size_cap: Option<f64>,
    /// Phase 2: total weight and weighted means of `x` and `x²`.
    moment_weight: f64,
    mean: Vec<f64>,
    mean_square: Vec<f64>,
    /// Phase 3: the positions, for the ESS.
    kept: KeptPositions,
    /// Statistics of the finished warmup, for reports: the energy change variance per dimension
    /// over phase 3 (where ε is fixed), and the ESS-based L.
    phase3_energy_square_sum: f64,
    phase3_steps: usize,
    /// Whether phase 2 ends by setting a diagonal preconditioner.
    #[serde(default)]
    precondition: bool,
    /// Step-size tuning runs until this iteration (phases 1 and 2, plus the readjustment after a
    /// new preconditioner); 0 in states written before the option existed: phases 1 and 2.
    #[serde(default)]
    step_size_tuning_end: usize,
}

impl MclmcTuner {
    pub fn new(config: &MclmcConfig, num_warmup: usize, dim: usize) -> Self {
        let phase1 = (config.phase1_fraction * num_warmup as f64).round() as usize;
        let phase2 = ((config.phase2_fraction * num_warmup as f64).round() as usize)
            .min(num_warmup - phase1.min(num_warmup));
        let phase1 = phase1.min(num_warmup);
        let readjust = if config.diagonal_preconditioning && phase2 > 1 {
            phase2.div_ceil(3)
        } else {
            0
        };
        let step_size_tuning_end = (phase1 + phase2 + readjust).min(num_warmup);
        let n = config.effective_samples;
        Self {
            num_warmup,
            phase1,
            phase2,
            iteration: 0,
            dim,
            energy_variance_start: config.energy_variance_start,
            energy_variance_end: config.energy_variance_end,
            decay: (n - 1.0) / (n + 1.0),
            trust_in_estimate: config.trust_in_estimate,
            length_factor: config.trajectory_length_factor,
            weight_sum: 0.0,
            weighted_xi: 0.0,
            step_size_cap: None,
            moment_weight: 0.0,
            mean: Vec::new(),
            mean_square: Vec::new(),
            kept: KeptPositions::new(dim, config.max_ess_coordinates),
            phase3_energy_square_sum: 0.0,
            phase3_steps: 0,
            precondition: config.diagonal_preconditioning,
            step_size_tuning_end,
        }
    }

    pub fn num_warmup(&self) -> usize {
        self.num_warmup
    }

    pub fn iteration(&self) -> usize {
        self.iteration
    }

    /// Phase 3 keeps positions in memory: a checkpoint then holds them all, so periodic
    /// checkpoints wait for its end (a resumed chain repeats at most phase 3, bit for bit).
    pub fn holds_positions(&self) -> bool {
        !self.kept.is_empty()
    }

    /// The variance of the energy change per dimension over phase 3 (fixed ε): what the tuner
    /// aimed at, measured. `None` before phase 3 ran.
    pub fn phase3_energy_variance(&self) -> Option<f64> {
        (self.phase3_steps > 0)
            .then(|| self.phase3_energy_square_sum / (self.phase3_steps as f64 * self.dim as f64))
    }

    /// The energy-variance target at warmup step `i` of phases 1 and 2.
    fn energy_variance_target(&self, i: usize) -> f64 {
        let span = (self.phase1 + self.phase2).saturating_sub(1).max(1) as f64;
        let t = (i as f64 / span).min(1.0);
        self.energy_variance_start + (self.energy_variance_end - self.energy_variance_start) * t
    }

    /// Observes one warmup transition and sets the parameters of the next.
    pub fn observe(&mut self, position: &[f64], stats: &DrawStats, params: &mut TunedParams) {
        let i = self.iteration;
        self.iteration += 1;
        let tuning = self.phase1 + self.phase2;
        if i < tuning.max(self.step_size_tuning_end) {
            let used = stats.step_size;
            let energy_change = if stats.divergent {
                self.step_size_cap = Some(
                    self.step_size_cap
                        .map_or(0.8 * used, |cap| cap.min(0.8 * used)),
                );
                0.0
            } else {
                stats.energy_error
            };
            let xi = energy_change * energy_change
                / (self.dim as f64 * self.energy_variance_target(i))
                + 1e-8;
            let weight = (-0.5 * (xi.ln() / (6.0 * self.trust_in_estimate)).powi(2)).exp();
            self.weighted_xi = self.decay * self.weighted_xi + weight * xi / used.powi(6);
            self.weight_sum = self.decay * self.weight_sum + weight;
            let mut step_size = (self.weighted_xi / self.weight_sum).powf(-1.0 / 6.0);
            if let Some(cap) = self.step_size_cap {
                step_size = step_size.min(cap);
            }
            if step_size.is_finite() && step_size > 0.0 {
                params.step_size = step_size;
            }
            if i >= self.phase1 && i < tuning && !stats.divergent {
                self.accumulate_moments(position, params.step_size);
            }
            if i + 1 == tuning && self.phase2 > 1 {
                self.end_phase2(params);
            }
        } else {
            self.phase3_steps += 1;
            self.phase3_energy_square_sum += stats.energy_error * stats.energy_error;
            self.kept.push(position);
            if self.iteration == self.num_warmup {
                if let Some(tau) = self.kept.take_transitions_per_effective_sample() {
                    params.trajectory_length = Some(self.length_factor * params.step_size * tau);
                }
            }
        }
    }

    /// `L` from the phase-2 variances, or (preconditioning) the variances as the metric, `L = √d`
    /// and the step size rescaled so a step moves as far as before, then re-tuned.
    fn end_phase2(&mut self, params: &mut TunedParams) {
        let variances: Vec<f64> = self
            .mean
            .iter()
            .zip(&self.mean_square)
            .map(|(m, s)| (s - m * m).max(0.0))
            .collect();
        self.mean = Vec::new();
        self.mean_square = Vec::new();
        let total_variance: f64 = variances.iter().sum();
        if !(total_variance > 0.0 && total_variance.is_finite()) {
            return;
        }
        if !self.precondition {
            params.trajectory_length = Some(total_variance.sqrt());
            return;
        }
        let old_scale = rms(params.metric.sqrt_inverse_diag());
        if let Some(metric) = crate::metric::DiagonalMassMatrix::from_measured_variances(&variances)
        {
            let change = old_scale / rms(metric.sqrt_inverse_diag());
            params.metric = metric;
            params.trajectory_length = Some((self.dim as f64).sqrt());
            params.step_size *= change;
            self.step_size_cap = self.step_size_cap.map(|cap| cap * change);
            self.weighted_xi = 0.0;
            self.weight_sum = 0.0;
        }
    }

    fn accumulate_moments(&mut self, position: &[f64], weight: f64) {
        if self.mean.is_empty() {
            self.mean = vec![0.0; position.len()];
            self.mean_square = vec![0.0; position.len()];
        }
        let total = self.moment_weight + weight;
        for ((m, s), &x) in self
            .mean
            .iter_mut()
            .zip(self.mean_square.iter_mut())
            .zip(position)
        {
            *m += weight * (x - *m) / total;
            *s += weight * (x * x - *s) / total;
        }
        self.moment_weight = total;
    }
}

/// Root mean square of a preconditioner's scales.
fn rms(scales: &[f64]) -> f64 {
    (scales.iter().map(|s| s * s).sum::<f64>() / scales.len().max(1) as f64).sqrt()
}

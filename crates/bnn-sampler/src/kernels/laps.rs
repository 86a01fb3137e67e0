//! LAPS, late-adjusted parallel sampling (Robnik & Seljak 2026; BlackJAX `adaptation/laps.py`):
//! many chains as one ensemble. An unadjusted MCLMC burn-in tuned from the ensemble's statistics
//! (`adaptation::ensemble_tuner`) brings the chains to the typical set and ends when the
//! ensemble stops moving; then MAMS with one step size, one preconditioner and one number of
//! steps for all chains, so each chain's draws are exact and every chain takes the same steps
//! (no chain waits for another's tree: the shape a GPU wants).
//!
//! The kernels are MCLMC's and MAMS's (with shared steps); what is new is the ensemble's tuner
//! and its runner (`Sampler::run_ensemble`), which steps every chain, then tunes from all of them.

use bnn_config_derive::Config;

use crate::adaptation::ensemble_tuner::{EnsembleMember, EnsembleSettings};
use crate::adaptation::stan_windows::WarmupConfig;
use crate::adaptation::{TunedParams, Tuner};
use crate::draw_stats::StatColumn;
use crate::error::SamplerError;
use crate::kernels::mams::Mams;
use crate::kernels::mclmc::{Mclmc, MICROCANONICAL_STATS};
use crate::log_density::LogDensity;
use crate::sampler_settings::{Budget, ChainRunner, SamplerSettings};

/// Configuration of LAPS: its burn-in, its adjusted phase, and how the chains start.
#[derive(Config, Debug)]
pub struct LapsConfig {
    /// Acceptance the adjusted phase's step size aims for (BlackJAX: 0.9 above 200
    /// dimensions).
    #[config(default = 0.9)]
    pub target_accept: f64,
    /// Mean integration steps per adjusted transition; each iteration draws one number for all
    /// chains, uniform on `1..2n` (BlackJAX: a fixed 15).
    #[config(default = 15)]
    pub steps_per_draw: usize,
    /// `α` of the burn-in's decoherence length `L = α √d σ̄` (BlackJAX: 1.9).
    #[config(default = 1.9)]
    pub length_factor: f64,
    /// `C` of the burn-in's target energy-error variance per dimension, `C · b^{3/8}` with `b`
    /// the equipartition loss (BlackJAX: 0.1).
    #[config(default = 0.1)]
    pub energy_variance_scale: f64,
    /// The most the burn-in's target energy-error variance per dimension may be (BlackJAX's
    /// MCLMC default target, 5e-4). LAPS's `C · b^{3/8}` alone aimed yacht's BNN at 0.08: its
    /// unadjusted chains ran hot, 200 nats of log p below their starts after 20,000 steps.
    #[config(default = 5e-4)]
    pub max_energy_variance: f64,
    /// `r_end`: the burn-in ends when the ensemble mean of `x²` drifts less than BlackJAX's
    /// window fluctuation `r_end` allows, plus the Monte Carlo noise of `C` chains (BlackJAX:
    /// 0.01).
    #[config(default = 0.01)]
    pub stop_fluctuation: f64,
    /// The share of the burn-in's cap (the run's warmup) that the fluctuation and the
    /// within-chain variances remember, and the fewest burn-in steps (BlackJAX: 0.2).
    #[config(default = 0.2)]
    pub window_fraction: f64,
    /// Adjusted iterations that tune the step size before sampling.
    #[config(default = 50)]
    pub adjusted_tuning: usize,
    /// Chains that start where an earlier chain starts (more chains than ensemble members) move
    /// by `N(0, (jitter · max(|x_i|, 1))²)` first, so that copies of one member separate.
    #[config(default = 1e-3)]
    pub start_jitter: f64,
    /// A burn-in step whose energy error exceeds `max(10, this · d)` is refused (the chain stays
    /// put and the ensemble halves ε): from a trained network the first step at the starting
    /// ε heated yacht's chains by 12,000 nats, which the unadjusted burn-in never shed.
    #[config(default = 0.1)]
    pub burn_in_max_energy_error_per_dim: f64,
    /// Upper bound on integration steps per adjusted transition.
    #[config(default = 1024)]
    pub max_num_steps: usize,
    /// Energy error above which an adjusted trajectory is a divergence.
    #[config(default = 1000.0)]
    pub max_energy_error: f64,
}

impl LapsConfig {
    pub(crate) fn validate(&self) -> Result<(), SamplerError> {
        let invalid = |message: String| Err(SamplerError::InvalidConfig(message));
        if !(self.target_accept > 0.0 && self.target_accept < 1.0) {
            return invalid(format!(
                "LAPS target_accept must lie in (0, 1), got {}",
                self.target_accept
            ));
        }
        for (name, value) in [
            ("length_factor", self.length_factor),
            (
                "burn_in_max_energy_error_per_dim",
                self.burn_in_max_energy_error_per_dim,
            ),
            ("energy_variance_scale", self.energy_variance_scale),
            ("max_energy_variance", self.max_energy_variance),
            ("max_energy_error", self.max_energy_error),
        ] {
            if !(value > 0.0 && value.is_finite()) {
                return invalid(format!("LAPS {name} must be positive, got {value}"));
            }
        }
        if !(self.stop_fluctuation >= 0.0 && self.stop_fluctuation.is_finite()) {
            return invalid(format!(
                "LAPS stop_fluctuation must be non-negative, got {}",
                self.stop_fluctuation
            ));
        }
        if !(self.window_fraction > 0.0 && self.window_fraction <= 1.0) {
            return invalid(format!(
                "LAPS window_fraction must lie in (0, 1], got {}",
                self.window_fraction
            ));
        }
        if !(self.start_jitter >= 0.0 && self.start_jitter.is_finite()) {
            return invalid(format!(
                "LAPS start_jitter must be non-negative, got {}",
                self.start_jitter
            ));
        }
        if self.steps_per_draw == 0 || self.max_num_steps == 0 {
            return invalid("LAPS steps_per_draw and max_num_steps must be positive".into());
        }
        Ok(())
    }

    /// `W`: the burn-in steps the ensemble's statistics remember, for a burn-in of at most
    /// `burn_in_cap` steps; the burn-in ends no earlier.
    pub fn ensemble_window(&self, burn_in_cap: usize) -> usize {
        ((self.window_fraction * burn_in_cap as f64).round() as usize).max(1)
    }

    /// The ensemble's settings for a burn-in of at most `burn_in_cap` steps.
    pub(crate) fn ensemble_settings(&self, burn_in_cap: usize) -> EnsembleSettings {
        EnsembleSettings {
            length_factor: self.length_factor,
            energy_variance_scale: self.energy_variance_scale,
            max_energy_variance: self.max_energy_variance,
            stop_fluctuation: self.stop_fluctuation,
            window: self.ensemble_window(burn_in_cap),
            burn_in_cap,
            adjusted_tuning: self.adjusted_tuning,
            steps_per_draw: self.steps_per_draw,
            target_accept: self.target_accept,
        }
    }

    /// The kernels of the two phases in dimension `dim`: MCLMC for the burn-in (refusing
    /// catastrophic steps), MAMS with shared steps after it.
    pub(crate) fn kernels(&self, dim: usize) -> (Mclmc, Mams) {
        let burn_in_limit = (self.burn_in_max_energy_error_per_dim * dim as f64).max(10.0);
        (
            Mclmc::with_max_energy_error(burn_in_limit),
            Mams::with_shared_steps(self.max_num_steps, self.max_energy_error),
        )
    }
}

impl SamplerSettings for LapsConfig {
    const NAME: &'static str = "laps";

    fn validate(&self) -> Result<(), SamplerError> {
        LapsConfig::validate(self)
    }

    fn target_accept(&self) -> f64 {
        self.target_accept
    }

    fn uses_leapfrog(&self) -> bool {
        false
    }

    /// BlackJAX's LAPS starts its burn-in at `ε = 0.01 √d`; the ensemble moves it by up to 3×
    /// a step.
    fn default_step_size(&self, dim: usize) -> f64 {
        0.01 * (dim as f64).sqrt()
    }

    /// A burn-in of at most 10,000 steps (one McLachlan step, two gradients, each; it ends
    /// earlier when the ensemble has stopped moving), then 100 draws per chain: LAPS is for
    /// many chains, each contributing few draws.
    fn default_budget(&self) -> Budget {
        Budget {
            warmup: 10_000,
            draws: 100,
            thin: 1,
        }
    }

    fn min_dim(&self) -> usize {
        2
    }

    fn supports_batched(&self) -> bool {
        true
    }

    fn tunes_across_chains(&self) -> bool {
        true
    }

    fn start_warmup(
        &self,
        _warmup: &WarmupConfig,
        num_warmup: usize,
        dim: usize,
        params: &mut TunedParams,
    ) -> Tuner {
        let member = EnsembleMember::new(self.ensemble_settings(num_warmup), dim, params.step_size);
        params.trajectory_length = Some(member.ensemble.trajectory_length);
        Tuner::Ensemble(Box::new(member))
    }

    fn stat_columns(&self) -> &'static [StatColumn] {
        &MICROCANONICAL_STATS
    }

    fn run<L: LogDensity + ?Sized>(&self, chains: ChainRunner<'_, L>) -> Result<(), SamplerError> {
        let (burn_in, adjusted) = self.kernels(chains.dim());
        chains.ensemble(burn_in, adjusted, self.start_jitter)
    }
}

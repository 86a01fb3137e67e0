//! The stationary warmup policy: Stan's windows, then a check at the final step size and metric,
//! and more adaptation for as long as the check says the chain is not yet where it will sample.
//!
//! Why: DEI-MCMC starts its chains at trained networks, below the posterior's typical set. A
//! fixed 100-iteration warmup tunes ε where the chain was; the chain then moves on, and a step
//! size tuned there diverges where it goes (Table 3 at the paper's budget: 9–49% divergent
//! draws, acceptance falling through every run). The check window runs the sampler exactly as it
//! will sample (final ε, final metric, no adaptation) and ends the warmup only when that window
//! shows no divergence, the acceptance the step size was tuned for, and no climb of `log p`.

use bnn_config_derive::Config;
use serde::{Deserialize, Serialize};

use crate::adaptation::welford::WelfordVariance;
use crate::draw_stats::DrawStats;
use crate::error::SamplerError;

/// Which rule ends a chain's warmup.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WarmupPolicy {
    /// The planned iterations and no more (Stan's schedule; DEI-MCMC's 100 iterations).
    #[default]
    Fixed,
    /// The planned iterations, then a check window at the final step size and metric; a failed
    /// check adapts again (`StationarityConfig`) until one passes or the cap is reached.
    Stationary,
}

impl WarmupPolicy {
    pub const NAMES: [&'static str; 2] = ["fixed", "stationary"];

    pub fn name(self) -> &'static str {
        match self {
            WarmupPolicy::Fixed => "fixed",
            WarmupPolicy::Stationary => "stationary",
        }
    }

    /// The policy of a name (`fixed`, `stationary`).
    pub fn named(name: &str) -> Option<Self> {
        match name {
            "fixed" => Some(WarmupPolicy::Fixed),
            "stationary" => Some(WarmupPolicy::Stationary),
            _ => None,
        }
    }
}

/// The stationary policy's settings.
#[derive(Config, Debug)]
pub struct StationarityConfig {
    /// Iterations run at the final step size and metric whose draws decide whether the warmup
    /// ends (they are warmup iterations: never kept as draws).
    #[config(default = 50)]
    pub check_window: usize,
    /// Warmup iterations a chain may use in all: the planned ones, extensions and checks. A chain
    /// that reaches it starts sampling, and its verdict says the cap ended its warmup.
    #[config(default = 600)]
    pub max_warmup: usize,
    /// Divergent transitions a check window may hold and still pass.
    #[config(default = 0)]
    pub allowed_divergences: usize,
    /// How far the check window's mean acceptance may fall below the target and still pass.
    #[config(default = 0.1)]
    pub accept_tolerance: f64,
    /// The largest rise of the mean `log p` from the window before the check to the check window,
    /// in pooled standard deviations of the two, that still passes (a chain still climbing
    /// toward the typical set rises by many).
    #[config(default = 2.0)]
    pub max_lp_rise: f64,
    /// The largest root mean square over coordinates of the check window's mean gradient in
    /// standard deviations of that gradient that still passes. In the typical set
    /// `E[∇ log p] = 0`, so a well-mixing window's value is about `1/√ESS`; a chain crawling in
    /// from far out (too slowly for `log p` to rise within a window) feels the same pull
    /// throughout, and its value is large. Measured: 25–12,000 for Gaussians started 50 sd out
    /// with NUTS at depth 2–4, below 0.5 there once arrived, and 0.3–4.8 for yacht's DEI-NUTS
    /// chains (depth-10 trees that mix slowly in the σ directions); 10 separates the two.
    #[config(default = 10.0)]
    pub max_gradient_drift: f64,
    /// Slow (metric) window of an extension after a check whose acceptance fell or whose
    /// `log p` still climbed.
    #[config(default = 100)]
    pub extension_window: usize,
    /// A divergent check raises the step size's target acceptance halfway to 1, up to this.
    #[config(default = 0.99)]
    pub max_target_accept: f64,
}

impl StationarityConfig {
    pub(crate) fn validate(&self) -> Result<(), SamplerError> {
        let invalid = |message: String| Err(SamplerError::InvalidConfig(message));
        if self.check_window < 2 {
            return invalid(format!(
                "warmup stationarity check_window must be at least 2, got {}",
                self.check_window
            ));
        }
        if !(self.accept_tolerance >= 0.0 && self.accept_tolerance < 1.0) {
            return invalid(format!(
                "warmup stationarity accept_tolerance must lie in [0, 1), got {}",
                self.accept_tolerance
            ));
        }
        if !(self.max_lp_rise > 0.0) {
            return invalid(format!(
                "warmup stationarity max_lp_rise must be positive, got {}",
                self.max_lp_rise
            ));
        }
        if !(self.max_gradient_drift > 0.0) {
            return invalid(format!(
                "warmup stationarity max_gradient_drift must be positive, got {}",
                self.max_gradient_drift
            ));
        }
        if !(self.max_target_accept > 0.0 && self.max_target_accept < 1.0) {
            return invalid(format!(
                "warmup stationarity max_target_accept must lie in (0, 1), got {}",
                self.max_target_accept
            ));
        }
        Ok(())
    }
}

/// What one check window found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckOutcome {
    /// No divergence beyond the allowance, acceptance at the target, `log p` level: warmup ends.
    Stationary,
    /// Divergent transitions at the final step size: the target acceptance is raised and the
    /// step size tuned again.
    Divergent,
    /// Mean acceptance fell below the target by more than the tolerance: the chain moved where
    /// the step size is too large; metric and step size are tuned again.
    AcceptanceFell,
    /// `log p` rose beyond `max_lp_rise`: the chain is still arriving; adaptation continues.
    StillClimbing,
    /// The mean gradient stayed away from 0 beyond `max_gradient_drift`: the chain is still
    /// pulled one way (crawling in); adaptation continues.
    GradientDrift,
}

/// A check window's verdict, kept in the chain's warmup state (and so in its checkpoint).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WarmupCheck {
    /// The warmup iteration after the check window's last one.
    pub end: usize,
    pub outcome: CheckOutcome,
    pub divergences: usize,
    pub mean_accept: f64,
    /// Rise of the mean `log p` from the window before the check, in pooled standard deviations.
    pub lp_rise: f64,
    /// Root mean square over coordinates of the mean gradient in its standard deviations.
    #[serde(default)]
    pub gradient_drift: f64,
    /// The target acceptance the checked step size was tuned for.
    pub target_accept: f64,
    pub step_size: f64,
}

/// Why a chain's warmup ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WarmupEnd {
    /// A check window passed.
    Stationary,
    /// The last check failed and another extension would pass `max_warmup`.
    Cap,
}

/// Running mean and sum of squared deviations of one scalar (Welford).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct Moments {
    count: usize,
    mean: f64,
    m2: f64,
}

impl Moments {
    fn add(&mut self, x: f64) {
        self.count += 1;
        let delta = x - self.mean;
        self.mean += delta / self.count as f64;
        self.m2 += delta * (x - self.mean);
    }

    fn variance(&self) -> f64 {
        if self.count < 2 {
            0.0
        } else {
            self.m2 / (self.count - 1) as f64
        }
    }
}

/// What the warmup does next after an iteration of the stationary policy's bookkeeping.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Next {
    /// Keep going as planned.
    Continue,
    /// The warmup has ended.
    Ended,
    /// Adapt again: a slow window of `slow` iterations (0: step size only), then a terminal
    /// buffer, at target acceptance `target`.
    Extend { slow: usize, target: f64 },
}

/// The stationary policy's state for one chain: where the current adaptation segment ends, the
/// statistics of the window before the check and of the check itself, and every verdict.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StationaryWarmup {
    check_window: usize,
    max_warmup: usize,
    allowed_divergences: usize,
    accept_tolerance: f64,
    max_lp_rise: f64,
    max_gradient_drift: f64,
    extension_window: usize,
    max_target_accept: f64,
    /// The terminal (step size only) buffer that ends every extension.
    term_buffer: usize,
    /// First iteration after the current adaptation segment (where its check window starts).
    segment_end: usize,
    /// `log p` over the last `check_window` iterations of the segment.
    before: Moments,
    /// `log p` in the check window so far.
    check_lp: Moments,
    check_accept: f64,
    check_divergences: usize,
    /// Per-coordinate moments of the gradient in the check window.
    check_gradient: WelfordVariance,
    checks: Vec<WarmupCheck>,
    end: Option<WarmupEnd>,
}

impl StationaryWarmup {
    /// The policy's state for a warmup planned to `planned` iterations whose extensions end
    /// with a `term_buffer`-iteration step-size window.
    pub(crate) fn new(
        config: &StationarityConfig,
        dim: usize,
        planned: usize,
        term_buffer: usize,
    ) -> Self {
        Self {
            check_window: config.check_window,
            max_warmup: config.max_warmup,
            allowed_divergences: config.allowed_divergences,
            accept_tolerance: config.accept_tolerance,
            max_lp_rise: config.max_lp_rise,
            max_gradient_drift: config.max_gradient_drift,
            extension_window: config.extension_window,
            max_target_accept: config.max_target_accept,
            term_buffer,
            segment_end: planned,
            before: Moments::default(),
            check_lp: Moments::default(),
            check_accept: 0.0,
            check_divergences: 0,
            check_gradient: WelfordVariance::new(dim),
            checks: Vec::new(),
            end: None,
        }
    }

    /// Warmup iterations as planned now: to the end of the current check window, or where the
    /// warmup ended.
    pub fn num_warmup(&self) -> usize {
        match (self.end, self.checks.last()) {
            (Some(_), Some(last)) => last.end,
            _ => self.segment_end + self.check_window,
        }
    }

    /// The step-size window that ends every extension.
    pub(crate) fn term_buffer(&self) -> usize {
        self.term_buffer
    }

    /// Every check window's verdict so far, in order.
    pub fn checks(&self) -> &[WarmupCheck] {
        &self.checks
    }

    /// Why the warmup ended; `None` while it runs.
    pub fn end(&self) -> Option<WarmupEnd> {
        self.end
    }

    /// Whether `iteration` is in the check window (no adaptation there).
    pub(crate) fn in_check(&self, iteration: usize) -> bool {
        iteration >= self.segment_end
    }

    /// Notes an adaptation iteration's `log p` (the window before the check).
    pub(crate) fn observe_segment(&mut self, iteration: usize, log_density: f64) {
        if iteration + self.check_window >= self.segment_end {
            self.before.add(log_density);
        }
    }

    /// Notes a check iteration; at the check window's end, decides.
    pub(crate) fn observe_check(
        &mut self,
        iteration: usize,
        gradient: &[f64],
        stats: &DrawStats,
        target_accept: f64,
    ) -> Next {
        self.check_lp.add(stats.log_density);
        self.check_gradient.add(gradient);
        self.check_accept += if stats.accept_stat.is_nan() {
            0.0
        } else {
            stats.accept_stat
        };
        self.check_divergences += usize::from(stats.divergent);
        if iteration + 1 < self.segment_end + self.check_window {
            return Next::Continue;
        }
        // Finite whatever the draws were (JSON has no NaN or infinity): a NaN statistic fails.
        let finite = |v: f64| {
            if v.is_nan() {
                f64::MAX
            } else {
                v.clamp(-f64::MAX, f64::MAX)
            }
        };
        let mean_accept = self.check_accept / self.check_window as f64;
        let lp_rise = finite(standardized_rise(&self.before, &self.check_lp));
        let gradient_drift = finite(gradient_drift(&self.check_gradient));
        let outcome = if self.check_divergences > self.allowed_divergences {
            CheckOutcome::Divergent
        } else if mean_accept < target_accept - self.accept_tolerance {
            CheckOutcome::AcceptanceFell
        } else if lp_rise > self.max_lp_rise {
            CheckOutcome::StillClimbing
        } else if gradient_drift > self.max_gradient_drift {
            CheckOutcome::GradientDrift
        } else {
            CheckOutcome::Stationary
        };
        let end = iteration + 1;
        self.checks.push(WarmupCheck {
            end,
            outcome,
            divergences: self.check_divergences,
            mean_accept,
            lp_rise,
            gradient_drift,
            target_accept,
            step_size: stats.step_size,
        });
        self.before = Moments::default();
        self.check_lp = Moments::default();
        self.check_accept = 0.0;
        self.check_divergences = 0;
        self.check_gradient.reset();
        // A divergent check raises the target; at the highest target it re-estimates the metric.
        let raised = target_accept + (1.0 - target_accept) / 2.0;
        let (slow, target) = match outcome {
            CheckOutcome::Stationary => {
                self.end = Some(WarmupEnd::Stationary);
                return Next::Ended;
            }
            CheckOutcome::Divergent if target_accept < self.max_target_accept => {
                (0, raised.min(self.max_target_accept))
            }
            _ => (self.extension_window, target_accept),
        };
        let segment_end = end + slow + self.term_buffer;
        if segment_end + self.check_window > self.max_warmup {
            self.end = Some(WarmupEnd::Cap);
            return Next::Ended;
        }
        self.segment_end = segment_end;
        Next::Extend { slow, target }
    }
}

/// `sqrt(mean_i mean(g_i)² / var(g_i))` over the coordinates whose gradient moved; `f64::MAX`
/// when one never moved but pulled (a constant nonzero gradient). Finite, since the verdicts
/// are checkpointed as JSON, which has no infinities.
fn gradient_drift(gradients: &WelfordVariance) -> f64 {
    let (mut sum, mut count) = (0.0, 0usize);
    for (mean, var) in gradients.mean().iter().zip(gradients.variance()) {
        if var > 0.0 {
            sum += mean * mean / var;
            count += 1;
        } else if *mean != 0.0 {
            return f64::MAX;
        }
    }
    if count == 0 {
        0.0
    } else {
        (sum / count as f64).sqrt()
    }
}

/// `(mean_after − mean_before) / pooled sd`: ±`f64::MAX` for a change between two constant
/// windows, 0 when nothing changed (finite, for the JSON checkpoint).
fn standardized_rise(before: &Moments, after: &Moments) -> f64 {
    let change = after.mean - before.mean;
    let pooled = ((before.variance() + after.variance()) / 2.0).sqrt();
    if pooled > 0.0 {
        change / pooled
    } else if change == 0.0 {
        0.0
    } else {
        change.signum() * f64::MAX
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(log_density: f64, accept_stat: f64, divergent: bool) -> DrawStats {
        DrawStats {
            log_density,
            accept_stat,
            divergent,
            step_size: 0.1,
            ..DrawStats::default()
        }
    }

    fn warmup() -> StationaryWarmup {
        StationaryWarmup::new(
            &StationarityConfig::new()
                .with_check_window(4)
                .with_max_warmup(400),
            1,
            10,
            5,
        )
    }

    /// Feeds the segment's last iterations and a check window; returns the decision.
    fn check(state: &mut StationaryWarmup, before: &[f64], during: &[(f64, f64, bool)]) -> Next {
        let start = state.segment_end;
        for (i, &lp) in before.iter().enumerate() {
            state.observe_segment(start - before.len() + i, lp);
        }
        let mut next = Next::Continue;
        for (i, &(lp, accept, divergent)) in during.iter().enumerate() {
            next = state.observe_check(
                start + i,
                &[0.1 * (i as f64 - 1.5)],
                &stats(lp, accept, divergent),
                0.8,
            );
        }
        next
    }

    #[test]
    fn a_level_check_at_the_target_ends_the_warmup() {
        let mut state = warmup();
        assert_eq!(state.num_warmup(), 14);
        let next = check(
            &mut state,
            &[1.0, 2.0, 1.0, 2.0],
            &[
                (2.0, 0.8, false),
                (1.0, 0.9, false),
                (2.0, 0.75, false),
                (1.0, 0.8, false),
            ],
        );
        assert_eq!(next, Next::Ended);
        assert_eq!(state.end(), Some(WarmupEnd::Stationary));
        assert_eq!(state.num_warmup(), 14);
        assert_eq!(state.checks()[0].outcome, CheckOutcome::Stationary);
    }

    #[test]
    fn a_divergent_check_raises_the_target_and_retunes_the_step_size_only() {
        let mut state = warmup();
        let next = check(
            &mut state,
            &[1.0, 2.0, 1.0, 2.0],
            &[
                (2.0, 0.8, true),
                (1.0, 0.9, false),
                (2.0, 0.8, false),
                (1.0, 0.8, false),
            ],
        );
        assert_eq!(
            next,
            Next::Extend {
                slow: 0,
                target: 0.9
            }
        );
        // 14 + 5 (terminal buffer) + 4 (the next check).
        assert_eq!(state.num_warmup(), 23);
        assert_eq!(state.end(), None);
    }

    #[test]
    fn a_climbing_or_low_acceptance_check_adapts_the_metric_again() {
        let mut state = warmup();
        let climbing = check(
            &mut state,
            &[1.0, 2.0, 1.0, 2.0],
            &[
                (9.0, 0.8, false),
                (10.0, 0.8, false),
                (9.0, 0.8, false),
                (10.0, 0.8, false),
            ],
        );
        assert_eq!(
            climbing,
            Next::Extend {
                slow: 100,
                target: 0.8
            }
        );
        assert_eq!(state.checks()[0].outcome, CheckOutcome::StillClimbing);
        let mut state = warmup();
        let fell = check(
            &mut state,
            &[1.0, 2.0, 1.0, 2.0],
            &[
                (1.0, 0.5, false),
                (2.0, 0.6, false),
                (1.0, 0.7, false),
                (2.0, 0.6, false),
            ],
        );
        assert_eq!(state.checks()[0].outcome, CheckOutcome::AcceptanceFell);
        assert!(matches!(fell, Next::Extend { slow: 100, .. }));
    }

    #[test]
    fn a_failed_check_whose_extension_would_pass_the_cap_ends_the_warmup() {
        let mut state = StationaryWarmup::new(
            &StationarityConfig::new()
                .with_check_window(4)
                .with_max_warmup(20),
            1,
            10,
            5,
        );
        let next = check(
            &mut state,
            &[1.0, 2.0, 1.0, 2.0],
            &[
                (2.0, 0.8, true),
                (1.0, 0.8, false),
                (2.0, 0.8, false),
                (1.0, 0.8, false),
            ],
        );
        assert_eq!(next, Next::Ended);
        assert_eq!(state.end(), Some(WarmupEnd::Cap));
        assert_eq!(state.num_warmup(), 14);
    }

    #[test]
    fn a_gradient_that_keeps_pulling_one_way_fails_the_check() {
        let mut state = warmup();
        let start = state.segment_end;
        for i in 0..4 {
            state.observe_segment(start - 4 + i, 1.0 + (i % 2) as f64);
        }
        let mut next = Next::Continue;
        for i in 0..4 {
            let lp = 1.0 + (i % 2) as f64;
            // The same pull of −5 give or take 0.01.
            let gradient = [-5.0 + 0.01 * (i % 2) as f64];
            next = state.observe_check(start + i, &gradient, &stats(lp, 0.8, false), 0.8);
        }
        assert!(matches!(next, Next::Extend { slow: 100, .. }));
        assert_eq!(state.checks()[0].outcome, CheckOutcome::GradientDrift);
        assert!(state.checks()[0].gradient_drift > 100.0);
    }

    /// A chain that never moved in its check (every `log p` the same, a constant gradient) but
    /// sits above the window before: its verdict holds no infinity, so the state round-trips
    /// through the JSON checkpoint.
    #[test]
    fn extreme_verdicts_survive_the_json_checkpoint() {
        let mut state = warmup();
        let start = state.segment_end;
        for i in 0..4 {
            state.observe_segment(start - 4 + i, 1.0);
        }
        for i in 0..4 {
            state.observe_check(start + i, &[-5.0], &stats(3.0, 0.0, false), 0.8);
        }
        let check = &state.checks()[0];
        assert_eq!((check.lp_rise, check.gradient_drift), (f64::MAX, f64::MAX));
        let json = serde_json::to_string(&state).unwrap();
        let back: StationaryWarmup = serde_json::from_str(&json).unwrap();
        assert_eq!(back, state);
    }
}

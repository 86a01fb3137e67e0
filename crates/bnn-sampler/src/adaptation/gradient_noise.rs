//! SMILE's warmup: MCLMC's tuner for the step size (and `L`), plus a diagonal preconditioner
//! from the noise of the minibatch gradients (Sommer et al. 2026, "Can Microcanonical Langevin
//! Dynamics Leverage Mini-Batch Gradient Noise?", their `NOISYSMILE`).
//!
//! Each coordinate's gradient noise is estimated by exponentially weighted moments of the
//! minibatch gradients the chain sees: a mean `m ← (1 − β) m + β g` and a variance
//! `v ← (1 − β) v + β (g − m)²`, bias-corrected as Adam's. The preconditioner divides by the
//! noise scale `p = √v / rms(√v)` (clamped to `[1/bound, bound]`): coordinates whose gradient is
//! noisy move less and feel a damped force, so the noise the velocity receives is even across
//! coordinates. Where SMILE keeps adapting it throughout sampling, ours stops at the end of the
//! tuner's phase 1, so that phase 2 tunes the step size for the final preconditioner and the
//! sampling phase is one fixed (time-homogeneous) dynamics.

use serde::{Deserialize, Serialize};

use crate::adaptation::mclmc_tuner::MclmcTuner;
use crate::adaptation::TunedParams;
use crate::draw_stats::DrawStats;
use crate::kernels::MclmcConfig;
use crate::metric::DiagonalMassMatrix;

/// Exponentially weighted mean and variance of each coordinate of the minibatch gradient.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GradientNoise {
    /// β, the weight of the newest gradient.
    weight: f64,
    observed: usize,
    mean: Vec<f64>,
    variance: Vec<f64>,
}

impl GradientNoise {
    pub fn new(dim: usize, weight: f64) -> Self {
        Self {
            weight,
            observed: 0,
            mean: vec![0.0; dim],
            variance: vec![0.0; dim],
        }
    }

    /// Gradients observed so far.
    pub fn observed(&self) -> usize {
        self.observed
    }

    /// Takes one minibatch gradient.
    pub fn observe(&mut self, gradient: &[f64]) {
        self.observed += 1;
        let beta = self.weight;
        // Adam's bias correction of a mean that starts at zero.
        let correction = 1.0 - (1.0 - beta).powi(self.observed.min(1 << 20) as i32);
        for ((m, v), &g) in self.mean.iter_mut().zip(&mut self.variance).zip(gradient) {
            if !g.is_finite() {
                continue;
            }
            *m = (1.0 - beta) * *m + beta * g;
            let centred = g - *m / correction;
            *v = (1.0 - beta) * *v + beta * centred * centred;
        }
    }

    /// The preconditioner as an inverse mass matrix `diag(1 / p²)`, with `p` each coordinate's
    /// noise scale relative to the root mean square, clamped to `[1/bound, bound]`; `None` before
    /// any gradient or where every variance is zero.
    pub fn metric(&self, bound: f64) -> Option<DiagonalMassMatrix> {
        if self.observed == 0 {
            return None;
        }
        let correction = 1.0 - (1.0 - self.weight).powi(self.observed.min(1 << 20) as i32);
        let sd: Vec<f64> = self
            .variance
            .iter()
            .map(|v| (v / correction).max(0.0).sqrt())
            .collect();
        let rms = (sd.iter().map(|s| s * s).sum::<f64>() / sd.len() as f64).sqrt();
        if !(rms > 0.0 && rms.is_finite()) {
            return None;
        }
        let inverse_diag = sd
            .iter()
            .map(|s| {
                let p = (s / rms).clamp(1.0 / bound, bound);
                1.0 / (p * p)
            })
            .collect();
        DiagonalMassMatrix::new(inverse_diag).ok()
    }
}

/// One chain's SMILE warmup: [`MclmcTuner`] for ε and `L`, and the gradient-noise
/// preconditioner, refreshed every `refresh_every` steps until the end of phase 1.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SmileTuner {
    mclmc: MclmcTuner,
    /// `None`: SMILE without the noise preconditioner.
    noise: Option<GradientNoise>,
    /// The preconditioner is fixed from this warmup step on (the end of phase 1).
    freeze_at: usize,
    refresh_every: usize,
    bound: f64,
}

impl SmileTuner {
    /// `noise`: the preconditioner's smoothing weight β and its bound, or `None` for none.
    pub fn new(
        config: &MclmcConfig,
        num_warmup: usize,
        dim: usize,
        noise: Option<(f64, f64)>,
    ) -> Self {
        let freeze_at = (config.phase1_fraction * num_warmup as f64).round() as usize;
        let (weight, bound) = noise.unwrap_or((0.0, 1.0));
        Self {
            mclmc: MclmcTuner::new(config, num_warmup, dim),
            noise: noise.map(|_| GradientNoise::new(dim, weight)),
            freeze_at,
            // About one memory length of the moments (1/β steps) between refreshes.
            refresh_every: (1.0 / weight.max(1e-9)).round().clamp(1.0, 1000.0) as usize,
            bound,
        }
    }

    pub fn num_warmup(&self) -> usize {
        self.mclmc.num_warmup()
    }

    pub fn iteration(&self) -> usize {
        self.mclmc.iteration()
    }

    pub fn holds_positions(&self) -> bool {
        self.mclmc.holds_positions()
    }

    /// The step-size (and `L`) tuner underneath.
    pub fn mclmc(&self) -> &MclmcTuner {
        &self.mclmc
    }

    /// Observes one warmup transition: its position, the minibatch gradient there and its
    /// statistics; sets the parameters of the next.
    pub fn observe(
        &mut self,
        position: &[f64],
        gradient: &[f64],
        stats: &DrawStats,
        params: &mut TunedParams,
    ) {
        self.mclmc.observe(position, stats, params);
        let step = self.mclmc.iteration();
        let Some(noise) = self.noise.as_mut() else {
            return;
        };
        if step > self.freeze_at {
            return;
        }
        noise.observe(gradient);
        let due = step.is_multiple_of(self.refresh_every) || step == self.freeze_at;
        if due && noise.observed() >= self.refresh_every.min(self.freeze_at.max(1)) {
            if let Some(metric) = noise.metric(self.bound) {
                params.metric = metric;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn noise_scales_follow_the_gradients_spread() {
        // Coordinate 0 is noiseless, 1 has sd 1, 2 has sd 10 around a drifting mean.
        let mut noise = GradientNoise::new(3, 0.01);
        let mut state = 12345u64;
        let mut normal = || {
            // Box–Muller from a small LCG: enough for a test of scales.
            let mut uniform = || {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((state >> 11) as f64 + 0.5) / (1u64 << 53) as f64
            };
            let (u, v) = (uniform(), uniform());
            (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
        };
        for _ in 0..5000 {
            noise.observe(&[3.0, 5.0 + normal(), -2.0 + 10.0 * normal()]);
        }
        let metric = noise.metric(1e6).unwrap();
        let scale = metric.sqrt_inverse_diag();
        // p = sd / rms(sd) with rms = √((0 + 1 + 100)/3) ≈ 5.80: √Σ = 1/p.
        let rms = (101.0f64 / 3.0).sqrt();
        assert!((scale[1] - rms).abs() < 0.15 * rms, "{scale:?}");
        assert!(
            (scale[2] - rms / 10.0).abs() < 0.15 * rms / 10.0,
            "{scale:?}"
        );
        // The noiseless coordinate is clamped at the bound.
        assert!((scale[0] - 1e6).abs() < 1.0, "{scale:?}");
        let bounded = noise.metric(10.0).unwrap();
        assert!((bounded.sqrt_inverse_diag()[0] - 10.0).abs() < 1e-9);
    }
}

//! Per-draw statistics every kernel reports (the `info` of a transition).

use serde::{Deserialize, Serialize};

/// What one transition did. Adding a statistic means adding a field here.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DrawStats {
    /// `log p(q)` at the draw.
    pub log_density: f64,
    /// The adaptation statistic. HMC and random-walk Metropolis: the Metropolis acceptance
    /// probability `min(1, exp(H0 - H))`. NUTS: the mean of `min(1, exp(H0 - H))` over every
    /// leapfrog step of the trajectory (Stan's definition; Hoffman & Gelman 2014, §3.2.1).
    pub accept_stat: f64,
    /// Step size ε used (for random-walk Metropolis: the proposal scale multiplier).
    pub step_size: f64,
    /// NUTS: number of completed doublings; 0 for the other kernels.
    pub tree_depth: u32,
    /// Number of leapfrog steps (gradient evaluations) taken; 0 for random-walk Metropolis.
    pub n_leapfrog: u32,
    /// The energy error exceeded the divergence threshold or the log density was not finite or
    /// failed to evaluate; the trajectory was cut and the chain did not move there.
    pub divergent: bool,
    /// Hamiltonian `H = -log p(q) + ½ pᵀM⁻¹p` at the draw (random-walk Metropolis: `-log p(q)`),
    /// for the E-BFMI diagnostic.
    pub energy: f64,
    /// `H - H0` at the proposal: the end of the trajectory (HMC), the selected point (NUTS),
    /// `log p(q) - log p(q')` (random-walk Metropolis), or MCLMC's energy change of the step
    /// (kinetic change minus the change of `log p`, whose variance its tuner controls).
    pub energy_error: f64,
    /// MCLMC: the momentum decoherence length L the transition used; 0 for the other kernels.
    #[serde(default)]
    pub trajectory_length: f64,
    /// MSD: fixed-point iterations of the generalized leapfrog's two implicit equations (each
    /// one a metric evaluation); 0 for the other kernels.
    #[serde(default)]
    pub fixed_point_iterations: u32,
    /// Surrogate-gradient NUTS: true value-and-gradient evaluations of the transition (the
    /// monitor's fallback leaves); 0 for the other kernels, whose `n_leapfrog` counts them.
    #[serde(default)]
    pub true_gradients: u32,
    /// Surrogate-gradient NUTS: true value-only evaluations (one per surrogate leaf); 0 for the
    /// other kernels.
    #[serde(default)]
    pub true_densities: u32,
    /// Surrogate-gradient NUTS: evaluations of the surrogate's force; 0 for the other kernels.
    #[serde(default)]
    pub surrogate_gradients: u32,
}

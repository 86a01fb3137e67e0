//! Which transition kernel a run's chains use, and what the runner needs to know about it before
//! it builds one (acceptance target, default step size, whether the step-size search applies).

use bnn_config_derive::Config;

use crate::error::SamplerError;
use crate::kernels::{HmcConfig, MamsConfig, MclmcConfig, MsdConfig, NutsConfig, RandomWalkConfig};

/// Which transition kernel the chains use.
#[derive(Config, Debug)]
pub enum AlgorithmConfig {
    Nuts(NutsConfig),
    Hmc(HmcConfig),
    RandomWalk(RandomWalkConfig),
    Mclmc(MclmcConfig),
    Mams(MamsConfig),
    /// Manifold stochastic dynamics: needs a density with a metric ([`LogDensity::riemannian`]).
    Msd(MsdConfig),
}

impl AlgorithmConfig {
    pub(crate) fn validate(&self) -> Result<(), SamplerError> {
        match self {
            AlgorithmConfig::Nuts(config) => config.validate(),
            AlgorithmConfig::Hmc(config) => config.validate(),
            AlgorithmConfig::RandomWalk(config) => config.validate(),
            AlgorithmConfig::Mclmc(config) => config.validate(),
            AlgorithmConfig::Mams(config) => config.validate(),
            AlgorithmConfig::Msd(config) => config.validate(),
        }
    }

    /// The acceptance statistic the step-size adaptation aims for (MCLMC has none: its tuner
    /// aims at an energy-error variance; a fixed-step MCLMC run ignores this).
    pub fn target_accept(&self) -> f64 {
        match self {
            AlgorithmConfig::Nuts(config) => config.target_accept,
            AlgorithmConfig::Hmc(config) => config.target_accept,
            AlgorithmConfig::RandomWalk(config) => config.target_accept,
            AlgorithmConfig::Mclmc(_) => 0.5,
            AlgorithmConfig::Mams(config) => config.target_accept,
            AlgorithmConfig::Msd(config) => config.target_accept,
        }
    }

    /// Whether the kernel integrates Hamiltonian dynamics (and can use the step-size heuristic).
    pub fn uses_leapfrog(&self) -> bool {
        // MSD's leapfrog moves under its own metric, not the diagonal one the search would use.
        !matches!(
            self,
            AlgorithmConfig::RandomWalk(_)
                | AlgorithmConfig::Mclmc(_)
                | AlgorithmConfig::Mams(_)
                | AlgorithmConfig::Msd(_)
        )
    }

    /// The step size a chain starts from when none is given: 1 for the leapfrog kernels (then the
    /// heuristic search), `2.38/sqrt(D)` for random-walk Metropolis.
    pub fn default_step_size(&self, dim: usize) -> f64 {
        match self {
            AlgorithmConfig::RandomWalk(_) => RandomWalkConfig::default_scale(dim),
            AlgorithmConfig::Mclmc(config) => config.initial_step_size,
            AlgorithmConfig::Mams(_) => MamsConfig::start_parameters(dim).0,
            AlgorithmConfig::Msd(config) => config.initial_step_size,
            _ => 1.0,
        }
    }
}

impl From<NutsConfig> for AlgorithmConfig {
    fn from(config: NutsConfig) -> Self {
        AlgorithmConfig::Nuts(config)
    }
}

impl From<HmcConfig> for AlgorithmConfig {
    fn from(config: HmcConfig) -> Self {
        AlgorithmConfig::Hmc(config)
    }
}

impl From<MclmcConfig> for AlgorithmConfig {
    fn from(config: MclmcConfig) -> Self {
        AlgorithmConfig::Mclmc(config)
    }
}

impl From<MamsConfig> for AlgorithmConfig {
    fn from(config: MamsConfig) -> Self {
        AlgorithmConfig::Mams(config)
    }
}

impl From<MsdConfig> for AlgorithmConfig {
    fn from(config: MsdConfig) -> Self {
        AlgorithmConfig::Msd(config)
    }
}

impl From<RandomWalkConfig> for AlgorithmConfig {
    fn from(config: RandomWalkConfig) -> Self {
        AlgorithmConfig::RandomWalk(config)
    }
}

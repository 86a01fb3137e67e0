//! Reading a `[sampler]` section written before each sampler's settings moved into
//! `[sampler.algorithm]` (run directories made before then hold such a `config.toml`): the flat
//! keys (`max_depth`, `leapfrog_steps`, `persistence`, ...) become the settings of the sampler
//! `algorithm` names, exactly as the runs that wrote them built their sampler, so an old run
//! directory resumes (its draws go on bit for bit) and is written back in the current shape.

use crate::config::kernel_settings::{KernelSettings, MCLMC_START_TRAJECTORY_LENGTH};
use crate::config::run_config::{Init, RunConfig, SamplerSection};
use anyhow::{bail, Result};
use bnn_sampler::SamplerSettings;
use bnn_sampler::{
    AlgorithmConfig, HmcConfig, MamsConfig, MclmcConfig, MetricEstimate, MsdConfig, NutsConfig,
    RandomWalkConfig, StepSizeSearch,
};
use burn::config::Config;
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// The keys only the flat shape has, each with where its value lives now.
pub(crate) const LEGACY_KEYS: [(&str, &str); 13] = [
    ("target_accept", "target_accept"),
    ("max_depth", "max_tree_depth (nuts)"),
    ("leapfrog_steps", "num_steps (hmc)"),
    ("trajectory_length", "initial_trajectory_length (mclmc)"),
    ("energy_variance_start", "energy_variance_start (mclmc)"),
    ("energy_variance_end", "energy_variance_end (mclmc)"),
    (
        "tune_fractions",
        "phase1_fraction, phase2_fraction (mclmc) or tune_fractions (mams)",
    ),
    (
        "trajectory_length_factor",
        "trajectory_length_factor (mclmc, mams)",
    ),
    (
        "diagonal_preconditioning",
        "diagonal_preconditioning (mclmc, mams)",
    ),
    ("persistence", "persistence (msd)"),
    ("frozen_metric", "frozen_metric (msd)"),
    ("fixed_point_tolerance", "fixed_point_tolerance (msd)"),
    (
        "max_fixed_point_iterations",
        "max_fixed_point_iterations (msd)",
    ),
];

/// `[sampler]` as it was written before the sampler's own settings moved to
/// `[sampler.algorithm]`: every kernel's knobs flat beside the budget.
#[derive(Config, Debug)]
pub(crate) struct LegacySamplerSection {
    #[config(default = "String::from(\"nuts\")")]
    pub algorithm: String,
    #[config(default = "Init::Ensemble")]
    pub init: Init,
    /// The pre-trained network of `init = "single"` (safetensors).
    pub init_from: Option<PathBuf>,
    /// Number of chains; absent: one per ensemble member.
    pub chains: Option<usize>,
    #[config(default = 100)]
    pub warmup: usize,
    #[config(default = 1000)]
    pub draws: usize,
    /// Absent: 0.8 for NUTS/HMC, 0.234 for random-walk Metropolis.
    pub target_accept: Option<f64>,
    #[config(default = 10)]
    pub max_depth: usize,
    /// HMC: leapfrog steps per transition (`--num-steps`).
    #[config(default = 32)]
    pub leapfrog_steps: usize,
    /// Step size ε. With `adapt = false` every chain keeps it; otherwise the warmup starts its
    /// search from it. Absent: the heuristic search from 1 (MCLMC's tuner starts from 0.005,
    /// MAMS's from 0.2 √D).
    pub step_size: Option<f64>,
    /// MCLMC: the decoherence length L the warmup starts from (kept with `adapt = false`).
    /// Absent: 1 (`MCLMC_START_TRAJECTORY_LENGTH`; BlackJAX and MILE start from max(√D, 15)).
    pub trajectory_length: Option<f64>,
    /// MCLMC: target variance of the energy change per dimension at the warmup's start, falling
    /// linearly to `energy_variance_end` over its phases 1 and 2 (MILE's code: 5e-4 → 1e-4).
    #[config(default = 5e-4)]
    pub energy_variance_start: f64,
    #[config(default = 1e-4)]
    pub energy_variance_end: f64,
    /// MCLMC: shares of the warmup in phases 1 (ε), 2 (ε and L from the variances) and 3 (L from
    /// the ESS), summing to 1; absent: 0.8, 0.1, 0.1. MAMS: four shares (ε; ε and variances; ε
    /// under the new preconditioner; L from the ESS); absent: 0.3, 0.2, 0.3, 0.2.
    pub tune_fractions: Option<Vec<f64>>,
    /// MSD: `cos α` of the momentum refresh (0: a fresh momentum every iteration). Absent: 0.95.
    pub persistence: Option<f64>,
    /// MSD: Zlochin & Baram's cheap integrator (metric frozen within the step; approximate,
    /// biased) instead of the exact generalized leapfrog.
    #[config(default = false)]
    pub frozen_metric: bool,
    /// MSD: convergence tolerance of the implicit steps' fixed-point iterations.
    #[config(default = 1e-9)]
    pub fixed_point_tolerance: f64,
    /// MSD: fixed-point iterations per implicit equation before a step counts as divergent.
    #[config(default = 100)]
    pub max_fixed_point_iterations: usize,
    /// MCLMC and MAMS: the last warmup phase sets L = factor · (ε or L) · mean(steps / ESS).
    #[config(default = 0.4)]
    pub trajectory_length_factor: f64,
    /// MCLMC and MAMS: precondition the dynamics with the warmup positions' standard deviations
    /// (BlackJAX's option; MILE runs without). Absent: on.
    pub diagonal_preconditioning: Option<bool>,
    /// Adapt the step size and the diagonal metric during warmup. `false`: fixed-step sampling
    /// with `step_size` and the identity metric, the warmup iterations a discarded burn-in.
    #[config(default = true)]
    pub adapt: bool,
    /// Keep every `thin`-th draw on disk.
    #[config(default = 1)]
    pub thin: usize,
    #[config(default = 0)]
    pub seed: u64,
    /// Advance all chains in lockstep with one `[C, D]` gradient call per leapfrog step.
    #[config(default = false)]
    pub batched: bool,
    /// Save every chain's state every this many iterations (0: only at the end or on a stop).
    #[config(default = 50)]
    pub checkpoint_every: usize,
    /// Stop a chain once its expanding-window test LPPD has converged (Sommer et al. Eq. 9).
    #[config(default = false)]
    pub early_stop: bool,
    #[config(default = 100)]
    pub early_stop_window: usize,
    #[config(default = 1e-3)]
    pub early_stop_tolerance: f64,
    /// The warmup's step-size search (NUTS, HMC): `stan` (Hoffman & Gelman's level ½, one
    /// momentum) or `target` (NumPyro's: level at the target acceptance, fresh momenta).
    #[config(default = "StepSizeSearch::Stan")]
    pub step_size_search: StepSizeSearch,
    /// The warmup's metric estimate (NUTS, HMC): `draws` (Stan's regularized variance) or
    /// `draws_and_gradients` (nutpie's `sqrt(Var[θ] / Var[∇ log p])`).
    #[config(default = "MetricEstimate::Draws")]
    pub metric_estimate: MetricEstimate,
}

impl LegacySamplerSection {
    /// The current section these flat settings describe.
    pub(crate) fn into_current(self) -> Result<SamplerSection> {
        let target = self.target_accept;
        let name = self.algorithm.as_str();
        if name == MclmcConfig::NAME && target.is_some() {
            bail!("--target-accept (config key `target_accept`): MCLMC has no acceptance target; its warmup aims at an energy-error variance (--energy-variance-start/--energy-variance-end)");
        }
        if name != MsdConfig::NAME && (self.persistence.is_some() || self.frozen_metric) {
            bail!("--persistence and --frozen-metric (config keys `persistence`, `frozen_metric`) are MSD's settings (--sampler msd), not {name}'s");
        }
        if let (true, Some(fractions)) = (name == MclmcConfig::NAME, &self.tune_fractions) {
            check_mclmc_fractions(fractions)?;
        }
        let algorithm: AlgorithmConfig = match self.algorithm.as_str() {
            "nuts" => {
                // A file that names no target gets today's (a run directory's old default
                // is restored by `RunDir::load_config`).
                NutsConfig::new()
                    .with_max_tree_depth(self.max_depth as u32)
                    .with_target_accept(
                        target.unwrap_or(super::run_defaults::FLAGSHIP.target_accept),
                    )
                    .into()
            }
            "hmc" => {
                // A fixed-step run takes exactly L steps, however many (the kernel's default cap is 1024).
                let c = HmcConfig::new()
                    .with_num_steps(self.leapfrog_steps)
                    .with_max_num_steps(self.leapfrog_steps.max(1024));
                match target {
                    Some(t) => c.with_target_accept(t),
                    None => c,
                }
                .into()
            }
            "rwm" => match target {
                Some(t) => RandomWalkConfig::new().with_target_accept(t),
                None => RandomWalkConfig::new(),
            }
            .into(),
            "mclmc" => {
                let defaults = MclmcConfig::new();
                let fraction = |i: usize, default: f64| {
                    self.tune_fractions
                        .as_ref()
                        .map_or(default, |f| f.get(i).copied().unwrap_or(0.0))
                };
                MclmcConfig::new()
                    .with_initial_trajectory_length(Some(
                        self.trajectory_length
                            .unwrap_or(MCLMC_START_TRAJECTORY_LENGTH),
                    ))
                    .with_energy_variance_start(self.energy_variance_start)
                    .with_energy_variance_end(self.energy_variance_end)
                    .with_phase1_fraction(fraction(0, defaults.phase1_fraction))
                    .with_phase2_fraction(fraction(1, defaults.phase2_fraction))
                    .with_trajectory_length_factor(self.trajectory_length_factor)
                    .with_diagonal_preconditioning(self.diagonal_preconditioning.unwrap_or(true))
                    .into()
            }
            "mams" => {
                let mut c =
                    MamsConfig::new().with_trajectory_length_factor(self.trajectory_length_factor);
                if let Some(precondition) = self.diagonal_preconditioning {
                    c = c.with_diagonal_preconditioning(precondition);
                }
                if let Some(fractions) = &self.tune_fractions {
                    c = c.with_tune_fractions(fractions.clone());
                }
                match target {
                    Some(t) => c.with_target_accept(t),
                    None => c,
                }
                .into()
            }
            "msd" => {
                let mut c = MsdConfig::new()
                    .with_frozen_metric(self.frozen_metric)
                    .with_fixed_point_tolerance(self.fixed_point_tolerance)
                    .with_max_fixed_point_iterations(self.max_fixed_point_iterations);
                if let Some(persistence) = self.persistence {
                    c = c.with_persistence(persistence);
                }
                match target {
                    Some(t) => c.with_target_accept(t),
                    None => c,
                }
                .into()
            }
            other => bail!(
                "`algorithm` in [sampler]: unknown sampler `{other}`; the samplers are {}",
                AlgorithmConfig::NAMES.join(", ")
            ),
        };
        // A run directory in the old shape predates the warmup policies and reads as the fixed
        // one (`RunDir::load_config`); a config file for a new run gets today's default.
        let defaults = SamplerSection::new();
        Ok(SamplerSection {
            algorithm: KernelSettings(algorithm),
            init: self.init,
            init_from: self.init_from,
            chains: self.chains,
            warmup: self.warmup,
            draws: self.draws,
            step_size: self.step_size,
            adapt: self.adapt,
            thin: self.thin,
            seed: self.seed,
            batched: self.batched,
            checkpoint_every: self.checkpoint_every,
            early_stop: self.early_stop,
            early_stop_window: self.early_stop_window,
            early_stop_tolerance: self.early_stop_tolerance,
            step_size_search: self.step_size_search,
            metric_estimate: self.metric_estimate,
            warmup_policy: defaults.warmup_policy,
            warmup_check: defaults.warmup_check,
            max_warmup: defaults.max_warmup,
        })
    }
}

/// MCLMC's warmup shares as one list: three, in [0, 1], summing to 1 (the flag's and the old
/// key's form; `[sampler.algorithm]` holds the first two as `phase1_fraction`, `phase2_fraction`).
pub fn check_mclmc_fractions(fractions: &[f64]) -> Result<()> {
    let sum: f64 = fractions.iter().sum();
    if fractions.len() != 3
        || fractions.iter().any(|f| !(0.0..=1.0).contains(f))
        || (sum - 1.0).abs() > 1e-9
    {
        bail!("--tune-fractions (config key `tune_fractions`) must be three shares in [0, 1] summing to 1 (phases 1, 2, 3 of the MCLMC warmup), got {fractions:?}");
    }
    Ok(())
}

/// The config hash a shard's `shard.json` recorded when `config.toml` (at `path`) was written
/// in the flat shape: SHA-256 of the `Debug` text of that version's sampling identity, whose
/// sampler section printed as `SamplerSection { algorithm: Nuts, .. }`. `None` for a file in
/// the current shape or one that does not read.
pub fn legacy_config_hash(path: &Path) -> Option<String> {
    use sha2::{Digest, Sha256};
    let text = std::fs::read_to_string(path).ok()?;
    let mut table: toml::Table = toml::from_str(&text).ok()?;
    let sampler = table.remove("sampler")?;
    let flat = sampler
        .as_table()?
        .keys()
        .any(|key| LEGACY_KEYS.iter().any(|(old, _)| old == key));
    if !flat {
        return None;
    }
    let legacy = LegacySamplerSection::deserialize(sampler)
        .ok()?
        .with_checkpoint_every(0);
    let config = RunConfig::from_toml_file(path).ok()?;
    let variant = match legacy.algorithm.as_str() {
        "nuts" => "Nuts",
        "hmc" => "Hmc",
        "rwm" => "Rwm",
        "mclmc" => "Mclmc",
        "mams" => "Mams",
        "msd" => "Msd",
        _ => return None,
    };
    let sampler = format!("{legacy:?}")
        .replacen("LegacySamplerSection {", "SamplerSection {", 1)
        .replacen(
            &format!("algorithm: {:?}", legacy.algorithm),
            &format!("algorithm: {variant}"),
            1,
        );
    let device = config
        .device_name()
        .map(|d| d.concrete().to_string())
        .unwrap_or_default();
    let identity = format!(
        "({:?}, {:?}, {:?}, {sampler}, {device:?})",
        config.data, config.model, config.ensemble
    );
    let digest = Sha256::digest(identity.as_bytes());
    Some(digest.iter().map(|b| format!("{b:02x}")).collect())
}

//! The complete, resolved configuration of a run: defaults, then a `--config run.toml`, then
//! command-line flags. Every run directory keeps it as `config.toml`, so a run can be repeated,
//! resumed, predicted from and evaluated without restating any option.

use crate::model_args::{parse_hidden, parse_layer_prior, parse_likelihood};
use anyhow::{anyhow, bail, Context, Result};
use bnn_model::{Activation, BnnConfig, DeviceName, GradientPath, Prior, PriorSpec};
use clap::{Args, ValueEnum};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Transition kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Algorithm {
    /// No-U-turn sampler (multinomial, generalized U-turn criterion).
    Nuts,
    /// Hamiltonian Monte Carlo with a fixed number of leapfrog steps.
    Hmc,
    /// Random-walk Metropolis (a baseline).
    Rwm,
}

/// Where the chains start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Init {
    /// DEI-MCMC: chain j starts at deep-ensemble member j (mod M).
    Ensemble,
    /// Every chain starts at one pre-trained network (`init_from`, a safetensors file).
    Single,
    /// Random initialization U(±1/sqrt(fan_in)), one stream per chain.
    Cold,
}

/// How features and targets are standardized.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Standardize {
    /// Statistics of the training split only (no test information leaks).
    Train,
    /// Statistics of the full data set (what the DEI-MCMC reference code does).
    Full,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DataSection {
    /// A benchmark name (concrete, ...), a generator (cos2x, robot-arm) or a CSV file.
    pub dataset: String,
    pub split_seed: u64,
    pub test_fraction: f64,
    /// Share of all rows held out (from the training part) for the members' early stopping (0: none).
    pub validation_fraction: f64,
    pub standardize: Standardize,
}

impl Default for DataSection {
    fn default() -> Self {
        Self {
            dataset: "cos2x".into(),
            split_seed: 0,
            test_fraction: bnn_data::DEFAULT_TEST_FRACTION,
            validation_fraction: 0.0,
            standardize: Standardize::Train,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ModelSection {
    pub hidden: Vec<usize>,
    pub activation: String,
    pub likelihood: String,
    pub targets: usize,
    pub prior: String,
    /// `<layer>=<weight prior>[/<bias prior>]` entries.
    pub layer_priors: Vec<String>,
}

impl ModelSection {
    /// The network and likelihood for data with `d_input` features; errors name the bad setting.
    pub fn bnn_config(&self, d_input: usize) -> Result<BnnConfig> {
        let prior: Prior = self.prior.parse().map_err(|e: String| anyhow!("prior: {e}"))?;
        let mut spec = PriorSpec::uniform(prior);
        for text in &self.layer_priors {
            let (layer, lp) = parse_layer_prior(text)?;
            spec = spec.with_layer(layer, lp);
        }
        let activation: Activation = self.activation.parse().map_err(|e: String| anyhow!("activation: {e}"))?;
        let config = BnnConfig::new(d_input)
            .with_hidden(self.hidden.clone())
            .with_activation(activation)
            .with_likelihood(parse_likelihood(&self.likelihood)?)
            .with_n_targets(self.targets)
            .with_prior(spec);
        config.validate().map_err(|e| anyhow!(e))?;
        Ok(config)
    }
}

impl Default for ModelSection {
    fn default() -> Self {
        Self {
            hidden: vec![16, 16],
            activation: "relu".into(),
            likelihood: "hetero".into(),
            targets: 1,
            prior: "normal:1".into(),
            layer_priors: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EnsembleSection {
    pub members: usize,
    /// Full-batch Adam steps, or with `batch_size` the maximum number of epochs.
    pub epochs: usize,
    pub learning_rate: f64,
    pub weight_decay: f64,
    /// AdamW's decoupled decay instead of L2 added to the gradient.
    pub decoupled_weight_decay: bool,
    /// Minibatch size; absent: full batch.
    pub batch_size: Option<usize>,
    /// Early stopping after this many epochs without validation improvement (needs
    /// `data.validation_fraction > 0`).
    pub patience: Option<usize>,
}

impl Default for EnsembleSection {
    /// The DEI-MCMC reference recipe: 5000 full-batch Adam steps, lr 1e-3, L2 1e-2.
    fn default() -> Self {
        Self {
            members: 12,
            epochs: 5000,
            learning_rate: 1e-3,
            weight_decay: 1e-2,
            decoupled_weight_decay: false,
            batch_size: None,
            patience: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SamplerSection {
    pub algorithm: Algorithm,
    pub init: Init,
    /// The pre-trained network of `init = "single"` (safetensors).
    pub init_from: Option<PathBuf>,
    /// Number of chains; absent: one per ensemble member.
    pub chains: Option<usize>,
    pub warmup: usize,
    pub draws: usize,
    /// Absent: 0.8 for NUTS/HMC, 0.234 for random-walk Metropolis.
    pub target_accept: Option<f64>,
    pub max_depth: usize,
    pub leapfrog_steps: usize,
    /// Keep every `thin`-th draw on disk.
    pub thin: usize,
    pub seed: u64,
    /// Advance all chains in lockstep with one `[C, D]` gradient call per leapfrog step.
    pub batched: bool,
    /// Save every chain's state every this many iterations (0: only at the end or on Ctrl-C).
    pub checkpoint_every: usize,
    /// Stop a chain once its expanding-window test LPPD has converged (Sommer et al. Eq. 9).
    pub early_stop: bool,
    pub early_stop_window: usize,
    pub early_stop_tolerance: f64,
}

impl Default for SamplerSection {
    fn default() -> Self {
        Self {
            algorithm: Algorithm::Nuts,
            init: Init::Ensemble,
            init_from: None,
            chains: None,
            warmup: 100,
            draws: 1000,
            target_accept: None,
            max_depth: 10,
            leapfrog_steps: 32,
            thin: 1,
            seed: 0,
            batched: false,
            checkpoint_every: 50,
            early_stop: false,
            early_stop_window: 100,
            early_stop_tolerance: 1e-3,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RuntimeSection {
    pub device: String,
    /// Worker threads; absent: all cores. Results do not depend on it.
    pub threads: Option<usize>,
    /// How the posterior's gradient is computed (`auto`: the fused operation).
    pub gradient: GradientPath,
}

impl Default for RuntimeSection {
    fn default() -> Self {
        Self { device: "cpu".into(), threads: None, gradient: GradientPath::Auto }
    }
}

/// Everything a run needs, as written to `config.toml`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RunConfig {
    pub data: DataSection,
    pub model: ModelSection,
    pub ensemble: EnsembleSection,
    pub sampler: SamplerSection,
    pub runtime: RuntimeSection,
}

/// Command-line flags; each one present overrides the config file and the defaults.
#[derive(Args, Debug, Clone, Default)]
pub struct RunFlags {
    /// A TOML file with any of the sections [data], [model], [ensemble], [sampler], [runtime].
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// A benchmark name (concrete, ...), a generator (cos2x, robot-arm) or a CSV file.
    #[arg(long)]
    pub dataset: Option<String>,
    /// Seed of the random train/test split (and of generated data).
    #[arg(long)]
    pub split_seed: Option<u64>,
    /// Share of the rows held out as test set [default: 0.2].
    #[arg(long)]
    pub test_fraction: Option<f64>,
    /// Share of all rows held out (from the training part) as a validation set for early stopping
    /// of the members [default: 0, or 0.1 with --mile].
    #[arg(long)]
    pub validation_fraction: Option<f64>,
    #[arg(long, value_enum)]
    pub standardize: Option<Standardize>,
    /// Hidden layer widths, comma separated ("" for a linear model).
    #[arg(long)]
    pub hidden: Option<String>,
    /// tanh, relu, leaky_relu, sigmoid, silu, trunc_relu or identity.
    #[arg(long)]
    pub activation: Option<String>,
    /// hetero (σ = exp(o)), hetero-softplus, fixed:<σ>, learned-sigma[:<mean>,<sd>] or categorical:<K>.
    #[arg(long)]
    pub likelihood: Option<String>,
    /// Number of regression targets the network predicts (the data must have as many) [default: 1].
    #[arg(long)]
    pub targets: Option<usize>,
    /// Prior of every weight and bias: normal:<s>, laplace:<b> or fan_in_normal:<s>.
    #[arg(long)]
    pub prior: Option<String>,
    /// Per-layer prior, repeatable: <layer>=<weight prior>[/<bias prior>].
    #[arg(long = "layer-prior")]
    pub layer_priors: Vec<String>,
    /// Ensemble members M [default: 12].
    #[arg(long)]
    pub members: Option<usize>,
    /// Full-batch Adam steps per member (with --batch-size: maximum epochs) [default: 5000].
    #[arg(long)]
    pub epochs: Option<usize>,
    /// Adam's learning rate [default: 1e-3].
    #[arg(long)]
    pub learning_rate: Option<f64>,
    /// Weight decay of the members [default: 1e-2, coupled L2].
    #[arg(long)]
    pub weight_decay: Option<f64>,
    /// Use AdamW's decoupled weight decay.
    #[arg(long)]
    pub decoupled_weight_decay: Option<bool>,
    /// Minibatch size of the members' training [default: full batch].
    #[arg(long)]
    pub batch_size: Option<usize>,
    /// Stop a member after this many epochs without validation improvement.
    #[arg(long)]
    pub patience: Option<usize>,
    /// The MILE recipe: AdamW lr 1e-3, wd 1e-3, batch 32, ≤500 epochs, patience 10 on a 10%
    /// validation split (other flags still override its parts).
    #[arg(long)]
    pub mile: bool,
    /// Transition kernel.
    #[arg(long, value_enum)]
    pub sampler: Option<Algorithm>,
    /// Chain starting points.
    #[arg(long, value_enum)]
    pub init: Option<Init>,
    /// The network every chain starts from with --init single (safetensors, as `bnn train` writes).
    #[arg(long)]
    pub init_from: Option<PathBuf>,
    /// Number of chains (default: one per ensemble member).
    #[arg(long)]
    pub chains: Option<usize>,
    /// Warmup (adaptation) iterations per chain [default: 100].
    #[arg(long)]
    pub warmup: Option<usize>,
    /// Draws per chain [default: 1000].
    #[arg(long)]
    pub draws: Option<usize>,
    /// Target acceptance statistic (≈0.45 suits ReLU nets, whose leapfrog error is first order).
    #[arg(long)]
    pub target_accept: Option<f64>,
    /// NUTS: maximum tree depth [default: 10].
    #[arg(long)]
    pub max_depth: Option<usize>,
    /// HMC: leapfrog steps per draw.
    #[arg(long)]
    pub leapfrog_steps: Option<usize>,
    /// Keep every k-th draw.
    #[arg(long)]
    pub thin: Option<usize>,
    /// Seed of the members' initializations and of the chains' random streams.
    #[arg(long)]
    pub seed: Option<u64>,
    /// NUTS/HMC: advance all chains in lockstep with one batched gradient call per leapfrog step
    /// (the GPU-friendly mode; the same draws as running the chains apart).
    #[arg(long)]
    pub batched: Option<bool>,
    /// Save every chain's state every N iterations (0: only at the end and on Ctrl-C) [default: 50].
    #[arg(long)]
    pub checkpoint_every: Option<usize>,
    /// Stop each chain once its expanding-window test LPPD has converged.
    #[arg(long)]
    pub early_stop: Option<bool>,
    /// ϖ: how many of the latest cumulative LPPD values are averaged [default: 100].
    #[arg(long)]
    pub early_stop_window: Option<usize>,
    /// ε: the largest accepted distance of that average from the latest value [default: 1e-3].
    #[arg(long)]
    pub early_stop_tolerance: Option<f64>,
    /// ndarray, flex, wgpu or cpu.
    #[arg(long)]
    pub device: Option<String>,
    /// Worker threads (the results do not depend on it).
    #[arg(long)]
    pub threads: Option<usize>,
    /// auto (the fused operation: host kernel on CPU devices, tensor operations + CubeCL
    /// kernels on wgpu), tensor_ops (that program on every device) or plain (Burn's graph).
    #[arg(long)]
    pub gradient: Option<GradientPath>,
}

fn set<T: Clone>(target: &mut T, value: &Option<T>) {
    if let Some(v) = value {
        *target = v.clone();
    }
}

impl RunConfig {
    /// Reads a TOML config; unknown keys are errors (a typo must not be ignored silently).
    pub fn from_toml_file(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading config {}", path.display()))?;
        toml::from_str(&text).map_err(|e| anyhow!("config {}: {e}", path.display()))
    }

    pub fn to_toml(&self) -> String {
        toml::to_string_pretty(self).expect("a RunConfig always serializes")
    }

    /// Defaults, then `flags.config`, then the flags.
    pub fn resolve(flags: &RunFlags) -> Result<Self> {
        let base = match &flags.config {
            Some(path) => Self::from_toml_file(path)?,
            None => Self::default(),
        };
        base.with_flags(flags)
    }

    /// This config with every flag that is present applied on top.
    pub fn with_flags(mut self, f: &RunFlags) -> Result<Self> {
        if f.mile {
            self.ensemble.decoupled_weight_decay = true;
            self.ensemble.learning_rate = 1e-3;
            self.ensemble.weight_decay = 1e-3;
            self.ensemble.batch_size = Some(32);
            self.ensemble.epochs = 500;
            self.ensemble.patience = Some(10);
            if self.data.validation_fraction == 0.0 {
                self.data.validation_fraction = 0.1;
            }
        }
        let d = &mut self.data;
        set(&mut d.dataset, &f.dataset);
        set(&mut d.split_seed, &f.split_seed);
        set(&mut d.test_fraction, &f.test_fraction);
        set(&mut d.validation_fraction, &f.validation_fraction);
        set(&mut d.standardize, &f.standardize);
        let m = &mut self.model;
        if let Some(hidden) = &f.hidden {
            m.hidden = parse_hidden(hidden)?;
        }
        set(&mut m.activation, &f.activation);
        set(&mut m.likelihood, &f.likelihood);
        set(&mut m.targets, &f.targets);
        set(&mut m.prior, &f.prior);
        if !f.layer_priors.is_empty() {
            m.layer_priors = f.layer_priors.clone();
        }
        let e = &mut self.ensemble;
        set(&mut e.members, &f.members);
        set(&mut e.epochs, &f.epochs);
        set(&mut e.learning_rate, &f.learning_rate);
        set(&mut e.weight_decay, &f.weight_decay);
        set(&mut e.decoupled_weight_decay, &f.decoupled_weight_decay);
        if f.batch_size.is_some() {
            e.batch_size = f.batch_size;
        }
        if f.patience.is_some() {
            e.patience = f.patience;
        }
        let s = &mut self.sampler;
        set(&mut s.algorithm, &f.sampler);
        set(&mut s.init, &f.init);
        if f.init_from.is_some() {
            s.init_from = f.init_from.clone();
            if f.init.is_none() {
                s.init = Init::Single;
            }
        }
        if f.chains.is_some() {
            s.chains = f.chains;
        }
        set(&mut s.warmup, &f.warmup);
        set(&mut s.draws, &f.draws);
        if f.target_accept.is_some() {
            s.target_accept = f.target_accept;
        }
        set(&mut s.max_depth, &f.max_depth);
        set(&mut s.leapfrog_steps, &f.leapfrog_steps);
        set(&mut s.thin, &f.thin);
        set(&mut s.seed, &f.seed);
        set(&mut s.batched, &f.batched);
        set(&mut s.checkpoint_every, &f.checkpoint_every);
        set(&mut s.early_stop, &f.early_stop);
        set(&mut s.early_stop_window, &f.early_stop_window);
        set(&mut s.early_stop_tolerance, &f.early_stop_tolerance);
        set(&mut self.runtime.device, &f.device);
        if f.threads.is_some() {
            self.runtime.threads = f.threads;
        }
        set(&mut self.runtime.gradient, &f.gradient);
        self.validate()?;
        Ok(self)
    }

    /// Rejects impossible settings before anything runs or is written.
    pub fn validate(&self) -> Result<()> {
        let d = &self.data;
        if !(d.test_fraction > 0.0 && d.test_fraction < 1.0) {
            bail!("test_fraction must lie in (0, 1), got {}", d.test_fraction);
        }
        if !(0.0..0.9).contains(&d.validation_fraction) {
            bail!("validation_fraction must lie in [0, 0.9), got {}", d.validation_fraction);
        }
        let e = &self.ensemble;
        if e.members == 0 || e.epochs == 0 {
            bail!("the ensemble needs at least one member and one epoch (got members {}, epochs {})", e.members, e.epochs);
        }
        if e.batch_size == Some(0) {
            bail!("batch_size must be positive");
        }
        if e.patience.is_some() && d.validation_fraction == 0.0 {
            bail!("early stopping of the members (patience) needs a validation split: set --validation-fraction");
        }
        let s = &self.sampler;
        if s.chains == Some(0) || s.draws == 0 {
            bail!("chains and draws must be positive");
        }
        if s.thin == 0 {
            bail!("thin must be at least 1");
        }
        if s.init == Init::Single && s.init_from.is_none() {
            bail!("init = single needs init_from (--init-from <member.safetensors>)");
        }
        if s.early_stop && (s.early_stop_window == 0 || !(s.early_stop_tolerance > 0.0)) {
            bail!("early stopping needs a positive window and tolerance");
        }
        if self.runtime.threads == Some(0) {
            bail!("threads must be at least 1");
        }
        self.device_name()?;
        self.bnn_config(1)?;
        Ok(())
    }

    pub fn device_name(&self) -> Result<DeviceName> {
        self.runtime.device.parse::<DeviceName>().map_err(|e| anyhow!(e))
    }

    /// Number of chains: as configured, or one per ensemble member.
    pub fn chains(&self) -> usize {
        self.sampler.chains.unwrap_or(self.ensemble.members)
    }

    pub fn threads(&self) -> usize {
        self.runtime.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
    }

    /// The network and likelihood for data with `d_input` features.
    pub fn bnn_config(&self, d_input: usize) -> Result<BnnConfig> {
        self.model.bnn_config(d_input)
    }

    /// The settings that decide the draws: a run directory may only be resumed with these equal.
    pub fn sampling_identity(&self) -> (DataSection, ModelSection, EnsembleSection, SamplerSection, String) {
        let mut sampler = self.sampler.clone();
        // How often state is saved does not change the draws.
        sampler.checkpoint_every = 0;
        (self.data.clone(), self.model.clone(), self.ensemble.clone(), sampler, self.device_name().map(|d| d.concrete().to_string()).unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_override_file_which_overrides_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.toml");
        std::fs::write(&path, "[data]\ndataset = \"concrete\"\n[sampler]\ndraws = 300\nwarmup = 50\n").unwrap();
        let flags = RunFlags { config: Some(path), warmup: Some(7), ..RunFlags::default() };
        let config = RunConfig::resolve(&flags).unwrap();
        assert_eq!(config.data.dataset, "concrete");
        assert_eq!(config.sampler.draws, 300);
        assert_eq!(config.sampler.warmup, 7);
        assert_eq!(config.ensemble.members, 12);
        // The written config reads back to the same value.
        let again: RunConfig = toml::from_str(&config.to_toml()).unwrap();
        assert_eq!(again, config);
    }

    #[test]
    fn typos_and_impossible_settings_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.toml");
        std::fs::write(&path, "[sampler]\ndraw = 300\n").unwrap();
        let error = RunConfig::resolve(&RunFlags { config: Some(path), ..RunFlags::default() }).unwrap_err();
        assert!(format!("{error:#}").contains("unknown field `draw`"), "{error:#}");
        for flags in [
            RunFlags { draws: Some(0), ..RunFlags::default() },
            RunFlags { thin: Some(0), ..RunFlags::default() },
            RunFlags { patience: Some(3), ..RunFlags::default() },
            RunFlags { init: Some(Init::Single), ..RunFlags::default() },
            RunFlags { activation: Some("swish2".into()), ..RunFlags::default() },
            RunFlags { device: Some("tpu".into()), ..RunFlags::default() },
        ] {
            assert!(RunConfig::resolve(&flags).is_err(), "{flags:?}");
        }
    }

    #[test]
    fn mile_recipe_sets_its_parts_and_flags_still_win() {
        let flags = RunFlags { mile: true, patience: Some(4), ..RunFlags::default() };
        let config = RunConfig::resolve(&flags).unwrap();
        assert_eq!(config.ensemble.batch_size, Some(32));
        assert_eq!(config.ensemble.patience, Some(4));
        assert!(config.ensemble.decoupled_weight_decay);
        assert_eq!(config.data.validation_fraction, 0.1);
    }
}

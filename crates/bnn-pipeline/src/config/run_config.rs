//! The configuration of a run: one Burn `Config` per `run.toml` section, kept as each run directory's `config.toml`.

use crate::config::kernel_settings::{kernel_setting_name, KernelSettings};
use crate::config::model_spec::{parse_layer_prior, parse_likelihood};
use crate::config::run_size;
use anyhow::{anyhow, bail, Result};
use bnn_model::{
    Activation, BnnConfig, DeviceName, GradientPath, Prior, PriorError, PriorSpec, UnknownName,
    WeightInit,
};
use bnn_sampler::{
    MclmcConfig, MetricEstimate, RandomWalkConfig, SamplerConfig, SamplerSettings, SmileConfig,
    StationarityConfig, StepSizeSearch, WarmupConfig, WarmupPolicy,
};
use burn::config::Config;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Where the chains start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum Standardize {
    /// Statistics of the training split only (no test information leaks).
    Train,
    /// Statistics of the full data set (what the DEI-MCMC reference code does).
    Full,
}

/// `[data]`: which rows, how they are split and scaled.
#[derive(Config, PartialEq)]
pub struct DataSection {
    /// A benchmark name (concrete, ...), a generator (cos2x, robot-arm) or a CSV file; for data
    /// handed over in memory, just its name.
    #[config(default = "String::from(\"cos2x\")")]
    pub dataset: String,
    #[config(default = 0)]
    pub split_seed: u64,
    #[config(default = "bnn_data::DEFAULT_TEST_FRACTION")]
    pub test_fraction: f64,
    /// Share of all rows held out (from the training part) for the members' early stopping (0: none).
    #[config(default = 0.0)]
    pub validation_fraction: f64,
    #[config(default = "Standardize::Train")]
    pub standardize: Standardize,
    /// For a CSV file: the target columns by header name, in order (several: regression with
    /// several outputs); empty: the last column. Benchmarks and generators fix their own.
    #[config(default = "Vec::new()")]
    pub target_columns: Vec<String>,
    /// For a CSV file: the SHA-256 of its bytes when the run began (`dataset` then holds its
    /// absolute path), so a later command that finds other bytes there refuses them.
    pub dataset_sha256: Option<String>,
}

/// The derived form, with `dataset_sha256` only where it is set: a run's config hash (shard
/// manifests, the journal) is a digest of this text, and runs without a pinned file keep the
/// hash they had before the field existed.
impl std::fmt::Debug for DataSection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut s = f.debug_struct("DataSection");
        s.field("dataset", &self.dataset)
            .field("split_seed", &self.split_seed)
            .field("test_fraction", &self.test_fraction)
            .field("validation_fraction", &self.validation_fraction)
            .field("standardize", &self.standardize)
            .field("target_columns", &self.target_columns);
        if let Some(sha256) = &self.dataset_sha256 {
            s.field("dataset_sha256", sha256);
        }
        s.finish()
    }
}

impl DataSection {
    /// Pins a CSV file: its absolute path (so the run reads it from any working directory) and
    /// the SHA-256 of its bytes. A section that already records a hash is checked against the
    /// file instead: a changed file is refused, naming both hashes. Named datasets (with their
    /// own manifest checksums) and generators are left as they are.
    pub fn pin_csv_file(&mut self) -> Result<()> {
        let bnn_data::DatasetSpec::CsvFile(path) = bnn_data::DatasetSpec::parse(&self.dataset)?
        else {
            return Ok(());
        };
        let absolute = std::fs::canonicalize(&path)
            .map_err(|e| anyhow!("--dataset {} (config key `dataset`): {e}", path.display()))?;
        let sha256 = bnn_data::sha256_file(&absolute)?;
        if let Some(recorded) = &self.dataset_sha256 {
            if *recorded != sha256 {
                bail!(
                    "{} has changed since this run read it: its bytes now hash to sha256 {sha256}, the run recorded sha256 {recorded}; the run's results belong to the old file (restore it, or start a new run on the new one)",
                    absolute.display()
                );
            }
        }
        self.dataset = absolute.display().to_string();
        self.dataset_sha256 = Some(sha256);
        Ok(())
    }
}

/// `[model]`: the network, its likelihood head and priors, as text a config file can hold.
#[derive(Config, Debug, PartialEq)]
pub struct ModelSection {
    #[config(default = "vec![16, 16]")]
    pub hidden: Vec<usize>,
    /// tanh, relu, leaky_relu, sigmoid, silu, gelu, softplus, trunc_relu or identity (default:
    /// the defaults study's choice, `run_defaults::FLAGSHIP`).
    #[config(default = "String::from(super::run_defaults::FLAGSHIP.activation)")]
    pub activation: String,
    /// `hetero`, `hetero-softplus`, `fixed:<σ>`, `learned-sigma[:<mean>,<sd>]` or `categorical:<K>`.
    #[config(default = "String::from(\"hetero\")")]
    pub likelihood: String,
    /// Regression targets the network predicts; `None`: as many as the data has.
    pub targets: Option<usize>,
    /// `normal:<s>`, `laplace:<b>` or `fan_in_normal:<s>`, for every weight and bias.
    #[config(default = "String::from(\"normal:1\")")]
    pub prior: String,
    /// `<layer>=<weight prior>[/<bias prior>]` entries.
    #[config(default = "Vec::new()")]
    pub layer_priors: Vec<String>,
}

impl ModelSection {
    /// The network and likelihood for data with `d_input` features and `data_targets` target
    /// columns (used unless `targets` is set); errors name the bad setting.
    pub fn bnn_config(&self, d_input: usize, data_targets: usize) -> Result<BnnConfig> {
        if self.hidden.contains(&0) {
            bail!("hidden (--hidden, config key `hidden`) has a layer of width 0: {:?}; every width must be positive", self.hidden);
        }
        let prior: Prior = self
            .prior
            .parse()
            .map_err(|e: PriorError| anyhow!("--prior (config key `prior`): {e}"))?;
        let mut spec = PriorSpec::uniform(prior);
        for text in &self.layer_priors {
            let (layer, lp) = parse_layer_prior(text)?;
            for prior in [lp.weight, lp.bias] {
                prior.validate().map_err(|e| {
                    anyhow!("--layer-prior '{text}' (config key `layer_priors`): {e}")
                })?;
            }
            spec = spec.with_layer(layer, lp);
        }
        let activation: Activation = self
            .activation
            .parse()
            .map_err(|e: UnknownName| anyhow!("--activation (config key `activation`): {e}"))?;
        let likelihood = parse_likelihood(&self.likelihood)?;
        likelihood
            .validate()
            .map_err(|e| anyhow!("--likelihood (config key `likelihood`): {e}"))?;
        let config = BnnConfig::new(d_input)
            .with_hidden(self.hidden.clone())
            .with_activation(activation)
            .with_likelihood(likelihood)
            .with_n_targets(self.targets.unwrap_or(data_targets))
            .with_prior(spec);
        config
            .validate()
            .map_err(|e| anyhow!("[model] settings (--hidden, --layer-prior, --targets): {e}"))?;
        if run_size::parameter_count(&config).is_none() {
            bail!(
                "--hidden {} (config key `hidden`): the network's parameter count overflows ({d_input} inputs; more than {} parameters)",
                run_size::hidden_text(&self.hidden),
                usize::MAX
            );
        }
        Ok(config)
    }
}

/// `[ensemble]`: how the deep ensemble is trained; the defaults are the DEI-MCMC reference recipe
/// (5000 full-batch Adam steps, lr 1e-3, L2 1e-2).
#[derive(Config, PartialEq)]
pub struct EnsembleSection {
    #[config(default = 12)]
    pub members: usize,
    /// Full-batch Adam steps, or with `batch_size` the maximum number of epochs.
    #[config(default = 5000)]
    pub epochs: usize,
    /// Adam's learning rate. 1e-2: over 3 splits of airfoil, concrete, energy and yacht, 12
    /// members × 5000 full-batch steps at 1e-2 beat 1e-3 on the deep ensemble's test LPPD and
    /// RMSE in every split (energy and yacht by +0.5 LPPD, reaching the paper's DE numbers);
    /// `crates/bnn-study/results/table3/README.md` has the table.
    #[config(default = 1e-2)]
    pub learning_rate: f64,
    #[config(default = 1e-2)]
    pub weight_decay: f64,
    /// AdamW's decoupled decay instead of L2 added to the gradient.
    #[config(default = false)]
    pub decoupled_weight_decay: bool,
    /// How the members' weights are drawn before training: `fan_in_uniform` (PyTorch's
    /// default) or `glorot_uniform` (the DEI-MCMC reference code's, which deep ReLU nets need).
    #[config(default = "WeightInit::FanInUniform")]
    pub weight_init: WeightInit,
    /// Minibatch size; absent: full batch.
    pub batch_size: Option<usize>,
    /// Early stopping after this many epochs without validation improvement (needs
    /// `data.validation_fraction > 0`).
    pub patience: Option<usize>,
}

/// `weight_init` is written only where it is not the default: the shards' config hash
/// ([`crate::config_hash`]) is taken over this text, and the hashes recorded before the key existed
/// must still match.
impl std::fmt::Debug for EnsembleSection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut section = f.debug_struct("EnsembleSection");
        section
            .field("members", &self.members)
            .field("epochs", &self.epochs)
            .field("learning_rate", &self.learning_rate)
            .field("weight_decay", &self.weight_decay)
            .field("decoupled_weight_decay", &self.decoupled_weight_decay);
        if self.weight_init != WeightInit::default() {
            section.field("weight_init", &self.weight_init);
        }
        section
            .field("batch_size", &self.batch_size)
            .field("patience", &self.patience)
            .finish()
    }
}

impl EnsembleSection {
    /// The MILE recipe (Sommer et al. 2025): AdamW lr 1e-3, wd 1e-3, batch 32, ≤ 500 epochs,
    /// patience 10 (on a validation split, which [`RunConfig::with_mile`] also sets).
    pub fn mile(self) -> Self {
        self.with_decoupled_weight_decay(true)
            .with_learning_rate(1e-3)
            .with_weight_decay(1e-3)
            .with_batch_size(Some(32))
            .with_epochs(500)
            .with_patience(Some(10))
    }
}

/// `[sampler]`: the kernel and its own settings (`[sampler.algorithm]`), the budget, where the
/// chains start and how the warmup adapts.
#[derive(Config, Debug, PartialEq)]
pub struct SamplerSection {
    /// The registered sampler and its settings; see [`KernelSettings`].
    #[config(default = "KernelSettings::default()")]
    pub algorithm: KernelSettings,
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
    /// Step size ε. With `adapt = false` every chain keeps it; otherwise the warmup starts its
    /// search from it. Absent: the heuristic search from 1 (MCLMC's tuner starts from 0.005,
    /// MAMS's from 0.2 √D).
    pub step_size: Option<f64>,
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
    /// What ends each NUTS chain's warmup: `stationary` (after the planned iterations, a check
    /// window at the final step size and metric must show no divergence, the target acceptance
    /// and no climb of log p, else the warmup adapts again, up to `max_warmup`) or `fixed` (the
    /// planned iterations: the paper's 100). Other samplers keep their own warmup. A run
    /// directory written before the policy existed reads as `fixed`, so it resumes as it began.
    #[config(default = "super::run_defaults::FLAGSHIP.warmup_policy")]
    pub warmup_policy: WarmupPolicy,
    /// Stationary policy: iterations of each check window.
    #[config(default = 50)]
    pub warmup_check: usize,
    /// Stationary policy: the most warmup iterations a chain may use, checks included
    /// (absent: `warmup` + 500).
    pub max_warmup: Option<usize>,
}

impl SamplerSection {
    /// The section for `sampler` at that sampler's own budget (`SamplerSettings::default_budget`:
    /// MCLMC at MILE's 50,000 + 10,000 kept every 10th, the others at DEI-MCMC's 100 + 1000),
    /// as `bnn run --sampler NAME` gives it; the other settings at their defaults.
    ///
    /// ```
    /// use bnn_pipeline::{KernelSettings, SamplerSection};
    /// let mclmc = SamplerSection::for_sampler(KernelSettings::named("mclmc").unwrap());
    /// assert_eq!((mclmc.warmup, mclmc.draws, mclmc.thin), (50_000, 10_000, 10));
    /// ```
    pub fn for_sampler(sampler: KernelSettings) -> Self {
        let budget = sampler.0.default_budget();
        Self::new()
            .with_algorithm(sampler)
            .with_warmup(budget.warmup)
            .with_draws(budget.draws)
            .with_thin(budget.thin)
    }

    /// Whether the chains' warmup ends by the stationary policy: it is asked for, the warmup
    /// adapts, and the sampler supports it (NUTS).
    pub fn stationary_warmup(&self) -> bool {
        self.adapt
            && self.warmup > 0
            && self.warmup_policy == WarmupPolicy::Stationary
            && self.algorithm.0.supports_stationary_warmup()
    }

    /// The warmup as a start message gives it: `100 warmup`, or for the stationary policy
    /// `100 warmup, then checks until stationary (at most 600)`.
    pub fn warmup_text(&self) -> String {
        if self.stationary_warmup() {
            format!(
                "{} warmup, then checks until stationary (at most {})",
                self.warmup,
                self.max_warmup_iterations()
            )
        } else {
            format!("{} warmup", self.warmup)
        }
    }

    /// The stationary policy's cap on a chain's warmup iterations.
    pub fn max_warmup_iterations(&self) -> usize {
        self.max_warmup.unwrap_or(self.warmup.saturating_add(500))
    }

    /// The sampler this section describes, with `threads` worker threads (`None`: all cores).
    pub fn sampler_config(&self, threads: Option<usize>) -> SamplerConfig {
        let warmup = if self.adapt {
            let warmup = WarmupConfig::new()
                .with_step_size_search(self.step_size_search)
                .with_metric_estimate(self.metric_estimate);
            if self.stationary_warmup() {
                warmup
                    .with_policy(WarmupPolicy::Stationary)
                    .with_stationarity(
                        StationarityConfig::new()
                            .with_check_window(self.warmup_check)
                            .with_max_warmup(self.max_warmup_iterations()),
                    )
            } else {
                warmup
            }
        } else {
            WarmupConfig::new()
                .with_adapt_step_size(false)
                .with_adapt_metric(false)
        };
        SamplerConfig::new(self.algorithm.0.clone())
            .with_warmup(warmup)
            .with_num_warmup(self.warmup)
            .with_num_draws(self.draws)
            .with_seed(self.seed)
            .with_threads(threads)
            .with_batched(self.batched)
            .with_initial_step_size(self.step_size)
    }

    /// NUTS's tree depth cap, for a sampler that builds trees (`None` for the others).
    pub fn max_tree_depth(&self) -> Option<usize> {
        self.algorithm
            .get("max_tree_depth")
            .and_then(|v| v.as_integer())
            .map(|d| d as usize)
    }

    /// Draws kept per chain: `draws / thin`, rounded up.
    pub fn kept_draws(&self) -> usize {
        self.draws.div_ceil(self.thin.max(1))
    }
}

/// `[runtime]`: where and how the numbers are computed; none of it changes the draws.
#[derive(Config, Debug, PartialEq)]
pub struct RuntimeSection {
    /// ndarray, flex, wgpu or cpu.
    #[config(default = "String::from(\"cpu\")")]
    pub device: String,
    /// Worker threads; absent: all cores. Results do not depend on it.
    pub threads: Option<usize>,
    /// How the posterior's gradient is computed (`auto`: the fused operation).
    #[config(default = "GradientPath::Auto")]
    pub gradient: GradientPath,
}

/// The most iterations (warmup and draws) one chain may be asked for: 10^12 take 11 days at a
/// microsecond each, about the cheapest models' pace, so a larger budget is a typo; the cap also
/// keeps every iteration counter far from overflowing.
pub const MAX_ITERATIONS_PER_CHAIN: usize = 1_000_000_000_000;

/// Everything a run needs, as written to `config.toml`.
///
/// ```
/// use bnn_pipeline::{EnsembleSection, RunConfig, SamplerSection};
/// let config = RunConfig::new()
///     .with_ensemble(EnsembleSection::new().with_members(4).with_epochs(500))
///     .with_sampler(SamplerSection::new().with_warmup(50).with_draws(100));
/// config.validate().unwrap();
/// assert_eq!(config.chains(), 4);
/// ```
#[derive(Config, Debug, PartialEq)]
pub struct RunConfig {
    #[config(default = "DataSection::new()")]
    pub data: DataSection,
    #[config(default = "ModelSection::new()")]
    pub model: ModelSection,
    #[config(default = "EnsembleSection::new()")]
    pub ensemble: EnsembleSection,
    #[config(default = "SamplerSection::new()")]
    pub sampler: SamplerSection,
    #[config(default = "RuntimeSection::new()")]
    pub runtime: RuntimeSection,
}

impl Default for RunConfig {
    fn default() -> Self {
        Self::new()
    }
}

/// The settings that decide the draws (see [`RunConfig::sampling_identity`]).
pub type SamplingIdentity = (
    DataSection,
    ModelSection,
    EnsembleSection,
    SamplerSection,
    String,
);

impl RunConfig {
    /// The MILE training recipe, with a 10% validation split unless one is set.
    pub fn with_mile(mut self) -> Self {
        self.ensemble = self.ensemble.mile();
        if self.data.validation_fraction == 0.0 {
            self.data.validation_fraction = 0.1;
        }
        self
    }

    /// Sommer et al. 2024's DEI-MCMC settings ([`crate::SOMMER2024`]): the sampler switched to
    /// NUTS (a file's NUTS settings stay), ReLU, target acceptance 0.8, the fixed warmup.
    pub fn with_sommer2024(mut self) -> Self {
        self.sampler.algorithm = self
            .sampler
            .algorithm
            .switched_to(bnn_sampler::NutsConfig::NAME)
            .expect("NUTS is registered");
        super::run_defaults::SOMMER2024.apply(self)
    }

    /// MILE's sampling budget (Sommer et al. 2025): MCLMC from every member, 50,000 tuning steps
    /// (phases 0.8/0.1/0.1) and 10,000 sampling steps kept every 10th (1000 draws per chain), a
    /// checkpoint every 1000 steps. Chains run on threads: on 2 CPU cores that took 42 s on yacht
    /// where one batched `[12, D]` call per step took 81 s (add `batched = true` on a GPU).
    pub fn with_mile_sampling(mut self) -> Self {
        // A file's MCLMC settings stay; another sampler's do not carry over.
        let mclmc = self
            .sampler
            .algorithm
            .switched_to(MclmcConfig::NAME)
            .expect("MCLMC is registered");
        self.sampler = self
            .sampler
            .with_algorithm(mclmc)
            .with_warmup(50_000)
            .with_draws(10_000)
            .with_thin(10)
            .with_checkpoint_every(1000);
        self
    }

    /// SMILE at MILE's budget (Sommer et al. 2026 run it so): the sampler switched to `smile`
    /// (a file's SMILE settings stay), 50,000 tuning and 10,000 sampling steps kept every 10th.
    pub fn with_smile_sampling(mut self) -> Self {
        let smile = self
            .sampler
            .algorithm
            .switched_to(SmileConfig::NAME)
            .expect("SMILE is registered");
        self = self.with_mile_sampling();
        self.sampler = self.sampler.with_algorithm(smile);
        self
    }

    /// Every number-valued setting as `(how to name it, value)`: the flag and config key, or
    /// for a setting of the sampler's own the flag that sets it (if one does) and its key in
    /// `[sampler.algorithm]`.
    fn float_settings(&self) -> Vec<(String, f64)> {
        let (d, e, s) = (&self.data, &self.ensemble, &self.sampler);
        let named = |key: &str| format!("--{} (config key `{key}`)", key.replace('_', "-"));
        let mut settings: Vec<(String, f64)> = [
            ("test_fraction", d.test_fraction),
            ("validation_fraction", d.validation_fraction),
            ("learning_rate", e.learning_rate),
            ("weight_decay", e.weight_decay),
            ("early_stop_tolerance", s.early_stop_tolerance),
        ]
        .into_iter()
        .chain(s.step_size.map(|v| ("step_size", v)))
        .map(|(key, v)| (named(key), v))
        .collect();
        for (key, value) in s.algorithm.table() {
            let values = match value {
                toml::Value::Float(v) => vec![v],
                toml::Value::Array(items) => items.iter().filter_map(|i| i.as_float()).collect(),
                _ => Vec::new(),
            };
            let name = kernel_setting_name(&key);
            settings.extend(values.into_iter().map(|v| (name.clone(), v)));
        }
        settings
    }

    /// Every integer setting that config.toml stores, as `(flag and config key, value)`.
    fn integer_settings(&self) -> Vec<(String, u64)> {
        let (d, m, e, s) = (&self.data, &self.model, &self.ensemble, &self.sampler);
        let named = |key: &str| format!("--{} (config key `{key}`)", key.replace('_', "-"));
        let optional = [
            ("targets", m.targets),
            ("batch_size", e.batch_size),
            ("patience", e.patience),
            ("chains", s.chains),
            ("max_warmup", s.max_warmup),
            ("threads", self.runtime.threads),
        ];
        let counts = [
            ("members", e.members),
            ("epochs", e.epochs),
            ("warmup", s.warmup),
            ("draws", s.draws),
            ("thin", s.thin),
            ("checkpoint_every", s.checkpoint_every),
            ("early_stop_window", s.early_stop_window),
            ("warmup_check", s.warmup_check),
        ];
        let seeds = [("split_seed", d.split_seed), ("seed", s.seed)];
        optional
            .into_iter()
            .filter_map(|(key, v)| v.map(|v| (key, v)))
            .chain(counts)
            .chain(m.hidden.iter().map(|&width| ("hidden", width)))
            .map(|(key, v)| (key, v as u64))
            .chain(seeds)
            .map(|(key, v)| (named(key), v))
            .collect()
    }

    /// Rejects impossible settings before anything runs or is written: every setting of every
    /// section, the sampler's own ranges included, so that a refusal never comes after the
    /// ensemble was trained (and never leaves a run directory behind).
    pub fn validate(&self) -> Result<()> {
        // NaN and infinities first, by name: NaN passes `!(x < 0)`-style range checks, and a NaN
        // in config.toml would make the run directory unequal to itself.
        if let Some((name, value)) = self
            .float_settings()
            .into_iter()
            .find(|(_, v)| !v.is_finite())
        {
            bail!("{name} must be a finite number, got {value}");
        }
        // TOML integers are i64: a larger count or seed could not be written to config.toml.
        if let Some((name, value)) = self
            .integer_settings()
            .into_iter()
            .find(|&(_, v)| v > i64::MAX as u64)
        {
            bail!(
                "{name} must be at most {} (the largest integer config.toml can hold), got {value}",
                i64::MAX
            );
        }
        let d = &self.data;
        if !(d.test_fraction > 0.0 && d.test_fraction < 1.0) {
            bail!(
                "--test-fraction (config key `test_fraction`) must lie in (0, 1), got {}",
                d.test_fraction
            );
        }
        if !(0.0..0.9).contains(&d.validation_fraction) {
            bail!("--validation-fraction (config key `validation_fraction`) must lie in [0, 0.9), got {}", d.validation_fraction);
        }
        let e = &self.ensemble;
        if e.members == 0 || e.epochs == 0 {
            bail!("the ensemble needs at least one member and one epoch: --members {} / --epochs {} (config keys `members`, `epochs`)", e.members, e.epochs);
        }
        if !(e.learning_rate > 0.0) {
            bail!(
                "--learning-rate (config key `learning_rate`) must be positive, got {}",
                e.learning_rate
            );
        }
        if !(e.weight_decay >= 0.0) {
            bail!(
                "--weight-decay (config key `weight_decay`) must be zero or positive, got {}",
                e.weight_decay
            );
        }
        if e.patience == Some(0) {
            bail!("--patience (config key `patience`) must be at least 1 epoch, or left out");
        }
        if e.batch_size == Some(0) {
            bail!("--batch-size (config key `batch_size`) must be positive, or left out for full-batch training");
        }
        if e.patience.is_some() && d.validation_fraction == 0.0 {
            bail!("--patience (config key `patience`): early stopping of the members needs a validation split; set --validation-fraction");
        }
        let s = &self.sampler;
        if s.chains == Some(0) {
            bail!("--chains (config key `chains`) must be at least 1, or left out for one chain per member");
        }
        if s.draws == 0 {
            bail!("--draws (config key `draws`) must be at least 1");
        }
        if s.thin == 0 {
            bail!("--thin (config key `thin`) must be at least 1");
        }
        if s.warmup_check < 2 {
            bail!(
                "--warmup-check (config key `warmup_check`) must be at least 2, got {}",
                s.warmup_check
            );
        }
        if let Some(cap) = s.max_warmup {
            let least = s.warmup.saturating_add(s.warmup_check);
            if cap < least {
                bail!("--max-warmup (config key `max_warmup`) must be at least --warmup + --warmup-check = {least}, got {cap}");
            }
        }
        let mut budgets = vec![("warmup", s.warmup)];
        budgets.extend(
            s.max_warmup
                .filter(|_| s.stationary_warmup())
                .map(|cap| ("max_warmup", cap)),
        );
        for (key, warmup) in budgets {
            if warmup
                .checked_add(s.draws)
                .is_none_or(|n| n > MAX_ITERATIONS_PER_CHAIN)
            {
                bail!(
                    "--{} {warmup} + --draws {} (config keys `{key}`, `draws`) ask for more than {MAX_ITERATIONS_PER_CHAIN} iterations per chain, \
                     11 days at a microsecond each: give a budget the run can finish",
                    key.replace('_', "-"),
                    s.draws,
                );
            }
        }
        if let Some(step_size) = s.step_size {
            if !(step_size > 0.0 && step_size.is_finite()) {
                bail!("--step-size (config key `step_size`) must be positive and finite, got {step_size}");
            }
        }
        let setting = |key: &str| s.algorithm.get(key);
        if let Some(target) = setting("target_accept").and_then(|v| v.as_float()) {
            if !(target > 0.0 && target < 1.0) {
                bail!(
                    "{} must lie in (0, 1), got {target}",
                    kernel_setting_name("target_accept")
                );
            }
        }
        if let Some(depth) = setting("max_tree_depth").and_then(|v| v.as_integer()) {
            if !(1..=30).contains(&depth) {
                bail!(
                    "{} must lie in 1..=30, got {depth}",
                    kernel_setting_name("max_tree_depth")
                );
            }
        }
        if setting("num_steps").and_then(|v| v.as_integer()) == Some(0) {
            bail!("{} must be at least 1", kernel_setting_name("num_steps"));
        }
        if let Some(length) = setting("initial_trajectory_length").and_then(|v| v.as_float()) {
            if !(length > 0.0) {
                bail!(
                    "{} must be positive, got {length}",
                    kernel_setting_name("initial_trajectory_length")
                );
            }
        }
        let name = s.algorithm.name();
        // An optional setting left unset where a run's default sets it would read back from
        // config.toml as that default (TOML has no "unset"): the resumed run would differ.
        let run_defaults = KernelSettings::named(name)?.table();
        if let Some((key, default)) = run_defaults
            .iter()
            .find(|(key, _)| s.algorithm.get(key).is_none())
        {
            bail!(
                "{} is unset, which config.toml cannot record (it would read back as the run default {default}); give it a value",
                kernel_setting_name(key)
            );
        }
        if s.adapt && s.warmup == 0 {
            bail!(
                "--warmup 0 leaves {name} unadapted (its step size would stay at its starting value and most draws diverge or are rejected); \
                 give --warmup > 0, or sample with a fixed step: --adapt false --step-size <ε>"
            );
        }
        if !s.adapt && s.step_size.is_none() && name != RandomWalkConfig::NAME {
            bail!("adapt = false keeps the step size fixed, so it needs one: give --step-size (config key step_size)");
        }
        if s.batched && !s.algorithm.0.supports_batched() {
            bail!("--batched true (config key `batched`): {name} runs its chains on threads, not batched");
        }
        // The sampler crate's own checks, for every kernel (before: only MCLMC, MAMS and MSD,
        // so a bad NUTS or HMC setting was refused after the ensemble had been trained).
        self.sampler_config_check()?;
        if s.init == Init::Single && s.init_from.is_none() {
            bail!("--init single (config key `init`) needs --init-from <member.safetensors> (config key `init_from`)");
        }
        if s.early_stop && (s.early_stop_window == 0 || !(s.early_stop_tolerance > 0.0)) {
            bail!("--early-stop needs a positive --early-stop-window and --early-stop-tolerance (config keys `early_stop_window`, `early_stop_tolerance`)");
        }
        if self.runtime.threads == Some(0) {
            bail!("--threads (config key `threads`) must be at least 1");
        }
        self.device_name()?;
        self.model.bnn_config(1, 1)?;
        Ok(())
    }

    /// The sampler crate's own checks of the sampler section (ranges of the MCLMC knobs), each
    /// refusal led by the flag and key of the setting it names (the longest key it mentions).
    fn sampler_config_check(&self) -> Result<()> {
        self.sampler
            .sampler_config(Some(1))
            .init()
            .map(|_| ())
            .map_err(|e| {
                let text = e.to_string();
                let keys = self.sampler.algorithm.table();
                let named = keys
                    .keys()
                    .filter(|key| text.contains(key.as_str()))
                    .max_by_key(|key| key.len());
                match named {
                    Some(key) => anyhow!("{}: {text}", kernel_setting_name(key)),
                    None => anyhow!("[sampler] settings: {text}"),
                }
            })
    }

    pub fn device_name(&self) -> Result<DeviceName> {
        self.runtime
            .device
            .parse::<DeviceName>()
            .map_err(|e| anyhow!("--device (config key `device`): {e}"))
    }

    /// Number of chains: as configured, or one per ensemble member.
    pub fn chains(&self) -> usize {
        self.sampler.chains.unwrap_or(self.ensemble.members)
    }

    /// Worker threads: as configured, or every core.
    pub fn threads(&self) -> usize {
        self.runtime
            .threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
    }

    /// The settings that decide a trained ensemble: data, model, ensemble and the seed of the
    /// members' initializations. A directory holding only an ensemble may be sampled with any
    /// sampler settings as long as these are equal.
    pub fn ensemble_identity(&self) -> (DataSection, ModelSection, EnsembleSection, u64) {
        (
            self.data.clone(),
            self.model.clone(),
            self.ensemble.clone(),
            self.sampler.seed,
        )
    }

    /// This config's sampler and runtime sections over the data, model, ensemble and seed of
    /// `stored`, the config of a directory that holds a trained ensemble. `explicit` lists what
    /// the caller set on purpose as `(how it was given, section, key)`; one whose value here
    /// differs from the stored one is refused, naming both values.
    pub fn over_stored_ensemble(
        &self,
        stored: &RunConfig,
        explicit: &[(String, &str, &str)],
        dir: &std::path::Path,
    ) -> Result<RunConfig> {
        let value = |config: &RunConfig, section: &str, key: &str| -> serde_json::Value {
            let section = match section {
                "data" => serde_json::to_value(&config.data),
                "model" => serde_json::to_value(&config.model),
                "ensemble" => serde_json::to_value(&config.ensemble),
                _ => serde_json::to_value(&config.sampler),
            };
            section
                .ok()
                .and_then(|s| s.get(key).cloned())
                .unwrap_or(serde_json::Value::Null)
        };
        for (given, section, key) in explicit {
            let (wanted, found) = (value(self, section, key), value(stored, section, key));
            if wanted != found {
                bail!(
                    "{given} sets {key} = {wanted}, but the ensemble in {} was trained with {key} = {found}; leave it out to sample from that ensemble, \
                     or train a new one into another --out directory",
                    dir.display()
                );
            }
        }
        let mut config = self.clone();
        config.data = stored.data.clone();
        config.model = stored.model.clone();
        config.ensemble = stored.ensemble.clone();
        config.sampler.seed = stored.sampler.seed;
        config.validate()?;
        Ok(config)
    }

    /// Each config key whose value differs between this config (a run directory's) and `asked`
    /// (the one a command asks for), with both values, as config.toml writes them: e.g.
    /// `sampler.algorithm.target_accept: 0.8 in the directory, 0.9 asked`. A key written on
    /// one side only reads `unset` on the other.
    pub fn differences(&self, asked: &RunConfig) -> Vec<String> {
        let table = |config: &RunConfig| {
            let text = config.to_toml().unwrap_or_default();
            toml::Value::Table(text.parse().unwrap_or_default())
        };
        let mut found = Vec::new();
        differing_keys("", &table(self), &table(asked), &mut found);
        found
    }

    /// The settings that decide the draws: a run directory may only be resumed with these equal.
    pub fn sampling_identity(&self) -> SamplingIdentity {
        // How often state is saved does not change the draws.
        let sampler = self.sampler.clone().with_checkpoint_every(0);
        let device = self
            .device_name()
            .map(|d| d.concrete().to_string())
            .unwrap_or_default();
        (
            self.data.clone(),
            self.model.clone(),
            self.ensemble.clone(),
            sampler,
            device,
        )
    }
}

/// [`RunConfig::differences`] below `path`: tables key by key, anything else by value.
fn differing_keys(path: &str, stored: &toml::Value, asked: &toml::Value, found: &mut Vec<String>) {
    let show = |value: Option<&toml::Value>| value.map_or("unset".to_string(), |v| v.to_string());
    match (stored, asked) {
        (toml::Value::Table(stored), toml::Value::Table(asked)) => {
            let asked_only = asked.keys().filter(|key| !stored.contains_key(*key));
            for key in stored.keys().chain(asked_only) {
                let path = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                match (stored.get(key), asked.get(key)) {
                    (Some(a), Some(b)) => differing_keys(&path, a, b, found),
                    (a, b) => found.push(format!(
                        "{path}: {} in the directory, {} asked",
                        show(a),
                        show(b)
                    )),
                }
            }
        }
        _ if stored != asked => found.push(format!(
            "{path}: {} in the directory, {} asked",
            show(Some(stored)),
            show(Some(asked))
        )),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bnn_sampler::{MamsConfig, MsdConfig, NutsConfig};

    #[test]
    fn the_default_weight_init_leaves_the_config_hash_as_it_was() {
        let plain = RunConfig::new();
        assert!(!format!("{:?}", plain.ensemble).contains("weight_init"));
        let glorot = RunConfig {
            ensemble: plain
                .ensemble
                .clone()
                .with_weight_init(WeightInit::GlorotUniform),
            ..plain.clone()
        };
        assert!(format!("{:?}", glorot.ensemble).contains("weight_init: GlorotUniform"));
        assert_ne!(crate::config_hash(&plain), crate::config_hash(&glorot));
    }

    fn nuts(f: impl Fn(NutsConfig) -> NutsConfig) -> KernelSettings {
        f(NutsConfig::new()).into()
    }

    fn mclmc(f: impl Fn(MclmcConfig) -> MclmcConfig) -> KernelSettings {
        f(MclmcConfig::new()).into()
    }

    fn mams(f: impl Fn(MamsConfig) -> MamsConfig) -> KernelSettings {
        f(MamsConfig::new()).into()
    }

    fn msd(f: impl Fn(MsdConfig) -> MsdConfig) -> KernelSettings {
        f(MsdConfig::new()).into()
    }

    /// Every registered sampler is a sampler of the run config by its own name.
    #[test]
    fn every_registered_sampler_is_a_sampler_of_the_run_config() {
        for &name in bnn_sampler::AlgorithmConfig::NAMES {
            let section =
                SamplerSection::new().with_algorithm(KernelSettings::named(name).unwrap());
            assert_eq!(section.sampler_config(None).algorithm.name(), name);
            let config = RunConfig::new().with_sampler(section);
            let text = config.to_toml().unwrap();
            assert!(
                text.contains(&format!("[sampler.algorithm]\nname = \"{name}\"")),
                "{text}"
            );
            assert_eq!(RunConfig::from_toml_str(&text, "written").unwrap(), config);
        }
    }

    #[test]
    fn impossible_settings_are_errors() {
        let s = SamplerSection::new();
        for config in [
            RunConfig::new().with_sampler(s.clone().with_draws(0)),
            RunConfig::new().with_sampler(s.clone().with_thin(0)),
            RunConfig::new().with_ensemble(EnsembleSection::new().with_patience(Some(3))),
            RunConfig::new().with_sampler(s.clone().with_init(Init::Single)),
            RunConfig::new().with_model(ModelSection::new().with_activation("swish2".into())),
            RunConfig::new().with_runtime(RuntimeSection::new().with_device("tpu".into())),
            RunConfig::new()
                .with_sampler(s.clone().with_algorithm(msd(|c| c.with_persistence(1.5)))),
            RunConfig::new().with_sampler(
                s.clone()
                    .with_algorithm(msd(|c| c.with_fixed_point_tolerance(0.0))),
            ),
            RunConfig::new().with_sampler(s.clone().with_algorithm(msd(|c| c)).with_batched(true)),
        ] {
            assert!(config.validate().is_err(), "{config:?}");
        }
        RunConfig::new().validate().unwrap();
        RunConfig::new()
            .with_sampler(
                s.clone()
                    .with_algorithm(msd(|c| c.with_persistence(0.5).with_frozen_metric(true))),
            )
            .validate()
            .unwrap();
    }

    #[test]
    fn nan_and_infinities_are_refused_by_flag_and_key() {
        let s = SamplerSection::new();
        let e = EnsembleSection::new();
        for (config, flag) in [
            (
                RunConfig::new().with_ensemble(e.clone().with_learning_rate(f64::NAN)),
                "--learning-rate",
            ),
            (
                RunConfig::new().with_ensemble(e.clone().with_weight_decay(f64::NAN)),
                "--weight-decay",
            ),
            (
                RunConfig::new().with_ensemble(e.clone().with_learning_rate(f64::INFINITY)),
                "--learning-rate",
            ),
            (
                RunConfig::new().with_data(DataSection::new().with_test_fraction(f64::NAN)),
                "--test-fraction",
            ),
            (
                RunConfig::new().with_sampler(
                    s.clone()
                        .with_algorithm(nuts(|c| c.with_target_accept(f64::NAN))),
                ),
                "--target-accept",
            ),
            (
                RunConfig::new().with_sampler(
                    s.clone()
                        .with_algorithm(mclmc(|c| c.with_energy_variance_start(f64::NAN))),
                ),
                "--energy-variance-start",
            ),
            (
                RunConfig::new()
                    .with_sampler(s.clone().with_early_stop_tolerance(f64::NEG_INFINITY)),
                "--early-stop-tolerance",
            ),
            (
                RunConfig::new().with_sampler(s.clone().with_algorithm(mams(|c| {
                    c.with_tune_fractions(vec![0.3, f64::NAN, 0.3, 0.2])
                }))),
                "--tune-fractions",
            ),
        ] {
            let message = config.validate().unwrap_err().to_string();
            assert!(
                message.starts_with(flag) && message.contains("finite"),
                "{flag}: {message}"
            );
        }
        // Ranges, by flag, before any work: the sampler's own checks for every kernel.
        for (config, flag) in [
            (
                RunConfig::new().with_sampler(
                    s.clone()
                        .with_algorithm(nuts(|c| c.with_target_accept(1.5))),
                ),
                "--target-accept",
            ),
            (
                RunConfig::new().with_sampler(
                    s.clone()
                        .with_algorithm(RandomWalkConfig::new().with_target_accept(1.5).into()),
                ),
                "--target-accept",
            ),
            (
                RunConfig::new()
                    .with_sampler(s.clone().with_algorithm(nuts(|c| c.with_max_tree_depth(0)))),
                "--max-depth",
            ),
            (
                RunConfig::new().with_sampler(
                    s.clone()
                        .with_algorithm(nuts(|c| c.with_max_tree_depth(40))),
                ),
                "--max-depth",
            ),
            (
                RunConfig::new().with_sampler(
                    s.clone()
                        .with_algorithm(bnn_sampler::HmcConfig::new().with_num_steps(0).into()),
                ),
                "--num-steps",
            ),
            (
                RunConfig::new().with_ensemble(e.clone().with_learning_rate(-1.0)),
                "--learning-rate",
            ),
            (
                RunConfig::new().with_sampler(s.clone().with_algorithm(mclmc(|c| {
                    c.with_energy_variance_end(-1e-4)
                        .with_initial_trajectory_length(Some(1.0))
                }))),
                "--energy-variance-end (config key `energy_variance_end`",
            ),
            (
                RunConfig::new().with_sampler(s.clone().with_warmup(0)),
                "--warmup",
            ),
            (
                RunConfig::new().with_model(ModelSection::new().with_hidden(vec![8, 0])),
                "hidden (--hidden",
            ),
        ] {
            let message = config.validate().unwrap_err().to_string();
            assert!(message.starts_with(flag), "{flag}: {message}");
        }
        // A fixed step needs no warmup.
        RunConfig::new()
            .with_sampler(
                s.with_warmup(0)
                    .with_adapt(false)
                    .with_step_size(Some(0.01)),
            )
            .validate()
            .unwrap();
    }

    #[test]
    fn differences_name_each_key_with_both_values() {
        let stored = RunConfig::new()
            .with_model(ModelSection::new().with_activation("relu".into()))
            .with_sampler(SamplerSection::new().with_algorithm(nuts(|c| c)));
        assert!(stored.differences(&stored.clone()).is_empty());
        let asked = RunConfig::new()
            .with_model(ModelSection::new().with_activation("tanh".into()))
            .with_sampler(
                SamplerSection::new()
                    .with_algorithm(nuts(|c| c.with_target_accept(0.9)))
                    .with_chains(Some(3)),
            );
        assert_eq!(
            stored.differences(&asked),
            [
                "model.activation: \"relu\" in the directory, \"tanh\" asked",
                "sampler.algorithm.target_accept: 0.8 in the directory, 0.9 asked",
                "sampler.chains: unset in the directory, 3 asked",
            ]
        );
    }

    #[test]
    fn counts_beyond_tomls_integers_and_endless_budgets_are_refused_by_flag() {
        let s = SamplerSection::new();
        let huge = u64::MAX as usize;
        for (config, flag) in [
            (
                RunConfig::new().with_sampler(s.clone().with_seed(u64::MAX)),
                "--seed (config key `seed`) must be at most 9223372036854775807",
            ),
            (
                RunConfig::new().with_sampler(s.clone().with_draws(huge)),
                "--draws (config key `draws`) must be at most",
            ),
            (
                RunConfig::new().with_sampler(s.clone().with_chains(Some(huge))),
                "--chains (config key `chains`) must be at most",
            ),
            (
                RunConfig::new().with_data(DataSection::new().with_split_seed(u64::MAX)),
                "--split-seed",
            ),
            (
                RunConfig::new().with_model(ModelSection::new().with_hidden(vec![8, huge])),
                "--hidden (config key `hidden`) must be at most",
            ),
            (
                RunConfig::new().with_sampler(
                    s.clone()
                        .with_warmup(i64::MAX as usize)
                        .with_draws(i64::MAX as usize),
                ),
                "--warmup 9223372036854775807 + --draws 9223372036854775807",
            ),
            (
                RunConfig::new()
                    .with_sampler(s.clone().with_max_warmup(Some(MAX_ITERATIONS_PER_CHAIN))),
                "--max-warmup 1000000000000 + --draws 1000 (config keys `max_warmup`, `draws`)",
            ),
            (
                RunConfig::new().with_sampler(s.clone().with_warmup(MAX_ITERATIONS_PER_CHAIN)),
                "--warmup 1000000000000 + --draws 1000 (config keys `warmup`, `draws`)",
            ),
            (
                RunConfig::new().with_model(ModelSection::new().with_hidden(vec![1 << 40, 1 << 40])),
                "--hidden '1099511627776,1099511627776' (config key `hidden`): the network's parameter count overflows",
            ),
        ] {
            let message = config.validate().unwrap_err().to_string();
            assert!(message.starts_with(flag), "{flag}: {message}");
        }
        let message = RunConfig::new()
            .with_sampler(s.with_chains(Some(0)))
            .validate()
            .unwrap_err()
            .to_string();
        assert!(
            message.starts_with("--chains (config key `chains`) must be at least 1")
                && !message.contains("Some("),
            "{message}"
        );
    }

    #[test]
    fn mile_recipe_sets_its_parts_and_a_validation_split() {
        let config = RunConfig::new().with_mile();
        assert_eq!(config.ensemble.batch_size, Some(32));
        assert_eq!(config.ensemble.patience, Some(10));
        assert!(config.ensemble.decoupled_weight_decay);
        assert_eq!(config.data.validation_fraction, 0.1);
        config.validate().unwrap();
    }

    #[test]
    fn the_sampler_section_builds_its_sampler() {
        let section = SamplerSection::new()
            .with_algorithm(bnn_sampler::HmcConfig::new().with_target_accept(0.6).into())
            .with_warmup(7);
        let sampler = section.sampler_config(Some(1));
        assert_eq!(sampler.num_warmup, 7);
        assert!(sampler.init().is_ok());
        assert_eq!(
            SamplerSection::new()
                .with_draws(10)
                .with_thin(3)
                .kept_draws(),
            4
        );
    }
}

//! The flags of `bnn train/sample/run`: each one present overrides `--config run.toml`, which overrides the defaults.

use anyhow::Result;
use bnn_model::{GradientPath, WeightInit};
use bnn_pipeline::{
    check_mclmc_fractions, parse_hidden, samplers_with, Init, RunConfig, RunDir, SamplerSection,
    Standardize,
};
use bnn_sampler::{
    AlgorithmConfig, MclmcConfig, MetricEstimate, NutsConfig, SamplerSettings, SmileConfig,
    StepSizeSearch, WarmupPolicy,
};

/// Whole recipes behind `--preset`.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preset {
    /// MILE: AdamW minibatch members with early stopping, then MCLMC at MILE's budget.
    Mile,
    /// SMILE: MILE's members and budget, sampled by stochastic-gradient MCLMC (`--sampler smile`).
    Smile,
    /// Sommer et al. 2024's DEI-MCMC: ReLU, NUTS at target acceptance 0.8, the fixed warmup.
    Sommer2024,
}

impl Preset {
    /// Whether the recipe is MILE's: its members train on a validation split with AdamW, and
    /// its sampler runs at MILE's budget.
    fn is_mile(self) -> bool {
        matches!(self, Preset::Mile | Preset::Smile)
    }
}
use clap::Args;
use std::path::{Path, PathBuf};

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
    /// Target column of a CSV file by header name; repeat it for several targets, in order
    /// (e.g. `--target y1 --target y2`) [default: the last column].
    #[arg(long = "target")]
    pub target_columns: Vec<String>,
    /// Hidden layer widths, comma separated ("" for a linear model).
    #[arg(long)]
    pub hidden: Option<String>,
    /// tanh, relu, leaky_relu, sigmoid, silu, gelu, softplus, trunc_relu or identity [default:
    /// tanh, the defaults study's choice; the paper's relu with --preset sommer2024].
    #[arg(long)]
    pub activation: Option<String>,
    /// hetero (σ = exp(o)), hetero-softplus, fixed:<σ>, learned-sigma[:<mean>,<sd>] or categorical:<K>.
    #[arg(long)]
    pub likelihood: Option<String>,
    /// Number of regression targets the network predicts (the data must have as many) [default: the data's target columns].
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
    /// Adam's learning rate [default: 1e-2; --mile: 1e-3].
    #[arg(long)]
    pub learning_rate: Option<f64>,
    /// Weight decay of the members [default: 1e-2, coupled L2].
    #[arg(long)]
    pub weight_decay: Option<f64>,
    /// Use AdamW's decoupled weight decay.
    #[arg(long)]
    pub decoupled_weight_decay: Option<bool>,
    /// How the members' weights are drawn before training: `fan_in_uniform` (PyTorch's
    /// default, U(±1/√fan_in)) or `glorot_uniform` (zero biases; the DEI-MCMC reference code's,
    /// which deep ReLU nets need to train at all) [default: fan_in_uniform].
    #[arg(long, value_parser = parse_weight_init)]
    pub weight_init: Option<WeightInit>,
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
    /// A whole recipe: `mile` = MILE (Sommer et al. 2025): the --mile ensemble, then MCLMC from
    /// every member, 50,000 tuning + 10,000 sampling steps kept every 10th (other flags still
    /// override its parts; add --batched true on a GPU); `smile` = the same with SMILE's
    /// minibatch gradients (Sommer et al. 2026; --sampler-batch-size rows per gradient);
    /// `sommer2024` = DEI-MCMC as Sommer et al. 2024 ran it: ReLU, NUTS at target acceptance 0.8
    /// with the fixed 100-iteration warmup (the defaults are the defaults study's choice).
    #[arg(long, value_enum)]
    pub preset: Option<Preset>,
    /// Transition kernel: any registered sampler (config: `name` in [sampler.algorithm]).
    #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(AlgorithmConfig::NAMES))]
    pub sampler: Option<String>,
    /// Chain starting points.
    #[arg(long, value_enum)]
    pub init: Option<Init>,
    /// The network every chain starts from with --init single (safetensors, as `bnn train` writes).
    #[arg(long)]
    pub init_from: Option<PathBuf>,
    /// Number of chains (default: one per ensemble member).
    #[arg(long)]
    pub chains: Option<usize>,
    /// Warmup (adaptation) iterations per chain [default: the sampler's budget: 100; MCLMC 50000].
    #[arg(long)]
    pub warmup: Option<usize>,
    /// Sampling iterations per chain [default: the sampler's budget: 1000; MCLMC 10000].
    #[arg(long)]
    pub draws: Option<usize>,
    /// Target acceptance statistic [default: NUTS 0.95, the defaults study's choice (0.8 with
    /// --preset sommer2024); the other samplers their own (HMC 0.8, random-walk Metropolis 0.234)].
    #[arg(long)]
    pub target_accept: Option<f64>,
    /// Warmup step-size search (NUTS, HMC): `stan` (level ½, one momentum) or `target` (NumPyro's:
    /// level at the target acceptance, a fresh momentum per try) [default: stan].
    #[arg(long, value_parser = parse_step_size_search)]
    pub step_size_search: Option<StepSizeSearch>,
    /// Warmup metric estimate (NUTS, HMC): `draws` (Stan's regularized variance of the window's
    /// positions) or `draws-and-gradients` (nutpie's sqrt(Var[θ] / Var[∇ log p])) [default: draws].
    #[arg(long, value_parser = parse_metric_estimate)]
    pub metric_estimate: Option<MetricEstimate>,
    /// What ends each NUTS chain's warmup: `stationary` (after --warmup iterations, a check window
    /// at the final step size and metric must show no divergence, the target acceptance and no
    /// climb of log p; else it adapts again, up to --max-warmup) or `fixed` (exactly --warmup
    /// iterations: the paper's schedule) [default: stationary].
    #[arg(long, value_parser = parse_warmup_policy)]
    pub warmup_policy: Option<WarmupPolicy>,
    /// Stationary warmup: iterations of each check window [default: 50].
    #[arg(long)]
    pub warmup_check: Option<usize>,
    /// Stationary warmup: the most warmup iterations a chain may use, checks included
    /// [default: --warmup + 500].
    #[arg(long)]
    pub max_warmup: Option<usize>,
    /// NUTS: maximum tree depth [default: 10].
    #[arg(long)]
    pub max_depth: Option<usize>,
    /// HMC: leapfrog steps per draw [default: 32].
    #[arg(long, visible_alias = "num-steps")]
    pub leapfrog_steps: Option<usize>,
    /// LAPS: mean integration steps per draw, one number drawn for all chains each iteration
    /// [default: 15].
    #[arg(long)]
    pub steps_per_draw: Option<usize>,
    /// SMILE: data rows per minibatch gradient, drawn afresh each step [default: 256] (not
    /// `--batch-size`, which is the members' training batch).
    #[arg(long)]
    pub sampler_batch_size: Option<usize>,
    /// Step size ε: fixed with `--adapt false`, else where the warmup's search starts.
    #[arg(long)]
    pub step_size: Option<f64>,
    /// MCLMC: the decoherence length L the warmup starts from (kept with --adapt false)
    /// [default: 1; BlackJAX and MILE: max(√D, 15)].
    #[arg(long)]
    pub trajectory_length: Option<f64>,
    /// MCLMC: energy-error variance per dimension the warmup aims at first [default: 5e-4] ...
    #[arg(long)]
    pub energy_variance_start: Option<f64>,
    /// ... and at the end of its phase 2 [default: 1e-4].
    #[arg(long)]
    pub energy_variance_end: Option<f64>,
    /// MCLMC: shares of the warmup in its three phases, comma separated [default: 0.8,0.1,0.1];
    /// MAMS: four [default: 0.3,0.2,0.3,0.2].
    #[arg(long)]
    pub tune_fractions: Option<String>,
    /// MCLMC, MAMS: the last warmup phase sets L from the ESS, times this [default: 0.4].
    #[arg(long)]
    pub trajectory_length_factor: Option<f64>,
    /// MCLMC, MAMS: precondition with the warmup positions' standard deviations (MILE runs
    /// without) [default: true].
    #[arg(long)]
    pub diagonal_preconditioning: Option<bool>,
    /// MSD: `cos α` of the Horowitz momentum refresh, in [0, 1) (0: fresh momentum every
    /// iteration) [default: 0.95].
    #[arg(long)]
    pub persistence: Option<f64>,
    /// MSD: Zlochin & Baram's cheap integrator, the metric frozen within the step (approximate:
    /// the chain is biased) [default: false, the exact generalized leapfrog].
    #[arg(long)]
    pub frozen_metric: Option<bool>,
    /// MSD: tolerance of the implicit steps' fixed-point iterations [default: 1e-9].
    #[arg(long)]
    pub fixed_point_tolerance: Option<f64>,
    /// MSD: fixed-point iterations per implicit equation before a step counts as divergent
    /// [default: 100].
    #[arg(long)]
    pub max_fixed_point_iterations: Option<usize>,
    /// `false`: fixed-step sampling (no step-size or metric adaptation, identity metric; the
    /// warmup iterations are a discarded burn-in). Needs --step-size for HMC and NUTS [default: true].
    #[arg(long)]
    pub adapt: Option<bool>,
    /// Keep every k-th draw [default: the sampler's budget: 1; MCLMC 10].
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
    /// auto (the fused operation: host kernel on CPU devices, one device kernel per call on wgpu,
    /// the tensor program where that kernel does not cover the model), tensor_ops (the tensor
    /// program on every device) or plain (Burn's graph).
    #[arg(long)]
    pub gradient: Option<GradientPath>,
}

fn set<T: Clone>(target: &mut T, value: &Option<T>) {
    if let Some(v) = value {
        *target = v.clone();
    }
}

impl RunFlags {
    /// The config of a `bnn sample` or `bnn run` into `dir`. Where `dir` holds a trained
    /// ensemble and no draws (`bnn train` ran there), its data, model and ensemble sections and
    /// seed are the stored ones and only the sampler and runtime come from the flags and
    /// `--config`; a setting given on purpose that contradicts the stored ensemble is refused.
    pub fn resolve_for(&self, dir: &Path) -> Result<RunConfig> {
        let run_dir = RunDir::new(dir);
        if !(run_dir.config().is_file() && run_dir.has_ensemble() && !run_dir.has_draws()) {
            return self.resolve();
        }
        self.resolve_over_ensemble_in(dir)
    }

    /// The config of sampling from the trained ensemble in `source` (`bnn sample --from`).
    pub fn resolve_over_ensemble_in(&self, source: &Path) -> Result<RunConfig> {
        let run_dir = RunDir::new(source);
        if !run_dir.has_ensemble() {
            anyhow::bail!("{} holds no trained ensemble (no ensemble/members.json); train one with `bnn train --out {}`", source.display(), source.display());
        }
        let stored = run_dir.load_config()?;
        let config = self.resolve()?.over_stored_ensemble(
            &stored,
            &self.explicit_ensemble_settings()?,
            source,
        )?;
        config.check_memory()?;
        Ok(config)
    }

    /// The settings that decide an ensemble which this command gives on purpose, as `(how it
    /// was given, section, key)`: flags that are present, and keys of the `--config` file.
    fn explicit_ensemble_settings(&self) -> Result<Vec<(String, &'static str, &'static str)>> {
        let f = self;
        // The MILE recipe sets the validation split and the training settings it names.
        let by_recipe = f.mile || f.preset.is_some_and(Preset::is_mile);
        let flags: [(&str, &str, &str, bool); 21] = [
            ("--dataset", "data", "dataset", f.dataset.is_some()),
            ("--split-seed", "data", "split_seed", f.split_seed.is_some()),
            (
                "--test-fraction",
                "data",
                "test_fraction",
                f.test_fraction.is_some(),
            ),
            (
                "--validation-fraction",
                "data",
                "validation_fraction",
                f.validation_fraction.is_some() || by_recipe,
            ),
            (
                "--standardize",
                "data",
                "standardize",
                f.standardize.is_some(),
            ),
            (
                "--target",
                "data",
                "target_columns",
                !f.target_columns.is_empty(),
            ),
            ("--hidden", "model", "hidden", f.hidden.is_some()),
            (
                "--activation",
                "model",
                "activation",
                f.activation.is_some() || f.preset == Some(Preset::Sommer2024),
            ),
            (
                "--likelihood",
                "model",
                "likelihood",
                f.likelihood.is_some(),
            ),
            ("--targets", "model", "targets", f.targets.is_some()),
            ("--prior", "model", "prior", f.prior.is_some()),
            (
                "--layer-prior",
                "model",
                "layer_priors",
                !f.layer_priors.is_empty(),
            ),
            ("--members", "ensemble", "members", f.members.is_some()),
            (
                "--epochs",
                "ensemble",
                "epochs",
                f.epochs.is_some() || by_recipe,
            ),
            (
                "--learning-rate",
                "ensemble",
                "learning_rate",
                f.learning_rate.is_some() || by_recipe,
            ),
            (
                "--weight-decay",
                "ensemble",
                "weight_decay",
                f.weight_decay.is_some() || by_recipe,
            ),
            (
                "--batch-size",
                "ensemble",
                "batch_size",
                f.batch_size.is_some() || by_recipe,
            ),
            (
                "--patience",
                "ensemble",
                "patience",
                f.patience.is_some() || by_recipe,
            ),
            (
                "--decoupled-weight-decay",
                "ensemble",
                "decoupled_weight_decay",
                f.decoupled_weight_decay.is_some() || by_recipe,
            ),
            (
                "--weight-init",
                "ensemble",
                "weight_init",
                f.weight_init.is_some(),
            ),
            ("--seed", "sampler", "seed", f.seed.is_some()),
        ];
        let recipe = if f.preset == Some(Preset::Smile) {
            " (or --preset smile)"
        } else if f.preset == Some(Preset::Sommer2024) {
            " (or --preset sommer2024)"
        } else if f.preset.is_some() {
            " (or --preset mile)"
        } else if f.mile {
            " (or --mile)"
        } else {
            ""
        };
        let mut explicit: Vec<(String, &'static str, &'static str)> = flags
            .iter()
            .filter(|(.., set)| *set)
            .map(|&(flag, section, key, _)| (format!("{flag}{recipe}"), section, key))
            .collect();
        if let Some(path) = &self.config {
            for (section, key) in RunConfig::keys_in_toml_file(path)? {
                let known = flags
                    .iter()
                    .map(|&(_, s, k, _)| (s, k))
                    .find(|&(s, k)| s == section && k == key);
                if let Some((section, key)) = known {
                    explicit.push((
                        format!("[{section}] {key} in {}", path.display()),
                        section,
                        key,
                    ));
                }
            }
        }
        Ok(explicit)
    }

    /// The sampler the flags choose: `--sampler`, else the one `--preset` implies. An old flat
    /// `--config` file's settings are read for it (as they were before the settings nested).
    fn chosen_sampler(&self) -> Option<&str> {
        self.sampler.as_deref().or(match self.preset {
            Some(Preset::Mile) => Some(MclmcConfig::NAME),
            Some(Preset::Smile) => Some(SmileConfig::NAME),
            Some(Preset::Sommer2024) => Some(NutsConfig::NAME),
            None => None,
        })
    }

    /// Defaults, then `--config`, then the flags. A budget (warmup, draws, thin) that neither
    /// a flag, the file nor `--preset` sets is the chosen sampler's own default
    /// (`SamplerSettings::default_budget`: MCLMC runs at MILE's, the others at DEI-MCMC's). A
    /// run that needs more memory than the machine has available is refused.
    pub fn resolve(&self) -> Result<RunConfig> {
        let (base, file_keys) = match &self.config {
            Some(path) => (
                RunConfig::from_toml_file_for_sampler(path, self.chosen_sampler())?,
                RunConfig::keys_in_toml_file(path)?,
            ),
            None => (RunConfig::new(), Vec::new()),
        };
        let mut config = self.apply(base)?;
        if !self.preset.is_some_and(Preset::is_mile) {
            let budget = config
                .sampler
                .sampler_config(None)
                .algorithm
                .default_budget();
            let in_file = |key: &str| {
                file_keys
                    .iter()
                    .any(|(section, k)| section == "sampler" && k == key)
            };
            let s = &mut config.sampler;
            for (value, flag, key, default) in [
                (&mut s.warmup, self.warmup, "warmup", budget.warmup),
                (&mut s.draws, self.draws, "draws", budget.draws),
                (&mut s.thin, self.thin, "thin", budget.thin),
            ] {
                if flag.is_none() && !in_file(key) {
                    *value = default;
                }
            }
            config.validate()?;
        }
        // Before anything is loaded or trained: an abort on a failed allocation comes late and
        // names nothing.
        config.check_memory()?;
        Ok(config)
    }

    /// `config` with every flag that is present applied on top, validated.
    pub fn apply(&self, config: RunConfig) -> Result<RunConfig> {
        self.apply_with(config, false)
    }

    /// As [`RunFlags::apply`], but a flag for a setting the chosen sampler does not have is
    /// passed over instead of refused: for flags given to runs of several samplers at once
    /// (`bnn study mile --extra`).
    pub fn apply_to_any_sampler(&self, config: RunConfig) -> Result<RunConfig> {
        self.apply_with(config, true)
    }

    fn apply_with(&self, mut config: RunConfig, lenient: bool) -> Result<RunConfig> {
        let f = self;
        if f.mile {
            config = config.with_mile();
        }
        match f.preset {
            Some(Preset::Mile) => config = config.with_mile().with_mile_sampling(),
            Some(Preset::Smile) => config = config.with_mile().with_smile_sampling(),
            Some(Preset::Sommer2024) => config = config.with_sommer2024(),
            None => {}
        }
        let d = &mut config.data;
        set(&mut d.dataset, &f.dataset);
        set(&mut d.split_seed, &f.split_seed);
        set(&mut d.test_fraction, &f.test_fraction);
        set(&mut d.validation_fraction, &f.validation_fraction);
        set(&mut d.standardize, &f.standardize);
        if !f.target_columns.is_empty() {
            d.target_columns = f.target_columns.clone();
        }
        let m = &mut config.model;
        if let Some(hidden) = &f.hidden {
            m.hidden = parse_hidden(hidden)?;
        }
        set(&mut m.activation, &f.activation);
        set(&mut m.likelihood, &f.likelihood);
        if f.targets.is_some() {
            m.targets = f.targets;
        }
        set(&mut m.prior, &f.prior);
        if !f.layer_priors.is_empty() {
            m.layer_priors = f.layer_priors.clone();
        }
        let e = &mut config.ensemble;
        set(&mut e.members, &f.members);
        set(&mut e.epochs, &f.epochs);
        set(&mut e.learning_rate, &f.learning_rate);
        set(&mut e.weight_decay, &f.weight_decay);
        set(&mut e.decoupled_weight_decay, &f.decoupled_weight_decay);
        set(&mut e.weight_init, &f.weight_init);
        if f.batch_size.is_some() {
            e.batch_size = f.batch_size;
        }
        if f.patience.is_some() {
            e.patience = f.patience;
        }
        let s = &mut config.sampler;
        if let Some(name) = &f.sampler {
            // Another sampler starts from its own defaults; the same one keeps the file's settings.
            s.algorithm = s
                .algorithm
                .switched_to(name)
                .map_err(|e| anyhow::anyhow!("--sampler: {e}"))?;
        }
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
        if f.step_size.is_some() {
            s.step_size = f.step_size;
        }
        f.apply_sampler_settings(s, lenient)?;
        set(&mut s.adapt, &f.adapt);
        set(&mut s.thin, &f.thin);
        set(&mut s.seed, &f.seed);
        set(&mut s.batched, &f.batched);
        set(&mut s.checkpoint_every, &f.checkpoint_every);
        set(&mut s.early_stop, &f.early_stop);
        set(&mut s.early_stop_window, &f.early_stop_window);
        set(&mut s.early_stop_tolerance, &f.early_stop_tolerance);
        set(&mut s.step_size_search, &f.step_size_search);
        set(&mut s.metric_estimate, &f.metric_estimate);
        set(&mut s.warmup_policy, &f.warmup_policy);
        set(&mut s.warmup_check, &f.warmup_check);
        if f.max_warmup.is_some() {
            s.max_warmup = f.max_warmup;
        }
        let asks_stationary = f.warmup_policy == Some(WarmupPolicy::Stationary)
            || f.warmup_check.is_some()
            || f.max_warmup.is_some();
        if asks_stationary && !s.algorithm.0.supports_stationary_warmup() {
            anyhow::bail!(
                "--warmup-policy stationary, --warmup-check and --max-warmup are NUTS's; {} keeps its own warmup",
                s.algorithm.0.name()
            );
        }
        set(&mut config.runtime.device, &f.device);
        if f.threads.is_some() {
            config.runtime.threads = f.threads;
        }
        set(&mut config.runtime.gradient, &f.gradient);
        config.validate()?;
        Ok(config)
    }
}

impl RunFlags {
    /// The flags for the chosen sampler's own settings (`[sampler.algorithm]`), each refused,
    /// naming the flag, where that sampler has no such setting (unless `lenient`).
    fn apply_sampler_settings(&self, s: &mut SamplerSection, lenient: bool) -> Result<()> {
        use toml::Value;
        let f = self;
        let counts = [
            ("--max-depth", f.max_depth),
            ("--num-steps", f.leapfrog_steps),
            ("--steps-per-draw", f.steps_per_draw),
            ("--sampler-batch-size", f.sampler_batch_size),
            ("--max-fixed-point-iterations", f.max_fixed_point_iterations),
        ];
        for (flag, value) in counts {
            if let Some(v) = value.filter(|&v| i64::try_from(v).is_err()) {
                anyhow::bail!(
                    "{flag} must be at most {} (the largest integer config.toml can hold), got {v}",
                    i64::MAX
                );
            }
        }
        // In range: checked above.
        let int = |v: usize| Value::Integer(v as i64);
        let mut settings: Vec<(&str, &str, Value)> = Vec::new();
        settings.extend(
            f.target_accept
                .map(|v| ("--target-accept", "target_accept", Value::Float(v))),
        );
        settings.extend(
            f.max_depth
                .map(|v| ("--max-depth", "max_tree_depth", int(v))),
        );
        settings.extend(
            f.leapfrog_steps
                .map(|v| ("--num-steps", "num_steps", int(v))),
        );
        settings.extend(
            f.steps_per_draw
                .map(|v| ("--steps-per-draw", "steps_per_draw", int(v))),
        );
        settings.extend(
            f.sampler_batch_size
                .map(|v| ("--sampler-batch-size", "batch_size", int(v))),
        );
        settings.extend(f.trajectory_length.map(|v| {
            (
                "--trajectory-length",
                "initial_trajectory_length",
                Value::Float(v),
            )
        }));
        settings.extend(f.energy_variance_start.map(|v| {
            (
                "--energy-variance-start",
                "energy_variance_start",
                Value::Float(v),
            )
        }));
        settings.extend(f.energy_variance_end.map(|v| {
            (
                "--energy-variance-end",
                "energy_variance_end",
                Value::Float(v),
            )
        }));
        settings.extend(f.trajectory_length_factor.map(|v| {
            (
                "--trajectory-length-factor",
                "trajectory_length_factor",
                Value::Float(v),
            )
        }));
        settings.extend(f.diagonal_preconditioning.map(|v| {
            (
                "--diagonal-preconditioning",
                "diagonal_preconditioning",
                Value::Boolean(v),
            )
        }));
        settings.extend(
            f.persistence
                .map(|v| ("--persistence", "persistence", Value::Float(v))),
        );
        settings.extend(
            f.frozen_metric
                .map(|v| ("--frozen-metric", "frozen_metric", Value::Boolean(v))),
        );
        settings.extend(f.fixed_point_tolerance.map(|v| {
            (
                "--fixed-point-tolerance",
                "fixed_point_tolerance",
                Value::Float(v),
            )
        }));
        settings.extend(f.max_fixed_point_iterations.map(|v| {
            (
                "--max-fixed-point-iterations",
                "max_fixed_point_iterations",
                int(v),
            )
        }));
        if let Some(text) = &f.tune_fractions {
            let fractions: Vec<f64> = text
                .split(',')
                .map(|part| part.trim().parse::<f64>().map_err(|_| anyhow::anyhow!("--tune-fractions: '{part}' is not a number (expected e.g. 0.8,0.1,0.1)")))
                .collect::<Result<_>>()?;
            if s.algorithm.has("phase1_fraction") {
                // MCLMC's three shares; its settings hold the first two (the third is the rest).
                check_mclmc_fractions(&fractions)?;
                settings.push((
                    "--tune-fractions",
                    "phase1_fraction",
                    Value::Float(fractions[0]),
                ));
                settings.push((
                    "--tune-fractions",
                    "phase2_fraction",
                    Value::Float(fractions[1]),
                ));
            } else if s.algorithm.has("tune_fractions") || lenient {
                let list = fractions.into_iter().map(Value::Float).collect();
                settings.push(("--tune-fractions", "tune_fractions", Value::Array(list)));
            } else {
                let mut have = samplers_with("phase1_fraction");
                have.extend(samplers_with("tune_fractions"));
                anyhow::bail!(
                    "--tune-fractions: {} has no warmup phases to share out ({} have)",
                    s.algorithm.name(),
                    have.join(", ")
                );
            }
        }
        for (flag, key, value) in settings {
            if lenient && !s.algorithm.has(key) {
                continue;
            }
            s.algorithm
                .set(key, value.clone())
                .map_err(|e| anyhow::anyhow!("{flag}: {e}"))?;
        }
        Ok(())
    }
}

fn parse_metric_estimate(value: &str) -> anyhow::Result<MetricEstimate> {
    match value {
        "draws" => Ok(MetricEstimate::Draws),
        "draws-and-gradients" | "draws_and_gradients" => Ok(MetricEstimate::DrawsAndGradients),
        other => anyhow::bail!("'{other}': expected draws or draws-and-gradients"),
    }
}

pub(crate) fn parse_warmup_policy(value: &str) -> anyhow::Result<WarmupPolicy> {
    WarmupPolicy::named(value)
        .ok_or_else(|| anyhow::anyhow!("'{value}': expected {}", WarmupPolicy::NAMES.join(" or ")))
}

fn parse_weight_init(value: &str) -> anyhow::Result<WeightInit> {
    WeightInit::named(value)
        .ok_or_else(|| anyhow::anyhow!("'{value}': expected {}", WeightInit::NAMES.join(" or ")))
}

fn parse_step_size_search(value: &str) -> anyhow::Result<StepSizeSearch> {
    match value {
        "stan" => Ok(StepSizeSearch::Stan),
        "target" => Ok(StepSizeSearch::Target),
        other => anyhow::bail!("'{other}': expected stan or target"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_override_file_which_overrides_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.toml");
        std::fs::write(
            &path,
            "[data]\ndataset = \"concrete\"\n[sampler]\ndraws = 300\nwarmup = 50\n",
        )
        .unwrap();
        let flags = RunFlags {
            config: Some(path),
            warmup: Some(7),
            ..RunFlags::default()
        };
        let config = flags.resolve().unwrap();
        assert_eq!(config.data.dataset, "concrete");
        assert_eq!(config.sampler.draws, 300);
        assert_eq!(config.sampler.warmup, 7);
        assert_eq!(config.ensemble.members, 12);
    }

    #[test]
    fn typos_and_impossible_settings_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.toml");
        std::fs::write(&path, "[sampler]\ndraw = 300\n").unwrap();
        let error = RunFlags {
            config: Some(path.clone()),
            ..RunFlags::default()
        }
        .resolve()
        .unwrap_err();
        let expected = format!(
            "config {}: line 2: unknown key `draw` in [sampler]; valid keys: ",
            path.display()
        );
        assert!(format!("{error:#}").starts_with(&expected), "{error:#}");
        for flags in [
            RunFlags {
                draws: Some(0),
                ..RunFlags::default()
            },
            RunFlags {
                thin: Some(0),
                ..RunFlags::default()
            },
            RunFlags {
                patience: Some(3),
                ..RunFlags::default()
            },
            RunFlags {
                init: Some(Init::Single),
                ..RunFlags::default()
            },
            RunFlags {
                activation: Some("swish2".into()),
                ..RunFlags::default()
            },
            RunFlags {
                device: Some("tpu".into()),
                ..RunFlags::default()
            },
            RunFlags {
                adapt: Some(false),
                ..RunFlags::default()
            },
            RunFlags {
                step_size: Some(-0.1),
                ..RunFlags::default()
            },
            RunFlags {
                step_size: Some(f64::NAN),
                ..RunFlags::default()
            },
        ] {
            assert!(flags.resolve().is_err(), "{flags:?}");
        }
    }

    #[test]
    fn fixed_step_hmc_flags_reach_the_sampler() {
        let flags = RunFlags {
            sampler: Some("hmc".into()),
            step_size: Some(0.001),
            leapfrog_steps: Some(200),
            adapt: Some(false),
            ..RunFlags::default()
        };
        let sampler = flags.resolve().unwrap().sampler.sampler_config(None);
        assert!(!sampler.warmup.adapt_step_size && !sampler.warmup.adapt_metric);
        assert_eq!(sampler.initial_step_size, Some(0.001));
        match sampler.algorithm {
            bnn_sampler::AlgorithmConfig::Hmc(hmc) => assert_eq!(hmc.num_steps, 200),
            other => panic!("expected HMC, got {other:?}"),
        }
        let adaptive = RunFlags::default()
            .resolve()
            .unwrap()
            .sampler
            .sampler_config(None);
        assert!(
            adaptive.warmup.adapt_step_size
                && adaptive.warmup.adapt_metric
                && adaptive.initial_step_size.is_none()
        );
    }

    #[test]
    fn a_sampler_named_alone_runs_at_its_own_budget() {
        let budget = |flags: RunFlags| {
            let s = flags.resolve().unwrap().sampler;
            (s.warmup, s.draws, s.thin)
        };
        let mclmc = |flags: RunFlags| RunFlags {
            sampler: Some("mclmc".into()),
            ..flags
        };
        assert_eq!(
            budget(RunFlags::default()),
            (100, 1000, 1),
            "NUTS: DEI-MCMC's"
        );
        assert_eq!(
            budget(mclmc(RunFlags::default())),
            (50_000, 10_000, 10),
            "MILE's"
        );
        let given = RunFlags {
            warmup: Some(500),
            ..RunFlags::default()
        };
        assert_eq!(budget(mclmc(given)), (500, 10_000, 10), "a flag wins");
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("run.toml");
        std::fs::write(&file, "[sampler]\nalgorithm = \"mclmc\"\ndraws = 300\n").unwrap();
        let from_file = RunFlags {
            config: Some(file),
            ..RunFlags::default()
        };
        assert_eq!(
            budget(from_file),
            (50_000, 300, 10),
            "a key of the file wins"
        );
    }

    /// Flags over an old flat `--config` file act as they did before the settings nested: the
    /// file's keys reach the sampler `--sampler` or `--preset` chooses.
    #[test]
    fn flags_over_an_old_flat_file_keep_its_keys() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("old.toml");
        std::fs::write(
            &file,
            "[sampler]\nalgorithm = \"nuts\"\ntarget_accept = 0.6\nleapfrog_steps = 2000\ntrajectory_length = 20.0\n",
        )
        .unwrap();
        let resolved = |sampler: Option<&str>, preset: Option<Preset>| {
            RunFlags {
                config: Some(file.clone()),
                sampler: sampler.map(String::from),
                preset,
                ..RunFlags::default()
            }
            .resolve()
            .unwrap()
            .sampler
            .algorithm
            .0
        };
        match resolved(Some("hmc"), None) {
            bnn_sampler::AlgorithmConfig::Hmc(hmc) => assert_eq!(
                (hmc.num_steps, hmc.max_num_steps, hmc.target_accept),
                (2000, 2000, 0.6)
            ),
            other => panic!("{other:?}"),
        }
        // (MCLMC has no acceptance target: an old file for it never held one.)
        std::fs::write(
            &file,
            "[sampler]\nalgorithm = \"nuts\"\ntrajectory_length = 20.0\n",
        )
        .unwrap();
        match resolved(None, Some(Preset::Mile)) {
            bnn_sampler::AlgorithmConfig::Mclmc(mclmc) => {
                assert_eq!(mclmc.initial_trajectory_length, Some(20.0))
            }
            other => panic!("{other:?}"),
        }
        // The current shape: a file's MCLMC settings survive the preset too.
        std::fs::write(
            &file,
            "[sampler.algorithm]\nname = \"mclmc\"\ninitial_trajectory_length = 20.0\n",
        )
        .unwrap();
        match resolved(None, Some(Preset::Mile)) {
            bnn_sampler::AlgorithmConfig::Mclmc(mclmc) => {
                assert_eq!(mclmc.initial_trajectory_length, Some(20.0))
            }
            other => panic!("{other:?}"),
        }
        // And a file's step count beyond the default cap is taken whole.
        std::fs::write(
            &file,
            "[sampler.algorithm]\nname = \"hmc\"\nnum_steps = 2000\n",
        )
        .unwrap();
        match resolved(None, None) {
            bnn_sampler::AlgorithmConfig::Hmc(hmc) => {
                assert_eq!((hmc.num_steps, hmc.max_num_steps), (2000, 2000))
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn smile_preset_runs_smile_at_miles_budget_with_its_batch_flag() {
        let config = RunFlags {
            preset: Some(Preset::Smile),
            sampler_batch_size: Some(512),
            ..RunFlags::default()
        }
        .resolve()
        .unwrap();
        assert_eq!(
            (
                config.sampler.warmup,
                config.sampler.draws,
                config.sampler.thin
            ),
            (50_000, 10_000, 10)
        );
        assert_eq!(config.ensemble.batch_size, Some(32), "the --mile members");
        match config.sampler.sampler_config(None).algorithm {
            bnn_sampler::AlgorithmConfig::Smile(smile) => assert_eq!(smile.batch_size, 512),
            other => panic!("{other:?}"),
        }
        let flags = RunFlags {
            sampler: Some("nuts".into()),
            sampler_batch_size: Some(512),
            ..RunFlags::default()
        };
        let message = format!("{:#}", flags.resolve().unwrap_err());
        assert!(message.contains("--sampler-batch-size"), "{message}");
    }

    #[test]
    fn mile_preset_runs_mclmc_at_miles_budget_and_flags_still_win() {
        let config = RunFlags {
            preset: Some(Preset::Mile),
            draws: Some(2000),
            ..RunFlags::default()
        }
        .resolve()
        .unwrap();
        assert_eq!(config.sampler.algorithm.name(), "mclmc");
        assert_eq!(
            (
                config.sampler.warmup,
                config.sampler.draws,
                config.sampler.thin
            ),
            (50_000, 2000, 10)
        );
        assert_eq!(config.ensemble.batch_size, Some(32));
        let flags = RunFlags {
            sampler: Some("mclmc".into()),
            tune_fractions: Some("0.5,0.3".into()),
            ..RunFlags::default()
        };
        assert!(flags.resolve().is_err(), "two phase shares are refused");
        let flags = RunFlags {
            sampler: Some("mclmc".into()),
            tune_fractions: Some("0.5,0.3,0.2".into()),
            energy_variance_end: Some(0.01),
            ..RunFlags::default()
        };
        match flags
            .resolve()
            .unwrap()
            .sampler
            .sampler_config(None)
            .algorithm
        {
            bnn_sampler::AlgorithmConfig::Mclmc(mclmc) => {
                assert_eq!(
                    (
                        mclmc.phase1_fraction,
                        mclmc.phase2_fraction,
                        mclmc.energy_variance_end
                    ),
                    (0.5, 0.3, 0.01)
                )
            }
            other => panic!("expected MCLMC, got {other:?}"),
        }
        let flags = RunFlags {
            sampler: Some("mclmc".into()),
            target_accept: Some(0.8),
            ..RunFlags::default()
        };
        assert!(flags.resolve().is_err(), "MCLMC has no acceptance target");
        let flags = RunFlags {
            sampler: Some("mams".into()),
            target_accept: Some(0.8),
            tune_fractions: Some("0.25,0.25,0.25,0.25".into()),
            ..RunFlags::default()
        };
        match flags
            .resolve()
            .unwrap()
            .sampler
            .sampler_config(None)
            .algorithm
        {
            bnn_sampler::AlgorithmConfig::Mams(mams) => assert_eq!(
                (mams.target_accept, mams.tune_fractions),
                (0.8, vec![0.25; 4])
            ),
            other => panic!("expected MAMS, got {other:?}"),
        }
        let flags = RunFlags {
            sampler: Some("mams".into()),
            tune_fractions: Some("0.5,0.5".into()),
            ..RunFlags::default()
        };
        assert!(flags.resolve().is_err(), "MAMS needs four phase shares");
        let default = RunFlags::default()
            .resolve()
            .unwrap()
            .sampler
            .sampler_config(None);
        assert_eq!(default.warmup.step_size_search, StepSizeSearch::Stan);
        let flags = RunFlags {
            step_size_search: Some(StepSizeSearch::Target),
            ..RunFlags::default()
        };
        assert_eq!(
            flags
                .resolve()
                .unwrap()
                .sampler
                .sampler_config(None)
                .warmup
                .step_size_search,
            StepSizeSearch::Target
        );
        assert!(parse_step_size_search("numpyro").is_err());
        assert_eq!(default.warmup.metric_estimate, MetricEstimate::Draws);
        let flags = RunFlags {
            metric_estimate: Some(MetricEstimate::DrawsAndGradients),
            ..RunFlags::default()
        };
        assert_eq!(
            flags
                .resolve()
                .unwrap()
                .sampler
                .sampler_config(None)
                .warmup
                .metric_estimate,
            MetricEstimate::DrawsAndGradients
        );
        assert!(parse_metric_estimate("gradients").is_err());
    }

    /// `bnn run`'s defaults as the command line resolves them are the defaults study's
    /// measured choice (its committed results name it), and `--preset sommer2024` is the paper.
    #[test]
    fn the_defaults_are_the_studys_choice_and_the_preset_is_the_papers() {
        use bnn_pipeline::{FLAGSHIP, SOMMER2024};
        let target = |c: &RunConfig| c.sampler.algorithm.get("target_accept");
        let default = RunFlags::default().resolve().unwrap();
        assert_eq!(default.sampler.algorithm.name(), "nuts");
        assert_eq!(
            (
                default.model.activation.as_str(),
                target(&default),
                default.sampler.warmup_policy
            ),
            (
                "tanh",
                Some(toml::Value::Float(0.95)),
                WarmupPolicy::Stationary
            )
        );
        assert_eq!(default.model.activation, FLAGSHIP.activation);
        let results =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../bnn-study/results/defaults/defaults.md");
        let results = std::fs::read_to_string(&results)
            .unwrap_or_else(|e| panic!("{}: {e}", results.display()));
        let choice = format!("Measured choice so far (every dataset finished; most goals met, then mean LPPD): **{}**", FLAGSHIP.candidate_name());
        assert!(results.contains(&choice), "{choice}");

        let paper = RunFlags {
            preset: Some(Preset::Sommer2024),
            ..RunFlags::default()
        };
        let config = paper.resolve().unwrap();
        assert_eq!(
            (
                config.model.activation.as_str(),
                target(&config),
                config.sampler.warmup_policy
            ),
            (
                SOMMER2024.activation,
                Some(toml::Value::Float(0.8)),
                WarmupPolicy::Fixed
            )
        );
        assert_eq!((config.sampler.warmup, config.sampler.draws), (100, 1000));
        assert_eq!(config.model.hidden, [16, 16]);
        // Flags still win over the preset, and a stored tanh ensemble is not silently
        // sampled as ReLU: the preset's activation counts as asked.
        let flagged = RunFlags {
            preset: Some(Preset::Sommer2024),
            target_accept: Some(0.9),
            ..RunFlags::default()
        };
        assert_eq!(
            target(&flagged.resolve().unwrap()),
            Some(toml::Value::Float(0.9))
        );
        let asked = paper.explicit_ensemble_settings().unwrap();
        assert!(
            asked
                .iter()
                .any(|(how, _, key)| *key == "activation" && how.contains("--preset sommer2024")),
            "{asked:?}"
        );
    }

    #[test]
    fn nuts_warms_up_by_the_stationary_policy_unless_told_fixed() {
        use bnn_sampler::WarmupPolicy;
        let default = RunFlags::default().resolve().unwrap();
        assert!(default.sampler.stationary_warmup());
        let warmup = default.sampler.sampler_config(None).warmup;
        assert_eq!(warmup.policy, WarmupPolicy::Stationary);
        assert_eq!(warmup.stationarity.max_warmup, 100 + 500);
        assert_eq!(warmup.stationarity.check_window, 50);
        let fixed = RunFlags {
            warmup_policy: Some(WarmupPolicy::Fixed),
            ..RunFlags::default()
        }
        .resolve()
        .unwrap();
        assert_eq!(
            fixed.sampler.sampler_config(None).warmup.policy,
            WarmupPolicy::Fixed
        );
        let tuned = RunFlags {
            warmup_check: Some(30),
            max_warmup: Some(400),
            ..RunFlags::default()
        }
        .resolve()
        .unwrap();
        let stationarity = tuned.sampler.sampler_config(None).warmup.stationarity;
        assert_eq!(
            (stationarity.check_window, stationarity.max_warmup),
            (30, 400)
        );
        // MCLMC keeps its own tuner: the default leaves it alone, asking for the policy is refused.
        let mclmc = RunFlags {
            sampler: Some("mclmc".into()),
            ..RunFlags::default()
        }
        .resolve()
        .unwrap();
        assert!(!mclmc.sampler.stationary_warmup());
        for flags in [
            RunFlags {
                sampler: Some("mclmc".into()),
                warmup_policy: Some(WarmupPolicy::Stationary),
                ..RunFlags::default()
            },
            RunFlags {
                sampler: Some("hmc".into()),
                max_warmup: Some(400),
                ..RunFlags::default()
            },
        ] {
            let error = format!("{:#}", flags.resolve().unwrap_err());
            assert!(error.contains("--warmup-policy stationary"), "{error}");
        }
        let too_small = RunFlags {
            max_warmup: Some(120),
            ..RunFlags::default()
        }
        .resolve()
        .unwrap_err();
        assert!(
            format!("{too_small:#}").contains("--max-warmup (config key `max_warmup`)"),
            "{too_small:#}"
        );
        assert!(parse_warmup_policy("adaptive").is_err());
    }

    #[test]
    fn mile_recipe_sets_its_parts_and_flags_still_win() {
        let config = RunFlags {
            mile: true,
            patience: Some(4),
            ..RunFlags::default()
        }
        .resolve()
        .unwrap();
        assert_eq!(config.ensemble.batch_size, Some(32));
        assert_eq!(config.ensemble.patience, Some(4));
        assert!(config.ensemble.decoupled_weight_decay);
        assert_eq!(config.data.validation_fraction, 0.1);
    }
}

//! `bnn study <name>`: reproductions of the papers' experiments (library: bnn-study), with a
//! progress bar and the paper's numbers beside ours.

use crate::progress_bars::ProgressBars;
use crate::run_flags::{parse_warmup_policy, RunFlags};
use anyhow::{Context as _, Result};
use bnn_model::{Activation, DeviceName};
use bnn_sampler::WarmupPolicy;
use bnn_study::defaults::{default_candidates, run_defaults, Candidate, DefaultsConfig};
use bnn_study::dei_runs::{ExtraRunFlags, RunsProgress};
use bnn_study::dinh::{run_dinh, DinhConfig, DinhPart, Precision};
use bnn_study::lhnn::bnn::{BnnProblem, LhnnBnnConfig};
use bnn_study::lhnn::{run_lhnn_study, Benchmark, LhnnSampler, LhnnStudyConfig};
use bnn_study::mile::{run_mile, MileConfig};
use bnn_study::pseudo_marginal::{
    run_pm_glmm, run_pm_sv, GlmmEstimator, GlmmPrior, GlmmProposal, PmGlmmConfig, PmSvConfig,
    SubjectHnnConfig,
};
use bnn_study::robot_arm::{run_robot_arm, ArmSampler, RobotArmConfig};
use bnn_study::table3::{run_table3, PaperTable, Table3Config, TABLE3, TABLE8};
use bnn_study::{Progress, StartPoint};
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, PoisonError};

#[derive(Subcommand, Debug)]
pub enum StudyCommand {
    /// Dinh et al. 2024, "HMC on ReLU networks is inefficient": fixed-step HMC acceptance
    /// (Table 2, Figure 1), efficiency vs acceptance (Figure 2a), network size (Figure 3).
    Dinh(DinhArgs),
    /// Zlochin & Baram: manifold stochastic dynamics (exact and frozen) against HMC with long and
    /// short trajectories and NUTS on MacKay's robot arm: test MSE, autocorrelations, cost per
    /// iteration and per effective sample (analytic flops and wall time).
    RobotArm(RobotArmArgs),
    /// Dhulipala, Che & Shields 2023: latent Hamiltonian neural networks inside NUTS (exact
    /// surrogate leaves and the paper's online error monitoring) against fixed-ε and adapted NUTS
    /// on the paper's targets: true gradients per effective sample, marginals against a long
    /// reference.
    Lhnn(LhnnArgs),
    /// The HNN report's GLMM (Alenlöv et al. §4.3) by pseudo-marginal NUTS, with the report's
    /// likelihood estimator and with the model's, on simulated data: which posterior covers the
    /// truth, and where log λ goes.
    PmGlmm(PmGlmmArgs),
    /// The HNN report's stochastic volatility model (§4.1) by pseudo-marginal NUTS with a
    /// prior-path importance-sampling likelihood, on simulated returns: coverage of the truth,
    /// cost, and the variance of log p̂ that decides the sampler's efficiency.
    PmSv(PmSvArgs),
    /// Sommer et al. 2024, Table 3: DEI-MCMC against the deep ensemble on six UCI sets, one
    /// whole run per dataset and split at the paper's settings, tables beside the paper's
    /// numbers. Finished runs in --out are reused; a stopped one continues.
    Table3(DeiTableArgs),
    /// Sommer et al. 2024, Table 8: the same against the deep ensemble with a deep network (nine
    /// hidden ReLU layers of eight units) on four UCI sets, tables beside the paper's numbers.
    /// Finished runs in --out are reused; a stopped one continues.
    Table8(DeiTableArgs),
    /// The flagship's defaults from evidence: candidates (activation, target acceptance, warmup)
    /// each run as Table 3 runs on the small UCI sets from the same seeds, side by side per
    /// dataset, checked against the goals of `bnn run`'s defaults. Finished runs in --out are
    /// reused; a stopped one continues.
    Defaults(DefaultsArgs),
    /// MILE (Sommer et al. 2025, MCLMC) against DEI-NUTS from the same deep-ensemble members:
    /// predictive quality, time and gradients. Finished runs in --out are reused.
    Mile(MileArgs),
}

/// Where a DEI-MCMC-against-the-ensemble table (Table 3, Table 8) goes, its datasets, splits and
/// NUTS budget; the folder and datasets default from the table's [`PaperTable`].
#[derive(Args, Debug)]
pub struct DeiTableArgs {
    /// Output folder: one run directory per dataset and split (finished ones are reused), the
    /// table's markdown (table3.md, table8.md) and study.json [default: runs/table3 or
    /// runs/table8].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Datasets, each one of the table's [default: all of them: Table 3's airfoil, bikesharing,
    /// concrete, energy, protein, yacht; Table 8's airfoil, bikesharing, concrete, energy].
    #[arg(long, value_delimiter = ',')]
    pub datasets: Option<Vec<String>>,
    /// Splits (split seeds 0..N) of the small sets (under 10,000 rows: airfoil, concrete, energy,
    /// yacht).
    #[arg(long, default_value_t = 3)]
    pub splits: u64,
    /// Splits of the large sets (bikesharing, protein).
    #[arg(long, default_value_t = 1)]
    pub large_splits: u64,
    /// NUTS draws per chain.
    #[arg(long, default_value_t = 1000)]
    pub draws: usize,
    /// NUTS warmup iterations per chain (planned: the stationary policy may add checks and
    /// extensions).
    #[arg(long, default_value_t = 100)]
    pub warmup: usize,
    /// What ends each chain's warmup: `stationary` (as `bnn run` does) or `fixed` (exactly
    /// --warmup iterations: the paper's schedule).
    #[arg(long, default_value = "stationary", value_parser = parse_warmup_policy)]
    pub warmup_policy: WarmupPolicy,
    /// NUTS maximum tree depth.
    #[arg(long, default_value_t = 10)]
    pub max_depth: usize,
    /// Draws per chain on the large sets [default: --draws].
    #[arg(long)]
    pub large_draws: Option<usize>,
    /// Maximum tree depth on the large sets [default: --max-depth].
    #[arg(long)]
    pub large_max_depth: Option<usize>,
    /// `bnn run` flags for every run, in one string (e.g. "--epochs 5000 --threads 2"); they
    /// override the study's settings.
    #[arg(long, default_value = "", allow_hyphen_values = true)]
    pub extra: String,
}

impl DeiTableArgs {
    fn config(&self, table: PaperTable, datasets: &[String]) -> Result<Table3Config> {
        Ok(Table3Config {
            datasets: datasets.to_vec(),
            splits: self.splits,
            large_splits: self.large_splits,
            warmup: self.warmup,
            draws: self.draws,
            max_depth: self.max_depth,
            large_draws: self.large_draws,
            large_max_depth: self.large_max_depth,
            warmup_policy: self.warmup_policy,
            extra: extra_run_flags(&self.extra, false)?,
            ..Table3Config::of(table)
        })
    }
}

/// `bnn study defaults`: the candidates and the Table 3 runs each makes.
#[derive(Args, Debug)]
pub struct DefaultsArgs {
    /// Output folder: `<candidate>/<dataset>-split<s>/` run directories (finished ones are
    /// reused), defaults.md (rewritten after every run) and study.json.
    #[arg(long, default_value = "runs/defaults")]
    pub out: PathBuf,
    /// Candidates as ACTIVATION[-fixed]-TARGET (`relu-fixed-0.8` is the paper's setting and must
    /// be among them; without `-fixed` the warmup is the stationary policy) [default: relu-fixed-0.8
    /// and relu, silu, tanh, gelu, softplus at 0.8, 0.9, 0.95].
    #[arg(long, value_delimiter = ',')]
    pub candidates: Option<Vec<String>>,
    #[arg(
        long,
        default_value = "airfoil,concrete,energy,yacht",
        value_delimiter = ','
    )]
    pub datasets: Vec<String>,
    /// Splits (split seeds 0..N) of the small sets.
    #[arg(long, default_value_t = 3)]
    pub splits: u64,
    /// Splits of the large sets (bikesharing).
    #[arg(long, default_value_t = 1)]
    pub large_splits: u64,
    /// NUTS warmup iterations per chain (the stationary candidates may add checks).
    #[arg(long, default_value_t = 100)]
    pub warmup: usize,
    /// NUTS draws per chain.
    #[arg(long, default_value_t = 1000)]
    pub draws: usize,
    /// NUTS maximum tree depth.
    #[arg(long, default_value_t = 10)]
    pub max_depth: usize,
    /// `bnn run` flags for every run, in one string (e.g. "--threads 2"); the candidate's
    /// activation and target go over them.
    #[arg(long, default_value = "", allow_hyphen_values = true)]
    pub extra: String,
}

/// `bnn study defaults`: the runs, then the tables on stdout.
fn run_defaults_study(args: &DefaultsArgs, stop: &Arc<AtomicBool>) -> Result<()> {
    let candidates = match &args.candidates {
        Some(names) => names
            .iter()
            .map(|n| Candidate::parse(n))
            .collect::<Result<Vec<_>>>()?,
        None => default_candidates(),
    };
    let config = DefaultsConfig {
        candidates,
        datasets: args.datasets.clone(),
        splits: args.splits,
        large_splits: args.large_splits,
        warmup: args.warmup,
        draws: args.draws,
        max_depth: args.max_depth,
        extra: Arc::new(extra_run_flags(&args.extra, false)?),
    };
    let progress = RunLines(Arc::new(ProgressBars::default()));
    let report = run_defaults(&config, &args.out, &progress, stop)?;
    print!("{}", report.tables);
    for file in &report.files {
        println!("wrote {}", file.display());
    }
    Ok(())
}

#[derive(Args, Debug)]
pub struct MileArgs {
    /// Output folder: `<dataset>-split<i>/{dei-nuts,mile}` run directories (finished ones are
    /// reused), mile.md, study.json.
    #[arg(long, default_value = "runs/mile")]
    pub out: PathBuf,
    /// Splits (split seeds 0..N).
    #[arg(long, default_value_t = 3)]
    pub splits: u64,
    /// Chain seeds per split (split + 100·k), both samplers from the split's same members.
    #[arg(long, default_value_t = 1)]
    pub seeds: u64,
    #[arg(
        long,
        default_value = "airfoil,concrete,energy,yacht",
        value_delimiter = ','
    )]
    pub datasets: Vec<String>,
    /// `bnn run` flags for every run, in one string; MILE's own MCLMC settings: "--learning-rate
    /// 0.01 --trajectory-length 20 --diagonal-preconditioning false".
    #[arg(
        long,
        default_value = "--learning-rate 0.01",
        allow_hyphen_values = true
    )]
    pub extra: String,
    /// Also SMILE (stochastic-gradient MCLMC, `--sampler smile`) from the MILE run's members, with
    /// a SMILE-against-MILE table; its settings through --extra (`--sampler-batch-size 512`).
    #[arg(long)]
    pub smile: bool,
}

impl MileArgs {
    fn config(&self) -> Result<MileConfig> {
        Ok(MileConfig {
            datasets: self.datasets.clone(),
            splits: self.splits,
            seeds: self.seeds,
            extra: extra_run_flags(&self.extra, true)?,
            smile: self.smile,
        })
    }
}

/// `bnn run`'s flags in one string, parsed as `bnn run` parses them: a `--config` file and a
/// recipe (`--mile`, `--preset mile`) make the config the study's settings go on, and every
/// other flag overrides them. `any_sampler`: the flags go to runs of several samplers, and a
/// sampler's setting (`--max-depth`, `--trajectory-length`) reaches only those that have it.
fn extra_run_flags(text: &str, any_sampler: bool) -> Result<ExtraRunFlags> {
    #[derive(clap::Parser, Debug)]
    #[command(name = "--extra", no_binary_name = true)]
    struct Extra {
        #[command(flatten)]
        flags: RunFlags,
    }
    let words: Vec<String> = text.split_whitespace().map(String::from).collect();
    let flags = <Extra as clap::Parser>::try_parse_from(&words)
        .map_err(|e| {
            // clap's message without its "error: " and its pointer to a --help that --extra lacks.
            let text = e.render().to_string();
            let lines: Vec<&str> = text
                .trim()
                .trim_start_matches("error: ")
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with("For more information"))
                .collect();
            anyhow::anyhow!("--extra: {}", lines.join(" "))
        })?
        .flags;
    let recipe = RunFlags {
        config: flags.config.clone(),
        mile: flags.mile,
        preset: flags.preset,
        ..RunFlags::default()
    };
    let target_chosen = match &recipe.config {
        Some(path) => bnn_pipeline::records_target_accept(path).context("--extra")?,
        None => false,
    };
    let base = recipe.resolve().context("--extra")?;
    let others = RunFlags {
        config: None,
        mile: false,
        preset: None,
        ..flags
    };
    Ok(ExtraRunFlags {
        base,
        apply: Box::new(move |config: bnn_pipeline::RunConfig| {
            if any_sampler {
                others.apply_to_any_sampler(config)
            } else {
                others.apply(config)
            }
            .context("--extra")
        }),
        target_chosen,
        words,
    })
}

/// `bnn study table3` / `table8`: the runs, then the tables on stdout.
fn run_paper_table(table: PaperTable, runs: &DeiTableArgs, stop: &Arc<AtomicBool>) -> Result<()> {
    let out = runs
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("runs").join(table.file_stem));
    let datasets: Vec<String> = match &runs.datasets {
        Some(datasets) => datasets.clone(),
        None => table.rows.iter().map(|r| r.dataset.to_string()).collect(),
    };
    let progress = RunLines(Arc::new(ProgressBars::default()));
    let report = run_table3(&runs.config(table, &datasets)?, &out, &progress, stop)?;
    print!("{}", report.table);
    for file in &report.files {
        println!("wrote {}", file.display());
    }
    Ok(())
}

/// `bnn study table3/table8/mile`'s output on stderr: a line per run, each run's stage lines and chain
/// bars.
struct RunLines(Arc<ProgressBars>);

impl RunsProgress for RunLines {
    fn note(&self, line: &str) {
        eprintln!("{line}");
    }
    fn run_progress(&self) -> Arc<dyn bnn_pipeline::Progress> {
        self.0.clone()
    }
}

#[derive(Args, Debug)]
pub struct PmSvArgs {
    /// Output folder (new or empty): runs.csv, pm_sv.md, trace SVGs.
    #[arg(long)]
    pub out: PathBuf,
    /// Simulated return series (one chain each).
    #[arg(long, default_value_t = 2)]
    pub datasets: usize,
    /// Length T of each series.
    #[arg(long, default_value_t = 100)]
    pub steps: usize,
    /// Importance-sampled volatility paths N (u ∈ R^{N·T}).
    #[arg(long, default_value_t = 256)]
    pub particles: usize,
    #[arg(long, default_value_t = 300)]
    pub warmup: usize,
    #[arg(long, default_value_t = 500)]
    pub draws: usize,
    #[arg(long, default_value_t = 8)]
    pub max_tree_depth: u32,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Chains run at once (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
}

impl PmSvArgs {
    fn config(&self) -> PmSvConfig {
        PmSvConfig {
            datasets: self.datasets,
            steps: self.steps,
            particles: self.particles,
            warmup: self.warmup,
            draws: self.draws,
            max_tree_depth: self.max_tree_depth,
            seed: self.seed,
            workers: self.threads,
            ..PmSvConfig::default()
        }
    }
}

#[derive(Args, Debug)]
pub struct PmGlmmArgs {
    /// Output folder (new or empty): runs.csv, pm_glmm.md, trace SVGs.
    #[arg(long)]
    pub out: PathBuf,
    /// Likelihood estimators: per-subject (the model's), per-observation (the report's).
    #[arg(
        long,
        default_value = "per-subject,per-observation",
        value_delimiter = ','
    )]
    pub estimators: Vec<String>,
    /// θ's prior: `report` (N(0, 10²) everywhere) or `weakly-informative` (logit w ~ N(0, 1.5²),
    /// log λ ~ N(0, 3²)).
    #[arg(long, default_value = "report")]
    pub prior: String,
    /// The random effects' importance density: `fixed` (the report's N(0, 3²)) or `mixture`
    /// (θ's own two components, weighted against their equal-share mixture: bounded weights
    /// however narrow a component gets).
    #[arg(long, default_value = "fixed")]
    pub proposal: String,
    /// Simulated data sets per estimator.
    #[arg(long, default_value_t = 2)]
    pub datasets: usize,
    /// Number of the first data set (data sets `first..first + datasets`, each from its own seed).
    #[arg(long, default_value_t = 0)]
    pub first_dataset: usize,
    /// Chains per data set (more than one: intervals pooled, R-hat reported).
    #[arg(long, default_value_t = 1)]
    pub chains: usize,
    /// Subjects T, observations per subject n, importance samples per subject N.
    #[arg(long, default_value_t = 500)]
    pub subjects: usize,
    #[arg(long, default_value_t = 6)]
    pub observations: usize,
    #[arg(long, default_value_t = 128)]
    pub samples: usize,
    #[arg(long, default_value_t = 300)]
    pub warmup: usize,
    #[arg(long, default_value_t = 500)]
    pub draws: usize,
    #[arg(long, default_value_t = 8)]
    pub max_tree_depth: u32,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Chains run at once (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Also sample every per-subject chain with HNN gradients (a network shared by the subjects,
    /// trained on the warmup's states; exact draws, true values at every leaf) and report true
    /// gradients per effective sample for both.
    #[arg(long)]
    pub hnn: bool,
    /// The HNN's Adam steps, hidden width and the surrogate chain's step-size warmup.
    #[arg(long, default_value_t = 3000)]
    pub hnn_steps: usize,
    #[arg(long, default_value_t = 64)]
    pub hnn_width: usize,
    #[arg(long, default_value_t = 50)]
    pub hnn_warmup: usize,
}

impl PmGlmmArgs {
    fn config(&self) -> Result<PmGlmmConfig> {
        let estimators = self
            .estimators
            .iter()
            .map(|e| match e.as_str() {
                "per-subject" => Ok(GlmmEstimator::PerSubject),
                "per-observation" => Ok(GlmmEstimator::PerObservation),
                other => Err(anyhow::anyhow!(
                    "unknown estimator `{other}` (expected per-subject or per-observation)"
                )),
            })
            .collect::<Result<_>>()?;
        let prior = match self.prior.as_str() {
            "report" => GlmmPrior::Report,
            "weakly-informative" => GlmmPrior::WeaklyInformative,
            other => {
                anyhow::bail!("unknown prior `{other}` (expected report or weakly-informative)")
            }
        };
        let proposal = match self.proposal.as_str() {
            "fixed" => GlmmProposal::Fixed,
            "mixture" => GlmmProposal::Mixture,
            other => anyhow::bail!("unknown proposal `{other}` (expected fixed or mixture)"),
        };
        Ok(PmGlmmConfig {
            estimators,
            prior,
            proposal,
            datasets: self.datasets,
            first_dataset: self.first_dataset,
            chains: self.chains,
            subjects: self.subjects,
            observations: self.observations,
            samples: self.samples,
            warmup: self.warmup,
            draws: self.draws,
            max_tree_depth: self.max_tree_depth,
            target_accept: 0.8,
            seed: self.seed,
            workers: self.threads,
            hnn: self.hnn.then(|| SubjectHnnConfig {
                steps: self.hnn_steps,
                hidden_width: self.hnn_width,
                seed: self.seed,
                ..SubjectHnnConfig::default()
            }),
            hnn_warmup: self.hnn_warmup,
        })
    }
}

#[derive(Args, Debug)]
pub struct LhnnArgs {
    /// Output folder (new or empty): summary.csv, training.csv, lhnn.md, SVGs.
    #[arg(long)]
    pub out: PathBuf,
    /// Targets: mixture-1d, rosenbrock-3d, funnel-2d, gaussian-5d, rosenbrock-10d, allen-cahn-25d
    /// (`none`: only the BNN part).
    #[arg(
        long,
        default_value = "mixture-1d,rosenbrock-3d,funnel-2d,gaussian-5d,rosenbrock-10d,allen-cahn-25d",
        value_delimiter = ','
    )]
    pub benchmarks: Vec<String>,
    /// Samplers: lhnn-exact, lhnn-adapted, lhnn-monitored, nuts-fixed, nuts-adapted.
    #[arg(
        long,
        default_value = "lhnn-exact,lhnn-adapted,lhnn-monitored,nuts-fixed,nuts-adapted",
        value_delimiter = ','
    )]
    pub samplers: Vec<LhnnSampler>,
    /// Fixed step size of the L-HNN samplers and of the fixed-ε NUTS (the paper's 0.025).
    #[arg(long, default_value_t = 0.025)]
    pub step_size: f64,
    /// Chains per sampler.
    #[arg(long, default_value_t = 2)]
    pub chains: usize,
    /// Transitions discarded per chain (the adapted NUTS's warmup).
    #[arg(long, default_value_t = 200)]
    pub burn_in: usize,
    /// Transitions kept per chain.
    #[arg(long, default_value_t = 3000)]
    pub draws: usize,
    /// Tree depth cap of every NUTS.
    #[arg(long, default_value_t = 12)]
    pub max_tree_depth: u32,
    /// L-HNN training trajectories (the paper's 40) and their length in time units (the paper's 250).
    #[arg(long, default_value_t = 40)]
    pub trajectories: usize,
    #[arg(long, default_value_t = 250.0)]
    pub end_time: f64,
    /// Hidden sine layers and their width (the paper's 3 × 100).
    #[arg(long, default_value_t = 3)]
    pub hidden_layers: usize,
    #[arg(long, default_value_t = 100)]
    pub hidden_width: usize,
    /// Adam steps (batch 1000) and learning rate (the paper's 5e-4).
    #[arg(long, default_value_t = 5000)]
    pub training_steps: usize,
    #[arg(long, default_value_t = 5e-4)]
    pub learning_rate: f64,
    /// Draws per chain of the 4-chain adapted-NUTS reference.
    #[arg(long, default_value_t = 10_000)]
    pub reference_draws: usize,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Chains run at once (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// The BNN part: cos2x and/or yacht (UCI data: BNN_DATA_DIR), DEI-NUTS against DEI-L-HNN
    /// from the same deep-ensemble members (default: skipped).
    #[arg(long, value_delimiter = ',')]
    pub bnn: Vec<BnnProblem>,
    /// BNN part: members (chains), Adam epochs of each, warmup and draws per chain.
    #[arg(long, default_value_t = 4)]
    pub bnn_members: usize,
    #[arg(long, default_value_t = 2000)]
    pub bnn_epochs: usize,
    #[arg(long, default_value_t = 200)]
    pub bnn_warmup: usize,
    #[arg(long, default_value_t = 400)]
    pub bnn_draws: usize,
    /// BNN part: training trajectories per chain, leapfrog steps in each, Adam steps.
    #[arg(long, default_value_t = 20)]
    pub bnn_trajectories: usize,
    #[arg(long, default_value_t = 100)]
    pub bnn_trajectory_steps: usize,
    #[arg(long, default_value_t = 2000)]
    pub bnn_training_steps: usize,
}

impl LhnnArgs {
    fn config(&self) -> Result<LhnnStudyConfig> {
        let benchmarks = if self.benchmarks.iter().any(|b| b == "none") {
            Vec::new()
        } else {
            self.benchmarks
                .iter()
                .map(|b| b.parse::<Benchmark>().map_err(anyhow::Error::new))
                .collect::<Result<_>>()?
        };
        Ok(LhnnStudyConfig {
            benchmarks,
            samplers: self.samplers.clone(),
            step_size: self.step_size,
            chains: self.chains,
            burn_in: self.burn_in,
            draws: self.draws,
            max_tree_depth: self.max_tree_depth,
            trajectories: self.trajectories,
            end_time: self.end_time,
            training_step_size: self.step_size,
            hidden_width: self.hidden_width,
            hidden_layers: self.hidden_layers,
            training_steps: self.training_steps,
            learning_rate: self.learning_rate,
            reference_draws: self.reference_draws,
            seed: self.seed,
            workers: self.threads,
            bnn: LhnnBnnConfig {
                problems: self.bnn.clone(),
                members: self.bnn_members,
                ensemble_epochs: self.bnn_epochs,
                warmup: self.bnn_warmup,
                draws: self.bnn_draws,
                max_tree_depth: self.max_tree_depth.min(10),
                trajectories: self.bnn_trajectories,
                trajectory_steps: self.bnn_trajectory_steps,
                hidden_width: self.hidden_width,
                hidden_layers: self.hidden_layers,
                training_steps: self.bnn_training_steps,
                learning_rate: 1e-3,
                seed: self.seed,
                workers: self.threads,
            },
        })
    }
}

#[derive(Args, Debug)]
pub struct RobotArmArgs {
    /// Output folder (new or empty): runs.csv, autocorrelation.csv, robot_arm.md, SVGs.
    #[arg(long)]
    pub out: PathBuf,
    /// Samplers: msd, msd-frozen, hmc-long, hmc-short, nuts.
    #[arg(
        long,
        default_value = "msd,msd-frozen,hmc-long,hmc-short,nuts",
        value_delimiter = ','
    )]
    pub samplers: Vec<ArmSampler>,
    /// Hidden tanh units (2-H-2 network).
    #[arg(long, default_value_t = 16)]
    pub hidden: usize,
    /// Prior sd of every weight and bias.
    #[arg(long, default_value_t = 1.0)]
    pub prior_scale: f64,
    /// Leapfrog steps of the long and the short HMC.
    #[arg(long, default_value_t = 100)]
    pub long_steps: usize,
    #[arg(long, default_value_t = 30)]
    pub short_steps: usize,
    /// Acceptance rate every sampler's warmup aims its step size at.
    #[arg(long, default_value_t = 0.9)]
    pub target_accept: f64,
    /// MSD's momentum persistence cos α.
    #[arg(long, default_value_t = 0.95)]
    pub persistence: f64,
    /// Chains (seeds) per sampler.
    #[arg(long, default_value_t = 3)]
    pub seeds: usize,
    /// Warmup iterations per chain.
    #[arg(long, default_value_t = 300)]
    pub warmup: usize,
    /// Kept iterations per chain.
    #[arg(long, default_value_t = 1000)]
    pub draws: usize,
    /// Predictions average every thin-th kept draw.
    #[arg(long, default_value_t = 20)]
    pub thin: usize,
    /// Largest lag of the autocorrelation curves.
    #[arg(long, default_value_t = 100)]
    pub max_lag: usize,
    /// Adam steps from the initialization to the chains' start (0: start at the initialization,
    /// as the paper did).
    #[arg(long, default_value_t = 2000)]
    pub start_epochs: usize,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Chains run at once (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
}

impl RobotArmArgs {
    fn config(&self) -> RobotArmConfig {
        RobotArmConfig {
            samplers: self.samplers.clone(),
            hidden: self.hidden,
            prior_scale: self.prior_scale,
            long_steps: self.long_steps,
            short_steps: self.short_steps,
            target_accept: self.target_accept,
            persistence: self.persistence,
            seeds: self.seeds,
            warmup: self.warmup,
            draws: self.draws,
            thin: self.thin,
            max_lag: self.max_lag,
            start_epochs: self.start_epochs,
            seed: self.seed,
            workers: self.threads,
        }
    }
}

#[derive(Args, Debug)]
pub struct DinhArgs {
    /// Output folder (new or empty): CSVs, markdown tables beside the paper's numbers, SVGs.
    #[arg(long)]
    pub out: PathBuf,
    /// Which experiments: table2 (and Figure 1), efficiency (Figure 2a), architectures (Figure 3),
    /// sensitivity (f32 vs f64, σ, start on a few Table 2 cells).
    #[arg(
        long,
        default_value = "table2,efficiency,architectures,sensitivity",
        value_delimiter = ','
    )]
    pub parts: Vec<DinhPart>,
    #[arg(long, default_value = "sigmoid,relu,leaky_relu", value_delimiter = ',')]
    pub activations: Vec<Activation>,
    /// Table 2's trajectory lengths L.
    #[arg(long, default_value = "200,400,600,800,1000", value_delimiter = ',')]
    pub num_steps: Vec<usize>,
    /// Table 2's step sizes ε.
    #[arg(
        long,
        default_value = "0.0005,0.001,0.0015,0.002,0.0025",
        value_delimiter = ','
    )]
    pub step_sizes: Vec<f64>,
    /// Figure 2a's step sizes (L = round(T / ε)).
    #[arg(
        long,
        default_value = "0.0005,0.001,0.0015,0.002,0.0025,0.003,0.0035,0.004",
        value_delimiter = ','
    )]
    pub efficiency_step_sizes: Vec<f64>,
    /// Figure 2a's travel time T = εL.
    #[arg(long, default_value_t = 0.1)]
    pub travel_time: f64,
    /// Figure 3's networks: hidden widths per network, `x` between layers.
    #[arg(
        long,
        default_value = "10,50,100,200,400,20,20x20,20x20x20,20x20x20x20"
    )]
    pub architectures: String,
    /// The sensitivity part's cells, `L:ε` each.
    #[arg(long, default_value = "200:0.001,400:0.0015")]
    pub sensitivity_cells: String,
    /// Where each seed's chains start: init (PyTorch's U(±1/√fan_in)) or prior (a N(0, 1) draw).
    #[arg(long, default_value = "init")]
    pub start: StartPoint,
    /// σ of the Gaussian likelihood.
    #[arg(long, default_value_t = 0.1)]
    pub likelihood_sigma: f64,
    /// Replicates (random seeds) per cell.
    #[arg(long, default_value_t = 5)]
    pub seeds: usize,
    /// Kept draws per chain.
    #[arg(long, default_value_t = 2000)]
    pub draws: usize,
    /// Discarded transitions before them.
    #[arg(long, default_value_t = 100)]
    pub burn_in: usize,
    /// f32 or f64 log density and gradient.
    #[arg(long = "float", default_value = "f32")]
    pub precision: Precision,
    /// Seed of the chains' starts and streams.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// cpu, flex, ndarray or wgpu.
    #[arg(long, default_value = "cpu")]
    pub device: DeviceName,
    /// Blocks of chains run at once (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
}

impl DinhArgs {
    fn config(&self) -> Result<DinhConfig> {
        let architectures = self
            .architectures
            .split(',')
            .map(|net| {
                net.split('x')
                    .map(|w| {
                        w.trim().parse::<usize>().with_context(|| {
                            format!("--architectures: `{net}` is not widths joined by x")
                        })
                    })
                    .collect::<Result<Vec<_>>>()
            })
            .collect::<Result<Vec<_>>>()?;
        let sensitivity_cells = self
            .sensitivity_cells
            .split(',')
            .map(|cell| {
                let (l, e) = cell
                    .split_once(':')
                    .with_context(|| format!("--sensitivity-cells: `{cell}` is not L:ε"))?;
                Ok((
                    l.trim()
                        .parse::<usize>()
                        .with_context(|| format!("--sensitivity-cells: `{l}`"))?,
                    e.trim()
                        .parse::<f64>()
                        .with_context(|| format!("--sensitivity-cells: `{e}`"))?,
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(DinhConfig::new()
            .with_sensitivity_cells(sensitivity_cells)
            .with_start(self.start)
            .with_likelihood_sigma(self.likelihood_sigma)
            .with_parts(self.parts.clone())
            .with_activations(self.activations.clone())
            .with_num_steps(self.num_steps.clone())
            .with_step_sizes(self.step_sizes.clone())
            .with_efficiency_step_sizes(self.efficiency_step_sizes.clone())
            .with_travel_time(self.travel_time)
            .with_architectures(architectures)
            .with_seeds(self.seeds)
            .with_draws(self.draws)
            .with_burn_in(self.burn_in)
            .with_precision(self.precision)
            .with_seed(self.seed)
            .with_device(self.device)
            .with_workers(self.threads))
    }
}

/// One bar per stage, counting planned work (gradient evaluations, iterations), with
/// throughput and ETA.
struct StageBar {
    bar: Mutex<Option<ProgressBar>>,
    unit: &'static str,
}

impl Progress for StageBar {
    fn stage(&self, name: &str, planned_gradients: u64) {
        let bar =
            ProgressBar::with_draw_target(Some(planned_gradients), ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template(&format!("{{msg}} [{{bar:30}}] {{percent:>3}}% {{human_pos}}/{{human_len}} {}, {{per_sec}}, eta {{eta}}", self.unit))
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        bar.set_message(name.to_string());
        if let Some(previous) = self
            .bar
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .replace(bar)
        {
            previous.finish();
        }
    }

    fn advance(&self, gradients: u64) {
        if let Some(bar) = self
            .bar
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
        {
            bar.inc(gradients);
        }
    }
}

pub fn run(command: StudyCommand, stop: Arc<AtomicBool>) -> Result<()> {
    match command {
        StudyCommand::Dinh(args) => {
            let config = args.config()?;
            // Each worker thread runs its own block of chains; the kernel does not split a call
            // further (before any batched call, so Rayon takes it).
            bnn_model::fused_mlp::set_kernel_threads(1);
            let progress = StageBar {
                bar: Mutex::new(None),
                unit: "gradients",
            };
            let report = run_dinh(&config, &args.out, &progress, &stop);
            if let Some(bar) = progress
                .bar
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take()
            {
                bar.finish();
            }
            let report = report?;
            for t in &report.timings {
                println!(
                    "{:?}: {} chains in {:.1} s, {:.0} chain-gradients/s",
                    t.part, t.chains, t.seconds, t.gradients_per_second
                );
            }
            if let Some((marked, compared)) = report.table2_deviations {
                println!(
                    "Table 2: {} of {compared} cells within 3 s.e. of the paper's",
                    compared - marked
                );
            }
            for file in &report.files {
                println!("wrote {}", file.display());
            }
            Ok(())
        }
        StudyCommand::Lhnn(args) => {
            let progress = StageBar {
                bar: Mutex::new(None),
                unit: "steps",
            };
            let report = run_lhnn_study(&args.config()?, &args.out, &progress, &stop);
            if let Some(bar) = progress
                .bar
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take()
            {
                bar.finish();
            }
            let report = report?;
            for s in &report.summaries {
                println!(
                    "{} {}: min ESS {:.0} for {} true gradients ({} in training)",
                    s.benchmark,
                    s.sampler.name(),
                    s.min_ess(),
                    s.total_gradients(),
                    s.training_gradients
                );
            }
            for r in &report.bnn {
                println!(
                    "{} {}: test LPPD {:.3}, ESS(log p) {:.0} for {} true gradients, {} true values",
                    r.problem.name(),
                    r.sampler,
                    r.test_lppd,
                    r.ess_log_density,
                    r.total_gradients(),
                    r.true_values
                );
            }
            for file in &report.files {
                println!("wrote {}", file.display());
            }
            Ok(())
        }
        StudyCommand::PmGlmm(args) => {
            let progress = StageBar {
                bar: Mutex::new(None),
                unit: "transitions",
            };
            let report = run_pm_glmm(&args.config()?, &args.out, &progress, &stop);
            if let Some(bar) = progress
                .bar
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take()
            {
                bar.finish();
            }
            let report = report?;
            for run in &report.runs {
                println!(
                    "{} ({}) data {}: {} of {} parameters in their 90% interval, min ESS {:.0}, {:.1} true gradients per ESS, sampling {:.0} s",
                    run.estimator.name(),
                    run.sampler,
                    run.dataset,
                    run.covered(),
                    run.truth.len(),
                    run.min_ess(),
                    run.true_gradients_per_ess(),
                    run.seconds
                );
            }
            for file in &report.files {
                println!("wrote {}", file.display());
            }
            Ok(())
        }
        StudyCommand::PmSv(args) => {
            let progress = StageBar {
                bar: Mutex::new(None),
                unit: "transitions",
            };
            let report = run_pm_sv(&args.config(), &args.out, &progress, &stop);
            if let Some(bar) = progress
                .bar
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take()
            {
                bar.finish();
            }
            let report = report?;
            for run in &report.runs {
                println!(
                    "data {}: {} of 3 parameters in their 90% interval, Var log p̂ at the truth {:.2}, {} gradients, {} divergent, {:.0} s",
                    run.dataset,
                    run.covered(),
                    run.log_estimate_variance,
                    run.gradients,
                    run.divergences,
                    run.seconds
                );
            }
            for file in &report.files {
                println!("wrote {}", file.display());
            }
            Ok(())
        }
        StudyCommand::Table3(args) => run_paper_table(TABLE3, &args, &stop),
        StudyCommand::Defaults(args) => run_defaults_study(&args, &stop),
        StudyCommand::Table8(args) => run_paper_table(TABLE8, &args, &stop),
        StudyCommand::Mile(args) => {
            let progress = RunLines(Arc::new(ProgressBars::default()));
            let report = run_mile(&args.config()?, &args.out, &progress, &stop)?;
            print!("{}", report.table);
            for file in &report.files {
                println!("wrote {}", file.display());
            }
            Ok(())
        }
        StudyCommand::RobotArm(args) => {
            bnn_model::fused_mlp::set_kernel_threads(1);
            let progress = StageBar {
                bar: Mutex::new(None),
                unit: "iterations",
            };
            let report = run_robot_arm(&args.config(), &args.out, &progress, &stop);
            if let Some(bar) = progress
                .bar
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take()
            {
                bar.finish();
            }
            let report = report?;
            if let Some((per_iteration, per_ess)) = report.msd_to_hmc_long {
                println!("MSD : HMC-long analytic cost {per_iteration:.2} per iteration, {per_ess:.2} per effective sample");
            }
            for file in &report.files {
                println!("wrote {}", file.display());
            }
            Ok(())
        }
    }
}

//! Dinh et al., "Hamiltonian Monte Carlo on ReLU Neural Networks is Inefficient" (NeurIPS 2024):
//! fixed-step HMC acceptance rates on cos(2x) data for sigmoid, ReLU and leaky-ReLU networks.
//!
//! Three parts, each a grid of fixed-step HMC chains (no adaptation, identity metric, burn-in
//! discarded) run by [`crate::run_fixed_step_chains`]:
//! - **Table 2 / Figure 1**: a 1-50-1 network, L × ε grid, acceptance per activation;
//! - **Figure 2a**: fixed travel time T = εL, efficiency ε·a_ε against a_ε and the empirical
//!   optimal acceptance per activation;
//! - **Figure 3**: L = 200, ε = 0.001 on wider and deeper networks, acceptance against the
//!   number of parameters.
//!
//! Choices the paper leaves open (its §4 and A.6 give the data, the prior, the grid, 2000 draws
//! after 100 burn-in and 5 seeds) are fields of [`DinhConfig`] and are written into `table2.md`.

mod efficiency;
mod figures;
pub mod reference;
mod report;

pub use efficiency::EfficiencyCurve;

use crate::fixed_step_chains::{
    planned_gradients, run_fixed_step_chains, ChainAcceptance, ChainSettings, FixedStepChain,
    Network, Progress, StartPoint,
};
use anyhow::{bail, Context as _, Result};
use bnn_model::{Activation, DeviceName, HostData, Likelihood, Prior, PriorSpec, UnknownName};
use burn::config::Config;
use burn::tensor::DType;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Instant;

/// Which experiments of the paper to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DinhPart {
    /// Table 2 and Figure 1: acceptance over the L × ε grid on 1-50-1 networks.
    Table2,
    /// Figure 2a: efficiency ε·a_ε against acceptance at a fixed travel time.
    Efficiency,
    /// Figure 3: acceptance against the number of parameters (wider and deeper networks).
    Architectures,
    /// How much the choices the paper leaves open move a few Table 2 cells: f32 against f64,
    /// the likelihood's σ, the start.
    Sensitivity,
}

impl std::str::FromStr for DinhPart {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, UnknownName> {
        match s.trim() {
            "table2" => Ok(Self::Table2),
            "efficiency" | "figure2" => Ok(Self::Efficiency),
            "architectures" | "figure3" => Ok(Self::Architectures),
            "sensitivity" => Ok(Self::Sensitivity),
            other => Err(UnknownName::new(
                "part",
                other,
                ["table2", "efficiency", "architectures", "sensitivity"],
            )),
        }
    }
}

/// Float type of the log density and its gradient.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Precision {
    F32,
    F64,
}

impl Precision {
    pub fn dtype(self) -> DType {
        match self {
            Precision::F32 => DType::F32,
            Precision::F64 => DType::F64,
        }
    }
}

impl std::str::FromStr for Precision {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, UnknownName> {
        match s.trim() {
            "f32" => Ok(Self::F32),
            "f64" => Ok(Self::F64),
            other => Err(UnknownName::new("float type", other, ["f32", "f64"])),
        }
    }
}

/// The study's settings; the defaults are the paper's where it gives them.
#[derive(Config, Debug)]
pub struct DinhConfig {
    #[config(
        default = "vec![DinhPart::Table2, DinhPart::Efficiency, DinhPart::Architectures, DinhPart::Sensitivity]"
    )]
    pub parts: Vec<DinhPart>,
    #[config(default = "vec![Activation::Sigmoid, Activation::Relu, Activation::LeakyRelu]")]
    pub activations: Vec<Activation>,
    /// Table 2's trajectory lengths L.
    #[config(default = "vec![200, 400, 600, 800, 1000]")]
    pub num_steps: Vec<usize>,
    /// Table 2's step sizes ε.
    #[config(default = "vec![0.0005, 0.0010, 0.0015, 0.0020, 0.0025]")]
    pub step_sizes: Vec<f64>,
    /// Replicates (the paper's 5 random seeds).
    #[config(default = 5)]
    pub seeds: usize,
    /// Kept draws per chain.
    #[config(default = 2000)]
    pub draws: usize,
    /// Discarded transitions before them (no adaptation).
    #[config(default = 100)]
    pub burn_in: usize,
    /// Hidden width of Table 2's and Figure 2a's network.
    #[config(default = 50)]
    pub hidden: usize,
    /// Rows of cos(2x) data (x ~ U(0, 4), y ~ N(cos 2x, noise_sd²)); all are used for training.
    #[config(default = 100)]
    pub rows: usize,
    /// Noise of the generated data.
    #[config(default = 0.1)]
    pub noise_sd: f64,
    /// σ of the Gaussian likelihood (not given in the paper; the data's noise).
    #[config(default = 0.1)]
    pub likelihood_sigma: f64,
    /// Seed of the data.
    #[config(default = 0)]
    pub data_seed: u64,
    /// Seed of the chains' starts and random streams.
    #[config(default = 0)]
    pub seed: u64,
    /// Figure 2a's travel time T = εL.
    #[config(default = 0.1)]
    pub travel_time: f64,
    /// Figure 2a's step sizes.
    #[config(default = "vec![0.0005, 0.0010, 0.0015, 0.0020, 0.0025, 0.0030, 0.0035, 0.0040]")]
    pub efficiency_step_sizes: Vec<f64>,
    /// Figure 3's networks (hidden widths).
    #[config(
        default = "vec![vec![10], vec![50], vec![100], vec![200], vec![400], vec![20], vec![20, 20], vec![20, 20, 20], vec![20, 20, 20, 20]]"
    )]
    pub architectures: Vec<Vec<usize>>,
    /// Figure 3's trajectory.
    #[config(default = 200)]
    pub architecture_num_steps: usize,
    #[config(default = 0.001)]
    pub architecture_step_size: f64,
    /// The sensitivity part's Table 2 cells `(L, ε)`.
    #[config(default = "vec![(200, 0.001), (400, 0.0015)]")]
    pub sensitivity_cells: Vec<(usize, f64)>,
    /// The σ the sensitivity part tries instead of `likelihood_sigma`: 1/√2 makes the log
    /// likelihood exactly the paper's −(f(x) − y)², its square loss read literally.
    #[config(default = "std::f64::consts::FRAC_1_SQRT_2")]
    pub alternative_sigma: f64,
    /// Where each replicate's chains start (not given in the paper).
    #[config(default = "StartPoint::Initialization")]
    pub start: StartPoint,
    /// Float type of the log density (the paper used Autograd, i.e. f64).
    #[config(default = "Precision::F32")]
    pub precision: Precision,
    /// cpu, flex, ndarray or wgpu.
    #[config(default = "DeviceName::Cpu")]
    pub device: DeviceName,
    /// Blocks of chains run at once (threads); `None`: all cores.
    pub workers: Option<usize>,
}

impl DinhConfig {
    /// Rejects empty grids and impossible values before anything runs.
    pub fn validate(&self) -> Result<()> {
        if self.parts.is_empty() || self.activations.is_empty() {
            bail!("the study needs at least one part and one activation");
        }
        if self.parts.contains(&DinhPart::Table2)
            && (self.num_steps.is_empty() || self.step_sizes.is_empty())
        {
            bail!("Table 2 needs at least one number of steps and one step size");
        }
        if self.num_steps.contains(&0) || self.architecture_num_steps == 0 {
            bail!("numbers of leapfrog steps must be at least 1");
        }
        let positive = |v: f64| v > 0.0 && v.is_finite();
        for &e in self
            .step_sizes
            .iter()
            .chain(&self.efficiency_step_sizes)
            .chain([&self.architecture_step_size])
        {
            if !positive(e) {
                bail!("step sizes must be positive and finite, got {e}");
            }
        }
        if self.parts.contains(&DinhPart::Efficiency)
            && (self.efficiency_step_sizes.is_empty() || !positive(self.travel_time))
        {
            bail!("Figure 2a needs step sizes and a positive travel time");
        }
        if self.parts.contains(&DinhPart::Architectures)
            && (self.architectures.is_empty()
                || self
                    .architectures
                    .iter()
                    .any(|a| a.is_empty() || a.contains(&0)))
        {
            bail!("Figure 3 needs networks with at least one hidden layer of positive width");
        }
        if self.parts.contains(&DinhPart::Sensitivity)
            && (self.sensitivity_cells.is_empty()
                || self
                    .sensitivity_cells
                    .iter()
                    .any(|&(l, e)| l == 0 || !positive(e))
                || !positive(self.alternative_sigma))
        {
            bail!("the sensitivity part needs cells with positive L and ε and a positive alternative σ");
        }
        if self.seeds == 0 || self.draws == 0 || self.rows == 0 || self.hidden == 0 {
            bail!("seeds, draws, rows and hidden width must be at least 1");
        }
        if !(positive(self.likelihood_sigma) && self.noise_sd >= 0.0 && self.noise_sd.is_finite()) {
            bail!("the likelihood σ must be positive and the data noise non-negative");
        }
        if self.workers == Some(0) {
            bail!("workers must be at least 1");
        }
        fn repeats<T: PartialEq>(values: &[T]) -> bool {
            values
                .iter()
                .enumerate()
                .any(|(i, v)| values[..i].contains(v))
        }
        if repeats(&self.activations)
            || repeats(&self.num_steps)
            || repeats(&self.step_sizes)
            || repeats(&self.efficiency_step_sizes)
            || repeats(&self.architectures)
            || repeats(&self.sensitivity_cells)
        {
            bail!("a list of the study's grid names a value twice; give each value once");
        }
        Ok(())
    }

    /// Figure 2a's trajectory length for step size `step_size`: `round(T / ε)`, at least 1.
    pub fn efficiency_num_steps(&self, step_size: f64) -> usize {
        ((self.travel_time / step_size).round() as usize).max(1)
    }

    fn network(&self, activation: Activation) -> Network {
        Network {
            hidden: vec![self.hidden],
            activation,
        }
    }

    fn chain_settings(&self) -> Result<ChainSettings> {
        let data = bnn_data::cos2x(self.rows, self.noise_sd, self.data_seed)?;
        let workers = self
            .workers
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
        Ok(ChainSettings {
            data: HostData::new(data.x.data, self.rows, 1, data.y.data, 1),
            likelihood: Likelihood::GaussianFixed {
                sigma: self.likelihood_sigma,
            },
            prior: PriorSpec::uniform(Prior::Normal { scale: 1.0 }),
            device: self.device.device()?,
            dtype: self.precision.dtype(),
            burn_in: self.burn_in,
            draws: self.draws,
            seed: self.seed,
            start: self.start,
            workers,
        })
    }
}

/// One finished chain of a part, as written to its CSV.
#[derive(Clone, Debug, PartialEq)]
pub struct ChainRecord {
    pub chain: FixedStepChain,
    pub result: ChainAcceptance,
}

/// How long a part took.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PartTiming {
    pub part: DinhPart,
    pub chains: usize,
    pub seconds: f64,
    pub gradients: u64,
    pub gradients_per_second: f64,
}

/// What a finished study wrote.
#[derive(Clone, Debug)]
pub struct DinhReport {
    pub out_dir: PathBuf,
    pub timings: Vec<PartTiming>,
    pub files: Vec<PathBuf>,
    /// Table 2 cells more than 3 combined standard errors from the paper's.
    pub table2_deviations: Option<(usize, usize)>,
}

/// Runs the configured parts and writes their CSVs, markdown tables and SVG figures into
/// `out_dir`, which must be new or empty (nothing there is overwritten).
pub fn run_dinh(
    config: &DinhConfig,
    out_dir: &Path,
    progress: &dyn Progress,
    stop: &AtomicBool,
) -> Result<DinhReport> {
    config.validate()?;
    if out_dir.exists()
        && std::fs::read_dir(out_dir)
            .with_context(|| format!("reading {}", out_dir.display()))?
            .next()
            .is_some()
    {
        bail!(
            "{} is not empty; choose a new output folder (a study never overwrites results)",
            out_dir.display()
        );
    }
    std::fs::create_dir_all(out_dir).with_context(|| format!("creating {}", out_dir.display()))?;
    let settings = config.chain_settings()?;
    let mut writer = report::ReportWriter::new(config, out_dir, &settings);
    let planned: Vec<DinhPart> = [
        DinhPart::Table2,
        DinhPart::Efficiency,
        DinhPart::Architectures,
        DinhPart::Sensitivity,
    ]
    .into_iter()
    .filter(|p| config.parts.contains(p))
    .collect();
    for (done, &part) in planned.iter().enumerate() {
        let chains = part_chains(config, part);
        let variants = match part {
            DinhPart::Sensitivity => sensitivity_variants(config)?,
            _ => vec![Variant {
                name: "as configured".into(),
                settings: settings.clone(),
            }],
        };
        let name = match part {
            DinhPart::Table2 => "Table 2 (L × ε grid, 1-50-1)",
            DinhPart::Efficiency => "Figure 2a (fixed travel time)",
            DinhPart::Architectures => "Figure 3 (wider and deeper networks)",
            DinhPart::Sensitivity => "sensitivity (float type, σ, start)",
        };
        progress.stage(
            name,
            variants
                .iter()
                .map(|v| planned_gradients(&chains, &v.settings))
                .sum(),
        );
        let start = Instant::now();
        let mut runs = Vec::with_capacity(variants.len());
        for variant in &variants {
            // A stop keeps every finished part's files and says in study.json what is missing.
            let results = match run_fixed_step_chains(&chains, &variant.settings, progress, stop) {
                Err(_) if stop.load(std::sync::atomic::Ordering::Relaxed) => {
                    return writer.finish_interrupted(&planned[..done], &planned[done..])
                }
                other => other?,
            };
            let records: Vec<ChainRecord> = chains
                .iter()
                .cloned()
                .zip(results)
                .map(|(chain, result)| ChainRecord { chain, result })
                .collect();
            runs.push((variant.name.clone(), records));
        }
        let seconds = start.elapsed().as_secs_f64();
        let gradients: u64 = runs
            .iter()
            .flat_map(|(_, r)| r.iter().map(|c| c.result.gradients))
            .sum();
        let timing = PartTiming {
            part,
            chains: chains.len() * variants.len(),
            seconds,
            gradients,
            gradients_per_second: gradients as f64 / seconds.max(1e-9),
        };
        match part {
            DinhPart::Sensitivity => writer.write_sensitivity(&runs, timing)?,
            _ => writer.write_part(part, &runs[0].1, timing)?,
        }
    }
    writer.finish()
}

/// One way of running the same chains.
struct Variant {
    name: String,
    settings: ChainSettings,
}

/// The configured settings, then each open choice changed alone.
fn sensitivity_variants(config: &DinhConfig) -> Result<Vec<Variant>> {
    let base = config.chain_settings()?;
    let other_precision = match config.precision {
        Precision::F32 => Precision::F64,
        Precision::F64 => Precision::F32,
    };
    let other_start = match config.start {
        StartPoint::Initialization => StartPoint::PriorDraw,
        StartPoint::PriorDraw => StartPoint::Initialization,
    };
    let named = |name: String, settings: ChainSettings| Variant { name, settings };
    Ok(vec![
        named(
            format!(
                "as configured ({:?}, σ = {}, start {:?})",
                config.precision, config.likelihood_sigma, config.start
            ),
            base.clone(),
        ),
        named(
            format!("{other_precision:?}"),
            ChainSettings {
                dtype: other_precision.dtype(),
                ..base.clone()
            },
        ),
        named(
            format!("σ = {:.4}", config.alternative_sigma),
            ChainSettings {
                likelihood: Likelihood::GaussianFixed {
                    sigma: config.alternative_sigma,
                },
                ..base.clone()
            },
        ),
        named(
            format!("start {other_start:?}"),
            ChainSettings {
                start: other_start,
                ..base
            },
        ),
    ])
}

/// The chains of one part, replicate last so a block's chains sit together.
fn part_chains(config: &DinhConfig, part: DinhPart) -> Vec<FixedStepChain> {
    let mut chains = Vec::new();
    let mut push = |network: Network, num_steps: usize, step_size: f64| {
        for replicate in 0..config.seeds {
            chains.push(FixedStepChain {
                network: network.clone(),
                num_steps,
                step_size,
                replicate,
            });
        }
    };
    for &activation in &config.activations {
        match part {
            DinhPart::Table2 => {
                for &num_steps in &config.num_steps {
                    for &step_size in &config.step_sizes {
                        push(config.network(activation), num_steps, step_size);
                    }
                }
            }
            DinhPart::Efficiency => {
                for &step_size in &config.efficiency_step_sizes {
                    push(
                        config.network(activation),
                        config.efficiency_num_steps(step_size),
                        step_size,
                    );
                }
            }
            DinhPart::Architectures => {
                for hidden in &config.architectures {
                    push(
                        Network {
                            hidden: hidden.clone(),
                            activation,
                        },
                        config.architecture_num_steps,
                        config.architecture_step_size,
                    );
                }
            }
            DinhPart::Sensitivity => {
                for &(num_steps, step_size) in &config.sensitivity_cells {
                    push(config.network(activation), num_steps, step_size);
                }
            }
        }
    }
    chains
}

//! `bnn bench`: value+gradient throughput of the BNN posteriors, as JSON.

use crate::prepared_data::{prepare, Preparation};
use anyhow::{anyhow, bail, Result};
use bnn_model::{Activation, AutodiffLogDensity, BnnConfig, DeviceName, GradientPath, Likelihood, MlpPosterior, ScaleLink};
use bnn_sampler::LogDensity;
use burn::tensor::DType;
use clap::{Args, ValueEnum};
use serde::Serialize;
use std::path::PathBuf;
use std::time::Instant;

/// The benchmark posteriors (the same problems the NumPyro peer script measures).
#[derive(Debug, Clone, Copy, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Problem {
    /// cos(2x) data (80 training rows), 1-50-1 sigmoid MLP, fixed σ = 0.1.
    Cos2xSigmoid,
    /// cos(2x) data (80 training rows), 1-50-1 ReLU MLP, fixed σ = 0.1.
    Cos2xRelu,
    /// concrete (824 training rows), 2x16 tanh MLP, heteroscedastic Gaussian.
    Concrete,
    /// protein (36584 training rows), 2x16 ReLU MLP, heteroscedastic Gaussian.
    Protein,
}

impl Problem {
    fn dataset(self) -> &'static str {
        match self {
            Problem::Cos2xSigmoid | Problem::Cos2xRelu => "cos2x",
            Problem::Concrete => "concrete",
            Problem::Protein => "protein",
        }
    }

    pub fn config(self, d_input: usize) -> BnnConfig {
        let hetero = Likelihood::GaussianHeteroscedastic { link: ScaleLink::Exp };
        let fixed = Likelihood::GaussianFixed { sigma: 0.1 };
        let (hidden, activation, likelihood) = match self {
            Problem::Cos2xSigmoid => (vec![50], Activation::Sigmoid, fixed),
            Problem::Cos2xRelu => (vec![50], Activation::Relu, fixed),
            Problem::Concrete => (vec![16, 16], Activation::Tanh, hetero),
            Problem::Protein => (vec![16, 16], Activation::Relu, hetero),
        };
        BnnConfig::new(d_input).with_hidden(hidden).with_activation(activation).with_likelihood(likelihood)
    }
}

#[derive(Args, Debug)]
pub struct BenchArgs {
    #[arg(long, value_enum, default_value = "concrete")]
    pub problem: Problem,
    /// Chain counts per call, comma separated.
    #[arg(long, default_value = "1,12,64")]
    pub chains: String,
    /// ndarray, flex, wgpu or cpu.
    #[arg(long, default_value = "cpu")]
    pub device: DeviceName,
    /// Calls per timed repeat.
    #[arg(long, default_value_t = 100)]
    pub evals: usize,
    /// Timed repeats; the median is reported.
    #[arg(long, default_value_t = 5)]
    pub repeats: usize,
    /// Also write the JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// `auto`: the fused kernel on CPU devices; `plain`: Burn's tensor graph (for comparison).
    #[arg(long, value_enum, default_value = "auto")]
    pub gradient: GradientChoice,
}

/// `--gradient` values.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum GradientChoice {
    Auto,
    Plain,
}

impl From<GradientChoice> for GradientPath {
    fn from(choice: GradientChoice) -> Self {
        match choice {
            GradientChoice::Auto => GradientPath::Auto,
            GradientChoice::Plain => GradientPath::Plain,
        }
    }
}

#[derive(Serialize)]
struct ChainResult {
    chains: usize,
    us_per_call: f64,
    us_per_chain_grad: f64,
}

#[derive(Serialize)]
struct BenchReport {
    problem: Problem,
    device: String,
    /// `fused` (handwritten backward) or `plain` (Burn's tensor graph).
    gradient: &'static str,
    dtype: &'static str,
    n_train: usize,
    n_params: usize,
    evals: usize,
    repeats: usize,
    results: Vec<ChainResult>,
}

pub fn run(args: BenchArgs) -> Result<()> {
    let chains: Vec<usize> = args
        .chains
        .split(',')
        .map(|s| s.trim().parse::<usize>().map_err(|_| anyhow!("--chains: '{s}' is not a count")))
        .collect::<Result<_>>()?;
    if chains.iter().any(|&c| c == 0) || args.evals == 0 || args.repeats == 0 {
        bail!("--chains, --evals and --repeats must be positive");
    }
    let data = prepare(args.problem.dataset(), &Preparation::default())?;
    let config = args.problem.config(data.train.x_cols);
    let device = args.device.device().map_err(|e| anyhow!(e))?;
    let posterior = MlpPosterior::new(config, &data.train, &device, DType::F32)?.with_gradient_path(args.gradient.into());
    let gradient = if posterior.uses_fused_kernel() { "fused" } else { "plain" };
    let density = AutodiffLogDensity::new(posterior);
    let d = density.dim();
    let mut results = Vec::new();
    for &c in &chains {
        // Small random weights: a typical region for a standardized-data posterior.
        let positions: Vec<f64> = (0..c * d).map(|i| 0.3 * ((i as f64 * 0.7548776662).fract() - 0.5)).collect();
        let mut values = vec![0.0; c];
        let mut grads = vec![0.0; c * d];
        for _ in 0..3 {
            density.log_density_and_gradient(&positions, &mut values, &mut grads)?;
        }
        let mut times = Vec::with_capacity(args.repeats);
        for _ in 0..args.repeats {
            let start = Instant::now();
            for _ in 0..args.evals {
                density.log_density_and_gradient(&positions, &mut values, &mut grads)?;
            }
            times.push(start.elapsed().as_secs_f64() * 1e6 / args.evals as f64);
        }
        times.sort_by(f64::total_cmp);
        let us_per_call = times[times.len() / 2];
        results.push(ChainResult { chains: c, us_per_call, us_per_chain_grad: us_per_call / c as f64 });
    }
    let report = BenchReport {
        problem: args.problem,
        device: args.device.concrete().to_string(),
        gradient,
        dtype: "f32",
        n_train: data.train.rows,
        n_params: d,
        evals: args.evals,
        repeats: args.repeats,
        results,
    };
    let json = serde_json::to_string_pretty(&report)?;
    println!("{json}");
    if let Some(path) = args.json {
        std::fs::write(&path, &json).map_err(|e| anyhow!("writing {}: {e}", path.display()))?;
    }
    Ok(())
}

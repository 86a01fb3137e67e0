//! `bnn bench`: value+gradient throughput of the BNN posteriors, as JSON.

use anyhow::{anyhow, bail, Result};
use bnn_model::{
    Activation, AutodiffLogDensity, BnnConfig, DeviceName, GradientPath, Likelihood, MlpPosterior,
    ScaleLink,
};
use bnn_pipeline::{prepare, Preparation};
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
    /// yacht (277 training rows), 2x16 ReLU MLP, heteroscedastic Gaussian.
    Yacht,
}

impl Problem {
    fn dataset(self) -> &'static str {
        match self {
            Problem::Cos2xSigmoid | Problem::Cos2xRelu => "cos2x",
            Problem::Concrete => "concrete",
            Problem::Protein => "protein",
            Problem::Yacht => "yacht",
        }
    }

    pub fn config(self, d_input: usize) -> BnnConfig {
        let hetero = Likelihood::GaussianHeteroscedastic {
            link: ScaleLink::Exp,
        };
        let fixed = Likelihood::GaussianFixed { sigma: 0.1 };
        let (hidden, activation, likelihood) = match self {
            Problem::Cos2xSigmoid => (vec![50], Activation::Sigmoid, fixed),
            Problem::Cos2xRelu => (vec![50], Activation::Relu, fixed),
            Problem::Concrete => (vec![16, 16], Activation::Tanh, hetero),
            Problem::Protein | Problem::Yacht => (vec![16, 16], Activation::Relu, hetero),
        };
        BnnConfig::new(d_input)
            .with_hidden(hidden)
            .with_activation(activation)
            .with_likelihood(likelihood)
    }
}

#[derive(Args, Debug)]
pub struct BenchArgs {
    #[arg(long, value_enum, default_value = "concrete")]
    pub problem: Problem,
    /// The hidden activation instead of the problem's own (tanh, relu, leaky_relu, sigmoid,
    /// silu, gelu, softplus, trunc_relu or identity): to time one net under each.
    #[arg(long)]
    pub activation: Option<Activation>,
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
    /// `auto`: the fused operation (host kernel on CPU devices, one device kernel per call on
    /// wgpu where it covers the model); `tensor-ops`: the tensor-operation program on any device;
    /// `plain`: Burn's tensor graph (the reference, for comparison).
    #[arg(long, default_value = "auto")]
    pub gradient: GradientPath,
    /// Also run NUTS (one chain per ensemble-free cold start, δ 0.8, depth ≤ 10) for this many
    /// warmup and then sampling iterations, and report leapfrog steps/s and ESS/s (0: skip).
    #[arg(long, default_value_t = 0)]
    pub nuts_iterations: usize,
    /// Chains for the NUTS measurement (threaded, one per core at most).
    #[arg(long, default_value_t = 2)]
    pub nuts_chains: usize,
    /// Also time one chain per call on the CPU (flex, fused host kernel) in the same run and
    /// report each chain count's throughput as a multiple of it (the GPU goal: C = 1024 chains
    /// per call at ≥ 100× one CPU chain).
    #[arg(long)]
    pub versus_cpu: bool,
    /// Call the fused operation through Burn's tensors and autodiff, as users' own posteriors
    /// are, instead of directly from the sampler's buffers (the default for the built-in MLP:
    /// the host kernel on the CPU, the device operation without a graph and with one read-back
    /// on wgpu); the difference is the per-call cost of the tensor round trip.
    #[arg(long)]
    pub through_autodiff: bool,
}

#[derive(Serialize)]
struct ChainResult {
    chains: usize,
    us_per_call: f64,
    us_per_chain_grad: f64,
    /// The fastest repeat's µs per chain-gradient: robust to other work on a shared machine.
    min_us_per_chain_grad: f64,
    chain_grads_per_second: f64,
    /// Chain gradients per second over those of one chain per call on the CPU (`--versus-cpu`).
    #[serde(skip_serializing_if = "Option::is_none")]
    speedup_vs_one_cpu_chain: Option<f64>,
}

/// Median and fastest microseconds of one call with `c` chains over the repeats (small random
/// weights: a typical region for a standardized-data posterior); untimed calls first, one
/// repeat's worth and at least 0.3 s (kernel compilation, autotuning, and the CPU's clock and
/// caches settling: with only three untimed calls the first chain count measured came out ~15%
/// slow, and with one repeat (~1 ms at 3 µs per call) the first problem measured after another
/// process, as in `compare_numpyro.py`, came out up to 1.8× slow on the 2-vCPU EPYC).
fn time_calls(
    density: &AutodiffLogDensity<MlpPosterior>,
    c: usize,
    evals: usize,
    repeats: usize,
) -> Result<(f64, f64)> {
    let d = density.dim();
    let positions: Vec<f64> = (0..c * d)
        .map(|i| 0.3 * ((i as f64 * 0.7548776662).fract() - 0.5))
        .collect();
    let mut values = vec![0.0; c];
    let mut grads = vec![0.0; c * d];
    let settling = Instant::now();
    let mut untimed = 0;
    while untimed < evals.max(3) || settling.elapsed().as_secs_f64() < 0.3 {
        density.log_density_and_gradient(&positions, &mut values, &mut grads)?;
        untimed += 1;
    }
    let mut times = Vec::with_capacity(repeats);
    for _ in 0..repeats {
        let start = Instant::now();
        for _ in 0..evals {
            density.log_density_and_gradient(&positions, &mut values, &mut grads)?;
        }
        times.push(start.elapsed().as_secs_f64() * 1e6 / evals as f64);
    }
    times.sort_by(f64::total_cmp);
    Ok((times[times.len() / 2], times[0]))
}

#[derive(Serialize)]
struct BenchReport {
    problem: Problem,
    activation: Activation,
    device: String,
    /// `host_kernel`, `device_kernel` or `tensor_ops` (the fused operation's programs,
    /// handwritten backward) or `plain` (Burn's tensor graph).
    gradient: &'static str,
    /// `direct`: the sampler's buffers go straight to the host kernel (CPU) or to the device
    /// operation without a graph (wgpu); `autodiff`: through Burn tensors and one autodiff
    /// backward per call.
    call: &'static str,
    /// The kernel's instruction set (`avx512`, `avx2_fma` or `portable`; `BNN_KERNEL_ISA`
    /// forces a lower one).
    kernel_isa: &'static str,
    /// The device kernel's gradient phase: `single` or `2x2` (`BNN_DEVICE_GRADIENT_TILE`).
    #[serde(skip_serializing_if = "Option::is_none")]
    gradient_tile: Option<&'static str>,
    /// Where the device kernel reads the inputs: `shared` or `global` (`BNN_DEVICE_INPUT_COLUMNS`).
    #[serde(skip_serializing_if = "Option::is_none")]
    input_columns: Option<&'static str>,
    dtype: &'static str,
    n_train: usize,
    n_params: usize,
    evals: usize,
    repeats: usize,
    results: Vec<ChainResult>,
    #[serde(skip_serializing_if = "Option::is_none")]
    nuts: Option<NutsResult>,
    /// Peak resident memory of this process (Linux VmHWM), MB.
    peak_rss_mb: Option<f64>,
    /// µs of one value+gradient with one chain per call on flex (`--versus-cpu`).
    #[serde(skip_serializing_if = "Option::is_none")]
    cpu_one_chain_us: Option<f64>,
}

#[derive(Serialize)]
struct NutsResult {
    chains: usize,
    warmup: usize,
    draws: usize,
    seconds: f64,
    leapfrog_steps: u64,
    leapfrog_per_second: f64,
    /// Smallest bulk ESS over the log density and every coordinate, pooled over chains.
    min_ess_bulk: f64,
    /// Bulk ESS of the log density.
    lp_ess_bulk: f64,
    min_ess_per_second: f64,
    mean_tree_depth: f64,
    divergences: usize,
}

/// Times a short NUTS run (warmup included in the time and the leapfrog count).
fn nuts_run(
    density: &AutodiffLogDensity<MlpPosterior>,
    iterations: usize,
    chains: usize,
) -> Result<NutsResult> {
    use bnn_sampler::{ChainStart, NutsConfig, SamplerConfig};
    let d = density.dim();
    let sampler = SamplerConfig::new(NutsConfig::new().into())
        .with_num_warmup(iterations)
        .with_num_draws(iterations)
        .with_seed(1)
        .init()?;
    let starts: Vec<ChainStart> = (0..chains)
        .map(|c| {
            ChainStart::at(
                (0..d)
                    .map(|i| 0.3 * (((i + 7 * c) as f64 * 0.7548776662).fract() - 0.5))
                    .collect(),
            )
        })
        .collect();
    let start = Instant::now();
    let mut states = sampler.init_chains(density, &starts)?;
    let mut draws = bnn_sampler::CollectedDraws::new(chains, d).with_warmup(true);
    sampler.run(
        density,
        &mut states,
        &mut draws,
        &std::sync::atomic::AtomicBool::new(false),
    )?;
    let seconds = start.elapsed().as_secs_f64();
    let mut leapfrog_steps = 0u64;
    let mut depth_sum = 0.0;
    let mut divergences = 0;
    let mut count = 0usize;
    for c in 0..chains {
        for s in draws.stats(c).iter().chain(&draws.chain(c).warmup_stats) {
            leapfrog_steps += u64::from(s.n_leapfrog);
        }
        for s in draws.stats(c) {
            depth_sum += f64::from(s.tree_depth);
            divergences += usize::from(s.divergent);
            count += 1;
        }
    }
    let lp_ess_bulk = bnn_diagnostics::ess_bulk(&draws.stat(|s| s.log_density));
    let min_ess_bulk = (0..d)
        .map(|i| bnn_diagnostics::ess_bulk(&draws.coordinate(i)))
        .fold(lp_ess_bulk, f64::min);
    Ok(NutsResult {
        chains,
        warmup: iterations,
        draws: iterations,
        seconds,
        leapfrog_steps,
        leapfrog_per_second: leapfrog_steps as f64 / seconds,
        min_ess_bulk,
        lp_ess_bulk,
        min_ess_per_second: min_ess_bulk / seconds,
        mean_tree_depth: depth_sum / count.max(1) as f64,
        divergences,
    })
}

/// Peak resident set size from /proc (None off Linux).
fn peak_rss_mb() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

pub fn run(args: BenchArgs) -> Result<()> {
    let chains: Vec<usize> = args
        .chains
        .split(',')
        .map(|s| {
            s.trim()
                .parse::<usize>()
                .map_err(|_| anyhow!("--chains: '{s}' is not a count"))
        })
        .collect::<Result<_>>()?;
    if chains.contains(&0) || args.evals == 0 || args.repeats == 0 {
        bail!("--chains, --evals and --repeats must be positive");
    }
    let data = prepare(args.problem.dataset(), &Preparation::default())?;
    let mut config = args.problem.config(data.train.x_cols);
    if let Some(activation) = args.activation {
        config = config.with_activation(activation);
    }
    let activation = config.activation;
    let device = args.device.device()?;
    let cpu_one_chain_us = if args.versus_cpu {
        let cpu = DeviceName::Flex.device()?;
        let cpu_density = AutodiffLogDensity::new(MlpPosterior::new(
            config.clone(),
            &data.train,
            &cpu,
            DType::F32,
        )?);
        Some(time_calls(&cpu_density, 1, args.evals, args.repeats)?.0)
    } else {
        None
    };
    let posterior = MlpPosterior::new(config, &data.train, &device, DType::F32)?
        .with_gradient_path(args.gradient);
    let gradient = posterior.gradient_program();
    // The direct paths: the host kernel on the CPU, the device operation on wgpu (either
    // program). The plain graph and the tensor program on the CPU go through autodiff anyway.
    let on_wgpu = args.device.concrete() == DeviceName::Wgpu;
    let direct =
        !args.through_autodiff && (gradient == "host_kernel" || (on_wgpu && gradient != "plain"));
    let density = AutodiffLogDensity::new(posterior);
    let density = if direct {
        density
    } else {
        density.through_autodiff()
    };
    let d = density.dim();
    let mut results = Vec::new();
    for &c in &chains {
        let (us_per_call, fastest_call) = time_calls(&density, c, args.evals, args.repeats)?;
        let us_per_chain_grad = us_per_call / c as f64;
        results.push(ChainResult {
            chains: c,
            us_per_call,
            us_per_chain_grad,
            min_us_per_chain_grad: fastest_call / c as f64,
            chain_grads_per_second: 1e6 / us_per_chain_grad,
            speedup_vs_one_cpu_chain: cpu_one_chain_us.map(|cpu| cpu / us_per_chain_grad),
        });
    }
    let nuts = if args.nuts_iterations > 0 {
        if args.nuts_chains == 0 {
            bail!("--nuts-chains must be positive");
        }
        Some(nuts_run(&density, args.nuts_iterations, args.nuts_chains)?)
    } else {
        None
    };
    let report = BenchReport {
        problem: args.problem,
        activation,
        device: args.device.concrete().to_string(),
        gradient,
        call: if direct { "direct" } else { "autodiff" },
        kernel_isa: bnn_kernels::instruction_set(),
        gradient_tile: (gradient == "device_kernel")
            .then(|| bnn_model::fused_mlp::GradientTile::from_env().name()),
        input_columns: (gradient == "device_kernel")
            .then(|| bnn_model::fused_mlp::InputColumns::from_env().name()),
        dtype: "f32",
        n_train: data.train.rows,
        n_params: d,
        evals: args.evals,
        repeats: args.repeats,
        results,
        nuts,
        peak_rss_mb: peak_rss_mb(),
        cpu_one_chain_us,
    };
    let json = serde_json::to_string_pretty(&report)?;
    println!("{json}");
    if let Some(path) = args.json {
        std::fs::write(&path, &json).map_err(|e| anyhow!("writing {}: {e}", path.display()))?;
    }
    Ok(())
}

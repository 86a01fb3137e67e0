//! `bnn sample`: NUTS, HMC or random-walk Metropolis on a BNN posterior, with draws on disk and
//! a summary of predictive metrics and convergence.

use crate::draw_files::DrawFiles;
use crate::model_args::ModelArgs;
use crate::prepared_data::{prepare, Preparation};
use anyhow::{anyhow, bail, Context, Result};
use bnn_model::{initial_parameters, AutodiffLogDensity, EnsembleConfig, PointPrediction, PredictiveAccumulator, DeviceName, MlpPosterior, ParameterLayout, Posterior};
use bnn_sampler::{AlgorithmConfig, ChainStart, HmcConfig, NutsConfig, RandomWalkConfig, SamplerConfig};
use burn::tensor::DType;
use clap::{Args, ValueEnum};
use serde_json::json;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Algorithm {
    /// No-U-turn sampler (multinomial, generalized U-turn criterion).
    Nuts,
    /// Hamiltonian Monte Carlo with a fixed number of leapfrog steps.
    Hmc,
    /// Random-walk Metropolis (a baseline).
    Rwm,
}

/// Where the chains start.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Init {
    /// Random initialization U(±1/sqrt(fan_in)), one stream per chain.
    Cold,
    /// DEI-MCMC: train a deep ensemble with Adam, start chain j at member j (mod M).
    Ensemble,
}

#[derive(Args, Debug)]
pub struct SampleArgs {
    /// A benchmark name (concrete, ...), a generator (cos2x, robot-arm) or a CSV file.
    #[arg(long, default_value = "cos2x")]
    pub dataset: String,
    #[command(flatten)]
    pub model: ModelArgs,
    /// Transition kernel.
    #[arg(long, value_enum, default_value = "nuts")]
    pub sampler: Algorithm,
    /// Number of chains (run in parallel on CPU threads).
    #[arg(long, default_value_t = 4)]
    pub chains: usize,
    /// Warmup (adaptation) iterations per chain; not kept as draws.
    #[arg(long, default_value_t = 500)]
    pub warmup: usize,
    /// Draws kept per chain.
    #[arg(long, default_value_t = 500)]
    pub draws: usize,
    /// Target acceptance statistic of the step-size adaptation (about 0.45 suits ReLU networks,
    /// whose leapfrog error is first order in ε; 0.8 smooth ones). Default: 0.8 for NUTS/HMC.
    #[arg(long)]
    pub target_accept: Option<f64>,
    /// HMC: leapfrog steps per draw.
    #[arg(long, default_value_t = 32)]
    pub leapfrog_steps: usize,
    /// NUTS: maximum tree depth.
    #[arg(long, default_value_t = 10)]
    pub max_depth: usize,
    /// Seed of the chains' starting points and random streams.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Seed of the random train/test split (and of generated data).
    #[arg(long, default_value_t = 0)]
    pub split_seed: u64,
    /// ndarray, flex, wgpu or cpu.
    #[arg(long, default_value = "cpu")]
    pub device: DeviceName,
    /// Worker threads for the chains (the draws do not depend on it).
    #[arg(long)]
    pub threads: Option<usize>,
    /// HMC only: advance all chains in lockstep with one [C, D] gradient call per leapfrog step
    /// (one batched matrix product instead of C small ones; the GPU-friendly mode).
    #[arg(long)]
    pub batched: bool,
    /// Chain starting points.
    #[arg(long, value_enum, default_value = "cold")]
    pub init: Init,
    /// Ensemble members (with --init ensemble).
    #[arg(long, default_value_t = 12)]
    pub members: usize,
    /// Full-batch Adam steps per member.
    #[arg(long, default_value_t = 5000)]
    pub epochs: usize,
    #[arg(long, default_value_t = 1e-3)]
    pub learning_rate: f64,
    /// Coupled L2 weight decay of the members' Adam (the DEI-MCMC reference: 1e-2).
    #[arg(long, default_value_t = 1e-2)]
    pub weight_decay: f64,
    /// Output directory for draws and summary.json.
    #[arg(long, default_value = "runs/sample")]
    pub out: PathBuf,
}

/// Cold starts: PyTorch-style initialization, one stream per chain.
pub fn cold_starts(layout: &ParameterLayout, seed: u64, chains: usize) -> Vec<ChainStart> {
    (0..chains).map(|chain| ChainStart::at(initial_parameters(layout, seed, 1_000 + chain as u64))).collect()
}

pub fn run(args: SampleArgs) -> Result<()> {
    if args.chains == 0 || args.draws == 0 {
        bail!("--chains and --draws must be positive");
    }
    let how = Preparation { split_seed: args.split_seed, generator_seed: args.split_seed, ..Preparation::default() };
    let data = prepare(&args.dataset, &how)?;
    let config = args.model.config(data.train.x_cols)?;
    let device = args.device.device().map_err(|e| anyhow!(e))?;
    let posterior = MlpPosterior::new(config.clone(), &data.train, &device, DType::F32)?;
    let layout = posterior.layout().clone();
    let density = AutodiffLogDensity::new(posterior);

    let target = args.target_accept;
    let algorithm: AlgorithmConfig = match args.sampler {
        Algorithm::Nuts => {
            let mut c = NutsConfig::new().with_max_tree_depth(args.max_depth as u32);
            if let Some(t) = target {
                c = c.with_target_accept(t);
            }
            c.into()
        }
        Algorithm::Hmc => {
            let mut c = HmcConfig::new().with_num_steps(args.leapfrog_steps);
            if let Some(t) = target {
                c = c.with_target_accept(t);
            }
            c.into()
        }
        Algorithm::Rwm => {
            let mut c = RandomWalkConfig::new();
            if let Some(t) = target {
                c = c.with_target_accept(t);
            }
            c.into()
        }
    };
    let sampler = SamplerConfig::new(algorithm)
        .with_num_warmup(args.warmup)
        .with_num_draws(args.draws)
        .with_seed(args.seed)
        .with_threads(args.threads)
        .with_batched(args.batched)
        .init()?;

    std::fs::create_dir_all(&args.out).with_context(|| format!("creating {}", args.out.display()))?;
    let threads = args.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let ensemble_start = Instant::now();
    let (starts, members) = match args.init {
        Init::Cold => (cold_starts(&layout, args.seed, args.chains), Vec::new()),
        Init::Ensemble => {
            let ensemble = EnsembleConfig::new()
                .with_members(args.members)
                .with_epochs(args.epochs)
                .with_learning_rate(args.learning_rate)
                .with_weight_decay(args.weight_decay)
                .with_seed(args.seed);
            eprintln!("training {} ensemble members ({} Adam steps each)", args.members, args.epochs);
            let members = ensemble.train(&config, &data.train, &device, threads)?;
            let starts = (0..args.chains)
                .map(|c| ChainStart::at(members[c % members.len()].parameters.iter().map(|&v| f64::from(v)).collect()))
                .collect();
            (starts, members)
        }
    };
    let seconds_ensemble = ensemble_start.elapsed().as_secs_f64();
    let mut chains = sampler.init_chains(&density, &starts)?;
    let mut files = DrawFiles::create(&args.out, args.chains, &layout).context("creating draw files")?;
    eprintln!(
        "sampling {} ({} train / {} test rows, {} parameters): {} chains x ({} warmup + {} draws), {:?} on {}",
        data.name, data.train.rows, data.test.rows, layout.dim(), args.chains, args.warmup, args.draws, args.sampler, args.device
    );
    let start = Instant::now();
    sampler.run(&density, &mut chains, &mut files, &AtomicBool::new(false))?;
    files.finish()?;
    let seconds = start.elapsed().as_secs_f64();

    // Predictive metrics of the pooled chains and of each chain, on the standardized scale,
    // streamed over chunks of draws so memory stays O(chunk · N_test).
    const CHUNK: usize = 64;
    let collected = &files.collected;
    let posterior = density.posterior();
    let d = layout.dim();
    let mut pooled = PredictiveAccumulator::new(&data.test.y, data.test.y_cols);
    let mut per_chain = Vec::with_capacity(args.chains);
    // Function-space diagnostics (Sommer et al. 2024): per-draw test log likelihood and RMSE,
    // and the predictive mean at up to POINTWISE test points, each as [chain][draw].
    const POINTWISE: usize = 100;
    let (n_test, t) = (data.test.rows, data.test.y_cols);
    let watched = n_test.min(POINTWISE);
    let mut draw_loglik = vec![Vec::new(); args.chains];
    let mut draw_rmse = vec![Vec::new(); args.chains];
    let mut point_means = vec![vec![Vec::new(); args.chains]; watched];
    for c in 0..args.chains {
        let mut chain_metrics = PredictiveAccumulator::new(&data.test.y, data.test.y_cols);
        for chunk in collected.chain(c).positions.chunks(CHUNK * d) {
            for draw in posterior.predictions(chunk, &data.test) {
                pooled.add_draw(&draw);
                chain_metrics.add_draw(&draw);
                let mut loglik = 0.0;
                let mut sq = 0.0;
                for (i, p) in draw.iter().enumerate() {
                    let yi = &data.test.y[i * t..(i + 1) * t];
                    loglik += p.log_likelihood(yi);
                    if let PointPrediction::Gaussian { mean, .. } = p {
                        sq += mean.iter().zip(yi).map(|(m, y)| (m - y).powi(2)).sum::<f64>();
                        if i < watched {
                            point_means[i][c].push(mean[0]);
                        }
                    }
                }
                draw_loglik[c].push(loglik);
                draw_rmse[c].push((sq / (n_test * t) as f64).sqrt());
            }
        }
        per_chain.push(chain_metrics.finish());
    }
    let function_rhat = |chains: &[Vec<f64>]| if chains[0].len() >= 4 { bnn_diagnostics::rhat_split(chains) } else { f64::NAN };
    let rhat_test_loglik = function_rhat(&draw_loglik);
    let rhat_test_rmse = function_rhat(&draw_rmse);
    let pointwise_rhats: Vec<f64> =
        point_means.iter().filter(|m| !m[0].is_empty()).map(|m| function_rhat(m)).filter(|r| r.is_finite()).collect();
    let pointwise_rhat_max = pointwise_rhats.iter().cloned().fold(f64::NAN, f64::max);
    let pointwise_rhat_mean = pointwise_rhats.iter().sum::<f64>() / pointwise_rhats.len() as f64;
    let pooled = pooled.finish();
    // The deep-ensemble baseline: the members as an equal mixture.
    let ensemble_metrics = (!members.is_empty()).then(|| {
        let flat: Vec<f64> = members.iter().flat_map(|m| m.parameters.iter().map(|&v| f64::from(v))).collect();
        let mut acc = PredictiveAccumulator::new(&data.test.y, data.test.y_cols);
        for draw in posterior.predictions(&flat, &data.test) {
            acc.add_draw(&draw);
        }
        acc.finish()
    });
    let stats: Vec<_> = (0..args.chains).flat_map(|c| collected.stats(c).to_vec()).collect();
    let divergences = stats.iter().filter(|s| s.divergent).count();
    let mean_accept = stats.iter().map(|s| s.accept_stat).sum::<f64>() / stats.len() as f64;
    let mean_leapfrog = stats.iter().map(|s| s.n_leapfrog as f64).sum::<f64>() / stats.len() as f64;
    let rhats: Vec<f64> = (0..layout.dim()).map(|d| bnn_diagnostics::rhat(&collected.coordinate(d))).collect();
    let max_rhat = rhats.iter().cloned().filter(|r| r.is_finite()).fold(f64::NAN, f64::max);
    let lp_rhat = bnn_diagnostics::rhat(&collected.stat(|s| s.log_density));
    let y_sd = data.standardizer.y_sd.first().copied().unwrap_or(1.0);

    let summary = json!({
        "dataset": data.name,
        "split_seed": args.split_seed,
        "n_train": data.train.rows,
        "n_test": data.test.rows,
        "n_params": layout.dim(),
        "sampler": format!("{:?}", args.sampler).to_lowercase(),
        "chains": args.chains,
        "warmup": args.warmup,
        "draws": args.draws,
        "seed": args.seed,
        "device": args.device.concrete().to_string(),
        "config": serde_json::to_value(&config)?,
        "rmse": pooled.rmse,
        "rmse_original_units": pooled.rmse * y_sd,
        "lppd": pooled.lppd,
        "nll": pooled.nll,
        "accuracy": pooled.accuracy,
        "chain_rmse": per_chain.iter().map(|m| m.rmse).collect::<Vec<_>>(),
        "chain_lppd": per_chain.iter().map(|m| m.lppd).collect::<Vec<_>>(),
        "divergences": divergences,
        "mean_accept_stat": mean_accept,
        "mean_leapfrog_per_draw": mean_leapfrog,
        "max_rhat": max_rhat,
        "rhat_log_density": lp_rhat,
        "rhat_test_loglik": rhat_test_loglik,
        "rhat_test_rmse": rhat_test_rmse,
        "pointwise_predictive_rhat_max": pointwise_rhat_max,
        "pointwise_predictive_rhat_mean": pointwise_rhat_mean,
        "init": format!("{:?}", args.init).to_lowercase(),
        "members": members.len(),
        "de_rmse": ensemble_metrics.as_ref().map(|m| m.rmse),
        "de_lppd": ensemble_metrics.as_ref().map(|m| m.lppd),
        "seconds_ensemble": seconds_ensemble,
        "seconds_sampling": seconds,
        "draw_files": files.paths().iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
    });
    let path = args.out.join("summary.json");
    std::fs::write(&path, serde_json::to_string_pretty(&summary)?).with_context(|| format!("writing {}", path.display()))?;
    println!(
        "test RMSE {:.4} (original units {:.4}), test LPPD {:.4}, divergences {divergences}, mean accept {:.3}, {:.1} s",
        pooled.rmse,
        pooled.rmse * y_sd,
        pooled.lppd,
        mean_accept,
        seconds
    );
    println!(
        "R-hat: parameters max {:.3}; function space: test log-lik {:.3}, test RMSE {:.3}, pointwise predictive max {:.3}",
        max_rhat, rhat_test_loglik, rhat_test_rmse, pointwise_rhat_max
    );
    if let Some(m) = &ensemble_metrics {
        println!("deep ensemble ({} members): test RMSE {:.4}, test LPPD {:.4}", members.len(), m.rmse, m.lppd);
    }
    println!("wrote {} and {} draw files", path.display(), args.chains);
    Ok(())
}

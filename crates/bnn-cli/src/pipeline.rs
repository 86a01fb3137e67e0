//! The stages of a DEI-MCMC run — train the ensemble, sample, predict, evaluate — each reading
//! and writing the run directory, so `bnn run` is the four in a row and each can be rerun alone.

use crate::draw_reader::for_each_stored_draw;
use crate::draw_store::{cmdstan_names, write_json, Checkpoint, DrawStore};
use crate::early_stop::EarlyStop;
use crate::linear_baseline::LinearBaseline;
use crate::posterior_pass::{ensemble_metrics, run_pass, PassResult, BAND_LEVELS, LEVELS};
use crate::prepared_data::{prepare, PreparedData, Preparation};
use crate::progress::ChainProgress;
use crate::run_config::{Algorithm, Init, RunConfig, Standardize};
use crate::run_dir::{write_atomic, RunDir};
use anyhow::{anyhow, bail, Context as _, Result};
use bnn_data::StatsSource;
use bnn_model::{initial_parameters, load_parameters, save_parameters, AutodiffLogDensity, BnnConfig, EnsembleConfig, MlpPosterior, ParameterLayout, Posterior};
use bnn_sampler::{AlgorithmConfig, ChainStart, HmcConfig, NutsConfig, RandomWalkConfig, RunStatus, SamplerConfig};
use burn::tensor::{DType, Device};
use serde_json::json;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

/// Raised by Ctrl-C: sampling stops between draws, checkpoints every chain and exits.
pub static STOP: AtomicBool = AtomicBool::new(false);

/// The data, model and device of a run, built from its config.
pub struct RunContext {
    pub config: RunConfig,
    pub dir: RunDir,
    pub data: PreparedData,
    pub bnn: BnnConfig,
    pub device: Device,
    /// The posterior on the training data, with gradients through Burn's autodiff.
    pub density: AutodiffLogDensity<MlpPosterior>,
    pub layout: ParameterLayout,
}

impl RunContext {
    pub fn new(config: RunConfig, dir: RunDir) -> Result<Self> {
        let how = Preparation {
            test_fraction: config.data.test_fraction,
            valid_fraction: config.data.validation_fraction,
            split_seed: config.data.split_seed,
            generator_seed: config.data.split_seed,
            stats: match config.data.standardize {
                Standardize::Train => StatsSource::TrainingSplit,
                Standardize::Full => StatsSource::FullData,
            },
            ..Preparation::default()
        };
        let data = prepare(&config.data.dataset, &how)?;
        let bnn = config.bnn_config(data.train.x_cols)?;
        let device = config.device_name()?.device().map_err(|e| anyhow!(e))?;
        if let Some(threads) = config.runtime.threads {
            bnn_model::fused_mlp::set_kernel_threads(threads);
        }
        let posterior = MlpPosterior::new(bnn.clone(), &data.train, &device, DType::F32)?.with_gradient_path(config.runtime.gradient);
        let layout = posterior.layout().clone();
        Ok(Self { config, dir, data, bnn, device, density: AutodiffLogDensity::new(posterior), layout })
    }

    pub fn posterior(&self) -> &MlpPosterior {
        self.density.posterior()
    }

    fn write_layout(&self) -> Result<()> {
        let value = json!({ "dim": self.layout.dim(), "entries": serde_json::to_value(&self.layout.entries)?, "columns": cmdstan_names(&self.layout) });
        write_json(&self.dir.layout(), &value)
    }
}

/// Trains the deep ensemble and saves every member as safetensors plus `members.json`.
pub fn train_stage(ctx: &RunContext) -> Result<Vec<Vec<f32>>> {
    let e = &ctx.config.ensemble;
    let ensemble = EnsembleConfig::new()
        .with_members(e.members)
        .with_epochs(e.epochs)
        .with_learning_rate(e.learning_rate)
        .with_weight_decay(e.weight_decay)
        .with_decoupled_weight_decay(e.decoupled_weight_decay)
        .with_batch_size(e.batch_size)
        .with_patience(e.patience)
        .with_seed(ctx.config.sampler.seed);
    eprintln!(
        "training {} members on {} rows ({} {}, {})",
        e.members,
        ctx.data.train.rows,
        e.epochs,
        if e.batch_size.is_some() { "epochs at most" } else { "full-batch Adam steps" },
        if e.decoupled_weight_decay { "AdamW" } else { "Adam + L2" }
    );
    let start = Instant::now();
    let members = ensemble.train_with_validation(&ctx.bnn, &ctx.data.train, ctx.data.valid.as_ref(), &ctx.device, ctx.config.threads())?;
    let seconds = start.elapsed().as_secs_f64();
    std::fs::create_dir_all(ctx.dir.ensemble_dir())?;
    for member in &members {
        save_parameters(&ctx.bnn, &member.parameters, &ctx.dir.member(member.index))?;
    }
    let records: Vec<_> = members
        .iter()
        .map(|m| {
            json!({ "index": m.index, "file": ctx.dir.member(m.index).file_name().map(|n| n.to_string_lossy().into_owned()),
                    "seed": m.seed, "init_stream": m.index, "epochs_run": m.epochs_run, "initial_loss": m.initial_loss,
                    "final_loss": m.final_loss, "best_valid_loss": m.best_valid_loss })
        })
        .collect();
    write_json(&ctx.dir.members_json(), &json!({ "members": records, "seconds": seconds }))?;
    ctx.write_layout()?;
    eprintln!("trained {} members in {seconds:.1} s; saved to {}", members.len(), ctx.dir.ensemble_dir().display());
    Ok(members.into_iter().map(|m| m.parameters).collect())
}

/// The saved members and their training time, if this run directory has a complete ensemble.
pub fn load_members(ctx: &RunContext) -> Result<Option<(Vec<Vec<f32>>, f64)>> {
    let path = ctx.dir.members_json();
    if !path.exists() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(&path)?;
    let value: serde_json::Value = serde_json::from_str(&text).with_context(|| format!("{} is corrupt", path.display()))?;
    let count = value["members"].as_array().map_or(0, |m| m.len());
    if count != ctx.config.ensemble.members {
        bail!("{} lists {count} members, the config asks for {}", path.display(), ctx.config.ensemble.members);
    }
    let members = (0..count).map(|j| load_parameters(&ctx.bnn, &ctx.dir.member(j)).map_err(anyhow::Error::from)).collect::<Result<Vec<_>>>()?;
    Ok(Some((members, value["seconds"].as_f64().unwrap_or(f64::NAN))))
}

/// The members, trained now if the directory does not hold them yet.
pub fn members(ctx: &RunContext) -> Result<(Vec<Vec<f32>>, f64)> {
    if let Some(found) = load_members(ctx)? {
        eprintln!("using the {} saved members in {}", found.0.len(), ctx.dir.ensemble_dir().display());
        return Ok(found);
    }
    let start = Instant::now();
    let members = train_stage(ctx)?;
    Ok((members, start.elapsed().as_secs_f64()))
}

fn sampler_config(config: &RunConfig) -> Result<SamplerConfig> {
    let s = &config.sampler;
    let algorithm: AlgorithmConfig = match s.algorithm {
        Algorithm::Nuts => {
            let mut c = NutsConfig::new().with_max_tree_depth(s.max_depth as u32);
            if let Some(t) = s.target_accept {
                c = c.with_target_accept(t);
            }
            c.into()
        }
        Algorithm::Hmc => {
            let mut c = HmcConfig::new().with_num_steps(s.leapfrog_steps);
            if let Some(t) = s.target_accept {
                c = c.with_target_accept(t);
            }
            c.into()
        }
        Algorithm::Rwm => {
            let mut c = RandomWalkConfig::new();
            if let Some(t) = s.target_accept {
                c = c.with_target_accept(t);
            }
            c.into()
        }
    };
    Ok(SamplerConfig::new(algorithm)
        .with_num_warmup(s.warmup)
        .with_num_draws(s.draws)
        .with_seed(s.seed)
        .with_threads(config.runtime.threads)
        .with_batched(s.batched))
}

/// The chains' starting points (and the ensemble's training seconds, 0 when none was trained).
fn chain_starts(ctx: &RunContext) -> Result<(Vec<ChainStart>, f64)> {
    let chains = ctx.config.chains();
    let widen = |p: &[f32]| p.iter().map(|&v| f64::from(v)).collect::<Vec<f64>>();
    Ok(match ctx.config.sampler.init {
        Init::Cold => ((0..chains).map(|c| ChainStart::at(initial_parameters(&ctx.layout, ctx.config.sampler.seed, 1_000 + c as u64))).collect(), 0.0),
        Init::Single => {
            let path = ctx.config.sampler.init_from.as_ref().expect("validated: single has init_from");
            let theta = load_parameters(&ctx.bnn, path).with_context(|| format!("loading the warm start {}", path.display()))?;
            (vec![ChainStart::at(widen(&theta)); chains], 0.0)
        }
        Init::Ensemble => {
            let (members, seconds) = members(ctx)?;
            ((0..chains).map(|c| ChainStart::at(widen(&members[c % members.len()]))).collect(), seconds)
        }
    })
}

/// How sampling ended.
pub struct SamplingOutcome {
    pub finished: bool,
}

/// Runs (or with `resume`, continues) the chains, streaming draws and checkpoints to the run
/// directory; writes `sampling.json` when every chain is done.
pub fn sample_stage(ctx: &RunContext, resume: bool) -> Result<SamplingOutcome> {
    let config = &ctx.config;
    let chains = config.chains();
    let sampler = sampler_config(config)?.init()?;
    let density = &ctx.density;
    if !resume && (ctx.dir.draws(0).exists() || ctx.dir.checkpoint(0).exists()) {
        bail!("{} already holds draws; continue it with `bnn sample --resume {}` or choose a new --out", ctx.dir.root().display(), ctx.dir.root().display());
    }
    let (starts, seconds_ensemble) = chain_starts(ctx)?;
    ctx.write_layout()?;
    let mut states = sampler.init_chains(density, &starts)?;
    let mut resumed: Vec<Option<Checkpoint>> = vec![None; chains];
    if resume {
        for (c, slot) in resumed.iter_mut().enumerate() {
            let path = ctx.dir.checkpoint(c);
            if path.exists() {
                let checkpoint = Checkpoint::load(&path)?;
                if checkpoint.chain != c || checkpoint.state.kernel.dim() != ctx.layout.dim() {
                    bail!("checkpoint {} belongs to another chain or model; the run directory is damaged", path.display());
                }
                states[c] = checkpoint.state.clone();
                *slot = Some(checkpoint);
            }
        }
    }
    let total = config.sampler.warmup + config.sampler.draws;
    let done: Vec<usize> = states.iter().map(|s| s.iteration).collect();
    let mut store = DrawStore::open(&ctx.dir, &ctx.layout, &resumed, config.sampler.checkpoint_every, config.sampler.thin)?;
    if config.sampler.early_stop {
        let test = &ctx.data.test;
        let posterior = ctx.posterior();
        let rule = bnn_diagnostics::LppdConvergence::new(config.sampler.early_stop_window, config.sampler.early_stop_tolerance);
        let pointwise = Box::new(move |theta: &[f64]| -> Result<Vec<f64>> {
            let draw = posterior.predictions(theta, test).pop().ok_or_else(|| anyhow!("no prediction"))?;
            Ok(draw.iter().enumerate().map(|(i, p)| p.log_likelihood(&test.y[i * test.y_cols..(i + 1) * test.y_cols])).collect())
        });
        let mut early = EarlyStop::new(rule, test.rows, chains, pointwise);
        for (c, checkpoint) in resumed.iter().enumerate() {
            if checkpoint.is_some() {
                // Rebuild the chain's LPPD history from its stored draws (what it saw before).
                for_each_stored_draw(&ctx.dir.draws(c), ctx.layout.dim(), |_, theta| early.observe(c, theta).map(|_| ()))?;
            }
        }
        store = store.with_early_stop(early);
    }
    eprintln!(
        "sampling {} ({} train / {} test rows, {} parameters): {} chains x ({} warmup + {} draws), {:?} from {:?} start on {}{}",
        ctx.data.name,
        ctx.data.train.rows,
        ctx.data.test.rows,
        ctx.layout.dim(),
        chains,
        config.sampler.warmup,
        config.sampler.draws,
        config.sampler.algorithm,
        config.sampler.init,
        config.device_name()?.concrete(),
        if resume { format!(" (resuming at iterations {done:?})") } else { String::new() }
    );
    // Bars last: a line printed while they are drawn would leave stale copies on the terminal.
    store = store.with_progress(ChainProgress::new(total, &done));
    let start = Instant::now();
    let status = sampler.run(density, &mut states, &mut store, &STOP)?;
    let wall = start.elapsed().as_secs_f64();
    store.finish_progress();
    for state in &states {
        store.checkpoint(state)?;
    }
    if status == RunStatus::Stopped {
        eprintln!("interrupted: every chain is checkpointed; continue with `bnn sample --resume {}`", ctx.dir.root().display());
        return Ok(SamplingOutcome { finished: false });
    }
    let (busy_warmup, busy_sampling) = store.busy_seconds();
    // Chain busy time (summed over chains, kept across resumes) over the chains run at once.
    let parallel = config.threads().min(chains).max(1) as f64;
    write_json(
        &ctx.dir.sampling(),
        &json!({
            "status": "finished",
            "chains": chains,
            "finished_early": store.finished_early(),
            "seconds_ensemble": seconds_ensemble,
            "seconds_warmup": busy_warmup / parallel,
            "seconds_sampling": busy_sampling / parallel,
            "seconds_wall_last_session": wall,
            "chain_seconds_warmup": busy_warmup,
            "chain_seconds_sampling": busy_sampling,
            "resumed": resume,
        }),
    )?;
    eprintln!("sampled in {wall:.1} s; draws in {}", ctx.dir.root().display());
    Ok(SamplingOutcome { finished: true })
}

fn original_x(ctx: &RunContext, row: usize, data: &bnn_model::HostData) -> Vec<f64> {
    let s = &ctx.data.standardizer;
    (0..data.x_cols).map(|j| data.x[row * data.x_cols + j] * s.x_sd[j] + s.x_mean[j]).collect()
}

/// Writes `predictions.csv` (and `train.csv` for one-input data, for the plots).
pub fn predict_stage(ctx: &RunContext, pass: &PassResult) -> Result<()> {
    let test = &ctx.data.test;
    if pass.points.is_empty() {
        eprintln!("no predictive intervals for a categorical likelihood; predictions.csv not written");
        return Ok(());
    }
    let s = &ctx.data.standardizer;
    let t = test.y_cols;
    let band_index: Vec<usize> = BAND_LEVELS.iter().map(|b| LEVELS.iter().position(|l| l == b).expect("band levels are measured levels")).collect();
    let mut header: Vec<String> = vec!["index".into()];
    if t > 1 {
        header.push("target".into());
    }
    header.extend((0..test.x_cols).map(|j| format!("x{j}")));
    let bands = |suffix: &str| -> Vec<String> {
        let mut v = vec![format!("y{suffix}"), format!("mean{suffix}"), format!("sd{suffix}")];
        for b in BAND_LEVELS {
            let pct = (b * 100.0).round() as usize;
            v.push(format!("lower_{pct}{suffix}"));
            v.push(format!("upper_{pct}{suffix}"));
        }
        v
    };
    header.extend(bands(""));
    header.extend(bands("_std"));
    let mut out = header.join(",") + "\n";
    for i in 0..test.rows {
        for k in 0..t {
            let p = &pass.points[i * t + k];
            let (ym, ys) = (s.y_mean[k], s.y_sd[k]);
            let mut row: Vec<String> = vec![i.to_string()];
            if t > 1 {
                row.push(k.to_string());
            }
            row.extend(original_x(ctx, i, test).iter().map(|v| v.to_string()));
            let y = test.y[i * t + k];
            let mut scaled = vec![y * ys + ym, p.mean * ys + ym, p.sd * ys];
            let mut standard = vec![y, p.mean, p.sd];
            for &b in &band_index {
                let (lo, hi) = p.intervals[b];
                scaled.extend([lo * ys + ym, hi * ys + ym]);
                standard.extend([lo, hi]);
            }
            row.extend(scaled.iter().chain(&standard).map(|v| v.to_string()));
            out += &row.join(",");
            out.push('\n');
        }
    }
    write_atomic(&ctx.dir.predictions(), out.as_bytes())?;
    if test.x_cols == 1 && t == 1 {
        let train = &ctx.data.train;
        let mut text = String::from("x0,y\n");
        for i in 0..train.rows {
            text += &format!("{},{}\n", original_x(ctx, i, train)[0], train.y[i] * s.y_sd[0] + s.y_mean[0]);
        }
        write_atomic(&ctx.dir.train_points(), text.as_bytes())?;
    }
    eprintln!("wrote {}", ctx.dir.predictions().display());
    Ok(())
}

/// Writes `summary.json` and `cumulative_lppd.csv`; returns the summary.
pub fn evaluate_stage(ctx: &RunContext, pass: &PassResult) -> Result<serde_json::Value> {
    let config = &ctx.config;
    let test = &ctx.data.test;
    let sampling: serde_json::Value = std::fs::read_to_string(ctx.dir.sampling())
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .ok_or_else(|| anyhow!("{} has no finished sampling (sampling.json missing); run or resume `bnn sample` first", ctx.dir.root().display()))?;
    let members = match config.sampler.init {
        Init::Ensemble => load_members(ctx)?.map(|(m, _)| m),
        _ => None,
    };
    let de = members.as_ref().map(|m| ensemble_metrics(ctx.posterior(), m, test));
    let gaussian = !pass.points.is_empty();
    let lm = gaussian.then(|| LinearBaseline::fit(&ctx.data.train).map(|f| f.evaluate(test))).flatten();
    let y_sd = ctx.data.standardizer.y_sd.first().copied().unwrap_or(1.0);
    let flagged: Vec<usize> = match &lm {
        Some(lm) => pass.per_chain.iter().enumerate().filter(|(_, m)| m.rmse > lm.rmse || m.lppd < lm.lppd).map(|(c, _)| c).collect(),
        None => Vec::new(),
    };
    let mut csv = String::from("chain,draw,lppd\n");
    for (c, history) in pass.cumulative_lppd.iter().enumerate() {
        for (s, v) in history.iter().enumerate() {
            csv += &format!("{c},{},{v}\n", s + 1);
        }
    }
    write_atomic(&ctx.dir.cumulative_lppd(), csv.as_bytes())?;
    let n_draws: usize = pass.draws_per_chain.iter().sum();
    let summary = json!({
        "dataset": ctx.data.name,
        "split_seed": config.data.split_seed,
        "n_train": ctx.data.train.rows,
        "n_valid": ctx.data.valid.as_ref().map(|v| v.rows),
        "n_test": test.rows,
        "n_params": ctx.layout.dim(),
        "sampler": config.sampler.algorithm,
        "init": config.sampler.init,
        "chains": config.chains(),
        "members": members.as_ref().map(|m| m.len()),
        "warmup": config.sampler.warmup,
        "draws": config.sampler.draws,
        "thin": config.sampler.thin,
        "draws_stored": n_draws,
        "draws_per_chain": pass.draws_per_chain,
        "seed": config.sampler.seed,
        "device": config.device_name()?.concrete().to_string(),
        "model": serde_json::to_value(&ctx.bnn)?,
        "rmse": pass.pooled.rmse,
        "rmse_original_units": pass.pooled.rmse * y_sd,
        "lppd": pass.pooled.lppd,
        "nll": pass.pooled.nll,
        "accuracy": pass.pooled.accuracy,
        "coverage_50": pass.coverage_at(0.5),
        "coverage_75": pass.coverage_at(0.75),
        "coverage_90": pass.coverage_at(0.9),
        "coverage_95": pass.coverage_at(0.95),
        "calibration_error": pass.calibration_error(),
        "calibration": LEVELS.iter().zip(&pass.coverage).map(|(l, o)| json!({"nominal": l, "observed": o})).collect::<Vec<_>>(),
        "predictive_samples_per_point": pass.predictive_samples_per_point,
        "chain_rmse": pass.per_chain.iter().map(|m| m.rmse).collect::<Vec<_>>(),
        "chain_lppd": pass.per_chain.iter().map(|m| m.lppd).collect::<Vec<_>>(),
        "chains_worse_than_linear": flagged,
        "chains_finished_early": sampling["finished_early"],
        "de_rmse": de.as_ref().map(|m| m.rmse),
        "de_lppd": de.as_ref().map(|m| m.lppd),
        "de_nll": de.as_ref().map(|m| m.nll),
        "lm_rmse": lm.as_ref().map(|m| m.rmse),
        "lm_lppd": lm.as_ref().map(|m| m.lppd),
        "divergences": pass.divergences,
        "mean_accept_stat": pass.mean_accept_stat,
        "mean_leapfrog_per_draw": pass.mean_leapfrog,
        "max_tree_depth_hits": pass.max_tree_depth_hits,
        "rhat_test_loglik": pass.rhat_test_loglik,
        "rhat_test_rmse": pass.rhat_test_rmse,
        "pointwise_predictive_rhat_max": pass.pointwise_rhat_max,
        "pointwise_predictive_rhat_mean": pass.pointwise_rhat_mean,
        "seconds_ensemble": sampling["seconds_ensemble"],
        "seconds_warmup": sampling["seconds_warmup"],
        "seconds_sampling": sampling["seconds_sampling"],
    });
    write_json(&ctx.dir.summary(), &summary)?;
    print_report(&summary, &flagged);
    Ok(summary)
}

fn print_report(s: &serde_json::Value, flagged: &[usize]) {
    let f = |key: &str| s[key].as_f64().map_or("n/a".to_string(), |v| format!("{v:.4}"));
    println!("{} ({} train / {} test, {} parameters, {} chains)", s["dataset"].as_str().unwrap_or("?"), s["n_train"], s["n_test"], s["n_params"], s["chains"]);
    println!("  posterior:      RMSE {}  LPPD {}  NLL {}", f("rmse"), f("lppd"), f("nll"));
    println!("  deep ensemble:  RMSE {}  LPPD {}", f("de_rmse"), f("de_lppd"));
    println!("  linear model:   RMSE {}  LPPD {}", f("lm_rmse"), f("lm_lppd"));
    println!(
        "  coverage 50/75/90/95%: {} / {} / {} / {}, calibration error {}",
        f("coverage_50"),
        f("coverage_75"),
        f("coverage_90"),
        f("coverage_95"),
        f("calibration_error")
    );
    println!(
        "  divergences {}, mean accept {}, function-space R-hat: test log-lik {}, test RMSE {}, pointwise max {}",
        s["divergences"],
        f("mean_accept_stat"),
        f("rhat_test_loglik"),
        f("rhat_test_rmse"),
        f("pointwise_predictive_rhat_max")
    );
    if !flagged.is_empty() {
        println!("  WARNING: chains {flagged:?} predict worse than the linear model (kept in the pool; inspect them)");
    }
}

/// The predictive pass over a finished run.
pub fn pass(ctx: &RunContext) -> Result<PassResult> {
    let s = &ctx.config.sampler;
    run_pass(&ctx.dir, ctx.posterior(), &ctx.data.test, ctx.config.chains(), s.draws.div_ceil(s.thin), s.max_depth, s.seed)
}

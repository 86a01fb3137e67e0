//! L-HNN surrogate NUTS on Bayesian neural network posteriors, from deep-ensemble starts:
//! DEI-NUTS against the same chains continued by exact surrogate NUTS with an L-HNN trained on
//! true-gradient trajectories around each chain's post-warmup point.
//!
//! Per member j: DEI-NUTS's warmup (Stan windows) from member j gives ε_j and a diagonal metric
//! M_j; both samplers then draw from the same post-warmup state with the same (ε_j, M_j). The
//! L-HNN works in whitened coordinates `q = s ⊙ z` (`s²` the metric's variances, M_j⁻¹), where
//! the leapfrog with identity mass is the leapfrog with M_j in q; its training trajectories run
//! there with step ε_j. Its cost is DEI-NUTS's warmup (shared), the training trajectories'
//! gradients, and one true value per leaf.

use std::path::Path;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{anyhow, bail, Context as _, Result};
use bnn_model::{
    predictive_metrics, Activation, AutodiffLogDensity, BnnConfig, HostData, Likelihood,
    MlpPosterior, PointPrediction, Prior, PriorSpec, UnknownName,
};
use bnn_sampler::{
    chain_rng, ChainStart, CollectedDraws, DiagonalMassMatrix, Kernel, KernelState, LogDensity,
    LogDensityError, NutsConfig, SamplerConfig, StepParams, SurrogateCounts, SurrogateGradient,
    SurrogateNutsConfig,
};
use bnn_surrogate::{LatentHnnConfig, LhnnSurrogate, LhnnTrainingConfig, TrajectoryDataConfig};
use burn::tensor::DType;

use super::Counted;
use crate::fixed_step_chains::Progress;
use crate::worker_pool::run_jobs;

/// The networks of the BNN part.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BnnProblem {
    /// y = cos(2x) + noise, 1-50-1 sigmoid, σ = 0.1 fixed (the per-gradient benchmark's net).
    Cos2x,
    /// UCI yacht (split 0, standardized), 2×16 ReLU, heteroscedastic head (Sommer et al.'s model).
    Yacht,
}

impl BnnProblem {
    pub fn name(self) -> &'static str {
        match self {
            BnnProblem::Cos2x => "cos2x",
            BnnProblem::Yacht => "yacht",
        }
    }

    /// The model and the prepared (standardized, split) data.
    fn prepare(self) -> Result<(BnnConfig, HostData, HostData)> {
        let data = bnn_pipeline::prepare(self.name(), &bnn_pipeline::Preparation::default())?;
        let inputs = data.train.x_cols;
        let model = match self {
            BnnProblem::Cos2x => BnnConfig::new(inputs)
                .with_hidden(vec![50])
                .with_activation(Activation::Sigmoid)
                .with_likelihood(Likelihood::GaussianFixed { sigma: 0.1 }),
            BnnProblem::Yacht => BnnConfig::new(inputs)
                .with_hidden(vec![16, 16])
                .with_activation(Activation::Relu)
                .with_likelihood(bnn_pipeline::parse_likelihood("hetero")?),
        }
        .with_prior(PriorSpec::uniform(Prior::Normal { scale: 1.0 }));
        Ok((model, data.train, data.test))
    }
}

impl FromStr for BnnProblem {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, UnknownName> {
        match s {
            "cos2x" => Ok(BnnProblem::Cos2x),
            "yacht" => Ok(BnnProblem::Yacht),
            _ => Err(UnknownName::new("BNN problem", s, ["cos2x", "yacht"])),
        }
    }
}

/// What the BNN part runs.
#[derive(Clone, Debug)]
pub struct LhnnBnnConfig {
    pub problems: Vec<BnnProblem>,
    /// Deep-ensemble members (one chain each), trained full-batch with Adam (lr 0.01).
    pub members: usize,
    pub ensemble_epochs: usize,
    /// DEI-NUTS warmup per chain, and draws per chain of both samplers.
    pub warmup: usize,
    pub draws: usize,
    pub max_tree_depth: u32,
    /// Training trajectories per chain and leapfrog steps in each (at the chain's ε).
    pub trajectories: usize,
    pub trajectory_steps: usize,
    pub hidden_width: usize,
    pub hidden_layers: usize,
    pub training_steps: usize,
    pub learning_rate: f64,
    pub seed: u64,
    pub workers: Option<usize>,
}

impl Default for LhnnBnnConfig {
    fn default() -> Self {
        Self {
            problems: vec![BnnProblem::Cos2x],
            members: 4,
            ensemble_epochs: 2000,
            warmup: 200,
            draws: 400,
            max_tree_depth: 10,
            trajectories: 20,
            trajectory_steps: 100,
            hidden_width: 100,
            hidden_layers: 3,
            training_steps: 2000,
            learning_rate: 1e-3,
            seed: 0,
            workers: None,
        }
    }
}

/// One sampler on one BNN problem, its chains pooled.
#[derive(Clone, Debug)]
pub struct BnnComparison {
    pub problem: BnnProblem,
    /// `dei-nuts` or `dei-lhnn`.
    pub sampler: &'static str,
    pub test_lppd: f64,
    pub test_rmse: f64,
    /// True gradients of the draws (the shared warmup's are in `warmup_gradients`).
    pub true_gradients: u64,
    pub warmup_gradients: u64,
    pub training_gradients: u64,
    pub true_values: u64,
    pub surrogate_forces: u64,
    pub leaves: u64,
    /// Bulk ESS (pooled chains) of the log posterior density and of the mean prediction over the
    /// test rows.
    pub ess_log_density: f64,
    pub ess_mean_prediction: f64,
    pub mean_accept: f64,
    pub divergences: usize,
    pub draws: usize,
    /// Sampling seconds summed over chains; the surrogate's data and training seconds.
    pub seconds: f64,
    pub training_seconds: f64,
    /// Measured µs per true gradient, per true value and per surrogate force at a draw.
    pub micros: [f64; 3],
}

impl BnnComparison {
    /// Every true gradient spent: warmup, training trajectories, draws.
    pub fn total_gradients(&self) -> u64 {
        self.warmup_gradients + self.training_gradients + self.true_gradients
    }
}

/// `p_z(z) = p(s ⊙ z)`: the posterior in coordinates where the chain's adapted diagonal metric is
/// the identity (the Jacobian is constant).
struct Whitened<'a, L> {
    inner: &'a L,
    scale: Vec<f64>,
}

impl<L: LogDensity> Whitened<'_, L> {
    fn to_q(&self, z: &[f64]) -> Vec<f64> {
        z.chunks_exact(self.scale.len())
            .flat_map(|z| z.iter().zip(&self.scale).map(|(z, s)| z * s))
            .collect()
    }
}

impl<L: LogDensity> LogDensity for Whitened<'_, L> {
    fn dim(&self) -> usize {
        self.scale.len()
    }
    fn log_density_and_gradient(
        &self,
        positions: &[f64],
        values: &mut [f64],
        gradients: &mut [f64],
    ) -> Result<(), LogDensityError> {
        self.inner
            .log_density_and_gradient(&self.to_q(positions), values, gradients)?;
        for g in gradients.chunks_exact_mut(self.scale.len()) {
            g.iter_mut().zip(&self.scale).for_each(|(g, s)| *g *= s);
        }
        Ok(())
    }
    fn log_density(&self, positions: &[f64], values: &mut [f64]) -> Result<(), LogDensityError> {
        self.inner.log_density(&self.to_q(positions), values)
    }
}

/// One chain of both samplers.
struct ChainPair {
    nuts_draws: Vec<f64>,
    lhnn_draws: Vec<f64>,
    nuts_log_density: Vec<f64>,
    lhnn_log_density: Vec<f64>,
    warmup_gradients: u64,
    nuts_gradients: u64,
    training_gradients: u64,
    lhnn_gradients: u64,
    lhnn_values: u64,
    surrogate_forces: u64,
    nuts_leaves: u64,
    lhnn_leaves: u64,
    nuts_accept: f64,
    lhnn_accept: f64,
    nuts_divergences: usize,
    lhnn_divergences: usize,
    nuts_seconds: f64,
    lhnn_seconds: f64,
    training_seconds: f64,
    micros: [f64; 3],
}

/// Runs DEI-NUTS and DEI-L-HNN on each problem; returns one row per problem and sampler.
pub fn run_lhnn_bnn(
    config: &LhnnBnnConfig,
    progress: &dyn Progress,
    stop: &AtomicBool,
) -> Result<Vec<BnnComparison>> {
    if config.members == 0
        || config.draws < 10
        || config.trajectories == 0
        || config.trajectory_steps == 0
        || config.training_steps == 0
    {
        bail!("the BNN part needs members, at least 10 draws, training trajectories and training steps");
    }
    let mut rows = Vec::new();
    for &problem in &config.problems {
        let (model, train, test) = problem
            .prepare()
            .with_context(|| format!("preparing {}", problem.name()))?;
        let device = bnn_model::DeviceName::Flex.device()?;
        progress.stage(&format!("{}: deep ensemble", problem.name()), 1);
        let members = bnn_model::EnsembleConfig::new()
            .with_members(config.members)
            .with_epochs(config.ensemble_epochs)
            .with_learning_rate(0.01)
            .with_seed(config.seed)
            .train(&model, &train, &device, config.workers.unwrap_or(2))?;
        progress.advance(1);
        progress.stage(
            &format!(
                "{}: chains (DEI-NUTS, L-HNN training, DEI-L-HNN)",
                problem.name()
            ),
            config.members as u64,
        );
        let chains: Vec<usize> = (0..config.members).collect();
        let pairs = run_jobs(&chains, config.workers, stop, |&j| {
            let start: Vec<f64> = members[j]
                .parameters
                .iter()
                .map(|&v| f64::from(v))
                .collect();
            let pair = run_pair(config, &model, &train, j, start, stop);
            progress.advance(1);
            pair
        })?;
        let posterior = MlpPosterior::new(model.clone(), &train, &device, DType::F32)?;
        rows.push(compare(
            problem, "dei-nuts", &pairs, &posterior, &test, true,
        ));
        rows.push(compare(
            problem, "dei-lhnn", &pairs, &posterior, &test, false,
        ));
    }
    Ok(rows)
}

fn run_pair(
    config: &LhnnBnnConfig,
    model: &BnnConfig,
    train: &HostData,
    member: usize,
    start: Vec<f64>,
    stop: &AtomicBool,
) -> Result<ChainPair> {
    let device = bnn_model::DeviceName::Flex.device()?;
    let density = AutodiffLogDensity::new(MlpPosterior::new(
        model.clone(),
        train,
        &device,
        DType::F32,
    )?);
    let counted = Counted::new(&density);
    let dim = counted.dim();
    let nuts = NutsConfig::new().with_max_tree_depth(config.max_tree_depth);
    let seed = config.seed.wrapping_add(member as u64 * 1_000_003);
    let warmup = SamplerConfig::new(nuts.clone().into())
        .with_num_warmup(config.warmup)
        .with_num_draws(0)
        .with_seed(seed)
        .with_threads(Some(1))
        .init()?;
    let mut chains = warmup.init_chains(&counted, &[ChainStart::at(start)])?;
    let mut sink = CollectedDraws::new(1, dim);
    warmup.run(&counted, &mut chains, &mut sink, stop)?;
    let warmup_gradients = counted.gradients.swap(0, Ordering::Relaxed);
    let after_warmup = chains[0].clone();

    // DEI-NUTS: the draws after the warmup.
    let sampling = SamplerConfig::new(nuts.into())
        .with_num_warmup(config.warmup)
        .with_num_draws(config.draws)
        .with_seed(seed)
        .with_threads(Some(1))
        .init()?;
    let mut sink = CollectedDraws::new(1, dim);
    let clock = Instant::now();
    sampling.run(&counted, &mut chains, &mut sink, stop)?;
    let nuts_seconds = clock.elapsed().as_secs_f64();
    if sink.num_draws(0) < config.draws {
        bail!("interrupted");
    }
    let nuts_gradients = counted.gradients.swap(0, Ordering::Relaxed);
    let nuts_stats = sink.stats(0).to_vec();

    // The L-HNN in whitened coordinates of the chain's adapted metric, trained on trajectories
    // from the post-warmup point at the chain's step size.
    let step_size = after_warmup.params.step_size;
    let scale: Vec<f64> = after_warmup
        .params
        .metric
        .inverse_diag()
        .iter()
        .map(|v| v.sqrt())
        .collect();
    let whitened = Whitened {
        inner: &counted,
        scale: scale.clone(),
    };
    let z0: Vec<f64> = after_warmup
        .kernel
        .position
        .iter()
        .zip(&scale)
        .map(|(q, s)| q / s)
        .collect();
    let clock = Instant::now();
    let data = TrajectoryDataConfig::new()
        .with_trajectories(config.trajectories)
        .with_end_time(step_size * config.trajectory_steps as f64)
        .with_step_size(step_size)
        .with_seed(seed)
        .generate(&whitened, &z0)
        .context("the L-HNN's training trajectories")?;
    let trained = LhnnTrainingConfig::new()
        .with_steps(config.training_steps)
        .with_learning_rate(config.learning_rate)
        .with_seed(seed)
        .train(
            &LatentHnnConfig::new(dim)
                .with_hidden_width(config.hidden_width)
                .with_hidden_layers(config.hidden_layers),
            &data,
            &device,
            |_, _| {},
        )
        .context("training the L-HNN")?;
    let training_seconds = clock.elapsed().as_secs_f64();
    let training_gradients = counted.gradients.swap(0, Ordering::Relaxed);
    let surrogate: Arc<LhnnSurrogate> = Arc::new(trained.surrogate);

    let mut kernel = SurrogateNutsConfig::new()
        .with_nuts(NutsConfig::new().with_max_tree_depth(config.max_tree_depth))
        .init(dim, Arc::clone(&surrogate))?;
    let identity = DiagonalMassMatrix::identity(dim);
    let params = StepParams {
        step_size,
        metric: &identity,
        trajectory_length: None,
    };
    let mut rng = chain_rng(seed.wrapping_add(17), member);
    let mut state =
        KernelState::init(&whitened, z0).map_err(|e| anyhow!("the post-warmup point: {e:?}"))?;
    let (mut lhnn_draws, mut lhnn_log_density) = (
        Vec::with_capacity(config.draws * dim),
        Vec::with_capacity(config.draws),
    );
    let (mut lhnn_leaves, mut lhnn_accept, mut lhnn_divergences, mut surrogate_forces) =
        (0, 0.0, 0, 0);
    let clock = Instant::now();
    for _ in 0..config.draws {
        if stop.load(Ordering::Relaxed) {
            bail!("interrupted");
        }
        let (next, stats) = kernel.step(&whitened, &mut rng, std::mem::take(&mut state), params)?;
        state = next;
        lhnn_draws.extend(state.position.iter().zip(&scale).map(|(z, s)| z * s));
        lhnn_log_density.push(state.log_density);
        lhnn_leaves += u64::from(stats.n_leapfrog);
        lhnn_accept += stats.accept_stat;
        lhnn_divergences += usize::from(stats.divergent);
        surrogate_forces += u64::from(SurrogateCounts::of(&stats).surrogate_gradients);
    }
    let lhnn_seconds = clock.elapsed().as_secs_f64();
    let lhnn_gradients = counted.gradients.swap(0, Ordering::Relaxed);
    let lhnn_values = counted.values.swap(0, Ordering::Relaxed);
    let micros = time_evaluations(&whitened, surrogate.as_ref(), &state.position);
    Ok(ChainPair {
        nuts_draws: sink.chain(0).positions.clone(),
        lhnn_draws,
        nuts_log_density: nuts_stats.iter().map(|s| s.log_density).collect(),
        lhnn_log_density,
        warmup_gradients,
        nuts_gradients,
        training_gradients,
        lhnn_gradients,
        lhnn_values,
        surrogate_forces,
        nuts_leaves: nuts_stats.iter().map(|s| u64::from(s.n_leapfrog)).sum(),
        lhnn_leaves,
        nuts_accept: nuts_stats.iter().map(|s| s.accept_stat).sum::<f64>() / config.draws as f64,
        lhnn_accept: lhnn_accept / config.draws as f64,
        nuts_divergences: nuts_stats.iter().filter(|s| s.divergent).count(),
        lhnn_divergences,
        nuts_seconds,
        lhnn_seconds,
        training_seconds,
        micros,
    })
}

/// µs per true gradient, per true value and per surrogate force at `z` (median of 5 × 40 calls).
fn time_evaluations<L: LogDensity>(density: &L, surrogate: &LhnnSurrogate, z: &[f64]) -> [f64; 3] {
    let mut gradient = vec![0.0; z.len()];
    let time = |f: &mut dyn FnMut()| {
        let mut runs: Vec<f64> = (0..5)
            .map(|_| {
                let clock = Instant::now();
                (0..40).for_each(|_| f());
                clock.elapsed().as_secs_f64() * 1e6 / 40.0
            })
            .collect();
        runs.sort_by(f64::total_cmp);
        runs[2]
    };
    let g = time(&mut || drop(density.evaluate(z, &mut gradient)));
    let v = time(&mut || drop(density.value(z)));
    let s = time(&mut || drop(surrogate.gradient(z, &mut gradient)));
    [g, v, s]
}

fn compare(
    problem: BnnProblem,
    sampler: &'static str,
    pairs: &[ChainPair],
    posterior: &MlpPosterior,
    test: &HostData,
    nuts: bool,
) -> BnnComparison {
    let draws: Vec<&Vec<f64>> = pairs
        .iter()
        .map(|p| if nuts { &p.nuts_draws } else { &p.lhnn_draws })
        .collect();
    let pooled: Vec<f64> = draws.iter().flat_map(|d| d.iter().copied()).collect();
    let predictions = posterior.predictions(&pooled, test);
    let metrics = predictive_metrics(&predictions, &test.y, test.y_cols);
    let per_chain = pooled.len() / pairs.len().max(1) / posterior.layout_dim().max(1);
    // Mean prediction over the test rows, per draw, per chain.
    let mean_prediction: Vec<Vec<f64>> = predictions
        .chunks(per_chain.max(1))
        .map(|chain| {
            chain
                .iter()
                .map(|draw| draw.iter().map(first_mean).sum::<f64>() / draw.len() as f64)
                .collect()
        })
        .collect();
    let log_density: Vec<Vec<f64>> = pairs
        .iter()
        .map(|p| {
            if nuts {
                p.nuts_log_density.clone()
            } else {
                p.lhnn_log_density.clone()
            }
        })
        .collect();
    let sum = |f: &dyn Fn(&ChainPair) -> u64| pairs.iter().map(f).sum::<u64>();
    let mean =
        |f: &dyn Fn(&ChainPair) -> f64| pairs.iter().map(f).sum::<f64>() / pairs.len() as f64;
    BnnComparison {
        problem,
        sampler,
        test_lppd: metrics.lppd,
        test_rmse: metrics.rmse,
        true_gradients: sum(&|p| {
            if nuts {
                p.nuts_gradients
            } else {
                p.lhnn_gradients
            }
        }),
        warmup_gradients: sum(&|p| p.warmup_gradients),
        training_gradients: if nuts {
            0
        } else {
            sum(&|p| p.training_gradients)
        },
        true_values: if nuts { 0 } else { sum(&|p| p.lhnn_values) },
        surrogate_forces: if nuts {
            0
        } else {
            sum(&|p| p.surrogate_forces)
        },
        leaves: sum(&|p| if nuts { p.nuts_leaves } else { p.lhnn_leaves }),
        ess_log_density: bnn_diagnostics::ess_bulk(&log_density),
        ess_mean_prediction: bnn_diagnostics::ess_bulk(&mean_prediction),
        mean_accept: mean(&|p| if nuts { p.nuts_accept } else { p.lhnn_accept }),
        divergences: pairs
            .iter()
            .map(|p| {
                if nuts {
                    p.nuts_divergences
                } else {
                    p.lhnn_divergences
                }
            })
            .sum(),
        draws: pooled.len() / posterior.layout_dim().max(1),
        seconds: mean(&|p| if nuts { p.nuts_seconds } else { p.lhnn_seconds }) * pairs.len() as f64,
        training_seconds: if nuts {
            0.0
        } else {
            pairs.iter().map(|p| p.training_seconds).sum()
        },
        micros: [0, 1, 2].map(|k| mean(&|p| p.micros[k])),
    }
}

/// The predictive mean of the first target (a class probability for the categorical head).
fn first_mean(prediction: &PointPrediction) -> f64 {
    match prediction {
        PointPrediction::Gaussian { mean, .. } => mean[0],
        PointPrediction::Categorical { probabilities } => probabilities[0],
    }
}

/// The BNN rows as `bnn.csv`.
pub(super) fn write_bnn_csv(out: &Path, rows: &[BnnComparison]) -> Result<std::path::PathBuf> {
    let path = out.join("bnn.csv");
    let mut w = csv::Writer::from_path(&path)?;
    w.write_record([
        "problem",
        "sampler",
        "test_lppd",
        "test_rmse",
        "warmup_gradients",
        "training_gradients",
        "true_gradients",
        "true_values",
        "surrogate_forces",
        "leaves",
        "ess_log_density",
        "ess_mean_prediction",
        "mean_accept",
        "divergences",
        "draws",
        "sampling_seconds",
        "training_seconds",
        "us_per_true_gradient",
        "us_per_true_value",
        "us_per_surrogate_force",
    ])?;
    for r in rows {
        w.write_record([
            r.problem.name().to_string(),
            r.sampler.to_string(),
            format!("{:.4}", r.test_lppd),
            format!("{:.4}", r.test_rmse),
            r.warmup_gradients.to_string(),
            r.training_gradients.to_string(),
            r.true_gradients.to_string(),
            r.true_values.to_string(),
            r.surrogate_forces.to_string(),
            r.leaves.to_string(),
            format!("{:.1}", r.ess_log_density),
            format!("{:.1}", r.ess_mean_prediction),
            format!("{:.3}", r.mean_accept),
            r.divergences.to_string(),
            r.draws.to_string(),
            format!("{:.2}", r.seconds),
            format!("{:.2}", r.training_seconds),
            format!("{:.2}", r.micros[0]),
            format!("{:.2}", r.micros[1]),
            format!("{:.2}", r.micros[2]),
        ])?;
    }
    w.flush()?;
    Ok(path)
}

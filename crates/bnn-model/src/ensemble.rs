//! Deep ensembles: M independently initialized networks trained with Burn's Adam, the warm
//! starts of DEI-MCMC (Sommer et al. 2024: start NUTS chain j at member j), full batch or with
//! the MILE minibatch recipe and early stopping.

use crate::early_stopping::{EarlyStopping, Verdict};
use crate::flatten::{flatten, layout_of, unflatten};
use crate::layout::{ParameterKind, ParameterLayout};
use crate::model::{BnnConfig, BnnModel};
use crate::observations::{DeviceData, HostData};
use crate::posterior::PosteriorError;
use burn::config::Config;
use burn::module::Module;
use burn::optim::decay::WeightDecayConfig;
use burn::optim::{AdamConfig, AdamWConfig, GradientsParams, ModuleOptimizer};
use burn::tensor::{DType, Device, Int, Tensor, TensorData};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::atomic::{AtomicBool, Ordering};

/// How the ensemble members are trained.
///
/// The defaults are the DEI-MCMC reference (full-batch Adam with coupled L2 decay);
/// [`EnsembleConfig::mile`] is the MILE recipe (minibatch AdamW with early stopping).
#[derive(Config, Debug)]
pub struct EnsembleConfig {
    /// Number of members M.
    #[config(default = 12)]
    pub members: usize,
    /// Epochs per member: full-batch Adam steps (the DEI-MCMC reference: 5000), or passes over
    /// the shuffled data with a batch size; with early stopping, the most epochs.
    #[config(default = 5000)]
    pub epochs: usize,
    /// Adam's learning rate (1e-2: reaches the DEI-MCMC paper's deep-ensemble numbers in 5000
    /// full-batch steps where 1e-3 under-trains; see `crates/bnn-study/results/table3/README.md`).
    #[config(default = 1e-2)]
    pub learning_rate: f64,
    /// Weight decay (the DEI-MCMC reference: 1e-2).
    #[config(default = 1e-2)]
    pub weight_decay: f64,
    /// `true`: AdamW's decoupled decay; `false`: L2 added to the gradient (coupled, Adam).
    #[config(default = false)]
    pub decoupled_weight_decay: bool,
    /// How the members' weights are drawn before training.
    #[config(default = "WeightInit::FanInUniform")]
    pub weight_init: WeightInit,
    /// Member j is initialized, and in minibatch mode shuffled, from stream j of this seed.
    #[config(default = 0)]
    pub seed: u64,
    /// Rows per optimizer step; `None` trains full batch (one step per epoch). Each epoch is
    /// ceil(N / batch) steps over a fresh shuffle of the rows.
    pub batch_size: Option<usize>,
    /// Early stopping: stop after this many epochs without improvement of the validation mean
    /// NLL and return the parameters of the best validation epoch. Needs a validation set.
    pub patience: Option<usize>,
}

/// One trained member.
#[derive(Debug, Clone)]
pub struct TrainedMember {
    /// Member j: its initialization, and in minibatch mode its shuffles, come from the
    /// ChaCha8 stream (seed, j) — the same whatever the thread count.
    pub index: usize,
    pub seed: u64,
    /// Flat parameters in the model's layout (the best validation epoch's with early stopping).
    pub parameters: Vec<f32>,
    /// Mean training NLL at the initial parameters.
    pub initial_loss: f64,
    /// Mean training NLL over the last epoch run, each batch taken just before its step (full
    /// batch: the loss the last step started from).
    pub final_loss: f64,
    /// Epochs actually run (fewer than `epochs` when early stopping ended training).
    pub epochs_run: usize,
    /// Mean validation NLL at the returned parameters; `None` without a validation set.
    pub best_valid_loss: Option<f64>,
}

/// The ChaCha8 stream `stream` of `seed`, which gives a member's initial weights and, after
/// them, its minibatch shuffles.
fn member_rng(seed: u64, stream: u64) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(stream);
    rng
}

/// How a member's weights are drawn before training.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WeightInit {
    /// PyTorch's `nn.Linear` default: weights and biases U(±1/√fan_in). Each ReLU layer then
    /// keeps about 1/6 of its input's variance, which two hidden layers survive.
    #[default]
    FanInUniform,
    /// Glorot & Bengio's uniform weights U(±√(6/(fan_in + fan_out))) and zero biases: the
    /// DEI-MCMC reference code's members (its ensembles notebook, `init_weights`). A ReLU layer
    /// of equal widths keeps half its input's variance, so nine layers of eight units still
    /// pass a signal (2⁻⁹ against 6⁻⁹ with fan-in uniform weights, under which every member of
    /// Table 8's network stays at the mean).
    GlorotUniform,
}

impl WeightInit {
    pub const NAMES: [&'static str; 2] = ["fan_in_uniform", "glorot_uniform"];

    pub fn name(self) -> &'static str {
        match self {
            WeightInit::FanInUniform => Self::NAMES[0],
            WeightInit::GlorotUniform => Self::NAMES[1],
        }
    }

    pub fn named(name: &str) -> Option<Self> {
        match name {
            "fan_in_uniform" => Some(WeightInit::FanInUniform),
            "glorot_uniform" => Some(WeightInit::GlorotUniform),
            _ => None,
        }
    }
}

/// PyTorch-style initialization U(±1/sqrt(fan_in)) from stream `stream` of `seed`; also the
/// cold start of the samplers.
pub fn initial_parameters(layout: &ParameterLayout, seed: u64, stream: u64) -> Vec<f64> {
    draw_initial_parameters(
        layout,
        WeightInit::FanInUniform,
        &mut member_rng(seed, stream),
    )
}

fn draw_initial_parameters(
    layout: &ParameterLayout,
    init: WeightInit,
    rng: &mut ChaCha8Rng,
) -> Vec<f64> {
    let mut theta = Vec::with_capacity(layout.dim());
    for entry in &layout.entries {
        let fan_in = entry.fan_in.max(1) as f64;
        let glorot = init == WeightInit::GlorotUniform;
        match entry.kind {
            ParameterKind::Bias if glorot => theta.extend(std::iter::repeat_n(0.0, entry.len())),
            ParameterKind::Weight if glorot => {
                // A `[d_in, d_out]` weight: its second dimension feeds the next layer.
                let fan_out = entry.shape.get(1).copied().unwrap_or(1) as f64;
                let bound = (6.0 / (fan_in + fan_out)).sqrt();
                theta.extend((0..entry.len()).map(|_| rng.random_range(-bound..bound)));
            }
            _ => {
                let bound = 1.0 / fan_in.sqrt();
                theta.extend((0..entry.len()).map(|_| rng.random_range(-bound..bound)));
            }
        }
    }
    theta
}

/// The mean negative log likelihood of `rows` rows: the model's own likelihood (for the
/// heteroscedastic head σ is a standard deviation here exactly as in sampling; for the
/// learned-σ head the log-σ prior term is included, as in the full-batch loss).
fn mean_nll(
    config: &BnnConfig,
    network: &BnnModel,
    x: Tensor<2>,
    targets: &Tensor<2>,
    rows: usize,
) -> Tensor<1> {
    let outputs = network.forward(x).unsqueeze::<3>();
    let log_sigma = network.log_sigma.as_ref().map(|p| p.val().unsqueeze::<2>());
    config
        .likelihood
        .log_likelihood(outputs, targets, log_sigma)
        .neg()
        .div_scalar(rows as f64)
}

fn scalar(t: Tensor<1>) -> f64 {
    t.into_data().iter::<f64>().next().unwrap_or(f64::NAN)
}

/// Ensemble training settings [`EnsembleConfig::validate`] refuses.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EnsembleConfigError {
    #[error("an ensemble needs at least one member and one epoch")]
    NoMembersOrEpochs,
    #[error("learning rate must be positive, got {0}")]
    LearningRate(f64),
    #[error("weight decay must be non-negative, got {0}")]
    WeightDecay(f64),
    #[error("batch size must be at least 1 (or unset for full-batch training)")]
    BatchSize,
    #[error("early-stopping patience must be at least 1 epoch (or unset to train every epoch)")]
    Patience,
}

impl EnsembleConfig {
    /// The MILE recipe (Sommer et al. 2025, "MILE: Microcanonical Langevin Ensembles"): AdamW
    /// with decoupled weight decay 1e-3, learning rate 1e-3, batch size 32, at most 500 epochs
    /// with patience 10 on a validation split, 12 members.
    pub fn mile() -> Self {
        Self::new()
            .with_members(12)
            .with_epochs(500)
            .with_learning_rate(1e-3)
            .with_weight_decay(1e-3)
            .with_decoupled_weight_decay(true)
            .with_batch_size(Some(32))
            .with_patience(Some(10))
    }

    pub fn validate(&self) -> Result<(), EnsembleConfigError> {
        if self.members == 0 || self.epochs == 0 {
            return Err(EnsembleConfigError::NoMembersOrEpochs);
        }
        if !(self.learning_rate > 0.0 && self.learning_rate.is_finite()) {
            return Err(EnsembleConfigError::LearningRate(self.learning_rate));
        }
        if !(self.weight_decay >= 0.0 && self.weight_decay.is_finite()) {
            return Err(EnsembleConfigError::WeightDecay(self.weight_decay));
        }
        if self.batch_size == Some(0) {
            return Err(EnsembleConfigError::BatchSize);
        }
        if self.patience == Some(0) {
            return Err(EnsembleConfigError::Patience);
        }
        Ok(())
    }

    fn optimizer(&self) -> ModuleOptimizer {
        if self.decoupled_weight_decay {
            AdamWConfig::new()
                .with_weight_decay(self.weight_decay as f32)
                .init()
        } else {
            let decay =
                (self.weight_decay > 0.0).then(|| WeightDecayConfig::new(self.weight_decay as f32));
            AdamConfig::new().with_weight_decay(decay).init()
        }
    }

    /// Trains member `index` without a validation set. The loss is the model's own mean
    /// negative log likelihood (for the heteroscedastic head σ is a standard deviation here
    /// exactly as in sampling).
    pub fn train_member(
        &self,
        model: &BnnConfig,
        train: &HostData,
        device: &Device,
        index: usize,
    ) -> Result<TrainedMember, PosteriorError> {
        self.check(model, train, None)?;
        let never = AtomicBool::new(false);
        self.fit_member(model, train, None, device, index, &never)
            .map(|m| m.expect("training without a stop flag finishes"))
    }

    /// Trains all members, `threads` at a time; the result does not depend on `threads`.
    pub fn train(
        &self,
        model: &BnnConfig,
        train: &HostData,
        device: &Device,
        threads: usize,
    ) -> Result<Vec<TrainedMember>, PosteriorError> {
        self.train_with_validation(model, train, None, device, threads)
    }

    /// Trains all members, `threads` at a time, watching the mean NLL of `valid` after every
    /// epoch; with `patience` set, each member stops early and returns its best validation
    /// epoch. The result does not depend on `threads`.
    pub fn train_with_validation(
        &self,
        model: &BnnConfig,
        train: &HostData,
        valid: Option<&HostData>,
        device: &Device,
        threads: usize,
    ) -> Result<Vec<TrainedMember>, PosteriorError> {
        let all: Vec<usize> = (0..self.members).collect();
        self.train_members(model, train, valid, device, threads, &all)
    }

    /// Trains only the members numbered `indices` (each from its own stream, so member j is the
    /// same network whichever others are trained beside it: one shard of a cluster run trains
    /// the members its chains start from). Returned sorted by member number.
    pub fn train_members(
        &self,
        model: &BnnConfig,
        train: &HostData,
        valid: Option<&HostData>,
        device: &Device,
        threads: usize,
        indices: &[usize],
    ) -> Result<Vec<TrainedMember>, PosteriorError> {
        let never = AtomicBool::new(false);
        self.train_members_until(
            model,
            train,
            valid,
            device,
            threads,
            indices,
            &never,
            &|_| (),
        )
    }

    /// [`EnsembleConfig::train_members`] that hands each member to `finished` as soon as it is
    /// trained (to save it: a later kill loses only the members in progress) and stops between
    /// optimizer steps once `stop` is set. Returns the members finished by then, sorted; the
    /// caller tells a stopped run from a complete one by `stop` (and the count).
    #[allow(clippy::too_many_arguments)]
    pub fn train_members_until(
        &self,
        model: &BnnConfig,
        train: &HostData,
        valid: Option<&HostData>,
        device: &Device,
        threads: usize,
        indices: &[usize],
        stop: &AtomicBool,
        finished: &(dyn Fn(&TrainedMember) + Sync),
    ) -> Result<Vec<TrainedMember>, PosteriorError> {
        self.check(model, train, valid)?;
        if let Some(&bad) = indices.iter().find(|&&j| j >= self.members) {
            return Err(PosteriorError::Config(format!(
                "member {bad} does not exist in an ensemble of {}",
                self.members
            )));
        }
        let next = std::sync::atomic::AtomicUsize::new(0);
        let results = std::sync::Mutex::new(Vec::with_capacity(indices.len()));
        std::thread::scope(|scope| {
            for _ in 0..threads.clamp(1, indices.len().max(1)) {
                scope.spawn(|| loop {
                    let slot = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(&index) = indices.get(slot) else {
                        break;
                    };
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let member = self.fit_member(model, train, valid, device, index, stop);
                    if let Ok(Some(member)) = &member {
                        finished(member);
                    }
                    results
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push(member);
                });
            }
        });
        let results: Vec<Option<TrainedMember>> = results
            .into_inner()
            .unwrap_or_else(|p| p.into_inner())
            .into_iter()
            .collect::<Result<_, _>>()?;
        let mut members: Vec<TrainedMember> = results.into_iter().flatten().collect();
        members.sort_by_key(|m| m.index);
        Ok(members)
    }

    /// Everything that can be refused before any training starts.
    fn check(
        &self,
        model: &BnnConfig,
        train: &HostData,
        valid: Option<&HostData>,
    ) -> Result<(), PosteriorError> {
        self.validate()?;
        model.validate()?;
        if let (Some(patience), None) = (self.patience, valid) {
            return Err(PosteriorError::Config(format!(
                "early stopping (patience {patience}) needs a validation set; pass one or unset the patience"
            )));
        }
        train.validate(model.d_input, model.n_targets, &model.likelihood)?;
        if let Some(valid) = valid {
            valid.validate(model.d_input, model.n_targets, &model.likelihood)?;
        }
        Ok(())
    }

    /// One member: init from stream (seed, index), then epochs of full-batch or minibatch
    /// steps, with the validation NLL after each epoch when there is a validation set and
    /// early stopping. `None` when `stop` was set before it finished.
    fn fit_member(
        &self,
        model: &BnnConfig,
        train: &HostData,
        valid: Option<&HostData>,
        device: &Device,
        index: usize,
        stop: &AtomicBool,
    ) -> Result<Option<TrainedMember>, PosteriorError> {
        let plain_device = device.clone().without_autodiff();
        let device = device.clone().autodiff();
        let template = model.init(&device);
        let mut rng = member_rng(self.seed, index as u64);
        let init = draw_initial_parameters(&layout_of(&template), self.weight_init, &mut rng);
        let init: Vec<f32> = init.iter().map(|&v| v as f32).collect();
        let mut network: BnnModel = unflatten(template, &init).expect("layout of the same model");
        let data = DeviceData::upload(train, &model.likelihood, &device, DType::F32);
        let valid_data =
            valid.map(|v| DeviceData::upload(v, &model.likelihood, &plain_device, DType::F32));
        let valid_nll = |m: &BnnModel| {
            valid_data
                .as_ref()
                .map(|v| scalar(mean_nll(model, &m.valid(), v.x.clone(), &v.targets, v.rows)))
        };
        let mut optimizer = self.optimizer();
        let mut stopping = self.patience.map(EarlyStopping::new);
        // With early stopping: the best epoch's network (no autodiff).
        let mut best: Option<BnnModel> = None;
        let mut initial_loss = f64::NAN;
        // Each step's loss (detached) and rows in the current epoch.
        let mut epoch_losses: Vec<(Tensor<1>, usize)> = Vec::new();
        let mut epochs_run = 0;
        for epoch in 0..self.epochs {
            if stop.load(Ordering::Relaxed) {
                return Ok(None);
            }
            epoch_losses.clear();
            match self.batch_size {
                None => {
                    let loss = mean_nll(model, &network, data.x.clone(), &data.targets, data.rows);
                    if epoch == 0 {
                        initial_loss = scalar(loss.clone());
                    }
                    epoch_losses.push((loss.clone().detach(), data.rows));
                    let grads = GradientsParams::from_grads(loss.backward(), &network);
                    network = optimizer.step(self.learning_rate, network, grads);
                }
                Some(batch_size) => {
                    if epoch == 0 {
                        initial_loss = scalar(
                            mean_nll(model, &network, data.x.clone(), &data.targets, data.rows)
                                .detach(),
                        );
                    }
                    let mut order: Vec<i32> = (0..data.rows as i32).collect();
                    order.shuffle(&mut rng);
                    let order =
                        Tensor::<1, Int>::from_ints(TensorData::new(order, [data.rows]), &device);
                    for start in (0..data.rows).step_by(batch_size) {
                        if stop.load(Ordering::Relaxed) {
                            return Ok(None);
                        }
                        let end = (start + batch_size).min(data.rows);
                        let rows = order.clone().slice(start..end);
                        let x = data.x.clone().select(0, rows.clone());
                        let targets = data.targets.clone().select(0, rows);
                        let loss = mean_nll(model, &network, x, &targets, end - start);
                        epoch_losses.push((loss.clone().detach(), end - start));
                        let grads = GradientsParams::from_grads(loss.backward(), &network);
                        network = optimizer.step(self.learning_rate, network, grads);
                    }
                }
            }
            epochs_run = epoch + 1;
            if let Some(stopping) = stopping.as_mut() {
                let loss = valid_nll(&network).expect("early stopping has a validation set");
                match stopping.observe(loss) {
                    Verdict::Improved => best = Some(network.valid()),
                    Verdict::Continue => {}
                    Verdict::Stop => break,
                }
            }
        }
        let final_loss = epoch_mean(epoch_losses, data.rows);
        let (parameters, best_valid_loss) = match (best, stopping) {
            (Some(best), Some(stopping)) => (flatten(&best), Some(stopping.best())),
            _ => (flatten(&network), valid_nll(&network)),
        };
        if parameters.iter().any(|v| !v.is_finite()) {
            return Err(PosteriorError::Config(format!("member {index} diverged during training (non-finite weights); lower the learning rate")));
        }
        Ok(Some(TrainedMember {
            index,
            seed: self.seed,
            parameters,
            initial_loss,
            final_loss,
            epochs_run,
            best_valid_loss,
        }))
    }
}

/// Row-weighted mean of an epoch's batch losses, read back in one transfer.
fn epoch_mean(losses: Vec<(Tensor<1>, usize)>, rows: usize) -> f64 {
    let (tensors, counts): (Vec<_>, Vec<_>) = losses.into_iter().unzip();
    if tensors.is_empty() {
        return f64::NAN;
    }
    let values = Tensor::cat(tensors, 0).into_data();
    values
        .iter::<f64>()
        .zip(counts)
        .map(|(l, c)| l * c as f64)
        .sum::<f64>()
        / rows as f64
}

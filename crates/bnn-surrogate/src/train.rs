//! Fitting an L-HNN to trajectory data with Burn's Adam: the network's input gradient is made
//! to satisfy Hamilton's equations, `∂H/∂p = dq/dt` and `∂H/∂q = −dp/dt`.

use crate::latent_hnn::{LatentHnn, LatentHnnConfig, LatentHnnConfigError};
use crate::surrogate::LhnnSurrogate;
use crate::training_data::TrajectoryData;
use burn::config::Config;
use burn::module::Module;
use burn::optim::decay::WeightDecayConfig;
use burn::optim::{AdamConfig, GradientsParams, ModuleOptimizer};
use burn::tensor::{DType, Device, Tensor, TensorData};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// How the L-HNN is trained (minibatch Adam with coupled L2 weight decay, as in Dhulipala et al.
/// 2023).
#[derive(Config, Debug)]
pub struct LhnnTrainingConfig {
    /// Adam's learning rate.
    #[config(default = 5e-4)]
    pub learning_rate: f64,
    /// L2 weight decay added to the gradient (coupled, Adam's); 0 turns it off.
    #[config(default = 1e-4)]
    pub weight_decay: f64,
    /// Phase points per gradient step; each pass over the data is a fresh shuffle.
    #[config(default = 1000)]
    pub batch_size: usize,
    /// Number of gradient steps.
    #[config(default = 5000)]
    pub steps: usize,
    /// Steps between loss records (and progress calls).
    #[config(default = 100)]
    pub log_every: usize,
    /// The network is initialized from this seed, the shuffles from its second stream.
    #[config(default = 0)]
    pub seed: u64,
}

/// Mean training loss of the steps since the previous record.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LossRecord {
    /// Gradient steps taken when it was recorded.
    pub step: usize,
    /// Mean of the batch losses of those steps.
    pub loss: f64,
}

/// A trained network and how training went.
#[derive(Debug)]
pub struct TrainedLhnn {
    /// The Burn module (no autodiff), e.g. to save with Burn's recorders.
    pub network: LatentHnn,
    /// Its weights in f64, for sampling.
    pub surrogate: LhnnSurrogate,
    /// One record every `log_every` steps and one after the last step.
    pub history: Vec<LossRecord>,
    /// Mean loss over the whole data set before the first step.
    pub initial_loss: f64,
    /// Mean loss over the whole data set after the last step.
    pub final_loss: f64,
}

/// Training settings [`LhnnTrainingConfig::validate`] refuses.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LhnnTrainingConfigError {
    #[error(
        "steps, batch size and log interval must be at least 1, got {steps}, {batch_size} and {log_every}"
    )]
    ZeroCount {
        steps: usize,
        batch_size: usize,
        log_every: usize,
    },
    #[error("learning rate must be positive, got {0}")]
    LearningRate(f64),
    #[error("weight decay must be non-negative, got {0}")]
    WeightDecay(f64),
}

/// Why training could not run or finish.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TrainingError {
    #[error("invalid L-HNN training settings: {0}")]
    Config(#[from] LhnnTrainingConfigError),
    #[error("invalid L-HNN training settings: {0}")]
    Network(#[from] LatentHnnConfigError),
    #[error("the network has position dimension {network}, the data {data}")]
    Dimension { network: usize, data: usize },
    #[error("the training data hold no phase points (or their arrays disagree in length)")]
    EmptyData,
    #[error("training diverged (loss {loss} at step {step}); lower the learning rate")]
    Diverged { step: usize, loss: f64 },
}

/// Rows read per tensor when the loss over the whole data set is evaluated.
const EVALUATION_CHUNK: usize = 4096;

impl LhnnTrainingConfig {
    pub fn validate(&self) -> Result<(), LhnnTrainingConfigError> {
        if self.steps == 0 || self.batch_size == 0 || self.log_every == 0 {
            return Err(LhnnTrainingConfigError::ZeroCount {
                steps: self.steps,
                batch_size: self.batch_size,
                log_every: self.log_every,
            });
        }
        if !(self.learning_rate > 0.0 && self.learning_rate.is_finite()) {
            return Err(LhnnTrainingConfigError::LearningRate(self.learning_rate));
        }
        if !(self.weight_decay >= 0.0 && self.weight_decay.is_finite()) {
            return Err(LhnnTrainingConfigError::WeightDecay(self.weight_decay));
        }
        Ok(())
    }

    fn optimizer(&self) -> ModuleOptimizer {
        let decay =
            (self.weight_decay > 0.0).then(|| WeightDecayConfig::new(self.weight_decay as f32));
        AdamConfig::new().with_weight_decay(decay).init()
    }

    /// Initializes a network of shape `network` and trains it on `data` in f32 on `device`
    /// (autodiff is enabled on it here), calling `progress(step, loss)` at every loss record.
    pub fn train(
        &self,
        network: &LatentHnnConfig,
        data: &TrajectoryData,
        device: &Device,
        mut progress: impl FnMut(usize, f64),
    ) -> Result<TrainedLhnn, TrainingError> {
        self.validate()?;
        network.validate()?;
        if network.dim != data.dim {
            return Err(TrainingError::Dimension {
                network: network.dim,
                data: data.dim,
            });
        }
        let targets = HamiltonTargets::new(data)?;
        let plain_device = device.clone().without_autodiff();
        let device = device.clone().autodiff();
        let mut model = network.init(&device, DType::F32, self.seed);
        let mut optimizer = self.optimizer();
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        rng.set_stream(1);

        let initial_loss = targets.mean_loss(&model.valid(), &plain_device);
        let mut history = Vec::with_capacity(self.steps / self.log_every + 1);
        let mut pending: Vec<Tensor<1>> = Vec::with_capacity(self.log_every);
        let mut order: Vec<usize> = (0..targets.rows).collect();
        let mut cursor = targets.rows;
        for step in 1..=self.steps {
            if cursor >= targets.rows {
                order.shuffle(&mut rng);
                cursor = 0;
            }
            let end = (cursor + self.batch_size).min(targets.rows);
            let (x, target) = targets.batch(&order[cursor..end], &device);
            cursor = end;
            let loss = hamilton_loss(&model, x, target);
            pending.push(loss.clone().detach());
            let grads = GradientsParams::from_grads(loss.backward(), &model);
            model = optimizer.step(self.learning_rate, model, grads);
            if step % self.log_every == 0 || step == self.steps {
                let loss = mean_of(std::mem::take(&mut pending));
                if !loss.is_finite() {
                    return Err(TrainingError::Diverged { step, loss });
                }
                history.push(LossRecord { step, loss });
                progress(step, loss);
            }
        }
        let network = model.valid();
        let final_loss = targets.mean_loss(&network, &plain_device);
        if !final_loss.is_finite() {
            return Err(TrainingError::Diverged {
                step: self.steps,
                loss: final_loss,
            });
        }
        let surrogate = LhnnSurrogate::from_module(&network);
        Ok(TrainedLhnn {
            network,
            surrogate,
            history,
            initial_loss,
            final_loss,
        })
    }
}

/// Mean over rows of `‖∂H/∂x − target‖²` with `target = (−dp/dt, dq/dt)`, which is
/// `‖∂H/∂p − dq/dt‖² + ‖∂H/∂q + dp/dt‖²`.
fn hamilton_loss(network: &LatentHnn, x: Tensor<2>, target: Tensor<2>) -> Tensor<1> {
    let rows = x.dims()[0];
    (network.input_gradient(x) - target)
        .square()
        .sum()
        .div_scalar(rows as f64)
}

/// Mean of scalar losses, read back in one transfer.
fn mean_of(losses: Vec<Tensor<1>>) -> f64 {
    if losses.is_empty() {
        return f64::NAN;
    }
    scalar(Tensor::cat(losses, 0).mean())
}

fn scalar(t: Tensor<1>) -> f64 {
    t.into_data().iter::<f64>().next().unwrap_or(f64::NAN)
}

/// The data as the loss reads them, in f32: inputs `(q, p)` and targets `(−dp/dt, dq/dt)`
/// for `∂H/∂(q, p)`.
struct HamiltonTargets {
    inputs: Vec<f32>,
    targets: Vec<f32>,
    rows: usize,
    width: usize,
}

impl HamiltonTargets {
    fn new(data: &TrajectoryData) -> Result<Self, TrainingError> {
        let width = 2 * data.dim;
        let rows = data.len();
        if rows == 0
            || data.points.len() != rows * width
            || data.derivatives.len() != data.points.len()
        {
            return Err(TrainingError::EmptyData);
        }
        let inputs = data.points.iter().map(|&v| v as f32).collect();
        let mut targets = Vec::with_capacity(data.derivatives.len());
        for row in data.derivatives.chunks_exact(width) {
            let (dq_dt, dp_dt) = row.split_at(data.dim);
            targets.extend(dp_dt.iter().map(|&v| -v as f32));
            targets.extend(dq_dt.iter().map(|&v| v as f32));
        }
        Ok(Self {
            inputs,
            targets,
            rows,
            width,
        })
    }

    /// Inputs and targets of the rows `rows`, gathered on the host and uploaded.
    fn batch(&self, rows: &[usize], device: &Device) -> (Tensor<2>, Tensor<2>) {
        let gather = |values: &[f32]| -> Tensor<2> {
            let picked: Vec<f32> = rows
                .iter()
                .flat_map(|&r| &values[r * self.width..(r + 1) * self.width])
                .copied()
                .collect();
            Tensor::from_data(
                TensorData::new(picked, [rows.len(), self.width]),
                (device, DType::F32),
            )
        };
        (gather(&self.inputs), gather(&self.targets))
    }

    /// Loss over all rows (row-weighted mean of chunk losses) of a network without autodiff.
    fn mean_loss(&self, network: &LatentHnn, device: &Device) -> f64 {
        let order: Vec<usize> = (0..self.rows).collect();
        let mut total = 0.0;
        for rows in order.chunks(EVALUATION_CHUNK) {
            let (x, target) = self.batch(rows, device);
            total += scalar(hamilton_loss(network, x, target)) * rows.len() as f64;
        }
        total / self.rows as f64
    }
}

//! Deep ensembles: M independently initialized networks trained with Burn's Adam, the warm
//! starts of DEI-MCMC (Sommer et al. 2024: start NUTS chain j at member j).

use crate::flatten::{flatten, layout_of, unflatten};
use crate::layout::ParameterLayout;
use crate::model::{BnnConfig, BnnModel};
use crate::observations::{DeviceData, HostData};
use crate::posterior::PosteriorError;
use burn::config::Config;
use burn::optim::decay::WeightDecayConfig;
use burn::optim::{AdamConfig, AdamWConfig, GradientsParams, ModuleOptimizer};
use burn::tensor::{DType, Device};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// How the ensemble members are trained (full batch).
#[derive(Config, Debug)]
pub struct EnsembleConfig {
    /// Number of members M.
    #[config(default = 12)]
    pub members: usize,
    /// Full-batch Adam steps per member (the DEI-MCMC reference: 5000).
    #[config(default = 5000)]
    pub epochs: usize,
    #[config(default = 1e-3)]
    pub learning_rate: f64,
    /// Weight decay (the DEI-MCMC reference: 1e-2).
    #[config(default = 1e-2)]
    pub weight_decay: f64,
    /// `true`: AdamW's decoupled decay; `false`: L2 added to the gradient (coupled, Adam).
    #[config(default = false)]
    pub decoupled_weight_decay: bool,
    /// Member j is initialized from stream j of this seed.
    #[config(default = 0)]
    pub seed: u64,
}

/// One trained member.
#[derive(Debug, Clone)]
pub struct TrainedMember {
    pub index: usize,
    pub seed: u64,
    /// Flat parameters in the model's layout.
    pub parameters: Vec<f32>,
    pub initial_loss: f64,
    pub final_loss: f64,
}

/// PyTorch-style initialization U(±1/sqrt(fan_in)) from stream `stream` of `seed`; also the
/// cold start of the samplers.
pub fn initial_parameters(layout: &ParameterLayout, seed: u64, stream: u64) -> Vec<f64> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(stream);
    let mut theta = Vec::with_capacity(layout.dim());
    for entry in &layout.entries {
        let bound = 1.0 / (entry.fan_in.max(1) as f64).sqrt();
        theta.extend((0..entry.len()).map(|_| rng.random_range(-bound..bound)));
    }
    theta
}

impl EnsembleConfig {
    pub fn validate(&self) -> Result<(), String> {
        if self.members == 0 || self.epochs == 0 {
            return Err("an ensemble needs at least one member and one epoch".into());
        }
        if !(self.learning_rate > 0.0 && self.learning_rate.is_finite()) {
            return Err(format!("learning rate must be positive, got {}", self.learning_rate));
        }
        if !(self.weight_decay >= 0.0 && self.weight_decay.is_finite()) {
            return Err(format!("weight decay must be non-negative, got {}", self.weight_decay));
        }
        Ok(())
    }

    fn optimizer(&self) -> ModuleOptimizer {
        if self.decoupled_weight_decay {
            AdamWConfig::new().with_weight_decay(self.weight_decay as f32).init()
        } else {
            let decay = (self.weight_decay > 0.0).then(|| WeightDecayConfig::new(self.weight_decay as f32));
            AdamConfig::new().with_weight_decay(decay).init()
        }
    }

    /// Trains member `index`. The loss is the model's own mean negative log likelihood (for the
    /// heteroscedastic head σ is a standard deviation here exactly as in sampling).
    pub fn train_member(&self, model: &BnnConfig, train: &HostData, device: &Device, index: usize) -> Result<TrainedMember, PosteriorError> {
        self.validate().map_err(PosteriorError::Config)?;
        model.validate().map_err(PosteriorError::Config)?;
        train.validate(model.d_input, model.n_targets, &model.likelihood)?;
        let device = device.clone().autodiff();
        let template = model.init(&device);
        let init = initial_parameters(&layout_of(&template), self.seed, index as u64);
        let init: Vec<f32> = init.iter().map(|&v| v as f32).collect();
        let mut network: BnnModel = unflatten(template, &init).expect("layout of the same model");
        let data = DeviceData::upload(train, &model.likelihood, &device, DType::F32);
        let mut optimizer = self.optimizer();
        let n = train.rows as f64;
        let loss_of = |m: &BnnModel| {
            let outputs = m.forward(data.x.clone()).unsqueeze::<3>();
            let log_sigma = m.log_sigma.as_ref().map(|p| p.val());
            model.likelihood.log_likelihood(outputs, &data.targets, log_sigma).neg().div_scalar(n)
        };
        let mut initial_loss = f64::NAN;
        let mut final_loss = f64::NAN;
        for epoch in 0..self.epochs {
            let loss = loss_of(&network);
            let value: f64 = loss.clone().into_data().iter::<f64>().next().unwrap_or(f64::NAN);
            if epoch == 0 {
                initial_loss = value;
            }
            final_loss = value;
            let grads = GradientsParams::from_grads(loss.backward(), &network);
            network = optimizer.step(self.learning_rate, network, grads);
        }
        let parameters = flatten(&network);
        if parameters.iter().any(|v| !v.is_finite()) {
            return Err(PosteriorError::Config(format!("member {index} diverged during training (non-finite weights); lower the learning rate")));
        }
        Ok(TrainedMember { index, seed: self.seed, parameters, initial_loss, final_loss })
    }

    /// Trains all members, `threads` at a time; the result does not depend on `threads`.
    pub fn train(&self, model: &BnnConfig, train: &HostData, device: &Device, threads: usize) -> Result<Vec<TrainedMember>, PosteriorError> {
        self.validate().map_err(PosteriorError::Config)?;
        let next = std::sync::atomic::AtomicUsize::new(0);
        let results = std::sync::Mutex::new(Vec::with_capacity(self.members));
        std::thread::scope(|scope| {
            for _ in 0..threads.clamp(1, self.members) {
                scope.spawn(|| loop {
                    let index = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if index >= self.members {
                        break;
                    }
                    let member = self.train_member(model, train, device, index);
                    results.lock().unwrap_or_else(|p| p.into_inner()).push(member);
                });
            }
        });
        let mut members = results.into_inner().unwrap_or_else(|p| p.into_inner()).into_iter().collect::<Result<Vec<_>, _>>()?;
        members.sort_by_key(|m| m.index);
        Ok(members)
    }
}

//! HNN gradients for the pseudo-marginal GLMM (the HNN report's §2.2, done by its structure).
//!
//! The report fed all of `[θ, u]` (64,013 inputs at its size) to one network and could not train
//! it. The log-estimator is a sum over subjects, `log p̂ = Σ_i log p̂_i(θ, u_i)`, and subject i's
//! term reads θ, its own `u_i` and its own data only. So one small network `s_φ(θ, u_i, Z_i, Y_i)`,
//! shared by all subjects, stands in for every term: its input gradient with respect to `(θ, u_i)`
//! is trained to match `∇_{θ, u_i} log p̂_i`, and the surrogate force is the prior's and `−u`'s
//! exact gradients plus `Σ_i ∇ s_φ`. The network is an L-HNN-style sine MLP with one output
//! ([`bnn_surrogate::LatentHnn`], whose input gradient is written in closed form so that the
//! gradient-matching loss trains with first-order autodiff).
//!
//! The sampler stays exact: [`HnnDensity`] returns the true `log π` with the surrogate gradient,
//! so NUTS weights every leaf by the true Hamiltonian while the pseudo-marginal integrator's kicks
//! follow the surrogate. Each kick is a shear and each flow an exact rotation or drift, so the
//! step is volume preserving and reversible for any force that depends on the position alone; a
//! poor surrogate costs acceptance, never correctness.

use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{bail, Result};
use bnn_sampler::{LogDensity, LogDensityError};
use bnn_surrogate::{LatentHnn, LatentHnnConfig, LhnnSurrogate};
use burn::module::Module;
use burn::optim::{AdamConfig, GradientsParams, ModuleOptimizer};
use burn::tensor::{DType, Device, Tensor, TensorData};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::glmm::Glmm;

/// Shape and training of the per-subject network.
#[derive(Clone, Debug)]
pub struct SubjectHnnConfig {
    pub hidden_width: usize,
    pub hidden_layers: usize,
    /// Adam steps on minibatches of (state, subject) rows.
    pub steps: usize,
    pub batch_size: usize,
    pub learning_rate: f64,
    pub seed: u64,
}

impl Default for SubjectHnnConfig {
    fn default() -> Self {
        Self {
            hidden_width: 64,
            hidden_layers: 2,
            steps: 3000,
            batch_size: 512,
            learning_rate: 2e-3,
            seed: 0,
        }
    }
}

/// The trained per-subject network, on the host in f64, and how well it fits.
#[derive(Clone, Debug)]
pub struct SubjectHnn {
    surrogate: LhnnSurrogate,
    theta_dim: usize,
    samples: usize,
    /// The network's input width (`θ`, `u_i`, `Z_i`, `Y_i`, padded to an even count).
    input_width: usize,
    /// `‖∇s_φ − ∇ log p̂_i‖² / ‖∇ log p̂_i‖²` over the held-out states' rows, before and after.
    pub initial_relative_error: f64,
    pub relative_error: f64,
    /// The same on the training rows, after training.
    pub training_relative_error: f64,
    pub training_rows: usize,
    pub seconds: f64,
}

/// Rows of the training set: inputs `[θ, u_i, Z_i, Y_i, 0…]` and targets `∇_{θ, u_i} log p̂_i`.
struct Rows {
    inputs: Vec<f32>,
    targets: Vec<f32>,
    width: usize,
    outputs: usize,
}

impl Rows {
    fn new(glmm: &Glmm, states: &[Vec<f64>], width: usize) -> Self {
        let (k, n) = (glmm.theta_dim(), glmm.samples);
        let outputs = k + n;
        let mut rows = Rows {
            inputs: Vec::new(),
            targets: Vec::new(),
            width,
            outputs,
        };
        let (mut g_theta, mut g_u) = (vec![0.0; k], vec![0.0; n]);
        for x in states {
            for i in 0..glmm.subjects {
                g_theta.iter_mut().for_each(|v| *v = 0.0);
                glmm.subject_log_estimate(x, i, &mut g_theta, &mut g_u);
                let start = rows.inputs.len();
                rows.inputs
                    .extend(subject_input(glmm, x, i).map(|v| v as f32));
                rows.inputs.resize(start + width, 0.0);
                rows.targets
                    .extend(g_theta.iter().chain(&g_u).map(|&v| v as f32));
            }
        }
        rows
    }

    fn len(&self) -> usize {
        self.inputs.len() / self.width
    }

    fn batch(&self, rows: &[usize], device: &Device) -> (Tensor<2>, Tensor<2>) {
        let gather = |values: &[f32], width: usize| -> Tensor<2> {
            let picked: Vec<f32> = rows
                .iter()
                .flat_map(|&r| &values[r * width..(r + 1) * width])
                .copied()
                .collect();
            Tensor::from_data(
                TensorData::new(picked, [rows.len(), width]),
                (device, DType::F32),
            )
        };
        (
            gather(&self.inputs, self.width),
            gather(&self.targets, self.outputs),
        )
    }

    /// `Σ ‖∇s − target‖²` and `Σ ‖target‖²` over all rows (no autodiff).
    fn squared_errors(&self, network: &LatentHnn, device: &Device) -> (f64, f64) {
        let all: Vec<usize> = (0..self.len()).collect();
        let (mut error, mut norm) = (0.0, 0.0);
        for chunk in all.chunks(4096) {
            let (x, target) = self.batch(chunk, device);
            error += scalar(
                residual(network, x, target.clone(), self.outputs)
                    .square()
                    .sum(),
            );
            norm += scalar(target.square().sum());
        }
        (error, norm)
    }
}

/// The subject's inputs: θ, `u_i`, then its data.
fn subject_input<'a>(glmm: &'a Glmm, x: &'a [f64], i: usize) -> impl Iterator<Item = f64> + 'a {
    let (k, n) = (glmm.theta_dim(), glmm.samples);
    x[..k]
        .iter()
        .chain(&x[k + i * n..k + (i + 1) * n])
        .copied()
        .chain(glmm.subject_data(i))
}

/// `∇_{θ, u_i} s_φ − target`, `[rows, outputs]`.
fn residual(network: &LatentHnn, x: Tensor<2>, target: Tensor<2>, outputs: usize) -> Tensor<2> {
    network.input_gradient(x).narrow(1, 0, outputs) - target
}

fn scalar<const D: usize>(t: Tensor<D>) -> f64 {
    t.into_data().iter::<f64>().next().unwrap_or(f64::NAN)
}

impl SubjectHnn {
    /// Trains on every subject's term at each of `states` (points `[θ, u]` of a true-gradient
    /// chain); the last fifth of the states is held out for the reported error.
    pub fn train(glmm: &Glmm, states: &[Vec<f64>], config: &SubjectHnnConfig) -> Result<Self> {
        if states.len() < 5
            || config.steps == 0
            || config.batch_size == 0
            || config.hidden_width == 0
            || config.hidden_layers == 0
        {
            bail!("the subject HNN needs at least 5 states, a step, a batch and a hidden layer");
        }
        let started = std::time::Instant::now();
        let (k, n) = (glmm.theta_dim(), glmm.samples);
        let data_width = glmm.observations * (glmm.covariates + 1);
        let width = (k + n + data_width).next_multiple_of(2);
        let held_out = states.len() / 5;
        let train = Rows::new(glmm, &states[..states.len() - held_out], width);
        let valid = Rows::new(glmm, &states[states.len() - held_out..], width);
        let network_config = LatentHnnConfig::new(width / 2)
            .with_hidden_width(config.hidden_width)
            .with_hidden_layers(config.hidden_layers)
            .with_latent_outputs(Some(1));
        let plain = Device::flex();
        let device = plain.clone().autodiff();
        let mut model = network_config.init(&device, DType::F32, config.seed);
        let (error, norm) = valid.squared_errors(&model.valid(), &plain);
        let initial_relative_error = error / norm;
        let mut optimizer: ModuleOptimizer = AdamConfig::new().init();
        let mut rng = ChaCha8Rng::seed_from_u64(config.seed);
        let mut order: Vec<usize> = (0..train.len()).collect();
        let mut cursor = order.len();
        for _ in 0..config.steps {
            if cursor >= order.len() {
                order.shuffle(&mut rng);
                cursor = 0;
            }
            let end = (cursor + config.batch_size).min(order.len());
            let (x, target) = train.batch(&order[cursor..end], &device);
            let rows = end - cursor;
            cursor = end;
            let loss = residual(&model, x, target, train.outputs)
                .square()
                .sum()
                .div_scalar(rows as f64);
            let grads = GradientsParams::from_grads(loss.backward(), &model);
            model = optimizer.step(config.learning_rate, model, grads);
        }
        let network = model.valid();
        let (error, norm) = valid.squared_errors(&network, &plain);
        let relative_error = error / norm;
        let (train_error, train_norm) = train.squared_errors(&network, &plain);
        if !relative_error.is_finite() {
            bail!("the subject HNN's training diverged (held-out relative error {relative_error})");
        }
        Ok(Self {
            surrogate: LhnnSurrogate::from_module(&network),
            theta_dim: k,
            samples: n,
            input_width: width,
            initial_relative_error,
            relative_error,
            training_relative_error: train_error / train_norm,
            training_rows: train.len(),
            seconds: started.elapsed().as_secs_f64(),
        })
    }

    /// The surrogate `∇ log π` at `x = [θ, u]`: the prior's and `−u`'s exact gradients plus the
    /// network's per-subject terms.
    pub fn gradient(&self, glmm: &Glmm, x: &[f64], g: &mut [f64]) {
        let (k, n) = (self.theta_dim, self.samples);
        glmm.log_prior_gradient(&x[..k], &mut g[..k]);
        for (gu, u) in g[k..].iter_mut().zip(&x[k..]) {
            *gu = -u;
        }
        let mut input = Vec::with_capacity(self.input_width);
        let mut term = vec![0.0; k + n];
        for i in 0..glmm.subjects {
            input.clear();
            input.extend(subject_input(glmm, x, i));
            self.surrogate.input_gradient_prefix(&input, &mut term);
            for (gk, t) in g[..k].iter_mut().zip(&term[..k]) {
                *gk += t;
            }
            for (gu, t) in g[k + i * n..k + (i + 1) * n].iter_mut().zip(&term[k..]) {
                *gu += t;
            }
        }
    }
}

/// The GLMM's true `log π` with the subject HNN's gradient: NUTS over this density weights by
/// the true Hamiltonian and moves by the surrogate (see the module doc). Counts its calls.
pub struct HnnDensity<'a> {
    pub glmm: &'a Glmm,
    pub hnn: &'a SubjectHnn,
    pub true_values: AtomicU64,
}

impl<'a> HnnDensity<'a> {
    pub fn new(glmm: &'a Glmm, hnn: &'a SubjectHnn) -> Self {
        Self {
            glmm,
            hnn,
            true_values: AtomicU64::new(0),
        }
    }
}

impl LogDensity for HnnDensity<'_> {
    fn dim(&self) -> usize {
        self.glmm.dim()
    }

    fn log_density_and_gradient(
        &self,
        positions: &[f64],
        values: &mut [f64],
        gradients: &mut [f64],
    ) -> Result<(), LogDensityError> {
        bnn_sampler::for_each_row(self.dim(), positions, values, gradients, |x, g| {
            self.true_values.fetch_add(1, Ordering::Relaxed);
            self.hnn.gradient(self.glmm, x, g);
            Ok(self.glmm.log_density_value(x))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pseudo_marginal::glmm::{GlmmEstimator, GlmmTruth};
    use rand_distr::{Distribution, StandardNormal};

    fn states(glmm: &Glmm, count: usize, seed: u64) -> Vec<Vec<f64>> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let truth = GlmmTruth::default().theta();
        (0..count)
            .map(|_| {
                let mut x: Vec<f64> = truth
                    .iter()
                    .map(|t| {
                        let e: f64 = StandardNormal.sample(&mut rng);
                        t + 0.2 * e
                    })
                    .collect();
                x.extend(
                    (0..glmm.dim() - truth.len())
                        .map(|_| -> f64 { StandardNormal.sample(&mut rng) }),
                );
                x
            })
            .collect()
    }

    #[test]
    fn subject_terms_sum_to_the_log_density() {
        // The decomposition the network learns: prior + Σ_i term_i − ½uᵀu, gradients included.
        let glmm = Glmm::simulate(&GlmmTruth::default(), 7, 4, 5, GlmmEstimator::PerSubject, 3);
        let x = &states(&glmm, 1, 1)[0];
        let (k, n) = (glmm.theta_dim(), glmm.samples);
        let mut g = vec![0.0; glmm.dim()];
        let mut value = [0.0];
        glmm.log_density_and_gradient(x, &mut value, &mut g)
            .unwrap();
        let mut sum_g = vec![0.0; glmm.dim()];
        glmm.log_prior_gradient(&x[..k], &mut sum_g[..k]);
        let mut sum = -0.5 * x[..k].iter().map(|t| t * t).sum::<f64>() / 100.0
            - 0.5 * x[k..].iter().map(|u| u * u).sum::<f64>();
        for i in 0..glmm.subjects {
            let (g_theta, g_u) = sum_g.split_at_mut(k);
            sum += glmm.subject_log_estimate(x, i, g_theta, &mut g_u[i * n..(i + 1) * n]);
        }
        for (gu, u) in sum_g[k..].iter_mut().zip(&x[k..]) {
            *gu -= u;
        }
        assert!(
            (sum - value[0]).abs() < 1e-9 * value[0].abs().max(1.0),
            "{sum} vs {}",
            value[0]
        );
        for (a, b) in sum_g.iter().zip(&g) {
            assert!((a - b).abs() < 1e-9 * b.abs().max(1.0), "{a} vs {b}");
        }
    }

    #[test]
    fn the_network_fits_its_rows_and_the_density_pairs_the_true_value_with_its_gradient() {
        let glmm = Glmm::simulate(
            &GlmmTruth::default(),
            12,
            4,
            6,
            GlmmEstimator::PerSubject,
            5,
        );
        let config = SubjectHnnConfig {
            hidden_width: 32,
            steps: 400,
            batch_size: 128,
            ..SubjectHnnConfig::default()
        };
        let hnn = SubjectHnn::train(&glmm, &states(&glmm, 40, 2), &config).unwrap();
        // At this toy size the fit does not generalize (the held-out error is reported, not
        // asserted); it must fit its training rows.
        assert!(
            hnn.training_relative_error < 0.7 * hnn.initial_relative_error,
            "relative error {} before, {} on the training rows after",
            hnn.initial_relative_error,
            hnn.training_relative_error
        );
        // The density returns the true value with the surrogate's gradient.
        let x = &states(&glmm, 1, 9)[0];
        let density = HnnDensity::new(&glmm, &hnn);
        let (mut value, mut g) = ([0.0], vec![0.0; glmm.dim()]);
        density
            .log_density_and_gradient(x, &mut value, &mut g)
            .unwrap();
        assert_eq!(value[0], glmm.log_density_value(x));
        let mut direct = vec![0.0; glmm.dim()];
        hnn.gradient(&glmm, x, &mut direct);
        assert_eq!(g, direct);
        assert_eq!(density.true_values.load(Ordering::Relaxed), 1);
    }
}

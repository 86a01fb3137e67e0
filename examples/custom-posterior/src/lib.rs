//! Example: a user's own Burn module plus a likelihood as a posterior, sampled with NUTS.
//!
//! The module is a small "linear + tanh residual" regressor, not our built-in MLP: any
//! `#[derive(Module)]` works, because `ModulePosterior` loads each chain's flat parameter vector
//! into a copy of the module and differentiates the user's own forward pass with Burn's autodiff.

use anyhow::Result;
use bnn_model::{flatten, AutodiffLogDensity, ModulePosterior, Prior, PriorSpec};
use bnn_sampler::{ChainStart, NutsConfig, SamplerConfig};
use burn::module::Module;
use burn::nn::{Linear, LinearConfig};
use burn::tensor::{activation, Device, Tensor, TensorData};

/// y = a·x + b + Σ_k v_k tanh(w_k x + c_k): a linear trend plus a tanh correction.
#[derive(Module, Debug)]
pub struct ResidualRegressor {
    pub linear: Linear,
    pub hidden: Linear,
    pub output: Linear,
}

impl ResidualRegressor {
    pub fn new(width: usize, device: &Device) -> Self {
        Self {
            linear: LinearConfig::new(1, 1).init(device),
            hidden: LinearConfig::new(1, width).init(device),
            output: LinearConfig::new(width, 1).with_bias(false).init(device),
        }
    }

    pub fn forward(&self, x: Tensor<2>) -> Tensor<2> {
        self.linear.forward(x.clone())
            + self
                .output
                .forward(activation::tanh(self.hidden.forward(x)))
    }

    /// The same function on the host, from flat parameters in Burn's visit order:
    /// linear.weight, linear.bias, hidden.weight `[1, w]`, hidden.bias `[w]`, output.weight `[w, 1]`.
    pub fn value_at(theta: &[f64], width: usize, x: f64) -> f64 {
        let (a, b) = (theta[0], theta[1]);
        let w = &theta[2..2 + width];
        let c = &theta[2 + width..2 + 2 * width];
        let v = &theta[2 + 2 * width..2 + 3 * width];
        a * x
            + b
            + (0..width)
                .map(|k| v[k] * (w[k] * x + c[k]).tanh())
                .sum::<f64>()
    }
}

/// What a run produces: the posterior predictive mean and sd at a grid, with split R-hat.
pub struct ExampleResult {
    pub grid: Vec<f64>,
    pub mean: Vec<f64>,
    pub sd: Vec<f64>,
    pub rhat: Vec<f64>,
    pub divergences: usize,
    pub dim: usize,
}

/// Samples the posterior of `ResidualRegressor` on the cos(2x) data (noise σ = 0.1, known).
pub fn run(
    width: usize,
    chains: usize,
    warmup: usize,
    draws: usize,
    seed: u64,
) -> Result<ExampleResult> {
    let device = Device::flex();
    let data = bnn_data::cos2x(100, 0.1, seed)?;
    let n = data.n_rows();
    let to_tensor = |v: &[f64]| {
        Tensor::<2>::from_data(
            TensorData::new(v.to_vec(), [n, 1]).convert::<f32>(),
            &device.clone().autodiff(),
        )
    };
    let (x, y) = (to_tensor(&data.x.data), to_tensor(&data.y.data));
    let sigma = 0.1;
    // The user's likelihood: Gaussian with known σ, written with Burn tensor ops.
    let log_likelihood = move |m: &ResidualRegressor| -> Tensor<1> {
        let r = (m.forward(x.clone()) - y.clone()).div_scalar(sigma);
        r.powi_scalar(2).sum().mul_scalar(-0.5)
    };
    let template = ResidualRegressor::new(width, &device);
    let posterior = ModulePosterior::new(
        template,
        log_likelihood,
        &PriorSpec::uniform(Prior::Normal { scale: 2.0 }),
        &device,
    )?;
    let density = AutodiffLogDensity::new(posterior);
    let dim = flatten(&ResidualRegressor::new(width, &device)).len();

    // Start each chain from a different random initialization of the module.
    let starts: Vec<ChainStart> = (0..chains)
        .map(|c| {
            device.seed(seed + 1 + c as u64);
            let init = flatten(&ResidualRegressor::new(width, &device));
            ChainStart::at(init.into_iter().map(f64::from).collect())
        })
        .collect();
    // Depth 8 (255 leapfrog steps) is plenty for this 26-parameter posterior and keeps the
    // example quick; BNN posteriors otherwise tend to saturate the default depth of 10.
    let sampler = SamplerConfig::new(NutsConfig::new().with_max_tree_depth(8).into())
        .with_num_warmup(warmup)
        .with_num_draws(draws)
        .with_seed(seed)
        .init()?;
    let collected = sampler.sample(&density, &starts)?;

    // Posterior predictive mean of f(x) at a grid, evaluated for every draw on the host.
    let grid: Vec<f64> = (0..9).map(|i| 0.25 + 0.4375 * i as f64).collect();
    let predict = |theta: &[f64], x: f64| ResidualRegressor::value_at(theta, width, x);
    let mut mean = Vec::new();
    let mut sd = Vec::new();
    let mut rhat = Vec::new();
    for &g in &grid {
        let per_chain = collected.map(|theta| predict(theta, g));
        let all: Vec<f64> = per_chain.iter().flatten().copied().collect();
        let m = all.iter().sum::<f64>() / all.len() as f64;
        let v = all.iter().map(|p| (p - m).powi(2)).sum::<f64>() / (all.len() - 1) as f64;
        mean.push(m);
        sd.push(v.sqrt());
        rhat.push(bnn_diagnostics::rhat(&per_chain));
    }
    let divergences = (0..chains)
        .map(|c| collected.stats(c).iter().filter(|s| s.divergent).count())
        .sum();
    Ok(ExampleResult {
        grid,
        mean,
        sd,
        rhat,
        divergences,
        dim,
    })
}

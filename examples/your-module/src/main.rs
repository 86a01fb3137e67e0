//! Your own Burn module, start to finish: a MAP ensemble of it, NUTS (or any sampler, from a
//! config file) from every member into a run directory, then predictions through the module's
//! own `forward` and their metrics on held-out rows.
//!
//! `your-module [run dir] [module_run.json]`: the config file is a `ModuleRunConfig` as
//! `Config::save` writes it (`mclmc.json` beside this file runs MCLMC). The run directory is
//! checkpointed: run the same command again after a crash or `kill -9` and it continues. Then
//! `bnn diagnose <run dir>`, `bnn plot <run dir>` or `arviz.from_cmdstan` read it.

use burn_bnn::burn::{
    self,
    config::Config,
    module::Module,
    nn,
    tensor::{Device, Tensor},
};
use burn_bnn::{data::cos2x, prelude::*};

/// Two hidden layers with a custom activation, snake(h) = h + sin²(h) (Ziyin et al. 2020).
#[derive(Module, Debug)]
pub struct Net {
    l1: nn::Linear,
    l2: nn::Linear,
    out: nn::Linear,
}

impl Net {
    pub fn new(device: &Device) -> Self {
        let dense = |i, o| nn::LinearConfig::new(i, o).init(device);
        Self {
            l1: dense(1, 16),
            l2: dense(16, 16),
            out: dense(16, 1),
        }
    }

    pub fn forward(&self, x: Tensor<2>) -> Tensor<2> {
        let snake = |h: Tensor<2>| h.clone() + h.sin().powi_scalar(2);
        self.out
            .forward(snake(self.l2.forward(snake(self.l1.forward(x)))))
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out = std::env::args().nth(1).unwrap_or("runs/your-module".into());
    let config = match std::env::args().nth(2) {
        Some(file) => ModuleRunConfig::load(file)?,
        None => ModuleRunConfig::new(), // 4 members, NUTS 100 warmup + 1000 draws
    };
    let device = Device::flex();
    let (x, y) = dataset_tensors(&cos2x(100, 0.1, 1)?, &device);
    let (x_test, y_test) = dataset_tensors(&cos2x(100, 0.1, 2)?, &device);
    let head = Likelihood::GaussianFixed { sigma: 0.1 };
    let likelihood = HeadLikelihood::new(head, x, y, |net: &Net, x| net.forward(x))?;
    let prior = PriorSpec::uniform(Prior::Normal { scale: 1.0 });
    let posterior = ModulePosterior::new(Net::new(&device), likelihood, &prior, &device)?;
    let run = ModuleRun::of_posterior(config, posterior, &out)?.with_progress(PrintStages);
    // Trains the members (or reads them), samples (or continues a killed run), diagnoses.
    run.run(module_starts(run.config().members, 11, &device, Net::new))?;
    let draws = run.draws()?.concat();
    let outputs = predict_with_draws(&Net::new(&device), &draws, |n| n.forward(x_test.clone()))?;
    let metrics = run.evaluate(head, outputs, &host_rows(&y_test), 1)?;
    let (lppd, rmse, n) = (metrics.lppd, metrics.rmse, metrics.n_draws);
    println!("test LPPD {lppd:.3}, RMSE {rmse:.3} over {n} draws; run directory {out}");
    Ok(())
}

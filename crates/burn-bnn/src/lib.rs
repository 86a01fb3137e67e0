//! # burn-bnn: Bayesian neural networks on Burn, by sampling
//!
//! One dependency for a Burn user: your `#[derive(Module)]` network's posterior sampled with
//! NUTS, MCLMC, HMC, MAMS or MSD; DEI-MCMC (a deep ensemble, then one chain per member;
//! Sommer et al. 2024) into a run directory with checkpoints, resume, diagnostics and
//! predictive metrics; the built-in MLP pipeline behind `bnn run`; MILE.
//!
//! Everything lives in the workspace's crates, re-exported here as modules ([`model`],
//! [`sampler`], [`pipeline`], [`data`], [`diagnostics`], [`plot`]), with the items of the
//! four uses below in the [`prelude`]. [`burn`] is re-exported too, so a project that depends on
//! `burn-bnn` alone derives `Module` with `use burn_bnn::burn;` and gets the same Burn version.
//!
//! ## 1. Sample your own module
//!
//! A module plus a likelihood is a posterior. The likelihood is one of the built-in heads
//! applied to your module's output ([`model::HeadLikelihood`]), or any closure
//! `Fn(&M) -> Tensor<1>` written with Burn tensor operations. [`model::ModulePosterior`] loads
//! each chain's flat parameter vector into a copy of the module, so the forward pass is your
//! code and gradients come from Burn's autodiff. Predictions load draws back into the module
//! and call *your* `forward` ([`model::predict_with_draws`]).
//!
//! ```
//! use burn_bnn::burn::{self, module::Module, nn::{Linear, LinearConfig}, tensor::{Device, Tensor}};
//! use burn_bnn::prelude::*;
//!
//! #[derive(Module, Debug)]
//! struct Net { hidden: Linear, out: Linear }
//! impl Net {
//!     fn new(device: &Device) -> Self {
//!         Self { hidden: LinearConfig::new(1, 8).init(device), out: LinearConfig::new(8, 1).init(device) }
//!     }
//!     fn forward(&self, x: Tensor<2>) -> Tensor<2> {
//!         self.out.forward(burn::tensor::activation::tanh(self.hidden.forward(x)))
//!     }
//! }
//!
//! # fn main() -> anyhow::Result<()> {
//! let device = Device::flex();
//! let x = Tensor::<2>::from_floats([[-1.0], [-0.5], [0.0], [0.5], [1.0]], &device);
//! let y = Tensor::<2>::from_floats([[-0.8], [-0.5], [0.1], [0.4], [0.9]], &device);
//! let head = Likelihood::GaussianFixed { sigma: 0.1 };
//! let likelihood = HeadLikelihood::new(head, x.clone(), y, |net: &Net, x| net.forward(x))?;
//! let prior = PriorSpec::uniform(Prior::Normal { scale: 1.0 });
//! let posterior = ModulePosterior::new(Net::new(&device), likelihood, &prior, &device)?;
//! let density = AutodiffLogDensity::new(posterior);
//!
//! let sampler = SamplerConfig::new(NutsConfig::new().with_max_tree_depth(5).into())
//!     .with_num_warmup(30)
//!     .with_num_draws(20)
//!     .init()?;
//! let starts: Vec<ChainStart> =
//!     module_starts(2, 7, &device, Net::new).into_iter().map(ChainStart::at).collect();
//! let draws = sampler.sample(&density, &starts)?;
//!
//! // The posterior predictive through Net::forward: [draws, rows, outputs].
//! let thetas = draws.positions();
//! let outputs = predict_with_draws(&Net::new(&device), &thetas, |net| net.forward(x.clone()))?;
//! assert_eq!(outputs.dims(), [40, 5, 1]);
//! # Ok(()) }
//! ```
//!
//! A plain log density needs no module: [`sampler::FnLogDensity`] takes
//! `|q: &[f64], grad: &mut [f64]| -> Result<f64, LogDensityError>`, like BlackJAX's
//! `logdensity_fn` or nuts-rs's `logp`. Return [`sampler::LogDensityError`]s that say whether
//! the point is merely outside where the density can be evaluated (the sampler treats it as a
//! divergence) or the evaluation is broken (the run stops with the error).
//!
//! ## 2. DEI-MCMC on your module, into a run directory
//!
//! [`pipeline::ModuleRun`] trains a MAP ensemble of the module from different initializations,
//! starts one chain per member and streams the draws to a run directory — CmdStan-style
//! `draws_chain_<c>.csv`, checkpoints every `checkpoint_every` iterations — the directory `bnn
//! diagnose`, `bnn plot` and `arviz.from_cmdstan` read. Run the same program again after a crash
//! or `kill -9` and it continues from the checkpoints to the same bytes.
//!
//! ```
//! # use burn_bnn::burn::{self, module::Module, nn::{Linear, LinearConfig}, tensor::{Device, Tensor}};
//! # use burn_bnn::prelude::*;
//! # #[derive(Module, Debug)]
//! # struct Net { hidden: Linear, out: Linear }
//! # impl Net {
//! #     fn new(device: &Device) -> Self {
//! #         Self { hidden: LinearConfig::new(1, 8).init(device), out: LinearConfig::new(8, 1).init(device) }
//! #     }
//! #     fn forward(&self, x: Tensor<2>) -> Tensor<2> {
//! #         self.out.forward(burn::tensor::activation::tanh(self.hidden.forward(x)))
//! #     }
//! # }
//! # fn main() -> anyhow::Result<()> {
//! # let device = Device::flex();
//! # let x = Tensor::<2>::from_floats([[-1.0], [-0.5], [0.0], [0.5], [1.0]], &device);
//! # let y = Tensor::<2>::from_floats([[-0.8], [-0.5], [0.1], [0.4], [0.9]], &device);
//! # let head = Likelihood::GaussianFixed { sigma: 0.1 };
//! # let likelihood = HeadLikelihood::new(head, x.clone(), y.clone(), |net: &Net, x| net.forward(x))?;
//! # let posterior = ModulePosterior::new(Net::new(&device), likelihood, &PriorSpec::uniform(Prior::Normal { scale: 1.0 }), &device)?;
//! let dir = tempfile::tempdir()?;
//! let config = ModuleRunConfig::new()
//!     .with_members(2)
//!     .with_ensemble(MapEnsembleConfig::new().with_steps(200))
//!     .with_sampler(SamplerSection::new().with_warmup(30).with_draws(20).with_algorithm(NutsConfig::new().with_max_tree_depth(5).into()));
//! let run = ModuleRun::of_posterior(config, posterior, dir.path())?;
//! run.run(module_starts(2, 7, &device, Net::new))?;
//!
//! let thetas = run.draws()?.concat();
//! let outputs = predict_with_draws(&Net::new(&device), &thetas, |net| net.forward(x.clone()))?;
//! let metrics = run.evaluate(head, outputs, &host_rows(&y), 1)?; // and summary.json
//! assert!(metrics.lppd.is_finite());
//! assert!(dir.path().join("draws_chain_1.csv").exists());
//! # Ok(()) }
//! ```
//!
//! ## 3. The built-in MLP pipeline (`bnn run` as a library)
//!
//! [`pipeline::DeiMcmc`] runs the whole DEI-MCMC job for the built-in MLP on a named benchmark,
//! a CSV file or rows in memory ([`data::Dataset::from_rows`]): ensemble, chains, posterior
//! predictive, metrics against the deep ensemble and a linear model, diagnostics. Its config is
//! [`pipeline::RunConfig`], the same sections as `run.toml`.
//!
//! ```
//! use burn_bnn::prelude::*;
//! # fn main() -> anyhow::Result<()> {
//! let dir = tempfile::tempdir()?;
//! let config = RunConfig::new()
//!     .with_data(DataSection::new().with_dataset("cos2x".into()))
//!     .with_model(ModelSection::new().with_hidden(vec![8]))
//!     .with_ensemble(EnsembleSection::new().with_members(2).with_epochs(200).with_learning_rate(0.01))
//!     .with_sampler(SamplerSection::new().with_warmup(30).with_draws(20).with_algorithm(NutsConfig::new().with_max_tree_depth(5).into()));
//! if let RunOutcome::Finished(report) = DeiMcmc::new(config, dir.path())?.run()? {
//!     let summary = &report.evaluation.summary;
//!     println!("test LPPD {:.3} (deep ensemble {:?})", summary.lppd, summary.de_lppd);
//! }
//! # Ok(()) }
//! ```
//!
//! ## 4. MILE: MCLMC from the members
//!
//! MILE (Sommer et al. 2025) trains the members with AdamW and early stopping, then runs
//! unadjusted MCLMC from each: [`pipeline::RunConfig::with_mile`] and
//! [`pipeline::RunConfig::with_mile_sampling`] set the recipe and its budget (shrunk here).
//!
//! ```
//! use burn_bnn::prelude::*;
//! # fn main() -> anyhow::Result<()> {
//! let dir = tempfile::tempdir()?;
//! let mut config = RunConfig::new()
//!     .with_data(DataSection::new().with_dataset("cos2x".into()))
//!     .with_model(ModelSection::new().with_hidden(vec![8]))
//!     .with_mile()
//!     .with_mile_sampling();
//! config.ensemble = config.ensemble.with_members(2).with_epochs(30);
//! config.sampler = config.sampler.with_warmup(300).with_draws(100).with_thin(5).with_checkpoint_every(100);
//! let run = DeiMcmc::new(config, dir.path())?;
//! assert!(matches!(run.run()?, RunOutcome::Finished(_)));
//! # Ok(()) }
//! ```
//!
//! ## Errors
//!
//! Library functions return typed errors (`thiserror`) whose sources are chained: a failed
//! write keeps its `std::io::Error`, a log density's error says whether it is recoverable. The
//! pipeline's multi-stage calls return `anyhow::Result` with context naming the file or key.

pub use bnn_data as data;
pub use bnn_diagnostics as diagnostics;
pub use bnn_model as model;
pub use bnn_pipeline as pipeline;
pub use bnn_plot as plot;
pub use bnn_sampler as sampler;
pub use burn;

/// A dataset's inputs and targets as `[rows, features]` and `[rows, targets]` f32 tensors on
/// `device`, ready for a module's `forward` and a [`model::HeadLikelihood`].
pub fn dataset_tensors(
    dataset: &data::Dataset,
    device: &burn::tensor::Device,
) -> (burn::tensor::Tensor<2>, burn::tensor::Tensor<2>) {
    let tensor = |m: &data::Matrix| {
        let values = burn::tensor::TensorData::new(m.data.clone(), [m.rows, m.cols]);
        burn::tensor::Tensor::<2>::from_data(values.convert::<f32>(), device)
    };
    (tensor(&dataset.x), tensor(&dataset.y))
}

/// The items of the four uses in the crate documentation.
pub mod prelude {
    pub use crate::dataset_tensors;
    pub use bnn_data::Dataset;
    pub use bnn_model::{
        flatten, host_rows, layout_of, module_starts, predict_with_draws, AutodiffLogDensity,
        HeadLikelihood, Likelihood, ModuleLikelihood, ModulePosterior, ParameterLayout,
        PredictiveMetrics, Prior, PriorSpec,
    };
    pub use bnn_pipeline::{
        DataSection, DeiMcmc, EnsembleSection, MapEnsembleConfig, ModelSection, ModuleRun,
        ModuleRunConfig, PrintStages, RunConfig, RunOutcome, SamplerSection,
    };
    pub use bnn_sampler::{
        ChainStart, FnLogDensity, HmcConfig, LogDensity, LogDensityError, MamsConfig, MclmcConfig,
        NutsConfig, SamplerConfig,
    };
}

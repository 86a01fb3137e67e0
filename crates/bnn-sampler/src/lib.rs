//! Sampling-based inference for Bayesian neural networks: HMC, NUTS and random-walk Metropolis
//! kernels, Stan-style warmup, and a runner for many chains (threaded or batched).
//!
//! Layout: `log_density` is the one interface a posterior implements; `integrator`, `uturn`,
//! `trajectory` are the parts NUTS is built from; `nuts`, `hmc`, `random_walk` are the kernels
//! (`init(position) -> state`, `step(rng, state, params) -> (state, info)`); `hmc` and
//! `batched_nuts` also advance C chains in lockstep with one `[C, D]` density call per leapfrog
//! step (`BatchKernel`, the GPU-friendly mode, same draws); `adaptation` holds the warmup
//! pieces; `sampler` runs chains and hands draws to a `DrawSink`.
//!
//! ```no_run
//! use bnn_sampler::{ChainStart, NutsConfig, SamplerConfig};
//! # fn run(posterior: &impl bnn_sampler::LogDensity, ensemble: Vec<Vec<f64>>) -> Result<(), bnn_sampler::SamplerError> {
//! let sampler = SamplerConfig::new(NutsConfig::new().with_target_accept(0.8).into())
//!     .with_num_warmup(1000)
//!     .with_num_draws(1000)
//!     .with_seed(42)
//!     .init()?;
//! let starts: Vec<ChainStart> = ensemble.into_iter().map(ChainStart::at).collect();
//! let draws = sampler.sample(posterior, &starts)?;
//! let first_coordinate = draws.coordinate(0); // one Vec per chain
//! # Ok(()) }
//! ```

pub mod adaptation;
pub mod batched_nuts;
pub mod chain;
pub mod draw_sink;
pub mod draw_stats;
pub mod error;
pub mod hmc;
pub mod integrator;
pub mod kernel;
pub mod log_density;
pub mod mass_matrix;
pub mod nuts;
pub mod overhead;
pub mod random_walk;
pub mod sampler;
pub mod summation;
mod trajectory;
pub mod uturn;

pub use adaptation::dual_averaging::DualAveraging;
pub use adaptation::step_size_search::find_reasonable_step_size;
pub use adaptation::warmup::{WarmupConfig, WarmupState};
pub use adaptation::welford::WelfordVariance;
pub use adaptation::window_schedule::WindowSchedule;
pub use batched_nuts::BatchedNuts;
pub use chain::{chain_rng, ChainRng, ChainStart, ChainState};
pub use draw_sink::{ChainDraws, CollectedDraws, Draw, DrawSink, SinkError};
pub use draw_stats::DrawStats;
pub use error::{SamplerError, StartError};
pub use hmc::{Hmc, HmcConfig};
pub use integrator::PhasePoint;
pub use kernel::{BatchChain, BatchKernel, Kernel, KernelState, StepParams};
pub use log_density::{for_each_row, LogDensity, LogDensityError};
pub use mass_matrix::DiagonalMassMatrix;
pub use nuts::{Nuts, NutsConfig};
pub use overhead::{measure_sampler_overhead, OverheadMeasurement};
pub use random_walk::{RandomWalk, RandomWalkConfig};
pub use sampler::{AlgorithmConfig, RunStatus, Sampler, SamplerConfig};

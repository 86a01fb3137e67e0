//! Sampling-based inference for Bayesian neural networks: HMC, NUTS, MCLMC, MAMS and
//! random-walk Metropolis kernels, Stan-style warmup, and a runner for many chains (threaded or batched).
//!
//! Layout, a folder per kind of part:
//! - `log_density`: the one interface a posterior implements (value and gradient, batched;
//!   value only);
//! - `metric/`: the `Metric` seam (momentum draw, velocity, kinetic energy, partial refresh at a
//!   point), the adapted `DiagonalMassMatrix` and `DenseMetric` (a Cholesky-factored `G`, for
//!   the Riemannian samplers);
//! - `dynamics/`: `PhasePoint`, the resumable `Integrator` seam, the leapfrog, surrogate-force
//!   leaves (`surrogate`) and pseudo-marginal integrators (`pseudo_marginal`), and `Lockstep`,
//!   the driver that steps many chains with one batched density call per round;
//! - `trajectory/`: the NUTS tree (multinomial sampling, U-turn checks);
//! - `kernels/`: NUTS, surrogate-gradient NUTS (leaves moved by a surrogate force, weighted by
//!   the true H), static HMC, MCLMC (unadjusted microcanonical Langevin), MAMS (its
//!   Metropolis-adjusted form), random-walk Metropolis (`init(position) -> state`, `step(rng, state, params) -> (state, info)`; NUTS,
//!   HMC, MCLMC and MAMS also as `BatchKernel`s);
//! - `adaptation/`: `TunedParams`, the `Tuner` seam, Stan's windowed warmup with its pieces and
//!   the microcanonical samplers' tuners;
//! - `sampler_settings`: the `SamplerSettings` trait every registered sampler's config
//!   implements (validation, defaults, budget, warmup, statistics columns, how its chains run);
//! - `sampler`: runs chains (threaded or batched) and hands draws to a `DrawSink`, with the
//!   kernel an `AlgorithmConfig` names (the list in `kernels/mod.rs`) or one built by the caller
//!   (`Sampler::run_kernel`: surrogate NUTS, pseudo-marginal NUTS and HMC).
//!
//! A new sampler is a file in `kernels/` composed from these parts plus one line in the list of
//! samplers in `kernels/mod.rs` (see `kernels`).
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
mod algorithm_config;
pub mod chain;
pub mod draw_sink;
pub mod draw_stats;
pub mod dynamics;
pub mod error;
pub mod kernels;
pub mod log_density;
pub mod metric;
pub mod overhead;
mod phase_point;
pub mod sampler;
pub mod sampler_settings;
pub mod summation;
mod trajectory;

pub use adaptation::dual_averaging::DualAveraging;
pub use adaptation::mams_tuner::MamsTuner;
pub use adaptation::mclmc_tuner::MclmcTuner;
pub use adaptation::stan_windows::{MetricEstimate, WarmupConfig, WarmupState};
pub use adaptation::step_size_search::{find_reasonable_step_size, SearchRule, StepSizeSearch};
pub use adaptation::welford::WelfordVariance;
pub use adaptation::window_schedule::WindowSchedule;
pub use adaptation::{TunedParams, Tuner};
pub use chain::{chain_rng, ChainRng, ChainStart, ChainState};
pub use draw_sink::{ChainDraws, CollectedDraws, Draw, DrawSink, SinkError};
pub use draw_stats::{kernel_stat, DrawStats, KernelStats, StatColumn, StatKind};
pub use dynamics::pseudo_marginal::{PseudoMarginalLeapfrog, PseudoMarginalScheme};
pub use dynamics::surrogate::{
    ErrorMonitor, EvaluationCounts, LeafForce, MonitorConfig, SurrogateGradient, SurrogateLeapfrog,
    SurrogateMode,
};
pub use dynamics::{Evaluation, GradientKind, Integrator, Leapfrog, Lockstep, PhasePoint, Stepper};
pub use error::{SamplerError, StartError};
pub use kernels::{
    msd_transition, BatchChain, BatchKernel, BatchedNuts, Hmc, HmcConfig, Kernel, KernelCarry,
    KernelState, Mams, MamsConfig, Mclmc, MclmcConfig, MetricAt, Msd, MsdConfig, MsdInfo,
    MsdParams, MsdState, Nuts, NutsConfig, RandomWalk, RandomWalkConfig, RiemannianDensity,
    StepParams, SurrogateCounts, SurrogateNuts, SurrogateNutsConfig, SURROGATE_NUTS_STATS,
};
pub use log_density::{for_each_row, LogDensity, LogDensityError};
pub use metric::{DenseMetric, DiagonalMassMatrix, Metric};
pub use overhead::{measure_sampler_overhead, OverheadMeasurement};
pub use sampler::{AlgorithmConfig, RunStatus, Sampler, SamplerConfig};
pub use sampler_settings::{Budget, ChainRunner, SamplerSettings};
pub use trajectory::uturn;

//! Sampling-based inference for Bayesian neural networks: HMC, NUTS, MCLMC, MAMS, MSD and
//! random-walk Metropolis kernels, Stan-style warmup, and a runner for many chains (threaded or
//! batched).
//!
//! Layout, a folder per kind of part:
//! - `log_density`: the one interface a posterior implements (value and gradient, batched;
//!   value only), and beside it `riemannian_density`, the position-dependent metric a posterior
//!   may offer for manifold stochastic dynamics;
//! - `metric/`: the `Metric` seam (momentum draw, velocity, kinetic energy, partial refresh at a
//!   point), the adapted `DiagonalMassMatrix`, and `MetricAt`, a position-dependent `G(θ)`
//!   factored at one point (`riemannian`);
//! - `dynamics/`: `PhasePoint`, the resumable `Integrator` seam, the leapfrog, surrogate-force
//!   leaves (`surrogate`), pseudo-marginal integrators (`pseudo_marginal`), isokinetic paths
//!   (`isokinetic`, `isokinetic_path`), the generalized leapfrog with its fixed-point solver
//!   (`generalized_leapfrog`, `fixed_point`), and `Lockstep`, the driver that steps many chains
//!   (integrator steps or isokinetic paths) with one batched density call per round;
//! - `trajectory/`: the NUTS tree (multinomial sampling, U-turn checks);
//! - `kernels/`: NUTS, surrogate-gradient NUTS (leaves moved by a surrogate force, weighted by
//!   the true H), static HMC, MCLMC (unadjusted microcanonical Langevin), MAMS (its
//!   Metropolis-adjusted form), MSD (manifold stochastic dynamics), random-walk Metropolis
//!   (`init(position) -> state`, `step(rng, state, params) -> (state, info)`; NUTS, HMC, MCLMC
//!   and MAMS also as `BatchKernel`s);
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
mod ensemble_run;
pub mod error;
mod fn_density;
pub mod kernels;
pub mod log_density;
pub mod metric;
pub mod overhead;
mod phase_point;
pub mod riemannian_density;
pub mod sampler;
pub mod sampler_settings;
pub mod summation;
mod trajectory;

pub use adaptation::dual_averaging::DualAveraging;
pub use adaptation::ensemble_tuner::{BurnInEnd, EnsembleMember, EnsemblePhase, EnsembleTuner};
pub use adaptation::gradient_noise::{GradientNoise, SmileTuner};
pub use adaptation::mams_tuner::MamsTuner;
pub use adaptation::mclmc_tuner::MclmcTuner;
pub use adaptation::stan_windows::{MetricEstimate, WarmupConfig, WarmupState};
pub use adaptation::stationary_warmup::{
    CheckOutcome, StationarityConfig, StationaryWarmup, WarmupCheck, WarmupEnd, WarmupPolicy,
};
pub use adaptation::step_size_search::{find_reasonable_step_size, SearchRule, StepSizeSearch};
pub use adaptation::welford::WelfordVariance;
pub use adaptation::window_schedule::WindowSchedule;
pub use adaptation::{TunedParams, Tuner};
pub use chain::{chain_rng, ChainRng, ChainStart, ChainState};
pub use draw_sink::{ChainDraws, CollectedDraws, Draw, DrawSink, SinkError};
pub use draw_stats::{kernel_stat, DrawStats, KernelStats, StatColumn, StatKind};
pub use dynamics::isokinetic_path::{IsokineticPath, PathIntegrator, MCLACHLAN_B1};
pub use dynamics::pseudo_marginal::{PseudoMarginalLeapfrog, PseudoMarginalScheme};
pub use dynamics::surrogate::{
    ErrorMonitor, EvaluationCounts, LeafForce, MonitorConfig, SurrogateGradient, SurrogateLeapfrog,
    SurrogateMode,
};
pub use dynamics::{
    Evaluation, GradientKind, Integrator, Leapfrog, Lockstep, PhasePoint, Stepper, Walker,
};
pub use error::{SamplerError, StartError};
pub use fn_density::FnLogDensity;
pub use kernels::{
    msd_transition, try_msd_transition, BatchChain, BatchKernel, BatchedNuts, Hmc, HmcConfig,
    Kernel, KernelState, LapsConfig, Mams, MamsConfig, Mclmc, MclmcConfig, Msd, MsdConfig, MsdInfo,
    MsdParams, MsdState, Nuts, NutsConfig, RandomWalk, RandomWalkConfig, Smile, SmileConfig,
    StepParams, SurrogateCounts, SurrogateNuts, SurrogateNutsConfig, SURROGATE_NUTS_STATS,
};
pub use log_density::{
    for_each_row, recover, LogDensity, LogDensityError, LogDensityErrorKind, MinibatchDensity,
};
pub use metric::{DiagonalMassMatrix, Metric, MetricAt};
pub use overhead::{measure_ensemble_tuning, measure_sampler_overhead, OverheadMeasurement};
pub use riemannian_density::RiemannianDensity;
pub use sampler::{AlgorithmConfig, RunStatus, Sampler, SamplerConfig};
pub use sampler_settings::{Budget, ChainRunner, SamplerSettings};
pub use trajectory::uturn;

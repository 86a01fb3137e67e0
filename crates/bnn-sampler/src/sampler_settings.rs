//! The one trait a sampler's settings implement to be run by `Sampler` (nuts-rs's `Settings`
//! seam): what the runner, the warmup, the draw files and the command line need to know about a
//! kernel, asked of the kernel instead of matched on its name.
//!
//! A new sampler is its file in `kernels/` (its config implementing this trait, its kernel
//! implementing `Kernel` and maybe `BatchKernel`) plus one line in `algorithm_config.rs`'s list.

use std::fmt::Debug;
use std::ops::Range;
use std::sync::atomic::AtomicBool;

use crate::adaptation::stan_windows::{WarmupConfig, WarmupState};
use crate::adaptation::{TunedParams, Tuner};
use crate::chain::ChainState;
use crate::draw_sink::DrawSink;
use crate::draw_stats::StatColumn;
use crate::error::SamplerError;
use crate::kernels::{BatchKernel, Kernel};
use crate::log_density::LogDensity;
use crate::sampler::Sampler;

/// How long a chain runs when the user names only the sampler: warmup iterations, sampling
/// iterations, and every how-many-th sampling iteration is kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    pub warmup: usize,
    pub draws: usize,
    pub thin: usize,
}

impl Budget {
    /// DEI-MCMC's budget (Sommer et al. 2025, Table 3): 100 warmup and 1000 sampling
    /// iterations per chain started at a trained ensemble member.
    pub const DEI_MCMC: Budget = Budget {
        warmup: 100,
        draws: 1000,
        thin: 1,
    };
}

/// A sampler's settings: validation, defaults, warmup and how its chains run.
pub trait SamplerSettings: Clone + Debug + Send + Sync {
    /// The sampler's name on the command line and in run files (`nuts`, `mclmc`, ...).
    const NAME: &'static str;

    /// Refuses settings the kernel cannot run with; the message names the setting.
    fn validate(&self) -> Result<(), SamplerError>;

    /// The acceptance statistic the step-size adaptation aims for.
    fn target_accept(&self) -> f64;

    /// Whether the kernel integrates Hamiltonian dynamics under the adapted diagonal metric, so
    /// the warmup may pick an initial step size with the one-leapfrog-step heuristic.
    fn uses_leapfrog(&self) -> bool {
        true
    }

    /// The step size a chain starts from when none is given (then, for leapfrog kernels, the
    /// heuristic search).
    fn default_step_size(&self, dim: usize) -> f64 {
        let _ = dim;
        1.0
    }

    /// The budget of a chain started at a trained network when the user sets none.
    fn default_budget(&self) -> Budget {
        Budget::DEI_MCMC
    }

    /// The smallest dimension the kernel's dynamics work in.
    fn min_dim(&self) -> usize {
        1
    }

    /// Whether the chains can run batched (`SamplerConfig::batched`).
    fn supports_batched(&self) -> bool {
        false
    }

    /// Whether the chains are tuned together from the whole ensemble's statistics (LAPS), so a
    /// chain's draws depend on every other chain of the run: its chains cannot run as separate
    /// shards, and a resumed run continues them all from one common iteration.
    fn tunes_across_chains(&self) -> bool {
        false
    }

    /// Whether this kernel's warmup may end by the stationary policy (`WarmupPolicy::Stationary`,
    /// the default of DEI-MCMC runs): kernels with Stan's windows whose step size, tuned where
    /// the chain starts, diverges where it goes (NUTS).
    fn supports_stationary_warmup(&self) -> bool {
        false
    }

    /// The chain's warmup: the tuner, and any tuned parameter it starts from besides the step
    /// size and metric already in `params`. Default: Stan's windowed warmup at `target_accept`.
    fn start_warmup(
        &self,
        warmup: &WarmupConfig,
        num_warmup: usize,
        dim: usize,
        params: &mut TunedParams,
    ) -> Tuner {
        Tuner::StanWindows(WarmupState::new(
            warmup,
            num_warmup,
            dim,
            self.target_accept(),
            params.step_size,
        ))
    }

    /// The statistics the kernel reports in `DrawStats::kernel`, in order.
    fn stat_columns(&self) -> &'static [StatColumn] {
        &[]
    }

    /// Runs the chains with this sampler's kernel, threaded or batched.
    fn run<L: LogDensity + ?Sized>(&self, chains: ChainRunner<'_, L>) -> Result<(), SamplerError>;
}

/// The chains of one `Sampler::run` call, handed to a sampler's settings to run with its kernel.
pub struct ChainRunner<'a, L: ?Sized> {
    pub(crate) sampler: &'a Sampler,
    pub(crate) density: &'a L,
    pub(crate) chains: &'a mut [ChainState],
    pub(crate) recorded: &'a Range<usize>,
    pub(crate) sink: &'a mut (dyn DrawSink + Send),
    pub(crate) stop: &'a AtomicBool,
}

impl<L: LogDensity + ?Sized> ChainRunner<'_, L> {
    /// Whether the run asked for lockstep chains (one `[C, D]` evaluation per step).
    pub fn batched(&self) -> bool {
        self.sampler.config().batched
    }

    /// The density the chains sample.
    pub fn density(&self) -> &L {
        self.density
    }

    /// The dimension of the density.
    pub fn dim(&self) -> usize {
        self.density.dim()
    }

    /// Chains on worker threads, each worker with its own kernel from `make_kernel`.
    pub fn threaded<K, F>(self, make_kernel: F) -> Result<(), SamplerError>
    where
        K: Kernel,
        F: Fn() -> Result<K, SamplerError> + Sync,
    {
        self.sampler.run_threaded(
            self.density,
            make_kernel,
            self.chains,
            self.recorded,
            self.sink,
            self.stop,
        )
    }

    /// All chains as one ensemble tuned together (LAPS): `burn_in` steps them while the
    /// ensemble burns in, `adjusted` after; threaded in groups, or one batch when batched.
    pub fn ensemble(
        self,
        burn_in: crate::kernels::Mclmc,
        adjusted: crate::kernels::Mams,
        start_jitter: f64,
    ) -> Result<(), SamplerError> {
        self.sampler.run_ensemble(
            self.density,
            burn_in,
            adjusted,
            start_jitter,
            self.chains,
            self.recorded,
            self.sink,
            self.stop,
        )
    }

    /// All chains in lockstep on this thread with one batch kernel.
    pub fn lockstep<K: BatchKernel>(self, kernel: K) -> Result<(), SamplerError> {
        self.sampler.run_batched(
            self.density,
            kernel,
            self.chains,
            self.recorded,
            self.sink,
            self.stop,
        )
    }
}

//! Static-length Hamiltonian Monte Carlo, one chain or a `[C, D]` batch of chains in lockstep.

use bnn_config_derive::Config;
use rand::Rng;

use crate::draw_stats::DrawStats;
use crate::dynamics::{GradientKind, Integrator, Leapfrog, Lockstep, PhasePoint, Stepper};
use crate::error::SamplerError;
use crate::kernels::{BatchChain, BatchKernel, Kernel, KernelState, StepParams};
use crate::log_density::{LogDensity, LogDensityError};
use crate::metric::Metric;
use crate::sampler_settings::{ChainRunner, SamplerSettings};

/// Configuration of the HMC kernel and of its step-size adaptation target.
#[derive(Config, Debug)]
pub struct HmcConfig {
    /// Target Metropolis acceptance rate δ for the step-size adaptation. For piecewise-linear
    /// activations (ReLU) use about 0.45 (see `NutsConfig::target_accept`).
    #[config(default = 0.8)]
    pub target_accept: f64,
    /// Number of leapfrog steps `L` per transition (ignored when `trajectory_length` is set).
    #[config(default = 16)]
    pub num_steps: usize,
    /// Integration time `λ`; each transition then takes `ceil(λ / ε)` steps, so the trajectory
    /// length stays fixed while the step size adapts.
    pub trajectory_length: Option<f64>,
    /// Uniform jitter `j ∈ [0, 1)`: the number of steps (or `λ`) is multiplied by
    /// `U(1 - j, 1 + j)` each transition, which breaks the periodicities that make fixed-length
    /// HMC resonate on near-Gaussian targets (Neal 2011, §5.4.2.2).
    #[config(default = 0.0)]
    pub jitter: f64,
    /// Upper bound on steps per transition, so a tiny step size in early warmup cannot stall.
    #[config(default = 1024)]
    pub max_num_steps: usize,
    /// Partial momentum refresh angle `α ∈ (0, π/2]`; `None` draws a fresh momentum every time
    /// (`α = π/2` is the same chain).
    pub refresh_angle: Option<f64>,
    /// Energy error `H - H0` above which a trajectory is stopped and flagged divergent.
    #[config(default = 1000.0)]
    pub max_energy_error: f64,
}

impl HmcConfig {
    pub(crate) fn validate(&self) -> Result<(), SamplerError> {
        let invalid = |message: String| Err(SamplerError::InvalidConfig(message));
        if !(self.target_accept > 0.0 && self.target_accept < 1.0) {
            return invalid(format!(
                "HMC target_accept must lie in (0, 1), got {}",
                self.target_accept
            ));
        }
        if self.num_steps == 0 || self.max_num_steps == 0 {
            return invalid("HMC num_steps and max_num_steps must be at least 1".into());
        }
        if let Some(length) = self.trajectory_length {
            if !(length > 0.0 && length.is_finite()) {
                return invalid(format!(
                    "HMC trajectory_length must be positive and finite, got {length}"
                ));
            }
        }
        if !(0.0..1.0).contains(&self.jitter) {
            return invalid(format!(
                "HMC jitter must lie in [0, 1), got {}",
                self.jitter
            ));
        }
        if let Some(angle) = self.refresh_angle {
            if !(angle > 0.0 && angle <= std::f64::consts::FRAC_PI_2) {
                return invalid(format!(
                    "HMC refresh_angle must lie in (0, π/2], got {angle}"
                ));
            }
        }
        if !(self.max_energy_error > 0.0) {
            return invalid(format!(
                "HMC max_energy_error must be positive, got {}",
                self.max_energy_error
            ));
        }
        Ok(())
    }

    /// Builds the kernel with the leapfrog; buffers are sized on first use and reused afterwards.
    pub fn init(&self) -> Result<Hmc, SamplerError> {
        self.init_with(Leapfrog)
    }

    /// Builds the kernel with another integrator (each of the `L` steps is one step of it).
    pub fn init_with<I: Integrator>(&self, integrator: I) -> Result<Hmc<I>, SamplerError> {
        self.validate()?;
        Ok(Hmc {
            config: self.clone(),
            integrator,
            members: Vec::new(),
            running: Vec::new(),
            lockstep: Lockstep::default(),
            stats: Vec::with_capacity(1),
        })
    }
}

impl SamplerSettings for HmcConfig {
    const NAME: &'static str = "hmc";

    fn validate(&self) -> Result<(), SamplerError> {
        HmcConfig::validate(self)
    }

    fn target_accept(&self) -> f64 {
        self.target_accept
    }

    fn supports_batched(&self) -> bool {
        true
    }

    fn run<L: LogDensity + ?Sized>(&self, chains: ChainRunner<'_, L>) -> Result<(), SamplerError> {
        if chains.batched() {
            chains.lockstep(self.init()?)
        } else {
            chains.threaded(|| self.init())
        }
    }
}

/// One chain's trajectory in flight.
#[derive(Clone, Debug)]
struct Member<I> {
    integrator: I,
    point: PhasePoint,
    /// Momentum at the start, to be negated on rejection under partial refresh.
    initial_momentum: Vec<f64>,
    initial_energy: f64,
    num_steps: usize,
    steps_taken: usize,
}

/// The HMC kernel: settings plus reusable per-chain trajectories.
///
/// Each transition draws a momentum, takes `L` integrator steps and applies a Metropolis
/// correction (Duane et al. 1987; Neal 2011, §5.3.2). With `refresh_angle` set the momentum is
/// only partially refreshed, `p ← p cos α + n sin α` with `n ~ N(0, M)` (Horowitz 1991's
/// generalized HMC, the momentum update of Zlochin & Baram's manifold stochastic dynamics). That
/// chain is reversible only if a rejected proposal also negates the momentum: the proposal is the
/// involution `(q, p) → (q', -p')` followed by a momentum flip, so acceptance keeps `p'` and
/// rejection leaves `-p`. The kernel does exactly that.
///
/// One chain and a batch run the same code: all chains step together through `Lockstep` (one
/// `[C, D]` density call per step), each with its own step size, number of steps, random stream
/// and accept/reject decision, so chain `c` of a batch makes exactly the moves it would make
/// alone (given a log density that is deterministic per row). A chain whose trajectory ended
/// (its steps done, or a divergence) leaves the batch.
#[derive(Clone, Debug)]
pub struct Hmc<I = Leapfrog> {
    config: HmcConfig,
    integrator: I,
    members: Vec<Member<I>>,
    /// Chains whose trajectory is still running.
    running: Vec<usize>,
    lockstep: Lockstep,
    /// Reused by the single-chain `step`.
    stats: Vec<DrawStats>,
}

impl<I: Integrator> Hmc<I> {
    fn num_steps<R: Rng + ?Sized>(&self, rng: &mut R, step_size: f64) -> usize {
        let base = match self.config.trajectory_length {
            Some(length) => length / step_size,
            None => self.config.num_steps as f64,
        };
        let factor = if self.config.jitter > 0.0 {
            let u: f64 = rng.random();
            1.0 + self.config.jitter * (2.0 * u - 1.0)
        } else {
            1.0
        };
        let steps = (base * factor).ceil();
        if steps.is_finite() {
            (steps as usize).clamp(1, self.config.max_num_steps)
        } else {
            self.config.max_num_steps
        }
    }

    /// Draws the momentum (fresh or partially refreshed) and the number of steps of one chain.
    fn begin<R: Rng + ?Sized>(&self, member: &mut Member<I>, chain: &mut BatchChain<'_, R>) {
        let dim = chain.state.dim();
        if member.point.dim() != dim {
            member.point = PhasePoint::new(dim);
        }
        let point = &mut member.point;
        point.reset_to(
            &chain.state.position,
            &chain.state.gradient,
            chain.state.log_density,
        );
        let metric: &dyn Metric = chain.params.metric;
        let mut rng = &mut *chain.rng;
        match (self.config.refresh_angle, chain.state.momentum.as_ref()) {
            (Some(angle), Some(previous)) if previous.len() == dim => {
                point.momentum.copy_from_slice(previous);
                metric.refresh_momentum(point, angle.cos(), angle.sin(), &mut rng);
            }
            _ => metric.sample_momentum(point, &mut rng),
        }
        metric.update_kinetic_energy(point);
        member.initial_momentum.clone_from(&point.momentum);
        member.initial_energy = point.hamiltonian();
        member.integrator.begin_transition(point);
        member.num_steps = self.num_steps(chain.rng, chain.params.step_size);
        member.steps_taken = 0;
    }

    /// Metropolis test at the end of a chain's trajectory (Neal 2011, eq. 5.9).
    fn finish<R: Rng + ?Sized>(
        &self,
        member: &Member<I>,
        chain: &mut BatchChain<'_, R>,
        divergent: bool,
    ) -> DrawStats {
        let point = &member.point;
        let initial_energy = member.initial_energy;
        let energy_error = point.hamiltonian() - initial_energy;
        let accept_prob = if divergent {
            0.0
        } else {
            (-energy_error).exp().min(1.0)
        };
        let u: f64 = chain.rng.random();
        let accepted = !divergent && u < accept_prob;
        let state = &mut *chain.state;
        let partial = self.config.refresh_angle.is_some();
        let energy = if accepted {
            state.position.copy_from_slice(&point.position);
            state.gradient.copy_from_slice(&point.gradient);
            state.log_density = point.log_density;
            if partial {
                set_momentum(&mut state.momentum, &point.momentum, 1.0);
            }
            point.hamiltonian()
        } else {
            if partial {
                set_momentum(&mut state.momentum, &member.initial_momentum, -1.0);
            }
            initial_energy
        };
        DrawStats {
            log_density: state.log_density,
            accept_stat: accept_prob,
            step_size: chain.params.step_size,
            tree_depth: 0,
            n_leapfrog: member.steps_taken as u32,
            divergent,
            energy,
            energy_error,
            ..DrawStats::default()
        }
    }
}

fn set_momentum(slot: &mut Option<Vec<f64>>, momentum: &[f64], sign: f64) {
    let target = slot.get_or_insert_with(Vec::new);
    target.clear();
    target.extend(momentum.iter().map(|p| sign * p));
}

impl<I: Integrator> BatchKernel for Hmc<I> {
    /// One transition of every chain in `chains`, all integrator steps in lockstep.
    ///
    /// Random numbers per chain, in order: the momentum normals (`D`; a partial refresh draws
    /// its `D` normals the same way), one uniform for the jitter if enabled, one uniform for the
    /// Metropolis test.
    fn step_batch<L: LogDensity + ?Sized, R: Rng + Send + ?Sized>(
        &mut self,
        density: &L,
        chains: &mut [BatchChain<'_, R>],
        stats: &mut Vec<DrawStats>,
    ) -> Result<(), LogDensityError> {
        stats.clear();
        stats.resize(chains.len(), DrawStats::default());
        let mut members = std::mem::take(&mut self.members);
        let integrator = &self.integrator;
        members.resize_with(chains.len(), || Member {
            integrator: integrator.clone(),
            point: PhasePoint::new(0),
            initial_momentum: Vec::new(),
            initial_energy: 0.0,
            num_steps: 0,
            steps_taken: 0,
        });
        self.running.clear();
        for (c, (member, chain)) in members.iter_mut().zip(chains.iter_mut()).enumerate() {
            self.begin(member, chain);
            self.running.push(c);
        }
        while !self.running.is_empty() {
            let running = &self.running;
            let mut steppers: Vec<Stepper<'_, I>> = members
                .iter_mut()
                .zip(chains.iter())
                .enumerate()
                .filter(|(c, _)| running.binary_search(c).is_ok())
                .map(|(_, (member, chain))| Stepper {
                    integrator: &mut member.integrator,
                    point: &mut member.point,
                    metric: chain.params.metric,
                    step_size: chain.params.step_size,
                })
                .collect();
            // A fatal error drops the members' buffers with the transition: the run stops.
            self.lockstep.step(density, &mut steppers)?;
            drop(steppers);
            let max_energy_error = self.config.max_energy_error;
            let mut ended = Vec::new();
            self.running.retain(|&c| {
                let member = &mut members[c];
                member.steps_taken += 1;
                let energy = member.point.hamiltonian();
                let energy_error = energy - member.initial_energy;
                // Divergence: a non-finite energy, or an energy error above the threshold.
                let divergent = !energy.is_finite() || !(energy_error <= max_energy_error);
                let done = divergent || member.steps_taken == member.num_steps;
                if done {
                    ended.push((c, divergent));
                }
                !done
            });
            for (c, divergent) in ended {
                stats[c] = self.finish(&members[c], &mut chains[c], divergent);
            }
        }
        self.members = members;
        Ok(())
    }
}

impl<I: Integrator> Kernel for Hmc<I> {
    fn uses_leapfrog(&self) -> bool {
        true
    }

    fn state_gradient(&self) -> GradientKind {
        self.integrator.gradient_kind()
    }

    fn check_params(&self, params: StepParams<'_>) -> Result<(), SamplerError> {
        self.integrator.check_metric(params.metric)
    }

    fn step<L: LogDensity + ?Sized, R: Rng + Send + ?Sized>(
        &mut self,
        density: &L,
        rng: &mut R,
        mut state: KernelState,
        params: StepParams<'_>,
    ) -> Result<(KernelState, DrawStats), LogDensityError> {
        let mut stats = std::mem::take(&mut self.stats);
        let mut chains = [BatchChain {
            rng,
            state: &mut state,
            params,
        }];
        let result = self.step_batch(density, &mut chains, &mut stats);
        let draw_stats = result.map(|()| stats[0]);
        self.stats = stats;
        Ok((state, draw_stats?))
    }
}
